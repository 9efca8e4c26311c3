/*
 * train: what a training process learns (guard.md "Unit types"): its loop
 * sites, the contexts met inside units with the call path that led to each,
 * and the classes of units (same contexts) with their duration statistics.
 *
 * Program threads add to the tables under one mutex, briefly; the call path
 * of a new context is walked outside it. Nothing allocates under the mutex:
 * the tables are mapped whole at start (untouched pages cost nothing), with
 * their own hash indexes. A program thread may wait for the mutex inside a
 * wrapped lock or condition wait of the program's allocator, which then holds
 * its own lock: a holder that called the allocator could wait for it forever.
 *
 * gtrain_save() (the shipping thread, and exit) takes what was learnt since
 * the last save, names the addresses
 * (module, offset, build id, function), and merges it into the profile file
 * with gp_save_merged(), so the processes of one program (a forking server's
 * workers) and its restarts all add to the same profile.
 */
#include "agent/guard/modmap.h"
#include "agent/guard/hot.h"
#include "common/util.h"
#include "agent/guard/symbolize.h"
#include "agent/guard/unwind.h"
#include "common/intern.h"
#include "common/vec.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define TRAIN_MAX_CONTEXTS 8192
#define TRAIN_MAX_CLASSES 8192
#define TRAIN_SLOTS 16384   /* per index: twice the most entries, so probing always ends */

struct tloop {
	uintptr_t ret;
	int64_t depth;
	uint16_t call;
	uint64_t threads;
	struct gp_stats all;
	struct gp_stats async;   /* deferred requests begun in the loop */
};

struct tctx {
	uintptr_t ret;
	int64_t depth;
	int32_t loop;
	uint16_t call;
	uint16_t npath;
	uint64_t path[GP_MAX_PATH];   /* outermost first, from the loop's function down to the call */
};

struct tclass {
	int32_t loop;
	uint32_t nctx;
	uint32_t ctx[GP_MAX_CLASS_CONTEXTS];
	uint64_t n;
	struct gp_stats size[GP_BUCKETS];
};

struct gtrain {
	pthread_mutex_t mu;           /* the tables */
	pthread_mutex_t save_mu;      /* one save at a time */
	struct tloop loops[GP_MAX_LOOPS];
	uint32_t nloops;
	struct tctx *ctx;             /* TRAIN_MAX_CONTEXTS of them, mapped */
	size_t nctx;
	uint32_t *ctx_slot;           /* the contexts' index: id + 1, 0 empty; TRAIN_SLOTS */
	struct tclass *cls;           /* TRAIN_MAX_CLASSES of them, mapped */
	size_t ncls;
	uint32_t *cls_slot;           /* the classes' index */
	uint64_t units;
	struct gprofile *own;         /* what this process learnt, all saves pooled (for the fleet) */
};

struct ctx_key {
	uintptr_t ret;
	int64_t depth;
	int32_t loop;
	int32_t pad;
};

static size_t tables_bytes(void)
{
	return (size_t)TRAIN_MAX_CONTEXTS * sizeof(struct tctx) + (size_t)TRAIN_MAX_CLASSES * sizeof(struct tclass) +
	       2 * (size_t)TRAIN_SLOTS * sizeof(uint32_t);
}

struct gtrain *gtrain_new(void)
{
	struct gtrain *tr = calloc(1, sizeof(*tr));
	unsigned char *p;

	if (!tr)
		return NULL;
	p = mmap(NULL, tables_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		free(tr);
		return NULL;
	}
	tr->ctx = (struct tctx *)p;
	p += (size_t)TRAIN_MAX_CONTEXTS * sizeof(struct tctx);
	tr->cls = (struct tclass *)p;
	p += (size_t)TRAIN_MAX_CLASSES * sizeof(struct tclass);
	tr->ctx_slot = (uint32_t *)p;
	tr->cls_slot = tr->ctx_slot + TRAIN_SLOTS;
	pthread_mutex_init(&tr->mu, NULL);
	pthread_mutex_init(&tr->save_mu, NULL);
	return tr;
}

