/*
 * clusters: a cluster explained (common part, aligned members, breakdowns, top streams, flame
 * graph), a run's clusters in the API, a cluster's stacks, and the attribution of a cluster or a
 * problem to hosts, versions and configuration values, and what its cost depends on among numeric
 * labels (page sections and API).
 */
#ifndef SM_WEB_CLUSTERS_H
#define SM_WEB_CLUSTERS_H

#include "web/attribution.h"
#include "web/request.h"

/* GET /api/v1/runs/{id}/clusters */
void clusters_get_clusters(struct req *rq);
/* GET /api/v1/clusters/{id} */
void clusters_get_cluster(struct req *rq);
/* The matched stacks of a cluster with cost, frames resolved (for flame graphs). */
void clusters_get_cluster_stacks(struct req *rq);
/* GET /api/v1/clusters/{id}/attribution, /api/v1/problems/{id}/attribution: the first `limit`
 * values; the same shape for both, but for the id's key ("cluster_id", "problem_id"). */
void clusters_get_attribution(struct req *rq, enum attribution_of of, const char *id);
/* GET /api/v1/clusters/{id}/attribution */
void clusters_get_cluster_attribution(struct req *rq);
/* Where the cluster or problem happens: its most over-represented host, version or label values,
 * the first in words when it stands out (docs/analysis.md, "Attribution"). */
void clusters_attribution_section(struct req *rq, enum attribution_of of, const char *id);
/* What the cluster's or problem's cost depends on: its numeric labels that explain it, its modes
 * (docs/analysis.md, "What the cost depends on"); nothing under COSTMODEL_MIN_STREAMS streams. */
void clusters_costmodel_section(struct req *rq, enum attribution_of of, const char *id);
/* GET /clusters/{id} */
void clusters_page_cluster(struct req *rq);

#endif
