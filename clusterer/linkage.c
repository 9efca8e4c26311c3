/*
 * linkage: agglomerative clustering, SciPy-compatible (see linkage.h and
 * docs/clustering.md).
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
#include "clusterer/linkage.h"
#include "common/imap.h"
#include "common/vec.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

struct linkage {
	char err[256];
};

static void set_err(struct linkage *h, const char *fmt, const char *arg)
{
	snprintf(h->err, sizeof(h->err), fmt, arg);
}

static int oom(struct linkage *h)
{
	set_err(h, "%s", "out of memory");
	return -1;
}

struct linkage *linkage_open(void)
{
	return calloc(1, sizeof(struct linkage));
}

void linkage_free(struct linkage *h)
{
	free(h);
}

const char *linkage_error(const struct linkage *h)
{
	return h->err;
}

int linkage_method_parse(const char *s, enum linkage_method *out)
{
	if (strcmp(s, "average") == 0)
		*out = LINKAGE_AVERAGE;
	else if (strcmp(s, "single") == 0)
		*out = LINKAGE_SINGLE;
	else if (strcmp(s, "complete") == 0)
		*out = LINKAGE_COMPLETE;
	else
		return -1;
	return 0;
}

const char *linkage_method_name(enum linkage_method m)
{
	switch (m) {
	case LINKAGE_AVERAGE:
		return "average";
	case LINKAGE_SINGLE:
		return "single";
	case LINKAGE_COMPLETE:
		return "complete";
	}
	return "?";
}

/* SciPy's distance updates (_hierarchy_distance_update.pxi), same expressions */
static inline double update(enum linkage_method m, double dxi, double dyi, uint32_t nx, uint32_t ny)
{
	if (m == LINKAGE_COMPLETE)
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

uint32_t linkage_uf_find(uint32_t *parent, uint32_t x)
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
static int finish_rows(struct linkage *h, const struct linkage_merge *raw, size_t n, struct linkage_merge *z)
{
	struct row_ord *ord;
	uint32_t *parent, *size, next = (uint32_t)n;
	size_t k, m = n - 1;

	if (n < 2)
		return 0;
	ord = vec_alloc(m, sizeof(*ord));
	parent = vec_alloc(2 * n - 1, sizeof(*parent));
	size = vec_alloc(2 * n - 1, sizeof(*size));
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
		const struct linkage_merge *r = &raw[ord[k].k];
		uint32_t xr = linkage_uf_find(parent, r->a), yr = linkage_uf_find(parent, r->b);

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
/*
 * The nearest-neighbour chain (dense or sparse) found reciprocal neighbours x and y at distance d:
 * the merge joins them, the lower index first; y stands for the union from then on and x is gone
 * (size 0). *nx and *ny: the sizes before, for the distance updates.
 */
static void chain_merge(struct linkage_merge *merge, uint32_t *size, uint32_t *x, uint32_t *y, double d,
			uint32_t *nx, uint32_t *ny)
{
	if (*x > *y) {
		uint32_t t = *x;

		*x = *y;
		*y = t;
	}
	*nx = size[*x];
	*ny = size[*y];
	merge->a = *x;
	merge->b = *y;
	merge->dist = d;
	merge->size = *nx + *ny;
	size[*x] = 0;
	size[*y] = *nx + *ny;
}

static int dense_chain(struct linkage *h, double *D, size_t n, enum linkage_method m, const int64_t *off,
		       struct linkage_merge *raw)
{
	uint32_t *size = vec_alloc(n, sizeof(*size)), *chain = vec_alloc(n, sizeof(*chain));
	struct actset act = { vec_alloc(n, sizeof(uint32_t)), n };
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
		chain_merge(&raw[k], size, &x, &y, cur, &nx, &ny);
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
static int dense_mst(struct linkage *h, const double *dist, size_t n, const int64_t *off, struct linkage_merge *raw)
{
	double *D = vec_alloc(n, sizeof(*D));
	struct actset un = { vec_alloc(n, sizeof(uint32_t)), n };
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

int linkage_dense(struct linkage *h, double *dist, size_t n, enum linkage_method m, struct linkage_merge *z)
{
	int64_t *off;
	struct linkage_merge *raw;
	size_t i, nd;
	int rc;

	h->err[0] = '\0';
	if (n > LINKAGE_MAX_POINTS) {
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
	off = vec_alloc(n, sizeof(*off));
	raw = vec_alloc(n - 1, sizeof(*raw));
	if (!off || !raw) {
		free(off);
		free(raw);
		return oom(h);
	}
	/* condensed index of (i, j), i < j: n*i - i*(i+1)/2 + j - i - 1 */
	for (i = 0; i < n; i++)
		off[i] = (int64_t)(n * i) - (int64_t)(i * (i + 1) / 2) - (int64_t)i - 1;
	if (m == LINKAGE_SINGLE)
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

/* Each cluster's neighbours below distance 1: an imap from cluster index to distance (a double). */

/* Builds both directions of every pair with d < 1. */
static int build_maps(struct linkage *h, const struct linkage_pair *pairs, size_t npairs, size_t n, struct imap *nb)
{
	size_t p;

	for (p = 0; p < npairs; p++) {
		const struct linkage_pair *q = &pairs[p];
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
		r = imap_put_double(&nb[q->i], q->j, q->d);
		if (r < 0 || imap_put_double(&nb[q->j], q->i, q->d) < 0)
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

	l->next = vec_alloc(n, sizeof(uint32_t));
	l->prev = vec_alloc(n, sizeof(uint32_t));
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
static int sparse_chain(struct linkage *h, struct imap *nb, size_t n, enum linkage_method m,
			struct linkage_merge *raw)
{
	uint32_t *size = vec_alloc(n, sizeof(*size)), *chain = vec_alloc(n, sizeof(*chain));
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
		struct imap fresh = IMAP_INIT;

		if (len == 0) {
			chain[0] = act.head;
			len = 1;
		}
		for (;;) {
			const struct imap *mx;
			double bv = INFINITY;
			uint32_t bk = NONE;

			x = chain[len - 1];
			mx = &nb[x];
			if (len > 1) {
				y = chain[len - 2];
				if (!imap_get_double(mx, y, &cur))
					cur = 1.0;
			} else {
				cur = INFINITY;
			}
			/* the dense scan takes the first (lowest) index at the strict minimum */
			for (s = 0; s < mx->cap; s++) {
				double v;

				if (mx->keys[s] == IMAP_EMPTY)
					continue;
				v = imap_double_at(mx, s);
				if (v < bv || (v == bv && mx->keys[s] < bk)) {
					bv = v;
					bk = (uint32_t)mx->keys[s];
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
		chain_merge(&raw[k], size, &x, &y, cur, &nx, &ny);
		al_remove(&act, x);

		/* new distances to y: first x's neighbours, then y's that x lacks (others stay at 1) */
		if (vec_reserve(&up, &cap_up, (size_t)nb[x].cnt + nb[y].cnt, sizeof(*up)) < 0)
			goto out;
		for (s = 0; s < nb[x].cap; s++) {
			uint32_t j = (uint32_t)nb[x].keys[s];
			double dy;

			if (nb[x].keys[s] == IMAP_EMPTY || j == y)
				continue;
			if (!imap_get_double(&nb[y], j, &dy))
				dy = 1.0;
			up[nup].i = j;
			up[nup++].d = update(m, imap_double_at(&nb[x], s), dy, nx, ny);
		}
		for (s = 0; s < nb[y].cap; s++) {
			uint32_t j = (uint32_t)nb[y].keys[s];
			double dx;

			if (nb[y].keys[s] == IMAP_EMPTY || j == x || imap_get_double(&nb[x], j, &dx))
				continue;
			up[nup].i = j;
			up[nup++].d = update(m, 1.0, imap_double_at(&nb[y], s), nx, ny);
		}
		imap_free(&nb[x]);
		for (i = 0; i < nup; i++) {
			struct imap *mi = &nb[up[i].i];

			imap_del(mi, x);
			if (up[i].d < 1) {
				if (imap_put_double(&fresh, up[i].i, up[i].d) < 0 || imap_put_double(mi, y, up[i].d) < 0) {
					imap_free(&fresh);
					goto out;
				}
			} else {
				imap_del(mi, y);
			}
		}
		imap_free(&nb[y]);
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

	if (vec_reserve(&hp->v, &hp->cap, hp->n + 1, sizeof(*hp->v)) < 0)
		return -1;
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
static int sparse_mst(struct linkage *h, const struct imap *nb, size_t n, struct linkage_merge *raw)
{
	double *D = vec_alloc(n, sizeof(*D));
	bool *merged = vec_calloc(n, sizeof(*merged));
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
			uint32_t j = (uint32_t)nb[x].keys[s];

			if (nb[x].keys[s] == IMAP_EMPTY || merged[j] || !(D[j] > imap_double_at(&nb[x], s)))
				continue;
			D[j] = imap_double_at(&nb[x], s);
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

int linkage_sparse(struct linkage *h, const struct linkage_pair *pairs, size_t npairs, size_t n,
			  enum linkage_method m, struct linkage_merge *z)
{
	struct imap *nb;
	struct linkage_merge *raw;
	size_t i;
	int rc;

	h->err[0] = '\0';
	if (n > LINKAGE_MAX_POINTS) {
		set_err(h, "%s", "too many points");
		return -1;
	}
	nb = vec_calloc(n, sizeof(*nb));
	raw = vec_alloc(n > 1 ? n - 1 : 1, sizeof(*raw));
	if (!nb || !raw) {
		free(nb);
		free(raw);
		return oom(h);
	}
	rc = build_maps(h, pairs, npairs, n, nb);
	if (rc == 0 && n >= 2) {
		rc = m == LINKAGE_SINGLE ? sparse_mst(h, nb, n, raw) : sparse_chain(h, nb, n, m, raw);
		if (rc == 0)
			rc = finish_rows(h, raw, n, z);
	}
	for (i = 0; i < n; i++)
		imap_free(&nb[i]);
	free(nb);
	free(raw);
	return rc;
}

/* ---- flat clusters ---- */

int linkage_fcluster(struct linkage *h, const struct linkage_merge *z, size_t n, double cut, uint32_t *labels,
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
	if (n > LINKAGE_MAX_POINTS) {
		set_err(h, "%s", "too many points");
		return -1;
	}
	parent = vec_alloc(n, sizeof(*parent));
	lab = vec_alloc(n, sizeof(*lab));
	rep = vec_alloc(2 * n, sizeof(*rep));
	maxh = vec_alloc(2 * n, sizeof(*maxh));
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
			uint32_t ra = linkage_uf_find(parent, rep[a]), rb = linkage_uf_find(parent, rep[b]);

			parent[ra] = rb;
		}
	}
	for (i = 0; i < n; i++) {
		uint32_t r = linkage_uf_find(parent, (uint32_t)i);

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

