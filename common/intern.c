/* intern: byte strings to dense ids, open addressing (see intern.h). */
#include "common/intern.h"
#include "common/arena.h"
#include "common/hash.h"
#include "common/util.h"
#include "common/vec.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define UNLIKELY(x) __builtin_expect(!!(x), 0)

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

/*
 * The hash of the map's keys: keyed per process with 256 random bits, so that a host cannot make
 * frame names that collide in another process's tables (one slot for thousands of keys would make
 * every lookup a walk over them), and 16 bytes a multiplication (wyhash's construction: a 64 x 64
 * multiplication folded to 64 bits), about four times fewer steps than one mix per 8 bytes. A
 * multiplication by zero would forget the state: its other operand is a key's word xor a secret,
 * zero only for one who knows the secret.
 */
static _Atomic uint64_t hash_key[4];   /* 0: not yet drawn; each word odd once drawn */
static _Atomic int hash_key_set;

/* Draws the key. Threads that get here at once each draw one, and each word takes the first
 * value stored into it: no thread waits for another (a fork or a signal in the middle leaves
 * nothing to wait for, only words still to fill), and all end up with the same words. */
static void hash_key_init(void)
{
	uint64_t k[4];

	/* not blocking: early in boot the kernel's pool may not be ready, and a key from the clocks,
	 * the pid and where the library lies is still one that no host can compute */
	if (getrandom(k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
		uint64_t t = (uint64_t)util_now_real_ns() ^ (uint64_t)util_now_mono_ns() << 17 ^ (uint64_t)getpid();

		for (int i = 0; i < 4; i++)
			k[i] = hash_mix64(t + (uint64_t)(uintptr_t)&hash_key[i] + (uint64_t)i * 0x9e3779b97f4a7c15ULL);
	}
	for (int i = 0; i < 4; i++) {
		uint64_t unset = 0;

		/* odd: a multiplier that keeps every bit (and never 0, which means not drawn) */
		atomic_compare_exchange_strong(&hash_key[i], &unset, k[i] | 1);
	}
	atomic_store_explicit(&hash_key_set, 1, memory_order_release);
}

static inline uint64_t mum(uint64_t a, uint64_t b)
{
	unsigned __int128 r = (unsigned __int128)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t rd32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

uint64_t intern_hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t k[4], h, a, b;

	if (UNLIKELY(!atomic_load_explicit(&hash_key_set, memory_order_acquire)))
		hash_key_init();
	for (int i = 0; i < 4; i++)
		k[i] = atomic_load_explicit(&hash_key[i], memory_order_relaxed);
	h = k[0] ^ mum(len ^ k[1], k[2]);
	if (len <= 16) {
		if (len >= 8) {
			a = hash_rd64(p);
			b = hash_rd64(p + len - 8);
		} else if (len >= 4) {
			a = rd32(p);
			b = rd32(p + len - 4);
		} else if (len > 0) {
			a = (uint64_t)p[0] << 16 | (uint64_t)p[len >> 1] << 8 | p[len - 1];
			b = 0;
		} else {
			a = b = 0;
		}
	} else {
		size_t i = len;

		if (i > 48) {
			/* three lanes, so that their multiplications overlap */
			uint64_t h1 = h, h2 = h;

			do {
				h = mum(hash_rd64(p) ^ k[1], hash_rd64(p + 8) ^ h);
				h1 = mum(hash_rd64(p + 16) ^ k[2], hash_rd64(p + 24) ^ h1);
				h2 = mum(hash_rd64(p + 32) ^ k[3], hash_rd64(p + 40) ^ h2);
				p += 48;
				i -= 48;
			} while (i > 48);
			h ^= h1 ^ h2;
		}
		while (i > 16) {
			h = mum(hash_rd64(p) ^ k[1], hash_rd64(p + 8) ^ h);
			p += 16;
			i -= 16;
		}
		/* the last 16 bytes, whatever the steps above took of them already */
		a = hash_rd64(p + i - 16);
		b = hash_rd64(p + i - 8);
	}
	return mum(k[3] ^ len, mum(a ^ k[1], b ^ h));
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
