/*
 * benchutil: what the benchmark tools share (clusterbench, analysisbench): a
 * seeded xorshift generator, a monotonic clock and the peak RSS. Header only:
 * every file of tests/tools is a program of its own.
 */
#ifndef SM_BENCHUTIL_H
#define SM_BENCHUTIL_H
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static inline uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* uniform in [0, 1) */
static inline double unit(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline double peak_mb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_maxrss / 1024.0;
}

#endif
