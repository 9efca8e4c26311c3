/*
 * stats: the few statistical tests the analysis needs (docs/analysis.md):
 * Fisher's exact test on a 2x2 table, one-sided for over-representation, and
 * the Benjamini-Hochberg adjustment for testing many values at once.
 */
#ifndef SM_STATS_H
#define SM_STATS_H
#include <stddef.h>
#include <stdint.h>

/*
 * The table            with   without
 *        group           a       b
 *        the others      c       d
 * P(A >= a) under the hypergeometric distribution with the margins fixed: how likely a
 * share of "with" in the group at least this large is when the group is drawn at random.
 * 1 when the group is empty.
 */
double stats_fisher_greater(uint64_t a, uint64_t b, uint64_t c, uint64_t d);

/* Benjamini-Hochberg: q[i], the adjusted p[i] of n tests (false discovery rate); q may be p. */
int stats_bh(const double *p, size_t n, double *q);

#endif
