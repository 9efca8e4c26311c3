/*
 * server: the HTTP side of sm-ingest on libmicrohttpd. One polling thread
 * receives requests into bounded buffers; complete bodies go through a
 * bounded queue to a fixed pool of database workers (one connection each);
 * a full queue or memory budget answers 503 with Retry-After. SIGTERM stops
 * accepting, lets what is in flight finish, and returns.
 */
#ifndef SM_SERVER_H
#define SM_SERVER_H

#include <stddef.h>

#include "ingest/handler.h"

struct ingest_config {
	const char *conninfo;       /* NULL: PG* environment */
	const char *listen;         /* "ADDR:PORT", "[ADDR6]:PORT"; port 0 picks a free one */
	const char *port_file;      /* write the bound port here once listening; NULL: don't */
	int workers;                /* database workers = pool size */
	int queue;                  /* complete requests waiting for a worker */
	int max_connections;        /* beyond these, the oldest idle or slowest give way (common/conns.h) */
	int max_per_ip;             /* connections from one address (IPv6: /64); 0: no limit */
	int header_timeout_s;       /* accept (or request line) to the end of the headers */
	int conn_timeout_s;         /* a kept-alive connection's wait for its next request */
	int min_body_rate;          /* body bytes a second, over each 10 s; 0: no minimum */
	size_t max_buffered;        /* request body bytes held in memory, all requests together */
	int auth_ttl_ms;
	int drain_timeout_s;        /* how long SIGTERM waits for requests in flight */
	int maintain_interval_s;    /* partitions and retention */
	int fold_interval_s;        /* frame statistics' deltas into the totals */
	size_t idcache_frames;      /* the shared id cache's frames and stacks (idcache.h) */
	size_t idcache_stacks;
	struct handler_limits lim;
};

void server_config_default(struct ingest_config *cfg);
/* Serve until SIGTERM or SIGINT. Returns 0 after a clean shutdown, or -1 when
 * the server could not start, with the reason logged. */
int server_run(const struct ingest_config *cfg);

#endif
