/*
 * sim: pattern similarity (see sim.h and docs/clustering.md).
 *
 * The frame table keeps, per registered frame, its word set as a sorted array
 * of word ids (words interned once), so that sub(f, g) is a merge of two short
 * arrays; each workspace caches the sub values it computed. The alignment is
 * the textbook edit-distance table with the chosen operation of every cell
 * kept beside its cost, read back from the last cell.
 */
#include "clusterer/sim.h"
#include "common/hash.h"
#include "common/imap.h"
#include "common/par.h"
#include "common/vec.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/arena.h"
#include "common/intern.h"

#define MAX_FRAMES (1u << 26)
#define MAX_NAME (64 * 1024)
/* costs closer than this are ties */
#define TIE_EPS 1e-9
/* sub values cached per workspace: 2^CACHE_BITS slots, direct-mapped */
#define CACHE_BITS 15
/* a word is a function word or the module word: the first key byte keeps them apart */
#define KEY_FUNC 'f'
#define KEY_MODULE 'm'

/* ---- words ---- */

static inline bool is_lower(unsigned char c)
{
	return c >= 'a' && c <= 'z';
}

static inline bool is_upper(unsigned char c)
{
	return c >= 'A' && c <= 'Z';
}

static inline bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static inline bool is_sep(unsigned char c)
{
	return c == '_' || c == ':' || c == '.' || c == '<' || c == '>' || c == ',' || c == ' ';
}

static inline unsigned char lower(unsigned char c)
{
	return is_upper(c) ? (unsigned char)(c - 'A' + 'a') : c;
}

/* Called with each word (lower-cased, in scratch), duplicates included; the module word last. */
typedef int (*word_fn)(void *ctx, const char *w, size_t len, bool module);

/* Splits f[0..len) into words. scratch has room for len bytes. Returns 0, or what emit returned. */
static int split_words(const char *f, size_t len, char *scratch, word_fn emit, void *ctx)
{
	const unsigned char *s = (const unsigned char *)f;
	const unsigned char *bang = memchr(s, '!', len);
	size_t i, start = bang ? (size_t)(bang - s) + 1 : 0, n = 0;
	int rc;

	for (i = start; i < len; i++) {
		unsigned char c = s[i];

		if (is_sep(c) || (is_upper(c) && i > start && (is_lower(s[i - 1]) || is_digit(s[i - 1])))) {
			if (n && (rc = emit(ctx, scratch, n, false)) != 0)
				return rc;
			n = 0;
			if (is_sep(c))
				continue;
		}
		scratch[n++] = (char)lower(c);
	}
	if (n && (rc = emit(ctx, scratch, n, false)) != 0)
		return rc;
	if (bang && bang > s) {
		for (i = 0; i < (size_t)(bang - s); i++)
			scratch[i] = (char)lower(s[i]);
		return emit(ctx, scratch, (size_t)(bang - s), true);
	}
	return 0;
}

struct words_out {
	char *out;
	size_t size, len;
	int n;
	bool full;
};

/* true when the words already written hold w */
static bool words_has(const struct words_out *o, const char *w, size_t len)
{
	size_t i = 0;

	while (i < o->len) {
		size_t e = i;

		while (e < o->len && o->out[e] != ' ')
			e++;
		if (e - i == len && memcmp(o->out + i, w, len) == 0)
			return true;
		i = e + 1;
	}
	return false;
}

static int words_emit(void *ctx, const char *w, size_t len, bool module)
{
	struct words_out *o = ctx;
	size_t need = len + (module ? 1 : 0) + (o->len ? 1 : 0);

	if (!module && words_has(o, w, len))
		return 0;
	if (o->len + need + 1 > o->size) {
		o->full = true;
		return 1;
	}
	if (o->len)
		o->out[o->len++] = ' ';
	memcpy(o->out + o->len, w, len);
	o->len += len;
	if (module)
		o->out[o->len++] = '!';
	o->out[o->len] = '\0';
	o->n++;
	return 0;
}

int sim_words(const char *f, size_t len, char *out, size_t outsz)
{
	struct words_out o = { out, outsz, 0, 0, false };
	char *scratch;

	if (!outsz)
		return -1;
	out[0] = '\0';
	scratch = malloc(len ? len : 1);
	if (!scratch)
		return -1;
	split_words(f, len, scratch, words_emit, &o);
	free(scratch);
	return o.full ? -1 : o.n;
}

/* ---- the frame table ---- */

