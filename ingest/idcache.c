/* idcache: shared, bounded frame/stack id cache (see idcache.h). */
#include "ingest/idcache.h"
#include "common/buf.h"
#include "common/intern.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>

/* One generation of a map: keys to dense indexes, and by index the database id and the tag. */
struct idgen {
	struct intern *keys;   /* key -> dense index */
	int32_t *ids;          /* dense index -> database id */
	uint8_t *tags;         /* dense index -> the caller's tag (frames only; NULL for stacks) */
	size_t bytes;          /* key bytes held since the last clear */
};

/* A map in two generations: puts go to the young one; when it fills, the old one is dropped and the
 * young one becomes old. A lookup that finds a key only in the old one puts it in the young one
 * again, so that what batches keep using stays: a fleet whose live keys outnumber a generation
 * loses only those it has not used for a generation's worth of new ones, never all at once. Each
 * generation holds the map's room in entries (so live keys that fit it never turn it over) and
 * half of its key bytes. */
struct idmap {
	pthread_rwlock_t lock;
	struct idgen gen[2];
	unsigned young;        /* gen[young] takes the puts; gen[!young] is the old one */
	size_t max;            /* entries of one generation */
	_Atomic uint64_t full; /* times the young generation filled and dropped an old one not empty (/metrics) */
};

/* Key bytes one map may hold (both generations together): hostile streams with huge distinct frames
 * must not grow the cache past this. */
#define IDMAP_MAX_BYTES ((size_t)128 << 20)
#define IDGEN_MAX_BYTES (IDMAP_MAX_BYTES / 2)

struct idcache {
	struct idmap frames, stacks;
	/* the database's intern_epoch the ids belong to (sm_collect_interned() bumps it) */
	_Atomic uint64_t epoch;
	/* bumped by every emptying: a put stamped before one is dropped, whether the epoch moved or
	 * not (a failover keeps it) */
	_Atomic uint64_t gen;
	/* lookups by kind (frames, stacks) and outcome (found, not found), for /metrics */
	_Atomic uint64_t lookups[2][2];
};

static void idgen_fini(struct idgen *g)
{
	intern_free(g->keys);
	free(g->ids);
	free(g->tags);
}

static void idgen_clear(struct idgen *g)
{
	intern_clear(g->keys);
	g->bytes = 0;
}

/* max: the map's room in entries, each generation's. */
static int idmap_init(struct idmap *m, size_t max, bool tagged)
{
	m->max = max;
	for (int i = 0; i < 2; i++) {
		struct idgen *g = &m->gen[i];

		g->keys = intern_open(m->max);
		g->ids = malloc(m->max * sizeof(*g->ids));
		g->tags = tagged ? malloc(m->max) : NULL;
		if (!g->keys || !g->ids || (tagged && !g->tags))
			goto fail_gens;
	}
	pthread_rwlock_init(&m->lock, NULL);
	return 0;
fail_gens:
	idgen_fini(&m->gen[0]);
	idgen_fini(&m->gen[1]);
	return -1;
}

static void idmap_fini(struct idmap *m)
{
	pthread_rwlock_destroy(&m->lock);
	idgen_fini(&m->gen[0]);
	idgen_fini(&m->gen[1]);
}

