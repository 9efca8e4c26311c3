/*
 * train: what a training process learns (guard.md "Unit types"): its loop
 * sites, the contexts met inside units with the call path that led to each,
 * and the classes of units (same contexts) with their duration statistics.
 *
 * Program threads add to the tables (learnt.h) under one mutex, briefly; the
 * call path of a new context is walked outside it. Nothing allocates under
 * the mutex: the tables are mapped whole at start (untouched pages cost
 * nothing), in the process's region when the host's collector saves them,
 * with hash indexes of the process's own. A program thread may wait for the
 * mutex inside a wrapped lock or condition wait of the program's allocator,
 * which then holds its own lock: a holder that called the allocator could
 * wait for it forever.
 *
 * Without a collector, gtrain_save() (the shipping thread, and exit) takes
 * what was learnt since the last save, names the addresses (module, offset,
 * build id, function), and merges it into the profile file with
 * gp_save_merged(), so the processes of one program (a forking server's
 * workers) and its restarts all add to the same profile; the collector does
 * the same from the region (collect.c).
 */
#include "agent/guard/learnt.h"
#include "agent/guard/modmap.h"
#include "agent/guard/hot.h"
#include "common/util.h"
#include "agent/guard/symbolize.h"
#include "agent/guard/unwind.h"
#include "common/hash.h"
#include "common/vec.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define TRAIN_SLOTS 16384   /* per index: twice the most entries, so probing always ends */

_Static_assert(TRAIN_SLOTS >= 2 * LEARNT_MAX_CONTEXTS && TRAIN_SLOTS >= 2 * LEARNT_MAX_CLASSES,
	       "an index has room for twice its entries");

struct gtrain {
	pthread_mutex_t mu;           /* the tables */
	pthread_mutex_t save_mu;      /* one save at a time */
	struct learnt *l;             /* the tables: the region's (the collector saves) or mapped here */
	uint32_t *ctx_slot;           /* the contexts' index: id + 1, 0 empty; TRAIN_SLOTS */
	uint32_t *cls_slot;           /* the classes' index */
};

struct ctx_key {
	uintptr_t ret;
	int64_t depth;
	int32_t loop;
	int32_t pad;
};

struct gtrain *gtrain_new(struct learnt *shared)
{
	struct gtrain *tr = calloc(1, sizeof(*tr));
	size_t idx = 2 * (size_t)TRAIN_SLOTS * sizeof(uint32_t);
	unsigned char *p;

	if (!tr)
		return NULL;
	p = mmap(NULL, idx + (shared ? 0 : sizeof(struct learnt)), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		free(tr);
		return NULL;
	}
	tr->ctx_slot = (uint32_t *)(void *)p;
	tr->cls_slot = tr->ctx_slot + TRAIN_SLOTS;
	tr->l = shared ? shared : (struct learnt *)(void *)(p + idx);
	pthread_mutex_init(&tr->mu, NULL);
	pthread_mutex_init(&tr->save_mu, NULL);
	return tr;
}

void gtrain_moved(struct gtrain *tr, struct learnt *l)
{
	tr->l = l;
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
	for (i = hash_bytes(&key, sizeof(key));; i++) {
		uint32_t *slot = &tr->ctx_slot[i & (TRAIN_SLOTS - 1)];
		const struct learnt_ctx *c;

		if (!*slot)
			return slot;
		c = &tr->l->ctx[*slot - 1];
		if (c->ret == ret && c->depth == depth && c->loop == loop)
			return slot;
	}
}

/* The same for a class: key[0] the loop, then its nctx contexts, sorted. */
static uint32_t *cls_find(struct gtrain *tr, const uint32_t *key, uint32_t nctx)
{
	for (uint64_t i = hash_bytes(key, (nctx + 1) * sizeof(*key));; i++) {
		uint32_t *slot = &tr->cls_slot[i & (TRAIN_SLOTS - 1)];
		const struct learnt_class *c;

		if (!*slot)
			return slot;
		c = &tr->l->cls[*slot - 1];
		if (c->loop == (int32_t)key[0] && c->nctx == nctx && memcmp(c->ctx, key + 1, nctx * sizeof(*key)) == 0)
			return slot;
	}
}

