/* Unit tests of common/stats.c: Fisher's exact test against SciPy's values
 * (scipy.stats.fisher_exact(..., alternative='greater'), SciPy 1.10), and the
 * Benjamini-Hochberg adjustment worked out by hand. */
#include "common/stats.h"
#include "tests/unit/check.h"

#include <math.h>

/* relative agreement to 1e-9 (the log-gamma sums of very small p-values) */
static int close_to(double x, double want)
{
	return fabs(x - want) <= 1e-9 * fabs(want) + 1e-300;
}

static void test_fisher(void)
{
	static const struct {
		uint64_t a, b, c, d;
		double p;
	} t[] = {
		{ 3, 1, 1, 3, 0.24285714285714283 },
		{ 10, 2, 3, 15, 0.000465180943362905 },
		{ 0, 5, 5, 0, 1.0 },
		{ 84, 16, 31, 269, 2.8855080787561896e-43 },
		{ 1, 0, 0, 1, 0.5 },
		{ 50, 0, 0, 50, 9.911653021418337e-30 },
		{ 5, 5, 5, 5, 0.6718591006516703 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		double p = stats_fisher_greater(t[i].a, t[i].b, t[i].c, t[i].d);
		if (!close_to(p, t[i].p))
			fprintf(stderr, "  table %zu: %.17g, SciPy %.17g\n", i, p, t[i].p);
		CHECK(close_to(p, t[i].p));
	}
	CHECK(stats_fisher_greater(2, 30, 40, 3) > 1 - 1e-12);
	CHECK(stats_fisher_greater(0, 0, 4, 5) == 1.0);
}

static void test_bh(void)
{
	double p[] = { 0.01, 0.04, 0.03, 0.2, 0.005 }, q[5];
	static const double want[] = { 0.025, 0.05, 0.05, 0.2, 0.025 };

	CHECK_INT(stats_bh(p, 5, q), 0);
	for (int i = 0; i < 5; i++)
		CHECK(close_to(q[i], want[i]));
	CHECK_INT(stats_bh(p, 5, p), 0);     /* in place */
	CHECK(close_to(p[2], 0.05));
}

int main(void)
{
	RUN(test_fisher);
	RUN(test_bh);
	return CHECK_DONE();
}
