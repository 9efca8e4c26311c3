/*
 * Tests of AOI extraction (miner/aoi.h, docs/aoi.md): hand-built streams with
 * the exact events, edges and critical-path segments each mode must give; the
 * real scheduler recordings, where the wait graph must reach the thread that
 * wakes the symptom thread; random streams checked against naive versions of
 * the definitions written here; the content filter; and a million events, where
 * the modes must nest (thread within critical path within wait graph within
 * stream). The time to extract is in make bench, not here.
 *
 * Usage: test_aoi [DATA_DIR]  (else $SM_DATA, else ../shared/data)
 */
#include "formats/import.h"
#include "formats/perf.h"
#include "common/util.h"
#include "common/wire.h"
#include "miner/aoi.h"
#include "tests/unit/check.h"

#include <stdbool.h>
#include <stdlib.h>

#define END UINT32_MAX

#define RUNEV(tid_, ts_, dur_) \
	{ .kind = WIRE_RUN, .tid = (tid_), .ts_ns = (ts_), .dur_ns = (dur_) }
#define WAITEV(tid_, ts_, dur_, readier_) \
	{ .kind = WIRE_WAIT, .tid = (tid_), .ts_ns = (ts_), .dur_ns = (dur_), .readier_tid = (readier_) }
#define NEV(arr) (sizeof(arr) / sizeof((arr)[0]))

static const char *data_dir = "../shared/data";

static struct wire_symptom symptom(int64_t tid, int64_t t0, int64_t t1)
{
	return (struct wire_symptom){ .kind = "test", .tid = tid, .start_ns = t0, .end_ns = t1,
				      .threshold_ns = -1 };
}

static size_t list_len(const uint32_t *want)
{
	size_t n = 0;

	while (want[n] != END)
		n++;
	return n;
}

static void print_list(const char *what, const uint32_t *v, size_t n, size_t step)
{
	fprintf(stderr, "    %s {", what);
	for (size_t i = 0; i < n; i += step) {
		fprintf(stderr, "%s%u", i ? ", " : "", v[i]);
		if (step == 2)
			fprintf(stderr, "->%u", v[i + 1]);
	}
	fprintf(stderr, "}\n");
}

/* got[0..n) == want (END-terminated); step 2 for edge pairs. */
static void check_list(int line, const char *what, const uint32_t *got, size_t n,
		       const uint32_t *want, size_t step)
{
	size_t nw = list_len(want);

	check_made(0);
	if (nw == n * step && (n == 0 || memcmp(got, want, n * step * sizeof(*got)) == 0))
		return;
	fprintf(stderr, "  %s:%d: %s differs\n", __FILE__, line, what);
	print_list("got     ", got, n * step, step);
	print_list("expected", want, nw, step);
	check_made(1);
}

/* Extracts with mode m and compares the events, and the edges when `edges` is given. */
static void expect(int line, struct aoi *a, const struct wire_event *ev, size_t n,
		   const struct wire_symptom *sym, enum aoi_mode m, const uint32_t *want,
		   const uint32_t *edges)
{
	const uint32_t *out, (*e)[2];
	size_t nout, ne;
	char what[64];

	if (aoi_extract(a, ev, n, sym, m, &out, &nout) != 0) {
		fprintf(stderr, "  %s:%d: aoi_extract(%s): %s\n", __FILE__, line, aoi_mode_name(m),
			aoi_error(a));
		check_made(1);
		return;
	}
	snprintf(what, sizeof(what), "%s events", aoi_mode_name(m));
	check_list(line, what, out, nout, want, 1);
	ne = aoi_edges(a, &e);
	if (edges) {
		snprintf(what, sizeof(what), "%s edges", aoi_mode_name(m));
		check_list(line, what, ne ? e[0] : NULL, ne, edges, 2);
	} else if (m != AOI_WAITGRAPH && m != AOI_CRITICAL && ne) {
		fprintf(stderr, "  %s:%d: %s has %zu edges\n", __FILE__, line, aoi_mode_name(m), ne);
		check_made(1);
	}
}

#define L(...) ((const uint32_t[]){ __VA_ARGS__ })
#define EXPECT(a, ev, sym, m, want, edges) expect(__LINE__, a, ev, NEV(ev), sym, m, want, edges)

/* The critical path of the last extraction == want[0..nwant). */
static void expect_path(int line, const struct aoi *a, const struct aoi_segment *want, size_t nwant)
{
	const struct aoi_segment *s;
	size_t n = aoi_path(a, &s);
	bool same = n == nwant;

	for (size_t i = 0; same && i < n; i++)
		same = s[i].tid == want[i].tid && s[i].from_ns == want[i].from_ns &&
		       s[i].to_ns == want[i].to_ns && s[i].event == want[i].event;
	check_made(0);
	if (same)
		return;
	fprintf(stderr, "  %s:%d: critical path differs\n    got     ", __FILE__, line);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, " %lld:[%lld,%lld]%d", (long long)s[i].tid, (long long)s[i].from_ns,
			(long long)s[i].to_ns, s[i].event == AOI_GAP ? -1 : (int)s[i].event);
	fprintf(stderr, "\n    expected");
	for (size_t i = 0; i < nwant; i++)
		fprintf(stderr, " %lld:[%lld,%lld]%d", (long long)want[i].tid,
			(long long)want[i].from_ns, (long long)want[i].to_ns,
			want[i].event == AOI_GAP ? -1 : (int)want[i].event);
	fprintf(stderr, "\n");
	check_made(1);
}

#define SEG(tid_, from_, to_, ev_) { .tid = (tid_), .from_ns = (from_), .to_ns = (to_), .event = (ev_) }
#define EXPECT_PATH(a, ...)                                                             \
	do {                                                                            \
		static const struct aoi_segment want_[] = { __VA_ARGS__ };              \
		expect_path(__LINE__, a, want_, NEV(want_));                             \
	} while (0)
#define EXPECT_NO_PATH(a) expect_path(__LINE__, a, NULL, 0)

static void test_mode_names(void)
{
	static const char *const names[] = { "stream", "thread", "waitgraph", "critical" };
	enum aoi_mode m;

	for (int i = 0; i < 4; i++) {
		CHECK_INT(aoi_mode_parse(names[i], &m), 0);
		CHECK_INT(m, i);
		CHECK_STR(aoi_mode_name(m), names[i]);
	}
	m = AOI_THREAD;
	CHECK_INT(aoi_mode_parse("Stream", &m), -1);
	CHECK_INT(aoi_mode_parse("wait", &m), -1);
	CHECK_INT(aoi_mode_parse("", &m), -1);
	CHECK_INT(aoi_mode_parse("waitgraph ", &m), -1);
	CHECK_INT(m, AOI_THREAD);
	CHECK_STR(aoi_mode_name((enum aoi_mode)9), "?");
}

/*
 * A waits on B over the whole window, B waits on C over part of it, C runs.
 * Times: A [100, 200]; B's wait [70, 130] starts before A's; C has one event
 * inside B's wait but before A's (only the wait graph takes it) and one that
 * starts 1 ns after B's wait ends (nobody takes it).
 */
