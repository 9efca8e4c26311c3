/* run: one mining run from the database to stored patterns (see run.h). */
#include "miner/run.h"
#include "clusterer/excess.h"
#include "clusterer/runclust.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/imap.h"
#include "common/intern.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/par.h"
#include "common/symstore.h"
#include "common/util.h"
#include "common/vec.h"
#include "common/wire.h"
#include "miner/aoi.h"
#include "miner/baseline.h"
#include "miner/bide.h"
#include "miner/frames.h"
#include "miner/parts.h"
#include "miner/queue.h"
#include "miner/watch.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Events read before a chunk of streams is handed to the AOI threads. */
#define CHUNK_EVENTS (512 * 1024)

/* Costs are summed saturating at INT64_MAX (the database's bigint): a stream of
 * absurd durations must not wrap a run's totals. */
#define MINER_SYMBOLS_BUILDS 8       /* build ids looked for before one run */
#define MINER_SYMBOLS_TIMEOUT_S 20   /* per debuginfod download */

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) || r > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : r;
}

/* ---- the run's state ---- */

/* AOI events of one stream collapsed by (kind, stack). */
struct entry {
	uint32_t stack;
	uint32_t stream;     /* index into run.refs */
	int64_t cost;
	uint32_t events;
	uint8_t kind;        /* WIRE_RUN or WIRE_WAIT */
};

struct progress {
	_Atomic(const char *) phase;
	_Atomic uint64_t streams_read, streams_total, aoi_events, stacks, patterns;
};

struct stream_events {
	uint32_t idx;                 /* into run.refs */
	size_t first, n;              /* range in the chunk's event vector */
};

struct run {
	struct miner *m;
	int64_t id;                   /* 0: a part of another worker's run */
	const struct run_params *p;   /* NULL for such a part */
	enum aoi_mode mode;
	struct progress prog;
	/* selected streams, violating and baseline, by id */
	int64_t *refs;
	struct wire_symptom *sym;
	size_t nstreams;
	size_t nbase;                 /* of them baseline */
	uint8_t *base;                /* per stream: 1 baseline */
	double *weight;               /* per stream: its sampling weight (>= 1) */
	uint32_t *utype;              /* per stream: its unit type, 0 .. nutypes - 1 */
	uint32_t nutypes;
	/* the current chunk */
	struct vec events;            /* struct wire_event */
	struct vec chunk;             /* struct stream_events */
	/* results of AOI extraction: the violating streams', the baseline's */
	struct vec entries;           /* struct entry */
	struct vec bentries;
	pthread_mutex_t entries_lock;
	struct aoi **aoi;             /* one per thread */
	int threads;
	uint64_t nread;               /* events read */
	bool split;                   /* the AOI extraction went to parts */
	/* timings */
	int64_t t_select, t_read, t_filter, t_mine;
	struct arena *arena;
};

struct pattern {
	int64_t id;          /* in the table patterns (reserved from its sequence) */
	uint8_t kind;
	uint32_t *frames;
	size_t len;
	uint64_t cost;
	uint64_t events;
	uint32_t streams;
	int32_t *stacks;
	size_t nstacks;
	double est_cost;     /* sum over its AOI events of their stream's weight x cost */
};

/* A collapsed stack of one kind: the mining database's sequence i. */
struct cstack {
	uint32_t stack;
	const uint32_t *frames;
	uint32_t len;
	uint64_t cost;
	uint64_t events;
	size_t first, n;              /* its entries (one per stream) */
};

/* A run's state for run id (0: a part of another worker's run, p NULL) with AOI mode aoi; its
 * workspaces allocated. 0, or -1 with the error on m; run_release() either way. */
static int run_init(struct run *run, struct miner *m, int64_t id, const struct run_params *p, const char *aoi,
		    const char *phase)
{
	memset(run, 0, sizeof(*run));
	run->m = m;
	run->id = id;
	run->p = p;
	run->threads = miner_options(m)->threads;
	run->events.size = sizeof(struct wire_event);
	run->chunk.size = sizeof(struct stream_events);
	run->entries.size = sizeof(struct entry);
	run->bentries.size = sizeof(struct entry);
	atomic_store(&run->prog.phase, phase);
	if (aoi_mode_parse(aoi, &run->mode) < 0)
		return miner_fail(m, "aoi: unknown mode '%s'", aoi);
	run->arena = arena_open(0);
	run->aoi = calloc((size_t)run->threads, sizeof(*run->aoi));
	if (!run->arena || !run->aoi)
		return miner_fail(m, "out of memory");
	for (int i = 0; i < run->threads; i++)
		if (!(run->aoi[i] = aoi_open()))
			return miner_fail(m, "out of memory");
	return 0;
}

static void run_release(struct run *run)
{
	for (int i = 0; run->aoi && i < run->threads; i++)
		aoi_free(run->aoi[i]);
	free(run->aoi);
	vec_free(&run->events);
	vec_free(&run->chunk);
	vec_free(&run->entries);
	vec_free(&run->bentries);
	arena_free(run->arena);
}

/* ---- heartbeat and progress, on a connection of their own ---- */

struct beat {
	struct run *run;
	PGconn *db;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
};

static void progress_json(struct run *run, struct buf *b)
{
	struct progress *p = &run->prog;
	struct jsonw w;

	buf_reset(b);
	jsonw_init_compact(&w, b);
	jsonw_object(&w);
	jsonw_kstr(&w, "phase", atomic_load(&p->phase));
	jsonw_ku64(&w, "streams_read", atomic_load(&p->streams_read));
	jsonw_ku64(&w, "streams", atomic_load(&p->streams_total));
	jsonw_ku64(&w, "aoi_events", atomic_load(&p->aoi_events));
	jsonw_ku64(&w, "distinct_stacks", atomic_load(&p->stacks));
	jsonw_ku64(&w, "patterns", atomic_load(&p->patterns));
	jsonw_end(&w);
	/* a progress line that could not be written is skipped: the heartbeat goes on */
	if (jsonw_finish(&w) < 0)
		buf_reset(b);
}

static void *beat_main(void *arg)
{
	struct beat *bt = arg;
	struct buf b = BUF_INIT(0);
	char idbuf[24];
	int ticks = 0;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)bt->run->id);
	pthread_mutex_lock(&bt->lock);
	while (!bt->stop) {
		struct timespec ts;
		const char *params[3];

		pthread_mutex_unlock(&bt->lock);
		progress_json(bt->run, &b);
		params[0] = bt->run->id ? idbuf : miner_worker(bt->run->m);
		params[1] = buf_cstr(&b);
		params[2] = miner_worker(bt->run->m);
		if (bt->db) {
			/* the run's progress (with its parts'), and the parts this worker has - only its
			 * own: a run taken over by another worker is that one's to keep alive */
			PGresult *r = bt->run->id
				? PQexecParams(bt->db, "WITH p AS (UPDATE run_parts SET heartbeat_at = now()"
					       "  WHERE run_id = $1 AND status = 'running' AND worker = $3"
					       "  AND EXISTS (SELECT 1 FROM runs WHERE id = $1 AND worker = $3))"
					       " UPDATE runs SET heartbeat_at = now(), progress = $2::jsonb ||"
					       " coalesce((SELECT jsonb_build_object('parts', count(*), 'parts_done',"
					       "   count(*) FILTER (WHERE status = 'done')) FROM run_parts"
					       "   WHERE run_id = $1 HAVING count(*) > 0), '{}')"
					       " WHERE id = $1 AND worker = $3 AND status = 'running'",
					       3, NULL, params, NULL, NULL, 0)
				: PQexecParams(bt->db, "UPDATE run_parts SET heartbeat_at = now() WHERE worker = $1"
					       " AND status = 'running'", 1, NULL, params, NULL, NULL, 0);
			/* a lost connection would let another worker take the run: get it back */
			if (PQresultStatus(r) != PGRES_COMMAND_OK && PQstatus(bt->db) != CONNECTION_OK)
				PQreset(bt->db);
			PQclear(r);
		}
		if (bt->run->id && miner_options(bt->run->m)->progress && ticks++ % 2 == 0)
			log_info("run progress", "run=%s progress=%s", idbuf, buf_cstr(&b));
		pthread_mutex_lock(&bt->lock);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		if (!bt->stop)
			pthread_cond_timedwait(&bt->cond, &bt->lock, &ts);
	}
	pthread_mutex_unlock(&bt->lock);
	buf_release(&b);
	return NULL;
}

static int beat_start(struct beat *bt, struct run *run)
{
	char err[256];

	memset(bt, 0, sizeof(*bt));
	bt->run = run;
	bt->db = db_connect(miner_conninfo(run->m), err, sizeof(err));
	if (!bt->db)
		return miner_fail(run->m, "%s", err);
	pthread_mutex_init(&bt->lock, NULL);
	pthread_cond_init(&bt->cond, NULL);
	if (pthread_create(&bt->thread, NULL, beat_main, bt) != 0) {
		PQfinish(bt->db);
		return miner_fail(run->m, "cannot start the heartbeat thread");
	}
	return 0;
}

static void beat_stop(struct beat *bt)
{
	pthread_mutex_lock(&bt->lock);
	bt->stop = true;
	pthread_cond_signal(&bt->cond);
	pthread_mutex_unlock(&bt->lock);
	pthread_join(bt->thread, NULL);
	PQfinish(bt->db);
	pthread_mutex_destroy(&bt->lock);
	pthread_cond_destroy(&bt->cond);
}

/* ---- phase 1: select streams ---- */

static int load_selection(struct run *run, const char *sql);

