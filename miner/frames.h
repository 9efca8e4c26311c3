/*
 * frames: what clustering a run needs from the database (the clusterer itself
 * reads and writes none): the frames' names and their database-wide
 * statistics (mining.md section 5), folded first so that the run's own streams
 * are counted, and the ids of the rows of its clusters and problems.
 */
#ifndef SM_MINER_FRAMES_H
#define SM_MINER_FRAMES_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "clusterer/sim.h"

/* Folds the statistics ingest appended since its last fold (common/statfold): a run started
 * right after its streams arrived counts them. 0, or -1 with err. */
int frames_fold(PGconn *db, char *err, size_t errlen);

/* Names and statistics of the frames ids[0..n) (repeats allowed) into ft. 0, or -1 with err. */
int frames_load(PGconn *db, const uint32_t *ids, size_t n, struct sim_frames *ft, char *err, size_t errlen);

/* n ids of table ("clusters" or "problems") from its identity's sequence, as the miner takes
 * patterns'; arg is the PGconn. A runclust_ids_fn. 0, or -1 with err. */
int frames_take_ids(void *arg, const char *table, size_t n, int64_t *ids, char *err, size_t errlen);

#endif
