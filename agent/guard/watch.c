/* watch: one look at a process's units in flight (see watch.h). */
#include "agent/guard/watch.h"

#include <stdio.h>
#include <string.h>

#define SNAP_GAP_NS 10000000LL    /* a thread's snapshots at most every 10 ms (a fast watchdog) */

void gwatch_slots(struct gslot *slots, uint32_t n, int64_t now, int64_t hang_ns, const struct gwatch_ops *ops)
{
	for (uint32_t i = 0; i < n; i++) {
		struct gslot *s = &slots[i];
		int64_t start, thr, agent;
		uint32_t seq, flagged;

		if (atomic_load(&s->state) != SLOT_LIVE)
			continue;
		start = atomic_load_explicit(&s->unit_start, memory_order_acquire);
		if (start <= 0 || start > now)
			continue;
		seq = atomic_load(&s->unit_seq);
		thr = atomic_load(&s->threshold);
		agent = atomic_load(&s->agent_ns);
		/* the unit must not have changed while it was read */
		if (atomic_load_explicit(&s->unit_start, memory_order_acquire) != start)
			continue;
		flagged = atomic_load(&s->flagged_seq);
		if (thr >= 0 && now - start - agent > thr && flagged != seq) {
			atomic_store(&s->flagged_seq, seq);
			flagged = seq;
			/* its next CPU sample takes the stack while it runs */
			atomic_store(&s->capture_seq, seq);
		}
		if (flagged == seq && atomic_load(&s->captured_seq) != seq && atomic_load(&s->call)) {
			int64_t since = atomic_load(&s->call_start);

			/* asleep in a wrapped call (which the wrapper resumes): asked once per call */
			if (since != s->asked_at) {
				s->asked_at = since;
				ops->ask(ops->ctx, s);
			}
		}
		if (flagged == seq && now - start > hang_ns && atomic_load(&s->hang_seq) != seq) {
			/* the stack of the call it hangs in, for the stream shipped at the next look */
			atomic_store(&s->hang_seq, seq);
			if (atomic_load(&s->call))
				ops->ask(ops->ctx, s);
		} else if (flagged == seq && now - start > hang_ns) {
			uint32_t prev = atomic_load(&s->reported_seq);

			if (prev != seq && atomic_compare_exchange_strong(&s->reported_seq, &prev, seq)) {
				struct gviol v;

				memset(&v, 0, sizeof(v));
				v.tid = atomic_load(&s->tid);
				v.slot = i;
				v.start = start;
				v.end = now;
				v.dur = now - start - agent;
				v.threshold = thr;
				v.loop = atomic_load(&s->loop);
				v.type = atomic_load(&s->type);
				v.calls = atomic_load(&s->calls);
				v.hang = 1;
				atomic_fetch_add(&s->violations, 1);
				ops->hang(ops->ctx, s, &v);
			}
		}
	}
}

/* ---- run delay ---- */

int64_t gwatch_decimal(const char *p)
{
	int64_t v = 0;

	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v > (INT64_MAX - 9) / 10 ? INT64_MAX : v * 10 + (*p - '0');
	return v;
}

int64_t gwatch_run_delay(const char *path, gwatch_read_fn *read_small)
{
	char b[128];
	const char *p;

	/* the second field: ns waited on a run queue */
	if (read_small(path, b, sizeof(b)) <= 0 || !(p = strchr(b, ' ')))
		return -1;
	return gwatch_decimal(p + 1);
}

static void snap_store(struct gslot *s, pid_t tid, uint32_t seq, int mid, int64_t ns, int64_t at)
{
	atomic_fetch_add_explicit(&s->rd_gen, 1, memory_order_acq_rel);   /* odd: being written */
	atomic_store_explicit(&s->rd_ptid, atomic_load_explicit(&s->rd_tid, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_pseq, atomic_load_explicit(&s->rd_seq, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_pmid, atomic_load_explicit(&s->rd_mid, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_pns, atomic_load_explicit(&s->rd_ns, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_pat, atomic_load_explicit(&s->rd_at, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_tid, tid, memory_order_relaxed);
	atomic_store_explicit(&s->rd_seq, seq, memory_order_relaxed);
	atomic_store_explicit(&s->rd_mid, mid, memory_order_relaxed);
	atomic_store_explicit(&s->rd_ns, ns, memory_order_relaxed);
	atomic_store_explicit(&s->rd_at, at, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->rd_gen, 1, memory_order_release);
}

void gwatch_run_delays(struct gslot *slots, uint32_t n, const char *proc, gwatch_read_fn *read_small,
		       int64_t (*clock)(void))
{
	for (uint32_t i = 0; i < n; i++) {
		struct gslot *s = &slots[i];
		pid_t tid;
		uint32_t seq, have;
		int64_t start, ns, at;
		int mid;
		char path[96];

		if (atomic_load(&s->state) != SLOT_LIVE)
			continue;
		tid = atomic_load(&s->tid);
		start = atomic_load_explicit(&s->unit_start, memory_order_acquire);
		seq = atomic_load(&s->unit_seq);
		have = atomic_load_explicit(&s->rd_seq, memory_order_relaxed);
		mid = atomic_load_explicit(&s->rd_mid, memory_order_relaxed);
		at = clock();
		if (atomic_load_explicit(&s->rd_tid, memory_order_relaxed) == tid) {
			/* one read per unit at most: between units after one ended, or in one not covered */
			if (start ? have == seq || (have == seq - 1 && !mid) : have == seq && !mid)
				continue;
			if (at - atomic_load_explicit(&s->rd_at, memory_order_relaxed) < SNAP_GAP_NS)
				continue;
		}
		snprintf(path, sizeof(path), "%s/task/%d/schedstat", proc, (int)tid);
		ns = gwatch_run_delay(path, read_small);
		/* the thread moved on while it was read: next tick */
		if (ns < 0 || atomic_load(&s->unit_seq) != seq ||
		    atomic_load_explicit(&s->unit_start, memory_order_acquire) != start)
			continue;
		snap_store(s, tid, seq, start != 0, ns, at);
	}
}
