/*
 * handoff: where the program's threads meet the agent's. The program's
 * threads start the agent's threads when first needed (a wrapped call that
 * may), offer violations to the shipping budget and queue baseline units;
 * the agent's threads step aside for a call only a single-threaded process
 * may make, and at exit the exiting thread waits for the shipping thread's
 * last work. All of it is [program] in hot.h's terms: short locks, and no
 * thread created while one is held.
 */
#include "agent/guard/budget.h"
#include "agent/guard/hot.h"
#include "agent/guard/region.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_WAIT_NS 10000000000LL   /* at most, for the save of a large profile */
#define EXIT_SAVE_WAIT_NS 3000000000LL   /* the same by the collector: one of its rounds, and the save */

static pthread_t wd_th, ship_th;
static void *(*wd_main)(void *), *(*sh_main)(void *);   /* threads.h's, set at start-up */

void guard_cv_wait(pthread_cond_t *cv, int64_t until)
{
	/* until is on guard_now()'s clock, the condition on CLOCK_MONOTONIC: the same timebase unless
	 * the TSC strayed until its next re-anchoring (clock.c), so the wait is taken as a delay */
	int64_t d = until - guard_now(), at;
	struct timespec ts;

	if (__builtin_add_overflow(guard_mono_ns(), d > 0 ? d : 0, &at))
		at = INT64_MAX;
	ts.tv_sec = at / 1000000000;
	ts.tv_nsec = at % 1000000000;
	pthread_cond_timedwait(cv, &G.mu, &ts);
}

/* Conditions on CLOCK_MONOTONIC (the clock of guard_now()). */
static void init_cv(pthread_cond_t *cv)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

void guard_threads_init(void *(*watchdog_main)(void *), void *(*ship_main)(void *))
{
	pthread_mutex_init(&G.mu, NULL);
	init_cv(&G.cv);
	init_cv(&G.wd_cv);
	wd_main = watchdog_main;
	sh_main = ship_main;
}

static int start_thread(pthread_t *th, void *(*fn)(void *))
{
	sigset_t all, old;
	int ok;

	/* the agent's threads take no signal: the program's go to the program's threads */
	sigfillset(&all);
	guard_real_sigmask(SIG_SETMASK, &all, &old);
	ok = guard_real_pthread_create(th, NULL, fn, NULL) == 0;
	guard_real_sigmask(SIG_SETMASK, &old, NULL);
	return ok;
}

/* Starts one of the agent's threads unless it runs, or the threads step aside, or the process exits
 * (the shipping thread: once its exit work is done). The thread is created outside G.mu: creation
 * allocates, and the program's allocator may be waiting, through a lock of its own, on a program
 * thread that waits for G.mu (jemalloc's background thread calls pthread_cond_wait holding its
 * mutex). No lock of the agent is ever held across a call into the program's allocator. */
static void start_once(int *started, pthread_t *th, void *(*fn)(void *), int at_exit, int bit, const char *what)
{
	int go = 0, ok;

	if (guard_tls.sync_call && !guard_tls.agent) {
		atomic_fetch_or(&G.start_wanted, bit);
		return;
	}
	pthread_mutex_lock(&G.mu);
	if (!*started && !G.quiesce && !(at_exit ? G.exit_done : G.exiting)) {
		*started = 1;
		G.starting++;
		go = 1;
	}
	pthread_mutex_unlock(&G.mu);
	if (!go)
		return;
	ok = start_thread(th, fn);
	pthread_mutex_lock(&G.mu);
	if (!ok)
		*started = 0;
	G.starting--;
	pthread_cond_broadcast(&G.cv);   /* guard_threads_aside() may wait for the pthread_t */
	pthread_mutex_unlock(&G.mu);
	if (!ok)
		guard_log("cannot start one of the agent's threads", "thread=%s", what);
}

void guard_start_watchdog(void)
{
	if (G.region)
		return;   /* the host's collector watches */
	start_once(&G.wd_started, &wd_th, wd_main, 0, START_WATCHDOG, "watchdog");
}

