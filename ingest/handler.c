/* handler: token check, decoding, validation and storing of one request (see handler.h). */
#include "ingest/handler.h"
#include "formats/formats.h"
#include "formats/import.h"
#include "common/arena.h"
#include "common/auth.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/util.h"
#include "common/vec.h"
#include "ingest/idcache.h"
#include "ingest/metrics.h"
#include "ingest/profiles.h"
#include "ingest/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* A line of an NDJSON body: a stream's text. */
struct line {
	const char *p;
	size_t len;
	size_t lineno;
};

struct handler {
	struct handler_limits lim;
	struct store *store;
	struct auth_cache *auth;
	struct wire_parser *parser;
	struct arena *arena;         /* parsed streams of one request */
	ZSTD_DCtx *zd;
	struct buf decoded;
	struct buf rejected;         /* the "rejected" list being built */
	struct jsonw rw;             /* its writer */
	struct vec lines;            /* the body's lines (struct line), reused */
	char token_host[AUTH_HOST_MAX + 1];  /* the request's token is bound to this host ("" : any) */
	char err[1024];
};

/* What a worker keeps between requests, of the decoded body and of the arena its streams are
 * parsed into: a typical batch (a few MB decoded) reuses its memory instead of giving it back
 * and faulting it in again (12 % of sm-ingest's CPU for batches of 100 small streams, and 10 %
 * more for the arena's blocks); a larger body's is given back. */
#define HANDLER_KEEP_BYTES ((size_t)16 << 20)

struct handler *handler_open(const char *conninfo, const struct handler_limits *lim,
			     struct idcache *cache, struct auth_cache *auth, char *err, size_t errlen)
{
	struct handler *h = calloc(1, sizeof(*h));

	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->lim = *lim;
	h->auth = auth;
	h->lines = (struct vec)VEC_INIT(struct line);
	h->decoded.max = lim->max_decoded;
	h->parser = wire_parser_open(&lim->wire);
	/* parsed streams take at most a few times their text */
	h->arena = arena_open(lim->max_decoded * 4 + (64u << 20));
	if (h->arena)
		arena_retain(h->arena, HANDLER_KEEP_BYTES);
	h->zd = ZSTD_createDCtx();
	/* a frame header may ask for a 2 GiB window; 16 MiB is plenty for agents */
	if (h->zd)
		ZSTD_DCtx_setParameter(h->zd, ZSTD_d_windowLogMax, 24);
	if (!h->parser || !h->arena || !h->zd) {
		snprintf(err, errlen, "out of memory");
		goto fail_free;
	}
	h->store = store_open(conninfo, cache, err, errlen);
	if (!h->store)
		goto fail_free;
	return h;
fail_free:
	handler_free(h);
	return NULL;
}

void handler_free(struct handler *h)
{
	if (!h)
		return;
	store_free(h->store);
	wire_parser_free(h->parser);
	arena_free(h->arena);
	ZSTD_freeDCtx(h->zd);
	buf_release(&h->decoded);
	buf_release(&h->rejected);
	vec_free(&h->lines);
	free(h);
}

const char *handler_last_error(const struct handler *h)
{
	return h->err;
}

int handler_db_seen(struct handler *h)
{
	int seen = store_db_seen(h->store);

	if (seen < 0)
		snprintf(h->err, sizeof(h->err), "%s",
			 *store_error(h->store) ? store_error(h->store) : "database connection lost");
	return seen;
}

/* An error answer, with the stream's id when stream_id is neither NULL nor "". */
static void handler_error_id(struct handler_response *rs, int status, const char *msg, const char *stream_id)
{
	struct jsonw w;

	rs->status = status;
	buf_reset(&rs->body);
	jsonw_init_compact(&w, &rs->body);
	jsonw_object(&w);
	jsonw_kstr(&w, "error", msg);
	if (stream_id && *stream_id)
		jsonw_kstr(&w, "stream_id", stream_id);
	jsonw_end(&w);
	if (jsonw_finish(&w) < 0) {
		/* the message is short and ours: only memory can fail it */
		buf_reset(&rs->body);
		rs->status = 503;
	}
}

void handler_error(struct handler_response *rs, int status, const char *msg)
{
	handler_error_id(rs, status, msg, NULL);
}

void handler_trim(struct handler *h, size_t body_len)
{
	/* the request's size, not the buffer's (which doubling may have made 16 MiB for 9); but a
	 * buffer larger than any request kept needs is given back whatever this one's size */
	size_t held = h->decoded.len > body_len ? h->decoded.len : body_len;

	if (held <= HANDLER_KEEP_BYTES && h->decoded.cap <= 2 * HANDLER_KEEP_BYTES)
		return;
	buf_release(&h->decoded);
	arena_release(h->arena);
	util_trim_after(held);
}

/* The bytes in[0..n) decompress to as their frames' headers declare them, or 0 when a frame
 * declares none (or is not one): what an agent sends (one frame, its size known) is
 * decompressed in one call straight into a buffer of that size, without the stream's window
 * and its copy or the buffer's growth. (The window a frame asks for needs no memory then: the
 * output, at most max, is the window; the 16 MiB bound is the stream's.) */