/* idmap_put() with the map's write lock held. */
static int idmap_put_locked(struct idcache *c, struct idmap *m, const void *key, size_t len, int32_t id,
			    uint8_t tag, uint64_t stamp, bool warm)
{
	struct idgen *g = &m->gen[m->young];
	uint64_t h = intern_hash(key, len);
	int64_t k;

	/* an id mapped before the cache was emptied may name a collected row, or one the old primary
	 * gave: not kept */
	if (stamp != atomic_load(&c->gen))
		return 0;
	/* a key the young generation holds already (two workers moving or mapping the same one) takes
	 * no room, and never turns the map over */
	k = intern_find_hashed(g->keys, key, len, h);
	if (k < 0) {
		if (warm && (intern_count(g->keys) >= m->max / 2 || g->bytes + len > IDGEN_MAX_BYTES / 2))
			return -1;
		if (len > IDGEN_MAX_BYTES)
			return 0;   /* never held */
		if (g->bytes + len > IDGEN_MAX_BYTES || (k = intern_put_hashed(g->keys, key, len, h, NULL)) < 0) {
			/* the young generation is full: the old one goes, and it becomes the old one (counted
			 * when the old one held anything: the first turn after a warm-up drops nothing) */
			if (intern_count(m->gen[!m->young].keys))
				atomic_fetch_add_explicit(&m->full, 1, memory_order_relaxed);
			idgen_clear(&m->gen[!m->young]);
			m->young = !m->young;
			g = &m->gen[m->young];
			k = intern_put_hashed(g->keys, key, len, h, NULL);
		}
		if (k >= 0)
			g->bytes += len;
	}
	if (k >= 0) {
		g->ids[k] = id;
		if (g->tags)
			g->tags[k] = tag;
	}
	return 0;
}

/* Puts key -> id, mapped at stamp (the generation), in the young generation. A warm put (ids read
 * from the database at start) never makes it turn over: it is refused, -1, once the young one is
 * half full (entries or key bytes), leaving room for the batches. Returns 0, or -1 for a warm put
 * refused. */
static int idmap_put(struct idcache *c, struct idmap *m, const void *key, size_t len, int32_t id,
		     uint8_t tag, uint64_t stamp, bool warm)
{
	int rc;

	pthread_rwlock_wrlock(&m->lock);
	rc = idmap_put_locked(c, m, key, len, id, tag, stamp, warm);
	pthread_rwlock_unlock(&m->lock);
	return rc;
}

struct idcache *idcache_open(size_t max_frames, size_t max_stacks)
{
	struct idcache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	if (idmap_init(&c->frames, max_frames ? max_frames : 1, true) < 0)
		goto fail_free;
	if (idmap_init(&c->stacks, max_stacks ? max_stacks : 1, false) < 0)
		goto fail_frames;
	return c;
fail_frames:
	idmap_fini(&c->frames);
fail_free:
	free(c);
	return NULL;
}

void idcache_free(struct idcache *c)
{
	if (!c)
		return;
	idmap_fini(&c->frames);
	idmap_fini(&c->stacks);
	free(c);
}

/* Looks keys[0..n) up under one read lock, 64 at a time (their memory waits overlapping, see
 * intern_find_many()): in the young generation, then what it lacks in the old one. What only the
 * old one held is put in the young one afterwards, under the write lock once. Counts the lookups
 * once. */
