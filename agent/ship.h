/*
 * ship: delivery of trace streams to the ingest server (wire format v1).
 *
 * A shipper validates each stream locally, collects them into NDJSON
 * batches (by count and by uncompressed size), compresses each batch with
 * zstd and POSTs it over one kept-alive libcurl handle. Network errors,
 * timeouts, 429 and 5xx are retried with capped exponential backoff and full
 * jitter, honouring Retry-After; a 413 on a batch of several streams splits
 * it in halves. What still cannot be delivered goes to the spool (spool.h),
 * and shipper_drain() sends the spool again later. Streams the server
 * rejects are reported, never retried.
 *
 * Once a batch has used up its attempts, the server refused the token, or
 * the caller cancelled, the shipper stops talking to the server for the rest
 * of its life: later streams go straight to the spool instead of each
 * waiting out the retries.
 */
#ifndef SM_SHIP_H
#define SM_SHIP_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/wire.h"

#define SHIP_BACKOFF_BASE_MS 200
#define SHIP_BACKOFF_CAP_MS 30000
#define SHIP_DEFAULT_ATTEMPTS 6
#define SHIP_DEFAULT_BATCH 16
#define SHIP_DEFAULT_BATCH_BYTES ((size_t)4 << 20)
#define SHIP_DEFAULT_TIMEOUT_S 30
#define SHIP_MAX_STREAM_TEXT ((size_t)256 << 20)  /* one stream's JSON, as read */
#define SHIP_CANCEL_POLL_MS 20    /* a transfer in flight notices a cancel this soon */

/* What happened to one stream, for the report callback. */
enum ship_event {
	SHIP_EV_INVALID,   /* failed local validation; not sent */
	SHIP_EV_REJECTED,  /* the server refused it (its message); not retried */
	SHIP_EV_SPOOLED,   /* not delivered; kept in the spool for a later drain */
	SHIP_EV_KEPT,      /* drain: not delivered; left in the spool */
	SHIP_EV_LOST,      /* not delivered and could not be spooled */
};

/*
 * origin is "FILE:LINE" (or what the caller passed), stream_id may be "" when
 * unknown, msg says why. All three are valid only during the call.
 */
typedef void ship_report_fn(void *ctx, enum ship_event ev, const char *origin,
			    const char *stream_id, const char *msg);

struct ship_opts {
	const char *url;          /* server base URL, or several separated by commas (tried in turn
				   * when one cannot be reached or answers 5xx); "/api/v1/streams"
				   * is appended */
	const char *token;        /* bearer token, or NULL */
	const char *spool_dir;    /* NULL: undeliverable streams are lost (and reported) */
	uint64_t spool_max;       /* bytes */
	int max_attempts;         /* per batch, first try included (>= 1) */
	long timeout_s;           /* whole request, connection included */
	long timeout_ms;          /* when above 0, the whole request in milliseconds instead */
	size_t batch_count;       /* streams per request */
	size_t batch_bytes;       /* uncompressed NDJSON bytes per request (a larger stream goes alone) */
	int zstd_level;
	ship_report_fn *report;   /* NULL: log a warning line per event */
	void *report_ctx;
	/*
	 * When set, every socket the shipper opens comes from open_socket (domain,
	 * type, protocol as for socket(2); returns the descriptor or -1) and is
	 * closed through close_socket. The guard agent places its sockets out of
	 * the way of the program it lives in and registers them.
	 */
	int (*open_socket)(void *ctx, int domain, int type, int protocol);
	void (*close_socket)(void *ctx, int fd);
	void *socket_ctx;
	/* When set and *cancel becomes non-zero (a signal handler, another thread), the shipper
	 * stops waiting and sending within SHIP_CANCEL_POLL_MS: what is queued and what comes later is
	 * spooled. */
	const volatile sig_atomic_t *cancel;
	/* Every stream added is sent with "role": "baseline" (a normal unit, docs/analysis.md). */
	int mark_baseline;
};

/* Fills *o with the defaults above (no url, token or spool). */
void ship_opts_init(struct ship_opts *o);

struct ship_counters {
	uint64_t accepted;    /* stored by the server */
	uint64_t duplicates;  /* the server had them already: delivered too */
	uint64_t rejected;    /* refused by the server */
	uint64_t invalid;     /* failed local validation */
	uint64_t spooled;     /* written to the spool (ship) or left there (drain) */
	uint64_t lost;        /* neither delivered nor spooled */
	uint64_t requests;    /* HTTP requests made, retries included */
	uint64_t failovers;   /* switches to the next server of the list */
};

struct shipper;

/* Returns a shipper (it copies the strings of *o), or NULL with the reason in
 * err (bad URL, out of memory). Caller frees with shipper_free(). */
