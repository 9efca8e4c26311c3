/*
 * results: the end of a run - everything it found written once, in one transaction, on the
 * worker's connection: its mining database (run_stacks, of the kinds mined), its baseline
 * streams, its patterns ranked per kind, the problems and clusters the clusterer made (as COPY
 * rows), the values attribution counts against, what the clusters' and problems' pages read of
 * their streams (matches.h), and its counts and timings. Only the worker that
 * still holds the run may write it: a run another worker took over keeps that one's results.
 */
#ifndef SM_RESULTS_H
#define SM_RESULTS_H

#include <stdint.h>

#include "common/buf.h"

struct runstate;
struct stackinfo;
struct vec;

/* The COPY rows a run's clustering made: its clusters and problems (runclust_build()), and what
 * their pages read of their streams (matches_build()). */
struct results_rows {
	struct buf clusters, problems;
	struct buf match_streams, match_values, stack_totals;
};
#define RESULTS_ROWS_INIT { BUF_INIT(0), BUF_INIT(0), BUF_INIT(0), BUF_INIT(0), BUF_INIT(0) }
void results_rows_release(struct results_rows *rr);

/* Stores run's results: patterns (struct pattern, ranked in this order, their ids reserved), the
 * rows of its clustering, counts (a JSON object); its timings from the run's and t_run, the run's
 * start, and t_store, the store's (util_now_mono_ns()). 0, or -1 with the error on the run's
 * miner, nothing written. */
int results_store(struct runstate *run, const struct stackinfo *si, const struct vec *patterns,
		  const struct results_rows *rows, const char *counts, int64_t t_run, int64_t t_store);

#endif
