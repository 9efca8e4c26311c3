/* wire: wire format v1 model, strict JSON parser/validator and writer (see wire.h). */
#include "wire.h"
#include "arena.h"
#include "util.h"

#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wire_parser {
	json_tokener *tok;
	struct wire_limits lim;
	char err[512];
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
	/* the deepest valid stream is 4 levels (root, stacks, stack, index) */
	if (p->lim.max_nesting < 4)
		p->lim.max_nesting = 4;
	p->tok = json_tokener_new_ex(p->lim.max_nesting);
	if (!p->tok) {
		free(p);
		return NULL;
	}
	json_tokener_set_flags(p->tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	return p;
}

void wire_parser_free(struct wire_parser *p)
{
	if (!p)
		return;
	json_tokener_free(p->tok);
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

static const char *type_name(json_object *o)
{
	switch (json_object_get_type(o)) {
	case json_type_null: return "null";
	case json_type_boolean: return "a boolean";
	case json_type_double: return "a fraction";
	case json_type_int: return "an integer";
	case json_type_object: return "an object";
	case json_type_array: return "an array";
	case json_type_string: return "a string";
	}
	return "unknown";
}

/* Copy a JSON string into the arena after checking length, NUL and UTF-8. */
static int take_str(struct wire_parser *p, struct arena *a, json_object *o, const char *path,
		    size_t max, bool allow_empty, const char **out)
{
	const char *s;
	size_t n;

	if (!json_object_is_type(o, json_type_string))
		return fail(p, WIRE_EINVALID, "%s: must be a string, not %s", path, type_name(o));
	s = json_object_get_string(o);
	n = (size_t)json_object_get_string_len(o);
	if (!n && !allow_empty)
		return fail(p, WIRE_EINVALID, "%s: must not be empty", path);
	if (n > max)
		return fail(p, WIRE_EINVALID, "%s: %zu bytes long, at most %zu allowed", path, n, max);
	if (memchr(s, '\0', n))
		return fail(p, WIRE_EINVALID, "%s: contains a NUL character", path);
	if (!util_utf8_valid(s, n))
		return fail(p, WIRE_EINVALID, "%s: not valid UTF-8", path);
	*out = arena_strndup(a, s, n);
	return *out ? WIRE_OK : fail(p, WIRE_ENOMEM, "%s: out of memory", path);
}

static int take_int(struct wire_parser *p, json_object *o, const char *path, int64_t min,
		    int64_t max, int64_t *out)
{
	int64_t v;

	if (!json_object_is_type(o, json_type_int))
		return fail(p, WIRE_EINVALID, "%s: must be an integer, not %s", path, type_name(o));
	v = json_object_get_int64(o);
	if (v == INT64_MAX && json_object_get_uint64(o) > (uint64_t)INT64_MAX)
		return fail(p, WIRE_EINVALID, "%s: out of range (at most %lld)", path, (long long)max);
	if (v < min)
		return fail(p, WIRE_EINVALID, "%s: %lld is negative or too small (at least %lld)", path,
			    (long long)v, (long long)min);
	if (v > max)
		return fail(p, WIRE_EINVALID, "%s: %lld out of range (at most %lld)", path, (long long)v,
			    (long long)max);
	*out = v;
	return WIRE_OK;
}

static json_object *field(json_object *obj, const char *key)
{
	json_object *v = NULL;

	if (!json_object_object_get_ex(obj, key, &v))
		return NULL;
	return v;
}

/* A required member: missing or null is an error. */
static int need(struct wire_parser *p, json_object *obj, const char *key, const char *path,
		json_object **out)
{
	*out = field(obj, key);
	if (!*out)
		return fail(p, WIRE_EINVALID, "%s: required field missing", path);
	return WIRE_OK;
}

#define TID_MAX ((int64_t)INT32_MAX)

static int parse_labels(struct wire_parser *p, struct arena *a, json_object *o,
			struct wire_stream *s)
{
	struct wire_label *labels;
	size_t n = 0, cnt;
	char path[WIRE_MAX_NAME + 32];
	int rc;

	if (!json_object_is_type(o, json_type_object))
		return fail(p, WIRE_EINVALID, "labels: must be an object, not %s", type_name(o));
	cnt = (size_t)json_object_object_length(o);
	if (cnt > p->lim.max_labels)
		return fail(p, WIRE_EINVALID, "labels: %zu keys, at most %zu allowed", cnt,
			    p->lim.max_labels);
	labels = arena_calloc(a, cnt ? cnt : 1, sizeof(*labels));
	if (!labels)
		return fail(p, WIRE_ENOMEM, "labels: out of memory");
	json_object_object_foreach(o, key, val) {
		size_t klen = strlen(key);

		if (!klen)
			return fail(p, WIRE_EINVALID, "labels: empty key");
		if (klen > p->lim.max_name)
			return fail(p, WIRE_EINVALID, "labels: key of %zu bytes, at most %zu allowed",
				    klen, p->lim.max_name);
		if (!util_utf8_valid(key, klen))
			return fail(p, WIRE_EINVALID, "labels: key not valid UTF-8");
		snprintf(path, sizeof(path), "labels.%s", key);
		labels[n].key = arena_strndup(a, key, klen);
		if (!labels[n].key)
			return fail(p, WIRE_ENOMEM, "labels: out of memory");
		rc = take_str(p, a, val, path, p->lim.max_name, true, &labels[n].value);
		if (rc)
			return rc;
		n++;
	}
	s->labels = labels;
	s->nlabels = n;
	return WIRE_OK;
}

static int parse_symptom(struct wire_parser *p, struct arena *a, json_object *o,
			 struct wire_symptom *sy)
{
	json_object *v;
	int rc;

	if (!json_object_is_type(o, json_type_object))
		return fail(p, WIRE_EINVALID, "symptom: must be an object, not %s", type_name(o));
	if ((rc = need(p, o, "kind", "symptom.kind", &v)) ||
	    (rc = take_str(p, a, v, "symptom.kind", 64, false, &sy->kind)))
		return rc;
	for (const char *c = sy->kind; *c; c++)
		if (*c == ' ' || *c == '\t' || (unsigned char)*c < 0x20)
			return fail(p, WIRE_EINVALID, "symptom.kind: must be one word");
	if ((rc = need(p, o, "tid", "symptom.tid", &v)) ||
	    (rc = take_int(p, v, "symptom.tid", 0, TID_MAX, &sy->tid)))
		return rc;
	if ((rc = need(p, o, "start_ns", "symptom.start_ns", &v)) ||
	    (rc = take_int(p, v, "symptom.start_ns", 0, WIRE_MAX_TIME_NS, &sy->start_ns)))
		return rc;
	if ((rc = need(p, o, "end_ns", "symptom.end_ns", &v)) ||
	    (rc = take_int(p, v, "symptom.end_ns", 0, WIRE_MAX_TIME_NS, &sy->end_ns)))
		return rc;
	if (sy->end_ns < sy->start_ns)
		return fail(p, WIRE_EINVALID, "symptom.end_ns: %lld is before start_ns %lld",
			    (long long)sy->end_ns, (long long)sy->start_ns);
	sy->unit_type = NULL;
	sy->threshold_ns = -1;
	if ((v = field(o, "unit_type")) && !json_object_is_type(v, json_type_null) &&
	    (rc = take_str(p, a, v, "symptom.unit_type", p->lim.max_name, true, &sy->unit_type)))
		return rc;
	if ((v = field(o, "threshold_ns")) && !json_object_is_type(v, json_type_null) &&
	    (rc = take_int(p, v, "symptom.threshold_ns", 0, WIRE_MAX_TIME_NS, &sy->threshold_ns)))
		return rc;
	return WIRE_OK;
}

static int parse_frames(struct wire_parser *p, struct arena *a, json_object *o,
			struct wire_stream *s)
{
	const char **frames;
	size_t n;
	char path[48];
	int rc;

	if (!json_object_is_type(o, json_type_array))
		return fail(p, WIRE_EINVALID, "frames: must be an array, not %s", type_name(o));
	n = json_object_array_length(o);
	if (n > p->lim.max_frames)
		return fail(p, WIRE_EINVALID, "frames: %zu entries, at most %zu allowed", n,
			    p->lim.max_frames);
	frames = arena_calloc(a, n ? n : 1, sizeof(*frames));
	if (!frames)
		return fail(p, WIRE_ENOMEM, "frames: out of memory");
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "frames[%zu]", i);
		rc = take_str(p, a, json_object_array_get_idx(o, i), path, p->lim.max_frame, false,
			      &frames[i]);
		if (rc)
			return rc;
	}
	s->frames = frames;
	s->nframes = n;
	return WIRE_OK;
}

