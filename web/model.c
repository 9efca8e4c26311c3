/* model: the queries of the dashboard and the REST API (see model.h). */
#include "web/model.h"
#include "web/request.h"
#include "common/db.h"
#include "common/buf.h"
#include "common/evpack.h"
#include "common/imap.h"
#include "common/vec.h"
#include "common/wire.h"

#include <json.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>

#define ISO(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
/* the frame names of an int[] of frame ids, in order, as a json array */
#define NAMES(ids)                                                                              \
	"(SELECT coalesce(json_agg(f.name ORDER BY o.i), '[]') FROM unnest(" ids                \
	") WITH ORDINALITY AS o(id, i) JOIN frame_names f ON f.id = o.id)"
#define SYMPTOM                                                                                  \
	"json_build_object('kind', s.symptom_kind, 'tid', s.symptom_tid, 'start_ns', s.symptom_start_ns," \
	" 'end_ns', s.symptom_end_ns, 'unit_type', s.symptom_unit_type, 'threshold_ns'," \
	" s.symptom_threshold_ns)"

static PGresult *run(PGconn *db, const char *sql, int n, const char *const *p, char *err, size_t errlen)
{
	PGresult *r = PQexecParams(db, sql, n, NULL, p, NULL, NULL, 0);

	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		return r;
	db_errcpy(err, errlen, "query", r ? PQresultErrorMessage(r) : PQerrorMessage(db));
	PQclear(r);
	return NULL;
}

/*
 * A statement keyed by the server's ids (a cluster, a run): prepared once per
 * connection as sm_web_NO, planning being half the time of these small queries
 * (db_exec_prepared(): prepared before its first execution on each session).
 */
static PGresult *run_prepared(PGconn *db, int no, const char *sql, int n, const char *const *p, char *err,
			      size_t errlen)
{
	char name[24];
	PGresult *r;

	snprintf(name, sizeof(name), "sm_web_%d", no);
	r = db_exec_prepared(db, no, name, sql, n, p);
	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		return r;
	db_errcpy(err, errlen, "query", r ? PQresultErrorMessage(r) : PQerrorMessage(db));
	PQclear(r);
	return NULL;
}

/* A query of a key ($1) and a limit ($2): prepared as no (run_prepared()), or not when no is 0. */
static PGresult *run_key_limit(PGconn *db, int no, const char *sql, const char *key, long limit, char *err,
			       size_t errlen)
{
	char lim[24];
	const char *p[2] = { key, lim };

	snprintf(lim, sizeof(lim), "%ld", limit);
	return no ? run_prepared(db, no, sql, 2, p, err, errlen) : run(db, sql, 2, p, err, errlen);
}

/* ---- streams ---- */

#define STREAM_WHERE                                                                            \
	" WHERE ($1::text IS NULL OR s.app = $1) AND ($2::text IS NULL OR s.host = $2)"          \
	" AND ($3::text IS NULL OR s.version = $3) AND ($4::jsonb IS NULL OR s.labels @> $4::jsonb)" \
	" AND ($5::bigint IS NULL OR s.received_at >= to_timestamp($5::bigint / 1e9))"            \
	" AND ($6::bigint IS NULL OR s.received_at < to_timestamp($6::bigint / 1e9))"            \
	" AND ($7::text IS NULL OR s.role = $7)"

static void stream_params(const struct stream_filter *f, char since[24], char until[24], const char *p[7])
{
	p[0] = f->app;
	p[1] = f->host;
	p[2] = f->version;
	p[3] = f->labels_json;
	p[4] = p[5] = NULL;
	p[6] = f->role;
	if (f->since_ns != INT64_MIN) {
		snprintf(since, 24, "%lld", (long long)f->since_ns);
		p[4] = since;
	}
	if (f->until_ns != INT64_MIN) {
		snprintf(until, 24, "%lld", (long long)f->until_ns);
		p[5] = until;
	}
}

static const char *const stream_sort_names[SSORT_N] = { "received", "host", "app", "version", "delay", "events",
							"role" };

int model_stream_sort_parse(const char *s)
{
	for (int i = 0; s && i < SSORT_N; i++)
		if (strcmp(s, stream_sort_names[i]) == 0)
			return i;
	return -1;
}

const char *model_stream_sort_name(enum stream_sort s)
{
	return stream_sort_names[(unsigned)s < SSORT_N ? s : SSORT_RECEIVED];
}

bool model_stream_sort_desc(enum stream_sort s)
{
	return s == SSORT_RECEIVED || s == SSORT_DELAY || s == SSORT_EVENTS;
}

#define STREAMS_PAGE(order)                                                                      \
	"SELECT s.stream_id::text AS stream_id, s.host, s.app, s.version, s.labels, " SYMPTOM      \
	" AS symptom, s.n_events AS events, " ISO("s.received_at") " AS received_at, s.role, s.weight" \
	" FROM streams s" STREAM_WHERE " ORDER BY " order " LIMIT $8 OFFSET $9"
/* each order ascending and descending; equal keys newest first, so a page boundary is stable */
#define STREAMS_BOTH(key)                                                                        \
	{ STREAMS_PAGE(key " ASC, s.received_at DESC, s.id DESC"),                                 \
	  STREAMS_PAGE(key " DESC, s.received_at DESC, s.id DESC") }
static const char *const streams_sql[SSORT_N][2] = {
	{ STREAMS_PAGE("s.received_at ASC, s.id ASC"), STREAMS_PAGE("s.received_at DESC, s.id DESC") },
	STREAMS_BOTH("s.host"),
	STREAMS_BOTH("s.app"),
	/* a stream without a version last either way */
	{ STREAMS_PAGE("s.version ASC NULLS LAST, s.received_at DESC, s.id DESC"),
	  STREAMS_PAGE("s.version DESC NULLS LAST, s.received_at DESC, s.id DESC") },
	STREAMS_BOTH("(s.symptom_end_ns - s.symptom_start_ns)"),
	STREAMS_BOTH("s.n_events"),
	STREAMS_BOTH("s.role"),
};

PGresult *model_streams(PGconn *db, const struct stream_filter *f, enum stream_sort sort, bool desc, long limit,
			long offset, char *err, size_t errlen)
{
	char since[24], until[24], lim[24], off[24];
	const char *p[9];

	stream_params(f, since, until, p);
	snprintf(lim, sizeof(lim), "%ld", limit);
	snprintf(off, sizeof(off), "%ld", offset);
	p[7] = lim;
	p[8] = off;
	return run(db, streams_sql[(unsigned)sort < SSORT_N ? sort : SSORT_RECEIVED][desc], 9, p, err, errlen);
}

#define STREAMS_COUNTED "10000"

PGresult *model_streams_count(PGconn *db, const struct stream_filter *f, char *err, size_t errlen)
{
	char since[24], until[24];
	const char *p[7];

	stream_params(f, since, until, p);
	/* counted up to STREAMS_COUNTED: an app's million streams took 300 ms to count on every page
	 * of them */
	return run(db, "SELECT least(count(*), " STREAMS_COUNTED ") AS total,"
		       " count(*) > " STREAMS_COUNTED " AS more"
		       " FROM (SELECT 1 FROM streams s" STREAM_WHERE " LIMIT " STREAMS_COUNTED " + 1) c",
		   7, p, err, errlen);
}

PGresult *model_stream(PGconn *db, const char *uuid, char *err, size_t errlen)
{
	const char *p[1] = { uuid };

	return run_prepared(db, 2,
		   "SELECT s.id AS ref, s.stream_id::text AS stream_id, s.host, s.app, s.version, s.build_id,"
		   " s.labels, " SYMPTOM " AS symptom, s.n_events AS events, " ISO("s.received_at")
		   " AS received_at, s.role, s.weight, s.symptom_tid, s.symptom_start_ns, s.symptom_end_ns,"
		   " s.thread_names AS threads FROM streams s WHERE s.stream_id = $1::uuid",
		   1, p, err, errlen);
}

/* An event being unpacked, with its place in the stream to order events of one time. */
struct page_event {
	struct evpack_event e;
	int64_t seq;
};

