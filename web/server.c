/* server: sm-web's HTTP daemon: connections, the database pool, the embedded worker (see server.h). */
#include "web/server.h"
#include "common/arena.h"
#include "common/conns.h"
#include "common/db.h"
#include "common/httpd.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/util.h"
#include "miner/queue.h"
#include "miner/worker.h"
#include "web/costwarm.h"
#include "web/api.h"
#include "web/costcache.h"
#include "web/framecache.h"
#include "web/pages.h"
#include "web/static.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* the watchdog's round: how late a deadline or a client's going away may be noticed */
#define WATCH_MS 100
/* Memory a large request used stays for the next (util_heap_keep(), up to HEAP_KEEP_BYTES freed);
 * it goes back to the system once no request has run for IDLE_TRIM_MS. */
#define HEAP_KEEP_BYTES ((size_t)128 << 20)
#define TRIM_AFTER_BYTES ((size_t)1 << 20)
#define IDLE_TRIM_MS 1000
/* /healthz's own probe of the database answers within this */
#define HEALTH_PROBE_MS 1000
/* connections beyond --max-connections kept for /healthz and /metrics when none can give way */
#define CONN_RESERVE 16

/* Pages may load scripts, styles and images from this server only, nothing inline. */
static const char csp[] =
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

struct pool {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	PGconn **idle;
	int nidle, size;
};

struct web {
	const struct web_config *cfg;
	struct req_env env;         /* what every request shares: tokens, frame names, the secret */
	struct pool pool;           /* --db: every request but reads when there is a read pool */
	struct pool rpool;          /* --db-read: GET and HEAD; size 0 when not given */
	struct conns *conns;        /* admission, deadlines, shedding */
	atomic_llong requests;

	/* requests with a database go to the workers; the HTTP threads never wait for one */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct req *qhead, *qtail;  /* queued, oldest first */
	struct req *running[256];   /* per worker (--threads at most 256), under qlock */
	pthread_t workers[256];
	int nworkers;
	struct costwarm *warm;      /* cost models fitted ahead of their views, or NULL */
	bool stopping;              /* under qlock: new requests answered 503, queued ones too */
	atomic_int held;            /* queued, running or suspended: the daemon must not stop under them */
	atomic_int sending;         /* answered by a worker, being sent: shutdown gives them a while */
	atomic_llong stopped[4];    /* by enum req_stop */
	pthread_t watchdog;
	bool watch_started;
	atomic_bool watch_stop;
	atomic_bool trim_wanted;    /* a request held TRIM_AFTER_BYTES or more since the last trim */
	atomic_llong last_end_ns;   /* when the last request ended */

	/* /healthz's own connection: never the pool's queue */
	pthread_mutex_t hlock;
	PGconn *health;
};

static struct web W;

/* ---- a request's headers, query and cookies, from libmicrohttpd ---- */

static enum MHD_ValueKind mhd_kind(enum req_kind kind)
{
	return kind == REQ_QUERY ? MHD_GET_ARGUMENT_KIND : kind == REQ_COOKIE ? MHD_COOKIE_KIND : MHD_HEADER_KIND;
}

static const char *mhd_lookup(void *conn, enum req_kind kind, const char *name)
{
	return MHD_lookup_connection_value(conn, mhd_kind(kind), name);
}

struct each {
	bool (*fn)(void *cls, const char *key, const char *value);
	void *cls;
};

static enum MHD_Result each_value(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct each *e = cls;

	(void)kind;
	return e->fn(e->cls, key, value ? value : "") ? MHD_YES : MHD_NO;
}

static void mhd_each(void *conn, enum req_kind kind, bool (*fn)(void *cls, const char *key, const char *value),
		     void *cls)
{
	struct each e = { fn, cls };

	MHD_get_connection_values(conn, mhd_kind(kind), each_value, &e);
}

static const struct req_source mhd_source = { mhd_lookup, mhd_each };
static volatile sig_atomic_t worker_stop;

/* ---- the connection pool ---- */

/* size connections to conninfo, the schema checked on the first. 0, or -1 with err. */
static int pool_open(struct pool *p, const char *conninfo, int size, char *err, size_t errlen)
{
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->size = size;
	if (!(p->idle = calloc((size_t)size, sizeof(PGconn *)))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < size; i++) {
		PGconn *c = db_connect(conninfo, err, errlen);

		if (!c || (i == 0 && db_schema_check(c, err, errlen) < 0)) {
			if (c)
				PQfinish(c);
			return -1;
		}
		p->idle[p->nidle++] = c;
	}
	return 0;
}

static void pool_close(struct pool *p)
{
	for (int i = 0; i < p->nidle; i++)
		PQfinish(p->idle[i]);
	free(p->idle);
	p->idle = NULL;
	p->nidle = p->size = 0;
}

