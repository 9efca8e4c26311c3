/*
 * learnt: what a training process has learnt, as tables its program threads
 * write and a saver reads (docs/guard.md "Training and profiles"). The saver
 * is the agent's own shipping thread in the process, or the host's collector
 * when the tables lie in the process's region: there it reads memory the
 * process may have written anything into, so every count, index and string
 * it takes is bounded on its side.
 *
 * Counts only grow. The saver keeps what it has saved of each loop and class
 * (the tables' saved part, which it alone writes) and saves the difference,
 * so a collector started again neither loses nor counts twice what a process
 * learnt; an upload sends the counts whole (the server keeps each process's
 * latest). Loops and classes are written under the process's lock with a
 * sequence number odd while they change; a context is written once, before
 * the count that publishes it.
 */
#ifndef SM_GUARD_LEARNT_H
#define SM_GUARD_LEARNT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "guardcore/profile.h"

#define LEARNT_MAX_CONTEXTS 8192
#define LEARNT_MAX_CLASSES 8192

struct learnt_loop {
	_Atomic uint32_t seq;
	uint16_t call;
	uint16_t pad;
	uint64_t ret;
	int64_t depth;
	uint64_t threads;
	struct gp_stats all;
	struct gp_stats async;        /* deferred requests begun in the loop */
};

struct learnt_ctx {
	uint64_t ret;
	int64_t depth;
	int32_t loop;
	uint16_t call;
	uint16_t npath;
	uint64_t path[GP_MAX_PATH];   /* outermost first, from the loop's function down to the call */
};

struct learnt_class {
	_Atomic uint32_t seq;
	int32_t loop;
	uint32_t nctx;
	uint32_t ctx[GP_MAX_CLASS_CONTEXTS];
	uint64_t n;
	struct gp_stats size[GP_BUCKETS];
};

/* A loop's or a class's counts as last saved. */
struct learnt_saved {
	uint64_t threads;             /* a loop's */
	uint64_t n;                   /* a class's */
	struct gp_stats all, async;   /* a loop's */
	struct gp_stats size[GP_BUCKETS];   /* a class's */
};

struct learnt {
	_Atomic uint32_t nloops, nctx, ncls;
	uint32_t pad;
	_Atomic uint64_t units;
	struct learnt_loop loops[GP_MAX_LOOPS];
	struct learnt_ctx ctx[LEARNT_MAX_CONTEXTS];
	struct learnt_class cls[LEARNT_MAX_CLASSES];
	/* the saver's */
	uint64_t units_saved;
	struct learnt_saved loops_saved[GP_MAX_LOOPS];
	struct learnt_saved cls_saved[LEARNT_MAX_CLASSES];
};

/* The writer's side of an entry's sequence number (one writer: the process's lock is held). */
static inline void learnt_write_begin(_Atomic uint32_t *seq)
{
	atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static inline void learnt_write_end(_Atomic uint32_t *seq)
{
	atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1, memory_order_release);
}

/* Zeroes every count, learnt and saved, keeping the loops, contexts and classes (a forked child). */
void learnt_zero_counts(struct learnt *l);
/* Copies src's loops, contexts and classes into dst, with no counts (a forked child's new region). */
void learnt_copy_tables(struct learnt *dst, const struct learnt *src);

/* A consistent copy of the tables at one moment, each entry whole, bounded and checked. */
struct learnt_copy;
/* NULL when out of memory. Caller frees with learnt_copy_free(). */
struct learnt_copy *learnt_take(const struct learnt *l);
void learnt_copy_free(struct learnt_copy *cp);
/* Units the copy holds beyond what l says was saved (l NULL: all of them). */
uint64_t learnt_copy_units(const struct learnt_copy *cp, const struct learnt *l);

/* How a process's addresses are named: its modules, a symbolizer, and where the symbolizer has an
 * address of the process (NULL: the same place). */
struct learnt_namer {
	const struct gmodmap *mods;
	struct gsym *sym;
	uintptr_t (*xlat)(const void *ctx, uintptr_t addr);
	const void *ctx;
	const char *exe, *build_id;
	double k, cut;
};

/*
 * Adds to p (new, empty) what the copy holds beyond the counts saved in l (whole: every count), named
 * by nm: loops and contexts as (module, offset, build id), call paths as frame names. Classes are
 * added as they are (gp_cluster() makes the types). 0, or -1 with the reason in err.
 */
int learnt_profile(const struct learnt_copy *cp, const struct learnt *l, int whole, const struct learnt_namer *nm,
		   struct gprofile *p, char *err, size_t errlen);
/* The copy's counts are saved: l's saved part becomes them (the saver's, after the profile is stored). */
void learnt_mark_saved(struct learnt *l, const struct learnt_copy *cp);

/* What a process learnt (a profile's text), as `POST /api/v1/profiles` takes it (wire-format.md).
 * 0 or -1. */
int learnt_upload_body(const char *host, int64_t pid, int64_t started_ns, const char *profile, size_t len,
		       struct buf *out);

#endif
