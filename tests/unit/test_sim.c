/* Unit tests for clusterer/sim.c: words, sub, weights, alignment, Sim, medoid and common part. */
#include "clusterer/sim.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


static const char *words_of(const char *f)
{
	static char out[512];

	if (sim_words(f, strlen(f), out, sizeof(out)) < 0)
		return "(error)";
	return out;
}

static void test_words(void)
{
	char small[8];

	CHECK_STR(words_of("GetHashCode"), "get hash code");
	CHECK_STR(words_of("App_main"), "app main");
	CHECK_STR(words_of("kernel32.dll!WaitForSingleObjectEx"), "wait for single object ex kernel32.dll!");
	CHECK_STR(words_of("ntdll.dll!nt_wait_for_object"), "nt wait for object ntdll.dll!");
	CHECK_STR(words_of("libfoo.so!ns::Class<T>::method"), "ns class t method libfoo.so!");
	CHECK_STR(words_of("app!std::map<int, std::string>::find"), "std map int string find app!");
	/* digits: an upper-case letter after a digit starts a word; letters after digits do not */
	CHECK_STR(words_of("wow64QueryAttr"), "wow64 query attr");
	CHECK_STR(words_of("win32k.sys!Win32kLockX86"), "win32k lock x86 win32k.sys!");
	CHECK_STR(words_of("X86Emulate"), "x86 emulate");
	/* upper after upper does not split; lower-cased */
	CHECK_STR(words_of("HTTPServer"), "httpserver");
	CHECK_STR(words_of("getHTTPHeader"), "get httpheader");
	/* a set: each word once; empty words dropped */
	CHECK_STR(words_of("foo_Foo__foo"), "foo");
	CHECK_STR(words_of("__a__::b"), "a b");
	/* the module is one word, kept apart from a function word of the same spelling */
	CHECK_STR(words_of("Get!get"), "get get!");
	CHECK_STR(words_of("MyMod.DLL!x"), "x mymod.dll!");
	/* only the first '!' separates; '!' is not a separator in the function part */
	CHECK_STR(words_of("a!b!c"), "b!c a!");
	CHECK_STR(words_of("!func"), "func");
	CHECK_STR(words_of("mod!"), "mod!");
	CHECK_STR(words_of("!"), "");
	/* unknown symbols (no '!'): the whole string is the function part */
	CHECK_STR(words_of("libx.so+0x1a2B"), "libx so+0x1a2 b");
	CHECK_INT(sim_words("GetHashCode", 11, small, sizeof(small)), -1);
	CHECK_INT(sim_words("Get", 3, small, sizeof(small)), 1);
}

static struct sim_frames *table(const char *const *names, size_t n)
{
	struct sim_frames *ft = sim_frames_open();
	size_t i;

	for (i = 0; ft && i < n; i++)
		if (sim_frames_add(ft, (uint32_t)(i + 1), names[i], strlen(names[i])) < 0)
			return NULL;
	return ft;
}