static size_t zstd_declared(const char *in, size_t n, size_t max)
{
	size_t total = 0;

	while (n) {
		unsigned long long sz = ZSTD_getFrameContentSize(in, n);
		size_t csz = ZSTD_findFrameCompressedSize(in, n);

		if (sz == ZSTD_CONTENTSIZE_UNKNOWN || sz == ZSTD_CONTENTSIZE_ERROR || ZSTD_isError(csz) ||
		    csz > n || sz > max - total)
			return 0;
		total += (size_t)sz;
		in += csz;
		n -= csz;
	}
	return total;
}

/* Decompresses every zstd frame of in[0..n) into h->decoded, refusing as soon as the output would
 * pass max bytes (a bomb is never inflated). 0, or the HTTP status to answer with a message in
 * h->err. */
static int decode_zstd(struct handler *h, const char *in, size_t n, size_t max)
{
	ZSTD_inBuffer zin = { in, n, 0 };
	size_t ret = 1, want = zstd_declared(in, n, max);

	buf_reset(&h->decoded);
	if (want && buf_reserve(&h->decoded, want) == 0) {
		ret = ZSTD_decompressDCtx(h->zd, h->decoded.data, want, in, n);
		if (!ZSTD_isError(ret) && ret == want) {
			h->decoded.len = ret;
			h->decoded.data[ret] = '\0';
			return 0;
		}
		/* a header that lies: the stream below finds what is wrong and says so. What the call
		 * wrote (up to the size declared) is given back now, not kept for the next request. */
		ret = 1;
	}
	if (want)
		buf_release(&h->decoded);   /* also clears a failed reservation's error */
	ZSTD_DCtx_reset(h->zd, ZSTD_reset_session_only);
	while (zin.pos < zin.size || ret != 0) {
		size_t room = max - h->decoded.len;
		ZSTD_outBuffer zout;

		if (room == 0) {
			snprintf(h->err, sizeof(h->err),
				 "body: decompresses to more than the limit of %zu bytes", max);
			return 413;
		}
		if (buf_reserve(&h->decoded, room < 65536 ? room : 65536) < 0) {
			snprintf(h->err, sizeof(h->err), "body: out of memory while decompressing");
			return 503;
		}
		zout.dst = h->decoded.data + h->decoded.len;
		zout.size = h->decoded.cap - h->decoded.len - 1;
		if (zout.size > room)
			zout.size = room;
		zout.pos = 0;
		ret = ZSTD_decompressStream(h->zd, &zout, &zin);
		if (ZSTD_isError(ret)) {
			snprintf(h->err, sizeof(h->err), "body: bad zstd data: %s", ZSTD_getErrorName(ret));
			return 400;
		}
		h->decoded.len += zout.pos;
		h->decoded.data[h->decoded.len] = '\0';
		/* no input left, a frame unfinished, and room to spare: it was cut short */
		if (zin.pos == zin.size && ret != 0 && zout.pos < zout.size) {
			snprintf(h->err, sizeof(h->err), "body: truncated zstd frame");
			return 400;
		}
	}
	buf_cstr(&h->decoded);
	return 0;
}

static bool blank(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return false;
	return true;
}

static void add_rejection(struct handler *h, struct handler_response *rs, size_t lineno,
			  const char *stream_id, const char *error)
{
	rs->rejected++;
	jsonw_object(&h->rw);
	jsonw_ku64(&h->rw, "line", lineno);
	if (stream_id && *stream_id)
		jsonw_kstr(&h->rw, "stream_id", stream_id);
	else
		jsonw_knull(&h->rw, "stream_id");
	jsonw_kstr(&h->rw, "error", error);
	jsonw_end(&h->rw);
}

static int check_auth(struct handler *h, const struct handler_request *rq,
		      struct handler_response *rs)
{
	struct auth_who who;
	enum auth_role role;
	PGconn *db;

	h->token_host[0] = '\0';
	if (!rq->authorization || !*rq->authorization) {
		metrics_reject(REASON_UNAUTHORIZED, 1);
		handler_error(rs, 401, "authorization: missing bearer token");
		return -1;
	}
	if (!auth_cached_who(h->auth, rq->authorization, &who)) {
		db = store_conn(h->store);
		if (!db || auth_check_who(h->auth, db, rq->authorization, &who) < 0) {
			metrics_reject(REASON_DB_ERROR, 1);
			log_error("token check failed", "error=\"%s\"", store_error(h->store));
			handler_error(rs, 503, "database unavailable; retry later");
			rs->retry_after = 5;
			return -1;
		}
	}
	role = who.role;
	memcpy(h->token_host, who.host, sizeof(h->token_host));
	if (role != AUTH_INGEST && role != AUTH_ADMIN) {
		metrics_reject(REASON_UNAUTHORIZED, 1);
		handler_error(rs, 401, role == AUTH_NONE
			      ? "authorization: unknown or revoked token"
			      : "authorization: this token's role may not send streams (needs ingest)");
		return -1;
	}
	return 0;
}

int handler_authorize(struct handler *h, const char *authorization, struct handler_response *rs)
{
	struct handler_request hr = { .authorization = authorization };

	return check_auth(h, &hr, rs);
}

/* A request's streams: its lines (one for application/json), each parsed, the valid ones with
 * their line numbers, and what storing made of each (all in the handler's arena). */
struct batch {
	struct line *lines;
	size_t nlines;
	struct wire_stream *parsed;
	const struct wire_stream **valid;
	size_t *valid_line;
	size_t nvalid;
	enum store_result *results;
};

