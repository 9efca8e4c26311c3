/* folded: collapsed stacks to run events laid end to end (see folded.h and docs/import.md). */
#include "formats/folded.h"
#include "formats/import.h"
#include "common/buf.h"

#include <stdlib.h>
#include <string.h>

struct folded {
	struct importer *im;
	struct buf fb;           /* the frame string being built */
	uint32_t frames[WIRE_MAX_STACK_DEPTH];
	bool austin;             /* a "# austin:" header was read */
	int64_t count_ns;        /* cost of one count without the option (austin's: 1 us) */
};

static bool is_ws(char c)
{
	return c == ' ' || c == '\t';
}

static bool all_digits(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* A count: digits only, at most 18 of them. */
static bool parse_count(const char *s, size_t n, int64_t *out)
{
	int64_t v = 0;

	if (!all_digits(s, n) || n > 18)
		return false;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	*out = v;
	return true;
}

/* "comm-PID/TID", the thread prefix stackcollapse-perf.pl --tid writes. */
static bool thread_prefix(const char *s, size_t n, int64_t *tid, size_t *comm_len)
{
	const char *dash = memrchr(s, '-', n), *slash;
	int64_t pid;

	if (!dash || dash == s)
		return false;
	slash = memchr(dash, '/', n - (size_t)(dash - s));
	if (!slash || !parse_count(dash + 1, (size_t)(slash - dash - 1), &pid) ||
	    !parse_count(slash + 1, n - (size_t)(slash + 1 - s), tid) || *tid > INT32_MAX)
		return false;
	*comm_len = (size_t)(dash - s);
	return true;
}

/*
 * module!function from the annotations collapsers use: "module`function"
 * (DTrace), "function [module]", "function_[k]" (kernel, FlameGraph); anything
 * else stays as it is.
 */
static int64_t folded_frame(struct folded *fo, const char *s, size_t n)
{
	struct buf *b = &fo->fb;
	const char *tick, *lb;
	int rc = 0;

	if (!n || memchr(s, '!', n))
		return import_frame(fo->im, s, n);
	buf_reset(b);
	if ((tick = memchr(s, '`', n)) && tick > s && tick + 1 < s + n) {
		rc |= buf_append(b, s, (size_t)(tick - s));
		rc |= buf_putc(b, '!');
		rc |= buf_append(b, tick + 1, n - (size_t)(tick + 1 - s));
	} else if (n > 4 && memcmp(s + n - 4, "_[k]", 4) == 0) {
		rc |= buf_puts(b, "[kernel.kallsyms]!");
		rc |= buf_append(b, s, n - 4);
	} else if (n > 3 && s[n - 1] == ']' && (lb = memrchr(s, '[', n - 1)) && lb > s + 1 &&
		   lb[-1] == ' ' && lb + 1 < s + n - 1 &&
		   !memchr(lb, ' ', (size_t)(s + n - lb)) && !memchr(lb, '\t', (size_t)(s + n - lb))) {
		/* "function [module]"; "[clone .part.1]" has a space and is not a module */
		size_t fl = (size_t)(lb - 1 - s);

		while (fl && is_ws(s[fl - 1]))
			fl--;
		rc |= buf_append(b, lb + 1, (size_t)(s + n - 1 - lb - 1));
		rc |= buf_putc(b, '!');
		rc |= buf_append(b, s, fl);
	} else {
		return import_frame(fo->im, s, n);
	}
	if (rc)
		return import_fail(fo->im, "out of memory");
	return import_frame(fo->im, b->data, b->len);
}

static int folded_line(struct folded *fo, const char *s, size_t n)
{
	const struct import_opts *o = import_opts_of(fo->im);
	int64_t period = o->sample_period_ns > 0 ? o->sample_period_ns : fo->count_ns;
	int64_t count, tid = -1, st;
	const char *stack = s, *end, *seg;
	size_t k = n, sl, nseg = 1, skip, nframes = 0, comm_len = 0;
	struct wire_event e = { .kind = WIRE_RUN };

	while (k && !is_ws(s[k - 1]))
		k--;
	sl = k;
	while (sl && is_ws(s[sl - 1]))
		sl--;
	if (!k || !sl || !parse_count(s + k, n - k, &count))
		return import_fail(fo->im, "expected a collapsed stack "
				   "(FRAME;FRAME;...;FRAME COUNT, outermost frame first)");
	if (!count)
		return 0;
	if (count > WIRE_MAX_TIME_NS / period)
		return import_fail(fo->im, "count %lld is too large", (long long)count);
	end = stack + sl;
	for (const char *c = stack; c < end; c++)
		nseg += *c == ';';

	/* an optional thread prefix: "comm-pid/tid;" */
	seg = stack;
	{
		const char *semi = memchr(seg, ';', (size_t)(end - seg));
		size_t l = semi ? (size_t)(semi - seg) : (size_t)(end - seg);

		if (thread_prefix(seg, l, &tid, &comm_len)) {
			nseg--;
			seg = semi ? semi + 1 : end;
		}
	}
	if (tid < 0 && (tid = import_pseudo_tid(fo->im, "", 0)) < 0)
		return -1;
	if (import_thread(fo->im, tid, stack, comm_len) < 0)
		return -1;

	/* outermost first; past 512 frames the innermost 512 are kept */
	skip = nseg > WIRE_MAX_STACK_DEPTH ? nseg - WIRE_MAX_STACK_DEPTH : 0;
	for (size_t i = 0; i < nseg; i++) {
		const char *semi = memchr(seg, ';', (size_t)(end - seg));
		size_t l = semi ? (size_t)(semi - seg) : (size_t)(end - seg);

		if (i >= skip) {
			int64_t f = folded_frame(fo, seg, l);

			if (f < 0)
				return -1;
			fo->frames[nframes++] = (uint32_t)f;
		}
		seg = semi ? semi + 1 : end;
	}
	if (!nframes) {
		/* only a thread prefix: the thread itself is the one frame */
		struct buf *b = &fo->fb;
		int64_t f;

		buf_reset(b);
		buf_putc(b, '[');
		buf_append(b, stack, comm_len);
		if (buf_putc(b, ']') < 0)   /* sticky: any failure above fails it too */
			return import_fail(fo->im, "out of memory");
		if ((f = import_frame(fo->im, b->data, b->len)) < 0)
			return -1;
		fo->frames[nframes++] = (uint32_t)f;
	}
	if ((st = import_stack(fo->im, fo->frames, nframes)) < 0)
		return -1;
	e.tid = tid;
	e.dur_ns = count * period;
	e.stack = (uint32_t)st;
	if ((e.ts_ns = import_lay(fo->im, tid, e.dur_ns)) < 0)
		return -1;
	return import_event(fo->im, &e) < 0 ? -1 : 0;
}

/* s (n bytes) after "# KEY:" and blanks, or NULL. */
static const char *meta_value(const char *s, size_t n, const char *key, size_t *vn)
{
	size_t k = strlen(key);

	if (n < 2 + k + 1 || memcmp(s + 2, key, k) != 0 || s[2 + k] != ':')
		return NULL;
	s += 3 + k, n -= 3 + k;
	while (n && is_ws(*s))
		s++, n--;
	*vn = n;
	return s;
}

/*
 * A "#" line is a comment (inferno and FlameGraph skip them). austin heads its
 * output with "# austin: V", "# mode: M": its counts are microseconds of CPU or
 * wall time, or bytes in memory mode, which are no time at all.
 */
static int folded_meta(struct folded *fo, const char *s, size_t n)
{
	const char *v;
	size_t vn;

	if (meta_value(s, n, "austin", &vn))
		fo->austin = true, fo->count_ns = 1000;
	else if ((v = meta_value(s, n, "mode", &vn)) && fo->austin &&
		 !(vn == 3 && memcmp(v, "cpu", 3) == 0) && !(vn == 4 && memcmp(v, "wall", 4) == 0))
		return import_fail(fo->im, "# mode: %.*s: austin's counts in this mode are not time "
				   "(only cpu and wall are read)", (int)(vn > 32 ? 32 : vn), v);
	return 0;
}

static int folded_import(struct importer *im)
{
	struct folded fo = { .im = im, .fb = BUF_INIT(2 * IMPORT_MAX_LINE),
			     .count_ns = IMPORT_DEFAULT_PERIOD_NS };
	char *line;
	size_t len;
	int r, rc = -1;

	while ((r = import_next_line(im, &line, &len)) > 0) {
		char *s = line;

		while (len && is_ws(line[len - 1]))
			len--;
		while (len && is_ws(*s)) {
			s++;
			len--;
		}
		if (len && (*s == '#' ? folded_meta(&fo, s, len) : folded_line(&fo, s, len)) < 0)
			goto out;
	}
	rc = r < 0 ? -1 : 0;
out:
	buf_release(&fo.fb);
	return rc;
}

const struct import_format import_folded = { "folded", folded_import };
