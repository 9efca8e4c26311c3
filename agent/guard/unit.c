/*
 * unit: what the wrappers do around each call (guard.md "Units", "Run time",
 * "Inspection"): unit boundaries at the thread's loop site, run-time unit-type
 * inference from (call site, stack depth) contexts and the threshold check
 * (PerfGuard's Algorithm 2), wait events with their readiers, and, when
 * training, the choice of loop sites and the contexts of each unit.
 *
 * This is the program's hot path: a call inside a unit costs two clock reads,
 * a comparison with the same call of the thread's last unit ("the path") or
 * else a hash probe and the type counting, and a few stores; nothing here
 * allocates or locks, except the first time a thread or a training context is
 * seen. What runs once per unit, per long wait or only when training stays out
 * of line, so that the code of a call's bookkeeping takes few cache lines from
 * the program's.
 */
#include "agent/guard/modmap.h"
#include "agent/guard/gtab.h"
#include "agent/guard/hot.h"
#include "agent/guard/region.h"
#include "agent/guard/unwind.h"
#include "agent/guard/watch.h"
#include "common/hash.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- readiers: who last released each lock, condition and semaphore (watch.h) ---- */

static _Atomic uint64_t rel_own[GWATCH_RELEASES];
static _Atomic uint64_t *rel_table = rel_own;   /* or the region's, for the collector's hangs */

void guard_releases_at(_Atomic uint64_t *table)
{
	rel_table = table ? table : rel_own;
}

const _Atomic uint64_t *guard_releases(void)
{
	return rel_table;
}

static pid_t thread_tid(struct gthread *t)
{
	if (GUARD_UNLIKELY(!t->tid))
		t->tid = gettid();
	return t->tid;
}

void guard_note_release(const void *obj)
{
	struct gthread *t = &guard_tls;

	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || t->agent || G.mode != GUARD_MODE_GUARD)
		return;
	gwatch_release_note(rel_table, obj, thread_tid(t));
}

static pid_t tid_of_pthread(uintptr_t th)
{
	uint32_t n = atomic_load(&G.nslots);

	for (uint32_t i = 0; i < n; i++)
		if (atomic_load_explicit(&G.slots[i].pthread, memory_order_relaxed) == th)
			return atomic_load_explicit(&G.slots[i].tid, memory_order_relaxed);
	return 0;
}

/* ---- the guard table (gtab.h) ---- */

static int loop_match(const struct gtab *tab, const struct gthread *t, uintptr_t ret, uintptr_t cfa)
{
	int64_t depth = (int64_t)(t->base - cfa);

	for (uint32_t i = 0; i < tab->nloops; i++)
		if (tab->sites[i].ret == ret && tab->sites[i].depth == depth)
			return (int)i;
	return -1;
}

/* The condition variable a loop's wait waits on: its other waits on it are the loop too. */
static inline const void *loop_object(const struct gcall *c)
{
	return GCALL_KIND(c->info) == GK_COND ? c->obj : NULL;
}

/*
 * A wait in the unit's frame on the condition variable its loop waited on: the thread waits for
 * work again, at another call site of the same loop. jemalloc's background thread sleeps in a
 * pthread_cond_timedwait, or with nothing to purge in a pthread_cond_wait on the same condition;
 * taken for a wait inside the unit, that sleep (tens of seconds) was a unit and a hang.
 */
static inline int loop_twin(const struct gthread *t, const struct gcall *c)
{
	/* (the object first: most loops wait in epoll, poll or select, with none) */
	return t->loop_obj && c->obj == t->loop_obj && t->unit_start && c->cfa == t->loop_cfa &&
	       GCALL_KIND(c->info) == GK_COND;
}

/* ---- guard mode ---- */

static void add_agent_time(struct gthread *t, int64_t since)
{
	t->agent_ns += guard_now() - since;
	guard_deadline_set(t);
	if (t->slot)
		atomic_store_explicit(&t->slot->agent_ns, t->agent_ns, memory_order_relaxed);
}

/* The elapsed unit time passed the threshold: a violation; take the thread's stack now. */
__attribute__((noinline, cold)) static void violation_here(struct gthread *t, uint16_t call, int64_t now)
{
	int64_t a0;

	/* (the sampler's signal may have found it between the deadline's setting and its check) */
	if (t->violated) {
		guard_deadline_set(t);
		return;
	}
	t->violated = 1;
	guard_deadline_set(t);
	if (t->slot)
		atomic_store_explicit(&t->slot->captured_seq, t->unit_seq, memory_order_relaxed);
	a0 = guard_now();
	guard_record_here(t, GREC_RUN, now, 0, 0, call, GREC_F_DETECT);
	add_agent_time(t, a0);
}

static inline void check(struct gthread *t, uint16_t call, int64_t now)
{
	if (GUARD_UNLIKELY(now > t->deadline))
		violation_here(t, call, now);
}

/*
 * The types with the most hits; among them the smallest threshold (Algorithm 2), from scratch.
 * A context every type has counts for all alike and changes no order, so it is not counted; but
 * once the unit has hit one (t->shared), the types it touched nothing else of are candidates too.
 */
static int32_t best_type(const struct gthread *t, uint64_t all_types, const int64_t *thr)
{
	uint64_t m = t->shared ? all_types : t->touched;
	int32_t best = -1;

	while (m) {
		int b = __builtin_ctzll(m);

		m &= m - 1;
		if (best < 0 || t->hits[b] > t->hits[best] || (t->hits[b] == t->hits[best] && thr[b] < thr[best]))
			best = b;
	}
	return best;
}

/*
 * One context of the unit, counted for the types having it (mask): the unit's type and threshold
 * after it, into t->best and t->threshold; whether either changed. The loop's thresholds (a line
 * of the table of their own) are read only where the unit's type or size may change what applies:
 * a new size bucket, a new best type, a tie. A table pushed while a unit runs applies from its next
 * such change (and whole from the next unit).
 */
