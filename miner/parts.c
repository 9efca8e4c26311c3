/* parts: a run's AOI extraction as parts any worker takes (see parts.h). */
#include "miner/parts.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/wire.h"
#include "miner/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[4] = { 'S', 'M', 'P', 'E' };

static void put_le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* A bigint of a binary result (network order). */
static uint64_t get_be64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

void parts_pack_begin(struct buf *b)
{
	buf_append(b, MAGIC, sizeof(MAGIC));
}

void parts_pack(struct buf *b, const struct parts_entry *e)
{
	unsigned char p[PARTS_ENTRY_BYTES];

	put_le(p, (uint64_t)e->stream_ref, 8);
	put_le(p + 8, (uint64_t)e->cost, 8);
	put_le(p + 16, e->stack, 4);
	put_le(p + 20, e->events, 4);
	p[24] = e->kind == WIRE_WAIT ? 'w' : 'r';
	buf_append(b, p, sizeof(p));
}

int parts_unpack(const unsigned char *p, size_t n, size_t *pos, struct parts_entry *e)
{
	if (*pos == 0) {
		if (n < sizeof(MAGIC) || memcmp(p, MAGIC, sizeof(MAGIC)) != 0)
			return -1;
		*pos = sizeof(MAGIC);
	}
	if (*pos == n)
		return 0;
	if (*pos > n || n - *pos < PARTS_ENTRY_BYTES)
		return -1;
	p += *pos;
	if (p[24] != 'r' && p[24] != 'w')
		return -1;
	e->stream_ref = (int64_t)get_le(p, 8);
	e->cost = (int64_t)get_le(p + 8, 8);
	e->stack = (uint32_t)get_le(p + 16, 4);
	e->events = (uint32_t)get_le(p + 20, 4);
	e->kind = p[24] == 'w' ? WIRE_WAIT : WIRE_RUN;
	*pos += PARTS_ENTRY_BYTES;
	return 1;
}

/* ---- the queue ---- */

int parts_create(struct miner *m, int64_t run_id, const int64_t *refs, size_t n, size_t per_part)
{
	struct buf arr = BUF_INIT(0);
	char idbuf[24], per[24];
	const char *params[3] = { idbuf, NULL, per };
	const char *own[2] = { idbuf, miner_worker(m) };
	PGresult *r;
	int nparts;

	if (per_part == 0)
		return miner_fail(m, "parts: 0 streams per part");
	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)run_id);
	snprintf(per, sizeof(per), "%zu", per_part);
	buf_putc(&arr, '{');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(&arr, ',');
		buf_put_i64(&arr, refs[i]);
	}
	if (buf_putc(&arr, '}') < 0) {
		buf_release(&arr);
		return miner_fail(m, "parts: out of memory");
	}
	params[1] = buf_cstr(&arr);
	/* A coordinator that died leaves its run's parts behind: those others extracted (or are
	 * extracting) for the same streams stay, the rest go - its own results went with it. */
	if (miner_exec(m, "BEGIN") < 0) {
		buf_release(&arr);
		return -1;
	}
	/* only while the run is this worker's: one that took it over owns its parts */
	r = PQexecParams(miner_db(m), "SELECT 1 FROM runs WHERE id = $1 AND worker = $2 AND status = 'running'"
				      " FOR UPDATE", 2, NULL, own, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			miner_db_fail(m, "queueing the run's parts", r);      /* clears r */
		else {
			PQclear(r);
			miner_fail(m, "run %s was taken over by another worker", idbuf);
		}
		PQclear(PQexec(miner_db(m), "ROLLBACK"));
		buf_release(&arr);
		return -1;
	}
	PQclear(r);
	r = PQexecParams(miner_db(m),
			 "WITH s AS (SELECT (u.o - 1) / $3::integer AS part, array_agg(u.ref ORDER BY u.o) AS refs"
			 "   FROM unnest($2::bigint[]) WITH ORDINALITY AS u(ref, o) GROUP BY 1)"
			 " DELETE FROM run_parts p WHERE run_id = $1 AND NOT EXISTS (SELECT 1 FROM s"
			 "   WHERE s.part = p.part AND s.refs = p.stream_refs"
			 "   AND (p.status IN ('queued', 'running') OR (p.status = 'done' AND p.entries IS NOT NULL)))",
			 3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) == PGRES_COMMAND_OK) {
		PQclear(r);
		r = PQexecParams(miner_db(m),
				 "WITH s AS (SELECT (u.o - 1) / $3::integer AS part, array_agg(u.ref ORDER BY u.o) AS refs"
				 "   FROM unnest($2::bigint[]) WITH ORDINALITY AS u(ref, o) GROUP BY 1),"
				 " i AS (INSERT INTO run_parts (run_id, part, stream_refs) SELECT $1, part, refs FROM s"
				 "   ON CONFLICT (run_id, part) DO NOTHING)"
				 " SELECT (SELECT count(*) FROM s), pg_notify('sm_runs', '')",
				 3, NULL, params, NULL, NULL, 0);
	}
	buf_release(&arr);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		miner_db_fail(m, "queueing the run's parts", r);
		PQclear(PQexec(miner_db(m), "ROLLBACK"));
		return -1;
	}
	if (miner_exec(m, "COMMIT") < 0) {
		PQclear(r);
		return -1;
	}
	nparts = (int)db_get_i64(r, 0, 0);
	PQclear(r);
	return nparts;
}

