/* server: HTTP front, bounded queue and database worker pool of sm-ingest (see server.h). */
#include "ingest/server.h"
#include "common/auth.h"
#include "common/conns.h"
#include "common/db.h"
#include "common/httpd.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/util.h"
#include "ingest/idcache.h"
#include "ingest/metrics.h"
#include "ingest/profiles.h"
#include "ingest/store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* ROUTE_AUTH: suspended before the body while a worker checks a token the cache does not know */
enum route { ROUTE_NONE, ROUTE_STREAMS, ROUTE_AUTH };

/* Each worker statement is cut off after this (store.c sets it); shutdown waits that long at most. */
#define STATEMENT_TIMEOUT_S 60
/* connections beyond --max-connections kept for /healthz and /metrics when none can give way */
#define CONN_RESERVE 16
enum rq_state { RQ_RECEIVING, RQ_QUEUED, RQ_DONE };

enum rq_kind {
	RQ_STREAMS,                  /* POST /api/v1/streams */
	RQ_REPORT,                   /* POST /api/v1/agents/report */
	RQ_PROFILE_PUT,              /* POST /api/v1/profiles */
	RQ_PROFILE_GET,              /* GET /api/v1/profiles/{build_id} */
	RQ_IMPORT,                   /* POST /api/v1/import */
};

#define IMPORT_QUERY_MAX 16384       /* bytes of query arguments an import keeps */

struct request {
	struct server *srv;
	struct MHD_Connection *conn;
	enum route route;
	_Atomic int state;
	struct buf body;
	size_t discarded;
	int early_status;            /* refuse once the body is in (413, 503) */
	const char *early_msg;
	bool ndjson, zstd;
	enum rq_kind kind;           /* what the body is for (all take the streams' way: token, limits, queue) */
	char build_id[129];          /* RQ_PROFILE_GET */
	struct buf query;            /* RQ_IMPORT: "key\0value\0" of each query argument */
	char media[128];             /* RQ_IMPORT: the Content-Type */
	bool authorized;             /* a worker found the token good */
	bool held;                   /* counted in server.suspended (handed to a worker, not answered) */
	char *authorization;
	const char *endpoint;        /* for the log: the endpoint's pattern; NULL: none (path then) */
	char path[128];              /* of a request no endpoint took, cut, for the log ("" for the others) */
	struct handler_response resp;
	int64_t start_ns;
	struct request *next;
};

struct server {
	const struct ingest_config *cfg;
	struct MHD_Daemon *mhd;
	struct conns *conns;
	struct idcache *cache;
	struct auth_cache *auth;

	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct request *head, *tail;
	int qlen;                    /* queued + reserved slots */
	bool stopping;               /* workers: answer what is left with 503 and exit */

	pthread_t *workers;
	struct handler **handlers;
	int nworkers;

	pthread_t maint;
	pthread_mutex_t mlock;
	pthread_cond_t mcond;
	bool maint_stop;
	struct handler *maint_handler;
	_Atomic bool db_ok;
	char db_error[512];          /* under mlock */

	_Atomic bool draining;
	_Atomic int64_t suspended;       /* requests handed to workers, not yet answered */
	_Atomic int64_t inflight;
	_Atomic int64_t buffered;
};

/* A request handed to a worker counts in suspended until it is answered, or until its client went
 * away while it was held (libmicrohttpd then ends it without calling the handler again): shutdown
 * waits for the count. */
static void held_add(struct server *s, struct request *rq)
{
	rq->held = true;
	atomic_fetch_add(&s->suspended, 1);
}

static void held_done(struct server *s, struct request *rq)
{
	if (rq->held) {
		rq->held = false;
		atomic_fetch_sub(&s->suspended, 1);
	}
}

void server_config_default(struct ingest_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->listen = "127.0.0.1:8080";
	cfg->workers = 4;
	cfg->queue = 64;
	cfg->max_connections = 512;
	cfg->max_per_ip = 64;
	cfg->header_timeout_s = 10;
	cfg->conn_timeout_s = 60;
	cfg->min_body_rate = 1024;
	cfg->max_buffered = (size_t)512 << 20;
	cfg->auth_ttl_ms = 10000;
	cfg->drain_timeout_s = 30;
	cfg->maintain_interval_s = 3600;
	cfg->fold_interval_s = 10;
	cfg->idcache_frames = 262144;
	cfg->idcache_stacks = 262144;
	cfg->lim.max_body = (size_t)16 << 20;
	cfg->lim.max_decoded = (size_t)128 << 20;
	cfg->lim.max_batch = 1000;
	cfg->lim.profile_merge_ms = 60000;
	wire_limits_default(&cfg->lim.wire);
}

