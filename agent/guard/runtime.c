/*
 * runtime: libsmguard.so's life inside a program: settings and start-up
 * (constructor), one slot per thread, fork and exit, the agent's descriptors,
 * the clock, logging, and the settings the server pushes. The agent's own
 * threads are threads.c's.
 *
 * Start-up decides once whether this process is guarded at all (SM_GUARD_ONLY,
 * SM_GUARD_MODE, a usable profile); when not, every wrapper passes straight
 * through for the rest of the process's life, and nothing but libsmguard.so
 * itself was loaded. Settings that do not parse leave the agent inert with the
 * reason in SM_GUARD_LOG: a bad setting never changes what the program does.
 */
#include "agent/guard/lazy.h"
#include "agent/guard/modmap.h"
#include "agent/guard/rt.h"
#include "agent/guard/unwind.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/util.h"

#include <cpuid.h>
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
	char src[32] = "";
	unsigned int a, b, c, d;
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		ssize_t r = read(fd, src, sizeof(src) - 1);

		src[r > 0 ? r : 0] = '\0';
		close(fd);
	}
	if (strcmp(src, "tsc\n") != 0)
		return;
	/* an invariant TSC (CPUID 0x80000007, EDX bit 8): constant rate, ticking in every C- and P-state */
	tsc_usable = __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1U << 8));
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

/* ---- log: to SM_GUARD_LOG only, never to the program's descriptors ----
 * A line logged on a program's thread is queued and written by the shipping
 * thread: the file is opened in the agent's own table, never in the
 * program's, where even a moment's descriptor could take the number the
 * program's next open() expects. Before the agent is active (the constructor,
 * before main()) lines are written at once. */

#define LOG_QUEUE 64

static struct {
	pthread_mutex_t mu;
	char *line[LOG_QUEUE];
	size_t len[LOG_QUEUE];
	unsigned head, n;
	uint64_t dropped;
} logq = { PTHREAD_MUTEX_INITIALIZER, { NULL }, { 0 }, 0, 0, 0 };

static void log_write(const char *line, size_t len)
{
	int fd = open(G.cfg.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return;
	if (write(fd, line, len) < 0) {
		/* nowhere left to say so */
	}
	close(fd);
}

static void log_to_file(const char *line, size_t len)
{
	char *copy;

	if (!G.cfg.log[0])
		return;
	if (guard_tls.agent || !atomic_load_explicit(&G.active, memory_order_relaxed)) {
		log_write(line, len);
		return;
	}
	copy = malloc(len);
	pthread_mutex_lock(&logq.mu);
	if (copy && logq.n < LOG_QUEUE) {
		memcpy(copy, line, len);
		logq.line[(logq.head + logq.n) % LOG_QUEUE] = copy;
		logq.len[(logq.head + logq.n) % LOG_QUEUE] = len;
		logq.n++;
		copy = NULL;
	} else {
		logq.dropped++;
	}
	pthread_mutex_unlock(&logq.mu);
	free(copy);
}

int guard_log_pending(void)
{
	return logq.n != 0;
}

void guard_log_flush(void)
{
	uint64_t dropped;

	for (;;) {
		char *line = NULL;
		size_t len = 0;

		pthread_mutex_lock(&logq.mu);
		if (logq.n) {
			line = logq.line[logq.head];
			len = logq.len[logq.head];
			logq.head = (logq.head + 1) % LOG_QUEUE;
			logq.n--;
		}
		dropped = logq.dropped;
		logq.dropped = 0;
		pthread_mutex_unlock(&logq.mu);
		if (dropped) {
			char note[96];
			int n = snprintf(note, sizeof(note), "smguard: %llu log lines dropped (queue full)\n",
					 (unsigned long long)dropped);

			log_write(note, (size_t)n);
		}
		if (!line)
			return;
		log_write(line, len);
		free(line);
	}
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
	if (!t->agent && atomic_load_explicit(&G.active, memory_order_relaxed))
		guard_log_wake();
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

#define SLOT_REUSE_NS 30000000000LL   /* a slot's ring may be read by a report this long after its thread ended */

/* Slots of threads that ended, oldest first (a thread takes one back in O(1)). */
static struct {
	pthread_mutex_t mu;
	uint32_t idx[GUARD_MAX_THREADS];
	unsigned head, n;
} dead = { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0, 0 };

void guard_thread_setup(struct gthread *t)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);

	t->tid = gettid();
	if (t->tid == getpid()) {
		/* the main thread: its stack starts where the kernel put argc */
		if (!t->base)
			t->base = (uintptr_t)__libc_stack_end;
		unwind_thread_init();
	} else {
		/* a thread started before the agent, or not through pthread_create (jemalloc's own), may
		 * be inside the program's allocator now, holding its locks, where nothing may allocate
		 * (pthread_getattr_np() would). glibc keeps a thread's descriptor at the top of its stack
		 * block: from this frame to there is mapped. */
		uintptr_t self = (uintptr_t)pthread_self();

		if (!t->base)
			t->base = self;
		if (self > sp)
			unwind_thread_bounds(sp & ~(uintptr_t)4095, self);
	}
	if (!t->mask_known && G.mode == GUARD_MODE_GUARD)
		guard_sig_thread_mask(t);
	t->loop = -1;
	t->best = -1;
	t->ready = 1;
}

