/*
 * threads: the agent's own threads inside a program, and how they end.
 *
 *   watchdog  every SM_GUARD_WATCHDOG_MS: a unit in flight over its threshold
 *             is flagged, and its stack is asked for (the thread's next CPU
 *             sample takes it while it runs; a thread asleep in a wrapped call
 *             gets the agent's signal, and the wrapper resumes the call); a unit
 *             still in flight SM_GUARD_HANG_MS after its start is shipped as it
 *             stands.
 *   shipping  builds and ships the violation streams, saves what training
 *             learnt, reports the process, fetches the fleet's profile, and
 *             writes the log lines of the program's threads.
 *
 * Both start when first needed, with every signal blocked, and take a
 * descriptor table of their own (own_fd_table() below). For a system
 * call only a process of one thread may make (unshare, setns) they step aside:
 * they stop, the call is made, and they start again. At exit the program's
 * thread asks the shipping thread to finish and waits for it: a transfer in
 * flight gives up at once, training is saved, what is queued goes to the
 * spool, and only a server that has been answering gets the last report
 * (within EXIT_NET_MS, report.c): exit never waits on the network.
 */
#include "agent/guard/rt.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXIT_WAIT_NS 10000000000LL   /* at most, for the save of a large profile */

static pthread_t wd_th, ship_th;

static void timed_wait(pthread_cond_t *cv, int64_t until)
{
	struct timespec ts = { until / 1000000000, until % 1000000000 };

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

void guard_threads_init(void)
{
	pthread_mutex_init(&G.mu, NULL);
	init_cv(&G.cv);
	init_cv(&G.wd_cv);
}

/*
 * An agent thread takes a descriptor table of its own. While a thread shares
 * the program's table, the kernel takes a reference on the file in each read,
 * write, recv, send... the program makes, and locks the file position of
 * regular files, which it skips for a table with one user: the agent's
 * threads would slow every system call of a single-threaded program (a
 * PostgreSQL backend, an nginx worker). The copy holds the program's files:
 * they go at once, or the program's close() would no longer close them. What
 * the agent opens afterwards is out of the program's reach and never
 * inherited by the program's children.
 */
static void own_fd_table(struct gthread *t)
{
	int fd;

	if (unshare(CLONE_FILES) < 0)
		return;   /* shared, as before: the agent's descriptors are protected instead */
	/* from here, what this thread opens stays where it is, unregistered */
	t->own_fds = 1;
	if (syscall(SYS_close_range, 0U, ~0U, 0) < 0) {
		struct rlimit rl;
		long top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (long)rl.rlim_cur : 65536;

		for (long i = 0; i < top; i++)
			guard_real_close((int)i);
	}
	/* 0, 1 and 2 taken, so that a library's message to stderr never lands in the agent's files */
	while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd < 2)
		;
	if (fd > 2)
		guard_real_close(fd);
}

