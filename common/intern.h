/*
 * intern: a hash map from byte strings to dense ids 0, 1, 2, ...
 *
 * Used wherever the same frame names and stacks come again and again
 * (importers, generators, ingest caches): each distinct key is stored once,
 * in an arena, and compared by id afterwards. Bounded: a map refuses new
 * keys past `max_keys` so that hostile input cannot grow it without end.
 */
#ifndef SM_INTERN_H
#define SM_INTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct intern;

/* Returns a new map holding at most max_keys keys (0: no limit), or NULL. Caller frees. */
struct intern *intern_open(size_t max_keys);
/* NULL-safe. */
void intern_free(struct intern *m);
/* Id of key, adding it if new (*added set when non-NULL). Returns -1 when full or out of memory. */
int64_t intern_put(struct intern *m, const void *key, size_t len, bool *added);
/* Id of key, or -1 if absent. */
int64_t intern_find(const struct intern *m, const void *key, size_t len);
/* intern_find() of keys[0..n) (lens[i] bytes each): ids[i] the id of keys[i], or -1. Faster than
 * one at a time on a map larger than the caches: the lookups' memory reads overlap. */
void intern_find_many(const struct intern *m, const void *const *keys, const size_t *lens, size_t n, int64_t *ids);
/* The key with this id (NUL-terminated copy); *len set when non-NULL. */
const void *intern_key(const struct intern *m, uint32_t id, size_t *len);
size_t intern_count(const struct intern *m);
/* Forget every key (ids restart at 0). */
void intern_clear(struct intern *m);
/* 64-bit hash of a byte string, for callers that need one. */
uint64_t intern_hash(const void *key, size_t len);
/* intern_find() and intern_put() given h = intern_hash(key, len), for callers that look the
 * same key up more than once (web/flame.c hashes a frame once, then finds and adds it). */
int64_t intern_find_hashed(const struct intern *m, const void *key, size_t len, uint64_t h);
int64_t intern_put_hashed(struct intern *m, const void *key, size_t len, uint64_t h, bool *added);

#endif
