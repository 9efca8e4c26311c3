/*
 * starve: slowness that is the machine's, not the code's (guard.md "CPU
 * starvation"). Per unit, the time its thread waited for a CPU (the
 * scheduler's run delay, the second field of schedstat) and, when the
 * process's cgroup (or an ancestor) has a CPU limit, the cgroup's throttled
 * time over the unit.
 *
 * No system call is added to a unit's start or end but these. The watchdog snapshots a
 * thread's run delay (/proc/self/task/TID/schedstat, gwatch_run_delays() in
 * watch.c, which the host's collector runs too) when it finds the thread
 * between units after one ended, or in a unit it has no snapshot for; and the
 * cgroup's throttled time every tick into a short history. With the host's
 * collector the process has no watchdog: the cgroup is found when its region is
 * made, and with a CPU limit a program's thread takes the history's sample once
 * a tick, before the unit it starts (region.c). Only a unit that is shipped (a violation, a
 * baseline) reads its thread's value at its end, on its own thread, with raw
 * system calls: the descriptor lives for the read alone, registered meanwhile
 * so that the program's close() leaves it.
 */
#include "agent/guard/hot.h"
#include "agent/guard/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>   /* snprintf only */
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THR_HIST 64   /* ticks of cgroup history: 6.4 s at the default 100 ms */
#define MIN_UNIT_NS 1000000LL     /* a unit shorter than this is not measured: the read would cost a
				   * few per cent of it (SM_GUARD_MIN_THRESHOLD_US=0) */

static struct {
	_Atomic int ok;          /* the paths below are set (the watchdog, once) */
	int v1;                  /* cgroup v1: throttled_time in ns, else v2's throttled_usec */
	char stat[512];          /* cpu.stat of the nearest cgroup with a CPU limit */
	char limit[32];          /* that limit in CPUs, "0.1" */
} cg;

static struct {
	_Atomic int64_t at[THR_HIST], val[THR_HIST];
	_Atomic uint32_t n;      /* samples written; the last is (n - 1) % THR_HIST */
	_Atomic int writing;     /* a sample is being taken (a program's thread late by a tick meets it) */
} hist;

static _Atomic int cg_tried;

/* A small kernel file into buf (NUL-terminated): bytes read, or -1. Raw system calls: no wrapper, no
 * allocation; errno kept. On a thread that shares the program's table the descriptor is registered
 * while it lives (slots.c's registry: the program's close() of that number leaves it). */
static long read_file(const char *path, char *buf, size_t cap, int whole)
{
	int e = errno, fd, reg;
	long n, got = 0;

	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		errno = e;
		return -1;
	}
	reg = !guard_tls.own_fds && guard_fd_register(fd) == 0;
	/* a /proc file gives a page or so per read: the whole of a long one takes several */
	do
		n = syscall(SYS_pread64, fd, buf + got, cap - 1 - (size_t)got, (off_t)got);
	while (n > 0 && (got += n) < (long)cap - 1 && whole);
	if (reg)
		guard_fd_unregister(fd);
	guard_real_close(fd);
	buf[got] = '\0';
	errno = e;
	return n < 0 && !got ? -1 : got;
}

long guard_read_small(const char *path, char *buf, size_t cap)
{
	return read_file(path, buf, cap, 0);
}

static int64_t run_delay_of(const char *path)
{
	return gwatch_run_delay(path, guard_read_small);
}

/* The cgroup's throttled time so far, in ns, or -1. */
static int64_t throttled_now(void)
{
	char b[1024];
	const char *key = cg.v1 ? "throttled_time " : "throttled_usec ", *p;
	int64_t v;

	if (!atomic_load_explicit(&cg.ok, memory_order_acquire) || guard_read_small(cg.stat, b, sizeof(b)) <= 0)
		return -1;
	for (p = b; (p = strstr(p, key)); p++)
		if (p == b || p[-1] == '\n') {
			v = gwatch_decimal(p + strlen(key));
			return v < 0 || cg.v1 ? v : (v > INT64_MAX / 1000 ? INT64_MAX : v * 1000);
		}
	return -1;
}

/* ---- finding the cgroup (the watchdog, once; an agent thread may allocate and use stdio) ---- */

