/* signature: performance signatures, export/import and coverage (see signature.h). */
#include "clusterer/signature.h"
#include "common/db.h"
#include "common/evpack.h"
#include "common/imap.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/vec.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIG_MAX_FRAMES 512
#define SIG_MAX_FRAME 1024

static bool status_ok(const char *s)
{
	return strcmp(s, "open") == 0 || strcmp(s, "known") == 0 || strcmp(s, "fixed") == 0;
}

static int check_frames(const char *const *frames, size_t n, char *err, size_t errlen)
{
	if (n < 1 || n > SIG_MAX_FRAMES) {
		snprintf(err, errlen, "frames: 1 to %d frames, not %zu", SIG_MAX_FRAMES, n);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (!frames[i][0] || strlen(frames[i]) > SIG_MAX_FRAME) {
			snprintf(err, errlen, "frames[%zu]: a frame of 1 to %d bytes", i, SIG_MAX_FRAME);
			return -1;
		}
	return 0;
}

int sig_create(PGconn *db, const char *name, const char *const *frames, size_t nframes,
	       const char *status, const char *note, int64_t from_cluster, int64_t *id, char *err,
	       size_t errlen)
{
	struct buf arr = BUF_INIT(0);
	char cl[24];
	const char *params[5];
	PGresult *r;

	if (!name || !*name || strlen(name) > 255) {
		snprintf(err, errlen, "name: 1 to 255 bytes");
		return SIG_EINVAL;
	}
	if (!status_ok(status)) {
		snprintf(err, errlen, "status: must be open, known or fixed");
		return SIG_EINVAL;
	}
	if (check_frames(frames, nframes, err, errlen) < 0)
		return SIG_EINVAL;
	buf_putc(&arr, '{');
	for (size_t i = 0; i < nframes; i++) {
		if (i)
			buf_putc(&arr, ',');
		db_put_array_str(&arr, frames[i], strlen(frames[i]));
	}
	if (buf_putc(&arr, '}') < 0) {
		buf_release(&arr);
		snprintf(err, errlen, "out of memory");
		return SIG_EFAIL;
	}
	snprintf(cl, sizeof(cl), "%lld", (long long)from_cluster);
	params[0] = name;
	params[1] = buf_cstr(&arr);
	params[2] = status;
	params[3] = note ? note : "";
	params[4] = from_cluster > 0 ? cl : NULL;
	/* the cluster must exist now; its id and run's are kept as numbers that outlive them */
	r = PQexecParams(db, "INSERT INTO signatures (name, frames, status, note, from_cluster, from_run)"
			     " SELECT $1, $2::text[], $3, $4, $5::bigint, (SELECT run_id FROM clusters WHERE id = $5::bigint)"
			     " WHERE $5::bigint IS NULL OR EXISTS (SELECT 1 FROM clusters WHERE id = $5::bigint)"
			     " RETURNING id",
			 5, NULL, params, NULL, NULL, 0);
	buf_release(&arr);
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 0) {
		PQclear(r);
		snprintf(err, errlen, "from_cluster: no cluster %s", cl);
		return SIG_ENOTFOUND;
	}
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		int rc = SIG_EFAIL;

		if (state && strcmp(state, "23505") == 0) {
			snprintf(err, errlen, "name: a signature named '%s' exists already", name);
			rc = SIG_EEXIST;
		} else if (state && strcmp(state, "23503") == 0) {
			snprintf(err, errlen, "from_cluster: no cluster %s", cl);
			rc = SIG_ENOTFOUND;
		} else {
			db_errcpy(err, errlen, "creating the signature", PQresultErrorMessage(r));
		}
		PQclear(r);
		return rc;
	}
	*id = db_get_i64(r, 0, 0);
	PQclear(r);
	return 0;
}

int sig_create_from_problem(PGconn *db, int64_t problem, const char *name, const char *status,
			    const char *note, size_t *n, char *err, size_t errlen)
{
	char pid[24];
	const char *params[4];
	PGresult *r;

	*n = 0;
	/* room for " #NNNNN" after the name */
	if (!name || !*name || strlen(name) > 248) {
		snprintf(err, errlen, "name: 1 to 248 bytes (a problem's signatures add \" #2\"...)");
		return SIG_EINVAL;
	}
	if (!status_ok(status)) {
		snprintf(err, errlen, "status: must be open, known or fixed");
		return SIG_EINVAL;
	}
	snprintf(pid, sizeof(pid), "%lld", (long long)problem);
	params[0] = pid;
	params[1] = name;
	params[2] = status;
	params[3] = note ? note : "";
	/* one statement: all of the problem's clusters or none */
	r = PQexecParams(db, "INSERT INTO signatures (name, frames, status, note, from_cluster, from_run)"
			     " SELECT CASE m.o WHEN 1 THEN $2 ELSE $2 || ' #' || m.o END,"
			     "  (SELECT array_agg(f.name ORDER BY u.o) FROM unnest(c.common_frame_ids) WITH ORDINALITY"
			     "   AS u(fid, o) JOIN frames f ON f.id = u.fid), $3, $4, c.id, c.run_id"
			     " FROM problems p CROSS JOIN LATERAL unnest(p.members) WITH ORDINALITY AS m(cid, o)"
			     " JOIN clusters c ON c.id = m.cid WHERE p.id = $1::bigint ORDER BY m.o RETURNING id",
			 4, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		int rc = SIG_EFAIL;

		if (state && strcmp(state, "23505") == 0) {
			snprintf(err, errlen, "name: a signature named '%s' (or '%s #N') exists already", name, name);
			rc = SIG_EEXIST;
		} else {
			db_errcpy(err, errlen, "creating the problem's signatures", PQresultErrorMessage(r));
		}
		PQclear(r);
		return rc;
	}
	*n = (size_t)PQntuples(r);
	PQclear(r);
	if (*n == 0) {
		snprintf(err, errlen, "from_problem: no problem %s", pid);
		return SIG_ENOTFOUND;
	}
	return 0;
}

