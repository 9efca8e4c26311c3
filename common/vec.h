/*
 * vec: growth of a dynamic array with checked size arithmetic.
 *
 *   struct thing *v = NULL; size_t n = 0, cap = 0;
 *   if (vec_reserve((void **)&v, &cap, n + 1, sizeof(*v)) < 0) goto fail_oom;
 *   v[n++] = x;
 *
 * Capacity doubles (at least 8); a product that would overflow size_t fails
 * like an allocation that cannot be made, instead of wrapping to a small size.
 */
#ifndef SM_VEC_H
#define SM_VEC_H

#include <stddef.h>

/* Makes room for `need` elements of `elem` bytes in *data (capacity *cap).
 * Returns 0, or -1 (overflow or out of memory) leaving *data and *cap as they were. */
int vec_reserve(void **data, size_t *cap, size_t need, size_t elem);

/* n * elem, or SIZE_MAX when it would overflow (so that an allocation of it fails). */
size_t vec_bytes(size_t n, size_t elem);

#endif