struct shipper *shipper_open(const struct ship_opts *o, char *err, size_t errlen);
/* Flushes nothing: call shipper_flush() first. NULL-safe. */
void shipper_free(struct shipper *sh);
const char *shipper_error(const struct shipper *sh);
/* The whole of each later request, connection included, in milliseconds. */
void shipper_set_timeout_ms(struct shipper *sh, long ms);
const struct ship_counters *shipper_counters(const struct shipper *sh);
/*
 * Non-zero once the shipper stopped talking to the server (token refused,
 * a batch used up its attempts, cancelled); shipper_error() says why.
 */
int shipper_stopped(const struct shipper *sh);
/*
 * One POST of the JSON document json[0..len) to the server's URL + path (e.g.
 * "/api/v1/agents/report") on the same connection, once, no retry: for
 * what is sent again later anyway. 0 on a 200 (its body appended to answer unless NULL), else -1
 * with the reason in err.
 */
int shipper_post_json(struct shipper *sh, const char *path, const char *json, size_t len, struct buf *answer,
		      char *err, size_t errlen);
/* One GET of the server's URL + path; the body (at most max bytes) appended to out. 0 on a 200,
 * else -1 with *status (0 when no answer came) and the reason in err. */
int shipper_get(struct shipper *sh, const char *path, size_t max, struct buf *out, long *status, char *err,
		size_t errlen);

/*
 * Return codes of the calls below. A stream that cannot be delivered is not
 * an error of the call: it is reported, counted and spooled.
 */
enum ship_result {
	SHIP_OK = 0,
	SHIP_ESTREAM = -1,   /* this stream was not queued (invalid); the report callback has why */
	SHIP_EFATAL = -2,    /* out of memory: shipper_error() */
	SHIP_EINPUT = -3,    /* shipper_add_file(): the file cannot be opened or read */
};

/*
 * Queue one stream (serialized, then validated like any other). origin names
 * it in reports (may be NULL). Sends a batch when one is full.
 */
int shipper_add_stream(struct shipper *sh, const struct wire_stream *s, const char *origin);
/* Queue one stream object json[0..len) after validating it with wire_parse(). */
int shipper_add_json(struct shipper *sh, const char *json, size_t len, const char *origin);
/*
 * Read FILE ("-": standard input): one stream object (pretty-printed or not),
 * several objects one after the other, or NDJSON, and queue each stream. A
 * stream that is not valid is reported as "FILE:LINE" and skipped. When
 * cancelled, it stops reading (the rest of the file is not queued).
 */
int shipper_add_file(struct shipper *sh, const char *path);
/* Send what is queued. */
int shipper_flush(struct shipper *sh);
/*
 * Send every stream of the spool; a file is removed only once the server has
 * acknowledged its stream (accepted or duplicate); rejected ones move to
 * rejected/. Stops early, leaving the rest, when the server cannot be reached.
 */
int shipper_drain(struct shipper *sh);

/* ---- Pure helpers, exposed for the tests. ---- */

/*
 * Milliseconds to wait after failed attempt `attempt` (1 = the first try):
 * full jitter over [0, min(cap, base * 2^(attempt-1))], drawn from `random`;
 * when the server sent Retry-After (retry_after_ms >= 0), that much more,
 * the whole capped at SHIP_BACKOFF_CAP_MS.
 */
int64_t ship_backoff_ms(int attempt, int64_t retry_after_ms, uint64_t random);
/*
 * A Retry-After header value in milliseconds: delay-seconds (capped at
 * SHIP_BACKOFF_CAP_MS); an HTTP date counts as the cap. -1 when it is neither.
 */
int64_t ship_retry_after_ms(const char *value);

/*
 * Split text[0..len) into stream objects as shipper_add_file() does: NDJSON
 * when the first object ends on its own line (then every non-blank line is
 * one object), else objects that may span lines, cut where the brackets
 * balance. fn gets each object and the 1-based line it starts on; a non-zero
 * return stops the walk and is returned.
 */
typedef int ship_text_fn(void *ctx, const char *obj, size_t len, size_t line);

struct ship_splitter;

/* Caller frees with ship_splitter_free(). NULL when out of memory. */
struct ship_splitter *ship_splitter_open(size_t max_object, ship_text_fn *fn, void *ctx);
void ship_splitter_free(struct ship_splitter *sp);
/*
 * Feed the next bytes of the input; objects are handed to fn as they
 * complete. Returns 0, fn's non-zero return, or -1 when one object is
 * longer than max_object (the error is in ship_splitter_error()).
 */
int ship_splitter_feed(struct ship_splitter *sp, const char *p, size_t n);
/* End of input: hands over a last unterminated object. */
int ship_splitter_finish(struct ship_splitter *sp);
const char *ship_splitter_error(const struct ship_splitter *sp);

#endif
