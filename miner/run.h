/*
 * run: mining runs. A run selects trace streams from PostgreSQL, extracts
 * each stream's AOI (on all cores), applies the frame filters, collapses
 * identical stacks, mines costly maximal patterns of wait and run stacks
 * separately, and stores the collapsed stacks, the patterns and the run's
 * counts and timings. Runs are rows with a status; workers on any machine
 * take queued ones with FOR UPDATE SKIP LOCKED.
 */
#ifndef SM_RUN_H
#define SM_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "params.h"
#include <libpq-fe.h>

struct arena;
struct miner;

struct miner_opts {
	const char *conninfo;     /* NULL: PG* environment */
	int threads;              /* AOI extraction and mining threads; 0: one per core */
	bool progress;            /* progress lines on stderr */
	size_t max_patterns;      /* per kind; a run past it fails (raise the threshold) */
	const volatile sig_atomic_t *cancel; /* non-zero: stop at the next step, requeue the run */
};

void miner_opts_default(struct miner_opts *o);
/* Connects; NULL with the reason in err. Caller frees. */
struct miner *miner_open(const struct miner_opts *o, char *err, size_t errlen);
void miner_free(struct miner *m);   /* NULL-safe */
const char *miner_error(const struct miner *m);

/* Queue a run (status queued) and wake the workers. Returns 0 and *run_id, or -1. */
int miner_enqueue(struct miner *m, const struct run_params *p, int64_t *run_id);
/* The same on a connection of the caller's (servers): 0, or -1 with err. */
int miner_enqueue_db(PGconn *db, const struct run_params *p, int64_t *run_id, char *err, size_t errlen);
/* Create a run already taken by this process (sm-miner run). */
int miner_create_running(struct miner *m, const struct run_params *p, int64_t *run_id);
/* Take the oldest queued run (or one whose worker stopped beating). Returns 1 and
 * fills *run_id and *p (strings in a) when there was one, 0 when none, -1 on error. */
int miner_claim(struct miner *m, struct arena *a, int64_t *run_id, struct run_params *p);
/* Wait up to timeout_ms for a new run to be queued (LISTEN/NOTIFY). 0 or -1. */
int miner_wait(struct miner *m, int timeout_ms);
/* Execute a taken run to status done or failed (the error is stored with the
 * run and also left in miner_error()). Returns 0 when done, -1 when failed,
 * 1 when cancelled (the run went back to the queue). */
int miner_execute(struct miner *m, int64_t run_id, const struct run_params *p);

/*
 * A worker: take queued runs and execute them one after another until the
 * cancel flag of the options is set (also when a run is in progress: it goes
 * back to the queue). once: return when the queue is empty. Logs each run.
 * Returns 0, or -1 when (with once) a run could not be taken.
 */
int miner_work(struct miner *m, bool once);

#endif
