/*
 * watch: the watchdog's look at one process's units in flight (guard.md "Run time"), shared by
 * the agent's own watchdog thread and the host's collector (collect.c). A unit over its threshold
 * is flagged and its next CPU sample takes its stack; a thread asleep in a wrapped call is asked
 * for it once per call (ask: the agent's signal); a flagged unit still in flight hang_ns after its
 * start is shipped as it stands (hang: at the next look after its thread was asked for the stack
 * of the call it hangs in).
 */
#ifndef SM_GUARD_WATCH_H
#define SM_GUARD_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "agent/guard/rt.h"
#include "common/hash.h"

struct gwatch_ops {
	void (*ask)(void *ctx, struct gslot *s);
	/* v: the unit of slot s as it stands (v->hang set), to offer to the shipping budget */
	void (*hang)(void *ctx, struct gslot *s, struct gviol *v);
	void *ctx;
};

/* One look at slots [0, n) at now. The slots may be another process's: only their state is read. */
void gwatch_slots(struct gslot *slots, uint32_t n, int64_t now, int64_t hang_ns, const struct gwatch_ops *ops);

/* A small kernel file into buf (NUL-terminated): bytes read, or -1. */
typedef long gwatch_read_fn(const char *path, char *buf, size_t cap);

/*
 * The run-delay snapshots of slots [0, n) (starve.c, guard.md "CPU starvation") of the process whose
 * /proc directory is proc ("/proc/self", "/proc/PID"): a thread's time waited on a run queue so far,
 * read when it is between units after one ended or in a unit it has none of, at most every 10 ms,
 * stamped with clock() (the process's CLOCK_MONOTONIC time), into its slot, where the unit's end
 * (on the thread) finds it. The slots may be another process's.
 */
void gwatch_run_delays(struct gslot *slots, uint32_t n, const char *proc, gwatch_read_fn *read_small,
		       int64_t (*clock)(void));
/* A thread's schedstat: its time on a CPU and its time waited on a run queue so far, in ns. */
struct gwatch_sched {
	int64_t cpu_ns, delay_ns;
};
/* v's run_delay_ns and rd_how, for the unit of slot s that ended (or is still running) at v->end,
 * from its thread's schedstat now (cur, NULL: unknown) and the slot's snapshots. A window that began
 * before the unit counts no more waiting than its length less the CPU time the thread used in it, so
 * the unit's own CPU time is never waiting. The slot may be another process's: whatever it holds,
 * the figure stays within [0, the unit's duration]. */
void gwatch_unit_run_delay(const struct gslot *s, struct gviol *v, const struct gwatch_sched *cur);
/* v within [0, hi] (a figure of time within a unit) */
static inline int64_t gwatch_clamp(int64_t v, int64_t hi)
{
	return v < 0 ? 0 : v > hi ? hi : v;
}

/*
 * Who last released each lock, condition and semaphore (a wait's readier): GWATCH_RELEASES words,
 * each the upper half of the object's hash and the releasing thread's id, one store per release
 * (unit.c). In the process's memory, or in its region, where the host's collector reads it for the
 * lock wait of a unit it ships as a hang (stream.c).
 */
#define GWATCH_RELEASES 8192

static inline void gwatch_release_note(_Atomic uint64_t *table, const void *obj, pid_t tid)
{
	uint64_t h = hash_mix64((uintptr_t)obj);

	atomic_store_explicit(&table[h & (GWATCH_RELEASES - 1)], (h & 0xffffffff00000000ULL) | (uint32_t)tid,
			      memory_order_relaxed);
}

/* The thread that last released obj, 0 when unknown (another object's word in its place). */
static inline pid_t gwatch_release_of(const _Atomic uint64_t *table, const void *obj)
{
	uint64_t h = hash_mix64((uintptr_t)obj);
	uint64_t v = atomic_load_explicit(&table[h & (GWATCH_RELEASES - 1)], memory_order_relaxed);

	if ((v & 0xffffffff00000000ULL) != (h & 0xffffffff00000000ULL))
		return 0;
	return (pid_t)(v & 0x7fffffff);
}

/* What a thread asleep in a system call shows in proc's task/TID/syscall: the call, its stack
 * pointer and the instruction after it. */
struct gwatch_sys {
	int64_t nr;
	uint64_t sp, pc;
};
/* Into *out: 0, or -1 when the thread runs, is in no system call, or is gone. */
int gwatch_syscall(const char *proc, pid_t tid, gwatch_read_fn *read_small, struct gwatch_sys *out);
/* v's sys_call, sys_sp and sys_pc for a hang of slot s outside any wrapped call: the system call its thread
 * is asleep in, from proc's task/TID/syscall (nothing when it runs, or is in none). */
void gwatch_hang_syscall(const struct gslot *s, struct gviol *v, const char *proc, gwatch_read_fn *read_small);

/* A thread's schedstat from its file at path into *out: 0, or -1 when unknown. */
int gwatch_schedstat(const char *path, gwatch_read_fn *read_small, struct gwatch_sched *out);
/* The decimal number at p (saturating), or -1 when none. */
int64_t gwatch_decimal(const char *p);

#endif