int sig_update(PGconn *db, int64_t id, const char *status, const char *note, char *err, size_t errlen)
{
	char idbuf[24];
	const char *params[3] = { idbuf, status, note };
	PGresult *r;

	if (status && !status_ok(status)) {
		snprintf(err, errlen, "status: must be open, known or fixed");
		return SIG_EINVAL;
	}
	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
	r = PQexecParams(db, "UPDATE signatures SET status = coalesce($2, status), note = coalesce($3, note),"
			     " updated_at = now() WHERE id = $1", 3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		db_errcpy(err, errlen, "updating the signature", PQresultErrorMessage(r));
		PQclear(r);
		return SIG_EFAIL;
	}
	if (strcmp(PQcmdTuples(r), "1") != 0) {
		snprintf(err, errlen, "signature %s: no such signature", idbuf);
		PQclear(r);
		return SIG_ENOTFOUND;
	}
	PQclear(r);
	return 0;
}

int sig_export(PGconn *db, struct buf *out, char *err, size_t errlen)
{
	/* one row per frame, signatures by name (a signature without frames: one row, frame null) */
	PGresult *r = PQexec(db,
		"SELECT s.name, s.note, s.status, f.frame FROM signatures s"
		" LEFT JOIN LATERAL unnest(s.frames) WITH ORDINALITY AS f(frame, ord) ON true"
		" ORDER BY s.name, f.ord");
	struct jsonw w;
	int n;

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "exporting signatures", PQresultErrorMessage(r));
		PQclear(r);
		return SIG_EFAIL;
	}
	n = PQntuples(r);
	jsonw_init(&w, out);
	jsonw_object(&w);
	jsonw_ki64(&w, "version", 1);
	jsonw_karray(&w, "signatures");
	for (int i = 0; i < n; i++) {
		if (i == 0 || strcmp(PQgetvalue(r, i, 0), PQgetvalue(r, i - 1, 0)) != 0) {
			jsonw_object(&w);
			jsonw_kstr(&w, "name", PQgetvalue(r, i, 0));
			jsonw_kstr(&w, "note", PQgetvalue(r, i, 1));
			jsonw_karray(&w, "frames");
		}
		if (!PQgetisnull(r, i, 3))
			jsonw_str(&w, PQgetvalue(r, i, 3));
		if (i + 1 == n || strcmp(PQgetvalue(r, i, 0), PQgetvalue(r, i + 1, 0)) != 0) {
			jsonw_end(&w);
			jsonw_kstr(&w, "status", PQgetvalue(r, i, 2));
			jsonw_end(&w);
		}
	}
	jsonw_end(&w);
	jsonw_end(&w);
	PQclear(r);
	if (jsonw_finish(&w) < 0 || buf_putc(out, '\n') < 0) {
		snprintf(err, errlen, "exporting signatures: %s", jsonw_error(&w));
		return SIG_EFAIL;
	}
	return 0;
}

/* The decoded length of the string at v, or 0 for a value that is not a string. */
static size_t str_len(struct json_val v)
{
	struct json_reader r;
	char one[1];

	if (json_val_type(v) != JV_STRING)
		return 0;
	json_reader_at(&r, v);
	return json_string_into(&r, one, sizeof(one));
}

/* Check every field of an export document (closed: unknown fields are refused) before anything is
 * written. */
static int check_document(const char *json, size_t len, size_t *n, char *err, size_t errlen)
{
	static const char *const top[] = { "version", "signatures", NULL };
	static const char *const one[] = { "name", "frames", "status", "note", NULL };
	struct json_val f[2], g[4];
	struct json_reader r, fr;
	int64_t v;
	char path[48], st[8];

	*n = 0;
	if (json_val_type(json_root(json, len)) != JV_OBJECT) {
		snprintf(err, errlen, "signatures: required, an array");
		return SIG_EINVAL;
	}
	if (json_fields(json_root(json, len), "", top, true, f, err, errlen) < 0)
		return SIG_EINVAL;
	if (json_val_type(f[1]) != JV_ARRAY) {
		snprintf(err, errlen, "signatures: required, an array");
		return SIG_EINVAL;
	}
	if (f[0].p && (json_val_int(f[0], &v) != 0 || v != 1)) {
		snprintf(err, errlen, "version: unsupported (this program reads 1)");
		return SIG_EINVAL;
	}
	json_reader_at(&r, f[1]);
	json_enter(&r);
	for (size_t i = 0; json_next_item(&r); i++, json_skip(&r)) {
		size_t nf, k = 0;

		*n = i + 1;
		snprintf(path, sizeof(path), "signatures[%zu]", i);
		if (json_val_type(json_here(&r)) != JV_OBJECT) {
			snprintf(err, errlen, "%s: must be an object", path);
			return SIG_EINVAL;
		}
		if (json_fields(json_here(&r), path, one, true, g, err, errlen) < 0)
			return SIG_EINVAL;
		if (str_len(g[0]) < 1 || str_len(g[0]) > 255) {
			snprintf(err, errlen, "%s.name: a string of 1 to 255 bytes", path);
			return SIG_EINVAL;
		}
		nf = json_count(g[1]);
		if (json_val_type(g[1]) != JV_ARRAY || nf < 1 || nf > SIG_MAX_FRAMES) {
			snprintf(err, errlen, "%s.frames: an array of 1 to %d frames", path, SIG_MAX_FRAMES);
			return SIG_EINVAL;
		}
		json_reader_at(&fr, g[1]);
		json_enter(&fr);
		for (; json_next_item(&fr); k++, json_skip(&fr))
			if (str_len(json_here(&fr)) < 1 || str_len(json_here(&fr)) > SIG_MAX_FRAME) {
				snprintf(err, errlen, "%s.frames[%zu]: a frame of 1 to %d bytes", path, k,
					 SIG_MAX_FRAME);
				return SIG_EINVAL;
			}
		if (g[2].p) {
			struct json_reader sr;

			json_reader_at(&sr, g[2]);
			if (json_val_type(g[2]) != JV_STRING || json_string_into(&sr, st, sizeof(st)) >= sizeof(st) ||
			    !status_ok(st)) {
				snprintf(err, errlen, "%s.status: must be open, known or fixed", path);
				return SIG_EINVAL;
			}
		}
		if (g[3].p && json_val_type(g[3]) != JV_STRING) {
			snprintf(err, errlen, "%s.note: must be a string", path);
			return SIG_EINVAL;
		}
	}
	return 0;
}