static int type_step(struct gthread *t, const struct gtab *tab, uint64_t mask)
{
	unsigned bucket = gp_bucket(++t->calls);
	const int64_t *thr = tab->loops[t->loop].type_thr[bucket];
	int32_t best = t->best;
	int resized = bucket != t->bucket;

	if (resized) {
		/* a bigger unit: the thresholds (and so the ties) are those of its new size */
		t->bucket = (uint8_t)bucket;
		best = best_type(t, tab->sites[t->loop].all_types, thr);
	}
	if (mask && mask == tab->sites[t->loop].all_types) {
		/* every type has it (a server's recv and send): all gain alike, no order changes */
		if (!t->shared) {
			t->shared = 1;
			if (best < 0)
				best = best_type(t, tab->sites[t->loop].all_types, thr);
		}
	} else if (mask) {
		t->touched |= mask;
		while (mask) {
			int b = __builtin_ctzll(mask);
			uint32_t h = ++t->hits[b];

			mask &= mask - 1;
			if (best < 0 ||
			    (b != best && (h > t->hits[best] || (h == t->hits[best] && thr[b] < thr[best]))))
				best = b;
		}
	}
	if (best >= 0 && (best != t->best || (resized && thr[best] != t->threshold))) {
		t->best = best;
		t->threshold = thr[best];
		return 1;
	}
	return 0;
}

/*
 * The path. A server's units mostly repeat the one before: the same calls from the same places,
 * so the same contexts in the same order, each leaving the same type and threshold. A thread keeps
 * its last unit's (GUARD_PATH at most); a unit that repeats them takes each call's type and
 * threshold from there, without the table's lookup or the counting, and keeps no counts. At its
 * first other context, or past the path's end, its counts are made again: from the counts kept
 * after every GUARD_PATH_SNAP steps, then the steps' masks since, with the table they were found
 * in (the same as counting them as they came). The path keeps the steps followed and records the
 * unit's next ones. An epoll server's unit serves every connection ready: a longer unit than the
 * last goes on past its end, a shorter one ends on it.
 */
struct gpath {
	const struct gtab *tab;   /* the table the steps were found in */
	pid_t tid;                /* the thread whose path it is (slots are taken again) */
	int32_t loop;
	uint32_t len;
	struct gpath_step {
		uintptr_t ret;
		uint64_t mask;
		int64_t threshold;    /* t->threshold and t->best after the step */
		int32_t depth, best;
	} step[GUARD_PATH];
	struct gpath_snap {       /* snap[k]: the counts after step (k + 1) * GUARD_PATH_SNAP */
		uint64_t touched;
		uint8_t shared, bucket, ok;   /* ok: at most GUARD_PATH_SNAP_TYPES types touched */
		uint32_t hits[GUARD_PATH_SNAP_TYPES];   /* touched's types in order */
	} snap[GUARD_PATH / GUARD_PATH_SNAP];
};

/* A slot's each, so that a thread that never runs a unit has none: mapped at the first unit of
 * the process, its pages touched only where used. Not in bss: a mapping of megabytes is given huge
 * pages where the kernel's THP is "always" (2 MB for the first path), and its alignment to them
 * moves the libraries loaded after it. */
static _Atomic(struct gpath *) paths;

__attribute__((noinline, cold)) static struct gpath *paths_map(void)
{
	size_t bytes = sizeof(struct gpath) * GUARD_MAX_THREADS;
	struct gpath *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0),
		     *none = NULL;

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, bytes, MADV_NOHUGEPAGE);
	if (!atomic_compare_exchange_strong(&paths, &none, p)) {
		munmap(p, bytes);   /* another thread's came first */
		return none;
	}
	return p;
}

__attribute__((noinline)) static void path_leave(struct gthread *t, const struct gtab *tab)
{
	struct gpath *p = t->path;
	uint32_t followed = t->calls, from = 0, k = followed / GUARD_PATH_SNAP;

	t->path_on = 0;
	/* as the unit began (unit_begin()): no counts kept while the path was followed */
	t->calls = 0;
	t->bucket = 0;
	t->best = -1;
	t->threshold = p->tab->loops[t->loop].threshold;
	if (k > 0 && p->snap[k - 1].ok) {
		const struct gpath_snap *s = &p->snap[k - 1];
		uint64_t m = s->touched;

		from = k * GUARD_PATH_SNAP;
		for (int j = 0; m; j++, m &= m - 1)
			t->hits[__builtin_ctzll(m)] = s->hits[j];
		t->touched = s->touched;
		t->shared = s->shared;
		t->bucket = s->bucket;
		t->calls = from;
		t->best = p->step[from - 1].best;
		t->threshold = p->step[from - 1].threshold;
	}
	for (uint32_t i = from; i < followed; i++)
		type_step(t, p->tab, p->step[i].mask);
	if (p->tab == tab) {
		p->len = followed;
		t->path_rec = 1;
	} else {
		/* a table pushed during the unit: its contexts are the new table's from the next unit on */
		p->tab = tab;
		p->len = 0;
		t->path_rec = followed == 0;
	}
}

/* The unit's context just counted (its calls-th), at the path's end: one more step. */
static void path_record(struct gthread *t, const struct gtab *tab, uintptr_t ret, int64_t depth, uint64_t mask)
{
	struct gpath *p = t->path;
	uint32_t i = t->calls - 1;
	struct gpath_snap *s;
	uint64_t m;
	int j;

	if (p->tab != tab || i != p->len || i >= GUARD_PATH || depth != (int32_t)depth) {
		t->path_rec = 0;
		return;
	}
	p->step[i].ret = ret;
	p->step[i].depth = (int32_t)depth;
	p->step[i].mask = mask;
	p->step[i].best = t->best;
	p->step[i].threshold = t->threshold;
	p->len = i + 1;
	if (p->len % GUARD_PATH_SNAP)
		return;
	s = &p->snap[i / GUARD_PATH_SNAP];
	s->ok = __builtin_popcountll(t->touched) <= GUARD_PATH_SNAP_TYPES;
	if (!s->ok)
		return;
	s->touched = t->touched;
	s->shared = t->shared;
	s->bucket = t->bucket;
	for (j = 0, m = t->touched; m; j++, m &= m - 1)
		s->hits[j] = t->hits[__builtin_ctzll(m)];
}