static int page_event_cmp(const void *pa, const void *pb)
{
	const struct page_event *a = pa, *b = pb;

	if (a->e.ts_ns != b->e.ts_ns)
		return a->e.ts_ns < b->e.ts_ns ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

/* The stream's chunks (binary rows of first_seq, data) unpacked into ev[0 .. *n) (caller frees
 * *ev). 0, or -1 with err. */
static int unpack_chunks(PGresult *c, struct page_event **ev, size_t *n, char *err, size_t errlen)
{
	int rows = PQntuples(c);
	size_t total = 0;

	*ev = NULL;
	*n = 0;
	for (int i = 0; i < rows; i++) {
		long nrec = evpack_count((size_t)PQgetlength(c, i, 1));

		if (nrec < 0 || PQgetlength(c, i, 0) != 4)
			goto bad_chunk;
		total += (size_t)nrec;
	}
	if (total && !(*ev = vec_alloc(total, sizeof(**ev)))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < rows; i++) {
		const unsigned char *data = (const unsigned char *)PQgetvalue(c, i, 1);
		int64_t first = (int32_t)(uint32_t)evpack_be((const unsigned char *)PQgetvalue(c, i, 0), 4);
		size_t nrec = (size_t)PQgetlength(c, i, 1) / EVPACK_RECORD;

		for (size_t r = 0; r < nrec; r++) {
			if (evpack_get(data + r * EVPACK_RECORD, &(*ev)[*n].e) < 0)
				goto bad_chunk;
			(*ev)[(*n)++].seq = first + (int64_t)r;
		}
	}
	return 0;
bad_chunk:
	snprintf(err, errlen, "stored events: a chunk of the stream's events is damaged");
	free(*ev);
	*ev = NULL;
	*n = 0;
	return -1;
}

/* e->stacks: the distinct stack ids of e->ev, ascending; e->at. 0 or -1 (out of memory). */
static int distinct_stacks(struct model_events *e)
{
	struct imap pos = IMAP_INIT;
	uint64_t k = 0;
	int rc = -1;

	for (size_t i = 0; i < e->n; i++)
		if (imap_put(&pos, (uint32_t)e->ev[i].stack, 0) < 0)
			goto free_pos;
	if (e->n && (!(e->stacks = vec_alloc(pos.cnt, sizeof(*e->stacks))) || !(e->at = vec_alloc(e->n, sizeof(*e->at)))))
		goto free_pos;
	for (size_t i = 0; i < pos.cap; i++)
		if (pos.keys[i] != IMAP_EMPTY)
			e->stacks[e->nstacks++] = (int32_t)(uint32_t)pos.keys[i];
	if (e->nstacks > 1)
		vec_sort_i32(e->stacks, e->nstacks);
	for (size_t s = 0; s < e->nstacks; s++)
		pos.vals[imap_find(&pos, (uint32_t)e->stacks[s])] = s;
	for (size_t i = 0; i < e->n; i++) {
		imap_get(&pos, (uint32_t)e->ev[i].stack, &k);
		e->at[i] = (uint32_t)k;
	}
	rc = 0;
free_pos:
	imap_free(&pos);
	return rc;
}

struct model_events *model_stream_events(PGconn *db, const char *ref, long limit, char *err, size_t errlen)
{
	const char *p[1] = { ref };
	struct model_events *e;
	struct page_event *pe;
	size_t n;
	bool sorted = true;
	/* binary: the chunks' bytes as stored, not twice as many hex digits; in order, so that the
	 * events come as sent and a stream sent in time order needs no sort */
	PGresult *c = PQexecParams(db, "SELECT first_seq, data FROM event_chunks WHERE stream_ref = $1::bigint"
				   " ORDER BY first_seq", 1, NULL, p, NULL, NULL, 1);

	if (PQresultStatus(c) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "query", c ? PQresultErrorMessage(c) : PQerrorMessage(db));
		PQclear(c);
		return NULL;
	}
	if (unpack_chunks(c, &pe, &n, err, errlen) < 0) {
		PQclear(c);
		return NULL;
	}
	PQclear(c);
	for (size_t i = 1; i < n && sorted; i++)
		sorted = page_event_cmp(&pe[i - 1], &pe[i]) <= 0;
	if (!sorted)
		qsort(pe, n, sizeof(*pe), page_event_cmp);
	if (!(e = calloc(1, sizeof(*e))))
		goto out_of_memory;
	e->stored = n;
	if (limit >= 0 && (size_t)limit < n)
		n = (size_t)limit;
	if (n && !(e->ev = vec_alloc(n, sizeof(*e->ev))))
		goto out_of_memory;
	for (size_t i = 0; i < n; i++)
		e->ev[i] = pe[i].e;
	e->n = n;
	free(pe);
	pe = NULL;
	if (distinct_stacks(e) < 0)
		goto out_of_memory;
	return e;
out_of_memory:
	free(pe);
	model_events_free(e);
	snprintf(err, errlen, "out of memory");
	return NULL;
}

void model_events_free(struct model_events *e)
{
	if (!e)
		return;
	free(e->ev);
	free(e->stacks);
	free(e->at);
	free(e);
}

PGresult *model_stacks(PGconn *db, const char *stack_ids, char *err, size_t errlen)
{
	const char *p[1] = { stack_ids };

	return run_prepared(db, 4, "SELECT id AS stack_id, frame_ids FROM stacks WHERE id = ANY($1::int[]) ORDER BY id", 1, p,
		   err, errlen);
}

PGresult *model_stacks_of(PGconn *db, const int32_t *ids, size_t n, char *err, size_t errlen)
{
	struct buf b = BUF_INIT(0);
	PGresult *r;

	buf_putc(&b, '{');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(&b, ',');
		buf_put_i64(&b, ids[i]);
	}
	buf_putc(&b, '}');
	if (buf_error(&b) != BUF_OK) {
		snprintf(err, errlen, "listing the stacks: %s", buf_error_text(&b));
		buf_release(&b);
		return NULL;
	}
	r = model_stacks(db, buf_cstr(&b), err, errlen);
	buf_release(&b);
	return r;
}

void model_stack_rows(PGresult *fr, const int32_t *ids, size_t n, int *row)
{
	int nf = PQntuples(fr), c = PQfnumber(fr, "stack_id"), j = 0;
	int64_t id = 0;

	/* both ascending: one walk, each row's id parsed once */
	if (j < nf && c >= 0)
		id = strtoll(PQgetvalue(fr, j, c), NULL, 10);
	for (size_t k = 0; k < n; k++) {
		while (c >= 0 && j < nf && id < ids[k])
			if (++j < nf)
				id = strtoll(PQgetvalue(fr, j, c), NULL, 10);
		row[k] = c >= 0 && j < nf && id == ids[k] ? j : -1;
	}
}

/* ---- runs ---- */

#define RUN_COLS                                                                                 \
	"SELECT r.id AS run_id, r.status, r.params->>'app' AS app, r.params, r.error, r.counts,"  \
	" r.timings_ms, r.progress, CASE WHEN r.status = 'queued' THEN 'queued' ELSE r.progress->>'phase' END AS phase," \
	" r.attempts, r.last_retry, " ISO("r.created_at") " AS created_at, "  \
	ISO("r.started_at")                                                                       \
	" AS started_at, " ISO("r.finished_at") " AS finished_at FROM runs r"
#define RUN_WHERE " WHERE ($1::text IS NULL OR r.params->>'app' = $1) AND ($2::text IS NULL OR r.status = $2)"

PGresult *model_runs(PGconn *db, const char *app, const char *status, long limit, long offset, char *err,
		     size_t errlen)
{
	char lim[24], off[24];
	const char *p[4] = { app, status, lim, off };

	snprintf(lim, sizeof(lim), "%ld", limit);
	snprintf(off, sizeof(off), "%ld", offset);
	return run(db, RUN_COLS RUN_WHERE " ORDER BY r.id DESC LIMIT $3 OFFSET $4", 4, p, err, errlen);
}

/* the orders of the runs' page, by run_sort_names */
static const char *const run_sort_names[RUN_SORT_N] = { "newest", "app", "status", "worst", "clusters" };

/* A page of runs with their worst problem (rank 1), or for a run mined before problems its costliest cluster
 * (rank 1 of its kind by total cost, the index's, then the costlier kind); in order, then newest first. */
#define RUNS_WORST(order)                                                                        \
	"SELECT x.*, wp.worst_problem_id, wc.worst_cluster_id, coalesce(wp.title, wc.title) AS worst_title," \
	" coalesce(wp.cost, wc.cost) AS worst_cost_ns FROM (" RUN_COLS ") x"                          \
	" LEFT JOIN LATERAL (SELECT p.id AS worst_problem_id, p.title_frame_ids AS title, p.total_cost_ns AS cost" \
	"  FROM problems p WHERE p.run_id = x.run_id AND p.rank = 1) wp ON true"                   \
	" LEFT JOIN LATERAL (SELECT c.id AS worst_cluster_id, coalesce(c.title_frame_ids, c.common_frame_ids)" \
	"  AS title, c.total_cost_ns AS cost FROM clusters c WHERE wp.worst_problem_id IS NULL"      \
	"  AND c.run_id = x.run_id AND c.rank_total_cost = 1 ORDER BY c.total_cost_ns DESC, c.id LIMIT 1) wc" \
	" ON true ORDER BY " order ", x.run_id DESC LIMIT $1 OFFSET $2"

