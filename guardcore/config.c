/* config: SM_GUARD_* settings, parsed and checked from one table (see config.h). */
#include "guardcore/config.h"
#include "guardcore/settings.h"
#include "common/util.h"

#include <fnmatch.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

enum var_kind { V_MODE, V_COLLECTOR, V_PATH, V_NAME, V_DOUBLE, V_INT, V_SIZE, V_LABELS, V_SIGNAL, V_TEXT };

struct var_def {
	struct guard_var pub;
	enum var_kind kind;
	size_t off;           /* field in struct guard_config */
	int64_t min, max;     /* V_INT (after scale), V_SIZE */
	int64_t scale;        /* V_INT: the variable's unit in the field's unit */
};

#define F(field) offsetof(struct guard_config, field)

static const struct var_def vars[] = {
	{ { "SM_GUARD_MODE", "auto",
	    "train: learn the performance profile; guard: check units against it; auto: guard "
	    "when a profile for this build exists, else train; off: load but do nothing" },
	  V_MODE, F(mode), 0, 0, 0 },
	{ { "SM_GUARD_PROFILE_DIR", "/var/lib/stackmine/profiles",
	    "directory of the performance profiles, one <build-id>.json per executable build" },
	  V_PATH, F(profile_dir), 0, 0, 0 },
	{ { "SM_GUARD_K", "(the profile's, 4)",
	    "threshold of a unit type = mean + K standard deviations of its training durations" },
	  V_DOUBLE, F(k), GSET_MIN_K, GSET_MAX_K, 0 },
	{ { "SM_GUARD_CUT", "0.5",
	    "training: units closer than this (PerfGuard's unit distance, 0 to 1) share a unit type" },
	  V_DOUBLE, F(cut), 0, 1, 0 },
	{ { "SM_GUARD_URL", "(none: spool only)", "ingest server, e.g. http://ingest:8080, or several separated by commas (tried in turn)" },
	  V_TEXT, F(url), 0, 0, 0 },
	{ { "SM_GUARD_TOKEN_FILE", "(none)", "file holding the ingest token (read once, at start)" },
	  V_PATH, F(token_file), 0, 0, 0 },
	{ { "SM_GUARD_SPOOL", "(none)",
	    "directory for streams the server could not take; sent again later" },
	  V_PATH, F(spool), 0, 0, 0 },
	{ { "SM_GUARD_SPOOL_MAX", "256M", "most bytes the spool may hold (k, M, G suffixes)" },
	  V_SIZE, F(spool_max), 1 << 20, INT64_MAX, 0 },
	{ { "SM_GUARD_APP", "(the executable's name)", "app of the streams" },
	  V_NAME, F(app), 0, 0, 0 },
	{ { "SM_GUARD_HOST", "(the host name)", "host of the streams" }, V_NAME, F(host), 0, 0, 0 },
	{ { "SM_GUARD_VERSION", "(none)", "version of the streams" },
	  V_NAME, F(version), 0, 0, 0 },
	{ { "SM_GUARD_LABELS", "(none)",
	    "labels of the streams: KEY=VALUE,KEY=VALUE (\\, and \\\\ escape a comma and a backslash); at most 46, "
	    "so that with the agent's own (up to 18) a stream has the wire's 64 at most" },
	  V_LABELS, F(labels), 0, 0, 0 },
	{ { "SM_GUARD_ONLY", "(all)",
	    "guard only executables whose name matches one of these comma-separated globs; "
	    "others load the agent and stay inert" },
	  V_TEXT, F(only), 0, 0, 0 },
	{ { "SM_GUARD_LOG", "(none)",
	    "file the agent appends its log lines to (it never writes to the program's stderr)" },
	  V_PATH, F(log), 0, 0, 0 },
	{ { "SM_GUARD_MIN_WAIT_US", "1000",
	    "a wrapped blocking call at least this long becomes a wait event" },
	  V_INT, F(min_wait_ns), GSET_MIN_MIN_WAIT_US * 1000LL, GSET_MAX_MIN_WAIT_US * 1000LL, 1000 },
	{ { "SM_GUARD_SAMPLE_HZ", "100",
	    "CPU samples per second of CPU time of a thread in a unit (0: none)" },
	  V_INT, F(sample_hz), 0, GSET_MAX_SAMPLE_HZ, 1 },   /* 0 here: no samples */
	{ { "SM_GUARD_VIOLATION_HZ", "1000",
	    "guarding: CPU samples per second of CPU time for the rest of a unit once it is over its threshold, "
	    "at most 250 per unit (0: SM_GUARD_SAMPLE_HZ); a slow unit's stream then shows where its time went" },
	  V_INT, F(violation_hz), 0, 10000, 1 },
	{ { "SM_GUARD_RING_KB", "256", "event ring per thread, in KiB" },
	  V_INT, F(ring_bytes), 16 << 10, 64 << 20, 1024 },
	{ { "SM_GUARD_WATCHDOG_MS", "100",
	    "how often units in flight are checked (catches units stuck in one call)" },
	  V_INT, F(watchdog_ns), 1000000, 60000000000LL, 1000000 },
	{ { "SM_GUARD_HANG_MS", "10000",
	    "a violating unit still in flight this long after its start is shipped as it stands" },
	  V_INT, F(hang_ns), 10000000, 3600000000000LL, 1000000 },
	{ { "SM_GUARD_MIN_THRESHOLD_US", "1000",
	    "guarding: no threshold is below this (0: mean + K sd exactly, as PerfGuard; a few tens of "
	    "microseconds over a short unit is a loaded machine's noise, not a performance problem)" },
	  V_INT, F(min_threshold_ns), 0, 3600000000000LL, 1000 },
	{ { "SM_GUARD_REPORTS_PER_MIN", "6",
	    "violation streams shipped per unit type and process per minute, the worst first (priority "
	    "sampling, each with its weight); the rest are counted" },
	  V_INT, F(reports_per_min), GSET_MIN_REPORTS_PER_MIN, GSET_MAX_REPORTS_PER_MIN, 1 },
	{ { "SM_GUARD_BASELINE_PER_MIN", "1",
	    "normal units shipped per unit type and process per minute as baseline streams (the "
	    "first to end after each interval opens), for comparison with the slow ones; 0: none" },
	  V_INT, F(baseline_per_min), 0, 600, 1 },
	{ { "SM_GUARD_ASYNC", "1",
	    "deferred requests in epoll/poll/select loops: a request answered in a later iteration than the "
	    "one that read it (a proxy's slow upstream) is timed against a threshold of its own, its "
	    "upstream's reply wait is an [async wait] event (docs/guard.md); 0: off" },
	  V_INT, F(async), 0, 1, 1 },
	{ { "SM_GUARD_SIGNAL", "SIGRTMAX-7",
	    "the agent's signal: CPU-time samples and the watchdog's requests for a stack (a number, "
	    "SIGRTMIN+N or SIGRTMAX-N); the program's own uses of it are untouched (docs/guard.md)" },
	  V_SIGNAL, F(signal), 0, 0, 0 },
	{ { "SM_GUARD_SAVE_S", "30", "training: how often the profile is written (and at exit)" },
	  V_INT, F(save_ns), 1000000000LL, 86400000000000LL, 1000000000LL },
	{ { "SM_GUARD_REPORT_S", "60",
	    "how often the process reports itself to the server (mode, counters; the Fleet page); 0: never" },
	  V_INT, F(report_ns), 0, 86400000000000LL, 1000000000LL },
	{ { "SM_GUARD_PROFILE_UPLOAD_S", "300",
	    "training: how often what the process learnt is uploaded to the server (and at exit), which "
	    "merges the fleet's profiles per build; 0: never" },
	  V_INT, F(upload_ns), 0, 86400000000000LL, 1000000000LL },
	{ { "SM_GUARD_PROFILE_FETCH_S", "300",
	    "guarding: how often the fleet's merged profile of this build is fetched from the server and, "
	    "when it has the same loops, guarded with at once; 0: never" },
	  V_INT, F(fetch_ns), 0, 86400000000000LL, 1000000000LL },
	{ { "SM_GUARD_COLLECTOR", "auto",
	    "guarding: where the agent's work beyond the measurement runs. host: in the host's collector "
	    "(sm-agent collect), the program starts no thread of the agent's; process: in the program, on "
	    "threads of the agent's own; auto: host when a collector runs, else process" },
	  V_COLLECTOR, F(collector), 0, 0, 0 },
	{ { "SM_GUARD_COLLECTOR_DIR", "/run/stackmine/guard",
	    "the collector's directory: one shared-memory file per guarded process (docs/guard.md)" },
	  V_PATH, F(collector_dir), 0, 0, 0 },
	{ { "SM_GUARD_MAX_FRAMES", "128", "frames kept per stack (the innermost)" },
	  V_INT, F(max_frames), 8, 512, 1 },
	{ { "SM_GUARD_MAX_EVENTS", "20000", "events per violation stream (the symptom thread's first)" },
	  V_INT, F(max_events), 1, 1000000, 1 },
};

