/*
 * api: the REST API under /api/v1/ (../shared/spec/rest.md, docs/api.md):
 * parameter checks with a 400 naming the parameter, 404 for missing objects,
 * rows of model.c written as JSON objects by column name and type.
 */
#include "web/api.h"
#include "clusterer/signature.h"
#include "common/arena.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/symstore.h"
#include "common/util.h"
#include "common/webhook.h"
#include "common/wire.h"
#include "miner/aoi.h"
#include "miner/compare.h"
#include "miner/params.h"
#include "miner/queue.h"
#include "web/attribution.h"
#include "web/export.h"
#include "web/fleet.h"
#include "web/model.h"
#include "web/request.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STREAM_EVENTS 200000

/* PostgreSQL type oids of the columns model.c returns */
enum { OID_BOOL = 16, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23, OID_FLOAT4 = 700, OID_FLOAT8 = 701,
       OID_NUMERIC = 1700, OID_JSON = 114, OID_JSONB = 3802 };

/* ---- writing rows ---- */

static void put_value(struct jsonw *w, const PGresult *r, int row, int col)
{
	const char *v = PQgetvalue(r, row, col);

	if (PQgetisnull(r, row, col)) {
		jsonw_null(w);
		return;
	}
	switch (PQftype(r, col)) {
	case OID_BOOL:
		jsonw_bool(w, v[0] == 't');
		break;
	case OID_INT8: case OID_INT2: case OID_INT4: case OID_FLOAT4: case OID_FLOAT8: case OID_NUMERIC:
		/* NaN and Infinity, which float and numeric columns can hold, become null */
		jsonw_number_text(w, v);
		break;
	case OID_JSON: case OID_JSONB:
		jsonw_raw(w, v, (size_t)PQgetlength(r, row, col));
		break;
	default:
		jsonw_strn(w, v, (size_t)PQgetlength(r, row, col));
	}
}

/* Row `row` as the members of an object opened by the caller: all its columns except those named in
 * skip (NULL-terminated). */
static void put_members(struct jsonw *w, const PGresult *r, int row, const char *const *skip)
{
	for (int c = 0; c < PQnfields(r); c++) {
		const char *name = PQfname(r, c);
		bool skipped = false;
		for (const char *const *s = skip; s && *s; s++)
			skipped |= strcmp(*s, name) == 0;
		if (skipped)
			continue;
		jsonw_key(w, name);
		put_value(w, r, row, c);
	}
}

static void put_row(struct jsonw *w, const PGresult *r, int row, const char *const *skip)
{
	jsonw_object(w);
	put_members(w, r, row, skip);
	jsonw_end(w);
}

static void put_rows(struct jsonw *w, const PGresult *r, const char *const *skip)
{
	jsonw_array(w);
	for (int i = 0; i < PQntuples(r); i++)
		put_row(w, r, i, skip);
	jsonw_end(w);
}

/* The response is the document of w: sent when whole, else a 500 that says why (a response over
 * the cap of the out buffer, out of memory), never a cut-short 200. */
static void ok_json(struct req *rq, const struct jsonw *w, int status)
{
	if (jsonw_finish(w) < 0) {
		req_json_error(rq, 500, "the response could not be built: %s%s", jsonw_error(w),
			       jsonw_too_large(w) ? " (ask for fewer rows: limit, patterns)" : "");
		return;
	}
	buf_putc(&rq->out, '\n');
	rq->status = status;
	rq->ctype = "application/json";
}

/* A database failure: 500, logged by the server. */
static bool failed(struct req *rq, PGresult *r, const char *err)
{
	if (r)
		return false;
	req_json_error(rq, 500, "%s", err);
	return true;
}

/* { "<list>": rows, "total": count } */
static void list_response(struct req *rq, const char *name, PGresult *rows, PGresult *count,
			  const char *const *skip)
{
	struct jsonw w;

	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_key(&w, name);
	put_rows(&w, rows, skip);
	jsonw_key(&w, "total");
	jsonw_number_text(&w, PQgetvalue(count, 0, 0));
	jsonw_end(&w);
	ok_json(rq, &w, 200);
}

/* {"<name>": id} */
static void respond_id(struct req *rq, const char *name, int64_t id, int status)
{
	struct jsonw w;

	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_ki64(&w, name, id);
	jsonw_end(&w);
	ok_json(rq, &w, status);
}

/* A single row as the response. */
static void row_response(struct req *rq, const PGresult *r)
{
	struct jsonw w;

	jsonw_init(&w, &rq->out);
	put_row(&w, r, 0, NULL);
	ok_json(rq, &w, 200);
}

/* ---- parameters ---- */

static bool num_param(struct req *rq, const char *name, int64_t min, int64_t max, int64_t def, int64_t *out)
{
	const char *v = req_query(rq, name);

	*out = def;
	if (!v)
		return true;
	if (util_parse_i64(v, min, max, out) < 0) {
		req_json_error(rq, 400, "%s: must be a whole number from %lld to %lld", name, (long long)min,
			       (long long)max);
		return false;
	}
	return true;
}

static bool page_params(struct req *rq, long *limit, long *offset)
{
	int64_t l, o;

	if (!num_param(rq, "limit", 1, 1000, 50, &l) || !num_param(rq, "offset", 0, 1000000000, 0, &o))
		return false;
	*limit = (long)l;
	*offset = (long)o;
	return true;
}

/* Refuse query parameters the endpoint does not know (a typo must not widen a query). */
static bool known_query(struct req *rq, const char *const *names, bool labels);

struct qcheck {
	const char *const *names;
	bool labels;
	const char *bad;
};

static bool check_key(void *cls, const char *key, const char *value)
{
	struct qcheck *q = cls;

	(void)value;
	if (q->labels && strncmp(key, "label.", 6) == 0 && key[6])
		return true;
	for (const char *const *n = q->names; *n; n++)
		if (strcmp(*n, key) == 0)
			return true;
	q->bad = key;
	return false;
}

static bool known_query(struct req *rq, const char *const *names, bool labels)
{
	struct qcheck q = { names, labels, NULL };

	req_query_each(rq, check_key, &q);
	if (!q.bad)
		return true;
	req_json_error(rq, 400, "%.64s: unknown parameter", q.bad);
	return false;
}

/* The status of a signature module's error code (clusterer/signature.h). */
static int sig_http_status(int code)
{
	switch (code) {
	case SIG_ENOTFOUND: return 404;
	case SIG_EEXIST: return 409;
	case SIG_EINVAL: return 400;
	default: return 500;
	}
}

/* ---- streams ---- */

struct labels_acc {
	struct req *rq;
	json_object *obj;
	const char *bad;
};

static bool collect_label(void *cls, const char *key, const char *value)
{
	struct labels_acc *l = cls;

	if (strncmp(key, "label.", 6) != 0)
		return true;
	if (!key[6] || !util_utf8_valid(key, strlen(key)) || !util_utf8_valid(value, strlen(value))) {
		l->bad = key;
		return false;
	}
	json_object_object_add(l->obj, key + 6, json_object_new_string(value));
	return true;
}

static bool time_param(struct req *rq, const char *name, int64_t *out)
{
	const char *v = req_query(rq, name);

	*out = PARAMS_NO_TIME;
	if (!v)
		return true;
	if (util_parse_i64(v, 0, INT64_MAX, out) == 0 || params_parse_time(v, out) == 0)
		return true;
	req_json_error(rq, 400, "%s: an RFC 3339 time or nanoseconds since the epoch", name);
	return false;
}

static void get_streams(struct req *rq)
{
	static const char *const names[] = { "app", "host", "version", "since", "until", "limit", "offset", NULL };
	struct stream_filter f = { req_query(rq, "app"), req_query(rq, "host"), req_query(rq, "version"), NULL,
				   PARAMS_NO_TIME, PARAMS_NO_TIME };
	struct labels_acc l = { rq, NULL, NULL };
	PGresult *rows = NULL, *count = NULL;
	char err[512];
	long limit, offset;

	if (!known_query(rq, names, true) || !page_params(rq, &limit, &offset) ||
	    !time_param(rq, "since", &f.since_ns) || !time_param(rq, "until", &f.until_ns))
		return;
	l.obj = json_object_new_object();
	req_query_each(rq, collect_label, &l);
	if (l.bad) {
		json_object_put(l.obj);
		req_json_error(rq, 400, "%.64s: a label filter needs a key and a UTF-8 value", l.bad);
		return;
	}
	if (json_object_object_length(l.obj))
		f.labels_json = req_strdup(rq, json_object_to_json_string_ext(l.obj, JSON_C_TO_STRING_PLAIN));
	json_object_put(l.obj);
	rows = model_streams(rq->db, &f, limit, offset, err, sizeof(err));
	if (!failed(rq, rows, err))
		count = model_streams_count(rq->db, &f, err, sizeof(err));
	if (rows && !failed(rq, count, err))
		list_response(rq, "streams", rows, count, NULL);
	PQclear(rows);
	PQclear(count);
}

/* A JSON array of the names of a PostgreSQL int array of frame ids. */
static bool put_names(struct req *rq, struct jsonw *w, const char *ids)
{
	const char **names;
	size_t n;

	if (req_frame_names(rq, ids, &names, &n) < 0) {
		req_json_error(rq, 500, "reading frame names failed");
		return false;
	}
	jsonw_array(w);
	for (size_t i = 0; i < n; i++)
		jsonw_str(w, names[i]);
	jsonw_end(w);
	return true;
}

/* Distinct stack ids, and so the position of each in the "stacks" array written. */
struct stackmap {
	int32_t *ids;       /* distinct stack ids, ascending */
	size_t n;
};

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

static long stack_index(const struct stackmap *m, int32_t id)
{
	const int32_t *p = bsearch(&id, m->ids, m->n, sizeof(*m->ids), cmp_i32);
	return p ? (long)(p - m->ids) : -1;
}

/*
 * Writes "stacks": [[frame names, outermost first], ...] for the distinct stack
 * ids of column col of rows, ascending, and fills *m (id -> position in that
 * array). Returns 0 or -1 (err set).
 */