/* The unit's first steps: the thread's path for the table tab and loop L, found again or begun. */
static void path_begin(struct gthread *t, const struct gtab *tab, int L)
{
	struct gpath *p = t->path, *all;

	if (!p || p->tid != t->tid) {
		all = atomic_load_explicit(&paths, memory_order_acquire);
		if (!all && !(all = paths_map())) {
			t->path_on = t->path_rec = 0;
			return;
		}
		p = t->path = &all[t->slot - G.slots];
		p->tid = t->tid;
		p->tab = NULL;
	}
	if (p->tab != tab || p->loop != L) {
		p->tab = tab;
		p->loop = L;
		p->len = 0;
	}
	t->path_on = p->len > 0;
	t->path_rec = 1;
}

#ifdef GUARD_CHECK_PATH
/*
 * The test build's check of the path (SAN=1): every context is also counted as it comes, by itself,
 * in a second state; the unit's type and threshold must be the same after each, or the program
 * stops with both.
 */
static __thread struct gthread path_shadow;

static void path_check_begin(const struct gthread *t)
{
	struct gthread *s = &path_shadow;

	memset(s->hits, 0, sizeof(s->hits));
	s->touched = 0;
	s->shared = 0;
	s->best = -1;
	s->calls = 0;
	s->bucket = 0;
	s->loop = t->loop;
	s->threshold = t->threshold;
}

static void path_check(const struct gthread *t, const struct gtab *tab, const struct gcall *c, int64_t depth)
{
	struct gthread *s = &path_shadow;
	char msg[256];
	int n;

	type_step(s, tab, gtab_find(tab, t->loop, c->ret, depth));
	if (s->best == t->best && s->threshold == t->threshold && s->calls == t->calls)
		return;
	n = snprintf(msg, sizeof(msg), "libsmguard: the path's unit type %d, threshold %lld after call %u; counted: %d, %lld, %u\n",
		     t->best, (long long)t->threshold, t->calls, s->best, (long long)s->threshold, s->calls);
	if (n > 0 && write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1) < 0)
		n = 0;
	abort();
}
#else
static inline void path_check_begin(const struct gthread *t)
{
	(void)t;
}

static inline void path_check(const struct gthread *t, const struct gtab *tab, const struct gcall *c, int64_t depth)
{
	(void)t, (void)tab, (void)c, (void)depth;
}
#endif

/* Whether the unit's next context, (ret, depth) in tab, is its path's next step. */
static inline int path_next(const struct gthread *t, const struct gtab *tab, uintptr_t ret, int64_t depth)
{
	const struct gpath *p = t->path;
	uint32_t i = t->calls;

	return t->path_on && i < p->len && p->step[i].ret == ret && p->step[i].depth == depth && p->tab == tab;
}

/* Takes that step: the unit's size, type and threshold after it. Whether type or threshold changed. */
static inline int path_follow(struct gthread *t)
{
	const struct gpath_step *s = &t->path->step[t->calls++];
	int changed = s->best != t->best || s->threshold != t->threshold;

	t->best = s->best;
	t->threshold = s->threshold;
	return changed;
}

/* The unit's size, type and threshold after a context, for the watchdog; the deadline when they changed. */
static inline void context_counted(struct gthread *t, int changed)
{
	atomic_store_explicit(&t->slot->calls, t->calls, memory_order_relaxed);
	if (changed) {
		guard_deadline_set(t);
		atomic_store_explicit(&t->slot->threshold, t->threshold, memory_order_relaxed);
		atomic_store_explicit(&t->slot->type, t->best, memory_order_relaxed);
	}
}

static void context_hit(struct gthread *t, const struct gtab *tab, const struct gcall *c, int64_t now)
{
	int64_t depth = (int64_t)(t->loop_cfa - c->cfa);
	uint64_t mask;
	int changed;

	if (GUARD_LIKELY(t->path_on)) {
		if (path_next(t, tab, c->ret, depth)) {
			changed = path_follow(t);
			goto counted;
		}
		path_leave(t, tab);
	}
	mask = gtab_find(tab, t->loop, c->ret, depth);
	changed = type_step(t, tab, mask);
	if (t->path_rec)
		path_record(t, tab, c->ret, depth, mask);
counted:
	path_check(t, tab, c, depth);
	context_counted(t, changed);
	check(t, c->id, now);
}

__attribute__((noinline)) static void unit_begin(struct gthread *t, const struct gtab *tab, int L, uintptr_t cfa, int64_t now)
{
	struct gslot *s = guard_slot_of(t);

	if (!s)
		return;
	/* the samples' and the waits' walks through libunwind's trace cache, once this thread walks
	 * often enough to be worth one (unwind.h); the unit starts after it is made */
	if (GUARD_UNLIKELY(unwind_want_cache))
		now += guard_trace_cache(t);
	t->loop = L;
	t->loop_cfa = cfa;
	t->unit_seq++;
	t->unit_start = now;
	t->agent_ns = 0;
	while (t->touched) {
		t->hits[__builtin_ctzll(t->touched)] = 0;
		t->touched &= t->touched - 1;
	}
	t->shared = 0;
	t->best = -1;
	t->calls = 0;
	t->bucket = 0;
	t->threshold = tab->loops[L].threshold;
	t->violated = 0;
	guard_deadline_set(t);
	path_begin(t, tab, L);
	path_check_begin(t);
	atomic_store_explicit(&s->agent_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&s->threshold, t->threshold, memory_order_relaxed);
	atomic_store_explicit(&s->type, -1, memory_order_relaxed);
	atomic_store_explicit(&s->loop, L, memory_order_relaxed);
	atomic_store_explicit(&s->calls, 0, memory_order_relaxed);
	atomic_store_explicit(&s->call, 0, memory_order_relaxed);
	atomic_store_explicit(&s->unit_seq, t->unit_seq, memory_order_relaxed);
	atomic_store_explicit(&s->unit_start, now, memory_order_release);
	if (atomic_load_explicit(&G.sampling, memory_order_relaxed) && t->timer_state != TIMER_ARMED)
		guard_timer_arm(t);
	if (GUARD_UNLIKELY(!G.wd_started))
		guard_start_watchdog();
}

/* The unit t ended at now, as a violation (or a baseline) to report. */
static void ended_unit(const struct gthread *t, int64_t now, int64_t dur, struct gviol *v)
{
	memset(v, 0, sizeof(*v));
	v->tid = t->tid;
	v->slot = (uint32_t)(t->slot - G.slots);
	v->start = t->unit_start;
	v->end = now;
	v->dur = dur;
	v->threshold = t->threshold;
	v->loop = t->loop;
	v->type = t->best;
	v->calls = t->calls;
}