static void test_sub(void)
{
	static const char *const names[] = {
		"SwapKernelStack", "ExpandKernelStack", "k!SwapKernelStack", "k!ExpandKernelStack",
		"other.dll!Nothing", "a!Foo", "a!foo", "!", "___", "x!GetHashCode",
	};
	struct sim_frames *ft = table(names, 10);

	CHECK(ft != NULL);
	if (!ft)
		return;
	CHECK_INT(sim_frames_count(ft), 10);
	CHECK(sim_sub(ft, 1, 1) == 0);
	/* {swap kernel stack} vs {expand kernel stack}: 2 of 4 */
	CHECK_NEAR(sim_sub(ft, 1, 2), 0.5);
	CHECK(sim_sub(ft, 2, 1) == sim_sub(ft, 1, 2));
	/* the module word counts: 3 of 5 */
	CHECK_NEAR(sim_sub(ft, 3, 4), 0.4);
	CHECK_NEAR(sim_sub(ft, 1, 3), 0.25);
	CHECK(sim_sub(ft, 3, 5) == 1);
	/* different frames with the same words: cost 0, yet not a match (see test_alignment_rules) */
	CHECK(sim_sub(ft, 6, 7) == 0);
	/* no words on either side */
	CHECK(sim_sub(ft, 8, 9) == 1);
	CHECK(sim_sub(ft, 8, 8) == 0);
	CHECK(sim_sub(ft, 1, 99) == -1);
	/* x!GetHashCode vs k!SwapKernelStack: nothing shared */
	CHECK(sim_sub(ft, 10, 3) == 1);

	/* registering again: same name is fine, another name is not */
	CHECK_INT(sim_frames_add(ft, 1, "SwapKernelStack", 15), 0);
	CHECK_INT(sim_frames_add(ft, 1, "SwapKernelStacks", 16), -1);
	CHECK(strstr(sim_frames_error(ft), "registered twice") != NULL);
	CHECK_INT(sim_frames_add(ft, UINT32_MAX, "x", 1), -1);
	CHECK_INT(sim_frames_count(ft), 10);

	/* floors: the nearest other frame's sub when it is <= 0.5, else 0.5 */
	CHECK(sim_frames_sub_floor(ft, 1) == -1); /* not prepared yet */
	CHECK_INT(sim_frames_prepare(ft, 2), 0);
	CHECK_NEAR(sim_frames_sub_floor(ft, 1), 0.25);  /* k!SwapKernelStack */
	CHECK_NEAR(sim_frames_sub_floor(ft, 4), 0.25);  /* ExpandKernelStack: 3 of 4 */
	CHECK(sim_frames_sub_floor(ft, 6) == 0);        /* a!foo */
	CHECK(sim_frames_sub_floor(ft, 5) == 0.5);
	CHECK(sim_frames_sub_floor(ft, 8) == 0.5);
	CHECK(sim_frames_sub_floor(ft, 99) == -1);
	sim_frames_free(ft);
}

/* Figure 3 of the paper: L has 32-bit emulation frames (ID1) and SwapKernelStack where R has
 * ExpandKernelStack (S1) between two common runs (M1, M2). */
static const char *const fig3[] = {
	"App_main", "Initialize", "InitComponents", "HashTableOperate", "GetHashCode", "GetShortPathName",
	"wow64Service", "wow64System", "wow64QueryAttr", "SwapKernelStack", "ExpandKernelStack",
	"MmAccessFault", "MiIssueHardFault", "IoPageRead",
};
static const uint32_t fig3_l[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14 };
static const uint32_t fig3_r[] = { 1, 2, 3, 4, 5, 6, 11, 12, 13, 14 };

