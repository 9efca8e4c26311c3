/* params: mining-run parameters, parsed, checked and written back (see params.h). */
#include "miner/params.h"
#include "common/arena.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void params_init(struct run_params *p)
{
	memset(p, 0, sizeof(*p));
	p->kinds = RUN_KINDS_BOTH;
	p->aoi = "waitgraph";
	p->threshold_ns = -1;
	p->threshold_fraction = 0.01;
	p->linkage = "average";
	p->cut = 0.5;
	p->baseline = true;
	p->bootstrap = 200;
	p->filter.since_ns = PARAMS_NO_TIME;
	p->filter.until_ns = PARAMS_NO_TIME;
}

static bool one_of(const char *s, const char *const *words)
{
	for (; *words; words++)
		if (strcmp(s, *words) == 0)
			return true;
	return false;
}

static const char *const aoi_modes[] = { "waitgraph", "thread", "critical", "stream", NULL };
static const char *const linkages[] = { "average", "single", "complete", NULL };

int params_check(const struct run_params *p, char *err, size_t errlen)
{
	if (!p->app || !*p->app) {
		snprintf(err, errlen, "app: required");
		return -1;
	}
	if (strlen(p->app) > 255) {
		snprintf(err, errlen, "app: longer than 255 bytes");
		return -1;
	}
	if (!one_of(p->aoi, aoi_modes)) {
		snprintf(err, errlen, "aoi: must be waitgraph, thread, critical or stream");
		return -1;
	}
	if (!one_of(p->linkage, linkages)) {
		snprintf(err, errlen, "linkage: must be average, single or complete");
		return -1;
	}
	if (p->threshold_ns == 0 || p->threshold_ns < -1) {
		snprintf(err, errlen, "threshold_ns: must be a positive number of nanoseconds");
		return -1;
	}
	if (p->guideline.share != 0 || p->guideline.delay_ns != 0) {
		if (p->threshold_ns > 0) {
			snprintf(err, errlen, "threshold_guideline: give one of threshold_ns, threshold_fraction and "
				 "threshold_guideline");
			return -1;
		}
		if (!(p->guideline.share > 0 && p->guideline.share <= 1)) {
			snprintf(err, errlen, "threshold_guideline.share: must be more than 0 and at most 1");
			return -1;
		}
		if (p->guideline.delay_ns <= 0 || p->guideline.delay_ns > (int64_t)1e15) {
			snprintf(err, errlen, "threshold_guideline.delay_ns: must be a positive number of nanoseconds");
			return -1;
		}
	}
	if (p->threshold_ns < 0 && !(p->threshold_fraction > 0 && p->threshold_fraction <= 1)) {
		snprintf(err, errlen, "threshold_fraction: must be more than 0 and at most 1");
		return -1;
	}
	if (!(p->cut >= 0 && p->cut <= 1)) {
		snprintf(err, errlen, "cut: must be from 0 to 1");
		return -1;
	}
	if (p->filter.since_ns != PARAMS_NO_TIME && p->filter.until_ns != PARAMS_NO_TIME &&
	    p->filter.until_ns <= p->filter.since_ns) {
		snprintf(err, errlen, "filter.until: must be after filter.since");
		return -1;
	}
	if (p->bootstrap < 0 || p->bootstrap > PARAMS_MAX_BOOTSTRAP) {
		snprintf(err, errlen, "bootstrap: must be an integer from 0 to %d", PARAMS_MAX_BOOTSTRAP);
		return -1;
	}
	for (size_t i = 0; i < p->ninclude + p->nexclude; i++) {
		const char *g = i < p->ninclude ? p->include[i] : p->exclude[i - p->ninclude];
		if (!*g || strlen(g) > 1024) {
			snprintf(err, errlen, "%s[%zu]: a glob of 1 to 1024 bytes",
				 i < p->ninclude ? "include" : "exclude",
				 i < p->ninclude ? i : i - p->ninclude);
			return -1;
		}
	}
	return 0;
}

