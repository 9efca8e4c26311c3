/*
 * threads: the agent's own threads inside a program, and how they end.
 *
 *   watchdog  every SM_GUARD_WATCHDOG_MS: a unit in flight over its threshold
 *             is flagged, and its stack is asked for (the thread's next CPU
 *             sample takes it while it runs; a thread asleep in a wrapped call
 *             gets the agent's signal, and the wrapper resumes the call); a unit
 *             still in flight SM_GUARD_HANG_MS after its start is shipped as it
 *             stands.
 *   shipping  captures the violation streams the shipping budget keeps and
 *             ships them when their minute closes (below, "the shipping
 *             budget"), ships the baseline streams, saves what training
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

static void held_work(int64_t now, int all);

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
	G.prng = prio_seed();
	prio_pool_init(G.held, GUARD_HELD);
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
	/* the minute's candidates, with the tau known so far, then the streams still queued: to the spool */
	guard_report_exit_held(1);
	held_work(guard_now(), 1);
	guard_report_exit_held(0);
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
	guard_log("exit", "units=%llu violations=%llu suppressed=%llu queue_drops=%llu early_closes=%llu shipped=%llu "
		  "spooled=%llu lost=%llu empty=%llu baseline=%llu async_requests=%llu async_violations=%llu",
		  (unsigned long long)guard_units(),
		  (unsigned long long)atomic_load(&G.n.violations), (unsigned long long)atomic_load(&G.n.suppressed),
		  (unsigned long long)atomic_load(&G.n.queue_drops), (unsigned long long)atomic_load(&G.n.early_closes),
		  (unsigned long long)atomic_load(&G.n.shipped),
		  (unsigned long long)atomic_load(&G.n.spooled), (unsigned long long)atomic_load(&G.n.lost),
		  (unsigned long long)atomic_load(&G.n.empty), (unsigned long long)atomic_load(&G.n.baseline),
		  (unsigned long long)atomic_load(&G.n.async_requests),
		  (unsigned long long)atomic_load(&G.n.async_violations));
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
		if (!G.qlen && !G.held_new && !G.exiting && !G.quiesce && !guard_log_pending() && now < until)
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
		held_work(now, 0);
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

/* ---- the shipping budget: the worst first, totals unbiased ---- */

/*
 * guard.md "Shipping budget". Per unit type (loop and type) and minute, the
 * violations are priority-sampled (prio.h): the reports_per_min of highest
 * priority are held as candidates in G.held, the others are counted
 * (suppressed). A candidate's stream is captured by the shipping thread as
 * soon as it is kept, as a violation's stream always was (the rings move on),
 * and shipped when its minute closes, with its weight max(1, tau / w).
 *
 * Memory: GUARD_HELD candidates of every type together (a violation that
 * finds none free is a queue drop), and their streams at most
 * GUARD_HELD_BYTES: over it, the open minute holding the most bytes closes
 * early (early_closes) and ships, each stream at most GUARD_HELD_STREAM.
 * A minute also closes, with the tau known so far, at exit and when the
 * budget changes; a forked child starts with none (the parent ships its own).
 */

static uint32_t group_id(int32_t loop, uint32_t tslot)
{
	return (uint32_t)loop * GUARD_TSLOTS + tslot;
}

/* The violation's size: its excess over its threshold (its duration without one), at least 1 ns. */
static double violation_size(const struct gviol *v)
{
	int64_t x = v->threshold >= 0 ? v->dur - v->threshold : v->dur;

	return x > 1 ? (double)x : 1;
}

void guard_enqueue(const struct gviol *v)
{
	int64_t now = guard_now();
	/* deferred requests have a budget of their own per loop: they never push a unit type's out */
	uint32_t tslot = v->async ? GUARD_TSLOT_ASYNC :
			 v->type >= 0 && v->type < GP_MAX_TYPES ? (uint32_t)v->type : GP_MAX_TYPES;
	struct prio_group *g;
	int evicted = 0;
	int32_t at;

	atomic_fetch_add(&G.n.violations, 1);
	if (v->loop < 0 || v->loop >= GP_MAX_LOOPS)
		return;
	pthread_mutex_lock(&G.mu);
	g = &G.pg[v->loop][tslot];
	/* a minute over that the shipping thread has not closed yet closes here */
	if (g->offered && now - g->opened >= GUARD_MINUTE_NS) {
		prio_close(G.held, GUARD_HELD, g, group_id(v->loop, tslot));
		G.held_new++;
	}
	if (!g->offered)
		g->opened = now;
	at = prio_offer(G.held, GUARD_HELD, g, group_id(v->loop, tslot), (uint32_t)G.cfg.reports_per_min,
			violation_size(v), prio_uniform(&G.prng), &evicted);
	if (at >= 0) {
		G.held_v[at] = *v;
		G.held_tag[at]++;
		G.held_new++;
		pthread_cond_broadcast(&G.cv);
	}
	pthread_mutex_unlock(&G.mu);
	if (at == PRIO_DROPPED || evicted)
		atomic_fetch_add(&G.n.suppressed, 1);
	else if (at == PRIO_FULL)
		atomic_fetch_add(&G.n.queue_drops, 1);
	if (at >= 0 && !G.ship_started)
		guard_start_shipper();
}

