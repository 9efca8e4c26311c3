/* profiles: uploads of training profiles and their merge per build (see profiles.h). */
#include "ingest/profiles.h"
#include "guardcore/profile.h"
#include "common/db.h"
#include "common/fmt.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "common/vec.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * What one process can have learnt (docs/fleet.md, "Bounds and a robust merge"): at most a unit per
 * PROFILES_NS_PER_UNIT of its life, no unit longer than its life, at most PROFILES_MAX_THREADS
 * threads (Linux's pid_max limit). Its life is measured by this server's clock from started_ns,
 * plus PROFILES_CLOCK_SLACK_NS for hosts whose clock is ahead.
 */
#define PROFILES_NS_PER_UNIT 10
#define PROFILES_MAX_THREADS 4194304
#define PROFILES_CLOCK_SLACK_NS 60e9
/* The merge holds back a host off the others in a loop learnt by this many hosts at least... */
#define PROFILES_ROBUST_MIN 3
/* ...when its threshold is more than this factor from the hosts' median, and... */
#define PROFILES_OFF_FACTOR 4.0
/* ...more than this many scaled MADs (1.4826 MAD: one standard deviation of a normal), on a log scale. */
#define PROFILES_OFF_MADS 3.0

int profiles_build_id_ok(const char *s)
{
	size_t n = strlen(s), i = strncmp(s, "path-", 5) == 0 ? 5 : 0;

	if (n == i || n > 128)
		return 0;
	for (; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int get_int(struct json_val v, const char *name, int64_t min, int64_t max, int64_t *out, char *err,
		   size_t errlen)
{
	if (json_val_int(v, out) != 0 || *out < min || *out > max) {
		snprintf(err, errlen, "%s: required, a whole number from %lld to %lld", name, (long long)min,
			 (long long)max);
		return -1;
	}
	return 0;
}

/*
 * The profile itself is read by the guard's loader, which builds a json-c tree of it: about 700
 * bytes per object or array (an empty object 784). A real profile has one per 33 bytes or more (a
 * context with a short path, written without spaces: two in 66 bytes), so the budget allows one per
 * 24; and an upload is at most 2 MiB (tens of thousands of contexts: real ones are tens of KB), so
 * that the tree of the worst one accepted stays under 70 MB.
 */
static const struct json_limits upload_limits = { 32, 2, 24 };
#define UPLOAD_MAX ((size_t)2 << 20)

int profiles_parse(const char *body, size_t len, struct profile_upload *u, char *err, size_t errlen)
{
	enum { F_V, F_HOST, F_PID, F_STARTED, F_PROFILE, F_N };
	static const char *const names[F_N + 1] = { "v", "host", "pid", "started_ns", "profile", NULL };
	struct json_val f[F_N];
	struct json_reader r;
	struct gprofile *p = NULL;
	const char *ptext;
	size_t plen;
	char msg[256];
	int64_t v;
	int rc = -1;

	memset(u, 0, sizeof(*u));
	u->text.max = (size_t)64 << 20;
	/* (the check reads in place, whatever the size: only the loader's tree needs the size bounded) */
	if (json_check_body(body, len, &upload_limits, msg, sizeof(msg)) < 0) {
		snprintf(err, errlen, "not JSON: %s", msg);
		return -1;
	}
	if (len > UPLOAD_MAX) {
		snprintf(err, errlen, "body: a profile upload is at most %zu bytes, this one %zu", UPLOAD_MAX, len);
		return -1;
	}
	if (json_val_type(json_root(body, len)) != JV_OBJECT) {
		snprintf(err, errlen, "the upload must be one JSON object");
		return -1;
	}
	/* unknown fields are skipped unread, as in reports (newer agents) */
	if (json_fields(json_root(body, len), "", names, false, f, err, errlen) < 0)
		return -1;
	if (json_val_int(f[F_V], &v) != 0 || v != 1) {
		snprintf(err, errlen, "v: must be 1");
		return -1;
	}
	json_reader_at(&r, f[F_HOST]);
	plen = json_val_type(f[F_HOST]) == JV_STRING ? json_string_into(&r, u->host, sizeof(u->host)) : 0;
	if (plen < 1 || plen >= sizeof(u->host)) {
		snprintf(err, errlen, "host: required, 1 to %zu bytes, no NUL", sizeof(u->host) - 1);
		return -1;
	}
	if (get_int(f[F_PID], "pid", 1, INT32_MAX, &u->pid, err, errlen) < 0 ||
	    get_int(f[F_STARTED], "started_ns", 0, INT64_MAX / 2, &u->started_ns, err, errlen) < 0)
		return -1;
	if (json_val_type(f[F_PROFILE]) != JV_OBJECT) {
		snprintf(err, errlen, "profile: required, the profile object (docs/guard.md)");
		return -1;
	}
	plen = json_val_text(f[F_PROFILE], &ptext);
	if (!(p = gp_new())) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (gp_load_text(p, ptext, plen) < 0) {
		snprintf(err, errlen, "profile: %s", gp_error(p));
		goto out;
	}
	if (!profiles_build_id_ok(p->build_id)) {
		snprintf(err, errlen, "profile.build_id: lower-case hex (or path- and hex), 1 to 128 characters");
		goto out;
	}
	if (p->units == 0) {
		snprintf(err, errlen, "profile: no units learnt");
		goto out;
	}
	snprintf(u->build_id, sizeof(u->build_id), "%s", p->build_id);
	snprintf(u->exe, sizeof(u->exe), "%s", p->exe ? p->exe : "");
	u->units = p->units;
	if (gp_write(p, &u->text) < 0 || buf_error(&u->text) != BUF_OK) {
		snprintf(err, errlen, "profile: too large to keep");
		goto out;
	}
	rc = 0;
out:
	gp_free(p);
	return rc;
}

int profiles_store(PGconn *db, const struct profile_upload *u, char *err, size_t errlen)
{
	char pid[24], started[24], units[24];
	const char *params[7] = { u->build_id, u->host, pid, started, u->exe, units, buf_cstr((struct buf *)&u->text) };

	snprintf(pid, sizeof(pid), "%lld", (long long)u->pid);
	snprintf(started, sizeof(started), "%lld", (long long)u->started_ns);
	snprintf(units, sizeof(units), "%llu", (unsigned long long)u->units);
	return db_command(db,
		"WITH up AS (INSERT INTO profile_uploads (build_id, host, pid, started_at, exe, units, profile, uploaded_at)"
		" VALUES ($1, $2, $3::integer, to_timestamp($4::bigint / 1e9), $5, $6::bigint, $7, clock_timestamp())"
		" ON CONFLICT (build_id, host, pid, started_at) DO UPDATE SET exe = EXCLUDED.exe, units = EXCLUDED.units,"
		" profile = EXCLUDED.profile, uploaded_at = clock_timestamp() RETURNING build_id)"
		" UPDATE profiles_merged m SET stale = true FROM up WHERE m.build_id = up.build_id",
		7, params, "storing the profile", err, errlen);
}

/* ---- what one process can have learnt ---- */

/* check one statistic of the upload against the process's life; path names it in the error */
static int stats_ok(const struct gp_stats *st, double life_ns, const char *path, char *err, size_t errlen)
{
	double maxn = life_ns / PROFILES_NS_PER_UNIT;

	if ((double)st->n > maxn) {
		snprintf(err, errlen, "profile: %s.n: %llu units in %.0f s since started_ns; at most %.0f (one per %d ns)",
			 path, (unsigned long long)st->n, life_ns / 1e9, maxn, PROFILES_NS_PER_UNIT);
		return -1;
	}
	if (!(st->mean <= life_ns)) {
		snprintf(err, errlen, "profile: %s.mean_ns: %.0f ns is longer than the process has lived (%.0f s)",
			 path, st->mean, life_ns / 1e9);
		return -1;
	}
	/* no deviation is larger than the life */
	if (!(st->m2 <= (double)st->n * life_ns * life_ns)) {
		snprintf(err, errlen, "profile: %s.m2: larger than %llu units of at most %.0f s can spread",
			 path, (unsigned long long)st->n, life_ns / 1e9);
		return -1;
	}
	return 0;
}

int profiles_validate(const struct profile_upload *u, int64_t now_ns, char *err, size_t errlen)
{
	struct gprofile *p = gp_new();
	double life = (double)(now_ns > u->started_ns ? now_ns - u->started_ns : 0) + PROFILES_CLOCK_SLACK_NS;
	char path[96];
	int rc = -1;

	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (gp_load_text(p, buf_cstr((struct buf *)&u->text), u->text.len) < 0) {
		snprintf(err, errlen, "profile: %s", gp_error(p));
		goto out;
	}
	if ((double)p->units > life / PROFILES_NS_PER_UNIT) {
		snprintf(err, errlen, "profile: units: %llu in %.0f s since started_ns; at most %.0f (one per %d ns)",
			 (unsigned long long)p->units, life / 1e9, life / PROFILES_NS_PER_UNIT, PROFILES_NS_PER_UNIT);
		goto out;
	}
	for (size_t li = 0; li < p->nloops; li++) {
		const struct gp_loop *l = &p->loops[li];

		if (l->threads > PROFILES_MAX_THREADS) {
			snprintf(err, errlen, "profile: loops[%zu].threads: at most %d (a process has no more)", li,
				 PROFILES_MAX_THREADS);
			goto out;
		}
		snprintf(path, sizeof(path), "loops[%zu].units", li);
		if (stats_ok(&l->all, life, path, err, errlen) < 0)
			goto out;
		/* a thread's units follow one another: together they last at most its life */
		if (l->threads > 0 && (double)l->all.n * l->all.mean > life * (double)l->threads) {
			snprintf(err, errlen, "profile: loops[%zu].units: %llu units of %.0f ns on %llu threads last longer"
				 " than the process has lived (%.0f s)", li, (unsigned long long)l->all.n, l->all.mean,
				 (unsigned long long)l->threads, life / 1e9);
			goto out;
		}
		/* deferred requests span units (guard.md): each at most the process's life too */
		snprintf(path, sizeof(path), "loops[%zu].async", li);
		if (stats_ok(&l->async, life, path, err, errlen) < 0)
			goto out;
		for (size_t c = 0; c < l->nclasses; c++) {
			snprintf(path, sizeof(path), "loops[%zu].classes[%zu]", li, c);
			if (stats_ok(&l->classes[c].st, life, path, err, errlen) < 0)
				goto out;
			for (unsigned b = 0; b < GP_BUCKETS; b++) {
				snprintf(path, sizeof(path), "loops[%zu].classes[%zu].sizes[%u]", li, c, b);
				if (stats_ok(&l->classes[c].size[b], life, path, err, errlen) < 0)
					goto out;
			}
		}
	}
	rc = 0;
out:
	gp_free(p);
	return rc;
}

/* ---- the merge ---- */

/* One host's thresholds of one loop, from its own upload. */
struct loop_thr {
	char *key;          /* the loop's identity across profiles (loop_key) */
	size_t host;        /* index of the host's row */
	double thr;         /* the loop's threshold (all its units) */
	double lo, hi;      /* the lowest and highest threshold of the loop: its own, its types', by size */
	char what[96];      /* the loop, for people */
};

/* What one host's upload counts for. */
struct host_part {
	const char *host;
	char reason[320];   /* held back: why; "" when merged */
};

/* "module\x1fbuild id\x1foffset\x1fdepth\x1fcall": a loop matched as gp_merge matches it. Caller frees. */
static char *loop_key(const struct gprofile *p, const struct gp_loop *l, const char *part)
{
	const struct gp_module *m = &p->modules[l->site.module];
	size_t n = strlen(m->name) + strlen(m->build_id) + GP_CALL_MAX + strlen(part) + 64;
	char *k = malloc(n);

	if (k)
		snprintf(k, n, "%s\x1f%s\x1f%llx\x1f%lld\x1f%s\x1f%s", m->name, m->build_id,
			 (unsigned long long)l->site.offset, (long long)l->site.depth, l->site.call, part);
	return k;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int cmp_thr(const void *a, const void *b)
{
	const struct loop_thr *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : (x->host > y->host) - (x->host < y->host);
}

/* The median of v[0..n) (n >= 1), sorting v. */
static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double clamp(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

/* Appends one entry of a loop's thresholds to thr (part: "" for its units, "async" for its deferred requests). */
static struct loop_thr *push_thr(struct vec *thr, const struct gprofile *p, const struct gp_loop *l, size_t host,
				 const char *part, double threshold)
{
	struct loop_thr *t = vec_push(thr);

	if (!t)
		return NULL;
	if (!(t->key = loop_key(p, l, part))) {
		thr->len--;
		return NULL;
	}
	t->host = host;
	t->thr = t->lo = t->hi = threshold;
	snprintf(t->what, sizeof(t->what), "%s%s%s", l->symbol && l->symbol[0] ? l->symbol : l->site.call,
		 part[0] ? " " : "", part);
	return t;
}

/*
 * Appends the loops of one host's upload (clustered with its own k and cut) to thr: an entry for
 * its units and, where it saw any, one for its deferred requests, each held back and clamped apart
 * (one host's slow requests cannot raise the fleet's threshold for either). 0 or -1.
 */
static int host_loops(const struct gprofile *p, size_t host, struct vec *thr)
{
	for (size_t li = 0; li < p->nloops; li++) {
		const struct gp_loop *l = &p->loops[li];
		struct loop_thr *t;

		if (l->all.n == 0)
			continue;
		if (!(t = push_thr(thr, p, l, host, "", l->threshold_ns)))
			return -1;
		for (size_t ti = 0; ti < l->ntypes; ti++) {
			const struct gp_type *ty = &l->types[ti];

			t->lo = fmin(t->lo, ty->threshold_ns);
			t->hi = fmax(t->hi, ty->threshold_ns);
			for (unsigned b = 0; b < GP_BUCKETS; b++) {
				t->lo = fmin(t->lo, ty->size_thr[b]);
				t->hi = fmax(t->hi, ty->size_thr[b]);
			}
		}
		if (l->async.n > 0 && !push_thr(thr, p, l, host, "async", l->async_thr_ns))
			return -1;
	}
	return 0;
}

/*
 * Holds back the hosts far off the others in a loop that at least PROFILES_ROBUST_MIN hosts learnt:
 * on a log scale (durations differ by factors), a host whose loop threshold is further from the
 * hosts' median than both PROFILES_OFF_FACTOR times and PROFILES_OFF_MADS scaled MADs.
 * thr[0..n) sorted by key; groups [g, e) are one loop each.
 */
static int hold_back(struct loop_thr *thr, size_t n, struct host_part *hosts)
{
	double *x = vec_alloc(n ? n : 1, sizeof(*x)), *dev = vec_alloc(n ? n : 1, sizeof(*dev));

	if (!x || !dev) {
		free(x);
		free(dev);
		return -1;
	}
	for (size_t g = 0, e; g < n; g = e) {
		size_t m;
		double med, mad, limit;

		for (e = g; e < n && strcmp(thr[e].key, thr[g].key) == 0; e++)
			;
		if ((m = e - g) < PROFILES_ROBUST_MIN)
			continue;
		for (size_t i = 0; i < m; i++)
			x[i] = log(fmax(thr[g + i].thr, 1));
		med = median(x, m);
		for (size_t i = 0; i < m; i++)
			dev[i] = fabs(log(fmax(thr[g + i].thr, 1)) - med);
		mad = median(dev, m);
		limit = fmax(PROFILES_OFF_MADS * 1.4826 * mad, log(PROFILES_OFF_FACTOR));
		for (size_t i = 0; i < m; i++) {
			const struct loop_thr *t = &thr[g + i];
			double d = log(fmax(t->thr, 1)) - med;

			char th[FMT_LEN], md[FMT_LEN], ratio[FMT_LEN];

			if (fabs(d) <= limit || hosts[t->host].reason[0])
				continue;
			if (exp(d) >= 10)
				fmt_count(ratio, llround(fmin(exp(d), 1e18)));
			else
				snprintf(ratio, sizeof(ratio), "%.2g", exp(d));
			snprintf(hosts[t->host].reason, sizeof(hosts[t->host].reason),
				 "loop %s: threshold %s, %s times the median of %zu hosts (%s): more than %g"
				 " times and %g MADs off", t->what, fmt_duration(th, t->thr), ratio, m,
				 fmt_duration(md, exp(med)), PROFILES_OFF_FACTOR, PROFILES_OFF_MADS);
		}
	}
	free(x);
	free(dev);
	return 0;
}

/* The lowest and highest threshold the merged hosts learnt for key (loop_key()'s, taken: freed here;
 * NULL is its out of memory): 0, 1 (none), -1 (out of memory). */
static int host_range(const struct loop_thr *thr, size_t n, const struct host_part *hosts, char *key, double *lo,
		      double *hi)
{
	if (!key)
		return -1;
	*lo = INFINITY;
	*hi = -INFINITY;
	for (size_t i = 0; i < n; i++)
		if (!hosts[thr[i].host].reason[0] && strcmp(thr[i].key, key) == 0) {
			*lo = fmin(*lo, thr[i].lo);
			*hi = fmax(*hi, thr[i].hi);
		}
	free(key);
	return *lo > *hi;
}

/* Keeps every threshold of the merged profile's loops within what the merged hosts learnt. */
static int clamp_thresholds(struct gprofile *into, const struct loop_thr *thr, size_t n,
			    const struct host_part *hosts)
{
	for (size_t li = 0; li < into->nloops; li++) {
		struct gp_loop *l = &into->loops[li];
		double lo, hi;
		int rc = host_range(thr, n, hosts, loop_key(into, l, ""), &lo, &hi);

		if (rc < 0)
			return -1;
		if (rc == 0) {
			l->threshold_ns = clamp(l->threshold_ns, lo, hi);
			for (size_t ti = 0; ti < l->ntypes; ti++) {
				l->types[ti].threshold_ns = clamp(l->types[ti].threshold_ns, lo, hi);
				for (unsigned b = 0; b < GP_BUCKETS; b++)
					l->types[ti].size_thr[b] = clamp(l->types[ti].size_thr[b], lo, hi);
			}
		}
		if ((rc = host_range(thr, n, hosts, loop_key(into, l, "async"), &lo, &hi)) < 0)
			return -1;
		if (rc == 0)
			l->async_thr_ns = clamp(l->async_thr_ns, lo, hi);
	}
	return 0;
}

static void free_thr(struct vec *thr)
{
	for (size_t i = 0; i < thr->len; i++)
		free(((struct loop_thr *)thr->data)[i].key);
	vec_free(thr);
}

/*
 * Merges the build's latest upload of each host (docs/fleet.md, "Thresholds learnt by the fleet"),
 * stores the result and appends its text to out. 0, 1 (no upload), or -1.
 */
static int merge(PGconn *db, const char *build_id, struct buf *out, char *err, size_t errlen)
{
	const char *params[1] = { build_id };
	/*
	 * A host counts once: its latest upload. The newest upload read (any process's): one stored
	 * after it (another worker's) leaves the merge stale.
	 */
	PGresult *r = PQexecParams(db, "SELECT DISTINCT ON (host) profile, host,"
				   " (SELECT max(uploaded_at) FROM profile_uploads WHERE build_id = $1)::text,"
				   " (SELECT count(*) FROM profile_uploads WHERE build_id = $1)"
				   " FROM profile_uploads WHERE build_id = $1 ORDER BY host, uploaded_at DESC, started_at DESC,"
				   " pid DESC", 1, NULL, params, NULL, NULL, 0);
	struct gprofile *into = NULL, *one = NULL;
	struct buf text = BUF_INIT((size_t)256 << 20), summary = BUF_INIT((size_t)64 << 20),
		   held = BUF_INIT((size_t)16 << 20);
	struct vec thr = VEC_INIT(struct loop_thr);
	struct host_part *hosts = NULL;
	double *ks = NULL, *cuts = NULL;
	struct jsonw w, hw;
	int64_t t0 = util_now_mono_ns();
	int rc = -1, n, merged = 0;

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "reading the uploads", PQresultErrorMessage(r));
		goto out;
	}
	if ((n = PQntuples(r)) == 0) {
		rc = 1;
		goto out;
	}
	hosts = vec_calloc((size_t)n, sizeof(*hosts));
	ks = vec_alloc((size_t)n, sizeof(*ks));
	cuts = vec_alloc((size_t)n, sizeof(*cuts));
	if (!hosts || !ks || !cuts || !(into = gp_new())) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* each host's own thresholds, as it would guard with them */
	for (int i = 0; i < n; i++) {
		gp_free(one);
		if (!(one = gp_new()) || gp_load_text(one, PQgetvalue(r, i, 0), (size_t)PQgetlength(r, i, 0)) < 0 ||
		    gp_cluster(one, 0) < 0) {
			snprintf(err, errlen, "merging the uploads: %s", one ? gp_error(one) : "out of memory");
			goto out;
		}
		hosts[i].host = PQgetvalue(r, i, 1);
		ks[i] = one->k;
		cuts[i] = one->cut;
		if (host_loops(one, (size_t)i, &thr) < 0) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	if (thr.len)
		qsort(thr.data, thr.len, sizeof(struct loop_thr), cmp_thr);
	if (hold_back(thr.data, thr.len, hosts) < 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		if (hosts[i].reason[0])
			continue;
		gp_free(one);
		if (!(one = gp_new()) || gp_load_text(one, PQgetvalue(r, i, 0), (size_t)PQgetlength(r, i, 0)) < 0 ||
		    gp_merge(into, one) < 0) {
			snprintf(err, errlen, "merging the uploads: %s", one ? gp_error(one)[0] ? gp_error(one)
				 : gp_error(into) : "out of memory");
			goto out;
		}
		merged++;
	}
	/* k and the cut: the build's settings, the hosts' median (one host cannot set them) */
	into->k = median(ks, (size_t)n);
	into->cut = median(cuts, (size_t)n);
	into->updated_s = (int64_t)time(NULL);
	/* the floor of the thresholds is each guarding process's own setting */
	if (gp_cluster(into, 0) < 0 || clamp_thresholds(into, thr.data, thr.len, hosts) < 0 ||
	    gp_write(into, &text) < 0) {
		snprintf(err, errlen, "merging the uploads: %s", gp_error(into)[0] ? gp_error(into) : "out of memory");
		goto out;
	}
	jsonw_init_compact(&w, &summary);
	gp_summary(into, &w);
	jsonw_init_compact(&hw, &held);
	jsonw_array(&hw);
	for (int i = 0; i < n; i++) {
		if (!hosts[i].reason[0])
			continue;
		jsonw_object(&hw);
		jsonw_kstr(&hw, "host", hosts[i].host);
		jsonw_kstr(&hw, "reason", hosts[i].reason);
		jsonw_end(&hw);
	}
	jsonw_end(&hw);
	if (jsonw_finish(&w) < 0 || jsonw_finish(&hw) < 0 || buf_error(&text) != BUF_OK) {
		snprintf(err, errlen, "merging the uploads: the merged profile is too large");
		goto out;
	}
	{
		char nh[16], np[24], units[24], ms[32];
		const char *p[10] = { build_id, into->exe ? into->exe : "", buf_cstr(&text), nh, np, units,
				      buf_cstr(&summary), ms, PQgetvalue(r, 0, 2), buf_cstr(&held) };

		snprintf(nh, sizeof(nh), "%d", merged);
		snprintf(np, sizeof(np), "%s", PQgetvalue(r, 0, 3));
		snprintf(units, sizeof(units), "%llu", (unsigned long long)into->units);
		snprintf(ms, sizeof(ms), "%.3f", (double)(util_now_mono_ns() - t0) / 1e6);
		if (db_command(db,
			"INSERT INTO profiles_merged (build_id, exe, profile, hosts, processes, units, summary, merge_ms,"
			" stale, held_back) VALUES ($1, $2, $3, $4::integer, $5::integer, $6::bigint, $7::jsonb, $8::float8,"
			" EXISTS (SELECT 1 FROM profile_uploads WHERE build_id = $1 AND uploaded_at > $9::timestamptz),"
			" $10::jsonb)"
			" ON CONFLICT (build_id) DO UPDATE SET exe = EXCLUDED.exe, profile = EXCLUDED.profile,"
			" hosts = EXCLUDED.hosts, processes = EXCLUDED.processes, units = EXCLUDED.units,"
			" summary = EXCLUDED.summary, merge_ms = EXCLUDED.merge_ms, merged_at = clock_timestamp(),"
			" stale = EXCLUDED.stale, held_back = EXCLUDED.held_back",
			10, p, "storing the merged profile", err, errlen) < 0)
			goto out;
	}
	buf_append(out, text.data, text.len);
	if (buf_error(out) != BUF_OK) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	gp_free(one);
	gp_free(into);
	free_thr(&thr);
	free(hosts);
	free(ks);
	free(cuts);
	buf_release(&text);
	buf_release(&summary);
	buf_release(&held);
	PQclear(r);
	return rc;
}

int profiles_fetch(PGconn *db, const char *build_id, int64_t min_age_ms, struct buf *out, char *err,
		   size_t errlen)
{
	char age[24];
	const char *params[2] = { build_id, age };
	PGresult *r;

	snprintf(age, sizeof(age), "%lld", (long long)min_age_ms);
	r = db_query(db, "SELECT profile, stale AND merged_at < now() - make_interval(secs => $2::float8 / 1000)"
		     " FROM profiles_merged WHERE build_id = $1", 2, params, "reading the merged profile", err, errlen);
	if (!r)
		return -1;
	if (PQntuples(r) == 1 && PQgetvalue(r, 0, 1)[0] == 'f') {
		/* fresh, or merged too recently to merge again */
		buf_append(out, PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0));
		PQclear(r);
		if (buf_error(out) != BUF_OK) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		return 0;
	}
	PQclear(r);
	return merge(db, build_id, out, err, errlen);
}

int profiles_refresh(PGconn *db, const char *build_id, int64_t min_age_ms, char *err, size_t errlen)
{
	char age[24];
	const char *params[2] = { build_id, age };
	PGresult *r;
	bool due;

	snprintf(age, sizeof(age), "%lld", (long long)min_age_ms);
	r = db_query(db, "SELECT NOT EXISTS (SELECT 1 FROM profiles_merged WHERE build_id = $1 AND NOT (stale AND"
		     " merged_at < now() - make_interval(secs => $2::float8 / 1000)))", 2, params,
		     "reading the merged profile", err, errlen);
	if (!r)
		return -1;
	due = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (due) {
		struct buf scratch = BUF_INIT((size_t)256 << 20);
		int rc = merge(db, build_id, &scratch, err, errlen);

		buf_release(&scratch);
		return rc < 0 ? -1 : 0;
	}
	return 0;
}
