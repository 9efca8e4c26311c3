/* alerts: schedules, alert rules and alerts, page and API (see alerts.h). */
#include "web/alerts.h"
#include "common/arena.h"
#include "common/json.h"
#include "common/webhook.h"
#include "miner/params.h"
#include "web/api.h"
#include "web/html.h"
#include "web/model.h"
#include "web/request.h"

#include <stdio.h>
#include <string.h>

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

	if (!api_admin_only(rq, true, "schedules") || !api_body_fields(rq, fields, o))
		return;
	if (!api_str_field(rq, o[0], "app", &app) || !api_str_field(rq, o[1], "kind", &kind))
		goto out;
	if (!app || !*app || strlen(app) > 255) {
		req_json_error(rq, 400, "app: required, 1 to 255 bytes");
		goto out;
	}
	if (!kind || (strcmp(kind, "wait") && strcmp(kind, "run") && strcmp(kind, "both"))) {
		req_json_error(rq, 400, "kind: required, wait, run or both");
		goto out;
	}
	if (!api_num_field(rq, o[2], "every_s", 60, 604800, true, NULL, &d, &has))
		goto out;
	if (!has) {
		req_json_error(rq, 400, "every_s: required, a whole number from 60 to 604800");
		goto out;
	}
	snprintf(every, sizeof(every), "%.0f", d);
	if (!api_num_field(rq, o[3], "window_s", 60, 2592000, true, NULL, &d, &has))
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
	api_created(rq, "schedule_id", model_schedule_put(rq->db, p, err, sizeof(err)), err);
out:
	buf_release(&full);
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
	const char *name, *app, *type, *hook;
	char sig[24], lim[24], share[40], err[512];
	const char *p[7] = { NULL, NULL, NULL, NULL, NULL, NULL, NULL };
	double d;
	bool has;
	int64_t id;
	int rc;

	if (!api_admin_only(rq, true, "alert rules") || !api_body_fields(rq, fields, o))
		return;
	if (!api_str_field(rq, o[0], "name", &name) || !api_str_field(rq, o[1], "app", &app) ||
	    !api_str_field(rq, o[2], "type", &type) || !api_str_field(rq, o[6], "webhook", &hook))
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
		if (!api_num_field(rq, o[3], "signature_id", 1, 9e15, true, NULL, &d, &has))
			goto out;
		if (!has) {
			req_json_error(rq, 400, "signature_id: required for signature_cost");
			goto out;
		}
		snprintf(sig, sizeof(sig), "%.0f", d);
		if (!api_num_field(rq, o[4], "limit_ns_per_hour", 1, 9e18, true, NULL, &d, &has))
			goto out;
		if (!has) {
			req_json_error(rq, 400, "limit_ns_per_hour: required for signature_cost");
			goto out;
		}
		snprintf(lim, sizeof(lim), "%.0f", d);
		p[3] = sig;
		p[4] = lim;
	} else {
		if (!api_num_field(rq, o[5], "min_share", 1e-9, 1, false, NULL, &d, &has))
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
		api_respond_id(rq, "rule_id", id, 201);
out:
	return;
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

void alerts_page_alerts(struct req *rq)
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
