/*
 * aoi: AOI extraction per trace stream (see aoi.h; the definitions and their
 * costs are in docs/aoi.md).
 *
 * The wait graph and the critical path ask, again and again, "which events of
 * thread R overlap [x, y]?". Each extraction that needs it builds an index for
 * that: the events grouped by thread, each group sorted by start time and laid
 * out as an implicit balanced search tree (the middle element of a range is the
 * root of that range) augmented with the largest end time below each node, so
 * that one query costs O(log n) plus O(log n) per event it reports (an interval
 * tree, CLRS 14.3) instead of a scan of the stream.
 */
#include "miner/aoi.h"
#include "common/imap.h"
#include "common/util.h"
#include "common/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
/* Below this many edges per event, qsort the edges; above, two counting sorts. */
#define EDGE_QSORT_RATIO 16

/* An event in the per-thread index: its span, and the largest end in the subtree it roots. */
struct ent {
	int64_t start, end, submax;
	uint32_t idx;
};

struct thread {
	int64_t tid;
	uint32_t off, n;  /* its events are ents[off .. off + n), sorted by (start, idx) */
};

/* An event met, or about to be met, on a critical walk. */
struct cand {
	int64_t start, end;
	uint32_t idx;
};

/*
 * One walk of the critical path: thread tid from the cursor t back to lo. Its
 * candidates (the thread's events overlapping [lo, hi]) are cands[cand ..
 * cand + ncand); pos is the next one.
 */
struct walk {
	int64_t tid, lo, t;
	size_t cand, ncand, pos;
	uint32_t wait;  /* the wait that handed this time over; NONE on the symptom thread */
};

enum { F_AOI = 1, F_EXPANDED = 2 };

struct aoi {
	struct imap tids;               /* tid -> thread index */
	struct thread *threads;
	size_t nthreads, cap_threads;

	/* per event, cap_events each; queue doubles as the output */
	size_t cap_events;
	uint32_t *evthread, *queue, *hits;
	struct ent *ents;
	uint8_t *flags;

	uint32_t (*edges)[2], (*edges_tmp)[2];
	size_t nedges, cap_edges, cap_edges_tmp;
	size_t *counts, cap_counts;
	struct cand *cands;
	size_t ncands, cap_cands;
	struct walk *walks;
	size_t nwalks, cap_walks;
	struct aoi_segment *segs;
	size_t nsegs, cap_segs;

	char err[128];
};

static const uint32_t no_events[1];

