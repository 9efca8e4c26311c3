/*
 * costwarm: sm-web computes the attributions (attribution_compute()) and fits
 * the cost models (attribution_costmodel()) of each newly done run's costliest
 * clusters and problems into the costcache on a thread of its own, so that the
 * first view of what an analyst opens first does not pay for them (a cluster
 * of 1,800 streams: 117 ms for the model, 11 ms once kept). What is outside the run's costliest, or viewed before its turn,
 * is fitted at its first request as before.
 */
#ifndef SM_WEB_COSTWARM_H
#define SM_WEB_COSTWARM_H

#include "web/costcache.h"

#include <stdatomic.h>

struct costwarm;

/* Starts the thread: every poll_ms it looks for runs done since the last look (at start, the
 * latest done run and those done in the 5 minutes before it) and computes the attributions and
 * models of their per_run costliest clusters and per_run costliest problems that cache does not
 * hold yet, through its own connection (conninfo; it
 * reconnects after an outage). Before each computation it waits, a second at most, while *busy (the
 * server's requests in hand; NULL: never) is above 0. NULL when the thread cannot start, with err.
 * Caller stops it with costwarm_stop(); busy must outlive it. */
struct costwarm *costwarm_start(const char *conninfo, struct costcache *cache, int per_run, int poll_ms,
				const atomic_int *busy, char *err, size_t errlen);
/* Stops the thread and frees it: a query under way is cancelled, a connection being made ends
 * first (its connect_timeout at most). NULL-safe. */
void costwarm_stop(struct costwarm *w);
/* Models fitted so far. */
uint64_t costwarm_fitted(const struct costwarm *w);
/* Attributions computed so far. */
uint64_t costwarm_attributed(const struct costwarm *w);
/* Milliseconds its computations waited for the server's requests so far. */
uint64_t costwarm_yielded_ms(const struct costwarm *w);

#endif
