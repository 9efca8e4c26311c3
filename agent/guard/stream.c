/* stream: a violation's trace stream from one process's rings (see stream.h). */
#include "agent/guard/stream.h"
#include "agent/guard/symbolize.h"
#include "agent/guard/watch.h"
#include "common/arena.h"
#include "common/imap.h"
#include "common/intern.h"
#include "common/util.h"
#include "common/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define SYSCALL_CALLERS_MAX 126   /* callers of a system call: 128 frames with it and its place (as
				   * SM_GUARD_MAX_FRAMES by default) */

/* ---- collecting the window's events ---- */

struct ev {
	const struct grec *rec;   /* a copy, in the arena */
	pid_t tid;
};

struct evlist {
	struct ev *v;
	size_t n, cap;
};

/* a + b, saturated: a record's or a unit's times may be anything a hostile process wrote */
static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

static int overlaps(const struct grec *r, int64_t start, int64_t end)
{
	return r->ts <= end && sat_add(r->ts, r->dur) >= start;
}

/* A record for v's stream: one that overlaps the unit, but no [async wait] (another request's,
 * in flight while the loop served this unit: the thread never blocked in it); for a deferred
 * request, one recorded while its thread worked for its client (the loop's other requests
 * meanwhile are not its own; a descriptor names one connection while the request is in flight). */
static int wanted(const struct grec *r, const struct gviol *v)
{
	if (!overlaps(r, v->start, v->end))
		return 0;
	return v->async ? r->req == v->req : !(r->flags & GREC_F_ASYNC);
}

/* One ring's copy, and the records wanted from it. */
struct collect {
	const struct gsrc *src;
	const struct gviol *v;
	struct arena *a;
	struct evlist *out;
	size_t max;
	unsigned char *snap;      /* src->ring_max bytes */
};

/* The records of ring i (i == nslots: the shared ring) for v's stream; tid is the ring's thread,
 * or 0 for the shared ring (each record names its own). */
static void collect_ring(struct collect *c, uint32_t i, pid_t tid)
{
	size_t len, off = 0;
	const struct grec *r;

	if (c->out->n >= c->max)
		return;
	len = c->src->snapshot(c->src, i, c->snap, c->src->ring_max);
	while ((r = gring_next(c->snap, len, &off)) && c->out->n < c->max) {
		struct grec *copy;

		if (!wanted(r, c->v))
			continue;
		copy = arena_alloc(c->a, r->len);
		if (!copy || vec_reserve(&c->out->v, &c->out->cap, c->out->n + 1, sizeof(*c->out->v)) < 0)
			return;
		memcpy(copy, r, r->len);
		c->out->v[c->out->n].rec = copy;
		c->out->v[c->out->n].tid = tid ? tid : (pid_t)r->tid;
		c->out->n++;
	}
}

/* One more record for out: len bytes of a (zeroed), or NULL. */
static struct grec *new_record(struct arena *a, struct evlist *out, uint32_t nframes)
{
	size_t len = sizeof(struct grec) + nframes * sizeof(((struct grec *)0)->ip[0]);
	struct grec *w = arena_alloc(a, len);

	if (!w || vec_reserve(&out->v, &out->cap, out->n + 1, sizeof(*out->v)) < 0)
		return NULL;
	memset(w, 0, len);
	w->len = (uint32_t)len;
	w->nframes = nframes;
	return w;
}

#if defined(__x86_64__)
/* A word of the process's memory at addr: 0, or -1 when it cannot be read (no fault either way). */
static int read_word(pid_t pid, uint64_t addr, uint64_t *out)
{
	struct iovec local = { out, sizeof(*out) }, remote = { (void *)(uintptr_t)addr, sizeof(*out) };

	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(*out) ? 0 : -1;
}

/* Whether v's thread is asleep in v's system call, at v's stack pointer and place. */
static int still_in_call(const struct gsrc *src, const struct gviol *v)
{
	struct gwatch_sys now;

	return gwatch_syscall(src->proc, v->tid, src->read_small, &now) == 0 && now.nr == v->sys_call - 1 &&
	       now.sp == v->sys_sp && now.pc == v->sys_pc;
}
#endif

