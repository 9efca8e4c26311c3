/* plot: a line plot with nice ticks and a legend, as SVG (see plot.h). */
#include "web/plot.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define NCLASSES 8
#define MAX_INTERVALS 7  /* preferred: at most 8 ticks per axis */
#define LEFT 64
#define RIGHT 16
#define TITLE_H 22
#define TICKS_H 24
#define XLABEL_H 18
#define LEGEND_ROW 16

/* Okabe-Ito-like colours, told apart by most colour-blind readers too. */
static const char *const colours[NCLASSES] = {
	"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#7f7f7f", "#000000",
};

/* Ticks are k * m * 10^e for k in [k0, k1] (k as doubles: integral values). */
struct axis {
	double lo, hi;
	double k0, k1;
	int m, e;
};

static double tick_val(double k, int m, int e)
{
	/* Dividing by an exact power of ten rounds once: 3 * 0.1 would give 0.30000000000000004. */
	return e >= 0 ? k * m * pow(10, e) : k * m / pow(10, -e);
}

/* The smallest step 1, 2 or 5 x 10^e giving at most 7 intervals (8 ticks); when that leaves fewer
 * than 4 intervals and the step before gave 8, that one (the 1-2-5 steps cannot always give 5-8
 * ticks: [0, 14.5] has 0..16 by 2 or 0..15 by 5). Auto: the axis grows to whole steps around
 * [lo, hi]; fixed: the axis is [lo, hi] with the ticks inside. */
static void axis_fit(struct axis *a, double lo, double hi, bool fixed)
{
	static const int ms[3] = { 1, 2, 5 };
	double span = hi - lo, pk0 = 0, pk1 = 0;
	int e, pm = 0, pe = 0;

	if (!isfinite(span) || span > DBL_MAX / 2)
		span = DBL_MAX / 2;
	e = (int)floor(log10(span / MAX_INTERVALS)) - 1;
	for (;; e++) {
		for (int i = 0; i < 3; i++) {
			double s = tick_val(1, ms[i], e), k0, k1;

			if (fixed) {
				k0 = ceil(lo / s - 1e-9);
				k1 = floor(hi / s + 1e-9);
			} else {
				k0 = floor(lo / s + 1e-9);
				k1 = ceil(hi / s - 1e-9);
			}
			if (k1 - k0 == MAX_INTERVALS + 1) {
				pk0 = k0;
				pk1 = k1;
				pm = ms[i];
				pe = e;
				continue;
			}
			if (!(k1 - k0 <= MAX_INTERVALS))
				continue;
			if (k1 - k0 < 4 && pm) {
				k0 = pk0;
				k1 = pk1;
				a->m = pm;
				a->e = pe;
			} else {
				a->m = ms[i];
				a->e = e;
			}
			a->k0 = k0;
			a->k1 = k1;
			a->lo = fixed ? lo : tick_val(k0, a->m, a->e);
			a->hi = fixed ? hi : tick_val(k1, a->m, a->e);
			if (!(a->hi > a->lo)) { /* only with absurd ranges near DBL_MAX */
				a->lo = lo;
				a->hi = hi > lo ? hi : lo + 1;
			}
			return;
		}
	}
}

/* A tick value written exactly from its integers (no printf of doubles, no locale). */
static int put_tick(struct buf *b, double k, int m, int e)
{
	double q = k * m;
	long long iq, p = 1;

	if (fabs(q) >= 1e15 || e > 15 || e < -15)
		return buf_put_double(b, tick_val(k, m, e));
	iq = (long long)q;
	if (iq < 0) {
		if (buf_putc(b, '-'))
			return -1;
		iq = -iq;
	}
	if (e >= 0) {
		if (buf_put_i64(b, iq))
			return -1;
		for (int i = 0; iq && i < e; i++)
			if (buf_putc(b, '0'))
				return -1;
		return 0;
	}
	for (int i = 0; i < -e; i++)
		p *= 10;
	return buf_printf(b, "%lld.%0*lld", iq / p, -e, iq % p);
}

