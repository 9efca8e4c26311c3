/* learnt: a training process's tables, copied, named and saved by differences (see learnt.h). */
#include "agent/guard/learnt.h"
#include "agent/guard/modmap.h"
#include "agent/guard/rt.h"
#include "agent/guard/symbolize.h"
#include "common/jsonw.h"
#include "common/vec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEQ_TRIES 1000   /* an entry changing under every copy: the writer holds it for a few stores */

struct learnt_copy {
	uint32_t nloops;
	size_t nctx, ncls;
	uint64_t units;
	struct learnt_loop loops[GP_MAX_LOOPS];
	struct learnt_ctx *ctx;
	struct learnt_class *cls;
	int *cls_ok;                   /* whole and checked (else it counts as unchanged) */
	int loop_ok[GP_MAX_LOOPS];
};

void learnt_zero_counts(struct learnt *l)
{
	uint32_t nl = atomic_load(&l->nloops), nc = atomic_load(&l->ncls);

	/* a sequence number a thread of the parent left odd would hide its entry from every saver */
	for (uint32_t i = 0; i < nl && i < GP_MAX_LOOPS; i++) {
		atomic_store(&l->loops[i].seq, 0);
		l->loops[i].threads = 0;
		memset(&l->loops[i].all, 0, sizeof(l->loops[i].all));
		memset(&l->loops[i].async, 0, sizeof(l->loops[i].async));
	}
	for (uint32_t i = 0; i < nc && i < LEARNT_MAX_CLASSES; i++) {
		atomic_store(&l->cls[i].seq, 0);
		l->cls[i].n = 0;
		memset(l->cls[i].size, 0, sizeof(l->cls[i].size));
	}
	atomic_store(&l->units, 0);
	l->units_saved = 0;
	memset(l->loops_saved, 0, sizeof(l->loops_saved));
	memset(l->cls_saved, 0, (nc < LEARNT_MAX_CLASSES ? nc : LEARNT_MAX_CLASSES) * sizeof(l->cls_saved[0]));
}

void learnt_copy_tables(struct learnt *dst, const struct learnt *src)
{
	uint32_t nl = atomic_load(&src->nloops), nx = atomic_load(&src->nctx), nc = atomic_load(&src->ncls);

	nl = nl < GP_MAX_LOOPS ? nl : GP_MAX_LOOPS;
	nx = nx < LEARNT_MAX_CONTEXTS ? nx : LEARNT_MAX_CONTEXTS;
	nc = nc < LEARNT_MAX_CLASSES ? nc : LEARNT_MAX_CLASSES;
	memcpy(dst->loops, src->loops, nl * sizeof(dst->loops[0]));
	memcpy(dst->ctx, src->ctx, nx * sizeof(dst->ctx[0]));
	memcpy(dst->cls, src->cls, nc * sizeof(dst->cls[0]));
	atomic_store(&dst->nloops, nl);
	atomic_store(&dst->nctx, nx);
	atomic_store(&dst->ncls, nc);
	learnt_zero_counts(dst);
}

/* A copy of the entry at src (bytes long, its sequence number first) taken while no write ran. */
static int copy_whole(void *dst, const void *src, size_t bytes)
{
	_Atomic uint32_t *seq = (_Atomic uint32_t *)(uintptr_t)src;

	for (int i = 0; i < SEQ_TRIES; i++) {
		uint32_t s = atomic_load_explicit(seq, memory_order_acquire);

		if (s & 1)
			continue;
		memcpy(dst, src, bytes);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(seq, memory_order_relaxed) == s)
			return 0;
	}
	return -1;
}

static int stats_ok(const struct gp_stats *s)
{
	return s->n <= GP_MAX_N && isfinite(s->mean) && isfinite(s->m2) && s->mean >= 0 && s->m2 >= 0;
}

struct learnt_copy *learnt_take(const struct learnt *l)
{
	struct learnt_copy *cp = calloc(1, sizeof(*cp));
	uint32_t nl, nx, nc;

