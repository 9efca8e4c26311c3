/* params: mining-run parameters, parsed, checked and written back (see params.h). */
#include "miner/params.h"
#include "common/arena.h"
#include "common/jsonw.h"
#include "common/util.h"

#include <json-c/json.h>
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
	*ns = ((int64_t)timegm(&tm) - off) * 1000000000 + frac;
	return 0;
}

static int str_field(json_object *o, const char *name, struct arena *a, const char **out,
		     char *err, size_t errlen)
{
	if (!json_object_is_type(o, json_type_string)) {
		snprintf(err, errlen, "%s: must be a string", name);
		return -1;
	}
	*out = arena_strndup(a, json_object_get_string(o), (size_t)json_object_get_string_len(o));
	if (!*out) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	if (memchr(*out, '\0', (size_t)json_object_get_string_len(o))) {
		snprintf(err, errlen, "%s: contains a NUL character", name);
		return -1;
	}
	return 0;
}

static int globs_field(json_object *o, const char *name, struct arena *a, const char *const **out,
		       size_t *n, char *err, size_t errlen)
{
	const char **v;
	size_t len;

	if (!json_object_is_type(o, json_type_array)) {
		snprintf(err, errlen, "%s: must be an array of strings", name);
		return -1;
	}
	len = json_object_array_length(o);
	if (len > PARAMS_MAX_GLOBS) {
		snprintf(err, errlen, "%s: %zu globs, at most %d allowed", name, len, PARAMS_MAX_GLOBS);
		return -1;
	}
	v = arena_calloc(a, len + 1, sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		char path[48];
		snprintf(path, sizeof(path), "%s[%zu]", name, i);
		if (str_field(json_object_array_get_idx(o, i), path, a, &v[i], err, errlen) < 0)
			return -1;
	}
	*out = v;
	*n = len;
	return 0;
}

static int num_field(json_object *o, const char *name, double *out, char *err, size_t errlen)
{
	if (!json_object_is_type(o, json_type_double) && !json_object_is_type(o, json_type_int)) {
		snprintf(err, errlen, "%s: must be a number", name);
		return -1;
	}
	*out = json_object_get_double(o);
	if (!isfinite(*out)) {
		snprintf(err, errlen, "%s: must be a finite number", name);
		return -1;
	}
	return 0;
}

static int time_field(json_object *o, const char *name, int64_t *out, char *err, size_t errlen)
{
	if (json_object_is_type(o, json_type_int)) {
		*out = json_object_get_int64(o);
		if (*out == INT64_MAX || *out == INT64_MIN) {
			snprintf(err, errlen, "%s: out of range", name);
			return -1;
		}
		return 0;
	}
	if (json_object_is_type(o, json_type_string) &&
	    params_parse_time(json_object_get_string(o), out) == 0)
		return 0;
	snprintf(err, errlen, "%s: must be an RFC 3339 time (2026-11-22T03:00:00Z) or ns since the epoch",
		 name);
	return -1;
}

static int parse_filter(json_object *f, struct arena *a, struct run_params *p, char *err,
			size_t errlen)
{
	if (!json_object_is_type(f, json_type_object)) {
		snprintf(err, errlen, "filter: must be an object");
		return -1;
	}
	json_object_object_foreach(f, key, val) {
		char name[64];

		snprintf(name, sizeof(name), "filter.%.40s", key);
		if (json_object_is_type(val, json_type_null))
			continue;
		if (strcmp(key, "version") == 0) {
			if (str_field(val, name, a, &p->filter.version, err, errlen) < 0)
				return -1;
		} else if (strcmp(key, "host") == 0) {
			if (str_field(val, name, a, &p->filter.host, err, errlen) < 0)
				return -1;
		} else if (strcmp(key, "since") == 0) {
			if (time_field(val, name, &p->filter.since_ns, err, errlen) < 0)
				return -1;
		} else if (strcmp(key, "until") == 0) {
			if (time_field(val, name, &p->filter.until_ns, err, errlen) < 0)
				return -1;
		} else if (strcmp(key, "labels") == 0) {
			struct buf b = BUF_INIT(64 * 1024);
			struct jsonw w;
			int n = 0;

			if (!json_object_is_type(val, json_type_object)) {
				snprintf(err, errlen, "filter.labels: must be an object of strings");
				return -1;
			}
			jsonw_init_compact(&w, &b);
			jsonw_object(&w);
			json_object_object_foreach(val, lk, lv) {
				if (!json_object_is_type(lv, json_type_string)) {
					snprintf(err, errlen, "filter.labels.%.100s: must be a string", lk);
					buf_release(&b);
					return -1;
				}
				n++;
				jsonw_key(&w, lk);
				jsonw_strn(&w, json_object_get_string(lv), (size_t)json_object_get_string_len(lv));
			}
			jsonw_end(&w);
			if (jsonw_finish(&w) < 0) {
				snprintf(err, errlen, "filter.labels: %s", jsonw_error(&w));
				buf_release(&b);
				return -1;
			}
			p->filter.labels_json = n ? arena_strndup(a, b.data, b.len) : NULL;
			buf_release(&b);
		} else {
			snprintf(err, errlen, "%s: unknown field (version, host, labels, since, until)", name);
			return -1;
		}
	}
	return 0;
}