/* The limit of the cgroup directory dir in CPUs (quota / period) into out, or 0 when it has none. */
static int limit_of(const char *dir, int v1, char *out, size_t outlen)
{
	char path[1300], b[128];
	int64_t quota, period;

	if (v1) {
		snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir);
		if (guard_read_small(path, b, sizeof(b)) <= 0 || (quota = gwatch_decimal(b)) <= 0)
			return 0;   /* -1: none */
		snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
		if (guard_read_small(path, b, sizeof(b)) <= 0 || (period = gwatch_decimal(b)) <= 0)
			return 0;
	} else {
		const char *sp;

		snprintf(path, sizeof(path), "%s/cpu.max", dir);
		if (guard_read_small(path, b, sizeof(b)) <= 0 || (quota = gwatch_decimal(b)) <= 0 || !(sp = strchr(b, ' ')) ||
		    (period = gwatch_decimal(sp + 1)) <= 0)
			return 0;   /* "max 100000": none */
	}
	snprintf(out, outlen, "%.3g", (double)quota / (double)period);
	return 1;
}

/* No stdio here: the watchdog may run while the program's exit() tears stdio down. */
static char text[65536];

/* Splits line (in place) at spaces into at most max fields; their number. */
static int fields_of(char *line, char **f, int max)
{
	int n = 0;
	char *save = NULL;

	for (char *t = strtok_r(line, " ", &save); t && n < max; t = strtok_r(NULL, " ", &save))
		f[n++] = t;
	return n;
}

/* Whether the comma-separated list has word. */
static int has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);

	for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, word, wl) == 0 && (p[wl] == ',' || p[wl] == '\0'))
			return 1;
	return 0;
}

/* Mount point and root of the cgroup hierarchy (v2, or v1's with the cpu controller). */
static int mount_of(int v1, char *mnt, size_t mntlen, char *root, size_t rootlen)
{
	char *save = NULL;

	if (read_file("/proc/self/mountinfo", text, sizeof(text), 1) <= 0)
		return 0;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[64];
		int n = fields_of(line, f, 64), dash;

		/* id parent dev root mountpoint options [optional...] - fstype source superoptions */
		for (dash = 6; dash < n && strcmp(f[dash], "-") != 0; dash++)
			;
		if (n < 5 || dash + 3 >= n)
			continue;
		if (strcmp(f[dash + 1], v1 ? "cgroup" : "cgroup2") != 0 || (v1 && !has_word(f[dash + 3], "cpu")))
			continue;
		snprintf(mnt, mntlen, "%s", f[4]);
		snprintf(root, rootlen, "%s", f[3]);
		return 1;
	}
	return 0;
}

/* Whether the process's cgroup of this kind has (or an ancestor has) a CPU limit: cg set. */
static int find_limited(int v1, const char *cgpath)
{
	char mnt[512], root[512], dir[1200];
	const char *rel = cgpath;
	size_t rl;

	if (!mount_of(v1, mnt, sizeof(mnt), root, sizeof(root)))
		return 0;
	rl = strlen(root);
	if (strcmp(root, "/") != 0 && strncmp(cgpath, root, rl) == 0)
		rel = cgpath + rl;   /* a namespaced mount shows the cgroup from its own root */
	snprintf(dir, sizeof(dir), "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel);
	/* the nearest cgroup with a limit, up to the mount: the one that throttles */
	for (;;) {
		char *slash;

		if (limit_of(dir, v1, cg.limit, sizeof(cg.limit))) {
			if ((size_t)snprintf(cg.stat, sizeof(cg.stat), "%s/cpu.stat", dir) >= sizeof(cg.stat))
				return 0;
			cg.v1 = v1;
			return 1;
		}
		if (strlen(dir) <= strlen(mnt) || !(slash = strrchr(dir, '/')))
			return 0;
		*slash = '\0';
	}
}

static void cgroup_find(void)
{
	char v2[600] = "", v1[600] = "", *save = NULL;

	if (read_file("/proc/self/cgroup", text, sizeof(text), 1) <= 0)
		return;
	/* ID:CONTROLLERS:PATH; v2's is 0::PATH */
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (!c2)
			continue;
		*c2 = '\0';
		if (strncmp(line, "0:", 2) == 0 && c1[1] == '\0')
			snprintf(v2, sizeof(v2), "%s", c2 + 1);
		else if (has_word(c1 + 1, "cpu"))
			snprintf(v1, sizeof(v1), "%s", c2 + 1);
	}
	/* a hybrid host binds the cpu controller to v1; v2's cpu.max then does not exist */
	if ((v2[0] && find_limited(0, v2)) || (v1[0] && find_limited(1, v1)))
		atomic_store_explicit(&cg.ok, 1, memory_order_release);
}

