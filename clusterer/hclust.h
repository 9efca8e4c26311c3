/*
 * hclust: agglomerative (hierarchical) clustering with average (UPGMA),
 * single and complete linkage, and the clustering of call-stack patterns
 * (docs/mining.md section 5, docs/clustering.md).
 *
 * Three layers:
 *   - hclust_linkage(): a condensed distance matrix -> the linkage in SciPy's
 *     format, merge for merge and tie for tie what
 *     scipy.cluster.hierarchy.linkage() returns (its algorithms: the
 *     nearest-neighbour chain for average and complete, Prim's minimum
 *     spanning tree for single; rows sorted by height, stable);
 *   - hclust_linkage_sparse(): the same from a list of pairs, every pair not
 *     listed being at distance 1, in memory proportional to the pairs: equal,
 *     row for row, to hclust_linkage() on the matrix with those 1s filled in;
 *   - hclust_patterns(): patterns -> clusters at a distance cut, with the
 *     pairs that cannot reach the cut pruned (an index from frames to
 *     patterns and a bound on Sim), Sim computed on all cores, and each
 *     cluster's medoid and common part.
 * hclust_fcluster() cuts a linkage as fcluster(Z, t, 'distance') does.
 */
#ifndef SM_HCLUST_H
#define SM_HCLUST_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

/* Largest number of points (cluster ids up to 2n - 2 must fit) */
#define HCLUST_MAX_POINTS (1u << 30)

enum hclust_method { HCLUST_AVERAGE, HCLUST_SINGLE, HCLUST_COMPLETE };

/* "average", "single", "complete". Returns 0 or -1. */
int hclust_method_parse(const char *s, enum hclust_method *out);
/* The name hclust_method_parse() accepts; "?" for a value outside the enum. */
const char *hclust_method_name(enum hclust_method m);

/* One row of a linkage: clusters a < b merged at height dist into a cluster of size points. Points are
 * clusters 0..n-1; the i-th row creates cluster n + i (SciPy's numbering). */
struct hclust_merge {
	uint32_t a, b;
	double dist;
	uint32_t size;
};

/* A pair of points and their distance, for the sparse entry point. */
struct hclust_pair {
	uint32_t i, j;
	double d;
};

struct hclust;  /* handle: the error message, the statistics and the result of the last call */

/* Returns a new handle, or NULL on out of memory. Caller frees with hclust_free(). */
struct hclust *hclust_open(void);
/* NULL-safe. */
void hclust_free(struct hclust *h);
/* The last error, "" if none. Owned by the handle. */
const char *hclust_error(const struct hclust *h);

/*
 * The linkage of n points from their condensed distance matrix dist (the
 * n(n-1)/2 distances d(i, j), i < j, row by row, all finite), into z[0..n-1).
 * dist is used as workspace: its contents are undefined afterwards. O(n^2)
 * time (the chain makes at most 3n nearest-neighbour scans of O(n) each), no
 * memory beyond O(n). Returns 0, or -1 with hclust_error() set (a distance not
 * finite, n > HCLUST_MAX_POINTS, out of memory).
 */
int hclust_linkage(struct hclust *h, double *dist, size_t n, enum hclust_method m, struct hclust_merge *z);

/*
 * The linkage of n points from pairs[0..npairs) (any order, each unordered pair
 * at most once, i != j, both < n, 0 <= d <= 1); every pair not listed is at
 * distance 1. Produces exactly what hclust_linkage() produces on the full
 * matrix, into z[0..n-1). Memory proportional to n + npairs. Returns 0, or -1
 * with hclust_error() set (a bad pair, a pair listed twice, out of memory).
 */
int hclust_linkage_sparse(struct hclust *h, const struct hclust_pair *pairs, size_t npairs, size_t n,
			  enum hclust_method m, struct hclust_merge *z);

/*
 * Flat clusters of the linkage z of n points at distance cut, as SciPy's
 * fcluster(z, cut, 'distance'): a cluster of the tree whose highest merge is
 * <= cut is one flat cluster. labels[i] gets the flat cluster of point i,
 * numbered 0, 1, ... in the order of their lowest point; *nclusters their
 * number. Returns 0, or -1 with hclust_error() set (z is not a valid linkage,
 * cut is NaN, out of memory).
 */
int hclust_fcluster(struct hclust *h, const struct hclust_merge *z, size_t n, double cut, uint32_t *labels,
		    size_t *nclusters);

/* ---- call-stack patterns ---- */

struct hclust_opts {
	enum hclust_method method;
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
	const struct hclust_merge *z;   /* npatterns - 1 rows: the whole linkage */
	const struct hclust_pair *pairs; /* the pairs the linkage saw (i < j, d = 1 - Sim < 1), by (i, j): those
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
 * the call runs sim_frames_prepare(ft). Returns 0, or -1 with hclust_error()
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
