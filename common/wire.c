/* wire: wire format v1 model, strict JSON parser/validator and writer (see wire.h). */
#include "common/wire.h"
#include "common/arena.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "common/vec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wire_parser {
	struct wire_limits lim;
	char err[512];
	struct vec events, stack_idx, stacks, frames;  /* scratch, reused across parses */
	struct vec frame_lens;
	struct vec spans;   /* the frames' strings as the check found them */
	char *own;          /* wire_parse_in_place()'s text, NULL for wire_parse()'s */
};

void wire_limits_default(struct wire_limits *lim)
{
	lim->max_name = WIRE_MAX_NAME;
	lim->max_frame = WIRE_MAX_FRAME;
	lim->max_labels = WIRE_MAX_LABELS;
	lim->max_frames = 100000;
	lim->max_stacks = 100000;
	lim->max_stack_depth = WIRE_MAX_STACK_DEPTH;
	lim->max_events = 1000000;
	lim->max_nesting = 16;
}

struct wire_parser *wire_parser_open(const struct wire_limits *lim)
{
	struct wire_parser *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->lim = *lim;
	/* the deepest valid stream is 3 levels (root, stacks, stack) */
	if (p->lim.max_nesting < 3)
		p->lim.max_nesting = 3;
	p->events.size = sizeof(struct wire_event);
	p->stack_idx.size = sizeof(uint32_t);
	p->stacks.size = sizeof(struct wire_stack);
	p->frames.size = sizeof(const char *);
	p->frame_lens.size = sizeof(uint32_t);
	p->spans.size = sizeof(struct json_span);
	return p;
}

void wire_parser_free(struct wire_parser *p)
{
	if (!p)
		return;
	free(p->events.data);
	free(p->stack_idx.data);
	free(p->stacks.data);
	free(p->frames.data);
	free(p->frame_lens.data);
	free(p->spans.data);
	free(p);
}

const char *wire_parser_error(const struct wire_parser *p)
{
	return p->err;
}

__attribute__((format(printf, 3, 4)))
static int fail(struct wire_parser *p, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	return code;
}

/*
 * Field paths are formatted only when an error is reported: "name",
 * "name[i]", "name[i].sub" or "name[i][k]".
 */
struct fpath {
	const char *name;
	const char *sub;
	size_t i, k;
	int nidx;
};

#define PATH(n) (&(struct fpath){ (n), NULL, 0, 0, 0 })

static const char *path_str(const struct fpath *f, char *buf, size_t n)
{
	if (f->nidx == 0)
		snprintf(buf, n, "%s%s%s", f->name, f->sub ? "." : "", f->sub ? f->sub : "");
	else if (f->nidx == 1)
		snprintf(buf, n, "%s[%zu]%s%s", f->name, f->i, f->sub ? "." : "", f->sub ? f->sub : "");
	else
		snprintf(buf, n, "%s[%zu][%zu]", f->name, f->i, f->k);
	return buf;
}

__attribute__((format(printf, 4, 5)))
static int failp(struct wire_parser *p, int code, const struct fpath *f, const char *fmt, ...)
{
	char path[WIRE_MAX_NAME + 64], msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return fail(p, code, "%s: %s", path_str(f, path, sizeof(path)), msg);
}

static const char *type_name(struct json_reader *r)
{
	switch (json_peek(r)) {
	case JV_NULL: case JV_ABSENT: return "null";
	case JV_TRUE: case JV_FALSE: return "a boolean";
	case JV_OBJECT: return "an object";
	case JV_ARRAY: return "an array";
	case JV_STRING: return "a string";
	case JV_NUMBER: {
		const char *q = r->p;
		while (q < r->end && *q != ',' && *q != '}' && *q != ']' && *q != ' ' && *q != '\n') {
			if (*q == '.' || *q == 'e' || *q == 'E')
				return "a fraction";
			q++;
		}
		return "an integer";
	}
	}
	return "unknown";
}

/* A string of at most max bytes into *out (allocated in a), its length into *len. */
static int take_str_len(struct wire_parser *p, struct arena *a, struct json_reader *r,
			const struct fpath *f, size_t max, bool allow_empty, const char **out, size_t *len)
{
	size_t n;

	if (json_peek(r) != JV_STRING)
		return failp(p, WIRE_EINVALID, f, "must be a string, not %s", type_name(r));
	*out = json_string(r, a, &n);
	if (!*out)
		return failp(p, WIRE_ENOMEM, f, "out of memory");
	if (!n && !allow_empty)
		return failp(p, WIRE_EINVALID, f, "must not be empty");
	if (n > max)
		return failp(p, WIRE_EINVALID, f, "%zu bytes long, at most %zu allowed", n, max);
	/* no NUL: wire_parse()'s json_check_members() refused \u0000 in any string */
	*len = n;
	return WIRE_OK;
}

static int take_str(struct wire_parser *p, struct arena *a, struct json_reader *r,
		    const struct fpath *f, size_t max, bool allow_empty, const char **out)
{
	size_t n;

	return take_str_len(p, a, r, f, max, allow_empty, out, &n);
}

static int take_int(struct wire_parser *p, struct json_reader *r, const struct fpath *f,
		    int64_t min, int64_t max, int64_t *out)
{
	int64_t v;
	int rc;

	if (json_peek(r) != JV_NUMBER)
		return failp(p, WIRE_EINVALID, f, "must be an integer, not %s", type_name(r));
	rc = json_int(r, &v);
	if (rc == 1)
		return failp(p, WIRE_EINVALID, f, "must be an integer, not a fraction");
	if (rc == 2)
		return failp(p, WIRE_EINVALID, f, "out of range (at most %lld)", (long long)max);
	if (v < min)
		return failp(p, WIRE_EINVALID, f, "%lld is negative or too small (at least %lld)",
			     (long long)v, (long long)min);
	if (v > max)
		return failp(p, WIRE_EINVALID, f, "%lld out of range (at most %lld)", (long long)v,
			     (long long)max);
	*out = v;
	return WIRE_OK;
}

