/*
 * sampler: run events and stacks (guard.md "Inspection").
 *
 * A thread gets a CPU-time timer (CLOCK_THREAD_CPUTIME_ID, delivered to that
 * thread only) at its first unit; a unit arms it, and the handler disarms it
 * when it fires outside a unit, so a thread waiting for work costs nothing
 * and a busy loop pays no system call per unit. A CPU-time timer expires only
 * while its thread runs, so its signal never interrupts a wait the thread is
 * sleeping in. The handler is async-signal-safe: it walks the interrupted
 * stack (unwind.c) straight into the thread's ring, and gives up rather than
 * wait when the thread was already writing its ring, walking its stack, or
 * inside the dynamic loader.
 *
 * The watchdog asks a thread whose unit went over its threshold for its stack:
 * the thread's next CPU sample takes it while it runs; a thread sleeping in a
 * wrapped call gets the agent's signal (the wrapper resumes the call). Every
 * signal the agent sends carries G.sig_cookie (signals.c tells it from the
 * program's by that), and none goes to a thread that blocks the signal.
 */
#include "agent/guard/hot.h"
#include "agent/guard/region.h"
#include "agent/guard/unwind.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* the documented name (sigevent(7)); glibc before 2.38 spells it only through the union */
#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

static uintptr_t restorer;   /* the C library's signal-return trampoline (sa_restorer) */

void guard_record_here(struct gthread *t, int kind, int64_t ts, int64_t dur, int64_t readier, uint16_t call,
		       uint16_t flags)
{
	struct gslot *s = guard_slot_of(t);
	struct grec *rec;
	uint32_t n;

	if (!s || !s->ring.size)
		return;
	if (GUARD_UNLIKELY(unwind_want_cache))
		guard_trace_cache(t);
	rec = gring_begin(&s->ring, (uint32_t)G.cfg.max_frames);
	if (!rec)
		return;
	t->unwinding = 1;
	n = unwind_here(rec->ip, (uint32_t)G.cfg.max_frames);
	t->unwinding = 0;
	rec->kind = (uint16_t)kind;
	rec->ts = ts;
	rec->dur = dur;
	rec->readier = (int32_t)readier;
	rec->req = t->acur;
	rec->call = call;
	rec->flags = flags;
	gring_commit(&s->ring, rec, n);
}

int64_t guard_trace_cache(struct gthread *t)
{
	uint32_t nest = t->nest;
	uintptr_t nest_cfa = t->nest_cfa;
	int64_t t0;

	/* in a program's signal handler the trace cache's making (libunwind's thread key may allocate)
	 * could meet a lock the handler interrupted: it waits until the thread is out of it. Above the
	 * outermost handler's frame on the same stack, the thread is: the handlers were left without
	 * returning (siglongjmp), and their count goes. */
	if (t->prog_handlers && t->prog_handler_sp && (uintptr_t)__builtin_frame_address(0) > t->prog_handler_sp)
		t->prog_handlers = 0;
	if (t->sync_call || t->in_dl || t->unwinding || t->prog_handlers)
		return 0;
	t0 = guard_now();
	t->nest = 1;
	t->nest_cfa = (uintptr_t)__builtin_frame_address(0);
	t->unwinding = 1;
	unwind_cache_make();
	t->unwinding = 0;
	t->nest = nest;
	t->nest_cfa = nest_cfa;
	return guard_now() - t0;
}

/*
 * A wait of a thread that has no slot (it never ran a unit), which may ready a unit's wait: into
 * the ring such threads share, so that the thread gets no ring, no slot, no timer. Its first
 * walks go without libunwind's per-thread trace cache (unwind.h: a thread that may wait once and
 * end makes none); a thread that keeps waiting makes the cache after all.
 */