const char *guard_starve_cpu_limit(void)
{
	return atomic_load_explicit(&cg.ok, memory_order_acquire) ? cg.limit : NULL;
}

/* ---- the snapshots ---- */

void guard_starve_find(void)
{
	if (!atomic_exchange(&cg_tried, 1))
		cgroup_find();
}

int guard_starve_sample(int64_t now)
{
	int64_t v;
	uint32_t k;

	if (!atomic_load_explicit(&cg.ok, memory_order_relaxed) ||
	    atomic_exchange_explicit(&hist.writing, 1, memory_order_acquire))
		return 0;
	if ((v = throttled_now()) >= 0) {
		k = atomic_load_explicit(&hist.n, memory_order_relaxed);
		atomic_store_explicit(&hist.at[k % THR_HIST], now, memory_order_relaxed);
		atomic_store_explicit(&hist.val[k % THR_HIST], v, memory_order_relaxed);
		atomic_store_explicit(&hist.n, k + 1, memory_order_release);
	}
	atomic_store_explicit(&hist.writing, 0, memory_order_release);
	return 1;
}

void guard_starve_tick(int64_t now)
{
	guard_starve_find();
	guard_starve_sample(now);
	gwatch_run_delays(G.slots, atomic_load(&G.nslots), "/proc/self", guard_read_small, guard_now);
}

/* ---- a unit's figures ---- */

/* The throttled time at t: interpolated between the history's samples around t, the latest one
 * before t when none is after it (a unit shorter than a tick); -1 when the history starts after t. */
static int64_t throttled_at(int64_t t)
{
	uint32_t k = atomic_load_explicit(&hist.n, memory_order_acquire);
	int64_t next_at = 0, next_val = 0;

	for (uint32_t j = 0; j < k && j < THR_HIST; j++) {
		uint32_t i = (k - 1 - j) % THR_HIST;
		int64_t at = atomic_load_explicit(&hist.at[i], memory_order_relaxed);
		int64_t val = atomic_load_explicit(&hist.val[i], memory_order_relaxed);

		if (at <= t) {
			if (next_at > at && next_val >= val)
				val += (int64_t)((double)(next_val - val) * (double)(t - at) / (double)(next_at - at));
			return val;
		}
		next_at = at;
		next_val = val;
	}
	return -1;
}


/* s's unit v ended (or is still running at v->end); cur is its thread's run delay now. */
static void unit_figures(struct gslot *s, struct gviol *v, int64_t cur)
{
	int64_t len = v->end - v->start, thr;

	gwatch_unit_run_delay(s, v, cur);
	v->thr_known = 0;
	if (atomic_load_explicit(&cg.ok, memory_order_acquire) && (thr = throttled_now()) >= 0) {
		int64_t before = throttled_at(v->start);

		/* summed over the CPUs by the kernel: never more than the unit's length */
		if (before >= 0 && before <= thr) {
			v->throttled_ns = gwatch_clamp(thr - before, len);
			v->thr_known = 1;
		}
	}
	/* nor is it more than the unit's duration, which leaves the agent's own time out */
	if (v->thr_known && v->dur > 0 && v->dur < len)
		v->throttled_ns = gwatch_clamp(v->throttled_ns, v->dur);
}

void guard_starve_unit_end(struct gthread *t, struct gviol *v)
{
	if (v->end - v->start < MIN_UNIT_NS) {
		v->rd_how = GUARD_RD_NONE;
		v->thr_known = 0;
		return;
	}
	unit_figures(t->slot, v, run_delay_of("/proc/thread-self/schedstat"));
}

void guard_starve_hang(struct gslot *s, struct gviol *v)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)v->tid);
	unit_figures(s, v, run_delay_of(path));
}

void guard_starve_reset_child(void)
{
	/* the child's threads are new; the cgroup is the parent's (until it moves, not followed) */
	atomic_store(&hist.n, 0);
	atomic_store(&hist.writing, 0);
}
