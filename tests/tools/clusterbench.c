/*
 * clusterbench: timing of the clusterer (make bench, clustering section).
 *
 *   clusterbench --patterns N [--len L] [--family F] [--method M] [--cut C] [--threads T] [--seed S]
 *       generates N call-stack patterns of average length about L (36) in
 *       families of about F (20) variants of one base path: every pattern
 *       starts with the same thread-start frames, ends in shared library and
 *       kernel frames, and in between follows its family's path with frames
 *       dropped, inserted (32-bit emulation blocks among them) or replaced by
 *       a frame of a similar name. Frame statistics come from a database of
 *       20,000 streams where the shared frames are common and the family
 *       frames rare. Then weights and hclust_patterns(), timed by phase; also
 *       how many families ended whole in one cluster. --write DIR saves the full
 *       matrix of 1 - Sim (DIR/dist.f64, every pair aligned) and the flat
 *       clusters (DIR/labels), for SciPy to check the clusters against.
 *
 *   clusterbench --dense N [--method M] [--write FILE] [--seed S]
 *       the linkage of a dense N-point matrix (distances between random points
 *       around 50 centres in 8 dimensions); --write saves the condensed matrix
 *       as little-endian doubles for numpy.fromfile(), to time SciPy on it.
 *
 * Prints one line of figures (time, peak RSS); exit status 0, or 1 on failure.
 */
#include "clusterer/hclust.h"
#include "clusterer/sim.h"
#include "common/util.h"
#include "tests/tools/benchutil.h"

#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define STREAMS 20000
#define MODULES 40

/* ---- a vocabulary of made-up but name-like words ---- */

static const char *const syl[] = { "get", "set", "lock", "wait", "read", "write", "file", "page", "fault",
				   "hash", "table", "init", "query", "attr", "kernel", "stack", "event",
				   "mutex", "alloc", "free", "open", "close", "send", "recv", "map", "load",
				   "parse", "render", "flush", "sync", "copy", "scan", "sort", "merge", "find",
				   "insert", "update", "delete", "create", "destroy" };
#define NSYL (sizeof(syl) / sizeof(syl[0]))
#define NWORDS 800

static char words[NWORDS][24];

static void make_words(void)
{
	size_t i;

	for (i = 0; i < NWORDS; i++) {
		const char *a = syl[i % NSYL], *b = syl[(i / NSYL + 7 * i) % NSYL];

		/* CamelCase-able words: first letter upper-cased by the caller */
		snprintf(words[i], sizeof(words[i]), "%s%s", a, i < NSYL ? "" : b);
	}
}

/* ---- frames and their statistics ---- */

struct gen {
	struct sim_frames *ft;
	uint32_t nframes;
	uint64_t *count;        /* n(f) by frame id (1-based) */
	size_t cap;
};

static int add_frame(struct gen *g, const char *name, uint64_t n)
{
	uint32_t id = ++g->nframes;

	if (id >= g->cap) {
		size_t nc = g->cap ? g->cap * 2 : 4096;
		uint64_t *ncnt = realloc(g->count, nc * sizeof(*ncnt));

		if (!ncnt)
			return -1;
		g->count = ncnt;
		g->cap = nc;
	}
	g->count[id] = n;
	if (sim_frames_add(g->ft, id, name, strlen(name)) < 0 || sim_frames_set_count(g->ft, id, n) < 0)
		return -1;
	return (int)id;
}

/* A function name of 2 to 4 words, CamelCase, in one of the modules. */
static void random_name(char *out, size_t size, unsigned module, const unsigned *w, size_t nw)
{
	size_t i, len;

	len = (size_t)snprintf(out, size, "mod%u.dll!", module);
	for (i = 0; i < nw && len + 26 < size; i++) {
		const char *s = words[w[i]];

		out[len++] = (char)(s[0] - 'a' + 'A');
		len += (size_t)snprintf(out + len, size - len, "%s", s + 1);
	}
}

