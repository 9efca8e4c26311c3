/* extract: a run's events read and their AOI extracted on all cores (see extract.h). */
#include "miner/extract.h"
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

struct aoi_job {
	struct runstate *run;
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
	struct runstate *run = job->run;
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

static int process_chunk(struct runstate *run, enum aoi_mode mode)
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
static int read_events_copy(struct runstate *run, struct reader *rd, bool part)
{
	const char *sql;

	/* the selection's bounds let the index scan start at its streams, not read past the earlier
	 * ones, and travel to the shards with their foreign scans. (Bounds on received_at as well
	 * would leave out whole days, but make the planner's estimate small enough to pick a nested
	 * loop over the selection: twice the time for a run in one piece) */
	sql = part ? "COPY (SELECT e.stream_ref, e.kind, e.tid, e.ts_ns, e.dur_ns, e.stack_id,"
		     " coalesce(e.readier_tid, 0) FROM events e JOIN sm_part s ON s.id = e.stream_ref"
		     " WHERE e.stream_ref BETWEEN (SELECT min(id) FROM sm_part) AND (SELECT max(id) FROM sm_part)"
		     " ORDER BY e.stream_ref) TO STDOUT (FORMAT binary)"
		   : "COPY (SELECT e.stream_ref, e.kind, e.tid, e.ts_ns, e.dur_ns, e.stack_id,"
		     " coalesce(e.readier_tid, 0) FROM events e JOIN sm_sel s ON s.id = e.stream_ref"
		     " WHERE e.stream_ref BETWEEN (SELECT min(id) FROM sm_sel) AND (SELECT max(id) FROM sm_sel)"
		     " ORDER BY e.stream_ref) TO STDOUT (FORMAT binary)";
	return copyread_events(run->m, sql, take_event, rd);
}

/* From the standby of --db-read once it has caught up, else (none given, unreachable, behind, or
 * failing in the middle) from the worker's own connection, the standby's part of the work undone
 * first. */
int extract_read(struct runstate *run, size_t first, size_t end, bool part)
{
	struct miner *m = run->m;
	struct reader rd = { run, first, end, false };
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
		if (rc == 1 && standby_read(m, rdb, run->refs + first, end - first, take_event, &rd) == 0 &&
		    process_chunk(run, run->mode) == 0) {
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
