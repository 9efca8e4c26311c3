/* Unit tests for clusterer/hclust.c: linkages by hand, ties, flat clusters, sparse == dense, patterns. */
#include "clusterer/hclust.h"
#include "clusterer/sim.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_row(const struct linkage_merge *z, uint32_t a, uint32_t b, double d, uint32_t size, int line)
{
	if (z->a != a || z->b != b || z->size != size || !(fabs(z->dist - d) <= 1e-12)) {
		fprintf(stderr, "  %s:%d: row (%u %u %.17g %u), expected (%u %u %.17g %u)\n", __FILE__, line,
			(unsigned)z->a, (unsigned)z->b, z->dist, (unsigned)z->size, (unsigned)a, (unsigned)b, d,
			(unsigned)size);
		check_made(1);
	} else {
		check_made(0);
	}
}
#define ROW(z, a, b, d, s) check_row(z, a, b, d, s, __LINE__)

/* d01 .3, d02 .5, d03 .9, d12 .4, d13 .8, d23 .2 */
static const double four[6] = { 0.3, 0.5, 0.9, 0.4, 0.8, 0.2 };

static void test_methods_by_hand(void)
{
	struct linkage *h = linkage_open();
	struct linkage_merge z[3];
	double d[6];
	enum linkage_method m;

	CHECK(h != NULL);
	if (!h)
		return;
	memcpy(d, four, sizeof(d));
	CHECK_INT(linkage_dense(h, d, 4, LINKAGE_AVERAGE, z), 0);
	ROW(&z[0], 2, 3, 0.2, 2);
	ROW(&z[1], 0, 1, 0.3, 2);
	/* ((.5 + .9)/2 + (.4 + .8)/2) / 2 = mean of the four cross distances */
	ROW(&z[2], 4, 5, 0.65, 4);
	memcpy(d, four, sizeof(d));
	CHECK_INT(linkage_dense(h, d, 4, LINKAGE_SINGLE, z), 0);
	ROW(&z[0], 2, 3, 0.2, 2);
	ROW(&z[1], 0, 1, 0.3, 2);
	ROW(&z[2], 4, 5, 0.4, 4);
	memcpy(d, four, sizeof(d));
	CHECK_INT(linkage_dense(h, d, 4, LINKAGE_COMPLETE, z), 0);
	ROW(&z[2], 4, 5, 0.9, 4);
	/* names */
	CHECK_INT(linkage_method_parse("complete", &m), 0);
	CHECK_INT(m, LINKAGE_COMPLETE);
	CHECK_INT(linkage_method_parse("ward", &m), -1);
	CHECK_STR(linkage_method_name(LINKAGE_AVERAGE), "average");
	/* not finite */
	memcpy(d, four, sizeof(d));
	d[4] = NAN;
	CHECK_INT(linkage_dense(h, d, 4, LINKAGE_AVERAGE, z), -1);
	CHECK(strstr(linkage_error(h), "distance 4") != NULL);
	/* one point: nothing to do */
	CHECK_INT(linkage_dense(h, d, 1, LINKAGE_AVERAGE, z), 0);
	linkage_free(h);
}

static void test_ties(void)
{
	struct linkage *h = linkage_open();
	struct linkage_merge z[3];
	double d[6];
	double abc[3] = { 0.3, 1, 0.3 };
	uint32_t lab[4];
	size_t nc, i;

	CHECK(h != NULL);
	if (!h)
		return;
	/* all equal: the chain starts at 0 and keeps taking the lowest index (SciPy's rows) */
	for (i = 0; i < 6; i++)
		d[i] = 0.5;
	CHECK_INT(linkage_dense(h, d, 4, LINKAGE_AVERAGE, z), 0);
	ROW(&z[0], 0, 1, 0.5, 2);
	ROW(&z[1], 2, 4, 0.5, 3);
	ROW(&z[2], 3, 5, 0.5, 4);
	/* 1 is as close to 0 as to 2: it joins 0, the lower index; 2 then stays out at a cut of 0.5 */
	CHECK_INT(linkage_dense(h, abc, 3, LINKAGE_AVERAGE, z), 0);
	ROW(&z[0], 0, 1, 0.3, 2);
	ROW(&z[1], 2, 3, 0.65, 3);
	CHECK_INT(linkage_fcluster(h, z, 3, 0.5, lab, &nc), 0);
	CHECK_INT(nc, 2);
	CHECK_INT(lab[0], 0);
	CHECK_INT(lab[1], 0);
	CHECK_INT(lab[2], 1);
	abc[0] = 0.3, abc[1] = 1, abc[2] = 0.3;
	CHECK_INT(linkage_dense(h, abc, 3, LINKAGE_SINGLE, z), 0);
	ROW(&z[0], 0, 1, 0.3, 2);
	ROW(&z[1], 2, 3, 0.3, 3);
	abc[0] = 0.3, abc[1] = 1, abc[2] = 0.3;
	CHECK_INT(linkage_dense(h, abc, 3, LINKAGE_COMPLETE, z), 0);
	ROW(&z[1], 2, 3, 1.0, 3);
	linkage_free(h);
}