/* A data value for a tooltip: integers as such, else at most 4 decimals. */
static int put_num(struct buf *b, double v)
{
	double a = fabs(v);
	long long t;
	int fr, digits = 4;

	if (a < 1e15 && v == floor(v))
		return buf_put_i64(b, (int64_t)v);
	if (a < 1e-4 || a >= 1e11)
		return buf_put_double(b, v);
	t = llround(a * 1e4);
	fr = (int)(t % 10000);
	if (v < 0 && buf_putc(b, '-'))
		return -1;
	if (buf_put_i64(b, t / 10000))
		return -1;
	if (!fr)
		return 0;
	while (fr % 10 == 0) {
		fr /= 10;
		digits--;
	}
	return buf_printf(b, ".%0*d", digits, fr);
}


static int put_attr(struct buf *b, const char *name, double v)
{
	return buf_puts(b, name) || buf_put_f1(b, v) || buf_putc(b, '"');
}

struct frame {
	struct axis xa, ya;
	double left, top, pw, ph;
};

static double px_x(const struct frame *f, double v)
{
	double p = f->left + (v - f->xa.lo) / (f->xa.hi - f->xa.lo) * f->pw;

	return p < f->left ? f->left : p > f->left + f->pw ? f->left + f->pw : p;
}

static double px_y(const struct frame *f, double v)
{
	double p = f->top + f->ph - (v - f->ya.lo) / (f->ya.hi - f->ya.lo) * f->ph;

	return p < f->top ? f->top : p > f->top + f->ph ? f->top + f->ph : p;
}

/* The opening of marker shape `cls` at (x, y), without its closing '>'; returns the tag to close. */
static const char *put_marker(struct buf *b, int cls, double x, double y, int *rc)
{
	/* Outline shapes, as moves from the centre. */
	static const char *const paths[NCLASSES] = {
		NULL, NULL, "m0,-4l4,7h-8z", "m0,-4.5l4.5,4.5l-4.5,4.5l-4.5,-4.5z", "m0,4l4,-7h-8z",
		"m-4,0h8m-4,-4v8", "m-3,-3l6,6m-6,0l6,-6", NULL,
	};

	switch (cls) {
	case 0:
	case 7:
		*rc = put_attr(b, "<circle cx=\"", x) || put_attr(b, " cy=\"", y) ||
		      buf_puts(b, cls == 7 ? " r=\"3.5\" fill=\"#fff\" stroke-width=\"1.5\"" : " r=\"3.5\"");
		return "circle";
	case 1:
		*rc = put_attr(b, "<rect x=\"", x - 3) || put_attr(b, " y=\"", y - 3) ||
		      buf_puts(b, " width=\"6\" height=\"6\"");
		return "rect";
	default:
		*rc = buf_puts(b, "<path d=\"M") || buf_put_f1(b, x) || buf_putc(b, ',') || buf_put_f1(b, y) ||
		      buf_puts(b, paths[cls]) ||
		      buf_puts(b, cls == 5 || cls == 6 ? "\" fill=\"none\" stroke-width=\"1.5\"" : "\"");
		return "path";
	}
}

static int put_name(struct buf *b, const struct plot_series *s, size_t i)
{
	if (s->name)
		return buf_put_html(b, s->name, strlen(s->name));
	return buf_printf(b, "series %zu", i + 1);
}

static bool point_ok(const struct plot_series *s, size_t j)
{
	return isfinite(s->x[j]) && isfinite(s->y[j]);
}

static int emit_series(struct buf *b, const struct frame *f, const struct plot_series *s, size_t i)
{
	int cls = (int)(i % NCLASSES), rc = 0;
	const char *colour = colours[cls];
	size_t pts = 0;

	if (!s->x || !s->y)
		return 0;
	for (size_t j = 0; j < s->n; j++)
		pts += point_ok(s, j);
	if (!pts)
		return 0;
	if (buf_printf(b, "<polyline class=\"s%d\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
		       cls, colour))
		return -1;
	for (size_t j = 0, k = 0; j < s->n; j++) {
		if (!point_ok(s, j))
			continue;
		if ((k++ && buf_putc(b, ' ')) || buf_put_f1(b, px_x(f, s->x[j])) || buf_putc(b, ',') ||
		    buf_put_f1(b, px_y(f, s->y[j])))
			return -1;
	}
	if (buf_puts(b, "\"/>\n") ||
	    buf_printf(b, "<g class=\"s%d pts\" fill=\"%s\" stroke=\"%s\">\n", cls, colour, colour))
		return -1;
	for (size_t j = 0; j < s->n; j++) {
		const char *tag;

		if (!point_ok(s, j))
			continue;
		tag = put_marker(b, cls, px_x(f, s->x[j]), px_y(f, s->y[j]), &rc);
		if (rc || buf_puts(b, "><title>") || put_name(b, s, i) || buf_puts(b, ": x=") ||
		    put_num(b, s->x[j]) || buf_puts(b, ", y=") || put_num(b, s->y[j]) ||
		    buf_printf(b, "</title></%s>\n", tag))
			return -1;
	}
	return buf_puts(b, "</g>\n");
}