int aoi_mode_parse(const char *s, enum aoi_mode *out)
{
	static const enum aoi_mode all[] = { AOI_STREAM, AOI_THREAD, AOI_WAITGRAPH, AOI_CRITICAL };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(s, aoi_mode_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	return -1;
}

const char *aoi_mode_name(enum aoi_mode m)
{
	switch (m) {
	case AOI_STREAM:
		return "stream";
	case AOI_THREAD:
		return "thread";
	case AOI_WAITGRAPH:
		return "waitgraph";
	case AOI_CRITICAL:
		return "critical";
	}
	return "?";
}

struct aoi *aoi_open(void)
{
	return calloc(1, sizeof(struct aoi));
}

static void free_events(struct aoi *a)
{
	free(a->evthread);
	free(a->queue);
	free(a->hits);
	free(a->ents);
	free(a->flags);
	a->evthread = a->queue = a->hits = NULL;
	a->ents = NULL;
	a->flags = NULL;
	a->cap_events = 0;
}

void aoi_free(struct aoi *a)
{
	if (!a)
		return;
	free_events(a);
	imap_free(&a->tids);
	free(a->threads);
	free(a->edges);
	free(a->edges_tmp);
	free(a->counts);
	free(a->cands);
	free(a->walks);
	free(a->segs);
	free(a);
}

const char *aoi_error(const struct aoi *a)
{
	return a->err;
}

size_t aoi_edges(const struct aoi *a, const uint32_t (**edges)[2])
{
	*edges = (const uint32_t(*)[2])a->edges;
	return a->nedges;
}

size_t aoi_path(const struct aoi *a, const struct aoi_segment **segs)
{
	*segs = a->segs;
	return a->nsegs;
}

static int oom(struct aoi *a)
{
	snprintf(a->err, sizeof(a->err), "out of memory");
	return -1;
}

#define GROW(a, arr, cap, need)                                                           \
	do {                                                                              \
		if (vec_reserve(&(a)->arr, &(a)->cap, (need) ? (need) : 1, sizeof(*(a)->arr)) < 0) \
			return oom(a);                                                    \
	} while (0)

static int reserve_events(struct aoi *a, size_t n)
{
	if (n <= a->cap_events && a->flags)
		return 0;
	free_events(a);
	if (n == 0)
		n = 1;
	a->evthread = malloc(n * sizeof(*a->evthread));
	a->queue = malloc(n * sizeof(*a->queue));
	a->hits = malloc(n * sizeof(*a->hits));
	a->ents = malloc(n * sizeof(*a->ents));
	a->flags = malloc(n);
	if (!a->evthread || !a->queue || !a->hits || !a->ents || !a->flags) {
		free_events(a);
		return oom(a);
	}
	a->cap_events = n;
	return 0;
}

/* ts + dur, with a negative duration read as 0 and the sum saturated. */
static int64_t span_end(const struct wire_event *e)
{
	if (e->dur_ns <= 0)
		return e->ts_ns;
	if (e->ts_ns > INT64_MAX - e->dur_ns)
		return INT64_MAX;
	return e->ts_ns + e->dur_ns;
}

/* ---- The thread map. ---- */

static uint32_t thread_find(const struct aoi *a, int64_t tid)
{
	uint64_t t;

	/* tids are in [0, TID_MAX]: never the map's empty key */
	return imap_get(&a->tids, (uint64_t)tid, &t) ? (uint32_t)t : NONE;
}

/* Index of thread tid, added if new; NONE on out of memory. */
static uint32_t thread_put(struct aoi *a, int64_t tid)
{
	uint32_t t = thread_find(a, tid);

	if (t != NONE)
		return t;
	if (a->nthreads == a->cap_threads &&
	    vec_reserve(&a->threads, &a->cap_threads, a->nthreads + 1, sizeof(*a->threads)) < 0) {
		oom(a);
		return NONE;
	}
	t = (uint32_t)a->nthreads;
	if (imap_put(&a->tids, (uint64_t)tid, t) < 0) {
		oom(a);
		return NONE;
	}
	a->nthreads++;
	a->threads[t] = (struct thread){ .tid = tid };
	return t;
}

/* ---- The per-thread interval index. ---- */

static int ent_cmp(const void *pa, const void *pb)
{
	const struct ent *x = pa, *y = pb;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Fills submax for the tree over e[lo..hi) (root: the middle); returns its maximum end. */
static int64_t tree_build(struct ent *e, size_t lo, size_t hi)
{
	size_t mid;
	int64_t m, l, r;

	if (lo >= hi)
		return INT64_MIN;
	mid = lo + (hi - lo) / 2;
	l = tree_build(e, lo, mid);
	r = tree_build(e, mid + 1, hi);
	m = e[mid].end;
	if (l > m)
		m = l;
	if (r > m)
		m = r;
	e[mid].submax = m;
	return m;
}

/*
 * Appends to hits the positions (in e) of the entries of e[lo..hi) whose span
 * overlaps [x, y], in start order. A subtree is skipped when nothing in it ends
 * at or after x, and everything right of a node starting after y is skipped.
 */
static void tree_query(const struct ent *e, size_t lo, size_t hi, int64_t x, int64_t y,
		       uint32_t *hits, size_t *nhits)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e[mid].submax < x)
			return;
		tree_query(e, lo, mid, x, y, hits, nhits);
		if (e[mid].start > y)
			return;
		if (e[mid].end >= x)
			hits[(*nhits)++] = (uint32_t)mid;
		lo = mid + 1;
	}
}

