/*
 * sm-admin: operator commands for a stackmine database: schema migrations,
 * API tokens, event partitions and retention, and a status overview.
 */
#include "common/auth.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/sha256.h"
#include "common/symstore.h"
#include "common/util.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: sm-admin [--db CONNINFO] COMMAND [ARGS]\n"
	"\n"
	"Commands:\n"
	"  migrate                          apply the missing schema migrations (safe to repeat)\n"
	"  status                           schema version, row counts, partitions, retention\n"
	"  token create --role ROLE [--name NAME] [--host HOST]\n"
	"                                   create a token (ROLE: ingest, analyst, admin; --host\n"
	"                                   binds an ingest token to the streams of one host);\n"
	"                                   prints it once on stdout; only its hash is stored\n"
	"  token list                       tokens (id, role, name, created, revoked)\n"
	"  token revoke ID                  revoke a token by id\n"
	"  retention [--days N] [--run-days N]\n"
	"                                   show or set how many days of streams (with their events)\n"
	"                                   and of finished runs (with their results) to keep (0: forever)\n"
	"  collect                          delete the frames and stacks nothing refers to any more\n"
	"                                   (safe while sm-ingest runs; sm-ingest does it daily)\n"
	"  maintain                         create the coming days' event partitions, drop what is\n"
	"                                   older than the retention, fold pending frame statistics\n"
	"                                   (sm-ingest does the first two hourly, the last every 2 s)\n"
	"  shard add NAME CONNINFO          hold the events of the days from now on (and of the empty\n"
	"                                   ones) on one more PostgreSQL server as well (postgres_fdw;\n"
	"                                   docs/scaling.md); CONNINFO must log in with a password\n"
	"  shard list                       the shards, their servers and how many days each holds\n"
	"  debuginfo add FILE...            store the function symbols of ELF debug files (by their\n"
	"                                   GNU build id) and name the frames of those builds\n"
	"  debuginfo list                   build ids known: debug file, symbols, unnamed frames\n"
	"  debuginfo missing                build ids with unnamed frames and no debug file, most\n"
	"                                   frames first: the files to upload (docs/symbols.md)\n"
	"  debuginfo resolve                look for the missing debug files now (local .build-id\n"
	"                                   tree, debuginfod through DEBUGINFOD_URLS) and name frames\n"
	"\n"
	"Options:\n"
	"  --db CONNINFO   libpq connection string or URI (default: the PG* environment variables)\n"
	"  -h, --help      this text\n"
	"\n"
	"Exit status: 0 done, 1 failed, 2 usage error.\n";

static int fail(const char *msg)
{
	fprintf(stderr, "sm-admin: %s\n", msg);
	return 1;
}

static int cmd_migrate(PGconn *c)
{
	char err[1024];
	int applied, v;

	if (db_migrate(c, &applied, err, sizeof(err)) < 0)
		return fail(err);
	if (db_schema_version(c, &v, err, sizeof(err)) < 0)
		return fail(err);
	printf("schema at version %d (%d migration%s applied)\n", v, applied, applied == 1 ? "" : "s");
	return 0;
}

static int print_query(PGconn *c, const char *title, const char *sql)
{
	PGresult *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		char err[512];
		db_errcpy(err, sizeof(err), title, PQresultErrorMessage(r));
		PQclear(r);
		return fail(err);
	}
	printf("%s:\n", title);
	for (int i = 0; i < PQntuples(r); i++) {
		printf(" ");
		for (int k = 0; k < PQnfields(r); k++)
			printf(" %s=%s", PQfname(r, k), PQgetisnull(r, i, k) ? "-" : PQgetvalue(r, i, k));
		printf("\n");
	}
	PQclear(r);
	return 0;
}

