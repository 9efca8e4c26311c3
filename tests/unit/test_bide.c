/*
 * Tests of the mining engine (miner/bide.h) and the SPMF format (miner/spmf.h):
 * the BIDE paper's example with its known closed and maximal patterns; many
 * small random databases (repeated items, as recursion makes them; weights)
 * against a brute-force miner written here from the definitions; weighted mode
 * against count mode on the database with each sequence repeated weight
 * times; one thread against two; the database prepared on 1, 2 and 3
 * threads (many duplicates, none); the options and errors; SPMF parsing and
 * its refusals; and the real SPMF files (consistency of closed and maximal,
 * exact supports and supporting sequences of a sample).
 *
 * Usage: test_bide [DATA_DIR]  (else $SM_DATA, else ../shared/data)
 */
#include "miner/bide.h"
#include "miner/spmf.h"
#include "tests/unit/check.h"

#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

static const char *data_dir = "../shared/data";

/* ---- collecting results ---- */

struct rpat {
	size_t it, len;         /* items at res.items[it..it+len) */
	size_t sq, ns;          /* supporting sequences at res.seqs[sq..sq+ns) */
	uint64_t sup;
};

struct res {
	struct rpat *p;
	size_t n, cap;
	uint32_t *items, *seqs;
	size_t nitems, capitems, nseqs, capseqs;
	size_t calls, stop_at;  /* the emit callback returns 1 on call number stop_at (0: never) */
	bool unsorted;          /* some seqs list was not strictly ascending */
};

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q) {
		fprintf(stderr, "out of memory\n");
		abort();
	}
	return q;
}

static void res_add(struct res *r, const uint32_t *items, size_t len, uint64_t sup, const uint32_t *seqs,
		    size_t ns)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 64;
		r->p = xrealloc(r->p, r->cap * sizeof(*r->p));
	}
	while (r->nitems + len > r->capitems) {
		r->capitems = r->capitems ? 2 * r->capitems : 256;
		r->items = xrealloc(r->items, r->capitems * sizeof(*r->items));
	}
	while (r->nseqs + ns > r->capseqs) {
		r->capseqs = r->capseqs ? 2 * r->capseqs : 256;
		r->seqs = xrealloc(r->seqs, r->capseqs * sizeof(*r->seqs));
	}
	if (len)
		memcpy(r->items + r->nitems, items, len * sizeof(*items));
	if (ns)
		memcpy(r->seqs + r->nseqs, seqs, ns * sizeof(*seqs));
	for (size_t i = 1; i < ns; i++)
		if (seqs[i - 1] >= seqs[i])
			r->unsorted = true;
	r->p[r->n++] = (struct rpat){ r->nitems, len, r->nseqs, ns, sup };
	r->nitems += len;
	r->nseqs += ns;
}

static int collect(void *ctx, const uint32_t *items, size_t len, uint64_t sup, const uint32_t *seqs, size_t ns)
{
	struct res *r = ctx;

	r->calls++;
	if (r->stop_at && r->calls == r->stop_at)
		return 1;
	res_add(r, items, len, sup, seqs, ns);
	return 0;
}

static void res_free(struct res *r)
{
	free(r->p);
	free(r->items);
	free(r->seqs);
	memset(r, 0, sizeof(*r));
}

static const struct res *cmp_res;

static int rpat_cmp(const void *a, const void *b)
{
	const struct rpat *x = a, *y = b;
	const uint32_t *xi = cmp_res->items + x->it, *yi = cmp_res->items + y->it;

	for (size_t i = 0; i < x->len && i < y->len; i++)
		if (xi[i] != yi[i])
			return xi[i] < yi[i] ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

static void res_sort(struct res *r)
{
	cmp_res = r;
	if (r->n)
		qsort(r->p, r->n, sizeof(*r->p), rpat_cmp);
}

/* Same patterns with the same supports (and the same supporting sequences when with_seqs). Prints the first
 * difference. */
static bool res_equal(struct res *a, struct res *b, bool with_seqs, const char *what)
{
	res_sort(a);
	res_sort(b);
	if (a->n != b->n) {
		fprintf(stderr, "  %s: %zu patterns, expected %zu\n", what, a->n, b->n);
		return false;
	}
	for (size_t i = 0; i < a->n; i++) {
		const struct rpat *x = &a->p[i], *y = &b->p[i];

		if (x->len != y->len || memcmp(a->items + x->it, b->items + y->it, x->len * sizeof(uint32_t)) ||
		    x->sup != y->sup ||
		    (with_seqs && (x->ns != y->ns ||
				   memcmp(a->seqs + x->sq, b->seqs + y->sq, x->ns * sizeof(uint32_t))))) {
			fprintf(stderr, "  %s: pattern %zu differs (len %zu/%zu, sup %llu/%llu, nseqs %zu/%zu)\n",
				what, i, x->len, y->len, (unsigned long long)x->sup, (unsigned long long)y->sup,
				x->ns, y->ns);
			return false;
		}
	}
	return true;
}

/* "ABC:4" lines, sorted, for the letter examples (1 = A). */
static char *res_letters(struct res *r)
{
	static char out[1024];
	size_t o = 0;

	res_sort(r);
	out[0] = '\0';
	for (size_t i = 0; i < r->n; i++) {
		for (size_t j = 0; j < r->p[i].len; j++)
			out[o++] = (char)('A' + r->items[r->p[i].it + j] - 1);
		o += (size_t)snprintf(out + o, sizeof(out) - o, ":%llu%s", (unsigned long long)r->p[i].sup,
				      i + 1 < r->n ? " " : "");
	}
	return out;
}

static int mine(const struct seqdb *db, enum bide_mode mode, uint64_t minsup, int threads, struct res *r)
{
	struct bide *b = bide_open();
	struct bide_opts o = { .mode = mode, .minsup = minsup, .threads = threads };
	int rc;

	rc = bide_mine(b, db, &o, collect, r);
	if (rc < 0)
		fprintf(stderr, "  bide_mine: %s\n", bide_error(b));
	bide_free(b);
	return rc;
}

/* ---- databases ---- */

#define MAXN 4096

struct tdb {
	uint32_t *s[MAXN];
	uint32_t len[MAXN];
	uint64_t w[MAXN];
	size_t n;
	struct seqdb db;
};

static void tdb_add(struct tdb *t, const uint32_t *s, size_t len, uint64_t w)
{
	t->s[t->n] = xrealloc(NULL, len * sizeof(*s));
	if (len)
		memcpy(t->s[t->n], s, len * sizeof(*s));
	t->len[t->n] = (uint32_t)len;
	t->w[t->n] = w;
	t->n++;
	t->db = (struct seqdb){ (const uint32_t *const *)t->s, t->len, t->w, t->n };
}

static void tdb_letters(struct tdb *t, const char *const *seqs, size_t n)
{
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < n; i++) {
		uint32_t s[64];
		size_t len = strlen(seqs[i]);

		for (size_t j = 0; j < len; j++)
			s[j] = (uint32_t)(seqs[i][j] - 'A' + 1);
		tdb_add(t, s, len, 1);
	}
}

