/* arena: bump allocator freed all at once (see arena.h). */
#include "common/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK (64 * 1024)
#define ARENA_ALIGN 16

struct block {
	struct block *next;
	size_t size, used;
	_Alignas(ARENA_ALIGN) unsigned char data[];
};

struct arena {
	struct block *head;
	size_t max, total;
};

struct arena *arena_open(size_t max)
{
	struct arena *a = calloc(1, sizeof(*a));

	if (a)
		a->max = max;
	return a;
}

static void blocks_free(struct block *b)
{
	while (b) {
		struct block *next = b->next;
		free(b);
		b = next;
	}
}

void arena_free(struct arena *a)
{
	if (!a)
		return;
	blocks_free(a->head);
	free(a);
}

void *arena_alloc(struct arena *a, size_t n)
{
	struct block *b = a->head;
	size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);

	if (need < n)
		return NULL;
	if (!b || b->size - b->used < need) {
		size_t size = need > ARENA_BLOCK ? need : ARENA_BLOCK;

		if (a->max && (size > a->max || a->total > a->max - size))
			return NULL;
		b = malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		b->size = size;
		b->used = 0;
		a->total += size;
		/* A big one-off block goes behind the current one so the current
		 * block's free tail stays usable. */
		if (a->head && size > ARENA_BLOCK) {
			b->next = a->head->next;
			a->head->next = b;
		} else {
			b->next = a->head;
			a->head = b;
		}
	}
	b->used += need;
	return b->data + b->used - need;
}

void *arena_calloc(struct arena *a, size_t n, size_t sz)
{
	void *p;

	if (sz && n > SIZE_MAX / sz)
		return NULL;
	p = arena_alloc(a, n * sz);
	if (p)
		memset(p, 0, n * sz);
	return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

void arena_reset(struct arena *a)
{
	struct block *keep = NULL, *b;

	for (b = a->head; b; b = b->next)
		if (b->size == ARENA_BLOCK) {
			keep = b;
			break;
		}
	/* unlink keep, free the rest */
	if (keep) {
		struct block **pp = &a->head;
		while (*pp != keep)
			pp = &(*pp)->next;
		*pp = keep->next;
		keep->next = NULL;
	}
	blocks_free(a->head);
	a->head = keep;
	a->total = keep ? keep->size : 0;
	if (keep)
		keep->used = 0;
}

size_t arena_reserved(const struct arena *a)
{
	return a->total;
}

size_t arena_used(const struct arena *a)
{
	size_t n = 0;
	const struct block *b;

	for (b = a->head; b; b = b->next)
		n += b->used;
	return n;
}
