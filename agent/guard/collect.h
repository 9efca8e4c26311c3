/*
 * collect: the host's collector (sm-agent collect, docs/guard.md "The host's
 * collector"). Guarded processes leave it everything but the measurement: each
 * writes a shared region (region.h) and starts no thread; the collector maps
 * every region in its directory and, for each process,
 *
 *   watches   every unit in flight (a tick of the process's SM_GUARD_WATCHDOG_MS):
 *             flags one over its threshold, asks its thread for its stack
 *             (the agent's signal, with its cookie), ships one still in
 *             flight SM_GUARD_HANG_MS after its start as it stands;
 *   ships     the process's queue: violations through its shipping budget
 *             (budget.h), baselines as they come; the streams built from its
 *             rings (stream.h), frames named once per process from
 *             /proc/<pid>/maps; one connection to the server for the host,
 *             the spool when it cannot be reached;
 *   reports   each process to the server (POST /api/v1/agents/report, with
 *             "collector": "host"), and pushes the settings of the answer to
 *             the process (its region's pushed block: a new k as a guard
 *             table built here, gtab.h);
 *   fetches   the fleet's profile of each build, and pushes its table to the
 *             processes whose loops it has;
 *   saves     what a training process learnt (learnt.h, in its region) into
 *             its profile file, as the process's own user, by differences
 *             recorded in the region; uploads it whole to the server;
 *   finishes  a process that exited (or whose pid is gone): what it queued and
 *             what its budget holds is shipped, its region removed.
 *
 * Two threads: the watchdog (scans the directory, watches the units: never
 * waits on the network) and the shipping thread (everything else). A region is
 * written by a process the collector does not trust: it is mapped only when
 * its owner owns the process it names (uid and start time), signals go only
 * to that process's threads and only as its agent's signal, and every count,
 * offset and record read from it is bounded; a region its process truncates
 * under the collector is patched with zeros where it is read (SIGBUS) and
 * finished.
 */
#ifndef SM_GUARD_COLLECT_H
#define SM_GUARD_COLLECT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/ship.h"

struct collector;

struct collect_opts {
	const char *dir;                /* the regions' directory (made, mode 1733, when missing) */
	struct ship_opts ship;          /* url, token, spool; its callbacks are the collector's */
	int64_t report_ns;              /* each process's report (0: none) */
	int64_t tick_ns;                /* the watchdog's tick at most (a process's own may be shorter) */
	const volatile sig_atomic_t *stop;   /* the run ends when it becomes non-zero */
};

/* Takes the directory's lock (one collector per directory). NULL with the reason in err. Caller frees. */
struct collector *collector_open(const struct collect_opts *o, char *err, size_t errlen);
/* Runs until *o->stop; what the processes hold is shipped (or spooled) first. 0, or -1 (the reason logged). */
int collector_run(struct collector *c);
/* Unmaps every region (their files stay for the next collector). NULL-safe. */
void collector_free(struct collector *c);

#endif
