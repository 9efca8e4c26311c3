/* settings: the table of the settings pushed to the guard agents, and their check (see settings.h). */
#include "guardcore/settings.h"

#include <math.h>
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