static void tdb_free(struct tdb *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->s[i]);
	t->n = 0;
}

/* ---- brute force, from the definitions ---- */

static bool is_subseq(const uint32_t *p, size_t lp, const uint32_t *s, size_t ls)
{
	size_t i = 0;

	for (size_t j = 0; j < ls && i < lp; j++)
		if (s[j] == p[i])
			i++;
	return i == lp;
}

#define BL 12   /* longest sequence the brute force takes */

struct cand {
	uint32_t len, it[BL];
};

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	for (uint32_t i = 0; i < x->len && i < y->len; i++)
		if (x->it[i] != y->it[i])
			return x->it[i] < y->it[i] ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Every distinct non-empty subsequence of every sequence; support; then the closed or maximal ones. */
static void brute(const struct seqdb *db, enum bide_mode mode, uint64_t minsup, struct res *out)
{
	struct cand *c = NULL;
	size_t nc = 0, cap = 0, nf = 0;
	uint64_t *sup;
	size_t *freq;

	for (size_t i = 0; i < db->n; i++) {
		uint32_t len = db->lens[i];

		for (uint32_t mask = 1; mask < (1u << len); mask++) {
			struct cand x = { 0, { 0 } };

			for (uint32_t j = 0; j < len; j++)
				if (mask & (1u << j))
					x.it[x.len++] = db->seqs[i][j];
			if (nc == cap) {
				cap = cap ? 2 * cap : 1024;
				c = xrealloc(c, cap * sizeof(*c));
			}
			c[nc++] = x;
		}
	}
	qsort(c, nc, sizeof(*c), cand_cmp);
	{
		size_t u = 0;

		for (size_t i = 0; i < nc; i++)
			if (!u || cand_cmp(&c[u - 1], &c[i]))
				c[u++] = c[i];
		nc = u;
	}
	sup = xrealloc(NULL, nc * sizeof(*sup));
	freq = xrealloc(NULL, nc * sizeof(*freq));
	for (size_t i = 0; i < nc; i++) {
		sup[i] = 0;
		for (size_t j = 0; j < db->n; j++)
			if (is_subseq(c[i].it, c[i].len, db->seqs[j], db->lens[j]))
				sup[i] += db->weights[j];
		if (sup[i] >= minsup)
			freq[nf++] = i;
	}
	for (size_t a = 0; a < nf; a++) {
		const struct cand *p = &c[freq[a]];
		bool keep = true;
		uint32_t seqs[MAXN];
		size_t ns = 0;

		for (size_t b = 0; b < nf && keep; b++) {
			const struct cand *q = &c[freq[b]];

			if (q->len > p->len && is_subseq(p->it, p->len, q->it, q->len) &&
			    (mode == BIDE_MAXIMAL || sup[freq[b]] == sup[freq[a]]))
				keep = false;
		}
		if (!keep)
			continue;
		for (size_t j = 0; j < db->n; j++)
			if (is_subseq(p->it, p->len, db->seqs[j], db->lens[j]))
				seqs[ns++] = (uint32_t)j;
		res_add(out, p->it, p->len, sup[freq[a]], seqs, ns);
	}
	free(c);
	free(sup);
	free(freq);
}

/* ---- random databases ---- */

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)((rng_state >> 16) % n);
}

/* Items far apart, with 0 and UINT32_MAX, so that the engine's renumbering is exercised. */
static const uint32_t alphabet[5] = { 7, 0, 4294967295u, 42, 1000000 };

/* 2-8 sequences of 0-8 items over 3-5 items; half of the databases callstack-like (a shared outer part,
 * then a tail with a repeated pair, as recursion makes). weighted: weights 0-3. */
static void random_db(struct tdb *t, bool weighted)
{
	uint32_t na = 3 + rnd(3), n = 2 + rnd(7), base[8];
	bool stacky = rnd(2);

	memset(t, 0, sizeof(*t));
	for (int i = 0; i < 8; i++)
		base[i] = alphabet[rnd(na)];
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s[8], len = 0, want = rnd(9);

		if (stacky) {
			uint32_t shared = rnd(want + 1), x = alphabet[rnd(na)], y = alphabet[rnd(na)];

			for (; len < shared; len++)
				s[len] = base[len];
			while (len < want) {
				s[len] = (len - shared) % 2 ? y : x;
				len++;
				if (rnd(3) == 0)
					x = alphabet[rnd(na)];
			}
		} else {
			for (; len < want; len++)
				s[len] = alphabet[rnd(na)];
		}
		tdb_add(t, s, len, weighted ? rnd(4) : 1);
	}
}