static const char *const runs_worst_sql[RUN_SORT_N] = {
	RUNS_WORST("x.run_id DESC"),
	RUNS_WORST("x.app"),
	RUNS_WORST("x.status"),
	RUNS_WORST("worst_cost_ns DESC NULLS LAST"),
	RUNS_WORST("(x.counts->>'clusters')::bigint DESC NULLS LAST"),
};

int model_run_sort_parse(const char *s)
{
	for (int i = 0; s && i < RUN_SORT_N; i++)
		if (strcmp(s, run_sort_names[i]) == 0)
			return i;
	return -1;
}

const char *model_run_sort_name(enum model_run_sort s)
{
	return (unsigned)s < RUN_SORT_N ? run_sort_names[s] : "?";
}

PGresult *model_runs_worst(PGconn *db, enum model_run_sort sort, long limit, long offset, char *err, size_t errlen)
{
	char lim[24], off[24];
	const char *p[2] = { lim, off };

	snprintf(lim, sizeof(lim), "%ld", limit);
	snprintf(off, sizeof(off), "%ld", offset);
	return run(db, runs_worst_sql[(unsigned)sort < RUN_SORT_N ? sort : 0], 2, p, err, errlen);
}

PGresult *model_runs_count(PGconn *db, const char *app, const char *status, char *err, size_t errlen)
{
	const char *p[2] = { app, status };

	return run(db, "SELECT count(*) AS total FROM runs r" RUN_WHERE, 2, p, err, errlen);
}

PGresult *model_run(PGconn *db, const char *id, char *err, size_t errlen)
{
	const char *p[1] = { id };

	return run_prepared(db, 5, RUN_COLS " WHERE r.id = $1::bigint", 1, p, err, errlen);
}

PGresult *model_runs_done_after(PGconn *db, const char *after, const char *seen, char *err, size_t errlen)
{
	const char *p[2] = { after, seen };

	/* a run's finished_at is its storing transaction's start: one committed after a later one was
	 * seen has an earlier time, so the look goes back a few minutes (the caller skips those seen) */
	return run(db, "WITH t AS (SELECT coalesce($1::timestamptz,"
		       "  (SELECT max(finished_at) FROM runs WHERE status = 'done')) - interval '5 minutes' AS t)"
		       " SELECT id, finished_at::text FROM runs, t WHERE status = 'done' AND finished_at > t.t"
		       " AND NOT (id = ANY (coalesce($2::bigint[], '{}')))"
		       " ORDER BY finished_at, id LIMIT 200", 2, p, err, errlen);
}

PGresult *model_run_costliest(PGconn *db, const char *id, long n, char *err, size_t errlen)
{
	char lim[24];
	const char *p[2] = { id, lim };

	snprintf(lim, sizeof(lim), "%ld", n);
	return run(db, "SELECT o, id FROM ("
		       " (SELECT 'p' AS o, id, rank AS r FROM problems WHERE run_id = $1::bigint"
		       "  ORDER BY rank, id LIMIT $2::bigint)"
		       " UNION ALL (SELECT 'c', id, run_rank_total_cost FROM clusters WHERE run_id = $1::bigint"
		       "  ORDER BY total_cost_ns DESC, id LIMIT $2::bigint)) x"
		       " ORDER BY r NULLS LAST, o DESC, id", 2, p, err, errlen);
}

/* What a run mined, for comparing two: a run without a kind in its params mined both. */
PGresult *model_run_what(PGconn *db, const char *id, char *err, size_t errlen)
{
	const char *p[1] = { id };

	return run(db, "SELECT id AS run_id, status, params->>'app' AS app, coalesce(params->>'kind', 'both') AS kind"
		       " FROM runs WHERE id = $1::bigint", 1, p, err, errlen);
}

PGresult *model_compare_runs(PGconn *db, const char *app, const char *kind, long limit, char *err, size_t errlen)
{
	char lim[24];
	const char *p[3] = { app, kind, lim };

	snprintf(lim, sizeof(lim), "%ld", limit);
	return run(db, "SELECT id AS run_id, params->>'app' AS app, coalesce(params->>'kind', 'both') AS kind, "
		       ISO("finished_at") " AS finished_at FROM runs WHERE status = 'done'"
		       " AND ($1::text IS NULL OR params->>'app' = $1)"
		       " AND ($2::text IS NULL OR coalesce(params->>'kind', 'both') = $2)"
		       " ORDER BY id DESC LIMIT $3::bigint", 3, p, err, errlen);
}

PGresult *model_apps(PGconn *db, char *err, size_t errlen)
{
	return run(db, "SELECT DISTINCT app FROM streams ORDER BY app", 0, NULL, err, errlen);
}

int64_t model_run_count(PGresult *run, const char *key)
{
	int c = PQfnumber(run, "counts");
	json_object *o, *v;
	int64_t n = -1;

	if (c < 0 || PQntuples(run) < 1 || PQgetisnull(run, 0, c))
		return -1;
	o = json_tokener_parse(PQgetvalue(run, 0, c));
	if (o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int))
		n = json_object_get_int64(v);
	json_object_put(o);
	return n;
}

/* ---- clusters ---- */

static const char *const sort_names[SORT_N] = { "total_cost", "streams", "events", "avg_cost", "excess_cost" };

int model_sort_parse(const char *s)
{
	for (int i = 0; i < SORT_N; i++)
		if (strcmp(s, sort_names[i]) == 0)
			return i;
	return -1;
}

const char *model_sort_name(enum model_sort s)
{
	return (unsigned)s < SORT_N ? sort_names[s] : "?";
}

/* $1 run, $2 kind, $3 text; the page is chosen first ($4 limit, $5 offset), then described */
#define CLUSTER_WHERE                                                                            \
	" FROM clusters c WHERE c.run_id = $1::bigint AND ($2::\"char\" IS NULL OR c.kind = $2::\"char\")" \
	" AND ($3::text IS NULL OR c.common_frame_ids && (SELECT coalesce(array_agg(f.id), '{}')"  \
	"  FROM frame_names f WHERE strpos(lower(f.name), lower($3)) > 0))"
/*
 * The ranks a cluster shows, everywhere (run page, cluster page, problems, API): among all the run's
 * clusters, both kinds, by each metric descending, ties by id: the run page's order, so that the row a
 * cluster is on under a metric is its rank by it. The miner stores them (025_run_ranks); the
 * clusterer's rank_* columns are within a kind, the fallback for rows written by hand without them.
 */
#define RUN_RANK(m) "coalesce(c.run_rank_" m ", c.rank_" m ")"
#define CLUSTER_COLS(rank)                                                                      \
	"SELECT c.id AS cluster_id, c.run_id, CASE c.kind WHEN 'w' THEN 'wait' ELSE 'run' END AS kind," \
	" " rank " AS rank, " RUN_RANK("total_cost") " AS rank_total_cost,"                          \
	" " RUN_RANK("streams") " AS rank_streams, " RUN_RANK("events") " AS rank_events,"          \
	" " RUN_RANK("avg_cost") " AS rank_avg_cost,"                                                  \
	" c.total_cost_ns, c.streams, c.events, c.avg_cost_ns, " RUN_RANK("excess_cost") " AS rank_excess_cost," \
	" c.excess_cost_ns,"                                                                           \
	" c.excess_lo_ns, c.excess_hi_ns, c.own_cost_ns, c.expected_cost_ns, c.baseline_cost_ns,"      \
	" c.baseline_streams, coalesce(c.est_cost_ns, c.total_cost_ns) AS est_cost_ns,"             \
	" coalesce(c.est_streams, c.streams) AS est_streams,"                                          \
	" c.common_frame_ids AS common, cardinality(c.members) AS patterns_total,"                     \
	" c.problem_id, c.title_frame_ids AS title"
/* the page's ids first (an index-only scan when it can), then their rows */
#define CLUSTER_PAGE(rank, order)                                                                \
	CLUSTER_COLS(rank) " FROM (SELECT c.id" CLUSTER_WHERE " ORDER BY " order " LIMIT $4 OFFSET $5) pg" \
	" JOIN clusters c ON c.id = pg.id ORDER BY " order

