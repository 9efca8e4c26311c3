/*
 * signatures: performance signatures (mining.md section 7): the page with coverage and triage,
 * its forms (new, update, import), and their API: the signatures, export, import, a run's coverage
 * and triage. Statuses come from the signature module's error codes.
 */
#ifndef SM_WEB_SIGNATURES_H
#define SM_WEB_SIGNATURES_H

#include "web/request.h"

/* GET /api/v1/signatures */
void signatures_get_signatures(struct req *rq);
/* POST /api/v1/signatures */
void signatures_post_signature(struct req *rq);
/* GET /api/v1/signatures/{id} */
void signatures_get_signature(struct req *rq);
/* PATCH /api/v1/signatures/{id} */
void signatures_patch_signature(struct req *rq);
/* GET /api/v1/signatures/export */
void signatures_get_export(struct req *rq);
/* POST /api/v1/signatures/import */
void signatures_post_import(struct req *rq);
/* GET /api/v1/runs/{id}/coverage */
void signatures_get_coverage(struct req *rq);
/* GET /api/v1/runs/{id}/triage */
void signatures_get_triage(struct req *rq);
/* GET /signatures */
void signatures_page_signatures(struct req *rq);
/* POST /signatures/new */
void signatures_post_signature_new(struct req *rq);
/* POST /signatures/{id} */
void signatures_post_signature_update(struct req *rq);
/* POST /signatures/import */
void signatures_post_signature_import(struct req *rq);

#endif
