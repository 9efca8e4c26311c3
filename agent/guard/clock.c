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

/*
 * The TSC path is used where the TSC is invariant (constant rate, ticking in every C- and
 * P-state) and in step across CPUs, which the kernel vouches for in one of two ways:
 *   - it keeps its own time with it (clocksource "tsc": its boot and watchdog checks passed);
 *   - it keeps time with kvm-clock, and the host marks its time info "TSC stable"
 *     (PVCLOCK_TSC_STABLE_BIT): KVM then keeps the guest's TSCs matched across vCPUs, the
 *     guarantee the vDSO relies on to read the TSC itself. A guest is often booted with
 *     tsc=unstable (snapshots, migration) and so never uses the first way, although each
 *     clock_gettime() there is a TSC reading scaled by the host's parameters: 55 to 65 ns a pair
 *     around a system call on this project's machine against 5 for the TSC's.
 * The host may clear the bit later (a move to a host whose TSC is not stable): each
 * re-anchoring reads it again and leaves the TSC for good when it is gone.
 */
enum { TSC_NONE, TSC_KERNEL, TSC_KVM };

/* KVM's ABI (Documentation/virt/kvm/x86/msr.rst): vCPU 0's time info, as the vDSO reads it */
struct pvclock_info {
	uint32_t version, pad0;
	uint64_t tsc_timestamp, system_time;
	uint32_t mul;      /* ns per tick, 32.32, after the shift */
	int8_t shift;
	uint8_t flags;
	uint8_t pad[2];
};
#define PVCLOCK_TSC_STABLE 0x01

static _Atomic int tsc_usable;    /* TSC_NONE, TSC_KERNEL or TSC_KVM */
static const volatile struct pvclock_info *pvclock;   /* TSC_KVM: the page the vDSO reads */
static uint64_t pv_mult;          /* TSC_KVM: its rate as 32.32 ns per tick, to check it against ours */
static int pv_checked;            /* ... which the first anchor did */
static uint64_t cal_tsc;
static int64_t cal_ns, cal_off_by;
static _Atomic int64_t cal_next;
static _Atomic int ticking;     /* one re-anchoring at a time: the agent's threads, or the program's */
static _Atomic uint64_t restarts;

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

/* The kernel's clocksource's name into src (empty if unknown). */
static void clock_source(char *src, size_t size)
{
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
	ssize_t r = -1;

	if (fd >= 0) {
		r = read(fd, src, size - 1);
		close(fd);
	}
	src[r > 0 ? r : 0] = '\0';
	src[strcspn(src, "\n")] = '\0';
}

/* Where the pvclock page is mapped (/proc/self/maps): the first page of [vvar_vclock] (Linux 6.13
 * and later), else the second of [vvar] (before; its layout since 3.x puts vvar, pvclock, hvclock,
 * then the time namespace's page); 0 if neither. */
static uintptr_t pvclock_where(void)
{
	char buf[4096], *line, *nl;
	size_t have = 0;
	uintptr_t vvar = 0, vclock = 0;
	int skip = 0;   /* the rest of a line longer than the buffer (a file's name) is to be dropped */
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	for (;;) {
		ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);

		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = '\0';
		for (line = buf; (nl = memchr(line, '\n', (size_t)(buf + have - line))) != NULL; line = nl + 1) {
			unsigned long start, end, inode;
			int name = -1;

			*nl = '\0';
			if (skip) {
				skip = 0;
				continue;
			}
			if (sscanf(line, "%lx-%lx %*s %*s %*s %lu %n", &start, &end, &inode, &name) < 3 || name < 0 ||
			    inode != 0)
				continue;
			if (strcmp(line + name, "[vvar_vclock]") == 0)
				vclock = start;
			else if (strcmp(line + name, "[vvar]") == 0 && end - start >= 2 * 4096)
				vvar = start + 4096;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) {
			have = 0;
			skip = 1;
		}
	}
	close(fd);
	return vclock ? vclock : vvar;
}

/* kvm-clock: the pvclock page, if it is mapped and says the TSC is stable. It is read through
 * the kernel (a pipe): a vvar page the kernel does not map gives that write EFAULT, where a load
 * would give the program SIGBUS; once read, the page is in the process's page tables. A copy is
 * whole when the host's version count is even and the same in the next copy (an update begun
 * during the first would have moved it). */
