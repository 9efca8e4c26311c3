/* profiles: uploads of training profiles and their merge per build (see profiles.h). */
#include "ingest/profiles.h"
#include "agent/guard/profile.h"
#include "common/db.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int profiles_build_id_ok(const char *s)
{
	size_t n = strlen(s), i = strncmp(s, "path-", 5) == 0 ? 5 : 0;

	if (n == i || n > 128)
		return 0;
	for (; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int get_int(struct json_val v, const char *name, int64_t min, int64_t max, int64_t *out, char *err,
		   size_t errlen)
{
	if (json_val_int(v, out) != 0 || *out < min || *out > max) {
		snprintf(err, errlen, "%s: required, a whole number from %lld to %lld", name, (long long)min,
			 (long long)max);
		return -1;
	}
	return 0;
}

/*
 * The profile itself is read by the guard's loader, which builds a json-c tree of it: a tighter
 * budget of objects and arrays there (a real profile has one per 40 bytes or more) keeps that
 * tree within a few times the body.
 */
static const struct json_limits upload_limits = { 32, 2, 128 };

int profiles_parse(const char *body, size_t len, struct profile_upload *u, char *err, size_t errlen)
{
	enum { F_V, F_HOST, F_PID, F_STARTED, F_PROFILE, F_N };
	static const char *const names[F_N + 1] = { "v", "host", "pid", "started_ns", "profile", NULL };
	struct json_val f[F_N];
	struct json_reader r;
	struct gprofile *p = NULL;
	const char *ptext;
	size_t plen;
	char msg[256];
	int64_t v;
	int rc = -1;

	memset(u, 0, sizeof(*u));
	u->text.max = (size_t)64 << 20;
	if (json_check_body(body, len, &upload_limits, msg, sizeof(msg)) < 0) {
		snprintf(err, errlen, "not JSON: %s", msg);
		return -1;
	}
	if (json_val_type(json_root(body, len)) != JV_OBJECT) {
		snprintf(err, errlen, "the upload must be one JSON object");
		return -1;
	}
	/* unknown fields are skipped unread, as in reports (newer agents) */
	if (json_fields(json_root(body, len), "", names, false, f, err, errlen) < 0)
		return -1;
	if (json_val_int(f[F_V], &v) != 0 || v != 1) {
		snprintf(err, errlen, "v: must be 1");
		return -1;
	}
	json_reader_at(&r, f[F_HOST]);
	plen = json_val_type(f[F_HOST]) == JV_STRING ? json_string_into(&r, u->host, sizeof(u->host)) : 0;
	if (plen < 1 || plen >= sizeof(u->host)) {
		snprintf(err, errlen, "host: required, 1 to %zu bytes, no NUL", sizeof(u->host) - 1);
		return -1;
	}
	if (get_int(f[F_PID], "pid", 1, INT32_MAX, &u->pid, err, errlen) < 0 ||
	    get_int(f[F_STARTED], "started_ns", 0, INT64_MAX / 2, &u->started_ns, err, errlen) < 0)
		return -1;
	if (json_val_type(f[F_PROFILE]) != JV_OBJECT) {
		snprintf(err, errlen, "profile: required, the profile object (docs/guard.md)");
		return -1;
	}
	plen = json_val_text(f[F_PROFILE], &ptext);
	if (!(p = gp_new())) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (gp_load_text(p, ptext, plen) < 0) {
		snprintf(err, errlen, "profile: %s", gp_error(p));
		goto out;
	}
	if (!profiles_build_id_ok(p->build_id)) {
		snprintf(err, errlen, "profile.build_id: lower-case hex (or path- and hex), 1 to 128 characters");
		goto out;
	}
	if (p->units == 0) {
		snprintf(err, errlen, "profile: no units learnt");
		goto out;
	}
	snprintf(u->build_id, sizeof(u->build_id), "%s", p->build_id);
	snprintf(u->exe, sizeof(u->exe), "%s", p->exe ? p->exe : "");
	u->units = p->units;
	if (gp_write(p, &u->text) < 0 || buf_error(&u->text) != BUF_OK) {
		snprintf(err, errlen, "profile: too large to keep");
		goto out;
	}
	rc = 0;
out:
	gp_free(p);
	return rc;
}

int profiles_store(PGconn *db, const struct profile_upload *u, char *err, size_t errlen)
{
	char pid[24], started[24], units[24];
	const char *params[7] = { u->build_id, u->host, pid, started, u->exe, units, buf_cstr((struct buf *)&u->text) };
	PGresult *r;

	snprintf(pid, sizeof(pid), "%lld", (long long)u->pid);
	snprintf(started, sizeof(started), "%lld", (long long)u->started_ns);
	snprintf(units, sizeof(units), "%llu", (unsigned long long)u->units);
	r = PQexecParams(db,
		"WITH up AS (INSERT INTO profile_uploads (build_id, host, pid, started_at, exe, units, profile, uploaded_at)"
		" VALUES ($1, $2, $3::integer, to_timestamp($4::bigint / 1e9), $5, $6::bigint, $7, clock_timestamp())"
		" ON CONFLICT (build_id, host, pid, started_at) DO UPDATE SET exe = EXCLUDED.exe, units = EXCLUDED.units,"
		" profile = EXCLUDED.profile, uploaded_at = clock_timestamp() RETURNING build_id)"
		" UPDATE profiles_merged m SET stale = true FROM up WHERE m.build_id = up.build_id",
		7, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		db_errcpy(err, errlen, "storing the profile", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	PQclear(r);
	return 0;
}

/* Merges every upload of the build, stores the result and appends its text to out. 0, 1 (no
 * upload), or -1. */
static int merge(PGconn *db, const char *build_id, struct buf *out, char *err, size_t errlen)
{
	const char *params[1] = { build_id };
	/* the newest upload read: one stored after it (another worker's) leaves the merge stale */
	PGresult *r = PQexecParams(db, "SELECT profile, host, max(uploaded_at) OVER ()::text FROM profile_uploads"
				   " WHERE build_id = $1 ORDER BY host, pid, started_at", 1, NULL, params, NULL, NULL, 0);
	struct gprofile *into = NULL, *one = NULL;
	struct buf text = BUF_INIT((size_t)256 << 20), summary = BUF_INIT((size_t)64 << 20);
	struct jsonw w;
	int64_t t0 = util_now_mono_ns();
	int rc = -1, n, hosts = 0;

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "reading the uploads", PQresultErrorMessage(r));
		goto out;
	}
	if ((n = PQntuples(r)) == 0) {
		rc = 1;
		goto out;
	}
	if (!(into = gp_new())) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		const char *t = PQgetvalue(r, i, 0);

		if (i == 0 || strcmp(PQgetvalue(r, i, 1), PQgetvalue(r, i - 1, 1)) != 0)
			hosts++;
		gp_free(one);
		if (!(one = gp_new()) || gp_load_text(one, t, (size_t)PQgetlength(r, i, 0)) < 0 ||
		    gp_merge(into, one) < 0) {
			snprintf(err, errlen, "merging the uploads: %s", one ? gp_error(one)[0] ? gp_error(one)
				 : gp_error(into) : "out of memory");
			goto out;
		}
		if (i == 0) {
			/* k and the cut are the build's settings, as sm-guard profile merge keeps them */
			into->k = one->k;
			into->cut = one->cut;
		}
	}
	into->updated_s = (int64_t)time(NULL);
	/* the floor of the thresholds is each guarding process's own setting */
	if (gp_cluster(into, 0) < 0 || gp_write(into, &text) < 0) {
		snprintf(err, errlen, "merging the uploads: %s", gp_error(into));
		goto out;
	}
	jsonw_init_compact(&w, &summary);
	gp_summary(into, &w);
	if (jsonw_finish(&w) < 0 || buf_error(&text) != BUF_OK) {
		snprintf(err, errlen, "merging the uploads: the merged profile is too large");
		goto out;
	}
	{
		char nh[16], np[16], units[24], ms[32];
		const char *p[9] = { build_id, into->exe ? into->exe : "", buf_cstr(&text), nh, np, units,
				     buf_cstr(&summary), ms, PQgetvalue(r, 0, 2) };
		PGresult *u;

		snprintf(nh, sizeof(nh), "%d", hosts);
		snprintf(np, sizeof(np), "%d", n);
		snprintf(units, sizeof(units), "%llu", (unsigned long long)into->units);
		snprintf(ms, sizeof(ms), "%.3f", (double)(util_now_mono_ns() - t0) / 1e6);
		u = PQexecParams(db,
			"INSERT INTO profiles_merged (build_id, exe, profile, hosts, processes, units, summary, merge_ms,"
			" stale) VALUES ($1, $2, $3, $4::integer, $5::integer, $6::bigint, $7::jsonb, $8::float8,"
			" EXISTS (SELECT 1 FROM profile_uploads WHERE build_id = $1 AND uploaded_at > $9::timestamptz))"
			" ON CONFLICT (build_id) DO UPDATE SET exe = EXCLUDED.exe, profile = EXCLUDED.profile,"
			" hosts = EXCLUDED.hosts, processes = EXCLUDED.processes, units = EXCLUDED.units,"
			" summary = EXCLUDED.summary, merge_ms = EXCLUDED.merge_ms, merged_at = clock_timestamp(),"
			" stale = EXCLUDED.stale",
			9, NULL, p, NULL, NULL, 0);
		if (PQresultStatus(u) != PGRES_COMMAND_OK) {
			db_errcpy(err, errlen, "storing the merged profile", PQresultErrorMessage(u));
			PQclear(u);
			goto out;
		}
		PQclear(u);
	}
	buf_append(out, text.data, text.len);
	if (buf_error(out) != BUF_OK) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	gp_free(one);
	gp_free(into);
	buf_release(&text);
	buf_release(&summary);
	PQclear(r);
	return rc;
}

int profiles_fetch(PGconn *db, const char *build_id, int64_t min_age_ms, struct buf *out, char *err,
		   size_t errlen)
{
	char age[24];
	const char *params[2] = { build_id, age };
	PGresult *r;

	snprintf(age, sizeof(age), "%lld", (long long)min_age_ms);
	r = PQexecParams(db, "SELECT profile, stale AND merged_at < now() - make_interval(secs => $2::float8 / 1000)"
			 " FROM profiles_merged WHERE build_id = $1", 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "reading the merged profile", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	if (PQntuples(r) == 1 && PQgetvalue(r, 0, 1)[0] == 'f') {
		/* fresh, or merged too recently to merge again */
		buf_append(out, PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0));
		PQclear(r);
		if (buf_error(out) != BUF_OK) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		return 0;
	}
	PQclear(r);
	return merge(db, build_id, out, err, errlen);
}

int profiles_refresh(PGconn *db, const char *build_id, int64_t min_age_ms, char *err, size_t errlen)
{
	char age[24];
	const char *params[2] = { build_id, age };
	PGresult *r;
	bool due;

	snprintf(age, sizeof(age), "%lld", (long long)min_age_ms);
	r = PQexecParams(db, "SELECT NOT EXISTS (SELECT 1 FROM profiles_merged WHERE build_id = $1 AND NOT (stale AND"
			 " merged_at < now() - make_interval(secs => $2::float8 / 1000)))", 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "reading the merged profile", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	due = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (due) {
		struct buf scratch = BUF_INIT((size_t)256 << 20);
		int rc = merge(db, build_id, &scratch, err, errlen);

		buf_release(&scratch);
		return rc < 0 ? -1 : 0;
	}
	return 0;
}
