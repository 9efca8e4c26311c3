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
			/* the stack of the call it hangs in, for the stream shipped at the next look (only
			 * there: outside a wrapped call the signal could cut a system call short) */
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

/* ---- a hang outside the wrapped calls ---- */

/* The hex number at p ("0x..."), its end in *end: 0, or -1 when none. */
static int hex_at(const char *p, uint64_t *v, const char **end)
{
	int n = 0;

	if (p[0] != '0' || p[1] != 'x')
		return -1;
	for (p += 2, *v = 0; n < 16 && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')); p++, n++)
		*v = *v << 4 | (uint64_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
	*end = p;
	return n ? 0 : -1;
}

int gwatch_syscall(const char *proc, pid_t tid, gwatch_read_fn *read_small, struct gwatch_sys *out)
{
	char path[96], b[320];
	const char *p, *end;

	snprintf(path, sizeof(path), "%s/task/%d/syscall", proc, (int)tid);
	/* "NR ARG1 .. ARG6 SP PC" asleep in a system call; "running", or "-1 SP PC" otherwise */
	if (read_small(path, b, sizeof(b)) <= 0 || (out->nr = gwatch_decimal(b)) < 0 || out->nr >= 4096)
		return -1;
	/* the last two fields */
	if (!(p = strrchr(b, ' ')) || hex_at(p + 1, &out->pc, &end) < 0)
		return -1;
	while (p > b && p[-1] != ' ')
		p--;
	if (p == b || hex_at(p, &out->sp, &end) < 0 || *end != ' ')
		return -1;
	return 0;
}

void gwatch_hang_syscall(const struct gslot *s, struct gviol *v, const char *proc, gwatch_read_fn *read_small)
{
	struct gwatch_sys sys;

	if (atomic_load(&s->call) != 0)
		return;   /* a wrapped call's wait is the slot's own */
	if (gwatch_syscall(proc, v->tid, read_small, &sys) < 0)
		return;
	v->sys_call = (int32_t)sys.nr + 1;
	v->sys_pc = sys.pc;
	v->sys_sp = sys.sp;
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

int gwatch_schedstat(const char *path, gwatch_read_fn *read_small, struct gwatch_sched *out)
{
	char b[128];
	const char *p;

	/* "CPU-ns run-queue-ns timeslices" */
	if (read_small(path, b, sizeof(b)) <= 0 || !(p = strchr(b, ' ')))
		return -1;
	out->cpu_ns = gwatch_decimal(b);
	out->delay_ns = gwatch_decimal(p + 1);
	return out->cpu_ns < 0 || out->delay_ns < 0 ? -1 : 0;
}

static void snap_store(struct gslot *s, pid_t tid, uint32_t seq, int mid, const struct gwatch_sched *now, int64_t at)
{
	atomic_fetch_add_explicit(&s->rd_gen, 1, memory_order_acq_rel);   /* odd: being written */
	atomic_store_explicit(&s->rd_ptid, atomic_load_explicit(&s->rd_tid, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_pseq, atomic_load_explicit(&s->rd_seq, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_pmid, atomic_load_explicit(&s->rd_mid, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_pns, atomic_load_explicit(&s->rd_ns, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_pat, atomic_load_explicit(&s->rd_at, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_pcpu, atomic_load_explicit(&s->rd_cpu, memory_order_relaxed), memory_order_relaxed);
	atomic_store_explicit(&s->rd_tid, tid, memory_order_relaxed);
	atomic_store_explicit(&s->rd_seq, seq, memory_order_relaxed);
	atomic_store_explicit(&s->rd_mid, mid, memory_order_relaxed);
	atomic_store_explicit(&s->rd_ns, now->delay_ns, memory_order_relaxed);
	atomic_store_explicit(&s->rd_at, at, memory_order_relaxed);
	atomic_store_explicit(&s->rd_cpu, now->cpu_ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->rd_gen, 1, memory_order_release);
}

void gwatch_run_delays(struct gslot *slots, uint32_t n, const char *proc, gwatch_read_fn *read_small,
		       int64_t (*clock)(void))
{
	for (uint32_t i = 0; i < n; i++) {
		struct gslot *s = &slots[i];
		pid_t tid;
		uint32_t seq, have;
		int64_t start, at;
		struct gwatch_sched now;
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
		/* the thread moved on while it was read: next tick */
		if (gwatch_schedstat(path, read_small, &now) < 0 || atomic_load(&s->unit_seq) != seq ||
		    atomic_load_explicit(&s->unit_start, memory_order_acquire) != start)
			continue;
		snap_store(s, tid, seq, start != 0, &now, at);
	}
}


/* part * num / den within [0, hi], computed in double and clamped before the cast (a slot another
 * process wrote may make it any size) */
static int64_t scaled(int64_t part, int64_t num, int64_t den, int64_t hi)
{
	double r = (double)part * (double)num / (double)den;

	return r >= (double)hi ? hi : r > 0 ? (int64_t)r : 0;
}

/* The run queue's wait in a window of len ns over which the thread's run delay grew by delay and its
 * CPU time by cpu (-1: unknown): within [0, len], and no more than len - cpu (a thread that ran did
 * not wait; CPU time past the window's end, a stack walk's, makes it 0). A window that began before
 * the unit is taken as the unit's, its own time before it having been spent asleep between units:
 * so neither is the unit's CPU time counted as waiting. */
static int64_t waited(int64_t delay, int64_t cpu, int64_t len)
{
	if (len <= 0)
		return 0;
	if (cpu >= 0 && delay > len - cpu)
		delay = len - cpu;
	return gwatch_clamp(delay, len);
}

/* The run delay in [v->start, at] of a unit whose snapshot (ns, cpu, at) was taken inside it: from the
 * snapshot before (pns, pcpu, pat) when there is one of the same thread, the rate over [pat, at] (the
 * difference itself when it was taken between the previous unit and this one); else the rate of the
 * tail, tail over tail_len. */
static int64_t head_delay(const struct gviol *v, uint32_t useq, int64_t at, int64_t ns, int64_t cpu, pid_t ptid,
			  uint32_t pseq, int pmid, int64_t pat, int64_t pns, int64_t pcpu, int64_t tail, int64_t tail_len)
{
	int64_t head_len = at - v->start;

	if (head_len <= 0)
		return 0;
	if (ptid == v->tid && pat > 0 && pat < at && pns >= 0 && pns <= ns) {
		if (pseq == useq - 1 && !pmid)
			return waited(ns - pns, pcpu >= 0 && pcpu <= cpu ? cpu - pcpu : -1, head_len);
		return scaled(ns - pns, head_len, at - pat, head_len);
	}
	return tail_len > 0 ? scaled(tail, head_len, tail_len, head_len) : 0;
}

void gwatch_unit_run_delay(const struct gslot *s, struct gviol *v, const struct gwatch_sched *now)
{
	int64_t len = v->end - v->start, ns = 0, at = 0, cpu = 0, pns = 0, pat = 0, pcpu = 0, cur, ccpu;
	uint32_t g, seq = 0, pseq = 0, useq = atomic_load(&s->unit_seq);
	int mid = 0, pmid = 0, tries = 0;
	pid_t tid = 0, ptid = 0;

	v->rd_how = GUARD_RD_NONE;
	v->run_delay_ns = 0;
	if (now && now->delay_ns >= 0) {
		cur = now->delay_ns;
		do {
			g = atomic_load_explicit(&s->rd_gen, memory_order_acquire);
			tid = atomic_load_explicit(&s->rd_tid, memory_order_relaxed);
			seq = atomic_load_explicit(&s->rd_seq, memory_order_relaxed);
			mid = atomic_load_explicit(&s->rd_mid, memory_order_relaxed);
			ns = atomic_load_explicit(&s->rd_ns, memory_order_relaxed);
			at = atomic_load_explicit(&s->rd_at, memory_order_relaxed);
			cpu = atomic_load_explicit(&s->rd_cpu, memory_order_relaxed);
			ptid = atomic_load_explicit(&s->rd_ptid, memory_order_relaxed);
			pseq = atomic_load_explicit(&s->rd_pseq, memory_order_relaxed);
			pmid = atomic_load_explicit(&s->rd_pmid, memory_order_relaxed);
			pns = atomic_load_explicit(&s->rd_pns, memory_order_relaxed);
			pat = atomic_load_explicit(&s->rd_pat, memory_order_relaxed);
			pcpu = atomic_load_explicit(&s->rd_pcpu, memory_order_relaxed);
			atomic_thread_fence(memory_order_acquire);
		} while (((g & 1) || g != atomic_load_explicit(&s->rd_gen, memory_order_relaxed)) && ++tries < 100);
		/* the CPU time since the snapshot, -1 when unknown (or the slot says nonsense) */
		ccpu = cpu >= 0 && now->cpu_ns >= cpu ? now->cpu_ns - cpu : -1;
		if (!(g & 1) && tries < 100 && tid == v->tid && at > 0 && at <= v->end && ns >= 0 && ns <= cur) {
			if (seq == useq - 1 && !mid) {
				/* from between the last unit and this one: the unit and the end of its idle wait */
				v->run_delay_ns = waited(cur - ns, ccpu, len);
				v->rd_how = GUARD_RD_BEFORE;
			} else if (seq == useq && mid) {
				/* from inside the unit: exact from there, the part before estimated */
				int64_t tail = waited(cur - ns, ccpu, v->end - at < len ? v->end - at : len);
				int64_t head = head_delay(v, useq, at, ns, cpu, ptid, pseq, pmid, pat, pns, pcpu, cur - ns,
							  v->end - at);

				/* their sum within the unit, never past it (nor past what an int64_t holds) */
				v->run_delay_ns = head > len - tail ? len : tail + head;
				v->rd_how = GUARD_RD_INSIDE;
			} else if (v->end > at) {
				/* older (units back to back): the window's rate over the unit's length */
				v->run_delay_ns = scaled(cur - ns, len, v->end - at, len);
				v->rd_how = GUARD_RD_RATE;
			}
		}
	}
	/* the unit's duration leaves the agent's own time out (its samples, its stack walks) */
	if (v->dur > 0 && v->dur < len)
		v->run_delay_ns = gwatch_clamp(v->run_delay_ns, v->dur);
}
