/*
 * export: weighted call stacks written in the formats other profilers' viewers
 * open: pprof (gzipped profile.proto, for `go tool pprof`, Pyroscope and
 * Parca), speedscope's JSON (speedscope.app) and collapsed stacks (FlameGraph,
 * inferno); and the API's downloads that fill one with a cluster's, a run's, a
 * stream's or two runs' stacks (GET .../profile?format=&kind=). docs/import.md
 * says what each format keeps.
 */
#ifndef SM_EXPORT_H
#define SM_EXPORT_H

#include "common/buf.h"
#include "web/request.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum export_format { EXPORT_PPROF, EXPORT_SPEEDSCOPE, EXPORT_FOLDED };
enum export_kind { EXPORT_RUN = 0, EXPORT_WAIT = 1 };

struct export;

/* Parses "pprof", "speedscope" or "folded"; 0 or -1. */
int export_format_parse(const char *s, enum export_format *f);
/* The file name suffix and the Content-Type of a format. */
const char *export_suffix(enum export_format f);
const char *export_media(enum export_format f);

/* An empty export titled title (copied), of one profile, or of two (a comparison: A and B).
 * NULL when out of memory. Caller frees. */
struct export *export_open(const char *title, bool comparison);
void export_free(struct export *x);   /* NULL-safe */
/*
 * Adds cost_ns of events with the stack names[0..n) (outermost first, copied) to profile
 * side (0; a comparison's B is 1), of kind, on thread tid (-1: none). Returns 0, or -1
 * (out of memory, too many frames or samples) with export_error() set.
 */
int export_add(struct export *x, int side, enum export_kind kind, const char *const *names,
	       size_t n, int64_t tid, uint64_t cost_ns, uint64_t events);
/* A comparison's stream counts, for its differences per stream (the pprof "diff" value). */
void export_set_streams(struct export *x, uint64_t a, uint64_t b);
/* Writes the export in format f to out. Returns 0, or -1 (out full or out of memory) with
 * export_error() set. */
int export_write(struct export *x, enum export_format f, struct buf *out);
const char *export_error(const struct export *x);

/* GET /api/v1/clusters/{id}/profile */
void export_get_cluster_profile(struct req *rq);
/* GET /api/v1/runs/{id}/profile */
void export_get_run_profile(struct req *rq);
/* GET /api/v1/runs/{id}/compare/{id}/profile */
void export_get_compare_profile(struct req *rq);
/* GET /api/v1/streams/{name}/profile */
void export_get_stream_profile(struct req *rq);

#endif
