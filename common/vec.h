/*
 * vec: growth of a dynamic array with checked size arithmetic.
 *
 *   struct thing *v = NULL; size_t n = 0, cap = 0;
 *   if (vec_reserve(&v, &cap, n + 1, sizeof(*v)) < 0) goto fail_oom;
 *   v[n++] = x;
 *
 * Capacity doubles (at least 8); a product that would overflow size_t fails
 * like an allocation that cannot be made, instead of wrapping to a small size.
 */
#ifndef SM_VEC_H
#define SM_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Makes room for `need` elements of `elem` bytes in the array whose pointer is at pdata (a T **),
 * capacity *cap. Returns 0, or -1 (overflow or out of memory) leaving the array and *cap as they
 * were. */
int vec_reserve(void *pdata, size_t *cap, size_t need, size_t elem);

/* n * elem, or SIZE_MAX when it would overflow (so that an allocation of it fails). */
size_t vec_bytes(size_t n, size_t elem);

/* malloc / calloc / realloc of n elements of elem bytes, NULL when n * elem would overflow. */
void *vec_alloc(size_t n, size_t elem);
void *vec_calloc(size_t n, size_t elem);
void *vec_realloc(void *p, size_t n, size_t elem);

/* Sorts a[0..n) ascending. */
void vec_sort_u32(uint32_t *a, size_t n);
void vec_sort_i32(int32_t *a, size_t n);
void vec_sort_i64(int64_t *a, size_t n);
/* qsort()/bsearch() comparisons of two integers of that type, ascending. */
int vec_cmp_u32(const void *a, const void *b);
int vec_cmp_i32(const void *a, const void *b);
int vec_cmp_i64(const void *a, const void *b);

/*
 * A vector that knows its element size, for arrays built by appending:
 *
 *   struct vec v = VEC_INIT(struct entry);
 *   struct entry *e = vec_push(&v);      // NULL: out of memory
 *   ... ((struct entry *)v.data)[i] ...
 *   vec_free(&v);
 */
struct vec {
	void *data;
	size_t len, cap, size;   /* size: bytes per element */
};

#define VEC_INIT(type) { NULL, 0, 0, sizeof(type) }

/* vec_push() when the vector is full: grows it first. */
void *vec_push_grow(struct vec *v);

/* Room for one more element, appended (uninitialised); NULL on overflow or out of memory. Inline,
 * for parsers that append millions: assign through the typed pointer it returns. */
static inline void *vec_push(struct vec *v)
{
	if (v->len < v->cap)
		return (char *)v->data + v->size * v->len++;
	return vec_push_grow(v);
}

/* Appends a copy of the element at item. Returns 0 or -1. */
static inline int vec_append(struct vec *v, const void *item)
{
	void *slot = vec_push(v);

	if (!slot)
		return -1;
	memcpy(slot, item, v->size);
	return 0;
}
/* Frees the elements; the vector is empty and reusable. NULL-safe. */
void vec_free(struct vec *v);

#endif