int sig_import(PGconn *db, const char *json, size_t len, size_t *n, char *err, size_t errlen)
{
	const char *params[1];
	char msg[256];

	*n = 0;
	/* no tree: the document is read in place, and PostgreSQL's jsonb never sees a NUL */
	if (json_check_body(json, len, &json_body_limits, msg, sizeof(msg)) < 0) {
		snprintf(err, errlen, "not JSON: %s", msg);
		return SIG_EINVAL;
	}
	if (check_document(json, len, n, err, errlen) < 0)
		return SIG_EINVAL;
	params[0] = json;
	if (db_command(db,
		"INSERT INTO signatures (name, frames, status, note)"
		" SELECT s->>'name', ARRAY(SELECT jsonb_array_elements_text(s->'frames')),"
		"  coalesce(s->>'status', 'open'), coalesce(s->>'note', '')"
		" FROM jsonb_array_elements($1::jsonb->'signatures') AS s"
		" ON CONFLICT (name) DO UPDATE SET frames = EXCLUDED.frames, status = EXCLUDED.status,"
		"  note = EXCLUDED.note, updated_at = now()",
		1, params, "importing signatures", err, errlen) < 0)
		return SIG_EFAIL;
	return 0;
}

/* Is needle a subsequence of hay (order kept, gaps allowed)? */
static bool subseq(const int32_t *needle, int nn, const int32_t *hay, int nh)
{
	int i = 0;

	for (int j = 0; j < nh && i < nn; j++)
		if (hay[j] == needle[i])
			i++;
	return i == nn;
}

/*
 * The signatures by their innermost frame: a stack can only match the signatures whose innermost frame
 * it holds, so a stack is tested against those alone, not against every signature (with 60,000
 * signatures the full comparison of every stack took minutes).
 */
struct sig_index {
	struct imap first;           /* frame id -> its signatures' start in sigs */
	uint32_t *start, *sigs;      /* bucket b: sigs[start[b] .. start[b + 1]) */
	uint32_t *stamp;             /* per signature: the last stack tested + 1 (each once per stack) */
	uint32_t stack;
	int32_t *frames;             /* every signature's frame ids, one after the other (few cache misses) */
	uint32_t *off;               /* signature i: frames[off[i] .. off[i] + sl[i]) */
	int *sl;                     /* <= 0: never matches */
};

static void index_free(struct sig_index *x)
{
	imap_free(&x->first);
	free(x->start);
	free(x->sigs);
	free(x->stamp);
	free(x->frames);
	free(x->off);
	free(x->sl);
	memset(x, 0, sizeof(*x));
}

/* Index the signatures whose frame ids (PostgreSQL arrays, -1 for a frame never seen) are in column col
 * of rs's nsig rows. 0, or -1 out of memory. */
static int index_build(struct sig_index *x, PGresult *rs, int col, size_t nsig)
{
	struct imap first = IMAP_INIT;
	uint32_t *count = NULL;
	int32_t tmp[SIG_MAX_FRAMES];
	size_t nb = 0, nf = 0, cap = 0;
	uint64_t b;

	memset(x, 0, sizeof(*x));
	x->first = first;
	x->stamp = calloc(nsig + 1, sizeof(uint32_t));
	x->sigs = calloc(nsig + 1, sizeof(uint32_t));
	x->off = calloc(nsig + 1, sizeof(uint32_t));
	x->sl = calloc(nsig + 1, sizeof(int));
	count = calloc(nsig + 2, sizeof(uint32_t));
	x->start = calloc(nsig + 2, sizeof(uint32_t));
	if (!x->stamp || !x->sigs || !x->off || !x->sl || !count || !x->start)
		goto fail;
	for (size_t i = 0; i < nsig; i++) {
		int n = db_parse_int_array(PQgetvalue(rs, (int)i, col), tmp, SIG_MAX_FRAMES);

		x->sl[i] = n;
		x->off[i] = (uint32_t)nf;
		if (n <= 0)
			continue;
		if (vec_reserve(&x->frames, &cap, nf + (size_t)n, sizeof(int32_t)) < 0)
			goto fail;
		memcpy(x->frames + nf, tmp, (size_t)n * sizeof(int32_t));
		nf += (size_t)n;
		if (tmp[n - 1] < 0)
			continue;
		if (!imap_get(&x->first, (uint64_t)tmp[n - 1], &b)) {
			b = nb++;
			if (imap_put(&x->first, (uint64_t)tmp[n - 1], b) < 0)
				goto fail;
		}
		count[b + 1]++;
	}
	for (size_t i = 0; i < nb; i++)
		x->start[i + 1] = x->start[i] + count[i + 1];
	memset(count, 0, (nsig + 2) * sizeof(uint32_t));
	for (size_t i = 0; i < nsig; i++) {
		int n = x->sl[i];

		if (n > 0 && x->frames[x->off[i] + (uint32_t)n - 1] >= 0 &&
		    imap_get(&x->first, (uint64_t)x->frames[x->off[i] + (uint32_t)n - 1], &b))
			x->sigs[x->start[b] + count[b]++] = (uint32_t)i;
	}
	free(count);
	return 0;
fail:
	free(count);
	index_free(x);
	return -1;
}

