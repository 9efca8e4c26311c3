/* db: connection, migrations and schema checks (see db.h). */
#include "common/db.h"
#include "common/log.h"
#include "common/migrations.h"

#include <libpq-events.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void db_errcpy(char *err, size_t errlen, const char *what, const char *pgmsg)
{
	size_t n;

	snprintf(err, errlen, "%s: %s", what, pgmsg ? pgmsg : "unknown error");
	n = strlen(err);
	while (n && (err[n - 1] == '\n' || err[n - 1] == ' '))
		err[--n] = '\0';
}

/* PostgreSQL's notices and warnings as log lines (libpq writes them to stderr as they come: a
 * server's text, which may hold anything a client put in a statement). */
static void notice(void *arg, const char *message)
{
	size_t n = strlen(message);

	(void)arg;
	while (n && (message[n - 1] == '\n' || message[n - 1] == ' '))
		n--;
	if (strncmp(message, "WARNING:", 8) == 0)
		log_warn("postgresql", "detail=%.*s", (int)n, message);
	else
		log_info("postgresql", "detail=%.*s", (int)n, message);
}

PGconn *db_connect(const char *conninfo, char *err, size_t errlen)
{
	/* before the caller's conninfo, so that it can set its own. A server that went silent (its
	 * machine lost, not just its processes) is noticed by TCP keepalives when idle and within
	 * 10 s of unacknowledged data otherwise, instead of the kernel's quarter of an hour: about
	 * a Patroni failover's time, so that a request in flight at the loss does not outlast it.
	 * A busy server still acknowledges what it receives; only silence counts */
	static const char *const keys[] = { "connect_timeout", "keepalives_idle", "keepalives_interval",
					    "keepalives_count", "tcp_user_timeout", "dbname", NULL };
	const char *vals[] = { "10", "5", "2", "3", "10000", conninfo ? conninfo : "", NULL };
	PGconn *c = PQconnectdbParams(keys, vals, 1);

	if (!c) {
		snprintf(err, errlen, "database: out of memory");
		return NULL;
	}
	if (PQstatus(c) != CONNECTION_OK) {
		db_errcpy(err, errlen, "database connection failed", PQerrorMessage(c));
		PQfinish(c);
		return NULL;
	}
	PQsetNoticeProcessor(c, notice, NULL);
	return c;
}

int db_schema_target(void)
{
	return sm_nmigrations ? sm_migrations[sm_nmigrations - 1].version : 0;
}

int db_exec(PGconn *c, const char *sql, char *err, size_t errlen)
{
	PGresult *r = PQexec(c, sql);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;

	if (!ok)
		db_errcpy(err, errlen, "database", PQresultErrorMessage(r));
	PQclear(r);
	return ok ? 0 : -1;
}

int db_command(PGconn *c, const char *sql, int nparams, const char *const *params, const char *what,
	       char *err, size_t errlen)
{
	PGresult *r = PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK;

	if (!ok)
		db_errcpy(err, errlen, what, PQresultErrorMessage(r));
	PQclear(r);
	return ok ? 0 : -1;
}

PGresult *db_query(PGconn *c, const char *sql, int nparams, const char *const *params, const char *what,
		   char *err, size_t errlen)
{
	PGresult *r = PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		return r;
	db_errcpy(err, errlen, what, PQresultErrorMessage(r));
	PQclear(r);
	return NULL;
}

/* The statements prepared on a connection's current session: a bit per statement number. */
struct prepared {
	uint64_t done;
};

/* libpq's events: a reset starts a session without prepared statements; PQfinish() frees. */
static int prepared_event(PGEventId id, void *info, void *arg)
{
	(void)arg;
	if (id == PGEVT_CONNRESET) {
		struct prepared *p = PQinstanceData(((PGEventConnReset *)info)->conn, prepared_event);

		if (p)
			p->done = 0;
	} else if (id == PGEVT_CONNDESTROY) {
		free(PQinstanceData(((PGEventConnDestroy *)info)->conn, prepared_event));
	}
	return 1;
}

static struct prepared *prepared_of(PGconn *c)
{
	struct prepared *p = PQinstanceData(c, prepared_event);

	if (p)
		return p;
	if (!(p = calloc(1, sizeof(*p))))
		return NULL;
	if (!PQregisterEventProc(c, prepared_event, "stackmine prepared", NULL) ||
	    !PQsetInstanceData(c, prepared_event, p)) {
		free(p);
		return NULL;
	}
	return p;
}

static bool sqlstate_is(const PGresult *r, const char *state)
{
	const char *s = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	return s && strcmp(s, state) == 0;
}

