/*
 * runs: mining runs: the list and the form that starts one, a run's page with its ranked
 * clusters, its deletion; GET/POST /api/v1/runs, GET/DELETE /api/v1/runs/{id}.
 */
#ifndef SM_WEB_RUNS_H
#define SM_WEB_RUNS_H

#include "web/request.h"

/* POST /api/v1/runs */
void runs_post_run(struct req *rq);
/* GET /api/v1/runs */
void runs_get_runs(struct req *rq);
/* GET /api/v1/runs/{id} */
void runs_get_run(struct req *rq);
/* DELETE /api/v1/runs/{id}: an admin's */
void runs_delete_run(struct req *rq);
/* A run's parameters in a few words (the runs' list, the run's page, the coverage form). */
void runs_run_params_summary(struct req *rq, const char *params_json);
/* GET /runs: the latest runs (?sort=), each with its worst problem */
void runs_page_runs(struct req *rq);
/* GET /runs/new: the form that starts a run (an analyst's) */
void runs_page_run_new(struct req *rq);
/* POST /runs/new: the run form without scripts; to the new run's page, or the form again with the error */
void runs_post_run_new(struct req *rq);
/* GET /runs/{id} */
void runs_page_run(struct req *rq);
/* POST /runs/{id}/delete: an admin's; back to the list */
void runs_post_run_delete(struct req *rq);

#endif