int parts_claim(struct miner *m, int64_t run_id, struct parts_claim *c)
{
	char idbuf[24], lease[24];
	const char *params[3] = { miner_worker(m), run_id ? idbuf : NULL, lease };
	PGresult *r;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)run_id);
	snprintf(lease, sizeof(lease), "%d", miner_options(m)->lease_s);
	if (!db_alive(miner_db(m)))
		return miner_db_fail(m, "taking a part", NULL);
	/* a part whose workers died 3 times fails its run instead of killing more workers */
	r = PQexecParams(miner_db(m),
			 "UPDATE run_parts SET status = 'failed', error = CASE WHEN status = 'queued'"
			 "   THEN 'failed 3 times, the last: ' || error"
			 "   ELSE 'abandoned: its worker stopped 3 times while extracting it' END"
			 " WHERE attempts >= 3 AND ((status = 'queued' AND error IS NOT NULL) OR (status = 'running'"
			 "   AND heartbeat_at < now() - make_interval(secs => $1::integer)))",
			 1, NULL, params + 2, NULL, NULL, 0);
	PQclear(r);
	r = PQexecParams(miner_db(m),
			 "UPDATE run_parts p SET status = 'running', worker = $1, heartbeat_at = now(),"
			 " attempts = p.attempts + 1"
			 " FROM runs r WHERE r.id = p.run_id AND (p.run_id, p.part) = ("
			 "   SELECT q.run_id, q.part FROM run_parts q JOIN runs u ON u.id = q.run_id"
			 "   WHERE u.status = 'running'"
			 "   AND ($2::bigint IS NULL OR (q.run_id = $2::bigint AND u.worker = $1))"
			 "   AND (q.status = 'queued' OR (q.status = 'running'"
			 "        AND q.heartbeat_at < now() - make_interval(secs => $3::integer)))"
			 "   ORDER BY q.run_id, q.part LIMIT 1 FOR UPDATE OF q SKIP LOCKED)"
			 " RETURNING p.run_id, p.part, coalesce(r.params->>'aoi', ''), coalesce(r.params->>'kind', 'both')",
			 3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "taking a part", r);
	if (PQntuples(r) == 0) {
		PQclear(r);
		return 0;
	}
	c->run_id = db_get_i64(r, 0, 0);
	c->part = (int)db_get_i64(r, 0, 1);
	snprintf(c->aoi, sizeof(c->aoi), "%s", PQgetvalue(r, 0, 2));
	c->kinds = strcmp(PQgetvalue(r, 0, 3), "wait") == 0 ? RUN_KINDS_WAIT
		 : strcmp(PQgetvalue(r, 0, 3), "run") == 0  ? RUN_KINDS_RUN
							    : RUN_KINDS_BOTH;
	PQclear(r);
	return 1;
}