__attribute__((noinline)) static void unit_end(struct gthread *t, int64_t now)
{
	struct gslot *s = t->slot;
	int64_t dur = now - t->unit_start - t->agent_ns;
	uint32_t seq = t->unit_seq, prev;
	int flagged;

	atomic_store_explicit(&s->unit_start, 0, memory_order_release);
	atomic_fetch_add_explicit(&s->units, 1, memory_order_relaxed);
	flagged = atomic_load_explicit(&s->flagged_seq, memory_order_acquire) == seq;
	if (t->violated || flagged || (t->threshold >= 0 && dur > t->threshold)) {
		prev = atomic_load(&s->reported_seq);
		/* the watchdog may have shipped this unit already as a hang */
		if (prev != seq && atomic_compare_exchange_strong(&s->reported_seq, &prev, seq)) {
			struct gviol v;

			/* no stack taken yet (the watchdog's request may have come too late): take it now */
			if (!t->violated)
				guard_record_here(t, GREC_RUN, now, 0, 0, 0, GREC_F_DETECT);
			ended_unit(t, now, dur, &v);
			guard_starve_unit_end(t, &v);
			atomic_fetch_add_explicit(&s->violations, 1, memory_order_relaxed);
			guard_enqueue(&v);
		}
	} else if (G.cfg.baseline_per_min > 0 && t->loop >= 0 && t->loop < GP_MAX_LOOPS &&
		   now >= atomic_load_explicit(&G.base_next[t->loop][t->best >= 0 && t->best < GP_MAX_TYPES ?
								    t->best : GP_MAX_TYPES],
					       memory_order_relaxed) &&
		   guard_baseline_claim(t->loop, t->best, now)) {
		struct gviol v;

		/* where the unit ended, as a violation has where it was found slow */
		guard_record_here(t, GREC_RUN, now, 0, 0, 0, 0);
		ended_unit(t, now, dur, &v);
		guard_starve_unit_end(t, &v);
		v.baseline = 1;
		guard_baseline_enqueue(&v);
	}
	t->unit_start = 0;
	t->path_on = 0;
	if (GUARD_UNLIKELY(t->boosted))
		guard_timer_unboost(t);
}

__attribute__((noinline, cold)) static void record_wait(struct gthread *t, const struct gcall *c, int64_t dur)
{
	int64_t a0 = guard_now();
	pid_t readier = 0;

	switch (GCALL_KIND(c->info)) {
	case GK_LOCK:
	case GK_COND:
	case GK_SEM:
		/* a wait that timed out or failed was readied by no one: the object's last release may
		 * be long past (a background thread's timed sleep, released once an hour ago) */
		if (c->res == 0)
			readier = gwatch_release_of(rel_table, c->obj);
		break;
	case GK_JOIN:
		readier = tid_of_pthread((uintptr_t)c->obj);
		break;
	default:
		break;
	}
	if (readier == t->tid)
		readier = 0;
	if (!t->slot) {
		/* a thread that never ran a unit: it may ready one's wait, but gets nothing of its own */
		guard_record_shared(t, c->t0, dur, readier, c->id);
		return;
	}
	guard_record_here(t, GREC_WAIT, c->t0, dur, readier, c->id, 0);
	if (t->unit_start)
		add_agent_time(t, a0);
}

/* ---- deferred requests (guard.md "Deferred requests") ----
 *
 * In a unit of an epoll, poll or select loop, per descriptor of the thread: a socket accepted is
 * a client (one the table never saw: read first, a client; written first, outbound); its request
 * starts at a read of data while none is in flight and ends at the next write of data to it.
 * Answered in the unit that read it, it was the unit's own work; answered in a later unit, it was
 * deferred: its duration is checked against the loop's deferred-request threshold (trained like a
 * unit's). A socket connected by a unit working for a client (acur) is that client's upstream;
 * the first read of data from it after its connect or a send ends the upstream's wait: an
 * [async wait] event with the stack at that read. Known descriptors cost a set lookup and a few
 * stores; one never seen an fstat().
 */

static size_t afd_bytes(void)
{
	return (size_t)GUARD_AFD_SETS * GUARD_AFD_WAYS * sizeof(struct gafd);
}

static int async_loop_call(uint16_t id)
{
	return id == GC_EPOLL_WAIT || id == GC_EPOLL_PWAIT || id == GC_POLL || id == GC_PPOLL || id == GC_SELECT ||
	       id == GC_PSELECT;
}

/* The table goes with its thread (training's threads have no slot: a key of its own). */
static pthread_key_t afd_key;
static pthread_once_t afd_once = PTHREAD_ONCE_INIT;
static int afd_key_ok;

static void afd_destructor(void *p)
{
	struct gthread *t = &guard_tls;

	if (t->afd == p) {
		t->aloop = 0;
		t->afd = NULL;
	}
	munmap(p, afd_bytes());
}

static void afd_key_init(void)
{
	afd_key_ok = pthread_key_create(&afd_key, afd_destructor) == 0;
}

__attribute__((noinline, cold)) static void async_map(struct gthread *t)
{
	/* once per thread; mapped, not malloc'ed: the program's allocator is never entered here */
	void *p;

	pthread_once(&afd_once, afd_key_init);
	p = afd_key_ok ? mmap(NULL, afd_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) :
			 MAP_FAILED;
	if (p != MAP_FAILED && pthread_setspecific(afd_key, p) != 0) {
		munmap(p, afd_bytes());
		p = MAP_FAILED;
	}
	if (p == MAP_FAILED)
		t->aloop = 0;
	else
		t->afd = p;
}

/* A unit begins after the loop's wait call id. */
static inline void async_unit_begin(struct gthread *t, uint16_t id)
{
	t->aseq++;
	t->acur = 0;
	t->aloop = G.cfg.async && async_loop_call(id);
	if (GUARD_UNLIKELY(t->aloop && !t->afd))
		async_map(t);
}

