/*
 * idcache: the ingest server's in-process map from frame strings and frame-id
 * sequences to their database ids, shared by all workers, so that a frame or
 * stack seen before costs no database round trip. Bounded: each map keeps two
 * generations; when the young one fills, the old one is dropped and the young
 * one becomes old, and a key found only in the old one moves to the young one,
 * so that what streams keep using stays. The ids
 * belong to an epoch of the database (settings intern_epoch): a collection of
 * unused frames and stacks (sm_collect_interned()) starts a new one, and the
 * cache is emptied (idcache_reset()) before ids of the old one can be used.
 * Every emptying starts a new generation: what a caller mapped from the
 * database is put with the stamp (idcache_stamp()) it took before asking, and
 * dropped when the cache was emptied meanwhile by a new epoch or a failover.
 */
#ifndef SM_IDCACHE_H
#define SM_IDCACHE_H

#include <stddef.h>
#include <stdint.h>

struct buf;
struct idcache;

/* What a map may be sized to (sm-ingest --id-cache-frames, --id-cache-stacks). Its keys' bytes are
 * bounded besides (128 MiB a map), whatever the count. */
#define IDCACHE_MIN 1024
#define IDCACHE_MAX 4194304

/* Returns a cache whose maps' generations hold at most max_frames frames and max_stacks stacks each
 * (so twice that in all), or NULL. Caller frees. */
struct idcache *idcache_open(size_t max_frames, size_t max_stacks);
void idcache_free(struct idcache *c);   /* NULL-safe */
/* For each names[i] (lens[i] bytes) set ids[i] to its database id or -1, and tags[i] to the tag put
 * with it (0 when not found). Returns how many were found. */
size_t idcache_get_frames(struct idcache *c, const char *const *names, const size_t *lens, size_t n,
			  int32_t *ids, uint8_t *tags);
/* Ids mapped at stamp (idcache_stamp() before the mapping): dropped if the cache was emptied
 * since. tag: a byte the caller keeps with the frame, worked out once from its
 * name (the store: whether it is an unnamed frame's), returned by idcache_get_frames(). */
void idcache_put_frame(struct idcache *c, const char *name, size_t len, int32_t id, uint8_t tag,
		       uint64_t stamp);
/* The same for a warm-up (ids read from the database, not mapped by a batch): refused, -1, once the
 * map's young generation is half full (entries or key bytes), so that a warm-up leaves room and
 * never turns the map over. */
int idcache_warm_frame(struct idcache *c, const char *name, size_t len, int32_t id, uint8_t tag, uint64_t stamp);
int idcache_warm_stack(struct idcache *c, const int32_t *frame_ids, uint32_t n, int32_t id, uint64_t stamp);
/* Database id of the stack with these frame ids, or -1. */
int32_t idcache_get_stack(struct idcache *c, const int32_t *frame_ids, uint32_t n);
/* For each seqs[i] (the frame ids of a stack, bytes[i] bytes) set ids[i] to the stack's database id
 * or -1, all under one read lock (and the write lock once more when some were found in the old
 * generation only, to move them to the young one). Returns how many were found. */
size_t idcache_get_stacks(struct idcache *c, const int32_t *const *seqs, const size_t *bytes, size_t n,
			  int32_t *ids);
void idcache_put_stack(struct idcache *c, const int32_t *frame_ids, uint32_t n, int32_t id, uint64_t stamp);
/* The cache's generation, for the puts of what the caller maps next, and in *epoch the epoch the
 * cached ids belong to (0 at first), both of one moment. */
uint64_t idcache_stamp(struct idcache *c, uint64_t *epoch);
/* Empties the cache for a new epoch (nothing when it is there already). */
void idcache_reset(struct idcache *c, uint64_t epoch);
/* The same, only when the cache is still of generation from (a stamp taken before the caller's
 * snapshot): what a reader of an older snapshot does, so that a cache another worker moved on since
 * is never moved back. Returns the stamp for the puts of what that snapshot holds: a stale one,
 * that none matches, when the cache moved on. */
uint64_t idcache_reset_from(struct idcache *c, uint64_t from, uint64_t epoch);
/* Empties the cache, keeping its epoch: after a failover, ids the old primary gave may not
 * exist on the new one (asynchronous replication loses the last transactions). */
void idcache_clear(struct idcache *c);
/* Current sizes, for logs and tests. */
void idcache_sizes(struct idcache *c, size_t *frames, size_t *stacks);
/* Appends the cache's sizes and lookups in the Prometheus text format. 0, or -1 (buffer full). */
int idcache_render(struct idcache *c, struct buf *b);

#endif
