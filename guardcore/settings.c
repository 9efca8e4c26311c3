/* settings: the table of the settings pushed to the guard agents, and their check (see settings.h). */
#include "guardcore/settings.h"

#include <json-c/json.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define GSET_ROW_(id, name, type, min, max, def, env, label, help) \
	{ #name, type, (min), (max), (def), env, label, help },
const struct guard_setting guard_settings[GSET_COUNT] = { GUARD_SETTINGS(GSET_ROW_) };
#undef GSET_ROW_

const struct guard_setting *guard_setting_find(const char *name)
{
	for (size_t i = 0; i < GSET_COUNT; i++)
		if (strcmp(guard_settings[i].name, name) == 0)
			return &guard_settings[i];
	return NULL;
}

bool guard_setting_valid(enum guard_setting_id id, double v)
{
	const struct guard_setting *s;

	if ((unsigned)id >= GSET_COUNT || !isfinite(v))
		return false;
	s = &guard_settings[id];
	if (v < s->min || v > s->max)
		return false;
	return s->type == GSET_NUMBER || v == floor(v);
}

int guard_settings_read(const char *answer, size_t len, const double as_started[GSET_COUNT],
			double out[GSET_COUNT])
{
	json_tokener *tok = json_tokener_new();
	json_object *o = tok && len <= INT32_MAX ? json_tokener_parse_ex(tok, answer ? answer : "", (int)len) : NULL;
	json_object *s, *v;

	json_tokener_free(tok);
	if (!o || !json_object_object_get_ex(o, "settings", &s) || !json_object_is_type(s, json_type_object)) {
		json_object_put(o);
		return -1;
	}
	for (size_t i = 0; i < GSET_COUNT; i++) {
		const struct guard_setting *g = &guard_settings[i];
		double d = as_started[i];

		if (json_object_object_get_ex(s, g->name, &v)) {
			if (g->type == GSET_BOOL && json_object_is_type(v, json_type_boolean))
				d = json_object_get_boolean(v) ? 1 : 0;
			else if (g->type != GSET_BOOL &&
				 (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)) &&
				 guard_setting_valid((enum guard_setting_id)i, json_object_get_double(v)))
				d = json_object_get_double(v);
		}
		out[i] = d;
	}
	json_object_put(o);
	return 0;
}
