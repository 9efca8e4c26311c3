/*
 * pages: the dashboard's HTML pages (docs/web.md): runs and the form to start
 * one, a run's ranked clusters, a cluster explained (common part, aligned
 * members, breakdowns, top streams, flame graph), streams with their
 * timeline, signatures with coverage and triage. Rendered on the server from
 * model.c's rows; every name from the data is escaped (html.c). Writes are
 * forms with the cross-site request token, or the API from app.js.
 */
#include "web/pages.h"
#include "clusterer/signature.h"
#include "common/arena.h"
#include "common/util.h"
#include "miner/compare.h"
#include "miner/queue.h"
#include "web/attribution.h"
#include "web/flame.h"
#include "web/fleet.h"
#include "web/html.h"
#include "web/model.h"
#include "web/plot.h"
#include "web/request.h"
#include "web/timeline.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 50
#define TIMELINE_EVENTS 200000

/* The page's offset from ?offset= (0 when absent or bad). */
static long page_offset(struct req *rq)
{
	int64_t o = 0;
	const char *v = req_query(rq, "offset");

	if (v && util_parse_i64(v, 0, 1000000000, &o) < 0)
		o = 0;
	return (long)o;
}

/* Previous/next links keeping the other query parameters given as `keep` (already a safe
 * "&k=v..." string built by the caller with escaped values). */
static void pager(struct req *rq, const char *base, const char *keep, long offset, long shown, long total)
{
	html_raw(rq, "<nav class=\"pager\">");
	if (offset > 0) {
		html_raw(rq, "<a rel=\"prev\" href=\"");
		html_text(rq, base);
		html_rawf(rq, "?offset=%ld", offset > PAGE ? offset - PAGE : 0);
		html_text(rq, keep);
		html_raw(rq, "\">← previous</a>");
	}
	html_rawf(rq, "<span>%ld–%ld of %ld</span>", shown ? offset + 1 : 0, offset + shown, total);
	if (offset + shown < total) {
		html_raw(rq, "<a rel=\"next\" href=\"");
		html_text(rq, base);
		html_rawf(rq, "?offset=%ld", offset + PAGE);
		html_text(rq, keep);
		html_raw(rq, "\">next →</a>");
	}
	html_raw(rq, "</nav>");
}

/* Percent-encodes value into b; the characters of keep (besides letters and digits) stay. */
static void url_encode_keep(struct buf *b, const char *value, const char *keep)
{
	for (const unsigned char *p = (const unsigned char *)value; *p; p++)
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    strchr(keep, *p))
			buf_putc(b, (char)*p);
		else
			buf_printf(b, "%%%02X", *p);
}

/* A path or a query value ('/' kept). */
static void url_encode(struct buf *b, const char *value)
{
	url_encode_keep(b, value, "-_.~/");
}

/* "&name=urlencoded(value)" appended to prev, in the arena (for links that keep a filter). */
static const char *keep_param(struct req *rq, const char *prev, const char *name, const char *value)
{
	struct buf b = BUF_INIT(8192);
	char *out;

	buf_puts(&b, prev ? prev : "");
	if (value && *value) {
		buf_printf(&b, "&%s=", name);
		url_encode(&b, value);
	}
	out = req_strdup(rq, buf_cstr(&b));
	buf_release(&b);
	return out ? out : "";
}

/* Frame names as a numbered list, outermost first. */
static void frame_list(struct req *rq, const char *const *names, size_t n, const char *cls)
{
	html_rawf(rq, "<ol class=\"%s\">", cls);
	for (size_t i = 0; i < n; i++) {
		html_raw(rq, "<li>");
		html_text(rq, names[i]);
		html_raw(rq, "</li>");
	}
	html_raw(rq, "</ol>");
}

/* The last k of frame names n, short, joined by › (each full name in a title). */
static void frames_compact(struct req *rq, const char *const *names, size_t n, size_t k)
{
	size_t from = n > k ? n - k : 0;

	html_raw(rq, "<span class=\"frames\">");
	if (from)
		html_rawf(rq, "<span class=\"more\" title=\"%zu more frames above\">… </span>", from);
	for (size_t i = from; i < n; i++) {
		if (i > from)
			html_raw(rq, " <span class=\"sep\">›</span> ");
		html_frame_short(rq, names[i], 60);
	}
	html_raw(rq, "</span>");
}

/* frames_compact() of the frame ids of a PostgreSQL int array. */
static void frame_ids_compact(struct req *rq, const char *ids, size_t k)
{
	const char **names;
	size_t n;

	if (req_frame_names(rq, ids, &names, &n) == 0)
		frames_compact(rq, names, n, k);
}

/* frames_compact() of a JSON array of names (a signature's frames). */
static void frames_json_compact(struct req *rq, const char *json, size_t k)
{
	json_object *a = json ? json_tokener_parse(json) : NULL;
	size_t n = a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
	const char **names = arena_calloc(rq->a, n + 1, sizeof(char *));

	for (size_t i = 0; names && i < n; i++)
		names[i] = arena_strndup(rq->a, json_object_get_string(json_object_array_get_idx(a, i)),
					 (size_t)json_object_get_string_len(json_object_array_get_idx(a, i)));
	if (names)
		frames_compact(rq, names, n, k);
	json_object_put(a);
}

/* ---- login ---- */

static void page_login(struct req *rq, const char *msg, int status)
{
	const char *next = req_local_next(rq, req_query(rq, "next") ? req_query(rq, "next") : req_form(rq, "next"));

	html_begin(rq, "Log in");
	html_raw(rq, "<h1>Log in</h1>");
	if (msg) {
		html_raw(rq, "<p class=\"error\" role=\"alert\">");
		html_text(rq, msg);
		html_raw(rq, "</p>");
	}
	html_raw(rq, "<form class=\"login\" method=\"post\" action=\"/login\"><label>API token (analyst or admin) "
		     "<input type=\"password\" name=\"token\" autocomplete=\"current-password\" required "
		     "size=\"72\"></label><input type=\"hidden\" name=\"next\" value=\"");
	html_text(rq, next);
	html_raw(rq, "\"><button type=\"submit\">Log in</button></form><p class=\"hint\">Tokens come from "
		     "<code>sm-admin token create --role analyst</code>. The token is not kept: the login starts "
		     "a session of its own, in an HttpOnly cookie for this site only.</p>");
	html_end(rq);
	rq->status = status;
}

static void post_login(struct req *rq)
{
	const char *origin = req_header(rq, "Origin"), *host = req_header(rq, "Host");
	enum auth_role role;

	/* a login from another site would log this browser into someone else's session */
	if (origin && host) {
		const char *rest = strncmp(origin, "http://", 7) == 0 ? origin + 7 :
				   strncmp(origin, "https://", 8) == 0 ? origin + 8 : "";
		if (strcmp(rest, host) != 0) {
			html_error(rq, 403, "cross-site login refused");
			return;
		}
	}
	if (req_login(rq, req_form(rq, "token"), &role) < 0) {
		/* the token may well be right: say so, not that it is wrong */
		page_login(rq, "The database is unavailable, so the token cannot be checked; try again in a moment.",
			   503);
		req_add_header(rq, "Retry-After", REQ_DB_RETRY_AFTER);
		return;
	}
	if (role == AUTH_NONE) {
		page_login(rq, "That token is not valid (unknown, revoked or mistyped).", 401);
		return;
	}
	if (role < AUTH_ANALYST) {
		page_login(rq, "That is an ingest token; the dashboard needs an analyst or admin token.", 403);
		return;
	}
	html_redirect(rq, req_local_next(rq, req_form(rq, "next")));
}

/* ---- runs ---- */

static void run_params_summary(struct req *rq, const char *params_json)
{
	json_object *p = json_tokener_parse(params_json ? params_json : "{}"), *v;

	if (!p)
		return;
	if (json_object_object_get_ex(p, "kind", &v)) {
		html_text(rq, json_object_get_string(v));
		html_raw(rq, " · ");
	}
	if (json_object_object_get_ex(p, "aoi", &v))
		html_text(rq, json_object_get_string(v));
	if (json_object_object_get_ex(p, "threshold_ns", &v)) {
		html_raw(rq, " · C ");
		html_cost(rq, json_object_get_int64(v));
	} else if (json_object_object_get_ex(p, "threshold_guideline", &v)) {
		json_object *sh, *dl;
		if (json_object_object_get_ex(v, "share", &sh) && json_object_object_get_ex(v, "delay_ns", &dl)) {
			html_rawf(rq, " · C for %.4g of the streams × ", json_object_get_double(sh));
			html_cost(rq, json_object_get_int64(dl));
		}
	} else if (json_object_object_get_ex(p, "threshold_fraction", &v)) {
		html_rawf(rq, " · C %.4g of the AOI", json_object_get_double(v));
	}
	if (json_object_object_get_ex(p, "cut", &v)) {
		json_object *l;
		html_raw(rq, " · ");
		if (json_object_object_get_ex(p, "linkage", &l))
			html_text(rq, json_object_get_string(l));
		html_rawf(rq, " cut %g", json_object_get_double(v));
	}
	json_object_put(p);
}

static void count_of(struct req *rq, const char *counts_json, const char *key)
{
	json_object *c = json_tokener_parse(counts_json ? counts_json : "{}"), *v;

	if (c && json_object_object_get_ex(c, key, &v))
		html_rawf(rq, "%lld", (long long)json_object_get_int64(v));
	else
		html_raw(rq, "–");
	json_object_put(c);
}

static void status_cell(struct req *rq, PGresult *r, int i)
{
	const char *st = model_col(r, i, "status");
	bool live = strcmp(st, "queued") == 0 || strcmp(st, "running") == 0;

	html_rawf(rq, "<span class=\"status %s\"", strcmp(st, "done") == 0 ? "done" :
			 strcmp(st, "failed") == 0 ? "failed" : strcmp(st, "running") == 0 ? "running" : "queued");
	if (live)
		html_rawf(rq, " data-run=\"%lld\"", (long long)model_coln(r, i, "run_id"));
	html_raw(rq, ">");
	html_text(rq, st);
	html_raw(rq, "</span>");
}

static void run_form(struct req *rq)
{
	char err[256];
	PGresult *apps = model_apps(rq->db, err, sizeof(err));

	html_raw(rq, "<section class=\"card\"><h2>Start a mining run</h2>"
		     "<form id=\"run-form\" class=\"grid\"><label>App <select name=\"app\" required>");
	for (int i = 0; apps && i < PQntuples(apps); i++) {
		html_raw(rq, "<option>");
		html_text(rq, PQgetvalue(apps, i, 0));
		html_raw(rq, "</option>");
	}
	PQclear(apps);
	html_raw(rq, "</select></label>"
		     "<label>Kind <select name=\"kind\"><option>both</option><option>run</option><option>wait</option>"
		     "</select></label>"
		     "<label>AOI <select name=\"aoi\"><option>waitgraph</option><option>critical</option>"
		     "<option>thread</option><option>stream</option></select></label>"
		     "<label>Threshold <select name=\"threshold_mode\"><option value=\"guideline\">guideline: share of "
		     "streams × delay</option><option value=\"fraction\">fraction of the AOI cost</option>"
		     "<option value=\"ns\">absolute, in ns</option></select></label>"
		     "<label>Value (share, fraction or ns) <input name=\"threshold\" value=\"0.1\" inputmode=\"decimal\">"
		     "</label><label>Delay per hit, ms (guideline) <input name=\"delay_ms\" value=\"300\" "
		     "inputmode=\"decimal\"></label>"
		     "<label>Linkage <select name=\"linkage\"><option>average</option><option>single</option>"
		     "<option>complete</option></select></label>"
		     "<label>Cut <input name=\"cut\" value=\"0.5\" inputmode=\"decimal\"></label>"
		     "<label>Version <input name=\"version\"></label><label>Host <input name=\"host\"></label>"
		     "<label>Since <input name=\"since\" placeholder=\"2026-11-01T00:00:00Z\"></label>"
		     "<label>Until <input name=\"until\"></label>"
		     "<label class=\"wide\">Labels (key=value, one per line) <textarea name=\"labels\" rows=\"2\">"
		     "</textarea></label>"
		     "<label class=\"wide\">Include frames (globs, one per line) <textarea name=\"include\" rows=\"2\">"
		     "</textarea></label>"
		     "<label class=\"wide\">Exclude frames (globs, one per line) <textarea name=\"exclude\" rows=\"2\">"
		     "</textarea></label>"
		     "<div class=\"wide\"><button type=\"submit\">Start run</button> "
		     "<span id=\"run-form-error\" class=\"error\" role=\"alert\"></span></div></form>"
		     "<p class=\"hint\">The guideline (the paper's): to find bugs that hit a share s of the selected "
		     "streams with a delay d each, C = s × d × streams; it ranks whole bugs, where the spec's default of "
		     "1% of the AOI cost splits them into many small clusters (docs/mining.md).</p></section>");
}

static void page_runs(struct req *rq)
{
	char err[512];
	long offset = page_offset(rq);
	PGresult *r = model_runs(rq->db, NULL, NULL, PAGE, offset, err, sizeof(err)), *cnt;

	if (!r) {
		html_error(rq, 500, err);
		return;
	}
	cnt = model_runs_count(rq->db, NULL, NULL, err, sizeof(err));
	html_begin(rq, "Runs");
	html_raw(rq, "<h1>Mining runs</h1>");
	if (rq->role >= AUTH_ANALYST)
		run_form(rq);
	html_raw(rq, "<table class=\"runs\"><thead><tr><th>Run</th><th>App</th><th>Status</th><th>Parameters</th>"
		     "<th class=\"n\">Streams</th><th class=\"n\">AOI events</th><th class=\"n\">Patterns</th>"
		     "<th class=\"n\">Clusters</th><th>Created (UTC)</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(r); i++) {
		long long id = (long long)model_coln(r, i, "run_id");
		html_rawf(rq, "<tr><td><a href=\"/runs/%lld\">#%lld</a></td><td>", id, id);
		html_text(rq, model_col(r, i, "app"));
		html_raw(rq, "</td><td>");
		status_cell(rq, r, i);
		html_raw(rq, "</td><td>");
		run_params_summary(rq, model_col(r, i, "params"));
		html_raw(rq, "</td><td class=\"n\">");
		count_of(rq, model_col(r, i, "counts"), "streams");
		html_raw(rq, "</td><td class=\"n\">");
		count_of(rq, model_col(r, i, "counts"), "aoi_events");
		html_raw(rq, "</td><td class=\"n\">");
		count_of(rq, model_col(r, i, "counts"), "patterns");
		html_raw(rq, "</td><td class=\"n\">");
		count_of(rq, model_col(r, i, "counts"), "clusters");
		html_raw(rq, "</td><td class=\"time\">");
		html_time(rq, model_col(r, i, "created_at"));
		html_raw(rq, "</td></tr>");
	}
	html_raw(rq, "</tbody></table>");
	pager(rq, "/runs", "", offset, PQntuples(r), cnt ? (long)model_coln(cnt, 0, "total") : 0);
	html_end(rq);
	PQclear(r);
	PQclear(cnt);
}

static const char *const metric_label[SORT_N] = { "Total cost", "Streams", "Events", "Avg cost", "Excess cost" };
static const char *const metric_col[SORT_N] = { "total_cost_ns", "streams", "events", "avg_cost_ns",
						"excess_cost_ns" };

/* Links to the profile of what the page shows in other profilers' formats (docs/import.md). */
static void download_links(struct req *rq, const char *api_path)
{
	static const char *const formats[][2] = {
		{ "pprof", "pprof (go tool pprof, Pyroscope, Parca)" },
		{ "speedscope", "speedscope" },
		{ "folded", "collapsed stacks (FlameGraph, inferno)" },
	};

	html_raw(rq, "<p class=\"downloads\">Download the profile: ");
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		html_raw(rq, i ? " · <a href=\"" : "<a href=\"");
		html_text(rq, api_path);
		html_rawf(rq, "?format=%s\" download>%s</a>", formats[i][0], formats[i][1]);
	}
	html_raw(rq, "</p>");
}

