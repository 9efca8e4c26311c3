/* vec: checked growth of dynamic arrays (see vec.h). */
#include "vec.h"

#include <stdint.h>
#include <stdlib.h>

size_t vec_bytes(size_t n, size_t elem)
{
	size_t r;

	if (__builtin_mul_overflow(n, elem, &r))
		return SIZE_MAX;
	return r;
}

int vec_reserve(void **data, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 8;
	void *p;

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -1;
		ncap *= 2;
	}
	if (vec_bytes(ncap, elem) == SIZE_MAX)
		return -1;
	p = realloc(*data, ncap * elem);
	if (!p)
		return -1;
	*data = p;
	*cap = ncap;
	return 0;
}
