/*
 * worker: a worker's loop. Between runs it queues the due schedules' runs and delivers the due
 * alerts (watch.h); it takes parts of other workers' runs before new runs (partrun.h), executes
 * the runs it takes (run.h) and delivers a finished run's alerts at once. Everything it does is
 * logged; a failure of one run or part never stops it.
 */
#ifndef SM_WORKER_H
#define SM_WORKER_H

#include <stdbool.h>

struct miner;

/*
 * Takes queued runs and executes them one after another until the cancel flag of the options is
 * set (also when a run is in progress: it goes back to the queue). once: return when the queue is
 * empty. Returns 0, or -1 when (with once) a run could not be taken.
 */
int miner_work(struct miner *m, bool once);

#endif
