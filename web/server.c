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
#include "miner/run.h"
#include "web/api.h"
#include "web/framecache.h"
#include "web/pages.h"
#include "web/static.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define POOL_WAIT_S 10
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

static PGconn *pool_get(struct pool *p)
{
	struct timespec ts;
	PGconn *c = NULL;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += POOL_WAIT_S;
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

static enum MHD_Result send_response(struct req *rq)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(rq->out.len, rq->out.data ? rq->out.data : (void *)"",
					    MHD_RESPMEM_MUST_COPY);
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

static void dispatch(struct req *rq)
{
	bool api = strncmp(rq->path, "/api/", 5) == 0;
	const char *bad = NULL;

	if (strcmp(rq->path, "/healthz") == 0) {
		PGresult *r = PQexec(rq->db, "SELECT 1");
		bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
		PQclear(r);
		req_text_error(rq, ok ? 200 : 503, ok ? "ok" : "database unreachable");
		return;
	}
	if (strncmp(rq->path, "/static/", 8) == 0) {
		serve_static(rq);
		return;
	}
	req_query_each(rq, find_bad_utf8, &bad);
	if (bad) {
		if (api)
			req_json_error(rq, 400, "%.64s: a query parameter must be UTF-8", bad);
		else
			req_text_error(rq, 400, "a query parameter is not UTF-8");
		return;
	}
	req_authenticate(rq);
	if (api)
		api_handle(rq);
	else
		pages_handle(rq);
}

/* What the log names a request by: its route's pattern (the path, which may be anything, follows
 * it escaped). */
static const char *route_of(const struct req *rq)
{
	if (rq->route)
		return rq->route;
	if (strcmp(rq->path, "/healthz") == 0)
		return "/healthz";
	return strncmp(rq->path, "/static/", 8) == 0 ? "/static/*" : "-";
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct req *rq = *con_cls;
	struct pool *pool;
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
		rq->body.max = W.cfg->max_body;
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
	rq->path = url;
	rq->status = 500;
	if (rq->body.max == 0) {
		req_json_error(rq, 413, "the request body is larger than %zu bytes", W.cfg->max_body);
		return send_response(rq);
	}
	if (!util_utf8_valid(url, strlen(url))) {
		req_json_error(rq, 400, "the path is not UTF-8");
		return send_response(rq);
	}
	if (strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0) {
		if (httpd_probe_method(conn, method, &ret)) {
			atomic_fetch_add(&W.requests, 1);
			return ret;
		}
		if (url[1] == 'm') {
			serve_metrics(rq);
			atomic_fetch_add(&W.requests, 1);
			return send_response(rq);
		}
	}
	/* reads go to the read pool (a standby) when there is one; writes and their forms never */
	pool = W.rpool.size && (rq->method == REQ_GET || rq->method == REQ_HEAD) ? &W.rpool : &W.pool;
	rq->db = pool_get(pool);
	if (!rq->db) {
		req_json_error(rq, 503, "all database connections are busy; try again");
		req_add_header(rq, "Retry-After", "1");
		return send_response(rq);
	}
	dispatch(rq);
	if (buf_error(&rq->out) != BUF_OK) {
		/* never a response cut short: what could not be built is an error */
		char why[64];

		snprintf(why, sizeof(why), "%s", buf_error_text(&rq->out));
		if (strncmp(rq->path, "/api/", 5) == 0)
			req_json_error(rq, 500, "the response could not be built: %s", why);
		else
			req_text_error(rq, 500, "The page could not be built: it would be too large or the server is out of memory.");
	}
	pool_put(pool, rq->db);
	rq->db = NULL;
	atomic_fetch_add(&W.requests, 1);
	if (rq->status >= 500)
		log_warn("request failed", "method=%s route=%s path=%.200s status=%d", method, route_of(rq), url,
			 rq->status);
	ret = send_response(rq);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct req *rq = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (!rq)
		return;
	buf_release(&rq->body);
	buf_release(&rq->out);
	arena_free(rq->a);
	free(rq);
	*con_cls = NULL;
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
	W.env.auth = auth_cache_open(cfg->auth_ttl_ms, 4096);
	W.env.frames = framecache_open(cfg->frame_cache_bytes);
	if (!W.env.auth || !W.env.frames) {
		log_error("out of memory at start", "%s", "");
		goto out_pool;
	}
	if (pool_open(&W.pool, cfg->conninfo, cfg->threads, err, sizeof(err)) < 0 ||
	    (cfg->conninfo_read && pool_open(&W.rpool, cfg->conninfo_read, cfg->threads, err, sizeof(err)) < 0)) {
		log_error("cannot start", "error=\"%s\"", err);
		goto out_pool;
	}
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
			goto out_pool;
		}
		conns_options(W.conns, copts);
		mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
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
		goto out_pool;
	}
	if (cfg->worker) {
		if (pthread_create(&worker, NULL, worker_main, (void *)cfg) != 0) {
			log_error("cannot start the embedded worker", "%s", "");
			goto out_mhd;
		}
		worker_started = true;
	}
	port = httpd_bound_port(mhd);
	log_info("listening", "listen=\"%s\" port=%d threads=%d worker=%s anonymous_read=%s", cfg->listen, port,
		 cfg->threads, cfg->worker ? "embedded" : "none", cfg->anonymous_read ? "yes" : "no");
	if (cfg->port_file && httpd_write_port_file(cfg->port_file, port) < 0)
		log_warn("cannot write the port file", "path=\"%s\" error=\"%s\"", cfg->port_file, strerror(errno));
	do {
		if (sigwait(&sigs, &sig) != 0)
			sig = SIGTERM;
	} while (sig == SIGPIPE);
	log_info("shutting down", "signal=%s requests=%lld", sig == SIGINT ? "INT" : "TERM",
		 (long long)atomic_load(&W.requests));
	rc = 0;
	worker_stop = 1;
	if (worker_started)
		pthread_join(worker, NULL);
out_mhd:
	MHD_stop_daemon(mhd);
out_pool:
	conns_free(W.conns);
	pool_close(&W.pool);
	pool_close(&W.rpool);
	auth_cache_free(W.env.auth);
	framecache_free(W.env.frames);
	return rc;
}