/* A connection, waiting at most until the budget's deadline; NULL when none came. */
static PGconn *pool_get(struct pool *p, const struct budget *b)
{
	struct timespec ts;
	int64_t left = budget_left_ms(b);
	PGconn *c = NULL;

	if (left < 0)
		left = 10000;
	ts = util_clock_after(CLOCK_REALTIME, left);
	pthread_mutex_lock(&p->lock);
	while (p->nidle == 0)
		if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT)
			break;
	if (p->nidle > 0)
		c = p->idle[--p->nidle];
	pthread_mutex_unlock(&p->lock);
	/* a connection the server dropped (restart, failover, idle timeout) is made again */
	if (c)
		db_alive(c);
	return c;
}

static void pool_put(struct pool *p, PGconn *c)
{
	/* a request that failed inside a transaction must not leave it open */
	if (PQtransactionStatus(c) != PQTRANS_IDLE)
		PQclear(PQexec(c, "ROLLBACK"));
	pthread_mutex_lock(&p->lock);
	p->idle[p->nidle++] = c;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* ---- the HTTP side ---- */

static enum req_method method_of(const char *m)
{
	if (strcmp(m, "GET") == 0)
		return REQ_GET;
	if (strcmp(m, "HEAD") == 0)
		return REQ_HEAD;
	if (strcmp(m, "POST") == 0)
		return REQ_POST;
	if (strcmp(m, "PATCH") == 0)
		return REQ_PATCH;
	if (strcmp(m, "DELETE") == 0)
		return REQ_DELETE;
	return REQ_OTHER;
}

/*
 * A 500's text may be PostgreSQL's (ERROR, DETAIL, CONTEXT: names of tables, constraints and
 * values) or a library's: it goes to the log, and the client reads only that something failed.
 */
static void hide_internal_error(struct req *rq)
{
	if (rq->status != 500)
		return;
	log_warn("internal error", "path=\"%.200s\" detail=\"%.300s\"", rq->path ? rq->path : "",
		 rq->detail ? rq->detail : "");
	if (rq->ctype && strncmp(rq->ctype, "text/html", 9) == 0 && buf_error(&rq->out) == BUF_OK)
		return;   /* html_error()'s page, which says no more */
	if (rq->path && strncmp(rq->path, "/api/", 5) == 0)
		req_json_error(rq, 500, "internal error: the request failed on the server (its log says why)");
	else
		req_text_error(rq, 500, "Internal error: the request failed on the server (its log says why).");
}

static enum MHD_Result send_response(struct req *rq)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	hide_internal_error(rq);

	/* the answer's bytes as they are, not a copy (a stream's events are tens of MB): libmicrohttpd
	 * frees them once sent */
	if (rq->out.data && rq->out.len) {
		r = MHD_create_response_from_buffer(rq->out.len, rq->out.data, MHD_RESPMEM_MUST_FREE);
		if (r) {
			rq->out_given = rq->out.cap;
			rq->out = (struct buf)BUF_INIT(rq->out.max);
		}
	} else {
		r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	}
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, rq->ctype ? rq->ctype : "text/plain");
	MHD_add_response_header(r, "Content-Security-Policy", csp);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "X-Frame-Options", "DENY");
	MHD_add_response_header(r, "Referrer-Policy", "same-origin");
	if (!MHD_get_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL)) {
		bool cached = false;
		for (int i = 0; i < rq->nheaders; i++)
			cached |= strcasecmp(rq->hname[i], MHD_HTTP_HEADER_CACHE_CONTROL) == 0;
		if (!cached)
			MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	}
	for (int i = 0; i < rq->nheaders; i++)
		MHD_add_response_header(r, rq->hname[i], rq->hval[i]);
	ret = MHD_queue_response(rq->conn, (unsigned)rq->status, r);
	MHD_destroy_response(r);
	return ret;
}

