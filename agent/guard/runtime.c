/*
 * runtime: libsmguard.so's life inside a program: settings and start-up
 * (constructor), one slot per thread, fork and exit, the agent's fds, and
 * the agent's own threads: the watchdog (units stuck in flight) and the
 * shipping thread (violation streams, training saves, the spool).
 *
 * Start-up decides once whether this process is guarded at all (SM_GUARD_ONLY,
 * SM_GUARD_MODE, a usable profile); when not, every wrapper passes straight
 * through for the rest of the process's life. Settings that do not parse
 * leave the agent inert with the reason in SM_GUARD_LOG: a bad setting never
 * changes what the program does.
 */
#include "agent/guard/modmap.h"
#include "agent/guard/rt.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

struct guard_rt G __attribute__((aligned(64)));
_Static_assert(offsetof(struct guard_rt, cfg.min_wait_ns) + sizeof(int64_t) <= 64,
	       "what every wrapped call reads fits G's first cache line");
__thread struct gthread guard_tls __attribute__((tls_model("initial-exec")));

extern void *__libc_stack_end;

int64_t guard_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The TSC path is used only where the kernel keeps its own time with it (so it is invariant and
 * in step across CPUs). */
static int tsc_usable;
static uint64_t cal_tsc;
static int64_t cal_ns, cal_next;

static void clock_init(void)
{
	char src[32] = "", *flags = NULL;
	size_t n = 0;
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		ssize_t r = read(fd, src, sizeof(src) - 1);

		src[r > 0 ? r : 0] = '\0';
		close(fd);
	}
	if (strcmp(src, "tsc\n") != 0)
		return;
	if (util_read_file("/proc/cpuinfo", 1 << 20, &flags, &n) < 0)
		return;
	tsc_usable = strstr(flags, " constant_tsc") && strstr(flags, " nonstop_tsc");
	free(flags);
	cal_tsc = __builtin_ia32_rdtsc();
	cal_ns = guard_mono_ns();
	cal_next = cal_ns + 100000000;
}

void guard_clock_tick(void)
{
	int64_t ns;
	uint64_t tsc;

	if (!tsc_usable || (ns = guard_mono_ns()) < cal_next)
		return;
	tsc = __builtin_ia32_rdtsc();
	if (tsc <= cal_tsc || ns <= cal_ns)
		return;
	/* ns per tick over everything since the start: the longer, the closer */
	{
		uint64_t mult = (uint64_t)(((unsigned __int128)(uint64_t)(ns - cal_ns) << 32) / (tsc - cal_tsc));

		atomic_fetch_add_explicit(&G.clk.seq, 1, memory_order_acq_rel);
		atomic_thread_fence(memory_order_release);
		G.clk.base_tsc = tsc;
		G.clk.base_ns = ns;
		G.clk.mult = mult;
		G.clk.ok = 1;
		atomic_fetch_add_explicit(&G.clk.seq, 1, memory_order_release);
	}
	cal_next = ns + 1000000000;
}

/* ---- log: to SM_GUARD_LOG only, never to the program's descriptors ---- */

static void log_to_file(const char *line, size_t len)
{
	int fd;

	if (!G.cfg.log[0])
		return;
	fd = open(G.cfg.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, len) < 0) {
		/* nowhere left to say so */
	}
	close(fd);
}

void guard_log(const char *msg, const char *fmt, ...)
{
	char rest[1024];
	va_list ap;
	struct gthread *t = &guard_tls;
	uint32_t nest = t->nest;

	if (!G.cfg.log[0])
		return;
	t->nest = 1;
	va_start(ap, fmt);
	vsnprintf(rest, sizeof(rest), fmt, ap);
	va_end(ap);
	log_msg(LOG_INFO, msg, "pid=%ld exe=%s %s", (long)getpid(), G.exe_name, rest);
	t->nest = nest;
}

/* ---- the agent's descriptors ---- */

int guard_fd_register(int fd)
{
	for (int i = 0; i < GUARD_MAX_FDS; i++) {
		int free_slot = -1;

		if (atomic_compare_exchange_strong(&G.fds[i], &free_slot, fd)) {
			atomic_fetch_add(&G.nfds, 1);
			return 0;
		}
	}
	return -1;
}

void guard_fd_unregister(int fd)
{
	/* a thread with a table of its own never registered anything; nor did anyone, mostly */
	if (guard_tls.own_fds || !atomic_load_explicit(&G.nfds, memory_order_relaxed))
		return;
	for (int i = 0; i < GUARD_MAX_FDS; i++) {
		int mine = fd;

		if (atomic_compare_exchange_strong(&G.fds[i], &mine, -1)) {
			atomic_fetch_sub(&G.nfds, 1);
			return;
		}
	}
}