/* fn(cls, i) for each signature i that stack[0 .. len) matches (a subsequence of it), once each. */
static void index_match(struct sig_index *x, const int32_t *stack, int len, void (*fn)(void *cls, uint32_t g),
			void *cls)
{
	uint32_t me = ++x->stack;
	uint64_t b;

	for (int j = 0; j < len; j++) {
		if (!imap_get(&x->first, (uint64_t)(uint32_t)stack[j], &b))
			continue;
		for (uint32_t k = x->start[b]; k < x->start[b + 1]; k++) {
			uint32_t g = x->sigs[k];

			if (x->stamp[g] == me)
				continue;
			x->stamp[g] = me;
			if (subseq(x->frames + x->off[g], x->sl[g], stack, len))
				fn(cls, g);
		}
	}
}

struct cover_hit {
	struct sig_coverage *out;
	uint64_t cost;
	bool any;
};

static void cover_hit(void *cls, uint32_t g)
{
	struct cover_hit *h = cls;

	h->out->by[g].cost_ns += h->cost;
	h->any = true;
}

int sig_coverage(PGconn *db, int64_t run, char kind, const int64_t *ids, size_t n, struct sig_coverage *out,
		 const struct budget *bud, char *err, size_t errlen)
{
	struct sig_index x = { .first = IMAP_INIT };
	struct buf idl = BUF_INIT(0);
	char runbuf[24], kindbuf[2] = { 0, 0 };
	const char *params[3];
	const char *mined;
	PGresult *rs = NULL, *rt = NULL;
	int32_t stack[SIG_MAX_FRAMES];
	int rc = -1;
	size_t ndistinct = n;

	memset(out, 0, sizeof(*out));
	snprintf(runbuf, sizeof(runbuf), "%lld", (long long)run);
	params[0] = runbuf;
	rt = PQexecParams(db, "SELECT coalesce(params->>'kind', 'both') FROM runs WHERE id = $1", 1, NULL, params,
			  NULL, NULL, 0);
	if (PQresultStatus(rt) != PGRES_TUPLES_OK || PQntuples(rt) != 1) {
		snprintf(err, errlen, "run %s: no such run", runbuf);
		rc = SIG_ENOTFOUND;
		goto out;
	}
	mined = PQgetvalue(rt, 0, 0);
	if (!kind)
		kind = strcmp(mined, "run") == 0 ? 'r' : 'w';
	if ((kind != 'w' && kind != 'r') || (strcmp(mined, "both") != 0 && mined[0] != kind)) {
		snprintf(err, errlen, "kind: run %s mined %s events only", runbuf, mined);
		rc = SIG_EINVAL;
		goto out;
	}
	out->kind = kindbuf[0] = kind;
	PQclear(rt);
	rt = NULL;
	buf_putc(&idl, '{');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(&idl, ',');
		buf_put_i64(&idl, ids[i]);
	}
	buf_putc(&idl, '}');
	params[1] = n ? buf_cstr(&idl) : NULL;
	/* each signature's frames as frame ids; -1 for a frame this database never saw */
	rs = db_query(db,
		"SELECT s.id, s.name, (SELECT array_agg(coalesce(f.canon_id, f.id, -1) ORDER BY u.o)"
		"   FROM unnest(s.frames) WITH ORDINALITY AS u(name, o) LEFT JOIN frames f ON f.name = u.name)::text"
		" FROM signatures s WHERE $1::bigint[] IS NULL OR s.id = ANY($1::bigint[]) ORDER BY s.id",
		1, params + 1, "reading signatures", err, errlen);
	if (!rs) {
		rc = SIG_EFAIL;
		goto out;
	}
	/* an id given twice counts once (the list comes from a URL: sort, not compare all pairs) */
	if (n) {
		int64_t *sorted = malloc(n * sizeof(*sorted));
		if (!sorted) {
			snprintf(err, errlen, "out of memory");
			rc = SIG_EFAIL;
			goto out;
		}
		memcpy(sorted, ids, n * sizeof(*sorted));
		vec_sort_i64(sorted, n);
		for (size_t i = 1; i < n; i++)
			ndistinct -= sorted[i] == sorted[i - 1];
		free(sorted);
	}
	if (n && (size_t)PQntuples(rs) != ndistinct) {
		snprintf(err, errlen, "signatures: %zu of the %zu ids given do not exist", ndistinct - (size_t)PQntuples(rs),
			 ndistinct);
		rc = SIG_EINVAL;
		goto out;
	}
	out->nby = (size_t)PQntuples(rs);
	out->by = calloc(out->nby + 1, sizeof(*out->by));
	if (!out->by) {
		snprintf(err, errlen, "out of memory");
		rc = SIG_EFAIL;
		goto out;
	}
	for (size_t i = 0; i < out->nby; i++) {
		out->by[i].id = db_get_i64(rs, (int)i, 0);
		snprintf(out->by[i].name, sizeof(out->by[i].name), "%s", PQgetvalue(rs, (int)i, 1));
	}
	if (index_build(&x, rs, 2, out->nby) < 0) {
		snprintf(err, errlen, "out of memory");
		rc = SIG_EFAIL;
		goto out;
	}
	params[2] = kindbuf;
	rt = db_query(db,
		"SELECT sum(rs.cost_ns), sm_canon_frames(st.frame_ids)::text FROM run_stacks rs"
		" JOIN stacks st ON st.id = rs.stack_id"
		" WHERE rs.run_id = $1 AND rs.kind = $2 GROUP BY rs.stack_id, st.frame_ids", 2,
		(const char *const[]){ params[0], params[2] }, "reading the run's stacks", err, errlen);
	if (!rt) {
		rc = SIG_EFAIL;
		goto out;
	}
	for (int row = 0; row < PQntuples(rt); row++) {
		struct cover_hit h = { out, (uint64_t)db_get_i64(rt, row, 0), false };
		int len = db_parse_int_array(PQgetvalue(rt, row, 1), stack, SIG_MAX_FRAMES);

		if ((row & 255) == 0 && budget_over(bud)) {
			snprintf(err, errlen, "coverage: stopped (out of time)");
			rc = SIG_EFAIL;
			goto out;
		}
		out->total_ns += h.cost;
		index_match(&x, stack, len, cover_hit, &h);
		if (h.any)
			out->covered_ns += h.cost;
	}
	out->coverage = out->total_ns ? (double)out->covered_ns / (double)out->total_ns : 0;
	rc = 0;
