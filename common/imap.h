/*
 * imap: the integer hash map of the project, from 64-bit keys to 64-bit values
 * (a double fits with imap_put_double()/imap_get_double()).
 *
 * Open addressing with linear probing, at most half full, deletion by
 * backward shift (no tombstones, so lookups stay short after many deletions),
 * Fibonacci hashing of the key. UINT64_MAX is the empty slot and cannot be a
 * key. Iterate over the slots:
 *
 *   for (size_t i = 0; i < m.cap; i++)
 *           if (m.keys[i] != IMAP_EMPTY) use(m.keys[i], m.vals[i]);
 *
 * The guard agent's tables (agent/guard/unit.c) stay apart: they are read from
 * signal handlers and never allocate.
 */
#ifndef SM_IMAP_H
#define SM_IMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define IMAP_EMPTY UINT64_MAX

struct imap {
	uint64_t *keys, *vals;
	size_t cap, cnt;        /* cap: 0 or a power of two */
	unsigned shift;         /* 64 - log2(cap) */
};

#define IMAP_INIT { NULL, NULL, 0, 0, 64 }

static inline size_t imap_home(const struct imap *m, uint64_t key)
{
	return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> m->shift);
}

/* The slot of key, or SIZE_MAX when absent. */
static inline size_t imap_find(const struct imap *m, uint64_t key)
{
	size_t i;

	if (!m->cnt)
		return SIZE_MAX;
	for (i = imap_home(m, key);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key)
			return i;
		if (m->keys[i] == IMAP_EMPTY)
			return SIZE_MAX;
	}
}

static inline bool imap_get(const struct imap *m, uint64_t key, uint64_t *val)
{
	size_t i = imap_find(m, key);

	if (i == SIZE_MAX)
		return false;
	*val = m->vals[i];
	return true;
}

/* Room for n entries without growing. Returns 0 or -1 (out of memory). */
int imap_reserve(struct imap *m, size_t n);
/* Sets key to val. Returns 0 (added), 1 (replaced) or -1 (out of memory; the map is unchanged). */
int imap_put(struct imap *m, uint64_t key, uint64_t val);
/* Removes key. Returns whether it was there. */
bool imap_del(struct imap *m, uint64_t key);
/* Empties the map, keeping its memory. */
void imap_clear(struct imap *m);
/* Frees the memory; the map is empty and reusable. NULL-safe. */
void imap_free(struct imap *m);

static inline int imap_put_double(struct imap *m, uint64_t key, double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	return imap_put(m, key, u);
}

static inline bool imap_get_double(const struct imap *m, uint64_t key, double *v)
{
	uint64_t u;

	if (!imap_get(m, key, &u))
		return false;
	memcpy(v, &u, sizeof(*v));
	return true;
}

static inline double imap_double_at(const struct imap *m, size_t slot)
{
	double v;

	memcpy(&v, &m->vals[slot], sizeof(v));
	return v;
}

#endif