int guard_fd_adopt(int fd)
{
	struct rlimit rl;
	int hi, floor = 3;

	if (fd < 0 || guard_tls.own_fds)
		return fd;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 128) {
		rlim_t top = rl.rlim_cur > 65536 ? 65536 : rl.rlim_cur;

		floor = (int)(top - GUARD_MAX_FDS);
	}
	/* out of the way of programs that dup2() onto low numbers or close ranges of them */
	hi = fcntl(fd, F_DUPFD_CLOEXEC, floor);
	if (hi >= 0) {
		guard_real_close(fd);
		fd = hi;
	}
	guard_fd_register(fd);
	return fd;
}

int guard_fd_is_ours(int fd)
{
	/* the program's every close() asks: none registered is the common case (own_fd_table) */
	if (fd < 0 || !atomic_load_explicit(&G.nfds, memory_order_relaxed))
		return 0;
	for (int i = 0; i < GUARD_MAX_FDS; i++)
		if (atomic_load_explicit(&G.fds[i], memory_order_relaxed) == fd)
			return 1;
	return 0;
}

/* ---- threads and their slots ---- */

void guard_thread_setup(struct gthread *t)
{
	t->tid = gettid();
	if (!t->base) {
		if (t->tid == getpid()) {
			/* the main thread: its stack starts where the kernel put argc */
			t->base = (uintptr_t)__libc_stack_end;
		} else {
			/* a thread started before the agent, or not through pthread_create */
			pthread_attr_t a;
			void *addr = NULL;
			size_t size = 0;

			if (pthread_getattr_np(pthread_self(), &a) == 0) {
				pthread_attr_getstack(&a, &addr, &size);
				pthread_attr_destroy(&a);
			}
			t->base = (uintptr_t)addr + size;
		}
	}
	t->loop = -1;
	t->best = -1;
	t->ready = 1;
}

static struct gslot *claim_slot(void)
{
	uint32_t n = atomic_load(&G.nslots);
	int64_t now = guard_now(), oldest = INT64_MAX;
	struct gslot *best = NULL;

	/* a slot freed long enough ago that no report still needs its ring */
	for (uint32_t i = 0; i < n; i++) {
		struct gslot *s = &G.slots[i];
		int st = atomic_load(&s->state);
		int64_t since = atomic_load(&s->dead_since);

		if ((st == SLOT_FREE || (st == SLOT_DEAD && now - since > 30000000000LL)) && since < oldest) {
			best = s;
			oldest = since;
		}
	}
	if (best) {
		int st = atomic_load(&best->state);

		if (atomic_compare_exchange_strong(&best->state, &st, SLOT_LIVE))
			return best;
	}
	while ((n = atomic_load(&G.nslots)) < GUARD_MAX_THREADS) {
		if (atomic_compare_exchange_weak(&G.nslots, &n, n + 1)) {
			atomic_store(&G.slots[n].state, SLOT_LIVE);
			return &G.slots[n];
		}
	}
	return NULL;
}

struct gslot *guard_slot_of(struct gthread *t)
{
	struct gslot *s = t->slot;

	if (GUARD_LIKELY(s) || t->exiting)
		return s;
	s = claim_slot();
	if (!s) {
		atomic_fetch_add(&G.n.threads_over, 1);
		t->exiting = 1;   /* never try again for this thread */
		return NULL;
	}
	if (!s->ring.size) {
		if (gring_init(&s->ring, G.cfg.ring_bytes) < 0) {
			atomic_store(&s->state, SLOT_FREE);
			t->exiting = 1;
			return NULL;
		}
	} else {
		gring_reset(&s->ring);
	}
	atomic_store(&s->tid, t->tid);
	atomic_store(&s->pthread, (uintptr_t)pthread_self());
	atomic_store(&s->unit_start, 0);
	atomic_store(&s->timer_live, 0);
	/* the previous owner's units stay counted (reports never go backwards) */
	atomic_fetch_add(&G.n.units_gone, atomic_load(&s->units));
	atomic_store(&s->units, 0);
	atomic_store(&s->violations, 0);
	atomic_store(&s->samples, 0);
	t->slot = s;
	/* the key's destructor gives the slot back when the thread ends */
	pthread_setspecific(G.key, s);
	return s;
}

