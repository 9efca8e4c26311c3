/* runstate: a run's shared state, set up, released, and its streams loaded (see runstate.h). */
#include "miner/runstate.h"
#include "common/arena.h"
#include "common/db.h"
#include "common/intern.h"
#include "miner/queue.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int runstate_init(struct runstate *run, struct miner *m, int64_t id, const struct run_params *p, const char *aoi,
		  const char *phase)
{
	memset(run, 0, sizeof(*run));
	run->m = m;
	run->id = id;
	run->p = p;
	run->kinds = p ? p->kinds : RUN_KINDS_BOTH;
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

void runstate_release(struct runstate *run)
{
	for (int i = 0; run->aoi && i < run->threads; i++)
		aoi_free(run->aoi[i]);
	runstate_close_readers(run);
	free(run->aoi);
	vec_free(&run->events);
	vec_free(&run->chunk);
	vec_free(&run->entries);
	vec_free(&run->bentries);
	arena_free(run->arena);
}

void runstate_close_readers(struct runstate *run)
{
	for (int i = 0; i < RUNSTATE_MAX_READERS; i++) {
		if (run->readers[i])
			PQfinish(run->readers[i]);
		run->readers[i] = NULL;
	}
}

int runstate_select(struct runstate *run, const char *sql)
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
