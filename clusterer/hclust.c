/*
 * hclust: the clustering of call-stack patterns (see hclust.h and
 * docs/clustering.md): the pairs worth a Sim (an index from frames to
 * patterns and a bound), on all cores; for average linkage the exact
 * distances inside the components of those pairs; the sparse linkage
 * (linkage.c); medoids and common parts.
 */
#include "clusterer/hclust.h"
#include "clusterer/linkage.h"
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
#include <time.h>
#include <unistd.h>

#define NONE UINT32_MAX
/* slack on the similarity threshold, so that rounding never prunes a pair at the cut exactly */
#define BOUND_SLACK 1e-9
#define MAX_THREADS SIM_MAX_THREADS

struct hclust {
	char err[256];
	struct linkage *lk;             /* the linkage's own errors */
	struct hclust_stats st;
	/* the result of hclust_patterns() */
	struct hclust_clusters res;
	uint32_t *label, *off, *members, *medoid, *common_off, *common;
	struct linkage_merge *z;
	struct linkage_pair *pairs;
};

static void set_err(struct hclust *h, const char *fmt, const char *arg)
{
	snprintf(h->err, sizeof(h->err), fmt, arg);
}

static int oom(struct hclust *h)
{
	set_err(h, "%s", "out of memory");
	return -1;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct hclust *hclust_open(void)
{
	struct hclust *h = calloc(1, sizeof(*h));

	if (h && !(h->lk = linkage_open())) {
		free(h);
		return NULL;
	}
	return h;
}

static void free_result(struct hclust *h)
{
	free(h->label);
	free(h->off);
	free(h->members);
	free(h->medoid);
	free(h->common_off);
	free(h->common);
	free(h->z);
	free(h->pairs);
	h->label = h->off = h->members = h->medoid = h->common_off = h->common = NULL;
	h->z = NULL;
	h->pairs = NULL;
	memset(&h->res, 0, sizeof(h->res));
}

void hclust_free(struct hclust *h)
{
	if (!h)
		return;
	free_result(h);
	linkage_free(h->lk);
	free(h);
}

const char *hclust_error(const struct hclust *h)
{
	return h->err;
}

void hclust_last_stats(const struct hclust *h, struct hclust_stats *st)
{
	*st = h->st;
}

/* ---- patterns ---- */

/* Per pattern: its distinct frames (dense ids, ascending) with the sums the bound needs. */
struct pinfo {
	uint32_t *dfr;          /* distinct frames of all patterns, doff[p] .. doff[p + 1] */
	double *da, *db;        /* per distinct frame: sum of w/2 and of w*floor/2 over its positions */
	size_t *doff;
	double *btot;           /* per pattern: sum of db */
	uint32_t *pre;          /* prefix frames, poff[p] .. poff[p + 1] */
	size_t *poff;
	/* frame -> patterns containing it, and -> patterns with it in their prefix (ascending) */
	uint32_t *full, *prel;
	size_t *foff, *ploff;
	size_t nframes;
};

static void pinfo_release(struct pinfo *pi)
{
	free(pi->dfr);
	free(pi->da);
	free(pi->db);
	free(pi->doff);
	free(pi->btot);
	free(pi->pre);
	free(pi->poff);
	free(pi->full);
	free(pi->prel);
	free(pi->foff);
	free(pi->ploff);
}

struct fsum {
	uint32_t f;
	double a, b, key;       /* key: sort order of the prefix (frequency) */
};

static int cmp_fsum_f(const void *x, const void *y)
{
	const struct fsum *a = x, *b = y;

	return a->f < b->f ? -1 : a->f > b->f;
}

/* Builds pinfo. s is the similarity threshold (with slack): a pair can reach it only if, on one side,
 * the frames it shares hold at least s * B of value v = (1 - s) a + s b. */
static int pinfo_build(struct hclust *h, struct sim_frames *ft, const struct sim_pattern *p, size_t n, double s,
		       struct pinfo *pi)
{
	size_t i, j, total = 0, nd = 0, npre = 0, F = sim_frames_count(ft);
	uint32_t *dfc = NULL;
	struct fsum *tmp = NULL;
	int rc = -1;

	pi->nframes = F;
	for (i = 0; i < n; i++)
		total += p[i].len;
	pi->dfr = vec_alloc(total, sizeof(*pi->dfr));
	pi->da = vec_alloc(total, sizeof(*pi->da));
	pi->db = vec_alloc(total, sizeof(*pi->db));
	pi->pre = vec_alloc(total, sizeof(*pi->pre));
	pi->doff = vec_alloc(n + 1, sizeof(*pi->doff));
	pi->poff = vec_alloc(n + 1, sizeof(*pi->poff));
	pi->btot = vec_alloc(n, sizeof(*pi->btot));
	pi->foff = vec_calloc(F + 1, sizeof(*pi->foff));
	pi->ploff = vec_calloc(F + 1, sizeof(*pi->ploff));
	dfc = vec_calloc(F, sizeof(*dfc));
	tmp = vec_alloc(SIM_MAX_LEN, sizeof(*tmp));
	if (!pi->dfr || !pi->da || !pi->db || !pi->pre || !pi->doff || !pi->poff || !pi->btot || !pi->foff ||
	    !pi->ploff || !dfc || !tmp) {
		oom(h);
		goto out;
	}
	/* distinct frames with their sums */
	pi->doff[0] = 0;
	for (i = 0; i < n; i++) {
		size_t k = 0;

		if (p[i].len > SIM_MAX_LEN) {
			snprintf(h->err, sizeof(h->err), "pattern %zu has %zu frames (at most %d)", i, p[i].len,
				 SIM_MAX_LEN);
			goto out;
		}
		for (j = 0; j < p[i].len; j++) {
			int64_t d = sim_frames_index(ft, p[i].frames[j]);

			if (d < 0) {
				snprintf(h->err, sizeof(h->err), "pattern %zu: frame id %u is not registered", i,
					 (unsigned)p[i].frames[j]);
				goto out;
			}
			tmp[j].f = (uint32_t)d;
			tmp[j].a = p[i].w[j] / 2;
			tmp[j].b = p[i].w[j] * sim_frames_sub_floor(ft, p[i].frames[j]) / 2;
		}
		qsort(tmp, p[i].len, sizeof(*tmp), cmp_fsum_f);
		pi->btot[i] = 0;
		for (j = 0; j < p[i].len; j++) {
			if (k && pi->dfr[nd - 1] == tmp[j].f) {
				pi->da[nd - 1] += tmp[j].a;
				pi->db[nd - 1] += tmp[j].b;
			} else {
				pi->dfr[nd] = tmp[j].f;
				pi->da[nd] = tmp[j].a;
				pi->db[nd] = tmp[j].b;
				dfc[tmp[j].f]++;
				nd++;
				k++;
			}
			pi->btot[i] += tmp[j].b;
		}
		pi->doff[i + 1] = nd;
	}
	/* prefixes: rarest frames first (then lower id); the suffix of common frames kept out of the
	 * prefix is the longest one whose value stays below s * B */
	pi->poff[0] = 0;
	for (i = 0; i < n; i++) {
		size_t a = pi->doff[i], m = pi->doff[i + 1] - a, cut;
		double acc = 0, lim = s * pi->btot[i];

		for (j = 0; j < m; j++) {
			tmp[j].f = pi->dfr[a + j];
			tmp[j].a = pi->da[a + j];
			tmp[j].b = pi->db[a + j];
			tmp[j].key = dfc[tmp[j].f];
		}
		/* insertion sort by (frequency, id): m is small and the input is sorted by id */
		for (j = 1; j < m; j++) {
			struct fsum t = tmp[j];
			size_t q = j;

			while (q > 0 && tmp[q - 1].key > t.key) {
				tmp[q] = tmp[q - 1];
				q--;
			}
			tmp[q] = t;
		}
		cut = m;
		while (cut > 0) {
			double v = (1 - s) * tmp[cut - 1].a + s * tmp[cut - 1].b;

			if (!(acc + v < lim))
				break;
			acc += v;
			cut--;
		}
		for (j = 0; j < cut; j++) {
			pi->pre[npre++] = tmp[j].f;
			pi->ploff[tmp[j].f + 1]++;
		}
		pi->poff[i + 1] = npre;
	}
	/* the two inverted indexes, patterns ascending */
	for (i = 0; i < F; i++)
		pi->foff[i + 1] = pi->foff[i] + dfc[i];
	for (i = 0; i < F; i++)
		pi->ploff[i + 1] += pi->ploff[i];
	pi->full = vec_alloc(nd, sizeof(*pi->full));
	pi->prel = vec_alloc(npre, sizeof(*pi->prel));
	if (!pi->full || !pi->prel) {
		oom(h);
		goto out;
	}
	{
		size_t *fa = vec_alloc(F, sizeof(*fa)), *pa = vec_alloc(F, sizeof(*pa));

		if (!fa || !pa) {
			free(fa);
			free(pa);
			oom(h);
			goto out;
		}
		memcpy(fa, pi->foff, F * sizeof(*fa));
		memcpy(pa, pi->ploff, F * sizeof(*pa));
		for (i = 0; i < n; i++) {
			for (j = pi->doff[i]; j < pi->doff[i + 1]; j++)
				pi->full[fa[pi->dfr[j]]++] = (uint32_t)i;
			for (j = pi->poff[i]; j < pi->poff[i + 1]; j++)
				pi->prel[pa[pi->pre[j]]++] = (uint32_t)i;
		}
		free(fa);
		free(pa);
	}
	rc = 0;
out:
	free(dfc);
	free(tmp);
	return rc;
}

/* A pair whose Sim was computed and is within the cut. */
struct kept {
	uint32_t i, j;
	double sim;
};

struct pairvec {
	struct kept *v;
	size_t n, cap;
};

static int pv_push(struct pairvec *pv, uint32_t i, uint32_t j, double sim)
{
	if (vec_reserve(&pv->v, &pv->cap, pv->n + 1, sizeof(*pv->v)) < 0)
		return -1;
	pv->v[pv->n].i = i;
	pv->v[pv->n].j = j;
	pv->v[pv->n++].sim = sim;
	return 0;
}

/* Shared state of the pair workers. */
struct pjob {
	const struct sim_frames *ft;
	const struct sim_pattern *p;
	size_t n;
	const struct pinfo *pi;
	double s, cut;
	/* the second pass (average linkage): the component of each pattern (NONE: alone) and the pairs
	 * the first pass kept, by (i, j), those of pattern i at known[koff[i] .. koff[i + 1]) */
	const uint32_t *comp;
	const uint32_t *comp_next;      /* the next higher pattern of the same component, or NONE */
	const struct kept *known;
	const size_t *koff;
	atomic_size_t next;
	atomic_int failed;
};

struct pworker {
	struct pjob *job;
	struct pairvec out;
	uint64_t candidates, bounded, aligned, extended_aligned;
	char err[256];
};

/* First index in the ascending list v[lo..hi) holding a value > x. */
static size_t upper(const uint32_t *v, size_t lo, size_t hi, uint32_t x)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The second pass, for average linkage: every pair Q > P of P's component that
 * shares a frame with P and that the first pass did not keep, with its exact
 * Sim. A merge at or below the cut joins clusters with a pair within the cut
 * between them, so both lie in one component of the graph of such pairs: the
 * distances inside the components decide every merge up to the cut, and a pair
 * that shares no frame is at distance 1 exactly.
 */
/* Whether patterns P and Q share a frame (their distinct frames are ascending). */
static bool share_frame(const struct pinfo *pi, uint32_t P, uint32_t Q)
{
	size_t a = pi->doff[P], ae = pi->doff[P + 1], b = pi->doff[Q], be = pi->doff[Q + 1];

	while (a < ae && b < be) {
		if (pi->dfr[a] == pi->dfr[b])
			return true;
		if (pi->dfr[a] < pi->dfr[b])
			a++;
		else
			b++;
	}
	return false;
}

static int extend_pairs(struct pworker *w, struct sim_ctx *ctx, uint32_t P, uint32_t *stamp)
{
	const struct pjob *jb = w->job;
	const struct pinfo *pi = jb->pi;

	for (size_t c = jb->koff[P]; c < jb->koff[P + 1]; c++)
		stamp[jb->known[c].j] = P;
	/* the higher-numbered patterns of P's component: a component's pairs, not the frame index
	 * (nearly every pattern shares the thread-start frames with every other) */
	for (uint32_t Q = jb->comp_next[P]; Q != NONE; Q = jb->comp_next[Q]) {
		double sim;

		if (stamp[Q] == P || !share_frame(pi, P, Q))
			continue;
		w->extended_aligned++;
		if (sim_similarity(ctx, &jb->p[P], &jb->p[Q], &sim) < 0) {
			snprintf(w->err, sizeof(w->err), "%s", sim_ctx_error(ctx));
			return -1;
		}
		if (sim > 0 && pv_push(&w->out, P, Q, sim) < 0) {
			snprintf(w->err, sizeof(w->err), "out of memory");
			return -1;
		}
	}
	return 0;
}

static void *pair_worker(void *arg)
{
	struct pworker *w = arg;
	struct pjob *jb = w->job;
	const struct pinfo *pi = jb->pi;
	struct sim_ctx *ctx = sim_ctx_open(jb->ft);
	uint32_t *stamp = vec_alloc(jb->n, sizeof(*stamp)), *cand = vec_alloc(jb->n, sizeof(*cand));
	size_t i;

	if (!ctx || !stamp || !cand) {
		snprintf(w->err, sizeof(w->err), "out of memory");
		atomic_store(&jb->failed, 1);
		goto out;
	}
	for (i = 0; i < jb->n; i++)
		stamp[i] = NONE;
	for (;;) {
		size_t P = atomic_fetch_add(&jb->next, 1), nc = 0, c, e, f;

		if (P >= jb->n || atomic_load(&jb->failed))
			break;
		if (jb->comp) {
			if (jb->comp[P] != NONE && extend_pairs(w, ctx, (uint32_t)P, stamp) < 0) {
				atomic_store(&jb->failed, 1);
				goto out;
			}
			continue;
		}
		/* Q shares one of P's prefix frames, or P holds one of Q's */
		for (e = pi->poff[P]; e < pi->poff[P + 1]; e++) {
			f = pi->pre[e];
			for (c = upper(pi->full, pi->foff[f], pi->foff[f + 1], (uint32_t)P); c < pi->foff[f + 1]; c++) {
				uint32_t Q = pi->full[c];

				if (stamp[Q] != P) {
					stamp[Q] = (uint32_t)P;
					cand[nc++] = Q;
				}
			}
		}
		for (e = pi->doff[P]; e < pi->doff[P + 1]; e++) {
			f = pi->dfr[e];
			for (c = upper(pi->prel, pi->ploff[f], pi->ploff[f + 1], (uint32_t)P); c < pi->ploff[f + 1];
			     c++) {
				uint32_t Q = pi->prel[c];

				if (stamp[Q] != P) {
					stamp[Q] = (uint32_t)P;
					cand[nc++] = Q;
				}
			}
		}
		w->candidates += nc;
		for (c = 0; c < nc; c++) {
			uint32_t Q = cand[c];
			size_t a = pi->doff[P], ae = pi->doff[P + 1], b = pi->doff[Q], be = pi->doff[Q + 1];
			double M = 0, bp = 0, bq = 0, U, sim;

			/* the bound: matched weight at most that of the shared frames, unmatched frames cost at
			 * least their floor */
			while (a < ae && b < be) {
				if (pi->dfr[a] < pi->dfr[b]) {
					a++;
				} else if (pi->dfr[a] > pi->dfr[b]) {
					b++;
				} else {
					M += pi->da[a] + pi->da[b];
					bp += pi->db[a];
					bq += pi->db[b];
					a++;
					b++;
				}
			}
			U = (pi->btot[P] - bp) + (pi->btot[Q] - bq);
			if (U < 0)
				U = 0;
			if (M * (1 - jb->s) < jb->s * U) {
				w->bounded++;
				continue;
			}
			w->aligned++;
			if (sim_similarity(ctx, &jb->p[P], &jb->p[Q], &sim) < 0) {
				snprintf(w->err, sizeof(w->err), "%s", sim_ctx_error(ctx));
				atomic_store(&jb->failed, 1);
				goto out;
			}
			if (1 - sim <= jb->cut && pv_push(&w->out, (uint32_t)P, Q, sim) < 0) {
				snprintf(w->err, sizeof(w->err), "out of memory");
				atomic_store(&jb->failed, 1);
				goto out;
			}
		}
	}
out:
	sim_ctx_free(ctx);
	free(stamp);
	free(cand);
	return NULL;
}

static int cmp_kept(const void *x, const void *y)
{
	const struct kept *a = x, *b = y;

	if (a->i != b->i)
		return a->i < b->i ? -1 : 1;
	return a->j < b->j ? -1 : a->j > b->j;
}

/* Shared state of the medoid workers. */
struct mjob {
	const struct sim_frames *ft;
	const struct sim_pattern *p;
	const struct kept *kept;
	const size_t *koff;             /* kept pairs of pattern i: kept[koff[i] .. koff[i + 1]) */
	const uint32_t *off, *members;
	uint32_t *medoid;
	uint32_t *common, *ccount;      /* common part of cluster c at common + cstart[c], ccount[c] of them */
	const size_t *cstart;
	size_t nclusters;
	int phase;                      /* 0: medoids, 1: common parts */
	atomic_size_t next;
	atomic_int failed;
};

struct mworker {
	struct mjob *job;
	uint64_t aligned;
	char err[256];
};

/* Sim of patterns i < j: from the kept pairs, else computed. */
static int pair_sim(struct mworker *w, struct sim_ctx *ctx, uint32_t i, uint32_t j, double *out)
{
	const struct mjob *jb = w->job;
	size_t lo = jb->koff[i], hi = jb->koff[i + 1];

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (jb->kept[mid].j < j)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < jb->koff[i + 1] && jb->kept[lo].j == j) {
		*out = jb->kept[lo].sim;
		return 0;
	}
	w->aligned++;
	return sim_similarity(ctx, &jb->p[i], &jb->p[j], out);
}

