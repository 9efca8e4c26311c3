/* json: validating scanner and allocation-free pull reader (see json.h). */
#include "common/json.h"
#include "common/arena.h"
#include "common/util.h"
#include "common/vec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Past the plain bytes of a string from p (printable ASCII but '"' and '\\'), at most to end:
 * sixteen at a time with SSE2 (x86-64's baseline), eight at a time elsewhere, while it can (a
 * frame's name is tens of them), then one by one. */
static inline const char *plain_run(const char *p, const char *end)
{
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;

#ifdef __SSE2__
	const __m128i ctl = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'), bsl = _mm_set1_epi8('\\');

	while (end - p >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
		/* signed: a byte under 0x20 or of 0x80 and more is less than 0x20 */
		__m128i stop = _mm_or_si128(_mm_cmplt_epi8(v, ctl),
					    _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bsl)));
		unsigned m = (unsigned)_mm_movemask_epi8(stop);

		if (m)
			return p + __builtin_ctz(m);
		p += 16;
	}
#endif
	while (end - p >= 8) {
		uint64_t v, q, b;

		memcpy(&v, p, sizeof(v));
		q = v ^ (ones * '"');
		b = v ^ (ones * '\\');
		/* a byte of 0x80 or more, under 0x20, '"' or '\\' (each test exact when none is there) */
		if ((v | ((v - ones * 0x20) & ~v) | ((q - ones) & ~q) | ((b - ones) & ~b)) & highs)
			break;
		p += 8;
	}
	while (p < end && (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x80 && *p != '"' && *p != '\\')
		p++;
	return p;
}

/* ---- validation ---- */

/* levels whose key or index an error message names */
#define PATH_LEVELS 32

struct scan {
	const char *s, *p, *end;
	int depth, max_depth;
	char *err;
	size_t errlen;
	/* json_check_body() only (max_values 0: no budget) */
	bool no_nul;
	size_t nvalues, max_values, ncont, max_cont;
	const char *keyat[PATH_LEVELS];  /* opening quote of the level's current key */
	size_t idx[PATH_LEVELS];         /* index of the level's current element */
	struct json_members *top;        /* json_check_members(): the root object's members */
	bool escaped;                    /* the last string scanned held an escape */
	/* json_check_members_spans(): the array whose strings are noted */
	const char *span_key;
	size_t span_key_len, max_spans;
	struct vec *spans;
	bool spanning;                   /* the current top-level member's key is span_key */
};

static int scan_fail(struct scan *sc, const char *what)
{
	size_t at = (size_t)(sc->p - sc->s);

	if (sc->p >= sc->end)
		snprintf(sc->err, sc->errlen, "unexpected end of input at byte %zu", at);
	else if ((unsigned char)*sc->p >= 0x20 && (unsigned char)*sc->p < 0x7f)
		snprintf(sc->err, sc->errlen, "unexpected '%c' %s at byte %zu", *sc->p, what, at);
	else
		snprintf(sc->err, sc->errlen, "unexpected byte 0x%02x %s at byte %zu",
			 (unsigned char)*sc->p, what, at);
	return -1;
}

static inline void scan_ws(struct scan *sc)
{
	while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\n' || *sc->p == '\r' || *sc->p == '\t'))
		sc->p++;
}

static int hex4(const char *p, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	return 0;
}

