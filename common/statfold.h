/*
 * statfold: the frame statistics' deltas (stat_deltas, one row per stored batch, docs/ingest.md)
 * added into the days' totals (stat_streams, stat_frames, stat_calls). The same sums as the SQL
 * function sm_fold_stats(), made here: a fold of 100 batches of small streams holds two million
 * (call, count) pairs for some 35,000 distinct calls, which PostgreSQL's unnest and hash
 * aggregate took over a second to sum; summed here, each day's frame and call is written once.
 * Used by sm-ingest's background fold and by the miner before it reads the statistics.
 */
#ifndef SM_STATFOLD_H
#define SM_STATFOLD_H

#include <libpq-fe.h>
#include <stddef.h>

/*
 * Folds at most max_deltas of the oldest deltas no other folder holds (FOR UPDATE SKIP LOCKED),
 * in one transaction of its own on db (which must be in none). Returns how many it folded (0:
 * none left), or -1 with err (the transaction rolled back, the deltas still there).
 */
int statfold_run(PGconn *db, int max_deltas, char *err, size_t errlen);

#endif