static void *medoid_worker(void *arg)
{
	struct mworker *w = arg;
	struct mjob *jb = w->job;
	struct sim_ctx *ctx = sim_ctx_open(jb->ft);
	struct sim_pattern *mp = NULL;
	double *sums = NULL;
	size_t cap_sums = 0, cap_mp = 0;

	if (!ctx)
		goto fail_oom;
	for (;;) {
		size_t c = atomic_fetch_add(&jb->next, 1), k, a, b;
		const uint32_t *mem;

		if (c >= jb->nclusters || atomic_load(&jb->failed))
			break;
		mem = jb->members + jb->off[c];
		k = jb->off[c + 1] - jb->off[c];
		if (jb->phase == 0) {
			size_t best = 0;

			/* two members have equal sums (Sim is symmetric): the lower one */
			if (k >= 3) {
				if (vec_reserve(&sums, &cap_sums, k, sizeof(*sums)) < 0)
					goto fail_oom;
				for (a = 0; a < k; a++)
					sums[a] = 0;
				for (a = 0; a < k; a++) {
					for (b = a + 1; b < k; b++) {
						double s;

						if (pair_sim(w, ctx, mem[a], mem[b], &s) < 0)
							goto fail_ctx;
						sums[a] += s;
						sums[b] += s;
					}
				}
				for (a = 1; a < k; a++)
					if (sums[a] > sums[best])
						best = a;
			}
			jb->medoid[c] = mem[best];
		} else {
			size_t m = 0, np;

			if (vec_reserve(&mp, &cap_mp, k, sizeof(*mp)) < 0)
				goto fail_oom;
			for (a = 0; a < k; a++) {
				mp[a] = jb->p[mem[a]];
				if (mem[a] == jb->medoid[c])
					m = a;
			}
			if (sim_common_part(ctx, mp, k, m, jb->common + jb->cstart[c], &np) < 0)
				goto fail_ctx;
			w->aligned += k - 1;
			jb->ccount[c] = (uint32_t)np;
		}
	}
	goto out;
fail_ctx:
	snprintf(w->err, sizeof(w->err), "%s", sim_ctx_error(ctx));
	atomic_store(&jb->failed, 1);
	goto out;
fail_oom:
	snprintf(w->err, sizeof(w->err), "out of memory");
	atomic_store(&jb->failed, 1);
out:
	sim_ctx_free(ctx);
	free(sums);
	free(mp);
	return NULL;
}

