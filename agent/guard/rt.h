/*
 * rt: the guard agent's run time inside a program (internal to
 * libsmguard.so; docs/guard.md describes it for operators).
 *
 *   interpose.c  the wrapped C library calls; each asks gcall_begin() whether
 *                to do its bookkeeping and calls gcall_finish() after the call
 *   signals.c    the program's signal dispositions and masks as it set them,
 *                the agent's own signal out of its sight
 *   unit.c       per thread: units (loop-site waits), deferred requests, unit-type inference and
 *                violation checks (guard), contexts and classes (training),
 *                wait events with readiers
 *   sampler.c    per-thread CPU-time timers, the agent's signal, stack walks
 *   unwind.c     libunwind, loaded by the agent and kept off descriptors
 *   lazy.c       the libraries loaded when first used (shipping, symbols, JSON)
 *   train.c      the process's training tables and the profile it writes
 *   runtime.c    start-up, settings, thread slots, fork and exit, the agent's
 *                own threads (watchdog, shipping), logging
 *   report.c     violation -> trace stream: events from the rings, symbols,
 *                shipping or spooling
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
/* deferred requests: a thread's descriptors, in sets of GUARD_AFD_WAYS (unit.c) */
#define GUARD_AFD_SETS 64
#define GUARD_AFD_WAYS 4
/* the shipping budget's groups per loop: one per unit type, the untyped units', the deferred requests' */
#define GUARD_TSLOTS (GP_MAX_TYPES + 2)
#define GUARD_TSLOT_ASYNC (GP_MAX_TYPES + 1)

#define GUARD_EXPORT __attribute__((visibility("default")))
#define GUARD_LIKELY(x) __builtin_expect(!!(x), 1)
#define GUARD_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The wrapped calls. Loop-capable calls may delimit units (guard.md "Units"). */
enum gcall_id {
	GC_NONE,
	/* loop-capable waits */
	GC_EPOLL_WAIT, GC_EPOLL_PWAIT, GC_POLL, GC_PPOLL, GC_SELECT, GC_PSELECT, GC_ACCEPT, GC_ACCEPT4,
	GC_RECV, GC_RECVFROM, GC_RECVMSG, GC_READ, GC_READV, GC_COND_WAIT, GC_COND_TIMEDWAIT, GC_SEM_WAIT,
	GC_SEM_TIMEDWAIT, GC_MSGRCV, GC_SIGWAITINFO, GC_SIGTIMEDWAIT,
	/* other waits */
	GC_MUTEX_LOCK, GC_MUTEX_TIMEDLOCK, GC_RWLOCK_RDLOCK, GC_RWLOCK_WRLOCK, GC_JOIN, GC_WRITE, GC_WRITEV,
	GC_SEND, GC_SENDTO, GC_SENDMSG, GC_PREAD, GC_PWRITE, GC_FSYNC, GC_FDATASYNC, GC_CONNECT, GC_NANOSLEEP,
	GC_CLOCK_NANOSLEEP, GC_USLEEP, GC_SLEEP, GC_WAITPID, GC_FLOCK,
	GC_COUNT
};

enum gcall_kind { GK_IO, GK_LOCK, GK_COND, GK_SEM, GK_SLEEP, GK_JOIN };

struct gcall_info {
	const char *name;
	uint8_t loop;      /* may be a loop site */
	uint8_t kind;      /* enum gcall_kind */
	uint8_t fd;        /* read/readv: a loop site only on sockets, pipes and terminals */
	uint8_t async;     /* GA_*: what deferred requests follow (unit.c) */
};

enum { GA_NONE, GA_READ, GA_SEND, GA_CONNECT, GA_ACCEPT };

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
extern const struct gcall_info gcall_info[GC_COUNT];

