/*
 * sim: the similarity of two call-stack patterns (docs/mining.md section 5,
 * docs/clustering.md): words of frame names and the substitution cost
 * sub(f, g), frame weights from database-wide statistics, the weighted
 * edit-distance alignment cut into segments, Sim, and a cluster's medoid and
 * common part (section 6).
 *
 * Frames are known by the caller's ids (frames.id in the database). A frame
 * table (struct sim_frames) holds the word set of every frame registered and
 * the statistics N, n(f), n(g->f); it is filled once, then only read, so that
 * any number of threads can align with it, each with a struct sim_ctx of its
 * own (DP buffers, a cache of sub values, the last alignment).
 */
#ifndef SM_SIM_H
#define SM_SIM_H

#include <stddef.h>
#include <stdint.h>

/* Patterns longer than this are refused (stacks have at most 512 frames). */
#define SIM_MAX_LEN 1024

/* ---- words and the frame table ---- */

/*
 * The word set of frame name f[0..len), for display and tests: the words of
 * the function part (after the first '!', the whole name if there is none),
 * split before an upper-case letter that follows a lower-case letter or a
 * digit and at '_' ':' '.' '<' '>' ',' ' ', lower-cased, empty ones dropped,
 * each once, in order of first appearance; then the module part (before the
 * first '!'), lower-cased, as one more word written with a trailing '!'
 * ("kernel32.dll!"), which keeps it apart from a function word of the same
 * spelling. Written space-separated into out (NUL-terminated).
 * Returns the number of words, or -1 when out is too small.
 */
int sim_words(const char *f, size_t len, char *out, size_t outsz);

struct sim_frames;

/* Returns an empty table, or NULL on out of memory. Caller frees with sim_frames_free(). */
struct sim_frames *sim_frames_open(void);
/* NULL-safe. */
void sim_frames_free(struct sim_frames *ft);
/* The last error, "" if none. Owned by the table. */
const char *sim_frames_error(const struct sim_frames *ft);

/* Register frame `id` with its name. Registering an id again with the same name does nothing.
 * Returns 0, or -1 (the id is known under another name, too many frames, out of memory). */
int sim_frames_add(struct sim_frames *ft, uint32_t id, const char *name, size_t len);
/* Number of frames registered. */
size_t sim_frames_count(const struct sim_frames *ft);

/*
 * Statistics for the weights (the database views stream_total, frame_stats,
 * call_stats): N streams in the database; n(f) streams with a stack containing
 * f; n(g->f) streams with a stack in which g directly calls f. Anything not set
 * is 0. Frames need not be registered to have statistics. Setting a value again
 * replaces it. Return 0, or -1 on out of memory.
 */
void sim_frames_set_streams(struct sim_frames *ft, uint64_t n);
int sim_frames_set_count(struct sim_frames *ft, uint32_t f, uint64_t n);
int sim_frames_set_calls(struct sim_frames *ft, uint32_t g, uint32_t f, uint64_t n);

/*
 * sub(f, g) = 1 - |words(f) & words(g)| / |words(f) | words(g)|, 0 when f == g
 * (same id), 1 when both word sets are empty. Returns -1 if f or g is not
 * registered.
 */
double sim_sub(const struct sim_frames *ft, uint32_t f, uint32_t g);

/*
 * Weight of each position of the pattern frames[0..len) into w[0..len):
 *   w(f_i) = U(f_i) * BF(f_{i-1}, f_i) * BB(f_i, f_{i+1})
 *   U(f) = ln((N+1)/(n(f)+1)) + 1, BF(g,f) = ln((n(g)+1)/(n(g->f)+1)) + 1,
 *   BB(f,h) = ln((n(h)+1)/(n(f->h)+1)) + 1, BF and BB = 1 at the ends.
 * Counts are first clamped to what consistent statistics allow (n(f) <= N,
 * n(g->f) <= n(g) in BF, n(f->h) <= n(h) in BB), so every factor is >= 1.
 */
void sim_weights(const struct sim_frames *ft, const uint32_t *frames, size_t len, double *w);

/* ---- alignment and similarity ---- */

/* A pattern: frame ids (outermost first) and the weight of each position (sim_weights()). */
struct sim_pattern {
	const uint32_t *frames;
	const double *w;
	size_t len;
};

/* Operations: a match (equal frames), a substitution, a deletion (a frame of the left pattern
 * only) and an insertion (a frame of the right pattern only). */
enum sim_op { SIM_MATCH, SIM_SUB, SIM_DEL, SIM_INS };
/* Segment kinds: runs of matches, of insertions/deletions, of substitutions. */
enum sim_seg { SIM_SEG_M, SIM_SEG_ID, SIM_SEG_S };

/* One step of an alignment; l and r are positions in the left and right pattern (UINT32_MAX where
 * the step has none: r for SIM_DEL, l for SIM_INS). */