static int select_streams(struct run *run)
{
	struct miner *m = run->m;
	const struct run_params *p = run->p;
	char since[40], until[40];
	const char *params[7];
	PGresult *r;

	if (miner_exec(m, "DROP TABLE IF EXISTS sm_sel; CREATE TEMP TABLE sm_sel ("
			  " id bigint PRIMARY KEY, tid integer, t0 bigint, t1 bigint, base boolean, utype text,"
			  " ra timestamptz, weight float8)") < 0)
		return -1;
	/* received_at bounds as microsecond epoch seconds for to_timestamp() */
	if (p->filter.since_ns != PARAMS_NO_TIME)
		snprintf(since, sizeof(since), "%.6f", (double)p->filter.since_ns / 1e9);
	if (p->filter.until_ns != PARAMS_NO_TIME)
		snprintf(until, sizeof(until), "%.6f", (double)p->filter.until_ns / 1e9);
	params[0] = p->app;
	params[1] = p->filter.version;
	params[2] = p->filter.host;
	params[3] = p->filter.labels_json;
	params[4] = p->filter.since_ns != PARAMS_NO_TIME ? since : NULL;
	params[5] = p->filter.until_ns != PARAMS_NO_TIME ? until : NULL;
	params[6] = p->baseline ? "t" : "f";
	r = PQexecParams(miner_db(m),
			 "INSERT INTO sm_sel SELECT id, symptom_tid, symptom_start_ns, symptom_end_ns,"
			 " role = 'baseline', coalesce(symptom_unit_type, ''), received_at, weight"
			 " FROM streams WHERE app = $1 AND ($7::boolean OR role = 'violation')"
			 " AND ($2::text IS NULL OR version = $2)"
			 " AND ($3::text IS NULL OR host = $3)"
			 " AND ($4::jsonb IS NULL OR labels @> $4::jsonb)"
			 " AND ($5::float8 IS NULL OR received_at >= to_timestamp($5::float8))"
			 " AND ($6::float8 IS NULL OR received_at < to_timestamp($6::float8))",
			 7, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		return miner_db_fail(m, "selecting streams", r);
	PQclear(r);
	return load_selection(run, "SELECT id, tid, t0, t1, base, utype, weight FROM sm_sel ORDER BY id");
}

/* The selected streams (sql gives id, symptom tid, start, end, baseline, unit type, weight by id)
 * into the run's refs, symptoms, baseline flags, unit types and weights. */
static int load_selection(struct run *run, const char *sql)
{
	struct miner *m = run->m;
	struct intern *types;
	PGresult *r;
	int n;

	r = PQexec(miner_db(m), sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "reading the selected streams", r);
	n = PQntuples(r);
	run->nstreams = (size_t)n;
	run->refs = arena_alloc(run->arena, (size_t)(n + 1) * sizeof(*run->refs));
	run->sym = arena_calloc(run->arena, (size_t)n + 1, sizeof(*run->sym));
	run->base = arena_calloc(run->arena, (size_t)n + 1, sizeof(*run->base));
	run->utype = arena_calloc(run->arena, (size_t)n + 1, sizeof(*run->utype));
	run->weight = arena_calloc(run->arena, (size_t)n + 1, sizeof(*run->weight));
	types = intern_open(0);
	if (!run->refs || !run->sym || !run->base || !run->utype || !run->weight || !types) {
		PQclear(r);
		intern_free(types);
		return miner_fail(m, "out of memory for %d streams", n);
	}
	for (int i = 0; i < n; i++) {
		bool added;
		int64_t t = intern_put(types, PQgetvalue(r, i, 5), (size_t)PQgetlength(r, i, 5), &added);

		if (t < 0) {
			PQclear(r);
			intern_free(types);
			return miner_fail(m, "out of memory for %d streams", n);
		}
		run->utype[i] = (uint32_t)t;
		run->base[i] = PQgetvalue(r, i, 4)[0] == 't';
		run->nbase += run->base[i];
		run->weight[i] = strtod(PQgetvalue(r, i, 6), NULL);
		if (!(run->weight[i] >= 1))
			run->weight[i] = 1;   /* the column's CHECK says >= 1: never below, whatever */
		run->refs[i] = db_get_i64(r, i, 0);
		run->sym[i].kind = "";
		run->sym[i].tid = db_get_i64(r, i, 1);
		run->sym[i].start_ns = db_get_i64(r, i, 2);
		run->sym[i].end_ns = db_get_i64(r, i, 3);
		run->sym[i].threshold_ns = -1;
	}
	run->nutypes = (uint32_t)intern_count(types);
	intern_free(types);
	PQclear(r);
	atomic_store(&run->prog.streams_total, (uint64_t)n);
	return 0;
}

/* ---- phase 2: read events, extract the AOI on all cores ---- */

struct aoi_job {
	struct run *run;
	int t;
	char err[512];
	enum aoi_mode mode;
	struct vec out;   /* struct entry */
	struct intern *agg;
	struct vec acc;   /* per aggregated key: struct entry */
	int rc;
};

/* The database returns a stream's events in no set order; a content order makes
 * the AOI (whose ties follow positions) the same on every run. */
static int cmp_event(const void *a, const void *b)
{
	const struct wire_event *x = a, *y = b;

	if (x->ts_ns != y->ts_ns)
		return x->ts_ns < y->ts_ns ? -1 : 1;
	if (x->dur_ns != y->dur_ns)
		return x->dur_ns < y->dur_ns ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return x->readier_tid < y->readier_tid ? -1 : x->readier_tid > y->readier_tid;
}

static void *aoi_thread(void *arg)
{
	struct aoi_job *job = arg;
	struct run *run = job->run;
	const struct stream_events *se = run->chunk.data;
	const struct wire_event *ev = run->events.data;

	for (size_t k = (size_t)job->t; k < run->chunk.len; k += (size_t)run->threads) {
		const struct stream_events *s = &se[k];
		const uint32_t *sel;
		size_t nsel;
		uint64_t naoi = 0;

		/* each thread sorts only its own streams' ranges */
		qsort((struct wire_event *)ev + s->first, s->n, sizeof(*ev), cmp_event);
		if (aoi_extract(run->aoi[job->t], ev + s->first, s->n, &run->sym[s->idx], job->mode, &sel,
				&nsel) < 0) {
			snprintf(job->err, sizeof(job->err), "AOI of stream %lld: %s",
				 (long long)run->refs[s->idx], aoi_error(run->aoi[job->t]));
			job->rc = -1;
			return NULL;
		}
		/* collapse this stream's AOI events by (kind, stack) */
		intern_clear(job->agg);
		job->acc.len = 0;
		for (size_t i = 0; i < nsel; i++) {
			const struct wire_event *e = &ev[s->first + sel[i]];
			uint32_t key[2] = { e->stack, e->kind };
			bool added;
			int64_t k2 = intern_put(job->agg, key, sizeof(key), &added);
			struct entry *en;

			if (k2 < 0)
				goto fail_oom;
			if (added) {
				en = vec_push(&job->acc);
				if (!en)
					goto fail_oom;
				en->stack = e->stack;
				en->stream = s->idx;
				en->cost = 0;
				en->events = 0;
				en->kind = e->kind;
			}
			en = (struct entry *)job->acc.data + k2;
			en->cost = (int64_t)sat_add((uint64_t)en->cost, (uint64_t)e->dur_ns);
			en->events++;
			naoi++;
		}
		for (size_t i = 0; i < job->acc.len; i++) {
			struct entry *dst = vec_push(&job->out);
			if (!dst)
				goto fail_oom;
			*dst = ((struct entry *)job->acc.data)[i];
		}
		atomic_fetch_add(&run->prog.aoi_events, naoi);
		atomic_fetch_add(&run->prog.streams_read, 1);
	}
	return NULL;
fail_oom:
	snprintf(job->err, sizeof(job->err), "out of memory collapsing stacks");
	job->rc = -1;
	return NULL;
}

static void run_aoi_job(void *ctx, int t)
{
	aoi_thread(&((struct aoi_job *)ctx)[t]);
}

static int process_chunk(struct run *run, enum aoi_mode mode)
{
	struct aoi_job jobs[PAR_MAX_THREADS];
	int rc = 0;

	if (!run->chunk.len)
		return 0;
	memset(jobs, 0, sizeof(jobs));
	for (int t = 0; t < run->threads; t++) {
		jobs[t].run = run;
		jobs[t].t = t;
		jobs[t].mode = mode;
		jobs[t].out.size = sizeof(struct entry);
		jobs[t].acc.size = sizeof(struct entry);
		jobs[t].agg = intern_open(0);
		if (!jobs[t].agg) {
			rc = miner_fail(run->m, "out of memory");
			goto out;
		}
	}
	par_run(run->threads, run_aoi_job, jobs);
	for (int t = 0; t < run->threads; t++) {
		if (jobs[t].rc < 0) {
			rc = miner_fail(run->m, "%s", jobs[t].err);
			goto out;
		}
		for (size_t i = 0; i < jobs[t].out.len; i++) {
			const struct entry *e = (const struct entry *)jobs[t].out.data + i;
			struct entry *dst = vec_push(run->base[e->stream] ? &run->bentries : &run->entries);
			if (!dst) {
				rc = miner_fail(run->m, "out of memory");
				goto out;
			}
			*dst = *e;
		}
	}
out:
	for (int t = 0; t < run->threads; t++) {
		vec_free(&jobs[t].out);
		vec_free(&jobs[t].acc);
		intern_free(jobs[t].agg);
	}
	run->chunk.len = 0;
	run->events.len = 0;
	return rc;
}

static inline int64_t be64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (int64_t)v;
}

