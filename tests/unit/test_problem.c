/* Unit tests of the grouping of a run's clusters into problems and of titles (clusterer/problem.c):
 * constructed runs whose containments are worked out by hand. */
#include "clusterer/problem.h"
#include "tests/unit/check.h"

#include <stdlib.h>
#include <string.h>

#define C(s, c) { s, c, sizeof(s) / sizeof(s[0]), false, NULL, 0 }

static void group(const struct problem_cluster *cl, size_t n, size_t nstreams, uint32_t *label, size_t *np)
{
	char err[256];

	CHECK_INT(problem_group(cl, n, nstreams, PROBLEM_THETA, label, np, err, sizeof(err)), 0);
}

/* Two clusters in the same streams: one problem; a third elsewhere: its own. */
static void test_same_streams(void)
{
	static const uint32_t sa[] = { 0, 1, 2 }, sb[] = { 0, 1, 2 }, sc[] = { 3, 4 };
	static const uint64_t ca[] = { 100, 100, 100 }, cb[] = { 10, 30, 20 }, cc[] = { 50, 50 };
	const struct problem_cluster cl[] = { C(sa, ca), C(sb, cb), C(sc, cc) };
	uint32_t label[3];
	size_t np;

	group(cl, 3, 5, label, &np);
	CHECK_INT((long long)np, 2);
	CHECK_INT(label[0], 0);
	CHECK_INT(label[1], 0);
	CHECK_INT(label[2], 1);
}

/* A cluster in every stream (request dispatch) does not glue two problems: A in streams 0-2, B in
 * 5-7, D everywhere (0-9). containment(A->D) = 1, containment(D->A) = 3/10 < 0.5. */