static void run_pair_worker(void *ctx, int t)
{
	pair_worker(&((struct pworker *)ctx)[t]);
}

/* Runs the pair workers on jb and appends what they found to *kept (by (i, j) afterwards). */
static int run_pair_workers(struct hclust *h, struct pjob *jb, int nt, struct kept **kept, size_t *nkept)
{
	struct pworker *w = calloc((size_t)nt, sizeof(*w));
	size_t total = 0;
	struct kept *nk;
	int t, rc = -1;

	if (!w)
		return oom(h);
	atomic_init(&jb->next, 0);
	atomic_init(&jb->failed, 0);
	for (t = 0; t < nt; t++)
		w[t].job = jb;
	par_run(nt, run_pair_worker, w);
	for (t = 0; t < nt; t++) {
		if (w[t].err[0] && !h->err[0])
			set_err(h, "%s", w[t].err);
		h->st.candidates += w[t].candidates;
		h->st.bounded += w[t].bounded;
		h->st.aligned += w[t].aligned + w[t].extended_aligned;
		h->st.extended_aligned += w[t].extended_aligned;
		total += w[t].out.n;
	}
	if (atomic_load(&jb->failed))
		goto out;
	if (total > SIZE_MAX - *nkept - 1 || !(nk = vec_realloc(*kept, *nkept + total + 1, sizeof(**kept)))) {
		oom(h);
		goto out;
	}
	*kept = nk;
	for (t = 0; t < nt; t++) {
		if (w[t].out.n)
			memcpy(*kept + *nkept, w[t].out.v, w[t].out.n * sizeof(**kept));
		*nkept += w[t].out.n;
	}
	qsort(*kept, *nkept, sizeof(**kept), cmp_kept);
	rc = 0;
out:
	for (t = 0; t < nt; t++)
		free(w[t].out.v);
	free(w);
	return rc;
}

