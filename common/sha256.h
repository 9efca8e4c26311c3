/*
 * sha256: FIPS 180-4 SHA-256 (API tokens are stored hashed) and HMAC-SHA-256
 * (RFC 2104: sm-web's cross-site request tokens).
 */
#ifndef SM_SHA256_H
#define SM_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

/* Incremental hashing: init, update any number of times, final. */
struct sha256_ctx {
	uint32_t h[8];
	uint64_t n;                 /* bytes hashed */
	unsigned char buf[64];      /* a partial block */
	size_t fill;
};

void sha256_init(struct sha256_ctx *c);
void sha256_update(struct sha256_ctx *c, const void *data, size_t n);
void sha256_final(struct sha256_ctx *c, unsigned char out[SHA256_LEN]);

void sha256(const void *data, size_t n, unsigned char out[SHA256_LEN]);

/* HMAC-SHA-256 of msg under key. */
void hmac_sha256(const void *key, size_t klen, const void *msg, size_t n, unsigned char out[SHA256_LEN]);

#endif
