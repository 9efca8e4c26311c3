/*
 * compare: two mining runs side by side (two versions, two time windows, canary
 * and stable; docs/analysis.md, "Comparing runs"). Clusters of one kind are
 * matched across the runs, first by a signature both carry (its frames in both
 * medoids), then by the similarity of their medoids or common parts (Sim of
 * mining.md section 5, with the database-wide frame weights) of at least min_sim,
 * each cluster at most once, the most similar pairs first. Every cluster of B
 * (with its match) and every unmatched one of A is measured in both runs by the
 * stacks it owns there (the deepest-ending member wins a stack), as a cost per
 * stream: the difference B - A with a bootstrap interval (the excess estimator
 * with run A as the baseline), and a status: new, gone, grown, shrunk or
 * unchanged. Grown and shrunk need the change to be significant after the
 * Benjamini-Hochberg correction over every cluster compared (a z-test with the
 * bootstrap's standard error) and material (min_change).
 */
#ifndef SM_COMPARE_H
#define SM_COMPARE_H
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

struct compare_opts {
	double min_sim;       /* medoid similarity that matches two clusters (default 0.5) */
	double min_change;    /* grown/shrunk also need a change of this share of A's cost per stream (0.1) */
	int bootstrap;        /* replicates of the interval (200) */
	int threads;
};

enum compare_status { CMP_NEW, CMP_GONE, CMP_GROWN, CMP_SHRUNK, CMP_UNCHANGED };

struct compare_row {
	char kind;                 /* 'w' or 'r' */
	int64_t a, b;              /* cluster ids; 0 when absent from that run */
	enum compare_status status;
	double a_cps, b_cps;       /* cost per stream of its run, ns */
	double diff, lo, hi;       /* b_cps - a_cps and its 95 % interval (NaN without replicates) */
	double q;                  /* the change's p-value, adjusted over the rows (NaN without replicates) */
	double sim;                /* of the medoids; 1 for a signature's match; NaN when unmatched */
	int64_t signature;         /* the signature both carry, 0: none */
	uint32_t a_streams, b_streams;
	const uint32_t *common;    /* B's common part (A's for a gone cluster), outermost first */
	uint32_t ncommon;
	const uint32_t *title;     /* its title, the same side's (NULL: mined before titles) */
	uint32_t ntitle;
};

struct compare {
	int64_t a, b;
	uint64_t a_streams, b_streams;   /* the runs' violating streams */
	struct compare_row *rows;        /* by status (new, grown, shrunk, gone, unchanged), then |diff| */
	size_t n;
	struct arena *arena;
};

void compare_opts_init(struct compare_opts *o);
const char *compare_status_name(enum compare_status s);

/* Compares done runs a (before) and b (after). *out: caller frees with compare_free(). Returns 0,
 * 1 when a run is missing or not done (err says which), or -1 with the reason in err. */
int compare_runs(PGconn *db, int64_t a, int64_t b, const struct compare_opts *o, struct compare **out,
		 char *err, size_t errlen);
void compare_free(struct compare *c);

#endif
