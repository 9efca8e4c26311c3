/*
 * aoi: Area-Of-Interest extraction (docs/mining.md section 3, docs/aoi.md).
 *
 * From one trace stream and its symptom (thread, window), choose the events
 * the miner analyses: the whole stream, the symptom thread's events in the
 * window, the vertices of the stream's wait graph (default), or the critical
 * path only. Then the content filter keeps the events whose stack has a frame
 * matching an include glob and none matching an exclude glob.
 *
 * Times are closed intervals: an event's span is [ts, ts + dur], and two spans
 * overlap when they share at least one instant, touching ends included.
 */
#ifndef SM_AOI_H
#define SM_AOI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"

enum aoi_mode { AOI_STREAM, AOI_THREAD, AOI_WAITGRAPH, AOI_CRITICAL };

/* "stream", "thread", "waitgraph", "critical" (exact, lower case). Returns 0 or -1. */
int aoi_mode_parse(const char *s, enum aoi_mode *out);
/* The name aoi_mode_parse() accepts; "?" for a value outside the enum. */
const char *aoi_mode_name(enum aoi_mode m);

/* Reusable workspace for one thread; owns scratch memory and an error message. */
struct aoi;

/* Returns a workspace, or NULL on out of memory. Caller frees. */
struct aoi *aoi_open(void);
/* NULL-safe. */
void aoi_free(struct aoi *a);

/*
 * The AOI of one stream: events[0..n) (not necessarily sorted) and its symptom
 * (tid, start_ns, end_ns; sym may be NULL for AOI_STREAM only). On success *out
 * points to the ascending indexes of the selected events, *nout their count;
 * owned by `a`, valid until the next extraction. Returns 0 or -1 with
 * aoi_error() set (out of memory, more than UINT32_MAX - 1 events, no symptom).
 * A window with end_ns < start_ns is empty: it overlaps nothing.
 */
int aoi_extract(struct aoi *a, const struct wire_event *events, size_t n,
		const struct wire_symptom *sym, enum aoi_mode mode, const uint32_t **out,
		size_t *nout);

/*
 * The edges found by the last extraction, as pairs (from, to) of event indexes
 * sorted by from, then to: AOI_WAITGRAPH: every edge of the wait graph, a wait
 * event -> an event of its readier thread overlapping it; AOI_CRITICAL: a
 * followed wait -> each event met on its readier's part of the path. None for
 * the other modes. Owned by `a`, valid until the next extraction.
 */
size_t aoi_edges(const struct aoi *a, const uint32_t (**edges)[2]);

/* One piece of a critical path: from from_ns to to_ns the path is on thread tid. */
#define AOI_GAP UINT32_MAX
struct aoi_segment {
	int64_t tid;
	int64_t from_ns, to_ns;  /* from_ns < to_ns */
	uint32_t event;          /* the event that covers this time, or AOI_GAP (none recorded) */
};

/*
 * For AOI_CRITICAL, the path of the last extraction as segments sorted by time:
 * each starts where the previous one ends, and together they cover exactly
 * [start_ns, end_ns] of the symptom (no segments for an empty or zero-length
 * window). None for the other modes. Owned by `a`, valid until the next
 * extraction.
 */
size_t aoi_path(const struct aoi *a, const struct aoi_segment **segs);

/* The last error message ("" when none). */
const char *aoi_error(const struct aoi *a);

/*
 * Content filter (mining.md section 3): include and exclude glob lists on frame
 * strings (fnmatch without flags, util_glob). A stack is kept iff (there is no
 * include pattern or some frame matches an include) and no frame matches an
 * exclude.
 */
struct aoi_filter;

/* The patterns are copied. Returns the filter, or NULL on out of memory. Caller frees. */
struct aoi_filter *aoi_filter_open(const char *const *include, size_t ninclude,
				   const char *const *exclude, size_t nexclude);
/* NULL-safe. */
void aoi_filter_free(struct aoi_filter *f);
/* Whether one stack, given as its frame strings, is kept. */
bool aoi_filter_keep(const struct aoi_filter *f, const char *const *frames, size_t nframes);
/* True when the filter has no pattern at all (it keeps everything). */
bool aoi_filter_empty(const struct aoi_filter *f);
/*
 * keep[i] = whether stacks[i] is kept, for a whole stream's stack table: each
 * frame string is matched once, not once per stack using it. Frame indexes must
 * be < nframes (wire_parse guarantees it); any other counts as matching no
 * pattern. Returns 0, or -1 on out of memory.
 */
int aoi_filter_stacks(const struct aoi_filter *f, const char *const *frames, size_t nframes,
		      const struct wire_stack *stacks, size_t nstacks, bool *keep);

#endif