static void response_reset(struct handler *h, struct handler_response *rs)
{
	rs->status = 0;
	rs->retry_after = 0;
	rs->accepted = rs->duplicates = rs->rejected = rs->events = 0;
	rs->decoded_bytes = 0;
	buf_reset(&rs->body);
	h->err[0] = '\0';
	arena_reset(h->arena);
}

/* The body decoded (zstd) into *body, *len and checked for size and content. 0, or -1 when
 * answered. */
static int decode_body(struct handler *h, const struct handler_request *rq, struct handler_response *rs,
		       const char **body, size_t *len)
{
	int st;

	*body = rq->body;
	*len = rq->len;
	if (rq->zstd) {
		st = decode_zstd(h, *body, *len, h->lim.max_decoded);
		if (st) {
			metrics_reject(st == 413 ? REASON_TOO_LARGE : REASON_BAD_ENCODING, 1);
			handler_error(rs, st, h->err);
			return -1;
		}
		*body = h->decoded.data;
		*len = h->decoded.len;
	}
	rs->decoded_bytes = *len;
	if (*len > h->lim.max_decoded) {
		metrics_reject(REASON_TOO_LARGE, 1);
		handler_error(rs, 413, "body: larger than the limit");
		return -1;
	}
	if (blank(*body, *len)) {
		metrics_reject(REASON_NOT_JSON, 1);
		handler_error(rs, 400, "body: empty");
		return -1;
	}
	return 0;
}

/* The body split into lines (one "line" for application/json), blank lines skipped, and the
 * batch's arrays allocated. 0, 1 when answered (too many streams), -1 when out of memory. */
static int split_lines(struct handler *h, const struct handler_request *rq, struct handler_response *rs,
		       const char *body, size_t len, struct batch *b)
{
	if (rq->ndjson) {
		const char *nl;

		/* one pass: the non-blank lines, at most max_batch of them, into the worker's vector */
		h->lines.len = 0;
		for (size_t start = 0, lineno = 1; start <= len; lineno++) {
			size_t i;

			nl = memchr(body + start, '\n', len - start);
			i = nl ? (size_t)(nl - body) : len;
			if (!blank(body + start, i - start)) {
				struct line l = { body + start, i - start, lineno };

				if (h->lines.len == h->lim.max_batch) {
					char msg[128];
					snprintf(msg, sizeof(msg),
						 "body: more than %zu streams in one batch", h->lim.max_batch);
					metrics_reject(REASON_TOO_LARGE, 1);
					handler_error(rs, 413, msg);
					return 1;
				}
				if (vec_append(&h->lines, &l) < 0)
					return -1;
			}
			start = i + 1;
		}
		b->lines = h->lines.data;
		b->nlines = h->lines.len;
	} else {
		b->lines = arena_alloc(h->arena, sizeof(*b->lines));
		if (!b->lines)
			return -1;
		b->lines[0].p = body;
		b->lines[0].len = len;
		b->lines[0].lineno = 1;
		b->nlines = 1;
	}
	b->parsed = arena_calloc(h->arena, b->nlines, sizeof(*b->parsed));
	b->valid = arena_calloc(h->arena, b->nlines, sizeof(*b->valid));
	b->valid_line = arena_calloc(h->arena, b->nlines, sizeof(*b->valid_line));
	b->results = arena_calloc(h->arena, b->nlines, sizeof(*b->results));
	if (!b->parsed || !b->valid || !b->valid_line || !b->results)
		return -1;
	return 0;
}

/* Each line parsed: the valid streams kept, the others rejected - the request with them for a
 * single stream, else each into the rejections (h->rw, left open). 0, 1 when answered, -1 when
 * out of memory. */
static int parse_lines(struct handler *h, const struct handler_request *rq, struct handler_response *rs,
		       struct batch *b)
{
	/* a body this handler decoded is its own: read in place, its frames' names not copied */
	char *own = rq->zstd ? h->decoded.data : NULL;

	buf_reset(&h->rejected);
	jsonw_init_compact(&h->rw, &h->rejected);
	jsonw_array(&h->rw);
	for (size_t i = 0; i < b->nlines; i++) {
		struct wire_stream *ps = &b->parsed[i];
		int rc = own ? wire_parse_in_place(h->parser, own + (b->lines[i].p - own), b->lines[i].len, h->arena, ps)
			     : wire_parse(h->parser, b->lines[i].p, b->lines[i].len, h->arena, ps);

		if (rc == WIRE_ENOMEM)
			return -1;
		if (rc == WIRE_OK && h->token_host[0] && strcmp(ps->host, h->token_host) != 0) {
			/* a host-bound token speaks for its host only */
			char msg[AUTH_HOST_MAX + 64];

			snprintf(msg, sizeof(msg), "host: this token sends streams of host '%s' only", h->token_host);
			metrics_reject(REASON_INVALID, 1);
			if (!rq->ndjson) {
				handler_error_id(rs, 403, msg, ps->stream_id);
				rs->rejected = 1;
				return 1;
			}
			add_rejection(h, rs, b->lines[i].lineno, ps->stream_id, msg);
			continue;
		}
		if (rc == WIRE_OK) {
			b->valid[b->nvalid] = ps;
			b->valid_line[b->nvalid] = b->lines[i].lineno;
			b->nvalid++;
			continue;
		}
		metrics_reject(rc == WIRE_ENOTJSON ? REASON_NOT_JSON : REASON_INVALID, 1);
		if (!rq->ndjson) {
			/* a single stream that cannot be accepted is a bad request */
			handler_error_id(rs, 400, wire_parser_error(h->parser), ps->stream_id);
			rs->rejected = 1;
			return 1;
		}
		add_rejection(h, rs, b->lines[i].lineno, ps->stream_id, wire_parser_error(h->parser));
	}
	return 0;
}

