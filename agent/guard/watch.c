/* watch: one look at a process's units in flight (see watch.h). */
#include "agent/guard/watch.h"

#include <string.h>

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