void guard_thread_exit(void *p)
{
	struct gthread *t = &guard_tls;
	struct gslot *s = p;

	if (!s)
		return;
	t->nest = 1;
	guard_timer_delete(t);
	atomic_store(&s->unit_start, 0);
	atomic_store(&s->dead_since, guard_now());
	atomic_store(&s->state, SLOT_DEAD);
	t->slot = NULL;
	t->exiting = 1;
}

/* ---- the queue of violations and the agent's threads ---- */

static pthread_t start_thread(void *(*fn)(void *), int *ok)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t th;

	/* the agent's threads take no signal: the program's go to the program's threads */
	sigfillset(&all);
	guard_real_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	*ok = guard_real_pthread_create(&th, &attr, fn, NULL) == 0;
	pthread_attr_destroy(&attr);
	guard_real_sigmask(SIG_SETMASK, &old, NULL);
	return th;
}

/*
 * An agent thread takes a descriptor table of its own. While a thread shares
 * the program's table, the kernel takes a reference on the file in each read,
 * write, recv, send... the program makes, and locks the file position of
 * regular files, which it skips for a table with one user: the agent's
 * threads would slow every system call of a single-threaded program (a
 * PostgreSQL backend, an nginx worker). The copy holds the program's files:
 * they go at once, or the program's close() would no longer close them. What
 * the agent opens afterwards is out of the program's reach (no need to
 * protect it) and never inherited by the program's children.
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

static void timed_wait(int64_t until)
{
	struct timespec ts = { until / 1000000000, until % 1000000000 };

	pthread_cond_timedwait(&G.cv, &G.mu, &ts);
}

static void *watchdog_main(void *arg)
{
	struct gthread *t = &guard_tls;

	(void)arg;
	t->agent = 1;
	own_fd_table(t);
	pthread_setname_np(pthread_self(), "smguard-watch");
	/* reports go out from the first unit on, not only from the first violation */
	if (G.cfg.url[0] && G.cfg.report_ns > 0)
		guard_start_shipper();
	for (;;) {
		struct timespec ts = { G.cfg.watchdog_ns / 1000000000, G.cfg.watchdog_ns % 1000000000 };
		uint32_t n;
		int64_t now;

		nanosleep(&ts, NULL);
		guard_clock_tick();
		now = guard_now();
		n = atomic_load(&G.nslots);
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
				/* ask the thread itself for its stack; a connect() it sits in would fail with EINTR */
				if (atomic_load(&G.sampling) && atomic_load(&s->call) != GC_CONNECT) {
					atomic_store(&s->capture_seq, seq);
					syscall(SYS_tgkill, (long)G.pid, (long)atomic_load(&s->tid), (long)G.sig);
				}
			}
			if (flagged == seq && now - start > G.cfg.hang_ns) {
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
					atomic_fetch_add(&s->violations, 1);
					guard_enqueue(&v);
				}
			}
		}
	}
	return NULL;
}

static int ship_busy;