static int parse_stacks(struct wire_parser *p, struct arena *a, json_object *o,
			struct wire_stream *s)
{
	struct wire_stack *stacks;
	size_t n;
	char path[64];
	int rc;

	if (!json_object_is_type(o, json_type_array))
		return fail(p, WIRE_EINVALID, "stacks: must be an array, not %s", type_name(o));
	n = json_object_array_length(o);
	if (n > p->lim.max_stacks)
		return fail(p, WIRE_EINVALID, "stacks: %zu entries, at most %zu allowed", n,
			    p->lim.max_stacks);
	stacks = arena_calloc(a, n ? n : 1, sizeof(*stacks));
	if (!stacks)
		return fail(p, WIRE_ENOMEM, "stacks: out of memory");
	for (size_t i = 0; i < n; i++) {
		json_object *st = json_object_array_get_idx(o, i);
		uint32_t *idx;
		size_t depth;

		if (!json_object_is_type(st, json_type_array))
			return fail(p, WIRE_EINVALID, "stacks[%zu]: must be an array, not %s", i,
				    type_name(st));
		depth = json_object_array_length(st);
		if (depth == 0)
			return fail(p, WIRE_EINVALID, "stacks[%zu]: must have at least 1 frame", i);
		if (depth > p->lim.max_stack_depth)
			return fail(p, WIRE_EINVALID, "stacks[%zu]: %zu frames, at most %zu allowed", i,
				    depth, p->lim.max_stack_depth);
		idx = arena_alloc(a, depth * sizeof(*idx));
		if (!idx)
			return fail(p, WIRE_ENOMEM, "stacks: out of memory");
		for (size_t k = 0; k < depth; k++) {
			int64_t v;
			snprintf(path, sizeof(path), "stacks[%zu][%zu]", i, k);
			rc = take_int(p, json_object_array_get_idx(st, k), path, 0, INT32_MAX, &v);
			if (rc)
				return rc;
			if ((size_t)v >= s->nframes)
				return fail(p, WIRE_EINVALID, "%s: index %lld out of range (%zu frames)",
					    path, (long long)v, s->nframes);
			idx[k] = (uint32_t)v;
		}
		stacks[i].frames = idx;
		stacks[i].len = (uint32_t)depth;
	}
	s->stacks = stacks;
	s->nstacks = n;
	return WIRE_OK;
}

