/* costmodel: cost against numeric features (line, regression tree) and its modes (see costmodel.h). */
#include "common/costmodel.h"
#include "common/fmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A stream's (feature, cost) and its place in the input, which decides the hold-out. */
struct pt {
	double x, y;
	size_t i;
};

static int cmp_pt(const void *a, const void *b)
{
	const struct pt *p = a, *q = b;

	if (p->x != q->x)
		return p->x < q->x ? -1 : 1;
	return p->i < q->i ? -1 : p->i > q->i;
}

/* The stride that keeps at most COSTMODEL_MAX_ROWS of n: every row, or n / MAX apart. */
static size_t sample_at(size_t j, size_t n)
{
	return n <= COSTMODEL_MAX_ROWS ? j : (size_t)((double)j * (double)n / COSTMODEL_MAX_ROWS);
}

static size_t sample_len(size_t n)
{
	return n <= COSTMODEL_MAX_ROWS ? n : COSTMODEL_MAX_ROWS;
}

/* ---- the line ---- */

static void line_fit(const struct pt *p, size_t n, double *a, double *b)
{
	double xm = 0, ym = 0, sxx = 0, sxy = 0;

	for (size_t i = 0; i < n; i++) {
		xm += p[i].x;
		ym += p[i].y;
	}
	xm /= (double)n;
	ym /= (double)n;
	for (size_t i = 0; i < n; i++) {
		sxx += (p[i].x - xm) * (p[i].x - xm);
		sxy += (p[i].x - xm) * (p[i].y - ym);
	}
	*b = sxx > 0 ? sxy / sxx : 0;
	*a = ym - *b * xm;
}

/* ---- the tree: least-squares splits of x-sorted points, prefix sums of y ---- */

struct tree {
	const struct pt *p;
	const double *s1, *s2;   /* prefix sums of y - ym and its square: s[i] over p[0..i) */
	double ym;               /* the centre the sums are taken about */
	size_t min_leaf;
	double min_gain;         /* in the centred units of the sums */
	struct costmodel_leaf *leaf;
	size_t nleaves;
};

static double range_sse(const struct tree *t, size_t a, size_t b)
{
	double s = t->s1[b] - t->s1[a], q = t->s2[b] - t->s2[a], v = q - s * s / (double)(b - a);

	return v > 0 ? v : 0;
}

/* Leaves of [a, b) in x order, splitting while depth allows and a split pays. */
static void tree_grow(struct tree *t, size_t a, size_t b, int depth)
{
	double whole = range_sse(t, a, b), best = whole;
	size_t cut = 0;

	if (depth < COSTMODEL_TREE_DEPTH && b - a >= 2 * t->min_leaf) {
		for (size_t i = a + t->min_leaf; i + t->min_leaf <= b; i++) {
			double v;

			if (t->p[i - 1].x == t->p[i].x)
				continue;   /* a split falls between distinct values */
			v = range_sse(t, a, i) + range_sse(t, i, b);
			if (v < best) {
				best = v;
				cut = i;
			}
		}
	}
	if (cut && whole - best >= t->min_gain) {
		tree_grow(t, a, cut, depth + 1);
		tree_grow(t, cut, b, depth + 1);
		return;
	}
	/* depth <= 3: at most 8 leaves */
	t->leaf[t->nleaves] = (struct costmodel_leaf){
		.above = t->nleaves ? t->leaf[t->nleaves - 1].up_to : -INFINITY,
		.up_to = t->p[b - 1].x,
		.cost_ns = t->ym + (t->s1[b] - t->s1[a]) / (double)(b - a),
		.n = b - a,
		.end = b,
	};
	t->nleaves++;
}

