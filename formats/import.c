/* import: input, format dispatch, interning and stream assembly (see import.h). */
#include "formats/import.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/hash.h"
#include "common/imap.h"
#include "common/intern.h"
#include "common/sha256.h"
#include "common/util.h"
#include "common/vec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define READ_CHUNK 65536
#define PEEK_MAX 65536
#define IMPORT_FILE_FACTOR 16
/* Pseudo tids live in [2^30, 2^31): above any kernel pid_max (2^22). */
#define PSEUDO_TID_BASE ((int64_t)1 << 30)

struct thread {
	int64_t tid;
	int64_t comm;     /* id in im->comms, -1 when unnamed */
	int64_t cost;     /* total dur of its events in the stream being assembled */
	bool pseudo;      /* tid made up by import_pseudo_tid() for comm */
	bool has_events;
	bool shown;       /* has events, readies a wait or is the symptom in the stream being assembled */
};

/* An event and the stream (group of sample labels) it belongs to. */
struct ievent {
	struct wire_event e;
	uint32_t group;
};

/* A group's labels: an interned "key\0value\0..." and its decoded form, per run. */
struct group {
	struct wire_label *labels;
	size_t nlabels;
};

struct importer {
	const struct import_format *fmt, *read_fmt;
	struct import_opts opts;     /* strings point into meta */
	struct arena *meta;          /* copies of the options, for the importer's life */
	struct arena *out;           /* the assembled streams' arrays, per run */
	struct wire_limits lim;
	char err[1024];
	char rerr[512];              /* why the input could not be read */
	bool too_large;              /* the refusal is for size */

	/* input: a gzip/plain file, or a buffer (inflated when compressed) */
	const char *path;
	gzFile gz;
	const unsigned char *mem;
	size_t mem_len, mem_pos;
	z_stream zs;
	bool zs_on, zs_end;
	size_t total_in;             /* decompressed bytes read so far */
	struct sha256_ctx hash;      /* of the decompressed input: the streams' ids */
	char *rbuf;                  /* READ_CHUNK + IMPORT_MAX_LINE + 1 bytes */
	size_t rstart, rend;
	bool eof;
	int64_t lineno;
	unsigned char *all;          /* import_read_all()'s copy */

