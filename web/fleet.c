/* fleet: the fleet's hosts, profiles and pushed settings, page and API (see fleet.h). */
#include "web/fleet.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "web/api.h"
#include "web/html.h"
#include "web/model.h"
#include "web/pages.h"
#include "web/request.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#define AS_STARTED "(as the agents were started)"

int fleet_settings_check(const char *app, const struct fleet_given given[GSET_COUNT], const char *note,
			 const struct fleet_words *w, struct agent_settings *s, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	if (!app || !*app || strlen(app) > 255) {
		snprintf(err, errlen, "app: required, 1 to 255 bytes ('*': every app)");
		return WEB_EINVAL;
	}
	s->app = app;
	s->note = note ? note : "";
	for (size_t i = 0; i < GSET_COUNT; i++) {
		const struct guard_setting *g = &guard_settings[i];
		const struct fleet_given *v = &given[i];

		if (v->kind == FLEET_UNSET)
			continue;
		if (g->type == GSET_BOOL) {
			if (v->kind != FLEET_BOOL) {
				snprintf(err, errlen, "%s: %s, %s, or %s " AS_STARTED, g->name, w->yes, w->no, w->unset);
				return WEB_EINVAL;
			}
			s->value[i] = v->b;
		} else {
			if (v->kind != FLEET_NUMBER || (g->type == GSET_WHOLE && !v->whole) ||
			    !guard_setting_valid((enum guard_setting_id)i, v->d)) {
				snprintf(err, errlen, "%s: %s from %g to %g, or %s " AS_STARTED, g->name,
					 g->type == GSET_WHOLE ? "a whole number" : "a number", g->min, g->max, w->unset);
				return WEB_EINVAL;
			}
			s->value[i] = v->d;
		}
		s->set[i] = true;
	}
	return 0;
}

/* seconds without a report before a process counts as silent: five missed reports at the agent's default
 * of 60 s (the API's ?silent_after= default, the page's) */
#define SILENT_AFTER_DEFAULT 300

static bool silent_after_param(struct req *rq, long long *out)
{
	int64_t v;

	if (!api_num_param(rq, "silent_after", 10, 7 * 86400, SILENT_AFTER_DEFAULT, &v))
		return false;
	*out = (long long)v;
	return true;
}

void fleet_get_hosts(struct req *rq)
{
	static const char *const names[] = { "limit", "offset", "silent_after", "status", NULL };
	struct host_filter f = { NULL, req_query(rq, "status"), 0 };
	PGresult *rows, *count;
	char err[512];
	long limit, offset;

	if (!api_known_query(rq, names, false) || !api_page_params(rq, &limit, &offset) ||
	    !silent_after_param(rq, &f.silent_after_s))
		return;
	if (f.status && strcmp(f.status, "live") && strcmp(f.status, "silent") && strcmp(f.status, "stopped")) {
		req_json_error(rq, 400, "status: must be live, silent or stopped");
		return;
	}
	rows = model_hosts(rq->db, &f, limit, offset, err, sizeof(err));
	count = rows ? model_hosts_count(rq->db, &f, err, sizeof(err)) : NULL;
	api_page_response(rq, "hosts", rows, count, err);
}

void fleet_get_host(struct req *rq)
{
	const char *host = rq->arg;
	static const char *const names[] = { "silent_after", "hours", NULL };
	struct host_filter f = { host, NULL, 0 };
	PGresult *h = NULL, *procs = NULL, *hours = NULL;
	char err[512];
	int64_t nh;
	struct jsonw w;

	if (!api_known_query(rq, names, false) || !silent_after_param(rq, &f.silent_after_s) ||
	    !api_num_param(rq, "hours", 1, 24 * 30, 24, &nh))
		return;
	h = model_hosts(rq->db, &f, 1, 0, err, sizeof(err));
	if (api_failed(rq, h, err))
		return;
	if (PQntuples(h) == 0) {
		req_json_error(rq, 404, "host '%.255s': no agent has reported from it", host);
		goto out;
	}
	procs = model_host_procs(rq->db, host, f.silent_after_s, 1000, err, sizeof(err));
	if (api_failed(rq, procs, err))
		goto out;
	hours = model_host_hours(rq->db, host, (int)nh, err, sizeof(err));
	if (api_failed(rq, hours, err))
		goto out;
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	api_put_members(&w, h, 0, NULL);
	jsonw_key(&w, "processes");
	api_put_rows(&w, procs, NULL);
	jsonw_key(&w, "hours");
	api_put_rows(&w, hours, NULL);
	jsonw_end(&w);
	api_ok_json(rq, &w, 200);
out:
	PQclear(h);
	PQclear(procs);
	PQclear(hours);
}