static const char *const cluster_sql[SORT_N] = {
	CLUSTER_PAGE(RUN_RANK("total_cost"), "c.total_cost_ns DESC, c.id"),
	CLUSTER_PAGE(RUN_RANK("streams"), "c.streams DESC, c.id"),
	CLUSTER_PAGE(RUN_RANK("events"), "c.events DESC, c.id"),
	CLUSTER_PAGE(RUN_RANK("avg_cost"), "c.avg_cost_ns DESC, c.id"),
	CLUSTER_PAGE(RUN_RANK("excess_cost"), "c.excess_cost_ns DESC NULLS LAST, c.id"),
};

PGresult *model_clusters(PGconn *db, const char *run_id, enum model_sort sort, const char *kind,
			 const char *text, long limit, long offset, char *err, size_t errlen)
{
	char lim[24], off[24];
	const char *p[5] = { run_id, kind, text, lim, off };

	snprintf(lim, sizeof(lim), "%ld", limit);
	snprintf(off, sizeof(off), "%ld", offset);
	return run(db, cluster_sql[(unsigned)sort < SORT_N ? sort : 0], 5, p, err, errlen);
}

PGresult *model_clusters_count(PGconn *db, const char *run_id, const char *kind, const char *text,
			       char *err, size_t errlen)
{
	const char *p[3] = { run_id, kind, text };

	return run(db, "SELECT count(*) AS total" CLUSTER_WHERE, 3, p, err, errlen);
}

PGresult *model_cluster_patterns(PGconn *db, const char *cluster_ids, long per_cluster, char *err,
				 size_t errlen)
{
	return run_key_limit(db, 6,
		   "SELECT cluster_id, pattern_id, frame_ids, cost_ns, events, streams, est_cost_ns FROM ("
		   " SELECT c.id AS cluster_id, p.id AS pattern_id, p.frame_ids, p.cost_ns, p.events, p.streams,"
		   "  coalesce(p.est_cost_ns, p.cost_ns) AS est_cost_ns,"
		   "  row_number() OVER (PARTITION BY c.id ORDER BY p.cost_ns DESC, p.id) AS k"
		   " FROM clusters c JOIN patterns p ON p.id = ANY(c.members) WHERE c.id = ANY($1::bigint[])) x"
		   " WHERE k <= $2 ORDER BY cluster_id, k",
		   cluster_ids, per_cluster, err, errlen);
}

PGresult *model_cluster(PGconn *db, const char *id, char *err, size_t errlen)
{
	const char *p[1] = { id };

	return run_prepared(db, 7,
		   CLUSTER_COLS(RUN_RANK("total_cost")) ", c.medoid,"
		   " (SELECT coalesce(json_agg(json_build_object('pattern_id', (a->>'pattern')::bigint,"
		   "   'sim', (a->>'sim')::float8, 'ops', a->>'ops') ORDER BY o), '[]')"
		   "  FROM jsonb_array_elements(c.alignment) WITH ORDINALITY AS x(a, o)) AS alignment,"
		   " cardinality(c.stack_ids) > 0 AS has_stacks"
		   " FROM clusters c WHERE c.id = $1::bigint",
		   1, p, err, errlen);
}

/* A cluster's ('c') or a problem's ('p') streams, their cost and their values were counted when
 * the run was stored (027_match: match_streams, match_values): a page reads what it shows, not
 * every stack of every stream it matched. */

/* the top $2 streams of a cluster or a problem (OF 'c' or 'p'); a stream that retention removed
 * since the run: listed, marked expired */
#define TOP_STREAMS(of)                                                                          \
	"SELECT s.stream_id::text AS stream_id, s.host, s.app, s.version, m.cost_ns, m.events,"     \
	" s.id IS NULL AS expired"                                                                  \
	" FROM (SELECT stream_ref, cost_ns, events FROM match_streams WHERE of = '" of "'"          \
	"  AND id = $1::bigint ORDER BY cost_ns DESC, stream_ref LIMIT $2::bigint) m"               \
	" LEFT JOIN streams s ON s.id = m.stream_ref ORDER BY m.cost_ns DESC, m.stream_ref"

PGresult *model_cluster_streams(PGconn *db, const char *id, long limit, char *err, size_t errlen)
{
	return run_key_limit(db, 8, TOP_STREAMS("c"), id, limit, err, errlen);
}

PGresult *model_cluster_by(PGconn *db, const char *id, long limit, char *err, size_t errlen)
{
	/* each dimension's top values: host, version, the labels together. Each is its own top-N from
	 * match_values_of (of, id, key, cost_ns DESC): a cluster of a fleet has a value per host, and
	 * ranking all 10,000 of them to show 15 took 26 ms. */
#define BY_DIM(dim, where)                                                                       	"(SELECT '" dim "' AS dim, key, value, cost_ns, events, streams FROM match_values"            	" WHERE of = 'c' AND id = $1::bigint AND " where                                           	" ORDER BY cost_ns DESC, key, value LIMIT $2::bigint)"
	return run_key_limit(db, 1,
		   "SELECT dim, key, value, cost_ns, events, streams FROM ("
		   BY_DIM("host", "key = 'host'") " UNION ALL " BY_DIM("version", "key = 'version'")
		   /* every other key but '' (the totals), as ranges of the index, not a filter of its
		    * host rows: '' sorts first in every collation, and equal means equal bytes */
		   " UNION ALL " BY_DIM("label", "((key > '' AND key < 'host') OR (key > 'host' AND key < 'version')"
					 " OR key > 'version')") ") g"
		   " ORDER BY dim, cost_ns DESC, key, value",
		   id, limit, err, errlen);
#undef BY_DIM
}

/* ---- attribution (web/attribution.h): what is attributed, then the same two queries ---- */

/* c: the run and the kind of the population (NULL: both kinds, a problem spans them);
 * k: the attributed streams with their cost there; kc: their values (the streams without a
 * version have none); kt: their totals */
#define MATCH_K(of)                                                                              \
	" k AS (SELECT stream_ref, cost_ns AS cost FROM match_streams WHERE of = '" of "' AND id = $1::bigint)," \
	" kc AS (SELECT key, value, streams AS n, cost_ns AS cost FROM match_values"                 \
	"  WHERE of = '" of "' AND id = $1::bigint AND key <> '' AND (key <> 'version' OR value <> ''))," \
	" kt AS (SELECT streams AS n, cost_ns AS cost FROM match_values"                             \
	"  WHERE of = '" of "' AND id = $1::bigint AND key = '')"
#define CLUSTER_K                                                                                \
	"WITH c AS (SELECT run_id, kind FROM clusters WHERE id = $1::bigint)," MATCH_K("c")
#define PROBLEM_K                                                                                \
	"WITH c AS (SELECT run_id, NULL::\"char\" AS kind FROM problems WHERE id = $1::bigint)," MATCH_K("p")

/* a stream's host, version and label values (x.key, x.value) */
#define STREAM_KV                                                                                \
	"  LATERAL (SELECT 'host' AS key, s.host AS value UNION ALL"                                \
	"   SELECT 'version', s.version WHERE s.version IS NOT NULL UNION ALL"                      \
	"   SELECT l.key, l.value FROM jsonb_each_text(s.labels) AS l(key, value)"                  \
	"   WHERE l.key NOT IN ('host', 'version')) x"

/* the run's counts were stored with it (run_values), and the attributed streams' (match_values) */
#define VALUES_STORED                                                                            \
	" SELECT v.key, v.value, v.run_streams, coalesce(kc.n, 0) AS cluster_streams,"              \
	"  coalesce(kc.cost, 0)::bigint AS cluster_cost_ns, v.baseline_streams"                     \
	" FROM run_values v JOIN c ON v.run_id = c.run_id LEFT JOIN kc USING (key, value) WHERE v.key <> ''" \
	" UNION ALL SELECT NULL, NULL, v.run_streams, coalesce((SELECT n FROM kt), 0),"              \
	"  coalesce((SELECT cost FROM kt), 0)::bigint, v.baseline_streams"                          \
	" FROM run_values v JOIN c ON v.run_id = c.run_id WHERE v.key = ''"                         \
	" ORDER BY 1 NULLS FIRST, 2"

/* a run stored before run_values: the run's violating streams (those with AOI events of the
 * kind, or of either), the attributed ones, the baseline; every value over them counted now */
