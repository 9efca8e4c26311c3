/* server: sm-web's HTTP server, authentication and request plumbing (see server.h). */
#include "server.h"
#include "arena.h"
#include "db.h"
#include "framecache.h"
#include "httpd.h"
#include "log.h"
#include "run.h"
#include "sha256.h"
#include "static.h"
#include "util.h"

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

#define COOKIE "sm_token"
#define POOL_WAIT_S 10

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
	struct auth_cache *auth;
	struct framecache *frames;
	struct pool pool;
	unsigned char secret[32];   /* keys the cross-site request tokens; new at each start */
	atomic_llong requests;
};

static struct web W;
static volatile sig_atomic_t worker_stop;

void web_config_default(struct web_config *c)
{
	memset(c, 0, sizeof(*c));
	c->listen = "127.0.0.1:8081";
	c->threads = 4;
	c->max_connections = 256;
	c->max_body = 8u << 20;
	c->worker = true;
	c->auth_ttl_ms = 10000;
	c->frame_cache_bytes = (size_t)256 << 20;
}

/* ---- the connection pool ---- */

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
	/* a connection the server dropped (restart, idle timeout) is made again */
	if (c && PQstatus(c) != CONNECTION_OK)
		PQreset(c);
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

/* ---- request helpers ---- */

const char *req_query(struct req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, name);
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

void req_query_each(struct req *rq, bool (*fn)(void *cls, const char *key, const char *value), void *cls)
{
	struct each e = { fn, cls };

	MHD_get_connection_values(rq->conn, MHD_GET_ARGUMENT_KIND, each_value, &e);
}

const char *req_header(struct req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

int req_frame_names(struct req *rq, const char *ids, const char ***names, size_t *n)
{
	int32_t tmp[1024];
	int k = ids ? db_parse_int_array(ids, tmp, 1024) : 0;
	char err[256];

	*n = 0;
	*names = arena_calloc(rq->a, k > 0 ? (size_t)k : 1, sizeof(char *));
	if (k < 0 || !*names)
		return -1;
	if (k && framecache_names(rq->frames, rq->db, tmp, (size_t)k, *names, rq->a, err, sizeof(err)) < 0) {
		log_warn("frame names", "error=\"%s\"", err);
		return -1;
	}
	*n = (size_t)k;
	return 0;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

const char *req_id_array(struct req *rq, PGresult *r, int col)
{
	int n = PQntuples(r);
	long long *v = arena_alloc(rq->a, ((size_t)n + 1) * sizeof(*v));
	struct buf b = BUF_INIT(0);
	const char *out;

	if (!v)
		return "{}";
	for (int i = 0; i < n; i++)
		v[i] = strtoll(PQgetvalue(r, i, col), NULL, 10);
	qsort(v, (size_t)n, sizeof(*v), cmp_ll);
	buf_putc(&b, '{');
	for (int i = 0; i < n; i++)
		if (i == 0 || v[i] != v[i - 1])
			buf_printf(&b, b.len > 1 ? ",%lld" : "%lld", v[i]);
	buf_putc(&b, '}');
	out = req_strdup(rq, buf_cstr(&b));
	buf_release(&b);
	return out ? out : "{}";
}

void req_add_header(struct req *rq, const char *name, const char *value)
{
	if (rq->nheaders < REQ_MAX_HEADERS && name && value) {
		rq->hname[rq->nheaders] = name;
		rq->hval[rq->nheaders++] = value;
	}
}

char *req_strdup(struct req *rq, const char *s)
{
	return arena_strndup(rq->a, s, strlen(s));
}

char *req_printf(struct req *rq, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	return arena_strndup(rq->a, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent- and plus-decodes s[0..n) into the arena. */
static char *form_decode(struct req *rq, const char *s, size_t n)
{
	char *out = arena_alloc(rq->a, n + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '+') {
			*o++ = ' ';
		} else if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			*o++ = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
			i += 2;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	return out;
}

const char *req_form(struct req *rq, const char *name)
{
	const char *p = rq->body.data ? rq->body.data : "", *end = p + rq->body.len;
	size_t nl = strlen(name);

	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p)), *stop = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(stop - p));

		if (eq && (size_t)(eq - p) == nl && memcmp(p, name, nl) == 0) {
			char *v = form_decode(rq, eq + 1, (size_t)(stop - eq - 1));
			/* decoded text must be UTF-8 like everything else */
			return v && util_utf8_valid(v, strlen(v)) ? v : NULL;
		}
		p = stop + 1;
	}
	return NULL;
}

