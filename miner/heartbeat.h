/*
 * heartbeat: keeps a run (or the parts a worker has) alive while the pipeline works. A thread of
 * its own beats once a second on a connection of its own: the run's heartbeat_at, which keeps its
 * lease from running out, and its progress (a JSON object the dashboard shows), which it reads
 * from a struct beat_progress that the pipeline's threads update. A lost connection is reset at
 * the next beat: a run that stopped beating would be taken over by another worker.
 */
#ifndef SM_HEARTBEAT_H
#define SM_HEARTBEAT_H

#include <stdint.h>

struct miner;

/* How far a run is: written by the pipeline, read by the heartbeat (atomics, no lock). */
struct beat_progress {
	_Atomic(const char *) phase;
	_Atomic uint64_t streams_read, streams_total, aoi_events, stacks, patterns;
};

struct beat;

/* Starts beating for run_id (0: the running parts of m's worker, of other workers' runs), reading
 * prog, which must outlive the handle. Returns the handle (caller frees with beat_free()), or NULL
 * with the error on m. */
struct beat *beat_open(struct miner *m, int64_t run_id, struct beat_progress *prog);
/* Stops the beats and closes their connection. NULL: nothing. */
void beat_free(struct beat *bt);

#endif
