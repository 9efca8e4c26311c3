/*
 * clock: the agent's clock, CLOCK_MONOTONIC nanoseconds, read on every wrapped
 * call (rt.h "the clock" says how the TSC path stays on that timebase). The
 * agent's threads re-anchor it every second (guard_clock_tick()); with the host's collector, which
 * leaves the process no thread, the program's own at the start of a unit (guard_clock_poll(), from
 * guard_region_poll()).
 */
#include "agent/guard/hot.h"

#include <cpuid.h>
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
static int64_t cal_ns;
static _Atomic int64_t cal_next;
static _Atomic int ticking;     /* one re-anchoring at a time: the agent's threads, or the program's */

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
	/* an invariant TSC (CPUID 0x80000007, EDX bit 8): constant rate, ticking in every C- and P-state */
	tsc_usable = __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1U << 8));
	cal_tsc = __builtin_ia32_rdtsc();
	cal_ns = guard_mono_ns();
	cal_next = cal_ns + 100000000;
}

void guard_clock_tick(void)
{
	int64_t ns;
	uint64_t tsc;

	if (!tsc_usable || (ns = guard_mono_ns()) < atomic_load_explicit(&cal_next, memory_order_relaxed) ||
	    atomic_exchange_explicit(&ticking, 1, memory_order_acquire))
		return;
	tsc = __builtin_ia32_rdtsc();
	if (tsc <= cal_tsc || ns <= cal_ns) {
		atomic_store_explicit(&ticking, 0, memory_order_release);
		return;
	}
	/* ns per tick over everything since the start: the longer, the closer */
	{
		uint64_t mult = (uint64_t)(((unsigned __int128)(uint64_t)(ns - cal_ns) << 32) / (tsc - cal_tsc));

		atomic_fetch_add_explicit(&G.clk.seq, 1, memory_order_acq_rel);
		atomic_thread_fence(memory_order_release);
		G.clk.base_tsc = tsc;
		G.clk.base_ns = ns;
		G.clk.mult = mult;
		G.clk.ok = 1;
		atomic_fetch_add_explicit(&G.clk.seq, 1, memory_order_release);
	}
	atomic_store_explicit(&cal_next, ns + 1000000000, memory_order_relaxed);
	atomic_store_explicit(&ticking, 0, memory_order_release);
}

void guard_clock_poll(int64_t now)
{
	if (GUARD_UNLIKELY(now >= atomic_load_explicit(&cal_next, memory_order_relaxed)))
		guard_clock_tick();
}