static inline int32_t be32(const unsigned char *p)
{
	return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* One row of the binary COPY: stream_ref, kind, tid, ts_ns, dur_ns, stack_id, readier_tid. */
/* The binary widths of an event row's fields: stream_ref, kind, tid, ts_ns, dur_ns, stack_id,
 * readier_tid (as the COPY and the standby's cursor select them). */
static const int event_widths[7] = { 8, 1, 4, 8, 8, 4, 4 };

/* An event row from its seven binary fields, each of its width in event_widths. */
static void decode_event(const unsigned char *const f[7], int64_t *ref, struct wire_event *e)
{
	*ref = be64(f[0]);
	e->kind = f[1][0] == 'w' ? WIRE_WAIT : WIRE_RUN;
	e->tid = be32(f[2]);
	e->ts_ns = be64(f[3]);
	e->dur_ns = be64(f[4]);
	e->stack = (uint32_t)be32(f[5]);
	e->readier_tid = be32(f[6]);
}

static int parse_row(const unsigned char *p, size_t n, int64_t *ref, struct wire_event *e)
{
	const unsigned char *f[7];
	size_t off = 2;

	if (n < 2 || (p[0] << 8 | p[1]) != 7)
		return -1;
	for (int i = 0; i < 7; i++) {
		if (off + 4 > n || be32(p + off) != event_widths[i] || off + 4 + (size_t)event_widths[i] > n)
			return -1;
		f[i] = p + off + 4;
		off += 4 + (size_t)event_widths[i];
	}
	decode_event(f, ref, e);
	return 0;
}

/* Where a read of events stands: the stream being read (index into refs) and the end. */
struct reader {
	size_t cur, end;
	bool have;
};

/* One event of the stream ref (events come grouped by stream, in the order of refs) into the
 * current chunk; a full chunk is handed to the AOI threads at a stream's start. 0 or -1. */
static int take_event(struct run *run, struct reader *rd, int64_t ref, const struct wire_event *e)
{
	struct miner *m = run->m;
	struct wire_event *dst;

	if (!rd->have || run->refs[rd->cur] != ref) {
		struct stream_events *se;

		if (rd->have && run->events.len >= CHUNK_EVENTS && process_chunk(run, run->mode) < 0)
			return -1;
		while (rd->cur < rd->end && run->refs[rd->cur] != ref)
			rd->cur++;
		if (rd->cur == rd->end)
			return miner_fail(m, "reading events: stream %lld was not selected", (long long)ref);
		se = vec_push(&run->chunk);
		if (!se)
			return miner_fail(m, "out of memory reading events");
		se->idx = (uint32_t)rd->cur;
		se->first = run->events.len;
		se->n = 0;
		rd->have = true;
	}
	dst = vec_push(&run->events);
	if (!dst)
		return miner_fail(m, "out of memory reading events");
	*dst = *e;
	run->nread++;
	((struct stream_events *)run->chunk.data)[run->chunk.len - 1].n++;
	if (miner_options(m)->cancel && *miner_options(m)->cancel)
		return miner_fail(m, "cancelled");
	return 0;
}

/* The events through a binary COPY on the worker's connection, joined with the selection's
 * temporary table (all of sm_sel, or the part in sm_part). */
static int read_events_copy(struct run *run, struct reader *rd, bool part)
{
	struct miner *m = run->m;
	PGresult *r;
	char *msg;
	int len;
	bool header = true;
	int rc = 0;

	/* the selection's bounds let the index scan start at its streams, not read past the earlier
	 * ones, and travel to the shards with their foreign scans. (Bounds on received_at as well
	 * would leave out whole days, but make the planner's estimate small enough to pick a nested
	 * loop over the selection: twice the time for a run in one piece) */
	r = PQexec(miner_db(m), part ? "COPY (SELECT e.stream_ref, e.kind, e.tid, e.ts_ns, e.dur_ns, e.stack_id,"
				       " coalesce(e.readier_tid, 0) FROM events e JOIN sm_part s ON s.id = e.stream_ref"
				       " WHERE e.stream_ref BETWEEN (SELECT min(id) FROM sm_part) AND (SELECT max(id) FROM sm_part)"
				       " ORDER BY e.stream_ref) TO STDOUT (FORMAT binary)"
				     : "COPY (SELECT e.stream_ref, e.kind, e.tid, e.ts_ns, e.dur_ns, e.stack_id,"
				       " coalesce(e.readier_tid, 0) FROM events e JOIN sm_sel s ON s.id = e.stream_ref"
				       " WHERE e.stream_ref BETWEEN (SELECT min(id) FROM sm_sel) AND (SELECT max(id) FROM sm_sel)"
				       " ORDER BY e.stream_ref) TO STDOUT (FORMAT binary)");
	if (PQresultStatus(r) != PGRES_COPY_OUT)
		return miner_db_fail(m, "reading events", r);
	PQclear(r);
	while ((len = PQgetCopyData(miner_db(m), &msg, 0)) > 0) {
		const unsigned char *p = (const unsigned char *)msg;
		size_t n = (size_t)len;
		struct wire_event e;
		int64_t ref;

		if (header) {
			/* signature, flags, header extension */
			if (n < 19 || memcmp(p, "PGCOPY\n\377\r\n\0", 11) != 0) {
				PQfreemem(msg);
				rc = miner_fail(m, "reading events: not a binary COPY stream");
				header = false;
				continue; /* drain the COPY */
			}
			n -= 19 + (size_t)be32(p + 15);
			p += 19 + (size_t)be32(p + 15);
			header = false;
			if (n == 0) {
				PQfreemem(msg);
				continue;
			}
		}
		if (n == 2 && p[0] == 0xff && p[1] == 0xff) { /* trailer */
			PQfreemem(msg);
			continue;
		}
		if (rc || parse_row(p, n, &ref, &e) < 0) {
			PQfreemem(msg);
			if (!rc)
				rc = miner_fail(m, "reading events: unexpected row layout");
			continue; /* drain the COPY */
		}
		PQfreemem(msg);
		if (take_event(run, rd, ref, &e) < 0)
			rc = -1;   /* drain the COPY */
	}
	if (len == -2 && !rc)
		rc = miner_db_fail(m, "reading events", NULL);
	while ((r = PQgetResult(miner_db(m)))) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc)
			rc = miner_db_fail(m, "reading events", r);
		else
			PQclear(r);
	}
	return rc;
}

/* Whether the read connection (a standby) has replayed everything the worker's connection (the
 * primary) had committed when the streams were selected: 1, 0 when it is still behind after 30 s
 * (or unreachable), -1 on a failure of the primary. A primary on the read side is never behind. */
static int standby_caught_up(struct miner *m, PGconn *rdb)
{
	const char *params[1];
	char lsn[64];
	PGresult *r;
	int64_t t0 = util_now_mono_ns();

	r = PQexec(miner_db(m), "SELECT pg_current_wal_lsn()::text");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "reading the primary's WAL position", r);
	snprintf(lsn, sizeof(lsn), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	params[0] = lsn;
	while (db_alive(rdb)) {
		bool ok;

		r = PQexecParams(rdb, "SELECT NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= $1::pg_lsn",
				 1, NULL, params, NULL, NULL, 0);
		ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQgetvalue(r, 0, 0)[0] == 't';
		PQclear(r);
		if (ok)
			return 1;
		if (util_now_mono_ns() - t0 > 30 * 1000000000LL ||
		    (miner_options(m)->cancel && *miner_options(m)->cancel))
			break;
		poll(NULL, 0, 50);
	}
	return 0;
}

/* The events through a cursor on the read connection (--db-read, a standby: no temporary table
 * there), the streams given as an array. */
