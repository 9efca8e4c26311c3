/*
 * profile: the performance profile of one executable build, as PerfGuard
 * learns it (../shared/spec/guard.md, docs/guard.md): the loop sites of the
 * program's event-processing loops, and per loop the unit types with their
 * calling contexts and time thresholds.
 *
 * What training observes is kept exactly, so that profiles learnt by many
 * processes and hosts merge without loss:
 *   - a context is a wrapped call site inside a unit, (module, offset, stack
 *     depth below the loop entry, call), with the call path that led to it
 *     (function frames, outermost first, from the loop's function down);
 *   - a class is a set of contexts: every unit whose contexts were exactly
 *     that set, with the count, mean and sum of squared deviations (Welford)
 *     of their durations, so two classes pool exactly; kept per size bucket
 *     too (the unit's number of wrapped calls, in powers of two);
 *   - unit types are computed from the classes, never merged themselves:
 *     classes are clustered with PerfGuard's unit distance (average
 *     LCS-based distance between their call paths) by average linkage cut at
 *     `cut`; a type's statistics pool its classes, its contexts are the union
 *     of theirs, and its threshold is mean + k * standard deviation;
 *   - work-aware thresholds: one loop iteration of a batching server (redis,
 *     nginx) serves one request or fifty with the same contexts, so a type
 *     also has a threshold per size bucket, from its units of that size; the
 *     threshold in force grows with the calls the unit has made so far.
 *
 * Pure code (no process introspection), shared by the agent (libsmguard.so),
 * `sm-guard profile` and the tests. Errors are left on the handle.
 */
#ifndef SM_GUARD_PROFILE_H
#define SM_GUARD_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "guardcore/settings.h"

#define GP_FORMAT "stackmine-guard-profile"
#define GP_VERSION 1
#define GP_MAX_MODULES 4096
#define GP_MAX_FRAMES 65536
#define GP_MAX_LOOPS 32
#define GP_MAX_CONTEXTS 4096     /* per loop */
#define GP_MAX_CLASSES 1024      /* per loop */
#define GP_MAX_CLASS_CONTEXTS 64 /* contexts told apart per unit */
#define GP_MAX_TYPES 64          /* per loop: run-time inference keeps a 64-bit mask */
#define GP_MAX_PATH 64           /* frames of a call path */
#define GP_MAX_PATHS 512         /* distinct paths per loop the distance looks at */
#define GP_MIN_TYPE_UNITS 100    /* fewer: the type's threshold is at least its loop's */
#define GP_DEFAULT_K ((double)GSET_DEF_K)   /* the pushed setting k's default (settings.h) */
#define GP_DEFAULT_CUT 0.5
#define GP_CALL_MAX 24
#define GP_BUCKETS 16            /* unit sizes: 0-1, 2-3, 4-7, ... 2^15 or more wrapped calls */

/* Count, mean and sum of squared deviations of durations (ns), Welford style. */
struct gp_stats {
	uint64_t n;
	double mean;
	double m2;
};

#define GP_MAX_N (UINT64_MAX / 2)  /* counts saturate here (a profile file's largest, INT64_MAX) */

void gp_stats_add(struct gp_stats *s, double x);
/* Pools from into into (exact: Chan et al.'s parallel formula). */
void gp_stats_merge(struct gp_stats *into, const struct gp_stats *from);
/* Sample standard deviation (0 below two values). */
double gp_stats_sd(const struct gp_stats *s);

/* A call site: module index, offset (ELF address in the module), depth, call name. */
struct gp_site {
	uint32_t module;
	uint64_t offset;
	int64_t depth;
	char call[GP_CALL_MAX];
};

struct gp_module {
	char *name;      /* base name, "libc.so.6" */
	char *build_id;  /* lower-case hex, "" when the module has none */
};

struct gp_context {
	struct gp_site site;
	uint32_t path_off, path_len;   /* frame ids in loop->paths[] */
};

struct gp_class {
	uint32_t ctx_off, nctx;        /* sorted context indexes in loop->ctxs[] */
	struct gp_stats st;            /* all its units */
	struct gp_stats size[GP_BUCKETS];  /* its units by size bucket */
	uint32_t type;                 /* after gp_cluster() */
};

struct gp_type {
	char name[16];                 /* "u3": unique in the profile */
	struct gp_stats st;
	double threshold_ns;           /* all sizes pooled */
	struct gp_stats size[GP_BUCKETS];
	double size_thr[GP_BUCKETS];   /* the threshold for a unit that made this many calls so far */
	uint32_t ctx_off, nctx;        /* union of the classes' contexts, sorted, in loop->tctxs[] */
	uint32_t nclasses;
};