void gtrain_reset_child(struct gtrain *tr)
{
	struct learnt *l = tr->l;

	/* the parent's learning is the parent's to save and upload: no count, and no saved count (every
	 * entry's, before the tables may be emptied below: an entry added again starts from nothing) */
	learnt_zero_counts(l);
	/* the locks as new (fork.c); tables a thread of the parent was changing, empty */
	if (guard_lock_reset_child(&tr->mu)) {
		atomic_store(&l->nloops, 0);
		atomic_store(&l->nctx, 0);
		atomic_store(&l->ncls, 0);
		memset(tr->ctx_slot, 0, 2 * (size_t)TRAIN_SLOTS * sizeof(uint32_t));
	}
	guard_lock_reset_child(&tr->save_mu);
}

int32_t gtrain_loop(struct gtrain *tr, uintptr_t ret, int64_t depth, uint16_t call)
{
	struct learnt *l = tr->l;
	uint32_t n;
	int32_t id = -1;

	pthread_mutex_lock(&tr->mu);
	n = atomic_load_explicit(&l->nloops, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++)
		if (l->loops[i].ret == ret && l->loops[i].depth == depth) {
			id = (int32_t)i;
			break;
		}
	if (id < 0 && n < GP_MAX_LOOPS) {
		struct learnt_loop *lp = &l->loops[n];

		id = (int32_t)n;
		learnt_write_begin(&lp->seq);
		lp->ret = ret;
		lp->depth = depth;
		lp->call = call;
		lp->threads = 0;
		memset(&lp->all, 0, sizeof(lp->all));
		memset(&lp->async, 0, sizeof(lp->async));
		learnt_write_end(&lp->seq);
		atomic_store_explicit(&l->nloops, n + 1, memory_order_release);
	}
	if (id >= 0) {
		learnt_write_begin(&l->loops[id].seq);
		l->loops[id].threads++;
		learnt_write_end(&l->loops[id].seq);
	}
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
	uint32_t got, n = 0;

	if (GUARD_UNLIKELY(unwind_want_cache))
		guard_trace_cache(&guard_tls);
	got = unwind_here(ips, GP_MAX_PATH + 16);

	for (uint32_t i = 0; i < got && n < GP_MAX_PATH; i++)
		if (!(ips[i] >= G.self_lo && ips[i] < G.self_hi))   /* the agent's own frames */
			tmp[n++] = ips[i];
	for (uint32_t i = 0; i < n; i++)
		path[i] = tmp[n - 1 - i];
	return (uint16_t)n;
}

uint32_t gtrain_context(struct gtrain *tr, int32_t loop, uintptr_t ret, int64_t depth, uint16_t call)
{
	struct learnt *l = tr->l;
	uint64_t path[GP_MAX_PATH];
	uint16_t npath;
	uint32_t *slot, id, n;

	pthread_mutex_lock(&tr->mu);
	id = *ctx_find(tr, ret, depth, loop);
	pthread_mutex_unlock(&tr->mu);
	if (id)
		return id - 1;
	/* a new context: walk its call path once, outside the lock */
	npath = capture_path(path);
	pthread_mutex_lock(&tr->mu);
	slot = ctx_find(tr, ret, depth, loop);
	n = atomic_load_explicit(&l->nctx, memory_order_relaxed);
	if (!*slot && n < LEARNT_MAX_CONTEXTS) {
		struct learnt_ctx *c = &l->ctx[n];

		c->ret = ret;
		c->depth = depth;
		c->loop = loop;
		c->call = call;
		c->npath = npath;
		memcpy(c->path, path, npath * sizeof(path[0]));
		/* written whole before the count that shows it */
		atomic_store_explicit(&l->nctx, n + 1, memory_order_release);
		*slot = n + 1;
	}
	id = *slot;
	pthread_mutex_unlock(&tr->mu);
	return id ? id - 1 : UINT32_MAX;
}

void gtrain_unit(struct gtrain *tr, int32_t loop, const uint32_t *ctx, uint32_t nctx, uint32_t calls,
		 int64_t dur_ns)
{
	struct learnt *l = tr->l;
	uint32_t key[GP_MAX_CLASS_CONTEXTS + 1], *slot, n;

	if (loop < 0 || loop >= GP_MAX_LOOPS || nctx > GP_MAX_CLASS_CONTEXTS)
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
	learnt_write_begin(&l->loops[loop].seq);
	gp_stats_add(&l->loops[loop].all, (double)dur_ns);
	learnt_write_end(&l->loops[loop].seq);
	slot = cls_find(tr, key, nctx);
	n = atomic_load_explicit(&l->ncls, memory_order_relaxed);
	if (!*slot && n < LEARNT_MAX_CLASSES) {
		struct learnt_class *c = &l->cls[n];

		learnt_write_begin(&c->seq);
		c->loop = loop;
		c->nctx = nctx;
		memcpy(c->ctx, key + 1, nctx * sizeof(*ctx));
		c->n = 0;
		memset(c->size, 0, sizeof(c->size));
		learnt_write_end(&c->seq);
		atomic_store_explicit(&l->ncls, n + 1, memory_order_release);
		*slot = n + 1;
	}
	if (*slot) {
		struct learnt_class *c = &l->cls[*slot - 1];

		learnt_write_begin(&c->seq);
		c->n++;
		gp_stats_add(&c->size[gp_bucket(calls)], (double)dur_ns);
		learnt_write_end(&c->seq);
	}
	/* last: a saver that sees the unit counted sees what it changed */
	atomic_store_explicit(&l->units, atomic_load_explicit(&l->units, memory_order_relaxed) + 1,
			      memory_order_release);
	pthread_mutex_unlock(&tr->mu);
}

