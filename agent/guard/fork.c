/*
 * fork: the agent across the program's fork(). No lock of the agent is held
 * across fork(): the handlers a program's allocator registers (jemalloc's)
 * take its locks after ours would have been taken, and a thread holding one
 * of those may be inside a wrapped pthread_mutex_lock(), waiting for ours. The
 * child instead makes every lock anew, and throws away what a lock held at
 * the fork (by a thread it does not have) may have left half changed: each
 * module resets its own state (its *_reset_child()).
 */
#include "agent/guard/hot.h"
#include "agent/guard/region.h"
#include "agent/guard/runtime.h"
#include "agent/guard/threads.h"
#include "agent/guard/unwind.h"
#include "common/util.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

static void before_fork(void)
{
	struct gthread *t = &guard_tls;

	/* a forking server's children share the parent's trace cache, copy on write, rather than each
	 * filling a quarter of a megabyte of its own (unwind.h); a thread that never walked (a helper
	 * that forks to exec) makes none, and once made this does nothing */
	if (atomic_load(&G.active) && unwind_walked())
		guard_trace_cache(t);
	unwind_fork_prepare();
	if (!atomic_load(&G.active))
		return;
	t->nest++;
}

static void after_fork_parent(void)
{
	struct gthread *t = &guard_tls;

	unwind_fork_parent();
	if (!atomic_load(&G.active))
		return;
	t->nest--;
}

static void after_fork_child(void)
{
	struct gthread *t = &guard_tls;

	unwind_fork_child();
	if (!atomic_load(&G.active))
		return;
	G.pid = getpid();
	t->tid = gettid();
	/* what these guard is made anew below whether or not it was held */
	guard_lock_reset_child(&G.tab_mu);
	guard_lock_reset_child(&G.mu);
	guard_lock_reset_child(&G.shared_mu);
	guard_log_reset_child();
	guard_interpose_reset_child();
	unwind_reset_child();
	guard_sig_reset_child();
	if (guard_region_child(t) < 0) {
		t->nest--;   /* inert: what follows would reset the parent's slots, rings and tables */
		return;
	}
	guard_slots_reset_child(t);
	guard_unit_reset_child(t);
	guard_threads_reset_child();
	guard_starve_reset_child();
	guard_clock_reset_child();
	G.started_ns = util_now_real_ns();       /* a new process: reports as one */
	memset(&G.n, 0, sizeof(G.n));
	guard_report_reset_child();
	if (G.train)
		gtrain_reset_child(G.train);
	gring_reset(G.shared_ring);
	t->nest--;
}

int guard_fork_install(void)
{
	return pthread_atfork(before_fork, after_fork_parent, after_fork_child) == 0 ? 0 : -1;
}
