/* request: what a handler of sm-web sees of a request (see request.h). */
#include "web/request.h"
#include "common/arena.h"
#include "common/db.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/util.h"
#include "web/framecache.h"
#include "web/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a session: "sms_" and 256 random bits in hex; only its SHA-256 is stored */
#define SESSION_PREFIX "sms_"
#define SESSION_LEN (4 + 64)

void web_config_default(struct web_config *c)
{
	memset(c, 0, sizeof(*c));
	c->listen = "127.0.0.1:8081";
	c->threads = 4;
	c->max_connections = 256;
	c->max_per_ip = 32;
	c->header_timeout_s = 10;
	c->idle_timeout_s = 30;
	c->min_body_rate = 1024;
	c->max_body = 8u << 20;
	c->max_debuginfo = (size_t)128 << 20;
	c->worker = true;
	c->auth_ttl_ms = 10000;
	c->session_idle_s = 12 * 3600;
	c->session_max_s = 7 * 86400;
	c->frame_cache_bytes = (size_t)256 << 20;
	c->model_cache_bytes = (size_t)32 << 20;
	c->flame_cache_bytes = (size_t)64 << 20;
	c->model_warm = 20;
	c->request_timeout_s = 30;
}

bool req_should_stop(struct req *rq)
{
	return budget_over(&rq->budget);
}

/* ---- request helpers ---- */

const char *req_query(struct req *rq, const char *name)
{
	return rq->src->lookup(rq->conn, REQ_QUERY, name);
}

void req_query_each(struct req *rq, bool (*fn)(void *cls, const char *key, const char *value), void *cls)
{
	rq->src->each(rq->conn, REQ_QUERY, fn, cls);
}

const char *req_header(struct req *rq, const char *name)
{
	return rq->src->lookup(rq->conn, REQ_HEADER, name);
}

