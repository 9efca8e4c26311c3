/*
 * alerts: watching (docs/analysis.md, "Watching"): scheduled runs, alert rules and the alerts
 * they raised; the Alerts page and their API.
 */
#ifndef SM_WEB_ALERTS_H
#define SM_WEB_ALERTS_H

#include "web/request.h"

/* GET /api/v1/schedules */
void alerts_get_schedules(struct req *rq);
/* POST /api/v1/schedules */
void alerts_post_schedule(struct req *rq);
/* DELETE /api/v1/schedules/{id} */
void alerts_delete_schedule(struct req *rq);
/* GET /api/v1/alert-rules */
void alerts_get_alert_rules(struct req *rq);
/* POST /api/v1/alert-rules */
void alerts_post_alert_rule(struct req *rq);
/* DELETE /api/v1/alert-rules/{id} */
void alerts_delete_alert_rule(struct req *rq);
/* GET /api/v1/alerts */
void alerts_get_alerts(struct req *rq);
/* GET /alerts: the alerts, rules and schedules; for admins, the forms that add and delete them */
void alerts_page_alerts(struct req *rq);
/* POST /alerts/rules and /alerts/schedules: a new rule or schedule from the page's form (checked as the
 * API's body is); 303 to /alerts, or the page again (400) with the error naming the field */
void alerts_post_rule_new(struct req *rq);
void alerts_post_schedule_new(struct req *rq);
/* POST /alerts/rules/{id}/delete and /alerts/schedules/{id}/delete: asked first (pages_confirmed()) */
void alerts_post_rule_delete(struct req *rq);
void alerts_post_schedule_delete(struct req *rq);

#endif
