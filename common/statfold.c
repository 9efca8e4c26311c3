/* statfold: the frame statistics' deltas summed here, each total written once (see statfold.h). */
#include "common/statfold.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/imap.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the deltas, oldest first, in binary (arrays as PostgreSQL sends them: no number to parse); the day
 * in ISO form whatever the session's DateStyle, so that days sort as sm_fold_stats() orders them */
static const char SQL_TAKE[] =
	"SELECT id, to_char(day, 'YYYY-MM-DD'), streams, frame_ids, frame_counts, callers, callees, call_counts"
	" FROM stat_deltas ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED";
static const char SQL_DELETE[] = "DELETE FROM stat_deltas WHERE id = ANY ($1::bigint[])";
/* in key order, as sm_fold_stats() writes them: two folders lock the rows they share in one order */
static const char SQL_STREAMS[] =
	"INSERT INTO stat_streams (day, n) VALUES ($1::date, $2::bigint)"
	" ON CONFLICT (day) DO UPDATE SET n = stat_streams.n + EXCLUDED.n";
static const char SQL_FRAMES[] =
	"INSERT INTO stat_frames (day, frame_id, n)"
	" SELECT $1::date, f, c FROM unnest($2::integer[], $3::bigint[]) AS u(f, c) ORDER BY f"
	" ON CONFLICT (day, frame_id) DO UPDATE SET n = stat_frames.n + EXCLUDED.n";
static const char SQL_CALLS[] =
	"INSERT INTO stat_calls (day, caller, callee, n)"
	" SELECT $1::date, a, b, c FROM unnest($2::integer[], $3::integer[], $4::bigint[]) AS u(a, b, c)"
	" ORDER BY a, b ON CONFLICT (day, caller, callee) DO UPDATE SET n = stat_calls.n + EXCLUDED.n";

/* One day's sums: frames by id, calls by caller << 32 | callee. */
struct day {
	char name[16];
	int64_t streams;
	struct imap frames, calls;
};

struct fold {
	struct day *days;
	size_t ndays;
	char *err;
	size_t errlen;
};

static struct day *day_of(struct fold *f, const char *name)
{
	struct day *d;

	for (size_t i = 0; i < f->ndays; i++)
		if (strcmp(f->days[i].name, name) == 0)
			return &f->days[i];
	d = realloc(f->days, (f->ndays + 1) * sizeof(*d));
	if (!d)
		return NULL;
	f->days = d;
	d = &f->days[f->ndays++];
	memset(d, 0, sizeof(*d));
	d->frames = (struct imap)IMAP_INIT;
	d->calls = (struct imap)IMAP_INIT;
	snprintf(d->name, sizeof(d->name), "%s", name);
	return d;
}

static int add(struct imap *m, uint64_t key, int64_t count)
{
	size_t i = imap_find(m, key);

	if (i != SIZE_MAX) {
		m->vals[i] += (uint64_t)count;
		return 0;
	}
	return imap_put(m, key, (uint64_t)count);
}

/* One delta's sums into its day. 0, or -1 with f->err. */
static int sum_delta(struct fold *f, const PGresult *r, int row)
{
	const unsigned char *fid, *fcnt, *ca, *ce, *cc;
	long nf = db_int4_array(r, row, 3, &fid), nfc = db_int4_array(r, row, 4, &fcnt);
	long nc = db_int4_array(r, row, 5, &ca), nce = db_int4_array(r, row, 6, &ce), ncc = db_int4_array(r, row, 7, &cc);
	struct day *d;

	if (nf < 0 || nf != nfc || nc < 0 || nc != nce || nc != ncc || PQgetlength(r, row, 2) != 4) {
		snprintf(f->err, f->errlen, "folding statistics: a delta's arrays are not integer arrays of one"
			 " dimension and matching lengths");
		return -1;
	}
	if (!(d = day_of(f, PQgetvalue(r, row, 1))))
		goto fail_oom;
	d->streams += (int32_t)db_be32((const unsigned char *)PQgetvalue(r, row, 2));
	for (long i = 0; i < nf; i++) {
		uint32_t id = (uint32_t)db_int4_next(&fid);

		if (add(&d->frames, id, db_int4_next(&fcnt)) < 0)
			goto fail_oom;
	}
	for (long i = 0; i < nc; i++) {
		uint32_t a = (uint32_t)db_int4_next(&ca), b = (uint32_t)db_int4_next(&ce);
		uint64_t key = (uint64_t)a << 32 | b;

		/* (the map's empty key: ids are positive, so only a delta gone wrong has it) */
		if (key == IMAP_EMPTY) {
			snprintf(f->err, f->errlen, "folding statistics: a delta counts a call of frame -1 to -1");
			return -1;
		}
		if (add(&d->calls, key, db_int4_next(&cc)) < 0)
			goto fail_oom;
	}
	return 0;
fail_oom:
	snprintf(f->err, f->errlen, "folding statistics: out of memory");
	return -1;
}

