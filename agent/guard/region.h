/*
 * region: a guarded process's shared-memory file, the one thing it and the
 * host's collector (sm-agent collect, collect.c) share (docs/guard.md "The
 * host's collector"). The process writes it: what it is (exe, build, app,
 * settings, its signal's cookie), its threads' slots with their units in
 * flight, their event rings, the loops' and unit types' names, and a queue of
 * violations and baseline units; a training process, what it learns (learnt.h).
 * The collector reads it: watches the units in flight (and signals a thread
 * for its stack), takes the queue, builds and ships the streams, saves what a
 * training process learnt. The collector writes what the server pushes (settings,
 * and a guard table for a new k or the fleet's profile) into its pushed
 * block, which the process takes at the start of a unit. The process starts
 * no thread.
 *
 * One file per process in the collector's directory, named
 * <pid>.<start time>.<n>, created before main() (or in a forked child, while
 * it has one thread) and mapped; its descriptor is closed at once. Pages are
 * touched as used: a quiet thread costs nothing. The file stays when the
 * process ends: the collector ships what it holds, then removes it.
 *
 * The collector trusts nothing in it but the layout it checks at mapping: every
 * count, offset and record it reads is bounded on its side.
 */
#ifndef SM_GUARD_REGION_H
#define SM_GUARD_REGION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "agent/guard/rt.h"
#include "agent/guard/watch.h"
#include "guardcore/settings.h"

#define GREGION_MAGIC 0x31474552474d53ULL   /* "SMGREG1" */
#define GREGION_VERSION 7                  /* 2: the process's log lines; 3: its readier table; 4: a
					    * number per log line; 5: CPU time in the run-delay snapshot;
					    * 6: a hang's stack pointer in a system call (gviol.sys_sp);
					    * 7: a training process's tables (train_off), its modules */
#define GREGION_QUEUE 128                  /* violations and baselines waiting for the collector */
#define GREGION_LOCK "collector.lock"      /* the running collector holds a lock on it */
#define GREGION_TAB_SLOTS 65536            /* context slots of a guard table the collector can push */
#define GREGION_LOG 32                     /* the process's last log lines, for the collector to log */
#define GREGION_STAMP_MAX 128              /* collector.lock's contents, at most */
#define GREGION_MODS 128                   /* modules the process lists (the executable first) */

/*
 * What the running collector writes into collector.lock once it holds the lock: the layout of the
 * regions it reads. A process in auto mode uses the collector only when the stamp is its own; one
 * of another build (a library newer than the collector, or older) would be refused its region and
 * left unwatched. Writes it into buf (NUL-terminated); returns its length.
 */
static inline size_t gregion_stamp(char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "stackmine-collector magic=%llx layout=%u slot=%u threads=%u\n",
			 (unsigned long long)GREGION_MAGIC, (unsigned)GREGION_VERSION,
			 (unsigned)sizeof(struct gslot), (unsigned)GUARD_MAX_THREADS);

	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

enum { GREG_LIVE = 1, GREG_EXITED = 2 };

/* A loop's names, from the guard table (each NUL-terminated by the writer; the reader bounds them). */
struct gregion_loop {
	char symbol[256];
	uint32_t ntypes;
	char type_name[GP_MAX_TYPES][16];
};

/* A log line of the process's (its length; not NUL-terminated). seq is the line's number + 1 once
 * it is written, 0 while it is being written: a reader that finds the same number before and after
 * its copy has that line whole, on any memory model. */
struct gregion_logline {
	_Atomic uint32_t seq;
	_Atomic uint32_t len;
	char text[504];
};

/* A module of the process's, as it loaded it: for a collector that never saw the process alive. */
struct gregion_mod {
	char name[128];
	char path[512];
	char build_id[129];
	char pad[7];
	uint64_t bias, lo, hi;
};