static const struct wire_event chain[] = {
	RUNEV(1, 40, 50),       /* 0: A [40, 90], before the window */
	RUNEV(1, 90, 10),       /* 1: A [90, 100], touches t0 */
	WAITEV(1, 100, 100, 2), /* 2: A [100, 200], woken by B */
	RUNEV(1, 200, 30),      /* 3: A [200, 230], touches t1 */
	RUNEV(1, 231, 10),      /* 4: A after the window */
	RUNEV(2, 50, 20),       /* 5: B [50, 70], before A's wait */
	WAITEV(2, 70, 60, 3),   /* 6: B [70, 130], woken by C */
	RUNEV(2, 130, 70),      /* 7: B [130, 200] */
	RUNEV(2, 201, 10),      /* 8: B after A's wait */
	RUNEV(3, 60, 30),       /* 9: C [60, 90]: in B's wait, before A's */
	RUNEV(3, 90, 40),       /* 10: C [90, 130] */
	RUNEV(3, 131, 100),     /* 11: C after B's wait */
	RUNEV(4, 100, 100),     /* 12: D, unrelated */
};

static void test_lock_chain(void)
{
	struct aoi *a = aoi_open();
	struct wire_symptom sym = symptom(1, 100, 200);

	EXPECT(a, chain, &sym, AOI_STREAM, L(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, END), NULL);
	EXPECT_NO_PATH(a);
	EXPECT(a, chain, &sym, AOI_THREAD, L(1, 2, 3, END), NULL);
	EXPECT(a, chain, &sym, AOI_WAITGRAPH, L(1, 2, 3, 6, 7, 9, 10, END),
	       L(2, 6, 2, 7, 6, 9, 6, 10, END));
	EXPECT_NO_PATH(a);
	/* B's wait is followed only over [100, 130], where A waits: C's event 9 is off the path */
	EXPECT(a, chain, &sym, AOI_CRITICAL, L(1, 2, 3, 6, 7, 10, END), L(2, 6, 2, 7, 6, 10, END));
	EXPECT_PATH(a, SEG(3, 100, 130, 10), SEG(2, 130, 200, 7));

	/* symptom on B: its wait leads to C, nothing leads back to A */
	sym = symptom(2, 100, 200);
	EXPECT(a, chain, &sym, AOI_THREAD, L(6, 7, END), NULL);
	EXPECT(a, chain, &sym, AOI_WAITGRAPH, L(6, 7, 9, 10, END), L(6, 9, 6, 10, END));
	EXPECT(a, chain, &sym, AOI_CRITICAL, L(6, 7, 10, END), L(6, 10, END));
	EXPECT_PATH(a, SEG(3, 100, 130, 10), SEG(2, 130, 200, 7));

	/* a thread with no events */
	sym = symptom(77, 0, 1000);
	EXPECT(a, chain, &sym, AOI_THREAD, L(END), NULL);
	EXPECT(a, chain, &sym, AOI_WAITGRAPH, L(END), L(END));
	EXPECT(a, chain, &sym, AOI_CRITICAL, L(END), L(END));
	EXPECT_PATH(a, SEG(77, 0, 1000, AOI_GAP));
	aoi_free(a);
}

/* The same chain in another order gives the same events (by their new indexes). */
static void test_unsorted_input(void)
{
	static const size_t perm[] = { 12, 7, 0, 11, 3, 9, 2, 5, 10, 1, 8, 6, 4 };
	struct wire_event ev[NEV(chain)];
	uint32_t inv[NEV(chain)];
	enum aoi_mode modes[] = { AOI_THREAD, AOI_WAITGRAPH, AOI_CRITICAL };
	struct wire_symptom sym = symptom(1, 100, 200);
	struct aoi *a = aoi_open(), *b = aoi_open();

	for (size_t i = 0; i < NEV(chain); i++) {
		ev[i] = chain[perm[i]];
		inv[perm[i]] = (uint32_t)i;
	}
	for (size_t k = 0; k < 3; k++) {
		const uint32_t *o1, *o2, (*e1)[2], (*e2)[2];
		size_t n1, n2, ne1, ne2;
		bool seen[NEV(chain)] = { false };

		CHECK_INT(aoi_extract(a, chain, NEV(chain), &sym, modes[k], &o1, &n1), 0);
		CHECK_INT(aoi_extract(b, ev, NEV(ev), &sym, modes[k], &o2, &n2), 0);
		CHECK_INT(n1, n2);
		for (size_t i = 0; i < n2; i++) {
			CHECK(i == 0 || o2[i - 1] < o2[i]);
			seen[o2[i]] = true;
		}
		for (size_t i = 0; i < n1; i++)
			CHECK(seen[inv[o1[i]]]);
		ne1 = aoi_edges(a, &e1);
		ne2 = aoi_edges(b, &e2);
		CHECK_INT(ne1, ne2);
		for (size_t i = 0; i < ne1; i++) {
			bool found = false;

			for (size_t j = 0; j < ne2; j++)
				found |= e2[j][0] == inv[e1[i][0]] && e2[j][1] == inv[e1[i][1]];
			CHECK(found);
			CHECK(i == 0 || e2[i - 1][0] < e2[i][0] ||
			      (e2[i - 1][0] == e2[i][0] && e2[i - 1][1] < e2[i][1]));
		}
	}
	aoi_free(a);
	aoi_free(b);
}

static void test_cycle(void)
{
	static const struct wire_event ev[] = {
		WAITEV(1, 100, 100, 2), /* 0: A [100, 200] woken by B */
		RUNEV(2, 100, 50),      /* 1: B [100, 150] */
		WAITEV(2, 150, 50, 1),  /* 2: B [150, 200] woken by A */
		RUNEV(1, 90, 10),       /* 3: A [90, 100] */
		WAITEV(1, 0, 80, 2),    /* 4: A [0, 80], outside */
		RUNEV(2, 60, 30),       /* 5: B [60, 90], outside A's wait */
	};
	static const struct wire_event both[] = {
		WAITEV(1, 100, 100, 2), /* 0: A waits on B over the whole window */
		WAITEV(2, 100, 100, 1), /* 1: and B on A */
	};
	static const struct wire_event self[] = {
		WAITEV(1, 100, 100, 1), /* 0: A woken by itself */
		RUNEV(1, 200, 10),      /* 1 */
		RUNEV(1, 50, 10),       /* 2: outside */
	};
	struct aoi *a = aoi_open();
	struct wire_symptom sym = symptom(1, 100, 200);

	EXPECT(a, ev, &sym, AOI_THREAD, L(0, 3, END), NULL);
	EXPECT(a, ev, &sym, AOI_WAITGRAPH, L(0, 1, 2, 3, END), L(0, 1, 0, 2, 2, 0, END));
	/* B's wait hands [150, 200] back to A, whose wait there was already followed */
	EXPECT(a, ev, &sym, AOI_CRITICAL, L(0, 1, 2, 3, END), L(0, 1, 0, 2, 2, 0, END));
	EXPECT_PATH(a, SEG(2, 100, 150, 1), SEG(1, 150, 200, 0));

	EXPECT(a, both, &sym, AOI_WAITGRAPH, L(0, 1, END), L(0, 1, 1, 0, END));
	EXPECT(a, both, &sym, AOI_CRITICAL, L(0, 1, END), L(0, 1, 1, 0, END));
	EXPECT_PATH(a, SEG(1, 100, 200, 0));
	sym = symptom(2, 100, 200);
	EXPECT(a, both, &sym, AOI_WAITGRAPH, L(0, 1, END), L(0, 1, 1, 0, END));
	EXPECT(a, both, &sym, AOI_CRITICAL, L(0, 1, END), L(0, 1, 1, 0, END));
	EXPECT_PATH(a, SEG(2, 100, 200, 1));

	sym = symptom(1, 100, 200);
	EXPECT(a, self, &sym, AOI_WAITGRAPH, L(0, 1, END), L(0, 0, 0, 1, END));
	EXPECT(a, self, &sym, AOI_CRITICAL, L(0, 1, END), L(0, 0, 0, 1, END));
	EXPECT_PATH(a, SEG(1, 100, 200, 0));
	aoi_free(a);
}

