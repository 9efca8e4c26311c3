/* runclust: cluster a run's patterns into the rows of its clusters (see runclust.h). */
#include "clusterer/runclust.h"
#include "clusterer/sim.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/intern.h"
#include "common/jsonw.h"
#include "common/par.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 512

struct ctx {
	PGconn *db;
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
};

static int fail_db(struct ctx *c, const char *what, PGresult *r)
{
	db_errcpy(c->err, c->errlen, what, PQresultErrorMessage(r));
	PQclear(r);
	return -1;
}

static int fail_oom(struct ctx *c)
{
	snprintf(c->err, c->errlen, "clustering: out of memory");
	return -1;
}

int runclust_load_frames(PGconn *db, const uint32_t *ids, size_t n, struct sim_frames *ft, char *err,
			 size_t errlen)
{
	struct intern *seen = intern_open(0);
	struct buf arr = BUF_INIT(0);
	const char *params[1];
	PGresult *r = NULL;
	int rc = -1;

	if (!seen)
		goto out_oom;
	buf_putc(&arr, '{');
	for (size_t i = 0; i < n; i++) {
		bool added;

		if (intern_put(seen, &ids[i], sizeof(uint32_t), &added) < 0)
			goto out_oom;
		if (added) {
			if (arr.len > 1)
				buf_putc(&arr, ',');
			buf_put_i64(&arr, ids[i]);
		}
	}
	if (buf_putc(&arr, '}') < 0)
		goto out_oom;
	params[0] = buf_cstr(&arr);
	r = PQexecParams(db, "SELECT id, name FROM frame_names WHERE id = ANY($1::integer[])", 1, NULL, params, NULL,
			 NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail_db;
	for (int i = 0; i < PQntuples(r); i++)
		if (sim_frames_add(ft, (uint32_t)db_get_i64(r, i, 0), PQgetvalue(r, i, 1),
				   (size_t)PQgetlength(r, i, 1)) < 0)
			goto out_oom;
	PQclear(r);
	r = PQexec(db, "SELECT n FROM stream_total");
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		goto fail_db;
	sim_frames_set_streams(ft, (uint64_t)db_get_i64(r, 0, 0));
	PQclear(r);
	r = PQexecParams(db, "SELECT frame_id, n FROM frame_stats WHERE frame_id = ANY($1::integer[])", 1, NULL,
			 params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail_db;
	for (int i = 0; i < PQntuples(r); i++)
		sim_frames_set_count(ft, (uint32_t)db_get_i64(r, i, 0), (uint64_t)db_get_i64(r, i, 1));
	PQclear(r);
	r = PQexecParams(db, "SELECT caller, callee, n FROM call_stats WHERE caller = ANY($1::integer[])"
			     " AND callee = ANY($1::integer[])", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail_db;
	for (int i = 0; i < PQntuples(r); i++)
		sim_frames_set_calls(ft, (uint32_t)db_get_i64(r, i, 0), (uint32_t)db_get_i64(r, i, 1),
				     (uint64_t)db_get_i64(r, i, 2));
	rc = 0;
	goto out;
fail_db:
	db_errcpy(err, errlen, "reading frames and their statistics",
		  r ? PQresultErrorMessage(r) : PQerrorMessage(db));
	goto out;
out_oom:
	snprintf(err, errlen, "out of memory loading frames");
out:
	PQclear(r);
	buf_release(&arr);
	intern_free(seen);
	return rc;
}

/* Frame names and the statistics of every frame the patterns use. */
static int load_frames(struct ctx *c, struct sim_frames *ft)
{
	size_t n = 0;
	uint32_t *ids;

	for (size_t i = 0; i < c->npats; i++)
		n += c->pats[i].len;
	ids = arena_alloc(c->a, (n + 1) * sizeof(*ids));
	if (!ids)
		return fail_oom(c);
	n = 0;
	for (size_t i = 0; i < c->npats; i++)
		for (uint32_t j = 0; j < c->pats[i].len; j++)
			ids[n++] = c->pats[i].frames[j];
	return runclust_load_frames(c->db, ids, n, ft, c->err, c->errlen);
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

/* Cluster the patterns of one kind (pats[lo..hi)) and append COPY rows to out. */
static int cluster_kind(struct ctx *c, struct sim_frames *ft, const struct runclust_opts *o,
			size_t lo, size_t hi, const char *run, struct buf *out, size_t *ncl)
{
	size_t n = hi - lo;
	struct sim_pattern *sp;
	struct hclust *h;
	struct sim_ctx *sc = NULL;
	const struct hclust_clusters *hc;
	struct hclust_opts ho = { o->method, o->cut, o->threads };
	uint32_t *stamp_s, *stamp_t, *order;
	struct cl *cls;
	int rc = -1;

	if (n == 0)
		return 0;
	sp = arena_calloc(c->a, n, sizeof(*sp));
	if (!sp)
		return fail_oom(c);
	for (size_t i = 0; i < n; i++) {
		double *w = arena_alloc(c->a, c->pats[lo + i].len * sizeof(double));
		if (!w)
			return fail_oom(c);
		sim_weights(ft, c->pats[lo + i].frames, c->pats[lo + i].len, w);
		sp[i].frames = c->pats[lo + i].frames;
		sp[i].w = w;
		sp[i].len = c->pats[lo + i].len;
	}
	h = hclust_open();
	if (!h)
		return fail_oom(c);
	if (hclust_patterns(h, ft, sp, n, &ho, &hc) < 0) {
		snprintf(c->err, c->errlen, "clustering: %s", hclust_error(h));
		goto out;
	}
	sc = sim_ctx_open(ft);
	cls = arena_calloc(c->a, hc->nclusters + 1, sizeof(*cls));
	stamp_s = arena_calloc(c->a, c->nstreams + 1, sizeof(uint32_t));
	stamp_t = arena_calloc(c->a, c->nrs + 1, sizeof(uint32_t));
	order = arena_alloc(c->a, (hc->nclusters + 1) * sizeof(uint32_t));
	if (!sc || !cls || !stamp_s || !stamp_t || !order) {
		fail_oom(c);
		goto out;
	}
	/* metrics: the union of the members' supporting stacks, each counted once */
	for (size_t k = 0; k < hc->nclusters; k++) {
		for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++) {
			const struct runclust_pattern *p = &c->pats[lo + hc->members[m]];
			for (uint32_t s = 0; s < p->nstacks; s++) {
				const struct runclust_stack *r = &c->rs[p->stacks[s]];
				if (stamp_t[p->stacks[s]] == k + 1)
					continue;
				stamp_t[p->stacks[s]] = (uint32_t)k + 1;
				cls[k].cost += r->cost;
				cls[k].events += r->events;
				for (uint32_t x = r->first; x < r->first + r->n; x++) {
					double wt = c->stream_weight ? c->stream_weight[c->stream_idx[x]] : 1;

					cls[k].est_cost += wt * (double)c->stream_cost[x];
					if (stamp_s[c->stream_idx[x]] != k + 1) {
						stamp_s[c->stream_idx[x]] = (uint32_t)k + 1;
						cls[k].streams++;
						cls[k].est_streams += wt;
					}
				}
			}
		}
		cls[k].avg = cls[k].events ? cls[k].cost / cls[k].events : 0;
	}
	for (int mt = 0; mt < 4; mt++) {
		struct rank_by rb = { cls, mt };

		for (uint32_t k = 0; k < hc->nclusters; k++)
			order[k] = k;
		qsort_r(order, hc->nclusters, sizeof(*order), cmp_rank, &rb);
		for (uint32_t r = 0; r < hc->nclusters; r++)
			cls[order[r]].rank[mt] = r + 1;
	}
	if (c->excess) {
		struct rank_by rb = { cls, 4 };

		if (excess_clusters(c, hc, lo, cls) < 0)
			goto out;
		for (uint32_t k = 0; k < hc->nclusters; k++)
			order[k] = k;
		qsort_r(order, hc->nclusters, sizeof(*order), cmp_rank, &rb);
		for (uint32_t r = 0; r < hc->nclusters; r++)
			cls[order[r]].rank[4] = r + 1;
	}
	for (size_t k = 0; k < hc->nclusters; k++) {
		uint32_t med = hc->medoid[k];
		const struct runclust_pattern *mp = &c->pats[lo + med];

		buf_printf(out, "%s\t%c\t%llu\t%u\t%llu\t%llu\t%u\t%u\t%u\t%u\t", run, mp->kind,
			   (unsigned long long)cls[k].cost, cls[k].streams,
			   (unsigned long long)cls[k].events, (unsigned long long)cls[k].avg,
			   cls[k].rank[0], cls[k].rank[1], cls[k].rank[2], cls[k].rank[3]);
		if (c->excess) {
			const struct excess_result *ex = &cls[k].ex;

			buf_printf(out, "%u\t%llu\t", ex->baseline_streams, (unsigned long long)cls[k].own);
			put_nullable(out, ex->baseline_cost);
			put_nullable(out, ex->expected);
			put_nullable(out, ex->excess);
			put_nullable(out, ex->lo);
			put_nullable(out, ex->hi);
			buf_printf(out, "%u\t", cls[k].rank[4]);
		} else {
			buf_puts(out, "\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t");
		}
		buf_printf(out, "%lld\t{", (long long)mp->id);
		for (uint32_t j = hc->common_off[k]; j < hc->common_off[k + 1]; j++)
			buf_printf(out, j > hc->common_off[k] ? ",%u" : "%u", mp->frames[hc->common[j]]);
		buf_puts(out, "}\t{");
		for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++)
			buf_printf(out, m > hc->off[k] ? ",%lld" : "%lld",
				   (long long)c->pats[lo + hc->members[m]].id);
		buf_puts(out, "}\t{");
		/* the matched stacks, for the pages' breakdowns (a second stamp: k + 1 + n) */
		{
			bool first = true;
			for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++) {
				const struct runclust_pattern *p = &c->pats[lo + hc->members[m]];
				for (uint32_t s = 0; s < p->nstacks; s++) {
					uint32_t t = p->stacks[s];
					if (stamp_t[t] == (uint32_t)(k + 1 + hc->nclusters))
						continue;
					stamp_t[t] = (uint32_t)(k + 1 + hc->nclusters);
					buf_printf(out, first ? "%u" : ",%u", c->rs[t].stack_id);
					first = false;
				}
			}
		}
		buf_puts(out, "}\t");
		/* the alignments, as JSON (numbers and op letters: nothing COPY must escape) */
		{
			struct jsonw w;

			jsonw_init(&w, out);
			jsonw_array(&w);
			for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++) {
				const struct sim_alignment *al;
				static const char op[] = { 'M', 'S', 'D', 'I' };
				char ops[2 * SIM_MAX_LEN + 1];
				size_t no = 0;

				if (sim_align(sc, &sp[med], &sp[hc->members[m]], &al) < 0) {
					snprintf(c->err, c->errlen, "clustering: %s", sim_ctx_error(sc));
					goto out;
				}
				for (size_t st = 0; st < al->nsteps && no + 1 < sizeof(ops); st++)
					ops[no++] = op[al->steps[st].op];
				ops[no] = '\0';
				jsonw_object(&w);
				jsonw_ki64(&w, "pattern", c->pats[lo + hc->members[m]].id);
				jsonw_kdouble(&w, "sim", round(al->sim * 1e6) / 1e6);
				jsonw_kstr(&w, "ops", ops);
				jsonw_end(&w);
			}
			jsonw_end(&w);
			if (jsonw_finish(&w) < 0 ||
			    buf_printf(out, "\t%lld\t", (long long)llround(cls[k].est_cost)) < 0 ||
			    buf_put_double(out, cls[k].est_streams) < 0 || buf_putc(out, '\n') < 0) {
				fail_oom(c);
				goto out;
			}
		}
	}
	*ncl += hc->nclusters;
	rc = 0;
out:
	sim_ctx_free(sc);
	hclust_free(h);
	return rc;
}

