/*
 * excess: what a cluster costs the slow units beyond what it costs normal ones
 * (docs/analysis.md, "Excess cost"). Each violating stream is compared with the
 * baseline streams of its group: those of its unit type when the run has at
 * least EXCESS_MIN_BASELINE of them, else all the run's baseline streams.
 *
 *     expected(K) = sum over groups g of |V_g| x (sum over b in B_g of cost_b(K)) / |B_g|
 *     excess(K)   = TotalCost(K) - expected(K)
 *
 * With one group that is (cost per violating stream - cost per baseline stream)
 * x violating streams. The interval is a percentile interval of a Poisson
 * bootstrap over streams: in each replicate every stream is weighted by a
 * Poisson(1) draw, the same draws for every cluster of the run, derived from a
 * hash of (seed, replicate, stream): deterministic, and nothing stored per
 * replicate and stream.
 */
#ifndef SM_EXCESS_H
#define SM_EXCESS_H
#include <stddef.h>
#include <stdint.h>

#define EXCESS_MIN_BASELINE 5

/* The run's streams, dense 0 .. n - 1. */
struct excess_streams {
	size_t n;
	const uint8_t *baseline;    /* per stream: 1 baseline, 0 violating */
	const uint32_t *type;       /* per stream: its unit type, 0 .. ntypes - 1 (one type for "none") */
	uint32_t ntypes;
};

struct excess_result {
	uint32_t baseline_streams;  /* baseline streams with a cost in the cluster */
	double baseline_cost;       /* the cluster's cost per baseline stream (all of them) */
	double expected;            /* what the violating streams would spend at the baseline's rate */
	double excess;              /* TotalCost - expected */
	double lo, hi;              /* 95 % interval; NaN without replicates */
	double sd;                  /* the replicates' standard deviation; NaN without replicates */
};

struct excess;

/* Groups the streams and draws the replicates' group weights. replicates: 0 (no interval) to
 * 10000. NULL when out of memory or when the run has no baseline stream. Caller frees. */
struct excess *excess_open(const struct excess_streams *s, int replicates, uint64_t seed);
void excess_free(struct excess *x);
/* The baseline streams the run has. */
size_t excess_baseline_streams(const struct excess *x);

/* One cluster: the streams in which it has a cost (violating and baseline, each once) and that
 * cost. Safe to call from several threads at once. Returns 0, or -1 when out of memory. */
int excess_measure(const struct excess *x, const uint32_t *streams, const uint64_t *costs, size_t n,
		   struct excess_result *out);

#endif