/* A cluster's estimated fleet cost (docs/mining.md, "Estimated metrics"), beside its sampled cost
 * where they differ: the agents shipped only some of a minute's violations. */
static void est_cost_note(struct req *rq, int64_t est)
{
	html_raw(rq, " <span class=\"est\" title=\"estimated fleet cost: each stream's cost times its sampling "
		     "weight (the agents shipped only the worst violations of a busy minute)\">est. ");
	html_cost(rq, est);
	html_raw(rq, "</span>");
}

static void problems_section(struct req *rq, const char *id, PGresult *run);
static void title_frames(struct req *rq, const char *ids);

static void page_run(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	PGresult *run, *cl = NULL, *cnt = NULL;
	const char *sort = req_query(rq, "sort"), *kind = req_query(rq, "kind"), *q = req_query(rq, "q");
	const char *k = NULL, *keep;
	long offset = page_offset(rq);
	double max[SORT_N] = { 0 };
	int s = sort ? model_sort_parse(sort) : -1, nm = SORT_N - 1;
	if (kind && strcmp(kind, "run") == 0)
		k = "r";
	else if (kind && strcmp(kind, "wait") == 0)
		k = "w";
	else
		kind = NULL;
	if (q && (!*q || strlen(q) > 1024))
		q = NULL;
	run = model_run(rq->db, id, err, sizeof(err));
	if (!run) {
		html_error(rq, 500, err);
		return;
	}
	if (PQntuples(run) == 0) {
		PQclear(run);
		html_error(rq, 404, "No such run.");
		return;
	}
	/* measured against a baseline: the excess cost, the default order */
	if (model_run_count(run, "baseline_streams") > 0)
		nm = SORT_N;
	if (s < 0 || s >= nm)
		s = nm == SORT_N ? SORT_EXCESS_COST : SORT_TOTAL_COST;
	cl = model_clusters(rq->db, id, (enum model_sort)s, k, q, PAGE, offset, err, sizeof(err));
	cnt = cl ? model_clusters_count(rq->db, id, k, q, err, sizeof(err)) : NULL;
	if (!cl || !cnt) {
		PQclear(run);
		PQclear(cl);
		html_error(rq, 500, err);
		return;
	}
	html_begin(rq, req_printf(rq, "Run %s", id));
	html_rawf(rq, "<h1>Run #%s: ", id);
	html_value(rq, model_col(run, 0, "app"));
	html_raw(rq, " ");
	status_cell(rq, run, 0);
	html_raw(rq, "</h1><p class=\"params\">");
	run_params_summary(rq, model_col(run, 0, "params"));
	html_raw(rq, "</p>");
	if (strcmp(model_col(run, 0, "status"), "done") == 0)
		download_links(rq, req_printf(rq, "/api/v1/runs/%s/profile", id));
	if (rq->role >= AUTH_ADMIN && strcmp(model_col(run, 0, "status"), "running") != 0) {
		html_rawf(rq, "<form class=\"delete\" method=\"post\" action=\"/runs/%s/delete\">", id);
		html_csrf_field(rq);
		html_raw(rq, "<button type=\"submit\">Delete this run and its results</button></form>");
	}
	if (model_col(run, 0, "error")) {
		html_raw(rq, "<p class=\"error\">");
		html_text(rq, model_col(run, 0, "error"));
		html_raw(rq, "</p>");
	}
	if (model_col(run, 0, "last_retry") && model_coln(run, 0, "attempts") > 1) {
		html_rawf(rq, "<p class=\"hint\">Attempt %lld of %d; the previous one ended: ",
			  (long long)model_coln(run, 0, "attempts"), MINER_MAX_ATTEMPTS);
		html_text(rq, model_col(run, 0, "last_retry"));
		html_raw(rq, "</p>");
	}
	problems_section(rq, id, run);
	html_raw(rq, "<h2>The run</h2>");
	html_raw(rq, "<dl class=\"counts\"><dt>Streams</dt><dd>");
	count_of(rq, model_col(run, 0, "counts"), "streams");
	if (nm == SORT_N) {
		html_raw(rq, "</dd><dt title=\"normal units the clusters were measured in\">Baseline streams</dt><dd>");
		count_of(rq, model_col(run, 0, "counts"), "baseline_streams");
	}
	html_raw(rq, "</dd><dt>AOI events</dt><dd>");
	count_of(rq, model_col(run, 0, "counts"), "aoi_events");
	html_raw(rq, "</dd><dt>Distinct stacks</dt><dd>");
	count_of(rq, model_col(run, 0, "counts"), "distinct_stacks");
	html_raw(rq, "</dd><dt>Patterns</dt><dd>");
	count_of(rq, model_col(run, 0, "counts"), "patterns");
	html_raw(rq, "</dd><dt>Clusters</dt><dd>");
	count_of(rq, model_col(run, 0, "counts"), "clusters");
	html_raw(rq, "</dd>");
	{
		/* the threshold C each kind was mined with */
		json_object *cts = json_tokener_parse(model_col(run, 0, "counts") ? model_col(run, 0, "counts") : "{}"), *v;
		static const char *const keys[2][2] = { { "threshold_run_ns", "C, run" }, { "threshold_wait_ns", "C, wait" } };
		for (int i = 0; cts && i < 2; i++)
			if (json_object_object_get_ex(cts, keys[i][0], &v)) {
				html_rawf(rq, "<dt>%s</dt><dd>", keys[i][1]);
				html_cost(rq, json_object_get_int64(v));
				html_raw(rq, "</dd>");
			}
		json_object_put(cts);
	}
	html_raw(rq, "<dt>Total time</dt><dd>");
	{
		json_object *t = json_tokener_parse(model_col(run, 0, "timings_ms") ? model_col(run, 0, "timings_ms") : "{}"), *v;
		if (t && json_object_object_get_ex(t, "total", &v))
			html_rawf(rq, "%.2f s", (double)json_object_get_int64(v) / 1000);
		else
			html_raw(rq, "–");
		json_object_put(t);
	}
	html_rawf(rq, "</dd></dl><p><a href=\"/signatures?run=%s\">Coverage and triage of the signatures over this "
		      "run</a></p>", id);

	/* kind tabs, filter, the table */
	keep = keep_param(rq, keep_param(rq, keep_param(rq, NULL, "sort", model_sort_name((enum model_sort)s)),
					 "kind", kind), "q", q);
	html_raw(rq, "<form class=\"filter\" method=\"get\"><nav class=\"tabs\">");
	{
		static const char *const kinds[] = { "all", "run", "wait" };
		for (int i = 0; i < 3; i++) {
			bool on = (i == 0 && !kind) || (kind && strcmp(kind, kinds[i]) == 0);
			html_rawf(rq, "<a%s href=\"?", on ? " class=\"on\" aria-current=\"page\"" : "");
			html_text(rq, keep_param(rq, keep_param(rq, keep_param(rq, NULL, "sort",
						 model_sort_name((enum model_sort)s)), "kind", i ? kinds[i] : NULL), "q", q) + 1);
			html_rawf(rq, "\">%s</a>", i == 0 ? "All" : i == 1 ? "Run (CPU)" : "Wait");
		}
	}
	html_raw(rq, "</nav><input type=\"hidden\" name=\"sort\" value=\"");
	html_text(rq, model_sort_name((enum model_sort)s));
	html_raw(rq, "\">");
	if (kind) {
		html_raw(rq, "<input type=\"hidden\" name=\"kind\" value=\"");
		html_text(rq, kind);
		html_raw(rq, "\">");
	}
	html_raw(rq, "<label>Frame contains <input type=\"search\" name=\"q\" value=\"");
	html_text(rq, q);
	html_raw(rq, "\"></label><button type=\"submit\">Filter</button></form>");
	for (int i = 0; i < PQntuples(cl); i++)
		for (int m = 0; m < nm; m++)
			if ((double)model_coln(cl, i, metric_col[m]) > max[m])
				max[m] = (double)model_coln(cl, i, metric_col[m]);
	html_raw(rq, "<table class=\"clusters\" id=\"clusters\"><thead><tr><th class=\"n\">#</th>"
		     "<th class=\"n\" title=\"rank within its kind under this metric\">Rank</th><th>Kind</th>");
	for (int m = 0; m < nm; m++) {
		html_rawf(rq, "<th class=\"n\"%s><a href=\"?", m == s ? " aria-sort=\"descending\"" : "");
		html_text(rq, keep_param(rq, keep_param(rq, keep_param(rq, NULL, "sort", model_sort_name((enum model_sort)m)),
							"kind", kind), "q", q) + 1);
		html_rawf(rq, "\" data-sort=\"%s\">%s%s</a></th>", model_sort_name((enum model_sort)m), metric_label[m],
			  m == s ? " ▼" : "");
	}
	html_raw(rq, "<th>Title (the frames that tell it apart)</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(cl); i++) {
		long long cid = (long long)model_coln(cl, i, "cluster_id");
		html_rawf(rq, "<tr><td class=\"n\"><a href=\"/clusters/%lld\">%ld</a></td><td class=\"n\">%lld</td>"
			  "<td>%s</td>", cid, offset + i + 1, (long long)model_coln(cl, i, "rank"),
			  model_col(cl, i, "kind")[0] == 'w' ? "wait" : "run");
		for (int m = 0; m < nm; m++) {
			int64_t v = model_coln(cl, i, metric_col[m]);
			html_raw(rq, "<td class=\"n metric\">");
			if (m == SORT_EXCESS_COST) {
				/* with its 95 % interval, when there is one */
				html_cost(rq, v);
				if (model_col(cl, i, "excess_lo_ns")) {
					html_raw(rq, " <span class=\"ci\" title=\"95 % bootstrap interval\">[");
					html_cost(rq, model_coln(cl, i, "excess_lo_ns"));
					html_raw(rq, ", ");
					html_cost(rq, model_coln(cl, i, "excess_hi_ns"));
					html_raw(rq, "]</span>");
				}
			} else if (m == 0 || m == 3) {
				html_cost(rq, v);
				if (m == 0 && model_coln(cl, i, "est_cost_ns") != v)
					est_cost_note(rq, model_coln(cl, i, "est_cost_ns"));
			} else {
				html_rawf(rq, "%lld", (long long)v);
			}
			html_bar(rq, v > 0 ? (double)v : 0, max[m], 60);
			html_raw(rq, "</td>");
		}
		html_rawf(rq, "<td><a class=\"common\" href=\"/clusters/%lld\">", cid);
		/* its title (the frames that tell it apart); a run mined before titles: the innermost frames */
		if (model_col(cl, i, "title"))
			title_frames(rq, model_col(cl, i, "title"));
		else
			frame_ids_compact(rq, model_col(cl, i, "common"), 3);
		html_raw(rq, "</a></td></tr>");
	}
	if (PQntuples(cl) == 0)
		html_rawf(rq, "<tr><td colspan=\"%d\" class=\"empty\">No clusters (yet).</td></tr>", nm + 4);
	html_raw(rq, "</tbody></table>");
	pager(rq, req_printf(rq, "/runs/%s", id), keep, offset, PQntuples(cl), (long)model_coln(cnt, 0, "total"));
	html_end(rq);
	PQclear(run);
	PQclear(cl);
	PQclear(cnt);
}

/* ---- problems (docs/mining.md, "Problems") ---- */

#define PROBLEMS_SHOWN 10

/* A title (a PostgreSQL int array of frame ids), each frame short, joined by ›; NULL: none. */
static void title_frames(struct req *rq, const char *ids)
{
	const char **names;
	size_t n;

	if (ids && req_frame_names(rq, ids, &names, &n) == 0)
		frames_compact(rq, names, n, n);
}

/* A problem's metrics as definition list items. */
static void problem_metrics(struct req *rq, PGresult *p, int i)
{
	html_raw(rq, "<dl class=\"counts\"><dt>Total cost</dt><dd>");
	html_cost(rq, model_coln(p, i, "total_cost_ns"));
	if (model_coln(p, i, "est_cost_ns") != model_coln(p, i, "total_cost_ns"))
		est_cost_note(rq, model_coln(p, i, "est_cost_ns"));
	html_rawf(rq, "</dd><dt>Streams</dt><dd>%lld</dd><dt>Events</dt><dd>%lld</dd><dt>Average cost</dt><dd>",
		  (long long)model_coln(p, i, "streams"), (long long)model_coln(p, i, "events"));
	html_cost(rq, model_coln(p, i, "avg_cost_ns"));
	html_raw(rq, "</dd>");
	if (model_col(p, i, "excess_cost_ns")) {
		html_raw(rq, "<dt title=\"beyond what the baseline streams spend\">Excess cost</dt><dd>");
		html_cost(rq, model_coln(p, i, "excess_cost_ns"));
		html_raw(rq, "</dd>");
	}
	html_raw(rq, "</dl>");
}

/* A problem of the machine (cause cpu, docs/mining.md "Problems"): say so, it is not the code's. */
static void machine_note(struct req *rq, PGresult *p, int i)
{
	const char *cause = model_col(p, i, "cause");

	if (cause && strcmp(cause, "cpu") == 0)
		html_raw(rq, "<p class=\"machine\"><strong>The machine, not the code:</strong> these units waited for a "
			     "CPU (the scheduler's run queue, or the cgroup's CPU limit), so their hosts were saturated or "
			     "throttled. Ranked after the program's own problems; see its hosts.</p>");
}

/* The member clusters of problem pid (rows of model_problem_clusters() from *k on). */
static void problem_members(struct req *rq, PGresult *cl, int *k, const char *pid)
{
	int nc = PQntuples(cl);

	while (*k < nc && strtoll(PQgetvalue(cl, *k, 0), NULL, 10) < strtoll(pid, NULL, 10))
		(*k)++;
	html_raw(rq, "<ul class=\"members\">");
	for (; *k < nc && strcmp(PQgetvalue(cl, *k, 0), pid) == 0; (*k)++) {
		long long cid = (long long)model_coln(cl, *k, "cluster_id");

		html_rawf(rq, "<li>%s cluster <a href=\"/clusters/%lld\">#%lld</a> (rank %lld), ",
			  model_col(cl, *k, "kind")[0] == 'w' ? "wait" : "run", cid, cid,
			  (long long)model_coln(cl, *k, "rank"));
		html_cost(rq, model_coln(cl, *k, "total_cost_ns"));
		html_rawf(rq, " in %lld streams: <a class=\"common\" href=\"/clusters/%lld\">",
			  (long long)model_coln(cl, *k, "streams"), cid);
		title_frames(rq, model_col(cl, *k, "title"));
		html_raw(rq, "</a></li>");
	}
	html_raw(rq, "</ul>");
}