out:
	index_free(&x);
	PQclear(rs);
	PQclear(rt);
	buf_release(&idl);
	if (rc < 0) {
		free(out->by);
		out->by = NULL;
		out->nby = 0;
	}
	return rc;
}

const char *sig_order_name(enum sig_order o)
{
	static const char *const names[] = { "random", "greedy-total", "greedy-max", "signature" };

	return (unsigned)o < SIG_NORDERS ? names[o] : "?";
}

struct tstream {
	int64_t ref;
	uint64_t total_delay, max_delay;
	uint32_t first, n;           /* its signatures: t->stream_sigs[first .. first + n) */
};

/* Who reveals what: streams their signatures, signatures the (stack, stream) rows they match. */
struct triage_ctx {
	size_t nsig, nstacks;
	uint64_t total;
	const uint64_t *stack_cost;
	const uint32_t *stream_sigs;
	const uint32_t *sig_start, *sig_rows;   /* signature g: rows sig_rows[sig_start[g] .. sig_start[g + 1]) */
	uint8_t *revealed;           /* per signature, scratch of walk() */
	uint8_t *covered;            /* per row, scratch of walk() */
};

/* Open the streams in `order`; needed[i] = streams opened when level[i] is first reached. The
 * coverage grows by the rows of each newly revealed signature, each row counted once. */
static void walk(const struct triage_ctx *t, const struct tstream *st, const size_t *order, size_t n,
		 const double *level, double *needed)
{
	size_t li = 0;
	uint64_t cov = 0;

	memset(t->revealed, 0, t->nsig);
	memset(t->covered, 0, t->nstacks);
	for (size_t k = 0; k < n && li < SIG_LEVELS; k++) {
		const struct tstream *s = &st[order[k]];
		bool grew = false;
		double c;

		for (uint32_t i = s->first; i < s->first + s->n; i++) {
			uint32_t g = t->stream_sigs[i];

			if (t->revealed[g])
				continue;
			t->revealed[g] = 1;
			grew = true;
			for (uint32_t r = t->sig_start[g]; r < t->sig_start[g + 1]; r++)
				if (!t->covered[t->sig_rows[r]]) {
					t->covered[t->sig_rows[r]] = 1;
					cov += t->stack_cost[t->sig_rows[r]];
				}
		}
		if (!grew)
			continue;
		c = t->total ? (double)cov / (double)t->total : 0;
		while (li < SIG_LEVELS && c + 1e-12 >= level[li])
			needed[li++] = (double)(k + 1);
	}
	for (; li < SIG_LEVELS; li++)
		needed[li] = (double)n;
}

static int by_total(const void *a, const void *b, void *ctx)
{
	const struct tstream *st = ctx, *x = &st[*(const size_t *)a], *y = &st[*(const size_t *)b];

	if (x->total_delay != y->total_delay)
		return x->total_delay > y->total_delay ? -1 : 1;
	return x->ref < y->ref ? -1 : x->ref > y->ref;
}

static int by_max(const void *a, const void *b, void *ctx)
{
	const struct tstream *st = ctx, *x = &st[*(const size_t *)a], *y = &st[*(const size_t *)b];

	if (x->max_delay != y->max_delay)
		return x->max_delay > y->max_delay ? -1 : 1;
	return x->ref < y->ref ? -1 : x->ref > y->ref;
}

/* Signatures by their own coverage, most first; equal ones by index. */
static int by_cover(const void *a, const void *b, void *ctx)
{
	const struct sig_cover *by = ctx;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	if (by[x].cost_ns != by[y].cost_ns)
		return by[x].cost_ns > by[y].cost_ns ? -1 : 1;
	return (x > y) - (x < y);
}

struct row_hit {
	uint32_t row, sig;
};

struct triage_hits {
	struct row_hit *v;
	size_t n, cap;
	uint32_t row;
	bool oom;
};

static void triage_hit(void *cls, uint32_t g)
{
	struct triage_hits *h = cls;

	if (vec_reserve(&h->v, &h->cap, h->n + 1, sizeof(*h->v)) < 0) {
		h->oom = true;
		return;
	}
	h->v[h->n++] = (struct row_hit){ h->row, g };
}

/* A triage's state: the run's signatures, (stack, stream) rows and streams as the database gave
 * them, what matches what, and the scratch of the walks (all freed by triage_release()). */
struct triage {
	struct sig_coverage cov;
	struct sig_index x;
	struct triage_hits hits;
	struct triage_ctx t;
	size_t nsig;
	struct tstream *st;
	size_t *order, *sorder;
	uint64_t *stack_cost;
	uint32_t *stream_sigs, *sig_start, *sig_rows, *seen, *first_stream, *sstamp;
	uint8_t *revealed, *covered, *opened;
	PGresult *rs, *rt, *rd;   /* signatures' frames; (stack, stream) rows; streams' symptoms */
};

