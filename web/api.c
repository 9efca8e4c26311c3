/* api: the REST API's routes and dispatch, and the JSON helpers its handlers share (see api.h). */
#include "web/api.h"
#include "common/arena.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "common/vec.h"
#include "web/alerts.h"
#include "web/clusters.h"
#include "web/compare.h"
#include "web/export.h"
#include "web/fleet.h"
#include "web/model.h"
#include "web/problems.h"
#include "web/request.h"
#include "web/runs.h"
#include "web/signatures.h"
#include "web/streams.h"
#include "web/symbols.h"
#include "web/tokens.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PostgreSQL type oids of the columns model.c returns */
enum { OID_BOOL = 16, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23, OID_FLOAT4 = 700, OID_FLOAT8 = 701,
       OID_NUMERIC = 1700, OID_JSON = 114, OID_JSONB = 3802 };

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

void api_put_members(struct jsonw *w, const PGresult *r, int row, const char *const *skip)
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

void api_put_row(struct jsonw *w, const PGresult *r, int row, const char *const *skip)
{
	jsonw_object(w);
	api_put_members(w, r, row, skip);
	jsonw_end(w);
}

void api_put_rows(struct jsonw *w, const PGresult *r, const char *const *skip)
{
	jsonw_array(w);
	for (int i = 0; i < PQntuples(r); i++)
		api_put_row(w, r, i, skip);
	jsonw_end(w);
}

void api_ok_json(struct req *rq, const struct jsonw *w, int status)
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

bool api_failed(struct req *rq, PGresult *r, const char *err)
{
	if (r)
		return false;
	req_json_error(rq, 500, "%s", err);
	return true;
}