void guard_start_shipper(void)
{
	if (G.region)
		return;   /* the host's collector ships */
	/* at exit too: the exit's work is the shipping thread's */
	start_once(&G.ship_started, &ship_th, sh_main, 1, START_SHIPPER, "shipping");
}

void guard_start_wanted(void)
{
	int w = atomic_exchange(&G.start_wanted, 0);

	if (w & START_WATCHDOG)
		guard_start_watchdog();
	if (w & START_SHIPPER)
		guard_start_shipper();
}

/* ---- the shipping budget's intake (threads.c ships what it keeps) ---- */

void guard_enqueue(const struct gviol *v)
{
	if (G.region) {
		guard_region_push(v);   /* the collector offers it to the process's budget */
		return;
	}
	if (budget_offer(G.budget, v, guard_now())) {
		pthread_mutex_lock(&G.mu);
		pthread_cond_broadcast(&G.cv);
		pthread_mutex_unlock(&G.mu);
		if (!G.ship_started)
			guard_start_shipper();
	}
}

void guard_budget_set(int reports_per_min)
{
	budget_set(G.budget, reports_per_min);
	G.cfg.reports_per_min = reports_per_min;
	pthread_mutex_lock(&G.mu);
	pthread_cond_broadcast(&G.cv);
	pthread_mutex_unlock(&G.mu);
}

int guard_baseline_claim(int32_t L, int32_t type, int64_t end)
{
	uint32_t tslot = type >= 0 && type < GP_MAX_TYPES ? (uint32_t)type : GP_MAX_TYPES;
	int per_min = G.cfg.baseline_per_min;
	_Atomic int64_t *next;
	int64_t open;

	if (per_min <= 0 || L < 0 || L >= GP_MAX_LOOPS || G.mode != GUARD_MODE_GUARD)
		return 0;
	next = &G.base_next[L][tslot];
	open = atomic_load_explicit(next, memory_order_relaxed);
	/* the first unit to end after the interval opens takes it: one CAS, a lost race just says no */
	return end >= open && atomic_compare_exchange_strong(next, &open, end + 60000000000LL / per_min);
}

void guard_baseline_enqueue(const struct gviol *v)
{
	int queued = 0;

	if (G.region) {
		guard_region_push(v);
		atomic_fetch_add(&G.n.baseline, 1);
		return;
	}
	pthread_mutex_lock(&G.mu);
	/* half the queue at most: a baseline never keeps a violation out */
	if (G.qlen < GUARD_QUEUE / 2) {
		G.queue[(G.qhead + G.qlen) % GUARD_QUEUE] = *v;
		G.qlen++;
		queued = 1;
		pthread_cond_broadcast(&G.cv);
	}
	pthread_mutex_unlock(&G.mu);
	if (queued) {
		atomic_fetch_add(&G.n.baseline, 1);
		if (!G.ship_started)
			guard_start_shipper();
	}
}

/* ---- stepping aside, and the end ---- */

int guard_threads_aside(int (*fn)(void *), void *arg)
{
	struct timespec ms = { 0, 1000000 };
	int wd, ship, r, e;

	pthread_mutex_lock(&G.mu);
	wd = G.wd_started;
	ship = G.ship_started;
	if ((!wd && !ship) || G.exiting) {
		pthread_mutex_unlock(&G.mu);
		errno = EINVAL;   /* the program's own threads are the others */
		return -1;
	}
	G.quiesce = 1;
	G.ship_cancel = 1;   /* a transfer in flight gives up; its streams go to the spool */
	pthread_cond_broadcast(&G.cv);
	pthread_cond_broadcast(&G.wd_cv);
	/* a thread being created has no pthread_t to join yet (none starts now: quiesce) */
	while (G.starting)
		guard_cv_wait(&G.cv, guard_now() + 1000000);
	wd = G.wd_started;
	ship = G.ship_started;
	pthread_mutex_unlock(&G.mu);
	if (wd)
		guard_real_pthread_join(wd_th, NULL);
	if (ship)
		guard_real_pthread_join(ship_th, NULL);
	/* a thread joined leaves the kernel's thread group a moment later */
	for (int i = 0; (r = fn(arg)) < 0 && errno == EINVAL && i < 200; i++)
		guard_real_nanosleep(&ms, NULL);
	e = errno;
	pthread_mutex_lock(&G.mu);
	G.quiesce = 0;
	G.ship_cancel = 0;
	G.wd_started = G.ship_started = 0;
	pthread_mutex_unlock(&G.mu);
	guard_log("the agent's threads stepped aside for a call of a single-threaded process", "result=%d", r);
	if (wd)
		guard_start_watchdog();
	if (ship)
		guard_start_shipper();
	errno = e;
	return r;
}