static void test_fcluster(void)
{
	struct linkage *h = linkage_open();
	struct linkage_merge z[3];
	double d[6];
	uint32_t lab[4];
	size_t nc = 0;

	CHECK(h != NULL);
	if (!h)
		return;
	memcpy(d, four, sizeof(d));
	CHECK_INT(linkage_dense(h, d, 4, LINKAGE_AVERAGE, z), 0);
	/* merges at .2 (2,3), .3 (0,1), .65 */
	CHECK_INT(linkage_fcluster(h, z, 4, 0.1, lab, &nc), 0);
	CHECK_INT(nc, 4);
	CHECK_INT(lab[3], 3);
	/* a merge exactly at the cut is made */
	CHECK_INT(linkage_fcluster(h, z, 4, 0.2, lab, &nc), 0);
	CHECK_INT(nc, 3);
	CHECK_INT(lab[0], 0);
	CHECK_INT(lab[1], 1);
	CHECK_INT(lab[2], 2);
	CHECK_INT(lab[3], 2);
	CHECK_INT(linkage_fcluster(h, z, 4, 0.5, lab, &nc), 0);
	CHECK_INT(nc, 2);
	CHECK_INT(lab[1], 0);
	CHECK_INT(lab[2], 1);
	CHECK_INT(linkage_fcluster(h, z, 4, 0.65, lab, &nc), 0);
	CHECK_INT(nc, 1);
	/* the highest merge below decides: a made-up non-monotone tree (root at .1 over a child at .4) */
	{
		struct linkage_merge nm[2] = { { 0, 1, 0.4, 2 }, { 2, 3, 0.1, 3 } };

		CHECK_INT(linkage_fcluster(h, nm, 3, 0.2, lab, &nc), 0);
		CHECK_INT(nc, 3);
		CHECK_INT(linkage_fcluster(h, nm, 3, 0.4, lab, &nc), 0);
		CHECK_INT(nc, 1);
	}
	/* invalid rows, NaN cut */
	{
		struct linkage_merge bad[2] = { { 0, 1, 0.4, 2 }, { 2, 4, 0.1, 3 } };

		CHECK_INT(linkage_fcluster(h, bad, 3, 0.2, lab, &nc), -1);
		CHECK(strstr(linkage_error(h), "row 1") != NULL);
		CHECK_INT(linkage_fcluster(h, z, 4, NAN, lab, &nc), -1);
	}
	linkage_free(h);
}