static int cmd_status(PGconn *c)
{
	char err[1024];
	int v;

	if (db_schema_version(c, &v, err, sizeof(err)) < 0)
		return fail(err);
	printf("schema: version %d, this build needs %d%s\n", v, db_schema_target(),
	       v < db_schema_target() ? " (run 'sm-admin migrate')" : "");
	if (v < db_schema_target())
		return 1;
	return print_query(c, "counts",
			   "SELECT (SELECT count(*) FROM streams) AS streams,"
			   " (SELECT coalesce(sum(n_events), 0) FROM streams) AS events,"
			   " (SELECT count(*) FROM frames) AS frames,"
			   " (SELECT count(*) FROM stacks) AS stacks,"
			   " (SELECT count(*) FROM tokens WHERE revoked_at IS NULL) AS active_tokens") ||
	       print_query(c, "settings", "SELECT key, value FROM settings ORDER BY key") ||
	       print_query(c, "partitions",
			   "SELECT c.relname AS partition, pg_size_pretty(pg_total_relation_size(c.oid)) AS size"
			   " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
			   " WHERE i.inhparent = 'event_chunks'::regclass ORDER BY 1");
}

static int cmd_token_create(PGconn *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "role", required_argument, NULL, 'r' },
		{ "name", required_argument, NULL, 'n' },
		{ "host", required_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	const char *role = NULL, *name = "", *host = NULL;
	char tok[AUTH_TOKEN_LEN + 1], err[512];
	int64_t id;
	int o;

	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'r')
			role = optarg;
		else if (o == 'n')
			name = optarg;
		else if (o == 'H')
			host = optarg;
		else
			return 2;
	}
	if (!role || auth_role_parse(role) == AUTH_NONE) {
		fprintf(stderr, "sm-admin: token create: --role must be ingest, analyst or admin\n");
		return 2;
	}
	if (auth_token_create(c, auth_role_parse(role), name, host, tok, &id, err, sizeof(err)) < 0)
		return fail(err);
	fprintf(stderr, "sm-admin: created %s token id %lld%s%s; it is shown only now\n", role, (long long)id,
		host ? " for host " : "", host ? host : "");
	printf("%s\n", tok);
	return 0;
}

static int cmd_token_revoke(PGconn *c, const char *id)
{
	int64_t v;
	char err[512];
	int rc;

	if (util_parse_i64(id, 1, INT32_MAX, &v) < 0) {
		fprintf(stderr, "sm-admin: token revoke: ID must be a token id (see 'token list')\n");
		return 2;
	}
	rc = auth_token_revoke(c, v, err, sizeof(err));
	if (rc < 0)
		return fail(err);
	if (rc > 0)
		return fail("token revoke: no active token with that id");
	printf("revoked token %s (servers forget it within their cache time, 10 s by default)\n", id);
	return 0;
}

static int cmd_token(PGconn *c, int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	if (strcmp(argv[1], "create") == 0)
		return cmd_token_create(c, argc - 1, argv + 1);
	if (strcmp(argv[1], "list") == 0)
		return print_query(c, "tokens",
				   "SELECT id, role, name, coalesce(host, '') AS host, created_at, revoked_at FROM tokens ORDER BY id");
	if (strcmp(argv[1], "revoke") == 0 && argc == 3)
		return cmd_token_revoke(c, argv[2]);
	fputs(usage, stderr);
	return 2;
}

static int set_setting(PGconn *c, const char *key, int64_t value)
{
	char vbuf[24];
	const char *params[2] = { key, vbuf };
	PGresult *r;

	snprintf(vbuf, sizeof(vbuf), "%lld", (long long)value);
	r = PQexecParams(c, "UPDATE settings SET value = $2 WHERE key = $1", 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		char err[512];
		db_errcpy(err, sizeof(err), "retention", PQresultErrorMessage(r));
		PQclear(r);
		return fail(err);
	}
	PQclear(r);
	return 0;
}

