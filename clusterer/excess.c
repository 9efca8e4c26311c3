/*
 * excess: a cluster's cost in the slow units beyond its cost in normal ones, with
 * a bootstrap interval (excess.h, docs/analysis.md).
 *
 * Group 0 pools every baseline stream and takes the violating streams whose unit
 * type has too few baseline streams of its own; group t + 1 is unit type t when
 * it has enough. expected(K) is linear in the baseline streams' costs:
 *
 *     expected(K) = sum over baseline b of cost_b(K) x (ratio[own(b)] + ratio[0])
 *
 * with ratio[g] = |V_g| / |B_g| (0 for a type without a group of its own), so a
 * cluster is measured in one pass over its streams per replicate. A replicate
 * estimates each group's mean cost per violating and per baseline stream from
 * the weighted streams and scales their difference by the |V_g| observed (the
 * number of slow units is what it is: only the costs are resampled):
 *
 *     excess_r = sum over g of |V_g| x (S_Vg / W_Vg - S_Bg / W_Bg)
 *
 * again linear in the streams' costs, with factors |V_g| / W_Vg and
 * |V_g| / W_Bg drawn once for the run. A group whose violating or baseline
 * streams all drew 0 in a replicate adds nothing to it.
 */
#include "clusterer/excess.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_POISSON 16

struct excess {
	size_t n;
	int reps;
	uint64_t seed;
	const uint8_t *base;
	uint32_t *own;           /* per stream: its group (violating) or its own type's group, 0: none */
	uint32_t ngroups;
	size_t nbase;
	double *ratio;           /* [ngroups]: the point estimate's |V_g| / |B_g| */
	double *rv, *rb;         /* [reps * ngroups]: a replicate's |V_g| / W_Vg and |V_g| / W_Bg */
	uint64_t cdf[MAX_POISSON]; /* P(Poisson(1) <= k) scaled to 2^53 */
};