/*
 * A summary of a word set that settles most sub() values without comparing
 * sets: one bit per function word (by a hash of its id), the module word and
 * the number of words. Disjoint bits mean no function word in common, so the
 * sets share at most the module word.
 */
struct fsig {
	uint64_t bits;
	uint32_t module;        /* word id, or UINT32_MAX when the frame has no module part */
	uint32_t n;
};

struct sim_frames {
	struct imap idx;      /* frame id -> dense index */
	const char **names;     /* dense index -> name (in the arena) */
	uint32_t *name_len;
	uint32_t *woff;         /* nframes + 1 offsets into words */
	uint32_t *words;        /* each frame's word ids, ascending, distinct */
	size_t nframes, cap_names, cap_name_len, cap_woff, cap_sig, nwords, cap_words;
	struct intern *wmap;    /* key byte + word -> word id */
	struct arena *arena;
	char *scratch;          /* MAX_NAME + 1 bytes */
	double *floor;          /* dense index -> lower bound of sub against the others */
	struct fsig *sig;       /* dense index -> summary of the word set */
	bool prepared;
	uint64_t n_streams;
	struct imap counts;   /* f -> n(f) */
	struct imap calls;    /* g << 32 | f -> n(g->f) */
	char err[256];
};

static void ft_error(struct sim_frames *ft, const char *msg, uint32_t id)
{
	snprintf(ft->err, sizeof(ft->err), msg, (unsigned)id);
}

struct sim_frames *sim_frames_open(void)
{
	struct sim_frames *ft = calloc(1, sizeof(*ft));

	if (!ft)
		return NULL;
	ft->wmap = intern_open(0);
	ft->arena = arena_open(0);
	ft->scratch = malloc(MAX_NAME + 2);
	if (!ft->wmap || !ft->arena || !ft->scratch || vec_reserve(&ft->woff, &ft->cap_woff, 1, sizeof(*ft->woff)) < 0) {
		sim_frames_free(ft);
		return NULL;
	}
	ft->woff[0] = 0;
	return ft;
}

void sim_frames_free(struct sim_frames *ft)
{
	if (!ft)
		return;
	imap_free(&ft->idx);
	imap_free(&ft->counts);
	imap_free(&ft->calls);
	free(ft->names);
	free(ft->name_len);
	free(ft->woff);
	free(ft->words);
	free(ft->floor);
	free(ft->sig);
	free(ft->scratch);
	intern_free(ft->wmap);
	arena_free(ft->arena);
	free(ft);
}

const char *sim_frames_error(const struct sim_frames *ft)
{
	return ft->err;
}

size_t sim_frames_count(const struct sim_frames *ft)
{
	return ft->nframes;
}

const char *sim_frames_name(const struct sim_frames *ft, uint32_t f, size_t *len)
{
	uint64_t v;

	if (!imap_get(&ft->idx, f, &v)) {
		*len = 0;
		return NULL;
	}
	*len = ft->name_len[v];
	return ft->names[v];
}

int64_t sim_frames_index(const struct sim_frames *ft, uint32_t f)
{
	uint64_t v;

	return imap_get(&ft->idx, f, &v) ? (int64_t)v : -1;
}

/* Collects the word ids of one frame at the end of ft->words. */
struct add_ctx {
	struct sim_frames *ft;
	size_t first;
	struct fsig sig;
};

static int add_word(void *ctx, const char *w, size_t len, bool module)
{
	struct add_ctx *a = ctx;
	struct sim_frames *ft = a->ft;
	char key[256], *k = key;
	int64_t id;

	/* the interned key is a kind byte, then the word */
	if (len + 1 > sizeof(key)) {
		k = malloc(len + 1);
		if (!k)
			return -1;
	}
	k[0] = module ? KEY_MODULE : KEY_FUNC;
	memcpy(k + 1, w, len);
	id = intern_put(ft->wmap, k, len + 1, NULL);
	if (k != key)
		free(k);
	if (id < 0 || id >= UINT32_MAX || ft->nwords >= UINT32_MAX - 1)
		return -1;
	if (module)
		a->sig.module = (uint32_t)id;
	else
		a->sig.bits |= (uint64_t)1 << (hash_mix64((uint64_t)id) & 63);
	if (vec_reserve(&ft->words, &ft->cap_words, ft->nwords + 1, sizeof(*ft->words)) < 0)
		return -1;
	ft->words[ft->nwords++] = (uint32_t)id;
	return 0;
}

