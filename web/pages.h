/*
 * pages: the dashboard's HTML pages (docs/web.md).
 */
#ifndef SM_WEB_PAGES_H
#define SM_WEB_PAGES_H

#include "web/request.h"

/* Answers a request for a page: sets status, content type and body (or an error page). */
void pages_handle(struct req *rq);
/* The page when the database is down: 503 with Retry-After. */
void pages_unavailable(struct req *rq);

#endif
