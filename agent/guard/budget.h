/*
 * budget: the shipping budget of one guarded process (docs/guard.md "The
 * shipping budget"): per unit type and minute, violations are priority-sampled
 * (prio.h); the reports_per_min of highest priority are held as candidates,
 * their streams captured as soon as they are kept (the rings move on) and
 * shipped, weighted, when their minute closes.
 *
 * Two sides. Offers come from whoever learns of a violation: the program's
 * threads in the in-process agent (under the budget's mutex), the collector
 * when it reads a process's queue. The shipping side (budget_work) captures
 * and ships: the shipping thread, or the collector. What a capture builds and
 * where a stream goes are the owner's callbacks.
 *
 * Memory: GUARD_HELD candidates of every type together (a violation that
 * finds none free is a queue drop), their streams at most GUARD_HELD_BYTES:
 * over it, the open minute holding the most bytes closes early and ships,
 * each stream at most GUARD_HELD_STREAM.
 */
#ifndef SM_GUARD_BUDGET_H
#define SM_GUARD_BUDGET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/guard/prio.h"
#include "agent/guard/rt.h"
#include "common/wire.h"

struct arena;

/* A candidate's stream, captured when it was kept. */
struct gcapture {
	struct arena *a;          /* NULL: nothing held */
	struct wire_stream ws;
	uint32_t tag;             /* the violation it is (held_tag when captured) */
	int empty;                /* nothing to ship (no event) */
	int failed;               /* the capture failed (counted as lost once) */
	size_t bytes;
};

struct gbudget_ops {
	/* v's stream into ws, everything it points to in a (or the owner's for its life): 1, 0 when it
	 * has no event, -1 when it cannot be built */
	int (*build)(void *ctx, const struct gviol *v, struct arena *a, struct wire_stream *ws);
	/* ships ws (its weight set) */
	void (*deliver)(void *ctx, const struct wire_stream *ws);
	void *ctx;
};

struct gbudget {
	pthread_mutex_t *mu;      /* held around the pool for offers from other threads; NULL: one thread */
	int reports_per_min;
	struct prio_group pg[GP_MAX_LOOPS][GUARD_TSLOTS];
	struct prio_item held[GUARD_HELD];
	struct gviol held_v[GUARD_HELD];
	uint32_t held_tag[GUARD_HELD];
	unsigned held_new;        /* candidates kept since the shipping side last looked */
	uint64_t prng;            /* the draws u of the sampling */
	struct gbudget_ops ops;
	struct guard_counts *n;   /* violations, suppressed, queue_drops, early_closes, lost */
	/* the shipping side's alone */
	struct gcapture caps[GUARD_HELD];
	size_t by_group[GP_MAX_LOOPS * GUARD_TSLOTS];
};

/* An empty budget in b, which the caller zeroed (a static, calloc): nothing held, a sequence of draws of
 * its own. Only the pages it needs are touched. */
void budget_init(struct gbudget *b, pthread_mutex_t *mu, int reports_per_min, const struct gbudget_ops *ops,
		 struct guard_counts *n);
/* Forgets what b holds without freeing it (a forked child: the parent's pages, the parent's to ship). */
void budget_reset(struct gbudget *b);
/* Frees the captured streams. */
void budget_release(struct gbudget *b);
/*
 * Offers v (a violation, or a deferred request over its threshold) at now. Returns 1 when it was kept
 * as a candidate (the shipping side should look), else 0 (counted: suppressed or a queue drop).
 * Takes b->mu.
 */
int budget_offer(struct gbudget *b, const struct gviol *v, int64_t now);
/* Closes every open minute with the tau known so far and sets a new budget. Takes b->mu. */
void budget_set(struct gbudget *b, int reports_per_min);
/* Whether the shipping side has new candidates to look at (read under b->mu, or by its one thread). */
int budget_pending(const struct gbudget *b);
/* The shipping side: closes the minutes over at now (every one with all), captures the new
 * candidates, keeps their bytes within bounds, ships what closed. */
void budget_work(struct gbudget *b, int64_t now, int all);

#endif