static void *ship_main(void *arg)
{
	struct gthread *t = &guard_tls;
	int64_t next_save, next_report, next_upload, next_fetch;
	int reporting = G.cfg.url[0] && G.cfg.report_ns > 0;

	(void)arg;
	t->agent = 1;
	own_fd_table(t);
	pthread_setname_np(pthread_self(), "smguard-ship");
	next_save = guard_now() + G.cfg.save_ns;
	next_report = guard_now();   /* at once: the host shows up as soon as its service runs */
	next_upload = guard_now() + G.cfg.upload_ns;
	next_fetch = guard_now() + G.cfg.fetch_ns;
	for (;;) {
		struct gviol v;
		int have = 0, exit_report, exit_save = 0;
		int64_t now = guard_now(), until = now + 1000000000;

		guard_clock_tick();
		if (reporting && now >= next_report) {
			guard_report_self(0);
			next_report = now + G.cfg.report_ns;
		}
		if (G.mode == GUARD_MODE_TRAIN && next_save < until)
			until = next_save;
		pthread_mutex_lock(&G.mu);
		if (!G.qlen && !G.save_req && !(G.exit_report && !G.exit_reported) && now < until)
			timed_wait(until);
		exit_report = G.exit_report && !G.exit_reported;
		if (G.save_req) {
			/* the process exits: its last save, here rather than on the program's thread */
			G.save_req = 0;
			next_save = 0;
			exit_save = 1;
		}
		if (G.qlen) {
			v = G.queue[G.qhead];
			G.qhead = (G.qhead + 1) % GUARD_QUEUE;
			G.qlen--;
			have = 1;
			ship_busy = 1;
		}
		pthread_mutex_unlock(&G.mu);
		if (exit_report) {
			guard_report_self(1);
			pthread_mutex_lock(&G.mu);
			G.exit_reported = 1;
			pthread_cond_broadcast(&G.cv);
			pthread_mutex_unlock(&G.mu);
			reporting = 0;
		}
		if (have) {
			guard_report(&v);
			pthread_mutex_lock(&G.mu);
			ship_busy = 0;
			pthread_cond_broadcast(&G.cv);
			pthread_mutex_unlock(&G.mu);
		}
		now = guard_now();
		if (G.mode == GUARD_MODE_TRAIN && now >= next_save) {
			char err[512];

			if (gtrain_save(G.train, err, sizeof(err)) < 0) {
				atomic_fetch_add(&G.n.save_errors, 1);
				guard_log("cannot save the profile", "path=%s error=\"%s\"", G.profile_path, err);
			} else {
				atomic_fetch_add(&G.n.saves, 1);
				if (G.cfg.url[0] && G.cfg.upload_ns > 0 && (exit_save || now >= next_upload)) {
					/* before the exiting program is told the save is done */
					guard_profile_upload();
					next_upload = now + G.cfg.upload_ns;
				}
			}
			next_save = now + G.cfg.save_ns;
			pthread_mutex_lock(&G.mu);
			G.save_done++;
			pthread_cond_broadcast(&G.cv);
			pthread_mutex_unlock(&G.mu);
		}
		if (G.mode == GUARD_MODE_GUARD) {
			guard_report_tick(now);
			if (G.cfg.url[0] && G.cfg.fetch_ns > 0 && now >= next_fetch) {
				guard_profile_refresh();
				next_fetch = now + G.cfg.fetch_ns;
			}
		}
	}
	return NULL;
}

void guard_start_watchdog(void)
{
	int ok;

	pthread_mutex_lock(&G.mu);
	if (!G.wd_started) {
		G.wd_started = 1;
		start_thread(watchdog_main, &ok);
		if (!ok)
			guard_log("cannot start the watchdog thread", "%s", "");
	}
	pthread_mutex_unlock(&G.mu);
}

void guard_start_shipper(void)
{
	int ok;

	pthread_mutex_lock(&G.mu);
	if (!G.ship_started) {
		G.ship_started = 1;
		start_thread(ship_main, &ok);
		if (!ok)
			guard_log("cannot start the shipping thread", "%s", "");
	}
	pthread_mutex_unlock(&G.mu);
}

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

/* ---- modules loaded later ---- */

void guard_on_dlopen(void)
{
	struct gthread *t = &guard_tls;
	struct gtab *old, *tab;
	char err[256];

	if (G.mode != GUARD_MODE_GUARD || !G.profile)
		return;
	old = atomic_load(&G.tab);
	if (!old || !old->unresolved)
		return;
	t->nest = 1;
	pthread_mutex_lock(&G.tab_mu);
	tab = gtab_build(G.profile, err, sizeof(err));
	if (tab && tab->unresolved < atomic_load(&G.tab)->unresolved) {
		/* the old table stays: a thread may be reading it */
		atomic_store(&G.tab, tab);
	} else {
		gtab_free(tab);
	}
	pthread_mutex_unlock(&G.tab_mu);
	t->nest = 0;
}

/* ---- settings pushed by the server ---- */

#define MAX_TAB_SWAPS 32   /* guard tables replaced for a new k; each old one is kept (threads may read it) */

