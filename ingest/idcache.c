/* idcache: shared, bounded frame/stack id cache (see idcache.h). */
#include "ingest/idcache.h"
#include "common/buf.h"
#include "common/intern.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>

struct idmap {
	pthread_rwlock_t lock;
	struct intern *keys;   /* key -> dense index */
	int32_t *ids;          /* dense index -> database id */
	uint8_t *tags;         /* dense index -> the caller's tag (frames only; NULL for stacks) */
	size_t max;
	size_t bytes;          /* key bytes held since the last clear */
	_Atomic uint64_t full; /* times it filled and was emptied, for /metrics */
};

/* Key bytes one map may hold: hostile streams with huge distinct frames must
 * not grow the cache past this. */
#define IDMAP_MAX_BYTES ((size_t)128 << 20)

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

static int idmap_init(struct idmap *m, size_t max, bool tagged)
{
	m->keys = intern_open(max);
	m->ids = malloc(max * sizeof(*m->ids));
	m->tags = tagged ? malloc(max) : NULL;
	m->max = max;
	if (!m->keys || !m->ids || (tagged && !m->tags)) {
		intern_free(m->keys);
		free(m->ids);
		free(m->tags);
		return -1;
	}
	pthread_rwlock_init(&m->lock, NULL);
	return 0;
}

static void idmap_fini(struct idmap *m)
{
	pthread_rwlock_destroy(&m->lock);
	intern_free(m->keys);
	free(m->ids);
	free(m->tags);
}

/* Puts key -> id, mapped at stamp (the generation). A map that is full starts over, unless warm: then the put is refused once
 * the map is half full (entries or key bytes), so that a warm-up never empties it. Returns 0, or -1
 * for a warm put refused. */
static int idmap_put(struct idcache *c, struct idmap *m, const void *key, size_t len, int32_t id,
		     uint8_t tag, uint64_t stamp, bool warm)
{
	size_t n0;
	int64_t k;

	pthread_rwlock_wrlock(&m->lock);
	/* an id mapped before the cache was emptied may name a collected row, or one the old primary
	 * gave: not kept */
	if (stamp != atomic_load(&c->gen)) {
		pthread_rwlock_unlock(&m->lock);
		return 0;
	}
	n0 = intern_count(m->keys);
	if (warm && (n0 >= m->max / 2 || m->bytes + len > IDMAP_MAX_BYTES / 2)) {
		pthread_rwlock_unlock(&m->lock);
		return -1;
	}
	k = m->bytes + len > IDMAP_MAX_BYTES ? -1 : intern_put(m->keys, key, len, NULL);
	if (k < 0) {
		/* full: start over rather than grow; hot keys come back at once */
		intern_clear(m->keys);
		atomic_fetch_add_explicit(&m->full, 1, memory_order_relaxed);
		m->bytes = 0;
		n0 = 0;
		k = intern_put(m->keys, key, len, NULL);
	}
	if (intern_count(m->keys) > n0)   /* a key put again holds no more bytes */
		m->bytes += len;
	if (k >= 0) {
		m->ids[k] = id;
		if (m->tags)
			m->tags[k] = tag;
	}
	pthread_rwlock_unlock(&m->lock);
	return 0;
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
 * intern_find_many()), and counts the lookups once. */
static size_t idmap_get_many(struct idcache *c, struct idmap *m, int kind, const void *const *keys,
			     const size_t *lens, size_t n, int32_t *ids, uint8_t *tags)
{
	size_t found = 0;

	pthread_rwlock_rdlock(&m->lock);
	for (size_t b = 0; b < n; b += 64) {
		size_t g = n - b < 64 ? n - b : 64;
		int64_t k[64];

		intern_find_many(m->keys, keys + b, lens + b, g, k);
		for (size_t i = 0; i < g; i++) {
			ids[b + i] = k[i] < 0 ? -1 : m->ids[k[i]];
			if (tags)
				tags[b + i] = k[i] < 0 ? 0 : m->tags[k[i]];
			found += k[i] >= 0;
		}
	}
	pthread_rwlock_unlock(&m->lock);
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
		intern_clear(c->frames.keys);
		intern_clear(c->stacks.keys);
		c->frames.bytes = c->stacks.bytes = 0;
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
	pthread_rwlock_rdlock(&c->frames.lock);
	*frames = intern_count(c->frames.keys);
	pthread_rwlock_unlock(&c->frames.lock);
	pthread_rwlock_rdlock(&c->stacks.lock);
	*stacks = intern_count(c->stacks.keys);
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
	rc |= buf_puts(b, "# HELP sm_ingest_idcache_full_total Times a map of the id cache filled and was emptied"
			  " (often: --id-cache-frames or --id-cache-stacks below the fleet's).\n"
			  "# TYPE sm_ingest_idcache_full_total counter\n");
	for (int k = 0; k < 2; k++)
		rc |= buf_printf(b, "sm_ingest_idcache_full_total{kind=\"%s\"} %llu\n", kinds[k],
				 (unsigned long long)atomic_load_explicit(k ? &c->stacks.full : &c->frames.full,
									  memory_order_relaxed));
	return rc;
}