static void test_everywhere(void)
{
	static const uint32_t sa[] = { 0, 1, 2 }, sb[] = { 5, 6, 7 }, sd[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	static const uint64_t ca[] = { 90, 90, 90 }, cb[] = { 80, 80, 80 },
			      cd[] = { 10, 10, 10, 10, 10, 10, 10, 10, 10, 10 };
	const struct problem_cluster cl[] = { C(sa, ca), C(sd, cd), C(sb, cb) };
	uint32_t label[3];
	size_t np;

	group(cl, 3, 10, label, &np);
	CHECK_INT((long long)np, 3);
	CHECK(label[0] != label[1] && label[1] != label[2] && label[0] != label[2]);
}

/* Run and wait clusters of the same units (the holder's CPU, the waiters' lock wait): one problem,
 * even with different costs per stream; a containment of 0.4 one way does not link. */
static void test_run_and_wait(void)
{
	static const uint32_t sr[] = { 0, 1, 2, 3 }, sw[] = { 0, 1, 2, 3 }, sx[] = { 0, 1, 4, 5, 6 };
	static const uint64_t cr[] = { 300, 200, 100, 400 }, cw[] = { 250, 260, 90, 380 },
			      cx[] = { 20, 20, 30, 30, 0 };
	const struct problem_cluster cl[] = { C(sr, cr), C(sw, cw), C(sx, cx) };
	uint32_t label[3];
	size_t np;

	group(cl, 3, 7, label, &np);
	CHECK_INT((long long)np, 2);
	CHECK_INT(label[0], label[1]);
	CHECK(label[2] != label[0]);
}

/* Average linkage: A-B linked, B-C linked, A and C share nothing: no chain through B. */
static void test_no_chain(void)
{
	static const uint32_t sa[] = { 0, 1 }, sb[] = { 1, 2 }, sc[] = { 2, 3 };
	static const uint64_t ca[] = { 10, 90 }, cb[] = { 50, 50 }, cc[] = { 90, 10 };
	const struct problem_cluster cl[] = { C(sa, ca), C(sb, cb), C(sc, cc) };
	uint32_t label[3];
	size_t np;

	/* A->B 0.9, B->A 0.5: linked at 0.5; B->C 0.5, C->B 0.9: linked at 0.5; A, C: 1 */
	group(cl, 3, 4, label, &np);
	CHECK_INT((long long)np, 2);
	CHECK(label[0] != label[2]);
}

#define P(s, c, f) { s, c, sizeof(s) / sizeof(s[0]), false, f, sizeof(f) / sizeof(f[0]) }

/* Call paths: a query's CPU thinly sampled (Q1, Q2 each in 6 of its 10 streams, 2 in common: 1/3 of
 * each, too little for the linkage; Q3 where the paths part) is one problem under the query's path
 * main > dispatch > query; R1, R2 another query's, one problem; the two queries share no stream
 * under dispatch and stay apart; the machine's cluster M under the query's path stays its own; X and
 * Y, whose paths have no frame in common, stay apart though they share a stream. */
static void test_paths(void)
{
	static const uint32_t s1[] = { 0, 1, 2, 3, 4, 5 }, s2[] = { 4, 5, 6, 7, 8, 9 }, s3[] = { 0, 2, 7, 9 },
			      sr1[] = { 10, 11, 12, 13 }, sr2[] = { 12, 13, 14, 15 }, sm[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 },
			      sx[] = { 16, 17, 18 }, sy[] = { 18, 19, 20 };
	static const uint64_t c6[] = { 10, 10, 10, 10, 10, 10 }, c4[] = { 10, 10, 10, 10 }, c3[] = { 10, 10, 10 },
			      cm[] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	static const uint32_t p1[] = { 1, 2, 10, 11 }, p2[] = { 1, 2, 10, 12, 13 }, p3[] = { 1, 2, 10 },
			      pr1[] = { 1, 2, 20, 21 }, pr2[] = { 1, 2, 20, 22 }, pm[] = { 1, 2, 10, 99 },
			      px[] = { 30, 31 }, py[] = { 40, 41 };
	const struct problem_cluster cl[] = { P(s1, c6, p1), P(s2, c6, p2), P(s3, c4, p3), P(sr1, c4, pr1),
					      P(sr2, c4, pr2), { sm, cm, 10, true, pm, 4 }, P(sx, c3, px),
					      P(sy, c3, py) };
	uint32_t label[8];
	size_t np;

	group(cl, 8, 21, label, &np);
	CHECK_INT((long long)np, 5);
	CHECK_INT(label[0], 0);
	CHECK_INT(label[1], 0);
	CHECK_INT(label[2], 0);
	CHECK_INT(label[3], 1);
	CHECK_INT(label[4], 1);
	CHECK_INT(label[5], 2);
	CHECK_INT(label[6], 3);
	CHECK_INT(label[7], 4);
}

/* Where units meet (under main > dispatch: A and B share none of the 2.3 streams chance would give
 * them), each child joins the group whose head it shares a stream with: C, in one of A's streams,
 * joins A by its path alone (it costs 40 of A's 50: no fragment); D, in a stream of its own (too
 * small for chance to say), stays alone. Under main > other, X and Y share no stream, but chance would
 * give them 0.75: nothing shows they are of one unit, or of two, and they stay apart. */
static void test_paths_apart(void)
{
	static const uint32_t sa[] = { 0, 1, 2, 3, 4 }, sb[] = { 5, 6, 7, 8, 9 }, sc[] = { 2 }, sd[] = { 10 },
			      sx[] = { 11, 12, 13 }, sy[] = { 14 };
	static const uint64_t c5[] = { 10, 10, 10, 10, 10 }, c1[] = { 40 }, c3[] = { 10, 10, 10 };
	static const uint32_t pa[] = { 1, 2, 3 }, pb[] = { 1, 2, 4 }, pc[] = { 1, 2, 5 }, pd[] = { 1, 2, 6 },
			      px[] = { 1, 7, 8 }, py[] = { 1, 7, 9 };
	const struct problem_cluster cl[] = { P(sa, c5, pa), P(sb, c5, pb), P(sc, c1, pc), P(sd, c1, pd),
					      P(sx, c3, px), P(sy, c1, py) };
	uint32_t label[6];
	size_t np;

	group(cl, 6, 15, label, &np);
	CHECK_INT((long long)np, 5);
	CHECK_INT(label[0], 0);
	CHECK_INT(label[1], 1);
	CHECK_INT(label[2], 0);
	CHECK_INT(label[3], 2);
	CHECK_INT(label[4], 3);
	CHECK_INT(label[5], 4);
}

/* A node that (nearly) every stream passes, request dispatch: A and B below it, each in a part of the
 * requests, share what chance gives them (3 of 4.2) and stay two problems. Beside a second pair of the
 * same shape in other streams, each pair's path is passed by half of the streams: each pair is one. */
static void test_paths_dispatch(void)
{
	static const uint32_t sa[] = { 0, 1, 2, 3, 4, 5 }, sb[] = { 3, 4, 5, 6, 7, 8, 9 },
			      sc[] = { 10, 11, 12, 13, 14, 15 }, sd[] = { 13, 14, 15, 16, 17, 18, 19 };
	static const uint64_t c6[] = { 10, 10, 10, 10, 10, 10 }, c7[] = { 10, 10, 10, 10, 10, 10, 10 };
	static const uint32_t pa[] = { 1, 2, 3 }, pb[] = { 1, 2, 4 }, pc[] = { 1, 5, 6, 3 }, pd[] = { 1, 5, 6, 4 };
	const struct problem_cluster one[] = { P(sa, c6, pa), P(sb, c7, pb) };
	const struct problem_cluster two[] = { P(sa, c6, pa), P(sb, c7, pb), P(sc, c6, pc), P(sd, c7, pd) };
	uint32_t label[4];
	size_t np;

	group(one, 2, 10, label, &np);
	CHECK_INT((long long)np, 2);
	group(two, 4, 20, label, &np);
	CHECK_INT((long long)np, 2);
	CHECK_INT(label[0], label[1]);
	CHECK_INT(label[2], label[3]);
	CHECK(label[0] != label[2]);
}

/* frame names of the title tests: id = index */
static const char *const names[] = {
	"app!main", "app!Router::dispatch", "app!SearchQuery::handle", "app!ext4_sync_file", "k!schedule",
	"k!__schedule", "app!Indexer::run", "libx.so+0x1a2b", "[unknown]", "app!Mutex::lock", "0x7f001234",
};
static const uint64_t nstreams[] = { 100, 90, 30, 20, 95, 95, 10, 5, 99, 40, 1 };

static bool named(uint32_t f, void *arg)
{
	(void)arg;
	return problem_frame_named(names[f], strlen(names[f]));
}

static uint64_t streams_of(uint32_t f, void *arg)
{
	(void)arg;
	return nstreams[f];
}

static const struct problem_frames frames = { named, streams_of, NULL };

#define U(s) { s, sizeof(s) / sizeof(s[0]), s, sizeof(s) / sizeof(s[0]), NULL, 0 }

/* Fragments of one problem, thinly sampled (a few CPU samples per stream): the hub H in streams 0-9
 * (most of its cost in 0-3), S1 and S2 each in a few of them (and S2 a little elsewhere) join it; S3,
 * half in H's streams, does not; S4, fully in them but in more than half of as many streams and
 * costing more than half as much, does not; S5, in 2 of them and costing half as much, joins (a home:
 * twice the cost, or more cost and twice the streams); U and V are problems of their own. */
static void test_fragments(void)
{
	static const uint32_t sh[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, s1[] = { 1, 2 }, s2[] = { 3, 4, 12 },
			      s3[] = { 5, 13 }, s4[] = { 4, 5, 6, 7, 8, 9 }, s5[] = { 6, 7 },
			      su[] = { 10, 11, 12, 13, 14, 15, 16, 17, 18, 19 },
			      sv[] = { 20, 21, 22, 23, 24, 25, 26, 27, 28, 29 };
	static const uint64_t ch[] = { 50, 50, 50, 50, 5, 5, 5, 5, 5, 5 }, c1[] = { 30, 40 },
			      c2[] = { 30, 30, 10 }, c3[] = { 20, 20 }, c4[] = { 20, 20, 20, 20, 20, 20 },
			      c5[] = { 60, 60 }, cu[] = { 50, 50, 50, 50, 50, 50, 50, 50, 50, 50 },
			      cv[] = { 5, 5, 5, 5, 5, 5, 5, 5, 5, 5 };
	const struct problem_cluster cl[] = { C(sh, ch), C(s1, c1), C(s2, c2), C(s3, c3), C(s4, c4), C(su, cu),
					      C(sv, cv), C(s5, c5) };
	uint32_t label[8];
	size_t np;

	/* S1 in H's streams: 70/70; S2: 60/70 = 0.86; H's share of the 30 streams 1/3 (x 1.5 = 0.5);
	 * S3: 20/40 = 0.5 < 0.6; S4: 6 streams > 10 / 2, 120 > 230 / 2; S5: 2 streams <= 10 / 2 and
	 * 120 < 230 (S4, as costly, is no home of it) */
	group(cl, 8, 30, label, &np);
	CHECK_INT((long long)np, 5);
	CHECK_INT(label[0], 0);
	CHECK_INT(label[1], 0);
	CHECK_INT(label[2], 0);
	CHECK_INT(label[3], 1);
	CHECK_INT(label[4], 2);
	CHECK_INT(label[5], 3);
	CHECK_INT(label[6], 4);
	CHECK_INT(label[7], 0);
}

/* Streams where a cluster's cost is 0 (an event of no cost: the stack taken when a violation is
 * found) count once: one problem, and nothing written past the end of the work arrays. */
static void test_zero_costs(void)
{
	static const uint32_t sg[] = { 0, 1, 2, 3, 4 }, sh[] = { 0, 1, 2, 3, 4 }, sx[] = { 5 };
	static const uint64_t cg[] = { 0, 0, 0, 0, 10 }, ch[] = { 0, 0, 0, 0, 100 }, cx[] = { 1 };
	const struct problem_cluster cl[] = { C(sg, cg), C(sh, ch), C(sx, cx) };
	uint32_t label[3];
	size_t np;

	group(cl, 3, 6, label, &np);
	CHECK_INT((long long)np, 2);
	CHECK_INT(label[0], label[1]);
	CHECK(label[2] != label[0]);
}

/* A costly cluster in every stream is no problem's home: A (90) lies wholly in D's streams (1000),
 * but D is in all of them (share 1: a fragment would need 1.5). */
static void test_everywhere_costly(void)
{
	static const uint32_t sa[] = { 0, 1, 2 }, sd[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	static const uint64_t ca[] = { 30, 30, 30 }, cd[] = { 100, 100, 100, 100, 100, 100, 100, 100, 100, 100 };
	const struct problem_cluster cl[] = { C(sa, ca), C(sd, cd) };
	uint32_t label[2];
	size_t np;

	group(cl, 2, 10, label, &np);
	CHECK_INT((long long)np, 2);
	CHECK(label[0] != label[1]);
}

/* CPU starvation is the machine's: its cluster M shares the streams of the code's A exactly, and
 * still is a problem of its own; B, a small code cluster wholly in M's streams, is no fragment of it. */
static void test_machine_apart(void)
{
	static const uint32_t sa[] = { 0, 1, 2 }, sm[] = { 0, 1, 2, 3 }, sb[] = { 3 };
	static const uint64_t ca[] = { 100, 100, 100 }, cm[] = { 100, 100, 100, 100 }, cb[] = { 10 };
	const struct problem_cluster cl[] = { C(sa, ca), { sm, cm, 4, true, NULL, 0 }, C(sb, cb) };
	uint32_t label[3];
	size_t np;

	group(cl, 3, 4, label, &np);
	CHECK_INT((long long)np, 3);
	CHECK(label[0] != label[1] && label[1] != label[2] && label[0] != label[2]);
}

/* Two units that differ only by their caller, and a third lock wait: the distinguishing frame, then
 * the least shared below it (ext4_sync_file, not schedule > __schedule); hex and pseudo skipped. */
static void test_titles(void)
{
	static const uint32_t a[] = { 0, 1, 2, 7, 3, 4, 5 }, b[] = { 0, 1, 6, 8, 3, 4, 5 }, c[] = { 0, 1, 9, 4, 5 };
	const struct problem_unit u[] = { U(a), U(b), U(c) };
	uint32_t out[3 * PROBLEM_TITLE_MAX];
	uint8_t nout[3];

	CHECK_INT(problem_titles(u, 3, &frames, out, nout), 0);
	/* a: SearchQuery::handle (only a's; the hex frame is too but is not named) > ext4_sync_file */
	CHECK_INT(nout[0], 2);
	CHECK_INT(out[0], 2);
	CHECK_INT(out[1], 3);
	CHECK_INT(nout[1], 2);
	CHECK_INT(out[PROBLEM_TITLE_MAX], 6);
	CHECK_INT(out[PROBLEM_TITLE_MAX + 1], 3);
	/* c: Mutex::lock, then schedule is shared by both others: not more than half of them */
	CHECK_INT(nout[2], 1);
	CHECK_INT(out[2 * PROBLEM_TITLE_MAX], 9);
}

/* A lone unit: its two most specific named frames (fewest streams: ext4_sync_file, then
 * dispatch), in order; nothing named: the innermost frames as they are. */
static void test_titles_alone(void)
{
	static const uint32_t a[] = { 0, 1, 3, 4, 8 }, h[] = { 10, 7, 8 };
	const struct problem_unit one[] = { U(a) }, hex[] = { U(h), U(a) };
	uint32_t out[2 * PROBLEM_TITLE_MAX];
	uint8_t nout[2];

	CHECK_INT(problem_titles(one, 1, &frames, out, nout), 0);
	CHECK_INT(nout[0], 2);
	CHECK_INT(out[0], 1);
	CHECK_INT(out[1], 3);
	CHECK_INT(problem_titles(hex, 2, &frames, out, nout), 0);
	CHECK_INT(nout[0], 3);
	CHECK_INT(out[0], 10);
	CHECK_INT(out[1], 7);
	CHECK_INT(out[2], 8);
}

/* A problem's title comes from whichever of its clusters' common parts holds its best frame: A's
 * costliest cluster has only main > dispatch, which B has too; its other one has
 * SearchQuery::handle, A's alone. Without that other sequence, A would read main > dispatch. */
static void test_titles_members(void)
{
	static const uint32_t lead[] = { 0, 1 }, other[] = { 0, 1, 2 }, aset[] = { 0, 1, 0, 1, 2 }, b[] = { 0, 1, 9 };
	const struct problem_seq alt[] = { { other, 3 } };
	const struct problem_unit u[] = { { lead, 2, aset, 5, alt, 1 }, U(b) },
				  lone[] = { { lead, 2, aset, 5, NULL, 0 }, U(b) };
	uint32_t out[2 * PROBLEM_TITLE_MAX];
	uint8_t nout[2];

	CHECK_INT(problem_titles(u, 2, &frames, out, nout), 0);
	CHECK_INT(nout[0], 1);
	CHECK_INT(out[0], 2);
	CHECK_INT(nout[1], 1);
	CHECK_INT(out[PROBLEM_TITLE_MAX], 9);
	CHECK_INT(problem_titles(lone, 2, &frames, out, nout), 0);
	CHECK_INT(nout[0], 2);
	CHECK_INT(out[0], 0);
	CHECK_INT(out[1], 1);
}

static void test_named(void)
{
	CHECK(problem_frame_named("app!main", 8));
	CHECK(!problem_frame_named("libx.so+0x1a2B", 14));
	CHECK(!problem_frame_named("0x7f00", 6));
	CHECK(!problem_frame_named("[cpu run queue]", 15));
	CHECK(!problem_frame_named("", 0));
	CHECK(problem_frame_named("a+0", 3));
	CHECK(problem_frame_named("[kernel.kallsyms]!schedule", 26));
	CHECK(!problem_frame_named("app![unknown]", 13));
	CHECK(!problem_frame_named("app!+0x10", 9));
	CHECK(!problem_frame_named("app!", 4));
	/* the machine's frames: exactly the guard's three pseudo-frames */
	CHECK(problem_frame_machine("[cpu run queue]", 15));
	CHECK(problem_frame_machine("[cgroup throttled]", 18));
	CHECK(problem_frame_machine("[cpu steal]", 11));
	CHECK(!problem_frame_machine("[cpu steal", 10));
	CHECK(!problem_frame_machine("[cpu run queue]x", 16));
	CHECK(!problem_frame_machine("[cpu run queue", 14));
	CHECK(!problem_frame_machine("app!main", 8));
}

int main(void)
{
	RUN(test_same_streams);
	RUN(test_everywhere);
	RUN(test_run_and_wait);
	RUN(test_no_chain);
	RUN(test_fragments);
	RUN(test_everywhere_costly);
	RUN(test_machine_apart);
	RUN(test_zero_costs);
	RUN(test_paths);
	RUN(test_paths_apart);
	RUN(test_paths_dispatch);
	RUN(test_titles);
	RUN(test_titles_alone);
	RUN(test_titles_members);
	RUN(test_named);
	return CHECK_DONE();
}
