/* formats: the formats sm-agent and sm-ingest import, by name, and telling them apart (see formats.h). */
#include "formats/formats.h"
#include "formats/bcc.h"
#include "formats/folded.h"
#include "formats/otlp.h"
#include "formats/perf.h"
#include "formats/pprof.h"

#include <string.h>

#define SNIFF_BYTES 65536
#define SNIFF_LINES 400

static int detect_import(struct importer *im);

const struct import_format import_auto = { "auto", detect_import };

static const struct import_format *const formats[] = {
	&import_perf, &import_folded, &import_pprof, &import_otlp, &import_bcc_offcpu,
	&import_bcc_offwaketime, &import_bcc_wakeuptime, &import_bcc_profile, &import_auto,
};

const struct import_format *import_format_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(formats) / sizeof(formats[0]); i++)
		if (strcmp(formats[i]->name, name) == 0)
			return formats[i];
	return NULL;
}

const char *import_format_names(void)
{
	return "perf, folded, pprof, otlp, bcc-offcpu, bcc-offwaketime, bcc-wakeuptime, bcc-profile "
	       "or auto";
}

static bool starts(const char *s, size_t n, const char *p)
{
	size_t k = strlen(p);

	return n >= k && memcmp(s, p, k) == 0;
}

static bool is_ws(char c)
{
	return c == ' ' || c == '\t';
}

/* "  7f81ee50c5d7 ioctl (/lib/x86_64-linux-gnu/libc-2.27.so)": perf script's frame line. */
static bool perf_frame_line(const char *s, size_t n)
{
	size_t i = 0, h;

	if (!n || !is_ws(s[0]))
		return false;
	while (i < n && is_ws(s[i]))
		i++;
	for (h = i; i < n && ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')); i++)
		;
	return i > h && i < n && s[i] == ' ' && s[n - 1] == ')' && memchr(s + i, '(', n - i);
}

/* The index past the chars of s from i that pass ok. */
static size_t span(const char *s, size_t n, size_t i, bool (*ok)(char))
{
	while (i < n && ok(s[i]))
		i++;
	return i;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_lhex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f');
}

/*
 * "nginx 1234 [001] 12345.678901: 250000 cpu-clock:  55d2c3a1b2c4 f+0x14 (/usr/sbin/nginx)":
 * perf script without -g, the one frame on the header line: a SECONDS.MICROS: token, later
 * a hex token, and a (DSO) at the end.
 */
static bool perf_inline_line(const char *s, size_t n)
{
	size_t i = 0, j;
	bool ts = false;

	if (!n || is_ws(s[0]) || s[n - 1] != ')')
		return false;
	while (i < n) {
		i = span(s, n, i, is_ws);
		if (!ts) {
			j = span(s, n, i, is_digit);
			if (j > i && j < n && s[j] == '.' && (j = span(s, n, j + 1, is_digit)) < n &&
			    s[j] == ':' && s[j - 1] != '.')
				ts = true;
		} else if ((j = span(s, n, i, is_lhex)) > i && j < n && is_ws(s[j]) &&
			   memchr(s + j, '(', n - j)) {
			return true;
		}
		while (i < n && !is_ws(s[i]))
			i++;
	}
	return false;
}

/* "a;b;c 12" or "a 12" at the start of a line. */
static bool folded_line(const char *s, size_t n)
{
	size_t k = n;

	while (k && s[k - 1] >= '0' && s[k - 1] <= '9')
		k--;
	return n && !is_ws(s[0]) && k < n && k > 1 && is_ws(s[k - 1]);
}

/* The trimmed line starts with tag. */
static bool tag_line(const char *s, size_t n, const char *tag)
{
	while (n && is_ws(*s)) {
		s++;
		n--;
	}
	return starts(s, n, tag);
}

/*
 * The text formats by their marks: bcc's banners and block lines, perf's frame lines,
 * folded records. NULL when nothing tells.
 */
static const struct import_format *detect_text(const char *d, size_t len)
{
	size_t pos = 0, lines = 0, perf = 0, folded = 0, dash = 0;
	int wake_order = 0;   /* 1: "waker:" came first (offwaketime), 2: "target:" (wakeuptime) */

	while (pos < len && lines < SNIFF_LINES) {
		const char *s = d + pos, *nl = memchr(s, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - s) : len - pos;

		if (!nl && pos + n == len && len == SNIFF_BYTES)
			break;   /* a line cut by the sniff window */
		pos += n + 1;
		lines++;
		if (n && s[n - 1] == '\r')
			n--;
		if (starts(s, n, "Tracing off-CPU time"))
			return &import_bcc_offcpu;
		if (starts(s, n, "Tracing blocked time") && memmem(s, n, "waker stack", 11))
			return &import_bcc_offwaketime;
		if (starts(s, n, "Tracing blocked time"))
			return &import_bcc_wakeuptime;
		if (starts(s, n, "Sampling at ") && memmem(s, n, "Hertz", 5))
			return &import_bcc_profile;
		if (!wake_order && tag_line(s, n, "waker:") && is_ws(s[0]))
			wake_order = 1;
		if (!wake_order && tag_line(s, n, "target:") && is_ws(s[0]))
			wake_order = 2;
		if (n > 2 && is_ws(s[0]) && tag_line(s, n, "- ") && s[n - 1] == ')')
			dash++;
		if (perf_frame_line(s, n) || perf_inline_line(s, n))
			perf++;
		else if (s[0] != '#' && folded_line(s, n))
			folded++;
	}
	if (wake_order == 1)
		return &import_bcc_offwaketime;
	if (wake_order == 2)
		return &import_bcc_wakeuptime;
	if (dash)
		return NULL;   /* offcputime or profile: the blocks look alike */
	if (perf)
		return &import_perf;
	if (folded)
		return &import_folded;
	return NULL;
}

static int detect_import(struct importer *im)
{
	const struct import_format *f = NULL;
	const unsigned char *d;
	size_t len, i = 0;

	if (import_peek(im, SNIFF_BYTES, &d, &len) < 0)
		return -1;
	if (!len)
		return import_fail_input(im, "empty file");
	if (pprof_sniff(d, len))
		f = &import_pprof;
	else {
		if (len >= 3 && memcmp(d, "\xef\xbb\xbf", 3) == 0)
			i = 3;
		while (i < len && (d[i] == ' ' || d[i] == '\t' || d[i] == '\r' || d[i] == '\n'))
			i++;
		if (i < len && d[i] == '{')
			f = &import_otlp;
		else if (memchr(d, '\0', len))
			return import_fail_input(im, "binary data of no format stackmine reads (%s)",
						 import_format_names());
		else
			f = detect_text((const char *)d, len);
	}
	if (!f)
		return import_fail_input(im, "cannot tell which format this is: name it with --format "
					 "(bcc's offcputime and profile print alike, and their folded -f "
					 "output looks like any folded file)");
	import_set_format(im, f);
	return f->parse(im);
}