static void test_figure3(void)
{
	struct sim_frames *ft = table(fig3, 14);
	struct sim_ctx *c = ft ? sim_ctx_open(ft) : NULL;
	double wl[13], wr[10], s;
	struct sim_pattern L = { fig3_l, wl, 13 }, R = { fig3_r, wr, 10 };
	const struct sim_alignment *al;
	size_t i;

	CHECK(c != NULL);
	if (!c)
		return;
	/* no statistics: N = 0 and every count 0, so every factor is ln(1) + 1 = 1 */
	sim_weights(ft, fig3_l, 13, wl);
	sim_weights(ft, fig3_r, 10, wr);
	for (i = 0; i < 13; i++)
		CHECK(wl[i] == 1);
	CHECK_INT(sim_align(c, &L, &R, &al), 0);
	CHECK_NEAR(al->cost, 3.5);
	CHECK_INT(al->nsegs, 4);
	CHECK_INT(al->segs[0].kind, SIM_SEG_M);
	CHECK_INT(al->segs[0].n, 6);
	CHECK_INT(al->segs[1].kind, SIM_SEG_ID);
	CHECK_INT(al->segs[1].first, 6);
	CHECK_INT(al->segs[1].n, 3);
	CHECK_INT(al->segs[2].kind, SIM_SEG_S);
	CHECK_INT(al->segs[2].n, 1);
	CHECK_INT(al->segs[3].kind, SIM_SEG_M);
	CHECK_INT(al->segs[3].n, 3);
	CHECK_INT(al->nsteps, 13);
	for (i = 6; i < 9; i++) {
		CHECK_INT(al->steps[i].op, SIM_DEL);
		CHECK_INT(al->steps[i].l, i);
		CHECK(al->steps[i].r == UINT32_MAX);
	}
	CHECK_INT(al->steps[9].op, SIM_SUB);
	CHECK_INT(al->steps[9].l, 9);
	CHECK_INT(al->steps[9].r, 6);
	CHECK_NEAR(al->steps[9].sub, 0.5);
	CHECK_INT(al->steps[12].l, 12);
	CHECK_INT(al->steps[12].r, 9);
	/* w(M) = 9, w(ID) = 3, w(S) = 0.5 * (1 + 1) / 2 */
	CHECK_NEAR(al->wm, 9);
	CHECK_NEAR(al->wid, 3);
	CHECK_NEAR(al->ws, 0.5);
	CHECK_NEAR(al->segs[0].w, 6);
	CHECK_NEAR(al->segs[2].w, 0.5);
	CHECK_NEAR(al->sim, 9 / 12.5);
	/* the other way round: the mirror, insertions instead of deletions, the same Sim */
	CHECK_INT(sim_align(c, &R, &L, &al), 0);
	CHECK_INT(al->nsegs, 4);
	CHECK_INT(al->steps[6].op, SIM_INS);
	CHECK_INT(al->steps[6].r, 6);
	CHECK_INT(al->steps[9].l, 6);
	CHECK_INT(al->steps[9].r, 9);
	CHECK(al->sim == 9 / 12.5);
	CHECK_INT(sim_similarity(c, &L, &L, &s), 0);
	CHECK(s == 1);
	sim_ctx_free(c);
	sim_frames_free(ft);
}

/*
 * A tiny database by hand: four streams,
 *   s1: main A B     s2: main A C     s3: main B     s4: main A B, and main D
 * N = 4; n(main) = 4, n(A) = 3, n(B) = 3, n(C) = 1, n(D) = 1;
 * n(main->A) = 3, n(A->B) = 2, n(A->C) = 1, n(main->B) = 1, n(main->D) = 1.
 */
enum { F_MAIN = 1, F_A, F_B, F_C, F_D };

static void tiny_stats(struct sim_frames *ft)
{
	sim_frames_set_streams(ft, 4);
	sim_frames_set_count(ft, F_MAIN, 4);
	sim_frames_set_count(ft, F_A, 3);
	sim_frames_set_count(ft, F_B, 3);
	sim_frames_set_count(ft, F_C, 1);
	sim_frames_set_count(ft, F_D, 1);
	sim_frames_set_calls(ft, F_MAIN, F_A, 3);
	sim_frames_set_calls(ft, F_A, F_B, 2);
	sim_frames_set_calls(ft, F_A, F_C, 1);
	sim_frames_set_calls(ft, F_MAIN, F_B, 1);
	sim_frames_set_calls(ft, F_MAIN, F_D, 1);
}

