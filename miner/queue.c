/* queue: the queue of mining runs in PostgreSQL (see queue.h). */
#include "miner/queue.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/log.h"
#include "common/par.h"
#include "common/util.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct miner {
	PGconn *db;
	PGconn *rdb;              /* --db-read once connected, or NULL */
	char *read_conninfo;      /* --db-read, or NULL */
	int64_t rdb_skip_until;   /* monotonic ns: the standby is passed over until then */
	struct miner_opts o;
	char *conninfo;
	char worker[128];
	char err[MINER_ERRLEN];
	char sqlstate[6];         /* of the last failed statement on db, "" when it had none */
};

int miner_fail(struct miner *m, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->err, sizeof(m->err), fmt, ap);
	va_end(ap);
	return -1;
}

int miner_db_fail(struct miner *m, const char *what, PGresult *r)
{
	const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	snprintf(m->sqlstate, sizeof(m->sqlstate), "%s", st ? st : "");
	db_errcpy(m->err, sizeof(m->err), what, r ? PQresultErrorMessage(r) : PQerrorMessage(m->db));
	PQclear(r);
	return -1;
}

int miner_fail_state(struct miner *m, const char *sqlstate, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->err, sizeof(m->err), fmt, ap);
	va_end(ap);
	snprintf(m->sqlstate, sizeof(m->sqlstate), "%s", sqlstate);
	return -1;
}

int miner_exec(struct miner *m, const char *sql)
{
	return db_exec(m->db, sql, m->err, sizeof(m->err));
}

PGconn *miner_db(struct miner *m)
{
	return m->db;
}

PGconn *miner_read_db(struct miner *m)
{
	char err[512];

	if (!m->read_conninfo || util_now_mono_ns() < m->rdb_skip_until)
		return NULL;
	if (m->rdb && db_alive(m->rdb))
		return m->rdb;
	PQfinish(m->rdb);
	m->rdb = db_connect(m->read_conninfo, err, sizeof(err));
	if (!m->rdb) {
		log_warn("cannot connect to --db-read: reading from the primary", "error=\"%s\"", err);
		miner_read_skip(m);
	}
	return m->rdb;
}

void miner_read_skip(struct miner *m)
{
	m->rdb_skip_until = util_now_mono_ns() + 30 * 1000000000LL;
}

char *miner_errbuf(struct miner *m)
{
	return m->err;
}

const struct miner_opts *miner_options(const struct miner *m)
{
	return &m->o;
}

const char *miner_conninfo(const struct miner *m)
{
	return m->conninfo;
}

const char *miner_worker(const struct miner *m)
{
	return m->worker;
}

void miner_opts_default(struct miner_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->max_patterns = 1000000;
	o->lease_s = MINER_LEASE_S;
	o->part_streams = MINER_PART_STREAMS;
}

struct miner *miner_open(const struct miner_opts *o, char *err, size_t errlen)
{
	struct miner *m = calloc(1, sizeof(*m));
	char host[64];

