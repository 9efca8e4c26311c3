/*
 * rt: the state the guard agent's layers share inside a program (internal to
 * libsmguard.so; docs/guard.md describes it for operators): the agent's G,
 * each thread's guard_tls and slot, violations on their way to the shipping
 * thread. What each layer does, and where each function may run, is in
 * hot.h (the program's threads and the signal handler), threads.h (the
 * agent's own threads) and runtime.h (start-up, fork).
 *
 * Threads: the program's threads run the wrappers; the agent adds a watchdog
 * and a shipping thread per process, started when first needed, with every
 * signal blocked. A thread marked `agent` (and any thread inside the agent's
 * own bookkeeping, `nest`) passes every wrapped call straight through.
 */
#ifndef SM_GUARD_RT_H
#define SM_GUARD_RT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "guardcore/config.h"
#include "agent/guard/prio.h"
#include "guardcore/profile.h"
#include "agent/guard/ring.h"

#define GUARD_VERSION "1.0"
#define GUARD_MAX_THREADS 2048
#define GUARD_TSITES 8              /* wait sites a training thread tells apart */
#define GUARD_LOOP_MIN_BLOCKS 4     /* blocking calls before a site can be a loop site */
#define GUARD_QUEUE 64              /* baselines waiting for the shipping thread */
#define GUARD_BOOST_MAX 250         /* samples at the violation rate per unit (SM_GUARD_VIOLATION_HZ) */
/* the shipping budget (threads.c, docs/guard.md): violations held until their minute closes */
#define GUARD_HELD 256                          /* candidates held, every unit type's together */
#define GUARD_HELD_HIGH (GUARD_HELD * 3 / 4)     /* over it, the fullest minute closes early */
#define GUARD_HELD_BYTES ((size_t)16 << 20)     /* their captured streams; over it a minute closes early */
#define GUARD_HELD_STREAM ((size_t)8 << 20)     /* one captured stream, at most */
#define GUARD_MINUTE_NS 60000000000LL
#define GUARD_MAX_FDS 64
#define GUARD_MAX_STACK 512         /* frames a walk may keep (SM_GUARD_MAX_FRAMES is at most this) */
/* a stack entry naming a wrapped call rather than an address: above every user address */
#define GUARD_CALL_TAG 0xfffe000000000000ULL
/* the pseudo-frame ending an async wait's stack (guard.md "Deferred requests") */
#define GUARD_ASYNC_FRAME (GUARD_CALL_TAG + 0xffffULL)
/* a stack entry naming a system call the agent does not wrap (+ its number, below 4096) */
#define GUARD_SYSCALL_TAG (GUARD_CALL_TAG + 0x10000ULL)
/* deferred requests: a thread's descriptors, in sets of GUARD_AFD_WAYS (unit.c) */
#define GUARD_AFD_SETS 64
#define GUARD_AFD_WAYS 4
/* guard: the contexts of a thread's last unit remembered, in order (unit.c "the path"), with the
 * type counts after every GUARD_PATH_SNAP of them (of up to GUARD_PATH_SNAP_TYPES types) */
#define GUARD_PATH 64
#define GUARD_PATH_SNAP 16
#define GUARD_PATH_SNAP_TYPES 16
/* the shipping budget's groups per loop: one per unit type, the untyped units', the deferred requests' */
#define GUARD_TSLOTS (GP_MAX_TYPES + 2)
#define GUARD_TSLOT_ASYNC (GP_MAX_TYPES + 1)

#define GUARD_EXPORT __attribute__((visibility("default")))
#define GUARD_LIKELY(x) __builtin_expect(!!(x), 1)
#define GUARD_UNLIKELY(x) __builtin_expect(!!(x), 0)

enum gcall_kind { GK_IO, GK_LOCK, GK_COND, GK_SEM, GK_SLEEP, GK_JOIN };

enum { GA_NONE, GA_READ, GA_SEND, GA_CONNECT, GA_ACCEPT };

/*
 * The wrapped calls: id, name, may be a loop site (loop-capable calls may delimit units, guard.md
 * "Units"), kind, a loop site only on sockets/pipes/terminals, deferred requests.
 */
