/*
 * symbols: debug files uploaded for symbolization (docs/symbols.md): POST and GET
 * /api/v1/debuginfo.
 */
#ifndef SM_WEB_SYMBOLS_H
#define SM_WEB_SYMBOLS_H

#include "web/request.h"

/* POST /api/v1/debuginfo: the body is one ELF debug file; its symbols name the frames of its build. */
void symbols_post_debuginfo(struct req *rq);
/* GET /api/v1/debuginfo[?missing=1]: build ids known, most unnamed frames first. */
void symbols_get_debuginfo(struct req *rq);

#endif
