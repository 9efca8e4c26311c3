/*
 * plot: a line plot with axes, "nice" ticks and a legend, rendered
 * server-side as SVG for the dashboard (the triage curves: x = streams
 * opened, y = coverage). Series are told apart by colour and by marker
 * shape, so the plot reads without colour too. No script, no style
 * attributes (strict Content-Security-Policy), every name escaped, and the
 * same input gives the same bytes.
 */
#ifndef SM_PLOT_H
#define SM_PLOT_H

#include "common/buf.h"

#include <stddef.h>

struct plot_series {
	const char *name;       /* NULL: "series N" */
	const double *x, *y;    /* n points each */
	size_t n;
};

struct plot_opts {
	const char *title, *xlabel, *ylabel;    /* each may be NULL */
	int width, height;                      /* px; <= 0: 640 x 400 (at least 240 x 160) */
	double ymin, ymax;                      /* ymax <= ymin (or not finite): auto from the data */
	int xcount;                             /* x counts things: the axis spans at least 5, whole ticks */
};

/* Append the plot as one <svg class="plot"> element to out: polylines of class "s0".."s7" (cycling
 * with the series index), a marker at each point (a distinct shape per class) holding a <title>
 * "name: x=…, y=…", axes with 5-8 ticks at multiples of 1, 2 or 5 x 10^k (9 where those steps
 * allow nothing between 4 and 9; tick labels of class "xtick" / "ytick"), the labels and a legend. x runs from 0 (or the least x, if negative) to the
 * nice-rounded greatest x; with an auto y range y likewise includes 0. Points with a non-finite
 * coordinate are skipped; points outside a fixed y range are drawn at its edge. Returns 0, or -1
 * (out of memory, out full) with out left as it was. */
int plot_render_svg(const struct plot_series *s, size_t ns, const struct plot_opts *o, struct buf *out);

#endif