/* Positions in a->ents of thread t's events overlapping [x, y], into a->hits; returns their count. */
static size_t thread_overlaps(struct aoi *a, uint32_t t, int64_t x, int64_t y)
{
	const struct thread *th = &a->threads[t];
	size_t nhits = 0;

	if (x > y)
		return 0;
	tree_query(a->ents + th->off, 0, th->n, x, y, a->hits, &nhits);
	for (size_t i = 0; i < nhits; i++)
		a->hits[i] += th->off;
	return nhits;
}

/* Groups events by thread and builds each thread's tree. O(n), plus sorting a thread's events if out of order. */
static int index_build(struct aoi *a, const struct wire_event *ev, size_t n)
{
	uint32_t last = NONE;
	size_t off = 0;

	a->nthreads = 0;
	imap_clear(&a->tids);
	for (size_t i = 0; i < n; i++) {
		uint32_t t = last != NONE && a->threads[last].tid == ev[i].tid ? last :
									   thread_put(a, ev[i].tid);

		if (t == NONE)
			return -1;
		a->evthread[i] = last = t;
		a->threads[t].n++;
	}
	for (size_t t = 0; t < a->nthreads; t++) {
		a->threads[t].off = (uint32_t)off;
		off += a->threads[t].n;
		a->threads[t].n = 0;
	}
	for (size_t i = 0; i < n; i++) {
		struct thread *th = &a->threads[a->evthread[i]];
		struct ent *e = &a->ents[th->off + th->n++];

		e->start = ev[i].ts_ns;
		e->end = span_end(&ev[i]);
		e->idx = (uint32_t)i;
	}
	for (size_t t = 0; t < a->nthreads; t++) {
		struct ent *e = a->ents + a->threads[t].off;
		size_t m = a->threads[t].n;

		/* placed in index order, so sorted by (start, idx) unless starts go back */
		for (size_t i = 1; i < m; i++)
			if (e[i].start < e[i - 1].start) {
				qsort(e, m, sizeof(*e), ent_cmp);
				break;
			}
		tree_build(e, 0, m);
	}
	return 0;
}

/* ---- Results. ---- */

