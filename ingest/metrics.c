/* metrics: lock-free counters rendered for Prometheus (see metrics.h). */
#include "ingest/metrics.h"

#include <stdatomic.h>

static const int status_codes[] = { 200, 400, 401, 404, 405, 413, 415, 429, 500, 503 };
#define NSTATUS (sizeof(status_codes) / sizeof(status_codes[0]))

static const char *const reason_names[REASON_COUNT] = {
	"not_json", "invalid", "too_large", "unsupported_media", "unauthorized",
	"overloaded", "bad_encoding", "db_error", "not_found", "server_error",
};

/* upper bounds in seconds; the last bucket is +Inf */
static const double bucket_le[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };
#define NBUCKETS (sizeof(bucket_le) / sizeof(bucket_le[0]))

static _Atomic uint64_t requests[NSTATUS + 1]; /* last: other codes */
static _Atomic uint64_t rejections[REASON_COUNT];
static _Atomic uint64_t streams_accepted, streams_duplicate, events_stored;
static _Atomic uint64_t bytes_wire, bytes_decoded;
static _Atomic uint64_t hist[NBUCKETS + 1];
static _Atomic uint64_t hist_count, hist_sum_ns;
static _Atomic int64_t gauges[GAUGE_COUNT];
static int64_t cap_queue, cap_workers;

void metrics_request(int status, int64_t duration_ns)
{
	size_t i, b;

	for (i = 0; i < NSTATUS && status_codes[i] != status; i++)
		;
	atomic_fetch_add_explicit(&requests[i], 1, memory_order_relaxed);
	for (b = 0; b < NBUCKETS && (double)duration_ns / 1e9 > bucket_le[b]; b++)
		;
	atomic_fetch_add_explicit(&hist[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&hist_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&hist_sum_ns, (uint64_t)(duration_ns > 0 ? duration_ns : 0),
				  memory_order_relaxed);
}

void metrics_reject(enum metric_reason r, uint64_t n)
{
	atomic_fetch_add_explicit(&rejections[r], n, memory_order_relaxed);
}

void metrics_streams(uint64_t accepted, uint64_t duplicates, uint64_t events)
{
	atomic_fetch_add_explicit(&streams_accepted, accepted, memory_order_relaxed);
	atomic_fetch_add_explicit(&streams_duplicate, duplicates, memory_order_relaxed);
	atomic_fetch_add_explicit(&events_stored, events, memory_order_relaxed);
}

void metrics_bytes(uint64_t wire, uint64_t decoded)
{
	atomic_fetch_add_explicit(&bytes_wire, wire, memory_order_relaxed);
	atomic_fetch_add_explicit(&bytes_decoded, decoded, memory_order_relaxed);
}

void metrics_gauge_add(enum metric_gauge g, int64_t delta)
{
	atomic_fetch_add_explicit(&gauges[g], delta, memory_order_relaxed);
}

void metrics_gauge_set(enum metric_gauge g, int64_t v)
{
	atomic_store_explicit(&gauges[g], v, memory_order_relaxed);
}

int64_t metrics_gauge_get(enum metric_gauge g)
{
	return atomic_load_explicit(&gauges[g], memory_order_relaxed);
}

void metrics_set_capacity(int64_t queue_capacity, int64_t workers)
{
	cap_queue = queue_capacity;
	cap_workers = workers;
}

static uint64_t ld(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_relaxed);
}

