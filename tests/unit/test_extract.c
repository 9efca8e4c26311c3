/*
 * Tests of extract_sort_events() (miner/extract.h), the sort of a stream's events before their
 * AOI: every order a stream's rows can come back in (sorted, reversed, runs interleaved, an early
 * or a late outlier, ties, random) against qsort with a comparator written here, the events set
 * aside counted where the order says how many, and one vector reused across calls of every size.
 * The packed events' records (common/evpack.h) and the rows of their COPY (miner/copyread.h): the
 * exact bytes of a record (the same as sql/030_event_chunks.sql's sm_event_record(), checked by
 * tests/integration/test_schema.sh), values at their limits, the kind filter, and every row
 * layout that is not a chunk's refused. Reading and AOI are tested through sm-miner
 * (tests/integration/test_parts.sh, test_miner.sh).
 */
#include "common/evpack.h"
#include "common/vec.h"
#include "common/wire.h"
#include "miner/copyread.h"
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

/* The record of the event of sql/030_event_chunks.sql's check (test_schema.sh): its bytes in hex. */
static const char RECORD_HEX[] = "0102030405060708" "fffffffffffffff6" "11121314" "7fffffff" "fffffffe" "77";

static void test_record(void)
{
	struct evpack_event e = { .ts_ns = 0x0102030405060708LL, .dur_ns = -10, .tid = 0x11121314,
				  .stack = INT32_MAX, .readier_tid = -2, .kind = 'w' }, back;
	unsigned char rec[EVPACK_RECORD];
	char hex[2 * EVPACK_RECORD + 1];

	evpack_put(rec, &e);
	for (int i = 0; i < EVPACK_RECORD; i++)
		snprintf(hex + 2 * i, 3, "%02x", rec[i]);
	CHECK_STR(hex, RECORD_HEX);
	CHECK_INT(evpack_get(rec, &back), 0);
	CHECK(back.ts_ns == e.ts_ns && back.dur_ns == e.dur_ns && back.tid == e.tid && back.stack == e.stack &&
	      back.readier_tid == e.readier_tid && back.kind == 'w');
	e = (struct evpack_event){ INT64_MIN, INT64_MAX, INT32_MIN, 0, INT32_MAX, 'r' };
	evpack_put(rec, &e);
	CHECK_INT(evpack_get(rec, &back), 0);
	CHECK(back.ts_ns == INT64_MIN && back.dur_ns == INT64_MAX && back.tid == INT32_MIN && back.stack == 0 &&
	      back.readier_tid == INT32_MAX && back.kind == 'r');
	rec[28] = 'x';
	CHECK_INT(evpack_get(rec, &back), -1);
	CHECK_INT(evpack_count(0), -1);
	CHECK_INT(evpack_count(EVPACK_RECORD), 1);
	CHECK_INT(evpack_count(EVPACK_RECORD * 3 + 1), -1);
	CHECK_INT(evpack_count((size_t)EVPACK_RECORD * EVPACK_CHUNK), EVPACK_CHUNK);
	CHECK_INT(evpack_count((size_t)EVPACK_RECORD * (EVPACK_CHUNK + 1)), -1);
}

struct taken {
	int64_t ref[EVPACK_CHUNK];
	struct wire_event e[EVPACK_CHUNK];
	size_t n, stop_at;
};

static int take(void *arg, int64_t ref, const struct wire_event *e)
{
	struct taken *t = arg;

	if (t->n == t->stop_at)
		return -1;
	t->ref[t->n] = ref;
	t->e[t->n++] = *e;
	return 0;
}

/* A binary COPY row of a chunk: 2 fields, stream_ref (reflen bytes), then the n records of
 * chunk_event(). Returns its length. */