static inline struct gafd *async_find(const struct gthread *t, int fd)
{
	struct gafd *set = &t->afd[(uint32_t)(fd & (GUARD_AFD_SETS - 1)) * GUARD_AFD_WAYS];
	int32_t fd1 = fd + 1;

#pragma GCC unroll 8
	for (int w = 0; w < GUARD_AFD_WAYS; w++)
		if (set[w].fd1 == fd1)
			return &set[w];
	return NULL;
}

/* A descriptor seen first: a free way of its set, else the one least recently used. */
__attribute__((noinline, cold)) static struct gafd *async_claim(struct gthread *t, int fd)
{
	struct gafd *set = &t->afd[(uint32_t)(fd & (GUARD_AFD_SETS - 1)) * GUARD_AFD_WAYS], *e = set;

	for (int w = 1; w < GUARD_AFD_WAYS && e->fd1; w++)
		if (!set[w].fd1 || t->aseq - set[w].used > t->aseq - e->used)
			e = &set[w];
	memset(e, 0, sizeof(*e));
	e->fd1 = fd + 1;
	return e;
}

/* The ports the process accepts connections on, each + 1 (0 = free): every accept notes its
 * listener's, in a unit or not, so that a socket older than the thread's table is told by its
 * local port. A process listening on more ports than this guesses for the rest. */
#define ASYNC_LISTEN_PORTS 16
static _Atomic uint32_t listen_ports[ASYNC_LISTEN_PORTS];

/* The local port of a TCP socket, -1 if it is none; for a Unix socket, 1 when it is named (the
 * accepted side of a connection carries its listener's name) and 0 when not. */
