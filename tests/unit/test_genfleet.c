/*
 * Tests of the synthetic fleet generator (tests/tools/genfleet.c). They run the
 * built binary and check its output independently: determinism, wire validity,
 * exact event counts, time consistency, and that the ground truth it writes is
 * true of the streams (bugs where it says, at the cost it says, arch-only frames,
 * the lock convoy seen through the wait graph, the wait-graph AOI totals).
 *
 * The binary is argv[1], else genfleet next to this test, else $SM_BIN_DIR/genfleet
 * or $SM_BIN_DIR/../tests/genfleet.
 */
#include "common/arena.h"
#include "common/intern.h"
#include "common/wire.h"
#include "tests/unit/check.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char bin[4096];
static char tmpdir[] = "/tmp/test_genfleet.XXXXXX";

/* Runs a shell command; its standard output goes to *out (caller frees). Returns the exit status. */
static int run(const char *cmd, char **out, size_t *len)
{
	FILE *p = popen(cmd, "r");
	size_t cap = 1 << 16, n = 0, got;
	char *buf = malloc(cap);
	int st;

	if (!p || !buf) {
		free(buf);
		if (p)
			pclose(p);
		return -1;
	}
	while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
		n += got;
		if (cap - n < 2) {
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	buf[n] = '\0';
	st = pclose(p);
	if (out) {
		*out = buf;
		*len = n;
	} else {
		free(buf);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int gen(const char *args, char **out, size_t *len)
{
	char cmd[8192];

	snprintf(cmd, sizeof(cmd), "'%s' %s", bin, args);
	return run(cmd, out, len);
}

/* ---- a parsed fleet ---- */

struct fleet {
	struct arena *arena;
	struct wire_stream *s;
	size_t n;
	json_object *truth;
};

static int fleet_load(struct fleet *f, const char *args, bool with_truth)
{
	char full[4096], path[256], *out = NULL;
	size_t len, cap = 0;
	struct wire_limits lim;
	struct wire_parser *p;
	int rc;

	memset(f, 0, sizeof(*f));
	snprintf(path, sizeof(path), "%s/truth.json", tmpdir);
	snprintf(full, sizeof(full), "%s --validate%s%s", args, with_truth ? " --truth " : "",
		 with_truth ? path : "");
	rc = gen(full, &out, &len);
	if (rc != 0) {
		fprintf(stderr, "  genfleet %s: exit status %d\n", full, rc);
		free(out);
		return -1;
	}
	wire_limits_default(&lim);
	p = wire_parser_open(&lim);
	f->arena = arena_open(0);
	for (char *line = out, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl) {
			fprintf(stderr, "  output does not end with a newline\n");
			rc = -1;
			break;
		}
		if (f->n == cap) {
			cap = cap ? cap * 2 : 64;
			f->s = realloc(f->s, cap * sizeof(*f->s));
		}
		if (wire_parse(p, line, (size_t)(nl - line), f->arena, &f->s[f->n]) != WIRE_OK) {
			fprintf(stderr, "  line %zu: %s\n", f->n + 1, wire_parser_error(p));
			rc = -1;
			break;
		}
		f->n++;
	}
	wire_parser_free(p);
	free(out);
	if (rc == 0 && with_truth) {
		f->truth = json_object_from_file(path);
		if (!f->truth) {
			fprintf(stderr, "  %s: not JSON\n", path);
			rc = -1;
		}
	}
	return rc;
}

static void fleet_free(struct fleet *f)
{
	arena_free(f->arena);
	free(f->s);
	json_object_put(f->truth);
}

static json_object *jget(json_object *o, const char *key)
{
	json_object *v = NULL;

	json_object_object_get_ex(o, key, &v);
	return v;
}

static const char *label(const struct wire_stream *s, const char *key)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (strcmp(s->labels[i].key, key) == 0)
			return s->labels[i].value;
	return "";
}

/* Is the pattern (frame strings) a subsequence of stack k of stream s? */
static bool stack_has(const struct wire_stream *s, uint32_t k, json_object *pattern)
{
	size_t np = json_object_array_length(pattern), i = 0;
	const struct wire_stack *st = &s->stacks[k];

	for (uint32_t j = 0; j < st->len && i < np; j++)
		if (strcmp(s->frames[st->frames[j]],
			   json_object_get_string(json_object_array_get_idx(pattern, i))) == 0)
			i++;
	return np > 0 && i == np;
}

static bool overlaps(const struct wire_event *a, const struct wire_event *b)
{
	return a->ts_ns <= b->ts_ns + b->dur_ns && b->ts_ns <= a->ts_ns + a->dur_ns;
}

/* ---- tests ---- */

static void test_deterministic(void)
{
	char *a = NULL, *b = NULL, *c = NULL, *d = NULL, args[512];
	size_t la = 0, lb = 0, lc = 0, ld = 0;

	CHECK_INT(gen("--streams 12 --events 400 --seed 7", &a, &la), 0);
	CHECK_INT(gen("--streams 12 --events 400 --seed 7", &b, &lb), 0);
	CHECK_INT(gen("--streams 12 --events 400 --seed 8", &c, &lc), 0);
	snprintf(args, sizeof(args), "--streams 12 --events 400 --seed 7 --out %s/out.ndjson && cat %s/out.ndjson",
		 tmpdir, tmpdir);
	CHECK_INT(gen(args, &d, &ld), 0);
	CHECK(la > 10000);
	CHECK(la == lb && memcmp(a, b, la) == 0);
	CHECK(la == ld && memcmp(a, d, la) == 0);
	CHECK(la != lc || memcmp(a, c, la) != 0);
	free(a);
	free(b);
	free(c);
	free(d);
}

static void test_usage(void)
{
	CHECK_INT(gen("--events 63 >/dev/null 2>&1", NULL, NULL), 2);
	CHECK_INT(gen("--hosts 1 --apps a,b >/dev/null 2>&1", NULL, NULL), 2);
	CHECK_INT(gen("--apps a,a >/dev/null 2>&1", NULL, NULL), 2);
	CHECK_INT(gen("--apps 'Big' >/dev/null 2>&1", NULL, NULL), 2);
	CHECK_INT(gen("--no-such-option >/dev/null 2>&1", NULL, NULL), 2);
	CHECK_INT(gen("extra >/dev/null 2>&1", NULL, NULL), 2);
	CHECK_INT(gen("--help >/dev/null 2>&1", NULL, NULL), 0);
	CHECK_INT(gen("--streams 0", NULL, NULL), 0);
}

/* Every stream is valid, exactly M events, time-consistent, with a real symptom. */
static void check_streams(const struct fleet *f, size_t streams, size_t events)
{
	CHECK_INT(f->n, streams);
	for (size_t i = 0; i < f->n; i++) {
		const struct wire_stream *s = &f->s[i];
		int64_t tids[64], busy[64], period = strcmp(label(s, "profiler.hz"), "100") == 0 ? 10000000 : 1000000;
		size_t nt = 0;
		bool bad_dur = false, bad_time = false, bad_readier = false, st_seen = false;

		CHECK_INT(s->nevents, events);
		CHECK_STR(s->symptom.kind, "unit_violation");
		CHECK(s->symptom.unit_type != NULL);
		CHECK(s->symptom.threshold_ns > 0);
		CHECK(s->symptom.end_ns - s->symptom.start_ns > s->symptom.threshold_ns);
		CHECK(strcmp(label(s, "arch"), "x86_64") == 0 || strcmp(label(s, "arch"), "i686") == 0);
		CHECK(s->version && s->build_id && strlen(s->build_id) == 40);
		for (size_t k = 0; k < i; k++)
			CHECK(strcmp(f->s[k].stream_id, s->stream_id) != 0);
		/* events come sorted by time; per thread they never overlap */
		for (size_t e = 0; e < s->nevents; e++) {
			const struct wire_event *ev = &s->events[e];
			size_t t = 0;
			while (t < nt && tids[t] != ev->tid)
				t++;
			if (t == nt && nt < 64) {
				tids[nt] = ev->tid;
				busy[nt++] = 0;
			}
			if (t < nt && ev->ts_ns < busy[t])
				bad_time = true;
			if (t < nt)
				busy[t] = ev->ts_ns + ev->dur_ns;
			if (e && ev->ts_ns < s->events[e - 1].ts_ns)
				bad_time = true;
			if (ev->kind == WIRE_RUN && ev->dur_ns != period)
				bad_dur = true;
			st_seen |= ev->tid == s->symptom.tid;
		}
		for (size_t e = 0; e < s->nevents; e++) {
			const struct wire_event *ev = &s->events[e];
			bool known = ev->readier_tid == 0;
			for (size_t t = 0; t < nt; t++)
				known |= tids[t] == ev->readier_tid;
			bad_readier |= !known || ev->readier_tid == ev->tid;
		}
		CHECK(!bad_time);
		CHECK(!bad_dur);
		CHECK(!bad_readier);
		CHECK(st_seen);
		CHECK(nt >= 6 && nt <= 24);
	}
}

/* The wait graph of mining.md section 3, written again here from the spec. */
static void waitgraph(const struct wire_stream *s, uint8_t *in)
{
	size_t n = s->nevents, *queue = malloc(n * sizeof(*queue)), qh = 0, qt = 0;

	memset(in, 0, n);
	for (size_t i = 0; i < n; i++) {
		const struct wire_event *e = &s->events[i];
		if (e->tid == s->symptom.tid && e->ts_ns <= s->symptom.end_ns &&
		    e->ts_ns + e->dur_ns >= s->symptom.start_ns) {
			in[i] = 1;
			queue[qt++] = i;
		}
	}
	while (qh < qt) {
		const struct wire_event *e = &s->events[queue[qh++]];
		if (e->kind != WIRE_WAIT || !e->readier_tid)
			continue;
		for (size_t j = 0; j < n; j++)
			if (!in[j] && s->events[j].tid == e->readier_tid && overlaps(&s->events[j], e)) {
				in[j] = 1;
				queue[qt++] = j;
			}
	}
	free(queue);
}

/* all_variants: the fleet is big enough for every variant of every bug to occur. */
static void check_truth(const struct fleet *f, int nbugs, bool all_variants)
{
	json_object *bugs = jget(f->truth, "bugs"), *list = jget(f->truth, "stream_list");
	json_object *arch = jget(f->truth, "arch_frames");
	json_object *i686 = jget(arch, "i686"), *x86 = jget(arch, "x86_64");

	CHECK(bugs && list && i686 && x86);
	if (!bugs || !list || !i686 || !x86)
		return;
	CHECK_INT(json_object_array_length(bugs), nbugs);
	CHECK_INT(json_object_array_length(list), f->n);
	CHECK(json_object_array_length(i686) > 10);
	CHECK(json_object_array_length(x86) > 3);
	/* the 32-bit build enters the kernel through the vDSO and the compat entry */
	{
		const char *want[] = { "[vdso]!__kernel_vsyscall", "[kernel.kallsyms]!entry_SYSENTER_compat_after_hwframe",
				       "[kernel.kallsyms]!__ia32_sys_futex_time32" };
		for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
			bool there = false;
			for (size_t j = 0; j < json_object_array_length(i686); j++)
				there |= strcmp(json_object_get_string(json_object_array_get_idx(i686, j)), want[w]) == 0;
			CHECK(there);
		}
	}

	/* the wait-graph AOI totals of every stream */
	for (size_t i = 0; i < f->n; i++) {
		const struct wire_stream *s = &f->s[i];
		json_object *rec = json_object_array_get_idx(list, i);
		uint8_t *in = malloc(s->nevents);
		int64_t run = 0, wait = 0;

		waitgraph(s, in);
		for (size_t e = 0; e < s->nevents; e++)
			if (in[e])
				*(s->events[e].kind == WIRE_RUN ? &run : &wait) += s->events[e].dur_ns;
		CHECK_STR(json_object_get_string(jget(rec, "stream_id")), s->stream_id);
		CHECK_INT(json_object_get_int64(jget(rec, "aoi_run_ns")), run);
		CHECK_INT(json_object_get_int64(jget(rec, "aoi_wait_ns")), wait);
		free(in);
	}

	/* frames only one architecture has are exactly where that architecture is */
	for (size_t i = 0; i < f->n; i++) {
		const struct wire_stream *s = &f->s[i];
		bool is_i686 = strcmp(label(s, "arch"), "i686") == 0, has_i686 = false, has_x86 = false;
		for (size_t k = 0; k < s->nframes; k++) {
			for (size_t j = 0; j < json_object_array_length(i686); j++)
				has_i686 |= strcmp(s->frames[k], json_object_get_string(
							json_object_array_get_idx(i686, j))) == 0;
			for (size_t j = 0; j < json_object_array_length(x86); j++)
				has_x86 |= strcmp(s->frames[k], json_object_get_string(
							json_object_array_get_idx(x86, j))) == 0;
		}
		CHECK(has_i686 == is_i686);
		CHECK(has_x86 == !is_i686);
	}

	for (int b = 0; b < nbugs; b++) {
		json_object *bug = json_object_array_get_idx(bugs, (size_t)b);
		json_object *frames = jget(bug, "frames"), *wframes = jget(bug, "wait_frames");
		json_object *inj = jget(bug, "streams"), *vars = jget(bug, "variants");
		const char *type = json_object_get_string(jget(bug, "type"));
		const char *version = json_object_get_string(jget(bug, "version"));
		bool convoy = strcmp(type, "lock_convoy") == 0;
		int kind = strcmp(json_object_get_string(jget(bug, "kind")), "wait") == 0 ? WIRE_WAIT : WIRE_RUN;
		size_t ninj = json_object_array_length(inj), found = 0;
		int64_t total = 0;

		CHECK(json_object_array_length(frames) >= 2);
		CHECK(ninj >= 1);
		CHECK_INT(json_object_get_int64(jget(bug, "injected_streams")), ninj);
		CHECK(json_object_array_length(vars) >= 1);
		for (int k = 0; k < b; k++)
			CHECK(strcmp(json_object_get_string(jget(json_object_array_get_idx(bugs, (size_t)k), "name")),
				     json_object_get_string(jget(bug, "name"))) != 0);
		/* a variant's frames contain the bug's signature */
		for (size_t v = 0; v < json_object_array_length(vars); v++) {
			json_object *vf = jget(json_object_array_get_idx(vars, v), "frames");
			json_object *sig = convoy ? wframes : frames;
			size_t i = 0;
			for (size_t j = 0; j < json_object_array_length(vf) && i < json_object_array_length(sig); j++)
				if (strcmp(json_object_get_string(json_object_array_get_idx(vf, j)),
					   json_object_get_string(json_object_array_get_idx(sig, i))) == 0)
					i++;
			CHECK(i == json_object_array_length(sig));
		}
		/* the signature is found exactly in the injected streams, at the stated cost */
		for (size_t i = 0; i < f->n; i++) {
			const struct wire_stream *s = &f->s[i];
			json_object *hit = NULL, *vframes = NULL;
			int64_t cost = 0, wcost = 0, holder_in_wait = 0, vcost = 0, elsewhere = 0;

			for (size_t k = 0; k < ninj; k++)
				if ((size_t)json_object_get_int64(jget(json_object_array_get_idx(inj, k), "index")) == i)
					hit = json_object_array_get_idx(inj, k);
			if (hit)
				vframes = jget(json_object_array_get_idx(vars, (size_t)json_object_get_int64(
							  jget(hit, "variant"))), "frames");
			for (size_t e = 0; e < s->nevents; e++) {
				const struct wire_event *ev = &s->events[e];
				bool sig = stack_has(s, ev->stack, frames), on_st = ev->tid == s->symptom.tid;

				if (ev->kind == kind && (convoy || on_st) && sig)
					cost += ev->dur_ns;
				else if (sig || (convoy && !on_st && stack_has(s, ev->stack, wframes)))
					elsewhere++;    /* convoy: other requests queued on the lock */
				if (vframes && on_st && stack_has(s, ev->stack, vframes))
					vcost += ev->kind == kind ? ev->dur_ns : 0;
				/* the convoy: the symptom thread waits, readied by the thread that
				 * burns CPU under the lock meanwhile */
				if (convoy && ev->kind == WIRE_WAIT && on_st && stack_has(s, ev->stack, wframes)) {
					CHECK(ev->readier_tid != 0);
					CHECK(vframes && stack_has(s, ev->stack, vframes));
					wcost += ev->dur_ns;
					for (size_t h = 0; h < s->nevents; h++) {
						const struct wire_event *hv = &s->events[h];
						if (hv->tid == ev->readier_tid && hv->kind == WIRE_RUN &&
						    overlaps(hv, ev) && stack_has(s, hv->stack, frames))
							holder_in_wait += hv->dur_ns;
					}
				}
			}
			if (!hit) {
				CHECK_INT(cost, 0);
				CHECK_INT(wcost, 0);
				CHECK_INT(elsewhere, 0);
				continue;
			}
			found++;
			total += cost;
			CHECK_INT(cost, json_object_get_int64(jget(hit, "cost_ns")));
			CHECK(cost > 0);
			/* the stream shows its variant: the variant's frames are on the same events */
			if (convoy) {
				CHECK_INT(wcost, json_object_get_int64(jget(hit, "wait_cost_ns")));
				CHECK_INT(holder_in_wait, cost);
			} else {
				CHECK_INT(vcost, cost);
				CHECK_INT(elsewhere, 0);
			}
			if (version)
				CHECK_STR(s->version, version);
			if (strcmp(type, "arch32_variant") == 0)
				CHECK_INT(json_object_get_int64(jget(hit, "variant")),
					  strcmp(label(s, "arch"), "i686") == 0);
		}
		CHECK_INT(found, ninj);
		CHECK_INT(total, json_object_get_int64(jget(bug, "cost_ns")));
		/* the variants' stream counts add up, and each variant was injected somewhere */
		for (size_t v = 0; v < json_object_array_length(vars); v++) {
			int64_t n = 0;
			for (size_t k = 0; k < ninj; k++)
				n += json_object_get_int64(jget(json_object_array_get_idx(inj, k), "variant")) == (int64_t)v;
			CHECK_INT(json_object_get_int64(jget(json_object_array_get_idx(vars, v), "streams")), n);
			CHECK(n > 0 || !all_variants);
		}
		printf("  bug %-42s %-22s streams=%zu cost=%.2fs\n", json_object_get_string(jget(bug, "name")),
		       type, ninj, (double)total / 1e9);
	}
}