/* The number named in settings, or def when absent or not a number. */
static double setting(json_object *s, const char *name, double min, double max, double def)
{
	json_object *v;
	double d;

	if (!json_object_object_get_ex(s, name, &v) ||
	    !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
		return def;
	d = json_object_get_double(v);
	return isfinite(d) && d >= min && d <= max ? d : def;
}

/* The thresholds again with another k: the same loops and contexts, so the table is swapped whole. */
static void set_k(double k)
{
	struct gtab *tab;
	char err[256];

	if (!G.profile || k == G.profile->k)
		return;
	if (G.tab_swaps >= MAX_TAB_SWAPS) {
		guard_log("k not changed: too many changes in this process", "k=%g", k);
		return;
	}
	pthread_mutex_lock(&G.tab_mu);
	gp_set_k(G.profile, k, G.cfg.min_threshold_ns);
	tab = gtab_build(G.profile, err, sizeof(err));
	if (tab) {
		atomic_store(&G.tab, tab);
		G.tab_swaps++;
	}
	pthread_mutex_unlock(&G.tab_mu);
	if (tab)
		guard_log("new thresholds", "k=%g", k);
	else
		guard_log("cannot build the guard table for a new k", "k=%g error=\"%s\"", k, err);
}

/* Whether two profiles have the same loops in the same order: the thread states (a loop's index)
 * stay valid across the swap of their guard tables. */
static int same_loops(const struct gprofile *a, const struct gprofile *b)
{
	if (a->nloops != b->nloops)
		return 0;
	for (size_t i = 0; i < a->nloops; i++) {
		const struct gp_site *x = &a->loops[i].site, *y = &b->loops[i].site;
		const struct gp_module *mx = &a->modules[x->module], *my = &b->modules[y->module];

		if (x->offset != y->offset || x->depth != y->depth || strcmp(x->call, y->call) != 0 ||
		    strcmp(mx->name, my->name) != 0 || strcmp(mx->build_id, my->build_id) != 0)
			return 0;
	}
	return 1;
}

void guard_profile_swap(const char *text, size_t len)
{
	unsigned char sha[SHA256_LEN];
	struct gprofile *p, *old = NULL;
	struct gtab *tab = NULL;
	char err[256];

	sha256(text, len, sha);
	if (!G.profile || memcmp(sha, G.fleet_sha, sizeof(sha)) == 0)
		return;
	if (!(p = gp_new()) || gp_load_text(p, text, len) < 0 || strcmp(p->build_id, G.build_id) != 0) {
		guard_log("the fleet's profile is not usable", "error=\"%s\"", p ? gp_error(p) : "out of memory");
		gp_free(p);
		return;
	}
	memcpy(G.fleet_sha, sha, sizeof(sha));
	if (!same_loops(G.profile, p)) {
		guard_log("the fleet's profile has other loops: the next start takes it", "units=%llu",
			  (unsigned long long)p->units);
		gp_free(p);
		return;
	}
	if (G.tab_swaps >= MAX_TAB_SWAPS) {
		guard_log("the fleet's profile not taken: too many changes in this process", "%s", "");
		gp_free(p);
		return;
	}
	pthread_mutex_lock(&G.tab_mu);
	gp_set_k(p, G.profile->k, G.cfg.min_threshold_ns);
	tab = gtab_build(p, err, sizeof(err));
	if (tab) {
		atomic_store(&G.tab, tab);
		old = G.profile;
		G.profile = p;
		G.tab_swaps++;
	}
	pthread_mutex_unlock(&G.tab_mu);
	if (!tab) {
		guard_log("cannot build the guard table of the fleet's profile", "error=\"%s\"", err);
		gp_free(p);
		return;
	}
	/* the guard tables hold what they need: the old profile can go (the old tables stay) */
	gp_free(old);
	guard_log("guarding with the fleet's profile", "units=%llu", (unsigned long long)p->units);
}

void guard_apply_settings(const char *answer, size_t len)
{
	json_tokener *tok = json_tokener_new();
	json_object *o = tok ? json_tokener_parse_ex(tok, answer ? answer : "", (int)len) : NULL, *s = NULL, *v;
	int muted, hz;
	int64_t min_wait;
	int rpm;

	json_tokener_free(tok);
	if (!o || !json_object_object_get_ex(o, "settings", &s) || !json_object_is_type(s, json_type_object)) {
		json_object_put(o);
		return;   /* an older server: nothing pushed */
	}
	muted = json_object_object_get_ex(s, "guard", &v) && json_object_is_type(v, json_type_boolean) &&
		!json_object_get_boolean(v);
	if (atomic_exchange(&G.muted, muted) != muted)
		guard_log(muted ? "guarding off (pushed by the server)" : "guarding on again", "%s", "");
	min_wait = (int64_t)setting(s, "min_wait_us", 1, 60000000, (double)G.cfg0.min_wait_ns / 1000) * 1000;
	if (min_wait != G.cfg.min_wait_ns) {
		G.cfg.min_wait_ns = min_wait;   /* read by every wrapped call: one aligned store */
		guard_log("new minimum wait", "min_wait_us=%lld", (long long)(min_wait / 1000));
	}
	rpm = (int)setting(s, "reports_per_min", 0, 100000, G.cfg0.reports_per_min);
	if (rpm != G.cfg.reports_per_min) {
		G.cfg.reports_per_min = rpm;
		guard_log("new report limit", "reports_per_min=%d", rpm);
	}
	hz = (int)setting(s, "sample_hz", 1, 10000, G.cfg0.sample_hz);
	if (G.cfg0.sample_hz > 0 && hz != G.cfg.sample_hz) {
		/* timers armed from now on take it */
		G.cfg.sample_hz = hz;
		G.period_ns = 1000000000LL / hz;
		guard_log("new sampling rate", "sample_hz=%d", hz);
	}
	if (G.mode == GUARD_MODE_GUARD)
		set_k(setting(s, "k", 0, 1000, G.k0));
	json_object_put(o);
}

/* The condition the agent's threads wait on; made anew in a forked child, whose copy may count
 * waiters (the parent's shipping thread) that do not exist there: a broadcast would wait for them. */
static void init_cv(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&G.cv, &ca);
	pthread_condattr_destroy(&ca);
}