static int new_family_frame(struct gen *g, unsigned module, uint64_t n, unsigned *w, size_t *nw)
{
	char name[160];
	size_t i;

	*nw = 2 + rnd() % 3;
	for (i = 0; i < *nw; i++)
		w[i] = (unsigned)(rnd() % NWORDS);
	random_name(name, sizeof(name), module, w, *nw);
	return add_frame(g, name, n);
}

/* ---- patterns ---- */

struct pats {
	uint32_t *frames;
	double *w;
	size_t *off;
	uint32_t *family;
	size_t n, nfam, total;
};

/* For the SciPy test: the full condensed matrix of 1 - Sim (every pair aligned) into DIR/dist.f64 as
 * little-endian doubles, and the flat cluster of each pattern into DIR/labels, one per line. */
static int write_oracle_input(const char *dir, struct sim_frames *ft, const struct sim_pattern *p, size_t n,
			      const struct hclust_clusters *cl)
{
	char path[4096];
	struct sim_ctx *ctx = sim_ctx_open(ft);
	FILE *f = NULL;
	size_t i, j;
	int rc = -1;

	if (!ctx)
		goto out;
	snprintf(path, sizeof(path), "%s/dist.f64", dir);
	if (!(f = fopen(path, "wb")))
		goto out;
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++) {
			double sim, d;

			if (sim_similarity(ctx, &p[i], &p[j], &sim) < 0)
				goto out;
			d = 1 - sim;
			if (fwrite(&d, sizeof(d), 1, f) != 1)
				goto out;
		}
	if (fclose(f) != 0) {
		f = NULL;
		goto out;
	}
	snprintf(path, sizeof(path), "%s/labels", dir);
	if (!(f = fopen(path, "w")))
		goto out;
	for (i = 0; i < n; i++)
		fprintf(f, "%u\n", (unsigned)cl->label[i]);
	rc = fclose(f) == 0 ? 0 : -1;
	f = NULL;
out:
	if (f)
		fclose(f);
	sim_ctx_free(ctx);
	if (rc < 0)
		fprintf(stderr, "clusterbench: cannot write the oracle's input into %s\n", dir);
	return rc;
}

