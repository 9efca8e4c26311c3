/*
 * linkage: agglomerative (hierarchical) clustering with average (UPGMA),
 * single and complete linkage, SciPy-compatible (docs/clustering.md):
 *   - linkage_dense(): a condensed distance matrix -> the linkage in SciPy's
 *     format, merge for merge and tie for tie what
 *     scipy.cluster.hierarchy.linkage() returns (its algorithms: the
 *     nearest-neighbour chain for average and complete, Prim's minimum
 *     spanning tree for single; rows sorted by height, stable);
 *   - linkage_sparse(): the same from a list of pairs, every pair not listed
 *     being at distance 1, in memory proportional to the pairs: equal, row for
 *     row, to linkage_dense() on the matrix with those 1s filled in;
 *   - linkage_fcluster() cuts a linkage as fcluster(Z, t, 'distance') does.
 * The clustering of call-stack patterns on top of it is hclust.h.
 */
#ifndef SM_LINKAGE_H
#define SM_LINKAGE_H

#include <stddef.h>
#include <stdint.h>

/* Largest number of points (cluster ids up to 2n - 2 must fit) */
#define LINKAGE_MAX_POINTS (1u << 30)

enum linkage_method { LINKAGE_AVERAGE, LINKAGE_SINGLE, LINKAGE_COMPLETE };

/* "average", "single", "complete". Returns 0 or -1. */
int linkage_method_parse(const char *s, enum linkage_method *out);
/* The name linkage_method_parse() accepts; "?" for a value outside the enum. */
const char *linkage_method_name(enum linkage_method m);

/* One row of a linkage: clusters a < b merged at height dist into a cluster of size points. Points are
 * clusters 0..n-1; the i-th row creates cluster n + i (SciPy's numbering). */
struct linkage_merge {
	uint32_t a, b;
	double dist;
	uint32_t size;
};

/* A pair of points and their distance, for the sparse entry point. */
struct linkage_pair {
	uint32_t i, j;
	double d;
};

struct linkage;  /* handle: the error message of the last call */

/* Returns a new handle, or NULL on out of memory. Caller frees with linkage_free(). */
struct linkage *linkage_open(void);
/* NULL-safe. */
void linkage_free(struct linkage *h);
/* The last error, "" if none. Owned by the handle. */
const char *linkage_error(const struct linkage *h);

/*
 * The linkage of n points from their condensed distance matrix dist (the
 * n(n-1)/2 distances d(i, j), i < j, row by row, all finite), into z[0..n-1).
 * dist is used as workspace: its contents are undefined afterwards. O(n^2)
 * time (the chain makes at most 3n nearest-neighbour scans of O(n) each), no
 * memory beyond O(n). Returns 0, or -1 with linkage_error() set (a distance not
 * finite, n > LINKAGE_MAX_POINTS, out of memory).
 */
int linkage_dense(struct linkage *h, double *dist, size_t n, enum linkage_method m, struct linkage_merge *z);

/*
 * The linkage of n points from pairs[0..npairs) (any order, each unordered pair
 * at most once, i != j, both < n, 0 <= d <= 1); every pair not listed is at
 * distance 1. Produces exactly what linkage_dense() produces on the full
 * matrix, into z[0..n-1). Memory proportional to n + npairs. Returns 0, or -1
 * with linkage_error() set (a bad pair, a pair listed twice, out of memory).
 */
int linkage_sparse(struct linkage *h, const struct linkage_pair *pairs, size_t npairs, size_t n,
			  enum linkage_method m, struct linkage_merge *z);

/*
 * Flat clusters of the linkage z of n points at distance cut, as SciPy's
 * fcluster(z, cut, 'distance'): a cluster of the tree whose highest merge is
 * <= cut is one flat cluster. labels[i] gets the flat cluster of point i,
 * numbered 0, 1, ... in the order of their lowest point; *nclusters their
 * number. Returns 0, or -1 with linkage_error() set (z is not a valid linkage,
 * cut is NaN, out of memory).
 */
int linkage_fcluster(struct linkage *h, const struct linkage_merge *z, size_t n, double cut, uint32_t *labels,
		    size_t *nclusters);

/* Union-find: the root of x, compressing the path (parent[r] == r at a root). */
uint32_t linkage_uf_find(uint32_t *parent, uint32_t x);

#endif
