/*
 * settings: the settings an operator pushes to the guard agents of an app
 * without a redeploy (docs/fleet.md, "Settings pushed to the agents"). One
 * table holds each one's name (the JSON field, the form field and the column of
 * agent_settings), type, limits, default and meaning: the agent takes a pushed
 * value only within them and bounds its SM_GUARD_* variable by them
 * (config.c), sm-web's API and pages accept and show them from it, and a unit
 * test holds sql/011's CHECK constraints (the database's last line of defence)
 * to the same limits.
 */
#ifndef SM_GUARD_SETTINGS_H
#define SM_GUARD_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

enum guard_setting_type {
	GSET_BOOL,    /* true or false */
	GSET_NUMBER,  /* a number in [min, max] */
	GSET_WHOLE,   /* a whole number in [min, max] */
};

/* X(ID, name, type, min, max, default, environment variable, label, meaning); whole-number limits, so
 * that they are constant expressions (GSET_MIN_ID, GSET_MAX_ID, GSET_DEF_ID below) for static tables. */
#define GUARD_SETTINGS(X) \
	X(GUARD, guard, GSET_BOOL, 0, 1, 1, "", "Guarding", \
	  "false: no units, no samples, no violations") \
	X(K, k, GSET_NUMBER, 0, 1000, 4, "SM_GUARD_K", "k", \
	  "threshold of a unit type = mean + k standard deviations of its training durations (default: the " \
	  "profile's)") \
	X(SAMPLE_HZ, sample_hz, GSET_WHOLE, 1, 10000, 100, "SM_GUARD_SAMPLE_HZ", "Samples/s", \
	  "CPU samples per second of CPU time of a thread in a unit") \
	X(MIN_WAIT_US, min_wait_us, GSET_WHOLE, 1, 60000000, 1000, "SM_GUARD_MIN_WAIT_US", "Min wait (µs)", \
	  "a wrapped blocking call at least this long (microseconds) becomes a wait event") \
	X(REPORTS_PER_MIN, reports_per_min, GSET_WHOLE, 0, 100000, 6, "SM_GUARD_REPORTS_PER_MIN", "Reports/min", \
	  "violation streams shipped per unit type and process per minute, the worst first")

#define GSET_ID_(id, name, type, min, max, def, env, label, help) GSET_##id,
enum guard_setting_id { GUARD_SETTINGS(GSET_ID_) GSET_COUNT };
#undef GSET_ID_

#define GSET_LIMITS_(id, name, type, min, max, def, env, label, help) \
	GSET_MIN_##id = (min), GSET_MAX_##id = (max), GSET_DEF_##id = (def),
enum { GUARD_SETTINGS(GSET_LIMITS_) };
#undef GSET_LIMITS_

struct guard_setting {
	const char *name;             /* "sample_hz" */
	enum guard_setting_type type;
	double min, max;
	double def;                   /* the agent's own default (what "as started" is without SM_GUARD_*) */
	const char *env;              /* the SM_GUARD_* variable it overrides ("" for none) */
	const char *label;            /* for a page: "Samples/s" */
	const char *help;
};

/* The table, in GUARD_SETTINGS order (indexed by enum guard_setting_id). */
extern const struct guard_setting guard_settings[GSET_COUNT];

/* The setting named name, or NULL. */
const struct guard_setting *guard_setting_find(const char *name);
/* Whether v is a value of setting id: finite, in [min, max], whole for GSET_WHOLE (0 or 1 for GSET_BOOL).
 * The agent takes a pushed value only when it is. */
bool guard_setting_valid(enum guard_setting_id id, double v);
/*
 * The settings an answer of the server pushes (its "settings" object, len bytes of JSON): out[id] is
 * the pushed value of each, or as_started[id] when it is absent or not one of its values (GSET_GUARD:
 * 0 only when pushed false). Returns 0, or -1 when the answer has no settings (an older server; out
 * untouched).
 */
int guard_settings_read(const char *answer, size_t len, const double as_started[GSET_COUNT],
			double out[GSET_COUNT]);

#endif
