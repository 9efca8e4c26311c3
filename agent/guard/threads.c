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
 *             ships them when their minute closes (budget.h), ships the
 *             baseline streams, saves what training
 *             learnt, reports the process, fetches the fleet's profile, and
 *             writes the log lines of the program's threads.
 *
 * With the host's collector (region.h) neither starts: the collector does their work.
 * Both start when first needed, with every signal blocked, and take a
 * descriptor table of their own (own_fd_table() below). For a system
 * call only a process of one thread may make (unshare, setns) they step aside:
 * they stop, the call is made, and they start again. At exit the program's
 * thread asks the shipping thread to finish and waits for it: a transfer in
 * flight gives up at once, training is saved, what is queued goes to the
 * spool, and only a server that has been answering gets the last report
 * (within EXIT_NET_MS, report.c): exit never waits on the network.
 */
#include "agent/guard/budget.h"
#include "agent/guard/hot.h"
#include "agent/guard/threads.h"
#include "agent/guard/unwind.h"
#include "agent/guard/watch.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

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

static void ask(void *ctx, struct gslot *s)
{
	(void)ctx;
	guard_sampler_request(s);
}

static void hang(void *ctx, struct gslot *s, struct gviol *v)
{
	(void)ctx;
	guard_starve_hang(s, v);
	gwatch_hang_syscall(s, v, "/proc/self", guard_read_small);
	guard_enqueue(v);
}

static void watch(int64_t now)
{
	static const struct gwatch_ops ops = { ask, hang, NULL };

	gwatch_slots(G.slots, atomic_load(&G.nslots), now, G.cfg.hang_ns, &ops);
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
	struct unwind_counts uc;
	struct gviol v;

	guard_report_exit_begin();
	/* what training learnt, first */
	if (G.mode == GUARD_MODE_TRAIN && G.train)
		save_profile();
	/* the minute's candidates, with the tau known so far, then the streams still queued: to the spool */
	guard_report_exit_held(1);
	budget_work(G.budget, guard_now(), 1);
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
	unwind_counts(&uc);
	guard_log("exit", "units=%llu violations=%llu suppressed=%llu queue_drops=%llu early_closes=%llu shipped=%llu "
		  "spooled=%llu lost=%llu empty=%llu baseline=%llu async_requests=%llu async_violations=%llu "
		  "walks=%llu walk_frames=%llu walk_cache_entries=%llu slow_walks=%llu uncached_walks=%llu "
		  "clock=%s clock_restarts=%llu",
		  (unsigned long long)guard_units(),
		  (unsigned long long)atomic_load(&G.n.violations), (unsigned long long)atomic_load(&G.n.suppressed),
		  (unsigned long long)atomic_load(&G.n.queue_drops), (unsigned long long)atomic_load(&G.n.early_closes),
		  (unsigned long long)atomic_load(&G.n.shipped),
		  (unsigned long long)atomic_load(&G.n.spooled), (unsigned long long)atomic_load(&G.n.lost),
		  (unsigned long long)atomic_load(&G.n.empty), (unsigned long long)atomic_load(&G.n.baseline),
		  (unsigned long long)atomic_load(&G.n.async_requests),
		  (unsigned long long)atomic_load(&G.n.async_violations),
		  (unsigned long long)uc.walks, (unsigned long long)uc.frames, (unsigned long long)uc.entries,
		  (unsigned long long)uc.slow, (unsigned long long)uc.uncached, guard_clock_name(),
		  (unsigned long long)guard_clock_restarts());
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
		if (!G.qlen && !budget_pending(G.budget) && !G.exiting && !G.quiesce && !guard_log_pending() && now < until)
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
		budget_work(G.budget, now, 0);
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
	if (G.exiting)
		exit_sequence();
	/* the shipper's sockets and the spool's descriptors live in this thread's table */
	guard_report_thread_end();
	guard_log_flush();
	if (G.exiting) {
		/* only now: the exit gate's caller goes on to OpenSSL's cleanup, and the shipper's
		 * connections were closed through OpenSSL just above */
		pthread_mutex_lock(&G.mu);
		G.exit_done = 1;
		pthread_cond_broadcast(&G.cv);
		pthread_mutex_unlock(&G.mu);
	}
	return NULL;
}
