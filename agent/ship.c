/* ship: batching, zstd, HTTP with retries, spooling and draining (see ship.h). */
#include "agent/ship.h"
#include "agent/spool.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "common/vec.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define MAX_RESPONSE ((size_t)4 << 20)
#define READ_CHUNK 65536

/* ---- retry policy ---- */

int64_t ship_backoff_ms(int attempt, int64_t retry_after_ms, uint64_t random)
{
	int64_t ceil = SHIP_BACKOFF_CAP_MS, delay;

	if (attempt < 1)
		attempt = 1;
	/* base * 2^(attempt-1) passes the cap long before it could overflow */
	if (attempt <= 20 && ((int64_t)SHIP_BACKOFF_BASE_MS << (attempt - 1)) < ceil)
		ceil = (int64_t)SHIP_BACKOFF_BASE_MS << (attempt - 1);
	delay = (int64_t)(random % (uint64_t)(ceil + 1));
	if (retry_after_ms >= 0)
		delay += retry_after_ms < SHIP_BACKOFF_CAP_MS ? retry_after_ms : SHIP_BACKOFF_CAP_MS;
	return delay < SHIP_BACKOFF_CAP_MS ? delay : SHIP_BACKOFF_CAP_MS;
}

int64_t ship_retry_after_ms(const char *value)
{
	static const char *const date_formats[] = {
		"%a, %d %b %Y %H:%M:%S GMT",  /* IMF-fixdate */
		"%A, %d-%b-%y %H:%M:%S GMT",  /* RFC 850 */
		"%a %b %e %H:%M:%S %Y",       /* asctime */
	};
	char tmp[64];
	size_t n;
	int64_t secs;

	if (!value)
		return -1;
	while (*value == ' ' || *value == '\t')
		value++;
	n = strlen(value);
	while (n && (value[n - 1] == ' ' || value[n - 1] == '\t' || value[n - 1] == '\r' ||
		     value[n - 1] == '\n'))
		n--;
	if (n == 0 || n >= sizeof(tmp))
		return -1;
	memcpy(tmp, value, n);
	tmp[n] = '\0';
	if (tmp[0] >= '0' && tmp[0] <= '9') {
		size_t i = 0;

		while (tmp[i] >= '0' && tmp[i] <= '9')
			i++;
		if (tmp[i])
			return -1;
		/* more digits than an int64 holds is still "a long time" */
		if (i > 12 || util_parse_i64(tmp, 0, INT64_MAX, &secs) < 0 ||
		    secs > SHIP_BACKOFF_CAP_MS / 1000)
			return SHIP_BACKOFF_CAP_MS;
		return secs * 1000;
	}
	for (size_t f = 0; f < sizeof(date_formats) / sizeof(date_formats[0]); f++) {
		struct tm tm;
		const char *end;

		memset(&tm, 0, sizeof(tm));
		end = strptime(tmp, date_formats[f], &tm);
		if (end && *end == '\0')
			return SHIP_BACKOFF_CAP_MS;
	}
	return -1;
}

/* ---- splitting input text into stream objects ---- */

enum split_mode { SPLIT_UNKNOWN, SPLIT_NDJSON, SPLIT_OBJECTS };

struct ship_splitter {
	struct buf cur;        /* the object being collected */
	ship_text_fn *fn;
	void *ctx;
	size_t line;           /* line of the byte being read */
	size_t start_line;     /* line the current object starts on */
	enum split_mode mode;
	long depth;            /* open brackets, outside strings */
	bool started;          /* cur holds something other than blanks */
	bool bracketed;        /* ... and it starts with { or [ */
	bool closed;           /* unknown mode: the first object closed on its own line */
	bool in_str, esc;
	bool line_start;       /* nothing but blanks read on this line yet */
	char err[128];
};

struct ship_splitter *ship_splitter_open(size_t max_object, ship_text_fn *fn, void *ctx)
{
	struct ship_splitter *sp = calloc(1, sizeof(*sp));

	if (!sp)
		return NULL;
	sp->cur.max = max_object;
	sp->fn = fn;
	sp->ctx = ctx;
	sp->line = 1;
	sp->line_start = true;
	return sp;
}

void ship_splitter_free(struct ship_splitter *sp)
{
	if (!sp)
		return;
	buf_release(&sp->cur);
	free(sp);
}

const char *ship_splitter_error(const struct ship_splitter *sp)
{
	return sp->err;
}

static int split_take(struct ship_splitter *sp, const char *p, size_t n)
{
	if (buf_append(&sp->cur, p, n) == 0)
		return 0;
	snprintf(sp->err, sizeof(sp->err), "line %zu: stream text longer than %zu bytes",
		 sp->start_line, sp->cur.max);
	return -1;
}

static int split_emit(struct ship_splitter *sp)
{
	int rc = sp->fn(sp->ctx, sp->cur.len ? sp->cur.data : "", sp->cur.len, sp->start_line);

	buf_reset(&sp->cur);
	sp->started = sp->bracketed = sp->closed = sp->in_str = sp->esc = false;
	sp->depth = 0;
	return rc;
}

