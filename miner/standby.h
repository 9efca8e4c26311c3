/*
 * standby: reading a run's events from a standby (sm-miner --db-read), so that mining's long
 * reads leave the primary alone. Only a standby that has replayed what the primary had committed
 * when the streams were selected is read; the caller falls back to the primary otherwise. A
 * standby has no temporary tables: the streams go to it as an array, through a cursor.
 */
#ifndef SM_STANDBY_H
#define SM_STANDBY_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "miner/copyread.h"

struct miner;

/* Whether the read connection rdb (a standby) has replayed everything the worker's connection
 * (the primary) has committed: 1, 0 when it is still behind after 30 s (or unreachable, or the
 * run is cancelled), -1 with the error on m on a failure of the primary. A primary on the read
 * side is never behind. */
int standby_caught_up(struct miner *m, PGconn *rdb);

/* The events of the streams refs[0 .. n) (ascending, n > 0) - of one kind, WIRE_WAIT's 'w' or
 * WIRE_RUN's 'r', or of both for kind 0 - from rdb, in one read-only
 * transaction, each given to each(arg, ...) grouped by stream in the order of refs. 0, or -1
 * with the error on m (the transaction rolled back). */
int standby_read(struct miner *m, PGconn *rdb, const int64_t *refs, size_t n, char kind, copyread_each each,
		 void *arg);

#endif
