/* vec: checked growth of dynamic arrays (see vec.h). */
#include "common/vec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t vec_bytes(size_t n, size_t elem)
{
	size_t r;

	if (__builtin_mul_overflow(n, elem, &r))
		return SIZE_MAX;
	return r;
}

int vec_reserve(void *pdata, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 8;
	void *data, *p;

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -1;
		ncap *= 2;
	}
	if (vec_bytes(ncap, elem) == SIZE_MAX)
		return -1;
	/* the pointer is copied in and out as bytes: pdata points to a T *, not a void * */
	memcpy(&data, pdata, sizeof(data));
	p = realloc(data, ncap * elem);
	if (!p)
		return -1;
	memcpy(pdata, &p, sizeof(p));
	*cap = ncap;
	return 0;
}

void *vec_alloc(size_t n, size_t elem)
{
	size_t b = vec_bytes(n, elem);

	return b == SIZE_MAX ? NULL : malloc(b ? b : 1);
}

void *vec_calloc(size_t n, size_t elem)
{
	return calloc(n ? n : 1, elem ? elem : 1);
}

void *vec_realloc(void *p, size_t n, size_t elem)
{
	size_t b = vec_bytes(n, elem);

	return b == SIZE_MAX ? NULL : realloc(p, b ? b : 1);
}

void *vec_push_grow(struct vec *v)
{
	if (vec_reserve(&v->data, &v->cap, v->len + 1, v->size) < 0)
		return NULL;
	return (char *)v->data + v->size * v->len++;
}

void vec_free(struct vec *v)
{
	if (!v)
		return;
	free(v->data);
	v->data = NULL;
	v->len = v->cap = 0;
}

int vec_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int vec_cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return x < y ? -1 : x > y;
}

int vec_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

void vec_sort_u32(uint32_t *a, size_t n)
{
	qsort(a, n, sizeof(*a), vec_cmp_u32);
}

void vec_sort_i32(int32_t *a, size_t n)
{
	qsort(a, n, sizeof(*a), vec_cmp_i32);
}

void vec_sort_i64(int64_t *a, size_t n)
{
	qsort(a, n, sizeof(*a), vec_cmp_i64);
}