/* A batch store_streams() did not store (rc, its enum store_failure): 503, to be sent again, with
 * the cause. The database's own message goes to the log only. */
static void not_stored(struct handler *h, struct handler_response *rs, int rc, const char *what, size_t n)
{
	char msg[512];

	metrics_reject(rc == STORE_EINTERNAL ? REASON_SERVER_ERROR : REASON_DB_ERROR, 1);
	log_error(what, "streams=%zu error=\"%s\"", n, store_error(h->store));
	if (rc == STORE_EINTERNAL)
		snprintf(msg, sizeof(msg), "this server failed (%s); nothing of this request was stored, retry later",
			 store_error(h->store));
	else if (rc == STORE_EBUSY)
		snprintf(msg, sizeof(msg), "busy: frames and stacks changed while the batch was stored (%s); nothing "
			 "of this request was stored, retry later", store_error(h->store));
	else
		snprintf(msg, sizeof(msg), "database unavailable; nothing of this request was stored, retry later");
	handler_error(rs, 503, msg);
	rs->retry_after = 2;
}

/* The valid streams stored in one go and counted. 0, or 1 when answered (nothing stored). */
static int store_batch(struct handler *h, struct handler_response *rs, const struct batch *b)
{
	int rc;

	if (b->nvalid && (rc = store_streams(h->store, b->valid, b->nvalid, b->results)) < 0) {
		not_stored(h, rs, rc, "storing streams failed", b->nvalid);
		rs->accepted = rs->duplicates = 0;
		return 1;
	}
	for (size_t i = 0; i < b->nvalid; i++) {
		if (b->results[i] == STORE_ACCEPTED) {
			rs->accepted++;
			rs->events += b->valid[i]->nevents;
		} else {
			rs->duplicates++;
		}
	}
	return 0;
}

/* The answer's body: the counts and the rejections. 0, or -1 when out of memory. */
static int answer_batch(struct handler *h, struct handler_response *rs)
{
	struct jsonw w;

	jsonw_end(&h->rw);
	if (jsonw_finish(&h->rw) < 0)
		return -1;
	jsonw_init_compact(&w, &rs->body);
	jsonw_object(&w);
	jsonw_ku64(&w, "accepted", rs->accepted);
	jsonw_ku64(&w, "duplicates", rs->duplicates);
	jsonw_key(&w, "rejected");
	jsonw_raw(&w, h->rejected.data, h->rejected.len);
	jsonw_end(&w);
	if (jsonw_finish(&w) < 0)
		return -1;
	return 0;
}

void handler_process(struct handler *h, const struct handler_request *rq,
		     struct handler_response *rs)
{
	struct batch b = { 0 };
	const char *body;
	size_t len;
	int rc;

	response_reset(h, rs);
	if (check_auth(h, rq, rs) < 0 || decode_body(h, rq, rs, &body, &len) < 0)
		return;
	rc = split_lines(h, rq, rs, body, len, &b);
	if (rc == 0)
		rc = parse_lines(h, rq, rs, &b);
	if (rc == 0)
		rc = store_batch(h, rs, &b);
	if (rc == 0)
		rc = answer_batch(h, rs);
	if (rc == 0) {
		rs->status = 200;
	} else if (rc < 0) {
		log_error("out of memory handling a request", "bytes=%zu", len);
		handler_error(rs, 503, "server out of memory for this request; retry later");
		rs->retry_after = 5;
	}
}

int handler_maintain(struct handler *h)
{
	if (store_maintain(h->store) < 0) {
		snprintf(h->err, sizeof(h->err), "%s", store_error(h->store));
		return -1;
	}
	return 0;
}

int handler_ping(struct handler *h)
{
	PGconn *db = store_conn(h->store);
	PGresult *r;
	int ok;

	if (!db) {
		snprintf(h->err, sizeof(h->err), "%s", store_error(h->store));
		return -1;
	}
	r = PQexec(db, "SELECT 1");
	ok = PQresultStatus(r) == PGRES_TUPLES_OK;
	if (!ok)
		snprintf(h->err, sizeof(h->err), "database: %s", PQresultErrorMessage(r));
	PQclear(r);
	return ok ? 0 : -1;
}

int handler_warm_cache(struct handler *h, size_t max_frames, size_t max_stacks, int64_t *frames, int64_t *stacks)
{
	if (store_warm_cache(h->store, max_frames, max_stacks, frames, stacks) < 0) {
		snprintf(h->err, sizeof(h->err), "%s", store_error(h->store));
		return -1;
	}
	return 0;
}

int handler_fold_stats(struct handler *h)
{
	int n = store_fold_stats(h->store);

	if (n < 0)
		snprintf(h->err, sizeof(h->err), "%s", store_error(h->store));
	return n;
}

/* ---- agents' reports ---- */