/* Under G.mu: the minutes over at now close (every open one with all). */
static void close_minutes(int64_t now, int all)
{
	for (int32_t l = 0; l < GP_MAX_LOOPS; l++)
		for (uint32_t t = 0; t < GUARD_TSLOTS; t++) {
			struct prio_group *g = &G.pg[l][t];

			if (g->offered && (all || now - g->opened >= GUARD_MINUTE_NS))
				prio_close(G.held, GUARD_HELD, g, group_id(l, t));
		}
}

void guard_budget_set(int reports_per_min)
{
	pthread_mutex_lock(&G.mu);
	close_minutes(0, 1);
	G.cfg.reports_per_min = reports_per_min;
	G.held_new++;
	pthread_cond_broadcast(&G.cv);
	pthread_mutex_unlock(&G.mu);
}

/* Captures the candidates kept since the last look, and the closed ones not captured yet. */
static void capture_new(void)
{
	for (uint32_t i = 0; i < GUARD_HELD; i++) {
		struct gviol v;
		uint32_t tag = 0;
		int need;

		pthread_mutex_lock(&G.mu);
		need = (G.held[i].group != PRIO_NONE || G.held[i].closed) && !guard_captured(i, G.held_tag[i]);
		if (need) {
			v = G.held_v[i];
			tag = G.held_tag[i];
		}
		pthread_mutex_unlock(&G.mu);
		/* an item evicted meanwhile has another tag now: captured again at the next look */
		if (need)
			guard_capture(i, tag, &v);
	}
}

/* Ships the candidates whose minute closed, with their weights. A closed item is the shipping
 * thread's until released: no program thread touches it. */
static void ship_closed(void)
{
	for (uint32_t i = 0; i < GUARD_HELD; i++) {
		struct gviol v;
		double w = 0;
		uint32_t tag = 0;
		int closed;

		pthread_mutex_lock(&G.mu);
		closed = G.held[i].closed;
		if (closed) {
			w = G.held[i].weight;
			tag = G.held_tag[i];
			v = G.held_v[i];
		}
		pthread_mutex_unlock(&G.mu);
		if (!closed)
			continue;
		/* closed before the shipping thread saw it (by a later violation of its type) */
		if (!guard_captured(i, tag))
			guard_capture(i, tag, &v);
		guard_capture_ship(i, w);
		pthread_mutex_lock(&G.mu);
		prio_release(&G.held[i]);
		pthread_mutex_unlock(&G.mu);
	}
}

/* Over GUARD_HELD_BYTES of streams, or over GUARD_HELD_HIGH candidates (a budget larger than the
 * pool): the open minute holding the most bytes (candidates) closes early and ships. */
static void trim_held(void)
{
	static size_t by_group[GP_MAX_LOOPS * GUARD_TSLOTS];   /* the shipping thread's */

	for (;;) {
		size_t total = 0, most = 0, nheld = 0;
		uint32_t gid = PRIO_NONE;
		int by_bytes;

		for (uint32_t i = 0; i < GUARD_HELD; i++)
			total += guard_captured_bytes(i);
		memset(by_group, 0, sizeof(by_group));
		pthread_mutex_lock(&G.mu);
		for (uint32_t i = 0; i < GUARD_HELD; i++)
			nheld += G.held[i].group != PRIO_NONE;
		by_bytes = total > GUARD_HELD_BYTES;
		if (!by_bytes && nheld <= GUARD_HELD_HIGH) {
			pthread_mutex_unlock(&G.mu);
			return;
		}
		for (uint32_t i = 0; i < GUARD_HELD; i++) {
			uint32_t g = G.held[i].group;

			if (g != PRIO_NONE && (by_group[g] += by_bytes ? guard_captured_bytes(i) : 1) > most) {
				most = by_group[g];
				gid = g;
			}
		}
		if (gid != PRIO_NONE) {
			prio_close(G.held, GUARD_HELD, &G.pg[gid / GUARD_TSLOTS][gid % GUARD_TSLOTS], gid);
			atomic_fetch_add(&G.n.early_closes, 1);
		}
		pthread_mutex_unlock(&G.mu);
		if (gid == PRIO_NONE)
			return;
		ship_closed();
	}
}

/* The shipping thread's part of the budget: closes the minutes over (every one with all),
 * captures the new candidates, keeps their bytes within bounds, ships what closed. */
static void held_work(int64_t now, int all)
{
	pthread_mutex_lock(&G.mu);
	G.held_new = 0;
	close_minutes(now, all);
	pthread_mutex_unlock(&G.mu);
	capture_new();
	trim_held();
	ship_closed();
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
	/* the parent's candidates are the parent's to ship; the child draws a sequence of its own */
	memset(G.pg, 0, sizeof(G.pg));
	prio_pool_init(G.held, GUARD_HELD);
	G.held_new = 0;
	G.prng = prio_seed();
	/* made anew: the parent's copies may count waiters (its threads) that do not exist here */
	init_cv(&G.cv);
	init_cv(&G.wd_cv);
}