struct gregion {
	/* the layout, written once at creation */
	uint64_t magic;
	uint32_t layout;               /* GREGION_VERSION */
	uint32_t slot_bytes;           /* sizeof(struct gslot): the same build of the agent on both sides */
	uint64_t bytes;                /* the file's */
	uint32_t max_slots;
	uint32_t ring_bytes;           /* each ring's: a power of two */
	uint64_t slots_off;            /* max_slots slots */
	uint64_t rings_off;            /* max_slots + 1 rings: slot i's, then the shared ring */
	/* the process */
	int32_t pid;
	int32_t sig;
	uint64_t starttime;            /* /proc/<pid>/stat's 22nd field: a pid used again is another process */
	uint64_t sig_cookie;           /* in the si_value of the agent's signals */
	uint64_t self_lo, self_hi;     /* the agent's code: left out of stacks */
	int64_t started_ns;            /* CLOCK_REALTIME */
	int64_t min_wait_ns, hang_ns, watchdog_ns;
	int32_t max_events, reports_per_min;
	char exe[1024], exe_name[256], build_id[129], app[256], host[256], version[256], kernel[128];
	char libc_name[64], cpu_limit[32];
	struct guard_label labels[GUARD_MAX_LABELS];
	int32_t nlabels;
	_Atomic int32_t state;         /* GREG_LIVE, GREG_EXITED (exit, exec) */
	_Atomic int32_t sampling;      /* G.sampling: the agent owns its signal (else none is sent) */
	/* the loops' names; names_gen odd while they change */
	_Atomic uint32_t names_gen;
	uint32_t nloops;
	struct gregion_loop loops[GP_MAX_LOOPS];
	struct gring shared_ring;      /* its data: the process's pointer (the collector knows where it is) */
	/* threads: slots [0, nslots) have been used */
	_Atomic uint32_t nslots;
	/* the queue: the program's threads write at head (under G.mu), the collector reads at tail */
	_Atomic uint32_t q_head, q_tail;
	struct gviol queue[GREGION_QUEUE];
	/* figures */
	_Atomic uint64_t queue_drops;  /* the queue was full (no collector, or a slow one) */
	_Atomic uint64_t baselines, units_gone, threads_over, async_requests, async_violations;
	_Atomic int64_t collector_seen;   /* CLOCK_MONOTONIC of the collector's last look, 0: never */
	/* for the pushed settings: as the process started, and its guard table's now (the process's) */
	double as_started[GSET_COUNT]; /* indexed by enum guard_setting_id */
	int64_t min_threshold_ns, fetch_ns;
	char profile_path[1200];
	uint32_t nkeys;
	uint64_t loop_key[GP_MAX_LOOPS];   /* its profile's loops (gp_loop_key): a table must have these */
	_Atomic uint64_t k_now;        /* its table's k (a double's bits) */
	unsigned char fleet_sha[32];   /* the fleet's profile its table is of; zeros: its own */
	/* the pushed block: the collector writes it, pushed_gen odd meanwhile; the process takes it */
	_Atomic uint32_t pushed_gen, pushed_taken;
	int32_t muted, sample_hz;
	int64_t min_wait_pushed_ns;
	uint32_t tab_gen;              /* a new table's image at tab_off */
	uint32_t tab_refused;          /* the process's: images it could not take */
	double tab_k;
	unsigned char tab_fleet_sha[32];
	uint64_t tab_off, tab_cap;     /* layout, written at creation: the table image's place */
	/* training: what the process learns (learnt.h) at train_off, train_cap bytes (0: it guards); the
	 * collector saves it into profile_path every save_ns and uploads it every upload_ns (0: never) */
	uint64_t train_off, train_cap;
	int64_t save_ns, upload_ns;
	double train_k, train_cut;
	/* the exit's last save: the process sets it 0 as it marks itself exited and waits (bounded) for
	 * the collector's 1, so that what it learnt is in its file once it is gone, as in the process */
	_Atomic uint32_t train_exit_saved;
	/* the lines the program's threads log (no thread of the agent's writes them to SM_GUARD_LOG):
	 * line n at log[n % GREGION_LOG] (its seq n + 1), written under the log's lock before log_head
	 * passes it; the oldest is written over. The collector logs them as its own. */
	_Atomic uint32_t log_head;
	struct gregion_logline log[GREGION_LOG];
	/* who last released each lock (watch.h): the process writes, the collector reads a hang's readier */
	_Atomic uint64_t releases[GWATCH_RELEASES];
	/* its modules, written at start and after each dlopen (mods_gen odd meanwhile): what a collector
	 * names the frames of a process with when the process ended before it read /proc/PID/maps */
	_Atomic uint32_t mods_gen;
	uint32_t nmods;
	struct gregion_mod mods[GREGION_MODS];
};

/* The process side (libsmguard.so) */

/* G.sampling, and the region's copy the collector reads before it signals. [signal] */
static inline void guard_sampling_set(int on)
{
	atomic_store(&G.sampling, on);
	if (G.region)
		atomic_store(&G.region->sampling, on);
}

/*
 * Start-up: when G.cfg.collector says so (auto: a collector holds its lock), makes the process's region
 * and moves its slots and rings there (G.region set); a training process's tables too (training: its
 * learnt.h tables at the region's train_off, for gtrain_new()). Returns 0, or -1 when the agent's
 * threads do the work in the process (the reason logged).
 */
int guard_region_open(int training);
/* A training process's exit: until the collector saved what it learnt (at most wait_ns), when a
 * collector has looked at the region lately. 0 saved, -1 not (no collector, or none in time). */
int guard_region_train_exit(int64_t wait_ns);
/* The region's training tables, or NULL (none, or no region). */
struct learnt *guard_region_learnt(void);
/* The guard table's names, for the collector's streams (at start, and when the table changes). */
void guard_region_names(const struct gtab *tab);
/* Ring index (slot i, or GUARD_MAX_THREADS: the shared ring) set up: in the region when there is
 * one, else mapped on its own. 0 or -1. */
int guard_ring_init(struct gring *r, uint32_t index);
/* At a unit's start on thread t, in a region: the clock's second, what the collector pushed since
 * the last look taken, and once a tick (G.cfg.watchdog_ns) the cgroup's throttled time (a CPU-limited
 * one's: a file read, then 1 is returned, so that the unit starts after it). [program] */
int guard_region_poll(struct gthread *t, int64_t now);
/* Queues v for the collector; a full queue drops it (counted). [program] */
void guard_region_push(const struct gviol *v);
/* In a forked child (one thread): a region of its own, holding the parent's slots as they were (the
 * child's reset follows), or, when no file can be made, the same in the child's own memory (in-process
 * work from now on): 0. -1 when no memory could be had either: the agent is inert in the child, and
 * nothing of it points into the parent's region (the child's resets must not run: they would write
 * there). */
int guard_region_child(struct gthread *t);
/* The process's modules into its region, now (at start, and after a dlopen). [program] */
void guard_region_modules(void);
/* The process exits, or execs (1), or the exec failed (0: alive again). */
void guard_region_state(int exited);

#endif
