/* pages: the pages' routes and dispatch, the login, and the pieces pages share (see pages.h). */
#include "web/pages.h"
#include "common/arena.h"
#include "common/fmt.h"
#include "common/util.h"
#include "web/alerts.h"
#include "web/clusters.h"
#include "web/compare.h"
#include "web/flame.h"
#include "web/fleet.h"
#include "web/html.h"
#include "web/problems.h"
#include "web/request.h"
#include "web/runs.h"
#include "web/signatures.h"
#include "web/streams.h"
#include "web/tokens.h"

#include <json-c/json.h>
#include <string.h>

long pages_offset(struct req *rq)
{
	int64_t o = 0;
	const char *v = req_query(rq, "offset");

	if (v && util_parse_i64(v, 0, 1000000000, &o) < 0)
		o = 0;
	return (long)o;
}

void pages_pager(struct req *rq, const char *base, const char *keep, long offset, long shown, long total,
		 bool more)
{
	char nb[FMT_LEN];

	html_raw(rq, "<nav class=\"pager\">");
	if (offset > 0) {
		html_raw(rq, "<a rel=\"prev\" href=\"");
		html_text(rq, base);
		html_rawf(rq, "?offset=%ld", offset > PAGES_ROWS ? offset - PAGES_ROWS : 0);
		html_text(rq, keep);
		html_raw(rq, "\">← previous</a>");
	}
	if (more)
		html_rawf(rq, "<span>%ld–%ld of more than %s</span>", shown ? offset + 1 : 0, offset + shown,
			  fmt_count(nb, total));
	else
		html_rawf(rq, "<span>%ld–%ld of %ld</span>", shown ? offset + 1 : 0, offset + shown, total);
	if (more ? shown == PAGES_ROWS : offset + shown < total) {
		html_raw(rq, "<a rel=\"next\" href=\"");
		html_text(rq, base);
		html_rawf(rq, "?offset=%ld", offset + PAGES_ROWS);
		html_text(rq, keep);
		html_raw(rq, "\">next →</a>");
	}
	html_raw(rq, "</nav>");
}

void pages_url_encode_keep(struct buf *b, const char *value, const char *keep)
{
	for (const unsigned char *p = (const unsigned char *)value; *p; p++)
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    strchr(keep, *p))
			buf_putc(b, (char)*p);
		else
			buf_printf(b, "%%%02X", *p);
}

void pages_url_encode(struct buf *b, const char *value)
{
	pages_url_encode_keep(b, value, "-_.~/");
}

int pages_flame_graph(struct req *rq, struct flame *f, const char *const *keep)
{
	const char *search = req_query(rq, "search"), *fv = req_query(rq, "focus"), *params = "", *prefix;
	struct buf svg = BUF_INIT(0);
	int64_t focus = 0;

	if (fv && util_parse_i64(fv, 0, UINT32_MAX, &focus) < 0)
		focus = 0;
	if (search && !*search)
		search = NULL;
	for (size_t i = 0; keep && keep[i]; i++)
		params = pages_keep_param(rq, params, keep[i], req_query(rq, keep[i]));
	params = pages_keep_param(rq, params, "search", search);
	flame_set_search(f, search);
	flame_set_link_suffix(f, "#flame");
	prefix = req_printf(rq, "?%s%sfocus=", *params ? params + 1 : "", *params ? "&" : "");
	if (!prefix || flame_render_svg(f, (uint32_t)focus, prefix, 1200, &svg) < 0) {
		buf_release(&svg);
		return -1;
	}
	/* a GET form that lands on the graph; the page's other parameters ride along hidden */
	html_raw(rq, "<form class=\"flame-search\" method=\"get\" action=\"#flame\" role=\"search\">");
	for (size_t i = 0; keep && keep[i]; i++) {
		const char *v = req_query(rq, keep[i]);

		if (!v || !*v)
			continue;
		html_rawf(rq, "<input type=\"hidden\" name=\"%s\" value=\"", keep[i]);
		html_text(rq, v);
		html_raw(rq, "\">");
	}
	if (focus)
		html_rawf(rq, "<input type=\"hidden\" name=\"focus\" value=\"%lld\">", (long long)focus);
	html_raw(rq, "<label>Search frames <input type=\"search\" name=\"search\" value=\"");
	html_text(rq, search);
	html_raw(rq, "\" placeholder=\"a name or module, e.g. libc\"></label> <button type=\"submit\">Highlight</button> "
		     "<output class=\"matched\" aria-live=\"polite\">");
	if (search) {
		uint64_t shown = flame_shown_cost(f), m = flame_matched_cost(f);

		html_raw(rq, "matched: ");
		html_share(rq, shown ? (double)m / (double)shown : 0.0);
		html_raw(rq, " of ");
		html_cost(rq, (int64_t)shown);
	}
	html_raw(rq, "</output></form>");
	if (focus) {
		html_raw(rq, "<p><a class=\"flame-reset\" href=\"?");
		html_text(rq, *params ? params + 1 : "");
		html_raw(rq, "#flame\">Reset zoom</a> (back to the whole graph)</p>");
	}
	html_raw(rq, "<div class=\"flame\" data-shown=\"");
	html_cost(rq, (int64_t)flame_shown_cost(f));
	html_raw(rq, "\">");
	buf_append(&rq->out, svg.data, svg.len);
	html_raw(rq, "</div>");
	buf_release(&svg);
	return 0;
}

