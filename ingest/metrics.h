/*
 * metrics: the ingest server's counters, gauges and latency histogram, kept
 * with atomics (no lock on the request path) and rendered in the Prometheus
 * text exposition format for GET /metrics.
 */
#ifndef SM_METRICS_H
#define SM_METRICS_H

#include <stdint.h>

#include "common/buf.h"

enum metric_reason {
	REASON_NOT_JSON,
	REASON_INVALID,
	REASON_TOO_LARGE,
	REASON_UNSUPPORTED_MEDIA,
	REASON_UNAUTHORIZED,
	REASON_OVERLOADED,
	REASON_BAD_ENCODING,
	REASON_DB_ERROR,
	REASON_NOT_FOUND,
	REASON_SERVER_ERROR,
	REASON_COUNT
};

enum metric_gauge { GAUGE_QUEUE_DEPTH, GAUGE_INFLIGHT, GAUGE_BUFFERED_BYTES, GAUGE_DB_UP, GAUGE_COUNT };

void metrics_request(int status, int64_t duration_ns);
void metrics_reject(enum metric_reason r, uint64_t n);
void metrics_streams(uint64_t accepted, uint64_t duplicates, uint64_t events);
void metrics_bytes(uint64_t wire, uint64_t decoded);
void metrics_gauge_add(enum metric_gauge g, int64_t delta);
void metrics_gauge_set(enum metric_gauge g, int64_t v);
int64_t metrics_gauge_get(enum metric_gauge g);
/* Static facts printed as gauges (queue capacity, workers). */
void metrics_set_capacity(int64_t queue_capacity, int64_t workers);
/* Append the whole exposition. Returns 0 or -1 (buffer full). */
int metrics_render(struct buf *out);

#endif
