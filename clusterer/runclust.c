/* runclust: cluster a stored run's patterns and store the clusters (see runclust.h). */
#include "runclust.h"
#include "arena.h"
#include "buf.h"
#include "db.h"
#include "intern.h"
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 512

struct pat {
	int64_t id;
	char kind;
	uint32_t *frames;
	uint32_t len;
	uint32_t *stacks;     /* indexes into the run's stacks (struct rstack) */
	uint32_t nstacks;
};

/* A collapsed AOI stack of the run: its cost and events summed over streams. */
struct rstack {
	uint64_t cost, events;
	uint32_t first, n;    /* its streams: stream_idx[first .. first + n) */
	uint32_t stack_id;    /* stacks.id */
};

struct ctx {
	PGconn *db;
	char *err;
	size_t errlen;
	struct arena *a;
	struct intern *stack_ids;   /* (kind, stack id) -> rstack index */
	struct rstack *rs;
	uint32_t *stream_idx;       /* dense stream numbers */
	size_t nstreams;
	struct pat *pats;
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

static int load_stacks(struct ctx *c, const char *run)
{
	PGresult *r = query(c, "SELECT kind, stack_id, stream_ref, cost_ns, events FROM run_stacks"
			       " WHERE run_id = $1 ORDER BY kind, stack_id", run);
	struct intern *streams = intern_open(0);
	int rows;
	size_t ns = 0;

	if (!streams)
		return fail_oom(c);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		intern_free(streams);
		return fail_db(c, "reading the run's stacks", r);
	}
	rows = PQntuples(r);
	c->rs = arena_calloc(c->a, (size_t)rows + 1, sizeof(*c->rs));
	c->stream_idx = arena_alloc(c->a, ((size_t)rows + 1) * sizeof(uint32_t));
	if (!c->rs || !c->stream_idx)
		goto fail_oom;
	for (int i = 0; i < rows; i++) {
		struct { char kind; uint32_t stack; } key;
		int64_t ref = db_get_i64(r, i, 2), k, s;
		bool added;

		memset(&key, 0, sizeof(key));
		key.kind = PQgetvalue(r, i, 0)[0];
		key.stack = (uint32_t)db_get_i64(r, i, 1);
		k = intern_put(c->stack_ids, &key, sizeof(key), &added);
		s = intern_put(streams, &ref, sizeof(ref), NULL);
		if (k < 0 || s < 0)
			goto fail_oom;
		if (added) {
			ns = (size_t)k;
			c->rs[k].first = (uint32_t)i;
			c->rs[k].stack_id = key.stack;
		}
		c->rs[k].cost += (uint64_t)db_get_i64(r, i, 3);
		c->rs[k].events += (uint64_t)db_get_i64(r, i, 4);
		c->rs[k].n++;
		c->stream_idx[i] = (uint32_t)s;
	}
	(void)ns;
	c->nstreams = intern_count(streams);
	PQclear(r);
	intern_free(streams);
	return 0;
fail_oom:
	PQclear(r);
	intern_free(streams);
	return fail_oom(c);
}

