/*
 * jsonw: the JSON writer of every document stackmine produces (API responses,
 * exports, agent payloads, profiles).
 *
 * It appends to a buf and keeps the structure for the caller: commas, keys
 * only inside objects, values only where one may stand, nesting up to
 * JSONW_MAX_DEPTH. The first failure sticks (the buf's cap or memory, or a
 * misuse), every later call does nothing, and jsonw_finish() reports it once:
 * a document either comes out whole and well-formed or not at all. Strings are
 * escaped as RFC 8259 requires, invalid UTF-8 becoming U+FFFD; NaN and the
 * infinities, which JSON cannot hold, are written as null.
 *
 *   struct jsonw w;
 *   jsonw_init(&w, &out);
 *   jsonw_object(&w);
 *   jsonw_kstr(&w, "name", name);
 *   jsonw_key(&w, "ids");
 *   jsonw_array(&w);
 *   for (...) jsonw_i64(&w, id);
 *   jsonw_end(&w);
 *   jsonw_end(&w);
 *   if (jsonw_finish(&w) < 0) ... jsonw_error(&w)
 */
#ifndef SM_JSONW_H
#define SM_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define JSONW_MAX_DEPTH 32

struct jsonw {
	struct buf *b;
	int depth;
	bool want_value;                    /* a key was written: its value comes next */
	bool misuse;                        /* a call the structure did not allow */
	bool compact;                       /* "," and ":" rather than ", " and ": " */
	int lines;                          /* members of containers this deep or less on lines of their own */
	char open[JSONW_MAX_DEPTH];         /* '{' or '[' per level */
	bool any[JSONW_MAX_DEPTH];          /* the level holds a member already */
	const char *why;                    /* the misuse, for jsonw_error() */
};

/* Starts a document at the end of b (which need not be empty). b must outlive w. */
void jsonw_init(struct jsonw *w, struct buf *b);
/* The same without blanks after commas and colons (wire payloads, ingest responses). */
void jsonw_init_compact(struct jsonw *w, struct buf *b);
/* Compact, but the members of the containers at most `depth` deep (the outermost is 1) each on a line
 * of its own, indented by its depth: files that people read (profiles), ending in a newline. */
void jsonw_init_lines(struct jsonw *w, struct buf *b, int depth);

void jsonw_object(struct jsonw *w);
void jsonw_array(struct jsonw *w);
/* Closes the innermost object or array. */
void jsonw_end(struct jsonw *w);
/* A member's key (inside an object): its value follows. */
void jsonw_key(struct jsonw *w, const char *key);
/* The same for a key of n bytes (not NUL-terminated). */
void jsonw_keyn(struct jsonw *w, const char *key, size_t n);

/* Values. A NULL string is written as null. */
void jsonw_str(struct jsonw *w, const char *s);
void jsonw_strn(struct jsonw *w, const char *s, size_t n);
void jsonw_i64(struct jsonw *w, int64_t v);
void jsonw_u64(struct jsonw *w, uint64_t v);
void jsonw_double(struct jsonw *w, double v);
void jsonw_bool(struct jsonw *w, bool v);
void jsonw_null(struct jsonw *w);
/* A number given as text (a database column): written as it is when it is a JSON number, as
 * null otherwise ("NaN", "Infinity", garbage). */
void jsonw_number_text(struct jsonw *w, const char *s);
/* A value that is JSON text already (PostgreSQL's json and jsonb output), n bytes. The caller
 * vouches for it; it is written as it is. */
void jsonw_raw(struct jsonw *w, const char *json, size_t n);

/* Key and value in one call. */
void jsonw_kstr(struct jsonw *w, const char *key, const char *s);
void jsonw_ki64(struct jsonw *w, const char *key, int64_t v);
void jsonw_ku64(struct jsonw *w, const char *key, uint64_t v);
void jsonw_kdouble(struct jsonw *w, const char *key, double v);
void jsonw_kbool(struct jsonw *w, const char *key, bool v);
void jsonw_knull(struct jsonw *w, const char *key);
void jsonw_kobject(struct jsonw *w, const char *key);
void jsonw_karray(struct jsonw *w, const char *key);

/* 0 when one whole value was written (every object and array closed) and no append failed;
 * -1 otherwise. */
int jsonw_finish(const struct jsonw *w);
/* Why jsonw_finish() failed: the buf's error ("more than N bytes", "out of memory") or the misuse;
 * "" when it did not. */
const char *jsonw_error(const struct jsonw *w);
/* Whether the failure is the buf's cap (a document too large, rather than a fault). */
bool jsonw_too_large(const struct jsonw *w);

#endif