/* A string field into out (cap bytes with the NUL): absent -> def (NULL: required). 0, or -1 with err. */
static int report_str(struct json_val v, const char *name, const char *def, size_t min, char *out, size_t cap,
		      char *err, size_t errlen)
{
	struct json_reader r;
	size_t n;

	if (!json_given(v)) {
		if (!def) {
			snprintf(err, errlen, "%s: required", name);
			return -1;
		}
		snprintf(out, cap, "%s", def);
		return 0;
	}
	if (json_val_type(v) != JV_STRING) {
		snprintf(err, errlen, "%s: must be a string", name);
		return -1;
	}
	/* decoded straight into out; NUL was refused by the check */
	json_reader_at(&r, v);
	json_peek(&r);
	n = json_string_into(&r, out, cap);
	if (n < min || n >= cap) {
		snprintf(err, errlen, "%s: %zu to %zu bytes, no NUL", name, min, cap - 1);
		return -1;
	}
	return 0;
}

static int report_int(struct json_val v, const char *name, bool required, int64_t max, int64_t *out, char *err,
		      size_t errlen)
{
	*out = 0;
	if (!json_given(v)) {
		if (required) {
			snprintf(err, errlen, "%s: required", name);
			return -1;
		}
		return 0;
	}
	if (json_val_int(v, out) != 0 || *out < 0 || *out > max) {
		*out = 0;
		snprintf(err, errlen, "%s: a whole number from 0 to %lld", name, (long long)max);
		return -1;
	}
	return 0;
}

/* Report bodies: flat objects of short fields; unknown fields (newer agents) are skipped unread. */
static const struct json_limits report_limits = { 8, 4, 0 };

/* The report in text[0..len) into *r. Unknown fields are ignored (newer agents). 0, or -1 with err. */
static int report_parse(const char *text, size_t len, struct agent_report *r, char *err, size_t errlen)
{
	enum { F_V, F_HOST, F_EXE, F_BUILD, F_MODE, F_AGENT, F_APP, F_PID, F_STARTED, F_UNITS, F_VIOL, F_DROPS,
	       F_BACKLOG, F_SHIPERR, F_EXITING, F_COLLECTOR, F_N };
	static const char *const names[F_N + 1] = { "v", "host", "exe", "build_id", "mode", "agent_version", "app",
						     "pid", "started_ns", "units", "violations", "drops",
						     "spool_backlog", "ship_errors", "exiting", "collector", NULL };
	struct json_val f[F_N];
	char msg[256];
	int64_t v;

	memset(r, 0, sizeof(*r));
	if (json_check_body(text, len, &report_limits, msg, sizeof(msg)) < 0) {
		snprintf(err, errlen, "not JSON: %s", msg);
		return -1;
	}
	if (json_val_type(json_root(text, len)) != JV_OBJECT) {
		snprintf(err, errlen, "the report must be one JSON object");
		return -1;
	}
	if (json_fields(json_root(text, len), "", names, false, f, err, errlen) < 0)
		return -1;
	if (json_val_int(f[F_V], &v) != 0 || v != 1) {
		snprintf(err, errlen, "v: must be 1");
		return -1;
	}
	if (report_str(f[F_HOST], "host", NULL, 1, r->host, sizeof(r->host), err, errlen) < 0 ||
	    report_str(f[F_EXE], "exe", NULL, 1, r->exe, sizeof(r->exe), err, errlen) < 0 ||
	    report_str(f[F_BUILD], "build_id", "", 0, r->build_id, sizeof(r->build_id), err, errlen) < 0 ||
	    report_str(f[F_MODE], "mode", NULL, 1, r->mode, sizeof(r->mode), err, errlen) < 0 ||
	    report_str(f[F_AGENT], "agent_version", NULL, 1, r->agent_version, sizeof(r->agent_version), err,
		       errlen) < 0 ||
	    report_str(f[F_APP], "app", "", 0, r->app, sizeof(r->app), err, errlen) < 0 ||
	    report_str(f[F_COLLECTOR], "collector", "process", 1, r->collector, sizeof(r->collector), err, errlen) < 0 ||
	    report_int(f[F_PID], "pid", true, INT32_MAX, &r->pid, err, errlen) < 0 ||
	    report_int(f[F_STARTED], "started_ns", true, INT64_MAX / 2, &r->started_ns, err, errlen) < 0 ||
	    report_int(f[F_UNITS], "units", false, INT64_MAX, &r->units, err, errlen) < 0 ||
	    report_int(f[F_VIOL], "violations", false, INT64_MAX, &r->violations, err, errlen) < 0 ||
	    report_int(f[F_DROPS], "drops", false, INT64_MAX, &r->drops, err, errlen) < 0 ||
	    report_int(f[F_BACKLOG], "spool_backlog", false, INT64_MAX, &r->spool_backlog, err, errlen) < 0 ||
	    report_int(f[F_SHIPERR], "ship_errors", false, INT64_MAX, &r->ship_errors, err, errlen) < 0)
		return -1;
	if (r->pid < 1) {
		snprintf(err, errlen, "pid: a process id (from 1)");
		return -1;
	}
	if (strcmp(r->mode, "train") && strcmp(r->mode, "guard") && strcmp(r->mode, "inert")) {
		snprintf(err, errlen, "mode: must be train, guard or inert");
		return -1;
	}
	if (strcmp(r->collector, "host") && strcmp(r->collector, "process")) {
		snprintf(err, errlen, "collector: must be host or process");
		return -1;
	}
	if (json_given(f[F_EXITING])) {
		if (json_val_type(f[F_EXITING]) != JV_TRUE && json_val_type(f[F_EXITING]) != JV_FALSE) {
			snprintf(err, errlen, "exiting: must be true or false");
			return -1;
		}
		r->exiting = json_val_type(f[F_EXITING]) == JV_TRUE;
	}
	return 0;
}