static struct gslot *claim_slot(void)
{
	struct gslot *s = NULL;
	uint32_t n;

	pthread_mutex_lock(&dead.mu);
	n = atomic_load(&G.nslots);
	if (dead.n) {
		struct gslot *old = &G.slots[dead.idx[dead.head]];

		/* the oldest one, once no report can need its ring any more (or when no slot is left) */
		if (guard_now() - atomic_load(&old->dead_since) > SLOT_REUSE_NS || n >= GUARD_MAX_THREADS) {
			dead.head = (dead.head + 1) % GUARD_MAX_THREADS;
			dead.n--;
			s = old;
		}
	}
	if (!s && n < GUARD_MAX_THREADS) {
		s = &G.slots[n];
		atomic_store(&G.nslots, n + 1);
	}
	if (s)
		atomic_store(&s->state, SLOT_LIVE);
	pthread_mutex_unlock(&dead.mu);
	return s;
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
			guard_thread_exit(s);
			return NULL;
		}
	} else {
		gring_reset(&s->ring);
	}
	atomic_store(&s->tid, t->tid);
	atomic_store(&s->pthread, (uintptr_t)pthread_self());
	atomic_store(&s->unit_start, 0);
	atomic_store(&s->timer_live, 0);
	atomic_store(&s->sig_blocked, t->prog_blocked);
	/* the previous owner's units stay counted (reports never go backwards) */
	atomic_fetch_add(&G.n.units_gone, atomic_load(&s->units));
	atomic_store(&s->units, 0);
	atomic_store(&s->violations, 0);
	atomic_store(&s->samples, 0);
	t->timer_state = TIMER_NONE;
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
	if (t->slot == s)
		guard_timer_delete(t);
	atomic_store(&s->unit_start, 0);
	atomic_store(&s->dead_since, guard_now());
	atomic_store(&s->state, SLOT_DEAD);
	pthread_mutex_lock(&dead.mu);
	dead.idx[(dead.head + dead.n) % GUARD_MAX_THREADS] = (uint32_t)(s - G.slots);
	dead.n++;
	pthread_mutex_unlock(&dead.mu);
	t->slot = NULL;
	t->exiting = 1;
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
		guard_budget_set(rpm);
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

/* ---- fork ----
 * No lock of the agent is held across fork(): the handlers a program's allocator registers
 * (jemalloc's) take its locks after ours would have been taken, and a thread holding one of those
 * may be inside a wrapped pthread_mutex_lock(), waiting for ours. The child instead makes every
 * lock anew, and throws away what a lock held at the fork (by a thread it does not have) may have
 * left half changed. */

int guard_lock_reset_child(pthread_mutex_t *m)
{
	int held = pthread_mutex_trylock(m) != 0;

	pthread_mutex_init(m, NULL);
	return held;
}

