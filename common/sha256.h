/*
 * sha256: FIPS 180-4 SHA-256, used to store API tokens hashed at rest.
 */
#ifndef SM_SHA256_H
#define SM_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

void sha256(const void *data, size_t n, unsigned char out[SHA256_LEN]);

#endif
