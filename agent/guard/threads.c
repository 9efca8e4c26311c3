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
#include "agent/guard/hot.h"
#include "agent/guard/threads.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static void held_work(int64_t now, int all);

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

void *guard_watchdog_main(void *arg)
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
		guard_cv_wait(&G.wd_cv, guard_now() + G.cfg.watchdog_ns);
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

/* What training learnt, to the profile file, counted and logged. True when it was saved. */
static bool save_profile(void)
{
	char err[512];

	if (gtrain_save(G.train, err, sizeof(err)) < 0) {
		atomic_fetch_add(&G.n.save_errors, 1);
		guard_log("cannot save the profile", "path=%s error=\"%s\"", G.profile_path, err);
		return false;
	}
	atomic_fetch_add(&G.n.saves, 1);
	return true;
}

/* The last of the process, on the shipping thread: nothing here waits on a server that does not
 * answer (the shipper gave up, G.ship_cancel). */
static void exit_sequence(void)
{
	struct gviol v;

	/* what training learnt, first */
	if (G.mode == GUARD_MODE_TRAIN && G.train)
		save_profile();
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

void *guard_ship_main(void *arg)
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
			guard_cv_wait(&G.cv, until);
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
			if (save_profile() && G.cfg.url[0] && G.cfg.upload_ns > 0 && now >= next_upload) {
				guard_profile_upload();
				next_upload = now + G.cfg.upload_ns;
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
	guard_budget_close(now, all);
	pthread_mutex_unlock(&G.mu);
	capture_new();
	trim_held();
	ship_closed();
}
