/*
 * check: the unit-test harness. Each test file defines test functions and a
 * main() that runs them with RUN(); failures print file:line and the values,
 * and the run ends with the line "N passed, N failed". A test function that
 * made no check at all fails: a test that cannot fail is a defect.
 */
#ifndef SM_CHECK_H
#define SM_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_passed, check_failed, check_cur_failed;
static long check_cur_made;     /* checks made by the running test function */

#define CHECK(cond)                                                                   \
	do {                                                                          \
		check_cur_made++;                                                     \
		if (!(cond)) {                                                        \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
				#cond);                                               \
			check_cur_failed = 1;                                         \
		}                                                                     \
	} while (0)

#define CHECK_INT(a, b)                                                                  \
	do {                                                                             \
		long long check_a_ = (long long)(a), check_b_ = (long long)(b);          \
		check_cur_made++;                                                        \
		if (check_a_ != check_b_) {                                              \
			fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n",    \
				__FILE__, __LINE__, #a, check_a_, #b, check_b_);         \
			check_cur_failed = 1;                                            \
		}                                                                        \
	} while (0)

#define CHECK_STR(a, b)                                                                   \
	do {                                                                              \
		const char *check_a_ = (a), *check_b_ = (b);                              \
		check_cur_made++;                                                         \
		if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {         \
			fprintf(stderr, "  %s:%d: %s == \"%s\", expected \"%s\"\n",       \
				__FILE__, __LINE__, #a, check_a_ ? check_a_ : "(null)",   \
				check_b_ ? check_b_ : "(null)");                          \
			check_cur_failed = 1;                                             \
		}                                                                         \
	} while (0)

/* |a - b| within 1e-12 relative (doubles computed in another order). */
#define CHECK_NEAR(a, b)                                                                          \
	do {                                                                                      \
		double near_a_ = (a), near_b_ = (b);                                              \
		check_cur_made++;                                                                 \
		if (!(fabs(near_a_ - near_b_) <= 1e-12 * (1 + fabs(near_b_)))) {                   \
			fprintf(stderr, "  %s:%d: %s == %.17g, expected %.17g\n", __FILE__, __LINE__,   \
				#a, near_a_, near_b_);                                            \
			check_cur_failed = 1;                                                     \
		}                                                                                 \
	} while (0)

/* For a test's own checking helpers: one check made, and whether it failed. */
static inline void check_made(int failed)
{
	check_cur_made++;
	if (failed)
		check_cur_failed = 1;
}

/* Tests' random inputs: xorshift64 from a fixed seed (check_seed() chooses another), so that a
 * failure comes back on the next run. */
static inline uint64_t *check_rng(void)
{
	static uint64_t state = 88172645463325252ULL;

	return &state;
}

static inline void check_seed(uint64_t seed)
{
	*check_rng() = seed ? seed : 1;
}

static inline uint64_t check_rand(void)
{
	uint64_t *s = check_rng();

	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#define RUN(fn)                                                         \
	do {                                                            \
		check_cur_failed = 0;                                   \
		check_cur_made = 0;                                     \
		fn();                                                   \
		if (!check_cur_made) {                                  \
			fprintf(stderr, "  %s made no check\n", #fn);   \
			check_cur_failed = 1;                           \
		}                                                       \
		if (check_cur_failed) {                                 \
			check_failed++;                                 \
			fprintf(stderr, "FAIL %s\n", #fn);              \
		} else {                                                \
			check_passed++;                                 \
			fprintf(stderr, "ok   %s\n", #fn);              \
		}                                                       \
	} while (0)

#define CHECK_DONE()                                                              \
	(printf("%d passed, %d failed\n", check_passed, check_failed), \
	 check_failed ? 1 : 0)

#endif
