/* bcc: offcputime, offwaketime, wakeuptime and profile output to events (see bcc.h). */
#include "formats/bcc.h"
#include "formats/import.h"
#include "common/buf.h"
#include "common/vec.h"

#include <stdlib.h>
#include <string.h>

#define BCC_DEFAULT_HZ 49          /* profile's default frequency */
#define MAX_BLOCK_LINES 4096       /* a block longer than this is not bcc output */

enum tool { T_OFFCPU, T_OFFWAKE, T_WAKEUP, T_PROFILE };

struct span {
	const char *s;
	size_t n;
};

struct bcc {
	struct importer *im;
	enum tool tool;
	int64_t period_ns;           /* profile: one sample */
	struct span *lines;          /* the block being read, copied into blk */
	size_t nlines, cap_lines;
	struct buf blk;              /* the block's text */
	struct buf fb;               /* a frame being built */
	uint32_t fr[2][2 * WIRE_MAX_STACK_DEPTH + 8];   /* cut to the innermost 512 at the end */
	size_t nfr[2];
	size_t skipped;              /* lines that are not output */
};

static bool is_ws(char c)
{
	return c == ' ' || c == '\t';
}

static struct span trim(const char *s, size_t n)
{
	while (n && is_ws(*s)) {
		s++;
		n--;
	}
	while (n && is_ws(s[n - 1]))
		n--;
	return (struct span){ s, n };
}