/* ---- fork ---- */

static void before_fork(void)
{
	struct gthread *t = &guard_tls;

	if (!atomic_load(&G.active))
		return;
	t->nest++;
	pthread_mutex_lock(&G.tab_mu);
	pthread_mutex_lock(&G.mu);
	if (G.train)
		gtrain_lock(G.train);
}

static void after_fork_parent(void)
{
	struct gthread *t = &guard_tls;

	if (!atomic_load(&G.active))
		return;
	if (G.train)
		gtrain_unlock(G.train);
	pthread_mutex_unlock(&G.mu);
	pthread_mutex_unlock(&G.tab_mu);
	t->nest--;
}

static void after_fork_child(void)
{
	struct gthread *t = &guard_tls;
	uint32_t n;

	if (!atomic_load(&G.active))
		return;
	G.pid = getpid();
	t->tid = gettid();
	/* the child has one thread: this one; the others' slots and the agent's threads stay behind */
	n = atomic_load(&G.nslots);
	for (uint32_t i = 0; i < n; i++) {
		struct gslot *s = &G.slots[i];

		if (s == t->slot)
			continue;
		atomic_store(&s->state, SLOT_FREE);
		atomic_store(&s->dead_since, 0);
		atomic_store(&s->unit_start, 0);
		atomic_store(&s->timer_live, 0);
		atomic_store(&s->units, 0);     /* the parent's: not the child's to report */
		gring_reset(&s->ring);
	}
	if (t->slot) {
		struct gslot *s = t->slot;

		gring_reset(&s->ring);
		atomic_store(&s->tid, t->tid);
		atomic_store(&s->unit_start, 0);
		/* timers are not inherited */
		atomic_store(&s->timer_live, 0);
		atomic_store(&s->units, 0);
		atomic_store(&s->violations, 0);
		atomic_store(&s->samples, 0);
	}
	t->timer_state = TIMER_NONE;
	guard_unit_reset_child(t);
	G.wd_started = 0;
	G.ship_started = 0;
	G.qhead = G.qlen = 0;
	G.ship_cancel = 0;
	G.save_req = G.save_done = 0;
	G.exit_report = G.exit_reported = 0;
	G.started_ns = util_now_real_ns();       /* a new process: reports as one */
	ship_busy = 0;
	memset(G.rl_used, 0, sizeof(G.rl_used));
	memset(&G.n, 0, sizeof(G.n));
	guard_report_reset_child();
	for (int i = 0; i < GUARD_MAX_FDS; i++) {
		int fd = atomic_exchange(&G.fds[i], -1);

		if (fd >= 0)
			guard_real_close(fd);
	}
	atomic_store(&G.nfds, 0);
	if (G.train) {
		gtrain_unlock(G.train);
		gtrain_reset_child(G.train);
	}
	init_cv();
	pthread_mutex_unlock(&G.mu);
	pthread_mutex_unlock(&G.tab_mu);
	t->nest--;
}

/* ---- start-up ---- */

static const char *env_get(const char *name)
{
	return getenv(name);
}

static void read_token(void)
{
	char *text = NULL;
	size_t len = 0;

	if (!G.cfg.token_file[0])
		return;
	if (util_read_file(G.cfg.token_file, sizeof(G.token) - 1, &text, &len) < 0) {
		guard_log("cannot read the token file; shipping without a token", "path=%s error=\"%s\"",
			  G.cfg.token_file, strerror(errno));
		return;
	}
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
		len--;
	memcpy(G.token, text, len);
	G.token[len] = '\0';
	free(text);
}