static void test_weights(void)
{
	static const char *const names[] = { "app!main", "app!DoA", "lib!WaitB", "lib!SpinC", "lib!IdleD" };
	static const uint32_t p[] = { F_MAIN, F_A, F_B }, q[] = { F_MAIN, F_B }, r[] = { F_D };
	struct sim_frames *ft = table(names, 5);
	struct sim_ctx *c = ft ? sim_ctx_open(ft) : NULL;
	double wp[3], wq[2], wr[1], wm, s1, s2;
	struct sim_pattern P = { p, wp, 3 }, Q = { q, wq, 2 };
	const struct sim_alignment *al;

	CHECK(c != NULL);
	if (!c)
		return;
	tiny_stats(ft);
	sim_weights(ft, p, 3, wp);
	/* main: U = ln(5/5) + 1 = 1; BB(main, A) = ln((3+1)/(3+1)) + 1 = 1 */
	CHECK_NEAR(wp[0], 1.0);
	/* A: U = ln(5/4) + 1; BF(main, A) = ln(5/4) + 1; BB(A, B) = ln(4/3) + 1 */
	CHECK_NEAR(wp[1], (log(5.0 / 4) + 1) * (log(5.0 / 4) + 1) * (log(4.0 / 3) + 1));
	CHECK_NEAR(wp[1], 1.9264755843994257);
	/* B: U = ln(5/4) + 1; BF(A, B) = ln(4/3) + 1; last frame: BB = 1 */
	CHECK_NEAR(wp[2], 1.5750200230623126);
	sim_weights(ft, q, 2, wq);
	/* main: BB(main, B) = ln((3+1)/(1+1)) + 1; B: U * BF(main, B) = (ln(5/4) + 1)(ln(5/2) + 1) */
	CHECK_NEAR(wq[0], 1.6931471805599454);
	CHECK_NEAR(wq[1], 2.34389865113506);
	sim_weights(ft, r, 1, wr);
	CHECK_NEAR(wr[0], log(5.0 / 2) + 1);

	/* Sim(P, Q): main matched, A deleted, B matched; a matched pair weighs its two weights' mean */
	CHECK_INT(sim_align(c, &P, &Q, &al), 0);
	CHECK_INT(al->nsteps, 3);
	CHECK_INT(al->steps[1].op, SIM_DEL);
	wm = (wp[0] + wq[0]) / 2 + (wp[2] + wq[1]) / 2;
	CHECK_NEAR(al->wm, wm);
	CHECK_NEAR(al->wid, wp[1]);
	CHECK_NEAR(al->sim, 0.6318256186180995);
	CHECK_INT(sim_similarity(c, &P, &Q, &s1), 0);
	CHECK_INT(sim_similarity(c, &Q, &P, &s2), 0);
	CHECK(s1 == s2);

	/* inconsistent statistics are clamped: n(f) > N counts as N, n(g->f) > n(g) as n(g) */
	sim_frames_set_count(ft, F_C, 9);
	sim_frames_set_calls(ft, F_A, F_C, 7);
	{
		static const uint32_t ac[] = { F_A, F_C };
		double w[2];

		sim_weights(ft, ac, 2, w);
		/* A: U(A) * BB(A, C) with n(C) = 9 and n(A->C) = 7 -> ln(10/8) + 1 */
		CHECK_NEAR(w[0], (log(5.0 / 4) + 1) * (log(10.0 / 8) + 1));
		/* C: U = ln(5/5) + 1 (clamped), BF(A, C) = ln(4/4) + 1 (clamped) */
		CHECK_NEAR(w[1], 1.0);
	}
	sim_ctx_free(c);
	sim_frames_free(ft);
}

