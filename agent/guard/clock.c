/*
 * clock: the agent's clock, CLOCK_MONOTONIC nanoseconds, read on every wrapped
 * call (rt.h "the clock" says how the TSC path stays on that timebase). The
 * agent's threads re-anchor it every second (guard_clock_tick()); with the host's collector, which
 * leaves the process no thread, the program's own at the start of a unit (guard_clock_poll(), from
 * guard_region_poll()).
 */
#include "agent/guard/hot.h"

#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>

int64_t guard_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The TSC path is used only where the kernel keeps its own time with it (so it is invariant and
 * in step across CPUs). */
static int tsc_usable;
static uint64_t cal_tsc;
static int64_t cal_ns, cal_off_by;
static _Atomic int64_t cal_next;
static _Atomic int ticking;     /* one re-anchoring at a time: the agent's threads, or the program's */

/* A TSC reading and the CLOCK_MONOTONIC time it was taken at: the middle of monotonic readings on
 * both sides of it, the narrowest of a few tries (a preemption between two readings widens one).
 * Returns how far the time may be off, in ns. */
static int64_t clock_pair(uint64_t *tsc, int64_t *ns)
{
	int64_t best = INT64_MAX;

	for (int i = 0; i < 4 && best > 2000; i++) {
		int64_t before = guard_mono_ns();
		uint64_t t = __builtin_ia32_rdtsc();
		int64_t after = guard_mono_ns();

		if (after - before < best) {
			best = after - before;
			*tsc = t;
			*ns = before + best / 2;
		}
	}
	return best / 2 + 1;
}

void guard_clock_init(void)
{
	char src[32] = "";
	unsigned int a, b, c, d;
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		ssize_t r = read(fd, src, sizeof(src) - 1);

		src[r > 0 ? r : 0] = '\0';
		close(fd);
	}
	if (strcmp(src, "tsc\n") != 0)
		return;
	/* an invariant TSC (CPUID 0x80000007, EDX bit 8): constant rate, ticking in every C- and P-state;
	 * AVX (CPUID 1, ECX bit 28): the anchor's 16-byte loads and stores are atomic (rt.h) */
	tsc_usable = __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1U << 8)) &&
		     __get_cpuid(1, &a, &b, &c, &d) && (c & (1U << 28));
	cal_off_by = clock_pair(&cal_tsc, &cal_ns);
	cal_next = cal_ns + 100000000;
}

#ifdef GUARD_CHECK_CLOCK
/*
 * The test build: the TSC clock read between two CLOCK_MONOTONIC readings
 * lies between them, up to the anchor's own uncertainty (clock_pair()) and the
 * drift since the anchor (NTP slews the monotonic clock by at most 500 ppm; the
 * rate's calibration adds less). A torn or wrong anchor aborts the program.
 */
static void clock_check(int64_t off_by, int64_t since_anchor, const char *when)
{
	int64_t a = guard_mono_ns(), b = guard_now_tsc(), c = guard_mono_ns();
	int64_t slack = 1000 + off_by + since_anchor / 500;
	char msg[200];
	int n;

	if (b >= a - slack && b <= c + slack)
		return;
	n = snprintf(msg, sizeof(msg), "libsmguard: the TSC clock read %lld ns, CLOCK_MONOTONIC %lld .. %lld (%s)\n",
		     (long long)b, (long long)a, (long long)c, when);
	if (n > 0 && write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1) < 0)
		n = 0;
	abort();
}
#else
static inline void clock_check(int64_t off_by, int64_t since_anchor, const char *when)
{
	(void)off_by, (void)since_anchor, (void)when;
}
#endif

void guard_clock_tick(void)
{
	static int64_t anchored, anchored_off_by;   /* the last anchor's time (0: none yet), its uncertainty */
	int64_t ns, off_by;
	uint64_t tsc;

	if (!tsc_usable || guard_mono_ns() < atomic_load_explicit(&cal_next, memory_order_relaxed) ||
	    atomic_exchange_explicit(&ticking, 1, memory_order_acquire))
		return;
	off_by = clock_pair(&tsc, &ns);
	if (tsc <= cal_tsc || ns <= cal_ns) {
		atomic_store_explicit(&ticking, 0, memory_order_release);
		return;
	}
	if (anchored) {
		/* the rate in use was measured over anchored - cal_ns, each end off by its pair's uncertainty */
		double rate_err = (double)(cal_off_by + anchored_off_by) / (double)(anchored - cal_ns + 1);

		clock_check(anchored_off_by + off_by + (int64_t)((double)(ns - anchored) * rate_err), ns - anchored,
			    "before re-anchoring");
	}
	/* ns per tick over everything since the start: the longer, the closer; the anchor at (tsc, ns) */
	{
		uint64_t mult = (uint64_t)(((unsigned __int128)(uint64_t)(ns - cal_ns) << 32) / (tsc - cal_tsc));
		int64_t off = ns - (int64_t)(((unsigned __int128)tsc * mult) >> 32);

		*(volatile __m128i *)(volatile void *)&G.clk.mult = _mm_set_epi64x(off, (long long)mult);
		atomic_thread_fence(memory_order_release);
		G.clk.ok = 1;
	}
	anchored = ns;
	anchored_off_by = off_by;
	clock_check(off_by, 0, "anchored");
	atomic_store_explicit(&cal_next, ns + 1000000000, memory_order_relaxed);
	atomic_store_explicit(&ticking, 0, memory_order_release);
}

void guard_clock_poll(int64_t now)
{
	if (GUARD_UNLIKELY(now >= atomic_load_explicit(&cal_next, memory_order_relaxed)))
		guard_clock_tick();
}
