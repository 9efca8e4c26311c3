/* profile: performance profiles, their JSON form, exact merging and unit clustering (see profile.h). */
#include "guardcore/profile.h"
#include "clusterer/linkage.h"
#include "common/hash.h"
#include "common/intern.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "common/vec.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GP_MAX_TEXT ((size_t)256 << 20)

static int gp_fail(struct gprofile *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int gp_fail(struct gprofile *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- statistics ---- */

void gp_stats_add(struct gp_stats *s, double x)
{
	double d = x - s->mean;

	s->n++;
	s->mean += d / (double)s->n;
	s->m2 += d * (x - s->mean);
}

/* a + b, at most GP_MAX_N. */
static uint64_t gp_add_sat(uint64_t a, uint64_t b)
{
	return a > GP_MAX_N || b > GP_MAX_N - a ? GP_MAX_N : a + b;
}

void gp_stats_merge(struct gp_stats *into, const struct gp_stats *from)
{
	double n1 = (double)into->n, n2 = (double)from->n, d;

	if (from->n == 0)
		return;
	if (into->n == 0) {
		*into = *from;
		return;
	}
	d = from->mean - into->mean;
	into->mean += d * n2 / (n1 + n2);
	into->m2 += from->m2 + d * d * n1 * n2 / (n1 + n2);
	/* counts saturate: the largest a profile file holds (and a bigint) */
	into->n = gp_add_sat(into->n, from->n);
}

double gp_stats_sd(const struct gp_stats *s)
{
	if (s->n < 2 || !(s->m2 > 0))
		return 0;
	return sqrt(s->m2 / (double)(s->n - 1));
}

/* ---- handle ---- */

struct gprofile *gp_new(void)
{
	struct gprofile *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->k = GP_DEFAULT_K;
	p->cut = GP_DEFAULT_CUT;
	p->frames = intern_open(GP_MAX_FRAMES);
	if (!p->frames) {
		free(p);
		return NULL;
	}
	return p;
}

static void loop_release(struct gp_loop *l)
{
	free(l->symbol);
	free(l->contexts);
	free(l->classes);
	free(l->types);
	free(l->ctxs);
	free(l->tctxs);
	free(l->paths);
	intern_free(l->ctx_index);
	intern_free(l->class_index);
}

void gp_free(struct gprofile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nmodules; i++) {
		free(p->modules[i].name);
		free(p->modules[i].build_id);
	}
	free(p->modules);
	for (size_t i = 0; i < p->nloops; i++)
		loop_release(&p->loops[i]);
	free(p->loops);
	intern_free(p->frames);
	free(p->exe);
	free(p);
}

const char *gp_error(const struct gprofile *p)
{
	return p->err;
}

/* ---- building ---- */

int64_t gp_add_module(struct gprofile *p, const char *name, const char *build_id)
{
	struct gp_module *m;

	if (!build_id)
		build_id = "";
	for (size_t i = 0; i < p->nmodules; i++)
		if (strcmp(p->modules[i].name, name) == 0 && strcmp(p->modules[i].build_id, build_id) == 0)
			return (int64_t)i;
	if (p->nmodules >= GP_MAX_MODULES)
		return gp_fail(p, "more than %d modules", GP_MAX_MODULES);
	if (vec_reserve(&p->modules, &p->capmodules, p->nmodules + 1, sizeof(*p->modules)) < 0)
		return gp_fail(p, "out of memory");
	m = &p->modules[p->nmodules];
	m->name = strdup(name);
	m->build_id = strdup(build_id);
	if (!m->name || !m->build_id) {
		free(m->name);
		free(m->build_id);
		return gp_fail(p, "out of memory");
	}
	return (int64_t)p->nmodules++;
}

int64_t gp_add_frame(struct gprofile *p, const char *name)
{
	int64_t id = intern_put(p->frames, name, strlen(name), NULL);

	if (id < 0)
		return gp_fail(p, "more than %d frames", GP_MAX_FRAMES);
	return id;
}

const char *gp_frame_name(const struct gprofile *p, uint32_t id)
{
	if (id >= intern_count(p->frames))
		return "?";
	return intern_key(p->frames, id, NULL);
}

static bool site_equal(const struct gp_site *a, const struct gp_site *b)
{
	return a->module == b->module && a->offset == b->offset && a->depth == b->depth &&
	       strcmp(a->call, b->call) == 0;
}

/* The bytes a site is looked up by (padding zeroed). */
struct site_key {
	uint64_t offset;
	int64_t depth;
	uint32_t module;
	char call[GP_CALL_MAX];
};

static void site_key_of(const struct gp_site *s, struct site_key *k)
{
	memset(k, 0, sizeof(*k));
	k->offset = s->offset;
	k->depth = s->depth;
	k->module = s->module;
	snprintf(k->call, sizeof(k->call), "%s", s->call);
}

int64_t gp_add_loop(struct gprofile *p, const struct gp_site *site, const char *symbol)
{
	struct gp_loop *l;

	for (size_t i = 0; i < p->nloops; i++)
		if (site_equal(&p->loops[i].site, site)) {
			if (symbol && !p->loops[i].symbol)
				p->loops[i].symbol = strdup(symbol);
			return (int64_t)i;
		}
	if (site->module >= p->nmodules)
		return gp_fail(p, "loop site: module %u out of range", site->module);
	if (p->nloops >= GP_MAX_LOOPS)
		return gp_fail(p, "more than %d loop sites", GP_MAX_LOOPS);
	if (vec_reserve(&p->loops, &p->caploops, p->nloops + 1, sizeof(*p->loops)) < 0)
		return gp_fail(p, "out of memory");
	l = &p->loops[p->nloops];
	memset(l, 0, sizeof(*l));
	l->site = *site;
	l->ctx_index = intern_open(GP_MAX_CONTEXTS);
	l->class_index = intern_open(GP_MAX_CLASSES);
	if ((symbol && !(l->symbol = strdup(symbol))) || !l->ctx_index || !l->class_index) {
		loop_release(l);
		return gp_fail(p, "out of memory");
	}
	return (int64_t)p->nloops++;
}

int64_t gp_add_context(struct gprofile *p, uint32_t loop, const struct gp_site *site, const uint32_t *path,
		       uint32_t pathlen)
{
	struct gp_loop *l;
	struct gp_context *c;
	struct site_key key;
	bool added = false;
	int64_t id;

	if (loop >= p->nloops)
		return gp_fail(p, "context: loop %u out of range", loop);
	if (site->module >= p->nmodules)
		return gp_fail(p, "context: module %u out of range", site->module);
	l = &p->loops[loop];
	site_key_of(site, &key);
	id = intern_put(l->ctx_index, &key, sizeof(key), &added);
	if (id < 0)
		return -2;  /* full: the caller drops the context */
	if (!added)
		return id;
	if (pathlen > GP_MAX_PATH) {
		/* the frames nearest the call tell contexts apart best */
		path += pathlen - GP_MAX_PATH;
		pathlen = GP_MAX_PATH;
	}
	if (vec_reserve(&l->contexts, &l->capcontexts, l->ncontexts + 1, sizeof(*l->contexts)) < 0 ||
	    vec_reserve(&l->paths, &l->cappaths, l->npaths + pathlen, sizeof(*l->paths)) < 0)
		return gp_fail(p, "out of memory");
	c = &l->contexts[l->ncontexts];
	c->site = *site;
	c->path_off = (uint32_t)l->npaths;
	c->path_len = pathlen;
	for (uint32_t i = 0; i < pathlen; i++) {
		if (path[i] >= intern_count(p->frames))
			return gp_fail(p, "context path: frame %u out of range", path[i]);
		l->paths[l->npaths++] = path[i];
	}
	return (int64_t)l->ncontexts++;
}

int64_t gp_add_class(struct gprofile *p, uint32_t loop, const uint32_t *ctx, uint32_t n,
		     const struct gp_stats *size)
{
	uint32_t set[GP_MAX_CLASS_CONTEXTS];
	uint32_t m = 0;
	struct gp_loop *l;
	struct gp_class *c;
	bool added = false;
	int64_t id;

	if (loop >= p->nloops)
		return gp_fail(p, "class: loop %u out of range", loop);
	l = &p->loops[loop];
	for (uint32_t i = 0; i < n && m < GP_MAX_CLASS_CONTEXTS; i++) {
		if (ctx[i] >= l->ncontexts)
			return gp_fail(p, "class: context %u out of range", ctx[i]);
		set[m++] = ctx[i];
	}
	vec_sort_u32(set, m);
	{
		uint32_t w = 0;

		for (uint32_t i = 0; i < m; i++)
			if (w == 0 || set[w - 1] != set[i])
				set[w++] = set[i];
		m = w;
	}
	/* the empty set is a class too (units that made no wrapped call); intern needs a byte */
	id = intern_put(l->class_index, m ? (const void *)set : (const void *)"", m ? m * sizeof(set[0]) : 1,
			&added);
	if (id < 0)
		return -2;  /* full: the units still count in loop->all */
	if (added) {
		if (vec_reserve(&l->classes, &l->capclasses, l->nclasses + 1, sizeof(*l->classes)) < 0 ||
		    vec_reserve(&l->ctxs, &l->capctxs, l->nctxs + m, sizeof(*l->ctxs)) < 0)
			return gp_fail(p, "out of memory");
		c = &l->classes[l->nclasses++];
		memset(c, 0, sizeof(*c));
		c->ctx_off = (uint32_t)l->nctxs;
		c->nctx = m;
		if (m)
			memcpy(l->ctxs + l->nctxs, set, m * sizeof(set[0]));
		l->nctxs += m;
	}
	c = &l->classes[id];
	for (unsigned b = 0; b < GP_BUCKETS; b++) {
		gp_stats_merge(&c->size[b], &size[b]);
		gp_stats_merge(&c->st, &size[b]);
	}
	return id;
}

/* ---- merging ---- */

int gp_merge(struct gprofile *into, const struct gprofile *from)
{
	uint32_t *modmap = NULL, *framemap = NULL, *ctxmap = NULL;
	size_t nframes = intern_count(from->frames);
	int rc = -1;

	if (into->build_id[0] && from->build_id[0] && strcmp(into->build_id, from->build_id) != 0)
		return gp_fail(into, "profiles of different builds (%s and %s) cannot be merged", into->build_id,
			       from->build_id);
	if (!into->build_id[0])
		memcpy(into->build_id, from->build_id, sizeof(into->build_id));
	if (!into->exe && from->exe && !(into->exe = strdup(from->exe)))
		return gp_fail(into, "out of memory");
	modmap = calloc(from->nmodules + 1, sizeof(*modmap));
	framemap = calloc(nframes + 1, sizeof(*framemap));
	if (!modmap || !framemap) {
		gp_fail(into, "out of memory");
		goto out_free;
	}
	for (size_t i = 0; i < from->nmodules; i++) {
		int64_t m = gp_add_module(into, from->modules[i].name, from->modules[i].build_id);

		if (m < 0)
			goto out_free;
		modmap[i] = (uint32_t)m;
	}
	for (size_t i = 0; i < nframes; i++) {
		int64_t f = gp_add_frame(into, intern_key(from->frames, (uint32_t)i, NULL));

		if (f < 0)
			goto out_free;
		framemap[i] = (uint32_t)f;
	}
	for (size_t li = 0; li < from->nloops; li++) {
		const struct gp_loop *fl = &from->loops[li];
		struct gp_site site = fl->site;
		int64_t lo;

		site.module = modmap[site.module];
		lo = gp_add_loop(into, &site, fl->symbol);
		if (lo < 0)
			goto out_free;
		into->loops[lo].threads = gp_add_sat(into->loops[lo].threads, fl->threads);
		gp_stats_merge(&into->loops[lo].all, &fl->all);
		gp_stats_merge(&into->loops[lo].async, &fl->async);
		free(ctxmap);
		ctxmap = calloc(fl->ncontexts + 1, sizeof(*ctxmap));
		if (!ctxmap) {
			gp_fail(into, "out of memory");
			goto out_free;
		}
		for (size_t ci = 0; ci < fl->ncontexts; ci++) {
			const struct gp_context *c = &fl->contexts[ci];
			uint32_t path[GP_MAX_PATH];
			struct gp_site cs = c->site;
			int64_t id;

			for (uint32_t k = 0; k < c->path_len; k++)
				path[k] = framemap[fl->paths[c->path_off + k]];
			cs.module = modmap[cs.module];
			id = gp_add_context(into, (uint32_t)lo, &cs, path, c->path_len);
			if (id == -1)
				goto out_free;
			ctxmap[ci] = id < 0 ? UINT32_MAX : (uint32_t)id;
		}
		for (size_t k = 0; k < fl->nclasses; k++) {
			const struct gp_class *c = &fl->classes[k];
			uint32_t set[GP_MAX_CLASS_CONTEXTS];
			uint32_t m = 0;

			for (uint32_t j = 0; j < c->nctx && m < GP_MAX_CLASS_CONTEXTS; j++)
				if (ctxmap[fl->ctxs[c->ctx_off + j]] != UINT32_MAX)
					set[m++] = ctxmap[fl->ctxs[c->ctx_off + j]];
			if (gp_add_class(into, (uint32_t)lo, set, m, c->size) == -1)
				goto out_free;
		}
	}
	into->units = gp_add_sat(into->units, from->units);
	rc = 0;
out_free:
	free(ctxmap);
	free(framemap);
	free(modmap);
	return rc;
}

/* ---- distances and clustering ---- */

double gp_path_distance(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb)
{
	uint16_t prev[GP_MAX_PATH + 1], cur[GP_MAX_PATH + 1];
	uint32_t longest;

	if (na > GP_MAX_PATH)
		na = GP_MAX_PATH;
	if (nb > GP_MAX_PATH)
		nb = GP_MAX_PATH;
	longest = na > nb ? na : nb;
	if (longest == 0)
		return 0;
	memset(prev, 0, sizeof(prev));
	cur[0] = 0;
	for (uint32_t i = 1; i <= na; i++) {
		for (uint32_t j = 1; j <= nb; j++) {
			if (a[i - 1] == b[j - 1])
				cur[j] = (uint16_t)(prev[j - 1] + 1);
			else
				cur[j] = prev[j] > cur[j - 1] ? prev[j] : cur[j - 1];
		}
		memcpy(prev, cur, (nb + 1) * sizeof(prev[0]));
	}
	return (double)(longest - prev[nb]) / (double)longest;
}

/* Distinct paths of a loop and the memo of their distances. */
struct path_space {
	uint32_t np;
	uint32_t skip;            /* frames every context of the loop shares: above the units' call tree */
	uint32_t *ctx_path;       /* per context: path slot, UINT32_MAX when past GP_MAX_PATHS */
	uint32_t *slot_ctx;       /* per slot: a context holding that path */
	float *memo;              /* np x np, NAN until computed */
};

static int path_space_build(const struct gp_loop *l, struct path_space *ps)
{
	struct intern *seen = intern_open(0);

	memset(ps, 0, sizeof(*ps));
	ps->ctx_path = calloc(l->ncontexts + 1, sizeof(*ps->ctx_path));
	ps->slot_ctx = calloc(GP_MAX_PATHS, sizeof(*ps->slot_ctx));
	if (!seen || !ps->ctx_path || !ps->slot_ctx)
		goto fail;
	for (size_t i = 0; i < l->ncontexts; i++) {
		const struct gp_context *c = &l->contexts[i];
		const void *key = c->path_len ? (const void *)(l->paths + c->path_off) : (const void *)"";
		bool added = false;
		int64_t id = intern_put(seen, key, c->path_len ? c->path_len * sizeof(uint32_t) : 1, &added);

		if (id < 0)
			goto fail;
		if (id >= GP_MAX_PATHS) {
			ps->ctx_path[i] = UINT32_MAX;
			continue;
		}
		ps->ctx_path[i] = (uint32_t)id;
		if (added)
			ps->slot_ctx[id] = (uint32_t)i;
	}
	ps->np = (uint32_t)(intern_count(seen) < GP_MAX_PATHS ? intern_count(seen) : GP_MAX_PATHS);
	/* the longest prefix of all the paths: the frames down to the event loop itself */
	if (l->ncontexts) {
		const uint32_t *first = l->paths + l->contexts[0].path_off;
		uint32_t skip = l->contexts[0].path_len;

		for (size_t i = 1; i < l->ncontexts && skip; i++) {
			const struct gp_context *c = &l->contexts[i];
			uint32_t k = 0;

			while (k < skip && k < c->path_len && l->paths[c->path_off + k] == first[k])
				k++;
			skip = k;
		}
		/* keep the loop's own function in every path */
		ps->skip = skip ? skip - 1 : 0;
	}
	ps->memo = malloc(vec_bytes((size_t)ps->np * ps->np + 1, sizeof(float)));
	if (!ps->memo)
		goto fail;
	for (size_t i = 0; i < (size_t)ps->np * ps->np; i++)
		ps->memo[i] = NAN;
	intern_free(seen);
	return 0;
fail:
	intern_free(seen);
	free(ps->ctx_path);
	free(ps->slot_ctx);
	free(ps->memo);
	return -1;
}

static void path_space_release(struct path_space *ps)
{
	free(ps->ctx_path);
	free(ps->slot_ctx);
	free(ps->memo);
}

static double slot_distance(const struct gp_loop *l, struct path_space *ps, uint32_t x, uint32_t y)
{
	float *m;

	if (x == UINT32_MAX || y == UINT32_MAX)
		return x == y ? 0 : 1;
	m = &ps->memo[(size_t)x * ps->np + y];
	if (isnan(*m)) {
		const struct gp_context *a = &l->contexts[ps->slot_ctx[x]], *b = &l->contexts[ps->slot_ctx[y]];

		uint32_t sa = a->path_len > ps->skip ? ps->skip : a->path_len;
		uint32_t sb = b->path_len > ps->skip ? ps->skip : b->path_len;

		*m = (float)gp_path_distance(l->paths + a->path_off + sa, a->path_len - sa,
					     l->paths + b->path_off + sb, b->path_len - sb);
		ps->memo[(size_t)y * ps->np + x] = *m;
	}
	return *m;
}

/* Distinct path slots of a class, into out (at most GP_MAX_CLASS_CONTEXTS). */
static uint32_t class_paths(const struct gp_loop *l, const struct path_space *ps, const struct gp_class *c,
			    uint32_t *out)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < c->nctx; i++) {
		uint32_t s = ps->ctx_path[l->ctxs[c->ctx_off + i]];
		bool dup = false;

		for (uint32_t j = 0; j < n && !dup; j++)
			dup = out[j] == s;
		if (!dup)
			out[n++] = s;
	}
	return n;
}