static int32_t sock_port(int fd, int *is_unix)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	*is_unix = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET && len >= sizeof(struct sockaddr_in))
		return ntohs(((const struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		return ntohs(((const struct sockaddr_in6 *)&ss)->sin6_port);
	if (ss.ss_family == AF_UNIX) {
		*is_unix = 1;
		return len > sizeof(sa_family_t);
	}
	return -1;
}

static int listen_port_known(int32_t port)
{
	for (int i = 0; i < ASYNC_LISTEN_PORTS; i++) {
		uint32_t v = atomic_load_explicit(&listen_ports[i], memory_order_relaxed);

		if (!v)
			return 0;
		if (v == (uint32_t)port + 1)
			return 1;
	}
	return 0;
}

/* An accept from a listener the thread has not accepted from last: its port joins the set. */
__attribute__((noinline, cold)) static void async_listener(struct gthread *t, int lfd)
{
	int is_unix;
	int32_t port = sock_port(lfd, &is_unix);

	t->alisten = lfd + 1;
	if (port <= 0 || is_unix || listen_port_known(port))
		return;
	for (int i = 0; i < ASYNC_LISTEN_PORTS; i++) {
		uint32_t v = 0;

		if (atomic_compare_exchange_strong_explicit(&listen_ports[i], &v, (uint32_t)port + 1,
							    memory_order_relaxed, memory_order_relaxed) ||
		    v == (uint32_t)port + 1)
			return;
	}
}

/* A socket the thread's table does not know (older than it, or handed over by another thread).
 * Its address tells when it can: a TCP socket on a port the process accepts on, or a named Unix
 * socket, is a client; on another port (the process's accepts known) or unnamed, outbound. Else
 * read first, a client; written first, outbound. Not a socket: no requests. */
__attribute__((noinline, cold)) static struct gafd *async_guess(struct gthread *t, int fd, int how)
{
	struct gafd *e = async_claim(t, fd);
	struct stat st;
	int32_t port;
	int is_unix, saved = errno;   /* (gcall_finish()'s common path keeps none) */

	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		e->role = AF_SKIP;
		goto restore_errno;
	}
	port = sock_port(fd, &is_unix);
	if (is_unix || (port > 0 && atomic_load_explicit(&listen_ports[0], memory_order_relaxed))) {
		e->role = (is_unix ? port == 1 : listen_port_known(port)) ? AF_CLIENT : AF_OUT;
		e->sure = 1;
	} else {
		e->role = how == GA_READ ? AF_CLIENT : AF_OUT;
	}
restore_errno:
	errno = saved;
	return e;
}

/* The upstream's reply after a wait of dur since `since`: a wait event, stack at the read. */
__attribute__((noinline, cold)) static void async_wait(struct gthread *t, const struct gcall *c, int64_t since,
							int64_t dur)
{
	int64_t a0 = guard_now();
	int saved = errno;

	guard_record_here(t, GREC_WAIT, since, dur, 0, c->id, GREC_F_ASYNC);
	add_agent_time(t, a0);
	errno = saved;
}

/* A deferred request answered at now: trained, or checked against its loop's threshold. */
static void async_done_at(struct gthread *t, const struct gafd *e, const struct gcall *c, int64_t now)
{
	const struct gtab *tab;
	int64_t dur = now - e->t, thr, a0;
	int32_t acur;
	struct gviol v;

	atomic_fetch_add_explicit(&G.n.async_requests, 1, memory_order_relaxed);
	if (G.mode != GUARD_MODE_GUARD) {
		if (G.train)
			gtrain_async(G.train, e->loop, dur);
		return;
	}
	tab = atomic_load_explicit(&G.tab, memory_order_acquire);
	if (!tab || !t->slot || e->loop < 0 || (uint32_t)e->loop >= tab->nloops)
		return;
	thr = tab->loops[e->loop].async_thr;
	if (thr < 0 || dur <= thr)
		return;
	a0 = guard_now();
	/* where the answer is written: the stack the stream's symptom thread ends with (for this
	 * client, whomever the unit worked for last) */
	acur = t->acur;
	t->acur = e->fd1;
	guard_record_here(t, GREC_RUN, now, 0, 0, c->id, GREC_F_DETECT);
	t->acur = acur;
	memset(&v, 0, sizeof(v));
	v.tid = t->tid;
	v.slot = (uint32_t)(t->slot - G.slots);
	v.start = e->t;
	v.end = now;
	v.dur = dur;
	v.threshold = thr;
	v.loop = e->loop;
	v.type = -1;
	v.async = 1;
	v.req = e->fd1;   /* its stream: the events recorded while the thread worked for this client */
	atomic_fetch_add_explicit(&G.n.async_violations, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->slot->violations, 1, memory_order_relaxed);
	guard_enqueue(&v);
	if (t->unit_start)
		add_agent_time(t, a0);
}

/* The same, errno kept (gcall_finish()'s common path keeps none). */
__attribute__((noinline, cold)) static void async_done(struct gthread *t, const struct gafd *e, const struct gcall *c,
						       int64_t now)
{
	int saved = errno;

	async_done_at(t, e, c, now);
	errno = saved;
}

/* Data read (how GA_READ) or sent on c->fd: the request it starts or answers. gcall_finish()'s
 * common path, inline there. */
static inline void async_data(struct gthread *t, const struct gcall *c, int how, int64_t now)
{
	struct gafd *e = async_find(t, c->fd);

	if (GUARD_UNLIKELY(!e))
		e = async_guess(t, c->fd, how);
	e->used = t->aseq;
	if (e->role == AF_CLIENT) {
		if (how == GA_READ) {
			if (!e->t) {
				e->t = c->t0;
				e->seq = t->aseq;
				e->loop = t->loop;
			}
			t->acur = e->fd1;
		} else if (!e->known && !e->sure && e->t && t->acur && t->acur != e->fd1) {
			/* a guess, written with a request in flight for another client: an upstream the
			 * table took for a client (connected before it knew), its reply for a request */
			e->role = AF_UPSTREAM;
			e->peer = t->acur;
			e->t = c->t0;
		} else if (e->t) {
			/* the answer's first write: in a later unit than the read, the request was deferred */
			if (e->seq != t->aseq)
				async_done(t, e, c, now);
			e->t = 0;
		}
	} else if (e->role == AF_UPSTREAM) {
		if (how == GA_READ) {
			t->acur = e->peer;   /* the unit now works for the upstream's client */
			if (e->t) {
				int64_t dur = c->t0 - e->t;

				if (dur >= G.cfg.min_wait_ns && G.mode == GUARD_MODE_GUARD)
					async_wait(t, c, e->t, dur);   /* the client's event */
				e->t = 0;
			}
		} else if (!e->t) {
			/* a new request to it (a kept-alive upstream): for the client this unit works for */
			if (t->acur)
				e->peer = t->acur;
			e->t = c->t0;
		}
	} else if (e->role == AF_OUT && e->sure && how == GA_SEND && t->acur) {
		/* an outbound socket older than the table, written for a client: that client's upstream */
		e->role = AF_UPSTREAM;
		e->peer = t->acur;
		e->t = c->t0;
	}
}

/* A read or write of data, a connect under way or an accept, inside a unit of an epoll/poll/select loop. */
static void async_note(struct gthread *t, const struct gcall *c, int64_t now)
{
	int how = GCALL_ASYNC(c->info);
	int fd = how == GA_ACCEPT ? (int)c->res : c->fd;
	struct gafd *e;

	if (how != GA_ACCEPT && how != GA_CONNECT) {
		async_data(t, c, how, now);
		return;
	}
	/* a new connection: what it is is known. An upstream's wait starts at its connect. */
	e = async_find(t, fd);
	if (!e)
		e = async_claim(t, fd);
	memset(e, 0, sizeof(*e));
	e->fd1 = fd + 1;
	e->role = how == GA_ACCEPT ? AF_CLIENT : t->acur ? AF_UPSTREAM : AF_OUT;
	e->peer = how == GA_ACCEPT ? 0 : t->acur;
	e->t = e->role == AF_UPSTREAM ? c->t0 : 0;
	e->used = t->aseq;
	e->known = 1;
}

static inline void async_call(struct gthread *t, const struct gcall *c, int64_t now)
{
	int how = GCALL_ASYNC(c->info);

	if (GUARD_UNLIKELY(how == GA_ACCEPT) && c->res >= 0 && c->fd + 1 != t->alisten && G.cfg.async)
		async_listener(t, c->fd);
	if (GUARD_LIKELY(!t->aloop) || !t->unit_start || !how || !t->afd)
		return;
	/* data moved, a connect under way (res 0), a connection accepted (res its descriptor) */
	if (how == GA_ACCEPT ? c->res >= 0 : c->fd >= 0 && (c->res > 0 || (c->res == 0 && how == GA_CONNECT)))
		async_note(t, c, now);
}

void guard_async_close(int fd)
{
	struct gthread *t = &guard_tls;
	struct gafd *e;

	if (t->afd && fd >= 0 && (e = async_find(t, fd)))
		memset(e, 0, sizeof(*e));
}

/* The call t is in, for the watchdog. */
static inline void call_in_unit(struct gthread *t, const struct gcall *c, int64_t now)
{
	struct gslot *s = t->slot;   /* (loaded once: the stores could alias it) */

	atomic_store_explicit(&s->call_ret, c->ret, memory_order_relaxed);
	atomic_store_explicit(&s->call_obj, (uintptr_t)c->obj, memory_order_relaxed);
	atomic_store_explicit(&s->call_start, now, memory_order_relaxed);
	atomic_store_explicit(&s->call, c->id, memory_order_release);
}

static void guard_enter(struct gthread *t, struct gcall *c, int64_t now)
{
	const struct gtab *tab = atomic_load_explicit(&G.tab, memory_order_acquire);
	int L;

	if (!tab)
		return;
	if (GUARD_UNLIKELY(loop_twin(t, c))) {
		unit_end(t, now);
		c->loopsite = (int8_t)t->loop;
		return;
	}
	if (GCALL_LOOP(c->info) && (L = loop_match(tab, t, c->ret, c->cfa)) >= 0) {
		if (!t->unit_start || L == t->loop || tab->sites[L].depth < tab->sites[t->loop].depth) {
			/* back at the loop (or at a shallower one): the unit ends here */
			if (t->unit_start)
				unit_end(t, now);
			c->loopsite = (int8_t)L;
			return;
		}
		/* a deeper loop's wait inside this unit is part of the unit */
	}
	if (!t->unit_start)
		return;
	if (GCALL_KIND(c->info) != GK_LOCK && GCALL_KIND(c->info) != GK_JOIN)
		context_hit(t, tab, c, now);
	call_in_unit(t, c, now);
}

static void guard_finish(struct gthread *t, struct gcall *c, int64_t now, int64_t dur)
{
	if (c->loopsite >= 0) {
		const struct gtab *tab;

		/* no agent thread: the clock, what the collector pushed, the cgroup's sample (then the
		 * unit starts after that read, which is the agent's time) */
		if (G.region && guard_region_poll(t, now))
			now = guard_now();
		tab = atomic_load_explicit(&G.tab, memory_order_acquire);
		if (tab && !atomic_load_explicit(&G.muted, memory_order_relaxed))
			unit_begin(t, tab, c->loopsite, c->cfa, now);
		if (t->unit_start) {
			t->loop_obj = loop_object(c);
			async_unit_begin(t, c->id);
		}
		return;
	}
	if (dur >= G.cfg.min_wait_ns)
		record_wait(t, c, dur);
	if (!t->unit_start)
		return;
	atomic_store_explicit(&t->slot->call, 0, memory_order_relaxed);
	/* the time right after the call (a wait event's inspection, if any, is already in agent_ns) */
	check(t, c->id, now);
}

/* ---- training ---- */

static long thread_nvcsw(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) < 0)
		return 0;
	return ru.ru_nvcsw;
}