static void find_self(void)
{
	Dl_info info;
	struct gmodmap mm = { NULL, 0 };

	if (gmodmap_load(&mm) < 0)
		return;
	if (dladdr((void *)find_self, &info) && info.dli_fbase) {
		for (size_t i = 0; i < mm.n; i++)
			if (mm.mods[i].bias == (uintptr_t)info.dli_fbase ||
			    ((uintptr_t)find_self >= mm.mods[i].lo && (uintptr_t)find_self < mm.mods[i].hi)) {
				G.self_lo = mm.mods[i].lo;
				G.self_hi = mm.mods[i].hi;
				break;
			}
	}
	/* the module the wrapped calls' frames are named after */
	if (dladdr(dlsym(RTLD_NEXT, "read"), &info) && info.dli_fname) {
		const char *slash = strrchr(info.dli_fname, '/');

		snprintf(G.libc_name, sizeof(G.libc_name), "%s", slash ? slash + 1 : info.dli_fname);
	} else {
		snprintf(G.libc_name, sizeof(G.libc_name), "libc.so.6");
	}
	{
		const struct gmod *main_mod = gmodmap_main(&mm);

		if (main_mod) {
			snprintf(G.exe, sizeof(G.exe), "%s", main_mod->path);
			snprintf(G.exe_name, sizeof(G.exe_name), "%s", main_mod->name);
			snprintf(G.build_id, sizeof(G.build_id), "%s", main_mod->build_id);
		}
	}
	gmodmap_release(&mm);
}

static int load_profile(void)
{
	char err[256];
	struct gprofile *p = gp_new();
	int r;

	if (!p)
		return -1;
	r = gp_load_file(p, G.profile_path);
	if (r < 0) {
		if (r == -1)
			guard_log("cannot use the profile; not guarding", "error=\"%s\"", gp_error(p));
		gp_free(p);
		return -1;
	}
	G.k0 = G.cfg.k >= 0 ? G.cfg.k : p->k;
	gp_set_k(p, G.k0, G.cfg.min_threshold_ns);
	G.profile = p;
	G.tab = gtab_build(p, err, sizeof(err));
	if (!G.tab) {
		guard_log("cannot build the guard table; not guarding", "error=\"%s\"", err);
		return -1;
	}
	return 0;
}

static void key_destructor(void *p)
{
	guard_thread_exit(p);
}

__attribute__((constructor(102))) static void guard_init(void)
{
	struct gthread *t = &guard_tls;
	char err[512];
	struct utsname uts;
	struct stat st;

	t->nest = 1;
	for (int i = 0; i < GUARD_MAX_FDS; i++)
		atomic_store(&G.fds[i], -1);
	guard_config_defaults(&G.cfg);
	log_init("smguard", LOG_INFO);
	log_set_sink(log_to_file);
	{
		/* the log first, so that a bad setting can be reported */
		const char *lp = getenv("SM_GUARD_LOG");

		if (lp && lp[0] == '/' && strlen(lp) < sizeof(G.cfg.log))
			memcpy(G.cfg.log, lp, strlen(lp) + 1);
	}
	if (guard_config_load(&G.cfg, env_get, err, sizeof(err)) < 0) {
		/* the log setting may be the one that failed: keep what parsed */
		guard_log("bad setting; the agent stays inert", "error=\"%s\"", err);
		goto inert;
	}
	find_self();
	/* a program may run through a link (redis-server -> redis-check-rdb): both names count */
	if (G.cfg.mode == GUARD_MODE_OFF || (!guard_config_only_matches(G.cfg.only, G.exe_name) &&
					     !guard_config_only_matches(G.cfg.only, program_invocation_short_name)))
		goto inert;
	if (!G.build_id[0]) {
		/* no GNU build id: the profile is keyed by the executable's path instead */
		unsigned char h[SHA256_LEN];
		char hex[2 * SHA256_LEN + 1];

		sha256(G.exe, strlen(G.exe), h);
		util_hex(h, 16, hex);
		snprintf(G.build_id, sizeof(G.build_id), "path-%s", hex);
	}
	snprintf(G.profile_path, sizeof(G.profile_path), "%s/%s.json", G.cfg.profile_dir, G.build_id);
	G.pid = getpid();
	G.started_ns = util_now_real_ns();
	G.sig = G.cfg.signal;
	clock_init();
	G.period_ns = G.cfg.sample_hz > 0 ? 1000000000LL / G.cfg.sample_hz : 0;
	if (G.cfg.host[0])
		snprintf(G.host, sizeof(G.host), "%s", G.cfg.host);
	else if (gethostname(G.host, sizeof(G.host) - 1) < 0)
		snprintf(G.host, sizeof(G.host), "unknown");
	snprintf(G.app, sizeof(G.app), "%s", G.cfg.app[0] ? G.cfg.app :
		 program_invocation_short_name[0] ? program_invocation_short_name : G.exe_name);
	if (uname(&uts) == 0)
		snprintf(G.kernel, sizeof(G.kernel), "%s", uts.release);
	read_token();
	G.cfg0 = G.cfg;
	pthread_mutex_init(&G.mu, NULL);
	pthread_mutex_init(&G.tab_mu, NULL);
	init_cv();
	G.mode = G.cfg.mode;
	if (G.mode == GUARD_MODE_AUTO)
		G.mode = stat(G.profile_path, &st) == 0 ? GUARD_MODE_GUARD : GUARD_MODE_TRAIN;
	if (G.mode == GUARD_MODE_GUARD) {
		if (load_profile() < 0)
			goto inert;
		if (guard_sampler_init() < 0)
			guard_log("cannot install the sampling handler; no CPU samples", "signal=%d", G.sig);
	} else {
		G.train = gtrain_new();
		if (!G.train)
			goto inert;
		guard_sampler_init_unwinder();
	}
	if (pthread_key_create(&G.key, key_destructor) != 0 ||
	    pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0)
		goto inert;
	guard_log("guarding", "mode=%s build_id=%s profile=%s", guard_mode_name(G.mode), G.build_id,
		  G.profile_path);
	atomic_store(&G.active, 1);
	t->nest = 0;
	return;
inert:
	t->nest = 0;
}