int params_parse_time(const char *s, int64_t *ns)
{
	struct tm tm;
	const char *p;
	int64_t frac = 0, scale = 1000000000, off = 0;

	memset(&tm, 0, sizeof(tm));
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -1;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9') {
			if (scale > 1) {
				scale /= 10;
				frac += (*p - '0') * scale;
			}
			p++;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1, hh, mm;
		if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2 || hh > 23 || mm > 59 || strlen(p) != 6)
			return -1;
		off = sign * ((int64_t)hh * 3600 + mm * 60);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	{
		/* int64 nanoseconds hold 1677 to 2262 only: later or earlier years are refused, not wrapped */
		int64_t t = (int64_t)timegm(&tm) - off;

		if (t <= INT64_MIN / 1000000000 || t >= INT64_MAX / 1000000000)
			return -1;
		*ns = t * 1000000000 + frac;
	}
	return 0;
}

static int str_field(struct json_val v, const char *name, struct arena *a, const char **out,
		     char *err, size_t errlen)
{
	size_t n;

	if (json_val_type(v) != JV_STRING) {
		snprintf(err, errlen, "%s: must be a string", name);
		return -1;
	}
	/* no NUL: json_check_body refused it */
	if (!(*out = json_val_str(v, a, &n))) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	return 0;
}