PGresult *db_exec_prepared(PGconn *c, int no, const char *name, const char *sql, int nparams,
			   const char *const *params)
{
	struct prepared *p = no >= 0 && no < 64 ? prepared_of(c) : NULL;
	uint64_t bit = p ? UINT64_C(1) << no : 0;
	PGresult *r;

	if (!p)   /* not tracked: unprepared rather than an error per call */
		return PQexecParams(c, sql, nparams, NULL, params, NULL, NULL, 0);
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!(p->done & bit)) {
			r = PQprepare(c, name, sql, nparams, NULL);
			/* 42P05: it is there already (prepared by someone else on this session) */
			if (PQresultStatus(r) != PGRES_COMMAND_OK && !sqlstate_is(r, "42P05"))
				return r;
			PQclear(r);
			p->done |= bit;
		}
		r = PQexecPrepared(c, name, nparams, params, NULL, NULL, 0);
		/* 26000: gone all the same (a DISCARD ALL, a pooler's other session): once more */
		if (!sqlstate_is(r, "26000") || attempt)
			return r;
		PQclear(r);
		p->done &= ~bit;
	}
	return NULL;
}

void db_drain(PGconn *c)
{
	PGresult *r;

	/* bounded: a connection that keeps answering is not waited on forever */
	for (int i = 0; i < 64 && (r = PQgetResult(c)); i++) {
		ExecStatusType st = PQresultStatus(r);

		PQclear(r);
		if (st == PGRES_COPY_OUT) {
			char *buf;
			int n;

			while ((n = PQgetCopyData(c, &buf, 0)) > 0)
				PQfreemem(buf);
		} else if (st == PGRES_COPY_IN) {
			PQputCopyEnd(c, "abandoned");
		} else if (st == PGRES_COPY_BOTH) {
			break;
		}
	}
}

int64_t db_get_i64(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return 0;
	return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

int db_schema_version(PGconn *c, int *version, char *err, size_t errlen)
{
	PGresult *r = PQexec(c, "SELECT to_regclass('schema_migrations') IS NOT NULL");
	int exists;

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "reading the schema version", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	exists = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
	PQclear(r);
	*version = 0;
	if (!exists)
		return 0;
	r = PQexec(c, "SELECT coalesce(max(version), 0) FROM schema_migrations");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "reading the schema version", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	*version = (int)db_get_i64(r, 0, 0);
	PQclear(r);
	return 0;
}

int db_schema_check(PGconn *c, char *err, size_t errlen)
{
	int v, want = db_schema_target();

	if (db_schema_version(c, &v, err, errlen) < 0)
		return -1;
	if (v < want) {
		snprintf(err, errlen,
			 "database schema is at version %d, this program needs %d: run 'sm-admin migrate'",
			 v, want);
		return -1;
	}
	if (v > want) {
		snprintf(err, errlen,
			 "database schema is at version %d, newer than this program (%d): upgrade stackmine",
			 v, want);
		return -1;
	}
	return 0;
}

/* err becomes "WHAT failed: err". */
static void err_prefix(char *err, size_t errlen, const char *what)
{
	char inner[768];

	snprintf(inner, sizeof(inner), "%s", err);
	snprintf(err, errlen, "%s failed: %s", what, inner);
}

static int migrate_one(PGconn *c, const struct migration *m, char *err, size_t errlen)
{
	char vbuf[16];
	const char *params[2] = { vbuf, m->name };
	char what[128];

	snprintf(what, sizeof(what), "migration %03d_%s", m->version, m->name);
	if (db_exec(c, m->sql, err, errlen) < 0) {
		err_prefix(err, errlen, what);
		return -1;
	}
	snprintf(vbuf, sizeof(vbuf), "%d", m->version);
	return db_command(c, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", 2, params,
			  what, err, errlen);
}

/*
 * The functions of sql/functions/, each defined there only, over whatever the migrations left
 * (CREATE OR REPLACE): a database made fresh and one upgraded end alike. Only at the program's
 * own version: a program older than the schema must not put back its older bodies.
 */
static int apply_functions(PGconn *c, char *err, size_t errlen)
{
	int v;

	if (db_exec(c, "BEGIN", err, errlen) < 0)
		return -1;
	if (db_exec(c, "SELECT pg_advisory_xact_lock(hashtext('stackmine.migrate'))", err, errlen) < 0 ||
	    db_schema_version(c, &v, err, errlen) < 0)
		goto fail_rollback;
	if (v == db_schema_target()) {
		for (int i = 0; i < sm_nfunctions; i++) {
			if (db_exec(c, sm_functions[i].sql, err, errlen) < 0) {
				char what[128];

				snprintf(what, sizeof(what), "function %s", sm_functions[i].name);
				err_prefix(err, errlen, what);
				goto fail_rollback;
			}
		}
	}
	return db_exec(c, "COMMIT", err, errlen);
fail_rollback:
	PQclear(PQexec(c, "ROLLBACK"));
	return -1;
}

int db_migrate(PGconn *c, int *applied, char *err, size_t errlen)
{
	int v;

	*applied = 0;
	if (db_exec(c, "CREATE TABLE IF NOT EXISTS schema_migrations ("
		       " version integer PRIMARY KEY, name text NOT NULL,"
		       " applied_at timestamptz NOT NULL DEFAULT now())", err, errlen) < 0)
		return -1;
	for (int i = 0; i < sm_nmigrations; i++) {
		const struct migration *m = &sm_migrations[i];

		if (db_exec(c, "BEGIN", err, errlen) < 0)
			return -1;
		/* serialise concurrent migrators; re-read the version under the lock */
		if (db_exec(c, "SELECT pg_advisory_xact_lock(hashtext('stackmine.migrate'))", err,
			    errlen) < 0 ||
		    db_schema_version(c, &v, err, errlen) < 0)
			goto fail_rollback;
		if (v >= m->version) {
			if (db_exec(c, "COMMIT", err, errlen) < 0)
				return -1;
			continue;
		}
		if (migrate_one(c, m, err, errlen) < 0)
			goto fail_rollback;
		if (db_exec(c, "COMMIT", err, errlen) < 0)
			return -1;
		(*applied)++;
	}
	return apply_functions(c, err, errlen);
fail_rollback:
	PQclear(PQexec(c, "ROLLBACK"));
	return -1;
}

int db_parse_int_array(const char *s, int32_t *out, int max)
{
	int n = 0;

	if (*s++ != '{')
		return -1;
	while (*s && *s != '}') {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || n >= max || v < INT32_MIN || v > INT32_MAX)
			return -1;
		out[n++] = (int32_t)v;
		s = *end == ',' ? end + 1 : end;
	}
	return *s == '}' ? n : -1;
}

