/* frames: the database reads of a run's clustering (see frames.h). */
#include "miner/frames.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/intern.h"
#include "common/statfold.h"

#include <stdbool.h>
#include <stdio.h>

int frames_fold(PGconn *db, char *err, size_t errlen)
{
	int n;

	/* a transaction per 200 deltas, as sm-ingest folds them: each holds its deltas' locks briefly */
	while ((n = statfold_run(db, 200, err, errlen)) == 200)
		;
	return n < 0 ? -1 : 0;
}

int frames_load(PGconn *db, const uint32_t *ids, size_t n, struct sim_frames *ft, char *err, size_t errlen)
{
	struct intern *seen = intern_open(0);
	struct buf arr = BUF_INIT(0);
	const char *params[1];
	PGresult *r = NULL;
	int rc = -1;

	if (!seen)
		goto out_oom;
	buf_putc(&arr, '{');
	for (size_t i = 0; i < n; i++) {
		bool added;

		if (intern_put(seen, &ids[i], sizeof(uint32_t), &added) < 0)
			goto out_oom;
		if (added) {
			if (arr.len > 1)
				buf_putc(&arr, ',');
			buf_put_i64(&arr, ids[i]);
		}
	}
	if (buf_putc(&arr, '}') < 0)
		goto out_oom;
	params[0] = buf_cstr(&arr);
	r = PQexecParams(db, "SELECT id, name FROM frame_names WHERE id = ANY($1::integer[])", 1, NULL, params, NULL,
			 NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail_db;
	for (int i = 0; i < PQntuples(r); i++)
		if (sim_frames_add(ft, (uint32_t)db_get_i64(r, i, 0), PQgetvalue(r, i, 1),
				   (size_t)PQgetlength(r, i, 1)) < 0)
			goto out_oom;
	PQclear(r);
	r = PQexec(db, "SELECT n FROM stream_total");
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
		goto fail_db;
	sim_frames_set_streams(ft, (uint64_t)db_get_i64(r, 0, 0));
	PQclear(r);
	r = PQexecParams(db, "SELECT frame_id, n FROM frame_stats WHERE frame_id = ANY($1::integer[])", 1, NULL,
			 params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail_db;
	for (int i = 0; i < PQntuples(r); i++)
		sim_frames_set_count(ft, (uint32_t)db_get_i64(r, i, 0), (uint64_t)db_get_i64(r, i, 1));
	PQclear(r);
	r = PQexecParams(db, "SELECT caller, callee, n FROM call_stats WHERE caller = ANY($1::integer[])"
			     " AND callee = ANY($1::integer[])", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		goto fail_db;
	for (int i = 0; i < PQntuples(r); i++)
		sim_frames_set_calls(ft, (uint32_t)db_get_i64(r, i, 0), (uint32_t)db_get_i64(r, i, 1),
				     (uint64_t)db_get_i64(r, i, 2));
	rc = 0;
	goto out;
fail_db:
	db_errcpy(err, errlen, "reading frames and their statistics",
		  r ? PQresultErrorMessage(r) : PQerrorMessage(db));
	goto out;
out_oom:
	snprintf(err, errlen, "out of memory loading frames");
out:
	PQclear(r);
	buf_release(&arr);
	intern_free(seen);
	return rc;
}

int frames_take_ids(void *arg, const char *table, size_t n, int64_t *ids, char *err, size_t errlen)
{
	PGconn *db = arg;
	char cnt[24];
	const char *params[2] = { table, cnt };
	PGresult *r;

	snprintf(cnt, sizeof(cnt), "%zu", n);
	r = PQexecParams(db, "SELECT nextval(pg_get_serial_sequence($1, 'id')) FROM generate_series(1, $2::integer)",
			 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || (size_t)PQntuples(r) != n) {
		db_errcpy(err, errlen, "taking ids", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		ids[i] = db_get_i64(r, (int)i, 0);
	PQclear(r);
	return 0;
}
