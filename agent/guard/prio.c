/* prio: priority sampling of a minute's violations (see prio.h). */
#include "agent/guard/prio.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

void prio_pool_init(struct prio_item *items, uint32_t cap)
{
	for (uint32_t i = 0; i < cap; i++)
		items[i] = (struct prio_item){ 0, 0, 0, PRIO_NONE, 0 };
}

static void raise_tau(struct prio_group *g, double q)
{
	if (q > g->tau)
		g->tau = q;
}

int32_t prio_offer(struct prio_item *items, uint32_t cap, struct prio_group *g, uint32_t gid, uint32_t r,
		   double w, double u, int *evicted)
{
	double q = w / u;
	int32_t at = -1;

	*evicted = 0;
	if (g->held < r) {
		for (uint32_t i = 0; i < cap && at < 0; i++)
			if (items[i].group == PRIO_NONE && !items[i].closed)
				at = (int32_t)i;
		if (at < 0)
			return PRIO_FULL;
		g->offered++;
		g->held++;
		items[at] = (struct prio_item){ q, w, 0, gid, 0 };
		return at;
	}
	g->offered++;
	/* full: the lowest priority kept gives way to a higher one */
	for (uint32_t i = 0; i < cap; i++)
		if (items[i].group == gid && (at < 0 || items[i].q < items[at].q))
			at = (int32_t)i;
	if (at < 0 || q <= items[at].q) {
		raise_tau(g, q);
		return PRIO_DROPPED;
	}
	raise_tau(g, items[at].q);
	items[at].q = q;
	items[at].w = w;
	*evicted = 1;
	return at;
}

double prio_weight(double tau, double w)
{
	return tau > w ? tau / w : 1;
}

uint32_t prio_close(struct prio_item *items, uint32_t cap, struct prio_group *g, uint32_t gid)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < cap && n < g->held; i++)
		if (items[i].group == gid) {
			items[i].weight = prio_weight(g->tau, items[i].w);
			items[i].group = PRIO_NONE;
			items[i].closed = 1;
			n++;
		}
	g->offered = 0;
	g->tau = 0;
	g->held = 0;
	return n;
}

void prio_release(struct prio_item *it)
{
	*it = (struct prio_item){ 0, 0, 0, PRIO_NONE, 0 };
}

/* splitmix64: a fast generator of the process's own (seeded per process, never rand()). */
static uint64_t prio_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

double prio_uniform(uint64_t *state)
{
	return (double)((prio_rand(state) >> 11) + 1) * 0x1.0p-53;
}

uint64_t prio_seed(void)
{
	uint64_t s = 0;
	struct timespec ts;

	/* never blocks: early at boot the pool may not be ready, and the clock and pid still differ */
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s))
		s = 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s ^= (uint64_t)ts.tv_nsec << 20 ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 40;
	return prio_rand(&s);
}