/* The coverage of all signatures, then the signatures, the run's rows of kind and its streams. */
static int triage_read(PGconn *db, int64_t run, char kind, struct triage *tr, struct sig_triage *out,
		       const struct budget *bud, char *err, size_t errlen)
{
	char runbuf[24], kindbuf[2] = { 0, 0 };
	const char *params[2] = { runbuf, kindbuf };

	int rc = sig_coverage(db, run, kind, NULL, 0, &tr->cov, bud, err, errlen);

	if (rc < 0)
		return rc;
	tr->nsig = tr->cov.nby;
	out->kind = kindbuf[0] = tr->cov.kind;
	snprintf(runbuf, sizeof(runbuf), "%lld", (long long)run);
	tr->rs = PQexec(db, "SELECT s.id, (SELECT array_agg(coalesce(f.canon_id, f.id, -1) ORDER BY u.o)"
			    " FROM unnest(s.frames) WITH ORDINALITY AS u(name, o) LEFT JOIN frames f ON f.name = u.name)::text"
			    " FROM signatures s ORDER BY s.id");
	tr->rt = PQexecParams(db, "SELECT rs.stack_id, rs.stream_ref, rs.cost_ns, sm_canon_frames(st.frame_ids)::text"
				  " FROM run_stacks rs JOIN stacks st ON st.id = rs.stack_id"
				  " WHERE rs.run_id = $1 AND rs.kind = $2"
				  " ORDER BY rs.stream_ref, rs.stack_id", 2, NULL, params, NULL, NULL, 0);
	tr->rd = PQexecParams(db, "SELECT s.id, s.symptom_end_ns - s.symptom_start_ns"
				  " FROM streams s WHERE s.id IN (SELECT stream_ref FROM run_stacks WHERE run_id = $1 AND kind = $2)"
				  " ORDER BY s.id", 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(tr->rs) != PGRES_TUPLES_OK || PQresultStatus(tr->rt) != PGRES_TUPLES_OK ||
	    PQresultStatus(tr->rd) != PGRES_TUPLES_OK || (size_t)PQntuples(tr->rs) != tr->nsig) {
		db_errcpy(err, errlen, "triage", PQresultStatus(tr->rs) != PGRES_TUPLES_OK ? PQresultErrorMessage(tr->rs)
					   : PQresultStatus(tr->rt) != PGRES_TUPLES_OK ? PQresultErrorMessage(tr->rt)
					   : PQresultErrorMessage(tr->rd));
		return SIG_EFAIL;
	}
	return 0;
}

static int triage_alloc(struct triage *tr, size_t nstreams, char *err, size_t errlen)
{
	size_t nsig = tr->nsig;

	tr->st = calloc(nstreams + 1, sizeof(*tr->st));
	tr->order = calloc(nstreams + 1, sizeof(*tr->order));
	tr->stack_cost = calloc(tr->t.nstacks + 1, sizeof(uint64_t));
	tr->revealed = calloc(nsig + 1, 1);
	tr->covered = calloc(tr->t.nstacks + 1, 1);
	tr->opened = calloc(nstreams + 1, 1);
	tr->seen = calloc(nsig + 1, sizeof(uint32_t));
	tr->sstamp = calloc(nsig + 1, sizeof(uint32_t));
	tr->first_stream = malloc((nsig + 1) * sizeof(uint32_t));
	tr->sig_start = calloc(nsig + 2, sizeof(uint32_t));
	tr->sorder = calloc(nsig + 1, sizeof(*tr->sorder));
	if (!tr->st || !tr->order || !tr->stack_cost || !tr->revealed || !tr->covered || !tr->opened || !tr->seen ||
	    !tr->sstamp || !tr->first_stream || !tr->sig_start || !tr->sorder) {
		snprintf(err, errlen, "out of memory");
		return SIG_EFAIL;
	}
	for (size_t i = 0; i < nsig; i++)
		tr->first_stream[i] = UINT32_MAX;
	return 0;
}

/* The row of stream ref in st[0 .. n) (ascending by ref), or n. */
static size_t stream_row(const struct tstream *st, size_t n, int64_t ref)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (st[mid].ref < ref)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && st[lo].ref == ref ? lo : n;
}

/* Whether (ref, stack) is among rows [0, n) of (refs, stacks), ascending by both. */
static bool pair_in(const int64_t *refs, const int32_t *stacks, size_t n, int64_t ref, int32_t stack)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (refs[mid] < ref || (refs[mid] == ref && stacks[mid] < stack))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && refs[lo] == ref && stacks[lo] == stack;
}

/*
 * Each stream's longest event of the run's kind among its (stack, stream) rows: its max_delay. The
 * streams' event chunks are read a row at a time (single-row mode), so that a run's events are
 * never all in memory, and unpacked here (common/evpack.h).
 */