/* One thread's state shared with the agent's threads (the watchdog, the reporter). */
struct gslot {
	_Atomic int state;              /* SLOT_FREE, SLOT_LIVE, SLOT_DEAD */
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
	_Atomic int64_t rd_ns, rd_at;
	_Atomic int64_t rd_pns, rd_pat;    /* the snapshot before it */
	_Atomic uint32_t rd_pseq;
	_Atomic int rd_pmid;
	/* figures */
	_Atomic uint64_t units, violations, samples;
	struct gring ring;
};

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
	uint8_t ready;            /* tid, base and slot set up */
	uint8_t agent;            /* one of the agent's threads */
	uint8_t exiting;
	uint8_t in_dl;            /* inside dlopen/dlclose: no stack walks from the handler */
	uint8_t unwinding;        /* a stack walk in progress: the handler must not start one */
	uint8_t prog_blocked;     /* the thread's mask blocks the agent's signal (the program's doing) */
	uint8_t mask_known;       /* prog_blocked was set from the thread's start or its mask */
	uint8_t walks;            /* walks made without libunwind's per-thread cache (sampler.c) */
	uint8_t timer_state;      /* TIMER_NONE, TIMER_IDLE, TIMER_ARMED */
	uint8_t violated;         /* guard: this unit passed its threshold */
	uint8_t own_fds;          /* an agent thread with a descriptor table of its own */
	uint8_t sync_call;        /* in a wrapped lock, condition or semaphore wait: the caller may be the
				   * program's allocator, holding its locks (no thread is created here) */
	int64_t period_ns;        /* the CPU-time period this thread's timer was armed with */
	uint8_t boosted;          /* the timer runs at the violation rate for the rest of this unit */
	uint16_t boost_left;      /* samples left at that rate (GUARD_BOOST_MAX per unit) */
	uint32_t nest;            /* inside a wrapper's bookkeeping or the agent's work */
	uintptr_t nest_cfa;
	pid_t tid;
	uintptr_t base;           /* stack base: loop-site depths are measured from it */
	struct gslot *slot;
	_Atomic uint16_t cur_call;
	_Atomic uint32_t our_sigs, prog_sigs;
	/* the unit */
	int32_t loop;             /* loop index (guard table or training), -1 = none */
	uintptr_t loop_ret;
	int64_t loop_depth;
	uintptr_t loop_cfa;       /* the caller's stack pointer at the loop's wait */
	const void *loop_obj;     /* the condition variable the loop's wait waited on, NULL = none */
	int64_t unit_start;       /* 0 = none */
	int64_t agent_ns;
	int64_t threshold;
	uint32_t unit_seq;
	uint32_t calls;           /* wrapped calls (contexts) in the unit so far */
	uint32_t bucket;          /* gp_bucket(calls) */
	int32_t best;
	uint64_t touched;
	uint8_t shared;           /* the unit hit a context every type has: all types are candidates */
	uint32_t hits[GP_MAX_TYPES];
	/* training */
	struct gtsite sites[GUARD_TSITES];
	uint32_t nsites;
	uint32_t nctx;
	uint32_t ctx[GP_MAX_CLASS_CONTEXTS];
	struct { uintptr_t ret; int64_t depth; int32_t loop; uint32_t id; } ctxcache[64];
	/* deferred requests (unit.c): only in units of an epoll, poll or select loop */
	uint8_t aloop;            /* this unit's loop waits in epoll/poll/select */
	uint32_t aseq;            /* units begun (both modes) */
	int32_t acur;             /* the client's descriptor + 1 this unit works for, 0 = none */
	int32_t alisten;          /* the listening descriptor + 1 last accepted from (its port noted) */
	struct gafd *afd;         /* GUARD_AFD_SETS x GUARD_AFD_WAYS, mapped at the thread's first such unit */
};

enum { TIMER_NONE, TIMER_IDLE, TIMER_ARMED, TIMER_FAILED };

extern __thread struct gthread guard_tls __attribute__((tls_model("initial-exec")));

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
};

enum { GUARD_RD_NONE, GUARD_RD_BEFORE, GUARD_RD_INSIDE, GUARD_RD_RATE };

