/*
 * config: the guard agent's settings, read from SM_GUARD_* environment
 * variables so that the same agent works under `sm-guard run` and under a
 * systemd drop-in (Environment=LD_PRELOAD=... SM_GUARD_URL=...).
 *
 * One table describes every variable (name, default, meaning); the loader,
 * `sm-guard env` and docs/guard.md are written from it. Loading checks every
 * value and names the variable and the reason on the first bad one.
 */
#ifndef SM_GUARD_CONFIG_H
#define SM_GUARD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define GUARD_MAX_LABELS 48        /* the room a process's labels have (in its region too) */
#define GUARD_MAX_USER_LABELS 46   /* SM_GUARD_LABELS at most: the agent's own 18 fill a stream's 64 */
#define GUARD_PATH_MAX 1024
#define GUARD_NAME_MAX 256

enum guard_mode {
	GUARD_MODE_AUTO,   /* guard when a profile for this build exists, else train */
	GUARD_MODE_TRAIN,
	GUARD_MODE_GUARD,
	GUARD_MODE_OFF,    /* loaded but inert */
};

enum guard_collector {
	GUARD_COLLECTOR_AUTO,      /* the host's collector when one runs, else in the process */
	GUARD_COLLECTOR_HOST,
	GUARD_COLLECTOR_PROCESS,
};

struct guard_label {
	char key[GUARD_NAME_MAX];
	char value[GUARD_NAME_MAX];
};

struct guard_config {
	int64_t min_wait_ns;        /* first: every wrapped call reads it (guard_rt's hot line) */
	enum guard_mode mode;
	char profile_dir[GUARD_PATH_MAX];
	double k;                   /* < 0: the profile's */
	double cut;                 /* unit-type dendrogram cut */
	char url[GUARD_PATH_MAX];   /* "" : keep violations in the spool only */
	char token_file[GUARD_PATH_MAX];
	char spool[GUARD_PATH_MAX]; /* "" : undeliverable streams are counted and dropped */
	uint64_t spool_max;
	char app[GUARD_NAME_MAX];   /* "" : the executable's name */
	char host[GUARD_NAME_MAX];  /* "" : gethostname() */
	char version[GUARD_NAME_MAX];
	struct guard_label labels[GUARD_MAX_LABELS];
	int nlabels;
	char only[GUARD_PATH_MAX];  /* comma-separated globs on the executable's name; "" : all */
	char log[GUARD_PATH_MAX];   /* "" : no log */
	int sample_hz;              /* 0: no CPU samples */
	int violation_hz;           /* ... in a unit over its threshold (0: sample_hz) */
	size_t ring_bytes;          /* event ring per thread */
	int64_t watchdog_ns;
	int64_t hang_ns;            /* ship a unit still in flight this long after its violation */
	int64_t min_threshold_ns;
	int reports_per_min;        /* violation streams per unit type and process */
	int baseline_per_min;       /* normal units shipped as baseline streams, per unit type (0: none) */
	int async;                  /* deferred requests followed in epoll/poll/select loops (unit.c) */
	int signal;                 /* the sampling signal */
	int64_t save_ns;            /* training: write the profile this often */
	int64_t report_ns;          /* the process's report to the server (0: none) */
	int64_t upload_ns;          /* training: upload what was learnt to the server (0: never) */
	int64_t fetch_ns;           /* guarding: fetch the fleet's profile this often (0: never) */
	int max_frames;
	int max_events;             /* per stream */
	enum guard_collector collector;
	char collector_dir[GUARD_PATH_MAX];
};

/* Fills *c with the defaults of the table. */
void guard_config_defaults(struct guard_config *c);

/*
 * Reads every SM_GUARD_* variable through get (getenv, or a test's lookup) into
 * *c, which holds the defaults first. Returns 0, or -1 with "SM_GUARD_K: not a
 * number: 'x'" in err; *c is then partly filled and must not be used.
 */
typedef const char *guard_getenv_fn(const char *name);
int guard_config_load(struct guard_config *c, guard_getenv_fn *get, char *err, size_t errlen);

/* The table, for `sm-guard env` and the docs: name, default as text, meaning. */
struct guard_var {
	const char *name;
	const char *def;
	const char *help;
};
const struct guard_var *guard_config_vars(size_t *n);

/* "auto", "train", "guard", "off". */
const char *guard_mode_name(enum guard_mode m);

/* Comma-separated globs in list; true when one matches name (an empty list matches all). */
int guard_config_only_matches(const char *list, const char *name);

#endif
