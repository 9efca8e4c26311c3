/*
 * streams: trace streams: the list with its filters, a stream's page (timeline, wait graph,
 * events), GET /api/v1/streams and /api/v1/streams/{id}.
 */
#ifndef SM_WEB_STREAMS_H
#define SM_WEB_STREAMS_H

#include <libpq-fe.h>
#include <stdint.h>

#include "web/request.h"

/* GET /api/v1/streams */
void streams_get_streams(struct req *rq);
/* The stream row of uuid (its canonical form into canon), or NULL after a 404/500 response. */
PGresult *streams_need_stream(struct req *rq, const char *uuid, char canon[37]);
/* GET /api/v1/streams/{name} */
void streams_get_stream(struct req *rq);
/* The span of a time range preset ("1h", "24h", "7d"; "all": 0) into *ns: 0, or -1 for another name. */
int streams_range_ns(const char *name, int64_t *ns);
/* A time of the page's range form into *ns (ns since the epoch): a datetime-local value
 * ("2026-11-29T14:00" or with seconds, fractions) read as UTC, an RFC 3339 time with its zone, or
 * nanoseconds since the epoch. 0, or -1 when it is none of them. */
int streams_parse_time(const char *s, int64_t *ns);
/* GET /streams */
void streams_page_streams(struct req *rq);
/* GET /streams/{name} */
void streams_page_stream(struct req *rq);

#endif
