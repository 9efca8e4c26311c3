/* Unit tests of common/costmodel.c on synthetic streams whose answer is known: a linear cost (its
 * slope, R^2 1), a step (the tree's split), noise (nothing said), a bimodal cost (two modes, their
 * weights), a unimodal one (none), too few streams, the sample cap, and the sentences exactly. */
#include "common/costmodel.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>

/* a deterministic generator: xorshift64*, uniform in (0, 1), and a standard normal (Box-Muller) */
static uint64_t rng_state = 88172645463325252ULL;

static double uniform(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return ((double)((rng_state * 2685821657736338717ULL) >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(void)
{
	return sqrt(-2 * log(uniform())) * cos(2 * 3.14159265358979323846 * uniform());
}

static const char *fit_words(const char *key, const struct costmodel_fit *f)
{
	static char text[512];
	struct buf b = BUF_INIT(4096);

	costmodel_fit_words(key, f, &b);
	snprintf(text, sizeof(text), "%s", buf_cstr(&b));
	buf_release(&b);
	return text;
}

static const char *modes_words(const struct costmodel_modes *m)
{
	static char text[512];
	struct buf b = BUF_INIT(4096);

	costmodel_modes_words(m, &b);
	snprintf(text, sizeof(text), "%s", buf_cstr(&b));
	buf_release(&b);
	return text;
}

static int within(double x, double want, double rel)
{
	return fabs(x - want) <= rel * fabs(want);
}

/* cost = 2 ms + 0.8 ms per call, exactly: the line, R^2 1, in words as the issue asks */
static void test_linear_exact(void)
{
	double x[100], y[100];
	struct costmodel_fit f;

	for (int i = 0; i < 100; i++) {
		x[i] = (i * 37) % 100 + 1;   /* 1..100, not in order */
		y[i] = 2e6 + 8e5 * x[i];
	}
	CHECK_INT(costmodel_fit(x, y, 100, &f), 0);
	CHECK_INT(f.form, COSTMODEL_LINEAR);
	CHECK_INT(f.n, 100);
	CHECK_INT(f.distinct, 100);
	CHECK(within(f.slope_ns, 8e5, 1e-9));
	CHECK(within(f.intercept_ns, 2e6, 1e-9));
	CHECK(within(f.r2_linear, 1, 1e-12));
	CHECK(within(f.r2_linear_holdout, 1, 1e-12));
	CHECK(f.r2_tree < f.r2_linear);
	CHECK_STR(fit_words("unit.calls", &f), "cost grows with unit.calls: 800 µs per call, R^2 1.00");
}

/* the same with noise (sd 2 ms on 2..82 ms): the slope within 3 %, R^2 high but below 1 */
static void test_linear_noisy(void)
{
	double x[300], y[300];
	struct costmodel_fit f;

	for (int i = 0; i < 300; i++) {
		x[i] = floor(uniform() * 100) + 1;
		y[i] = 2e6 + 8e5 * x[i] + 2e6 * normal();
	}
	CHECK_INT(costmodel_fit(x, y, 300, &f), 0);
	CHECK_INT(f.form, COSTMODEL_LINEAR);
	CHECK(within(f.slope_ns, 8e5, 0.03));
	CHECK(f.r2_linear > 0.95 && f.r2_linear < 1);
	CHECK(f.r2_linear_holdout > 0.9);
}

/* 3 ms up to size 4096, 45 ms above: the tree, its split exactly where it is */
static void test_step(void)
{
	double x[100], y[100];
	struct costmodel_fit f;

	for (int i = 0; i < 100; i++) {
		x[i] = 64.0 * ((i * 71) % 100 + 1);   /* 64..6400 */
		y[i] = x[i] <= 4096 ? 3e6 : 45e6;
	}
	CHECK_INT(costmodel_fit(x, y, 100, &f), 0);
	CHECK_INT(f.form, COSTMODEL_STEPS);
	CHECK_INT(f.nleaves, 2);
	CHECK(f.leaf[0].above == -INFINITY && f.leaf[1].up_to == INFINITY);
	CHECK(f.leaf[0].up_to == 4096 && f.leaf[1].above == 4096);
	CHECK_INT(f.leaf[0].n, 64);
	CHECK_INT(f.leaf[1].n, 36);
	CHECK(within(f.leaf[0].cost_ns, 3e6, 1e-9) && within(f.leaf[1].cost_ns, 45e6, 1e-9));
	CHECK(within(f.r2_tree, 1, 1e-9));
	/* out of fold, a stream next to the step may fall on the wrong side of a fold's cut */
	CHECK(f.r2_tree_holdout > 0.9);
	CHECK(f.r2_linear < 0.9);
	CHECK_STR(fit_words("size", &f), "cost jumps from 3 ms to 45 ms above size 4,096, R^2 1.00");
	/* a duration feature: its values as durations */
	CHECK_STR(fit_words("unit.threshold_ns", &f), "cost jumps from 3 ms to 45 ms above unit.threshold_ns 4.1 µs, R^2 1.00");
}

/* cost unrelated to the feature: nothing, the hold-out refusing what the tree overfits */
static void test_noise(void)
{
	double x[400], y[400];
	struct costmodel_fit f;

	for (int i = 0; i < 400; i++) {
		x[i] = floor(uniform() * 1000);
		y[i] = 5e6 * exp(0.5 * normal());
	}
	CHECK_INT(costmodel_fit(x, y, 400, &f), 0);
	CHECK_INT(f.form, COSTMODEL_NONE);
	CHECK(f.r2_linear < 0.05);
	CHECK(f.r2_tree_holdout < COSTMODEL_MIN_R2);
	CHECK_STR(fit_words("x", &f), "");
}

/* too few streams, two values, a constant cost, NaN features left out */
static void test_too_little(void)
{
	double x[40], y[40];
	struct costmodel_fit f;

	for (int i = 0; i < 40; i++) {
		x[i] = i;
		y[i] = 1e6 * i;
	}
	CHECK_INT(costmodel_fit(x, y, COSTMODEL_MIN_STREAMS - 1, &f), 0);
	CHECK_INT(f.form, COSTMODEL_NONE);
	CHECK_INT(f.n, COSTMODEL_MIN_STREAMS - 1);
	for (int i = 0; i < 40; i++)
		x[i] = i % 2;
	CHECK_INT(costmodel_fit(x, y, 40, &f), 0);
	CHECK_INT(f.form, COSTMODEL_NONE);
	CHECK_INT(f.distinct, 2);
	for (int i = 0; i < 40; i++) {
		x[i] = i;
		y[i] = 7e6;
	}
	CHECK_INT(costmodel_fit(x, y, 40, &f), 0);
	CHECK_INT(f.form, COSTMODEL_NONE);
	for (int i = 0; i < 40; i++) {
		x[i] = i < 25 ? NAN : i;
		y[i] = 1e6 * i;
	}
	CHECK_INT(costmodel_fit(x, y, 40, &f), 0);
	CHECK_INT(f.n, 15);
	CHECK_INT(f.form, COSTMODEL_NONE);
}

/* above the cap, a stride sample of COSTMODEL_MAX_ROWS streams; a negative slope; per thousands */
static void test_cap(void)
{
	size_t n = 12000;
	double *x = malloc(n * sizeof(*x)), *y = malloc(n * sizeof(*y));
	struct costmodel_fit f;

	for (size_t i = 0; i < n; i++) {
		x[i] = (double)(i * 7919 % n) * 1000;
		y[i] = 9e9 - 0.25 * x[i];   /* 0.25 ns less per byte */
	}
	CHECK_INT(costmodel_fit(x, y, n, &f), 0);
	CHECK_INT(f.n, COSTMODEL_MAX_ROWS);
	CHECK_INT(f.form, COSTMODEL_LINEAR);
	CHECK(within(f.slope_ns, -0.25, 1e-9));
	CHECK_STR(fit_words("body.bytes", &f), "cost falls with body.bytes: 250 ns per 1,000 bytes, R^2 1.00");
	CHECK_STR(fit_words("host.load1", &f), "cost falls with host.load1: 250 ns per 1,000 units, R^2 1.00");
	free(x);
	free(y);
}

/* three steps in words, built by hand */
static void test_steps_words(void)
{
	struct costmodel_fit f = {
		.form = COSTMODEL_STEPS, .r2_tree = 0.934, .nleaves = 3,
		.leaf = { { -INFINITY, 100, 3e6, 10 }, { 100, 4096, 10.5e6, 10 }, { 4096, INFINITY, 1.25e9, 10 } },
	};

	CHECK_STR(fit_words("unit.calls", &f), "cost steps with unit.calls: 3 ms up to 100, 10.5 ms up to 4,096, 1.25 s above 4,096, R^2 0.93");
	f.nleaves = 2;
	f.leaf[1].cost_ns = 850;
	CHECK_STR(fit_words("unit.calls", &f), "cost drops from 3 ms to 850 ns above unit.calls 100, R^2 0.93");
}

/* 80 % around 3 ms, 20 % around 45 ms: two modes, their centres and weights */
static void test_bimodal(void)
{
	double y[500];
	struct costmodel_modes m;

	for (int i = 0; i < 500; i++)
		y[i] = (i % 5 == 0 ? 45e6 : 3e6) * exp(0.15 * normal());
	CHECK_INT(costmodel_modes(y, 500, &m), 0);
	CHECK_INT(m.n, 500);
	CHECK_INT(m.k, 2);
	CHECK(within(m.mode[0].cost_ns, 3e6, 0.05) && within(m.mode[1].cost_ns, 45e6, 0.05));
	CHECK(fabs(m.mode[0].weight - 0.8) < 0.02 && fabs(m.mode[1].weight - 0.2) < 0.02);
	CHECK(within(m.mode[0].sigma, 0.15, 0.2));
	CHECK(m.bic[1] < m.bic[0] - COSTMODEL_BIC_MARGIN);
	/* in words, rounded */
	m.mode[0] = (struct costmodel_mode){ 3e6, 0.8, 0.1 };
	m.mode[1] = (struct costmodel_mode){ 45e6, 0.2, 0.1 };
	CHECK_STR(modes_words(&m), "two modes: 3 ms (80 %) and 45 ms (20 %)");
	m.k = 3;
	m.mode[2] = (struct costmodel_mode){ 1.5e9, 0.004, 0.1 };
	CHECK_STR(modes_words(&m), "three modes: 3 ms (80 %), 45 ms (20 %) and 1.5 s (0.4 %)");
}

/* three well-apart modes */
static void test_trimodal(void)
{
	double y[600];
	struct costmodel_modes m;

	for (int i = 0; i < 600; i++)
		y[i] = (i % 3 == 0 ? 1e6 : i % 3 == 1 ? 20e6 : 400e6) * exp(0.1 * normal());
	CHECK_INT(costmodel_modes(y, 600, &m), 0);
	CHECK_INT(m.k, 3);
	CHECK(within(m.mode[0].cost_ns, 1e6, 0.05) && within(m.mode[1].cost_ns, 20e6, 0.05) &&
	      within(m.mode[2].cost_ns, 400e6, 0.05));
	CHECK(fabs(m.mode[1].weight - 1.0 / 3) < 0.02);
}

/* one log-normal hump; two close humps (Ashman's D under 2); too few streams */
static void test_unimodal(void)
{
	double y[500];
	struct costmodel_modes m;

	for (int i = 0; i < 500; i++)
		y[i] = 5e6 * exp(0.6 * normal());
	CHECK_INT(costmodel_modes(y, 500, &m), 0);
	CHECK_INT(m.k, 1);
	CHECK(within(m.mode[0].cost_ns, 5e6, 0.1));
	CHECK(within(m.mode[0].weight, 1, 1e-12));
	CHECK_STR(modes_words(&m), "");
	for (int i = 0; i < 500; i++)
		y[i] = (i % 2 ? 5e6 : 6e6) * exp(0.2 * normal());
	CHECK_INT(costmodel_modes(y, 500, &m), 0);
	CHECK_INT(m.k, 1);
	for (int i = 0; i < 500; i++)
		y[i] = i % 2 ? 3e6 : 45e6;
	CHECK_INT(costmodel_modes(y, COSTMODEL_MIN_STREAMS - 1, &m), 0);
	CHECK_INT(m.k, 0);
	CHECK(isnan(m.bic[0]));
	y[3] = 0;   /* no log of 0: left out */
	CHECK_INT(costmodel_modes(y, 40, &m), 0);
	CHECK_INT(m.n, 39);
	CHECK_INT(m.k, 2);
}

/* thousands of streams of a flat or skewed hump: a mixture fits it better than one Gaussian (BIC),
 * and its components are apart by Ashman's D, but the data do not dip between them: one mode */
static void test_flat(void)
{
	size_t n = 5000;
	double *y = malloc(n * sizeof(*y));
	struct costmodel_modes m;

	for (size_t i = 0; i < n; i++)
		y[i] = 2e6 + 13e6 * uniform();
	CHECK_INT(costmodel_modes(y, n, &m), 0);
	CHECK(m.bic[1] < m.bic[0] - COSTMODEL_BIC_MARGIN);
	CHECK_INT(m.k, 1);
	for (size_t i = 0; i < n; i++)
		y[i] = 2e6 + 5e4 * floor(1 + 200 * uniform()) + 3e6 * uniform();
	CHECK_INT(costmodel_modes(y, n, &m), 0);
	CHECK_INT(m.k, 1);
	for (size_t i = 0; i < n; i++)
		y[i] = 1e6 * exp(1.5 * uniform());
	CHECK_INT(costmodel_modes(y, n, &m), 0);
	CHECK_INT(m.k, 1);
	/* the same number of streams, two modes: found */
	for (size_t i = 0; i < n; i++)
		y[i] = (i % 3 ? 2e6 : 9e6) * exp(0.2 * normal());
	CHECK_INT(costmodel_modes(y, n, &m), 0);
	CHECK_INT(m.k, 2);
	CHECK(fabs(m.mode[1].weight - 1.0 / 3) < 0.02);
	free(y);
}

int main(void)
{
	RUN(test_linear_exact);
	RUN(test_linear_noisy);
	RUN(test_step);
	RUN(test_noise);
	RUN(test_too_little);
	RUN(test_cap);
	RUN(test_steps_words);
	RUN(test_bimodal);
	RUN(test_trimodal);
	RUN(test_unimodal);
	RUN(test_flat);
	return CHECK_DONE();
}
