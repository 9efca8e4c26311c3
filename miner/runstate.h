/*
 * runstate: what the stages of a mining run share - the pipeline (run.c), the reading of events
 * (extract.h), the parts (partrun.h) and the storing (results.h): the selected streams, the AOI
 * entries, the frames of their stacks, the patterns, the progress the heartbeat reports.
 * Internal to the miner. The stages fill it in this order: selection, entries, stacks, patterns.
 */
#ifndef SM_RUNSTATE_H
#define SM_RUNSTATE_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"
#include "common/vec.h"
#include "common/wire.h"
#include "miner/aoi.h"
#include "miner/heartbeat.h"
#include "miner/params.h"

struct arena;
struct intern;
struct miner;

/* Costs are summed saturating at INT64_MAX (the database's bigint): a stream of
 * absurd durations must not wrap a run's totals. */
static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;

	return __builtin_add_overflow(a, b, &r) || r > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : r;
}

/* Milliseconds since t0 (util_now_mono_ns()), for the run's timings. */
static inline int64_t runstate_ms_since(int64_t t0)
{
	return (util_now_mono_ns() - t0) / 1000000;
}

/* AOI events of one stream collapsed by (kind, stack). */
struct entry {
	uint32_t stack;
	uint32_t stream;     /* index into run.refs */
	int64_t cost;
	uint32_t events;
	uint8_t kind;        /* WIRE_RUN or WIRE_WAIT */
};

/* At most this many connections read a run's events at once (extract.h), one per thread. */
#define RUNSTATE_MAX_READERS 8

struct stream_events {
	uint32_t idx;                 /* into run.refs */
	size_t first, n;              /* range in the chunk's event vector */
};

struct runstate {
	struct miner *m;
	int64_t id;                   /* 0: a part of another worker's run */
	const struct run_params *p;   /* NULL for such a part */
	enum aoi_mode mode;
	enum run_kinds kinds;         /* the kinds mined (a part: its run's) */
	struct beat_progress prog;
	/* selected streams, violating and baseline, by id */
	int64_t *refs;
	struct wire_symptom *sym;
	size_t nstreams;
	size_t nbase;                 /* of them baseline */
	uint8_t *base;                /* per stream: 1 baseline */
	double *weight;               /* per stream: its sampling weight (>= 1) */
	uint32_t *utype;              /* per stream: its unit type, 0 .. nutypes - 1 */
	uint32_t nutypes;
	/* the current chunk */
	struct vec events;            /* struct wire_event */
	struct vec chunk;             /* struct stream_events */
	/* results of AOI extraction: the violating streams', the baseline's */
	struct vec entries;           /* struct entry */
	struct vec bentries;
	struct aoi **aoi;             /* one per thread */
	int threads;
	uint64_t nread;               /* events read */
	PGconn *readers[RUNSTATE_MAX_READERS];   /* opened by the first read in shares */
	int max_readers;              /* the most connections that read at once */
	int readers_cap;              /* 0, or how many could be opened when one could not */
	bool split;                   /* the AOI extraction went to parts */
	/* timings */
	int64_t t_select, t_read, t_filter, t_mine;
	struct arena *arena;
};

struct pattern {
	int64_t id;          /* in the table patterns (reserved from its sequence) */
	uint8_t kind;
	uint32_t *frames;
	size_t len;
	uint64_t cost;
	uint64_t events;
	uint32_t streams;
	int32_t *stacks;
	size_t nstacks;
	double est_cost;     /* sum over its AOI events of their stream's weight x cost */
};

/* Frames of every distinct stack in the entries, and whether the frame filters keep it. */
struct stackinfo {
	struct intern *ids;        /* stack id (4 bytes) -> index */
	uint32_t **frames;
	uint32_t *len;
	bool *keep;
	size_t n;
};

/* A run's state for run id (0: a part of another worker's run, p NULL: kinds both until the
 * caller says) with AOI mode aoi, its progress at phase; its workspaces allocated. 0, or -1 with
 * the error on m; runstate_release() either way. */
int runstate_init(struct runstate *run, struct miner *m, int64_t id, const struct run_params *p, const char *aoi,
		  const char *phase);
void runstate_release(struct runstate *run);
/* Closes the readers' connections (extract.h), which the next read opens again. */
void runstate_close_readers(struct runstate *run);

/* The selected streams (sql gives id, symptom tid, start, end, baseline, unit type, weight by id)
 * into the run's refs, symptoms, baseline flags, unit types and weights (in its arena). 0, or -1
 * with the error on the run's miner. */
int runstate_select(struct runstate *run, const char *sql);

#endif
