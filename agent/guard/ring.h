/*
 * ring: a thread's event ring, the agent's in-memory record of what the
 * thread did (wait events with their stacks, CPU samples), overwritten oldest
 * first, read by the shipping thread when a violation needs the events of a
 * time window.
 *
 * One writer at a time: the owning thread, or its own signal handler (the
 * handler gives up when it interrupted a write, and says so in the drop
 * count). Readers on other threads take a copy and keep only the records the
 * writer cannot have overwritten while they copied: the writer moves `tail`
 * past what it is about to overwrite before it writes. Variable-length
 * records, 8-byte aligned, never split at the end of the buffer (a padding
 * record fills the rest). No locks, no allocation while recording: safe in a
 * signal handler.
 */
#ifndef SM_GUARD_RING_H
#define SM_GUARD_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum grec_kind { GREC_PAD = 0, GREC_RUN = 1, GREC_WAIT = 2 };

/* A record: a header and its stack, innermost frame first (as unwound). */
struct grec {
	uint32_t len;       /* bytes, header included, a multiple of 8 */
	uint16_t kind;      /* enum grec_kind */
	uint16_t nframes;
	uint16_t call;      /* wrapped call in progress (a guard call id), 0 = none */
	uint16_t flags;
	uint32_t tid;       /* in the ring the process's threads share: the writer; in a thread's own: 0 */
	int64_t ts;         /* CLOCK_MONOTONIC ns, start of the span */
	int64_t dur;
	int32_t readier;    /* wait events: the readier thread, 0 = unknown or external */
	int32_t req;        /* the client (descriptor + 1) the thread worked for, in a unit of an
			     * epoll/poll/select loop (gthread.acur); 0 = none */
	uint64_t ip[];
};

#define GREC_F_EXACT_PC 1   /* ip[0] is an interrupted pc, not a return address */
#define GREC_F_DETECT 2     /* the stack taken when the violation was detected */
#define GREC_F_ASYNC 4      /* an async wait: the stack at the read of an upstream's reply (unit.c) */

struct gring {
	_Atomic uint64_t head;   /* logical end of the last committed record */
	_Atomic uint64_t tail;   /* logical start of the oldest record that may be intact */
	_Atomic uint64_t drops;  /* records not written (a write was in progress, or too big) */
	_Atomic int writing;
	uint32_t size;           /* bytes of data, a power of two; 0 = no buffer */
	unsigned char *data;
	/* the write in progress (one writer at a time) */
	uint32_t w_pad;          /* padding placed before the record */
	uint32_t w_max;          /* frames reserved */
};

/* The size of a ring asked for bytes: a power of two, at least 4 KiB, at most 1 GiB. */
size_t gring_round(size_t bytes);
/* Maps a buffer of `bytes` (rounded up to a power of two, at least 4 KiB). Returns 0 or -1. */
int gring_init(struct gring *r, size_t bytes);
/* Unmaps the buffer. */
void gring_release(struct gring *r);
/* Forgets every record (the owner, or anyone once the owner is gone). */
void gring_reset(struct gring *r);

/*
 * Starts a record with room for max_frames frames: returns it for the caller to
 * fill (ts, dur, ip[] ...), or NULL when a write is already in progress on this
 * ring (a signal handler interrupting its owner) or the ring is too small.
 * Finish with gring_commit(), always.
 */
struct grec *gring_begin(struct gring *r, uint32_t max_frames);
/* Publishes the record with its actual number of frames (<= max_frames). */
void gring_commit(struct gring *r, struct grec *rec, uint32_t nframes);
/* Gives up a begun record. */
void gring_abort(struct gring *r);

/*
 * Copies the intact records into out (at most cap bytes, which must be at
 * least the ring's size for a full copy). Returns the bytes copied: records
 * back to back, oldest first, each a struct grec. 0 when empty.
 */
size_t gring_snapshot(struct gring *r, void *out, size_t cap);

/* The same, of a ring whose buffer the caller knows: data, size (a power of two) are the caller's,
 * head and tail r's (another process may write them: the copy stays within size and cap). */
size_t gring_copy(const struct gring *r, const unsigned char *data, uint32_t size, void *out, size_t cap);

/* Iteration over a snapshot: the record at *off, advancing *off; NULL at the end. */
const struct grec *gring_next(const void *snap, size_t len, size_t *off);

#endif