static int read_events_standby(struct run *run, struct reader *rd, PGconn *rdb)
{
	struct miner *m = run->m;
	struct buf ids = BUF_INIT(0);
	char lo[24], hi[24];
	const char *params[3] = { NULL, lo, hi };
	PGresult *r;
	int rc = -1;

	buf_putc(&ids, '{');
	for (size_t i = rd->cur; i < rd->end; i++) {
		if (i > rd->cur)
			buf_putc(&ids, ',');
		buf_put_i64(&ids, run->refs[i]);
	}
	if (buf_putc(&ids, '}') < 0) {
		buf_release(&ids);
		return miner_fail(m, "out of memory reading events");
	}
	params[0] = buf_cstr(&ids);
	snprintf(lo, sizeof(lo), "%lld", (long long)run->refs[rd->cur]);
	snprintf(hi, sizeof(hi), "%lld", (long long)run->refs[rd->end - 1]);
	if (db_exec(rdb, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", miner_errbuf(m), MINER_ERRLEN) < 0)
		goto out;
	r = PQexecParams(rdb, "DECLARE sm_ev NO SCROLL CURSOR FOR SELECT stream_ref, kind, tid, ts_ns, dur_ns,"
			      " stack_id, coalesce(readier_tid, 0) FROM events WHERE stream_ref = ANY($1::bigint[])"
			      " AND stream_ref BETWEEN $2::bigint AND $3::bigint ORDER BY stream_ref",
			 3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		db_errcpy(miner_errbuf(m), MINER_ERRLEN, "reading events from the standby", PQresultErrorMessage(r));
		PQclear(r);
		goto out_rollback;
	}
	PQclear(r);
	for (;;) {
		int n;

		r = PQexecParams(rdb, "FETCH FORWARD 50000 FROM sm_ev", 0, NULL, NULL, NULL, NULL, 1);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			db_errcpy(miner_errbuf(m), MINER_ERRLEN, "reading events from the standby",
				  PQresultErrorMessage(r));
			PQclear(r);
			goto out_rollback;
		}
		n = PQntuples(r);
		if (n == 0) {
			PQclear(r);
			break;
		}
		for (int i = 0; i < n; i++) {
			const unsigned char *f[7];
			struct wire_event e;
			int64_t ref;

			for (int k = 0; k < 7; k++) {
				if (PQgetlength(r, i, k) != event_widths[k]) {
					PQclear(r);
					miner_fail(m, "reading events from the standby: unexpected row layout");
					goto out_rollback;
				}
				f[k] = (const unsigned char *)PQgetvalue(r, i, k);
			}
			decode_event(f, &ref, &e);
			if (take_event(run, rd, ref, &e) < 0) {
				PQclear(r);
				goto out_rollback;
			}
		}
		PQclear(r);
	}
	rc = db_exec(rdb, "COMMIT", miner_errbuf(m), MINER_ERRLEN);
	goto out;
out_rollback:
	PQclear(PQexec(rdb, "ROLLBACK"));
out:
	buf_release(&ids);
	return rc;
}

/* Reads the events of the streams refs[first .. end) - all of sm_sel, or the part in sm_part -
 * and extracts their AOI into the entries: from the standby of --db-read once it has caught up,
 * else (none given, unreachable, behind, or failing in the middle) from the worker's own
 * connection, the standby's part of the work undone first. */
static int read_events(struct run *run, size_t first, size_t end, bool part)
{
	struct miner *m = run->m;
	struct reader rd = { first, end, false };
	PGconn *rdb;

	if (first == end)
		return 0;
	rdb = miner_read_db(m);
	if (rdb) {
		size_t ne = run->entries.len, nb = run->bentries.len;
		uint64_t nread = run->nread;
		int rc = standby_caught_up(m, rdb);

		if (rc < 0)
			return -1;
		if (rc == 1 && read_events_standby(run, &rd, rdb) == 0 && process_chunk(run, run->mode) == 0) {
			log_info("events read from the standby", "streams=%zu events=%llu", end - first,
				 (unsigned long long)(run->nread - nread));
			return 0;
		}
		if (miner_options(m)->cancel && *miner_options(m)->cancel)
			return miner_fail(m, "cancelled");
		log_warn("reading from the primary instead of the standby", "streams=%zu reason=\"%s\"", end - first,
			 rc == 1 ? miner_error(m) : "the standby is behind");
		miner_read_skip(m);
		run->entries.len = ne;
		run->bentries.len = nb;
		run->nread = nread;
		run->chunk.len = 0;
		run->events.len = 0;
		rd.cur = first;
		rd.have = false;
	}
	if (read_events_copy(run, &rd, part) < 0)
		return -1;
	return process_chunk(run, run->mode);
}

/* ---- phase 2 in parts (parts.h) ---- */

/* The part's streams into the temporary table sm_part that read_events() joins (analyzed: the
 * planner must see a part's few streams to read them through the index). */
static int part_fill(struct run *run, const struct parts_claim *c)
{
	struct miner *m = run->m;
	char idbuf[24], part[24];
	const char *params[2] = { idbuf, part };
	PGresult *r;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)c->run_id);
	snprintf(part, sizeof(part), "%d", c->part);
	if (miner_exec(m, "CREATE TEMP TABLE IF NOT EXISTS sm_part (id bigint PRIMARY KEY, ra timestamptz);"
			  " DELETE FROM sm_part") < 0)
		return -1;
	r = PQexecParams(miner_db(m), "INSERT INTO sm_part SELECT s.id, s.received_at FROM streams s"
				      " WHERE s.id IN (SELECT unnest(stream_refs) FROM run_parts"
				      "   WHERE run_id = $1 AND part = $2::integer)", 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		return miner_db_fail(m, "reading the part's streams", r);
	PQclear(r);
	return miner_exec(m, "ANALYZE sm_part");
}

