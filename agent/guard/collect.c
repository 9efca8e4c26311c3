/* collect: the host's collector, every guarded process's watchdog and shipper (see collect.h). */
#include "agent/guard/budget.h"
#include "agent/guard/cgroup.h"
#include "agent/guard/collect.h"
#include "agent/guard/gtab.h"
#include "agent/guard/learnt.h"
#include "agent/guard/modmap.h"
#include "agent/guard/region.h"
#include "agent/guard/steal.h"
#include "agent/guard/stream.h"
#include "agent/guard/symbolize.h"
#include "agent/guard/watch.h"
#include "agent/spool.h"
#include "guardcore/profile.h"
#include "guardcore/settings.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/hash.h"
#include "common/wire.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SCAN_NS 200000000LL           /* the directory is read again this often */
#define SHIP_WAKE_NS 100000000LL      /* the shipping thread looks at the queues this often (a ring holds
				       * seconds of a thread's events: a violation's are still there) */
#define ALIVE_NS 1000000000LL         /* a process's pid is checked this often (its exit, it says at once) */
#define ALIVE_PIDFD_NS 100000000LL    /* its pidfd, a system call with nothing to read, this often */
#define SYM_IDLE_NS 60000000000LL     /* a process's symbol tables go after a minute without streams */
#define SHIP_RETRY_NS 60000000000LL   /* a connection that gave up is opened again after this */
#define MAX_PROCS 65536               /* regions mapped at once */
#define REGION_MAX ((uint64_t)64 << 30)
#define REFUSED_MAX 4096              /* refused names remembered; past it, new files are not looked at */
#define FLEET_MAX 64                  /* builds whose fleet's profile is kept */
#define FETCH_MIN_NS 1000000000LL     /* a build's fleet profile is fetched at most this often */
#define PROFILE_MAX ((size_t)64 << 20)   /* a profile's text, fetched or read */
#define LOG_PER_MIN 60                /* a process's log lines the collector logs in a minute; more are counted */

struct cproc {
	struct cproc *next;
	char name[96];                /* the region's file name */
	struct gregion *r;
	size_t bytes;
	/* checked when mapped: what the collector acts on never changes under it */
	pid_t pid;
	int pidfd;                    /* the live process's, or -1 (none could be opened: its pid is looked at) */
	int sig;
	uint64_t cookie, starttime;
	uint32_t ring_bytes;
	uint64_t rings_off, tab_off, tab_cap;
	size_t map;                   /* its place in cut_maps */
	struct gslot *slots;
	char proc[32];
	/* what the process is, copied bounded */
	char exe[1024], exe_name[256], build_id[129], app[256], host[256], version[256], kernel[128];
	char libc_name[64], cpu_limit[32];
	struct guard_label labels[GUARD_MAX_LABELS];
	int nlabels;
	int64_t min_wait_ns, hang_ns, watchdog_ns, started_ns;
	int max_events;
	uintptr_t self_lo, self_hi;
	/* the watchdog's */
	int64_t next_watch, next_alive;
	_Atomic int ended;            /* exited, or its pid is gone: the shipping thread finishes it */
	/* the shipping thread's */
	pthread_mutex_t mu;           /* the budget's: the watchdog offers the hangs */
	struct gbudget *budget;       /* made at the first violation */
	struct guard_counts n;
	struct gcgroup *cg;           /* its CPU-limited cgroup, with the collector's history (the watchdog's) */
	struct csym *sym;             /* its symbolizer, shared with the processes of the same files */
	uintptr_t *shift;             /* per module of mods: how far sym has it from here (modulo 2^64) */
	struct gmodmap mods;          /* its modules as last read while it ran: a process that ended is named by them */
	int64_t sym_used, next_report;
	/* what the server pushed to it (the shipping thread's) */
	int pushed;                   /* its pushed block was written */
	double set[GSET_COUNT];       /* the settings written there */
	int rpm;                      /* its budget's reports per minute; 0: as it started */
	double k_tried;               /* the k of the last table built for it (0: none) */
	unsigned char fleet_tried[32];   /* the fleet's profile last tried for it */
	int64_t next_fetch;
	uint32_t taken_seen, refused_seen;   /* the process's pushed_taken and tab_refused last looked at */
	int announce;                 /* a change was pushed: say when it is taken */
	/* training (the shipping thread's): its tables, saved into its profile file as its owner */
	struct learnt *learnt;        /* NULL: it guards */
	uid_t uid;                    /* the region file's owner and group: the process's */
	gid_t gid;
	char profile_path[1200];
	int64_t save_ns, upload_ns, next_save, next_upload;
	double train_k, train_cut;
	uint64_t saves, save_errors, uploads;
	uint64_t uploaded;            /* the units of the last upload: none again until there are more */
	uint32_t mods_gen;            /* the region's module list's generation when mods were read */
	int claimed;                  /* mods are what the process wrote (never seen alive): its own symbolizer */
	/* its log lines (the shipping thread's): the next one to log, by the collector's own count */
	uint32_t log_next;
	int log_started;
	int64_t log_minute;           /* the start of the minute log_shown and log_held count */
	uint32_t log_shown;
	uint64_t log_held;            /* this minute's over LOG_PER_MIN */
	uint64_t log_not_shown;       /* all the process's lines not logged: over the share, or written over */
	struct collector *c;
};

/* The fleet's profile of a build as last fetched (the shipping thread's). */
struct cfleet {
	struct cfleet *next;
	char build_id[129];
	int64_t fetched;              /* CLOCK_MONOTONIC */
	unsigned char sha[32];
	struct gprofile *prof;        /* NULL: the server has none, or it is not usable */
};

/*
 * A symbolizer, shared by every process whose modules are the same files in the same order, wherever
 * each is loaded: the children a server forks (PostgreSQL's backends, nginx's workers), and the
 * programs of one build started apart (their libraries lie elsewhere in each, address space layout
 * being random). A process's addresses are moved to where the symbolizer has each module (its
 * shift, proc_xlat()), so that its ELF files are read and its names cached once per host and build. The shipping thread's
 * alone.
 */
struct csym {
	struct csym *next;
	uint64_t key;                 /* the modules: their files and build ids, each's extent from its bias */
	int refs;
	struct gsym *sym;
	struct gmodmap mods;          /* where they lie in the process it was opened for */
};

struct collector {
	struct collect_opts o;
	char dir[4096];
	int lock_fd;
	struct shipper *sh;           /* the shipping thread's */
	int64_t ship_retry_at;
	struct spool *spool_only;
	pthread_mutex_t mu;           /* the list */
	struct cproc *procs;
	size_t nprocs;
	pthread_mutex_t maps_mu;      /* taking and leaving a place in cut_maps */
	int64_t next_scan;
	struct csym *syms;            /* the shipping thread's */
	struct cfleet *fleets;        /* the shipping thread's */
	size_t nfleets;
	size_t backlog;               /* streams in the spool, counted at backlog_at (the shipping thread's) */
	int64_t backlog_at;
	char (*refused)[96];          /* regions not taken (bad, or not their process's owner's): not read again */
	size_t nrefused;
	struct gsteal steal;          /* the host's steal time, once for every process (steal.h) */
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long read_file(const char *path, char *buf, size_t cap, int whole)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	size_t got = 0;

	if (fd < 0)
		return -1;
	/* a /proc file gives a page or so per read: the whole of a long one takes several */
	do
		n = read(fd, buf + got, cap - 1 - got);
	while (n > 0 && (got += (size_t)n) < cap - 1 && whole);
	close(fd);
	buf[got] = '\0';
	return n < 0 && !got ? -1 : (long)got;
}

static long read_small(const char *path, char *buf, size_t cap)
{
	return read_file(path, buf, cap, 0);
}

/* pid's start time (util_proc_start_time), 0 when it is gone. */
static uint64_t start_time_of(pid_t pid)
{
	char path[64], b[1024];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return read_small(path, b, sizeof(b)) > 0 ? util_proc_start_time(b) : 0;
}

/* Whether uid is one of pid's (real, effective, saved: a server that changed user after it made its
 * region), or root's: only root makes a file that names another user's process. */
static int owned_by(pid_t pid, uid_t uid)
{
	char path[64], b[4096], *p;
	unsigned long u[3];

	if (uid == 0)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (read_small(path, b, sizeof(b)) <= 0 || !(p = strstr(b, "\nUid:")) ||
	    sscanf(p + 5, "%lu %lu %lu", &u[0], &u[1], &u[2]) != 3)
		return 0;
	return uid == u[0] || uid == u[1] || uid == u[2];
}

/* A string of the region's, copied bounded; bytes a frame or the wire would refuse become '?'. */
static void take(char *dst, size_t cap, const char *src, size_t srccap)
{
	size_t n = strnlen(src, srccap < cap ? srccap : cap - 1);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)dst[i] < 0x20 || dst[i] == 0x7f)
			dst[i] = '?';
	if (!util_utf8_valid(dst, n))
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)dst[i] >= 0x80)
				dst[i] = '?';
}

#define TAKE(p, field) take((p)->field, sizeof((p)->field), (p)->r->field, sizeof((p)->r->field))

/* ---- a region cut short under the collector ---- */

/*
 * A process may truncate its region's file while the collector has it mapped: a look past the new end
 * raises SIGBUS. The handler puts a page of zeros where the one touched was and marks the region cut;
 * every count read from a region is bounded anyway, and a cut one is finished like an ended process.
 * A SIGBUS anywhere else is the fault it is (the default action).
 */
struct cut_map {
	_Atomic uintptr_t lo, hi;     /* 0, 0: free */
	_Atomic int cut;
};

static struct cut_map *cut_maps;      /* MAX_PROCS of them, the collector's */
static _Atomic size_t cut_used;       /* places [0, cut_used) have been taken */
static size_t page_bytes;
static struct sigaction bus_before;