uint64_t guard_units(void)
{
	uint32_t n = atomic_load(&G.nslots);
	uint64_t units = atomic_load(&G.n.units_gone) + atomic_load(&G.n.train_units);

	for (uint32_t i = 0; i < n; i++)
		units += atomic_load(&G.slots[i].units);
	return units;
}

__attribute__((destructor)) static void guard_fini(void)
{
	struct gthread *t = &guard_tls;
	uint64_t units = 0;

	if (!atomic_load(&G.active) || t->agent)
		return;
	t->nest = 1;
	if (G.ship_started && G.cfg.url[0] && G.cfg.report_ns > 0) {
		/* the last report says the process is gone; a second at most, then the program exits */
		int64_t until = guard_now() + 1000000000LL;

		pthread_mutex_lock(&G.mu);
		G.exit_report = 1;
		pthread_cond_broadcast(&G.cv);
		while (!G.exit_reported && guard_now() < until)
			timed_wait(until);
		pthread_mutex_unlock(&G.mu);
	}
	if (G.mode == GUARD_MODE_TRAIN && G.train && G.ship_started) {
		/* the shipping thread names the frames and writes the file: never the program's threads */
		int64_t until = guard_now() + 10000000000LL;
		int done;

		pthread_mutex_lock(&G.mu);
		done = G.save_done;
		G.save_req = 1;
		pthread_cond_broadcast(&G.cv);
		while (G.save_done == done && guard_now() < until)
			timed_wait(until);
		if (G.save_done == done)
			guard_log("the profile was not saved at exit in time", "path=%s", G.profile_path);
		pthread_mutex_unlock(&G.mu);
	} else if (G.mode == GUARD_MODE_GUARD && G.ship_started) {
		/* what is queued goes to the spool: no waiting on a slow server at exit */
		int64_t until = guard_now() + 2000000000LL;

		G.ship_cancel = 1;
		pthread_mutex_lock(&G.mu);
		while ((G.qlen || ship_busy) && guard_now() < until)
			timed_wait(until);
		pthread_mutex_unlock(&G.mu);
	}
	units = guard_units();
	guard_log("exit", "units=%llu violations=%llu suppressed=%llu queue_drops=%llu shipped=%llu spooled=%llu lost=%llu "
		  "empty=%llu baseline=%llu", (unsigned long long)units, (unsigned long long)atomic_load(&G.n.violations), (unsigned long long)atomic_load(&G.n.suppressed),
		  (unsigned long long)atomic_load(&G.n.queue_drops), (unsigned long long)atomic_load(&G.n.shipped),
		  (unsigned long long)atomic_load(&G.n.spooled), (unsigned long long)atomic_load(&G.n.lost),
		  (unsigned long long)atomic_load(&G.n.empty), (unsigned long long)atomic_load(&G.n.baseline));
	t->nest = 0;
}