void guard_threads_exit(void)
{
	int need;
	int64_t until;

	if (G.region) {
		/* the collector ships what the region holds, then removes it; what training learnt it saves
		 * while the process waits, as the process's own thread would have */
		if (G.mode == GUARD_MODE_TRAIN && G.train && guard_region_train_exit(EXIT_SAVE_WAIT_NS) < 0)
			guard_log("the profile was not saved at exit; the collector saves it when it finds the "
				  "process ended", "path=%s", G.profile_path);
		guard_region_state(1);
		return;
	}
	pthread_mutex_lock(&G.mu);
	G.exiting = 1;
	G.ship_cancel = 1;   /* a transfer in flight gives up at once */
	pthread_cond_broadcast(&G.cv);
	pthread_cond_broadcast(&G.wd_cv);
	/* the shipping thread does the exit's work: started for it when there is any (training
	 * started it when it found a loop: before, nothing was learnt) */
	need = G.ship_started || G.qlen || G.cfg.log[0];
	pthread_mutex_unlock(&G.mu);
	if (need && !G.ship_started)
		guard_start_shipper();
	pthread_mutex_lock(&G.mu);
	until = guard_now() + EXIT_WAIT_NS;
	while (G.ship_started && !G.exit_done && guard_now() < until)
		guard_cv_wait(&G.cv, until);
	if (G.ship_started && !G.exit_done)
		guard_log("the profile or the queue was not saved at exit in time", "path=%s", G.profile_path);
	pthread_mutex_unlock(&G.mu);
}

/* Whether the exit's work is this thread's: not in a child of vfork() that calls exit() (it runs on
 * the parent's memory: the agent is the parent's), an agent thread, or an inert agent. */
static int exit_is_ours(void)
{
	return atomic_load(&G.active) && !guard_tls.agent && getpid() == G.pid;
}

void guard_exit_here(void)
{
	if (!exit_is_ours())
		return;
	guard_tls.nest = 1;
	guard_threads_exit();
	guard_tls.nest = 0;
}

static void exit_gate(void)
{
	if (!exit_is_ours())
		return;
	if (!G.exiting)
		guard_log("exit work ahead of the program's exit handlers",
			  "reason=\"the program's OpenSSL may be cleaned up at exit\"");
	guard_exit_here();
}

void guard_exit_gate(void)
{
	static atomic_int set;

	/* registered after the program's (OpenSSL's among them), so run before them; inherited by a
	 * forked child with the libraries it guards */
	if (atomic_exchange(&set, 1))
		return;
	if (atexit(exit_gate) != 0)
		guard_log("cannot register the agent's exit handler", "errno=%d", errno);
}

void guard_threads_reset_child(void)
{
	/* the child has one thread: this one; the agent's threads stayed with the parent */
	G.wd_started = 0;
	G.ship_started = 0;
	G.starting = 0;
	atomic_store(&G.start_wanted, 0);
	G.quiesce = 0;
	G.exiting = G.exit_done = 0;
	G.qhead = G.qlen = 0;
	G.ship_cancel = 0;
	/* the parent's candidates are the parent's to ship; the child draws a sequence of its own */
	budget_reset(G.budget);
	/* made anew: the parent's copies may count waiters (its threads) that do not exist here */
	init_cv(&G.cv);
	init_cv(&G.wd_cv);
}