static int cmd_patterns(size_t npat, double avglen, double famsize, const struct hclust_opts *o, const char *write)
{
	struct gen g = { NULL, 0, NULL, 0 };
	struct pats ps;
	struct sim_pattern *p = NULL;
	struct hclust *h = NULL;
	const struct hclust_clusters *cl;
	struct hclust_stats st;
	static const char *const roots[] = { "ntdll.dll!RtlUserThreadStart", "kernel32.dll!BaseThreadInitThunk",
					     "app.exe!WorkerThreadMain", "app.exe!RunLoop" };
	static const char *const wow[] = { "wow64.dll!Wow64SystemServiceEx", "wow64cpu.dll!CpupSyscallStub",
					   "wow64.dll!whNtQueryAttributesFile" };
	int rootid[4], wowid[3], rc = 1;
	uint32_t shared[300];
	size_t i, k, cap, whole = 0, fam;
	double t0, t_gen, t_w, t_fl;
	uint32_t *seen = NULL;

	memset(&ps, 0, sizeof(ps));
	make_words();
	t0 = now_s();
	g.ft = sim_frames_open();
	if (!g.ft)
		goto oom;
	sim_frames_set_streams(g.ft, STREAMS);
	for (i = 0; i < 4; i++)
		if ((rootid[i] = add_frame(&g, roots[i], STREAMS - 20 * i)) < 0)
			goto oom;
	for (i = 0; i < 3; i++)
		if ((wowid[i] = add_frame(&g, wow[i], 3000)) < 0)
			goto oom;
	/* shared library and kernel frames: common, many families end in a few of them */
	for (i = 0; i < 300; i++) {
		unsigned w[4];
		size_t nw;
		int id = new_family_frame(&g, (unsigned)(i % 6), 500 + rnd() % 8000, w, &nw);

		if (id < 0)
			goto oom;
		shared[i] = (uint32_t)id;
	}
	cap = (size_t)((double)npat * (avglen + 8));
	ps.frames = malloc(cap * sizeof(*ps.frames));
	ps.off = malloc((npat + 1) * sizeof(*ps.off));
	ps.family = malloc(npat * sizeof(*ps.family));
	if (!ps.frames || !ps.off || !ps.family)
		goto oom;
	ps.off[0] = 0;
	while (ps.n < npat) {
		uint32_t base[128], fw[128][4];
		size_t fwn[128], blen, nmid = (size_t)(avglen - 4 - 6 - 1) - 3 + rnd() % 7, nv, v;
		unsigned module = (unsigned)(rnd() % MODULES);

		/* the base path: roots, family frames, 6 shared frames at the leaf end */
		blen = 0;
		for (i = 0; i < 4; i++)
			base[blen++] = (uint32_t)rootid[i];
		for (i = 0; i < nmid; i++) {
			int id = new_family_frame(&g, module, 5 + rnd() % 300, fw[blen], &fwn[blen]);

			if (id < 0)
				goto oom;
			base[blen++] = (uint32_t)id;
			if (rnd() % 4 == 0)
				module = (unsigned)(rnd() % MODULES);
		}
		for (i = 0; i < 6; i++)
			base[blen++] = shared[rnd() % 300];
		/* family size: exponential around famsize */
		nv = 1 + (size_t)(-log(1 - unit()) * (famsize - 1));
		for (v = 0; v < nv && ps.n < npat; v++) {
			uint32_t *out = ps.frames + ps.off[ps.n];
			size_t len = 0;
			bool emu = v && rnd() % 5 == 0;

			for (k = 0; k < blen && len + 6 < 128; k++) {
				double r = unit();

				if (emu && k == blen - 7) {
					/* a 32-bit host: emulation frames before the kernel part */
					out[len++] = (uint32_t)wowid[0];
					out[len++] = (uint32_t)wowid[1];
					out[len++] = (uint32_t)wowid[2];
				}
				if (v && k >= 4 && r < 0.04)
					continue;
				if (v && k >= 4 && k < blen - 6 && r < 0.08) {
					/* a frame of a similar name: one word changed */
					unsigned w[4];
					char name[160];
					int id;

					memcpy(w, fw[k], sizeof(w));
					w[rnd() % fwn[k]] = (unsigned)(rnd() % NWORDS);
					random_name(name, sizeof(name), (unsigned)(rnd() % MODULES), w, fwn[k]);
					id = add_frame(&g, name, 5 + rnd() % 300);
					if (id < 0)
						goto oom;
					out[len++] = (uint32_t)id;
					continue;
				}
				out[len++] = base[k];
				if (v && k >= 4 && r > 0.97)
					out[len++] = shared[rnd() % 300];
			}
			ps.family[ps.n] = (uint32_t)ps.nfam;
			ps.off[ps.n + 1] = ps.off[ps.n] + len;
			ps.n++;
		}
		ps.nfam++;
	}
	ps.total = ps.off[ps.n];
	/* calls: along each pattern, g -> f in a good share of the streams of the rarer one */
	for (i = 0; i < ps.n; i++) {
		for (k = ps.off[i] + 1; k < ps.off[i + 1]; k++) {
			uint32_t a = ps.frames[k - 1], b = ps.frames[k];
			uint64_t m = g.count[a] < g.count[b] ? g.count[a] : g.count[b];

			if (sim_frames_set_calls(g.ft, a, b, (uint64_t)((double)m * (0.3 + 0.7 * unit()))) < 0)
				goto oom;
		}
	}
	t_gen = now_s() - t0;

	/* what a mining run does: weights, then clustering */
	t0 = now_s();
	ps.w = malloc((ps.total ? ps.total : 1) * sizeof(*ps.w));
	p = malloc(ps.n * sizeof(*p));
	if (!ps.w || !p)
		goto oom;
	for (i = 0; i < ps.n; i++) {
		p[i].frames = ps.frames + ps.off[i];
		p[i].w = ps.w + ps.off[i];
		p[i].len = ps.off[i + 1] - ps.off[i];
		sim_weights(g.ft, p[i].frames, p[i].len, ps.w + ps.off[i]);
	}
	t_w = now_s() - t0;
	h = hclust_open();
	if (!h)
		goto oom;
	t0 = now_s();
	t_fl = now_s();
	if (sim_frames_prepare(g.ft, o->threads) < 0)
		goto oom;
	t_fl = now_s() - t_fl;
	if (hclust_patterns(h, g.ft, p, ps.n, o, &cl) < 0) {
		fprintf(stderr, "clusterbench: %s\n", hclust_error(h));
		goto out;
	}
	t0 = now_s() - t0;      /* floors included */
	hclust_last_stats(h, &st);
	/* families found whole in one cluster */
	seen = calloc(ps.nfam, sizeof(*seen));
	if (!seen)
		goto oom;
	for (fam = 0; fam < ps.nfam; fam++)
		seen[fam] = UINT32_MAX;
	for (i = 0; i < ps.n; i++) {
		uint32_t f = ps.family[i];

		if (seen[f] == UINT32_MAX)
			seen[f] = cl->label[i];
		else if (seen[f] != cl->label[i])
			seen[f] = UINT32_MAX - 1;
	}
	for (fam = 0; fam < ps.nfam; fam++)
		whole += seen[fam] < UINT32_MAX - 1;
	printf("patterns %zu: clustered in %.2f s + weights %.2f s (sub floors %.2f, prepare %.2f, pairs %.2f, "
	       "linkage %.2f, medoids %.2f), %d threads, peak RSS %.0f MB; avg len %.1f, %u frames, %zu families (%zu whole), "
	       "%zu clusters; pairs: %llu candidates, %llu bounded, %llu aligned, %llu kept within the cut, "
	       "%llu beyond it (%.1f MB); %llu medoid alignments; %s linkage, cut %g (generated in %.2f s)\n",
	       ps.n, t0, t_w, t_fl, st.ms_prepare / 1e3, st.ms_pairs / 1e3, st.ms_linkage / 1e3, st.ms_medoids / 1e3,
	       st.threads, peak_mb(), (double)ps.total / (double)ps.n, (unsigned)g.nframes, ps.nfam, whole,
	       cl->nclusters, (unsigned long long)st.candidates, (unsigned long long)st.bounded,
	       (unsigned long long)st.aligned, (unsigned long long)st.kept, (unsigned long long)st.extended,
	       (double)st.extended * (double)sizeof(struct linkage_pair) * 2 / 1048576.0,
	       (unsigned long long)st.medoid_aligned, linkage_method_name(o->method), o->cut, t_gen);
	if (write && write_oracle_input(write, g.ft, p, ps.n, cl) < 0)
		goto out;
	rc = 0;
	goto out;
oom:
	fprintf(stderr, "clusterbench: out of memory (or a frame table error: %s)\n",
		g.ft ? sim_frames_error(g.ft) : "");
out:
	free(seen);
	hclust_free(h);
	free(p);
	free(ps.frames);
	free(ps.w);
	free(ps.off);
	free(ps.family);
	free(g.count);
	sim_frames_free(g.ft);
	return rc;
}

