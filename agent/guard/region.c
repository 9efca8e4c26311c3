/* region: the guarded process's shared-memory file, for the host's collector (see region.h). */
#include "agent/guard/gtab.h"
#include "agent/guard/hot.h"
#include "agent/guard/learnt.h"
#include "agent/guard/modmap.h"
#include "agent/guard/region.h"
#include "agent/guard/threads.h"
#include "agent/guard/unwind.h"
#include "common/util.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/fs.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u

/* tests/integration/test_guard_collector.sh forges a region with these offsets */
_Static_assert(offsetof(struct gregion, pid) == 48 && offsetof(struct gregion, starttime) == 56,
	       "the region's process fields follow its 48-byte layout");

static size_t page_up(size_t n)
{
	return (n + PAGE - 1) & ~(size_t)(PAGE - 1);
}

/* The process's start, in clock ticks since boot. */
static uint64_t start_time(void)
{
	char b[1024];

	return guard_read_small("/proc/self/stat", b, sizeof(b)) > 0 ? util_proc_start_time(b) : 0;
}

enum { COLLECTOR_NONE, COLLECTOR_OURS, COLLECTOR_OTHER };

/*
 * Whether a collector holds its lock in dir, and whether it reads this library's regions (its
 * stamp, gregion_stamp(), in the file); raw system calls: flock is one of the wrapped calls. With
 * COLLECTOR_OTHER, what the file says is in seen.
 */
static int collector_running(const char *dir, char *seen, size_t seencap)
{
	char path[GUARD_PATH_MAX + 32], own[GREGION_STAMP_MAX];
	struct stat st;
	size_t n;
	ssize_t got;
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", dir, GREGION_LOCK);
	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return COLLECTOR_NONE;
	/* the collector's (root's, or this user's own): anyone may write the directory */
	if (syscall(SYS_fstat, fd, &st) < 0 || (st.st_uid != 0 && st.st_uid != geteuid())) {
		guard_real_close(fd);
		return COLLECTOR_NONE;
	}
	r = (int)syscall(SYS_flock, fd, LOCK_SH | LOCK_NB);
	if (!(r < 0 && errno == EWOULDBLOCK)) {
		guard_real_close(fd);
		return COLLECTOR_NONE;
	}
	got = (ssize_t)syscall(SYS_pread64, fd, seen, seencap - 1, 0L);
	guard_real_close(fd);
	seen[got > 0 ? (size_t)got : 0] = '\0';
	n = gregion_stamp(own, sizeof(own));
	if (got == (ssize_t)n && memcmp(seen, own, n) == 0)
		return COLLECTOR_OURS;
	/* one line, for the log: the file may hold anything */
	for (char *c = seen; *c; c++)
		if (*c == '\n' || *c == '"' || (unsigned char)*c < ' ' || (unsigned char)*c > '~')
			*c = *c == '\n' && !c[1] ? '\0' : '?';
	return COLLECTOR_OTHER;
}

static void put(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Where a region's parts go: computed before the file exists (a struct gregion is a quarter of a
 * megabyte, too much for the program's stack, whose pages would stay). */
struct shape {
	uint32_t ring;
	uint64_t slots_off, rings_off, tab_off, tab_cap, train_off, train_cap, bytes;
};

/* The layout of a region for rings of ring bytes: header, slots, rings, the pushed table's image, and a
 * training process's tables. */
static void layout(struct shape *s, uint32_t ring, int training)
{
	s->ring = ring;
	s->slots_off = page_up(sizeof(struct gregion));
	s->rings_off = s->slots_off + page_up((size_t)GUARD_MAX_THREADS * sizeof(struct gslot));
	s->tab_off = s->rings_off + (uint64_t)(GUARD_MAX_THREADS + 1) * ring;
	s->tab_cap = page_up(sizeof(struct gtab) + (size_t)GREGION_TAB_SLOTS * sizeof(struct gtab_ctx));
	s->train_off = s->tab_off + s->tab_cap;
	s->train_cap = training ? page_up(sizeof(struct learnt)) : 0;
	s->bytes = s->train_off + s->train_cap;
}

/* The layout written into a new region h. */
static void stamp(struct gregion *h, const struct shape *s)
{
	h->magic = GREGION_MAGIC;
	h->layout = GREGION_VERSION;
	h->slot_bytes = (uint32_t)sizeof(struct gslot);
	h->bytes = s->bytes;
	h->max_slots = GUARD_MAX_THREADS;
	h->ring_bytes = s->ring;
	h->slots_off = s->slots_off;
	h->rings_off = s->rings_off;
	h->tab_off = s->tab_off;
	h->tab_cap = s->tab_cap;
	h->train_off = s->train_off;
	h->train_cap = s->train_cap;
}

/*
 * A new file in the collector's directory, mapped (its descriptor closed), or NULL with errno; its
 * name in tmp. Named .PID.START while it is being written: the collector looks only at names of
 * digits, so it never reads one half made (publish() gives it its name).
 */
static struct gregion *create(size_t bytes, uint64_t st, char *tmp, size_t tmpcap)
{
	void *p;
	int fd, e;

	snprintf(tmp, tmpcap, "%s/.%ld.%llu", G.cfg.collector_dir, (long)getpid(), (unsigned long long)st);
	unlink(tmp);   /* a half-made one of a process that had this pid and start: gone */
	fd = (int)syscall(SYS_openat, AT_FDCWD, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)bytes) < 0)
		goto out_unlink;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (p == MAP_FAILED)
		goto out_unlink;
	guard_real_close(fd);
	return p;