static void on_bus(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	size_t n = atomic_load(&cut_used);
	struct sigaction dfl;

	(void)uc;
	for (size_t i = 0; i < n; i++) {
		if (a >= atomic_load_explicit(&cut_maps[i].lo, memory_order_relaxed) &&
		    a < atomic_load_explicit(&cut_maps[i].hi, memory_order_relaxed)) {
			void *pg = (void *)(a & ~(uintptr_t)(page_bytes - 1));

			if (mmap(pg, page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
			    MAP_FAILED)
				break;
			atomic_store(&cut_maps[i].cut, 1);
			return;
		}
	}
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);   /* the instruction runs again, and faults for good */
}

static int cut_install(void)
{
	struct sigaction sa;

	page_bytes = (size_t)sysconf(_SC_PAGESIZE);
	if (!(cut_maps = calloc(MAX_PROCS, sizeof(*cut_maps))))
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_bus;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, &bus_before);
}

static void cut_uninstall(void)
{
	if (!cut_maps)
		return;
	sigaction(SIGBUS, &bus_before, NULL);
	free(cut_maps);
	cut_maps = NULL;
	atomic_store(&cut_used, 0);
}

/* A place for the mapping [m, m + bytes): its index, or MAX_PROCS when none is free. */
static size_t cut_watch(struct collector *c, void *m, size_t bytes)
{
	size_t i, n;

	pthread_mutex_lock(&c->maps_mu);
	n = atomic_load(&cut_used);
	for (i = 0; i < n && atomic_load(&cut_maps[i].hi); i++)
		;
	if (i < MAX_PROCS) {
		atomic_store(&cut_maps[i].cut, 0);
		atomic_store(&cut_maps[i].lo, (uintptr_t)m);
		atomic_store(&cut_maps[i].hi, (uintptr_t)m + bytes);
		if (i == n)
			atomic_store(&cut_used, n + 1);
	}
	pthread_mutex_unlock(&c->maps_mu);
	return i;
}

static void cut_forget(struct collector *c, size_t i)
{
	if (i >= MAX_PROCS)
		return;
	pthread_mutex_lock(&c->maps_mu);
	atomic_store(&cut_maps[i].hi, 0);
	atomic_store(&cut_maps[i].lo, 0);
	pthread_mutex_unlock(&c->maps_mu);
}

static int cut_short(const struct cproc *p)
{
	return p->map < MAX_PROCS && atomic_load(&cut_maps[p->map].cut);
}

/* Whether the process has ended (1) or not (0), by its pidfd (readable once it has), to the moment:
 * its pid cannot have been taken by another process yet when it says 0. Without one, by its pid's
 * start time. -1: it could not be told (neither signal it nor take it for gone). */
static int over(const struct cproc *p)
{
	struct pollfd pf = { p->pidfd, POLLIN, 0 };
	int n;

	if (p->pidfd < 0)
		return start_time_of(p->pid) != p->starttime;
	n = poll(&pf, 1, 0);
	return n < 0 || (pf.revents & (POLLERR | POLLNVAL)) ? -1 : n > 0 && (pf.revents & POLLIN);
}

/* ---- mapping a region: checked, or refused ---- */

static struct cproc *map_region(struct collector *c, int dfd, const char *name)
{
	struct gregion probe;
	struct stat st, pst;
	struct cproc *p;
	char path[64];
	void *m;
	int alive = 0;
	int fd, pidfd = -1;

	memset(&st, 0, sizeof(st));
	fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	const char *why = "not a region (a regular file of one link, at least a header long)";

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || (size_t)st.st_size < sizeof(probe) ||
	    pread(fd, &probe, sizeof(probe), 0) != (ssize_t)sizeof(probe))
		goto out_refuse;
	why = "not this agent's layout";
	/* the layout this collector writes itself, exactly */
	if (probe.magic != GREGION_MAGIC || probe.layout != GREGION_VERSION ||
	    probe.slot_bytes != sizeof(struct gslot) || probe.max_slots != GUARD_MAX_THREADS ||
	    probe.ring_bytes < 4096 || (probe.ring_bytes & (probe.ring_bytes - 1)) ||
	    probe.bytes != (uint64_t)st.st_size || probe.bytes > REGION_MAX ||
	    /* every offset and size inside the file first: the sums below then cannot wrap */
	    probe.slots_off > probe.bytes || probe.rings_off > probe.bytes || probe.tab_off > probe.bytes ||
	    probe.tab_cap > probe.bytes || probe.train_off > probe.bytes || probe.train_cap > probe.bytes ||
	    probe.slots_off < sizeof(probe) || probe.slots_off % 4096 ||
	    probe.rings_off < probe.slots_off + (uint64_t)GUARD_MAX_THREADS * sizeof(struct gslot) ||
	    probe.tab_off != probe.rings_off + (uint64_t)(GUARD_MAX_THREADS + 1) * probe.ring_bytes ||
	    probe.tab_cap < sizeof(struct gtab) || probe.tab_cap > (uint64_t)64 << 20 ||
	    probe.train_off != probe.tab_off + probe.tab_cap ||
	    (probe.train_cap != 0 && probe.train_cap != ((sizeof(struct learnt) + 4095) & ~(uint64_t)4095)) ||
	    probe.train_off + probe.train_cap != probe.bytes)
		goto out_refuse;
	/* a live process it names must be the one that made it, and the file's owner's; a dead one's
	 * region is only read (what it queued is shipped), never acted on */
	why = "no process id, or a signal that is not a real-time one";
	if (probe.pid <= 0 || probe.sig < SIGRTMIN || probe.sig > SIGRTMAX)
		goto out_refuse;
	snprintf(path, sizeof(path), "/proc/%d", (int)probe.pid);
	/* opened before the check: it then holds the process the region names, or one that has ended */
	pidfd = (int)syscall(SYS_pidfd_open, (long)probe.pid, 0L);
	alive = start_time_of(probe.pid) == probe.starttime;
	why = "the file's owner is not the process's";
	if (alive && (stat(path, &pst) < 0 || !owned_by(probe.pid, st.st_uid))) {
		/* it may have ended between the looks: then the region is an orphan's, like any dead one's */
		if (start_time_of(probe.pid) == probe.starttime)
			goto out_refuse;
		alive = 0;
	}
	m = mmap(NULL, probe.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		goto out_close_pidfd;
	if (!(p = calloc(1, sizeof(*p))))
		goto out_unmap;
	p->map = cut_watch(c, m, probe.bytes);   /* before the first look: it may be cut already */
	if (p->map >= MAX_PROCS) {
		free(p);
		goto out_unmap;
	}
	p->pidfd = alive ? pidfd : -1;
	if (!alive && pidfd >= 0)
		close(pidfd);
	p->r = m;
	p->bytes = probe.bytes;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->pid = probe.pid;
	p->sig = probe.sig;
	p->cookie = probe.sig_cookie;
	p->starttime = probe.starttime;
	p->ring_bytes = probe.ring_bytes;
	p->rings_off = probe.rings_off;
	p->tab_off = probe.tab_off;
	p->tab_cap = probe.tab_cap;
	p->slots = (struct gslot *)(void *)((unsigned char *)m + probe.slots_off);
	snprintf(p->proc, sizeof(p->proc), "/proc/%d", (int)p->pid);
	TAKE(p, exe);
	TAKE(p, exe_name);
	TAKE(p, build_id);
	TAKE(p, app);
	TAKE(p, host);
	TAKE(p, version);
	TAKE(p, kernel);
	TAKE(p, libc_name);
	TAKE(p, cpu_limit);
	/* names of modules and wrapped calls: a frame's separators would split them */
	for (char *q = p->exe_name; *q; q++)
		if (*q == '!' || *q == '+')
			*q = '_';
	for (char *q = p->libc_name; *q; q++)
		if (*q == '!' || *q == '+')
			*q = '_';
	p->nlabels = probe.nlabels >= 0 && probe.nlabels <= GUARD_MAX_LABELS ? probe.nlabels : 0;
	for (int i = 0; i < p->nlabels; i++) {
		take(p->labels[i].key, sizeof(p->labels[i].key), probe.labels[i].key, sizeof(probe.labels[i].key));
		take(p->labels[i].value, sizeof(p->labels[i].value), probe.labels[i].value,
		     sizeof(probe.labels[i].value));
	}
	p->min_wait_ns = probe.min_wait_ns > 0 ? probe.min_wait_ns : 1000000;
	p->hang_ns = probe.hang_ns >= 10000000 ? probe.hang_ns : 10000000;
	p->watchdog_ns = probe.watchdog_ns >= 1000000 ? probe.watchdog_ns : 1000000;
	p->max_events = probe.max_events > 0 && probe.max_events <= 1000000 ? probe.max_events : 20000;
	p->started_ns = probe.started_ns;
	p->self_lo = (uintptr_t)probe.self_lo;
	p->self_hi = (uintptr_t)probe.self_hi;
	/* whose files the process's are: the collector opens them as that user (as_owner()) */
	p->uid = st.st_uid;
	p->gid = st.st_gid;
	if (probe.train_cap) {
		p->learnt = (struct learnt *)(void *)((unsigned char *)m + probe.train_off);
		TAKE(p, profile_path);
		p->save_ns = probe.save_ns >= 1000000000 ? probe.save_ns : 1000000000;
		p->upload_ns = probe.upload_ns <= 0 ? 0 : probe.upload_ns >= 1000000000 ? probe.upload_ns : 1000000000;
		p->train_k = isfinite(probe.train_k) && probe.train_k >= 0 && probe.train_k <= GSET_MAX_K ? probe.train_k :
			     GP_DEFAULT_K;
		p->train_cut = isfinite(probe.train_cut) && probe.train_cut > 0 && probe.train_cut <= 1 ? probe.train_cut :
			       GP_DEFAULT_CUT;
		p->next_save = mono_ns() + p->save_ns;
		p->next_upload = mono_ns() + p->upload_ns;
	}
	p->c = c;
	atomic_store(&p->ended, alive ? 0 : 1);
	pthread_mutex_init(&p->mu, NULL);
	p->next_report = mono_ns();
	return p;
out_unmap:
	munmap(m, probe.bytes);
out_close_pidfd:
	if (pidfd >= 0)
		close(pidfd);
	return NULL;
out_refuse:
	if (pidfd >= 0)
		close(pidfd);
	close(fd);
	if (c->nrefused < REFUSED_MAX)
		snprintf(c->refused[c->nrefused++], sizeof(c->refused[0]), "%s", name);
	log_warn("region refused", "region=%s owner=%u reason=\"%s\"", name, (unsigned)st.st_uid, why);
	return NULL;
}

