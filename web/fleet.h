/*
 * fleet: the hosts of the fleet, the profiles learnt by the fleet and the
 * settings pushed to the guard agents (docs/fleet.md): the Fleet and host
 * pages, their API, and the one check of pushed settings that the API's JSON
 * and the page's form both go through (limits: guardcore/settings.h).
 */
#ifndef SM_WEB_FLEET_H
#define SM_WEB_FLEET_H

#include "web/request.h"
#include <stdbool.h>
#include <stddef.h>

#include "guardcore/settings.h"
#include "web/model.h"

/* One pushed setting as a request gave it (a JSON value, a form field), before its check. */
struct fleet_given {
	enum { FLEET_UNSET, FLEET_BOOL, FLEET_NUMBER, FLEET_BAD } kind;
	bool b;
	double d;
	bool whole;   /* d was written as a whole number */
};

/* How a surface writes true, false and "as started", for the messages: "true", "false", "null" (the
 * API), "on", "off", "empty" (the form). */
struct fleet_words {
	const char *yes, *no, *unset;
};

/* The check of an app's settings (given[] in guard_settings order) into *s. Returns 0, or WEB_EINVAL
 * with err naming the field and the reason. */
int fleet_settings_check(const char *app, const struct fleet_given given[GSET_COUNT], const char *note,
			 const struct fleet_words *w, struct agent_settings *s, char *err, size_t errlen);

/* GET /api/v1/hosts */
void fleet_get_hosts(struct req *rq);
/* GET /api/v1/hosts/{path} */
void fleet_get_host(struct req *rq);
/* GET /api/v1/profiles */
void fleet_get_profiles(struct req *rq);
/* GET /api/v1/agent-settings */
void fleet_get_agent_settings(struct req *rq);
/* POST /api/v1/agent-settings */
void fleet_post_agent_settings(struct req *rq);
/* DELETE /api/v1/agent-settings/{path} */
void fleet_delete_agent_settings(struct req *rq);
/* POST /fleet/settings */
void fleet_post_fleet_settings(struct req *rq);
/* POST /fleet/settings/delete */
void fleet_post_fleet_settings_delete(struct req *rq);
/* GET /fleet */
void fleet_page_fleet(struct req *rq);
/* GET /fleet/{path} */
void fleet_page_host(struct req *rq);

#endif