/* The slot of a context in its index: its id + 1 there, or 0 (an empty slot, where it goes). */
static uint32_t *ctx_find(struct gtrain *tr, uintptr_t ret, int64_t depth, int32_t loop)
{
	struct ctx_key key;
	uint64_t i;

	memset(&key, 0, sizeof(key));
	key.ret = ret;
	key.depth = depth;
	key.loop = loop;
	for (i = intern_hash(&key, sizeof(key));; i++) {
		uint32_t *slot = &tr->ctx_slot[i & (TRAIN_SLOTS - 1)];
		const struct tctx *c;

		if (!*slot)
			return slot;
		c = &tr->ctx[*slot - 1];
		if (c->ret == ret && c->depth == depth && c->loop == loop)
			return slot;
	}
}

/* The same for a class: key[0] the loop, then its nctx contexts, sorted. */
static uint32_t *cls_find(struct gtrain *tr, const uint32_t *key, uint32_t nctx)
{
	for (uint64_t i = intern_hash(key, (nctx + 1) * sizeof(*key));; i++) {
		uint32_t *slot = &tr->cls_slot[i & (TRAIN_SLOTS - 1)];
		const struct tclass *c;

		if (!*slot)
			return slot;
		c = &tr->cls[*slot - 1];
		if (c->loop == (int32_t)key[0] && c->nctx == nctx && memcmp(c->ctx, key + 1, nctx * sizeof(*key)) == 0)
			return slot;
	}
}

/* Forgets the counts learnt (after a save, or in a forked child), keeping the contexts and classes. */
static void zero_counts(struct gtrain *tr)
{
	for (uint32_t i = 0; i < tr->nloops; i++) {
		tr->loops[i].threads = 0;
		memset(&tr->loops[i].all, 0, sizeof(tr->loops[i].all));
		memset(&tr->loops[i].async, 0, sizeof(tr->loops[i].async));
	}
	for (size_t i = 0; i < tr->ncls; i++) {
		tr->cls[i].n = 0;
		memset(tr->cls[i].size, 0, sizeof(tr->cls[i].size));
	}
	tr->units = 0;
}

void gtrain_reset_child(struct gtrain *tr)
{
	/* the locks as new (fork.c); tables a thread of the parent was changing, empty */
	if (guard_lock_reset_child(&tr->mu)) {
		tr->nloops = 0;
		tr->nctx = tr->ncls = 0;
		memset(tr->ctx_slot, 0, 2 * (size_t)TRAIN_SLOTS * sizeof(uint32_t));
	}
	guard_lock_reset_child(&tr->save_mu);
	zero_counts(tr);
	tr->own = NULL;   /* the parent's learning is the parent's to upload (its copy is left, not freed) */
}

int32_t gtrain_loop(struct gtrain *tr, uintptr_t ret, int64_t depth, uint16_t call)
{
	int32_t id = -1;

	pthread_mutex_lock(&tr->mu);
	for (uint32_t i = 0; i < tr->nloops; i++)
		if (tr->loops[i].ret == ret && tr->loops[i].depth == depth) {
			id = (int32_t)i;
			break;
		}
	if (id < 0 && tr->nloops < GP_MAX_LOOPS) {
		id = (int32_t)tr->nloops++;
		memset(&tr->loops[id], 0, sizeof(tr->loops[id]));
		tr->loops[id].ret = ret;
		tr->loops[id].depth = depth;
		tr->loops[id].call = call;
	}
	if (id >= 0)
		tr->loops[id].threads++;
	pthread_mutex_unlock(&tr->mu);
	return id;
}

