/*
 * runclust: clusters the patterns of a mining run (mining.md sections 5 and
 * 6), handed over in memory by the miner, into the rows of its clusters:
 * members, medoid, common part, the alignment of every member with the
 * medoid, the four metrics computed exactly over the run's collapsed AOI
 * stacks (each event once per cluster), their estimates weighted by the streams' sampling
 * weights (est_cost_ns, est_streams), and the ranks; then the run's problems (problem.h): its
 * clusters of both kinds grouped, measured and titled. Frame weights use the
 * database-wide statistics, which the caller reads (miner/frames.h) and hands
 * over with the rows' ids: nothing here touches the database. The miner stores
 * the rows with the rest of the run. When the run has baseline streams, each
 * cluster is also measured in them (excess.h).
 */
#ifndef SM_RUNCLUST_H
#define SM_RUNCLUST_H

#include <stddef.h>
#include <stdint.h>

#include "clusterer/excess.h"
#include "clusterer/hclust.h"
#include "clusterer/sim.h"
#include "common/buf.h"

struct runclust_opts {
	enum linkage_method method;
	double cut;
	int threads;          /* 0: one per core */
};

/* A collapsed AOI stack of the run of one kind: cost and events summed over its streams,
 * stream_idx[first .. first + n) of the input (and stream_cost[] the cost in each). */
struct runclust_stack {
	uint64_t cost, events;
	uint32_t first, n;
	uint32_t stack_id;    /* stacks.id */
	const uint32_t *frames;  /* outermost first */
	uint32_t len;
};

/* A pattern: its id in the table patterns, kind ('w' or 'r'), frames outermost first, and the
 * stacks that support it (indexes into the input's stacks, of the same kind). */
struct runclust_pattern {
	int64_t id;
	char kind;
	const uint32_t *frames;
	uint32_t len;
	const uint32_t *stacks;
	uint32_t nstacks;
	const uint32_t *bstacks;    /* the baseline's stacks that contain it (indexes into bstacks) */
	uint32_t nbstacks;
};

struct runclust_input {
	const struct runclust_pattern *pats;   /* the wait patterns first, then the run ones */
	size_t npats;
	const struct runclust_stack *stacks;
	size_t nstacks;
	const uint32_t *stream_idx;            /* dense stream numbers, 0 .. nstreams - 1 */
	const uint64_t *stream_cost;           /* per entry of stream_idx */
	size_t nstreams;                       /* violating and baseline streams */
	/* the baseline streams' collapsed stacks (entries in stream_idx too); NULL excess: none */
	const struct runclust_stack *bstacks;
	size_t nbstacks;
	const struct excess *excess;
	/* per dense stream number, its sampling weight (>= 1; NULL: all 1): est_cost_ns, est_streams */
	const double *stream_weight;
};

/* What a cluster matched, for counting its streams once (miner/matches.h): its id, its problem's,
 * and its violating stacks (indexes into the input's stacks, each once). */
struct runclust_match {
	int64_t cluster_id, problem_id;
	const uint32_t *stacks;
	uint32_t nstacks;
};

/* Every cluster's, as runclust_build() fills them in (runclust_matches_release() frees them). */
struct runclust_matches {
	struct runclust_match *m;
	size_t n;
	uint32_t *stacks;            /* all the clusters' stacks, in a row */
};

/* Frees what runclust_build() put in mm (not mm itself) and empties it; NULL-safe. */
void runclust_matches_release(struct runclust_matches *mm);

/* Takes n ids for rows of table ("clusters" or "problems"): 0, or -1 with the reason in err. */
typedef int (*runclust_ids_fn)(void *arg, const char *table, size_t n, int64_t *ids, char *err, size_t errlen);

/* The frames in's patterns use (repeats allowed), for the caller to load their names and
 * statistics into a sim_frames: *ids (caller frees) and *n. 0, or -1 when out of memory. */
int runclust_frame_ids(const struct runclust_input *in, uint32_t **ids, size_t *n);

/* Appends to rows the COPY text of the run's clusters (the columns RUNCLUST_COLUMNS of the table
 * clusters; the baseline's are NULL without a baseline) and to prows that of its problems (the
 * columns RUNCLUST_PROBLEM_COLUMNS of the table problems, to be copied first: clusters name
 * them). ft: the names and database-wide statistics (mining.md section 5) of every frame of
 * runclust_frame_ids(); take: the rows' ids. matches (NULL: not wanted): what each cluster matched
 * (the caller releases it, also after a failure). Reads and writes no database. Returns 0 with
 * *nclusters and *nproblems, or -1 with the reason in err. */
int runclust_build(int64_t run_id, const struct runclust_input *in, struct sim_frames *ft,
		   const struct runclust_opts *o, runclust_ids_fn take, void *take_arg, struct buf *rows,
		   size_t *nclusters, struct buf *prows, size_t *nproblems, struct runclust_matches *matches,
		   char *err, size_t errlen);

/* The column list of those rows, for COPY clusters (...) FROM STDIN. */
#define RUNCLUST_COLUMNS                                                                             \
	"run_id, kind, total_cost_ns, streams, events, avg_cost_ns, rank_total_cost, rank_streams, "   \
	"rank_events, rank_avg_cost, baseline_streams, own_cost_ns, baseline_cost_ns, expected_cost_ns, "            \
	"excess_cost_ns, excess_lo_ns, excess_hi_ns, rank_excess_cost, medoid, common_frame_ids, "     \
	"members, stack_ids, alignment, est_cost_ns, est_streams, id, title_frame_ids, problem_id"

/* The column list of the problems' rows (docs/mining.md, "Problems"). */
#define RUNCLUST_PROBLEM_COLUMNS                                                                     \
	"id, run_id, rank, title_frame_ids, total_cost_ns, streams, events, avg_cost_ns, members, "    \
	"baseline_streams, own_cost_ns, expected_cost_ns, excess_cost_ns, excess_lo_ns, excess_hi_ns, " \
	"est_cost_ns, est_streams, cause"

#endif