static int parse_event(struct wire_parser *p, json_object *o, size_t i, size_t nstacks,
		       struct wire_event *e)
{
	json_object *v;
	char path[64];
	const char *kind;
	int64_t stack;
	int rc;

	if (!json_object_is_type(o, json_type_object))
		return fail(p, WIRE_EINVALID, "events[%zu]: must be an object, not %s", i,
			    type_name(o));
	snprintf(path, sizeof(path), "events[%zu].kind", i);
	if ((rc = need(p, o, "kind", path, &v)))
		return rc;
	if (!json_object_is_type(v, json_type_string))
		return fail(p, WIRE_EINVALID, "%s: must be a string, not %s", path, type_name(v));
	kind = json_object_get_string(v);
	if (strcmp(kind, "run") == 0)
		e->kind = WIRE_RUN;
	else if (strcmp(kind, "wait") == 0)
		e->kind = WIRE_WAIT;
	else
		return fail(p, WIRE_EINVALID, "%s: must be \"run\" or \"wait\"", path);

	snprintf(path, sizeof(path), "events[%zu].tid", i);
	if ((rc = need(p, o, "tid", path, &v)) || (rc = take_int(p, v, path, 0, TID_MAX, &e->tid)))
		return rc;
	snprintf(path, sizeof(path), "events[%zu].ts_ns", i);
	if ((rc = need(p, o, "ts_ns", path, &v)) ||
	    (rc = take_int(p, v, path, 0, WIRE_MAX_TIME_NS, &e->ts_ns)))
		return rc;
	snprintf(path, sizeof(path), "events[%zu].dur_ns", i);
	if ((rc = need(p, o, "dur_ns", path, &v)) ||
	    (rc = take_int(p, v, path, 0, WIRE_MAX_TIME_NS, &e->dur_ns)))
		return rc;
	snprintf(path, sizeof(path), "events[%zu].stack", i);
	if ((rc = need(p, o, "stack", path, &v)) ||
	    (rc = take_int(p, v, path, 0, INT32_MAX, &stack)))
		return rc;
	if ((size_t)stack >= nstacks)
		return fail(p, WIRE_EINVALID, "%s: index %lld out of range (%zu stacks)", path,
			    (long long)stack, nstacks);
	e->stack = (uint32_t)stack;
	e->readier_tid = 0;
	if ((v = field(o, "readier_tid")) && !json_object_is_type(v, json_type_null)) {
		snprintf(path, sizeof(path), "events[%zu].readier_tid", i);
		if (e->kind != WIRE_WAIT)
			return fail(p, WIRE_EINVALID, "%s: only wait events have a readier", path);
		if ((rc = take_int(p, v, path, 0, TID_MAX, &e->readier_tid)))
			return rc;
	}
	return WIRE_OK;
}