	if (!cp)
		return NULL;
	/* the counts that publish first: what they count is written by then (a unit's changes before
	 * its count, an entry before the number that shows it) */
	cp->units = atomic_load_explicit(&l->units, memory_order_acquire);
	nl = atomic_load_explicit(&l->nloops, memory_order_acquire);
	nx = atomic_load_explicit(&l->nctx, memory_order_acquire);
	nc = atomic_load_explicit(&l->ncls, memory_order_acquire);
	cp->nloops = nl < GP_MAX_LOOPS ? nl : GP_MAX_LOOPS;
	cp->nctx = nx < LEARNT_MAX_CONTEXTS ? nx : LEARNT_MAX_CONTEXTS;
	cp->ncls = nc < LEARNT_MAX_CLASSES ? nc : LEARNT_MAX_CLASSES;
	cp->ctx = malloc(vec_bytes(cp->nctx + 1, sizeof(*cp->ctx)));
	cp->cls = malloc(vec_bytes(cp->ncls + 1, sizeof(*cp->cls)));
	cp->cls_ok = calloc(cp->ncls + 1, sizeof(*cp->cls_ok));
	if (!cp->ctx || !cp->cls || !cp->cls_ok) {
		learnt_copy_free(cp);
		return NULL;
	}
	for (uint32_t i = 0; i < cp->nloops; i++) {
		struct learnt_loop *lp = &cp->loops[i];

		cp->loop_ok[i] = copy_whole(lp, &l->loops[i], sizeof(*lp)) == 0 && lp->call < GC_COUNT &&
				 stats_ok(&lp->all) && stats_ok(&lp->async) && lp->threads <= GP_MAX_N;
	}
	memcpy(cp->ctx, l->ctx, cp->nctx * sizeof(*cp->ctx));
	for (size_t i = 0; i < cp->nctx; i++) {
		struct learnt_ctx *c = &cp->ctx[i];

		if (c->npath > GP_MAX_PATH || c->call >= GC_COUNT || c->loop < 0 || (uint32_t)c->loop >= cp->nloops)
			c->loop = -1;   /* left out */
	}
	for (size_t i = 0; i < cp->ncls; i++) {
		struct learnt_class *c = &cp->cls[i];
		int ok = copy_whole(c, &l->cls[i], sizeof(*c)) == 0 && c->loop >= 0 &&
			 (uint32_t)c->loop < cp->nloops && c->nctx <= GP_MAX_CLASS_CONTEXTS && c->n <= GP_MAX_N;

		for (uint32_t b = 0; ok && b < GP_BUCKETS; b++)
			ok = stats_ok(&c->size[b]);
		for (uint32_t k = 0; ok && k < c->nctx; k++)
			ok = c->ctx[k] < cp->nctx;
		cp->cls_ok[i] = ok;
	}
	return cp;
}

void learnt_copy_free(struct learnt_copy *cp)
{
	if (!cp)
		return;
	free(cp->ctx);
	free(cp->cls);
	free(cp->cls_ok);
	free(cp);
}

static uint64_t count_since(uint64_t now, uint64_t then)
{
	return now >= then ? now - then : now;
}

uint64_t learnt_copy_units(const struct learnt_copy *cp, const struct learnt *l)
{
	return l ? count_since(cp->units, l->units_saved) : cp->units;
}

/*
 * The values of now (checked) that were not yet in then (Chan et al.'s pooling, undone): now pools
 * then and the rest. A count that went back (the process zeroed it: a fork), or a saved entry that is
 * not one (the saved part lies in the process's region too), makes now the rest; rounding never
 * makes the sum of squares negative.
 */
static struct gp_stats stats_since(const struct gp_stats *now, const struct gp_stats *then)
{
	struct gp_stats d = { 0, 0, 0 };
	double n, n1, n2, delta;

	if (!stats_ok(then) || now->n < then->n || then->n == 0)
		return *now;
	if (now->n == then->n)
		return d;
	d.n = now->n - then->n;
	n = (double)now->n;
	n1 = (double)then->n;
	n2 = (double)d.n;
	d.mean = (n * now->mean - n1 * then->mean) / n2;
	if (!(d.mean >= 0) || !isfinite(d.mean))
		d.mean = 0;
	delta = d.mean - then->mean;
	d.m2 = now->m2 - then->m2 - delta * delta * n1 * n2 / n;
	if (!(d.m2 >= 0) || !isfinite(d.m2))
		d.m2 = 0;
	return d;
}

/* module index and offset of addr in p */
static int64_t site_of(struct gprofile *p, const struct gmodmap *mm, uintptr_t addr, uint64_t *offset)
{
	const struct gmod *g = gmodmap_find(mm, addr);

	if (!g) {
		*offset = addr;
		return gp_add_module(p, "[unknown]", "");
	}
	*offset = addr - g->bias;
	return gp_add_module(p, g->name, g->build_id);
}

/* The frame name of the instruction before a return address of the process's. */
static void name_of(const struct learnt_namer *nm, uintptr_t ret, char *out, size_t cap)
{
	uintptr_t a = nm->xlat ? nm->xlat(nm->ctx, ret) : ret;

	if (!a) {
		snprintf(out, cap, "[unknown]+0x%llx", (unsigned long long)ret);
		return;
	}
	gsym_frame(nm->sym, a - 1, out, cap);
}

int learnt_profile(const struct learnt_copy *cp, const struct learnt *l, int whole, const struct learnt_namer *nm,
		   struct gprofile *p, char *err, size_t errlen)
{
	static const struct learnt_saved none;
	int64_t loopmap[GP_MAX_LOOPS], *ctxmap;
	char name[1024];
	int rc = -1;