static int cmp_ref(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* Where another worker's part goes: its streams are refs[first .. end). */
struct merge {
	struct run *run;
	int part;
	size_t first, end;
};

static int merge_entry(void *arg, const struct parts_entry *pe)
{
	struct merge *mg = arg;
	struct run *run = mg->run;
	const int64_t *at = bsearch(&pe->stream_ref, run->refs + mg->first, mg->end - mg->first, sizeof(int64_t),
				    cmp_ref);
	struct entry *dst;

	/* a stream of another part, or of none, would be counted twice or from nowhere */
	if (!at)
		return miner_fail(run->m, "part %d: stream %lld is not one of its streams", mg->part,
				  (long long)pe->stream_ref);
	dst = vec_push(run->base[at - run->refs] ? &run->bentries : &run->entries);
	if (!dst)
		return miner_fail(run->m, "out of memory merging the parts");
	dst->stack = pe->stack;
	dst->stream = (uint32_t)(at - run->refs);
	dst->cost = pe->cost;
	dst->events = pe->events;
	dst->kind = pe->kind;
	return 0;
}

/* Adds another worker's part to the run's entries. */
static int part_merge(struct run *run, int part, size_t per)
{
	struct merge mg = { run, part, (size_t)part * per, 0 };
	int64_t events, aoi_events;

	mg.end = mg.first + per < run->nstreams ? mg.first + per : run->nstreams;
	if (mg.first >= mg.end)
		return miner_fail(run->m, "part %d is beyond the run's %zu streams", part, run->nstreams);
	if (parts_fetch(run->m, run->id, part, merge_entry, &mg, &events, &aoi_events) != 0)
		return -1;
	run->nread += (uint64_t)events;
	atomic_fetch_add(&run->prog.aoi_events, (uint64_t)aoi_events);
	atomic_fetch_add(&run->prog.streams_read, mg.end - mg.first);
	return 0;
}

/*
 * The coordinator's side: the selection cut into parts and queued; this worker takes its run's
 * parts like any other and keeps their entries, waits for the parts others have, then merges
 * theirs. A part another worker took over from this one is dropped here.
 */
static int extract_parts(struct run *run, size_t per)
{
	struct miner *m = run->m;
	int *done = NULL, nparts, ndone, rc = -1, own = 0;

	nparts = parts_create(m, run->id, run->refs, run->nstreams, per);
	if (nparts < 0)
		return -1;
	run->split = true;
	for (;;) {
		struct parts_claim c;
		int got, pending, failed;

		if (miner_options(m)->cancel && *miner_options(m)->cancel)
			return miner_fail(m, "cancelled");
		got = parts_claim(m, run->id, &c);
		if (got < 0)
			return -1;
		if (got) {
			size_t first = (size_t)c.part * per;
			size_t end = first + per < run->nstreams ? first + per : run->nstreams;
			size_t ne = run->entries.len, nb = run->bentries.len;
			uint64_t nread = run->nread;
			int64_t t = util_now_mono_ns();

			if (first >= end)
				return miner_fail(m, "part %d is beyond the run's %zu streams", c.part, run->nstreams);
			if (part_fill(run, &c) < 0 || read_events(run, first, end, true) < 0)
				return -1;
			got = parts_done(m, &c, NULL, (int64_t)(run->nread - nread), 0,
					 (util_now_mono_ns() - t) / 1000000);
			if (got < 0)
				return -1;
			if (got == 1) {      /* taken over: the other worker's result counts */
				run->entries.len = ne;
				run->bentries.len = nb;
				run->nread = nread;
				parts_release(m, &c, NULL);   /* still ours if the run was taken: for its new owner */
			} else {
				own++;
			}
			continue;
		}
		if (parts_status(m, run->id, &pending, &failed) < 0 || failed)
			return -1;
		if (!pending)
			break;
		poll(NULL, 0, 50);
	}
	ndone = parts_list_done(m, run->id, &done);
	if (ndone < 0)
		return -1;
	/* every part once: here, or by another worker (a run taken over stops before) */
	if (own + ndone != nparts) {
		miner_fail(m, "run %lld: %d of its %d parts were extracted, by this worker or others", (long long)run->id,
			   own + ndone, nparts);
		goto out;
	}
	for (int i = 0; i < ndone; i++)
		if (part_merge(run, done[i], per) < 0)
			goto out;
	log_info("run's parts extracted", "run=%lld parts=%d here=%d others=%d", (long long)run->id, nparts, own,
		 ndone);
	rc = 0;
out:
	free(done);
	return rc;
}

/* Phase 2: in one piece, or in parts when the run has more streams than a part. */
static int extract(struct run *run)
{
	size_t per = miner_options(run->m)->part_streams;

	if (per && run->nstreams > per)
		return extract_parts(run, per);
	return read_events(run, 0, run->nstreams, false);
}

/* Another worker's part, taken by parts_claim(): its streams' AOI extracted and stored packed. */
static int execute_part(struct miner *m, const struct parts_claim *c)
{
	struct run run;
	struct beat bt;
	struct buf b = BUF_INIT(PARTS_MAX_BYTES);
	int64_t t0 = util_now_mono_ns();
	int rc = -1, beating = 0, got;

	if (run_init(&run, m, 0, NULL, c->aoi, "extracting a part") < 0)
		goto out;
	if (beat_start(&bt, &run) < 0)
		goto out;
	beating = 1;
	if (part_fill(&run, c) < 0 ||
	    load_selection(&run, "SELECT s.id, s.symptom_tid, s.symptom_start_ns, s.symptom_end_ns,"
				 " s.role = 'baseline', coalesce(s.symptom_unit_type, ''), s.weight"
				 " FROM streams s JOIN sm_part p ON p.id = s.id ORDER BY s.id") < 0 ||
	    read_events(&run, 0, run.nstreams, true) < 0)
		goto out;
	parts_pack_begin(&b);
	for (int side = 0; side < 2; side++) {
		const struct vec *v = side ? &run.bentries : &run.entries;

		for (size_t i = 0; i < v->len; i++) {
			const struct entry *e = (const struct entry *)v->data + i;
			struct parts_entry pe = { run.refs[e->stream], e->cost, e->stack, e->events, e->kind };

			parts_pack(&b, &pe);
		}
	}
	if (buf_error(&b)) {
		miner_fail(m, "part %d: its result: %s", c->part, buf_error_text(&b));
		goto out;
	}
	got = parts_done(m, c, &b, (int64_t)run.nread, (int64_t)atomic_load(&run.prog.aoi_events),
			 (util_now_mono_ns() - t0) / 1000000);
	if (got < 0)
		goto out;
	rc = got;
out:
	if (beating)
		beat_stop(&bt);
	/* back to the queue: stopped, or failed (the third failure fails the part and its run) */
	if (rc < 0)
		parts_release(m, c, miner_options(m)->cancel && *miner_options(m)->cancel ? NULL : miner_error(m));
	run_release(&run);
	buf_release(&b);
	return rc;
}

/* ---- phase 3: frames of the AOI stacks, content filter, collapsing ---- */

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* Frames of every distinct stack in the entries: stacks->frames filled. */
struct stackinfo {
	struct intern *ids;        /* stack id (4 bytes) -> index */
	uint32_t **frames;
	uint32_t *len;
	bool *keep;
	size_t n;
};

static int load_stacks(struct run *run, struct stackinfo *si, const struct aoi_filter *flt)
{
	struct miner *m = run->m;
	struct buf ids = BUF_INIT(0);
	const char *params[1];
	PGresult *r;
	struct intern *fids = NULL;
	const char **names = NULL;
	int32_t tmp[WIRE_MAX_STACK_DEPTH];
	int rc = -1;

	si->ids = intern_open(0);
	if (!si->ids)
		return miner_fail(m, "out of memory");
	buf_putc(&ids, '{');
	/* the violating streams' stacks, then the baseline's only */
	for (int side = 0; side < 2; side++) {
		const struct vec *v = side ? &run->bentries : &run->entries;
		const struct entry *en = v->data;

		for (size_t i = 0; i < v->len; i++) {
			bool added;
			if (intern_put(si->ids, &en[i].stack, sizeof(uint32_t), &added) < 0)
				goto out_oom;
			if (added) {
				if (ids.len > 1)
					buf_putc(&ids, ',');
				buf_put_i64(&ids, en[i].stack);
			}
		}
	}
	if (buf_putc(&ids, '}') < 0)
		goto out_oom;
	si->n = intern_count(si->ids);
	si->frames = arena_calloc(run->arena, si->n + 1, sizeof(*si->frames));
	si->len = arena_calloc(run->arena, si->n + 1, sizeof(*si->len));
	si->keep = arena_calloc(run->arena, si->n + 1, sizeof(*si->keep));
	if (!si->frames || !si->len || !si->keep)
		goto out_oom;
	params[0] = buf_cstr(&ids);
	r = PQexecParams(miner_db(m), "SELECT id, sm_canon_frames(frame_ids)::text FROM stacks WHERE id = ANY($1::integer[])", 1,
			 NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		miner_db_fail(m, "reading stacks", r);
		goto out;
	}
	for (int row = 0; row < PQntuples(r); row++) {
		uint32_t id = (uint32_t)db_get_i64(r, row, 0);
		int64_t k = intern_find(si->ids, &id, sizeof(id));
		int n = db_parse_int_array(PQgetvalue(r, row, 1), tmp, WIRE_MAX_STACK_DEPTH);

		if (k < 0 || n <= 0)
			continue;
		si->frames[k] = arena_alloc(run->arena, (size_t)n * sizeof(uint32_t));
		if (!si->frames[k]) {
			PQclear(r);
			goto out_oom;
		}
		for (int j = 0; j < n; j++)
			si->frames[k][j] = (uint32_t)tmp[j];
		si->len[k] = (uint32_t)n;
		si->keep[k] = true;
	}
	PQclear(r);
	for (size_t k = 0; k < si->n; k++)
		if (!si->frames[k]) {
			miner_fail(m, "stack %u of an event is missing from the stacks table",
			     *(const uint32_t *)intern_key(si->ids, (uint32_t)k, NULL));
			goto out;
		}
	if (aoi_filter_empty(flt)) {
		rc = 0;
		goto out;
	}
	/* frame names, for the globs */
	fids = intern_open(0);
	if (!fids)
		goto out_oom;
	buf_reset(&ids);
	buf_putc(&ids, '{');
	for (size_t k = 0; k < si->n; k++)
		for (uint32_t j = 0; j < si->len[k]; j++) {
			bool added;
			if (intern_put(fids, &si->frames[k][j], sizeof(uint32_t), &added) < 0)
				goto out_oom;
			if (added) {
				if (ids.len > 1)
					buf_putc(&ids, ',');
				buf_put_i64(&ids, si->frames[k][j]);
			}
		}
	if (buf_putc(&ids, '}') < 0)
		goto out_oom;
	names = arena_calloc(run->arena, intern_count(fids) + 1, sizeof(*names));
	if (!names)
		goto out_oom;
	params[0] = buf_cstr(&ids);
	r = PQexecParams(miner_db(m), "SELECT id, name FROM frame_names WHERE id = ANY($1::integer[])", 1, NULL,
			 params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		miner_db_fail(m, "reading frames", r);
		goto out;
	}
	for (int row = 0; row < PQntuples(r); row++) {
		uint32_t id = (uint32_t)db_get_i64(r, row, 0);
		int64_t k = intern_find(fids, &id, sizeof(id));
		if (k >= 0)
			names[k] = arena_strndup(run->arena, PQgetvalue(r, row, 1),
						 (size_t)PQgetlength(r, row, 1));
	}
	PQclear(r);
	for (size_t k = 0; k < si->n; k++) {
		const char *fr[WIRE_MAX_STACK_DEPTH];
		for (uint32_t j = 0; j < si->len[k]; j++) {
			int64_t f = intern_find(fids, &si->frames[k][j], sizeof(uint32_t));
			fr[j] = f >= 0 && names[f] ? names[f] : "";
		}
		si->keep[k] = aoi_filter_keep(flt, fr, si->len[k]);
	}
	rc = 0;
	goto out;
out_oom:
	miner_fail(m, "out of memory loading stacks");
out:
	intern_free(fids);
	buf_release(&ids);
	return rc;
}

/* ---- phase 4: mining ---- */

struct mine_ctx {
	struct run *run;
	uint8_t kind;
	const struct cstack *cs;
	const struct entry *en;
	uint32_t *stamp;            /* per stream: last pattern that counted it */
	uint32_t gen;
	struct vec *patterns;       /* struct pattern */
	const struct stackinfo *si;
};

static int on_pattern(void *arg, const uint32_t *items, size_t len, uint64_t support,
		      const uint32_t *seqs, size_t nseqs)
{
	struct mine_ctx *c = arg;
	struct pattern *pt = vec_push(c->patterns);
	uint64_t events = 0;
	uint32_t streams = 0;

	if (!pt)
		return -1;
	c->gen++;
	pt->kind = c->kind;
	pt->len = len;
	pt->cost = support;
	pt->frames = arena_alloc(c->run->arena, len * sizeof(uint32_t));
	pt->stacks = arena_alloc(c->run->arena, (nseqs + 1) * sizeof(int32_t));
	if (!pt->frames || !pt->stacks)
		return -1;
	memcpy(pt->frames, items, len * sizeof(uint32_t));
	for (size_t i = 0; i < nseqs; i++) {
		const struct cstack *s = &c->cs[seqs[i]];
		pt->stacks[i] = (int32_t)s->stack;
		events += s->events;
		for (size_t k = s->first; k < s->first + s->n; k++)
			if (c->stamp[c->en[k].stream] != c->gen) {
				c->stamp[c->en[k].stream] = c->gen;
				streams++;
			}
	}
	pt->nstacks = nseqs;
	pt->events = events;
	pt->streams = streams;
	atomic_fetch_add(&c->run->prog.patterns, 1);
	return 0;
}

static int cmp_pattern(const void *a, const void *b)
{
	const struct pattern *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind > y->kind ? -1 : 1;   /* wait first */
	if (x->cost != y->cost)
		return x->cost > y->cost ? -1 : 1;
	for (size_t i = 0; i < x->len && i < y->len; i++)
		if (x->frames[i] != y->frames[i])
			return x->frames[i] < y->frames[i] ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

static int mine_kind(struct run *run, const struct stackinfo *si, uint8_t kind, struct vec *patterns,
		     uint64_t *minsup_out)
{
	struct miner *m = run->m;
	const struct entry *en = run->entries.data;
	struct cstack *cs;
	const uint32_t **seqs;
	uint32_t *lens;
	uint64_t *weights, total = 0, minsup;
	size_t n = 0, ne = run->entries.len;
	struct seqdb db;
	struct bide_opts bo;
	struct bide *b;
	struct mine_ctx ctx;
	int rc;

	cs = arena_calloc(run->arena, ne + 1, sizeof(*cs));
	if (!cs)
		return miner_fail(m, "out of memory");
	for (size_t i = 0; i < ne;) {
		size_t j = i;
		int64_t k = intern_find(si->ids, &en[i].stack, sizeof(uint32_t));

		while (j < ne && en[j].kind == en[i].kind && en[j].stack == en[i].stack)
			j++;
		if (en[i].kind == kind && k >= 0 && si->keep[k]) {
			struct cstack *c = &cs[n++];
			c->stack = en[i].stack;
			c->frames = si->frames[k];
			c->len = si->len[k];
			c->first = i;
			c->n = j - i;
			for (size_t x = i; x < j; x++) {
				c->cost = sat_add(c->cost, (uint64_t)en[x].cost);
				c->events += en[x].events;
			}
			total = sat_add(total, c->cost);
		}
		i = j;
	}
	if (run->p->threshold_ns > 0) {
		minsup = (uint64_t)run->p->threshold_ns;
	} else if (run->p->guideline.share > 0) {
		/* for bugs hitting a share of the selected streams with delay_ns each */
		double c = run->p->guideline.share * (double)run->p->guideline.delay_ns *
			   (double)(run->nstreams - run->nbase);
		minsup = c >= 1.8e19 ? UINT64_MAX : (uint64_t)ceil(c - c * 1e-12);
	} else {
		/* 0.07 * 100 is 7.000000000000001 in doubles: take off the rounding
		 * error before ceil so that a pattern costing exactly C counts */
		double c = run->p->threshold_fraction * (double)total;
		minsup = (uint64_t)ceil(c - c * 1e-12);
	}
	if (minsup == 0)
		minsup = 1;
	*minsup_out = minsup;
	if (n == 0 || total < minsup)
		return 0;
	seqs = arena_alloc(run->arena, n * sizeof(*seqs));
	lens = arena_alloc(run->arena, n * sizeof(*lens));
	weights = arena_alloc(run->arena, n * sizeof(*weights));
	if (!seqs || !lens || !weights)
		return miner_fail(m, "out of memory");
	for (size_t i = 0; i < n; i++) {
		seqs[i] = cs[i].frames;
		lens[i] = cs[i].len;
		weights[i] = cs[i].cost;
	}
	db.seqs = seqs;
	db.lens = lens;
	db.weights = weights;
	db.n = n;
	memset(&bo, 0, sizeof(bo));
	bo.mode = BIDE_MAXIMAL;
	bo.minsup = minsup;
	bo.threads = miner_options(m)->threads;
	bo.max_patterns = miner_options(m)->max_patterns;
	memset(&ctx, 0, sizeof(ctx));
	ctx.run = run;
	ctx.kind = kind;
	ctx.cs = cs;
	ctx.en = en;
	ctx.si = si;
	ctx.patterns = patterns;
	ctx.stamp = arena_calloc(run->arena, run->nstreams + 1, sizeof(uint32_t));
	if (!ctx.stamp)
		return miner_fail(m, "out of memory");
	b = bide_open();
	if (!b)
		return miner_fail(m, "out of memory");
	rc = bide_mine(b, &db, &bo, on_pattern, &ctx);
	if (rc < 0)
		miner_fail(m, "mining %s stacks: %s", kind == WIRE_WAIT ? "wait" : "run", bide_error(b));
	bide_free(b);
	return rc;
}

/* ---- phase 5: store ---- */

static int copy_begin(struct miner *m, const char *sql)
{
	PGresult *r = PQexec(miner_db(m), sql);

	if (PQresultStatus(r) != PGRES_COPY_IN)
		return miner_db_fail(m, "storing results", r);
	PQclear(r);
	return 0;
}

static int copy_send(struct miner *m, struct buf *b, bool force)
{
	if (buf_error(b) != BUF_OK) {
		return miner_fail(m, "storing results: %s", buf_error_text(b));
	}
	if ((b->len >= (1u << 20) || force) && b->len &&
	    PQputCopyData(miner_db(m), b->data, (int)b->len) != 1)
		return miner_db_fail(m, "storing results", NULL);
	if (b->len >= (1u << 20) || force)
		buf_reset(b);
	return 0;
}

static int copy_end(struct miner *m)
{
	PGresult *r;
	int rc = 0;

	if (PQputCopyEnd(miner_db(m), NULL) != 1)
		return miner_db_fail(m, "storing results", NULL);
	while ((r = PQgetResult(miner_db(m)))) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc)
			rc = miner_db_fail(m, "storing results", r);
		else
			PQclear(r);
	}
	return rc;
}