static uint64_t total_weight(const struct tdb *t)
{
	uint64_t w = 0;

	for (size_t i = 0; i < t->n; i++)
		w += t->w[i];
	return w;
}

/* ---- tests ---- */

/* The BIDE paper's example (Wang & Han, table 1): CAABC, ABCB, CABC, ABBCA at minimum support 2. */
static const char *const paper[] = { "CAABC", "ABCB", "CABC", "ABBCA" };

static void test_paper_closed(void)
{
	struct tdb t;

	tdb_letters(&t, paper, 4);
	for (int threads = 1; threads <= 2; threads++) {
		struct res r = { 0 };

		CHECK_INT(mine(&t.db, BIDE_CLOSED, 2, threads, &r), 0);
		CHECK_STR(res_letters(&r), "AA:2 ABB:2 ABC:4 CA:3 CABC:2 CB:3");
		/* ABC is in all four; CABC in CAABC and CABC. */
		for (size_t i = 0; i < r.n; i++) {
			if (r.p[i].len == 3 && r.items[r.p[i].it + 2] == 3) {
				CHECK_INT(r.p[i].ns, 4);
				CHECK_INT(r.seqs[r.p[i].sq + 3], 3);
			}
			if (r.p[i].len == 4) {
				CHECK_INT(r.p[i].ns, 2);
				CHECK_INT(r.seqs[r.p[i].sq], 0);
				CHECK_INT(r.seqs[r.p[i].sq + 1], 2);
			}
		}
		CHECK(!r.unsorted);
		res_free(&r);
	}
	tdb_free(&t);
}

static void test_paper_maximal(void)
{
	struct tdb t;

	tdb_letters(&t, paper, 4);
	for (int threads = 1; threads <= 2; threads++) {
		struct res r = { 0 };

		/* ABC, CA, CB are inside CABC; AA (only CAABC and ABBCA) and ABB (ABCB, ABBCA) extend nowhere. */
		CHECK_INT(mine(&t.db, BIDE_MAXIMAL, 2, threads, &r), 0);
		CHECK_STR(res_letters(&r), "AA:2 ABB:2 CABC:2");
		res_free(&r);
	}
	{
		struct res r = { 0 };

		/* At 3: the frequent patterns are A B C AB AC BC CA CB ABC (and BB? no: 2). */
		CHECK_INT(mine(&t.db, BIDE_MAXIMAL, 3, 1, &r), 0);
		CHECK_STR(res_letters(&r), "ABC:4 CA:3 CB:3");
		res_free(&r);
	}
	tdb_free(&t);
}

/* Options: max_len, max_patterns, a consumer that stops, bad minsup, empty database, no_seqs. */
static void test_options(void)
{
	struct tdb t;
	struct bide *b = bide_open();
	struct bide_opts o = { .mode = BIDE_CLOSED, .minsup = 2, .threads = 1 };
	struct bide_stats st;
	struct res r = { 0 };
	struct seqdb empty = { NULL, NULL, NULL, 0 };

	tdb_letters(&t, paper, 4);
	/* Only patterns that are truly closed: ABB, ABC, CABC are cut off, AB (inside ABC) is not closed. */
	o.max_len = 2;
	for (o.threads = 1; o.threads <= 2; o.threads++) {
		CHECK_INT(bide_mine(b, &t.db, &o, collect, &r), 0);
		CHECK_STR(res_letters(&r), "AA:2 CA:3 CB:3");
		res_free(&r);
	}
	o.threads = 1;

	o.max_len = 0;
	o.max_patterns = 2;
	CHECK_INT(bide_mine(b, &t.db, &o, collect, &r), -1);
	CHECK_STR(bide_error(b), "more than 2 patterns (the limit): raise the threshold");
	CHECK_INT(r.n, 2);
	bide_last_stats(b, &st);
	CHECK_INT(st.patterns, 2);
	res_free(&r);

	o.max_patterns = 0;
	o.threads = 2;
	r.stop_at = 1;
	CHECK_INT(bide_mine(b, &t.db, &o, collect, &r), -1);
	CHECK_STR(bide_error(b), "stopped by the pattern consumer");
	CHECK_INT(r.calls, 1);
	CHECK_INT(r.n, 0);
	res_free(&r);

	o.minsup = 0;
	CHECK_INT(bide_mine(b, &t.db, &o, collect, &r), -1);
	CHECK_STR(bide_error(b), "minsup must be at least 1");

	o.minsup = 1;
	CHECK_INT(bide_mine(b, &empty, &o, collect, &r), 0);
	CHECK_STR(bide_error(b), "");
	CHECK_INT(r.n, 0);

	o.minsup = 5;   /* above every support */
	CHECK_INT(bide_mine(b, &t.db, &o, collect, &r), 0);
	CHECK_INT(r.n, 0);

	o.minsup = 4;
	o.no_seqs = 1;
	CHECK_INT(bide_mine(b, &t.db, &o, collect, &r), 0);
	CHECK_STR(res_letters(&r), "ABC:4");
	CHECK_INT(r.p[0].ns, 0);
	bide_last_stats(b, &st);
	CHECK_INT(st.patterns, 1);
	CHECK(st.projections > 0);
	res_free(&r);
	bide_free(b);
	tdb_free(&t);
}