void guard_record_shared(struct gthread *t, int64_t ts, int64_t dur, int64_t readier, uint16_t call)
{
	uint64_t ips[GUARD_MAX_STACK];
	uint32_t max = G.cfg.max_frames < GUARD_MAX_STACK ? (uint32_t)G.cfg.max_frames : GUARD_MAX_STACK, n;
	struct grec *rec;

	if (!G.shared_ring->size) {
		pthread_mutex_lock(&G.shared_mu);
		if (!G.shared_ring->size && guard_ring_init(G.shared_ring, GUARD_MAX_THREADS) < 0)
			G.shared_ring->size = 0;
		pthread_mutex_unlock(&G.shared_mu);
		if (!G.shared_ring->size)
			return;
	}
	if (GUARD_UNLIKELY(unwind_want_cache))
		guard_trace_cache(t);
	t->unwinding = 1;
	n = unwind_here(ips, max);
	t->unwinding = 0;
	if (!n)
		return;
	pthread_mutex_lock(&G.shared_mu);
	rec = gring_begin(G.shared_ring, n);
	if (rec) {
		memcpy(rec->ip, ips, n * sizeof(ips[0]));
		rec->kind = GREC_WAIT;
		rec->ts = ts;
		rec->dur = dur;
		rec->readier = (int32_t)readier;
		rec->req = 0;
		rec->call = call;
		rec->flags = 0;
		rec->tid = (uint32_t)t->tid;
		gring_commit(G.shared_ring, rec, n);
	}
	pthread_mutex_unlock(&G.shared_mu);
}

/* A stack from the interrupted context into the thread's ring; with detect, a copy of it at its end
 * is the stack taken when the violation was detected (a run event of no cost). Returns 1 when
 * recorded. */
static int record_interrupted(struct gthread *t, struct gslot *s, void *uc, int64_t ts, int64_t dur,
			      uint16_t flags, int detect)
{
	struct grec *rec;
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
		uint32_t got = unwind_here(rec->ip, (uint32_t)G.cfg.max_frames), k;

		for (k = 0; k < got && !(rec->ip[k] >= restorer && rec->ip[k] < restorer + 16); k++)
			;
		if (k + 1 < got) {
			n = got - k - 1;
			memmove(rec->ip, rec->ip + k + 1, n * sizeof(rec->ip[0]));
		}
	} else {
		n = unwind_context(uc, rec->ip, (uint32_t)G.cfg.max_frames);
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
	rec->readier = 0;
	rec->req = t->acur;
	rec->call = atomic_load_explicit(&t->cur_call, memory_order_relaxed);
	rec->flags = flags | GREC_F_EXACT_PC;
	gring_commit(&s->ring, rec, n);
	if (detect && dur) {
		/* the newest record stays intact while the next one is written after it */
		struct grec *d = gring_begin(&s->ring, n);

		if (d) {
			memcpy(d->ip, rec->ip, n * sizeof(d->ip[0]));
			d->kind = GREC_RUN;
			d->ts = ts + dur;
			d->dur = 0;
			d->readier = 0;
			d->req = rec->req;
			d->call = rec->call;
			d->flags = GREC_F_DETECT | GREC_F_EXACT_PC;
			gring_commit(&s->ring, d, n);
		}
	}
	return 1;
}

static void disarm(struct gthread *t, struct gslot *s)
{
	struct itimerspec off;

	memset(&off, 0, sizeof(off));
	if (t->timer_state == TIMER_ARMED && atomic_load(&s->timer_live) && timer_settime(s->timer, 0, &off, NULL) == 0)
		t->timer_state = TIMER_IDLE;
	t->boosted = 0;
}

/* Sets the armed timer's period (timer_settime is async-signal-safe). 0 or -1. */
static int set_period(struct gthread *t, struct gslot *s, int64_t period_ns)
{
	struct itimerspec its;

	if (t->timer_state != TIMER_ARMED || !atomic_load(&s->timer_live) || period_ns <= 0)
		return -1;
	its.it_interval.tv_sec = period_ns / 1000000000;
	its.it_interval.tv_nsec = period_ns % 1000000000;
	its.it_value = its.it_interval;
	if (timer_settime(s->timer, 0, &its, NULL) < 0)
		return -1;
	t->period_ns = period_ns;
	return 0;
}

