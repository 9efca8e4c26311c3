/* attribution: label values over-represented among a cluster's or a problem's streams, and what its
 * cost depends on among their numeric labels (see attribution.h). */
#include "web/attribution.h"
#include "common/db.h"
#include "common/fmt.h"
#include "common/stats.h"
#include "web/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A key with more distinct values than this share of the streams names streams, not a cause
 * (a duration, an id): its values are not tested. */
#define ID_LIKE_SHARE 0.25
#define ID_LIKE_MIN 20

static uint64_t u64(PGresult *r, int row, int col)
{
	return (uint64_t)strtoull(PQgetvalue(r, row, col), NULL, 10);
}

static int cmp_value(const void *x, const void *y)
{
	const struct attribution_value *a = x, *b = y;

	if (a->q != b->q)
		return a->q < b->q ? -1 : 1;
	if (a->p != b->p)
		return a->p < b->p ? -1 : 1;
	if (a->cost_share != b->cost_share)
		return a->cost_share > b->cost_share ? -1 : 1;
	if (strcmp(a->key, b->key) != 0)
		return strcmp(a->key, b->key);
	return strcmp(a->value, b->value);
}

/* "cluster" or "problem" */
static const char *what(const struct attribution *at)
{
	return at->of == ATTRIBUTION_PROBLEM ? "problem" : "cluster";
}

int attribution_compute(PGconn *db, enum attribution_of of, const char *id, struct arena *a,
			struct attribution *out, char *err, size_t errlen)
{
	PGresult *r = of == ATTRIBUTION_PROBLEM ? model_problem_values(db, id, err, errlen)
						: model_cluster_values(db, id, err, errlen);
	struct attribution_value *v;
	double *p, *pb;
	size_t nv = 0, rows, first;
	uint64_t nr, nk, nb;