/*
 * Object members are found first and read afterwards in a fixed order, so
 * that the order of keys in the text changes nothing (stacks are checked
 * against the frame table, events against the stacks) and the first error
 * reported is always the same one. A known key given twice is refused (two
 * readers could take different ones); unknown members are skipped unread.
 */
static int find_members(struct wire_parser *p, struct json_reader *r, const char *path,
			const char *const *names, size_t n, const char **pos)
{
	const char *list[17];
	struct json_val v[16];
	char err[WIRE_MAX_NAME + 128];

	memcpy(list, names, n * sizeof(*list));
	list[n] = NULL;
	/* r ends after the object: one pass finds the members and moves past them */
	if (json_fields_read(r, path, list, false, v, err, sizeof(err)) < 0)
		return fail(p, WIRE_EINVALID, "%s", err);
	for (size_t i = 0; i < n; i++)
		pos[i] = v[i].p;
	return WIRE_OK;
}

static bool present(struct json_reader *r, const char *pos, const char *end)
{
	r->p = pos;
	r->end = end;
	return pos && json_peek(r) != JV_NULL;
}

#define TID_MAX ((int64_t)INT32_MAX)

/* n entries read of an array over its limit, plus the rest skipped and counted: for the message. */
static size_t count_rest(struct json_reader *r, size_t n)
{
	do {
		n++;
		json_skip(r);
	} while (json_next_item(r));
	return n;
}

/* An object of string values ("labels", "modules") into pairs: at most max_keys keys of 1 to
 * max_name bytes, values of at most max_value bytes (empty ones too when allow_empty). */
static int parse_pairs(struct wire_parser *p, struct arena *a, struct json_reader *r, const char *what,
		       size_t max_keys, size_t max_value, bool allow_empty, const struct wire_label **out,
		       size_t *nout)
{
	struct json_reader cnt = *r;
	struct wire_label *labels;
	char key[WIRE_MAX_NAME * 4 + 1];
	size_t n = 0, total = 0, klen;
	bool trunc;
	int rc;

	if (json_peek(r) != JV_OBJECT)
		return fail(p, WIRE_EINVALID, "%s: must be an object, not %s", what, type_name(r));
	json_enter(&cnt);
	while (json_next_key(&cnt, key, sizeof(key), &klen, &trunc)) {
		total++;
		json_skip(&cnt);
	}
	if (total > max_keys)
		return fail(p, WIRE_EINVALID, "%s: %zu keys, at most %zu allowed", what, total, max_keys);
	labels = arena_calloc(a, total ? total : 1, sizeof(*labels));
	if (!labels)
		return fail(p, WIRE_ENOMEM, "%s: out of memory", what);
	json_enter(r);
	while (json_next_key(r, key, sizeof(key), &klen, &trunc)) {
		struct fpath f = { what, key, 0, 0, 0 };
		size_t i;

		if (!klen)
			return fail(p, WIRE_EINVALID, "%s: empty key", what);
		if (trunc || klen > p->lim.max_name)
			return fail(p, WIRE_EINVALID, "%s: key of %s%zu bytes, at most %zu allowed", what,
				    trunc ? "more than " : "", klen, p->lim.max_name);
		if (memchr(key, '\0', klen))
			return fail(p, WIRE_EINVALID, "%s: key contains a NUL character", what);
		for (i = 0; i < n && strcmp(labels[i].key, key) != 0; i++)
			;
		if (i < n)
			return fail(p, WIRE_EINVALID, "%s.%s: duplicate key", what, key);
		labels[n].key = arena_strndup(a, key, klen);
		if (!labels[n].key)
			return fail(p, WIRE_ENOMEM, "%s: out of memory", what);
		n++;
		rc = take_str(p, a, r, &f, max_value, allow_empty, &labels[i].value);
		if (rc)
			return rc;
	}
	*out = labels;
	*nout = n;
	return WIRE_OK;
}

static int parse_labels(struct wire_parser *p, struct arena *a, struct json_reader *r,
			struct wire_stream *s)
{
	return parse_pairs(p, a, r, "labels", p->lim.max_labels, p->lim.max_name, true, &s->labels, &s->nlabels);
}

static int parse_symptom(struct wire_parser *p, struct arena *a, struct json_reader *r,
			 struct wire_symptom *sy)
{
	static const char *const names[] = { "kind", "tid", "start_ns", "end_ns", "unit_type",
					     "threshold_ns" };
	const char *pos[6];
	const char *end = r->end;
	int rc;

