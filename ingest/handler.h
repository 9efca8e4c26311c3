/*
 * handler: what POST /api/v1/streams does with a received body, apart from
 * HTTP: check the token, decompress (bounded), split NDJSON, parse and
 * validate each stream, store the valid ones in one transaction, and answer
 * with the JSON body of wire format v1. One handler per database worker.
 */
#ifndef SM_HANDLER_H
#define SM_HANDLER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/wire.h"

struct idcache;
struct auth_cache;

struct handler_limits {
	size_t max_body;           /* bytes as sent */
	size_t max_decoded;        /* bytes after decompression */
	size_t max_batch;          /* streams in one NDJSON body */
	int64_t profile_merge_ms;  /* a build's merged profile is made again at most this often */
	struct wire_limits wire;
};

struct handler_request {
	const char *body;
	size_t len;
	bool ndjson;               /* application/x-ndjson, else application/json */
	bool zstd;                 /* Content-Encoding: zstd */
	const char *authorization; /* header value or NULL */
	const char *query;         /* POST /api/v1/import: "key\0value\0" of each query argument */
	size_t query_len;
	const char *media;         /* POST /api/v1/import: the Content-Type ("" if none) */
};

struct handler_response {
	int status;
	int retry_after;           /* seconds; 0: no header */
	struct buf body;           /* JSON; owned by the caller (buf_release) */
	/* what happened, for metrics and logs */
	size_t accepted, duplicates, rejected, events;
	size_t decoded_bytes;
};

struct handler;

/* Opens the worker's database connection. `cache` and `auth` are shared, not owned.
 * Returns NULL with the reason in err. Caller frees. */
struct handler *handler_open(const char *conninfo, const struct handler_limits *lim,
			     struct idcache *cache, struct auth_cache *auth, char *err, size_t errlen);
void handler_free(struct handler *h);   /* NULL-safe */
/* Always fills *rs (status and body), whatever the input. */
void handler_process(struct handler *h, const struct handler_request *rq,
		     struct handler_response *rs);
/* Check a token (an Authorization header value) before any body is read: 0 when it may send
 * streams, else -1 with *rs filled (401, or 503 when the database cannot be asked). */
int handler_authorize(struct handler *h, const char *authorization, struct handler_response *rs);
/* POST /api/v1/import: a profile in another profiler's format (pprof, OTLP, bcc, perf,
 * folded; formats/formats.h), converted into streams and stored like POST /api/v1/streams'
 * (docs/api.md). */
void handler_import(struct handler *h, const struct handler_request *rq, struct handler_response *rs);
/* POST /api/v1/agents/report: a guard agent's report about itself, recorded (store_report()). */
void handler_report(struct handler *h, const struct handler_request *rq, struct handler_response *rs);
/* POST /api/v1/profiles: a training process's profile (ingest/profiles.h), stored. */
void handler_profile_put(struct handler *h, const struct handler_request *rq, struct handler_response *rs);
/* GET /api/v1/profiles/{build_id}: the build's merged profile (merged again when stale). */
void handler_profile_get(struct handler *h, const struct handler_request *rq, const char *build_id,
			 struct handler_response *rs);
/* Set a ready-made error answer: {"error": msg}. */
void handler_error(struct handler_response *rs, int status, const char *msg);
/* Partitions and retention; 0 or -1 with handler_last_error(). */
int handler_maintain(struct handler *h);
/* Fold pending frame statistics; how many deltas, or -1 with handler_last_error(). */
int handler_fold_stats(struct handler *h);
/* The shared id cache warmed with the newest frames and stacks (store_warm_cache()); 0 or -1 with
 * handler_last_error(). */
int handler_warm_cache(struct handler *h, size_t max_frames, size_t max_stacks, int64_t *frames, int64_t *stacks);
/* 0 when the database answers, else -1 with handler_last_error(). */
int handler_ping(struct handler *h);
const char *handler_last_error(const struct handler *h);
/* What the calls since the last call of this learnt of the database (store_db_seen()): 1 it
 * answered, -1 it did not (with the reason in handler_last_error()), 0 not asked. */
int handler_db_seen(struct handler *h);

/* After a request whose body was body_len bytes: a large (over 16 MiB, as sent or decoded)
 * body's buffer (or one grown past 32 MiB) and the request's arena released, and the memory given
 * back to the system (util_trim_after); a smaller one's kept for the next request. */
void handler_trim(struct handler *h, size_t body_len);

#endif
