/*
 * bidebench: times the mining engine (miner/bide.h) on an SPMF file or on a
 * generated callstack database, and prints the number of patterns, the wall
 * time and the peak memory. A measuring tool for `make bench` and for tuning,
 * not a test.
 *
 *   bidebench (--closed | --maximal) (--minsup N | --minsup-rel F) [--threads N]
 *             [--no-seqs] [--out FILE] (SPMF_FILE | --gen-callstacks N [--distinct D] [--seed S])
 *
 * --minsup-rel is a fraction of the number of sequences (SPMF) or of the total
 * weight (generated). --out writes the patterns in SPMF's output form.
 *
 * Generated callstacks: four thread kinds, each entered through a prefix of
 * 24-31 frames whose first 6 are common to all (clone, start_thread, ...);
 * below it an implicit random call tree (a node's frame derives from its path;
 * a third of the frames come from 60 utility functions such as locks and
 * allocators, the rest from 20,000); one node in ten starts a recursion (a
 * pair of frames repeated 1-4 times). D distinct stacks (default 50,000) of
 * average depth about 36 are drawn by random walks from the root; the N
 * sequences pick stacks with a skewed distribution (a few hot ones) and
 * carry log-uniform costs from 1 us to 100 ms (in ns).
 */
#include "common/util.h"
#include "miner/bide.h"
#include "miner/spmf.h"

#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

struct out {
	FILE *f;
	size_t n, maxlen;
};

static int emit(void *ctx, const uint32_t *items, size_t len, uint64_t support, const uint32_t *seqs, size_t ns)
{
	struct out *o = ctx;

	(void)seqs;
	(void)ns;
	o->n++;
	if (len > o->maxlen)
		o->maxlen = len;
	return o->f ? spmf_write_pattern(o->f, items, len, support) < 0 : 0;
}

static double peak_mb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_maxrss / 1024.0;
}

/* ---- the callstack generator ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next64(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double unif(void)
{
	return (double)(next64() >> 11) / 9007199254740992.0;
}

static uint64_t hmix(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL);

	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ULL;
	h ^= h >> 32;
	return h;
}

#define GEN_MAXDEPTH 96
#define N_COMMON 6
#define N_UTIL 60
#define N_FRAMES 20000

/* One random walk from the root: a callstack, outermost frame first. Returns its depth. */
static uint32_t gen_stack(uint32_t *s)
{
	uint32_t kind = (uint32_t)(next64() % 4), len = 0, plen = 24 + (uint32_t)(hmix(kind, 1) % 8);
	uint64_t node = hmix(kind, 7);

	for (; len < N_COMMON; len++)
		s[len] = 1 + len;
	for (; len < plen; len++)
		s[len] = 100 + kind * 32 + len;
	while (len < GEN_MAXDEPTH - 14) {
		uint64_t h;
		uint32_t c = 0;

		/* Stop with probability 1/5 per level. */
		if (next64() % 5 == 0 && len > plen)
			break;
		while (c < 7 && next64() % 2)
			c++;
		node = hmix(node, c);
		h = hmix(node, 99);
		if (h % 10 == 0) {
			uint32_t f = 1000 + (uint32_t)(h >> 8) % N_FRAMES, g = 1000 + (uint32_t)(h >> 24) % N_FRAMES;

			for (uint32_t r = 1 + (uint32_t)(h >> 40) % 4; r-- && len + 2 < GEN_MAXDEPTH;) {
				s[len++] = f;
				s[len++] = g;
			}
		} else if (h % 3 == 0) {
			s[len++] = 500 + (uint32_t)(h >> 8) % N_UTIL;
		} else {
			s[len++] = 1000 + (uint32_t)(h >> 8) % N_FRAMES;
		}
	}
	return len;
}

struct gen {
	uint32_t *frames;       /* distinct stacks, concatenated */
	size_t *off;
	const uint32_t **seqs;
	uint32_t *lens;
	uint64_t *w;
	size_t nd;
};