/*
 * The callers of a thread asleep in a system call (v->sys_pc, v->sys_sp): return addresses, innermost
 * first, read from its stack by the unwind tables' rules, at most max. The kernel tells only the stack
 * pointer and the pc: a frame whose CFA is its rbp ends the walk unless a frame below saved rbp. The
 * thread must be in the same call at the same place before the walk and once it is done, else
 * nothing: its stack may have changed under the walk. The agent's own frames are left out.
 */
static uint32_t syscall_callers(const struct gsrc *src, const struct gviol *v, uint64_t *ips, uint32_t max)
{
#if defined(__x86_64__)
	uint64_t pc = v->sys_pc, sp = v->sys_sp, rbp = 0;
	int rbp_known = 0;
	uint32_t n = 0;

	/* nothing is read unless the thread is where v says (v may be what a hostile process queued) */
	if (!src->sym || src->pid <= 0 || !sp || !still_in_call(src, v))
		return 0;
	for (uint32_t steps = 0; n < max && steps < 2 * max; steps++) {
		struct gsym_rule r;
		/* inside the instruction before: the system call (which moves no stack pointer), or the call
		 * a return address returns from (the next instruction may be another function's) */
		uintptr_t at = (uintptr_t)(pc - 1);
		uint64_t cfa, ra;

		if ((src->xlat && !(at = src->xlat(src, at))) || gsym_rule(src->sym, at, &r) < 0 ||
		    (r.cfa_reg == 6 && !rbp_known))
			break;
		cfa = (r.cfa_reg == 7 ? sp : rbp) + (uint64_t)r.cfa_off;
		/* a stack grows down: each caller's frame lies above (no loop on a bad rule or stack) */
		if (cfa <= sp || read_word(src->pid, cfa + (uint64_t)r.ra_off, &ra) < 0 || ra == 0)
			break;
		if (r.rbp == GSYM_AT)
			rbp_known = read_word(src->pid, cfa + (uint64_t)r.rbp_off, &rbp) == 0;
		else if (r.rbp == GSYM_UNKNOWN)
			rbp_known = 0;
		sp = cfa;
		pc = ra;
		/* the agent's own frames stay out (a wrapper that waits in the call it wraps): the stream
		 * cuts a stack at its outermost one, and this one's call and place lie below */
		if (!(ra >= src->self_lo && ra < src->self_hi))
			ips[n++] = ra;
	}
	if (n && !still_in_call(src, v))
		n = 0;
	return n;
#else
	(void)src;
	(void)v;
	(void)ips;
	(void)max;
	return 0;
#endif
}

/*
 * A unit in flight asleep in a system call the agent does not wrap (v->sys_call): its wait, since
 * the last thing its thread's ring holds of it (the call began after that) or the unit's start,
 * with the call, the call's place and its callers, walked from the stack pointer the kernel shows
 * ("guardtest!raw_sleep;libc.so.6!syscall;[syscall nanosleep]"): the thread is never signalled
 * outside a wrapped call.
 */
static void add_syscall_wait(const struct gsrc *src, const struct gviol *v, struct arena *a, struct evlist *out)
{
	uint64_t callers[SYSCALL_CALLERS_MAX];
	uint32_t ncallers;
	int64_t since = v->start;
	struct grec *w;

	if (since <= 0 || since > v->end)
		return;   /* not a unit's times: what a hostile process wrote */
	for (size_t i = 0; i < out->n; i++) {
		const struct grec *r = out->v[i].rec;
		int64_t end = r->dur > 0 ? sat_add(r->ts, r->dur) : r->ts;

		if (out->v[i].tid == v->tid && end > since && end < v->end)
			since = end;
	}
	ncallers = syscall_callers(src, v, callers, SYSCALL_CALLERS_MAX);
	if (!(w = new_record(a, out, 2 + ncallers)))
		return;
	w->kind = GREC_WAIT;
	w->ts = since;
	w->dur = v->end - since;
	w->ip[0] = GUARD_SYSCALL_TAG + (uint64_t)(v->sys_call - 1);
	w->ip[1] = v->sys_pc;
	memcpy(&w->ip[2], callers, ncallers * sizeof(callers[0]));
	out->v[out->n].rec = w;
	out->v[out->n].tid = v->tid;
	out->n++;
}

/* A unit still in flight, blocked in a wrapped call: its wait so far is an event too (or in a system
 * call the agent does not wrap). */
