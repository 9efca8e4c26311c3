/* import: format dispatch, input lines, interning and stream assembly (see import.h). */
#include "agent/import.h"
#include "common/arena.h"
#include "common/intern.h"
#include "common/util.h"
#include "common/vec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define READ_CHUNK 65536
/* Pseudo tids live in [2^30, 2^31): above any kernel pid_max (2^22). */
#define PSEUDO_TID_BASE ((int64_t)1 << 30)

struct thread {
	int64_t tid;
	int64_t comm;     /* id in im->comms, -1 when unnamed */
	int64_t cost;     /* total dur of its events, filled when the stream is assembled */
	bool pseudo;      /* tid made up by import_pseudo_tid() for comm */
	bool has_events;
};

struct importer {
	const struct import_format *fmt;
	struct import_opts opts;     /* strings point into meta */
	struct arena *meta;          /* copies of the options, for the importer's life */
	struct arena *out;           /* the assembled stream's arrays, per run */
	struct wire_limits lim;
	char err[1024];

	/* input */
	const char *path;
	gzFile gz;
	char *rbuf;                  /* READ_CHUNK + IMPORT_MAX_LINE + 1 bytes */
	size_t rstart, rend;
	bool eof;
	int64_t lineno;

	struct intern *frames, *stacks, *threads, *comms;
	struct thread *th;
	size_t nth, cap_th;
	struct wire_event *ev;
	size_t nev, cap_ev;
	char fbuf[WIRE_MAX_FRAME + 1];
};

void import_opts_init(struct import_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->symptom_tid = -1;
	o->window_start_ns = -1;
	o->window_end_ns = -1;
}

static const char *dup_opt(struct arena *a, const char *s, bool *oom)
{
	const char *d;

	if (!s)
		return NULL;
	d = arena_strndup(a, s, strlen(s));
	if (!d)
		*oom = true;
	return d;
}

struct importer *importer_open(const struct import_format *fmt, const struct import_opts *opts)
{
	struct importer *im = calloc(1, sizeof(*im));
	struct wire_label *labels = NULL;
	bool oom = false;

	if (!im)
		return NULL;
	im->fmt = fmt;
	wire_limits_default(&im->lim);
	im->meta = arena_open(0);
	im->out = arena_open(0);
	im->rbuf = malloc(READ_CHUNK + IMPORT_MAX_LINE + 1);
	im->frames = intern_open(im->lim.max_frames);
	im->stacks = intern_open(im->lim.max_stacks);
	im->threads = intern_open(0);
	im->comms = intern_open(0);
	if (!im->meta || !im->out || !im->rbuf || !im->frames || !im->stacks || !im->threads ||
	    !im->comms)
		goto fail_alloc;
	im->opts = *opts;
	im->opts.host = dup_opt(im->meta, opts->host, &oom);
	im->opts.app = dup_opt(im->meta, opts->app, &oom);
	im->opts.version = dup_opt(im->meta, opts->version, &oom);
	im->opts.build_id = dup_opt(im->meta, opts->build_id, &oom);
	im->opts.symptom_comm = dup_opt(im->meta, opts->symptom_comm, &oom);
	im->opts.event = dup_opt(im->meta, opts->event, &oom);
	if (opts->nlabels) {
		labels = arena_calloc(im->meta, opts->nlabels, sizeof(*labels));
		if (!labels)
			goto fail_alloc;
		for (size_t i = 0; i < opts->nlabels; i++) {
			labels[i].key = dup_opt(im->meta, opts->labels[i].key, &oom);
			labels[i].value = dup_opt(im->meta, opts->labels[i].value, &oom);
		}
	}
	im->opts.labels = labels;
	if (oom)
		goto fail_alloc;
	return im;

fail_alloc:
	importer_free(im);
	return NULL;
}

static void reset_run(struct importer *im)
{
	if (im->gz) {
		gzclose(im->gz);
		im->gz = NULL;
	}
	im->path = NULL;
	im->rstart = im->rend = 0;
	im->eof = false;
	im->lineno = 0;
	intern_clear(im->frames);
	intern_clear(im->stacks);
	intern_clear(im->threads);
	intern_clear(im->comms);
	im->nth = 0;
	im->nev = 0;
	arena_reset(im->out);
}