const char *req_ids_text(struct req *rq, const uint32_t *ids, uint32_t n)
{
	struct buf b = BUF_INIT(0);
	const char *out;

	buf_putc(&b, '{');
	for (uint32_t i = 0; i < n; i++)
		buf_printf(&b, i ? ",%u" : "%u", ids[i]);
	buf_putc(&b, '}');
	out = buf_error(&b) == BUF_OK ? arena_strndup(rq->a, buf_cstr(&b), b.len) : NULL;
	buf_release(&b);
	return out ? out : "{}";
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

int req_frame_names_rows(struct req *rq, PGresult *r, int col, struct req_names *out)
{
	int rows = PQntuples(r);
	size_t bound = 0, total = 0;
	int32_t *ids;
	const char **names;
	char err[256];
	bool skipped = false;
	int rc = 0;

	out->row = NULL;
	out->n = NULL;
	out->final = false;
	if (col < 0 || col >= PQnfields(r))
		return -1;
	/* "{1,22,333}": one id more than its commas */
	for (int i = 0; i < rows; i++)
		for (const char *v = PQgetvalue(r, i, col); *v; v++)
			bound += *v == ',' || *v == '{';
	out->row = arena_calloc(rq->a, (size_t)rows + 1, sizeof(*out->row));
	out->n = arena_calloc(rq->a, (size_t)rows + 1, sizeof(*out->n));
	ids = arena_alloc(rq->a, (bound + 1) * sizeof(*ids));
	names = arena_calloc(rq->a, bound + 1, sizeof(*names));
	if (!out->row || !out->n || !ids || !names)
		return -1;
	for (int i = 0; i < rows; i++) {
		int32_t tmp[1024];
		int k = db_parse_int_array(PQgetvalue(r, i, col), tmp, 1024);

		/* (a row that is no such array may have written part of itself into tmp) */
		if (k < 0 || total + (size_t)k > bound) {
			skipped = true;
			continue;
		}
		memcpy(ids + total, tmp, (size_t)k * sizeof(*tmp));
		out->row[i] = names + total;
		out->n[i] = (size_t)k;
		total += (size_t)k;
	}
	if (total && (rc = framecache_names(rq->frames, rq->db, ids, total, names, rq->a, err, sizeof(err))) < 0) {
		log_warn("frame names", "error=\"%s\"", err);
		return -1;
	}
	/* (a row that was no array, or too long, has no names: not the whole drawing) */
	out->final = rc == 0 && !skipped;
	return 0;
}

void req_frames_warm(struct req *rq, PGresult *r, const char *name)
{
	struct req_names unused;
	int col = r ? PQfnumber(r, name) : -1;

	if (col >= 0)
		req_frame_names_rows(rq, r, col, &unused);
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

/* Percent- and plus-decodes s[0..n) into the arena; *len is the decoded length (a %00 inside
 * the text makes it longer than strlen()). */
static char *form_decode_n(struct req *rq, const char *s, size_t n, size_t *len)
{
	char *out = arena_alloc(rq->a, n + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '+') {
			*o++ = ' ';
		} else if (s[i] == '%' && i + 2 < n && util_hexval(s[i + 1]) >= 0 && util_hexval(s[i + 2]) >= 0) {
			*o++ = (char)(util_hexval(s[i + 1]) << 4 | util_hexval(s[i + 2]));
			i += 2;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	*len = (size_t)(o - out);
	return out;
}

static char *form_decode(struct req *rq, const char *s, size_t n)
{
	size_t len;

	return form_decode_n(rq, s, n, &len);
}

/* A form body's next name=value pair from *p (advanced past it): false at the end. A pair
 * without '=' has eq NULL. */
static bool form_next(const char **p, const char *end, const char **name, const char **eq, const char **stop)
{
	const char *amp;

	if (*p >= end)
		return false;
	amp = memchr(*p, '&', (size_t)(end - *p));
	*name = *p;
	*stop = amp ? amp : end;
	*eq = memchr(*p, '=', (size_t)(*stop - *p));
	*p = amp ? amp + 1 : end;
	return true;
}

const char *req_form(struct req *rq, const char *name)
{
	const char *p = rq->body.data ? rq->body.data : "", *end = p + rq->body.len, *k, *eq, *stop;
	size_t nl = strlen(name);

	while (form_next(&p, end, &k, &eq, &stop))
		if (eq && (size_t)(eq - k) == nl && memcmp(k, name, nl) == 0) {
			char *v = form_decode(rq, eq + 1, (size_t)(stop - eq - 1));
			/* decoded text must be UTF-8 like everything else */
			return v && util_utf8_valid(v, strlen(v)) ? v : NULL;
		}
	return NULL;
}

void req_json_error(struct req *rq, int status, const char *fmt, ...)
{
	char msg[512];
	struct jsonw w;
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
	if (status == 500)
		rq->detail = req_strdup(rq, msg);
	buf_reset(&rq->out);
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_kstr(&w, "error", msg);
	jsonw_end(&w);
	buf_putc(&rq->out, '\n');
	rq->status = status;
	rq->ctype = "application/json";
}

void req_text_error(struct req *rq, int status, const char *msg)
{
	if (status == 500)
		rq->detail = req_strdup(rq, msg);
	buf_reset(&rq->out);
	buf_puts(&rq->out, msg);
	buf_putc(&rq->out, '\n');
	rq->status = status;
	rq->ctype = "text/plain; charset=utf-8";
}

/* ---- authentication ---- */

void req_csrf_of(const struct req_env *env, const char *session, char out[33])
{
	unsigned char h[SHA256_LEN];

	hmac_sha256(env->secret, sizeof(env->secret), session, strnlen(session, 256), h);
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

const char *req_cookie_name(const struct web_config *cfg)
{
	/* __Host-: the browser keeps it only when Secure, Path=/ and without Domain (no subdomain sets it) */
	return cfg->cookie_secure ? "__Host-sm_session" : "sm_session";
}

static bool session_wellformed(const char *s)
{
	if (strlen(s) != SESSION_LEN || strncmp(s, SESSION_PREFIX, 4) != 0)
		return false;
	for (const char *p = s + 4; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* The SHA-256 of s as 64 hex digits. */
static void hash_hex(const char *s, char out[2 * SHA256_LEN + 1])
{
	unsigned char h[SHA256_LEN];

	sha256(s, strlen(s), h);
	util_hex(h, sizeof(h), out);
}

static void limits_text(const struct web_config *cfg, char idle[16], char max[16])
{
	snprintf(idle, 16, "%d", cfg->session_idle_s);
	snprintf(max, 16, "%d", cfg->session_max_s);
}

/* The role of session s (AUTH_NONE: unknown, over a limit, or its token revoked), from the cache or
 * the database (which marks it as seen). 0, or -1 when the database could not be asked. */
static int session_check(struct req *rq, const char *s, enum auth_role *role)
{
	char sh[2 * SHA256_LEN + 1], idle[16], max[16], err[256];
	struct auth_who who;
	PGresult *r;

	*role = AUTH_NONE;
	if (auth_cached_who(rq->env->sessions, s, &who)) {
		*role = who.role;
		return 0;
	}
	hash_hex(s, sh);
	limits_text(rq->cfg, idle, max);
	if (!(r = model_session_touch(rq->db, sh, idle, max, err, sizeof(err))))
		return -1;
	memset(&who, 0, sizeof(who));
	/* the index found it by hash; compare the stored hash in constant time anyway */
	if (PQntuples(r) == 1 && PQgetlength(r, 0, 1) == 2 * SHA256_LEN &&
	    util_ct_equal(PQgetvalue(r, 0, 1), sh, 2 * SHA256_LEN))
		who.role = auth_role_parse(PQgetvalue(r, 0, 0));
	PQclear(r);
	auth_cache_put(rq->env->sessions, s, &who);
	*role = who.role;
	return 0;
}

void req_authenticate(struct req *rq)
{
	const char *hdr = req_header(rq, "Authorization");
	const char *cookie = rq->src->lookup(rq->conn, REQ_COOKIE, req_cookie_name(rq->cfg));
	enum auth_role role = AUTH_NONE;

	rq->role = AUTH_NONE;
	rq->csrf[0] = '\0';
	rq->session = NULL;
	rq->db_down = false;
	if (hdr) {
		if (auth_check(rq->env->auth, rq->db, hdr, &role) == 0)
			rq->role = role;
		else
			rq->db_down = true;
		return;
	}
	/* an old cookie holding a token is not a session: it is ignored */
	if (!cookie || !session_wellformed(cookie))
		return;
	if (session_check(rq, cookie, &role) < 0) {
		rq->db_down = true;
	} else if (role != AUTH_NONE) {
		rq->role = role;
		rq->via_cookie = true;
		rq->session = req_strdup(rq, cookie);
		req_csrf_of(rq->env, cookie, rq->csrf);
	}
}

void req_token_revoked(struct req *rq, int64_t id)
{
	char idbuf[24], err[256];
	PGresult *r;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
	if (!(r = model_sessions_of_token_delete(rq->db, idbuf, err, sizeof(err))))
		log_warn("deleting a revoked token's sessions", "token=%s error=\"%s\"", idbuf, err);
	PQclear(r);
	/* the sessions' check sees the revocation anyway; this ends them in this process at once */
	auth_cache_clear(rq->env->sessions);
}

bool req_may_read(struct req *rq)
{
	return rq->role >= AUTH_ANALYST || rq->cfg->anonymous_read;
}

const char *req_local_next(struct req *rq, const char *next)
{
	struct buf b = BUF_INIT(8192);
	const char *out;

	if (!next || next[0] != '/' || next[1] == '/' || next[1] == '\\')
		return "/";
	for (const unsigned char *p = (const unsigned char *)next; *p; p++)
		if (*p <= ' ' || *p == 0x7f || *p == '\\')
			return "/";
	for (const unsigned char *p = (const unsigned char *)next; *p; p++)
		if (*p >= 0x80)
			buf_printf(&b, "%%%02X", *p);
		else
			buf_putc(&b, (char)*p);
	out = buf_error(&b) ? NULL : req_strdup(rq, buf_cstr(&b));
	buf_release(&b);
	return out ? out : "/";
}

/* The Origin header, when a browser sends one, names this server. */
static bool same_origin(struct req *rq)
{
	const char *origin = req_header(rq, "Origin"), *host = req_header(rq, "Host");
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

/*
 * A form's first field whose decoded value storing it would change: a NUL byte (C strings and
 * PostgreSQL's text end there), a control character other than tab, CR and newline, or bytes
 * that are not UTF-8. Returns the reason, naming the field, or NULL when every field is clean.
 */
static const char *form_invalid(struct req *rq)
{
	const char *p = rq->body.data ? rq->body.data : "", *end = p + rq->body.len, *k, *eq, *stop;

	while (form_next(&p, end, &k, &eq, &stop)) {
		const char *why = NULL, *v;
		size_t n;

		if (eq && (v = form_decode_n(rq, eq + 1, (size_t)(stop - eq - 1), &n))) {
			for (size_t i = 0; i < n && !why; i++) {
				unsigned char c = (unsigned char)v[i];
				if (c == 0)
					why = "holds a NUL byte";
				else if ((c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f)
					why = "holds a control character";
			}
			if (!why && !util_utf8_valid(v, n))
				why = "is not UTF-8";
		}
		if (why) {
			const char *name = form_decode_n(rq, k, (size_t)(eq - k), &n);
			bool printable = name && util_utf8_valid(name, n) && strlen(name) == n;

			for (size_t i = 0; printable && i < n; i++)
				printable = (unsigned char)name[i] >= 0x20 && name[i] != 0x7f;
			return req_printf(rq, "form field '%s' %s", printable ? name : "?", why);
		}
	}
	return NULL;
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
	if (!why && !json && (why = form_invalid(rq)))
		status = 400;
	if (!why)
		return true;
	if (json)
		req_json_error(rq, status, "%s", why);
	else
		req_text_error(rq, status, why);
	return false;
}

static void set_cookie(struct req *rq, const char *value, int max_age)
{
	req_add_header(rq, "Set-Cookie",
		       req_printf(rq, "%s=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d%s", req_cookie_name(rq->cfg),
				  value, max_age, rq->cfg->cookie_secure ? "; Secure" : ""));
}

int req_login(struct req *rq, const char *token, enum auth_role *rolep)
{
	enum auth_role role = AUTH_NONE;
	unsigned char rnd[32];
	char session[SESSION_LEN + 1], sh[2 * SHA256_LEN + 1], th[2 * SHA256_LEN + 1], idle[16], max[16], err[256];
	PGresult *r;
	bool made;

	*rolep = AUTH_NONE;
	if (!token || strlen(token) != AUTH_TOKEN_LEN)
		return 0;
	if (auth_check(rq->env->auth, rq->db, token, &role) < 0)
		return -1;
	if (role < AUTH_ANALYST) {
		*rolep = role;
		return 0;
	}
	if (util_random(rnd, sizeof(rnd)) < 0) {
		log_error("no randomness for a session", "%s", "");
		return -1;
	}
	memcpy(session, SESSION_PREFIX, 4);
	util_hex(rnd, sizeof(rnd), session + 4);
	hash_hex(session, sh);
	hash_hex(token, th);
	limits_text(rq->cfg, idle, max);
	if (!(r = model_session_create(rq->db, sh, th, idle, max, err, sizeof(err)))) {
		log_warn("creating a session", "error=\"%s\"", err);
		return -1;
	}
	made = PQntuples(r) == 1;
	PQclear(r);
	if (!made)   /* revoked since the cached check */
		return 0;
	*rolep = role;
	set_cookie(rq, session, rq->cfg->session_max_s);
	rq->via_cookie = true;
	rq->role = role;
	rq->session = req_strdup(rq, session);
	req_csrf_of(rq->env, session, rq->csrf);
	return 0;
}

int req_logout(struct req *rq)
{
	char sh[2 * SHA256_LEN + 1], err[256];
	PGresult *r = NULL;

	set_cookie(rq, "", 0);
	if (!rq->session)
		return 0;
	hash_hex(rq->session, sh);
	r = model_session_delete(rq->db, sh, err, sizeof(err));
	/* after the delete: a check racing with it cannot cache the session again */
	auth_cache_forget(rq->env->sessions, rq->session);
	if (!r) {
		log_warn("ending a session", "error=\"%s\"", err);
		return -1;
	}
	PQclear(r);
	return 0;
}

int req_status_of(int code)
{
	switch (code) {
	case WEB_EINVAL: return 400;
	case WEB_ENOTFOUND: return 404;
	case WEB_EEXIST: return 409;
	case WEB_ECONFLICT: return 409;
	default: return 500;
	}
}

void req_db_unavailable(struct req *rq, bool json)
{
	if (json)
		req_json_error(rq, 503, "database unavailable");
	else
		req_text_error(rq, 503, "The database is unavailable; try again in a moment.");
	req_add_header(rq, "Retry-After", REQ_DB_RETRY_AFTER);
}


/* ---- routing ---- */

static unsigned method_bit(enum req_method m)
{
	switch (m) {
	case REQ_GET: case REQ_HEAD: return REQ_M_GET;
	case REQ_POST: return REQ_M_POST;
	case REQ_PATCH: return REQ_M_PATCH;
	case REQ_DELETE: return REQ_M_DELETE;
	case REQ_OTHER: break;
	}
	return 0;
}

/* Whether path matches pattern segment for segment; *wild gets the '#' or '*' segment, or for a
 * final "**" the rest of the path (slashes too: a host name may hold one, decoded from %2F). */
static bool path_matches(const char *pattern, const char *path, const char **wild, size_t *wlen, bool *id_ok)
{
	*wild = NULL;
	*id_ok = true;
	for (;;) {
		size_t pl = strcspn(pattern, "/"), sl = strcspn(path, "/");

		if (strcmp(pattern, "**") == 0) {
			*wild = path;
			*wlen = strlen(path);
			return *wlen > 0;
		}
		if ((pl == 1 && (pattern[0] == '#' || pattern[0] == '*')) && sl > 0) {
			*wild = path;
			*wlen = sl;
			if (pattern[0] == '#') {
				char tmp[24];
				int64_t v;

				*id_ok = sl < sizeof(tmp);
				if (*id_ok) {
					memcpy(tmp, path, sl);
					tmp[sl] = '\0';
					*id_ok = util_parse_i64(tmp, 1, INT64_MAX, &v) == 0;
				}
			}
		} else if (pl != sl || memcmp(pattern, path, pl) != 0) {
			return false;
		}
		pattern += pl;
		path += sl;
		if (!*pattern || !*path)
			return !*pattern && !*path;
		pattern++;
		path++;
	}
}

void req_route(const struct req_route *routes, size_t n, struct req *rq, struct req_match *m)
{
	unsigned want = method_bit(rq->method);

	memset(m, 0, sizeof(*m));
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			const struct req_route *r = &routes[i];
			bool wildcard = strpbrk(r->path, "#*") != NULL, id_ok;
			const char *wild;
			size_t wlen = 0;

			if (wildcard != (pass == 1) || !path_matches(r->path, rq->path, &wild, &wlen, &id_ok))
				continue;
			if (!id_ok) {
				if (!m->bad_id) {
					m->bad_id = r;
					m->bad_arg = arena_strndup(rq->a, wild, wlen);
				}
				continue;
			}
			m->allowed |= r->method;
			if (!rq->route)
				rq->route = r->path;
			if (!m->route && r->method == want) {
				m->route = r;
				m->arg = wild ? arena_strndup(rq->a, wild, wlen) : NULL;
			}
		}
	/* a bad id only matters where no route took the path */
	if (m->allowed) {
		m->bad_id = NULL;
		m->bad_arg = NULL;
	}
}

const char *req_allow_header(unsigned allowed)
{
	static const char *const names[16] = {
		"", "GET, HEAD", "POST", "GET, HEAD, POST", "PATCH", "GET, HEAD, PATCH", "POST, PATCH",
		"GET, HEAD, POST, PATCH", "DELETE", "GET, HEAD, DELETE", "POST, DELETE", "GET, HEAD, POST, DELETE",
		"PATCH, DELETE", "GET, HEAD, PATCH, DELETE", "POST, PATCH, DELETE", "GET, HEAD, POST, PATCH, DELETE",
	};

	return names[allowed & 15];
}
