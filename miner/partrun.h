/*
 * partrun: a run's AOI extraction in parts, on the run's side (parts.h keeps the queue of parts
 * and their packed results in the database and knows nothing of runs). The coordinator - the
 * worker that took the run - queues the parts, extracts those it takes itself into the run's
 * entries, waits for the others and merges their packed results into the entries; any worker
 * extracts a part it took of another worker's run and stores its result packed.
 */
#ifndef SM_PARTRUN_H
#define SM_PARTRUN_H

#include <stddef.h>

struct miner;
struct parts_claim;
struct runstate;

/* The coordinator's side: run's selected streams cut into parts of per streams, extracted here
 * and by other workers, every part's entries in the run's at the end (run->split set once the
 * parts are queued: the caller drops them when the run ends). 0, or -1 with the error on the
 * run's miner. */
int partrun_coordinate(struct runstate *run, size_t per);

/* Another worker's part c, taken by parts_claim(): its streams' AOI extracted and stored packed,
 * under a heartbeat of its own. 0, 1 when the part is no longer this worker's (parts_done()), or
 * -1 with the error on m (the part released back to the queue). */
int partrun_execute(struct miner *m, const struct parts_claim *c);

#endif
