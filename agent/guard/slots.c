/*
 * slots: one slot per program thread that runs units (its ring, its unit in
 * flight as the agent's threads see it), given back when the thread ends;
 * the descriptors the agent holds in the program's table, so that the
 * wrappers keep the program's hands off them.
 */
#include "agent/guard/hot.h"
#include "agent/guard/region.h"
#include "agent/guard/unwind.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

extern void *__libc_stack_end;

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
	t->errp = &errno;
	if (t->tid == getpid()) {
		/* the main thread: its stack starts where the kernel put argc */
		if (!t->base)
			t->base = (uintptr_t)__libc_stack_end;
		unwind_thread_init();
	} else {
		/* a thread started before the agent, or not through pthread_create (jemalloc's own), may
		 * be inside the program's allocator now, holding its locks, where nothing may allocate
		 * (pthread_getattr_np() would): its bounds from this frame up (unwind_thread_stack). */
		if (!t->base)
			t->base = (uintptr_t)pthread_self();
		unwind_thread_stack(sp, 0);
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
		if (G.region)
			atomic_store(&G.region->nslots, n + 1);
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
		if (guard_ring_init(&s->ring, (uint32_t)(s - G.slots)) < 0) {
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

uint64_t guard_units(void)
{
	uint32_t n = atomic_load(&G.nslots);
	uint64_t units = atomic_load(&G.n.units_gone) + atomic_load(&G.n.train_units);

	for (uint32_t i = 0; i < n; i++)
		units += atomic_load(&G.slots[i].units);
	return units;
}

/* The child of a fork has one thread: this one; the others' slots can be taken again at once. */
void guard_slots_reset_child(struct gthread *t)
{
	uint32_t n = atomic_load(&G.nslots);

	guard_lock_reset_child(&dead.mu);
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
	for (int i = 0; i < GUARD_MAX_FDS; i++) {
		int fd = atomic_exchange(&G.fds[i], -1);

		if (fd >= 0)
			guard_real_close(fd);
	}
	atomic_store(&G.nfds, 0);
}

int guard_lock_reset_child(pthread_mutex_t *m)
{
	int held = pthread_mutex_trylock(m) != 0;

	pthread_mutex_init(m, NULL);
	return held;
}