static void db_unavailable(struct handler_response *rs, const char *what, const char *err)
{
	metrics_reject(REASON_DB_ERROR, 1);
	log_error(what, "error=\"%s\"", err);
	handler_error(rs, 503, "database unavailable; retry later");
	rs->retry_after = 2;
}

/* The start of every agent request but streams: the answer reset, the token checked, the body
 * decompressed (at most max bytes) into *body, *len. 0, or -1 with *rs answered. */
static int agent_request_max(struct handler *h, const struct handler_request *rq, struct handler_response *rs,
			     const char **body, size_t *len, size_t max)
{
	int st;

	rs->status = 0;
	rs->retry_after = 0;
	rs->accepted = rs->duplicates = rs->rejected = rs->events = 0;
	buf_reset(&rs->body);
	h->err[0] = '\0';
	*body = rq->body;
	*len = rq->len;
	if (check_auth(h, rq, rs) < 0)
		return -1;
	if (rq->zstd) {
		st = decode_zstd(h, *body, *len, max);
		if (st) {
			handler_error(rs, st, h->err);
			return -1;
		}
		*body = h->decoded.data;
		*len = h->decoded.len;
	}
	return 0;
}

static int agent_request(struct handler *h, const struct handler_request *rq, struct handler_response *rs,
			 const char **body, size_t *len)
{
	return agent_request_max(h, rq, rs, body, len, h->lim.max_decoded);
}

/* A token bound to a host speaks for that host only: 0, or -1 with a 403. */
static int host_allowed(struct handler *h, const char *host, const char *what, struct handler_response *rs)
{
	char err[512];

	if (!h->token_host[0] || strcmp(host, h->token_host) == 0)
		return 0;
	snprintf(err, sizeof(err), "host: this token %s for host '%s' only", what, h->token_host);
	handler_error(rs, 403, err);
	return -1;
}

/* ---- POST /api/v1/import ---- */

#define IMPORT_MAX_DECODED ((size_t)32 << 20)

/* What the query of an import says: the import options and the streams' role. */
struct import_query {
	struct import_opts o;
	const char *format;
	struct wire_label labels[WIRE_MAX_LABELS];
};

/* The format a Content-Type names, when the query does not: NULL to tell from the bytes. */
static const char *format_of_media(const char *m)
{
	static const struct { const char *media, *format; } map[] = {
		{ "application/vnd.google.protobuf", "pprof" }, { "application/x-protobuf", "pprof" },
		{ "application/protobuf", "pprof" }, { "application/json", "otlp" },
	};
	size_t n;

	while (*m == ' ')
		m++;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		n = strlen(map[i].media);
		if (strncasecmp(m, map[i].media, n) == 0 && (m[n] == '\0' || m[n] == ';' || m[n] == ' '))
			return map[i].format;
	}
	return NULL;
}

/* Parses the query into *q; 0, or -1 with the reason (naming the parameter) in err. */
static int import_query_parse(const struct handler_request *rq, const char *token_host,
			      struct import_query *q, char *err, size_t errlen)
{
	const char *p = rq->query, *end = rq->query + rq->query_len;
	int64_t v;

	memset(q, 0, sizeof(*q));
	import_opts_init(&q->o);
	while (p < end) {
		const char *k = p, *val = p + strlen(p) + 1;

		if (val >= end)
			break;
		p = val + strlen(val) + 1;
#define IS(name) (strcmp(k, name) == 0)
		if (IS("format")) {
			if (!import_format_find(val)) {
				snprintf(err, errlen, "format: '%.64s' is not one of %s", val,
					 import_format_names());
				return -1;
			}
			q->format = val;
		} else if (IS("host")) {
			q->o.host = val;
		} else if (IS("app")) {
			q->o.app = val;
		} else if (IS("version")) {
			q->o.version = val;
		} else if (IS("build_id")) {
			q->o.build_id = val;
		} else if (IS("sample_type")) {
			q->o.sample_type = val;
		} else if (IS("event")) {
			q->o.event = val;
		} else if (IS("symptom_comm")) {
			q->o.symptom_comm = val;
		} else if (IS("symptom_tid")) {
			if (util_parse_i64(val, 0, INT32_MAX, &v) < 0) {
				snprintf(err, errlen, "symptom_tid: must be a thread id from 0 to 2147483647");
				return -1;
			}
			q->o.symptom_tid = v;
		} else if (IS("sample_period_ns")) {
			if (util_parse_i64(val, 1, WIRE_MAX_TIME_NS, &v) < 0) {
				snprintf(err, errlen, "sample_period_ns: must be a positive number of nanoseconds");
				return -1;
			}
			q->o.sample_period_ns = v;
		} else if (IS("role")) {
			if (strcmp(val, "violation") != 0 && strcmp(val, "baseline") != 0) {
				snprintf(err, errlen, "role: must be \"violation\" or \"baseline\"");
				return -1;
			}
			q->o.role = strcmp(val, "baseline") == 0 ? WIRE_ROLE_BASELINE : WIRE_ROLE_VIOLATION;
		} else if (IS("label")) {
			/* label=KEY:VALUE (or KEY=VALUE), repeated */
			const char *sep = strpbrk(val, ":=");

			if (!sep || sep == val || !sep[1]) {
				snprintf(err, errlen, "label: '%.64s' must be KEY:VALUE, both not empty", val);
				return -1;
			}
			if ((size_t)(sep - val) > WIRE_MAX_NAME || strlen(sep + 1) > WIRE_MAX_NAME ||
			    !util_utf8_valid(val, strlen(val))) {
				snprintf(err, errlen, "label: key and value must be at most %d bytes of UTF-8 each",
					 WIRE_MAX_NAME);
				return -1;
			}
			for (size_t i = 0; i < q->o.nlabels; i++)
				if (strlen(q->labels[i].key) == (size_t)(sep - val) &&
				    memcmp(q->labels[i].key, val, (size_t)(sep - val)) == 0) {
					snprintf(err, errlen, "label: '%.*s' given twice", (int)(sep - val), val);
					return -1;
				}
			if (q->o.nlabels == WIRE_MAX_LABELS) {
				snprintf(err, errlen, "label: more than %d labels", WIRE_MAX_LABELS);
				return -1;
			}
			/* the query buffer is the request's: the separator becomes the key's end */
			*(char *)(uintptr_t)sep = '\0';
			q->labels[q->o.nlabels].key = val;
			q->labels[q->o.nlabels].value = sep + 1;
			q->o.nlabels++;
		} else {
			snprintf(err, errlen, "query: unknown parameter '%.64s' (format, host, app, version, "
				 "build_id, label, role, sample_type, event, symptom_comm, symptom_tid, "
				 "sample_period_ns)", k);
			return -1;
		}
#undef IS
	}
	if (!q->format)
		q->format = format_of_media(rq->media ? rq->media : "");
	if (!q->format)
		q->format = "auto";
	if (!q->o.host || !*q->o.host) {
		if (!token_host[0]) {
			snprintf(err, errlen, "host: required (?host=NAME), unless the token is bound to a host");
			return -1;
		}
		q->o.host = token_host;
	}
	if (!q->o.app || !*q->o.app)
		q->o.app = "imported";
	q->o.labels = q->labels;
	return 0;
}