const char *pages_keep_param(struct req *rq, const char *prev, const char *name, const char *value)
{
	struct buf b = BUF_INIT(8192);
	char *out;

	buf_puts(&b, prev ? prev : "");
	if (value && *value) {
		buf_printf(&b, "&%s=", name);
		pages_url_encode(&b, value);
	}
	out = req_strdup(rq, buf_cstr(&b));
	buf_release(&b);
	/* out of memory: no parameters, as "&" so that callers skipping the leading '&' stay in bounds */
	return out ? out : "&";
}

void pages_frame_list(struct req *rq, const char *const *names, size_t n, const char *cls)
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

void pages_frame_ids_compact(struct req *rq, const char *ids, size_t k)
{
	const char **names;
	size_t n;

	if (req_frame_names(rq, ids, &names, &n) == 0)
		frames_compact(rq, names, n, k);
}

void pages_frames_json_compact(struct req *rq, const char *json, size_t k)
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

bool pages_confirmed(struct req *rq, const char *title, const char *question, const char *action,
		     const char *button, const char *back, const char *const *keep)
{
	const char *c = req_form(rq, "confirm");

	if (c && strcmp(c, "1") == 0)
		return true;
	html_begin(rq, title);
	html_raw(rq, "<h1>");
	html_text(rq, title);
	html_raw(rq, "</h1><form class=\"confirm\" method=\"post\" action=\"");
	html_text(rq, action);
	html_raw(rq, "\">");
	html_csrf_field(rq);
	for (size_t i = 0; keep && keep[i]; i++) {
		const char *v = req_form(rq, keep[i]);

		if (!v)
			continue;
		html_rawf(rq, "<input type=\"hidden\" name=\"%s\" value=\"", keep[i]);
		html_text(rq, v);
		html_raw(rq, "\">");
	}
	html_raw(rq, "<p>");
	html_text(rq, question);
	html_raw(rq, "</p><input type=\"hidden\" name=\"confirm\" value=\"1\"><button type=\"submit\" class=\"danger\">");
	html_text(rq, button);
	html_raw(rq, "</button> <a class=\"button secondary\" href=\"");
	html_text(rq, back);
	html_raw(rq, "\">Cancel</a></form>");
	html_end(rq);
	return false;
}

const char *pages_form_kept(struct req *rq, bool again, const char *name, const char *dflt)
{
	const char *v = again ? req_form(rq, name) : NULL;

	return v ? v : again ? "" : dflt;
}

void pages_form_select(struct req *rq, bool again, const char *name, const char *const *opts,
			const char *const *labels)
{
	const char *v = pages_form_kept(rq, again, name, opts[0]);

	html_rawf(rq, "<select name=\"%s\">", name);
	for (int i = 0; opts[i]; i++) {
		html_raw(rq, "<option value=\"");
		html_text(rq, opts[i]);
		html_rawf(rq, "\"%s>", strcmp(v, opts[i]) == 0 ? " selected" : "");
		html_text(rq, labels ? labels[i] : opts[i]);
		html_raw(rq, "</option>");
	}
	html_raw(rq, "</select>");
}

void pages_form_input(struct req *rq, bool again, const char *name, const char *dflt, const char *extra)
{
	html_rawf(rq, "<input name=\"%s\" value=\"", name);
	html_text(rq, pages_form_kept(rq, again, name, dflt));
	html_rawf(rq, "\"%s>", extra);
}