static enum MHD_Result respond(struct MHD_Connection *conn, int status, const char *ctype,
			       const char *body, size_t len, int retry_after)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
								 MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", ctype);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (retry_after > 0) {
		char ra[16];
		snprintf(ra, sizeof(ra), "%d", retry_after);
		MHD_add_response_header(r, "Retry-After", ra);
	}
	if (status == 405)
		MHD_add_response_header(r, "Allow", "POST");
	ret = MHD_queue_response(conn, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result respond_rq(struct request *rq, int status, const char *msg, int retry_after)
{
	handler_error(&rq->resp, status, msg);
	rq->resp.retry_after = retry_after;
	return respond(rq->conn, status, "application/json", rq->resp.body.data, rq->resp.body.len,
		       retry_after);
}

/* Media type without parameters, compared case-insensitively. */
static bool media_is(const char *h, const char *want)
{
	size_t n = strlen(want);

	while (*h == ' ')
		h++;
	return strncasecmp(h, want, n) == 0 && (h[n] == '\0' || h[n] == ';' || h[n] == ' ');
}

/* ---- queue ---- */

static bool queue_reserve(struct server *s)
{
	bool ok;

	pthread_mutex_lock(&s->qlock);
	ok = !s->stopping && s->qlen < s->cfg->queue;
	if (ok)
		s->qlen++;
	pthread_mutex_unlock(&s->qlock);
	if (ok)
		metrics_gauge_add(GAUGE_QUEUE_DEPTH, 1);
	return ok;
}

static void queue_push(struct server *s, struct request *rq)
{
	pthread_mutex_lock(&s->qlock);
	rq->next = NULL;
	if (s->tail)
		s->tail->next = rq;
	else
		s->head = rq;
	s->tail = rq;
	pthread_cond_signal(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
}

/* Next request, or NULL when stopping and nothing is left. *stop tells the
 * worker to answer it with 503 instead of processing it. */
static struct request *queue_pop(struct server *s, bool *stop)
{
	struct request *rq;

	pthread_mutex_lock(&s->qlock);
	/* a reserved slot is a request about to be pushed: wait for it even when stopping */
	while (!s->head && !(s->stopping && s->qlen == 0))
		pthread_cond_wait(&s->qcond, &s->qlock);
	rq = s->head;
	if (rq) {
		s->head = rq->next;
		if (!s->head)
			s->tail = NULL;
		s->qlen--;
		metrics_gauge_add(GAUGE_QUEUE_DEPTH, -1);
	}
	*stop = s->stopping;
	pthread_mutex_unlock(&s->qlock);
	return rq;
}

struct worker_arg {
	struct server *srv;
	struct handler *h;
};

/* What /healthz tells: the last thing any thread learnt of the database, the maintenance
 * thread's check or a worker's request, so that it is up again with the first request that
 * succeeds (not up to 2 s later) and down with the first that finds it gone. */
static void db_state(struct server *s, bool ok, const char *why)
{
	pthread_mutex_lock(&s->mlock);
	if (ok != atomic_load(&s->db_ok)) {
		if (ok)
			log_info("database reachable again", "%s", "");
		else
			log_error("database unreachable", "error=\"%s\"", why);
	}
	if (!ok)
		snprintf(s->db_error, sizeof(s->db_error), "%s", why);
	atomic_store(&s->db_ok, ok);
	metrics_gauge_set(GAUGE_DB_UP, ok);
	pthread_mutex_unlock(&s->mlock);
}

static void db_seen(struct server *s, struct handler *h)
{
	int seen = handler_db_seen(h);

	if (seen)
		db_state(s, seen > 0, handler_last_error(h));
}

static void *worker_main(void *p)
{
	struct worker_arg *wa = p;
	struct server *s = wa->srv;
	struct request *rq;
	bool stop;

	while ((rq = queue_pop(s, &stop))) {
		if (rq->route == ROUTE_AUTH) {
			/* only the token: resp.status stays 0 when it is good */
			if (stop) {
				rq->resp.status = 503;
			} else if (handler_authorize(wa->h, rq->authorization, &rq->resp) == 0) {
				rq->resp.status = 0;
			}
			db_seen(s, wa->h);
			MHD_resume_connection(rq->conn);
			continue;
		}
		if (stop) {
			handler_error(&rq->resp, 503, "server is shutting down; retry later");
			rq->resp.retry_after = 5;
		} else {
			struct handler_request hr = {
				.body = rq->body.data ? rq->body.data : "",
				.len = rq->body.len,
				.ndjson = rq->ndjson,
				.zstd = rq->zstd,
				.authorization = rq->authorization,
			};
			switch (rq->kind) {
			case RQ_REPORT:
				handler_report(wa->h, &hr, &rq->resp);
				break;
			case RQ_PROFILE_PUT:
				handler_profile_put(wa->h, &hr, &rq->resp);
				break;
			case RQ_PROFILE_GET:
				handler_profile_get(wa->h, &hr, rq->build_id, &rq->resp);
				break;
			case RQ_IMPORT:
				hr.query = rq->query.data ? rq->query.data : "";
				hr.query_len = rq->query.len;
				hr.media = rq->media;
				handler_import(wa->h, &hr, &rq->resp);
				metrics_bytes(rq->body.len, rq->resp.decoded_bytes);
				metrics_streams(rq->resp.accepted, rq->resp.duplicates, rq->resp.events);
				break;
			case RQ_STREAMS:
				handler_process(wa->h, &hr, &rq->resp);
				metrics_bytes(rq->body.len, rq->resp.decoded_bytes);
				metrics_streams(rq->resp.accepted, rq->resp.duplicates, rq->resp.events);
				break;
			}
		}
		db_seen(s, wa->h);
		/* the body is no longer needed: give its memory back now */
		atomic_fetch_sub(&s->buffered, (int64_t)rq->body.len);
		metrics_gauge_add(GAUGE_BUFFERED_BYTES, -(int64_t)rq->body.len);
		{
			size_t held = rq->body.len;

			buf_release(&rq->body);
			rq->body.len = 0;
			handler_trim(wa->h, held);
		}
		atomic_store(&rq->state, RQ_DONE);
		MHD_resume_connection(rq->conn);
	}
	return NULL;
}

/* ---- HTTP ---- */

static enum MHD_Result serve_health(struct server *s, struct MHD_Connection *conn)
{
	struct buf b = BUF_INIT(4096);
	struct jsonw w;
	enum MHD_Result ret;
	int status = 200;

	jsonw_init_compact(&w, &b);
	jsonw_object(&w);
	if (atomic_load(&s->draining)) {
		jsonw_kstr(&w, "status", "draining");
		status = 503;
	} else if (atomic_load(&s->db_ok)) {
		jsonw_kstr(&w, "status", "ok");
		jsonw_kstr(&w, "db", "ok");
		jsonw_ki64(&w, "queue_depth", metrics_gauge_get(GAUGE_QUEUE_DEPTH));
		jsonw_ki64(&w, "workers", s->nworkers);
	} else {
		jsonw_kstr(&w, "status", "unavailable");
		pthread_mutex_lock(&s->mlock);
		jsonw_kstr(&w, "db", s->db_error);
		pthread_mutex_unlock(&s->mlock);
		status = 503;
	}
	jsonw_end(&w);
	if (jsonw_finish(&w) < 0) {
		buf_release(&b);
		return respond(conn, 500, "text/plain", "out of memory\n", 14, 0);
	}
	ret = respond(conn, status, "application/json", buf_cstr(&b), b.len, 0);
	buf_release(&b);
	return ret;
}

static enum MHD_Result serve_metrics(struct server *s, struct MHD_Connection *conn)
{
	struct buf b = BUF_INIT(1 << 20);
	enum MHD_Result ret;

	metrics_render(&b);
	idcache_render(s->cache, &b);
	conns_render(s->conns, &b);
	ret = respond(conn, 200, "text/plain; version=0.0.4", buf_cstr(&b), b.len, 0);
	buf_release(&b);
	return ret;
}

static enum MHD_Result start_streams(struct server *s, struct request *rq)
{
	struct MHD_Connection *conn = rq->conn;
	const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
	const char *ce = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Encoding");
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
	const char *au = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	int64_t clen;
	enum auth_role role;

	if (atomic_load(&s->draining)) {
		metrics_reject(REASON_OVERLOADED, 1);
		return respond_rq(rq, 503, "server is shutting down; retry later", 5);
	}
	/* a token known to be bad needs no body */
	if (!au || (!rq->authorized && auth_cached(s->auth, au, &role) && role != AUTH_INGEST &&
		    role != AUTH_ADMIN)) {
		metrics_reject(REASON_UNAUTHORIZED, 1);
		return respond_rq(rq, 401, au ? "authorization: unknown or revoked token"
					      : "authorization: missing bearer token", 0);
	}
	/* nor does one nobody has checked yet: a worker asks the database while the
	 * connection waits, so random tokens cannot make the server buffer bodies;
	 * libmicrohttpd calls this again once the connection is resumed */
	if (!rq->authorized && !auth_cached(s->auth, au, &role)) {
		free(rq->authorization);
		rq->authorization = strndup(au, 512);
		if (!rq->authorization)
			return MHD_NO;
		if (!queue_reserve(s)) {
			metrics_reject(REASON_OVERLOADED, 1);
			return respond_rq(rq, 503, "server busy: request queue full; retry later", 1);
		}
		rq->route = ROUTE_AUTH;
		atomic_store(&rq->state, RQ_QUEUED);
		held_add(s, rq);
		MHD_suspend_connection(rq->conn);
		queue_push(s, rq);
		return MHD_YES;
	}
	if (rq->kind == RQ_PROFILE_GET)
		goto accept;   /* no body */
	if (rq->kind == RQ_IMPORT) {
		/* a profile in its own format: any media type; gzip is read by the importer */
		snprintf(rq->media, sizeof(rq->media), "%s", ct ? ct : "");
		if (ce && !media_is(ce, "identity") && !media_is(ce, "gzip")) {
			if (!media_is(ce, "zstd")) {
				metrics_reject(REASON_UNSUPPORTED_MEDIA, 1);
				return respond_rq(rq, 415, "Content-Encoding: gzip, zstd or none", 0);
			}
			rq->zstd = true;
		}
		goto sized;
	}
	if (rq->kind != RQ_STREAMS && (!ct || !media_is(ct, "application/json"))) {
		metrics_reject(REASON_UNSUPPORTED_MEDIA, 1);
		return respond_rq(rq, 415, "Content-Type: must be application/json", 0);
	}
	if (!ct || !(media_is(ct, "application/json") || media_is(ct, "application/x-ndjson"))) {
		metrics_reject(REASON_UNSUPPORTED_MEDIA, 1);
		return respond_rq(rq, 415, "Content-Type: must be application/json or application/x-ndjson", 0);
	}
	rq->ndjson = media_is(ct, "application/x-ndjson");
	if (ce && !media_is(ce, "identity")) {
		if (!media_is(ce, "zstd")) {
			metrics_reject(REASON_UNSUPPORTED_MEDIA, 1);
			return respond_rq(rq, 415, "Content-Encoding: only zstd is supported", 0);
		}
		rq->zstd = true;
	}
sized:
	if (cl && util_parse_i64(cl, 0, INT64_MAX, &clen) == 0 && (uint64_t)clen > s->cfg->lim.max_body) {
		char msg[96];
		metrics_reject(REASON_TOO_LARGE, 1);
		snprintf(msg, sizeof(msg), "body: larger than the limit of %zu bytes", s->cfg->lim.max_body);
		return respond_rq(rq, 413, msg, 0);
	}
accept:
	free(rq->authorization);
	rq->authorization = strndup(au, 512);
	if (!rq->authorization)
		return MHD_NO;
	rq->body.max = s->cfg->lim.max_body;
	/* known size: one allocation, so memory is what --max-buffered counts */
	if (cl && util_parse_i64(cl, 0, INT64_MAX, &clen) == 0 && clen > 0)
		buf_reserve(&rq->body, (size_t)clen);
	rq->route = ROUTE_STREAMS;
	return MHD_YES;
}

static enum MHD_Result receive_body(struct server *s, struct request *rq, const char *data,
				    size_t n)
{
	if (rq->early_status) {
		rq->discarded += n;
		/* a sender that does not stop gets disconnected */
		return rq->discarded > 4 * s->cfg->lim.max_body ? MHD_NO : MHD_YES;
	}
	if (rq->body.len + n > s->cfg->lim.max_body) {
		rq->early_status = 413;
		rq->early_msg = "body: larger than the limit";
		metrics_reject(REASON_TOO_LARGE, 1);
		return MHD_YES;
	}
	if (atomic_fetch_add(&s->buffered, (int64_t)n) + (int64_t)n > (int64_t)s->cfg->max_buffered ||
	    buf_append(&rq->body, data, n) < 0) {
		atomic_fetch_sub(&s->buffered, (int64_t)n);
		rq->early_status = 503;
		rq->early_msg = "server busy: too much data in flight; retry later";
		metrics_reject(REASON_OVERLOADED, 1);
		return MHD_YES;
	}
	metrics_gauge_add(GAUGE_BUFFERED_BYTES, (int64_t)n);
	return MHD_YES;
}

/* Keeps one query argument as "key\0value\0" (a key without a value as ""). */
static enum MHD_Result keep_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct buf *b = cls;

	(void)kind;
	buf_append(b, key, strlen(key) + 1);
	buf_append(b, value ? value : "", value ? strlen(value) + 1 : 1);
	return buf_error(b) ? MHD_NO : MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct server *s = cls;
	struct request *rq = *con_cls;

	if (!rq) {
		const char *why;
		int refuse;

		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		rq->srv = s;
		rq->conn = conn;
		rq->start_ns = util_now_mono_ns();
		*con_cls = rq;
		atomic_fetch_add(&s->inflight, 1);
		metrics_gauge_add(GAUGE_INFLIGHT, 1);
		if ((refuse = httpd_check_framing(conn, version, &why))) {
			rq->resp.status = refuse;
			metrics_reject(REASON_INVALID, 1);
			return httpd_refuse(conn, refuse, why);
		}
		if (strcmp(url, "/api/v1/streams") == 0 || strcmp(url, "/api/v1/agents/report") == 0 ||
		    strcmp(url, "/api/v1/profiles") == 0) {
			if (strcmp(method, "POST") != 0)
				return respond_rq(rq, 405, "method: use POST", 0);
			rq->kind = url[8] == 'a' ? RQ_REPORT : url[8] == 'p' ? RQ_PROFILE_PUT : RQ_STREAMS;
			rq->endpoint = rq->kind == RQ_REPORT ? "/api/v1/agents/report" :
				    rq->kind == RQ_PROFILE_PUT ? "/api/v1/profiles" : "/api/v1/streams";
			return start_streams(s, rq);
		}
		if (strcmp(url, "/api/v1/import") == 0) {
			if (strcmp(method, "POST") != 0)
				return respond_rq(rq, 405, "method: use POST", 0);
			rq->kind = RQ_IMPORT;
			rq->endpoint = "/api/v1/import";
			rq->query = (struct buf)BUF_INIT(IMPORT_QUERY_MAX);
			MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, keep_arg, &rq->query);
			if (buf_error(&rq->query))
				return respond_rq(rq, 414, "query: longer than 16384 bytes", 0);
			return start_streams(s, rq);
		}
		if (strncmp(url, "/api/v1/profiles/", 17) == 0) {
			rq->endpoint = "/api/v1/profiles/{build_id}";
			if (strcmp(method, "GET") != 0)
				return respond_rq(rq, 405, "method: use GET", 0);
			if (strlen(url + 17) >= sizeof(rq->build_id) || !profiles_build_id_ok(url + 17))
				return respond_rq(rq, 404, "build_id: lower-case hex (or path- and hex), 1 to 128 characters", 0);
			memcpy(rq->build_id, url + 17, strlen(url + 17) + 1);
			rq->kind = RQ_PROFILE_GET;
			return start_streams(s, rq);
		}
		if (strcmp(url, "/healthz") == 0 || strcmp(url, "/metrics") == 0) {
			enum MHD_Result ret;

			if (httpd_probe_method(conn, method, &ret)) {
				rq->resp.status = strcmp(method, MHD_HTTP_METHOD_OPTIONS) == 0 ? 204 : 405;
				return ret;
			}
			rq->endpoint = url[1] == 'h' ? "/healthz" : "/metrics";
			rq->resp.status = 200;
			return url[1] == 'h' ? serve_health(s, conn) : serve_metrics(s, conn);
		}
		metrics_reject(REASON_NOT_FOUND, 1);
		snprintf(rq->path, sizeof(rq->path), "%s", url);
		return respond_rq(rq, 404, "no such endpoint (POST /api/v1/streams, POST /api/v1/import,"
					   " POST /api/v1/agents/report, POST /api/v1/profiles,"
					   " GET /api/v1/profiles/{build_id}, GET /healthz,"
					   " GET /metrics)", 0);
	}
	if (rq->route == ROUTE_AUTH) {
		/* resumed after the token check, still before the body */
		held_done(s, rq);
		rq->route = ROUTE_NONE;
		if (rq->resp.status == 503 && !rq->resp.body.len)
			return respond_rq(rq, 503, "server is shutting down; retry later", 5);
		if (rq->resp.status)   /* the worker's answer: 401, or 503 without a database */
			return respond(conn, rq->resp.status, "application/json", rq->resp.body.data,
				       rq->resp.body.len, rq->resp.retry_after);
		rq->authorized = true;
		atomic_store(&rq->state, RQ_RECEIVING);
		return start_streams(s, rq);
	}
	if (rq->route != ROUTE_STREAMS) {
		*upload_size = 0; /* answered already; the body is ignored */
		return MHD_YES;
	}
	if (*upload_size) {
		enum MHD_Result r = receive_body(s, rq, upload, *upload_size);
		*upload_size = 0;
		return r;
	}
	if (atomic_load(&rq->state) == RQ_DONE) {
		held_done(s, rq);
		return respond(conn, rq->resp.status, "application/json", rq->resp.body.data,
			       rq->resp.body.len, rq->resp.retry_after);
	}
	if (rq->early_status)
		return respond_rq(rq, rq->early_status, rq->early_msg,
				  rq->early_status == 503 ? 2 : 0);
	if (!queue_reserve(s)) {
		metrics_reject(REASON_OVERLOADED, 1);
		return respond_rq(rq, 503, "server busy: request queue full; retry later", 1);
	}
	atomic_store(&rq->state, RQ_QUEUED);
	held_add(s, rq);
	MHD_suspend_connection(conn);
	queue_push(s, rq);
	return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct server *s = cls;
	struct request *rq = *con_cls;
	int64_t ms;

	(void)conn;
	if (!rq)
		return;
	ms = (util_now_mono_ns() - rq->start_ns) / 1000000;
	metrics_request(rq->resp.status, util_now_mono_ns() - rq->start_ns);
	if (rq->route == ROUTE_STREAMS || rq->resp.status >= 400) {
		enum log_level lvl = rq->resp.status == 200 ? LOG_INFO : LOG_WARN;
		log_msg(lvl, "streams request", "route=%s path=%s status=%d accepted=%zu duplicates=%zu rejected=%zu"
			" events=%zu bytes=%zu ms=%lld%s", rq->endpoint ? rq->endpoint : "-", rq->path, rq->resp.status,
			rq->resp.accepted,
			rq->resp.duplicates, rq->resp.rejected, rq->resp.events, rq->resp.decoded_bytes,
			(long long)ms, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " aborted=1");
	}
	held_done(s, rq);
	atomic_fetch_sub(&s->buffered, (int64_t)rq->body.len);
	metrics_gauge_add(GAUGE_BUFFERED_BYTES, -(int64_t)rq->body.len);
	buf_release(&rq->body);
	buf_release(&rq->query);
	buf_release(&rq->resp.body);
	free(rq->authorization);
	free(rq);
	*con_cls = NULL;
	atomic_fetch_sub(&s->inflight, 1);
	metrics_gauge_add(GAUGE_INFLIGHT, -1);
}

