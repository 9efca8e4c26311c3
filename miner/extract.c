/* extract: a run's events read and their AOI extracted on all cores (see extract.h). */
#include "miner/extract.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/intern.h"
#include "common/log.h"
#include "common/par.h"
#include "common/vec.h"
#include "common/wire.h"
#include "miner/aoi.h"
#include "miner/copyread.h"
#include "miner/queue.h"
#include "miner/runstate.h"
#include "miner/standby.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Events read before a chunk of streams is handed to the AOI threads. */
#define CHUNK_EVENTS (512 * 1024)

/* What stream_aoi() needs from stream to stream, a thread's own. */
struct scratch {
	struct intern *agg;   /* (stack, kind): index in acc */
	struct vec acc;       /* struct entry */
	struct vec aside;     /* struct wire_event: the events out of order */
};

struct aoi_job {
	struct runstate *run;
	int t;
	char err[512];
	struct vec out;   /* struct entry */
	struct scratch sc;
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

static int scratch_open(struct scratch *sc)
{
	sc->acc = (struct vec)VEC_INIT(struct entry);
	sc->aside = (struct vec)VEC_INIT(struct wire_event);
	sc->agg = intern_open(0);
	return sc->agg ? 0 : -1;
}

static void scratch_free(struct scratch *sc)
{
	vec_free(&sc->acc);
	vec_free(&sc->aside);
	intern_free(sc->agg);
	sc->agg = NULL;
}

/*
 * A stream's rows come back in long runs of the order they were sent in, in time, so the few out
 * of order are set aside; at worst (all but one aside: reversed, or one early outlier) this is a
 * sort of all and two copies. aside grows to the most set aside of a stream, at most its events
 * again (what glibc's qsort allocates for each call). Events equal by cmp_event are equal in
 * every field, so the order is the same whatever the sort; when out of memory ev is half moved.
 */
int extract_sort_events(struct wire_event *ev, size_t n, struct vec *aside)
{
	struct wire_event *side;
	size_t kept = 0, i, j, k;

	aside->len = 0;
	for (i = 0; i < n; i++) {
		if (kept && cmp_event(&ev[i], &ev[kept - 1]) < 0) {
			if (vec_append(aside, &ev[i]) < 0)
				return -1;
		} else {
			ev[kept++] = ev[i];
		}
	}
	if (!aside->len)
		return 0;
	side = aside->data;
	qsort(side, aside->len, sizeof(*side), cmp_event);
	/* from the back: the kept ones move up into the room the others left */
	for (i = kept, j = aside->len, k = n; j;)
		ev[--k] = i && cmp_event(&ev[i - 1], &side[j - 1]) > 0 ? ev[--i] : side[--j];
	return 0;
}

/*
 * One stream's events ev[0 .. n) (idx into run->refs): sorted, their AOI extracted with aoi and
 * collapsed by (kind, stack) into out, one entry per pair. 0, or -1 with the reason in err.
 */
static int stream_aoi(struct runstate *run, struct aoi *aoi, struct scratch *sc, struct vec *out,
		      struct wire_event *ev, size_t n, uint32_t idx, char *err, size_t errlen)
{
	struct intern *agg = sc->agg;
	struct vec *acc = &sc->acc;
	const uint32_t *sel;
	size_t nsel;

