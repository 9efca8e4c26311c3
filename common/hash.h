/*
 * hash: the 64-bit finaliser (MurmurHash3's fmix64) every hash table of the
 * project mixes its keys with, FNV-1a for keys made of several fields, and
 * hash_bytes() for byte strings whose hash must be the same in every process;
 * header-only so that hot loops inline them. Keys from the network go through
 * intern_hash() instead, which is keyed per process (intern.h).
 */
#ifndef SM_HASH_H
#define SM_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HASH_FNV_INIT 1469598103934665603ULL

static inline uint64_t hash_mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/* h with the n bytes at p folded in (start from HASH_FNV_INIT). */
static inline uint64_t hash_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211ULL;
	return h;
}

static inline uint64_t hash_rd64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* A byte string's hash, the same in every process (the guard's training tables, which the host's
 * collector reads too). Unkeyed: not for keys an attacker chooses. */
static inline uint64_t hash_bytes(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;
	size_t i = 0;

	for (; i + 8 <= len; i += 8)
		h = (h ^ hash_mix64(hash_rd64(p + i))) * 0x100000001b3ULL + 0x632be59bd9b4e019ULL;
	if (i < len) {
		uint64_t t = 0;

		for (size_t k = len; k-- > i;)
			t = t << 8 | p[k];
		h = (h ^ hash_mix64(t ^ 0xa0761d6478bd642fULL)) * 0x100000001b3ULL;
	}
	return hash_mix64(h);
}

#endif