static void add_in_flight_wait(const struct gsrc *src, const struct gviol *v, struct arena *a, struct evlist *out)
{
	struct gslot *s = &src->slots[v->slot];
	uint32_t call = atomic_load(&s->call);
	int64_t since = atomic_load(&s->call_start);
	unsigned kind;
	struct grec *w = NULL;

	if (!call && v->sys_call > 0 && v->sys_call <= 4096) {
		add_syscall_wait(src, v, a, out);
		return;
	}
	if (!call || call >= GC_COUNT || since <= 0 || since > v->end)
		return;
	kind = GCALL_KIND(gcall_info(call));
	/* the stack the watchdog's signal took inside the call, if it came */
	for (size_t i = 0; i < out->n; i++) {
		const struct grec *r = out->v[i].rec;

		if (out->v[i].tid == v->tid && (r->flags & GREC_F_DETECT) && r->call == call) {
			w = (struct grec *)r;
			break;
		}
	}
	if (!w) {
		if (!(w = new_record(a, out, 1)))
			return;
		w->ip[0] = atomic_load(&s->call_ret);
		w->call = (uint16_t)call;
		out->v[out->n].rec = w;
		out->v[out->n].tid = v->tid;
		out->n++;
	}
	w->kind = GREC_WAIT;
	w->ts = since;
	w->dur = v->end - since;
	w->flags = (uint16_t)(w->flags & ~GREC_F_DETECT);
	if (kind == GK_LOCK || kind == GK_COND || kind == GK_SEM)
		w->readier = src->releases ? gwatch_release_of(src->releases, (const void *)atomic_load(&s->call_obj)) : 0;
}

/* ---- stacks and frames ---- */

struct builder {
	const struct gsrc *src;
	struct arena *a;
	struct gsym *sym;
	struct intern *frames;
	struct intern *stacks;
	struct wire_stack *stk;
	size_t nstk, capstk;
};

/* The names of the system calls a thread may sleep in (others by number). */
#define SC(name) { SYS_##name, #name },
static const struct {
	long nr;
	const char *name;
} syscalls[] = {
	SC(read) SC(write) SC(readv) SC(writev) SC(pread64) SC(pwrite64) SC(openat) SC(close) SC(fsync)
	SC(fdatasync) SC(sync) SC(syncfs) SC(flock) SC(fcntl) SC(ioctl) SC(nanosleep) SC(clock_nanosleep)
	SC(futex) SC(epoll_pwait) SC(ppoll) SC(pselect6) SC(wait4) SC(waitid) SC(accept4) SC(connect)
	SC(recvfrom) SC(recvmsg) SC(sendto) SC(sendmsg) SC(sendfile) SC(splice) SC(msync) SC(io_getevents)
	SC(io_uring_enter) SC(rt_sigtimedwait) SC(rt_sigsuspend) SC(semtimedop) SC(msgrcv) SC(msgsnd)
	SC(mq_timedreceive) SC(mq_timedsend) SC(getrandom) SC(copy_file_range) SC(fallocate) SC(renameat2)
	SC(unlinkat) SC(mkdirat) SC(newfstatat) SC(statx) SC(mmap) SC(munmap) SC(mprotect) SC(madvise)
#ifdef SYS_poll
	SC(poll) SC(select) SC(epoll_wait) SC(pause) SC(accept) SC(open) SC(stat) SC(semop) SC(rename)
	SC(unlink)
#endif
};
#undef SC

static const char *syscall_name(long nr)
{
	for (size_t i = 0; i < sizeof(syscalls) / sizeof(syscalls[0]); i++)
		if (syscalls[i].nr == nr)
			return syscalls[i].name;
	return NULL;
}

