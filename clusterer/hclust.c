/*
 * hclust: agglomerative clustering (see hclust.h and docs/clustering.md).
 *
 * The dense algorithms are SciPy's (scipy/cluster/_hierarchy.pyx, 1.x):
 * nn_chain() for average and complete linkage, mst_single_linkage() for
 * single, then the rows sorted by height with a stable sort and renumbered
 * with a union-find (label()). Every comparison, scan order and update
 * formula is kept, so that ties go the same way and heights are the same
 * doubles.
 *
 * The sparse variants run the same algorithms over neighbour maps: cluster x
 * keeps an open-addressing map of the clusters it has a distance < 1 to; a
 * cluster not in the map is at distance exactly 1 (the update formulas turn
 * two 1s into 1 exactly, so "absent" stays exact). Where the dense scan would
 * pick the lowest-index cluster among those at distance 1, the sparse one
 * takes the lowest active index from a linked list.
 */
#include "hclust.h"

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
	struct hclust_stats st;
	/* the result of hclust_patterns() */
	struct hclust_clusters res;
	uint32_t *label, *off, *members, *medoid, *common_off, *common;
	struct hclust_merge *z;
	struct hclust_pair *pairs;
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

int hclust_method_parse(const char *s, enum hclust_method *out)
{
	if (strcmp(s, "average") == 0)
		*out = HCLUST_AVERAGE;
	else if (strcmp(s, "single") == 0)
		*out = HCLUST_SINGLE;
	else if (strcmp(s, "complete") == 0)
		*out = HCLUST_COMPLETE;
	else
		return -1;
	return 0;
}

const char *hclust_method_name(enum hclust_method m)
{
	switch (m) {
	case HCLUST_AVERAGE:
		return "average";
	case HCLUST_SINGLE:
		return "single";
	case HCLUST_COMPLETE:
		return "complete";
	}
	return "?";
}

