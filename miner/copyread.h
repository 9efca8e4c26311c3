/*
 * copyread: a run's events as PostgreSQL sends them in binary. The worker's COPY and the standby's
 * cursor select the chunks of event_chunks (sql/030_event_chunks.sql) as rows of two fields,
 * stream_ref (8 bytes, network order) and data (records of common/evpack.h). This module decodes
 * them: a chunk's records, the rows of a binary COPY (signature, header, rows, trailer), and drives
 * such a COPY on the worker's connection. It knows nothing of runs: each event goes to a callback,
 * with its stack as stacks.id.
 */
#ifndef SM_COPYREAD_H
#define SM_COPYREAD_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

struct buf;
struct miner;
struct wire_event;

/* Where decoded events go: the stream's id and the event. 0, or -1 (the error left on the miner)
 * to stop taking events. */
typedef int (*copyread_each)(void *arg, int64_t ref, const struct wire_event *e);

/* The events of kind ('w', 'r', or 0 for both) among the records of one chunk of stream ref, len
 * bytes at data, each to each(). 0; -1 when data is not a chunk (its length, a kind neither 'r'
 * nor 'w'); -2 when each() stopped. */
int copyread_chunk(int64_t ref, const unsigned char *data, size_t len, char kind, copyread_each each, void *arg);

/* copyread_chunk() of one row of a binary COPY (the field count, then each field's length and
 * bytes), n bytes at p. 0, -1 when the row is not a chunk's row, -2 when each() stopped. */
int copyread_row(const unsigned char *p, size_t n, char kind, copyread_each each, void *arg);

/* Why a COPY on a connection of its own failed: the message, and the SQLSTATE of a database error
 * ("" for none; "08006" for a connection that broke), which tells a lost database from a bad
 * statement. */
struct copyread_err {
	char msg[1024];
	char sqlstate[6];
};

/* A failure about `what` on db: the message into err, the SQLSTATE (r's, or "08006" for a
 * connection that broke); r cleared. Returns -1. */
int copyread_fail(struct copyread_err *err, PGconn *db, const char *what, PGresult *r);

/* The streams refs[0 .. n) as a bigint[] literal, for a parameter, into b. 0, or -1 (b's error). */
int copyread_ids(struct buf *b, const int64_t *refs, size_t n);

/* copyread_events() on the connection db, for a thread that has its own: a failure of the COPY
 * is described in *err (msg "" when each() stopped it: each() keeps its own). 0 or -1. */
int copyread_conn(PGconn *db, const char *sql, char kind, copyread_each each, void *arg,
		  struct copyread_err *err);

/* Runs sql, a COPY (SELECT stream_ref, data FROM event_chunks ...) TO STDOUT (FORMAT binary), on
 * m's connection and gives each event of kind (0: both) to each(arg, ...). After a failure the rest of the COPY is drained, so
 * that the connection stays usable. 0, or -1 with the error on m (the first one). */
int copyread_events(struct miner *m, const char *sql, char kind, copyread_each each, void *arg);

#endif