/* The stream within the server's limits, which may be tighter than the importer's. */
static int within_limits(const struct handler_limits *lim, const struct wire_stream *s, char *err,
			 size_t errlen)
{
	if (s->nevents > lim->wire.max_events)
		snprintf(err, errlen, "events: %zu, more than the limit of %zu", s->nevents,
			 lim->wire.max_events);
	else if (s->nframes > lim->wire.max_frames)
		snprintf(err, errlen, "frames: %zu, more than the limit of %zu", s->nframes,
			 lim->wire.max_frames);
	else if (s->nstacks > lim->wire.max_stacks)
		snprintf(err, errlen, "stacks: %zu, more than the limit of %zu", s->nstacks,
			 lim->wire.max_stacks);
	else
		return 0;
	return -1;
}

void handler_import(struct handler *h, const struct handler_request *rq, struct handler_response *rs)
{
	struct import_query q;
	struct importer *im = NULL;
	const struct wire_stream **valid = NULL;
	struct wire_stream *streams = NULL;
	enum store_result *results = NULL;
	const char *body;
	size_t len, n;
	int rc;
	/* a profile unpacks into several times its size: imports are held to less than batches */
	size_t max = h->lim.max_decoded < IMPORT_MAX_DECODED ? h->lim.max_decoded : IMPORT_MAX_DECODED;
	char err[1024];

	rs->decoded_bytes = 0;
	if (agent_request_max(h, rq, rs, &body, &len, max) < 0)
		return;
	rs->decoded_bytes = len;
	if (import_query_parse(rq, h->token_host, &q, err, sizeof(err)) < 0) {
		metrics_reject(REASON_INVALID, 1);
		handler_error(rs, 400, err);
		return;
	}
	if (host_allowed(h, q.o.host, "sends streams", rs) < 0) {
		metrics_reject(REASON_INVALID, 1);
		return;
	}
	q.o.max_input = max;
	q.o.max_streams = h->lim.max_batch;
	im = importer_open(import_format_find(q.format), &q.o);
	if (!im)
		goto fail_oom;
	if (importer_run_mem(im, "body", body, len) < 0) {
		metrics_reject(REASON_INVALID, 1);
		handler_error(rs, importer_too_large(im) ? 413 : 400, importer_error(im));
		goto out_free;
	}
	n = importer_count(im);
	streams = calloc(n, sizeof(*streams));
	valid = calloc(n, sizeof(*valid));
	results = calloc(n, sizeof(*results));
	if (!streams || !valid || !results)
		goto fail_oom;
	for (size_t i = 0; i < n; i++) {
		streams[i] = *importer_stream(im, i);
		valid[i] = &streams[i];
		if (within_limits(&h->lim, &streams[i], err, sizeof(err)) < 0) {
			metrics_reject(REASON_TOO_LARGE, 1);
			handler_error_id(rs, 413, err, streams[i].stream_id);
			goto out_free;
		}
	}
	if ((rc = store_streams(h->store, valid, n, results)) < 0) {
		not_stored(h, rs, rc, "storing imported streams failed", n);
		goto out_free;
	}
	{
		struct jsonw w;

		jsonw_init_compact(&w, &rs->body);
		jsonw_object(&w);
		jsonw_kstr(&w, "format", importer_format(im));
		for (size_t i = 0; i < n; i++) {
			if (results[i] == STORE_ACCEPTED) {
				rs->accepted++;
				rs->events += streams[i].nevents;
			} else {
				rs->duplicates++;
			}
		}
		jsonw_ku64(&w, "accepted", rs->accepted);
		jsonw_ku64(&w, "duplicates", rs->duplicates);
		jsonw_karray(&w, "streams");
		for (size_t i = 0; i < n; i++) {
			jsonw_object(&w);
			jsonw_kstr(&w, "stream_id", streams[i].stream_id);
			jsonw_kstr(&w, "status", results[i] == STORE_ACCEPTED ? "accepted" : "duplicate");
			jsonw_ku64(&w, "events", streams[i].nevents);
			jsonw_kobject(&w, "labels");
			for (size_t k = 0; k < streams[i].nlabels; k++)
				jsonw_kstr(&w, streams[i].labels[k].key, streams[i].labels[k].value);
			jsonw_end(&w);
			jsonw_end(&w);
		}
		jsonw_end(&w);
		jsonw_end(&w);
		if (jsonw_finish(&w) < 0)
			goto fail_oom;
	}
	rs->status = 200;
	goto out_free;
fail_oom:
	log_error("out of memory importing a profile", "bytes=%zu", len);
	handler_error(rs, 503, "server out of memory for this request; retry later");
	rs->retry_after = 5;
out_free:
	free(streams);
	free(valid);
	free(results);
	importer_free(im);
}

