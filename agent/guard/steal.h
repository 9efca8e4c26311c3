/*
 * steal: the time a hypervisor takes from the host's CPUs (guard.md "CPU starvation"). A thread
 * whose virtual CPU the hypervisor stops is neither running nor in a run queue, so no run delay
 * shows it; the guest kernel counts it per CPU only (/proc/stat's eighth column). That count is
 * sampled into a short history, once a second, by the process's watchdog or, for the processes
 * guarded through it, once per host by the collector; a unit's share is the host's steal over the
 * unit's span, per CPU.
 *
 * Agent threads only (it is never run on a program's thread). The reader is the caller's, as in
 * cgroup.h.
 */
#ifndef SM_GUARD_STEAL_H
#define SM_GUARD_STEAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "agent/guard/cgroup.h"

#define GSTEAL_HIST 64                  /* samples: a minute at one a second */
#define GSTEAL_GAP_NS 1000000000LL      /* a periodic sample at most once a second */
#define GSTEAL_FORCE_GAP_NS 100000000LL /* one a stream asks for at most every 100 ms */

struct gsteal {
	_Atomic int64_t at[GSTEAL_HIST], val[GSTEAL_HIST];   /* when; steal so far, ns over all CPUs */
	_Atomic uint32_t n;     /* samples written; the last is (n - 1) % GSTEAL_HIST */
	_Atomic int writing;    /* a sample is being taken: another thread does not take one too */
};

/* The host's steal so far, in ns summed over its CPUs, from the text of /proc/stat; -1 when the
 * text has no steal column. */
int64_t gsteal_parse(const char *stat);
/* A sample into the history, stamped now: when the last is GSTEAL_GAP_NS old (force:
 * GSTEAL_FORCE_GAP_NS), and no other thread is taking one. 1 when a sample was added. */
int gsteal_sample(struct gsteal *st, int64_t now, int force, gcgroup_read_fn *read);
/* The host's steal over [start, end], ns summed over its CPUs, from the history (interpolated
 * between the samples around each end; outside it, extrapolated at the rate of its nearest second
 * or more): -1 when the history has fewer than two samples or the host has counted no steal. */
int64_t gsteal_over(const struct gsteal *st, int64_t start, int64_t end);
/* A unit's span's steal per CPU (cpus online), within its length; the end no later than now; a
 * sample is taken first when the history ends before the unit does. -1 when unknown. */
int64_t gsteal_unit(struct gsteal *st, int64_t start, int64_t end, int64_t now, long cpus, gcgroup_read_fn *read);

#endif