/* The run page's first section: its problems, the worst first (or why it has none). */
static void problems_section(struct req *rq, const char *id, PGresult *run)
{
	char err[512];
	PGresult *p = NULL, *cnt = NULL, *cl = NULL;
	const char *st = model_col(run, 0, "status");
	int k = 0;

	html_raw(rq, "<section id=\"problems\"><h2>Problems</h2>");
	if (!st || strcmp(st, "done") != 0) {
		html_raw(rq, "<p class=\"hint\">The run is not done: its problems come with its clusters.</p></section>");
		return;
	}
	if (model_run_count(run, "problems") < 0) {
		html_raw(rq, "<p class=\"hint\">This run was mined before problems existed: its clusters are listed "
			     "one by one below. Mine it again to group them into problems.</p></section>");
		return;
	}
	p = model_problems(rq->db, id, PROBLEMS_SHOWN, 0, err, sizeof(err));
	cnt = p ? model_problems_count(rq->db, id, err, sizeof(err)) : NULL;
	cl = cnt ? model_problem_clusters(rq->db, req_id_array(rq, p, 0), err, sizeof(err)) : NULL;
	if (!cl) {
		html_raw(rq, "<p class=\"error\">");
		html_text(rq, err);
		html_raw(rq, "</p>");
	} else {
		html_raw(rq, "<ol class=\"problems\">");
		for (int i = 0; i < PQntuples(p); i++) {
			const char *pid = model_col(p, i, "problem_id");

			html_rawf(rq, "<li class=\"problem\" id=\"problem-%s\"><h3><a href=\"/problems/%s\">", pid, pid);
			title_frames(rq, model_col(p, i, "title"));
			html_raw(rq, "</a></h3>");
			machine_note(rq, p, i);
			problem_metrics(rq, p, i);
			problem_members(rq, cl, &k, pid);
			html_raw(rq, "</li>");
		}
		html_raw(rq, "</ol>");
		if (PQntuples(p) == 0)
			html_raw(rq, "<p class=\"empty\">No problems: the run found no clusters.</p>");
		else if (model_coln(cnt, 0, "total") > PQntuples(p))
			html_rawf(rq, "<p>%lld more problems, in the clusters below (and GET /api/v1/runs/%s/problems).</p>",
				  (long long)(model_coln(cnt, 0, "total") - PQntuples(p)), id);
	}
	html_raw(rq, "</section>");
	PQclear(p);
	PQclear(cnt);
	PQclear(cl);
}

/* Where the cluster or problem happens: its most over-represented host, version or label values,
 * the first in words when it stands out (docs/analysis.md, "Attribution"). */
static void attribution_section(struct req *rq, enum attribution_of of, const char *id)
{
	const char *what = of == ATTRIBUTION_PROBLEM ? "problem" : "cluster";
	struct attribution at;
	char err[512];
	struct buf words = BUF_INIT(4096);

	if (attribution_compute(rq->db, of, id, rq->a, &at, err, sizeof(err)) < 0) {
		html_raw(rq, "<p class=\"error\">Attribution: ");
		html_text(rq, err);
		html_raw(rq, "</p>");
		return;
	}
	if (!at.n)
		return;
	html_raw(rq, "<section class=\"attribution\"><h2>Where it happens</h2><p class=\"lead\">");
	attribution_summary(&at, &words);
	html_text(rq, buf_cstr(&words));
	html_raw(rq, ".");
	buf_release(&words);
	html_rawf(rq, "</p><table class=\"attribution\"><thead><tr><th>Key</th><th>Value</th>"
		      "<th class=\"n\">Cost share</th><th class=\"n\">Its streams</th><th class=\"n\">Run's streams</th>"
		      "%s<th class=\"n\" title=\"its share of the %s's streams over its share of the run's\">Lift</th>"
		      "<th class=\"n\" title=\"Fisher's exact test, Benjamini-Hochberg over %zu values\">p (adjusted)</th>"
		      "</tr></thead><tbody>",
		  at.baseline_streams ? "<th class=\"n\">Baseline's streams</th>" : "", what, at.tested);
	for (size_t i = 0; i < at.n && i < 8; i++) {
		const struct attribution_value *x = &at.v[i];

		html_raw(rq, "<tr><td>");
		html_text(rq, x->key);
		html_raw(rq, "</td><td>");
		html_text(rq, x->value);
		html_rawf(rq, "</td><td class=\"n\">%.0f %%</td><td class=\"n\">%.0f %%</td><td class=\"n\">%.0f %%</td>",
			  100 * x->cost_share, 100 * x->cluster_share, 100 * x->run_share);
		if (at.baseline_streams)
			html_rawf(rq, "<td class=\"n\">%.0f %%</td>", 100 * x->baseline_share);
		html_rawf(rq, "<td class=\"n\">%.2f</td><td class=\"n\">%.2g</td></tr>", x->lift, x->q);
	}
	html_raw(rq, "</tbody></table></section>");
}

/* /problems/{id}: a problem, its clusters, hosts and costliest streams */
static void page_problem(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	PGresult *p, *cl = NULL, *h = NULL, *s = NULL;
	int k = 0;

	p = model_problem(rq->db, id, err, sizeof(err));
	if (p && PQntuples(p) == 0) {
		PQclear(p);
		html_error(rq, 404, "No such problem.");
		return;
	}
	cl = p ? model_problem_clusters(rq->db, req_id_array(rq, p, 0), err, sizeof(err)) : NULL;
	h = cl ? model_problem_hosts(rq->db, id, 20, err, sizeof(err)) : NULL;
	s = h ? model_problem_streams(rq->db, id, 20, err, sizeof(err)) : NULL;
	if (!s) {
		PQclear(p);
		PQclear(cl);
		PQclear(h);
		html_error(rq, 500, err);
		return;
	}
	html_begin(rq, req_printf(rq, "Problem %s", id));
	html_rawf(rq, "<h1>Problem #%s, rank %lld of <a href=\"/runs/%lld\">run #%lld</a>: ", id,
		  (long long)model_coln(p, 0, "rank"), (long long)model_coln(p, 0, "run_id"),
		  (long long)model_coln(p, 0, "run_id"));
	title_frames(rq, model_col(p, 0, "title"));
	html_raw(rq, "</h1>");
	machine_note(rq, p, 0);
	problem_metrics(rq, p, 0);
	attribution_section(rq, ATTRIBUTION_PROBLEM, id);
	html_raw(rq, "<h2>Clusters</h2>");
	problem_members(rq, cl, &k, id);
	html_raw(rq, "<h2>Hosts</h2><table class=\"hosts\"><thead><tr><th>Host</th><th class=\"n\">Streams</th>"
		     "<th class=\"n\">Cost</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(h); i++) {
		html_raw(rq, "<tr><td>");
		html_text(rq, model_col(h, i, "host"));
		html_rawf(rq, "</td><td class=\"n\">%lld</td><td class=\"n\">", (long long)model_coln(h, i, "streams"));
		html_cost(rq, model_coln(h, i, "cost_ns"));
		html_raw(rq, "</td></tr>");
	}
	html_raw(rq, "</tbody></table><h2>Costliest streams</h2><table class=\"streams\"><thead><tr><th>Stream</th>"
		     "<th>Host</th><th class=\"n\">Cost</th><th class=\"n\">Events</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(s); i++) {
		html_raw(rq, "<tr><td><a href=\"/streams/");
		html_text(rq, model_col(s, i, "stream_id"));
		html_raw(rq, "\">");
		html_text(rq, model_col(s, i, "stream_id"));
		html_raw(rq, "</a></td><td>");
		html_text(rq, model_col(s, i, "host"));
		html_raw(rq, "</td><td class=\"n\">");
		html_cost(rq, model_coln(s, i, "cost_ns"));
		html_rawf(rq, "</td><td class=\"n\">%lld</td></tr>", (long long)model_coln(s, i, "events"));
	}
	html_raw(rq, "</tbody></table>");
	html_end(rq);
	PQclear(p);
	PQclear(cl);
	PQclear(h);
	PQclear(s);
}

/* ---- a cluster ---- */

/* A member pattern: its id, cost and frame names. */
struct member {
	int64_t id, cost;
	const char **names;
	size_t n;
};

static const struct member *member_by_id(const struct member *m, size_t n, int64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].id == id)
			return &m[i];
	return NULL;
}

static const char *frame_at(const struct member *m, size_t i)
{
	return m && i < m->n ? m->names[i] : "";
}

/* Members aligned with the medoid as in the paper's Figure 3: one block per member, one row per step. */
static void alignment_blocks(struct req *rq, PGresult *c, const struct member *mem, size_t nmem,
			     const char *const *common, size_t nc)
{
	json_object *al = json_tokener_parse(model_col(c, 0, "alignment"));
	int64_t medoid = model_coln(c, 0, "medoid");
	const struct member *mp = member_by_id(mem, nmem, medoid);
	size_t nal = al ? json_object_array_length(al) : 0;

	html_raw(rq, "<section><h2>Members aligned with the medoid</h2><p class=\"legend\"><span class=\"op M\">match"
		     "</span> <span class=\"op S\">substitution</span> <span class=\"op D\">medoid frame only</span> "
		     "<span class=\"op I\">member frame only</span> <span class=\"common\">common part</span></p>");
	for (size_t k = 0; k < nal && k < 200; k++) {
		json_object *a = json_object_array_get_idx(al, k), *v;
		int64_t pid = json_object_object_get_ex(a, "pattern_id", &v) ? json_object_get_int64(v) : 0;
		const char *ops = json_object_object_get_ex(a, "ops", &v) ? json_object_get_string(v) : "";
		const struct member *p = member_by_id(mem, nmem, pid);
		size_t li = 0, ri = 0, ci = 0;

		html_rawf(rq, "<details%s><summary>Pattern %lld%s · Sim %.3f", k < 3 ? " open" : "", (long long)pid,
			  pid == medoid ? " (medoid)" : "",
			  json_object_object_get_ex(a, "sim", &v) ? json_object_get_double(v) : 0);
		if (p) {
			html_raw(rq, " · cost ");
			html_cost(rq, p->cost);
		}
		html_raw(rq, "</summary><table class=\"align\"><thead><tr><th>Medoid</th><th></th><th>This member</th>"
			     "</tr></thead><tbody>");
		for (const char *o = ops; *o; o++) {
			const char *lf = (*o == 'M' || *o == 'S' || *o == 'D') ? frame_at(mp, li++) : NULL;
			const char *rf = (*o == 'M' || *o == 'S' || *o == 'I') ? frame_at(p, ri++) : NULL;
			/* the common part is the medoid's matched frames, in order */
			bool in_common = lf && *o == 'M' && ci < nc && strcmp(lf, common[ci]) == 0;
			if (in_common)
				ci++;
			html_rawf(rq, "<tr class=\"op %c%s\"><td>", *o, in_common ? " common" : "");
			html_text(rq, lf);
			html_rawf(rq, "</td><td class=\"opname\">%s</td><td>",
				  *o == 'M' ? "=" : *o == 'S' ? "≈" : *o == 'D' ? "−" : "+");
			html_text(rq, rf);
			html_raw(rq, "</td></tr>");
		}
		html_raw(rq, "</tbody></table></details>");
	}
	if (nal > 200)
		html_rawf(rq, "<p>… and %zu more members (the API has them all).</p>", nal - 200);
	html_raw(rq, "</section>");
	json_object_put(al);
}

/* One dimension's rows of model_cluster_by() as a table with bars. */
static void breakdown(struct req *rq, PGresult *r, const char *dim, const char *title)
{
	double max = 0;
	bool label = strcmp(dim, "label") == 0;
	bool *done = arena_calloc(rq->a, (size_t)PQntuples(r) + 1, sizeof(bool));

	html_rawf(rq, "<section class=\"by\"><h3>%s</h3><table><thead><tr>%s<th>Value</th><th class=\"n\">Cost</th>"
		      "<th class=\"n\">Streams</th></tr></thead><tbody>", title, label ? "<th>Label</th>" : "");
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(model_col(r, i, "dim"), dim) == 0 && (double)model_coln(r, i, "cost_ns") > max)
			max = (double)model_coln(r, i, "cost_ns");
	/* rows come costliest first; labels are grouped by key (a key's costliest value first),
	 * the key written once per group */
	for (int g = 0; done && g < PQntuples(r); g++) {
		if (done[g] || strcmp(model_col(r, g, "dim"), dim) != 0)
			continue;
		for (int i = g; i < PQntuples(r); i++) {
			if (done[i] || strcmp(model_col(r, i, "dim"), dim) != 0 ||
			    (label && strcmp(model_col(r, i, "key"), model_col(r, g, "key")) != 0) || (!label && i != g))
				continue;
			done[i] = true;
			html_raw(rq, "<tr>");
			if (label) {
				html_raw(rq, i == g ? "<td class=\"key\">" : "<td class=\"key more\">");
				if (i == g)
					html_text(rq, model_col(r, i, "key"));
				html_raw(rq, "</td>");
			}
			html_raw(rq, "<td>");
			html_text(rq, model_col(r, i, "value"));
			html_raw(rq, "</td><td class=\"n metric\">");
			html_cost(rq, model_coln(r, i, "cost_ns"));
			html_bar(rq, (double)model_coln(r, i, "cost_ns"), max, 60);
			html_rawf(rq, "</td><td class=\"n\">%lld</td></tr>", (long long)model_coln(r, i, "streams"));
		}
	}
	html_raw(rq, "</tbody></table></section>");
}

static void flame_section(struct req *rq, const char *id)
{
	char err[256];
	PGresult *st = model_cluster_stacks(rq->db, id, err, sizeof(err)), *fr = NULL;
	struct flame *f = flame_open();
	int64_t focus = 0;
	const char *fv = req_query(rq, "focus");

	if (fv && util_parse_i64(fv, 0, UINT32_MAX, &focus) < 0)
		focus = 0;
	if (!st || !f)
		goto out;
	fr = model_stacks(rq->db, req_id_array(rq, st, 0), err, sizeof(err));
	if (!fr)
		goto out;
	{
		/* both come by stack id */
		int j = 0, nf = PQntuples(fr);
		for (int i = 0; i < PQntuples(st) && !req_should_stop(rq); i++) {
			int64_t sid = model_coln(st, i, "stack_id");
			const char **names;
			size_t n;
			while (j < nf && model_coln(fr, j, "stack_id") < sid)
				j++;
			if (j < nf && model_coln(fr, j, "stack_id") == sid &&
			    req_frame_names(rq, model_col(fr, j, "frame_ids"), &names, &n) == 0)
				flame_add(f, names, n, (uint64_t)model_coln(st, i, "cost_ns"), (uint64_t)model_coln(st, i, "events"));
		}
	}
	html_raw(rq, "<section id=\"flame\"><h2>Flame graph of the matched events</h2><p class=\"hint\">Width is cost; "
		     "hover for details, click a frame to zoom in, click a bar above it to zoom out.");
	if (focus)
		html_raw(rq, " <a href=\"?#flame\">Reset zoom</a>");
	html_raw(rq, "</p><div class=\"flame\">");
	flame_render_svg(f, (uint32_t)focus, "?focus=", 1200, &rq->out);
	html_raw(rq, "</div>");
	download_links(rq, req_printf(rq, "/api/v1/clusters/%s/profile", id));
	html_raw(rq, "</section>");
out:
	flame_free(f);
	PQclear(st);
	PQclear(fr);
}

