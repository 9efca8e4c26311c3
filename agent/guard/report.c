/*
 * report: a violation becomes a trace stream (guard.md "Inspection on
 * violation", wire-format.md) on the shipping thread: the events of every
 * thread's ring that overlap the unit, the symptom thread's first, their
 * stacks named by the symbolizer (outermost first, the agent's own frames
 * replaced by the wrapped call they stand for), the unit type, threshold and
 * duration as labels. Shipping is agent/ship.c's: zstd, retries with backoff,
 * the spool when the server cannot be reached.
 *
 * It also remembers whether the server answered its last request: at exit only
 * a server that has been answering gets the last report (within EXIT_NET_MS);
 * one that accepts connections and never answers holds nothing up.
 */
#include "agent/guard/modmap.h"
#include "agent/guard/gtab.h"
#include "agent/guard/hot.h"
#include "agent/guard/threads.h"
#include "agent/guard/symbolize.h"
#include "agent/guard/unwind.h"
#include "agent/ship.h"
#include "agent/spool.h"
#include "common/arena.h"
#include "common/imap.h"
#include "common/intern.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "common/vec.h"
#include "common/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>


#define SYM_IDLE_NS 60000000000LL        /* symbol tables go after a minute without reports */
#define SHIP_RETRY_NS 60000000000LL      /* a shipper that gave up is opened again after this */
#define DRAIN_EVERY_NS 60000000000LL
#define EXIT_NET_MS 2000                 /* exit: the last report and training's upload, at most (a loaded server) */
#define EXIT_HELD_MS 3000                /* exit: the minute's candidates, at most; the rest to the spool */

static struct shipper *shipper;
static struct shipper *exit_sh;         /* at exit: the candidates' own connection (guard_report_exit_held) */
static int64_t exit_until;
static int64_t shipper_retry_at, next_drain;
static struct gsym *sym;
static int64_t sym_used;
static struct spool *spool_only;        /* no URL: streams go to the spool directly */
static unsigned char *snap;             /* one ring's copy */
static size_t snap_cap;
static int server_ok;                   /* the server answered the last request */
/* the minute's candidates, captured when they violated (threads.c, "the shipping budget"): the
 * shipping thread's alone, by the index of their item in G.held */
static struct capture {
	struct arena *a;          /* NULL: nothing held */
	struct wire_stream ws;
	uint32_t tag;             /* the violation it is (G.held_tag when captured) */
	int empty;                /* nothing to ship (no event, or the capture failed) */
	int failed;               /* the capture failed (counted as lost once) */
	size_t bytes;
} caps[GUARD_HELD];

/* Whether the server answered: a request the exit cut short (G.ship_cancel) says nothing about it,
 * and must not keep the held streams from going to it at exit. */
static void note_server(int answered)
{
	if (answered)
		server_ok = 1;
	else if (!G.ship_cancel)
		server_ok = 0;
}

void guard_report_reset_child(void)
{
	/* the parent's: their pages are shared until written, so they are left, not freed */
	shipper = NULL;
	sym = NULL;
	spool_only = NULL;
	shipper_retry_at = next_drain = 0;
	server_ok = 0;
	memset(caps, 0, sizeof(caps));   /* the parent's candidates, shipped by the parent */
}

void guard_report_thread_end(void)
{
	shipper_free(shipper);
	shipper = NULL;
	spool_free(spool_only);
	spool_only = NULL;
	shipper_retry_at = next_drain = 0;
}

/* ---- the agent's sockets: high numbers, registered, never closed by the program ---- */

static int open_socket(void *ctx, int domain, int type, int protocol)
{
	(void)ctx;
	return guard_fd_adopt(socket(domain, type | SOCK_CLOEXEC, protocol));
}

static void close_socket(void *ctx, int fd)
{
	(void)ctx;
	guard_fd_unregister(fd);
	guard_real_close(fd);
}

