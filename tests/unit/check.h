/*
 * check: the unit-test harness. Each test file defines test functions and a
 * main() that runs them with RUN(); failures print file:line and the values,
 * and the run ends with the line "N passed, N failed".
 */
#ifndef SM_CHECK_H
#define SM_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_passed, check_failed, check_cur_failed;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
				#cond);                                               \
			check_cur_failed = 1;                                         \
		}                                                                     \
	} while (0)

#define CHECK_INT(a, b)                                                                  \
	do {                                                                             \
		long long check_a_ = (long long)(a), check_b_ = (long long)(b);          \
		if (check_a_ != check_b_) {                                              \
			fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n",    \
				__FILE__, __LINE__, #a, check_a_, #b, check_b_);         \
			check_cur_failed = 1;                                            \
		}                                                                        \
	} while (0)

#define CHECK_STR(a, b)                                                                   \
	do {                                                                              \
		const char *check_a_ = (a), *check_b_ = (b);                              \
		if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {         \
			fprintf(stderr, "  %s:%d: %s == \"%s\", expected \"%s\"\n",       \
				__FILE__, __LINE__, #a, check_a_ ? check_a_ : "(null)",   \
				check_b_ ? check_b_ : "(null)");                          \
			check_cur_failed = 1;                                             \
		}                                                                         \
	} while (0)

#define RUN(fn)                                                         \
	do {                                                            \
		check_cur_failed = 0;                                   \
		fn();                                                   \
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