/* Without a database connection: it must answer while the pool is busy or the database down. */
static void serve_metrics(struct req *rq)
{
	buf_printf(&rq->out, "# HELP sm_web_requests_total HTTP requests answered.\n"
			     "# TYPE sm_web_requests_total counter\nsm_web_requests_total %lld\n",
		   (long long)atomic_load(&W.requests));
	buf_printf(&rq->out, "# HELP sm_web_requests_stopped_total Requests stopped before their end, by reason.\n"
			     "# TYPE sm_web_requests_stopped_total counter\n"
			     "sm_web_requests_stopped_total{reason=\"deadline\"} %lld\n"
			     "sm_web_requests_stopped_total{reason=\"client_gone\"} %lld\n"
			     "sm_web_requests_stopped_total{reason=\"shutdown\"} %lld\n"
			     "# HELP sm_web_requests_held Requests queued for or running in a worker, or their answers being sent.\n"
			     "# TYPE sm_web_requests_held gauge\nsm_web_requests_held %d\n",
		   (long long)atomic_load(&W.stopped[REQ_STOP_DEADLINE]),
		   (long long)atomic_load(&W.stopped[REQ_STOP_GONE]),
		   (long long)atomic_load(&W.stopped[REQ_STOP_SHUTDOWN]), atomic_load(&W.held) + atomic_load(&W.sending));
	{
		size_t models, attributions, bytes;

		costcache_usage(W.env.costs, &models, &attributions, &bytes);
		buf_printf(&rq->out, "# HELP sm_web_models_kept Cost models of clusters and problems kept.\n"
				     "# TYPE sm_web_models_kept gauge\nsm_web_models_kept %zu\n"
				     "# HELP sm_web_attributions_kept Attributions of clusters and problems kept.\n"
				     "# TYPE sm_web_attributions_kept gauge\nsm_web_attributions_kept %zu\n"
				     "# HELP sm_web_models_kept_bytes The bytes of both.\n"
				     "# TYPE sm_web_models_kept_bytes gauge\nsm_web_models_kept_bytes %zu\n"
				     "# HELP sm_web_models_warmed_total Cost models fitted before their first view.\n"
				     "# TYPE sm_web_models_warmed_total counter\nsm_web_models_warmed_total %llu\n"
				     "# HELP sm_web_attributions_warmed_total Attributions computed before their first view.\n"
				     "# TYPE sm_web_attributions_warmed_total counter\nsm_web_attributions_warmed_total %llu\n"
				     "# HELP sm_web_model_warm_yield_seconds_total Time those computations waited for requests to be answered.\n"
				     "# TYPE sm_web_model_warm_yield_seconds_total counter\nsm_web_model_warm_yield_seconds_total %.2f\n",
			   models, attributions, bytes, (unsigned long long)costwarm_fitted(W.warm),
			   (unsigned long long)costwarm_attributed(W.warm), (double)costwarm_yielded_ms(W.warm) / 1000);
	}
	{
		size_t unused, bytes, kept;
		uint64_t served;

		costcache_usage(W.env.flames, &unused, &unused, &bytes);
		costcache_flames(W.env.flames, &kept, &served);
		buf_printf(&rq->out, "# HELP sm_web_flames_kept Flame graphs of clusters' pages kept as drawn.\n"
				     "# TYPE sm_web_flames_kept gauge\nsm_web_flames_kept %zu\n"
				     "# HELP sm_web_flames_kept_bytes Their bytes.\n"
				     "# TYPE sm_web_flames_kept_bytes gauge\nsm_web_flames_kept_bytes %zu\n"
				     "# HELP sm_web_flames_served_total Views of clusters' pages served a kept flame graph.\n"
				     "# TYPE sm_web_flames_served_total counter\nsm_web_flames_served_total %llu\n",
			   kept, bytes, (unsigned long long)served);
	}
	buf_printf(&rq->out, "# HELP sm_web_frame_name_queries_total Queries for frame names the cache lacked.\n"
			     "# TYPE sm_web_frame_name_queries_total counter\nsm_web_frame_name_queries_total %llu\n",
		   (unsigned long long)framecache_queries(W.env.frames));
	conns_render(W.conns, &rq->out);
	rq->status = 200;
	rq->ctype = "text/plain; version=0.0.4";
}

static void serve_static(struct req *rq)
{
	const char *name = rq->path + strlen("/static/");

	for (int i = 0; i < sm_nstatic; i++)
		if (strcmp(sm_static[i].name, name) == 0) {
			buf_append(&rq->out, sm_static[i].data, sm_static[i].len);
			rq->status = 200;
			rq->ctype = sm_static[i].ctype;
			req_add_header(rq, MHD_HTTP_HEADER_CACHE_CONTROL, "max-age=300");
			return;
		}
	req_text_error(rq, 404, "no such file");
}

/* The first query parameter whose name or value is not UTF-8 (the database refuses such text). */
static bool find_bad_utf8(void *cls, const char *key, const char *value)
{
	const char **bad = cls;

	if (util_utf8_valid(key, strlen(key)) && util_utf8_valid(value, strlen(value)))
		return true;
	*bad = key;
	return false;
}

/* ---- /healthz: a connection of its own and a short probe, never the pool's queue ---- */

/* SELECT 1 within HEALTH_PROBE_MS. A connection that does not answer in time is dropped (made again
 * by the next probe): its state is unknown. Called under hlock. */
static bool health_probe(char *why, size_t whylen)
{
	int64_t end = util_now_mono_ns() + (int64_t)HEALTH_PROBE_MS * 1000000;
	PGresult *r;
	bool ok = false;

	if (!W.health) {
		W.health = db_connect(W.cfg->conninfo, why, whylen);
		if (!W.health)
			return false;
	} else if (!db_alive(W.health)) {
		snprintf(why, whylen, "database unreachable");
		return false;
	}
	if (!PQsendQuery(W.health, "SELECT 1"))
		goto drop;
	while (PQisBusy(W.health)) {
		struct pollfd pfd = { PQsocket(W.health), POLLIN, 0 };
		int64_t left = (end - util_now_mono_ns()) / 1000000;
		int n = left > 0 ? poll(&pfd, 1, (int)left) : 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(why, whylen, "the database did not answer within %d ms", HEALTH_PROBE_MS);
			goto drop;
		}
		if (!PQconsumeInput(W.health))
			goto drop;
	}
	while ((r = PQgetResult(W.health))) {
		ok = PQresultStatus(r) == PGRES_TUPLES_OK;
		PQclear(r);
	}
	if (!ok)
		snprintf(why, whylen, "database unreachable");
	return ok;