static size_t idmap_get_many(struct idcache *c, struct idmap *m, int kind, const void *const *keys,
			     const size_t *lens, size_t n, int32_t *ids, uint8_t *tags)
{
	size_t found = 0, nold = 0;
	uint32_t *old = NULL;   /* the indexes found in the old generation only */
	uint64_t stamp;

	pthread_rwlock_rdlock(&m->lock);
	stamp = atomic_load(&c->gen);   /* emptying takes the write lock: this is the ids' */
	for (size_t b = 0; b < n; b += 64) {
		const struct idgen *y = &m->gen[m->young], *o = &m->gen[!m->young];
		size_t g = n - b < 64 ? n - b : 64, nmiss = 0;
		int64_t k[64];
		const void *mkeys[64];
		size_t mlens[64], at[64];

		intern_find_many(y->keys, keys + b, lens + b, g, k);
		for (size_t i = 0; i < g; i++) {
			ids[b + i] = k[i] < 0 ? -1 : y->ids[k[i]];
			if (tags)
				tags[b + i] = k[i] < 0 ? 0 : y->tags[k[i]];
			found += k[i] >= 0;
			if (k[i] < 0) {
				mkeys[nmiss] = keys[b + i];
				mlens[nmiss] = lens[b + i];
				at[nmiss++] = b + i;
			}
		}
		if (!nmiss || !intern_count(o->keys))
			continue;
		intern_find_many(o->keys, mkeys, mlens, nmiss, k);
		for (size_t i = 0; i < nmiss; i++) {
			if (k[i] < 0)
				continue;
			ids[at[i]] = o->ids[k[i]];
			if (tags)
				tags[at[i]] = o->tags[k[i]];
			found++;
			/* at most n of them: noted for the young generation, unless out of memory (then
			 * only not moved, still found) */
			if (!old && !(old = malloc(n * sizeof(*old))))
				continue;
			old[nold++] = (uint32_t)at[i];
		}
	}
	pthread_rwlock_unlock(&m->lock);
	if (nold) {
		pthread_rwlock_wrlock(&m->lock);
		for (size_t i = 0; i < nold; i++)
			idmap_put_locked(c, m, keys[old[i]], lens[old[i]], ids[old[i]], tags ? tags[old[i]] : 0,
					 stamp, false);
		pthread_rwlock_unlock(&m->lock);
	}
	free(old);
	/* (shared by every worker: added once a call, not once a key) */
	atomic_fetch_add_explicit(&c->lookups[kind][0], found, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->lookups[kind][1], n - found, memory_order_relaxed);
	return found;
}

size_t idcache_get_frames(struct idcache *c, const char *const *names, const size_t *lens, size_t n,
			  int32_t *ids, uint8_t *tags)
{
	return idmap_get_many(c, &c->frames, 0, (const void *const *)names, lens, n, ids, tags);
}

void idcache_put_frame(struct idcache *c, const char *name, size_t len, int32_t id, uint8_t tag,
		       uint64_t stamp)
{
	idmap_put(c, &c->frames, name, len, id, tag, stamp, false);
}

int idcache_warm_frame(struct idcache *c, const char *name, size_t len, int32_t id, uint8_t tag, uint64_t stamp)
{
	return idmap_put(c, &c->frames, name, len, id, tag, stamp, true);
}

size_t idcache_get_stacks(struct idcache *c, const int32_t *const *seqs, const size_t *bytes, size_t n,
			  int32_t *ids)
{
	return idmap_get_many(c, &c->stacks, 1, (const void *const *)seqs, bytes, n, ids, NULL);
}

int32_t idcache_get_stack(struct idcache *c, const int32_t *frame_ids, uint32_t n)
{
	size_t bytes = (size_t)n * sizeof(*frame_ids);
	int32_t id;

	idcache_get_stacks(c, &frame_ids, &bytes, 1, &id);
	return id;
}

void idcache_put_stack(struct idcache *c, const int32_t *frame_ids, uint32_t n, int32_t id, uint64_t stamp)
{
	idmap_put(c, &c->stacks, frame_ids, (size_t)n * sizeof(*frame_ids), id, 0, stamp, false);
}

int idcache_warm_stack(struct idcache *c, const int32_t *frame_ids, uint32_t n, int32_t id, uint64_t stamp)
{
	return idmap_put(c, &c->stacks, frame_ids, (size_t)n * sizeof(*frame_ids), id, 0, stamp, true);
}

uint64_t idcache_stamp(struct idcache *c, uint64_t *epoch)
{
	uint64_t gen;

	/* under a map's lock, which every emptying holds: the two of one moment */
	pthread_rwlock_rdlock(&c->frames.lock);
	gen = atomic_load(&c->gen);
	*epoch = atomic_load(&c->epoch);
	pthread_rwlock_unlock(&c->frames.lock);
	return gen;
}

/* Empties both maps (both locked: no reader sees one emptied and not the other) and starts a new
 * generation; with epoch != NULL, only when the cache is not of *epoch already, and then it becomes
 * so; with from != NULL too, only when the cache is still of generation *from. Returns the
 * generation after, or with from != NULL one no put matches when the cache moved on from it. */
