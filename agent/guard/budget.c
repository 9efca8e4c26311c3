/* budget: a guarded process's shipping budget, priority sampling per unit type and minute (see budget.h). */
#include "agent/guard/budget.h"
#include "common/arena.h"

#include <string.h>

static void lock(struct gbudget *b)
{
	if (b->mu)
		pthread_mutex_lock(b->mu);
}

static void unlock(struct gbudget *b)
{
	if (b->mu)
		pthread_mutex_unlock(b->mu);
}

void budget_init(struct gbudget *b, pthread_mutex_t *mu, int reports_per_min, const struct gbudget_ops *ops,
		 struct guard_counts *n)
{
	/* b is zero already (a static, or calloc): writing the whole of it would touch every page */
	b->mu = mu;
	b->reports_per_min = reports_per_min;
	b->ops = *ops;
	b->n = n;
	b->prng = prio_seed();
	prio_pool_init(b->held, GUARD_HELD);
}

void budget_reset(struct gbudget *b)
{
	memset(b->pg, 0, sizeof(b->pg));
	prio_pool_init(b->held, GUARD_HELD);
	memset(b->caps, 0, sizeof(b->caps));
	b->held_new = 0;
	b->prng = prio_seed();
}

void budget_release(struct gbudget *b)
{
	for (uint32_t i = 0; i < GUARD_HELD; i++) {
		arena_free(b->caps[i].a);
		memset(&b->caps[i], 0, sizeof(b->caps[i]));
	}
}

static uint32_t group_id(int32_t loop, uint32_t tslot)
{
	return (uint32_t)loop * GUARD_TSLOTS + tslot;
}

/* The violation's size: its excess over its threshold (its duration without one), at least 1 ns. */
static double violation_size(const struct gviol *v)
{
	int64_t x = v->threshold >= 0 ? v->dur - v->threshold : v->dur;

	return x > 1 ? (double)x : 1;
}

/* Under the lock: the minutes over at now close (every open one with all). */
static void close_minutes(struct gbudget *b, int64_t now, int all)
{
	for (int32_t l = 0; l < GP_MAX_LOOPS; l++)
		for (uint32_t t = 0; t < GUARD_TSLOTS; t++) {
			struct prio_group *g = &b->pg[l][t];

			if (g->offered && (all || now - g->opened >= GUARD_MINUTE_NS))
				prio_close(b->held, GUARD_HELD, g, group_id(l, t));
		}
}

int budget_offer(struct gbudget *b, const struct gviol *v, int64_t now)
{
	/* deferred requests have a budget of their own per loop: they never push a unit type's out */
	uint32_t tslot = v->async ? GUARD_TSLOT_ASYNC :
			 v->type >= 0 && v->type < GP_MAX_TYPES ? (uint32_t)v->type : GP_MAX_TYPES;
	struct prio_group *g;
	int evicted = 0;
	int32_t at;

	atomic_fetch_add(&b->n->violations, 1);
	if (v->loop < 0 || v->loop >= GP_MAX_LOOPS)
		return 0;
	lock(b);
	g = &b->pg[v->loop][tslot];
	/* a minute over that the shipping side has not closed yet closes here */
	if (g->offered && now - g->opened >= GUARD_MINUTE_NS) {
		prio_close(b->held, GUARD_HELD, g, group_id(v->loop, tslot));
		b->held_new++;
	}
	if (!g->offered)
		g->opened = now;
	at = prio_offer(b->held, GUARD_HELD, g, group_id(v->loop, tslot), (uint32_t)b->reports_per_min,
			violation_size(v), prio_uniform(&b->prng), &evicted);
	if (at >= 0) {
		b->held_v[at] = *v;
		b->held_tag[at]++;
		b->held_new++;
	}
	unlock(b);
	if (at == PRIO_DROPPED || evicted)
		atomic_fetch_add(&b->n->suppressed, 1);
	else if (at == PRIO_FULL)
		atomic_fetch_add(&b->n->queue_drops, 1);
	return at >= 0;
}

void budget_set(struct gbudget *b, int reports_per_min)
{
	lock(b);
	close_minutes(b, 0, 1);
	b->reports_per_min = reports_per_min;
	b->held_new++;
	unlock(b);
}

int budget_pending(const struct gbudget *b)
{
	return b->held_new != 0;
}

/* ---- the shipping side ---- */

static int captured(const struct gbudget *b, uint32_t i, uint32_t tag)
{
	return (b->caps[i].a || b->caps[i].failed) && b->caps[i].tag == tag;
}