static int64_t ms_since(int64_t t0);

/*
 * The clustering stage, in memory: reserves the patterns' ids, hands the clusterer the run's
 * collapsed stacks (of the kinds mined) and patterns, and gets back the COPY rows of the clusters
 * and of the problems they make.
 */
static int cluster_run(struct run *run, const struct stackinfo *si, struct vec *patterns, struct buf *rows,
		       size_t *nclusters, struct buf *prows, size_t *nproblems)
{
	struct miner *m = run->m;
	const struct run_params *p = run->p;
	const struct entry *en = run->entries.data;
	struct pattern *pt = patterns->data;
	struct runclust_stack *rs = NULL;
	struct runclust_pattern *rp = NULL;
	struct runclust_input in;
	struct runclust_opts co;
	struct imap where = IMAP_INIT;  /* kind << 32 | stack id -> index in rs */
	uint32_t *sidx = NULL, *pstacks = NULL, *boff = NULL, *bidx = NULL;
	uint64_t *scost = NULL;
	struct runclust_stack *bs = NULL;
	struct baseline_seq *bseq = NULL, *pseq = NULL;
	struct excess *ex = NULL;
	struct sim_frames *ft = NULL;
	uint32_t *fids = NULL;
	size_t nrs = 0, nsidx = 0, npst = 0, nbs = 0, nfids = 0;
	char nbuf[24], cerr[512];
	const char *params[1] = { nbuf };
	PGresult *r = NULL;
	int rc = -1;

	memset(&co, 0, sizeof(co));
	if (linkage_method_parse(p->linkage, &co.method) < 0)
		return miner_fail(m, "linkage: unknown method %s", p->linkage);
	co.cut = p->cut;
	co.threads = miner_options(m)->threads;
	/* the patterns' ids, in the order they are stored (and ranked) */
	snprintf(nbuf, sizeof(nbuf), "%zu", patterns->len);
	r = PQexecParams(miner_db(m), "SELECT nextval(pg_get_serial_sequence('patterns', 'id'))"
				      " FROM generate_series(1, $1::integer)", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || (size_t)PQntuples(r) != patterns->len)
		return miner_db_fail(m, "reserving pattern ids", r);
	for (size_t i = 0; i < patterns->len; i++)
		pt[i].id = db_get_i64(r, (int)i, 0);
	PQclear(r);
	/* the collapsed stacks: entries come by (kind, stack, stream) */
	rs = vec_alloc(run->entries.len + 1, sizeof(*rs));
	bs = vec_alloc(run->bentries.len + 1, sizeof(*bs));
	sidx = vec_alloc(run->entries.len + run->bentries.len + 1, sizeof(*sidx));
	scost = vec_alloc(run->entries.len + run->bentries.len + 1, sizeof(*scost));
	rp = vec_alloc(patterns->len + 1, sizeof(*rp));
	for (size_t i = 0; i < patterns->len; i++)
		npst += pt[i].nstacks;
	pstacks = vec_alloc(npst + 1, sizeof(*pstacks));
	bseq = vec_alloc(run->bentries.len + 1, sizeof(*bseq));
	if (!rs || !bs || !bseq || !sidx || !scost || !rp || !pstacks) {
		miner_fail(m, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < run->entries.len; i++) {
		int64_t k = intern_find(si->ids, &en[i].stack, sizeof(uint32_t));
		unsigned kind = en[i].kind == WIRE_WAIT ? RUN_KINDS_WAIT : RUN_KINDS_RUN;
		uint64_t key = (uint64_t)(en[i].kind == WIRE_WAIT ? 'w' : 'r') << 32 | en[i].stack, at;

		if (k < 0 || !si->keep[k] || !(p->kinds & kind))
			continue;
		if (!imap_get(&where, key, &at)) {
			/* a new (kind, stack): its streams follow, the entries being in that order */
			at = nrs;
			if (imap_put(&where, key, at) < 0) {
				miner_fail(m, "out of memory");
				goto out;
			}
			rs[nrs++] = (struct runclust_stack){ 0, 0, (uint32_t)nsidx, 0, en[i].stack, si->frames[k],
							     si->len[k] };
		}
		rs[at].cost += (uint64_t)en[i].cost;
		rs[at].events += en[i].events;
		rs[at].n++;
		scost[nsidx] = (uint64_t)en[i].cost;
		sidx[nsidx++] = en[i].stream;
	}
	/* the baseline's, sorted the same way: each (kind, stack) once, its streams following */
	for (size_t i = 0; i < run->bentries.len; i++) {
		const struct entry *b = (const struct entry *)run->bentries.data + i;
		int64_t k = intern_find(si->ids, &b->stack, sizeof(uint32_t));
		unsigned kind = b->kind == WIRE_WAIT ? RUN_KINDS_WAIT : RUN_KINDS_RUN;

		if (k < 0 || !si->keep[k] || !(p->kinds & kind))
			continue;
		if (!nbs || bs[nbs - 1].stack_id != b->stack || bseq[nbs - 1].kind != b->kind) {
			bseq[nbs] = (struct baseline_seq){ si->frames[k], si->len[k], b->kind };
			bs[nbs++] = (struct runclust_stack){ 0, 0, (uint32_t)nsidx, 0, b->stack, si->frames[k],
							     si->len[k] };
		}
		bs[nbs - 1].cost += (uint64_t)b->cost;
		bs[nbs - 1].events += b->events;
		bs[nbs - 1].n++;
		scost[nsidx] = (uint64_t)b->cost;
		sidx[nsidx++] = b->stream;
	}
	npst = 0;
	for (size_t i = 0; i < patterns->len; i++) {
		char kc = pt[i].kind == WIRE_WAIT ? 'w' : 'r';

		rp[i] = (struct runclust_pattern){ pt[i].id, kc, pt[i].frames, (uint32_t)pt[i].len, pstacks + npst, 0,
						   NULL, 0 };
		pt[i].est_cost = 0;
		for (size_t j = 0; j < pt[i].nstacks; j++) {
			uint64_t v;

			if (imap_get(&where, (uint64_t)kc << 32 | (uint32_t)pt[i].stacks[j], &v)) {
				pstacks[npst++] = (uint32_t)v;
				rp[i].nstacks++;
				for (uint32_t x = rs[v].first; x < rs[v].first + rs[v].n; x++)
					pt[i].est_cost += run->weight[sidx[x]] * (double)scost[x];
			}
		}
	}
	if (run->nbase) {
		/* which baseline stacks contain each pattern, and the run's streams for the bootstrap */
		struct excess_streams es = { run->nstreams, run->base, run->utype, run->nutypes };

		pseq = vec_alloc(patterns->len + 1, sizeof(*pseq));
		if (!pseq) {
			miner_fail(m, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < patterns->len; i++)
			pseq[i] = (struct baseline_seq){ pt[i].frames, (uint32_t)pt[i].len, pt[i].kind };
		if (baseline_match(bseq, nbs, pseq, patterns->len, co.threads, &boff, &bidx) < 0 ||
		    !(ex = excess_open(&es, p->bootstrap, (uint64_t)run->id))) {
			miner_fail(m, "out of memory measuring the baseline");
			goto out;
		}
		for (size_t i = 0; i < patterns->len; i++) {
			rp[i].bstacks = bidx + boff[i];
			rp[i].nbstacks = boff[i + 1] - boff[i];
		}
	}
	in = (struct runclust_input){ rp, patterns->len, rs, nrs, sidx, scost, run->nstreams, bs, nbs, ex,
				      run->weight };
	/* the frames' names and statistics, current: what ingest appended since its last fold too */
	if (runclust_frame_ids(&in, &fids, &nfids) < 0 || !(ft = sim_frames_open())) {
		miner_fail(m, "out of memory");
		goto out;
	}
	if (frames_fold(miner_db(m), cerr, sizeof(cerr)) < 0 ||
	    frames_load(miner_db(m), fids, nfids, ft, cerr, sizeof(cerr)) < 0 ||
	    runclust_build(run->id, &in, ft, &co, frames_take_ids, miner_db(m), rows, nclusters, prows, nproblems,
			   cerr, sizeof(cerr)) < 0) {
		miner_fail(m, "%s", cerr);
		goto out;
	}
	rc = 0;
out:
	sim_frames_free(ft);
	free(fids);
	imap_free(&where);
	excess_free(ex);
	free(rs);
	free(bs);
	free(sidx);
	free(scost);
	free(rp);
	free(pstacks);
	free(bseq);
	free(pseq);
	free(boff);
	free(bidx);
	return rc;
}

/* Writes the run once, in one transaction: its mining database (run_stacks), patterns, problems and
 * clusters (the COPY rows of runclust_build()), counts and timings. */
static int store_results(struct run *run, const struct stackinfo *si, struct vec *patterns,
			 const struct buf *clusters, const struct buf *problems, const char *counts, int64_t t_run,
			 int64_t t_store)
{
	char timings[256];
	struct miner *m = run->m;
	const struct entry *en = run->entries.data;
	struct pattern *pt = patterns->data;
	struct buf b = BUF_INIT(0);
	char idbuf[24];
	const char *params[4];
	PGresult *r;
	int rank = 0;
	uint8_t last_kind = 0xff;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)run->id);
	params[0] = idbuf;
	if (miner_exec(m, "BEGIN") < 0)
		return -1;
	r = PQexecParams(miner_db(m), "DELETE FROM run_stacks WHERE run_id = $1", 1, NULL, params, NULL, NULL, 0);
	PQclear(r);
	r = PQexecParams(miner_db(m), "DELETE FROM patterns WHERE run_id = $1", 1, NULL, params, NULL, NULL, 0);
	PQclear(r);
	r = PQexecParams(miner_db(m), "DELETE FROM problems WHERE run_id = $1", 1, NULL, params, NULL, NULL, 0);
	PQclear(r);
	if (copy_begin(m, "COPY run_stacks (run_id, kind, stack_id, stream_ref, cost_ns, events) FROM STDIN") < 0)
		goto fail_rollback;
	for (size_t i = 0; i < run->entries.len; i++) {
		int64_t k = intern_find(si->ids, &en[i].stack, sizeof(uint32_t));
		unsigned kind = en[i].kind == WIRE_WAIT ? RUN_KINDS_WAIT : RUN_KINDS_RUN;

		/* the mining database of the kinds mined: coverage and triage are per kind */
		if (k < 0 || !si->keep[k] || !(run->p->kinds & kind))
			continue;
		buf_printf(&b, "%s\t%c\t%u\t%lld\t%lld\t%u\n", idbuf, en[i].kind == WIRE_WAIT ? 'w' : 'r',
			   en[i].stack, (long long)run->refs[en[i].stream], (long long)en[i].cost,
			   en[i].events);
		if (copy_send(m, &b, false) < 0)
			goto fail_rollback;
	}
	if (copy_send(m, &b, true) < 0 || copy_end(m) < 0)
		goto fail_rollback;
	r = PQexecParams(miner_db(m), "DELETE FROM run_baseline WHERE run_id = $1", 1, NULL, params, NULL, NULL, 0);
	PQclear(r);
	if (run->nbase) {
		/* the normal units measured against, for attribution */
		if (copy_begin(m, "COPY run_baseline (run_id, stream_ref) FROM STDIN") < 0)
			goto fail_rollback;
		for (size_t i = 0; i < run->nstreams; i++) {
			if (!run->base[i])
				continue;
			buf_printf(&b, "%s\t%lld\n", idbuf, (long long)run->refs[i]);
			if (copy_send(m, &b, false) < 0)
				goto fail_rollback;
		}
		if (copy_send(m, &b, true) < 0 || copy_end(m) < 0)
			goto fail_rollback;
	}
	if (copy_begin(m, "COPY patterns (id, run_id, kind, rank, frame_ids, cost_ns, events, streams,"
			  " stack_ids, est_cost_ns) FROM STDIN") < 0)
		goto fail_rollback;
	for (size_t i = 0; i < patterns->len; i++) {
		if (pt[i].kind != last_kind) {
			last_kind = pt[i].kind;
			rank = 0;
		}
		buf_printf(&b, "%lld\t%s\t%c\t%d\t{", (long long)pt[i].id, idbuf, pt[i].kind == WIRE_WAIT ? 'w' : 'r',
			   ++rank);
		for (size_t j = 0; j < pt[i].len; j++)
			buf_printf(&b, j ? ",%u" : "%u", pt[i].frames[j]);
		buf_printf(&b, "}\t%llu\t%llu\t%u\t{", (unsigned long long)pt[i].cost,
			   (unsigned long long)pt[i].events, pt[i].streams);
		for (size_t j = 0; j < pt[i].nstacks; j++)
			buf_printf(&b, j ? ",%d" : "%d", pt[i].stacks[j]);
		buf_printf(&b, "}\t%lld\n", (long long)llround(pt[i].est_cost));
		if (copy_send(m, &b, false) < 0)
			goto fail_rollback;
	}
	if (copy_send(m, &b, true) < 0 || copy_end(m) < 0)
		goto fail_rollback;
	/* what attribution counts the clusters' streams against (after run_stacks and run_baseline) */
	r = PQexecParams(miner_db(m), "SELECT sm_run_values($1)", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		miner_db_fail(m, "counting the run's values", r);
		goto fail_rollback;
	}
	PQclear(r);
	/* the problems first: the clusters name theirs */
	if (copy_begin(m, "COPY problems (" RUNCLUST_PROBLEM_COLUMNS ") FROM STDIN") < 0 ||
	    (problems->len && PQputCopyData(miner_db(m), problems->data, (int)problems->len) != 1) ||
	    copy_end(m) < 0)
		goto fail_rollback;
	if (copy_begin(m, "COPY clusters (" RUNCLUST_COLUMNS ") FROM STDIN") < 0 ||
	    (clusters->len && PQputCopyData(miner_db(m), clusters->data, (int)clusters->len) != 1) || copy_end(m) < 0)
		goto fail_rollback;
	snprintf(timings, sizeof(timings),
		 "{\"select\":%lld,\"read_aoi\":%lld,\"collapse_filter\":%lld,\"mine\":%lld,"
		 "\"store\":%lld,\"total\":%lld}",
		 (long long)run->t_select, (long long)run->t_read, (long long)run->t_filter,
		 (long long)run->t_mine, (long long)ms_since(t_store), (long long)ms_since(t_run));
	params[1] = counts;
	params[2] = timings;
	params[3] = miner_worker(m);
	r = PQexecParams(miner_db(m), "UPDATE runs SET counts = $2::jsonb, timings_ms = $3::jsonb"
				" WHERE id = $1 AND worker = $4 AND status = 'running'",
			 4, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		miner_db_fail(m, "finishing the run", r);
		goto fail_rollback;
	}
	if (strcmp(PQcmdTuples(r), "1") != 0) {
		/* another worker took it over (this one stopped beating): its result stands */
		PQclear(r);
		miner_fail(m, "run %s was taken over by another worker", idbuf);
		goto fail_rollback;
	}
	PQclear(r);
	buf_release(&b);
	return miner_exec(m, "COMMIT");
fail_rollback:
	buf_release(&b);
	PQclear(PQexec(miner_db(m), "ROLLBACK"));
	return -1;
}

