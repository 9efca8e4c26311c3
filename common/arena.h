/*
 * arena: bump allocator for memory that lives exactly as long as one request,
 * one parsed stream or one mining pass. Freed all at once; no per-object free.
 */
#ifndef SM_ARENA_H
#define SM_ARENA_H

#include <stddef.h>

struct arena;

/* Returns a new arena whose blocks in use may not exceed `max` bytes (0: unlimited; blocks kept
 * by arena_reset() for reuse come on top), or NULL on out of memory. Caller frees with
 * arena_free(). */
struct arena *arena_open(size_t max);
/* NULL-safe. */
void arena_free(struct arena *a);
/* Aligned, uninitialised memory owned by the arena; NULL when over max. */
void *arena_alloc(struct arena *a, size_t n);
/* Zeroed array of n objects of size sz; NULL on overflow or over max. */
void *arena_calloc(struct arena *a, size_t n, size_t sz);
/* Copy of s[0..n) plus a terminating NUL, owned by the arena. */
char *arena_strndup(struct arena *a, const char *s, size_t n);
/* Forget everything allocated. Blocks of the usual size are kept for reuse, up to the bytes
 * arena_retain() allows (one block unless it was called); larger ones are freed. */
void arena_reset(struct arena *a);
/* How much arena_reset() keeps: an arena reset per request that keeps a request's blocks never
 * gives its memory back to the C library only to fault it in again for the next one. */
void arena_retain(struct arena *a, size_t bytes);
/* Forget everything and give every block back but one, whatever arena_retain() allowed. */
void arena_release(struct arena *a);
/* Bytes of the blocks it holds, kept ones too (what it costs in memory). */
size_t arena_reserved(const struct arena *a);
/* Bytes handed out since open/reset. */
size_t arena_used(const struct arena *a);

#endif