void importer_free(struct importer *im)
{
	if (!im)
		return;
	reset_run(im);
	intern_free(im->frames);
	intern_free(im->stacks);
	intern_free(im->threads);
	intern_free(im->comms);
	free(im->th);
	free(im->ev);
	free(im->rbuf);
	arena_free(im->out);
	arena_free(im->meta);
	free(im);
}

const char *importer_error(const struct importer *im)
{
	return im->err;
}

const struct import_opts *import_opts_of(const struct importer *im)
{
	return &im->opts;
}

__attribute__((format(printf, 2, 3)))
static int fail_path(struct importer *im, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(im->err, sizeof(im->err), "%s: ", im->path ? im->path : "(input)");
	if (n < 0 || (size_t)n >= sizeof(im->err))
		return -1;
	va_start(ap, fmt);
	vsnprintf(im->err + n, sizeof(im->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

int import_fail(struct importer *im, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(im->err, sizeof(im->err), "%s:%lld: ", im->path ? im->path : "(input)",
		     (long long)(im->lineno ? im->lineno : 1));
	if (n < 0 || (size_t)n >= sizeof(im->err))
		return -1;
	va_start(ap, fmt);
	vsnprintf(im->err + n, sizeof(im->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* Refill the read buffer after moving the unread part to its start. */
static int refill(struct importer *im)
{
	size_t keep = im->rend - im->rstart;
	int n;

	if (im->rstart) {
		memmove(im->rbuf, im->rbuf + im->rstart, keep);
		im->rstart = 0;
		im->rend = keep;
	}
	errno = 0;
	n = gzread(im->gz, im->rbuf + im->rend, (unsigned)(READ_CHUNK + IMPORT_MAX_LINE - im->rend));
	if (n <= 0) {
		int zerr = Z_OK;
		const char *msg = gzerror(im->gz, &zerr);
		size_t pl = strlen(im->path);

		/* zlib prefixes its messages with the path, which ours already has */
		if (strncmp(msg, im->path, pl) == 0 && strncmp(msg + pl, ": ", 2) == 0)
			msg += pl + 2;
		if (zerr == Z_ERRNO) {
			im->lineno++;
			return import_fail(im, "read error: %s", strerror(errno));
		}
		/* a gzip stream cut short shows only here, as Z_BUF_ERROR after the data */
		if (n < 0 || zerr == Z_BUF_ERROR) {
			im->lineno++;
			return import_fail(im, "read error: %s%s", msg,
					   zerr == Z_BUF_ERROR ? " (truncated gzip file?)" : "");
		}
		im->eof = true;
		return 0;
	}
	im->rend += (size_t)n;
	return 0;
}

int import_next_line(struct importer *im, char **line, size_t *len)
{
	char *s, *nl;
	size_t n;

	for (;;) {
		s = im->rbuf + im->rstart;
		n = im->rend - im->rstart;
		nl = memchr(s, '\n', n);
		if (nl || (im->eof && n)) {
			size_t l = nl ? (size_t)(nl - s) : n;

			im->lineno++;
			im->rstart += nl ? l + 1 : l;
			if (l > IMPORT_MAX_LINE)
				return import_fail(im, "line longer than %d bytes", IMPORT_MAX_LINE);
			if (l && s[l - 1] == '\r')
				l--;
			s[l] = '\0';
			if (memchr(s, '\0', l))
				return import_fail(im, "NUL byte: not a text file");
			/* a byte-order mark, as Windows tools write */
			if (im->lineno == 1 && l >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) {
				s += 3;
				l -= 3;
			}
			*line = s;
			*len = l;
			return 1;
		}
		if (im->eof)
			return 0;
		if (n > IMPORT_MAX_LINE) {
			im->lineno++;
			return import_fail(im, "line longer than %d bytes", IMPORT_MAX_LINE);
		}
		if (refill(im) < 0)
			return -1;
	}
}

/* Length of the well-formed UTF-8 character at s[0..n), or 0 if it is not one. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
	size_t k;

	if (s[0] < 0x80)
		return s[0] ? 1 : 0;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		k = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		k = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		k = 4;
	else
		return 0;
	if (k > n || !util_utf8_valid((const char *)s, k))
		return 0;
	return k;
}

int64_t import_frame(struct importer *im, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, o = 0;
	int64_t id;

	while (i < n) {
		size_t k = utf8_char(p + i, n - i);
		const char *src = k ? s + i : "\xef\xbf\xbd";
		size_t w = k ? k : 3;

		if (o + w > WIRE_MAX_FRAME)
			break;
		memcpy(im->fbuf + o, src, w);
		o += w;
		i += k ? k : 1;
	}
	if (!o) {
		memcpy(im->fbuf, "[unknown]", 9);
		o = 9;
	}
	id = intern_put(im->frames, im->fbuf, o, NULL);
	if (id < 0) {
		if (intern_count(im->frames) >= im->lim.max_frames)
			return import_fail(im, "more than %zu distinct frames", im->lim.max_frames);
		return import_fail(im, "out of memory");
	}
	return id;
}

int64_t import_stack(struct importer *im, const uint32_t *frames, size_t n)
{
	int64_t id;

	if (n == 0 || n > WIRE_MAX_STACK_DEPTH)
		return import_fail(im, "internal error: stack of %zu frames", n);
	id = intern_put(im->stacks, frames, n * sizeof(*frames), NULL);
	if (id < 0) {
		if (intern_count(im->stacks) >= im->lim.max_stacks)
			return import_fail(im, "more than %zu distinct stacks", im->lim.max_stacks);
		return import_fail(im, "out of memory");
	}
	return id;
}

static int64_t find_thread(const struct importer *im, int64_t tid)
{
	return intern_find(im->threads, &tid, sizeof(tid));
}

int64_t import_thread(struct importer *im, int64_t tid, const char *comm, size_t n)
{
	bool added;
	int64_t idx;

	if (tid < 0 || tid > INT32_MAX)
		return import_fail(im, "thread id %lld out of range", (long long)tid);
	idx = intern_put(im->threads, &tid, sizeof(tid), &added);
	if (idx < 0)
		return import_fail(im, "out of memory");
	if (added) {
		if (vec_reserve(&im->th, &im->cap_th, im->nth + 1, sizeof(*im->th)) < 0)
			return import_fail(im, "out of memory");
		im->th[im->nth++] = (struct thread){ .tid = tid, .comm = -1 };
	}
	if (n) {
		int64_t c = intern_put(im->comms, comm, n, NULL);

		if (c < 0)
			return import_fail(im, "out of memory");
		im->th[idx].comm = c;
	}
	return idx;
}

int64_t import_pseudo_tid(struct importer *im, const char *comm, size_t n)
{
	int64_t tid = PSEUDO_TID_BASE + (int64_t)(intern_hash(comm, n) % (uint64_t)PSEUDO_TID_BASE);
	int64_t c = intern_find(im->comms, comm, n), idx;

	/* probe past tids taken by another name; ends since threads are finite */
	while ((idx = find_thread(im, tid)) >= 0) {
		if (im->th[idx].pseudo && c >= 0 && im->th[idx].comm == c)
			return tid;
		tid = tid + 1 > INT32_MAX ? PSEUDO_TID_BASE : tid + 1;
	}
	idx = import_thread(im, tid, comm, n);
	if (idx < 0)
		return -1;
	if (!n) {
		/* an unnamed pseudo thread still needs a comm to be found again */
		int64_t e = intern_put(im->comms, "", 0, NULL);

		if (e < 0)
			return import_fail(im, "out of memory");
		im->th[idx].comm = e;
	}
	im->th[idx].pseudo = true;
	return tid;
}

int64_t import_event(struct importer *im, const struct wire_event *e)
{
	if (im->nev >= im->lim.max_events)
		return import_fail(im, "more than %zu events", im->lim.max_events);
	if (vec_reserve(&im->ev, &im->cap_ev, im->nev + 1, sizeof(*im->ev)) < 0)
		return import_fail(im, "out of memory");
	im->ev[im->nev] = *e;
	return (int64_t)im->nev++;
}

struct wire_event *import_event_at(struct importer *im, size_t idx)
{
	return idx < im->nev ? &im->ev[idx] : NULL;
}

static int cmp_event(const void *a, const void *b)
{
	const struct wire_event *x = a, *y = b;

#define CMP(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
	CMP(ts_ns);
	CMP(tid);
	CMP(kind);
	CMP(dur_ns);
	CMP(stack);
	CMP(readier_tid);
#undef CMP
	return 0;
}

static bool name_ok(const char *s, bool required)
{
	if (!s)
		return !required;
	if (required && !*s)
		return false;
	return strlen(s) <= WIRE_MAX_NAME && util_utf8_valid(s, strlen(s));
}

static int check_opts(struct importer *im)
{
	const struct import_opts *o = &im->opts;

	if (!name_ok(o->host, true))
		return fail_path(im, "option host: must be 1 to %d bytes of UTF-8", WIRE_MAX_NAME);
	if (!name_ok(o->app, true))
		return fail_path(im, "option app: must be 1 to %d bytes of UTF-8", WIRE_MAX_NAME);
	if (!name_ok(o->version, false) || !name_ok(o->build_id, false))
		return fail_path(im, "option version/build_id: at most %d bytes of UTF-8",
				 WIRE_MAX_NAME);
	if (o->nlabels > WIRE_MAX_LABELS)
		return fail_path(im, "%zu labels, at most %d allowed", o->nlabels, WIRE_MAX_LABELS);
	for (size_t i = 0; i < o->nlabels; i++)
		if (!name_ok(o->labels[i].key, true) || !name_ok(o->labels[i].value, true))
			return fail_path(im, "label %zu: key and value must be at most %d bytes of UTF-8",
					 i, WIRE_MAX_NAME);
	if (o->symptom_tid > INT32_MAX)
		return fail_path(im, "option symptom tid %lld out of range", (long long)o->symptom_tid);
	if (o->window_start_ns > WIRE_MAX_TIME_NS || o->window_end_ns > WIRE_MAX_TIME_NS ||
	    (o->window_start_ns >= 0 && o->window_end_ns >= 0 &&
	     o->window_end_ns < o->window_start_ns))
		return fail_path(im, "option window: end before start or out of range");
	if (o->sample_period_ns < 0 || o->sample_period_ns > WIRE_MAX_TIME_NS)
		return fail_path(im, "option sample period out of range");
	return 0;
}

/* The symptom thread: the costliest among those with events (named symptom_comm
 * when given); the idle task (tid 0) only when nothing else qualifies. */
static int pick_symptom(struct importer *im, int64_t *tid)
{
	const struct import_opts *o = &im->opts;
	int64_t want = -1, best = -1;

	if (o->symptom_tid >= 0) {
		*tid = o->symptom_tid;
		return 0;
	}
	if (o->symptom_comm) {
		want = intern_find(im->comms, o->symptom_comm, strlen(o->symptom_comm));
		if (want < 0)
			return fail_path(im, "no thread named \"%s\" in the capture", o->symptom_comm);
	}
	for (size_t i = 0; i < im->nth; i++) {
		const struct thread *t = &im->th[i], *b = best >= 0 ? &im->th[best] : NULL;

		if (!t->has_events || (want >= 0 && t->comm != want))
			continue;
		if (!b || (b->tid == 0 && t->tid != 0) ||
		    (t->tid != 0 && (t->cost > b->cost || (t->cost == b->cost && t->tid < b->tid))))
			best = (int64_t)i;
	}
	if (best < 0)
		return fail_path(im, "no thread named \"%s\" has events", o->symptom_comm);
	*tid = im->th[best].tid;
	return 0;
}

static int assemble(struct importer *im, struct wire_stream *out)
{
	const struct import_opts *o = &im->opts;
	size_t nframes = intern_count(im->frames), nstacks = intern_count(im->stacks);
	const char **frames;
	struct wire_stack *stacks;
	int64_t first = INT64_MAX, last = 0;

	if (!im->nev) {
		if (!im->lineno)
			return import_fail(im, "empty file");
		return import_fail(im, "no samples found");
	}
	qsort(im->ev, im->nev, sizeof(*im->ev), cmp_event);
	for (size_t i = 0; i < im->nev; i++) {
		const struct wire_event *e = &im->ev[i];
		int64_t t = find_thread(im, e->tid);

		if (t < 0)
			return fail_path(im, "internal error: event of unknown thread %lld",
					 (long long)e->tid);
		im->th[t].has_events = true;
		im->th[t].cost = e->dur_ns > INT64_MAX - im->th[t].cost ? INT64_MAX
									 : im->th[t].cost + e->dur_ns;
		if (e->ts_ns < first)
			first = e->ts_ns;
		if (e->ts_ns + e->dur_ns > last)
			last = e->ts_ns + e->dur_ns;
	}
	if (last > WIRE_MAX_TIME_NS)
		last = WIRE_MAX_TIME_NS;

	frames = arena_calloc(im->out, nframes ? nframes : 1, sizeof(*frames));
	stacks = arena_calloc(im->out, nstacks ? nstacks : 1, sizeof(*stacks));
	if (!frames || !stacks)
		return fail_path(im, "out of memory");
	for (size_t i = 0; i < nframes; i++)
		frames[i] = intern_key(im->frames, (uint32_t)i, NULL);
	for (size_t i = 0; i < nstacks; i++) {
		size_t len;
		const void *key = intern_key(im->stacks, (uint32_t)i, &len);
		uint32_t *copy = arena_alloc(im->out, len);

		/* copied because interned keys carry no alignment promise */
		if (!copy)
			return fail_path(im, "out of memory");
		memcpy(copy, key, len);
		stacks[i].frames = copy;
		stacks[i].len = (uint32_t)(len / sizeof(uint32_t));
	}

	memset(out, 0, sizeof(*out));
	util_uuid_v4(out->stream_id);
	out->host = o->host;
	out->app = o->app;
	out->version = o->version;
	out->build_id = o->build_id;
	out->labels = o->labels;
	out->nlabels = o->nlabels;
	out->symptom.kind = "import";
	if (pick_symptom(im, &out->symptom.tid) < 0)
		return -1;
	out->symptom.start_ns = o->window_start_ns >= 0 ? o->window_start_ns : first;
	out->symptom.end_ns = o->window_end_ns >= 0 ? o->window_end_ns : last;
	if (out->symptom.end_ns < out->symptom.start_ns) {
		/* only one bound given, on the far side of the capture */
		if (o->window_start_ns >= 0)
			out->symptom.end_ns = out->symptom.start_ns;
		else
			out->symptom.start_ns = out->symptom.end_ns;
	}
	out->symptom.unit_type = NULL;
	out->symptom.threshold_ns = -1;
	out->frames = frames;
	out->nframes = nframes;
	out->stacks = stacks;
	out->nstacks = nstacks;
	out->events = im->ev;
	out->nevents = im->nev;
	return 0;
}

int importer_run(struct importer *im, const char *path, struct wire_stream *out)
{
	int rc;

	reset_run(im);
	memset(out, 0, sizeof(*out));
	im->err[0] = '\0';
	im->path = path;
	if (check_opts(im) < 0)
		return -1;
	im->gz = gzopen(path, "rb");
	if (!im->gz)
		return fail_path(im, "cannot open: %s", errno ? strerror(errno) : "out of memory");
	gzbuffer(im->gz, READ_CHUNK);
	rc = im->fmt->parse(im);
	if (rc == 0)
		rc = assemble(im, out);
	gzclose(im->gz);
	im->gz = NULL;
	if (rc < 0)
		memset(out, 0, sizeof(*out));
	return rc < 0 ? -1 : 0;
}
