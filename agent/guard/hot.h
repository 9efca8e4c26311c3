/*
 * hot: the agent's lowest layer, what runs on the program's own threads and
 * in the agent's signal handler. The agent has three layers, each calling only
 * those below it:
 *
 *   runtime.h   start-up and exit (runtime.c), fork (fork.c): wires the rest
 *   threads.h   the agent's own threads: watchdog and shipping (threads.c),
 *               trace streams and the server (report.c), settings the server
 *               pushes (pushed.c)
 *   hot.h       this header: the wrappers (interpose.c), their bookkeeping
 *               (unit.c, train.c, gtab.c), signals and samples (signals.c,
 *               sampler.c), per-thread slots and descriptors (slots.c), the
 *               clock, the log, run delay (starve.c), and the handoff to the
 *               agent's threads (handoff.c) or to the host's collector
 *               (region.c)
 *
 * beside the leaves they all use: rings, unwinding, modules, symbols, lazy
 * loading, priority sampling, the shipping budget, streams (ring.h unwind.h
 * modmap.h symbolize.h lazy.h prio.h budget.h stream.h), which the host's
 * collector (collect.h, in sm-agent) shares. rt.h holds the state every layer
 * shares.
 *
 * Rules of this layer. Every declaration below is marked with where it may
 * run:
 *
 *   [signal]   may run inside the agent's signal handler, which interrupts the
 *              program anywhere (inside malloc, holding any lock): no lock, no
 *              allocation, no stdio, no call that is not async-signal-safe
 *              (signal-safety(7)); only initial-exec TLS (guard_tls), atomics,
 *              the thread's own ring, and libunwind's local walk of a
 *              registered thread. errno is saved and restored.
 *   [program]  runs on a program's thread inside a wrapper, never in the
 *              handler: may take the agent's short locks (G.mu, G.tab_mu,
 *              G.shared_mu, the log's), but never call into the program's
 *              allocator or create a thread while holding one, nor create a
 *              thread inside a wrapped lock, condition or semaphore wait
 *              (gthread.sync_call: the caller may be the allocator holding its
 *              own locks). A descriptor the agent opens in the program's table
 *              is registered (guard_fd_register) for as long as it lives. The
 *              program's errno and signal mask are what it left them.
 *   [agent]    only on the agent's own threads (every signal blocked, a
 *              descriptor table of their own): may block, allocate, do I/O.
 *
 * A section's mark holds for each of its functions unless one says otherwise;
 * what [signal] allows, [program] and [agent] may do too.
 */
#ifndef SM_GUARD_HOT_H
#define SM_GUARD_HOT_H

#include "agent/guard/rt.h"

#include <emmintrin.h>

struct buf;

/* ---- the real functions, for the agent's own use past its wrappers (signals.c, interpose.c) ---- */
int guard_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
int guard_real_sigmask(int how, const sigset_t *set, sigset_t *old);
int guard_real_close(int fd);
int guard_real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
int guard_real_pthread_join(pthread_t th, void **ret);
int guard_real_nanosleep(const struct timespec *req, struct timespec *rem);
/* After fork, in the child: the parent's threads being started are not the child's [signal]. */
void guard_interpose_reset_child(void);

/* ---- clock.c (G.clk, see struct guard_clock) [signal] ---- */
int64_t guard_mono_ns(void);
/* Start-up: whether the TSC path may be used, and its first calibration. */
void guard_clock_init(void);
/* The calibration step, from the agent's threads (at most once a second does something). */
void guard_clock_tick(void);
/* The same from a program's thread, at now: one load unless a second has passed. [program] */
void guard_clock_poll(int64_t now);
/* Which clock the agent reads: "tsc" (the kernel's clocksource), "kvm-tsc" (the TSC a KVM host
 * keeps stable under kvm-clock) or "monotonic" (clock_gettime). Static storage. */
const char *guard_clock_name(void);
/* How often the TSC clock was calibrated again after it strayed from the monotonic clock. */
uint64_t guard_clock_restarts(void);
/* After fork, in the child: no re-anchoring in progress, no restart counted. */
void guard_clock_reset_child(void);