	if (json_peek(r) != JV_OBJECT)
		return fail(p, WIRE_EINVALID, "symptom: must be an object, not %s", type_name(r));
	if ((rc = find_members(p, r, "symptom", names, 6, pos)))
		return rc;
	for (int i = 0; i < 4; i++)
		if (!pos[i])
			return fail(p, WIRE_EINVALID, "symptom.%s: required field missing", names[i]);
	present(r, pos[0], end);
	if ((rc = take_str(p, a, r, PATH("symptom.kind"), 64, false, &sy->kind)))
		return rc;
	for (const char *c = sy->kind; *c; c++)
		if (*c == ' ' || *c == '\t' || (unsigned char)*c < 0x20)
			return fail(p, WIRE_EINVALID, "symptom.kind: must be one word");
	present(r, pos[1], end);
	if ((rc = take_int(p, r, PATH("symptom.tid"), 0, TID_MAX, &sy->tid)))
		return rc;
	present(r, pos[2], end);
	if ((rc = take_int(p, r, PATH("symptom.start_ns"), 0, WIRE_MAX_TIME_NS, &sy->start_ns)))
		return rc;
	present(r, pos[3], end);
	if ((rc = take_int(p, r, PATH("symptom.end_ns"), 0, WIRE_MAX_TIME_NS, &sy->end_ns)))
		return rc;
	if (sy->end_ns < sy->start_ns)
		return fail(p, WIRE_EINVALID, "symptom.end_ns: %lld is before start_ns %lld",
			    (long long)sy->end_ns, (long long)sy->start_ns);
	sy->unit_type = NULL;
	sy->threshold_ns = -1;
	if (present(r, pos[4], end) &&
	    (rc = take_str(p, a, r, PATH("symptom.unit_type"), p->lim.max_name, true, &sy->unit_type)))
		return rc;
	if (present(r, pos[5], end) &&
	    (rc = take_int(p, r, PATH("symptom.threshold_ns"), 0, WIRE_MAX_TIME_NS, &sy->threshold_ns)))
		return rc;
	return WIRE_OK;
}

static int parse_frames(struct wire_parser *p, struct arena *a, struct json_reader *r,
			struct wire_stream *s)
{
	const char **frames;
	uint32_t *lens;
	size_t n = 0;
	int rc;

	if (json_peek(r) != JV_ARRAY)
		return fail(p, WIRE_EINVALID, "frames: must be an array, not %s", type_name(r));
	p->frames.len = 0;
	p->frame_lens.len = 0;
	json_enter(r);
	while (json_next_item(r)) {
		struct fpath f = { "frames", NULL, n, 0, 1 };
		const struct json_span *sp = n < p->spans.len ? (const struct json_span *)p->spans.data + n : NULL;
		const char *name, **np;
		size_t len;
		uint32_t *lp;

		if (n >= p->lim.max_frames)
			return fail(p, WIRE_EINVALID, "frames: %zu entries, at most %zu allowed", count_rest(r, n),
				    p->lim.max_frames);
		if (sp && !sp->escaped && sp->len && sp->len <= p->lim.max_frame && json_peek(r) == JV_STRING &&
		    r->p == sp->at) {
			/* the check found where it ends, and that it is the name as written: not scanned
			 * again, but ended where it is (a text of our own) or copied */
			if (p->own) {
				char *q = p->own + (sp->at + 1 - p->own);

				q[sp->len] = '\0';
				name = q;
			} else if (!(name = arena_strndup(a, sp->at + 1, sp->len))) {
				return failp(p, WIRE_ENOMEM, &f, "out of memory");
			}
			len = sp->len;
			r->p = sp->at + sp->len + 2;
		} else if ((rc = take_str_len(p, a, r, &f, p->lim.max_frame, false, &name, &len))) {
			return rc;
		}
		if (!(np = vec_push(&p->frames)) || !(lp = vec_push(&p->frame_lens)))
			return fail(p, WIRE_ENOMEM, "frames: out of memory");
		*np = name;
		*lp = (uint32_t)len;   /* at most max_frame */
		n++;
	}
	frames = arena_alloc(a, (n ? n : 1) * sizeof(*frames));
	lens = arena_alloc(a, (n ? n : 1) * sizeof(*lens));
	if (!frames || !lens)
		return fail(p, WIRE_ENOMEM, "frames: out of memory");
	memcpy(frames, p->frames.data, n * sizeof(*frames));
	memcpy(lens, p->frame_lens.data, n * sizeof(*lens));
	s->frames = frames;
	s->frame_lens = lens;
	s->nframes = n;
	return WIRE_OK;
}

/* ---- short paths: what agents write, read in one pass (each gives way to the general reading) ---- */

