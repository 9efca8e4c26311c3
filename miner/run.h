/*
 * run: the pipeline of a mining run. A run selects trace streams from
 * PostgreSQL, extracts each stream's AOI (on all cores; extract.h, in parts
 * across workers with partrun.h), applies the frame filters, collapses
 * identical stacks, mines costly maximal patterns of wait and run stacks
 * separately, clusters them, and stores the collapsed stacks, the patterns,
 * the clusters and the run's counts and timings (results.h), beating all the
 * while (heartbeat.h). Runs come from the queue (queue.h); miner_work()
 * (worker.h) is a worker's loop.
 */
#ifndef SM_RUN_H
#define SM_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "miner/queue.h"

/* Execute a taken run to status done or failed (the error is stored with the
 * run and also left in miner_error()). Returns 0 when done, -1 when failed,
 * 1 when cancelled (the run went back to the queue), 2 when the database went
 * away and the run was queued again for another attempt (queue.h). */
int miner_execute(struct miner *m, int64_t run_id, const struct run_params *p);
/* How long a run whose database went away waits for it before leaving the run to its lease. */
#define RUN_DB_WAIT_S 60

#endif