static void test_fleet(void)
{
	struct fleet f;

	if (fleet_load(&f, "--streams 40 --events 500 --hosts 12 --bugs 7 --seed 3", true) == 0) {
		check_streams(&f, 40, 500);
		check_truth(&f, 7, true);
	} else {
		CHECK(!"genfleet failed");
	}
	fleet_free(&f);
}

static void test_small_and_odd(void)
{
	struct fleet f;

	if (fleet_load(&f, "--streams 6 --events 64 --apps solo --hosts 1 --bugs 2", true) == 0) {
		check_streams(&f, 6, 64);
		check_truth(&f, 2, false);
	} else {
		CHECK(!"genfleet failed");
	}
	fleet_free(&f);
}

static bool has_stream(const struct fleet *f, const char *id)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->s[i].stream_id, id) == 0)
			return true;
	return false;
}

static double wait_share(const struct fleet *f)
{
	size_t w = 0, n = 0;

	for (size_t i = 0; i < f->n; i++)
		for (size_t e = 0; e < f->s[i].nevents; e++, n++)
			w += f->s[i].events[e].kind == WIRE_WAIT;
	return n ? (double)w / (double)n : 0;
}

/* --part I/N: the parts are the fleet's streams, each once; a part's truth names its own streams.
 * --wait-share: the share of waits asked for. */