/* For the second pass: the component of each pattern in the graph of the kept pairs (NONE for a pattern
 * in no pair) into comp, and the kept pairs of each pattern i at koff[i] .. koff[i + 1]. */
static int components(struct hclust *h, const struct kept *kept, size_t nkept, size_t n, uint32_t **comp,
		      size_t **koff)
{
	size_t i;

	*comp = vec_alloc(n, sizeof(**comp));
	*koff = vec_calloc(n + 1, sizeof(**koff));
	if (!*comp || !*koff)
		return oom(h);
	for (i = 0; i < n; i++)
		(*comp)[i] = (uint32_t)i;
	for (i = 0; i < nkept; i++) {
		uint32_t a = linkage_uf_find(*comp, kept[i].i), b = linkage_uf_find(*comp, kept[i].j);

		if (a != b)
			(*comp)[a > b ? a : b] = a < b ? a : b;
		(*koff)[kept[i].i + 1]++;
	}
	for (i = 0; i < n; i++)
		(*koff)[i + 1] += (*koff)[i];
	for (i = 0; i < n; i++)
		(*comp)[i] = linkage_uf_find(*comp, (uint32_t)i);
	{
		uint32_t *size = vec_calloc(n, sizeof(*size));

		if (!size)
			return oom(h);
		for (i = 0; i < n; i++)
			size[(*comp)[i]]++;
		for (i = 0; i < n; i++)
			if (size[(*comp)[i]] < 2)
				(*comp)[i] = NONE;
		free(size);
	}
	return 0;
}