/* The run is done once its clusters are stored; only the worker holding it may say so. */
static int64_t ms_since(int64_t t0)
{
	return (util_now_mono_ns() - t0) / 1000000;
}

/*
 * Names the unnamed frames it can before the run reads any stack (docs/symbols.md): from symbols
 * stored, else debug files looked for by build id (a failed search is tried again after a day).
 * Bounded: a few build ids a run, each download bounded in time. A failure here is logged, never
 * the run's: the frames stay `module+0xOFFSET`.
 */
static void name_frames(struct miner *m, int64_t run_id)
{
	const struct debuginfo_opts o = { NULL, 1, MINER_SYMBOLS_TIMEOUT_S, 0 };
	char err[512];
	int n = symstore_resolve_pending(miner_db(m), &o, 86400, MINER_SYMBOLS_BUILDS, err, sizeof(err));

	if (n < 0)
		log_warn("frames not named", "run=%lld error=\"%s\"", (long long)run_id, err);
	else if (n > 0)
		log_info("frames named", "run=%lld frames=%d", (long long)run_id, n);
}

int miner_execute(struct miner *m, int64_t run_id, const struct run_params *p)
{
	struct run run;
	struct beat bt;
	struct stackinfo si;
	struct aoi_filter *flt = NULL;
	struct vec patterns = VEC_INIT(struct pattern);
	struct buf clusters = BUF_INIT(0), problems = BUF_INIT(0);
	char counts[256];
	uint64_t minsup_w = 0, minsup_r = 0, aoi_events = 0, stacks = 0;
	int64_t t0 = util_now_mono_ns(), t, t_cluster;
	size_t ncl = 0, npr = 0;
	int rc = -1, beating = 0;

	memset(&run, 0, sizeof(run));
	memset(&si, 0, sizeof(si));
	if (run_init(&run, m, run_id, p, p->aoi, "selecting streams") < 0)
		goto out;
	flt = aoi_filter_open(p->include, p->ninclude, p->exclude, p->nexclude);
	if (!flt) {
		miner_fail(m, "out of memory");
		goto out;
	}
	if (beat_start(&bt, &run) < 0)
		goto out;
	beating = 1;
	name_frames(m, run_id);

	t = util_now_mono_ns();
	if (select_streams(&run) < 0)
		goto out;
	run.t_select = ms_since(t);

	atomic_store(&run.prog.phase, "reading events and extracting the AOI");
	t = util_now_mono_ns();
	if (extract(&run) < 0)
		goto out;
	run.t_read = ms_since(t);

	atomic_store(&run.prog.phase, "collapsing stacks");
	t = util_now_mono_ns();
	if (run.entries.len)
		qsort(run.entries.data, run.entries.len, sizeof(struct entry), cmp_entry);
	if (run.bentries.len)
		qsort(run.bentries.data, run.bentries.len, sizeof(struct entry), cmp_entry);
	if (load_stacks(&run, &si, flt) < 0)
		goto out;
	for (size_t i = 0; i < run.entries.len; i++) {
		const struct entry *e = (const struct entry *)run.entries.data + i;
		int64_t k = intern_find(si.ids, &e->stack, sizeof(uint32_t));

		if (k < 0 || !si.keep[k])
			continue;
		aoi_events += e->events;
		/* entries are sorted by (kind, stack): count each pair once */
		if (i == 0 || e[-1].kind != e->kind || e[-1].stack != e->stack)
			stacks++;
	}
	atomic_store(&run.prog.aoi_events, aoi_events);
	atomic_store(&run.prog.stacks, stacks);
	run.t_filter = ms_since(t);
	if (miner_options(m)->cancel && *miner_options(m)->cancel) {
		miner_fail(m, "cancelled");
		goto out;
	}

	atomic_store(&run.prog.phase, "mining");
	t = util_now_mono_ns();
	if ((p->kinds & RUN_KINDS_WAIT) && mine_kind(&run, &si, WIRE_WAIT, &patterns, &minsup_w) < 0)
		goto out;
	if ((p->kinds & RUN_KINDS_RUN) && mine_kind(&run, &si, WIRE_RUN, &patterns, &minsup_r) < 0)
		goto out;
	if (patterns.len)
		qsort(patterns.data, patterns.len, sizeof(struct pattern), cmp_pattern);
	run.t_mine = ms_since(t);

	atomic_store(&run.prog.phase, "clustering");
	t = util_now_mono_ns();
	if (cluster_run(&run, &si, &patterns, &clusters, &ncl, &problems, &npr) < 0)
		goto out;
	t_cluster = ms_since(t);
	if (miner_options(m)->progress)
		log_info("run clustered", "run=%lld clusters=%zu", (long long)run_id, ncl);

	atomic_store(&run.prog.phase, "storing");
	t = util_now_mono_ns();
	{
		struct buf cb = BUF_INIT(sizeof(counts) - 1);
		struct jsonw w;

		jsonw_init_compact(&w, &cb);
		jsonw_object(&w);
		jsonw_ku64(&w, "streams", run.nstreams - run.nbase);
		jsonw_ku64(&w, "baseline_streams", run.nbase);
		jsonw_ku64(&w, "aoi_events", aoi_events);
		jsonw_ku64(&w, "distinct_stacks", stacks);
		jsonw_ku64(&w, "patterns", patterns.len);
		jsonw_ku64(&w, "clusters", ncl);
		jsonw_ku64(&w, "problems", npr);
		jsonw_ku64(&w, "threshold_wait_ns", minsup_w);
		jsonw_ku64(&w, "threshold_run_ns", minsup_r);
		jsonw_end(&w);
		if (jsonw_finish(&w) < 0) {
			buf_release(&cb);
			miner_fail(m, "counts: %s", jsonw_error(&w));
			goto out;
		}
		memcpy(counts, cb.data, cb.len + 1);
		buf_release(&cb);
	}
	if (store_results(&run, &si, &patterns, &clusters, &problems, counts, t0, t) < 0 ||
	    miner_finish(m, run_id, t_cluster, ms_since(t0)) < 0)
		goto out;
	if (miner_options(m)->progress)
		log_info("run stored", "run=%lld counts=%s ms=%lld store_ms=%lld", (long long)run_id, counts,
			 (long long)ms_since(t0), (long long)ms_since(t));
	rc = 0;
out:
	if (beating)
		beat_stop(&bt);
	if (run.split)
		parts_drop(m, run_id);
	if (rc < 0) {
		bool cancelled = miner_options(m)->cancel && *miner_options(m)->cancel;

		if (!cancelled && miner_db_lost(m)) {
			/* a restart or failover of the database is not the run's fault: it goes again */
			char why[MINER_ERRLEN];

			snprintf(why, sizeof(why), "the database went away: %s", miner_error(m));
			switch (miner_requeue_lost(m, run_id, why, RUN_DB_WAIT_S)) {
			case 1: miner_fail(m, "%s", why); rc = 2; break;
			case 0: miner_fail(m, "%s (attempt %d of %d)", why, MINER_MAX_ATTEMPTS, MINER_MAX_ATTEMPTS); break;
			default: miner_fail(m, "%s; not back after %d s: the run's lease gives it to a worker",
					    why, RUN_DB_WAIT_S);
			}
		} else {
			miner_set_status(m, run_id, cancelled ? "queued" : "failed", cancelled ? NULL : miner_error(m));
			if (cancelled)
				rc = 1;
		}
	}
	run_release(&run);
	aoi_filter_free(flt);
	intern_free(si.ids);
	vec_free(&patterns);
	buf_release(&clusters);
	buf_release(&problems);
	return rc;
}

