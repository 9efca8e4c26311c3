/* Unit tests of the excess cost (clusterer/excess.c) and of the baseline stacks' matching
 * (miner/baseline.c): exact point estimates worked out by hand, groups by unit type, the
 * bootstrap interval's determinism and coverage of the estimate. */
#include "clusterer/excess.h"
#include "miner/baseline.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>

/* 2 violating streams (0, 1) and 2 baseline ones (2, 3), one unit type: pooled. */
static void test_pooled(void)
{
	static const uint8_t base[] = { 0, 0, 1, 1 };
	static const uint32_t type[] = { 0, 0, 0, 0 };
	struct excess_streams es = { 4, base, type, 1 };
	struct excess *x = excess_open(&es, 0, 1);
	static const uint32_t s[] = { 0, 1, 2, 3 };
	static const uint64_t c[] = { 100, 100, 40, 60 };
	struct excess_result r;

	CHECK(x != NULL);
	CHECK_INT((long long)excess_baseline_streams(x), 2);
	CHECK_INT(excess_measure(x, s, c, 4, &r), 0);
	/* 200 spent; normal units spend (40 + 60) / 2 = 50 each: 2 x 50 = 100 expected */
	CHECK(r.baseline_cost == 50.0);
	CHECK(r.expected == 100.0);
	CHECK(r.excess == 100.0);
	CHECK_INT(r.baseline_streams, 2);
	CHECK(isnan(r.lo) && isnan(r.hi));
	/* a cluster absent from the baseline: all of it is excess */
	CHECK_INT(excess_measure(x, s, c, 2, &r), 0);
	CHECK(r.expected == 0.0 && r.excess == 200.0);
	excess_free(x);
	/* no baseline stream: nothing to measure against */
	es.baseline = (const uint8_t[]){ 0, 0, 0, 0 };
	CHECK(excess_open(&es, 0, 1) == NULL);
}

/* Unit type 1 has 5 baseline streams (a group of its own); type 2 has 1 (pooled). */
static void test_groups(void)
{
	/* streams 0-2: violating of type 1; 3: violating of type 2; 4-8: baseline of type 1; 9: baseline of type 2 */
	static const uint8_t base[] = { 0, 0, 0, 0, 1, 1, 1, 1, 1, 1 };
	static const uint32_t type[] = { 1, 1, 1, 2, 1, 1, 1, 1, 1, 2 };
	struct excess_streams es = { 10, base, type, 3 };
	struct excess *x = excess_open(&es, 0, 7);
	static const uint32_t s[] = { 0, 3, 4, 9 };
	static const uint64_t c[] = { 300, 80, 50, 60 };
	struct excess_result r;

	CHECK(x != NULL);
	CHECK_INT(excess_measure(x, s, c, 4, &r), 0);
	/* type 1: 3 violating streams against 5 baseline (50 in all): 3 x 50 / 5 = 30;
	 * pooled: 1 violating stream (type 2) against all 6 baseline (110 in all): 110 / 6 */
	CHECK(fabs(r.expected - (30.0 + 110.0 / 6)) < 1e-9);
	CHECK(fabs(r.excess - (380.0 - 30.0 - 110.0 / 6)) < 1e-9);
	CHECK(fabs(r.baseline_cost - 110.0 / 6) < 1e-9);
	excess_free(x);
}

/* The bootstrap: the same seed gives the same interval, which holds the estimate. */
static void test_bootstrap(void)
{
	enum { N = 400 };
	uint8_t base[N];
	uint32_t type[N], s[N];
	uint64_t c[N];
	struct excess_streams es = { N, base, type, 1 };
	struct excess *x, *y;
	struct excess_result r, r2;

	for (int i = 0; i < N; i++) {
		base[i] = i >= N / 2;
		type[i] = 0;
		s[i] = (uint32_t)i;
		/* violating: 100 + 2 * (i % 50); baseline: 60 + (i % 40) */
		c[i] = base[i] ? 60 + (uint64_t)(i % 40) : 100 + 2 * (uint64_t)(i % 50);
	}
	x = excess_open(&es, 500, 42);
	y = excess_open(&es, 500, 42);
	CHECK(x && y);
	CHECK_INT(excess_measure(x, s, c, N, &r), 0);
	CHECK_INT(excess_measure(y, s, c, N, &r2), 0);
	CHECK(r.lo == r2.lo && r.hi == r2.hi);
	CHECK(r.lo < r.excess && r.excess < r.hi);
	/* per stream the excess is 149 - 79.5 = 69.5; 200 streams: 13900 */
	CHECK(fabs(r.excess - 13900.0) < 1e-6);
	/* about +-2 standard errors (440: 200 x 28.9^2 + 200^2 x 11.5^2 / 200 under the square root) */
	CHECK(r.hi - r.lo > 800 && r.hi - r.lo < 3000);
	excess_free(x);
	excess_free(y);
}

static void test_match(void)
{
	static const uint32_t s0[] = { 1, 2, 3, 4 }, s1[] = { 1, 3, 5 }, s2[] = { 2, 3, 4 }, s3[] = { 1, 2, 3, 4 };
	static const uint32_t p0[] = { 1, 3 }, p1[] = { 2, 4 }, p2[] = { 9 }, p3[] = { 3, 1 };
	struct baseline_seq st[] = { { s0, 4, 'r' }, { s1, 3, 'r' }, { s2, 3, 'r' }, { s3, 4, 'w' } };
	struct baseline_seq pt[] = { { p0, 2, 'r' }, { p1, 2, 'r' }, { p2, 1, 'r' }, { p3, 2, 'r' }, { p0, 2, 'w' } };
	uint32_t *off, *idx;

	CHECK_INT(baseline_match(st, 4, pt, 5, 2, &off, &idx), 0);
	/* [1 3] in stacks 0 and 1; [2 4] in 0 and 2; [9] nowhere; [3 1]: order matters; kind w: stack 3 */
	CHECK_INT(off[1] - off[0], 2);
	CHECK_INT(idx[off[0]], 0);
	CHECK_INT(idx[off[0] + 1], 1);
	CHECK_INT(off[2] - off[1], 2);
	CHECK_INT(idx[off[1]], 0);
	CHECK_INT(idx[off[1] + 1], 2);
	CHECK_INT(off[3] - off[2], 0);
	CHECK_INT(off[4] - off[3], 0);
	CHECK_INT(off[5] - off[4], 1);
	CHECK_INT(idx[off[4]], 3);
	free(off);
	free(idx);
}

int main(void)
{
	RUN(test_pooled);
	RUN(test_groups);
	RUN(test_bootstrap);
	RUN(test_match);
	return CHECK_DONE();
}