static int64_t frame_id(struct builder *b, uint64_t ip, int exact)
{
	char name[WIRE_MAX_FRAME + 1];
	uintptr_t at = (uintptr_t)(exact ? ip : ip - 1);   /* (a return address names its call) */
	size_t n;

	if (ip == GUARD_ASYNC_FRAME) {
		n = (size_t)snprintf(name, sizeof(name), "[async wait]");
	} else if (ip >= GUARD_SYSCALL_TAG && ip < GUARD_SYSCALL_TAG + 4096) {
		const char *sc = syscall_name((long)(ip - GUARD_SYSCALL_TAG));

		n = sc ? (size_t)snprintf(name, sizeof(name), "[syscall %s]", sc) :
			 (size_t)snprintf(name, sizeof(name), "[syscall %llu]", (unsigned long long)(ip - GUARD_SYSCALL_TAG));
	} else if (ip >= GUARD_CALL_TAG) {
		uint64_t call = ip - GUARD_CALL_TAG;

		n = (size_t)snprintf(name, sizeof(name), "%s!%s", b->src->libc_name,
				     call < GC_COUNT ? gcall_name[call] : "?");
	} else if (b->sym && (!b->src->xlat || (at = b->src->xlat(b->src, at)))) {
		n = gsym_function(b->sym, at, name, sizeof(name));
	} else {
		n = (size_t)snprintf(name, sizeof(name), "[unknown]+0x%llx", (unsigned long long)ip);
	}
	if (n == 0)
		n = (size_t)snprintf(name, sizeof(name), "[unknown]");
	return intern_put(b->frames, name, n, NULL);
}

/* The record's stack as a wire stack index: outermost first, the agent's frames out. */
static int64_t stack_id(struct builder *b, const struct grec *r)
{
	uint32_t ids[WIRE_MAX_STACK_DEPTH];
	uint64_t ips[WIRE_MAX_STACK_DEPTH];
	uint32_t n = 0, first = 0;
	int exact0 = (r->flags & GREC_F_EXACT_PC) != 0;
	bool added = false;
	int64_t id;

	/* everything up to the agent's outermost frame is the agent's or below a wrapper */
	for (uint32_t i = 0; i < r->nframes; i++)
		if (r->ip[i] >= b->src->self_lo && r->ip[i] < b->src->self_hi)
			first = i + 1;
	/* an async wait ends in its pseudo-frame, under the read of the upstream's reply */
	if (r->flags & GREC_F_ASYNC)
		ips[n++] = GUARD_ASYNC_FRAME;
	if (first && r->call && r->call < GC_COUNT)
		ips[n++] = GUARD_CALL_TAG + r->call;
	for (uint32_t i = first; i < r->nframes && n < WIRE_MAX_STACK_DEPTH; i++)
		ips[n++] = r->ip[i];
	if (n == 0)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t ip = ips[n - 1 - i];
		int exact = ip >= GUARD_CALL_TAG || (exact0 && first == 0 && n - 1 - i == 0);
		int64_t f = frame_id(b, ip, exact);

		if (f < 0)
			return -1;
		ids[i] = (uint32_t)f;
	}
	id = intern_put(b->stacks, ids, n * sizeof(ids[0]), &added);
	if (id < 0)
		return -1;
	if (added) {
		uint32_t *copy = arena_alloc(b->a, n * sizeof(ids[0]));

		if (!copy || vec_reserve(&b->stk, &b->capstk, b->nstk + 1, sizeof(*b->stk)) < 0)
			return -1;
		memcpy(copy, ids, n * sizeof(ids[0]));
		b->stk[b->nstk].frames = copy;
		b->stk[b->nstk].len = n;
		b->nstk++;
	}
	return id;
}

/* A wait of a single pseudo-frame on the symptom thread, ending at the unit's end (inside the symptom
 * window, which the miner's AOI keeps): the time the unit waited for a CPU (guard.md "CPU starvation"). */
static int pseudo_wait(struct builder *b, struct wire_event *e, const struct gviol *v, int64_t dur, const char *frame)
{
	int64_t f, id, ts;
	uint32_t fid;
	bool added = false;

	if (dur < b->src->min_wait_ns || dur <= 0)
		return 0;
	if ((f = intern_put(b->frames, frame, strlen(frame), NULL)) < 0)
		return 0;
	fid = (uint32_t)f;
	if ((id = intern_put(b->stacks, &fid, sizeof(fid), &added)) < 0)
		return 0;
	if (added) {
		uint32_t *copy = arena_alloc(b->a, sizeof(fid));

		if (!copy || vec_reserve(&b->stk, &b->capstk, b->nstk + 1, sizeof(*b->stk)) < 0)
			return 0;
		*copy = fid;
		b->stk[b->nstk].frames = copy;
		b->stk[b->nstk].len = 1;
		b->nstk++;
	}
	memset(e, 0, sizeof(*e));
	e->kind = WIRE_WAIT;
	e->tid = v->tid;
	ts = sat_add(v->end, -dur);
	e->ts_ns = ts > v->start ? ts : v->start;
	e->dur_ns = dur;
	e->stack = (uint32_t)id;
	return 1;
}