/*
 * The call path of this call, outermost first (the innermost GP_MAX_PATH frames).
 * The whole stack, not only below the loop's frame: a loop's wait often sits in
 * a helper (postgres: secure_read -> WaitEventSetWait -> epoll_wait) and the
 * unit goes on in its callers; clustering measures paths below the prefix all
 * of the loop's contexts share.
 */
static uint16_t capture_path(uint64_t *path)
{
	uint64_t ips[GP_MAX_PATH + 16], tmp[GP_MAX_PATH];
	uint32_t got = unwind_here(ips, GP_MAX_PATH + 16), n = 0;

	for (uint32_t i = 0; i < got && n < GP_MAX_PATH; i++)
		if (!(ips[i] >= G.self_lo && ips[i] < G.self_hi))   /* the agent's own frames */
			tmp[n++] = ips[i];
	for (uint32_t i = 0; i < n; i++)
		path[i] = tmp[n - 1 - i];
	return (uint16_t)n;
}

uint32_t gtrain_context(struct gtrain *tr, int32_t loop, uintptr_t ret, int64_t depth, uint16_t call)
{
	uint64_t path[GP_MAX_PATH];
	uint16_t npath;
	uint32_t *slot, id;

	pthread_mutex_lock(&tr->mu);
	id = *ctx_find(tr, ret, depth, loop);
	pthread_mutex_unlock(&tr->mu);
	if (id)
		return id - 1;
	/* a new context: walk its call path once, outside the lock */
	npath = capture_path(path);
	pthread_mutex_lock(&tr->mu);
	slot = ctx_find(tr, ret, depth, loop);
	if (!*slot && tr->nctx < TRAIN_MAX_CONTEXTS) {
		struct tctx *c = &tr->ctx[tr->nctx];

		c->ret = ret;
		c->depth = depth;
		c->loop = loop;
		c->call = call;
		c->npath = npath;
		memcpy(c->path, path, npath * sizeof(path[0]));
		*slot = (uint32_t)++tr->nctx;
	}
	id = *slot;
	pthread_mutex_unlock(&tr->mu);
	return id ? id - 1 : UINT32_MAX;
}

void gtrain_unit(struct gtrain *tr, int32_t loop, const uint32_t *ctx, uint32_t nctx, uint32_t calls,
		 int64_t dur_ns)
{
	uint32_t key[GP_MAX_CLASS_CONTEXTS + 1], *slot;

	if (loop < 0 || nctx > GP_MAX_CLASS_CONTEXTS)
		return;
	key[0] = (uint32_t)loop;
	memcpy(key + 1, ctx, nctx * sizeof(*ctx));
	for (uint32_t i = 2; i <= nctx; i++)
		for (uint32_t j = i; j > 1 && key[j - 1] > key[j]; j--) {
			uint32_t x = key[j];

			key[j] = key[j - 1];
			key[j - 1] = x;
		}
	if (dur_ns < 0)
		dur_ns = 0;
	pthread_mutex_lock(&tr->mu);
	gp_stats_add(&tr->loops[loop].all, (double)dur_ns);
	tr->units++;
	slot = cls_find(tr, key, nctx);
	if (!*slot && tr->ncls < TRAIN_MAX_CLASSES) {
		struct tclass *c = &tr->cls[tr->ncls];

		memset(c, 0, sizeof(*c));
		c->loop = loop;
		c->nctx = nctx;
		memcpy(c->ctx, key + 1, nctx * sizeof(*ctx));
		*slot = (uint32_t)++tr->ncls;
	}
	if (*slot) {
		struct tclass *c = &tr->cls[*slot - 1];

		c->n++;
		gp_stats_add(&c->size[gp_bucket(calls)], (double)dur_ns);
	}
	pthread_mutex_unlock(&tr->mu);
}

/* ---- saving ---- */

void gtrain_async(struct gtrain *tr, int32_t loop, int64_t dur_ns)
{
	if (loop < 0 || (uint32_t)loop >= GP_MAX_LOOPS)
		return;
	pthread_mutex_lock(&tr->mu);
	gp_stats_add(&tr->loops[loop].async, (double)(dur_ns > 0 ? dur_ns : 0));
	pthread_mutex_unlock(&tr->mu);
}

