/*
 * analysisbench: timing of the baseline measurement (make bench, analysis section).
 *
 *   analysisbench [--streams N] [--clusters K] [--patterns P] [--stacks S] [--replicates R]
 *                 [--threads T] [--seed X]
 *
 * Two in-memory stages of a run with baseline streams (docs/analysis.md), at the
 * scale of a large run, on generated data:
 *   - matching: P patterns (subsequences of call paths, length about 20) against S
 *     baseline stacks (depth about 36 over 5,000 frames, sharing thread-start and
 *     dispatch prefixes like real stacks) with baseline_match();
 *   - excess: N streams (half of them baseline, 8 unit types) and K clusters, each
 *     owning a cost in a heavy-tailed number of streams (20 to about 1,100), measured
 *     with excess_measure() and R bootstrap replicates, clusters split over the cores.
 * Prints one line per stage (time, sizes) and the peak RSS; exit status 0, or 1.
 */
#include "clusterer/excess.h"
#include "common/par.h"
#include "common/util.h"
#include "miner/baseline.h"
#include "tests/tools/benchutil.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define FRAMES 5000
#define DEPTH 36
#define PREFIXES 40

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fputs("analysisbench: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

/* a call path: one of the shared prefixes (thread start, dispatch), then frames of its own */
static void make_path(uint32_t *f, uint32_t len, const uint32_t (*prefix)[12])
{
	const uint32_t *pre = prefix[rnd() % PREFIXES];

	for (uint32_t i = 0; i < len; i++)
		f[i] = i < 12 ? pre[i] : (uint32_t)(PREFIXES * 12 + rnd() % (FRAMES - PREFIXES * 12));
}

static int bench_match(size_t npat, size_t nst, int threads)
{
	uint32_t (*prefix)[12] = xmalloc(PREFIXES * sizeof(*prefix));
	uint32_t *sf = xmalloc(nst * DEPTH * sizeof(*sf)), *pf = xmalloc(npat * DEPTH * sizeof(*pf));
	struct baseline_seq *st = xmalloc(nst * sizeof(*st)), *pt = xmalloc(npat * sizeof(*pt));
	uint32_t *off, *idx;
	double t0;

	for (uint32_t i = 0; i < PREFIXES * 12; i++)
		prefix[i / 12][i % 12] = i;
	for (size_t s = 0; s < nst; s++) {
		uint32_t len = DEPTH - 8 + (uint32_t)(rnd() % 17);

		make_path(sf + s * DEPTH, len < DEPTH ? len : DEPTH, (const uint32_t(*)[12])prefix);
		st[s] = (struct baseline_seq){ sf + s * DEPTH, len < DEPTH ? len : DEPTH, rnd() % 10 < 7 ? 'w' : 'r' };
	}
	/* patterns: every other frame of a baseline stack (so some match), or of a path of their own */
	for (size_t p = 0; p < npat; p++) {
		uint32_t *f = pf + p * DEPTH, n = 0, tmp[DEPTH];
		const struct baseline_seq *from = &st[rnd() % nst];

		if (rnd() % 2) {
			for (uint32_t i = 0; i < from->len; i++)
				if (i < 12 || rnd() % 3)
					f[n++] = from->frames[i];
			pt[p] = (struct baseline_seq){ f, n, from->kind };
		} else {
			make_path(tmp, DEPTH, (const uint32_t(*)[12])prefix);
			for (uint32_t i = 0; i < DEPTH; i++)
				if (i < 12 || rnd() % 3)
					f[n++] = tmp[i];
			pt[p] = (struct baseline_seq){ f, n, rnd() % 10 < 7 ? 'w' : 'r' };
		}
	}
	t0 = now_s();
	if (baseline_match(st, nst, pt, npat, threads, &off, &idx) < 0) {
		fputs("analysisbench: baseline_match: out of memory\n", stderr);
		return 1;
	}
	printf("match: %zu patterns against %zu baseline stacks (depth %d, %d frames): %.1f ms on %d threads, "
	       "%u matches\n", npat, nst, DEPTH, FRAMES, (now_s() - t0) * 1000, par_threads(threads), off[npat]);
	free(off);
	free(idx);
	free(prefix);
	free(sf);
	free(pf);
	free(st);
	free(pt);
	return 0;
}

struct measure_job {
	const struct excess *x;
	uint32_t **s;
	uint64_t **c;
	size_t *n;
	struct par_items items;
	int failed;
};

static void measure_worker(void *arg, int w)
{
	struct measure_job *j = arg;
	struct excess_result r;
	size_t k;

	(void)w;
	while (par_take(&j->items, &k))
		if (excess_measure(j->x, j->s[k], j->c[k], j->n[k], &r) < 0)
			j->failed = 1;
}

static int bench_excess(size_t nstreams, size_t nclusters, int reps, int threads)
{
	uint8_t *base = xmalloc(nstreams);
	uint32_t *type = xmalloc(nstreams * sizeof(*type));
	struct excess_streams es = { nstreams, base, type, 8 };
	struct measure_job j;
	struct excess *x;
	size_t total = 0;
	double t0, t1;

	for (size_t i = 0; i < nstreams; i++) {
		base[i] = i % 2;
		type[i] = (uint32_t)(rnd() % 8);
	}
	memset(&j, 0, sizeof(j));
	j.s = xmalloc(nclusters * sizeof(*j.s));
	j.c = xmalloc(nclusters * sizeof(*j.c));
	j.n = xmalloc(nclusters * sizeof(*j.n));
	for (size_t k = 0; k < nclusters; k++) {
		size_t m = 20 + (size_t)exp(unit() * 7);

		if (m > nstreams)
			m = nstreams;
		j.s[k] = xmalloc(m * sizeof(uint32_t));
		j.c[k] = xmalloc(m * sizeof(uint64_t));
		j.n[k] = m;
		/* m distinct streams: a random start and stride */
		for (size_t i = 0, at = rnd() % nstreams; i < m; i++, at = (at + 7919) % nstreams) {
			j.s[k][i] = (uint32_t)at;
			j.c[k][i] = 1000000 + rnd() % 50000000;
		}
		total += m;
	}
	t0 = now_s();
	x = excess_open(&es, reps, 42);
	if (!x) {
		fputs("analysisbench: excess_open: out of memory\n", stderr);
		return 1;
	}
	t1 = now_s();
	j.x = x;
	par_items_init(&j.items, nclusters);
	par_run(par_threads(threads), measure_worker, &j);
	printf("excess: %zu clusters over %zu streams (%zu baseline, 8 unit types), %zu (cluster, stream) costs, "
	       "%d replicates: groups and replicate weights %.1f ms, the clusters %.1f ms on %d threads\n",
	       nclusters, nstreams, nstreams / 2, total, reps, (t1 - t0) * 1000, (now_s() - t1) * 1000,
	       par_threads(threads));
	excess_free(x);
	for (size_t k = 0; k < nclusters; k++) {
		free(j.s[k]);
		free(j.c[k]);
	}
	free(j.s);
	free(j.c);
	free(j.n);
	free(base);
	free(type);
	return j.failed;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "streams", required_argument, NULL, 'n' },  { "clusters", required_argument, NULL, 'k' },
		{ "patterns", required_argument, NULL, 'p' }, { "stacks", required_argument, NULL, 's' },
		{ "replicates", required_argument, NULL, 'r' }, { "threads", required_argument, NULL, 't' },
		{ "seed", required_argument, NULL, 'x' },     { NULL, 0, NULL, 0 },
	};
	int64_t n = 100000, k = 10000, p = 30000, s = 50000, r = 200, t = 0, v;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int64_t *dst = c == 'n' ? &n : c == 'k' ? &k : c == 'p' ? &p : c == 's' ? &s : c == 'r' ? &r :
			       c == 't' ? &t : c == 'x' ? &v : NULL;

		if (!dst || util_parse_i64(optarg, 0, 100000000, dst) < 0) {
			fputs("usage: analysisbench [--streams N] [--clusters K] [--patterns P] [--stacks S] "
			      "[--replicates R] [--threads T] [--seed X]\n", stderr);
			return 2;
		}
		if (c == 'x')
			rng = (uint64_t)v * 0x9E3779B97F4A7C15ULL | 1;
	}
	if (r > 10000 || n < 2 || s < 1) {
		fputs("analysisbench: --replicates at most 10000, --streams at least 2, --stacks at least 1\n", stderr);
		return 2;
	}
	if (bench_match((size_t)p, (size_t)s, (int)t) || bench_excess((size_t)n, (size_t)k, (int)r, (int)t))
		return 1;
	printf("peak memory: %.0f MB\n", peak_mb());
	return 0;
}