static int triage_delays(PGconn *db, int64_t run, char kind, struct triage *tr, size_t nstreams,
			 const struct budget *bud, char *err, size_t errlen)
{
	char runbuf[24], kindbuf[2] = { kind, 0 };
	const char *params[2] = { runbuf, kindbuf };
	size_t n = tr->t.nstacks;
	int64_t *refs = vec_alloc(n + 1, sizeof(*refs));
	int32_t *stacks = vec_alloc(n + 1, sizeof(*stacks));
	PGresult *r;
	size_t nrows = 0;
	int rc = 0;

	if (!refs || !stacks) {
		free(refs);
		free(stacks);
		snprintf(err, errlen, "out of memory");
		return SIG_EFAIL;
	}
	for (size_t i = 0; i < n; i++) {
		stacks[i] = (int32_t)db_get_i64(tr->rt, (int)i, 0);
		refs[i] = db_get_i64(tr->rt, (int)i, 1);
	}
	snprintf(runbuf, sizeof(runbuf), "%lld", (long long)run);
	if (!PQsendQueryParams(db, "SELECT c.stream_ref, c.data FROM event_chunks c WHERE c.stream_ref IN"
				   " (SELECT stream_ref FROM run_stacks WHERE run_id = $1 AND kind = $2)",
			       2, NULL, params, NULL, NULL, 1) || !PQsetSingleRowMode(db)) {
		db_errcpy(err, errlen, "triage", PQerrorMessage(db));
		rc = SIG_EFAIL;
	}
	while (rc == 0 && (r = PQgetResult(db))) {
		ExecStatusType status = PQresultStatus(r);

		if (status == PGRES_SINGLE_TUPLE && (++nrows & 255) == 0 && budget_over(bud)) {
			snprintf(err, errlen, "triage: stopped (out of time)");
			rc = SIG_EFAIL;
		} else if (status == PGRES_SINGLE_TUPLE) {
			const unsigned char *p = (const unsigned char *)PQgetvalue(r, 0, 0), *data;
			long nrec = evpack_count((size_t)PQgetlength(r, 0, 1));
			int64_t ref = PQgetlength(r, 0, 0) == 8 ? (int64_t)evpack_be(p, 8) : 0;
			size_t row = stream_row(tr->st, nstreams, ref);

			data = (const unsigned char *)PQgetvalue(r, 0, 1);
			if (PQgetlength(r, 0, 0) != 8 || nrec < 0) {
				snprintf(err, errlen, "triage: a chunk of stream events is damaged");
				rc = SIG_EFAIL;
			}
			/* (a stream deleted since its row was read: nothing to weigh) */
			for (long i = 0; rc == 0 && row < nstreams && i < nrec; i++) {
				struct evpack_event e;

				if (evpack_get(data + (size_t)i * EVPACK_RECORD, &e) < 0) {
					snprintf(err, errlen, "triage: a chunk of stream events is damaged");
					rc = SIG_EFAIL;
				} else if (e.kind == kind && (uint64_t)e.dur_ns > tr->st[row].max_delay &&
					   pair_in(refs, stacks, n, ref, e.stack)) {
					tr->st[row].max_delay = (uint64_t)e.dur_ns;
				}
			}
		} else if (status != PGRES_TUPLES_OK && status != PGRES_SINGLE_TUPLE && rc == 0) {
			db_errcpy(err, errlen, "triage", PQresultErrorMessage(r));
			rc = SIG_EFAIL;
		}
		PQclear(r);
	}
	if (rc < 0) {
		/* the rest of the statement's rows are not wanted: cancelled, and what came read off so
		 * that the connection stays usable */
		PGcancel *cancel = PQgetCancel(db);
		char buf[256];

		if (cancel) {
			PQcancel(cancel, buf, sizeof(buf));
			PQfreeCancel(cancel);
		}
		while ((r = PQgetResult(db)))
			PQclear(r);
	}
	free(refs);
	free(stacks);
	return rc;
}

/* The streams' delays, and for each (stack, stream) row the signatures that match it. */
static int triage_match(struct triage *tr, size_t nstreams, const struct budget *bud, char *err, size_t errlen)
{
	int32_t stack[SIG_MAX_FRAMES];

	if (index_build(&tr->x, tr->rs, 1, tr->nsig) < 0) {
		snprintf(err, errlen, "out of memory");
		return SIG_EFAIL;
	}
	for (size_t i = 0; i < nstreams; i++) {
		tr->st[i].ref = db_get_i64(tr->rd, (int)i, 0);
		tr->st[i].total_delay = (uint64_t)db_get_i64(tr->rd, (int)i, 1);
		tr->st[i].max_delay = 0;
	}
	for (size_t row = 0; row < tr->t.nstacks; row++) {
		int len = db_parse_int_array(PQgetvalue(tr->rt, (int)row, 3), stack, SIG_MAX_FRAMES);

		if ((row & 255) == 0 && budget_over(bud)) {
			snprintf(err, errlen, "triage: stopped (out of time)");
			return SIG_EFAIL;
		}
		tr->stack_cost[row] = (uint64_t)db_get_i64(tr->rt, (int)row, 2);
		tr->t.total += tr->stack_cost[row];
		tr->hits.row = (uint32_t)row;
		index_match(&tr->x, stack, len, triage_hit, &tr->hits);
		if (tr->hits.oom) {
			snprintf(err, errlen, "out of memory");
			return SIG_EFAIL;
		}
	}
	return 0;
}

/* The rows of each signature, and the signatures each stream reveals (rows come by stream); the
 * walks' context set. */
static int triage_link(struct triage *tr, size_t nstreams, char *err, size_t errlen)
{
	const struct triage_hits *hits = &tr->hits;
	struct tstream *st = tr->st;

	tr->stream_sigs = malloc((hits->n + 1) * sizeof(uint32_t));
	tr->sig_rows = malloc((hits->n + 1) * sizeof(uint32_t));
	if (!tr->stream_sigs || !tr->sig_rows) {
		snprintf(err, errlen, "out of memory");
		return SIG_EFAIL;
	}
	for (size_t i = 0; i < hits->n; i++)
		tr->sig_start[hits->v[i].sig + 1]++;
	for (size_t g = 0; g < tr->nsig; g++)
		tr->sig_start[g + 1] += tr->sig_start[g];
	for (size_t i = 0, si = 0, nss = 0; i < hits->n; i++) {
		uint32_t g = hits->v[i].sig;
		int64_t ref = db_get_i64(tr->rt, (int)hits->v[i].row, 1);

		tr->sig_rows[tr->sig_start[g] + tr->seen[g]++] = hits->v[i].row;
		while (si < nstreams && st[si].ref < ref)
			si++;
		if (si >= nstreams || st[si].ref != ref)
			continue;
		if (tr->sstamp[g] == (uint32_t)si + 1)
			continue;   /* once per stream */
		tr->sstamp[g] = (uint32_t)si + 1;
		if (st[si].n == 0)
			st[si].first = (uint32_t)nss;
		tr->stream_sigs[nss++] = g;
		st[si].n++;
		if (tr->first_stream[g] == UINT32_MAX)
			tr->first_stream[g] = (uint32_t)si;
	}
	tr->t.stack_cost = tr->stack_cost;
	tr->t.stream_sigs = tr->stream_sigs;
	tr->t.sig_start = tr->sig_start;
	tr->t.sig_rows = tr->sig_rows;
	tr->t.revealed = tr->revealed;
	tr->t.covered = tr->covered;
	return 0;
}

