/* partrun: a run's AOI extraction in parts, coordinated, merged, or done for another worker (see partrun.h). */
#include "miner/partrun.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "common/vec.h"
#include "miner/extract.h"
#include "miner/heartbeat.h"
#include "miner/parts.h"
#include "miner/queue.h"
#include "miner/runstate.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* The part's streams into the temporary table sm_part that extract_read() joins (analyzed: the
 * planner must see a part's few streams to read them through the index). */
static int part_fill(struct runstate *run, const struct parts_claim *c)
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
	struct runstate *run;
	int part;
	size_t first, end;
};

static int merge_entry(void *arg, const struct parts_entry *pe)
{
	struct merge *mg = arg;
	struct runstate *run = mg->run;
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
static int part_merge(struct runstate *run, int part, size_t per)
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

/* This worker takes its run's parts like any other and keeps their entries, waits for the parts
 * others have, then merges theirs. A part another worker took over from this one is dropped here. */
int partrun_coordinate(struct runstate *run, size_t per)
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
			if (part_fill(run, &c) < 0 || extract_read(run, first, end, true) < 0)
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

int partrun_execute(struct miner *m, const struct parts_claim *c)
{
	struct runstate run;
	struct beat *bt = NULL;
	struct buf b = BUF_INIT(PARTS_MAX_BYTES);
	int64_t t0 = util_now_mono_ns();
	int rc = -1, got;

	if (runstate_init(&run, m, 0, NULL, c->aoi, "extracting a part") < 0)
		goto out;
	run.kinds = c->kinds;
	if (!(bt = beat_open(m, run.id, &run.prog)))
		goto out;
	if (part_fill(&run, c) < 0 ||
	    runstate_select(&run, "SELECT s.id, s.symptom_tid, s.symptom_start_ns, s.symptom_end_ns,"
				 " s.role = 'baseline', coalesce(s.symptom_unit_type, ''), s.weight"
				 " FROM streams s JOIN sm_part p ON p.id = s.id ORDER BY s.id") < 0 ||
	    extract_read(&run, 0, run.nstreams, true) < 0)
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
	beat_free(bt);
	/* back to the queue: stopped or the database lost (a reader's connection, the worker's own
	 * still up), or failed (the third failure fails the part and its run) */
	if (rc < 0)
		parts_release(m, c, (miner_options(m)->cancel && *miner_options(m)->cancel) || miner_db_lost(m)
					    ? NULL : miner_error(m));
	runstate_release(&run);
	buf_release(&b);
	return rc;
}