static int parse_events(struct wire_parser *p, struct arena *a, json_object *o,
			struct wire_stream *s)
{
	struct wire_event *events;
	size_t n;
	int rc;

	if (!json_object_is_type(o, json_type_array))
		return fail(p, WIRE_EINVALID, "events: must be an array, not %s", type_name(o));
	n = json_object_array_length(o);
	if (n == 0)
		return fail(p, WIRE_EINVALID, "events: must have at least 1 event");
	if (n > p->lim.max_events)
		return fail(p, WIRE_EINVALID, "events: %zu events, at most %zu allowed", n,
			    p->lim.max_events);
	events = arena_alloc(a, n * sizeof(*events));
	if (!events)
		return fail(p, WIRE_ENOMEM, "events: out of memory");
	for (size_t i = 0; i < n; i++)
		if ((rc = parse_event(p, json_object_array_get_idx(o, i), i, s->nstacks, &events[i])))
			return rc;
	s->events = events;
	s->nevents = n;
	return WIRE_OK;
}

static int parse_stream(struct wire_parser *p, struct arena *a, json_object *root,
			struct wire_stream *s)
{
	json_object *v;
	int64_t ver;
	int rc;

	if (!json_object_is_type(root, json_type_object))
		return fail(p, WIRE_EINVALID, "stream: must be a JSON object, not %s", type_name(root));
	if ((v = field(root, "stream_id"))) {
		if (!json_object_is_type(v, json_type_string) ||
		    !util_uuid_canon(json_object_get_string(v),
				     (size_t)json_object_get_string_len(v), s->stream_id)) {
			s->stream_id[0] = '\0';
			return fail(p, WIRE_EINVALID, "stream_id: must be a UUID string");
		}
	}
	if ((rc = need(p, root, "v", "v", &v)) || (rc = take_int(p, v, "v", 0, INT32_MAX, &ver)))
		return rc;
	if (ver != 1)
		return fail(p, WIRE_EINVALID, "v: unsupported version %lld (this server speaks 1)",
			    (long long)ver);
	if (!s->stream_id[0])
		return fail(p, WIRE_EINVALID, "stream_id: required field missing");
	if ((rc = need(p, root, "host", "host", &v)) ||
	    (rc = take_str(p, a, v, "host", p->lim.max_name, false, &s->host)))
		return rc;
	if ((rc = need(p, root, "app", "app", &v)) ||
	    (rc = take_str(p, a, v, "app", p->lim.max_name, false, &s->app)))
		return rc;
	if ((v = field(root, "version")) && !json_object_is_type(v, json_type_null) &&
	    (rc = take_str(p, a, v, "version", p->lim.max_name, true, &s->version)))
		return rc;
	if ((v = field(root, "build_id")) && !json_object_is_type(v, json_type_null) &&
	    (rc = take_str(p, a, v, "build_id", p->lim.max_name, true, &s->build_id)))
		return rc;
	if ((v = field(root, "labels")) && !json_object_is_type(v, json_type_null) &&
	    (rc = parse_labels(p, a, v, s)))
		return rc;
	if ((rc = need(p, root, "symptom", "symptom", &v)) ||
	    (rc = parse_symptom(p, a, v, &s->symptom)))
		return rc;
	if ((rc = need(p, root, "frames", "frames", &v)) || (rc = parse_frames(p, a, v, s)))
		return rc;
	if ((rc = need(p, root, "stacks", "stacks", &v)) || (rc = parse_stacks(p, a, v, s)))
		return rc;
	if ((rc = need(p, root, "events", "events", &v)) || (rc = parse_events(p, a, v, s)))
		return rc;
	return WIRE_OK;
}

int wire_parse(struct wire_parser *p, const char *json, size_t len, struct arena *a,
	       struct wire_stream *out)
{
	json_object *root;
	enum json_tokener_error jerr;
	size_t end;
	int rc;

