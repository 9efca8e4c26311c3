/* export: pprof, speedscope and collapsed stacks out of weighted stacks, and the API's downloads of them
 * (see export.h). */
#include "web/export.h"
#include "common/arena.h"
#include "common/intern.h"
#include "common/jsonw.h"
#include "common/proto/profile.pb-c.h"
#include "common/vec.h"
#include "web/api.h"
#include "web/model.h"
#include "web/request.h"
#include "web/streams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define EXPORT_MAX_SAMPLES 4000000
#define EXPORT_MAX_DEPTH 1024

/* One aggregated sample: a stack of one side, kind and thread. */
struct xsample {
	size_t off;            /* frames in x->frames */
	uint32_t n;
	uint8_t side, kind;
	int64_t tid;
	uint64_t cost, events;
};

struct export {
	char title[256];
	bool comparison;
	uint64_t streams[2];
	struct intern *names;  /* frame name -> id */
	struct intern *keys;   /* (side, kind, tid, frames) -> sample index */
	uint32_t *frames;
	size_t nframes, cap_frames;
	struct xsample *s;
	size_t ns, cap_s;
	struct buf key;
	char err[256];
};

int export_format_parse(const char *s, enum export_format *f)
{
	if (!s || strcmp(s, "pprof") == 0)
		*f = EXPORT_PPROF;
	else if (strcmp(s, "speedscope") == 0)
		*f = EXPORT_SPEEDSCOPE;
	else if (strcmp(s, "folded") == 0)
		*f = EXPORT_FOLDED;
	else
		return -1;
	return 0;
}

const char *export_suffix(enum export_format f)
{
	return f == EXPORT_PPROF ? ".pb.gz" : f == EXPORT_SPEEDSCOPE ? ".speedscope.json" : ".folded.txt";
}

const char *export_media(enum export_format f)
{
	return f == EXPORT_PPROF ? "application/octet-stream"
	       : f == EXPORT_SPEEDSCOPE ? "application/json" : "text/plain; charset=utf-8";
}

struct export *export_open(const char *title, bool comparison)
{
	struct export *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	snprintf(x->title, sizeof(x->title), "%s", title ? title : "stackmine");
	x->comparison = comparison;
	x->names = intern_open(0);
	x->keys = intern_open(EXPORT_MAX_SAMPLES);
	x->key = (struct buf)BUF_INIT(64 + EXPORT_MAX_DEPTH * 4);
	if (!x->names || !x->keys) {
		export_free(x);
		return NULL;
	}
	return x;
}

void export_free(struct export *x)
{
	if (!x)
		return;
	intern_free(x->names);
	intern_free(x->keys);
	free(x->frames);
	free(x->s);
	buf_release(&x->key);
	free(x);
}

const char *export_error(const struct export *x)
{
	return x->err;
}

void export_set_streams(struct export *x, uint64_t a, uint64_t b)
{
	x->streams[0] = a;
	x->streams[1] = b;
}

static int fail(struct export *x, const char *msg)
{
	snprintf(x->err, sizeof(x->err), "%s", msg);
	return -1;
}

int export_add(struct export *x, int side, enum export_kind kind, const char *const *names,
	       size_t n, int64_t tid, uint64_t cost_ns, uint64_t events)
{
	uint32_t ids[EXPORT_MAX_DEPTH];
	unsigned char head[2] = { (unsigned char)side, (unsigned char)kind };
	struct xsample *s;
	bool added;
	int64_t k;

	if (n > EXPORT_MAX_DEPTH)
		return fail(x, "a stack of more than 1024 frames");
	for (size_t i = 0; i < n; i++) {
		int64_t id = intern_put(x->names, names[i], strlen(names[i]), NULL);

		if (id < 0)
			return fail(x, "out of memory");
		ids[i] = (uint32_t)id;
	}
	buf_reset(&x->key);
	buf_append(&x->key, head, sizeof(head));
	buf_append(&x->key, &tid, sizeof(tid));
	buf_append(&x->key, ids, n * sizeof(*ids));
	if (buf_error(&x->key))
		return fail(x, "out of memory");
	k = intern_put(x->keys, x->key.data, x->key.len, &added);
	if (k < 0)
		return fail(x, intern_count(x->keys) >= EXPORT_MAX_SAMPLES ? "more than 4,000,000 stacks"
										  : "out of memory");
	if (added) {
		if (vec_reserve(&x->s, &x->cap_s, x->ns + 1, sizeof(*x->s)) < 0 ||
		    vec_reserve(&x->frames, &x->cap_frames, x->nframes + n, sizeof(*x->frames)) < 0)
			return fail(x, "out of memory");
		memcpy(x->frames + x->nframes, ids, n * sizeof(*ids));
		x->s[x->ns++] = (struct xsample){ .off = x->nframes, .n = (uint32_t)n,
						  .side = (uint8_t)side, .kind = (uint8_t)kind, .tid = tid };
		x->nframes += n;
	}
	s = &x->s[k];
	s->cost += cost_ns;
	s->events += events;
	return 0;
}