static bool all_digits(const char *s, size_t n)
{
	if (!n || n > 18)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static int64_t to_i64(const char *s, size_t n)
{
	int64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

static bool is_hex_token(const char *s, size_t n)
{
	if (n < 6 || n > 16)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/*
 * A frame as bcc prints it: "[ADDRESS ]SYMBOL[+0xOFF]" (-a and -s), "SYMBOL_[k]"
 * (folded -a); kernel frames become "[kernel.kallsyms]!SYMBOL".
 */
static int64_t bcc_frame(struct bcc *b, const char *s, size_t n, bool kernel)
{
	const char *sp = memchr(s, ' ', n), *plus;

	if (sp && is_hex_token(s, (size_t)(sp - s)) && (size_t)(sp - s) + 1 < n) {
		n -= (size_t)(sp + 1 - s);
		s = sp + 1;
	}
	if (n > 4 && memcmp(s + n - 4, "_[k]", 4) == 0) {
		n -= 4;
		kernel = true;
	}
	plus = n > 3 ? memmem(s, n, "+0x", 3) : NULL;
	if (plus && plus > s) {
		const char *h = plus + 3;
		size_t hl = n - (size_t)(h - s);

		if (hl && strspn(h, "0123456789abcdef") >= hl)
			n = (size_t)(plus - s);
	}
	if (!kernel || (n == 9 && memcmp(s, "[unknown]", 9) == 0))
		return import_frame(b->im, s, n);
	buf_reset(&b->fb);
	buf_puts(&b->fb, "[kernel.kallsyms]!");
	buf_append(&b->fb, s, n);
	if (buf_error(&b->fb))
		return import_fail(b->im, "out of memory");
	return import_frame(b->im, b->fb.data, b->fb.len);
}

/* Appends a frame to stack k; frames past the array's room are dropped (a block printed
 * innermost first keeps its innermost ones). */
static int add_frame(struct bcc *b, int k, const char *s, size_t n, bool kernel)
{
	int64_t f;

	if (b->nfr[k] == sizeof(b->fr[k]) / sizeof(b->fr[k][0]))
		return 0;
	if ((f = bcc_frame(b, s, n, kernel)) < 0)
		return -1;
	b->fr[k][b->nfr[k]++] = (uint32_t)f;
	return 0;
}

static void reverse(uint32_t *f, size_t n)
{
	for (size_t i = 0; i < n / 2; i++) {
		uint32_t t = f[i];

		f[i] = f[n - 1 - i];
		f[n - 1 - i] = t;
	}
}

/* The thread of "comm" or "comm (pid)". */
static int64_t bcc_thread(struct bcc *b, struct span c)
{
	if (c.n > 3 && c.s[c.n - 1] == ')') {
		const char *lp = memrchr(c.s, '(', c.n);

		if (lp && lp > c.s && all_digits(lp + 1, (size_t)(c.s + c.n - 1 - lp - 1))) {
			int64_t pid = to_i64(lp + 1, (size_t)(c.s + c.n - 1 - lp - 1));
			struct span comm = trim(c.s, (size_t)(lp - c.s));

			if (pid <= INT32_MAX) {
				if (import_thread(b->im, pid, comm.s, comm.n < 255 ? comm.n : 255) < 0)
					return -1;
				return pid;
			}
		}
	}
	return import_pseudo_tid(b->im, c.s, c.n < 255 ? c.n : 255);
}

/* A stack of at least one frame ("[comm]" when bcc printed none). */
static int64_t stack_of(struct bcc *b, int k, struct span comm)
{
	if (!b->nfr[k]) {
		int64_t f;

		buf_reset(&b->fb);
		buf_putc(&b->fb, '[');
		buf_append(&b->fb, comm.s, comm.n < 255 ? comm.n : 255);
		buf_putc(&b->fb, ']');
		if (buf_error(&b->fb))
			return import_fail(b->im, "out of memory");
		if ((f = import_frame(b->im, b->fb.data, b->fb.len)) < 0)
			return -1;
		b->fr[k][b->nfr[k]++] = (uint32_t)f;
	}
	/* outermost first by now: the innermost frames are the last ones */
	if (b->nfr[k] > WIRE_MAX_STACK_DEPTH)
		return import_stack(b->im, b->fr[k] + b->nfr[k] - WIRE_MAX_STACK_DEPTH, WIRE_MAX_STACK_DEPTH);
	return import_stack(b->im, b->fr[k], b->nfr[k]);
}

/*
 * One aggregated record: stack 0 (outermost first) of thread `who` for `value` (us of
 * waiting, or samples); for offwaketime and wakeuptime stack 1 (outermost first) is the
 * waker's, which becomes a run event of duration 0 at the wait's end.
 */
static int emit(struct bcc *b, struct span who, struct span waker, int64_t value)
{
	struct wire_event e = { 0 };
	int64_t tid, st, dur;

	if (!value)
		return 0;
	dur = b->tool == T_PROFILE ? b->period_ns : 1000;
	if (value > WIRE_MAX_TIME_NS / dur)
		return import_fail(b->im, "value %lld is too large", (long long)value);
	dur *= value;
	if ((tid = bcc_thread(b, who)) < 0 || (st = stack_of(b, 0, who)) < 0)
		return -1;
	e.tid = tid;
	e.dur_ns = dur;
	e.stack = (uint32_t)st;
	e.kind = b->tool == T_PROFILE ? WIRE_RUN : WIRE_WAIT;
	if ((e.ts_ns = import_lay(b->im, tid, dur)) < 0)
		return -1;
	if ((b->tool == T_OFFWAKE || b->tool == T_WAKEUP) && (waker.n || b->nfr[1])) {
		struct wire_event w = { .kind = WIRE_RUN, .ts_ns = e.ts_ns + dur };
		int64_t wt;

		if ((wt = bcc_thread(b, waker)) < 0 || (st = stack_of(b, 1, waker)) < 0)
			return -1;
		e.readier_tid = wt == tid ? 0 : wt;
		w.tid = wt;
		w.stack = (uint32_t)st;
		if (import_event(b->im, &w) < 0)
			return -1;
	}
	return import_event(b->im, &e) < 0 ? -1 : 0;
}

/* "-   comm (pid)" (a task line) or "-   -" / "--" (a separator). */
static bool dash_line(struct span l, bool *separator, struct span *comm)
{
	struct span r;

	if (l.n == 2 && l.s[0] == '-' && l.s[1] == '-') {
		*separator = true;
		return true;
	}
	if (l.n < 2 || l.s[0] != '-' || !is_ws(l.s[1]))
		return false;
	r = trim(l.s + 1, l.n - 1);
	*separator = r.n == 1 && r.s[0] == '-';
	*comm = r;
	return true;
}

/* "waker: comm" or "target: comm". */
static bool tagged(struct span l, const char *tag, struct span *comm)
{
	size_t n = strlen(tag);

	if (l.n < n || memcmp(l.s, tag, n) != 0)
		return false;
	*comm = trim(l.s + n, l.n - n);
	return true;
}

/* A multi-line block, its lines trimmed, and the value that ended it. */
static int block(struct bcc *b, int64_t value)
{
	struct span comm = { "", 0 }, waker = { "", 0 }, *L = b->lines, c;
	size_t n = b->nlines, i = 0;
	bool sep, kernel = false, has_sep = false;

	b->nfr[0] = b->nfr[1] = 0;
	if (!n)
		return 0;
	/* the kernel part is above a "--" delimiter when there is one */
	for (size_t k = 0; k < n; k++)
		if (L[k].n == 2 && L[k].s[0] == '-' && L[k].s[1] == '-')
			has_sep = true;
	switch (b->tool) {
	case T_OFFCPU:
	case T_PROFILE:
		kernel = has_sep;
		if (dash_line(L[n - 1], &sep, &c) && !sep) {
			comm = c;
			n--;
		} else if (b->tool == T_OFFCPU) {
			comm = L[--n];   /* older offcputime: the task name is the last line */
		}
		for (; i < n; i++) {
			if (dash_line(L[i], &sep, &c) && sep) {
				kernel = false;
				continue;
			}
			if (add_frame(b, 0, L[i].s, L[i].n, kernel) < 0)
				return -1;
		}
		reverse(b->fr[0], b->nfr[0]);   /* printed innermost first */
		return emit(b, comm, waker, value);
	case T_OFFWAKE:
		/* waker: W / its stack outermost first / "-  -" / target stack innermost first /
		 * target: T */
		if (!tagged(L[0], "waker:", &waker) || !tagged(L[n - 1], "target:", &comm))
			return import_fail(b->im, "offwaketime: expected a block from \"waker:\" "
					   "to \"target:\"");
		for (i = 1; i < n - 1 && !(dash_line(L[i], &sep, &c) && sep); i++)
			if (add_frame(b, 1, L[i].s, L[i].n, false) < 0)
				return -1;
		for (i++; i < n - 1; i++)
			if (!(dash_line(L[i], &sep, &c) && sep) &&
			    add_frame(b, 0, L[i].s, L[i].n, false) < 0)
				return -1;
		reverse(b->fr[0], b->nfr[0]);
		return emit(b, comm, waker, value);
	case T_WAKEUP:
		/* target: T / the waker's stack innermost first / waker: W */
		if (!tagged(L[0], "target:", &comm) || !tagged(L[n - 1], "waker:", &waker))
			return import_fail(b->im, "wakeuptime: expected a block from \"target:\" "
					   "to \"waker:\"");
		for (i = 1; i < n - 1; i++)
			if (!(dash_line(L[i], &sep, &c) && sep) &&
			    add_frame(b, 1, L[i].s, L[i].n, false) < 0)
				return -1;
		reverse(b->fr[1], b->nfr[1]);
		return emit(b, comm, waker, value);
	}
	return 0;
}

/* Folded forms (-f): "comm;frames...;leaf N" (offcputime, profile: "-" between the user
 * and the kernel part), "target;frames;-;waker frames innermost first;waker N"
 * (offwaketime) and "waker;frames;target N" (wakeuptime). */
static int folded(struct bcc *b, struct span l)
{
	const char *sp = l.s + l.n;
	struct span segs[2 * WIRE_MAX_STACK_DEPTH + 8], first, last = { "", 0 };
	size_t nseg = 0, ndash = 0, sepi = 0;
	int64_t value;

	while (sp > l.s && !is_ws(sp[-1]))
		sp--;
	size_t total = 1, skip = 0, idx = 0, cap = sizeof(segs) / sizeof(segs[0]);
	bool skipped_dash = false;

	value = to_i64(sp, (size_t)(l.s + l.n - sp));
	l = trim(l.s, (size_t)(sp - l.s));
	for (size_t i = 0; i < l.n; i++)
		total += l.s[i] == ';';
	if (total > cap) {
		/* offcputime, profile: the comm and the innermost frames; the others need both ends */
		if (b->tool != T_OFFCPU && b->tool != T_PROFILE)
			return import_fail(b->im, "a folded line of more than %zu frames", cap);
		skip = total - cap;
	}
	for (const char *p = l.s, *end = l.s + l.n; p <= end; idx++) {
		const char *semi = memchr(p, ';', (size_t)(end - p));
		const char *e = semi ? semi : end;

		if (idx == 0 || idx > skip)
			segs[nseg++] = (struct span){ p, (size_t)(e - p) };
		else if (e - p == 1 && *p == '-')
			skipped_dash = true;
		p = e + 1;
	}
	for (size_t i = 1; i < nseg; i++)
		if (segs[i].n == 1 && segs[i].s[0] == '-')
			ndash++;
	first = segs[0];
	b->nfr[0] = b->nfr[1] = 0;
	if (b->tool == T_OFFCPU || b->tool == T_PROFILE) {
		bool kernel = skipped_dash;

		for (size_t i = 1; i < nseg; i++) {
			if (segs[i].n == 1 && segs[i].s[0] == '-') {
				kernel = true;
				continue;
			}
			if (add_frame(b, 0, segs[i].s, segs[i].n, kernel) < 0)
				return -1;
		}
		return emit(b, first, last, value);
	}
	if (b->tool == T_WAKEUP) {
		last = segs[nseg - 1];
		for (size_t i = 1; i + 1 < nseg; i++)
			if (!(segs[i].n == 1 && segs[i].s[0] == '-') &&
			    add_frame(b, 1, segs[i].s, segs[i].n, false) < 0)
				return -1;
		return emit(b, last, first, value);
	}
	/* offwaketime: the middle "-" separates the target's part from the waker's */
	if (!ndash || nseg < 3)
		return import_fail(b->im, "offwaketime: expected TARGET;...;-;...;WAKER COUNT");
	for (size_t i = 1, seen = 0; i < nseg; i++)
		if (segs[i].n == 1 && segs[i].s[0] == '-' && seen++ == (ndash - 1) / 2)
			sepi = i;
	last = segs[nseg - 1];
	for (size_t i = 1; i < sepi; i++)
		if (!(segs[i].n == 1 && segs[i].s[0] == '-') &&
		    add_frame(b, 0, segs[i].s, segs[i].n, false) < 0)
			return -1;
	for (size_t i = sepi + 1; i + 1 < nseg; i++)
		if (!(segs[i].n == 1 && segs[i].s[0] == '-') &&
		    add_frame(b, 1, segs[i].s, segs[i].n, false) < 0)
			return -1;
	reverse(b->fr[1], b->nfr[1]);   /* printed innermost first */
	return emit(b, first, last, value);
}

/* Whether an unindented line is a folded record: "a;b;c N". */
static bool folded_line(struct span l)
{
	const char *sp = l.s + l.n;

	while (sp > l.s && !is_ws(sp[-1]))
		sp--;
	return sp > l.s && all_digits(sp, (size_t)(l.s + l.n - sp)) &&
	       memchr(l.s, ';', (size_t)(sp - l.s));
}

/* "Sampling at 49 Hertz of all threads ...": profile's period. */
static void banner(struct bcc *b, struct span l)
{
	static const char pfx[] = "Sampling at ";
	const char *p = l.s + sizeof(pfx) - 1, *e = p;

	if (l.n <= sizeof(pfx) || memcmp(l.s, pfx, sizeof(pfx) - 1) != 0)
		return;
	while (e < l.s + l.n && *e >= '0' && *e <= '9')
		e++;
	if (e > p && all_digits(p, (size_t)(e - p)) && !import_opts_of(b->im)->sample_period_ns) {
		int64_t hz = to_i64(p, (size_t)(e - p));

		if (hz > 0 && hz <= 1000000000)
			b->period_ns = 1000000000 / hz;
	}
}

static int push_line(struct bcc *b, struct span l)
{
	if (b->nlines == MAX_BLOCK_LINES)
		return import_fail(b->im, "a block of more than %d lines", MAX_BLOCK_LINES);
	if (vec_reserve(&b->lines, &b->cap_lines, b->nlines + 1, sizeof(*b->lines)) < 0)
		return import_fail(b->im, "out of memory");
	/* the line's text is copied: the importer's line buffer moves on */
	b->lines[b->nlines].s = (const char *)(uintptr_t)b->blk.len;
	b->lines[b->nlines].n = l.n;
	b->nlines++;
	if (buf_append(&b->blk, l.s, l.n) < 0)
		return import_fail(b->im, "out of memory");
	return 0;
}

static int end_block(struct bcc *b, int64_t value)
{
	int rc;

	for (size_t i = 0; i < b->nlines; i++)
		b->lines[i].s = b->blk.data + (uintptr_t)b->lines[i].s;
	rc = block(b, value);
	b->nlines = 0;
	buf_reset(&b->blk);
	return rc;
}

static int bcc_import(struct importer *im, enum tool tool)
{
	const struct import_opts *o = import_opts_of(im);
	struct bcc b = { .im = im, .tool = tool, .blk = BUF_INIT(64 << 20),
			 .fb = BUF_INIT(2 * WIRE_MAX_FRAME) };
	char *line;
	size_t len, records = 0;
	int r, rc = -1;

	b.period_ns = o->sample_period_ns > 0 ? o->sample_period_ns : 1000000000 / BCC_DEFAULT_HZ;
	while ((r = import_next_line(im, &line, &len)) > 0) {
		struct span l = trim(line, len);

		if (!l.n) {
			/* a block cut short ("[...]" in examples) is dropped */
			b.nlines = 0;
			buf_reset(&b.blk);
			continue;
		}
		if (!is_ws(line[0])) {
			b.nlines = 0;
			buf_reset(&b.blk);
			if (l.s[0] != '#' && folded_line(l)) {
				if (folded(&b, l) < 0)
					goto out;
				records++;
			} else {
				banner(&b, l);
				b.skipped++;
			}
			continue;
		}
		if (all_digits(l.s, l.n)) {
			if (b.nlines) {
				if (end_block(&b, to_i64(l.s, l.n)) < 0)
					goto out;
				records++;
			}
			continue;
		}
		if (push_line(&b, l) < 0)
			goto out;
	}
	if (r < 0)
		goto out;
	if (!records)
		import_fail(im, "no %s output found (stack blocks ending in a count, or folded "
			    "lines)", tool == T_OFFCPU ? "offcputime" : tool == T_OFFWAKE ? "offwaketime"
			    : tool == T_WAKEUP ? "wakeuptime" : "profile");
	else
		rc = 0;
out:
	free(b.lines);
	buf_release(&b.blk);
	buf_release(&b.fb);
	return rc;
}

static int offcpu(struct importer *im)
{
	return bcc_import(im, T_OFFCPU);
}

static int offwake(struct importer *im)
{
	return bcc_import(im, T_OFFWAKE);
}

static int wakeup(struct importer *im)
{
	return bcc_import(im, T_WAKEUP);
}

static int profile(struct importer *im)
{
	return bcc_import(im, T_PROFILE);
}

const struct import_format import_bcc_offcpu = { "bcc-offcpu", offcpu };
const struct import_format import_bcc_offwaketime = { "bcc-offwaketime", offwake };
const struct import_format import_bcc_wakeuptime = { "bcc-wakeuptime", wakeup };
const struct import_format import_bcc_profile = { "bcc-profile", profile };