static int pvclock_open(void)
{
	struct pvclock_info pi[2];
	const struct pvclock_info *c = NULL;
	uintptr_t at = pvclock_where();
	int p[2];

	if (!at || pipe2(p, O_CLOEXEC) < 0)
		return 0;
	for (int i = 0; i < 8 && !c; i++) {
		int k = i & 1;

		if (write(p[1], (const void *)at, sizeof(pi[k])) != (ssize_t)sizeof(pi[k]) ||
		    read(p[0], &pi[k], sizeof(pi[k])) != (ssize_t)sizeof(pi[k]))
			break;
		if (i > 0 && !(pi[!k].version & 1) && pi[k].version == pi[!k].version)
			c = &pi[!k];
	}
	close(p[0]);
	close(p[1]);
	if (!c || !(c->flags & PVCLOCK_TSC_STABLE) || c->mul == 0 || c->shift < -31 || c->shift > 31)
		return 0;
	pv_mult = c->shift >= 0 ? (uint64_t)c->mul << c->shift : (uint64_t)c->mul >> -c->shift;
	pvclock = (const volatile struct pvclock_info *)at;
	return 1;
}

#ifdef GUARD_CHECK_CLOCK
/*
 * The test build: the TSC clock read between two CLOCK_MONOTONIC readings
 * lies between them, up to the anchor's own uncertainty (clock_pair()) and the
 * drift since the anchor (NTP slews the monotonic clock by at most 500 ppm; the
 * rate's calibration adds less). A torn or wrong anchor aborts the program.
 *
 * SM_GUARD_TEST_CLOCK_SKEW_US puts the clock that far off once, after its first
 * anchor, as a virtual machine restored from a snapshot finds its TSC: the next
 * re-anchoring must see it and calibrate again (clock_restarts= in the exit line).
 *
 * What this build finds or does is in the agent's log (SM_GUARD_LOG; none
 * without one), not on standard error: the agent's threads, which re-anchor,
 * have /dev/null there.
 */
static int64_t skew_ns;
static int skewed;   /* 1: the skew is in place, unchecked until the clock is calibrated again */

static void clock_check(int64_t off_by, int64_t since_anchor, const char *when)
{
	int64_t a = guard_mono_ns(), b = guard_now_tsc(), c = guard_mono_ns();
	int64_t slack = 1000 + off_by + since_anchor / 500;

	if (skewed == 1 || (b >= a - slack && b <= c + slack))
		return;
	guard_log("test: the TSC clock strayed", "tsc_clock_ns=%lld monotonic_ns=%lld..%lld when=\"%s\"", (long long)b,
		  (long long)a, (long long)c, when);
	guard_log_flush();
	abort();
}

static void clock_test_init(void)
{
	const char *v = getenv("SM_GUARD_TEST_CLOCK_SKEW_US");

	skew_ns = v ? strtoll(v, NULL, 10) * 1000 : 0;
}

/* was_off: how far the clock was from CLOCK_MONOTONIC before this anchor, allowed: how far it might
 * be without a restart (both 0 at the first anchor after the start or a restart) */
static void clock_test_anchored(int64_t was_off, int64_t allowed)
{
	if (skewed == 1) {
		/* anchored again without a restart: checked from here (the test fails) */
		skewed = 2;
		guard_log("test: anchored again without a restart", "was_off_ns=%lld allowed_ns=%lld",
			  (long long)was_off, (long long)allowed);
	} else if (skew_ns && !skewed) {
		*(volatile __m128i *)(volatile void *)&G.clk.mult =
			_mm_set_epi64x(G.clk.off + skew_ns, (long long)G.clk.mult);
		skewed = 1;
		guard_log("test: the clock put off after its first anchor", "skew_ns=%lld", (long long)skew_ns);
	}
}

static void clock_test_restarted(void)
{
	if (skewed == 1)
		skewed = 2;
}
#else
static inline void clock_check(int64_t off_by, int64_t since_anchor, const char *when)
{
	(void)off_by, (void)since_anchor, (void)when;
}

static inline void clock_test_init(void)
{
}

static inline void clock_test_anchored(int64_t off_by, int64_t allowed)
{
	(void)off_by, (void)allowed;
}

static inline void clock_test_restarted(void)
{
}
#endif

void guard_clock_init(void)
{
	char src[32];
	unsigned int a, b, c, d;
	int kind = TSC_NONE;

	/* an invariant TSC (CPUID 0x80000007, EDX bit 8); AVX (CPUID 1, ECX bit 28): the anchor's
	 * 16-byte loads and stores are atomic (rt.h) */
	if (!__get_cpuid(0x80000007, &a, &b, &c, &d) || !(d & (1U << 8)) ||
	    !__get_cpuid(1, &a, &b, &c, &d) || !(c & (1U << 28)))
		return;
	clock_source(src, sizeof(src));
	if (strcmp(src, "tsc") == 0)
		kind = TSC_KERNEL;
	else if (strcmp(src, "kvm-clock") == 0 && pvclock_open())
		kind = TSC_KVM;
	if (kind == TSC_NONE)
		return;
	clock_test_init();
	cal_off_by = clock_pair(&cal_tsc, &cal_ns);
	cal_next = cal_ns + 100000000;
	atomic_store(&tsc_usable, kind);
}

