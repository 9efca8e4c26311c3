/* perf: `perf script` text to run and wait events (see perf.h and docs/import.md). */
#include "formats/perf.h"
#include "formats/import.h"
#include "common/buf.h"
#include "common/intern.h"
#include "common/vec.h"

#include <stdlib.h>
#include <string.h>

#define COMM_MAX 255
#define HDR_TOKENS 32            /* a header's event name comes well before this */
#define MAX_EVENT_NAMES 1024
#define MIN_INFER_NS 10000       /* inferred sample costs are clamped to [10 us, 100 ms] */
#define MAX_INFER_NS 100000000

enum sample_kind { S_RUN, S_SWITCH, S_WAKEUP, S_IGNORE };
enum prev_kind { PREV_BLOCKED, PREV_PREEMPTED, PREV_EXITED };

/* A parsed sample header; the pointers are into the line. */
struct header {
	const char *comm;
	size_t comm_len;
	int64_t pid, tid;        /* -1 when absent */
	int64_t ts, period;      /* ns and the raw period; -1 when absent */
	const char *ev;          /* event name without its final ':' */
	size_t ev_len;
	const char *rest;        /* what follows the event: tracepoint arguments, an inline frame */
};

/* `ADDRESS SYMBOL (DSO)`, each part optional but the address. */
struct frame_line {
	const char *addr, *sym, *dso;
	size_t addr_len, sym_len, dso_len;
	bool hex, has_dso;
};

struct pthread {
	int64_t tid;
	int64_t wait_start, readier;
	int64_t cursor;          /* where the next sample without a timestamp goes */
	uint32_t wait_stack;
	bool waiting, preempted;
	bool seen;               /* named by any earlier line: its state is known */
};

/* A run event whose cost is the sampling interval, known only at the end. */
struct infer {
	size_t ev;
	int64_t tid, ts;
	uint32_t name;
};

struct perf {
	struct importer *im;
	const struct import_opts *o;
	struct pthread *th;
	size_t nth, cap_th;
	struct infer *inf;
	size_t ninf, cap_inf;
	struct intern *names;    /* event names: intervals are measured per thread and event */
	struct buf fb;           /* the frame string being built */
	int64_t first_ts, last_ts;

	/* the sample being read */
	bool in_sample, want_stack, ns_period;
	enum sample_kind kind;
	int64_t tid, ts, period;
	uint32_t name;
	char comm[COMM_MAX + 1];
	size_t comm_len;
	int64_t prev_pid, next_pid;  /* switch: out and in; wakeup: next_pid is the woken */
	enum prev_kind prev_kind;
	char other[COMM_MAX + 1];    /* next_comm, or the woken thread's comm */
	size_t other_len;
	int64_t inline_frame;        /* frame printed on the header line, -1 if none */
	uint32_t frames[WIRE_MAX_STACK_DEPTH];  /* innermost first, as perf prints them */
	size_t nframes;
};

static bool is_ws(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex_digit(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Hexadecimal with an optional 0x. */
static bool is_hex(const char *s, size_t n)
{
	if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		s += 2;
		n -= 2;
	}
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_hex_digit(s[i]))
			return false;
	return true;
}

