/* timeline: a stream's events per thread on a time axis, as SVG (see timeline.h). */
#include "web/timeline.h"
#include "common/imap.h"
#include "common/vec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUTTER_DEFAULT 120   /* row labels, unless the view asks for more */
#define RIGHT 10
#define TOP 4
#define NOTE_H 16
#define ROW_H 20
#define BAR_OFF 3
#define BAR_H 14
#define AXIS_GAP 6
#define AXIS_H 34
#define NSLICES 10

enum { CLS_RUN, CLS_WAIT, CLS_RUN_AOI, CLS_WAIT_AOI };

static const char *const cls_name[] = { "run", "wait", "run aoi", "wait aoi" };
static const char *const cls_fill[] = { "#7fa7d9", "#d9c27f", "#1f5fb4", "#c7621a" };

struct vis {
	int64_t s, e;   /* clipped to the view */
	uint32_t idx;   /* into the caller's events */
	uint32_t row;
	uint32_t cls;
	uint32_t col;   /* pixel column of s, from the left of the time area */
};

struct ctx {
	int gutter;              /* px left of the time axis, for the row labels */
	const struct tl_event *ev;
	const struct tl_view *v;
	struct buf *out;
	int64_t *tids;  /* distinct tids other than the symptom's, ascending */
	size_t ntids;
	struct tl_thread *names;  /* the view's thread names by ascending tid, one a tid */
	size_t nnames;
	uint32_t nrows;
	bool symrow;
	double pw;      /* px of the time area */
	double pxns;    /* px per ns */
	int top;        /* y of the first row */
};

/* Sort by (row, start column), stable so that ties keep the events' order (same input, same
 * output): an LSD radix sort, linear where qsort was the slowest part. Returns 0 or -1 (no memory). */