/* The tree of the x-sorted p (n of them) in leaf[] (nleaves set); s1, s2 have room for n + 1. */
static void tree_fit(const struct pt *p, size_t n, double *s1, double *s2, struct costmodel_leaf *leaf,
		     size_t *nleaves)
{
	struct tree t = { .p = p, .s1 = s1, .s2 = s2, .leaf = leaf };
	double sst;

	for (size_t i = 0; i < n; i++)
		t.ym += p[i].y;
	t.ym /= (double)n;
	s1[0] = s2[0] = 0;
	for (size_t i = 0; i < n; i++) {
		double d = p[i].y - t.ym;

		s1[i + 1] = s1[i] + d;
		s2[i + 1] = s2[i] + d * d;
	}
	sst = s2[n];
	t.min_leaf = n / 20 > COSTMODEL_MIN_LEAF ? n / 20 : COSTMODEL_MIN_LEAF;
	t.min_gain = COSTMODEL_MIN_GAIN * sst;
	if (t.min_gain <= 0)
		t.min_gain = INFINITY;   /* constant cost: nothing to split */
	tree_grow(&t, 0, n, 0);
	for (size_t i = 0; i + 1 < t.nleaves; i++)
		t.leaf[i].cut = (t.leaf[i].up_to + p[t.leaf[i].end].x) / 2;
	t.leaf[t.nleaves - 1].up_to = t.leaf[t.nleaves - 1].cut = INFINITY;
	*nleaves = t.nleaves;
}

static double tree_predict(const struct costmodel_leaf *leaf, size_t n, double x)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (x <= leaf[i].cut)
			return leaf[i].cost_ns;
	return leaf[n - 1].cost_ns;
}

/* R^2 of predictions of the line (a, b) or the tree (leaf) on p: 1 - SSE / SST; 0 when p's cost is constant. */
static double r2_of(const struct pt *p, size_t n, double a, double b, const struct costmodel_leaf *leaf,
		    size_t nleaves)
{
	double m = 0, sst = 0, sse = 0;

	for (size_t i = 0; i < n; i++)
		m += p[i].y;
	m /= (double)n;
	for (size_t i = 0; i < n; i++) {
		double f = leaf ? tree_predict(leaf, nleaves, p[i].x) : a + b * p[i].x;

		sst += (p[i].y - m) * (p[i].y - m);
		sse += (p[i].y - f) * (p[i].y - f);
	}
	return sst > 0 ? 1 - sse / sst : 0;
}

/* A stream's fold: its place in the input hashed, so that a pattern in the input's order (every
 * fifth stream slow) does not put one kind of stream in one fold. */
static unsigned fold_of(size_t i)
{
	unsigned long long h = ((unsigned long long)i + 1) * 0x9E3779B97F4A7C15ULL;

	h ^= h >> 31;
	h *= 0xBF58476D1CE4E5B9ULL;
	h ^= h >> 29;
	return (unsigned)(h % COSTMODEL_FOLDS);
}