static void test_parts_and_waits(void)
{
	struct fleet all, p0, p1, w, d;
	size_t hits = 0;

	CHECK_INT(gen("--part 2/2 >/dev/null 2>&1", NULL, NULL), 2);
	CHECK_INT(gen("--part 1 >/dev/null 2>&1", NULL, NULL), 2);
	CHECK_INT(gen("--wait-share 0.99 >/dev/null 2>&1", NULL, NULL), 2);
	CHECK_INT(gen("--wait-share x >/dev/null 2>&1", NULL, NULL), 2);
	if (fleet_load(&all, "--streams 10 --events 300 --seed 5", false) < 0 ||
	    fleet_load(&p1, "--streams 10 --events 300 --seed 5 --part 1/2", false) < 0 ||
	    fleet_load(&p0, "--streams 10 --events 300 --seed 5 --part 0/2", true) < 0) {
		CHECK(!"genfleet failed");
		return;
	}
	CHECK_INT(p0.n, 5);
	CHECK_INT(p1.n, 5);
	for (size_t i = 0; i < p0.n; i++)
		CHECK(has_stream(&all, p0.s[i].stream_id) && !has_stream(&p1, p0.s[i].stream_id));
	for (size_t i = 0; i < p1.n; i++)
		CHECK(has_stream(&all, p1.s[i].stream_id));
	{
		json_object *bugs = jget(p0.truth, "bugs"), *list = jget(p0.truth, "stream_list");

		for (size_t b = 0; b < json_object_array_length(bugs); b++) {
			json_object *st = jget(json_object_array_get_idx(bugs, b), "streams");

			for (size_t k = 0; k < json_object_array_length(st); k++, hits++) {
				json_object *h = json_object_array_get_idx(st, k);

				CHECK(has_stream(&p0, json_object_get_string(jget(h, "stream_id"))));
				CHECK_INT(json_object_get_int(jget(h, "index")) % 2, 0);
			}
		}
		CHECK_INT(json_object_array_length(list), 5);
		for (size_t k = 0; k < json_object_array_length(list); k++)
			CHECK_INT(json_object_get_int(jget(json_object_array_get_idx(list, k), "index")), 2 * (int)k);
	}
	CHECK(hits > 0);
	fleet_free(&all);
	fleet_free(&p0);
	fleet_free(&p1);
	/* the event loops' filler, most of a long stream's events (0.73 of 200,000 in make bench) */
	if (fleet_load(&w, "--streams 2 --events 40000 --seed 5 --wait-share 0.75", false) == 0 &&
	    fleet_load(&d, "--streams 2 --events 40000 --seed 5", false) == 0) {
		fprintf(stderr, "  waits: %.3f with --wait-share 0.75, %.3f without\n", wait_share(&w), wait_share(&d));
		CHECK(wait_share(&w) > 0.70 && wait_share(&w) < 0.80);
		CHECK(wait_share(&d) < 0.65);
	} else {
		CHECK(!"genfleet failed");
	}
	fleet_free(&w);
	fleet_free(&d);
}