/* {"ok": true} */
static void answer_ok(struct handler_response *rs)
{
	struct jsonw w;

	jsonw_init_compact(&w, &rs->body);
	jsonw_object(&w);
	jsonw_kbool(&w, "ok", true);
	jsonw_end(&w);
	if (jsonw_finish(&w) < 0) {
		handler_error(rs, 503, "server out of memory for this request; retry later");
		return;
	}
	rs->status = 200;
}

void handler_report(struct handler *h, const struct handler_request *rq, struct handler_response *rs)
{
	const char *body;
	size_t len;
	struct agent_report r;
	char err[512];

	if (agent_request(h, rq, rs, &body, &len) < 0)
		return;
	if (report_parse(body, len, &r, err, sizeof(err)) < 0) {
		metrics_reject(REASON_INVALID, 1);
		handler_error(rs, 400, err);
		return;
	}
	if (host_allowed(h, r.host, "reports", rs) < 0)
		return;
	if (store_report(h->store, &r) < 0) {
		db_unavailable(rs, "storing a report failed", store_error(h->store));
		return;
	}
	/* the answer carries the settings an operator pushed to this app's agents */
	buf_puts(&rs->body, "{\"ok\":true,\"settings\":");
	if (store_agent_settings(h->store, r.app[0] ? r.app : "*", &rs->body) < 0) {
		buf_reset(&rs->body);
		db_unavailable(rs, "reading the agents' settings failed", store_error(h->store));
		return;
	}
	buf_putc(&rs->body, '}');
	if (buf_error(&rs->body) != BUF_OK) {
		handler_error(rs, 503, "server out of memory for this request; retry later");
		return;
	}
	rs->status = 200;
}

/* ---- profiles learnt by the fleet (ingest/profiles.h) ---- */

void handler_profile_put(struct handler *h, const struct handler_request *rq, struct handler_response *rs)
{
	const char *body;
	size_t len;
	struct profile_upload u;
	char err[512];
	PGconn *db;

	if (agent_request(h, rq, rs, &body, &len) < 0)
		return;
	if (profiles_parse(body, len, &u, err, sizeof(err)) < 0) {
		metrics_reject(REASON_INVALID, 1);
		handler_error(rs, 400, err);
		goto out;
	}
	if (host_allowed(h, u.host, "uploads", rs) < 0)
		goto out;
	if (profiles_validate(&u, util_now_real_ns(), err, sizeof(err)) < 0) {
		metrics_reject(REASON_INVALID, 1);
		handler_error(rs, 400, err);
		goto out;
	}
	if (!(db = store_conn(h->store)) || profiles_store(db, &u, err, sizeof(err)) < 0) {
		db_unavailable(rs, "storing a profile failed", db ? err : store_error(h->store));
		goto out;
	}
	/* the merged profile (and the Fleet page's view of it) follows the uploads, once a minute at most */
	if (profiles_refresh(db, u.build_id, h->lim.profile_merge_ms, err, sizeof(err)) < 0)
		log_warn("merging the fleet's profiles failed", "build_id=%s error=\"%s\"", u.build_id, err);
	answer_ok(rs);
out:
	buf_release(&u.text);
}

void handler_profile_get(struct handler *h, const struct handler_request *rq, const char *build_id,
			 struct handler_response *rs)
{
	const char *body;
	size_t len;
	char err[512];
	PGconn *db;
	int rc;

	if (agent_request(h, rq, rs, &body, &len) < 0)
		return;
	if (!(db = store_conn(h->store))) {
		db_unavailable(rs, "fetching a profile failed", store_error(h->store));
		return;
	}
	rc = profiles_fetch(db, build_id, h->lim.profile_merge_ms, &rs->body, err, sizeof(err));
	if (rc < 0) {
		buf_reset(&rs->body);
		db_unavailable(rs, "fetching a profile failed", err);
		return;
	}
	if (rc > 0) {
		snprintf(err, sizeof(err), "build_id %s: no profile learnt yet", build_id);
		handler_error(rs, 404, err);
		return;
	}
	rs->status = 200;
}
