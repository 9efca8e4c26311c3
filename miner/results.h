/*
 * results: the end of a run - everything it found written once, in one transaction, on the
 * worker's connection: its mining database (run_stacks, of the kinds mined), its baseline
 * streams, its patterns ranked per kind, the problems and clusters the clusterer made (as COPY
 * rows), the values attribution counts against, and its counts and timings. Only the worker that
 * still holds the run may write it: a run another worker took over keeps that one's results.
 */
#ifndef SM_RESULTS_H
#define SM_RESULTS_H

#include <stdint.h>

struct buf;
struct runstate;
struct stackinfo;
struct vec;

/* Stores run's results: patterns (struct pattern, ranked in this order, their ids reserved),
 * clusters and problems (COPY rows of runclust_build()), counts (a JSON object); its timings from
 * the run's and t_run, the run's start, and t_store, the store's (util_now_mono_ns()). 0, or -1
 * with the error on the run's miner, nothing written. */
int results_store(struct runstate *run, const struct stackinfo *si, const struct vec *patterns,
		  const struct buf *clusters, const struct buf *problems, const char *counts, int64_t t_run,
		  int64_t t_store);

#endif
