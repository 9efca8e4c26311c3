/* symstore: debug symbols and frame resolution in the database (see symstore.h). */
#include "common/symstore.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYM_CHUNK 5000                 /* symbols per INSERT */
#define SYM_PARAM_MAX (16u << 20)      /* bytes of one array parameter */

/* Runs sql with n parameters; the result when its status is want, else NULL with err ("what: ..."). */
static PGresult *query(PGconn *db, const char *sql, int n, const char *const *p, ExecStatusType want,
		       const char *what, char *err, size_t errlen)
{
	PGresult *r = PQexecParams(db, sql, n, NULL, p, NULL, NULL, 0);

	if (PQresultStatus(r) == want)
		return r;
	db_errcpy(err, errlen, what, r ? PQresultErrorMessage(r) : PQerrorMessage(db));
	PQclear(r);
	return NULL;
}

/* A statement of a transaction: 0, or -1 with err and the transaction rolled back. */
static int step(PGconn *db, const char *sql, int n, const char *const *p, const char *what, char *err,
		size_t errlen)
{
	PGresult *r = query(db, sql, n, p, PGRES_COMMAND_OK, what, err, errlen);

	if (!r) {
		PQclear(PQexec(db, "ROLLBACK"));
		return -1;
	}
	PQclear(r);
	return 0;
}

/* sm_resolve_frames(bid): the frames named, or -1 with err. */
static int resolve(PGconn *db, const char *bid, char *err, size_t errlen)
{
	PGresult *r = query(db, "SELECT sm_resolve_frames($1)", 1, &bid, PGRES_TUPLES_OK, "resolving frames", err,
			    errlen);
	int n;

	if (!r)
		return -1;
	n = (int)db_get_i64(r, 0, 0);
	PQclear(r);
	return n;
}

static int insert_chunk(PGconn *db, const char *bid, const struct dsym *s, size_t n, char *err, size_t errlen)
{
	struct buf addr = BUF_INIT(SYM_PARAM_MAX), size = BUF_INIT(SYM_PARAM_MAX), name = BUF_INIT(SYM_PARAM_MAX);
	const char *p[4];
	int rc = buf_putc(&addr, '{') | buf_putc(&size, '{') | buf_putc(&name, '{');

	for (size_t i = 0; i < n; i++) {
		if (i)
			rc |= buf_putc(&addr, ',') | buf_putc(&size, ',') | buf_putc(&name, ',');
		rc |= buf_put_i64(&addr, (int64_t)s[i].addr) | buf_put_i64(&size, (int64_t)s[i].size) |
		      db_put_array_str(&name, s[i].name, strlen(s[i].name));
	}
	rc |= buf_putc(&addr, '}') | buf_putc(&size, '}') | buf_putc(&name, '}');
	if (rc) {
		snprintf(err, errlen, "symbols: %s", buf_error_text(buf_error(&name) ? &name : &addr));
		rc = -1;
		goto out_release;
	}
	p[0] = bid;
	p[1] = buf_cstr(&addr);
	p[2] = buf_cstr(&size);
	p[3] = buf_cstr(&name);
	rc = step(db, "INSERT INTO debug_symbols (build_id, addr, size, name)"
		      " SELECT $1, * FROM unnest($2::bigint[], $3::bigint[], $4::text[]) ON CONFLICT DO NOTHING",
		      4, p, "storing symbols", err, errlen);
out_release:
	buf_release(&addr);
	buf_release(&size);
	buf_release(&name);
	return rc;
}