static uint64_t clear_maps(struct idcache *c, const uint64_t *epoch, const uint64_t *from)
{
	uint64_t gen;

	pthread_rwlock_wrlock(&c->frames.lock);
	pthread_rwlock_wrlock(&c->stacks.lock);
	gen = atomic_load(&c->gen);
	if (from && gen != *from) {
		gen = *from;   /* stale: older than the cache's */
	} else if (!epoch || atomic_load(&c->epoch) != *epoch) {
		for (int i = 0; i < 2; i++) {
			idgen_clear(&c->frames.gen[i]);
			idgen_clear(&c->stacks.gen[i]);
		}
		if (epoch)
			atomic_store(&c->epoch, *epoch);
		atomic_store(&c->gen, ++gen);
	}
	pthread_rwlock_unlock(&c->stacks.lock);
	pthread_rwlock_unlock(&c->frames.lock);
	return gen;
}

void idcache_reset(struct idcache *c, uint64_t epoch)
{
	clear_maps(c, &epoch, NULL);
}

uint64_t idcache_reset_from(struct idcache *c, uint64_t from, uint64_t epoch)
{
	return clear_maps(c, &epoch, &from);
}

void idcache_clear(struct idcache *c)
{
	clear_maps(c, NULL, NULL);
}

void idcache_sizes(struct idcache *c, size_t *frames, size_t *stacks)
{
	/* both generations' (a key moved to the young one is counted twice until the old one goes) */
	pthread_rwlock_rdlock(&c->frames.lock);
	*frames = intern_count(c->frames.gen[0].keys) + intern_count(c->frames.gen[1].keys);
	pthread_rwlock_unlock(&c->frames.lock);
	pthread_rwlock_rdlock(&c->stacks.lock);
	*stacks = intern_count(c->stacks.gen[0].keys) + intern_count(c->stacks.gen[1].keys);
	pthread_rwlock_unlock(&c->stacks.lock);
}

int idcache_render(struct idcache *c, struct buf *b)
{
	static const char *const kinds[2] = { "frame", "stack" };
	size_t n[2];
	int rc;

	idcache_sizes(c, &n[0], &n[1]);
	rc = buf_puts(b, "# HELP sm_ingest_idcache_entries Frames and stacks held in the id cache.\n"
			 "# TYPE sm_ingest_idcache_entries gauge\n");
	for (int k = 0; k < 2; k++)
		rc |= buf_printf(b, "sm_ingest_idcache_entries{kind=\"%s\"} %zu\n", kinds[k], n[k]);
	rc |= buf_puts(b, "# HELP sm_ingest_idcache_lookups_total Frames and stacks looked up in the id cache, by"
			  " outcome (a miss asks the database).\n"
			  "# TYPE sm_ingest_idcache_lookups_total counter\n");
	for (int k = 0; k < 2; k++)
		for (int miss = 0; miss < 2; miss++)
			rc |= buf_printf(b, "sm_ingest_idcache_lookups_total{kind=\"%s\",result=\"%s\"} %llu\n",
					 kinds[k], miss ? "miss" : "hit",
					 (unsigned long long)atomic_load_explicit(&c->lookups[k][miss],
										  memory_order_relaxed));
	rc |= buf_puts(b, "# HELP sm_ingest_idcache_full_total Times a map of the id cache filled its young generation and"
			  " dropped the old one's entries (often: --id-cache-frames or --id-cache-stacks below the"
			  " fleet's).\n"
			  "# TYPE sm_ingest_idcache_full_total counter\n");
	for (int k = 0; k < 2; k++)
		rc |= buf_printf(b, "sm_ingest_idcache_full_total{kind=\"%s\"} %llu\n", kinds[k],
				 (unsigned long long)atomic_load_explicit(k ? &c->stacks.full : &c->frames.full,
									  memory_order_relaxed));
	return rc;
}