int ship_splitter_feed(struct ship_splitter *sp, const char *p, size_t n)
{
	size_t seg = 0;  /* p[seg..i) is part of the object but not yet in cur */
	int rc;

	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		/* NDJSON: past a line's first byte only its end matters (most of a big stream's bytes) */
		if (sp->mode == SPLIT_NDJSON && sp->started) {
			const char *nl = memchr(p + i, '\n', n - i);

			if (!nl)
				break;
			i = (size_t)(nl - p);
			c = '\n';
		}
		if (c == '\n') {
			bool end = false;

			/* JSON strings never span lines: a newline ends a cut-off one */
			sp->in_str = sp->esc = false;
			sp->line_start = true;
			if (!sp->started)
				seg = i + 1;
			else if (sp->mode == SPLIT_NDJSON)
				end = true;
			else if (sp->mode == SPLIT_UNKNOWN && sp->closed)
				end = true, sp->mode = SPLIT_NDJSON;
			else if (sp->depth == 0)
				end = true;  /* a line of something that is not an object */
			else if (sp->mode == SPLIT_UNKNOWN)
				sp->mode = SPLIT_OBJECTS;
			if (end) {
				if ((rc = split_take(sp, p + seg, i - seg)) || (rc = split_emit(sp)))
					return rc;
				seg = i + 1;
			}
			sp->line++;
			continue;
		}
		if (sp->line_start && c != ' ' && c != '\t' && c != '\r') {
			sp->line_start = false;
			/* '{' opening a line where the top-level object wants a key: the
			 * object before was cut short, and this line starts the next one */
			if (c == '{' && sp->started && sp->mode != SPLIT_NDJSON && sp->depth == 1 &&
			    sp->bracketed) {
				if ((rc = split_take(sp, p + seg, i - seg)) || (rc = split_emit(sp)))
					return rc;
				seg = i;
			}
		}
		if (!sp->started) {
			if (c == ' ' || c == '\t' || c == '\r') {
				seg = i + 1;
				continue;
			}
			sp->started = true;
			sp->start_line = sp->line;
			sp->bracketed = c == '{' || c == '[';
		}
		if (sp->mode == SPLIT_NDJSON)
			continue;
		if (sp->in_str) {
			if (sp->esc)
				sp->esc = false;
			else if (c == '\\')
				sp->esc = true;
			else if (c == '"')
				sp->in_str = false;
			continue;
		}
		if (c == '"') {
			sp->in_str = true;
		} else if (c == '{' || c == '[') {
			sp->depth++;
		} else if ((c == '}' || c == ']') && sp->depth > 0 && --sp->depth == 0 && sp->bracketed) {
			if (sp->mode == SPLIT_UNKNOWN) {
				sp->closed = true;  /* wait for the line end: NDJSON takes whole lines */
			} else {
				if ((rc = split_take(sp, p + seg, i + 1 - seg)) || (rc = split_emit(sp)))
					return rc;
				seg = i + 1;
			}
		}
	}
	if (sp->started && seg < n)
		return split_take(sp, p + seg, n - seg);
	return 0;
}

int ship_splitter_finish(struct ship_splitter *sp)
{
	return sp->started ? split_emit(sp) : 0;
}

/* ---- the shipper ---- */

struct entry {
	char id[37];          /* the stream's id */
	char spool_id[37];    /* drain: the spool file it came from; "" otherwise */
	char *origin;
	size_t off, len;      /* its line in sh->batch (the newline not counted) */
	char *rejected;       /* the server's message when it refused the stream */
};

#define SHIP_MAX_SERVERS 16

struct shipper {
	struct ship_opts o;
	char *url, *token, *spool_dir;  /* url: the current server's streams endpoint */
	char *urls[SHIP_MAX_SERVERS];   /* each server's streams endpoint ... */
	char *bases[SHIP_MAX_SERVERS];  /* ... and base URL, without a trailing '/' */
	size_t nserver, cur;
	struct spool *spool;            /* opened when first needed */
	struct wire_parser *parser;
	struct arena *arena;
	struct buf text;                /* one stream serialized by shipper_add_stream() */
	struct buf retext;              /* one stream rewritten with its role (mark_baseline) */
	struct buf batch;               /* NDJSON body being collected */
	struct entry *q;
	size_t nq, capq;
	struct buf zbuf;                /* the compressed body */
	ZSTD_CCtx *cctx;
	CURL *curl;
	CURLM *multi;                   /* one transfer at a time, polled so that a cancel is seen at once */
	struct curl_slist *headers;
	struct curl_slist *json_headers;  /* shipper_post_json(): plain JSON */
	char *base;                     /* the current server's base URL */
	struct buf resp;
	int64_t retry_after_ms;         /* of the last response, -1 when absent */
	long last_status;               /* of the last streams request, 0 when none came */
	char curl_err[CURL_ERROR_SIZE];
	struct ship_counters c;
	bool curl_global;               /* curl_global_init() to balance */
	bool stopped;
	char err[1024];
};

static int ship_fail(struct shipper *sh, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void answer_message(const struct buf *resp, char *out, size_t outlen);

static int ship_fail(struct shipper *sh, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sh->err, sizeof(sh->err), fmt, ap);
	va_end(ap);
	return code;
}

void ship_opts_init(struct ship_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->spool_max = SPOOL_DEFAULT_MAX;
	o->max_attempts = SHIP_DEFAULT_ATTEMPTS;
	o->timeout_s = SHIP_DEFAULT_TIMEOUT_S;
	o->batch_count = SHIP_DEFAULT_BATCH;
	o->batch_bytes = SHIP_DEFAULT_BATCH_BYTES;
	o->zstd_level = 3;
}

static const char *const event_names[] = {
	[SHIP_EV_INVALID] = "invalid", [SHIP_EV_REJECTED] = "rejected",
	[SHIP_EV_SPOOLED] = "spooled", [SHIP_EV_KEPT] = "kept in spool",
	[SHIP_EV_LOST] = "lost",
};

static void report(struct shipper *sh, enum ship_event ev, const char *origin, const char *id,
		   const char *msg)
{
	if (!origin)
		origin = "";
	if (sh->o.report)
		sh->o.report(sh->o.report_ctx, ev, origin, id, msg);
	else
		log_warn(event_names[ev], "origin=\"%s\" stream=%s reason=\"%s\"", origin,
			 *id ? id : "-", msg);
}

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct shipper *sh = ctx;

	(void)size; /* always 1 */
	/* a short count makes curl fail the transfer: a reply this large is not ours */
	return buf_append(&sh->resp, p, n) == 0 ? n : 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
	struct shipper *sh = ctx;
	static const char name[] = "retry-after:";

	(void)size; /* always 1 */
	if (n > sizeof(name) - 1 && n < 128 && strncasecmp(p, name, sizeof(name) - 1) == 0) {
		char v[128];

		memcpy(v, p + sizeof(name) - 1, n - (sizeof(name) - 1));
		v[n - (sizeof(name) - 1)] = '\0';
		sh->retry_after_ms = ship_retry_after_ms(v);
	}
	return n;
}

static curl_socket_t on_open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *addr)
{
	struct shipper *sh = ctx;
	int fd;

	(void)purpose;
	fd = sh->o.open_socket(sh->o.socket_ctx, addr->family, addr->socktype, addr->protocol);
	return fd < 0 ? CURL_SOCKET_BAD : fd;
}

