/*
 * server: sm-web's HTTP side (libmicrohttpd, a pool of threads, one database
 * connection each from a bounded pool), shared by the JSON API (api.c) and
 * the HTML pages (pages.c): the request a handler sees, authentication
 * (bearer tokens, or the token in an HttpOnly cookie for browsers), the
 * cross-site request check for cookie-authenticated writes, query and form
 * parameters, and the response a handler builds. See docs/web.md.
 */
#ifndef SM_WEB_SERVER_H
#define SM_WEB_SERVER_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "buf.h"

struct web_config {
	const char *conninfo;       /* NULL: PG* environment */
	const char *listen;         /* ADDR:PORT, port 0 = any free one */
	const char *port_file;      /* write the bound port here once listening (NULL: no) */
	int threads;                /* HTTP threads (each holds a database connection while it answers) */
	int max_connections;
	size_t max_body;            /* request bodies (signature imports are the largest) */
	bool anonymous_read;        /* reads without a token */
	bool worker;                /* work queued mining runs in this process */
	int miner_threads;          /* for the embedded worker, 0 = one per core */
	bool cookie_secure;         /* mark the session cookie Secure (behind TLS) */
	int auth_ttl_ms;
	size_t frame_cache_bytes;   /* frame names kept in memory (frames never change) */
};

void web_config_default(struct web_config *c);

/* Runs until SIGTERM or SIGINT. Returns 0 after a clean stop, -1 when it cannot start. */
int web_run(const struct web_config *cfg);

/* ---- what handlers see ---- */

enum req_method { REQ_GET, REQ_HEAD, REQ_POST, REQ_PATCH, REQ_DELETE, REQ_OTHER };

#define REQ_MAX_HEADERS 4

struct req {
	struct MHD_Connection *conn;
	const struct web_config *cfg;
	enum req_method method;
	const char *path;           /* without the query string */
	struct buf body;            /* the request body (bounded by max_body) */
	struct arena *a;            /* freed with the request */
	PGconn *db;                 /* the connection of this request */
	struct framecache *frames;  /* the server's frame names */

	/* authentication */
	enum auth_role role;        /* AUTH_NONE when no valid token was given */
	bool via_cookie;            /* the token came from the session cookie */
	char csrf[33];              /* the token's cross-site request token ("" without a cookie) */

	/* the response */
	int status;
	const char *ctype;
	struct buf out;
	const char *hname[REQ_MAX_HEADERS], *hval[REQ_MAX_HEADERS];
	int nheaders;
};

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

/* JSON error response {"error": msg}. */
void req_json_error(struct req *rq, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Take the session token from a login form: checks it and sets the cookie. Returns the role. */
enum auth_role req_login(struct req *rq, const char *token);
/* Clear the session cookie. */
void req_logout(struct req *rq);

/* Handlers: return after setting status, ctype and out (or an error). */
void api_handle(struct req *rq);
void pages_handle(struct req *rq);

#endif