static void page_cluster(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	PGresult *c = model_cluster(rq->db, id, err, sizeof(err)), *ts;

	if (!c) {
		html_error(rq, 500, err);
		return;
	}
	if (PQntuples(c) == 0) {
		PQclear(c);
		html_error(rq, 404, "No such cluster.");
		return;
	}
	html_begin(rq, req_printf(rq, "Cluster %s", id));
	html_rawf(rq, "<p class=\"crumbs\"><a href=\"/runs/%lld\">Run #%lld</a> › cluster %s</p>",
		  (long long)model_coln(c, 0, "run_id"), (long long)model_coln(c, 0, "run_id"), id);
	html_rawf(rq, "<h1>Cluster %s: %s, rank %lld by total cost</h1><dl class=\"counts\"><dt>Total cost</dt><dd>",
		  id, model_col(c, 0, "kind")[0] == 'w' ? "wait" : "run (CPU)", (long long)model_coln(c, 0, "rank_total_cost"));
	html_cost(rq, model_coln(c, 0, "total_cost_ns"));
	html_rawf(rq, " (#%lld)</dd><dt>Streams</dt><dd>%lld (#%lld)</dd><dt>Events</dt><dd>%lld (#%lld)</dd>"
		      "<dt>Average cost</dt><dd>", (long long)model_coln(c, 0, "rank_total_cost"),
		  (long long)model_coln(c, 0, "streams"), (long long)model_coln(c, 0, "rank_streams"),
		  (long long)model_coln(c, 0, "events"), (long long)model_coln(c, 0, "rank_events"));
	html_cost(rq, model_coln(c, 0, "avg_cost_ns"));
	html_rawf(rq, " (#%lld)</dd>", (long long)model_coln(c, 0, "rank_avg_cost"));
	if (model_col(c, 0, "excess_cost_ns")) {
		html_raw(rq, "<dt>Excess cost</dt><dd>");
		html_cost(rq, model_coln(c, 0, "excess_cost_ns"));
		html_rawf(rq, " (#%lld)</dd>", (long long)model_coln(c, 0, "rank_excess_cost"));
	}
	/* always here, with what it means: equal to the total cost when nothing was sampled away */
	html_raw(rq, "<dt title=\"each stream's cost times its sampling weight: what the whole fleet spent, "
		     "the violations the agents did not ship included\">Estimated fleet cost</dt><dd>");
	html_cost(rq, model_coln(c, 0, "est_cost_ns"));
	html_rawf(rq, " (%.1f streams estimated)</dd>", model_cold(c, 0, "est_streams"));
	html_rawf(rq, "<dt>Patterns</dt><dd>%lld</dd></dl>",
		  (long long)model_coln(c, 0, "patterns_total"));
	if (model_col(c, 0, "excess_cost_ns")) {
		/* the excess in words (docs/analysis.md) */
		html_raw(rq, "<p class=\"excess\">In the events this cluster owns, the slow units spent ");
		html_cost(rq, model_coln(c, 0, "own_cost_ns"));
		html_raw(rq, "; at the rate of the normal units (");
		html_cost(rq, model_coln(c, 0, "baseline_cost_ns"));
		html_rawf(rq, " per baseline stream, %lld of them with a cost here) they would have spent ",
			  (long long)model_coln(c, 0, "baseline_streams"));
		html_cost(rq, model_coln(c, 0, "expected_cost_ns"));
		html_raw(rq, ": an excess of <strong>");
		html_cost(rq, model_coln(c, 0, "excess_cost_ns"));
		html_raw(rq, "</strong>");
		if (model_col(c, 0, "excess_lo_ns")) {
			html_raw(rq, " (95 % interval ");
			html_cost(rq, model_coln(c, 0, "excess_lo_ns"));
			html_raw(rq, " to ");
			html_cost(rq, model_coln(c, 0, "excess_hi_ns"));
			html_raw(rq, ")");
		}
		html_raw(rq, ".</p>");
	}
	attribution_section(rq, ATTRIBUTION_CLUSTER, id);

	{
		const char **common;
		size_t nc = 0, nmem = 0;
		struct member *mem = NULL;
		PGresult *pats = model_cluster_patterns(rq->db, req_printf(rq, "{%s}", id), 100000, err, sizeof(err));

		if (req_frame_names(rq, model_col(c, 0, "common"), &common, &nc) < 0)
			nc = 0;
		if (pats) {
			mem = arena_calloc(rq->a, (size_t)PQntuples(pats) + 1, sizeof(*mem));
			for (int i = 0; mem && i < PQntuples(pats); i++) {
				mem[nmem].id = model_coln(pats, i, "pattern_id");
				mem[nmem].cost = model_coln(pats, i, "cost_ns");
				if (req_frame_names(rq, model_col(pats, i, "frame_ids"), &mem[nmem].names, &mem[nmem].n) == 0)
					nmem++;
			}
		}
		html_raw(rq, "<section class=\"card\"><h2>Common part</h2>");
		frame_list(rq, common, nc, "common-part");
		if (rq->role >= AUTH_ANALYST) {
			html_rawf(rq, "<details class=\"sigform\"><summary><span class=\"button\">Create a signature from the "
				      "common part</span></summary><form method=\"post\" action=\"/signatures/new\" "
				      "id=\"sig-form\"><input type=\"hidden\" name=\"from_cluster\" value=\"%s\">", id);
			html_csrf_field(rq);
			html_raw(rq, "<label>Name <input name=\"name\" required maxlength=\"255\"></label>"
				     "<label>Frames (one per line, outermost first; edit to keep the distinctive ones)"
				     "<textarea name=\"frames\" rows=\"8\">");
			for (size_t i = 0; i < nc; i++) {
				html_text(rq, common[i]);
				html_raw(rq, "\n");
			}
			html_raw(rq, "</textarea></label><label>Status <select name=\"status\"><option>open</option>"
				     "<option>known</option><option>fixed</option></select></label>"
				     "<label>Note or link <input name=\"note\" maxlength=\"2000\"></label>"
				     "<button type=\"submit\">Create signature</button></form></details>");
		}
		html_raw(rq, "</section>");
		alignment_blocks(rq, c, mem, nmem, common, nc);
		PQclear(pats);
	}
	html_raw(rq, "<section><h2>Where it costs</h2>");
	if (strcmp(model_col(c, 0, "has_stacks"), "t") != 0)
		html_raw(rq, "<p class=\"hint\">This run was clustered before matched stacks were recorded; mine it again "
			     "for breakdowns and a flame graph.</p>");
	html_raw(rq, "<div class=\"bys\">");
	{
		PGresult *by = model_cluster_by(rq->db, id, 15, err, sizeof(err));
		if (by) {
			breakdown(rq, by, "host", "By host");
			breakdown(rq, by, "version", "By version");
			breakdown(rq, by, "label", "By label");
			PQclear(by);
		}
	}
	html_raw(rq, "</div>");
	ts = model_cluster_streams(rq->db, id, 15, err, sizeof(err));
	if (ts) {
		html_raw(rq, "<h3>Top streams</h3><table class=\"streams\"><thead><tr><th>Stream</th><th>Host</th>"
			     "<th>Version</th><th class=\"n\">Matched cost</th><th class=\"n\">Events</th></tr></thead><tbody>");
		for (int i = 0; i < PQntuples(ts); i++) {
			if (!model_col(ts, i, "stream_id")) {
				/* retention removed it after the run: no link to a page that is gone */
				html_raw(rq, "<tr><td class=\"expired\" title=\"older than the stream retention "
					     "(sm-admin retention)\">stream expired</td><td>");
			} else {
				html_raw(rq, "<tr><td><a href=\"/streams/");
				html_text(rq, model_col(ts, i, "stream_id"));
				html_raw(rq, "\">");
				html_text(rq, model_col(ts, i, "stream_id"));
				html_raw(rq, "</a></td><td>");
			}
			html_text(rq, model_col(ts, i, "host"));
			html_raw(rq, "</td><td>");
			html_text(rq, model_col(ts, i, "version"));
			html_raw(rq, "</td><td class=\"n\">");
			html_cost(rq, model_coln(ts, i, "cost_ns"));
			html_rawf(rq, "</td><td class=\"n\">%lld</td></tr>", (long long)model_coln(ts, i, "events"));
		}
		html_raw(rq, "</tbody></table>");
		PQclear(ts);
	}
	html_raw(rq, "</section>");
	flame_section(rq, id);
	html_end(rq);
	PQclear(c);
}

/* ---- streams ---- */

/* A stream's role, and the violations it stands for when the agent sampled it (guard.md "Shipping budget"). */
static void stream_role(struct req *rq, PGresult *r, int i)
{
	const char *w = model_col(r, i, "weight");

	html_text(rq, model_col(r, i, "role"));
	if (w && strtod(w, NULL) > 1)
		html_rawf(rq, " <span class=\"est\" title=\"sampled: this stream stands for %.2f violations of its "
			  "minute\">×%.2f</span>", strtod(w, NULL), strtod(w, NULL));
}

static void page_streams(struct req *rq)
{
	char err[512];
	long offset = page_offset(rq);
	struct stream_filter f = { req_query(rq, "app"), req_query(rq, "host"), req_query(rq, "version"), NULL,
				   INT64_MIN, INT64_MIN };
	PGresult *r, *cnt;
	const char *keep;

	if (f.app && !*f.app)
		f.app = NULL;
	if (f.host && !*f.host)
		f.host = NULL;
	if (f.version && !*f.version)
		f.version = NULL;
	r = model_streams(rq->db, &f, PAGE, offset, err, sizeof(err));
	cnt = r ? model_streams_count(rq->db, &f, err, sizeof(err)) : NULL;
	if (!r || !cnt) {
		PQclear(r);
		html_error(rq, 500, err);
		return;
	}
	keep = keep_param(rq, keep_param(rq, keep_param(rq, NULL, "app", f.app), "host", f.host), "version", f.version);
	html_begin(rq, "Streams");
	html_raw(rq, "<h1>Trace streams</h1><form class=\"filter\" method=\"get\"><label>App <input name=\"app\" value=\"");
	html_text(rq, f.app);
	html_raw(rq, "\"></label><label>Host <input name=\"host\" value=\"");
	html_text(rq, f.host);
	html_raw(rq, "\"></label><label>Version <input name=\"version\" value=\"");
	html_text(rq, f.version);
	html_raw(rq, "\"></label><button type=\"submit\">Filter</button></form><table class=\"streams\"><thead><tr>"
		     "<th>Stream</th><th>Role</th><th>App</th><th>Version</th><th>Host</th><th>Unit</th><th class=\"n\">Delay</th>"
		     "<th class=\"n\">Events</th><th>Received (UTC)</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(r); i++) {
		json_object *sy = json_tokener_parse(model_col(r, i, "symptom")), *a, *b, *u;
		html_raw(rq, "<tr><td><a href=\"/streams/");
		html_text(rq, model_col(r, i, "stream_id"));
		html_raw(rq, "\">");
		html_text(rq, model_col(r, i, "stream_id"));
		html_raw(rq, "</a></td><td>");
		stream_role(rq, r, i);
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "app"));
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "version"));
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "host"));
		html_raw(rq, "</td><td>");
		if (sy && json_object_object_get_ex(sy, "unit_type", &u))
			html_text(rq, json_object_get_string(u));
		html_raw(rq, "</td><td class=\"n\">");
		if (sy && json_object_object_get_ex(sy, "start_ns", &a) && json_object_object_get_ex(sy, "end_ns", &b))
			html_cost(rq, json_object_get_int64(b) - json_object_get_int64(a));
		html_rawf(rq, "</td><td class=\"n\">%lld</td><td class=\"time\">", (long long)model_coln(r, i, "events"));
		html_time(rq, model_col(r, i, "received_at"));
		html_raw(rq, "</td></tr>");
		json_object_put(sy);
	}
	html_raw(rq, "</tbody></table>");
	pager(rq, "/streams", keep, offset, PQntuples(r), (long)model_coln(cnt, 0, "total"));
	html_end(rq);
	PQclear(r);
	PQclear(cnt);
}

static void page_stream(struct req *rq)
{
	const char *uuid = rq->arg;
	char canon[37], err[512];
	PGresult *st = NULL, *ev = NULL, *fr = NULL;
	const char *aoi = req_query(rq, "aoi"), *t = req_query(rq, "t");
	enum aoi_mode mode = AOI_WAITGRAPH;
	struct tl_event *te;
	bool *in;
	int n, naoi = 0;
	int64_t s0, s1, from, to;

	if (aoi && aoi_mode_parse(aoi, &mode) < 0)
		mode = AOI_WAITGRAPH;
	if (!util_uuid_canon(uuid, strlen(uuid), canon)) {
		html_error(rq, 404, "No such stream (not a UUID).");
		return;
	}
	st = model_stream(rq->db, canon, err, sizeof(err));
	if (!st || PQntuples(st) == 0) {
		html_error(rq, st ? 404 : 500, st ? "No such stream." : err);
		goto out;
	}
	ev = model_stream_events(rq->db, model_col(st, 0, "ref"), TIMELINE_EVENTS, err, sizeof(err));
	if (!ev) {
		html_error(rq, 500, err);
		goto out;
	}
	n = PQntuples(ev);
	in = arena_calloc(rq->a, (size_t)n + 1, sizeof(bool));
	te = arena_calloc(rq->a, (size_t)n + 1, sizeof(*te));
	if (!in || !te || model_stream_aoi(st, ev, mode, in) < 0) {
		html_error(rq, 500, "out of memory");
		goto out;
	}
	/* the innermost frame of each stack, for the hover text */
	fr = model_stacks(rq->db, req_id_array(rq, ev, 4), err, sizeof(err));
	s0 = model_coln(st, 0, "symptom_start_ns");
	s1 = model_coln(st, 0, "symptom_end_ns");
	from = n ? model_coln(ev, 0, "ts_ns") : s0;
	to = s1;
	for (int i = 0; i < n; i++) {
		int64_t e = model_coln(ev, i, "ts_ns") + model_coln(ev, i, "dur_ns");
		if (e > to)
			to = e;
		if (model_coln(ev, i, "ts_ns") < from)
			from = model_coln(ev, i, "ts_ns");
		te[i].tid = model_coln(ev, i, "tid");
		te[i].ts_ns = model_coln(ev, i, "ts_ns");
		te[i].dur_ns = model_coln(ev, i, "dur_ns");
		te[i].kind = PQgetvalue(ev, i, 0)[0] == 'w' ? 'w' : 'r';
		te[i].readier_tid = model_coln(ev, i, "readier_tid");
		te[i].aoi = in[i];
		naoi += in[i];
	}
	if (fr) {
		/* one row per stack, by id: the innermost frame of each, then each event's by binary search */
		int nf = PQntuples(fr);
		const char **leaf = arena_calloc(rq->a, (size_t)nf + 1, sizeof(char *));
		for (int j = 0; leaf && j < nf; j++) {
			const char **names;
			size_t k;
			if (req_frame_names(rq, model_col(fr, j, "frame_ids"), &names, &k) == 0 && k)
				leaf[j] = names[k - 1];
		}
		for (int i = 0; leaf && i < n; i++) {
			int row = model_find_stack(fr, model_coln(ev, i, "stack_id"));

			if (row >= 0)
				te[i].leaf = leaf[row];
		}
	}
	if (t) {
		/* ?t=FROM-TO (ns, absolute) zooms into part of the stream */
		char a[24], b[24];
		const char *dash = strchr(t, '-');
		int64_t x, y;
		if (dash && (size_t)(dash - t) < sizeof(a) && strlen(dash + 1) < sizeof(b)) {
			memcpy(a, t, (size_t)(dash - t));
			a[dash - t] = '\0';
			memcpy(b, dash + 1, strlen(dash + 1) + 1);
			if (util_parse_i64(a, 0, INT64_MAX, &x) == 0 && util_parse_i64(b, 0, INT64_MAX, &y) == 0 && x < y) {
				from = x;
				to = y;
			}
		}
	}
	html_begin(rq, req_printf(rq, "Stream %s", canon));
	html_raw(rq, "<p class=\"crumbs\"><a href=\"/streams\">Streams</a> › ");
	html_value(rq, canon);
	html_raw(rq, "</p><h1>");
	html_value(rq, model_col(st, 0, "app"));
	html_raw(rq, " ");
	html_value(rq, model_col(st, 0, "version"));
	html_raw(rq, " on ");
	html_value(rq, model_col(st, 0, "host"));
	html_raw(rq, "</h1><dl class=\"counts\"><dt>Role</dt><dd>");
	stream_role(rq, st, 0);
	html_raw(rq, "</dd><dt>Symptom</dt><dd>");
	{
		json_object *sy = json_tokener_parse(model_col(st, 0, "symptom")), *v;
		if (sy && json_object_object_get_ex(sy, "kind", &v))
			html_value(rq, json_object_get_string(v));
		if (sy && json_object_object_get_ex(sy, "unit_type", &v) && !json_object_is_type(v, json_type_null)) {
			html_raw(rq, " · ");
			html_value(rq, json_object_get_string(v));
		}
		html_raw(rq, " · thread ");
		html_text(rq, model_col(st, 0, "symptom_tid"));
		html_raw(rq, " · ");
		html_cost(rq, s1 - s0);
		if (sy && json_object_object_get_ex(sy, "threshold_ns", &v) && !json_object_is_type(v, json_type_null)) {
			html_raw(rq, " (threshold ");
			html_cost(rq, json_object_get_int64(v));
			html_raw(rq, ")");
		}
		json_object_put(sy);
	}
	html_rawf(rq, "</dd><dt>Events</dt><dd>%lld%s</dd><dt>In the AOI (%s)</dt><dd>%d</dd><dt>Build</dt><dd>",
		  (long long)model_coln(st, 0, "events"), n == TIMELINE_EVENTS ? " (first 200,000 shown)" : "",
		  aoi_mode_name(mode), naoi);
	html_text(rq, model_col(st, 0, "build_id") ? model_col(st, 0, "build_id") : "–");
	html_raw(rq, "</dd><dt>Received</dt><dd>");
	html_time(rq, model_col(st, 0, "received_at"));
	html_raw(rq, "</dd></dl>");
	download_links(rq, req_printf(rq, "/api/v1/streams/%s/profile", canon));
	html_raw(rq, "<section><h2>Labels</h2><dl class=\"labels\">");
	{
		json_object *l = json_tokener_parse(model_col(st, 0, "labels") ? model_col(st, 0, "labels") : "{}");
		if (l && json_object_is_type(l, json_type_object)) {
			json_object_object_foreach(l, key, val) {
				html_raw(rq, "<dt>");
				html_text(rq, key);
				html_raw(rq, "</dt><dd>");
				html_text(rq, json_object_get_string(val));
				html_raw(rq, "</dd>");
			}
		}
		json_object_put(l);
	}
	html_raw(rq, "</dl></section><section id=\"timeline\"><h2>Timeline</h2><form class=\"filter\" method=\"get\">"
		     "<label>AOI <select name=\"aoi\">");
	for (int m = 0; m < 4; m++) {
		static const enum aoi_mode modes[] = { AOI_WAITGRAPH, AOI_CRITICAL, AOI_THREAD, AOI_STREAM };
		html_rawf(rq, "<option%s>%s</option>", modes[m] == mode ? " selected" : "", aoi_mode_name(modes[m]));
	}
	html_raw(rq, "</select></label><button type=\"submit\">Mark</button>");
	if (t)
		html_raw(rq, " <a href=\"?#timeline\">Whole stream</a>");
	html_raw(rq, "</form><p class=\"hint\">One row per thread, the symptom thread first; the shaded band is the "
		     "symptom window; highlighted events are in the AOI; arrows go from a wait to the thread that readied "
		     "it. Click a time on the axis to zoom in.</p><div class=\"timeline\">");
	{
		/* room for "tid 4194304 (symptom)" in bold */
		struct tl_view v = { 1300, from, to, model_coln(st, 0, "symptom_tid"), s0, s1,
				     aoi ? req_printf(rq, "?aoi=%s&t=", aoi_mode_name(mode)) : "?t=", 190 };
		char terr[256];
		if (timeline_render_svg(te, (size_t)n, &v, &rq->out, terr, sizeof(terr)) < 0) {
			html_raw(rq, "<p class=\"error\">");
			html_text(rq, terr);
			html_raw(rq, "</p>");
		}
	}
	html_raw(rq, "</div></section>");
	html_end(rq);
out:
	PQclear(st);
	PQclear(ev);
	PQclear(fr);
}