/* The unit's thread's throttled time. The cgroup's counter sums the throttled time of each CPU's run
 * queue of the cgroup, whichever of its threads waited there, and its value at the unit's start is
 * interpolated; the kernel counts a thread's throttled time in its run delay, so that delay, when
 * known, bounds it. */
static int64_t throttled_of(const struct gviol *v)
{
	int64_t thr = v->thr_known && v->throttled_ns > 0 ? v->throttled_ns : 0;

	if (v->rd_how != GUARD_RD_NONE && thr > v->run_delay_ns)
		thr = v->run_delay_ns > 0 ? v->run_delay_ns : 0;
	return thr;
}

/* The host's steal per CPU over v's unit (steal ns) that fell on its thread: none while the thread
 * waited in a call (events e[0..n)), which a stopped virtual CPU does not lengthen; within the unit's
 * duration. */
static int64_t steal_share(const struct gviol *v, int64_t steal, const struct wire_event *e, size_t n)
{
	int64_t len, waited = 0;

	if (__builtin_sub_overflow(v->end, v->start, &len) || len <= 0)
		return 0;
	for (size_t i = 0; i < n && waited < len; i++) {
		int64_t from, to;

		if (e[i].kind != WIRE_WAIT || e[i].tid != v->tid)
			continue;
		from = e[i].ts_ns > v->start ? e[i].ts_ns : v->start;
		to = sat_add(e[i].ts_ns, e[i].dur_ns);
		to = to < v->end ? to : v->end;
		if (to > from)
			waited = sat_add(waited, to - from);
	}
	steal = waited >= len ? 0 : (int64_t)((double)steal * (double)(len - waited) / (double)len);
	return steal < v->dur ? steal : (v->dur > 0 ? v->dur : 0);
}

/* The run queue's part and the throttled part of the unit's CPU wait (the kernel counts throttled time
 * in the run delay: the two events never count it twice), and the hypervisor's steal (steal ns, -1
 * unknown), which no run delay counts. */
static size_t starve_events(struct builder *b, struct wire_event *e, const struct gviol *v, int64_t steal)
{
	int64_t rd = v->run_delay_ns > 0 ? v->run_delay_ns : 0, thr = throttled_of(v);
	size_t n = 0;

	if (v->rd_how == GUARD_RD_NONE) {   /* no run delay known: the throttled time alone, when it is */
		n += (size_t)pseudo_wait(b, e + n, v, thr, "[cgroup throttled]");
	} else {
		n += (size_t)pseudo_wait(b, e + n, v, rd - thr, "[cpu run queue]");
		n += (size_t)pseudo_wait(b, e + n, v, thr, "[cgroup throttled]");
	}
	n += (size_t)pseudo_wait(b, e + n, v, steal, "[cpu steal]");
	return n;
}

/* ---- the stream ---- */

/* The build id of every module a `module+0xOFFSET` frame names, for the server to name them later. */
static void add_modules(struct wire_stream *ws, struct arena *a, const struct gsym *gs)
{
	struct wire_label *mods;
	size_t n = 0;

	if (!gs || !(mods = arena_calloc(a, WIRE_MAX_MODULES, sizeof(*mods))))
		return;
	for (size_t i = 0; i < ws->nframes && n < WIRE_MAX_MODULES; i++) {
		const char *f = ws->frames[i], *plus = strstr(f, "+0x");
		const char *bid;
		size_t k, len;

		if (!plus || plus == f || f[0] == '[')
			continue;
		len = (size_t)(plus - f);
		for (k = 0; k < n && !(strlen(mods[k].key) == len && memcmp(mods[k].key, f, len) == 0); k++)
			;
		if (k < n || !(bid = gsym_build_id(gs, f, len)) || !wire_build_id_ok(bid, strlen(bid)))
			continue;
		mods[n].key = arena_strndup(a, f, len);
		mods[n].value = arena_strndup(a, bid, strlen(bid));
		if (mods[n].key && mods[n].value)
			n++;
	}
	ws->modules = n ? mods : NULL;
	ws->nmodules = n;
}

static int tid_cmp(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return a < b ? -1 : a > b;
}

