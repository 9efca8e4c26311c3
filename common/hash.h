/*
 * hash: the 64-bit finaliser (MurmurHash3's fmix64) every hash table of the
 * project mixes its keys with, and FNV-1a for keys made of several fields;
 * header-only so that hot loops inline them.
 */
#ifndef SM_HASH_H
#define SM_HASH_H

#include <stddef.h>
#include <stdint.h>

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

#endif
