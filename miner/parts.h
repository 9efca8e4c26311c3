/*
 * parts: a run's AOI extraction cut into parts that workers on any machine
 * take from a queue (the table run_parts). The worker that took the run (its
 * coordinator) selects the streams, cuts them into parts of consecutive stream
 * ids and queues them; any worker takes a queued part (or one whose worker
 * stopped beating), extracts the AOI of its streams and stores the result, its
 * weighted sequence database, packed; the coordinator works on its own run's
 * parts too, merges the others' and deletes the parts when the run ends.
 *
 * The packed form of a part's result: "SMPE" then per entry, little-endian,
 * stream ref (8 bytes), cost in ns (8), stack id (4), events (4), kind (1,
 * 'r' or 'w'). Entries come in no set order.
 */
#ifndef SM_PARTS_H
#define SM_PARTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "miner/params.h"

struct buf;
struct miner;

/* One collapsed AOI entry: the AOI events of one stream with one stack and kind. */
struct parts_entry {
	int64_t stream_ref;
	int64_t cost;
	uint32_t stack;
	uint32_t events;
	uint8_t kind;            /* WIRE_RUN or WIRE_WAIT */
};

#define PARTS_ENTRY_BYTES 25
/* A part's packed result may not exceed this (the database's bytea limit is 1 GB). */
#define PARTS_MAX_BYTES ((size_t)512 << 20)

/* Appends the header to an empty b, then one entry per call (sticky errors, see buf.h). */
void parts_pack_begin(struct buf *b);
void parts_pack(struct buf *b, const struct parts_entry *e);
/* Reads the entry at *pos of a packed result and advances *pos. Returns 1, 0 at the end, or -1
 * when the bytes are not a packed result (a bad header, a cut entry, an unknown kind). */
int parts_unpack(const unsigned char *p, size_t n, size_t *pos, struct parts_entry *e);

/* ---- the queue (on the worker's connection; errors are left in miner_error()) ---- */

/* Queues a run's parts: refs (ascending) cut into parts of per_part streams, part k holding
 * refs[k * per_part ...]. Earlier parts of the run (of a coordinator that died) are dropped first.
 * Wakes the idle workers. Returns the number of parts, or -1. */
int parts_create(struct miner *m, int64_t run_id, const int64_t *refs, size_t n, size_t per_part);

/* A part taken by this worker. */
struct parts_claim {
	int64_t run_id;
	int part;
	char aoi[32];            /* the run's AOI mode */
	enum run_kinds kinds;    /* the kinds it mines: which events its AOI needs */
};

/* Takes a queued part of a running run, or one whose worker has not beaten for the lease; a part
 * taken 3 times without an end fails instead. With a run_id (a coordinator): only that run's, and
 * only while the run is still this worker's. Returns 1 with *c filled, 0 when there is none, -1 on
 * error. */
int parts_claim(struct miner *m, int64_t run_id, struct parts_claim *c);

/* Ends a part this worker took: done with its packed result (NULL: kept by the coordinator, which
 * did it itself, and only while the run is still its own), or back to the queue (error NULL:
 * stopped, the attempt does not count; else it counts, and a part whose third attempt failed fails
 * with the last error). Returns 0, 1 when the part is no longer this worker's (taken over, or its
 * run ended), -1 on error. */
int parts_done(struct miner *m, const struct parts_claim *c, const struct buf *packed, int64_t events,
	       int64_t aoi_events, int64_t ms);
int parts_release(struct miner *m, const struct parts_claim *c, const char *error);

/* How a run's parts stand: *pending are queued or running; *failed, with the first failure's
 * message in m's error. 0, or -1 (also when another worker has taken the run over). */
int parts_status(struct miner *m, int64_t run_id, int *pending, int *failed);

/* The parts of the run done by other workers: part numbers ascending into *parts (caller frees),
 * their count returned, or -1. */
int parts_list_done(struct miner *m, int64_t run_id, int **parts);
/* One done part's result, read in place from the database's answer: each(arg, e) for every entry
 * (a return other than 0 stops there and is returned), and the part's counts. 0, or -1 with the
 * error in m (also for a damaged result). */
int parts_fetch(struct miner *m, int64_t run_id, int part, int (*each)(void *arg, const struct parts_entry *e),
		void *arg, int64_t *events, int64_t *aoi_events);

/* Deletes the run's parts. Errors are ignored: the parts go with the run at the latest. */
void parts_drop(struct miner *m, int64_t run_id);

#endif
