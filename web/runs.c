/* runs: the runs' pages and API (see runs.h). */
#include "web/runs.h"
#include "common/buf.h"
#include "common/fmt.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "miner/params.h"
#include "miner/queue.h"
#include "web/api.h"
#include "web/html.h"
#include "web/model.h"
#include "web/pages.h"
#include "web/problems.h"
#include "web/request.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void runs_post_run(struct req *rq)
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
	api_respond_id(rq, "run_id", id, 202);
	req_add_header(rq, "Location", req_printf(rq, "/api/v1/runs/%lld", (long long)id));
}

void runs_get_runs(struct req *rq)
{
	static const char *const names[] = { "app", "status", "limit", "offset", NULL };
	const char *status = req_query(rq, "status");
	PGresult *rows, *count;
	char err[512];
	long limit, offset;

	if (!api_known_query(rq, names, false) || !api_page_params(rq, &limit, &offset))
		return;
	if (status && strcmp(status, "queued") && strcmp(status, "running") && strcmp(status, "done") &&
	    strcmp(status, "failed")) {
		req_json_error(rq, 400, "status: must be queued, running, done or failed");
		return;
	}
	rows = model_runs(rq->db, req_query(rq, "app"), status, limit, offset, err, sizeof(err));
	count = rows ? model_runs_count(rq->db, req_query(rq, "app"), status, err, sizeof(err)) : NULL;
	api_page_response(rq, "runs", rows, count, err);
}

void runs_get_run(struct req *rq)
{
	const char *id = rq->arg;
	PGresult *r;

	if (!api_known_query(rq, api_no_params, false) || !(r = api_need_run(rq, id)))
		return;
	api_row_response(rq, r);
	PQclear(r);
}

/* The one check and deletion of a run, the API's and the page's: 0, or the status with its message in err
 * (the API writes it as it is, the page as a sentence of its own for the 403). */
static int delete_checked(struct req *rq, char *err, size_t errlen)
{
	int rc;

	if (rq->role < AUTH_ADMIN) {
		snprintf(err, errlen, "deleting a run needs an admin token");
		return 403;
	}
	/* miner_delete_run(): -2 still being mined, -3 no such run */
	rc = miner_delete_run(rq->db, strtoll(rq->arg, NULL, 10), err, errlen);
	return rc >= 0 ? 0 : rc == -2 ? 409 : rc == -3 ? 404 : 500;
}

void runs_delete_run(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	int rc;

	if (!req_may_write(rq, true))
		return;
	if ((rc = delete_checked(rq, err, sizeof(err))) != 0) {
		req_json_error(rq, rc, "%s", err);
		return;
	}
	{
		struct jsonw w;

		jsonw_init(&w, &rq->out);
		jsonw_object(&w);
		jsonw_ki64(&w, "run_id", strtoll(id, NULL, 10));
		jsonw_kbool(&w, "deleted", true);
		jsonw_end(&w);
		api_ok_json(rq, &w, 200);
	}
}

void runs_run_params_summary(struct req *rq, const char *params_json)
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

/* n with thousands separated ("1,234"), in the arena. */
static const char *thousands(struct req *rq, int64_t n)
{
	char t[FMT_LEN];

	return req_strdup(rq, fmt_count(t, n < 0 ? 0 : n));
}

static bool progress_num(json_object *p, const char *key, int64_t *v)
{
	json_object *x;

	if (!p || !json_object_object_get_ex(p, key, &x))
		return false;
	*v = json_object_get_int64(x);
	return true;
}

/* A queued or running run's phase and progress as the heartbeat recorded them (miner/heartbeat.c):
 * "reading events and extracting the AOI: 412 of 689 streams", "clustering 1,234 patterns". */
