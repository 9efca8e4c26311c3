/*
 * timeline: one stream's run and wait events per thread on a time axis, with
 * the wait-graph edges (which thread readied which), rendered server-side as
 * SVG for the dashboard.
 *
 * Output is bounded whatever the number of events: events of one row that
 * start in the same pixel column are merged into one rect (drawn in the class
 * with most of their time, its title saying "N events"), so a row has at most
 * one rect per pixel column; past 2,000 visible edges only those of AOI waits
 * are drawn. No script, no style attributes (strict Content-Security-Policy),
 * every name escaped, and the same input gives the same bytes.
 */
#ifndef SM_TIMELINE_H
#define SM_TIMELINE_H

#include "common/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TL_MAX_EDGES 2000

struct tl_event {
	int64_t tid;
	int64_t ts_ns, dur_ns;
	char kind;              /* 'r' run (CPU sample), 'w' wait; other kinds are ignored */
	int64_t readier_tid;    /* waits: the thread that readied it, 0 = none/unknown */
	bool aoi;               /* in the AOI (the events that matter): drawn highlighted (class "aoi") */
	const char *stack;      /* its frames, one a line (timeline_stack_text()), shown on hover; may be NULL */
};

/* A thread's name for its row label, e.g. its comm (the stream's "threads"). */
struct tl_thread {
	int64_t tid;
	const char *name;       /* UTF-8 from the sender, escaped when drawn */
};

struct tl_view {
	int width;                      /* px of the whole svg, e.g. 1200 (clamped to [230, 100000]) */
	int64_t from_ns, to_ns;         /* visible time range; events outside are skipped, cut at the edges */
	int64_t symptom_tid;            /* its row first, labelled "(symptom)"; 0 = none */
	int64_t symptom_start_ns, symptom_end_ns;  /* shaded band (class "symptom"); empty = none */
	const char *href_prefix;        /* zoom links on the time axis: "{prefix}{from}-{to}" for each
	                                   of 10 equal slices of the view, e.g. "?t="; NULL = no links */
	int gutter;                     /* px for the row labels left of the axis; 0 = 120 */
	bool has_origin;                /* times on the axis and in hovers count from origin_ns (the */
	int64_t origin_ns;              /* stream's start, so a zoomed view keeps its offsets), else from_ns */
	const struct tl_thread *threads;  /* names of threads[0..nthreads): a named row is labelled */
	size_t nthreads;                  /* "NAME (tid N)", the name cut with "…" to fit the gutter */
};

/* The most frames timeline_stack_text() writes, and the most bytes of each. */
#define TL_STACK_FRAMES 16
#define TL_FRAME_BYTES 160

/* A stack's hover text into out: names[0..n) (outermost first) one a line, outermost first as on
 * the rest of the dashboard; past TL_STACK_FRAMES frames the outer ones give way to a first line
 * "… N outer frames", and a name over TL_FRAME_BYTES bytes is cut on a character boundary with "…".
 * Plain text (the renderer escapes it). Returns 0, or -1 when out is full. */
int timeline_stack_text(struct buf *out, const char *const *names, size_t n);

/* Append the timeline as one <svg class="timeline"> element to out (ev and v are only read, and
 * not kept). Rows: one per distinct tid of all the events given ('r'/'w' only; those outside the
 * view too, so rows stay put while zooming), the symptom thread's first (also when it has no
 * events), then ascending tid. Events need not be sorted. Returns 0, or -1 with a message in
 * err[0..errlen) (from_ns >= to_ns, out of memory, out full) and out left as it was. */
int timeline_render_svg(const struct tl_event *ev, size_t n, const struct tl_view *v, struct buf *out,
			char *err, size_t errlen);

#endif