	struct intern *frames, *stacks, *threads, *comms, *groups;
	struct thread *th;
	size_t nth, cap_th;
	struct ievent *ev;
	size_t nev, cap_ev;
	struct group *grp;
	size_t ngrp, cap_grp;
	uint32_t cur_group;
	struct imap lay;             /* tid -> where its next laid-out event starts */
	struct imap pseudo;          /* comm id -> its pseudo thread's tid */
	int64_t lay_origin;
	struct wire_stream *streams;
	size_t nstreams;
	char fbuf[WIRE_MAX_FRAME + 1];
	struct buf gbuf;             /* a group's key being built */
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
	im->lay = (struct imap)IMAP_INIT;
	im->pseudo = (struct imap)IMAP_INIT;
	wire_limits_default(&im->lim);
	im->meta = arena_open(0);
	im->out = arena_open(0);
	im->rbuf = malloc(READ_CHUNK + IMPORT_MAX_LINE + 1);
	/* a file may become many streams: each is held to the wire format's limits when it is
	 * assembled, the file as a whole to IMPORT_FILE_FACTOR times them */
	im->frames = intern_open(im->lim.max_frames * IMPORT_FILE_FACTOR);
	im->stacks = intern_open(im->lim.max_stacks * IMPORT_FILE_FACTOR);
	im->threads = intern_open(0);
	im->comms = intern_open(0);
	im->groups = intern_open(0);
	im->gbuf = (struct buf)BUF_INIT((WIRE_MAX_LABELS + 1) * 2 * (WIRE_MAX_NAME + 1));
	if (!im->meta || !im->out || !im->rbuf || !im->frames || !im->stacks || !im->threads ||
	    !im->comms || !im->groups)
		goto fail_alloc;
	im->opts = *opts;
	im->opts.host = dup_opt(im->meta, opts->host, &oom);
	im->opts.app = dup_opt(im->meta, opts->app, &oom);
	im->opts.version = dup_opt(im->meta, opts->version, &oom);
	im->opts.build_id = dup_opt(im->meta, opts->build_id, &oom);
	im->opts.symptom_comm = dup_opt(im->meta, opts->symptom_comm, &oom);
	im->opts.event = dup_opt(im->meta, opts->event, &oom);
	im->opts.sample_type = dup_opt(im->meta, opts->sample_type, &oom);
	if (!im->opts.max_input)
		im->opts.max_input = IMPORT_DEFAULT_MAX_INPUT;
	if (!im->opts.max_streams)
		im->opts.max_streams = IMPORT_DEFAULT_MAX_STREAMS;
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

static void close_input(struct importer *im)
{
	if (im->gz) {
		gzclose(im->gz);
		im->gz = NULL;
	}
	if (im->zs_on) {
		inflateEnd(&im->zs);
		im->zs_on = false;
	}
	im->mem = NULL;
	im->mem_len = im->mem_pos = 0;
	free(im->all);
	im->all = NULL;
}

static void reset_run(struct importer *im)
{
	close_input(im);
	im->path = NULL;
	im->too_large = false;
	im->zs_end = false;
	im->total_in = 0;
	sha256_init(&im->hash);
	im->rstart = im->rend = 0;
	im->eof = false;
	im->lineno = 0;
	im->read_fmt = im->fmt;
	intern_clear(im->frames);
	intern_clear(im->stacks);
	intern_clear(im->threads);
	intern_clear(im->comms);
	intern_clear(im->groups);
	im->nth = 0;
	im->nev = 0;
	im->ngrp = 0;
	im->cur_group = 0;
	imap_clear(&im->lay);
	imap_clear(&im->pseudo);
	im->lay_origin = 0;
	im->streams = NULL;
	im->nstreams = 0;
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
	intern_free(im->groups);
	free(im->th);
	free(im->ev);
	free(im->grp);
	imap_free(&im->lay);
	imap_free(&im->pseudo);
	free(im->rbuf);
	buf_release(&im->gbuf);
	arena_free(im->out);
	arena_free(im->meta);
	free(im);
}

const char *importer_error(const struct importer *im)
{
	return im->err;
}

bool importer_too_large(const struct importer *im)
{
	return im->too_large;
}

void import_mark_too_large(struct importer *im)
{
	im->too_large = true;
}

const char *importer_format(const struct importer *im)
{
	return im->read_fmt ? im->read_fmt->name : "";
}

size_t importer_count(const struct importer *im)
{
	return im->nstreams;
}

const struct wire_stream *importer_stream(const struct importer *im, size_t i)
{
	return i < im->nstreams ? &im->streams[i] : NULL;
}

const struct import_opts *import_opts_of(const struct importer *im)
{
	return &im->opts;
}

void import_set_format(struct importer *im, const struct import_format *fmt)
{
	im->read_fmt = fmt;
}

static int vfail(struct importer *im, bool with_line, const char *fmt, va_list ap)
{
	int n;

	if (with_line)
		n = snprintf(im->err, sizeof(im->err), "%s:%lld: ", im->path ? im->path : "(input)",
			     (long long)(im->lineno ? im->lineno : 1));
	else
		n = snprintf(im->err, sizeof(im->err), "%s: ", im->path ? im->path : "(input)");
	if (n < 0 || (size_t)n >= sizeof(im->err))
		return -1;
	vsnprintf(im->err + n, sizeof(im->err) - (size_t)n, fmt, ap);
	return -1;
}

int import_fail_input(struct importer *im, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(im, false, fmt, ap);
	va_end(ap);
	return -1;
}

int import_fail(struct importer *im, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(im, true, fmt, ap);
	va_end(ap);
	return -1;
}

__attribute__((format(printf, 2, 3)))
static ssize_t read_fail(struct importer *im, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(im->rerr, sizeof(im->rerr), fmt, ap);
	va_end(ap);
	return -1;
}

/* From a buffer: inflate gzip or zlib data, copy anything else. */
static ssize_t mem_read(struct importer *im, unsigned char *dst, size_t n)
{
	if (!im->zs_on) {
		size_t k = im->mem_len - im->mem_pos < n ? im->mem_len - im->mem_pos : n;

		memcpy(dst, im->mem + im->mem_pos, k);
		im->mem_pos += k;
		return (ssize_t)k;
	}
	im->zs.next_out = dst;
	im->zs.avail_out = (uInt)n;
	while (im->zs.avail_out && !im->zs_end) {
		int zr;

		if (!im->zs.avail_in)
			break;
		zr = inflate(&im->zs, Z_NO_FLUSH);
		if (zr == Z_STREAM_END) {
			/* gzip members may follow one another, as gzread() reads them */
			if (im->zs.avail_in >= 2 && im->zs.next_in[0] == 0x1f && im->zs.next_in[1] == 0x8b)
				inflateReset(&im->zs);
			else
				im->zs_end = true;
		} else if (zr != Z_OK && zr != Z_BUF_ERROR) {
			return read_fail(im, "read error: %s",
					 im->zs.msg ? im->zs.msg : "corrupt compressed data");
		} else if (zr == Z_BUF_ERROR) {
			break;
		}
	}
	if (!im->zs_end && !im->zs.avail_in && im->zs.avail_out == n)
		return read_fail(im, "read error: unexpected end of file (truncated compressed data?)");
	return (ssize_t)(n - im->zs.avail_out);
}

static ssize_t file_read(struct importer *im, unsigned char *dst, size_t n)
{
	int r;

	errno = 0;
	r = gzread(im->gz, dst, (unsigned)n);
	if (r <= 0) {
		int zerr = Z_OK;
		const char *msg = gzerror(im->gz, &zerr);
		size_t pl = strlen(im->path);

		/* zlib prefixes its messages with the path, which ours already has */
		if (strncmp(msg, im->path, pl) == 0 && strncmp(msg + pl, ": ", 2) == 0)
			msg += pl + 2;
		if (zerr == Z_ERRNO)
			return read_fail(im, "read error: %s", strerror(errno));
		/* a gzip stream cut short shows only here, as Z_BUF_ERROR after the data */
		if (r < 0 || zerr == Z_BUF_ERROR)
			return read_fail(im, "read error: %s%s", msg,
					 zerr == Z_BUF_ERROR ? " (truncated gzip file?)" : "");
		return 0;
	}
	return r;
}

/* Up to n decompressed bytes into dst; 0 at the end, -1 with the error set. */
static ssize_t src_read(struct importer *im, unsigned char *dst, size_t n)
{
	ssize_t r = im->gz ? file_read(im, dst, n) : mem_read(im, dst, n);

	if (r > 0) {
		if ((size_t)r > im->opts.max_input - im->total_in) {
			im->too_large = true;
			return read_fail(im, "more than %zu bytes once decompressed", im->opts.max_input);
		}
		im->total_in += (size_t)r;
		sha256_update(&im->hash, dst, (size_t)r);
	}
	return r;
}

/* Refill the read buffer after moving the unread part to its start. */
static int refill(struct importer *im)
{
	size_t keep = im->rend - im->rstart;
	ssize_t n;

	if (im->rstart) {
		memmove(im->rbuf, im->rbuf + im->rstart, keep);
		im->rstart = 0;
		im->rend = keep;
	}
	n = src_read(im, (unsigned char *)im->rbuf + im->rend, READ_CHUNK + IMPORT_MAX_LINE - im->rend);
	if (n < 0) {
		im->lineno++;   /* the line being read */
		return import_fail(im, "%s", im->rerr);
	}
	if (n == 0)
		im->eof = true;
	im->rend += (size_t)n;
	return 0;
}

int import_peek(struct importer *im, size_t want, const unsigned char **data, size_t *len)
{
	if (want > PEEK_MAX)
		want = PEEK_MAX;
	while (im->rend - im->rstart < want && !im->eof)
		if (refill(im) < 0)
			return -1;
	*data = (const unsigned char *)im->rbuf + im->rstart;
	*len = im->rend - im->rstart;
	return 0;
}

int import_read_all(struct importer *im, const unsigned char **data, size_t *len)
{
	/* src_read() refuses more than max_input bytes: the buf's maximum is never what stops it */
	struct buf b = BUF_INIT(im->opts.max_input < SIZE_MAX / 2 - READ_CHUNK ? im->opts.max_input + READ_CHUNK : 0);

	/* even when empty, this allocates: *data is never NULL */
	if (buf_append(&b, im->rbuf + im->rstart, im->rend - im->rstart) < 0) {
		buf_release(&b);
		return import_fail_input(im, "out of memory");
	}
	im->rstart = im->rend;
	while (!im->eof) {
		size_t room;
		ssize_t n;

		/* read straight into the buffer, keeping the byte its terminator needs; at most 1 GiB at a
		 * time, which gzread()'s unsigned count and int result hold */
		if (buf_reserve(&b, READ_CHUNK) < 0) {
			buf_release(&b);
			return import_fail_input(im, "out of memory");
		}
		room = b.cap - b.len - 1;
		n = src_read(im, (unsigned char *)b.data + b.len, room < ((size_t)1 << 30) ? room : (size_t)1 << 30);
		if (n < 0) {
			buf_release(&b);
			return import_fail_input(im, "%s", im->rerr);
		}
		if (n == 0)
			im->eof = true;
		b.len += (size_t)n;
	}
	b.data[b.len] = '\0';
	free(im->all);
	im->all = (unsigned char *)b.data;  /* the buf's memory, now the importer's */
	*data = im->all;
	*len = b.len;
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

/* s[0..n) as valid UTF-8 into out (room for max bytes): each invalid byte becomes U+FFFD,
 * and the text is cut on a character boundary. Returns the bytes written. */
static size_t clean_utf8(char *out, size_t max, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, o = 0;

	while (i < n) {
		size_t k = utf8_char(p + i, n - i);
		size_t w = k ? k : 3;

		if (o + w > max)
			break;
		memcpy(out + o, k ? s + i : "\xef\xbf\xbd", w);
		o += w;
		i += k ? k : 1;
	}
	return o;
}

int64_t import_frame(struct importer *im, const char *s, size_t n)
{
	size_t o = clean_utf8(im->fbuf, WIRE_MAX_FRAME, s, n);
	int64_t id;

	if (!o) {
		memcpy(im->fbuf, "[unknown]", 9);
		o = 9;
	}
	id = intern_put(im->frames, im->fbuf, o, NULL);
	if (id < 0) {
		if (intern_count(im->frames) >= im->lim.max_frames * IMPORT_FILE_FACTOR)
			return import_fail(im, "more than %zu distinct frames",
					   im->lim.max_frames * IMPORT_FILE_FACTOR);
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
		if (intern_count(im->stacks) >= im->lim.max_stacks * IMPORT_FILE_FACTOR)
			return import_fail(im, "more than %zu distinct stacks",
					   im->lim.max_stacks * IMPORT_FILE_FACTOR);
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
	uint64_t h = hash_bytes(comm, n), step = (h >> 32) | 1, v;   /* the same in every run */
	int64_t tid = PSEUDO_TID_BASE + (int64_t)(h % (uint64_t)PSEUDO_TID_BASE);
	int64_t c = intern_find(im->comms, comm, n), idx;

	/* this comm's pseudo thread, made before */
	if (c >= 0 && imap_get(&im->pseudo, (uint64_t)c, &v) && (idx = find_thread(im, (int64_t)v)) >= 0 &&
	    im->th[idx].pseudo && im->th[idx].comm == c)
		return (int64_t)v;
	/* past tids taken by other threads: double hashing, so that threads an input names on
	 * purpose cannot make long runs to walk through */
	for (uint64_t k = 1; (idx = find_thread(im, tid)) >= 0; k++) {
		if (im->th[idx].pseudo && c >= 0 && im->th[idx].comm == c)
			return tid;
		if (k > im->nth)
			return import_fail(im, "no thread id left for \"%.*s\"", (int)(n < 64 ? n : 64), comm);
		tid = PSEUDO_TID_BASE + (int64_t)((h + k * step) % (uint64_t)PSEUDO_TID_BASE);
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
	if (imap_put(&im->pseudo, (uint64_t)im->th[idx].comm, (uint64_t)tid) < 0)
		return import_fail(im, "out of memory");
	return tid;
}

int64_t import_event(struct importer *im, const struct wire_event *e)
{
	/* what the wire format takes, whatever a parser computed */
	if (e->ts_ns < 0 || e->dur_ns < 0 || e->ts_ns > WIRE_MAX_TIME_NS - e->dur_ns)
		return import_fail(im, "an event at %lld ns lasting %lld ns is out of the range of times "
				   "(0 to 2^62 ns)", (long long)e->ts_ns, (long long)e->dur_ns);
	if (im->nev >= im->lim.max_events)
		return import_fail(im, "more than %zu events", im->lim.max_events);
	if (vec_reserve(&im->ev, &im->cap_ev, im->nev + 1, sizeof(*im->ev)) < 0)
		return import_fail(im, "out of memory");
	im->ev[im->nev].e = *e;
	im->ev[im->nev].group = im->cur_group;
	return (int64_t)im->nev++;
}

struct wire_event *import_event_at(struct importer *im, size_t idx)
{
	return idx < im->nev ? &im->ev[idx].e : NULL;
}

/* s[0..n) as a label key or value: cut to WIRE_MAX_NAME bytes on a character boundary,
 * invalid UTF-8 replaced, empty made "-". Appended to b with a NUL. */
static void put_name(struct buf *b, const char *s, size_t n)
{
	char name[WIRE_MAX_NAME];
	size_t o = clean_utf8(name, sizeof(name), s, n);

	if (o)
		buf_append(b, name, o);
	else
		buf_putc(b, '-');
	buf_putc(b, '\0');
}

static bool opts_have_key(const struct import_opts *o, const char *k)
{
	for (size_t i = 0; i < o->nlabels; i++)
		if (strcmp(o->labels[i].key, k) == 0)
			return true;
	return false;
}

void import_use_group(struct importer *im, uint32_t id)
{
	im->cur_group = id;
}

int64_t import_group(struct importer *im, const struct wire_label *in, size_t n)
{
	struct wire_label labels[2 * WIRE_MAX_LABELS];
	struct buf *b = &im->gbuf;
	size_t kept = 0;
	bool added;
	int64_t id;

	/* by key, so that the same labels in another order (Go writes a map) are the same set;
	 * stable, so that a key given twice keeps its first value */
	if (n > sizeof(labels) / sizeof(labels[0]))
		n = sizeof(labels) / sizeof(labels[0]);
	for (size_t i = 0; i < n; i++) {
		size_t j = i;

		while (j > 0 && strcmp(labels[j - 1].key, in[i].key) > 0) {
			labels[j] = labels[j - 1];
			j--;
		}
		labels[j] = in[i];
	}
	buf_reset(b);
	for (size_t i = 0; i < n; i++) {
		size_t mark = b->len;
		bool dup = false;

		put_name(b, labels[i].key, strlen(labels[i].key));
		if (opts_have_key(&im->opts, b->data + mark))
			dup = true;
		/* a key given twice keeps its first value */
		for (size_t j = 0, off = 0; !dup && j < kept; j++) {
			if (strcmp(b->data + off, b->data + mark) == 0)
				dup = true;
			off += strlen(b->data + off) + 1;
			off += strlen(b->data + off) + 1;
		}
		if (dup || kept + im->opts.nlabels >= WIRE_MAX_LABELS) {
			b->len = mark;
			continue;
		}
		put_name(b, labels[i].value, strlen(labels[i].value));
		kept++;
	}
	if (buf_error(b) != BUF_OK)
		return import_fail(im, "out of memory");
	id = intern_put(im->groups, b->data ? b->data : "", b->len, &added);
	if (id < 0)
		return import_fail(im, "out of memory");
	if (added) {
		struct group *g;
		const char *k;

		if ((size_t)id >= im->opts.max_streams)
			return import_fail_input(im, "more than %zu distinct sets of sample labels "
						 "(streams)", im->opts.max_streams);
		if (vec_reserve(&im->grp, &im->cap_grp, im->ngrp + 1, sizeof(*im->grp)) < 0)
			return import_fail(im, "out of memory");
		g = &im->grp[im->ngrp++];
		g->nlabels = kept;
		g->labels = kept ? arena_calloc(im->out, kept, sizeof(*g->labels)) : NULL;
		if (kept && !g->labels)
			return import_fail(im, "out of memory");
		k = intern_key(im->groups, (uint32_t)id, NULL);
		for (size_t i = 0; i < kept; i++) {
			g->labels[i].key = k;
			k += strlen(k) + 1;
			g->labels[i].value = k;
			k += strlen(k) + 1;
		}
	}
	im->cur_group = (uint32_t)id;
	return id;
}

int64_t import_unit_ns(const char *u)
{
	static const struct { const char *name; int64_t ns; } units[] = {
		{ "nanoseconds", 1 }, { "ns", 1 }, { "microseconds", 1000 }, { "us", 1000 },
		{ "milliseconds", 1000000 }, { "ms", 1000000 }, { "seconds", 1000000000 },
		{ "s", 1000000000 },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(u, units[i].name) == 0)
			return units[i].ns;
	return 0;
}

bool import_wait_type(const char *t)
{
	/* whole words only: "wallclock" is not a lock */
	static const char *const words[] = { "delay", "contention", "contentions", "block",
					     "off_cpu", "offcpu", "off-cpu", "wait", "lock", "mutex",
					     "sleep" };

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t n = strlen(words[i]);

		for (const char *p = strstr(t, words[i]); p; p = strstr(p + 1, words[i])) {
			bool before = p > t && ((p[-1] | 0x20) >= 'a' && (p[-1] | 0x20) <= 'z');
			bool after = (p[n] | 0x20) >= 'a' && (p[n] | 0x20) <= 'z';

			if (!before && !after)
				return true;
		}
	}
	return false;
}

void import_lay_origin(struct importer *im, int64_t origin_ns)
{
	im->lay_origin = origin_ns;
}

int64_t import_lay(struct importer *im, int64_t tid, int64_t dur)
{
	uint64_t cur;
	int64_t ts;

	if (!imap_get(&im->lay, (uint64_t)tid, &cur))
		cur = (uint64_t)im->lay_origin;
	ts = (int64_t)cur;
	if (dur < 0 || dur > WIRE_MAX_TIME_NS - ts)
		return import_fail(im, "durations add up past %lld ns", (long long)WIRE_MAX_TIME_NS);
	if (imap_put(&im->lay, (uint64_t)tid, (uint64_t)(ts + dur)) < 0)
		return import_fail(im, "out of memory");
	return ts;
}

static int cmp_event(const void *a, const void *b)
{
	const struct ievent *p = a, *q = b;
	const struct wire_event *x = &p->e, *y = &q->e;

	if (p->group != q->group)
		return p->group < q->group ? -1 : 1;
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
		return import_fail_input(im, "option host: must be 1 to %d bytes of UTF-8", WIRE_MAX_NAME);
	if (!name_ok(o->app, true))
		return import_fail_input(im, "option app: must be 1 to %d bytes of UTF-8", WIRE_MAX_NAME);
	if (!name_ok(o->version, false) || !name_ok(o->build_id, false))
		return import_fail_input(im, "option version/build_id: at most %d bytes of UTF-8",
				 WIRE_MAX_NAME);
	if (o->nlabels > WIRE_MAX_LABELS)
		return import_fail_input(im, "%zu labels, at most %d allowed", o->nlabels, WIRE_MAX_LABELS);
	for (size_t i = 0; i < o->nlabels; i++)
		if (!name_ok(o->labels[i].key, true) || !name_ok(o->labels[i].value, true))
			return import_fail_input(im, "label %zu: key and value must be at most %d bytes of UTF-8",
					 i, WIRE_MAX_NAME);
	if (o->symptom_tid > INT32_MAX)
		return import_fail_input(im, "option symptom tid %lld out of range", (long long)o->symptom_tid);
	if (o->window_start_ns > WIRE_MAX_TIME_NS || o->window_end_ns > WIRE_MAX_TIME_NS ||
	    (o->window_start_ns >= 0 && o->window_end_ns >= 0 &&
	     o->window_end_ns < o->window_start_ns))
		return import_fail_input(im, "option window: end before start or out of range");
	if (o->sample_period_ns < 0 || o->sample_period_ns > WIRE_MAX_TIME_NS)
		return import_fail_input(im, "option sample period out of range");
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
			return import_fail_input(im, "no thread named \"%s\" in the capture",
						 o->symptom_comm);
	}
	for (size_t i = 0; i < im->nth; i++) {
		const struct thread *t = &im->th[i], *b = best >= 0 ? &im->th[best] : NULL;

		if (!t->has_events || (want >= 0 && t->comm != want))
			continue;
		if (!b || (b->tid == 0 && t->tid != 0) ||
		    (t->tid != 0 && (t->cost > b->cost || (t->cost == b->cost && t->tid < b->tid))))
			best = (int64_t)i;
	}
	if (best < 0) {
		*tid = -1;   /* this stream has no such thread */
		return 0;
	}
	*tid = im->th[best].tid;
	return 0;
}

/* s and its NUL; NULL as nothing, so that NULL and "" differ. */
static void hash_str(struct sha256_ctx *c, const char *s)
{
	if (s)
		sha256_update(c, s, strlen(s) + 1);
}

/*
 * The stream's id: a UUID (version 8) from SHA-256 over what makes it: the format,
 * the options that go into it, the decompressed input and its labels. The same capture
 * imported twice gives the same id, so the server stores it once.
 */
static void stream_id(struct importer *im, const unsigned char digest[SHA256_LEN],
		      const struct group *g, const struct wire_stream *s, char out[37])
{
	const struct import_opts *o = &im->opts;
	struct sha256_ctx c;
	unsigned char h[SHA256_LEN];
	char num[64];

#define PUT(str) hash_str(&c, (str))
	sha256_init(&c);
	PUT("stackmine import v1");
	PUT(importer_format(im));
	PUT(o->host);
	PUT(o->app);
	PUT(o->version);
	PUT(o->build_id);
	for (size_t i = 0; i < o->nlabels; i++) {
		PUT(o->labels[i].key);
		PUT(o->labels[i].value);
	}
	for (size_t i = 0; i < g->nlabels; i++) {
		PUT(g->labels[i].key);
		PUT(g->labels[i].value);
	}
	snprintf(num, sizeof(num), "%lld %lld %lld %lld %d", (long long)s->symptom.tid,
		 (long long)s->symptom.start_ns, (long long)s->symptom.end_ns,
		 (long long)o->sample_period_ns, (int)o->role);
	PUT(num);
	PUT(o->event);
	PUT(o->sample_type);
#undef PUT
	sha256_update(&c, digest, SHA256_LEN);
	sha256_final(&c, h);
	h[6] = (unsigned char)((h[6] & 0x0f) | 0x80);   /* version 8: custom */
	h[8] = (unsigned char)((h[8] & 0x3f) | 0x80);   /* RFC 4122 variant */
	for (size_t i = 0, o2 = 0; i < 16; i++) {
		static const char hex[] = "0123456789abcdef";

		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o2++] = '-';
		out[o2++] = hex[h[i] >> 4];
		out[o2++] = hex[h[i] & 15];
		out[o2] = '\0';
	}
}

/* The names (comms) of the threads the stream shows, for the wire's "threads": cut to
 * WIRE_MAX_THREAD_NAME bytes of valid UTF-8, control characters as '?', empty ones left out,
 * at most WIRE_MAX_THREADS in the order the input named them. */
static int thread_names(struct importer *im, const struct wire_event *ev, size_t n, struct wire_stream *out)
{
	struct wire_thread *th;
	size_t k = 0, cnt = 0;
	int64_t t;

	for (size_t i = 0; i < n; i++)
		if (ev[i].readier_tid && (t = find_thread(im, ev[i].readier_tid)) >= 0)
			im->th[t].shown = true;
	if ((t = find_thread(im, out->symptom.tid)) >= 0)
		im->th[t].shown = true;
	for (size_t i = 0; i < im->nth; i++)
		cnt += im->th[i].shown && im->th[i].comm >= 0;
	if (!cnt)
		return 0;
	th = arena_calloc(im->out, cnt, sizeof(*th));
	if (!th)
		return import_fail_input(im, "out of memory");
	for (size_t i = 0; i < im->nth && k < WIRE_MAX_THREADS; i++) {
		const struct thread *x = &im->th[i];
		char name[WIRE_MAX_THREAD_NAME + 1];
		const char *comm;
		size_t len, o;

		if (!x->shown || x->comm < 0)
			continue;
		comm = intern_key(im->comms, (uint32_t)x->comm, &len);
		o = clean_utf8(name, WIRE_MAX_THREAD_NAME, comm, len);
		if (!o)
			continue;
		for (size_t c = 0; c < o; c++)
			if ((unsigned char)name[c] < 0x20 || name[c] == 0x7f)
				name[c] = '?';
		th[k].tid = x->tid;
		if (!(th[k].name = arena_strndup(im->out, name, o)))
			return import_fail_input(im, "out of memory");
		k++;
	}
	out->threads = th;
	out->nthreads = k;
	return 0;
}

/* One stream from the events ev[0..n) of group g, their frames and stacks renumbered densely. */
static int assemble_one(struct importer *im, const struct ievent *ev, size_t n,
			const struct group *g, int32_t *smap, int32_t *fmap,
			const unsigned char digest[SHA256_LEN], struct wire_stream *out)
{
	const struct import_opts *o = &im->opts;
	size_t nframes = 0, nstacks = 0, total_len = 0, nfcap;
	uint32_t *ustk = NULL, *ufr = NULL;   /* the stacks and frames this stream uses */
	const char **frames;
	struct wire_stack *stacks;
	struct wire_event *events;
	struct wire_label *labels;
	int64_t first = INT64_MAX, last = 0;
	int rc = -1;

	for (size_t i = 0; i < im->nth; i++) {
		im->th[i].has_events = im->th[i].shown = false;
		im->th[i].cost = 0;
	}
	events = arena_calloc(im->out, n, sizeof(*events));
	ustk = vec_alloc(n, sizeof(*ustk));
	if (!events || !ustk) {
		rc = import_fail_input(im, "out of memory");
		goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		const struct wire_event *e = &ev[i].e;
		int64_t t = find_thread(im, e->tid);

		if (t < 0) {
			rc = import_fail_input(im, "internal error: event of unknown thread %lld",
					       (long long)e->tid);
			goto out_free;
		}
		im->th[t].has_events = im->th[t].shown = true;
		im->th[t].cost = e->dur_ns > INT64_MAX - im->th[t].cost ? INT64_MAX
									 : im->th[t].cost + e->dur_ns;
		if (e->ts_ns < first)
			first = e->ts_ns;
		if (e->ts_ns + e->dur_ns > last)
			last = e->ts_ns + e->dur_ns;
		if (smap[e->stack] < 0) {
			smap[e->stack] = 0;
			ustk[nstacks++] = e->stack;
		}
	}
	if (nstacks > im->lim.max_stacks) {
		rc = import_fail_input(im, "more than %zu distinct stacks in one stream",
				       im->lim.max_stacks);
		goto out_free;
	}
	/* only this stream's stacks and frames are visited: numbered in the order of their ids */
	vec_sort_u32(ustk, nstacks);
	for (size_t i = 0; i < nstacks; i++) {
		size_t len;

		smap[ustk[i]] = (int32_t)i;
		intern_key(im->stacks, ustk[i], &len);
		total_len += len / sizeof(uint32_t);
	}
	for (size_t i = 0; i < n; i++) {
		events[i] = ev[i].e;
		events[i].stack = (uint32_t)smap[ev[i].e.stack];
	}
	stacks = arena_calloc(im->out, nstacks ? nstacks : 1, sizeof(*stacks));
	nfcap = total_len < im->lim.max_frames ? total_len : im->lim.max_frames;
	frames = arena_calloc(im->out, nfcap ? nfcap : 1, sizeof(*frames));
	ufr = vec_alloc(nfcap, sizeof(*ufr));
	if (!stacks || !frames || !ufr) {
		rc = import_fail_input(im, "out of memory");
		goto out_free;
	}
	for (size_t i = 0; i < nstacks; i++) {
		size_t len;
		const uint32_t *key = intern_key(im->stacks, ustk[i], &len);
		uint32_t *copy = arena_alloc(im->out, len);

		/* copied because interned keys carry no alignment promise */
		if (!copy) {
			rc = import_fail_input(im, "out of memory");
			goto out_free;
		}
		memcpy(copy, key, len);
		for (size_t k = 0; k < len / sizeof(uint32_t); k++) {
			uint32_t f = copy[k];

			if (fmap[f] < 0) {
				if (nframes == nfcap) {
					rc = import_fail_input(im, "more than %zu distinct frames in one stream",
							       im->lim.max_frames);
					goto out_free;
				}
				fmap[f] = (int32_t)nframes;
				ufr[nframes] = f;
				frames[nframes++] = intern_key(im->frames, f, NULL);
			}
			copy[k] = (uint32_t)fmap[f];
		}
		stacks[i].frames = copy;
		stacks[i].len = (uint32_t)(len / sizeof(uint32_t));
	}
	if (last > WIRE_MAX_TIME_NS)
		last = WIRE_MAX_TIME_NS;

	labels = arena_calloc(im->out, o->nlabels + g->nlabels + 1, sizeof(*labels));
	if (!labels) {
		rc = import_fail_input(im, "out of memory");
		goto out_free;
	}
	if (o->nlabels)
		memcpy(labels, o->labels, o->nlabels * sizeof(*labels));
	if (g->nlabels)
		memcpy(labels + o->nlabels, g->labels, g->nlabels * sizeof(*labels));

	memset(out, 0, sizeof(*out));
	out->host = o->host;
	out->app = o->app;
	out->version = o->version;
	out->build_id = o->build_id;
	out->labels = labels;
	out->nlabels = o->nlabels + g->nlabels;
	out->symptom.kind = "import";
	if (pick_symptom(im, &out->symptom.tid) < 0)
		goto out_free;
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
	out->events = events;
	out->nevents = n;
	out->role = o->role;
	if (thread_names(im, events, n, out) < 0)
		goto out_free;
	stream_id(im, digest, g, out, out->stream_id);
	rc = 0;
out_free:
	/* the maps are shared by all groups: clear what this one set */
	for (size_t i = 0; ustk && i < nstacks; i++)
		smap[ustk[i]] = -1;
	for (size_t i = 0; ufr && i < nframes; i++)
		fmap[ufr[i]] = -1;
	free(ustk);
	free(ufr);
	return rc;
}

static int assemble(struct importer *im)
{
	size_t nstacks = intern_count(im->stacks), nframes = intern_count(im->frames), nout = 0;
	unsigned char digest[SHA256_LEN];
	int32_t *smap = NULL, *fmap = NULL;
	int rc = -1;

	if (!im->nev) {
		if (!im->total_in)
			return import_fail(im, "empty file");
		return import_fail(im, "no samples found");
	}
	if (!im->ngrp) {
		/* the parser named no labels: everything is the one stream without them */
		if (import_group(im, NULL, 0) < 0)
			return -1;
	}
	sha256_final(&im->hash, digest);
	qsort(im->ev, im->nev, sizeof(*im->ev), cmp_event);
	smap = vec_alloc(nstacks, sizeof(*smap));
	fmap = vec_alloc(nframes, sizeof(*fmap));
	im->streams = arena_calloc(im->out, im->ngrp, sizeof(*im->streams));
	if (!smap || !fmap || !im->streams) {
		import_fail_input(im, "out of memory");
		goto out_maps;
	}
	memset(smap, 0xff, (nstacks ? nstacks : 1) * sizeof(*smap));
	memset(fmap, 0xff, (nframes ? nframes : 1) * sizeof(*fmap));
	for (size_t a = 0, b; a < im->nev; a = b) {
		struct wire_stream *s = &im->streams[nout];

		for (b = a + 1; b < im->nev && im->ev[b].group == im->ev[a].group; b++)
			;
		if (assemble_one(im, im->ev + a, b - a, &im->grp[im->ev[a].group], smap, fmap, digest,
				 s) < 0)
			goto out_maps;
		/* a symptom comm that only some streams have: the others are left out */
		if (s->symptom.tid < 0)
			continue;
		nout++;
	}
	if (!nout) {
		import_fail_input(im, "no thread named \"%s\" has events", im->opts.symptom_comm);
		goto out_maps;
	}
	im->nstreams = nout;
	rc = 0;
out_maps:
	free(smap);
	free(fmap);
	return rc;
}

static int run(struct importer *im)
{
	int rc;

	if (check_opts(im) < 0)
		return -1;
	rc = im->fmt->parse(im);
	if (rc == 0)
		rc = assemble(im);
	close_input(im);
	if (rc < 0) {
		im->streams = NULL;
		im->nstreams = 0;
	}
	return rc < 0 ? -1 : 0;
}

int importer_run(struct importer *im, const char *path)
{
	reset_run(im);
	im->err[0] = '\0';
	im->path = path;
	im->gz = gzopen(path, "rb");
	if (!im->gz)
		return import_fail_input(im, "cannot open: %s", errno ? strerror(errno) : "out of memory");
	gzbuffer(im->gz, READ_CHUNK);
	return run(im);
}

int importer_run_mem(struct importer *im, const char *name, const void *data, size_t len)
{
	const unsigned char *p = data;

	reset_run(im);
	im->err[0] = '\0';
	im->path = name;
	im->mem = p;
	im->mem_len = len;
	/* gzip (1f 8b) or zlib (78 01/9c/da) data is inflated, the rest read as it is */
	if (len >= 2 && ((p[0] == 0x1f && p[1] == 0x8b) ||
			 (p[0] == 0x78 && (p[1] == 0x01 || p[1] == 0x9c || p[1] == 0xda)))) {
		memset(&im->zs, 0, sizeof(im->zs));
		if (inflateInit2(&im->zs, 15 + 32) != Z_OK)
			return import_fail_input(im, "out of memory");
		im->zs_on = true;
		im->zs.next_in = (Bytef *)(uintptr_t)p;
		im->zs.avail_in = len > UINT32_MAX ? UINT32_MAX : (uInt)len;
	}
	return run(im);
}