static const char *name_of(const struct export *x, uint32_t id)
{
	return intern_key(x->names, id, NULL);
}

/* ---- folded ---- */

/* A frame as a collapsed-stack segment: ';' (the separator) becomes ':', line ends spaces. */
static void put_segment(struct buf *b, const char *s)
{
	for (; *s; s++)
		buf_putc(b, *s == ';' ? ':' : (*s == '\n' || *s == '\r') ? ' ' : *s);
}

struct fline {
	char *stack;
	uint64_t v[2];
};

static int cmp_fline(const void *a, const void *b)
{
	return strcmp(((const struct fline *)a)->stack, ((const struct fline *)b)->stack);
}

static int write_folded(struct export *x, struct buf *out)
{
	struct intern *seen = intern_open(0);
	struct fline *lines = NULL;
	size_t nl = 0, cap = 0;
	struct buf st = BUF_INIT(0);
	int rc = -1;

	if (!seen)
		return fail(x, "out of memory");
	/* one line per stack: threads merged; a comparison's sides side by side */
	for (size_t i = 0; i < x->ns; i++) {
		const struct xsample *s = &x->s[i];
		bool added;
		int64_t k;

		buf_reset(&st);
		for (uint32_t j = 0; j < s->n; j++) {
			if (j)
				buf_putc(&st, ';');
			put_segment(&st, name_of(x, x->frames[s->off + j]));
		}
		if (!s->n)
			buf_puts(&st, "[root]");
		if (buf_error(&st) || (k = intern_put(seen, st.data, st.len, &added)) < 0) {
			fail(x, "out of memory");
			goto out_free;
		}
		if (added) {
			if (vec_reserve(&lines, &cap, nl + 1, sizeof(*lines)) < 0 ||
			    !(lines[nl].stack = strndup(st.data, st.len))) {
				fail(x, "out of memory");
				goto out_free;
			}
			lines[nl].v[0] = lines[nl].v[1] = 0;
			nl++;
		}
		lines[k].v[x->comparison ? s->side : 0] += s->cost;
	}
	qsort(lines, nl, sizeof(*lines), cmp_fline);
	for (size_t i = 0; i < nl; i++) {
		if (x->comparison)
			buf_printf(out, "%s %llu %llu\n", lines[i].stack, (unsigned long long)lines[i].v[0],
				   (unsigned long long)lines[i].v[1]);
		else
			buf_printf(out, "%s %llu\n", lines[i].stack, (unsigned long long)lines[i].v[0]);
	}
	rc = buf_error(out) ? fail(x, buf_error_text(out)) : 0;
out_free:
	for (size_t i = 0; i < nl; i++)
		free(lines[i].stack);
	free(lines);
	buf_release(&st);
	intern_free(seen);
	return rc;
}

/* ---- speedscope ---- */

static const char *kind_name(int kind)
{
	return kind == EXPORT_WAIT ? "wait" : "run (CPU)";
}

static int cmp_group(const struct xsample *a, const struct xsample *b)
{
	if (a->side != b->side)
		return a->side < b->side ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return 0;
}

static int cmp_sample_idx(const void *a, const void *b, void *ctx)
{
	const struct xsample *s = ctx;

	return cmp_group(&s[*(const size_t *)a], &s[*(const size_t *)b]);
}