out_unlink:
	e = errno;
	unlink(tmp);
	guard_real_close(fd);
	errno = e;
	return NULL;
}

/* The region written, under its name PID.START.N (an exec'd program of the same process takes the
 * next N). 0, or -1 with the file removed. */
static int publish(const char *tmp, uint64_t st)
{
	char path[GUARD_PATH_MAX + 96];

	for (unsigned n = 0; n < 64; n++) {
		snprintf(path, sizeof(path), "%s/%ld.%llu.%u", G.cfg.collector_dir, (long)getpid(),
			 (unsigned long long)st, n);
		if (syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	unlink(tmp);
	return -1;
}

/* What the process is, for the collector's streams and reports. */
static void describe(struct gregion *h, uint64_t st)
{
	const char *lim = guard_starve_cpu_limit();

	h->pid = (int32_t)getpid();
	h->sig = G.sig;
	h->starttime = st;
	h->sig_cookie = (uint64_t)(uintptr_t)G.sig_cookie;
	h->self_lo = G.self_lo;
	h->self_hi = G.self_hi;
	h->started_ns = G.started_ns;
	h->min_wait_ns = G.cfg.min_wait_ns;
	h->hang_ns = G.cfg.hang_ns;
	h->watchdog_ns = G.cfg.watchdog_ns;
	h->max_events = G.cfg.max_events;
	h->reports_per_min = G.cfg.reports_per_min;
	put(h->exe, sizeof(h->exe), G.exe);
	put(h->exe_name, sizeof(h->exe_name), G.exe_name);
	put(h->build_id, sizeof(h->build_id), G.build_id);
	put(h->app, sizeof(h->app), G.app);
	put(h->host, sizeof(h->host), G.host);
	put(h->version, sizeof(h->version), G.cfg.version);
	put(h->kernel, sizeof(h->kernel), G.kernel);
	put(h->libc_name, sizeof(h->libc_name), G.libc_name);
	put(h->cpu_limit, sizeof(h->cpu_limit), lim ? lim : "");
	memcpy(h->labels, G.cfg.labels, sizeof(h->labels));
	h->nlabels = G.cfg.nlabels;
	atomic_store(&h->sampling, atomic_load(&G.sampling));
	atomic_store(&h->state, GREG_LIVE);
}

/* What the collector needs to push settings: the process's settings as it started, its profile and
 * its table's k. */
static void describe_profile(struct gregion *h)
{
	double k = G.k0;
	uint64_t bits;

	guard_settings_started(h->as_started);
	h->min_threshold_ns = G.cfg.min_threshold_ns;
	h->fetch_ns = G.cfg.url[0] ? G.cfg.fetch_ns : 0;
	/* the collector reads and writes it from elsewhere: a relative path is the process's cwd's */
	if (G.profile_path[0] != '/' && getcwd(h->profile_path, sizeof(h->profile_path) - 2)) {
		size_t n = strlen(h->profile_path);

		h->profile_path[n++] = '/';
		put(h->profile_path + n, sizeof(h->profile_path) - n, G.profile_path);
	} else {
		put(h->profile_path, sizeof(h->profile_path), G.profile_path);
	}
	h->nkeys = G.profile && G.profile->nloops <= GP_MAX_LOOPS ? (uint32_t)G.profile->nloops : 0;
	for (uint32_t i = 0; i < h->nkeys; i++)
		h->loop_key[i] = gp_loop_key(G.profile, i);
	memcpy(&bits, &k, sizeof(bits));
	atomic_store(&h->k_now, bits);
}

/* Points G at region r (of bytes): its slots and shared ring; shared (a file, the collector's) or not
 * (the child's own memory: in-process work). */
static void adopt(struct gregion *r, size_t bytes, int shared)
{
	G.slots = (struct gslot *)(void *)((unsigned char *)r + r->slots_off);
	G.shared_ring = &r->shared_ring;
	G.region = shared ? r : NULL;
	G.region_bytes = shared ? bytes : 0;
	guard_releases_at(r->releases);
}

/* What the collector needs to save a training process's tables. */
static void describe_training(struct gregion *h)
{
	h->save_ns = G.cfg.save_ns;
	h->upload_ns = G.cfg.url[0] ? G.cfg.upload_ns : 0;
	h->train_k = G.cfg.k >= 0 ? G.cfg.k : GP_DEFAULT_K;
	h->train_cut = G.cfg.cut;
}

int guard_region_train_exit(int64_t wait_ns)
{
	struct gregion *r = G.region;
	int64_t now = guard_mono_ns(), until = now + wait_ns;
	struct timespec nap = { 0, 5000000 };

	if (!r || !r->train_cap)
		return -1;
	atomic_store(&r->train_exit_saved, 0);
	atomic_store(&r->state, GREG_EXITED);
	/* one that looked lately, or one that holds its lock (it finds the region within 200 ms: a
	 * process may learn and exit before the first look) */
	if (now - atomic_load(&r->collector_seen) > 1000000000) {
		char seen[GREGION_STAMP_MAX];

		if (collector_running(G.cfg.collector_dir, seen, sizeof(seen)) != COLLECTOR_OURS)
			return -1;
	}
	while (!atomic_load(&r->train_exit_saved)) {
		if (guard_mono_ns() >= until)
			return -1;
		nanosleep(&nap, NULL);
	}
	return 0;
}

struct learnt *guard_region_learnt(void)
{
	struct gregion *r = G.region;

	return r && r->train_cap ? (struct learnt *)(void *)((unsigned char *)r + r->train_off) : NULL;
}

int guard_region_open(int training)
{
	struct gregion *r;
	struct shape shape;
	char tmp[GUARD_PATH_MAX + 64];
	uint64_t st;

	if (G.cfg.collector == GUARD_COLLECTOR_PROCESS)
		return -1;
	{
		char seen[GREGION_STAMP_MAX];
		int running = collector_running(G.cfg.collector_dir, seen, sizeof(seen));

		int chosen = G.cfg.collector == GUARD_COLLECTOR_HOST;

		if (running == COLLECTOR_NONE && !chosen)
			return -1;
		/* another layout: that collector would refuse the region, and nobody would watch this
		 * process; auto works in the process, host (chosen) waits for a collector of its own */
		if (running == COLLECTOR_OTHER && !chosen) {
			guard_log("the host's collector is of another build; the agent works in the process",
				  "dir=%s collector=\"%s\"", G.cfg.collector_dir, seen);
			return -1;
		}
		if (running == COLLECTOR_OTHER)
			guard_log("the host's collector is of another build and will not read this process's "
				  "region until one of this build runs", "dir=%s collector=\"%s\"",
				  G.cfg.collector_dir, seen);
	}
	/* no watchdog will look for the cgroup: its limit is in the description */
	guard_starve_find();
	layout(&shape, (uint32_t)gring_round(G.cfg.ring_bytes), training);
	st = start_time();
	r = create(shape.bytes, st, tmp, sizeof(tmp));
	if (r) {
		stamp(r, &shape);
		describe(r, st);
		describe_profile(r);
		describe_training(r);
		if (publish(tmp, st) < 0) {
			munmap(r, shape.bytes);
			r = NULL;
		}
	}
	if (!r) {
		guard_log("no region for the host's collector; the agent works in the process",
			  "dir=%s error=\"%s\"", G.cfg.collector_dir, strerror(errno));
		return -1;
	}
	adopt(r, shape.bytes, 1);
	guard_region_modules();
	return 0;
}

/* One writer of the module list at a time; a dlopen while it writes makes it write again. */
static _Atomic int mods_writing, mods_again;

static void write_modules(struct gregion *r)
{
	struct gmodmap mm = { NULL, 0 };
	uint32_t n;

	if (unwind_modmap_load(&mm) < 0)
		return;
	n = mm.n < GREGION_MODS ? (uint32_t)mm.n : GREGION_MODS;
	atomic_fetch_add_explicit(&r->mods_gen, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (uint32_t i = 0; i < n; i++) {
		struct gregion_mod *d = &r->mods[i];
		const struct gmod *g = &mm.mods[i];

		put(d->name, sizeof(d->name), g->name);
		put(d->path, sizeof(d->path), g->path);
		put(d->build_id, sizeof(d->build_id), g->build_id);
		d->bias = g->bias;
		d->lo = g->lo;
		d->hi = g->hi;
	}
	r->nmods = n;
	atomic_fetch_add_explicit(&r->mods_gen, 1, memory_order_release);
	gmodmap_release(&mm);
}

void guard_region_modules(void)
{
	struct gregion *r = G.region;

	if (!r)
		return;
	atomic_store(&mods_again, 1);
	while (atomic_load(&mods_again) && !atomic_exchange(&mods_writing, 1)) {
		while (atomic_exchange(&mods_again, 0))
			write_modules(r);
		atomic_store(&mods_writing, 0);
	}
}

void guard_region_names(const struct gtab *tab)
{
	struct gregion *r = G.region;
	uint32_t n;

	if (!r || !tab)
		return;
	n = tab->nloops < GP_MAX_LOOPS ? tab->nloops : GP_MAX_LOOPS;
	atomic_fetch_add(&r->names_gen, 1);
	for (uint32_t l = 0; l < n; l++) {
		struct gregion_loop *rl = &r->loops[l];
		uint32_t nt = tab->loops[l].ntypes < GP_MAX_TYPES ? tab->loops[l].ntypes : GP_MAX_TYPES;

		put(rl->symbol, sizeof(rl->symbol), tab->loops[l].symbol);
		for (uint32_t t = 0; t < nt; t++)
			put(rl->type_name[t], sizeof(rl->type_name[t]), tab->loops[l].type_name[t]);
		rl->ntypes = nt;
	}
	r->nloops = n;
	atomic_fetch_add(&r->names_gen, 1);
}

int guard_ring_init(struct gring *ring, uint32_t index)
{
	struct gregion *r = G.region;

	if (!r || index > GUARD_MAX_THREADS)
		return gring_init(ring, G.cfg.ring_bytes);
	ring->data = (unsigned char *)r + r->rings_off + (uint64_t)index * r->ring_bytes;
	ring->size = r->ring_bytes;
	gring_reset(ring);
	return 0;
}

/* ---- what the collector pushed ---- */

#define MAX_TAB_SWAPS 32   /* as pushed.c's: each table taken is kept */

/*
 * A table copied out of the region, in memory of its own (mmap: never the program's allocator, whose
 * locks the thread may hold, nor a call that could not run in a signal handler); published tables
 * stay, as every other.
 */
struct pulled {
	struct gtab *tab;
	size_t bytes;
};

static void pulled_drop(struct pulled *pt)
{
	if (pt->tab)
		munmap(pt->tab, pt->bytes);
	pt->tab = NULL;
}

static void pull_table(struct gregion *r, struct pulled *pt)
{
	const void *img = (const unsigned char *)r + r->tab_off;
	size_t need = gtab_image_need(img, r->tab_cap);
	void *m;

	pt->tab = NULL;
	if (!need)
		return;
	m = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return;
	pt->bytes = need;
	if (!(pt->tab = gtab_image_place(img, r->tab_cap, m, need)))
		munmap(m, need);
}

/* Publishes pt's table (built for k, of the fleet's profile sha or the process's own). 0, or -1 when
 * the table lock is held (this thread may be the one holding it, interrupted: the next unit retries). */
static int take_table(struct gthread *t, struct gregion *r, struct pulled *pt, double k, const unsigned char *sha)
{
	struct gtab *cur = atomic_load(&G.tab);
	uint64_t bits;

	if (!cur || pt->tab->nloops != cur->nloops || G.tab_swaps >= MAX_TAB_SWAPS) {
		/* not the loops the threads are in, or too many changes: the collector sees it refused */
		pulled_drop(pt);
		r->tab_refused++;
		return 0;
	}
	t->nest++;
	if (pthread_mutex_trylock(&G.tab_mu) != 0) {
		t->nest--;
		pulled_drop(pt);
		return -1;
	}
	atomic_store(&G.tab, pt->tab);
	guard_region_names(pt->tab);
	G.tab_swaps++;
	pthread_mutex_unlock(&G.tab_mu);
	t->nest--;
	memcpy(G.fleet_sha, sha, sizeof(G.fleet_sha));
	memcpy(r->fleet_sha, sha, sizeof(r->fleet_sha));
	memcpy(&bits, &k, sizeof(bits));
	atomic_store(&r->k_now, bits);
	return 0;
}

/* Takes the pushed block of generation g (even): settings at once, a new table copied out of the
 * region first. Anything changed under the copy: the next unit looks again. */
static void pull(struct gthread *t, struct gregion *r, uint32_t g)
{
	int32_t muted = r->muted, hz = r->sample_hz;
	int64_t min_wait = r->min_wait_pushed_ns;
	uint32_t tab_gen = r->tab_gen;
	double k = r->tab_k;
	unsigned char sha[32];
	struct pulled pt = { NULL, 0 };

	memcpy(sha, r->tab_fleet_sha, sizeof(sha));
	if (tab_gen != G.tab_gen_taken)
		pull_table(r, &pt);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&r->pushed_gen, memory_order_relaxed) != g) {
		pulled_drop(&pt);
		return;
	}
	if (tab_gen != G.tab_gen_taken) {
		if (!pt.tab)
			r->tab_refused++;
		else if (take_table(t, r, &pt, k, sha) < 0)
			return;   /* all of it again at the next unit */
		G.tab_gen_taken = tab_gen;
	}
	atomic_store_explicit(&G.muted, muted != 0, memory_order_relaxed);
	if (min_wait >= (int64_t)GSET_MIN_MIN_WAIT_US * 1000 && min_wait <= (int64_t)GSET_MAX_MIN_WAIT_US * 1000)
		G.cfg.min_wait_ns = min_wait;   /* read by every wrapped call: one aligned store */
	if (G.cfg0.sample_hz > 0 && hz >= GSET_MIN_SAMPLE_HZ && hz <= GSET_MAX_SAMPLE_HZ && hz != G.cfg.sample_hz) {
		G.cfg.sample_hz = hz;   /* timers armed from now on take it */
		G.period_ns = 1000000000LL / hz;
	}
	atomic_store(&G.pushed_seen, g);
	atomic_store(&r->pushed_taken, g);
}

/* The next tick of the cgroup's sample a program's thread takes (the one that wins it). */
static _Atomic int64_t tick_next;

int guard_region_poll(struct gthread *t, int64_t now)
{
	struct gregion *r = G.region;
	int64_t next = atomic_load_explicit(&tick_next, memory_order_relaxed);
	int sampled = 0;
	uint32_t g;

	guard_clock_poll(now);
	if (GUARD_UNLIKELY(now >= next) &&
	    atomic_compare_exchange_strong_explicit(&tick_next, &next, now + G.cfg.watchdog_ns, memory_order_relaxed,
						    memory_order_relaxed))
		sampled = guard_starve_sample(now);
	g = atomic_load_explicit(&r->pushed_gen, memory_order_acquire);
	if (GUARD_LIKELY(g == atomic_load_explicit(&G.pushed_seen, memory_order_relaxed)) || (g & 1))
		return sampled;
	if (atomic_exchange_explicit(&G.pulling, 1, memory_order_acquire))
		return sampled;   /* another thread takes it */
	pull(t, r, g);
	atomic_store_explicit(&G.pulling, 0, memory_order_release);
	return sampled;
}

void guard_region_push(const struct gviol *v)
{
	struct gregion *r = G.region;
	uint32_t h, t;

	pthread_mutex_lock(&G.mu);
	h = atomic_load_explicit(&r->q_head, memory_order_relaxed);
	t = atomic_load_explicit(&r->q_tail, memory_order_acquire);
	if (h - t >= GREGION_QUEUE) {
		pthread_mutex_unlock(&G.mu);
		atomic_fetch_add(&r->queue_drops, 1);
		return;
	}
	r->queue[h % GREGION_QUEUE] = *v;
	atomic_store_explicit(&r->q_head, h + 1, memory_order_release);
	pthread_mutex_unlock(&G.mu);
}

void guard_region_state(int exited)
{
	if (G.region)
		atomic_store(&G.region->state, exited ? GREG_EXITED : GREG_LIVE);
}

/* No memory for the child's region: the agent stops in the child. Its pointers into the parent's
 * region go (an exec would mark it ended, an inert agent's exit reads nothing of it); the memory of the
 * parent's threads it leaves alone. */
static int child_inert(struct gthread *t)
{
	atomic_store(&G.active, 0);   /* nothing left to record into */
	guard_releases_at(NULL);      /* (the region's is the parent's) */
	G.region = NULL;
	G.region_bytes = 0;
	atomic_store(&G.nslots, 0);
	t->slot = NULL;
	pthread_setspecific(G.key, NULL);
	G.train = NULL;
	return -1;
}

int guard_region_child(struct gthread *t)
{
	struct gregion *old = G.region, *r;
	struct gslot *old_slots = G.slots;
	uint32_t n = atomic_load(&G.nslots);
	size_t bytes = G.region_bytes;
	char tmp[GUARD_PATH_MAX + 64];
	uint64_t st;
	int shared = 1;

	if (!old)
		return 0;
	st = start_time();
	r = create(bytes, st, tmp, sizeof(tmp));
	if (!r) {
		/* no file: the same layout in the child's own memory, and its own threads from now on */
		void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p == MAP_FAILED)
			return child_inert(t);
		r = p;
		shared = 0;
	}
	memcpy(r, old, offsetof(struct gregion, pid));
	r->tab_off = old->tab_off;
	r->tab_cap = old->tab_cap;
	r->train_off = old->train_off;
	r->train_cap = old->train_cap;
	describe(r, st);
	describe_training(r);
	memcpy(r->loops, old->loops, sizeof(r->loops));
	r->nloops = old->nloops;
	/* the parent's modules are the child's (a thread writing them at the fork: the next dlopen's) */
	atomic_store(&mods_writing, 0);
	memcpy(r->mods, old->mods, sizeof(r->mods[0]) * (old->nmods < GREGION_MODS ? old->nmods : GREGION_MODS));
	r->nmods = old->nmods < GREGION_MODS ? old->nmods : GREGION_MODS;
	/* the parent's profile and table as they are (the profile may be gone); nothing pushed to it yet */
	memcpy(r->as_started, old->as_started, sizeof(r->as_started));
	r->min_threshold_ns = old->min_threshold_ns;
	r->fetch_ns = old->fetch_ns;
	memcpy(r->profile_path, old->profile_path, sizeof(r->profile_path));
	r->nkeys = old->nkeys;
	memcpy(r->loop_key, old->loop_key, sizeof(r->loop_key));
	atomic_store(&r->k_now, atomic_load(&old->k_now));
	memcpy(r->fleet_sha, old->fleet_sha, sizeof(r->fleet_sha));
	atomic_store(&G.pushed_seen, 0);
	G.tab_gen_taken = 0;
	/* the slots as they were (the child's reset follows), their rings in the child's region */
	memcpy((unsigned char *)r + r->slots_off, old_slots, (size_t)n * sizeof(struct gslot));
	memcpy(&r->shared_ring, &old->shared_ring, sizeof(r->shared_ring));
	atomic_store(&r->nslots, n);
	if (shared && publish(tmp, st) < 0) {
		/* no name for it: the child's own memory after all */
		void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p == MAP_FAILED) {
			munmap(r, bytes);
			return child_inert(t);
		}
		memcpy(p, r, r->rings_off);
		munmap(r, bytes);
		r = p;
		shared = 0;
	}
	adopt(r, bytes, shared);
	if (G.train && r->train_cap) {
		/* what the parent learnt stays its own: the tables without their counts (its reset follows) */
		struct learnt *l = (struct learnt *)(void *)((unsigned char *)r + r->train_off);

		learnt_copy_tables(l, (const struct learnt *)(const void *)((const unsigned char *)old + old->train_off));
		gtrain_moved(G.train, l);
	}
	/* rings at the same place in the new region: the data pointers move with it (each is reset after) */
	for (uint32_t i = 0; i < n; i++)
		if (G.slots[i].ring.size)
			G.slots[i].ring.data = (unsigned char *)r + r->rings_off + (uint64_t)i * r->ring_bytes;
	if (old->shared_ring.size)
		r->shared_ring.data = (unsigned char *)r + r->rings_off + (uint64_t)GUARD_MAX_THREADS * r->ring_bytes;
	if (t->slot) {
		t->slot = &G.slots[t->slot - old_slots];
		pthread_setspecific(G.key, t->slot);
	}
	munmap(old, bytes);
	if (!shared)
		guard_log("no region for the host's collector in a forked child; it works in the process",
			  "dir=%s", G.cfg.collector_dir);
	return 0;
}