int costmodel_fit(const double *x, const double *cost_ns, size_t n, struct costmodel_fit *out)
{
	size_t m = 0, ntr = 0, nte = 0, ns = sample_len(n), nl;
	struct pt *p, *tr, *te;
	double *s1, *s2, a, b, mean = 0, sst = 0, sse_l = 0, sse_t = 0;
	struct costmodel_leaf leaf[COSTMODEL_MAX_LEAVES];
	int rc = -1;

	memset(out, 0, sizeof(*out));
	p = malloc((3 * ns + 1) * sizeof(*p));
	s1 = malloc((2 * ns + 2) * sizeof(*s1));
	if (!p || !s1)
		goto out_free;
	s2 = s1 + ns + 1;
	for (size_t j = 0; j < ns; j++) {
		size_t i = sample_at(j, n);

		if (isfinite(x[i]) && isfinite(cost_ns[i])) {
			p[m] = (struct pt){ x[i], cost_ns[i], m };
			m++;
		}
	}
	out->n = m;
	rc = 0;
	if (m < COSTMODEL_MIN_STREAMS)
		goto out_free;
	qsort(p, m, sizeof(*p), cmp_pt);
	for (size_t i = 0; i < m; i++)
		out->distinct += i == 0 || p[i].x != p[i - 1].x;
	/* two values or one: a category, which attribution tests */
	if (out->distinct < 3)
		goto out_free;
	line_fit(p, m, &out->intercept_ns, &out->slope_ns);
	for (size_t i = 0; i < m; i++)
		mean += p[i].y;
	mean /= (double)m;
	for (size_t i = 0; i < m; i++)
		sst += (p[i].y - mean) * (p[i].y - mean);
	if (sst <= 0)
		goto out_free;   /* the same cost everywhere: nothing to explain */
	out->r2_linear = r2_of(p, m, out->intercept_ns, out->slope_ns, NULL, 0);
	tree_fit(p, m, s1, s2, out->leaf, &out->nleaves);
	out->r2_tree = r2_of(p, m, 0, 0, out->leaf, out->nleaves);
	/* out of fold: each stream predicted by the models fitted without its fold (of 5) */
	tr = p + m;
	te = tr + m;
	for (unsigned fold = 0; fold < COSTMODEL_FOLDS; fold++) {
		ntr = nte = 0;
		for (size_t i = 0; i < m; i++) {
			if (fold_of(p[i].i) == fold)
				te[nte++] = p[i];
			else
				tr[ntr++] = p[i];
		}
		if (!nte || ntr < 2)
			continue;
		line_fit(tr, ntr, &a, &b);
		tree_fit(tr, ntr, s1, s2, leaf, &nl);
		for (size_t i = 0; i < nte; i++) {
			double dl = te[i].y - (a + b * te[i].x), dt = te[i].y - tree_predict(leaf, nl, te[i].x);

			sse_l += dl * dl;
			sse_t += dt * dt;
		}
	}
	out->r2_linear_holdout = 1 - sse_l / sst;
	out->r2_tree_holdout = 1 - sse_t / sst;
	if (out->slope_ns != 0 && out->r2_linear >= COSTMODEL_MIN_R2 && out->r2_linear_holdout >= COSTMODEL_MIN_R2 &&
	    out->r2_linear >= out->r2_tree - COSTMODEL_LINE_SLACK)
		out->form = COSTMODEL_LINEAR;
	else if (out->nleaves >= 2 && out->r2_tree >= COSTMODEL_MIN_R2 && out->r2_tree_holdout >= COSTMODEL_MIN_R2)
		out->form = COSTMODEL_STEPS;
out_free:
	free(p);
	free(s1);
	return rc;
}

/* ---- mixtures of Gaussians on log(cost) ---- */

#define VAR_FLOOR 1e-4   /* a spread of 1 %: identical costs do not make a component infinitely sharp */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double log_normal_pdf(double z, double mu, double var)
{
	return -0.5 * (log(2 * 3.14159265358979323846 * var) + (z - mu) * (z - mu) / var);
}

/* EM for k components on the sorted z (n of them); resp has room for n * k. Initialised at z's
 * quantiles, equal weights. Returns the log-likelihood. */