/* One process less uses cs: the last one frees it (the shipping thread, or the end). */
static void sym_release(struct collector *c, struct csym *cs)
{
	if (!cs || --cs->refs > 0)
		return;
	for (struct csym **pp = &c->syms; *pp; pp = &(*pp)->next)
		if (*pp == cs) {
			*pp = cs->next;
			break;
		}
	gsym_free(cs->sym);
	gmodmap_release(&cs->mods);
	free(cs);
}

static void proc_free(struct cproc *p)
{
	if (!p)
		return;
	if (p->budget) {
		budget_release(p->budget);
		free(p->budget);
	}
	sym_release(p->c, p->sym);
	free(p->cg);
	if (p->pidfd >= 0)
		close(p->pidfd);
	free(p->shift);
	gmodmap_release(&p->mods);
	cut_forget(p->c, p->map);
	munmap(p->r, p->bytes);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

/* The CPU-limited cgroup of a process that says it has one, found by the collector itself (its
 * /proc/PID/cgroup), for the throttled time of the units it ships as hangs. */
static void find_cgroup(struct cproc *p)
{
	char *text;

	if (!p->cpu_limit[0] || !(p->cg = calloc(1, sizeof(*p->cg))))
		return;
	if ((text = malloc(65536)) && gcgroup_find(p->cg, p->proc, read_file, text, 65536) &&
	    start_time_of(p->pid) == p->starttime) {
		free(text);
		return;
	}
	free(text);
	free(p->cg);
	p->cg = NULL;
}

/* The process's modules now, kept (while it runs: a module loaded since is read then). */
static void read_modules(struct cproc *p)
{
	struct gmodmap mm = { NULL, 0 };

	/* before the read: a dlopen while it reads makes the next look read again */
	p->mods_gen = atomic_load_explicit(&p->r->mods_gen, memory_order_acquire);

	if (start_time_of(p->pid) == p->starttime && gmodmap_load_pid(&mm, p->pid, p->exe_name) == 0 && mm.n &&
	    start_time_of(p->pid) == p->starttime)
		gmodmap_copy(&p->mods, &mm);
	gmodmap_release(&mm);
}

static int mod_lo_cmp(const void *a, const void *b)
{
	const struct gmod *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/*
 * The modules the process wrote into its region, for one that ended before the collector read them
 * from /proc (a short-lived process, or one that came and went while no collector ran): what it
 * claims, taken bounded (names as frames take them, build ids hex only), the executable first and
 * the rest by address without overlaps. Its symbolizer is its own, its files opened as its user.
 */
static void claimed_modules(struct cproc *p)
{
	const struct gregion *r = p->r;
	struct gmodmap mm = { NULL, 0 };

	for (int tries = 0; tries < 100; tries++) {
		uint32_t gen = atomic_load_explicit(&p->r->mods_gen, memory_order_acquire), n = r->nmods, k = 0;

		if (gen & 1)
			continue;
		n = n < GREGION_MODS ? n : GREGION_MODS;
		gmodmap_release(&mm);
		if (!n || !(mm.mods = calloc(n, sizeof(*mm.mods))))
			return;
		for (uint32_t i = 0; i < n; i++) {
			const struct gregion_mod *d = &r->mods[i];
			struct gmod *g = &mm.mods[k];
			int hex = 1;

			take(g->name, sizeof(g->name), d->name, sizeof(d->name));
			for (char *q = g->name; *q; q++)
				if (*q == '!' || *q == '+')
					*q = '_';
			take(g->path, sizeof(g->path), d->path, sizeof(d->path));
			memcpy(g->file, g->path, sizeof(g->file));
			take(g->build_id, sizeof(g->build_id), d->build_id, sizeof(d->build_id));
			for (const char *q = g->build_id; *q && hex; q++)
				hex = (*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f');
			if (!hex)
				g->build_id[0] = '\0';
			g->bias = (uintptr_t)d->bias;
			g->lo = (uintptr_t)d->lo;
			g->hi = (uintptr_t)d->hi;
			if (g->lo < g->hi && g->name[0])
				k++;
		}
		mm.n = k;
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&p->r->mods_gen, memory_order_relaxed) == gen)
			break;
		mm.n = 0;
	}
	if (mm.n > 1) {
		size_t k = 1;

		qsort(mm.mods + 1, mm.n - 1, sizeof(*mm.mods), mod_lo_cmp);
		for (size_t i = 1; i < mm.n; i++)
			if (mm.mods[i].lo >= mm.mods[k - 1].hi || k == 1)
				mm.mods[k++] = mm.mods[i];
		mm.n = k;
	}
	if (mm.n) {
		gmodmap_release(&p->mods);
		p->mods = mm;
		p->claimed = 1;
	} else {
		gmodmap_release(&mm);
	}
}

/* A region's name: PID.START.N, digits only, as the agent makes them (anything else is not looked at). */
static int region_name(const char *s)
{
	int dots = 0, digits = 0;

	if (strlen(s) >= 64 || *s < '1' || *s > '9')
		return 0;
	for (; *s; s++) {
		if (*s == '.') {
			if (!digits)
				return 0;
			dots++;
			digits = 0;
		} else if (*s >= '0' && *s <= '9') {
			digits++;
		} else {
			return 0;
		}
	}
	return dots == 2 && digits;
}

/* New regions in the directory, mapped (the watchdog's). */
static void scan(struct collector *c)
{
	DIR *d = opendir(c->dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		struct cproc *p;
		int known = 0;

		if (e->d_name[0] == '.' && e->d_name[1] >= '1' && e->d_name[1] <= '9') {
			/* a region being made: left alone, unless its process died making it */
			unsigned long long pid = 0, st = 0;

			if (sscanf(e->d_name + 1, "%llu.%llu", &pid, &st) == 2 && pid < INT32_MAX &&
			    start_time_of((pid_t)pid) != st)
				unlinkat(dirfd(d), e->d_name, 0);
			continue;
		}
		if (!region_name(e->d_name))
			continue;
		pthread_mutex_lock(&c->mu);
		for (p = c->procs; p && !known; p = p->next)
			known = strcmp(p->name, e->d_name) == 0;
		pthread_mutex_unlock(&c->mu);
		for (size_t i = 0; i < c->nrefused && !known; i++)
			known = strcmp(c->refused[i], e->d_name) == 0;
		if (known || c->nprocs >= MAX_PROCS || c->nrefused >= REFUSED_MAX)
			continue;
		p = map_region(c, dirfd(d), e->d_name);
		if (!p)
			continue;
		if (!atomic_load(&p->ended)) {
			read_modules(p);
			find_cgroup(p);
		}
		if (!p->mods.n)
			claimed_modules(p);
		log_info("guarded process", "pid=%d exe=%s build_id=%s region=%s%s", (int)p->pid, p->exe_name,
			 p->build_id, p->name, atomic_load(&p->ended) ? " (ended)" : "");
		pthread_mutex_lock(&c->mu);
		p->next = c->procs;
		c->procs = p;
		c->nprocs++;
		pthread_mutex_unlock(&c->mu);
	}
	closedir(d);
}

/* ---- the watchdog (threads.c's, over a region) ---- */

static void ask_stack(struct cproc *p, struct gslot *s)
{
	siginfo_t si;

	atomic_fetch_add(&s->sending, 1);
	/* (a process over by now: its pid may be another's, a signal must not reach that one) */
	if (!atomic_load(&s->sig_blocked) && atomic_load(&p->r->sampling) && atomic_load(&p->r->state) == GREG_LIVE &&
	    atomic_load(&s->state) == SLOT_LIVE && over(p) == 0) {
		memset(&si, 0, sizeof(si));
		si.si_signo = p->sig;
		si.si_code = SI_QUEUE;
		si.si_pid = getpid();
		si.si_uid = getuid();
		si.si_value.sival_ptr = (void *)(uintptr_t)p->cookie;
		/* the kernel sends only to a thread of that process */
		syscall(SYS_rt_tgsigqueueinfo, (long)p->pid, (long)atomic_load(&s->tid), (long)p->sig, &si);
	}
	atomic_fetch_sub(&s->sending, 1);
}

static struct gbudget *budget_of(struct cproc *p);

static void ask(void *ctx, struct gslot *s)
{
	ask_stack(ctx, s);
}

static void hang(void *ctx, struct gslot *s, struct gviol *v)
{
	struct cproc *p = ctx;
	struct gbudget *b = budget_of(p);
	struct gwatch_sched now;
	char path[128];

	/* what the process's own watchdog would add: the run delay, the cgroup's throttled time */
	snprintf(path, sizeof(path), "%s/task/%d/schedstat", p->proc, (int)v->tid);
	gwatch_unit_run_delay(s, v, gwatch_schedstat(path, read_small, &now) == 0 ? &now : NULL);
	if (p->cg)
		gcgroup_unit(p->cg, v, read_file);
	gwatch_hang_syscall(s, v, p->proc, read_small);
	if (b)
		budget_offer(b, v, v->end);
}

static void watch(struct cproc *p, int64_t now)
{
	struct gwatch_ops ops = { ask, hang, p };
	uint32_t n = atomic_load(&p->r->nslots);

	n = n < GUARD_MAX_THREADS ? n : GUARD_MAX_THREADS;
	/* (before the look: a hang found in it has the sample of its tick) */
	if (p->cg)
		gcgroup_sample(p->cg, now, read_file);
	gwatch_slots(p->slots, n, now, p->hang_ns, &ops);
	/* what the process's own watchdog would take: its threads' run delay, for its units' ends */
	gwatch_run_delays(p->slots, n, p->proc, read_small, mono_ns);
}

/* ---- the process as streams see it ---- */

static size_t region_snapshot(const struct gsrc *src, uint32_t i, void *out, size_t cap)
{
	const struct cproc *p = src->ctx;
	const unsigned char *base = (const unsigned char *)p->r;

	/* the ring's place is the collector's own reckoning, never the process's pointer */
	if (i < src->nslots)
		return gring_copy(&p->slots[i].ring, base + p->rings_off + (uint64_t)i * p->ring_bytes, p->ring_bytes,
				  out, cap);
	return gring_copy(&p->r->shared_ring, base + p->rings_off + (uint64_t)GUARD_MAX_THREADS * p->ring_bytes,
			  p->ring_bytes, out, cap);
}

static void region_names(const struct gsrc *src, int32_t loop, int32_t type, char *loopsym, size_t lcap,
			 char *tname, size_t tcap)
{
	const struct cproc *p = src->ctx;
	const struct gregion_loop *l;
	uint32_t gen = atomic_load(&p->r->names_gen);

	if (loop < 0 || loop >= GP_MAX_LOOPS || (gen & 1))
		return;
	l = &p->r->loops[loop];
	take(loopsym, lcap, l->symbol, sizeof(l->symbol));
	if (type >= 0 && type < GP_MAX_TYPES)
		take(tname, tcap, l->type_name[type], sizeof(l->type_name[type]));
	if (atomic_load(&p->r->names_gen) != gen)
		loopsym[0] = tname[0] = '\0';
}

/* A module as two processes of one build have it alike: its file, build and extent from its bias. */
static uint64_t module_key(const struct gmod *g)
{
	const char *f = g->file[0] ? g->file : g->path;
	uint64_t v[2] = { g->lo - g->bias, g->hi - g->bias }, h = HASH_FNV_INIT;

	h = hash_fnv(h, f, strlen(f) + 1);
	h = hash_fnv(h, g->build_id, strlen(g->build_id) + 1);
	return hash_mix64(hash_fnv(h, v, sizeof(v)));
}

static int module_same(const struct gmod *a, const struct gmod *b)
{
	return strcmp(a->file[0] ? a->file : a->path, b->file[0] ? b->file : b->path) == 0 &&
	       strcmp(a->build_id, b->build_id) == 0 && a->lo - a->bias == b->lo - b->bias &&
	       a->hi - a->bias == b->hi - b->bias;
}

/* What a process's symbolizer is shared by: its modules, in whatever order their addresses put them
 * (with randomization, a library loaded late may land on either side of another). */
static uint64_t modules_key(const struct gmodmap *m)
{
	uint64_t h = m->n;

	for (size_t i = 0; i < m->n; i++)
		h += module_key(&m->mods[i]);
	return h;
}

/* p's addresses as cs has them, module by module (0 when cs lacks one of p's: not shared). p->mods
 * stays as it is while p has a symbolizer (it is read again only to get one). */
static int shift_make(struct cproc *p, const struct csym *cs)
{
	uintptr_t *shift;

	if (p->mods.n != cs->mods.n || !(shift = calloc(p->mods.n, sizeof(*shift))))
		return -1;
	for (size_t i = 0; i < p->mods.n; i++) {
		size_t j = 0;

		while (j < cs->mods.n && !module_same(&p->mods.mods[i], &cs->mods.mods[j]))
			j++;
		if (j == cs->mods.n) {
			free(shift);
			return -1;
		}
		shift[i] = cs->mods.mods[j].bias - p->mods.mods[i].bias;
	}
	free(p->shift);
	p->shift = shift;
	return 0;
}

/* Where p's symbolizer has p's address addr (0: in none of its modules). */
static uintptr_t proc_addr(const void *ctx, uintptr_t addr)
{
	const struct cproc *p = ctx;
	const struct gmod *g = gmodmap_find(&p->mods, addr);

	return g ? addr + p->shift[g - p->mods.mods] : 0;
}

static uintptr_t proc_xlat(const struct gsrc *src, uintptr_t addr)
{
	return proc_addr(src->ctx, addr);
}

static int as_owner(struct cproc *p, int (*fn)(struct cproc *, void *, char *, size_t), void *arg, char *err,
		    size_t errlen);

static int open_files(struct cproc *p, void *arg, char *err, size_t errlen)
{
	struct csym *cs = arg;

	(void)p;
	if (!(cs->sym = gsym_open(&cs->mods, err, errlen)))
		return -1;
	gsym_load_files(cs->sym);
	return 0;
}

/* The symbolizer of modules the process claimed: never shared (another process's names must not come
 * from them), its files opened as the process's user (it named them). */
static struct gsym *claimed_symbolizer(struct cproc *p)
{
	struct csym *cs = calloc(1, sizeof(*cs));
	char err[256] = "out of memory";

	if (!cs || gmodmap_copy(&cs->mods, &p->mods) < 0 || shift_make(p, cs) < 0 ||
	    as_owner(p, open_files, cs, err, sizeof(err)) < 0) {
		log_warn("cannot open the symbolizer", "pid=%d error=\"%s\"", (int)p->pid, err);
		if (cs) {
			gsym_free(cs->sym);
			gmodmap_release(&cs->mods);
		}
		free(cs);
		return NULL;
	}
	cs->refs = 1;
	p->sym = cs;
	log_info("symbolizer opened", "pid=%d exe=%s modules=%zu from=region", (int)p->pid, p->exe_name, cs->mods.n);
	return cs->sym;
}

static struct gsym *symbolizer(struct cproc *p)
{
	struct collector *c = p->c;
	struct csym *cs;
	char err[256];
	uint64_t key;

	p->sym_used = mono_ns();
	if (p->sym)
		return p->sym->sym;
	if (p->claimed)
		return claimed_symbolizer(p);
	read_modules(p);
	if (!p->mods.n)
		return NULL;
	key = modules_key(&p->mods);
	for (cs = c->syms; cs && (cs->key != key || shift_make(p, cs) < 0); cs = cs->next)
		;
	if (cs) {
		cs->refs++;
		p->sym = cs;
		log_info("symbolizer shared", "pid=%d exe=%s processes=%d", (int)p->pid, p->exe_name, cs->refs);
		return cs->sym;
	}
	if (!(cs = calloc(1, sizeof(*cs))))
		return NULL;
	if (gmodmap_copy(&cs->mods, &p->mods) < 0 || shift_make(p, cs) < 0)
		goto fail;
	/* gone: its files by their own paths */
	if (start_time_of(p->pid) != p->starttime)
		gmodmap_detach(&cs->mods);
	cs->sym = gsym_open(&cs->mods, err, sizeof(err));
	if (!cs->sym) {
		log_warn("cannot open the symbolizer", "pid=%d error=\"%s\"", (int)p->pid, err);
		goto fail;
	}
	cs->key = key;
	cs->refs = 1;
	cs->next = c->syms;
	c->syms = cs;
	p->sym = cs;
	log_info("symbolizer opened", "pid=%d exe=%s modules=%zu", (int)p->pid, p->exe_name, cs->mods.n);
	return cs->sym;
fail:
	gmodmap_release(&cs->mods);
	free(cs);
	return NULL;
}

static int64_t proc_steal(const struct gsrc *src, int64_t start, int64_t end)
{
	const struct cproc *p = src->ctx;

	return gsteal_unit(&p->c->steal, start, end, mono_ns(), sysconf(_SC_NPROCESSORS_ONLN), read_file);
}

static int build(void *ctx, const struct gviol *v, struct arena *keep, struct wire_stream *ws)
{
	struct cproc *p = ctx;
	uint32_t n = atomic_load(&p->r->nslots);
	struct gsrc src = {
		.proc = p->proc,
		.slots = p->slots,
		.nslots = n < GUARD_MAX_THREADS ? n : GUARD_MAX_THREADS,
		.snapshot = region_snapshot,
		.ring_max = p->ring_bytes,
		.names = region_names,
		.releases = p->r->releases,
		.read_small = read_small,
		.steal = proc_steal,
		.ctx = p,
		.host = p->host,
		.app = p->app,
		.version = p->version,
		.build_id = p->build_id,
		.exe = p->exe,
		.kernel = p->kernel,
		.libc_name = p->libc_name,
		.cpu_limit = p->cpu_limit[0] ? p->cpu_limit : NULL,
		.labels = p->labels,
		.nlabels = p->nlabels,
		.self_lo = p->self_lo,
		.self_hi = p->self_hi,
		.min_wait_ns = p->min_wait_ns,
		.max_events = (size_t)p->max_events,
	};
	int rc;

	src.sym = symbolizer(p);
	src.xlat = proc_xlat;
	/* its memory is read (a hang's callers) only while it is the process the region names */
	src.pid = !atomic_load(&p->ended) && over(p) == 0 ? p->pid : 0;
	if (!src.sym) {
		/* a process gone before its modules could be read: its frames could never be named (lost) */
		return -1;
	}
	rc = stream_build(&src, v, keep, ws);
	if (rc == 0)
		atomic_fetch_add(&p->n.empty, 1);
	else if (rc < 0)
		log_warn("a violation's stream could not be built", "pid=%d", (int)p->pid);
	return rc;
}

/* The connection to the server: one that gave up is opened again after SHIP_RETRY_NS; meanwhile, and
 * without a server, streams go to the spool. */
static struct shipper *shipper_of(struct collector *c)
{
	int64_t now = mono_ns();
	char err[256];

	if (c->sh && shipper_stopped(c->sh)) {
		log_warn("shipping stopped; streams go to the spool for a while", "reason=\"%s\"", shipper_error(c->sh));
		shipper_free(c->sh);
		c->sh = NULL;
		c->ship_retry_at = now + SHIP_RETRY_NS;
	}
	if (!c->sh && c->o.ship.url && c->o.ship.url[0] && now >= c->ship_retry_at) {
		c->sh = shipper_open(&c->o.ship, err, sizeof(err));
		if (!c->sh) {
			log_warn("cannot start shipping", "error=\"%s\"", err);
			c->ship_retry_at = now + SHIP_RETRY_NS;
		}
	}
	return c->sh;
}

static void deliver(void *ctx, const struct wire_stream *ws)
{
	struct cproc *p = ctx;
	struct collector *c = p->c;

	if (shipper_of(c)) {
		const struct ship_counters *k = shipper_counters(c->sh);
		uint64_t before = k->accepted + k->duplicates, spooled = k->spooled, lost = k->lost;

		if (shipper_add_stream(c->sh, ws, "violation") == 0)
			shipper_flush(c->sh);
		k = shipper_counters(c->sh);
		atomic_fetch_add(&p->n.shipped, k->accepted + k->duplicates - before);
		atomic_fetch_add(&p->n.spooled, k->spooled - spooled);
		atomic_fetch_add(&p->n.lost, k->lost - lost);
		return;
	}
	if (c->o.ship.spool_dir) {
		struct buf text = BUF_INIT(SHIP_MAX_STREAM_TEXT);
		char err[256];

		if (!c->spool_only)
			c->spool_only = spool_open(c->o.ship.spool_dir, c->o.ship.spool_max, 1, err, sizeof(err));
		if (c->spool_only && wire_write_json(ws, &text) == 0 &&
		    spool_put(c->spool_only, ws->stream_id, text.data, text.len) == 0) {
			atomic_fetch_add(&p->n.spooled, 1);
			buf_release(&text);
			return;
		}
		buf_release(&text);
	}
	atomic_fetch_add(&p->n.lost, 1);
}

static struct gbudget *budget_of(struct cproc *p)
{
	struct gbudget *b;

	pthread_mutex_lock(&p->mu);
	if (!(b = p->budget) && (b = calloc(1, sizeof(*b)))) {
		static const struct gbudget_ops ops = { build, deliver, NULL };
		struct gbudget_ops o = ops;
		int rpm = p->rpm ? p->rpm : p->r->reports_per_min;

		o.ctx = p;
		budget_init(b, &p->mu, rpm >= GSET_MIN_REPORTS_PER_MIN && rpm <= GSET_MAX_REPORTS_PER_MIN ? rpm :
			    GSET_DEF_REPORTS_PER_MIN, &o, &p->n);
		p->budget = b;
	}
	pthread_mutex_unlock(&p->mu);
	return b;
}

/* ---- what the server pushes (guard.md "Settings from the server") ---- */

/* The process's settings as it started, each within its limits (else the agent's default). */
static void started_of(const struct cproc *p, double out[GSET_COUNT])
{
	for (size_t i = 0; i < GSET_COUNT; i++) {
		double v = p->r->as_started[i];

		out[i] = guard_setting_valid((enum guard_setting_id)i, v) ? v : guard_settings[i].def;
	}
	out[GSET_GUARD] = 1;
}

/* The k of the process's table now; 0 when it says something no k is. */
static double k_now(const struct cproc *p)
{
	uint64_t bits = atomic_load(&p->r->k_now);
	double k;

	memcpy(&k, &bits, sizeof(k));
	return guard_setting_valid(GSET_K, k) ? k : 0;
}

static const unsigned char no_sha[32];   /* a table of the process's own profile */

/* Writes the pushed block: the settings v, and tab's image (built with k, of the fleet's profile sha
 * or, zeros, the process's own) when tab is not NULL. 0, or -1 when the image does not fit. */
static int push(struct cproc *p, const double v[GSET_COUNT], const struct gtab *tab, double k,
		const unsigned char *sha)
{
	struct gregion *r = p->r;
	uint32_t g = atomic_load(&r->pushed_gen);

	if (tab && gtab_image_bytes(tab) > p->tab_cap)
		return -1;
	g = (g + 1) | 1;   /* odd: being written (whatever the process left there) */
	atomic_store(&r->pushed_gen, g);
	atomic_thread_fence(memory_order_release);
	r->muted = v[GSET_GUARD] == 0;
	r->sample_hz = (int32_t)v[GSET_SAMPLE_HZ];
	r->min_wait_pushed_ns = (int64_t)v[GSET_MIN_WAIT_US] * 1000;
	if (tab) {
		gtab_image_write(tab, (unsigned char *)r + p->tab_off, p->tab_cap);
		r->tab_k = k;
		memcpy(r->tab_fleet_sha, sha, sizeof(r->tab_fleet_sha));
		r->tab_gen++;
	}
	atomic_store_explicit(&r->pushed_gen, g + 1, memory_order_release);
	memcpy(p->set, v, sizeof(p->set));
	p->pushed = 1;
	return 0;
}

/* Whether profile prof has the process's loops, in its order: its threads' loop indexes stay valid. */
static int same_loops(const struct cproc *p, const struct gprofile *prof)
{
	uint32_t n = p->r->nkeys;

	if (n > GP_MAX_LOOPS || prof->nloops != n || strcmp(prof->build_id, p->build_id) != 0)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (gp_loop_key(prof, i) != p->r->loop_key[i])
			return 0;
	return 1;
}

/*
 * The profile the process guards with, read from the file it names: a regular file of root's or of the
 * process's owner's (a process cannot make the collector read what it could not), of its build and
 * loops. NULL with the reason in err. Caller frees.
 */
static struct gprofile *own_profile(struct cproc *p, char *err, size_t errlen)
{
	char path[sizeof(p->r->profile_path)];
	struct gprofile *prof = NULL;
	struct buf text = BUF_INIT(PROFILE_MAX);
	struct stat st;
	char self[64];
	int fd, pfd;

	take(path, sizeof(path), p->r->profile_path, sizeof(p->r->profile_path));
	/* looked at before it is opened for reading: opening a device the process names could act on it */
	pfd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0) {
		snprintf(err, errlen, "%.300s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(pfd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > PROFILE_MAX ||
	    !owned_by(p->pid, st.st_uid)) {
		snprintf(err, errlen, "%.300s: not a profile file of the process's owner", path);
		close(pfd);
		return NULL;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC);   /* the very file looked at */
	close(pfd);
	if (fd < 0) {
		snprintf(err, errlen, "%.300s: %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		char chunk[65536];
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0) {
			snprintf(err, errlen, "%.300s: %s", path, strerror(errno));
			goto out_close;
		}
		if (n == 0)
			break;
		if (buf_append(&text, chunk, (size_t)n) < 0) {
			snprintf(err, errlen, "%.300s: larger than %zu bytes", path, PROFILE_MAX);
			goto out_close;
		}
	}
	if (!(prof = gp_new())) {
		snprintf(err, errlen, "out of memory");
		goto out_close;
	}
	if (gp_load_text(prof, text.data ? text.data : "", text.len) < 0) {
		snprintf(err, errlen, "%.300s: %s", path, gp_error(prof));
		gp_free(prof);
		prof = NULL;
	}
	if (prof && !same_loops(p, prof)) {
		snprintf(err, errlen, "%.300s: not the build or loops the process guards", path);
		gp_free(prof);
		prof = NULL;
	}
out_close:
	close(fd);
	buf_release(&text);
	return prof;
}

/* A table of prof (with k) at the process's addresses, pushed with the settings v: 0, or -1 when
 * nothing was pushed (logged). */
static int push_table(struct cproc *p, const double v[GSET_COUNT], struct gprofile *prof, double k,
		       const unsigned char *sha)
{
	int64_t floor_ns = p->r->min_threshold_ns;
	struct gtab *tab;
	char err[256];
	int rc;

	p->k_tried = k;
	read_modules(p);
	gp_set_k(prof, k, floor_ns >= 0 && floor_ns <= 86400000000000LL ? floor_ns : 0);
	tab = p->mods.n ? gtab_build(prof, &p->mods, err, sizeof(err)) : NULL;
	if (!tab) {
		log_warn("no guard table for the process", "pid=%d k=%g error=\"%s\"", (int)p->pid, k,
			 p->mods.n ? err : "its modules cannot be read");
		return -1;
	}
	rc = push(p, v, tab, k, sha);
	if (rc < 0)
		log_warn("the guard table is too large for the process's region", "pid=%d contexts=%u", (int)p->pid,
			 tab->ctx_mask + 1);
	else {
		log_info("guard table pushed", "pid=%d k=%g profile=%s", (int)p->pid, k,
			 memcmp(sha, no_sha, sizeof(no_sha)) ? "fleet" : "own");
		p->announce = 1;
	}
	gtab_free(tab);
	return rc;
}

static struct cfleet *fleet_find(struct collector *c, const char *build_id)
{
	for (struct cfleet *f = c->fleets; f; f = f->next)
		if (strcmp(f->build_id, build_id) == 0)
			return f;
	return NULL;
}

/* The profile the process's table is of: the fleet's (when it is the one known here), else its own. */
static struct gprofile *current_profile(struct cproc *p, int *own, char *err, size_t errlen)
{
	struct cfleet *f;

	*own = 0;
	if (memcmp(p->r->fleet_sha, no_sha, sizeof(no_sha)) != 0) {
		if ((f = fleet_find(p->c, p->build_id)) && f->prof && memcmp(f->sha, p->r->fleet_sha, sizeof(f->sha)) == 0)
			return f->prof;
		snprintf(err, errlen, "its fleet profile is not the one known here");
		return NULL;
	}
	*own = 1;
	return own_profile(p, err, errlen);
}

/* The settings in a report's answer, pushed to the process: k by a table built here. */
static void apply_answer(struct cproc *p, const char *answer, size_t len)
{
	double started[GSET_COUNT], v[GSET_COUNT], k;
	const double *was;
	int rpm, changed, tabled = 0;

	started_of(p, started);
	if (guard_settings_read(answer, len, started, v) < 0)
		return;   /* an older server: nothing pushed */
	rpm = (int)v[GSET_REPORTS_PER_MIN];
	if (rpm != (p->rpm ? p->rpm : p->r->reports_per_min)) {
		p->rpm = rpm;
		if (p->budget)
			budget_set(p->budget, rpm);
		log_info("new report limit", "pid=%d reports_per_min=%d", (int)p->pid, rpm);
	}
	was = p->pushed ? p->set : started;
	changed = v[GSET_GUARD] != was[GSET_GUARD] || v[GSET_SAMPLE_HZ] != was[GSET_SAMPLE_HZ] ||
		v[GSET_MIN_WAIT_US] != was[GSET_MIN_WAIT_US];
	if (changed) {
		p->announce = 1;
		log_info("settings pushed", "pid=%d guard=%s min_wait_us=%lld sample_hz=%d", (int)p->pid,
			 v[GSET_GUARD] ? "on" : "off", (long long)v[GSET_MIN_WAIT_US], (int)v[GSET_SAMPLE_HZ]);
	}
	k = v[GSET_K];
	if (k != k_now(p) && k != p->k_tried && p->r->nkeys) {
		char err[512];
		int own;
		struct gprofile *prof = current_profile(p, &own, err, sizeof(err));

		p->k_tried = k;
		if (prof) {
			/* the settings go with the table */
			tabled = push_table(p, v, prof, k, own ? no_sha : p->r->fleet_sha) == 0;
			if (own)
				gp_free(prof);
		} else {
			log_warn("k not pushed", "pid=%d k=%g error=\"%s\"", (int)p->pid, k, err);
		}
	}
	if (!tabled && (changed || !p->pushed))
		push(p, v, NULL, 0, NULL);
}

/* What the process took of what was pushed, said once. */
static void note_taken(struct cproc *p)
{
	uint32_t taken = atomic_load(&p->r->pushed_taken), refused = p->r->tab_refused;

	if (!p->pushed)
		return;
	if (taken != p->taken_seen && taken == atomic_load(&p->r->pushed_gen) && p->announce) {
		p->announce = 0;
		log_info("the process took what was pushed", "pid=%d guard=%s k=%g profile=%s", (int)p->pid,
			 p->r->muted ? "off" : "on", k_now(p),
			 memcmp(p->r->fleet_sha, no_sha, sizeof(no_sha)) ? "fleet" : "own");
	}
	if (refused != p->refused_seen)
		log_warn("the process refused a guard table", "pid=%d refused=%u", (int)p->pid, refused);
	p->taken_seen = taken;
	p->refused_seen = refused;
}

/* A build id fit for a URL path: what the agent makes (hex, or "path-" and hex). */
static int build_id_ok(const char *b)
{
	if (!*b)
		return 0;
	for (; *b; b++)
		if (!((*b >= '0' && *b <= '9') || (*b >= 'a' && *b <= 'z') || (*b >= 'A' && *b <= 'Z') || *b == '-'))
			return 0;
	return 1;
}

/* The fleet's profile of build_id, fetched when the one known is older than max_age. NULL when it
 * cannot be known (no server, too many builds). */
static struct cfleet *fleet_of(struct collector *c, const char *build_id, int64_t now, int64_t max_age)
{
	struct cfleet *f = fleet_find(c, build_id);
	struct buf body = BUF_INIT(PROFILE_MAX);
	char path[200], err[512];
	long status = 0;

	if (f && now - f->fetched < max_age)
		return f;
	if (!shipper_of(c))
		return f;
	if (!f) {
		if (c->nfleets >= FLEET_MAX || !(f = calloc(1, sizeof(*f))))
			return NULL;
		snprintf(f->build_id, sizeof(f->build_id), "%s", build_id);
		f->next = c->fleets;
		c->fleets = f;
		c->nfleets++;
	}
	f->fetched = now;
	snprintf(path, sizeof(path), "/api/v1/profiles/%s", build_id);
	if (shipper_get(c->sh, path, body.max, &body, &status, err, sizeof(err)) == 0) {
		unsigned char sha[32];

		sha256(body.data, body.len, sha);
		if (!f->prof || memcmp(sha, f->sha, sizeof(sha)) != 0) {
			struct gprofile *prof = gp_new();

			gp_free(f->prof);
			f->prof = NULL;
			memcpy(f->sha, sha, sizeof(sha));
			if (prof && gp_load_text(prof, body.data, body.len) == 0 && strcmp(prof->build_id, build_id) == 0)
				f->prof = prof;
			else {
				log_warn("the fleet's profile is not usable", "build_id=%s error=\"%s\"", build_id,
					 prof ? gp_error(prof) : "out of memory");
				gp_free(prof);
			}
		}
	} else if (status != 404) {
		log_warn("cannot fetch the fleet's profile", "build_id=%s error=\"%s\"", build_id, err);
	}
	buf_release(&body);
	return f;
}

/* Guarding with the fleet's profile of the process's build, once it has the same loops (fetched at the
 * process's SM_GUARD_PROFILE_FETCH_S, at most once a second for a build). */
static void refresh_fleet(struct cproc *p, int64_t now)
{
	int64_t every = p->r->fetch_ns;
	struct cfleet *f;

	if (every <= 0 || now < p->next_fetch || !p->r->nkeys || !build_id_ok(p->build_id))
		return;
	if (every < FETCH_MIN_NS)
		every = FETCH_MIN_NS;
	p->next_fetch = now + every;
	f = fleet_of(p->c, p->build_id, now, every);
	if (!f || !f->prof || memcmp(f->sha, p->r->fleet_sha, sizeof(f->sha)) == 0 ||
	    memcmp(f->sha, p->fleet_tried, sizeof(f->sha)) == 0)
		return;
	memcpy(p->fleet_tried, f->sha, sizeof(f->sha));
	if (!same_loops(p, f->prof)) {
		log_info("the fleet's profile has other loops: the next start takes it", "pid=%d units=%llu",
			 (int)p->pid, (unsigned long long)f->prof->units);
		return;
	}
	{
		double v[GSET_COUNT], k = k_now(p);

		if (p->pushed)
			memcpy(v, p->set, sizeof(v));
		else
			started_of(p, v);
		push_table(p, v, f->prof, k > 0 ? k : v[GSET_K], f->sha);
	}
}

/* ---- the shipping thread ---- */

/* The process's queue: violations to its budget, baselines shipped now. */
static void take_queue(struct cproc *p, int64_t now)
{
	struct gregion *r = p->r;
	uint32_t t = atomic_load_explicit(&r->q_tail, memory_order_relaxed);
	uint32_t h = atomic_load_explicit(&r->q_head, memory_order_acquire);

	/* a head further than the queue holds is not the process's doing: start over from it */
	if (h - t > GREGION_QUEUE)
		t = h - GREGION_QUEUE;
	for (; t != h; t++) {
		struct gviol v = r->queue[t % GREGION_QUEUE];

		atomic_store_explicit(&r->q_tail, t + 1, memory_order_release);
		v.hang = 0;   /* only the collector's own watch ships a unit in flight */
		if (v.baseline) {
			struct arena *a = arena_open(0);
			struct wire_stream ws;

			atomic_fetch_add(&p->n.baseline, 1);
			if (a && build(p, &v, a, &ws) > 0) {
				ws.role = WIRE_ROLE_BASELINE;
				deliver(p, &ws);
			}
			arena_free(a);
		} else {
			struct gbudget *b = budget_of(p);

			if (b)
				budget_offer(b, &v, now);
		}
	}
}

static uint64_t units_of(const struct cproc *p)
{
	uint32_t n = atomic_load(&p->r->nslots);
	uint64_t u = atomic_load(&p->r->units_gone);

	for (uint32_t i = 0; i < n && i < GUARD_MAX_THREADS; i++)
		u += atomic_load(&p->slots[i].units);
	return u;
}

/* Streams waiting in the host's spool (every process's), counted at most once a second. */
static uint64_t spool_backlog(struct collector *c)
{
	int64_t now = mono_ns();

	if (!c->backlog_at || now - c->backlog_at >= 1000000000LL) {
		c->backlog = spool_count(c->o.ship.spool_dir, c->o.ship.spool_max);
		c->backlog_at = now;
	}
	return c->backlog;
}

/* The process's report (wire-format.md "Agent reports"). */
static void report(struct collector *c, struct cproc *p, int exiting)
{
	struct buf body = BUF_INIT(64 << 10), answer = BUF_INIT(64 << 10);
	char err[512];

	if (!shipper_of(c))
		return;
	const struct wire_report r = {
		.host = p->host,
		.exe = p->exe[0] ? p->exe : p->exe_name,
		.build_id = p->build_id,
		.mode = p->learnt ? "train" : "guard",
		.agent_version = GUARD_VERSION,
		.app = p->app,
		.collector = "host",
		.pid = p->pid,
		.started_ns = p->started_ns,
		.units = units_of(p),
		.violations = atomic_load(&p->n.violations),
		.drops = atomic_load(&p->n.suppressed) + atomic_load(&p->n.queue_drops) + atomic_load(&p->n.lost) +
			 atomic_load(&p->r->queue_drops),
		.spool_backlog = spool_backlog(c),
		.ship_errors = atomic_load(&p->n.rejected) + atomic_load(&p->n.lost),
		.exiting = exiting != 0,
	};

	if (wire_write_report(&r, &body) == 0) {
		if (shipper_post_json(c->sh, "/api/v1/agents/report", body.data, body.len, &answer, err, sizeof(err)) < 0)
			log_warn("report not delivered", "pid=%d error=\"%s\"", (int)p->pid, err);
		else if (!exiting)
			apply_answer(p, answer.data, answer.len);
	}
	buf_release(&answer);
	buf_release(&body);
}

/* Whether p's process has ended: it said so, or it is gone (by its pidfd, looked at every
 * ALIVE_PIDFD_NS; without one, its pid is another process's now, looked at every ALIVE_NS; at once
 * with check_pid). A signal looks again first (ask_stack()). */
static int gone(struct cproc *p, int64_t now, int check_pid)
{
	int ended = atomic_load(&p->r->state) != GREG_LIVE;   /* (a page cut away reads as zeros: not live) */

	if (cut_short(p)) {
		log_warn("region cut short by its process; finished", "pid=%d region=%s", (int)p->pid, p->name);
		return 1;
	}
	if (ended)
		return 1;
	if (!check_pid && now < p->next_alive)
		return 0;
	p->next_alive = now + (p->pidfd >= 0 ? ALIVE_PIDFD_NS : ALIVE_NS);
	return over(p) == 1;
}

/*
 * The lines the process logged since the last look, logged as the collector's own (escaped as values),
 * at most LOG_PER_MIN a minute. Its count is the collector's: a log_head that jumps, or runs backwards,
 * costs the lines between, never a loop over them. Of the region's GREGION_LOG lines the oldest may
 * be being written over (the writer's line head - GREGION_LOG): the last GREGION_LOG - 1 are read,
 * each only if its number is the one expected before and after the copy.
 */
static void take_logs(struct cproc *p, int64_t now)
{
	uint32_t head = atomic_load_explicit(&p->r->log_head, memory_order_acquire);

	if (!p->log_started) {
		/* a collector started again sees its predecessor's last lines once more; none is counted */
		p->log_started = 1;
		p->log_next = head - (head < GREGION_LOG - 1 ? head : GREGION_LOG - 1);
	}
	if (head - p->log_next > GREGION_LOG - 1) {
		p->log_not_shown += head - p->log_next - (GREGION_LOG - 1);
		p->log_next = head - (GREGION_LOG - 1);
	}
	for (; p->log_next != head; p->log_next++) {
		const struct gregion_logline *l = &p->r->log[p->log_next % GREGION_LOG];
		uint32_t seq = atomic_load_explicit(&l->seq, memory_order_acquire);
		uint32_t len = atomic_load_explicit(&l->len, memory_order_relaxed);
		char text[sizeof(l->text) + 1];

		if (len > sizeof(l->text))
			len = sizeof(l->text);
		memcpy(text, l->text, len);
		text[len] = '\0';
		atomic_thread_fence(memory_order_acquire);
		/* not this line (being written, or written over), or written over while it was copied */
		if (seq != p->log_next + 1 || atomic_load_explicit(&l->seq, memory_order_relaxed) != seq) {
			p->log_not_shown++;
			continue;
		}
		if (now - p->log_minute >= GUARD_MINUTE_NS) {
			if (p->log_held)
				log_info("guarded process's log lines not shown", "pid=%d lines=%llu", (int)p->pid,
					 (unsigned long long)p->log_held);
			p->log_minute = now;
			p->log_shown = 0;
			p->log_held = 0;
		}
		if (p->log_shown >= LOG_PER_MIN) {
			p->log_held++;
			p->log_not_shown++;
			continue;
		}
		p->log_shown++;
		log_info("guarded process logged", "pid=%d line=%s", (int)p->pid, text);
	}
}

/* ---- training: what a process learns, saved and uploaded ---- */

/* A live process may have loaded modules since they were read: read again, its symbolizer opened
 * again only when they changed (its shifts are of the modules it was opened with). */
static void modules_again(struct cproc *p)
{
	struct gmodmap was = { NULL, 0 };
	int same;

	/* only after the process wrote its module list again (a dlopen): reading /proc/PID/maps of every
	 * training process at every save would cost the collector more than the save */
	if (atomic_load(&p->ended) || atomic_load_explicit(&p->r->mods_gen, memory_order_acquire) == p->mods_gen ||
	    gmodmap_copy(&was, &p->mods) < 0)
		return;
	read_modules(p);
	same = was.n == p->mods.n;
	for (size_t i = 0; same && i < was.n; i++)
		same = was.mods[i].bias == p->mods.mods[i].bias && was.mods[i].lo == p->mods.mods[i].lo &&
		       module_same(&was.mods[i], &p->mods.mods[i]);
	gmodmap_release(&was);
	if (!same && p->sym) {
		sym_release(p->c, p->sym);
		p->sym = NULL;
	}
}

/* The names of p's addresses, from its symbolizer. 0, or -1 (none could be opened). */
static int namer_of(struct cproc *p, struct learnt_namer *nm)
{
	memset(nm, 0, sizeof(*nm));
	modules_again(p);
	if (!(nm->sym = symbolizer(p)))
		return -1;
	nm->mods = &p->mods;
	nm->xlat = proc_addr;
	nm->ctx = p;
	nm->exe = p->exe[0] ? p->exe : p->exe_name;
	nm->build_id = p->build_id;
	nm->k = p->train_k;
	nm->cut = p->train_cut;
	return 0;
}

/*
 * fn(p, arg) with this thread's file system identity the process's (its region file's owner and
 * group, no supplementary group): the process names the path, so the collector writes nothing there
 * that the process could not. Only this thread's identity changes (setfsuid, and the raw setgroups
 * call, are per thread). -1 with err when it cannot take that identity.
 */
static int as_owner(struct cproc *p, int (*fn)(struct cproc *, void *, char *, size_t), void *arg, char *err,
		    size_t errlen)
{
	gid_t groups[256];
	int ngroups, rc;
	uid_t uid;
	gid_t gid;

	if (geteuid() != 0) {
		if (p->uid != geteuid()) {
			snprintf(err, errlen, "the collector runs as uid %u, the process as uid %u", (unsigned)geteuid(),
				 (unsigned)p->uid);
			return -1;
		}
		return fn(p, arg, err, errlen);
	}
	ngroups = getgroups((int)(sizeof(groups) / sizeof(groups[0])), groups);
	if (ngroups < 0 || syscall(SYS_setgroups, 0, NULL) < 0) {
		snprintf(err, errlen, "cannot drop the supplementary groups: %s", strerror(errno));
		return -1;
	}
	gid = (gid_t)setfsgid(p->gid);
	uid = (uid_t)setfsuid(p->uid);
	if ((uid_t)setfsuid((uid_t)-1) != p->uid || (gid_t)setfsgid((gid_t)-1) != p->gid) {
		snprintf(err, errlen, "cannot act as uid %u gid %u", (unsigned)p->uid, (unsigned)p->gid);
		rc = -1;
	} else {
		rc = fn(p, arg, err, errlen);
	}
	setfsuid(uid);
	setfsgid(gid);
	syscall(SYS_setgroups, (long)ngroups, groups);
	return rc;
}

static int save_file(struct cproc *p, void *arg, char *err, size_t errlen)
{
	char dir[sizeof(p->profile_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", p->profile_path);
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		if (util_mkdir_p(dir) < 0) {
			snprintf(err, errlen, "%s: %s", dir, strerror(errno));
			return -1;
		}
	}
	/* a short wait for the file's lock: this thread ships every process's streams */
	return gp_save_merged(p->profile_path, arg, 0, 200, err, errlen);
}

/* What p learnt since the last save, merged into its profile file (as the process's own agent would). */
static void save_learnt(struct cproc *p)
{
	struct learnt_namer nm;
	struct learnt_copy *cp;
	struct gprofile *prof = NULL;
	char err[512] = "out of memory";
	int64_t t0 = mono_ns();
	uint64_t units;

	if (!(cp = learnt_take(p->learnt)))
		goto out_fail;
	if (!(units = learnt_copy_units(cp, p->learnt)))
		goto out_free;
	if (p->profile_path[0] != '/') {
		snprintf(err, sizeof(err), "the profile's path is not absolute");
		goto out_fail;
	}
	if (namer_of(p, &nm) < 0) {
		snprintf(err, sizeof(err), "no symbolizer for the process's modules");
		goto out_fail;
	}
	if (!(prof = gp_new()) || learnt_profile(cp, p->learnt, 0, &nm, prof, err, sizeof(err)) < 0 ||
	    as_owner(p, save_file, prof, err, sizeof(err)) < 0)
		goto out_fail;
	learnt_mark_saved(p->learnt, cp);
	p->saves++;
	log_info("training saved", "pid=%d exe=%s path=%s units=%llu ms=%.1f", (int)p->pid, p->exe_name,
		 p->profile_path, (unsigned long long)units, (double)(mono_ns() - t0) / 1e6);
	goto out_free;
out_fail:
	/* the counts stay unsaved: the next save takes them */
	p->save_errors++;
	log_warn("cannot save the profile", "pid=%d path=%s error=\"%s\"", (int)p->pid, p->profile_path, err);
out_free:
	gp_free(prof);
	learnt_copy_free(cp);
}

/* Everything p learnt since it started, to the server (which keeps each process's latest upload). */
static void upload_learnt(struct collector *c, struct cproc *p)
{
	struct buf text = BUF_INIT((size_t)64 << 20), body = BUF_INIT((size_t)64 << 20);
	struct learnt_namer nm;
	struct learnt_copy *cp;
	struct gprofile *prof = NULL;
	char err[512] = "out of memory";

	if (!shipper_of(c) || !(cp = learnt_take(p->learnt)))
		goto out;
	if (!learnt_copy_units(cp, NULL) || learnt_copy_units(cp, NULL) == p->uploaded)
		goto out_free;
	if (namer_of(p, &nm) < 0) {
		snprintf(err, sizeof(err), "no symbolizer for the process's modules");
		goto out_fail;
	}
	if (!(prof = gp_new()) || learnt_profile(cp, p->learnt, 1, &nm, prof, err, sizeof(err)) < 0 ||
	    gp_cluster(prof, 0) < 0 || gp_write(prof, &text) < 0 ||
	    learnt_upload_body(p->host, p->pid, p->started_ns, text.data, text.len, &body) < 0) {
		if (prof && gp_error(prof)[0])
			snprintf(err, sizeof(err), "%s", gp_error(prof));
		goto out_fail;
	}
	if (shipper_post_json(c->sh, "/api/v1/profiles", body.data, body.len, NULL, err, sizeof(err)) < 0)
		goto out_fail;
	p->uploads++;
	p->uploaded = learnt_copy_units(cp, NULL);
	log_info("training uploaded", "pid=%d exe=%s units=%llu", (int)p->pid, p->exe_name,
		 (unsigned long long)learnt_copy_units(cp, NULL));
	goto out_free;
out_fail:
	log_warn("profile not uploaded", "pid=%d error=\"%s\"", (int)p->pid, err);
out_free:
	gp_free(prof);
	learnt_copy_free(cp);
out:
	buf_release(&text);
	buf_release(&body);
}

static void train_round(struct collector *c, struct cproc *p, int64_t now, int all, int ended)
{
	/* a process exiting waits for its last save (region.h, train_exit_saved): its exit is this round's
	 * end too (gone()), the process still there to see the answer */
	int exiting = atomic_load(&p->r->state) == GREG_EXITED && !atomic_load(&p->r->train_exit_saved);

	if (all || ended || exiting || now >= p->next_save) {
		save_learnt(p);
		p->next_save = now + p->save_ns;
	}
	if (exiting)
		atomic_store(&p->r->train_exit_saved, 1);
	if (p->upload_ns > 0 && (ended || now >= p->next_upload)) {
		upload_learnt(c, p);
		p->next_upload = now + p->upload_ns;
	}
}

/* The shipping thread's round over one process; ended: it was over before the round began (its last). */
static void ship_round(struct collector *c, struct cproc *p, int64_t now, int all, int ended)
{
	atomic_store(&p->r->collector_seen, now);
	take_logs(p, now);
	take_queue(p, now);
	if (!ended) {
		note_taken(p);
		refresh_fleet(p, now);
	}
	if (p->budget)
		budget_work(p->budget, now, all || ended);
	if (p->learnt)
		train_round(c, p, now, all, ended);
	if (c->o.report_ns > 0 && (ended || now >= p->next_report)) {
		report(c, p, ended);
		p->next_report = now + c->o.report_ns;
	}
	if (p->sym && now - p->sym_used > SYM_IDLE_NS) {
		sym_release(c, p->sym);
		p->sym = NULL;
	}
}

/* Removes the ended processes from the list: their regions' files go with them. */
static void reap(struct collector *c)
{
	struct cproc **pp, *dead = NULL;

	pthread_mutex_lock(&c->mu);
	for (pp = &c->procs; *pp;) {
		struct cproc *p = *pp;

		if (atomic_load(&p->ended) == 2) {
			*pp = p->next;
			p->next = dead;
			dead = p;
			c->nprocs--;
		} else {
			pp = &p->next;
		}
	}
	pthread_mutex_unlock(&c->mu);
	while (dead) {
		struct cproc *next = dead->next;
		int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd >= 0) {
			unlinkat(dfd, dead->name, 0);
			close(dfd);
		}
		if (dead->learnt)
			log_info("guarded process ended", "pid=%d exe=%s mode=train saves=%llu save_errors=%llu uploads=%llu "
				 "log_lines_lost=%llu", (int)dead->pid, dead->exe_name, (unsigned long long)dead->saves,
				 (unsigned long long)dead->save_errors, (unsigned long long)dead->uploads,
				 (unsigned long long)dead->log_not_shown);
		else
			log_info("guarded process ended", "pid=%d exe=%s violations=%llu shipped=%llu log_lines_lost=%llu",
				 (int)dead->pid, dead->exe_name, (unsigned long long)atomic_load(&dead->n.violations),
				 (unsigned long long)atomic_load(&dead->n.shipped),
				 (unsigned long long)dead->log_not_shown);
		proc_free(dead);
		dead = next;
	}
}

/* The processes now, for a round outside the lock (only the shipping thread frees them). */
static size_t snapshot_list(struct collector *c, struct cproc ***out, size_t *cap)
{
	size_t n = 0;

	pthread_mutex_lock(&c->mu);
	if (c->nprocs > *cap) {
		struct cproc **v = realloc(*out, c->nprocs * sizeof(**out));

		if (v) {
			*out = v;
			*cap = c->nprocs;
		}
	}
	for (struct cproc *p = c->procs; p && n < *cap; p = p->next)
		(*out)[n++] = p;
	pthread_mutex_unlock(&c->mu);
	return n;
}

/* One round over every process. last: the collector's final one, after both loops: everything is
 * shipped, and a process found over just now (ended since the last round, or come and gone since
 * the last scan) gets its last round too. */
static void ship_all(struct collector *c, struct cproc ***list, size_t *cap, int last)
{
	int64_t now = mono_ns();
	size_t n = snapshot_list(c, list, cap);

	for (size_t i = 0; i < n; i++) {
		struct cproc *p = (*list)[i];
		/* read first: a process the watchdog finds gone meanwhile gets one more round */
		int ended = atomic_load(&p->ended) != 0 || (last && gone(p, now, 1));

		ship_round(c, p, now, last, ended);
		if (ended)
			atomic_store(&p->ended, 2);   /* its last round is done */
	}
	reap(c);
}

static void *ship_main(void *arg)
{
	struct collector *c = arg;
	struct cproc **list = NULL;
	size_t cap = 0;
	int64_t next_drain = 0;

	while (!*c->o.stop) {
		struct timespec ts = { 0, SHIP_WAKE_NS };
		int64_t now;

		ship_all(c, &list, &cap, 0);
		now = mono_ns();
		if (c->o.ship.spool_dir && now >= next_drain && shipper_of(c)) {
			shipper_drain(c->sh);
			next_drain = now + 60000000000LL;
		}
		nanosleep(&ts, NULL);
	}
	free(list);
	return NULL;
}

/*
 * The end, once both loops are over: what every process holds, shipped or spooled. A live process's
 * region stays for the next collector; one that is over (it may have ended since the last rounds, or
 * come and gone since the last scan) gets its last round and goes, its file with it.
 */
static void finish_all(struct collector *c)
{
	struct cproc **list = NULL;
	size_t cap = 0;

	scan(c);   /* a process that came and went since the last look */
	ship_all(c, &list, &cap, 1);
	free(list);
}

/* ---- the collector ---- */

struct collector *collector_open(const struct collect_opts *o, char *err, size_t errlen)
{
	struct collector *c = calloc(1, sizeof(*c));
	struct stat st;
	char path[4200];

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->o = *o;
	c->lock_fd = -1;
	snprintf(c->dir, sizeof(c->dir), "%s", o->dir);
	if (util_mkdir_p(c->dir) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: cannot make the directory: %s", c->dir, strerror(errno));
		goto out_free;
	}
	/* every guarded process writes its own file; none may remove another's */
	if (chmod(c->dir, 01733) < 0) {
		snprintf(err, errlen, "%s: cannot set its mode: %s", c->dir, strerror(errno));
		goto out_free;
	}
	snprintf(path, sizeof(path), "%s/%s", c->dir, GREGION_LOCK);
	c->lock_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	/* another user's file (the directory is writable by all) could be held to keep the collector out */
	if (c->lock_fd >= 0 && fstat(c->lock_fd, &st) == 0 && st.st_uid != geteuid()) {
		close(c->lock_fd);
		unlink(path);
		c->lock_fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	}
	if (c->lock_fd < 0 || flock(c->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		snprintf(err, errlen, "%s: %s", path,
			 c->lock_fd >= 0 && errno == EWOULDBLOCK ? "another collector runs here" : strerror(errno));
		goto out_free;
	}
	fchmod(c->lock_fd, 0644);
	/* the layout this collector reads, for processes to check (auto mode) before they rely on it */
	{
		char stamp[GREGION_STAMP_MAX];
		size_t n = gregion_stamp(stamp, sizeof(stamp));

		if (ftruncate(c->lock_fd, 0) < 0 || pwrite(c->lock_fd, stamp, n, 0) != (ssize_t)n) {
			snprintf(err, errlen, "%s: cannot write its stamp: %s", path, strerror(errno));
			goto out_free;
		}
	}
	if (o->ship.url && o->ship.url[0]) {
		c->sh = shipper_open(&c->o.ship, err, errlen);   /* a bad URL is refused here, once */
		if (!c->sh)
			goto out_free;
	}
	if (!(c->refused = calloc(REFUSED_MAX, sizeof(*c->refused)))) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	if (cut_maps) {
		snprintf(err, errlen, "a collector runs in this process already");
		goto out_free;
	}
	if (cut_install() < 0) {
		snprintf(err, errlen, "cannot catch SIGBUS: %s", strerror(errno));
		cut_uninstall();
		goto out_free;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->maps_mu, NULL);
	return c;
out_free:
	shipper_free(c->sh);
	free(c->refused);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	free(c);
	return NULL;
}

int collector_run(struct collector *c)
{
	pthread_t th;
	int64_t tick = c->o.tick_ns > 0 ? c->o.tick_ns : 100000000;

	if (pthread_create(&th, NULL, ship_main, c) != 0) {
		log_error("cannot start the shipping thread", "error=\"%s\"", strerror(errno));
		return -1;
	}
	log_info("collecting", "dir=%s url=%s", c->dir, c->o.ship.url ? c->o.ship.url : "(spool only)");
	while (!*c->o.stop) {
		int64_t now = mono_ns(), next = now + tick;
		struct timespec ts;

		if (now >= c->next_scan) {
			scan(c);
			c->next_scan = now + SCAN_NS;
		}
		gsteal_sample(&c->steal, now, 0, read_file);
		pthread_mutex_lock(&c->mu);
		for (struct cproc *p = c->procs; p; p = p->next) {
			if (atomic_load(&p->ended))
				continue;
			if (gone(p, now, 0)) {
				atomic_store(&p->ended, 1);
				continue;
			}
			if (now >= p->next_watch) {
				watch(p, now);
				p->next_watch = now + p->watchdog_ns;
			}
			if (p->next_watch < next)
				next = p->next_watch;
		}
		pthread_mutex_unlock(&c->mu);
		now = mono_ns();
		if (next > now) {
			ts.tv_sec = (next - now) / 1000000000;
			ts.tv_nsec = (next - now) % 1000000000;
			nanosleep(&ts, NULL);
		}
	}
	pthread_join(th, NULL);
	finish_all(c);
	if (c->sh)
		shipper_flush(c->sh);
	return 0;
}

void collector_free(struct collector *c)
{
	if (!c)
		return;
	while (c->procs) {
		struct cproc *next = c->procs->next;

		proc_free(c->procs);
		c->procs = next;
	}
	shipper_free(c->sh);
	spool_free(c->spool_only);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	while (c->fleets) {
		struct cfleet *next = c->fleets->next;

		gp_free(c->fleets->prof);
		free(c->fleets);
		c->fleets = next;
	}
	cut_uninstall();
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->maps_mu);
	free(c->refused);
	free(c);
}