/* Room for frame d in the arrays indexed by frame (woff has one more). Returns 0 or -1. */
static int frames_reserve(struct sim_frames *ft, size_t d)
{
	return vec_reserve(&ft->names, &ft->cap_names, d + 1, sizeof(*ft->names)) < 0 ||
	       vec_reserve(&ft->name_len, &ft->cap_name_len, d + 1, sizeof(*ft->name_len)) < 0 ||
	       vec_reserve(&ft->woff, &ft->cap_woff, d + 2, sizeof(*ft->woff)) < 0 ||
	       vec_reserve(&ft->sig, &ft->cap_sig, d + 1, sizeof(*ft->sig)) < 0 ? -1 : 0;
}

int sim_frames_add(struct sim_frames *ft, uint32_t id, const char *name, size_t len)
{
	struct add_ctx a = { ft, ft->nwords, { 0, UINT32_MAX, 0 } };
	uint64_t v;
	size_t d = ft->nframes;
	char *copy;

	ft->err[0] = '\0';
	if (id == UINT32_MAX) {
		ft_error(ft, "frame id %u is out of range", id);
		return -1;
	}
	if (imap_get(&ft->idx, id, &v)) {
		if (ft->name_len[v] == len && memcmp(ft->names[v], name, len) == 0)
			return 0;
		ft_error(ft, "frame id %u registered twice with different names", id);
		return -1;
	}
	if (len > MAX_NAME) {
		ft_error(ft, "frame %u: name longer than 65536 bytes", id);
		return -1;
	}
	if (d >= MAX_FRAMES) {
		ft_error(ft, "more than %u frames", MAX_FRAMES);
		return -1;
	}
	if (frames_reserve(ft, d) < 0)
		goto oom;
	copy = arena_strndup(ft->arena, name, len);
	if (!copy)
		goto oom;
	if (split_words(name, len, ft->scratch, add_word, &a) != 0) {
		ft->nwords = a.first;
		goto oom;
	}
	/* a set: sorted, each word once */
	vec_sort_u32(ft->words + a.first, ft->nwords - a.first);
	{
		size_t r, wr = a.first;

		for (r = a.first; r < ft->nwords; r++)
			if (r == a.first || ft->words[r] != ft->words[wr - 1])
				ft->words[wr++] = ft->words[r];
		ft->nwords = wr;
	}
	if (imap_put(&ft->idx, id, d) < 0) {
		ft->nwords = a.first;
		goto oom;
	}
	ft->names[d] = copy;
	ft->name_len[d] = (uint32_t)len;
	ft->woff[d + 1] = (uint32_t)ft->nwords;
	a.sig.n = (uint32_t)(ft->nwords - a.first);
	ft->sig[d] = a.sig;
	ft->nframes++;
	ft->prepared = false;
	return 0;
oom:
	snprintf(ft->err, sizeof(ft->err), "out of memory");
	return -1;
}

void sim_frames_set_streams(struct sim_frames *ft, uint64_t n)
{
	ft->n_streams = n;
}

int sim_frames_set_count(struct sim_frames *ft, uint32_t f, uint64_t n)
{
	if (imap_put(&ft->counts, f, n) < 0) {
		snprintf(ft->err, sizeof(ft->err), "out of memory");
		return -1;
	}
	return 0;
}

int sim_frames_set_calls(struct sim_frames *ft, uint32_t g, uint32_t f, uint64_t n)
{
	uint64_t key = (uint64_t)g << 32 | f;

	if (key == IMAP_EMPTY) {
		ft_error(ft, "frame id %u is out of range", g);
		return -1;
	}
	if (imap_put(&ft->calls, key, n) < 0) {
		snprintf(ft->err, sizeof(ft->err), "out of memory");
		return -1;
	}
	return 0;
}

/* |A & B| of two ascending arrays */
static inline uint32_t common_words(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb)
{
	uint32_t i = 0, j = 0, c = 0;

	while (i < na && j < nb) {
		if (a[i] < b[j]) {
			i++;
		} else if (a[i] > b[j]) {
			j++;
		} else {
			c++;
			i++;
			j++;
		}
	}
	return c;
}

/* sub() of two dense indexes */
static double sub_dense(const struct sim_frames *ft, uint32_t f, uint32_t g)
{
	uint32_t na, nb, inter, uni;

	if (f == g)
		return 0;
	na = ft->woff[f + 1] - ft->woff[f];
	nb = ft->woff[g + 1] - ft->woff[g];
	inter = common_words(ft->words + ft->woff[f], na, ft->words + ft->woff[g], nb);
	uni = na + nb - inter;
	if (uni == 0)
		return 1;
	return 1.0 - (double)inter / (double)uni;
}

