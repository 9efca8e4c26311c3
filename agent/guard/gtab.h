/*
 * gtab: the guard table, the profile's loops and contexts at a process's
 * addresses (gtab.c). Read on the program's threads without a lock: see
 * hot.h for the rules of that layer.
 */
#ifndef SM_GUARD_GTAB_H
#define SM_GUARD_GTAB_H

#include <stdint.h>

#include "common/hash.h"
#include "guardcore/profile.h"

/* The guard table: the profile's loops and contexts at this process's addresses. */
struct gtab_site {            /* what every loop-capable call compares: a few cache lines for all loops */
	uintptr_t ret;            /* 0 = in a module not loaded (never matches) */
	int64_t depth;
	uint64_t all_types;       /* a bit per unit type: a context of every type tells no type apart */
};

struct gtab_loop {
	int64_t threshold;
	int64_t async_thr;        /* deferred requests begun in this loop; -1 = none */
	uint32_t ntypes;
	int64_t type_thr[GP_BUCKETS][GP_MAX_TYPES];   /* by the unit's size so far */
	char type_name[GP_MAX_TYPES][16];
	char symbol[256];
};

struct gtab_ctx {
	uintptr_t ret;            /* 0 = free */
	int64_t depth;
	int32_t loop;
	uint64_t mask;            /* the unit types having this context */
};

struct gtab {
	uint32_t nloops;
	uint32_t ctx_mask;        /* slots - 1 */
	struct gtab_ctx *ctx;
	struct gtab_site sites[GP_MAX_LOOPS];
	uint32_t unresolved;      /* contexts and loops in modules not loaded yet */
	struct gtab_loop loops[GP_MAX_LOOPS];
};

struct gmodmap;

/* The table of profile p at the addresses of modules mm (a process's); NULL with a message in err.
 * Caller frees with gtab_free() (never while a thread may read it: published tables stay). */
struct gtab *gtab_build(const struct gprofile *p, const struct gmodmap *mm, char *err, size_t errlen);
void gtab_free(struct gtab *tab);   /* NULL-safe */

/* The table as one flat image (for the region a collector writes and its process reads): its size,
 * and the image written into cap bytes at dst (0, or -1 when it does not fit). */
size_t gtab_image_bytes(const struct gtab *tab);
int gtab_image_write(const struct gtab *tab, void *dst, size_t cap);
/* The bytes of the table the image at src (cap bytes, written by gtab_image_write) makes, or 0 when it
 * is not one a wrapper can trust (slots a power of two within it, loops and types within bounds). */
size_t gtab_image_need(const void *src, size_t cap);
/* That table, made in dst (dstcap bytes, pointer-aligned), its contexts there too: memory of the
 * caller's (never gtab_free()). NULL when the image is not one, or changed under the copy. */
struct gtab *gtab_image_place(const void *src, size_t cap, void *dst, size_t dstcap);

/* The unit types having context (ret, depth) in loop, a bit each; 0 = none. */
static inline uint64_t ctx_hash(uintptr_t ret, int64_t depth, int32_t loop)
{
	return hash_mix64(ret ^ ((uint64_t)depth << 20) ^ ((uint64_t)(uint32_t)loop << 52));
}

static inline uint64_t gtab_find(const struct gtab *tab, int32_t loop, uintptr_t ret, int64_t depth)
{
	uint64_t h = ctx_hash(ret, depth, loop);

	for (uint32_t probe = 0; probe <= tab->ctx_mask; probe++) {
		const struct gtab_ctx *e = &tab->ctx[(h + probe) & tab->ctx_mask];

		if (!e->ret)
			return 0;
		if (e->ret == ret && e->depth == depth && e->loop == loop)
			return e->mask;
	}
	return 0;
}


#endif
