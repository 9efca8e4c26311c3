/* runclust: cluster a run's patterns into the rows of its clusters (see runclust.h). */
#include "clusterer/runclust.h"
#include "clusterer/problem.h"
#include "clusterer/sim.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/intern.h"
#include "common/jsonw.h"
#include "common/par.h"
#include "common/vec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 512

struct ctx {
	runclust_ids_fn take_ids;
	void *ids_arg;
	char *err;
	size_t errlen;
	struct arena *a;
	const struct runclust_stack *rs;
	size_t nrs;
	const uint32_t *stream_idx;     /* dense stream numbers */
	const uint64_t *stream_cost;
	const double *stream_weight;    /* NULL: every stream weighs 1 */
	size_t nstreams;
	const struct runclust_stack *bs;
	size_t nbs;
	const struct excess *excess;
	int threads;
	const struct runclust_pattern *pats;
	size_t npats;
	struct vec kept;                /* struct kept: the clusters of both kinds, for the problems */
};

static int fail_oom(struct ctx *c)
{
	snprintf(c->err, c->errlen, "clustering: out of memory");
	return -1;
}

struct cl {
	uint64_t cost, events, avg;
	uint32_t streams;
	double est_cost, est_streams;  /* the same, each stream's share times its sampling weight */
	uint32_t rank[5];              /* total cost, streams, events, average cost, excess cost */
	/* the streams in which the cluster has a cost (violating and baseline), for the excess */
	uint32_t *xs;
	uint64_t *xc;
	size_t xn;
	uint64_t own;                  /* cost of the violating stacks it owns */
	struct excess_result ex;
	int xrc;
};

struct rank_by {
	const struct cl *cls;
	int metric;
};

static double metric(const struct cl *c, int m)
{
	return m == 0 ? (double)c->cost : m == 1 ? c->streams : m == 2 ? (double)c->events :
	       m == 3 ? (double)c->avg : c->ex.excess;
}

static int cmp_rank(const void *a, const void *b, void *arg)
{
	const struct rank_by *rb = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	const struct cl *cx = &rb->cls[x], *cy = &rb->cls[y];

	/* exact integers for the four metrics a double could round */
	if (rb->metric < 4) {
		uint64_t mx = rb->metric == 0 ? cx->cost : rb->metric == 1 ? cx->streams :
			      rb->metric == 2 ? cx->events : cx->avg;
		uint64_t my = rb->metric == 0 ? cy->cost : rb->metric == 1 ? cy->streams :
			      rb->metric == 2 ? cy->events : cy->avg;
		if (mx != my)
			return mx > my ? -1 : 1;
	} else if (metric(cx, 4) != metric(cy, 4)) {
		return metric(cx, 4) > metric(cy, 4) ? -1 : 1;
	}
	return x < y ? -1 : x > y;
}

/* Where the greedy embedding of p in the stack ends (1-based: the frame that completes it), 0 when
 * p is not a subsequence of it. The leftmost end is where the pattern is first fully seen. */
static uint32_t match_end(const struct runclust_pattern *p, const struct runclust_stack *st)
{
	uint32_t j = 0;

	for (uint32_t i = 0; i < st->len; i++)
		if (st->frames[i] == p->frames[j] && ++j == p->len)
			return i + 1;
	return 0;
}

/* The owner of each stack of the kind, violating (side 0) and baseline (side 1): of the clusters
 * with a member contained in it, the one whose member ends deepest in the stack, then the longer
 * member, then the better rank by total cost. Each event thus counts for the excess of one cluster. */
struct owners {
	uint32_t *cl[2];        /* cluster, UINT32_MAX: none */
	uint32_t *end[2];
	uint32_t *len[2];
};

static void own_stacks(struct ctx *c, const struct hclust_clusters *hc, size_t lo, const struct cl *cls,
		       struct owners *ow)
{
	for (size_t k = 0; k < hc->nclusters; k++)
		for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++) {
			const struct runclust_pattern *p = &c->pats[lo + hc->members[m]];

			for (int side = 0; side < 2; side++) {
				const uint32_t *st = side ? p->bstacks : p->stacks;
				uint32_t nst = side ? p->nbstacks : p->nstacks;

				for (uint32_t i = 0; i < nst; i++) {
					uint32_t t = st[i], e = match_end(p, side ? &c->bs[t] : &c->rs[t]);
					uint32_t o = ow->cl[side][t];

					if (!e)
						continue;
					if (o != UINT32_MAX &&
					    (e < ow->end[side][t] ||
					     (e == ow->end[side][t] &&
					      (p->len < ow->len[side][t] ||
					       (p->len == ow->len[side][t] && cls[o].rank[0] <= cls[k].rank[0])))))
						continue;
					ow->cl[side][t] = (uint32_t)k;
					ow->end[side][t] = e;
					ow->len[side][t] = p->len;
				}
			}
		}
}

/* The streams in which cluster k has a cost in the stacks it owns, and that cost: violating ones
 * (whose sum is its own cost) and baseline ones. by[side][off[side][k] .. off[side][k + 1]) are
 * the stacks it owns. The first pass sums per stream, the second collects each stream once. */