#define VALUES_COUNTED                                                                           \
	", r AS (SELECT DISTINCT rs.stream_ref FROM run_stacks rs, c WHERE rs.run_id = c.run_id"    \
	"  AND (c.kind IS NULL OR rs.kind = c.kind)),"                                             \
	" b AS (SELECT rb.stream_ref FROM run_baseline rb, c WHERE rb.run_id = c.run_id),"         \
	" a AS (SELECT stream_ref FROM r UNION SELECT stream_ref FROM b),"                         \
	" kv AS (SELECT s.id AS stream_ref, x.key, x.value FROM a JOIN streams s ON s.id = a.stream_ref," \
	STREAM_KV ")"                                                                              \
	" SELECT kv.key, kv.value, count(r.stream_ref) AS run_streams, count(k.stream_ref) AS cluster_streams," \
	"  coalesce(sum(k.cost), 0)::bigint AS cluster_cost_ns, count(b.stream_ref) AS baseline_streams" \
	" FROM kv LEFT JOIN r USING (stream_ref) LEFT JOIN k USING (stream_ref) LEFT JOIN b USING (stream_ref)" \
	" GROUP BY kv.key, kv.value"                                                               \
	" UNION ALL SELECT NULL, NULL, (SELECT count(*) FROM r), (SELECT count(*) FROM k),"         \
	"  (SELECT coalesce(sum(cost), 0)::bigint FROM k), (SELECT count(*) FROM b)"                \
	" ORDER BY 1 NULLS FIRST, 2"

/* the stored counts' query, else (no run_values rows: an older run) the counting one */
static PGresult *values(PGconn *db, int stored_no, const char *stored, int counted_no, const char *counted,
			const char *id, char *err, size_t errlen)
{
	const char *p[1] = { id };
	PGresult *r = run_prepared(db, stored_no, stored, 1, p, err, errlen);

	if (!r || PQntuples(r) > 0)
		return r;
	PQclear(r);
	return run_prepared(db, counted_no, counted, 1, p, err, errlen);
}

PGresult *model_cluster_values(PGconn *db, const char *id, char *err, size_t errlen)
{
	return values(db, 12, CLUSTER_K VALUES_STORED, 11, CLUSTER_K VALUES_COUNTED, id, err, errlen);
}

PGresult *model_problem_values(PGconn *db, const char *id, char *err, size_t errlen)
{
	return values(db, 21, PROBLEM_K VALUES_STORED, 22, PROBLEM_K VALUES_COUNTED, id, err, errlen);
}

/* what the cost depends on (web/attribution.h): the attributed streams, a deterministic sample of
 * $2 of them (by a hash of their id, drawn when the run was stored: match_streams.pick; those
 * retention removed since are left out), with their cost; then their numeric labels, of the keys
 * whose values are numbers on at least 95 % of the streams that have them */
#define NUMBER_RE "'^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$'"
#define NUMERIC(of)                                                                              \
	" s AS (SELECT m.stream_ref, m.cost_ns AS cost FROM match_streams m JOIN streams t ON t.id = m.stream_ref" \
	"  WHERE m.of = '" of "' AND m.id = $1::bigint AND m.pick <= $2::bigint),"                   \
	" kv AS (SELECT s.stream_ref, l.key, l.value, l.value ~ " NUMBER_RE " AS num"               \
	"  FROM s JOIN streams t ON t.id = s.stream_ref, jsonb_each_text(t.labels) AS l(key, value)),"     \
	" nk AS (SELECT key FROM kv GROUP BY key HAVING count(*) FILTER (WHERE num) >= 0.95 * count(*))" \
	" SELECT stream_ref, cost::bigint AS cost_ns, NULL::text AS key, NULL::text AS value FROM s" \
	" UNION ALL SELECT kv.stream_ref, NULL, kv.key, kv.value FROM kv JOIN nk USING (key) WHERE kv.num" \
	" ORDER BY 3 NULLS FIRST, 1"

PGresult *model_cluster_numeric(PGconn *db, const char *id, long limit, char *err, size_t errlen)
{
	return run_key_limit(db, 0, "WITH" NUMERIC("c"), id, limit, err, errlen);
}

PGresult *model_problem_numeric(PGconn *db, const char *id, long limit, char *err, size_t errlen)
{
	return run_key_limit(db, 0, "WITH" NUMERIC("p"), id, limit, err, errlen);
}

/* Cluster c's stacks (its stack_ids, or a slice of them: ids) with their run-wide sums, as t. */
#define STACK_TOTALS(ids)                                                                        \
	" CROSS JOIN LATERAL unnest(" ids ") AS u(stack_id) JOIN run_stack_totals t"                \
	" ON t.run_id = c.run_id AND t.kind = c.kind AND t.stack_id = u.stack_id"

PGresult *model_cluster_stacks_top(PGconn *db, const char *id, long limit, char *err, size_t errlen)
{
	/* stack_ids come costliest first (027_match): the first $2 of them, the others from the
	 * cluster's totals, which are their sum */
	return run_key_limit(db, 0,
		   "WITH c AS (SELECT run_id, kind, stack_ids, total_cost_ns, events FROM clusters WHERE id = $1::bigint),"
		   " t AS (SELECT t.stack_id, t.cost_ns, t.events FROM c" STACK_TOTALS("c.stack_ids[1:$2::integer]") ")"
		   " SELECT stack_id, cost_ns, events, 1 AS stacks FROM t"
		   " UNION ALL SELECT NULL, c.total_cost_ns - (SELECT coalesce(sum(cost_ns), 0) FROM t),"
		   "  c.events - (SELECT coalesce(sum(events), 0) FROM t), cardinality(c.stack_ids) - $2::integer"
		   " FROM c WHERE cardinality(c.stack_ids) > $2::integer ORDER BY 1 NULLS LAST",
		   id, limit, err, errlen);
}

PGresult *model_cluster_stacks(PGconn *db, const char *id, char *err, size_t errlen)
{
	const char *p[1] = { id };

	return run_prepared(db, 9,
		   "SELECT t.stack_id, t.cost_ns, t.events FROM clusters c" STACK_TOTALS("c.stack_ids")
		   " WHERE c.id = $1::bigint ORDER BY t.stack_id",
		   1, p, err, errlen);
}

/* ---- signatures ---- */

#define SIG_COLS                                                                                 \
	"SELECT g.id AS signature_id, g.name, to_json(g.frames) AS frames, g.status, g.note,"       \
	" g.from_cluster, g.from_run,"                                                              \
	" (g.from_cluster IS NOT NULL AND NOT EXISTS (SELECT 1 FROM clusters c WHERE c.id = g.from_cluster))" \
	" AS from_expired, " ISO("g.created_at") " AS created_at, " ISO("g.updated_at") " AS updated_at" \
	" FROM signatures g"

PGresult *model_signatures(PGconn *db, long limit, long offset, char *err, size_t errlen)
{
	char lim[24], off[24];
	const char *p[2] = { lim, off };

	snprintf(lim, sizeof(lim), "%ld", limit);
	snprintf(off, sizeof(off), "%ld", offset);
	return run(db, SIG_COLS " ORDER BY g.name LIMIT $1 OFFSET $2", 2, p, err, errlen);
}

PGresult *model_signatures_count(PGconn *db, char *err, size_t errlen)
{
	return run(db, "SELECT count(*) AS total FROM signatures", 0, NULL, err, errlen);
}

PGresult *model_signature(PGconn *db, const char *id, char *err, size_t errlen)
{
	const char *p[1] = { id };

	return run_prepared(db, 10, SIG_COLS " WHERE g.id = $1::bigint", 1, p, err, errlen);
}

int model_stream_aoi(PGresult *st, const struct model_events *e, enum aoi_mode mode, bool *in)
{
	struct wire_event *we = calloc(e->n + 1, sizeof(*we));
	struct wire_symptom sym;
	struct aoi *a = aoi_open();
	const uint32_t *idx;
	size_t nidx;
	int rc = -1;

	memset(&sym, 0, sizeof(sym));
	if (!we || !a)
		goto out;
	for (size_t i = 0; i < e->n; i++) {
		const struct evpack_event *v = &e->ev[i];

		we[i].kind = v->kind == 'w' ? WIRE_WAIT : WIRE_RUN;
		we[i].tid = v->tid;
		we[i].ts_ns = v->ts_ns;
		we[i].dur_ns = v->dur_ns;
		we[i].readier_tid = v->kind == 'w' ? v->readier_tid : 0;
	}
	sym.tid = model_coln(st, 0, "symptom_tid");
	sym.start_ns = model_coln(st, 0, "symptom_start_ns");
	sym.end_ns = model_coln(st, 0, "symptom_end_ns");
	if (aoi_extract(a, we, e->n, &sym, mode, &idx, &nidx) < 0)
		goto out;
	for (size_t i = 0; i < nidx; i++)
		in[idx[i]] = true;
	rc = 0;
out:
	free(we);
	aoi_free(a);
	return rc;
}

