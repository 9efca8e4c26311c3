/*
 * starve: slowness that is the machine's, not the code's (guard.md "CPU
 * starvation"). Per unit, the time its thread waited for a CPU (the
 * scheduler's run delay, the second field of schedstat) and, when the
 * process's cgroup (or an ancestor) has a CPU limit, the cgroup's throttled
 * time over the unit; and the host's steal time over it (steal.h), which the
 * watchdog samples once a second and the shipper once more for a unit it ships.
 *
 * No system call is added to a unit's start or end but these. The watchdog snapshots a
 * thread's run delay (/proc/self/task/TID/schedstat, gwatch_run_delays() in
 * watch.c, which the host's collector runs too) when it finds the thread
 * between units after one ended, or in a unit it has no snapshot for; and the
 * cgroup's throttled time every tick into a short history (cgroup.c). With the host's
 * collector the process has no watchdog: the cgroup is found when its region is
 * made, and with a CPU limit a program's thread takes the history's sample once
 * a tick, before the unit it starts (region.c). Only a unit that is shipped (a violation, a
 * baseline) reads its thread's value at its end, on its own thread, with raw
 * system calls: the descriptor lives for the read alone, registered meanwhile
 * so that the program's close() leaves it.
 */
#include "agent/guard/cgroup.h"
#include "agent/guard/hot.h"
#include "agent/guard/steal.h"
#include "agent/guard/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>   /* snprintf only */
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MIN_UNIT_NS 1000000LL     /* a unit shorter than this is not measured: the read would cost a
				   * few per cent of it (SM_GUARD_MIN_THRESHOLD_US=0) */

static struct gcgroup cg;
static _Atomic int cg_tried;
static struct gsteal steal;

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


/* the mount table's scratch when the cgroup is found: no allocation (a region is made on a program's
 * thread), no stdio (the watchdog may run while the program's exit() tears it down) */
static char text[65536];

const char *guard_starve_cpu_limit(void)
{
	return atomic_load_explicit(&cg.ok, memory_order_acquire) ? cg.limit : NULL;
}

/* ---- the snapshots ---- */

void guard_starve_find(void)
{
	if (!atomic_exchange(&cg_tried, 1))
		gcgroup_find(&cg, "/proc/self", read_file, text, sizeof(text));
}

int guard_starve_sample(int64_t now)
{
	return gcgroup_sample(&cg, now, read_file);
}

void guard_starve_tick(int64_t now)
{
	guard_starve_find();
	guard_starve_sample(now);
	gsteal_sample(&steal, now, 0, read_file);
	gwatch_run_delays(G.slots, atomic_load(&G.nslots), "/proc/self", guard_read_small, guard_now);
}

/* ---- a unit's figures ---- */

/* s's unit v ended (or is still running at v->end); path is its thread's schedstat. */
static void unit_figures(struct gslot *s, struct gviol *v, const char *path)
{
	struct gwatch_sched now;

	gwatch_unit_run_delay(s, v, gwatch_schedstat(path, guard_read_small, &now) == 0 ? &now : NULL);
	gcgroup_unit(&cg, v, read_file);
}

void guard_starve_unit_end(struct gthread *t, struct gviol *v)
{
	if (v->end - v->start < MIN_UNIT_NS) {
		v->rd_how = GUARD_RD_NONE;
		v->thr_known = 0;
		return;
	}
	unit_figures(t->slot, v, "/proc/thread-self/schedstat");
}

void guard_starve_hang(struct gslot *s, struct gviol *v)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)v->tid);
	unit_figures(s, v, path);
}

int64_t guard_starve_steal(int64_t start, int64_t end)
{
	return gsteal_unit(&steal, start, end, guard_now(), sysconf(_SC_NPROCESSORS_ONLN), read_file);
}

void guard_starve_reset_child(void)
{
	/* the child's threads are new; the cgroup is the parent's (until it moves, not followed); the
	 * host's steal history holds, but a sample the parent was taking will never end */
	gcgroup_forget(&cg);
	atomic_store(&steal.writing, 0);
}