/*
 * The names of the stream's threads (the wire's "threads": the dashboard labels its timeline rows
 * with them), each thread's comm read now, on the shipping thread: never on the program's threads
 * nor in the handler. A thread that has exited since is left unnamed; one whose tid the kernel gave
 * again takes the new thread's name (rare, and only a label). Bytes the wire refuses (control
 * characters, invalid UTF-8) become '?'.
 */
/* The comm of thread tid of src's process into out: its length, or -1. */
static int thread_comm(const struct gsrc *src, int64_t tid, char *out, size_t outlen)
{
	char path[96];
	long n;

	if (tid <= 0 || outlen < 2)
		return -1;
	snprintf(path, sizeof(path), "%s/task/%lld/comm", src->proc, (long long)tid);
	if ((n = src->read_small(path, out, outlen)) <= 0)
		return -1;
	if (out[n - 1] == '\n')
		out[--n] = '\0';
	return (int)n;
}

static void add_threads(const struct gsrc *src, struct wire_stream *ws, struct arena *a)
{
	struct imap seen = IMAP_INIT;
	struct wire_thread *th;
	int64_t *tids;
	size_t n = 0, k = 0;

	if (imap_put(&seen, (uint64_t)ws->symptom.tid, 0) < 0)
		goto out_free;
	for (size_t i = 0; i < ws->nevents && seen.cnt < WIRE_MAX_THREADS; i++)
		if (imap_put(&seen, (uint64_t)ws->events[i].tid, 0) < 0 ||
		    (ws->events[i].readier_tid > 0 && seen.cnt < WIRE_MAX_THREADS &&
		     imap_put(&seen, (uint64_t)ws->events[i].readier_tid, 0) < 0))
			goto out_free;
	tids = arena_calloc(a, seen.cnt ? seen.cnt : 1, sizeof(*tids));
	th = arena_calloc(a, seen.cnt ? seen.cnt : 1, sizeof(*th));
	if (!tids || !th)
		goto out_free;
	for (size_t i = 0; i < seen.cap; i++)
		if (seen.keys[i] != IMAP_EMPTY)
			tids[n++] = (int64_t)seen.keys[i];
	/* in tid order: the same threads, the same text */
	qsort(tids, n, sizeof(*tids), tid_cmp);
	for (size_t i = 0; i < n; i++) {
		char comm[WIRE_MAX_THREAD_NAME + 1];
		int len = thread_comm(src, tids[i], comm, sizeof(comm));
		bool utf8;

		if (len <= 0)
			continue;
		utf8 = util_utf8_valid(comm, (size_t)len);
		for (int c = 0; c < len; c++)
			if ((unsigned char)comm[c] < 0x20 || comm[c] == 0x7f || (!utf8 && (unsigned char)comm[c] >= 0x80))
				comm[c] = '?';
		th[k].tid = tids[i];
		if ((th[k].name = arena_strndup(a, comm, (size_t)len)))
			k++;
	}
	ws->threads = k ? th : NULL;
	ws->nthreads = k;
out_free:
	imap_free(&seen);
}

static void add_label(struct wire_label *l, size_t *n, struct arena *a, const char *k, const char *v)
{
	if (*n >= WIRE_MAX_LABELS || !v || !*v)
		return;
	l[*n].key = arena_strndup(a, k, strlen(k));
	l[*n].value = arena_strndup(a, v, strlen(v));
	if (l[*n].key && l[*n].value)
		(*n)++;
}

static void add_label_i64(struct wire_label *l, size_t *n, struct arena *a, const char *k, int64_t v)
{
	char num[32];

	snprintf(num, sizeof(num), "%lld", (long long)v);
	add_label(l, n, a, k, num);
}

/* The unit's CPU wait, and the host's load and CPUs (guard.md "CPU starvation"). */
/* The first field of /proc/loadavg into out. */
static int load1(const struct gsrc *src, char *out, size_t outlen)
{
	char b[128];
	size_t n;

	if (src->read_small("/proc/loadavg", b, sizeof(b)) <= 0)
		return -1;
	n = strspn(b, "0123456789.");
	if (n == 0 || n >= outlen)
		return -1;
	memcpy(out, b, n);
	out[n] = '\0';
	return 0;
}