static void test_unknown_readier(void)
{
	static const struct wire_event ev[] = {
		WAITEV(1, 100, 100, 0),  /* 0: readier unknown (I/O) */
		WAITEV(1, 200, 100, 99), /* 1: readier 99, which has no events */
		RUNEV(2, 100, 200),      /* 2: B, unrelated */
		RUNEV(1, 300, 0),        /* 3: A, zero length at t1 */
		RUNEV(99, 301, 10),      /* 4: 99's only event, after its wakeup */
	};
	struct aoi *a = aoi_open();
	struct wire_symptom sym = symptom(1, 100, 300);

	EXPECT(a, ev, &sym, AOI_THREAD, L(0, 1, 3, END), NULL);
	EXPECT(a, ev, &sym, AOI_WAITGRAPH, L(0, 1, 3, END), L(END));
	EXPECT(a, ev, &sym, AOI_CRITICAL, L(0, 1, 3, END), L(END));
	/* the time of the wait on 99 goes to 99, as a gap: it recorded nothing then */
	EXPECT_PATH(a, SEG(1, 100, 200, 0), SEG(99, 200, 300, AOI_GAP));
	aoi_free(a);
}

/* Closed intervals: touching the window counts, 1 ns away does not. */
static void test_window_edges(void)
{
	static const struct wire_event ev[] = {
		RUNEV(1, 50, 49),   /* 0: [50, 99], 1 ns before t0 */
		RUNEV(1, 50, 50),   /* 1: [50, 100], ends at t0 */
		RUNEV(1, 50, 100),  /* 2: [50, 150], straddles t0 */
		RUNEV(1, 150, 100), /* 3: [150, 250], straddles t1 */
		RUNEV(1, 200, 0),   /* 4: [200, 200], zero length at t1 */
		RUNEV(1, 201, 10),  /* 5: 1 ns after t1 */
		RUNEV(1, 120, 10),  /* 6: [120, 130], inside (and inside 2) */
		RUNEV(1, 100, 0),   /* 7: [100, 100], zero length at t0 */
		RUNEV(2, 100, 100), /* 8: another thread */
	};
	static const struct wire_event cover[] = {
		RUNEV(1, 0, 1000),  /* 0: covers the window */
		RUNEV(1, 150, 10),  /* 1: inside it */
		WAITEV(1, 50, 60, 2), /* 2: [50, 110], woken by B */
		RUNEV(2, 0, 1000),  /* 3: B */
	};
	struct aoi *a = aoi_open();
	struct wire_symptom sym = symptom(1, 100, 200);

	EXPECT(a, ev, &sym, AOI_THREAD, L(1, 2, 3, 4, 6, 7, END), NULL);
	EXPECT(a, ev, &sym, AOI_WAITGRAPH, L(1, 2, 3, 4, 6, 7, END), L(END));
	/*
	 * Backward from 200, latest end first: 3 takes (150, 200]; 4 starts after
	 * the cursor (150) and 6 after the next one (100): their time is taken.
	 */
	EXPECT(a, ev, &sym, AOI_CRITICAL, L(1, 2, 3, 7, END), L(END));
	EXPECT_PATH(a, SEG(1, 100, 150, 2), SEG(1, 150, 200, 3));

	EXPECT(a, cover, &sym, AOI_THREAD, L(0, 1, 2, END), NULL);
	EXPECT(a, cover, &sym, AOI_WAITGRAPH, L(0, 1, 2, 3, END), L(2, 3, END));
	/*
	 * 0 ends last and takes the whole window; 1 starts after the cursor (100)
	 * and is not met; the wait 2 reaches the cursor, so it is met, but with no
	 * time left to follow it.
	 */
	EXPECT(a, cover, &sym, AOI_CRITICAL, L(0, 2, END), L(END));
	EXPECT_PATH(a, SEG(1, 100, 200, 0));

	/* zero-length window: what touches it, no time to follow a wait for */
	sym = symptom(1, 100, 100);
	EXPECT(a, ev, &sym, AOI_THREAD, L(1, 2, 7, END), NULL);
	EXPECT(a, cover, &sym, AOI_WAITGRAPH, L(0, 2, 3, END), L(2, 3, END));
	EXPECT(a, cover, &sym, AOI_CRITICAL, L(0, 2, END), L(END));
	EXPECT_NO_PATH(a);

	/* a window that ends before it starts is empty */
	sym = symptom(1, 200, 100);
	EXPECT(a, ev, &sym, AOI_STREAM, L(0, 1, 2, 3, 4, 5, 6, 7, 8, END), NULL);
	EXPECT(a, ev, &sym, AOI_THREAD, L(END), NULL);
	EXPECT(a, ev, &sym, AOI_WAITGRAPH, L(END), L(END));
	EXPECT(a, ev, &sym, AOI_CRITICAL, L(END), L(END));
	EXPECT_NO_PATH(a);
	aoi_free(a);
}

