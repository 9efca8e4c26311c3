/*
 * compare: two runs compared (docs/analysis.md): new, gone, grown and shrunk clusters, the page
 * with its differential flame graph, and GET /api/v1/runs/{a}/compare/{b}.
 */
#ifndef SM_WEB_COMPARE_H
#define SM_WEB_COMPARE_H

#include "web/request.h"

/* GET /api/v1/runs/{a}/compare/{b}: arg is b; a comes from the path. */
void compare_get_compare(struct req *rq);
/* GET /compare */
void compare_page_compare(struct req *rq);

#endif
