/*
 * problem: a run's clusters grouped into problems, and the titles of problems
 * and clusters (docs/mining.md, "Problems"). Pure functions over what the
 * clusterer has in memory; runclust.c stores their result.
 *
 * Grouping: c(s) is a cluster's cost in stream s (its matched AOI events, each
 * once). containment(a->b) = sum of a(s) over the streams b has a cost in /
 * sum of a(s). d(a, b) = 1 - min(containment(a->b), containment(b->a)); the
 * clusters are linked by average linkage on d and cut at 1 - theta. Then
 * call paths join: the code's clusters' common parts make a trie; bottom up,
 * at each node N where paths part (frames in common: at least one) whose
 * streams are at most PROBLEM_PATH_SHARE of the code's clusters' streams, its
 * children (a cluster whose path ends there, or a branch that is one problem)
 * with streams S(x) in the node's S(N), c(x, y) = |S(x)| |S(y)| / |S(N)|
 * (what chance would give them in common): x and y are apart when c(x, y) >=
 * PROBLEM_PATH_EVIDENCE and |S(x) & S(y)| < PROBLEM_PATH_CHANCE x c(x, y);
 * together when |S(x) & S(y)| >= 1 and >= PROBLEM_PATH_CHANCE x c(x, y). Two
 * children apart: largest child first, each joins the first group whose head
 * it is together with, or heads a group; a group is one problem. Else, when
 * some two have c(x, y) >= PROBLEM_PATH_EVIDENCE, all are one problem; when
 * none has, each child stays as it is. Then fragments join: a problem g joins the problem h (the
 * most contained of those that qualify; then the costlier) when h costs more
 * than twice g, or more than g and has a cost in twice the streams g has,
 * containment(g->h) >= PROBLEM_FRAGMENT and containment(g->h) >=
 * PROBLEM_LIFT x the share of the streams h has a cost in. A cluster of the
 * machine (problem_frame_machine()) is grouped only with others of the
 * machine, and no fragment joins a problem of the machine or is one.
 *
 * Titles: each unit (a problem, or a cluster) has a sequence of frames to take
 * its title from (outermost first; a problem: the costliest of its clusters'
 * common parts whose named frames include one shared by the fewest other
 * units) and a set of frames (all of its common parts). k(f) = how many OTHER units have f in their set; n(f) = the streams
 * of the database with f (the frame statistics: fewer is more specific).
 * Among the named frames of its sequence (problem_frame_named()), with m the
 * least k: the two most specific frames with k = m (least n, then the
 * innermost); then, below the innermost of those, the least shared named
 * frame (least k, then least n, then the outermost) if at most half of the
 * other units (at least one) share it. In sequence order. When every named
 * frame is in every other unit (or the unit is alone), only the first step.
 * A sequence without a named frame: its innermost PROBLEM_TITLE_MAX frames.
 */
#ifndef SM_PROBLEM_H
#define SM_PROBLEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the least containment, both ways, that links two clusters into one problem */
#define PROBLEM_THETA 0.5
/* a fragment: the least share of its cost in the streams of the problem it joins ... */
#define PROBLEM_FRAGMENT 0.6
/* ... and how much more than that problem's share of the streams (a cluster in nearly every stream,
 * request dispatch, is no problem's home) */
#define PROBLEM_LIFT 1.5
/* most frames in a title */
#define PROBLEM_TITLE_MAX 3

/* call paths: two children of a node are apart when chance would give them at least
 * PROBLEM_PATH_EVIDENCE streams in common and they share less than PROBLEM_PATH_CHANCE of that;
 * together when they share a stream and at least that share */
#define PROBLEM_PATH_EVIDENCE 2.0
/* ... at a node whose streams are at most this share of those of all the code's clusters */
#define PROBLEM_PATH_SHARE 0.8
#define PROBLEM_PATH_CHANCE 0.25
/* ... and a node of more children than this keeps them apart (a bound on the pairs tested) */
#define PROBLEM_PATH_CHILDREN 256

/* A cluster's cost per stream: streams[0..n) (dense numbers < nstreams, each once) and cost[];
 * machine: a cluster of CPU starvation (problem_frame_machine()); path[0..npath): its common part,
 * outermost first (npath 0: in no call path). */
struct problem_cluster {
	const uint32_t *streams;
	const uint64_t *cost;
	uint32_t n;
	bool machine;
	const uint32_t *path;
	uint32_t npath;
};

/*
 * Groups clusters cl[0..n) into problems: label[i] = the problem of cluster i, numbered 0, 1, ... in
 * the order of their lowest cluster; *nproblems their number. theta in (0, 1]. Returns 0, or -1
 * with the reason in err (out of memory).
 */
int problem_group(const struct problem_cluster *cl, size_t n, size_t nstreams, double theta, uint32_t *label,
		  size_t *nproblems, char *err, size_t errlen);

/* A sequence of frames, outermost first. */
struct problem_seq {
	const uint32_t *f;
	uint32_t len;
};

/* A unit to title: seq[0..len) outermost first; set[0..nset) all of its frames (repeats allowed,
 * seq's included); alt[0..nalt): other sequences of it (a problem's other clusters, costliest
 * first), the title being taken from the first of seq and alt whose best named frame is shared by the
 * fewest other units. */
struct problem_unit {
	const uint32_t *seq;
	uint32_t len;
	const uint32_t *set;
	uint32_t nset;
	const struct problem_seq *alt;
	uint32_t nalt;
};

/* What titles need of a frame (the caller's frame table): whether it is named, and n(f). */
struct problem_frames {
	bool (*named)(uint32_t f, void *arg);
	uint64_t (*streams)(uint32_t f, void *arg);
	void *arg;
};

/*
 * The titles of units u[0..n): out[i * PROBLEM_TITLE_MAX ..] the frame ids of unit i's title,
 * outermost first, nout[i] how many. Returns 0, or -1 on out of memory.
 */
int problem_titles(const struct problem_unit *u, size_t n, const struct problem_frames *fr, uint32_t *out,
		   uint8_t *nout);

/* A frame name that says where to look: its function part (after "module!", the module being
 * anything, "[kernel.kallsyms]" too) not empty, not a pseudo-frame ("[unknown]", "[cpu run
 * queue]") and not an unresolved address ("libx.so+0x1a2b", "0x7f00..."). */
bool problem_frame_named(const char *name, size_t len);

/* A frame that stands for the machine, not the code: the guard's CPU starvation pseudo-frames
 * ("[cpu run queue]", "[cgroup throttled]", "[cpu steal]"; docs/guard.md "CPU starvation"). */
bool problem_frame_machine(const char *name, size_t len);

#endif