/* ---- tokens ---- */

PGresult *model_tokens(PGconn *db, long limit, long offset, char *err, size_t errlen)
{
	char lim[24], off[24];
	const char *p[2] = { lim, off };

	snprintf(lim, sizeof(lim), "%ld", limit);
	snprintf(off, sizeof(off), "%ld", offset);
	return run(db, "SELECT id AS token_id, role, name, host, " ISO("created_at") " AS created_at, "
		       ISO("revoked_at") " AS revoked_at FROM tokens ORDER BY id LIMIT $1 OFFSET $2",
		   2, p, err, errlen);
}

PGresult *model_tokens_count(PGconn *db, char *err, size_t errlen)
{
	return run(db, "SELECT count(*) AS total FROM tokens", 0, NULL, err, errlen);
}

/* ---- the fleet: what the guard agents report (ingest's agent_procs, agent_hours) ---- */

/* A sum of bigints (numeric in SQL), 0 when none, at most the largest bigint: stored counters may
 * be that large (least() alone would turn no rows into the largest). */
#define SAT(sum) "least(coalesce(" sum ", 0), 9223372036854775807)::bigint"

/*
 * A process is live when it reported within $1 seconds, silent when it did not and never said it
 * exited; a host takes its worst process's state. What a host runs now (apps, modes, builds) is
 * read from its processes that have not exited, or from its last one when all have.
 */
#define HOSTS_SQL                                                                                       \
	"WITH p AS (SELECT a.*, NOT a.exited AND a.last_seen >= now() - make_interval(secs => $1::float8)" \
	"   AS is_live, NOT a.exited AND a.last_seen < now() - make_interval(secs => $1::float8) AS is_silent," \
	"   max(a.last_seen) OVER (PARTITION BY a.host) AS host_last FROM agent_procs a" \
	"   WHERE $2::text IS NULL OR a.host = $2)," \
	" h AS (SELECT host, CASE WHEN bool_or(is_silent) THEN 'silent' WHEN bool_or(is_live) THEN 'live'" \
	"   ELSE 'stopped' END AS status, min(first_seen) AS first_seen, max(last_seen) AS last_seen," \
	"   count(*) FILTER (WHERE is_live) AS processes_live, count(*) FILTER (WHERE is_silent) AS processes_silent," \
	"   to_jsonb(array_agg(DISTINCT app ORDER BY app) FILTER (WHERE NOT exited OR last_seen = host_last)) AS apps," \
	"   to_jsonb(array_agg(DISTINCT mode ORDER BY mode) FILTER (WHERE NOT exited OR last_seen = host_last))" \
	"   AS modes, to_jsonb(array_agg(DISTINCT build_id ORDER BY build_id) FILTER (WHERE NOT exited OR" \
	"   last_seen = host_last)) AS build_ids, to_jsonb(array_agg(DISTINCT agent_version ORDER BY agent_version)" \
	"   FILTER (WHERE NOT exited OR last_seen = host_last)) AS agent_versions," \
	"   " SAT("sum(drops) FILTER (WHERE NOT exited)") " AS drops," \
	"   coalesce(max(spool_backlog) FILTER (WHERE NOT exited), 0) AS spool_backlog," \
	"   " SAT("sum(ship_errors) FILTER (WHERE NOT exited)") " AS ship_errors FROM p GROUP BY host)" \
	" SELECT h.host, h.status, h.processes_live, h.processes_silent, h.apps, h.modes, h.build_ids," \
	"   h.agent_versions, " ISO("h.first_seen") " AS first_seen, " ISO("h.last_seen") " AS last_seen," \
	"   extract(epoch FROM now() - h.last_seen)::bigint AS seconds_since_report," \
	"   coalesce(hr.units_24h, 0) AS units_24h, coalesce(hr.violations_24h, 0) AS violations_24h," \
	"   hr.violations_by_hour, h.drops, h.spool_backlog, h.ship_errors FROM h" \
	" CROSS JOIN LATERAL (SELECT " SAT("sum(x.units)") " AS units_24h, " SAT("sum(x.violations)") " AS violations_24h," \
	"   to_jsonb(array_agg(coalesce(x.violations, 0) ORDER BY g.hour)) AS violations_by_hour" \
	"   FROM generate_series(date_trunc('hour', now()) - interval '23 hours', date_trunc('hour', now())," \
	"   interval '1 hour') AS g(hour) LEFT JOIN agent_hours x ON x.host = h.host AND x.hour = g.hour) hr" \
	" WHERE $3::text IS NULL OR h.status = $3"

PGresult *model_hosts(PGconn *db, const struct host_filter *f, long limit, long offset, char *err,
		      size_t errlen)
{
	char secs[24], lim[24], off[24];
	const char *p[5] = { secs, f->host, f->status, lim, off };

	snprintf(secs, sizeof(secs), "%lld", (long long)f->silent_after_s);
	snprintf(lim, sizeof(lim), "%ld", limit);
	snprintf(off, sizeof(off), "%ld", offset);
	return run(db, HOSTS_SQL " ORDER BY h.status = 'silent' DESC, violations_24h DESC, h.host LIMIT $4 OFFSET $5",
		   5, p, err, errlen);
}

PGresult *model_hosts_count(PGconn *db, const struct host_filter *f, char *err, size_t errlen)
{
	char secs[24];
	const char *p[3] = { secs, f->host, f->status };

	snprintf(secs, sizeof(secs), "%lld", (long long)f->silent_after_s);
	return run(db, "SELECT count(*) AS total FROM (" HOSTS_SQL ") n", 3, p, err, errlen);
}

/*
 * What the shipping budget sampled away, per app and host (docs/fleet.md, "Sampled away"): the
 * violations its processes seen in the last 24 h counted and dropped (their reports), the violation
 * streams stored in the last 24 h and the sum of their weights (the violations they stand for).
 */
PGresult *model_fleet_sampling(PGconn *db, long limit, char *err, size_t errlen)
{
	char lim[24];
	const char *p[1] = { lim };

	snprintf(lim, sizeof(lim), "%ld", limit);
	return run(db, "WITH s AS (SELECT app, host, count(*) AS streams, sum(weight) AS est FROM streams"
		       "  WHERE role = 'violation' AND received_at >= now() - interval '24 hours' GROUP BY app, host),"
		       " p AS (SELECT app, host, " SAT("sum(violations)") " AS violations, " SAT("sum(drops)") " AS drops"
		       "  FROM agent_procs WHERE last_seen >= now() - interval '24 hours' GROUP BY app, host)"
		       " SELECT coalesce(s.app, p.app) AS app, coalesce(s.host, p.host) AS host,"
		       " coalesce(p.violations, 0) AS violations, coalesce(p.drops, 0) AS drops,"
		       " coalesce(s.streams, 0) AS streams,"
		       " least(round(coalesce(s.est, 0)), 9223372036854775807)::bigint AS est_violations"
		       " FROM s FULL JOIN p ON p.app = s.app AND p.host = s.host"
		       " ORDER BY coalesce(p.drops, 0) DESC, 1, 2 LIMIT $1::integer",
		   1, p, err, errlen);
}

PGresult *model_host_procs(PGconn *db, const char *host, long long silent_after_s, long limit, char *err,
			   size_t errlen)
{
	char secs[24], lim[24];
	const char *p[3] = { host, secs, lim };

	snprintf(secs, sizeof(secs), "%lld", silent_after_s);
	snprintf(lim, sizeof(lim), "%ld", limit);
	return run(db, "SELECT pid, app, exe, build_id, mode, collector, agent_version, CASE WHEN exited THEN 'exited'"
		       " WHEN last_seen >= now() - make_interval(secs => $2::float8) THEN 'live' ELSE 'silent' END AS status,"
		       " " ISO("started_at") " AS started_at, " ISO("first_seen") " AS first_seen, "
		       ISO("last_seen") " AS last_seen, units, violations, drops, spool_backlog, ship_errors"
		       " FROM agent_procs WHERE host = $1 ORDER BY exited, last_seen DESC, pid LIMIT $3",
		   3, p, err, errlen);
}