#define GCALLS(X) \
	X(GC_NONE,            "",                        0, GK_IO,    0, GA_NONE) \
	X(GC_EPOLL_WAIT,      "epoll_wait",              1, GK_IO,    0, GA_NONE) \
	X(GC_EPOLL_PWAIT,     "epoll_pwait",             1, GK_IO,    0, GA_NONE) \
	X(GC_POLL,            "poll",                    1, GK_IO,    0, GA_NONE) \
	X(GC_PPOLL,           "ppoll",                   1, GK_IO,    0, GA_NONE) \
	X(GC_SELECT,          "select",                  1, GK_IO,    0, GA_NONE) \
	X(GC_PSELECT,         "pselect",                 1, GK_IO,    0, GA_NONE) \
	X(GC_ACCEPT,          "accept",                  1, GK_IO,    0, GA_ACCEPT) \
	X(GC_ACCEPT4,         "accept4",                 1, GK_IO,    0, GA_ACCEPT) \
	X(GC_RECV,            "recv",                    1, GK_IO,    0, GA_READ) \
	X(GC_RECVFROM,        "recvfrom",                1, GK_IO,    0, GA_READ) \
	X(GC_RECVMSG,         "recvmsg",                 1, GK_IO,    0, GA_READ) \
	X(GC_READ,            "read",                    1, GK_IO,    1, GA_READ) \
	X(GC_READV,           "readv",                   1, GK_IO,    1, GA_READ) \
	X(GC_COND_WAIT,       "pthread_cond_wait",       1, GK_COND,  0, GA_NONE) \
	X(GC_COND_TIMEDWAIT,  "pthread_cond_timedwait",  1, GK_COND,  0, GA_NONE) \
	X(GC_SEM_WAIT,        "sem_wait",                1, GK_SEM,   0, GA_NONE) \
	X(GC_SEM_TIMEDWAIT,   "sem_timedwait",           1, GK_SEM,   0, GA_NONE) \
	X(GC_MSGRCV,          "msgrcv",                  1, GK_IO,    0, GA_NONE) \
	X(GC_SIGWAITINFO,     "sigwaitinfo",             1, GK_IO,    0, GA_NONE) \
	X(GC_SIGTIMEDWAIT,    "sigtimedwait",            1, GK_IO,    0, GA_NONE) \
	X(GC_MUTEX_LOCK,      "pthread_mutex_lock",      0, GK_LOCK,  0, GA_NONE) \
	X(GC_MUTEX_TIMEDLOCK, "pthread_mutex_timedlock", 0, GK_LOCK,  0, GA_NONE) \
	X(GC_RWLOCK_RDLOCK,   "pthread_rwlock_rdlock",   0, GK_LOCK,  0, GA_NONE) \
	X(GC_RWLOCK_WRLOCK,   "pthread_rwlock_wrlock",   0, GK_LOCK,  0, GA_NONE) \
	X(GC_JOIN,            "pthread_join",            0, GK_JOIN,  0, GA_NONE) \
	X(GC_WRITE,           "write",                   0, GK_IO,    0, GA_SEND) \
	X(GC_WRITEV,          "writev",                  0, GK_IO,    0, GA_SEND) \
	X(GC_SEND,            "send",                    0, GK_IO,    0, GA_SEND) \
	X(GC_SENDTO,          "sendto",                  0, GK_IO,    0, GA_SEND) \
	X(GC_SENDMSG,         "sendmsg",                 0, GK_IO,    0, GA_SEND) \
	X(GC_PREAD,           "pread64",                 0, GK_IO,    0, GA_NONE) \
	X(GC_PWRITE,          "pwrite64",                0, GK_IO,    0, GA_NONE) \
	X(GC_FSYNC,           "fsync",                   0, GK_IO,    0, GA_NONE) \
	X(GC_FDATASYNC,       "fdatasync",               0, GK_IO,    0, GA_NONE) \
	X(GC_CONNECT,         "connect",                 0, GK_IO,    0, GA_CONNECT) \
	X(GC_NANOSLEEP,       "nanosleep",               0, GK_SLEEP, 0, GA_NONE) \
	X(GC_CLOCK_NANOSLEEP, "clock_nanosleep",         0, GK_SLEEP, 0, GA_NONE) \
	X(GC_USLEEP,          "usleep",                  0, GK_SLEEP, 0, GA_NONE) \
	X(GC_SLEEP,           "sleep",                   0, GK_SLEEP, 0, GA_NONE) \
	X(GC_WAITPID,         "waitpid",                 0, GK_IO,    0, GA_NONE) \
	X(GC_FLOCK,           "flock",                   0, GK_IO,    0, GA_NONE)