static int cmd_dense(size_t n, enum linkage_method m, const char *write)
{
	size_t nd = n * (n - 1) / 2, i, j, k, c;
	double *pts = malloc(n * 8 * sizeof(*pts)), *d = malloc((nd ? nd : 1) * sizeof(*d)), cen[50][8], t0;
	struct linkage_merge *z = malloc((n ? n : 1) * sizeof(*z));
	struct linkage *h = linkage_open();
	int rc = 1;

	if (!pts || !d || !z || !h) {
		fprintf(stderr, "clusterbench: out of memory\n");
		goto out;
	}
	for (c = 0; c < 50; c++)
		for (k = 0; k < 8; k++)
			cen[c][k] = unit() * 10;
	for (i = 0; i < n; i++) {
		c = rnd() % 50;
		for (k = 0; k < 8; k++)
			pts[i * 8 + k] = cen[c][k] + unit() * 2;
	}
	for (i = 0, k = 0; i < n; i++) {
		for (j = i + 1; j < n; j++, k++) {
			double s = 0;

			for (c = 0; c < 8; c++) {
				double e = pts[i * 8 + c] - pts[j * 8 + c];

				s += e * e;
			}
			d[k] = sqrt(s);
		}
	}
	if (write) {
		FILE *f = fopen(write, "wb");

		if (!f || fwrite(d, sizeof(*d), nd, f) != nd || fclose(f) != 0) {
			fprintf(stderr, "clusterbench: cannot write %s\n", write);
			goto out;
		}
	}
	t0 = now_s();
	if (linkage_dense(h, d, n, m, z) < 0) {
		fprintf(stderr, "clusterbench: %s\n", linkage_error(h));
		goto out;
	}
	t0 = now_s() - t0;
	printf("dense %zu points, %s linkage: %.2f s, peak RSS %.0f MB; last merge at %.6g\n", n,
	       linkage_method_name(m), t0, peak_mb(), n > 1 ? z[n - 2].dist : 0.0);
	rc = 0;
out:
	free(pts);
	free(d);
	free(z);
	linkage_free(h);
	return rc;
}

