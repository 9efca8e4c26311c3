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
/* GET /alerts */
void alerts_page_alerts(struct req *rq);

#endif