/* --first N: the fleet's streams from index N on, byte for byte where no bug variant is forced
 * (the first stream that can show one always does, counted from the generator's start). */
static void test_first(void)
{
	char *all = NULL, *later = NULL;
	size_t lall = 0, llater = 0;
	const char *tail;
	struct fleet a, f;

	CHECK_INT(gen("--first -1 >/dev/null 2>&1", NULL, NULL), 2);
	CHECK_INT(gen("--streams 10 --events 300 --seed 5 --bugs 0", &all, &lall), 0);
	CHECK_INT(gen("--streams 4 --events 300 --seed 5 --bugs 0 --first 6", &later, &llater), 0);
	tail = all;
	for (int k = 0; all && k < 6 && (tail = strchr(tail, '\n')); k++)
		tail++;
	CHECK(later && tail && llater > 1000 && llater == lall - (size_t)(tail - all) &&
	      memcmp(tail, later, llater) == 0);
	free(all);
	free(later);
	/* with bugs: the same streams (ids, hosts), a fleet of its own otherwise */
	if (fleet_load(&a, "--streams 10 --events 300 --seed 5", false) < 0 ||
	    fleet_load(&f, "--streams 4 --events 300 --seed 5 --first 6", false) < 0) {
		CHECK(!"genfleet failed");
		return;
	}
	CHECK_INT(f.n, 4);
	for (size_t i = 0; i < f.n && a.n == 10; i++) {
		CHECK_STR(f.s[i].stream_id, a.s[6 + i].stream_id);
		CHECK_STR(f.s[i].host, a.s[6 + i].host);
	}
	fleet_free(&a);
	fleet_free(&f);
}

