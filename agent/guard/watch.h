/*
 * watch: the watchdog's look at one process's units in flight (guard.md "Run time"), shared by
 * the agent's own watchdog thread and the host's collector (collect.c). A unit over its threshold
 * is flagged and its next CPU sample takes its stack; a thread asleep in a wrapped call is asked
 * for it once per call (ask: the agent's signal); a flagged unit still in flight hang_ns after its
 * start is shipped as it stands (hang: at the next look after its thread was asked for the stack
 * of the call it hangs in).
 */
#ifndef SM_GUARD_WATCH_H
#define SM_GUARD_WATCH_H

#include <stdint.h>

#include "agent/guard/rt.h"

struct gwatch_ops {
	void (*ask)(void *ctx, struct gslot *s);
	/* v: the unit of slot s as it stands (v->hang set), to offer to the shipping budget */
	void (*hang)(void *ctx, struct gslot *s, struct gviol *v);
	void *ctx;
};

/* One look at slots [0, n) at now. The slots may be another process's: only their state is read. */
void gwatch_slots(struct gslot *slots, uint32_t n, int64_t now, int64_t hang_ns, const struct gwatch_ops *ops);

#endif