const char *guard_clock_name(void)
{
	switch (atomic_load_explicit(&tsc_usable, memory_order_relaxed)) {
	case TSC_KERNEL:
		return "tsc";
	case TSC_KVM:
		return "kvm-tsc";
	default:
		return "monotonic";
	}
}

uint64_t guard_clock_restarts(void)
{
	return atomic_load_explicit(&restarts, memory_order_relaxed);
}

/* How far the clock in use puts tsc from ns. */
static int64_t clock_error(uint64_t tsc, int64_t ns)
{
	int64_t e = (int64_t)(((unsigned __int128)tsc * G.clk.mult) >> 32) + G.clk.off - ns;

	return e < 0 ? -e : e;
}

void guard_clock_tick(void)
{
	static int64_t anchored, anchored_off_by;   /* the last anchor's time (0: none yet), its uncertainty */
	int kind = atomic_load_explicit(&tsc_usable, memory_order_relaxed);
	int64_t ns, off_by, was_off = 0, allowed = 0;
	uint64_t tsc;

	if (!kind || guard_mono_ns() < atomic_load_explicit(&cal_next, memory_order_relaxed) ||
	    atomic_exchange_explicit(&ticking, 1, memory_order_acquire))
		return;
	if (kind == TSC_KVM && !(pvclock->flags & PVCLOCK_TSC_STABLE))
		goto leave;
	off_by = clock_pair(&tsc, &ns);
	if (tsc <= cal_tsc || ns <= cal_ns)
		goto restart;
	if (anchored) {
		/* the rate in use was measured over anchored - cal_ns, each end off by its pair's uncertainty */
		double rate_err = (double)(cal_off_by + anchored_off_by) / (double)(anchored - cal_ns + 1);
		int64_t slack = anchored_off_by + off_by + (int64_t)((double)(ns - anchored) * rate_err);

		clock_check(slack, ns - anchored, "before re-anchoring");
		/* a TSC that stepped or changed its rate against the monotonic clock (a virtual machine
		 * restored from a snapshot or moved to another host) would skew every later reading:
		 * calibrate again from here */
		was_off = clock_error(tsc, ns);
		allowed = slack + 20000 + (ns - anchored) / 500;
		if (was_off > allowed)
			goto restart;
	}
	/* ns per tick over everything since the start: the longer, the closer; the anchor at (tsc, ns) */
	{
		uint64_t mult = (uint64_t)(((unsigned __int128)(uint64_t)(ns - cal_ns) << 32) / (tsc - cal_tsc));
		int64_t off = ns - (int64_t)(((unsigned __int128)tsc * mult) >> 32);

		/* at the first anchor: the host's rate and ours agree (within 10 %, more than the
		 * monotonic clock's largest slew, chrony's 8.3 %), or the page read as kvm-clock's is
		 * something else. Not after a restart: a move to another host changes its rate. */
		if (kind == TSC_KVM && !pv_checked) {
			if (mult > pv_mult + pv_mult / 10 || mult < pv_mult - pv_mult / 10)
				goto leave;
			pv_checked = 1;
		}
		*(volatile __m128i *)(volatile void *)&G.clk.mult = _mm_set_epi64x(off, (long long)mult);
		atomic_thread_fence(memory_order_release);
		G.clk.ok = 1;
	}
	anchored = ns;
	anchored_off_by = off_by;
	clock_check(off_by, 0, "anchored");
	clock_test_anchored(was_off, allowed);
	atomic_store_explicit(&cal_next, ns + 1000000000, memory_order_relaxed);
	goto done;
restart:
	G.clk.ok = 0;   /* clock_gettime until the next tick has a rate again */
	cal_tsc = tsc;
	cal_ns = ns;
	cal_off_by = off_by;
	anchored = 0;
	atomic_fetch_add_explicit(&restarts, 1, memory_order_relaxed);
	clock_test_restarted();
	atomic_store_explicit(&cal_next, ns + 100000000, memory_order_relaxed);
	goto done;
leave:
	G.clk.ok = 0;
	atomic_store_explicit(&tsc_usable, TSC_NONE, memory_order_relaxed);
	atomic_store_explicit(&cal_next, INT64_MAX, memory_order_relaxed);
done:
	atomic_store_explicit(&ticking, 0, memory_order_release);
}

void guard_clock_poll(int64_t now)
{
	int64_t next = atomic_load_explicit(&cal_next, memory_order_relaxed);

	/* now is the TSC clock's: one that fell more than a second behind the last anchor ticks too */
	if (GUARD_UNLIKELY(now >= next || now < next - 2000000000))
		guard_clock_tick();
}

void guard_clock_reset_child(void)
{
	atomic_store_explicit(&ticking, 0, memory_order_relaxed);
	atomic_store_explicit(&restarts, 0, memory_order_relaxed);
}
