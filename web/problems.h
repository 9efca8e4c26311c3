/*
 * problems: a run's clusters grouped into problems (docs/mining.md, "Problems"): the section of
 * the run page, a problem's page, GET /api/v1/runs/{id}/problems and /api/v1/problems/{id}.
 */
#ifndef SM_WEB_PROBLEMS_H
#define SM_WEB_PROBLEMS_H

#include <libpq-fe.h>

#include "web/request.h"

/* GET /api/v1/runs/{id}/problems: the run's problems by rank, paged, with their clusters */
void problems_get_problems(struct req *rq);
/* GET /api/v1/problems/{id}: one problem, its clusters, costliest streams and hosts */
void problems_get_problem(struct req *rq);
/* GET /api/v1/problems/{id}/attribution */
void problems_get_problem_attribution(struct req *rq);
/* The run page's first section: its problems, the worst first (or why it has none). */
void problems_section(struct req *rq, const char *id, PGresult *run);
/* /problems/{id}: a problem, its clusters, hosts and costliest streams */
void problems_page_problem(struct req *rq);

#endif