static inline const char *fast_ws(const char *q, const char *end)
{
	while (q < end && (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t'))
		q++;
	return q;
}

/* The member name key (n bytes, no escapes) and its colon at q: past them and the white space after,
 * or NULL. */
static inline const char *fast_key(const char *q, const char *end, const char *key, size_t n)
{
	if ((size_t)(end - q) < n + 3 || q[0] != '"' || memcmp(q + 1, key, n) != 0 || q[n + 1] != '"')
		return NULL;
	q = fast_ws(q + n + 2, end);
	if (q >= end || *q != ':')
		return NULL;
	return fast_ws(q + 1, end);
}

/* Up to 18 digits at q (text wire_parse() checked: no leading zero), the number they make at most
 * max and no fraction or exponent after them:
 * *v and past them (and the white space after), or NULL. */
static inline const char *fast_uint(const char *q, const char *end, int64_t max, int64_t *v)
{
	int64_t x = 0;
	int n = 0;

	for (; n <= 10 && end - q >= 8 && util_eight_digits(q); q += 8, n += 8)
		x = x * 100000000 + util_parse_eight(q);
	for (; q < end && *q >= '0' && *q <= '9'; q++) {
		if (++n > 18)
			return NULL;
		x = x * 10 + (*q - '0');
	}
	if (!n || x > max || (q < end && (*q == '.' || *q == 'e' || *q == 'E')))
		return NULL;
	*v = x;
	return fast_ws(q, end);
}

/* A comma at q: past it and the white space after, or NULL. */
static inline const char *fast_comma(const char *q, const char *end)
{
	return q < end && *q == ',' ? fast_ws(q + 1, end) : NULL;
}

static int parse_stacks(struct wire_parser *p, struct arena *a, struct json_reader *r,
			struct wire_stream *s)
{
	struct wire_stack *stacks, *slot_st;
	uint32_t *idx;
	size_t n = 0;
	int rc;

	if (json_peek(r) != JV_ARRAY)
		return fail(p, WIRE_EINVALID, "stacks: must be an array, not %s", type_name(r));
	p->stacks.len = p->stack_idx.len = 0;
	json_enter(r);
	for (size_t i = 0; json_next_item(r); i++) {
		struct wire_stack st = { NULL, 0 };
		size_t depth = 0;

		if (i >= p->lim.max_stacks)
			return fail(p, WIRE_EINVALID, "stacks: %zu entries, at most %zu allowed", count_rest(r, i),
				    p->lim.max_stacks);
		if (json_peek(r) != JV_ARRAY)
			return fail(p, WIRE_EINVALID, "stacks[%zu]: must be an array, not %s", i,
				    type_name(r));
		json_enter(r);
		/* the common case, compact indexes in range ("[0,4,17]"), in one loop; whatever else
		 * (white space, a sign, a fraction, an index out of range, the depth's limit) from
		 * where it is, by the general one below, which says what is wrong */
		for (const char *q = r->p, *end = r->end; depth < p->lim.max_stack_depth;) {
			const char *d = q;
			uint64_t x = 0;
			uint32_t *slot;

			while (d < end && *d >= '0' && *d <= '9' && d - q < 10)
				x = x * 10 + (uint64_t)(*d++ - '0');
			if (d == q || x >= s->nframes ||
			    (d < end && ((*d >= '0' && *d <= '9') || *d == '.' || *d == 'e' || *d == 'E')))
				break;
			if (!(slot = vec_push(&p->stack_idx)))
				return fail(p, WIRE_ENOMEM, "stacks: out of memory");
			*slot = (uint32_t)x;   /* under nframes, at most max_frames */
			depth++;
			r->p = q = d;
			if (end - q < 2 || q[0] != ',' || q[1] < '0' || q[1] > '9')
				break;
			q++;
		}
		for (size_t k = depth; json_next_item(r); k++) {
			struct fpath f = { "stacks", NULL, i, k, 2 };
			uint32_t *slot;
			const char *q;
			int64_t v;

			if (k >= p->lim.max_stack_depth)
				return fail(p, WIRE_EINVALID, "stacks[%zu]: %zu frames, at most %zu allowed",
					    i, count_rest(r, k), p->lim.max_stack_depth);
			/* the common case, digits in range, read here; anything else by take_int() */
			if ((q = fast_uint(fast_ws(r->p, r->end), r->end, INT32_MAX, &v)))
				r->p = q;
			else if ((rc = take_int(p, r, &f, 0, INT32_MAX, &v)))
				return rc;
			if ((size_t)v >= s->nframes)
				return failp(p, WIRE_EINVALID, &f, "index %lld out of range (%zu frames)",
					     (long long)v, s->nframes);
			if (!(slot = vec_push(&p->stack_idx)))
				return fail(p, WIRE_ENOMEM, "stacks: out of memory");
			*slot = (uint32_t)v;
			depth++;
		}
		if (depth == 0)
			return fail(p, WIRE_EINVALID, "stacks[%zu]: must have at least 1 frame", i);
		st.len = (uint32_t)depth;
		if (!(slot_st = vec_push(&p->stacks)))
			return fail(p, WIRE_ENOMEM, "stacks: out of memory");
		*slot_st = st;
		n++;
	}
	stacks = arena_alloc(a, (n ? n : 1) * sizeof(*stacks));
	idx = arena_alloc(a, (p->stack_idx.len ? p->stack_idx.len : 1) * sizeof(*idx));
	if (!stacks || !idx)
		return fail(p, WIRE_ENOMEM, "stacks: out of memory");
	memcpy(idx, p->stack_idx.data, p->stack_idx.len * sizeof(*idx));
	for (size_t i = 0, off = 0; i < n; i++) {
		stacks[i].len = ((struct wire_stack *)p->stacks.data)[i].len;
		stacks[i].frames = idx + off;
		off += stacks[i].len;
	}
	s->stacks = stacks;
	s->nstacks = n;
	return WIRE_OK;
}

/*
 * An event as the agent (and wire_write_json()) writes it: kind, tid, ts_ns, dur_ns, stack and
 * readier_tid (a wait's, or null) in that order, each once, integers in range, nothing else.
 * Read in one pass, r moved past it: true. Anything else (another order, a member more or
 * missing, escapes, a value out of range) is false, r unmoved, for parse_event()'s reading and
 * its messages. The text was checked: it is JSON, so a number has no leading zero.
 */
static bool event_fast(struct json_reader *r, size_t nstacks, struct wire_event *e)
{
	const char *q = fast_ws(r->p, r->end), *end = r->end;
	int64_t stack, readier = 0;

	if (q >= end || *q != '{' || !(q = fast_key(fast_ws(q + 1, end), end, "kind", 4)))
		return false;
	if ((size_t)(end - q) >= 6 && memcmp(q, "\"wait\"", 6) == 0) {
		e->kind = WIRE_WAIT;
		q += 6;
	} else if ((size_t)(end - q) >= 5 && memcmp(q, "\"run\"", 5) == 0) {
		e->kind = WIRE_RUN;
		q += 5;
	} else {
		return false;
	}
	q = fast_ws(q, end);
	if (!(q = fast_comma(q, end)) || !(q = fast_key(q, end, "tid", 3)) ||
	    !(q = fast_uint(q, end, TID_MAX, &e->tid)) || !(q = fast_comma(q, end)) ||
	    !(q = fast_key(q, end, "ts_ns", 5)) || !(q = fast_uint(q, end, WIRE_MAX_TIME_NS, &e->ts_ns)) ||
	    !(q = fast_comma(q, end)) || !(q = fast_key(q, end, "dur_ns", 6)) ||
	    !(q = fast_uint(q, end, WIRE_MAX_TIME_NS, &e->dur_ns)) || !(q = fast_comma(q, end)) ||
	    !(q = fast_key(q, end, "stack", 5)) || !(q = fast_uint(q, end, INT32_MAX, &stack)) ||
	    (size_t)stack >= nstacks)
		return false;
	if (q < end && *q == ',') {
		if (!(q = fast_key(fast_ws(q + 1, end), end, "readier_tid", 11)))
			return false;
		if ((size_t)(end - q) >= 4 && memcmp(q, "null", 4) == 0)
			q = fast_ws(q + 4, end);
		else if (e->kind != WIRE_WAIT || !(q = fast_uint(q, end, TID_MAX, &readier)))
			return false;
	}
	if (q >= end || *q != '}')
		return false;
	e->stack = (uint32_t)stack;
	e->readier_tid = readier;
	r->p = q + 1;
	return true;
}

static int parse_event(struct wire_parser *p, struct arena *a, struct json_reader *r, size_t i,
		       size_t nstacks, struct wire_event *e)
{
	static const char *const names[] = { "kind", "tid", "ts_ns", "dur_ns", "stack", "readier_tid" };
	const char *pos[6];
	const char *end = r->end;
	struct fpath f = { "events", NULL, i, 0, 1 };
	int64_t stack;
	int rc;

	if (event_fast(r, nstacks, e))
		return WIRE_OK;
	if (json_peek(r) != JV_OBJECT)
		return fail(p, WIRE_EINVALID, "events[%zu]: must be an object, not %s", i, type_name(r));
	{
		const char *list[7] = { names[0], names[1], names[2], names[3], names[4], names[5], NULL };
		struct json_val v[6];
		char err[WIRE_MAX_NAME + 128];

		/* the path is written only for a message: events are many */
		if (json_fields_read(r, "", list, false, v, err, sizeof(err)) < 0)
			return fail(p, WIRE_EINVALID, "events[%zu].%s", i, err);
		for (int k = 0; k < 6; k++)
			pos[k] = v[k].p;
	}
	{
		const char *after = r->p;
		size_t klen;
		const char *kind;

		f.sub = "kind";
		if (!pos[0])
			return failp(p, WIRE_EINVALID, &f, "required field missing");
		present(r, pos[0], end);
		if (json_peek(r) != JV_STRING)
			return failp(p, WIRE_EINVALID, &f, "must be a string, not %s", type_name(r));
		kind = r->p + 1;
		klen = strcspn(kind, "\"\\");
		if (kind[klen] == '\\') {
			/* escapes ("r\u0075n" is "run"): decode this rare one properly */
			kind = json_string(r, a, &klen);
			if (!kind)
				return failp(p, WIRE_ENOMEM, &f, "out of memory");
		}
		if (klen == 3 && memcmp(kind, "run", 3) == 0)
			e->kind = WIRE_RUN;
		else if (klen == 4 && memcmp(kind, "wait", 4) == 0)
			e->kind = WIRE_WAIT;
		else
			return failp(p, WIRE_EINVALID, &f, "must be \"run\" or \"wait\"");
		r->p = after;
	}
	for (int k = 1; k <= 4; k++) {
		static const int64_t maxv[] = { 0, TID_MAX, WIRE_MAX_TIME_NS, WIRE_MAX_TIME_NS, INT32_MAX };
		int64_t *dst[] = { NULL, &e->tid, &e->ts_ns, &e->dur_ns, &stack };
		struct json_reader fr;

		f.sub = names[k];
		if (!pos[k])
			return failp(p, WIRE_EINVALID, &f, "required field missing");
		fr.p = pos[k];
		fr.end = end;
		if ((rc = take_int(p, &fr, &f, 0, maxv[k], dst[k])))
			return rc;
	}
	if ((size_t)stack >= nstacks) {
		f.sub = "stack";
		return failp(p, WIRE_EINVALID, &f, "index %lld out of range (%zu stacks)",
			     (long long)stack, nstacks);
	}
	e->stack = (uint32_t)stack;
	e->readier_tid = 0;
	if (pos[5]) {
		struct json_reader fr = { pos[5], end };

		if (json_peek(&fr) != JV_NULL) {
			f.sub = "readier_tid";
			if (e->kind != WIRE_WAIT)
				return failp(p, WIRE_EINVALID, &f, "only wait events have a readier");
			if ((rc = take_int(p, &fr, &f, 0, TID_MAX, &e->readier_tid)))
				return rc;
		}
	}
	return WIRE_OK;
}

static int parse_events(struct wire_parser *p, struct arena *a, struct json_reader *r,
			struct wire_stream *s)
{
	struct wire_event *events, *slot_e;
	size_t n = 0;
	int rc;

	if (json_peek(r) != JV_ARRAY)
		return fail(p, WIRE_EINVALID, "events: must be an array, not %s", type_name(r));
	p->events.len = 0;
	json_enter(r);
	while (json_next_item(r)) {
		struct wire_event e;

		if (n >= p->lim.max_events)
			return fail(p, WIRE_EINVALID, "events: %zu events, at most %zu allowed", count_rest(r, n),
				    p->lim.max_events);
		if ((rc = parse_event(p, a, r, n, s->nstacks, &e)))
			return rc;
		if (!(slot_e = vec_push(&p->events)))
			return fail(p, WIRE_ENOMEM, "events: out of memory");
		*slot_e = e;
		n++;
	}
	if (n == 0)
		return fail(p, WIRE_EINVALID, "events: must have at least 1 event");
	events = arena_alloc(a, n * sizeof(*events));
	if (!events)
		return fail(p, WIRE_ENOMEM, "events: out of memory");
	memcpy(events, p->events.data, n * sizeof(*events));
	s->events = events;
	s->nevents = n;
	return WIRE_OK;
}

bool wire_build_id_ok(const char *s, size_t n)
{
	if (n < 2 || n > WIRE_MAX_BUILD_ID || n % 2)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* "modules": {"name": "build id hex", ...}: at most WIRE_MAX_MODULES, names as labels' keys. */
static int parse_modules(struct wire_parser *p, struct arena *a, struct json_reader *r,
			 struct wire_stream *s)
{
	int rc = parse_pairs(p, a, r, "modules", WIRE_MAX_MODULES, WIRE_MAX_BUILD_ID, false, &s->modules,
			     &s->nmodules);

	for (size_t i = 0; rc == WIRE_OK && i < s->nmodules; i++)
		if (!wire_build_id_ok(s->modules[i].value, strlen(s->modules[i].value)))
			rc = fail(p, WIRE_EINVALID, "modules.%s: a build id is 2 to %d lower-case hex digits, an even number",
				  s->modules[i].key, WIRE_MAX_BUILD_ID);
	return rc;
}

/* A tid as a "threads" key: decimal, no sign, no leading zero, 0 (the idle task, which perf
 * captures show) to TID_MAX: one spelling per tid. */
static bool thread_key(const char *k, size_t n, int64_t *tid)
{
	int64_t v = 0;

	if (n == 0 || n > 10 || (k[0] == '0' && n > 1))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (k[i] < '0' || k[i] > '9')
			return false;
		v = v * 10 + (k[i] - '0');
	}
	*tid = v;
	return v <= TID_MAX;
}

static int tid_cmp(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return a < b ? -1 : a > b;
}

/* "threads": {"4211": "nginx: worker", ...}: at most WIRE_MAX_THREADS, names of 1 to
 * WIRE_MAX_THREAD_NAME bytes without control characters (they are labels to show). Duplicates
 * are found by sorting, not pair by pair: 4096 entries must stay cheap. */
static int parse_threads(struct wire_parser *p, struct arena *a, struct json_reader *r,
			 struct wire_stream *s)
{
	struct json_reader cnt = *r;
	struct wire_thread *th;
	int64_t *sorted;
	char key[WIRE_MAX_NAME * 4 + 1];
	size_t n = 0, total = 0, klen;
	bool trunc;
	int rc;

	if (json_peek(r) != JV_OBJECT)
		return fail(p, WIRE_EINVALID, "threads: must be an object, not %s", type_name(r));
	json_enter(&cnt);
	while (json_next_key(&cnt, key, sizeof(key), &klen, &trunc)) {
		total++;
		json_skip(&cnt);
	}
	if (total > WIRE_MAX_THREADS)
		return fail(p, WIRE_EINVALID, "threads: %zu entries, at most %d allowed", total, WIRE_MAX_THREADS);
	th = arena_calloc(a, total ? total : 1, sizeof(*th));
	sorted = arena_calloc(a, total ? total : 1, sizeof(*sorted));
	if (!th || !sorted)
		return fail(p, WIRE_ENOMEM, "threads: out of memory");
	json_enter(r);
	while (json_next_key(r, key, sizeof(key), &klen, &trunc)) {
		struct fpath f = { "threads", key, 0, 0, 0 };

		if (trunc || klen > 32)
			return fail(p, WIRE_EINVALID, "threads: a key of %s%zu bytes is not a thread id",
				    trunc ? "more than " : "", klen);
		if (!thread_key(key, klen, &th[n].tid))
			return fail(p, WIRE_EINVALID, "threads.%.*s: not a thread id (a decimal integer from 0 to %lld)",
				    (int)klen, key, (long long)TID_MAX);
		if ((rc = take_str(p, a, r, &f, WIRE_MAX_THREAD_NAME, false, &th[n].name)))
			return rc;
		for (const unsigned char *c = (const unsigned char *)th[n].name; *c; c++)
			if (*c < 0x20 || *c == 0x7f)
				return failp(p, WIRE_EINVALID, &f, "contains a control character");
		sorted[n] = th[n].tid;
		n++;
	}
	qsort(sorted, n, sizeof(*sorted), tid_cmp);
	for (size_t i = 1; i < n; i++)
		if (sorted[i] == sorted[i - 1])
			return fail(p, WIRE_EINVALID, "threads.%lld: duplicate key", (long long)sorted[i]);
	s->threads = th;
	s->nthreads = n;
	return WIRE_OK;
}

enum { F_V, F_ID, F_HOST, F_APP, F_VERSION, F_BUILD, F_LABELS, F_SYMPTOM, F_FRAMES, F_STACKS,
       F_EVENTS, F_ROLE, F_WEIGHT, F_MODULES, F_THREADS, F_COUNT };

static int parse_stream(struct wire_parser *p, struct arena *a, struct json_reader *r,
			const struct json_members *top, struct wire_stream *s)
{
	static const char *const names[F_COUNT] = { "v", "stream_id", "host", "app", "version",
						    "build_id", "labels", "symptom", "frames",
						    "stacks", "events", "role", "weight", "modules",
						    "threads" };
	const char *pos[F_COUNT];
	const char *end = r->end;
	const char *id;
	size_t idlen;
	int64_t ver;
	int rc;

	if (json_peek(r) != JV_OBJECT)
		return fail(p, WIRE_EINVALID, "stream: must be a JSON object, not %s", type_name(r));
	{
		/* the members the validation noted, in place of a pass over a stream's whole text */
		const char *list[F_COUNT + 1];
		struct json_val v[F_COUNT];
		char err[WIRE_MAX_NAME + 128];

		memcpy(list, names, sizeof(names));
		list[F_COUNT] = NULL;
		rc = json_members_fields(top, "", list, false, v, err, sizeof(err));
		if (rc == -1)
			return fail(p, WIRE_EINVALID, "%s", err);
		if (rc == 0)
			for (size_t i = 0; i < F_COUNT; i++)
				pos[i] = v[i].p;
		else if ((rc = find_members(p, r, "", names, F_COUNT, pos)))
			return rc;
	}
	if (present(r, pos[F_ID], end)) {
		if (json_peek(r) != JV_STRING || !(id = json_string(r, a, &idlen)) ||
		    !util_uuid_canon(id, idlen, s->stream_id)) {
			s->stream_id[0] = '\0';
			return fail(p, WIRE_EINVALID, "stream_id: must be a UUID string");
		}
	}
	if (!pos[F_V])
		return fail(p, WIRE_EINVALID, "v: required field missing");
	present(r, pos[F_V], end);
	if ((rc = take_int(p, r, PATH("v"), 0, INT32_MAX, &ver)))
		return rc;
	if (ver != 1)
		return fail(p, WIRE_EINVALID, "v: unsupported version %lld (this server speaks 1)",
			    (long long)ver);
	if (!s->stream_id[0])
		return fail(p, WIRE_EINVALID, "stream_id: required field missing");
	for (int f = F_HOST; f <= F_APP; f++) {
		if (!pos[f])
			return fail(p, WIRE_EINVALID, "%s: required field missing", names[f]);
		present(r, pos[f], end);
		if ((rc = take_str(p, a, r, PATH(names[f]), p->lim.max_name, false,
				   f == F_HOST ? &s->host : &s->app)))
			return rc;
	}
	if (present(r, pos[F_VERSION], end) &&
	    (rc = take_str(p, a, r, PATH("version"), p->lim.max_name, true, &s->version)))
		return rc;
	if (present(r, pos[F_BUILD], end) &&
	    (rc = take_str(p, a, r, PATH("build_id"), p->lim.max_name, true, &s->build_id)))
		return rc;
	if (present(r, pos[F_LABELS], end) && (rc = parse_labels(p, a, r, s)))
		return rc;
	if (present(r, pos[F_MODULES], end) && (rc = parse_modules(p, a, r, s)))
		return rc;
	if (present(r, pos[F_THREADS], end) && (rc = parse_threads(p, a, r, s)))
		return rc;
	if (present(r, pos[F_ROLE], end)) {
		const char *role;

		if ((rc = take_str(p, a, r, PATH("role"), p->lim.max_name, false, &role)))
			return rc;
		if (strcmp(role, "violation") == 0)
			s->role = WIRE_ROLE_VIOLATION;
		else if (strcmp(role, "baseline") == 0)
			s->role = WIRE_ROLE_BASELINE;
		else
			return fail(p, WIRE_EINVALID, "role: must be \"violation\" or \"baseline\"");
	}
	s->weight = 1;
	if (present(r, pos[F_WEIGHT], end)) {
		double wt;

		if (json_peek(r) != JV_NUMBER)
			return fail(p, WIRE_EINVALID, "weight: must be a number, not %s", type_name(r));
		if (json_val_num(json_here(r), &wt) < 0)
			return fail(p, WIRE_EINVALID, "weight: must be a finite number");
		if (!(wt >= 1))
			return fail(p, WIRE_EINVALID, "weight: %g is below 1 (a sampling weight is at least 1)", wt);
		s->weight = wt;
	}
	for (int f = F_SYMPTOM; f <= F_EVENTS; f++) {
		if (!pos[f])
			return fail(p, WIRE_EINVALID, "%s: required field missing", names[f]);
		r->p = pos[f];
		switch (f) {
		case F_SYMPTOM: rc = parse_symptom(p, a, r, &s->symptom); break;
		case F_FRAMES: rc = parse_frames(p, a, r, s); break;
		case F_STACKS: rc = parse_stacks(p, a, r, s); break;
		default: rc = parse_events(p, a, r, s); break;
		}
		if (rc)
			return rc;
	}
	return WIRE_OK;
}

int wire_parse(struct wire_parser *p, const char *json, size_t len, struct arena *a,
	       struct wire_stream *out)
{
	struct json_reader r;
	struct json_members top;
	char msg[256];

	memset(out, 0, sizeof(*out));
	p->err[0] = '\0';
	/* no allocation per value here, so the budget is only what JSON allows (two bytes a value) */
	{
		const struct json_limits lim = { p->lim.max_nesting, 2, 0 };

		if (json_check_members_spans(json, len, &lim, &top, "frames", &p->spans, p->lim.max_frames, msg,
					     sizeof(msg)) < 0)
			return fail(p, WIRE_ENOTJSON, "not JSON: %s", msg);
	}
	json_reader_init(&r, json, len);
	return parse_stream(p, a, &r, &top, out);
}

int wire_parse_in_place(struct wire_parser *p, char *json, size_t len, struct arena *a,
			struct wire_stream *out)
{
	int rc;

	p->own = json;
	rc = wire_parse(p, json, len, a, out);
	p->own = NULL;
	return rc;
}

int wire_write_report(const struct wire_report *r, struct buf *b)
{
	struct jsonw w;

	jsonw_init_compact(&w, b);
	jsonw_object(&w);
	jsonw_ki64(&w, "v", 1);
	jsonw_kstr(&w, "host", r->host ? r->host : "");
	jsonw_kstr(&w, "exe", r->exe ? r->exe : "");
	jsonw_kstr(&w, "build_id", r->build_id ? r->build_id : "");
	jsonw_kstr(&w, "mode", r->mode ? r->mode : "");
	jsonw_kstr(&w, "agent_version", r->agent_version ? r->agent_version : "");
	jsonw_kstr(&w, "app", r->app ? r->app : "");
	jsonw_ki64(&w, "pid", r->pid);
	jsonw_ki64(&w, "started_ns", r->started_ns > 0 ? r->started_ns : 0);
	jsonw_ku64(&w, "units", r->units);
	jsonw_ku64(&w, "violations", r->violations);
	jsonw_ku64(&w, "drops", r->drops);
	jsonw_ku64(&w, "spool_backlog", r->spool_backlog);
	jsonw_ku64(&w, "ship_errors", r->ship_errors);
	jsonw_kbool(&w, "exiting", r->exiting);
	jsonw_kstr(&w, "collector", r->collector ? r->collector : "process");
	jsonw_end(&w);
	return jsonw_finish(&w);
}

/* An event's object, most of a stream's text, written in one go rather than a value at a time
 * through jsonw: the agent writes millions of them. The same text as jsonw's compact form. */
#define EVENT_JSON_MAX 192  /* its keys and five numbers of up to 20 characters */

static char *put_lit(char *p, const char *lit, size_t n)
{
	memcpy(p, lit, n);
	return p + n;
}

#define PUT_LIT(p, s) put_lit(p, s, sizeof(s) - 1)

static char *put_i64(char *p, int64_t v)
{
	return p + util_fmt_i64(p, v);
}

static size_t event_json(char *out, const struct wire_event *e)
{
	char *p = out;

	if (e->kind == WIRE_WAIT)
		p = PUT_LIT(p, "{\"kind\":\"wait\",\"tid\":");
	else
		p = PUT_LIT(p, "{\"kind\":\"run\",\"tid\":");
	p = put_i64(p, e->tid);
	p = put_i64(PUT_LIT(p, ",\"ts_ns\":"), e->ts_ns);
	p = put_i64(PUT_LIT(p, ",\"dur_ns\":"), e->dur_ns);
	p = put_i64(PUT_LIT(p, ",\"stack\":"), (int64_t)e->stack);
	if (e->kind == WIRE_WAIT)
		p = put_i64(PUT_LIT(p, ",\"readier_tid\":"), e->readier_tid);
	*p++ = '}';
	return (size_t)(p - out);
}

int wire_write_json(const struct wire_stream *s, struct buf *b)
{
	struct jsonw w;

	jsonw_init_compact(&w, b);
	jsonw_object(&w);
	jsonw_ki64(&w, "v", 1);
	jsonw_kstr(&w, "stream_id", s->stream_id);
	jsonw_kstr(&w, "host", s->host);
	jsonw_kstr(&w, "app", s->app);
	if (s->role == WIRE_ROLE_BASELINE)
		jsonw_kstr(&w, "role", "baseline");
	if (s->weight > 1)
		jsonw_kdouble(&w, "weight", s->weight);
	if (s->version)
		jsonw_kstr(&w, "version", s->version);
	if (s->build_id)
		jsonw_kstr(&w, "build_id", s->build_id);
	if (s->nlabels) {
		jsonw_kobject(&w, "labels");
		for (size_t i = 0; i < s->nlabels; i++)
			jsonw_kstr(&w, s->labels[i].key, s->labels[i].value);
		jsonw_end(&w);
	}
	if (s->nmodules) {
		jsonw_kobject(&w, "modules");
		for (size_t i = 0; i < s->nmodules; i++)
			jsonw_kstr(&w, s->modules[i].key, s->modules[i].value);
		jsonw_end(&w);
	}
	if (s->nthreads) {
		jsonw_kobject(&w, "threads");
		for (size_t i = 0; i < s->nthreads; i++) {
			char tid[24];

			snprintf(tid, sizeof(tid), "%lld", (long long)s->threads[i].tid);
			jsonw_kstr(&w, tid, s->threads[i].name);
		}
		jsonw_end(&w);
	}
	jsonw_kobject(&w, "symptom");
	jsonw_kstr(&w, "kind", s->symptom.kind);
	jsonw_ki64(&w, "tid", s->symptom.tid);
	jsonw_ki64(&w, "start_ns", s->symptom.start_ns);
	jsonw_ki64(&w, "end_ns", s->symptom.end_ns);
	if (s->symptom.unit_type)
		jsonw_kstr(&w, "unit_type", s->symptom.unit_type);
	if (s->symptom.threshold_ns >= 0)
		jsonw_ki64(&w, "threshold_ns", s->symptom.threshold_ns);
	jsonw_end(&w);
	jsonw_karray(&w, "frames");
	for (size_t i = 0; i < s->nframes; i++)
		jsonw_str(&w, s->frames[i]);
	jsonw_end(&w);
	jsonw_karray(&w, "stacks");
	for (size_t i = 0; i < s->nstacks; i++) {
		jsonw_array(&w);
		for (uint32_t k = 0; k < s->stacks[i].len; k++)
			jsonw_i64(&w, s->stacks[i].frames[k]);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_karray(&w, "events");
	for (size_t i = 0; i < s->nevents; i++) {
		char ev[EVENT_JSON_MAX];

		jsonw_raw(&w, ev, event_json(ev, &s->events[i]));
	}
	jsonw_end(&w);
	jsonw_end(&w);
	return jsonw_finish(&w);
}
