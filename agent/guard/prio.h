/*
 * prio: priority sampling (Duffield, Lund and Thorup 2007) of a minute's
 * violations of one unit type, as guard.md "Shipping budget" defines it. Pure
 * arithmetic over memory the caller owns, so that it is tested without a
 * process (tests/unit/test_guard.c).
 *
 * A violation of size w (its excess over the threshold, at least 1 ns) draws
 * u uniform in (0, 1] and gets the priority q = w / u. A group keeps the r
 * highest priorities of its minute in a pool of items shared by every group;
 * tau is the highest priority it did not keep, which is the (r + 1)-th highest
 * of the minute (0 when r or fewer came). When the minute closes each kept
 * item weighs max(1, tau / w): sum(weight * m) over the kept items estimates
 * sum(m) over all of the minute's violations without bias, for any measure m.
 *
 * Items: free (group PRIO_NONE, not closed), held by an open group, or closed
 * (out of their group, weight set) until the caller releases them.
 */
#ifndef SM_GUARD_PRIO_H
#define SM_GUARD_PRIO_H

#include <stdint.h>

#define PRIO_NONE UINT32_MAX

struct prio_item {
	double q;            /* priority w / u */
	double w;            /* size */
	double weight;       /* set when its group's minute closed */
	uint32_t group;      /* the open group holding it, PRIO_NONE otherwise */
	uint8_t closed;      /* its minute closed; released by prio_release() */
};

struct prio_group {
	uint64_t offered;    /* violations offered this minute (kept or not) */
	double tau;          /* the highest priority not kept this minute, 0 if none */
	uint32_t held;       /* its items in the pool */
	int64_t opened;      /* the caller's: when its minute began */
};

enum { PRIO_DROPPED = -1, PRIO_FULL = -2 };

/* Every item free. */
void prio_pool_init(struct prio_item *items, uint32_t cap);

/*
 * Offers a violation of size w (> 0) with u in (0, 1] to group g (number gid) whose budget is r.
 * Returns the index of the item now holding it; PRIO_DROPPED when it is sampled away (its
 * priority raised tau); PRIO_FULL when g holds fewer than r but the pool has no free item (nothing
 * changed: the caller counts a loss). *evicted is set to 1 when the returned item held another
 * violation of g, now sampled away (its priority raised tau), 0 otherwise.
 */
int32_t prio_offer(struct prio_item *items, uint32_t cap, struct prio_group *g, uint32_t gid, uint32_t r,
		   double w, double u, int *evicted);

/* max(1, tau / w): the weight of a kept violation of size w. */
double prio_weight(double tau, double w);

/* Closes g's minute with the tau known so far: its items get their weights and become closed;
 * g starts afresh (nothing offered). Returns how many items it closed. */
uint32_t prio_close(struct prio_item *items, uint32_t cap, struct prio_group *g, uint32_t gid);

/* A closed item shipped (or given up): free again. */
void prio_release(struct prio_item *it);
/* Uniform in (0, 1]: 53 random bits, never 0 (so that q = w / u is finite). */
double prio_uniform(uint64_t *state);
/* A seed from the kernel's random bytes (getrandom), mixed with the pid and the clock. */
uint64_t prio_seed(void);

#endif
