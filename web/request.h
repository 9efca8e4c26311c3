/*
 * request: what a handler of sm-web sees of a request, apart from the HTTP
 * daemon (server.c): its method, path, query, headers and body; who sent it
 * (bearer tokens, or the token in an HttpOnly cookie for browsers); the
 * cross-site request check for cookie-authenticated writes; form parameters;
 * and the response a handler builds. Headers, query and cookies come through a
 * req_source, so that the tests can make requests without a server. See
 * docs/web.md.
 */
#ifndef SM_WEB_REQUEST_H
#define SM_WEB_REQUEST_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/budget.h"
#include "common/buf.h"
#include "common/webhook.h"

struct web_config {
	const char *conninfo;       /* NULL: PG* environment */
	const char *conninfo_read;  /* GET and HEAD requests (reads that may lag: a standby); NULL: conninfo */
	const char *listen;         /* ADDR:PORT, port 0 = any free one */
	const char *port_file;      /* write the bound port here once listening (NULL: no) */
	int threads;                /* HTTP threads (each holds a database connection while it answers) */
	int max_connections;        /* beyond these, the oldest idle or slowest give way (common/conns.h) */
	int max_per_ip;             /* connections from one address (IPv6: /64); 0: no limit */
	int header_timeout_s;       /* accept (or request line) to the end of the headers */
	int idle_timeout_s;         /* a kept-alive connection's wait for its next request */
	int min_body_rate;          /* body bytes a second, over each 10 s; 0: no minimum */
	size_t max_body;            /* request bodies (signature imports are the largest) */
	size_t max_debuginfo;       /* a debug file uploaded (POST /api/v1/debuginfo) */
	bool anonymous_read;        /* reads without a token */
	bool worker;                /* work queued mining runs in this process */
	int miner_threads;          /* for the embedded worker, 0 = one per core */
	bool cookie_secure;         /* mark the session cookie Secure (behind TLS) and name it __Host- */
	int auth_ttl_ms;            /* token and session checks remembered this long */
	int session_idle_s;         /* a session unused this long ends */
	int session_max_s;          /* a session ends this long after the login, used or not */
	size_t frame_cache_bytes;   /* frame names kept in memory (frames never change) */
	size_t model_cache_bytes;   /* cost models of clusters and problems kept (web/costcache.h) */
	size_t flame_cache_bytes;   /* clusters' flame graphs kept (the same) */
	int model_warm;             /* per done run, its costliest clusters and problems fitted ahead (costwarm.h) */
	struct webhook_nets webhook_allow; /* internal networks alert webhooks may point at (webhook.h) */
	int request_timeout_s;      /* a request's deadline: its queries and long loops stop then (503) */
};

void web_config_default(struct web_config *c);


enum req_kind { REQ_HEADER, REQ_QUERY, REQ_COOKIE };

/* Where a request's headers, query parameters (decoded) and cookies come from. */
struct req_source {
	/* The value of name, or NULL. */
	const char *(*lookup)(void *conn, enum req_kind kind, const char *name);
	/* fn for each (key, value) of that kind, until it returns false. */
	void (*each)(void *conn, enum req_kind kind, bool (*fn)(void *cls, const char *key, const char *value),
		     void *cls);
};

/* What every request shares: the configuration, the token and session caches, the frame names, the secret
 * that keys the cross-site request tokens (drawn at each start). */
struct req_env {
	const struct web_config *cfg;
	struct auth_cache *auth;
	struct auth_cache *sessions;
	struct framecache *frames;
	struct costcache *costs;
	struct costcache *flames;    /* the clusters' flame graphs as drawn (--flame-cache) */
	unsigned char secret[32];
};

enum req_method { REQ_GET, REQ_HEAD, REQ_POST, REQ_PATCH, REQ_DELETE, REQ_OTHER };

#define REQ_MAX_HEADERS 4

struct req {
	void *conn;                 /* the source's connection */
	const struct req_source *src;
	const struct req_env *env;
	const struct web_config *cfg;
	enum req_method method;
	const char *path;           /* without the query string */
	const char *route;          /* the pattern of the route its path matched ("/api/v1/runs/#"), for the log */
	const char *arg;            /* that route's '#' (a canonical id) or '*' segment (in the arena), or NULL */
	struct buf body;            /* the request body (bounded by max_body) */
	struct arena *a;            /* freed with the request */
	PGconn *db;                 /* the connection of this request */
	struct framecache *frames;  /* the server's frame names */