/* The sparse linkage equals the dense one on the matrix with the missing pairs at 1, row for row. */
static void test_sparse_equals_dense(void)
{
	struct linkage *h = linkage_open();
	int t, bad_z = 0, bad_flat = 0, fails = 0;
	static const double cuts[] = { 0.0, 0.2, 0.3, 0.5, 0.7, 0.95, 1.0 };

	CHECK(h != NULL);
	if (!h)
		return;
	for (t = 0; t < 600; t++) {
		size_t n = 2 + check_rand() % 70, nd = n * (n - 1) / 2, np = 0, i, j, k = 0, c;
		double *dense = malloc(nd * sizeof(*dense)), *work = malloc(nd * sizeof(*work));
		struct linkage_pair *pairs = malloc(nd * sizeof(*pairs));
		struct linkage_merge *zd = malloc(n * sizeof(*zd)), *zs = malloc(n * sizeof(*zs));
		uint32_t *ld = malloc(n * sizeof(*ld)), *ls = malloc(n * sizeof(*ls));
		enum linkage_method m = (enum linkage_method)(t % 3);
		unsigned density = 5 + (unsigned)(check_rand() % 95);
		int decimals = t % 4 == 3 ? 0 : 1;

		if (!dense || !work || !pairs || !zd || !zs || !ld || !ls) {
			fails++;
			goto next;
		}
		for (i = 0; i < n; i++) {
			for (j = i + 1; j < n; j++, k++) {
				dense[k] = 1.0;
				if (check_rand() % 100 < density) {
					double v = (double)(check_rand() % 1000001) / 1e6;

					if (decimals)
						v = round(v * 10) / 10; /* ties everywhere, some listed 1s */
					dense[k] = v;
					pairs[np].i = (uint32_t)(check_rand() % 2 ? i : j);
					pairs[np].j = (uint32_t)(pairs[np].i == i ? j : i);
					pairs[np++].d = v;
				}
			}
		}
		/* any order */
		for (i = np; i > 1; i--) {
			struct linkage_pair tmp = pairs[i - 1];

			j = check_rand() % i;
			pairs[i - 1] = pairs[j];
			pairs[j] = tmp;
		}
		memcpy(work, dense, nd * sizeof(*work));
		if (linkage_dense(h, work, n, m, zd) < 0 || linkage_sparse(h, pairs, np, n, m, zs) < 0) {
			fails++;
			goto next;
		}
		for (i = 0; i + 1 < n; i++)
			if (zd[i].a != zs[i].a || zd[i].b != zs[i].b || zd[i].size != zs[i].size ||
			    memcmp(&zd[i].dist, &zs[i].dist, sizeof(double)) != 0)
				bad_z++;
		for (c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
			size_t ncd, ncs;

			if (linkage_fcluster(h, zd, n, cuts[c], ld, &ncd) < 0 ||
			    linkage_fcluster(h, zs, n, cuts[c], ls, &ncs) < 0) {
				fails++;
				break;
			}
			if (ncd != ncs || memcmp(ld, ls, n * sizeof(*ld)) != 0)
				bad_flat++;
		}
next:
		free(dense);
		free(work);
		free(pairs);
		free(zd);
		free(zs);
		free(ld);
		free(ls);
	}
	CHECK_INT(fails, 0);
	CHECK_INT(bad_z, 0);
	CHECK_INT(bad_flat, 0);
	linkage_free(h);
}

static void test_sparse_errors(void)
{
	struct linkage *h = linkage_open();
	struct linkage_merge z[4];
	struct linkage_pair p[2] = { { 0, 1, 0.5 }, { 1, 0, 0.25 } };

	CHECK(h != NULL);
	if (!h)
		return;
	CHECK_INT(linkage_sparse(h, p, 2, 5, LINKAGE_AVERAGE, z), -1);
	CHECK(strstr(linkage_error(h), "listed twice") != NULL);
	p[1].i = 3;
	p[1].j = 3;
	CHECK_INT(linkage_sparse(h, p, 2, 5, LINKAGE_AVERAGE, z), -1);
	CHECK(strstr(linkage_error(h), "pair 1") != NULL);
	p[1].j = 5;
	CHECK_INT(linkage_sparse(h, p, 2, 5, LINKAGE_SINGLE, z), -1);
	p[1].j = 4;
	p[1].d = 1.5;
	CHECK_INT(linkage_sparse(h, p, 2, 5, LINKAGE_COMPLETE, z), -1);
	CHECK(strstr(linkage_error(h), "not in [0, 1]") != NULL);
	p[1].d = NAN;
	CHECK_INT(linkage_sparse(h, p, 2, 5, LINKAGE_COMPLETE, z), -1);
	/* no pairs at all: everything merges at 1, lowest indexes first */
	CHECK_INT(linkage_sparse(h, NULL, 0, 3, LINKAGE_AVERAGE, z), 0);
	ROW(&z[0], 0, 1, 1.0, 2);
	ROW(&z[1], 2, 3, 1.0, 3);
	linkage_free(h);
}