void pages_download_links(struct req *rq, const char *api_path)
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

void pages_count_cells(struct req *rq, PGresult *r, int i, const char *const *cols)
{
	for (; *cols; cols++) {
		html_raw(rq, "<td class=\"n\">");
		html_count(rq, model_coln(r, i, *cols));
		html_raw(rq, "</td>");
	}
}

void pages_est_cost_note(struct req *rq, int64_t est)
{
	html_raw(rq, " <span class=\"est\" title=\"estimated fleet cost: each stream's cost times its sampling "
		     "weight (the agents shipped only the worst violations of a busy minute)\">est. ");
	html_cost(rq, est);
	html_raw(rq, "</span>");
}

void pages_title_frames(struct req *rq, const char *ids)
{
	const char **names;
	size_t n;

	if (ids && req_frame_names(rq, ids, &names, &n) == 0)
		frames_compact(rq, names, n, n);
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

static void post_logout(struct req *rq)
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
	{ REQ_M_POST, "/logout", post_logout, NULL },
	{ REQ_M_GET, "/", page_root, NULL },
	{ REQ_M_GET, "/runs", runs_page_runs, NULL },
	{ REQ_M_GET, "/runs/#", runs_page_run, "run" },
	{ REQ_M_GET, "/runs/new", runs_page_run_new, NULL },
	{ REQ_M_POST, "/runs/new", runs_post_run_new, NULL },
	{ REQ_M_GET, "/compare", compare_page_compare, NULL },
	{ REQ_M_GET, "/alerts", alerts_page_alerts, NULL },
	{ REQ_M_POST, "/alerts/rules", alerts_post_rule_new, NULL },
	{ REQ_M_POST, "/alerts/rules/#/delete", alerts_post_rule_delete, "alert rule" },
	{ REQ_M_POST, "/alerts/schedules", alerts_post_schedule_new, NULL },
	{ REQ_M_POST, "/alerts/schedules/#/delete", alerts_post_schedule_delete, "schedule" },
	{ REQ_M_POST, "/runs/#/delete", runs_post_run_delete, "run" },
	{ REQ_M_GET, "/clusters/#", clusters_page_cluster, "cluster" },
	{ REQ_M_GET, "/problems/#", problems_page_problem, "problem" },
	{ REQ_M_GET, "/streams", streams_page_streams, NULL },
	{ REQ_M_GET, "/streams/*", streams_page_stream, NULL },
	{ REQ_M_GET, "/signatures", signatures_page_signatures, NULL },
	{ REQ_M_POST, "/signatures/new", signatures_post_signature_new, NULL },
	{ REQ_M_POST, "/signatures/import", signatures_post_signature_import, NULL },
	{ REQ_M_POST, "/signatures/#", signatures_post_signature_update, "signature" },
	{ REQ_M_GET, "/fleet", fleet_page_fleet, NULL },
	{ REQ_M_POST, "/fleet/settings", fleet_post_fleet_settings, NULL },
	{ REQ_M_POST, "/fleet/settings/delete", fleet_post_fleet_settings_delete, NULL },
	{ REQ_M_GET, "/fleet/**", fleet_page_host, NULL },
	{ REQ_M_GET, "/tokens", tokens_page_tokens, NULL },
	{ REQ_M_POST, "/tokens/new", tokens_post_token_new, NULL },
	{ REQ_M_POST, "/tokens/#/revoke", tokens_post_token_revoke, "token" },
};

PGresult *pages_need_row(struct req *rq, PGresult *r, const char *err, const char *missing)
{
	if (!r) {
		html_error(rq, 500, err);
		return NULL;
	}
	if (PQntuples(r) == 0) {
		PQclear(r);
		html_error(rq, 404, missing);
		return NULL;
	}
	return r;
}

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
	pages_url_encode_keep(q->b, key, "-_.~");
	if (*value) {
		buf_putc(q->b, '=');
		pages_url_encode_keep(q->b, value, "-_.~");
	}
	return true;
}

void pages_route_name(struct req *rq)
{
	struct req_match m;

	req_route(routes, sizeof(routes) / sizeof(routes[0]), rq, &m);
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
		pages_url_encode(&b, buf_cstr(&next));
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