/* ---- maintenance: database health every few seconds, partitions hourly ---- */

static bool maint_stopping(struct server *s)
{
	bool stop;

	pthread_mutex_lock(&s->mlock);
	stop = s->maint_stop;
	pthread_mutex_unlock(&s->mlock);
	return stop;
}

/* The id cache warmed with what the database holds once it answers (a server started, not a batch
 * of the fleet's, pays the round trips): at most half of each map's young generation, leaving room
 * for the batches' before it turns over. */
static void warm_cache(struct server *s)
{
	int64_t t0 = util_now_mono_ns(), nf, ns;

	if (handler_warm_cache(s->maint_handler, s->cfg->idcache_frames / 2, s->cfg->idcache_stacks / 2, &nf, &ns) < 0) {
		log_warn("warming the id cache failed", "error=\"%s\"", handler_last_error(s->maint_handler));
		return;
	}
	log_info("id cache warmed", "frames=%lld stacks=%lld ms=%.0f", (long long)nf, (long long)ns,
		 (util_now_mono_ns() - t0) / 1e6);
}

static void *maint_main(void *p)
{
	struct server *s = p;
	/* the first fold one interval after the start, as every later one: a fold at once would take
	 * the first few batches alone, and cost about what a fold of an interval's batches costs */
	int64_t last_maint = util_now_mono_ns(), last_fold = last_maint;
	bool warmed = false;
	uint64_t epoch, warmed_gen = 0, seen_gen = 0, gen;

	pthread_mutex_lock(&s->mlock);
	while (!s->maint_stop) {
		struct timespec ts;
		bool ok;

		pthread_mutex_unlock(&s->mlock);
		ok = handler_ping(s->maint_handler) == 0;
		/* warmed at the start, and again once the cache was emptied (a failover's new primary, a
		 * collection's new epoch) and stayed so for a round: every worker empties it as it meets
		 * the new primary, and the warm-up comes after the last of them. Tried once per emptying:
		 * a failure is the database's, and batches fill the cache too */
		gen = idcache_stamp(s->cache, &epoch);
		if (ok && (!warmed || (gen != warmed_gen && gen == seen_gen))) {
			if (warmed)
				log_info("id cache emptied: warming it again", "generation=%llu",
					 (unsigned long long)gen);
			warm_cache(s);
			warmed = true;
			warmed_gen = idcache_stamp(s->cache, &epoch);
		}
		seen_gen = gen;
		/* the statistics a few seconds behind at most (a miner folds what is left before it
		 * reads them): a fold of more deltas at once adds each frame's and call's counts to
		 * the day's totals once for all of them, where every batch repeats the common ones */
		if (ok && util_now_mono_ns() - last_fold >= (int64_t)s->cfg->fold_interval_s * 1000000000) {
			int n = 0;

			/* a call folds up to STORE_FOLD_MAX deltas in a transaction: again while it
			 * folds that many, up to 50 times (the health check and the partitions come
			 * between); the few left after a smaller one are the newest batches', for the
			 * next fold with the ones that follow. Folding on while they come would fold a
			 * busy server's every few batches, adding the counts of the frames and calls they
			 * share once for each */
			for (int i = 0; i < 50 && !maint_stopping(s); i++)
				if ((n = handler_fold_stats(s->maint_handler)) < STORE_FOLD_MAX)
					break;
			if (n < 0)
				log_error("folding statistics failed", "error=\"%s\"",
					  handler_last_error(s->maint_handler));
			last_fold = util_now_mono_ns();
		}
		if (ok && util_now_mono_ns() - last_maint >
			  (int64_t)s->cfg->maintain_interval_s * 1000000000) {
			if (handler_maintain(s->maint_handler) < 0)
				log_error("maintenance failed", "error=\"%s\"",
					  handler_last_error(s->maint_handler));
			last_maint = util_now_mono_ns();
		}
		db_state(s, ok, handler_last_error(s->maint_handler));
		handler_db_seen(s->maint_handler);   /* told already */
		pthread_mutex_lock(&s->mlock);
		clock_gettime(CLOCK_REALTIME, &ts);
		/* while it is down, look again sooner: /healthz follows within half a second even
		 * when no request comes to find it back */
		if (ok) {
			ts.tv_sec += 2;
		} else if ((ts.tv_nsec += 500000000) >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (!s->maint_stop)
			pthread_cond_timedwait(&s->mcond, &s->mlock, &ts);
	}
	pthread_mutex_unlock(&s->mlock);
	return NULL;
}

/* ---- start and stop ---- */

static void stop_workers(struct server *s)
{
	pthread_mutex_lock(&s->qlock);
	s->stopping = true;
	pthread_cond_broadcast(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
}

/* Every thread inherits this mask; only the main thread takes the signals (sigwait()). */
static void block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
}

static int server_alloc(struct server *s, struct worker_arg **args)
{
	const struct ingest_config *cfg = s->cfg;

	s->cache = idcache_open(cfg->idcache_frames, cfg->idcache_stacks);
	s->auth = auth_cache_open(cfg->auth_ttl_ms, 1024);
	s->nworkers = cfg->workers;
	s->workers = calloc((size_t)cfg->workers, sizeof(*s->workers));
	s->handlers = calloc((size_t)cfg->workers, sizeof(*s->handlers));
	*args = calloc((size_t)cfg->workers, sizeof(**args));
	if (!s->cache || !s->auth || !s->workers || !s->handlers || !*args) {
		log_error("out of memory at start", "%s", "");
		return -1;
	}
	return 0;
}

/* The database reachable and its schema current, before anything is started. */
static int probe_database(const struct ingest_config *cfg)
{
	char err[1024];
	PGconn *probe = db_connect(cfg->conninfo, err, sizeof(err));
	int ok = probe && db_schema_check(probe, err, sizeof(err)) == 0;

	if (probe)
		PQfinish(probe);
	if (!ok) {
		log_error("cannot start", "error=\"%s\"", err);
		return -1;
	}
	return 0;
}

/* The maintenance thread's handler, which creates the event partitions before any request. */
static int open_maintenance(struct server *s)
{
	const struct ingest_config *cfg = s->cfg;
	char err[1024];

	s->maint_handler = handler_open(cfg->conninfo, &cfg->lim, s->cache, s->auth, err, sizeof(err));
	if (!s->maint_handler) {
		log_error("cannot start", "error=\"%s\"", err);
		return -1;
	}
	if (handler_maintain(s->maint_handler) < 0) {
		log_error("cannot create event partitions", "error=\"%s\"",
			  handler_last_error(s->maint_handler));
		return -1;
	}
	atomic_store(&s->db_ok, true);
	metrics_gauge_set(GAUGE_DB_UP, 1);
	return 0;
}

/* The database workers, each with a handler (a connection) of its own; *started counts the
 * threads running, also when one fails to start. */
static int start_workers(struct server *s, struct worker_arg *args, int *started)
{
	const struct ingest_config *cfg = s->cfg;
	char err[1024];

	for (int i = 0; i < cfg->workers; i++) {
		s->handlers[i] = handler_open(cfg->conninfo, &cfg->lim, s->cache, s->auth, err,
					      sizeof(err));
		if (!s->handlers[i]) {
			log_error("cannot open database worker", "worker=%d error=\"%s\"", i, err);
			return -1;
		}
		args[i].srv = s;
		args[i].h = s->handlers[i];
		if (pthread_create(&s->workers[i], NULL, worker_main, &args[i]) != 0) {
			handler_free(s->handlers[i]);
			s->handlers[i] = NULL;
			log_error("cannot start worker thread", "worker=%d", i);
			return -1;
		}
		(*started)++;
	}
	return 0;
}

/* The HTTP side: the connection limits (conns.h) and libmicrohttpd listening on addr. On a
 * failure nothing of it is left. */
static int start_http(struct server *s, int fam, struct sockaddr_storage *addr)
{
	const struct ingest_config *cfg = s->cfg;
	static const char *const reserved[] = { "/healthz", "/metrics", NULL };
	struct conns_config cc = {
		.max_connections = (unsigned)cfg->max_connections, .reserve = CONN_RESERVE,
		.max_per_ip = (unsigned)cfg->max_per_ip, .header_timeout_s = (unsigned)cfg->header_timeout_s,
		.idle_timeout_s = (unsigned)cfg->conn_timeout_s, .body_min_rate = (unsigned)cfg->min_body_rate,
		.other_fds = (unsigned)cfg->workers + 2, .metrics_prefix = "sm_ingest", .reserved_paths = reserved,
	};
	struct MHD_OptionItem copts[CONNS_NOPTIONS];
	char err[1024];

	s->conns = conns_open(&cc, on_request, s, on_completed, s, err, sizeof(err));
	if (!s->conns) {
		log_error("cannot start", "error=\"%s\"", err);
		return -1;
	}
	conns_options(s->conns, copts);
	s->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
				  MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC | MHD_USE_ERROR_LOG |
				  (fam == AF_INET6 ? MHD_USE_IPv6 : 0),
				  0, NULL, NULL, conns_access, s->conns,
				  MHD_OPTION_EXTERNAL_LOGGER, httpd_log, NULL,
				  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)addr,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024),
				  MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
				  MHD_OPTION_ARRAY, copts,
				  MHD_OPTION_END);
	if (!s->mhd) {
		log_error("cannot listen", "listen=\"%s\" error=\"%s\"", cfg->listen, strerror(errno));
		conns_free(s->conns);
		s->conns = NULL;
		return -1;
	}
	return 0;
}