static int edge_cmp(const void *pa, const void *pb)
{
	const uint32_t *x = pa, *y = pb;

	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Stable counting sort of src[0..m) into dst by component `key` (values < n). */
static void edges_csort(const uint32_t (*src)[2], uint32_t (*dst)[2], size_t m, int key,
			size_t *counts, size_t n)
{
	memset(counts, 0, (n + 1) * sizeof(*counts));
	for (size_t i = 0; i < m; i++)
		counts[src[i][key] + 1]++;
	for (size_t v = 0; v < n; v++)
		counts[v + 1] += counts[v];
	for (size_t i = 0; i < m; i++) {
		size_t d = counts[src[i][key]]++;

		dst[d][0] = src[i][0];
		dst[d][1] = src[i][1];
	}
}

/* Sorts the edges by (from, to): qsort when few, else by `to` then stably by `from`, O(edges + n). */
static int edges_sort(struct aoi *a, size_t n)
{
	if (a->nedges < 2)
		return 0;
	if (a->nedges < n / EDGE_QSORT_RATIO) {
		qsort(a->edges, a->nedges, sizeof(*a->edges), edge_cmp);
		return 0;
	}
	GROW(a, edges_tmp, cap_edges_tmp, a->nedges);
	GROW(a, counts, cap_counts, n + 1);
	edges_csort((const uint32_t(*)[2])a->edges, a->edges_tmp, a->nedges, 1, a->counts, n);
	edges_csort((const uint32_t(*)[2])a->edges_tmp, a->edges, a->nedges, 0, a->counts, n);
	return 0;
}

static int add_edge(struct aoi *a, uint32_t from, uint32_t to)
{
	if (a->nedges == a->cap_edges)
		GROW(a, edges, cap_edges, a->nedges + 1);
	a->edges[a->nedges][0] = from;
	a->edges[a->nedges][1] = to;
	a->nedges++;
	return 0;
}

/* The events flagged F_AOI, ascending, into a->queue; returns their count. */
static size_t collect(struct aoi *a, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (a->flags[i] & F_AOI)
			a->queue[k++] = (uint32_t)i;
	return k;
}

/* ---- The modes. ---- */

static size_t extract_thread(struct aoi *a, const struct wire_event *ev, size_t n, int64_t tid,
			     int64_t t0, int64_t t1)
{
	size_t k = 0;

	if (t0 > t1)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (ev[i].tid == tid && ev[i].ts_ns <= t1 && span_end(&ev[i]) >= t0)
			a->queue[k++] = (uint32_t)i;
	return k;
}

/*
 * Breadth-first closure from the symptom thread's events in the window: it
 * visits the same vertex set and finds the same edges as the spec's rounds,
 * since both are what is reachable from the start set. An event is queued
 * when first flagged, so each is expanded once and cycles end.
 */
static int extract_waitgraph(struct aoi *a, const struct wire_event *ev, size_t n,
			     const struct wire_symptom *sym, size_t *nout)
{
	uint32_t t = thread_find(a, sym->tid);
	size_t q = 0, nh;

	if (t != NONE) {
		nh = thread_overlaps(a, t, sym->start_ns, sym->end_ns);
		for (size_t h = 0; h < nh; h++) {
			uint32_t j = a->ents[a->hits[h]].idx;

			a->flags[j] = F_AOI;
			a->queue[q++] = j;
		}
	}
	for (size_t head = 0; head < q; head++) {
		uint32_t i = a->queue[head];
		const struct wire_event *e = &ev[i];
		uint32_t r;

		if (e->kind != WIRE_WAIT || e->readier_tid == 0)
			continue;
		r = thread_find(a, e->readier_tid);
		if (r == NONE)
			continue;
		nh = thread_overlaps(a, r, e->ts_ns, span_end(e));
		GROW(a, edges, cap_edges, a->nedges + nh);
		for (size_t h = 0; h < nh; h++) {
			uint32_t j = a->ents[a->hits[h]].idx;

			a->edges[a->nedges][0] = i;
			a->edges[a->nedges][1] = j;
			a->nedges++;
			if (!(a->flags[j] & F_AOI)) {
				a->flags[j] = F_AOI;
				a->queue[q++] = j;
			}
		}
	}
	*nout = collect(a, n);
	return edges_sort(a, n);
}

/* Critical walks visit a thread's events latest end first; ties: later start, then higher index. */
static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *x = pa, *y = pb;

	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;
	if (x->start != y->start)
		return x->start > y->start ? -1 : 1;
	return x->idx > y->idx ? -1 : x->idx < y->idx;
}

static int add_segment(struct aoi *a, int64_t tid, int64_t from, int64_t to, uint32_t event)
{
	if (a->nsegs == a->cap_segs)
		GROW(a, segs, cap_segs, a->nsegs + 1);
	a->segs[a->nsegs++] = (struct aoi_segment){
		.tid = tid, .from_ns = from, .to_ns = to, .event = event
	};
	return 0;
}

/* Starts a walk of thread tid over [lo, hi], handed over by `wait` (NONE: the symptom). */
static int push_walk(struct aoi *a, int64_t tid, int64_t lo, int64_t hi, uint32_t wait)
{
	uint32_t t = thread_find(a, tid);
	size_t nh = t == NONE ? 0 : thread_overlaps(a, t, lo, hi);
	struct cand *c;
	bool sorted = true;

	GROW(a, walks, cap_walks, a->nwalks + 1);
	GROW(a, cands, cap_cands, a->ncands + nh);
	c = a->cands + a->ncands;
	/* hits come in start order; reversed, a thread of disjoint events is in end order */
	for (size_t h = 0; h < nh; h++) {
		const struct ent *e = &a->ents[a->hits[nh - 1 - h]];

		c[h] = (struct cand){ .start = e->start, .end = e->end, .idx = e->idx };
		if (h && cand_cmp(&c[h - 1], &c[h]) > 0)
			sorted = false;
	}
	if (!sorted)
		qsort(c, nh, sizeof(*c), cand_cmp);
	a->walks[a->nwalks++] = (struct walk){
		.tid = tid, .lo = lo, .t = hi, .cand = a->ncands, .ncand = nh, .wait = wait
	};
	a->ncands += nh;
	return 0;
}

