/*
 * store: writes validated trace streams to PostgreSQL. Frames and stacks are
 * interned (shared id cache first, one set-based statement for what is new);
 * a batch of streams is stored in one transaction: stream rows, events by
 * COPY, and the frame statistics clustering needs. A stream already stored
 * (same stream_id) is reported as a duplicate and nothing of it is written.
 */
#ifndef SM_STORE_H
#define SM_STORE_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/wire.h"

struct idcache;

enum store_result { STORE_ACCEPTED = 1, STORE_DUPLICATE = 2 };

struct store;

/* Connects and prepares statements. Returns NULL with the reason in err.
 * Caller frees. `cache` is shared, not owned. */
struct store *store_open(const char *conninfo, struct idcache *cache, char *err, size_t errlen);
void store_free(struct store *st);   /* NULL-safe */
/* Why store_streams() stored nothing (store_error() says more); the batch may be sent again
 * whatever the cause. */
enum store_failure {
	STORE_EDB = -1,        /* the database failed or could not be reached */
	STORE_EBUSY = -4,      /* frames or stacks changed meanwhile: being collected at each try, or an id
	                        * the batch inserted or looked up gone again */
	STORE_EINTERNAL = -5,  /* this server failed: out of memory */
};

/*
 * Store n streams atomically: all of them (each accepted or duplicate, in
 * results[i]) or none. Returns 0, or an enum store_failure with store_error() set.
 */
int store_streams(struct store *st, const struct wire_stream *const *streams, size_t n,
		  enum store_result *results);
const char *store_error(const struct store *st);
/* Deltas one store_fold_stats() folds at most. */
#define STORE_FOLD_MAX 200
/* Fold pending statistics deltas into the totals, the oldest STORE_FOLD_MAX at most.
 * Returns how many deltas were folded, or -1. */
int store_fold_stats(struct store *st);
/* The connection, for other queries of the same worker (auth). Reconnects if it was lost;
 * NULL if the database cannot be reached. */
PGconn *store_conn(struct store *st);
/* What the calls since the last call of this learnt of the database: 1 it answered (a connection
 * that works), -1 it did not (could not connect, or the connection broke), 0 they did not ask it. */
int store_db_seen(struct store *st);
/* Puts the newest frames and stacks of the database (at most max_frames and max_stacks) into the
 * shared id cache, so that a server just started maps what the fleet sends without asking the
 * database: *frames and *stacks, how many. Returns 0 or -1 (store_error()). */
int store_warm_cache(struct store *st, size_t max_frames, size_t max_stacks, int64_t *frames, int64_t *stacks);
/* Create the event partitions for the coming days and apply retention. Returns 0 or -1. */
int store_maintain(struct store *st);

/* A guard agent's report about itself (POST /api/v1/agents/report, docs/wire-format.md). */
struct agent_report {
	char host[256], exe[4097], build_id[129], mode[8], agent_version[65], app[256];
	char collector[8];            /* "host" or "process" */
	int64_t pid, started_ns;
	int64_t units, violations, drops, spool_backlog, ship_errors;
	bool exiting;
};

/* Records it: the process's row (its counters as reported) and the host's violations and units of
 * this hour (what grew since the last report). Returns 0, or -1 (store_error()). */
int store_report(struct store *st, const struct agent_report *r);
/* The settings pushed to the agents of app (agent_settings: the app's row over '*'), as a JSON
 * object appended to out ({} when none). Returns 0, or -1 (store_error()). */
int store_agent_settings(struct store *st, const char *app, struct buf *out);

#endif