/* A's wait on B: B's events reach into it from both sides; B's own wait on C straddles A's start. */
static void test_partial_overlap(void)
{
	static const struct wire_event ev[] = {
		WAITEV(1, 100, 100, 2), /* 0: A [100, 200] woken by B */
		RUNEV(2, 90, 9),        /* 1: B [90, 99], just before */
		WAITEV(2, 99, 21, 3),   /* 2: B [99, 120] woken by C: 1 ns before A's wait, 20 in */
		RUNEV(2, 120, 60),      /* 3: B [120, 180] */
		RUNEV(2, 180, 80),      /* 4: B [180, 260], past A's wait */
		RUNEV(2, 261, 5),       /* 5: B after */
		RUNEV(3, 95, 10),       /* 6: C [95, 105] */
		RUNEV(3, 80, 10),       /* 7: C [80, 90], before B's wait */
		RUNEV(3, 105, 5),       /* 8: C [105, 110] */
		RUNEV(3, 111, 20),      /* 9: C [111, 131], past B's wait end and into A's */
	};
	struct aoi *a = aoi_open();
	struct wire_symptom sym = symptom(1, 150, 200);

	EXPECT(a, ev, &sym, AOI_THREAD, L(0, END), NULL);
	/* the wait graph follows A's whole wait, not just the window's part */
	EXPECT(a, ev, &sym, AOI_WAITGRAPH, L(0, 2, 3, 4, 6, 8, 9, END),
	       L(0, 2, 0, 3, 0, 4, 2, 6, 2, 8, 2, 9, END));
	/* the critical path follows only [150, 200] of it */
	EXPECT(a, ev, &sym, AOI_CRITICAL, L(0, 3, 4, END), L(0, 3, 0, 4, END));
	EXPECT_PATH(a, SEG(2, 150, 180, 3), SEG(2, 180, 200, 4));

	sym = symptom(1, 100, 200);
	EXPECT(a, ev, &sym, AOI_CRITICAL, L(0, 2, 3, 4, 6, 8, 9, END),
	       L(0, 2, 0, 3, 0, 4, 2, 6, 2, 8, 2, 9, END));
	/* B's wait [99, 120] is followed over [100, 120]; C's 9 runs on past it */
	EXPECT_PATH(a, SEG(3, 100, 105, 6), SEG(3, 105, 110, 8), SEG(3, 110, 111, AOI_GAP),
		    SEG(3, 111, 120, 9), SEG(2, 120, 180, 3), SEG(2, 180, 200, 4));
	aoi_free(a);
}

/* Gaps on the walked threads, and a readier with no events in the interval. */
static void test_critical_gaps(void)
{
	static const struct wire_event ev[] = {
		RUNEV(1, 10, 10),      /* 0: A [10, 20] */
		WAITEV(1, 30, 40, 2),  /* 1: A [30, 70] woken by B */
		RUNEV(1, 80, 10),      /* 2: A [80, 90] */
		RUNEV(2, 40, 10),      /* 3: B [40, 50] */
		WAITEV(1, 90, 5, 3),   /* 4: A [90, 95] woken by C */
		RUNEV(3, 0, 5),        /* 5: C, long before */
	};
	struct aoi *a = aoi_open();
	struct wire_symptom sym = symptom(1, 0, 100);

	EXPECT(a, ev, &sym, AOI_WAITGRAPH, L(0, 1, 2, 3, 4, END), L(1, 3, END));
	EXPECT(a, ev, &sym, AOI_CRITICAL, L(0, 1, 2, 3, 4, END), L(1, 3, END));
	EXPECT_PATH(a, SEG(1, 0, 10, AOI_GAP), SEG(1, 10, 20, 0), SEG(1, 20, 30, AOI_GAP),
		    SEG(2, 30, 40, AOI_GAP), SEG(2, 40, 50, 3), SEG(2, 50, 70, AOI_GAP),
		    SEG(1, 70, 80, AOI_GAP), SEG(1, 80, 90, 2), SEG(3, 90, 95, AOI_GAP),
		    SEG(1, 95, 100, AOI_GAP));
	aoi_free(a);
}

/* Overlapping events on one thread: latest end first, ties to the later start. */
static void test_critical_overlaps(void)
{
	static const struct wire_event ev[] = {
		RUNEV(1, 0, 60),       /* 0: A [0, 60] */
		RUNEV(1, 40, 20),      /* 1: A [40, 60], same end, later start: goes first */
		WAITEV(1, 50, 50, 2),  /* 2: A [50, 100], overlaps both, woken by B */
		RUNEV(2, 45, 10),      /* 3: B [45, 55], touches the part followed */
		RUNEV(2, 70, 10),      /* 4: B [70, 80] */
	};
	struct aoi *a = aoi_open();
	struct wire_symptom sym = symptom(1, 0, 100);

	EXPECT(a, ev, &sym, AOI_WAITGRAPH, L(0, 1, 2, 3, 4, END), L(2, 3, 2, 4, END));
	EXPECT(a, ev, &sym, AOI_CRITICAL, L(0, 1, 2, 3, 4, END), L(2, 3, 2, 4, END));
	EXPECT_PATH(a, SEG(1, 0, 40, 0), SEG(1, 40, 50, 1), SEG(2, 50, 55, 3),
		    SEG(2, 55, 70, AOI_GAP), SEG(2, 70, 80, 4), SEG(2, 80, 100, AOI_GAP));
	aoi_free(a);
}

/* Extreme times: the end saturates instead of overflowing; negative durations are instants. */
static void test_extreme_times(void)
{
	static const struct wire_event ev[] = {
		RUNEV(1, WIRE_MAX_TIME_NS, WIRE_MAX_TIME_NS), /* 0 */
		WAITEV(1, INT64_MAX - 5, 100, 2),            /* 1 */
		RUNEV(2, INT64_MAX, 0),                      /* 2 */
		RUNEV(1, 10, -5),                            /* 3: [10, 10] */
	};
	struct aoi *a = aoi_open();
	struct wire_symptom sym = symptom(1, INT64_MAX, INT64_MAX);

	EXPECT(a, ev, &sym, AOI_THREAD, L(0, 1, END), NULL);
	EXPECT(a, ev, &sym, AOI_WAITGRAPH, L(0, 1, 2, END), L(1, 2, END));
	sym = symptom(1, 10, 10);
	EXPECT(a, ev, &sym, AOI_THREAD, L(3, END), NULL);
	sym = symptom(1, 11, 20);
	EXPECT(a, ev, &sym, AOI_THREAD, L(END), NULL);
	EXPECT(a, ev, &sym, AOI_CRITICAL, L(END), L(END));
	aoi_free(a);
}

static void test_errors_and_empty(void)
{
	struct aoi *a = aoi_open();
	const uint32_t *out;
	size_t n = 7;

	CHECK(a != NULL);
	CHECK_STR(aoi_error(a), "");
	CHECK_INT(aoi_extract(a, chain, NEV(chain), NULL, AOI_WAITGRAPH, &out, &n), -1);
	CHECK_STR(aoi_error(a), "no symptom for AOI mode waitgraph");
	CHECK_INT(n, 0);
	CHECK_INT(aoi_extract(a, chain, NEV(chain), NULL, AOI_STREAM, &out, &n), 0);
	CHECK_INT(n, NEV(chain));
	CHECK_STR(aoi_error(a), "");
	for (int m = AOI_STREAM; m <= AOI_CRITICAL; m++) {
		struct wire_symptom sym = symptom(1, 0, 10);

		CHECK_INT(aoi_extract(a, NULL, 0, &sym, (enum aoi_mode)m, &out, &n), 0);
		CHECK_INT(n, 0);
		CHECK(out != NULL);
	}
	aoi_free(a);
	aoi_free(NULL);
}

/* ---- Naive versions of the definitions, for the property tests. ---- */

static int64_t naive_end(const struct wire_event *e)
{
	return e->dur_ns < 0 ? e->ts_ns : e->ts_ns + e->dur_ns; /* the tests keep times small */
}

static bool naive_overlaps(const struct wire_event *e, int64_t x, int64_t y)
{
	return x <= y && e->ts_ns <= y && naive_end(e) >= x;
}

struct naive {
	bool *in;
	uint32_t (*edges)[2];
	size_t nedges;
	struct aoi_segment *segs;
	size_t nsegs;
	bool *expanded;
};