/* The samples' order for speedscope: grouped into one profile per side, thread and kind. */
static size_t *group_order(struct export *x)
{
	size_t *ord = malloc((x->ns ? x->ns : 1) * sizeof(*ord));

	if (!ord)
		return NULL;
	for (size_t i = 0; i < x->ns; i++)
		ord[i] = i;
	qsort_r(ord, x->ns, sizeof(*ord), cmp_sample_idx, x->s);
	return ord;
}

static int write_speedscope(struct export *x, struct buf *out)
{
	struct jsonw w;
	size_t *ord = group_order(x);
	char name[512];

	if (!ord)
		return fail(x, "out of memory");
	jsonw_init_compact(&w, out);
	jsonw_object(&w);
	jsonw_kstr(&w, "$schema", "https://www.speedscope.app/file-format-schema.json");
	jsonw_kstr(&w, "exporter", "stackmine");
	jsonw_kstr(&w, "name", x->title);
	jsonw_ki64(&w, "activeProfileIndex", 0);
	jsonw_kobject(&w, "shared");
	jsonw_karray(&w, "frames");
	for (size_t i = 0, n = intern_count(x->names); i < n; i++) {
		jsonw_object(&w);
		jsonw_kstr(&w, "name", name_of(x, (uint32_t)i));
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	jsonw_karray(&w, "profiles");
	for (size_t a = 0, b; a < x->ns; a = b) {
		const struct xsample *g = &x->s[ord[a]];
		uint64_t total = 0;

		for (b = a; b < x->ns && cmp_group(&x->s[ord[b]], g) == 0; b++)
			total += x->s[ord[b]].cost;
		snprintf(name, sizeof(name), "%s%s%s%s", x->comparison ? (g->side ? "B: " : "A: ") : "",
			 kind_name(g->kind), g->tid >= 0 ? ", thread " : "", "");
		if (g->tid >= 0)
			snprintf(name + strlen(name), sizeof(name) - strlen(name), "%lld", (long long)g->tid);
		jsonw_object(&w);
		jsonw_kstr(&w, "type", "sampled");
		jsonw_kstr(&w, "name", name);
		jsonw_kstr(&w, "unit", "nanoseconds");
		jsonw_ki64(&w, "startValue", 0);
		jsonw_ku64(&w, "endValue", total);
		jsonw_karray(&w, "samples");
		for (size_t i = a; i < b; i++) {
			const struct xsample *s = &x->s[ord[i]];

			jsonw_array(&w);
			for (uint32_t j = 0; j < s->n; j++)
				jsonw_u64(&w, x->frames[s->off + j]);
			jsonw_end(&w);
		}
		jsonw_end(&w);
		jsonw_karray(&w, "weights");
		for (size_t i = a; i < b; i++)
			jsonw_u64(&w, x->s[ord[i]].cost);
		jsonw_end(&w);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	free(ord);
	if (jsonw_finish(&w) < 0)
		return fail(x, buf_error_text(out));
	return 0;
}

/* ---- pprof ---- */

typedef Perftools__Profiles__Profile Profile;

/* Strings of the profile: the fixed ones first, then the frame names from 16 on. */
enum { S_EMPTY, S_SAMPLES, S_COUNT, S_CPU, S_NS, S_OFFCPU, S_A, S_B, S_DIFF, S_THREAD, S_KIND,
       S_RUN, S_WAIT, S_TITLE, S_FIXED = 16 };

/* gzip of in[0..n) appended to out. */
static int gzip_into(struct export *x, const unsigned char *in, size_t n, struct buf *out)
{
	z_stream zs = { 0 };
	unsigned char chunk[65536];
	int zr;

	if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return fail(x, "out of memory");
	zs.next_in = (Bytef *)(uintptr_t)in;
	zs.avail_in = (uInt)n;
	do {
		zs.next_out = chunk;
		zs.avail_out = sizeof(chunk);
		zr = deflate(&zs, Z_FINISH);
		buf_append(out, chunk, sizeof(chunk) - zs.avail_out);
	} while (zr == Z_OK);
	deflateEnd(&zs);
	if (zr != Z_STREAM_END || buf_error(out))
		return fail(x, buf_error(out) ? buf_error_text(out) : "compression failed");
	return 0;
}

/* A comparison's sample: one stack of one kind with both sides' costs. */
struct cmp_sample {
	size_t first;          /* a sample giving the stack */
	uint8_t kind;
	uint64_t cost[2];
};

/* What a pprof profile is built of, freed together (pprof_free()). */
struct pprof {
	Profile p;
	Perftools__Profiles__ValueType vt[3], *vtp[3], period;
	size_t nnames, nsamples;
	char **strs;                                  /* the string table */
	Perftools__Profiles__Function *fn, **fnp;     /* one function, location and line per frame name */
	Perftools__Profiles__Location *loc, **locp;
	Perftools__Profiles__Line *line, **linep;
	Perftools__Profiles__Sample *smp, **smpp;
	Perftools__Profiles__Label *lab, **labp;
	uint64_t *locids;
	int64_t *vals, comment;
	struct cmp_sample *cs;                        /* a comparison's samples, one per stack and kind */
};

static void pprof_free(struct pprof *b)
{
	free(b->locids);
	free(b->vals);
	free(b->labp);
	free(b->lab);
	free(b->smpp);
	free(b->smp);
	free(b->cs);
	free(b->linep);
	free(b->line);
	free(b->locp);
	free(b->loc);
	free(b->fnp);
	free(b->fn);
	free(b->strs);
}

/* The string table, and a function and a location per frame name: the name as it is, no mapping.
 * 0, or -1 when out of memory. */
static int pprof_functions(struct export *x, struct pprof *b)
{
	static const char *const fixed[S_FIXED] = { "", "samples", "count", "cpu", "nanoseconds",
						    "off_cpu", "a", "b", "diff", "thread_id",
						    "kind", "run", "wait", "", "", "" };
	size_t n = b->nnames ? b->nnames : 1;

	b->strs = calloc(S_FIXED + b->nnames, sizeof(*b->strs));
	b->fn = calloc(n, sizeof(*b->fn));
	b->fnp = calloc(n, sizeof(*b->fnp));
	b->loc = calloc(n, sizeof(*b->loc));
	b->locp = calloc(n, sizeof(*b->locp));
	b->line = calloc(n, sizeof(*b->line));
	b->linep = calloc(n, sizeof(*b->linep));
	if (!b->strs || !b->fn || !b->fnp || !b->loc || !b->locp || !b->line || !b->linep)
		return -1;
	for (int i = 0; i < S_FIXED; i++)
		b->strs[i] = (char *)fixed[i];
	b->strs[S_TITLE] = x->title;
	for (size_t i = 0; i < b->nnames; i++) {
		b->strs[S_FIXED + i] = (char *)name_of(x, (uint32_t)i);
		perftools__profiles__function__init(&b->fn[i]);
		b->fn[i].id = i + 1;
		b->fn[i].name = b->fn[i].system_name = (int64_t)(S_FIXED + i);
		b->fnp[i] = &b->fn[i];
		perftools__profiles__line__init(&b->line[i]);
		b->line[i].function_id = i + 1;
		b->linep[i] = &b->line[i];
		perftools__profiles__location__init(&b->loc[i]);
		b->loc[i].id = i + 1;
		b->loc[i].n_line = 1;
		b->loc[i].line = &b->linep[i];
		b->locp[i] = &b->loc[i];
	}
	return 0;
}

/* A comparison: one sample per stack and kind, with A's and B's costs (b->cs, b->nsamples). 0, or -1
 * when out of memory. */
static int pprof_merge(struct export *x, struct pprof *b)
{
	struct intern *k = intern_open(0);
	struct buf key = BUF_INIT(0);
	int rc = -1;

	b->nsamples = 0;
	if (!k || !(b->cs = calloc(x->ns ? x->ns : 1, sizeof(*b->cs))))
		goto out;
	for (size_t i = 0; i < x->ns; i++) {
		const struct xsample *s = &x->s[i];
		bool added;
		int64_t id;

		buf_reset(&key);
		buf_putc(&key, (char)s->kind);
		buf_append(&key, x->frames + s->off, s->n * sizeof(uint32_t));
		if (buf_error(&key) || (id = intern_put(k, key.data, key.len, &added)) < 0)
			goto out;
		if (added)
			b->cs[b->nsamples++] = (struct cmp_sample){ .first = i, .kind = s->kind };
		b->cs[id].cost[s->side] += s->cost;
	}
	rc = 0;
out:
	intern_free(k);
	buf_release(&key);
	return rc;
}

/* The sample types: a comparison's A, B and their difference, else samples, CPU and off-CPU time. */
static void pprof_types(struct export *x, struct pprof *b)
{
	for (int i = 0; i < 3; i++) {
		perftools__profiles__value_type__init(&b->vt[i]);
		b->vt[i].unit = S_NS;
		b->vtp[i] = &b->vt[i];
	}
	perftools__profiles__value_type__init(&b->period);
	b->period.type = S_CPU;
	b->period.unit = S_NS;
	if (x->comparison) {
		b->vt[0].type = S_A, b->vt[1].type = S_B, b->vt[2].type = S_DIFF;
		b->p.default_sample_type = S_DIFF;
	} else {
		b->vt[0].type = S_SAMPLES, b->vt[0].unit = S_COUNT;
		b->vt[1].type = S_CPU;
		b->vt[2].type = S_OFFCPU;
		b->p.default_sample_type = S_CPU;
	}
}

/* Sample i: its locations leaf first, its three values and its label (a comparison's kind, or the
 * thread). */
static void pprof_sample(struct export *x, struct pprof *b, size_t i)
{
	const struct xsample *s = &x->s[x->comparison ? b->cs[i].first : i];
	Perftools__Profiles__Sample *smp = &b->smp[i];
	Perftools__Profiles__Label *lab = &b->lab[i];
	int64_t *v = b->vals + 3 * i;

	perftools__profiles__sample__init(smp);
	for (uint32_t j = 0; j < s->n; j++)
		b->locids[s->off + j] = x->frames[s->off + s->n - 1 - j] + 1;
	smp->n_location_id = s->n;
	smp->location_id = b->locids + s->off;
	smp->n_value = 3;
	smp->value = v;
	perftools__profiles__label__init(lab);
	b->labp[i] = lab;
	if (x->comparison) {
		double scale = x->streams[0] ? (double)x->streams[1] / (double)x->streams[0] : 1;

		v[0] = (int64_t)b->cs[i].cost[0];
		v[1] = (int64_t)b->cs[i].cost[1];
		v[2] = v[1] - (int64_t)((double)v[0] * scale + 0.5);
		lab->key = S_KIND;
		lab->str = b->cs[i].kind == EXPORT_WAIT ? S_WAIT : S_RUN;
		smp->n_label = 1;
		smp->label = &b->labp[i];
	} else {
		v[0] = (int64_t)s->events;
		v[1] = s->kind == EXPORT_RUN ? (int64_t)s->cost : 0;
		v[2] = s->kind == EXPORT_WAIT ? (int64_t)s->cost : 0;
		if (s->tid >= 0) {
			lab->key = S_THREAD;
			lab->num = s->tid;
			smp->n_label = 1;
			smp->label = &b->labp[i];
		}
	}
	b->smpp[i] = smp;
}

/* Every sample. 0, or -1 when out of memory. */
static int pprof_samples(struct export *x, struct pprof *b)
{
	size_t n = b->nsamples ? b->nsamples : 1;

	b->smp = calloc(n, sizeof(*b->smp));
	b->smpp = calloc(n, sizeof(*b->smpp));
	b->lab = calloc(n, sizeof(*b->lab));
	b->labp = calloc(n, sizeof(*b->labp));
	b->vals = calloc(3 * n, sizeof(*b->vals));
	b->locids = calloc(x->nframes ? x->nframes : 1, sizeof(*b->locids));
	if (!b->smp || !b->smpp || !b->lab || !b->labp || !b->vals || !b->locids)
		return -1;
	for (size_t i = 0; i < b->nsamples; i++)
		pprof_sample(x, b, i);
	return 0;
}

/* The profile of b packed and gzipped into out. */
static int pprof_pack(struct export *x, struct pprof *b, struct buf *out)
{
	Profile *p = &b->p;
	unsigned char *packed;
	size_t plen;
	int rc;

	p->n_sample_type = 3;
	p->sample_type = b->vtp;
	p->n_sample = b->nsamples;
	p->sample = b->smpp;
	p->n_location = b->nnames;
	p->location = b->locp;
	p->n_function = b->nnames;
	p->function = b->fnp;
	p->n_string_table = S_FIXED + b->nnames;
	p->string_table = b->strs;
	p->period_type = &b->period;
	p->n_comment = 1;
	p->comment = &b->comment;
	plen = perftools__profiles__profile__get_packed_size(p);
	if (!(packed = malloc(plen ? plen : 1)))
		return fail(x, "out of memory");
	perftools__profiles__profile__pack(p, packed);
	rc = gzip_into(x, packed, plen, out);
	free(packed);
	return rc;
}

static int write_pprof(struct export *x, struct buf *out)
{
	struct pprof b = { .p = PERFTOOLS__PROFILES__PROFILE__INIT, .nnames = intern_count(x->names),
			   .comment = S_TITLE };
	int rc = -1;

	b.nsamples = x->ns;
	pprof_types(x, &b);
	if (pprof_functions(x, &b) < 0 || (x->comparison && pprof_merge(x, &b) < 0) ||
	    pprof_samples(x, &b) < 0)
		fail(x, "out of memory");
	else
		rc = pprof_pack(x, &b, out);
	pprof_free(&b);
	return rc;
}

int export_write(struct export *x, enum export_format f, struct buf *out)
{
	x->err[0] = '\0';
	switch (f) {
	case EXPORT_PPROF:
		return write_pprof(x, out);
	case EXPORT_SPEEDSCOPE:
		return write_speedscope(x, out);
	case EXPORT_FOLDED:
		return write_folded(x, out);
	}
	return fail(x, "unknown format");
}

#define EXPORT_MAX_BYTES ((size_t)512 << 20)
#define EXPORT_MAX_STREAM_EVENTS 1000000   /* the wire format's limit */

static const char *const profile_params[] = { "format", "kind", NULL };

/* ?format= and ?kind=: false after a 400. kinds: bit 1 run, bit 2 wait. */
static bool profile_query(struct req *rq, enum export_format *f, unsigned *kinds)
{
	const char *k = req_query(rq, "kind");

	if (!api_known_query(rq, profile_params, false))
		return false;
	if (export_format_parse(req_query(rq, "format"), f) < 0) {
		req_json_error(rq, 400, "format: must be pprof, speedscope or folded");
		return false;
	}
	if (!k)
		*kinds = 3;
	else if (strcmp(k, "run") == 0)
		*kinds = 1;
	else if (strcmp(k, "wait") == 0)
		*kinds = 2;
	else {
		req_json_error(rq, 400, "kind: must be run or wait");
		return false;
	}
	return true;
}

/* Rows of (frame_ids, cost_ns, events) into side of x, kind given or ('r'/'w') in column kcol. */
static int export_rows(struct req *rq, struct export *x, int side, PGresult *r, int kcol, unsigned kinds,
		       char kind, char *err, size_t errlen)
{
	int ccol = PQfnumber(r, "cost_ns"), ecol = PQfnumber(r, "events");
	struct req_names names;

	if (req_frame_names_rows(rq, r, PQfnumber(r, "frame_ids"), &names) < 0) {
		snprintf(err, errlen, "the frame names could not be read");
		return -1;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		char k = kcol >= 0 ? PQgetvalue(r, i, kcol)[0] : kind;

		if (!(kinds & (k == 'w' ? 2u : 1u)))
			continue;
		if (req_should_stop(rq)) {
			/* the server answers 503 for it */
			snprintf(err, errlen, "stopped: out of time");
			return -1;
		}
		if (!names.row[i]) {
			snprintf(err, errlen, "a stack's frames could not be read");
			return -1;
		}
		if (export_add(x, side, k == 'w' ? EXPORT_WAIT : EXPORT_RUN, names.row[i], names.n[i], -1,
			       strtoull(PQgetvalue(r, i, ccol), NULL, 10),
			       ecol >= 0 ? strtoull(PQgetvalue(r, i, ecol), NULL, 10) : 0) < 0) {
			snprintf(err, errlen, "%s", export_error(x));
			return -1;
		}
	}
	return 0;
}

/* export_open(), or NULL after a 500. */
static struct export *open_or_fail(struct req *rq, const char *title, bool comparison)
{
	struct export *x = export_open(title, comparison);

	if (!x)
		req_json_error(rq, 500, "out of memory");
	return x;
}

/* export_rows() of a run's profile rows (model_run_profile(): a "kind" column): false after a 500. */
static bool add_run_rows(struct req *rq, struct export *x, int side, PGresult *r, unsigned kinds)
{
	char err[512];

	if (export_rows(rq, x, side, r, PQfnumber(r, "kind"), kinds, 'r', err, sizeof(err)) < 0) {
		req_json_error(rq, 500, "the profile could not be built: %s", err);
		return false;
	}
	return true;
}

/* Writes x as the response, a download named name + the format's suffix. */
static void send_export(struct req *rq, struct export *x, enum export_format f, const char *name)
{
	rq->out.max = EXPORT_MAX_BYTES;
	if (export_write(x, f, &rq->out) < 0) {
		rq->out.max = 0;
		buf_reset(&rq->out);
		req_json_error(rq, 500, "the profile could not be built: %s", export_error(x));
		return;
	}
	req_add_header(rq, "Content-Disposition",
		       req_printf(rq, "attachment; filename=\"%s%s\"", name, export_suffix(f)));
	rq->status = 200;
	rq->ctype = export_media(f);
}

void export_get_cluster_profile(struct req *rq)
{
	const char *id = rq->arg;
	enum export_format f;
	unsigned kinds;
	PGresult *c, *st = NULL, *fr = NULL;
	struct export *x = NULL;
	struct req_names names;
	bool wanted;
	char err[512];

	if (!profile_query(rq, &f, &kinds) || !(c = api_need_cluster(rq, id)))
		return;
	st = model_cluster_stacks(rq->db, id, err, sizeof(err));
	if (api_failed(rq, st, err))
		goto out;
	fr = model_stacks(rq->db, req_id_array(rq, st, 0), err, sizeof(err));
	if (api_failed(rq, fr, err))
		goto out;
	if (!(x = open_or_fail(rq, req_printf(rq, "stackmine cluster %s of run %s", id, model_col(c, 0, "run_id")),
			       false)))
		goto out;
	/* (the cluster's kind not asked for: an empty profile, no names to read) */
	wanted = kinds & (model_col(c, 0, "kind")[0] == 'w' ? 2u : 1u);
	if (wanted && req_frame_names_rows(rq, fr, PQfnumber(fr, "frame_ids"), &names) < 0) {
		req_json_error(rq, 500, "the profile could not be built: the frame names could not be read");
		goto out;
	}
	for (int i = 0; wanted && i < PQntuples(st); i++) {
		int j = model_find_stack(fr, model_coln(st, i, "stack_id"));

		if (j < 0)
			continue;
		if (req_should_stop(rq) || !names.row[j] ||
		    export_add(x, 0, model_col(c, 0, "kind")[0] == 'w' ? EXPORT_WAIT : EXPORT_RUN, names.row[j], names.n[j], -1,
			       (uint64_t)model_coln(st, i, "cost_ns"), (uint64_t)model_coln(st, i, "events")) < 0) {
			req_json_error(rq, 500, "the profile could not be built: %s", export_error(x));
			goto out;
		}
	}
	send_export(rq, x, f, req_printf(rq, "cluster-%s", id));
out:
	export_free(x);
	PQclear(c);
	PQclear(st);
	PQclear(fr);
}

void export_get_run_profile(struct req *rq)
{
	const char *id = rq->arg;
	enum export_format f;
	unsigned kinds;
	PGresult *run, *r = NULL;
	struct export *x = NULL;
	char err[512];

	if (!profile_query(rq, &f, &kinds) || !(run = api_need_run(rq, id)))
		return;
	r = model_run_profile(rq->db, id, err, sizeof(err));
	if (api_failed(rq, r, err))
		goto out;
	if (!(x = open_or_fail(rq, req_printf(rq, "stackmine run %s", id), false)) || !add_run_rows(rq, x, 0, r, kinds))
		goto out;
	send_export(rq, x, f, req_printf(rq, "run-%s", id));
out:
	export_free(x);
	PQclear(run);
	PQclear(r);
}

void export_get_compare_profile(struct req *rq)
{
	const char *arg = rq->arg;
	enum export_format f;
	unsigned kinds;
	char a[24], err[512];
	PGresult *ra = NULL, *rb = NULL;
	struct export *x = NULL;

	if (!profile_query(rq, &f, &kinds))
		return;
	snprintf(a, sizeof(a), "%lld", strtoll(rq->path + strlen("/api/v1/runs/"), NULL, 10));
	if (!(ra = api_need_run(rq, a)) || !(rb = api_need_run(rq, arg)))
		goto out;
	if (!(x = open_or_fail(rq, req_printf(rq, "stackmine runs %s (A) and %s (B)", a, arg), true)))
		goto out;
	export_set_streams(x, (uint64_t)(model_run_count(ra, "streams") > 0 ? model_run_count(ra, "streams") : 0),
			   (uint64_t)(model_run_count(rb, "streams") > 0 ? model_run_count(rb, "streams") : 0));
	for (int side = 0; side < 2; side++) {
		PGresult *r = model_run_profile(rq->db, side ? arg : a, err, sizeof(err));
		bool ok;

		if (api_failed(rq, r, err))
			goto out;
		ok = add_run_rows(rq, x, side, r, kinds);
		PQclear(r);
		if (!ok)
			goto out;
	}
	send_export(rq, x, f, req_printf(rq, "compare-%s-%s", a, arg));
out:
	export_free(x);
	PQclear(ra);
	PQclear(rb);
}

void export_get_stream_profile(struct req *rq)
{
	const char *uuid = rq->arg;
	enum export_format f;
	unsigned kinds;
	char canon[37], err[512];
	PGresult *st = NULL, *fr = NULL;
	struct model_events *ev = NULL;
	struct export *x = NULL;

	if (!profile_query(rq, &f, &kinds) || !(st = streams_need_stream(rq, uuid, canon)))
		return;
	ev = model_stream_events(rq->db, PQgetvalue(st, 0, 0), EXPORT_MAX_STREAM_EVENTS, err, sizeof(err));
	if (!ev) {
		api_failed(rq, NULL, err);
		goto out;
	}
	fr = model_stacks_of(rq->db, ev->stacks, ev->nstacks, err, sizeof(err));
	if (api_failed(rq, fr, err))
		goto out;
	if (!(x = open_or_fail(rq, req_printf(rq, "stackmine stream %s", canon), false)))
		goto out;
	{
		/* each event's stack's row of fr, found once per stack */
		struct req_names names;
		int *row = arena_alloc(rq->a, (ev->nstacks + 1) * sizeof(*row));

		if (!row || req_frame_names_rows(rq, fr, PQfnumber(fr, "frame_ids"), &names) < 0) {
			req_json_error(rq, 500, "the profile could not be built: the frame names could not be read");
			goto out;
		}
		model_stack_rows(fr, ev->stacks, ev->nstacks, row);
		for (size_t i = 0; i < ev->n; i++) {
			const struct evpack_event *e = &ev->ev[i];
			int lo = row[ev->at[i]];

			if (!(kinds & (e->kind == 'w' ? 2u : 1u)) || lo < 0)
				continue;
			if (!names.row[lo] ||
			    export_add(x, 0, e->kind == 'w' ? EXPORT_WAIT : EXPORT_RUN, names.row[lo], names.n[lo], e->tid,
				       (uint64_t)e->dur_ns, 1) < 0) {
				req_json_error(rq, 500, "the profile could not be built: %s", export_error(x));
				goto out;
			}
		}
	}
	send_export(rq, x, f, req_printf(rq, "stream-%s", canon));
out:
	export_free(x);
	PQclear(st);
	PQclear(fr);
	model_events_free(ev);
}
