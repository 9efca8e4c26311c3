/* buf: growable byte buffer with a hard maximum (see buf.h). */
#include "common/buf.h"
#include "common/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t buf_limit(const struct buf *b)
{
	return b->max ? b->max : SIZE_MAX / 2;
}

int buf_reserve(struct buf *b, size_t extra)
{
	size_t need, ncap;
	char *p;

	if (b->err)
		return -1;
	if (extra > buf_limit(b) - b->len) {
		b->err = BUF_TOO_LARGE;
		return -1;
	}
	need = b->len + extra + 1; /* room for the terminator */
	if (need <= b->cap)
		return 0;
	ncap = b->cap ? b->cap : 256;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 4 ? need : ncap * 2;
	p = realloc(b->data, ncap);
	if (!p) {
		b->err = BUF_NO_MEMORY;
		return -1;
	}
	b->data = p;
	b->cap = ncap;
	return 0;
}

const char *buf_error_text(const struct buf *b)
{
	static _Thread_local char text[48];

	switch (b->err) {
	case BUF_OK:
		return "";
	case BUF_TOO_LARGE:
		snprintf(text, sizeof(text), "more than %zu bytes", buf_limit(b));
		return text;
	case BUF_NO_MEMORY:
		break;
	}
	return "out of memory";
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_putc(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	int n;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0 && !b->err)
		b->err = BUF_NO_MEMORY;
	if (n < 0 || buf_reserve(b, (size_t)n) < 0)
		return -1;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

int buf_put_double(struct buf *b, double v)
{
	char tmp[32];

	if (!isfinite(v))
		v = 0;
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
		if (strtod(tmp, NULL) == v)
			break;
	}
	return buf_puts(b, tmp);
}

/*
 * A bidirectional formatting character (U+061C, U+200E/F, U+202A-E, U+2066-9) at p, as visible
 * text, or NULL. Left in a page, one reverses or reorders the text around it (a host name
 * "evil\u202Etxt.exe" reads as another), so a page shows its code point instead.
 */
static const char *bidi_control_name(const unsigned char *p, size_t len)
{
	static const char *const u20[] = {
		[0x0e] = "[U+200E]", [0x0f] = "[U+200F]", [0x2a] = "[U+202A]", [0x2b] = "[U+202B]",
		[0x2c] = "[U+202C]", [0x2d] = "[U+202D]", [0x2e] = "[U+202E]", [0x66] = "[U+2066]",
		[0x67] = "[U+2067]", [0x68] = "[U+2068]", [0x69] = "[U+2069]",
	};
	unsigned cp;

	if (len == 2 && p[0] == 0xd8 && p[1] == 0x9c)
		return "[U+061C]";
	if (len != 3 || p[0] != 0xe2 || (p[1] != 0x80 && p[1] != 0x81))
		return NULL;
	cp = (unsigned)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);   /* the low 12 bits: 0x00e..0x069 */
	return cp < sizeof(u20) / sizeof(u20[0]) ? u20[cp] : NULL;
}

int buf_put_html(struct buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;

	while (i < n) {
		const char *rep = NULL;
		size_t len = 1;

		switch (p[i]) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&#39;"; break;
		default:
			if ((p[i] < 0x20 && p[i] != '\t' && p[i] != '\n') || p[i] == 0x7f)
				rep = "\xef\xbf\xbd";
			else if (p[i] >= 0x80 && !(len = util_utf8_seq(p + i, n - i)))
				rep = "\xef\xbf\xbd", len = 1;
			else if (p[i] >= 0x80)
				rep = bidi_control_name(p + i, len);
		}
		if (!rep) {
			i += len;
			continue;
		}
		if (buf_append(b, s + run, i - run) || buf_puts(b, rep))
			return -1;
		i += len;
		run = i;
	}
	return buf_append(b, s + run, i - run);
}

int buf_put_f1(struct buf *b, double v)
{
	long long t;

	if (!isfinite(v))
		v = 0;
	if (v > 1e15)
		v = 1e15;
	if (v < -1e15)
		v = -1e15;
	t = llround(v * 10);
	if (t < 0) {
		if (buf_putc(b, '-'))
			return -1;
		t = -t;
	}
	if (buf_put_i64(b, t / 10) || buf_putc(b, '.'))
		return -1;
	return buf_putc(b, (char)('0' + t % 10));
}

int buf_put_i64(struct buf *b, int64_t v)
{
	char tmp[UTIL_DEC_MAX];

	return buf_append(b, tmp, util_fmt_i64(tmp, v));
}

int buf_put_json_str(struct buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, start = 0;

	if (buf_putc(b, '"') < 0)
		return -1;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[6];
		size_t elen = 2;

		if (c >= 0x80) {
			size_t len = util_utf8_seq((const unsigned char *)s + i, n - i);

			if (len) {
				i += len - 1;
				continue;
			}
			/* not UTF-8: the replacement character */
			if (buf_append(b, s + start, i - start) < 0 || buf_puts(b, "\xef\xbf\xbd") < 0)
				return -1;
			start = i + 1;
			continue;
		}
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		if (buf_append(b, s + start, i - start) < 0)
			return -1;
		start = i + 1;
		esc[0] = '\\';
		switch (c) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		default:
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			elen = 6;
		}
		if (buf_append(b, esc, elen) < 0)
			return -1;
	}
	if (buf_append(b, s + start, n - start) < 0)
		return -1;
	return buf_putc(b, '"');
}

const char *buf_cstr(struct buf *b)
{
	if (!b->data) {
		if (buf_reserve(b, 0) < 0)
			return "";
		b->data[0] = '\0';
	}
	return b->data;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	b->err = BUF_OK;
	if (b->data)
		b->data[0] = '\0';
}

void buf_release(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->err = BUF_OK;
}