#define GCALL_ID(id, name, loop, kind, fd, async) id,
#define GCALL_PACK(id, name, loop, kind, fd, async) GCALL_P_##id = (loop) | (kind) << 8 | (fd) << 16 | (async) << 24,
#define GCALL_CASE(id, name, loop, kind, fd, async) \
	case id:                                     \
		return GCALL_P_##id;

enum gcall_id { GCALLS(GCALL_ID) GC_COUNT };

/*
 * What the bookkeeping reads of a call, packed in 4 bytes: GCALL_P_GC_READ, a constant of a wrapper's
 * code rather than a table line the program's work may have evicted (GCC reads a switch's table, or
 * a struct's constant, from memory even where the call is known). The fields: may be a loop site,
 * enum gcall_kind, a loop site only on sockets/pipes/terminals (read, readv), GA_*: what deferred
 * requests follow (unit.c).
 */
enum { GCALLS(GCALL_PACK) };
#define GCALL_LOOP(p) ((p) & 255)
#define GCALL_KIND(p) ((p) >> 8 & 255)
#define GCALL_FD(p) ((p) >> 16 & 255)
#define GCALL_ASYNC(p) ((p) >> 24 & 255)

/* The same for a call known only at run time. */
static inline uint32_t gcall_info(unsigned id)
{
	switch (id) {
	GCALLS(GCALL_CASE)
	default:
		return 0;
	}
}

/* A descriptor as deferred requests see it (guard.md "Deferred requests"); 32 bytes. */
struct gafd {
	int32_t fd1;              /* the descriptor + 1; 0 = free */
	uint8_t role;             /* AF_CLIENT, AF_UPSTREAM, AF_OUT, AF_SKIP */
	uint8_t known;            /* its accept or connect was seen: the role is not a guess */
	uint8_t sure;             /* not seen, but its address told its role */
	uint8_t pad;
	int32_t peer;             /* upstream: the client's descriptor + 1 it last worked for */
	int32_t loop;             /* client: the loop of the unit that read the request */
	uint32_t seq;             /* client: that unit (gthread.aseq) */
	uint32_t used;            /* the unit that last used the entry (the least recent is replaced) */
	int64_t t;                /* client: the request's first read, 0 = none in flight;
				   * upstream: the first send since its last reply, 0 = none */
};

enum { AF_FREE, AF_CLIENT, AF_UPSTREAM, AF_OUT, AF_SKIP };
extern const char *const gcall_name[GC_COUNT];   /* gcall.c */

/* One thread's state shared with the agent's threads (the watchdog, the reporter). Aligned to a
 * cache line: what a wrapped call inside a unit writes (calls to call_start) lies in one. */
struct gslot {
	_Alignas(64) _Atomic int state; /* SLOT_FREE, SLOT_LIVE, SLOT_DEAD */
	_Atomic pid_t tid;
	_Atomic uintptr_t pthread;      /* pthread_self() of the owner */
	_Atomic int64_t dead_since;
	/* the unit in flight; unit_start 0 = none */
	_Atomic int64_t unit_start;
	_Atomic int64_t agent_ns;
	_Atomic int64_t threshold;      /* of the inferred type, or the loop's; -1 = none */
	_Atomic uint32_t unit_seq;
	_Atomic uint32_t flagged_seq;   /* the watchdog saw this unit over its threshold */
	_Atomic uint32_t reported_seq;  /* this unit's stream was queued */
	_Atomic uint32_t capture_seq;   /* the watchdog asks for this unit's stack */
	_Atomic uint32_t captured_seq;  /* ... and it was taken */
	_Atomic uint32_t hang_seq;      /* the watchdog asks for the stack of the call this unit hangs in */
	int64_t asked_at;               /* the watchdog's: the call it last asked the thread in */
	_Atomic int32_t loop, type;
	_Atomic uint32_t calls;
	/* the wrapped call in progress inside the unit */
	_Atomic uint32_t call;
	_Atomic uintptr_t call_ret, call_obj;
	_Atomic int64_t call_start;
	/* the thread's CPU-time timer; timer_live is taken (1 -> 0) by whoever deletes it */
	_Atomic int timer_live;
	/* the program blocks the agent's signal on this thread; a send of the watchdog's under way */
	_Atomic int sig_blocked, sending;
	timer_t timer;
	/* the watchdog's snapshot of the thread's run delay (starve.c), under rd_gen (odd: being written) */
	_Atomic uint32_t rd_gen, rd_seq;   /* rd_seq: the thread's unit_seq when it was taken */
	_Atomic int rd_mid;                /* taken inside unit rd_seq, else after it ended */
	_Atomic pid_t rd_tid, rd_ptid;
	_Atomic int64_t rd_ns, rd_at, rd_cpu;   /* run delay, when, CPU time (schedstat) */
	_Atomic int64_t rd_pns, rd_pat, rd_pcpu;   /* the snapshot before it */
	_Atomic uint32_t rd_pseq;
	_Atomic int rd_pmid;
	/* figures */
	_Atomic uint64_t units, violations, samples;
	struct gring ring;
};