drop:
	if (!why[0])
		snprintf(why, whylen, "database unreachable");
	PQfinish(W.health);
	W.health = NULL;
	return false;
}

static void serve_health(struct req *rq)
{
	char why[256] = "";
	struct timespec ts;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += HEALTH_PROBE_MS / 1000 + 1;
	if (pthread_mutex_timedlock(&W.hlock, &ts) != 0) {
		req_text_error(rq, 503, "the database probe is busy");
		return;
	}
	ok = health_probe(why, sizeof(why));
	pthread_mutex_unlock(&W.hlock);
	if (!ok)
		log_warn("health probe failed", "error=\"%.200s\"", why);
	req_text_error(rq, ok ? 200 : 503, ok ? "ok" : "database unreachable");
}

static void dispatch(struct req *rq)
{
	bool api = strncmp(rq->path, "/api/", 5) == 0;
	const char *bad = NULL;

	req_query_each(rq, find_bad_utf8, &bad);
	if (bad) {
		if (api)
			req_json_error(rq, 400, "%.64s: a query parameter must be UTF-8", bad);
		else
			req_text_error(rq, 400, "a query parameter is not UTF-8");
		return;
	}
	req_authenticate(rq);
	/* a token that could not be checked is not an unknown one: no 401, no way to the login page
	 * (the login form says it itself) */
	if (rq->db_down && (api || strcmp(rq->path, "/login") != 0)) {
		if (api)
			req_db_unavailable(rq, true);
		else
			pages_unavailable(rq);
		return;
	}
	if (api)
		api_handle(rq);
	else
		pages_handle(rq);
	/* what failed because the database went away is an outage (503), not the server's fault (500) */
	if (rq->status == 500 && PQstatus(rq->db) != CONNECTION_OK) {
		if (api)
			req_db_unavailable(rq, true);
		else
			pages_unavailable(rq);
	}
}

/* ---- the workers: requests that need the database ---- */

/* A held request is suspended in a worker's hands; once resumed with its answer it is sending until
 * libmicrohttpd has sent it (on_completed). Shutdown needs none held (stopping the daemon under a
 * suspended connection aborts) and gives those sending a while: a reader that stops reading must
 * not hold the exit. */
enum { HELD_NOT, HELD_QUEUED, HELD_ANSWERED, HELD_SENDING };