	memset(out, 0, sizeof(*out));
	p->err[0] = '\0';
	if (len > INT32_MAX)
		return fail(p, WIRE_EINVALID, "stream: larger than 2 GiB");
	json_tokener_reset(p->tok);
	root = json_tokener_parse_ex(p->tok, json, (int)len);
	jerr = json_tokener_get_error(p->tok);
	if (!root && jerr == json_tokener_continue)
		return fail(p, WIRE_ENOTJSON, "not JSON: unexpected end of input at byte %zu", len);
	if (jerr != json_tokener_success) {
		if (jerr == json_tokener_error_depth)
			return fail(p, WIRE_ENOTJSON, "not JSON: nested deeper than %d levels",
				    p->lim.max_nesting);
		return fail(p, WIRE_ENOTJSON, "not JSON: %s at byte %zu",
			    json_tokener_error_desc(jerr), json_tokener_get_parse_end(p->tok));
	}
	for (end = json_tokener_get_parse_end(p->tok); end < len; end++)
		if (json[end] != ' ' && json[end] != '\t' && json[end] != '\r' && json[end] != '\n') {
			json_object_put(root);
			return fail(p, WIRE_ENOTJSON, "not JSON: unexpected text after the object at byte %zu",
				    end);
		}
	rc = parse_stream(p, a, root, out);
	json_object_put(root);
	return rc;
}

static int put_key(struct buf *b, const char *key)
{
	return buf_putc(b, '"') | buf_puts(b, key) | buf_puts(b, "\":");
}

static int put_strfield(struct buf *b, const char *key, const char *v)
{
	return buf_putc(b, ',') | put_key(b, key) | buf_put_json_str(b, v, strlen(v));
}

static int put_intfield(struct buf *b, const char *key, int64_t v)
{
	return buf_putc(b, ',') | put_key(b, key) | buf_put_i64(b, v);
}

int wire_write_json(const struct wire_stream *s, struct buf *b)
{
	int rc = 0;

	rc |= buf_puts(b, "{\"v\":1");
	rc |= put_strfield(b, "stream_id", s->stream_id);
	rc |= put_strfield(b, "host", s->host);
	rc |= put_strfield(b, "app", s->app);
	if (s->version)
		rc |= put_strfield(b, "version", s->version);
	if (s->build_id)
		rc |= put_strfield(b, "build_id", s->build_id);
	if (s->nlabels) {
		rc |= buf_puts(b, ",\"labels\":{");
		for (size_t i = 0; i < s->nlabels; i++) {
			if (i)
				rc |= buf_putc(b, ',');
			rc |= buf_put_json_str(b, s->labels[i].key, strlen(s->labels[i].key));
			rc |= buf_putc(b, ':');
			rc |= buf_put_json_str(b, s->labels[i].value, strlen(s->labels[i].value));
		}
		rc |= buf_putc(b, '}');
	}
	rc |= buf_puts(b, ",\"symptom\":{\"kind\":");
	rc |= buf_put_json_str(b, s->symptom.kind, strlen(s->symptom.kind));
	rc |= put_intfield(b, "tid", s->symptom.tid);
	rc |= put_intfield(b, "start_ns", s->symptom.start_ns);
	rc |= put_intfield(b, "end_ns", s->symptom.end_ns);
	if (s->symptom.unit_type)
		rc |= put_strfield(b, "unit_type", s->symptom.unit_type);
	if (s->symptom.threshold_ns >= 0)
		rc |= put_intfield(b, "threshold_ns", s->symptom.threshold_ns);
	rc |= buf_puts(b, "},\"frames\":[");
	for (size_t i = 0; i < s->nframes; i++) {
		if (i)
			rc |= buf_putc(b, ',');
		rc |= buf_put_json_str(b, s->frames[i], strlen(s->frames[i]));
	}
	rc |= buf_puts(b, "],\"stacks\":[");
	for (size_t i = 0; i < s->nstacks; i++) {
		rc |= buf_puts(b, i ? ",[" : "[");
		for (uint32_t k = 0; k < s->stacks[i].len; k++) {
			if (k)
				rc |= buf_putc(b, ',');
			rc |= buf_put_i64(b, s->stacks[i].frames[k]);
		}
		rc |= buf_putc(b, ']');
	}
	rc |= buf_puts(b, "],\"events\":[");
	for (size_t i = 0; i < s->nevents; i++) {
		const struct wire_event *e = &s->events[i];

		rc |= buf_puts(b, e->kind == WIRE_WAIT ? "{\"kind\":\"wait\"" : "{\"kind\":\"run\"");
		rc |= put_intfield(b, "tid", e->tid);
		rc |= put_intfield(b, "ts_ns", e->ts_ns);
		rc |= put_intfield(b, "dur_ns", e->dur_ns);
		rc |= put_intfield(b, "stack", e->stack);
		if (e->kind == WIRE_WAIT)
			rc |= put_intfield(b, "readier_tid", e->readier_tid);
		rc |= buf_putc(b, '}');
		if (i + 1 < s->nevents)
			rc |= buf_putc(b, ',');
	}
	rc |= buf_puts(b, "]}");
	return rc ? -1 : 0;
}