struct snapshot {
	struct tloop loops[GP_MAX_LOOPS];
	uint32_t nloops;
	struct tctx *ctx;
	size_t nctx;
	struct tclass *cls;
	size_t ncls;
	uint64_t units;
};

static int take_snapshot(struct gtrain *tr, struct snapshot *s)
{
	/* allocated outside the lock (see the top), large enough for what the tables hold by then */
	for (;;) {
		size_t nctx, ncls;

		memset(s, 0, sizeof(*s));
		pthread_mutex_lock(&tr->mu);
		nctx = tr->nctx + 64;
		ncls = tr->ncls + 64;
		pthread_mutex_unlock(&tr->mu);
		s->ctx = malloc(vec_bytes(nctx, sizeof(*s->ctx)));
		s->cls = malloc(vec_bytes(ncls, sizeof(*s->cls)));
		if (!s->ctx || !s->cls) {
			free(s->ctx);
			free(s->cls);
			return -1;
		}
		pthread_mutex_lock(&tr->mu);
		if (tr->nctx <= nctx && tr->ncls <= ncls)
			break;
		pthread_mutex_unlock(&tr->mu);
		free(s->ctx);
		free(s->cls);
	}
	memcpy(s->loops, tr->loops, sizeof(tr->loops));
	s->nloops = tr->nloops;
	memcpy(s->ctx, tr->ctx, tr->nctx * sizeof(*s->ctx));
	s->nctx = tr->nctx;
	memcpy(s->cls, tr->cls, tr->ncls * sizeof(*s->cls));
	s->ncls = tr->ncls;
	s->units = tr->units;
	/* what is taken is the file's from now on */
	zero_counts(tr);
	pthread_mutex_unlock(&tr->mu);
	return 0;
}

/* module index and offset of addr in the delta profile */
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

