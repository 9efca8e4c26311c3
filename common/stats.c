/* stats: Fisher's exact test and the Benjamini-Hochberg adjustment (see stats.h). */
#include "common/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* log of n choose k */
static double lchoose(double n, double k)
{
	return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1);
}

double stats_fisher_greater(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	double n = (double)a + b + c + d, row = (double)a + b, col = (double)a + c;
	uint64_t hi = a + b < a + c ? a + b : a + c;
	double lnorm, p = 0, top = -INFINITY;

	if (a + b == 0 || a + c == 0)
		return 1.0;
	lnorm = lchoose(n, row);
	/* sum the tail from its largest term down, in a log-sum-exp to keep tiny p-values exact */
	for (uint64_t x = a; x <= hi; x++) {
		double lp = lchoose(col, (double)x) + lchoose(n - col, row - (double)x) - lnorm;

		if (lp > top) {
			p = p * exp(top - lp) + 1;
			top = lp;
		} else {
			p += exp(lp - top);
		}
		/* the terms fall fast past the mode: stop once they no longer count */
		if (lp < top - 40)
			break;
	}
	p = exp(top) * p;
	return p > 1 ? 1 : p;
}

struct ranked {
	double p;
	size_t i;
};

static int cmp_ranked(const void *x, const void *y)
{
	const struct ranked *a = x, *b = y;

	if (a->p != b->p)
		return a->p < b->p ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

int stats_bh(const double *p, size_t n, double *q)
{
	struct ranked *r;
	double run = 1;

	if (!n)
		return 0;
	r = malloc(n * sizeof(*r));
	if (!r)
		return -1;
	for (size_t i = 0; i < n; i++)
		r[i] = (struct ranked){ p[i], i };
	qsort(r, n, sizeof(*r), cmp_ranked);
	/* q of the k-th smallest = min over j >= k of p_j n / j */
	for (size_t k = n; k-- > 0;) {
		double v = r[k].p * (double)n / (double)(k + 1);

		if (v < run)
			run = v;
		q[r[k].i] = run;
	}
	free(r);
	return 0;
}