static void progress_text(struct req *rq, PGresult *r, int i)
{
	const char *phase = model_col(r, i, "phase");
	json_object *p = json_tokener_parse(model_col(r, i, "progress") ? model_col(r, i, "progress") : "{}");
	int64_t a, b;

	if (!phase || strcmp(model_col(r, i, "status"), "queued") == 0) {
		html_raw(rq, "waiting for a worker");
		json_object_put(p);
		return;
	}
	html_text(rq, phase);
	if (strncmp(phase, "reading events", 14) == 0) {
		if (progress_num(p, "streams_read", &a) && progress_num(p, "streams", &b)) {
			html_rawf(rq, ": %s", thousands(rq, a));
			html_rawf(rq, " of %s streams", thousands(rq, b));
		}
		if (progress_num(p, "aoi_events", &a) && a > 0)
			html_rawf(rq, ", %s AOI events", thousands(rq, a));
	} else if (strcmp(phase, "collapsing stacks") == 0) {
		if (progress_num(p, "aoi_events", &a))
			html_rawf(rq, " of %s AOI events", thousands(rq, a));
	} else if (strcmp(phase, "mining") == 0) {
		if (progress_num(p, "patterns", &a))
			html_rawf(rq, ": %s patterns so far", thousands(rq, a));
	} else if (strcmp(phase, "clustering") == 0 || strcmp(phase, "storing") == 0) {
		if (progress_num(p, "patterns", &a))
			html_rawf(rq, " %s patterns", thousands(rq, a));
	}
	if (progress_num(p, "parts", &a) && progress_num(p, "parts_done", &b)) {
		html_rawf(rq, " (parts: %s", thousands(rq, b));
		html_rawf(rq, " of %s done)", thousands(rq, a));
	}
	json_object_put(p);
}

static void count_of(struct req *rq, const char *counts_json, const char *key)
{
	json_object *c = json_tokener_parse(counts_json ? counts_json : "{}"), *v;

	if (c && json_object_object_get_ex(c, key, &v))
		html_count(rq, json_object_get_int64(v));
	else
		html_raw(rq, "–");
	json_object_put(c);
}