static int on_close_socket(void *ctx, curl_socket_t fd)
{
	struct shipper *sh = ctx;

	sh->o.close_socket(sh->o.socket_ctx, fd);
	return 0;
}

static bool cancelled(const struct shipper *sh)
{
	return sh->o.cancel && *sh->o.cancel;
}

/* Sleeps, but not past a cancel: in slices, since another thread may be the one that cancels. */
static void sleep_ms(const struct shipper *sh, int64_t ms)
{
	while (ms > 0 && !cancelled(sh)) {
		int64_t slice = ms < SHIP_CANCEL_POLL_MS ? ms : SHIP_CANCEL_POLL_MS;
		struct timespec ts = { 0, (long)slice * 1000000 };

		nanosleep(&ts, NULL);
		ms -= slice;
	}
}

/* libcurl's progress callback: a non-zero return aborts the transfer. */
static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return cancelled(ctx);
}

/*
 * One transfer of the easy handle, like curl_easy_perform(), but through the multi interface: its
 * wait is cut into SHIP_CANCEL_POLL_MS slices, so that a cancel (the process exits, the agent's
 * threads step aside) ends a request to a server that never answers within one slice instead of
 * the next second of libcurl's own loop.
 */
static CURLcode perform(struct shipper *sh)
{
	CURLcode cc = CURLE_OK;
	CURLMsg *m;
	int running = 1, left;

	if (curl_multi_add_handle(sh->multi, sh->curl) != CURLM_OK)
		return curl_easy_perform(sh->curl);
	while (running) {
		if (curl_multi_perform(sh->multi, &running) != CURLM_OK) {
			cc = CURLE_FAILED_INIT;
			break;
		}
		if (!running)
			break;
		if (cancelled(sh)) {
			cc = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
		if (curl_multi_poll(sh->multi, NULL, 0, SHIP_CANCEL_POLL_MS, NULL) != CURLM_OK) {
			cc = CURLE_FAILED_INIT;
			break;
		}
	}
	while ((m = curl_multi_info_read(sh->multi, &left)))
		if (m->msg == CURLMSG_DONE && m->easy_handle == sh->curl)
			cc = m->data.result;
	curl_multi_remove_handle(sh->multi, sh->curl);
	return cc;
}

/* Header values must not smuggle in other headers. */
static bool token_ok(const char *t)
{
	if (!*t)
		return false;
	for (; *t; t++)
		if (*t < 0x21 || *t > 0x7e)
			return false;
	return true;
}

/* Splits the comma-separated URL list of o into the shipper's servers. 0, or -1 with err. */
static int parse_servers(struct shipper *sh, const char *list, char *err, size_t errlen)
{
	const char *p = list;

	for (;;) {
		const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
		size_t ul;

		while (p < end && *p == ' ')
			p++;
		while (end > p && (end[-1] == ' ' || end[-1] == '/'))
			end--;
		ul = (size_t)(end - p);
		if (!ul || (strncmp(p, "http://", 7) != 0 && strncmp(p, "https://", 8) != 0)) {
			snprintf(err, errlen, "url '%.*s': must start with http:// or https://", (int)ul, p);
			return -1;
		}
		if (sh->nserver == SHIP_MAX_SERVERS) {
			snprintf(err, errlen, "url: more than %d servers", SHIP_MAX_SERVERS);
			return -1;
		}
		sh->bases[sh->nserver] = strndup(p, ul);
		sh->urls[sh->nserver] = malloc(ul + sizeof("/api/v1/streams"));
		if (!sh->bases[sh->nserver] || !sh->urls[sh->nserver]) {
			sh->nserver++;
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		memcpy(sh->urls[sh->nserver], p, ul);
		memcpy(sh->urls[sh->nserver] + ul, "/api/v1/streams", sizeof("/api/v1/streams"));
		sh->nserver++;
		if (!comma)
			break;
		p = comma + 1;
	}
	sh->cur = 0;
	sh->url = sh->urls[0];
	sh->base = sh->bases[0];
	return 0;
}

/* The next server of the list, for the next request (a list of one stays). */
static void next_server(struct shipper *sh, const char *why)
{
	if (sh->nserver < 2)
		return;
	sh->cur = (sh->cur + 1) % sh->nserver;
	sh->url = sh->urls[sh->cur];
	sh->base = sh->bases[sh->cur];
	sh->c.failovers++;
	curl_easy_setopt(sh->curl, CURLOPT_URL, sh->url);
	log_info("switching server", "url=%s reason=\"%s\"", sh->base, why);
}

struct shipper *shipper_open(const struct ship_opts *o, char *err, size_t errlen)
{
	struct shipper *sh;
	struct buf hdr = BUF_INIT(8192);
	struct wire_limits lim;

	if (!o->url || (strncmp(o->url, "http://", 7) != 0 && strncmp(o->url, "https://", 8) != 0)) {
		snprintf(err, errlen, "url '%s': must start with http:// or https://",
			 o->url ? o->url : "");
		return NULL;
	}
	if (o->token && !token_ok(o->token)) {
		snprintf(err, errlen, "token: empty, or holds spaces or control characters");
		return NULL;
	}
	if (o->max_attempts < 1 || o->batch_count < 1 || o->batch_bytes < 1 || o->timeout_s < 1) {
		snprintf(err, errlen, "attempts, batch sizes and timeout must be at least 1");
		return NULL;
	}
	sh = calloc(1, sizeof(*sh));
	if (!sh)
		goto fail_oom;
	sh->o = *o;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		free(sh);
		snprintf(err, errlen, "libcurl cannot initialise");
		return NULL;
	}
	sh->curl_global = true;
	if (parse_servers(sh, o->url, err, errlen) < 0) {
		shipper_free(sh);
		return NULL;
	}
	if ((o->token && !(sh->token = strdup(o->token))) ||
	    (o->spool_dir && !(sh->spool_dir = strdup(o->spool_dir))))
		goto fail_free;
	sh->o.url = sh->url;
	sh->o.token = sh->token;
	sh->o.spool_dir = sh->spool_dir;
	wire_limits_default(&lim);
	sh->parser = wire_parser_open(&lim);
	sh->arena = arena_open(0);
	sh->cctx = ZSTD_createCCtx();
	sh->curl = curl_easy_init();
	sh->multi = curl_multi_init();
	sh->text.max = SHIP_MAX_STREAM_TEXT;
	sh->retext.max = SHIP_MAX_STREAM_TEXT;
	sh->resp.max = MAX_RESPONSE;
	if (!sh->parser || !sh->arena || !sh->cctx || !sh->curl || !sh->multi)
		goto fail_free;
	if (sh->token && buf_printf(&hdr, "Authorization: Bearer %s", sh->token) < 0)
		goto fail_free;
	if (!(sh->headers = curl_slist_append(NULL, "Content-Type: application/x-ndjson")) ||
	    !curl_slist_append(sh->headers, "Content-Encoding: zstd") ||
	    /* no 100-continue round trip: the server answers early errors anyway */
	    !curl_slist_append(sh->headers, "Expect:") ||
	    (hdr.len && !curl_slist_append(sh->headers, hdr.data)))
		goto fail_free;
	if (!(sh->json_headers = curl_slist_append(NULL, "Content-Type: application/json")) ||
	    !curl_slist_append(sh->json_headers, "Expect:") ||
	    (hdr.len && !curl_slist_append(sh->json_headers, hdr.data)))
		goto fail_free;
	buf_release(&hdr);
	curl_easy_setopt(sh->curl, CURLOPT_URL, sh->url);
	curl_easy_setopt(sh->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(sh->curl, CURLOPT_HTTPHEADER, sh->headers);
	curl_easy_setopt(sh->curl, CURLOPT_USERAGENT, "sm-agent/1");
	curl_easy_setopt(sh->curl, CURLOPT_NOSIGNAL, 1L);
	if (o->timeout_ms > 0) {
		shipper_set_timeout_ms(sh, o->timeout_ms);
	} else {
		curl_easy_setopt(sh->curl, CURLOPT_TIMEOUT, o->timeout_s);
		curl_easy_setopt(sh->curl, CURLOPT_CONNECTTIMEOUT, o->timeout_s < 10 ? o->timeout_s : 10L);
	}
#if LIBCURL_VERSION_NUM >= 0x075700
	/* a name still being resolved when the shipper ends is left to its thread, not waited for */
	curl_easy_setopt(sh->curl, CURLOPT_QUICK_EXIT, 1L);
#endif
	curl_easy_setopt(sh->curl, CURLOPT_ERRORBUFFER, sh->curl_err);
	curl_easy_setopt(sh->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(sh->curl, CURLOPT_WRITEDATA, sh);
	curl_easy_setopt(sh->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(sh->curl, CURLOPT_HEADERDATA, sh);
	curl_easy_setopt(sh->curl, CURLOPT_POST, 1L);
	if (o->open_socket && o->close_socket) {
		curl_easy_setopt(sh->curl, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
		curl_easy_setopt(sh->curl, CURLOPT_OPENSOCKETDATA, sh);
		curl_easy_setopt(sh->curl, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
		curl_easy_setopt(sh->curl, CURLOPT_CLOSESOCKETDATA, sh);
	}
	if (o->cancel) {
		curl_easy_setopt(sh->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(sh->curl, CURLOPT_XFERINFODATA, sh);
		curl_easy_setopt(sh->curl, CURLOPT_NOPROGRESS, 0L);
	}
	return sh;
fail_free:
	buf_release(&hdr);
	shipper_free(sh);
fail_oom:
	snprintf(err, errlen, "out of memory");
	return NULL;
}

static void queue_reset(struct shipper *sh)
{
	for (size_t i = 0; i < sh->nq; i++) {
		free(sh->q[i].origin);
		free(sh->q[i].rejected);
	}
	sh->nq = 0;
	buf_reset(&sh->batch);
}

void shipper_free(struct shipper *sh)
{
	if (!sh)
		return;
	queue_reset(sh);
	free(sh->q);
	if (sh->multi)
		curl_multi_cleanup(sh->multi);
	curl_easy_cleanup(sh->curl);
	if (sh->curl_global)
		curl_global_cleanup();
	curl_slist_free_all(sh->headers);
	curl_slist_free_all(sh->json_headers);
	for (size_t i = 0; i < sh->nserver; i++) {
		free(sh->urls[i]);
		free(sh->bases[i]);
	}
	ZSTD_freeCCtx(sh->cctx);
	arena_free(sh->arena);
	wire_parser_free(sh->parser);
	spool_free(sh->spool);
	buf_release(&sh->text);
	buf_release(&sh->retext);
	buf_release(&sh->batch);
	buf_release(&sh->zbuf);
	buf_release(&sh->resp);
	free(sh->token);
	free(sh->spool_dir);
	free(sh);
}

const char *shipper_error(const struct shipper *sh)
{
	return sh->err;
}

void shipper_set_timeout_ms(struct shipper *sh, long ms)
{
	curl_easy_setopt(sh->curl, CURLOPT_TIMEOUT_MS, ms);
	curl_easy_setopt(sh->curl, CURLOPT_CONNECTTIMEOUT_MS, ms < 10000 ? ms : 10000L);
}

const struct ship_counters *shipper_counters(const struct shipper *sh)
{
	return &sh->c;
}

int shipper_stopped(const struct shipper *sh)
{
	return sh->stopped;
}

static int get_one(struct shipper *sh, const char *path, size_t max, struct buf *out, long *status, char *err,
		   size_t errlen);

/* Whether a failed request may go to the next server: it could not be sent, or the server
 * answered 5xx (429 and 4xx are answers about the request, the same from any server). */
static bool may_fail_over(long status)
{
	return status == 0 || status >= 500;
}

int shipper_get(struct shipper *sh, const char *path, size_t max, struct buf *out, long *status, char *err,
		size_t errlen)
{
	int rc = -1;

	for (size_t tries = 0; tries < sh->nserver; tries++) {
		if ((rc = get_one(sh, path, max, out, status, err, errlen)) == 0 || !may_fail_over(*status))
			break;
		next_server(sh, err);
	}
	return rc;
}

static int get_one(struct shipper *sh, const char *path, size_t max, struct buf *out, long *status, char *err,
		   size_t errlen)
{
	struct buf url = BUF_INIT(8192);
	size_t keep = sh->resp.max;
	CURLcode cc;
	char msg[512];
	int rc = -1;

	*status = 0;
	if (buf_printf(&url, "%s%s", sh->base, path) < 0) {
		snprintf(err, errlen, "URL too long");
		goto out;
	}
	buf_reset(&sh->resp);
	sh->resp.max = max;
	sh->curl_err[0] = '\0';
	curl_easy_setopt(sh->curl, CURLOPT_URL, url.data);
	curl_easy_setopt(sh->curl, CURLOPT_HTTPHEADER, sh->json_headers);
	curl_easy_setopt(sh->curl, CURLOPT_HTTPGET, 1L);
	cc = perform(sh);
	sh->c.requests++;
	curl_easy_setopt(sh->curl, CURLOPT_URL, sh->url);
	curl_easy_setopt(sh->curl, CURLOPT_HTTPHEADER, sh->headers);
	curl_easy_setopt(sh->curl, CURLOPT_POST, 1L);
	sh->resp.max = keep;
	if (cc != CURLE_OK) {
		snprintf(err, errlen, "%s: %s", url.data, sh->curl_err[0] ? sh->curl_err : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(sh->curl, CURLINFO_RESPONSE_CODE, status);
	if (*status != 200) {
		answer_message(&sh->resp, msg, sizeof(msg));
		snprintf(err, errlen, "server answered %ld: %s", *status, msg);
		goto out;
	}
	buf_append(out, sh->resp.data, sh->resp.len);
	if (buf_error(out) != BUF_OK) {
		snprintf(err, errlen, "the answer is larger than %zu bytes", out->max);
		goto out;
	}
	rc = 0;
out:
	buf_reset(&sh->resp);
	buf_release(&url);
	return rc;
}

static int post_json_one(struct shipper *sh, const char *path, const char *json, size_t len,
			 struct buf *answer, long *status_out, char *err, size_t errlen);

int shipper_post_json(struct shipper *sh, const char *path, const char *json, size_t len, struct buf *answer,
		      char *err, size_t errlen)
{
	long status = 0;
	int rc = -1;

	for (size_t tries = 0; tries < sh->nserver; tries++) {
		if ((rc = post_json_one(sh, path, json, len, answer, &status, err, errlen)) == 0 ||
		    sh->stopped || !may_fail_over(status))
			break;
		next_server(sh, err);
	}
	return rc;
}

static int post_json_one(struct shipper *sh, const char *path, const char *json, size_t len,
			 struct buf *answer, long *status_out, char *err, size_t errlen)
{
	struct buf url = BUF_INIT(8192);
	CURLcode cc;
	long status = 0;
	char msg[512];
	int rc = -1;

	if (sh->stopped) {
		snprintf(err, errlen, "shipping stopped: %s", sh->err);
		return -1;
	}
	if (buf_printf(&url, "%s%s", sh->base, path) < 0) {
		snprintf(err, errlen, "URL too long");
		goto out;
	}
	buf_reset(&sh->resp);
	sh->curl_err[0] = '\0';
	curl_easy_setopt(sh->curl, CURLOPT_URL, url.data);
	curl_easy_setopt(sh->curl, CURLOPT_HTTPHEADER, sh->json_headers);
	curl_easy_setopt(sh->curl, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(sh->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	cc = perform(sh);
	sh->c.requests++;
	/* back to the streams' request for the next batch */
	curl_easy_setopt(sh->curl, CURLOPT_URL, sh->url);
	curl_easy_setopt(sh->curl, CURLOPT_HTTPHEADER, sh->headers);
	if (cc != CURLE_OK) {
		snprintf(err, errlen, "%s: %s", url.data, sh->curl_err[0] ? sh->curl_err : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(sh->curl, CURLINFO_RESPONSE_CODE, &status);
	*status_out = status;
	if (status != 200) {
		answer_message(&sh->resp, msg, sizeof(msg));
		snprintf(err, errlen, "server answered %ld: %s", status, msg);
		goto out;
	}
	if (answer && (buf_append(answer, sh->resp.data, sh->resp.len) < 0 || buf_error(answer) != BUF_OK)) {
		snprintf(err, errlen, "the answer is larger than %zu bytes", answer->max);
		goto out;
	}
	rc = 0;
out:
	buf_release(&url);
	return rc;
}

/* The "error" member of a JSON answer, else its first bytes made printable. */
static void answer_message(const struct buf *resp, char *out, size_t outlen)
{
	json_object *root = resp->len ? json_tokener_parse(resp->data) : NULL;
	json_object *e;
	size_t n = 0;

	if (root && json_object_object_get_ex(root, "error", &e) &&
	    json_object_is_type(e, json_type_string)) {
		snprintf(out, outlen, "%s", json_object_get_string(e));
		json_object_put(root);
		return;
	}
	json_object_put(root);
	for (size_t i = 0; i < resp->len && n + 1 < outlen && n < 200; i++)
		out[n++] = resp->data[i] >= 0x20 && resp->data[i] < 0x7f ? resp->data[i] : ' ';
	out[n] = '\0';
	if (n == 0)
		snprintf(out, outlen, "(no message)");
}

/* Outcome of one attempt at sending a range of the queue. */
enum attempt { ATT_DONE, ATT_RETRY, ATT_FAIL, ATT_STOP, ATT_SPLIT };

/*
 * Reads a 200 answer for q[lo..hi): marks the rejected entries. 0, or -1
 * when the answer is not what the wire format says (the message in why).
 */
static int read_answer(struct shipper *sh, size_t lo, size_t hi, uint64_t *acc, uint64_t *dup,
		       char *why, size_t whylen)
{
	json_object *root = sh->resp.len ? json_tokener_parse(sh->resp.data) : NULL;
	json_object *a, *d, *r;
	size_t n = hi - lo, nrej = 0, nr;
	int rc = -1;

	if (!root || !json_object_object_get_ex(root, "accepted", &a) ||
	    !json_object_object_get_ex(root, "duplicates", &d) ||
	    !json_object_object_get_ex(root, "rejected", &r) ||
	    !json_object_is_type(a, json_type_int) || !json_object_is_type(d, json_type_int) ||
	    !json_object_is_type(r, json_type_array)) {
		snprintf(why, whylen, "server answered 200 without accepted/duplicates/rejected");
		goto out;
	}
	nr = json_object_array_length(r);
	for (size_t i = 0; i < nr; i++) {
		json_object *item = json_object_array_get_idx(r, i), *l, *e;
		int64_t line;
		struct entry *en;

		if (!json_object_object_get_ex(item, "line", &l) || !json_object_is_type(l, json_type_int) ||
		    (line = json_object_get_int64(l)) < 1 || (uint64_t)line > n) {
			snprintf(why, whylen, "server answered a rejection without a line of the batch");
			goto out;
		}
		en = &sh->q[lo + (size_t)line - 1];
		if (en->rejected)
			continue;
		en->rejected = strdup(json_object_object_get_ex(item, "error", &e) &&
				      json_object_is_type(e, json_type_string)
				      ? json_object_get_string(e) : "rejected (no reason given)");
		if (!en->rejected) {
			snprintf(why, whylen, "out of memory");
			goto out;
		}
		nrej++;
	}
	*acc = (uint64_t)json_object_get_int64(a);
	*dup = (uint64_t)json_object_get_int64(d);
	if (json_object_get_int64(a) < 0 || json_object_get_int64(d) < 0 || *acc + *dup + nrej != n) {
		snprintf(why, whylen,
			 "server's answer does not add up: %lld accepted + %lld duplicates + %zu rejected "
			 "for %zu streams", (long long)json_object_get_int64(a),
			 (long long)json_object_get_int64(d), nrej, n);
		goto out;
	}
	rc = 0;
out:
	json_object_put(root);
	return rc;
}

/* One POST of q[lo..hi) (already compressed in zbuf); why gets the reason of anything but DONE. */
static enum attempt attempt_send(struct shipper *sh, size_t lo, size_t hi, char *why, size_t whylen)
{
	int64_t t0 = util_now_mono_ns();
	uint64_t acc = 0, dup = 0;
	CURLcode cc;
	long status = 0;
	char msg[512];

	buf_reset(&sh->resp);
	sh->retry_after_ms = -1;
	sh->curl_err[0] = '\0';
	curl_easy_setopt(sh->curl, CURLOPT_POSTFIELDS, sh->zbuf.data);
	curl_easy_setopt(sh->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)sh->zbuf.len);
	cc = perform(sh);
	sh->c.requests++;
	if (cc == CURLE_OK)
		curl_easy_getinfo(sh->curl, CURLINFO_RESPONSE_CODE, &status);
	sh->last_status = status;
	log_debug("POST", "url=%s streams=%zu bytes=%zu status=%ld ms=%lld curl=\"%s\"", sh->url,
		  hi - lo, sh->zbuf.len, status, (long long)((util_now_mono_ns() - t0) / 1000000),
		  cc == CURLE_OK ? "" : curl_easy_strerror(cc));
	if (cc != CURLE_OK) {
		snprintf(why, whylen, "%s: %s", sh->url, sh->curl_err[0] ? sh->curl_err
			 : curl_easy_strerror(cc));
		return ATT_RETRY;
	}
	if (status == 200) {
		if (read_answer(sh, lo, hi, &acc, &dup, why, whylen) < 0)
			return ATT_FAIL;
		sh->c.accepted += acc;
		sh->c.duplicates += dup;
		return ATT_DONE;
	}
	answer_message(&sh->resp, msg, sizeof(msg));
	snprintf(why, whylen, "server answered %ld: %s", status, msg);
	if (status == 429 || status >= 500)
		return ATT_RETRY;
	if (status == 413)
		return ATT_SPLIT;
	if (status == 401)
		return ATT_STOP;
	return ATT_FAIL;
}

/* The entry was not delivered: drain leaves it in the spool, ship puts it there. */
static void undelivered(struct shipper *sh, struct entry *e, const char *why)
{
	char msg[1200];

	if (e->spool_id[0]) {
		sh->c.spooled++;
		report(sh, SHIP_EV_KEPT, e->origin, e->id, why);
		return;
	}
	if (!sh->spool_dir) {
		sh->c.lost++;
		report(sh, SHIP_EV_LOST, e->origin, e->id, why);
		return;
	}
	if (!sh->spool) {
		char err[512];

		sh->spool = spool_open(sh->spool_dir, sh->o.spool_max, 1, err, sizeof(err));
		if (!sh->spool) {
			snprintf(msg, sizeof(msg), "%s; and %s", why, err);
			sh->c.lost++;
			report(sh, SHIP_EV_LOST, e->origin, e->id, msg);
			return;
		}
	}
	if (spool_put(sh->spool, e->id, sh->batch.data + e->off, e->len) < 0) {
		snprintf(msg, sizeof(msg), "%s; and %s", why, spool_error(sh->spool));
		sh->c.lost++;
		report(sh, SHIP_EV_LOST, e->origin, e->id, msg);
		return;
	}
	sh->c.spooled++;
	report(sh, SHIP_EV_SPOOLED, e->origin, e->id, why);
}

static void rejected(struct shipper *sh, struct entry *e, const char *why)
{
	char msg[1200];

	sh->c.rejected++;
	if (e->spool_id[0] && spool_reject(sh->spool, e->spool_id, why) < 0) {
		snprintf(msg, sizeof(msg), "%s (and %s)", why, spool_error(sh->spool));
		report(sh, SHIP_EV_REJECTED, e->origin, e->id, msg);
		return;
	}
	report(sh, SHIP_EV_REJECTED, e->origin, e->id, why);
}

static int compress_range(struct shipper *sh, size_t lo, size_t hi)
{
	const char *src = sh->batch.data + sh->q[lo].off;
	size_t n = sh->q[hi - 1].off + sh->q[hi - 1].len + 1 - sh->q[lo].off;
	size_t bound = ZSTD_compressBound(n), z;

	buf_reset(&sh->zbuf);
	if (buf_reserve(&sh->zbuf, bound) < 0)
		return ship_fail(sh, SHIP_EFATAL, "out of memory compressing %zu bytes", n);
	z = ZSTD_compressCCtx(sh->cctx, sh->zbuf.data, bound, src, n, sh->o.zstd_level);
	if (ZSTD_isError(z))
		return ship_fail(sh, SHIP_EFATAL, "zstd: %s", ZSTD_getErrorName(z));
	sh->zbuf.len = z;
	return 0;
}

/* Deliver q[lo..hi): retries, splits on 413, and settles every entry
 * (acknowledged, rejected, or undelivered). */
static int send_range(struct shipper *sh, size_t lo, size_t hi)
{
	char why[1024];
	enum attempt at = ATT_FAIL;
	int rc;

	if (!sh->stopped && cancelled(sh)) {
		ship_fail(sh, 0, "interrupted");
		sh->stopped = true;
	}
	if (sh->stopped) {
		for (size_t i = lo; i < hi; i++)
			undelivered(sh, &sh->q[i], sh->err);
		return 0;
	}
	if ((rc = compress_range(sh, lo, hi)) < 0)
		return rc;
	for (int attempt = 1, tried = 1;; tried++) {
		uint64_t r = 0;
		int64_t delay;

		at = attempt_send(sh, lo, hi, why, sizeof(why));
		if (at != ATT_RETRY)
			break;
		/* another server of the list at once (not after a 429: slowing down is asked);
		 * a pause only when a round of the servers has failed */
		if (sh->nserver > 1 && sh->last_status != 429) {
			next_server(sh, why);
			if ((size_t)tried % sh->nserver != 0)
				continue;
		}
		if (attempt >= sh->o.max_attempts) {
			/* the servers are down or drowning: leave them alone for the rest of the run */
			if (sh->nserver > 1)
				ship_fail(sh, 0, "gave up after %d round%s of the %zu servers: %s", attempt,
					  attempt == 1 ? "" : "s", sh->nserver, why);
			else
				ship_fail(sh, 0, "gave up after %d attempt%s: %s", attempt,
					  attempt == 1 ? "" : "s", why);
			sh->stopped = true;
			break;
		}
		util_random(&r, sizeof(r));
		delay = ship_backoff_ms(attempt, sh->retry_after_ms, r);
		log_info("retrying", "attempt=%d delay_ms=%lld reason=\"%s\"", attempt + 1,
			 (long long)delay, why);
		sleep_ms(sh, delay);
		if (cancelled(sh)) {
			ship_fail(sh, 0, "interrupted");
			sh->stopped = true;
			break;
		}
		attempt++;
	}
	switch (at) {
	case ATT_DONE:
		for (size_t i = lo; i < hi; i++) {
			struct entry *e = &sh->q[i];

			if (e->rejected)
				rejected(sh, e, e->rejected);
			else if (e->spool_id[0] && spool_remove(sh->spool, e->spool_id) < 0)
				log_warn("delivered but still in the spool", "error=\"%s\"",
					 spool_error(sh->spool));
		}
		return 0;
	case ATT_SPLIT:
		if (hi - lo > 1) {
			size_t mid = lo + (hi - lo) / 2;

			if ((rc = send_range(sh, lo, mid)) < 0)
				return rc;
			return send_range(sh, mid, hi);
		}
		rejected(sh, &sh->q[lo], why);
		return 0;
	case ATT_STOP:
		ship_fail(sh, 0, "stopped: %s", why);
		sh->stopped = true;
		break;
	case ATT_RETRY:
	case ATT_FAIL:
		break;
	}
	for (size_t i = lo; i < hi; i++)
		undelivered(sh, &sh->q[i], sh->stopped ? sh->err : why);
	return 0;
}

int shipper_flush(struct shipper *sh)
{
	int rc = 0;

	if (sh->nq)
		rc = send_range(sh, 0, sh->nq);
	queue_reset(sh);
	return rc;
}

/* Every c in p[0 .. n) a blank: memchr's pace, as an NDJSON line has none */
static void blank_byte(char *p, size_t n, char c)
{
	char *end = p + n;

	while ((p = memchr(p, c, (size_t)(end - p))) != NULL)
		*p++ = ' ';
}

/* Appends the validated stream text as one NDJSON line and sends a full batch. */
static int enqueue(struct shipper *sh, const char *json, size_t len, const char *id,
		   const char *origin, const char *spool_id)
{
	struct entry *e;
	int rc;

	while (len && (*json == ' ' || *json == '\t' || *json == '\r' || *json == '\n'))
		json++, len--;
	while (len && (json[len - 1] == ' ' || json[len - 1] == '\t' || json[len - 1] == '\r' ||
		       json[len - 1] == '\n'))
		len--;
	if (sh->nq && sh->batch.len + len + 1 > sh->o.batch_bytes && (rc = shipper_flush(sh)) < 0)
		return rc;
	if (vec_reserve(&sh->q, &sh->capq, sh->nq + 1, sizeof(*sh->q)) < 0)
		return ship_fail(sh, SHIP_EFATAL, "out of memory");
	e = &sh->q[sh->nq];
	memset(e, 0, sizeof(*e));
	e->off = sh->batch.len;
	e->len = len;
	snprintf(e->id, sizeof(e->id), "%s", id);
	snprintf(e->spool_id, sizeof(e->spool_id), "%s", spool_id ? spool_id : "");
	if (!(e->origin = strdup(origin ? origin : "")) || buf_append(&sh->batch, json, len) < 0 ||
	    buf_putc(&sh->batch, '\n') < 0) {
		free(e->origin);
		sh->batch.len = e->off;
		return ship_fail(sh, SHIP_EFATAL, "out of memory");
	}
	sh->nq++;
	/* valid JSON has no raw line breaks inside strings, so blanking them keeps it intact */
	blank_byte(sh->batch.data + e->off, len, '\n');
	blank_byte(sh->batch.data + e->off, len, '\r');
	if (sh->nq >= sh->o.batch_count || sh->batch.len >= sh->o.batch_bytes)
		return shipper_flush(sh);
	return 0;
}

/* Validates json[0..len); on failure reports it and returns SHIP_ESTREAM. */
static int validate(struct shipper *sh, const char *json, size_t len, const char *origin,
		    struct wire_stream *s)
{
	int rc;

	arena_reset(sh->arena);
	rc = wire_parse(sh->parser, json, len, sh->arena, s);
	if (rc == WIRE_ENOMEM)
		return ship_fail(sh, SHIP_EFATAL, "out of memory validating a stream");
	if (rc != WIRE_OK) {
		sh->c.invalid++;
		report(sh, SHIP_EV_INVALID, origin, s->stream_id, wire_parser_error(sh->parser));
		return SHIP_ESTREAM;
	}
	return 0;
}

int shipper_add_json(struct shipper *sh, const char *json, size_t len, const char *origin)
{
	struct wire_stream s;
	char id[37];
	int rc = validate(sh, json, len, origin, &s);

	if (rc < 0)
		return rc;
	memcpy(id, s.stream_id, sizeof(id));
	if (sh->o.mark_baseline && s.role != WIRE_ROLE_BASELINE) {
		s.role = WIRE_ROLE_BASELINE;
		buf_reset(&sh->retext);
		if (wire_write_json(&s, &sh->retext) < 0) {
			sh->c.invalid++;
			report(sh, SHIP_EV_INVALID, origin, id, "stream text larger than the limit");
			return SHIP_ESTREAM;
		}
		return enqueue(sh, sh->retext.data, sh->retext.len, id, origin, NULL);
	}
	return enqueue(sh, json, len, id, origin, NULL);
}

int shipper_add_stream(struct shipper *sh, const struct wire_stream *s, const char *origin)
{
	buf_reset(&sh->text);
	if (wire_write_json(s, &sh->text) < 0) {
		sh->c.invalid++;
		report(sh, SHIP_EV_INVALID, origin, s->stream_id, "stream text larger than the limit");
		return SHIP_ESTREAM;
	}
	return shipper_add_json(sh, sh->text.data, sh->text.len, origin);
}

struct file_ctx {
	struct shipper *sh;
	const char *name;
};

static int add_text(void *ctx, const char *obj, size_t len, size_t line)
{
	struct file_ctx *fc = ctx;
	char origin[4200];
	int rc;

	snprintf(origin, sizeof(origin), "%s:%zu", fc->name, line);
	rc = shipper_add_json(fc->sh, obj, len, origin);
	return rc == SHIP_ESTREAM ? 0 : rc;
}

int shipper_add_file(struct shipper *sh, const char *path)
{
	struct file_ctx fc = { sh, strcmp(path, "-") == 0 ? "<stdin>" : path };
	struct ship_splitter *sp;
	char *chunk = NULL;
	int fd = 0, rc = 0;

	if (strcmp(path, "-") != 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return ship_fail(sh, SHIP_EINPUT, "%s: %s", path, strerror(errno));
	sp = ship_splitter_open(SHIP_MAX_STREAM_TEXT, add_text, &fc);
	chunk = malloc(READ_CHUNK);
	if (!sp || !chunk) {
		rc = ship_fail(sh, SHIP_EFATAL, "out of memory");
		goto out_free;
	}
	for (;;) {
		ssize_t n;

		if (cancelled(sh))
			break;
		n = read(fd, chunk, READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = ship_fail(sh, SHIP_EINPUT, "%s: read: %s", fc.name, strerror(errno));
			break;
		}
		rc = n ? ship_splitter_feed(sp, chunk, (size_t)n) : ship_splitter_finish(sp);
		if (rc == -1 && ship_splitter_error(sp)[0]) {
			/* one object too large: the rest cannot be split reliably */
			char msg[256];

			snprintf(msg, sizeof(msg), "%s; rest of the file skipped",
				 ship_splitter_error(sp));
			sh->c.invalid++;
			report(sh, SHIP_EV_INVALID, fc.name, "", msg);
			rc = 0;
			break;
		}
		if (rc || n == 0)
			break;
	}
out_free:
	free(chunk);
	ship_splitter_free(sp);
	if (fd > 0)
		close(fd);
	return rc;
}

int shipper_drain(struct shipper *sh)
{
	struct spool_entry *list = NULL;
	size_t n = 0, i;
	char err[512];
	int rc = 0;

	if (!sh->spool_dir)
		return ship_fail(sh, SHIP_EFATAL, "no spool directory given");
	if (!sh->spool) {
		if (access(sh->spool_dir, F_OK) < 0 && errno == ENOENT)
			return 0;  /* never spooled anything: nothing to do */
		sh->spool = spool_open(sh->spool_dir, sh->o.spool_max, 0, err, sizeof(err));
		if (!sh->spool)
			return ship_fail(sh, SHIP_EFATAL, "%s", err);
	}
	if ((rc = shipper_flush(sh)) < 0)
		return rc;
	if (spool_list(sh->spool, &list, &n) < 0)
		return ship_fail(sh, SHIP_EFATAL, "%s", spool_error(sh->spool));
	for (i = 0; i < n && !sh->stopped && !cancelled(sh); i++) {
		char origin[4200], id[37], *data = NULL;
		size_t len = 0;

		snprintf(origin, sizeof(origin), "%s/%s.json", sh->spool_dir, list[i].id);
		if (spool_read(sh->spool, list[i].id, SHIP_MAX_STREAM_TEXT, &data, &len) < 0) {
			if (errno == ENOENT)
				continue;  /* another drain took it */
			log_warn("cannot read a spooled stream", "error=\"%s\"", spool_error(sh->spool));
			sh->c.spooled++;
			continue;
		}
		{
			struct wire_stream ws;

			rc = validate(sh, data, len, origin, &ws);
			memcpy(id, ws.stream_id, sizeof(id));
		}
		if (rc == SHIP_ESTREAM) {
			/* cannot ever be delivered: out of the way, with the reason beside it */
			if (spool_reject(sh->spool, list[i].id, wire_parser_error(sh->parser)) < 0)
				log_warn("cannot move an invalid stream to rejected/", "error=\"%s\"",
					 spool_error(sh->spool));
			rc = 0;
		} else if (rc == 0) {
			rc = enqueue(sh, data, len, id, origin, list[i].id);
		}
		free(data);
		if (rc < 0)
			break;
	}
	if (rc == 0)
		rc = shipper_flush(sh);
	/* what the loop did not reach stays for the next drain */
	for (; i < n; i++)
		sh->c.spooled++;
	free(list);
	return rc;
}
