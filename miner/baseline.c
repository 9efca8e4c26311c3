/* baseline: the baseline stacks that contain each pattern (see baseline.h). */
#include "miner/baseline.h"
#include "common/imap.h"
#include "common/par.h"
#include "common/vec.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct posting {
	uint32_t frame, stack;
};

struct match_job {
	const struct baseline_seq *stacks, *pats;
	const struct posting *post;
	const struct imap *where;         /* frame -> start << 32 | count in post */
	struct par_items items;
	uint32_t *count;                  /* per pattern */
	uint32_t *start;                  /* per pattern: into its worker's found */
	uint8_t *worker;                  /* per pattern */
	struct vec found[PAR_MAX_THREADS];
	bool oom[PAR_MAX_THREADS];
};

static int cmp_posting(const void *a, const void *b)
{
	const struct posting *x = a, *y = b;

	if (x->frame != y->frame)
		return x->frame < y->frame ? -1 : 1;
	return x->stack < y->stack ? -1 : x->stack > y->stack;
}

uint32_t baseline_end(const uint32_t *p, uint32_t m, const uint32_t *s, uint32_t n)
{
	uint32_t j = 0;

	if (m == 0)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (s[i] == p[j] && ++j == m)
			return i + 1;
	return 0;
}

static void match_worker(void *arg, int w)
{
	struct match_job *j = arg;
	size_t i;

	while (par_take(&j->items, &i)) {
		const struct baseline_seq *p = &j->pats[i];
		uint64_t best = UINT64_MAX, v;

		j->worker[i] = (uint8_t)w;
		j->start[i] = (uint32_t)j->found[w].len;
		for (uint32_t f = 0; f < p->len; f++) {
			if (!imap_get(j->where, p->frames[f], &v)) {
				best = UINT64_MAX;
				break;
			}
			if (best == UINT64_MAX || (v & 0xffffffffu) < (best & 0xffffffffu))
				best = v;
		}
		if (best == UINT64_MAX || !p->len)
			continue;
		for (uint64_t x = best >> 32; x < (best >> 32) + (best & 0xffffffffu); x++) {
			uint32_t s = j->post[x].stack;

			if (j->stacks[s].kind != p->kind ||
			    !baseline_end(p->frames, p->len, j->stacks[s].frames, j->stacks[s].len))
				continue;
			if (vec_append(&j->found[w], &s) < 0) {
				j->oom[w] = true;
				return;
			}
			j->count[i]++;
		}
	}
}

int baseline_match(const struct baseline_seq *stacks, size_t nstacks, const struct baseline_seq *pats,
		   size_t npats, int threads, uint32_t **off_out, uint32_t **idx_out)
{
	struct match_job j;
	struct imap where = IMAP_INIT;
	struct posting *post = NULL;
	uint32_t *off = NULL, *idx = NULL;
	size_t np = 0, nu = 0, total = 0;
	int nt = par_threads(threads), rc = -1;

	memset(&j, 0, sizeof(j));
	*off_out = *idx_out = NULL;
	for (size_t s = 0; s < nstacks; s++)
		np += stacks[s].len;
	post = vec_alloc(np + 1, sizeof(*post));
	j.count = vec_calloc(npats + 1, sizeof(uint32_t));
	j.start = vec_calloc(npats + 1, sizeof(uint32_t));
	j.worker = vec_calloc(npats + 1, sizeof(uint8_t));
	off = vec_alloc(npats + 1, sizeof(*off));
	if (!post || !j.count || !j.start || !j.worker || !off)
		goto out;
	np = 0;
	for (size_t s = 0; s < nstacks; s++)
		for (uint32_t f = 0; f < stacks[s].len; f++)
			post[np++] = (struct posting){ stacks[s].frames[f], (uint32_t)s };
	if (np)
		qsort(post, np, sizeof(*post), cmp_posting);
	/* one posting per (frame, stack), and where each frame's run starts */
	for (size_t i = 0; i < np; i++) {
		uint64_t v;

		if (nu && post[nu - 1].frame == post[i].frame && post[nu - 1].stack == post[i].stack)
			continue;
		post[nu] = post[i];
		if (imap_get(&where, post[nu].frame, &v)) {
			v++;
		} else {
			v = (uint64_t)nu << 32 | 1;
		}
		if (imap_put(&where, post[nu].frame, v) < 0)
			goto out;
		nu++;
	}
	j.stacks = stacks;
	j.pats = pats;
	j.post = post;
	j.where = &where;
	for (int w = 0; w < nt; w++)
		j.found[w] = (struct vec)VEC_INIT(uint32_t);
	par_items_init(&j.items, npats);
	par_run(nt, match_worker, &j);
	for (int w = 0; w < nt; w++)
		if (j.oom[w])
			goto out;
	for (size_t i = 0; i < npats; i++) {
		off[i] = (uint32_t)total;
		total += j.count[i];
	}
	off[npats] = (uint32_t)total;
	idx = vec_alloc(total + 1, sizeof(*idx));
	if (!idx)
		goto out;
	for (size_t i = 0; i < npats; i++)
		if (j.count[i])
			memcpy(idx + off[i], (const uint32_t *)j.found[j.worker[i]].data + j.start[i],
			       j.count[i] * sizeof(*idx));
	*off_out = off;
	*idx_out = idx;
	off = idx = NULL;
	rc = 0;
out:
	for (int w = 0; w < nt; w++)
		vec_free(&j.found[w]);
	imap_free(&where);
	free(post);
	free(j.count);
	free(j.start);
	free(j.worker);
	free(off);
	free(idx);
	return rc;
}