static int usage(void)
{
	fputs("usage: clusterbench --patterns N [--len L] [--family F] [--method M] [--cut C] [--threads T] [--seed S]\n"
	      "                    [--write DIR]\n"
	      "       clusterbench --dense N [--method M] [--write FILE] [--seed S]\n",
	      stderr);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "patterns", required_argument, NULL, 'p' }, { "dense", required_argument, NULL, 'd' },
		{ "len", required_argument, NULL, 'l' },      { "family", required_argument, NULL, 'f' },
		{ "method", required_argument, NULL, 'm' },   { "cut", required_argument, NULL, 'c' },
		{ "threads", required_argument, NULL, 't' },  { "seed", required_argument, NULL, 's' },
		{ "write", required_argument, NULL, 'w' },    { NULL, 0, NULL, 0 },
	};
	struct hclust_opts o = { LINKAGE_AVERAGE, 0.5, 0 };
	int64_t npat = -1, ndense = -1, v;
	double len = 36, fam = 20;
	const char *write = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (util_parse_i64(optarg, 1, 10000000, &npat) < 0)
				return usage();
			break;
		case 'd':
			if (util_parse_i64(optarg, 1, 100000, &ndense) < 0)
				return usage();
			break;
		case 'l':
			if (util_parse_double(optarg, &len) < 0 || len < 16 || len > 100)
				return usage();
			break;
		case 'f':
			if (util_parse_double(optarg, &fam) < 0 || fam < 1)
				return usage();
			break;
		case 'm':
			if (linkage_method_parse(optarg, &o.method) < 0)
				return usage();
			break;
		case 'c':
			if (util_parse_double(optarg, &o.cut) < 0)
				return usage();
			break;
		case 't':
			if (util_parse_i64(optarg, 0, 64, &v) < 0)
				return usage();
			o.threads = (int)v;
			break;
		case 's':
			if (util_parse_i64(optarg, 1, INT64_MAX, &v) < 0)
				return usage();
			rng = (uint64_t)v * 0x9E3779B97F4A7C15ULL | 1;
			break;
		case 'w':
			write = optarg;
			break;
		default:
			return usage();
		}
	}
	if (optind != argc || (npat < 0) == (ndense < 0))
		return usage();
	if (npat > 0)
		return cmd_patterns((size_t)npat, len, fam, &o, write);
	return cmd_dense((size_t)ndense, o.method, write);
}