int db_put_array_str(struct buf *b, const char *s, size_t n)
{
	size_t start = 0;

	if (buf_putc(b, '"') < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '"' && s[i] != '\\')
			continue;
		if (buf_append(b, s + start, i - start) < 0 || buf_putc(b, '\\') < 0)
			return -1;
		start = i;
	}
	if (buf_append(b, s + start, n - start) < 0)
		return -1;
	return buf_putc(b, '"');
}

bool db_alive(PGconn *c)
{
	struct pollfd p = { .fd = PQsocket(c), .events = POLLIN };

	if (!c)
		return false;
	/* a dying backend may send its FATAL message, then the end of file: read until no more
	 * is waiting (a few rounds at most) */
	for (int i = 0; i < 4 && PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) == PQTRANS_IDLE &&
			p.fd >= 0 && poll(&p, 1, 0) > 0; i++)
		if (!PQconsumeInput(c))
			break;   /* an end of file: the status is CONNECTION_BAD */
	if (PQstatus(c) != CONNECTION_OK)
		PQreset(c);
	return PQstatus(c) == CONNECTION_OK;
}

#define INT4_OID 23

/* A big-endian 32-bit word appended. */
static int put_be32(struct buf *b, uint32_t v)
{
	unsigned char w[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
			       (unsigned char)v };

	return buf_append(b, w, sizeof(w));
}

int db_put_int4_array(struct buf *b, size_t n)
{
	if (n > INT32_MAX)
		return -1;
	/* ndim (an empty array has none), no NULLs, the element type; then length and lower bound */
	/* one statement each: the operands of | are not sequenced, and the bytes must be in order */
	int rc = put_be32(b, n == 0 ? 0 : 1);

	rc |= put_be32(b, 0);
	rc |= put_be32(b, INT4_OID);
	if (n > 0) {
		rc |= put_be32(b, (uint32_t)n);
		rc |= put_be32(b, 1);
	}
	return rc;
}

int db_put_int4_elem(struct buf *b, int32_t v)
{
	int rc = put_be32(b, 4);

	rc |= put_be32(b, (uint32_t)v);
	return rc;
}

long db_int4_array(const PGresult *r, int row, int col, const unsigned char **at)
{
	const unsigned char *p = (const unsigned char *)PQgetvalue(r, row, col);
	size_t len = (size_t)PQgetlength(r, row, col);
	uint32_t n;

	if (len < 12 || db_be32(p + 8) != INT4_OID)
		return -1;
	if (db_be32(p) == 0) {   /* an empty array has no dimension */
		*at = p + 12;
		return len == 12 ? 0 : -1;
	}
	if (db_be32(p) != 1 || len < 20)
		return -1;
	n = db_be32(p + 12);
	if (n > (len - 20) / 8 || len != 20 + (size_t)n * 8)
		return -1;
	for (uint32_t i = 0; i < n; i++)
		if (db_be32(p + 20 + (size_t)i * 8) != 4)
			return -1;
	*at = p + 20;
	return (long)n;
}