/* ---- patterns ---- */

static const char *const vocab[] = {
	"Get", "Set", "Lock", "Wait", "Read", "Write", "File", "Page", "Fault", "Hash", "Table", "Init",
	"Query", "Attr", "Kernel", "Stack", "Event", "Mutex", "Alloc", "Free",
};

struct pset {
	struct sim_frames *ft;
	uint32_t *frames;       /* n * maxlen */
	double *w;
	struct sim_pattern *p;
	size_t n;
};

static void pset_free(struct pset *s)
{
	sim_frames_free(s->ft);
	free(s->frames);
	free(s->w);
	free(s->p);
}

/* Families of variants of a base path, all under a shared root; nf frames named from vocab. */
static int pset_make(struct pset *s, size_t families, size_t maxlen)
{
	size_t nf = 120, f, i, cap = families * 10;
	char name[96];

	memset(s, 0, sizeof(*s));
	s->ft = sim_frames_open();
	s->frames = malloc(cap * maxlen * sizeof(*s->frames));
	s->w = malloc(cap * maxlen * sizeof(*s->w));
	s->p = malloc(cap * sizeof(*s->p));
	if (!s->ft || !s->frames || !s->w || !s->p)
		return -1;
	for (f = 1; f <= nf; f++) {
		snprintf(name, sizeof(name), "mod%u!%s%s%s", (unsigned)(f % 7), vocab[check_rand() % 20], vocab[check_rand() % 20],
			 f % 3 ? vocab[check_rand() % 20] : "");
		if (sim_frames_add(s->ft, (uint32_t)f, name, strlen(name)) < 0)
			return -1;
	}
	sim_frames_set_streams(s->ft, 1000);
	for (f = 1; f <= nf; f++)
		sim_frames_set_count(s->ft, (uint32_t)f, f <= 3 ? 990 : 1 + check_rand() % 300);
	for (i = 0; i < families; i++) {
		uint32_t base[32];
		size_t blen = 4 + check_rand() % 10, v, nv = 1 + check_rand() % 8, k;

		base[0] = 1;
		base[1] = 2;
		for (k = 2; k < blen; k++)
			base[k] = 4 + (uint32_t)(check_rand() % (nf - 3));
		for (v = 0; v < nv; v++) {
			uint32_t *out = s->frames + s->n * maxlen;
			size_t len = 0;

			for (k = 0; k < blen && len + 2 < maxlen; k++) {
				unsigned r = (unsigned)(check_rand() % 10);

				if (v && r == 0)
					continue;                                       /* dropped */
				if (v && r == 1)
					out[len++] = 4 + (uint32_t)(check_rand() % (nf - 3));  /* changed */
				else
					out[len++] = base[k];
				if (v && r == 2)
					out[len++] = 3;                                 /* an extra frame */
			}
			if (len == 0)
				out[len++] = base[0];
			sim_weights(s->ft, out, len, s->w + s->n * maxlen);
			s->p[s->n].frames = out;
			s->p[s->n].w = s->w + s->n * maxlen;
			s->p[s->n].len = len;
			s->n++;
		}
	}
	return 0;
}

/* Component of each point in the graph of the pairs within the cut (union-find, roots lowest). */
static void within_components(const double *sims, size_t n, double cut, uint32_t *comp)
{
	size_t i, j, k;

	for (i = 0; i < n; i++)
		comp[i] = (uint32_t)i;
	for (i = 0, k = 0; i < n; i++)
		for (j = i + 1; j < n; j++, k++)
			if (1 - sims[k] <= cut) {
				uint32_t a = (uint32_t)i, b = (uint32_t)j;

				while (comp[a] != a)
					a = comp[a];
				while (comp[b] != b)
					b = comp[b];
				if (a != b)
					comp[a > b ? a : b] = a < b ? a : b;
			}
	for (i = 0; i < n; i++)
		while (comp[i] != comp[comp[i]])
			comp[i] = comp[comp[i]];
}

/* The height at which points i < j first share a cluster (cophenetic distance), -1 above the cut, into
 * c[n * i + j]. */