/* Decimal digits only, at most 18 of them. */
static bool parse_uint(const char *s, size_t n, int64_t *out)
{
	int64_t v = 0;

	if (!n || n > 18)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

/* A thread id: -?digits in [-INT32_MAX, INT32_MAX]; negative ones mean "none" (-1). */
static bool parse_id(const char *s, size_t n, int64_t *out)
{
	bool neg = n && s[0] == '-';
	int64_t v;

	if (!parse_uint(s + neg, n - neg, &v) || v > INT32_MAX)
		return false;
	*out = neg ? -1 : v;
	return true;
}

/* PID or PID/TID. */
static bool parse_pidtid(const char *s, size_t n, int64_t *pid, int64_t *tid)
{
	const char *slash = memchr(s, '/', n);

	if (!slash) {
		*tid = -1;
		return parse_id(s, n, pid);
	}
	return parse_id(s, (size_t)(slash - s), pid) &&
	       parse_id(slash + 1, n - (size_t)(slash - s) - 1, tid);
}

/* [CPU] */
static bool is_cpu(const char *s, size_t n)
{
	int64_t v;

	return n >= 3 && s[0] == '[' && s[n - 1] == ']' && parse_uint(s + 1, n - 2, &v);
}

/* SECONDS.FRACTION: in nanoseconds (fraction digits past 9 are dropped). */
static bool parse_time(const char *s, size_t n, int64_t *ns)
{
	const char *dot;
	int64_t sec, frac = 0;
	size_t fl;

	if (n < 4 || s[n - 1] != ':' || !(dot = memchr(s, '.', n - 1)))
		return false;
	if (!parse_uint(s, (size_t)(dot - s), &sec) || sec > WIRE_MAX_TIME_NS / 1000000000 - 1)
		return false;
	fl = (size_t)(s + n - 1 - dot - 1);
	if (!fl)
		return false;
	for (size_t i = 0; i < fl; i++) {
		if (!is_digit(dot[1 + i]))
			return false;
		if (i < 9)
			frac = frac * 10 + (dot[1 + i] - '0');
	}
	for (size_t i = fl; i < 9; i++)
		frac *= 10;
	*ns = sec * 1000000000 + frac;
	return true;
}

/* An event name as perf prints it: "cycles:", "cpu-clock:uhH:", "sched:sched_switch:". */
static bool is_event(const char *s, size_t n)
{
	char c = s[0];

	return n >= 2 && s[n - 1] == ':' &&
	       ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_');
}

/*
 * COMM [PID[/TID]] [[CPU]] [SECONDS.FRACTION:] [PERIOD] EVENT: [REST], with a PID
 * or a time. The comm may hold spaces, so every split point is tried and the
 * first that parses wins.
 */
static bool parse_header(const char *line, struct header *h)
{
	const char *tok[HDR_TOKENS];
	size_t tlen[HDR_TOKENS], nt = 0;
	const char *s = line;

	while (nt < HDR_TOKENS) {
		while (is_ws(*s))
			s++;
		if (!*s)
			break;
		tok[nt] = s;
		while (*s && !is_ws(*s))
			s++;
		tlen[nt] = (size_t)(s - tok[nt]);
		nt++;
	}
	for (size_t i = 1; i < nt; i++) {
		size_t j = i;
		bool have_pid = false;

		h->pid = h->tid = h->ts = h->period = -1;
		if (parse_pidtid(tok[j], tlen[j], &h->pid, &h->tid)) {
			have_pid = true;
			j++;
		}
		if (j < nt && is_cpu(tok[j], tlen[j]))
			j++;
		if (j < nt && parse_time(tok[j], tlen[j], &h->ts))
			j++;
		if (j < nt && parse_uint(tok[j], tlen[j], &h->period))
			j++;
		if ((!have_pid && h->ts < 0) || j >= nt || !is_event(tok[j], tlen[j]))
			continue;
		h->comm = tok[0];
		h->comm_len = (size_t)(tok[i - 1] + tlen[i - 1] - tok[0]);
		h->ev = tok[j];
		h->ev_len = tlen[j] - 1;
		h->rest = tok[j] + tlen[j];
		while (is_ws(*h->rest))
			h->rest++;
		return true;
	}
	return false;
}

/* s[0..n) from its first non-blank character, trailing blanks removed. */
static bool parse_frame(const char *s, size_t n, bool need_hex, struct frame_line *f)
{
	const char *r;
	size_t rl;

	memset(f, 0, sizeof(*f));
	f->addr = s;
	while (f->addr_len < n && !is_ws(s[f->addr_len]))
		f->addr_len++;
	r = s + f->addr_len;
	rl = n - f->addr_len;
	while (rl && is_ws(*r)) {
		r++;
		rl--;
	}
	f->sym = r;
	f->sym_len = rl;
	if (rl && r[rl - 1] == ')') {
		int depth = 0;

		for (size_t k = rl; k-- > 0;) {
			if (r[k] == ')')
				depth++;
			else if (r[k] == '(' && --depth == 0) {
				if (k == 0 || is_ws(r[k - 1])) {
					f->has_dso = true;
					f->dso = r + k + 1;
					f->dso_len = rl - k - 2;
					f->sym_len = k;
					while (f->sym_len && is_ws(r[f->sym_len - 1]))
						f->sym_len--;
				}
				break;
			}
		}
	}
	f->hex = is_hex(f->addr, f->addr_len);
	/* a non-hex address passes only in a complete frame ("address symbol (module)") */
	return f->hex || (!need_hex && f->sym_len && f->has_dso);
}

/*
 * The frame perf prints on the header line when recording without call graphs
 * (or after tracepoint arguments): the last hex token followed by a symbol and
 * a (DSO) that reach the end of the line.
 */
static bool find_inline_frame(const char *rest, struct frame_line *out)
{
	size_t n = strlen(rest);
	bool found = false;

	if (!n || rest[n - 1] != ')')
		return false;
	for (size_t i = 0; i < n; i++) {
		struct frame_line f;
		size_t tl = 0;

		if (is_ws(rest[i]) || (i && !is_ws(rest[i - 1])))
			continue;
		while (i + tl < n && !is_ws(rest[i + tl]))
			tl++;
		if (is_hex(rest + i, tl) && parse_frame(rest + i, n - i, true, &f) && f.has_dso &&
		    f.sym_len) {
			*out = f;
			found = true;
		}
	}
	return found;
}

/* module!function, or module+0xADDRESS when the symbol is unknown. */
static int64_t build_frame(struct perf *p, const struct frame_line *f)
{
	const char *mod = "[unknown]", *sym = f->sym;
	size_t ml = 9, sl = f->sym_len;
	struct buf *b = &p->fb;
	int rc = 0;

	if (f->has_dso && f->dso_len) {
		const char *slash;

		mod = f->dso;
		ml = f->dso_len;
		if (ml > 10 && memcmp(mod + ml - 10, " (deleted)", 10) == 0)
			ml -= 10;
		slash = memrchr(mod, '/', ml);
		if (slash && slash + 1 < mod + ml) {
			ml -= (size_t)(slash + 1 - mod);
			mod = slash + 1;
		}
	}
	/* symbol+0xOFFSET: the offset is not part of the function */
	for (size_t k = sl; k-- > 0;) {
		if (sym[k] == '+') {
			if (sl - k > 3 && sym[k + 1] == '0' && sym[k + 2] == 'x' &&
			    is_hex(sym + k + 3, sl - k - 3))
				sl = k;
			break;
		}
		if (!is_hex_digit(sym[k]) && sym[k] != 'x')
			break;
	}
	buf_reset(b);
	rc |= buf_append(b, mod, ml);
	if (!sl || (sl == 9 && memcmp(sym, "[unknown]", 9) == 0)) {
		const char *a = f->addr;
		size_t al = f->addr_len;

		if (f->hex) {
			if (al > 2 && a[0] == '0' && (a[1] == 'x' || a[1] == 'X')) {
				a += 2;
				al -= 2;
			}
			while (al > 1 && a[0] == '0') {
				a++;
				al--;
			}
			rc |= buf_puts(b, "+0x");
			for (size_t i = 0; i < al; i++)
				rc |= buf_putc(b, (char)(a[i] >= 'A' && a[i] <= 'F' ? a[i] + 32 : a[i]));
		} else {
			rc |= buf_putc(b, '+');
			rc |= buf_append(b, a, al);
		}
	} else {
		rc |= buf_putc(b, '!');
		rc |= buf_append(b, sym, sl);
	}
	if (rc)
		return import_fail(p->im, "out of memory");
	return import_frame(p->im, b->data, b->len);
}

/* "[comm]": the frame of a sample or wait whose stack was not recorded. */
static int64_t comm_frame(struct perf *p, const char *comm, size_t n)
{
	struct buf *b = &p->fb;

	if (!n)
		return import_frame(p->im, "[unknown]", 9);
	buf_reset(b);
	buf_putc(b, '[');
	buf_append(b, comm, n);
	if (buf_putc(b, ']') < 0)   /* sticky: any failure above fails it too */
		return import_fail(p->im, "out of memory");
	return import_frame(p->im, b->data, b->len);
}

static int64_t comm_stack(struct perf *p, const char *comm, size_t n)
{
	int64_t f = comm_frame(p, comm, n);
	uint32_t id;

	if (f < 0)
		return -1;
	id = (uint32_t)f;
	return import_stack(p->im, &id, 1);
}

/* The current sample's stack, outermost first. */
static int64_t sample_stack(struct perf *p)
{
	uint32_t st[WIRE_MAX_STACK_DEPTH];

	if (!p->nframes) {
		if (p->inline_frame < 0)
			return comm_stack(p, p->comm, p->comm_len);
		st[0] = (uint32_t)p->inline_frame;
		return import_stack(p->im, st, 1);
	}
	for (size_t i = 0; i < p->nframes; i++)
		st[i] = p->frames[p->nframes - 1 - i];
	return import_stack(p->im, st, p->nframes);
}

/* Perf's state of thread tid (registering it); NULL with the error set. The
 * pointer is valid until the next call. */
static struct pthread *get_thread(struct perf *p, int64_t tid, const char *comm, size_t n)
{
	int64_t idx = import_thread(p->im, tid, comm, n);

	if (idx < 0)
		return NULL;
	if (vec_reserve(&p->th, &p->cap_th, (size_t)idx + 1, sizeof(*p->th)) < 0) {
		import_fail(p->im, "out of memory");
		return NULL;
	}
	while (p->nth <= (size_t)idx)
		p->th[p->nth++] = (struct pthread){ .tid = -1 };
	p->th[idx].tid = tid;
	return &p->th[idx];
}

static int close_wait(struct perf *p, struct pthread *t, int64_t end)
{
	struct wire_event e = {
		.kind = WIRE_WAIT,
		.tid = t->tid,
		.ts_ns = t->wait_start,
		.dur_ns = end > t->wait_start ? end - t->wait_start : 0,
		.stack = t->wait_stack,
		.readier_tid = t->readier,
	};

	t->waiting = false;
	return import_event(p->im, &e) < 0 ? -1 : 0;
}

static void open_wait(struct pthread *t, int64_t start, uint32_t stack, int64_t readier,
		      bool preempted)
{
	t->waiting = true;
	t->wait_start = start;
	t->wait_stack = stack;
	t->readier = readier;
	t->preempted = preempted;
}

static void copy_comm(char *dst, size_t *dlen, const char *s, size_t n)
{
	if (n > COMM_MAX)
		n = COMM_MAX;
	memcpy(dst, s, n);
	dst[n] = '\0';
	*dlen = n;
}

/* Start of the value of key (e.g. "pid=") where key begins a word of args. */
static const char *arg_value(const char *args, const char *key)
{
	size_t kl = strlen(key);

	for (const char *s = args; (s = strstr(s, key)); s++)
		if (s == args || is_ws(s[-1]))
			return s + kl;
	return NULL;
}

static bool arg_id(const char *v, int64_t *out)
{
	size_t n = 0;

	while (v[n] && !is_ws(v[n]))
		n++;
	return parse_id(v, n, out);
}

/* Value of `key` running up to the word `next_key` (comms may hold spaces). */
static void arg_text(const char *args, const char *key, const char *next_val, size_t next_klen,
		     char *dst, size_t *dlen)
{
	const char *v = arg_value(args, key);
	const char *end = next_val - next_klen;

	*dlen = 0;
	dst[0] = '\0';
	if (!v || v > end)
		return;
	while (end > v && is_ws(end[-1]))
		end--;
	copy_comm(dst, dlen, v, (size_t)(end - v));
}

/* Old layout "COMM:PID [PRIO]...": the pid, and the comm into dst. */
static bool old_comm_pid(const char *s, size_t n, int64_t *pid, char *dst, size_t *dlen,
			 const char **after)
{
	/* the first " [" that follows ":PID" (a comm may hold either) */
	for (size_t i = 0; i + 1 < n; i++) {
		const char *lb = s + i, *colon;

		if (s[i] != ' ' || s[i + 1] != '[')
			continue;
		if (!(colon = memrchr(s, ':', i)) || !parse_id(colon + 1, (size_t)(lb - colon - 1), pid))
			continue;
		copy_comm(dst, dlen, s, (size_t)(colon - s));
		*after = memchr(lb, ']', n - i);
		return true;
	}
	return false;
}

static enum prev_kind prev_kind_of(const char *state, size_t n)
{
	if (n && state[0] == 'R')
		return PREV_PREEMPTED;
	for (size_t i = 0; i < n; i++)
		if (state[i] == 'X' || state[i] == 'Z' || state[i] == 'x')
			return PREV_EXITED;
	return PREV_BLOCKED;
}

static int parse_switch(struct perf *p, const char *args)
{
	const char *pp = arg_value(args, "prev_pid="), *ps = arg_value(args, "prev_state="),
		   *np = arg_value(args, "next_pid="), *arrow, *after;
	char prev_comm[COMM_MAX + 1];
	size_t pl, sl = 0;

	if (pp && ps && np) {
		if (!arg_id(pp, &p->prev_pid) || !arg_id(np, &p->next_pid))
			goto bad;
		while (ps[sl] && !is_ws(ps[sl]))
			sl++;
		p->prev_kind = prev_kind_of(ps, sl);
		arg_text(args, "next_comm=", np, 9, p->other, &p->other_len);
		return 0;
	}
	/* perf before libtraceevent formats: "COMM:PID [PRIO] STATE ==> COMM:PID [PRIO]" */
	arrow = strstr(args, " ==> ");
	if (!arrow || !old_comm_pid(args, (size_t)(arrow - args), &p->prev_pid, prev_comm, &pl,
				   &after) || !after)
		goto bad;
	after++;
	while (is_ws(*after))
		after++;
	while (after + sl < arrow && !is_ws(after[sl]))
		sl++;
	p->prev_kind = prev_kind_of(after, sl);
	if (!old_comm_pid(arrow + 5, strlen(arrow + 5), &p->next_pid, p->other, &p->other_len,
			  &after))
		goto bad;
	return 0;
bad:
	return import_fail(p->im, "sched_switch: expected prev_pid=PID prev_state=S ==> next_comm=COMM "
			   "next_pid=PID");
}

/* Returns 1 for a wakeup, 0 for one that woke nothing (success=0), -1 on error. */
static int parse_wakeup(struct perf *p, const char *args)
{
	const char *v = arg_value(args, "success="), *pid = arg_value(args, "pid="), *after;

	if (v && v[0] == '0' && (!v[1] || is_ws(v[1])))
		return 0;
	if (pid) {
		if (!arg_id(pid, &p->next_pid))
			goto bad;
		arg_text(args, "comm=", pid, 4, p->other, &p->other_len);
		return 1;
	}
	if (strncmp(args, "task ", 5) == 0 &&
	    old_comm_pid(args + 5, strlen(args + 5), &p->next_pid, p->other, &p->other_len, &after))
		return 1;
bad:
	return import_fail(p->im, "sched_wakeup: expected comm=COMM pid=PID");
}

static enum sample_kind classify(const char *ev, size_t n, bool *ns_period)
{
	const char *colon = memchr(ev, ':', n);
	size_t base = colon ? (size_t)(colon - ev) : n;

	*ns_period = false;
	if (colon && base == 5 && memcmp(ev, "sched", 5) == 0) {
		const char *name = ev + 6, *c2 = memchr(name, ':', n - 6);
		size_t nl = c2 ? (size_t)(c2 - name) : n - 6;

		if (nl == 12 && memcmp(name, "sched_switch", 12) == 0)
			return S_SWITCH;
		if ((nl == 12 && memcmp(name, "sched_wakeup", 12) == 0) ||
		    (nl == 16 && memcmp(name, "sched_wakeup_new", 16) == 0) ||
		    (nl == 12 && memcmp(name, "sched_waking", 12) == 0))
			return S_WAKEUP;
		return S_IGNORE;
	}
	/* software clocks count their period in nanoseconds */
	*ns_period = (base == 9 && memcmp(ev, "cpu-clock", 9) == 0) ||
		     (base == 10 && memcmp(ev, "task-clock", 10) == 0);
	return S_RUN;
}

/* The event option matches the event as printed or without its modifiers. */
static bool event_wanted(const char *want, const char *ev, size_t n)
{
	const char *colon = memchr(ev, ':', n);
	size_t wl = strlen(want);

	return (wl == n && memcmp(want, ev, n) == 0) ||
	       (colon && wl == (size_t)(colon - ev) && memcmp(want, ev, wl) == 0);
}

static int start_sample(struct perf *p, const struct header *h)
{
	struct frame_line f;
	int64_t id;
	int w;

	p->in_sample = true;
	p->nframes = 0;
	p->inline_frame = -1;
	p->want_stack = false;
	p->prev_pid = p->next_pid = -1;
	p->other_len = 0;
	copy_comm(p->comm, &p->comm_len, h->comm, h->comm_len);
	p->ts = h->ts;
	p->period = h->period;
	if (h->ts >= 0) {
		if (p->first_ts < 0 || h->ts < p->first_ts)
			p->first_ts = h->ts;
		if (h->ts > p->last_ts)
			p->last_ts = h->ts;
	}
	p->tid = h->tid >= 0 ? h->tid : h->pid;
	if (p->tid < 0 && (p->tid = import_pseudo_tid(p->im, p->comm, p->comm_len)) < 0)
		return -1;
	id = intern_put(p->names, h->ev, h->ev_len, NULL);
	if (id < 0)
		return import_fail(p->im, "more than %d event names", MAX_EVENT_NAMES);
	p->name = (uint32_t)id;
	p->kind = classify(h->ev, h->ev_len, &p->ns_period);
	switch (p->kind) {
	case S_RUN:
		if (p->o->event && !event_wanted(p->o->event, h->ev, h->ev_len))
			p->kind = S_IGNORE;
		else
			p->want_stack = true;
		break;
	case S_SWITCH:
		if (h->ts < 0)
			return import_fail(p->im, "sched_switch without a timestamp (record with -F +time)");
		if (parse_switch(p, h->rest) < 0)
			return -1;
		p->want_stack = p->prev_pid > 0 && p->prev_kind != PREV_EXITED;
		break;
	case S_WAKEUP:
		if (h->ts < 0)
			return import_fail(p->im, "sched_wakeup without a timestamp (record with -F +time)");
		if ((w = parse_wakeup(p, h->rest)) < 0)
			return -1;
		if (!w)
			p->kind = S_IGNORE;
		break;
	case S_IGNORE:
		break;
	}
	if (p->want_stack && find_inline_frame(h->rest, &f)) {
		if ((id = build_frame(p, &f)) < 0)
			return -1;
		p->inline_frame = id;
	}
	return 0;
}

static int finish_run(struct perf *p)
{
	struct pthread *t = get_thread(p, p->tid, p->comm, p->comm_len);
	struct wire_event e = { .kind = WIRE_RUN, .tid = p->tid, .ts_ns = p->ts };
	int64_t dur = -1, st, idx;

	if (!t)
		return -1;
	if (p->ts >= 0 && t->waiting && close_wait(p, t, p->ts) < 0)
		return -1;
	t->seen = true;
	if (p->o->sample_period_ns > 0)
		dur = p->o->sample_period_ns;
	else if (p->ns_period && p->period > 0)
		dur = p->period < WIRE_MAX_TIME_NS ? p->period : WIRE_MAX_TIME_NS;
	else if (p->ts < 0)
		dur = IMPORT_DEFAULT_PERIOD_NS;
	if (p->ts < 0) {
		/* no timestamps: samples of a thread are laid end to end */
		if (dur > WIRE_MAX_TIME_NS - t->cursor)
			return import_fail(p->im, "samples without timestamps add up past %lld ns",
					   (long long)WIRE_MAX_TIME_NS);
		e.ts_ns = t->cursor;
		t->cursor += dur;
	}
	if ((st = sample_stack(p)) < 0)
		return -1;
	e.stack = (uint32_t)st;
	e.dur_ns = dur > 0 ? dur : 0;
	if ((idx = import_event(p->im, &e)) < 0)
		return -1;
	if (dur < 0) {
		if (vec_reserve(&p->inf, &p->cap_inf, p->ninf + 1, sizeof(*p->inf)) < 0)
			return import_fail(p->im, "out of memory");
		p->inf[p->ninf++] = (struct infer){ (size_t)idx, p->tid, p->ts, p->name };
	}
	return 0;
}

static int finish_switch(struct perf *p)
{
	struct pthread *t;
	int64_t st;

	if (p->prev_pid > 0) {
		/* the idle task (pid 0) never waits: it is what runs when nothing else can */
		if (!(t = get_thread(p, p->prev_pid, p->comm, p->comm_len)))
			return -1;
		if (t->waiting && close_wait(p, t, p->ts) < 0)
			return -1;
		t->seen = true;
		if (p->prev_kind != PREV_EXITED) {
			if ((st = sample_stack(p)) < 0)
				return -1;
			open_wait(t, p->ts, (uint32_t)st, 0, p->prev_kind == PREV_PREEMPTED);
		}
	}
	if (p->next_pid > 0 && p->next_pid != p->prev_pid) {
		if (!(t = get_thread(p, p->next_pid, p->other, p->other_len)))
			return -1;
		if (!t->waiting && !t->seen) {
			/* blocked since before the capture began; where is not known */
			if ((st = comm_stack(p, p->other, p->other_len)) < 0)
				return -1;
			open_wait(t, p->first_ts, (uint32_t)st, 0, false);
		}
		t->seen = true;
		if (t->waiting && close_wait(p, t, p->ts) < 0)
			return -1;
	}
	return 0;
}

static int finish_wakeup(struct perf *p)
{
	int64_t waker = p->tid, st;
	struct pthread *t;

	if (waker > 0) {
		/* the waker is on a CPU: whatever wait it had is over */
		if (!(t = get_thread(p, waker, p->comm, p->comm_len)))
			return -1;
		if (t->waiting && close_wait(p, t, p->ts) < 0)
			return -1;
		t->seen = true;
	}
	if (p->next_pid <= 0 || p->next_pid == waker)
		return 0;
	if (!(t = get_thread(p, p->next_pid, p->other, p->other_len)))
		return -1;
	if (t->waiting) {
		if (!t->preempted)
			t->readier = waker > 0 ? waker : 0;
	} else if (!t->seen) {
		/* blocked since before the capture began; where is not known */
		if ((st = comm_stack(p, p->other, p->other_len)) < 0)
			return -1;
		open_wait(t, p->first_ts, (uint32_t)st, waker > 0 ? waker : 0, false);
	}
	t->seen = true;
	return 0;
}

static int finish_sample(struct perf *p)
{
	p->in_sample = false;
	switch (p->kind) {
	case S_RUN:
		return finish_run(p);
	case S_SWITCH:
		return finish_switch(p);
	case S_WAKEUP:
		return finish_wakeup(p);
	case S_IGNORE:
		break;
	}
	return 0;
}

static int cmp_infer(const void *a, const void *b)
{
	const struct infer *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->name != y->name)
		return x->name < y->name ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->ev < y->ev ? -1 : x->ev > y->ev;
}