/* ---- signatures ---- */

struct sel {
	int64_t *ids;
	size_t n;
	bool any;     /* some sig= parameter was given */
};

static bool collect_sig(void *cls, const char *key, const char *value)
{
	struct sel *s = cls;
	int64_t v;

	if (strcmp(key, "sig") == 0 && s->ids) {
		s->any = true;
		if (s->n < 1000 && util_parse_i64(value, 1, INT64_MAX, &v) == 0)
			s->ids[s->n++] = v;
	}
	return true;
}

/* ---- comparing two runs ---- */

/* The differential flame graph of two runs' stacks of one kind: B's widths, coloured by the change
 * of the cost per stream from A. */
static void compare_flame(struct req *rq, const char *a, const char *b, uint64_t na, uint64_t nb)
{
	const char *kind = req_query(rq, "kind");
	const char *k = kind && strcmp(kind, "wait") == 0 ? "w" : "r";
	struct flame *f = flame_open();
	char err[512];

	if (!f)
		return;
	for (int side = 0; side < 2; side++) {
		PGresult *r = model_run_kind_stacks(rq->db, side ? b : a, k, err, sizeof(err));

		for (int i = 0; r && i < PQntuples(r) && !req_should_stop(rq); i++) {
			const char **names;
			size_t n;

			if (req_frame_names(rq, model_col(r, i, "frame_ids"), &names, &n) < 0)
				continue;
			if (side)
				flame_add(f, names, n, (uint64_t)model_coln(r, i, "cost_ns"), 0);
			else
				flame_add_base(f, names, n, (uint64_t)model_coln(r, i, "cost_ns"));
		}
		PQclear(r);
	}
	flame_set_diff(f, nb ? 1.0 / (double)nb : 0, na ? 1.0 / (double)na : 0);
	html_rawf(rq, "<section id=\"flame\"><h2>What changed, frame by frame (%s)</h2><p class=\"hint\">Run B's %s "
		      "stacks; width is B's cost, colour the change of the cost per stream from run A: red grew, blue "
		      "shrank, white stayed (hover for both). <a href=\"?a=", k[0] == 'w' ? "wait" : "run (CPU)",
		  k[0] == 'w' ? "wait" : "run");
	html_text(rq, a);
	html_raw(rq, "&amp;b=");
	html_text(rq, b);
	html_rawf(rq, "&amp;kind=%s#flame\">The %s stacks</a>.</p><div class=\"flame\">", k[0] == 'w' ? "run" : "wait",
		  k[0] == 'w' ? "run" : "wait");
	flame_render_svg(f, 0, NULL, 1200, &rq->out);
	html_raw(rq, "</div></section>");
	flame_free(f);
}

static void page_compare(struct req *rq)
{
	const char *sa = req_query(rq, "a"), *sb = req_query(rq, "b");
	struct compare_opts o;
	struct compare *cmp = NULL;
	char err[512];
	int64_t a = 0, b = 0;
	int rc;

	html_begin(rq, "Compare runs");
	html_raw(rq, "<h1>Compare two runs</h1><p>Run B against run A (before): clusters matched by signature and "
		     "similarity, each measured in both runs by its cost per stream (docs/analysis.md).</p>"
		     "<form class=\"filter\" method=\"get\"><label>Run A <input name=\"a\" inputmode=\"numeric\" value=\"");
	html_text(rq, sa);
	html_raw(rq, "\"></label> <label>Run B <input name=\"b\" inputmode=\"numeric\" value=\"");
	html_text(rq, sb);
	html_raw(rq, "\"></label> <button type=\"submit\">Compare</button></form>");
	if (!sa || !sb) {
		html_end(rq);
		return;
	}
	if (util_parse_i64(sa, 1, INT64_MAX, &a) < 0 || util_parse_i64(sb, 1, INT64_MAX, &b) < 0) {
		html_raw(rq, "<p class=\"error\">Give two run ids.</p>");
		html_end(rq);
		return;
	}
	compare_opts_init(&o);
	o.threads = 1;
	rc = compare_runs(rq->db, a, b, &o, &cmp, err, sizeof(err));
	if (rc != 0) {
		html_raw(rq, "<p class=\"error\">");
		html_text(rq, err);
		html_raw(rq, "</p>");
		html_end(rq);
		return;
	}
	html_rawf(rq, "<p><a href=\"/runs/%lld\">Run #%lld</a> (%llu streams) against <a href=\"/runs/%lld\">run #%lld</a>"
		      " (%llu streams): %zu clusters.</p><table class=\"compare\" id=\"compare\"><thead><tr><th>Status</th>"
		      "<th>Kind</th><th class=\"n\">A</th><th class=\"n\">B</th><th class=\"n\">A per stream</th>"
		      "<th class=\"n\">B per stream</th><th class=\"n\">Change [95 %%]</th><th class=\"n\">Match</th>"
		      "<th>Common part (innermost frames)</th></tr></thead><tbody>",
		  (long long)b, (long long)b, (unsigned long long)cmp->b_streams, (long long)a, (long long)a,
		  (unsigned long long)cmp->a_streams, cmp->n);
	for (size_t i = 0; i < cmp->n && i < 500; i++) {
		const struct compare_row *r = &cmp->rows[i];

		html_rawf(rq, "<tr class=\"%s\"><td>%s</td><td>%s</td><td class=\"n\">", compare_status_name(r->status),
			  compare_status_name(r->status), r->kind == 'w' ? "wait" : "run");
		if (r->a)
			html_rawf(rq, "<a href=\"/clusters/%lld\">%lld</a>", (long long)r->a, (long long)r->a);
		html_raw(rq, "</td><td class=\"n\">");
		if (r->b)
			html_rawf(rq, "<a href=\"/clusters/%lld\">%lld</a>", (long long)r->b, (long long)r->b);
		html_raw(rq, "</td><td class=\"n\">");
		html_cost(rq, llround(r->a_cps));
		html_raw(rq, "</td><td class=\"n\">");
		html_cost(rq, llround(r->b_cps));
		html_raw(rq, "</td><td class=\"n\">");
		html_raw(rq, r->diff >= 0 ? "+" : "");
		html_cost(rq, llround(r->diff));
		if (!isnan(r->lo)) {
			html_raw(rq, " <span class=\"ci\">[");
			html_cost(rq, llround(r->lo));
			html_raw(rq, ", ");
			html_cost(rq, llround(r->hi));
			html_raw(rq, "]</span>");
		}
		html_raw(rq, "</td><td class=\"n\">");
		if (r->signature)
			html_rawf(rq, "<a href=\"/signatures\">signature #%lld</a>", (long long)r->signature);
		else if (!isnan(r->sim))
			html_rawf(rq, "%.2f", r->sim);
		html_raw(rq, "</td><td>");
		frame_ids_compact(rq, req_ids_text(rq, r->common, r->ncommon), 3);
		html_raw(rq, "</td></tr>");
	}
	html_raw(rq, "</tbody></table>");
	download_links(rq, req_printf(rq, "/api/v1/runs/%lld/compare/%lld/profile", (long long)a, (long long)b));
	compare_flame(rq, sa, sb, cmp->a_streams, cmp->b_streams);
	compare_free(cmp);
	html_end(rq);
}

/* ---- watching: schedules, alert rules, alerts ---- */

/* A table of rows: the columns cols (NULL-terminated) under the headers heads. */
static void rows_table(struct req *rq, const char *id, PGresult *r, const char *const *cols, const char *const *heads,
		       const char *empty)
{
	int nc = 0;

	html_rawf(rq, "<table id=\"%s\"><thead><tr>", id);
	for (; cols[nc]; nc++)
		html_rawf(rq, "<th>%s</th>", heads[nc]);
	html_raw(rq, "</tr></thead><tbody>");
	for (int i = 0; r && i < PQntuples(r); i++) {
		html_raw(rq, "<tr>");
		for (int c = 0; c < nc; c++) {
			html_raw(rq, "<td>");
			html_text(rq, model_col(r, i, cols[c]));
			html_raw(rq, "</td>");
		}
		html_raw(rq, "</tr>");
	}
	if (!r || PQntuples(r) == 0)
		html_rawf(rq, "<tr><td colspan=\"%d\" class=\"empty\">%s</td></tr>", nc, empty);
	html_raw(rq, "</tbody></table>");
}

static void page_alerts(struct req *rq)
{
	static const char *const scols[] = { "schedule_id", "app", "kind", "every_s", "window_s", "params", "next_at",
					     "last_run", NULL };
	static const char *const sheads[] = { "#", "App", "Kind", "Every (s)", "Window (s)", "Parameters", "Next",
					      "Last run" };
	static const char *const rcols[] = { "rule_id", "name", "app", "type", "signature", "limit_ns_per_hour",
					     "min_share", "webhook", NULL };
	static const char *const rheads[] = { "#", "Name", "App", "Type", "Signature", "Limit (ns/h)", "Min share",
					      "Webhook" };
	static const char *const acols[] = { "alert_id", "created_at", "rule", "run_id", "cluster_id", "message",
					     "delivery", "attempts", "last_error", NULL };
	static const char *const aheads[] = { "#", "When", "Rule", "Run", "Cluster", "Message", "Delivery", "Attempts",
					      "Last error" };
	char err[512];
	PGresult *sch = model_schedules(rq->db, err, sizeof(err));
	PGresult *rules = sch ? model_alert_rules(rq->db, rq->role < AUTH_ADMIN, err, sizeof(err)) : NULL;
	PGresult *alerts = rules ? model_alerts(rq->db, 200, err, sizeof(err)) : NULL;

	if (!alerts) {
		PQclear(sch);
		PQclear(rules);
		html_error(rq, 500, err);
		return;
	}
	html_begin(rq, "Alerts");
	html_raw(rq, "<h1>Alerts</h1><p>Scheduled runs, the rules the workers apply to every run they finish, and the "
		     "alerts sent to the rules' webhooks (docs/analysis.md, \"Watching\"). Admins manage schedules and "
		     "rules through <code>/api/v1/schedules</code> and <code>/api/v1/alert-rules</code>.</p><h2>Alerts</h2>");
	rows_table(rq, "alerts", alerts, acols, aheads, "No alerts.");
	html_raw(rq, "<h2>Rules</h2>");
	rows_table(rq, "rules", rules, rcols, rheads, "No rules.");
	html_raw(rq, "<h2>Schedules</h2>");
	rows_table(rq, "schedules", sch, scols, sheads, "No scheduled runs.");
	html_end(rq);
	PQclear(sch);
	PQclear(rules);
	PQclear(alerts);
}