PGresult *model_host_hours(PGconn *db, const char *host, int hours, char *err, size_t errlen)
{
	char n[16];
	const char *p[2] = { host, n };

	snprintf(n, sizeof(n), "%d", hours - 1);
	return run(db, "SELECT " ISO("g.hour") " AS hour, coalesce(x.units, 0) AS units,"
		       " coalesce(x.violations, 0) AS violations FROM generate_series(date_trunc('hour', now())"
		       " - make_interval(hours => $2::integer), date_trunc('hour', now()), interval '1 hour') AS g(hour)"
		       " LEFT JOIN agent_hours x ON x.host = $1 AND x.hour = g.hour ORDER BY g.hour",
		   2, p, err, errlen);
}

PGresult *model_profiles(PGconn *db, const char *build_id, long limit, long offset, char *err, size_t errlen)
{
	char lim[24], off[24];
	const char *p[3] = { build_id, lim, off };

	snprintf(lim, sizeof(lim), "%ld", limit);
	snprintf(off, sizeof(off), "%ld", offset);
	return run(db, "SELECT m.build_id, m.exe, m.hosts, m.processes, m.units, m.merge_ms, " ISO("m.merged_at")
		       " AS merged_at, m.stale, " ISO("(SELECT max(uploaded_at) FROM profile_uploads u WHERE u.build_id ="
		       " m.build_id)") " AS last_upload, m.summary, m.held_back FROM profiles_merged m WHERE $1::text IS NULL OR"
		       " m.build_id = $1 ORDER BY m.units DESC, m.build_id LIMIT $2 OFFSET $3",
		   3, p, err, errlen);
}

PGresult *model_profiles_count(PGconn *db, char *err, size_t errlen)
{
	return run(db, "SELECT count(*) AS total FROM profiles_merged", 0, NULL, err, errlen);
}

PGresult *model_agent_settings(PGconn *db, char *err, size_t errlen)
{
	return run(db, "SELECT app, guard, k, sample_hz, min_wait_us, reports_per_min, note, " ISO("updated_at")
		       " AS updated_at FROM agent_settings ORDER BY app = '*' DESC, app", 0, NULL, err, errlen);
}

int model_agent_settings_put(PGconn *db, const struct agent_settings *s, char *err, size_t errlen)
{
	char v[GSET_COUNT][40];
	const char *p[GSET_COUNT + 2] = { s->app };
	PGresult *r;

	/* $2.. the settings in the table's order, as the statement names them */
	_Static_assert(GSET_COUNT == 5, "agent_settings' INSERT names each setting of guardcore/settings.h");
	for (size_t i = 0; i < GSET_COUNT; i++) {
		if (!s->set[i])
			continue;
		if (guard_settings[i].type == GSET_BOOL)
			snprintf(v[i], sizeof(v[i]), "%s", s->value[i] != 0 ? "t" : "f");
		else
			snprintf(v[i], sizeof(v[i]), "%.17g", s->value[i]);
		p[i + 1] = v[i];
	}
	p[GSET_COUNT + 1] = s->note;
	r = PQexecParams(db, "INSERT INTO agent_settings (app, guard, k, sample_hz, min_wait_us, reports_per_min, note)"
			 " VALUES ($1, $2::boolean, $3::float8, $4::integer, $5::integer, $6::integer, $7)"
			 " ON CONFLICT (app) DO UPDATE SET guard = EXCLUDED.guard, k = EXCLUDED.k, sample_hz = EXCLUDED.sample_hz,"
			 " min_wait_us = EXCLUDED.min_wait_us, reports_per_min = EXCLUDED.reports_per_min,"
			 " note = EXCLUDED.note, updated_at = now()", GSET_COUNT + 2, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		db_errcpy(err, errlen, "storing the settings", PQresultErrorMessage(r));
		PQclear(r);
		return WEB_EFAIL;
	}
	PQclear(r);
	return 0;
}

/* A DELETE of the rows of key ($1): 0, WEB_ENOTFOUND (none: the caller says so in err) or WEB_EFAIL
 * with err (doing: what failed). */
static int delete_rows(PGconn *db, const char *sql, const char *key, const char *doing, char *err, size_t errlen)
{
	const char *p[1] = { key };
	PGresult *r = PQexecParams(db, sql, 1, NULL, p, NULL, NULL, 0);
	int n;

	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		db_errcpy(err, errlen, doing, PQresultErrorMessage(r));
		PQclear(r);
		return WEB_EFAIL;
	}
	n = strcmp(PQcmdTuples(r), "0") != 0;
	PQclear(r);
	return n ? 0 : WEB_ENOTFOUND;
}

int model_agent_settings_delete(PGconn *db, const char *app, char *err, size_t errlen)
{
	int rc = delete_rows(db, "DELETE FROM agent_settings WHERE app = $1", app, "deleting the settings", err, errlen);

	if (rc == WEB_ENOTFOUND)
		snprintf(err, errlen, "app '%.255s': no settings pushed to it", app);
	return rc;
}

/* ---- schedules, alert rules, alerts (docs/analysis.md, "Watching") ---- */

PGresult *model_schedules(PGconn *db, char *err, size_t errlen)
{
	return run(db, "SELECT id AS schedule_id, app, kind, every_s, window_s, params, enabled, " ISO("next_at")
		       " AS next_at, last_run, " ISO("created_at") " AS created_at FROM schedules ORDER BY app, kind",
		   0, NULL, err, errlen);
}

PGresult *model_schedule_put(PGconn *db, const char *const p[5], char *err, size_t errlen)
{
	return run(db, "INSERT INTO schedules (app, kind, every_s, window_s, params) VALUES ($1, $2, $3::integer,"
		       " $4::integer, $5::jsonb) ON CONFLICT (app, kind) DO UPDATE SET every_s = EXCLUDED.every_s,"
		       " window_s = EXCLUDED.window_s, params = EXCLUDED.params, enabled = true, next_at = now()"
		       " RETURNING id AS schedule_id", 5, p, err, errlen);
}

/* The DELETE of one object by id: 0, WEB_ENOTFOUND ("what id: none") or WEB_EFAIL */
static int delete_one(PGconn *db, const char *sql, const char *id, const char *what, char *err, size_t errlen)
{
	int rc = delete_rows(db, sql, id, "deleting", err, errlen);

	if (rc == WEB_ENOTFOUND)
		snprintf(err, errlen, "%s %.24s: none", what, id);
	return rc;
}

int model_schedule_delete(PGconn *db, const char *id, char *err, size_t errlen)
{
	return delete_one(db, "DELETE FROM schedules WHERE id = $1::bigint", id, "schedule", err, errlen);
}

PGresult *model_alert_rules(PGconn *db, bool redact, char *err, size_t errlen)
{
	const char *p[1] = { redact ? "t" : "f" };

	/* the user information is everything of the authority up to its last '@' */
	return run(db, "SELECT r.id AS rule_id, r.name, r.app, r.type, r.signature_id, s.name AS signature,"
		       " r.limit_ns_per_hour, r.min_share, CASE WHEN $1::bool THEN regexp_replace(regexp_replace("
		       "  r.webhook, '^([A-Za-z]+://)[^/?#\\\\]*@', '\\1***@'),"
		       "  '([?&;][^=&;#]*(token|key|secret|passw|pwd|auth|sig|credential|session)[^=&;#]*=)[^&;#]*',"
		       "  '\\1***', 'gi') ELSE r.webhook END AS webhook,"
		       " r.enabled, " ISO("r.created_at") " AS created_at"
		       " FROM alert_rules r LEFT JOIN signatures s ON s.id = r.signature_id ORDER BY r.name",
		   1, p, err, errlen);
}

int model_alert_rule_put(PGconn *db, const char *const p[7], int64_t *id, char *err, size_t errlen)
{
	PGresult *r = PQexecParams(db, "INSERT INTO alert_rules (name, app, type, signature_id, limit_ns_per_hour, min_share, webhook)"
		       " VALUES ($1, $2, $3, $4::bigint, $5::bigint, $6::float8, $7) ON CONFLICT (name) DO UPDATE SET"
		       " app = EXCLUDED.app, type = EXCLUDED.type, signature_id = EXCLUDED.signature_id,"
		       " limit_ns_per_hour = EXCLUDED.limit_ns_per_hour, min_share = EXCLUDED.min_share,"
		       " webhook = EXCLUDED.webhook, enabled = true RETURNING id AS rule_id", 7, NULL, p, NULL, NULL, 0);
	const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);

	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
		*id = db_get_i64(r, 0, 0);
		PQclear(r);
		return 0;
	}
	/* the only foreign key of a rule is its signature's */
	if (state && strcmp(state, "23503") == 0) {
		snprintf(err, errlen, "signature_id: no such signature");
		PQclear(r);
		return WEB_EINVAL;
	}
	db_errcpy(err, errlen, "query", r ? PQresultErrorMessage(r) : PQerrorMessage(db));
	PQclear(r);
	return WEB_EFAIL;
}

