/*
 * gtab: the guard table, the profile's loops and contexts at a process's
 * addresses (guard.md "Run time"), and its copy in a flat image. The guarded
 * process builds it at start-up, for a new k or a new profile, and again when a
 * module the profile names is loaded later (pushed.c); the host's collector
 * builds it from a process's modules and leaves its image in the process's
 * region (collect.c), where the process takes it. The wrappers read it through
 * G.tab without a lock, so a table once published is never freed while the
 * process runs.
 */
#include "agent/guard/gtab.h"
#include "agent/guard/modmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct gmod *resolve_module(const struct gmodmap *mm, const struct gp_module *pm)
{
	for (size_t i = 0; i < mm->n; i++) {
		const struct gmod *g = &mm->mods[i];

		if (pm->build_id[0] ? strcmp(g->build_id, pm->build_id) == 0 : strcmp(g->name, pm->name) == 0)
			return g;
	}
	return NULL;
}

static int64_t round_threshold(double t)
{
	if (!(t >= 0))
		return -1;
	return t > 9e18 ? INT64_MAX / 4 : (int64_t)t;
}

struct gtab *gtab_build(const struct gprofile *p, const struct gmodmap *mm, char *err, size_t errlen)
{
	struct gtab *tab = calloc(1, sizeof(*tab));
	size_t nctx = 0, slots = 64;

	if (!tab) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (size_t li = 0; li < p->nloops; li++)
		for (size_t t = 0; t < p->loops[li].ntypes; t++)
			nctx += p->loops[li].types[t].nctx;
	while (slots < nctx * 2)
		slots <<= 1;
	tab->ctx = calloc(slots, sizeof(*tab->ctx));
	if (!tab->ctx) {
		snprintf(err, errlen, "out of memory");
		free(tab);
		return NULL;
	}
	tab->ctx_mask = (uint32_t)(slots - 1);
	tab->nloops = (uint32_t)p->nloops;
	for (size_t li = 0; li < p->nloops; li++) {
		const struct gp_loop *l = &p->loops[li];
		struct gtab_loop *tl = &tab->loops[li];
		struct gtab_site *ts = &tab->sites[li];
		const struct gmod *g = resolve_module(mm, &p->modules[l->site.module]);

		snprintf(tl->symbol, sizeof(tl->symbol), "%s", l->symbol ? l->symbol : "");
		ts->depth = l->site.depth;
		tl->threshold = l->all.n ? round_threshold(l->threshold_ns) : -1;
		tl->async_thr = l->all.n ? round_threshold(l->async_thr_ns) : -1;
		tl->ntypes = (uint32_t)l->ntypes;
		ts->all_types = l->ntypes >= 64 ? ~0ULL : (1ULL << l->ntypes) - 1;
		if (!g) {
			tab->unresolved++;
			continue;   /* ret 0 never matches */
		}
		ts->ret = g->bias + l->site.offset;
		for (size_t t = 0; t < l->ntypes; t++) {
			const struct gp_type *ty = &l->types[t];

			for (unsigned b = 0; b < GP_BUCKETS; b++)
				tl->type_thr[b][t] = round_threshold(ty->size_thr[b]);
			snprintf(tl->type_name[t], sizeof(tl->type_name[t]), "%s", ty->name);
			for (uint32_t k = 0; k < ty->nctx; k++) {
				const struct gp_context *c = &l->contexts[l->tctxs[ty->ctx_off + k]];
				const struct gmod *cg = resolve_module(mm, &p->modules[c->site.module]);
				uintptr_t ret;
				uint64_t h;

				if (!cg) {
					tab->unresolved++;
					continue;
				}
				ret = cg->bias + c->site.offset;
				h = ctx_hash(ret, c->site.depth, (int32_t)li);
				for (uint32_t probe = 0;; probe++) {
					struct gtab_ctx *e = &tab->ctx[(h + probe) & tab->ctx_mask];

					if (!e->ret) {
						e->ret = ret;
						e->depth = c->site.depth;
						e->loop = (int32_t)li;
						e->mask = 1ULL << t;
						break;
					}
					if (e->ret == ret && e->depth == c->site.depth && e->loop == (int32_t)li) {
						e->mask |= 1ULL << t;
						break;
					}
				}
			}
		}
	}
	return tab;
}

void gtab_free(struct gtab *tab)
{
	if (!tab)
		return;
	free(tab->ctx);
	free(tab);
}

/* ---- the flat image: the table, then its context slots ---- */

size_t gtab_image_bytes(const struct gtab *tab)
{
	return sizeof(*tab) + ((size_t)tab->ctx_mask + 1) * sizeof(*tab->ctx);
}

int gtab_image_write(const struct gtab *tab, void *dst, size_t cap)
{
	struct gtab *d = dst;

	if (gtab_image_bytes(tab) > cap)
		return -1;
	memcpy(d, tab, sizeof(*tab));
	d->ctx = NULL;
	memcpy(d + 1, tab->ctx, ((size_t)tab->ctx_mask + 1) * sizeof(*tab->ctx));
	return 0;
}

size_t gtab_image_need(const void *src, size_t cap)
{
	const struct gtab *s = src;
	size_t slots;

	if (cap < sizeof(*s))
		return 0;
	slots = (size_t)s->ctx_mask + 1;
	/* what a wrapper relies on: slots a power of two within the image, loops and types within bounds */
	if ((slots & (slots - 1)) != 0 || slots > (cap - sizeof(*s)) / sizeof(*s->ctx) || s->nloops > GP_MAX_LOOPS)
		return 0;
	for (uint32_t l = 0; l < s->nloops; l++)
		if (s->loops[l].ntypes > GP_MAX_TYPES)
			return 0;
	return sizeof(*s) + slots * sizeof(*s->ctx);
}

struct gtab *gtab_image_place(const void *src, size_t cap, void *dst, size_t dstcap)
{
	struct gtab *tab = dst;
	size_t need = gtab_image_need(src, cap);

	/* (checked again here: the image may change under a reader between the two) */
	if (!need || need > dstcap)
		return NULL;
	memcpy(tab, src, need);
	tab->ctx = (struct gtab_ctx *)(void *)(tab + 1);
	if (gtab_image_need(tab, need) != need)
		return NULL;   /* what was copied is not what was checked */
	for (uint32_t l = 0; l < tab->nloops; l++) {
		tab->loops[l].symbol[sizeof(tab->loops[l].symbol) - 1] = '\0';
		for (uint32_t t = 0; t < GP_MAX_TYPES; t++)
			tab->loops[l].type_name[t][sizeof(tab->loops[l].type_name[t]) - 1] = '\0';
	}
	return tab;
}