/* Between runs: the due schedules' runs queued, the due alerts delivered (watch.h). A failure is
 * logged; the worker goes on mining. */
static void watch_tick(struct miner *m)
{
	char err[512];

	if (watch_schedules(miner_db(m), err, sizeof(err)) < 0)
		log_error("scheduling runs failed", "error=\"%s\"", err);
	if (watch_deliver(miner_db(m), 20, miner_options(m)->webhook_allow, err, sizeof(err)) < 0)
		log_error("delivering alerts failed", "error=\"%s\"", err);
}

/* After a run: its alerts, delivered at once. */
static void watch_done(struct miner *m, int64_t id)
{
	char err[512];

	if (watch_run_done(miner_db(m), id, err, sizeof(err)) < 0)
		log_error("alert rules failed", "run=%lld error=\"%s\"", (long long)id, err);
	else if (watch_deliver(miner_db(m), 20, miner_options(m)->webhook_allow, err, sizeof(err)) < 0)
		log_error("delivering alerts failed", "error=\"%s\"", err);
}

/* Sleeps ms, waking early when the run is cancelled. */
static void nap(const struct miner *m, int ms)
{
	for (; ms > 0 && !(miner_options(m)->cancel && *miner_options(m)->cancel); ms -= 100)
		poll(NULL, 0, ms < 100 ? ms : 100);
}

/* Takes a part of another worker's run and extracts it: 1 when there was one, else 0. */
static int work_part(struct miner *m)
{
	struct parts_claim c;
	int got = parts_claim(m, 0, &c);

	if (got < 0)
		log_error("taking a part failed", "error=\"%s\"", miner_error(m));
	if (got <= 0)
		return 0;
	switch (execute_part(m, &c)) {
	case 0: log_info("part done", "run=%lld part=%d", (long long)c.run_id, c.part); break;
	case 1: log_warn("part taken over by another worker", "run=%lld part=%d", (long long)c.run_id, c.part); break;
	default: log_error("part failed", "run=%lld part=%d error=\"%s\"", (long long)c.run_id, c.part, miner_error(m));
	}
	return 1;
}

int miner_work(struct miner *m, bool once)
{
	int rc = 0;

	log_info("worker started", "%s", "");
	while (!(miner_options(m)->cancel && *miner_options(m)->cancel)) {
		struct arena *a;
		struct run_params p;
		int64_t id;
		int got;

		watch_tick(m);
		/* parts of runs in progress come before new runs */
		if (work_part(m) > 0)
			continue;
		a = arena_open(0);
		got = a ? miner_claim(m, a, &id, &p) : (miner_fail(m, "out of memory"), -1);

		if (got < 0) {
			log_error("taking a run failed", "error=\"%s\"", miner_error(m));
			arena_free(a);
			if (once) {
				rc = -1;
				break;
			}
			nap(m, 5000);
			continue;
		}
		if (got == 0) {
			arena_free(a);
			if (once)
				break;
			if (miner_wait(m, 5000) < 0) {
				log_error("waiting for runs failed", "error=\"%s\"", miner_error(m));
				nap(m, 5000);
			}
			continue;
		}
		log_info("run taken", "run=%lld app=\"%s\"", (long long)id, p.app);
		switch (miner_execute(m, id, &p)) {
		case 0:
			log_info("run done", "run=%lld", (long long)id);
			watch_done(m, id);
			break;
		case 1: log_warn("run given back to the queue", "run=%lld", (long long)id); break;
		case 2:
			log_warn("run queued again: the database went away", "run=%lld error=\"%s\"", (long long)id,
				 miner_error(m));
			break;
		default: log_error("run failed", "run=%lld error=\"%s\"", (long long)id, miner_error(m));
		}
		arena_free(a);
	}
	log_info("worker stopped", "%s", "");
	return rc;
}