/* PerfGuard's unit distance D(X, Y): the mean path distance over P_X x P_Y. */
static double unit_distance(const struct gp_loop *l, struct path_space *ps, const uint32_t *px, uint32_t nx,
			    const uint32_t *py, uint32_t ny)
{
	double sum = 0;

	if (nx == 0 || ny == 0)
		return nx == ny ? 0 : 1;
	for (uint32_t i = 0; i < nx; i++)
		for (uint32_t j = 0; j < ny; j++)
			sum += slot_distance(l, ps, px[i], py[j]);
	return sum / ((double)nx * (double)ny);
}

struct type_order {
	uint32_t label;
	uint64_t n;
	uint32_t first;   /* lowest class: a stable tie-break */
};

static int cmp_type_order(const void *a, const void *b)
{
	const struct type_order *x = a, *y = b;

	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* Labels of the classes: flat clusters of the average linkage at the cut, at most GP_MAX_TYPES. */
static int cluster_labels(struct gprofile *p, struct gp_loop *l, uint32_t *label, size_t *nlabels)
{
	size_t n = l->nclasses, npairs = n * (n - 1) / 2;
	struct path_space ps;
	uint32_t (*sets)[GP_MAX_CLASS_CONTEXTS] = NULL;
	uint32_t *nsets = NULL;
	double *dist = NULL;
	struct linkage_merge *z = NULL;
	struct linkage *h = NULL;
	double cut = p->cut;
	int rc = -1;

	if (n == 1) {
		label[0] = 0;
		*nlabels = 1;
		return 0;
	}
	if (path_space_build(l, &ps) < 0)
		return gp_fail(p, "out of memory");
	sets = malloc(vec_bytes(n, sizeof(*sets)));
	nsets = malloc(vec_bytes(n, sizeof(*nsets)));
	dist = malloc(vec_bytes(npairs, sizeof(*dist)));
	z = malloc(vec_bytes(n, sizeof(*z)));
	h = linkage_open();
	if (!sets || !nsets || !dist || !z || !h) {
		gp_fail(p, "out of memory");
		goto out_free;
	}
	for (size_t i = 0; i < n; i++)
		nsets[i] = class_paths(l, &ps, &l->classes[i], sets[i]);
	for (size_t i = 0, k = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			dist[k++] = unit_distance(l, &ps, sets[i], nsets[i], sets[j], nsets[j]);
	if (linkage_dense(h, dist, n, LINKAGE_AVERAGE, z) < 0) {
		gp_fail(p, "clustering: %s", linkage_error(h));
		goto out_free;
	}
	/* more types than inference can tell apart: raise the cut to the merges that bring them down */
	if (n > GP_MAX_TYPES && z[n - 1 - GP_MAX_TYPES].dist > cut)
		cut = z[n - 1 - GP_MAX_TYPES].dist;
	for (;;) {
		if (linkage_fcluster(h, z, n, cut, label, nlabels) < 0) {
			gp_fail(p, "clustering: %s", linkage_error(h));
			goto out_free;
		}
		if (*nlabels <= GP_MAX_TYPES)
			break;
		cut = nextafter(cut, INFINITY);
	}
	rc = 0;
out_free:
	linkage_free(h);
	free(z);
	free(dist);
	free(nsets);
	free(sets);
	path_space_release(&ps);
	return rc;
}

static int cluster_loop(struct gprofile *p, struct gp_loop *l, uint32_t *first_name)
{
	size_t n = l->nclasses, nlabels = 0;
	uint32_t *label = NULL, *rank = NULL;
	struct type_order *order = NULL;
	uint8_t *mark = NULL;
	int rc = -1;

	l->ntypes = 0;
	l->ntctxs = 0;
	if (n == 0)
		return 0;
	label = calloc(n, sizeof(*label));
	if (!label)
		return gp_fail(p, "out of memory");
	if (cluster_labels(p, l, label, &nlabels) < 0)
		goto out_free;
	order = calloc(nlabels, sizeof(*order));
	rank = calloc(nlabels, sizeof(*rank));
	mark = calloc(l->ncontexts + 1, 1);
	if (!order || !rank || !mark ||
	    vec_reserve(&l->types, &l->captypes, nlabels, sizeof(*l->types)) < 0) {
		gp_fail(p, "out of memory");
		goto out_free;
	}
	for (size_t t = 0; t < nlabels; t++) {
		order[t].label = (uint32_t)t;
		order[t].first = UINT32_MAX;
	}
	for (size_t i = 0; i < n; i++) {
		order[label[i]].n += l->classes[i].st.n;
		if (order[label[i]].first == UINT32_MAX)
			order[label[i]].first = (uint32_t)i;
	}
	qsort(order, nlabels, sizeof(*order), cmp_type_order);
	for (size_t t = 0; t < nlabels; t++)
		rank[order[t].label] = (uint32_t)t;
	for (size_t t = 0; t < nlabels; t++) {
		struct gp_type *ty = &l->types[t];
		uint32_t lab = order[t].label;

		memset(ty, 0, sizeof(*ty));
		snprintf(ty->name, sizeof(ty->name), "u%u", (*first_name)++);
		memset(mark, 0, l->ncontexts + 1);
		for (size_t i = 0; i < n; i++) {
			const struct gp_class *c = &l->classes[i];

			if (label[i] != lab)
				continue;
			gp_stats_merge(&ty->st, &c->st);
			for (unsigned b = 0; b < GP_BUCKETS; b++)
				gp_stats_merge(&ty->size[b], &c->size[b]);
			ty->nclasses++;
			for (uint32_t j = 0; j < c->nctx; j++)
				mark[l->ctxs[c->ctx_off + j]] = 1;
		}
		ty->ctx_off = (uint32_t)l->ntctxs;
		for (size_t ci = 0; ci < l->ncontexts; ci++) {
			if (!mark[ci])
				continue;
			if (vec_reserve(&l->tctxs, &l->captctxs, l->ntctxs + 1, sizeof(*l->tctxs)) < 0) {
				gp_fail(p, "out of memory");
				goto out_free;
			}
			l->tctxs[l->ntctxs++] = (uint32_t)ci;
			ty->nctx++;
		}
	}
	for (size_t i = 0; i < n; i++)
		l->classes[i].type = rank[label[i]];
	l->ntypes = nlabels;
	rc = 0;
out_free:
	free(mark);
	free(rank);
	free(order);
	free(label);
	return rc;
}

static double threshold_of(const struct gp_stats *st, double k, double floor_ns)
{
	double t = st->mean + k * gp_stats_sd(st);

	return t > floor_ns ? t : floor_ns;
}

void gp_set_k(struct gprofile *p, double k, int64_t min_threshold_ns)
{
	p->k = k;
	for (size_t li = 0; li < p->nloops; li++) {
		struct gp_loop *l = &p->loops[li];

		l->threshold_ns = threshold_of(&l->all, k, (double)min_threshold_ns);
		/* deferred requests: as a unit type, no tighter than the loop's units until 100 are known */
		l->async_thr_ns = threshold_of(&l->async, k, l->async.n < GP_MIN_TYPE_UNITS &&
							   l->threshold_ns > (double)min_threshold_ns ?
							   l->threshold_ns : (double)min_threshold_ns);
		for (size_t t = 0; t < l->ntypes; t++) {
			struct gp_type *ty = &l->types[t];
			double floor_ns = (double)min_threshold_ns;

			double running = -1;

			/* too few units for a trustworthy spread: no tighter than the whole loop */
			if (ty->st.n < GP_MIN_TYPE_UNITS && l->threshold_ns > floor_ns)
				floor_ns = l->threshold_ns;
			ty->threshold_ns = threshold_of(&ty->st, k, floor_ns);
			/*
			 * By size: from the units of that size when there are enough of them;
			 * never below a smaller size's (more calls never allow less time); the
			 * type's own until a size has enough units.
			 */
			for (unsigned b = 0; b < GP_BUCKETS; b++) {
				if (ty->size[b].n >= GP_MIN_TYPE_UNITS) {
					double thr = threshold_of(&ty->size[b], k, (double)min_threshold_ns);

					running = thr > running ? thr : running;
				}
				ty->size_thr[b] = running >= 0 ? running : ty->threshold_ns;
			}
		}
	}
}

int gp_cluster(struct gprofile *p, int64_t min_threshold_ns)
{
	uint32_t name = 0;

	for (size_t li = 0; li < p->nloops; li++)
		if (cluster_loop(p, &p->loops[li], &name) < 0)
			return -1;
	gp_set_k(p, p->k, min_threshold_ns);
	return 0;
}

uint64_t gp_loop_key(const struct gprofile *p, size_t li)
{
	const struct gp_site *x = &p->loops[li].site;
	const struct gp_module *m = &p->modules[x->module];
	uint64_t h = HASH_FNV_INIT;
	int64_t at[2] = { (int64_t)x->offset, x->depth };

	h = hash_fnv(h, m->name, strlen(m->name) + 1);
	h = hash_fnv(h, m->build_id, strlen(m->build_id) + 1);
	h = hash_fnv(h, at, sizeof(at));
	return hash_fnv(h, x->call, strnlen(x->call, sizeof(x->call)));
}

/* ---- JSON out ---- */

static void put_stats(struct jsonw *w, const struct gp_stats *st)
{
	jsonw_ku64(w, "n", st->n);
	jsonw_kdouble(w, "mean_ns", st->mean);
	jsonw_kdouble(w, "m2", st->m2);
}

/* A number of nanoseconds, rounded (NaN is 0: never in JSON; too large for an int64, the largest). */
static int64_t ns_of(double v)
{
	return !(v > 0) ? 0 : v < 9e18 ? (int64_t)llround(v) : (int64_t)9e18;
}

/* Too large to write is written as the largest: 0 would make every unit a violation. */
static void put_threshold(struct jsonw *w, double t)
{
	jsonw_i64(w, ns_of(t));
}

/* "sizes":[[bucket,n,mean,m2],...] for the buckets that have units; types add every bucket's threshold */
static void put_sizes(struct jsonw *w, const struct gp_stats *size, const double *thr)
{
	jsonw_karray(w, "sizes");
	for (unsigned k = 0; k < GP_BUCKETS; k++) {
		if (!size[k].n)
			continue;
		jsonw_array(w);
		jsonw_u64(w, k);
		jsonw_u64(w, size[k].n);
		jsonw_double(w, size[k].mean);
		jsonw_double(w, size[k].m2);
		jsonw_end(w);
	}
	jsonw_end(w);
	if (!thr)
		return;
	jsonw_karray(w, "size_thresholds_ns");
	for (unsigned k = 0; k < GP_BUCKETS; k++)
		put_threshold(w, thr[k]);
	jsonw_end(w);
}

static void put_site(struct jsonw *w, const struct gp_site *s)
{
	char off[24];

	snprintf(off, sizeof(off), "0x%llx", (unsigned long long)s->offset);
	jsonw_ku64(w, "module", s->module);
	jsonw_kstr(w, "offset", off);
	jsonw_ki64(w, "depth", s->depth);
	jsonw_kstr(w, "call", s->call);
}

static void put_u32_list(struct jsonw *w, const char *key, const uint32_t *v, size_t n)
{
	jsonw_karray(w, key);
	for (size_t i = 0; i < n; i++)
		jsonw_u64(w, v[i]);
	jsonw_end(w);
}


void gp_summary(const struct gprofile *p, struct jsonw *w)
{
	jsonw_object(w);
	jsonw_kstr(w, "exe", p->exe ? p->exe : "");
	jsonw_ku64(w, "units", p->units);
	jsonw_kdouble(w, "k", p->k);
	jsonw_karray(w, "loops");
	for (size_t li = 0; li < p->nloops; li++) {
		const struct gp_loop *l = &p->loops[li];

		jsonw_object(w);
		jsonw_kstr(w, "symbol", l->symbol ? l->symbol : "");
		jsonw_kstr(w, "call", l->site.call);
		jsonw_ku64(w, "units", l->all.n);
		jsonw_ki64(w, "mean_ns", ns_of(l->all.mean));
		jsonw_ki64(w, "threshold_ns", ns_of(l->threshold_ns));
		jsonw_ku64(w, "async_requests", l->async.n);
		jsonw_ki64(w, "async_mean_ns", ns_of(l->async.mean));
		jsonw_ki64(w, "async_threshold_ns", ns_of(l->async_thr_ns));
		jsonw_karray(w, "types");
		for (size_t t = 0; t < l->ntypes; t++) {
			const struct gp_type *ty = &l->types[t];

			jsonw_object(w);
			jsonw_kstr(w, "name", ty->name);
			jsonw_ku64(w, "units", ty->st.n);
			jsonw_ki64(w, "mean_ns", ns_of(ty->st.mean));
			jsonw_ki64(w, "sd_ns", ns_of(gp_stats_sd(&ty->st)));
			jsonw_ki64(w, "threshold_ns", ns_of(ty->threshold_ns));
			jsonw_karray(w, "contexts");
			for (uint32_t k = 0; k < ty->nctx; k++) {
				const struct gp_context *c = &l->contexts[l->tctxs[ty->ctx_off + k]];
				const char *where = c->path_len ? gp_frame_name(p, l->paths[c->path_off + c->path_len - 1]) : NULL;
				char text[GP_CALL_MAX + 300];

				snprintf(text, sizeof(text), "%s in %s", c->site.call, where ? where : "?");
				jsonw_str(w, text);
			}
			jsonw_end(w);
			jsonw_end(w);
		}
		jsonw_end(w);
		jsonw_end(w);
	}
	jsonw_end(w);
	jsonw_end(w);
}

int gp_write(const struct gprofile *p, struct buf *b)
{
	size_t nframes = intern_count(p->frames);
	char when[32] = "";
	struct tm tm;
	time_t updated = (time_t)p->updated_s;
	struct jsonw w;

	if (p->updated_s > 0 && gmtime_r(&updated, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* a member per line down to each loop's contexts, classes and types */
	jsonw_init_lines(&w, b, 4);
	jsonw_object(&w);
	jsonw_kstr(&w, "format", GP_FORMAT);
	jsonw_ki64(&w, "v", 1);
	jsonw_kstr(&w, "build_id", p->build_id);
	jsonw_kstr(&w, "exe", p->exe ? p->exe : "");
	jsonw_kdouble(&w, "k", p->k);
	jsonw_kdouble(&w, "cut", p->cut);
	jsonw_kstr(&w, "updated", when);
	jsonw_ku64(&w, "units", p->units);
	jsonw_karray(&w, "modules");
	for (size_t i = 0; i < p->nmodules; i++) {
		jsonw_object(&w);
		jsonw_kstr(&w, "name", p->modules[i].name);
		jsonw_kstr(&w, "build_id", p->modules[i].build_id);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_karray(&w, "frames");
	for (size_t i = 0; i < nframes; i++) {
		size_t len;
		const char *f = intern_key(p->frames, (uint32_t)i, &len);

		jsonw_strn(&w, f, len);
	}
	jsonw_end(&w);
	jsonw_karray(&w, "loops");
	for (size_t li = 0; li < p->nloops; li++) {
		const struct gp_loop *l = &p->loops[li];

		jsonw_object(&w);
		jsonw_kobject(&w, "site");
		put_site(&w, &l->site);
		jsonw_end(&w);
		jsonw_kstr(&w, "symbol", l->symbol);
		jsonw_ku64(&w, "threads", l->threads);
		jsonw_kobject(&w, "units");
		put_stats(&w, &l->all);
		jsonw_end(&w);
		jsonw_key(&w, "threshold_ns");
		put_threshold(&w, l->threshold_ns);
		jsonw_kobject(&w, "async");
		put_stats(&w, &l->async);
		jsonw_end(&w);
		jsonw_key(&w, "async_threshold_ns");
		put_threshold(&w, l->async_thr_ns);
		jsonw_karray(&w, "contexts");
		for (size_t i = 0; i < l->ncontexts; i++) {
			const struct gp_context *c = &l->contexts[i];

			jsonw_object(&w);
			put_site(&w, &c->site);
			put_u32_list(&w, "path", l->paths + c->path_off, c->path_len);
			jsonw_end(&w);
		}
		jsonw_end(&w);
		jsonw_karray(&w, "classes");
		for (size_t i = 0; i < l->nclasses; i++) {
			const struct gp_class *c = &l->classes[i];

			jsonw_object(&w);
			put_u32_list(&w, "contexts", l->ctxs + c->ctx_off, c->nctx);
			put_stats(&w, &c->st);
			put_sizes(&w, c->size, NULL);
			jsonw_ku64(&w, "type", c->type);
			jsonw_end(&w);
		}
		jsonw_end(&w);
		jsonw_karray(&w, "types");
		for (size_t t = 0; t < l->ntypes; t++) {
			const struct gp_type *ty = &l->types[t];

			jsonw_object(&w);
			jsonw_kstr(&w, "name", ty->name);
			put_stats(&w, &ty->st);
			jsonw_kdouble(&w, "sd_ns", gp_stats_sd(&ty->st));
			jsonw_key(&w, "threshold_ns");
			put_threshold(&w, ty->threshold_ns);
			put_sizes(&w, ty->size, ty->size_thr);
			jsonw_ku64(&w, "classes", ty->nclasses);
			put_u32_list(&w, "contexts", l->tctxs + ty->ctx_off, ty->nctx);
			jsonw_end(&w);
		}
		jsonw_end(&w);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	return jsonw_finish(&w);
}

/* ---- JSON in ---- */

struct rd {
	struct gprofile *p;
	char path[160];   /* where the reader is, for messages */
};

static int rd_fail(struct rd *r, const char *what)
{
	return gp_fail(r->p, "%s%s%s", r->path, r->path[0] ? ": " : "", what);
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static int rd_u64(struct rd *r, json_object *o, const char *key, uint64_t max, uint64_t *out)
{
	json_object *v = get(o, key);
	int64_t x;
	char why[96];

	if (!v || !json_object_is_type(v, json_type_int)) {
		snprintf(why, sizeof(why), "%s: missing or not an integer", key);
		return rd_fail(r, why);
	}
	errno = 0;
	x = json_object_get_int64(v);
	if (x < 0 || (uint64_t)x > max || errno) {
		snprintf(why, sizeof(why), "%s: out of range", key);
		return rd_fail(r, why);
	}
	*out = (uint64_t)x;
	return 0;
}

static int rd_i64(struct rd *r, json_object *o, const char *key, int64_t *out)
{
	json_object *v = get(o, key);
	char why[96];

	if (!v || !json_object_is_type(v, json_type_int)) {
		snprintf(why, sizeof(why), "%s: missing or not an integer", key);
		return rd_fail(r, why);
	}
	*out = json_object_get_int64(v);
	return 0;
}

static int rd_double(struct rd *r, json_object *o, const char *key, double *out)
{
	json_object *v = get(o, key);
	char why[96];

	if (!v || !(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int))) {
		snprintf(why, sizeof(why), "%s: missing or not a number", key);
		return rd_fail(r, why);
	}
	*out = json_object_get_double(v);
	if (!isfinite(*out)) {
		snprintf(why, sizeof(why), "%s: not finite", key);
		return rd_fail(r, why);
	}
	return 0;
}

static const char *rd_str(struct rd *r, json_object *o, const char *key, size_t max)
{
	json_object *v = get(o, key);
	char why[96];

	if (!v || !json_object_is_type(v, json_type_string)) {
		snprintf(why, sizeof(why), "%s: missing or not a string", key);
		rd_fail(r, why);
		return NULL;
	}
	if ((size_t)json_object_get_string_len(v) > max) {
		snprintf(why, sizeof(why), "%s: longer than %zu bytes", key, max);
		rd_fail(r, why);
		return NULL;
	}
	/* (the writer would put U+FFFD in an invalid byte's place: the file would not load again) */
	if (!util_utf8_valid(json_object_get_string(v), (size_t)json_object_get_string_len(v))) {
		snprintf(why, sizeof(why), "%s: not UTF-8", key);
		rd_fail(r, why);
		return NULL;
	}
	return json_object_get_string(v);
}

static json_object *rd_array(struct rd *r, json_object *o, const char *key, size_t max, size_t *n)
{
	json_object *v = get(o, key);
	char why[96];

	if (!v || !json_object_is_type(v, json_type_array)) {
		snprintf(why, sizeof(why), "%s: missing or not an array", key);
		rd_fail(r, why);
		return NULL;
	}
	*n = json_object_array_length(v);
	if (*n > max) {
		snprintf(why, sizeof(why), "%s: more than %zu entries", key, max);
		rd_fail(r, why);
		return NULL;
	}
	return v;
}

static int rd_stats(struct rd *r, json_object *o, struct gp_stats *st)
{
	if (rd_u64(r, o, "n", UINT64_MAX / 2, &st->n) < 0 || rd_double(r, o, "mean_ns", &st->mean) < 0 ||
	    rd_double(r, o, "m2", &st->m2) < 0)
		return -1;
	if (st->mean < 0 || st->m2 < 0)
		return rd_fail(r, "mean_ns and m2 must not be negative");
	return 0;
}

/* "sizes":[[bucket,n,mean,m2],...] into size[GP_BUCKETS] */
static int rd_sizes(struct rd *r, json_object *o, struct gp_stats *size)
{
	json_object *a = get(o, "sizes");
	size_t n;

	memset(size, 0, GP_BUCKETS * sizeof(*size));
	if (!a || !json_object_is_type(a, json_type_array) || (n = json_object_array_length(a)) > GP_BUCKETS)
		return rd_fail(r, "sizes: missing, not an array, or more than 16 entries");
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(a, i), *v[4];
		int64_t bucket, cnt;
		double mean, m2;

		if (!json_object_is_type(e, json_type_array) || json_object_array_length(e) != 4)
			return rd_fail(r, "sizes: each entry is [bucket, n, mean_ns, m2]");
		for (int k = 0; k < 4; k++)
			v[k] = json_object_array_get_idx(e, (size_t)k);
		if (!json_object_is_type(v[0], json_type_int) || !json_object_is_type(v[1], json_type_int) ||
		    !(json_object_is_type(v[2], json_type_double) || json_object_is_type(v[2], json_type_int)) ||
		    !(json_object_is_type(v[3], json_type_double) || json_object_is_type(v[3], json_type_int)))
			return rd_fail(r, "sizes: each entry is [bucket, n, mean_ns, m2]");
		bucket = json_object_get_int64(v[0]);
		cnt = json_object_get_int64(v[1]);
		mean = json_object_get_double(v[2]);
		m2 = json_object_get_double(v[3]);
		if (bucket < 0 || bucket >= GP_BUCKETS || size[bucket].n || cnt <= 0 || !isfinite(mean) ||
		    !isfinite(m2) || mean < 0 || m2 < 0)
			return rd_fail(r, "sizes: a bucket out of range or twice, or a bad count, mean or m2");
		size[bucket].n = (uint64_t)cnt;
		size[bucket].mean = mean;
		size[bucket].m2 = m2;
	}
	return 0;
}

static int rd_site(struct rd *r, json_object *o, size_t nmodules, struct gp_site *s)
{
	json_object *v = get(o, "offset");
	const char *call;
	uint64_t m;
	char *end;

	memset(s, 0, sizeof(*s));
	if (rd_u64(r, o, "module", UINT32_MAX, &m) < 0)
		return -1;
	if (m >= nmodules)
		return rd_fail(r, "module: out of range");
	s->module = (uint32_t)m;
	if (!v || !json_object_is_type(v, json_type_string))
		return rd_fail(r, "offset: missing or not a \"0x...\" string");
	errno = 0;
	s->offset = strtoull(json_object_get_string(v), &end, 16);
	if (strncmp(json_object_get_string(v), "0x", 2) != 0 || *end || errno)
		return rd_fail(r, "offset: not a \"0x...\" hexadecimal string");
	if (rd_i64(r, o, "depth", &s->depth) < 0)
		return -1;
	if (!(call = rd_str(r, o, "call", GP_CALL_MAX - 1)))
		return -1;
	snprintf(s->call, sizeof(s->call), "%s", call);
	return 0;
}

static int rd_u32_list(struct rd *r, json_object *o, const char *key, size_t max, size_t bound, uint32_t *out,
		       size_t *n)
{
	json_object *a = rd_array(r, o, key, max, n);
	char why[96];

	if (!a)
		return -1;
	for (size_t i = 0; i < *n; i++) {
		json_object *v = json_object_array_get_idx(a, i);
		int64_t x;

		if (!json_object_is_type(v, json_type_int) || (x = json_object_get_int64(v)) < 0 ||
		    (uint64_t)x >= bound) {
			snprintf(why, sizeof(why), "%s[%zu]: not an index below %zu", key, i, bound);
			return rd_fail(r, why);
		}
		out[i] = (uint32_t)x;
	}
	return 0;
}

/* The loop's site and symbol, added as loop li, then its thread count and its units' statistics
 * and thresholds, all and deferred. */
static int rd_loop_units(struct rd *r, json_object *lo, size_t li, size_t base)
{
	struct gprofile *p = r->p;
	struct gp_site site;
	struct gp_loop *l;
	json_object *s = get(lo, "site"), *sym, *units;
	int64_t id;

	if (!s || !json_object_is_type(s, json_type_object))
		return rd_fail(r, "site: missing or not an object");
	snprintf(r->path + base, sizeof(r->path) - base, ".site");
	if (rd_site(r, s, p->nmodules, &site) < 0)
		return -1;
	r->path[base] = '\0';
	sym = get(lo, "symbol");
	if (sym && !json_object_is_type(sym, json_type_string) && !json_object_is_type(sym, json_type_null))
		return rd_fail(r, "symbol: not a string");
	if (sym && json_object_is_type(sym, json_type_string) &&
	    !util_utf8_valid(json_object_get_string(sym), (size_t)json_object_get_string_len(sym)))
		return rd_fail(r, "symbol: not UTF-8");
	id = gp_add_loop(p, &site, sym && json_object_is_type(sym, json_type_string) ?
					   json_object_get_string(sym) : NULL);
	if (id < 0)
		return -1;
	if ((size_t)id != li)
		return rd_fail(r, "the same loop site twice");
	l = &p->loops[id];
	if (rd_u64(r, lo, "threads", UINT64_MAX / 2, &l->threads) < 0)
		return -1;
	units = get(lo, "units");
	if (!units || !json_object_is_type(units, json_type_object))
		return rd_fail(r, "units: missing or not an object");
	snprintf(r->path + base, sizeof(r->path) - base, ".units");
	if (rd_stats(r, units, &l->all) < 0)
		return -1;
	r->path[base] = '\0';
	if (rd_double(r, lo, "threshold_ns", &l->threshold_ns) < 0)
		return -1;
	/* deferred requests: absent from profiles written before them */
	units = get(lo, "async");
	if (units) {
		if (!json_object_is_type(units, json_type_object))
			return rd_fail(r, "async: not an object");
		snprintf(r->path + base, sizeof(r->path) - base, ".async");
		if (rd_stats(r, units, &l->async) < 0)
			return -1;
		r->path[base] = '\0';
		if (rd_double(r, lo, "async_threshold_ns", &l->async_thr_ns) < 0)
			return -1;
	} else {
		l->async_thr_ns = l->threshold_ns;
	}
	return 0;
}

/* Loop li's contexts: call sites and their paths of frames (below nframes). */
static int rd_contexts(struct rd *r, json_object *lo, size_t li, size_t base, size_t nframes)
{
	struct gprofile *p = r->p;
	json_object *a;
	size_t nctx;

	if (!(a = rd_array(r, lo, "contexts", GP_MAX_CONTEXTS, &nctx)))
		return -1;
	for (size_t i = 0; i < nctx; i++) {
		json_object *c = json_object_array_get_idx(a, i);
		uint32_t path[GP_MAX_PATH];
		struct gp_site site;
		size_t np;
		int64_t id;

		snprintf(r->path + base, sizeof(r->path) - base, ".contexts[%zu]", i);
		if (!json_object_is_type(c, json_type_object))
			return rd_fail(r, "not an object");
		if (rd_site(r, c, p->nmodules, &site) < 0 ||
		    rd_u32_list(r, c, "path", GP_MAX_PATH, nframes, path, &np) < 0)
			return -1;
		id = gp_add_context(p, (uint32_t)li, &site, path, (uint32_t)np);
		if (id < 0)
			return id == -2 ? rd_fail(r, "too many contexts") : -1;
		if ((size_t)id != i)
			return rd_fail(r, "the same context twice");
	}
	r->path[base] = '\0';
	return 0;
}

/* Loop li's classes: sets of its contexts, their statistics per size, and their types. */
static int rd_classes(struct rd *r, json_object *lo, size_t li, size_t base)
{
	struct gprofile *p = r->p;
	json_object *a;
	size_t ncls;

	if (!(a = rd_array(r, lo, "classes", GP_MAX_CLASSES, &ncls)))
		return -1;
	for (size_t i = 0; i < ncls; i++) {
		json_object *c = json_object_array_get_idx(a, i);
		uint32_t set[GP_MAX_CLASS_CONTEXTS];
		struct gp_stats st, size[GP_BUCKETS];
		struct gp_loop *l = &p->loops[li];
		size_t n;
		uint64_t type;
		int64_t id;

		snprintf(r->path + base, sizeof(r->path) - base, ".classes[%zu]", i);
		if (!json_object_is_type(c, json_type_object))
			return rd_fail(r, "not an object");
		if (rd_u32_list(r, c, "contexts", GP_MAX_CLASS_CONTEXTS, l->ncontexts, set, &n) < 0 ||
		    rd_stats(r, c, &st) < 0 || rd_sizes(r, c, size) < 0 ||
		    rd_u64(r, c, "type", GP_MAX_TYPES - 1, &type) < 0)
			return -1;
		id = gp_add_class(p, (uint32_t)li, set, (uint32_t)n, size);
		if (id < 0)
			return id == -2 ? rd_fail(r, "too many classes") : -1;
		if ((size_t)id != i)
			return rd_fail(r, "the same class twice");
		l = &p->loops[li];
		if (l->classes[id].st.n != st.n)
			return rd_fail(r, "n: not the sum of the sizes' counts");
		l->classes[id].type = (uint32_t)type;
	}
	r->path[base] = '\0';
	return 0;
}

/* A type's thresholds per size bucket. */
static int rd_size_thresholds(struct rd *r, json_object *o, struct gp_type *ty)
{
	json_object *ta = get(o, "size_thresholds_ns");

	if (!ta || !json_object_is_type(ta, json_type_array) ||
	    json_object_array_length(ta) != GP_BUCKETS)
		return rd_fail(r, "size_thresholds_ns: missing, or not 16 numbers");
	for (unsigned b = 0; b < GP_BUCKETS; b++) {
		json_object *v = json_object_array_get_idx(ta, b);

		if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
			return rd_fail(r, "size_thresholds_ns: not 16 non-negative integers");
		ty->size_thr[b] = (double)json_object_get_int64(v);
	}
	return 0;
}

/* Type t of loop l (its room reserved): name, statistics, thresholds, and its contexts appended to
 * the loop's. */
static int rd_type(struct rd *r, json_object *o, struct gp_loop *l, size_t t)
{
	struct gprofile *p = r->p;
	struct gp_type *ty = &l->types[t];
	uint32_t *ctx = NULL;
	const char *name;
	uint64_t ncl;
	size_t n;

	memset(ty, 0, sizeof(*ty));
	if (!json_object_is_type(o, json_type_object))
		return rd_fail(r, "not an object");
	if (!(name = rd_str(r, o, "name", sizeof(ty->name) - 1)) || rd_stats(r, o, &ty->st) < 0 ||
	    rd_double(r, o, "threshold_ns", &ty->threshold_ns) < 0 ||
	    rd_u64(r, o, "classes", GP_MAX_CLASSES, &ncl) < 0)
		return -1;
	snprintf(ty->name, sizeof(ty->name), "%s", name);
	ty->nclasses = (uint32_t)ncl;
	if (rd_sizes(r, o, ty->size) < 0 || rd_size_thresholds(r, o, ty) < 0)
		return -1;
	ctx = malloc(vec_bytes(l->ncontexts + 1, sizeof(*ctx)));
	if (!ctx)
		return gp_fail(p, "out of memory");
	if (rd_u32_list(r, o, "contexts", l->ncontexts, l->ncontexts, ctx, &n) < 0 ||
	    vec_reserve(&l->tctxs, &l->captctxs, l->ntctxs + n, sizeof(*l->tctxs)) < 0) {
		free(ctx);
		return p->err[0] ? -1 : gp_fail(p, "out of memory");
	}
	ty->ctx_off = (uint32_t)l->ntctxs;
	ty->nctx = (uint32_t)n;
	if (n)
		memcpy(l->tctxs + l->ntctxs, ctx, n * sizeof(*ctx));
	l->ntctxs += n;
	free(ctx);
	l->ntypes = t + 1;
	return 0;
}

/* Loop li's unit types, then every class's type checked against them. */
static int rd_types(struct rd *r, json_object *lo, size_t li, size_t base)
{
	struct gp_loop *l = &r->p->loops[li];
	json_object *a;
	size_t ntypes;

	if (!(a = rd_array(r, lo, "types", GP_MAX_TYPES, &ntypes)))
		return -1;
	if (vec_reserve(&l->types, &l->captypes, ntypes, sizeof(*l->types)) < 0)
		return gp_fail(r->p, "out of memory");
	for (size_t t = 0; t < ntypes; t++) {
		snprintf(r->path + base, sizeof(r->path) - base, ".types[%zu]", t);
		if (rd_type(r, json_object_array_get_idx(a, t), l, t) < 0)
			return -1;
	}
	for (size_t i = 0; i < l->nclasses; i++)
		if (l->classes[i].type >= l->ntypes && l->ntypes > 0) {
			snprintf(r->path + base, sizeof(r->path) - base, ".classes[%zu]", i);
			return rd_fail(r, "type: out of range");
		}
	r->path[base] = '\0';
	return 0;
}

static int rd_loop(struct rd *r, json_object *lo, size_t li)
{
	size_t nframes = intern_count(r->p->frames);
	size_t base = strlen(r->path);

	if (!json_object_is_type(lo, json_type_object))
		return rd_fail(r, "not an object");
	if (rd_loop_units(r, lo, li, base) < 0 || rd_contexts(r, lo, li, base, nframes) < 0 ||
	    rd_classes(r, lo, li, base) < 0 || rd_types(r, lo, li, base) < 0)
		return -1;
	return 0;
}

int gp_load_text(struct gprofile *p, const char *text, size_t len)
{
	struct json_tokener *tok;
	json_object *root, *a;
	struct rd r = { p, "" };
	const char *s;
	size_t n;
	uint64_t v;
	int rc = -1;

	if (len > GP_MAX_TEXT)
		return gp_fail(p, "profile larger than %zu bytes", GP_MAX_TEXT);
	if (len > INT_MAX)
		return gp_fail(p, "profile too large");
	tok = json_tokener_new_ex(16);
	if (!tok)
		return gp_fail(p, "out of memory");
	root = json_tokener_parse_ex(tok, text, (int)len);
	if (!root || json_tokener_get_error(tok) != json_tokener_success) {
		enum json_tokener_error je = json_tokener_get_error(tok);

		gp_fail(p, "not JSON: %s at byte %zu",
			je == json_tokener_continue ? "unexpected end of data" : json_tokener_error_desc(je),
			json_tokener_get_parse_end(tok));
		json_object_put(root);
		json_tokener_free(tok);
		return -1;
	}
	json_tokener_free(tok);
	if (!json_object_is_type(root, json_type_object)) {
		gp_fail(p, "not a JSON object");
		goto out_put;
	}
	if (!(s = rd_str(&r, root, "format", 64)))
		goto out_put;
	if (strcmp(s, GP_FORMAT) != 0) {
		gp_fail(p, "format: '%s', expected '" GP_FORMAT "'", s);
		goto out_put;
	}
	if (rd_u64(&r, root, "v", 1000, &v) < 0)
		goto out_put;
	if (v != GP_VERSION) {
		gp_fail(p, "v: version %llu, this agent reads version %d", (unsigned long long)v, GP_VERSION);
		goto out_put;
	}
	if (!(s = rd_str(&r, root, "build_id", sizeof(p->build_id) - 1)))
		goto out_put;
	memcpy(p->build_id, s, strlen(s) + 1);
	if (!(s = rd_str(&r, root, "exe", 4096)))
		goto out_put;
	if (*s && !(p->exe = strdup(s))) {
		gp_fail(p, "out of memory");
		goto out_put;
	}
	{
		/* "updated": RFC 3339 UTC, or "" for never */
		json_object *u = get(root, "updated");

		if (u && !json_object_is_type(u, json_type_string)) {
			gp_fail(p, "updated: not a string");
			goto out_put;
		}
		if (u && json_object_get_string_len(u) > 0) {
			struct tm tm;
			const char *end;

			memset(&tm, 0, sizeof(tm));
			end = strptime(json_object_get_string(u), "%Y-%m-%dT%H:%M:%SZ", &tm);
			if (!end || *end) {
				gp_fail(p, "updated: not a time like 2026-11-24T12:00:00Z");
				goto out_put;
			}
			p->updated_s = (int64_t)timegm(&tm);
		}
	}
	if (rd_double(&r, root, "k", &p->k) < 0 || rd_double(&r, root, "cut", &p->cut) < 0 ||
	    rd_u64(&r, root, "units", UINT64_MAX / 2, &p->units) < 0)
		goto out_put;
	if (p->k < 0 || p->cut < 0 || p->cut > 1) {
		gp_fail(p, "k must be >= 0 and cut from 0 to 1");
		goto out_put;
	}
	if (!(a = rd_array(&r, root, "modules", GP_MAX_MODULES, &n)))
		goto out_put;
	for (size_t i = 0; i < n; i++) {
		json_object *m = json_object_array_get_idx(a, i);
		const char *name, *bid;

		snprintf(r.path, sizeof(r.path), "modules[%zu]", i);
		if (!json_object_is_type(m, json_type_object)) {
			rd_fail(&r, "not an object");
			goto out_put;
		}
		if (!(name = rd_str(&r, m, "name", 4096)) || !(bid = rd_str(&r, m, "build_id", 128)))
			goto out_put;
		if (gp_add_module(p, name, bid) != (int64_t)i) {
			if (!p->err[0])
				rd_fail(&r, "the same module twice");
			goto out_put;
		}
	}
	r.path[0] = '\0';
	if (!(a = rd_array(&r, root, "frames", GP_MAX_FRAMES, &n)))
		goto out_put;
	for (size_t i = 0; i < n; i++) {
		json_object *f = json_object_array_get_idx(a, i);

		snprintf(r.path, sizeof(r.path), "frames[%zu]", i);
		if (!json_object_is_type(f, json_type_string) || json_object_get_string_len(f) > 4096 ||
		    !util_utf8_valid(json_object_get_string(f), (size_t)json_object_get_string_len(f))) {
			rd_fail(&r, "not a UTF-8 string of at most 4096 bytes");
			goto out_put;
		}
		if (gp_add_frame(p, json_object_get_string(f)) != (int64_t)i) {
			if (!p->err[0])
				rd_fail(&r, "the same frame twice");
			goto out_put;
		}
	}
	r.path[0] = '\0';
	if (!(a = rd_array(&r, root, "loops", GP_MAX_LOOPS, &n)))
		goto out_put;
	for (size_t i = 0; i < n; i++) {
		snprintf(r.path, sizeof(r.path), "loops[%zu]", i);
		if (rd_loop(&r, json_object_array_get_idx(a, i), i) < 0)
			goto out_put;
	}
	rc = 0;
out_put:
	json_object_put(root);
	return rc;
}

static int is_regular(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

int gp_load_file(struct gprofile *p, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int rc, fd;

	/* a profile is a regular file: a FIFO or a device there (the directory may be a hostile process's)
	 * is refused before any read could wait on it */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return -2;
		return gp_fail(p, "%s: %s", path, strerror(errno));
	}
	if (!is_regular(fd)) {
		close(fd);
		return gp_fail(p, "%s: not a regular file", path);
	}
	if (util_read_fd(fd, GP_MAX_TEXT, &text, &len) < 0)
		return gp_fail(p, "%s: %s", path, strerror(errno));
	rc = gp_load_text(p, text, len);
	if (rc < 0) {
		char msg[sizeof(p->err)];

		snprintf(msg, sizeof(msg), "%s", p->err);
		gp_fail(p, "%s: %s", path, msg);
	}
	free(text);
	return rc;
}

/* ---- saving, merged with what other processes wrote ---- */

int gp_save_merged(const char *path, const struct gprofile *delta, int64_t min_threshold_ns, int lock_ms,
		   char *err, size_t errlen)
{
	char lock_path[4200], tmp[4200], dir[4200];
	struct gprofile *cur = NULL;
	struct buf out = BUF_INIT(GP_MAX_TEXT);
	int lockfd, fd = -1, rc = -1, r;
	char *slash;

	if ((size_t)snprintf(lock_path, sizeof(lock_path), "%s.lock", path) >= sizeof(lock_path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -1;
	}
	lockfd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644);
	if (lockfd < 0) {
		snprintf(err, errlen, "%s: %s", lock_path, strerror(errno));
		return -1;
	}
	if (!is_regular(lockfd)) {
		snprintf(err, errlen, "%s: not a regular file", lock_path);
		close(lockfd);
		return -1;
	}
	for (int waited = 0; flock(lockfd, LOCK_EX | LOCK_NB) < 0; waited += 10) {
		struct timespec ts = { 0, 10000000 };

		if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= lock_ms) {
			snprintf(err, errlen, "%s: %s", lock_path,
				 errno == EWOULDBLOCK ? "held by another process too long" : strerror(errno));
			goto out_unlock;
		}
		nanosleep(&ts, NULL);
	}
	cur = gp_new();
	if (!cur) {
		snprintf(err, errlen, "out of memory");
		goto out_unlock;
	}
	r = gp_load_file(cur, path);
	if (r == -1) {
		/* a damaged profile must not stop training: keep it aside and start again */
		char aside[4300];

		snprintf(aside, sizeof(aside), "%s.bad", path);
		if (rename(path, aside) < 0) {
			snprintf(err, errlen, "%s", gp_error(cur));
			goto out_unlock;
		}
		gp_free(cur);
		if (!(cur = gp_new())) {
			snprintf(err, errlen, "out of memory");
			goto out_unlock;
		}
	}
	if (gp_merge(cur, delta) < 0 || ((cur->k = delta->k), (cur->cut = delta->cut), 0) ||
	    gp_cluster(cur, min_threshold_ns) < 0) {
		snprintf(err, errlen, "%s", gp_error(cur));
		goto out_unlock;
	}
	cur->updated_s = (int64_t)time(NULL);
	if (gp_write(cur, &out) < 0) {
		snprintf(err, errlen, "profile larger than %zu bytes", GP_MAX_TEXT);
		goto out_unlock;
	}
	/* made new: whatever was left at the name (an earlier process of this pid's, or anything else) goes */
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || util_write_all(fd, out.data, out.len) < 0 || fsync(fd) < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	if (close(fd) < 0) {
		fd = -1;
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out_unlink;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash) {
		int dfd;

		*(slash == dir ? slash + 1 : slash) = '\0';
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	rc = 0;
	goto out_unlock;
out_unlink:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
out_unlock:
	buf_release(&out);
	gp_free(cur);
	close(lockfd);
	return rc;
}