int metrics_render(struct buf *b)
{
	int rc = 0;
	uint64_t cum = 0;

	rc |= buf_puts(b, "# HELP sm_ingest_requests_total HTTP requests answered, by status code.\n"
			  "# TYPE sm_ingest_requests_total counter\n");
	for (size_t i = 0; i < NSTATUS; i++)
		rc |= buf_printf(b, "sm_ingest_requests_total{code=\"%d\"} %llu\n", status_codes[i],
				 (unsigned long long)ld(&requests[i]));
	rc |= buf_printf(b, "sm_ingest_requests_total{code=\"other\"} %llu\n",
			 (unsigned long long)ld(&requests[NSTATUS]));
	rc |= buf_printf(b,
		"# HELP sm_ingest_streams_total Trace streams received, by outcome.\n"
		"# TYPE sm_ingest_streams_total counter\n"
		"sm_ingest_streams_total{result=\"accepted\"} %llu\n"
		"sm_ingest_streams_total{result=\"duplicate\"} %llu\n"
		"sm_ingest_streams_total{result=\"rejected\"} %llu\n"
		"# HELP sm_ingest_events_stored_total Events stored.\n"
		"# TYPE sm_ingest_events_stored_total counter\n"
		"sm_ingest_events_stored_total %llu\n"
		"# HELP sm_ingest_bytes_in_total Request body bytes as sent and after decompression.\n"
		"# TYPE sm_ingest_bytes_in_total counter\n"
		"sm_ingest_bytes_in_total{stage=\"wire\"} %llu\n"
		"sm_ingest_bytes_in_total{stage=\"decoded\"} %llu\n",
		(unsigned long long)ld(&streams_accepted), (unsigned long long)ld(&streams_duplicate),
		(unsigned long long)(ld(&rejections[REASON_INVALID]) + ld(&rejections[REASON_NOT_JSON])),
		(unsigned long long)ld(&events_stored), (unsigned long long)ld(&bytes_wire),
		(unsigned long long)ld(&bytes_decoded));
	rc |= buf_puts(b, "# HELP sm_ingest_rejections_total Requests or streams refused, by reason.\n"
			  "# TYPE sm_ingest_rejections_total counter\n");
	for (int i = 0; i < REASON_COUNT; i++)
		rc |= buf_printf(b, "sm_ingest_rejections_total{reason=\"%s\"} %llu\n", reason_names[i],
				 (unsigned long long)ld(&rejections[i]));
	rc |= buf_puts(b, "# HELP sm_ingest_request_duration_seconds Time from request start to answer.\n"
			  "# TYPE sm_ingest_request_duration_seconds histogram\n");
	for (size_t i = 0; i <= NBUCKETS; i++) {
		cum += ld(&hist[i]);
		if (i < NBUCKETS)
			rc |= buf_printf(b, "sm_ingest_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
					 bucket_le[i], (unsigned long long)cum);
		else
			rc |= buf_printf(b, "sm_ingest_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
					 (unsigned long long)cum);
	}
	rc |= buf_printf(b,
		"sm_ingest_request_duration_seconds_sum %.6f\n"
		"sm_ingest_request_duration_seconds_count %llu\n"
		"# HELP sm_ingest_queue_depth Requests waiting for a database worker.\n"
		"# TYPE sm_ingest_queue_depth gauge\n"
		"sm_ingest_queue_depth %lld\n"
		"# HELP sm_ingest_queue_capacity Requests the queue holds before answering 503.\n"
		"# TYPE sm_ingest_queue_capacity gauge\n"
		"sm_ingest_queue_capacity %lld\n"
		"# HELP sm_ingest_workers Database workers (one connection each).\n"
		"# TYPE sm_ingest_workers gauge\n"
		"sm_ingest_workers %lld\n"
		"# HELP sm_ingest_inflight_requests Requests being received, queued or processed.\n"
		"# TYPE sm_ingest_inflight_requests gauge\n"
		"sm_ingest_inflight_requests %lld\n"
		"# HELP sm_ingest_buffered_bytes Request body bytes held in memory.\n"
		"# TYPE sm_ingest_buffered_bytes gauge\n"
		"sm_ingest_buffered_bytes %lld\n"
		"# HELP sm_ingest_db_up 1 when the last database check succeeded.\n"
		"# TYPE sm_ingest_db_up gauge\n"
		"sm_ingest_db_up %lld\n",
		(double)ld(&hist_sum_ns) / 1e9, (unsigned long long)ld(&hist_count),
		(long long)metrics_gauge_get(GAUGE_QUEUE_DEPTH), (long long)cap_queue,
		(long long)cap_workers, (long long)metrics_gauge_get(GAUGE_INFLIGHT),
		(long long)metrics_gauge_get(GAUGE_BUFFERED_BYTES),
		(long long)metrics_gauge_get(GAUGE_DB_UP));
	return rc ? -1 : 0;
}