static bool run_live(PGresult *r, int i)
{
	const char *st = model_col(r, i, "status");

	return strcmp(st, "queued") == 0 || strcmp(st, "running") == 0;
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

static void form_textarea(struct req *rq, bool again, const char *name)
{
	html_rawf(rq, "<textarea name=\"%s\" rows=\"2\">", name);
	html_text(rq, pages_form_kept(rq, again, name, ""));
	html_raw(rq, "</textarea>");
}

/* "<small>text</small></label>": a field's one-line explanation, with its default. */
static void field_hint(struct req *rq, const char *text)
{
	html_rawf(rq, "<small>%s</small></label>", text);
}

/* The form that starts a run: a plain POST to /runs/new (app.js may send it to the API instead), each field
 * explained in a line with its default. form_err: the reason the last one was refused; its fields are shown
 * again as sent. */
static void run_form(struct req *rq, const char *form_err)
{
	static const char *const kinds[] = { "both", "run", "wait", NULL };
	static const char *const aois[] = { "waitgraph", "critical", "thread", "stream", NULL };
	static const char *const modes[] = { "guideline", "fraction", "ns", NULL };
	static const char *const mode_labels[] = { "guideline: share of streams × delay", "fraction of the AOI cost",
						   "absolute, in ns" };
	static const char *const linkages[] = { "average", "single", "complete", NULL };
	bool again = form_err != NULL;
	char err[256];
	PGresult *apps = model_apps(rq->db, err, sizeof(err));
	const char *app = pages_form_kept(rq, again, "app", "");

	html_raw(rq, "<form id=\"run-form\" class=\"grid\" method=\"post\" action=\"/runs/new\">");
	html_csrf_field(rq);
	html_raw(rq, "<label>App <select name=\"app\" required>");
	for (int i = 0; apps && i < PQntuples(apps); i++) {
		html_raw(rq, "<option value=\"");
		html_text(rq, PQgetvalue(apps, i, 0));
		html_rawf(rq, "\"%s>", strcmp(app, PQgetvalue(apps, i, 0)) == 0 ? " selected" : "");
		html_text(rq, PQgetvalue(apps, i, 0));
		html_raw(rq, "</option>");
	}
	PQclear(apps);
	html_raw(rq, "</select>");
	field_hint(rq, "The program whose recorded requests are mined.");
	html_raw(rq, "<label>Kind ");
	pages_form_select(rq, again, "kind", kinds, NULL);
	field_hint(rq, "What time to look at: run is CPU time, wait is time blocked; default both.");
	html_raw(rq, "<label>AOI (area of interest) ");
	pages_form_select(rq, again, "aoi", aois, NULL);
	field_hint(rq, "Which events of a slow request count: waitgraph (default) is the slow thread and what it "
		       "waited for; critical only the critical path; thread the slow thread; stream everything.");
	html_raw(rq, "<label>Threshold ");
	pages_form_select(rq, again, "threshold_mode", modes, mode_labels);
	field_hint(rq, "How costly a pattern must be to be kept; default guideline.");
	html_raw(rq, "<label>Value (share, fraction or ns) ");
	pages_form_input(rq, again, "threshold", "0.1", " inputmode=\"decimal\"");
	field_hint(rq, "Guideline: the share of requests a bug hits (default 0.1, 10 %); fraction: of the total "
		       "cost, 0 to 1; ns: a cost.");
	html_raw(rq, "<label>Delay per hit, ms (guideline) ");
	pages_form_input(rq, again, "delay_ms", "300", " inputmode=\"decimal\"");
	field_hint(rq, "The delay a bug adds each time it hits; default 300 ms.");
	html_raw(rq, "<label>Linkage ");
	pages_form_select(rq, again, "linkage", linkages, NULL);
	field_hint(rq, "How similar patterns are grouped into clusters; default average.");
	html_raw(rq, "<label>Cut ");
	pages_form_input(rq, again, "cut", "0.5", " inputmode=\"decimal\"");
	field_hint(rq, "0 to 1: lower makes more, tighter clusters; default 0.5.");
	html_raw(rq, "<label>Version ");
	pages_form_input(rq, again, "version", "", "");
	field_hint(rq, "Only requests of this app version; empty: all.");
	html_raw(rq, "<label>Host ");
	pages_form_input(rq, again, "host", "", "");
	field_hint(rq, "Only requests of this host; empty: all.");
	html_raw(rq, "<label>Since ");
	pages_form_input(rq, again, "since", "", " placeholder=\"2026-11-01T00:00:00Z\"");
	field_hint(rq, "Only requests from this time (UTC); empty: the oldest kept.");
	html_raw(rq, "<label>Until ");
	pages_form_input(rq, again, "until", "", "");
	field_hint(rq, "Only requests up to this time; empty: now.");
	html_raw(rq, "<label class=\"wide\">Labels (key=value, one per line) ");
	form_textarea(rq, again, "labels");
	field_hint(rq, "Only requests with all these labels; empty: all.");
	html_raw(rq, "<label class=\"wide\">Include frames (globs, one per line) ");
	form_textarea(rq, again, "include");
	field_hint(rq, "Only events whose stack has a frame matching one (libpq!*); empty: all.");
	html_raw(rq, "<label class=\"wide\">Exclude frames (globs, one per line) ");
	form_textarea(rq, again, "exclude");
	field_hint(rq, "Drop events whose stack has a matching frame; empty: none.");
	html_raw(rq, "<div class=\"wide\"><button type=\"submit\">Start run</button> "
		     "<span id=\"run-form-error\" class=\"error\" role=\"alert\">");
	html_text(rq, form_err);
	html_raw(rq, "</span></div></form>"
		     "<p class=\"hint\">The guideline (the paper's): to find bugs that hit a share s of the selected "
		     "streams with a delay d each, C = s × d × streams; it ranks whole bugs, where the spec's default of "
		     "1% of the AOI cost splits them into many small clusters (docs/mining.md).</p>");
}

/* The non-empty trimmed lines of text, one by one: *line (in the arena) or NULL at the end. */
static const char *next_line(struct req *rq, const char **text)
{
	while (*text && **text) {
		const char *s = *text, *e = strchr(s, '\n');
		size_t n = e ? (size_t)(e - s) : strlen(s);

		*text = e ? e + 1 : NULL;
		while (n && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
			n--;
		while (n && (*s == ' ' || *s == '\t'))
			s++, n--;
		if (n)
			return req_printf(rq, "%.*s", (int)n, s);
	}
	return NULL;
}

static void globs_json(struct req *rq, struct jsonw *w, const char *name)
{
	const char *text = req_form(rq, name), *l;

	jsonw_karray(w, name);
	while ((l = next_line(rq, &text)))
		jsonw_str(w, l);
	jsonw_end(w);
}

/* A form field as a number: 0, or -1 with "name: must be a number" in err. */
static int form_number(struct req *rq, const char *name, double *v, char *err, size_t errlen)
{
	const char *s = req_form(rq, name);

	if (!s || util_parse_double(s, v) < 0 || !isfinite(*v)) {
		snprintf(err, errlen, "%s: must be a number", name);
		return -1;
	}
	return 0;
}

/* The run form's fields as the JSON body of POST /api/v1/runs (what app.js sends), so that the one
 * validator, params_parse(), checks both. 0, or -1 with "field: reason" in err. */
static int runs_form_json(struct req *rq, struct buf *out, char *err, size_t errlen)
{
	const char *mode = req_form(rq, "threshold_mode"), *labels = req_form(rq, "labels"), *l;
	static const char *const filters[] = { "version", "host", "since", "until" };
	double thr, cut, delay;
	struct jsonw w;

	if (form_number(rq, "cut", &cut, err, errlen) < 0 || form_number(rq, "threshold", &thr, err, errlen) < 0)
		return -1;
	jsonw_init_compact(&w, out);
	jsonw_object(&w);
	jsonw_kstr(&w, "app", req_form(rq, "app") ? req_form(rq, "app") : "");
	jsonw_kstr(&w, "kind", req_form(rq, "kind") ? req_form(rq, "kind") : "both");
	jsonw_kstr(&w, "aoi", req_form(rq, "aoi") ? req_form(rq, "aoi") : "waitgraph");
	jsonw_kstr(&w, "linkage", req_form(rq, "linkage") ? req_form(rq, "linkage") : "average");
	globs_json(rq, &w, "include");
	globs_json(rq, &w, "exclude");
	jsonw_kdouble(&w, "cut", cut);
	if (mode && strcmp(mode, "ns") == 0) {
		/* out of range: 0, which the validator refuses by name */
		jsonw_ki64(&w, "threshold_ns", thr >= 1 && thr < 9e18 ? (int64_t)llround(thr) : 0);
	} else if (mode && strcmp(mode, "fraction") == 0) {
		jsonw_kdouble(&w, "threshold_fraction", thr);
	} else {
		if (form_number(rq, "delay_ms", &delay, err, errlen) < 0)
			return -1;
		jsonw_kobject(&w, "threshold_guideline");
		jsonw_kdouble(&w, "share", thr);
		jsonw_ki64(&w, "delay_ns", delay > 0 && delay < 9e12 ? (int64_t)llround(delay * 1e6) : 0);
		jsonw_end(&w);
	}
	jsonw_kobject(&w, "filter");
	for (size_t i = 0; i < sizeof(filters) / sizeof(*filters); i++) {
		const char *text = req_form(rq, filters[i]), *v = next_line(rq, &text);
		if (v)
			jsonw_kstr(&w, filters[i], v);
	}
	if ((l = next_line(rq, &labels))) {
		jsonw_kobject(&w, "labels");
		for (; l; l = next_line(rq, &labels)) {
			const char *eq = strchr(l, '=');
			if (!eq || eq == l) {
				snprintf(err, errlen, "labels: write key=value, one per line");
				return -1;
			}
			jsonw_keyn(&w, l, (size_t)(eq - l));
			jsonw_str(&w, eq + 1);
		}
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	if (jsonw_finish(&w) < 0) {
		snprintf(err, errlen, "the form is too large");
		return -1;
	}
	return 0;
}

/* A run's worst problem (or, mined before problems, its costliest cluster): its title, linked, and its total
 * cost; "–" for a run without one. */
static void worst_cell(struct req *rq, PGresult *r, int i)
{
	const char *pid = model_col(r, i, "worst_problem_id"), *cid = model_col(r, i, "worst_cluster_id");

	html_raw(rq, "<td class=\"worst\">");
	if (!pid && !cid) {
		html_raw(rq, "–</td>");
		return;
	}
	html_raw(rq, pid ? "<a class=\"worst-link\" href=\"/problems/" : "<a class=\"worst-link\" href=\"/clusters/");
	html_text(rq, pid ? pid : cid);
	html_raw(rq, "\">");
	pages_title_frames(rq, model_col(r, i, "worst_title"));
	html_raw(rq, "</a> <span class=\"cost\">");
	html_cost(rq, model_coln(r, i, "worst_cost_ns"));
	html_raw(rq, "</span></td>");
}

/* A sortable header of the runs' table: a link to ?sort=key, aria-sort on the current order's. */
static void runs_th(struct req *rq, enum model_run_sort key, enum model_run_sort on, const char *label,
		    const char *cls)
{
	/* text sorts ascending, numbers and the newest first descending */
	const char *dir = key == RUN_SORT_APP || key == RUN_SORT_STATUS ? "ascending" : "descending";

	html_rawf(rq, "<th%s%s%s", cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
	if (key == on)
		html_rawf(rq, " aria-sort=\"%s\"", dir);
	html_rawf(rq, "><a href=\"/runs?sort=%s\" data-sort=\"%s\">%s%s</a></th>", model_run_sort_name(key),
		  model_run_sort_name(key), label, key != on ? "" : dir[0] == 'a' ? " ▲" : " ▼");
}

/* The runs, latest first (or as ?sort= says), each with its worst problem; for analysts, a link to the form
 * that starts one. */
static void runs_list(struct req *rq)
{
	char err[512];
	long offset = pages_offset(rq);
	const char *sv = req_query(rq, "sort");
	int sort = sv ? model_run_sort_parse(sv) : -1;
	PGresult *r, *cnt;

	if (sort < 0)
		sort = RUN_SORT_NEWEST;
	if (!(r = model_runs_worst(rq->db, (enum model_run_sort)sort, PAGES_ROWS, offset, err, sizeof(err)))) {
		html_error(rq, 500, err);
		return;
	}
	cnt = model_runs_count(rq->db, NULL, NULL, err, sizeof(err));
	html_begin(rq, "Runs");
	html_raw(rq, "<h1>Mining runs</h1><p class=\"lead\">The latest runs first, each with its worst problem (the "
		     "costliest, by total cost): open it to see where the time goes.");
	if (rq->role >= AUTH_ANALYST)
		html_raw(rq, " <a id=\"new-run\" class=\"button\" href=\"/runs/new\">New run</a>");
	html_raw(rq, "</p><table class=\"runs\" id=\"runs\"><thead><tr>");
	runs_th(rq, RUN_SORT_NEWEST, (enum model_run_sort)sort, "Run", NULL);
	runs_th(rq, RUN_SORT_APP, (enum model_run_sort)sort, "App", NULL);
	runs_th(rq, RUN_SORT_STATUS, (enum model_run_sort)sort, "Status", NULL);
	runs_th(rq, RUN_SORT_WORST, (enum model_run_sort)sort, "Worst problem (total cost)", NULL);
	html_raw(rq, "<th>Parameters</th><th class=\"n\">Streams</th><th class=\"n\">AOI events</th>"
		     "<th class=\"n\">Patterns</th>");
	runs_th(rq, RUN_SORT_CLUSTERS, (enum model_run_sort)sort, "Clusters", "n");
	html_raw(rq, "<th>Created (UTC)</th></tr></thead><tbody>");
	req_frames_warm(rq, r, "worst_title");
	for (int i = 0; i < PQntuples(r); i++) {
		long long id = (long long)model_coln(r, i, "run_id");
		html_rawf(rq, "<tr><td><a href=\"/runs/%lld\">#%lld</a></td><td>", id, id);
		html_text(rq, model_col(r, i, "app"));
		html_raw(rq, "</td><td>");
		status_cell(rq, r, i);
		html_raw(rq, "</td>");
		worst_cell(rq, r, i);
		html_raw(rq, "<td>");
		runs_run_params_summary(rq, model_col(r, i, "params"));
		if (run_live(r, i)) {
			/* no counts yet: how far it got (app.js or the page's refresh keeps it current) */
			html_rawf(rq, "</td><td colspan=\"4\" class=\"progress\" data-progress=\"%lld\">", id);
			progress_text(rq, r, i);
			html_raw(rq, "</td><td class=\"time\">");
		} else {
			html_raw(rq, "</td><td class=\"n\">");
			count_of(rq, model_col(r, i, "counts"), "streams");
			html_raw(rq, "</td><td class=\"n\">");
			count_of(rq, model_col(r, i, "counts"), "aoi_events");
			html_raw(rq, "</td><td class=\"n\">");
			count_of(rq, model_col(r, i, "counts"), "patterns");
			html_raw(rq, "</td><td class=\"n\">");
			count_of(rq, model_col(r, i, "counts"), "clusters");
			html_raw(rq, "</td><td class=\"time\">");
		}
		html_time(rq, model_col(r, i, "created_at"));
		html_raw(rq, "</td></tr>");
	}
	if (PQntuples(r) == 0)
		html_raw(rq, "<tr><td colspan=\"10\" class=\"empty\">No runs yet.</td></tr>");
	html_raw(rq, "</tbody></table>");
	pages_pager(rq, "/runs", sort == RUN_SORT_NEWEST ? "" : pages_keep_param(rq, NULL, "sort", sv), offset,
		    PQntuples(r), cnt ? (long)model_coln(cnt, 0, "total") : 0, false);
	html_end(rq);
	PQclear(r);
	PQclear(cnt);
}

void runs_page_runs(struct req *rq)
{
	runs_list(rq);
}

/* The page of the run form; form_err: why the form just sent was refused (status 400). */
static void run_new_page(struct req *rq, const char *form_err)
{
	if (rq->role < AUTH_ANALYST) {
		html_error(rq, 403, "Starting a run needs an analyst or admin token.");
		return;
	}
	html_begin(rq, "New run");
	if (form_err)
		rq->status = 400;
	html_raw(rq, "<h1>Start a mining run</h1><p class=\"lead\">Every field but the app has a default that suits a "
		     "first look; the run appears on <a href=\"/runs\">Runs</a> and opens when it is queued.</p>");
	run_form(rq, form_err);
	html_end(rq);
}

void runs_page_run_new(struct req *rq)
{
	run_new_page(rq, NULL);
}

void runs_post_run_new(struct req *rq)
{
	struct run_params p;
	struct buf body = BUF_INIT(1 << 20);
	char err[512];
	int64_t id;
	int rc;

	if (!req_may_write(rq, false))
		return;
	rc = runs_form_json(rq, &body, err, sizeof(err));
	if (rc == 0 && params_parse(buf_cstr(&body), body.len, rq->a, &p, err, sizeof(err)) < 0)
		rc = -1;
	buf_release(&body);
	if (rc < 0) {
		run_new_page(rq, err);
		return;
	}
	if (miner_enqueue_db(rq->db, &p, &id, err, sizeof(err)) < 0) {
		html_error(rq, 500, err);
		return;
	}
	html_redirect(rq, req_printf(rq, "/runs/%lld", (long long)id));
}

static const char *const metric_label[SORT_N] = { "Total cost", "Streams", "Events", "Avg cost", "Excess cost" };
static const char *const metric_col[SORT_N] = { "total_cost_ns", "streams", "events", "avg_cost_ns",
						"excess_cost_ns" };

/* The run's title line, parameters, downloads, deletion form and errors. */
static void run_header(struct req *rq, const char *id, PGresult *run)
{
	html_rawf(rq, "<h1>Run #%s: ", id);
	html_value(rq, model_col(run, 0, "app"));
	html_raw(rq, " ");
	status_cell(rq, run, 0);
	html_raw(rq, "</h1><p class=\"params\">");
	runs_run_params_summary(rq, model_col(run, 0, "params"));
	html_raw(rq, "</p>");
	if (strcmp(model_col(run, 0, "status"), "done") == 0)
	{
		pages_download_links(rq, req_printf(rq, "/api/v1/runs/%s/profile", id));
		html_rawf(rq, "<p><a id=\"compare-with\" href=\"/compare?a=%s\">Compare with…</a> a later run of this app "
			      "and kind.</p>", id);
	}
	if (rq->role >= AUTH_ADMIN && strcmp(model_col(run, 0, "status"), "running") != 0) {
		html_rawf(rq, "<form class=\"delete\" method=\"post\" action=\"/runs/%s/delete\" "
			  "data-confirm=\"Delete run %s and its results? This cannot be undone.\">", id, id);
		html_csrf_field(rq);
		html_raw(rq, "<button type=\"submit\" class=\"danger\">Delete this run and its results</button></form>");
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
}

/* "The run": its counts, the threshold C of each kind, its time. baseline: it was measured against one. */
static void run_counts(struct req *rq, const char *id, PGresult *run, bool baseline)
{
	html_raw(rq, "<h2>The run</h2>");
	if (run_live(run, 0)) {
		/* the counts come when it is done; until then, its phase */
		html_rawf(rq, "<p class=\"progress\" data-progress=\"%s\">", id);
		progress_text(rq, run, 0);
		html_raw(rq, "</p>");
		return;
	}
	html_raw(rq, "<dl class=\"counts\"><dt>Streams</dt><dd>");
	count_of(rq, model_col(run, 0, "counts"), "streams");
	if (baseline) {
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
			html_cost(rq, json_object_get_int64(v) * 1000000);
		else
			html_raw(rq, "–");
		json_object_put(t);
	}
	html_rawf(rq, "</dd></dl><p><a href=\"/signatures?run=%s\">Coverage and triage of the signatures over this "
		      "run</a></p>", id);
}

/* The kind tabs and the frame filter, keeping the order s. */
static void run_filter(struct req *rq, int s, const char *kind, const char *q)
{
	html_raw(rq, "<form class=\"filter\" method=\"get\"><nav class=\"tabs\">");
	{
		static const char *const kinds[] = { "all", "run", "wait" };
		for (int i = 0; i < 3; i++) {
			bool on = (i == 0 && !kind) || (kind && strcmp(kind, kinds[i]) == 0);
			html_rawf(rq, "<a%s href=\"?", on ? " class=\"on\" aria-current=\"page\"" : "");
			html_text(rq, pages_keep_param(rq, pages_keep_param(rq, pages_keep_param(rq, NULL, "sort",
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
}

/* Row i of the clusters' table: its metrics nm with bars against max, its title. */
static void cluster_row(struct req *rq, PGresult *cl, int i, int nm, const double *max)
{
	long long cid = (long long)model_coln(cl, i, "cluster_id");

	/* its rank by total cost, the one its own page and its problem give it */
	html_rawf(rq, "<tr><td class=\"n rank\"><a href=\"/clusters/%lld\">%lld</a></td><td>%s</td>", cid,
		  (long long)model_coln(cl, i, "rank_total_cost"), model_col(cl, i, "kind")[0] == 'w' ? "wait" : "run");
	for (int m = 0; m < nm; m++) {
		int64_t v = model_coln(cl, i, metric_col[m]);
		html_raw(rq, "<td class=\"n metric\">");
		if (m == SORT_EXCESS_COST) {
			/* with its 95 % interval, when there is one */
			html_cost(rq, v);
			if (model_col(cl, i, "excess_lo_ns")) {
				html_raw(rq, " <span class=\"ci\" title=\"95 % bootstrap interval\">");
				html_interval(rq, (double)model_coln(cl, i, "excess_lo_ns"),
					      (double)model_coln(cl, i, "excess_hi_ns"));
				html_raw(rq, "</span>");
			}
		} else if (m == 0 || m == 3) {
			html_cost(rq, v);
			if (m == 0 && model_coln(cl, i, "est_cost_ns") != v)
				pages_est_cost_note(rq, model_coln(cl, i, "est_cost_ns"));
		} else {
			html_count(rq, v);
		}
		html_bar(rq, v > 0 ? (double)v : 0, max[m], 60);
		html_raw(rq, "</td>");
	}
	html_rawf(rq, "<td><a class=\"common\" href=\"/clusters/%lld\">", cid);
	/* its title (the frames that tell it apart); a run mined before titles: the innermost frames */
	if (model_col(cl, i, "title"))
		pages_title_frames(rq, model_col(cl, i, "title"));
	else
		pages_frame_ids_compact(rq, model_col(cl, i, "common"), 3);
	html_raw(rq, "</a></td></tr>");
}

/* The clusters' table, ordered by metric s (nm metrics shown), with links that keep kind and q. */
static void cluster_table(struct req *rq, PGresult *cl, int s, int nm, const char *kind, const char *q)
{
	double max[SORT_N] = { 0 };

	for (int i = 0; i < PQntuples(cl); i++)
		for (int m = 0; m < nm; m++)
			if ((double)model_coln(cl, i, metric_col[m]) > max[m])
				max[m] = (double)model_coln(cl, i, metric_col[m]);
	html_raw(rq, "<table class=\"clusters\" id=\"clusters\"><thead><tr><th class=\"n\" title=\"by total cost, "
		     "among all the run's clusters (both kinds)\">Rank</th><th>Kind</th>");
	for (int m = 0; m < nm; m++) {
		html_rawf(rq, "<th class=\"n\"%s><a href=\"?", m == s ? " aria-sort=\"descending\"" : "");
		html_text(rq, pages_keep_param(rq, pages_keep_param(rq, pages_keep_param(rq, NULL, "sort", model_sort_name((enum model_sort)m)),
							"kind", kind), "q", q) + 1);
		html_rawf(rq, "\" data-sort=\"%s\">%s%s</a></th>", model_sort_name((enum model_sort)m), metric_label[m],
			  m == s ? " ▼" : "");
	}
	html_raw(rq, "<th>Title (the frames that tell it apart)</th></tr></thead><tbody>");
	req_frames_warm(rq, cl, "title");
	for (int i = 0; i < PQntuples(cl); i++)
		cluster_row(rq, cl, i, nm, max);
	if (PQntuples(cl) == 0)
		html_rawf(rq, "<tr><td colspan=\"%d\" class=\"empty\">No clusters (yet).</td></tr>", nm + 3);
	html_raw(rq, "</tbody></table>");
}

void runs_page_run(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	PGresult *run, *cl = NULL, *cnt = NULL;
	const char *sort = req_query(rq, "sort"), *kind = req_query(rq, "kind"), *q = req_query(rq, "q");
	const char *k = NULL, *keep;
	long offset = pages_offset(rq);
	int s = sort ? model_sort_parse(sort) : -1, nm = SORT_N - 1;
	if (kind && strcmp(kind, "run") == 0)
		k = "r";
	else if (kind && strcmp(kind, "wait") == 0)
		k = "w";
	else
		kind = NULL;
	if (q && (!*q || strlen(q) > 1024))
		q = NULL;
	if (!(run = pages_need_row(rq, model_run(rq->db, id, err, sizeof(err)), err, "No such run.")))
		return;
	/* measured against a baseline: the excess cost, the default order */
	if (model_run_count(run, "baseline_streams") > 0)
		nm = SORT_N;
	if (s < 0 || s >= nm)
		s = nm == SORT_N ? SORT_EXCESS_COST : SORT_TOTAL_COST;
	cl = model_clusters(rq->db, id, (enum model_sort)s, k, q, PAGES_ROWS, offset, err, sizeof(err));
	cnt = cl ? model_clusters_count(rq->db, id, k, q, err, sizeof(err)) : NULL;
	if (!cl || !cnt) {
		PQclear(run);
		PQclear(cl);
		html_error(rq, 500, err);
		return;
	}
	/* without scripts the page reloads itself until the run has ended (app.js polls instead) */
	html_begin_refresh(rq, req_printf(rq, "Run %s", id), run_live(run, 0) ? 2 : 0);
	run_header(rq, id, run);
	problems_section(rq, id, run);
	run_counts(rq, id, run, nm == SORT_N);
	/* kind tabs, filter, the table */
	keep = pages_keep_param(rq, pages_keep_param(rq, pages_keep_param(rq, NULL, "sort", model_sort_name((enum model_sort)s)),
					 "kind", kind), "q", q);
	run_filter(rq, s, kind, q);
	cluster_table(rq, cl, s, nm, kind, q);
	pages_pager(rq, req_printf(rq, "/runs/%s", id), keep, offset, PQntuples(cl),
		    (long)model_coln(cnt, 0, "total"), false);
	html_end(rq);
	PQclear(run);
	PQclear(cl);
	PQclear(cnt);
}

void runs_post_run_delete(struct req *rq)
{
	char err[512];
	int rc;

	if (!req_may_write(rq, false))
		return;
	if (rq->role < AUTH_ADMIN) {
		html_error(rq, 403, "Deleting a run needs an admin token.");
		return;
	}
	/* a page form's first POST only asks (the API's DELETE does not) */
	if (!pages_confirmed(rq, req_printf(rq, "Delete run %s?", rq->arg),
			     req_printf(rq, "Run %s and all its results (clusters, problems) will be deleted. This "
					"cannot be undone.", rq->arg),
			     req_printf(rq, "/runs/%s/delete", rq->arg), "Delete", req_printf(rq, "/runs/%s", rq->arg), NULL))
		return;
	if ((rc = delete_checked(rq, err, sizeof(err))) != 0) {
		html_error(rq, rc, rc == 403 ? "Deleting a run needs an admin token." : err);
		return;
	}
	html_redirect(rq, "/runs");
}