static int put_stacks(struct req *rq, struct jsonw *w, PGresult *rows, int col, struct stackmap *m, char *err,
		      size_t errlen)
{
	int n = PQntuples(rows);
	struct buf ids = BUF_INIT(0);
	PGresult *fr;
	size_t k = 0;

	m->ids = arena_alloc(rq->a, ((size_t)n + 1) * sizeof(int32_t));
	if (!m->ids) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++)
		m->ids[i] = (int32_t)strtol(PQgetvalue(rows, i, col), NULL, 10);
	qsort(m->ids, (size_t)n, sizeof(int32_t), cmp_i32);
	for (int i = 0; i < n; i++)
		if (k == 0 || m->ids[k - 1] != m->ids[i])
			m->ids[k++] = m->ids[i];
	m->n = k;
	buf_putc(&ids, '{');
	for (size_t i = 0; i < k; i++)
		buf_printf(&ids, i ? ",%d" : "%d", m->ids[i]);
	buf_putc(&ids, '}');
	if (buf_error(&ids) != BUF_OK) {
		snprintf(err, errlen, "listing the stacks: %s", buf_error_text(&ids));
		buf_release(&ids);
		return -1;
	}
	fr = model_stacks(rq->db, buf_cstr(&ids), err, errlen);
	buf_release(&ids);
	if (!fr)
		return -1;
	{
		/* one array of names per stack, in the order of m->ids (a stack the database lacks: []) */
		int j = 0, nf = PQntuples(fr);
		jsonw_karray(w, "stacks");
		for (size_t i = 0; i < m->n; i++) {
			while (j < nf && strtol(PQgetvalue(fr, j, 0), NULL, 10) < m->ids[i])
				j++;
			if (j < nf && strtol(PQgetvalue(fr, j, 0), NULL, 10) == m->ids[i]) {
				if (!put_names(rq, w, PQgetvalue(fr, j, 1))) {
					PQclear(fr);
					snprintf(err, errlen, "reading frame names failed");
					return -1;
				}
			} else {
				jsonw_array(w);
				jsonw_end(w);
			}
		}
		jsonw_end(w);
	}
	PQclear(fr);
	return 0;
}

/* The stream row of uuid (its canonical form into canon), or NULL after a 404/500 response. */
static PGresult *need_stream(struct req *rq, const char *uuid, char canon[37])
{
	char err[512];
	PGresult *st;

	if (!util_uuid_canon(uuid, strlen(uuid), canon)) {
		req_json_error(rq, 404, "stream '%.64s': no such stream (not a UUID)", uuid);
		return NULL;
	}
	st = model_stream(rq->db, canon, err, sizeof(err));
	if (failed(rq, st, err))
		return NULL;
	if (PQntuples(st) == 0) {
		req_json_error(rq, 404, "stream %s: no such stream", canon);
		PQclear(st);
		return NULL;
	}
	return st;
}

