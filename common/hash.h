/*
 * hash: the 64-bit finaliser (MurmurHash3's fmix64) every hash table of the
 * project mixes its keys with; header-only so that hot loops inline it.
 */
#ifndef SM_HASH_H
#define SM_HASH_H

#include <stdint.h>

static inline uint64_t hash_mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

#endif