/* Identical sequences are merged inside the engine: supports add up and every copy is listed. */
static void test_duplicates(void)
{
	static const char *const seqs[] = { "ABC", "XABC", "ABC", "B", "ABC", "AXBC" };
	struct tdb t;
	struct res r = { 0 };

	tdb_letters(&t, seqs, 6);
	t.w[0] = 10;
	t.w[2] = 0;
	t.w[4] = 5;
	CHECK_INT(mine(&t.db, BIDE_MAXIMAL, 3, 1, &r), 0);
	/* Support of ABC: 10 + 1 + 0 + 5 + 1; X occurs in 2 sequences of weight 1 only. */
	CHECK_STR(res_letters(&r), "ABC:17");
	CHECK_INT(r.p[0].ns, 5);
	CHECK_INT(r.seqs[r.p[0].sq + 2], 2);
	CHECK_INT(r.seqs[r.p[0].sq + 4], 5);
	CHECK(!r.unsorted);
	res_free(&r);
	tdb_free(&t);
}

static void random_round(bool weighted, int *bad)
{
	struct tdb t;
	uint64_t total, minsup;
	uint64_t seed = rng_state;

	random_db(&t, weighted);
	total = total_weight(&t);
	minsup = 1 + rnd((uint32_t)(total > 1 ? total : 1));
	for (int mode = BIDE_CLOSED; mode <= BIDE_MAXIMAL; mode++) {
		struct res want = { 0 }, got1 = { 0 }, got2 = { 0 };
		char what[96];

		snprintf(what, sizeof(what), "%s %s seed %llx minsup %llu", weighted ? "weighted" : "count",
			 mode == BIDE_CLOSED ? "closed" : "maximal", (unsigned long long)seed,
			 (unsigned long long)minsup);
		brute(&t.db, mode, minsup, &want);
		if (mine(&t.db, mode, minsup, 1, &got1) < 0 || mine(&t.db, mode, minsup, 2, &got2) < 0 ||
		    !res_equal(&got1, &want, true, what) || !res_equal(&got2, &got1, true, what) || got1.unsorted)
			(*bad)++;
		res_free(&want);
		res_free(&got1);
		res_free(&got2);
	}
	tdb_free(&t);
}

static void test_random_count(void)
{
	int bad = 0;

	for (int i = 0; i < 400 && bad < 3; i++)
		random_round(false, &bad);
	CHECK_INT(bad, 0);
}

static void test_random_weighted(void)
{
	int bad = 0;

	for (int i = 0; i < 400 && bad < 3; i++)
		random_round(true, &bad);
	CHECK_INT(bad, 0);
}

/* Weighted mode with integer weights == count mode with each sequence repeated weight times. */
static void test_weights_as_copies(void)
{
	int bad = 0;

	for (int i = 0; i < 300 && bad < 3; i++) {
		struct tdb t, x;
		uint64_t total, minsup;

		random_db(&t, true);
		memset(&x, 0, sizeof(x));
		for (size_t j = 0; j < t.n; j++)
			for (uint64_t c = 0; c < t.w[j]; c++)
				tdb_add(&x, t.s[j], t.len[j], 1);
		total = total_weight(&t);
		minsup = 1 + rnd((uint32_t)(total > 1 ? total : 1));
		for (int mode = BIDE_CLOSED; mode <= BIDE_MAXIMAL; mode++) {
			struct res a = { 0 }, c = { 0 };

			if (mine(&t.db, mode, minsup, 1, &a) < 0 || mine(&x.db, mode, minsup, 1, &c) < 0 ||
			    !res_equal(&a, &c, false, "weights as copies"))
				bad++;
			res_free(&a);
			res_free(&c);
		}
		tdb_free(&t);
		tdb_free(&x);
	}
	CHECK_INT(bad, 0);
}