/*
 * Computes the pairs for the linkage into *kept (by (i, j), with their Sim): those within the cut,
 * found through the frame index and the bound on Sim; for average linkage, then also every pair
 * beyond the cut that shares a frame and lies inside one component of the pairs within the cut.
 */
static int find_pairs(struct hclust *h, struct sim_frames *ft, const struct sim_pattern *p, size_t n,
		      const struct hclust_opts *o, int nt, struct kept **kept, size_t *nkept)
{
	struct pinfo pi;
	struct pjob jb;
	uint32_t *comp = NULL, *next = NULL, *last = NULL;
	size_t *koff = NULL;
	int rc = -1;
	double t0 = now_ms();

	memset(&pi, 0, sizeof(pi));
	memset(&jb, 0, sizeof(jb));
	*kept = NULL;
	*nkept = 0;
	if (sim_frames_prepare(ft, nt) < 0) {
		set_err(h, "%s", sim_frames_error(ft));
		goto out;
	}
	jb.s = 1 - o->cut - BOUND_SLACK;
	if (pinfo_build(h, ft, p, n, jb.s, &pi) < 0)
		goto out;
	h->st.ms_prepare = now_ms() - t0;
	t0 = now_ms();
	jb.ft = ft;
	jb.p = p;
	jb.n = n;
	jb.pi = &pi;
	jb.cut = o->cut;
	if (run_pair_workers(h, &jb, nt, kept, nkept) < 0)
		goto out;
	h->st.kept = *nkept;
	if (o->method == LINKAGE_AVERAGE && *nkept) {
		if (components(h, *kept, *nkept, n, &comp, &koff) < 0)
			goto out;
		/* each component as a list of its patterns, ascending: last[root] is the one seen last */
		next = vec_alloc(n, sizeof(*next));
		last = vec_alloc(n, sizeof(*last));
		if (!next || !last) {
			oom(h);
			goto out;
		}
		for (size_t i = 0; i < n; i++)
			last[i] = NONE;
		for (size_t i = n; i-- > 0;) {
			next[i] = NONE;
			if (comp[i] != NONE) {
				next[i] = last[comp[i]];
				last[comp[i]] = (uint32_t)i;
			}
		}
		jb.comp = comp;
		jb.comp_next = next;
		jb.known = *kept;
		jb.koff = koff;
		/* the workers only read the first pass's pairs: they are appended to after the workers end */
		{
			size_t first = *nkept;

			if (run_pair_workers(h, &jb, nt, kept, nkept) < 0)
				goto out;
			h->st.extended = *nkept - first;
		}
	}
	rc = 0;
out:
	free(comp);
	free(next);
	free(last);
	free(koff);
	pinfo_release(&pi);
	h->st.ms_pairs = now_ms() - t0;
	if (rc < 0) {
		free(*kept);
		*kept = NULL;
		*nkept = 0;
	}
	return rc;
}

