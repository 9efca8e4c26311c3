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

/*
 * What a request body from outside may hold (docs/api.md, "JSON bodies"). Nothing that reads
 * a checked body allocates per value, but a budget proportional to the size still refuses node
 * bombs early: at most 64 + len / bytes_per_value values, and 64 + len / bytes_per_container of
 * them objects or arrays (0: no separate bound).
 */
struct json_limits {
	int max_depth;
	size_t bytes_per_value;
	size_t bytes_per_container;
};

/*
 * json_check() for a request body: within lim's budget, and with no NUL (\u0000) in any string or
 * key (lone surrogates are refused everywhere). The reason in err starts with the path of the
 * field at fault ("filter.labels.os: ...", "frames[3]: ...", "body: ..." for the whole).
 */
int json_check_body(const char *text, size_t len, const struct json_limits *lim, char *err, size_t errlen);
/*
 * The members of the text's top-level object, as json_check_members() saw them: where each key's
 * opening quote and its value begin. n counts them all; past JSON_MEMBERS_KEPT, not all were kept.
 */
#define JSON_MEMBERS_KEPT 32
struct json_members {
	size_t n;
	const char *key[JSON_MEMBERS_KEPT];
	const char *value[JSON_MEMBERS_KEPT];
	const char *end;   /* the text's end */
};
/* json_check_body(), noting the top-level object's members on the way (none when it is no object),
 * so that reading them needs no second pass over the values. */
int json_check_members(const char *text, size_t len, const struct json_limits *lim, struct json_members *top,
		       char *err, size_t errlen);
/* A string of a text, as json_check_members_spans() notes it: at, its opening quote; len, the bytes
 * between its quotes as written; escaped, whether they hold an escape (else they are the value). */
struct json_span {
	const char *at;
	uint32_t len;
	bool escaped;
};
struct vec;
/* json_check_members(), noting too the strings of the array that is the value of the top-level
 * member whose key is written as key (no escapes in it) into spans (a vec of struct json_span,
 * emptied first; at most max_spans, and none once it cannot grow), so that reading them needs no
 * second scan. A string not noted is read as usual; check a span's at against the reader's place. */
int json_check_members_spans(const char *text, size_t len, const struct json_limits *lim, struct json_members *top,
			     const char *key, struct vec *spans, size_t max_spans, char *err, size_t errlen);
/* The limits of sm-web's bodies and agents' reports: depth 16, one value per 4 bytes. */
extern const struct json_limits json_body_limits;

enum json_vtype { JV_NULL, JV_FALSE, JV_TRUE, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT, JV_ABSENT };

/* A value inside checked text, by position: p at its first byte, or NULL when absent. */
struct json_val {
	const char *p;
	const char *end;
};

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
/* A string value decoded into out (cap >= 1 bytes with the NUL, cut to fit): the decoded length,
 * which is cap or more when it was cut. */
size_t json_string_into(struct json_reader *r, char *out, size_t cap);
/*
 * A number value. Returns 0 and *v for an integer in int64 range; 1 for a
 * number with a fraction or exponent; 2 for an integer out of int64 range.
 */
int json_int(struct json_reader *r, int64_t *v);
/* Byte offset of the cursor from the start of the text. */
size_t json_offset(const struct json_reader *r, const char *text);

/* ---- values by position, over text that json_check_body() accepted ---- */

/* The whole text as a value. */
struct json_val json_root(const char *text, size_t len);
/* The value at the reader's cursor (not consumed), and a reader placed at a value. */
struct json_val json_here(struct json_reader *r);
void json_reader_at(struct json_reader *r, struct json_val v);
/* JV_ABSENT when v.p is NULL. */
enum json_vtype json_val_type(struct json_val v);
/* Present and not null. */
bool json_given(struct json_val v);
/*
 * One pass over the members of the object obj: out[i] is the value of names[i] (NULL-terminated
 * list), absent when not there. A name given twice is refused ("<path>.app: duplicate key"), and
 * with closed so is a name not in the list ("<path>.x: unknown field"); otherwise unknown members
 * are skipped unread. path ("" at the top) prefixes the messages. 0, or -1 with err.
 */
int json_fields(struct json_val obj, const char *path, const char *const *names, bool closed,
		struct json_val *out, char *err, size_t errlen);
/* The same for the object at r, which it leaves after the object: its members are found in the
 * pass that moves past it. */
int json_fields_read(struct json_reader *r, const char *path, const char *const *names, bool closed,
		     struct json_val *out, char *err, size_t errlen);
/* json_fields() over the members json_check_members() noted, with the same answer and messages;
 * -2 when it could not keep them all (then json_fields_read() is the way). */
int json_members_fields(const struct json_members *top, const char *path, const char *const *names, bool closed,
			struct json_val *out, char *err, size_t errlen);
/* Elements of an array or members of an object (a scan, no allocation). */
size_t json_count(struct json_val v);
/* A string value decoded, NUL-terminated, in the arena (NULL: out of memory or not a string). */
const char *json_val_str(struct json_val v, struct arena *a, size_t *len);
/* An integer value as json_int() reads it; -1 when not a number. */
int json_val_int(struct json_val v, int64_t *out);
/* A finite number (integer or not): 0, or -1 when not a number, too long or out of double range. */
int json_val_num(struct json_val v, double *out);
/* The text of a value, as it is in the body (for storing an object verbatim). */
size_t json_val_text(struct json_val v, const char **text);

#endif