static void get_stream(struct req *rq)
{
	const char *uuid = rq->arg;
	static const char *const names[] = { "aoi", NULL };
	char canon[37], err[512];
	PGresult *st, *ev = NULL;
	enum aoi_mode mode = AOI_WAITGRAPH;
	const char *aoi = req_query(rq, "aoi");
	struct stackmap m;
	struct jsonw w;
	bool *in = NULL;
	int n;

	if (!known_query(rq, names, false))
		return;
	if (aoi && aoi_mode_parse(aoi, &mode) < 0) {
		req_json_error(rq, 400, "aoi: must be waitgraph, thread, critical or stream");
		return;
	}
	if (!(st = need_stream(rq, uuid, canon)))
		return;
	ev = model_stream_events(rq->db, PQgetvalue(st, 0, 0), MAX_STREAM_EVENTS, err, sizeof(err));
	if (failed(rq, ev, err))
		goto out;
	n = PQntuples(ev);
	in = arena_calloc(rq->a, (size_t)n + 1, sizeof(bool));
	if (!in || model_stream_aoi(st, ev, mode, in) < 0) {
		req_json_error(rq, 500, "computing the AOI failed");
		goto out;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	{
		static const char *const skip[] = { "ref", "events", "symptom_tid", "symptom_start_ns", "symptom_end_ns", NULL };
		put_members(&w, st, 0, skip);
	}
	jsonw_key(&w, "event_count");
	jsonw_number_text(&w, PQgetvalue(st, 0, PQfnumber(st, "events")));
	jsonw_kbool(&w, "events_truncated", n == MAX_STREAM_EVENTS);
	jsonw_kstr(&w, "aoi_mode", aoi_mode_name(mode));
	if (put_stacks(rq, &w, ev, 4, &m, err, sizeof(err)) < 0) {
		req_json_error(rq, 500, "%s", err);
		goto out;
	}
	jsonw_karray(&w, "events");
	for (int i = 0; i < n; i++) {
		bool wait = PQgetvalue(ev, i, 0)[0] == 'w';

		jsonw_object(&w);
		jsonw_kstr(&w, "kind", wait ? "wait" : "run");
		jsonw_key(&w, "tid");
		jsonw_number_text(&w, PQgetvalue(ev, i, 1));
		jsonw_key(&w, "ts_ns");
		jsonw_number_text(&w, PQgetvalue(ev, i, 2));
		jsonw_key(&w, "dur_ns");
		jsonw_number_text(&w, PQgetvalue(ev, i, 3));
		jsonw_ki64(&w, "stack", stack_index(&m, (int32_t)strtol(PQgetvalue(ev, i, 4), NULL, 10)));
		if (wait) {
			jsonw_key(&w, "readier_tid");
			jsonw_number_text(&w, PQgetvalue(ev, i, 5));
		}
		jsonw_kbool(&w, "aoi", in[i]);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
out:
	PQclear(st);
	PQclear(ev);
}

/* ---- runs ---- */

static void post_run(struct req *rq)
{
	struct run_params p;
	char err[512];
	int64_t id;

	if (!req_may_write(rq, true))
		return;
	if (params_parse(rq->body.data ? rq->body.data : "", rq->body.len, rq->a, &p, err, sizeof(err)) < 0) {
		req_json_error(rq, 400, "%s", err);
		return;
	}
	if (miner_enqueue_db(rq->db, &p, &id, err, sizeof(err)) < 0) {
		req_json_error(rq, 500, "%s", err);
		return;
	}
	respond_id(rq, "run_id", id, 202);
	req_add_header(rq, "Location", req_printf(rq, "/api/v1/runs/%lld", (long long)id));
}

static void get_runs(struct req *rq)
{
	static const char *const names[] = { "app", "status", "limit", "offset", NULL };
	const char *status = req_query(rq, "status");
	PGresult *rows = NULL, *count = NULL;
	char err[512];
	long limit, offset;

	if (!known_query(rq, names, false) || !page_params(rq, &limit, &offset))
		return;
	if (status && strcmp(status, "queued") && strcmp(status, "running") && strcmp(status, "done") &&
	    strcmp(status, "failed")) {
		req_json_error(rq, 400, "status: must be queued, running, done or failed");
		return;
	}
	rows = model_runs(rq->db, req_query(rq, "app"), status, limit, offset, err, sizeof(err));
	if (!failed(rq, rows, err))
		count = model_runs_count(rq->db, req_query(rq, "app"), status, err, sizeof(err));
	if (rows && !failed(rq, count, err))
		list_response(rq, "runs", rows, count, NULL);
	PQclear(rows);
	PQclear(count);
}

/* The row of id that get reads (what: "run", "cluster", "problem"), or NULL after setting a
 * 404/500 response. */
static PGresult *need_row(struct req *rq, PGresult *(*get)(PGconn *, const char *, char *, size_t),
			  const char *what, const char *id)
{
	char err[512];
	PGresult *r = get(rq->db, id, err, sizeof(err));

	if (failed(rq, r, err))
		return NULL;
	if (PQntuples(r) == 0) {
		req_json_error(rq, 404, "%s %s: no such %s", what, id, what);
		PQclear(r);
		return NULL;
	}
	return r;
}

static PGresult *need_run(struct req *rq, const char *id)
{
	return need_row(rq, model_run, "run", id);
}

static PGresult *need_cluster(struct req *rq, const char *id)
{
	return need_row(rq, model_cluster, "cluster", id);
}

static PGresult *need_problem(struct req *rq, const char *id)
{
	return need_row(rq, model_problem, "problem", id);
}

static const char *const no_params[] = { NULL };

static void get_run(struct req *rq)
{
	const char *id = rq->arg;
	PGresult *r;

	if (!known_query(rq, no_params, false) || !(r = need_run(rq, id)))
		return;
	row_response(rq, r);
	PQclear(r);
}

/* DELETE /api/v1/runs/{id}: an admin's */
static void delete_run(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	int rc;

	if (!req_may_write(rq, true))
		return;
	if (rq->role < AUTH_ADMIN) {
		req_json_error(rq, 403, "deleting a run needs an admin token");
		return;
	}
	rc = miner_delete_run(rq->db, strtoll(id, NULL, 10), err, sizeof(err));
	if (rc < 0) {
		req_json_error(rq, rc == -2 ? 409 : rc == -3 ? 404 : 500, "%s", err);
		return;
	}
	{
		struct jsonw w;

		jsonw_init(&w, &rq->out);
		jsonw_object(&w);
		jsonw_ki64(&w, "run_id", strtoll(id, NULL, 10));
		jsonw_kbool(&w, "deleted", true);
		jsonw_end(&w);
		ok_json(rq, &w, 200);
	}
}

static bool kind_param(struct req *rq, const char **kind)
{
	const char *k = req_query(rq, "kind");

	*kind = NULL;
	if (!k)
		return true;
	if (strcmp(k, "wait") == 0)
		*kind = "w";
	else if (strcmp(k, "run") == 0)
		*kind = "r";
	else {
		req_json_error(rq, 400, "kind: must be wait or run");
		return false;
	}
	return true;
}

/*
 * Writes cluster rows (model_clusters() or model_cluster()) as objects with "common" as
 * frame names and "patterns" from pats (model_cluster_patterns(), ordered by cluster); with
 * array false, the one cluster's object is left open for more members. Returns false after
 * an error response.
 */
static bool put_clusters(struct req *rq, struct jsonw *w, PGresult *rows, PGresult *pats, bool array)
{
	static const char *const skip[] = { "common", "patterns_total", "title", NULL };
	int pc = 0, np = PQntuples(pats), ccol = PQfnumber(rows, "common");

	if (array)
		jsonw_array(w);
	for (int i = 0; i < PQntuples(rows); i++) {
		const char *cid = PQgetvalue(rows, i, 0);

		jsonw_object(w);
		put_members(w, rows, i, skip);
		jsonw_key(w, "common");
		if (!put_names(rq, w, PQgetvalue(rows, i, ccol)))
			return false;
		/* the frames that tell it apart (docs/mining.md); null: mined before titles */
		jsonw_key(w, "title");
		if (!model_col(rows, i, "title"))
			jsonw_null(w);
		else if (!put_names(rq, w, model_col(rows, i, "title")))
			return false;
		jsonw_key(w, "patterns_total");
		jsonw_number_text(w, PQgetvalue(rows, i, PQfnumber(rows, "patterns_total")));
		jsonw_karray(w, "patterns");
		while (pc < np && strtoll(PQgetvalue(pats, pc, 0), NULL, 10) < strtoll(cid, NULL, 10))
			pc++;
		for (; pc < np && strcmp(PQgetvalue(pats, pc, 0), cid) == 0; pc++) {
			jsonw_object(w);
			jsonw_key(w, "pattern_id");
			jsonw_number_text(w, PQgetvalue(pats, pc, 1));
			jsonw_key(w, "frames");
			if (!put_names(rq, w, PQgetvalue(pats, pc, 2)))
				return false;
			jsonw_key(w, "cost_ns");
			jsonw_number_text(w, PQgetvalue(pats, pc, 3));
			jsonw_key(w, "events");
			jsonw_number_text(w, PQgetvalue(pats, pc, 4));
			jsonw_key(w, "streams");
			jsonw_number_text(w, PQgetvalue(pats, pc, 5));
			jsonw_key(w, "est_cost_ns");
			jsonw_number_text(w, PQgetvalue(pats, pc, 6));
			jsonw_end(w);
		}
		jsonw_end(w);
		if (array)
			jsonw_end(w);
	}
	if (array)
		jsonw_end(w);
	return true;
}

static void get_clusters(struct req *rq)
{
	const char *run = rq->arg;
	static const char *const names[] = { "sort", "kind", "q", "patterns", "limit", "offset", NULL };
	const char *sort = req_query(rq, "sort"), *kind, *text = req_query(rq, "q");
	PGresult *r, *rows = NULL, *count = NULL, *pats = NULL;
	int64_t np;
	long limit, offset;
	int s = 0;
	char err[512];

	if (!known_query(rq, names, false) || !page_params(rq, &limit, &offset) || !kind_param(rq, &kind) ||
	    !num_param(rq, "patterns", 0, 1000, 10, &np))
		return;
	if (sort && (s = model_sort_parse(sort)) < 0) {
		req_json_error(rq, 400, "sort: must be total_cost, streams, events, avg_cost or excess_cost");
		return;
	}
	if (text && (!*text || strlen(text) > 1024)) {
		req_json_error(rq, 400, "q: 1 to 1024 bytes of frame text");
		return;
	}
	if (!(r = need_run(rq, run)))
		return;
	/* a run measured against a baseline ranks by excess cost unless told otherwise */
	if (model_run_count(r, "baseline_streams") > 0) {
		if (!sort)
			s = SORT_EXCESS_COST;
	} else if (s == SORT_EXCESS_COST) {
		PQclear(r);
		req_json_error(rq, 400, "sort: excess_cost needs a run with baseline streams (run %s has none)", run);
		return;
	}
	PQclear(r);
	rows = model_clusters(rq->db, run, (enum model_sort)s, kind, text, limit, offset, err, sizeof(err));
	if (!failed(rq, rows, err))
		count = model_clusters_count(rq->db, run, kind, text, err, sizeof(err));
	if (count && !failed(rq, count, err))
		pats = model_cluster_patterns(rq->db, req_id_array(rq, rows, 0), (long)np, err, sizeof(err));
	if (pats && !failed(rq, pats, err)) {
		struct jsonw w;

		jsonw_init(&w, &rq->out);
		jsonw_object(&w);
		jsonw_kstr(&w, "sort", model_sort_name((enum model_sort)s));
		jsonw_key(&w, "clusters");
		if (put_clusters(rq, &w, rows, pats, true)) {
			jsonw_key(&w, "total");
			jsonw_number_text(&w, PQgetvalue(count, 0, 0));
			jsonw_end(&w);
			ok_json(rq, &w, 200);
		}
	}
	PQclear(rows);
	PQclear(count);
	PQclear(pats);
}

static void get_cluster(struct req *rq)
{
	const char *id = rq->arg;
	static const char *const names[] = { "limit", NULL };
	static const char *const dims[] = { "host", "version", "label" };
	PGresult *c, *r;
	char err[512];
	int64_t lim;
	struct jsonw w;

	if (!known_query(rq, names, false) || !num_param(rq, "limit", 1, 1000, 20, &lim))
		return;
	if (!(c = need_cluster(rq, id)))
		return;
	r = model_cluster_patterns(rq->db, req_id_array(rq, c, 0), 100000, err, sizeof(err));
	jsonw_init(&w, &rq->out);
	if (failed(rq, r, err) || !put_clusters(rq, &w, c, r, false)) {
		PQclear(c);
		PQclear(r);
		return;
	}
	PQclear(c);
	PQclear(r);
	r = model_cluster_streams(rq->db, id, (long)lim, err, sizeof(err));
	if (failed(rq, r, err))
		return;
	jsonw_key(&w, "top_streams");
	put_rows(&w, r, NULL);
	PQclear(r);
	r = model_cluster_by(rq->db, id, (long)lim, err, sizeof(err));
	if (failed(rq, r, err))
		return;
	for (int d = 0; d < 3; d++) {
		static const char *const skip_dim[] = { "dim", NULL }, *const skip_key[] = { "dim", "key", NULL };

		jsonw_karray(&w, req_printf(rq, "by_%s", dims[d]));
		for (int i = 0; i < PQntuples(r); i++)
			if (strcmp(PQgetvalue(r, i, 0), dims[d]) == 0)
				put_row(&w, r, i, d < 2 ? skip_key : skip_dim);
		jsonw_end(&w);
	}
	PQclear(r);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
}

/* ---- problems (docs/mining.md, "Problems"; docs/api.md) ---- */

/* Why a run has no problems to list, or NULL when it has them (its counts name how many: a run
 * mined before migration 023 has no such count, and its clusters no problem). */
static const char *problems_absent(PGresult *run)
{
	const char *st = model_col(run, 0, "status");

	if (!st || strcmp(st, "done") != 0)
		return "the run is not done: its problems come with its clusters";
	if (model_run_count(run, "problems") < 0)
		return "the run was mined before problems existed: mine it again to group its clusters into problems";
	return NULL;
}

/* Problem rows (model_problems()/model_problem()) as objects with "title" as frame names and their
 * member clusters from cl (model_problem_clusters(), by problem); with array false the one
 * problem's object is left open. Returns false after an error response. */
static bool put_problems(struct req *rq, struct jsonw *w, PGresult *rows, PGresult *cl, bool array)
{
	static const char *const skip[] = { "title", NULL };
	static const char *const cskip[] = { "problem_id", "title", "common", NULL };
	int k = 0, nc = PQntuples(cl);

	if (array)
		jsonw_array(w);
	for (int i = 0; i < PQntuples(rows); i++) {
		const char *pid = PQgetvalue(rows, i, 0);

		jsonw_object(w);
		put_members(w, rows, i, skip);
		jsonw_key(w, "title");
		if (!put_names(rq, w, model_col(rows, i, "title")))
			return false;
		jsonw_karray(w, "clusters");
		while (k < nc && strtoll(PQgetvalue(cl, k, 0), NULL, 10) < strtoll(pid, NULL, 10))
			k++;
		for (; k < nc && strcmp(PQgetvalue(cl, k, 0), pid) == 0; k++) {
			jsonw_object(w);
			put_members(w, cl, k, cskip);
			jsonw_key(w, "title");
			if (!put_names(rq, w, model_col(cl, k, "title")))
				return false;
			jsonw_key(w, "common");
			if (!put_names(rq, w, model_col(cl, k, "common")))
				return false;
			jsonw_end(w);
		}
		jsonw_end(w);
		if (array)
			jsonw_end(w);
	}
	if (array)
		jsonw_end(w);
	return true;
}

/* GET /api/v1/runs/{id}/problems: the run's problems by rank, paged, with their clusters */
static void get_problems(struct req *rq)
{
	const char *run = rq->arg;
	static const char *const names[] = { "limit", "offset", NULL };
	PGresult *r, *rows = NULL, *count = NULL, *cl = NULL;
	const char *why;
	long limit, offset;
	char err[512];

	if (!known_query(rq, names, false) || !page_params(rq, &limit, &offset) || !(r = need_run(rq, run)))
		return;
	why = problems_absent(r);
	rows = model_problems(rq->db, run, limit, offset, err, sizeof(err));
	if (!failed(rq, rows, err))
		count = model_problems_count(rq->db, run, err, sizeof(err));
	if (count && !failed(rq, count, err))
		cl = model_problem_clusters(rq->db, req_id_array(rq, rows, 0), err, sizeof(err));
	if (cl && !failed(rq, cl, err)) {
		struct jsonw w;

		jsonw_init(&w, &rq->out);
		jsonw_object(&w);
		jsonw_key(&w, "problems");
		if (put_problems(rq, &w, rows, cl, true)) {
			jsonw_key(&w, "total");
			jsonw_number_text(&w, PQgetvalue(count, 0, 0));
			jsonw_key(&w, "reason");
			if (why)
				jsonw_str(&w, why);
			else
				jsonw_null(&w);
			jsonw_end(&w);
			ok_json(rq, &w, 200);
		}
	}
	PQclear(r);
	PQclear(rows);
	PQclear(count);
	PQclear(cl);
}

/* GET /api/v1/problems/{id}: one problem, its clusters, costliest streams and hosts */
static void get_problem(struct req *rq)
{
	const char *id = rq->arg;
	static const char *const names[] = { "limit", NULL };
	PGresult *p, *r = NULL;
	char err[512];
	int64_t lim;
	struct jsonw w;

	if (!known_query(rq, names, false) || !num_param(rq, "limit", 1, 1000, 20, &lim))
		return;
	if (!(p = need_problem(rq, id)))
		return;
	jsonw_init(&w, &rq->out);
	r = model_problem_clusters(rq->db, req_id_array(rq, p, 0), err, sizeof(err));
	if (failed(rq, r, err) || !put_problems(rq, &w, p, r, false))
		goto out;
	PQclear(r);
	r = model_problem_streams(rq->db, id, (long)lim, err, sizeof(err));
	if (failed(rq, r, err))
		goto out;
	jsonw_key(&w, "top_streams");
	put_rows(&w, r, NULL);
	PQclear(r);
	r = model_problem_hosts(rq->db, id, (long)lim, err, sizeof(err));
	if (failed(rq, r, err))
		goto out;
	jsonw_key(&w, "hosts");
	put_rows(&w, r, NULL);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
out:
	PQclear(p);
	PQclear(r);
}

/* The matched stacks of a cluster with cost, frames resolved (for flame graphs). */
static void get_cluster_stacks(struct req *rq)
{
	const char *id = rq->arg;
	PGresult *c, *r;
	struct stackmap m;
	struct jsonw w;
	char err[512];

	if (!known_query(rq, no_params, false))
		return;
	if (!(c = need_cluster(rq, id)))
		return;
	PQclear(c);
	r = model_cluster_stacks(rq->db, id, err, sizeof(err));
	if (failed(rq, r, err))
		return;
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	if (put_stacks(rq, &w, r, 0, &m, err, sizeof(err)) < 0) {
		PQclear(r);
		req_json_error(rq, 500, "%s", err);
		return;
	}
	jsonw_karray(&w, "costs");
	for (int i = 0; i < PQntuples(r); i++) {
		jsonw_object(&w);
		jsonw_ki64(&w, "stack", stack_index(&m, (int32_t)strtol(PQgetvalue(r, i, 0), NULL, 10)));
		jsonw_key(&w, "cost_ns");
		jsonw_number_text(&w, PQgetvalue(r, i, 1));
		jsonw_key(&w, "events");
		jsonw_number_text(&w, PQgetvalue(r, i, 2));
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
	PQclear(r);
}

/* GET /api/v1/clusters/{id}/attribution, /api/v1/problems/{id}/attribution: the first `limit`
 * values; the same shape for both, but for the id's key ("cluster_id", "problem_id"). */
static void get_attribution(struct req *rq, enum attribution_of of, const char *id)
{
	static const char *const names[] = { "limit", NULL };
	struct attribution at;
	struct jsonw w;
	PGresult *row;
	char err[512];
	int64_t lim;

	if (!known_query(rq, names, false) || !num_param(rq, "limit", 1, 1000, 20, &lim))
		return;
	if (!(row = of == ATTRIBUTION_PROBLEM ? need_problem(rq, id) : need_cluster(rq, id)))
		return;
	PQclear(row);
	if (attribution_compute(rq->db, of, id, rq->a, &at, err, sizeof(err)) < 0) {
		req_json_error(rq, 500, "%s", err);
		return;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_key(&w, of == ATTRIBUTION_PROBLEM ? "problem_id" : "cluster_id");
	jsonw_number_text(&w, id);
	jsonw_ku64(&w, "run_streams", at.run_streams);
	jsonw_ku64(&w, "cluster_streams", at.cluster_streams);
	jsonw_ku64(&w, "baseline_streams", at.baseline_streams);
	jsonw_ku64(&w, "cost_ns", at.cost_ns);
	jsonw_ku64(&w, "tested", at.tested);
	jsonw_ku64(&w, "keys_skipped", at.keys_skipped);
	if (at.n) {
		struct buf words = BUF_INIT(4096);

		attribution_summary(&at, &words);
		jsonw_kstr(&w, "summary", buf_cstr(&words));
		buf_release(&words);
	} else {
		jsonw_knull(&w, "summary");
	}
	jsonw_karray(&w, "values");
	for (size_t i = 0; i < at.n && i < (size_t)lim; i++) {
		const struct attribution_value *x = &at.v[i];

		jsonw_object(&w);
		jsonw_kstr(&w, "key", x->key);
		jsonw_kstr(&w, "value", x->value);
		jsonw_ku64(&w, "cost_ns", x->cost_ns);
		jsonw_kdouble(&w, "cost_share", x->cost_share);
		jsonw_ku64(&w, "cluster_streams", x->cluster_streams);
		jsonw_ku64(&w, "run_streams", x->run_streams);
		jsonw_ku64(&w, "baseline_streams", x->baseline_streams);
		jsonw_kdouble(&w, "cluster_share", x->cluster_share);
		jsonw_kdouble(&w, "run_share", x->run_share);
		jsonw_kdouble(&w, "baseline_share", x->baseline_share);
		jsonw_kdouble(&w, "lift", x->lift);
		jsonw_kdouble(&w, "lift_baseline", x->lift_baseline);
		jsonw_kdouble(&w, "p", x->p);
		jsonw_kdouble(&w, "q", x->q);
		jsonw_kdouble(&w, "p_baseline", x->p_baseline);
		jsonw_kdouble(&w, "q_baseline", x->q_baseline);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
}

static void get_cluster_attribution(struct req *rq)
{
	const char *id = rq->arg;
	get_attribution(rq, ATTRIBUTION_CLUSTER, id);
}

static void get_problem_attribution(struct req *rq)
{
	const char *id = rq->arg;
	get_attribution(rq, ATTRIBUTION_PROBLEM, id);
}

/* GET /api/v1/runs/{a}/compare/{b}: arg is b; a comes from the path. */
static void get_compare(struct req *rq)
{
	const char *arg = rq->arg;
	static const char *const names[] = { "limit", "status", NULL };
	const char *status = req_query(rq, "status");
	struct compare_opts o;
	struct compare *cmp;
	struct jsonw w;
	char err[512];
	int64_t a, b, lim;
	size_t shown = 0;
	int rc;

	if (!known_query(rq, names, false) || !num_param(rq, "limit", 1, 100000, 1000, &lim))
		return;
	if (status && strcmp(status, "new") && strcmp(status, "gone") && strcmp(status, "grown") &&
	    strcmp(status, "shrunk") && strcmp(status, "unchanged")) {
		req_json_error(rq, 400, "status: must be new, gone, grown, shrunk or unchanged");
		return;
	}
	a = strtoll(rq->path + strlen("/api/v1/runs/"), NULL, 10);
	b = strtoll(arg, NULL, 10);
	compare_opts_init(&o);
	o.threads = 1;   /* a request of many: one core each */
	rc = compare_runs(rq->db, a, b, &o, &cmp, err, sizeof(err));
	if (rc != 0) {
		req_json_error(rq, rc > 0 ? 404 : 500, "%s", err);
		return;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_ki64(&w, "a", a);
	jsonw_ki64(&w, "b", b);
	jsonw_ku64(&w, "a_streams", cmp->a_streams);
	jsonw_ku64(&w, "b_streams", cmp->b_streams);
	jsonw_karray(&w, "clusters");
	for (size_t i = 0; i < cmp->n && shown < (size_t)lim; i++) {
		const struct compare_row *r = &cmp->rows[i];

		if (status && strcmp(status, compare_status_name(r->status)) != 0)
			continue;
		shown++;
		jsonw_object(&w);
		jsonw_kstr(&w, "status", compare_status_name(r->status));
		jsonw_kstr(&w, "kind", r->kind == 'w' ? "wait" : "run");
		if (r->a)
			jsonw_ki64(&w, "a_cluster", r->a);
		else
			jsonw_knull(&w, "a_cluster");
		if (r->b)
			jsonw_ki64(&w, "b_cluster", r->b);
		else
			jsonw_knull(&w, "b_cluster");
		jsonw_kdouble(&w, "a_cost_per_stream_ns", round(r->a_cps));
		jsonw_kdouble(&w, "b_cost_per_stream_ns", round(r->b_cps));
		jsonw_kdouble(&w, "change_ns", round(r->diff));
		jsonw_kdouble(&w, "change_lo_ns", round(r->lo));
		jsonw_kdouble(&w, "change_hi_ns", round(r->hi));
		jsonw_kdouble(&w, "q", r->q);
		jsonw_kdouble(&w, "similarity", r->sim);
		if (r->signature)
			jsonw_ki64(&w, "signature_id", r->signature);
		else
			jsonw_knull(&w, "signature_id");
		jsonw_key(&w, "common");
		if (!put_names(rq, &w, req_ids_text(rq, r->common, r->ncommon))) {
			compare_free(cmp);
			return;
		}
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_ku64(&w, "total", cmp->n);
	jsonw_end(&w);
	compare_free(cmp);
	ok_json(rq, &w, 200);
}

/* ---- signatures ---- */

static void get_signatures(struct req *rq)
{
	static const char *const names[] = { "limit", "offset", NULL };
	PGresult *rows = NULL, *count = NULL;
	char err[512];
	long limit, offset;

	if (!known_query(rq, names, false) || !page_params(rq, &limit, &offset))
		return;
	rows = model_signatures(rq->db, limit, offset, err, sizeof(err));
	if (!failed(rq, rows, err))
		count = model_signatures_count(rq->db, err, sizeof(err));
	if (rows && !failed(rq, count, err))
		list_response(rq, "signatures", rows, count, NULL);
	PQclear(rows);
	PQclear(count);
}

/* The body checked (json_check_body) and its members named in fields (NULL-terminated) into out:
 * true, or false after a 400 (unknown fields are refused: sm-web's bodies are closed). */
static bool body_fields(struct req *rq, const char *const *fields, struct json_val *out)
{
	const char *text = rq->body.data ? rq->body.data : "";
	char err[512];

	if (json_check_body(text, rq->body.len, &json_body_limits, err, sizeof(err)) < 0) {
		req_json_error(rq, 400, "the body must be one JSON object: %s", err);
		return false;
	}
	if (json_val_type(json_root(text, rq->body.len)) != JV_OBJECT) {
		req_json_error(rq, 400, "the body must be one JSON object");
		return false;
	}
	if (json_fields(json_root(text, rq->body.len), "", fields, true, out, err, sizeof(err)) < 0) {
		req_json_error(rq, 400, "%s", err);
		return false;
	}
	return true;
}

/* A string field: true with *out (NULL when absent or null), false after a 400. */
static bool str_field(struct req *rq, struct json_val v, const char *name, const char **out)
{
	size_t n;

	*out = NULL;
	if (!json_given(v))
		return true;
	if (json_val_type(v) != JV_STRING) {
		req_json_error(rq, 400, "%s: must be a string", name);
		return false;
	}
	/* UTF-8 and no NUL: json_check_body saw to both */
	if (!(*out = json_val_str(v, rq->a, &n))) {
		req_json_error(rq, 500, "out of memory");
		return false;
	}
	return true;
}

static void post_signature(struct req *rq)
{
	static const char *const fields[] = { "name", "frames", "status", "note", "from_cluster", NULL };
	struct json_val o[5];
	struct json_reader r;
	const char *name, *status, *note, **frames = NULL;
	size_t nframes = 0, n;
	int64_t from = 0, id;
	char err[512];
	int rc;

	if (!req_may_write(rq, true) || !body_fields(rq, fields, o))
		return;
	if (!str_field(rq, o[0], "name", &name) || !str_field(rq, o[2], "status", &status) ||
	    !str_field(rq, o[3], "note", &note))
		goto out;
	if (!name) {
		req_json_error(rq, 400, "name: required");
		goto out;
	}
	if (json_val_type(o[1]) != JV_ARRAY) {
		req_json_error(rq, 400, "frames: required, an array of frame names (outermost first)");
		goto out;
	}
	nframes = json_count(o[1]);
	frames = arena_calloc(rq->a, nframes + 1, sizeof(*frames));
	json_reader_at(&r, o[1]);
	json_enter(&r);
	for (size_t i = 0; frames && json_next_item(&r); i++) {
		if (!(frames[i] = json_val_str(json_here(&r), rq->a, &n))) {
			req_json_error(rq, 400, "frames[%zu]: must be a string", i);
			goto out;
		}
		json_skip(&r);
	}
	if (json_given(o[4]) && (json_val_int(o[4], &from) != 0 || from < 1)) {
		req_json_error(rq, 400, "from_cluster: must be a cluster id");
		goto out;
	}
	rc = sig_create(rq->db, name, frames, nframes, status ? status : "open", note ? note : "", from, &id, err,
			sizeof(err));
	if (rc < 0) {
		/* a cluster given that does not exist is a bad field, not a missing signature */
		req_json_error(rq, rc == SIG_ENOTFOUND ? 400 : sig_http_status(rc), "%s", err);
		goto out;
	}
	respond_id(rq, "signature_id", id, 201);
	req_add_header(rq, "Location", req_printf(rq, "/api/v1/signatures/%lld", (long long)id));
out:
	return;
}

static void get_signature(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	PGresult *r;

	if (!known_query(rq, no_params, false))
		return;
	r = model_signature(rq->db, id, err, sizeof(err));
	if (failed(rq, r, err))
		return;
	if (PQntuples(r) == 0)
		req_json_error(rq, 404, "signature %s: no such signature", id);
	else
		row_response(rq, r);
	PQclear(r);
}

static void patch_signature(struct req *rq)
{
	const char *id = rq->arg;
	static const char *const fields[] = { "status", "note", NULL };
	struct json_val o[2];
	const char *status, *note;
	char err[512];

	if (!req_may_write(rq, true) || !body_fields(rq, fields, o))
		return;
	if (str_field(rq, o[0], "status", &status) && str_field(rq, o[1], "note", &note)) {
		int rc = sig_update(rq->db, strtoll(id, NULL, 10), status, note, err, sizeof(err));

		if (rc < 0)
			req_json_error(rq, sig_http_status(rc), "%s", err);
		else
			get_signature(rq);
	}
}

static void get_export(struct req *rq)
{
	char err[512];

	if (!known_query(rq, no_params, false))
		return;
	if (sig_export(rq->db, &rq->out, err, sizeof(err)) < 0) {
		req_json_error(rq, 500, "%s", err);
		return;
	}
	if (buf_error(&rq->out) != BUF_OK) {
		req_json_error(rq, 500, "the export could not be built: %s", buf_error_text(&rq->out));
		return;
	}
	req_add_header(rq, "Content-Disposition", "attachment; filename=\"signatures.json\"");
	rq->status = 200;
	rq->ctype = "application/json";
}

static void post_import(struct req *rq)
{
	char err[512];
	size_t n;
	int rc;

	if (!req_may_write(rq, true))
		return;
	rc = sig_import(rq->db, rq->body.data ? rq->body.data : "", rq->body.len, &n, err, sizeof(err));
	if (rc < 0) {
		req_json_error(rq, rc == SIG_EFAIL ? 500 : 400, "%s", err);
		return;
	}
	respond_id(rq, "imported", (int64_t)n, 200);
}

/* ---- the fleet ---- */

#define SILENT_AFTER_DEFAULT 300   /* seconds: five missed reports at the agent's default of 60 s */

static bool silent_after_param(struct req *rq, long long *out)
{
	int64_t v;

	if (!num_param(rq, "silent_after", 10, 7 * 86400, SILENT_AFTER_DEFAULT, &v))
		return false;
	*out = (long long)v;
	return true;
}

static void get_hosts(struct req *rq)
{
	static const char *const names[] = { "limit", "offset", "silent_after", "status", NULL };
	struct host_filter f = { NULL, req_query(rq, "status"), 0 };
	PGresult *rows = NULL, *count = NULL;
	char err[512];
	long limit, offset;

	if (!known_query(rq, names, false) || !page_params(rq, &limit, &offset) ||
	    !silent_after_param(rq, &f.silent_after_s))
		return;
	if (f.status && strcmp(f.status, "live") && strcmp(f.status, "silent") && strcmp(f.status, "stopped")) {
		req_json_error(rq, 400, "status: must be live, silent or stopped");
		return;
	}
	rows = model_hosts(rq->db, &f, limit, offset, err, sizeof(err));
	if (!failed(rq, rows, err))
		count = model_hosts_count(rq->db, &f, err, sizeof(err));
	if (rows && !failed(rq, count, err))
		list_response(rq, "hosts", rows, count, NULL);
	PQclear(rows);
	PQclear(count);
}

static void get_host(struct req *rq)
{
	const char *host = rq->arg;
	static const char *const names[] = { "silent_after", "hours", NULL };
	struct host_filter f = { host, NULL, 0 };
	PGresult *h = NULL, *procs = NULL, *hours = NULL;
	char err[512];
	int64_t nh;
	struct jsonw w;

	if (!known_query(rq, names, false) || !silent_after_param(rq, &f.silent_after_s) ||
	    !num_param(rq, "hours", 1, 24 * 30, 24, &nh))
		return;
	h = model_hosts(rq->db, &f, 1, 0, err, sizeof(err));
	if (failed(rq, h, err))
		return;
	if (PQntuples(h) == 0) {
		req_json_error(rq, 404, "host '%.255s': no agent has reported from it", host);
		goto out;
	}
	procs = model_host_procs(rq->db, host, f.silent_after_s, 1000, err, sizeof(err));
	if (failed(rq, procs, err))
		goto out;
	hours = model_host_hours(rq->db, host, (int)nh, err, sizeof(err));
	if (failed(rq, hours, err))
		goto out;
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	put_members(&w, h, 0, NULL);
	jsonw_key(&w, "processes");
	put_rows(&w, procs, NULL);
	jsonw_key(&w, "hours");
	put_rows(&w, hours, NULL);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
out:
	PQclear(h);
	PQclear(procs);
	PQclear(hours);
}

static void get_profiles(struct req *rq)
{
	static const char *const names[] = { "limit", "offset", NULL };
	PGresult *rows = NULL, *count = NULL;
	char err[512];
	long limit, offset;

	if (!known_query(rq, names, false) || !page_params(rq, &limit, &offset))
		return;
	rows = model_profiles(rq->db, NULL, limit, offset, err, sizeof(err));
	if (!failed(rq, rows, err))
		count = model_profiles_count(rq->db, err, sizeof(err));
	if (rows && !failed(rq, count, err))
		list_response(rq, "profiles", rows, count, NULL);
	PQclear(rows);
	PQclear(count);
}

/* ---- settings pushed to the agents ---- */

/* Only an admin's: what names the thing in the 403 ("tokens"). */
static bool admin_only(struct req *rq, bool write, const char *what)
{
	if (write ? !req_may_write(rq, true) : rq->role == AUTH_NONE) {
		if (!write)
			req_json_error(rq, 401, "an admin token is required");
		return false;
	}
	if (rq->role < AUTH_ADMIN) {
		req_json_error(rq, 403, "%s are an admin's", what);
		return false;
	}
	return true;
}

static void get_agent_settings(struct req *rq)
{
	static const char *const names[] = { NULL };
	PGresult *rows;
	char err[512];
	struct jsonw w;

	if (!known_query(rq, names, false))
		return;
	rows = model_agent_settings(rq->db, err, sizeof(err));
	if (failed(rq, rows, err))
		return;
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_key(&w, "settings");
	put_rows(&w, rows, NULL);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
	PQclear(rows);
}

/* An optional number field in [min, max] (whole when whole is set); absent or null: *present false.
 * null_means: what a null stands for, in the error message (NULL: the field is required). */
static bool num_field(struct req *rq, struct json_val v, const char *name, double min, double max, bool whole,
		      const char *null_means, double *out, bool *present)
{
	int64_t i;

	*present = false;
	if (!json_given(v))
		return true;
	if ((whole && json_val_int(v, &i) != 0) || json_val_num(v, out) < 0 || *out < min || *out > max) {
		req_json_error(rq, 400, "%s: %s from %g to %g%s%s", name, whole ? "a whole number" : "a number", min, max,
			       null_means ? ", or null " : "", null_means ? null_means : "");
		return false;
	}
	*present = true;
	return true;
}

/* A JSON value as a pushed setting, for fleet_settings_check(). */
static struct fleet_given given_json(struct json_val v)
{
	struct fleet_given g = { FLEET_UNSET, false, 0, false };
	int64_t i;

	if (!json_given(v))
		return g;
	g.kind = FLEET_BAD;
	if (json_val_type(v) == JV_TRUE || json_val_type(v) == JV_FALSE) {
		g.kind = FLEET_BOOL;
		g.b = json_val_type(v) == JV_TRUE;
	} else if (json_val_num(v, &g.d) == 0) {
		g.kind = FLEET_NUMBER;
		g.whole = json_val_int(v, &i) == 0;
	}
	return g;
}

static void post_agent_settings(struct req *rq)
{
#define SETTING_NAME_(id, name, type, min, max, def, env, label, help) #name,
	static const char *const fields[] = { "app", GUARD_SETTINGS(SETTING_NAME_) "note", NULL };
#undef SETTING_NAME_
	static const struct fleet_words words = { "true", "false", "null" };
	struct json_val o[GSET_COUNT + 2];
	struct fleet_given given[GSET_COUNT];
	struct agent_settings s;
	const char *app, *note;
	char err[512];
	int rc;

	if (!admin_only(rq, true, "agent settings") || !body_fields(rq, fields, o))
		return;
	if (!str_field(rq, o[0], "app", &app) || !str_field(rq, o[GSET_COUNT + 1], "note", &note))
		return;
	for (size_t i = 0; i < GSET_COUNT; i++)
		given[i] = given_json(o[i + 1]);
	if ((rc = fleet_settings_check(app, given, note, &words, &s, err, sizeof(err))) < 0 ||
	    (rc = model_agent_settings_put(rq->db, &s, err, sizeof(err))) < 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		return;
	}
	get_agent_settings(rq);
}

static void delete_agent_settings(struct req *rq)
{
	const char *app = rq->arg;
	char err[512];
	int rc;

	if (!admin_only(rq, true, "agent settings"))
		return;
	rc = model_agent_settings_delete(rq->db, app, err, sizeof(err));
	if (rc != 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		return;
	}
	get_agent_settings(rq);
}

/* ---- schedules, alert rules, alerts (docs/analysis.md, "Watching") ---- */

/* GET of one list: {"<key>": rows}. */
static void list_json(struct req *rq, const char *key, PGresult *rows, const char *err)
{
	struct jsonw w;

	if (failed(rq, rows, err))
		return;
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_key(&w, key);
	put_rows(&w, rows, NULL);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
	PQclear(rows);
}

static void get_schedules(struct req *rq)
{
	static const char *const names[] = { NULL };
	char err[512];

	if (known_query(rq, names, false))
		list_json(rq, "schedules", model_schedules(rq->db, err, sizeof(err)), err);
}

/* 201 {"<key>": id} of a created (or replaced) row. */
static void created(struct req *rq, const char *key, PGresult *r, const char *err)
{
	struct jsonw w;

	if (failed(rq, r, err))
		return;
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_key(&w, key);
	jsonw_number_text(&w, PQgetvalue(r, 0, 0));
	jsonw_end(&w);
	ok_json(rq, &w, 201);
	PQclear(r);
}

/* 200 {"<key>": id, "deleted": true} */
static void deleted(struct req *rq, const char *key, const char *id)
{
	struct jsonw w;

	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_key(&w, key);
	jsonw_number_text(&w, id);
	jsonw_kbool(&w, "deleted", true);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
}

static void post_schedule(struct req *rq)
{
	static const char *const fields[] = { "app", "kind", "every_s", "window_s", "params", NULL };
	static const char *const own[] = { "app", "kind", "filter", NULL };
	static const char *const window[] = { "since", "until", NULL };
	struct json_val o[5], pf[3], wf[2];
	const char *app, *kind, *ptext = "{}";
	char every[24], window_s[24], err[512], perr[256];
	const char *p[5] = { NULL, NULL, every, window_s, NULL };
	struct run_params rp;
	struct buf full = BUF_INIT(rq->body.len + 1024);
	size_t plen = 2;
	double d;
	bool has;

	if (!admin_only(rq, true, "schedules") || !body_fields(rq, fields, o))
		return;
	if (!str_field(rq, o[0], "app", &app) || !str_field(rq, o[1], "kind", &kind))
		goto out;
	if (!app || !*app || strlen(app) > 255) {
		req_json_error(rq, 400, "app: required, 1 to 255 bytes");
		goto out;
	}
	if (!kind || (strcmp(kind, "wait") && strcmp(kind, "run") && strcmp(kind, "both"))) {
		req_json_error(rq, 400, "kind: required, wait, run or both");
		goto out;
	}
	if (!num_field(rq, o[2], "every_s", 60, 604800, true, NULL, &d, &has))
		goto out;
	if (!has) {
		req_json_error(rq, 400, "every_s: required, a whole number from 60 to 604800");
		goto out;
	}
	snprintf(every, sizeof(every), "%.0f", d);
	if (!num_field(rq, o[3], "window_s", 60, 2592000, true, NULL, &d, &has))
		goto out;
	if (!has) {
		req_json_error(rq, 400, "window_s: required, a whole number from 60 to 2592000");
		goto out;
	}
	snprintf(window_s, sizeof(window_s), "%.0f", d);
	/* the other run parameters, checked as a run would be (app, kind and the window are the schedule's) */
	if (json_given(o[4])) {
		if (json_val_type(o[4]) != JV_OBJECT) {
			req_json_error(rq, 400, "params: an object of run parameters (POST /api/v1/runs)");
			goto out;
		}
		if (json_fields(o[4], "params", own, false, pf, err, sizeof(err)) < 0) {
			req_json_error(rq, 400, "%s", err);
			goto out;
		}
		if (pf[0].p || pf[1].p) {
			req_json_error(rq, 400, "params: app and kind are the schedule's own fields");
			goto out;
		}
		if (json_val_type(pf[2]) == JV_OBJECT &&
		    (json_fields(pf[2], "params.filter", window, false, wf, err, sizeof(err)) < 0 || wf[0].p ||
		     wf[1].p)) {
			req_json_error(rq, 400, "params.filter: since and until come from window_s");
			goto out;
		}
		plen = json_val_text(o[4], &ptext);
	}
	/* the params as a run would get them: {"app": ..., "kind": ..., <the params' members>} */
	buf_puts(&full, "{\"app\":");
	buf_put_json_str(&full, app, strlen(app));
	buf_puts(&full, ",\"kind\":");
	buf_put_json_str(&full, kind, strlen(kind));
	if (json_count(o[4]) > 0) {
		buf_putc(&full, ',');
		buf_append(&full, ptext + 1, plen - 1);
	} else {
		buf_putc(&full, '}');
	}
	if (buf_error(&full) != BUF_OK) {
		req_json_error(rq, 500, "out of memory");
		goto out;
	}
	if (params_parse(full.data, full.len, rq->a, &rp, perr, sizeof(perr)) < 0) {
		req_json_error(rq, 400, "params: %s", perr);
		goto out;
	}
	/* the text without app and kind, as stored */
	p[4] = arena_strndup(rq->a, ptext, plen);
	p[0] = app;
	p[1] = kind;
	created(rq, "schedule_id", model_schedule_put(rq->db, p, err, sizeof(err)), err);
out:
	buf_release(&full);
}

static void delete_schedule(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	int rc;

	if (!admin_only(rq, true, "schedules"))
		return;
	rc = model_schedule_delete(rq->db, id, err, sizeof(err));
	if (rc != 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		return;
	}
	deleted(rq, "schedule_id", id);
}

static void get_alert_rules(struct req *rq)
{
	static const char *const names[] = { NULL };
	char err[512];

	if (known_query(rq, names, false))
		list_json(rq, "rules", model_alert_rules(rq->db, rq->role < AUTH_ADMIN, err, sizeof(err)), err);
}

static void post_alert_rule(struct req *rq)
{
	static const char *const fields[] = { "name", "app", "type", "signature_id", "limit_ns_per_hour", "min_share",
					      "webhook", NULL };
	struct json_val o[7];
	const char *name, *app, *type, *hook;
	char sig[24], lim[24], share[40], err[512];
	const char *p[7] = { NULL, NULL, NULL, NULL, NULL, NULL, NULL };
	double d;
	bool has;
	int64_t id;
	int rc;

	if (!admin_only(rq, true, "alert rules") || !body_fields(rq, fields, o))
		return;
	if (!str_field(rq, o[0], "name", &name) || !str_field(rq, o[1], "app", &app) ||
	    !str_field(rq, o[2], "type", &type) || !str_field(rq, o[6], "webhook", &hook))
		goto out;
	if (!name || !*name || strlen(name) > 255) {
		req_json_error(rq, 400, "name: required, 1 to 255 bytes");
		goto out;
	}
	if (app && (!*app || strlen(app) > 255)) {
		req_json_error(rq, 400, "app: 1 to 255 bytes, or null for every app");
		goto out;
	}
	if (webhook_url_check(hook, &rq->cfg->webhook_allow, err, sizeof(err)) < 0) {
		req_json_error(rq, 400, "%s", err);
		goto out;
	}
	if (!type || (strcmp(type, "signature_cost") && strcmp(type, "new_cluster"))) {
		req_json_error(rq, 400, "type: required, signature_cost or new_cluster");
		goto out;
	}
	if (strcmp(type, "signature_cost") == 0) {
		if (!num_field(rq, o[3], "signature_id", 1, 9e15, true, NULL, &d, &has))
			goto out;
		if (!has) {
			req_json_error(rq, 400, "signature_id: required for signature_cost");
			goto out;
		}
		snprintf(sig, sizeof(sig), "%.0f", d);
		if (!num_field(rq, o[4], "limit_ns_per_hour", 1, 9e18, true, NULL, &d, &has))
			goto out;
		if (!has) {
			req_json_error(rq, 400, "limit_ns_per_hour: required for signature_cost");
			goto out;
		}
		snprintf(lim, sizeof(lim), "%.0f", d);
		p[3] = sig;
		p[4] = lim;
	} else {
		if (!num_field(rq, o[5], "min_share", 1e-9, 1, false, NULL, &d, &has))
			goto out;
		if (!has) {
			req_json_error(rq, 400, "min_share: required for new_cluster, a share of the run's cost (0 to 1]");
			goto out;
		}
		snprintf(share, sizeof(share), "%.17g", d);
		p[5] = share;
	}
	p[0] = name;
	p[1] = app;
	p[2] = type;
	p[6] = hook;
	rc = model_alert_rule_put(rq->db, p, &id, err, sizeof(err));
	if (rc < 0)
		req_json_error(rq, req_status_of(rc), "%s", err);
	else
		respond_id(rq, "rule_id", id, 201);
out:
	return;
}

static void delete_alert_rule(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	int rc;

	if (!admin_only(rq, true, "alert rules"))
		return;
	rc = model_alert_rule_delete(rq->db, id, err, sizeof(err));
	if (rc != 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		return;
	}
	deleted(rq, "rule_id", id);
}

static void get_alerts(struct req *rq)
{
	static const char *const names[] = { "limit", NULL };
	char err[512];
	int64_t lim;

	if (known_query(rq, names, false) && num_param(rq, "limit", 1, 1000, 100, &lim))
		list_json(rq, "alerts", model_alerts(rq->db, (long)lim, err, sizeof(err)), err);
}

/* ---- tokens (admin) ---- */


static void get_tokens(struct req *rq)
{
	static const char *const names[] = { "limit", "offset", NULL };
	PGresult *rows = NULL, *count = NULL;
	char err[512];
	long limit, offset;

	if (!admin_only(rq, false, "tokens") || !known_query(rq, names, false) || !page_params(rq, &limit, &offset))
		return;
	rows = model_tokens(rq->db, limit, offset, err, sizeof(err));
	if (!failed(rq, rows, err))
		count = model_tokens_count(rq->db, err, sizeof(err));
	if (rows && !failed(rq, count, err))
		list_response(rq, "tokens", rows, count, NULL);
	PQclear(rows);
	PQclear(count);
}

static void post_token(struct req *rq)
{
	static const char *const fields[] = { "role", "name", "host", NULL };
	struct json_val o[3];
	const char *role, *name, *host;
	char token[AUTH_TOKEN_LEN + 1], err[512];
	int64_t id;
	struct jsonw w;
	int rc;

	if (!admin_only(rq, true, "tokens") || !body_fields(rq, fields, o))
		return;
	if (!str_field(rq, o[0], "role", &role) || !str_field(rq, o[1], "name", &name) ||
	    !str_field(rq, o[2], "host", &host))
		goto out;
	if (!role || auth_role_parse(role) == AUTH_NONE) {
		req_json_error(rq, 400, "role: required, ingest, analyst or admin");
		goto out;
	}
	rc = auth_token_create(rq->db, auth_role_parse(role), name, host, token, &id, err, sizeof(err));
	if (rc < 0) {
		req_json_error(rq, rc == AUTH_EINVAL ? 400 : 500, "%s", err);
		goto out;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_ki64(&w, "token_id", id);
	jsonw_kstr(&w, "token", token);
	jsonw_kstr(&w, "role", role);
	jsonw_kstr(&w, "name", name ? name : "");
	jsonw_kstr(&w, "host", host);
	jsonw_end(&w);
	ok_json(rq, &w, 201);
	req_add_header(rq, "Location", req_printf(rq, "/api/v1/tokens/%lld", (long long)id));
out:
	return;
}

static void delete_token(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	int rc;
	struct jsonw w;

	if (!admin_only(rq, true, "tokens"))
		return;
	rc = auth_token_revoke(rq->db, strtoll(id, NULL, 10), err, sizeof(err));
	if (rc != 0) {
		req_json_error(rq, rc > 0 ? 404 : 500, "%s", err);
		return;
	}
	req_token_revoked(rq, strtoll(id, NULL, 10));
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_ki64(&w, "token_id", strtoll(id, NULL, 10));
	jsonw_kbool(&w, "revoked", true);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
}

/* ---- debug files (admin): names for unnamed frames, docs/symbols.md ---- */

/* POST /api/v1/debuginfo: the body is one ELF debug file; its symbols name the frames of its build. */
static void post_debuginfo(struct req *rq)
{
	struct debuginfo *d;
	char err[512];
	int n;
	struct jsonw w;

	if (!admin_only(rq, true, "debug files"))
		return;
	if (!(d = debuginfo_open())) {
		req_json_error(rq, 500, "out of memory");
		return;
	}
	if (debuginfo_load_mem(d, rq->body.data ? rq->body.data : "", rq->body.len) < 0)
		req_json_error(rq, 400, "the body is not a usable ELF debug file: %s", debuginfo_error(d));
	else if (!debuginfo_build_id(d)[0])
		req_json_error(rq, 400, "the file has no GNU build id (.note.gnu.build-id)");
	else if (debuginfo_count(d) == 0)
		req_json_error(rq, 400, "the file has no function symbols (.symtab or .dynsym)");
	else if ((n = symstore_put(rq->db, d, "upload", "POST /api/v1/debuginfo", err, sizeof(err))) < 0)
		req_json_error(rq, 500, "%s", err);
	else {
		jsonw_init(&w, &rq->out);
		jsonw_object(&w);
		jsonw_kstr(&w, "build_id", debuginfo_build_id(d));
		jsonw_ki64(&w, "symbols", (int64_t)debuginfo_count(d));
		jsonw_ki64(&w, "frames_named", n);
		jsonw_end(&w);
		ok_json(rq, &w, 201);
	}
	debuginfo_free(d);
}

/* GET /api/v1/debuginfo[?missing=1]: build ids known, most unnamed frames first. */
static void get_debuginfo(struct req *rq)
{
	static const char *const names[] = { "missing", NULL };
	const char *missing = req_query(rq, "missing");
	struct symstore_build *b;
	char err[512];
	struct jsonw w;
	int n;

	if (!admin_only(rq, false, "debug files") || !known_query(rq, names, false))
		return;
	if (missing && strcmp(missing, "0") != 0 && strcmp(missing, "1") != 0) {
		req_json_error(rq, 400, "missing: 0 or 1");
		return;
	}
	if ((n = symstore_builds(rq->db, missing && missing[0] == '1', 1000, &b, err, sizeof(err))) < 0) {
		req_json_error(rq, 500, "%s", err);
		return;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_karray(&w, "builds");
	for (int i = 0; i < n; i++) {
		jsonw_object(&w);
		jsonw_kstr(&w, "build_id", b[i].build_id);
		jsonw_kstr(&w, "module", b[i].module[0] ? b[i].module : NULL);
		jsonw_kstr(&w, "source", b[i].source[0] ? b[i].source : NULL);
		jsonw_kstr(&w, "path", b[i].path[0] ? b[i].path : NULL);
		jsonw_ki64(&w, "symbols", b[i].symbols);
		jsonw_ki64(&w, "unnamed_frames", b[i].unresolved);
		jsonw_kbool(&w, "missing", b[i].unresolved > 0 && !b[i].source[0]);
		jsonw_kstr(&w, "tried_at", b[i].tried_at[0] ? b[i].tried_at : NULL);
		jsonw_kstr(&w, "error", b[i].error[0] ? b[i].error : NULL);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	free(b);
	ok_json(rq, &w, 200);
}

/* ---- coverage and triage ---- */

static void get_coverage(struct req *rq)
{
	const char *run = rq->arg;
	static const char *const names[] = { "signatures", "kind", NULL };
	const char *sel = req_query(rq, "signatures"), *kind;
	struct sig_coverage cov;
	struct jsonw w;
	int64_t *ids = NULL;
	size_t n = 0;
	char err[512];
	int rc;

	if (!known_query(rq, names, false) || !kind_param(rq, &kind))
		return;
	if (sel && !*sel) {
		req_json_error(rq, 400, "signatures: 'all' or signature ids separated by commas");
		return;
	}
	if (sel && strcmp(sel, "all") != 0) {
		const char *p = sel;
		ids = arena_calloc(rq->a, strlen(sel) / 2 + 2, sizeof(*ids));
		while (ids && *p) {
			char tok[24];
			size_t len = strcspn(p, ",");
			if (len == 0 || len >= sizeof(tok)) {
				req_json_error(rq, 400, "signatures: 'all' or signature ids separated by commas");
				return;
			}
			memcpy(tok, p, len);
			tok[len] = '\0';
			if (util_parse_i64(tok, 1, INT64_MAX, &ids[n]) < 0) {
				req_json_error(rq, 400, "signatures: 'all' or signature ids separated by commas");
				return;
			}
			n++;
			p += len + (p[len] == ',');
		}
	}
	rc = sig_coverage(rq->db, strtoll(run, NULL, 10), kind ? kind[0] : 0, ids, n, &cov, &rq->budget, err,
			  sizeof(err));
	if (rc < 0) {
		req_json_error(rq, sig_http_status(rc), "%s", err);
		return;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_ki64(&w, "run_id", strtoll(run, NULL, 10));
	jsonw_kstr(&w, "kind", cov.kind == 'w' ? "wait" : "run");
	jsonw_kdouble(&w, "coverage", cov.coverage);
	jsonw_ku64(&w, "covered_cost_ns", cov.covered_ns);
	jsonw_ku64(&w, "total_cost_ns", cov.total_ns);
	jsonw_karray(&w, "by_signature");
	for (size_t i = 0; i < cov.nby; i++) {
		jsonw_object(&w);
		jsonw_ki64(&w, "signature_id", cov.by[i].id);
		jsonw_kstr(&w, "name", cov.by[i].name);
		jsonw_ku64(&w, "cost_ns", cov.by[i].cost_ns);
		jsonw_kdouble(&w, "coverage", cov.total_ns ? (double)cov.by[i].cost_ns / (double)cov.total_ns : 0);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	free(cov.by);
	ok_json(rq, &w, 200);
}

static void get_triage(struct req *rq)
{
	const char *run = rq->arg;
	static const char *const names[] = { "kind", NULL };
	struct sig_triage tr;
	struct jsonw w;
	const char *kind;
	char err[512];
	int rc;

	if (!known_query(rq, names, false) || !kind_param(rq, &kind))
		return;
	rc = sig_triage(rq->db, strtoll(run, NULL, 10), kind ? kind[0] : 0, &tr, &rq->budget, err, sizeof(err));
	if (rc < 0) {
		req_json_error(rq, sig_http_status(rc), "%s", err);
		return;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_ki64(&w, "run_id", strtoll(run, NULL, 10));
	jsonw_kstr(&w, "kind", tr.kind == 'w' ? "wait" : "run");
	jsonw_ku64(&w, "streams", tr.nstreams);
	jsonw_kdouble(&w, "max_coverage", tr.max_coverage);
	jsonw_karray(&w, "levels");
	for (int l = 0; l < SIG_LEVELS; l++)
		jsonw_double(&w, tr.level[l]);
	jsonw_end(&w);
	jsonw_kobject(&w, "orders");
	for (int o = 0; o < SIG_NORDERS; o++) {
		jsonw_karray(&w, sig_order_name((enum sig_order)o));
		for (int l = 0; l < SIG_LEVELS; l++)
			jsonw_double(&w, tr.needed[o][l]);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	ok_json(rq, &w, 200);
}

/* ---- routing ---- */


/* ---- profiles in other profilers' formats (web/export.h) ---- */

#define EXPORT_MAX_BYTES ((size_t)512 << 20)
#define EXPORT_MAX_STREAM_EVENTS 1000000   /* the wire format's limit */

static const char *const profile_params[] = { "format", "kind", NULL };

/* ?format= and ?kind=: false after a 400. kinds: bit 1 run, bit 2 wait. */
static bool profile_query(struct req *rq, enum export_format *f, unsigned *kinds)
{
	const char *k = req_query(rq, "kind");

	if (!known_query(rq, profile_params, false))
		return false;
	if (export_format_parse(req_query(rq, "format"), f) < 0) {
		req_json_error(rq, 400, "format: must be pprof, speedscope or folded");
		return false;
	}
	if (!k)
		*kinds = 3;
	else if (strcmp(k, "run") == 0)
		*kinds = 1;
	else if (strcmp(k, "wait") == 0)
		*kinds = 2;
	else {
		req_json_error(rq, 400, "kind: must be run or wait");
		return false;
	}
	return true;
}

/* Rows of (frame_ids, cost_ns, events) into side of x, kind given or ('r'/'w') in column kcol. */
static int export_rows(struct req *rq, struct export *x, int side, PGresult *r, int kcol, unsigned kinds,
		       char kind, char *err, size_t errlen)
{
	int fcol = PQfnumber(r, "frame_ids"), ccol = PQfnumber(r, "cost_ns"), ecol = PQfnumber(r, "events");

	for (int i = 0; i < PQntuples(r); i++) {
		char k = kcol >= 0 ? PQgetvalue(r, i, kcol)[0] : kind;
		const char **names;
		size_t n;

		if (!(kinds & (k == 'w' ? 2u : 1u)))
			continue;
		if (req_should_stop(rq)) {
			/* the server answers 503 for it */
			snprintf(err, errlen, "stopped: out of time");
			return -1;
		}
		if (req_frame_names(rq, PQgetvalue(r, i, fcol), &names, &n) < 0) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (export_add(x, side, k == 'w' ? EXPORT_WAIT : EXPORT_RUN, names, n, -1,
			       strtoull(PQgetvalue(r, i, ccol), NULL, 10),
			       ecol >= 0 ? strtoull(PQgetvalue(r, i, ecol), NULL, 10) : 0) < 0) {
			snprintf(err, errlen, "%s", export_error(x));
			return -1;
		}
	}
	return 0;
}

/* Writes x as the response, a download named name + the format's suffix. */
static void send_export(struct req *rq, struct export *x, enum export_format f, const char *name)
{
	rq->out.max = EXPORT_MAX_BYTES;
	if (export_write(x, f, &rq->out) < 0) {
		rq->out.max = 0;
		buf_reset(&rq->out);
		req_json_error(rq, 500, "the profile could not be built: %s", export_error(x));
		return;
	}
	req_add_header(rq, "Content-Disposition",
		       req_printf(rq, "attachment; filename=\"%s%s\"", name, export_suffix(f)));
	rq->status = 200;
	rq->ctype = export_media(f);
}

static void get_cluster_profile(struct req *rq)
{
	const char *id = rq->arg;
	enum export_format f;
	unsigned kinds;
	PGresult *c, *st = NULL, *fr = NULL;
	struct export *x = NULL;
	char err[512];

	if (!profile_query(rq, &f, &kinds) || !(c = need_cluster(rq, id)))
		return;
	st = model_cluster_stacks(rq->db, id, err, sizeof(err));
	if (failed(rq, st, err))
		goto out;
	fr = model_stacks(rq->db, req_id_array(rq, st, 0), err, sizeof(err));
	if (failed(rq, fr, err))
		goto out;
	if (!(x = export_open(req_printf(rq, "stackmine cluster %s of run %s", id, model_col(c, 0, "run_id")),
			      false))) {
		req_json_error(rq, 500, "out of memory");
		goto out;
	}
	for (int i = 0; i < PQntuples(st); i++) {
		int j = model_find_stack(fr, model_coln(st, i, "stack_id"));
		const char **names;
		size_t n;

		if (j < 0 || !(kinds & (model_col(c, 0, "kind")[0] == 'w' ? 2u : 1u)))
			continue;
		if (req_should_stop(rq) || req_frame_names(rq, model_col(fr, j, "frame_ids"), &names, &n) < 0 ||
		    export_add(x, 0, model_col(c, 0, "kind")[0] == 'w' ? EXPORT_WAIT : EXPORT_RUN, names, n, -1,
			       (uint64_t)model_coln(st, i, "cost_ns"), (uint64_t)model_coln(st, i, "events")) < 0) {
			req_json_error(rq, 500, "the profile could not be built: %s", export_error(x));
			goto out;
		}
	}
	send_export(rq, x, f, req_printf(rq, "cluster-%s", id));
out:
	export_free(x);
	PQclear(c);
	PQclear(st);
	PQclear(fr);
}

static void get_run_profile(struct req *rq)
{
	const char *id = rq->arg;
	enum export_format f;
	unsigned kinds;
	PGresult *run, *r = NULL;
	struct export *x = NULL;
	char err[512];

	if (!profile_query(rq, &f, &kinds) || !(run = need_run(rq, id)))
		return;
	r = model_run_profile(rq->db, id, err, sizeof(err));
	if (failed(rq, r, err))
		goto out;
	if (!(x = export_open(req_printf(rq, "stackmine run %s", id), false))) {
		req_json_error(rq, 500, "out of memory");
		goto out;
	}
	if (export_rows(rq, x, 0, r, PQfnumber(r, "kind"), kinds, 'r', err, sizeof(err)) < 0) {
		req_json_error(rq, 500, "the profile could not be built: %s", err);
		goto out;
	}
	send_export(rq, x, f, req_printf(rq, "run-%s", id));
out:
	export_free(x);
	PQclear(run);
	PQclear(r);
}

static void get_compare_profile(struct req *rq)
{
	const char *arg = rq->arg;
	enum export_format f;
	unsigned kinds;
	char a[24], err[512];
	PGresult *ra = NULL, *rb = NULL;
	struct export *x = NULL;

	if (!profile_query(rq, &f, &kinds))
		return;
	snprintf(a, sizeof(a), "%lld", strtoll(rq->path + strlen("/api/v1/runs/"), NULL, 10));
	if (!(ra = need_run(rq, a)) || !(rb = need_run(rq, arg)))
		goto out;
	if (!(x = export_open(req_printf(rq, "stackmine runs %s (A) and %s (B)", a, arg), true))) {
		req_json_error(rq, 500, "out of memory");
		goto out;
	}
	export_set_streams(x, (uint64_t)(model_run_count(ra, "streams") > 0 ? model_run_count(ra, "streams") : 0),
			   (uint64_t)(model_run_count(rb, "streams") > 0 ? model_run_count(rb, "streams") : 0));
	for (int side = 0; side < 2; side++) {
		PGresult *r = model_run_profile(rq->db, side ? arg : a, err, sizeof(err));
		int rc;

		if (failed(rq, r, err))
			goto out;
		rc = export_rows(rq, x, side, r, PQfnumber(r, "kind"), kinds, 'r', err, sizeof(err));
		PQclear(r);
		if (rc < 0) {
			req_json_error(rq, 500, "the profile could not be built: %s", err);
			goto out;
		}
	}
	send_export(rq, x, f, req_printf(rq, "compare-%s-%s", a, arg));
out:
	export_free(x);
	PQclear(ra);
	PQclear(rb);
}

static void get_stream_profile(struct req *rq)
{
	const char *uuid = rq->arg;
	enum export_format f;
	unsigned kinds;
	char canon[37], err[512];
	PGresult *st = NULL, *ev = NULL, *fr = NULL;
	struct export *x = NULL;

	if (!profile_query(rq, &f, &kinds) || !(st = need_stream(rq, uuid, canon)))
		return;
	ev = model_stream_events(rq->db, PQgetvalue(st, 0, 0), EXPORT_MAX_STREAM_EVENTS, err, sizeof(err));
	if (failed(rq, ev, err))
		goto out;
	fr = model_stacks(rq->db, req_id_array(rq, ev, PQfnumber(ev, "stack_id")), err, sizeof(err));
	if (failed(rq, fr, err))
		goto out;
	if (!(x = export_open(req_printf(rq, "stackmine stream %s", canon), false))) {
		req_json_error(rq, 500, "out of memory");
		goto out;
	}
	{
		/* the stacks come by id: their frame names by binary search */
		int kc = PQfnumber(ev, "kind"), sc = PQfnumber(ev, "stack_id");

		for (int i = 0; i < PQntuples(ev); i++) {
			char k = PQgetvalue(ev, i, kc)[0];
			int lo = model_find_stack(fr, strtoll(PQgetvalue(ev, i, sc), NULL, 10));
			const char **names;
			size_t n;

			if (!(kinds & (k == 'w' ? 2u : 1u)) || lo < 0)
				continue;
			if (req_frame_names(rq, model_col(fr, lo, "frame_ids"), &names, &n) < 0 ||
			    export_add(x, 0, k == 'w' ? EXPORT_WAIT : EXPORT_RUN, names, n,
				       model_coln(ev, i, "tid"), (uint64_t)model_coln(ev, i, "dur_ns"), 1) < 0) {
				req_json_error(rq, 500, "the profile could not be built: %s", export_error(x));
				goto out;
			}
		}
	}
	send_export(rq, x, f, req_printf(rq, "stream-%s", canon));
out:
	export_free(x);
	PQclear(st);
	PQclear(ev);
	PQclear(fr);
}

static const struct req_route routes[] = {
	{ REQ_M_GET, "/api/v1/streams", get_streams, NULL },
	{ REQ_M_GET, "/api/v1/streams/*", get_stream, NULL },
	{ REQ_M_GET, "/api/v1/streams/*/profile", get_stream_profile, NULL },
	{ REQ_M_GET, "/api/v1/runs", get_runs, NULL },
	{ REQ_M_POST, "/api/v1/runs", post_run, NULL },
	{ REQ_M_GET, "/api/v1/runs/#", get_run, "run" },
	{ REQ_M_DELETE, "/api/v1/runs/#", delete_run, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/clusters", get_clusters, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/problems", get_problems, "run" },
	{ REQ_M_GET, "/api/v1/problems/#", get_problem, "problem" },
	{ REQ_M_GET, "/api/v1/problems/#/attribution", get_problem_attribution, "problem" },
	{ REQ_M_GET, "/api/v1/runs/#/coverage", get_coverage, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/triage", get_triage, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/compare/#", get_compare, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/compare/#/profile", get_compare_profile, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/profile", get_run_profile, "run" },
	{ REQ_M_GET, "/api/v1/clusters/#", get_cluster, "cluster" },
	{ REQ_M_GET, "/api/v1/clusters/#/stacks", get_cluster_stacks, "cluster" },
	{ REQ_M_GET, "/api/v1/clusters/#/attribution", get_cluster_attribution, "cluster" },
	{ REQ_M_GET, "/api/v1/clusters/#/profile", get_cluster_profile, "cluster" },
	{ REQ_M_GET, "/api/v1/signatures", get_signatures, NULL },
	{ REQ_M_POST, "/api/v1/signatures", post_signature, NULL },
	{ REQ_M_GET, "/api/v1/signatures/export", get_export, NULL },
	{ REQ_M_POST, "/api/v1/signatures/import", post_import, NULL },
	{ REQ_M_GET, "/api/v1/signatures/#", get_signature, "signature" },
	{ REQ_M_PATCH, "/api/v1/signatures/#", patch_signature, "signature" },
	{ REQ_M_GET, "/api/v1/hosts", get_hosts, NULL },
	{ REQ_M_GET, "/api/v1/hosts/**", get_host, NULL },
	{ REQ_M_GET, "/api/v1/profiles", get_profiles, NULL },
	{ REQ_M_GET, "/api/v1/schedules", get_schedules, NULL },
	{ REQ_M_POST, "/api/v1/schedules", post_schedule, NULL },
	{ REQ_M_DELETE, "/api/v1/schedules/#", delete_schedule, "schedule" },
	{ REQ_M_GET, "/api/v1/alert-rules", get_alert_rules, NULL },
	{ REQ_M_POST, "/api/v1/alert-rules", post_alert_rule, NULL },
	{ REQ_M_DELETE, "/api/v1/alert-rules/#", delete_alert_rule, "alert rule" },
	{ REQ_M_GET, "/api/v1/alerts", get_alerts, NULL },
	{ REQ_M_GET, "/api/v1/agent-settings", get_agent_settings, NULL },
	{ REQ_M_POST, "/api/v1/agent-settings", post_agent_settings, NULL },
	{ REQ_M_DELETE, "/api/v1/agent-settings/**", delete_agent_settings, NULL },
	{ REQ_M_GET, "/api/v1/tokens", get_tokens, NULL },
	{ REQ_M_POST, "/api/v1/tokens", post_token, NULL },
	{ REQ_M_DELETE, "/api/v1/tokens/#", delete_token, "token" },
	{ REQ_M_GET, "/api/v1/debuginfo", get_debuginfo, NULL },
	{ REQ_M_POST, "/api/v1/debuginfo", post_debuginfo, NULL },
};

void api_handle(struct req *rq)
{
	struct req_match m;
	char id[24];

	if (strncmp(rq->path, "/api/v1/", 8) != 0 || !rq->path[8]) {
		req_json_error(rq, 404, "no such endpoint (the API is under /api/v1/)");
		return;
	}
	req_route(routes, sizeof(routes) / sizeof(routes[0]), rq, &m);
	if (m.bad_id) {
		req_json_error(rq, 404, "%s '%.64s': no such %s (ids are positive whole numbers)", m.bad_id->what,
			       m.bad_arg ? m.bad_arg : "", m.bad_id->what);
		return;
	}
	if (!m.allowed) {
		req_json_error(rq, 404, "no such endpoint");
		return;
	}
	if (!m.route) {
		req_add_header(rq, "Allow", req_allow_header(m.allowed));
		req_json_error(rq, 405, "method not allowed here");
		return;
	}
	if (m.route->method == REQ_M_GET && !req_may_read(rq)) {
		req_json_error(rq, 401, "an analyst or admin token is required (Authorization: Bearer TOKEN)");
		return;
	}
	if (m.route->what) {
		int64_t v;

		util_parse_i64(m.arg, 1, INT64_MAX, &v);
		snprintf(id, sizeof(id), "%lld", (long long)v);
		m.arg = id;
	}
	rq->arg = m.arg;
	m.route->fn(rq);
}
