/*
 * json: a small, allocation-free JSON reader for hot paths (the ingest of
 * trace streams). json_check() validates a whole text first (RFC 8259 syntax,
 * UTF-8, nesting depth), so the pull reader that follows may assume
 * well-formed input and stays simple; strings are decoded into an arena.
 */
#ifndef SM_JSON_H
#define SM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct arena;

/*
 * Checks that text[0..len) is exactly one JSON value (surrounding whitespace
 * allowed) with valid UTF-8 in strings and nesting at most max_depth. Returns
 * 0, or -1 with a reason ("unexpected character 'x' at byte 12") in err.
 */
int json_check(const char *text, size_t len, int max_depth, char *err, size_t errlen);

enum json_vtype { JV_NULL, JV_FALSE, JV_TRUE, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT };

/* A cursor over text that json_check() accepted. */
struct json_reader {
	const char *p;
	const char *end;
};

void json_reader_init(struct json_reader *r, const char *text, size_t len);
enum json_vtype json_peek(struct json_reader *r);
/* Object and array iteration. json_next_key() returns true with the next key
 * (decoded into buf, at most bufsize-1 bytes; longer keys are cut and
 * *truncated set) or false at the closing brace. */
void json_enter(struct json_reader *r);   /* consume '{' or '[' */
bool json_next_key(struct json_reader *r, char *buf, size_t bufsize, size_t *len, bool *truncated);
bool json_next_item(struct json_reader *r);
/* Skip one value of any type. */
void json_skip(struct json_reader *r);
/* A string value, decoded, NUL-terminated, in the arena (NULL: out of memory). */
const char *json_string(struct json_reader *r, struct arena *a, size_t *len);
/*
 * A number value. Returns 0 and *v for an integer in int64 range; 1 for a
 * number with a fraction or exponent; 2 for an integer out of int64 range.
 */
int json_int(struct json_reader *r, int64_t *v);
/* Byte offset of the cursor from the start of the text. */
size_t json_offset(const struct json_reader *r, const char *text);

#endif