static double em(const double *z, size_t n, size_t k, double *resp, double *w, double *mu, double *var)
{
	double mean = 0, tv = 0, ll = -INFINITY;

	for (size_t i = 0; i < n; i++)
		mean += z[i];
	mean /= (double)n;
	for (size_t i = 0; i < n; i++)
		tv += (z[i] - mean) * (z[i] - mean);
	tv /= (double)n;
	for (size_t j = 0; j < k; j++) {
		w[j] = 1.0 / (double)k;
		mu[j] = z[(size_t)(((double)j + 0.5) * (double)n / (double)k)];
		var[j] = tv / (double)(k * k) > VAR_FLOOR ? tv / (double)(k * k) : VAR_FLOOR;
	}
	for (int it = 0; it < COSTMODEL_EM_ITER; it++) {
		double nll = 0;
		double lc[COSTMODEL_MAX_MODES], inv[COSTMODEL_MAX_MODES];
		double nk[COSTMODEL_MAX_MODES] = { 0 }, sz[COSTMODEL_MAX_MODES] = { 0 }, sv[COSTMODEL_MAX_MODES] = { 0 };

		/* each component's constant part once per iteration: log(w) - log(2 pi var) / 2 */
		for (size_t j = 0; j < k; j++) {
			lc[j] = w[j] > 0 ? log(w[j]) - 0.5 * log(2 * 3.14159265358979323846 * var[j]) : -INFINITY;
			inv[j] = 0.5 / var[j];
		}
		/* E step, with the M step's sums over i in the same order as a pass per component would
		 * make them (so the same numbers); the largest term is exp(0), 1, without calling exp */
		for (size_t i = 0; i < n; i++) {
			double top = -INFINITY, s = 0, *r = resp + i * k;
			size_t at = 0;

			for (size_t j = 0; j < k; j++) {
				r[j] = lc[j] - (z[i] - mu[j]) * (z[i] - mu[j]) * inv[j];
				if (r[j] > top) {
					top = r[j];
					at = j;
				}
			}
			for (size_t j = 0; j < k; j++)
				s += r[j] = j == at ? 1.0 : exp(r[j] - top);
			for (size_t j = 0; j < k; j++) {
				r[j] /= s;
				nk[j] += r[j];
				sz[j] += r[j] * z[i];
			}
			nll += top + log(s);
		}
		for (size_t j = 0; j < k; j++)
			sz[j] = nk[j] < 1e-9 ? 0 : sz[j] / nk[j];   /* the new means */
		for (size_t i = 0; i < n; i++)
			for (size_t j = 0; j < k; j++)
				sv[j] += resp[i * k + j] * (z[i] - sz[j]) * (z[i] - sz[j]);
		for (size_t j = 0; j < k; j++) {
			w[j] = nk[j] / (double)n;
			if (nk[j] < 1e-9)
				continue;   /* an empty component keeps its place, weight 0 */
			mu[j] = sz[j];
			var[j] = sv[j] / nk[j] > VAR_FLOOR ? sv[j] / nk[j] : VAR_FLOOR;
		}
		/* converged: the mean log-likelihood per stream moves by under 1e-7 */
		if (fabs(nll - ll) <= 1e-7 * (double)n) {
			ll = nll;
			break;
		}
		ll = nll;
	}
	return ll;
}

/* z (sorted, n) in [lo, hi] */
static size_t count_in(const double *z, size_t n, double lo, double hi)
{
	size_t a = 0, b = n, l;

	while (a < b) {   /* first >= lo */
		size_t mid = a + (b - a) / 2;

		if (z[mid] < lo)
			a = mid + 1;
		else
			b = mid;
	}
	l = a;
	b = n;
	while (a < b) {   /* first > hi */
		size_t mid = a + (b - a) / 2;

		if (z[mid] <= hi)
			a = mid + 1;
		else
			b = mid;
	}
	return a - l;
}

/* log of the mixture's density at z, summed from its largest term (far from narrow modes the
 * density itself underflows to 0 everywhere) */
static double mixture_logpdf(const struct costmodel_mode *m, size_t k, double z)
{
	double t[COSTMODEL_MAX_MODES], top = -INFINITY, s = 0;

	for (size_t j = 0; j < k; j++) {
		t[j] = log(m[j].weight) + log_normal_pdf(z, log(m[j].cost_ns), m[j].sigma * m[j].sigma);
		if (t[j] > top)
			top = t[j];
	}
	for (size_t j = 0; j < k; j++)
		s += exp(t[j] - top);
	return top + log(s);
}

/*
 * Modes told apart: each weighs enough; adjacent ones (by centre) are apart by Ashman's D above
 * COSTMODEL_MIN_D; and the data dip between them, so that a flat or skewed hump, which a mixture
 * fits better than one Gaussian once there are thousands of streams, is not called two modes: the
 * streams within a sixth of their distance of the mixture's lowest point between them are at most
 * COSTMODEL_MAX_DIP of those as near either centre.
 */