	if (!(ctxmap = calloc(cp->nctx + 1, sizeof(*ctxmap)))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(p->build_id, sizeof(p->build_id), "%s", nm->build_id);
	if (!(p->exe = strdup(nm->exe))) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	p->k = nm->k;
	p->cut = nm->cut;
	p->units = whole ? cp->units : count_since(cp->units, l->units_saved);
	for (uint32_t i = 0; i < cp->nloops; i++) {
		const struct learnt_loop *lp = &cp->loops[i];
		const struct learnt_saved *sv = whole ? &none : &l->loops_saved[i];
		struct gp_stats all, async;
		struct gp_site site;
		int64_t m, li;

		loopmap[i] = -1;
		if (!cp->loop_ok[i])
			continue;
		memset(&site, 0, sizeof(site));
		if ((m = site_of(p, nm->mods, (uintptr_t)lp->ret, &site.offset)) < 0)
			goto out_gp;
		site.module = (uint32_t)m;
		site.depth = lp->depth;
		snprintf(site.call, sizeof(site.call), "%s", gcall_name[lp->call]);
		name_of(nm, (uintptr_t)lp->ret, name, sizeof(name));
		if ((li = gp_add_loop(p, &site, name)) < 0)
			goto out_gp;
		loopmap[i] = li;
		all = stats_since(&lp->all, &sv->all);
		async = stats_since(&lp->async, &sv->async);
		p->loops[li].threads += count_since(lp->threads, sv->threads);
		gp_stats_merge(&p->loops[li].all, &all);
		gp_stats_merge(&p->loops[li].async, &async);
	}
	for (size_t i = 0; i < cp->nctx; i++) {
		const struct learnt_ctx *c = &cp->ctx[i];
		uint32_t path[GP_MAX_PATH];
		struct gp_site site;
		int64_t m, id;

		ctxmap[i] = -1;
		if (c->loop < 0 || loopmap[c->loop] < 0)
			continue;
		for (uint16_t k = 0; k < c->npath; k++) {
			int64_t f;

			name_of(nm, (uintptr_t)c->path[k], name, sizeof(name));
			if ((f = gp_add_frame(p, name)) < 0)
				goto out_gp;
			path[k] = (uint32_t)f;
		}
		memset(&site, 0, sizeof(site));
		if ((m = site_of(p, nm->mods, (uintptr_t)c->ret, &site.offset)) < 0)
			goto out_gp;
		site.module = (uint32_t)m;
		site.depth = c->depth;
		snprintf(site.call, sizeof(site.call), "%s", gcall_name[c->call]);
		id = gp_add_context(p, (uint32_t)loopmap[c->loop], &site, path, c->npath);
		if (id == -1)
			goto out_gp;
		ctxmap[i] = id;
	}
	for (size_t i = 0; i < cp->ncls; i++) {
		const struct learnt_class *c = &cp->cls[i];
		const struct learnt_saved *sv = whole ? &none : &l->cls_saved[i];
		struct gp_stats size[GP_BUCKETS];
		uint32_t set[GP_MAX_CLASS_CONTEXTS];
		uint32_t n = 0;

		if (!cp->cls_ok[i] || loopmap[c->loop] < 0 || count_since(c->n, sv->n) == 0)
			continue;
		for (uint32_t b = 0; b < GP_BUCKETS; b++)
			size[b] = stats_since(&c->size[b], &sv->size[b]);
		for (uint32_t k = 0; k < c->nctx; k++)
			if (ctxmap[c->ctx[k]] >= 0)
				set[n++] = (uint32_t)ctxmap[c->ctx[k]];
		if (gp_add_class(p, (uint32_t)loopmap[c->loop], set, n, size) == -1)
			goto out_gp;
	}
	rc = 0;
	goto out_free;
out_gp:
	snprintf(err, errlen, "%s", gp_error(p));
out_free:
	free(ctxmap);
	return rc;
}

void learnt_mark_saved(struct learnt *l, const struct learnt_copy *cp)
{
	/* what learnt_profile() added, exactly: a class of a loop it left out was not */
	l->units_saved = cp->units;
	for (uint32_t i = 0; i < cp->nloops; i++) {
		if (!cp->loop_ok[i])
			continue;
		l->loops_saved[i].threads = cp->loops[i].threads;
		l->loops_saved[i].all = cp->loops[i].all;
		l->loops_saved[i].async = cp->loops[i].async;
	}
	for (size_t i = 0; i < cp->ncls; i++) {
		if (!cp->cls_ok[i] || !cp->loop_ok[cp->cls[i].loop])
			continue;
		l->cls_saved[i].n = cp->cls[i].n;
		memcpy(l->cls_saved[i].size, cp->cls[i].size, sizeof(l->cls_saved[i].size));
	}
}

int learnt_upload_body(const char *host, int64_t pid, int64_t started_ns, const char *profile, size_t len,
		       struct buf *out)
{
	struct jsonw w;

	jsonw_init_compact(&w, out);
	jsonw_object(&w);
	jsonw_ki64(&w, "v", 1);
	jsonw_kstr(&w, "host", host);
	jsonw_ki64(&w, "pid", pid);
	jsonw_ki64(&w, "started_ns", started_ns);
	jsonw_key(&w, "profile");
	jsonw_raw(&w, profile, len);
	jsonw_end(&w);
	return jsonw_finish(&w);
}