static void starve_labels(const struct gsrc *src, struct wire_label *l, size_t *n, struct arena *a,
			  const struct gviol *v, int64_t steal)
{
	static const char *const how[] = { "", "before", "inside", "rate" };
	char load[32];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	int64_t cpu_wait = -1;   /* at least: the throttled time is part of the run delay */

	if (v->rd_how != GUARD_RD_NONE) {
		add_label_i64(l, n, a, "unit.run_delay_ns", v->run_delay_ns);
		add_label(l, n, a, "unit.run_delay_window", how[v->rd_how < 4 ? v->rd_how : 0]);
		cpu_wait = v->run_delay_ns;
	} else if (v->thr_known) {
		cpu_wait = v->throttled_ns;
	}
	/* the hypervisor's steal is outside the run delay: it adds to it */
	if (steal >= 0)
		cpu_wait = sat_add(cpu_wait > 0 ? cpu_wait : 0, steal);
	/* starved: the CPU wait is at least half of the time over the threshold */
	if (cpu_wait >= 0 && !v->baseline && v->threshold >= 0 && v->dur > v->threshold &&
	    cpu_wait >= (v->dur - v->threshold + 1) / 2)
		add_label(l, n, a, "unit.cause", "cpu");
	if (v->thr_known)
		add_label_i64(l, n, a, "unit.throttled_ns", throttled_of(v));
	if (steal >= 0)
		add_label_i64(l, n, a, "unit.steal_ns", steal);
	if (load1(src, load, sizeof(load)) == 0)
		add_label(l, n, a, "host.load1", load);
	if (cpus > 0)
		add_label_i64(l, n, a, "host.cpus", cpus);
	add_label(l, n, a, "host.cpu_limit", src->cpu_limit);
}