static int edge_cmp(const void *pa, const void *pb)
{
	const uint32_t *x = pa, *y = pb;

	return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* mining.md section 3 word for word: rounds of V_cur/V_new, an O(n) scan per wait. */
static void naive_waitgraph(const struct wire_event *ev, size_t n, const struct wire_symptom *s,
			    struct naive *r)
{
	uint32_t *cur = malloc(n * n * sizeof(*cur) + 1), *next = malloc(n * n * sizeof(*next) + 1);
	size_t ncur = 0, nnext = 0;

	for (size_t i = 0; i < n; i++)
		if (ev[i].tid == s->tid && naive_overlaps(&ev[i], s->start_ns, s->end_ns))
			next[nnext++] = (uint32_t)i;
	do {
		uint32_t *t = cur;

		cur = next;
		ncur = nnext;
		next = t;
		nnext = 0;
		for (size_t k = 0; k < ncur; k++) {
			const struct wire_event *e = &ev[cur[k]];

			if (r->in[cur[k]])
				continue;
			r->in[cur[k]] = true;
			if (e->kind != WIRE_WAIT || e->readier_tid == 0)
				continue;
			for (size_t j = 0; j < n; j++)
				if (ev[j].tid == e->readier_tid &&
				    naive_overlaps(&ev[j], e->ts_ns, naive_end(e))) {
					r->edges[r->nedges][0] = cur[k];
					r->edges[r->nedges++][1] = (uint32_t)j;
					if (!r->in[j])
						next[nnext++] = (uint32_t)j;
				}
		}
	} while (nnext);
	qsort(r->edges, r->nedges, sizeof(*r->edges), edge_cmp);
	free(cur);
	free(next);
}

static int cand_order(const void *pa, const void *pb, void *ctx)
{
	const struct wire_event *ev = ctx;
	uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;
	int64_t ex = naive_end(&ev[x]), ey = naive_end(&ev[y]);

	if (ex != ey)
		return ex > ey ? -1 : 1;
	if (ev[x].ts_ns != ev[y].ts_ns)
		return ev[x].ts_ns > ev[y].ts_ns ? -1 : 1;
	return x > y ? -1 : 1;
}

static void naive_seg(struct naive *r, int64_t tid, int64_t from, int64_t to, uint32_t event)
{
	r->segs[r->nsegs++] = (struct aoi_segment){ .tid = tid, .from_ns = from, .to_ns = to,
						    .event = event };
}

/* docs/aoi.md's critical walk, recursively, with a scan of the stream per walk. */
static void naive_walk(const struct wire_event *ev, size_t n, int64_t tid, int64_t lo, int64_t hi,
		       uint32_t wait, struct naive *r)
{
	uint32_t *c = malloc(n * sizeof(*c) + 1);
	size_t nc = 0;
	int64_t t = hi;

	for (size_t i = 0; i < n; i++)
		if (ev[i].tid == tid && naive_overlaps(&ev[i], lo, hi))
			c[nc++] = (uint32_t)i;
	qsort_r(c, nc, sizeof(*c), cand_order, (void *)ev);
	for (size_t k = 0; k < nc; k++) {
		const struct wire_event *e = &ev[c[k]];
		int64_t s, u;

		if (e->ts_ns > t)
			continue;
		r->in[c[k]] = true;
		if (wait != END) {
			r->edges[r->nedges][0] = wait;
			r->edges[r->nedges++][1] = c[k];
		}
		s = e->ts_ns > lo ? e->ts_ns : lo;
		u = naive_end(e) < t ? naive_end(e) : t;
		if (u < t)
			naive_seg(r, tid, u, t, AOI_GAP);
		t = s;
		if (u > s && e->kind == WIRE_WAIT && e->readier_tid && !r->expanded[c[k]]) {
			r->expanded[c[k]] = true;
			naive_walk(ev, n, e->readier_tid, s, u, c[k], r);
		} else if (u > s) {
			naive_seg(r, tid, s, u, c[k]);
		}
	}
	if (t > lo)
		naive_seg(r, tid, lo, t, AOI_GAP);
	free(c);
}

static int seg_order(const void *pa, const void *pb)
{
	const struct aoi_segment *x = pa, *y = pb;

	return x->from_ns < y->from_ns ? -1 : x->from_ns > y->from_ns;
}

static void naive_critical(const struct wire_event *ev, size_t n, const struct wire_symptom *s,
			   struct naive *r)
{
	if (s->start_ns <= s->end_ns)
		naive_walk(ev, n, s->tid, s->start_ns, s->end_ns, END, r);
	qsort(r->edges, r->nedges, sizeof(*r->edges), edge_cmp);
	qsort(r->segs, r->nsegs, sizeof(*r->segs), seg_order);
}

static void naive_init(struct naive *r, size_t n)
{
	r->in = calloc(n + 1, sizeof(*r->in));
	r->expanded = calloc(n + 1, sizeof(*r->expanded));
	r->edges = malloc((n * n + 1) * sizeof(*r->edges));
	r->segs = malloc((4 * n + 64) * sizeof(*r->segs)); /* > window length */
	r->nedges = r->nsegs = 0;
}

static void naive_fini(struct naive *r)
{
	free(r->in);
	free(r->expanded);
	free(r->edges);
	free(r->segs);
}

/* ---- Invariants any extraction must satisfy. ---- */

struct result {
	bool *in;
	size_t n;
};

/* Copies the last extraction into r; checks that indexes ascend (so each appears once). */
static bool take(struct result *r, const uint32_t *out, size_t nout, size_t n)
{
	bool ok = true;

	r->in = calloc(n + 1, sizeof(*r->in));
	r->n = nout;
	for (size_t i = 0; i < nout; i++) {
		ok &= out[i] < n && (i == 0 || out[i - 1] < out[i]);
		if (out[i] < n)
			r->in[out[i]] = true;
	}
	return ok;
}

static bool subset(const struct result *x, const struct result *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (x->in[i] && !y->in[i])
			return false;
	return true;
}

/* Every edge: from a wait in the set with a readier to an event of that thread in the set, overlapping. */
static bool edges_valid(const struct aoi *a, const struct wire_event *ev, const struct result *r)
{
	const uint32_t (*e)[2];
	size_t ne = aoi_edges(a, &e);

	for (size_t i = 0; i < ne; i++) {
		const struct wire_event *w = &ev[e[i][0]], *x = &ev[e[i][1]];

		if (w->kind != WIRE_WAIT || w->readier_tid == 0 || x->tid != w->readier_tid ||
		    !naive_overlaps(x, w->ts_ns, naive_end(w)) || !r->in[e[i][0]] || !r->in[e[i][1]])
			return false;
		if (i && edge_cmp(e[i - 1], e[i]) >= 0)
			return false; /* sorted, no duplicates */
	}
	return true;
}

/* The segments partition [t0, t1], and each named event covers its segment and is on the path. */
static bool path_valid(const struct aoi *a, const struct wire_event *ev,
		       const struct wire_symptom *s, const struct result *r)
{
	const struct aoi_segment *g;
	size_t ng = aoi_path(a, &g);
	int64_t t = s->start_ns;

	if (s->end_ns <= s->start_ns)
		return ng == 0;
	for (size_t i = 0; i < ng; i++) {
		if (g[i].from_ns != t || g[i].to_ns <= g[i].from_ns)
			return false;
		if (g[i].event != AOI_GAP &&
		    (!r->in[g[i].event] || ev[g[i].event].tid != g[i].tid ||
		     ev[g[i].event].ts_ns > g[i].from_ns || naive_end(&ev[g[i].event]) < g[i].to_ns))
			return false;
		t = g[i].to_ns;
	}
	return t == s->end_ns;
}

/* ---- Random streams. ---- */

static int64_t rnd_in(int64_t lo, int64_t hi) /* [lo, hi] */
{
	return lo + (int64_t)(check_rand() % (uint64_t)(hi - lo + 1));
}

/*
 * nthreads threads (tids 1..nthreads) of back-to-back events with small gaps,
 * overlaps and zero durations now and then; waits woken by a random thread,
 * sometimes themselves, 0, or a tid without events; then shuffled or not.
 */
static void random_stream(struct wire_event *ev, size_t n, int nthreads, int64_t span)
{
	int64_t cur[64] = { 0 };

	for (size_t i = 0; i < n; i++) {
		int th = (int)rnd_in(0, nthreads - 1);
		struct wire_event *e = &ev[i];
		int64_t gap = rnd_in(-3, 6);

		e->tid = th + 1;
		e->ts_ns = cur[th] + gap < 0 ? 0 : cur[th] + gap;
		e->dur_ns = rnd_in(0, 4) == 0 ? 0 : rnd_in(1, span / 8 + 1);
		e->stack = 0;
		if (check_rand() % 2) {
			uint64_t k = check_rand() % 10;

			e->kind = WIRE_WAIT;
			e->readier_tid = k == 0 ? 0 : k == 1 ? 999 : k == 2 ? e->tid :
				rnd_in(1, nthreads);
		} else {
			e->kind = WIRE_RUN;
			e->readier_tid = 0;
		}
		cur[th] = e->ts_ns + e->dur_ns;
	}
	if (check_rand() % 2)
		for (size_t i = n; i > 1; i--) {
			size_t j = (size_t)(check_rand() % i);
			struct wire_event t = ev[i - 1];

			ev[i - 1] = ev[j];
			ev[j] = t;
		}
}

static bool same_edges(const struct aoi *a, const struct naive *r)
{
	const uint32_t (*e)[2];
	size_t ne = aoi_edges(a, &e);

	return ne == r->nedges && (ne == 0 || memcmp(e, r->edges, ne * sizeof(*e)) == 0);
}

static bool same_path(const struct aoi *a, const struct naive *r)
{
	const struct aoi_segment *g;
	size_t ng = aoi_path(a, &g);

	if (ng != r->nsegs)
		return false;
	for (size_t i = 0; i < ng; i++)
		if (g[i].tid != r->segs[i].tid || g[i].from_ns != r->segs[i].from_ns ||
		    g[i].to_ns != r->segs[i].to_ns || g[i].event != r->segs[i].event)
			return false;
	return true;
}

static bool same_set(const struct result *x, const bool *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (x->in[i] != want[i])
			return false;
	return true;
}

/* Runs all four modes on one stream and checks them against each other and the naive versions. */
static bool check_random(struct aoi *a, const struct wire_event *ev, size_t n,
			 const struct wire_symptom *sym, const char *label)
{
	struct result r[4];
	struct naive wg, cp;
	bool ok = true;
	const uint32_t *out;
	size_t nout;

	for (int m = 0; m < 4; m++) {
		if (aoi_extract(a, ev, n, sym, (enum aoi_mode)m, &out, &nout) != 0) {
			fprintf(stderr, "  %s: %s\n", label, aoi_error(a));
			return false;
		}
		ok &= take(&r[m], out, nout, n);
		if (m == AOI_WAITGRAPH)
			ok &= edges_valid(a, ev, &r[m]);
		if (m == AOI_CRITICAL) {
			ok &= edges_valid(a, ev, &r[m]);
			ok &= path_valid(a, ev, sym, &r[m]);
		}
		if (m == AOI_WAITGRAPH || m == AOI_CRITICAL) {
			struct naive *nv = m == AOI_WAITGRAPH ? &wg : &cp;

			naive_init(nv, n);
			if (m == AOI_WAITGRAPH)
				naive_waitgraph(ev, n, sym, nv);
			else
				naive_critical(ev, n, sym, nv);
			ok &= same_set(&r[m], nv->in, n) && same_edges(a, nv);
			if (m == AOI_CRITICAL) {
				const uint32_t (*e)[2];
				size_t ne = aoi_edges(a, &e);

				ok &= same_path(a, nv);
				for (size_t i = 0; i < ne; i++) /* the path's edges are the graph's */
					ok &= bsearch(e[i], wg.edges, wg.nedges, sizeof(*wg.edges),
						      edge_cmp) != NULL;
			}
		}
	}
	ok &= r[AOI_STREAM].n == n;
	ok &= subset(&r[AOI_THREAD], &r[AOI_WAITGRAPH], n);
	ok &= subset(&r[AOI_CRITICAL], &r[AOI_WAITGRAPH], n);
	for (size_t i = 0; i < n; i++)
		if (r[AOI_CRITICAL].in[i] && ev[i].tid == sym->tid && !r[AOI_THREAD].in[i])
			ok = false;
	if (!ok)
		fprintf(stderr, "  %s: n=%zu symptom %lld [%lld, %lld] differs\n", label, n,
			(long long)sym->tid, (long long)sym->start_ns, (long long)sym->end_ns);
	naive_fini(&wg);
	naive_fini(&cp);
	for (int m = 0; m < 4; m++)
		free(r[m].in);
	return ok;
}

static void test_random_streams(void)
{
	struct aoi *a = aoi_open();
	struct wire_event *ev = malloc(400 * sizeof(*ev));
	int failed = 0, edges = 0, reached = 0;

	for (int iter = 0; iter < 4000 && failed < 3; iter++) {
		size_t n = iter < 3800 ? (size_t)rnd_in(1, 40) : (size_t)rnd_in(100, 400);
		int nthreads = (int)rnd_in(1, iter % 3 == 0 ? 3 : 12);
		int64_t span = (int64_t)n * 3 + 10;
		struct wire_symptom sym;
		int64_t t0 = rnd_in(-5, span), t1 = rnd_in(-5, span);
		char label[64];
		const uint32_t *out;
		size_t nt, nw;
		const uint32_t (*e)[2];

		random_stream(ev, n, nthreads, span);
		if (t1 < t0 && check_rand() % 8) {
			int64_t t = t0;

			t0 = t1;
			t1 = t;
		}
		sym = symptom(rnd_in(1, nthreads + (iter % 50 == 0)), t0, t1);
		snprintf(label, sizeof(label), "stream %d", iter);
		if (!check_random(a, ev, n, &sym, label))
			failed++;
		/* that the streams exercise the graph at all */
		aoi_extract(a, ev, n, &sym, AOI_THREAD, &out, &nt);
		aoi_extract(a, ev, n, &sym, AOI_WAITGRAPH, &out, &nw);
		edges += aoi_edges(a, &e) > 0;
		reached += nw > nt;
	}
	CHECK_INT(failed, 0);
	CHECK(edges > 1200);
	CHECK(reached > 700);
	fprintf(stderr, "    random: 4000 streams, %d with edges, %d reaching other threads\n",
		edges, reached);
	free(ev);
	aoi_free(a);
}

/* ---- Real recordings. ---- */

static bool tid_reached(const struct wire_event *ev, const uint32_t *out, size_t n, int64_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (ev[out[i]].tid == tid)
			return true;
	return false;
}

/*
 * A pipe ping-pong: each `pass` thread blocks in pipe_read until the other
 * writes. With the symptom on one of them, the wait graph and the critical
 * path must reach the other.
 */
static void test_dspeyer_sched(void)
{
	static const struct {
		const char *file;
		int64_t pass[2];
	} caps[] = {
		{ "perf/dspeyer-sched-5b867fd.perf.txt", { 28036, 28037 } },
		{ "perf/dspeyer-sched-61cb776.perf.txt", { 17936, 17938 } },
		{ "perf/dspeyer-sched-9d8b37e.perf.txt", { 3603, 3605 } },
	};
	struct aoi *a = aoi_open();

	for (size_t c = 0; c < NEV(caps); c++) {
		char path[4096];
		struct import_opts o;
		struct importer *im;
		struct wire_stream s;
		int64_t other;

		snprintf(path, sizeof(path), "%s/%s", data_dir, caps[c].file);
		import_opts_init(&o);
		o.host = "test-host";
		o.app = "imported";
		o.symptom_comm = "pass";
		im = importer_open(&import_perf, &o);
		if (importer_run(im, path) != 0) {
			fprintf(stderr, "  %s\n", importer_error(im));
			CHECK(0);
			importer_free(im);
			continue;
		}
		s = *importer_stream(im, 0);
		CHECK(s.symptom.tid == caps[c].pass[0] || s.symptom.tid == caps[c].pass[1]);
		other = s.symptom.tid == caps[c].pass[0] ? caps[c].pass[1] : caps[c].pass[0];
		for (int w = 0; w < 2; w++) {
			struct wire_symptom sym = s.symptom;
			struct result r[4];
			const uint32_t *out;
			size_t nout, ne, to_other = 0;
			const uint32_t (*e)[2];
			int64_t t0, t1;

			if (w == 1) { /* the middle tenth of the capture */
				int64_t len = sym.end_ns - sym.start_ns;

				sym.start_ns += len / 2;
				sym.end_ns = sym.start_ns + len / 10;
			}
			for (int m = 0; m < 4; m++) {
				int64_t t = util_now_mono_ns();

				CHECK_INT(aoi_extract(a, s.events, s.nevents, &sym, (enum aoi_mode)m,
						      &out, &nout), 0);
				t = util_now_mono_ns() - t;
				CHECK(take(&r[m], out, nout, s.nevents));
				if (m >= AOI_WAITGRAPH) {
					CHECK(nout > 0);
					CHECK(tid_reached(s.events, out, nout, other));
					CHECK(edges_valid(a, s.events, &r[m]));
					ne = aoi_edges(a, &e);
					for (size_t i = 0; i < ne; i++)
						to_other += s.events[e[i][1]].tid == other;
					CHECK(to_other > 0);
				}
				if (m == AOI_CRITICAL)
					CHECK(path_valid(a, s.events, &sym, &r[m]));
				fprintf(stderr, "    %s %s %-9s %6zu of %zu events, %4zu edges, %.2f ms\n",
					caps[c].file + 19, w ? "tenth" : "whole", aoi_mode_name(m),
					nout, s.nevents, m >= AOI_WAITGRAPH ? aoi_edges(a, &e) : 0,
					t / 1e6);
			}
			CHECK(tid_reached(s.events, out, nout, sym.tid));
			CHECK(subset(&r[AOI_THREAD], &r[AOI_WAITGRAPH], s.nevents));
			CHECK(subset(&r[AOI_WAITGRAPH], &r[AOI_STREAM], s.nevents));
			CHECK(subset(&r[AOI_CRITICAL], &r[AOI_WAITGRAPH], s.nevents));
			CHECK(r[AOI_WAITGRAPH].n > r[AOI_THREAD].n);
			CHECK(r[AOI_STREAM].n == s.nevents);
			t0 = sym.start_ns;
			t1 = sym.end_ns;
			for (size_t i = 0; i < s.nevents; i++) /* thread mode by its definition */
				CHECK(r[AOI_THREAD].in[i] ==
				      (s.events[i].tid == sym.tid &&
				       naive_overlaps(&s.events[i], t0, t1)));
			for (int m = 0; m < 4; m++)
				free(r[m].in);
		}
		importer_free(im);
	}
	aoi_free(a);
}

/* ---- Content filter. ---- */

static void test_filter(void)
{
	static const char *const inc[] = { "*!fdatasync", "win32k.sys!*Lock*" };
	static const char *const exc[] = { "*!nanosleep" };
	static const char *const s1[] = { "app!main", "libc.so.6!fdatasync" };
	static const char *const s2[] = { "app!main", "win32k.sys!AcquireLockEx", "k!nanosleep" };
	static const char *const s3[] = { "app!main", "app!work" };
	static const char *const s4[] = { "win32k.sys!lock" }; /* case matters */
	static const char *const frames[] = { "app!main", "libc.so.6!fdatasync", "k!nanosleep",
					      "win32k.sys!AcquireLockEx", "app!work" };
	static const uint32_t f0[] = { 0, 1 }, f1[] = { 0, 3, 2 }, f2[] = { 0, 4 }, f3[] = { 3 },
			      f4[] = { 2, 1 }, f5[] = { 0, 9, 1 };
	const struct wire_stack stacks[] = { { f0, 2 }, { f1, 3 }, { f2, 2 }, { f3, 1 }, { f4, 2 },
					     { f5, 3 } };
	bool keep[6];
	struct aoi_filter *f = aoi_filter_open(inc, 2, exc, 1), *none = aoi_filter_open(NULL, 0, NULL, 0);
	struct aoi_filter *only_exc = aoi_filter_open(NULL, 0, exc, 1);
	char pat[] = "*!fdatasync";
	struct aoi_filter *copied = aoi_filter_open((const char *const[]){ pat }, 1, NULL, 0);

	CHECK(f && none && only_exc && copied);
	pat[0] = 'x'; /* the filter keeps its own copy */
	CHECK(!aoi_filter_empty(f));
	CHECK(aoi_filter_empty(none));
	CHECK(!aoi_filter_empty(only_exc));
	CHECK(aoi_filter_keep(f, s1, 2));
	CHECK(!aoi_filter_keep(f, s2, 3));  /* included, but excluded too */
	CHECK(aoi_filter_keep(f, s2, 2));   /* without the excluded frame */
	CHECK(!aoi_filter_keep(f, s3, 2));  /* nothing included */
	CHECK(!aoi_filter_keep(f, s4, 1));
	CHECK(!aoi_filter_keep(f, s1, 0));
	CHECK(aoi_filter_keep(none, s2, 3));
	CHECK(aoi_filter_keep(none, s1, 0));
	CHECK(aoi_filter_keep(only_exc, s3, 2));
	CHECK(!aoi_filter_keep(only_exc, s2, 3));
	CHECK(aoi_filter_keep(copied, s1, 2));

	CHECK_INT(aoi_filter_stacks(f, frames, 5, stacks, 6, keep), 0);
	CHECK(keep[0] && !keep[1] && !keep[2] && keep[3] && !keep[4] && keep[5]);
	CHECK_INT(aoi_filter_stacks(none, frames, 5, stacks, 6, keep), 0);
	CHECK(keep[0] && keep[1] && keep[2] && keep[3] && keep[4] && keep[5]);
	CHECK_INT(aoi_filter_stacks(only_exc, frames, 5, stacks, 6, keep), 0);
	CHECK(keep[0] && !keep[1] && keep[2] && keep[3] && !keep[4] && keep[5]);
	/* the memo agrees with aoi_filter_keep stack by stack */
	CHECK_INT(aoi_filter_stacks(f, frames, 5, stacks, 5, keep), 0);
	for (size_t i = 0; i < 5; i++) {
		const char *fs[3];

		for (uint32_t k = 0; k < stacks[i].len; k++)
			fs[k] = frames[stacks[i].frames[k]];
		CHECK(keep[i] == aoi_filter_keep(f, fs, stacks[i].len));
	}
	aoi_filter_free(f);
	aoi_filter_free(none);
	aoi_filter_free(only_exc);
	aoi_filter_free(copied);
	aoi_filter_free(NULL);
}

/* ---- A million events. ---- */

static int ev_by_time(const void *pa, const void *pb)
{
	const struct wire_event *x = pa, *y = pb;

	if (x->ts_ns != y->ts_ns)
		return x->ts_ns < y->ts_ns ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int cmp_u32(const void *pa, const void *pb)
{
	uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;

	return (x > y) - (x < y);
}

/* Whether the ascending index list a[0..na) is contained in b[0..nb) (ascending too). */
static bool index_subset(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	size_t j = 0;

	for (size_t i = 0; i < na; i++) {
		while (j < nb && b[j] < a[i])
			j++;
		if (j == nb || b[j] != a[i])
			return false;
	}
	return true;
}

/*
 * 64 threads, each alternating runs (1 ms samples) and waits (up to max_wait)
 * woken by a random thread (one in eight unknown), sorted by time like an
 * importer's output; a window of a tenth and the whole capture. What must hold
 * whatever the random draw: the stream mode over the whole capture is every
 * event; each mode's events are ascending and the thread's events are within the
 * critical path's, which are within the wait graph's, which are within the
 * stream's; every wait-graph edge joins two events of the wait graph.
 */
static void million_events(int64_t max_wait)
{
	const size_t n = 1000000;
	const int nthreads = 64;
	struct wire_event *ev = malloc(n * sizeof(*ev));
	int64_t cur[64] = { 0 }, end = 0;
	struct aoi *a = aoi_open();
	uint32_t *got[4] = { NULL };
	size_t ngot[4];

	for (size_t i = 0; i < n; i++) {
		int th = (int)(check_rand() % (uint64_t)nthreads);
		struct wire_event *e = &ev[i];

		e->tid = 1000 + th;
		e->ts_ns = cur[th] + (int64_t)(check_rand() % 1000);
		e->stack = 0;
		if (check_rand() % 3 == 0) {
			e->kind = WIRE_WAIT;
			e->dur_ns = 1 + (int64_t)(check_rand() % (uint64_t)max_wait);
			e->readier_tid = check_rand() % 8 == 0 ? 0 : 1000 + (int64_t)(check_rand() % (uint64_t)nthreads);
		} else {
			e->kind = WIRE_RUN;
			e->dur_ns = 1000000;
			e->readier_tid = 0;
		}
		cur[th] = e->ts_ns + e->dur_ns;
		if (cur[th] > end)
			end = cur[th];
	}
	qsort(ev, n, sizeof(*ev), ev_by_time);
	for (int w = 0; w < 2; w++) {
		struct wire_symptom sym = symptom(1000, w ? 0 : end / 2, w ? end : end / 2 + end / 10);
		bool ascending = true, edges_inside = true;

		for (int m = 0; m < 4; m++) {
			const uint32_t *out;
			const uint32_t (*e)[2];
			size_t nout, ne;

			CHECK_INT(aoi_extract(a, ev, n, &sym, (enum aoi_mode)m, &out, &nout), 0);
			free(got[m]);
			got[m] = malloc((nout + 1) * sizeof(*out));
			if (!got[m])
				goto out;
			memcpy(got[m], out, nout * sizeof(*out));
			ngot[m] = nout;
			for (size_t i = 1; i < nout; i++)
				ascending &= out[i - 1] < out[i];
			ne = aoi_edges(a, &e);
			if ((enum aoi_mode)m == AOI_WAITGRAPH)
				for (size_t i = 0; i < ne; i++)
					edges_inside &= bsearch(&e[i][0], out, nout, sizeof(*out), cmp_u32) &&
							bsearch(&e[i][1], out, nout, sizeof(*out), cmp_u32);
		}
		CHECK(ascending);
		CHECK(edges_inside);
		CHECK(ngot[AOI_THREAD] > 0);
		CHECK(index_subset(got[AOI_THREAD], ngot[AOI_THREAD], got[AOI_CRITICAL], ngot[AOI_CRITICAL]));
		CHECK(index_subset(got[AOI_CRITICAL], ngot[AOI_CRITICAL], got[AOI_WAITGRAPH], ngot[AOI_WAITGRAPH]));
		CHECK(index_subset(got[AOI_WAITGRAPH], ngot[AOI_WAITGRAPH], got[AOI_STREAM], ngot[AOI_STREAM]));
		/* more than the thread's own events: the wait graph reaches other threads */
		CHECK(ngot[AOI_WAITGRAPH] > ngot[AOI_THREAD]);
		if (w)
			CHECK_INT(ngot[AOI_STREAM], n);
	}
out:
	for (int m = 0; m < 4; m++)
		free(got[m]);
	free(ev);
	aoi_free(a);
}

static void test_million_events(void)
{
	million_events(5000000);
	million_events(20000000);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		data_dir = argv[1];
	else if (getenv("SM_DATA"))
		data_dir = getenv("SM_DATA");
	check_seed(0x853c49e6748fea9bULL);
	RUN(test_mode_names);
	RUN(test_lock_chain);
	RUN(test_unsorted_input);
	RUN(test_cycle);
	RUN(test_unknown_readier);
	RUN(test_window_edges);
	RUN(test_partial_overlap);
	RUN(test_critical_gaps);
	RUN(test_critical_overlaps);
	RUN(test_extreme_times);
	RUN(test_errors_and_empty);
	RUN(test_filter);
	RUN(test_random_streams);
	RUN(test_dspeyer_sched);
	RUN(test_million_events);
	return CHECK_DONE();
}