static int seg_cmp(const void *pa, const void *pb)
{
	const struct aoi_segment *x = pa, *y = pb;

	return x->from_ns < y->from_ns ? -1 : x->from_ns > y->from_ns;
}

/*
 * The critical path (docs/aoi.md): walks with an explicit stack, since a chain
 * of waits may be as long as the stream. Each wait is followed at most once,
 * which bounds the number of walks and ends cycles.
 */
static int extract_critical(struct aoi *a, const struct wire_event *ev, size_t n,
			    const struct wire_symptom *sym, size_t *nout)
{
	if (sym->start_ns <= sym->end_ns &&
	    push_walk(a, sym->tid, sym->start_ns, sym->end_ns, NONE) < 0)
		return -1;
	while (a->nwalks) {
		struct walk *w = &a->walks[a->nwalks - 1];
		const struct wire_event *e;
		struct cand c;
		int64_t s, u, tid = w->tid;

		if (w->pos == w->ncand) {
			if (w->t > w->lo && add_segment(a, tid, w->lo, w->t, AOI_GAP) < 0)
				return -1;
			a->ncands = w->cand;
			a->nwalks--;
			continue;
		}
		c = a->cands[w->cand + w->pos++];
		if (c.start > w->t)
			continue; /* its time went to a later event or to a readier */
		a->flags[c.idx] |= F_AOI;
		if (w->wait != NONE && add_edge(a, w->wait, c.idx) < 0)
			return -1;
		/* the query guarantees c.end >= w->lo, so lo <= s <= u <= t */
		s = c.start > w->lo ? c.start : w->lo;
		u = c.end < w->t ? c.end : w->t;
		if (u < w->t && add_segment(a, tid, u, w->t, AOI_GAP) < 0)
			return -1;
		w->t = s;
		e = &ev[c.idx];
		if (u > s && e->kind == WIRE_WAIT && e->readier_tid != 0 &&
		    !(a->flags[c.idx] & F_EXPANDED)) {
			a->flags[c.idx] |= F_EXPANDED;
			if (push_walk(a, e->readier_tid, s, u, c.idx) < 0) /* moves a->walks */
				return -1;
		} else if (u > s && add_segment(a, tid, s, u, c.idx) < 0) {
			return -1;
		}
	}
	if (a->nsegs > 1)
		qsort(a->segs, a->nsegs, sizeof(*a->segs), seg_cmp);
	*nout = collect(a, n);
	return edges_sort(a, n);
}

int aoi_extract(struct aoi *a, const struct wire_event *events, size_t n,
		const struct wire_symptom *sym, enum aoi_mode mode, const uint32_t **out,
		size_t *nout)
{
	int rc = 0;

	a->err[0] = '\0';
	a->nedges = a->nsegs = a->ncands = a->nwalks = 0;
	*out = no_events;
	*nout = 0;
	if (n >= UINT32_MAX) {
		snprintf(a->err, sizeof(a->err), "too many events (%zu, at most %u)", n,
			 (unsigned)(UINT32_MAX - 1));
		return -1;
	}
	if (!sym && mode != AOI_STREAM) {
		snprintf(a->err, sizeof(a->err), "no symptom for AOI mode %s", aoi_mode_name(mode));
		return -1;
	}
	if (reserve_events(a, n) < 0)
		return -1;
	switch (mode) {
	case AOI_STREAM:
		for (size_t i = 0; i < n; i++)
			a->queue[i] = (uint32_t)i;
		*nout = n;
		break;
	case AOI_THREAD:
		*nout = extract_thread(a, events, n, sym->tid, sym->start_ns, sym->end_ns);
		break;
	case AOI_WAITGRAPH:
	case AOI_CRITICAL:
		if (index_build(a, events, n) < 0)
			return -1;
		memset(a->flags, 0, n);
		rc = mode == AOI_WAITGRAPH ? extract_waitgraph(a, events, n, sym, nout) :
					     extract_critical(a, events, n, sym, nout);
		break;
	default:
		snprintf(a->err, sizeof(a->err), "unknown AOI mode %d", (int)mode);
		return -1;
	}
	if (rc < 0) {
		a->nedges = a->nsegs = 0;
		*nout = 0;
		return -1;
	}
	if (*nout)
		*out = a->queue;
	return 0;
}

