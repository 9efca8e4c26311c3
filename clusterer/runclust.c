/* runclust: cluster a run's patterns into the rows of its clusters (see runclust.h). */
#include "clusterer/runclust.h"
#include "clusterer/sim.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/intern.h"
#include "common/jsonw.h"

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
	size_t nstreams;
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

static PGresult *query(struct ctx *c, const char *sql, const char *p1)
{
	const char *params[1] = { p1 };

	return PQexecParams(c->db, sql, p1 ? 1 : 0, NULL, params, NULL, NULL, 0);
}

/* Frame names and the statistics of every frame the patterns use. */
static int load_frames(struct ctx *c, struct sim_frames *ft)
{
	struct intern *seen = intern_open(0);
	struct buf ids = BUF_INIT(0);
	PGresult *r;
	int rc = -1;

	if (!seen)
		return fail_oom(c);
	buf_putc(&ids, '{');
	for (size_t i = 0; i < c->npats; i++)
		for (uint32_t j = 0; j < c->pats[i].len; j++) {
			bool added;
			if (intern_put(seen, &c->pats[i].frames[j], sizeof(uint32_t), &added) < 0)
				goto out_oom;
			if (added) {
				if (ids.len > 1)
					buf_putc(&ids, ',');
				buf_put_i64(&ids, c->pats[i].frames[j]);
			}
		}
	if (buf_putc(&ids, '}') < 0)
		goto out_oom;
	r = query(c, "SELECT id, name FROM frames WHERE id = ANY($1::integer[])", buf_cstr(&ids));
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fail_db(c, "reading frames", r);
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++)
		if (sim_frames_add(ft, (uint32_t)db_get_i64(r, i, 0), PQgetvalue(r, i, 1),
				   (size_t)PQgetlength(r, i, 1)) < 0) {
			PQclear(r);
			goto out_oom;
		}
	PQclear(r);
	r = query(c, "SELECT n FROM stream_total", NULL);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fail_db(c, "reading statistics", r);
		goto out;
	}
	sim_frames_set_streams(ft, (uint64_t)db_get_i64(r, 0, 0));
	PQclear(r);
	r = query(c, "SELECT frame_id, n FROM frame_stats WHERE frame_id = ANY($1::integer[])", buf_cstr(&ids));
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fail_db(c, "reading statistics", r);
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++)
		sim_frames_set_count(ft, (uint32_t)db_get_i64(r, i, 0), (uint64_t)db_get_i64(r, i, 1));
	PQclear(r);
	r = query(c, "SELECT caller, callee, n FROM call_stats WHERE caller = ANY($1::integer[])"
		     " AND callee = ANY($1::integer[])", buf_cstr(&ids));
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fail_db(c, "reading statistics", r);
		goto out;
	}
	for (int i = 0; i < PQntuples(r); i++)
		sim_frames_set_calls(ft, (uint32_t)db_get_i64(r, i, 0), (uint32_t)db_get_i64(r, i, 1),
				     (uint64_t)db_get_i64(r, i, 2));
	PQclear(r);
	rc = 0;
	goto out;
out_oom:
	fail_oom(c);
out:
	buf_release(&ids);
	intern_free(seen);
	return rc;
}

struct cl {
	uint64_t cost, events, avg;
	uint32_t streams;
	uint32_t rank[4];
};

struct rank_by {
	const struct cl *cls;
	int metric;
};

static uint64_t metric(const struct cl *c, int m)
{
	return m == 0 ? c->cost : m == 1 ? c->streams : m == 2 ? c->events : c->avg;
}

static int cmp_rank(const void *a, const void *b, void *arg)
{
	const struct rank_by *rb = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint64_t mx = metric(&rb->cls[x], rb->metric), my = metric(&rb->cls[y], rb->metric);

	if (mx != my)
		return mx > my ? -1 : 1;
	return x < y ? -1 : x > y;
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
				for (uint32_t x = r->first; x < r->first + r->n; x++)
					if (stamp_s[c->stream_idx[x]] != k + 1) {
						stamp_s[c->stream_idx[x]] = (uint32_t)k + 1;
						cls[k].streams++;
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
	for (size_t k = 0; k < hc->nclusters; k++) {
		uint32_t med = hc->medoid[k];
		const struct runclust_pattern *mp = &c->pats[lo + med];

		buf_printf(out, "%s\t%c\t%llu\t%u\t%llu\t%llu\t%u\t%u\t%u\t%u\t%lld\t{", run, mp->kind,
			   (unsigned long long)cls[k].cost, cls[k].streams,
			   (unsigned long long)cls[k].events, (unsigned long long)cls[k].avg,
			   cls[k].rank[0], cls[k].rank[1], cls[k].rank[2], cls[k].rank[3], (long long)mp->id);
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
			if (jsonw_finish(&w) < 0 || buf_putc(out, '\n') < 0) {
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
	c.nstreams = in->nstreams;
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
