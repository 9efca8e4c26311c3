/*
 * baseline: which of the baseline streams' collapsed stacks contain each mined
 * pattern (P is a subsequence of S, mining.md section 2), so that the run's
 * clusters can be measured in normal units (clusterer/excess.h). Stacks are
 * indexed by frame; a pattern is tested only against the stacks of its kind
 * that hold its rarest frame, on all cores.
 */
#ifndef SM_BASELINE_H
#define SM_BASELINE_H
#include <stddef.h>
#include <stdint.h>

struct baseline_seq {
	const uint32_t *frames;     /* outermost first */
	uint32_t len;
	uint8_t kind;
};

/* Where the greedy (leftmost) embedding of p[0..m) in s[0..n) ends, 1-based: the frame that completes
 * it; 0 when p is not a subsequence of s. The earliest match of each item is never worse. */
uint32_t baseline_end(const uint32_t *p, uint32_t m, const uint32_t *s, uint32_t n);

/* The matches of pattern i are idx[off[i] .. off[i + 1]), ascending indexes into stacks.
 * *off and *idx: caller frees (free()). Returns 0, or -1 when out of memory. */
int baseline_match(const struct baseline_seq *stacks, size_t nstacks, const struct baseline_seq *pats,
		   size_t npats, int threads, uint32_t **off, uint32_t **idx);

#endif
