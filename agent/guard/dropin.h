/*
 * dropin: the systemd drop-ins that guard a service (sm-guard enable, disable,
 * status). A drop-in UNIT.d/stackmine-guard.conf under /etc/systemd/system
 * loads the agent into the service (LD_PRELOAD), reads the host's agent
 * settings (/etc/stackmine/agent.conf) and names the app and labels of its
 * streams; removing it and restarting the service ends the guarding.
 */
#ifndef SM_DROPIN_H
#define SM_DROPIN_H

#include <stddef.h>

#define DROPIN_NAME "stackmine-guard.conf"

struct dropin_spec {
	const char *root;       /* "" or a directory that stands for / (tests, images) */
	const char *unit;       /* "nginx" or "nginx.service" */
	const char *lib;        /* libsmguard.so's path */
	const char *conf;       /* the agent settings file (EnvironmentFile=, optional: '-' prefix) */
	const char *app;        /* SM_GUARD_APP, or NULL: the executable's name */
	const char *labels;     /* SM_GUARD_LABELS (escaped as it wants them), or NULL */
	const char *group;      /* SupplementaryGroups= (reads the token file), or NULL */
};

/* The unit's full name (".service" added when it has no suffix) into out. Returns 0, or -1 when it is
 * not a unit name (err says why). */
int dropin_unit_name(const char *unit, char *out, size_t cap, char *err, size_t errlen);
/* Writes the drop-in atomically (its directory made as needed). Returns 0, or -1 with err. */
int dropin_write(const struct dropin_spec *s, char *path, size_t pathcap, char *err, size_t errlen);
/* Removes it (and the directory when that leaves it empty). Returns 0, 1 when there was none, or -1. */
int dropin_remove(const char *root, const char *unit, char *err, size_t errlen);

/* One guarded unit as its drop-in says. */
struct dropin_info {
	char unit[256];
	char app[256];
	char labels[1024];
};

/* The drop-ins under root, by unit name, into out[0..max); *n gets how many (at most max). Returns 0 or
 * -1 with err. */
int dropin_list(const char *root, struct dropin_info *out, size_t max, size_t *n, char *err, size_t errlen);

#endif