static int emit_axes(struct buf *b, const struct frame *f)
{
	double bottom = f->top + f->ph, right = f->left + f->pw;

	if (buf_puts(b, "<g class=\"grid\" stroke=\"#e4e4e4\">"))
		return -1;
	for (int i = 0; i <= (int)(f->xa.k1 - f->xa.k0); i++) {
		double k = f->xa.k0 + i;
		double x = px_x(f, tick_val(k, f->xa.m, f->xa.e));

		if (put_attr(b, "<line x1=\"", x) || put_attr(b, " y1=\"", f->top) || put_attr(b, " x2=\"", x) ||
		    put_attr(b, " y2=\"", bottom) || buf_puts(b, "/>"))
			return -1;
	}
	for (int i = 0; i <= (int)(f->ya.k1 - f->ya.k0); i++) {
		double k = f->ya.k0 + i;
		double y = px_y(f, tick_val(k, f->ya.m, f->ya.e));

		if (put_attr(b, "<line x1=\"", f->left) || put_attr(b, " y1=\"", y) ||
		    put_attr(b, " x2=\"", right) || put_attr(b, " y2=\"", y) || buf_puts(b, "/>"))
			return -1;
	}
	if (buf_puts(b, "</g>\n<path class=\"axis\" d=\"M") || buf_put_f1(b, f->left) || buf_putc(b, ',') ||
	    buf_put_f1(b, f->top) || buf_putc(b, 'V') || buf_put_f1(b, bottom) || buf_putc(b, 'H') ||
	    buf_put_f1(b, right) || buf_puts(b, "\" fill=\"none\" stroke=\"#333\"/>\n"))
		return -1;
	for (int i = 0; i <= (int)(f->xa.k1 - f->xa.k0); i++) {
		double k = f->xa.k0 + i;

		if (put_attr(b, "<text class=\"xtick\" x=\"", px_x(f, tick_val(k, f->xa.m, f->xa.e))) ||
		    put_attr(b, " y=\"", bottom + 16) || buf_puts(b, " text-anchor=\"middle\">") ||
		    put_tick(b, k, f->xa.m, f->xa.e) || buf_puts(b, "</text>\n"))
			return -1;
	}
	for (int i = 0; i <= (int)(f->ya.k1 - f->ya.k0); i++) {
		double k = f->ya.k0 + i;

		if (put_attr(b, "<text class=\"ytick\" x=\"", f->left - 6) ||
		    put_attr(b, " y=\"", px_y(f, tick_val(k, f->ya.m, f->ya.e)) + 4) ||
		    buf_puts(b, " text-anchor=\"end\">") || put_tick(b, k, f->ya.m, f->ya.e) ||
		    buf_puts(b, "</text>\n"))
			return -1;
	}
	return 0;
}

static int put_text(struct buf *b, const char *cls, double x, double y, const char *extra, const char *s)
{
	return buf_printf(b, "<text class=\"%s\"", cls) || put_attr(b, " x=\"", x) || put_attr(b, " y=\"", y) ||
	       buf_puts(b, " text-anchor=\"middle\"") || buf_puts(b, extra) || buf_putc(b, '>') ||
	       buf_put_html(b, s, strlen(s)) || buf_puts(b, "</text>\n");
}

static int emit_legend(struct buf *b, const struct plot_series *s, size_t ns, double x, double y0)
{
	for (size_t i = 0; i < ns; i++) {
		int cls = (int)(i % NCLASSES), rc = 0;
		double y = y0 + (double)i * LEGEND_ROW + 8;
		const char *tag;

		if (buf_printf(b, "<g class=\"legend s%d\" fill=\"%s\" stroke=\"%s\">", cls, colours[cls],
			       colours[cls]) ||
		    put_attr(b, "<line x1=\"", x) || put_attr(b, " y1=\"", y) || put_attr(b, " x2=\"", x + 24) ||
		    put_attr(b, " y2=\"", y) || buf_puts(b, " stroke-width=\"1.5\"/>"))
			return -1;
		tag = put_marker(b, cls, x + 12, y, &rc);
		if (rc || buf_printf(b, "></%s>", tag) || put_attr(b, "<text x=\"", x + 30) ||
		    put_attr(b, " y=\"", y + 4) || buf_puts(b, " fill=\"#222\" stroke=\"none\">") ||
		    put_name(b, &s[i], i) || buf_puts(b, "</text></g>\n"))
			return -1;
	}
	return 0;
}