#define NVARS (sizeof(vars) / sizeof(vars[0]))

const struct guard_var *guard_config_vars(size_t *n)
{
	static struct guard_var pub[NVARS];

	for (size_t i = 0; i < NVARS; i++)
		pub[i] = vars[i].pub;
	*n = NVARS;
	return pub;
}

const char *guard_mode_name(enum guard_mode m)
{
	switch (m) {
	case GUARD_MODE_AUTO: return "auto";
	case GUARD_MODE_TRAIN: return "train";
	case GUARD_MODE_GUARD: return "guard";
	case GUARD_MODE_OFF: return "off";
	}
	return "?";
}

void guard_config_defaults(struct guard_config *c)
{
	memset(c, 0, sizeof(*c));
	c->mode = GUARD_MODE_AUTO;
	snprintf(c->profile_dir, sizeof(c->profile_dir), "/var/lib/stackmine/profiles");
	c->k = -1;
	c->cut = 0.5;
	c->spool_max = (uint64_t)256 << 20;
	c->min_wait_ns = GSET_DEF_MIN_WAIT_US * 1000LL;
	c->sample_hz = GSET_DEF_SAMPLE_HZ;
	c->violation_hz = 1000;
	c->ring_bytes = 256 << 10;
	snprintf(c->collector_dir, sizeof(c->collector_dir), "/run/stackmine/guard");
	c->watchdog_ns = 100000000;
	c->hang_ns = 10000000000LL;
	c->reports_per_min = GSET_DEF_REPORTS_PER_MIN;
	c->baseline_per_min = 1;
	c->async = 1;
	c->min_threshold_ns = 1000000;
	c->signal = SIGRTMAX - 7;
	c->save_ns = 30000000000LL;
	c->report_ns = 60000000000LL;
	c->upload_ns = 300000000000LL;
	c->fetch_ns = 300000000000LL;
	c->max_frames = 128;
	c->max_events = 20000;
}