	/* authentication */
	enum auth_role role;        /* AUTH_NONE when no valid token was given */
	bool via_cookie;            /* the role came from the session cookie */
	const char *session;        /* that session (in the arena), or NULL */
	char csrf[33];              /* the session's cross-site request token ("" without a session) */
	bool db_down;               /* a token was sent but the database could not be asked (503, not 401) */

	/* the response */
	int status;
	const char *ctype;
	struct buf out;
	size_t out_given;           /* the capacity of out handed to libmicrohttpd with the answer */
	const char *detail;         /* a 500's message: logged, never sent (it may be PostgreSQL's) */
	const char *hname[REQ_MAX_HEADERS], *hval[REQ_MAX_HEADERS];
	int nheaders;

	/* the deadline and the reason to stop early; long loops ask req_should_stop() */
	atomic_int stop;            /* enum req_stop, raised by the server's watchdog */
	struct budget budget;       /* deadline_ns and &stop; deadline 0 (none) outside the server */

	/* the server's (server.c): the request while a worker holds it */
	int fd;                     /* the client's socket, polled for its going away */
	int held;                   /* queued or running in a worker */
	PGcancel *cancel;           /* the running query's, under the server's lock */
	struct req *next;
};

enum req_stop { REQ_RUN, REQ_STOP_DEADLINE, REQ_STOP_GONE, REQ_STOP_SHUTDOWN };

/* Whether the request's work should end now: its deadline passed, its client went away, the server is
 * stopping. What it answers then is replaced by the server (503). */
bool req_should_stop(struct req *rq);

/* A query-string parameter (decoded), or NULL. */
const char *req_query(struct req *rq, const char *name);
/* Calls fn for each query-string parameter (decoded) until it returns false. */
void req_query_each(struct req *rq, bool (*fn)(void *cls, const char *key, const char *value), void *cls);
/* A request header, or NULL. */
const char *req_header(struct req *rq, const char *name);
/* A field of an application/x-www-form-urlencoded body (decoded, in the arena), or NULL. */
const char *req_form(struct req *rq, const char *name);
/*
 * The frame names of a PostgreSQL int array of frame ids ("{3,1,4}") into *names (in the
 * request's arena or the server's cache; valid for the request), their number into *n.
 * Returns 0, or -1 (not such an array, over 1024 ids, a database error).
 */
int req_frame_names(struct req *rq, const char *ids, const char ***names, size_t *n);
/* The frame names of every row of a result, read at once. */
struct req_names {
	const char ***row;   /* row i's names (NULL when its array was none, or over 1024 ids) */
	size_t *n;           /* and their number */
	bool final;          /* every name final (framecache.h): drawn again, they read the same */
};
/*
 * req_frame_names() for column col of every row of r at once (in the request's arena or the
 * server's cache): one query for the names the cache lacks, where asking row by row made a first
 * view of 1,500 stacks 1,500 queries, and frames not yet named (stripped binaries: never cached)
 * as many at every view. Returns 0, or -1 (no such column, out of memory, a database error).
 */
int req_frame_names_rows(struct req *rq, PGresult *r, int col, struct req_names *out);
/* req_frame_names_rows() of column name of r, for the cache alone: a list's rows then find their
 * names there, row by row (frames not yet named excepted: they are never cached). */
void req_frames_warm(struct req *rq, PGresult *r, const char *name);
/* The PostgreSQL int array literal ("{3,1,4}") of ids[0..n), in the request's arena ("{}" when out
 * of memory), for req_frame_names(). */
const char *req_ids_text(struct req *rq, const uint32_t *ids, uint32_t n);
/* The distinct integers of column col of r as a PostgreSQL array literal ("{1,5,9}", ascending),
 * in the request's arena ("{}" on out of memory). */