static uint64_t mix64(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* The weight of stream s in replicate r: a Poisson(1) draw. */
static unsigned weight(const struct excess *x, int r, uint32_t s)
{
	uint64_t u = mix64(x->seed ^ ((uint64_t)(uint32_t)r << 32 | s)) >> 11;
	unsigned k = 0;

	while (k < MAX_POISSON - 1 && u >= x->cdf[k])
		k++;
	return k;
}

struct excess *excess_open(const struct excess_streams *s, int replicates, uint64_t seed)
{
	struct excess *x;
	uint32_t *nb_type = NULL;
	double *wv = NULL, *wb = NULL, *nv = NULL, *nb = NULL;
	double p = exp(-1.0), cum = 0;
	size_t nbase = 0;

	for (size_t i = 0; i < s->n; i++)
		nbase += s->baseline[i] != 0;
	if (!nbase || replicates < 0 || replicates > 10000)
		return NULL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->n = s->n;
	x->reps = replicates;
	x->seed = seed;
	x->base = s->baseline;
	x->nbase = nbase;
	x->ngroups = s->ntypes + 1;
	for (int k = 0; k < MAX_POISSON; k++) {
		cum += p;
		p /= k + 1;
		x->cdf[k] = k == MAX_POISSON - 1 ? UINT64_MAX : (uint64_t)ldexp(cum, 53);
	}
	x->own = malloc((s->n + 1) * sizeof(*x->own));
	x->ratio = calloc(x->ngroups, sizeof(double));
	x->rv = calloc((size_t)replicates * x->ngroups + 1, sizeof(double));
	x->rb = calloc((size_t)replicates * x->ngroups + 1, sizeof(double));
	nb_type = calloc(s->ntypes + 1, sizeof(*nb_type));
	nv = calloc(x->ngroups, sizeof(double));
	nb = calloc(x->ngroups, sizeof(double));
	wv = calloc(x->ngroups, sizeof(double));
	wb = calloc(x->ngroups, sizeof(double));
	if (!x->own || !x->ratio || !x->rv || !x->rb || !nb_type || !nv || !nb || !wv || !wb)
		goto fail_free;
	for (size_t i = 0; i < s->n; i++)
		if (s->baseline[i])
			nb_type[s->type[i]]++;
	for (size_t i = 0; i < s->n; i++) {
		uint32_t t = s->type[i];
		x->own[i] = nb_type[t] >= EXCESS_MIN_BASELINE ? t + 1 : 0;
	}
	/* point estimate: plain counts */
	for (size_t i = 0; i < s->n; i++) {
		if (s->baseline[i]) {
			nb[0]++;
			if (x->own[i])
				nb[x->own[i]]++;
		} else {
			nv[x->own[i]]++;
		}
	}
	for (uint32_t g = 0; g < x->ngroups; g++)
		x->ratio[g] = nb[g] > 0 ? nv[g] / nb[g] : 0;
	/* replicates: the same counts, each stream weighted by its draw */
	for (int r = 0; r < replicates; r++) {
		memset(wv, 0, x->ngroups * sizeof(double));
		memset(wb, 0, x->ngroups * sizeof(double));
		for (size_t i = 0; i < s->n; i++) {
			unsigned w = weight(x, r, (uint32_t)i);

			if (!w)
				continue;
			if (s->baseline[i]) {
				wb[0] += w;
				if (x->own[i])
					wb[x->own[i]] += w;
			} else {
				wv[x->own[i]] += w;
			}
		}
		for (uint32_t g = 0; g < x->ngroups; g++) {
			size_t at = (size_t)r * x->ngroups + g;
			bool both = wv[g] > 0 && wb[g] > 0;

			x->rv[at] = both ? nv[g] / wv[g] : 0;
			x->rb[at] = both ? nv[g] / wb[g] : 0;
		}
	}
	free(nb_type);
	free(nv);
	free(nb);
	free(wv);
	free(wb);
	return x;
fail_free:
	free(nb_type);
	free(nv);
	free(nb);
	free(wv);
	free(wb);
	excess_free(x);
	return NULL;
}

void excess_free(struct excess *x)
{
	if (!x)
		return;
	free(x->own);
	free(x->ratio);
	free(x->rv);
	free(x->rb);
	free(x);
}

size_t excess_baseline_streams(const struct excess *x)
{
	return x->nbase;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int excess_measure(const struct excess *x, const uint32_t *streams, const uint64_t *costs, size_t n,
		   struct excess_result *out)
{
	double total = 0, base = 0, expected = 0, *vals;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		uint32_t s = streams[i];
		double c = (double)costs[i];

		if (x->base[s]) {
			out->baseline_streams++;
			base += c;
			expected += c * (x->ratio[0] + (x->own[s] ? x->ratio[x->own[s]] : 0));
		} else {
			total += c;
		}
	}
	out->baseline_cost = base / (double)x->nbase;
	out->expected = expected;
	out->excess = total - expected;
	out->lo = out->hi = out->sd = NAN;
	if (!x->reps)
		return 0;
	vals = malloc((size_t)x->reps * sizeof(*vals));
	if (!vals)
		return -1;
	for (int r = 0; r < x->reps; r++) {
		const double *rv = x->rv + (size_t)r * x->ngroups, *rb = x->rb + (size_t)r * x->ngroups;
		double v = 0;

		for (size_t i = 0; i < n; i++) {
			uint32_t s = streams[i];
			unsigned w = weight(x, r, s);

			if (!w)
				continue;
			if (x->base[s])
				v -= w * (double)costs[i] * (rb[0] + (x->own[s] ? rb[x->own[s]] : 0));
			else
				v += w * (double)costs[i] * rv[x->own[s]];
		}
		vals[r] = v;
	}
	{
		double m = 0, ss = 0;

		for (int r = 0; r < x->reps; r++)
			m += vals[r];
		m /= x->reps;
		for (int r = 0; r < x->reps; r++)
			ss += (vals[r] - m) * (vals[r] - m);
		out->sd = x->reps > 1 ? sqrt(ss / (x->reps - 1)) : 0;
	}
	qsort(vals, (size_t)x->reps, sizeof(*vals), cmp_double);
	/* nearest rank: the ceil(p R)-th smallest */
	out->lo = vals[(size_t)ceil(0.025 * x->reps) - 1];
	out->hi = vals[(size_t)ceil(0.975 * x->reps) - 1];
	free(vals);
	return 0;
}