int model_alert_rule_delete(PGconn *db, const char *id, char *err, size_t errlen)
{
	return delete_one(db, "DELETE FROM alert_rules WHERE id = $1::bigint", id, "alert rule", err, errlen);
}

PGresult *model_alerts(PGconn *db, long limit, char *err, size_t errlen)
{
	char lim[24];
	const char *p[1] = { lim };

	snprintf(lim, sizeof(lim), "%ld", limit);
	return run(db, "SELECT a.id AS alert_id, r.name AS rule, r.type, a.run_id, a.cluster_id, a.message,"
		       " a.delivery, a.attempts, a.last_error, " ISO("a.created_at") " AS created_at, "
		       ISO("a.delivered_at") " AS delivered_at FROM alerts a JOIN alert_rules r ON r.id = a.rule_id"
		       " ORDER BY a.id DESC LIMIT $1::bigint", 1, p, err, errlen);
}

PGresult *model_run_kind_stacks(PGconn *db, const char *run, const char *kind, char *err, size_t errlen)
{
	const char *p[2] = { run, kind };

	return run_prepared(db, 13,
		   "SELECT s.frame_ids, x.cost_ns FROM (SELECT stack_id, sum(cost_ns)::bigint AS cost_ns FROM run_stacks"
		   " WHERE run_id = $1::bigint AND kind = $2::\"char\" GROUP BY stack_id) x JOIN stacks s ON s.id = x.stack_id"
		   " ORDER BY x.stack_id", 2, p, err, errlen);
}

PGresult *model_run_profile(PGconn *db, const char *run, char *err, size_t errlen)
{
	const char *p[1] = { run };

	return run_prepared(db, 14,
		   "SELECT x.kind, s.frame_ids, x.cost_ns, x.events FROM (SELECT kind, stack_id,"
		   " sum(cost_ns)::bigint AS cost_ns, sum(events)::bigint AS events FROM run_stacks"
		   " WHERE run_id = $1::bigint GROUP BY kind, stack_id) x JOIN stacks s ON s.id = x.stack_id"
		   " ORDER BY x.kind, x.stack_id", 1, p, err, errlen);
}

/* ---- sessions ---- */

/* whether session s (an alias and a dot, or "") is over its limits, idle ($I) and absolute ($M) */
#define SESSION_OVER(s, I, M) "(" s "last_seen_at < now() - make_interval(secs => $" I "::int)" \
			      " OR " s "created_at < now() - make_interval(secs => $" M "::int))"

PGresult *model_session_create(PGconn *db, const char *sh, const char *th, const char *idle, const char *max,
			       char *err, size_t errlen)
{
	const char *p[4] = { sh, th, idle, max };

	return run(db, "WITH gone AS (DELETE FROM sessions WHERE " SESSION_OVER("", "3", "4")
		       " OR token_id IN (SELECT id FROM tokens WHERE revoked_at IS NOT NULL) RETURNING 1)"
		       " INSERT INTO sessions (session_hash, token_id) SELECT decode($1, 'hex'), id FROM tokens"
		       " WHERE token_hash = decode($2, 'hex') AND revoked_at IS NULL"
		       " RETURNING id AS session_id, (SELECT count(*) FROM gone) AS expired", 4, p, err, errlen);
}

PGresult *model_session_touch(PGconn *db, const char *sh, const char *idle, const char *max, char *err,
			      size_t errlen)
{
	const char *p[3] = { sh, idle, max };

	return run(db, "UPDATE sessions s SET last_seen_at = now() FROM tokens t"
		       " WHERE s.session_hash = decode($1, 'hex') AND t.id = s.token_id"
		       " AND t.revoked_at IS NULL AND NOT " SESSION_OVER("s.", "2", "3")
		       " RETURNING t.role, encode(s.session_hash, 'hex') AS session_hash", 3, p, err, errlen);
}

PGresult *model_session_delete(PGconn *db, const char *sh, char *err, size_t errlen)
{
	const char *p[1] = { sh };

	return run(db, "DELETE FROM sessions WHERE session_hash = decode($1, 'hex') RETURNING id AS session_id", 1,
		   p, err, errlen);
}

PGresult *model_sessions_of_token_delete(PGconn *db, const char *token_id, char *err, size_t errlen)
{
	const char *p[1] = { token_id };

	return run(db, "DELETE FROM sessions WHERE token_id = $1::int RETURNING id AS session_id", 1, p, err,
		   errlen);
}

const char *model_col(PGresult *r, int row, const char *name)
{
	int c = PQfnumber(r, name);

	return c < 0 || PQgetisnull(r, row, c) ? NULL : PQgetvalue(r, row, c);
}

int64_t model_coln(PGresult *r, int row, const char *name)
{
	const char *v = model_col(r, row, name);

	return v ? strtoll(v, NULL, 10) : 0;
}

double model_cold(PGresult *r, int row, const char *name)
{
	const char *v = model_col(r, row, name);

	return v ? strtod(v, NULL) : 0;
}

int model_find_stack(PGresult *r, int64_t sid)
{
	int lo = 0, hi = PQntuples(r), c = PQfnumber(r, "stack_id");

	if (c < 0)
		return -1;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (strtoll(PQgetvalue(r, mid, c), NULL, 10) < sid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < PQntuples(r) && strtoll(PQgetvalue(r, lo, c), NULL, 10) == sid ? lo : -1;
}

/* ---- problems (docs/mining.md, "Problems") ---- */

#define PROBLEM_COLS                                                                             \
	"SELECT p.id AS problem_id, p.run_id, p.rank, p.title_frame_ids AS title, p.total_cost_ns,"   \
	" p.streams, p.events, p.avg_cost_ns, p.excess_cost_ns,"                                   \
	" p.excess_lo_ns, p.excess_hi_ns, p.own_cost_ns, p.expected_cost_ns, p.baseline_streams,"    \
	" p.est_cost_ns, p.est_streams, p.cause"                                                     \
	" FROM problems p"

PGresult *model_problems(PGconn *db, const char *run_id, long limit, long offset, char *err, size_t errlen)
{
	char lim[24], off[24];
	const char *p[3] = { run_id, lim, off };

	snprintf(lim, sizeof(lim), "%ld", limit);
	snprintf(off, sizeof(off), "%ld", offset);
	return run(db, PROBLEM_COLS " WHERE p.run_id = $1::bigint ORDER BY p.rank LIMIT $2 OFFSET $3", 3, p, err,
		   errlen);
}

PGresult *model_problems_count(PGconn *db, const char *run_id, char *err, size_t errlen)
{
	const char *p[1] = { run_id };

	return run(db, "SELECT count(*) AS total FROM problems WHERE run_id = $1::bigint", 1, p, err, errlen);
}

PGresult *model_problem(PGconn *db, const char *id, char *err, size_t errlen)
{
	const char *p[1] = { id };

	return run(db, PROBLEM_COLS " WHERE p.id = $1::bigint", 1, p, err, errlen);
}

PGresult *model_problem_clusters(PGconn *db, const char *problem_ids, char *err, size_t errlen)
{
	const char *p[1] = { problem_ids };

	return run(db,
		   "SELECT c.problem_id, c.id AS cluster_id, CASE c.kind WHEN 'w' THEN 'wait' ELSE 'run' END AS kind,"
		   " " RUN_RANK("total_cost") " AS rank, c.title_frame_ids AS title, c.common_frame_ids AS common,"
		   " c.total_cost_ns, c.streams, c.events, c.avg_cost_ns, c.excess_cost_ns"
		   " FROM problems p CROSS JOIN LATERAL unnest(p.members) WITH ORDINALITY AS m(cid, o)"
		   " JOIN clusters c ON c.id = m.cid WHERE p.id = ANY($1::bigint[]) ORDER BY p.id, m.o",
		   1, p, err, errlen);
}

PGresult *model_problem_streams(PGconn *db, const char *id, long limit, char *err, size_t errlen)
{
	return run_key_limit(db, 0, TOP_STREAMS("p"), id, limit, err, errlen);
}

PGresult *model_problem_hosts(PGconn *db, const char *id, long limit, char *err, size_t errlen)
{
	return run_key_limit(db, 0,
		   "SELECT value AS host, streams, cost_ns FROM match_values"
		   " WHERE of = 'p' AND id = $1::bigint AND key = 'host' ORDER BY cost_ns DESC, value LIMIT $2::bigint",
		   id, limit, err, errlen);
}