static int load_patterns(struct ctx *c, const char *run)
{
	PGresult *r = query(c, "SELECT id, kind, frame_ids::text, stack_ids::text FROM patterns"
			       " WHERE run_id = $1 ORDER BY kind DESC, id", run);
	int32_t tmp[MAX_DEPTH];

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fail_db(c, "reading the run's patterns", r);
	c->npats = (size_t)PQntuples(r);
	c->pats = arena_calloc(c->a, c->npats + 1, sizeof(*c->pats));
	if (!c->pats)
		goto fail_oom;
	for (size_t i = 0; i < c->npats; i++) {
		struct pat *p = &c->pats[i];
		const char *st = PQgetvalue(r, (int)i, 3);
		int n = db_parse_int_array(PQgetvalue(r, (int)i, 2), tmp, MAX_DEPTH);
		size_t cap = 16, m = 0;

		p->id = db_get_i64(r, (int)i, 0);
		p->kind = PQgetvalue(r, (int)i, 1)[0];
		if (n <= 0) {
			PQclear(r);
			snprintf(c->err, c->errlen, "pattern %lld: bad frame list", (long long)p->id);
			return -1;
		}
		p->frames = arena_alloc(c->a, (size_t)n * sizeof(uint32_t));
		if (!p->frames)
			goto fail_oom;
		for (int j = 0; j < n; j++)
			p->frames[j] = (uint32_t)tmp[j];
		p->len = (uint32_t)n;
		/* the supporting stacks may be many: count the commas first */
		for (const char *q = st; *q; q++)
			cap += *q == ',';
		p->stacks = arena_alloc(c->a, cap * sizeof(uint32_t));
		if (!p->stacks)
			goto fail_oom;
		for (const char *q = st + 1; *q && *q != '}';) {
			char *end;
			struct { char kind; uint32_t stack; } key;
			int64_t k;

			memset(&key, 0, sizeof(key));
			key.kind = p->kind;
			key.stack = (uint32_t)strtoul(q, &end, 10);
			if (end == q)
				break;
			k = intern_find(c->stack_ids, &key, sizeof(key));
			if (k >= 0 && m < cap)
				p->stacks[m++] = (uint32_t)k;
			q = *end == ',' ? end + 1 : end;
		}
		p->nstacks = (uint32_t)m;
	}
	PQclear(r);
	return 0;
fail_oom:
	PQclear(r);
	return fail_oom(c);
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
	stamp_t = arena_calloc(c->a, intern_count(c->stack_ids) + 1, sizeof(uint32_t));
	order = arena_alloc(c->a, (hc->nclusters + 1) * sizeof(uint32_t));
	if (!sc || !cls || !stamp_s || !stamp_t || !order) {
		fail_oom(c);
		goto out;
	}
	/* metrics: the union of the members' supporting stacks, each counted once */
	for (size_t k = 0; k < hc->nclusters; k++) {
		for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++) {
			const struct pat *p = &c->pats[lo + hc->members[m]];
			for (uint32_t s = 0; s < p->nstacks; s++) {
				const struct rstack *r = &c->rs[p->stacks[s]];
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
		const struct pat *mp = &c->pats[lo + med];

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
				const struct pat *p = &c->pats[lo + hc->members[m]];
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
		buf_puts(out, "}\t[");
		for (uint32_t m = hc->off[k]; m < hc->off[k + 1]; m++) {
			const struct sim_alignment *al;
			static const char op[] = { 'M', 'S', 'D', 'I' };

			if (sim_align(sc, &sp[med], &sp[hc->members[m]], &al) < 0) {
				snprintf(c->err, c->errlen, "clustering: %s", sim_ctx_error(sc));
				goto out;
			}
			buf_printf(out, "%s{\"pattern\": %lld, \"sim\": %.6f, \"ops\": \"", m > hc->off[k] ? ", " : "",
				   (long long)c->pats[lo + hc->members[m]].id, al->sim);
			for (size_t s = 0; s < al->nsteps; s++)
				buf_putc(out, op[al->steps[s].op]);
			buf_puts(out, "\"}");
		}
		if (buf_puts(out, "]\n") < 0) {
			fail_oom(c);
			goto out;
		}
	}
	*ncl += hc->nclusters;
	rc = 0;
out:
	sim_ctx_free(sc);
	hclust_free(h);
	return rc;
}

int runclust_run(PGconn *db, int64_t run_id, const struct runclust_opts *o, size_t *nclusters,
		 char *err, size_t errlen)
{
	struct ctx c;
	struct sim_frames *ft = NULL;
	struct buf rows = BUF_INIT(0);
	char run[24];
	PGresult *r;
	size_t split;
	int rc = -1;

	memset(&c, 0, sizeof(c));
	c.db = db;
	c.err = err;
	c.errlen = errlen;
	*nclusters = 0;
	snprintf(run, sizeof(run), "%lld", (long long)run_id);
	c.a = arena_open(0);
	c.stack_ids = intern_open(0);
	ft = sim_frames_open();
	if (!c.a || !c.stack_ids || !ft) {
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
	if (load_stacks(&c, run) < 0 || load_patterns(&c, run) < 0 || load_frames(&c, ft) < 0)
		goto out;
	for (split = 0; split < c.npats && c.pats[split].kind == 'w'; split++)
		;
	if (cluster_kind(&c, ft, o, 0, split, run, &rows, nclusters) < 0 ||
	    cluster_kind(&c, ft, o, split, c.npats, run, &rows, nclusters) < 0)
		goto out;
	if (db_exec(db, "BEGIN", err, errlen) < 0)
		goto out;
	r = query(&c, "DELETE FROM clusters WHERE run_id = $1", run);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fail_db(&c, "replacing clusters", r);
		goto out_rollback;
	}
	PQclear(r);
	r = PQexec(db, "COPY clusters (run_id, kind, total_cost_ns, streams, events, avg_cost_ns,"
		       " rank_total_cost, rank_streams, rank_events, rank_avg_cost, medoid,"
		       " common_frame_ids, members, stack_ids, alignment) FROM STDIN");
	if (PQresultStatus(r) != PGRES_COPY_IN) {
		fail_db(&c, "storing clusters", r);
		goto out_rollback;
	}
	PQclear(r);
	if ((rows.len && PQputCopyData(db, rows.data, (int)rows.len) != 1) ||
	    PQputCopyEnd(db, NULL) != 1) {
		db_errcpy(err, errlen, "storing clusters", PQerrorMessage(db));
		goto out_rollback;
	}
	while ((r = PQgetResult(db))) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			fail_db(&c, "storing clusters", r);
			while ((r = PQgetResult(db)))
				PQclear(r);
			goto out_rollback;
		}
		PQclear(r);
	}
	{
		char nbuf[24];
		const char *params[2] = { run, nbuf };

		snprintf(nbuf, sizeof(nbuf), "%zu", *nclusters);
		r = PQexecParams(db, "UPDATE runs SET counts = counts || jsonb_build_object('clusters', $2::integer)"
				     " WHERE id = $1", 2, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			fail_db(&c, "storing clusters", r);
			goto out_rollback;
		}
		PQclear(r);
	}
	rc = db_exec(db, "COMMIT", err, errlen);
	goto out;
out_rollback:
	PQclear(PQexec(db, "ROLLBACK"));
out:
	buf_release(&rows);
	sim_frames_free(ft);
	intern_free(c.stack_ids);
	arena_free(c.a);
	return rc;
}
