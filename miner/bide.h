/*
 * bide: the sequential-pattern mining engine. BIDE (Wang & Han, ICDE 2004:
 * BI-Directional Extension checking with BackScan pruning) over sequences of
 * single items, with support as a sum of weights, in two modes:
 *
 *   BIDE_CLOSED   patterns with support >= minsup and no one-item extension
 *                 (appended, or inserted anywhere) of EQUAL support: classic
 *                 closed sequential patterns when every weight is 1;
 *   BIDE_MAXIMAL  patterns with support >= minsup and no one-item extension of
 *                 support >= minsup: classic maximal sequential patterns with
 *                 weights 1, StackMine's costly maximal patterns with costs.
 *
 * Containment is ordinary subsequence containment (gaps allowed, items may
 * repeat). See docs/mining.md, "The mining engine".
 */
#ifndef SM_BIDE_H
#define SM_BIDE_H

#include <stddef.h>
#include <stdint.h>

/* A database of n sequences of items (uint32, any values; frames or SPMF items), each with a weight: the cost its
 * occurrences stand for (1 in count mode). Items may repeat inside a sequence (recursion). */
struct seqdb {
	const uint32_t *const *seqs;
	const uint32_t *lens;
	const uint64_t *weights;
	size_t n;
};

enum bide_mode { BIDE_CLOSED, BIDE_MAXIMAL };

struct bide_opts {
	enum bide_mode mode;
	uint64_t minsup;        /* absolute, >= 1: patterns with support >= minsup (support = sum of weights of
				 * the sequences containing the pattern) */
	int threads;            /* 1 or more (0 counts as 1); the search tree is split into subtrees, and a big
				 * database's identical sequences are merged on as many threads */
	size_t max_patterns;    /* safety stop: fail with an error past this many (0: no limit) */
	size_t max_len;         /* patterns longer than this are not extended (0: no limit); patterns are still
				 * checked against all their extensions, so every output is truly closed/maximal */
	int no_seqs;            /* non-zero: emit gets seqs = NULL, nseqs = 0 (saves building the lists) */
};

/* Called once per output pattern, never concurrently (the engine serialises calls). seqs lists the indexes of the
 * database sequences that contain the pattern (ascending). Return 0 to go on, non-zero to stop mining.
 * items and seqs are only valid during the call. */
typedef int (*bide_emit_fn)(void *ctx, const uint32_t *items, size_t len, uint64_t support, const uint32_t *seqs,
			    size_t nseqs);

struct bide;   /* handle: the error message and the statistics of the last run */

/* Returns a new handle, or NULL on out of memory. Caller frees with bide_free(). */
struct bide *bide_open(void);
/* NULL-safe. */
void bide_free(struct bide *b);
/* Mine db (read only; it may be freed after the call). Returns 0, or -1 with bide_error() set (bad options,
 * out of memory, max_patterns reached, emit stopped). Patterns emitted before a failure stay emitted. */
int bide_mine(struct bide *b, const struct seqdb *db, const struct bide_opts *o, bide_emit_fn emit, void *ctx);
/* The last error, "" if none. Owned by the handle. */
const char *bide_error(const struct bide *b);

/* Statistics of the last run, for progress and bench. projections: projected databases built (one per
 * prefix extension explored); backscan_pruned: prefixes cut by BackScan; patterns: patterns emitted;
 * ms: wall time of bide_mine, prep_ms the part spent preparing the database (merging identical sequences,
 * dropping infrequent items); items: distinct items kept (support >= minsup); sequences: distinct sequences
 * left to mine after that preparation; prep_threads: the threads that preparation used (one for fewer than
 * 16,384 sequences a thread). */
struct bide_stats {
	uint64_t projections, backscan_pruned, patterns;
	double ms, prep_ms;
	uint64_t items, sequences;
	int prep_threads;
};
void bide_last_stats(const struct bide *b, struct bide_stats *st);

#endif