static void cophenetic_to(const struct linkage_merge *z, size_t n, double cut, uint32_t *label, double *c)
{
	size_t i, j, r;

	for (i = 0; i < n * n; i++)
		c[i] = -1;
	for (i = 0; i < n; i++)
		label[i] = (uint32_t)i;
	for (r = 0; r + 1 < n && z[r].dist <= cut; r++) {
		for (i = 0; i < n; i++)
			for (j = i + 1; j < n; j++)
				if ((label[i] == z[r].a && label[j] == z[r].b) || (label[i] == z[r].b && label[j] == z[r].a))
					c[n * i + j] = z[r].dist;
		for (i = 0; i < n; i++)
			if (label[i] == z[r].a || label[i] == z[r].b)
				label[i] = (uint32_t)(n + r);
	}
}

/* Whether two linkages of n points join every pair at the same height up to the cut: the same tree,
 * but for the order of merges at equal heights (the chain may walk them in another order) and the
 * rounding of averages updated in another order (1e-12). */
static bool same_tree_to(const struct linkage_merge *za, const struct linkage_merge *zb, size_t n, double cut)
{
	uint32_t *label = malloc(n * sizeof(*label));
	double *ca = malloc(n * n * sizeof(*ca)), *cb = malloc(n * n * sizeof(*cb));
	bool same = false;

	if (label && ca && cb) {
		cophenetic_to(za, n, cut, label, ca);
		cophenetic_to(zb, n, cut, label, cb);
		same = true;
		for (size_t q = 0; q < n * n; q++)
			if (fabs(ca[q] - cb[q]) > 1e-12)
				same = false;
	}
	free(label);
	free(ca);
	free(cb);
	return same;
}

/* hclust_patterns() against brute force: every pair's Sim and the dense linkage of the full matrix
 * (average: the true distances of every pair; single and complete: the pairs beyond the cut at 1,
 * which changes no merge at or below the cut); the pairs handed to the linkage, the linkage rows up to
 * the cut (all of them for single and complete), the flat clusters, medoids and common parts must
 * agree. */