/* Where it listens, in the log and in the port file when asked for. */
static void announce(const struct server *s)
{
	const struct ingest_config *cfg = s->cfg;
	int port = httpd_bound_port(s->mhd);
	char host[128];
	size_t hl = (size_t)(strrchr(cfg->listen, ':') - cfg->listen);

	snprintf(host, sizeof(host), "%.*s", (int)hl, cfg->listen);
	log_info("listening", "addr=%s:%d workers=%d queue=%d", host, port, cfg->workers,
		 cfg->queue);
	if (cfg->port_file && httpd_write_port_file(cfg->port_file, port) < 0)
		log_warn("cannot write the port file", "path=\"%s\" error=\"%s\"", cfg->port_file,
			 strerror(errno));
}

/* Until SIGTERM or SIGINT (SIGPIPE ignored). */
static void wait_signal(sigset_t *sigs)
{
	int sig;

	do {
		if (sigwait(sigs, &sig) != 0)
			sig = SIGTERM;
	} while (sig == SIGPIPE);
	log_info("shutting down: no new connections, finishing requests in flight", "signal=%s",
		 sig == SIGINT ? "INT" : "TERM");
}

/* No new connections; the requests in flight finished, whatever is still queued answered 503,
 * the workers stopped. -1 when requests are still held by the database after the drain. */
