/*
 * sampler: run events and stacks (guard.md "Inspection").
 *
 * A thread gets a CPU-time timer (CLOCK_THREAD_CPUTIME_ID, delivered to that
 * thread only) at its first unit; a unit arms it, and the handler disarms it
 * when it fires outside a unit, so a thread waiting for work costs nothing
 * and a busy loop pays no system call per unit. The handler is
 * async-signal-safe: it walks the interrupted stack with libunwind (DWARF
 * CFI from .eh_frame; Debian builds without frame pointers) straight into the
 * thread's ring, and gives up rather than wait when the thread was already
 * writing its ring, walking its stack, or inside the dynamic loader.
 *
 * The same signal, sent by the watchdog with tgkill, asks a thread whose unit
 * went over its threshold for its stack (a unit stuck in one long call, or
 * spinning without wrapped calls, is caught while it happens).
 */
#define UNW_LOCAL_ONLY
#include "agent/guard/rt.h"

#include <errno.h>
#include <libunwind.h>
#include <string.h>
#include <unistd.h>


static int handler_installed;
static uintptr_t restorer;   /* the C library's signal-return trampoline (sa_restorer) */

static void delete_slot_timer(struct gslot *s);

/* Walks from the cursor into ips; sets GREC_F_... flags. */
static uint32_t walk(unw_cursor_t *cur, uint64_t *ips, uint32_t max, uint16_t *flags)
{
	uint32_t n = 0;
	int step = 1;

	while (n < max) {
		unw_word_t ip;

		if (unw_get_reg(cur, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		ips[n++] = ip;
		if ((step = unw_step(cur)) <= 0)
			break;
	}
	(void)flags;
	return n;
}

/*
 * libunwind's fast path: a per-thread cache of each address's frame layout, so
 * that a stack seen before costs no DWARF parsing and no dl_iterate_phdr (which
 * libunwind brackets with two sigprocmask calls); the step-by-step cursor
 * (walk()) pays both on every cache miss.
 */
__attribute__((noinline)) uint32_t guard_unwind_here(uint64_t *ips, uint32_t max, uint16_t *flags)
{
	int n = unw_backtrace((void **)ips, (int)max);

	(void)flags;
	return n > 0 ? (uint32_t)n : 0;
}

void guard_record_here(struct gthread *t, int kind, int64_t ts, int64_t dur, int64_t readier, uint16_t call,
		       uint16_t flags)
{
	struct gslot *s = guard_slot_of(t);
	struct grec *rec;
	uint32_t n;

	if (!s || !s->ring.size)
		return;
	rec = gring_begin(&s->ring, (uint32_t)G.cfg.max_frames);
	if (!rec)
		return;
	t->unwinding = 1;
	n = guard_unwind_here(rec->ip, (uint32_t)G.cfg.max_frames, &flags);
	t->unwinding = 0;
	rec->kind = (uint16_t)kind;
	rec->ts = ts;
	rec->dur = dur;
	rec->readier = readier;
	rec->call = call;
	rec->flags = flags;
	gring_commit(&s->ring, rec, n);
}

/* A stack from the interrupted context into the thread's ring. Returns 1 when recorded. */
static int record_interrupted(struct gthread *t, struct gslot *s, void *uc, int64_t ts, int64_t dur,
			      uint16_t flags)
{
	struct grec *rec;
	unw_cursor_t cur;
	uint32_t n = 0;

	if (t->in_dl || t->unwinding) {
		atomic_fetch_add_explicit(&s->ring.drops, 1, memory_order_relaxed);
		return 0;
	}
	rec = gring_begin(&s->ring, (uint32_t)G.cfg.max_frames);
	if (!rec)
		return 0;
	t->unwinding = 1;
	if (restorer) {
		/* from here, through the handler and the signal frame, into the interrupted code:
		 * what the trampoline returns to is the interrupted pc */
		uint32_t got = guard_unwind_here(rec->ip, (uint32_t)G.cfg.max_frames, &flags), k;

		for (k = 0; k < got && !(rec->ip[k] >= restorer && rec->ip[k] < restorer + 16); k++)
			;
		if (k + 1 < got) {
			n = got - k - 1;
			memmove(rec->ip, rec->ip + k + 1, n * sizeof(rec->ip[0]));
		}
	} else if (unw_init_local2(&cur, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) == 0) {
		n = walk(&cur, rec->ip, (uint32_t)G.cfg.max_frames, &flags);
	}
	t->unwinding = 0;
	if (n == 0) {
		gring_abort(&s->ring);
		atomic_fetch_add_explicit(&s->ring.drops, 1, memory_order_relaxed);
		return 0;
	}
	rec->kind = GREC_RUN;
	rec->ts = ts;
	rec->dur = dur;
	rec->call = atomic_load_explicit(&t->cur_call, memory_order_relaxed);
	rec->flags = flags | GREC_F_EXACT_PC;
	gring_commit(&s->ring, rec, n);
	return 1;
}

static void disarm(struct gthread *t, struct gslot *s)
{
	struct itimerspec off;

	memset(&off, 0, sizeof(off));
	if (t->timer_state == TIMER_ARMED && atomic_load(&s->timer_live) && timer_settime(s->timer, 0, &off, NULL) == 0)
		t->timer_state = TIMER_IDLE;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	struct gthread *t = &guard_tls;
	struct gslot *s = t->slot;
	int saved = errno;
	uint32_t nest = t->nest;
	uintptr_t nest_cfa = t->nest_cfa;

	(void)sig;
	atomic_fetch_add_explicit(&t->our_sigs, 1, memory_order_relaxed);
	if (!atomic_load_explicit(&G.sampling, memory_order_relaxed) || t->agent || !s)
		goto out;
	/* calls made from here (libunwind reads unwind tables) are the agent's: no bookkeeping */
	t->nest = 1;
	t->nest_cfa = (uintptr_t)__builtin_frame_address(0);
	if (si->si_code == SI_TKILL) {
		/* the watchdog asks for the stack of this thread's violating unit */
		if (t->unit_start && atomic_load(&s->capture_seq) == t->unit_seq && !t->violated) {
			int64_t now = guard_now();

			/* inspected only if the stack was taken: else the unit's end takes it */
			t->violated = (uint8_t)record_interrupted(t, s, uc, now, 0, GREC_F_DETECT);
			t->agent_ns += guard_now() - now;
			atomic_store_explicit(&s->agent_ns, t->agent_ns, memory_order_relaxed);
		}
	} else if (si->si_code == SI_TIMER) {
		int64_t now, dur;

		if (!t->unit_start) {
			disarm(t, s);
			goto out;
		}
		now = guard_now();
		/* a late signal stands for every period that passed */
		dur = t->period_ns * (1 + (si->si_overrun > 0 ? si->si_overrun : 0));
		record_interrupted(t, s, uc, now - dur, dur, 0);
		atomic_fetch_add_explicit(&s->samples, 1, memory_order_relaxed);
		/* the stack walk is the agent's time, not the unit's (training never sees it) */
		t->agent_ns += guard_now() - now;
		atomic_store_explicit(&s->agent_ns, t->agent_ns, memory_order_relaxed);
	}
out:
	t->nest = nest;
	t->nest_cfa = nest_cfa;
	errno = saved;
}

void guard_sampler_init_unwinder(void)
{
	unw_context_t uc;
	unw_cursor_t cur;

	/* per-thread caches: no locks, nothing shared with a handler on another thread */
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	/* libunwind initialises itself on first use, with locks: do it here, not in a handler */
	if (unw_getcontext(&uc) == 0 && unw_init_local(&cur, &uc) == 0)
		unw_step(&cur);
}

int guard_sampler_init(void)
{
	struct sigaction act;

	guard_sampler_init_unwinder();
	if (G.cfg.sample_hz <= 0)
		return 0;
	memset(&act, 0, sizeof(act));
	act.sa_sigaction = on_signal;
	/* SA_RESTART: the kernel resumes the calls it can; the wrappers resume the others */
	act.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&act.sa_mask);
	if (guard_real_sigaction(G.sig, &act, NULL) < 0)
		return -1;
	{
		struct sigaction cur;

		/* glibc fills in its trampoline: the frame a stack walk from the handler passes */
		if (guard_real_sigaction(G.sig, NULL, &cur) == 0 && cur.sa_restorer)
			restorer = (uintptr_t)cur.sa_restorer;
	}
	handler_installed = 1;
	atomic_store(&G.sampling, 1);
	return 0;
}

int guard_handler_installed(void)
{
	return handler_installed;
}

void guard_timer_arm(struct gthread *t)
{
	struct gslot *s = t->slot;
	struct itimerspec its;

	if (!s)
		return;
	if (t->timer_state == TIMER_NONE) {
		struct sigevent sev;
		uint64_t warm[8];
		uint16_t flags = 0;

		/* libunwind makes a thread's trace cache on first use, with locks and mmap:
		 * here, not in the handler */
		t->unwinding = 1;
		guard_unwind_here(warm, 8, &flags);
		t->unwinding = 0;

		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = G.sig;
		sev._sigev_un._tid = t->tid;
		if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &s->timer) < 0) {
			/* too many timers (RLIMIT_SIGPENDING): this thread goes without samples */
			t->timer_state = TIMER_FAILED;
			return;
		}
		atomic_store(&s->timer_live, 1);
		t->timer_state = TIMER_IDLE;
	}
	if (t->timer_state != TIMER_IDLE || !atomic_load(&s->timer_live))
		return;
	/* the period may change (a pushed sample_hz): each timer keeps the one it was armed with */
	t->period_ns = G.period_ns;
	its.it_interval.tv_sec = t->period_ns / 1000000000;
	its.it_interval.tv_nsec = t->period_ns % 1000000000;
	its.it_value = its.it_interval;
	if (timer_settime(s->timer, 0, &its, NULL) == 0)
		t->timer_state = TIMER_ARMED;
	/* the program may have taken the signal while this timer was being set */
	if (!atomic_load(&G.sampling))
		guard_timer_delete(t);
}

/* Deletes a slot's timer once, whoever gets there first (its owner, or the hand-over). */
static void delete_slot_timer(struct gslot *s)
{
	int live = 1;

	if (atomic_compare_exchange_strong(&s->timer_live, &live, 0))
		timer_delete(s->timer);
}

void guard_timer_delete(struct gthread *t)
{
	if (t->slot)
		delete_slot_timer(t->slot);
	t->timer_state = TIMER_NONE;
}

void guard_take_signal_back(void)
{
	uint32_t n = atomic_load(&G.nslots);

	/* the program installs a handler for the agent's signal: sampling stops, and
	 * every timer goes before the program's handler could be reached by one */
	atomic_store(&G.sampling, 0);
	for (uint32_t i = 0; i < n; i++)
		delete_slot_timer(&G.slots[i]);
	atomic_fetch_add(&G.n.handed_over, 1);
	guard_log("the program took the sampling signal; CPU samples stop", "signal=%d", G.sig);
}

void guard_sampler_release(void)
{
}