/* Runs an UPDATE of this worker's running part c: 0 when it changed the row, 1 when the part is
 * no longer this worker's, -1 on error. params[0..2] are filled here. */
static int part_update(struct miner *m, const struct parts_claim *c, const char *sql, int nparams,
		       const char **params, const int *lengths, const int *formats, const char *what)
{
	char idbuf[24], part[24];
	PGresult *r;
	int rc;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)c->run_id);
	snprintf(part, sizeof(part), "%d", c->part);
	params[0] = idbuf;
	params[1] = part;
	params[2] = miner_worker(m);
	db_drain(miner_db(m));
	r = PQexecParams(miner_db(m), sql, nparams, NULL, params, lengths, formats, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		return miner_db_fail(m, what, r);
	rc = strcmp(PQcmdTuples(r), "1") == 0 ? 0 : 1;
	PQclear(r);
	return rc;
}

#define PART_MINE " WHERE run_id = $1 AND part = $2::integer AND worker = $3 AND status = 'running'"

int parts_done(struct miner *m, const struct parts_claim *c, const struct buf *packed, int64_t events,
	       int64_t aoi_events, int64_t ms)
{
	char ev[24], aev[24], msb[24];
	const char *params[7] = { NULL, NULL, NULL, packed ? packed->data : NULL, ev, aev, msb };
	int lengths[7] = { 0, 0, 0, packed ? (int)packed->len : 0, 0, 0, 0 };
	int formats[7] = { 0, 0, 0, 1, 0, 0, 0 };

	if (packed && packed->len > PARTS_MAX_BYTES)
		return miner_fail(m, "part %d: its result takes more than %zu bytes", c->part, PARTS_MAX_BYTES);
	snprintf(ev, sizeof(ev), "%lld", (long long)events);
	snprintf(aev, sizeof(aev), "%lld", (long long)aoi_events);
	snprintf(msb, sizeof(msb), "%lld", (long long)ms);
	/* a result kept by the coordinator counts only while the run is still the coordinator's */
	return part_update(m, c, packed
			   ? "UPDATE run_parts SET status = 'done', entries = $4::bytea, events = $5::bigint,"
			     " aoi_events = $6::bigint, ms = $7::integer, heartbeat_at = now()" PART_MINE
			   : "UPDATE run_parts SET status = 'done', entries = $4::bytea, events = $5::bigint,"
			     " aoi_events = $6::bigint, ms = $7::integer, heartbeat_at = now()" PART_MINE
			     " AND EXISTS (SELECT 1 FROM runs WHERE id = $1 AND worker = $3 AND status = 'running')",
			   7, params, lengths, formats, "storing the part");
}

int parts_release(struct miner *m, const struct parts_claim *c, const char *error)
{
	const char *params[4] = { NULL, NULL, NULL, error };

	/* stopped: the attempt does not count; a failure does (a part that fails 3 times fails) */
	return part_update(m, c, "UPDATE run_parts SET status = 'queued', worker = NULL, error = $4,"
			   " attempts = CASE WHEN $4::text IS NULL THEN greatest(attempts - 1, 0) ELSE attempts END"
			   PART_MINE, 4, params, NULL, NULL, "giving the part back");
}

