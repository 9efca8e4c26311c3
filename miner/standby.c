/* standby: a run's events read from a standby once it has caught up (see standby.h). */
#include "miner/standby.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/evpack.h"
#include "common/util.h"
#include "common/wire.h"
#include "miner/queue.h"

#include <poll.h>
#include <stdbool.h>
#include <stdio.h>

int standby_caught_up(struct miner *m, PGconn *rdb)
{
	const char *params[1];
	char lsn[64];
	PGresult *r;
	int64_t t0 = util_now_mono_ns();

	r = PQexec(miner_db(m), "SELECT pg_current_wal_lsn()::text");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "reading the primary's WAL position", r);
	snprintf(lsn, sizeof(lsn), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	params[0] = lsn;
	while (db_alive(rdb)) {
		bool ok;

		r = PQexecParams(rdb, "SELECT NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= $1::pg_lsn",
				 1, NULL, params, NULL, NULL, 0);
		ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQgetvalue(r, 0, 0)[0] == 't';
		PQclear(r);
		if (ok)
			return 1;
		if (util_now_mono_ns() - t0 > 30 * 1000000000LL ||
		    (miner_options(m)->cancel && *miner_options(m)->cancel))
			break;
		poll(NULL, 0, 50);
	}
	return 0;
}

int standby_read(struct miner *m, PGconn *rdb, const int64_t *refs, size_t n, char kind, copyread_each each,
		 void *arg)
{
	struct buf ids = BUF_INIT(0);
	char lo[24], hi[24];
	const char *params[3] = { NULL, lo, hi };
	PGresult *r;
	int rc = -1;

	if (copyread_ids(&ids, refs, n) < 0) {
		buf_release(&ids);
		return miner_fail(m, "out of memory reading events");
	}
	params[0] = buf_cstr(&ids);
	snprintf(lo, sizeof(lo), "%lld", (long long)refs[0]);
	snprintf(hi, sizeof(hi), "%lld", (long long)refs[n - 1]);
	if (db_exec(rdb, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", miner_errbuf(m), MINER_ERRLEN) < 0)
		goto out;
	r = PQexecParams(rdb, "DECLARE sm_ev NO SCROLL BINARY CURSOR FOR SELECT stream_ref, data FROM event_chunks"
			      " WHERE stream_ref = ANY($1::bigint[]) AND stream_ref BETWEEN $2::bigint AND $3::bigint"
			      " ORDER BY stream_ref",
			 3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		db_errcpy(miner_errbuf(m), MINER_ERRLEN, "reading events from the standby", PQresultErrorMessage(r));
		PQclear(r);
		goto out_rollback;
	}
	PQclear(r);
	for (;;) {
		int rows;

		r = PQexecParams(rdb, "FETCH FORWARD 64 FROM sm_ev", 0, NULL, NULL, NULL, NULL, 1);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			db_errcpy(miner_errbuf(m), MINER_ERRLEN, "reading events from the standby",
				  PQresultErrorMessage(r));
			PQclear(r);
			goto out_rollback;
		}
		rows = PQntuples(r);
		if (rows == 0) {
			PQclear(r);
			break;
		}
		for (int i = 0; i < rows; i++) {
			const unsigned char *ref = (const unsigned char *)PQgetvalue(r, i, 0);
			int got = -1;

			if (PQgetlength(r, i, 0) == 8)
				got = copyread_chunk((int64_t)evpack_be(ref, 8), (const unsigned char *)PQgetvalue(r, i, 1),
						     (size_t)PQgetlength(r, i, 1), kind, each, arg);
			if (got == -1) {
				PQclear(r);
				miner_fail(m, "reading events from the standby: unexpected row layout");
				goto out_rollback;
			}
			if (got < 0) {
				PQclear(r);
				goto out_rollback;
			}
		}
		PQclear(r);
	}
	rc = db_exec(rdb, "COMMIT", miner_errbuf(m), MINER_ERRLEN);
	goto out;
out_rollback:
	PQclear(PQexec(rdb, "ROLLBACK"));
out:
	buf_release(&ids);
	return rc;
}
