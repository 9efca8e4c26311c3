/*
 * rt: the state the agent's layers share (rt.h): G, and each thread's own.
 */
#include "agent/guard/rt.h"

#include <stddef.h>

static struct gslot slot_store[GUARD_MAX_THREADS];
static struct gring shared_store;

struct guard_rt G __attribute__((aligned(64))) = { .slots = slot_store, .shared_ring = &shared_store };
_Static_assert(offsetof(struct guard_rt, cfg.min_wait_ns) + sizeof(int64_t) <= 64,
	       "what every wrapped call reads fits G's first cache line");
__thread struct gthread guard_tls __attribute__((tls_model("initial-exec"), aligned(64)));
