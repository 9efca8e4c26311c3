/*
 * costcache: where a cluster's or a problem's cost is (attribution_compute())
 * and what it depends on (attribution_costmodel()), kept once computed. A run's
 * clusters, problems, sampled streams and counted values are written in the
 * transaction that stores the run and never change after it (a run mined again
 * gets new ids), so each later request is a copy instead of three mixtures and
 * two fits per numeric label over up to 2,000 streams, or a read of a value per
 * host of the fleet and two Fisher tests each. What a kept entry does not see:
 * sampled streams that retention deletes later, and, for a run stored before
 * its values were counted with it, streams deleted since (docs/analysis.md).
 * Bounded by the entries' bytes (the index over them adds at most 32 bytes an
 * entry), the least recently used going first; shared by every thread of the
 * server. The same holds for a cluster's flame graph as its page draws it (its
 * matched stacks are the run's too): sm-web keeps those in a cache of their own
 * (--flame-cache), so that a few large graphs do not push out the models.
 */
#ifndef SM_WEB_COSTCACHE_H
#define SM_WEB_COSTCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/buf.h"
#include "web/attribution.h"

struct costcache;

/* A cache of at most max_bytes (0: keeps nothing). NULL on out of memory. Caller frees with
 * costcache_free(). */
struct costcache *costcache_open(size_t max_bytes);
void costcache_free(struct costcache *c);   /* NULL-safe */

/* The model of (of, id), copied into out with its labels and words in a: 1 when it was kept, 0 when
 * not (or on out of memory: out is then empty). c may be NULL (nothing is kept). */
int costcache_get(struct costcache *c, enum attribution_of of, int64_t id, struct arena *a,
		  struct attribution_costmodel *out);

/* Keeps a copy of cm as the model of (of, id), dropping the least recently used entries to make
 * room; one larger than the whole cache, or out of memory, is not kept. */
void costcache_put(struct costcache *c, enum attribution_of of, int64_t id, const struct attribution_costmodel *cm);

/* The attribution of (of, id), as costcache_get() does for its model. */
int costcache_get_attribution(struct costcache *c, enum attribution_of of, int64_t id, struct arena *a,
			      struct attribution *out);

/* Keeps a copy of at as the attribution of (of, id), as costcache_put() does a model. */
void costcache_put_attribution(struct costcache *c, enum attribution_of of, int64_t id, const struct attribution *at);

/* The flame graph section of (of, id)'s page as it was drawn, appended to out: 1 when it was kept
 * and appended, 0 when not kept, -1 when kept but out could not take it (its error is sticky). */
int costcache_get_flame(struct costcache *c, enum attribution_of of, int64_t id, struct buf *out);

/* Keeps text[0..n) as the flame graph section of (of, id)'s page. The caller keeps only what a
 * later drawing would repeat byte for byte: no search or focus, every frame's name final. */
void costcache_put_flame(struct costcache *c, enum attribution_of of, int64_t id, const char *text, size_t n);

/* Models and attributions kept now, and the bytes of all entries. */
void costcache_usage(struct costcache *c, size_t *models, size_t *attributions, size_t *bytes);
/* Flame graphs kept now, and how many views were served one. */
void costcache_flames(struct costcache *c, size_t *kept, uint64_t *served);

#endif
