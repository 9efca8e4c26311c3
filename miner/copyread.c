/* copyread: the binary COPY and binary row decoder of a run's events (see copyread.h). */
#include "miner/copyread.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/wire.h"
#include "miner/queue.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The binary widths of an event row's fields, in the order of copyread.h. */
static const int event_widths[COPYREAD_FIELDS] = { 8, 1, 4, 8, 8, 4, 4 };

static inline int64_t be64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (int64_t)v;
}

static inline int32_t be32(const unsigned char *p)
{
	return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* An event row from its seven binary fields, each of its width in event_widths. */
static void decode_event(const unsigned char *const f[COPYREAD_FIELDS], int64_t *ref, struct wire_event *e)
{
	*ref = be64(f[0]);
	e->kind = f[1][0] == 'w' ? WIRE_WAIT : WIRE_RUN;
	e->tid = be32(f[2]);
	e->ts_ns = be64(f[3]);
	e->dur_ns = be64(f[4]);
	e->stack = (uint32_t)be32(f[5]);
	e->readier_tid = be32(f[6]);
}

int copyread_fields(const unsigned char *const f[COPYREAD_FIELDS], const int len[COPYREAD_FIELDS], int64_t *ref,
		    struct wire_event *e)
{
	for (int k = 0; k < COPYREAD_FIELDS; k++)
		if (len[k] != event_widths[k])
			return -1;
	decode_event(f, ref, e);
	return 0;
}

int copyread_row(const unsigned char *p, size_t n, int64_t *ref, struct wire_event *e)
{
	const unsigned char *f[COPYREAD_FIELDS];
	size_t off = 2;

	if (n < 2 || (p[0] << 8 | p[1]) != COPYREAD_FIELDS)
		return -1;
	for (int i = 0; i < COPYREAD_FIELDS; i++) {
		if (off + 4 > n || be32(p + off) != event_widths[i] || off + 4 + (size_t)event_widths[i] > n)
			return -1;
		f[i] = p + off + 4;
		off += 4 + (size_t)event_widths[i];
	}
	decode_event(f, ref, e);
	return 0;
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

int copyread_conn(PGconn *db, const char *sql, copyread_each each, void *arg, struct copyread_err *err)
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
		struct wire_event e;
		int64_t ref;

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
		if (rc || copyread_row(p, n, &ref, &e) < 0) {
			PQfreemem(msg);
			if (!rc)
				rc = other_fail(err, "reading events: unexpected row layout");
			continue; /* drain the COPY */
		}
		PQfreemem(msg);
		if (each(arg, ref, &e) < 0)
			rc = -1;   /* drain the COPY; each() left its error */
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

int copyread_events(struct miner *m, const char *sql, copyread_each each, void *arg)
{
	struct copyread_err err;

	if (copyread_conn(miner_db(m), sql, each, arg, &err) == 0)
		return 0;
	/* a failure of each() left its own message on m */
	return err.msg[0] ? miner_fail_state(m, err.sqlstate, "%s", err.msg) : -1;
}