static int drain(struct server *s)
{
	const struct ingest_config *cfg = s->cfg;
	MHD_socket lfd;
	int64_t deadline;

	atomic_store(&s->draining, true);
	lfd = MHD_quiesce_daemon(s->mhd);
	if (lfd != MHD_INVALID_SOCKET)
		close(lfd);
	deadline = util_now_mono_ns() + (int64_t)cfg->drain_timeout_s * 1000000000;
	while (atomic_load(&s->inflight) > 0 && util_now_mono_ns() < deadline)
		usleep(20000);
	/* whatever is still queued is answered 503 (not stored: the sender retries) */
	stop_workers(s);
	/* libmicrohttpd must not be stopped with suspended connections: wait
	 * for the workers to answer; statement_timeout bounds their wait */
	deadline = util_now_mono_ns() + (int64_t)(STATEMENT_TIMEOUT_S + 10) * 1000000000;
	while (atomic_load(&s->suspended) > 0 && util_now_mono_ns() < deadline)
		usleep(20000);
	deadline = util_now_mono_ns() + (int64_t)2 * 1000000000;
	while (atomic_load(&s->inflight) > 0 && util_now_mono_ns() < deadline)
		usleep(20000);
	if (atomic_load(&s->suspended) > 0) {
		log_error("requests still held by the database after the drain; exiting without them",
			  "requests=%lld", (long long)atomic_load(&s->suspended));
		return -1;
	}
	return 0;
}