int runclust_build(PGconn *db, int64_t run_id, const struct runclust_input *in, const struct runclust_opts *o,
		   struct buf *rows, size_t *nclusters, char *err, size_t errlen)
{
	struct ctx c;
	struct sim_frames *ft = NULL;
	char run[24];
	PGresult *r;
	size_t split;
	int rc = -1;

	memset(&c, 0, sizeof(c));
	c.db = db;
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
	*nclusters = 0;
	snprintf(run, sizeof(run), "%lld", (long long)run_id);
	c.a = arena_open(0);
	ft = sim_frames_open();
	if (!c.a || !ft) {
		fail_oom(&c);
		goto out;
	}
	/* current statistics: fold what ingest appended since the last fold */
	r = PQexec(db, "SELECT sm_fold_stats(1000000)");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fail_db(&c, "folding statistics", r);
		goto out;
	}
	PQclear(r);
	if (load_frames(&c, ft) < 0)
		goto out;
	for (split = 0; split < c.npats && c.pats[split].kind == 'w'; split++)
		;
	if (cluster_kind(&c, ft, o, 0, split, run, rows, nclusters) < 0 ||
	    cluster_kind(&c, ft, o, split, c.npats, run, rows, nclusters) < 0)
		goto out;
	if (buf_error(rows) != BUF_OK) {
		snprintf(err, errlen, "clustering: %s", buf_error_text(rows));
		goto out;
	}
	rc = 0;
out:
	sim_frames_free(ft);
	arena_free(c.a);
	return rc;
}
