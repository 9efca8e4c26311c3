/*
 * wire: the trace-stream model of wire format v1 (docs/wire-format.md) and
 * its JSON codec: a strict parser/validator for what agents send, and a
 * writer for what importers and generators produce.
 *
 * A parsed stream lives in the arena it was parsed into; nothing in it is
 * freed separately.
 */
#ifndef SM_WIRE_H
#define SM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

struct arena;

enum wire_kind { WIRE_RUN = 0, WIRE_WAIT = 1 };

struct wire_event {
	int64_t tid;
	int64_t ts_ns;
	int64_t dur_ns;
	int64_t readier_tid;  /* wait events only; 0 = unknown or external */
	uint32_t stack;       /* index into stream.stacks */
	uint8_t kind;         /* enum wire_kind */
};

struct wire_label {
	const char *key;
	const char *value;
};

/* A thread's name (optional extension "threads"), e.g. its comm: tid 0..2^31-1, name 1..64 bytes. */
struct wire_thread {
	int64_t tid;
	const char *name;
};

struct wire_symptom {
	const char *kind;
	int64_t tid;
	int64_t start_ns;
	int64_t end_ns;
	const char *unit_type;   /* NULL when absent */
	int64_t threshold_ns;    /* -1 when absent */
};

struct wire_stack {
	const uint32_t *frames;  /* indexes into stream.frames, outermost first */
	uint32_t len;
};

/* What a stream stands for: a unit that was slow (mined), or a normal one sampled for comparison. */
enum wire_role { WIRE_ROLE_VIOLATION = 0, WIRE_ROLE_BASELINE = 1 };

struct wire_stream {
	char stream_id[37];      /* canonical lower-case UUID; "" if unknown */
	const char *host;
	const char *app;
	enum wire_role role;     /* WIRE_ROLE_VIOLATION when absent */
	double weight;           /* sampling weight (guard.md "Shipping budget"): >= 1; 0 (a zeroed
				  * struct) or 1 means unsampled, and is not written */
	const char *version;     /* NULL when absent */
	const char *build_id;    /* NULL when absent */
	const struct wire_label *labels;
	size_t nlabels;
	struct wire_symptom symptom;
	const char *const *frames;
	const uint32_t *frame_lens;  /* each frame's bytes, as wire_parse() read them; NULL: strlen() */
	size_t nframes;
	const struct wire_stack *stacks;
	size_t nstacks;
	const struct wire_event *events;
	size_t nevents;
	/* optional extension "modules": key a module named in `module+0xOFFSET` frames, value its GNU
	 * build id (lower-case hex), for the server to name those frames later (docs/symbols.md) */
	const struct wire_label *modules;
	size_t nmodules;
	/* optional extension "threads": {"4211": "nginx: worker"}, the names of the stream's threads,
	 * in the order sent, no tid twice */
	const struct wire_thread *threads;
	size_t nthreads;
};

/* The stream's weight as stored and summed: 1 unless a weight above 1 was given. */
static inline double wire_weight(const struct wire_stream *s)
{
	return s->weight > 1 ? s->weight : 1;
}

/* What one stream may hold. The wire format fixes some (names 255 bytes, frames
 * 1024 bytes, stacks 512 frames, 64 labels); the rest are the server's choice. */
struct wire_limits {
	size_t max_name;        /* host, app, version, build_id, label keys and values, unit_type */
	size_t max_frame;       /* bytes per frame string */
	size_t max_labels;
	size_t max_frames;      /* entries in the frame table */
	size_t max_stacks;
	size_t max_stack_depth;
	size_t max_events;
	int max_nesting;        /* JSON nesting depth */
};

#define WIRE_MAX_NAME 255
#define WIRE_MAX_FRAME 1024
#define WIRE_MAX_LABELS 64
#define WIRE_MAX_STACK_DEPTH 512
#define WIRE_MAX_MODULES 256
#define WIRE_MAX_BUILD_ID 80     /* hex digits */
#define WIRE_MAX_THREADS 4096
#define WIRE_MAX_THREAD_NAME 64  /* bytes */
#define WIRE_MAX_TIME_NS ((int64_t)1 << 62)

void wire_limits_default(struct wire_limits *lim);

/* Parser error classes: the whole text is not JSON, or it is JSON that breaks the contract. */
enum wire_error { WIRE_OK = 0, WIRE_ENOTJSON = -1, WIRE_EINVALID = -2, WIRE_ENOMEM = -3 };

struct wire_parser;

/* Returns a parser enforcing *lim (copied), or NULL on out of memory. Caller frees. */
struct wire_parser *wire_parser_open(const struct wire_limits *lim);
/* NULL-safe. */
void wire_parser_free(struct wire_parser *p);
/*
 * Parse and validate one stream object from json[0..len). Everything in *out is
 * allocated in `a`. Returns WIRE_OK or a negative enum wire_error; the message
 * ("events[3].stack: index 9 out of range (2 stacks)") is in wire_parser_error().
 * out->stream_id is filled as soon as it is known, even on error.
 */
int wire_parse(struct wire_parser *p, const char *json, size_t len, struct arena *a,
	       struct wire_stream *out);
/* The same, for a caller that owns the text: the frames' names (those written without an escape)
 * are not copied but point into json, each ended by a NUL written over its closing quote. json
 * must outlive *out, and is no JSON afterwards. */
int wire_parse_in_place(struct wire_parser *p, char *json, size_t len, struct arena *a,
			struct wire_stream *out);
const char *wire_parser_error(const struct wire_parser *p);

/* Whether s[0..n) is a build id as the wire carries it: 2 to WIRE_MAX_BUILD_ID lower-case hex
 * digits, an even number of them. */
bool wire_build_id_ok(const char *s, size_t n);

/* Append s as one line of compact JSON (no trailing newline). Returns 0 or -1 (buffer full). */
int wire_write_json(const struct wire_stream *s, struct buf *out);

/* A guarded process's report about itself (docs/wire-format.md "Agent reports"), as the agent in the
 * process and the host's collector both send it. Strings are borrowed; NULL writes "". */
struct wire_report {
	const char *host, *exe, *build_id, *mode, *agent_version, *app;
	const char *collector;          /* "host" or "process" */
	int64_t pid, started_ns;
	uint64_t units, violations, drops, spool_backlog, ship_errors;
	bool exiting;
};

/* Append r as one line of compact JSON. Returns 0 or -1 (buffer full). */
int wire_write_report(const struct wire_report *r, struct buf *out);

#endif
