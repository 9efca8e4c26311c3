/* fleet: the fleet's hosts, profiles and pushed settings, page and API (see fleet.h). */
#include "web/fleet.h"
#include "web/request.h"

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