struct hclust *hclust_open(void)
{
	return calloc(1, sizeof(struct hclust));
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

/* SciPy's distance updates (_hierarchy_distance_update.pxi), same expressions */
static inline double update(enum hclust_method m, double dxi, double dyi, uint32_t nx, uint32_t ny)
{
	if (m == HCLUST_COMPLETE)
		return dyi > dxi ? dyi : dxi;
	return ((double)nx * dxi + (double)ny * dyi) / (double)(nx + ny);
}

/* ---- rows: stable sort by height, then SciPy's label() ---- */

struct row_ord {
	double d;
	uint32_t k;
};

static int cmp_row(const void *a, const void *b)
{
	const struct row_ord *x = a, *y = b;

	if (x->d < y->d)
		return -1;
	if (x->d > y->d)
		return 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

static uint32_t uf_find(uint32_t *parent, uint32_t x)
{
	uint32_t r = x, t;

	while (parent[r] != r)
		r = parent[r];
	while (parent[x] != r) {
		t = parent[x];
		parent[x] = r;
		x = t;
	}
	return r;
}

/* raw[0..n-1) are merges of representative points (a, b) at heights dist; z gets SciPy's rows. */
static int finish_rows(struct hclust *h, const struct hclust_merge *raw, size_t n, struct hclust_merge *z)
{
	struct row_ord *ord;
	uint32_t *parent, *size, next = (uint32_t)n;
	size_t k, m = n - 1;

	if (n < 2)
		return 0;
	ord = malloc(m * sizeof(*ord));
	parent = malloc((2 * n - 1) * sizeof(*parent));
	size = malloc((2 * n - 1) * sizeof(*size));
	if (!ord || !parent || !size) {
		free(ord);
		free(parent);
		free(size);
		return oom(h);
	}
	for (k = 0; k < m; k++) {
		ord[k].d = raw[k].dist;
		ord[k].k = (uint32_t)k;
	}
	qsort(ord, m, sizeof(*ord), cmp_row);
	for (k = 0; k < 2 * n - 1; k++) {
		parent[k] = (uint32_t)k;
		size[k] = 1;
	}
	for (k = 0; k < m; k++) {
		const struct hclust_merge *r = &raw[ord[k].k];
		uint32_t xr = uf_find(parent, r->a), yr = uf_find(parent, r->b);

		z[k].a = xr < yr ? xr : yr;
		z[k].b = xr < yr ? yr : xr;
		z[k].dist = r->dist;
		parent[xr] = next;
		parent[yr] = next;
		size[next] = size[xr] + size[yr];
		z[k].size = size[next];
		next++;
	}
	free(ord);
	free(parent);
	free(size);
	return 0;
}

/* ---- dense ---- */

/* Active points in ascending order, compact, so that scans touch only live rows. */
struct actset {
	uint32_t *v;
	size_t n;
};

static void act_remove(struct actset *a, uint32_t x)
{
	size_t lo = 0, hi = a->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (a->v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(a->v + lo, a->v + lo + 1, (a->n - lo - 1) * sizeof(*a->v));
	a->n--;
}

/* nn_chain() of _hierarchy.pyx; off[i] + j is the condensed index of (i, j), i < j */
static int dense_chain(struct hclust *h, double *D, size_t n, enum hclust_method m, const int64_t *off,
		       struct hclust_merge *raw)
{
	uint32_t *size = malloc(n * sizeof(*size)), *chain = malloc(n * sizeof(*chain));
	struct actset act = { malloc(n * sizeof(uint32_t)), n };
	size_t k, len = 0, i;

	if (!size || !chain || !act.v) {
		free(size);
		free(chain);
		free(act.v);
		return oom(h);
	}
	for (i = 0; i < n; i++) {
		size[i] = 1;
		act.v[i] = (uint32_t)i;
	}
	for (k = 0; k + 1 < n; k++) {
		uint32_t x, y = 0, nx, ny;
		double cur;

		if (len == 0) {
			chain[0] = act.v[0];
			len = 1;
		}
		for (;;) {
			size_t a;

			x = chain[len - 1];
			if (len > 1) {
				y = chain[len - 2];
				cur = x < y ? D[off[x] + y] : D[off[y] + x];
			} else {
				cur = INFINITY;
			}
			/* columns above x, then x's row: the same order as SciPy's scan of all i */
			for (a = 0; a < act.n && act.v[a] < x; a++) {
				double d = D[off[act.v[a]] + x];

				if (d < cur) {
					cur = d;
					y = act.v[a];
				}
			}
			{
				const double *row = D + off[x];

				for (a++; a < act.n; a++) {
					double d = row[act.v[a]];

					if (d < cur) {
						cur = d;
						y = act.v[a];
					}
				}
			}
			if (len > 1 && y == chain[len - 2])
				break;
			chain[len++] = y;
		}
		len -= 2;
		if (x > y) {
			uint32_t t = x;

			x = y;
			y = t;
		}
		nx = size[x];
		ny = size[y];
		raw[k].a = x;
		raw[k].b = y;
		raw[k].dist = cur;
		raw[k].size = nx + ny;
		size[x] = 0;
		size[y] = nx + ny;
		act_remove(&act, x);
		for (i = 0; i < act.n; i++) {
			uint32_t j = act.v[i];
			double *dx, *dy;

			if (j == y)
				continue;
			dx = j < x ? &D[off[j] + x] : &D[off[x] + j];
			dy = j < y ? &D[off[j] + y] : &D[off[y] + j];
			*dy = update(m, *dx, *dy, nx, ny);
		}
	}
	free(size);
	free(chain);
	free(act.v);
	return 0;
}

/* mst_single_linkage() of _hierarchy.pyx */
static int dense_mst(struct hclust *h, const double *dist, size_t n, const int64_t *off, struct hclust_merge *raw)
{
	double *D = malloc(n * sizeof(*D));
	struct actset un = { malloc(n * sizeof(uint32_t)), n };
	size_t k, i;
	uint32_t x = 0, y = 0;

	if (!D || !un.v) {
		free(D);
		free(un.v);
		return oom(h);
	}
	for (i = 0; i < n; i++) {
		D[i] = INFINITY;
		un.v[i] = (uint32_t)i;
	}
	for (k = 0; k + 1 < n; k++) {
		double cur = INFINITY;

		act_remove(&un, x);
		for (i = 0; i < un.n; i++) {
			uint32_t j = un.v[i];
			double d = j < x ? dist[off[j] + x] : dist[off[x] + j];

			if (D[j] > d)
				D[j] = d;
			if (D[j] < cur) {
				y = j;
				cur = D[j];
			}
		}
		raw[k].a = x;
		raw[k].b = y;
		raw[k].dist = cur;
		raw[k].size = 0;
		x = y;
	}
	free(D);
	free(un.v);
	return 0;
}

int hclust_linkage(struct hclust *h, double *dist, size_t n, enum hclust_method m, struct hclust_merge *z)
{
	int64_t *off;
	struct hclust_merge *raw;
	size_t i, nd;
	int rc;

	h->err[0] = '\0';
	if (n > HCLUST_MAX_POINTS) {
		set_err(h, "%s", "too many points");
		return -1;
	}
	if (n < 2)
		return 0;
	nd = n * (n - 1) / 2;
	for (i = 0; i < nd; i++) {
		if (!isfinite(dist[i])) {
			snprintf(h->err, sizeof(h->err), "distance %zu of the condensed matrix is not finite", i);
			return -1;
		}
	}
	off = malloc(n * sizeof(*off));
	raw = malloc((n - 1) * sizeof(*raw));
	if (!off || !raw) {
		free(off);
		free(raw);
		return oom(h);
	}
	/* condensed index of (i, j), i < j: n*i - i*(i+1)/2 + j - i - 1 */
	for (i = 0; i < n; i++)
		off[i] = (int64_t)(n * i) - (int64_t)(i * (i + 1) / 2) - (int64_t)i - 1;
	if (m == HCLUST_SINGLE)
		rc = dense_mst(h, dist, n, off, raw);
	else
		rc = dense_chain(h, dist, n, m, off, raw);
	if (rc == 0)
		rc = finish_rows(h, raw, n, z);
	free(off);
	free(raw);
	return rc;
}

/* ---- sparse: neighbour maps ---- */

/* Open addressing, linear probing, deletion by backward shift. Keys are cluster indexes. */
struct nmap {
	uint32_t *k;
	double *v;
	uint32_t cap, cnt;      /* cap: 0 or a power of two */
};

static inline uint32_t nm_slot(uint32_t key, uint32_t cap)
{
	return (key * 2654435761u) & (cap - 1);
}

static bool nm_get(const struct nmap *m, uint32_t key, double *v)
{
	uint32_t i;

	if (!m->cap)
		return false;
	for (i = nm_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->k[i] == key) {
			*v = m->v[i];
			return true;
		}
		if (m->k[i] == NONE)
			return false;
	}
}

static int nm_grow(struct nmap *m, uint32_t ncap)
{
	uint32_t *nk = malloc(ncap * sizeof(*nk)), j, i;
	double *nv = malloc(ncap * sizeof(*nv));

	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -1;
	}
	memset(nk, 0xff, ncap * sizeof(*nk));
	for (j = 0; j < m->cap; j++) {
		if (m->k[j] == NONE)
			continue;
		for (i = nm_slot(m->k[j], ncap); nk[i] != NONE; i = (i + 1) & (ncap - 1))
			;
		nk[i] = m->k[j];
		nv[i] = m->v[j];
	}
	free(m->k);
	free(m->v);
	m->k = nk;
	m->v = nv;
	m->cap = ncap;
	return 0;
}

/* Returns 0 (added), 1 (replaced) or -1 (out of memory). */
static int nm_put(struct nmap *m, uint32_t key, double v)
{
	uint32_t i;

	if ((m->cnt + 1) * 2 > m->cap && nm_grow(m, m->cap ? m->cap * 2 : 4) < 0)
		return -1;
	for (i = nm_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->k[i] == key) {
			m->v[i] = v;
			return 1;
		}
		if (m->k[i] == NONE)
			break;
	}
	m->k[i] = key;
	m->v[i] = v;
	m->cnt++;
	return 0;
}