static void agent_thread(const char *name)
{
	struct gthread *t = &guard_tls;

	t->agent = 1;
	own_fd_table(t);
	pthread_setname_np(pthread_self(), name);
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

/* ---- the watchdog ---- */

static void watch(int64_t now)
{
	uint32_t n = atomic_load(&G.nslots);

	for (uint32_t i = 0; i < n; i++) {
		struct gslot *s = &G.slots[i];
		int64_t start, thr, agent;
		uint32_t seq, flagged;

		if (atomic_load(&s->state) != SLOT_LIVE)
			continue;
		start = atomic_load_explicit(&s->unit_start, memory_order_acquire);
		if (!start)
			continue;
		seq = atomic_load(&s->unit_seq);
		thr = atomic_load(&s->threshold);
		agent = atomic_load(&s->agent_ns);
		/* the unit must not have changed while it was read */
		if (atomic_load_explicit(&s->unit_start, memory_order_acquire) != start)
			continue;
		flagged = atomic_load(&s->flagged_seq);
		if (thr >= 0 && now - start - agent > thr && flagged != seq) {
			atomic_store(&s->flagged_seq, seq);
			flagged = seq;
			/* its next CPU sample takes the stack while it runs */
			atomic_store(&s->capture_seq, seq);
		}
		if (flagged == seq && atomic_load(&s->captured_seq) != seq && atomic_load(&s->call)) {
			int64_t since = atomic_load(&s->call_start);

			/* asleep in a wrapped call (which the wrapper resumes): asked once per call */
			if (since != s->asked_at) {
				s->asked_at = since;
				guard_sampler_request(s);
			}
		}
		if (flagged == seq && now - start > G.cfg.hang_ns && atomic_load(&s->hang_seq) != seq) {
			/* the stack of the call it hangs in, for the stream shipped at the next look */
			atomic_store(&s->hang_seq, seq);
			if (atomic_load(&s->call))
				guard_sampler_request(s);
		} else if (flagged == seq && now - start > G.cfg.hang_ns) {
			uint32_t prev = atomic_load(&s->reported_seq);

			if (prev != seq && atomic_compare_exchange_strong(&s->reported_seq, &prev, seq)) {
				struct gviol v;

				memset(&v, 0, sizeof(v));
				v.tid = atomic_load(&s->tid);
				v.slot = i;
				v.start = start;
				v.end = now;
				v.dur = now - start - agent;
				v.threshold = thr;
				v.loop = atomic_load(&s->loop);
				v.type = atomic_load(&s->type);
				v.calls = atomic_load(&s->calls);
				v.hang = 1;
				guard_starve_hang(s, &v);
				atomic_fetch_add(&s->violations, 1);
				guard_enqueue(&v);
			}
		}
	}
}

static void *watchdog_main(void *arg)
{
	(void)arg;
	agent_thread("smguard-watch");
	/* the first units' run delay snapshots, without waiting a tick */
	guard_starve_tick(guard_now());
	/* reports go out from the first unit on, not only from the first violation */
	if (G.cfg.url[0] && G.cfg.report_ns > 0)
		guard_start_shipper();
	pthread_mutex_lock(&G.mu);
	while (!G.quiesce && !G.exiting) {
		timed_wait(&G.wd_cv, guard_now() + G.cfg.watchdog_ns);
		if (G.quiesce || G.exiting)
			break;
		pthread_mutex_unlock(&G.mu);
		guard_clock_tick();
		watch(guard_now());
		guard_starve_tick(guard_now());
		pthread_mutex_lock(&G.mu);
	}
	pthread_mutex_unlock(&G.mu);
	return NULL;
}

/* ---- the shipping thread ---- */

/* The last of the process, on the shipping thread: nothing here waits on a server that does not
 * answer (the shipper gave up, G.ship_cancel). */
static void exit_sequence(void)
{
	struct gviol v;

	/* what training learnt, first */
	if (G.mode == GUARD_MODE_TRAIN && G.train) {
		char err[512];

		if (gtrain_save(G.train, err, sizeof(err)) < 0) {
			atomic_fetch_add(&G.n.save_errors, 1);
			guard_log("cannot save the profile", "path=%s error=\"%s\"", G.profile_path, err);
		} else {
			atomic_fetch_add(&G.n.saves, 1);
		}
	}
	/* the streams still queued: to the spool */
	for (;;) {
		pthread_mutex_lock(&G.mu);
		if (!G.qlen) {
			pthread_mutex_unlock(&G.mu);
			break;
		}
		v = G.queue[G.qhead];
		G.qhead = (G.qhead + 1) % GUARD_QUEUE;
		G.qlen--;
		pthread_mutex_unlock(&G.mu);
		guard_report(&v);
	}
	/* the server, if it has been answering: training's upload and the last report */
	guard_report_exit(G.mode == GUARD_MODE_TRAIN && G.train && G.cfg.upload_ns > 0);
	guard_log("exit", "units=%llu violations=%llu suppressed=%llu queue_drops=%llu shipped=%llu spooled=%llu "
		  "lost=%llu empty=%llu baseline=%llu", (unsigned long long)guard_units(),
		  (unsigned long long)atomic_load(&G.n.violations), (unsigned long long)atomic_load(&G.n.suppressed),
		  (unsigned long long)atomic_load(&G.n.queue_drops), (unsigned long long)atomic_load(&G.n.shipped),
		  (unsigned long long)atomic_load(&G.n.spooled), (unsigned long long)atomic_load(&G.n.lost),
		  (unsigned long long)atomic_load(&G.n.empty), (unsigned long long)atomic_load(&G.n.baseline));
	guard_log_flush();
}

static void *ship_main(void *arg)
{
	int64_t next_save, next_report, next_upload, next_fetch;
	int reporting = G.cfg.url[0] && G.cfg.report_ns > 0;

	(void)arg;
	agent_thread("smguard-ship");
	next_save = guard_now() + G.cfg.save_ns;
	next_report = guard_now();   /* at once: the host shows up as soon as its service runs */
	next_upload = guard_now() + G.cfg.upload_ns;
	next_fetch = guard_now() + G.cfg.fetch_ns;
	for (;;) {
		struct gviol v;
		int have = 0, leave;
		int64_t now = guard_now(), until = now + 1000000000;

		guard_clock_tick();
		guard_log_flush();
		if (reporting && now >= next_report && !G.exiting && !G.quiesce) {
			guard_report_self();
			next_report = now + G.cfg.report_ns;
		}
		if (G.mode == GUARD_MODE_TRAIN && next_save < until)
			until = next_save;
		pthread_mutex_lock(&G.mu);
		if (!G.qlen && !G.exiting && !G.quiesce && !guard_log_pending() && now < until)
			timed_wait(&G.cv, until);
		leave = G.exiting || G.quiesce;
		if (!leave && G.qlen) {
			v = G.queue[G.qhead];
			G.qhead = (G.qhead + 1) % GUARD_QUEUE;
			G.qlen--;
			have = 1;
		}
		pthread_mutex_unlock(&G.mu);
		if (leave)
			break;
		if (have)
			guard_report(&v);
		now = guard_now();
		if (G.mode == GUARD_MODE_TRAIN && now >= next_save) {
			char err[512];

			if (gtrain_save(G.train, err, sizeof(err)) < 0) {
				atomic_fetch_add(&G.n.save_errors, 1);
				guard_log("cannot save the profile", "path=%s error=\"%s\"", G.profile_path, err);
			} else {
				atomic_fetch_add(&G.n.saves, 1);
				if (G.cfg.url[0] && G.cfg.upload_ns > 0 && now >= next_upload) {
					guard_profile_upload();
					next_upload = now + G.cfg.upload_ns;
				}
			}
			next_save = now + G.cfg.save_ns;
		}
		if (G.mode == GUARD_MODE_GUARD) {
			guard_report_tick(now);
			if (G.cfg.url[0] && G.cfg.fetch_ns > 0 && now >= next_fetch) {
				guard_profile_refresh();
				next_fetch = now + G.cfg.fetch_ns;
			}
		}
	}
	if (G.exiting) {
		exit_sequence();
		pthread_mutex_lock(&G.mu);
		G.exit_done = 1;
		pthread_cond_broadcast(&G.cv);
		pthread_mutex_unlock(&G.mu);
	}
	/* the shipper's sockets and the spool's descriptors live in this thread's table */
	guard_report_thread_end();
	guard_log_flush();
	return NULL;
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
	start_once(&G.wd_started, &wd_th, watchdog_main, 0, START_WATCHDOG, "watchdog");
}

void guard_start_shipper(void)
{
	/* at exit too: the exit's work is the shipping thread's */
	start_once(&G.ship_started, &ship_th, ship_main, 1, START_SHIPPER, "shipping");
}

void guard_start_wanted(void)
{
	int w = atomic_exchange(&G.start_wanted, 0);

	if (w & START_WATCHDOG)
		guard_start_watchdog();
	if (w & START_SHIPPER)
		guard_start_shipper();
}

void guard_log_wake(void)
{
	/* no lock needed: a wake missed is the next second's */
	if (G.ship_started)
		pthread_cond_broadcast(&G.cv);
}

/* ---- the queue of violations ---- */

void guard_enqueue(const struct gviol *v)
{
	int64_t now = guard_now();
	uint32_t tslot = v->type >= 0 && v->type < GP_MAX_TYPES ? (uint32_t)v->type : GP_MAX_TYPES;
	int drop = 0;

	atomic_fetch_add(&G.n.violations, 1);
	if (v->loop < 0 || v->loop >= GP_MAX_LOOPS)
		return;
	pthread_mutex_lock(&G.mu);
	/* at most reports_per_min streams per unit type and minute: a storm is counted, not shipped */
	if (now - G.rl_epoch[v->loop] >= 60000000000LL) {
		G.rl_epoch[v->loop] = now;
		memset(G.rl_used[v->loop], 0, sizeof(G.rl_used[v->loop]));
	}
	if (G.rl_used[v->loop][tslot] >= (uint32_t)G.cfg.reports_per_min) {
		atomic_fetch_add(&G.n.suppressed, 1);
		drop = 1;
	} else if (G.qlen == GUARD_QUEUE) {
		atomic_fetch_add(&G.n.queue_drops, 1);
		drop = 1;
	} else {
		G.rl_used[v->loop][tslot]++;
		G.queue[(G.qhead + G.qlen) % GUARD_QUEUE] = *v;
		G.qlen++;
		pthread_cond_broadcast(&G.cv);
	}
	pthread_mutex_unlock(&G.mu);
	if (!drop && !G.ship_started)
		guard_start_shipper();
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
		timed_wait(&G.cv, guard_now() + 1000000);
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
		timed_wait(&G.cv, until);
	if (G.ship_started && !G.exit_done)
		guard_log("the profile or the queue was not saved at exit in time", "path=%s", G.profile_path);
	pthread_mutex_unlock(&G.mu);
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
	memset(G.rl_used, 0, sizeof(G.rl_used));
	/* made anew: the parent's copies may count waiters (its threads) that do not exist here */
	init_cv(&G.cv);
	init_cv(&G.wd_cv);
}
