/* copyread: the binary COPY and binary row decoder of a run's events (see copyread.h). */
#include "miner/copyread.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/evpack.h"
#include "common/wire.h"
#include "miner/queue.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static inline int32_t be32(const unsigned char *p)
{
	return (int32_t)(uint32_t)evpack_be(p, 4);
}

int copyread_chunk(int64_t ref, const unsigned char *data, size_t len, char kind, copyread_each each, void *arg)
{
	long n = evpack_count(len);

	if (n < 0)
		return -1;
	for (long i = 0; i < n; i++) {
		struct evpack_event pe;
		struct wire_event e;

		if (evpack_get(data + (size_t)i * EVPACK_RECORD, &pe) < 0)
			return -1;
		if (kind && pe.kind != kind)
			continue;
		e.kind = pe.kind == 'w' ? WIRE_WAIT : WIRE_RUN;
		e.tid = pe.tid;
		e.ts_ns = pe.ts_ns;
		e.dur_ns = pe.dur_ns;
		e.stack = (uint32_t)pe.stack;
		e.readier_tid = pe.readier_tid;
		if (each(arg, ref, &e) < 0)
			return -2;
	}
	return 0;
}

int copyread_row(const unsigned char *p, size_t n, char kind, copyread_each each, void *arg)
{
	size_t len;

	/* two fields: stream_ref (8 bytes), data (its length, up to a chunk's) */
	if (n < 2 + 4 + 8 + 4 || (p[0] << 8 | p[1]) != 2 || be32(p + 2) != 8)
		return -1;
	len = (size_t)(uint32_t)be32(p + 14);
	if (len != n - 18)
		return -1;
	return copyread_chunk((int64_t)evpack_be(p + 6, 8), p + 18, len, kind, each, arg);
}

int copyread_fail(struct copyread_err *err, PGconn *db, const char *what, PGresult *r)
{
	const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	if (!st && PQstatus(db) != CONNECTION_OK)
		st = "08006";
	snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", st ? st : "");
	db_errcpy(err->msg, sizeof(err->msg), what, r ? PQresultErrorMessage(r) : PQerrorMessage(db));
	PQclear(r);
	return -1;
}

static int other_fail(struct copyread_err *err, const char *msg)
{
	snprintf(err->msg, sizeof(err->msg), "%s", msg);
	err->sqlstate[0] = '\0';
	return -1;
}

int copyread_ids(struct buf *b, const int64_t *refs, size_t n)
{
	buf_putc(b, '{');
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			buf_putc(b, ',');
		buf_put_i64(b, refs[i]);
	}
	return buf_putc(b, '}');
}

int copyread_conn(PGconn *db, const char *sql, char kind, copyread_each each, void *arg,
		  struct copyread_err *err)
{
	PGresult *r;
	char *msg;
	int len;
	bool header = true;
	int rc = 0;

	err->msg[0] = '\0';
	err->sqlstate[0] = '\0';
	r = PQexec(db, sql);
	if (PQresultStatus(r) != PGRES_COPY_OUT)
		return copyread_fail(err, db, "reading events", r);
	PQclear(r);
	while ((len = PQgetCopyData(db, &msg, 0)) > 0) {
		const unsigned char *p = (const unsigned char *)msg;
		size_t n = (size_t)len;

		if (header) {
			/* signature, flags, header extension (its length read from the stream: within the
			 * message) */
			if (n < 19 || memcmp(p, "PGCOPY\n\377\r\n\0", 11) != 0 ||
			    (uint32_t)be32(p + 15) > n - 19) {
				PQfreemem(msg);
				rc = other_fail(err, "reading events: not a binary COPY stream");
				header = false;
				continue; /* drain the COPY */
			}
			n -= 19 + (size_t)(uint32_t)be32(p + 15);
			p += 19 + (size_t)(uint32_t)be32(p + 15);
			header = false;
			if (n == 0) {
				PQfreemem(msg);
				continue;
			}
		}
		if (n == 2 && p[0] == 0xff && p[1] == 0xff) { /* trailer */
			PQfreemem(msg);
			continue;
		}
		if (!rc) {
			int got = copyread_row(p, n, kind, each, arg);

			if (got == -1)
				rc = other_fail(err, "reading events: unexpected row layout");
			else if (got < 0)
				rc = -1; /* each() left its error */
		}
		PQfreemem(msg); /* after a failure: drain the COPY */
	}
	if (len == -2 && !rc)
		rc = copyread_fail(err, db, "reading events", NULL);
	while ((r = PQgetResult(db))) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc)
			rc = copyread_fail(err, db, "reading events", r);
		else
			PQclear(r);
	}
	return rc;
}

int copyread_events(struct miner *m, const char *sql, char kind, copyread_each each, void *arg)
{
	struct copyread_err err;

	if (copyread_conn(miner_db(m), sql, kind, each, arg, &err) == 0)
		return 0;
	/* a failure of each() left its own message on m */
	return err.msg[0] ? miner_fail_state(m, err.sqlstate, "%s", err.msg) : -1;
}