int params_parse(const char *json, size_t len, struct arena *a, struct run_params *p, char *err,
		 size_t errlen)
{
	json_tokener *tok = json_tokener_new_ex(8);
	json_object *root;
	bool has_ns = false, has_frac = false, has_guide = false;
	int rc = -1;

	params_init(p);
	if (!tok) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	root = json_tokener_parse_ex(tok, json, (int)(len > INT32_MAX ? INT32_MAX : len));
	if (!root || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) < len) {
		snprintf(err, errlen, "body: not a JSON object (%s)",
			 json_tokener_error_desc(json_tokener_get_error(tok)));
		goto out;
	}
	if (!json_object_is_type(root, json_type_object)) {
		snprintf(err, errlen, "body: must be a JSON object");
		goto out;
	}
	json_object_object_foreach(root, key, val) {
		char name[48];
		double d;

		snprintf(name, sizeof(name), "%.40s", key);
		if (json_object_is_type(val, json_type_null))
			continue;
		if (strcmp(key, "app") == 0) {
			if (str_field(val, "app", a, &p->app, err, errlen) < 0)
				goto out;
		} else if (strcmp(key, "kind") == 0) {
			const char *k;
			if (str_field(val, "kind", a, &k, err, errlen) < 0)
				goto out;
			if (strcmp(k, "wait") == 0)
				p->kinds = RUN_KINDS_WAIT;
			else if (strcmp(k, "run") == 0)
				p->kinds = RUN_KINDS_RUN;
			else if (strcmp(k, "both") == 0)
				p->kinds = RUN_KINDS_BOTH;
			else {
				snprintf(err, errlen, "kind: must be wait, run or both");
				goto out;
			}
		} else if (strcmp(key, "aoi") == 0) {
			if (str_field(val, "aoi", a, &p->aoi, err, errlen) < 0)
				goto out;
		} else if (strcmp(key, "linkage") == 0) {
			if (str_field(val, "linkage", a, &p->linkage, err, errlen) < 0)
				goto out;
		} else if (strcmp(key, "include") == 0) {
			if (globs_field(val, "include", a, &p->include, &p->ninclude, err, errlen) < 0)
				goto out;
		} else if (strcmp(key, "exclude") == 0) {
			if (globs_field(val, "exclude", a, &p->exclude, &p->nexclude, err, errlen) < 0)
				goto out;
		} else if (strcmp(key, "threshold_ns") == 0) {
			if (!json_object_is_type(val, json_type_int) || json_object_get_int64(val) <= 0 ||
			    json_object_get_int64(val) == INT64_MAX) {
				snprintf(err, errlen, "threshold_ns: must be a positive integer");
				goto out;
			}
			p->threshold_ns = json_object_get_int64(val);
			has_ns = true;
		} else if (strcmp(key, "threshold_fraction") == 0) {
			if (num_field(val, "threshold_fraction", &d, err, errlen) < 0)
				goto out;
			p->threshold_fraction = d;
			has_frac = true;
		} else if (strcmp(key, "threshold_guideline") == 0) {
			json_object *sh, *dl;
			if (!json_object_is_type(val, json_type_object) || json_object_object_length(val) != 2 ||
			    !json_object_object_get_ex(val, "share", &sh) || !json_object_object_get_ex(val, "delay_ns", &dl)) {
				snprintf(err, errlen, "threshold_guideline: must be {\"share\": S, \"delay_ns\": D}");
				goto out;
			}
			if (num_field(sh, "threshold_guideline.share", &p->guideline.share, err, errlen) < 0)
				goto out;
			if (!json_object_is_type(dl, json_type_int) || json_object_get_int64(dl) <= 0) {
				snprintf(err, errlen, "threshold_guideline.delay_ns: must be a positive integer");
				goto out;
			}
			p->guideline.delay_ns = json_object_get_int64(dl);
			has_guide = true;
		} else if (strcmp(key, "cut") == 0) {
			if (num_field(val, "cut", &d, err, errlen) < 0)
				goto out;
			p->cut = d;
		} else if (strcmp(key, "baseline") == 0) {
			if (!json_object_is_type(val, json_type_boolean)) {
				snprintf(err, errlen, "baseline: must be true or false");
				goto out;
			}
			p->baseline = json_object_get_boolean(val);
		} else if (strcmp(key, "bootstrap") == 0) {
			if (!json_object_is_type(val, json_type_int) || json_object_get_int64(val) < 0 ||
			    json_object_get_int64(val) > PARAMS_MAX_BOOTSTRAP) {
				snprintf(err, errlen, "bootstrap: must be an integer from 0 to %d", PARAMS_MAX_BOOTSTRAP);
				goto out;
			}
			p->bootstrap = (int)json_object_get_int64(val);
		} else if (strcmp(key, "filter") == 0) {
			if (parse_filter(val, a, p, err, errlen) < 0)
				goto out;
		} else {
			snprintf(err, errlen, "%s: unknown field", name);
			goto out;
		}
	}
	if (has_ns + has_frac + has_guide > 1) {
		snprintf(err, errlen, "%s: give one of threshold_ns, threshold_fraction and threshold_guideline",
			 has_ns ? "threshold_ns" : "threshold_fraction");
		goto out;
	}
	rc = params_check(p, err, errlen);
out:
	json_object_put(root);
	json_tokener_free(tok);
	return rc;
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
