/*
 * streams: trace streams: the list with its filters, a stream's page (timeline, wait graph,
 * events), GET /api/v1/streams and /api/v1/streams/{id}.
 */
#ifndef SM_WEB_STREAMS_H
#define SM_WEB_STREAMS_H

#include <libpq-fe.h>

#include "web/request.h"

/* GET /api/v1/streams */
void streams_get_streams(struct req *rq);
/* The stream row of uuid (its canonical form into canon), or NULL after a 404/500 response. */
PGresult *streams_need_stream(struct req *rq, const char *uuid, char canon[37]);
/* GET /api/v1/streams/{name} */
void streams_get_stream(struct req *rq);
/* GET /streams */
void streams_page_streams(struct req *rq);
/* GET /streams/{name} */
void streams_page_stream(struct req *rq);

#endif
