/*
 * params: the parameters of a mining run, as POST /api/v1/runs and
 * `sm-miner run` take them (docs/mining.md): parsing with a clear error that
 * names the field, defaults, and the canonical JSON stored with the run.
 */
#ifndef SM_PARAMS_H
#define SM_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

struct arena;

enum run_kinds { RUN_KINDS_WAIT = 1, RUN_KINDS_RUN = 2, RUN_KINDS_BOTH = 3 };

#define PARAMS_MAX_GLOBS 64
#define PARAMS_NO_TIME INT64_MIN
#define PARAMS_MAX_BOOTSTRAP 10000

struct run_params {
	const char *app;
	enum run_kinds kinds;         /* "wait", "run" or "both" (default) */
	const char *aoi;              /* "waitgraph" (default), "thread", "critical", "stream" */
	const char *const *include;   /* frame globs */
	size_t ninclude;
	const char *const *exclude;
	size_t nexclude;
	int64_t threshold_ns;         /* > 0, or -1 when given as a fraction */
	double threshold_fraction;    /* of the kind's total AOI cost; default 0.01 */
	/* the paper's guideline (docs/mining.md): C = share x delay_ns x the streams selected;
	 * used when share > 0 */
	struct {
		double share;
		int64_t delay_ns;
	} guideline;
	const char *linkage;          /* "average" (default), "single", "complete" */
	double cut;                   /* clustering distance cut, default 0.5 */
	bool baseline;                /* measure the clusters in the selection's baseline streams (default) */
	int bootstrap;                /* replicates of the excess cost's interval, default 200; 0: none */
	struct {
		const char *version;      /* NULL: any */
		const char *host;
		const char *labels_json;  /* canonical JSON object of required labels, NULL: any */
		int64_t since_ns;         /* received_at >= since (ns since the Unix epoch) */
		int64_t until_ns;         /* received_at < until */
	} filter;
};

/* Defaults for everything but app. */
void params_init(struct run_params *p);
/* Parse a JSON document; strings live in the arena. Returns 0, or -1 with
 * "field: reason" in err. Unknown fields are refused (a typo must not pass
 * silently as a run over the whole fleet). */
int params_parse(const char *json, size_t len, struct arena *a, struct run_params *p, char *err,
		 size_t errlen);
/* Check a filled-in struct (as the command line builds it). 0 or -1 with err. */
int params_check(const struct run_params *p, char *err, size_t errlen);
/* Canonical JSON with every field, defaults included. 0 or -1 (buffer full). */
int params_write_json(const struct run_params *p, struct buf *out);
/* RFC 3339 time ("2026-11-22T03:00:00Z", fractions and offsets allowed) to ns since the epoch. */
int params_parse_time(const char *s, int64_t *ns);

#endif