static void on_ship_event(void *ctx, enum ship_event ev, const char *origin, const char *stream_id,
			  const char *msg)
{
	(void)ctx;
	(void)origin;
	switch (ev) {
	case SHIP_EV_SPOOLED:
		atomic_fetch_add(&G.n.spooled, 1);
		break;
	case SHIP_EV_KEPT:
		break;
	case SHIP_EV_REJECTED:
	case SHIP_EV_INVALID:
		atomic_fetch_add(&G.n.rejected, 1);
		guard_log("stream refused", "stream=%s reason=\"%s\"", stream_id, msg);
		break;
	case SHIP_EV_LOST:
		atomic_fetch_add(&G.n.lost, 1);
		guard_log("stream lost", "stream=%s reason=\"%s\"", stream_id, msg);
		break;
	}
}

static void ship_options(struct ship_opts *o)
{
	ship_opts_init(o);
	o->url = G.cfg.url;
	o->token = G.token[0] ? G.token : NULL;
	o->spool_dir = G.cfg.spool[0] ? G.cfg.spool : NULL;
	o->spool_max = G.cfg.spool_max;
	o->max_attempts = 4;
	o->timeout_s = 10;
	o->report = on_ship_event;
	o->open_socket = open_socket;
	o->close_socket = close_socket;
}

static struct shipper *get_shipper(int64_t now)
{
	struct ship_opts o;
	char err[256];

	if (shipper && shipper_stopped(shipper)) {
		guard_log("shipping stopped; streams go to the spool for a while", "reason=\"%s\"",
			  shipper_error(shipper));
		shipper_free(shipper);
		shipper = NULL;
		shipper_retry_at = now + SHIP_RETRY_NS;
		server_ok = 0;
	}
	if (shipper || !G.cfg.url[0] || now < shipper_retry_at)
		return shipper;
	ship_options(&o);
	o.cancel = &G.ship_cancel;
	shipper = shipper_open(&o, err, sizeof(err));
	if (!shipper) {
		guard_log("cannot start shipping", "error=\"%s\"", err);
		shipper_retry_at = now + SHIP_RETRY_NS;
	}
	return shipper;
}

/* The process's symbolizer, made at its first use. */
static struct gsym *guard_symbolizer(void)
{
	if (!sym) {
		struct gmodmap mm = { NULL, 0 };
		char err[256];

		if (unwind_modmap_load(&mm) == 0) {
			sym = gsym_open(&mm, err, sizeof(err));
			if (!sym)
				guard_log("cannot open the symbolizer", "error=\"%s\"", err);
		}
		gmodmap_release(&mm);
	}
	sym_used = guard_now();
	return sym;
}

void guard_report_tick(int64_t now)
{
	if (sym && now - sym_used > SYM_IDLE_NS) {
		gsym_free(sym);
		sym = NULL;
	}
	if (G.cfg.spool[0] && G.cfg.url[0] && now >= next_drain) {
		struct shipper *sh = get_shipper(now);

		next_drain = now + DRAIN_EVERY_NS;
		if (sh)
			shipper_drain(sh);
	}
}

/* ---- the process's report about itself ---- */

/* Streams waiting in the spool (the host's directory, all its processes'), or 0 when unknown. */
static uint64_t spool_backlog(void)
{
	struct spool *sp;
	struct spool_entry *e = NULL;
	size_t n = 0;
	char err[256];

	if (!G.cfg.spool[0] || !(sp = spool_open(G.cfg.spool, G.cfg.spool_max, 0, err, sizeof(err))))
		return 0;
	if (spool_list(sp, &e, &n) < 0)
		n = 0;
	free(e);
	spool_free(sp);
	return n;
}

