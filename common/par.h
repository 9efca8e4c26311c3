/*
 * par: data parallelism over the cores, the one way the project splits work
 * between threads (Sim floors, pair search and medoids of the clusterer, the
 * miner's AOI extraction and BIDE).
 *
 * par_run(n, fn, ctx) calls fn(ctx, w) for every worker w in 0..n-1, each on
 * its own thread (worker 0 on the caller's), and returns when all have
 * returned. Every worker runs even when a thread cannot be started: its part
 * then runs on the caller's thread afterwards, so a worker may own a fixed
 * share of the work. Items handed out one at a time come from a par_items.
 */
#ifndef SM_PAR_H
#define SM_PAR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define PAR_MAX_THREADS 64

/* requested <= 0: one per online CPU; at most PAR_MAX_THREADS, at least 1. */
int par_threads(int requested);

/* Runs fn(ctx, w), w = 0..n-1 (n at most PAR_MAX_THREADS), and waits for all of them. */
void par_run(int n, void (*fn)(void *ctx, int w), void *ctx);

/* Items 0..n-1 handed out to whichever worker asks next. */
struct par_items {
	atomic_size_t next;
	size_t n;
};

static inline void par_items_init(struct par_items *it, size_t n)
{
	atomic_init(&it->next, 0);
	it->n = n;
}

/* The next item into *i; false when none is left. */
static inline bool par_take(struct par_items *it, size_t *i)
{
	*i = atomic_fetch_add_explicit(&it->next, 1, memory_order_relaxed);
	return *i < it->n;
}

#endif