/* Most covered first; equal ones by id. */
static int by_cost_desc(const void *a, const void *b)
{
	const struct sig_cover *x = a, *y = b;

	if (x->cost_ns != y->cost_ns)
		return x->cost_ns > y->cost_ns ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

static void page_signatures(struct req *rq)
{
	char err[512];
	long offset = page_offset(rq);
	PGresult *r = model_signatures(rq->db, PAGE, offset, err, sizeof(err)), *runs, *cnt;
	const char *run = req_query(rq, "run"), *kq = req_query(rq, "kind");
	int64_t run_id = 0;
	char kind;
	bool writer = rq->role >= AUTH_ANALYST;

	if (!r) {
		html_error(rq, 500, err);
		return;
	}
	cnt = model_signatures_count(rq->db, err, sizeof(err));
	if (run && util_parse_i64(run, 1, INT64_MAX, &run_id) < 0)
		run_id = 0;
	html_begin(rq, "Signatures");
	html_raw(rq, "<h1>Performance signatures</h1><p><a class=\"button\" href=\"/api/v1/signatures/export\" "
		     "download=\"signatures.json\">Export all (JSON)</a></p>");
	html_raw(rq, "<form id=\"coverage-form\" method=\"get\" action=\"/signatures\"></form>");
	html_raw(rq, writer ? "<table class=\"signatures\"><thead><tr><th>Use</th><th>Name</th><th>Frames</th>"
			      "<th colspan=\"2\">Status and note</th><th>From</th><th>Updated (UTC)</th></tr></thead><tbody>"
			    : "<table class=\"signatures\"><thead><tr><th>Use</th><th>Name</th><th>Frames</th><th>Status</th>"
			      "<th>Note</th><th>From</th><th>Updated (UTC)</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(r); i++) {
		long long sid = (long long)model_coln(r, i, "signature_id");
		const char *st = model_col(r, i, "status");
		html_rawf(rq, "<tr id=\"sig-%lld\"><td><input type=\"checkbox\" form=\"coverage-form\" name=\"sig\" "
			      "value=\"%lld\" checked aria-label=\"use in coverage\"></td><td>", sid, sid);
		html_text(rq, model_col(r, i, "name"));
		html_raw(rq, "</td><td>");
		frames_json_compact(rq, model_col(r, i, "frames"), 3);
		html_raw(rq, "</td>");
		if (writer) {
			html_rawf(rq, "<td colspan=\"2\"><form class=\"inline\" method=\"post\" action=\"/signatures/%lld\">",
				  sid);
			html_csrf_field(rq);
			html_raw(rq, "<select name=\"status\" aria-label=\"status\">");
			for (int k = 0; k < 3; k++) {
				static const char *const sts[] = { "open", "known", "fixed" };
				html_rawf(rq, "<option%s>%s</option>", strcmp(st, sts[k]) == 0 ? " selected" : "", sts[k]);
			}
			html_raw(rq, "</select><input name=\"note\" aria-label=\"note\" value=\"");
			html_text(rq, model_col(r, i, "note"));
			html_raw(rq, "\"><button type=\"submit\">Save</button></form></td>");
		} else {
			html_raw(rq, "<td>");
			html_text(rq, st);
			html_raw(rq, "</td><td>");
			html_text(rq, model_col(r, i, "note"));
			html_raw(rq, "</td>");
		}
		html_raw(rq, "<td>");
		if (model_col(r, i, "from_cluster") && model_col(r, i, "from_expired")[0] == 't')
			html_rawf(rq, "cluster %lld of run %lld (expired)", (long long)model_coln(r, i, "from_cluster"),
				  (long long)model_coln(r, i, "from_run"));
		else if (model_col(r, i, "from_cluster"))
			html_rawf(rq, "<a href=\"/clusters/%lld\">cluster %lld</a>", (long long)model_coln(r, i, "from_cluster"),
				  (long long)model_coln(r, i, "from_cluster"));
		html_raw(rq, "</td><td class=\"time\">");
		html_time(rq, model_col(r, i, "updated_at"));
		html_raw(rq, "</td></tr>");
	}
	if (PQntuples(r) == 0)
		html_raw(rq, "<tr><td colspan=\"7\" class=\"empty\">No signatures yet: open a cluster and create one from "
			     "its common part.</td></tr>");
	html_raw(rq, "</tbody></table>");
	/* PAGE signatures a page: thousands made the page (and its coverage) take minutes */
	pager(rq, "/signatures",
	      req_printf(rq, "%s%s%s", run_id ? req_printf(rq, "&run=%lld", (long long)run_id) : "",
			 kq && (strcmp(kq, "wait") == 0 || strcmp(kq, "run") == 0) ? "&kind=" : "",
			 kq && (strcmp(kq, "wait") == 0 || strcmp(kq, "run") == 0) ? kq : ""),
	      offset, PQntuples(r), cnt ? (long)model_coln(cnt, 0, "total") : 0);
	PQclear(cnt);

	/* coverage and triage over a run */
	runs = model_runs(rq->db, NULL, "done", 100, 0, err, sizeof(err));
	html_raw(rq, "<section class=\"card\"><h2>Coverage and triage</h2><p>Choose the signatures above and a run:</p>"
		     "<label>Run <select name=\"run\" form=\"coverage-form\">");
	for (int i = 0; runs && i < PQntuples(runs); i++) {
		long long id = (long long)model_coln(runs, i, "run_id");
		html_rawf(rq, "<option value=\"%lld\"%s>#%lld ", id, id == run_id ? " selected" : "", id);
		html_text(rq, model_col(runs, i, "app"));
		html_raw(rq, " – ");
		run_params_summary(rq, model_col(runs, i, "params"));
		html_raw(rq, "</option>");
	}
	PQclear(runs);
	/* coverage and triage are per kind (mining.md section 7); default: the run's first */
	kind = kq && strcmp(kq, "run") == 0 ? 'r' : kq && strcmp(kq, "wait") == 0 ? 'w' : 0;
	html_rawf(rq, "</select></label> <label>Events <select name=\"kind\" form=\"coverage-form\">"
		      "<option value=\"\">the run's</option><option value=\"wait\"%s>wait</option>"
		      "<option value=\"run\"%s>run</option></select></label>"
		      " <button type=\"submit\" form=\"coverage-form\">Show</button>",
		  kind == 'w' ? " selected" : "", kind == 'r' ? " selected" : "");
	if (run_id) {
		struct sig_coverage cov;
		struct sig_triage tr;
		struct sel sel = { arena_calloc(rq->a, 1001, sizeof(int64_t)), 0, false };
		char e2[512];

		/* the checked signatures (a bare ?run=ID link: all of them) */
		req_query_each(rq, collect_sig, &sel);
		if (sel.any && sel.n == 0) {
			html_raw(rq, "<p class=\"hint\">No signature chosen.</p>");
		} else if (sig_coverage(rq->db, run_id, kind, sel.ids, sel.n, &cov, &rq->budget, e2, sizeof(e2)) < 0) {
			html_raw(rq, "<p class=\"error\">");
			html_text(rq, e2);
			html_raw(rq, "</p>");
		} else {
			html_rawf(rq, "<p class=\"coverage\">All signatures cover <strong>%.1f%%</strong> of run #%lld's AOI "
				      "cost of %s events (", cov.coverage * 100, (long long)run_id,
				  cov.kind == 'w' ? "wait" : "run");
			html_cost(rq, (int64_t)cov.covered_ns);
			html_raw(rq, " of ");
			html_cost(rq, (int64_t)cov.total_ns);
			html_raw(rq, ").</p>");
			/* the ones that cover the most, a page of them */
			qsort(cov.by, cov.nby, sizeof(*cov.by), by_cost_desc);
			if (cov.nby > PAGE)
				html_rawf(rq, "<p class=\"hint\">The %d signatures that cover the most of the %zu.</p>", PAGE,
					  cov.nby);
			html_raw(rq, "<table class=\"coverage\"><thead><tr><th>Signature</th><th class=\"n\">Cost</th>"
				     "<th class=\"n\">Coverage</th></tr></thead><tbody>");
			for (size_t i = 0; i < cov.nby && i < PAGE; i++) {
				html_raw(rq, "<tr><td>");
				html_text(rq, cov.by[i].name);
				html_raw(rq, "</td><td class=\"n\">");
				html_cost(rq, (int64_t)cov.by[i].cost_ns);
				html_rawf(rq, "</td><td class=\"n metric\">%.1f%%",
					  cov.total_ns ? 100.0 * (double)cov.by[i].cost_ns / (double)cov.total_ns : 0);
				html_bar(rq, (double)cov.by[i].cost_ns, (double)cov.total_ns, 80);
				html_raw(rq, "</td></tr>");
			}
			html_raw(rq, "</tbody></table>");
			free(cov.by);
		}
		if (sig_triage(rq->db, run_id, kind, &tr, &rq->budget, e2, sizeof(e2)) == 0 && tr.max_coverage > 0) {
			double x[SIG_NORDERS][SIG_LEVELS], y[SIG_LEVELS];
			struct plot_series ps[SIG_NORDERS];
			struct plot_opts po = { "Streams to open per coverage level", "streams opened",
						"coverage reached", 720, 360, 0, 0, 1 };
			for (int l = 0; l < SIG_LEVELS; l++)
				y[l] = tr.level[l];
			for (int o = 0; o < SIG_NORDERS; o++) {
				for (int l = 0; l < SIG_LEVELS; l++)
					x[o][l] = tr.needed[o][l];
				ps[o].name = sig_order_name((enum sig_order)o);
				ps[o].x = x[o];
				ps[o].y = y;
				ps[o].n = SIG_LEVELS;
			}
			html_rawf(rq, "<h3>Triage: streams an analyst opens to reach each coverage level (%zu streams)</h3>"
				      "<div class=\"plot\">", tr.nstreams);
			plot_render_svg(ps, SIG_NORDERS, &po, &rq->out);
			html_raw(rq, "</div><table class=\"triage\"><thead><tr><th class=\"n\">Coverage</th>");
			for (int o = 0; o < SIG_NORDERS; o++)
				html_rawf(rq, "<th class=\"n\">%s</th>", sig_order_name((enum sig_order)o));
			html_raw(rq, "</tr></thead><tbody>");
			for (int l = 0; l < SIG_LEVELS; l++) {
				html_rawf(rq, "<tr><td class=\"n\">%.1f%%</td>", tr.level[l] * 100);
				for (int o = 0; o < SIG_NORDERS; o++)
					html_rawf(rq, "<td class=\"n\">%g</td>", tr.needed[o][l]);
				html_raw(rq, "</tr>");
			}
			html_raw(rq, "</tbody></table>");
		}
	}
	html_raw(rq, "</section>");
	if (writer) {
		html_raw(rq, "<section class=\"card\"><h2>Import</h2><form method=\"post\" action=\"/signatures/import\" "
			     "id=\"import-form\">");
		html_csrf_field(rq);
		html_raw(rq, "<label>A file exported before <input type=\"file\" id=\"import-file\" accept=\".json,"
			     "application/json\"></label><label>or the JSON document <textarea name=\"doc\" rows=\"4\" "
			     "required></textarea></label><button type=\"submit\">Import</button></form></section>");
	}
	html_end(rq);
	PQclear(r);
}

/* Frames from a textarea: one per line, blank lines and surrounding spaces dropped. */
static size_t split_lines(struct req *rq, const char *text, const char **out, size_t max)
{
	size_t n = 0;

	while (text && *text && n < max) {
		size_t len = strcspn(text, "\r\n");
		const char *s = text, *e = text + len;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (e > s)
			out[n++] = arena_strndup(rq->a, s, (size_t)(e - s));
		text += len;
		while (*text == '\r' || *text == '\n')
			text++;
	}
	return n;
}

static void post_signature_new(struct req *rq)
{
	const char *frames[513];
	size_t n;
	int64_t id, from = 0;
	char err[512];
	const char *fc = req_form(rq, "from_cluster");
	int rc;

	if (!req_may_write(rq, false))
		return;
	n = split_lines(rq, req_form(rq, "frames"), frames, 513);
	if (fc && *fc && util_parse_i64(fc, 1, INT64_MAX, &from) < 0) {
		html_error(rq, 400, "from_cluster: must be a cluster id");
		return;
	}
	rc = sig_create(rq->db, req_form(rq, "name") ? req_form(rq, "name") : "", frames, n,
			req_form(rq, "status") ? req_form(rq, "status") : "open",
			req_form(rq, "note") ? req_form(rq, "note") : "", from, &id, err, sizeof(err));
	if (rc < 0) {
		html_error(rq, rc == SIG_EEXIST ? 409 : rc == SIG_EFAIL ? 500 : 400, err);
		return;
	}
	html_redirect(rq, req_printf(rq, "/signatures#sig-%lld", (long long)id));
}

static void post_signature_update(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];

	if (!req_may_write(rq, false))
		return;
	int rc = sig_update(rq->db, strtoll(id, NULL, 10), req_form(rq, "status"), req_form(rq, "note"), err,
			    sizeof(err));

	if (rc < 0) {
		html_error(rq, rc == SIG_ENOTFOUND ? 404 : rc == SIG_EFAIL ? 500 : 400, err);
		return;
	}
	html_redirect(rq, req_printf(rq, "/signatures#sig-%s", id));
}

static void post_signature_import(struct req *rq)
{
	const char *doc;
	char err[512];
	size_t n;

	if (!req_may_write(rq, false))
		return;
	doc = req_form(rq, "doc");
	if (!doc || sig_import(rq->db, doc, strlen(doc), &n, err, sizeof(err)) < 0) {
		html_error(rq, 400, doc ? err : "doc: the exported JSON document is required");
		return;
	}
	html_redirect(rq, "/signatures");
}

/* ---- routing ---- */

/* ---- the fleet ---- */

#define SILENT_AFTER 300   /* seconds without a report before a process counts as silent (the API's default) */

/* A link to the host's page: /fleet/<host, one path segment>. */
static void host_link(struct req *rq, const char *host)
{
	struct buf b = BUF_INIT(4096);

	buf_puts(&b, "/fleet/");
	url_encode_keep(&b, host, "-_.~");
	html_raw(rq, "<a href=\"");
	html_text(rq, buf_cstr(&b));
	html_raw(rq, "\">");
	html_text(rq, host);
	html_raw(rq, "</a>");
	buf_release(&b);
}

/* A build id: its first 12 characters, the whole in the title. */
static void short_id(struct req *rq, const char *v)
{
	char cut[13];

	if (!v || !*v) {
		html_raw(rq, "–");
		return;
	}
	snprintf(cut, sizeof(cut), "%s", v);
	html_raw(rq, "<code title=\"");
	html_text(rq, v);
	html_raw(rq, "\">");
	html_text(rq, cut);
	html_raw(rq, "</code>");
}

/* The strings of a JSON array, comma-separated (build ids shortened when short_ids is set). */
static void json_list(struct req *rq, const char *json, bool short_ids)
{
	json_object *a = json ? json_tokener_parse(json) : NULL;
	size_t n = a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;

	for (size_t i = 0; i < n; i++) {
		const char *v = json_object_get_string(json_object_array_get_idx(a, i));

		if (i)
			html_raw(rq, ", ");
		if (short_ids)
			short_id(rq, v);
		else
			html_text(rq, v && *v ? v : "–");
	}
	json_object_put(a);
}

/* Violations per hour as small bars (a JSON array of counts, oldest first). */
static void violation_bars(struct req *rq, const char *json, int bar_w, int height)
{
	json_object *a = json ? json_tokener_parse(json) : NULL;
	size_t n = a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
	int64_t max = 0, total = 0;

	for (size_t i = 0; i < n; i++) {
		int64_t v = json_object_get_int64(json_object_array_get_idx(a, i));

		max = v > max ? v : max;
		total = util_add_sat_i64(total, v);
	}
	html_rawf(rq, "<svg class=\"spark\" width=\"%zu\" height=\"%d\" role=\"img\"><title>%lld violations in %zu h"
		      " (most in an hour: %lld)</title>", n * (size_t)bar_w, height, (long long)total, n, (long long)max);
	for (size_t i = 0; i < n; i++) {
		int64_t v = json_object_get_int64(json_object_array_get_idx(a, i));
		double h = max > 0 ? (double)v / (double)max * height : 0;

		if (v > 0 && h < 1)
			h = 1;
		html_rawf(rq, "<rect x=\"%zu\" y=\"%.1f\" width=\"%d\" height=\"%.1f\"></rect>", i * (size_t)bar_w,
			  height - h, bar_w - 1, h);
	}
	html_raw(rq, "</svg>");
	json_object_put(a);
}

/* "live", "silent" or "stopped", with how long ago the last report came. */
static void host_status(struct req *rq, PGresult *r, int i)
{
	const char *st = model_col(r, i, "status");
	int64_t ago = model_coln(r, i, "seconds_since_report");

	html_raw(rq, "<span class=\"status ");
	html_text(rq, st);
	html_raw(rq, "\">");
	html_text(rq, st);
	html_raw(rq, "</span> <span class=\"hint\">");
	if (ago < 120)
		html_rawf(rq, "%llds ago", (long long)ago);
	else if (ago < 7200)
		html_rawf(rq, "%lld min ago", (long long)(ago / 60));
	else if (ago < 2 * 86400)
		html_rawf(rq, "%lld h ago", (long long)(ago / 3600));
	else
		html_rawf(rq, "%lld days ago", (long long)(ago / 86400));
	html_raw(rq, "</span>");
}