static int report_self(struct shipper *sh, int exiting)
{
	struct buf body = BUF_INIT(64 << 10);
	struct jsonw w;
	char err[512];
	int rc = -1;

	jsonw_init_compact(&w, &body);
	jsonw_object(&w);
	jsonw_ki64(&w, "v", 1);
	jsonw_kstr(&w, "host", G.host);
	jsonw_kstr(&w, "exe", G.exe[0] ? G.exe : G.exe_name);
	jsonw_kstr(&w, "build_id", G.build_id);
	jsonw_kstr(&w, "mode", guard_mode_name(G.mode));
	jsonw_kstr(&w, "agent_version", GUARD_VERSION);
	jsonw_kstr(&w, "app", G.app);
	jsonw_ki64(&w, "pid", G.pid);
	jsonw_ki64(&w, "started_ns", G.started_ns);
	jsonw_ku64(&w, "units", guard_units());
	jsonw_ku64(&w, "violations", atomic_load(&G.n.violations));
	jsonw_ku64(&w, "drops", atomic_load(&G.n.suppressed) + atomic_load(&G.n.queue_drops) +
		   atomic_load(&G.n.lost));
	jsonw_ku64(&w, "spool_backlog", spool_backlog());
	jsonw_ku64(&w, "ship_errors", atomic_load(&G.n.rejected) + atomic_load(&G.n.lost));
	jsonw_kbool(&w, "exiting", exiting != 0);
	jsonw_end(&w);
	if (jsonw_finish(&w) < 0) {
		guard_log("cannot build the report", "%s", "");
	} else {
		struct buf answer = BUF_INIT(64 << 10);

		rc = shipper_post_json(sh, "/api/v1/agents/report", body.data, body.len, &answer, err, sizeof(err));
		note_server(rc == 0);
		if (rc < 0)
			guard_log("report not delivered", "error=\"%s\"", err);
		else if (!exiting)
			guard_apply_settings(answer.data, answer.len);
		buf_release(&answer);
	}
	buf_release(&body);
	return rc;
}

void guard_report_self(void)
{
	struct shipper *sh = get_shipper(guard_now());

	if (sh)
		report_self(sh, 0);   /* else the server is out of reach: the next report says it all */
}

static void upload_profile(struct shipper *sh)
{
	struct buf prof = BUF_INIT((size_t)64 << 20), body = BUF_INIT((size_t)64 << 20);
	struct jsonw w;
	char err[512];
	int rc;

	if (!G.train)
		return;
	rc = gtrain_own_write(G.train, &prof);
	if (rc != 0) {
		if (rc < 0)
			guard_log("cannot write the profile to upload", "%s", "");
		goto out;
	}
	jsonw_init_compact(&w, &body);
	jsonw_object(&w);
	jsonw_ki64(&w, "v", 1);
	jsonw_kstr(&w, "host", G.host);
	jsonw_ki64(&w, "pid", G.pid);
	jsonw_ki64(&w, "started_ns", G.started_ns);
	jsonw_key(&w, "profile");
	jsonw_raw(&w, prof.data, prof.len);
	jsonw_end(&w);
	if (jsonw_finish(&w) < 0) {
		guard_log("cannot build the profile upload", "%s", "");
	} else {
		rc = shipper_post_json(sh, "/api/v1/profiles", body.data, body.len, NULL, err, sizeof(err));
		note_server(rc == 0);
		if (rc < 0)
			guard_log("profile not uploaded", "error=\"%s\"", err);
	}
out:
	buf_release(&prof);
	buf_release(&body);
}

void guard_profile_upload(void)
{
	struct shipper *sh = get_shipper(guard_now());

	if (sh)
		upload_profile(sh);
}

void guard_report_exit(int upload)
{
	struct ship_opts o;
	struct shipper *sh;
	int64_t until = guard_now() + (int64_t)EXIT_NET_MS * 1000000;
	char err[256];

	if (!G.cfg.url[0] || !server_ok || (!upload && G.cfg.report_ns <= 0))
		return;
	/* a connection of its own: the shipping one gave up when the exit began */
	ship_options(&o);
	o.max_attempts = 1;
	o.timeout_ms = EXIT_NET_MS;
	sh = shipper_open(&o, err, sizeof(err));
	if (!sh)
		return;
	if (upload)
		upload_profile(sh);
	if (server_ok && G.cfg.report_ns > 0) {
		int64_t left = (until - guard_now()) / 1000000;

		if (left > 0) {
			shipper_set_timeout_ms(sh, left);
			report_self(sh, 1);
		}
	}
	shipper_free(sh);
}