static int separated(const struct costmodel_mode *m, size_t k, const double *z, size_t n)
{
	for (size_t j = 0; j < k; j++)
		if (m[j].weight < COSTMODEL_MIN_WEIGHT)
			return 0;
	for (size_t j = 0; j + 1 < k; j++) {
		double s1 = m[j].sigma, s2 = m[j + 1].sigma, lo = log(m[j].cost_ns), hi = log(m[j + 1].cost_ns);
		double d = sqrt(2.0) * (hi - lo) / sqrt(s1 * s1 + s2 * s2), h = (hi - lo) / 6, at = lo, low = INFINITY;
		size_t c1, c2, ca;

		if (d <= COSTMODEL_MIN_D)
			return 0;
		for (int g = 1; g < 64; g++) {   /* the mixture's lowest point between the centres */
			double x = lo + (hi - lo) * g / 64, v = mixture_logpdf(m, k, x);

			if (v < low) {
				low = v;
				at = x;
			}
		}
		c1 = count_in(z, n, lo - h, lo + h);
		c2 = count_in(z, n, hi - h, hi + h);
		ca = count_in(z, n, at - h, at + h);
		if ((double)ca > COSTMODEL_MAX_DIP * (double)(c1 < c2 ? c1 : c2))
			return 0;
	}
	return 1;
}

static int cmp_mode(const void *a, const void *b)
{
	const struct costmodel_mode *x = a, *y = b;

	return x->cost_ns < y->cost_ns ? -1 : x->cost_ns > y->cost_ns;
}

int costmodel_modes(const double *cost_ns, size_t n, struct costmodel_modes *out)
{
	size_t ns = sample_len(n), m = 0, best = 1;
	struct costmodel_mode fit[COSTMODEL_MAX_MODES][COSTMODEL_MAX_MODES];
	double *z = malloc((ns * (COSTMODEL_MAX_MODES + 1) + 1) * sizeof(*z)), *resp;

	memset(out, 0, sizeof(*out));
	for (size_t k = 0; k < COSTMODEL_MAX_MODES; k++)
		out->bic[k] = NAN;
	if (!z)
		return -1;
	resp = z + ns;
	for (size_t j = 0; j < ns; j++) {
		double c = cost_ns[sample_at(j, n)];

		if (isfinite(c) && c > 0)
			z[m++] = log(c);
	}
	out->n = m;
	if (m < COSTMODEL_MIN_STREAMS) {
		free(z);
		return 0;
	}
	qsort(z, m, sizeof(*z), cmp_double);
	for (size_t k = 1; k <= COSTMODEL_MAX_MODES; k++) {
		double w[COSTMODEL_MAX_MODES], mu[COSTMODEL_MAX_MODES], var[COSTMODEL_MAX_MODES];
		double ll = em(z, m, k, resp, w, mu, var);

		/* 3k - 1 free parameters: k means, k variances, k - 1 weights */
		out->bic[k - 1] = -2 * ll + (double)(3 * k - 1) * log((double)m);
		for (size_t j = 0; j < k; j++)
			fit[k - 1][j] = (struct costmodel_mode){ exp(mu[j]), w[j], sqrt(var[j]) };
		qsort(fit[k - 1], k, sizeof(fit[k - 1][0]), cmp_mode);
		if (k > 1 && out->bic[k - 1] < out->bic[0] - COSTMODEL_BIC_MARGIN && separated(fit[k - 1], k, z, m) &&
		    (best == 1 || out->bic[k - 1] < out->bic[best - 1]))
			best = k;
	}
	out->k = best;
	memcpy(out->mode, fit[best - 1], best * sizeof(out->mode[0]));
	free(z);
	return 0;
}

/* ---- words ---- */

static void put_ns(struct buf *out, double ns)
{
	char t[FMT_LEN];

	buf_puts(out, fmt_duration(t, ns));
}

