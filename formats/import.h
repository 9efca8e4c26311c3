/*
 * import: turn real profiler output into wire-format trace streams, so that
 * captures made with ordinary tools (perf, flame-graph pipelines) can be
 * uploaded and mined like guard-agent streams.
 *
 * One importer converts one input per importer_run() (a file) or
 * importer_run_mem() (a request body) into one or more streams; the format
 * parsers (perf.c, folded.c, pprof.c, bcc.c, otlp.c; formats.h lists them and
 * detects which one a file is) read lines or the whole input and hand frames,
 * stacks, threads and events to the shared helpers below, which intern them
 * and assemble the streams.
 * docs/import.md describes the formats, the options and the limits.
 */
#ifndef SM_IMPORT_H
#define SM_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/wire.h"

struct importer;

/* A format the importer reads: its name and the parser that reads the importer's input to its end,
 * adding frames, stacks, threads and events through the functions below. The formats are listed in
 * formats.h (perf.h, folded.h define them). */
struct import_format {
	const char *name;
	int (*parse)(struct importer *im);   /* 0, or -1 with the importer's error set */
};

struct import_opts {
	const char *host, *app, *version, *build_id; /* host/app required; version/build_id may be NULL */
	const struct wire_label *labels;
	size_t nlabels;
	int64_t symptom_tid;       /* -1: the costliest thread (see symptom_comm) */
	const char *symptom_comm;  /* NULL, or choose among threads whose comm equals this */
	int64_t window_start_ns, window_end_ns; /* -1: the capture's own bounds */
	int64_t sample_period_ns;  /* cost of one on-CPU sample (folded: one count); 0: infer */
	const char *event;         /* perf: only samples of this event (e.g. "cycles"); NULL: all */
	const char *sample_type;   /* pprof: the sample type to read (e.g. "delay"); NULL: choose */
	enum wire_role role;       /* of every stream made (part of its id) */
	size_t max_input;          /* bytes of decompressed input at most; 0: IMPORT_DEFAULT_MAX_INPUT */
	size_t max_streams;        /* streams one input may become; 0: IMPORT_DEFAULT_MAX_STREAMS */
};

#define IMPORT_DEFAULT_MAX_INPUT ((size_t)1 << 30)
#define IMPORT_DEFAULT_MAX_STREAMS 1024

/* Fills *o with the defaults (no host/app, everything inferred). */
void import_opts_init(struct import_opts *o);

/* Returns an importer of fmt (it copies *opts), or NULL when out of memory. Caller frees
 * with importer_free(). */
struct importer *importer_open(const struct import_format *fmt, const struct import_opts *opts);
/* NULL-safe. */
void importer_free(struct importer *im);
/*
 * Convert one file (plain or gzip-compressed) into streams: one, or one per set of
 * sample labels where the format has them (docs/import.md). Returns 0, or -1 with
 * importer_error() set to "PATH:LINE: reason" (or "PATH: reason" when no line is to
 * blame). What the streams point to is owned by the importer and valid until the next
 * run or importer_free().
 */
int importer_run(struct importer *im, const char *path);
/* The same for data[0..len) in memory (plain, gzip or zlib), named name in messages. */
int importer_run_mem(struct importer *im, const char *name, const void *data, size_t len);
/* The streams of the last successful run: i < importer_count(). */
size_t importer_count(const struct importer *im);
const struct wire_stream *importer_stream(const struct importer *im, size_t i);
/* The format the last run read (the one detected when the importer's is "auto"). */
const char *importer_format(const struct importer *im);
const char *importer_error(const struct importer *im);
/* Whether the last run was refused for its size (more than max_input decompressed, or a
 * message that unpacks past its budget), not for its content. */
bool importer_too_large(const struct importer *im);

/* ---- For the format parsers (perf.c, folded.c, pprof.c, bcc.c, otlp.c) only. ---- */

#define IMPORT_MAX_LINE 65536              /* longer lines are refused */
#define IMPORT_DEFAULT_PERIOD_NS 10000000  /* 10 ms: the fallback cost of one sample */