const char *req_id_array(struct req *rq, PGresult *r, int col);
/* Add a response header (name and value must outlive the request: literals or arena strings). */
void req_add_header(struct req *rq, const char *name, const char *value);
/* Copy s into the request's arena (NULL on out of memory). */
char *req_strdup(struct req *rq, const char *s);
/* printf into the request's arena. */
char *req_printf(struct req *rq, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Whether a write may proceed: an analyst or admin token, and when the token came
 * from the cookie, the cross-site request token (header X-CSRF-Token, or the form
 * field "csrf") and an Origin, when sent, of this server. Sets the error response
 * (JSON for the API, else text) and returns false when not.
 */
bool req_may_write(struct req *rq, bool json);
/* Whether a read may proceed (analyst or admin, or anonymous reads allowed). */
bool req_may_read(struct req *rq);
/*
 * Where to send a browser after logging in: next (decoded) when it is a path of this origin as
 * browsers parse it (WHATWG URL: tab, CR and LF are dropped anywhere and "\" is "/", so
 * "/\t/host" is "//host", another host): "/" then neither "/" nor "\", no control byte, space
 * or backslash anywhere. Bytes beyond ASCII are percent-encoded. "/" otherwise. In the arena.
 */
const char *req_local_next(struct req *rq, const char *next);

/* The cross-site request token of a session (32 hex digits): HMAC-SHA-256 under env's secret. */
void req_csrf_of(const struct req_env *env, const char *session, char out[33]);
/* Who sent the request: sets role, via_cookie, session and csrf from the Authorization header or the
 * session cookie (rq->db must be set: tokens and sessions are checked against the database, through
 * the caches), or db_down. */
void req_authenticate(struct req *rq);
/* The session cookie's name: "__Host-sm_session" with --cookie-secure, else "sm_session". */
const char *req_cookie_name(const struct web_config *cfg);
/* After token id was revoked: its sessions end, in this process at once. */
void req_token_revoked(struct req *rq, int64_t id);

/*
 * What the model's and the validators' functions return on failure, with a message in their err
 * naming the field and the reason: the handler's status comes from the code (req_status_of()),
 * never from the message's text.
 */
enum web_error {
	WEB_EINVAL = -1,     /* 400: a bad field or parameter */
	WEB_ENOTFOUND = -2,  /* 404: the object named does not exist */
	WEB_EEXIST = -3,     /* 409: one of that name exists already */
	WEB_ECONFLICT = -4,  /* 409: the object's state forbids it now */
	WEB_EFAIL = -5,      /* 500: the database or the server failed (503 when the database went away:
			      * server.c answers for the outage) */
};

/* The HTTP status of a web_error code (500 for any other negative code). */
int req_status_of(int code);

/* JSON error response {"error": msg}. */
void req_json_error(struct req *rq, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* ---- routing: a table of routes, for the API and the pages alike ---- */

enum { REQ_M_GET = 1, REQ_M_POST = 2, REQ_M_PATCH = 4, REQ_M_DELETE = 8 };

struct req_route {
	unsigned method;        /* one REQ_M_*; REQ_M_GET also answers HEAD */
	const char *path;       /* "/api/v1/runs/#/clusters": '#' a positive id, '*' any one segment,
				 * a final '**' the rest of the path */
	void (*fn)(struct req *rq);   /* rq->arg: the '#' or '*' segment, else NULL */
	const char *what;       /* the object a '#' names, for the 404 of a bad id ("run") */
};

struct req_match {
	const struct req_route *route;  /* NULL: none for this method */
	const char *arg;                /* the '#' or '*' segment (in the arena), or NULL */
	unsigned allowed;               /* the methods of the routes whose path matches (405, Allow) */
	const struct req_route *bad_id; /* a route whose '#' got a segment that is not an id ... */
	const char *bad_arg;            /* ... that segment (in the arena) */
};

/* Matches rq's method and path against routes[0..n): a route without '#' or '*' first, then the
 * others in order. */
void req_route(const struct req_route *routes, size_t n, struct req *rq, struct req_match *m);
/* "GET, HEAD, POST" for an allowed mask (a literal, for the Allow header). */
const char *req_allow_header(unsigned allowed);

/* Plain-text response (status, one line). */
void req_text_error(struct req *rq, int status, const char *msg);
/* A login form's token: checks it and, for an analyst or admin token, starts a session of its own and
 * sets its cookie; *role gets the token's role (AUTH_NONE: unknown). Returns 0, or -1 when the
 * database could not be asked. */
int req_login(struct req *rq, const char *token, enum auth_role *role);
/* The answer when the database is down: 503 with Retry-After, {"error": "database unavailable"} for
 * the API (json), else text (pages make their own page of it). */
void req_db_unavailable(struct req *rq, bool json);
#define REQ_DB_RETRY_AFTER "5"
/* Ends the request's session (at once, in this process too) and clears its cookie. Returns 0, or -1
 * when the database could not be asked. */
int req_logout(struct req *rq);

#endif