static int build_delta(const struct snapshot *s, struct gprofile *p, char *err, size_t errlen)
{
	struct gmodmap mm = { NULL, 0 };
	struct gsym *sym = NULL;
	int64_t *loopmap = NULL, *ctxmap = NULL;
	char name[1024];
	int rc = -1;

	if (unwind_modmap_load(&mm) < 0 || !(sym = gsym_open(&mm, err, errlen)))
		goto out_free;
	loopmap = calloc(GP_MAX_LOOPS, sizeof(*loopmap));
	ctxmap = calloc(s->nctx + 1, sizeof(*ctxmap));
	if (!loopmap || !ctxmap) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	snprintf(p->build_id, sizeof(p->build_id), "%s", G.build_id);
	if (!(p->exe = strdup(G.exe))) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	p->k = G.cfg.k >= 0 ? G.cfg.k : GP_DEFAULT_K;
	p->cut = G.cfg.cut;
	p->units = s->units;
	for (uint32_t i = 0; i < s->nloops; i++) {
		const struct tloop *l = &s->loops[i];
		struct gp_site site;
		int64_t m, li;

		memset(&site, 0, sizeof(site));
		if ((m = site_of(p, &mm, l->ret, &site.offset)) < 0)
			goto out_gp;
		site.module = (uint32_t)m;
		site.depth = l->depth;
		snprintf(site.call, sizeof(site.call), "%s", gcall_name[l->call]);
		gsym_frame(sym, l->ret - 1, name, sizeof(name));
		if ((li = gp_add_loop(p, &site, name)) < 0)
			goto out_gp;
		loopmap[i] = li;
		p->loops[li].threads += l->threads;
		gp_stats_merge(&p->loops[li].all, &l->all);
		gp_stats_merge(&p->loops[li].async, &l->async);
	}
	for (size_t i = 0; i < s->nctx; i++) {
		const struct tctx *c = &s->ctx[i];
		uint32_t path[GP_MAX_PATH];
		struct gp_site site;
		int64_t m, id;

		ctxmap[i] = -1;
		if (c->loop < 0 || (uint32_t)c->loop >= s->nloops)
			continue;
		for (uint16_t k = 0; k < c->npath; k++) {
			int64_t f;

			gsym_frame(sym, (uintptr_t)c->path[k] - 1, name, sizeof(name));
			if ((f = gp_add_frame(p, name)) < 0)
				goto out_gp;
			path[k] = (uint32_t)f;
		}
		memset(&site, 0, sizeof(site));
		if ((m = site_of(p, &mm, c->ret, &site.offset)) < 0)
			goto out_gp;
		site.module = (uint32_t)m;
		site.depth = c->depth;
		snprintf(site.call, sizeof(site.call), "%s", gcall_name[c->call]);
		id = gp_add_context(p, (uint32_t)loopmap[c->loop], &site, path, c->npath);
		if (id == -1)
			goto out_gp;
		ctxmap[i] = id;
	}
	for (size_t i = 0; i < s->ncls; i++) {
		const struct tclass *c = &s->cls[i];
		uint32_t set[GP_MAX_CLASS_CONTEXTS];
		uint32_t n = 0;

		if (c->n == 0 || c->loop < 0 || (uint32_t)c->loop >= s->nloops)
			continue;
		for (uint32_t k = 0; k < c->nctx; k++)
			if (c->ctx[k] < s->nctx && ctxmap[c->ctx[k]] >= 0)
				set[n++] = (uint32_t)ctxmap[c->ctx[k]];
		if (gp_add_class(p, (uint32_t)loopmap[c->loop], set, n, c->size) == -1)
			goto out_gp;
	}
	rc = 0;
	goto out_free;
out_gp:
	snprintf(err, errlen, "%s", gp_error(p));
out_free:
	free(ctxmap);
	free(loopmap);
	gsym_free(sym);
	gmodmap_release(&mm);
	return rc;
}

int gtrain_save(struct gtrain *tr, char *err, size_t errlen)
{
	struct snapshot s;
	struct gprofile *p = NULL;
	int rc = -1;

	pthread_mutex_lock(&tr->save_mu);
	if (take_snapshot(tr, &s) < 0) {
		snprintf(err, errlen, "out of memory");
		goto out_unlock;
	}
	if (s.units == 0) {
		rc = 0;   /* nothing learnt since the last save */
		goto out_free;
	}
	if (util_mkdir_p(G.cfg.profile_dir) < 0) {
		snprintf(err, errlen, "%s: %s", G.cfg.profile_dir, strerror(errno));
		goto out_free;
	}
	if (!(p = gp_new())) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	if (build_delta(&s, p, err, errlen) < 0)
		goto out_free;
	/* the file keeps mean + k sd exactly; the floor is the guarding process's setting */
	rc = gp_save_merged(G.profile_path, p, 0, 2000, err, errlen);
	/* the file may hold other processes' (or the fleet's) learning: uploads send only ours */
	if (!tr->own)
		tr->own = gp_new();
	if (tr->own && gp_merge(tr->own, p) < 0) {
		gp_free(tr->own);
		tr->own = NULL;
	}
out_free:
	gp_free(p);
	free(s.ctx);
	free(s.cls);
out_unlock:
	pthread_mutex_unlock(&tr->save_mu);
	return rc;
}

int gtrain_own_write(struct gtrain *tr, struct buf *out)
{
	int rc = 1;

	pthread_mutex_lock(&tr->save_mu);
	if (tr->own && tr->own->units) {
		/* pooled statistics need their types again before they are written */
		rc = gp_cluster(tr->own, 0) < 0 || gp_write(tr->own, out) < 0 ? -1 : 0;
	}
	pthread_mutex_unlock(&tr->save_mu);
	return rc;
}