/* model_profiles() of every build, as api_get_page() pages it */
static PGresult *all_profiles(PGconn *db, long limit, long offset, char *err, size_t errlen)
{
	return model_profiles(db, NULL, limit, offset, err, errlen);
}

void fleet_get_profiles(struct req *rq)
{
	api_get_page(rq, "profiles", all_profiles, model_profiles_count);
}

void fleet_get_agent_settings(struct req *rq)
{
	static const char *const names[] = { NULL };
	PGresult *rows;
	char err[512];
	struct jsonw w;

	if (!api_known_query(rq, names, false))
		return;
	rows = model_agent_settings(rq->db, err, sizeof(err));
	if (api_failed(rq, rows, err))
		return;
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_key(&w, "settings");
	api_put_rows(&w, rows, NULL);
	jsonw_end(&w);
	api_ok_json(rq, &w, 200);
	PQclear(rows);
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

void fleet_post_agent_settings(struct req *rq)
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

	if (!api_admin_only(rq, true, "agent settings") || !api_body_fields(rq, fields, o))
		return;
	if (!api_str_field(rq, o[0], "app", &app) || !api_str_field(rq, o[GSET_COUNT + 1], "note", &note))
		return;
	for (size_t i = 0; i < GSET_COUNT; i++)
		given[i] = given_json(o[i + 1]);
	if ((rc = fleet_settings_check(app, given, note, &words, &s, err, sizeof(err))) < 0 ||
	    (rc = model_agent_settings_put(rq->db, &s, err, sizeof(err))) < 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		return;
	}
	fleet_get_agent_settings(rq);
}

void fleet_delete_agent_settings(struct req *rq)
{
	const char *app = rq->arg;
	char err[512];
	int rc;

	if (!api_admin_only(rq, true, "agent settings"))
		return;
	rc = model_agent_settings_delete(rq->db, app, err, sizeof(err));
	if (rc != 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		return;
	}
	fleet_get_agent_settings(rq);
}