	if (extract_sort_events(ev, n, &sc->aside) < 0) {
		snprintf(err, errlen, "out of memory sorting the events of stream %lld", (long long)run->refs[idx]);
		return -1;
	}
	if (aoi_extract(aoi, ev, n, &run->sym[idx], run->mode, &sel, &nsel) < 0) {
		snprintf(err, errlen, "AOI of stream %lld: %s", (long long)run->refs[idx], aoi_error(aoi));
		return -1;
	}
	intern_clear(agg);
	acc->len = 0;
	for (size_t i = 0; i < nsel; i++) {
		const struct wire_event *e = &ev[sel[i]];
		uint32_t key[2] = { e->stack, e->kind };
		bool added;
		int64_t k = intern_put(agg, key, sizeof(key), &added);
		struct entry *en;

		if (k < 0)
			goto fail_oom;
		if (added) {
			en = vec_push(acc);
			if (!en)
				goto fail_oom;
			*en = (struct entry){ .stack = e->stack, .stream = idx, .kind = e->kind };
		}
		en = (struct entry *)acc->data + k;
		en->cost = (int64_t)sat_add((uint64_t)en->cost, (uint64_t)e->dur_ns);
		en->events++;
	}
	for (size_t i = 0; i < acc->len; i++) {
		struct entry *dst = vec_push(out);

		if (!dst)
			goto fail_oom;
		*dst = ((struct entry *)acc->data)[i];
	}
	atomic_fetch_add(&run->prog.aoi_events, (uint64_t)nsel);
	atomic_fetch_add(&run->prog.streams_read, 1);
	return 0;
fail_oom:
	snprintf(err, errlen, "out of memory collapsing stacks");
	return -1;
}

static void *aoi_thread(void *arg)
{
	struct aoi_job *job = arg;
	struct runstate *run = job->run;
	const struct stream_events *se = run->chunk.data;
	struct wire_event *ev = run->events.data;

	/* each thread sorts only its own streams' ranges */
	for (size_t k = (size_t)job->t; k < run->chunk.len; k += (size_t)run->threads)
		if (stream_aoi(run, run->aoi[job->t], &job->sc, &job->out, ev + se[k].first, se[k].n,
			       se[k].idx, job->err, sizeof(job->err)) < 0) {
			job->rc = -1;
			return NULL;
		}
	return NULL;
}

static void run_aoi_job(void *ctx, int t)
{
	aoi_thread(&((struct aoi_job *)ctx)[t]);
}

static int process_chunk(struct runstate *run)
{
	struct aoi_job jobs[PAR_MAX_THREADS];
	int rc = 0;

	if (!run->chunk.len)
		return 0;
	memset(jobs, 0, sizeof(jobs));
	for (int t = 0; t < run->threads; t++) {
		jobs[t].run = run;
		jobs[t].t = t;
		jobs[t].out.size = sizeof(struct entry);
		if (scratch_open(&jobs[t].sc) < 0) {
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
		scratch_free(&jobs[t].sc);
	}
	run->chunk.len = 0;
	run->events.len = 0;
	return rc;
}

/* Where a read of events stands: the stream being read (index into refs) and the end. */
struct reader {
	struct runstate *run;
	size_t cur, end;
	bool have;
};

/* One event of the stream ref (events come grouped by stream, in the order of refs) into the
 * current chunk; a full chunk is handed to the AOI threads at a stream's start. 0 or -1. */
static int take_event(void *arg, int64_t ref, const struct wire_event *e)
{
	struct reader *rd = arg;
	struct runstate *run = rd->run;
	struct miner *m = run->m;
	struct wire_event *dst;

	if (!rd->have || run->refs[rd->cur] != ref) {
		struct stream_events *se;

		if (rd->have && run->events.len >= CHUNK_EVENTS && process_chunk(run) < 0)
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

/*
 * The kind of events the AOI of the kinds mined can depend on: 'w' or 'r' alone, or 0 for both.
 * Under a wait graph only a wait with a readier adds edges: running events are leaves, so the wait
 * events it reaches are the same without them, and a run of wait stacks reads only waits (three
 * quarters of the events in the paper's study). Under stream or thread scope each event is kept
 * or not by itself. The critical path walks through both kinds.
 */
static char read_kind(const struct runstate *run)
{
	if (run->kinds == RUN_KINDS_WAIT && run->mode != AOI_CRITICAL)
		return 'w';
	if (run->kinds == RUN_KINDS_RUN && (run->mode == AOI_STREAM || run->mode == AOI_THREAD))
		return 'r';
	return 0;
}

/* The temporary tables of streams a COPY joins: the run's selection, the part, a share's. */
enum read_table { READ_SEL, READ_PART, READ_SLICE };

/*
 * The COPY of the event chunks of the streams in the temporary table t (their events of the kind
 * read are taken as they are decoded: a chunk holds both kinds). The statement is put together
 * from this function's constants alone: COPY takes no parameters. The selection's bounds let the
 * index scan start at its streams, not read past the earlier ones, and travel to the shards with
 * their foreign scans.
 * (Bounds on received_at as well would leave out whole days, but make the planner's estimate small
 * enough to pick a nested loop over the selection: twice the time for a run in one piece)
 */
static void copy_sql(char *sql, size_t n, enum read_table t)
{
	static const char *const names[] = { "sm_sel", "sm_part", "sm_slice" };
	const char *table = names[t];

	snprintf(sql, n,
		 "COPY (SELECT c.stream_ref, c.data FROM event_chunks c JOIN %s s ON s.id = c.stream_ref"
		 " WHERE c.stream_ref BETWEEN (SELECT min(id) FROM %s) AND (SELECT max(id) FROM %s)"
		 " ORDER BY c.stream_ref) TO STDOUT (FORMAT binary)",
		 table, table, table);
}

/* ---- Several readers: the streams cut into shares, each read on a connection of its own and its
 * AOI extracted by the thread that reads it. PostgreSQL's backend does most of a read's work (it
 * sends about 1.5 million events a second, the miner takes a third of that time to decode them
 * and extract their AOI), so a read on one connection uses one core whatever the threads. ---- */

/* Below this many events the streams are read on the worker's connection alone: a share costs
 * four statements on its reader's connection. */
#define SHARED_MIN_EVENTS (64 * 1024)

struct share {
	struct runstate *run;
	PGconn *db;
	int t;                        /* its AOI workspace: run->aoi[t] */
	size_t first, end, cur;       /* its streams in refs, the one being read */
	bool have;                    /* cur's events are in events */
	struct vec events;            /* the current stream's: struct wire_event */
	struct vec out;               /* struct entry */
	struct scratch sc;
	uint64_t nread;
	atomic_bool *stop;            /* set by the first share that fails */
	bool cancelled;               /* its statement asked to stop */
	struct copyread_err err;      /* msg "": no failure of its own */
	int rc;
};

/* Stops the others, and this share's own statement: the rest of a share's rows would be read
 * only to be thrown away. */
static void share_stop(struct share *sh)
{
	atomic_store(sh->stop, true);
	if (!sh->cancelled) {
		PGcancel *c = PQgetCancel(sh->db);
		char buf[256];

		if (c) {
			PQcancel(c, buf, sizeof(buf));
			PQfreeCancel(c);
		}
		sh->cancelled = true;
	}
}

static int share_fail(struct share *sh, const char *msg)
{
	snprintf(sh->err.msg, sizeof(sh->err.msg), "%s", msg);
	sh->err.sqlstate[0] = '\0';
	share_stop(sh);
	return -1;
}

/* The stream being read: its AOI into the share's entries. */
static int share_flush(struct share *sh)
{
	if (!sh->have)
		return 0;
	sh->have = false;
	if (stream_aoi(sh->run, sh->run->aoi[sh->t], &sh->sc, &sh->out, sh->events.data, sh->events.len,
		       (uint32_t)sh->cur, sh->err.msg, sizeof(sh->err.msg)) < 0) {
		sh->err.sqlstate[0] = '\0';
		share_stop(sh);
		return -1;
	}
	sh->events.len = 0;
	return 0;
}

/* Another share failed, or the run is cancelled. */
static bool share_stopped(const struct share *sh)
{
	const volatile sig_atomic_t *cancel = miner_options(sh->run->m)->cancel;

	return atomic_load_explicit(sh->stop, memory_order_relaxed) || (cancel && *cancel);
}

/* copyread_each of a share: one stream's events at a time. */
static int share_take(void *arg, int64_t ref, const struct wire_event *e)
{
	struct share *sh = arg;
	const struct runstate *run = sh->run;
	struct wire_event *dst;

	if (share_stopped(sh)) {
		share_stop(sh);
		return -1;
	}
	if (!sh->have || run->refs[sh->cur] != ref) {
		if (share_flush(sh) < 0)
			return -1;
		while (sh->cur < sh->end && run->refs[sh->cur] != ref)
			sh->cur++;
		if (sh->cur == sh->end) {
			char msg[96];

			snprintf(msg, sizeof(msg), "reading events: stream %lld was not selected", (long long)ref);
			return share_fail(sh, msg);
		}
		sh->have = true;
	}
	dst = vec_push(&sh->events);
	if (!dst)
		return share_fail(sh, "out of memory reading events");
	*dst = *e;
	sh->nread++;
	return 0;
}

/* One statement of a share's before its COPY; 0, or -1 with the share failed. */
static int share_exec(struct share *sh, const char *sql, const char *param)
{
	PGresult *r;

	if (share_stopped(sh))
		return -1;
	r = PQexecParams(sh->db, sql, param ? 1 : 0, NULL, param ? &param : NULL, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		copyread_fail(&sh->err, sh->db, "reading events", r);
		atomic_store(sh->stop, true);
		return -1;
	}
	PQclear(r);
	return 0;
}

/* One share, on its own thread (par_run): its streams into its connection's sm_slice, read. */
static void share_run(void *ctx, int t)
{
	struct share *sh = (struct share *)ctx + t;
	struct runstate *run = sh->run;
	struct buf ids = BUF_INIT(0);
	char sql[768];

	sh->rc = -1;
	if (copyread_ids(&ids, run->refs + sh->first, sh->end - sh->first) < 0) {
		snprintf(sh->err.msg, sizeof(sh->err.msg), "out of memory reading events");
		atomic_store(sh->stop, true);
		goto out;
	}
	/* analyzed: the planner must see a share's few streams to read them through the index */
	if (share_exec(sh, "CREATE TEMP TABLE IF NOT EXISTS sm_slice (id bigint PRIMARY KEY)", NULL) < 0 ||
	    share_exec(sh, "DELETE FROM sm_slice", NULL) < 0 ||
	    share_exec(sh, "INSERT INTO sm_slice SELECT unnest($1::bigint[])", buf_cstr(&ids)) < 0 ||
	    share_exec(sh, "ANALYZE sm_slice", NULL) < 0 || share_stopped(sh))
		goto out;
	copy_sql(sql, sizeof(sql), READ_SLICE);
	if (copyread_conn(sh->db, sql, read_kind(run), share_take, sh, &sh->err) < 0) {
		if (sh->err.msg[0])
			atomic_store(sh->stop, true);
		goto out;
	}
	if (share_flush(sh) < 0)
		goto out;
	sh->rc = 0;
out:
	buf_release(&ids);
}

/*
 * The events of refs[first .. end) into size[0 .. end - first) (streams.n_events; 0 for a stream
 * gone since its selection, whose read then finds none). Returns their sum, or -1 with the error
 * on the run's miner.
 */
static int64_t share_sizes(struct runstate *run, size_t first, size_t end, uint64_t *size)
{
	struct miner *m = run->m;
	struct buf ids = BUF_INIT(0);
	const char *params[1];
	uint64_t total = 0;
	size_t k = first;
	PGresult *r;

	if (copyread_ids(&ids, run->refs + first, end - first) < 0) {
		buf_release(&ids);
		return miner_fail(m, "out of memory reading events");
	}
	params[0] = buf_cstr(&ids);
	r = PQexecParams(miner_db(m), "SELECT id, n_events FROM streams WHERE id = ANY($1::bigint[]) ORDER BY id", 1,
			 NULL, params, NULL, NULL, 0);
	buf_release(&ids);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "reading the streams' sizes", r);
	memset(size, 0, (end - first) * sizeof(*size));
	/* both by id */
	for (int i = 0; i < PQntuples(r); i++) {
		int64_t id = db_get_i64(r, i, 0), n = db_get_i64(r, i, 1);

		while (k < end && run->refs[k] < id)
			k++;
		if (k < end && run->refs[k] == id && n > 0) {
			size[k - first] = (uint64_t)n;
			total = sat_add(total, (uint64_t)n);
		}
	}
	PQclear(r);
	return (int64_t)total;
}

/*
 * refs[first .. end), of size[] events each (total in all), cut into at most n contiguous
 * shares of about the same number of events: the i-th share is refs[cut[i] .. cut[i + 1]).
 * Returns how many (1 for fewer than 2 streams).
 */
static int share_cut(size_t first, size_t end, const uint64_t *size, uint64_t total, int n, size_t *cut)
{
	uint64_t sum = 0;
	int k = 1;

	if (n > (int)(end - first))
		n = (int)(end - first);
	cut[0] = first;
	for (size_t i = first; i < end && k < n; i++) {
		sum += size[i - first];
		/* the k-th share ends once it holds its k/n of the events, leaving a stream for each after */
		if ((double)sum * n >= (double)total * k && end - (i + 1) >= (size_t)(n - k))
			cut[k++] = i + 1;
	}
	cut[k] = end;
	return k;
}

/* Up to n readers' connections open (those found dead opened again); how many are. A connection
 * that cannot be opened (too many clients, say) caps the run's readers from then on. */
static int readers_open(struct runstate *run, int n)
{
	int i;

	if (run->readers_cap && n > run->readers_cap)
		n = run->readers_cap;
	for (i = 0; i < n; i++) {
		char err[256];

		if (run->readers[i] && !db_alive(run->readers[i])) {
			PQfinish(run->readers[i]);
			run->readers[i] = NULL;
		}
		if (run->readers[i])
			continue;
		run->readers[i] = db_connect(miner_conninfo(run->m), err, sizeof(err));
		if (run->readers[i] && db_exec(run->readers[i], "SET client_min_messages = warning", err, sizeof(err)) < 0) {
			PQfinish(run->readers[i]);
			run->readers[i] = NULL;
		}
		if (!run->readers[i]) {
			log_warn("a connection to read events could not be opened: fewer readers", "readers=%d error=\"%s\"",
				 i > 1 ? i : 1, err);
			run->readers_cap = i > 1 ? i : 1;
			break;
		}
	}
	return i;
}

/* The shares cut[0 .. n] read at once, each on its reader's connection; their entries added to the
 * run's. */
static int read_shared(struct runstate *run, const size_t *cut, int n)
{
	struct share sh[RUNSTATE_MAX_READERS];
	atomic_bool stop;
	int rc = 0;

	atomic_init(&stop, false);
	memset(sh, 0, sizeof(sh));
	for (int t = 0; t < n; t++) {
		sh[t] = (struct share){ .run = run, .db = run->readers[t], .t = t, .first = cut[t], .end = cut[t + 1],
					.cur = cut[t], .stop = &stop, .rc = -1 };
		sh[t].events.size = sizeof(struct wire_event);
		sh[t].out.size = sizeof(struct entry);
		if (scratch_open(&sh[t].sc) < 0) {
			rc = miner_fail(run->m, "out of memory");
			goto out;
		}
	}
	par_run(n, share_run, sh);
	for (int t = 0; t < n && !rc; t++)
		if (sh[t].rc < 0 && sh[t].err.msg[0])
			rc = miner_fail_state(run->m, sh[t].err.sqlstate, "%s", sh[t].err.msg);
	for (int t = 0; t < n && !rc; t++)
		if (sh[t].rc < 0)
			rc = miner_fail(run->m, "cancelled");
	/* each share's entries freed once moved: the run's and one share's at most, not twice all */
	for (int t = 0; t < n && !rc; t++) {
		for (size_t i = 0; i < sh[t].out.len; i++) {
			const struct entry *e = (const struct entry *)sh[t].out.data + i;
			struct entry *dst = vec_push(run->base[e->stream] ? &run->bentries : &run->entries);

			if (!dst) {
				rc = miner_fail(run->m, "out of memory");
				break;
			}
			*dst = *e;
		}
		vec_free(&sh[t].out);
		run->nread += sh[t].nread;
	}
	if (!rc && n > run->max_readers)
		run->max_readers = n;
out:
	for (int t = 0; t < n; t++) {
		vec_free(&sh[t].events);
		vec_free(&sh[t].out);
		scratch_free(&sh[t].sc);
	}
	return rc;
}

/* The read of refs[first .. end) in shares when the run has the threads and the streams the
 * events: 1 when it was, 0 when it is for one connection, -1 with the error on the run's miner. */
static int try_shared(struct runstate *run, size_t first, size_t end)
{
	size_t cut[RUNSTATE_MAX_READERS + 1];
	uint64_t *size;
	int64_t total;
	int n = run->threads < RUNSTATE_MAX_READERS ? run->threads : RUNSTATE_MAX_READERS, rc;

	if (n < 2 || end - first < 2 || (run->readers_cap && run->readers_cap < 2))
		return 0;
	size = malloc((end - first) * sizeof(*size));
	if (!size)
		return miner_fail(run->m, "out of memory reading events");
	total = share_sizes(run, first, end, size);
	if (total < 0 || total < SHARED_MIN_EVENTS) {
		free(size);
		return total < 0 ? -1 : 0;
	}
	n = share_cut(first, end, size, (uint64_t)total, n, cut);
	if (n > 1) {
		int open = readers_open(run, n);

		if (open < n)
			n = open > 1 ? share_cut(first, end, size, (uint64_t)total, open, cut) : 1;
	}
	free(size);
	if (n < 2)
		return 0;
	rc = read_shared(run, cut, n);
	return rc < 0 ? -1 : 1;
}

/* ---- One reader: the worker's own connection, or the standby ---- */

/* From the standby of --db-read once it has caught up, else (none given, unreachable, behind, or
 * failing in the middle) from the primary - on several connections when the run has the threads
 * and the streams, else on the worker's own - the standby's part of the work undone first. */
int extract_read(struct runstate *run, size_t first, size_t end, bool part)
{
	struct miner *m = run->m;
	struct reader rd = { run, first, end, false };
	uint64_t done0 = atomic_load(&run->prog.streams_read);
	char sql[768];
	PGconn *rdb;
	int rc;

	if (first == end)
		return 0;
	rdb = miner_read_db(m);
	if (rdb) {
		size_t ne = run->entries.len, nb = run->bentries.len;
		uint64_t nread = run->nread;

		rc = standby_caught_up(m, rdb);
		if (rc < 0)
			return -1;
		if (rc == 1 &&
		    standby_read(m, rdb, run->refs + first, end - first, read_kind(run), take_event, &rd) == 0 &&
		    process_chunk(run) == 0) {
			log_info("events read from the standby", "streams=%zu events=%llu", end - first,
				 (unsigned long long)(run->nread - nread));
			goto out_done;
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
		atomic_store(&run->prog.streams_read, done0);
	}
	rc = try_shared(run, first, end);
	if (rc < 0)
		return -1;
	if (rc == 0) {
		copy_sql(sql, sizeof(sql), part ? READ_PART : READ_SEL);
		if (copyread_events(m, sql, read_kind(run), take_event, &rd) < 0 || process_chunk(run) < 0)
			return -1;
	}
out_done:
	/* streams with no event of the kinds read count as read too */
	atomic_store(&run->prog.streams_read, done0 + (end - first));
	return 0;
}