	if (!m) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	m->o = *o;
	m->o.threads = par_threads(m->o.threads);
	m->conninfo = strdup(o->conninfo ? o->conninfo : "");
	if (gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	snprintf(m->worker, sizeof(m->worker), "%s:%d", host, (int)getpid());
	m->db = m->conninfo ? db_connect(m->conninfo, err, errlen) : NULL;
	if (!m->db)
		goto fail_free;
	if (db_schema_check(m->db, err, errlen) < 0 ||
	    db_exec(m->db, "SET TimeZone = 'UTC'; SET client_min_messages = warning", err, errlen) < 0)
		goto fail_free;
	if (o->read_conninfo && !(m->read_conninfo = strdup(o->read_conninfo))) {
		snprintf(err, errlen, "out of memory");
		goto fail_free;
	}
	m->o.read_conninfo = NULL;     /* the caller's string need not outlive this call */
	return m;
fail_free:
	miner_free(m);
	return NULL;
}

void miner_free(struct miner *m)
{
	if (!m)
		return;
	if (m->db)
		PQfinish(m->db);
	if (m->rdb)
		PQfinish(m->rdb);
	free(m->read_conninfo);
	free(m->conninfo);
	free(m);
}

const char *miner_error(const struct miner *m)
{
	return m->err;
}


int miner_enqueue(struct miner *m, const struct run_params *p, int64_t *run_id)
{
	return miner_enqueue_db(m->db, p, run_id, m->err, sizeof(m->err));
}

int miner_enqueue_db(PGconn *db, const struct run_params *p, int64_t *run_id, char *err, size_t errlen)
{
	struct buf b = BUF_INIT(0);
	const char *params[1];
	PGresult *r;

	if (params_write_json(p, &b) < 0) {
		buf_release(&b);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	params[0] = buf_cstr(&b);
	/* one statement: the row and the wake-up commit together */
	r = db_query(db, "WITH r AS (INSERT INTO runs (params) VALUES ($1::jsonb) RETURNING id)"
		     " SELECT id, pg_notify('sm_runs', '') FROM r", 1, params, "creating the run", err, errlen);
	buf_release(&b);
	if (!r)
		return -1;
	*run_id = db_get_i64(r, 0, 0);
	PQclear(r);
	return 0;
}

int miner_create_running(struct miner *m, const struct run_params *p, int64_t *run_id)
{
	struct buf b = BUF_INIT(0);
	const char *params[2];
	PGresult *r;

	if (params_write_json(p, &b) < 0) {
		buf_release(&b);
		return miner_fail(m, "out of memory");
	}
	params[0] = buf_cstr(&b);
	params[1] = m->worker;
	r = PQexecParams(m->db,
			 "INSERT INTO runs (params, status, worker, started_at, heartbeat_at, attempts)"
			 " VALUES ($1::jsonb, 'running', $2, now(), now(), 1) RETURNING id",
			 2, NULL, params, NULL, NULL, 0);
	buf_release(&b);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "creating the run", r);
	*run_id = db_get_i64(r, 0, 0);
	PQclear(r);
	return 0;
}

int miner_claim(struct miner *m, struct arena *a, int64_t *run_id, struct run_params *p)
{
	char lease[24], maxat[24];
	const char *params[2] = { m->worker, lease };
	PGresult *r;
	char err[512];

	snprintf(lease, sizeof(lease), "%d", m->o.lease_s);
	snprintf(maxat, sizeof(maxat), "%d", MINER_MAX_ATTEMPTS);
	if (!db_alive(m->db))
		return miner_db_fail(m, "taking a queued run", NULL);
	/* a run whose worker died too often fails instead of killing more workers */
	r = PQexecParams(m->db, "UPDATE runs SET status = 'failed', finished_at = now(),"
			 " error = 'abandoned: its worker stopped ' || attempts || ' times while mining it'"
			 " WHERE status = 'running' AND heartbeat_at < now() - make_interval(secs => $1::integer)"
			 " AND attempts >= $2::integer", 2, NULL, (const char *[]){ lease, maxat }, NULL, NULL, 0);
	PQclear(r);
	r = PQexecParams(m->db,
			 "UPDATE runs SET status = 'running', started_at = now(), heartbeat_at = now(),"
			 " worker = $1, attempts = attempts + 1, error = NULL, progress = '{}'"
			 " WHERE id = (SELECT id FROM runs WHERE status = 'queued'"
			 "   OR (status = 'running' AND heartbeat_at < now() - make_interval(secs => $2::integer))"
			 "   ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
			 " RETURNING id, params::text",
			 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "taking a queued run", r);
	if (PQntuples(r) == 0) {
		PQclear(r);
		return 0;
	}
	*run_id = db_get_i64(r, 0, 0);
	if (params_parse(PQgetvalue(r, 0, 1), (size_t)PQgetlength(r, 0, 1), a, p, err, sizeof(err)) < 0) {
		const char *ps[2];
		char idbuf[24], msg[600];

		snprintf(idbuf, sizeof(idbuf), "%lld", (long long)*run_id);
		snprintf(msg, sizeof(msg), "bad parameters: %s", err);
		ps[0] = idbuf;
		ps[1] = msg;
		PQclear(PQexecParams(m->db, "UPDATE runs SET status = 'failed', error = $2,"
					    " finished_at = now() WHERE id = $1", 2, NULL, ps, NULL, NULL, 0));
		PQclear(r);
		miner_fail(m, "run %s: %s", idbuf, msg);
		return -1;
	}
	PQclear(r);
	return 1;
}

/* Frees the notices libpq holds for the session: how many there were. */
static int drain_notices(PGconn *db)
{
	PGnotify *n;
	int k = 0;

	for (; (n = PQnotifies(db)); k++)
		PQfreemem(n);
	return k;
}

int miner_wait(struct miner *m, int timeout_ms)
{
	struct pollfd pfd;

	if (!db_alive(m->db))
		return miner_db_fail(m, "waiting for runs", NULL);
	if (db_exec(m->db, "LISTEN sm_runs", m->err, sizeof(m->err)) < 0)
		return -1;
	/* a notice that came while this session ran its last statements (the claims, this LISTEN) is
	 * in libpq's queue already, not on the socket: polling would sleep through it */
	if (drain_notices(m->db) > 0)
		return 0;
	pfd.fd = PQsocket(m->db);
	pfd.events = POLLIN;
	if (pfd.fd < 0)
		return miner_fail(m, "database connection lost");
	/* in slices: a stop asked for by another thread (sm-web's embedded worker) wakes no poll */
	for (int left = timeout_ms; left > 0 && !(m->o.cancel && *m->o.cancel); left -= 100) {
		int ready = poll(&pfd, 1, left < 100 ? left : 100);

		if (ready < 0 && errno != EINTR)
			return miner_fail(m, "poll: %s", strerror(errno));
		if (ready != 0)
			break;
	}
	if (!PQconsumeInput(m->db))
		return miner_db_fail(m, "waiting for runs", NULL);
	drain_notices(m->db);
	return 0;
}

int miner_finish(struct miner *m, int64_t id, int64_t cluster_ms, int64_t total_ms)
{
	char idbuf[24], cms[24], tms[24];
	const char *params[4] = { idbuf, m->worker, cms, tms };
	PGresult *r;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
	snprintf(cms, sizeof(cms), "%lld", (long long)cluster_ms);
	snprintf(tms, sizeof(tms), "%lld", (long long)total_ms);
	r = PQexecParams(m->db, "UPDATE runs SET status = 'done', finished_at = now(), error = NULL,"
				" progress = progress || '{\"phase\": \"done\"}',"
				" timings_ms = timings_ms || jsonb_build_object('cluster', $3::bigint, 'total', $4::bigint)"
				" WHERE id = $1 AND worker = $2 AND status = 'running'",
			 4, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		return miner_db_fail(m, "finishing the run", r);
	if (strcmp(PQcmdTuples(r), "1") != 0) {
		PQclear(r);
		return miner_fail(m, "run %s was taken over by another worker", idbuf);
	}
	PQclear(r);
	return 0;
}

void miner_set_status(struct miner *m, int64_t id, const char *status, const char *error)
{
	char idbuf[24];
	const char *params[4] = { idbuf, status, error, m->worker };
	PGresult *r;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
	if (PQstatus(m->db) != CONNECTION_OK)
		PQreset(m->db);
	/* a COPY cut short leaves the connection busy: drain it first */
	db_drain(m->db);
	PQclear(PQexec(m->db, "ROLLBACK"));
	r = PQexecParams(m->db,
			 "UPDATE runs SET status = $2, error = $3,"
			 " finished_at = CASE WHEN $2 = 'failed' THEN now() END,"
			 " worker = CASE WHEN $2 = 'queued' THEN NULL ELSE worker END"
			 " WHERE id = $1 AND worker = $4 AND status = 'running'",
			 4, NULL, params, NULL, NULL, 0);
	PQclear(r);
}

bool miner_db_lost(const struct miner *m)
{
	/* 08: connection exceptions; 57P01-57P03: shut down, crashed, not yet accepting connections */
	return PQstatus(m->db) != CONNECTION_OK || strncmp(m->sqlstate, "08", 2) == 0 ||
	       strcmp(m->sqlstate, "57P01") == 0 || strcmp(m->sqlstate, "57P02") == 0 ||
	       strcmp(m->sqlstate, "57P03") == 0;
}

int miner_requeue_lost(struct miner *m, int64_t id, const char *why, int wait_s)
{
	char idbuf[24], maxat[24];
	const char *params[4] = { idbuf, why, m->worker, maxat };
	PGresult *r;
	int rc;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
	snprintf(maxat, sizeof(maxat), "%d", MINER_MAX_ATTEMPTS);
	for (int s = 0; !db_alive(m->db); s++) {
		if (s >= wait_s || (m->o.cancel && *m->o.cancel))
			return -1;
		poll(NULL, 0, 1000);
	}
	db_drain(m->db);
	if (PQtransactionStatus(m->db) != PQTRANS_IDLE)
		PQclear(PQexec(m->db, "ROLLBACK"));
	r = PQexecParams(m->db,
			 "UPDATE runs SET last_retry = $2,"
			 " status = CASE WHEN attempts < $4::integer THEN 'queued' ELSE 'failed' END,"
			 " error = CASE WHEN attempts < $4::integer THEN NULL"
			 "   ELSE 'the database went away during each of its ' || attempts || ' attempts; the last: ' || $2 END,"
			 " finished_at = CASE WHEN attempts < $4::integer THEN NULL ELSE now() END,"
			 " worker = CASE WHEN attempts < $4::integer THEN NULL ELSE worker END"
			 " WHERE id = $1 AND worker = $3 AND status = 'running' RETURNING status",
			 4, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "queueing the run again", r);
	rc = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "queued") == 0;
	PQclear(r);
	if (rc)
		PQclear(PQexec(m->db, "NOTIFY sm_runs"));
	return rc;
}

int miner_retake(struct miner *m, int64_t id)
{
	char idbuf[24];
	const char *params[2] = { idbuf, m->worker };
	PGresult *r;
	int rc;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
	r = PQexecParams(m->db,
			 "UPDATE runs SET status = 'running', started_at = now(), heartbeat_at = now(),"
			 " worker = $2, attempts = attempts + 1, error = NULL, progress = '{}'"
			 " WHERE id = $1 AND status = 'queued' RETURNING id",
			 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return miner_db_fail(m, "taking the run back", r);
	rc = PQntuples(r) == 1;
	PQclear(r);
	return rc;
}

int miner_delete_run(PGconn *db, int64_t run_id, char *err, size_t errlen)
{
	char idbuf[24];
	const char *params[1] = { idbuf };
	PGresult *r;
	int rc;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)run_id);
	/* its stacks, patterns and clusters go with it (ON DELETE CASCADE) */
	r = db_query(db, "WITH d AS (DELETE FROM runs WHERE id = $1 AND status <> 'running' RETURNING id)"
		     " SELECT (SELECT count(*) FROM d), (SELECT status FROM runs WHERE id = $1)",
		     1, params, "deleting the run", err, errlen);
	if (!r)
		return -1;
	if (strcmp(PQgetvalue(r, 0, 0), "1") == 0) {
		rc = 0;
	} else if (!PQgetisnull(r, 0, 1)) {
		snprintf(err, errlen, "run %s is running: it can be deleted when it has ended", idbuf);
		rc = -2;
	} else {
		snprintf(err, errlen, "run %s: no such run", idbuf);
		rc = -3;
	}
	PQclear(r);
	return rc;
}