/* Distinct stacks per stream and across the fleet, their reuse, and depth. */
static void test_stacks(void)
{
	struct fleet f;
	struct intern *fleet = intern_open(0);
	size_t per_min = SIZE_MAX, per_max = 0, per_sum = 0, reused = 0, nfleet, cap = 0;
	double win_depth = 0, all_depth = 0, nwin = 0, nall = 0;
	struct use { size_t streams, last; } *use = NULL;
	static char key[1 << 17];
	int64_t *ids[10] = { NULL };
	double ev_reused = 0;

	if (fleet_load(&f, "--streams 10 --events 2000 --seed 11", false) != 0) {
		CHECK(!"genfleet failed");
		fleet_free(&f);
		intern_free(fleet);
		return;
	}
	check_streams(&f, 10, 2000);
	for (size_t i = 0; i < f.n; i++) {
		const struct wire_stream *s = &f.s[i];
		per_sum += s->nstacks;
		per_min = s->nstacks < per_min ? s->nstacks : per_min;
		per_max = s->nstacks > per_max ? s->nstacks : per_max;
		for (size_t e = 0; e < s->nevents; e++) {
			const struct wire_event *ev = &s->events[e];
			double d = s->stacks[ev->stack].len;
			all_depth += d;
			nall++;
			if (ev->tid == s->symptom.tid && ev->ts_ns <= s->symptom.end_ns &&
			    ev->ts_ns + ev->dur_ns >= s->symptom.start_ns) {
				win_depth += d;
				nwin++;
			}
		}
		/* a stack, across streams, is its frame strings one per line */
		ids[i] = calloc(s->nstacks, sizeof(**ids));
		for (size_t k = 0; k < s->nstacks; k++) {
			size_t o = 0;
			bool added;
			int64_t id;
			for (uint32_t x = 0; x < s->stacks[k].len && o < sizeof(key); x++)
				o += (size_t)snprintf(key + o, sizeof(key) - o, "%s\n",
						      s->frames[s->stacks[k].frames[x]]);
			id = intern_put(fleet, key, o < sizeof(key) ? o : sizeof(key), &added);
			CHECK(id >= 0);
			ids[i][k] = id;
			if (id < 0)
				continue;
			if ((size_t)id >= cap) {
				cap = cap ? cap * 2 : 4096;
				use = realloc(use, cap * sizeof(*use));
			}
			if (added)
				use[id] = (struct use){ 1, i };
			else if (use[id].last != i)
				use[id] = (struct use){ use[id].streams + 1, i };
		}
	}
	nfleet = intern_count(fleet);
	for (size_t j = 0; j < nfleet; j++)
		reused += use[j].streams > 1;
	/* how much of each stream's work runs on stacks other streams have too */
	for (size_t i = 0; i < f.n; i++) {
		size_t shared = 0;
		for (size_t e = 0; e < f.s[i].nevents; e++) {
			int64_t id = ids[i][f.s[i].events[e].stack];
			shared += id >= 0 && use[id].streams > 1;
		}
		ev_reused += (double)shared / (double)f.s[i].nevents / (double)f.n;
		free(ids[i]);
	}
	printf("  stacks per stream: min=%zu avg=%.1f max=%zu; fleet: %zu distinct, %.0f%% of them in 2+ streams\n",
	       per_min, (double)per_sum / (double)f.n, per_max, nfleet, 100.0 * (double)reused / (double)nfleet);
	printf("  events on a stack that other streams have too: %.0f%% (average over streams)\n",
	       100.0 * ev_reused);
	printf("  average depth: %.1f over all events, %.1f in the symptom windows (--depth 36)\n",
	       all_depth / nall, win_depth / nwin);
	CHECK(per_min >= 100 && per_max <= 450);
	CHECK(nfleet > per_sum / f.n * 3 / 2 && nfleet < per_sum);
	CHECK(reused * 100 > nfleet * 20);
	CHECK(ev_reused > 0.5);
	CHECK(win_depth / nwin > 36 * 0.85 && win_depth / nwin < 36 * 1.15);
	CHECK(all_depth / nall > 24 && all_depth / nall < 36);
	fleet_free(&f);
	intern_free(fleet);
	free(use);
}

