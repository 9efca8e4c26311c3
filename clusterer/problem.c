/* problem: a run's clusters grouped into problems, and titles (see problem.h). */
#include "clusterer/problem.h"
#include "clusterer/linkage.h"
#include "common/imap.h"
#include "common/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool problem_frame_named(const char *name, size_t len)
{
	const char *bang = memchr(name, '!', len);

	/* the function part: a module's name may be a pseudo one ("[kernel.kallsyms]!schedule") */
	if (bang) {
		len -= (size_t)(bang + 1 - name);
		name = bang + 1;
	}
	if (len == 0 || name[0] == '[')
		return false;
	if (len > 2 && name[0] == '0' && (name[1] == 'x' || name[1] == 'X'))
		return false;
	for (size_t i = 0; i + 2 < len; i++)
		if (name[i] == '+' && name[i + 1] == '0' && (name[i + 2] == 'x' || name[i + 2] == 'X'))
			return false;
	return true;
}

bool problem_frame_machine(const char *name, size_t len)
{
	static const char *const machine[] = { "[cpu run queue]", "[cgroup throttled]", "[cpu steal]" };

	for (size_t i = 0; i < sizeof(machine) / sizeof(machine[0]); i++)
		if (len == strlen(machine[i]) && memcmp(name, machine[i], len) == 0)
			return true;
	return false;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* Numbers the problems again in the order of their lowest cluster: cluster i's problem becomes that of
 * root(label[i]) (parent: each problem's, followed to the end of its chain). */
static void relabel(uint32_t *label, size_t n, uint32_t *parent, uint32_t *renum, size_t np, size_t *nproblems)
{
	for (size_t g = 0; g < np; g++) {
		while (parent[parent[g]] != parent[g])
			parent[g] = parent[parent[g]];
		renum[g] = UINT32_MAX;
	}
	*nproblems = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t r = parent[label[i]];

		if (renum[r] == UINT32_MAX)
			renum[r] = (uint32_t)(*nproblems)++;
		label[i] = renum[r];
	}
}

/* Call paths (problem.h): the code's clusters with a path, sorted by it (a node of the paths' trie is a
 * range of them), a stamp per stream, and the problems' union-find. */
struct paths {
	const struct problem_cluster *cl;
	const uint32_t *label;
	uint32_t *ord;
	uint64_t *stamp, tick;
	uint32_t *parent;     /* the problems' union-find */
	bool *one;            /* by the first cluster of a branch: the branch is one problem */
	double most;          /* PROBLEM_PATH_SHARE x the streams of them all */
};

/* A child of a node: the clusters ord[lo..hi) and its streams set[0..n) (sorted). */
struct child {
	size_t lo, hi;
	uint32_t *set, n;
};

static int cmp_path(const void *a, const void *b, void *arg)
{
	const struct problem_cluster *cl = arg, *x = &cl[*(const uint32_t *)a], *y = &cl[*(const uint32_t *)b];

	for (uint32_t k = 0; k < x->npath && k < y->npath; k++)
		if (x->path[k] != y->path[k])
			return x->path[k] < y->path[k] ? -1 : 1;
	if (x->npath != y->npath)
		return x->npath < y->npath ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int cmp_child_size(const void *a, const void *b)
{
	const struct child *x = a, *y = b;

	if (x->n != y->n)
		return x->n > y->n ? -1 : 1;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The streams in which clusters ord[lo..hi) have a cost, each once, into out (sorted); their number. */
static uint32_t range_streams(struct paths *p, size_t lo, size_t hi, uint32_t *out)
{
	uint32_t n = 0;

	p->tick++;
	for (size_t r = lo; r < hi; r++) {
		const struct problem_cluster *c = &p->cl[p->ord[r]];

		for (uint32_t x = 0; x < c->n; x++)
			if (p->stamp[c->streams[x]] != p->tick) {
				p->stamp[c->streams[x]] = p->tick;
				out[n++] = c->streams[x];
			}
	}
	vec_sort_u32(out, n);
	return n;
}

static uint32_t shared_streams(const struct child *a, const struct child *b)
{
	uint32_t i = 0, j = 0, n = 0;

	while (i < a->n && j < b->n) {
		if (a->set[i] == b->set[j]) {
			n++;
			i++;
			j++;
		} else if (a->set[i] < b->set[j]) {
			i++;
		} else {
			j++;
		}
	}
	return n;
}

/* What chance would give children x and y in common if each were spread over the node's all streams. */
static double chance_of(const struct child *x, const struct child *y, uint32_t all)
{
	return (double)x->n * y->n / all;
}

/* x and y are of different units: chance would give them PROBLEM_PATH_EVIDENCE streams in common or
 * more, and they share less than PROBLEM_PATH_CHANCE of it. */
static bool apart(const struct child *x, const struct child *y, uint32_t all)
{
	double c = chance_of(x, y, all);

	return c >= PROBLEM_PATH_EVIDENCE && (double)shared_streams(x, y) < PROBLEM_PATH_CHANCE * c;
}

/* x and y are of one unit: they share a stream, and at least PROBLEM_PATH_CHANCE of chance's. */
static bool together(const struct child *x, const struct child *y, uint32_t all)
{
	uint32_t both = shared_streams(x, y);

	return both > 0 && (double)both >= PROBLEM_PATH_CHANCE * chance_of(x, y, all);
}

static uint32_t root_of(uint32_t *parent, uint32_t g)
{
	while (parent[g] != g)
		g = parent[g] = parent[parent[g]];
	return g;
}

/* The problems a and b become one. */
static void join(uint32_t *parent, uint32_t a, uint32_t b)
{
	a = root_of(parent, a);
	b = root_of(parent, b);
	parent[a] = b;
}

/*
 * The clusters ord[lo..hi), whose paths all begin with the same d frames (problem.h), bottom up: the
 * node where the range splits has as children the clusters whose path ends there and the branches by
 * the next frame, each walked first. Of the children that are each one problem: where units meet (two
 * children apart), each joins the first group whose head (its largest child) it is together with, or
 * heads a group; else, where some two show it (chance would give them PROBLEM_PATH_EVIDENCE streams
 * in common or more), all are one problem; where none does, each stays alone. *whole: the range is one
 * problem. Depth: one call per frame at most. 0 or -1 (out of memory).
 */
static int walk_paths(struct paths *p, size_t lo, size_t hi, uint32_t d, bool *whole)
{
	const struct problem_cluster *first = &p->cl[p->ord[lo]];
	struct child *ch = NULL;
	uint32_t *sets = NULL, *head = NULL, nch = 0, ngroups = 0, all, used;
	bool meet = false, shown = false;
	size_t r, nent = 0;
	int rc = -1;

	*whole = true;
	if (hi - lo < 2)
		return 0;
	/* sorted: the first and the last path bound the frames they all begin with */
	for (;; d++) {
		const struct problem_cluster *last = &p->cl[p->ord[hi - 1]];

		if (d >= first->npath || d >= last->npath || first->path[d] != last->path[d])
			break;
	}
	/* the branches first (nothing of this node held meanwhile): p->one[b], branch b is one problem */
	for (r = lo; r < hi && p->cl[p->ord[r]].npath == d; r++)
		;
	for (size_t e; r < hi; r = e) {
		bool one;

		for (e = r + 1; e < hi && p->cl[p->ord[e]].path[d] == p->cl[p->ord[r]].path[d]; e++)
			;
		if (walk_paths(p, r, e, d + 1, &one) < 0)
			return -1;
		p->one[r] = one;
	}
	for (r = lo; r < hi; r++)
		nent += p->cl[p->ord[r]].n;
	ch = vec_alloc(hi - lo, sizeof(*ch));
	head = vec_alloc(hi - lo, sizeof(*head));
	sets = vec_alloc(2 * nent + 1, sizeof(*sets));
	if (!ch || !head || !sets)
		goto out;
	for (r = lo; r < hi && p->cl[p->ord[r]].npath == d; r++)
		ch[nch++] = (struct child){ r, r + 1, NULL, 0 };
	for (size_t e; r < hi; r = e) {
		for (e = r + 1; e < hi && p->cl[p->ord[e]].path[d] == p->cl[p->ord[r]].path[d]; e++)
			;
		/* a branch of several problems takes no further part */
		if (p->one[r])
			ch[nch++] = (struct child){ r, e, NULL, 0 };
		else
			*whole = false;
	}
	all = range_streams(p, lo, hi, sets);
	used = all;
	for (uint32_t k = 0; k < nch; k++) {
		ch[k].set = sets + used;
		ch[k].n = range_streams(p, ch[k].lo, ch[k].hi, ch[k].set);
		used += ch[k].n;
	}
	/* at the root (no frame in common), at a node nearly every unit passes (request dispatch: problems
	 * that merely co-occur there would be one) and at a node of too many children, every child is alone */
	if (d == 0 || all == 0 || all > p->most || nch > PROBLEM_PATH_CHILDREN) {
		*whole = false;
		rc = 0;
		goto out;
	}
	qsort(ch, nch, sizeof(*ch), cmp_child_size);
	/* a node where units meet (two children apart), or where some two show they are of one */
	for (uint32_t k = 0; k < nch && !meet; k++)
		for (uint32_t m = k + 1; m < nch && !meet; m++) {
			meet = apart(&ch[k], &ch[m], all);
			shown |= chance_of(&ch[k], &ch[m], all) >= PROBLEM_PATH_EVIDENCE;
		}
	for (uint32_t k = 0; k < nch; k++) {
		uint32_t g = 0;

		if (meet)
			while (g < ngroups && !together(&ch[k], &ch[head[g]], all))
				g++;
		else if (!shown)
			g = ngroups;
		if (g == ngroups) {
			head[ngroups++] = k;
			continue;
		}
		for (r = ch[k].lo; r < ch[k].hi; r++)
			join(p->parent, p->label[p->ord[r]], p->label[p->ord[ch[head[g]].lo]]);
	}
	*whole = *whole && ngroups == 1;
	rc = 0;
out:
	free(ch);
	free(head);
	free(sets);
	return rc;
}

/*
 * Joins the problems of clusters whose call paths begin alike (problem.h), then numbers the problems
 * again in the order of their lowest cluster. 0 or -1 (out of memory).
 */
static int join_paths(const struct problem_cluster *cl, size_t n, size_t nstreams, uint32_t *label,
		      size_t *nproblems)
{
	size_t np = *nproblems, nord = 0, nent = 0;
	bool whole;
	struct paths p = { .cl = cl, .label = label };
	uint32_t *renum = vec_alloc(np + 1, sizeof(*renum));
	int rc = -1;

	p.ord = vec_alloc(n + 1, sizeof(*p.ord));
	p.stamp = vec_calloc(nstreams + 1, sizeof(*p.stamp));
	p.parent = vec_alloc(np + 1, sizeof(*p.parent));
	p.one = vec_calloc(n + 1, sizeof(*p.one));
	if (!renum || !p.ord || !p.stamp || !p.parent || !p.one)
		goto out;
	for (size_t g = 0; g < np; g++)
		p.parent[g] = (uint32_t)g;
	for (size_t i = 0; i < n; i++)
		if (!cl[i].machine && cl[i].npath > 0) {
			p.ord[nord++] = (uint32_t)i;
			nent += cl[i].n;
		}
	qsort_r(p.ord, nord, sizeof(*p.ord), cmp_path, (void *)cl);
	if (nord > 1) {
		uint32_t *all = vec_alloc(nent + 1, sizeof(*all));

		if (!all)
			goto out;
		p.most = PROBLEM_PATH_SHARE * range_streams(&p, 0, nord, all);
		free(all);
		if (walk_paths(&p, 0, nord, 0, &whole) < 0)
			goto out;
	}
	relabel(label, n, p.parent, renum, np, nproblems);
	rc = 0;
out:
	free(renum);
	free(p.ord);
	free(p.stamp);
	free(p.parent);
	free(p.one);
	return rc;
}

/* A problem of ns streams costing cost can be the home of one of gs streams costing gcost (problem.h):
 * costing twice as much, or more and in twice the streams. A home always costs more: the chains end. */
static bool home_for(uint32_t ns, uint64_t cost, uint32_t gs, uint64_t gcost)
{
	return cost / 2 > gcost || (cost > gcost && ns / 2 >= gs);
}

/* Where fragments go (problem.h): the clusters by stream (off, who: a counting sort) and their total
 * costs. */
struct fragments {
	const struct problem_cluster *cl;
	size_t n, np;
	const uint32_t *off, *who;
	const uint64_t *tot;
	uint32_t *label;
};

/*
 * Joins each problem that is a fragment of a much costlier one into it (problem.h) and numbers the
 * problems again in the order of their lowest cluster. 0 or -1 (out of memory).
 */
static int join_fragments(struct fragments *f, size_t nstreams, size_t *nproblems)
{
	size_t np = f->np, nt, used = 0;
	uint64_t *gtot = vec_calloc(np + 1, sizeof(*gtot));
	uint64_t *stamp = vec_calloc(np + 1, sizeof(*stamp)), tick = 0;
	uint32_t *gstreams = vec_calloc(np + 1, sizeof(*gstreams));
	uint32_t *parent = vec_alloc(np + 1, sizeof(*parent)), *renum = vec_alloc(np + 1, sizeof(*renum));
	uint32_t *goff = vec_calloc(np + 2, sizeof(*goff)), *gm = vec_alloc(f->n + 1, sizeof(*gm));
	uint32_t *touched = vec_alloc(np + 1, sizeof(*touched)), *mark = vec_calloc(np + 1, sizeof(*mark));
	bool *gmachine = vec_calloc(np + 1, sizeof(*gmachine));
	double *shared = vec_calloc(np + 1, sizeof(*shared));
	int rc = -1;

	if (!gtot || !gstreams || !stamp || !parent || !renum || !goff || !gm || !touched || !mark || !gmachine ||
	    !shared)
		goto out;
	/* each problem's cost, machine flag and members; the streams each has a cost in */
	for (size_t i = 0; i < f->n; i++) {
		gtot[f->label[i]] = add_sat(gtot[f->label[i]], f->tot[i]);
		gmachine[f->label[i]] |= f->cl[i].machine;
		goff[f->label[i] + 2]++;
	}
	for (size_t g = 0; g < np; g++)
		goff[g + 2] += goff[g + 1];
	for (size_t i = 0; i < f->n; i++)
		gm[goff[f->label[i] + 1]++] = (uint32_t)i;
	for (size_t s = 0; s < nstreams; s++) {
		tick++;
		used += f->off[s] < f->off[s + 1];
		for (uint32_t e = f->off[s]; e < f->off[s + 1]; e++) {
			uint32_t g = f->label[f->who[e]];

			if (stamp[g] != tick) {
				stamp[g] = tick;
				gstreams[g]++;
			}
		}
	}
	/* each problem's home: a costlier one whose streams hold most of its cost */
	for (size_t g = 0; g < np; g++) {
		double best = 0;

		parent[g] = (uint32_t)g;
		if (gmachine[g] || gtot[g] == 0)
			continue;
		nt = 0;
		for (uint32_t m = goff[g]; m < goff[g + 1]; m++) {
			const struct problem_cluster *c = &f->cl[gm[m]];

			for (uint32_t x = 0; x < c->n; x++) {
				uint32_t s = c->streams[x];

				tick++;
				for (uint32_t e = f->off[s]; e < f->off[s + 1]; e++) {
					uint32_t h = f->label[f->who[e]];

					if (h == g || stamp[h] == tick)
						continue;
					stamp[h] = tick;
					/* (a cost may be 0: marked, not tested by its sum) */
					if (mark[h] != g + 1) {
						mark[h] = (uint32_t)g + 1;
						touched[nt++] = h;
					}
					shared[h] += (double)c->cost[x];
				}
			}
		}
		for (size_t t = 0; t < nt; t++) {
			uint32_t h = touched[t];
			double in = shared[h] / (double)gtot[g];

			shared[h] = 0;
			if (gmachine[h] || !home_for(gstreams[h], gtot[h], gstreams[g], gtot[g]) || in < PROBLEM_FRAGMENT ||
			    in < PROBLEM_LIFT * (double)gstreams[h] / (double)used)
				continue;
			if (in > best || (in == best && gtot[h] > gtot[parent[g]])) {
				best = in;
				parent[g] = h;
			}
		}
	}
	/* a home always costs more: the chains end */
	relabel(f->label, f->n, parent, renum, np, nproblems);
	rc = 0;
out:
	free(gtot);
	free(gstreams);
	free(stamp);
	free(parent);
	free(renum);
	free(goff);
	free(gm);
	free(touched);
	free(mark);
	free(gmachine);
	free(shared);
	return rc;
}

int problem_group(const struct problem_cluster *cl, size_t n, size_t nstreams, double theta, uint32_t *label,
		  size_t *nproblems, char *err, size_t errlen)
{
	uint32_t *off = NULL, *who = NULL, *touched = NULL, *seen = NULL;
	uint64_t *wcost = NULL, *tot = NULL;
	double *sa = NULL, *sb = NULL;
	struct vec pairs = VEC_INIT(struct linkage_pair);
	struct linkage_merge *z = NULL;
	struct linkage *lk = NULL;
	size_t nent = 0;
	int rc = -1;

	*nproblems = 0;
	if (n == 0)
		return 0;
	/* each stream's clusters (a counting sort of the entries by stream) */
	off = vec_calloc(nstreams + 2, sizeof(*off));
	tot = vec_calloc(n, sizeof(*tot));
	for (size_t i = 0; i < n; i++)
		nent += cl[i].n;
	who = vec_alloc(nent + 1, sizeof(*who));
	wcost = vec_alloc(nent + 1, sizeof(*wcost));
	sa = vec_calloc(n, sizeof(*sa));
	sb = vec_calloc(n, sizeof(*sb));
	touched = vec_alloc(n, sizeof(*touched));
	seen = vec_calloc(n, sizeof(*seen));
	z = vec_alloc(n, sizeof(*z));
	lk = linkage_open();
	if (!off || !tot || !who || !wcost || !sa || !sb || !touched || !seen || !z || !lk)
		goto out_oom;
	for (size_t i = 0; i < n; i++)
		for (uint32_t x = 0; x < cl[i].n; x++) {
			off[cl[i].streams[x] + 2]++;
			/* saturating: a sum no real run reaches */
			tot[i] = add_sat(tot[i], cl[i].cost[x]);
		}
	for (size_t s = 0; s < nstreams; s++)
		off[s + 2] += off[s + 1];
	for (size_t i = 0; i < n; i++)
		for (uint32_t x = 0; x < cl[i].n; x++) {
			uint32_t at = off[cl[i].streams[x] + 1]++;

			who[at] = (uint32_t)i;
			wcost[at] = cl[i].cost[x];
		}
	/* for each a, the cost of a and of every later b in the streams they share */
	for (size_t a = 0; a < n; a++) {
		size_t nt = 0;

		for (uint32_t x = 0; x < cl[a].n; x++) {
			uint32_t s = cl[a].streams[x];

			for (uint32_t e = off[s]; e < off[s + 1]; e++) {
				uint32_t b = who[e];

				if (b <= a || cl[a].machine != cl[b].machine)
					continue;
				/* (a cost may be 0: marked, not tested by its sum) */
				if (seen[b] != a + 1) {
					seen[b] = (uint32_t)a + 1;
					touched[nt++] = b;
				}
				sa[b] += (double)cl[a].cost[x];
				sb[b] += (double)wcost[e];
			}
		}
		for (size_t t = 0; t < nt; t++) {
			uint32_t b = touched[t];
			double ca = tot[a] ? sa[b] / (double)tot[a] : 0, cb = tot[b] ? sb[b] / (double)tot[b] : 0;
			double d = 1 - (ca < cb ? ca : cb);
			struct linkage_pair *p;

			sa[b] = sb[b] = 0;
			if (d >= 1)
				continue;
			if (!(p = vec_push(&pairs)))
				goto out_oom;
			*p = (struct linkage_pair){ (uint32_t)a, b, d < 0 ? 0 : d };
		}
	}
	if (linkage_sparse(lk, pairs.data, pairs.len, n, LINKAGE_AVERAGE, z) < 0 ||
	    linkage_fcluster(lk, z, n, 1 - theta, label, nproblems) < 0) {
		snprintf(err, errlen, "grouping clusters into problems: %s", linkage_error(lk));
		goto out;
	}
	if (join_paths(cl, n, nstreams, label, nproblems) < 0)
		goto out_oom;
	{
		struct fragments f = { cl, n, *nproblems, off, who, tot, label };

		if (join_fragments(&f, nstreams, nproblems) < 0)
			goto out_oom;
	}
	rc = 0;
	goto out;
out_oom:
	snprintf(err, errlen, "grouping clusters into problems: out of memory");
out:
	linkage_free(lk);
	vec_free(&pairs);
	free(off);
	free(tot);
	free(who);
	free(wcost);
	free(sa);
	free(sb);
	free(touched);
	free(seen);
	free(z);
	return rc;
}

/* k(f) + 1 for a frame of the unit: the units whose set has it */
static uint32_t shared_by(const struct imap *cnt, uint32_t f)
{
	uint64_t v = 0;

	imap_get(cnt, f, &v);
	return v > 0 ? (uint32_t)v - 1 : 0;
}

/* Whether frame i of seq is a better pick than frame j (j == UINT32_MAX: none yet): less shared,
 * then more specific, then (inner) deeper or (!inner) shallower. */
static bool better(const uint32_t *seq, const struct imap *cnt, const struct problem_frames *fr, uint32_t i,
		   uint32_t j, bool inner)
{
	uint32_t ki, kj;
	uint64_t ni, nj;

	if (j == UINT32_MAX)
		return true;
	ki = shared_by(cnt, seq[i]);
	kj = shared_by(cnt, seq[j]);
	if (ki != kj)
		return ki < kj;
	ni = fr->streams(seq[i], fr->arg);
	nj = fr->streams(seq[j], fr->arg);
	if (ni != nj)
		return ni < nj;
	return inner ? i > j : i < j;
}

/* The best named frame of seq[0..len) (better(), inner), or UINT32_MAX. */
static uint32_t best_named(const uint32_t *seq, uint32_t len, const struct imap *cnt, const struct problem_frames *fr)
{
	uint32_t p = UINT32_MAX;

	for (uint32_t i = 0; i < len; i++)
		if (fr->named(seq[i], fr->arg) && better(seq, cnt, fr, i, p, true))
			p = i;
	return p;
}

/* Of a unit's sequences, the first (the costliest) whose best named frame is shared by the fewest
 * other units: a problem's least shared frame, in its costliest cluster that has one. */
static struct problem_seq pick_seq(const struct problem_unit *u, const struct imap *cnt,
				   const struct problem_frames *fr)
{
	struct problem_seq best = { u->seq, u->len };
	uint32_t bp = best_named(u->seq, u->len, cnt, fr);

	for (uint32_t a = 0; a < u->nalt; a++) {
		const struct problem_seq *s = &u->alt[a];
		uint32_t p = best_named(s->f, s->len, cnt, fr);

		if (p != UINT32_MAX && (bp == UINT32_MAX || shared_by(cnt, s->f[p]) < shared_by(cnt, best.f[bp]))) {
			best = *s;
			bp = p;
		}
	}
	return best;
}

/* The title of one unit (problem.h), from its sequence seq[0..len), into out; returns how many frames. */
static uint8_t title_of(const uint32_t *seq, uint32_t len, size_t n, const struct imap *cnt,
			const struct problem_frames *fr, uint32_t *out)
{
	uint32_t p1 = best_named(seq, len, cnt, fr), p2 = UINT32_MAX, c = UINT32_MAX, lo, hi;
	uint32_t half = (uint32_t)((n - 1) / 2) > 1 ? (uint32_t)((n - 1) / 2) : 1;
	uint8_t k = 0;

	if (p1 == UINT32_MAX) {
		/* nothing named: the innermost frames */
		for (uint32_t i = len > PROBLEM_TITLE_MAX ? len - PROBLEM_TITLE_MAX : 0; i < len; i++)
			out[k++] = seq[i];
		return k;
	}
	/* the best, then the best of the others equally shared */
	for (uint32_t i = 0; i < len; i++)
		if (i != p1 && fr->named(seq[i], fr->arg) && shared_by(cnt, seq[i]) == shared_by(cnt, seq[p1]) &&
		    better(seq, cnt, fr, i, p2, true))
			p2 = i;
	lo = p2 != UINT32_MAX && p2 < p1 ? p2 : p1;
	hi = p2 != UINT32_MAX && p2 > p1 ? p2 : p1;
	if (shared_by(cnt, seq[p1]) + 1 < n)
		for (uint32_t i = hi + 1; i < len; i++)
			if (fr->named(seq[i], fr->arg) && better(seq, cnt, fr, i, c, false))
				c = i;
	out[k++] = seq[lo];
	if (hi != lo)
		out[k++] = seq[hi];
	if (c != UINT32_MAX && shared_by(cnt, seq[c]) <= half)
		out[k++] = seq[c];
	return k;
}

int problem_titles(const struct problem_unit *u, size_t n, const struct problem_frames *fr, uint32_t *out,
		   uint8_t *nout)
{
	struct imap cnt = IMAP_INIT, seen = IMAP_INIT;
	int rc = -1;

	/* how many units have each frame (a unit's repeats once) */
	for (size_t i = 0; i < n; i++) {
		imap_clear(&seen);
		for (uint32_t j = 0; j < u[i].nset; j++) {
			uint64_t v = 0;

			if (imap_get(&seen, u[i].set[j], &v))
				continue;
			if (imap_put(&seen, u[i].set[j], 1) < 0)
				goto out;
			imap_get(&cnt, u[i].set[j], &v);
			if (imap_put(&cnt, u[i].set[j], v + 1) < 0)
				goto out;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct problem_seq s = pick_seq(&u[i], &cnt, fr);

		nout[i] = title_of(s.f, s.len, n, &cnt, fr, out + i * PROBLEM_TITLE_MAX);
	}
	rc = 0;
out:
	imap_free(&cnt);
	imap_free(&seen);
	return rc;
}