static void run_medoid_worker(void *ctx, int t)
{
	medoid_worker(&((struct mworker *)ctx)[t]);
}

static int run_medoids(struct hclust *h, struct sim_frames *ft, const struct sim_pattern *p, size_t n,
		       const struct kept *kept, size_t nkept, int nt)
{
	struct mjob jb;
	struct mworker *w = calloc((size_t)nt, sizeof(*w));
	size_t *koff = vec_calloc(n + 1, sizeof(*koff)), *cstart = NULL, i, c, nc = h->res.nclusters, tot = 0;
	uint32_t *ccount = NULL;
	int t, phase, rc = -1;

	if (!w || !koff)
		goto oom;
	for (i = 0; i < nkept; i++)
		koff[kept[i].i + 1]++;
	for (i = 0; i < n; i++)
		koff[i + 1] += koff[i];
	h->medoid = vec_alloc(nc, sizeof(*h->medoid));
	cstart = vec_alloc(nc + 1, sizeof(*cstart));
	ccount = vec_alloc(nc, sizeof(*ccount));
	h->common_off = vec_alloc(nc + 1, sizeof(*h->common_off));
	if (!h->medoid || !cstart || !ccount || !h->common_off)
		goto oom;
	memset(&jb, 0, sizeof(jb));
	jb.ft = ft;
	jb.p = p;
	jb.kept = kept;
	jb.koff = koff;
	jb.off = h->off;
	jb.members = h->members;
	jb.medoid = h->medoid;
	jb.ccount = ccount;
	jb.nclusters = nc;
	for (phase = 0; phase < 2; phase++) {
		if (phase == 1) {
			/* room for each common part: its medoid's length */
			for (c = 0; c < nc; c++) {
				cstart[c] = tot;
				tot += p[h->medoid[c]].len;
			}
			h->common = vec_alloc(tot, sizeof(*h->common));
			if (!h->common)
				goto oom;
			jb.common = h->common;
			jb.cstart = cstart;
		}
		jb.phase = phase;
		atomic_init(&jb.next, 0);
		atomic_init(&jb.failed, 0);
		for (t = 0; t < nt; t++)
			w[t].job = &jb;
		par_run(nt, run_medoid_worker, w);
		for (t = 0; t < nt; t++) {
			if (w[t].err[0] && !h->err[0])
				set_err(h, "%s", w[t].err);
			h->st.medoid_aligned += w[t].aligned;
			w[t].aligned = 0;
		}
		if (atomic_load(&jb.failed))
			goto out;
	}
	/* compact the common parts */
	h->common_off[0] = 0;
	for (c = 0; c < nc; c++) {
		memmove(h->common + h->common_off[c], h->common + cstart[c], ccount[c] * sizeof(*h->common));
		h->common_off[c + 1] = h->common_off[c] + ccount[c];
	}
	rc = 0;
	goto out;
oom:
	oom(h);
out:
	free(w);
	free(koff);
	free(cstart);
	free(ccount);
	return rc;
}

