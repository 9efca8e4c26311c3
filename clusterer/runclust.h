/*
 * runclust: clusters the stored patterns of a mining run (mining.md sections 5
 * and 6) and stores the clusters: members, medoid, common part, the alignment
 * of every member with the medoid, the four metrics computed exactly over the
 * run's collapsed AOI stacks (each event once per cluster), and the ranks.
 * Frame weights use the database-wide statistics, folded first.
 */
#ifndef SM_RUNCLUST_H
#define SM_RUNCLUST_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "hclust.h"

struct runclust_opts {
	enum hclust_method method;
	double cut;
	int threads;          /* 0: one per core */
};

/* Replaces the run's clusters (one transaction) and sets counts.clusters.
 * Returns 0 with *nclusters, or -1 with the reason in err. */
int runclust_run(PGconn *db, int64_t run_id, const struct runclust_opts *o, size_t *nclusters,
		 char *err, size_t errlen);

#endif
