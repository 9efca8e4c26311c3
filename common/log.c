/* log: leveled logfmt lines with every value escaped (see log.h). */
#include "common/log.h"
#include "common/util.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 2048

static const char *log_comp = "stackmine";
static enum log_level log_min = LOG_INFO;
static const char *const level_names[] = { "debug", "info", "warn", "error" };
static log_sink_fn *log_sink;

void log_set_sink(log_sink_fn *fn)
{
	log_sink = fn;
}

void log_init(const char *component, enum log_level min)
{
	log_comp = component;
	log_min = min;
}

int log_level_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, level_names[i]) == 0)
			return i;
	return -1;
}

/* Code points shown as \uNNNN: C1 controls, and those that reorder or break the text around them
 * in a terminal or a log viewer (bidirectional controls, line and paragraph separators). */
static bool shown_as_code(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
	       (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

static uint32_t utf8_decode(const unsigned char *p, size_t len)
{
	if (len == 2)
		return (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f);
	if (len == 3)
		return (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
	return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 | (uint32_t)(p[2] & 0x3f) << 6 |
	       (p[3] & 0x3f);
}

/* The escaped form of the character at s (of *len bytes, set here) into out; its length. */
static size_t escape_one(const unsigned char *s, size_t n, size_t *len, char out[16])
{
	unsigned char ch = s[0];

	*len = 1;
	switch (ch) {
	case '"': return (size_t)snprintf(out, 16, "\\\"");
	case '\\': return (size_t)snprintf(out, 16, "\\\\");
	case '\n': return (size_t)snprintf(out, 16, "\\n");
	case '\r': return (size_t)snprintf(out, 16, "\\r");
	case '\t': return (size_t)snprintf(out, 16, "\\t");
	default: break;
	}
	if (ch < 0x20 || ch == 0x7f)
		return (size_t)snprintf(out, 16, "\\x%02x", ch);
	if (ch < 0x80) {
		out[0] = (char)ch;
		return 1;
	}
	*len = util_utf8_seq(s, n);
	if (!*len) {
		*len = 1;
		return (size_t)snprintf(out, 16, "\\x%02x", ch);
	}
	{
		uint32_t cp = utf8_decode(s, *len);

		if (shown_as_code(cp))
			return (size_t)snprintf(out, 16, "\\u%04x", (unsigned)cp);
	}
	memcpy(out, s, *len);
	return *len;
}

static bool bare_ok(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch <= ' ' || ch >= 0x7f || ch == '"' || ch == '=' || ch == '\\')
			return false;
	}
	return true;
}

/* s[0..n) escaped into dst[0..cap) without quotes, cut on a character with "..." when it does
 * not fit; the length written (no NUL). keep bytes stay free for the caller's closing quote. */
static size_t escape_into(char *dst, size_t cap, const char *s, size_t n)
{
	size_t w = 0, len, k;
	char one[16];

	if (cap < 3)
		return 0;
	for (size_t i = 0; i < n; i += len) {
		k = escape_one((const unsigned char *)s + i, n - i, &len, one);
		if (w + k + 3 > cap) {
			memcpy(dst + w, "...", 3);
			return w + 3;
		}
		memcpy(dst + w, one, k);
		w += k;
	}
	return w;
}

/* A run of key=value pairs made by the caller: as it is, but never a control byte. */
static size_t raw_into(char *dst, size_t cap, const char *s)
{
	size_t w = 0;

	for (; *s && w + 4 < cap; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch < ' ' || ch == 0x7f)
			w += (size_t)snprintf(dst + w, cap - w, "\\x%02x", ch);
		else
			dst[w++] = (char)ch;
	}
	return w;
}

size_t log_value(char *dst, size_t cap, const char *s, size_t n)
{
	size_t w;

	if (cap < 8) {
		if (cap)
			dst[0] = '\0';
		return 0;
	}
	if (bare_ok(s, n) && n < cap) {
		memcpy(dst, s, n);
		dst[n] = '\0';
		return n;
	}
	dst[0] = '"';
	w = 1 + escape_into(dst + 1, cap - 3, s, n);
	dst[w++] = '"';
	dst[w] = '\0';
	return w;
}

