/* copyread: the binary COPY and binary row decoder of a run's events (see copyread.h). */
#include "miner/copyread.h"
#include "common/wire.h"
#include "miner/queue.h"

#include <stdbool.h>
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

int copyread_events(struct miner *m, const char *sql, copyread_each each, void *arg)
{
	PGresult *r;
	char *msg;
	int len;
	bool header = true;
	int rc = 0;

	r = PQexec(miner_db(m), sql);
	if (PQresultStatus(r) != PGRES_COPY_OUT)
		return miner_db_fail(m, "reading events", r);
	PQclear(r);
	while ((len = PQgetCopyData(miner_db(m), &msg, 0)) > 0) {
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
				rc = miner_fail(m, "reading events: not a binary COPY stream");
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
				rc = miner_fail(m, "reading events: unexpected row layout");
			continue; /* drain the COPY */
		}
		PQfreemem(msg);
		if (each(arg, ref, &e) < 0)
			rc = -1;   /* drain the COPY */
	}
	if (len == -2 && !rc)
		rc = miner_db_fail(m, "reading events", NULL);
	while ((r = PQgetResult(miner_db(m)))) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc)
			rc = miner_db_fail(m, "reading events", r);
		else
			PQclear(r);
	}
	return rc;
}
