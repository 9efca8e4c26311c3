/*
 * costmodel: what a cluster's cost depends on, after the probabilistic
 * performance annotations of Rogora et al. (EuroSys 2020; docs/analysis.md,
 * "What the cost depends on"). Given each stream's cost and one numeric
 * feature (a label such as unit.calls), a least-squares line and a small
 * regression tree (CART, depth <= 3) are fitted, checked by 5-fold cross-validation,
 * and the better explanation kept: a slope ("800 µs per call") or the tree's
 * steps ("cost jumps from 3 ms to 45 ms above unit.calls 4,096"). Without a
 * feature, Gaussian mixtures of log(cost) with 1 to 3 components (EM, chosen
 * by BIC) tell multi-modal cost ("two modes: 3 ms (80 %) and 45 ms (20 %)").
 * Pure computation: no database, every loop bounded.
 */
#ifndef SM_COSTMODEL_H
#define SM_COSTMODEL_H
#include <stddef.h>

#include "common/buf.h"

/* Streams read at most; above, a deterministic stride sample of them. */
#define COSTMODEL_MAX_ROWS 2000
/* Fewer streams (with the feature) than this: nothing is said. */
#define COSTMODEL_MIN_STREAMS 20
/* A fit explains a "meaningful share" of the cost's variance at this R^2, in and out of sample
 * (out of sample: each stream predicted by the models fitted without its fold, of COSTMODEL_FOLDS). */
#define COSTMODEL_MIN_R2 0.5
#define COSTMODEL_FOLDS 5
/* The line is preferred unless the tree's R^2 is above the line's by more than this. */
#define COSTMODEL_LINE_SLACK 0.05
/* Tree: depth, smallest leaf (also at least n / 20), a split must remove this share of the variance. */
#define COSTMODEL_TREE_DEPTH 3
#define COSTMODEL_MAX_LEAVES 8
#define COSTMODEL_MIN_LEAF 5
#define COSTMODEL_MIN_GAIN 0.02
/* Mixtures: components tried, EM iterations at most, a mixture's BIC must beat one Gaussian's by
 * this much, each mode's weight at least this, adjacent modes apart by Ashman's D above this, and
 * the streams near the mixture's low point between two modes at most this share of those as near
 * either mode (a dip in the data, not only in the model). */
#define COSTMODEL_MAX_MODES 3
#define COSTMODEL_EM_ITER 500
#define COSTMODEL_BIC_MARGIN 10.0
#define COSTMODEL_MIN_WEIGHT 0.05
#define COSTMODEL_MIN_D 2.0
#define COSTMODEL_MAX_DIP 0.5

enum costmodel_form {
	COSTMODEL_NONE,     /* explains too little, too few streams or values */
	COSTMODEL_LINEAR,   /* cost = intercept + slope * x */
	COSTMODEL_STEPS,    /* the tree's leaves */
};

/* A leaf: the streams with x in (above, up_to]; the first has no lower bound, the last no upper. */
struct costmodel_leaf {
	double above, up_to;   /* -inf, +inf at the ends */
	double cost_ns;        /* its streams' mean cost */
	size_t n;
	double cut;            /* where predictions pass to the next leaf: midway to its first value */
	size_t end;            /* past its last stream, in the fitted streams sorted by x */
};

struct costmodel_fit {
	enum costmodel_form form;
	size_t n, distinct;              /* streams used, distinct feature values */
	double r2_linear, r2_tree;       /* on all the streams */
	double r2_linear_holdout, r2_tree_holdout;   /* out of fold: 1 - (sum of squared errors of each
						      * stream predicted without its fold) / SST */
	double intercept_ns, slope_ns;   /* the line on all the streams */
	struct costmodel_leaf leaf[COSTMODEL_MAX_LEAVES];   /* the tree on all the streams, by x */
	size_t nleaves;
};

struct costmodel_mode {
	double cost_ns;   /* the component's centre: exp of its mean log cost (its median) */
	double weight;    /* its share of the streams */
	double sigma;     /* its spread, in log(ns) */
};

struct costmodel_modes {
	size_t n;                            /* streams used (cost > 0) */
	size_t k;                            /* modes reported: 1 (unimodal, or not told apart) to 3; 0:
					      * fewer than COSTMODEL_MIN_STREAMS streams */
	double bic[COSTMODEL_MAX_MODES];     /* of the mixture of 1, 2, 3 components; NaN: not fitted */
	struct costmodel_mode mode[COSTMODEL_MAX_MODES];   /* k of them, by cost; k = 1: the single Gaussian */
};

/* Relate cost_ns[i] to x[i] (n streams; non-finite x are left out). Returns 0 (out->form says
 * whether anything is worth saying), or -1 out of memory. */
int costmodel_fit(const double *x, const double *cost_ns, size_t n, struct costmodel_fit *out);

/* The modes of cost_ns (n streams; costs <= 0 are left out). Returns 0, or -1 out of memory. */
int costmodel_modes(const double *cost_ns, size_t n, struct costmodel_modes *out);

/* The fit of feature key in words, appended to out: "cost grows with unit.calls: 800 µs per call,
 * R^2 0.91", "cost jumps from 3 ms to 45 ms above size 4,096, R^2 0.95". A key ending in _ns has
 * its values written as durations, others as numbers (whole ones with thousands separators).
 * Nothing for COSTMODEL_NONE. */
void costmodel_fit_words(const char *key, const struct costmodel_fit *f, struct buf *out);

/* "two modes: 3 ms (80 %) and 45 ms (20 %)"; nothing when m->k < 2. */
void costmodel_modes_words(const struct costmodel_modes *m, struct buf *out);

#endif