int hclust_patterns(struct hclust *h, struct sim_frames *ft, const struct sim_pattern *p, size_t n,
		    const struct hclust_opts *o, const struct hclust_clusters **out)
{
	struct kept *kept = NULL;
	size_t nkept = 0, i, nc = 0;
	int nt = par_threads(o->threads > MAX_THREADS ? MAX_THREADS : o->threads), rc = -1;
	double t0;

	h->err[0] = '\0';
	memset(&h->st, 0, sizeof(h->st));
	h->st.threads = nt;
	free_result(h);
	if (isnan(o->cut)) {
		set_err(h, "%s", "the cut is not a number");
		return -1;
	}
	if (n > LINKAGE_MAX_POINTS || n >= NONE) {
		set_err(h, "%s", "too many patterns");
		return -1;
	}
	/* below 0 no pair can be within the cut (distances are in [0, 1]) */
	if (o->cut >= 0 && find_pairs(h, ft, p, n, o, nt, &kept, &nkept) < 0)
		goto out;
	t0 = now_ms();
	h->pairs = vec_alloc(nkept, sizeof(*h->pairs));
	h->z = vec_alloc(n > 1 ? n - 1 : 1, sizeof(*h->z));
	h->label = vec_alloc(n, sizeof(*h->label));
	h->off = vec_calloc(n + 2, sizeof(*h->off));
	h->members = vec_alloc(n, sizeof(*h->members));
	if (!h->pairs || !h->z || !h->label || !h->off || !h->members) {
		oom(h);
		goto out;
	}
	for (i = 0; i < nkept; i++) {
		h->pairs[i].i = kept[i].i;
		h->pairs[i].j = kept[i].j;
		h->pairs[i].d = 1 - kept[i].sim;
	}
	if (linkage_sparse(h->lk, h->pairs, nkept, n, o->method, h->z) < 0 ||
	    linkage_fcluster(h->lk, h->z, n, o->cut, h->label, &nc) < 0) {
		set_err(h, "%s", linkage_error(h->lk));
		goto out;
	}
	for (i = 0; i < n; i++)
		h->off[h->label[i] + 1]++;
	for (i = 0; i < nc; i++)
		h->off[i + 1] += h->off[i];
	{
		uint32_t *fill = vec_alloc(nc, sizeof(*fill));

		if (!fill) {
			oom(h);
			goto out;
		}
		memcpy(fill, h->off, nc * sizeof(*fill));
		for (i = 0; i < n; i++)
			h->members[fill[h->label[i]]++] = (uint32_t)i;
		free(fill);
	}
	h->res.nclusters = nc;
	h->st.ms_linkage = now_ms() - t0;
	t0 = now_ms();
	if (run_medoids(h, ft, p, n, kept, nkept, nt) < 0)
		goto out;
	h->st.ms_medoids = now_ms() - t0;
	h->res.npatterns = n;
	h->res.label = h->label;
	h->res.off = h->off;
	h->res.members = h->members;
	h->res.medoid = h->medoid;
	h->res.common_off = h->common_off;
	h->res.common = h->common;
	h->res.z = h->z;
	h->res.pairs = h->pairs;
	h->res.npairs = nkept;
	*out = &h->res;
	rc = 0;
out:
	free(kept);
	if (rc < 0)
		free_result(h);
	return rc;
}