/* The clock on the TSC: only where G.clk.ok. One 16-byte load takes mult and off together. */
static inline int64_t guard_now_tsc(void)
{
	__m128i a = *(const volatile __m128i *)(const volatile void *)&G.clk.mult;
	uint64_t mult = (uint64_t)_mm_cvtsi128_si64(a);
	int64_t off = _mm_cvtsi128_si64(_mm_unpackhi_epi64(a, a));

	return (int64_t)(((unsigned __int128)__builtin_ia32_rdtsc() * mult) >> 32) + off;
}

static inline int64_t guard_now(void)
{
	if (GUARD_LIKELY(G.clk.ok))
		return guard_now_tsc();
	return guard_mono_ns();
}

/* The clock past which t's unit is a violation (INT64_MAX: never), so that a call's check is one
 * comparison: set wherever one of its terms changes (the unit's start, its threshold, the agent's
 * own time in it, a violation found). */
static inline void guard_deadline_set(struct gthread *t)
{
	int64_t d;

	if (t->violated || t->threshold < 0 || __builtin_add_overflow(t->unit_start, t->agent_ns, &d) ||
	    __builtin_add_overflow(d, t->threshold, &d))
		d = INT64_MAX;
	t->deadline = d;
}

/* ---- slots.c: threads, their slots, the agent's descriptors [program] ---- */
void guard_thread_setup(struct gthread *t);
struct gslot *guard_slot_of(struct gthread *t);
int guard_fd_register(int fd);
/* An agent thread's new descriptor: moved out of the program's range and registered. Returns the fd to use. */
int guard_fd_adopt(int fd);
void guard_fd_unregister(int fd);
int guard_fd_is_ours(int fd);
/* Called by the pthread_create trampoline and the key destructor. */
void guard_thread_exit(void *slot);
/* Units ended in this process so far (every thread's, training's too). */
uint64_t guard_units(void);
/* After fork, in the child: a lock of the agent as new. Returns whether it was held at the fork, by a
 * thread the child does not have: what it guards may be half changed. */
int guard_lock_reset_child(pthread_mutex_t *m);
/* After fork, in the child: every slot but t's free, the agent's descriptors closed. */
void guard_slots_reset_child(struct gthread *t);