static void find_bin(int argc, char **argv)
{
	const char *env = getenv("SM_BIN_DIR");
	const char *slash = strrchr(argv[0], '/');

	if (argc > 1) {
		snprintf(bin, sizeof(bin), "%s", argv[1]);
		return;
	}
	snprintf(bin, sizeof(bin), "%.*sgenfleet", slash ? (int)(slash - argv[0] + 1) : 0, argv[0]);
	if (access(bin, X_OK) == 0 || !env)
		return;
	snprintf(bin, sizeof(bin), "%s/genfleet", env);
	if (access(bin, X_OK) != 0)
		snprintf(bin, sizeof(bin), "%s/../tests/genfleet", env);
}

int main(int argc, char **argv)
{
	char cmd[256];
	int rc;

	find_bin(argc, argv);
	if (access(bin, X_OK) != 0 || !mkdtemp(tmpdir)) {
		fprintf(stderr, "test_genfleet: no genfleet binary at %s (give its path as argument)\n", bin);
		printf("0 passed, 1 failed\n");
		return 1;
	}
	printf("genfleet: %s\n", bin);
	RUN(test_usage);
	RUN(test_deterministic);
	RUN(test_fleet);
	RUN(test_small_and_odd);
	RUN(test_stacks);
	RUN(test_parts_and_waits);
	RUN(test_first);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	rc = system(cmd);
	(void)rc;
	return CHECK_DONE();
}