/*
 * A unit over its threshold is sampled at the violation rate for the rest of it (at most
 * GUARD_BOOST_MAX samples): at 100 a second, a 30 ms query has three samples, too few to tell where
 * its time went or which of the run's clusters belong together. Only slow units pay for it.
 */
static void boost(struct gthread *t, struct gslot *s, int64_t now)
{
	if (t->boosted) {
		if (--t->boost_left == 0 && set_period(t, s, G.period_ns) == 0)
			t->boosted = 0;
		return;
	}
	if (G.boost_period_ns <= 0 || G.boost_period_ns >= t->period_ns || t->threshold < 0 ||
	    now - t->unit_start - t->agent_ns <= t->threshold)
		return;
	if (set_period(t, s, G.boost_period_ns) == 0) {
		t->boosted = 1;
		t->boost_left = GUARD_BOOST_MAX;
	}
}

void guard_timer_unboost(struct gthread *t)
{
	if (t->slot && set_period(t, t->slot, G.period_ns) == 0)
		t->boosted = 0;
}

/* The watchdog asked for the stack of this thread's unit: taken with the caller's stamp. */
static int wanted(struct gthread *t, struct gslot *s)
{
	return t->unit_start && !t->violated && atomic_load_explicit(&s->capture_seq, memory_order_relaxed) == t->unit_seq;
}

void guard_sampler_signal(siginfo_t *si, void *uc)
{
	struct gthread *t = &guard_tls;
	struct gslot *s = t->slot;
	int saved = errno;
	uint32_t nest = t->nest;
	uintptr_t nest_cfa = t->nest_cfa;

	atomic_fetch_add_explicit(&t->our_sigs, 1, memory_order_relaxed);
	if (!atomic_load_explicit(&G.sampling, memory_order_relaxed) || t->agent || !s)
		goto out;
	/* calls made from here (libunwind reads unwind tables) are the agent's: no bookkeeping */
	t->nest = 1;
	t->nest_cfa = (uintptr_t)__builtin_frame_address(0);
	if (si->si_code == SI_QUEUE) {
		/* the watchdog's request: this thread sleeps in a wrapped call (which is resumed) */
		int want = wanted(t, s);

		if (want || (t->unit_start && atomic_load_explicit(&t->cur_call, memory_order_relaxed) &&
			     atomic_load_explicit(&s->hang_seq, memory_order_relaxed) == t->unit_seq)) {
			int64_t now = guard_now();
			/* inspected only if the stack was taken: else the unit's end takes it */
			int got = record_interrupted(t, s, uc, now, 0, GREC_F_DETECT, 0);

			if (want && got) {
				t->violated = 1;
				atomic_store_explicit(&s->captured_seq, t->unit_seq, memory_order_relaxed);
			}
			t->agent_ns += guard_now() - now;
			guard_deadline_set(t);
			atomic_store_explicit(&s->agent_ns, t->agent_ns, memory_order_relaxed);
		}
	} else if (si->si_code == SI_TIMER) {
		int64_t now, dur;
		int detect;

		if (!t->unit_start) {
			disarm(t, s);
			goto out;
		}
		now = guard_now();
		/* a late signal stands for every period that passed */
		dur = t->period_ns * (1 + (si->si_overrun > 0 ? si->si_overrun : 0));
		/*
		 * but the thread's CPU clock ran on between units: of a period that began in the
		 * unit before, only what this unit can have used is its own. Back-dated whole, the
		 * sample would lie in the last unit's window, in its stream and its analysis.
		 */
		if (dur > now - t->unit_start)
			dur = now - t->unit_start > 0 ? now - t->unit_start : 0;
		detect = wanted(t, s);
		if ((dur > 0 || detect) &&
		    record_interrupted(t, s, uc, now - dur, dur, dur ? 0 : GREC_F_DETECT, detect) && detect) {
			t->violated = 1;
			atomic_store_explicit(&s->captured_seq, t->unit_seq, memory_order_relaxed);
		}
		atomic_fetch_add_explicit(&s->samples, 1, memory_order_relaxed);
		boost(t, s, now);
		/* the stack walk is the agent's time, not the unit's (training never sees it) */
		t->agent_ns += guard_now() - now;
		guard_deadline_set(t);
		atomic_store_explicit(&s->agent_ns, t->agent_ns, memory_order_relaxed);
	}
out:
	t->nest = nest;
	t->nest_cfa = nest_cfa;
	errno = saved;
}

