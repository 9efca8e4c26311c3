/*
 * report: the shipping thread's side of the server (in-process mode; the host's collector has its own,
 * collect.c): a violation's stream (built by stream.c from this process's rings) delivered through
 * agent/ship.c (zstd, retries with backoff, the spool when the server cannot be reached), the
 * process's reports, training's uploads, the fleet's profile.
 *
 * It also remembers whether the server answered its last request: at exit only
 * a server that has been answering gets the last report (within EXIT_NET_MS);
 * one that accepts connections and never answers holds nothing up.
 */
#include "agent/guard/budget.h"
#include "agent/guard/modmap.h"
#include "agent/guard/stream.h"
#include "agent/guard/gtab.h"
#include "agent/guard/hot.h"
#include "agent/guard/learnt.h"
#include "agent/guard/lazy.h"
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
#include <strings.h>
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
static int server_ok;                   /* the server answered the last request */
static int tls_gone;                    /* at exit: libcurl's OpenSSL was cleaned up (guard_report_exit_begin) */
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
	tls_gone = 0;
}

void guard_report_thread_end(void)
{
	/* a TLS connection's close would call into the freed OpenSSL: left to the process's end */
	if (!tls_gone)
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

/* Whether any of the servers (a URL or a list of them) is reached over TLS. */
static int any_https(const char *urls)
{
	for (const char *p = urls; *p; p++)
		if (strncasecmp(p, "https://", 8) == 0)
			return 1;
	return 0;
}

static struct shipper *get_shipper(int64_t now)
{
	struct ship_opts o;
	char err[256];

	/* at exit, no libcurl loaded for the first time: the exit cancels transfers, so its streams
	 * would go to the spool anyway, and the program's exit handlers may have cleaned up OpenSSL */
	if (tls_gone || (G.exiting && !lazy_loaded(LAZY_CURL)))
		return NULL;
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
	/* before libcurl is loaded: its curl_global_init() initialises OpenSSL (and libssh2 through
	 * it), which the program's exit may be cleaning up at that moment */
	if (!lazy_loaded(LAZY_CURL) && lazy_crypto_loaded())
		guard_exit_gate();
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

static int report_self(struct shipper *sh, int exiting)
{
	struct buf body = BUF_INIT(64 << 10);
	const struct wire_report r = {
		.host = G.host,
		.exe = G.exe[0] ? G.exe : G.exe_name,
		.build_id = G.build_id,
		.mode = guard_mode_name(G.mode),
		.agent_version = GUARD_VERSION,
		.app = G.app,
		.collector = "process",   /* the host's collector reports "host" (collect.c) */
		.pid = G.pid,
		.started_ns = G.started_ns,
		.units = guard_units(),
		.violations = atomic_load(&G.n.violations),
		.drops = atomic_load(&G.n.suppressed) + atomic_load(&G.n.queue_drops) + atomic_load(&G.n.lost),
		.spool_backlog = spool_count(G.cfg.spool, G.cfg.spool_max),   /* the host's, all its processes' */
		.ship_errors = atomic_load(&G.n.rejected) + atomic_load(&G.n.lost),
		.exiting = exiting != 0,
	};
	char err[512];
	int rc = -1;

	if (wire_write_report(&r, &body) < 0) {
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
	if (learnt_upload_body(G.host, G.pid, G.started_ns, prof.data, prof.len, &body) < 0) {
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

void guard_report_exit_begin(void)
{
	/* plain HTTP calls nothing of OpenSSL's that its cleanup frees once libcurl is initialised
	 * (PostgreSQL and redis, with OpenSSL of their own, ship at exit so). The exit gate runs this
	 * ahead of OpenSSL's exit handler; it comes too late when the program called
	 * OPENSSL_cleanup() itself */
	if (!any_https(G.cfg.url) || !lazy_tls_stopped())
		return;
	tls_gone = 1;
	server_ok = 0;
	guard_log("no network at exit: the program cleaned up OpenSSL", "spool=%s",
		  G.cfg.spool[0] ? G.cfg.spool : "none");
}

void guard_report_exit(int upload)
{
	struct ship_opts o;
	struct shipper *sh;
	int64_t until = guard_now() + (int64_t)EXIT_NET_MS * 1000000;
	char err[256];

	if (!G.cfg.url[0] || !server_ok || tls_gone || (!upload && G.cfg.report_ns <= 0))
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
	if (exit_sh || !G.cfg.url[0] || !server_ok || tls_gone)
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

static void deliver(void *ctx, const struct wire_stream *ws)
{
	int64_t now = guard_now();
	struct shipper *sh = exit_sh ? exit_sh : get_shipper(now);

	(void)ctx;
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

/* ---- the process seen from its shipping thread ---- */

static size_t own_snapshot(const struct gsrc *src, uint32_t i, void *out, size_t cap)
{
	return gring_snapshot(i < src->nslots ? &src->slots[i].ring : G.shared_ring, out, cap);
}

static void own_names(const struct gsrc *src, int32_t loop, int32_t type, char *loopsym, size_t lcap, char *tname,
		      size_t tcap)
{
	const struct gtab *tab = atomic_load(&G.tab);

	(void)src;
	if (tab && loop >= 0 && (uint32_t)loop < tab->nloops) {
		snprintf(loopsym, lcap, "%s", tab->loops[loop].symbol);
		if (type >= 0 && (uint32_t)type < tab->loops[loop].ntypes)
			snprintf(tname, tcap, "%s", tab->loops[loop].type_name[type]);
	}
}

static int64_t own_steal(const struct gsrc *src, int64_t start, int64_t end)
{
	(void)src;
	return guard_starve_steal(start, end);
}

/* The stream of v (build, for the budget and the baselines): 1, 0 when it has no event (counted
 * as empty), -1 when out of memory. */
static int build(void *ctx, const struct gviol *v, struct arena *keep, struct wire_stream *ws)
{
	struct gsrc src = {
		.proc = "/proc/self",
		.pid = G.pid,
		.slots = G.slots,
		.nslots = atomic_load(&G.nslots),
		.snapshot = own_snapshot,
		.ring_max = gring_round(G.cfg.ring_bytes),
		.names = own_names,
		.releases = guard_releases(),
		.read_small = guard_read_small,
		.steal = own_steal,
		.host = G.host,
		.app = G.app,
		.version = G.cfg.version,
		.build_id = G.build_id,
		.exe = G.exe,
		.kernel = G.kernel,
		.libc_name = G.libc_name,
		.cpu_limit = guard_starve_cpu_limit(),
		.labels = G.cfg.labels,
		.nlabels = G.cfg.nlabels,
		.self_lo = G.self_lo,
		.self_hi = G.self_hi,
		.min_wait_ns = G.cfg.min_wait_ns,
		.max_events = (size_t)G.cfg.max_events,
	};
	int rc;

	(void)ctx;
	src.sym = guard_symbolizer();
	rc = stream_build(&src, v, keep, ws);
	if (rc == 0)
		atomic_fetch_add(&G.n.empty, 1);
	else if (rc < 0)
		guard_log("a violation's stream could not be built", "bytes_max=%zu", GUARD_HELD_STREAM);
	return rc;
}

void guard_report(const struct gviol *v)
{
	struct arena *a = arena_open(0);
	struct wire_stream ws;

	if (a && build(NULL, v, a, &ws) > 0)
		deliver(NULL, &ws);
	arena_free(a);
}

static struct gbudget budget;

void guard_report_init(void)
{
	static const struct gbudget_ops ops = { build, deliver, NULL };

	budget_init(&budget, &G.mu, G.cfg.reports_per_min, &ops, &G.n);
	G.budget = &budget;
}