static int cluster_streams(struct ctx *c, size_t k, uint32_t *const by[2], uint32_t *const off[2],
			   uint32_t *stamp, uint64_t *acc, struct cl *cl)
{
	uint32_t gen = (uint32_t)k + 1;
	size_t n = 0;

	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			cl->xs = arena_alloc(c->a, (n + 1) * sizeof(*cl->xs));
			cl->xc = arena_alloc(c->a, (n + 1) * sizeof(*cl->xc));
			if (!cl->xs || !cl->xc)
				return -1;
		}
		for (int side = 0; side < 2; side++)
			for (uint32_t i = off[side][k]; i < off[side][k + 1]; i++) {
				const struct runclust_stack *r = side ? &c->bs[by[side][i]] : &c->rs[by[side][i]];

				if (pass == 0 && side == 0)
					cl->own += r->cost;
				for (uint32_t x = r->first; x < r->first + r->n; x++) {
					uint32_t s = c->stream_idx[x];

					if (pass == 1) {
						if (stamp[s] == gen) {
							stamp[s] = 0;
							cl->xs[cl->xn] = s;
							cl->xc[cl->xn++] = acc[s];
						}
					} else if (stamp[s] != gen) {
						stamp[s] = gen;
						acc[s] = c->stream_cost[x];
						n++;
					} else {
						acc[s] += c->stream_cost[x];
					}
				}
			}
	}
	return 0;
}

struct excess_job {
	struct ctx *c;
	struct cl *cls;
	struct par_items items;
};

static void excess_worker(void *arg, int w)
{
	struct excess_job *j = arg;
	size_t k;

	(void)w;
	while (par_take(&j->items, &k))
		j->cls[k].xrc = excess_measure(j->c->excess, j->cls[k].xs, j->cls[k].xc, j->cls[k].xn,
					       &j->cls[k].ex);
}

/* Each cluster's excess over the stacks it owns (own_stacks()), measured on all cores. */
static int excess_clusters(struct ctx *c, const struct hclust_clusters *hc, size_t lo, struct cl *cls)
{
	size_t nst[2] = { c->nrs, c->nbs };
	struct owners ow;
	uint32_t *by[2], *off[2], *stamp;
	uint64_t *acc;
	struct excess_job job = { c, cls, { 0, 0 } };

	for (int side = 0; side < 2; side++) {
		ow.cl[side] = arena_alloc(c->a, (nst[side] + 1) * sizeof(uint32_t));
		ow.end[side] = arena_calloc(c->a, nst[side] + 1, sizeof(uint32_t));
		ow.len[side] = arena_calloc(c->a, nst[side] + 1, sizeof(uint32_t));
		by[side] = arena_alloc(c->a, (nst[side] + 1) * sizeof(uint32_t));
		off[side] = arena_calloc(c->a, hc->nclusters + 2, sizeof(uint32_t));
		if (!ow.cl[side] || !ow.end[side] || !ow.len[side] || !by[side] || !off[side])
			return fail_oom(c);
		memset(ow.cl[side], 0xff, (nst[side] + 1) * sizeof(uint32_t));
	}
	stamp = arena_calloc(c->a, c->nstreams + 1, sizeof(uint32_t));
	acc = arena_alloc(c->a, (c->nstreams + 1) * sizeof(uint64_t));
	if (!stamp || !acc)
		return fail_oom(c);
	own_stacks(c, hc, lo, cls, &ow);
	/* the stacks of each cluster, by a counting sort on their owner */
	for (int side = 0; side < 2; side++) {
		for (size_t t = 0; t < nst[side]; t++)
			if (ow.cl[side][t] != UINT32_MAX)
				off[side][ow.cl[side][t] + 2]++;
		for (size_t k = 0; k < hc->nclusters; k++)
			off[side][k + 2] += off[side][k + 1];
		for (size_t t = 0; t < nst[side]; t++)
			if (ow.cl[side][t] != UINT32_MAX)
				by[side][off[side][ow.cl[side][t] + 1]++] = (uint32_t)t;
	}
	for (size_t k = 0; k < hc->nclusters; k++)
		if (cluster_streams(c, k, by, off, stamp, acc, &cls[k]) < 0)
			return fail_oom(c);
	par_items_init(&job.items, hc->nclusters);
	par_run(par_threads(c->threads), excess_worker, &job);
	for (size_t k = 0; k < hc->nclusters; k++)
		if (cls[k].xrc < 0)
			return fail_oom(c);
	return 0;
}

static void put_nullable(struct buf *out, double v)
{
	if (isnan(v))
		buf_puts(out, "\\N\t");
	else
		buf_printf(out, "%lld\t", (long long)llround(v));
}

/* A cluster of either kind, kept for the problems (problem.h) and its row's end. */
struct kept {
	int64_t id;
	uint64_t cost, own;
	uint32_t *stacks, nstacks;      /* its matched violating stacks, each once (indexes into rs) */
	/* the violating streams in which it has a cost in the stacks it owns (own_stacks()), and that
	 * cost: an event matched by a deeper cluster too is that one's, so that request dispatch,
	 * matched by every request's events, links no problem through them */
	uint32_t *streams, nstreams;
	uint64_t *scost;
	const uint32_t *xs;             /* excess: the streams of the stacks it owns (cl.xs) */
	const uint64_t *xc;
	size_t xn;
	uint32_t *common, ncommon;      /* the common part's frame ids */
	char *row;                      /* its COPY row up to the estimates */
	uint32_t problem;
	int64_t problem_id;
	uint32_t title[PROBLEM_TITLE_MAX];
	uint8_t ntitle;
};

/* n ids of table (clusters or problems), from the caller. */
static int take_ids(struct ctx *c, const char *table, size_t n, int64_t *ids)
{
	return c->take_ids(c->ids_arg, table, n, ids, c->err, c->errlen);
}