static void test_patterns_brute_force(void)
{
	struct pset s;
	struct hclust *h = hclust_open();
	struct linkage *hd = linkage_open();
	struct sim_ctx *c = NULL;
	static const double cuts[] = { 0.3, 0.5, 0.7 };
	double *sims = NULL, *work = NULL;
	size_t n, nd, i, j, k, ci;
	int mth, thr, bad_pairs = 0, bad_z = 0, bad_lab = 0, bad_med = 0, bad_common = 0, runs = 0;
	struct linkage_merge *zref = NULL;
	uint32_t *lref = NULL, *comp = NULL, pos[32];
	bool *keep = NULL;
	size_t beyond;

	CHECK(h && hd);
	if (!h || !hd || pset_make(&s, 40, 32) < 0) {
		CHECK(0);
		goto out;
	}
	n = s.n;
	nd = n * (n - 1) / 2;
	c = sim_ctx_open(s.ft);
	sims = malloc(nd * sizeof(*sims));
	work = malloc(nd * sizeof(*work));
	zref = malloc(n * sizeof(*zref));
	lref = malloc(n * sizeof(*lref));
	comp = malloc(n * sizeof(*comp));
	keep = malloc(nd * sizeof(*keep));
	if (!c || !sims || !work || !zref || !lref || !comp || !keep)
		goto out;
	for (i = 0, k = 0; i < n; i++)
		for (j = i + 1; j < n; j++, k++)
			if (sim_similarity(c, &s.p[i], &s.p[j], &sims[k]) < 0)
				goto out;
	for (ci = 0; ci < sizeof(cuts) / sizeof(cuts[0]); ci++) {
		for (mth = 0; mth < 3; mth++) {
			size_t nref = 0, ncref, within = 0;
			const struct hclust_clusters *cl;
			struct hclust_opts o = { (enum linkage_method)mth, cuts[ci], 1 };

			within_components(sims, n, cuts[ci], comp);
			for (i = 0, k = 0, beyond = 0; i < n; i++)
				for (j = i + 1; j < n; j++, k++) {
					keep[k] = 1 - sims[k] <= cuts[ci] ||
						  (mth == LINKAGE_AVERAGE && sims[k] > 0 && comp[i] == comp[j]);
					work[k] = mth == LINKAGE_AVERAGE || 1 - sims[k] <= cuts[ci] ? 1 - sims[k] : 1.0;
					within += 1 - sims[k] <= cuts[ci];
					beyond += keep[k] && 1 - sims[k] > cuts[ci];
				}
			if (linkage_dense(hd, work, n, o.method, zref) < 0 ||
			    linkage_fcluster(hd, zref, n, cuts[ci], lref, &ncref) < 0)
				goto out;
			for (thr = 1; thr <= 2; thr++) {
				struct hclust_stats st;

				o.threads = thr;
				nref = 0;
				runs++;
				if (hclust_patterns(h, s.ft, s.p, n, &o, &cl) < 0) {
					fprintf(stderr, "  hclust_patterns: %s\n", hclust_error(h));
					CHECK(0);
					goto out;
				}
				hclust_last_stats(h, &st);
				/* pruning must not lose a pair that can change a merge, and must prune something */
				if (cl->npairs != within + beyond)
					bad_pairs++;
				for (i = 0, k = 0; i < n; i++) {
					for (j = i + 1; j < n; j++, k++) {
						if (!keep[k])
							continue;
						if (nref >= cl->npairs || cl->pairs[nref].i != i || cl->pairs[nref].j != j ||
						    cl->pairs[nref].d != 1 - sims[k])
							bad_pairs++;
						nref++;
					}
				}
				CHECK(st.aligned < nd);
				CHECK(st.candidates <= nd);
				CHECK_INT(st.kept, within);
				CHECK_INT(st.extended, beyond);
				if (mth == LINKAGE_AVERAGE) {
					/* the tree up to the cut: merges at equal heights may come in another
					 * order (the chain walks another matrix above the cut) */
					if (!same_tree_to(zref, cl->z, n, cuts[ci]))
						bad_z++;
				} else {
					for (i = 0; i + 1 < n; i++)
						if (zref[i].a != cl->z[i].a || zref[i].b != cl->z[i].b ||
						    zref[i].dist != cl->z[i].dist || zref[i].size != cl->z[i].size)
							bad_z++;
				}
				if (cl->nclusters != ncref || memcmp(cl->label, lref, n * sizeof(*lref)) != 0)
					bad_lab++;
				/* members ascending, medoid and common part as sim.c computes them */
				for (k = 0; k < cl->nclusters; k++) {
					size_t km = cl->off[k + 1] - cl->off[k], med = 0, np = 0, q;
					struct sim_pattern *mp = malloc(km * sizeof(*mp));

					if (!mp)
						goto out;
					for (q = 0; q < km; q++) {
						uint32_t pi = cl->members[cl->off[k] + q];

						mp[q] = s.p[pi];
						if (lref[pi] != k || (q && cl->members[cl->off[k] + q - 1] >= pi))
							bad_lab++;
					}
					if (sim_medoid(c, mp, km, &med) < 0 || cl->members[cl->off[k] + med] != cl->medoid[k])
						bad_med++;
					if (sim_common_part(c, mp, km, med, pos, &np) < 0 ||
					    np != cl->common_off[k + 1] - cl->common_off[k] ||
					    memcmp(pos, cl->common + cl->common_off[k], np * sizeof(*pos)) != 0)
						bad_common++;
					free(mp);
				}
			}
		}
	}
	CHECK_INT(runs, 18);
	CHECK_INT(bad_pairs, 0);
	CHECK_INT(bad_z, 0);
	CHECK_INT(bad_lab, 0);
	CHECK_INT(bad_med, 0);
	CHECK_INT(bad_common, 0);
out:
	sim_ctx_free(c);
	free(sims);
	free(work);
	free(zref);
	free(lref);
	free(comp);
	free(keep);
	pset_free(&s);
	hclust_free(h);
	linkage_free(hd);
}