static int fail(char *err, size_t errlen, const char *name, const char *why, const char *val)
{
	snprintf(err, errlen, "%s: %s: '%.64s'", name, why, val);
	return -1;
}

static int parse_signal(const char *s, int *out)
{
	int64_t n;
	int base = 0, sign = 1;

	if (strncmp(s, "SIGRTMIN", 8) == 0) {
		base = SIGRTMIN;
		s += 8;
	} else if (strncmp(s, "SIGRTMAX", 8) == 0) {
		base = SIGRTMAX;
		s += 8;
	}
	if (base) {
		if (*s == '\0') {
			*out = base;
			return 0;
		}
		if (*s != '+' && *s != '-')
			return -1;
		sign = *s == '-' ? -1 : 1;
		s++;
	}
	if (util_parse_i64(s, 0, 64, &n) < 0)
		return -1;
	n = base + sign * n;
	/* real-time signals only: the classic ones all have meanings programs rely on */
	if (n < SIGRTMIN || n > SIGRTMAX)
		return -1;
	*out = (int)n;
	return 0;
}

/* KEY=VALUE,KEY=VALUE with \, and \\ escapes. */
static int parse_labels(struct guard_config *c, const char *s, char *err, size_t errlen)
{
	const char *name = "SM_GUARD_LABELS";
	char key[GUARD_NAME_MAX], val[GUARD_NAME_MAX];
	char *dst = key;
	size_t n = 0, cap = sizeof(key);
	int in_val = 0;

	c->nlabels = 0;
	if (!*s)
		return 0;
	for (const char *p = s;; p++) {
		char ch = *p;

		if (ch == '\\' && (p[1] == ',' || p[1] == '\\')) {
			ch = *++p;
		} else if (ch == '=' && !in_val) {
			dst[n] = '\0';
			dst = val;
			n = 0;
			cap = sizeof(val);
			in_val = 1;
			continue;
		} else if (ch == ',' || ch == '\0') {
			dst[n] = '\0';
			if (!in_val || !key[0])
				return fail(err, errlen, name, "each label is KEY=VALUE with a non-empty KEY", s);
			if (!val[0])
				return fail(err, errlen, name, "empty value for a label", key);
			if (!util_utf8_valid(key, strlen(key)) || !util_utf8_valid(val, strlen(val)))
				return fail(err, errlen, name, "labels must be UTF-8", s);
			if (c->nlabels == GUARD_MAX_USER_LABELS)
				return fail(err, errlen, name, "more than 46 labels", s);
			memcpy(c->labels[c->nlabels].key, key, sizeof(key));
			memcpy(c->labels[c->nlabels].value, val, sizeof(val));
			c->nlabels++;
			if (ch == '\0')
				return 0;
			dst = key;
			n = 0;
			cap = sizeof(key);
			in_val = 0;
			continue;
		}
		if (n + 1 >= cap)
			return fail(err, errlen, name, "a label key or value is longer than 255 bytes", s);
		dst[n++] = ch;
	}
}

static int set_text(char *field, size_t cap, const char *name, const char *v, int name_rules, char *err,
		    size_t errlen)
{
	size_t n = strlen(v);

	if (n >= cap)
		return fail(err, errlen, name, name_rules ? "longer than 255 bytes" : "too long", v);
	if (!util_utf8_valid(v, n))
		return fail(err, errlen, name, "not UTF-8", v);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20)
			return fail(err, errlen, name, "holds a control character", v);
	memcpy(field, v, n + 1);
	return 0;
}