static void stop_maintenance(struct server *s)
{
	pthread_mutex_lock(&s->mlock);
	s->maint_stop = true;
	pthread_cond_signal(&s->mcond);
	pthread_mutex_unlock(&s->mlock);
	pthread_join(s->maint, NULL);
}

/* The started worker threads stopped and joined, every handler closed. */
static void join_workers(struct server *s, int started)
{
	stop_workers(s);
	for (int i = 0; i < started; i++)
		pthread_join(s->workers[i], NULL);
	for (int i = 0; i < s->cfg->workers; i++)
		handler_free(s->handlers[i]);
}

static void server_release(struct server *s, struct worker_arg *args)
{
	handler_free(s->maint_handler);
	free(args);
	free(s->workers);
	free(s->handlers);
	idcache_free(s->cache);
	auth_cache_free(s->auth);
}

int server_run(const struct ingest_config *cfg)
{
	struct server s;
	struct worker_arg *args = NULL;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	sigset_t sigs;
	int fam, started = 0, rc = -1;

	memset(&s, 0, sizeof(s));
	s.cfg = cfg;
	pthread_mutex_init(&s.qlock, NULL);
	pthread_cond_init(&s.qcond, NULL);
	pthread_mutex_init(&s.mlock, NULL);
	pthread_cond_init(&s.mcond, NULL);
	metrics_set_capacity(cfg->queue, cfg->workers);

	fam = httpd_parse_listen(cfg->listen, &addr, &addrlen);
	if (fam < 0) {
		log_error("bad --listen address", "listen=\"%s\" want=ADDR:PORT", cfg->listen);
		return -1;
	}
	block_signals(&sigs);
	if (server_alloc(&s, &args) < 0 || probe_database(cfg) < 0 || open_maintenance(&s) < 0)
		goto out_free;
	if (start_workers(&s, args, &started) < 0)
		goto out_workers;
	if (pthread_create(&s.maint, NULL, maint_main, &s) != 0) {
		log_error("cannot start maintenance thread", "%s", "");
		goto out_workers;
	}
	if (start_http(&s, fam, &addr) < 0)
		goto out_maint;
	announce(&s);
	wait_signal(&sigs);
	if (drain(&s) < 0)
		return -1; /* stopping libmicrohttpd now would abort the process */
	rc = 0;
	MHD_stop_daemon(s.mhd);
	conns_free(s.conns);
out_maint:
	stop_maintenance(&s);
out_workers:
	join_workers(&s, started);
out_free:
	server_release(&s, args);
	if (rc == 0)
		log_info("stopped", "%s", "");
	return rc;
}
