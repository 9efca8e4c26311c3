/*
 * api: the REST API under /api/v1/ (../shared/spec/rest.md, docs/api.md).
 */
#ifndef SM_WEB_API_H
#define SM_WEB_API_H

#include "web/request.h"

/* Answers a request under /api/: sets status, content type and body (or an error). */
void api_handle(struct req *rq);

#endif