/*
 * The cost of a sample whose period is not in time units: the median interval
 * between consecutive samples of one event on one thread, clamped.
 */
static int infer_durations(struct perf *p)
{
	int64_t *gaps, dur = IMPORT_DEFAULT_PERIOD_NS;
	size_t ngaps = 0;

	if (!p->ninf)
		return 0;
	gaps = vec_alloc(p->ninf, sizeof(*gaps));
	if (!gaps)
		return import_fail(p->im, "out of memory");
	qsort(p->inf, p->ninf, sizeof(*p->inf), cmp_infer);
	for (size_t i = 1; i < p->ninf; i++) {
		const struct infer *a = &p->inf[i - 1], *b = &p->inf[i];

		if (a->tid == b->tid && a->name == b->name && b->ts > a->ts)
			gaps[ngaps++] = b->ts - a->ts;
	}
	if (ngaps) {
		vec_sort_i64(gaps, ngaps);
		dur = gaps[ngaps / 2];
		dur = dur < MIN_INFER_NS ? MIN_INFER_NS : dur > MAX_INFER_NS ? MAX_INFER_NS : dur;
	}
	free(gaps);
	for (size_t i = 0; i < p->ninf; i++)
		import_event_at(p->im, p->inf[i].ev)->dur_ns = dur;
	return 0;
}