/* Sums the cost of the violating stacks st[0..n) per stream into acc (stamp[s] == gen marks a
 * stream seen) and lists the streams; returns how many, or -1 when out of memory. */
static int64_t stream_costs(struct ctx *c, const uint32_t *st, size_t n, uint32_t *stamp, uint32_t gen,
			    uint64_t *acc, uint32_t **streams, uint64_t **cost)
{
	size_t ns = 0;

	for (size_t i = 0; i < n; i++) {
		const struct runclust_stack *r = &c->rs[st[i]];

		for (uint32_t x = r->first; x < r->first + r->n; x++) {
			uint32_t s = c->stream_idx[x];

			if (stamp[s] != gen) {
				stamp[s] = gen;
				acc[s] = 0;
				ns++;
			}
			acc[s] += c->stream_cost[x];
		}
	}
	*streams = arena_alloc(c->a, (ns + 1) * sizeof(**streams));
	*cost = arena_alloc(c->a, (ns + 1) * sizeof(**cost));
	if (!*streams || !*cost)
		return -1;
	ns = 0;
	for (size_t i = 0; i < n; i++) {
		const struct runclust_stack *r = &c->rs[st[i]];

		for (uint32_t x = r->first; x < r->first + r->n; x++) {
			uint32_t s = c->stream_idx[x];

			if (stamp[s] == gen) {
				stamp[s] = gen - 1;     /* listed */
				(*streams)[ns] = s;
				(*cost)[ns++] = acc[s];
			}
		}
	}
	return (int64_t)ns;
}

/* Keeps the clusters of one kind just clustered (their ids taken) for the problems. */
static int keep_clusters(struct ctx *c, const struct hclust_clusters *hc, size_t lo, const struct cl *cls)
{
	int64_t *ids = arena_alloc(c->a, (hc->nclusters + 1) * sizeof(*ids));
	uint32_t *stamp_t = arena_calloc(c->a, c->nrs + 1, sizeof(uint32_t));
	uint32_t *stamp_s = arena_calloc(c->a, c->nstreams + 1, sizeof(uint32_t));
	uint64_t *acc = arena_alloc(c->a, (c->nstreams + 1) * sizeof(uint64_t));
	uint32_t *owned = arena_alloc(c->a, (c->nrs + 1) * sizeof(uint32_t));
	size_t nside[2] = { c->nrs, c->nbs }, nown;
	struct owners ow;

	if (!ids || !stamp_t || !stamp_s || !acc || !owned)
		return fail_oom(c);
	for (int side = 0; side < 2; side++) {
		ow.cl[side] = arena_alloc(c->a, (nside[side] + 1) * sizeof(uint32_t));
		ow.end[side] = arena_calloc(c->a, nside[side] + 1, sizeof(uint32_t));
		ow.len[side] = arena_calloc(c->a, nside[side] + 1, sizeof(uint32_t));
		if (!ow.cl[side] || !ow.end[side] || !ow.len[side])
			return fail_oom(c);
		memset(ow.cl[side], 0xff, (nside[side] + 1) * sizeof(uint32_t));
	}
	own_stacks(c, hc, lo, cls, &ow);
	if (take_ids(c, "clusters", hc->nclusters, ids) < 0)
		return -1;
	for (size_t k = 0; k < hc->nclusters; k++) {
		const struct runclust_pattern *mp = &c->pats[lo + hc->medoid[k]];
		struct kept *kp = vec_push(&c->kept);
		size_t nst = 0;
		int64_t ns;

		if (!kp)
			return fail_oom(c);
		memset(kp, 0, sizeof(*kp));
		kp->id = ids[k];
		kp->cost = cls[k].cost;
		kp->own = cls[k].own;
		kp->xs = cls[k].xs;
		kp->xc = cls[k].xc;
		kp->xn = cls[k].xn;
		for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++)
			nst += c->pats[lo + hc->members[m]].nstacks;
		kp->stacks = arena_alloc(c->a, (nst + 1) * sizeof(uint32_t));
		kp->ncommon = hc->common_off[k + 1] - hc->common_off[k];
		kp->common = arena_alloc(c->a, (kp->ncommon + 1) * sizeof(uint32_t));
		if (!kp->stacks || !kp->common)
			return fail_oom(c);
		for (uint32_t j = 0; j < kp->ncommon; j++)
			kp->common[j] = mp->frames[hc->common[hc->common_off[k] + j]];
		for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++) {
			const struct runclust_pattern *p = &c->pats[lo + hc->members[m]];

			for (uint32_t s = 0; s < p->nstacks; s++)
				if (stamp_t[p->stacks[s]] != k + 1) {
					stamp_t[p->stacks[s]] = (uint32_t)k + 1;
					kp->stacks[kp->nstacks++] = p->stacks[s];
				}
		}
		nown = 0;
		for (uint32_t i = 0; i < kp->nstacks; i++)
			if (ow.cl[0][kp->stacks[i]] == k)
				owned[nown++] = kp->stacks[i];
		/* generations 2k + 2 (seen) and 2k + 1 (listed): never 0, the arrays' start */
		ns = stream_costs(c, owned, nown, stamp_s, 2 * (uint32_t)k + 2, acc, &kp->streams, &kp->scost);
		if (ns < 0)
			return fail_oom(c);
		kp->nstreams = (uint32_t)ns;
	}
	return 0;
}

/* One kind's clustering: its patterns pats[lo .. lo + n) as the similarity sees them, their
 * clusters, each cluster's metrics, and scratch (all in the arena, but sc). */