int symstore_put(PGconn *db, const struct debuginfo *d, const char *source, const char *path, char *err,
		 size_t errlen)
{
	const char *bid = debuginfo_build_id(d);
	const struct dsym *s = debuginfo_symbols(d);
	size_t n = debuginfo_count(d);
	char nbuf[24];
	const char *p[4];
	int resolved;

	if (!bid[0]) {
		snprintf(err, errlen, "the file has no GNU build id (.note.gnu.build-id)");
		return -1;
	}
	if (n == 0) {
		snprintf(err, errlen, "the file has no function symbols (.symtab or .dynsym)");
		return -1;
	}
	if (db_exec(db, "BEGIN", err, errlen) < 0)
		return -1;
	p[0] = bid;
	if (step(db, "DELETE FROM debug_symbols WHERE build_id = $1", 1, p, "replacing symbols", err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < n; i += SYM_CHUNK)
		if (insert_chunk(db, bid, s + i, n - i < SYM_CHUNK ? n - i : SYM_CHUNK, err, errlen) < 0)
			return -1;
	snprintf(nbuf, sizeof(nbuf), "%zu", n);
	p[1] = source;
	p[2] = path;
	p[3] = nbuf;
	if (step(db, "INSERT INTO debug_files (build_id, source, path, symbols, tried_at, error)"
		     " VALUES ($1, $2, left($3, 1000), $4, now(), NULL) ON CONFLICT (build_id) DO UPDATE"
		     " SET source = EXCLUDED.source, path = EXCLUDED.path, symbols = EXCLUDED.symbols,"
		     " tried_at = now(), error = NULL", 4, p, "recording the debug file", err, errlen) < 0)
		return -1;
	if ((resolved = resolve(db, bid, err, errlen)) < 0) {
		PQclear(PQexec(db, "ROLLBACK"));
		return -1;
	}
	if (db_exec(db, "COMMIT", err, errlen) < 0)
		return -1;
	return resolved;
}

static int record_failure(PGconn *db, const char *bid, const char *why, char *err, size_t errlen)
{
	const char *p[2] = { bid, why };
	PGresult *r = query(db, "INSERT INTO debug_files (build_id, tried_at, error) VALUES ($1, now(), left($2, 1000))"
			    " ON CONFLICT (build_id) DO UPDATE SET tried_at = now(), error = EXCLUDED.error"
			    " WHERE debug_files.source IS NULL", 2, p, PGRES_COMMAND_OK, "recording a failed search",
			    err, errlen);

	PQclear(r);
	return r ? 0 : -1;
}

int symstore_resolve_pending(PGconn *db, const struct debuginfo_opts *opts, int retry_s, int max_builds,
			     char *err, size_t errlen)
{
	char rbuf[24], mbuf[24];
	const char *p[2] = { rbuf, mbuf };
	struct debuginfo *d = NULL;
	PGresult *r;
	int total = 0;

	snprintf(rbuf, sizeof(rbuf), "%d", retry_s > 0 ? retry_s : 0);
	snprintf(mbuf, sizeof(mbuf), "%d", max_builds > 0 ? max_builds : 1);
	r = query(db, "SELECT u.build_id, f.source IS NOT NULL FROM"
		      " (SELECT a.build_id, count(*) AS n FROM frame_addrs a JOIN frames fr ON fr.id = a.frame_id"
		      "  WHERE fr.canon_id IS NULL GROUP BY 1) u LEFT JOIN debug_files f USING (build_id)"
		      " WHERE f.build_id IS NULL OR f.source IS NOT NULL"
		      "    OR f.tried_at < now() - make_interval(secs => $1::integer)"
		      " ORDER BY u.n DESC, u.build_id LIMIT $2::integer", 2, p, PGRES_TUPLES_OK,
		      "reading unresolved frames", err, errlen);
	if (!r)
		return -1;
	for (int i = 0; i < PQntuples(r); i++) {
		const char *bid = PQgetvalue(r, i, 0);
		int n;

		if (PQgetvalue(r, i, 1)[0] == 't') {
			/* symbols known: offsets that arrived since */
			if ((n = resolve(db, bid, err, errlen)) < 0)
				goto fail_clear;
			total += n;
			continue;
		}
		if (!d && !(d = debuginfo_open())) {
			snprintf(err, errlen, "out of memory");
			goto fail_clear;
		}
		if (debuginfo_find(d, bid, opts) < 0) {
			log_info("no debug file", "build_id=%s error=\"%s\"", bid, debuginfo_error(d));
			if (record_failure(db, bid, debuginfo_error(d), err, errlen) < 0)
				goto fail_clear;
			continue;
		}
		n = symstore_put(db, d, debuginfo_source(d), debuginfo_path(d), err, errlen);
		if (n < 0)
			goto fail_clear;
		log_info("frames named", "build_id=%s source=\"%s\" path=\"%s\" symbols=%zu frames=%d", bid,
			 debuginfo_source(d), debuginfo_path(d), debuginfo_count(d), n);
		total += n;
	}
	PQclear(r);
	debuginfo_free(d);
	return total;
fail_clear:
	PQclear(r);
	debuginfo_free(d);
	return -1;
}

int symstore_builds(PGconn *db, int missing_only, size_t max, struct symstore_build **out, char *err,
		    size_t errlen)
{
	char mbuf[24];
	const char *p[2] = { missing_only ? "t" : "f", mbuf };
	struct symstore_build *b;
	PGresult *r;
	int n;

	*out = NULL;
	snprintf(mbuf, sizeof(mbuf), "%zu", max);
	r = query(db, "SELECT k.build_id, coalesce(u.module, ''), coalesce(f.source, ''), coalesce(f.path, ''),"
			     " coalesce(f.symbols, 0), coalesce(u.n, 0), coalesce(to_char(f.tried_at AT TIME ZONE 'UTC',"
			     " 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), ''), coalesce(f.error, '')"
			     " FROM (SELECT build_id FROM debug_files UNION SELECT build_id FROM frame_addrs) k"
			     " LEFT JOIN debug_files f USING (build_id)"
			     " LEFT JOIN (SELECT a.build_id, count(*) FILTER (WHERE fr.canon_id IS NULL) AS n,"
			     "            min(regexp_replace(fr.name, '\\+0x[0-9a-fA-F]+$', '')) AS module"
			     "            FROM frame_addrs a JOIN frames fr ON fr.id = a.frame_id GROUP BY 1) u USING (build_id)"
			     " WHERE NOT $1::boolean OR (coalesce(u.n, 0) > 0 AND f.source IS NULL)"
			     " ORDER BY coalesce(u.n, 0) DESC, k.build_id LIMIT $2::bigint", 2, p, PGRES_TUPLES_OK,
		  "reading build ids", err, errlen);
	if (!r)
		return -1;
	n = PQntuples(r);
	if (!(b = calloc((size_t)n + 1, sizeof(*b)))) {
		PQclear(r);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		snprintf(b[i].build_id, sizeof(b[i].build_id), "%s", PQgetvalue(r, i, 0));
		snprintf(b[i].module, sizeof(b[i].module), "%s", PQgetvalue(r, i, 1));
		snprintf(b[i].source, sizeof(b[i].source), "%s", PQgetvalue(r, i, 2));
		snprintf(b[i].path, sizeof(b[i].path), "%s", PQgetvalue(r, i, 3));
		b[i].symbols = db_get_i64(r, i, 4);
		b[i].unresolved = db_get_i64(r, i, 5);
		snprintf(b[i].tried_at, sizeof(b[i].tried_at), "%s", PQgetvalue(r, i, 6));
		snprintf(b[i].error, sizeof(b[i].error), "%s", PQgetvalue(r, i, 7));
	}
	PQclear(r);
	*out = b;
	return n;
}