static int gen_callstacks(struct gen *g, size_t n, size_t distinct, struct seqdb *db, double *avg_depth)
{
	size_t cap = distinct * GEN_MAXDEPTH, slots = 1, tries = 0, total = 0;
	uint32_t *slot;

	while (slots < 2 * distinct)
		slots *= 2;
	g->frames = malloc(cap * sizeof(*g->frames));
	g->off = malloc((distinct + 1) * sizeof(*g->off));
	slot = calloc(slots, sizeof(*slot));
	g->seqs = malloc(n * sizeof(*g->seqs));
	g->lens = malloc(n * sizeof(*g->lens));
	g->w = malloc(n * sizeof(*g->w));
	if (!g->frames || !g->off || !slot || !g->seqs || !g->lens || !g->w)
		return -1;
	g->off[0] = 0;
	g->nd = 0;
	while (g->nd < distinct && tries++ < 50 * distinct) {
		uint32_t *s = g->frames + g->off[g->nd], len = gen_stack(s);
		uint64_t h = 7;
		size_t i;

		for (uint32_t j = 0; j < len; j++)
			h = hmix(h, s[j]);
		for (i = h & (slots - 1); slot[i]; i = (i + 1) & (slots - 1)) {
			size_t d = slot[i] - 1;

			if (g->off[d + 1] - g->off[d] == len && !memcmp(g->frames + g->off[d], s, len * sizeof(*s)))
				break;
		}
		if (slot[i])
			continue;
		slot[i] = (uint32_t)++g->nd;
		g->off[g->nd] = g->off[g->nd - 1] + len;
	}
	free(slot);
	for (size_t i = 0; i < n; i++) {
		/* Skewed: u^3 puts half of the events on the first 12% of the stacks. */
		double u = unif();
		size_t d = (size_t)(u * u * u * (double)g->nd);

		if (i < g->nd)
			d = i;  /* every distinct stack occurs at least once when n allows */
		g->seqs[i] = g->frames + g->off[d];
		g->lens[i] = (uint32_t)(g->off[d + 1] - g->off[d]);
		g->w[i] = (uint64_t)exp(log(1e3) + unif() * (log(1e8) - log(1e3)));
		total += g->lens[i];
	}
	*avg_depth = n ? (double)total / (double)n : 0;
	db->seqs = g->seqs;
	db->lens = g->lens;
	db->weights = g->w;
	db->n = n;
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: bidebench (--closed | --maximal) (--minsup N | --minsup-rel F) [--threads N]\n"
			"                 [--no-seqs] [--out FILE] (SPMF_FILE | --gen-callstacks N [--distinct D] "
			"[--seed S])\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "closed", no_argument, NULL, 'c' },       { "maximal", no_argument, NULL, 'm' },
		{ "minsup", required_argument, NULL, 's' }, { "minsup-rel", required_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 't' }, { "no-seqs", no_argument, NULL, 'q' },
		{ "out", required_argument, NULL, 'o' },    { "gen-callstacks", required_argument, NULL, 'g' },
		{ "distinct", required_argument, NULL, 'd' }, { "seed", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 }
	};
	struct bide_opts bo = { .mode = BIDE_CLOSED, .threads = 2 };
	struct bide_stats st;
	struct out o = { NULL, 0, 0 };
	struct spmf *sp = NULL;
	struct gen g;
	struct seqdb db;
	struct bide *b;
	int64_t v, t0;
	double rel = -1, avg = 0, load_mb, load_s;
	int64_t abs_sup = -1, gen_n = -1, distinct = 50000;
	bool mode_set = false;
	const char *out = NULL;
	uint64_t total = 0;
	int c, rc = 0;

	memset(&g, 0, sizeof(g));
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c': bo.mode = BIDE_CLOSED; mode_set = true; break;
		case 'm': bo.mode = BIDE_MAXIMAL; mode_set = true; break;
		case 's':
			if (util_parse_i64(optarg, 1, INT64_MAX, &abs_sup) < 0)
				return usage();
			break;
		case 'r':
			if (util_parse_double(optarg, &rel) < 0 || rel <= 0 || rel > 1)
				return usage();
			break;
		case 't':
			if (util_parse_i64(optarg, 1, 256, &v) < 0)
				return usage();
			bo.threads = (int)v;
			break;
		case 'q': bo.no_seqs = 1; break;
		case 'o': out = optarg; break;
		case 'g':
			if (util_parse_i64(optarg, 1, 100000000, &gen_n) < 0)
				return usage();
			break;
		case 'd':
			if (util_parse_i64(optarg, 1, 100000000, &distinct) < 0)
				return usage();
			break;
		case 'S':
			if (util_parse_i64(optarg, 1, INT64_MAX, &v) < 0)
				return usage();
			rng = (uint64_t)v;
			break;
		default: return usage();
		}
	}
	if (!mode_set || (abs_sup < 0) == (rel < 0) || (gen_n < 0) == (optind + 1 != argc))
		return usage();
	t0 = util_now_mono_ns();
	if (gen_n > 0) {
		if (gen_callstacks(&g, (size_t)gen_n, (size_t)distinct, &db, &avg) < 0) {
			fprintf(stderr, "bidebench: out of memory\n");
			return 1;
		}
		printf("generated %zu callstacks, %zu distinct, average depth %.1f\n", db.n, g.nd, avg);
	} else {
		sp = spmf_open();
		if (!sp || spmf_read(sp, argv[optind], &db) < 0) {
			fprintf(stderr, "bidebench: %s\n", sp ? spmf_error(sp) : "out of memory");
			spmf_free(sp);
			return 1;
		}
	}
	load_s = (double)(util_now_mono_ns() - t0) / 1e9;
	load_mb = peak_mb();
	for (size_t i = 0; i < db.n; i++)
		total += db.weights[i];
	bo.minsup = abs_sup > 0 ? (uint64_t)abs_sup : (uint64_t)ceil(rel * (double)total - 1e-9);
	if (!bo.minsup)
		bo.minsup = 1;
	if (out && !(o.f = fopen(out, "w"))) {
		perror(out);
		return 1;
	}
	b = bide_open();
	if (!b || bide_mine(b, &db, &bo, emit, &o) < 0) {
		fprintf(stderr, "bidebench: %s\n", b ? bide_error(b) : "out of memory");
		rc = 1;
	} else {
		bide_last_stats(b, &st);
		printf("%s, minsup %llu of %llu, %d threads: %zu patterns (longest %zu) in %.3f s "
		       "(preparing %.3f s: %llu sequences, %llu items kept); load %.3f s; peak RSS %.1f MB "
		       "(%.1f MB after load); %llu projections, %llu pruned by BackScan\n",
		       bo.mode == BIDE_CLOSED ? "closed" : "maximal", (unsigned long long)bo.minsup,
		       (unsigned long long)total, bo.threads, o.n, o.maxlen, st.ms / 1000, st.prep_ms / 1000,
		       (unsigned long long)st.sequences, (unsigned long long)st.items, load_s, peak_mb(), load_mb,
		       (unsigned long long)st.projections, (unsigned long long)st.backscan_pruned);
	}
	if (o.f && fclose(o.f) != 0) {
		perror(out);
		rc = 1;
	}
	bide_free(b);
	spmf_free(sp);
	free(g.frames);
	free(g.off);
	free(g.seqs);
	free(g.lens);
	free(g.w);
	return rc;
}