/* ---- log.c: SM_GUARD_LOG [program] ---- */
/* The log's sink (start-up). */
void guard_log_start(void);
/* A line for SM_GUARD_LOG; from a program's thread it is queued for the shipping thread. */
void guard_log(const char *msg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes the queued lines [agent]; whether any wait. */
void guard_log_flush(void);
int guard_log_pending(void);
void guard_log_reset_child(void);

/* ---- handoff.c: where the program's threads meet the agent's [program] ---- */
/* Start-up: the locks and conditions, and the agent's threads' main functions (threads.h). */
void guard_threads_init(void *(*watchdog_main)(void *), void *(*ship_main)(void *));
/* Waits on cv (with G.mu held) until the CLOCK_MONOTONIC time until at most. */
void guard_cv_wait(pthread_cond_t *cv, int64_t until);
/* Start the watchdog, the shipping thread, unless it runs. On a program thread inside a wrapped lock,
 * condition or semaphore wait (t->sync_call) the start waits for the next wrapped call of any
 * program thread that is not one (guard_start_wanted()): creating a thread allocates. */
void guard_start_watchdog(void);
void guard_start_shipper(void);
#define START_WATCHDOG 1
#define START_SHIPPER 2
void guard_start_wanted(void);
/* A violation, offered to its unit type's priority sample of the minute (any thread). */
void guard_enqueue(const struct gviol *v);
/* A new budget (reports_per_min): every unit type's minute closes first, with the tau known so far,
 * so that no minute mixes two budgets. Takes G.mu. */
void guard_budget_set(int reports_per_min);
/* Under G.mu: the minutes over at now close (every open one with all). */
void guard_budget_close(int64_t now, int all);
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
/* The same from the program's exiting thread (the destructor, the exit gate): nothing in a child of
 * vfork(), an agent thread or an inert agent. Safe to call twice. */
void guard_exit_here(void);
/* Registers (once) an exit handler that does the exit's work ahead of the program's exit handlers
 * registered before it: OpenSSL's, when the program initialised OpenSSL before libcurl was loaded
 * (lazy_crypto_loaded() then); its cleanup would otherwise free what the shipping thread uses. */
void guard_exit_gate(void);
void guard_threads_reset_child(void);

/* ---- sampler.c: CPU samples and stack walks [signal] ---- */
/* Start-up, after guard_sig_install(): the C library's signal-return trampoline (0 = unknown), the
 * frame every walk from the handler passes. */
void guard_sampler_init(uintptr_t sig_restorer);
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
/* A wait of a thread that never ran a unit, into the ring all such threads share. [program] */
void guard_record_shared(struct gthread *t, int64_t ts, int64_t dur, int64_t readier, uint16_t call);
/* Records the stack of the current thread (detection of a violation, unit end fallback). [program] */
void guard_record_here(struct gthread *t, int kind, int64_t ts, int64_t dur, int64_t readier, uint16_t call,
		       uint16_t flags);
/* libunwind's trace cache for thread t (unwind_cache_make()), where t may make it: not inside a
 * wrapped lock, condition or semaphore wait (its key may allocate), a loader call, a walk or a
 * signal handler of the program's that the trampoline runs (t->prog_handlers; one the thread left
 * by siglongjmp is over once it runs above the handler's frame). Its
 * locks on the way are the agent's calls. Returns the nanoseconds it took (0: nothing done).
 * Callers test unwind_want_cache first (or make it for a fork). [program] */
int64_t guard_trace_cache(struct gthread *t);

/* ---- starve.c: run delay and cgroup throttling per unit [program]; the tick [agent] ---- */
/* The watchdog's tick: snapshots of the threads' run delay, the cgroup's throttled time. */
void guard_starve_tick(int64_t now);
/* Finds the process's cgroup with a CPU limit, the first time only (allocates nothing; reads
 * /proc/self/cgroup and mountinfo). The watchdog's first tick, or the region's making. */
void guard_starve_find(void);
/* The cgroup's throttled time now, into the history (one writer at a time: another returns at once).
 * 1 when it read the cgroup's file. */
int guard_starve_sample(int64_t now);
/* v's run_delay_ns, throttled_ns (and rd_how): at the end of the unit, on its thread (unit.c), or for
 * a unit still in flight, on the watchdog. */
void guard_starve_unit_end(struct gthread *t, struct gviol *v);
void guard_starve_hang(struct gslot *s, struct gviol *v);
/* The CPU limit of the process's cgroup in CPUs ("0.1"), or NULL when none was found (so far). */
const char *guard_starve_cpu_limit(void);
/* The hypervisor's steal per CPU over [start, end] (steal.h), -1 when unknown. Agent threads only. */
int64_t guard_starve_steal(int64_t start, int64_t end);
void guard_starve_reset_child(void);
/* A small kernel file (/proc/...) into buf, NUL-terminated: bytes read, or -1. Raw system calls, no
 * allocation, errno kept; a descriptor in the program's table is registered while it lives. */
long guard_read_small(const char *path, char *buf, size_t cap);

/* ---- signals.c: the program's signals as it set them [signal] ---- */
/* Whether a signal is one the agent sent (its cookie). Async-signal-safe. */
int guard_sig_ours(const siginfo_t *si);
/* The trampoline for the agent's signal, with what the program inherited as its view (a handler a
 * library's constructor set before the agent's start stays the program's). 0 or -1. */
int guard_sig_install(void);
/* The program's handlers set before the agent started (a library's constructor that ran before the
 * agent's) run through the trampoline from now on, like those it sets later. Before G.active. */
void guard_sig_adopt(void);
/* The sa_restorer the C library put in the agent's handler, or 0. */
uintptr_t guard_sig_restorer(void);
/* Takes back the agent's signals pending for this thread (its mask blocks them). */
void guard_sig_drain(void);
/* Sets t->prog_blocked from the thread's mask. */
void guard_sig_thread_mask(struct gthread *t);
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

/* t: the calling thread's own state (its address already at hand: no TLS offset's load). */
static inline void guard_sigsnap_take_of(const struct gthread *t, struct sigsnap *s)
{
	s->ours = atomic_load_explicit(&t->our_sigs, memory_order_relaxed);
	s->prog = atomic_load_explicit(&t->prog_sigs, memory_order_relaxed);
}

static inline void guard_sigsnap_take(struct sigsnap *s)
{
	guard_sigsnap_take_of(&guard_tls, s);
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

/* ---- unit.c: the bookkeeping of the wrappers [program] ---- */
struct gcall {
	uintptr_t ret, cfa;
	const void *obj;
	int64_t t0;
	long nvcsw;           /* training: voluntary switches at entry */
	long res;             /* what the call returned, where deferred requests need it (-1 = failed) */
	uint16_t id;
	int8_t loopsite;      /* this call is the thread's loop wait */
	uint8_t lean;         /* gcall_enter() took its common path: so may gcall_finish() */
	uint32_t info;        /* gcall_info(id): the wrapper's GCALL_P_ constant (GCALL_KIND() reads it) */
	int fd;
	struct sigsnap sigs;
};

/* The call's bookkeeping after gcall_begin() noted it in c: 1 when gcall_finish() must follow.
 * gcall_enter() for an I/O or a sleep that opens no connection (its common path first),
 * gcall_enter_any() for the rest. */
int gcall_enter(struct gthread *t, struct gcall *c);
int gcall_enter_any(struct gthread *t, struct gcall *c);
/* After the real call: unit boundaries, wait events; restores errno. */
void gcall_finish(struct gcall *c);
/* The readier table (watch.h): who last released a lock, signalled a condition, posted a semaphore.
 * guard_releases_at() moves it (into the region, or NULL: the process's own memory; start-up and a
 * forked child, one thread). */
void guard_note_release(const void *obj);
void guard_releases_at(_Atomic uint64_t *table);
const _Atomic uint64_t *guard_releases(void);

/* info: the call's GCALL_P_ constant. What the call is goes into c here, in the wrapper, so that
 * gcall_enter() takes two arguments and its common path saves no register. */
static inline int gcall_begin(struct gcall *c, int id, uint32_t info, uintptr_t ret, uintptr_t cfa, const void *obj,
			      int fd)
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
	c->info = info;
	c->id = (uint16_t)id;
	c->ret = ret;
	c->cfa = cfa;
	c->obj = obj;
	c->fd = fd;
	if ((GCALL_KIND(info) == GK_IO || GCALL_KIND(info) == GK_SLEEP) && GCALL_ASYNC(info) != GA_ACCEPT &&
	    GCALL_ASYNC(info) != GA_CONNECT)
		return gcall_enter(t, c);
	return gcall_enter_any(t, c);
}

/* After fork, in the child. */
void guard_unit_reset_child(struct gthread *t);
/* The program closed fd: the calling thread's deferred-request entry of it goes. */
void guard_async_close(int fd);

/* ---- train.c: what training learns [program]; saving it [agent] ---- */
struct learnt;
/* Tables in shared (the region's: the collector saves them), else mapped here. NULL when out of memory. */
struct gtrain *gtrain_new(struct learnt *shared);
/* A forked child's tables moved to its own region (a copy, learnt_copy_tables()). */
void gtrain_moved(struct gtrain *tr, struct learnt *l);
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
/* What this process learnt since it started, as a profile file's text, into out: 0, 1 when nothing
 * was saved yet, -1 on failure. Agent threads only. */
int gtrain_own_write(struct gtrain *tr, struct buf *out);

#endif