static int command(struct fold *f, PGconn *db, const char *sql, int n, const char *const *params)
{
	PGresult *r = PQexecParams(db, sql, n, NULL, params, NULL, NULL, 0);
	int rc = 0;

	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(f->err, f->errlen, "folding statistics", PQresultErrorMessage(r));
		rc = -1;
	}
	PQclear(r);
	return rc;
}

/* One day's totals written: its streams, then its frames' and calls' sums as arrays. */
static int write_day(struct fold *f, PGconn *db, const struct day *d, struct buf *b)
{
	size_t off[4];
	const char *params[4];
	char n[24];
	int rc = 0;

	snprintf(n, sizeof(n), "%lld", (long long)d->streams);
	params[0] = d->name;
	params[1] = n;
	if (command(f, db, SQL_STREAMS, 2, params) < 0)
		return -1;
	for (int what = 0; what < 2; what++) {
		const struct imap *m = what ? &d->calls : &d->frames;
		int ncols = what ? 3 : 2;

		if (!m->cnt)
			continue;
		buf_reset(b);
		for (int c = 0; c < ncols; c++) {
			bool first = true;

			off[c] = b->len;
			rc |= buf_putc(b, '{');
			for (size_t i = 0; i < m->cap; i++) {
				uint64_t k = m->keys[i];

				if (k == IMAP_EMPTY)
					continue;
				if (!first)
					rc |= buf_putc(b, ',');
				first = false;
				if (c == ncols - 1)
					rc |= buf_put_i64(b, (int64_t)m->vals[i]);
				else if (what && c == 0)
					rc |= buf_put_i64(b, (int32_t)(uint32_t)(k >> 32));
				else
					rc |= buf_put_i64(b, (int32_t)(uint32_t)k);
			}
			rc |= buf_putc(b, '}');
			rc |= buf_putc(b, '\0');   /* (after the brace: | does not order its operands) */
		}
		if (rc) {
			snprintf(f->err, f->errlen, "folding statistics: out of memory");
			return -1;
		}
		params[0] = d->name;
		for (int c = 0; c < ncols; c++)
			params[c + 1] = b->data + off[c];
		if (command(f, db, what ? SQL_CALLS : SQL_FRAMES, ncols + 1, params) < 0)
			return -1;
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct day *)a)->name, ((const struct day *)b)->name);
}

int statfold_run(PGconn *db, int max_deltas, char *err, size_t errlen)
{
	struct fold f = { NULL, 0, err, errlen };
	struct buf ids = BUF_INIT(0), b = BUF_INIT(0);
	PGresult *r = NULL;
	char limit[24];
	const char *params[1] = { limit };
	int n = -1;

	if (PQtransactionStatus(db) != PQTRANS_IDLE) {
		snprintf(err, errlen, "folding statistics: the connection is busy or in a transaction");
		return -1;
	}
	if (db_exec(db, "BEGIN", err, errlen) < 0)
		return -1;
	snprintf(limit, sizeof(limit), "%d", max_deltas > 0 ? max_deltas : 1);
	r = PQexecParams(db, SQL_TAKE, 1, NULL, params, NULL, NULL, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "folding statistics", PQresultErrorMessage(r));
		goto out_rollback;
	}
	if (PQntuples(r) == 0) {
		n = 0;
		goto out_rollback;
	}
	buf_putc(&ids, '{');
	for (int row = 0; row < PQntuples(r); row++) {
		const unsigned char *id = (const unsigned char *)PQgetvalue(r, row, 0);

		if (PQgetlength(r, row, 0) != 8) {
			snprintf(err, errlen, "folding statistics: an id is not a bigint");
			goto out_rollback;
		}
		if (row)
			buf_putc(&ids, ',');
		buf_put_i64(&ids, (int64_t)((uint64_t)db_be32(id) << 32 | db_be32(id + 4)));
		if (sum_delta(&f, r, row) < 0)
			goto out_rollback;
	}
	if (buf_putc(&ids, '}') < 0) {
		snprintf(err, errlen, "folding statistics: out of memory");
		goto out_rollback;
	}
	params[0] = buf_cstr(&ids);
	if (command(&f, db, SQL_DELETE, 1, params) < 0)
		goto out_rollback;
	qsort(f.days, f.ndays, sizeof(*f.days), by_name);
	for (size_t i = 0; i < f.ndays; i++)
		if (write_day(&f, db, &f.days[i], &b) < 0)
			goto out_rollback;
	if (db_exec(db, "COMMIT", err, errlen) < 0)
		goto out_free;
	n = PQntuples(r);
	goto out_free;
out_rollback:
	PQclear(PQexec(db, "ROLLBACK"));
out_free:
	PQclear(r);
	for (size_t i = 0; i < f.ndays; i++) {
		imap_free(&f.days[i].frames);
		imap_free(&f.days[i].calls);
	}
	free(f.days);
	buf_release(&ids);
	buf_release(&b);
	return n;
}