double sim_sub(const struct sim_frames *ft, uint32_t f, uint32_t g)
{
	uint64_t a, b;

	if (!imap_get(&ft->idx, f, &a) || !imap_get(&ft->idx, g, &b))
		return -1;
	return sub_dense(ft, (uint32_t)a, (uint32_t)b);
}

static uint64_t count_of(const struct sim_frames *ft, uint32_t f)
{
	uint64_t v;

	return imap_get(&ft->counts, f, &v) ? v : 0;
}

uint64_t sim_frames_streams_of(const struct sim_frames *ft, uint32_t f)
{
	return count_of(ft, f);
}

static uint64_t calls_of(const struct sim_frames *ft, uint32_t g, uint32_t f)
{
	uint64_t v;

	return imap_get(&ft->calls, (uint64_t)g << 32 | f, &v) ? v : 0;
}

/* ln((a+1)/(b+1)) + 1 with b clamped to a */
static double idf(uint64_t a, uint64_t b)
{
	if (b > a)
		b = a;
	return log(((double)a + 1.0) / ((double)b + 1.0)) + 1.0;
}

void sim_weights(const struct sim_frames *ft, const uint32_t *frames, size_t len, double *w)
{
	size_t i;

	for (i = 0; i < len; i++) {
		double u = idf(ft->n_streams, count_of(ft, frames[i])), bf = 1, bb = 1;

		if (i > 0)
			bf = idf(count_of(ft, frames[i - 1]), calls_of(ft, frames[i - 1], frames[i]));
		if (i + 1 < len)
			bb = idf(count_of(ft, frames[i + 1]), calls_of(ft, frames[i], frames[i + 1]));
		w[i] = u * bf * bb;
	}
}

/* The floors of a range of frames, for sim_frames_prepare(); one per thread. */
struct floor_job {
	const struct sim_frames *ft;
	const uint32_t *byrank;         /* each frame's words, rarest first */
	const uint32_t *woff, *wlist;   /* word -> frames holding it */
	double *fl;
	atomic_size_t next;
	atomic_int failed;
};

#define FLOOR_CHUNK 256

static void *floor_worker(void *arg)
{
	struct floor_job *jb = arg;
	const struct sim_frames *ft = jb->ft;
	size_t F = ft->nframes, i0, i;
	struct fstate {
		uint32_t seen, cnt;     /* the last frame that met this one, and how many of its words */
	} *st = vec_alloc(F, sizeof(*st));
	uint32_t *cand = vec_alloc(F, sizeof(*cand));

	if (!st || !cand) {
		atomic_store(&jb->failed, 1);
		goto out;
	}
	for (i = 0; i < F; i++)
		st[i].seen = UINT32_MAX;
	while ((i0 = atomic_fetch_add(&jb->next, FLOOR_CHUNK)) < F) {
		for (i = i0; i < F && i < i0 + FLOOR_CHUNK; i++) {
			uint32_t a = ft->woff[i], n = ft->woff[i + 1] - a, k, p = n ? n - (n + 1) / 2 + 1 : 0, nc = 0, c;
			double best = 0.5;

			for (k = 0; k < p; k++) {
				uint32_t w = jb->byrank[a + k], e;

				for (e = jb->woff[w]; e < jb->woff[w + 1]; e++) {
					uint32_t g = jb->wlist[e];

					if (g == i)
						continue;
					if (st[g].seen != i) {
						st[g].seen = (uint32_t)i;
						st[g].cnt = 0;
						cand[nc++] = g;
					}
					st[g].cnt++;
				}
			}
			for (c = 0; c < nc; c++) {
				uint32_t g = cand[c], nb = ft->woff[g + 1] - ft->woff[g];
				double s;

				/* shared words: cnt among f's first p, at most n - p after them */
				if (3 * (st[g].cnt + n - p) < n + nb)
					continue;
				s = sub_dense(ft, (uint32_t)i, g);
				if (s < best)
					best = s;
			}
			jb->fl[i] = best;
		}
	}
out:
	free(st);
	free(cand);
	return NULL;
}

static void run_floor_worker(void *ctx, int w)
{
	(void)w;
	floor_worker(ctx);
}

