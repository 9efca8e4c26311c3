/* intern: byte strings to dense ids, open addressing (see intern.h). */
#include "common/intern.h"
#include "common/arena.h"
#include "common/hash.h"
#include "common/vec.h"

#include <stdlib.h>
#include <string.h>

struct entry {
	const unsigned char *key;
	uint32_t len;
	uint32_t hash32;
};

struct intern {
	struct arena *keys;
	struct entry *ents;    /* by id */
	uint32_t *slots;       /* id + 1, 0 = empty */
	size_t nents, cap_ents, nslots, max_keys;
};

static inline uint64_t rd64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

uint64_t intern_hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;
	size_t i = 0;

	for (; i + 8 <= len; i += 8)
		h = (h ^ hash_mix64(rd64(p + i))) * 0x100000001b3ULL + 0x632be59bd9b4e019ULL;
	if (i < len) {
		uint64_t t = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		/* the last 1..7 bytes, zero-extended, without a call to memcpy of a variable length: the
		 * 8 bytes that end the key shifted down, or for a short key its bytes one by one */
		if (len >= 8)
			t = rd64(p + len - 8) >> (8 * (8 - (len - i)));
		else
			for (size_t k = len; k-- > 0;)
				t = t << 8 | p[k];
#else
		memcpy(&t, p + i, len - i);
#endif
		h = (h ^ hash_mix64(t ^ 0xa0761d6478bd642fULL)) * 0x100000001b3ULL;
	}
	return hash_mix64(h);
}

struct intern *intern_open(size_t max_keys)
{
	struct intern *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->keys = arena_open(0);
	m->nslots = 1024;
	m->slots = calloc(m->nslots, sizeof(*m->slots));
	if (!m->keys || !m->slots) {
		intern_free(m);
		return NULL;
	}
	m->max_keys = max_keys;
	return m;
}

void intern_free(struct intern *m)
{
	if (!m)
		return;
	arena_free(m->keys);
	free(m->ents);
	free(m->slots);
	free(m);
}

static size_t probe(const struct intern *m, const void *key, size_t len, uint64_t h, bool *found)
{
	size_t mask = m->nslots - 1, i = (size_t)h & mask;
	uint32_t h32 = (uint32_t)(h >> 32);

	for (;;) {
		uint32_t s = m->slots[i];
		if (!s) {
			*found = false;
			return i;
		}
		const struct entry *e = &m->ents[s - 1];
		if (e->hash32 == h32 && e->len == len && memcmp(e->key, key, len) == 0) {
			*found = true;
			return i;
		}
		i = (i + 1) & mask;
	}
}

static int grow_slots(struct intern *m)
{
	size_t n = m->nslots * 2, mask = n - 1;
	uint32_t *slots = calloc(n, sizeof(*slots));

	if (!slots)
		return -1;
	for (size_t id = 0; id < m->nents; id++) {
		const struct entry *e = &m->ents[id];
		size_t i = (size_t)intern_hash(e->key, e->len) & mask;
		while (slots[i])
			i = (i + 1) & mask;
		slots[i] = (uint32_t)id + 1;
	}
	free(m->slots);
	m->slots = slots;
	m->nslots = n;
	return 0;
}

int64_t intern_find_hashed(const struct intern *m, const void *key, size_t len, uint64_t h)
{
	bool found;
	size_t i = probe(m, key, len, h, &found);

	return found ? (int64_t)m->slots[i] - 1 : -1;
}

int64_t intern_find(const struct intern *m, const void *key, size_t len)
{
	return intern_find_hashed(m, key, len, intern_hash(key, len));
}

void intern_find_many(const struct intern *m, const void *const *keys, const size_t *lens, size_t n, int64_t *ids)
{
	enum { GROUP = 16 };
	size_t mask = m->nslots - 1;
	uint64_t h[GROUP];

	/* a large map's lookup waits on three lines in turn (slot, entry, key): a group's are asked
	 * for one stage at a time, so that the waits overlap; the lookups proper find them near */
	for (size_t b = 0; b < n; b += GROUP) {
		size_t g = n - b < GROUP ? n - b : GROUP;

		for (size_t j = 0; j < g; j++) {
			h[j] = intern_hash(keys[b + j], lens[b + j]);
			__builtin_prefetch(&m->slots[h[j] & mask]);
		}
		for (size_t j = 0; j < g; j++) {
			uint32_t s = m->slots[h[j] & mask];

			if (s)
				__builtin_prefetch(&m->ents[s - 1]);
		}
		for (size_t j = 0; j < g; j++) {
			uint32_t s = m->slots[h[j] & mask];

			if (s && m->ents[s - 1].hash32 == (uint32_t)(h[j] >> 32))
				__builtin_prefetch(m->ents[s - 1].key);
		}
		for (size_t j = 0; j < g; j++)
			ids[b + j] = intern_find_hashed(m, keys[b + j], lens[b + j], h[j]);
	}
}

int64_t intern_put(struct intern *m, const void *key, size_t len, bool *added)
{
	return intern_put_hashed(m, key, len, intern_hash(key, len), added);
}

int64_t intern_put_hashed(struct intern *m, const void *key, size_t len, uint64_t h, bool *added)
{
	bool found;
	size_t i;
	struct entry *e;
	unsigned char *copy;

	if (added)
		*added = false;
	/* grow first, so the table never fills and probing always ends; at most half full keeps the
	 * probes short (a slot is 4 bytes, little beside the key) */
	if ((m->nents + 1) * 2 > m->nslots && grow_slots(m) < 0)
		return intern_find_hashed(m, key, len, h);
	i = probe(m, key, len, h, &found);
	if (found)
		return (int64_t)m->slots[i] - 1;
	if ((m->max_keys && m->nents >= m->max_keys) || m->nents >= UINT32_MAX - 1 || len > UINT32_MAX)
		return -1;
	if (vec_reserve(&m->ents, &m->cap_ents, m->nents + 1, sizeof(*m->ents)) < 0)
		return -1;
	copy = arena_alloc(m->keys, len + 1);
	if (!copy)
		return -1;
	memcpy(copy, key, len);
	copy[len] = 0;
	e = &m->ents[m->nents];
	e->key = copy;
	e->len = (uint32_t)len;
	e->hash32 = (uint32_t)(h >> 32);
	m->slots[i] = (uint32_t)++m->nents;
	if (added)
		*added = true;
	return (int64_t)m->nents - 1;
}

const void *intern_key(const struct intern *m, uint32_t id, size_t *len)
{
	if (id >= m->nents)
		return NULL;
	if (len)
		*len = m->ents[id].len;
	return m->ents[id].key;
}

size_t intern_count(const struct intern *m)
{
	return m->nents;
}

void intern_clear(struct intern *m)
{
	arena_reset(m->keys);
	memset(m->slots, 0, m->nslots * sizeof(*m->slots));
	m->nents = 0;
}