struct sim_step {
	enum sim_op op;
	uint32_t l, r;
	double sub;     /* sub(f, g) for SIM_SUB, else 0 */
};

/* A maximal run of steps of one kind: steps[first .. first + n). w is its weight: w(M), w(ID)
 * or w(S) of docs/mining.md section 5. */
struct sim_segment {
	enum sim_seg kind;
	uint32_t first, n;
	double w;
};

/* The alignment of a left and a right pattern, in order from the outermost frames. */
struct sim_alignment {
	const struct sim_step *steps;
	size_t nsteps;
	const struct sim_segment *segs;
	size_t nsegs;
	double cost;            /* the edit distance */
	double wm, wid, ws;     /* sums of w(M), w(ID), w(S) over the segments */
	double sim;             /* wm / (wm + wid + ws); see sim_align() for 0/0 */
};

struct sim_ctx;

/* Returns a workspace for one thread on table ft (which must outlive it and not change while it
 * is used), or NULL on out of memory. Caller frees with sim_ctx_free(). */
struct sim_ctx *sim_ctx_open(const struct sim_frames *ft);
/* NULL-safe. */
void sim_ctx_free(struct sim_ctx *c);
/* The last error, "" if none. Owned by the workspace. */
const char *sim_ctx_error(const struct sim_ctx *c);

/*
 * The optimal alignment of a (left) and b (right): edit distance with match 0,
 * insertion or deletion 1, substitution sub(f, g); costs within 1e-9 of each
 * other are ties, settled at each cell of the table in the order match (or
 * substitution: the diagonal), deletion, insertion; the alignment is read back
 * from the innermost frames (the end of both patterns), so the preference
 * applies to the last operation first. The tie order is applied with the
 * lexicographically smaller frame-id sequence on the left and the result is
 * reported in the caller's orientation, so that align(b, a) is the mirror of
 * align(a, b) and Sim is exactly symmetric.
 *
 * Sim = wm / (wm + wid + ws), with a matched pair weighing the average of its
 * two positions' weights; when the denominator is 0 (both patterns weigh
 * nothing), Sim is 1 if the patterns are equal and 0 otherwise.
 *
 * *out is owned by c and valid until its next call. Returns 0, or -1 with
 * sim_ctx_error() set (a frame not registered, a pattern longer than
 * SIM_MAX_LEN, out of memory).
 */
int sim_align(struct sim_ctx *c, const struct sim_pattern *a, const struct sim_pattern *b,
	      const struct sim_alignment **out);
/* Sim(a, b) of sim_align() into *out. Returns 0 or -1 as sim_align(). */
int sim_similarity(struct sim_ctx *c, const struct sim_pattern *a, const struct sim_pattern *b, double *out);

/*
 * The medoid of a cluster p[0..k) (k >= 1, members in ascending pattern-id
 * order): the member with the highest sum of Sim to the others (each sum taken
 * in member order), ties to the lowest index. Returns 0 or -1 as sim_align().
 */
int sim_medoid(struct sim_ctx *c, const struct sim_pattern *p, size_t k, size_t *medoid);
/*
 * The common part of a cluster p[0..k) with medoid p[m]: the positions of
 * p[m]'s frames that are matched (not substituted) in its alignment with every
 * other member, ascending, into pos (room for p[m].len entries), their number
 * into *npos. A single-pattern cluster's common part is the whole pattern.
 * Returns 0 or -1 as sim_align().
 */
int sim_common_part(struct sim_ctx *c, const struct sim_pattern *p, size_t k, size_t m, uint32_t *pos,
		    size_t *npos);

/* ---- for the clusterer's pruning (hclust.c) ---- */

/* Most threads any call starts. */
#define SIM_MAX_THREADS 64

/*
 * The floor of frame f: a lower bound of sub(f, g) over every other
 * registered frame g, in [0, 0.5] (exact when some frame shares at least half
 * of the union of words with f, 0.5 otherwise). sim_frames_prepare() computes
 * the floors of all frames (on `threads` threads, 0: one per online CPU); call
 * it after the last sim_frames_add() (adding a frame undoes it). Returns 0, or
 * -1 on out of memory. sim_frames_sub_floor() returns -1 if f is not registered
 * or the table is not prepared.
 */
int sim_frames_prepare(struct sim_frames *ft, int threads);
double sim_frames_sub_floor(const struct sim_frames *ft, uint32_t f);
/* n(f): the streams with a stack containing f, as set (0 when not set). */
uint64_t sim_frames_streams_of(const struct sim_frames *ft, uint32_t f);
/* The name of a registered frame id (not NUL-terminated: *len bytes), or NULL. Owned by ft. */
const char *sim_frames_name(const struct sim_frames *ft, uint32_t f, size_t *len);
/* Dense index 0..count-1 of a registered frame id, or -1. */
int64_t sim_frames_index(const struct sim_frames *ft, uint32_t f);

#endif
