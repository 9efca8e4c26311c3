/*
 * conns: what keeps sm-ingest and sm-web answering under connection floods and
 * slow clients. It sits between libmicrohttpd and the server's request handler
 * and follows every connection through its phases:
 *
 *   head  accepted (or a later request's line seen), headers not complete yet
 *   body  headers complete, the body arriving
 *   held  the server's turn: in the handler, suspended, or sending the response
 *   idle  a kept-alive connection waiting for its next request
 *
 * and closes (shutdown(2), libmicrohttpd then cleans up) what misses a deadline:
 * the headers within header_timeout_s of the accept or of the request line,
 * the next request line within idle_timeout_s, the body at body_min_rate bytes
 * a second over every CONNS_BODY_WINDOW_S. These are absolute: a client that
 * trickles a byte now and then does not extend them, unlike libmicrohttpd's
 * own inactivity timeout.
 *
 * A thread of libmicrohttpd's that is running a handler serves none of its other connections
 * meanwhile: their clocks stop for that time and they never give way then, since their clients
 * may have sent everything. (sm-web's queries run in its request workers, the connection
 * suspended.)
 *
 * Admission: an address (an IPv4 address, an IPv6 /64) holds at most
 * max_per_ip connections; beyond max_connections in all, a new connection
 * makes the oldest idle, else the oldest one still sending its headers, else
 * the slowest body give way (never one the server is working on). When none
 * can, the new connection gets one of `reserve` extra places, where it may only
 * ask for reserved_paths (/healthz, /metrics); otherwise it is refused (closed).
 * Everything shed is counted by reason for the server's /metrics.
 */
#ifndef SM_CONNS_H
#define SM_CONNS_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define CONNS_BODY_WINDOW_S 10
#define CONNS_MAX 100000              /* --max-connections at most: every check scans them all */

struct conns_config {
	unsigned max_connections;     /* beyond these, others give way */
	unsigned reserve;             /* extra places for reserved_paths when none can give way */
	unsigned max_per_ip;          /* per IPv4 address or IPv6 /64; 0: no limit */
	unsigned header_timeout_s;    /* accept or request line to the end of the headers */
	unsigned idle_timeout_s;      /* a kept-alive connection's wait for its next request */
	unsigned body_min_rate;       /* bytes a second over each window; 0: no minimum */
	unsigned other_fds;           /* descriptors the process needs besides connections (database...) */
	const char *metrics_prefix;   /* "sm_ingest": names sm_ingest_connections_... */
	const char *const *reserved_paths;  /* NULL-terminated, exact paths */
};

enum conns_reason {
	CONNS_HEADER_TIMEOUT, CONNS_IDLE_TIMEOUT, CONNS_BODY_TOO_SLOW, CONNS_GAVE_WAY_FULL,
	CONNS_GAVE_WAY_PER_IP, CONNS_REFUSED_FULL, CONNS_REFUSED_PER_IP, CONNS_RESERVE_OTHER_PATH,
	CONNS_NREASONS
};

struct conns;

/* The guard around handler/done (libmicrohttpd's access handler and request-completed callback,
 * with their closures). Starts the thread that enforces the deadlines. NULL on failure with err.
 * Caller frees with conns_free() after MHD_stop_daemon(). */
struct conns *conns_open(const struct conns_config *cfg, MHD_AccessHandlerCallback handler, void *handler_cls,
			 MHD_RequestCompletedCallback done, void *done_cls, char *err, size_t errlen);
/* Stops the thread and frees; NULL is fine. The daemon must be stopped first. */
void conns_free(struct conns *c);

/* For MHD_start_daemon(): the access handler and its closure (c) to pass in place of the server's,
 * and the options (MHD_OPTION_ARRAY) that connect the rest: connection limit, completion,
 * connection and request-line notifications. opts must hold CONNS_NOPTIONS items. */
#define CONNS_NOPTIONS 6
enum MHD_Result conns_access(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
			     const char *version, const char *upload, size_t *upload_size, void **req_cls);
void conns_options(struct conns *c, struct MHD_OptionItem *opts);

/* Prometheus text of the limits and counters. Returns 0, or -1 when b failed (sticky). */
int conns_render(struct conns *c, struct buf *b);

#endif
