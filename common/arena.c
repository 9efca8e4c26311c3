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
	struct block *spare;   /* blocks of ARENA_BLOCK kept by arena_reset() */
	size_t max, total;     /* total: the bytes of the blocks in use (what max bounds) */
	size_t nspare, retain; /* retain: how many blocks a reset keeps */
};

struct arena *arena_open(size_t max)
{
	struct arena *a = calloc(1, sizeof(*a));

	if (a) {
		a->max = max;
		a->retain = 1;
	}
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
	blocks_free(a->spare);
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
		if (size == ARENA_BLOCK && a->spare) {
			b = a->spare;
			a->spare = b->next;
			a->nspare--;
		} else if (!(b = malloc(sizeof(*b) + size))) {
			return NULL;
		}
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
	struct block *b = a->head;

	while (b) {
		struct block *next = b->next;

		if (b->size == ARENA_BLOCK && a->nspare < a->retain) {
			b->next = a->spare;
			a->spare = b;
			a->nspare++;
		} else {
			free(b);
		}
		b = next;
	}
	a->head = NULL;
	a->total = 0;
}

void arena_retain(struct arena *a, size_t bytes)
{
	a->retain = bytes / ARENA_BLOCK ? bytes / ARENA_BLOCK : 1;
}

void arena_release(struct arena *a)
{
	arena_reset(a);
	if (a->spare) {
		blocks_free(a->spare->next);
		a->spare->next = NULL;
		a->nspare = 1;
	}
}

size_t arena_reserved(const struct arena *a)
{
	return a->total + a->nspare * ARENA_BLOCK;
}

size_t arena_used(const struct arena *a)
{
	size_t n = 0;
	const struct block *b;

	for (b = a->head; b; b = b->next)
		n += b->used;
	return n;
}