struct gp_loop {
	struct gp_site site;           /* depth: below the thread's stack base */
	char *symbol;                  /* "module!function" of the site, may be NULL */
	uint64_t threads;              /* threads that ran this loop, summed over processes */
	struct gp_stats all;           /* every unit of the loop, classes or not */
	double threshold_ns;           /* for units whose type is not known yet */
	struct gp_stats async;         /* deferred requests begun in the loop (docs/guard.md) */
	double async_thr_ns;           /* their threshold */
	struct gp_context *contexts;
	size_t ncontexts, capcontexts;
	struct gp_class *classes;
	size_t nclasses, capclasses;
	struct gp_type *types;
	size_t ntypes, captypes;
	uint32_t *ctxs;                /* storage of the classes' context lists */
	size_t nctxs, capctxs;
	uint32_t *tctxs;               /* storage of the types' context lists (rebuilt by gp_cluster) */
	size_t ntctxs, captctxs;
	uint32_t *paths;               /* storage of paths (frame ids) */
	size_t npaths, cappaths;
	struct intern *ctx_index;      /* context key -> index */
	struct intern *class_index;    /* sorted context list -> index */
};

struct gprofile {
	char build_id[129];
	char *exe;
	double k;
	double cut;
	int64_t updated_s;             /* Unix time of the last write */
	uint64_t units;                /* units trained, all loops */
	struct gp_module *modules;
	size_t nmodules, capmodules;
	struct intern *frames;         /* frame names -> ids */
	struct gp_loop *loops;
	size_t nloops, caploops;
	char err[512];
};

/* An empty profile (k and cut at their defaults). Caller frees. NULL when out of memory. */
struct gprofile *gp_new(void);
void gp_free(struct gprofile *p);   /* NULL-safe */
const char *gp_error(const struct gprofile *p);

/* Parses a profile file's text into the empty profile p. Returns 0 or -1 (error names the field). */
int gp_load_text(struct gprofile *p, const char *text, size_t len);
/* Reads and parses path. Returns 0, -1 (error), or -2 when the file does not exist. */
int gp_load_file(struct gprofile *p, const char *path);
/* Appends the profile as JSON (with a trailing newline). Returns 0 or -1 (out of memory or over the buf's max). */
int gp_write(const struct gprofile *p, struct buf *out);
struct jsonw;
/* What the profile says, for people: exe, units, k, loops (symbol, call, units, mean_ns,
 * threshold_ns, types: name, units, mean_ns, sd_ns, threshold_ns, contexts "call in function"). */
void gp_summary(const struct gprofile *p, struct jsonw *w);

/* ---- building, for the trainer and the tests: each returns an index, or -1 on error ---- */
int64_t gp_add_module(struct gprofile *p, const char *name, const char *build_id);
int64_t gp_add_frame(struct gprofile *p, const char *name);
const char *gp_frame_name(const struct gprofile *p, uint32_t id);
/* Finds or adds the loop at site; symbol may be NULL. */
int64_t gp_add_loop(struct gprofile *p, const struct gp_site *site, const char *symbol);
/* Finds or adds a context of loop; path (frame ids, outermost first) is kept when the context is new. */
int64_t gp_add_context(struct gprofile *p, uint32_t loop, const struct gp_site *site, const uint32_t *path,
		       uint32_t pathlen);
/*
 * Pools size[0..GP_BUCKETS) (the units' statistics by size bucket) into the class of
 * exactly the contexts ctx[0..n) (any order, duplicates ignored).
 */
int64_t gp_add_class(struct gprofile *p, uint32_t loop, const uint32_t *ctx, uint32_t n,
		     const struct gp_stats *size);
/* The size bucket of a unit that made `calls` wrapped calls. */
static inline unsigned gp_bucket(uint32_t calls)
{
	unsigned b = calls < 2 ? 0 : 31u - (unsigned)__builtin_clz(calls);

	return b < GP_BUCKETS ? b : GP_BUCKETS - 1;
}

/*
 * Pools everything of from into into: modules, frames, loops, contexts and
 * classes are matched by identity (module name and build id, offset, depth,
 * call), statistics pooled exactly. Both must be of the same build (or into
 * has none yet). Types of into are stale afterwards: call gp_cluster().
 */
int gp_merge(struct gprofile *into, const struct gprofile *from);

/*
 * Computes every loop's unit types from its classes (p->cut, p->k) and the
 * thresholds, no threshold under min_threshold_ns. Returns 0 or -1.
 */
int gp_cluster(struct gprofile *p, int64_t min_threshold_ns);

/* Recomputes the thresholds with another k (types unchanged). */
void gp_set_k(struct gprofile *p, double k, int64_t min_threshold_ns);
/* What loop li is, as a number: equal for loops at the same site (module, offset, depth, call) of
 * two profiles. A guarding thread's loop index stays valid across tables of profiles whose loops'
 * keys are the same, in the same order. */
uint64_t gp_loop_key(const struct gprofile *p, size_t li);

/* PerfGuard's distances, exposed for the tests. */
double gp_path_distance(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb);

/*
 * Merges the delta into the profile file at path under an exclusive lock of
 * path.lock (waiting at most lock_ms), reclusters, and replaces the file
 * atomically (temporary file, fsync, rename). Returns 0 or -1 with the reason in err.
 */
int gp_save_merged(const char *path, const struct gprofile *delta, int64_t min_threshold_ns, int lock_ms,
		   char *err, size_t errlen);

#endif