const struct import_opts *import_opts_of(const struct importer *im);
/*
 * Next line of the input without its line end; (*line)[*len] is NUL. Valid until
 * the next call. Returns 1, 0 at the end of the input, or -1 with the error set
 * (read error, line too long, NUL byte).
 */
int import_next_line(struct importer *im, char **line, size_t *len);
/* Sets the error to "PATH:LINE: reason" (the line last returned) and returns -1. */
int import_fail(struct importer *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets the error to "PATH: reason" (binary input, or no line to blame) and returns -1. */
int import_fail_input(struct importer *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * The first bytes of the input, without consuming them: *len is at least min(want, what
 * the input has), want at most 64 KiB. Returns 0 or -1 with the error set.
 */
int import_peek(struct importer *im, size_t want, const unsigned char **data, size_t *len);
/*
 * All of the input not yet read by import_next_line(), decompressed, at most
 * max_input bytes. Owned by the importer until the run ends. Returns 0 or -1.
 */
int import_read_all(struct importer *im, const unsigned char **data, size_t *len);
/* Marks the run's refusal as one for size (importer_too_large()). */
void import_mark_too_large(struct importer *im);
/* Nanoseconds per unit of a time unit ("nanoseconds", "ms", ...), 0 for anything else. */
int64_t import_unit_ns(const char *unit);
/* Whether a sample type names waiting rather than running (delay, contentions, off_cpu, ...). */
bool import_wait_type(const char *type);
/* Records the format actually read ("auto" dispatches to it). */
void import_set_format(struct importer *im, const struct import_format *fmt);
/*
 * Events added from now on belong to the stream of these sample labels (in addition to
 * the options' labels; a key the options already have is dropped). n == 0 is the
 * stream without sample labels. Returns the group's id, or -1 with the error set (too
 * many streams; a key or value that is not 1..255 bytes of UTF-8 is cut or replaced,
 * never refused).
 */
int64_t import_group(struct importer *im, const struct wire_label *labels, size_t n);
/* Events added from now on belong to group id (an id import_group() returned). */
void import_use_group(struct importer *im, uint32_t id);
/*
 * Id of the frame string s[0..n): invalid UTF-8 and NUL bytes become U+FFFD and
 * the result is cut to WIRE_MAX_FRAME bytes on a character boundary. An empty
 * string becomes "[unknown]". Returns the id, or -1 with the error set.
 */
int64_t import_frame(struct importer *im, const char *s, size_t n);
/* Id of the stack frames[0..n), outermost first, 1 <= n <= WIRE_MAX_STACK_DEPTH. */
int64_t import_stack(struct importer *im, const uint32_t *frames, size_t n);
/*
 * Dense index (0, 1, ...) of thread tid, which must be in [0, INT32_MAX]; comm,
 * when n > 0, becomes the thread's name. Returns the index or -1 with the error set.
 */
int64_t import_thread(struct importer *im, int64_t tid, const char *comm, size_t n);
/*
 * A tid for samples that name no thread: stable for a given comm (the same in
 * every file and run), in [2^30, 2^31) so it cannot clash with a kernel tid.
 * Returns the tid or -1 with the error set.
 */
int64_t import_pseudo_tid(struct importer *im, const char *comm, size_t n);
/* Appends a copy of *e (its thread must have been registered). Returns the event's
 * index, or -1 with the error set (too many events). */
int64_t import_event(struct importer *im, const struct wire_event *e);
/*
 * For captures without timestamps: each thread's events laid end to end on its own
 * timeline, which starts at origin (0 unless set). Returns where the next dur ns of
 * thread tid start, or -1 with the error set (past WIRE_MAX_TIME_NS).
 */
int64_t import_lay(struct importer *im, int64_t tid, int64_t dur);
void import_lay_origin(struct importer *im, int64_t origin_ns);
/* The event with this index, to fill in what was not known when it was added. */
struct wire_event *import_event_at(struct importer *im, size_t idx);

#endif