/* retention [--days N] [--run-days N]: streams and their events, and runs with their results */
static int cmd_retention(PGconn *c, int argc, char **argv)
{
	int64_t days = -1, run_days = -1;

	if (argc == 1)
		return print_query(c, "retention",
				   "SELECT (SELECT value FROM settings WHERE key = 'retention_days') AS days,"
				   " (SELECT value FROM settings WHERE key = 'run_retention_days') AS run_days");
	for (int i = 1; i < argc; i += 2) {
		int64_t *dst = strcmp(argv[i], "--days") == 0 ? &days : strcmp(argv[i], "--run-days") == 0 ? &run_days : NULL;

		if (!dst || i + 1 >= argc || util_parse_i64(argv[i + 1], 0, 100000, dst) < 0) {
			fprintf(stderr, "sm-admin: retention: --days and --run-days take a whole number of days"
					" (0: keep forever)\n");
			return 2;
		}
	}
	if (days >= 0 && set_setting(c, "retention_days", days))
		return 1;
	if (run_days >= 0 && set_setting(c, "run_retention_days", run_days))
		return 1;
	if (days >= 0)
		printf("retention set to %lld days%s\n", (long long)days, days ? "" : " (keep forever)");
	if (run_days >= 0)
		printf("run retention set to %lld days%s\n", (long long)run_days, run_days ? "" : " (keep forever)");
	return 0;
}

/* collect: frames and stacks nothing refers to any more */
static int cmd_collect(PGconn *c)
{
	PGresult *r = PQexec(c, "SELECT stacks, frames FROM sm_collect_interned()");

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		char err[512];
		db_errcpy(err, sizeof(err), "collect", PQresultErrorMessage(r));
		PQclear(r);
		return fail(err);
	}
	printf("stacks collected: %s, frames collected: %s\n", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
	PQclear(r);
	return 0;
}

/* The libpq options of a shard's connection that its postgres_fdw server keeps (the user and
 * password go to the user mapping). */
static const char *const shard_server_opts[] = {
	"host", "hostaddr", "port", "dbname", "target_session_attrs", "sslmode", "sslrootcert",
	"connect_timeout", NULL,
};

/* shard add NAME CONNINFO: a shard, checked from here first, then added in one transaction with
 * the day partitions it now takes part in */
static int cmd_shard_add(PGconn *c, const char *name, const char *conninfo)
{
	struct buf opts = BUF_INIT(64 * 1024);
	char err[1024];
	const char *params[4];
	PQconninfoOption *info = NULL;
	PGconn *sc;
	PGresult *r;
	int rc = 1;

	if (!*name || strlen(name) > 48 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(name)) {
		fprintf(stderr, "sm-admin: shard add: NAME '%s': 1 to 48 of a-z, 0-9 and _\n", name);
		return 2;
	}
	sc = db_connect(conninfo, err, sizeof(err));
	if (!sc) {
		fprintf(stderr, "sm-admin: shard %s: %s\n", name, err);
		return 1;
	}
	if (!PQconnectionUsedPassword(sc)) {
		fprintf(stderr, "sm-admin: shard %s: the connection logged in without a password; postgres_fdw"
				" lets a role that is not a superuser connect only with one (give password= or"
				" a passfile entry, and password authentication on the shard)\n", name);
		goto out_close;
	}
	info = PQconninfo(sc);
	if (!info) {
		fprintf(stderr, "sm-admin: out of memory\n");
		goto out_close;
	}
	buf_putc(&opts, '{');
	for (const PQconninfoOption *o = info; o->keyword; o++) {
		bool keep = false;

		for (int i = 0; shard_server_opts[i]; i++)
			keep |= strcmp(o->keyword, shard_server_opts[i]) == 0;
		/* what libpq would take anyway need not be kept - but where to go always is: the
		 * server's backend has other defaults than this program */
		if (!keep || !o->val || !*o->val ||
		    (o->compiled && strcmp(o->val, o->compiled) == 0 && strcmp(o->keyword, "host") &&
		     strcmp(o->keyword, "port") && strcmp(o->keyword, "dbname")))
			continue;
		if (opts.len > 1)
			buf_putc(&opts, ',');
		db_put_array_str(&opts, o->keyword, strlen(o->keyword));
		buf_putc(&opts, ',');
		db_put_array_str(&opts, o->val, strlen(o->val));
	}
	if (buf_putc(&opts, '}') < 0) {
		fprintf(stderr, "sm-admin: shard %s: its options: %s\n", name, buf_error_text(&opts));
		goto out_close;
	}
	params[0] = name;
	params[1] = buf_cstr(&opts);
	params[2] = PQuser(sc);
	params[3] = PQpass(sc);
	if (db_exec(c, "BEGIN", err, sizeof(err)) < 0) {
		fail(err);
		goto out_close;
	}
	r = PQexecParams(c, "SELECT sm_shard_add($1, $2::text[], $3, $4), " DB_ENSURE_PARTITIONS,
			 4, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		const char *hint = PQresultErrorField(r, PG_DIAG_MESSAGE_HINT);

		db_errcpy(err, sizeof(err), "shard add", PQresultErrorMessage(r));
		fprintf(stderr, "sm-admin: %s%s%s\n", err, hint ? "\nhint: " : "", hint ? hint : "");
		PQclear(r);
		PQclear(PQexec(c, "ROLLBACK"));
		goto out_close;
	}
	if (db_exec(c, "COMMIT", err, sizeof(err)) < 0) {
		PQclear(r);
		fail(err);
		goto out_close;
	}
	{
		PGresult *n = PQexec(c, "SELECT count(*) FROM shards");

		printf("shard %s added (id %s): the day partitions made from now on, and the empty ones (%s made"
		       " again), are spread over %s shards\n", name, PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1),
		       PQresultStatus(n) == PGRES_TUPLES_OK ? PQgetvalue(n, 0, 0) : "?");
		PQclear(n);
	}
	PQclear(r);
	rc = 0;