int stream_build(const struct gsrc *src, const struct gviol *v, struct arena *keep, struct wire_stream *ws)
{
	struct arena *a = keep, *scratch = arena_open(0);   /* the ring's records: not kept */
	struct evlist evs = { NULL, 0, 0 };
	struct builder b;
	struct collect c;
	struct wire_event *we = NULL;
	struct wire_label *labels = arena_calloc(keep, WIRE_MAX_LABELS, sizeof(*labels));
	const char *tname = NULL;
	char num[4][32], loopsym[256], tbuf[64];
	size_t nl = 0, ne = 0;
	uint32_t n = src->nslots;
	int64_t steal = -1;
	int rc = -1;

	memset(&b, 0, sizeof(b));
	b.src = src;
	b.a = a;
	b.frames = intern_open(0);
	b.stacks = intern_open(0);
	c.src = src;
	c.v = v;
	c.a = scratch;
	c.out = &evs;
	c.max = src->max_events;
	c.snap = scratch ? arena_alloc(scratch, src->ring_max ? src->ring_max : 8) : NULL;
	loopsym[0] = tbuf[0] = '\0';
	if (!scratch || !labels || !b.frames || !b.stacks || !c.snap)
		goto out_free;
	/* the symptom thread first: its events go in even when the stream is full */
	if (v->slot < n)
		collect_ring(&c, v->slot, atomic_load(&src->slots[v->slot].tid));
	for (uint32_t i = 0; i < n && evs.n < c.max; i++)
		if (i != v->slot && atomic_load(&src->slots[i].state) != SLOT_FREE)
			collect_ring(&c, i, atomic_load(&src->slots[i].tid));
	collect_ring(&c, n, 0);
	if (v->hang && v->slot < n)
		add_in_flight_wait(src, v, scratch, &evs);
	b.sym = src->sym;
	we = arena_calloc(keep, evs.n + 3, sizeof(*we));   /* + the CPU wait's three pseudo-events */
	if (!we)
		goto out_free;
	for (size_t i = 0; i < evs.n; i++) {
		const struct grec *r = evs.v[i].rec;
		int64_t sid = stack_id(&b, r);

		if (sid < 0)
			continue;
		we[ne].kind = r->kind == GREC_WAIT ? WIRE_WAIT : WIRE_RUN;
		we[ne].tid = evs.v[i].tid;
		we[ne].ts_ns = r->ts;
		we[ne].dur_ns = r->dur > 0 ? r->dur : 0;
		we[ne].readier_tid = r->kind == GREC_WAIT ? r->readier : 0;
		we[ne].stack = (uint32_t)sid;
		ne++;
	}
	if (src->steal && (steal = src->steal(src, v->start, v->end)) > 0)
		steal = steal_share(v, steal, we, ne);
	/* a unit in flight may have no event of its own yet: a thread starved of the CPU takes few
	 * samples (they come with its CPU time), and only one asleep in a wrapped call is asked for
	 * its stack; its wait for the CPU is what it has to show */
	if (ne || v->hang)
		ne += starve_events(&b, we + ne, v, steal);
	if (ne == 0) {
		rc = 0;
		goto out_free;
	}
	src->names(src, v->loop, v->type, loopsym, sizeof(loopsym), tbuf, sizeof(tbuf));
	if (tbuf[0])
		tname = tbuf;
	if (v->async)
		tname = "async";   /* a deferred request, not a unit: no unit type */
	memset(ws, 0, sizeof(*ws));
	util_uuid_v4(ws->stream_id);
	/* copies: a captured stream may outlive its source (a process that ended) */
	ws->host = arena_strndup(a, src->host, strlen(src->host));
	ws->app = arena_strndup(a, src->app, strlen(src->app));
	ws->version = src->version && src->version[0] ? arena_strndup(a, src->version, strlen(src->version)) : NULL;
	ws->build_id = arena_strndup(a, src->build_id, strlen(src->build_id));
	if (!ws->host || !ws->app || !ws->build_id || (tname && !(tname = arena_strndup(a, tname, strlen(tname)))))
		goto out_free;
	snprintf(num[0], sizeof(num[0]), "%lld", (long long)v->threshold);
	snprintf(num[1], sizeof(num[1]), "%lld", (long long)v->dur);
	snprintf(num[2], sizeof(num[2]), "%lld", (long long)v->loop);
	snprintf(num[3], sizeof(num[3]), "%u", v->calls);
	add_label(labels, &nl, a, "unit.type", tname ? tname : "unknown");
	add_label(labels, &nl, a, "unit.threshold_ns", num[0]);
	add_label(labels, &nl, a, "unit.duration_ns", num[1]);
	add_label(labels, &nl, a, "unit.calls", num[3]);
	add_label(labels, &nl, a, "unit.loop", loopsym[0] ? loopsym : num[2]);
	add_label(labels, &nl, a, "unit.state", v->hang ? "in_flight" : "ended");
	if (v->async)
		add_label(labels, &nl, a, "unit.async", "1");
	starve_labels(src, labels, &nl, a, v, steal);
	add_label(labels, &nl, a, "guard.exe", src->exe);
	add_label(labels, &nl, a, "guard.version", GUARD_VERSION);
	add_label(labels, &nl, a, "kernel", src->kernel);
	/* the agent's own first: past the wire's limit, a process's own are what is left out */
	for (int i = 0; i < src->nlabels; i++)
		add_label(labels, &nl, a, src->labels[i].key, src->labels[i].value);
	ws->labels = labels;
	ws->nlabels = nl;
	ws->role = v->baseline ? WIRE_ROLE_BASELINE : WIRE_ROLE_VIOLATION;
	ws->weight = 1;
	ws->symptom.kind = v->baseline ? "unit_sample" : "unit_violation";
	ws->symptom.tid = v->tid;
	ws->symptom.start_ns = v->start;
	ws->symptom.end_ns = v->end;
	ws->symptom.unit_type = tname;
	ws->symptom.threshold_ns = v->threshold >= 0 ? v->threshold : -1;
	{
		size_t nf = intern_count(b.frames);
		const char **fr = arena_calloc(a, nf + 1, sizeof(*fr));
		struct wire_stack *stk = arena_calloc(a, b.nstk + 1, sizeof(*stk));

		if (!fr || !stk)
			goto out_free;
		/* the names and the stack list out of the builder's tables, into the stream's arena */
		for (size_t i = 0; i < nf; i++) {
			size_t len;
			const char *k = intern_key(b.frames, (uint32_t)i, &len);

			if (!(fr[i] = arena_strndup(a, k, len)))
				goto out_free;
		}
		memcpy(stk, b.stk, b.nstk * sizeof(*stk));
		ws->frames = fr;
		ws->nframes = nf;
		ws->stacks = stk;
		ws->nstacks = b.nstk;
	}
	add_modules(ws, a, b.sym);
	ws->events = we;
	ws->nevents = ne;
	add_threads(src, ws, a);
	rc = 1;
out_free:
	free(evs.v);
	free(b.stk);
	intern_free(b.frames);
	intern_free(b.stacks);
	arena_free(scratch);
	return rc;
}

