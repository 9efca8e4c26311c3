/*
 * Unit tests of the guard agent's shipping budget (agent/guard/prio.c,
 * guard.md "Shipping budget"): priority sampling keeps the worst of a minute,
 * and its weights make the totals unbiased. Fixed seeds: every run draws the
 * same numbers, so a check that holds holds every time.
 */
#include "agent/guard/prio.h"
#include "tests/unit/check.h"

#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXR 10
#define MAXN 64

/* the rule on a case worked by hand: who is kept, evicted, and tau */
static void test_prio_by_hand(void)
{
	struct prio_item it[2];
	struct prio_group g = { 0, 0, 0, 0 };
	int ev;
	int32_t a, b, c;

	prio_pool_init(it, 2);
	a = prio_offer(it, 2, &g, 7, 2, 4, 1, &ev);      /* q 4 */
	CHECK(a >= 0 && !ev);
	b = prio_offer(it, 2, &g, 7, 2, 1, 0.5, &ev);    /* q 2 */
	CHECK(b >= 0 && b != a && !ev);
	c = prio_offer(it, 2, &g, 7, 2, 3, 0.5, &ev);    /* q 6 takes the place of q 2 */
	CHECK_INT(c, b);
	CHECK_INT(ev, 1);
	CHECK_NEAR(g.tau, 2);
	CHECK_INT(prio_offer(it, 2, &g, 7, 2, 1, 1, &ev), PRIO_DROPPED);   /* q 1 */
	CHECK_NEAR(g.tau, 2);
	c = prio_offer(it, 2, &g, 7, 2, 1, 0.2, &ev);    /* q 5 takes the place of q 4 */
	CHECK_INT(c, a);
	CHECK_NEAR(g.tau, 4);
	CHECK_INT(g.offered, 5);
	/* another group finds no free item */
	CHECK_INT(prio_offer(it, 2, &(struct prio_group){ 0, 0, 0, 0 }, 8, 2, 9, 1, &ev), PRIO_FULL);
	CHECK_INT(prio_close(it, 2, &g, 7), 2);
	CHECK_NEAR(it[a].weight, 4.0 / 1);   /* w 1 */
	CHECK_NEAR(it[b].weight, 4.0 / 3);   /* w 3 */
	CHECK(it[a].closed && it[a].group == PRIO_NONE);
	CHECK_INT(g.offered, 0);
	CHECK_NEAR(g.tau, 0);
	/* closed items are not free until released */
	CHECK_INT(prio_offer(it, 2, &g, 7, 2, 1, 1, &ev), PRIO_FULL);
	prio_release(&it[a]);
	CHECK_INT(prio_offer(it, 2, &g, 7, 2, 1, 1, &ev), a);
	/* a budget of 0 ships nothing and still counts */
	CHECK_INT(prio_offer(it, 2, &g, 9, 0, 5, 1, &ev), PRIO_DROPPED);
	CHECK_NEAR(prio_weight(0, 3), 1);
	CHECK_NEAR(prio_weight(6, 3), 2);
}

/* Pareto sizes (alpha 1.1: a heavy tail, finite mean) in ns, at least 1 */
static double pareto(uint64_t *st, double scale)
{
	return ceil(scale / pow(prio_uniform(st), 1 / 1.1));
}

/*
 * Many simulated minutes of n violations of known sizes, budget r: the mean of the estimates of
 * sum(w) and of sum(duration) is within 5 standard errors of the true totals.
 */