static void nm_del(struct nmap *m, uint32_t key)
{
	uint32_t i, j, mask = m->cap - 1;

	if (!m->cap)
		return;
	for (i = nm_slot(key, m->cap);; i = (i + 1) & mask) {
		if (m->k[i] == NONE)
			return;
		if (m->k[i] == key)
			break;
	}
	/* shift back the entries of the run that probed past i */
	for (j = (i + 1) & mask; m->k[j] != NONE; j = (j + 1) & mask) {
		uint32_t home = nm_slot(m->k[j], m->cap);

		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->k[i] = m->k[j];
			m->v[i] = m->v[j];
			i = j;
		}
	}
	m->k[i] = NONE;
	m->cnt--;
}

static void nm_release(struct nmap *m)
{
	free(m->k);
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* Builds both directions of every pair with d < 1. */
static int build_maps(struct hclust *h, const struct hclust_pair *pairs, size_t npairs, size_t n, struct nmap *nb)
{
	size_t p;

	for (p = 0; p < npairs; p++) {
		const struct hclust_pair *q = &pairs[p];
		int r;

		if (q->i >= n || q->j >= n || q->i == q->j) {
			snprintf(h->err, sizeof(h->err), "pair %zu: (%u, %u) is not a pair of two of the %zu points",
				 p, (unsigned)q->i, (unsigned)q->j, n);
			return -1;
		}
		if (!(q->d >= 0 && q->d <= 1)) {
			snprintf(h->err, sizeof(h->err), "pair %zu: distance %g is not in [0, 1]", p, q->d);
			return -1;
		}
		if (q->d == 1)
			continue;
		r = nm_put(&nb[q->i], q->j, q->d);
		if (r < 0 || nm_put(&nb[q->j], q->i, q->d) < 0)
			return oom(h);
		if (r == 1) {
			snprintf(h->err, sizeof(h->err), "pair %zu: (%u, %u) is listed twice", p, (unsigned)q->i,
				 (unsigned)q->j);
			return -1;
		}
	}
	return 0;
}

/* Active clusters as a doubly linked list in ascending order: the lowest one at hand. */
struct alist {
	uint32_t *next, *prev, head;
};

static int al_init(struct alist *l, size_t n)
{
	size_t i;

	l->next = malloc(n * sizeof(uint32_t));
	l->prev = malloc(n * sizeof(uint32_t));
	if (!l->next || !l->prev)
		return -1;
	for (i = 0; i < n; i++) {
		l->next[i] = i + 1 < n ? (uint32_t)(i + 1) : NONE;
		l->prev[i] = i ? (uint32_t)(i - 1) : NONE;
	}
	l->head = n ? 0 : NONE;
	return 0;
}

static void al_remove(struct alist *l, uint32_t x)
{
	if (l->prev[x] != NONE)
		l->next[l->prev[x]] = l->next[x];
	else
		l->head = l->next[x];
	if (l->next[x] != NONE)
		l->prev[l->next[x]] = l->prev[x];
}

static void al_release(struct alist *l)
{
	free(l->next);
	free(l->prev);
}

struct upd {
	uint32_t i;
	double d;
};

/* nn_chain() over neighbour maps */
static int sparse_chain(struct hclust *h, struct nmap *nb, size_t n, enum hclust_method m,
			struct hclust_merge *raw)
{
	uint32_t *size = malloc(n * sizeof(*size)), *chain = malloc(n * sizeof(*chain));
	struct alist act = { NULL, NULL, NONE };
	struct upd *up = NULL;
	size_t cap_up = 0, k, len = 0, i;
	int rc = -1;

	if (!size || !chain || al_init(&act, n) < 0)
		goto out;
	for (i = 0; i < n; i++)
		size[i] = 1;
	for (k = 0; k + 1 < n; k++) {
		uint32_t x, y = 0, nx, ny, s;
		double cur;
		size_t nup = 0;
		struct nmap fresh = { NULL, NULL, 0, 0 };

		if (len == 0) {
			chain[0] = act.head;
			len = 1;
		}
		for (;;) {
			const struct nmap *mx;
			double bv = INFINITY;
			uint32_t bk = NONE;

			x = chain[len - 1];
			mx = &nb[x];
			if (len > 1) {
				y = chain[len - 2];
				if (!nm_get(mx, y, &cur))
					cur = 1.0;
			} else {
				cur = INFINITY;
			}
			/* the dense scan takes the first (lowest) index at the strict minimum */
			for (s = 0; s < mx->cap; s++) {
				if (mx->k[s] == NONE)
					continue;
				if (mx->v[s] < bv || (mx->v[s] == bv && mx->k[s] < bk)) {
					bv = mx->v[s];
					bk = mx->k[s];
				}
			}
			if (bk != NONE && bv < cur) {
				y = bk;
				cur = bv;
			} else if (len == 1) {
				/* no neighbour below 1: every other cluster is at 1, the lowest index wins */
				y = act.head != x ? act.head : act.next[act.head];
				cur = 1.0;
			}
			if (len > 1 && y == chain[len - 2])
				break;
			chain[len++] = y;
		}
		len -= 2;
		if (x > y) {
			uint32_t t = x;

			x = y;
			y = t;
		}
		nx = size[x];
		ny = size[y];
		raw[k].a = x;
		raw[k].b = y;
		raw[k].dist = cur;
		raw[k].size = nx + ny;
		size[x] = 0;
		size[y] = nx + ny;
		al_remove(&act, x);

		/* new distances to y: first x's neighbours, then y's that x lacks (others stay at 1) */
		if ((size_t)nb[x].cnt + nb[y].cnt > cap_up) {
			size_t nc = ((size_t)nb[x].cnt + nb[y].cnt) * 2;
			struct upd *nu = realloc(up, nc * sizeof(*nu));

			if (!nu)
				goto out;
			up = nu;
			cap_up = nc;
		}
		for (s = 0; s < nb[x].cap; s++) {
			uint32_t j = nb[x].k[s];
			double dy;

			if (j == NONE || j == y)
				continue;
			if (!nm_get(&nb[y], j, &dy))
				dy = 1.0;
			up[nup].i = j;
			up[nup++].d = update(m, nb[x].v[s], dy, nx, ny);
		}
		for (s = 0; s < nb[y].cap; s++) {
			uint32_t j = nb[y].k[s];
			double dx;

			if (j == NONE || j == x || nm_get(&nb[x], j, &dx))
				continue;
			up[nup].i = j;
			up[nup++].d = update(m, 1.0, nb[y].v[s], nx, ny);
		}
		nm_release(&nb[x]);
		for (i = 0; i < nup; i++) {
			struct nmap *mi = &nb[up[i].i];

			nm_del(mi, x);
			if (up[i].d < 1) {
				if (nm_put(&fresh, up[i].i, up[i].d) < 0 || nm_put(mi, y, up[i].d) < 0) {
					nm_release(&fresh);
					goto out;
				}
			} else {
				nm_del(mi, y);
			}
		}
		nm_release(&nb[y]);
		nb[y] = fresh;
	}
	rc = 0;
out:
	if (rc < 0)
		oom(h);
	free(size);
	free(chain);
	free(up);
	al_release(&act);
	return rc;
}

/* A binary heap of (distance, point), smallest distance then lowest point first. */
struct heap {
	struct upd *v;
	size_t n, cap;
};

static inline bool heap_less(const struct upd *a, const struct upd *b)
{
	return a->d < b->d || (a->d == b->d && a->i < b->i);
}

static int heap_push(struct heap *hp, uint32_t i, double d)
{
	size_t c;

	if (hp->n == hp->cap) {
		size_t nc = hp->cap ? hp->cap * 2 : 64;
		struct upd *nv = realloc(hp->v, nc * sizeof(*nv));

		if (!nv)
			return -1;
		hp->v = nv;
		hp->cap = nc;
	}
	c = hp->n++;
	hp->v[c].i = i;
	hp->v[c].d = d;
	while (c > 0 && heap_less(&hp->v[c], &hp->v[(c - 1) / 2])) {
		struct upd t = hp->v[c];

		hp->v[c] = hp->v[(c - 1) / 2];
		hp->v[(c - 1) / 2] = t;
		c = (c - 1) / 2;
	}
	return 0;
}

static void heap_pop(struct heap *hp)
{
	size_t c = 0;

	hp->v[0] = hp->v[--hp->n];
	for (;;) {
		size_t l = 2 * c + 1, r = l + 1, s = c;
		struct upd t;

		if (l < hp->n && heap_less(&hp->v[l], &hp->v[s]))
			s = l;
		if (r < hp->n && heap_less(&hp->v[r], &hp->v[s]))
			s = r;
		if (s == c)
			break;
		t = hp->v[c];
		hp->v[c] = hp->v[s];
		hp->v[s] = t;
		c = s;
	}
}

/* mst_single_linkage() over neighbour maps: D starts at 1 (what the first step leaves for points that are
 * not neighbours of point 0); the heap holds the points whose D fell below 1. */
static int sparse_mst(struct hclust *h, const struct nmap *nb, size_t n, struct hclust_merge *raw)
{
	double *D = malloc(n * sizeof(*D));
	bool *merged = calloc(n, sizeof(*merged));
	struct alist un = { NULL, NULL, NONE };
	struct heap hp = { NULL, 0, 0 };
	size_t k, i;
	uint32_t x = 0, y, s;
	int rc = -1;

	if (!D || !merged || al_init(&un, n) < 0)
		goto out;
	for (i = 0; i < n; i++)
		D[i] = 1.0;
	for (k = 0; k + 1 < n; k++) {
		double cur;

		merged[x] = true;
		al_remove(&un, x);
		for (s = 0; s < nb[x].cap; s++) {
			uint32_t j = nb[x].k[s];

			if (j == NONE || merged[j] || !(D[j] > nb[x].v[s]))
				continue;
			D[j] = nb[x].v[s];
			if (heap_push(&hp, j, D[j]) < 0)
				goto out;
		}
		while (hp.n && (merged[hp.v[0].i] || D[hp.v[0].i] != hp.v[0].d))
			heap_pop(&hp);
		if (hp.n) {
			y = hp.v[0].i;
			cur = hp.v[0].d;
		} else {
			y = un.head;
			cur = 1.0;
		}
		raw[k].a = x;
		raw[k].b = y;
		raw[k].dist = cur;
		raw[k].size = 0;
		x = y;
	}
	rc = 0;
out:
	if (rc < 0)
		oom(h);
	free(D);
	free(merged);
	free(hp.v);
	al_release(&un);
	return rc;
}

int hclust_linkage_sparse(struct hclust *h, const struct hclust_pair *pairs, size_t npairs, size_t n,
			  enum hclust_method m, struct hclust_merge *z)
{
	struct nmap *nb;
	struct hclust_merge *raw;
	size_t i;
	int rc;

	h->err[0] = '\0';
	if (n > HCLUST_MAX_POINTS) {
		set_err(h, "%s", "too many points");
		return -1;
	}
	nb = calloc(n ? n : 1, sizeof(*nb));
	raw = malloc((n > 1 ? n - 1 : 1) * sizeof(*raw));
	if (!nb || !raw) {
		free(nb);
		free(raw);
		return oom(h);
	}
	rc = build_maps(h, pairs, npairs, n, nb);
	if (rc == 0 && n >= 2) {
		rc = m == HCLUST_SINGLE ? sparse_mst(h, nb, n, raw) : sparse_chain(h, nb, n, m, raw);
		if (rc == 0)
			rc = finish_rows(h, raw, n, z);
	}
	for (i = 0; i < n; i++)
		nm_release(&nb[i]);
	free(nb);
	free(raw);
	return rc;
}

/* ---- flat clusters ---- */

int hclust_fcluster(struct hclust *h, const struct hclust_merge *z, size_t n, double cut, uint32_t *labels,
		    size_t *nclusters)
{
	uint32_t *parent, *rep, *lab;
	double *maxh;
	size_t k, i, nc = 0;

	h->err[0] = '\0';
	if (isnan(cut)) {
		set_err(h, "%s", "the cut is not a number");
		return -1;
	}
	if (n > HCLUST_MAX_POINTS) {
		set_err(h, "%s", "too many points");
		return -1;
	}
	parent = malloc((n ? n : 1) * sizeof(*parent));
	lab = malloc((n ? n : 1) * sizeof(*lab));
	rep = malloc((n ? 2 * n : 1) * sizeof(*rep));
	maxh = malloc((n ? 2 * n : 1) * sizeof(*maxh));
	if (!parent || !lab || !rep || !maxh) {
		free(parent);
		free(lab);
		free(rep);
		free(maxh);
		return oom(h);
	}
	for (i = 0; i < n; i++) {
		parent[i] = (uint32_t)i;
		rep[i] = (uint32_t)i;
		maxh[i] = -INFINITY;
		lab[i] = NONE;
	}
	/* maxh of a cluster: its highest merge (SciPy's get_max_dist_for_each_cluster); flat clusters are the
	 * maximal subtrees with maxh <= cut, so merging where maxh <= cut joins exactly their points */
	for (k = 0; k + 1 < n; k++) {
		uint32_t a = z[k].a, b = z[k].b, c = (uint32_t)(n + k);
		double mh = z[k].dist;

		if (a >= c || b >= c || a == b || isnan(mh)) {
			snprintf(h->err, sizeof(h->err), "row %zu of the linkage is not valid", k);
			free(parent);
			free(lab);
			free(rep);
			free(maxh);
			return -1;
		}
		if (maxh[a] > mh)
			mh = maxh[a];
		if (maxh[b] > mh)
			mh = maxh[b];
		maxh[c] = mh;
		rep[c] = rep[a];
		if (mh <= cut) {
			uint32_t ra = uf_find(parent, rep[a]), rb = uf_find(parent, rep[b]);

			parent[ra] = rb;
		}
	}
	for (i = 0; i < n; i++) {
		uint32_t r = uf_find(parent, (uint32_t)i);

		if (lab[r] == NONE)
			lab[r] = (uint32_t)nc++;
		labels[i] = lab[r];
	}
	*nclusters = nc;
	free(parent);
	free(lab);
	free(rep);
	free(maxh);
	return 0;
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
	pi->dfr = malloc((total ? total : 1) * sizeof(*pi->dfr));
	pi->da = malloc((total ? total : 1) * sizeof(*pi->da));
	pi->db = malloc((total ? total : 1) * sizeof(*pi->db));
	pi->pre = malloc((total ? total : 1) * sizeof(*pi->pre));
	pi->doff = malloc((n + 1) * sizeof(*pi->doff));
	pi->poff = malloc((n + 1) * sizeof(*pi->poff));
	pi->btot = malloc((n ? n : 1) * sizeof(*pi->btot));
	pi->foff = calloc(F + 1, sizeof(*pi->foff));
	pi->ploff = calloc(F + 1, sizeof(*pi->ploff));
	dfc = calloc(F ? F : 1, sizeof(*dfc));
	tmp = malloc(SIM_MAX_LEN * sizeof(*tmp));
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
	pi->full = malloc((nd ? nd : 1) * sizeof(*pi->full));
	pi->prel = malloc((npre ? npre : 1) * sizeof(*pi->prel));
	if (!pi->full || !pi->prel) {
		oom(h);
		goto out;
	}
	{
		size_t *fa = malloc((F ? F : 1) * sizeof(*fa)), *pa = malloc((F ? F : 1) * sizeof(*pa));

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
	if (pv->n == pv->cap) {
		size_t nc = pv->cap ? pv->cap * 2 : 1024;
		struct kept *nv = realloc(pv->v, nc * sizeof(*nv));

		if (!nv)
			return -1;
		pv->v = nv;
		pv->cap = nc;
	}
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
	const struct kept *known;
	const size_t *koff;
	atomic_size_t next;
	atomic_int failed;
};

struct pworker {
	pthread_t th;
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
static int extend_pairs(struct pworker *w, struct sim_ctx *ctx, uint32_t P, uint32_t *stamp)
{
	const struct pjob *jb = w->job;
	const struct pinfo *pi = jb->pi;
	size_t c, e;

	for (c = jb->koff[P]; c < jb->koff[P + 1]; c++)
		stamp[jb->known[c].j] = P;
	for (e = pi->doff[P]; e < pi->doff[P + 1]; e++) {
		size_t f = pi->dfr[e];

		for (c = upper(pi->full, pi->foff[f], pi->foff[f + 1], P); c < pi->foff[f + 1]; c++) {
			uint32_t Q = pi->full[c];
			double sim;

			if (stamp[Q] == P || jb->comp[Q] != jb->comp[P])
				continue;
			stamp[Q] = P;
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
	}
	return 0;
}

static void *pair_worker(void *arg)
{
	struct pworker *w = arg;
	struct pjob *jb = w->job;
	const struct pinfo *pi = jb->pi;
	struct sim_ctx *ctx = sim_ctx_open(jb->ft);
	uint32_t *stamp = malloc((jb->n ? jb->n : 1) * sizeof(*stamp)), *cand = malloc((jb->n ? jb->n : 1) *
										      sizeof(*cand));
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
	pthread_t th;
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
				if (k > cap_sums) {
					double *ns = realloc(sums, k * sizeof(*ns));

					if (!ns)
						goto fail_oom;
					sums = ns;
					cap_sums = k;
				}
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

			if (k > cap_mp) {
				struct sim_pattern *nm = realloc(mp, k * sizeof(*nm));

				if (!nm)
					goto fail_oom;
				mp = nm;
				cap_mp = k;
			}
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

static int nthreads(const struct hclust_opts *o)
{
	long t = o->threads;

	if (t <= 0)
		t = sysconf(_SC_NPROCESSORS_ONLN);
	if (t < 1)
		t = 1;
	if (t > MAX_THREADS)
		t = MAX_THREADS;
	return (int)t;
}

/* Runs the pair workers on jb and appends what they found to *kept (by (i, j) afterwards). */
static int run_pair_workers(struct hclust *h, struct pjob *jb, int nt, struct kept **kept, size_t *nkept)
{
	struct pworker *w = calloc((size_t)nt, sizeof(*w));
	size_t total = 0;
	struct kept *nk;
	int t, started = 0, rc = -1;

	if (!w)
		return oom(h);
	atomic_init(&jb->next, 0);
	atomic_init(&jb->failed, 0);
	for (t = 0; t < nt; t++) {
		w[t].job = jb;
		if (pthread_create(&w[t].th, NULL, pair_worker, &w[t]) != 0) {
			atomic_store(&jb->failed, 1);
			set_err(h, "%s", "cannot start a thread");
			break;
		}
		started++;
	}
	for (t = 0; t < started; t++)
		pthread_join(w[t].th, NULL);
	for (t = 0; t < started; t++) {
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
	if (total > (SIZE_MAX / sizeof(**kept)) - *nkept - 1 ||
	    !(nk = realloc(*kept, (*nkept + total + 1) * sizeof(**kept)))) {
		oom(h);
		goto out;
	}
	*kept = nk;
	for (t = 0; t < started; t++) {
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

	*comp = malloc((n ? n : 1) * sizeof(**comp));
	*koff = calloc(n + 1, sizeof(**koff));
	if (!*comp || !*koff)
		return oom(h);
	for (i = 0; i < n; i++)
		(*comp)[i] = (uint32_t)i;
	for (i = 0; i < nkept; i++) {
		uint32_t a = uf_find(*comp, kept[i].i), b = uf_find(*comp, kept[i].j);

		if (a != b)
			(*comp)[a > b ? a : b] = a < b ? a : b;
		(*koff)[kept[i].i + 1]++;
	}
	for (i = 0; i < n; i++)
		(*koff)[i + 1] += (*koff)[i];
	for (i = 0; i < n; i++)
		(*comp)[i] = uf_find(*comp, (uint32_t)i);
	{
		uint32_t *size = calloc(n ? n : 1, sizeof(*size));

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
	uint32_t *comp = NULL;
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
	if (o->method == HCLUST_AVERAGE && *nkept) {
		if (components(h, *kept, *nkept, n, &comp, &koff) < 0)
			goto out;
		jb.comp = comp;
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

static int run_medoids(struct hclust *h, struct sim_frames *ft, const struct sim_pattern *p, size_t n,
		       const struct kept *kept, size_t nkept, int nt)
{
	struct mjob jb;
	struct mworker *w = calloc((size_t)nt, sizeof(*w));
	size_t *koff = calloc(n + 1, sizeof(*koff)), *cstart = NULL, i, c, nc = h->res.nclusters, tot = 0;
	uint32_t *ccount = NULL;
	int t, started, phase, rc = -1;

	if (!w || !koff)
		goto oom;
	for (i = 0; i < nkept; i++)
		koff[kept[i].i + 1]++;
	for (i = 0; i < n; i++)
		koff[i + 1] += koff[i];
	h->medoid = malloc((nc ? nc : 1) * sizeof(*h->medoid));
	cstart = malloc((nc + 1) * sizeof(*cstart));
	ccount = malloc((nc ? nc : 1) * sizeof(*ccount));
	h->common_off = malloc((nc + 1) * sizeof(*h->common_off));
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
			h->common = malloc((tot ? tot : 1) * sizeof(*h->common));
			if (!h->common)
				goto oom;
			jb.common = h->common;
			jb.cstart = cstart;
		}
		jb.phase = phase;
		atomic_init(&jb.next, 0);
		atomic_init(&jb.failed, 0);
		started = 0;
		for (t = 0; t < nt; t++) {
			w[t].job = &jb;
			if (pthread_create(&w[t].th, NULL, medoid_worker, &w[t]) != 0) {
				atomic_store(&jb.failed, 1);
				set_err(h, "%s", "cannot start a thread");
				break;
			}
			started++;
		}
		for (t = 0; t < started; t++)
			pthread_join(w[t].th, NULL);
		for (t = 0; t < started; t++) {
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
	int nt = nthreads(o), rc = -1;
	double t0;

	h->err[0] = '\0';
	memset(&h->st, 0, sizeof(h->st));
	h->st.threads = nt;
	free_result(h);
	if (isnan(o->cut)) {
		set_err(h, "%s", "the cut is not a number");
		return -1;
	}
	if (n > HCLUST_MAX_POINTS || n >= NONE) {
		set_err(h, "%s", "too many patterns");
		return -1;
	}
	/* below 0 no pair can be within the cut (distances are in [0, 1]) */
	if (o->cut >= 0 && find_pairs(h, ft, p, n, o, nt, &kept, &nkept) < 0)
		goto out;
	t0 = now_ms();
	h->pairs = malloc((nkept ? nkept : 1) * sizeof(*h->pairs));
	h->z = malloc((n > 1 ? n - 1 : 1) * sizeof(*h->z));
	h->label = malloc((n ? n : 1) * sizeof(*h->label));
	h->off = calloc(n + 2, sizeof(*h->off));
	h->members = malloc((n ? n : 1) * sizeof(*h->members));
	if (!h->pairs || !h->z || !h->label || !h->off || !h->members) {
		oom(h);
		goto out;
	}
	for (i = 0; i < nkept; i++) {
		h->pairs[i].i = kept[i].i;
		h->pairs[i].j = kept[i].j;
		h->pairs[i].d = 1 - kept[i].sim;
	}
	if (hclust_linkage_sparse(h, h->pairs, nkept, n, o->method, h->z) < 0)
		goto out;
	if (hclust_fcluster(h, h->z, n, o->cut, h->label, &nc) < 0)
		goto out;
	for (i = 0; i < n; i++)
		h->off[h->label[i] + 1]++;
	for (i = 0; i < nc; i++)
		h->off[i + 1] += h->off[i];
	{
		uint32_t *fill = malloc((nc ? nc : 1) * sizeof(*fill));

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