static void test_alignment_rules(void)
{
	static const char *const names[] = { "a!Alpha", "b!Beta", "a!alpha", "c!Gamma" };
	struct sim_frames *ft = table(names, 4);
	struct sim_ctx *c = ft ? sim_ctx_open(ft) : NULL;
	const struct sim_alignment *al;
	double w[8] = { 1, 1, 1, 1, 1, 1, 1, 1 }, s;

	CHECK(c != NULL);
	if (!c)
		return;
	{
		/* L = a b a, R = b a b (unrelated words): at the last cell deletion and insertion tie, and
		 * deletion wins (with the smaller sequence, a b a, on the left) */
		static const uint32_t l[] = { 1, 2, 1 }, r[] = { 2, 1, 2 };
		struct sim_pattern L = { l, w, 3 }, R = { r, w, 3 };

		CHECK_INT(sim_align(c, &L, &R, &al), 0);
		CHECK_INT(al->nsteps, 4);
		CHECK_INT(al->steps[0].op, SIM_INS);
		CHECK_INT(al->steps[0].r, 0);
		CHECK_INT(al->steps[1].op, SIM_MATCH);
		CHECK_INT(al->steps[1].l, 0);
		CHECK_INT(al->steps[1].r, 1);
		CHECK_INT(al->steps[2].op, SIM_MATCH);
		CHECK_INT(al->steps[3].op, SIM_DEL);
		CHECK_INT(al->steps[3].l, 2);
		CHECK_INT(al->nsegs, 3);
		CHECK_NEAR(al->cost, 2);
		/* swapped arguments: the mirror of that, not a fresh tie-break */
		CHECK_INT(sim_align(c, &R, &L, &al), 0);
		CHECK_INT(al->steps[0].op, SIM_DEL);
		CHECK_INT(al->steps[0].l, 0);
		CHECK_INT(al->steps[1].l, 1);
		CHECK_INT(al->steps[1].r, 0);
		CHECK_INT(al->steps[3].op, SIM_INS);
		CHECK_INT(al->steps[3].r, 2);
	}
	{
		/* L = x a, R = a y: two substitutions (cost 2) tie with x deleted, a matched, y inserted:
		 * the last cell prefers the substitution, so both are substituted */
		static const uint32_t l[] = { 2, 1 }, r[] = { 1, 4 };
		struct sim_pattern L = { l, w, 2 }, R = { r, w, 2 };

		CHECK_INT(sim_align(c, &L, &R, &al), 0);
		CHECK_INT(al->nsteps, 2);
		CHECK_INT(al->steps[0].op, SIM_SUB);
		CHECK_INT(al->steps[1].op, SIM_SUB);
		CHECK_INT(al->nsegs, 1);
		CHECK(al->sim == 0);
	}
	{
		/* L = a, R = a a: the match goes to the innermost a */
		static const uint32_t l[] = { 1 }, r[] = { 1, 1 };
		struct sim_pattern L = { l, w, 1 }, R = { r, w, 2 };

		CHECK_INT(sim_align(c, &L, &R, &al), 0);
		CHECK_INT(al->steps[0].op, SIM_INS);
		CHECK_INT(al->steps[1].op, SIM_MATCH);
		CHECK_INT(al->steps[1].r, 1);
		CHECK_NEAR(al->sim, 1.0 / 2);
	}
	{
		/* a!Alpha and a!alpha have the same words: substituted at cost 0, never matched */
		static const uint32_t l[] = { 1 }, r[] = { 3 };
		struct sim_pattern L = { l, w, 1 }, R = { r, w, 1 };

		CHECK_INT(sim_align(c, &L, &R, &al), 0);
		CHECK_INT(al->steps[0].op, SIM_SUB);
		CHECK(al->cost == 0);
		CHECK(al->sim == 0);
	}
	{
		/* weights 0: Sim 1 for equal patterns, 0 otherwise; empty patterns are equal */
		static const uint32_t l[] = { 1, 2 }, r[] = { 1, 4 };
		double z[2] = { 0, 0 };
		struct sim_pattern L = { l, z, 2 }, R = { r, z, 2 }, E = { l, z, 0 };

		CHECK_INT(sim_similarity(c, &L, &L, &s), 0);
		CHECK(s == 1);
		CHECK_INT(sim_similarity(c, &L, &R, &s), 0);
		CHECK(s == 0);
		CHECK_INT(sim_similarity(c, &E, &E, &s), 0);
		CHECK(s == 1);
		CHECK_INT(sim_align(c, &E, &L, &al), 0);
		CHECK_INT(al->nsteps, 2);
		CHECK_INT(al->steps[0].op, SIM_INS);
	}
	{
		/* errors: an unregistered frame, a pattern too long */
		static const uint32_t l[] = { 1, 77 };
		struct sim_pattern L = { l, w, 2 }, R = { l, w, 1 };
		uint32_t *big = calloc(SIM_MAX_LEN + 1, sizeof(*big));
		double *bw = calloc(SIM_MAX_LEN + 1, sizeof(*bw));

		CHECK_INT(sim_align(c, &L, &R, &al), -1);
		CHECK(strstr(sim_ctx_error(c), "frame id 77 is not registered") != NULL);
		if (big && bw) {
			struct sim_pattern B = { big, bw, SIM_MAX_LEN + 1 };
			size_t i;

			for (i = 0; i <= SIM_MAX_LEN; i++)
				big[i] = 1;
			CHECK_INT(sim_align(c, &B, &R, &al), -1);
			CHECK(strstr(sim_ctx_error(c), "at most") != NULL);
		}
		free(big);
		free(bw);
	}
	sim_ctx_free(c);
	sim_frames_free(ft);
}