static int perf_import(struct importer *im)
{
	struct perf p = {
		.im = im,
		.o = import_opts_of(im),
		.fb = BUF_INIT(2 * IMPORT_MAX_LINE),
		.first_ts = -1,
		.last_ts = -1,
	};
	struct header h;
	struct frame_line f;
	char *line;
	size_t len;
	int r, rc = -1;

	p.names = intern_open(MAX_EVENT_NAMES);
	if (!p.names) {
		import_fail(im, "out of memory");
		goto out;
	}
	while ((r = import_next_line(im, &line, &len)) > 0) {
		char *s = line;

		while (len && is_ws(line[len - 1]))
			line[--len] = '\0';
		while (is_ws(*s))
			s++;
		if (!*s) {
			if (p.in_sample && finish_sample(&p) < 0)
				goto out;
			continue;
		}
		if (line[0] == '#')
			continue;
		if (parse_header(s, &h)) {
			if ((p.in_sample && finish_sample(&p) < 0) || start_sample(&p, &h) < 0)
				goto out;
			continue;
		}
		if (!p.in_sample) {
			import_fail(im, "expected a sample header "
				    "(COMM PID/TID [CPU] SECONDS.MICROS: [PERIOD] EVENT:)");
			goto out;
		}
		if (!parse_frame(s, (size_t)(line + len - s), false, &f)) {
			import_fail(im, "expected a stack frame (ADDRESS SYMBOL (DSO)), "
				    "a blank line or a sample header");
			goto out;
		}
		/* perf prints the innermost frame first: keep the innermost 512 */
		if (p.want_stack && p.nframes < WIRE_MAX_STACK_DEPTH) {
			int64_t id = build_frame(&p, &f);

			if (id < 0)
				goto out;
			p.frames[p.nframes++] = (uint32_t)id;
		}
	}
	if (r < 0 || (p.in_sample && finish_sample(&p) < 0))
		goto out;
	/* waits still open at the end last until the end of the capture */
	for (size_t i = 0; i < p.nth; i++)
		if (p.th[i].waiting && close_wait(&p, &p.th[i], p.last_ts) < 0)
			goto out;
	rc = infer_durations(&p);
out:
	free(p.th);
	free(p.inf);
	intern_free(p.names);
	buf_release(&p.fb);
	return rc;
}

const struct import_format import_perf = { "perf", perf_import };