static int globs_field(struct json_val o, const char *name, struct arena *a, const char *const **out,
		       size_t *n, char *err, size_t errlen)
{
	struct json_reader r;
	const char **v;
	size_t len;

	if (json_val_type(o) != JV_ARRAY) {
		snprintf(err, errlen, "%s: must be an array of strings", name);
		return -1;
	}
	len = json_count(o);
	if (len > PARAMS_MAX_GLOBS) {
		snprintf(err, errlen, "%s: %zu globs, at most %d allowed", name, len, PARAMS_MAX_GLOBS);
		return -1;
	}
	v = arena_calloc(a, len + 1, sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	json_reader_at(&r, o);
	json_enter(&r);
	for (size_t i = 0; json_next_item(&r); i++, json_skip(&r)) {
		char path[48];
		snprintf(path, sizeof(path), "%s[%zu]", name, i);
		if (str_field(json_here(&r), path, a, &v[i], err, errlen) < 0)
			return -1;
	}
	*out = v;
	*n = len;
	return 0;
}

static int num_field(struct json_val o, const char *name, double *out, char *err, size_t errlen)
{
	if (json_val_type(o) != JV_NUMBER) {
		snprintf(err, errlen, "%s: must be a number", name);
		return -1;
	}
	if (json_val_num(o, out) < 0) {
		snprintf(err, errlen, "%s: must be a finite number", name);
		return -1;
	}
	return 0;
}

/* A positive integer below INT64_MAX, or -1 with err. */
static int pos_int_field(struct json_val o, const char *name, int64_t *out, char *err, size_t errlen)
{
	if (json_val_int(o, out) != 0 || *out <= 0 || *out == INT64_MAX) {
		snprintf(err, errlen, "%s: must be a positive integer", name);
		return -1;
	}
	return 0;
}

static int time_field(struct json_val o, const char *name, struct arena *a, int64_t *out, char *err,
		      size_t errlen)
{
	const char *s;
	size_t n;
	int rc = json_val_int(o, out);

	if (rc == 0) {
		if (*out == INT64_MAX || *out == INT64_MIN) {
			snprintf(err, errlen, "%s: out of range", name);
			return -1;
		}
		return 0;
	}
	if (rc < 0 && (s = json_val_str(o, a, &n)) && params_parse_time(s, out) == 0)
		return 0;
	snprintf(err, errlen, "%s: must be an RFC 3339 time (2026-11-22T03:00:00Z) or ns since the epoch",
		 name);
	return -1;
}

/*
 * The next member of the object under r whose value is not null: its index in names (names_n for
 * an unknown key, whose text is in key), or -1 at the end or (with err) for a key given twice.
 */
static int next_member(struct json_reader *r, const char *path, const char *const *names, size_t names_n,
		       uint32_t *seen, char *key, size_t keysize, char *err, size_t errlen)
{
	size_t klen;
	bool trunc;

	while (json_next_key(r, key, keysize, &klen, &trunc)) {
		size_t i;

		for (i = 0; !trunc && i < names_n && strcmp(names[i], key) != 0; i++)
			;
		if (i < names_n && (*seen & (1u << i))) {
			snprintf(err, errlen, "%s%.64s: duplicate key", path, key);
			return -2;
		}
		if (i < names_n)
			*seen |= 1u << i;
		if (json_peek(r) == JV_NULL) {
			json_skip(r);
			continue;
		}
		return (int)i;
	}
	return -1;
}

/* filter.labels: a flat object of strings, at most 64 (streams carry no more), no key twice. */
static int labels_field(struct json_val o, struct arena *a, struct run_params *p, char *err, size_t errlen)
{
	struct buf b = BUF_INIT(64 * 1024);
	struct jsonw w;
	struct json_reader r;
	const char *keys[65];
	char key[1024];
	size_t klen;
	bool trunc;
	int n = 0, rc = -1;

	if (json_val_type(o) != JV_OBJECT) {
		snprintf(err, errlen, "filter.labels: must be an object of strings");
		return -1;
	}
	jsonw_init_compact(&w, &b);
	jsonw_object(&w);
	json_reader_at(&r, o);
	json_enter(&r);
	while (json_next_key(&r, key, sizeof(key), &klen, &trunc)) {
		const char *v;
		size_t vlen;

		if (trunc || n == 64) {
			snprintf(err, errlen, "filter.labels: at most 64 labels, keys of at most %zu bytes",
				 sizeof(key) - 1);
			goto out;
		}
		for (int i = 0; i < n; i++)
			if (strcmp(keys[i], key) == 0) {
				snprintf(err, errlen, "filter.labels.%.100s: duplicate key", key);
				goto out;
			}
		if (!(keys[n] = arena_strndup(a, key, klen))) {
			snprintf(err, errlen, "filter.labels: out of memory");
			goto out;
		}
		n++;
		if (!(v = json_val_str(json_here(&r), a, &vlen))) {
			snprintf(err, errlen, "filter.labels.%.100s: must be a string", key);
			goto out;
		}
		json_skip(&r);
		jsonw_key(&w, key);
		jsonw_strn(&w, v, vlen);
	}
	jsonw_end(&w);
	if (jsonw_finish(&w) < 0) {
		snprintf(err, errlen, "filter.labels: %s", jsonw_error(&w));
		goto out;
	}
	p->filter.labels_json = n ? arena_strndup(a, b.data, b.len) : NULL;
	rc = 0;
out:
	buf_release(&b);
	return rc;
}

static int parse_filter(struct json_val f, struct arena *a, struct run_params *p, char *err,
			size_t errlen)
{
	static const char *const names[] = { "version", "host", "since", "until", "labels" };
	struct json_reader r;
	uint32_t seen = 0;
	char key[64], name[64];
	int i;

	if (json_val_type(f) != JV_OBJECT) {
		snprintf(err, errlen, "filter: must be an object");
		return -1;
	}
	json_reader_at(&r, f);
	json_enter(&r);
	while ((i = next_member(&r, "filter.", names, 5, &seen, key, sizeof(key), err, errlen)) >= 0) {
		struct json_val v = json_here(&r);
		int rc = 0;

		snprintf(name, sizeof(name), "filter.%.40s", key);
		switch (i) {
		case 0: rc = str_field(v, name, a, &p->filter.version, err, errlen); break;
		case 1: rc = str_field(v, name, a, &p->filter.host, err, errlen); break;
		case 2: rc = time_field(v, name, a, &p->filter.since_ns, err, errlen); break;
		case 3: rc = time_field(v, name, a, &p->filter.until_ns, err, errlen); break;
		case 4: rc = labels_field(v, a, p, err, errlen); break;
		default:
			snprintf(err, errlen, "%s: unknown field (version, host, labels, since, until)", name);
			return -1;
		}
		if (rc < 0)
			return -1;
		json_skip(&r);
	}
	return i == -1 ? 0 : -1;
}

/* One member of the top object (index i of the names in params_parse) into p. */
static int parse_member(int i, struct json_val v, struct arena *a, struct run_params *p, char *err,
			size_t errlen)
{
	static const char *const guide[] = { "share", "delay_ns", NULL };
	struct json_val g[2];
	const char *k;

	switch (i) {
	case 0: return str_field(v, "app", a, &p->app, err, errlen);
	case 1:
		if (str_field(v, "kind", a, &k, err, errlen) < 0)
			return -1;
		if (strcmp(k, "wait") == 0)
			p->kinds = RUN_KINDS_WAIT;
		else if (strcmp(k, "run") == 0)
			p->kinds = RUN_KINDS_RUN;
		else if (strcmp(k, "both") == 0)
			p->kinds = RUN_KINDS_BOTH;
		else {
			snprintf(err, errlen, "kind: must be wait, run or both");
			return -1;
		}
		return 0;
	case 2: return str_field(v, "aoi", a, &p->aoi, err, errlen);
	case 3: return str_field(v, "linkage", a, &p->linkage, err, errlen);
	case 4: return globs_field(v, "include", a, &p->include, &p->ninclude, err, errlen);
	case 5: return globs_field(v, "exclude", a, &p->exclude, &p->nexclude, err, errlen);
	case 6: return pos_int_field(v, "threshold_ns", &p->threshold_ns, err, errlen);
	case 7: return num_field(v, "threshold_fraction", &p->threshold_fraction, err, errlen);
	case 8:
		if (json_val_type(v) != JV_OBJECT || json_count(v) != 2 ||
		    json_fields(v, "threshold_guideline", guide, true, g, err, errlen) < 0 || !g[0].p || !g[1].p) {
			snprintf(err, errlen, "threshold_guideline: must be {\"share\": S, \"delay_ns\": D}");
			return -1;
		}
		if (num_field(g[0], "threshold_guideline.share", &p->guideline.share, err, errlen) < 0)
			return -1;
		if (json_val_int(g[1], &p->guideline.delay_ns) != 0 || p->guideline.delay_ns <= 0) {
			snprintf(err, errlen, "threshold_guideline.delay_ns: must be a positive integer");
			return -1;
		}
		return 0;
	case 9: return num_field(v, "cut", &p->cut, err, errlen);
	case 10:
		if (json_val_type(v) != JV_TRUE && json_val_type(v) != JV_FALSE) {
			snprintf(err, errlen, "baseline: must be true or false");
			return -1;
		}
		p->baseline = json_val_type(v) == JV_TRUE;
		return 0;
	case 11: {
		int64_t b;
		if (json_val_int(v, &b) != 0 || b < 0 || b > PARAMS_MAX_BOOTSTRAP) {
			snprintf(err, errlen, "bootstrap: must be an integer from 0 to %d", PARAMS_MAX_BOOTSTRAP);
			return -1;
		}
		p->bootstrap = (int)b;
		return 0;
	}
	default: return parse_filter(v, a, p, err, errlen);
	}
}

int params_parse(const char *json, size_t len, struct arena *a, struct run_params *p, char *err,
		 size_t errlen)
{
	enum { F_NS = 6, F_FRAC = 7, F_GUIDE = 8, F_N = 13 };
	static const char *const names[F_N] = { "app", "kind", "aoi", "linkage", "include", "exclude",
						"threshold_ns", "threshold_fraction", "threshold_guideline", "cut",
						"baseline", "bootstrap", "filter" };
	struct json_reader r;
	uint32_t seen = 0, given = 0;
	char msg[256], key[64];
	int i;

	params_init(p);
	/* read in place: no tree of the body, whatever it holds */
	if (json_check_body(json, len, &json_body_limits, msg, sizeof(msg)) < 0) {
		snprintf(err, errlen, "%s", msg);
		return -1;
	}
	if (json_val_type(json_root(json, len)) != JV_OBJECT) {
		snprintf(err, errlen, "body: must be a JSON object");
		return -1;
	}
	json_reader_at(&r, json_root(json, len));
	json_enter(&r);
	while ((i = next_member(&r, "", names, F_N, &seen, key, sizeof(key), err, errlen)) >= 0) {
		if (i == F_N) {
			snprintf(err, errlen, "%.40s: unknown field", key);
			return -1;
		}
		if (parse_member(i, json_here(&r), a, p, err, errlen) < 0)
			return -1;
		given |= 1u << i;
		json_skip(&r);
	}
	if (i != -1)
		return -1;
	if (((given >> F_NS) & 1) + ((given >> F_FRAC) & 1) + ((given >> F_GUIDE) & 1) > 1) {
		snprintf(err, errlen, "%s: give one of threshold_ns, threshold_fraction and threshold_guideline",
			 (given >> F_NS) & 1 ? "threshold_ns" : "threshold_fraction");
		return -1;
	}
	return params_check(p, err, errlen);
}

static void put_time(struct jsonw *w, const char *key, int64_t ns)
{
	char tmp[64], text[96];
	time_t sec = (time_t)(ns / 1000000000);
	int64_t frac = ns % 1000000000;
	struct tm tm;

	if (frac < 0) {
		frac += 1000000000;
		sec--;
	}
	gmtime_r(&sec, &tm);
	strftime(tmp, sizeof(tmp), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(text, sizeof(text), "%s.%09lldZ", tmp, (long long)frac);
	jsonw_kstr(w, key, text);
}

static void put_globs(struct jsonw *w, const char *key, const char *const *g, size_t n)
{
	jsonw_karray(w, key);
	for (size_t i = 0; i < n; i++)
		jsonw_str(w, g[i]);
	jsonw_end(w);
}

int params_write_json(const struct run_params *p, struct buf *b)
{
	static const char *const kinds[] = { "", "wait", "run", "both" };
	struct jsonw w;

	jsonw_init_compact(&w, b);
	jsonw_object(&w);
	jsonw_kstr(&w, "app", p->app);
	jsonw_kstr(&w, "kind", kinds[p->kinds]);
	jsonw_kstr(&w, "aoi", p->aoi);
	put_globs(&w, "include", p->include, p->ninclude);
	put_globs(&w, "exclude", p->exclude, p->nexclude);
	if (p->threshold_ns > 0) {
		jsonw_ki64(&w, "threshold_ns", p->threshold_ns);
	} else if (p->guideline.share > 0) {
		jsonw_kobject(&w, "threshold_guideline");
		jsonw_kdouble(&w, "share", p->guideline.share);
		jsonw_ki64(&w, "delay_ns", p->guideline.delay_ns);
		jsonw_end(&w);
	} else {
		jsonw_kdouble(&w, "threshold_fraction", p->threshold_fraction);
	}
	jsonw_kstr(&w, "linkage", p->linkage);
	jsonw_kdouble(&w, "cut", p->cut);
	jsonw_kbool(&w, "baseline", p->baseline);
	jsonw_ki64(&w, "bootstrap", p->bootstrap);
	jsonw_kobject(&w, "filter");
	if (p->filter.version)
		jsonw_kstr(&w, "version", p->filter.version);
	if (p->filter.host)
		jsonw_kstr(&w, "host", p->filter.host);
	if (p->filter.labels_json) {
		/* written by params_parse() above */
		jsonw_key(&w, "labels");
		jsonw_raw(&w, p->filter.labels_json, strlen(p->filter.labels_json));
	}
	if (p->filter.since_ns != PARAMS_NO_TIME)
		put_time(&w, "since", p->filter.since_ns);
	if (p->filter.until_ns != PARAMS_NO_TIME)
		put_time(&w, "until", p->filter.until_ns);
	jsonw_end(&w);
	jsonw_end(&w);
	return jsonw_finish(&w);
}