int plot_render_svg(const struct plot_series *s, size_t ns, const struct plot_opts *o, struct buf *out)
{
	struct frame f;
	double xlo = 0, xhi = 0, ylo = 0, yhi = 0, bottom_h;
	int width = o->width > 0 ? o->width : 640, height = o->height > 0 ? o->height : 400;
	size_t start = out->len;

	if (width < 240)
		width = 240;
	if (height < 160)
		height = 160;
	if (width > 100000)
		width = 100000;
	if (height > 100000)
		height = 100000;
	for (size_t i = 0; i < ns; i++) {
		if (!s[i].x || !s[i].y)
			continue;
		for (size_t j = 0; j < s[i].n; j++) {
			if (!point_ok(&s[i], j))
				continue;
			xlo = fmin(xlo, s[i].x[j]);
			xhi = fmax(xhi, s[i].x[j]);
			ylo = fmin(ylo, s[i].y[j]);
			yhi = fmax(yhi, s[i].y[j]);
		}
	}
	if (!(xhi > xlo))
		xhi = xlo + 1;
	if (o->xcount && xhi - xlo < 5)   /* no ticks at 0.2 of a stream */
		xhi = xlo + 5;
	axis_fit(&f.xa, xlo, xhi, false);
	/* A fixed range must hold a few ticks that doubles can tell apart. */
	if (isfinite(o->ymin) && isfinite(o->ymax) && o->ymax > o->ymin &&
	    o->ymax - o->ymin > 1e-9 * fmax(fabs(o->ymin), fabs(o->ymax)) && o->ymax - o->ymin < DBL_MAX) {
		axis_fit(&f.ya, o->ymin, o->ymax, true);
	} else {
		if (!(yhi > ylo))
			yhi = ylo + 1;
		axis_fit(&f.ya, ylo, yhi, false);
	}
	f.left = LEFT;
	f.top = 8 + (o->title ? TITLE_H : 0);
	f.pw = width - LEFT - RIGHT;
	bottom_h = TICKS_H + (o->xlabel ? XLABEL_H : 0) + 8 + (double)ns * LEGEND_ROW;
	f.ph = height - f.top - bottom_h;
	if (f.ph < 80) { /* the legend may need more room than asked for */
		f.ph = 80;
		height = (int)(f.top + f.ph + bottom_h);
	}
	if (buf_printf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"%d\" "
			    "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
		       width, height, width, height))
		goto fail;
	if (o->title && put_text(out, "title", width / 2.0, 20, " font-size=\"14\"", o->title))
		goto fail;
	if (emit_axes(out, &f))
		goto fail;
	if (o->xlabel && put_text(out, "xlabel", f.left + f.pw / 2, f.top + f.ph + TICKS_H + 12, "", o->xlabel))
		goto fail;
	if (o->ylabel) {
		double cy = f.top + f.ph / 2;

		if (buf_puts(out, "<text class=\"ylabel\" x=\"14\"") || put_attr(out, " y=\"", cy) ||
		    buf_puts(out, " text-anchor=\"middle\" transform=\"rotate(-90 14 ") || buf_put_f1(out, cy) ||
		    buf_puts(out, ")\">") || buf_put_html(out, o->ylabel, strlen(o->ylabel)) ||
		    buf_puts(out, "</text>\n"))
			goto fail;
	}
	for (size_t i = 0; i < ns; i++)
		if (emit_series(out, &f, &s[i], i))
			goto fail;
	if (emit_legend(out, s, ns, f.left, f.top + f.ph + TICKS_H + (o->xlabel ? XLABEL_H : 0) + 8) ||
	    buf_puts(out, "</svg>\n"))
		goto fail;
	return 0;
fail:
	out->len = start;
	if (out->data)
		out->data[start] = '\0';
	return -1;
}
