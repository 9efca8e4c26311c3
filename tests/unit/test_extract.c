/*
 * Tests of extract_sort_events() (miner/extract.h), the sort of a stream's events before their
 * AOI: every order a stream's rows can come back in (sorted, reversed, runs interleaved, an early
 * or a late outlier, ties, random) against qsort with a comparator written here, the events set
 * aside counted where the order says how many, and one vector reused across calls of every size.
 * Reading and AOI are tested through sm-miner (tests/integration/test_parts.sh, test_miner.sh).
 */
#include "common/vec.h"
#include "common/wire.h"
#include "miner/extract.h"
#include "tests/unit/check.h"

#include <stdint.h>
#include <stdlib.h>

/* The order the miner wants, written out again: time, duration, thread, kind, stack, readier. */
static int ref_cmp(const void *a, const void *b)
{
	const struct wire_event *x = a, *y = b;
	int64_t kx[6] = { x->ts_ns, x->dur_ns, x->tid, x->kind, x->stack, x->readier_tid };
	int64_t ky[6] = { y->ts_ns, y->dur_ns, y->tid, y->kind, y->stack, y->readier_tid };

	for (int i = 0; i < 6; i++)
		if (kx[i] != ky[i])
			return kx[i] < ky[i] ? -1 : 1;
	return 0;
}

/* Event i of a stream in order. With ties, four events share a time, the duration tells the
 * first three apart, and the fourth is the third again, equal in every field. */
static struct wire_event event_at(size_t i, bool ties)
{
	struct wire_event e = { 0 };

	if (ties && i % 4 == 3)
		i--;
	e.ts_ns = ties ? (int64_t)(i / 4) * 1000 : (int64_t)i * 1000;
	e.dur_ns = ties ? 5 + (int64_t)(i % 4) : 5;
	e.tid = (int64_t)(i % 4);
	e.kind = (uint8_t)(i % 2 ? WIRE_WAIT : WIRE_RUN);
	e.stack = (uint32_t)(i % 7);
	e.readier_tid = e.kind == WIRE_WAIT ? (int64_t)(i % 3) : 0;
	return e;
}

/* Sorts ev with extract_sort_events() and checks it against qsort of a copy; the events it set
 * aside, or SIZE_MAX when out of memory. */
static size_t check_sorted(const char *what, struct wire_event *ev, size_t n, struct vec *aside)
{
	struct wire_event *want = malloc((n + 1) * sizeof(*want));
	size_t bad = n;

	if (!want) {
		CHECK(!"out of memory");
		return SIZE_MAX;
	}
	for (size_t i = 0; i < n; i++)
		want[i] = ev[i];
	qsort(want, n, sizeof(*want), ref_cmp);
	if (extract_sort_events(ev, n, aside) < 0) {
		CHECK(!"extract_sort_events failed");
		free(want);
		return SIZE_MAX;
	}
	for (size_t i = 0; i < n && bad == n; i++)
		if (ref_cmp(&ev[i], &want[i]) != 0)
			bad = i;
	if (bad != n)
		fprintf(stderr, "  %s: n=%zu, first difference at %zu\n", what, n, bad);
	CHECK_INT(bad, n);
	free(want);
	return aside->len;
}

static void test_orders(void)
{
	enum { N = 1000 };
	struct vec aside = VEC_INIT(struct wire_event);
	struct wire_event ev[N];

	for (int ties = 0; ties < 2; ties++) {
		for (size_t i = 0; i < N; i++)
			ev[i] = event_at(i, ties);
		CHECK_INT(check_sorted("sorted", ev, N, &aside), 0);

		for (size_t i = 0; i < N; i++)
			ev[i] = event_at(N - 1 - i, ties);
		/* every one below the first (and, with ties, its equal next to it): set aside */
		CHECK_INT(check_sorted("reversed", ev, N, &aside), ties ? N - 2 : N - 1);

		/* the storage order test_parts makes: five interleaved runs (seq % 5) */
		for (size_t i = 0, o = 0; i < 5; i++)
			for (size_t j = i; j < N; j += 5)
				ev[o++] = event_at(j, ties);
		check_sorted("five runs interleaved", ev, N, &aside);

		/* the latest event first: everything after it goes aside (but its equal, with ties) */
		for (size_t i = 0; i < N; i++)
			ev[i] = event_at(i ? i - 1 : N - 1, ties);
		CHECK_INT(check_sorted("an early outlier", ev, N, &aside), ties ? N - 2 : N - 1);

		/* the earliest event last: it alone goes aside */
		for (size_t i = 0; i < N; i++)
			ev[i] = event_at(i + 1 < N ? i + 1 : 0, ties);
		CHECK_INT(check_sorted("a late outlier", ev, N, &aside), 1);

		/* two runs each in order, the second's times inside the first's */
		for (size_t i = 0; i < N / 2; i++) {
			ev[i] = event_at(2 * i, ties);
			ev[N / 2 + i] = event_at(2 * i + 1, ties);
		}
		check_sorted("two runs", ev, N, &aside);
	}
	/* none, one, two */
	CHECK_INT(check_sorted("empty", ev, 0, &aside), 0);
	ev[0] = event_at(3, false);
	CHECK_INT(check_sorted("one", ev, 1, &aside), 0);
	ev[0] = event_at(3, false);
	ev[1] = event_at(2, false);
	CHECK_INT(check_sorted("two reversed", ev, 2, &aside), 1);
	CHECK(ev[0].ts_ns == 2000 && ev[1].ts_ns == 3000);
	vec_free(&aside);
}

/* Random streams of random sizes through one vector: a few events moved far, blocks swapped,
 * or all shuffled. */
static void test_random(void)
{
	struct vec aside = VEC_INIT(struct wire_event);
	size_t cap = 5000, failed = 0;
	struct wire_event *ev = malloc(cap * sizeof(*ev));

	if (!ev) {
		CHECK(!"out of memory");
		return;
	}
	for (int t = 0; t < 300; t++) {
		size_t n = check_rand() % cap, moved;
		bool ties = (t / 3) % 2;

		for (size_t i = 0; i < n; i++)
			ev[i] = event_at(i, ties);
		switch (t % 3) {
		case 0: /* k events moved elsewhere */
			moved = n ? check_rand() % (n / 10 + 1) : 0;
			for (size_t m = 0; m < moved; m++) {
				size_t a = check_rand() % n, b = check_rand() % n;
				struct wire_event x = ev[a];

				ev[a] = ev[b];
				ev[b] = x;
			}
			break;
		case 1: /* runs of the stored order: blocks of up to 64 swapped with their neighbour */
			for (size_t at = 0; at + 128 <= n; at += 128 + check_rand() % 512) {
				size_t len = 1 + check_rand() % 64;

				for (size_t i = 0; i < len; i++) {
					struct wire_event x = ev[at + i];

					ev[at + i] = ev[at + len + i];
					ev[at + len + i] = x;
				}
			}
			break;
		default: /* shuffled */
			for (size_t i = n; i > 1; i--) {
				size_t j = check_rand() % i;
				struct wire_event x = ev[i - 1];

				ev[i - 1] = ev[j];
				ev[j] = x;
			}
		}
		if (check_sorted("random", ev, n, &aside) == SIZE_MAX)
			failed++;
	}
	CHECK_INT(failed, 0);
	free(ev);
	vec_free(&aside);
}

int main(void)
{
	RUN(test_orders);
	RUN(test_random);
	return CHECK_DONE();
}