/*
 * The floor of sub(f, .) for every frame. sub(f, g) <= 1/2 means Jaccard
 * >= 1/2, that is |A & B| >= (|A| + |B|) / 3 shared words. With words ranked
 * rarest first, such a g must contain one of the first p = |A| - ceil(|A|/2)
 * + 1 words of f (prefix filtering: at most |A| - p of its shared words can
 * lie after them), and counting, for each g met through those words' lists,
 * how many of them it holds bounds |A & B| from above without comparing the
 * sets: only the g that can still reach the threshold are compared. Frames
 * not found are further than 1/2.
 */
int sim_frames_prepare(struct sim_frames *ft, int threads)
{
	size_t nw = intern_count(ft->wmap), F = ft->nframes, i;
	uint32_t *df = NULL, *rank = NULL, *byrank = NULL, *woff = NULL, *wlist = NULL;
	struct floor_job jb;
	double *fl = NULL;
	int rc = -1;

	if (ft->prepared)
		return 0;
	threads = par_threads(threads > SIM_MAX_THREADS ? SIM_MAX_THREADS : threads);
	df = vec_calloc(nw, sizeof(*df));
	rank = vec_alloc(nw, sizeof(*rank));
	byrank = vec_alloc(ft->nwords, sizeof(*byrank));
	woff = vec_calloc(nw + 1, sizeof(*woff));
	wlist = vec_alloc(ft->nwords, sizeof(*wlist));
	fl = vec_alloc(F, sizeof(*fl));
	if (!df || !rank || !byrank || !woff || !wlist || !fl)
		goto done;
	for (i = 0; i < ft->nwords; i++)
		df[ft->words[i]]++;
	/* rank words by (frequency, id): a counting sort on the frequency */
	{
		uint32_t maxdf = 0, *c;
		size_t w;

		for (w = 0; w < nw; w++)
			if (df[w] > maxdf)
				maxdf = df[w];
		c = vec_calloc((size_t)maxdf + 2, sizeof(*c));
		if (!c)
			goto done;
		for (w = 0; w < nw; w++)
			c[df[w] + 1]++;
		for (w = 1; w <= maxdf + 1; w++)
			c[w] += c[w - 1];
		for (w = 0; w < nw; w++)
			rank[w] = c[df[w]]++;
		free(c);
	}
	/* the index word -> frames holding it (ascending) */
	for (i = 0; i < ft->nwords; i++)
		woff[ft->words[i] + 1]++;
	for (i = 1; i <= nw; i++)
		woff[i] += woff[i - 1];
	{
		uint32_t *fill = vec_alloc(nw, sizeof(*fill));
		uint32_t *word_of_rank = vec_alloc(nw, sizeof(*word_of_rank));

		if (!fill || !word_of_rank) {
			free(fill);
			free(word_of_rank);
			goto done;
		}
		memcpy(fill, woff, nw * sizeof(*fill));
		for (i = 0; i < F; i++) {
			uint32_t e;

			for (e = ft->woff[i]; e < ft->woff[i + 1]; e++)
				wlist[fill[ft->words[e]]++] = (uint32_t)i;
		}
		/* each frame's words rarest first: sort their ranks, then back to word ids */
		for (i = 0; i < nw; i++)
			word_of_rank[rank[i]] = (uint32_t)i;
		for (i = 0; i < F; i++) {
			uint32_t a = ft->woff[i], n = ft->woff[i + 1] - a, k;

			for (k = 0; k < n; k++)
				byrank[a + k] = rank[ft->words[a + k]];
			vec_sort_u32(byrank + a, n);
			for (k = 0; k < n; k++)
				byrank[a + k] = word_of_rank[byrank[a + k]];
		}
		free(fill);
		free(word_of_rank);
	}
	jb.ft = ft;
	jb.byrank = byrank;
	jb.woff = woff;
	jb.wlist = wlist;
	jb.fl = fl;
	atomic_init(&jb.next, 0);
	atomic_init(&jb.failed, 0);
	par_run(threads, run_floor_worker, &jb);
	if (atomic_load(&jb.failed))
		goto done;
	free(ft->floor);
	ft->floor = fl;
	fl = NULL;
	ft->prepared = true;
	rc = 0;
done:
	if (rc < 0)
		snprintf(ft->err, sizeof(ft->err), "out of memory");
	free(df);
	free(rank);
	free(byrank);
	free(woff);
	free(wlist);
	free(fl);
	return rc;
}

double sim_frames_sub_floor(const struct sim_frames *ft, uint32_t f)
{
	uint64_t d;

	if (!ft->prepared || !imap_get(&ft->idx, f, &d))
		return -1;
	return ft->floor[d];
}

