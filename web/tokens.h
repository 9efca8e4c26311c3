/*
 * tokens: API tokens, an admin's: the Tokens page and its forms (new, revoke), and
 * GET/POST /api/v1/tokens, DELETE /api/v1/tokens/{id}.
 */
#ifndef SM_WEB_TOKENS_H
#define SM_WEB_TOKENS_H

#include "web/request.h"

/* GET /api/v1/tokens */
void tokens_get_tokens(struct req *rq);
/* POST /api/v1/tokens */
void tokens_post_token(struct req *rq);
/* DELETE /api/v1/tokens/{id} */
void tokens_delete_token(struct req *rq);
/* GET /tokens */
void tokens_page_tokens(struct req *rq);
/* POST /tokens/new */
void tokens_post_token_new(struct req *rq);
/* POST /tokens/{id}/revoke */
void tokens_post_token_revoke(struct req *rq);

#endif