void guard_sampler_init(uintptr_t sig_restorer)
{
	restorer = sig_restorer;
}

void guard_timer_arm(struct gthread *t)
{
	struct gslot *s = t->slot;
	struct itimerspec its;

	if (!s || t->prog_blocked || G.cfg.sample_hz <= 0)
		return;
	if (!atomic_load(&s->timer_live)) {
		struct sigevent sev;

		if (t->timer_state == TIMER_FAILED)
			return;
		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = G.sig;
		sev.sigev_value.sival_ptr = G.sig_cookie;
		sev.sigev_notify_thread_id = t->tid;
		if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &s->timer) < 0) {
			/* too many timers (RLIMIT_SIGPENDING): this thread goes without samples */
			t->timer_state = TIMER_FAILED;
			return;
		}
		atomic_store(&s->timer_live, 1);
		t->timer_state = TIMER_IDLE;
	}
	if (t->timer_state == TIMER_ARMED)
		return;
	/* the period may change (a pushed sample_hz): each timer keeps the one it was armed with */
	t->period_ns = G.period_ns;
	its.it_interval.tv_sec = t->period_ns / 1000000000;
	its.it_interval.tv_nsec = t->period_ns % 1000000000;
	its.it_value = its.it_interval;
	if (timer_settime(s->timer, 0, &its, NULL) == 0)
		t->timer_state = TIMER_ARMED;
	/* the program may have ignored the signal while this timer was being set */
	if (!atomic_load(&G.sampling))
		guard_timer_delete(t);
}

void guard_timer_disarm(struct gthread *t)
{
	if (t->slot)
		disarm(t, t->slot);
}

/* Deletes a slot's timer once, whoever gets there first (its owner, or a pause of sampling). */
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

void guard_sampler_pause(void)
{
	uint32_t n = atomic_load(&G.nslots);

	/* the program ignores the signal: no timer may fire, no request be sent until it takes it back */
	guard_sampling_set(0);
	for (uint32_t i = 0; i < n; i++)
		delete_slot_timer(&G.slots[i]);
	guard_log("the program ignores the sampling signal; CPU samples pause", "signal=%d", G.sig);
}

void guard_sampler_resume(void)
{
	/* timers are made again at the threads' next units */
	guard_sampling_set(1);
	guard_log("CPU samples resume", "signal=%d", G.sig);
}

/* The watchdog asks the thread of slot s, asleep in a wrapped call, for its stack. */
void guard_sampler_request(struct gslot *s)
{
	siginfo_t si;

	atomic_fetch_add(&s->sending, 1);
	if (!atomic_load(&s->sig_blocked) && atomic_load(&G.sampling)) {
		memset(&si, 0, sizeof(si));
		si.si_signo = G.sig;
		si.si_code = SI_QUEUE;
		si.si_pid = G.pid;
		si.si_uid = getuid();
		si.si_value.sival_ptr = G.sig_cookie;
		syscall(SYS_rt_tgsigqueueinfo, (long)G.pid, (long)atomic_load(&s->tid), (long)G.sig, &si);
	}
	atomic_fetch_sub(&s->sending, 1);
}