struct kind_cl {
	struct ctx *c;
	size_t lo, n;
	struct sim_pattern *sp;
	const struct hclust_clusters *hc;
	struct sim_ctx *sc;
	struct cl *cls;
	uint32_t *stamp_s, *stamp_t, *order;
};

/* The patterns with their frames' weights, for the similarity. */
static int kind_patterns(struct kind_cl *kc, struct sim_frames *ft)
{
	struct ctx *c = kc->c;

	kc->sp = arena_calloc(c->a, kc->n, sizeof(*kc->sp));
	if (!kc->sp)
		return fail_oom(c);
	for (size_t i = 0; i < kc->n; i++) {
		const struct runclust_pattern *p = &c->pats[kc->lo + i];
		double *w = arena_alloc(c->a, p->len * sizeof(double));
		if (!w)
			return fail_oom(c);
		sim_weights(ft, p->frames, p->len, w);
		kc->sp[i].frames = p->frames;
		kc->sp[i].w = w;
		kc->sp[i].len = p->len;
	}
	return 0;
}

static int kind_alloc(struct kind_cl *kc, struct sim_frames *ft)
{
	struct ctx *c = kc->c;

	kc->sc = sim_ctx_open(ft);
	kc->cls = arena_calloc(c->a, kc->hc->nclusters + 1, sizeof(*kc->cls));
	kc->stamp_s = arena_calloc(c->a, c->nstreams + 1, sizeof(uint32_t));
	kc->stamp_t = arena_calloc(c->a, c->nrs + 1, sizeof(uint32_t));
	kc->order = arena_alloc(c->a, (kc->hc->nclusters + 1) * sizeof(uint32_t));
	if (!kc->sc || !kc->cls || !kc->stamp_s || !kc->stamp_t || !kc->order)
		return fail_oom(c);
	return 0;
}

/* Metrics: the union of the members' supporting stacks, each counted once. */
static void kind_metrics(struct kind_cl *kc)
{
	const struct ctx *c = kc->c;
	const struct hclust_clusters *hc = kc->hc;
	struct cl *cls = kc->cls;

	for (size_t k = 0; k < hc->nclusters; k++) {
		for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++) {
			const struct runclust_pattern *p = &c->pats[kc->lo + hc->members[m]];
			for (uint32_t s = 0; s < p->nstacks; s++) {
				const struct runclust_stack *r = &c->rs[p->stacks[s]];
				if (kc->stamp_t[p->stacks[s]] == k + 1)
					continue;
				kc->stamp_t[p->stacks[s]] = (uint32_t)k + 1;
				cls[k].cost += r->cost;
				cls[k].events += r->events;
				for (uint32_t x = r->first; x < r->first + r->n; x++) {
					double wt = c->stream_weight ? c->stream_weight[c->stream_idx[x]] : 1;

					cls[k].est_cost += wt * (double)c->stream_cost[x];
					if (kc->stamp_s[c->stream_idx[x]] != k + 1) {
						kc->stamp_s[c->stream_idx[x]] = (uint32_t)k + 1;
						cls[k].streams++;
						cls[k].est_streams += wt;
					}
				}
			}
		}
		cls[k].avg = cls[k].events ? cls[k].cost / cls[k].events : 0;
	}
}

/* Each cluster's rank by metric mt (see struct cl's rank). */
static void kind_rank(struct kind_cl *kc, int mt)
{
	struct rank_by rb = { kc->cls, mt };
	uint32_t nc = (uint32_t)kc->hc->nclusters;

	for (uint32_t k = 0; k < nc; k++)
		kc->order[k] = k;
	qsort_r(kc->order, nc, sizeof(*kc->order), cmp_rank, &rb);
	for (uint32_t r = 0; r < nc; r++)
		kc->cls[kc->order[r]].rank[mt] = r + 1;
}

/* A cluster row's metrics, ranks and excess columns. */
static void row_metrics(const struct kind_cl *kc, size_t k, const char *run, char kind, struct buf *out)
{
	const struct cl *cl = &kc->cls[k];

	buf_printf(out, "%s\t%c\t%llu\t%u\t%llu\t%llu\t%u\t%u\t%u\t%u\t", run, kind,
		   (unsigned long long)cl->cost, cl->streams,
		   (unsigned long long)cl->events, (unsigned long long)cl->avg,
		   cl->rank[0], cl->rank[1], cl->rank[2], cl->rank[3]);
	if (kc->c->excess) {
		const struct excess_result *ex = &cl->ex;

		buf_printf(out, "%u\t%llu\t", ex->baseline_streams, (unsigned long long)cl->own);
		put_nullable(out, ex->baseline_cost);
		put_nullable(out, ex->expected);
		put_nullable(out, ex->excess);
		put_nullable(out, ex->lo);
		put_nullable(out, ex->hi);
		buf_printf(out, "%u\t", cl->rank[4]);
	} else {
		buf_puts(out, "\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t");
	}
}

/* A cluster row's medoid, common frames, members, and the matched stacks, for the pages'
 * breakdowns (a second stamp: k + 1 + n). */
