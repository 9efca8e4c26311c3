/* signature: performance signatures, export/import and coverage (see signature.h). */
#include "clusterer/signature.h"
#include "common/db.h"
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
		return -1;
	}
	if (!status_ok(status)) {
		snprintf(err, errlen, "status: must be open, known or fixed");
		return -1;
	}
	if (check_frames(frames, nframes, err, errlen) < 0)
		return -1;
	buf_putc(&arr, '{');
	for (size_t i = 0; i < nframes; i++) {
		if (i)
			buf_putc(&arr, ',');
		db_put_array_str(&arr, frames[i], strlen(frames[i]));
	}
	if (buf_putc(&arr, '}') < 0) {
		buf_release(&arr);
		snprintf(err, errlen, "out of memory");
		return -1;
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
		return -1;
	}
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		if (state && strcmp(state, "23505") == 0)
			snprintf(err, errlen, "name: a signature named '%s' exists already", name);
		else if (state && strcmp(state, "23503") == 0)
			snprintf(err, errlen, "from_cluster: no cluster %s", cl);
		else
			db_errcpy(err, errlen, "creating the signature", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	*id = db_get_i64(r, 0, 0);
	PQclear(r);
	return 0;
}

int sig_update(PGconn *db, int64_t id, const char *status, const char *note, char *err, size_t errlen)
{
	char idbuf[24];
	const char *params[3] = { idbuf, status, note };
	PGresult *r;

	if (status && !status_ok(status)) {
		snprintf(err, errlen, "status: must be open, known or fixed");
		return -1;
	}
	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
	r = PQexecParams(db, "UPDATE signatures SET status = coalesce($2, status), note = coalesce($3, note),"
			     " updated_at = now() WHERE id = $1", 3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		db_errcpy(err, errlen, "updating the signature", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	if (strcmp(PQcmdTuples(r), "1") != 0) {
		snprintf(err, errlen, "signature %s: no such signature", idbuf);
		PQclear(r);
		return -1;
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
		return -1;
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
		return -1;
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
		return -1;
	}
	if (json_fields(json_root(json, len), "", top, true, f, err, errlen) < 0)
		return -1;
	if (json_val_type(f[1]) != JV_ARRAY) {
		snprintf(err, errlen, "signatures: required, an array");
		return -1;
	}
	if (f[0].p && (json_val_int(f[0], &v) != 0 || v != 1)) {
		snprintf(err, errlen, "version: unsupported (this program reads 1)");
		return -1;
	}
	json_reader_at(&r, f[1]);
	json_enter(&r);
	for (size_t i = 0; json_next_item(&r); i++, json_skip(&r)) {
		size_t nf, k = 0;

		*n = i + 1;
		snprintf(path, sizeof(path), "signatures[%zu]", i);
		if (json_val_type(json_here(&r)) != JV_OBJECT) {
			snprintf(err, errlen, "%s: must be an object", path);
			return -1;
		}
		if (json_fields(json_here(&r), path, one, true, g, err, errlen) < 0)
			return -1;
		if (str_len(g[0]) < 1 || str_len(g[0]) > 255) {
			snprintf(err, errlen, "%s.name: a string of 1 to 255 bytes", path);
			return -1;
		}
		nf = json_count(g[1]);
		if (json_val_type(g[1]) != JV_ARRAY || nf < 1 || nf > SIG_MAX_FRAMES) {
			snprintf(err, errlen, "%s.frames: an array of 1 to %d frames", path, SIG_MAX_FRAMES);
			return -1;
		}
		json_reader_at(&fr, g[1]);
		json_enter(&fr);
		for (; json_next_item(&fr); k++, json_skip(&fr))
			if (str_len(json_here(&fr)) < 1 || str_len(json_here(&fr)) > SIG_MAX_FRAME) {
				snprintf(err, errlen, "%s.frames[%zu]: a frame of 1 to %d bytes", path, k,
					 SIG_MAX_FRAME);
				return -1;
			}
		if (g[2].p) {
			struct json_reader sr;

			json_reader_at(&sr, g[2]);
			if (json_val_type(g[2]) != JV_STRING || json_string_into(&sr, st, sizeof(st)) >= sizeof(st) ||
			    !status_ok(st)) {
				snprintf(err, errlen, "%s.status: must be open, known or fixed", path);
				return -1;
			}
		}
		if (g[3].p && json_val_type(g[3]) != JV_STRING) {
			snprintf(err, errlen, "%s.note: must be a string", path);
			return -1;
		}
	}
	return 0;
}

int sig_import(PGconn *db, const char *json, size_t len, size_t *n, char *err, size_t errlen)
{
	const char *params[1];
	char msg[256];
	PGresult *r;

	*n = 0;
	/* no tree: the document is read in place, and PostgreSQL's jsonb never sees a NUL */
	if (json_check_body(json, len, &json_body_limits, msg, sizeof(msg)) < 0) {
		snprintf(err, errlen, "not JSON: %s", msg);
		return -1;
	}
	if (check_document(json, len, n, err, errlen) < 0)
		return -1;
	params[0] = json;
	r = PQexecParams(db,
		"INSERT INTO signatures (name, frames, status, note)"
		" SELECT s->>'name', ARRAY(SELECT jsonb_array_elements_text(s->'frames')),"
		"  coalesce(s->>'status', 'open'), coalesce(s->>'note', '')"
		" FROM jsonb_array_elements($1::jsonb->'signatures') AS s"
		" ON CONFLICT (name) DO UPDATE SET frames = EXCLUDED.frames, status = EXCLUDED.status,"
		"  note = EXCLUDED.note, updated_at = now()",
		1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		db_errcpy(err, errlen, "importing signatures", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	PQclear(r);
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

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int sig_coverage(PGconn *db, int64_t run, char kind, const int64_t *ids, size_t n, struct sig_coverage *out,
		 char *err, size_t errlen)
{
	struct buf idl = BUF_INIT(0);
	char runbuf[24], kindbuf[2] = { 0, 0 };
	const char *params[3];
	const char *mined;
	PGresult *rs = NULL, *rt = NULL;
	int32_t **sf = NULL, stack[SIG_MAX_FRAMES];
	int *sl = NULL, rc = -1;
	size_t ndistinct = n;

	memset(out, 0, sizeof(*out));
	snprintf(runbuf, sizeof(runbuf), "%lld", (long long)run);
	params[0] = runbuf;
	rt = PQexecParams(db, "SELECT coalesce(params->>'kind', 'both') FROM runs WHERE id = $1", 1, NULL, params,
			  NULL, NULL, 0);
	if (PQresultStatus(rt) != PGRES_TUPLES_OK || PQntuples(rt) != 1) {
		snprintf(err, errlen, "run %s: no such run", runbuf);
		goto out;
	}
	mined = PQgetvalue(rt, 0, 0);
	if (!kind)
		kind = strcmp(mined, "run") == 0 ? 'r' : 'w';
	if ((kind != 'w' && kind != 'r') || (strcmp(mined, "both") != 0 && mined[0] != kind)) {
		snprintf(err, errlen, "kind: run %s mined %s events only", runbuf, mined);
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
	rs = PQexecParams(db,
		"SELECT s.id, s.name, (SELECT array_agg(coalesce(f.id, -1) ORDER BY u.o)"
		"   FROM unnest(s.frames) WITH ORDINALITY AS u(name, o) LEFT JOIN frames f ON f.name = u.name)::text"
		" FROM signatures s WHERE $1::bigint[] IS NULL OR s.id = ANY($1::bigint[]) ORDER BY s.id",
		1, NULL, params + 1, NULL, NULL, 0);
	if (PQresultStatus(rs) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "reading signatures", PQresultErrorMessage(rs));
		goto out;
	}
	/* an id given twice counts once (the list comes from a URL: sort, not compare all pairs) */
	if (n) {
		int64_t *sorted = malloc(n * sizeof(*sorted));
		if (!sorted) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		memcpy(sorted, ids, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), cmp_i64);
		for (size_t i = 1; i < n; i++)
			ndistinct -= sorted[i] == sorted[i - 1];
		free(sorted);
	}
	if (n && (size_t)PQntuples(rs) != ndistinct) {
		snprintf(err, errlen, "signatures: %zu of the %zu ids given do not exist", ndistinct - (size_t)PQntuples(rs),
			 ndistinct);
		goto out;
	}
	out->nby = (size_t)PQntuples(rs);
	out->by = calloc(out->nby + 1, sizeof(*out->by));
	sf = calloc(out->nby + 1, sizeof(*sf));
	sl = calloc(out->nby + 1, sizeof(*sl));
	if (!out->by || !sf || !sl) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < out->nby; i++) {
		out->by[i].id = db_get_i64(rs, (int)i, 0);
		snprintf(out->by[i].name, sizeof(out->by[i].name), "%s", PQgetvalue(rs, (int)i, 1));
		sf[i] = malloc(SIG_MAX_FRAMES * sizeof(int32_t));
		if (!sf[i]) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		sl[i] = db_parse_int_array(PQgetvalue(rs, (int)i, 2), sf[i], SIG_MAX_FRAMES);
	}
	params[2] = kindbuf;
	rt = PQexecParams(db,
		"SELECT sum(rs.cost_ns), st.frame_ids::text FROM run_stacks rs JOIN stacks st ON st.id = rs.stack_id"
		" WHERE rs.run_id = $1 AND rs.kind = $2 GROUP BY rs.stack_id, st.frame_ids", 2, NULL,
		(const char *const[]){ params[0], params[2] }, NULL, NULL, 0);
	if (PQresultStatus(rt) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "reading the run's stacks", PQresultErrorMessage(rt));
		goto out;
	}
	for (int row = 0; row < PQntuples(rt); row++) {
		uint64_t cost = (uint64_t)db_get_i64(rt, row, 0);
		int len = db_parse_int_array(PQgetvalue(rt, row, 1), stack, SIG_MAX_FRAMES);
		bool any = false;

		out->total_ns += cost;
		for (size_t i = 0; i < out->nby && len > 0; i++)
			if (sl[i] > 0 && subseq(sf[i], sl[i], stack, len)) {
				out->by[i].cost_ns += cost;
				any = true;
			}
		if (any)
			out->covered_ns += cost;
	}
	out->coverage = out->total_ns ? (double)out->covered_ns / (double)out->total_ns : 0;
	rc = 0;
out:
	for (size_t i = 0; sf && i < out->nby; i++)
		free(sf[i]);
	free(sf);
	free(sl);
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
	uint64_t *mask;              /* signatures it reveals */
};

struct triage_ctx {
	size_t nsig, words;
	const uint64_t *sig_cost;    /* cost covered by each signature alone ... */
	const uint64_t *stack_cost;  /* ... but coverage needs the union: per stack */
	uint64_t **stack_mask;       /* signatures matching each stack */
	size_t nstacks;
	uint64_t total;
};

/* Coverage of the signatures in `revealed`: the cost of stacks matching any of them. */
static double revealed_coverage(const struct triage_ctx *t, const uint64_t *revealed)
{
	uint64_t cov = 0;

	for (size_t s = 0; s < t->nstacks; s++)
		for (size_t w = 0; w < t->words; w++)
			if (t->stack_mask[s][w] & revealed[w]) {
				cov += t->stack_cost[s];
				break;
			}
	return t->total ? (double)cov / (double)t->total : 0;
}

/* Open the streams in `order`; needed[i] = streams opened when level[i] is first reached. */
static void walk(const struct triage_ctx *t, const struct tstream *st, const size_t *order, size_t n,
		 const double *level, double *needed, uint64_t *revealed)
{
	size_t li = 0;

	memset(revealed, 0, t->words * sizeof(uint64_t));
	for (size_t k = 0; k < n && li < SIG_LEVELS; k++) {
		double cov;
		bool grew = false;

		for (size_t w = 0; w < t->words; w++) {
			grew |= (st[order[k]].mask[w] & ~revealed[w]) != 0;
			revealed[w] |= st[order[k]].mask[w];
		}
		if (!grew)
			continue;
		cov = revealed_coverage(t, revealed);
		while (li < SIG_LEVELS && cov + 1e-12 >= level[li])
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

int sig_triage(PGconn *db, int64_t run, char kind, struct sig_triage *out, char *err, size_t errlen)
{
	struct sig_coverage cov;
	struct triage_ctx t;
	struct tstream *st = NULL;
	size_t *order = NULL, nsig;
	uint64_t *revealed = NULL, *stack_cost = NULL, **stack_mask = NULL, *masks = NULL;
	int32_t **sf = NULL, stack[SIG_MAX_FRAMES];
	int *sl = NULL;
	char runbuf[24], kindbuf[2] = { 0, 0 };
	const char *params[2] = { runbuf, kindbuf };
	PGresult *rs = NULL, *rt = NULL, *rd = NULL;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	memset(&t, 0, sizeof(t));
	if (sig_coverage(db, run, kind, NULL, 0, &cov, err, errlen) < 0)
		return -1;
	nsig = cov.nby;
	out->kind = kindbuf[0] = cov.kind;
	/* signatures sorted by their own coverage, for the Signature order */
	snprintf(runbuf, sizeof(runbuf), "%lld", (long long)run);
	rs = PQexec(db, "SELECT s.id, (SELECT array_agg(coalesce(f.id, -1) ORDER BY u.o)"
			" FROM unnest(s.frames) WITH ORDINALITY AS u(name, o) LEFT JOIN frames f ON f.name = u.name)::text"
			" FROM signatures s ORDER BY s.id");
	rt = PQexecParams(db, "SELECT rs.stack_id, rs.stream_ref, rs.cost_ns, st.frame_ids::text"
			      " FROM run_stacks rs JOIN stacks st ON st.id = rs.stack_id"
			      " WHERE rs.run_id = $1 AND rs.kind = $2"
			      " ORDER BY rs.stream_ref, rs.stack_id", 2, NULL, params, NULL, NULL, 0);
	rd = PQexecParams(db, "SELECT s.id, s.symptom_end_ns - s.symptom_start_ns,"
			      " (SELECT max(e.dur_ns) FROM events e WHERE e.stream_ref = s.id AND e.kind = $2 AND EXISTS"
			      "   (SELECT 1 FROM run_stacks r WHERE r.run_id = $1 AND r.stream_ref = s.id"
			      "    AND r.stack_id = e.stack_id AND r.kind = e.kind))"
			      " FROM streams s WHERE s.id IN (SELECT stream_ref FROM run_stacks WHERE run_id = $1 AND kind = $2)"
			      " ORDER BY s.id", 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(rs) != PGRES_TUPLES_OK || PQresultStatus(rt) != PGRES_TUPLES_OK ||
	    PQresultStatus(rd) != PGRES_TUPLES_OK || (size_t)PQntuples(rs) != nsig) {
		db_errcpy(err, errlen, "triage", PQresultStatus(rs) != PGRES_TUPLES_OK ? PQresultErrorMessage(rs)
					   : PQresultStatus(rt) != PGRES_TUPLES_OK ? PQresultErrorMessage(rt)
					   : PQresultErrorMessage(rd));
		goto out;
	}
	t.nsig = nsig;
	t.words = nsig / 64 + 1;
	out->nstreams = (size_t)PQntuples(rd);
	t.nstacks = (size_t)PQntuples(rt);
	st = calloc(out->nstreams + 1, sizeof(*st));
	order = calloc(out->nstreams + 1, sizeof(*order));
	revealed = calloc(t.words, sizeof(uint64_t));
	stack_cost = calloc(t.nstacks + 1, sizeof(uint64_t));
	stack_mask = calloc(t.nstacks + 1, sizeof(uint64_t *));
	/* one mask per stack and per stream: (stacks + streams + 1) * words, checked */
	masks = vec_calloc(vec_bytes(t.nstacks + out->nstreams + 1, t.words), sizeof(uint64_t));
	sf = calloc(nsig + 1, sizeof(*sf));
	sl = calloc(nsig + 1, sizeof(*sl));
	if (!st || !order || !revealed || !stack_cost || !stack_mask || !masks || !sf || !sl) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nsig; i++) {
		sf[i] = malloc(SIG_MAX_FRAMES * sizeof(int32_t));
		if (!sf[i]) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		sl[i] = db_parse_int_array(PQgetvalue(rs, (int)i, 1), sf[i], SIG_MAX_FRAMES);
	}
	for (size_t i = 0; i < out->nstreams; i++) {
		st[i].ref = db_get_i64(rd, (int)i, 0);
		st[i].total_delay = (uint64_t)db_get_i64(rd, (int)i, 1);
		st[i].max_delay = (uint64_t)db_get_i64(rd, (int)i, 2);
		st[i].mask = masks + (t.nstacks + i) * t.words;
	}
	/* each (stack, stream) row: which signatures match; streams reveal them */
	for (size_t row = 0, si = 0; row < t.nstacks; row++) {
		int64_t ref = db_get_i64(rt, (int)row, 1);
		int len = db_parse_int_array(PQgetvalue(rt, (int)row, 3), stack, SIG_MAX_FRAMES);

		stack_mask[row] = masks + row * t.words;
		stack_cost[row] = (uint64_t)db_get_i64(rt, (int)row, 2);
		t.total += stack_cost[row];
		while (si < out->nstreams && st[si].ref < ref)
			si++;
		for (size_t g = 0; g < nsig && len > 0; g++)
			if (sl[g] > 0 && subseq(sf[g], sl[g], stack, len)) {
				stack_mask[row][g / 64] |= (uint64_t)1 << (g % 64);
				if (si < out->nstreams && st[si].ref == ref)
					st[si].mask[g / 64] |= (uint64_t)1 << (g % 64);
			}
	}
	t.stack_cost = stack_cost;
	t.stack_mask = stack_mask;
	out->max_coverage = cov.coverage;
	for (int i = 0; i < SIG_LEVELS; i++)
		out->level[i] = cov.coverage * (i + 1) / SIG_LEVELS;
	if (out->nstreams == 0 || nsig == 0) {
		rc = 0;
		goto out;
	}
	/* Random: the mean over 100 shuffles with fixed seeds, so the figure is repeatable */
	{
		double acc[SIG_LEVELS] = { 0 }, one[SIG_LEVELS];
		uint64_t x = 0x9e3779b97f4a7c15ULL;

		for (int rep = 0; rep < 100; rep++) {
			for (size_t i = 0; i < out->nstreams; i++)
				order[i] = i;
			for (size_t i = out->nstreams - 1; i > 0; i--) {
				size_t j, tmp;
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				j = (size_t)(x % (i + 1));
				tmp = order[i];
				order[i] = order[j];
				order[j] = tmp;
			}
			walk(&t, st, order, out->nstreams, out->level, one, revealed);
			for (int l = 0; l < SIG_LEVELS; l++)
				acc[l] += one[l];
		}
		for (int l = 0; l < SIG_LEVELS; l++)
			out->needed[SIG_RANDOM][l] = acc[l] / 100;
	}
	for (size_t i = 0; i < out->nstreams; i++)
		order[i] = i;
	qsort_r(order, out->nstreams, sizeof(*order), by_total, st);
	walk(&t, st, order, out->nstreams, out->level, out->needed[SIG_GREEDY_TOTAL], revealed);
	for (size_t i = 0; i < out->nstreams; i++)
		order[i] = i;
	qsort_r(order, out->nstreams, sizeof(*order), by_max, st);
	walk(&t, st, order, out->nstreams, out->level, out->needed[SIG_GREEDY_MAX], revealed);
	/* Signature: signatures by coverage; for each not yet revealed, open its first stream */
	{
		size_t *sorder = calloc(nsig, sizeof(*sorder)), k = 0;
		bool *opened = calloc(out->nstreams, sizeof(*opened));

		if (!sorder || !opened) {
			free(sorder);
			free(opened);
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < nsig; i++)
			sorder[i] = i;
		for (size_t i = 1; i < nsig; i++)   /* insertion sort: few signatures */
			for (size_t j = i; j > 0 && cov.by[sorder[j]].cost_ns > cov.by[sorder[j - 1]].cost_ns; j--) {
				size_t tmp = sorder[j];
				sorder[j] = sorder[j - 1];
				sorder[j - 1] = tmp;
			}
		memset(revealed, 0, t.words * sizeof(uint64_t));
		for (size_t i = 0; i < nsig; i++) {
			size_t g = sorder[i];
			if (revealed[g / 64] & ((uint64_t)1 << (g % 64)))
				continue;
			for (size_t s = 0; s < out->nstreams; s++)
				if (!opened[s] && (st[s].mask[g / 64] & ((uint64_t)1 << (g % 64)))) {
					opened[s] = true;
					order[k++] = s;
					for (size_t w = 0; w < t.words; w++)
						revealed[w] |= st[s].mask[w];
					break;
				}
		}
		walk(&t, st, order, k, out->level, out->needed[SIG_SIGNATURE], revealed);
		free(sorder);
		free(opened);
	}
	rc = 0;
out:
	for (size_t i = 0; sf && i < nsig; i++)
		free(sf[i]);
	free(sf);
	free(sl);
	free(st);
	free(order);
	free(revealed);
	free(stack_cost);
	free(stack_mask);
	free(masks);
	free(cov.by);
	PQclear(rs);
	PQclear(rt);
	PQclear(rd);
	return rc;
}