/* A whole number with thousands separators ("4,096"), else three significant digits. */
static void put_count(struct buf *out, double v)
{
	char t[FMT_LEN];

	if (v != floor(v) || fabs(v) >= 1e15)
		buf_printf(out, "%.3g", v);
	else
		buf_puts(out, fmt_count(t, (int64_t)v));
}

static int is_ns_key(const char *key)
{
	size_t n = strlen(key);

	return n >= 3 && strcmp(key + n - 3, "_ns") == 0;
}

/* A value of the feature key: a duration for *_ns, else a number. */
static void put_value(struct buf *out, const char *key, double v)
{
	if (is_ns_key(key))
		put_ns(out, v);
	else
		put_count(out, v);
}

/* The unit of a feature in "per ...": "call", "1,000 calls" for unit.calls; "ns" for *_ns; else "unit". */
static void put_per(struct buf *out, const char *key, double scale)
{
	const char *c = key + strlen(key);
	size_t n;

	if (is_ns_key(key)) {
		buf_puts(out, "ns");
		return;
	}
	while (c > key && c[-1] != '.' && c[-1] != '_')
		c--;
	n = strlen(c);
	if (scale > 1) {
		put_count(out, scale);
		buf_putc(out, ' ');
	}
	if (n > 1 && c[n - 1] == 's' && strspn(c, "abcdefghijklmnopqrstuvwxyz") == n)
		buf_append(out, c, scale > 1 ? n : n - 1);
	else
		buf_puts(out, scale > 1 ? "units" : "unit");
}

void costmodel_fit_words(const char *key, const struct costmodel_fit *f, struct buf *out)
{
	if (f->form == COSTMODEL_LINEAR) {
		double s = fabs(f->slope_ns), scale = 1;

		/* under a nanosecond per unit: per thousands of them */
		for (int i = 0; i < 3 && !is_ns_key(key) && s * scale < 1; i++)
			scale *= 1000;
		buf_printf(out, "cost %s with %s: ", f->slope_ns > 0 ? "grows" : "falls", key);
		put_ns(out, s * scale);
		buf_puts(out, " per ");
		put_per(out, key, scale);
		buf_printf(out, ", R^2 %.2f", f->r2_linear);
	} else if (f->form == COSTMODEL_STEPS && f->nleaves == 2) {
		buf_printf(out, "cost %s from ", f->leaf[1].cost_ns > f->leaf[0].cost_ns ? "jumps" : "drops");
		put_ns(out, f->leaf[0].cost_ns);
		buf_puts(out, " to ");
		put_ns(out, f->leaf[1].cost_ns);
		buf_printf(out, " above %s ", key);
		put_value(out, key, f->leaf[0].up_to);
		buf_printf(out, ", R^2 %.2f", f->r2_tree);
	} else if (f->form == COSTMODEL_STEPS) {
		buf_printf(out, "cost steps with %s: ", key);
		for (size_t i = 0; i < f->nleaves; i++) {
			put_ns(out, f->leaf[i].cost_ns);
			if (i + 1 < f->nleaves) {
				buf_puts(out, " up to ");
				put_value(out, key, f->leaf[i].up_to);
				buf_puts(out, ", ");
			} else {
				buf_puts(out, " above ");
				put_value(out, key, f->leaf[i].above);
			}
		}
		buf_printf(out, ", R^2 %.2f", f->r2_tree);
	}
}

void costmodel_modes_words(const struct costmodel_modes *m, struct buf *out)
{
	static const char *const count[] = { "", "one", "two", "three" };

	if (m->k < 2 || m->k > COSTMODEL_MAX_MODES)
		return;
	buf_printf(out, "%s modes: ", count[m->k]);
	for (size_t j = 0; j < m->k; j++) {
		if (j)
			buf_puts(out, j + 1 == m->k ? " and " : ", ");
		put_ns(out, m->mode[j].cost_ns);
		{
			char t[FMT_LEN];

			buf_printf(out, " (%s)", fmt_share(t, m->mode[j].weight));
		}
	}
}
