/*
 * copyread: a run's events as PostgreSQL sends them in binary. An event row has seven fields,
 * stream_ref, kind, tid, ts_ns, dur_ns, stack_id, readier_tid, of widths 8, 1, 4, 8, 8, 4, 4
 * bytes (network order), as the worker's COPY and the standby's cursor select them. This module
 * decodes them: the fields of a binary result's row, the rows of a binary COPY (signature,
 * header, rows, trailer), and drives such a COPY on the worker's connection. It knows nothing
 * of runs: each event goes to a callback.
 */
#ifndef SM_COPYREAD_H
#define SM_COPYREAD_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

struct buf;
struct miner;
struct wire_event;

#define COPYREAD_FIELDS 7

/* Where decoded events go: the stream's id and the event. 0, or -1 (the error left on the miner)
 * to stop taking events. */
typedef int (*copyread_each)(void *arg, int64_t ref, const struct wire_event *e);

/* An event from the seven fields f of a binary row, len[i] bytes each. 0, or -1 when a field's
 * width is not the event row's. */
int copyread_fields(const unsigned char *const f[COPYREAD_FIELDS], const int len[COPYREAD_FIELDS], int64_t *ref,
		    struct wire_event *e);

/* An event from one row of a binary COPY (the field count, then each field's length and bytes),
 * n bytes at p. 0, or -1 when the row is not an event row. */
int copyread_row(const unsigned char *p, size_t n, int64_t *ref, struct wire_event *e);

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
int copyread_conn(PGconn *db, const char *sql, copyread_each each, void *arg, struct copyread_err *err);

/* Runs sql, a COPY (SELECT <an event row's fields>) TO STDOUT (FORMAT binary), on m's connection
 * and gives each event to each(arg, ...). After a failure the rest of the COPY is drained, so
 * that the connection stays usable. 0, or -1 with the error on m (the first one). */
int copyread_events(struct miner *m, const char *sql, copyread_each each, void *arg);

#endif