/* ---- alignment ---- */

struct cslot {
	uint64_t key;
	double val;
};

struct sim_ctx {
	const struct sim_frames *ft;
	uint32_t *xa, *xb;              /* dense indexes of the two patterns, SIM_MAX_LEN each */
	struct fsig *yb;                /* signatures of xb */
	double *cost;                   /* (m + 1) x (n + 1) */
	size_t cap_cells;
	struct sim_step *steps;         /* 2 * SIM_MAX_LEN */
	struct sim_segment *segs;       /* 2 * SIM_MAX_LEN */
	uint32_t *hits;                 /* SIM_MAX_LEN, for the common part */
	double *sums;                   /* medoid sums */
	size_t cap_sums;
	struct cslot *cache;
	struct sim_alignment al;
	char err[256];
};

struct sim_ctx *sim_ctx_open(const struct sim_frames *ft)
{
	struct sim_ctx *c = calloc(1, sizeof(*c));
	size_t i;

	if (!c)
		return NULL;
	c->ft = ft;
	c->xa = vec_alloc(SIM_MAX_LEN, sizeof(*c->xa));
	c->xb = vec_alloc(SIM_MAX_LEN, sizeof(*c->xb));
	c->yb = vec_alloc(SIM_MAX_LEN, sizeof(*c->yb));
	c->steps = vec_alloc(2 * SIM_MAX_LEN, sizeof(*c->steps));
	c->segs = vec_alloc(2 * SIM_MAX_LEN, sizeof(*c->segs));
	c->hits = vec_alloc(SIM_MAX_LEN, sizeof(*c->hits));
	c->cache = vec_alloc((size_t)1 << CACHE_BITS, sizeof(*c->cache));
	if (!c->xa || !c->xb || !c->yb || !c->steps || !c->segs || !c->hits || !c->cache) {
		sim_ctx_free(c);
		return NULL;
	}
	for (i = 0; i < (size_t)1 << CACHE_BITS; i++)
		c->cache[i].key = IMAP_EMPTY;
	return c;
}

void sim_ctx_free(struct sim_ctx *c)
{
	if (!c)
		return;
	free(c->xa);
	free(c->xb);
	free(c->yb);
	free(c->cost);
	free(c->steps);
	free(c->segs);
	free(c->hits);
	free(c->sums);
	free(c->cache);
	free(c);
}

const char *sim_ctx_error(const struct sim_ctx *c)
{
	return c->err;
}

/* A lossy direct-mapped cache, not a map (so not an imap): a pair evicts the one in its slot, the
 * memory stays 2^CACHE_BITS slots however many pairs are aligned. */
static inline double sub_cached(struct sim_ctx *c, uint32_t f, uint32_t g)
{
	uint64_t key = f < g ? (uint64_t)f << 32 | g : (uint64_t)g << 32 | f;
	struct cslot *s = &c->cache[hash_mix64(key) & (((uint64_t)1 << CACHE_BITS) - 1)];

	if (s->key != key) {
		s->key = key;
		s->val = sub_dense(c->ft, f, g);
	}
	return s->val;
}

/* Maps a pattern's frame ids to dense indexes. */
static int to_dense(struct sim_ctx *c, const struct sim_pattern *p, uint32_t *out)
{
	size_t i;
	uint64_t d;

	if (p->len > SIM_MAX_LEN) {
		snprintf(c->err, sizeof(c->err), "pattern of %zu frames (at most %d)", p->len, SIM_MAX_LEN);
		return -1;
	}
	for (i = 0; i < p->len; i++) {
		if (!imap_get(&c->ft->idx, p->frames[i], &d)) {
			snprintf(c->err, sizeof(c->err), "frame id %u is not registered", (unsigned)p->frames[i]);
			return -1;
		}
		out[i] = (uint32_t)d;
	}
	return 0;
}

/* -1, 0, 1 as the frame-id sequence of a sorts before, equal to or after b's */
static int seq_cmp(const struct sim_pattern *a, const struct sim_pattern *b)
{
	size_t i, n = a->len < b->len ? a->len : b->len;

	for (i = 0; i < n; i++)
		if (a->frames[i] != b->frames[i])
			return a->frames[i] < b->frames[i] ? -1 : 1;
	return a->len < b->len ? -1 : a->len > b->len;
}