/* Random: the mean over 100 shuffles with fixed seeds, so the figure is repeatable. */
static int triage_random(struct triage *tr, struct sig_triage *out, const struct budget *bud, char *err,
			 size_t errlen)
{
	double acc[SIG_LEVELS] = { 0 }, one[SIG_LEVELS];
	uint64_t r = 0x9e3779b97f4a7c15ULL;
	size_t *order = tr->order;

	for (int rep = 0; rep < 100; rep++) {
		if (budget_over(bud)) {
			snprintf(err, errlen, "triage: stopped (out of time)");
			return SIG_EFAIL;
		}
		for (size_t i = 0; i < out->nstreams; i++)
			order[i] = i;
		for (size_t i = out->nstreams - 1; i > 0; i--) {
			size_t j, tmp;
			r ^= r << 13;
			r ^= r >> 7;
			r ^= r << 17;
			j = (size_t)(r % (i + 1));
			tmp = order[i];
			order[i] = order[j];
			order[j] = tmp;
		}
		walk(&tr->t, tr->st, order, out->nstreams, out->level, one);
		for (int l = 0; l < SIG_LEVELS; l++)
			acc[l] += one[l];
	}
	for (int l = 0; l < SIG_LEVELS; l++)
		out->needed[SIG_RANDOM][l] = acc[l] / 100;
	return 0;
}

/* Greedy: the streams by their total delay, then by their longest AOI event, most first. */
static void triage_greedy(struct triage *tr, struct sig_triage *out)
{
	for (size_t i = 0; i < out->nstreams; i++)
		tr->order[i] = i;
	qsort_r(tr->order, out->nstreams, sizeof(*tr->order), by_total, tr->st);
	walk(&tr->t, tr->st, tr->order, out->nstreams, out->level, out->needed[SIG_GREEDY_TOTAL]);
	for (size_t i = 0; i < out->nstreams; i++)
		tr->order[i] = i;
	qsort_r(tr->order, out->nstreams, sizeof(*tr->order), by_max, tr->st);
	walk(&tr->t, tr->st, tr->order, out->nstreams, out->level, out->needed[SIG_GREEDY_MAX]);
}

/* Signature: signatures by coverage; for each not yet revealed, open its first stream. */
static void triage_by_signature(struct triage *tr, struct sig_triage *out)
{
	size_t k = 0;

	for (size_t i = 0; i < tr->nsig; i++)
		tr->sorder[i] = i;
	qsort_r(tr->sorder, tr->nsig, sizeof(*tr->sorder), by_cover, tr->cov.by);
	memset(tr->revealed, 0, tr->nsig);
	for (size_t i = 0; i < tr->nsig; i++) {
		size_t g = tr->sorder[i];
		uint32_t s0 = tr->first_stream[g];

		if (tr->revealed[g] || s0 == UINT32_MAX || tr->opened[s0])
			continue;
		tr->opened[s0] = 1;
		tr->order[k++] = s0;
		for (uint32_t j = tr->st[s0].first; j < tr->st[s0].first + tr->st[s0].n; j++)
			tr->revealed[tr->stream_sigs[j]] = 1;
	}
	walk(&tr->t, tr->st, tr->order, k, out->level, out->needed[SIG_SIGNATURE]);
}

static void triage_release(struct triage *tr)
{
	free(tr->st);
	free(tr->order);
	free(tr->sorder);
	free(tr->stack_cost);
	free(tr->stream_sigs);
	free(tr->sig_start);
	free(tr->sig_rows);
	free(tr->seen);
	free(tr->sstamp);
	free(tr->first_stream);
	free(tr->revealed);
	free(tr->covered);
	free(tr->opened);
	free(tr->hits.v);
	index_free(&tr->x);
	free(tr->cov.by);
	PQclear(tr->rs);
	PQclear(tr->rt);
	PQclear(tr->rd);
}

int sig_triage(PGconn *db, int64_t run, char kind, struct sig_triage *out, const struct budget *bud, char *err,
	       size_t errlen)
{
	struct triage tr = { .x = { .first = IMAP_INIT } };
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = triage_read(db, run, kind, &tr, out, bud, err, errlen)) < 0)
		goto out;
	tr.t.nsig = tr.nsig;
	out->nstreams = (size_t)PQntuples(tr.rd);
	tr.t.nstacks = (size_t)PQntuples(tr.rt);
	if ((rc = triage_alloc(&tr, out->nstreams, err, errlen)) < 0 ||
	    (rc = triage_match(&tr, out->nstreams, bud, err, errlen)) < 0 ||
	    (rc = triage_delays(db, run, out->kind, &tr, out->nstreams, bud, err, errlen)) < 0 ||
	    (rc = triage_link(&tr, out->nstreams, err, errlen)) < 0)
		goto out;
	out->max_coverage = tr.cov.coverage;
	for (int i = 0; i < SIG_LEVELS; i++)
		out->level[i] = tr.cov.coverage * (i + 1) / SIG_LEVELS;
	if (out->nstreams == 0 || tr.nsig == 0)
		goto out;
	if ((rc = triage_random(&tr, out, bud, err, errlen)) < 0)
		goto out;
	triage_greedy(&tr, out);
	triage_by_signature(&tr, out);
	rc = 0;
out:
	triage_release(&tr);
	return rc;
}
