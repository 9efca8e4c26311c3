/*
 * extract: phase 2 of a run in one piece. The events of some of the run's selected streams are
 * read - from the standby of --db-read once it has caught up (standby.h), else from the primary
 * through binary COPYs (copyread.h): with the threads and the events for it, in shares on
 * connections of their own (the run's readers, runstate.h), each share's streams' AOI extracted
 * by the thread that reads them; else on the worker's connection in chunks whose AOI is
 * extracted on all cores (aoi.h) - and collapsed by (stream, kind, stack) into the run's entries
 * (violating streams) and bentries (baseline streams). Only the events the AOI of the kinds mined
 * can depend on are read. The order of the entries is not set.
 */
#ifndef SM_EXTRACT_H
#define SM_EXTRACT_H

#include <stdbool.h>
#include <stddef.h>

struct runstate;
struct vec;
struct wire_event;

/* The streams run->refs[first .. end): all of the temporary table sm_sel, or (part) the part in
 * sm_part, which the COPY joins. Their events counted in run->nread, their AOI in the entries and
 * the progress. 0, or -1 with the error on the run's miner. */
int extract_read(struct runstate *run, size_t first, size_t end, bool part);

/* ev[0 .. n) sorted by time, then duration, thread, kind, stack and readier, in O(n + k log k)
 * comparisons for k events out of that order: those below the last one kept are set aside in
 * aside (a vector of struct wire_event, the caller's, reused from call to call; caller frees),
 * sorted alone and merged back. 0, or -1 when out of memory (ev's order is then lost: the caller
 * drops them). */
int extract_sort_events(struct wire_event *ev, size_t n, struct vec *aside);

#endif