/* The cost of an optimal alignment, computed independently (plain recursion order, no ops). */
static double edit_cost(const struct sim_frames *ft, const uint32_t *x, size_t m, const uint32_t *y, size_t n)
{
	double D[16][16];
	size_t i, j;

	for (i = 0; i <= m; i++)
		D[i][0] = (double)i;
	for (j = 0; j <= n; j++)
		D[0][j] = (double)j;
	for (i = 1; i <= m; i++)
		for (j = 1; j <= n; j++) {
			double v = D[i - 1][j - 1] + sim_sub(ft, x[i - 1], y[j - 1]);

			if (D[i - 1][j] + 1 < v)
				v = D[i - 1][j] + 1;
			if (D[i][j - 1] + 1 < v)
				v = D[i][j - 1] + 1;
			D[i][j] = v;
		}
	return D[m][n];
}

static void test_symmetry_random(void)
{
	static const char *const names[] = {
		"app!main", "app!RunLoop", "app!RunTask", "lib!LockMutex", "lib!TryLockMutex", "lib!WaitEvent",
		"kern!sys_futex", "kern!futex_wait", "kern!schedule", "lib!ReadFile", "lib!ReadFileEx",
	};
	struct sim_frames *ft = table(names, 11);
	struct sim_ctx *c = ft ? sim_ctx_open(ft) : NULL;
	int t, bad_sym = 0, bad_self = 0, bad_cost = 0, bad_range = 0, bad_mirror = 0;

	CHECK(c != NULL);
	if (!c)
		return;
	sim_frames_set_streams(ft, 100);
	for (t = 1; t <= 11; t++) {
		int u;

		sim_frames_set_count(ft, (uint32_t)t, 5 + check_rand() % 90);
		for (u = 1; u <= 11; u++)
			if (check_rand() % 3 == 0)
				sim_frames_set_calls(ft, (uint32_t)t, (uint32_t)u, check_rand() % 40);
	}
	for (t = 0; t < 3000; t++) {
		uint32_t a[15], b[15];
		double wa[15], wb[15], s1, s2, s0;
		size_t m = 1 + check_rand() % 14, n = 1 + check_rand() % 14, i, ns;
		struct sim_pattern A = { a, wa, m }, B = { b, wb, n };
		const struct sim_alignment *al;
		struct sim_step st[32];
		/* a small alphabet makes repeated frames and ties common */
		uint32_t alpha = 2 + (uint32_t)(check_rand() % 10);

		for (i = 0; i < m; i++)
			a[i] = 1 + (uint32_t)(check_rand() % alpha);
		for (i = 0; i < n; i++)
			b[i] = 1 + (uint32_t)(check_rand() % alpha);
		sim_weights(ft, a, m, wa);
		sim_weights(ft, b, n, wb);
		if (sim_align(c, &A, &B, &al) < 0)
			break;
		ns = al->nsteps;
		memcpy(st, al->steps, ns * sizeof(*st));
		s1 = al->sim;
		if (fabs(al->cost - edit_cost(ft, a, m, b, n)) > 1e-9)
			bad_cost++;
		if (sim_align(c, &B, &A, &al) < 0)
			break;
		s2 = al->sim;
		if (al->nsteps != ns)
			bad_mirror++;
		for (i = 0; i < ns && al->nsteps == ns; i++) {
			enum sim_op want = st[i].op == SIM_DEL ? SIM_INS : st[i].op == SIM_INS ? SIM_DEL : st[i].op;

			if (al->steps[i].op != want || al->steps[i].l != st[i].r || al->steps[i].r != st[i].l)
				bad_mirror++;
		}
		if (s1 != s2)
			bad_sym++;
		if (!(s1 >= 0 && s1 <= 1))
			bad_range++;
		if (sim_similarity(c, &A, &A, &s0) < 0 || s0 != 1)
			bad_self++;
	}
	CHECK_INT(t, 3000);
	CHECK_INT(bad_sym, 0);
	CHECK_INT(bad_mirror, 0);
	CHECK_INT(bad_self, 0);
	CHECK_INT(bad_cost, 0);
	CHECK_INT(bad_range, 0);
	sim_ctx_free(c);
	sim_frames_free(ft);
}