/* Costliest first, then by stack id (the order of a cluster's stack_ids). */
static int cmp_stack_cost(const void *a, const void *b, void *arg)
{
	const struct runclust_stack *rs = arg, *x = &rs[*(const uint32_t *)a], *y = &rs[*(const uint32_t *)b];

	if (x->cost != y->cost)
		return x->cost > y->cost ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* The row's medoid, common part, members and stacks: kp's, costliest first, so that a page reads
 * the costliest of a cluster of thousands of stacks as a slice (stack_ids[1:N]). */
static int row_members(const struct kind_cl *kc, size_t k, const struct kept *kp, struct buf *out)
{
	const struct ctx *c = kc->c;
	const struct hclust_clusters *hc = kc->hc;
	const struct runclust_pattern *mp = &c->pats[kc->lo + hc->medoid[k]];
	uint32_t *st = arena_alloc(c->a, ((size_t)kp->nstacks + 1) * sizeof(*st));

	buf_printf(out, "%lld\t{", (long long)mp->id);
	for (uint32_t j = hc->common_off[k]; j < hc->common_off[k + 1]; j++)
		buf_printf(out, j > hc->common_off[k] ? ",%u" : "%u", mp->frames[hc->common[j]]);
	buf_puts(out, "}\t{");
	for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++)
		buf_printf(out, m > hc->off[k] ? ",%lld" : "%lld", (long long)c->pats[kc->lo + hc->members[m]].id);
	buf_puts(out, "}\t{");
	if (!st)
		return -1;
	memcpy(st, kp->stacks, kp->nstacks * sizeof(*st));
	qsort_r(st, kp->nstacks, sizeof(*st), cmp_stack_cost, (void *)c->rs);
	for (uint32_t i = 0; i < kp->nstacks; i++)
		buf_printf(out, i ? ",%u" : "%u", c->rs[st[i]].stack_id);
	buf_puts(out, "}\t");
	return 0;
}

/* A cluster row's alignments of its members to the medoid, as JSON (numbers and op letters:
 * nothing COPY must escape). */
static int row_alignments(struct kind_cl *kc, size_t k, struct jsonw *w)
{
	struct ctx *c = kc->c;
	const struct hclust_clusters *hc = kc->hc;
	uint32_t med = hc->medoid[k];

	jsonw_array(w);
	for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++) {
		const struct sim_alignment *al;
		static const char op[] = { 'M', 'S', 'D', 'I' };
		char ops[2 * SIM_MAX_LEN + 1];
		size_t no = 0;

		if (sim_align(kc->sc, &kc->sp[med], &kc->sp[hc->members[m]], &al) < 0) {
			snprintf(c->err, c->errlen, "clustering: %s", sim_ctx_error(kc->sc));
			return -1;
		}
		for (size_t st = 0; st < al->nsteps && no + 1 < sizeof(ops); st++)
			ops[no++] = op[al->steps[st].op];
		ops[no] = '\0';
		jsonw_object(w);
		jsonw_ki64(w, "pattern", c->pats[kc->lo + hc->members[m]].id);
		jsonw_kdouble(w, "sim", round(al->sim * 1e6) / 1e6);
		jsonw_kstr(w, "ops", ops);
		jsonw_end(w);
	}
	jsonw_end(w);
	return 0;
}

/* Cluster k's row up to its estimates, kept with it (out: scratch): the row's end (id, title,
 * problem) comes with the problems. */
static int kind_row(struct kind_cl *kc, size_t k, const char *run, struct buf *out)
{
	struct ctx *c = kc->c;
	const struct hclust_clusters *hc = kc->hc;
	const struct cl *cl = &kc->cls[k];
	struct kept *kp = (struct kept *)c->kept.data + c->kept.len - hc->nclusters + k;
	struct jsonw w;

	row_metrics(kc, k, run, c->pats[kc->lo + hc->medoid[k]].kind, out);
	if (row_members(kc, k, kp, out) < 0)
		return fail_oom(c);
	jsonw_init(&w, out);
	if (row_alignments(kc, k, &w) < 0)
		return -1;
	if (jsonw_finish(&w) < 0 ||
	    buf_printf(out, "	%lld	", (long long)llround(cl->est_cost)) < 0 ||
	    buf_put_double(out, cl->est_streams) < 0 || buf_error(out) != BUF_OK ||
	    !(kp->row = arena_strndup(c->a, out->data, out->len)))
		return fail_oom(c);
	buf_reset(out);
	return 0;
}

/* Cluster the patterns of one kind (pats[lo..hi)) and keep their rows (c->kept; out: scratch). */
static int cluster_kind(struct ctx *c, struct sim_frames *ft, const struct runclust_opts *o,
			size_t lo, size_t hi, const char *run, struct buf *out, size_t *ncl)
{
	struct kind_cl kc = { .c = c, .lo = lo, .n = hi - lo };
	struct hclust_opts ho = { o->method, o->cut, o->threads };
	struct hclust *h;
	int rc = -1;

	if (kc.n == 0)
		return 0;
	if (kind_patterns(&kc, ft) < 0)
		return -1;
	h = hclust_open();
	if (!h)
		return fail_oom(c);
	if (hclust_patterns(h, ft, kc.sp, kc.n, &ho, &kc.hc) < 0) {
		snprintf(c->err, c->errlen, "clustering: %s", hclust_error(h));
		goto out;
	}
	if (kind_alloc(&kc, ft) < 0)
		goto out;
	kind_metrics(&kc);
	for (int mt = 0; mt < 4; mt++)
		kind_rank(&kc, mt);
	if (c->excess) {
		if (excess_clusters(c, kc.hc, lo, kc.cls) < 0)
			goto out;
		kind_rank(&kc, 4);
	}
	if (keep_clusters(c, kc.hc, lo, kc.cls) < 0)
		goto out;
	for (size_t k = 0; k < kc.hc->nclusters; k++)
		if (kind_row(&kc, k, run, out) < 0)
			goto out;
	*ncl += kc.hc->nclusters;
	rc = 0;
out:
	sim_ctx_free(kc.sc);
	hclust_free(h);
	return rc;
}