/* One conversion of fmt (at *f, just past the '%') formatted into out; *f moved past it. */
static void format_one(const char **f, va_list *ap, char *out, size_t cap)
{
	char spec[32] = "%";
	size_t sl = 1;
	int star[2], nstar = 0;
	const char *p = *f;
	char conv;
	int lng = 0;          /* 1 l, 2 ll, 3 z, 4 j, 5 t, 6 L, -1 h, -2 hh */

	while (*p && strchr("-+ #0", *p) && sl < 8)
		spec[sl++] = *p++;
	for (int part = 0; part < 2; part++) {
		if (part == 1) {
			if (*p != '.')
				break;
			spec[sl++] = *p++;
		}
		if (*p == '*') {
			star[nstar++] = va_arg(*ap, int);
			spec[sl++] = *p++;
		} else {
			while (*p >= '0' && *p <= '9' && sl < 24)
				spec[sl++] = *p++;
		}
	}
	for (;;) {
		if (*p == 'l') lng = lng == 1 ? 2 : 1;
		else if (*p == 'h') lng = lng == -1 ? -2 : -1;
		else if (*p == 'z') lng = 3;
		else if (*p == 'j') lng = 4;
		else if (*p == 't') lng = 5;
		else if (*p == 'L') lng = 6;
		else break;
		spec[sl++] = *p++;
	}
	conv = *p ? *p++ : '\0';
	spec[sl++] = conv;
	spec[sl] = '\0';
	*f = p;
	out[0] = '\0';
#define ONE(T) do { T v_ = va_arg(*ap, T); \
	if (nstar == 2) snprintf(out, cap, spec, star[0], star[1], v_); \
	else if (nstar == 1) snprintf(out, cap, spec, star[0], v_); \
	else snprintf(out, cap, spec, v_); } while (0)
	switch (conv) {
	case 'd': case 'i':
		if (lng == 2) ONE(long long);
		else if (lng == 1) ONE(long);
		else if (lng == 3) ONE(ptrdiff_t);
		else if (lng == 4) ONE(intmax_t);
		else if (lng == 5) ONE(ptrdiff_t);
		else ONE(int);
		break;
	case 'u': case 'x': case 'X': case 'o':
		if (lng == 2) ONE(unsigned long long);
		else if (lng == 1) ONE(unsigned long);
		else if (lng == 3) ONE(size_t);
		else if (lng == 4) ONE(uintmax_t);
		else if (lng == 5) ONE(size_t);
		else ONE(unsigned);
		break;
	case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
		if (lng == 6) ONE(long double);
		else ONE(double);
		break;
	case 'c':
		ONE(int);
		break;
	case 'p':
		ONE(void *);
		break;
	case 's': {
		const char *s = va_arg(*ap, const char *);
		if (!s)
			s = "(null)";
		if (nstar == 2) snprintf(out, cap, spec, star[0], star[1], s);
		else if (nstar == 1) snprintf(out, cap, spec, star[0], s);
		else snprintf(out, cap, spec, s);
		break;
	}
	default:              /* %% and what the format check lets through but this does not know */
		snprintf(out, cap, "%c", conv == '%' ? '%' : '?');
		break;
	}
#undef ONE
}

void log_msg(enum log_level lvl, const char *msg, const char *fmt, ...)
{
	char line[LINE_MAX_BYTES], tmp[1024];   /* small: the guard agent logs on its programs' threads */
	const size_t room = sizeof(line) - 8;     /* kept for a closing quote, "..." and the newline */
	struct timespec ts;
	struct tm tm;
	size_t n;
	bool quoted = false;
	va_list ap;

	if (lvl < log_min)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = (size_t)snprintf(line, sizeof(line), "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s comp=",
			     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			     ts.tv_nsec / 1000000, level_names[lvl]);
	n += log_value(line + n, 128, log_comp, strlen(log_comp));
	n += (size_t)snprintf(line + n, sizeof(line) - n, " msg=\"");
	n += escape_into(line + n, 512, msg, strlen(msg));
	line[n++] = '"';
	va_start(ap, fmt);
	if (fmt && *fmt)
		line[n++] = ' ';
	for (const char *f = fmt ? fmt : ""; *f && n < room;) {
		if (*f != '%' || f[1] == '%') {
			char ch = *f;
			f += *f == '%' ? 2 : 1;
			if (ch == '"')
				quoted = !quoted;
			/* the format is ours, but keep the line one line whatever it holds */
			line[n++] = ch == '\n' || ch == '\r' ? ' ' : ch;
			continue;
		}
		f++;
		format_one(&f, &ap, tmp, sizeof(tmp));
		if (strlen(tmp) == sizeof(tmp) - 1)   /* cut by the buffer: say so */
			memcpy(tmp + sizeof(tmp) - 4, "...", 3);
		if (quoted)
			n += escape_into(line + n, room - n, tmp, strlen(tmp));
		else if (line[n - 1] == '=')
			n += log_value(line + n, room - n, tmp, strlen(tmp));
		else
			n += raw_into(line + n, room - n, tmp);
	}
	va_end(ap);
	if (quoted)
		line[n++] = '"';
	while (line[n - 1] == ' ')   /* a pair cut off at the end of the line */
		n--;
	line[n++] = '\n';
	if (log_sink) {
		log_sink(line, n);
		return;
	}
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}