_Static_assert(offsetof(struct gslot, calls) / 64 == (offsetof(struct gslot, call_start) + 7) / 64,
	       "a wrapped call's writes to its slot lie in one cache line");

enum { SLOT_FREE, SLOT_LIVE, SLOT_DEAD };

/* A training thread's view of one wait site. */
struct gtsite {
	uintptr_t ret;
	int64_t depth;
	uint32_t calls, blocked;
	uint16_t call;
};

/* Per-thread state (initial-exec TLS: no allocation, safe in signal handlers). */
struct gthread {
	/* what a wrapped call inside a unit reads and writes: the first two cache lines (guard_tls is
	 * aligned to 64); the rest only at a unit's edges, in the handler, or when training */
	uint8_t ready;            /* tid, base and slot set up */
	uint8_t agent;            /* one of the agent's threads */
	uint8_t sync_call;        /* in a wrapped lock, condition or semaphore wait: the caller may be the
				   * program's allocator, holding its locks (no thread is created here) */
	uint8_t nest;             /* inside a wrapper's bookkeeping or the agent's work (a depth) */
	uint8_t violated;         /* guard: this unit passed its threshold */
	uint8_t shared;           /* the unit hit a context every type has: all types are candidates */
	uint8_t aloop;            /* deferred requests (unit.c): this unit's loop waits in epoll/poll/select */
	uint8_t bucket;           /* gp_bucket(calls) */
	_Atomic uint16_t cur_call;
	uint8_t path_on;          /* guard: the unit has repeated path's contexts so far (only while a
				   * unit runs: gcall_enter()'s common path reads no unit_start) */
	uint8_t path_rec;         /* guard: the unit's contexts from path.len on go into path */
	_Atomic uint32_t our_sigs, prog_sigs;
	int32_t loop;             /* loop index (guard table or training), -1 = none */
	uint32_t calls;           /* wrapped calls (contexts) in the unit so far */
	int32_t best;
	uint32_t aseq;            /* units begun (both modes) */
	int32_t acur;             /* the client's descriptor + 1 this unit works for, 0 = none */
	uintptr_t nest_cfa;
	int *errp;                /* the thread's errno: found once, not by a call per wrapped call */
	uintptr_t base;           /* stack base: loop-site depths are measured from it */
	struct gslot *slot;
	uintptr_t loop_cfa;       /* the caller's stack pointer at the loop's wait */
	const void *loop_obj;     /* the condition variable the loop's wait waited on, NULL = none */
	int64_t unit_start;       /* 0 = none */
	int64_t threshold;
	int64_t deadline;         /* guard_deadline_set(): the clock past which the unit is a violation */
	uint64_t touched;
	struct gafd *afd;         /* GUARD_AFD_SETS x GUARD_AFD_WAYS, mapped at the thread's first such unit */
	struct gpath *path;       /* guard: its slot's (unit.c), from its first unit */
	/* the rest */
	int64_t agent_ns;         /* the agent's own time in the unit (a call's check reads the deadline) */
	uint8_t exiting;
	uint8_t in_dl;            /* inside dlopen/dlclose: no stack walks from the handler */
	uint8_t unwinding;        /* a stack walk in progress: the handler must not start one */
	uint8_t prog_handlers;    /* the program's signal handlers running (the trampoline's depth): no
				   * trace cache made then */
	uint8_t prog_blocked;     /* the thread's mask blocks the agent's signal (the program's doing) */
	uint8_t mask_known;       /* prog_blocked was set from the thread's start or its mask */
	uint8_t timer_state;      /* TIMER_NONE, TIMER_IDLE, TIMER_ARMED */
	uint8_t own_fds;          /* an agent thread with a descriptor table of its own */
	uint8_t boosted;          /* the timer runs at the violation rate for the rest of this unit */
	uint16_t boost_left;      /* samples left at that rate (GUARD_BOOST_MAX per unit) */
	pid_t tid;
	int64_t period_ns;        /* the CPU-time period this thread's timer was armed with */
	uintptr_t prog_handler_sp; /* the outermost such handler's frame on the thread's own stack; 0 =
				    * on an alternate stack (signals.c) */
	uintptr_t loop_ret;
	int64_t loop_depth;
	uint32_t unit_seq;
	int32_t alisten;          /* the listening descriptor + 1 last accepted from (its port noted) */
	uint32_t hits[GP_MAX_TYPES];
	/* training */
	struct gtsite sites[GUARD_TSITES];
	uint32_t nsites;
	uint32_t nctx;
	uint32_t ctx[GP_MAX_CLASS_CONTEXTS];
	struct { uintptr_t ret; int64_t depth; int32_t loop; uint32_t id; } ctxcache[64];
};

