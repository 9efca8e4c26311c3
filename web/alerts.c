/* alerts: schedules, alert rules and alerts, page and API (see alerts.h). */
#include "web/alerts.h"
#include "common/arena.h"
#include "common/json.h"
#include "common/util.h"
#include "common/webhook.h"
#include "miner/params.h"
#include "web/api.h"
#include "web/html.h"
#include "web/model.h"
#include "web/pages.h"
#include "web/request.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A number field as given, by a JSON body or a form: absent (null, an empty field), a number, or
 * something else (refused with the field's range). */
struct given_num {
	enum { NUM_ABSENT, NUM_OK, NUM_BAD } kind;
	double v;
};

/* A schedule or an alert rule as sent, before the one check that both the API and the form use. */
struct schedule_in {
	const char *app, *kind;
	struct given_num every_s, window_s;
	const char *params;         /* JSON text of the other run parameters, or NULL */
	size_t params_len;
};

struct rule_in {
	const char *name, *app, *type, *webhook;
	struct given_num signature_id, limit_ns_per_hour, min_share;
};

/* A required number n in [min, max] (whole when whole): 0 with *out, or WEB_EINVAL with err naming the
 * field ("name: required<why>" when absent). */
static int num_check(const struct given_num *n, const char *name, double min, double max, bool whole,
		     const char *why, double *out, char *err, size_t errlen)
{
	if (n->kind == NUM_ABSENT) {
		snprintf(err, errlen, "%s: required%s", name, why);
		return WEB_EINVAL;
	}
	if (n->kind == NUM_BAD || !isfinite(n->v) || n->v < min || n->v > max || (whole && n->v != floor(n->v))) {
		snprintf(err, errlen, "%s: %s from %g to %g", name, whole ? "a whole number" : "a number", min, max);
		return WEB_EINVAL;
	}
	*out = n->v;
	return 0;
}

/* The one check of a schedule (the API's body and the page's form): 0 with p (app, kind, every_s,
 * window_s, params: model_schedule_put()'s, in the arena), or WEB_EINVAL / WEB_EFAIL with err. */
static int schedule_check(struct req *rq, const struct schedule_in *in, const char *p[5], char *err, size_t errlen)
{
	static const char *const own[] = { "app", "kind", "filter", NULL };
	static const char *const window[] = { "since", "until", NULL };
	struct json_val pv = { NULL, NULL }, pf[3], wf[2];
	const char *ptext = "{}";
	size_t plen = 2;
	char perr[256];
	struct run_params rp;
	struct buf full = BUF_INIT(in->params_len + 2048);
	double every, win;
	int rc = WEB_EINVAL;

	if (!in->app || !*in->app || strlen(in->app) > 255) {
		snprintf(err, errlen, "app: required, 1 to 255 bytes");
		goto out;
	}
	if (!in->kind || (strcmp(in->kind, "wait") && strcmp(in->kind, "run") && strcmp(in->kind, "both"))) {
		snprintf(err, errlen, "kind: required, wait, run or both");
		goto out;
	}
	if (num_check(&in->every_s, "every_s", 60, 604800, true, ", a whole number from 60 to 604800", &every, err,
		      errlen) < 0 ||
	    num_check(&in->window_s, "window_s", 60, 2592000, true, ", a whole number from 60 to 2592000", &win, err,
		      errlen) < 0)
		goto out;
	/* the other run parameters, checked as a run would be (app, kind and the window are the schedule's) */
	if (in->params) {
		if (json_check_body(in->params, in->params_len, &json_body_limits, perr, sizeof(perr)) < 0) {
			snprintf(err, errlen, "params: not JSON: %s", perr);
			goto out;
		}
		pv = json_root(in->params, in->params_len);
		if (json_val_type(pv) != JV_OBJECT) {
			snprintf(err, errlen, "params: an object of run parameters (POST /api/v1/runs)");
			goto out;
		}
		if (json_fields(pv, "params", own, false, pf, err, errlen) < 0)
			goto out;
		if (pf[0].p || pf[1].p) {
			snprintf(err, errlen, "params: app and kind are the schedule's own fields");
			goto out;
		}
		if (json_val_type(pf[2]) == JV_OBJECT &&
		    (json_fields(pf[2], "params.filter", window, false, wf, err, errlen) < 0 || wf[0].p || wf[1].p)) {
			snprintf(err, errlen, "params.filter: since and until come from window_s");
			goto out;
		}
		plen = json_val_text(pv, &ptext);
	}
	/* the params as a run would get them: {"app": ..., "kind": ..., <the params' members>} */
	buf_puts(&full, "{\"app\":");
	buf_put_json_str(&full, in->app, strlen(in->app));
	buf_puts(&full, ",\"kind\":");
	buf_put_json_str(&full, in->kind, strlen(in->kind));
	if (pv.p && json_count(pv) > 0) {
		buf_putc(&full, ',');
		buf_append(&full, ptext + 1, plen - 1);
	} else {
		buf_putc(&full, '}');
	}
	if (buf_error(&full) != BUF_OK) {
		snprintf(err, errlen, "out of memory");
		rc = WEB_EFAIL;
		goto out;
	}
	if (params_parse(full.data, full.len, rq->a, &rp, perr, sizeof(perr)) < 0) {
		snprintf(err, errlen, "params: %s", perr);
		goto out;
	}
	/* the text without app and kind, as stored */
	p[0] = in->app;
	p[1] = in->kind;
	p[2] = req_printf(rq, "%.0f", every);
	p[3] = req_printf(rq, "%.0f", win);
	p[4] = arena_strndup(rq->a, ptext, plen);
	rc = p[2] && p[3] && p[4] ? 0 : WEB_EFAIL;
	if (rc < 0)
		snprintf(err, errlen, "out of memory");
out:
	buf_release(&full);
	return rc;
}

/* The one check of an alert rule (the API's body and the page's form): 0 with p (name, app, type,
 * signature_id, limit_ns_per_hour, min_share, webhook: model_alert_rule_put()'s), or WEB_EINVAL (WEB_EFAIL: out
 * of memory) with err. */
static int rule_check(struct req *rq, const struct rule_in *in, const char *p[7], char *err, size_t errlen)
{
	double d;

	for (int i = 0; i < 7; i++)
		p[i] = NULL;
	if (!in->name || !*in->name || strlen(in->name) > 255) {
		snprintf(err, errlen, "name: required, 1 to 255 bytes");
		return WEB_EINVAL;
	}
	if (in->app && (!*in->app || strlen(in->app) > 255)) {
		snprintf(err, errlen, "app: 1 to 255 bytes, or null for every app");
		return WEB_EINVAL;
	}
	if (webhook_url_check(in->webhook, &rq->cfg->webhook_allow, err, errlen) < 0)
		return WEB_EINVAL;
	if (!in->type || (strcmp(in->type, "signature_cost") && strcmp(in->type, "new_cluster"))) {
		snprintf(err, errlen, "type: required, signature_cost or new_cluster");
		return WEB_EINVAL;
	}
	if (strcmp(in->type, "signature_cost") == 0) {
		if (num_check(&in->signature_id, "signature_id", 1, 9e15, true, " for signature_cost", &d, err, errlen) < 0)
			return WEB_EINVAL;
		if (!(p[3] = req_printf(rq, "%.0f", d)))
			goto oom;
		if (num_check(&in->limit_ns_per_hour, "limit_ns_per_hour", 1, 9e18, true, " for signature_cost", &d, err,
			      errlen) < 0)
			return WEB_EINVAL;
		if (!(p[4] = req_printf(rq, "%.0f", d)))
			goto oom;
	} else {
		if (num_check(&in->min_share, "min_share", 1e-9, 1, false,
			      " for new_cluster, a share of the run's cost (0 to 1]", &d, err, errlen) < 0)
			return WEB_EINVAL;
		if (!(p[5] = req_printf(rq, "%.17g", d)))
			goto oom;
	}
	p[0] = in->name;
	p[1] = in->app;
	p[2] = in->type;
	p[6] = in->webhook;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return WEB_EFAIL;
}

/* A JSON number field as given (whole: an integer's text, as json_int() reads it). */
static struct given_num json_num(struct json_val v, bool whole)
{
	struct given_num n = { NUM_ABSENT, 0 };
	int64_t i;

	if (!json_given(v))
		return n;
	n.kind = (whole && json_val_int(v, &i) != 0) || json_val_num(v, &n.v) < 0 ? NUM_BAD : NUM_OK;
	return n;
}

/* A form field trimmed of surrounding white space (in the arena); empty: NULL, a field not given. */
static const char *form_field(struct req *rq, const char *name)
{
	const char *v = req_form(rq, name), *e;

	if (!v)
		return NULL;
	while (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n')
		v++;
	e = v + strlen(v);
	while (e > v && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
		e--;
	return e > v ? arena_strndup(rq->a, v, (size_t)(e - v)) : NULL;
}

/* A form field as a number: empty is absent. */
static struct given_num form_num(struct req *rq, const char *name)
{
	struct given_num n = { NUM_ABSENT, 0 };
	const char *v = form_field(rq, name);

	if (v)
		n.kind = util_parse_double(v, &n.v) == 0 ? NUM_OK : NUM_BAD;
	return n;
}

void alerts_get_schedules(struct req *rq)
{
	static const char *const names[] = { NULL };
	char err[512];

	if (api_known_query(rq, names, false))
		api_list_json(rq, "schedules", model_schedules(rq->db, err, sizeof(err)), err);
}

void alerts_post_schedule(struct req *rq)
{
	static const char *const fields[] = { "app", "kind", "every_s", "window_s", "params", NULL };
	struct json_val o[5];
	struct schedule_in in = { 0 };
	const char *p[5];
	char err[512];
	int rc;

	if (!api_admin_only(rq, true, "schedules") || !api_body_fields(rq, fields, o))
		return;
	if (!api_str_field(rq, o[0], "app", &in.app) || !api_str_field(rq, o[1], "kind", &in.kind))
		return;
	in.every_s = json_num(o[2], true);
	in.window_s = json_num(o[3], true);
	if (json_given(o[4]))
		in.params_len = json_val_text(o[4], &in.params);
	if ((rc = schedule_check(rq, &in, p, err, sizeof(err))) < 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		return;
	}
	api_created(rq, "schedule_id", model_schedule_put(rq->db, p, err, sizeof(err)), err);
}

/* The DELETE of a schedule or an alert rule (what, in the 403: an admin's), by del: {"<key>": id, "deleted": true}. */
static void delete_one(struct req *rq, const char *what, int (*del)(PGconn *, const char *, char *, size_t),
		       const char *key)
{
	const char *id = rq->arg;
	char err[512];
	int rc;

	if (!api_admin_only(rq, true, what))
		return;
	rc = del(rq->db, id, err, sizeof(err));
	if (rc != 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		return;
	}
	api_deleted(rq, key, id);
}

void alerts_delete_schedule(struct req *rq)
{
	delete_one(rq, "schedules", model_schedule_delete, "schedule_id");
}

void alerts_get_alert_rules(struct req *rq)
{
	static const char *const names[] = { NULL };
	char err[512];

	if (api_known_query(rq, names, false))
		api_list_json(rq, "rules", model_alert_rules(rq->db, rq->role < AUTH_ADMIN, err, sizeof(err)), err);
}

void alerts_post_alert_rule(struct req *rq)
{
	static const char *const fields[] = { "name", "app", "type", "signature_id", "limit_ns_per_hour", "min_share",
					      "webhook", NULL };
	struct json_val o[7];
	struct rule_in in;
	const char *p[7];
	char err[512];
	int64_t id;
	int rc;

	if (!api_admin_only(rq, true, "alert rules") || !api_body_fields(rq, fields, o))
		return;
	if (!api_str_field(rq, o[0], "name", &in.name) || !api_str_field(rq, o[1], "app", &in.app) ||
	    !api_str_field(rq, o[2], "type", &in.type) || !api_str_field(rq, o[6], "webhook", &in.webhook))
		return;
	in.signature_id = json_num(o[3], true);
	in.limit_ns_per_hour = json_num(o[4], true);
	in.min_share = json_num(o[5], false);
	if ((rc = rule_check(rq, &in, p, err, sizeof(err))) < 0 ||
	    (rc = model_alert_rule_put(rq->db, p, &id, err, sizeof(err))) < 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		return;
	}
	api_respond_id(rq, "rule_id", id, 201);
}

void alerts_delete_alert_rule(struct req *rq)
{
	delete_one(rq, "alert rules", model_alert_rule_delete, "rule_id");
}

void alerts_get_alerts(struct req *rq)
{
	static const char *const names[] = { "limit", NULL };
	char err[512];
	int64_t lim;

	if (api_known_query(rq, names, false) && api_num_param(rq, "limit", 1, 1000, 100, &lim))
		api_list_json(rq, "alerts", model_alerts(rq->db, (long)lim, err, sizeof(err)), err);
}

/* A table of rows: the columns cols (NULL-terminated) under the headers heads; del: the path under
 * /alerts/ of each row's deletion form (its id in the first column), an admin's, or NULL. */
static void rows_table(struct req *rq, const char *id, PGresult *r, const char *const *cols, const char *const *heads,
		       const char *empty, const char *del, const char *what)
{
	int nc = 0;

	html_rawf(rq, "<table id=\"%s\"><thead><tr>", id);
	for (; cols[nc]; nc++)
		html_rawf(rq, "<th>%s</th>", heads[nc]);
	if (del)
		html_raw(rq, "<th></th>");
	html_raw(rq, "</tr></thead><tbody>");
	for (int i = 0; r && i < PQntuples(r); i++) {
		long long rid = (long long)model_coln(r, i, cols[0]);

		html_rawf(rq, "<tr data-id=\"%lld\">", rid);
		for (int c = 0; c < nc; c++) {
			html_raw(rq, "<td>");
			html_text(rq, model_col(r, i, cols[c]));
			html_raw(rq, "</td>");
		}
		if (del) {
			html_rawf(rq, "<td><form method=\"post\" action=\"/alerts/%s/%lld/delete\" data-confirm=\"Delete "
				      "%s %lld? This cannot be undone.\">", del, rid, what, rid);
			html_csrf_field(rq);
			html_raw(rq, "<button type=\"submit\" class=\"danger\">Delete</button></form></td>");
		}
		html_raw(rq, "</tr>");
	}
	if (!r || PQntuples(r) == 0)
		html_rawf(rq, "<tr><td colspan=\"%d\" class=\"empty\">%s</td></tr>", nc + (del ? 1 : 0), empty);
	html_raw(rq, "</tbody></table>");
}

/* The error of a form just refused (in its own form, by name), or nothing. */
static void form_error(struct req *rq, const char *form_err)
{
	html_raw(rq, "<p class=\"error\" role=\"alert\">");
	html_text(rq, form_err);
	html_raw(rq, "</p>");
}

/* The form of a new alert rule; form_err: why the last one was refused (its fields shown again). */
static void rule_form(struct req *rq, const char *form_err)
{
	static const char *const types[] = { "new_cluster", "signature_cost", NULL };
	static const char *const type_labels[] = { "new cluster", "signature cost" };
	bool again = form_err != NULL;

	html_raw(rq, "<h3>New alert rule</h3><form id=\"rule-form\" class=\"grid\" method=\"post\" "
		     "action=\"/alerts/rules\">");
	html_csrf_field(rq);
	if (again)
		form_error(rq, form_err);
	html_raw(rq, "<label>Name ");
	pages_form_input(rq, again, "name", "", " required maxlength=\"255\"");
	html_raw(rq, "<small>A rule of the same name is replaced.</small></label><label>App ");
	pages_form_input(rq, again, "app", "", " maxlength=\"255\"");
	html_raw(rq, "<small>Empty: every app.</small></label><label>Type ");
	pages_form_select(rq, again, "type", types, type_labels);
	html_raw(rq, "<small>New cluster: a cluster the app's previous run did not have takes a share of the run's cost; "
		     "signature cost: a known signature costs over a limit an hour.</small></label><label>Min share (new cluster) ");
	pages_form_input(rq, again, "min_share", "0.05", " inputmode=\"decimal\"");
	html_raw(rq, "<small>Of the run's total cost, more than 0 up to 1; default 0.05 (5 %).</small></label>"
		     "<label>Signature id (signature cost) ");
	pages_form_input(rq, again, "signature_id", "", " inputmode=\"numeric\"");
	html_raw(rq, "<small>From the Signatures page.</small></label><label>Limit, ns an hour (signature cost) ");
	pages_form_input(rq, again, "limit_ns_per_hour", "", " inputmode=\"numeric\"");
	html_raw(rq, "<small>1000000000 is 1 s of cost an hour.</small></label><label class=\"wide\">Webhook ");
	pages_form_input(rq, again, "webhook", "", " required type=\"url\" size=\"60\"");
	html_raw(rq, "<small>An https URL the alert is posted to as JSON.</small></label><div class=\"wide\">"
		     "<button type=\"submit\">Add rule</button></div></form>");
}

/* The form of a new schedule; form_err as for rule_form(). */
static void schedule_form(struct req *rq, const char *form_err)
{
	static const char *const kinds[] = { "both", "run", "wait", NULL };
	bool again = form_err != NULL;

	html_raw(rq, "<h3>New schedule</h3><form id=\"schedule-form\" class=\"grid\" method=\"post\" "
		     "action=\"/alerts/schedules\">");
	html_csrf_field(rq);
	if (again)
		form_error(rq, form_err);
	html_raw(rq, "<label>App ");
	pages_form_input(rq, again, "app", "", " required maxlength=\"255\"");
	html_raw(rq, "<small>A schedule of the same app and kind is replaced.</small></label><label>Kind ");
	pages_form_select(rq, again, "kind", kinds, NULL);
	html_raw(rq, "<small>Run: CPU samples; wait: off-CPU waits; both.</small></label><label>Every, s ");
	pages_form_input(rq, again, "every_s", "3600", " inputmode=\"numeric\"");
	html_raw(rq, "<small>How often a run starts: 60 s to 7 days; default 1 h.</small></label><label>Window, s ");
	pages_form_input(rq, again, "window_s", "3600", " inputmode=\"numeric\"");
	html_raw(rq, "<small>Each run mines the last this many seconds: 60 s to 30 days; default 1 h.</small></label>"
		     "<label class=\"wide\">Other run parameters (JSON) ");
	html_raw(rq, "<textarea name=\"params\" rows=\"2\" placeholder='{\"threshold_ns\": 5000000}'>");
	html_text(rq, again ? req_form(rq, "params") : NULL);
	html_raw(rq, "</textarea><small>As POST /api/v1/runs takes them, without app, kind and the time range; "
		     "empty: the defaults of a new run.</small></label><div class=\"wide\"><button type=\"submit\">"
		     "Add schedule</button></div></form>");
}

/* The Alerts page; which ("rule", "schedule") and form_err: the form just refused and why (400). */
static void alerts_page(struct req *rq, const char *which, const char *form_err)
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
	bool admin = rq->role >= AUTH_ADMIN;
	char err[512];
	PGresult *sch = model_schedules(rq->db, err, sizeof(err));
	PGresult *rules = sch ? model_alert_rules(rq->db, !admin, err, sizeof(err)) : NULL;
	PGresult *alerts = rules ? model_alerts(rq->db, 200, err, sizeof(err)) : NULL;

	if (!alerts) {
		PQclear(sch);
		PQclear(rules);
		html_error(rq, 500, err);
		return;
	}
	html_begin(rq, "Alerts");
	if (form_err)
		rq->status = 400;
	html_raw(rq, "<h1>Alerts</h1><p>Scheduled runs, the rules the workers apply to every run they finish, and the "
		     "alerts sent to the rules' webhooks (docs/analysis.md, \"Watching\").");
	html_raw(rq, admin ? "</p>" : " Admins manage schedules and rules.</p>");
	html_raw(rq, "<h2>Alerts</h2>");
	rows_table(rq, "alerts", alerts, acols, aheads, "No alerts.", NULL, NULL);
	html_raw(rq, "<h2>Rules</h2>");
	rows_table(rq, "rules", rules, rcols, rheads, "No rules.", admin ? "rules" : NULL, "alert rule");
	if (admin)
		rule_form(rq, which && strcmp(which, "rule") == 0 ? form_err : NULL);
	html_raw(rq, "<h2>Schedules</h2>");
	rows_table(rq, "schedules", sch, scols, sheads, "No scheduled runs.", admin ? "schedules" : NULL, "schedule");
	if (admin)
		schedule_form(rq, which && strcmp(which, "schedule") == 0 ? form_err : NULL);
	html_end(rq);
	PQclear(sch);
	PQclear(rules);
	PQclear(alerts);
}

void alerts_page_alerts(struct req *rq)
{
	alerts_page(rq, NULL, NULL);
}

/* A change to the schedules or rules from a page: a write (the cross-site request token checked) by an admin,
 * as the API's. */
static bool page_writer(struct req *rq, const char *what)
{
	if (!req_may_write(rq, false))
		return false;
	if (rq->role < AUTH_ADMIN) {
		html_error(rq, 403, req_printf(rq, "%s are an admin's.", what));
		return false;
	}
	return true;
}

void alerts_post_schedule_new(struct req *rq)
{
	struct schedule_in in = { 0 };
	const char *p[5];
	char err[512];
	PGresult *r;
	int rc;

	if (!page_writer(rq, "Schedules"))
		return;
	in.app = form_field(rq, "app");
	in.kind = form_field(rq, "kind");
	in.every_s = form_num(rq, "every_s");
	in.window_s = form_num(rq, "window_s");
	if ((in.params = form_field(rq, "params")))
		in.params_len = strlen(in.params);
	if ((rc = schedule_check(rq, &in, p, err, sizeof(err))) < 0) {
		if (rc == WEB_EINVAL)
			alerts_page(rq, "schedule", err);
		else
			html_error(rq, req_status_of(rc), err);
		return;
	}
	if (!(r = model_schedule_put(rq->db, p, err, sizeof(err)))) {
		html_error(rq, 500, err);
		return;
	}
	PQclear(r);
	html_redirect(rq, "/alerts");
}

void alerts_post_rule_new(struct req *rq)
{
	struct rule_in in;
	const char *p[7];
	char err[512];
	int64_t id;
	int rc;

	if (!page_writer(rq, "Alert rules"))
		return;
	in.name = form_field(rq, "name");
	in.app = form_field(rq, "app");
	in.type = form_field(rq, "type");
	in.webhook = form_field(rq, "webhook");
	in.signature_id = form_num(rq, "signature_id");
	in.limit_ns_per_hour = form_num(rq, "limit_ns_per_hour");
	in.min_share = form_num(rq, "min_share");
	if ((rc = rule_check(rq, &in, p, err, sizeof(err))) < 0 ||
	    (rc = model_alert_rule_put(rq->db, p, &id, err, sizeof(err))) < 0) {
		if (rc == WEB_EINVAL)
			alerts_page(rq, "rule", err);
		else
			html_error(rq, req_status_of(rc), err);
		return;
	}
	html_redirect(rq, "/alerts");
}

/* A deletion from the page: asked first (pages_confirmed()), then 303 back to the page. */
static void page_delete(struct req *rq, const char *what, const char *noun, const char *path,
			int (*del)(PGconn *, const char *, char *, size_t))
{
	char err[512];
	int rc;

	if (!page_writer(rq, what))
		return;
	if (!pages_confirmed(rq, req_printf(rq, "Delete %s %s?", noun, rq->arg),
			     req_printf(rq, "The %s is deleted. This cannot be undone.", noun),
			     req_printf(rq, "/alerts/%s/%s/delete", path, rq->arg), "Delete", "/alerts", NULL))
		return;
	if ((rc = del(rq->db, rq->arg, err, sizeof(err))) != 0) {
		html_error(rq, req_status_of(rc), err);
		return;
	}
	html_redirect(rq, "/alerts");
}

void alerts_post_schedule_delete(struct req *rq)
{
	page_delete(rq, "Schedules", "schedule", "schedules", model_schedule_delete);
}

void alerts_post_rule_delete(struct req *rq)
{
	page_delete(rq, "Alert rules", "alert rule", "rules", model_alert_rule_delete);
}
