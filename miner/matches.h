/*
 * matches: what the pages of a run's clusters and problems show about the streams they matched,
 * counted once when the run is stored (sql/027_match.sql) instead of on every request: per
 * cluster and per problem (its clusters' stacks, each once) its streams with their cost and
 * events (the MATCHES_TOP costliest and a sample of MATCHES_SAMPLE by the SHA-256 of their id:
 * what the pages read of them), its streams, cost and events by host, version and label value,
 * and the run's stacks summed over their streams. The streams' values are read once from the
 * run's selection (the temporary table sm_sel); everything else comes from the clusterer's input
 * and output in memory. The rows are the same as sm_match_streams() in SQL writes.
 */
#ifndef SM_MATCHES_H
#define SM_MATCHES_H

#include <stddef.h>
#include <stdint.h>

struct buf;
struct miner;
struct runclust_matches;
struct runclust_stack;

#define MATCHES_TOP 1000      /* the API's largest limit of top streams */
#define MATCHES_SAMPLE 2000   /* COSTMODEL_MAX_ROWS */

/* The run's violating collapsed stacks as the clusterer had them, and what its clusters matched. */
struct matches_input {
	int64_t run_id;
	const struct runclust_stack *rs;   /* of the kinds mined; their entries in sidx, scost, sev */
	const char *kind;                  /* per stack of rs: 'w' or 'r' */
	size_t nrs;
	const uint32_t *sidx;              /* dense stream numbers (indexes into refs) */
	const uint64_t *scost;
	const uint32_t *sev;
	const int64_t *refs;               /* the run's streams' ids, ascending */
	const uint8_t *base;               /* per stream: 1 baseline (NULL: none) */
	size_t nstreams;
	const struct runclust_matches *mm;
};

/* The COPY text rows of match_streams (MATCHES_STREAM_COLUMNS), match_values
 * (MATCHES_VALUE_COLUMNS) and run_stack_totals (MATCHES_TOTAL_COLUMNS), appended to the caller's
 * buffers. Reads the streams' values on m's connection. 0, or -1 with the error on m. */
int matches_build(struct miner *m, const struct matches_input *in, struct buf *streams, struct buf *values,
		  struct buf *totals);

#define MATCHES_STREAM_COLUMNS "run_id, of, id, stream_ref, cost_ns, events, pick"
#define MATCHES_VALUE_COLUMNS "run_id, of, id, key, value, streams, cost_ns, events"
#define MATCHES_TOTAL_COLUMNS "run_id, kind, stack_id, cost_ns, events, streams"

#endif