_Static_assert(offsetof(struct gthread, afd) + sizeof(void *) <= 128, "a wrapped call's fields in two lines");

enum { TIMER_NONE, TIMER_IDLE, TIMER_ARMED, TIMER_FAILED };

extern __thread struct gthread guard_tls __attribute__((tls_model("initial-exec"), aligned(64)));

/* A violation waiting for the shipping thread. */
struct gviol {
	pid_t tid;
	uint32_t slot;
	int64_t start, end, dur, threshold;
	int32_t loop, type;
	uint32_t calls;
	uint8_t hang;
	uint8_t baseline;         /* a normal unit sampled for comparison, not a violation */
	uint8_t async;            /* a deferred request over its threshold, not a unit (guard.md "Deferred requests") */
	int32_t req;              /* async: the client's descriptor + 1 (its events carry it) */
	uint8_t rd_how;           /* GUARD_RD_*: what run_delay_ns covers (starve.c); NONE: unknown */
	uint8_t thr_known;        /* throttled_ns was measured (the cgroup has a CPU limit) */
	int64_t run_delay_ns;     /* waited for a CPU during the unit */
	int64_t throttled_ns;     /* the cgroup's throttled time over the unit */
	/* a hang asleep in a system call the agent does not wrap: its number + 1 (0: none), and where
	 * the program made it (the instruction after it) */
	int32_t sys_call;
	uint64_t sys_pc;
	uint64_t sys_sp;          /* its stack pointer: the stack above is walked from there (stream.c) */
};

enum { GUARD_RD_NONE, GUARD_RD_BEFORE, GUARD_RD_INSIDE, GUARD_RD_RATE };

/* ---- the clock ----
 * CLOCK_MONOTONIC nanoseconds. Where the kernel vouches for an invariant TSC
 * (its clocksource is the TSC, or kvm-clock on a host that keeps the TSC
 * stable: clock.c), the TSC is read directly (a third of a vDSO clock_gettime,
 * a tenth of kvm-clock's) and converted with a multiplier the agent's threads
 * calibrate against CLOCK_MONOTONIC and re-anchor every second, so that
 * readings stay on the monotonic timebase; until then, and elsewhere,
 * clock_gettime.
 *
 * ns = (tsc * mult >> 32) + off. The pair is read and written as one aligned
 * 16-byte vector access, atomic on every x86-64 processor with AVX (Intel's
 * and AMD's manuals say so), which guard_clock_init() requires: a reader
 * needs no sequence count and no retry.
 */
struct guard_clock {
	_Alignas(16) uint64_t mult;   /* ns per tick, 32.32 fixed point */
	int64_t off;                  /* with mult: the anchor */
	int ok;                       /* the TSC path is calibrated (cleared while it calibrates again) */
};

/* The agent's figures for one process (its report, its exit line). */
struct guard_counts {
	/* suppressed: sampled away by the budget; queue_drops: no room to hold a candidate */
	_Atomic uint64_t violations, suppressed, queue_drops, shipped, spooled, lost, rejected;
	_Atomic uint64_t early_closes;  /* minutes closed early: the held streams' bytes were full */
	_Atomic uint64_t baseline;      /* normal units queued as baseline streams */
	_Atomic uint64_t empty, threads_over, saves, save_errors, handed_over;
	_Atomic uint64_t units_gone;    /* ended in threads whose slots were taken again */
	_Atomic uint64_t train_units;   /* training: units learnt from */
	/* deferred requests ended (trained or checked), and those over their threshold */
	_Atomic uint64_t async_requests, async_violations;
};