/* A link to the host's page: /fleet/<host, one path segment>. */
static void host_link(struct req *rq, const char *host)
{
	struct buf b = BUF_INIT(4096);

	buf_puts(&b, "/fleet/");
	pages_url_encode_keep(&b, host, "-_.~");
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
		html_raw(rq, "</td>");
		pages_count_cells(rq, r, i, (const char *const[]){ "violations", "drops", "streams", "est_violations", NULL });
		html_raw(rq, "<td class=\"n\">");
		if (counted > 0 && counted >= sent)
			html_share(rq, (double)(counted - sent) / (double)counted);
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
					html_raw(rq, "</td>");
					pages_count_cells(rq, r, i, (const char *const[]){ "hosts", "processes", "units", NULL });
					html_raw(rq, "<td class=\"time\">");
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
					html_count(rq, json_object_get_int64(v));
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
			html_raw(rq, "<form method=\"post\" action=\"/fleet/settings/delete\" data-confirm=\"Remove the "
				     "settings pushed to ");
			html_text(rq, model_col(r, i, "app"));
			html_raw(rq, "? Its agents go back to the settings they were started with.\"><input type=\"hidden\" "
				     "name=\"app\" value=\"");
			html_text(rq, model_col(r, i, "app"));
			html_raw(rq, "\">");
			html_csrf_field(rq);
			html_raw(rq, "<button type=\"submit\" class=\"danger\">Remove</button></form>");
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

void fleet_post_fleet_settings(struct req *rq)
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

void fleet_post_fleet_settings_delete(struct req *rq)
{
	static const char *const keep[] = { "app", NULL };
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
	if (!pages_confirmed(rq, "Remove these agent settings?",
			     "The settings pushed to this app are removed; its agents go back to the settings they were "
			     "started with (or the \"*\" row's).",
			     "/fleet/settings/delete", "Remove", "/fleet", keep))
		return;
	if ((rc = model_agent_settings_delete(rq->db, app, err, sizeof(err))) < 0) {
		html_error(rq, req_status_of(rc), err);
		return;
	}
	html_redirect(rq, "/fleet");
}

void fleet_page_fleet(struct req *rq)
{
	char err[512];
	long offset = pages_offset(rq);
	struct host_filter f = { NULL, req_query(rq, "status"), SILENT_AFTER_DEFAULT };
	PGresult *r, *cnt, *all, *prof = NULL, *set = NULL, *samp = NULL;
	static const char *const states[] = { "live", "silent", "stopped" };

	if (f.status && strcmp(f.status, "live") && strcmp(f.status, "silent") && strcmp(f.status, "stopped"))
		f.status = NULL;
	r = model_hosts(rq->db, &f, PAGES_ROWS, offset, err, sizeof(err));
	cnt = r ? model_hosts_count(rq->db, &f, err, sizeof(err)) : NULL;
	all = cnt ? model_hosts_count(rq->db, &(struct host_filter){ NULL, "silent", SILENT_AFTER_DEFAULT }, err,
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
		html_raw(rq, "</td><td class=\"n\">");
		html_count(rq, model_coln(r, i, "processes_live"));
		if (model_coln(r, i, "processes_silent")) {
			html_raw(rq, " <span class=\"bad\">+");
			html_count(rq, model_coln(r, i, "processes_silent"));
			html_raw(rq, " silent</span>");
		}
		html_raw(rq, "</td><td class=\"spark\">");
		violation_bars(rq, model_col(r, i, "violations_by_hour"), 3, 16);
		html_raw(rq, " ");
		html_count(rq, model_coln(r, i, "violations_24h"));
		html_raw(rq, "</td>");
		pages_count_cells(rq, r, i, (const char *const[]){ "units_24h", "drops", "spool_backlog", "ship_errors", NULL });
		html_raw(rq, "</tr>");
	}
	html_raw(rq, "</tbody></table>");
	if (PQntuples(r) == 0)
		html_raw(rq, "<p class=\"hint\">No agent has reported yet. docs/fleet.md says how to roll agents out.</p>");
	pages_pager(rq, "/fleet", pages_keep_param(rq, NULL, "status", f.status), offset, PQntuples(r),
		    (long)model_coln(cnt, 0, "total"), false);
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

void fleet_page_host(struct req *rq)
{
	const char *host = rq->arg;
	char err[512];
	struct host_filter f = { host, NULL, SILENT_AFTER_DEFAULT };
	PGresult *h, *procs = NULL, *hours = NULL;
	struct buf series = BUF_INIT(1 << 16);

	h = model_hosts(rq->db, &f, 1, 0, err, sizeof(err));
	if (h && PQntuples(h) == 0) {
		PQclear(h);
		html_error(rq, 404, "No agent has reported from this host.");
		return;
	}
	if (h)
		procs = model_host_procs(rq->db, host, SILENT_AFTER_DEFAULT, 1000, err, sizeof(err));
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

		pages_url_encode(&b, host);
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
		html_raw(rq, "</td>");
		pages_count_cells(rq, hours, i, (const char *const[]){ "units", "violations", NULL });
		html_raw(rq, "</tr>");
	}
	html_raw(rq, "</tbody></table><h2>Guarded processes</h2><table class=\"procs\"><thead><tr><th class=\"n\">Pid"
		     "</th><th>App</th><th>Executable</th><th>Build</th><th>Mode</th><th>Collector</th><th>Status</th>"
		     "<th>Started</th>"
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
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(procs, i, "collector"));
		html_raw(rq, "</td><td><span class=\"status ");
		html_text(rq, model_col(procs, i, "status"));
		html_raw(rq, "\">");
		html_text(rq, model_col(procs, i, "status"));
		html_raw(rq, "</span></td><td class=\"time\">");
		html_time(rq, model_col(procs, i, "started_at"));
		html_raw(rq, "</td><td class=\"time\">");
		html_time(rq, model_col(procs, i, "last_seen"));
		html_raw(rq, "</td>");
		pages_count_cells(rq, procs, i,
				  (const char *const[]){ "units", "violations", "drops", "spool_backlog", "ship_errors", NULL });
		html_raw(rq, "</tr>");
	}
	html_raw(rq, "</tbody></table>");
	html_end(rq);
	PQclear(h);
	PQclear(procs);
	PQclear(hours);
}