static int vis_sort(struct vis *vs, size_t nv, uint32_t nrows)
{
	struct vis *tmp, *src = vs, *dst;
	uint64_t maxkey = ((uint64_t)(nrows ? nrows - 1 : 0) << 17) | 0x1ffff;

	if (nv < 2)
		return 0;
	if (!(tmp = malloc(nv * sizeof(*tmp))))
		return -1;
	dst = tmp;
	for (unsigned shift = 0; shift < 64 && (maxkey >> shift); shift += 8) {
		size_t count[257] = { 0 };
		struct vis *t;

		for (size_t i = 0; i < nv; i++)
			count[((((uint64_t)src[i].row << 17) | src[i].col) >> shift & 0xff) + 1]++;
		for (int d = 0; d < 256; d++)
			count[d + 1] += count[d];
		for (size_t i = 0; i < nv; i++)
			dst[count[(((uint64_t)src[i].row << 17) | src[i].col) >> shift & 0xff]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	if (src != vs)
		memcpy(vs, src, nv * sizeof(*vs));
	free(tmp);
	return 0;
}

/* Row of a thread, or -1 when it has none. */
static int64_t row_of(const struct ctx *c, int64_t tid)
{
	size_t lo = 0, hi = c->ntids;

	if (c->symrow && tid == c->v->symptom_tid)
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->tids[mid] < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < c->ntids && c->tids[lo] == tid)
		return (int64_t)lo + (c->symrow ? 1 : 0);
	return -1;
}

/* Time t of the view as x px; t - from in unsigned arithmetic so no range can overflow. */
static double x_of(const struct ctx *c, int64_t t)
{
	return c->gutter + (double)((uint64_t)t - (uint64_t)c->v->from_ns) * c->pxns;
}

static int64_t end_of(const struct tl_event *e)
{
	int64_t d = e->dur_ns > 0 ? e->dur_ns : 0;

	return e->ts_ns > INT64_MAX - d ? INT64_MAX : e->ts_ns + d;
}


/* (t - base) ns as ms with dec (0..3) decimals, rounded half away from zero, exactly. */
static int put_ms(struct buf *b, int64_t t, int64_t base, int dec)
{
	static const uint64_t p10[] = { 1, 10, 100, 1000 };
	bool neg = t < base;
	uint64_t u = neg ? (uint64_t)base - (uint64_t)t : (uint64_t)t - (uint64_t)base;
	uint64_t unit = 1000000 / p10[dec], q = u / unit + (u % unit >= unit / 2), r;
	char frac[4];

	if (neg && q && buf_putc(b, '-'))
		return -1;
	if (buf_put_i64(b, (int64_t)(q / p10[dec])))
		return -1;
	if (!dec)
		return 0;
	r = q % p10[dec];
	frac[0] = '.';
	for (int i = dec; i > 0; i--, r /= 10)
		frac[i] = (char)('0' + r % 10);
	return buf_append(b, frac, (size_t)dec + 1);
}

/* Where the times shown count from. */
static int64_t origin_of(const struct tl_view *v)
{
	return v->has_origin ? v->origin_ns : v->from_ns;
}

/* The first bytes of s, at most max and on a character boundary (UTF-8: not before a continuation byte). */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

int timeline_stack_text(struct buf *out, const char *const *names, size_t n)
{
	size_t first = n > TL_STACK_FRAMES ? n - TL_STACK_FRAMES : 0;

	if (first && buf_printf(out, "… %zu outer frame%s", first, first == 1 ? "" : "s"))
		return -1;
	for (size_t i = first; i < n; i++) {
		const char *nm = names[i] ? names[i] : "?";
		size_t len = strlen(nm), k = utf8_cut(nm, len, TL_FRAME_BYTES);

		if (((i > first || first) && buf_putc(out, '\n')) || buf_append(out, nm, k) ||
		    (k < len && buf_puts(out, "…")))
			return -1;
	}
	return 0;
}

static int put_attr_f1(struct buf *b, const char *name, double v)
{
	return buf_puts(b, name) || buf_put_f1(b, v) || buf_putc(b, '"');
}

static int put_attr_i(struct buf *b, const char *name, int64_t v)
{
	return buf_puts(b, name) || buf_put_i64(b, v) || buf_putc(b, '"');
}

/* One rect for vis[a..b): one event, or several starting in one pixel column of a row; those
 * are drawn in the class that has most of their time (instants count 1 ns). */
static int emit_rect(const struct ctx *c, const struct vis *vs, size_t a, size_t b, double x0, double x1)
{
	const struct tl_event *e = &c->ev[vs[a].idx];
	struct buf *o = c->out;
	double w = x1 - x0 < 1 ? 1 : x1 - x0;
	int64_t y = c->top + (int64_t)vs[a].row * ROW_H + BAR_OFF, start = vs[a].s, end = vs[a].e;
	uint64_t busy[4] = { 0, 0, 0, 0 }, weight[4] = { 0, 0, 0, 0 };
	size_t naoi = 0;
	unsigned cls = 0;

	for (size_t i = a; i < b; i++) {
		uint64_t d = (uint64_t)vs[i].e - (uint64_t)vs[i].s;

		busy[vs[i].cls] += d;
		weight[vs[i].cls] += d + 1;
		naoi += vs[i].cls >= CLS_RUN_AOI;
		if (vs[i].s < start)
			start = vs[i].s;
		if (vs[i].e > end)
			end = vs[i].e;
	}
	for (unsigned k = 1; k < 4; k++)
		if (weight[k] > weight[cls])
			cls = k;
	if (buf_puts(o, "<rect class=\"") || buf_puts(o, cls_name[cls]) || buf_putc(o, '"') ||
	    put_attr_f1(o, " x=\"", x0) || put_attr_i(o, " y=\"", y) || put_attr_f1(o, " width=\"", w) ||
	    put_attr_i(o, " height=\"", BAR_H) || buf_puts(o, " fill=\"") || buf_puts(o, cls_fill[cls]) ||
	    buf_puts(o, "\"><title>"))
		return -1;
	if (b - a == 1) {
		if (buf_puts(o, e->kind == 'w' ? "wait tid " : "run tid ") || buf_put_i64(o, e->tid) ||
		    buf_puts(o, "\nstart ") ||
		    put_ms(o, e->ts_ns, origin_of(c->v), 3) || buf_puts(o, " ms, dur ") ||
		    put_ms(o, end_of(e), e->ts_ns, 3) || buf_puts(o, " ms"))
			return -1;
		if (e->kind == 'w' && e->readier_tid &&
		    (buf_puts(o, "\nreadied by tid ") || buf_put_i64(o, e->readier_tid)))
			return -1;
		if (e->stack && (buf_putc(o, '\n') || buf_put_html(o, e->stack, strlen(e->stack))))
			return -1;
	} else {
		uint64_t run = busy[CLS_RUN] + busy[CLS_RUN_AOI], wait = busy[CLS_WAIT] + busy[CLS_WAIT_AOI];

		if (buf_put_i64(o, (int64_t)(b - a)) || buf_puts(o, " events, tid ") || buf_put_i64(o, e->tid) ||
		    (naoi && buf_printf(o, ", %zu in AOI", naoi)) || buf_puts(o, "\nstart ") ||
		    put_ms(o, start, origin_of(c->v), 3) || buf_puts(o, " ms, end ") ||
		    put_ms(o, end, origin_of(c->v), 3) || buf_puts(o, " ms\nrun ") ||
		    put_ms(o, (int64_t)(run > INT64_MAX ? INT64_MAX : run), 0, 3) || buf_puts(o, " ms, wait ") ||
		    put_ms(o, (int64_t)(wait > INT64_MAX ? INT64_MAX : wait), 0, 3) || buf_puts(o, " ms"))
			return -1;
	}
	return buf_puts(o, "</title></rect>\n");
}

/* Events of a row that start in the same pixel column become one rect (and so do events that
 * overlap the rect by more than a pixel, which a sane trace does not have). Every rect of a row
 * then starts in a later column than the one before: at most one rect per row and column, however
 * many events. Events a pixel or more wide that merely follow each other keep their own rect.
 * vs is sorted by (row, column). */
static int emit_events(const struct ctx *c, const struct vis *vs, size_t nv)
{
	size_t a = 0;

	while (a < nv) {
		double x0 = x_of(c, vs[a].s), x1 = x_of(c, vs[a].e);
		size_t b = a + 1;

		for (; b < nv && vs[b].row == vs[a].row; b++) {
			double bx0 = x_of(c, vs[b].s), bx1 = x_of(c, vs[b].e);

			if (vs[b].col != vs[a].col && bx0 >= x1 - 1)
				break;
			if (bx0 < x0)
				x0 = bx0;
			if (bx1 > x1)
				x1 = bx1;
		}
		if (emit_rect(c, vs, a, b, x0, x1))
			return -1;
		a = b;
	}
	return 0;
}

/* A wait whose end is in view and whose readier has another row. */
static bool edge_of(const struct ctx *c, const struct vis *vv, int64_t *rrow)
{
	const struct tl_event *e = &c->ev[vv->idx];
	int64_t end;

	if (e->kind != 'w' || !e->readier_tid || e->readier_tid == e->tid)
		return false;
	end = end_of(e);
	if (end < c->v->from_ns || end > c->v->to_ns)
		return false;
	*rrow = row_of(c, e->readier_tid);
	return *rrow >= 0;
}

static int emit_edges(const struct ctx *c, const struct vis *vs, size_t nv, bool aoi_only)
{
	struct buf *o = c->out;
	size_t drawn = 0;

	for (size_t i = 0; i < nv && drawn < TL_MAX_EDGES; i++) {
		const struct tl_event *e = &c->ev[vs[i].idx];
		int64_t rrow, wy, ry;
		double x;

		if (!edge_of(c, &vs[i], &rrow) || (aoi_only && !e->aoi))
			continue;
		/* From the waiter's bar to the near edge of the readier's bar. */
		wy = c->top + (int64_t)vs[i].row * ROW_H;
		ry = c->top + rrow * ROW_H;
		if (rrow > (int64_t)vs[i].row) {
			wy += BAR_OFF + BAR_H;
			ry += BAR_OFF;
		} else {
			wy += BAR_OFF;
			ry += BAR_OFF + BAR_H;
		}
		x = x_of(c, end_of(e));
		if (buf_puts(o, e->aoi ? "<line class=\"edge aoi\"" : "<line class=\"edge\"") ||
		    put_attr_f1(o, " x1=\"", x) || put_attr_i(o, " y1=\"", wy) || put_attr_f1(o, " x2=\"", x) ||
		    put_attr_i(o, " y2=\"", ry) ||
		    buf_puts(o, " stroke=\"#444\" marker-end=\"url(#tl-arrow)\"/>\n"))
			return -1;
		drawn++;
	}
	return 0;
}

static int emit_axis(const struct ctx *c, int axis_y)
{
	const struct tl_view *v = c->v;
	struct buf *o = c->out;
	uint64_t span = (uint64_t)v->to_ns - (uint64_t)v->from_ns, step = span / NSLICES;
	int dec = step >= 1000000 ? 0 : step >= 100000 ? 1 : step >= 10000 ? 2 : 3;
	int64_t t[NSLICES + 1];

	for (int i = 0; i <= NSLICES; i++)
		t[i] = (int64_t)((uint64_t)v->from_ns + step * (uint64_t)i +
				 (span % NSLICES) * (uint64_t)i / NSLICES);
	if (buf_puts(o, "<g class=\"axis\" stroke=\"#666\">") || put_attr_f1(o, "<line x1=\"", c->gutter) ||
	    put_attr_i(o, " y1=\"", axis_y) || put_attr_f1(o, " x2=\"", c->gutter + c->pw) ||
	    put_attr_i(o, " y2=\"", axis_y) || buf_puts(o, "/>\n"))
		return -1;
	for (int i = 0; i < NSLICES; i++) {
		double x = x_of(c, t[i]);

		if (v->href_prefix) {
			if (buf_puts(o, "<a href=\"") ||
			    buf_put_html(o, v->href_prefix, strlen(v->href_prefix)) ||
			    buf_printf(o, "%lld-%lld\">", (long long)t[i], (long long)t[i + 1]) ||
			    buf_puts(o, "<rect class=\"slice\"") || put_attr_f1(o, " x=\"", x) ||
			    put_attr_i(o, " y=\"", axis_y) ||
			    put_attr_f1(o, " width=\"", x_of(c, t[i + 1]) - x) ||
			    put_attr_i(o, " height=\"", AXIS_H - 4) ||
			    buf_puts(o, " fill=\"transparent\" stroke=\"none\"/>"))
				return -1;
		}
		if (put_attr_f1(o, "<line class=\"tick\" x1=\"", x) || put_attr_i(o, " y1=\"", axis_y) ||
		    put_attr_f1(o, " x2=\"", x) || put_attr_i(o, " y2=\"", axis_y + 5) || buf_puts(o, "/>") ||
		    put_attr_f1(o, "<text class=\"tick\" x=\"", x) || put_attr_i(o, " y=\"", axis_y + 17) ||
		    buf_puts(o, " text-anchor=\"middle\" stroke=\"none\">") ||
		    put_ms(o, t[i], origin_of(v), dec) || buf_puts(o, " ms</text>"))
			return -1;
		if (v->href_prefix && buf_puts(o, "</a>"))
			return -1;
		if (buf_putc(o, '\n'))
			return -1;
	}
	return buf_puts(o, "</g>\n");
}

static int thread_cmp(const void *a, const void *b)
{
	const struct tl_thread *x = a, *y = b;

	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* By tid, then name: a tid named twice is labelled the same whatever the order given. */
static int thread_order(const void *a, const void *b)
{
	const struct tl_thread *x = a, *y = b;
	int d = thread_cmp(a, b);

	return d ? d : strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

static const char *name_of(const struct ctx *c, int64_t tid)
{
	const struct tl_thread key = { tid, NULL }, *t;

	if (!c->nnames)
		return NULL;
	t = bsearch(&key, c->names, c->nnames, sizeof(key), thread_cmp);
	return t ? t->name : NULL;
}

/* "NAME (tid N)", the name cut on a character boundary with "…" so that the label fits the gutter
 * (about 7 px a character of the 11 px font); "tid N" for a thread without a name. */
static int put_label(const struct ctx *c, int64_t tid, bool sym)
{
	struct buf *o = c->out;
	const char *name = name_of(c, tid);
	char suffix[48];
	size_t n, chars = 0, cut, room;
	int slen;

	if (!name || !*name)
		return buf_printf(o, "tid %lld%s", (long long)tid, sym ? " (symptom)" : "");
	slen = snprintf(suffix, sizeof(suffix), " (tid %lld)%s", (long long)tid, sym ? " (symptom)" : "");
	room = c->gutter > 8 ? (size_t)(c->gutter - 8) / 7 : 0;
	room = room > (size_t)slen + 6 ? room - (size_t)slen : 6;
	n = strlen(name);
	for (cut = 0; cut < n; cut++)
		if (((unsigned char)name[cut] & 0xc0) != 0x80 && ++chars > room)
			break;
	if (cut < n) {
		/* one character fewer, for the "…" */
		while (cut > 0 && ((unsigned char)name[--cut] & 0xc0) == 0x80)
			;
		return buf_put_html(o, name, cut) || buf_puts(o, "…") || buf_puts(o, suffix);
	}
	return buf_put_html(o, name, n) || buf_puts(o, suffix);
}

static int emit_labels(const struct ctx *c)
{
	struct buf *o = c->out;

	for (uint32_t r = 0; r < c->nrows; r++) {
		int64_t y = c->top + (int64_t)r * ROW_H + BAR_OFF + 11;
		bool sym = c->symrow && r == 0;
		int64_t tid = sym ? c->v->symptom_tid : c->tids[r - (c->symrow ? 1 : 0)];

		if (buf_puts(o, sym ? "<text class=\"tid symptom\" x=\"4\"" : "<text class=\"tid\" x=\"4\"") ||
		    put_attr_i(o, " y=\"", y) || buf_putc(o, '>') || put_label(c, tid, sym) ||
		    buf_puts(o, "</text>\n"))
			return -1;
	}
	return 0;
}

static int emit_symptom(const struct ctx *c)
{
	const struct tl_view *v = c->v;
	int64_t s = v->symptom_start_ns, e = v->symptom_end_ns;
	double x0, x1;

	if (s < v->from_ns)
		s = v->from_ns;
	if (e > v->to_ns)
		e = v->to_ns;
	if (s >= e)
		return 0;
	x0 = x_of(c, s);
	x1 = x_of(c, e);
	return put_attr_f1(c->out, "<rect class=\"symptom\" x=\"", x0) ||
	       put_attr_i(c->out, " y=\"", c->top) ||
	       put_attr_f1(c->out, " width=\"", x1 - x0 < 1 ? 1 : x1 - x0) ||
	       put_attr_i(c->out, " height=\"", (int64_t)c->nrows * ROW_H) ||
	       buf_puts(c->out, " fill=\"#f6d6d6\"><title>symptom</title></rect>\n");
}

static void set_err(char *err, size_t errlen, const char *msg)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", msg);
}

int timeline_render_svg(const struct tl_event *ev, size_t n, const struct tl_view *v, struct buf *out,
			char *err, size_t errlen)
{
	struct ctx c;
	struct vis *vs = NULL;
	size_t nv = 0, start = out->len, nedges = 0, naoi = 0;
	int width, height, axis_y, rc = -1;
	bool note;

	if (err && errlen)
		err[0] = '\0';
	if (v->from_ns >= v->to_ns) {
		set_err(err, errlen, "empty time range (from_ns >= to_ns)");
		return -1;
	}
	if (n > UINT32_MAX) {
		set_err(err, errlen, "too many events");
		return -1;
	}
	memset(&c, 0, sizeof(c));
	c.ev = ev;
	c.v = v;
	c.out = out;
	c.gutter = v->gutter > 0 && v->gutter < 1000 ? v->gutter : GUTTER_DEFAULT;
	width = v->width < c.gutter + RIGHT + 100 ? c.gutter + RIGHT + 100 : v->width > 100000 ? 100000 : v->width;
	c.pw = width - c.gutter - RIGHT;
	c.pxns = c.pw / (double)((uint64_t)v->to_ns - (uint64_t)v->from_ns);
	c.symrow = v->symptom_tid != 0;

	c.tids = malloc((n ? n : 1) * sizeof(*c.tids));
	vs = malloc((n ? n : 1) * sizeof(*vs));
	if (!c.tids || !vs)
		goto oom;
	if (v->threads && v->nthreads) {
		c.names = malloc(v->nthreads * sizeof(*c.names));
		if (!c.names)
			goto oom;
		memcpy(c.names, v->threads, v->nthreads * sizeof(*c.names));
		qsort(c.names, v->nthreads, sizeof(*c.names), thread_order);
		for (size_t i = 0; i < v->nthreads; i++)
			if (!c.nnames || c.names[c.nnames - 1].tid != c.names[i].tid)
				c.names[c.nnames++] = c.names[i];
	}
	{
		/* the distinct threads first (a stream has hundreds of thousands of events, a few threads) */
		struct imap seen = IMAP_INIT;
		bool empty_key = false; /* the one tid imap cannot hold */

		for (size_t i = 0; i < n; i++) {
			uint64_t key = (uint64_t)ev[i].tid;

			if (!(ev[i].kind == 'r' || ev[i].kind == 'w') || (c.symrow && ev[i].tid == v->symptom_tid))
				continue;
			if (key == IMAP_EMPTY) {
				if (!empty_key)
					c.tids[c.ntids++] = ev[i].tid;
				empty_key = true;
			} else {
				int seen_before = imap_put(&seen, key, 0);   /* 0: new, 1: seen before */

				if (seen_before < 0) {
					imap_free(&seen);
					goto oom;
				}
				if (!seen_before)
					c.tids[c.ntids++] = ev[i].tid;
			}
		}
		imap_free(&seen);
	}
	vec_sort_i64(c.tids, c.ntids);
	c.nrows = (uint32_t)c.ntids + (c.symrow ? 1 : 0);

	for (size_t i = 0; i < n; i++) {
		const struct tl_event *e = &ev[i];
		int64_t end = end_of(e);
		struct vis *p;

		if (e->kind != 'r' && e->kind != 'w')
			continue;
		/* In view if it starts before the end and reaches past the start (instants: at it). */
		if (e->ts_ns >= v->to_ns || !(end > v->from_ns || e->ts_ns >= v->from_ns))
			continue;
		p = &vs[nv++];
		p->s = e->ts_ns < v->from_ns ? v->from_ns : e->ts_ns;
		p->e = end > v->to_ns ? v->to_ns : end;
		p->idx = (uint32_t)i;
		p->row = (uint32_t)row_of(&c, e->tid);
		p->cls = (e->kind == 'w' ? CLS_WAIT : CLS_RUN) + (e->aoi ? 2 : 0);
		{
			double col = floor(x_of(&c, p->s)) - c.gutter;

			p->col = col < 0 ? 0 : col > c.pw ? (uint32_t)c.pw : (uint32_t)col;
		}
	}
	if (vis_sort(vs, nv, c.nrows) < 0)
		goto oom;
	for (size_t i = 0; i < nv; i++) {
		int64_t rrow;

		if (edge_of(&c, &vs[i], &rrow)) {
			nedges++;
			naoi += ev[vs[i].idx].aoi;
		}
	}
	note = nedges > TL_MAX_EDGES;
	c.top = TOP + (note ? NOTE_H : 0);
	axis_y = c.top + (int)c.nrows * ROW_H + AXIS_GAP;
	height = axis_y + AXIS_H;

	if (buf_printf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\"%d\" "
			    "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
		       width, height, width, height) ||
	    buf_puts(out, "<defs><marker id=\"tl-arrow\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" "
			  "markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0L6,3L0,6z\" "
			  "fill=\"#444\"/></marker></defs>\n"))
		goto oom;
	if (note && (buf_printf(out, "<text class=\"note\" x=\"%d\" y=\"%d\">%zu wait-graph edges in view: ",
				c.gutter, TOP + 11, nedges) ||
		     (naoi > TL_MAX_EDGES
			      ? buf_printf(out, "only the first %d of the %zu of AOI waits are drawn</text>\n",
					   TL_MAX_EDGES, naoi)
			      : buf_printf(out, "only the %zu of AOI waits are drawn</text>\n", naoi))))
		goto oom;
	if (emit_symptom(&c) || emit_labels(&c) || emit_events(&c, vs, nv) ||
	    emit_edges(&c, vs, nv, note) || emit_axis(&c, axis_y) || buf_puts(out, "</svg>\n"))
		goto oom;
	rc = 0;
	goto done;
oom:
	set_err(err, errlen, "out of memory or output full");
	out->len = start;
	if (out->data)
		out->data[start] = '\0';
done:
	free(c.names);
	free(c.tids);
	free(vs);
	return rc;
}