int guard_config_load(struct guard_config *c, guard_getenv_fn *get, char *err, size_t errlen)
{
	for (size_t i = 0; i < NVARS; i++) {
		const struct var_def *d = &vars[i];
		const char *v = get(d->pub.name);
		char *field = (char *)c + d->off;
		int64_t n;
		double x;
		uint64_t sz;

		if (!v || !*v)
			continue;
		switch (d->kind) {
		case V_MODE:
			if (strcmp(v, "auto") == 0)
				c->mode = GUARD_MODE_AUTO;
			else if (strcmp(v, "train") == 0)
				c->mode = GUARD_MODE_TRAIN;
			else if (strcmp(v, "guard") == 0)
				c->mode = GUARD_MODE_GUARD;
			else if (strcmp(v, "off") == 0)
				c->mode = GUARD_MODE_OFF;
			else
				return fail(err, errlen, d->pub.name, "not one of auto, train, guard, off", v);
			break;
		case V_COLLECTOR:
			if (strcmp(v, "auto") == 0)
				c->collector = GUARD_COLLECTOR_AUTO;
			else if (strcmp(v, "host") == 0)
				c->collector = GUARD_COLLECTOR_HOST;
			else if (strcmp(v, "process") == 0)
				c->collector = GUARD_COLLECTOR_PROCESS;
			else
				return fail(err, errlen, d->pub.name, "not one of auto, host, process", v);
			break;
		case V_PATH:
			if (v[0] != '/')
				return fail(err, errlen, d->pub.name, "not an absolute path", v);
			if (set_text(field, GUARD_PATH_MAX, d->pub.name, v, 0, err, errlen) < 0)
				return -1;
			break;
		case V_TEXT:
			if (set_text(field, GUARD_PATH_MAX, d->pub.name, v, 0, err, errlen) < 0)
				return -1;
			break;
		case V_NAME:
			if (set_text(field, GUARD_NAME_MAX, d->pub.name, v, 1, err, errlen) < 0)
				return -1;
			break;
		case V_DOUBLE:
			if (util_parse_double(v, &x) < 0 || !(x >= (double)d->min && x <= (double)d->max)) {
				char why[96];

				snprintf(why, sizeof(why), "not a number from %lld to %lld", (long long)d->min,
					 (long long)d->max);
				return fail(err, errlen, d->pub.name, why, v);
			}
			*(double *)(void *)field = x;
			break;
		case V_INT:
			if (util_parse_i64(v, d->min / d->scale, d->max / d->scale, &n) < 0) {
				char why[96];

				snprintf(why, sizeof(why), "not a whole number from %lld to %lld",
					 (long long)(d->min / d->scale), (long long)(d->max / d->scale));
				return fail(err, errlen, d->pub.name, why, v);
			}
			n *= d->scale;
			if (d->off == F(sample_hz) || d->off == F(reports_per_min) || d->off == F(max_frames) ||
			    d->off == F(max_events) || d->off == F(baseline_per_min) || d->off == F(async))
				*(int *)(void *)field = (int)n;
			else if (d->off == F(ring_bytes))
				*(size_t *)(void *)field = (size_t)n;
			else
				*(int64_t *)(void *)field = n;
			break;
		case V_SIZE:
			if (util_parse_size(v, &sz) < 0 || sz < (uint64_t)d->min)
				return fail(err, errlen, d->pub.name, "not a size of at least 1M", v);
			*(uint64_t *)(void *)field = sz;
			break;
		case V_LABELS:
			if (parse_labels(c, v, err, errlen) < 0)
				return -1;
			break;
		case V_SIGNAL:
			if (parse_signal(v, &c->signal) < 0)
				return fail(err, errlen, d->pub.name,
					    "not a real-time signal (a number, SIGRTMIN+N or SIGRTMAX-N)", v);
			break;
		}
	}
	for (const char *u = c->url; *u;) {
		const char *comma = strchr(u, ',');

		while (*u == ' ')
			u++;
		if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
			return fail(err, errlen, "SM_GUARD_URL", "not an http:// or https:// URL (or a list of them)",
				    c->url);
		if (!comma)
			break;
		u = comma + 1;
	}
	return 0;
}

int guard_config_only_matches(const char *list, const char *name)
{
	char pat[GUARD_PATH_MAX];
	const char *p = list;

	if (!list || !*list)
		return 1;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n && n < sizeof(pat)) {
			memcpy(pat, p, n);
			pat[n] = '\0';
			if (fnmatch(pat, name, 0) == 0)
				return 1;
		}
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}