/* A problem: its member clusters (indexes into kept, costliest first) and metrics. */
struct prob {
	int64_t id;
	uint32_t *members, nmembers;
	uint64_t cost, events, avg, own;
	uint32_t streams, rank;
	bool machine;                   /* its costliest cluster is CPU starvation: ranked after the code's */
	double est_cost, est_streams;   /* weighted by the streams' sampling weights */
	struct excess_result ex;
	uint32_t title[PROBLEM_TITLE_MAX];
	uint8_t ntitle;
};

static int cmp_members(const void *a, const void *b, void *arg)
{
	const struct kept *k = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (k[x].cost != k[y].cost)
		return k[x].cost > k[y].cost ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int cmp_problems(const void *a, const void *b, void *arg)
{
	const struct prob *p = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (p[x].machine != p[y].machine)
		return p[x].machine ? 1 : -1;
	if (p[x].cost != p[y].cost)
		return p[x].cost > p[y].cost ? -1 : 1;
	return x < y ? -1 : x > y;
}

static bool frame_named(uint32_t f, void *arg)
{
	size_t len;
	const char *name = sim_frames_name(arg, f, &len);

	return name && problem_frame_named(name, len);
}

static uint64_t frame_streams(uint32_t f, void *arg)
{
	return sim_frames_streams_of(arg, f);
}

/* A problem's metrics over its members' matched stacks, each once (stamp_t[t] == gen: seen), and
 * its excess over the stacks they own (each owned by one cluster: summed per stream). */
static int problem_metrics(struct ctx *c, const struct kept *kp, struct prob *p, uint32_t gen, uint32_t *stamp_t,
			   uint32_t *stamp_s, uint64_t *acc, struct vec *st)
{
	uint32_t *streams;
	uint64_t *scost;
	int64_t ns;

	st->len = 0;
	for (uint32_t m = 0; m < p->nmembers; m++) {
		const struct kept *k = &kp[p->members[m]];

		p->own += k->own;
		for (uint32_t i = 0; i < k->nstacks; i++)
			if (stamp_t[k->stacks[i]] != gen) {
				stamp_t[k->stacks[i]] = gen;
				p->events += c->rs[k->stacks[i]].events;
				if (vec_append(st, &k->stacks[i]) < 0)
					return fail_oom(c);
			}
	}
	ns = stream_costs(c, st->data, st->len, stamp_s, 3 * gen + 2, acc, &streams, &scost);
	if (ns < 0)
		return fail_oom(c);
	p->streams = (uint32_t)ns;
	for (int64_t i = 0; i < ns; i++) {
		double wt = c->stream_weight ? c->stream_weight[streams[i]] : 1;

		p->cost += scost[i];
		p->est_cost += wt * (double)scost[i];
		p->est_streams += wt;
	}
	p->avg = p->events ? p->cost / p->events : 0;
	if (c->excess) {
		size_t nx = 0;

		for (uint32_t m = 0; m < p->nmembers; m++)
			nx += kp[p->members[m]].xn;
		streams = arena_alloc(c->a, (nx + 1) * sizeof(*streams));
		scost = arena_alloc(c->a, (nx + 1) * sizeof(*scost));
		if (!streams || !scost)
			return fail_oom(c);
		nx = 0;
		/* a third generation of the stream stamps: 3 gen + 3 (acc: the stream's index once) */
		for (uint32_t m = 0; m < p->nmembers; m++) {
			const struct kept *k = &kp[p->members[m]];

			for (size_t i = 0; i < k->xn; i++) {
				uint32_t s = k->xs[i];

				if (stamp_s[s] != 3 * gen + 3) {
					stamp_s[s] = 3 * gen + 3;
					acc[s] = nx;
					streams[nx] = s;
					scost[nx++] = 0;
				}
				scost[acc[s]] += k->xc[i];
			}
		}
		if (excess_measure(c->excess, streams, scost, nx, &p->ex) < 0)
			return fail_oom(c);
	}
	return 0;
}

/* Titles of the problems and of the clusters (problem_titles()). */
static int title_all(struct ctx *c, struct sim_frames *ft, struct kept *kp, size_t nk, struct prob *pr, size_t np)
{
	struct problem_unit *u = arena_calloc(c->a, (nk > np ? nk : np) + 1, sizeof(*u));
	uint32_t *out = arena_alloc(c->a, ((nk > np ? nk : np) + 1) * PROBLEM_TITLE_MAX * sizeof(uint32_t));
	uint8_t *nout = arena_alloc(c->a, (nk > np ? nk : np) + 1);
	struct problem_frames fr = { frame_named, frame_streams, ft };

	if (!u || !out || !nout)
		return fail_oom(c);
	for (size_t i = 0; i < np; i++) {
		const struct kept *lead = &kp[pr[i].members[0]];
		struct problem_seq *alt = arena_alloc(c->a, pr[i].nmembers * sizeof(*alt));
		uint32_t n = 0, *set;

		for (uint32_t m = 0; m < pr[i].nmembers; m++)
			n += kp[pr[i].members[m]].ncommon;
		if (!alt || !(set = arena_alloc(c->a, (n + 1) * sizeof(*set))))
			return fail_oom(c);
		n = 0;
		for (uint32_t m = 0; m < pr[i].nmembers; m++) {
			const struct kept *k = &kp[pr[i].members[m]];

			for (uint32_t j = 0; j < k->ncommon; j++)
				set[n++] = k->common[j];
			alt[m] = (struct problem_seq){ k->common, k->ncommon };
		}
		/* the lead (costliest) first; the others after it in the members' order */
		u[i] = (struct problem_unit){ lead->common, lead->ncommon, set, n, alt + 1, pr[i].nmembers - 1 };
	}
	if (problem_titles(u, np, &fr, out, nout) < 0)
		return fail_oom(c);
	for (size_t i = 0; i < np; i++) {
		pr[i].ntitle = nout[i];
		memcpy(pr[i].title, out + i * PROBLEM_TITLE_MAX, nout[i] * sizeof(uint32_t));
	}
	for (size_t i = 0; i < nk; i++)
		u[i] = (struct problem_unit){ kp[i].common, kp[i].ncommon, kp[i].common, kp[i].ncommon, NULL, 0 };
	if (problem_titles(u, nk, &fr, out, nout) < 0)
		return fail_oom(c);
	for (size_t i = 0; i < nk; i++) {
		kp[i].ntitle = nout[i];
		memcpy(kp[i].title, out + i * PROBLEM_TITLE_MAX, nout[i] * sizeof(uint32_t));
	}
	return 0;
}

static void put_ids(struct buf *out, const uint32_t *ids, size_t n)
{
	buf_putc(out, '{');
	for (size_t i = 0; i < n; i++)
		buf_printf(out, i ? ",%u" : "%u", ids[i]);
	buf_putc(out, '}');
}

/* A cluster of the machine: the innermost frame of its common part is a CPU starvation
 * pseudo-frame (a wait of one frame: problem_frame_machine()). */
static bool cluster_machine(struct sim_frames *ft, const struct kept *k)
{
	const char *name;
	size_t len;

	if (k->ncommon == 0 || !(name = sim_frames_name(ft, k->common[k->ncommon - 1], &len)))
		return false;
	return problem_frame_machine(name, len);
}

/* Groups the kept clusters into problems (problem.h), writes the problems' COPY rows to prows and
 * the clusters' to rows (each kept row ended by its id, title and problem). */
static int build_problems(struct ctx *c, struct sim_frames *ft, const char *run, struct buf *rows,
			  struct buf *prows, size_t *nproblems)
{
	struct kept *kp = c->kept.data;
	size_t nk = c->kept.len, np = 0;
	struct problem_cluster *pc = arena_alloc(c->a, (nk + 1) * sizeof(*pc));
	uint32_t *label = arena_alloc(c->a, (nk + 1) * sizeof(*label));
	uint32_t *stamp_t = arena_calloc(c->a, c->nrs + 1, sizeof(uint32_t));
	uint32_t *stamp_s = arena_calloc(c->a, c->nstreams + 1, sizeof(uint32_t));
	uint64_t *acc = arena_alloc(c->a, (c->nstreams + 1) * sizeof(uint64_t));
	uint32_t *order;
	int64_t *ids;
	struct prob *pr;
	struct vec st = VEC_INIT(uint32_t);
	int rc = -1;

	*nproblems = 0;
	if (nk == 0)
		return 0;
	if (!pc || !label || !stamp_t || !stamp_s || !acc)
		return fail_oom(c);
	for (size_t i = 0; i < nk; i++)
		pc[i] = (struct problem_cluster){ kp[i].streams, kp[i].scost, kp[i].nstreams, cluster_machine(ft, &kp[i]),
						   kp[i].common, kp[i].ncommon };
	if (problem_group(pc, nk, c->nstreams, PROBLEM_THETA, label, &np, c->err, c->errlen) < 0)
		return -1;
	pr = arena_calloc(c->a, np + 1, sizeof(*pr));
	order = arena_alloc(c->a, (np + nk + 1) * sizeof(*order));
	ids = arena_alloc(c->a, (np + 1) * sizeof(*ids));
	if (!pr || !order || !ids)
		return fail_oom(c);
	for (size_t i = 0; i < nk; i++) {
		kp[i].problem = label[i];
		pr[label[i]].nmembers++;
	}
	for (size_t p = 0; p < np; p++) {
		if (!(pr[p].members = arena_alloc(c->a, pr[p].nmembers * sizeof(uint32_t))))
			return fail_oom(c);
		pr[p].nmembers = 0;
	}
	for (size_t i = 0; i < nk; i++)
		pr[label[i]].members[pr[label[i]].nmembers++] = (uint32_t)i;
	for (size_t p = 0; p < np; p++) {
		qsort_r(pr[p].members, pr[p].nmembers, sizeof(uint32_t), cmp_members, kp);
		pr[p].machine = cluster_machine(ft, &kp[pr[p].members[0]]);
		if (problem_metrics(c, kp, &pr[p], (uint32_t)p + 1, stamp_t, stamp_s, acc, &st) < 0)
			goto out;
		order[p] = (uint32_t)p;
	}
	qsort_r(order, np, sizeof(*order), cmp_problems, pr);
	for (uint32_t r = 0; r < np; r++)
		pr[order[r]].rank = r + 1;
	if (title_all(c, ft, kp, nk, pr, np) < 0 || take_ids(c, "problems", np, ids) < 0)
		goto out;
	for (size_t p = 0; p < np; p++) {
		pr[p].id = ids[p];
		buf_printf(prows, "%lld\t%s\t%u\t", (long long)pr[p].id, run, pr[p].rank);
		put_ids(prows, pr[p].title, pr[p].ntitle);
		buf_printf(prows, "\t%llu\t%u\t%llu\t%llu\t{", (unsigned long long)pr[p].cost, pr[p].streams,
			   (unsigned long long)pr[p].events, (unsigned long long)pr[p].avg);
		for (uint32_t m = 0; m < pr[p].nmembers; m++)
			buf_printf(prows, m ? ",%lld" : "%lld", (long long)kp[pr[p].members[m]].id);
		buf_puts(prows, "}\t");
		if (c->excess) {
			buf_printf(prows, "%u\t%llu\t", pr[p].ex.baseline_streams, (unsigned long long)pr[p].own);
			put_nullable(prows, pr[p].ex.expected);
			put_nullable(prows, pr[p].ex.excess);
			put_nullable(prows, pr[p].ex.lo);
			put_nullable(prows, pr[p].ex.hi);
		} else {
			buf_puts(prows, "\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t");
		}
		buf_printf(prows, "%lld\t", (long long)llround(pr[p].est_cost));
		buf_put_double(prows, pr[p].est_streams);
		buf_puts(prows, pr[p].machine ? "\tcpu\n" : "\tcode\n");
	}
	for (size_t i = 0; i < nk; i++) {
		buf_printf(rows, "%s\t%lld\t", kp[i].row, (long long)kp[i].id);
		put_ids(rows, kp[i].title, kp[i].ntitle);
		buf_printf(rows, "\t%lld\n", (long long)pr[kp[i].problem].id);
		kp[i].problem_id = pr[kp[i].problem].id;
	}
	*nproblems = np;
	rc = 0;
out:
	vec_free(&st);
	return rc;
}

int runclust_frame_ids(const struct runclust_input *in, uint32_t **ids, size_t *n)
{
	size_t k = 0;

	*n = 0;
	for (size_t i = 0; i < in->npats; i++)
		k += in->pats[i].len;
	*ids = malloc(vec_bytes(k + 1, sizeof(**ids)));
	if (!*ids)
		return -1;
	for (size_t i = 0; i < in->npats; i++)
		for (uint32_t j = 0; j < in->pats[i].len; j++)
			(*ids)[(*n)++] = in->pats[i].frames[j];
	return 0;
}

void runclust_matches_release(struct runclust_matches *mm)
{
	if (!mm)
		return;
	free(mm->m);
	free(mm->stacks);
	memset(mm, 0, sizeof(*mm));
}

/* The kept clusters' stacks, out of the arena, for the caller. */
static int keep_matches(struct ctx *c, struct runclust_matches *mm)
{
	const struct kept *kp = c->kept.data;
	size_t total = 0, at = 0;

	for (size_t i = 0; i < c->kept.len; i++)
		total += kp[i].nstacks;
	mm->m = vec_alloc(c->kept.len + 1, sizeof(*mm->m));
	mm->stacks = vec_alloc(total + 1, sizeof(*mm->stacks));
	if (!mm->m || !mm->stacks)
		return fail_oom(c);
	for (size_t i = 0; i < c->kept.len; i++) {
		memcpy(mm->stacks + at, kp[i].stacks, kp[i].nstacks * sizeof(uint32_t));
		mm->m[i] = (struct runclust_match){ kp[i].id, kp[i].problem_id, mm->stacks + at, kp[i].nstacks };
		at += kp[i].nstacks;
	}
	mm->n = c->kept.len;
	return 0;
}

int runclust_build(int64_t run_id, const struct runclust_input *in, struct sim_frames *ft,
		   const struct runclust_opts *o, runclust_ids_fn take, void *take_arg, struct buf *rows,
		   size_t *nclusters, struct buf *prows, size_t *nproblems, struct runclust_matches *matches,
		   char *err, size_t errlen)
{
	struct ctx c;
	struct buf scratch = BUF_INIT(0);
	char run[24];
	size_t split;
	int rc = -1;

	memset(&c, 0, sizeof(c));
	c.take_ids = take;
	c.ids_arg = take_arg;
	c.err = err;
	c.errlen = errlen;
	c.rs = in->stacks;
	c.nrs = in->nstacks;
	c.stream_idx = in->stream_idx;
	c.stream_cost = in->stream_cost;
	c.stream_weight = in->stream_weight;
	c.nstreams = in->nstreams;
	c.bs = in->bstacks;
	c.nbs = in->nbstacks;
	c.excess = in->excess;
	c.threads = o->threads;
	c.pats = in->pats;
	c.npats = in->npats;
	c.kept = (struct vec)VEC_INIT(struct kept);
	*nclusters = 0;
	*nproblems = 0;
	snprintf(run, sizeof(run), "%lld", (long long)run_id);
	c.a = arena_open(0);
	if (!c.a) {
		fail_oom(&c);
		goto out;
	}
	for (split = 0; split < c.npats && c.pats[split].kind == 'w'; split++)
		;
	if (cluster_kind(&c, ft, o, 0, split, run, &scratch, nclusters) < 0 ||
	    cluster_kind(&c, ft, o, split, c.npats, run, &scratch, nclusters) < 0 ||
	    build_problems(&c, ft, run, rows, prows, nproblems) < 0 || (matches && keep_matches(&c, matches) < 0))
		goto out;
	if (buf_error(rows) != BUF_OK || buf_error(prows) != BUF_OK) {
		snprintf(err, errlen, "clustering: %s",
			 buf_error_text(buf_error(rows) != BUF_OK ? rows : prows));
		goto out;
	}
	rc = 0;
out:
	arena_free(c.a);
	vec_free(&c.kept);
	buf_release(&scratch);
	return rc;
}