/* Every maximal pattern is closed, and no maximal pattern is inside another one. */
/* Order of pattern x of a and pattern y of b, as rpat_cmp. */
static int pat_cmp(const struct res *a, const struct rpat *x, const struct res *b, const struct rpat *y)
{
	const uint32_t *xi = a->items + x->it, *yi = b->items + y->it;

	for (size_t k = 0; k < x->len && k < y->len; k++)
		if (xi[k] != yi[k])
			return xi[k] < yi[k] ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

static void check_maximal_vs_closed(struct res *mx, struct res *cl, int *bad)
{
	size_t j = 0;

	res_sort(mx);
	res_sort(cl);
	for (size_t i = 0; i < mx->n; i++) {
		const struct rpat *p = &mx->p[i];

		while (j < cl->n && pat_cmp(cl, &cl->p[j], mx, p) < 0)
			j++;
		if (j == cl->n || pat_cmp(cl, &cl->p[j], mx, p) != 0 || cl->p[j].sup != p->sup) {
			if (*bad < 3)
				fprintf(stderr, "  maximal pattern %zu is not closed\n", i);
			(*bad)++;
		}
		for (size_t o = 0; o < mx->n; o++) {
			const struct rpat *q = &mx->p[o];

			if (q->len > p->len && is_subseq(mx->items + p->it, p->len, mx->items + q->it, q->len)) {
				if (*bad < 3)
					fprintf(stderr, "  maximal pattern %zu inside pattern %zu\n", i, o);
				(*bad)++;
			}
		}
	}
}

static void test_random_maximal_closed(void)
{
	int bad = 0;

	for (int i = 0; i < 300; i++) {
		struct tdb t;
		struct res mx = { 0 }, cl = { 0 };
		uint64_t total, minsup;

		random_db(&t, i % 2);
		total = total_weight(&t);
		minsup = 1 + rnd((uint32_t)(total > 1 ? total : 1));
		if (mine(&t.db, BIDE_MAXIMAL, minsup, 1, &mx) < 0 || mine(&t.db, BIDE_CLOSED, minsup, 1, &cl) < 0)
			bad++;
		check_maximal_vs_closed(&mx, &cl, &bad);
		res_free(&mx);
		res_free(&cl);
		tdb_free(&t);
	}
	CHECK_INT(bad, 0);
}

/* Bigger random callstack-like databases (too big for the brute force): one thread == two threads, and the
 * maximal/closed relations. */
static void test_random_big_threads(void)
{
	int bad = 0;

	for (int i = 0; i < 20; i++) {
		struct tdb t;
		uint32_t base[40];
		struct res a = { 0 }, b = { 0 }, mx = { 0 }, cl = { 0 };

		memset(&t, 0, sizeof(t));
		for (int j = 0; j < 40; j++)
			base[j] = 1 + rnd(30);
		for (int s = 0; s < 300; s++) {
			uint32_t seq[60], len = 0, shared = 5 + rnd(20), tail = rnd(15);

			for (; len < shared; len++)
				seq[len] = base[len];
			for (uint32_t j = 0; j < tail; j++, len++)
				seq[len] = rnd(4) ? 1 + rnd(30) : seq[len - 2];
			tdb_add(&t, seq, len, 1 + rnd(1000));
		}
		{
			uint64_t minsup = 5000 + rnd(20000);

			if (mine(&t.db, BIDE_MAXIMAL, minsup, 1, &mx) < 0 || mine(&t.db, BIDE_CLOSED, minsup, 1, &cl) < 0 ||
			    mine(&t.db, BIDE_MAXIMAL, minsup, 2, &a) < 0 || mine(&t.db, BIDE_CLOSED, minsup, 2, &b) < 0 ||
			    !res_equal(&a, &mx, true, "maximal threads") || !res_equal(&b, &cl, true, "closed threads"))
				bad++;
			check_maximal_vs_closed(&mx, &cl, &bad);
		}
		res_free(&a);
		res_free(&b);
		res_free(&mx);
		res_free(&cl);
		tdb_free(&t);
	}
	CHECK_INT(bad, 0);
}

/* ---- preparation on several threads ---- */

/* A database of n sequences (pointers into one block or elsewhere), for the preparation tests. */
struct bigdb {
	uint32_t *items, *lens;
	const uint32_t **seqs;
	uint64_t *w;
	struct seqdb db;
};

static void bigdb_alloc(struct bigdb *g, size_t n, size_t nitems)
{
	g->items = xrealloc(NULL, nitems * sizeof(*g->items));
	g->lens = xrealloc(NULL, n * sizeof(*g->lens));
	g->seqs = xrealloc(NULL, n * sizeof(*g->seqs));
	g->w = xrealloc(NULL, n * sizeof(*g->w));
	g->db = (struct seqdb){ g->seqs, g->lens, g->w, n };
}

static void bigdb_free(struct bigdb *g)
{
	free(g->items);
	free(g->lens);
	free(g->seqs);
	free(g->w);
}

/* Mines g at 1 % of its weight with 1, 2 and 3 threads, in both modes: the same patterns, supports,
 * supporting sequences and statistics. g is big enough for 3 threads to merge its sequences in parallel
 * (BIDE_PREP_MIN in miner/bide.c: 16,384 sequences a thread). Stores the 1-thread statistics of the closed run
 * in st1. */
static void prep_same(const struct bigdb *g, struct bide_stats *st1)
{
	uint64_t total = 0;

	for (size_t i = 0; i < g->db.n; i++)
		total += g->w[i];
	for (int mode = 0; mode < 2; mode++) {
		struct res r1 = { 0 };
		struct bide_stats s1;
		struct bide *b = bide_open();
		struct bide_opts o = { .mode = mode ? BIDE_MAXIMAL : BIDE_CLOSED, .minsup = total / 100, .threads = 1 };

		CHECK_INT(bide_mine(b, &g->db, &o, collect, &r1), 0);
		bide_last_stats(b, &s1);
		CHECK_INT(s1.prep_threads, 1);
		if (!mode)
			*st1 = s1;
		for (o.threads = 2; o.threads <= 3; o.threads++) {
			struct res r = { 0 };
			struct bide_stats st;

			CHECK_INT(bide_mine(b, &g->db, &o, collect, &r), 0);
			bide_last_stats(b, &st);
			CHECK_INT(st.prep_threads, o.threads);   /* the parallel preparation ran */
			CHECK(res_equal(&r, &r1, true, mode ? "maximal, prepared on threads" : "closed, prepared on threads"));
			CHECK_INT(st.sequences, s1.sequences);
			CHECK_INT(st.items, s1.items);
			CHECK_INT(st.patterns, s1.patterns);
			CHECK(!r.unsorted);
			res_free(&r);
		}
		CHECK(r1.n > 0 || total == 0);
		res_free(&r1);
		bide_free(b);
	}
}

/* Edge cases of the parts: 60,000 copies of one sequence (every part but one empty), and 60,000 empty
 * sequences (no part has any) among which one is not. */
static void test_prep_threads_edges(void)
{
	enum { N = 60000 };
	static const uint32_t one[3] = { 7, 8, 9 };
	struct bigdb g;
	struct bide_stats st;

	bigdb_alloc(&g, N, 1);
	for (size_t i = 0; i < N; i++) {
		g.seqs[i] = one;
		g.lens[i] = 3;
		g.w[i] = 2;
	}
	prep_same(&g, &st);
	CHECK_INT(st.sequences, 1);
	CHECK_INT(st.items, 3);
	CHECK_INT(st.patterns, 1);
	for (size_t i = 0; i < N; i++) {
		g.seqs[i] = NULL;
		g.lens[i] = 0;
	}
	g.seqs[N / 2] = one;
	g.lens[N / 2] = 3;
	g.w[N / 2] = (uint64_t)N;   /* the only weight that counts: frequent at 1 % of everything */
	prep_same(&g, &st);
	CHECK_INT(st.sequences, 1);
	CHECK_INT(st.patterns, 1);
	bigdb_free(&g);
}

/* Many duplicates, as call stacks repeat: 60,000 sequences drawn from 300 distinct ones (one in five as a copy
 * at another address, so compared by content), one in 50 empty, some of infrequent items only, and a third
 * with an infrequent last item, which may make them equal to another sequence once dropped. */
static void test_prep_threads_dups(void)
{
	enum { N = 60000, D = 300, L = 24 };
	struct bigdb g;
	struct bide_stats st;
	uint32_t *dist = xrealloc(NULL, D * L * sizeof(*dist)), dlen[D];
	size_t at = 0, empty = 0;

	bigdb_alloc(&g, N, (size_t)N * L);
	rng_state = 0x2545f4914f6cdd1dULL;
	for (uint32_t d = 0; d < D; d++) {
		uint32_t *s = dist + d * L, len = 0, shared = 3 + rnd(8), tail = 2 + rnd(10);

		if (d % 37 == 5) {
			for (; len < 4; len++)
				s[len] = 100000 + d * 8 + len;
		} else {
			for (; len < shared; len++)
				s[len] = 1 + len;
			for (uint32_t j = 0; j < tail; j++, len++)
				s[len] = rnd(4) ? 10 + rnd(20) : s[len - 2];
			if (d % 3 == 0)
				s[len++] = 200000 + d;
		}
		dlen[d] = len;
	}
	for (size_t i = 0; i < N; i++) {
		uint64_t u = rnd(1000);
		uint32_t d = (uint32_t)(u * u * u * D / 1000000000);

		if (i < D)
			d = (uint32_t)i;
		g.w[i] = 1 + rnd(100);
		if (i % 50 == 7) {
			g.lens[i] = 0;
			g.seqs[i] = NULL;
			empty++;
		} else if (i % 5 == 0) {
			memcpy(g.items + at, dist + d * L, dlen[d] * sizeof(*g.items));
			g.seqs[i] = g.items + at;
			g.lens[i] = dlen[d];
			at += dlen[d];
		} else {
			g.seqs[i] = dist + d * L;
			g.lens[i] = dlen[d];
		}
	}
	prep_same(&g, &st);
	fprintf(stderr, "  duplicates: %llu sequences mined, %llu items, %llu closed patterns\n",
		(unsigned long long)st.sequences, (unsigned long long)st.items, (unsigned long long)st.patterns);
	CHECK(st.sequences > 100 && st.sequences < D);
	CHECK(empty > 0);
	free(dist);
	bigdb_free(&g);
}

/* No duplicates: 60,000 distinct sequences, a shared prefix and the index in 4 digits of base 16, every item
 * frequent, so that every one is mined. */
static void test_prep_threads_distinct(void)
{
	enum { N = 60000, L = 7 };
	struct bigdb g;
	struct bide_stats st;

	bigdb_alloc(&g, N, (size_t)N * L);
	rng_state = 0x9e3779b97f4a7c15ULL;
	for (size_t i = 0; i < N; i++) {
		uint32_t *s = g.items + i * L;

		s[0] = 1;
		s[1] = 2;
		s[2] = 3;
		for (int k = 0; k < 4; k++)
			s[3 + k] = 10 + (uint32_t)(i >> (4 * k)) % 16;
		g.seqs[i] = s;
		g.lens[i] = L;
		g.w[i] = 1 + rnd(100);
	}
	prep_same(&g, &st);
	fprintf(stderr, "  distinct: %llu closed patterns\n", (unsigned long long)st.patterns);
	CHECK_INT(st.sequences, N);
	CHECK_INT(st.items, 3 + 16);
	bigdb_free(&g);
}

/* The database's refusals, checked in chunks with several threads: the error a pass in order meets first. */
static void test_prep_threads_errors(void)
{
	enum { N = 60000 };
	struct bigdb g;
	struct bide *b = bide_open();
	struct res r = { 0 };
	static const uint32_t one[1] = { 1 };

	bigdb_alloc(&g, N, 1);
	for (size_t i = 0; i < N; i++) {
		g.seqs[i] = one;
		g.lens[i] = 1;
		g.w[i] = 1;
	}
	for (int threads = 1; threads <= 3; threads++) {
		struct bide_opts o = { .mode = BIDE_CLOSED, .minsup = 1, .threads = threads };

		/* no items: in the last chunk */
		g.seqs[N - 2] = NULL;
		CHECK_INT(bide_mine(b, &g.db, &o, collect, &r), -1);
		CHECK_STR(bide_error(b), "sequence 59998 has length 1 and no items");
		/* an overflow in the first chunk comes before it */
		g.w[10] = UINT64_MAX - 5;
		CHECK_INT(bide_mine(b, &g.db, &o, collect, &r), -1);
		CHECK_STR(bide_error(b), "the total weight overflows 64 bits");
		/* an overflow across chunks, after it */
		g.w[10] = UINT64_MAX / 2;
		g.w[N - 1] = UINT64_MAX / 2;
		CHECK_INT(bide_mine(b, &g.db, &o, collect, &r), -1);
		CHECK_STR(bide_error(b), "sequence 59998 has length 1 and no items");
		g.seqs[N - 2] = one;
		CHECK_INT(bide_mine(b, &g.db, &o, collect, &r), -1);
		CHECK_STR(bide_error(b), "the total weight overflows 64 bits");
		g.w[10] = 1;
		g.w[N - 1] = 1;
		CHECK_INT(bide_mine(b, &g.db, &o, collect, &r), 0);
		CHECK_STR(res_letters(&r), "A:60000");
		res_free(&r);
	}
	bide_free(b);
	bigdb_free(&g);
}

/* ---- SPMF ---- */

static int parse(struct spmf *s, const char *text, struct seqdb *db)
{
	return spmf_parse(s, "t.txt", text, strlen(text), db);
}

static void test_spmf_parse(void)
{
	struct spmf *s = spmf_open();
	struct seqdb db;
	struct res r = { 0 };

	CHECK_INT(parse(s, "# comment\n%meta\n@CONVERTED_FROM_TEXT\n\n3 -1 1 -1 1 -1 2 -1 3 -1 -2\n"
			   "1 -1 2 -1 3 -1 2 -1 -2\r\n  3 -1 1 -1 2 -1 3 -1 -2 \n1 -1 2 -1 2 -1 3 -1 1 -2\n-2\n",
			   &db), 0);
	CHECK_INT(db.n, 5);
	CHECK_INT(db.lens[0], 5);
	CHECK_INT(db.lens[3], 5);     /* the last itemset may end with -2 alone */
	CHECK_INT(db.lens[4], 0);
	CHECK_INT(db.seqs[1][3], 2);
	CHECK_INT(db.weights[2], 1);
	CHECK_INT(mine(&db, BIDE_CLOSED, 2, 1, &r), 0);
	CHECK_STR(res_letters(&r), "AA:2 ABB:2 ABC:4 CA:3 CABC:2 CB:3");
	res_free(&r);

	CHECK_INT(parse(s, "1 -1 2 -1 -2\n1 -1 2 3 -1 -2\n", &db), -1);
	CHECK_STR(spmf_error(s), "t.txt:2: itemset with 2 items; only one item per itemset is supported");
	CHECK_INT(parse(s, "1 -1 2 -1 -2\n\n1 -1 2 -1\n", &db), -1);
	CHECK_STR(spmf_error(s), "t.txt:3: the sequence does not end with -2");
	CHECK_INT(parse(s, "1 -1 -1 -2\n", &db), -1);
	CHECK_STR(spmf_error(s), "t.txt:1: empty itemset");
	CHECK_INT(parse(s, "1 -1 x2 -1 -2\n", &db), -1);
	CHECK_STR(spmf_error(s), "t.txt:1: 'x2' is not an item (a positive integer), -1 or -2");
	CHECK_INT(parse(s, "0 -1 -2\n", &db), -1);
	CHECK_STR(spmf_error(s), "t.txt:1: '0' is not an item (a positive integer), -1 or -2");
	CHECK_INT(parse(s, "4294967296 -1 -2\n", &db), -1);
	CHECK_STR(spmf_error(s), "t.txt:1: '4294967296' is not an item (a positive integer), -1 or -2");
	CHECK_INT(parse(s, "4294967295 -1 -2\n", &db), 0);
	CHECK_INT(db.seqs[0][0], 4294967295u);
	CHECK_INT(parse(s, "1 -1 <3> -1 -2\n", &db), -1);
	CHECK_STR(spmf_error(s), "t.txt:1: '<3>' is not an item (a positive integer), -1 or -2");
	CHECK_INT(parse(s, "1 -1 -2 4 -1 -2\n", &db), -1);
	CHECK_STR(spmf_error(s), "t.txt:1: '4' after the end of the sequence (-2)");
	CHECK_INT(parse(s, "1 -1 -3 -2\n", &db), -1);
	CHECK_STR(spmf_error(s), "t.txt:1: '-3' is not an item (a positive integer), -1 or -2");
	CHECK_INT(parse(s, "", &db), 0);
	CHECK_INT(db.n, 0);
	spmf_free(s);
	spmf_free(NULL);
}

static void test_spmf_files(void)
{
	struct spmf *s = spmf_open();
	struct seqdb db;
	char path[512], want[700], tmp[] = "/tmp/test_bide_XXXXXX";
	int fd;
	FILE *f;

	snprintf(path, sizeof(path), "%s/spmf/contextPrefixSpan.txt", data_dir);
	CHECK_INT(spmf_read(s, path, &db), -1);
	snprintf(want, sizeof(want), "%s:1: itemset with 3 items; only one item per itemset is supported", path);
	CHECK_STR(spmf_error(s), want);

	snprintf(path, sizeof(path), "%s/spmf/kosarak10k_seq.txt", data_dir);
	CHECK_INT(spmf_read(s, path, &db), 0);
	CHECK_INT(db.n, 10000);
	CHECK_INT(db.lens[0], 3);
	CHECK_INT(db.seqs[0][2], 3);
	CHECK_INT(db.lens[9999] > 0, 1);

	snprintf(path, sizeof(path), "%s/spmf/no-such-file.txt", data_dir);
	CHECK_INT(spmf_read(s, path, &db), -1);
	snprintf(want, sizeof(want), "%s: No such file or directory", path);
	CHECK_STR(spmf_error(s), want);

	/* A line past the bound is refused, not read whole; the bound itself is accepted (no final newline). */
	fd = mkstemp(tmp);
	CHECK(fd >= 0);
	f = fdopen(fd, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("5 -1 -2\n", f);
		for (size_t i = 0; i < SPMF_LINE_MAX / 5 + 1; i++)
			fputs("1 -1 ", f);
		fputs("-2\n", f);
		fclose(f);
		CHECK_INT(spmf_read(s, tmp, &db), -1);
		snprintf(want, sizeof(want), "%s:2: line longer than %u bytes", tmp, SPMF_LINE_MAX);
		CHECK_STR(spmf_error(s), want);
		f = fopen(tmp, "w");
		for (size_t i = 0; i < (SPMF_LINE_MAX - 2) / 5; i++)
			fputs("2 -1 ", f);
		fputs("-2", f);
		fclose(f);
		CHECK_INT(spmf_read(s, tmp, &db), 0);
		CHECK_INT(db.n, 1);
		CHECK_INT(db.lens[0], (SPMF_LINE_MAX - 2) / 5);
		unlink(tmp);
	}
	spmf_free(s);
}

static void test_spmf_write(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	const uint32_t items[] = { 1, 2, 4294967295u };

	CHECK_INT(spmf_write_pattern(f, items, 2, 4), 0);
	CHECK_INT(spmf_write_pattern(f, items + 2, 1, 18446744073709551615ull), 0);
	fclose(f);
	CHECK_STR(text, "1 2 #SUP: 4\n4294967295 #SUP: 18446744073709551615\n");
	free(text);
}

/* ---- real data ---- */

/* Exact supports and supporting sequences of every pattern (up to 300 of them) by direct count. */
static void check_supports(const struct seqdb *db, struct res *r, int *bad)
{
	size_t step = r->n > 300 ? r->n / 300 : 1;

	for (size_t i = 0; i < r->n; i += step) {
		const struct rpat *p = &r->p[i];
		uint64_t sup = 0;
		size_t ns = 0;
		bool same = true;

		for (size_t j = 0; j < db->n; j++) {
			if (!is_subseq(r->items + p->it, p->len, db->seqs[j], db->lens[j]))
				continue;
			sup += db->weights[j];
			if (ns >= p->ns || r->seqs[p->sq + ns] != j)
				same = false;
			ns++;
		}
		if (sup != p->sup || ns != p->ns || !same) {
			if (*bad < 3)
				fprintf(stderr, "  pattern %zu: support %llu, expected %llu\n", i,
					(unsigned long long)p->sup, (unsigned long long)sup);
			(*bad)++;
		}
	}
}

/*
 * The counts were computed, when this test was written, by an independent miner (a plain PrefixSpan listing
 * every frequent pattern with its support, then closed = no one-item-longer frequent pattern of equal
 * support, maximal = no one-item-longer frequent pattern): its closed and maximal sets were identical,
 * pattern for pattern and support for support, to this engine's.
 */
static void real_file(const char *name, uint64_t minsup, size_t n_closed, size_t n_maximal)
{
	struct spmf *s = spmf_open();
	struct seqdb db;
	char path[512];
	struct res cl1 = { 0 }, cl2 = { 0 }, mx1 = { 0 }, mx2 = { 0 };
	int bad = 0;

	snprintf(path, sizeof(path), "%s/spmf/%s", data_dir, name);
	CHECK_INT(spmf_read(s, path, &db), 0);
	CHECK_INT(mine(&db, BIDE_CLOSED, minsup, 1, &cl1), 0);
	CHECK_INT(mine(&db, BIDE_CLOSED, minsup, 2, &cl2), 0);
	CHECK_INT(mine(&db, BIDE_MAXIMAL, minsup, 1, &mx1), 0);
	CHECK_INT(mine(&db, BIDE_MAXIMAL, minsup, 2, &mx2), 0);
	fprintf(stderr, "  %s at %llu: %zu closed, %zu maximal\n", name, (unsigned long long)minsup, cl1.n, mx1.n);
	CHECK_INT(cl1.n, n_closed);
	CHECK_INT(mx1.n, n_maximal);
	CHECK(res_equal(&cl2, &cl1, true, "closed, 2 threads"));
	CHECK(res_equal(&mx2, &mx1, true, "maximal, 2 threads"));
	check_maximal_vs_closed(&mx1, &cl1, &bad);
	check_supports(&db, &cl1, &bad);
	check_supports(&db, &mx1, &bad);
	CHECK_INT(bad, 0);
	CHECK(!cl1.unsorted && !mx1.unsorted);
	res_free(&cl1);
	res_free(&cl2);
	res_free(&mx1);
	res_free(&mx2);
	spmf_free(s);
}

static void test_kosarak(void)
{
	real_file("kosarak10k_seq.txt", 20, 8102, 2061);      /* 0.2 % */
}

static void test_vmsp(void)
{
	real_file("dataVMSP.txt", 34, 1981, 383);             /* 2 % */
}

int main(int argc, char **argv)
{
	if (argc > 1)
		data_dir = argv[1];
	else if (getenv("SM_DATA"))
		data_dir = getenv("SM_DATA");
	RUN(test_paper_closed);
	RUN(test_paper_maximal);
	RUN(test_options);
	RUN(test_duplicates);
	RUN(test_random_count);
	RUN(test_random_weighted);
	RUN(test_weights_as_copies);
	RUN(test_random_maximal_closed);
	RUN(test_random_big_threads);
	RUN(test_prep_threads_dups);
	RUN(test_prep_threads_distinct);
	RUN(test_prep_threads_errors);
	RUN(test_prep_threads_edges);
	RUN(test_spmf_parse);
	RUN(test_spmf_files);
	RUN(test_spmf_write);
	RUN(test_kosarak);
	RUN(test_vmsp);
	return CHECK_DONE();
}
