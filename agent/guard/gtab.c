/*
 * gtab: the guard table, the profile's loops and contexts at this process's
 * addresses (guard.md "Run time"). Built at start-up, for a new k or a new
 * profile, and again when a module the profile names is loaded later; the
 * wrappers read it through G.tab without a lock, so a table once published is
 * never freed while the process runs.
 */
#include "agent/guard/gtab.h"
#include "agent/guard/hot.h"
#include "agent/guard/region.h"
#include "agent/guard/modmap.h"
#include "agent/guard/unwind.h"

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

struct gtab *gtab_build(const struct gprofile *p, char *err, size_t errlen)
{
	struct gmodmap mm = { NULL, 0 };
	struct gtab *tab = calloc(1, sizeof(*tab));
	size_t nctx = 0, slots = 64;

	if (!tab || unwind_modmap_load(&mm) < 0) {
		snprintf(err, errlen, "out of memory");
		free(tab);
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
		gmodmap_release(&mm);
		free(tab);
		return NULL;
	}
	tab->ctx_mask = (uint32_t)(slots - 1);
	tab->nloops = (uint32_t)p->nloops;
	for (size_t li = 0; li < p->nloops; li++) {
		const struct gp_loop *l = &p->loops[li];
		struct gtab_loop *tl = &tab->loops[li];
		struct gtab_site *ts = &tab->sites[li];
		const struct gmod *g = resolve_module(&mm, &p->modules[l->site.module]);

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
				const struct gmod *cg = resolve_module(&mm, &p->modules[c->site.module]);
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
	gmodmap_release(&mm);
	return tab;
}

void gtab_free(struct gtab *tab)
{
	if (!tab)
		return;
	free(tab->ctx);
	free(tab);
}

/* ---- modules loaded later ---- */

void guard_on_dlopen(void)
{
	struct gthread *t = &guard_tls;
	struct gtab *old, *tab;
	char err[256];

	if (G.mode != GUARD_MODE_GUARD || !G.profile)
		return;
	old = atomic_load(&G.tab);
	if (!old || !old->unresolved)
		return;
	t->nest = 1;
	pthread_mutex_lock(&G.tab_mu);
	tab = gtab_build(G.profile, err, sizeof(err));
	if (tab && tab->unresolved < atomic_load(&G.tab)->unresolved) {
		/* the old table stays: a thread may be reading it */
		atomic_store(&G.tab, tab);
		guard_region_names(tab);
	} else {
		gtab_free(tab);
	}
	pthread_mutex_unlock(&G.tab_mu);
	t->nest = 0;
}