int parts_status(struct miner *m, int64_t run_id, int *pending, int *failed)
{
	char idbuf[24];
	const char *params[2] = { idbuf, miner_worker(m) };
	PGresult *r;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)run_id);
	r = PQexecParams(miner_db(m),
			 "SELECT count(*) FILTER (WHERE status IN ('queued', 'running')),"
			 " count(*) FILTER (WHERE status = 'failed'),"
			 " min(format('part %s: %s', part, error)) FILTER (WHERE status = 'failed'),"
			 " coalesce((SELECT worker = $2 AND status = 'running' FROM runs WHERE id = $1), false)"
			 " FROM run_parts WHERE run_id = $1",
			 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "reading the parts", r);
	if (strcmp(PQgetvalue(r, 0, 3), "t") != 0) {
		PQclear(r);
		return miner_fail(m, "run %s was taken over by another worker", idbuf);
	}
	*pending = (int)db_get_i64(r, 0, 0);
	*failed = (int)db_get_i64(r, 0, 1);
	if (*failed)
		miner_fail(m, "%s", PQgetvalue(r, 0, 2));
	PQclear(r);
	return 0;
}

int parts_list_done(struct miner *m, int64_t run_id, int **parts)
{
	char idbuf[24];
	const char *params[1] = { idbuf };
	PGresult *r;
	int n;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)run_id);
	r = PQexecParams(miner_db(m), "SELECT part FROM run_parts WHERE run_id = $1 AND status = 'done'"
				      " AND entries IS NOT NULL ORDER BY part",
			 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "reading the parts", r);
	n = PQntuples(r);
	*parts = malloc(((size_t)n + 1) * sizeof(**parts));
	if (!*parts) {
		PQclear(r);
		return miner_fail(m, "out of memory");
	}
	for (int i = 0; i < n; i++)
		(*parts)[i] = (int)db_get_i64(r, i, 0);
	PQclear(r);
	return n;
}

int parts_fetch(struct miner *m, int64_t run_id, int part, int (*each)(void *arg, const struct parts_entry *e),
		void *arg, int64_t *events, int64_t *aoi_events)
{
	char idbuf[24], pbuf[24];
	const char *params[2] = { idbuf, pbuf };
	const unsigned char *data;
	struct parts_entry e;
	size_t pos = 0, len;
	PGresult *r;
	int got, rc = 0;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)run_id);
	snprintf(pbuf, sizeof(pbuf), "%d", part);
	/* binary: the bytea as its bytes, not as hex twice their size */
	r = PQexecParams(miner_db(m), "SELECT entries, events, aoi_events"
				      " FROM run_parts WHERE run_id = $1 AND part = $2::integer AND status = 'done'",
			 2, NULL, params, NULL, NULL, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "reading a part", r);
	if (PQntuples(r) != 1 || PQgetisnull(r, 0, 0)) {
		PQclear(r);
		return miner_fail(m, "part %d of run %lld is gone", part, (long long)run_id);
	}
	data = (const unsigned char *)PQgetvalue(r, 0, 0);
	len = (size_t)PQgetlength(r, 0, 0);
	while (rc == 0 && (got = parts_unpack(data, len, &pos, &e)) != 0) {
		if (got < 0)
			rc = miner_fail(m, "part %d: its result is damaged", part);
		else
			rc = each(arg, &e);
	}
	*events = PQgetlength(r, 0, 1) == 8 ? (int64_t)get_be64((const unsigned char *)PQgetvalue(r, 0, 1)) : 0;
	*aoi_events = PQgetlength(r, 0, 2) == 8 ? (int64_t)get_be64((const unsigned char *)PQgetvalue(r, 0, 2)) : 0;
	PQclear(r);
	return rc;
}

void parts_drop(struct miner *m, int64_t run_id)
{
	char idbuf[24];
	const char *params[2] = { idbuf, miner_worker(m) };

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)run_id);
	db_drain(miner_db(m));
	/* never the parts of a worker that took the run over */
	PQclear(PQexecParams(miner_db(m), "DELETE FROM run_parts WHERE run_id = $1"
					  " AND EXISTS (SELECT 1 FROM runs WHERE id = $1 AND worker = $2)",
			     2, NULL, params, NULL, NULL, 0));
}
