/*
 * hclust: the clustering of call-stack patterns (docs/mining.md section 5,
 * docs/clustering.md): patterns -> clusters at a distance cut, with the pairs
 * that cannot reach the cut pruned (an index from frames to patterns and a
 * bound on Sim), Sim computed on all cores, the linkage of linkage.h over the
 * pairs kept, and each cluster's medoid and common part.
 */
#ifndef SM_HCLUST_H
#define SM_HCLUST_H

#include <stddef.h>
#include <stdint.h>

#include "clusterer/linkage.h"
#include "clusterer/sim.h"

struct hclust;  /* handle: the error message, the statistics and the result of the last call */

/* Returns a new handle, or NULL on out of memory. Caller frees with hclust_free(). */
struct hclust *hclust_open(void);
/* NULL-safe. */
void hclust_free(struct hclust *h);
/* The last error, "" if none. Owned by the handle. */
const char *hclust_error(const struct hclust *h);

struct hclust_opts {
	enum linkage_method method;
	double cut;             /* merge while the distance 1 - Sim is <= cut (default 0.5) */
	int threads;            /* 0: one per online CPU */
};

/* Clusters of patterns, owned by the handle, valid until its next hclust_patterns() call. */
struct hclust_clusters {
	size_t npatterns, nclusters;
	const uint32_t *label;          /* npatterns: the cluster of each pattern */
	const uint32_t *off;            /* nclusters + 1: a cluster's members are members[off[c] .. off[c + 1]) */
	const uint32_t *members;        /* pattern indexes, ascending in each cluster; clusters are numbered
					 * in the order of their lowest member */
	const uint32_t *medoid;         /* nclusters: the medoid's pattern index (sim_medoid()) */
	const uint32_t *common_off;     /* nclusters + 1 */
	const uint32_t *common;         /* positions in the medoid of its common part (sim_common_part()) */
	const struct linkage_merge *z;   /* npatterns - 1 rows: the whole linkage */
	const struct linkage_pair *pairs; /* the pairs the linkage saw (i < j, d = 1 - Sim < 1), by (i, j): those
					  * within the cut; for average linkage also those beyond it
					  * that share a frame inside one component (see below) */
	size_t npairs;
};

/*
 * Clusters p[0..n) (in ascending pattern-id order: ties go to the lower index)
 * by o->method with distance 1 - Sim (sim.h); the flat clusters at o->cut
 * are exactly those of the full distance matrix (ties between equal distances
 * aside). Pairs that share no frame are at distance 1 by definition. Single
 * and complete linkage need only the pairs with 1 - Sim <= cut (every other
 * pair counts as 1: no merge at or below the cut changes). Average linkage
 * (UPGMA) also keeps the exact distance of every pair beyond the cut that
 * shares a frame and whose patterns lie in one component of the graph of the
 * pairs within the cut: a merge at or below the cut joins two clusters with a
 * pair within the cut between them, so only those distances can change one.
 * Memory: the pairs within the cut, plus for average linkage the sharing pairs
 * inside components. The rows of z above the cut are those of the matrix with
 * every other pair at 1. Every frame of the patterns must be registered in ft;
 * the call runs sim_frames_prepare(ft). Returns 0, or -1 with linkage_error()
 * set.
 */
int hclust_patterns(struct hclust *h, struct sim_frames *ft, const struct sim_pattern *p, size_t n,
		    const struct hclust_opts *o, const struct hclust_clusters **out);

/* Figures of the last hclust_patterns() call. candidates: pairs sharing a frame found through the
 * index; bounded: those dropped by the bound on Sim; aligned: pairs whose Sim was computed (both
 * passes); kept: pairs within the cut; extended: pairs beyond the cut kept for average linkage,
 * extended_aligned: the alignments that took; medoid_aligned: alignments made for medoids and
 * common parts; ms: wall time of the phases. */
struct hclust_stats {
	uint64_t candidates, bounded, aligned, kept, extended, extended_aligned, medoid_aligned;
	double ms_prepare, ms_pairs, ms_linkage, ms_medoids;
	int threads;
};
void hclust_last_stats(const struct hclust *h, struct hclust_stats *st);

#endif