/* The guard table: the profile's loops and contexts at this process's addresses. */
struct gtab_site {            /* what every loop-capable call compares: a few cache lines for all loops */
	uintptr_t ret;            /* 0 = in a module not loaded (never matches) */
	int64_t depth;
	uint64_t all_types;       /* a bit per unit type: a context of every type tells no type apart */
};

struct gtab_loop {
	int64_t threshold;
	int64_t async_thr;        /* deferred requests begun in this loop; -1 = none */
	uint32_t ntypes;
	int64_t type_thr[GP_BUCKETS][GP_MAX_TYPES];   /* by the unit's size so far */
	char type_name[GP_MAX_TYPES][16];
	char symbol[256];
};

struct gtab_ctx {
	uintptr_t ret;            /* 0 = free */
	int64_t depth;
	int32_t loop;
	uint64_t mask;            /* the unit types having this context */
};

struct gtab {
	uint32_t nloops;
	uint32_t ctx_mask;        /* slots - 1 */
	struct gtab_ctx *ctx;
	struct gtab_site sites[GP_MAX_LOOPS];
	uint32_t unresolved;      /* contexts and loops in modules not loaded yet */
	struct gtab_loop loops[GP_MAX_LOOPS];
};

/* ---- the clock ----
 * CLOCK_MONOTONIC nanoseconds. Where the kernel itself keeps time with an
 * invariant TSC, the TSC is read directly (a third of a vDSO clock_gettime)
 * and converted with a multiplier the agent's threads calibrate against
 * CLOCK_MONOTONIC and re-anchor every second, so that readings stay on the
 * monotonic timebase; until then, and elsewhere, clock_gettime.
 */
struct guard_clock {
	_Atomic uint32_t seq;     /* odd while the anchor is being changed */
	int ok;                   /* the TSC path is calibrated */
	uint64_t base_tsc;
	int64_t base_ns;
	uint64_t mult;            /* ns per tick, 32.32 fixed point */
};

struct gtrain;
struct shipper;
struct gsym;

struct guard_rt {
	/* what every wrapped call reads, up to cfg.min_wait_ns: G's first cache line */
	struct guard_clock clk;
	_Atomic int active;             /* 0: every wrapper passes straight through */
	int mode;                       /* GUARD_MODE_TRAIN or GUARD_MODE_GUARD once running */
	_Atomic int sampling;           /* 1 while the agent owns its signal */
	_Atomic int nfds;               /* descriptors in fds */
	_Atomic(struct gtab *) tab;     /* guard mode */
	struct guard_config cfg;
	int wd_started, ship_started;
	int starting;                   /* threads being created (outside G.mu: creation allocates) */
	_Atomic int start_wanted;       /* threads to create at the next wrapped call that may: START_* */
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
	struct gslot slots[GUARD_MAX_THREADS];
	struct gring shared_ring;       /* the waits of threads that never ran a unit */
	pthread_mutex_t shared_mu;
	_Atomic uint32_t nslots;        /* high-water mark */
	struct gprofile *profile;       /* guard mode: what tab was built from */
	struct gtrain *train;           /* training mode */
	pthread_mutex_t mu;             /* queue, thread starts, rate limits, the states below */
	pthread_cond_t cv;              /* the shipping thread's, and exit's */
	pthread_cond_t wd_cv;           /* the watchdog's */
	int quiesce;                    /* the agent's threads step aside (threads.c) */
	int exiting, exit_done;         /* the process exits; the shipping thread finished its work */
	volatile sig_atomic_t ship_cancel;   /* a transfer in flight gives up; streams go to the spool */
	struct gviol queue[GUARD_QUEUE];
	unsigned qhead, qlen;
	/* the shipping budget (threads.c), under mu: per unit type its minute's priority sample;
	 * held[i] a candidate (held_v[i] the violation, held_tag[i] bumped whenever it changes) */
	struct prio_group pg[GP_MAX_LOOPS][GUARD_TSLOTS];
	struct prio_item held[GUARD_HELD];
	struct gviol held_v[GUARD_HELD];
	uint32_t held_tag[GUARD_HELD];
	unsigned held_new;              /* candidates kept since the shipping thread last looked */
	int held_flush;                 /* every minute closes now (the budget changed) */
	uint64_t prng;                  /* the draws u of the sampling: seeded per process */
	_Atomic int64_t base_next[GP_MAX_LOOPS][GUARD_TSLOTS];   /* when a unit may be a baseline again */
	_Atomic int fds[GUARD_MAX_FDS];
	struct {
		/* suppressed: sampled away by the budget; queue_drops: no room to hold a candidate */
		_Atomic uint64_t violations, suppressed, queue_drops, shipped, spooled, lost, rejected;
		_Atomic uint64_t early_closes;  /* minutes closed early: the held streams' bytes were full */
		_Atomic uint64_t baseline;      /* normal units queued as baseline streams */
		_Atomic uint64_t empty, threads_over, saves, save_errors, handed_over;
		_Atomic uint64_t units_gone;    /* ended in threads whose slots were taken again */
		_Atomic uint64_t train_units;   /* training: units learnt from */
		/* deferred requests ended (trained or checked), and those over their threshold */
		_Atomic uint64_t async_requests, async_violations;
	} n;
	int64_t started_ns;                  /* CLOCK_REALTIME when the agent started in this process */
	/* settings pushed by the server (guard_apply_settings), over what the process started with */
	_Atomic int muted;                   /* guarding off: no unit begins */
	struct guard_config cfg0;            /* the settings as started */
	double k0;                           /* the k the profile was loaded with */
	pthread_mutex_t tab_mu;              /* G.profile and guard-table rebuilds */
	int tab_swaps;                       /* tables replaced (a new k or profile; the old ones are kept) */
	unsigned char fleet_sha[32];         /* the fleet's profile last applied */
};