struct gbudget;
struct gregion;
struct gtab;
struct gtrain;
struct shipper;
struct gsym;

struct guard_rt {
	/* what every wrapped call reads, up to cfg.min_wait_ns: G's first cache line */
	struct guard_clock clk;
	_Atomic int active;             /* 0: every wrapper passes straight through */
	int mode;                       /* GUARD_MODE_TRAIN or GUARD_MODE_GUARD once running */
	_Atomic int start_wanted;       /* threads to create at the next wrapped call that may: START_* */
	_Atomic uint8_t sampling;       /* 1 while the agent owns its signal */
	_Atomic uint16_t nfds;          /* descriptors in fds (at most GUARD_MAX_FDS) */
	_Atomic(struct gtab *) tab;     /* guard mode */
	struct guard_config cfg;
	int wd_started, ship_started;
	int starting;                   /* threads being created (outside G.mu: creation allocates) */
	pid_t pid;
	char exe[1024], exe_name[256], build_id[129], profile_path[1200];
	char host[256], app[256], kernel[128];
	char token[512];
	int64_t period_ns;              /* CPU-time per sample */
	int64_t boost_period_ns;        /* ... in a unit over its threshold (0: the same) */
	int sig;
	int sig_owned;                  /* the agent's handler is in place for sig (guard mode) */
	void *sig_cookie;               /* in the si_value of every signal the agent sends */
	uintptr_t self_lo, self_hi;     /* this library's code, left out of stacks */
	char libc_name[64];             /* module of the wrapped calls' frames */
	pthread_key_t key;
	struct gslot *slots;            /* GUARD_MAX_THREADS: rt.c's, or the region's */
	struct gring *shared_ring;      /* the waits of threads that never ran a unit: rt.c's, or the region's */
	struct gregion *region;         /* guarding with the host's collector (region.h); NULL: in the process */
	size_t region_bytes;
	pthread_mutex_t shared_mu;
	_Atomic uint32_t nslots;        /* high-water mark */
	struct gprofile *profile;       /* guard mode: what tab was built from */
	struct gtrain *train;           /* training mode */
	pthread_mutex_t mu;             /* queue, thread starts, rate limits, the states below */
	pthread_cond_t cv;              /* the shipping thread's, and exit's */
	pthread_cond_t wd_cv;           /* the watchdog's */
	int quiesce;                    /* the agent's threads step aside (handoff.c) */
	int exiting, exit_done;         /* the process exits; the shipping thread finished its work */
	volatile sig_atomic_t ship_cancel;   /* a transfer in flight gives up; streams go to the spool */
	struct gviol queue[GUARD_QUEUE];
	unsigned qhead, qlen;
	struct gbudget *budget;          /* the shipping budget (handoff.c offers, threads.c ships): handoff.c's */
	_Atomic int64_t base_next[GP_MAX_LOOPS][GUARD_TSLOTS];   /* when a unit may be a baseline again */
	_Atomic int fds[GUARD_MAX_FDS];
	struct guard_counts n;
	int64_t started_ns;                  /* CLOCK_REALTIME when the agent started in this process */
	/* settings pushed by the server (guard_apply_settings), over what the process started with */
	_Atomic int muted;                   /* guarding off: no unit begins */
	struct {                             /* the settings as started that the server may change (not a
					      * whole guard_config: 32 KB of data each process would write) */
		int64_t min_wait_ns;
		int sample_hz, reports_per_min;
	} cfg0;
	double k0;                           /* the k the profile was loaded with */
	pthread_mutex_t tab_mu;              /* G.profile and guard-table rebuilds */
	int tab_swaps;                       /* tables replaced (a new k or profile; the old ones are kept) */
	unsigned char fleet_sha[32];         /* the fleet's profile last applied */
	_Atomic uint32_t pushed_seen;        /* the region's pushed_gen last taken (guard_region_poll) */
	_Atomic int pulling;                 /* a thread takes what the collector pushed */
	uint32_t tab_gen_taken;              /* the region's table image last looked at */
};

/* every wrapped call reads these: one cache line (G is aligned to 64) */
_Static_assert(offsetof(struct guard_rt, cfg.min_wait_ns) + sizeof(int64_t) <= 64,
	       "G's hot fields must fit its first cache line");

extern struct guard_rt G;

#endif