void gtrain_async(struct gtrain *tr, int32_t loop, int64_t dur_ns)
{
	struct learnt_loop *lp;

	if (loop < 0 || (uint32_t)loop >= GP_MAX_LOOPS)
		return;
	lp = &tr->l->loops[loop];
	pthread_mutex_lock(&tr->mu);
	learnt_write_begin(&lp->seq);
	gp_stats_add(&lp->async, (double)(dur_ns > 0 ? dur_ns : 0));
	learnt_write_end(&lp->seq);
	pthread_mutex_unlock(&tr->mu);
}

/* ---- saving (in the process: the host's collector saves the region's) ---- */

/* The names of this process's addresses (caller releases both). */
static int namer_open(struct learnt_namer *nm, struct gmodmap *mm, char *err, size_t errlen)
{
	memset(nm, 0, sizeof(*nm));
	if (unwind_modmap_load(mm) < 0 || !(nm->sym = gsym_open(mm, err, errlen)))
		return -1;
	nm->mods = mm;
	nm->exe = G.exe;
	nm->build_id = G.build_id;
	nm->k = G.cfg.k >= 0 ? G.cfg.k : GP_DEFAULT_K;
	nm->cut = G.cfg.cut;
	return 0;
}

static void namer_close(struct learnt_namer *nm, struct gmodmap *mm)
{
	gsym_free(nm->sym);
	nm->sym = NULL;
	gmodmap_release(mm);
}

int gtrain_save(struct gtrain *tr, char *err, size_t errlen)
{
	struct gmodmap mm = { NULL, 0 };
	struct learnt_namer nm = { 0 };
	struct learnt_copy *cp;
	struct gprofile *p = NULL;
	int rc = -1;

	pthread_mutex_lock(&tr->save_mu);
	if (!(cp = learnt_take(tr->l))) {
		snprintf(err, errlen, "out of memory");
		goto out_unlock;
	}
	if (learnt_copy_units(cp, tr->l) == 0) {
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
	if (namer_open(&nm, &mm, err, errlen) < 0 || learnt_profile(cp, tr->l, 0, &nm, p, err, errlen) < 0)
		goto out_free;
	/* the file keeps mean + k sd exactly; the floor is the guarding process's setting */
	rc = gp_save_merged(G.profile_path, p, 0, 2000, err, errlen);
	if (rc == 0)
		learnt_mark_saved(tr->l, cp);   /* else the next save tries again */
out_free:
	gp_free(p);
	namer_close(&nm, &mm);
	learnt_copy_free(cp);
out_unlock:
	pthread_mutex_unlock(&tr->save_mu);
	return rc;
}

int gtrain_own_write(struct gtrain *tr, struct buf *out)
{
	struct gmodmap mm = { NULL, 0 };
	struct learnt_namer nm = { 0 };
	struct learnt_copy *cp;
	struct gprofile *p = NULL;
	char err[256];
	int rc = -1;

	pthread_mutex_lock(&tr->save_mu);
	if (!(cp = learnt_take(tr->l)))
		goto out_unlock;
	/* only once something was saved: an upload follows a save */
	if (tr->l->units_saved == 0) {
		rc = 1;
		goto out_free;
	}
	/* what the process learnt since it started (the file may hold others' too), types made again */
	if (!(p = gp_new()) || namer_open(&nm, &mm, err, sizeof(err)) < 0 ||
	    learnt_profile(cp, tr->l, 1, &nm, p, err, sizeof(err)) < 0 || gp_cluster(p, 0) < 0)
		goto out_free;
	rc = gp_write(p, out) < 0 ? -1 : 0;
out_free:
	gp_free(p);
	namer_close(&nm, &mm);
	learnt_copy_free(cp);
out_unlock:
	pthread_mutex_unlock(&tr->save_mu);
	return rc;
}