	memset(out, 0, sizeof(*out));
	out->of = of;
	if (!r)
		return -1;
	rows = (size_t)PQntuples(r);
	if (rows == 0 || !PQgetisnull(r, 0, 0)) {
		PQclear(r);
		snprintf(err, errlen, "%s %s: no totals", what(out), id);
		return -1;
	}
	out->run_streams = nr = u64(r, 0, 2);
	out->cluster_streams = nk = u64(r, 0, 3);
	out->cost_ns = u64(r, 0, 4);
	out->baseline_streams = nb = u64(r, 0, 5);
	if (nk == 0) {
		/* a cluster (problem) without stored stacks: nothing to attribute */
		PQclear(r);
		return 0;
	}
	v = arena_calloc(a, rows + 1, sizeof(*v));
	p = arena_alloc(a, (rows + 1) * sizeof(*p));
	pb = arena_alloc(a, (rows + 1) * sizeof(*pb));
	if (!v || !p || !pb) {
		PQclear(r);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* rows come by key: each key's values together */
	for (size_t i = 1; i < rows; i = first) {
		size_t nvals = 0;

		for (first = i; first < rows && strcmp(PQgetvalue(r, first, 0), PQgetvalue(r, i, 0)) == 0; first++)
			nvals++;
		if (nvals > ID_LIKE_MIN && (double)nvals > ID_LIKE_SHARE * (double)(nr + nb)) {
			out->keys_skipped++;
			continue;
		}
		for (size_t j = i; j < first; j++) {
			struct attribution_value *x = &v[nv];
			uint64_t kv = u64(r, (int)j, 3), rv = u64(r, (int)j, 2), bv = u64(r, (int)j, 5);

			x->key = arena_strndup(a, PQgetvalue(r, (int)j, 0), (size_t)PQgetlength(r, (int)j, 0));
			x->value = arena_strndup(a, PQgetvalue(r, (int)j, 1), (size_t)PQgetlength(r, (int)j, 1));
			if (!x->key || !x->value) {
				PQclear(r);
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			x->run_streams = rv;
			x->cluster_streams = kv;
			x->baseline_streams = bv;
			x->cost_ns = u64(r, (int)j, 4);
			x->cost_share = out->cost_ns ? (double)x->cost_ns / (double)out->cost_ns : 0;
			x->cluster_share = (double)kv / (double)nk;
			x->run_share = nr ? (double)rv / (double)nr : 0;
			x->lift = x->run_share > 0 ? x->cluster_share / x->run_share : NAN;
			/* the attributed streams against the run's other streams */
			/* counts that cannot form a table (streams expired since the run): nothing to say */
			x->p = kv > rv || nk > nr || nk - kv > nr - rv ? 1.0
				: stats_fisher_greater(kv, nk - kv, rv - kv, (nr - rv) - (nk - kv));
			if (nb) {
				x->baseline_share = (double)bv / (double)nb;
				x->lift_baseline = bv ? x->cluster_share / x->baseline_share : INFINITY;
				x->p_baseline = bv > nb ? 1.0 : stats_fisher_greater(kv, nk - kv, bv, nb - bv);
			} else {
				x->baseline_share = x->lift_baseline = x->p_baseline = NAN;
			}
			p[nv] = x->p;
			pb[nv] = nb ? x->p_baseline : 1;
			nv++;
		}
	}
	PQclear(r);
	out->tested = nv;
	if (stats_bh(p, nv, p) < 0 || stats_bh(pb, nv, pb) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* keep the values the attributed streams have */
	out->n = 0;
	for (size_t i = 0; i < nv; i++) {
		v[i].q = p[i];
		v[i].q_baseline = nb ? pb[i] : NAN;
		if (v[i].cluster_streams)
			v[out->n++] = v[i];
	}
	qsort(v, out->n, sizeof(*v), cmp_value);
	if (out->n > ATTRIBUTION_MAX_VALUES)
		out->n = ATTRIBUTION_MAX_VALUES;
	out->v = v;
	return 0;
}

/* "p < 10^-9" for small ones, "p = 0.012" otherwise */
static void put_p(struct buf *out, double q)
{
	if (q < 1e-3) {
		int e = (int)floor(-log10(q > 0 ? q : 1e-300));
		buf_printf(out, "p < 10^-%d", e);
	} else {
		buf_printf(out, "p = %.2g", q);
	}
}

/* Value i in words: "84 % of this cluster's (problem's) cost is on version 2.5.0, which has 31 % of the run's
 * streams (12 % of the baseline's); p < 10^-9". Appends to out. */
static void attribution_words(const struct attribution *at, size_t i, struct buf *out)
{
	const struct attribution_value *x = &at->v[i];
	char t[FMT_LEN], v[FMT_LEN];
	const char *shown = fmt_label_value(v, x->key, x->value);

	buf_printf(out, "%s of this %s's cost is on ", fmt_share(t, x->cost_share), what(at));
	if (strcmp(x->key, "host") == 0 || strcmp(x->key, "version") == 0)
		buf_printf(out, "%s %s", x->key, x->value);
	else
		buf_printf(out, "%s = %s", x->key, shown ? shown : x->value);
	buf_printf(out, ", which has %s of the run's streams", fmt_share(t, x->run_share));
	if (at->baseline_streams)
		buf_printf(out, " (%s of the baseline's)", fmt_share(t, x->baseline_share));
	buf_puts(out, "; ");
	put_p(out, x->q);
}

void attribution_summary(const struct attribution *at, struct buf *out)
{
	if (at->v[0].q < 0.05) {
		attribution_words(at, 0, out);
		return;
	}
	char t[FMT_LEN];

	buf_printf(out, "No host, version or label value stands out among this %s's %s stream%s (the smallest "
		   "adjusted p is %.2g)", what(at), fmt_count(t, (int64_t)at->cluster_streams),
		   at->cluster_streams == 1 ? "" : "s", at->v[0].q);
}

/* ---- what the cost depends on ---- */

/* Numbers that name rather than measure (identifiers, ports, the loop's index when its symbol is
 * unknown), and the unit's own duration, which holds the cost it would "explain". */
static bool numeric_skipped(const char *key)
{
	static const char *const last[] = { "id", "pid", "tid", "uid", "gid", "port", "seq", NULL };
	static const char *const whole[] = { "unit.duration_ns", "unit.loop", NULL };
	const char *c = key + strlen(key);

	for (size_t i = 0; whole[i]; i++)
		if (strcmp(key, whole[i]) == 0)
			return true;
	while (c > key && c[-1] != '.' && c[-1] != '_' && c[-1] != '-')
		c--;
	for (size_t i = 0; last[i]; i++)
		if (strcasecmp(c, last[i]) == 0)
			return true;
	return false;
}

/* the position of stream ref among the n sorted refs, or n */
static size_t ref_index(const int64_t *refs, size_t n, int64_t ref)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (refs[mid] < ref)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && refs[lo] == ref ? lo : n;
}

static double numeric_r2(const struct attribution_numeric *x)
{
	return x->fit.form == COSTMODEL_LINEAR ? x->fit.r2_linear : x->fit.r2_tree;
}

static int cmp_numeric(const void *p, const void *q)
{
	const struct attribution_numeric *x = p, *y = q;
	double a = numeric_r2(x), b = numeric_r2(y);

	if (a != b)
		return a > b ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* words from a buffer into the arena: NULL when empty or out of memory */
static const char *words_in(struct arena *a, struct buf *b)
{
	const char *s = buf_cstr(b);

	return s[0] ? arena_strndup(a, s, strlen(s)) : NULL;
}

int attribution_costmodel(PGconn *db, enum attribution_of of, const char *id, struct arena *a,
			  struct attribution_costmodel *out, char *err, size_t errlen)
{
	PGresult *r = of == ATTRIBUTION_PROBLEM ? model_problem_numeric(db, id, COSTMODEL_MAX_ROWS, err, errlen)
						: model_cluster_numeric(db, id, COSTMODEL_MAX_ROWS, err, errlen);
	struct buf words = BUF_INIT(4096);
	size_t rows, ns = 0, nkeys = 0, first;
	int64_t *refs;
	double *cost, *x;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (!r)
		return -1;
	rows = (size_t)PQntuples(r);
	while (ns < rows && PQgetisnull(r, (int)ns, 2))
		ns++;
	for (size_t i = ns; i < rows; i++)
		nkeys += i == ns || strcmp(PQgetvalue(r, (int)i, 2), PQgetvalue(r, (int)i - 1, 2)) != 0;
	refs = arena_alloc(a, (ns + 1) * sizeof(*refs));
	cost = arena_alloc(a, (ns + 1) * sizeof(*cost));
	x = arena_alloc(a, (ns + 1) * sizeof(*x));
	out->v = arena_calloc(a, nkeys + 1, sizeof(*out->v));
	if (!refs || !cost || !x || !out->v) {
		snprintf(err, errlen, "out of memory");
		goto out_clear;
	}
	for (size_t i = 0; i < ns; i++) {
		refs[i] = strtoll(PQgetvalue(r, (int)i, 0), NULL, 10);
		cost[i] = strtod(PQgetvalue(r, (int)i, 1), NULL);
	}
	out->streams = ns;
	if (costmodel_modes(cost, ns, &out->modes) < 0) {
		snprintf(err, errlen, "out of memory");
		goto out_clear;
	}
	costmodel_modes_words(&out->modes, &words);
	out->modes_words = words_in(a, &words);
	/* rows come by key: each key's streams together */
	for (size_t i = ns; i < rows; i = first) {
		const char *key = PQgetvalue(r, (int)i, 2);
		struct attribution_numeric *v = &out->v[out->n];

		for (first = i; first < rows && strcmp(PQgetvalue(r, (int)first, 2), key) == 0; first++)
			;
		if (numeric_skipped(key)) {
			out->keys_skipped++;
			continue;
		}
		for (size_t j = 0; j < ns; j++)
			x[j] = NAN;
		for (size_t j = i; j < first; j++) {
			size_t at = ref_index(refs, ns, strtoll(PQgetvalue(r, (int)j, 0), NULL, 10));

			if (at < ns)
				x[at] = strtod(PQgetvalue(r, (int)j, 3), NULL);
		}
		out->tested++;
		if (costmodel_fit(x, cost, ns, &v->fit) < 0) {
			snprintf(err, errlen, "out of memory");
			goto out_clear;
		}
		if (v->fit.form == COSTMODEL_NONE)
			continue;
		v->key = arena_strndup(a, key, strlen(key));
		buf_reset(&words);
		costmodel_fit_words(key, &v->fit, &words);
		v->words = words_in(a, &words);
		if (!v->key || !v->words) {
			snprintf(err, errlen, "out of memory");
			goto out_clear;
		}
		out->n++;
	}
	qsort(out->v, out->n, sizeof(*out->v), cmp_numeric);
	rc = 0;
out_clear:
	buf_release(&words);
	PQclear(r);
	return rc;
}