static void test_common_part(void)
{
	static const char *const names[] = { "app!main", "app!Alpha", "lib!Beta", "lib!Chi", "lib!Delta",
					     "kern!Epsilon", "xx!Zeta" };
	/* main A B C D / main A Z C D / main A B C D E; weights 1 */
	static const uint32_t p0[] = { 1, 2, 3, 4, 5 }, p1[] = { 1, 2, 7, 4, 5 }, p2[] = { 1, 2, 3, 4, 5, 6 };
	struct sim_frames *ft = table(names, 7);
	struct sim_ctx *c = ft ? sim_ctx_open(ft) : NULL;
	double w[6] = { 1, 1, 1, 1, 1, 1 }, s;
	struct sim_pattern p[3] = { { p0, w, 5 }, { p1, w, 5 }, { p2, w, 6 } };
	uint32_t pos[8];
	size_t m = 99, np = 99;

	CHECK(c != NULL);
	if (!c)
		return;
	/* Sim(p0, p1) = 4/5, Sim(p0, p2) = 5/6, Sim(p1, p2) = 4/6: sums 1.633, 1.467, 1.5 */
	CHECK_INT(sim_similarity(c, &p[0], &p[1], &s), 0);
	CHECK_NEAR(s, 0.8);
	CHECK_INT(sim_similarity(c, &p[1], &p[2], &s), 0);
	CHECK_NEAR(s, 4.0 / 6);
	CHECK_INT(sim_medoid(c, p, 3, &m), 0);
	CHECK_INT(m, 0);
	CHECK_INT(sim_common_part(c, p, 3, m, pos, &np), 0);
	CHECK_INT(np, 4);
	CHECK_INT(pos[0], 0);
	CHECK_INT(pos[1], 1);
	CHECK_INT(pos[2], 3);
	CHECK_INT(pos[3], 4);
	/* without p0: p1 and p2 tie, the lower index is the medoid; its substituted Z is left out */
	CHECK_INT(sim_medoid(c, p + 1, 2, &m), 0);
	CHECK_INT(m, 0);
	CHECK_INT(sim_common_part(c, p + 1, 2, 0, pos, &np), 0);
	CHECK_INT(np, 4);
	CHECK_INT(pos[2], 3);
	/* seen from p2: its extra E is not matched either */
	CHECK_INT(sim_common_part(c, p + 1, 2, 1, pos, &np), 0);
	CHECK_INT(np, 4);
	CHECK_INT(pos[3], 4);
	/* one pattern: all of it */
	CHECK_INT(sim_medoid(c, p + 2, 1, &m), 0);
	CHECK_INT(m, 0);
	CHECK_INT(sim_common_part(c, p + 2, 1, 0, pos, &np), 0);
	CHECK_INT(np, 6);
	CHECK_INT(pos[5], 5);
	sim_ctx_free(c);
	sim_frames_free(ft);
}

int main(void)
{
	RUN(test_words);
	RUN(test_sub);
	RUN(test_figure3);
	RUN(test_weights);
	RUN(test_alignment_rules);
	RUN(test_symmetry_random);
	RUN(test_common_part);
	return CHECK_DONE();
}