bool api_put_parents(struct req *rq, struct jsonw *w, const struct api_parents *how, PGresult *rows,
		     PGresult *kids, bool array)
{
	int k = 0;

	if (array)
		jsonw_array(w);
	for (int i = 0; i < PQntuples(rows); i++) {
		jsonw_object(w);
		api_put_members(w, rows, i, how->skip);
		if (!how->head(rq, w, rows, i))
			return false;
		jsonw_karray(w, how->kids_key);
		for (int end = api_child_rows(kids, &k, PQgetvalue(rows, i, 0)); k < end; k++) {
			jsonw_object(w);
			if (!how->child(rq, w, kids, k))
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

/* Opens the response's object at its first key; keyed_close() ends and sends it. */
static void keyed_open(struct req *rq, struct jsonw *w, const char *key)
{
	jsonw_init(w, &rq->out);
	jsonw_object(w);
	jsonw_key(w, key);
}

static void keyed_close(struct req *rq, struct jsonw *w, int status)
{
	jsonw_end(w);
	api_ok_json(rq, w, status);
}

void api_page_response(struct req *rq, const char *name, PGresult *rows, PGresult *count, const char *err)
{
	struct jsonw w;

	if (!api_failed(rq, rows, err) && !api_failed(rq, count, err)) {
		keyed_open(rq, &w, name);
		api_put_rows(&w, rows, NULL);
		jsonw_key(&w, "total");
		jsonw_number_text(&w, PQgetvalue(count, 0, 0));
		if (PQfnumber(count, "more") >= 0)   /* a count that stopped: total is a lower bound */
			jsonw_kbool(&w, "more", PQgetvalue(count, 0, PQfnumber(count, "more"))[0] == 't');
		keyed_close(rq, &w, 200);
	}
	PQclear(rows);
	PQclear(count);
}

void api_respond_id(struct req *rq, const char *name, int64_t id, int status)
{
	struct jsonw w;

	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_ki64(&w, name, id);
	jsonw_end(&w);
	api_ok_json(rq, &w, status);
}

void api_row_response(struct req *rq, const PGresult *r)
{
	struct jsonw w;

	jsonw_init(&w, &rq->out);
	api_put_row(&w, r, 0, NULL);
	api_ok_json(rq, &w, 200);
}

bool api_num_param(struct req *rq, const char *name, int64_t min, int64_t max, int64_t def, int64_t *out)
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

bool api_page_params(struct req *rq, long *limit, long *offset)
{
	int64_t l, o;

	if (!api_num_param(rq, "limit", 1, 1000, 50, &l) || !api_num_param(rq, "offset", 0, 1000000000, 0, &o))
		return false;
	*limit = (long)l;
	*offset = (long)o;
	return true;
}

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

bool api_known_query(struct req *rq, const char *const *names, bool labels)
{
	struct qcheck q = { names, labels, NULL };

	req_query_each(rq, check_key, &q);
	if (!q.bad)
		return true;
	req_json_error(rq, 400, "%.64s: unknown parameter", q.bad);
	return false;
}

static void put_name_array(struct jsonw *w, const char *const *names, size_t n)
{
	jsonw_array(w);
	for (size_t i = 0; i < n; i++)
		jsonw_str(w, names[i]);
	jsonw_end(w);
}

bool api_put_names(struct req *rq, struct jsonw *w, const char *ids)
{
	const char **names;
	size_t n;

	if (req_frame_names(rq, ids, &names, &n) < 0) {
		req_json_error(rq, 500, "reading frame names failed");
		return false;
	}
	put_name_array(w, names, n);
	return true;
}

long api_stack_index(const struct api_stackmap *m, int32_t id)
{
	const int32_t *p = bsearch(&id, m->ids, m->n, sizeof(*m->ids), vec_cmp_i32);
	return p ? (long)(p - m->ids) : -1;
}

int api_put_stacks(struct req *rq, struct jsonw *w, PGresult *rows, int col, struct api_stackmap *m, char *err,
		   size_t errlen)
{
	int n = PQntuples(rows);
	int32_t *ids = arena_alloc(rq->a, ((size_t)n + 1) * sizeof(int32_t));
	size_t k = 0;

	if (!ids) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++)
		ids[i] = (int32_t)strtol(PQgetvalue(rows, i, col), NULL, 10);
	vec_sort_i32(ids, (size_t)n);
	for (int i = 0; i < n; i++)
		if (k == 0 || ids[k - 1] != ids[i])
			ids[k++] = ids[i];
	m->ids = ids;
	m->n = k;
	return api_put_stack_list(rq, w, ids, k, err, errlen);
}

int api_put_stack_list(struct req *rq, struct jsonw *w, const int32_t *ids, size_t n, char *err, size_t errlen)
{
	struct req_names names;
	PGresult *fr;
	int *row;

	if (!(row = arena_alloc(rq->a, (n + 1) * sizeof(*row)))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!(fr = model_stacks_of(rq->db, ids, n, err, errlen)))
		return -1;
	if (req_frame_names_rows(rq, fr, PQfnumber(fr, "frame_ids"), &names) < 0) {
		PQclear(fr);
		snprintf(err, errlen, "reading frame names failed");
		return -1;
	}
	model_stack_rows(fr, ids, n, row);
	/* one array of names per stack, in the order of ids (a stack the database lacks: []) */
	jsonw_karray(w, "stacks");
	for (size_t i = 0; i < n; i++) {
		if (row[i] < 0) {
			jsonw_array(w);
			jsonw_end(w);
		} else if (!names.row[row[i]]) {
			PQclear(fr);
			snprintf(err, errlen, "reading frame names failed");
			return -1;
		} else {
			put_name_array(w, names.row[row[i]], names.n[row[i]]);
		}
	}
	jsonw_end(w);
	PQclear(fr);
	return 0;
}

/* The row of id that get reads (what: "run", "cluster", "problem"), or NULL after setting a
 * 404/500 response. */
static PGresult *need_row(struct req *rq, PGresult *(*get)(PGconn *, const char *, char *, size_t),
			  const char *what, const char *id)
{
	char err[512];
	PGresult *r = get(rq->db, id, err, sizeof(err));

	if (api_failed(rq, r, err))
		return NULL;
	if (PQntuples(r) == 0) {
		req_json_error(rq, 404, "%s %s: no such %s", what, id, what);
		PQclear(r);
		return NULL;
	}
	return r;
}

PGresult *api_need_run(struct req *rq, const char *id)
{
	return need_row(rq, model_run, "run", id);
}

PGresult *api_need_cluster(struct req *rq, const char *id)
{
	return need_row(rq, model_cluster, "cluster", id);
}

PGresult *api_need_problem(struct req *rq, const char *id)
{
	return need_row(rq, model_problem, "problem", id);
}

const char *const api_no_params[] = { NULL };

bool api_kind_param(struct req *rq, const char **kind)
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

bool api_body_fields(struct req *rq, const char *const *fields, struct json_val *out)
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

bool api_str_field(struct req *rq, struct json_val v, const char *name, const char **out)
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

bool api_admin_only(struct req *rq, bool write, const char *what)
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

bool api_num_field(struct req *rq, struct json_val v, const char *name, double min, double max, bool whole,
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

/* {"<key>": r's rows, or (id) the id in its first column, 201}, or a 500 when the query failed. */
static void keyed_result(struct req *rq, const char *key, PGresult *r, const char *err, bool id)
{
	struct jsonw w;

	if (api_failed(rq, r, err))
		return;
	keyed_open(rq, &w, key);
	if (id)
		jsonw_number_text(&w, PQgetvalue(r, 0, 0));
	else
		api_put_rows(&w, r, NULL);
	keyed_close(rq, &w, id ? 201 : 200);
	PQclear(r);
}

void api_list_json(struct req *rq, const char *key, PGresult *rows, const char *err)
{
	keyed_result(rq, key, rows, err, false);
}

void api_created(struct req *rq, const char *key, PGresult *r, const char *err)
{
	keyed_result(rq, key, r, err, true);
}

void api_deleted(struct req *rq, const char *key, const char *id)
{
	struct jsonw w;

	keyed_open(rq, &w, key);
	jsonw_number_text(&w, id);
	jsonw_kbool(&w, "deleted", true);
	keyed_close(rq, &w, 200);
}

void api_get_page(struct req *rq, const char *name, api_page_fn *page, api_count_fn *count_of)
{
	static const char *const names[] = { "limit", "offset", NULL };
	PGresult *rows, *count;
	char err[512];
	long limit, offset;

	if (!api_known_query(rq, names, false) || !api_page_params(rq, &limit, &offset))
		return;
	rows = page(rq->db, limit, offset, err, sizeof(err));
	count = rows ? count_of(rq->db, err, sizeof(err)) : NULL;
	api_page_response(rq, name, rows, count, err);
}

int api_child_rows(const PGresult *kids, int *k, const char *parent)
{
	int n = PQntuples(kids), end;

	while (*k < n && strtoll(PQgetvalue(kids, *k, 0), NULL, 10) < strtoll(parent, NULL, 10))
		(*k)++;
	for (end = *k; end < n && strcmp(PQgetvalue(kids, end, 0), parent) == 0; end++)
		;
	return end;
}

static const struct req_route routes[] = {
	{ REQ_M_GET, "/api/v1/streams", streams_get_streams, NULL },
	{ REQ_M_GET, "/api/v1/streams/*", streams_get_stream, NULL },
	{ REQ_M_GET, "/api/v1/streams/*/profile", export_get_stream_profile, NULL },
	{ REQ_M_GET, "/api/v1/runs", runs_get_runs, NULL },
	{ REQ_M_POST, "/api/v1/runs", runs_post_run, NULL },
	{ REQ_M_GET, "/api/v1/runs/#", runs_get_run, "run" },
	{ REQ_M_DELETE, "/api/v1/runs/#", runs_delete_run, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/clusters", clusters_get_clusters, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/problems", problems_get_problems, "run" },
	{ REQ_M_GET, "/api/v1/problems/#", problems_get_problem, "problem" },
	{ REQ_M_GET, "/api/v1/problems/#/attribution", problems_get_problem_attribution, "problem" },
	{ REQ_M_GET, "/api/v1/runs/#/coverage", signatures_get_coverage, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/triage", signatures_get_triage, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/compare/#", compare_get_compare, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/compare/#/profile", export_get_compare_profile, "run" },
	{ REQ_M_GET, "/api/v1/runs/#/profile", export_get_run_profile, "run" },
	{ REQ_M_GET, "/api/v1/clusters/#", clusters_get_cluster, "cluster" },
	{ REQ_M_GET, "/api/v1/clusters/#/stacks", clusters_get_cluster_stacks, "cluster" },
	{ REQ_M_GET, "/api/v1/clusters/#/attribution", clusters_get_cluster_attribution, "cluster" },
	{ REQ_M_GET, "/api/v1/clusters/#/profile", export_get_cluster_profile, "cluster" },
	{ REQ_M_GET, "/api/v1/signatures", signatures_get_signatures, NULL },
	{ REQ_M_POST, "/api/v1/signatures", signatures_post_signature, NULL },
	{ REQ_M_GET, "/api/v1/signatures/export", signatures_get_export, NULL },
	{ REQ_M_POST, "/api/v1/signatures/import", signatures_post_import, NULL },
	{ REQ_M_GET, "/api/v1/signatures/#", signatures_get_signature, "signature" },
	{ REQ_M_PATCH, "/api/v1/signatures/#", signatures_patch_signature, "signature" },
	{ REQ_M_GET, "/api/v1/hosts", fleet_get_hosts, NULL },
	{ REQ_M_GET, "/api/v1/hosts/**", fleet_get_host, NULL },
	{ REQ_M_GET, "/api/v1/profiles", fleet_get_profiles, NULL },
	{ REQ_M_GET, "/api/v1/schedules", alerts_get_schedules, NULL },
	{ REQ_M_POST, "/api/v1/schedules", alerts_post_schedule, NULL },
	{ REQ_M_DELETE, "/api/v1/schedules/#", alerts_delete_schedule, "schedule" },
	{ REQ_M_GET, "/api/v1/alert-rules", alerts_get_alert_rules, NULL },
	{ REQ_M_POST, "/api/v1/alert-rules", alerts_post_alert_rule, NULL },
	{ REQ_M_DELETE, "/api/v1/alert-rules/#", alerts_delete_alert_rule, "alert rule" },
	{ REQ_M_GET, "/api/v1/alerts", alerts_get_alerts, NULL },
	{ REQ_M_GET, "/api/v1/agent-settings", fleet_get_agent_settings, NULL },
	{ REQ_M_POST, "/api/v1/agent-settings", fleet_post_agent_settings, NULL },
	{ REQ_M_DELETE, "/api/v1/agent-settings/**", fleet_delete_agent_settings, NULL },
	{ REQ_M_GET, "/api/v1/tokens", tokens_get_tokens, NULL },
	{ REQ_M_POST, "/api/v1/tokens", tokens_post_token, NULL },
	{ REQ_M_DELETE, "/api/v1/tokens/#", tokens_delete_token, "token" },
	{ REQ_M_GET, "/api/v1/debuginfo", symbols_get_debuginfo, NULL },
	{ REQ_M_POST, "/api/v1/debuginfo", symbols_post_debuginfo, NULL },
};

void api_route_name(struct req *rq)
{
	struct req_match m;

	if (strncmp(rq->path, "/api/v1/", 8) == 0 && rq->path[8])
		req_route(routes, sizeof(routes) / sizeof(routes[0]), rq, &m);
}

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