static size_t chunk_row(unsigned char *p, int nfields, int reflen, size_t n)
{
	size_t len = 0, dlen = n * EVPACK_RECORD;

	p[len++] = 0;
	p[len++] = (unsigned char)nfields;
	p[len++] = 0, p[len++] = 0, p[len++] = 0, p[len++] = (unsigned char)reflen;
	for (int i = 0; i < reflen; i++)
		p[len++] = (unsigned char)(i == reflen - 1 ? 42 : 0);
	p[len++] = (unsigned char)(dlen >> 24), p[len++] = (unsigned char)(dlen >> 16);
	p[len++] = (unsigned char)(dlen >> 8), p[len++] = (unsigned char)dlen;
	for (size_t i = 0; i < n; i++) {
		struct evpack_event e = { .ts_ns = (int64_t)i * 1000 - 5, .dur_ns = (int64_t)i, .tid = -(int32_t)i,
					  .stack = (int32_t)(i % 7) + 1, .readier_tid = i % 3 ? (int32_t)i + 9 : 0,
					  .kind = i % 3 ? 'w' : 'r' };

		evpack_put(p + len, &e);
		len += EVPACK_RECORD;
	}
	return len;
}

static void test_copy_rows(void)
{
	static unsigned char row[64 + (EVPACK_CHUNK + 1) * EVPACK_RECORD];
	static struct taken t;
	size_t len = chunk_row(row, 2, 8, EVPACK_CHUNK);
	size_t waits = 0;
	bool same = true;

	t = (struct taken){ .stop_at = SIZE_MAX };
	CHECK_INT(copyread_row(row, len, 0, take, &t), 0);
	CHECK_INT(t.n, EVPACK_CHUNK);
	for (size_t i = 0; i < t.n; i++)
		same &= t.ref[i] == 42 && t.e[i].ts_ns == (int64_t)i * 1000 - 5 && t.e[i].dur_ns == (int64_t)i &&
			t.e[i].tid == -(int64_t)i && t.e[i].stack == (uint32_t)(i % 7) + 1 &&
			t.e[i].readier_tid == (i % 3 ? (int64_t)i + 9 : 0) &&
			t.e[i].kind == (i % 3 ? WIRE_WAIT : WIRE_RUN);
	CHECK(same);
	/* the waits alone, then the run events alone, in order */
	t = (struct taken){ .stop_at = SIZE_MAX };
	CHECK_INT(copyread_row(row, len, 'w', take, &t), 0);
	for (size_t i = 0; i < EVPACK_CHUNK; i++)
		waits += i % 3 != 0;
	CHECK_INT(t.n, waits);
	CHECK(t.e[0].ts_ns == 1000 - 5 && t.e[1].ts_ns == 2000 - 5 && t.e[2].ts_ns == 4000 - 5);
	t = (struct taken){ .stop_at = SIZE_MAX };
	CHECK_INT(copyread_row(row, len, 'r', take, &t), 0);
	CHECK_INT(t.n, EVPACK_CHUNK - waits);
	CHECK(t.e[1].ts_ns == 3000 - 5 && t.e[1].kind == WIRE_RUN);
	/* each() stops it at once */
	t = (struct taken){ .stop_at = 5 };
	CHECK_INT(copyread_row(row, len, 0, take, &t), -2);
	CHECK_INT(t.n, 5);
	/* not a chunk's row: fields, the ref's width, the data's length, a record's kind, too many */
	t = (struct taken){ .stop_at = SIZE_MAX };
	CHECK_INT(copyread_row(row, chunk_row(row, 3, 8, 2), 0, take, &t), -1);
	CHECK_INT(copyread_row(row, chunk_row(row, 2, 4, 2), 0, take, &t), -1);
	len = chunk_row(row, 2, 8, 2);
	CHECK_INT(copyread_row(row, len - 1, 0, take, &t), -1);
	CHECK_INT(copyread_row(row, len + 1, 0, take, &t), -1);
	CHECK_INT(copyread_row(row, chunk_row(row, 2, 8, 0), 0, take, &t), -1);
	CHECK_INT(copyread_row(row, 10, 0, take, &t), -1);
	CHECK_INT(t.n, 0);
	len = chunk_row(row, 2, 8, 2);
	row[len - 1] = 'x';
	CHECK_INT(copyread_row(row, len, 0, take, &t), -1);
	CHECK_INT(copyread_row(row, chunk_row(row, 2, 8, EVPACK_CHUNK + 1), 0, take, &t), -1);
	CHECK_INT(t.n, 1); /* the record before the one of kind 'x' */
}

int main(void)
{
	RUN(test_orders);
	RUN(test_random);
	RUN(test_record);
	RUN(test_copy_rows);
	return CHECK_DONE();
}