static struct gtsite *train_site(struct gthread *t, uintptr_t ret, int64_t depth, uint16_t call)
{
	struct gtsite *least = NULL;

	for (uint32_t i = 0; i < t->nsites; i++)
		if (t->sites[i].ret == ret && t->sites[i].depth == depth)
			return &t->sites[i];
	if (t->nsites < GUARD_TSITES) {
		least = &t->sites[t->nsites++];
	} else {
		/* forget the site seen least, but never the loop site */
		for (uint32_t i = 0; i < t->nsites; i++) {
			struct gtsite *s = &t->sites[i];

			if (s->ret == t->loop_ret && s->depth == t->loop_depth)
				continue;
			if (!least || s->calls < least->calls)
				least = s;
		}
	}
	memset(least, 0, sizeof(*least));
	least->ret = ret;
	least->depth = depth;
	least->call = call;
	return least;
}

static void train_context(struct gthread *t, const struct gcall *c)
{
	int64_t depth = (int64_t)(t->loop_cfa - c->cfa);
	size_t h = (size_t)(ctx_hash(c->ret, depth, t->loop) & 63);
	uint32_t id;

	if (t->ctxcache[h].ret == c->ret && t->ctxcache[h].depth == depth && t->ctxcache[h].loop == t->loop) {
		id = t->ctxcache[h].id;
	} else {
		int64_t a0 = guard_now();

		id = gtrain_context(G.train, t->loop, c->ret, depth, c->id);
		if (id == UINT32_MAX)
			return;
		t->ctxcache[h].ret = c->ret;
		t->ctxcache[h].depth = depth;
		t->ctxcache[h].loop = t->loop;
		t->ctxcache[h].id = id;
		/* capturing a new context walks the stack: not the unit's time */
		t->agent_ns += guard_now() - a0;
	}
	t->calls++;
	for (uint32_t i = 0; i < t->nctx; i++)
		if (t->ctx[i] == id)
			return;
	if (t->nctx < GP_MAX_CLASS_CONTEXTS)
		t->ctx[t->nctx++] = id;
}

__attribute__((noinline)) static void train_enter(struct gthread *t, struct gcall *c, int64_t now)
{
	int64_t depth;

	if (!GCALL_LOOP(c->info)) {
		if (t->unit_start && GCALL_KIND(c->info) != GK_LOCK && GCALL_KIND(c->info) != GK_JOIN)
			train_context(t, c);
		return;
	}
	depth = (int64_t)(t->base - c->cfa);
	c->nvcsw = thread_nvcsw();
	if (t->loop >= 0 && ((c->ret == t->loop_ret && depth == t->loop_depth) || loop_twin(t, c))) {
		if (t->unit_start) {
			gtrain_unit(G.train, t->loop, t->ctx, t->nctx, t->calls, now - t->unit_start - t->agent_ns);
			atomic_fetch_add_explicit(&G.n.train_units, 1, memory_order_relaxed);
			t->unit_start = 0;
		}
		c->loopsite = (int8_t)t->loop;
		return;
	}
	if (t->unit_start)
		train_context(t, c);
}

static int regular_file(int fd)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode));
}

__attribute__((noinline)) static void train_finish(struct gthread *t, struct gcall *c, int64_t now)
{
	int64_t depth;
	struct gtsite *site;
	int blocked;

	if (!GCALL_LOOP(c->info))
		return;
	depth = (int64_t)(t->base - c->cfa);
	/* a wait the thread slept in: where a loop waits for work */
	blocked = thread_nvcsw() > c->nvcsw;
	if (blocked && GCALL_FD(c->info) && regular_file(c->fd))
		blocked = 0;
	site = train_site(t, c->ret, depth, c->id);
	site->calls++;
	site->blocked += (uint32_t)blocked;
	if (blocked && site->blocked >= GUARD_LOOP_MIN_BLOCKS && c->loopsite < 0 &&
	    (t->loop < 0 || depth < t->loop_depth)) {
		/* the shallowest repeating wait of the thread is its loop site */
		int32_t L = gtrain_loop(G.train, c->ret, depth, c->id);

		if (L >= 0) {
			t->loop = L;
			t->loop_ret = c->ret;
			t->loop_depth = depth;
			c->loopsite = (int8_t)L;
		}
	}
	if (c->loopsite >= 0) {
		if (G.region)
			guard_clock_poll(now);   /* no agent thread keeps the clock's second */
		t->unit_start = now;
		t->agent_ns = 0;
		t->loop_cfa = c->cfa;
		t->loop_obj = loop_object(c);
		t->nctx = 0;
		t->calls = 0;
		async_unit_begin(t, c->id);
		if (GUARD_UNLIKELY(!G.ship_started) && !G.region)
			guard_start_shipper();
	}
}

/* ---- the wrappers' entry points ---- */

/* What every call's bookkeeping notes first, past what gcall_begin() noted. */
static inline void call_note(struct gthread *t, struct gcall *c)
{
	c->loopsite = -1;
	c->lean = 0;
	c->res = -1;
	guard_sigsnap_take_of(t, &c->sigs);
	atomic_store_explicit(&t->cur_call, c->id, memory_order_relaxed);
}