/* Whether the client closed its end (data it pipelined after the request does not count). */
static bool client_gone(int fd)
{
	struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };
	char c;
	ssize_t n;

	if (fd < 0 || poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
		return true;
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Raise rq's stop flag for why, once, and cancel its running query. Under qlock. */
static void stop_request(struct req *rq, enum req_stop why)
{
	char err[256];

	if (atomic_load(&rq->stop) != REQ_RUN)
		return;
	atomic_store(&rq->stop, why);
	atomic_fetch_add(&W.stopped[why], 1);
	if (rq->cancel && !PQcancel(rq->cancel, err, sizeof(err)))
		log_warn("cannot cancel a request's query", "error=\"%.200s\"", err);
}

static void watch_one(struct req *rq, int64_t now)
{
	if (!rq || atomic_load(&rq->stop) != REQ_RUN)
		return;
	if (rq->budget.deadline_ns && now >= rq->budget.deadline_ns)
		stop_request(rq, REQ_STOP_DEADLINE);
	else if (client_gone(rq->fd))
		stop_request(rq, REQ_STOP_GONE);
}

/* Stops requests past their deadline or whose client went away, every WATCH_MS: a worker blocked in a
 * query or a long loop cannot notice either itself. */
static void *watchdog_main(void *web)
{
	struct web *w = web;

	while (!atomic_load(&w->watch_stop)) {
		int64_t now;

		usleep(WATCH_MS * 1000);
		now = util_now_mono_ns();
		pthread_mutex_lock(&w->qlock);
		for (struct req *rq = w->qhead; rq; rq = rq->next)
			watch_one(rq, now);
		for (int i = 0; i < w->nworkers; i++)
			watch_one(w->running[i], now);
		pthread_mutex_unlock(&w->qlock);
		if (atomic_load(&w->trim_wanted) && atomic_load(&w->held) == 0 && atomic_load(&w->sending) == 0 &&
		    now - atomic_load(&w->last_end_ns) >= (int64_t)IDLE_TRIM_MS * 1000000) {
			atomic_store(&w->trim_wanted, false);
			util_trim();
		}
	}
	return NULL;
}

/* The connection's queries end at the request's deadline (statement_timeout) and never wait longer for
 * a lock (lock_timeout); the watchdog's cancel is the other half. */
static void set_timeouts(struct req *rq)
{
	char ms[24];
	const char *params[1] = { ms };
	int64_t left = budget_left_ms(&rq->budget);
	PGresult *r;

	snprintf(ms, sizeof(ms), "%lld", (long long)(left > 0 ? left : 1));
	r = PQexecParams(rq->db, "SELECT set_config('statement_timeout', $1, false),"
				 " set_config('lock_timeout', $1, false)", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		log_warn("cannot set the request's statement_timeout", "error=\"%.200s\"", PQresultErrorMessage(r));
	PQclear(r);
}

/* What a request that was stopped answers, in place of what its handler left. */
static void stopped_response(struct req *rq, enum req_stop why)
{
	bool api = strncmp(rq->path, "/api/", 5) == 0;
	char msg[256];

	if (why == REQ_STOP_DEADLINE)
		snprintf(msg, sizeof(msg), "the request took longer than %d s (the server's --request-timeout) and was "
			 "stopped; narrow it (filters, a smaller page) or try again later", W.cfg->request_timeout_s);
	else if (why == REQ_STOP_SHUTDOWN)
		snprintf(msg, sizeof(msg), "the server is shutting down; try again");
	else
		snprintf(msg, sizeof(msg), "the client went away");
	rq->nheaders = 0;
	if (api)
		req_json_error(rq, 503, "%s", msg);
	else
		req_text_error(rq, 503, msg);
	req_add_header(rq, "Retry-After", "5");
}

static void work(struct req *rq, int me)
{
	/* reads go to the read pool (a standby) when there is one; writes and their forms never, nor
	 * browser sessions (a standby may not have the login's session yet, and a check marks it seen) */
	bool read = (rq->method == REQ_GET || rq->method == REQ_HEAD) &&
		    !MHD_lookup_connection_value(rq->conn, MHD_COOKIE_KIND, req_cookie_name(W.cfg));
	struct pool *pool = W.rpool.size && read ? &W.rpool : &W.pool;
	PGcancel *cancel = NULL;
	int why;

	if (!req_should_stop(rq)) {
		rq->db = pool_get(pool, &rq->budget);
		if (!rq->db) {
			req_json_error(rq, 503, "all database connections are busy; try again");
			req_add_header(rq, "Retry-After", "1");
		} else {
			set_timeouts(rq);
			cancel = PQgetCancel(rq->db);
			pthread_mutex_lock(&W.qlock);
			rq->cancel = cancel;
			pthread_mutex_unlock(&W.qlock);
			dispatch(rq);
			if (buf_error(&rq->out) != BUF_OK) {
				/* never a response cut short: what could not be built is an error */
				char why_[64];

				snprintf(why_, sizeof(why_), "%s", buf_error_text(&rq->out));
				if (strncmp(rq->path, "/api/", 5) == 0)
					req_json_error(rq, 500, "the response could not be built: %s", why_);
				else
					req_text_error(rq, 500, "The page could not be built: it would be too large or the "
								"server is out of memory.");
			}
		}
	}
	/* the deadline may have passed without the watchdog's round yet */
	if (atomic_load(&rq->stop) == REQ_RUN && req_should_stop(rq)) {
		pthread_mutex_lock(&W.qlock);
		stop_request(rq, REQ_STOP_DEADLINE);
		pthread_mutex_unlock(&W.qlock);
	}
	pthread_mutex_lock(&W.qlock);
	W.running[me] = NULL;
	rq->cancel = NULL;
	pthread_mutex_unlock(&W.qlock);
	PQfreeCancel(cancel);
	if (rq->db) {
		pool_put(pool, rq->db);
		rq->db = NULL;
	}
	/* a write that went through keeps its answer, late or not; everything else stopped is a 503 */
	why = atomic_load(&rq->stop);
	if (why != REQ_RUN && (read || rq->status >= 500))
		stopped_response(rq, (enum req_stop)why);
	if (why == REQ_STOP_DEADLINE || why == REQ_STOP_GONE)
		log_info(why == REQ_STOP_GONE ? "request stopped: the client went away" : "request stopped at its deadline",
			 "path=\"%.200s\" timeout_s=%d", rq->path, W.cfg->request_timeout_s);
}

static void *request_worker_main(void *arg)
{
	int me = (int)(intptr_t)arg;

	for (;;) {
		struct req *rq;

		pthread_mutex_lock(&W.qlock);
		while (!W.qhead && !W.stopping)
			pthread_cond_wait(&W.qcond, &W.qlock);
		rq = W.qhead;
		if (!rq) {
			pthread_mutex_unlock(&W.qlock);
			return NULL;
		}
		W.qhead = rq->next;
		if (!W.qhead)
			W.qtail = NULL;
		rq->next = NULL;
		if (W.stopping)
			stop_request(rq, REQ_STOP_SHUTDOWN);
		W.running[me] = rq;
		pthread_mutex_unlock(&W.qlock);
		work(rq, me);
		/* rq is libmicrohttpd's again once resumed */
		rq->held = HELD_ANSWERED;
		MHD_resume_connection(rq->conn);
	}
}

/* Queue rq for a worker and suspend its connection: the HTTP thread goes on with other connections. */
static enum MHD_Result hand_over(struct req *rq)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	rq->fd = ci ? ci->connect_fd : -1;
	rq->budget.deadline_ns = util_now_mono_ns() + (int64_t)W.cfg->request_timeout_s * 1000000000;
	rq->budget.stop = &rq->stop;
	pthread_mutex_lock(&W.qlock);
	if (W.stopping) {
		pthread_mutex_unlock(&W.qlock);
		stopped_response(rq, REQ_STOP_SHUTDOWN);
		return send_response(rq);
	}
	rq->held = HELD_QUEUED;
	atomic_fetch_add(&W.held, 1);
	MHD_suspend_connection(rq->conn);
	if (W.qtail)
		W.qtail->next = rq;
	else
		W.qhead = rq;
	W.qtail = rq;
	pthread_cond_signal(&W.qcond);
	pthread_mutex_unlock(&W.qlock);
	return MHD_YES;
}

/* What the log names a failed request by: its route's pattern (the path, which may be anything,
 * follows it escaped), found here when the request failed before it was handled (no connection,
 * no token check). */
static const char *route_of(struct req *rq)
{
	if (!rq->route) {
		if (strncmp(rq->path, "/api/", 5) == 0)
			api_route_name(rq);
		else
			pages_route_name(rq);
	}
	if (rq->route)
		return rq->route;
	if (strcmp(rq->path, "/healthz") == 0)
		return "/healthz";
	return strncmp(rq->path, "/static/", 8) == 0 ? "/static/*" : "-";
}

/* A debug file upload (POST /api/v1/debuginfo, docs/symbols.md) may be larger than other bodies. */
static size_t body_limit(const char *method, const char *url)
{
	if (strcmp(method, "POST") == 0 && strcmp(url, "/api/v1/debuginfo") == 0)
		return W.cfg->max_debuginfo;
	return W.cfg->max_body;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct req *rq = *con_cls;
	enum MHD_Result ret;

	(void)cls;
	if (!rq) {
		const char *why;
		int refuse = httpd_check_framing(conn, version, &why);

		if (refuse) {
			atomic_fetch_add(&W.requests, 1);
			return httpd_refuse(conn, refuse, why);
		}
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		rq->a = arena_open(0);
		if (!rq->a) {
			free(rq);
			return MHD_NO;
		}
		rq->conn = conn;
		rq->src = &mhd_source;
		rq->env = &W.env;
		rq->cfg = W.cfg;
		rq->frames = W.env.frames;
		rq->method = method_of(method);
		rq->body.max = body_limit(method, url);
		rq->out.max = 64u << 20;
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_size) {
		/* past the limit the rest is read and dropped, then refused as a whole */
		if (rq->body.len + *upload_size > rq->body.max || buf_append(&rq->body, upload, *upload_size) < 0)
			rq->body.max = 0;
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->held == HELD_ANSWERED) {
		/* resumed: the worker's answer, sent from here on */
		rq->held = HELD_SENDING;
		atomic_fetch_add(&W.sending, 1);
		atomic_fetch_sub(&W.held, 1);
		atomic_fetch_add(&W.requests, 1);
		if (rq->status >= 500)
			log_warn("request failed", "method=%s route=%s path=%.200s status=%d", method, route_of(rq), url,
				 rq->status);
		return send_response(rq);
	}
	rq->path = url;
	rq->status = 500;
	if (rq->body.max == 0) {
		req_json_error(rq, 413, "the request body is larger than %zu bytes", body_limit(method, url));
		return send_response(rq);
	}
	if (!util_utf8_valid(url, strlen(url))) {
		req_json_error(rq, 400, "the path is not UTF-8");
		return send_response(rq);
	}
	/* these answer in this thread, without the pool: while every connection is taken too */
	if (strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0) {
		if (httpd_probe_method(conn, method, &ret)) {
			atomic_fetch_add(&W.requests, 1);
			return ret;
		}
		if (url[1] == 'm')
			serve_metrics(rq);
		else
			serve_health(rq);
	} else if (strncmp(url, "/static/", 8) == 0) {
		serve_static(rq);
	} else {
		return hand_over(rq);
	}
	atomic_fetch_add(&W.requests, 1);
	return send_response(rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct req *rq = *con_cls;
	size_t held;

	(void)cls;
	(void)conn;
	(void)toe;
	if (!rq)
		return;
	held = rq->body.cap + rq->out.cap + rq->out_given + arena_used(rq->a);
	if (rq->held != HELD_NOT) {
		/* sent, or gone before libmicrohttpd could send it */
		if (rq->held == HELD_SENDING)
			atomic_fetch_sub(&W.sending, 1);
		else if (rq->held == HELD_ANSWERED)
			atomic_fetch_sub(&W.held, 1);
		else
			log_error("request ended while a worker holds it", "path=\"%.200s\"", rq->path ? rq->path : "");
	}
	buf_release(&rq->body);
	buf_release(&rq->out);
	arena_free(rq->a);
	free(rq);
	*con_cls = NULL;
	if (held >= TRIM_AFTER_BYTES)
		atomic_store(&W.trim_wanted, true);
	atomic_store(&W.last_end_ns, util_now_mono_ns());
}

static void *worker_main(void *arg)
{
	const struct web_config *cfg = arg;
	struct miner_opts mo;
	struct miner *m;
	char err[1024];

	/* mining must not starve the pages: this thread and the mining threads it starts
	 * (they inherit it) run at nice 10 */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10) < 0)
		log_warn("cannot lower the embedded worker's priority", "error=\"%s\"", strerror(errno));
	miner_opts_default(&mo);
	mo.conninfo = cfg->conninfo;
	mo.read_conninfo = cfg->conninfo_read;   /* the AOI's events, like the pages, from a standby */
	mo.threads = cfg->miner_threads;
	mo.webhook_allow = &cfg->webhook_allow;
	mo.cancel = &worker_stop;
	while (!worker_stop) {
		m = miner_open(&mo, err, sizeof(err));
		if (m) {
			miner_work(m, false);
			miner_free(m);
			break;
		}
		log_error("embedded worker cannot connect; retrying", "error=\"%s\"", err);
		for (int i = 0; i < 50 && !worker_stop; i++)
			usleep(100000);
	}
	return NULL;
}