/* ---- The content filter. ---- */

struct aoi_filter {
	char **inc, **exc;
	size_t ninc, nexc;
};

static char **copy_patterns(const char *const *p, size_t n)
{
	char **c = calloc(n ? n : 1, sizeof(*c));

	if (!c)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(c[i] = strdup(p[i]))) {
			while (i--)
				free(c[i]);
			free(c);
			return NULL;
		}
	return c;
}

struct aoi_filter *aoi_filter_open(const char *const *include, size_t ninclude,
				   const char *const *exclude, size_t nexclude)
{
	struct aoi_filter *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->inc = copy_patterns(include, ninclude);
	if (!f->inc)
		goto fail_free;
	f->ninc = ninclude;
	f->exc = copy_patterns(exclude, nexclude);
	if (!f->exc)
		goto fail_free;
	f->nexc = nexclude;
	return f;

fail_free:
	aoi_filter_free(f);
	return NULL;
}

void aoi_filter_free(struct aoi_filter *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->ninc; i++)
		free(f->inc[i]);
	for (size_t i = 0; i < f->nexc; i++)
		free(f->exc[i]);
	free(f->inc);
	free(f->exc);
	free(f);
}

bool aoi_filter_empty(const struct aoi_filter *f)
{
	return f->ninc == 0 && f->nexc == 0;
}

static bool any_match(char *const *pats, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (util_glob(pats[i], s))
			return true;
	return false;
}

bool aoi_filter_keep(const struct aoi_filter *f, const char *const *frames, size_t nframes)
{
	bool included = f->ninc == 0;

	for (size_t i = 0; i < nframes; i++) {
		if (any_match(f->exc, f->nexc, frames[i]))
			return false;
		if (!included && any_match(f->inc, f->ninc, frames[i]))
			included = true;
	}
	return included;
}

enum { M_KNOWN = 1, M_INC = 2, M_EXC = 4 };

int aoi_filter_stacks(const struct aoi_filter *f, const char *const *frames, size_t nframes,
		      const struct wire_stack *stacks, size_t nstacks, bool *keep)
{
	uint8_t *memo;

	if (aoi_filter_empty(f)) {
		for (size_t i = 0; i < nstacks; i++)
			keep[i] = true;
		return 0;
	}
	memo = calloc(nframes ? nframes : 1, 1);
	if (!memo)
		return -1;
	for (size_t i = 0; i < nstacks; i++) {
		bool included = f->ninc == 0, excluded = false;

		for (uint32_t k = 0; k < stacks[i].len && !excluded; k++) {
			uint32_t fr = stacks[i].frames[k];

			if (fr >= nframes)
				continue;
			if (!memo[fr])
				memo[fr] = M_KNOWN |
					   (any_match(f->inc, f->ninc, frames[fr]) ? M_INC : 0) |
					   (any_match(f->exc, f->nexc, frames[fr]) ? M_EXC : 0);
			included |= (memo[fr] & M_INC) != 0;
			excluded = (memo[fr] & M_EXC) != 0;
		}
		keep[i] = included && !excluded;
	}
	free(memo);
	return 0;
}