static size_t captured_bytes(const struct gbudget *b, uint32_t i)
{
	return b->caps[i].a ? b->caps[i].bytes : 0;
}

/* Captures v's stream as it stands, as candidate i's violation tag. */
static void capture(struct gbudget *b, uint32_t i, uint32_t tag, const struct gviol *v)
{
	struct gcapture *c = &b->caps[i];
	int rc;

	arena_free(c->a);
	memset(c, 0, sizeof(*c));
	c->a = arena_open(GUARD_HELD_STREAM);
	rc = c->a ? b->ops.build(b->ops.ctx, v, c->a, &c->ws) : -1;
	c->tag = tag;
	if (rc < 0) {
		arena_free(c->a);
		c->a = NULL;
		c->failed = 1;
		atomic_fetch_add(&b->n->lost, 1);
		return;
	}
	c->empty = rc == 0;
	c->bytes = arena_reserved(c->a);
}

static void capture_ship(struct gbudget *b, uint32_t i, double weight)
{
	struct gcapture *c = &b->caps[i];

	if (c->a && !c->empty) {
		c->ws.weight = weight;
		b->ops.deliver(b->ops.ctx, &c->ws);
	}
	arena_free(c->a);
	memset(c, 0, sizeof(*c));
}

/* Captures the candidates kept since the last look, and the closed ones not captured yet. */
static void capture_new(struct gbudget *b)
{
	for (uint32_t i = 0; i < GUARD_HELD; i++) {
		struct gviol v;
		uint32_t tag = 0;
		int need;

		lock(b);
		need = (b->held[i].group != PRIO_NONE || b->held[i].closed) && !captured(b, i, b->held_tag[i]);
		if (need) {
			v = b->held_v[i];
			tag = b->held_tag[i];
		}
		unlock(b);
		/* an item evicted meanwhile has another tag now: captured again at the next look */
		if (need)
			capture(b, i, tag, &v);
	}
}

/* Ships the candidates whose minute closed, with their weights. A closed item is the shipping
 * side's until released: no offer touches it. */
static void ship_closed(struct gbudget *b)
{
	for (uint32_t i = 0; i < GUARD_HELD; i++) {
		struct gviol v;
		double w = 0;
		uint32_t tag = 0;
		int closed;

		lock(b);
		closed = b->held[i].closed;
		if (closed) {
			w = b->held[i].weight;
			tag = b->held_tag[i];
			v = b->held_v[i];
		}
		unlock(b);
		if (!closed)
			continue;
		/* closed before the shipping side saw it (by a later violation of its type) */
		if (!captured(b, i, tag))
			capture(b, i, tag, &v);
		capture_ship(b, i, w);
		lock(b);
		prio_release(&b->held[i]);
		unlock(b);
	}
}

/* Over GUARD_HELD_BYTES of streams, or over GUARD_HELD_HIGH candidates (a budget larger than the
 * pool): the open minute holding the most bytes (candidates) closes early and ships. */
static void trim_held(struct gbudget *b)
{
	for (;;) {
		size_t total = 0, most = 0, nheld = 0;
		uint32_t gid = PRIO_NONE;
		int by_bytes;

		for (uint32_t i = 0; i < GUARD_HELD; i++)
			total += captured_bytes(b, i);
		memset(b->by_group, 0, sizeof(b->by_group));
		lock(b);
		for (uint32_t i = 0; i < GUARD_HELD; i++)
			nheld += b->held[i].group != PRIO_NONE;
		by_bytes = total > GUARD_HELD_BYTES;
		if (!by_bytes && nheld <= GUARD_HELD_HIGH) {
			unlock(b);
			return;
		}
		for (uint32_t i = 0; i < GUARD_HELD; i++) {
			uint32_t g = b->held[i].group;

			if (g != PRIO_NONE && (b->by_group[g] += by_bytes ? captured_bytes(b, i) : 1) > most) {
				most = b->by_group[g];
				gid = g;
			}
		}
		if (gid != PRIO_NONE) {
			prio_close(b->held, GUARD_HELD, &b->pg[gid / GUARD_TSLOTS][gid % GUARD_TSLOTS], gid);
			atomic_fetch_add(&b->n->early_closes, 1);
		}
		unlock(b);
		if (gid == PRIO_NONE)
			return;
		ship_closed(b);
	}
}

void budget_work(struct gbudget *b, int64_t now, int all)
{
	lock(b);
	b->held_new = 0;
	close_minutes(b, now, all);
	unlock(b);
	capture_new(b);
	trim_held(b);
	ship_closed(b);
}
