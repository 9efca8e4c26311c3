/*
 * stream: a violation's trace stream (guard.md "Inspection on violation",
 * wire-format.md), built from one guarded process's rings: the events of
 * every thread's ring that overlap the unit, the symptom thread's first, their
 * stacks named by the symbolizer (outermost first, the agent's own frames
 * replaced by the wrapped call they stand for), the unit type, threshold and
 * duration as labels.
 *
 * The process is seen through a struct gsrc: from the inside by the shipping
 * thread of the in-process agent (report.c), from the outside by the host's
 * collector (collect.c), whose view is a shared region the process writes and
 * which must not be trusted: every count, size and record read through it is
 * bounded here or by the source's callbacks.
 */
#ifndef SM_GUARD_STREAM_H
#define SM_GUARD_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/guard/rt.h"
#include "common/wire.h"

struct arena;
struct gsym;

struct gsrc {
	const char *proc;             /* "/proc/self" or "/proc/<pid>": the threads' names */
	pid_t pid;                    /* the process, whose memory a walk reads; 0: never read */
	struct gslot *slots;          /* the process's thread slots */
	uint32_t nslots;              /* in use (bounded by the caller) */
	/* copies slot i's ring (i == nslots: the ring the other threads share) into out, at most cap
	 * bytes: the bytes of intact records copied */
	size_t (*snapshot)(const struct gsrc *src, uint32_t i, void *out, size_t cap);
	size_t ring_max;              /* the largest ring: a copy's buffer */
	/* the loop's symbol and the unit type's name into the buffers ("" when unknown) */
	void (*names)(const struct gsrc *src, int32_t loop, int32_t type, char *loopsym, size_t lcap, char *tname,
		      size_t tcap);
	/* who last released each lock, condition and semaphore (watch.h's table); NULL: never known */
	const _Atomic uint64_t *releases;
	/* a small kernel file into buf (NUL-terminated): bytes read, or -1 */
	long (*read_small)(const char *path, char *buf, size_t cap);
	/* the hypervisor's steal over [start, end] per CPU (steal.h), -1 when unknown; NULL: never */
	int64_t (*steal)(const struct gsrc *src, int64_t start, int64_t end);
	void *ctx;                    /* the callbacks' */
	struct gsym *sym;             /* NULL: frames are [unknown]+0x... */
	/* an address of the process as sym knows it (sym may be another process's of the same build),
	 * 0 when it lies in none of its modules; NULL: sym is the process's own */
	uintptr_t (*xlat)(const struct gsrc *src, uintptr_t addr);
	/* what the process is */
	const char *host, *app, *version, *build_id, *exe, *kernel, *libc_name, *cpu_limit;
	const struct guard_label *labels;
	int nlabels;
	uintptr_t self_lo, self_hi;   /* the agent's own code in the process: left out of stacks */
	int64_t min_wait_ns;
	size_t max_events;
};

/*
 * v's stream, built into keep (everything ws points to lives there): 1, or 0 when no event of the
 * window could be named, -1 when out of memory.
 */
int stream_build(const struct gsrc *src, const struct gviol *v, struct arena *keep, struct wire_stream *ws);

#endif