void guard_report_exit_held(int begin)
{
	struct ship_opts o;
	char err[256];

	if (!begin) {
		shipper_free(exit_sh);
		exit_sh = NULL;
		return;
	}
	/* the shipping connection gave up when the exit began: a server that has been answering gets
	 * the held streams on a connection of their own, within EXIT_HELD_MS */
	if (exit_sh || !G.cfg.url[0] || !server_ok)
		return;
	ship_options(&o);
	o.max_attempts = 1;
	o.timeout_ms = EXIT_HELD_MS;
	exit_until = guard_now() + (int64_t)EXIT_HELD_MS * 1000000;
	exit_sh = shipper_open(&o, err, sizeof(err));
}

void guard_profile_refresh(void)
{
	struct shipper *sh = get_shipper(guard_now());
	struct buf body = BUF_INIT((size_t)64 << 20);
	char path[200], err[512];
	long status;

	if (!sh)
		return;
	snprintf(path, sizeof(path), "/api/v1/profiles/%s", G.build_id);
	if (shipper_get(sh, path, body.max, &body, &status, err, sizeof(err)) == 0)
		guard_profile_swap(body.data, body.len);
	else if (status != 404)
		guard_log("cannot fetch the fleet's profile", "error=\"%s\"", err);
	note_server(status != 0);
	buf_release(&body);
}

/* ---- collecting the window's events ---- */

struct ev {
	const struct grec *rec;   /* a copy, in the arena */
	pid_t tid;
};

struct evlist {
	struct ev *v;
	size_t n, cap;
};