/* The hosts a build's merge held back ([{"host", "reason"}]), in a row of their own. */
static void fleet_held_back(struct req *rq, const char *json)
{
	json_object *held = json ? json_tokener_parse(json) : NULL;
	size_t n = held && json_object_is_type(held, json_type_array) ? json_object_array_length(held) : 0;

	if (n > 0) {
		html_raw(rq, "<tr class=\"held\"><td colspan=\"13\">Held back from the merge (far off the other "
			     "hosts): ");
		for (size_t k = 0; k < n; k++) {
			json_object *e = json_object_array_get_idx(held, k), *v;

			if (k)
				html_raw(rq, "; ");
			html_raw(rq, "<b>");
			if (json_object_object_get_ex(e, "host", &v))
				html_text(rq, json_object_get_string(v));
			html_raw(rq, "</b>: ");
			if (json_object_object_get_ex(e, "reason", &v))
				html_text(rq, json_object_get_string(v));
		}
		html_raw(rq, "</td></tr>");
	}
	json_object_put(held);
}

/* The fleet's merged profiles: per build, where it was learnt, then each loop's unit types. */
/* What the shipping budget sampled away (docs/fleet.md, "Sampled away"). */
static void fleet_sampling(struct req *rq, PGresult *r)
{
	html_raw(rq, "<h2>Sampled away</h2><p class=\"hint\">Agents ship at most <code>reports_per_min</code> "
		     "violations per unit type and minute, the worst first, each stream weighted by the inverse of "
		     "its chance of being shipped. Counted and dropped: what the processes seen in the last 24 h "
		     "reported; shipped: the violation streams stored in the last 24 h; estimated: the sum of their "
		     "weights, the violations they stand for.</p>");
	if (PQntuples(r) == 0) {
		html_raw(rq, "<p class=\"hint\">No violation in the last 24 h.</p>");
		return;
	}
	html_raw(rq, "<table class=\"sampling\"><thead><tr><th>App</th><th>Host</th><th class=\"n\">Violations counted"
		     "</th><th class=\"n\">Dropped</th><th class=\"n\">Streams shipped</th><th class=\"n\">Estimated "
		     "violations</th><th class=\"n\">Sampled away</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(r); i++) {
		long long counted = (long long)model_coln(r, i, "violations"), sent = (long long)model_coln(r, i, "streams");

		html_raw(rq, "<tr><td>");
		html_text(rq, model_col(r, i, "app"));
		html_raw(rq, "</td><td>");
		host_link(rq, model_col(r, i, "host"));
		html_rawf(rq, "</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td>"
			      "<td class=\"n\">%lld</td><td class=\"n\">", counted, (long long)model_coln(r, i, "drops"),
			  sent, (long long)model_coln(r, i, "est_violations"));
		if (counted > 0 && counted >= sent)
			html_rawf(rq, "%.1f %%", 100.0 * (double)(counted - sent) / (double)counted);
		else
			html_raw(rq, "–");
		html_raw(rq, "</td></tr>");
	}
	html_raw(rq, "</tbody></table>");
}

static void fleet_profiles(struct req *rq, PGresult *r)
{
	html_raw(rq, "<h2>Profiles learnt by the fleet</h2><p class=\"hint\">Training agents upload what they "
		     "learnt; each build's profiles are pooled (mean and variance per unit type) and agents fetch "
		     "the result, so a new host guards at once with the fleet's thresholds.</p>");
	if (PQntuples(r) == 0) {
		html_raw(rq, "<p class=\"hint\">No profile uploaded yet.</p>");
		return;
	}
	html_raw(rq, "<table class=\"profiles\"><thead><tr><th>Executable</th><th>Build</th><th class=\"n\">Hosts</th>"
		     "<th class=\"n\">Processes</th><th class=\"n\">Units</th><th>Merged</th><th>Loop</th><th>Unit type"
		     "</th><th class=\"n\">Units</th><th class=\"n\">Mean</th><th class=\"n\">Sd</th>"
		     "<th class=\"n\">Threshold</th><th>Contexts</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(r); i++) {
		json_object *sum = json_tokener_parse(model_col(r, i, "summary")), *loops = NULL;
		size_t nl, shown = 0;

		if (!sum || !json_object_object_get_ex(sum, "loops", &loops) || !json_object_is_type(loops, json_type_array))
			loops = NULL;
		nl = loops ? json_object_array_length(loops) : 0;
		for (size_t l = 0; l < nl || shown == 0; l++) {
			json_object *loop = l < nl ? json_object_array_get_idx(loops, l) : NULL, *types = NULL, *v;
			size_t nt;

			if (loop && (!json_object_object_get_ex(loop, "types", &types) ||
				     !json_object_is_type(types, json_type_array)))
				types = NULL;
			nt = types ? json_object_array_length(types) : 0;
			for (size_t t = 0; t < nt || (t == 0 && nt == 0); t++) {
				json_object *ty = t < nt ? json_object_array_get_idx(types, t) : NULL, *ctxs;

				html_raw(rq, "<tr>");
				if (shown++ == 0) {
					html_raw(rq, "<td><code>");
					html_text(rq, model_col(r, i, "exe"));
					html_raw(rq, "</code></td><td>");
					short_id(rq, model_col(r, i, "build_id"));
					html_rawf(rq, "</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td class=\"n\">"
						      "%lld</td><td class=\"time\">", (long long)model_coln(r, i, "hosts"),
						  (long long)model_coln(r, i, "processes"), (long long)model_coln(r, i, "units"));
					html_time(rq, model_col(r, i, "merged_at"));
					if (model_col(r, i, "stale") && model_col(r, i, "stale")[0] == 't')
						html_raw(rq, " <span class=\"hint\">(newer uploads)</span>");
					html_raw(rq, "</td>");
				} else {
					html_raw(rq, "<td colspan=\"6\"></td>");
				}
				html_raw(rq, "<td>");
				if (loop && t == 0 && json_object_object_get_ex(loop, "symbol", &v))
					html_frame_short(rq, json_object_get_string(v), 40);
				html_raw(rq, "</td><td>");
				if (ty && json_object_object_get_ex(ty, "name", &v))
					html_text(rq, json_object_get_string(v));
				html_raw(rq, "</td><td class=\"n\">");
				if (ty && json_object_object_get_ex(ty, "units", &v))
					html_rawf(rq, "%lld", (long long)json_object_get_int64(v));
				html_raw(rq, "</td><td class=\"n\">");
				if (ty && json_object_object_get_ex(ty, "mean_ns", &v))
					html_cost(rq, json_object_get_int64(v));
				html_raw(rq, "</td><td class=\"n\">");
				if (ty && json_object_object_get_ex(ty, "sd_ns", &v))
					html_cost(rq, json_object_get_int64(v));
				html_raw(rq, "</td><td class=\"n\">");
				if (ty && json_object_object_get_ex(ty, "threshold_ns", &v))
					html_cost(rq, json_object_get_int64(v));
				html_raw(rq, "</td><td>");
				if (ty && json_object_object_get_ex(ty, "contexts", &ctxs) &&
				    json_object_is_type(ctxs, json_type_array)) {
					size_t nc = json_object_array_length(ctxs);

					for (size_t c = 0; c < nc && c < 3; c++) {
						if (c)
							html_raw(rq, "; ");
						html_value(rq, json_object_get_string(json_object_array_get_idx(ctxs, c)));
					}
					if (nc > 3)
						html_rawf(rq, "; %zu more", nc - 3);
				}
				html_raw(rq, "</td></tr>");
				if (!ty)
					break;
			}
			if (!loop)
				break;
		}
		json_object_put(sum);
		fleet_held_back(rq, model_col(r, i, "held_back"));
	}
	html_raw(rq, "</tbody></table>");
}

/* The settings pushed to the agents, and for an admin the forms that change them. */
static void fleet_settings(struct req *rq, PGresult *r)
{
	html_raw(rq, "<h2>Settings pushed to the agents</h2><p class=\"hint\">Agents receive them in the answer to "
		     "their next report (a minute at most): an app's row over the row of every app (<code>*</code>); an "
		     "empty field leaves the setting as the agents were started. Guarding off stops units, samples and "
		     "violations.</p><table class=\"settings\"><thead><tr><th>App</th>");
	for (size_t k = 0; k < GSET_COUNT; k++) {
		html_raw(rq, guard_settings[k].type == GSET_BOOL ? "<th>" : "<th class=\"n\">");
		html_text(rq, guard_settings[k].label);
		html_raw(rq, "</th>");
	}
	html_raw(rq, "<th>Note</th><th>Changed</th><th></th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(r); i++) {
		html_raw(rq, "<tr><td>");
		html_text(rq, model_col(r, i, "app"));
		html_raw(rq, "</td>");
		for (size_t k = 0; k < GSET_COUNT; k++) {
			const char *v = model_col(r, i, guard_settings[k].name);

			if (guard_settings[k].type == GSET_BOOL) {
				html_rawf(rq, "<td>%s</td>", !v ? "–" : v[0] == 't' ? "on" : "<span class=\"bad\">off</span>");
				continue;
			}
			html_raw(rq, "<td class=\"n\">");
			html_text(rq, v ? v : "–");
			html_raw(rq, "</td>");
		}
		html_raw(rq, "<td>");
		html_text(rq, model_col(r, i, "note"));
		html_raw(rq, "</td><td class=\"time\">");
		html_time(rq, model_col(r, i, "updated_at"));
		html_raw(rq, "</td><td>");
		if (rq->role >= AUTH_ADMIN) {
			html_raw(rq, "<form method=\"post\" action=\"/fleet/settings/delete\"><input type=\"hidden\" "
				     "name=\"app\" value=\"");
			html_text(rq, model_col(r, i, "app"));
			html_raw(rq, "\">");
			html_csrf_field(rq);
			html_raw(rq, "<button type=\"submit\">Remove</button></form>");
		}
		html_raw(rq, "</td></tr>");
	}
	html_raw(rq, "</tbody></table>");
	if (rq->role < AUTH_ADMIN)
		return;
	html_raw(rq, "<form class=\"settings-new\" method=\"post\" action=\"/fleet/settings\">");
	html_csrf_field(rq);
	html_raw(rq, "<label>App <input name=\"app\" required maxlength=\"255\" placeholder=\"nginx, or *\"></label> ");
	for (size_t k = 0; k < GSET_COUNT; k++) {
		const struct guard_setting *g = &guard_settings[k];

		html_raw(rq, "<label>");
		html_text(rq, g->label);
		if (g->type == GSET_BOOL) {
			html_rawf(rq, " <select name=\"%s\"><option value=\"\">as started</option><option value=\"on\">on"
				      "</option><option value=\"off\">off</option></select></label> ", g->name);
			continue;
		}
		/* wide enough for the largest value */
		html_rawf(rq, " <input name=\"%s\" size=\"%d\"></label> ", g->name,
			  g->max >= 1e6 ? 7 : 5);
	}
	html_raw(rq, "<label>Note <input name=\"note\" maxlength=\"500\"></label> <button type=\"submit\">Push"
		     "</button></form>");
}

/* A change to the agents' settings: a write (the cross-site request token checked) by an admin. */
static bool settings_writer(struct req *rq)
{
	if (!req_may_write(rq, false))
		return false;
	if (rq->role < AUTH_ADMIN) {
		html_error(rq, 403, "Agent settings are an admin's.");
		return false;
	}
	return true;
}

/* A form field as a pushed setting, for fleet_settings_check(): empty is "as started". */
static struct fleet_given given_form(const char *v)
{
	struct fleet_given g = { FLEET_UNSET, false, 0, false };

	if (!v || !*v)
		return g;
	g.kind = FLEET_BAD;
	if (strcmp(v, "on") == 0 || strcmp(v, "off") == 0) {
		g.kind = FLEET_BOOL;
		g.b = strcmp(v, "on") == 0;
	} else if (util_parse_double(v, &g.d) == 0) {
		g.kind = FLEET_NUMBER;
		g.whole = g.d == (double)(int64_t)g.d;
	}
	return g;
}

static void post_fleet_settings(struct req *rq)
{
	static const struct fleet_words words = { "on", "off", "empty" };
	struct fleet_given given[GSET_COUNT];
	struct agent_settings s;
	char err[512];
	int rc;

	if (!settings_writer(rq))
		return;
	for (size_t i = 0; i < GSET_COUNT; i++)
		given[i] = given_form(req_form(rq, guard_settings[i].name));
	if ((rc = fleet_settings_check(req_form(rq, "app"), given, req_form(rq, "note"), &words, &s, err,
				       sizeof(err))) < 0 ||
	    (rc = model_agent_settings_put(rq->db, &s, err, sizeof(err))) < 0) {
		html_error(rq, req_status_of(rc), err);
		return;
	}
	html_redirect(rq, "/fleet");
}

static void post_fleet_settings_delete(struct req *rq)
{
	const char *app = req_form(rq, "app");
	char err[512];
	int rc;

	if (!settings_writer(rq))
		return;
	if (!app) {
		/* as for an app without a row */
		html_error(rq, 404, "app: required");
		return;
	}
	if ((rc = model_agent_settings_delete(rq->db, app, err, sizeof(err))) < 0) {
		html_error(rq, req_status_of(rc), err);
		return;
	}
	html_redirect(rq, "/fleet");
}

static void page_fleet(struct req *rq)
{
	char err[512];
	long offset = page_offset(rq);
	struct host_filter f = { NULL, req_query(rq, "status"), SILENT_AFTER };
	PGresult *r, *cnt, *all, *prof = NULL, *set = NULL, *samp = NULL;
	static const char *const states[] = { "live", "silent", "stopped" };

	if (f.status && strcmp(f.status, "live") && strcmp(f.status, "silent") && strcmp(f.status, "stopped"))
		f.status = NULL;
	r = model_hosts(rq->db, &f, PAGE, offset, err, sizeof(err));
	cnt = r ? model_hosts_count(rq->db, &f, err, sizeof(err)) : NULL;
	all = cnt ? model_hosts_count(rq->db, &(struct host_filter){ NULL, "silent", SILENT_AFTER }, err,
				      sizeof(err)) : NULL;
	prof = all ? model_profiles(rq->db, NULL, 100, 0, err, sizeof(err)) : NULL;
	set = prof ? model_agent_settings(rq->db, err, sizeof(err)) : NULL;
	samp = set ? model_fleet_sampling(rq->db, 100, err, sizeof(err)) : NULL;
	if (!r || !cnt || !all || !prof || !set || !samp) {
		PQclear(r);
		PQclear(cnt);
		PQclear(all);
		PQclear(prof);
		PQclear(set);
		html_error(rq, 500, err);
		return;
	}
	html_begin(rq, "Fleet");
	html_raw(rq, "<h1>Fleet</h1><p class=\"hint\">Every host whose guard agents have reported, silent ones first. "
		     "A process is silent when it has not reported for 5 minutes (agents report every minute) and "
		     "never said it exited.</p>");
	if (model_coln(all, 0, "total") > 0)
		html_rawf(rq, "<p class=\"alert\"><a href=\"/fleet?status=silent\">%lld host%s silent</a>: agents "
			      "that stopped reporting without exiting (host down, network cut, or the service hung).</p>",
			  (long long)model_coln(all, 0, "total"), model_coln(all, 0, "total") == 1 ? " is" : "s are");
	html_raw(rq, "<form class=\"filter\" method=\"get\"><label>Status <select name=\"status\"><option value=\"\">any"
		     "</option>");
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		html_rawf(rq, "<option%s>%s</option>", f.status && !strcmp(f.status, states[i]) ? " selected" : "",
			  states[i]);
	html_raw(rq, "</select></label><button type=\"submit\">Filter</button></form>"
		     "<table class=\"fleet\"><thead><tr><th>Host</th><th>Status</th><th>Apps</th><th>Mode</th>"
		     "<th>Builds</th><th>Agent</th><th class=\"n\">Processes</th><th>Violations, 24 h</th>"
		     "<th class=\"n\">Units, 24 h</th><th class=\"n\">Dropped</th><th class=\"n\">Spooled</th>"
		     "<th class=\"n\">Ship errors</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(r); i++) {
		html_raw(rq, "<tr><td>");
		host_link(rq, model_col(r, i, "host"));
		html_raw(rq, "</td><td>");
		host_status(rq, r, i);
		html_raw(rq, "</td><td>");
		json_list(rq, model_col(r, i, "apps"), false);
		html_raw(rq, "</td><td>");
		json_list(rq, model_col(r, i, "modes"), false);
		html_raw(rq, "</td><td>");
		json_list(rq, model_col(r, i, "build_ids"), true);
		html_raw(rq, "</td><td>");
		json_list(rq, model_col(r, i, "agent_versions"), false);
		html_rawf(rq, "</td><td class=\"n\">%lld", (long long)model_coln(r, i, "processes_live"));
		if (model_coln(r, i, "processes_silent"))
			html_rawf(rq, " <span class=\"bad\">+%lld silent</span>", (long long)model_coln(r, i, "processes_silent"));
		html_raw(rq, "</td><td class=\"spark\">");
		violation_bars(rq, model_col(r, i, "violations_by_hour"), 3, 16);
		html_rawf(rq, " %lld</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td>"
			      "<td class=\"n\">%lld</td></tr>", (long long)model_coln(r, i, "violations_24h"),
			  (long long)model_coln(r, i, "units_24h"), (long long)model_coln(r, i, "drops"),
			  (long long)model_coln(r, i, "spool_backlog"), (long long)model_coln(r, i, "ship_errors"));
	}
	html_raw(rq, "</tbody></table>");
	if (PQntuples(r) == 0)
		html_raw(rq, "<p class=\"hint\">No agent has reported yet. docs/fleet.md says how to roll agents out.</p>");
	pager(rq, "/fleet", keep_param(rq, NULL, "status", f.status), offset, PQntuples(r), (long)model_coln(cnt, 0, "total"));
	fleet_sampling(rq, samp);
	fleet_settings(rq, set);
	fleet_profiles(rq, prof);
	html_end(rq);
	PQclear(r);
	PQclear(cnt);
	PQclear(all);
	PQclear(prof);
	PQclear(set);
	PQclear(samp);
}