static void test_prio_unbiased(void)
{
	static const int pops[] = { 1, 0 /* r / 2 */, -1 /* r */, -2 /* r + 1 */, -3 /* 3 r */, 40 };
	const int minutes = 40000;
	const double thr = 2e6;   /* threshold, ns: duration = thr + w */
	uint64_t st = 26;

	for (int r = 1; r <= MAXR; r++) {
		double worst = 0;

		for (size_t pi = 0; pi < sizeof(pops) / sizeof(pops[0]); pi++) {
			int n = pops[pi] > 0 ? pops[pi] : pops[pi] == 0 ? (r + 1) / 2 : pops[pi] == -1 ? r :
				pops[pi] == -2 ? r + 1 : 3 * r;
			double w[MAXN], tw = 0, td = 0, mw = 0, md = 0, vw = 0, vd = 0;
			struct prio_item it[MAXR];
			struct prio_group g = { 0, 0, 0, 0 };
			int all_one = 1;

			for (int i = 0; i < n; i++) {
				w[i] = pareto(&st, 1e5);
				tw += w[i];
				td += w[i] + thr;
			}
			prio_pool_init(it, (uint32_t)r);
			for (int k = 1; k <= minutes; k++) {
				double ew = 0, ed = 0, dw, dd;
				int ev, kept = 0;

				for (int i = 0; i < n; i++)
					(void)prio_offer(it, (uint32_t)r, &g, 0, (uint32_t)r, w[i], prio_uniform(&st), &ev);
				prio_close(it, (uint32_t)r, &g, 0);
				for (int i = 0; i < r; i++) {
					if (!it[i].closed)
						continue;
					kept++;
					all_one &= it[i].weight == 1;
					ew += it[i].weight * it[i].w;
					ed += it[i].weight * (it[i].w + thr);
					prio_release(&it[i]);
				}
				if (kept != (n < r ? n : r))
					all_one = -1;
				/* Welford's running mean and variance */
				dw = ew - mw;
				mw += dw / k;
				vw += dw * (ew - mw);
				dd = ed - md;
				md += dd / k;
				vd += dd * (ed - md);
			}
			{
				double sew = sqrt(vw / (minutes - 1) / minutes), sed = sqrt(vd / (minutes - 1) / minutes);
				double rw = fabs(mw - tw) / tw, rd = fabs(md - td) / td;

				fprintf(stderr, "     r=%2d n=%2d: sum(w) %.6g est %.6g (rel err %.2e, %.2f se); "
					"sum(dur) rel err %.2e (%.2f se)\n", r, n, tw, mw, rw,
					sew > 0 ? fabs(mw - tw) / sew : 0, rd, sed > 0 ? fabs(md - td) / sed : 0);
				check_made(!(fabs(mw - tw) <= 5 * sew + 1e-9 * tw));
				check_made(!(fabs(md - td) <= 5 * sed + 1e-9 * td));
				if (rw > worst)
					worst = rw;
				if (rd > worst)
					worst = rd;
			}
			/* at or under the budget: everything ships, weight exactly 1, the totals exact */
			if (n <= r) {
				CHECK_INT(all_one, 1);
				CHECK(mw == tw || fabs(mw - tw) <= 1e-9 * tw);
			} else {
				CHECK(all_one != -1);   /* r kept every minute */
			}
		}
		fprintf(stderr, "     r=%2d: worst relative error %.2e\n", r, worst);
	}
}

/* A violation whose size dominates its minute (1e12 times any other) is shipped, with weight 1. */
static void test_prio_worst_first(void)
{
	uint64_t st = 7;

	for (int r = 1; r <= MAXR; r++) {
		int shipped = 0, one = 0;
		const int minutes = 2000;

		for (int k = 0; k < minutes; k++) {
			struct prio_item it[MAXR];
			struct prio_group g = { 0, 0, 0, 0 };
			int ev, big = -1;
			const int n = 40, at = k % n;   /* anywhere in the minute */

			prio_pool_init(it, (uint32_t)r);
			for (int i = 0; i < n; i++) {
				double w = i == at ? 1e15 : 1 + floor(prio_uniform(&st) * 1000);
				int32_t got = prio_offer(it, (uint32_t)r, &g, 0, (uint32_t)r, w, prio_uniform(&st), &ev);

				if (i == at)
					big = got;
				else if (got == big)
					big = -1;   /* evicted */
			}
			prio_close(it, (uint32_t)r, &g, 0);
			if (big >= 0 && it[big].w == 1e15) {
				shipped++;
				one += it[big].weight == 1;
			}
		}
		CHECK_INT(shipped, minutes);
		CHECK_INT(one, minutes);
	}
}

/* u in (0, 1]; a forked child draws a sequence of its own */
static void test_prio_random(void)
{
	uint64_t st = prio_seed(), mine;
	double sum = 0, lo = 1, hi = 0;
	int fd[2];
	pid_t pid;

	for (int i = 0; i < 100000; i++) {
		double u = prio_uniform(&st);

		sum += u;
		lo = u < lo ? u : lo;
		hi = u > hi ? u : hi;
	}
	CHECK(lo > 0 && hi <= 1);
	CHECK(fabs(sum / 100000 - 0.5) < 0.01);
	CHECK(pipe(fd) == 0);
	pid = fork();
	if (pid == 0) {
		uint64_t s = prio_seed();

		_exit(write(fd[1], &s, sizeof(s)) == (ssize_t)sizeof(s) ? 0 : 1);
	}
	mine = prio_seed();
	{
		uint64_t theirs = 0;
		int status = 0;

		CHECK(read(fd[0], &theirs, sizeof(theirs)) == (ssize_t)sizeof(theirs));
		waitpid(pid, &status, 0);
		CHECK(theirs != mine && theirs != 0);
	}
	close(fd[0]);
	close(fd[1]);
}

int main(void)
{
	RUN(test_prio_by_hand);
	RUN(test_prio_unbiased);
	RUN(test_prio_worst_first);
	RUN(test_prio_random);
	return CHECK_DONE();
}