extern struct guard_rt G;

/* ---- the real functions, for the agent's own use past its wrappers (signals.c, interpose.c) ---- */
int guard_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
int guard_real_sigmask(int how, const sigset_t *set, sigset_t *old);
int guard_real_close(int fd);
int guard_real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
int guard_real_pthread_join(pthread_t th, void **ret);
int guard_real_nanosleep(const struct timespec *req, struct timespec *rem);

/* ---- the clock (G.clk, see struct guard_clock) ---- */
int64_t guard_mono_ns(void);
/* The calibration step, from the agent's threads (at most once a second does something). */
void guard_clock_tick(void);

static inline int64_t guard_now(void)
{
	if (GUARD_LIKELY(G.clk.ok)) {
		uint32_t s;
		int64_t ns;

		do {
			s = atomic_load_explicit(&G.clk.seq, memory_order_acquire);
			ns = G.clk.base_ns +
			     (int64_t)(((unsigned __int128)(__builtin_ia32_rdtsc() - G.clk.base_tsc) * G.clk.mult) >> 32);
			atomic_thread_fence(memory_order_acquire);
		} while ((s & 1) || s != atomic_load_explicit(&G.clk.seq, memory_order_relaxed));
		return ns;
	}
	return guard_mono_ns();
}

/* ---- runtime.c ---- */
void guard_thread_setup(struct gthread *t);
struct gslot *guard_slot_of(struct gthread *t);
/* A line for SM_GUARD_LOG; from a program's thread it is queued for the shipping thread. */
void guard_log(const char *msg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes the queued lines (agent threads only); whether any wait. */
void guard_log_flush(void);
int guard_log_pending(void);
int guard_fd_register(int fd);
/* An agent thread's new descriptor: moved out of the program's range and registered. Returns the fd to use. */
int guard_fd_adopt(int fd);
void guard_fd_unregister(int fd);
int guard_fd_is_ours(int fd);
/* Called by the pthread_create trampoline and the key destructor. */
void guard_thread_exit(void *slot);
void guard_on_dlopen(void);

/* ---- threads.c: the agent's own threads ---- */
void guard_threads_init(void);
/* Start the watchdog, the shipping thread, unless it runs. On a program thread inside a wrapped lock,
 * condition or semaphore wait (t->sync_call) the start waits for the next wrapped call of any
 * program thread that is not one (guard_start_wanted()): creating a thread allocates. */
void guard_start_watchdog(void);
void guard_start_shipper(void);
#define START_WATCHDOG 1
#define START_SHIPPER 2
void guard_start_wanted(void);
/* Wakes the shipping thread (a log line waits). */
void guard_log_wake(void);
/* A violation, offered to its unit type's priority sample of the minute (any thread). */
void guard_enqueue(const struct gviol *v);
/* A new budget (reports_per_min): every unit type's minute closes first, with the tau known so far,
 * so that no minute mixes two budgets. Takes G.mu. */
void guard_budget_set(int reports_per_min);
/* A normal unit of loop L and type ended at end: whether it takes its unit type's baseline interval
 * (60 s / SM_GUARD_BASELINE_PER_MIN), which then closes. Any thread, lock-free. */
int guard_baseline_claim(int32_t L, int32_t type, int64_t end);
/* Queues the unit that took the interval (v->baseline set); never takes more than half the queue. */
void guard_baseline_enqueue(const struct gviol *v);
/* Stops the agent's threads, calls fn(arg) (again while it fails with EINVAL, for a moment: a thread
 * joined leaves the process a little later), starts them again. fn's result, errno kept; -1 with
 * EINVAL when the agent had no thread running. */
int guard_threads_aside(int (*fn)(void *), void *arg);
/* At exit, on the exiting thread: the shipping thread saves, spools and reports; waits for it. */
void guard_threads_exit(void);
void guard_threads_reset_child(void);

/* ---- sampler.c ---- */
/* Installs the agent's signal (guard mode). Returns 0 or -1. */
int guard_sampler_init(void);
/* The agent's own signal, from the trampoline (signals.c): a CPU sample or the watchdog's request. */
void guard_sampler_signal(siginfo_t *si, void *uc);
void guard_timer_arm(struct gthread *t);
void guard_timer_disarm(struct gthread *t);
/* The end of a unit whose samples were boosted: back to the normal period (one system call). */
void guard_timer_unboost(struct gthread *t);
void guard_timer_delete(struct gthread *t);
/* The program ignores the agent's signal: no timer, no request until it takes the signal back. */
void guard_sampler_pause(void);
void guard_sampler_resume(void);
/* The watchdog asks the thread of s, asleep in a wrapped call, for its stack. */
void guard_sampler_request(struct gslot *s);
/* A wait of a thread that never ran a unit, into the ring all such threads share. */
void guard_record_shared(struct gthread *t, int64_t ts, int64_t dur, int64_t readier, uint16_t call);
/* Records the stack of the current thread (detection of a violation, unit end fallback). */
void guard_record_here(struct gthread *t, int kind, int64_t ts, int64_t dur, int64_t readier, uint16_t call,
		       uint16_t flags);

/* ---- starve.c: run delay and cgroup throttling per unit ---- */
/* The watchdog's tick: snapshots of the threads' run delay, the cgroup's throttled time. */
void guard_starve_tick(int64_t now);
/* v's run_delay_ns, throttled_ns (and rd_how): at the end of the unit, on its thread (unit.c), or for
 * a unit still in flight, on the watchdog. */
void guard_starve_unit_end(struct gthread *t, struct gviol *v);
void guard_starve_hang(struct gslot *s, struct gviol *v);
/* The CPU limit of the process's cgroup in CPUs ("0.1"), or NULL when none was found (so far). */
const char *guard_starve_cpu_limit(void);
void guard_starve_reset_child(void);
/* The host's load average over a minute, as /proc/loadavg writes it, into out: 0, or -1. */
int guard_starve_load1(char *out, size_t outlen);

/* ---- signals.c ---- */
/* Whether a signal is one the agent sent (its cookie). Async-signal-safe. */
int guard_sig_ours(const siginfo_t *si);
/* The trampoline for the agent's signal, with what the program inherited as its view. 0 or -1. */
int guard_sig_install(void);
/* Takes back the agent's signals pending for this thread (its mask blocks them). */
void guard_sig_drain(void);
/* Sets t->prog_blocked from the thread's mask. */
void guard_sig_thread_mask(struct gthread *t);
/* After fork, in the child: a lock of the agent as new (runtime.c, "fork"). Returns whether it was
 * held at the fork, by a thread the child does not have: what it guards may be half changed. */
int guard_lock_reset_child(pthread_mutex_t *m);
/* After fork, in the child: the lock of sigaction() as new. */
void guard_sig_reset_child(void);
/* glibc's SIGSETXID (33) gets a handler at a process's first pthread_create(), and a handler turns
 * into SIG_DFL across exec: a program that inherited it ignored and started no thread of its own
 * must pass it on ignored, whatever threads the agent started. guard_sig_at_start() notes the
 * disposition (the constructor, before any thread of the agent), guard_sig_program_threads() that
 * the program starts threads; guard_sig_exec_prepare() puts SIG_IGN back just before an exec
 * (returns 1 when it did), guard_sig_exec_failed(1) the handler again when the exec failed. */
void guard_sig_at_start(void);
void guard_sig_program_threads(void);
int guard_sig_exec_prepare(void);
void guard_sig_exec_failed(int prepared);

/* The signal counters of the calling thread, to tell a call interrupted by the agent's signal alone
 * (it is resumed) from one the program's handler interrupted (EINTR stays). */
struct sigsnap {
	uint32_t ours, prog;
};

static inline void guard_sigsnap_take(struct sigsnap *s)
{
	s->ours = atomic_load_explicit(&guard_tls.our_sigs, memory_order_relaxed);
	s->prog = atomic_load_explicit(&guard_tls.prog_sigs, memory_order_relaxed);
}

/* True when only the agent's signals came since the snapshot (which moves on). */
static inline int guard_sigsnap_ours_only(struct sigsnap *s)
{
	uint32_t ours = atomic_load_explicit(&guard_tls.our_sigs, memory_order_relaxed);

	if (ours == s->ours || atomic_load_explicit(&guard_tls.prog_sigs, memory_order_relaxed) != s->prog)
		return 0;
	s->ours = ours;
	return 1;
}

/* ---- unit.c: the bookkeeping of the wrappers ---- */
struct gcall {
	uintptr_t ret, cfa;
	const void *obj;
	int64_t t0;
	long nvcsw;           /* training: voluntary switches at entry */
	long res;             /* what the call returned, where deferred requests need it (-1 = failed) */
	uint16_t id;
	int8_t loopsite;      /* this call is the thread's loop wait */
	int fd;
	struct sigsnap sigs;
};

int gcall_enter(struct gthread *t, struct gcall *c, int id, uintptr_t ret, uintptr_t cfa, const void *obj,
		int fd);
/* After the real call: unit boundaries, wait events; restores errno. */
void gcall_finish(struct gcall *c, int failed);
/* The readier tables: who last released a lock, signalled a condition, posted a semaphore. */
void guard_note_release(const void *obj);
pid_t guard_last_release(const void *obj);

static inline int gcall_begin(struct gcall *c, int id, uintptr_t ret, uintptr_t cfa, const void *obj, int fd)
{
	struct gthread *t = &guard_tls;

	if (GUARD_UNLIKELY(!atomic_load_explicit(&G.active, memory_order_relaxed) || t->agent))
		return 0;
	if (GUARD_UNLIKELY(t->nest)) {
		/* a signal handler runs deeper on the stack; a shallower call means the last
		 * one never returned (longjmp out of it) and its bookkeeping is stale */
		if (cfa < t->nest_cfa)
			return 0;
		t->nest = 0;
	}
	return gcall_enter(t, c, id, ret, cfa, obj, fd);
}

/* After fork, in the child. */
void guard_unit_reset_child(struct gthread *t);
/* The program closed fd: the calling thread's deferred-request entry of it goes. */
void guard_async_close(int fd);

/* ---- train.c ---- */
struct gtrain *gtrain_new(void);
/* Registers a thread's loop site; returns its index or -1 (table full). */
int32_t gtrain_loop(struct gtrain *tr, uintptr_t ret, int64_t depth, uint16_t call);
/* Context id of (loop, ret, depth), capturing its call path when new; UINT32_MAX when full. */
uint32_t gtrain_context(struct gtrain *tr, int32_t loop, uintptr_t ret, int64_t depth, uint16_t call);
void gtrain_unit(struct gtrain *tr, int32_t loop, const uint32_t *ctx, uint32_t nctx, uint32_t calls,
		 int64_t dur_ns);
/* A deferred request of loop took dur_ns (guard.md "Deferred requests"). */
void gtrain_async(struct gtrain *tr, int32_t loop, int64_t dur_ns);
/* Writes what was learnt since the last save into the profile file. Agent threads only. */
int gtrain_save(struct gtrain *tr, char *err, size_t errlen);
/* After fork, in the child: the parent saves what it learnt; the child starts from zero. */
void gtrain_reset_child(struct gtrain *tr);
/* What this process learnt (every save so far) as a profile file's text, into out: 0, 1 when nothing
 * was saved yet, -1 on failure. Agent threads only. */
int gtrain_own_write(struct gtrain *tr, struct buf *out);

/* ---- report.c ---- */
/* Builds the violation's stream and ships it (shipping thread only). */
void guard_report(const struct gviol *v);
/* The shipping budget's candidates (shipping thread only), by their index i in G.held: captures
 * v's stream as it stands, as the violation tag (0, or -1: not captured, counted as lost);
 * whether i holds tag's capture; the bytes i holds; ships it with its weight and frees it. */
int guard_capture(uint32_t i, uint32_t tag, const struct gviol *v);
int guard_captured(uint32_t i, uint32_t tag);
size_t guard_captured_bytes(uint32_t i);
void guard_capture_ship(uint32_t i, double weight);
/* At exit (shipping thread), around the shipping of the candidates: with begin, a connection of
 * their own to a server that answered the last request (EXIT_HELD_MS at most, then the spool);
 * without, closes it. */
void guard_report_exit_held(int begin);
/* Periodic work of the shipping thread: drain the spool, release idle symbol tables. */
void guard_report_tick(int64_t now);
/* The process's report to the server (docs/wire-format.md "Agent reports"); shipping thread only. */
void guard_report_self(void);
/* At exit (shipping thread): training's upload when upload is set, and the last report, but only to a
 * server that answered the last request, and within EXIT_NET_MS. */
void guard_report_exit(int upload);
/* The shipping thread ends: its connections and spool (in its own descriptor table) go with it. */
void guard_report_thread_end(void);
/* Applies the settings in a report's answer ({"ok": true, "settings": {...}}, docs/fleet.md);
 * a setting absent is the one the process started with. Shipping thread only. */
void guard_apply_settings(const char *answer, size_t len);
/* Training: what this process learnt, uploaded to the server (POST /api/v1/profiles). Shipping thread only. */
void guard_profile_upload(void);
/* Guarding: the fleet's profile of this build fetched and, when it has the same loops, guarded with
 * from now on (runtime.c's guard_profile_swap). Shipping thread only. */
void guard_profile_refresh(void);
/* Takes a profile text as the one to guard with (same build, same loops), keeping the current k. */
void guard_profile_swap(const char *text, size_t len);
/* Units ended in this process so far (every thread's, training's too). */
uint64_t guard_units(void);
/* After fork, in the child: forget the parent's shipper and symbolizer (not freed: shared pages). */
void guard_report_reset_child(void);

/* ---- guard table (unit.c) ---- */
struct gtab *gtab_build(const struct gprofile *p, char *err, size_t errlen);
void gtab_free(struct gtab *tab);

#endif