static void test_patterns_small(void)
{
	static const char *const names[] = { "app!main", "app!RunTask", "lib!LockMutex", "kern!FutexWait",
					     "app!ReadConfig", "lib!ReadFile", "kern!DiskRead", "other!Idle" };
	/* two families sharing only main, and a loner sharing nothing */
	static const uint32_t a0[] = { 1, 2, 3, 4 }, a1[] = { 1, 2, 3, 4, 4 }, b0[] = { 1, 5, 6, 7 },
			      b1[] = { 1, 5, 7 }, c0[] = { 8 };
	struct sim_frames *ft = sim_frames_open();
	struct hclust *h = hclust_open();
	double w[5][5];
	struct sim_pattern p[5] = { { a0, w[0], 4 }, { b0, w[1], 4 }, { a1, w[2], 5 }, { b1, w[3], 3 },
				    { c0, w[4], 1 } };
	struct hclust_opts o = { LINKAGE_AVERAGE, 0.5, 2 };
	const struct hclust_clusters *cl;
	struct hclust_stats st;
	size_t i;

	CHECK(ft && h);
	if (!ft || !h)
		goto out;
	for (i = 0; i < 8; i++)
		sim_frames_add(ft, (uint32_t)(i + 1), names[i], strlen(names[i]));
	sim_frames_set_streams(ft, 100);
	sim_frames_set_count(ft, 1, 100);
	for (i = 0; i < 5; i++)
		sim_weights(ft, p[i].frames, p[i].len, w[i]);
	CHECK_INT(hclust_patterns(h, ft, p, 5, &o, &cl), 0);
	CHECK_INT(cl->nclusters, 3);
	CHECK_INT(cl->label[0], 0);
	CHECK_INT(cl->label[1], 1);
	CHECK_INT(cl->label[2], 0);
	CHECK_INT(cl->label[3], 1);
	CHECK_INT(cl->label[4], 2);
	CHECK_INT(cl->off[1], 2);
	CHECK_INT(cl->members[0], 0);
	CHECK_INT(cl->members[1], 2);
	/* two members: the lower index is the medoid; a0 is matched whole in a1 */
	CHECK_INT(cl->medoid[0], 0);
	CHECK_INT(cl->common_off[1], 4);
	/* b0 vs b1: ReadFile is deleted, the rest matched */
	CHECK_INT(cl->medoid[1], 1);
	CHECK_INT(cl->common_off[2] - cl->common_off[1], 3);
	CHECK_INT(cl->common[cl->common_off[1] + 2], 3);
	CHECK_INT(cl->medoid[2], 4);
	CHECK_INT(cl->common_off[3] - cl->common_off[2], 1);
	CHECK_INT(cl->npairs, 2);
	hclust_last_stats(h, &st);
	/* the loner shares no frame: never a candidate; main alone cannot reach the cut */
	CHECK_INT(st.aligned, 2);
	CHECK_INT(st.threads, 2);
	/* a frame that is not registered */
	{
		static const uint32_t bad[] = { 1, 42 };
		struct sim_pattern q[2] = { { a0, w[0], 4 }, { bad, w[1], 2 } };

		CHECK_INT(hclust_patterns(h, ft, q, 2, &o, &cl), -1);
		CHECK(strstr(hclust_error(h), "frame id 42") != NULL);
	}
	/* a cut below 0: singletons; at 1: one cluster */
	o.cut = -0.1;
	CHECK_INT(hclust_patterns(h, ft, p, 5, &o, &cl), 0);
	CHECK_INT(cl->nclusters, 5);
	o.cut = 1;
	CHECK_INT(hclust_patterns(h, ft, p, 5, &o, &cl), 0);
	CHECK_INT(cl->nclusters, 1);
	o.cut = 0.5;
	CHECK_INT(hclust_patterns(h, ft, p, 0, &o, &cl), 0);
	CHECK_INT(cl->nclusters, 0);
out:
	sim_frames_free(ft);
	hclust_free(h);
}

int main(void)
{
	check_seed(0x2545F4914F6CDD1DULL);
	RUN(test_methods_by_hand);
	RUN(test_ties);
	RUN(test_fcluster);
	RUN(test_sparse_equals_dense);
	RUN(test_sparse_errors);
	RUN(test_patterns_small);
	RUN(test_patterns_brute_force);
	return CHECK_DONE();
}
