/* jsonw: the JSON writer of every document stackmine produces (see jsonw.h). */
#include "common/jsonw.h"
#include "common/util.h"

#include <math.h>
#include <string.h>

void jsonw_init(struct jsonw *w, struct buf *b)
{
	memset(w, 0, sizeof(*w));
	w->b = b;
}

void jsonw_init_compact(struct jsonw *w, struct buf *b)
{
	jsonw_init(w, b);
	w->compact = true;
}

void jsonw_init_lines(struct jsonw *w, struct buf *b, int depth)
{
	jsonw_init_compact(w, b);
	w->lines = depth;
}

/* The separator before a member of the current container. */
static void separate(struct jsonw *w)
{
	if (w->any[w->depth])
		buf_putc(w->b, ',');
	if (w->depth <= w->lines) {
		buf_putc(w->b, '\n');
		for (int i = 0; i < w->depth; i++)
			buf_putc(w->b, ' ');
	} else if (w->any[w->depth] && !w->compact) {
		buf_putc(w->b, ' ');
	}
	w->any[w->depth] = true;
}

static bool failed(const struct jsonw *w)
{
	return w->misuse || buf_error(w->b) != BUF_OK;
}

static void misuse(struct jsonw *w, const char *why)
{
	if (!w->misuse) {
		w->misuse = true;
		w->why = why;
	}
}

/* Before a value: the comma, and whether one may stand here at all. */
static bool value_here(struct jsonw *w)
{
	if (failed(w))
		return false;
	if (w->depth == 0) {
		if (w->any[0]) {
			misuse(w, "a second value after the document");
			return false;
		}
		w->any[0] = true;
		return true;
	}
	if (w->open[w->depth] == '{') {
		if (!w->want_value) {
			misuse(w, "a value without a key inside an object");
			return false;
		}
		w->want_value = false;
		return true;
	}
	separate(w);
	return true;
}

static void open_level(struct jsonw *w, char c)
{
	if (!value_here(w))
		return;
	if (w->depth + 1 >= JSONW_MAX_DEPTH) {
		misuse(w, "nesting too deep");
		return;
	}
	w->depth++;
	w->open[w->depth] = c;
	w->any[w->depth] = false;
	buf_putc(w->b, c);
}

void jsonw_object(struct jsonw *w)
{
	open_level(w, '{');
}

void jsonw_array(struct jsonw *w)
{
	open_level(w, '[');
}

void jsonw_end(struct jsonw *w)
{
	if (failed(w))
		return;
	if (w->depth == 0 || w->want_value) {
		misuse(w, w->depth ? "a key without its value" : "a close without an open");
		return;
	}
	if (w->depth <= w->lines && w->any[w->depth]) {
		buf_putc(w->b, '\n');
		for (int i = 1; i < w->depth; i++)
			buf_putc(w->b, ' ');
	}
	buf_putc(w->b, w->open[w->depth] == '{' ? '}' : ']');
	w->depth--;
	if (w->depth == 0 && w->lines)
		buf_putc(w->b, '\n');
}

void jsonw_key(struct jsonw *w, const char *key)
{
	jsonw_keyn(w, key, strlen(key));
}

void jsonw_keyn(struct jsonw *w, const char *key, size_t n)
{
	if (failed(w))
		return;
	if (w->depth == 0 || w->open[w->depth] != '{' || w->want_value) {
		misuse(w, "a key outside an object");
		return;
	}
	separate(w);
	buf_put_json_str(w->b, key, n);
	buf_puts(w->b, w->compact ? ":" : ": ");
	w->want_value = true;
}

void jsonw_strn(struct jsonw *w, const char *s, size_t n)
{
	if (value_here(w))
		buf_put_json_str(w->b, s, n);
}

void jsonw_str(struct jsonw *w, const char *s)
{
	if (!s)
		jsonw_null(w);
	else
		jsonw_strn(w, s, strlen(s));
}

void jsonw_i64(struct jsonw *w, int64_t v)
{
	if (value_here(w))
		buf_put_i64(w->b, v);
}

void jsonw_u64(struct jsonw *w, uint64_t v)
{
	char tmp[UTIL_DEC_MAX];

	if (value_here(w))
		buf_append(w->b, tmp, util_fmt_u64(tmp, v));
}

void jsonw_double(struct jsonw *w, double v)
{
	if (!value_here(w))
		return;
	if (isfinite(v))
		buf_put_double(w->b, v);
	else
		buf_puts(w->b, "null");
}

void jsonw_bool(struct jsonw *w, bool v)
{
	if (value_here(w))
		buf_puts(w->b, v ? "true" : "false");
}

void jsonw_null(struct jsonw *w)
{
	if (value_here(w))
		buf_puts(w->b, "null");
}

/* RFC 8259's number: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
static bool json_number(const char *s)
{
	const char *p = s;

	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return false;
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return *p == '\0';
}

void jsonw_number_text(struct jsonw *w, const char *s)
{
	if (value_here(w))
		buf_puts(w->b, s && json_number(s) ? s : "null");
}

void jsonw_raw(struct jsonw *w, const char *json, size_t n)
{
	if (value_here(w))
		buf_append(w->b, json, n);
}

void jsonw_kstr(struct jsonw *w, const char *key, const char *s)
{
	jsonw_key(w, key);
	jsonw_str(w, s);
}

void jsonw_ki64(struct jsonw *w, const char *key, int64_t v)
{
	jsonw_key(w, key);
	jsonw_i64(w, v);
}

void jsonw_ku64(struct jsonw *w, const char *key, uint64_t v)
{
	jsonw_key(w, key);
	jsonw_u64(w, v);
}

void jsonw_kdouble(struct jsonw *w, const char *key, double v)
{
	jsonw_key(w, key);
	jsonw_double(w, v);
}

void jsonw_kbool(struct jsonw *w, const char *key, bool v)
{
	jsonw_key(w, key);
	jsonw_bool(w, v);
}

void jsonw_knull(struct jsonw *w, const char *key)
{
	jsonw_key(w, key);
	jsonw_null(w);
}

void jsonw_kobject(struct jsonw *w, const char *key)
{
	jsonw_key(w, key);
	jsonw_object(w);
}

void jsonw_karray(struct jsonw *w, const char *key)
{
	jsonw_key(w, key);
	jsonw_array(w);
}

int jsonw_finish(const struct jsonw *w)
{
	if (failed(w))
		return -1;
	return w->depth == 0 && w->any[0] ? 0 : -1;
}

const char *jsonw_error(const struct jsonw *w)
{
	if (buf_error(w->b) != BUF_OK)
		return buf_error_text(w->b);
	if (w->misuse)
		return w->why;
	if (w->depth != 0 || !w->any[0])
		return "an unfinished document";
	return "";
}

bool jsonw_too_large(const struct jsonw *w)
{
	return buf_error(w->b) == BUF_TOO_LARGE;
}
