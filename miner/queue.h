/*
 * queue: the queue of mining runs. Runs are rows of the table runs with a
 * status (queued, running, done, failed); workers on any machine take queued
 * ones with FOR UPDATE SKIP LOCKED, a run whose worker stops beating is taken
 * again, and LISTEN/NOTIFY wakes idle workers. The handle also carries the
 * connection and the error message a run's pipeline (run.h) works with.
 */
#ifndef SM_QUEUE_H
#define SM_QUEUE_H

#include <libpq-fe.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "miner/params.h"

struct arena;
struct miner;
struct webhook_nets;

struct miner_opts {
	const char *conninfo;     /* NULL: PG* environment */
	const char *read_conninfo; /* events read here when it has caught up (a standby); NULL: conninfo */
	int threads;              /* AOI extraction and mining threads; 0: one per core */
	bool progress;            /* progress lines on stderr */
	size_t max_patterns;      /* per kind; a run past it fails (raise the threshold) */
	const volatile sig_atomic_t *cancel; /* non-zero: stop at the next step, requeue the run */
	int lease_s;              /* a run or part whose worker has not beaten for this long is taken again */
	size_t part_streams;      /* a run of more streams is cut into parts of this many (parts.h); 0: never */
	const struct webhook_nets *webhook_allow; /* internal addresses alerts may go to (webhook.h); NULL: none */
};

#define MINER_LEASE_S 60
#define MINER_PART_STREAMS 1000

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
/* A run taken by this worker: done (with its last timings), or back to a status (queued when
 * cancelled, failed with error). miner_finish() returns 0, or -1 when another worker took it over. */
int miner_finish(struct miner *m, int64_t id, int64_t cluster_ms, int64_t total_ms);
void miner_set_status(struct miner *m, int64_t id, const char *status, const char *error);
/* A run may be taken this many times in all (a worker that died, the database gone). */
#define MINER_MAX_ATTEMPTS 3
/* Whether the last failure on the worker's connection was the database going away (the
 * connection lost, a shutdown or a server not yet accepting connections), not the run's own. */
bool miner_db_lost(const struct miner *m);
/*
 * A run taken by this worker whose database went away: waits for the database (up to wait_s
 * seconds, or the cancel flag), then queues the run again with why in its last_retry, or fails
 * it for good when it has had MINER_MAX_ATTEMPTS attempts. Returns 1 when queued again, 0 when
 * failed, -1 when the database did not come back (the run's lease then gives it to a worker).
 */
int miner_requeue_lost(struct miner *m, int64_t id, const char *why, int wait_s);
/* Takes back a run this process queued again (sm-miner run): 1 when taken, 0 when another
 * worker has it, -1 on error. */
int miner_retake(struct miner *m, int64_t id);

/* Deletes a run that is not running, with its stacks, patterns and clusters (an analyst's
 * signatures keep their frames and remember the cluster's number). Returns 0, or -1 (database, err
 * set), -2 (the run is running), -3 (no such run). */
int miner_delete_run(PGconn *db, int64_t run_id, char *err, size_t errlen);

/* ---- for the run pipeline (run.c) ---- */

/* The handle's connection and options (owned by the handle). */
PGconn *miner_db(struct miner *m);
/* The connection for reads that may lag (read_conninfo, connected when first needed), or NULL when
 * none is given or it cannot be used now: unreachable (a warning is logged), or passed over for
 * 30 s after miner_read_skip() (a standby found behind, or failing). */
PGconn *miner_read_db(struct miner *m);
void miner_read_skip(struct miner *m);
const struct miner_opts *miner_options(const struct miner *m);
/* The connection string it was opened with ("" for the PG* environment). */
const char *miner_conninfo(const struct miner *m);
/* "host:pid", the name this worker takes runs under. */
const char *miner_worker(const struct miner *m);
#define MINER_ERRLEN 1024
/* The error message's buffer (MINER_ERRLEN bytes), for helpers that write it themselves. */
char *miner_errbuf(struct miner *m);
/* Sets the error message; returns -1. */
int miner_fail(struct miner *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A database failure about `what` (r, or the connection when NULL; r is cleared); returns -1. */
int miner_db_fail(struct miner *m, const char *what, PGresult *r);
/* A database failure met on another connection (a reader's): the message, and its SQLSTATE for
 * miner_db_lost() ("" for none); returns -1. */
int miner_fail_state(struct miner *m, const char *sqlstate, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Runs sql (no parameters); 0, or -1 with the error set. */
int miner_exec(struct miner *m, const char *sql);

#endif