out_close:
	PQconninfoFree(info);
	buf_release(&opts);
	PQfinish(sc);
	return rc;
}

static int cmd_shard(PGconn *c, int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "list") == 0)
		return print_query(c, "shards",
				   "SELECT s.id, s.server, array_to_string(f.srvoptions, ' ') AS options,"
				   " (SELECT count(*) FROM pg_foreign_table t WHERE t.ftserver = f.oid) AS days,"
				   " s.added_at FROM shards s JOIN pg_foreign_server f ON f.srvname = s.server"
				   " ORDER BY s.id");
	if (argc == 4 && strcmp(argv[1], "add") == 0)
		return cmd_shard_add(c, argv[2], argv[3]);
	fprintf(stderr, "sm-admin: shard: 'shard add NAME CONNINFO' or 'shard list'\n");
	return 2;
}

static int cmd_maintain(PGconn *c)
{
	PGresult *left;
	int rc;
	PGresult *r = PQexec(c,
		"SELECT " DB_ENSURE_PARTITIONS ", sm_apply_retention(now()), sm_fold_stats(1000000)");
	char err[512];

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, sizeof(err), "maintain", PQresultErrorMessage(r));
		PQclear(r);
		return fail(err);
	}
	printf("partitions created: %s, dropped by retention: %s, statistics deltas folded: %s\n",
	       PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
	PQclear(r);
	/* after retention has committed: its days' tables on the shards (a statement of its own,
	 * and then what is left, which that statement's snapshot would not show) */
	r = PQexec(c, "SELECT sm_shard_drops()");
	left = PQexec(c, "SELECT count(*) FROM shard_drops");
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQresultStatus(left) != PGRES_TUPLES_OK) {
		db_errcpy(err, sizeof(err), "maintain: dropping days on the shards",
			  PQresultErrorMessage(PQresultStatus(r) != PGRES_TUPLES_OK ? r : left));
		PQclear(r);
		PQclear(left);
		return fail(err);
	}
	if (strcmp(PQgetvalue(r, 0, 0), "0") || strcmp(PQgetvalue(left, 0, 0), "0"))
		printf("tables dropped on the shards: %s, still to drop (a shard did not answer): %s\n",
		       PQgetvalue(r, 0, 0), PQgetvalue(left, 0, 0));
	rc = strcmp(PQgetvalue(left, 0, 0), "0") ? 1 : 0;
	PQclear(r);
	PQclear(left);
	return rc;
}

static int debuginfo_add(PGconn *c, int argc, char **argv)
{
	struct debuginfo *d = debuginfo_open();
	char err[1024];
	int rc = 0;

	if (!d)
		return fail("out of memory");
	for (int i = 0; i < argc; i++) {
		int n;

		if (debuginfo_load_file(d, argv[i]) < 0) {
			fprintf(stderr, "sm-admin: %s\n", debuginfo_error(d));
			rc = 1;
			continue;
		}
		n = symstore_put(c, d, "upload", debuginfo_path(d), err, sizeof(err));
		if (n < 0) {
			fprintf(stderr, "sm-admin: %s: %s\n", argv[i], err);
			rc = 1;
			continue;
		}
		printf("%s: build id %s, %zu symbols, %d frames named\n", argv[i], debuginfo_build_id(d),
		       debuginfo_count(d), n);
	}
	debuginfo_free(d);
	return rc;
}