/* New requests answered 503, held ones stopped (their queries cancelled); waits for them to be answered,
 * a few seconds at most. 0, or -1 when some are still held. */
static int stop_requests(void)
{
	int64_t end = util_now_mono_ns() + (int64_t)5 * 1000000000;

	pthread_mutex_lock(&W.qlock);
	W.stopping = true;
	for (struct req *rq = W.qhead; rq; rq = rq->next)
		stop_request(rq, REQ_STOP_SHUTDOWN);
	for (int i = 0; i < W.nworkers; i++)
		if (W.running[i])
			stop_request(W.running[i], REQ_STOP_SHUTDOWN);
	pthread_cond_broadcast(&W.qcond);
	pthread_mutex_unlock(&W.qlock);
	while (atomic_load(&W.held) > 0 && util_now_mono_ns() < end)
		usleep(20000);
	if (atomic_load(&W.held) > 0)
		return -1;
	/* the answers on their way: the same few seconds, then the daemon stops (it may: none is suspended) */
	while (atomic_load(&W.sending) > 0 && util_now_mono_ns() < end)
		usleep(20000);
	return 0;
}

int web_run(const struct web_config *cfg)
{
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct MHD_Daemon *mhd = NULL;
	pthread_t worker;
	bool worker_started = false;
	sigset_t sigs;
	char err[1024];
	int fam, port, sig, rc = -1;

	memset(&W, 0, sizeof(W));
	pthread_mutex_init(&W.qlock, NULL);
	pthread_cond_init(&W.qcond, NULL);
	pthread_mutex_init(&W.hlock, NULL);
	W.cfg = cfg;
	W.env.cfg = cfg;
	fam = httpd_parse_listen(cfg->listen, &addr, &addrlen);
	if (fam < 0) {
		log_error("bad --listen address", "listen=\"%s\" want=ADDR:PORT", cfg->listen);
		return -1;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if (util_random(W.env.secret, sizeof(W.env.secret)) < 0) {
		log_error("no randomness for the session secret", "%s", "");
		return -1;
	}
	if (util_heap_keep(HEAP_KEEP_BYTES) < 0)
		log_warn("cannot keep large requests' memory in the heaps: each maps its own again", "%s", "");
	W.env.auth = auth_cache_open(cfg->auth_ttl_ms, 4096);
	W.env.sessions = auth_cache_open(cfg->auth_ttl_ms, 4096);
	W.env.frames = framecache_open(cfg->frame_cache_bytes);
	W.env.costs = costcache_open(cfg->model_cache_bytes);
	W.env.flames = costcache_open(cfg->flame_cache_bytes);
	if (!W.env.auth || !W.env.sessions || !W.env.frames || !W.env.costs || !W.env.flames) {
		log_error("out of memory at start", "%s", "");
		goto out_pool;
	}
	if (pool_open(&W.pool, cfg->conninfo, cfg->threads, err, sizeof(err)) < 0 ||
	    (cfg->conninfo_read && pool_open(&W.rpool, cfg->conninfo_read, cfg->threads, err, sizeof(err)) < 0)) {
		log_error("cannot start", "error=\"%s\"", err);
		goto out_pool;
	}
	for (; W.nworkers < cfg->threads && W.nworkers < (int)(sizeof(W.workers) / sizeof(W.workers[0])); W.nworkers++)
		if (pthread_create(&W.workers[W.nworkers], NULL, request_worker_main, (void *)(intptr_t)W.nworkers) != 0) {
			log_error("cannot start the request workers", "%s", "");
			goto out_workers;
		}
	if (pthread_create(&W.watchdog, NULL, watchdog_main, &W) != 0) {
		log_error("cannot start the request watchdog", "%s", "");
		goto out_workers;
	}
	W.watch_started = true;
	{
		static const char *const reserved[] = { "/healthz", "/metrics", NULL };
		struct conns_config cc = {
			.max_connections = (unsigned)cfg->max_connections, .reserve = CONN_RESERVE,
			.max_per_ip = (unsigned)cfg->max_per_ip, .header_timeout_s = (unsigned)cfg->header_timeout_s,
			.idle_timeout_s = (unsigned)cfg->idle_timeout_s, .body_min_rate = (unsigned)cfg->min_body_rate,
			.other_fds = 4 * (unsigned)cfg->threads + 16, .metrics_prefix = "sm_web", .reserved_paths = reserved,
		};
		struct MHD_OptionItem copts[CONNS_NOPTIONS];

		W.conns = conns_open(&cc, on_request, NULL, on_completed, NULL, err, sizeof(err));
		if (!W.conns) {
			log_error("cannot start", "error=\"%s\"", err);
			goto out_workers;
		}
		conns_options(W.conns, copts);
		mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
					       MHD_ALLOW_SUSPEND_RESUME |
					       (fam == AF_INET6 ? MHD_USE_IPv6 : 0),
				       0, NULL, NULL, conns_access, W.conns,
				       MHD_OPTION_EXTERNAL_LOGGER, httpd_log, NULL,
				       MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
				       MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
				       MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
				       MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
				       MHD_OPTION_ARRAY, copts,
				       MHD_OPTION_END);
	}
	if (!mhd) {
		log_error("cannot listen", "listen=\"%s\" error=\"%s\"", cfg->listen, strerror(errno));
		goto out_workers;
	}
	if (cfg->model_warm > 0 && cfg->model_cache_bytes > 0 &&
	    !(W.warm = costwarm_start(cfg->conninfo_read ? cfg->conninfo_read : cfg->conninfo, W.env.costs,
				      cfg->model_warm, 2000, &W.held, err, sizeof(err))))
		log_warn("cost models are fitted at their first view only", "error=\"%s\"", err);
	if (cfg->worker) {
		if (pthread_create(&worker, NULL, worker_main, (void *)cfg) != 0) {
			log_error("cannot start the embedded worker", "%s", "");
			goto out_mhd;
		}
		worker_started = true;
	}
	port = httpd_bound_port(mhd);
	log_info("listening", "listen=\"%s\" port=%d threads=%d worker=%s anonymous_read=%s request_timeout_s=%d",
		 cfg->listen, port, cfg->threads, cfg->worker ? "embedded" : "none", cfg->anonymous_read ? "yes" : "no",
		 cfg->request_timeout_s);
	if (cfg->port_file && httpd_write_port_file(cfg->port_file, port) < 0)
		log_warn("cannot write the port file", "path=\"%s\" error=\"%s\"", cfg->port_file, strerror(errno));
	do {
		if (sigwait(&sigs, &sig) != 0)
			sig = SIGTERM;
	} while (sig == SIGPIPE);
	log_info("shutting down", "signal=%s requests=%lld", sig == SIGINT ? "INT" : "TERM",
		 (long long)atomic_load(&W.requests));
	rc = 0;
	if (stop_requests() < 0) {
		/* stopping libmicrohttpd with suspended connections would abort the process */
		log_error("requests still held after the drain; exiting without them", "requests=%d",
			  atomic_load(&W.held));
		return -1;
	}
	worker_stop = 1;
	if (worker_started)
		pthread_join(worker, NULL);
out_mhd:
	costwarm_stop(W.warm);
	W.warm = NULL;
	stop_requests();
	MHD_stop_daemon(mhd);
out_workers:
	stop_requests();
	for (int i = 0; i < W.nworkers; i++)
		pthread_join(W.workers[i], NULL);
	atomic_store(&W.watch_stop, true);
	if (W.watch_started)
		pthread_join(W.watchdog, NULL);
out_pool:
	conns_free(W.conns);
	if (W.health)
		PQfinish(W.health);
	pool_close(&W.pool);
	pool_close(&W.rpool);
	auth_cache_free(W.env.auth);
	auth_cache_free(W.env.sessions);
	framecache_free(W.env.frames);
	costcache_free(W.env.costs);
	costcache_free(W.env.flames);
	return rc;
}