/* sub(x_i, y_j) inside the table: 0 for equal frames; the word summaries settle most pairs. */
static inline double cell_sub(struct sim_ctx *c, uint32_t f, const struct fsig *fs, const uint32_t *y, size_t j)
{
	const struct fsig *gs = &c->yb[j];

	if (f == y[j])
		return 0;
	/* no function word in common: at most the module (the value sub_dense() computes) */
	if (fs->bits & gs->bits)
		return sub_cached(c, f, y[j]);
	if (fs->module == gs->module && fs->module != UINT32_MAX)
		return 1.0 - 1.0 / (double)(fs->n + gs->n - 1);
	return 1.0;
}

/*
 * The edit-distance table of x[0..m) (left) against y[0..n) (right), then
 * the steps read back from the last cell into c->steps, in order from the
 * start. Each row is filled in two passes: the diagonal and the cell above
 * (independent of each other), then the insertions from the left (a running
 * minimum). Reading back, a cell takes the first operation, in the order
 * diagonal, deletion, insertion, whose cost is within TIE_EPS of the cell's.
 * Returns the number of steps.
 */
static size_t align_dense(struct sim_ctx *c, const uint32_t *x, size_t m, const uint32_t *y, size_t n,
			  double *cost_out)
{
	size_t w = n + 1, i, j, k, ns = 0;
	double *D = c->cost;

	for (j = 0; j < n; j++)
		c->yb[j] = c->ft->sig[y[j]];
	for (j = 0; j <= n; j++)
		D[j] = (double)j;
	for (i = 1; i <= m; i++) {
		double *row = D + i * w, *prev = row - w;
		uint32_t f = x[i - 1];
		const struct fsig fs = c->ft->sig[f];

		row[0] = (double)i;
		for (j = 1; j <= n; j++) {
			double dg = prev[j - 1] + cell_sub(c, f, &fs, y, j - 1), dl = prev[j] + 1.0;

			row[j] = dg < dl ? dg : dl;
		}
		{
			double run = row[0];

			for (j = 1; j <= n; j++) {
				double in = run + 1.0, r = row[j];

				run = in < r ? in : r;
				row[j] = run;
			}
		}
	}
	*cost_out = D[m * w + n];
	i = m;
	j = n;
	while (i > 0 || j > 0) {
		struct sim_step *s = &c->steps[ns++];
		double here = D[i * w + j] + TIE_EPS;

		s->sub = 0;
		if (i > 0 && j > 0) {
			const struct fsig fs = c->ft->sig[x[i - 1]];
			double sv = cell_sub(c, x[i - 1], &fs, y, j - 1);

			if (D[(i - 1) * w + j - 1] + sv <= here) {
				s->op = x[i - 1] == y[j - 1] ? SIM_MATCH : SIM_SUB;
				s->l = (uint32_t)--i;
				s->r = (uint32_t)--j;
				s->sub = sv;
				continue;
			}
		}
		if (i > 0 && D[(i - 1) * w + j] + 1.0 <= here) {
			s->op = SIM_DEL;
			s->l = (uint32_t)--i;
			s->r = UINT32_MAX;
		} else {
			s->op = SIM_INS;
			s->l = UINT32_MAX;
			s->r = (uint32_t)--j;
		}
	}
	for (k = 0; k < ns / 2; k++) {
		struct sim_step t = c->steps[k];

		c->steps[k] = c->steps[ns - 1 - k];
		c->steps[ns - 1 - k] = t;
	}
	return ns;
}

static enum sim_seg seg_of(enum sim_op op)
{
	return op == SIM_MATCH ? SIM_SEG_M : op == SIM_SUB ? SIM_SEG_S : SIM_SEG_ID;
}