/* Any call's bookkeeping. */
__attribute__((noinline)) int gcall_enter_any(struct gthread *t, struct gcall *c)
{
	unsigned kind;
	int64_t now;

	t->nest = 1;
	t->nest_cfa = c->cfa;
	if (GUARD_UNLIKELY(!t->ready))
		guard_thread_setup(t);
	kind = GCALL_KIND(c->info);
	t->sync_call = kind == GK_LOCK || kind == GK_COND || kind == GK_SEM;
	if (GUARD_UNLIKELY(atomic_load_explicit(&G.start_wanted, memory_order_relaxed)) && !t->sync_call)
		guard_start_wanted();
	call_note(t, c);
	now = guard_now();
	if (G.mode == GUARD_MODE_GUARD)
		guard_enter(t, c, now);
	else
		train_enter(t, c, now);
	c->t0 = now;
	return 1;
}

__attribute__((noinline, cold)) static int gcall_violation(struct gthread *t, uint16_t call, int64_t now)
{
	violation_here(t, call, now);
	return 1;
}

/*
 * The common case first, calling nothing but in tail position (so that, with the clock on the
 * TSC, it saves no register): a call of an I/O or sleep inside a unit that repeats its path. What
 * guard_enter() and context_hit() do for it, in the same order; anything else goes to
 * gcall_enter_any(). A path's step is never a loop site of its unit's loop: a step is recorded
 * only where guard_enter() found none (or a deeper loop's), and which it finds depends on the
 * call's return address and depth below the loop's wait alone, both the step's, in the step's table.
 * t->path_on holds only in guard mode, inside a unit; a unit whose loop waits on an object takes
 * the whole way (loop_twin()). tsc: a constant, the clock (else clock_gettime(), a kvm-clock
 * guest's: gcall_enter_mono()).
 */
static inline __attribute__((always_inline)) int gcall_enter_on(struct gthread *t, struct gcall *c, int tsc)
{
	const struct gtab *tab = atomic_load_explicit(&G.tab, memory_order_acquire);
	int64_t now;
	int changed;

	if (GUARD_UNLIKELY(atomic_load_explicit(&G.start_wanted, memory_order_relaxed) ||
			   t->loop_obj || !path_next(t, tab, c->ret, (int64_t)(t->loop_cfa - c->cfa))))
		return gcall_enter_any(t, c);
	t->nest = 1;
	t->nest_cfa = c->cfa;
	t->sync_call = 0;
	call_note(t, c);
	c->lean = 1;
	now = tsc ? guard_now_tsc() : guard_mono_ns();
	changed = path_follow(t);
	path_check(t, tab, c, (int64_t)(t->loop_cfa - c->cfa));
	context_counted(t, changed);
	call_in_unit(t, c, now);
	c->t0 = now;
	if (GUARD_UNLIKELY(now > t->deadline))
		return gcall_violation(t, c->id, now);
	return 1;
}

__attribute__((noinline)) static int gcall_enter_mono(struct gthread *t, struct gcall *c)
{
	return gcall_enter_on(t, c, 0);
}

int gcall_enter(struct gthread *t, struct gcall *c)
{
	if (GUARD_UNLIKELY(!G.clk.ok))
		return gcall_enter_mono(t, c);
	return gcall_enter_on(t, c, 1);
}

/* Any call's end, at now; errno as the call left it. */
__attribute__((noinline)) static void gcall_finish_any(struct gthread *t, struct gcall *c, int64_t now)
{
	int *errp = t->errp;   /* set up at the thread's first call */
	int saved = *errp;

	atomic_store_explicit(&t->cur_call, 0, memory_order_relaxed);
	if (G.mode == GUARD_MODE_GUARD)
		guard_finish(t, c, now, now - c->t0);
	else
		train_finish(t, c, now);
	async_call(t, c, now);
	t->sync_call = 0;
	t->nest = 0;
	*errp = saved;
}

/*
 * The common case first: a call whose gcall_enter() took its common path (so: guard mode, inside
 * a unit, not its loop's wait, no accept or connect; a signal handler's calls in between are not
 * counted), shorter than a wait event, within the unit's threshold; at most a deferred request's
 * note of data moved on a socket. What gcall_finish_any() does for it, in the same order. It
 * changes no errno (clock_gettime() of CLOCK_MONOTONIC sets none): what the note may call that
 * could (async_guess(), async_done(), async_wait()) keeps it itself.
 */
void gcall_finish(struct gcall *c)
{
	struct gthread *t = &guard_tls;
	unsigned how = GCALL_ASYNC(c->info);
	int64_t now;

	if (GUARD_UNLIKELY(!c->lean)) {
		gcall_finish_any(t, c, guard_now());
		return;
	}
	now = guard_now();
	if (GUARD_UNLIKELY(now - c->t0 >= G.cfg.min_wait_ns || now > t->deadline)) {
		gcall_finish_any(t, c, now);
		return;
	}
	atomic_store_explicit(&t->cur_call, 0, memory_order_relaxed);
	atomic_store_explicit(&t->slot->call, 0, memory_order_relaxed);
	/* (a thread's aloop holds only with its table mapped) */
	if (how && t->aloop && c->fd >= 0 && c->res > 0)
		async_data(t, c, (int)how, now);
	t->sync_call = 0;
	t->nest = 0;
}

void guard_unit_reset_child(struct gthread *t)
{
	/* the child goes its own way: it is in no loop until it waits at one */
	t->loop = -1;
	t->unit_start = 0;
	t->agent_ns = 0;
	t->violated = 0;
	t->boosted = 0;
	t->nsites = 0;
	t->nctx = 0;
	t->best = -1;
	t->touched = 0;
	t->shared = 0;
	memset(t->hits, 0, sizeof(t->hits));
	memset(t->ctxcache, 0, sizeof(t->ctxcache));
	/* its slot's path is the parent's thread's: begun again at the first unit (the tid differs) */
	t->path = NULL;
	t->path_on = 0;
	t->path_rec = 0;
	/* a new region's table is zeros already: only the process's own memory is cleared (its pages
	 * would otherwise be touched in every forked child, a PostgreSQL backend's 64 KiB) */
	if (rel_table == rel_own)
		memset(rel_own, 0, sizeof(rel_own));
	/* the parent's requests are the parent's to answer */
	t->aloop = 0;
	t->acur = 0;
	if (t->afd)
		memset(t->afd, 0, afd_bytes());
}