static int debuginfo_show(PGconn *c, int missing_only)
{
	struct symstore_build *b;
	char err[1024];
	int n = symstore_builds(c, missing_only, 10000, &b, err, sizeof(err));

	if (n < 0)
		return fail(err);
	printf("%-40s  %-24s  %10s  %8s  %-13s  %s\n", "BUILD_ID", "MODULE", "UNNAMED", "SYMBOLS", "SOURCE",
	       "TRIED / ERROR");
	for (int i = 0; i < n; i++)
		printf("%-40s  %-24s  %10lld  %8lld  %-13s  %s%s%s\n", b[i].build_id, b[i].module[0] ? b[i].module : "-",
		       b[i].unresolved, b[i].symbols, b[i].source[0] ? b[i].source : "-", b[i].tried_at,
		       b[i].error[0] ? " " : "", b[i].error);
	free(b);
	return 0;
}

static int cmd_debuginfo(PGconn *c, int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "add") == 0)
		return debuginfo_add(c, argc - 2, argv + 2);
	if (argc == 2 && (strcmp(argv[1], "list") == 0 || strcmp(argv[1], "missing") == 0))
		return debuginfo_show(c, strcmp(argv[1], "missing") == 0);
	if (argc == 2 && strcmp(argv[1], "resolve") == 0) {
		const struct debuginfo_opts o = { NULL, 1, 0, 0 };
		char err[1024];
		int n = symstore_resolve_pending(c, &o, 0, 1000, err, sizeof(err));

		if (n < 0)
			return fail(err);
		printf("%d frames named\n", n);
		return 0;
	}
	fputs(usage, stderr);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *conninfo = NULL, *cmd;
	char err[1024];
	PGconn *c;
	int o, rc;

	while ((o = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (o) {
		case 'd': conninfo = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind >= argc) {
		fputs(usage, stderr);
		return 2;
	}
	cmd = argv[optind];
	if (strcmp(cmd, "help") == 0) {
		fputs(usage, stdout);
		return 0;
	}
	if (strcmp(cmd, "migrate") && strcmp(cmd, "status") && strcmp(cmd, "token") &&
	    strcmp(cmd, "retention") && strcmp(cmd, "maintain") && strcmp(cmd, "collect") && strcmp(cmd, "shard") &&
	    strcmp(cmd, "debuginfo")) {
		fprintf(stderr, "sm-admin: unknown command '%s'\n\n%s", cmd, usage);
		return 2;
	}
	c = db_connect(conninfo, err, sizeof(err));
	if (!c)
		return fail(err);
	PQclear(PQexec(c, "SET client_min_messages = warning"));
	if (strcmp(cmd, "migrate") != 0 && strcmp(cmd, "status") != 0 &&
	    db_schema_check(c, err, sizeof(err)) < 0) {
		PQfinish(c);
		return fail(err);
	}
	if (strcmp(cmd, "migrate") == 0)
		rc = cmd_migrate(c);
	else if (strcmp(cmd, "status") == 0)
		rc = cmd_status(c);
	else if (strcmp(cmd, "token") == 0)
		rc = cmd_token(c, argc - optind, argv + optind);
	else if (strcmp(cmd, "retention") == 0)
		rc = cmd_retention(c, argc - optind, argv + optind);
	else if (strcmp(cmd, "collect") == 0)
		rc = cmd_collect(c);
	else if (strcmp(cmd, "shard") == 0)
		rc = cmd_shard(c, argc - optind, argv + optind);
	else if (strcmp(cmd, "debuginfo") == 0)
		rc = cmd_debuginfo(c, argc - optind, argv + optind);
	else
		rc = cmd_maintain(c);
	PQfinish(c);
	return rc;
}