int sim_align(struct sim_ctx *c, const struct sim_pattern *a, const struct sim_pattern *b,
	      const struct sim_alignment **out)
{
	const struct sim_pattern *x = a, *y = b;
	size_t cells, ns, k, nseg = 0;
	bool swap;
	double cost, wm = 0, wid = 0, ws = 0, den;
	struct sim_alignment *al = &c->al;

	c->err[0] = '\0';
	swap = seq_cmp(a, b) > 0;
	if (swap) {
		x = b;
		y = a;
	}
	if (to_dense(c, x, c->xa) < 0 || to_dense(c, y, c->xb) < 0)
		return -1;
	cells = vec_bytes(x->len + 1, y->len + 1);
	if (cells > c->cap_cells) {
		/* the exact size, not doubled: (SIM_MAX_LEN + 1)^2 cells are 8 MB */
		double *nc = vec_realloc(c->cost, cells, sizeof(*nc));

		if (nc)
			c->cost = nc;
		if (!nc) {
			snprintf(c->err, sizeof(c->err), "out of memory");
			return -1;
		}
		c->cap_cells = cells;
	}
	ns = align_dense(c, c->xa, x->len, c->xb, y->len, &cost);
	if (swap) {
		for (k = 0; k < ns; k++) {
			struct sim_step *s = &c->steps[k];
			uint32_t t = s->l;

			s->l = s->r;
			s->r = t;
			if (s->op == SIM_DEL)
				s->op = SIM_INS;
			else if (s->op == SIM_INS)
				s->op = SIM_DEL;
		}
	}
	/* weights, in step order in the caller's orientation (the same sums either way round) */
	for (k = 0; k < ns; k++) {
		const struct sim_step *s = &c->steps[k];
		enum sim_seg kind = seg_of(s->op);
		double v;

		switch (s->op) {
		case SIM_MATCH:
			v = (a->w[s->l] + b->w[s->r]) / 2;
			wm += v;
			break;
		case SIM_SUB:
			v = s->sub * (a->w[s->l] + b->w[s->r]) / 2;
			ws += v;
			break;
		case SIM_DEL:
			v = a->w[s->l];
			wid += v;
			break;
		default:
			v = b->w[s->r];
			wid += v;
			break;
		}
		if (nseg == 0 || c->segs[nseg - 1].kind != kind) {
			c->segs[nseg].kind = kind;
			c->segs[nseg].first = (uint32_t)k;
			c->segs[nseg].n = 0;
			c->segs[nseg].w = 0;
			nseg++;
		}
		c->segs[nseg - 1].n++;
		c->segs[nseg - 1].w += v;
	}
	al->steps = c->steps;
	al->nsteps = ns;
	al->segs = c->segs;
	al->nsegs = nseg;
	al->cost = cost;
	al->wm = wm;
	al->wid = wid;
	al->ws = ws;
	den = wm + wid + ws;
	if (den > 0)
		al->sim = wm / den;
	else
		al->sim = seq_cmp(a, b) == 0 ? 1.0 : 0.0;
	*out = al;
	return 0;
}

int sim_similarity(struct sim_ctx *c, const struct sim_pattern *a, const struct sim_pattern *b, double *out)
{
	const struct sim_alignment *al;

	if (sim_align(c, a, b, &al) < 0)
		return -1;
	*out = al->sim;
	return 0;
}

int sim_medoid(struct sim_ctx *c, const struct sim_pattern *p, size_t k, size_t *medoid)
{
	size_t i, j, best = 0;

	c->err[0] = '\0';
	if (vec_reserve(&c->sums, &c->cap_sums, k, sizeof(*c->sums)) < 0) {
		snprintf(c->err, sizeof(c->err), "out of memory");
		return -1;
	}
	for (i = 0; i < k; i++)
		c->sums[i] = 0;
	/* each sum gets its terms in member order: sums[j] gets i < j before j < i' */
	for (i = 0; i < k; i++) {
		for (j = i + 1; j < k; j++) {
			double s;

			if (sim_similarity(c, &p[i], &p[j], &s) < 0)
				return -1;
			c->sums[i] += s;
			c->sums[j] += s;
		}
	}
	for (i = 1; i < k; i++)
		if (c->sums[i] > c->sums[best])
			best = i;
	*medoid = best;
	return 0;
}

int sim_common_part(struct sim_ctx *c, const struct sim_pattern *p, size_t k, size_t m, uint32_t *pos,
		    size_t *npos)
{
	size_t i, j, n = 0, len = p[m].len;

	c->err[0] = '\0';
	if (len > SIM_MAX_LEN) {
		snprintf(c->err, sizeof(c->err), "pattern of %zu frames (at most %d)", len, SIM_MAX_LEN);
		return -1;
	}
	for (i = 0; i < len; i++)
		c->hits[i] = 0;
	for (j = 0; j < k; j++) {
		const struct sim_alignment *al;

		if (j == m)
			continue;
		if (sim_align(c, &p[m], &p[j], &al) < 0)
			return -1;
		for (i = 0; i < al->nsteps; i++)
			if (al->steps[i].op == SIM_MATCH)
				c->hits[al->steps[i].l]++;
	}
	for (i = 0; i < len; i++)
		if (c->hits[i] == k - 1)
			pos[n++] = (uint32_t)i;
	*npos = n;
	return 0;
}