static void page_host(struct req *rq)
{
	const char *host = rq->arg;
	char err[512];
	struct host_filter f = { host, NULL, SILENT_AFTER };
	PGresult *h, *procs = NULL, *hours = NULL;
	struct buf series = BUF_INIT(1 << 16);

	h = model_hosts(rq->db, &f, 1, 0, err, sizeof(err));
	if (h && PQntuples(h) == 0) {
		PQclear(h);
		html_error(rq, 404, "No agent has reported from this host.");
		return;
	}
	if (h)
		procs = model_host_procs(rq->db, host, SILENT_AFTER, 1000, err, sizeof(err));
	if (procs)
		hours = model_host_hours(rq->db, host, 48, err, sizeof(err));
	if (!hours) {
		PQclear(h);
		PQclear(procs);
		html_error(rq, 500, err);
		return;
	}
	html_begin(rq, host);
	html_raw(rq, "<p class=\"crumbs\"><a href=\"/fleet\">Fleet</a></p><h1>");
	html_value(rq, host);
	html_raw(rq, " ");
	host_status(rq, h, 0);
	html_raw(rq, "</h1><p>");
	json_list(rq, model_col(h, 0, "apps"), false);
	html_raw(rq, " · mode ");
	json_list(rq, model_col(h, 0, "modes"), false);
	html_raw(rq, " · agent ");
	json_list(rq, model_col(h, 0, "agent_versions"), false);
	html_raw(rq, " · first report ");
	html_time(rq, model_col(h, 0, "first_seen"));
	html_raw(rq, " · <a href=\"/streams?host=");
	{
		struct buf b = BUF_INIT(4096);

		url_encode(&b, host);
		html_text(rq, buf_cstr(&b));
		buf_release(&b);
	}
	html_raw(rq, "\">its streams</a></p><h2>Violations per hour, last 48 h</h2>");
	buf_putc(&series, '[');
	for (int i = 0; i < PQntuples(hours); i++)
		buf_printf(&series, "%s%s", i ? "," : "", model_col(hours, i, "violations"));
	buf_putc(&series, ']');
	violation_bars(rq, buf_cstr(&series), 8, 48);
	buf_release(&series);
	html_raw(rq, "<table class=\"hours\"><thead><tr><th>Hour (UTC)</th><th class=\"n\">Units</th>"
		     "<th class=\"n\">Violations</th></tr></thead><tbody>");
	for (int i = PQntuples(hours) - 1; i >= 0; i--) {
		if (!model_coln(hours, i, "units") && !model_coln(hours, i, "violations"))
			continue;
		html_raw(rq, "<tr><td class=\"time\">");
		html_time(rq, model_col(hours, i, "hour"));
		html_rawf(rq, "</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td></tr>",
			  (long long)model_coln(hours, i, "units"), (long long)model_coln(hours, i, "violations"));
	}
	html_raw(rq, "</tbody></table><h2>Guarded processes</h2><table class=\"procs\"><thead><tr><th class=\"n\">Pid"
		     "</th><th>App</th><th>Executable</th><th>Build</th><th>Mode</th><th>Status</th><th>Started</th>"
		     "<th>Last report</th><th class=\"n\">Units</th><th class=\"n\">Violations</th>"
		     "<th class=\"n\">Dropped</th><th class=\"n\">Spooled</th><th class=\"n\">Ship errors</th></tr>"
		     "</thead><tbody>");
	for (int i = 0; i < PQntuples(procs); i++) {
		html_rawf(rq, "<tr><td class=\"n\">%lld</td><td>", (long long)model_coln(procs, i, "pid"));
		html_text(rq, model_col(procs, i, "app"));
		html_raw(rq, "</td><td><code>");
		html_text(rq, model_col(procs, i, "exe"));
		html_raw(rq, "</code></td><td>");
		short_id(rq, model_col(procs, i, "build_id"));
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(procs, i, "mode"));
		html_raw(rq, "</td><td><span class=\"status ");
		html_text(rq, model_col(procs, i, "status"));
		html_raw(rq, "\">");
		html_text(rq, model_col(procs, i, "status"));
		html_raw(rq, "</span></td><td class=\"time\">");
		html_time(rq, model_col(procs, i, "started_at"));
		html_raw(rq, "</td><td class=\"time\">");
		html_time(rq, model_col(procs, i, "last_seen"));
		html_rawf(rq, "</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td>"
			      "<td class=\"n\">%lld</td><td class=\"n\">%lld</td></tr>", (long long)model_coln(procs, i, "units"),
			  (long long)model_coln(procs, i, "violations"), (long long)model_coln(procs, i, "drops"),
			  (long long)model_coln(procs, i, "spool_backlog"), (long long)model_coln(procs, i, "ship_errors"));
	}
	html_raw(rq, "</tbody></table>");
	html_end(rq);
	PQclear(h);
	PQclear(procs);
	PQclear(hours);
}

/* ---- tokens (admin) ---- */

static bool page_admin(struct req *rq)
{
	if (rq->role < AUTH_ADMIN) {
		html_error(rq, 403, "Tokens are an admin's.");
		return false;
	}
	return true;
}

static void page_tokens(struct req *rq)
{
	char err[512];
	PGresult *r;

	if (!page_admin(rq))
		return;
	if (!(r = model_tokens(rq->db, 1000, 0, err, sizeof(err)))) {
		html_error(rq, 500, err);
		return;
	}
	html_begin(rq, "Tokens");
	html_raw(rq, "<h1>API tokens</h1><p class=\"hint\">Agents send with ingest tokens (bound to their host: a "
		     "stream of another host is refused), analysts read and write with analyst tokens, admins "
		     "manage runs and tokens. A token is shown once, when it is made; only its hash is kept.</p>"
		     "<form class=\"token-new\" method=\"post\" action=\"/tokens/new\">");
	html_csrf_field(rq);
	html_raw(rq, "<label>Role <select name=\"role\"><option>ingest</option><option>analyst</option>"
		     "<option>admin</option></select></label> <label>Name <input name=\"name\" maxlength=\"255\">"
		     "</label> <label>Host (ingest) <input name=\"host\" maxlength=\"255\"></label> "
		     "<button type=\"submit\">Create</button></form><table class=\"tokens\"><thead><tr><th class=\"n\">Id"
		     "</th><th>Role</th><th>Name</th><th>Host</th><th>Created</th><th>Revoked</th><th></th></tr></thead>"
		     "<tbody>");
	for (int i = 0; i < PQntuples(r); i++) {
		html_rawf(rq, "<tr><td class=\"n\">%lld</td><td>", (long long)model_coln(r, i, "token_id"));
		html_text(rq, model_col(r, i, "role"));
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "name"));
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "host") ? model_col(r, i, "host") : "any");
		html_raw(rq, "</td><td class=\"time\">");
		html_time(rq, model_col(r, i, "created_at"));
		html_raw(rq, "</td><td class=\"time\">");
		if (model_col(r, i, "revoked_at")) {
			html_time(rq, model_col(r, i, "revoked_at"));
			html_raw(rq, "</td><td>");
		} else {
			html_rawf(rq, "</td><td><form method=\"post\" action=\"/tokens/%lld/revoke\">",
				  (long long)model_coln(r, i, "token_id"));
			html_csrf_field(rq);
			html_raw(rq, "<button type=\"submit\">Revoke</button></form>");
		}
		html_raw(rq, "</td></tr>");
	}
	html_raw(rq, "</tbody></table>");
	html_end(rq);
	PQclear(r);
}

static void post_token_new(struct req *rq)
{
	const char *role = req_form(rq, "role"), *name = req_form(rq, "name"), *host = req_form(rq, "host");
	char token[AUTH_TOKEN_LEN + 1], err[512];
	int64_t id;

	if (!req_may_write(rq, false) || !page_admin(rq))
		return;
	if (host && !*host)
		host = NULL;
	if (auth_token_create(rq->db, role ? auth_role_parse(role) : AUTH_NONE, name, host, token, &id, err,
			      sizeof(err)) < 0) {
		html_error(rq, 400, err);
		return;
	}
	html_begin(rq, "New token");
	html_rawf(rq, "<h1>Token %lld</h1><p>Copy it now: it is not shown again.</p><p><code class=\"token\">",
		  (long long)id);
	html_text(rq, token);
	html_raw(rq, "</code></p><p><a href=\"/tokens\">Back to the tokens</a></p>");
	html_end(rq);
}

static void post_token_revoke(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	int rc;

	if (!req_may_write(rq, false) || !page_admin(rq))
		return;
	rc = auth_token_revoke(rq->db, strtoll(id, NULL, 10), err, sizeof(err));
	if (rc != 0) {
		html_error(rq, rc > 0 ? 404 : 500, err);
		return;
	}
	req_token_revoked(rq, strtoll(id, NULL, 10));
	html_redirect(rq, "/tokens");
}

/* POST /runs/{id}/delete: an admin's; back to the list */
static void post_run_delete(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	int rc;

	if (!req_may_write(rq, false))
		return;
	if (rq->role < AUTH_ADMIN) {
		html_error(rq, 403, "Deleting a run needs an admin token.");
		return;
	}
	rc = miner_delete_run(rq->db, strtoll(id, NULL, 10), err, sizeof(err));
	if (rc < 0) {
		html_error(rq, rc == -2 ? 409 : rc == -3 ? 404 : 500, err);
		return;
	}
	html_redirect(rq, "/runs");
}

/* "/": the runs are the dashboard's first page. */
static void page_root(struct req *rq)
{
	html_redirect(rq, "/runs");
}

static void page_login_form(struct req *rq)
{
	page_login(rq, NULL, 200);
}

static void logout_r(struct req *rq)
{
	if (!req_may_write(rq, false))
		return;
	if (req_logout(rq) < 0) {
		pages_unavailable(rq);
		return;
	}
	html_redirect(rq, "/login");
}

/* The pages; all but the login's need a read token (else: to the login page and back). */
static const struct req_route routes[] = {
	{ REQ_M_GET, "/login", page_login_form, NULL },
	{ REQ_M_POST, "/login", post_login, NULL },
	{ REQ_M_POST, "/logout", logout_r, NULL },
	{ REQ_M_GET, "/", page_root, NULL },
	{ REQ_M_GET, "/runs", page_runs, NULL },
	{ REQ_M_GET, "/runs/#", page_run, "run" },
	{ REQ_M_GET, "/compare", page_compare, NULL },
	{ REQ_M_GET, "/alerts", page_alerts, NULL },
	{ REQ_M_POST, "/runs/#/delete", post_run_delete, "run" },
	{ REQ_M_GET, "/clusters/#", page_cluster, "cluster" },
	{ REQ_M_GET, "/problems/#", page_problem, "problem" },
	{ REQ_M_GET, "/streams", page_streams, NULL },
	{ REQ_M_GET, "/streams/*", page_stream, NULL },
	{ REQ_M_GET, "/signatures", page_signatures, NULL },
	{ REQ_M_POST, "/signatures/new", post_signature_new, NULL },
	{ REQ_M_POST, "/signatures/import", post_signature_import, NULL },
	{ REQ_M_POST, "/signatures/#", post_signature_update, "signature" },
	{ REQ_M_GET, "/fleet", page_fleet, NULL },
	{ REQ_M_POST, "/fleet/settings", post_fleet_settings, NULL },
	{ REQ_M_POST, "/fleet/settings/delete", post_fleet_settings_delete, NULL },
	{ REQ_M_GET, "/fleet/**", page_host, NULL },
	{ REQ_M_GET, "/tokens", page_tokens, NULL },
	{ REQ_M_POST, "/tokens/new", post_token_new, NULL },
	{ REQ_M_POST, "/tokens/#/revoke", post_token_revoke, "token" },
};

void pages_unavailable(struct req *rq)
{
	html_error(rq, 503, "The database is unavailable; try again in a moment.");
	req_add_header(rq, "Retry-After", REQ_DB_RETRY_AFTER);
}

struct query_out {
	struct buf *b;
	bool *first;
};

/* "?key=value" or "&key=value", both encoded. */
static bool put_query_arg(void *cls, const char *key, const char *value)
{
	struct query_out *q = cls;

	buf_putc(q->b, *q->first ? '?' : '&');
	*q->first = false;
	url_encode_keep(q->b, key, "-_.~");
	if (*value) {
		buf_putc(q->b, '=');
		url_encode_keep(q->b, value, "-_.~");
	}
	return true;
}

void pages_handle(struct req *rq)
{
	struct req_match m;

	req_route(routes, sizeof(routes) / sizeof(routes[0]), rq, &m);
	if ((rq->method == REQ_GET || rq->method == REQ_HEAD) && strcmp(rq->path, "/login") != 0 &&
	    !req_may_read(rq)) {
		struct buf next = BUF_INIT(8192), b = BUF_INIT(8192);
		bool first = true;

		/* back to the same page after the login, its query too (encoded once in next, twice here) */
		buf_puts(&next, strcmp(rq->path, "/") == 0 ? "/runs" : rq->path);
		req_query_each(rq, put_query_arg, &(struct query_out){ &next, &first });
		buf_puts(&b, "/login?next=");
		url_encode(&b, buf_cstr(&next));
		html_redirect(rq, buf_error(&next) || buf_error(&b) ? "/login" : req_strdup(rq, buf_cstr(&b)));
		buf_release(&next);
		buf_release(&b);
		return;
	}
	if (!m.route) {
		html_error(rq, 404, "No such page.");
		return;
	}
	rq->arg = m.arg;
	m.route->fn(rq);
}
