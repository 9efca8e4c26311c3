/*
 * db: PostgreSQL helpers shared by every program: connecting, applying and
 * checking the embedded schema migrations, and small result accessors.
 */
#ifndef SM_DB_H
#define SM_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* The SQL expression that makes the event partitions from yesterday to the configured days ahead
 * (settings.partition_days_ahead), for every maintenance (sm-ingest's, sm-admin's). */
#define DB_ENSURE_PARTITIONS \
	"sm_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 1," \
	" 2 + (SELECT value::integer FROM settings WHERE key = 'partition_days_ahead'))"

/* Connects with `conninfo` (NULL or "": the standard PG* environment variables).
 * Returns the connection, or NULL with the reason in err. Caller frees with PQfinish(). */
PGconn *db_connect(const char *conninfo, char *err, size_t errlen);
/*
 * Whether c can be used, made again when the server closed it (a crash, a failover to a
 * standby promoted in its place: with a multi-host conninfo and target_session_attrs=read-write
 * PQreset() finds the new primary). An idle connection whose socket is readable has an end of
 * file or an error waiting: it is read first, so that a dead connection is noticed before a
 * request uses it instead of by the request's failure.
 */
bool db_alive(PGconn *c);
/* The version the embedded migrations bring the schema to. */
int db_schema_target(void);
/* Current schema version (0 when never migrated). Returns 0 or -1 with err set. */
int db_schema_version(PGconn *c, int *version, char *err, size_t errlen);
/* 0 when the schema is exactly at db_schema_target(); -1 with a message telling
 * the operator what to do otherwise. Servers call this before serving. */
int db_schema_check(PGconn *c, char *err, size_t errlen);
/* Applies the missing migrations, each in its own transaction, under an advisory
 * lock so concurrent runs are safe. *applied: how many. Returns 0 or -1 with err. */
int db_migrate(PGconn *c, int *applied, char *err, size_t errlen);
/* Run a statement without parameters that returns no rows of interest. 0 or -1 with err. */
int db_exec(PGconn *c, const char *sql, char *err, size_t errlen);
/* Run a statement with text parameters that returns no rows. 0, or -1 with "WHAT: the server's
 * message" in err. */
int db_command(PGconn *c, const char *sql, int nparams, const char *const *params, const char *what,
	       char *err, size_t errlen);
/* Run a query with text parameters: its rows, or NULL with "WHAT: the server's message" in err. */
PGresult *db_query(PGconn *c, const char *sql, int nparams, const char *const *params, const char *what,
		   char *err, size_t errlen);
/*
 * Runs statement no (0..63, a numbering of the caller's) with text parameters, prepared as name on
 * the connection the first time it runs there: after a PQreset() (a restart, a failover) the new
 * session prepares again. Which are prepared is remembered per connection, so that none is
 * executed unprepared (a server log line "prepared statement ... does not exist" per connection).
 * Returns the result whatever its status (NULL: out of memory); a failed PQprepare()'s result.
 */
PGresult *db_exec_prepared(PGconn *c, int no, const char *name, const char *sql, int nparams,
			   const char *const *params);
/* Ends what the connection may still be busy with after a failure: results not read, a COPY out
 * read to its end, a COPY in abandoned. The connection is then ready for a command (a transaction
 * it is in stays open: the caller rolls it back). */
void db_drain(PGconn *c);
/* The first column of the first row of a result as int64 (0 when NULL). */
int64_t db_get_i64(const PGresult *r, int row, int col);
/* Parse an integer array as PostgreSQL prints it ("{1,2,3}") into out (room for max).
 * Returns the count, or -1 when it is not such an array or has more than max items. */
int db_parse_int_array(const char *s, int32_t *out, int max);
/* A big-endian 32-bit word of PostgreSQL's binary format. */
static inline uint32_t db_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
/*
 * A one-dimensional integer[] in PostgreSQL's binary form (a result column read with
 * resultFormat 1): ndim, flags, element type, then per dimension its length and lower bound, then
 * per element its length (4) and value. Returns the element count with *at at the first element's
 * length (0 for an empty array), or -1 when it is anything else (another element type, a NULL
 * element, a length that does not add up).
 */
long db_int4_array(const PGresult *r, int row, int col, const unsigned char **at);
/* The next element (db_int4_array() checked each is 4 bytes long). */
static inline int32_t db_int4_next(const unsigned char **at)
{
	int32_t v = (int32_t)db_be32(*at + 4);

	*at += 8;
	return v;
}
/* Begin a one-dimensional integer[] of n elements in the binary form, for a parameter sent with
 * format 1; the n elements follow, each by db_put_int4_elem(). 0 or -1 (buffer full). */
int db_put_int4_array(struct buf *b, size_t n);
int db_put_int4_elem(struct buf *b, int32_t v);
/* Append s[0..n) as one quoted element of a PostgreSQL array literal. 0 or -1 (buffer full). */
int db_put_array_str(struct buf *b, const char *s, size_t n);
/* Copy the libpq error message without its trailing newline. */
void db_errcpy(char *err, size_t errlen, const char *what, const char *pgmsg);

#endif