static void before_fork(void)
{
	struct gthread *t = &guard_tls;

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
	uint32_t n;
	int log_held;

	unwind_fork_child();
	if (!atomic_load(&G.active))
		return;
	G.pid = getpid();
	t->tid = gettid();
	/* what these guard is made anew below whether or not it was held */
	guard_lock_reset_child(&G.tab_mu);
	guard_lock_reset_child(&G.mu);
	guard_lock_reset_child(&dead.mu);
	guard_lock_reset_child(&G.shared_mu);
	log_held = guard_lock_reset_child(&logq.mu);
	unwind_reset_child();
	guard_sig_reset_child();
	/* the child has one thread: this one; the others' slots can be taken again at once */
	n = atomic_load(&G.nslots);
	dead.head = dead.n = 0;
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
		dead.idx[dead.n++] = i;
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
	guard_threads_reset_child();
	guard_starve_reset_child();
	G.started_ns = util_now_real_ns();       /* a new process: reports as one */
	memset(&G.n, 0, sizeof(G.n));
	guard_report_reset_child();
	for (int i = 0; i < GUARD_MAX_FDS; i++) {
		int fd = atomic_exchange(&G.fds[i], -1);

		if (fd >= 0)
			guard_real_close(fd);
	}
	atomic_store(&G.nfds, 0);
	/* the parent writes what its threads logged (a queue caught half changed is left, not freed) */
	while (logq.n && !log_held) {
		free(logq.line[logq.head]);
		logq.head = (logq.head + 1) % LOG_QUEUE;
		logq.n--;
	}
	logq.head = logq.n = 0;
	logq.dropped = 0;
	if (G.train)
		gtrain_reset_child(G.train);
	gring_reset(&G.shared_ring);
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

	if (unwind_modmap_load(&mm) < 0)
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
	if (access(G.profile_path, F_OK) < 0) {
		gp_free(p);
		return -1;   /* no profile of this build: nothing to guard with (gp_load_file says so too) */
	}
	if (lazy_load(LAZY_JSONC) < 0) {
		guard_log("cannot read the profile; not guarding", "error=\"%s\"", lazy_error(LAZY_JSONC));
		gp_free(p);
		return -1;
	}
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
	guard_sig_at_start();
	gmodmap_capture_argv0();   /* before the program can rewrite its argv (a process title) */
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
	/* a program may run through a link (redis-server -> redis-check-rdb): both names count (the
	 * module is named as started, the file is the link's target) */
	if (G.cfg.mode == GUARD_MODE_OFF || (!guard_config_only_matches(G.cfg.only, G.exe_name) &&
					     !guard_config_only_matches(G.cfg.only, program_invocation_short_name) &&
					     !guard_config_only_matches(G.cfg.only, strrchr(G.exe, '/') ? strrchr(G.exe, '/') + 1 : G.exe)))
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
	G.boost_period_ns = G.cfg.violation_hz > 0 ? 1000000000LL / G.cfg.violation_hz : 0;
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
	guard_threads_init();
	pthread_mutex_init(&G.tab_mu, NULL);
	pthread_mutex_init(&G.shared_mu, NULL);
	{
		/* every signal the agent sends carries it: a program's own never does by chance */
		uint64_t r = 0;

		util_random(&r, sizeof(r));
		G.sig_cookie = (void *)(uintptr_t)(r | 1);
	}
	G.mode = G.cfg.mode;
	if (G.mode == GUARD_MODE_AUTO)
		G.mode = stat(G.profile_path, &st) == 0 ? GUARD_MODE_GUARD : GUARD_MODE_TRAIN;
	/* what is loaded (json-c, libunwind) only once the agent is sure to run */
	if (G.mode == GUARD_MODE_GUARD && load_profile() < 0)
		goto inert;
	if (unwind_open(err, sizeof(err)) < 0) {
		guard_log("cannot load the unwinder; the agent stays inert", "error=\"%s\"", err);
		goto inert;
	}
	if (G.mode == GUARD_MODE_GUARD) {
		if (guard_sampler_init() < 0)
			guard_log("cannot install the sampling handler; no CPU samples", "signal=%d", G.sig);
	} else {
		G.train = gtrain_new();
		if (!G.train)
			goto inert;
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

	/* a child of vfork() that calls exit() runs on the parent's memory: the agent is the parent's */
	if (!atomic_load(&G.active) || t->agent || getpid() != G.pid)
		return;
	t->nest = 1;
	guard_threads_exit();
	t->nest = 0;
}