static int overlaps(const struct grec *r, int64_t start, int64_t end)
{
	return r->ts <= end && r->ts + r->dur >= start;
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

/* The records of a ring for v's stream; tid is the ring's thread, or 0 for the shared ring
 * (each record names its own). */
static void collect_ring(struct gring *ring, pid_t tid, const struct gviol *v, struct arena *a, struct evlist *out,
			 size_t max)
{
	size_t len, off = 0;
	const struct grec *r;

	if (!ring->size || out->n >= max)
		return;
	if (snap_cap < ring->size) {
		unsigned char *p = realloc(snap, ring->size);

		if (!p)
			return;
		snap = p;
		snap_cap = ring->size;
	}
	len = gring_snapshot(ring, snap, snap_cap);
	while ((r = gring_next(snap, len, &off)) && out->n < max) {
		struct grec *copy;

		if (!wanted(r, v))
			continue;
		copy = arena_alloc(a, r->len);
		if (!copy || vec_reserve(&out->v, &out->cap, out->n + 1, sizeof(*out->v)) < 0)
			return;
		memcpy(copy, r, r->len);
		out->v[out->n].rec = copy;
		out->v[out->n].tid = tid ? tid : (pid_t)r->tid;
		out->n++;
	}
}

static void collect_slot(struct gslot *s, const struct gviol *v, struct arena *a, struct evlist *out, size_t max)
{
	collect_ring(&s->ring, atomic_load(&s->tid), v, a, out, max);
}

/* A unit still in flight, blocked in a wrapped call: its wait so far is an event too. */
static void add_in_flight_wait(const struct gviol *v, struct arena *a, struct evlist *out)
{
	struct gslot *s = &G.slots[v->slot];
	uint32_t call = atomic_load(&s->call);
	int64_t since = atomic_load(&s->call_start);
	struct grec *w = NULL;

	if (!call || call >= GC_COUNT || since <= 0 || since > v->end)
		return;
	/* the stack the watchdog's signal took inside the call, if it came */
	for (size_t i = 0; i < out->n; i++) {
		const struct grec *r = out->v[i].rec;

		if (out->v[i].tid == v->tid && (r->flags & GREC_F_DETECT) && r->call == call) {
			w = (struct grec *)r;
			break;
		}
	}
	if (!w) {
		w = arena_alloc(a, sizeof(*w) + sizeof(w->ip[0]));
		if (!w || vec_reserve(&out->v, &out->cap, out->n + 1, sizeof(*out->v)) < 0)
			return;
		memset(w, 0, sizeof(*w));
		w->len = (uint32_t)(sizeof(*w) + sizeof(w->ip[0]));
		w->nframes = 1;
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
	if (gcall_info[call].kind == GK_LOCK || gcall_info[call].kind == GK_COND || gcall_info[call].kind == GK_SEM)
		w->readier = guard_last_release((const void *)atomic_load(&s->call_obj));
}

/* ---- stacks and frames ---- */

struct builder {
	struct arena *a;
	struct gsym *sym;
	struct intern *frames;
	struct intern *stacks;
	struct wire_stack *stk;
	size_t nstk, capstk;
};

static int64_t frame_id(struct builder *b, uint64_t ip, int exact)
{
	char name[WIRE_MAX_FRAME + 1];
	size_t n;

	if (ip == GUARD_ASYNC_FRAME) {
		n = (size_t)snprintf(name, sizeof(name), "[async wait]");
	} else if (ip >= GUARD_CALL_TAG) {
		uint64_t call = ip - GUARD_CALL_TAG;

		n = (size_t)snprintf(name, sizeof(name), "%s!%s", G.libc_name,
				     call < GC_COUNT ? gcall_info[call].name : "?");
	} else if (b->sym) {
		n = gsym_function(b->sym, (uintptr_t)(exact ? ip : ip - 1), name, sizeof(name));
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
		if (r->ip[i] >= G.self_lo && r->ip[i] < G.self_hi)
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
	int64_t f, id;
	uint32_t fid;
	bool added = false;

	if (dur < G.cfg.min_wait_ns || dur <= 0)
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
	e->ts_ns = v->end - dur > v->start ? v->end - dur : v->start;
	e->dur_ns = dur;
	e->stack = (uint32_t)id;
	return 1;
}

/* The run queue's part and the throttled part of the unit's CPU wait (the kernel counts throttled time
 * in the run delay: the two events never count it twice). */
static size_t starve_events(struct builder *b, struct wire_event *e, const struct gviol *v)
{
	int64_t rd = v->run_delay_ns, thr = v->thr_known ? v->throttled_ns : 0;
	size_t n = 0;

	if (v->rd_how == GUARD_RD_NONE)
		return 0;
	if (thr > rd)
		thr = rd;
	n += (size_t)pseudo_wait(b, e + n, v, rd - thr, "[cpu run queue]");
	n += (size_t)pseudo_wait(b, e + n, v, thr, "[cgroup throttled]");
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
static void add_threads(struct wire_stream *ws, struct arena *a)
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
		int len = guard_thread_comm(tids[i], comm, sizeof(comm));
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
static void starve_labels(struct wire_label *l, size_t *n, struct arena *a, const struct gviol *v)
{
	static const char *const how[] = { "", "before", "inside", "rate" };
	char load[32];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (v->rd_how != GUARD_RD_NONE) {
		add_label_i64(l, n, a, "unit.run_delay_ns", v->run_delay_ns);
		add_label(l, n, a, "unit.run_delay_window", how[v->rd_how < 4 ? v->rd_how : 0]);
		/* starved: the CPU wait is at least half of the time over the threshold */
		if (!v->baseline && v->threshold >= 0 && v->dur > v->threshold &&
		    v->run_delay_ns >= (v->dur - v->threshold + 1) / 2)
			add_label(l, n, a, "unit.cause", "cpu");
	}
	if (v->thr_known)
		add_label_i64(l, n, a, "unit.throttled_ns", v->throttled_ns);
	if (guard_starve_load1(load, sizeof(load)) == 0)
		add_label(l, n, a, "host.load1", load);
	if (cpus > 0)
		add_label_i64(l, n, a, "host.cpus", cpus);
	add_label(l, n, a, "host.cpu_limit", guard_starve_cpu_limit());
}

static void deliver(const struct wire_stream *ws)
{
	int64_t now = guard_now();
	struct shipper *sh = exit_sh ? exit_sh : get_shipper(now);

	if (exit_sh) {
		int64_t left = (exit_until - now) / 1000000;

		if (left > 0)
			shipper_set_timeout_ms(exit_sh, left);
		else
			sh = NULL;   /* out of time: the spool */
	}

	if (sh) {
		const struct ship_counters *c = shipper_counters(sh);
		uint64_t before = c->accepted + c->duplicates;

		if (shipper_add_stream(sh, ws, "violation") == 0)
			shipper_flush(sh);
		c = shipper_counters(sh);
		atomic_fetch_add(&G.n.shipped, c->accepted + c->duplicates - before);
		note_server(c->accepted + c->duplicates > before);
		return;
	}
	/* no server (or it gave up a while ago): straight to the spool */
	if (G.cfg.spool[0]) {
		struct buf text = BUF_INIT(SHIP_MAX_STREAM_TEXT);
		char err[256];

		if (!spool_only)
			spool_only = spool_open(G.cfg.spool, G.cfg.spool_max, 1, err, sizeof(err));
		if (spool_only && wire_write_json(ws, &text) == 0 &&
		    spool_put(spool_only, ws->stream_id, text.data, text.len) == 0) {
			atomic_fetch_add(&G.n.spooled, 1);
			buf_release(&text);
			return;
		}
		buf_release(&text);
	}
	atomic_fetch_add(&G.n.lost, 1);
}

/*
 * The stream of v, built into keep (everything ws points to lives there, or is the process's for
 * its life: host, app, the unit type's name in a guard table, which is never freed): 1, or 0 when
 * no event of the window could be named (counted as empty), -1 when out of memory.
 */
static int build_stream(const struct gviol *v, struct arena *keep, struct wire_stream *ws)
{
	struct arena *a = keep, *scratch = arena_open(0);   /* the ring's records: not kept */
	struct evlist evs = { NULL, 0, 0 };
	struct builder b;
	struct wire_event *we = NULL;
	struct wire_label *labels = arena_calloc(keep, WIRE_MAX_LABELS, sizeof(*labels));
	const struct gtab *tab = atomic_load(&G.tab);
	const char *tname = NULL, *loopsym = NULL;
	char num[4][32];
	size_t nl = 0, ne = 0, max = (size_t)G.cfg.max_events;
	uint32_t n = atomic_load(&G.nslots);
	int rc = -1;

	memset(&b, 0, sizeof(b));
	b.a = a;
	b.frames = intern_open(0);
	b.stacks = intern_open(0);
	if (!scratch || !labels || !b.frames || !b.stacks)
		goto out_free;
	/* the symptom thread first: its events go in even when the stream is full */
	if (v->slot < n)
		collect_slot(&G.slots[v->slot], v, scratch, &evs, max);
	for (uint32_t i = 0; i < n && evs.n < max; i++)
		if (i != v->slot && atomic_load(&G.slots[i].state) != SLOT_FREE)
			collect_slot(&G.slots[i], v, scratch, &evs, max);
	collect_ring(&G.shared_ring, 0, v, scratch, &evs, max);
	if (v->hang && v->slot < n)
		add_in_flight_wait(v, scratch, &evs);
	b.sym = guard_symbolizer();
	we = arena_calloc(keep, evs.n + 3, sizeof(*we));   /* + the CPU wait's two pseudo-events */
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
	if (ne)
		ne += starve_events(&b, we + ne, v);
	if (ne == 0) {
		atomic_fetch_add(&G.n.empty, 1);
		rc = 0;
		goto out_free;
	}
	if (tab && v->loop >= 0 && (uint32_t)v->loop < tab->nloops) {
		loopsym = tab->loops[v->loop].symbol;
		if (v->type >= 0 && (uint32_t)v->type < tab->loops[v->loop].ntypes)
			tname = tab->loops[v->loop].type_name[v->type];
	}
	if (v->async)
		tname = "async";   /* a deferred request, not a unit: no unit type */
	memset(ws, 0, sizeof(*ws));
	util_uuid_v4(ws->stream_id);
	ws->host = G.host;
	ws->app = G.app;
	ws->version = G.cfg.version[0] ? G.cfg.version : NULL;
	ws->build_id = G.build_id;
	for (int i = 0; i < G.cfg.nlabels; i++)
		add_label(labels, &nl, a, G.cfg.labels[i].key, G.cfg.labels[i].value);
	snprintf(num[0], sizeof(num[0]), "%lld", (long long)v->threshold);
	snprintf(num[1], sizeof(num[1]), "%lld", (long long)v->dur);
	snprintf(num[2], sizeof(num[2]), "%lld", (long long)v->loop);
	snprintf(num[3], sizeof(num[3]), "%u", v->calls);
	add_label(labels, &nl, a, "unit.type", tname ? tname : "unknown");
	add_label(labels, &nl, a, "unit.threshold_ns", num[0]);
	add_label(labels, &nl, a, "unit.duration_ns", num[1]);
	add_label(labels, &nl, a, "unit.calls", num[3]);
	add_label(labels, &nl, a, "unit.loop", loopsym && *loopsym ? loopsym : num[2]);
	add_label(labels, &nl, a, "unit.state", v->hang ? "in_flight" : "ended");
	if (v->async)
		add_label(labels, &nl, a, "unit.async", "1");
	starve_labels(labels, &nl, a, v);
	add_label(labels, &nl, a, "guard.exe", G.exe);
	add_label(labels, &nl, a, "guard.version", GUARD_VERSION);
	add_label(labels, &nl, a, "kernel", G.kernel);
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
	add_threads(ws, a);
	rc = 1;
out_free:
	free(evs.v);
	free(b.stk);
	intern_free(b.frames);
	intern_free(b.stacks);
	arena_free(scratch);
	return rc;
}

void guard_report(const struct gviol *v)
{
	struct arena *a = arena_open(0);
	struct wire_stream ws;

	if (a && build_stream(v, a, &ws) > 0)
		deliver(&ws);
	arena_free(a);
}

/* ---- the minute's candidates, captured (threads.c, "the shipping budget") ---- */


int guard_capture(uint32_t i, uint32_t tag, const struct gviol *v)
{
	struct capture *c = &caps[i];
	int rc;

	arena_free(c->a);
	memset(c, 0, sizeof(*c));
	c->a = arena_open(GUARD_HELD_STREAM);
	rc = c->a ? build_stream(v, c->a, &c->ws) : -1;
	if (rc < 0) {
		arena_free(c->a);
		c->a = NULL;
		c->failed = 1;
		c->tag = tag;
		atomic_fetch_add(&G.n.lost, 1);
		guard_log("a violation's stream could not be captured", "bytes_max=%zu", GUARD_HELD_STREAM);
		return -1;
	}
	c->tag = tag;
	c->empty = rc == 0;
	c->bytes = arena_reserved(c->a);
	return 0;
}

int guard_captured(uint32_t i, uint32_t tag)
{
	return (caps[i].a || caps[i].failed) && caps[i].tag == tag;
}

size_t guard_captured_bytes(uint32_t i)
{
	return caps[i].a ? caps[i].bytes : 0;
}

void guard_capture_ship(uint32_t i, double weight)
{
	struct capture *c = &caps[i];

	if (c->a && !c->empty) {
		c->ws.weight = weight;
		deliver(&c->ws);
	}
	arena_free(c->a);
	memset(c, 0, sizeof(*c));
}
