/*
 * cgroup: the CPU limit over a process and the throttled time it causes (guard.md "CPU
 * starvation"). The nearest cgroup with a CPU limit is found from the process's /proc/PID/cgroup
 * and the reader's own mountinfo (which is how the reader's namespace sees both); its throttled
 * time is sampled into a short history, so that a unit's share can be told from its start. The
 * process's own watchdog keeps one (starve.c), and the host's collector one per CPU-limited
 * process it guards, for the units it ships as hangs (collect.c).
 *
 * No allocation, no stdio, no lock: starve.c runs it on a program's thread too. The reader is the
 * caller's, so that the agent's reads keep the program's descriptors and errno as they were.
 */
#ifndef SM_GUARD_CGROUP_H
#define SM_GUARD_CGROUP_H

#include <stddef.h>
#include <stdint.h>

#include "agent/guard/rt.h"

#define GCGROUP_HIST 64   /* samples of throttled time: 6.4 s at a tick of 100 ms */

struct gcgroup {
	_Atomic int ok;          /* the fields below are set (once) */
	int v1;                  /* cgroup v1: throttled_time in ns, else v2's throttled_usec */
	char stat[512];          /* cpu.stat of the nearest cgroup with a CPU limit */
	char limit[32];          /* that limit in CPUs, "0.1" */
	_Atomic int64_t at[GCGROUP_HIST], val[GCGROUP_HIST];
	_Atomic uint32_t n;      /* samples written; the last is (n - 1) % GCGROUP_HIST */
	_Atomic int writing;     /* a sample is being taken: another thread does not take one too */
};

/* A kernel file into buf (NUL-terminated): bytes read, or -1. whole: every page of it, not the
 * first read's. */
typedef long gcgroup_read_fn(const char *path, char *buf, size_t cap, int whole);

/* Finds the CPU-limited cgroup of the process whose /proc directory is proc ("/proc/self",
 * "/proc/PID"); text (cap bytes) is scratch for the mount table. 1 when found (cg->ok set), else 0. */
int gcgroup_find(struct gcgroup *cg, const char *proc, gcgroup_read_fn *read, char *text, size_t cap);
/* The throttled time now, into the history, stamped now (a sample under way elsewhere: nothing).
 * 1 when the cgroup's file was read. */
int gcgroup_sample(struct gcgroup *cg, int64_t now, gcgroup_read_fn *read);
/* v's throttled_ns and thr_known for its unit [v->start, v->end], the cgroup read now; the figure
 * stays within the unit's length and its duration. */
void gcgroup_unit(const struct gcgroup *cg, struct gviol *v, gcgroup_read_fn *read);
/* The history forgotten (a forked child: the same cgroup, the samples the parent's). */
void gcgroup_forget(struct gcgroup *cg);

#endif