void req_json_error(struct req *rq, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* messages quote what the client sent (cut at a byte count): keep the JSON UTF-8 */
	for (size_t i = 0, len, n = strlen(msg); i < n; i += len)
		if (!(len = util_utf8_seq((const unsigned char *)msg + i, n - i))) {
			msg[i] = '?';
			len = 1;
		}
	buf_reset(&rq->out);
	buf_puts(&rq->out, "{\"error\": ");
	buf_put_json_str(&rq->out, msg, strlen(msg));
	buf_puts(&rq->out, "}\n");
	rq->status = status;
	rq->ctype = "application/json";
}

static void text_error(struct req *rq, int status, const char *msg)
{
	buf_reset(&rq->out);
	buf_puts(&rq->out, msg);
	buf_putc(&rq->out, '\n');
	rq->status = status;
	rq->ctype = "text/plain; charset=utf-8";
}

/* ---- authentication ---- */

static void csrf_of(const char *token, char out[33])
{
	unsigned char in[32 + AUTH_TOKEN_LEN + 1], h[SHA256_LEN];
	size_t tl = strnlen(token, AUTH_TOKEN_LEN + 1);

	memcpy(in, W.secret, 32);
	memcpy(in + 32, token, tl);
	sha256(in, 32 + tl, h);
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static void authenticate(struct req *rq)
{
	const char *hdr = req_header(rq, MHD_HTTP_HEADER_AUTHORIZATION);
	const char *cookie = MHD_lookup_connection_value(rq->conn, MHD_COOKIE_KIND, COOKIE);
	enum auth_role role = AUTH_NONE;

	rq->role = AUTH_NONE;
	rq->csrf[0] = '\0';
	if (hdr) {
		if (auth_check(W.auth, rq->db, hdr, &role) == 0)
			rq->role = role;
		return;
	}
	if (cookie && strlen(cookie) == AUTH_TOKEN_LEN && auth_check(W.auth, rq->db, cookie, &role) == 0 &&
	    role != AUTH_NONE) {
		rq->role = role;
		rq->via_cookie = true;
		csrf_of(cookie, rq->csrf);
	}
}

bool req_may_read(struct req *rq)
{
	return rq->role >= AUTH_ANALYST || rq->cfg->anonymous_read;
}

/* The Origin header, when a browser sends one, names this server. */
static bool same_origin(struct req *rq)
{
	const char *origin = req_header(rq, "Origin"), *host = req_header(rq, MHD_HTTP_HEADER_HOST);
	const char *rest;

	if (!origin)
		return true;
	if (!host)
		return false;
	if (strncmp(origin, "http://", 7) == 0)
		rest = origin + 7;
	else if (strncmp(origin, "https://", 8) == 0)
		rest = origin + 8;
	else
		return false;
	return strcmp(rest, host) == 0;
}

bool req_may_write(struct req *rq, bool json)
{
	const char *why = NULL;
	int status = 403;

	if (rq->role < AUTH_ANALYST) {
		why = rq->role == AUTH_NONE ? "an analyst or admin token is required" :
					      "this token may not change anything (analyst or admin needed)";
		status = rq->role == AUTH_NONE ? 401 : 403;
	} else if (rq->via_cookie) {
		const char *t = req_header(rq, "X-CSRF-Token");
		if (!t)
			t = req_form(rq, "csrf");
		if (!same_origin(rq))
			why = "cross-site request refused (Origin is not this server)";
		else if (!t || strlen(t) != 32 || !util_ct_equal(t, rq->csrf, 32))
			why = "cross-site request token missing or wrong (reload the page)";
	}
	if (!why)
		return true;
	if (json)
		req_json_error(rq, status, "%s", why);
	else
		text_error(rq, status, why);
	return false;
}

enum auth_role req_login(struct req *rq, const char *token)
{
	enum auth_role role = AUTH_NONE;

	if (!token || strlen(token) != AUTH_TOKEN_LEN || auth_check(W.auth, rq->db, token, &role) < 0)
		return AUTH_NONE;
	if (role >= AUTH_ANALYST) {
		req_add_header(rq, MHD_HTTP_HEADER_SET_COOKIE,
			       req_printf(rq, COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000%s",
					  token, rq->cfg->cookie_secure ? "; Secure" : ""));
		rq->via_cookie = true;
		rq->role = role;
		csrf_of(token, rq->csrf);
	}
	return role;
}

void req_logout(struct req *rq)
{
	req_add_header(rq, MHD_HTTP_HEADER_SET_COOKIE,
		       req_printf(rq, COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0%s",
				  rq->cfg->cookie_secure ? "; Secure" : ""));
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
	text_error(rq, 404, "no such file");
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
		text_error(rq, ok ? 200 : 503, ok ? "ok" : "database unreachable");
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
			text_error(rq, 400, "a query parameter is not UTF-8");
		return;
	}
	authenticate(rq);
	if (api)
		api_handle(rq);
	else
		pages_handle(rq);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct req *rq = *con_cls;
	enum MHD_Result ret;

	(void)cls;
	(void)version;
	if (!rq) {
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		rq->a = arena_open(0);
		if (!rq->a) {
			free(rq);
			return MHD_NO;
		}
		rq->conn = conn;
		rq->cfg = W.cfg;
		rq->frames = W.frames;
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
	rq->db = pool_get(&W.pool);
	if (!rq->db) {
		req_json_error(rq, 503, "all database connections are busy; try again");
		req_add_header(rq, "Retry-After", "1");
		return send_response(rq);
	}
	dispatch(rq);
	pool_put(&W.pool, rq->db);
	rq->db = NULL;
	atomic_fetch_add(&W.requests, 1);
	if (rq->status >= 500)
		log_warn("request failed", "method=%s path=\"%.200s\" status=%d", method, url, rq->status);
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
	if (util_random(W.secret, sizeof(W.secret)) < 0) {
		log_error("no randomness for the session secret", "%s", "");
		return -1;
	}
	W.auth = auth_cache_open(cfg->auth_ttl_ms, 4096);
	W.frames = framecache_open(cfg->frame_cache_bytes);
	pthread_mutex_init(&W.pool.lock, NULL);
	pthread_cond_init(&W.pool.cond, NULL);
	W.pool.size = cfg->threads;
	W.pool.idle = calloc((size_t)cfg->threads, sizeof(PGconn *));
	if (!W.auth || !W.frames || !W.pool.idle) {
		log_error("out of memory at start", "%s", "");
		goto out_pool;
	}
	for (int i = 0; i < cfg->threads; i++) {
		PGconn *c = db_connect(cfg->conninfo, err, sizeof(err));
		if (!c || (i == 0 && db_schema_check(c, err, sizeof(err)) < 0)) {
			if (c)
				PQfinish(c);
			log_error("cannot start", "error=\"%s\"", err);
			goto out_pool;
		}
		W.pool.idle[W.pool.nidle++] = c;
	}
	mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
				       (fam == AF_INET6 ? MHD_USE_IPv6 : 0),
			       0, NULL, NULL, on_request, NULL,
			       MHD_OPTION_EXTERNAL_LOGGER, httpd_log, NULL,
			       MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
			       MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
			       MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
			       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
			       MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
			       MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
			       MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
			       MHD_OPTION_END);
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
	for (int i = 0; i < W.pool.nidle; i++)
		PQfinish(W.pool.idle[i]);
	free(W.pool.idle);
	auth_cache_free(W.auth);
	framecache_free(W.frames);
	return rc;
}