static int scan_string(struct scan *sc)
{
	sc->escaped = false;
	sc->p++; /* opening quote */
	while ((sc->p = plain_run(sc->p, sc->end)) < sc->end) {
		unsigned char c = (unsigned char)*sc->p;

		if (c == '"') {
			sc->p++;
			return 0;
		}
		if (c < 0x20)
			return scan_fail(sc, "in a string");
		if (c == '\\') {
			uint32_t u, lo;

			sc->escaped = true;
			if (sc->end - sc->p < 2)
				return sc->p = sc->end, scan_fail(sc, "in a string");
			switch (sc->p[1]) {
			case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
				sc->p += 2;
				continue;
			case 'u':
				break;
			default:
				sc->p++;
				return scan_fail(sc, "in an escape");
			}
			if (sc->end - sc->p < 6 || hex4(sc->p + 2, &u) < 0)
				return scan_fail(sc, "in a \\u escape");
			/* PostgreSQL's text cannot hold it and C strings end at it */
			if (u == 0 && sc->no_nul)
				return scan_fail(sc, "(NUL, \\u0000, is not allowed in a string)");
			if (u >= 0xdc00 && u <= 0xdfff)
				return scan_fail(sc, "(a lone low surrogate)");
			if (u >= 0xd800 && u <= 0xdbff) {
				if (sc->end - sc->p < 12 || sc->p[6] != '\\' || sc->p[7] != 'u' ||
				    hex4(sc->p + 8, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
					return scan_fail(sc, "(a lone high surrogate)");
				sc->p += 12;
			} else {
				sc->p += 6;
			}
			continue;
		}
		if (c < 0x80) {
			sc->p++;
			continue;
		}
		{
			/* multi-byte UTF-8: no overlongs, surrogates or code points past U+10FFFF */
			size_t n = util_utf8_seq((const unsigned char *)sc->p, (size_t)(sc->end - sc->p));
			if (!n)
				return scan_fail(sc, "(invalid UTF-8)");
			sc->p += n;
		}
	}
	return scan_fail(sc, "in a string");
}

/* The digits of a fraction or an exponent, at least one: *p moves past them. */
static int scan_digits(struct scan *sc, const char **p)
{
	if (*p >= sc->end || **p < '0' || **p > '9') {
		sc->p = *p;
		return scan_fail(sc, "in a number");
	}
	while (*p < sc->end && **p >= '0' && **p <= '9')
		(*p)++;
	return 0;
}

static int scan_number(struct scan *sc)
{
	const char *p = sc->p;

	if (p < sc->end && *p == '-')
		p++;
	if (p < sc->end && *p == '0') {
		p++;
	} else if (p < sc->end && *p >= '1' && *p <= '9') {
		while (p < sc->end && *p >= '0' && *p <= '9')
			p++;
	} else {
		sc->p = p;
		return scan_fail(sc, "in a number");
	}
	if (p < sc->end && *p == '.') {
		p++;
		if (scan_digits(sc, &p) < 0)
			return -1;
	}
	if (p < sc->end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < sc->end && (*p == '+' || *p == '-'))
			p++;
		if (scan_digits(sc, &p) < 0)
			return -1;
	}
	sc->p = p;
	return 0;
}

static int scan_word(struct scan *sc, const char *w, size_t n)
{
	if ((size_t)(sc->end - sc->p) < n || memcmp(sc->p, w, n) != 0)
		return scan_fail(sc, "where a value belongs");
	sc->p += n;
	return 0;
}

/* An object key, its colon and the white space up to the value. */
static int scan_key(struct scan *sc)
{
	if (sc->p >= sc->end || *sc->p != '"')
		return scan_fail(sc, "where an object key belongs");
	const char *key = sc->p;

	if (sc->depth >= 1 && sc->depth <= PATH_LEVELS)
		sc->keyat[sc->depth - 1] = sc->p;
	if (scan_string(sc) < 0)
		return -1;
	if (sc->span_key && sc->depth == 1) {
		size_t klen = (size_t)(sc->p - key - 2);

		sc->spanning = klen == sc->span_key_len && memcmp(key + 1, sc->span_key, klen) == 0;
		if (sc->spanning)
			sc->spans->len = 0;   /* a second such member: its strings, not the first's */
	}
	scan_ws(sc);
	if (sc->p >= sc->end || *sc->p != ':')
		return scan_fail(sc, "in an object");
	sc->p++;
	scan_ws(sc);
	if (sc->top && sc->depth == 1) {
		if (sc->top->n < JSON_MEMBERS_KEPT) {
			sc->top->key[sc->top->n] = key;
			sc->top->value[sc->top->n] = sc->p;
		}
		sc->top->n++;
	}
	return 0;
}

static int over_budget(struct scan *sc, const char *what, size_t per)
{
	snprintf(sc->err, sc->errlen,
		 "body: more than %zu %s in %zu bytes, over the budget of 64 plus one per %zu bytes (at byte %zu)",
		 what[0] == 'v' ? sc->max_values : sc->max_cont, what, (size_t)(sc->end - sc->s), per,
		 (size_t)(sc->p - sc->s));
	return -1;
}

/* The values the budget allows from here: a run takes no more. */
static inline size_t values_left(const struct scan *sc)
{
	return sc->max_values ? sc->max_values - sc->nvalues : SIZE_MAX;
}

/* A run of k more values of the current array, ended at q: taken as the general loop would. */
static inline void run_taken(struct scan *sc, const char *q, size_t k)
{
	sc->p = q;
	sc->nvalues += k;
	if (sc->depth <= PATH_LEVELS)
		sc->idx[sc->depth - 1] += k;
}

/*
 * In an array, after a number: the run of plain integers that follows, written compactly (",12,7"),
 * taken in one loop (a stack's frame indexes are most of a stream's values). Whatever else comes
 * (white space, a fraction, an exponent, a leading zero, a sign, the budget's end) is left to the
 * general loop; so are the messages.
 */
static inline void int_run(struct scan *sc)
{
	const char *q = sc->p, *end = sc->end;
	size_t k = 0, room = values_left(sc);

	while (k < room && end - q >= 2 && q[0] == ',' && q[1] >= '1' && q[1] <= '9') {
		const char *r = q + 2;

		while (r < end && *r >= '0' && *r <= '9')
			r++;
		if (r < end && (*r == '.' || *r == 'e' || *r == 'E'))
			break;
		q = r;
		k++;
	}
	run_taken(sc, q, k);
}

/* A JSON number at p, nothing else checked: past it, or NULL when it is not one. */
static inline const char *plain_number(const char *p, const char *end)
{
	if (p < end && *p == '-')
		p++;
	if (p < end && *p == '0') {
		p++;
	} else if (p < end && *p >= '1' && *p <= '9') {
		for (p++; end - p >= 8 && util_eight_digits(p);)
			p += 8;
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	} else {
		return NULL;
	}
	if (p < end && *p == '.') {
		if (++p >= end || *p < '0' || *p > '9')
			return NULL;
		while (++p < end && *p >= '0' && *p <= '9')
			;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		if (++p < end && (*p == '+' || *p == '-'))
			p++;
		if (p >= end || *p < '0' || *p > '9')
			return NULL;
		while (++p < end && *p >= '0' && *p <= '9')
			;
	}
	return p;
}

/* A string of plain bytes at p (its opening quote): past its closing quote, or NULL. */
static inline const char *plain_string(const char *p, const char *end)
{
	p = plain_run(p + 1, end);
	return p < end && *p == '"' ? p + 1 : NULL;
}

/*
 * At sc->p, an object inside a container: when it is flat and written compactly, {"k":v,...} with
 * plain keys and values that are plain strings, numbers, true, false or null (an event of a stream,
 * most of its text), it is taken in one loop: sc->p moved past it, its values counted, true.
 * Anything else (white space, an escape, a byte past 0x7f, a nested container, an error, a budget
 * about to run out) is false with nothing moved, and the general loop reads it with its messages.
 * A key's or value's string is never one that json_check_members_spans() notes.
 */
static inline bool flat_object(struct scan *sc)
{
	const char *q = sc->p + 1, *end = sc->end;
	size_t k = 0, room = values_left(sc);

	if (sc->depth >= sc->max_depth || (sc->max_cont && sc->ncont >= sc->max_cont))
		return false;
	if (q < end && *q == '}')
		return false;
	for (;;) {
		if (q >= end || *q != '"' || !(q = plain_string(q, end)) || q >= end || *q != ':' || ++q >= end)
			return false;
		switch (*q) {
		case '"':
			q = plain_string(q, end);
			break;
		case 't':
			q = end - q >= 4 && memcmp(q, "true", 4) == 0 ? q + 4 : NULL;
			break;
		case 'f':
			q = end - q >= 5 && memcmp(q, "false", 5) == 0 ? q + 5 : NULL;
			break;
		case 'n':
			q = end - q >= 4 && memcmp(q, "null", 4) == 0 ? q + 4 : NULL;
			break;
		default:
			q = plain_number(q, end);
		}
		if (!q || q >= end || ++k > room)
			return false;
		if (*q == '}')
			break;
		if (*q++ != ',')
			return false;
	}
	sc->p = q + 1;
	sc->nvalues += k;
	if (sc->max_cont)
		sc->ncont++;
	return true;
}

/* The string from at (its opening quote) to after (past its closing quote), noted when there is room. */
static inline void note_span(struct scan *sc, const char *at, const char *after, bool escaped)
{
	struct json_span *sp;

	if (sc->spans->len >= sc->max_spans)
		return;
	if ((size_t)(after - at - 2) > UINT32_MAX || !(sp = vec_push(sc->spans)))
		sc->max_spans = 0;   /* the rest is read as usual */
	else
		*sp = (struct json_span){ at, (uint32_t)(after - at - 2), escaped };
}

/*
 * In an array, after a string: the run of plain strings that follows, written compactly
 * (",\"a!f\",\"a!g\""), taken in one loop and noted when note (a frame table is most of a stream's
 * strings). Whatever else comes is left to the general loop, as in int_run().
 */
static inline void string_run(struct scan *sc, bool note)
{
	const char *q = sc->p, *end = sc->end, *r;
	size_t k = 0, room = values_left(sc);

	while (k < room && end - q >= 2 && q[0] == ',' && q[1] == '"' && (r = plain_string(q + 1, end))) {
		if (note)
			note_span(sc, q + 1, r, false);
		q = r;
		k++;
	}
	run_taken(sc, q, k);
}

/* Iterative over containers so that depth costs no C stack. kinds: one bit per level, 1 = object. */
static int scan_text(struct scan *sc, unsigned char *kinds, size_t per_value, size_t per_cont)
{
	const char *text = sc->s;

	scan_ws(sc);
	for (;;) {
		/* a value */
		if (sc->p >= sc->end)
			return scan_fail(sc, "where a value belongs");
		if (sc->max_values && ++sc->nvalues > sc->max_values)
			return over_budget(sc, "values", per_value);
		switch (*sc->p) {
		case '{':
			if (sc->depth && flat_object(sc))
				goto after_value;
			/* fall through */
		case '[': {
			bool obj = *sc->p == '{';
			if (sc->depth >= sc->max_depth) {
				snprintf(sc->err, sc->errlen, "nested deeper than %d levels at byte %zu",
					 sc->max_depth, (size_t)(sc->p - text));
				return -1;
			}
			if (sc->max_cont && ++sc->ncont > sc->max_cont)
				return over_budget(sc, "objects and arrays", per_cont);
			if (obj)
				kinds[sc->depth / 8] |= (unsigned char)(1u << (sc->depth % 8));
			else
				kinds[sc->depth / 8] &= (unsigned char)~(1u << (sc->depth % 8));
			if (sc->depth < PATH_LEVELS) {
				sc->keyat[sc->depth] = NULL;
				sc->idx[sc->depth] = 0;
			}
			sc->depth++;
			sc->p++;
			scan_ws(sc);
			if (sc->p < sc->end && *sc->p == (obj ? '}' : ']')) {
				sc->p++;
				sc->depth--;
				goto after_value;
			}
			if (obj && scan_key(sc) < 0)
				return -1;
			continue;
		}
		case '"': {
			const char *at = sc->p;
			/* a string right in the noted member's array (level 1 an array, not an object) */
			bool note = sc->spanning && sc->depth == 2 && !(kinds[0] & 2);

			if (scan_string(sc) < 0)
				return -1;
			if (note)
				note_span(sc, at, sc->p, sc->escaped);
			if (sc->depth && !(kinds[(sc->depth - 1) / 8] & (1u << ((sc->depth - 1) % 8))))
				string_run(sc, note);
			break;
		}
		case 't':
			if (scan_word(sc, "true", 4) < 0)
				return -1;
			break;
		case 'f':
			if (scan_word(sc, "false", 5) < 0)
				return -1;
			break;
		case 'n':
			if (scan_word(sc, "null", 4) < 0)
				return -1;
			break;
		default:
			if (*sc->p != '-' && (*sc->p < '0' || *sc->p > '9'))
				return scan_fail(sc, "where a value belongs");
			if (scan_number(sc) < 0)
				return -1;
			if (sc->depth && !(kinds[(sc->depth - 1) / 8] & (1u << ((sc->depth - 1) % 8))))
				int_run(sc);
		}
after_value:
		for (;;) {
			bool obj;

			scan_ws(sc);
			if (sc->depth == 0) {
				if (sc->p != sc->end)
					return scan_fail(sc, "after the value");
				return 0;
			}
			obj = kinds[(sc->depth - 1) / 8] & (1u << ((sc->depth - 1) % 8));
			if (sc->p < sc->end && *sc->p == ',') {
				sc->p++;
				scan_ws(sc);
				if (!obj && sc->depth <= PATH_LEVELS)
					sc->idx[sc->depth - 1]++;
				if (obj && scan_key(sc) < 0)
					return -1;
				break; /* next value */
			}
			if (sc->p < sc->end && *sc->p == (obj ? '}' : ']')) {
				sc->p++;
				sc->depth--;
				continue;
			}
			return scan_fail(sc, obj ? "in an object" : "in an array");
		}
	}
}

int json_check(const char *text, size_t len, int max_depth, char *err, size_t errlen)
{
	struct scan sc = { .s = text, .p = text, .end = text + len, .max_depth = max_depth, .err = err,
			   .errlen = errlen };
	unsigned char kinds[1024];

	if (max_depth > (int)sizeof(kinds) * 8)
		sc.max_depth = (int)sizeof(kinds) * 8;
	return scan_text(&sc, kinds, 0, 0);
}

/* "filter.labels.os", "frames[3]": where the scan stopped; keys as written, cut at 40 bytes. */
static void scan_path(const struct scan *sc, const unsigned char *kinds, char *out, size_t n)
{
	size_t len = 0;

	out[0] = '\0';
	for (int l = 0; l < sc->depth && l < PATH_LEVELS && len + 48 < n; l++) {
		if (kinds[l / 8] & (1u << (l % 8))) {
			const char *k = sc->keyat[l];
			size_t m = 0;

			if (!k)
				break;
			if (len)
				out[len++] = '.';
			for (k++; k < sc->end && *k != '"' && m < 40; k++, m++) {
				if (*k == '\\' && k + 1 < sc->end)
					out[len++] = *k++, m++;
				out[len++] = *k;
			}
			out[len] = '\0';
		} else {
			len += (size_t)snprintf(out + len, n - len, "[%zu]", sc->idx[l]);
		}
	}
	if (!len)
		snprintf(out, n, "body");
}

const struct json_limits json_body_limits = { 16, 4, 0 };

static int check_body(const char *text, size_t len, const struct json_limits *lim, struct json_members *top,
		      const char *span_key, struct vec *spans, size_t max_spans, char *err, size_t errlen)
{
	struct scan sc = { .s = text, .p = text, .end = text + len, .max_depth = lim->max_depth, .err = err,
			   .errlen = errlen, .no_nul = true, .top = top, .span_key = span_key,
			   .span_key_len = span_key ? strlen(span_key) : 0, .spans = spans, .max_spans = max_spans };
	unsigned char kinds[PATH_LEVELS / 8 + 1];
	char msg[256], path[PATH_LEVELS * 48];

	if (top) {
		top->n = 0;
		top->end = text + len;
	}
	if (spans)
		spans->len = 0;
	if (sc.max_depth > PATH_LEVELS)
		sc.max_depth = PATH_LEVELS;
	if (lim->bytes_per_value)
		sc.max_values = 64 + len / lim->bytes_per_value;
	if (lim->bytes_per_container)
		sc.max_cont = 64 + len / lim->bytes_per_container;
	sc.err = msg;
	sc.errlen = sizeof(msg);
	if (scan_text(&sc, kinds, lim->bytes_per_value, lim->bytes_per_container) == 0)
		return 0;
	if (strncmp(msg, "body: ", 6) == 0) {
		snprintf(err, errlen, "%s", msg);
	} else {
		scan_path(&sc, kinds, path, sizeof(path));
		snprintf(err, errlen, "%s: %s", path, msg);
	}
	return -1;
}

int json_check_body(const char *text, size_t len, const struct json_limits *lim, char *err, size_t errlen)
{
	return check_body(text, len, lim, NULL, NULL, NULL, 0, err, errlen);
}

int json_check_members(const char *text, size_t len, const struct json_limits *lim, struct json_members *top,
		       char *err, size_t errlen)
{
	return check_body(text, len, lim, top, NULL, NULL, 0, err, errlen);
}

int json_check_members_spans(const char *text, size_t len, const struct json_limits *lim, struct json_members *top,
			     const char *key, struct vec *spans, size_t max_spans, char *err, size_t errlen)
{
	return check_body(text, len, lim, top, key, spans, max_spans, err, errlen);
}

/* ---- reading (input known to be valid) ---- */

void json_reader_init(struct json_reader *r, const char *text, size_t len)
{
	r->p = text;
	r->end = text + len;
}

static inline void ws(struct json_reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
		r->p++;
}

enum json_vtype json_peek(struct json_reader *r)
{
	ws(r);
	switch (*r->p) {
	case '{': return JV_OBJECT;
	case '[': return JV_ARRAY;
	case '"': return JV_STRING;
	case 't': return JV_TRUE;
	case 'f': return JV_FALSE;
	case 'n': return JV_NULL;
	default: return JV_NUMBER;
	}
}

void json_enter(struct json_reader *r)
{
	ws(r);
	r->p++;
}

/* Decode the string at r->p (an opening quote) into out (room for max bytes);
 * returns the decoded length, which may exceed max (then out holds a prefix). */
static size_t decode_string(struct json_reader *r, char *out, size_t max)
{
	size_t n = 0;

	r->p++;
	for (;;) {
		const char *q = r->p;
		size_t run;

		/* the text was checked: the string's closing quote comes before r->end */
		while ((q = plain_run(q, r->end)) < r->end && *q != '"' && *q != '\\')
			q++;
		run = (size_t)(q - r->p);
		if (out && n < max)
			memcpy(out + n, r->p, run < max - n ? run : max - n);
		n += run;
		r->p = q;
		if (q >= r->end)
			return n;   /* (unchecked text: no closing quote) */
		if (*q == '"') {
			r->p++;
			return n;
		}
		/* escape */
		{
			char c = q[1], tmp[4];
			size_t tl = 1;
			uint32_t u, lo;

			r->p += 2;
			switch (c) {
			case 'b': tmp[0] = '\b'; break;
			case 'f': tmp[0] = '\f'; break;
			case 'n': tmp[0] = '\n'; break;
			case 'r': tmp[0] = '\r'; break;
			case 't': tmp[0] = '\t'; break;
			case 'u':
				hex4(r->p, &u);
				r->p += 4;
				if (u >= 0xd800 && u <= 0xdbff) {
					hex4(r->p + 2, &lo);
					r->p += 6;
					u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
				}
				if (u < 0x80) {
					tmp[0] = (char)u;
				} else if (u < 0x800) {
					tmp[0] = (char)(0xc0 | (u >> 6));
					tmp[1] = (char)(0x80 | (u & 0x3f));
					tl = 2;
				} else if (u < 0x10000) {
					tmp[0] = (char)(0xe0 | (u >> 12));
					tmp[1] = (char)(0x80 | ((u >> 6) & 0x3f));
					tmp[2] = (char)(0x80 | (u & 0x3f));
					tl = 3;
				} else {
					tmp[0] = (char)(0xf0 | (u >> 18));
					tmp[1] = (char)(0x80 | ((u >> 12) & 0x3f));
					tmp[2] = (char)(0x80 | ((u >> 6) & 0x3f));
					tmp[3] = (char)(0x80 | (u & 0x3f));
					tl = 4;
				}
				break;
			default: tmp[0] = c; /* " \ / */
			}
			for (size_t k = 0; k < tl; k++, n++)
				if (out && n < max)
					out[n] = tmp[k];
		}
	}
}

bool json_next_key(struct json_reader *r, char *buf, size_t bufsize, size_t *len, bool *truncated)
{
	size_t n;

	ws(r);
	if (*r->p == ',') {
		r->p++;
		ws(r);
	}
	if (*r->p == '}') {
		r->p++;
		return false;
	}
	n = decode_string(r, buf, bufsize - 1);
	*truncated = n > bufsize - 1;
	if (*truncated)
		n = bufsize - 1;
	buf[n] = '\0';
	*len = n;
	ws(r);
	r->p++; /* ':' */
	return true;
}

bool json_next_item(struct json_reader *r)
{
	ws(r);
	if (*r->p == ',') {
		r->p++;
		return true;
	}
	if (*r->p == ']') {
		r->p++;
		return false;
	}
	return true; /* first item */
}

void json_skip(struct json_reader *r)
{
	int depth = 0;

	do {
		ws(r);
		switch (*r->p) {
		case '{': case '[':
			depth++;
			r->p++;
			break;
		case '}': case ']':
			depth--;
			r->p++;
			break;
		case ',': case ':':
			r->p++;
			break;
		case '"':
			decode_string(r, NULL, 0);
			break;
		default:
			while (r->p < r->end && *r->p != ',' && *r->p != '}' && *r->p != ']' &&
			       *r->p != ' ' && *r->p != '\n' && *r->p != '\r' && *r->p != '\t')
				r->p++;
		}
		ws(r);
	} while (depth > 0);
}

const char *json_string(struct json_reader *r, struct arena *a, size_t *len)
{
	struct json_reader probe = *r;
	size_t n;
	char *out;

	ws(r);
	/* fast path: no escapes, copy the bytes as they are */
	{
		const char *q = r->p + 1;

		while ((q = plain_run(q, r->end)) < r->end && *q != '"' && *q != '\\')
			q++;
		if (q < r->end && *q == '"') {
			n = (size_t)(q - r->p - 1);
			out = arena_strndup(a, r->p + 1, n);
			r->p = q + 1;
			*len = n;
			return out;
		}
	}
	ws(&probe);
	n = decode_string(&probe, NULL, 0);
	out = arena_alloc(a, n + 1);
	if (!out)
		return NULL;
	decode_string(r, out, n);
	out[n] = '\0';
	*len = n;
	return out;
}

size_t json_string_into(struct json_reader *r, char *out, size_t cap)
{
	size_t n;

	ws(r);
	n = decode_string(r, out, cap - 1);
	out[n < cap - 1 ? n : cap - 1] = '\0';
	return n;
}

int json_int(struct json_reader *r, int64_t *v)
{
	const char *p;
	bool neg = false, over = false;
	uint64_t u = 0;

	ws(r);
	p = r->p;
	if (*p == '-') {
		neg = true;
		p++;
	}
	/* up to 19 digits cannot overflow 64 bits: no test on each */
	for (const char *stop = r->end - p > 19 ? p + 19 : r->end; p < stop && *p >= '0' && *p <= '9'; p++)
		u = u * 10 + (unsigned)(*p - '0');
	while (p < r->end && *p >= '0' && *p <= '9') {
		unsigned d = (unsigned)(*p - '0');
		if (u > (UINT64_MAX - d) / 10)
			over = true;
		else
			u = u * 10 + d;
		p++;
	}
	if (p < r->end && (*p == '.' || *p == 'e' || *p == 'E')) {
		r->p = p;
		json_skip(r);
		return 1;
	}
	r->p = p;
	if (over || (!neg && u > (uint64_t)INT64_MAX) || (neg && u > (uint64_t)INT64_MAX + 1))
		return 2;
	*v = neg ? (int64_t)(0 - u) : (int64_t)u;
	return 0;
}

size_t json_offset(const struct json_reader *r, const char *text)
{
	return (size_t)(r->p - text);
}

/* ---- values by position ---- */

struct json_val json_root(const char *text, size_t len)
{
	struct json_reader r;

	json_reader_init(&r, text, len);
	return json_here(&r);
}

struct json_val json_here(struct json_reader *r)
{
	ws(r);
	return (struct json_val){ r->p, r->end };
}

void json_reader_at(struct json_reader *r, struct json_val v)
{
	r->p = v.p;
	r->end = v.end;
}

enum json_vtype json_val_type(struct json_val v)
{
	struct json_reader r = { v.p, v.end };

	return v.p ? json_peek(&r) : JV_ABSENT;
}

bool json_given(struct json_val v)
{
	enum json_vtype t = json_val_type(v);

	return t != JV_ABSENT && t != JV_NULL;
}

int json_fields(struct json_val obj, const char *path, const char *const *names, bool closed,
		struct json_val *out, char *err, size_t errlen)
{
	struct json_reader r;

	json_reader_at(&r, obj);
	return json_fields_read(&r, path, names, closed, out, err, errlen);
}

/* strcmp(name, key) == 0 without a call: keys are short and names are few. */
static inline bool key_is(const char *name, const char *key)
{
	while (*name && *name == *key) {
		name++;
		key++;
	}
	return *name == *key;
}

int json_fields_read(struct json_reader *r, const char *path, const char *const *names, bool closed,
		     struct json_val *out, char *err, size_t errlen)
{
	char key[64];
	size_t n, klen;
	bool trunc;

	for (n = 0; names[n]; n++)
		out[n] = (struct json_val){ NULL, r->end };
	json_enter(r);
	while (json_next_key(r, key, sizeof(key), &klen, &trunc)) {
		size_t i;

		/* NUL was refused by the check, so strcmp sees the whole key */
		for (i = trunc ? n : 0; i < n && !key_is(names[i], key); i++)
			;
		if (i < n && out[i].p) {
			snprintf(err, errlen, "%s%s%s: duplicate key", path, *path ? "." : "", key);
			return -1;
		}
		if (i < n) {
			out[i] = json_here(r);
		} else if (closed) {
			snprintf(err, errlen, "%s%s%s%s: unknown field", path, *path ? "." : "", key,
				 trunc ? "..." : "");
			return -1;
		}
		json_skip(r);
	}
	ws(r);
	return 0;
}

int json_members_fields(const struct json_members *top, const char *path, const char *const *names, bool closed,
			struct json_val *out, char *err, size_t errlen)
{
	char key[64];
	size_t n, klen;
	bool trunc;

	if (top->n > JSON_MEMBERS_KEPT)
		return -2;
	for (n = 0; names[n]; n++)
		out[n] = (struct json_val){ NULL, top->end };
	for (size_t m = 0; m < top->n; m++) {
		struct json_reader r = { top->key[m], top->end };
		size_t i;

		json_next_key(&r, key, sizeof(key), &klen, &trunc);
		/* the same tests, in the same order, as json_fields_read() */
		for (i = trunc ? n : 0; i < n && !key_is(names[i], key); i++)
			;
		if (i < n && out[i].p) {
			snprintf(err, errlen, "%s%s%s: duplicate key", path, *path ? "." : "", key);
			return -1;
		}
		if (i < n) {
			out[i].p = top->value[m];
		} else if (closed) {
			snprintf(err, errlen, "%s%s%s%s: unknown field", path, *path ? "." : "", key,
				 trunc ? "..." : "");
			return -1;
		}
	}
	return 0;
}

size_t json_count(struct json_val v)
{
	struct json_reader r;
	size_t n = 0;
	enum json_vtype t = json_val_type(v);

	if (t != JV_ARRAY && t != JV_OBJECT)
		return 0;
	json_reader_at(&r, v);
	json_enter(&r);
	if (t == JV_ARRAY) {
		for (; json_next_item(&r); n++)
			json_skip(&r);
	} else {
		char key[1];
		size_t klen;
		bool trunc;

		for (; json_next_key(&r, key, sizeof(key), &klen, &trunc); n++)
			json_skip(&r);
	}
	return n;
}

const char *json_val_str(struct json_val v, struct arena *a, size_t *len)
{
	struct json_reader r = { v.p, v.end };

	if (json_val_type(v) != JV_STRING)
		return NULL;
	return json_string(&r, a, len);
}

int json_val_int(struct json_val v, int64_t *out)
{
	struct json_reader r = { v.p, v.end };

	if (json_val_type(v) != JV_NUMBER)
		return -1;
	return json_int(&r, out);
}

int json_val_num(struct json_val v, double *out)
{
	char tmp[128];
	size_t n;
	const char *text;
	char *end;

	if (json_val_type(v) != JV_NUMBER)
		return -1;
	n = json_val_text(v, &text);
	if (n >= sizeof(tmp))
		return -1;
	memcpy(tmp, text, n);
	tmp[n] = '\0';
	*out = strtod(tmp, &end);
	return *end == '\0' && isfinite(*out) ? 0 : -1;
}

size_t json_val_text(struct json_val v, const char **text)
{
	struct json_reader r = { v.p, v.end };

	*text = v.p;
	if (!v.p)
		return 0;
	json_skip(&r);
	while (r.p > v.p && (r.p[-1] == ' ' || r.p[-1] == '\n' || r.p[-1] == '\r' || r.p[-1] == '\t'))
		r.p--;
	return (size_t)(r.p - v.p);
}
