/*
 * Tests of the profiler-output importers (formats/import.h): every perf and folded
 * file of the shared data set imports and survives wire_write_json/wire_parse,
 * small files give exactly the events worked out by hand, and input of the
 * wrong kind is refused at the right line.
 *
 * Usage: test_import [DATA_DIR]  (else $SM_DATA, else ../shared/data)
 */
#include "formats/bcc.h"
#include "formats/folded.h"
#include "formats/formats.h"
#include "formats/import.h"
#include "formats/perf.h"
#include "formats/pprof.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/intern.h"
#include "common/util.h"
#include "common/wire.h"
#include "tests/unit/check.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

static const char *data_dir = "../shared/data";
static char tmp_dir[] = "/tmp/test_import.XXXXXX";

static void path_in(char *out, size_t n, const char *dir, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

static const char *data_file(const char *rel)
{
	static char p[4][4096];
	static int k;

	k = (k + 1) % 4;
	path_in(p[k], sizeof(p[k]), data_dir, rel);
	return p[k];
}

/* Write text to a file in the temporary directory; returns its path. */
static const char *tmp_file(const char *name, const char *text, size_t len)
{
	static char p[4][4096];
	static int k;
	FILE *f;

	k = (k + 1) % 4;
	path_in(p[k], sizeof(p[k]), tmp_dir, name);
	f = fopen(p[k], "wb");
	if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", p[k]);
		exit(2);
	}
	return p[k];
}

static const char *tmp_text(const char *name, const char *text)
{
	return tmp_file(name, text, strlen(text));
}

static struct importer *open_opts(const struct import_format *fmt, struct import_opts *o)
{
	if (!o->host)
		o->host = "test-host";
	if (!o->app)
		o->app = "imported";
	return importer_open(fmt, o);
}

/* Runs im on path and copies its first stream into *s: the formats here make one. */
static int run1(struct importer *im, const char *path, struct wire_stream *s)
{
	memset(s, 0, sizeof(*s));
	if (importer_run(im, path) < 0)
		return -1;
	*s = *importer_stream(im, 0);
	return 0;
}

static struct importer *open_fmt(const struct import_format *fmt)
{
	struct import_opts o;

	import_opts_init(&o);
	return open_opts(fmt, &o);
}

/* The frames of event i's stack joined with ';', outermost first. */
static const char *stack_of(const struct wire_stream *s, size_t i)
{
	static char out[1 << 16];
	const struct wire_stack *st = &s->stacks[s->events[i].stack];
	size_t o = 0;

	out[0] = '\0';
	for (uint32_t k = 0; k < st->len; k++) {
		int n = snprintf(out + o, sizeof(out) - o, "%s%s", k ? ";" : "",
				 s->frames[st->frames[k]]);
		if (n < 0 || (size_t)n >= sizeof(out) - o)
			break;
		o += (size_t)n;
	}
	return out;
}

/* The error, with the path prefix replaced by "PATH" for exact comparisons. */
static const char *error_of(const struct importer *im, const char *path)
{
	static char out[1200];
	const char *e = importer_error(im);
	size_t pl = strlen(path);

	if (strncmp(e, path, pl) == 0)
		snprintf(out, sizeof(out), "PATH%s", e + pl);
	else
		snprintf(out, sizeof(out), "%s", e);
	return out;
}

/*
 * Properties every imported stream must have, and a round trip through the
 * writer and the strict parser with default limits that must give it back.
 */
static void check_stream(const char *name, const struct wire_stream *s)
{
	struct wire_limits lim;
	struct wire_parser *p;
	struct arena *a = arena_open(0);
	struct buf b = BUF_INIT(0);
	struct wire_stream r;
	struct intern *seen_f = intern_open(0), *seen_s = intern_open(0);
	char canon[37];
	int rc;

	CHECK(util_uuid_canon(s->stream_id, strlen(s->stream_id), canon));
	CHECK(s->stream_id[14] == '8');   /* from the content: docs/import.md */
	CHECK_STR(s->symptom.kind, "import");
	CHECK(s->symptom.start_ns <= s->symptom.end_ns);
	CHECK(s->nevents > 0);
	for (size_t i = 0; i < s->nframes; i++) {
		size_t n = strlen(s->frames[i]);

		CHECK(n > 0 && n <= WIRE_MAX_FRAME);
		CHECK(util_utf8_valid(s->frames[i], n));
		CHECK(intern_put(seen_f, s->frames[i], n, NULL) == (int64_t)i); /* no duplicates */
	}
	for (size_t i = 0; i < s->nstacks; i++) {
		CHECK(s->stacks[i].len >= 1 && s->stacks[i].len <= WIRE_MAX_STACK_DEPTH);
		CHECK(intern_put(seen_s, s->stacks[i].frames, s->stacks[i].len * sizeof(uint32_t),
				 NULL) == (int64_t)i);
	}
	for (size_t i = 1; i < s->nevents; i++)
		CHECK(s->events[i - 1].ts_ns <= s->events[i].ts_ns);

	wire_limits_default(&lim);
	p = wire_parser_open(&lim);
	CHECK(p && a);
	CHECK_INT(wire_write_json(s, &b), 0);
	rc = wire_parse(p, b.data, b.len, a, &r);
	if (rc != WIRE_OK)
		fprintf(stderr, "  %s: wire_parse: %s\n", name, wire_parser_error(p));
	CHECK_INT(rc, WIRE_OK);
	if (rc == WIRE_OK) {
		CHECK_STR(r.stream_id, s->stream_id);
		CHECK_INT(r.symptom.tid, s->symptom.tid);
		CHECK_INT(r.symptom.start_ns, s->symptom.start_ns);
		CHECK_INT(r.symptom.end_ns, s->symptom.end_ns);
		CHECK_INT(r.nframes, s->nframes);
		CHECK_INT(r.nstacks, s->nstacks);
		CHECK_INT(r.nevents, s->nevents);
		CHECK_INT(r.nthreads, s->nthreads);
		for (size_t i = 0; i < r.nthreads && i < s->nthreads; i++)
			CHECK(r.threads[i].tid == s->threads[i].tid && strcmp(r.threads[i].name, s->threads[i].name) == 0);
		for (size_t i = 0; i < r.nframes && i < s->nframes; i++)
			CHECK(strcmp(r.frames[i], s->frames[i]) == 0);
		for (size_t i = 0; i < r.nevents && i < s->nevents; i++) {
			const struct wire_event *x = &r.events[i], *y = &s->events[i];

			CHECK(x->kind == y->kind && x->tid == y->tid && x->ts_ns == y->ts_ns &&
			      x->dur_ns == y->dur_ns && x->stack == y->stack &&
			      x->readier_tid == y->readier_tid);
		}
	}
	intern_free(seen_f);
	intern_free(seen_s);
	buf_release(&b);
	wire_parser_free(p);
	arena_free(a);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Import every file of data/<sub> with fmt; returns how many there were. */
static int import_dir(const char *sub, const struct import_format *fmt)
{
	struct dirent **ents;
	char dir[4096], path[8192];
	struct importer *im = open_fmt(fmt);
	int n, files = 0;

	path_in(dir, sizeof(dir), data_dir, sub);
	n = scandir(dir, &ents, NULL, by_name);
	CHECK(n > 0);
	CHECK(im != NULL);
	for (int i = 0; i < n; i++) {
		struct wire_stream s;
		size_t waits = 0;

		if (ents[i]->d_name[0] == '.') {
			free(ents[i]);
			continue;
		}
		path_in(path, sizeof(path), dir, ents[i]->d_name);
		files++;
		if (run1(im, path, &s) != 0) {
			fprintf(stderr, "  %s/%s: %s\n", sub, ents[i]->d_name, importer_error(im));
			CHECK(!"import failed");
		} else {
			for (size_t k = 0; k < s.nevents; k++)
				waits += s.events[k].kind == WIRE_WAIT;
			fprintf(stderr, "  %s/%s: events=%zu (wait %zu) frames=%zu stacks=%zu\n", sub,
				ents[i]->d_name, s.nevents, waits, s.nframes, s.nstacks);
			check_stream(ents[i]->d_name, &s);
		}
		free(ents[i]);
	}
	if (n > 0)
		free(ents);
	importer_free(im);
	return files;
}

/* The name of tid in s->threads, NULL when it has none; each tid at most once. */
static const char *thread_name(const struct wire_stream *s, int64_t tid)
{
	const char *name = NULL;

	for (size_t i = 0; i < s->nthreads; i++)
		if (s->threads[i].tid == tid) {
			CHECK(name == NULL);
			name = s->threads[i].name;
		}
	return name;
}

static void test_all_perf_files(void)
{
	CHECK(import_dir("perf", &import_perf) >= 34);
}

static void test_all_folded_files(void)
{
	CHECK(import_dir("folded", &import_folded) >= 3);
}

static void test_format_parse(void)
{
	CHECK(import_format_find("perf") == &import_perf);
	CHECK(import_format_find("folded") == &import_folded);
	CHECK(import_format_find("pprof") == &import_pprof);
	CHECK(import_format_find("bcc-offwaketime") == &import_bcc_offwaketime);
	CHECK(import_format_find("auto") == &import_auto);
	CHECK(import_format_find("speedscope") == NULL);
	CHECK(import_format_find(NULL) == NULL);
	importer_free(NULL);
}

/* Two sched_wakeup lines of swapper waking fio (the perfview layout: frame on the
 * header line, old and new argument formats, a byte-order mark, no final newline).
 * fio was never seen before, so it has been waiting since the capture began. */
static void test_perfview_one_wakeup(void)
{
	const char *path = data_file("perf/perfview-one_wakeup.txt");
	struct importer *im = open_fmt(&import_perf);
	struct wire_stream s;

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 1);
	CHECK_INT(s.nframes, 1);
	CHECK_INT(s.nstacks, 1);
	if (s.nevents == 1) {
		CHECK_INT(s.events[0].kind, WIRE_WAIT);
		CHECK_INT(s.events[0].tid, 243615);
		CHECK_INT(s.events[0].ts_ns, 0);
		CHECK_INT(s.events[0].dur_ns, 0);
		CHECK_INT(s.events[0].readier_tid, 0); /* woken by the idle task: external */
		CHECK_STR(stack_of(&s, 0), "[fio]");
	}
	CHECK_INT(s.symptom.tid, 243615);
	CHECK_INT(s.symptom.start_ns, 0);
	CHECK_INT(s.symptom.end_ns, 0);
	importer_free(im);
}

static void test_dd_stacks(void)
{
	const char *path = data_file("perf/flamegraph-perf-dd-stacks-01.txt");
	struct import_opts o;
	struct importer *im = open_fmt(&import_perf);
	struct wire_stream s;

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 11);
	CHECK_INT(s.nframes, 17);
	CHECK_INT(s.nstacks, 10);
	CHECK_STR(s.host, "test-host");
	CHECK_STR(s.app, "imported");
	CHECK(s.version == NULL && s.build_id == NULL && s.nlabels == 0);
	if (s.nevents == 11) {
		for (size_t i = 0; i < 11; i++) {
			CHECK_INT(s.events[i].kind, WIRE_RUN);
			CHECK_INT(s.events[i].tid, 29776);
			CHECK_INT(s.events[i].dur_ns, 10101010); /* the cpu-clock period, in ns */
		}
		CHECK_INT(s.events[0].ts_ns, 666709771979000);
		CHECK_STR(stack_of(&s, 0), "[unknown]+0x0;libc-2.15.so!read;vmlinux!system_call;"
					   "vmlinux!sys_read;vmlinux!vfs_read;vmlinux!fsnotify");
		CHECK_INT(s.events[8].ts_ns, 666709852785000);
		CHECK_STR(stack_of(&s, 8), "[unknown]+0x7f2eb2b31c2c;dd+0x31ef");
		CHECK_INT(s.events[10].ts_ns, 666709872987000);
		CHECK_STR(stack_of(&s, 10), "[unknown]+0x246;vmlinux!system_call");
		CHECK(s.events[2].stack == s.events[5].stack); /* the same stack, stored once */
	}
	CHECK_INT(s.symptom.tid, 29776);
	CHECK_INT(s.symptom.start_ns, 666709771979000);
	CHECK_INT(s.symptom.end_ns, 666709872987000 + 10101010);
	importer_free(im);

	/* a given period wins over the header's */
	import_opts_init(&o);
	o.sample_period_ns = 1000;
	o.host = "h";
	o.app = "a";
	o.version = "1.2";
	o.build_id = "abc";
	im = open_opts(&import_perf, &o);
	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.events[3].dur_ns, 1000);
	CHECK_STR(s.version, "1.2");
	CHECK_STR(s.build_id, "abc");
	CHECK_INT(s.symptom.end_ns, 666709872987000 + 1000);
	importer_free(im);
}

/* perfview's switches: placeholder frames, tabs, the idle task (pid 0). */
static void test_perfview_mixed_switches(void)
{
	const char *path = data_file("perf/perfview-mixed_switches.txt");
	struct importer *im = open_fmt(&import_perf);
	struct wire_stream s;
	static const struct {
		int kind;
		int64_t tid, ts, dur;
		const char *stack;
	} want[] = {
		{ WIRE_WAIT, 1, 0, 0, "[comm2]" },   /* switched in before ever seen */
		{ WIRE_WAIT, 3, 0, 1000000000, "[comm3]" },
		{ WIRE_WAIT, 4, 0, 3000000000, "[comm4]" },
		{ WIRE_WAIT, 1, 1000000000, 3000000000, "module!symbol" }, /* open at the end */
		{ WIRE_WAIT, 3, 2000000000, 2000000000, "module!symbol" },
		{ WIRE_WAIT, 2, 3000000000, 1000000000, "module!symbol" },
		{ WIRE_RUN, 4, 4000000000, 10000000, "module!symbol" }, /* lone sample: 10 ms */
	};

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 7);
	for (size_t i = 0; i < s.nevents && i < 7; i++) {
		CHECK_INT(s.events[i].kind, want[i].kind);
		CHECK_INT(s.events[i].tid, want[i].tid);
		CHECK_INT(s.events[i].ts_ns, want[i].ts);
		CHECK_INT(s.events[i].dur_ns, want[i].dur);
		CHECK_INT(s.events[i].readier_tid, 0);
		CHECK_STR(stack_of(&s, i), want[i].stack);
	}
	CHECK_INT(s.symptom.tid, 4);
	CHECK_INT(s.symptom.start_ns, 0);
	CHECK_INT(s.symptom.end_ns, 4010000000);
	importer_free(im);
}

static bool has_events(const struct wire_stream *s, int64_t tid)
{
	for (size_t i = 0; i < s->nevents; i++)
		if (s->events[i].tid == tid)
			return true;
	return false;
}

/* A real scheduler capture: a pipe ping-pong between the two threads of `pass`. */
static void test_dspeyer_sched(void)
{
	const char *path = data_file("perf/dspeyer-sched-61cb776.perf.txt");
	struct import_opts o;
	struct importer *im;
	struct wire_stream s;
	size_t waits = 0, woken_by_other = 0, ping = 0, pong = 0;

	import_opts_init(&o);
	o.symptom_comm = "pass";
	im = open_opts(&import_perf, &o);
	CHECK_INT(run1(im, path, &s), 0);
	for (size_t i = 0; i < s.nevents; i++) {
		const struct wire_event *e = &s.events[i];

		if (e->kind != WIRE_WAIT)
			continue;
		waits++;
		if (e->readier_tid && e->readier_tid != e->tid && has_events(&s, e->readier_tid))
			woken_by_other++;
		if (e->tid == 17936 && e->readier_tid == 17938 && strstr(stack_of(&s, i), "!pipe_read"))
			ping++;
		if (e->tid == 17938 && e->readier_tid == 17936 && strstr(stack_of(&s, i), "!pipe_read"))
			pong++;
	}
	CHECK(waits > 500);
	CHECK(woken_by_other > 300);
	/* as many as the file's wakeup lines between them (grep: 83 and 84, one of the
	 * 84 woke 17938 from a wait begun before the capture, with an unknown stack) */
	CHECK_INT(ping, 83);
	CHECK_INT(pong, 83);
	CHECK(s.symptom.tid == 17936 || s.symptom.tid == 17938);
	check_stream("dspeyer-61cb776/pass", &s);
	importer_free(im);

	import_opts_init(&o);
	o.symptom_comm = "no-such-comm";
	im = open_opts(&import_perf, &o);
	CHECK_INT(run1(im, path, &s), -1);
	CHECK_STR(error_of(im, path), "PATH: no thread named \"no-such-comm\" in the capture");
	importer_free(im);
}

static const char tiny_sched[] =
	"# hand-made: worker blocks, helper wakes it, helper is preempted, other exits\n"
	"worker 100/101 [000] 1.000000: sched:sched_switch: prev_comm=worker prev_pid=101 "
	"prev_prio=120 prev_state=S ==> next_comm=helper next_pid=200 next_prio=120\n"
	"\tffffffff81000001 __schedule+0x10 ([kernel.kallsyms])\n"
	"\tffffffff81000002 futex_wait ([kernel.kallsyms])\n"
	"\t    7f0000000003 pthread_cond_wait+0x40 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
	"\t          400100 main (/opt/app/worker)\n"
	"\n"
	"helper 200/200 [000] 1.000500: sched:sched_wakeup: comm=worker pid=101 prio=120 target_cpu=001\n"
	"\tffffffff81000010 try_to_wake_up ([kernel.kallsyms])\n"
	"\n"
	"helper 200/200 [000] 1.000600: sched:sched_wakeup: comm=other pid=300 prio=120 target_cpu=001\n"
	"\tffffffff81000010 try_to_wake_up ([kernel.kallsyms])\n"
	"\n"
	"swapper 0/0 [001] 1.002000: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 "
	"prev_state=R ==> next_comm=worker next_pid=101 next_prio=120\n"
	"\n"
	"helper 200/200 [000] 1.003000: sched:sched_switch: prev_comm=helper prev_pid=200 "
	"prev_prio=120 prev_state=R+ ==> next_comm=other next_pid=300 next_prio=120\n"
	"\tffffffff81000020 preempt_schedule ([kernel.kallsyms])\n"
	"\n"
	"worker 100/101 [001] 1.004000: cycles: \n"
	"\t          400200 compute (/opt/app/worker)\n"
	"\t          400100 main (/opt/app/worker)\n"
	"\n"
	"worker 100/101 [001] 1.005000: sched:sched_switch: prev_comm=worker prev_pid=101 "
	"prev_prio=120 prev_state=D ==> next_comm=swapper/1 next_pid=0 next_prio=120\n"
	"\tffffffff81000030 io_schedule ([kernel.kallsyms])\n"
	"\n"
	"other 300/300 [000] 1.005500: sched:sched_wakeup: comm=helper pid=200 prio=120 target_cpu=000\n"
	"\tffffffff81000010 try_to_wake_up ([kernel.kallsyms])\n"
	"\n"
	"other 300/300 [000] 1.006000: sched:sched_switch: prev_comm=other prev_pid=300 "
	"prev_prio=120 prev_state=X ==> next_comm=helper next_pid=200 next_prio=120\n";

static void test_tiny_sched(void)
{
	const char *path = tmp_text("tiny-sched.txt", tiny_sched);
	struct import_opts o;
	struct importer *im = open_fmt(&import_perf);
	struct wire_stream s;
	static const struct {
		int kind;
		int64_t tid, ts, dur, readier;
		const char *stack;
	} want[] = {
		/* blocked at 1.000 in pthread_cond_wait, woken by helper, back on a CPU at 1.002 */
		{ WIRE_WAIT, 101, 1000000000, 2000000, 200,
		  "worker!main;libc.so.6!pthread_cond_wait;[kernel.kallsyms]!futex_wait;"
		  "[kernel.kallsyms]!__schedule" },
		/* helper was switched in at once: waiting since the capture began, for 0 ns */
		{ WIRE_WAIT, 200, 1000000000, 0, 0, "[helper]" },
		/* other: first seen being woken by helper, switched in at 1.003 */
		{ WIRE_WAIT, 300, 1000000000, 3000000, 200, "[other]" },
		/* helper preempted (R+): no readier, though other "wakes" it at 1.0055 */
		{ WIRE_WAIT, 200, 1003000000, 3000000, 0, "[kernel.kallsyms]!preempt_schedule" },
		/* one cycles sample: no interval to measure, so 10 ms */
		{ WIRE_RUN, 101, 1004000000, 10000000, 0, "worker!main;worker!compute" },
		/* blocked in D at 1.005, never back: ends at the capture's end, 1.006 */
		{ WIRE_WAIT, 101, 1005000000, 1000000, 0, "[kernel.kallsyms]!io_schedule" },
	};

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 6);
	for (size_t i = 0; i < s.nevents && i < 6; i++) {
		CHECK_INT(s.events[i].kind, want[i].kind);
		CHECK_INT(s.events[i].tid, want[i].tid);
		CHECK_INT(s.events[i].ts_ns, want[i].ts);
		CHECK_INT(s.events[i].dur_ns, want[i].dur);
		CHECK_INT(s.events[i].readier_tid, want[i].readier);
		CHECK_STR(stack_of(&s, i), want[i].stack);
	}
	/* the wakeup stacks are not part of any event, so not in the tables */
	CHECK_INT(s.nframes, 9);
	CHECK_INT(s.nstacks, 6);
	CHECK_INT(s.symptom.tid, 101); /* 2 + 10 + 1 ms */
	CHECK_INT(s.nthreads, 3);
	CHECK_STR(thread_name(&s, 101) ? thread_name(&s, 101) : "(none)", "worker");
	CHECK_STR(thread_name(&s, 200) ? thread_name(&s, 200) : "(none)", "helper");
	CHECK_STR(thread_name(&s, 300) ? thread_name(&s, 300) : "(none)", "other");
	CHECK_INT(s.symptom.start_ns, 1000000000);
	CHECK_INT(s.symptom.end_ns, 1014000000);
	check_stream("tiny-sched", &s);
	importer_free(im);

	import_opts_init(&o);
	o.symptom_comm = "helper";
	o.window_start_ns = 1001000000;
	o.window_end_ns = 1002000000;
	im = open_opts(&import_perf, &o);
	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.symptom.tid, 200);
	CHECK_INT(s.symptom.start_ns, 1001000000);
	CHECK_INT(s.symptom.end_ns, 1002000000);
	CHECK_INT(s.nevents, 6); /* events outside the window stay */
	importer_free(im);

	import_opts_init(&o);
	o.symptom_tid = 300;
	im = open_opts(&import_perf, &o);
	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.symptom.tid, 300);
	importer_free(im);
}

/* perf before libtraceevent printed "COMM:PID [PRIO] STATE ==> COMM:PID [PRIO]". */
static void test_old_switch_layout(void)
{
	const char *path = tmp_text("old-switch.txt",
		"a 1/1 1.000000: sched:sched_switch: a:1 [120] S ==> b c:2 [120]\n\t1 f (/x)\n\n"
		"b c 2/2 1.000300: sched:sched_switch: b c:2 [120] R+ ==> a:1 [120]\n\t2 g (/x)\n");
	struct importer *im = open_fmt(&import_perf);
	struct wire_stream s;

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 3);
	if (s.nevents == 3) {
		CHECK_INT(s.events[0].tid, 1); /* blocked (S) at 1.0, back at 1.0003 */
		CHECK_INT(s.events[0].dur_ns, 300000);
		CHECK_STR(stack_of(&s, 0), "x!f");
		CHECK_INT(s.events[1].tid, 2); /* "b c" switched in before ever seen */
		CHECK_INT(s.events[1].dur_ns, 0);
		CHECK_STR(stack_of(&s, 1), "[b c]");
		CHECK_INT(s.events[2].tid, 2); /* preempted at 1.0003, open until the end */
		CHECK_INT(s.events[2].ts_ns, 1000300000);
		CHECK_INT(s.events[2].dur_ns, 0);
		CHECK_STR(stack_of(&s, 2), "x!g");
	}
	importer_free(im);
}

/* Sample costs from intervals, from a nanosecond period, and the event filter. */
static void test_period_inference(void)
{
	const char *path = tmp_text("periods.txt",
		"a 5/5 [000] 1.000000: cycles:\n\t1 f (/bin/a)\n\n"
		"a 5/5 [000] 1.002000: cycles:\n\t1 f (/bin/a)\n\n"
		"b 6/6 [001] 1.002500: cycles:\n\t1 g (/bin/b)\n\n"
		"a 5/5 [000] 1.003000: cycles:\n\t1 f (/bin/a)\n\n"
		"a 5/5 [000] 1.003100: 250000 cpu-clock:u:\n\t1 f (/bin/a)\n\n"
		"a 5/5 [000] 1.007000: cycles:\n\t1 f (/bin/a)\n");
	const char *fast = tmp_text("fast.txt",
		"a 5/5 1.000000: cycles:\n\n"
		"a 5/5 1.000001: cycles:\n\n"
		"a 5/5 1.000002: cycles:\n");
	struct import_opts o;
	struct importer *im = open_fmt(&import_perf);
	struct wire_stream s;

	/* cycles gaps on thread 5: 2, 1, 4 ms (the cpu-clock sample is another event) */
	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 6);
	for (size_t i = 0; i < s.nevents; i++)
		CHECK_INT(s.events[i].dur_ns, s.events[i].ts_ns == 1003100000 ? 250000 : 2000000);
	CHECK_INT(s.symptom.tid, 5);

	/* gaps of 1 us are clamped to 10 us; no frames: the comm stands in */
	CHECK_INT(run1(im, fast, &s), 0);
	CHECK_INT(s.nevents, 3);
	CHECK_INT(s.events[0].dur_ns, 10000);
	CHECK_STR(stack_of(&s, 0), "[a]");
	importer_free(im);

	import_opts_init(&o);
	o.event = "cpu-clock";
	im = open_opts(&import_perf, &o);
	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 1);
	CHECK_INT(s.events[0].ts_ns, 1003100000);
	importer_free(im);
}

/* Samples without timestamps are laid end to end, 10 ms each. */
static void test_no_timestamps(void)
{
	const char *path = data_file("perf/flamegraph-perf-funcab-pid-01.txt");
	struct importer *im = open_fmt(&import_perf);
	struct wire_stream s;

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 228);
	for (size_t i = 0; i < s.nevents; i++) {
		CHECK_INT(s.events[i].tid, 15294);
		CHECK_INT(s.events[i].ts_ns, (int64_t)i * 10000000);
		CHECK_INT(s.events[i].dur_ns, 10000000);
	}
	CHECK_STR(stack_of(&s, 0), "libc-2.19.so!__libc_start_main;func_ab!main;func_ab!func_b");
	CHECK_INT(s.symptom.end_ns, 2280000000);
	importer_free(im);
}

/* perf script of a recording without -g: one line per sample, its one frame on the header. */
static void test_no_callgraph(void)
{
	const char *path = tmp_text("nog.txt",
		"nginx  1234 [001] 12345.678901:     250000 cpu-clock:  55d2c3a1b2c4 "
		"ngx_http_process_request+0x14 (/usr/sbin/nginx)\n"
		"nginx  1234 [001] 12345.679151:     250000 cpu-clock:  ffffffff8a0c5e1a "
		"native_safe_halt+0xa ([kernel.kallsyms])\n"
		"nginx  1235 [000] 12345.679160:     250000 cpu-clock:  7f3a1b2c3d4e [unknown] "
		"(/usr/lib/x86_64-linux-gnu/libc.so.6)\n");
	struct importer *im = open_fmt(&import_auto);
	struct wire_stream s;

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_STR(importer_format(im), "perf");
	CHECK_INT(s.nevents, 3);
	if (s.nevents == 3) {
		CHECK_INT(s.events[0].tid, 1234);
		CHECK_INT(s.events[0].kind, WIRE_RUN);
		CHECK_INT(s.events[0].dur_ns, 250000);
		CHECK_STR(stack_of(&s, 0), "nginx!ngx_http_process_request");
		CHECK_STR(stack_of(&s, 1), "[kernel.kallsyms]!native_safe_halt");
		CHECK_INT(s.events[2].tid, 1235);
		CHECK_INT(s.events[1].ts_ns + 9000, s.events[2].ts_ns);
	}
	check_stream("nog.txt", &s);
	importer_free(im);
}

/* perf's comm per sample names the stream's threads (the wire's "threads"): spaces and colons kept,
 * invalid UTF-8 replaced, cut to 64 bytes on a character boundary; a pseudo tid's thread is named
 * by its comm; the names survive the wire format. */
static void test_perf_thread_names(void)
{
	const char *path = tmp_text("names.txt",
		"nginx: worker 4211/4211 [001] 1.000000: 250000 cpu-clock:\n\t1 f (/bin/a)\n\n"
		"bad\xff" "comm 12/13 [001] 1.001000: 250000 cpu-clock:\n\t1 f (/bin/a)\n\n"
		"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghij\xc3\xa9xyz 7/7 [001] 1.002000: 250000 cpu-clock:\n"
		"\t1 f (/bin/a)\n\n"
		"nopid [002] 1.003000: 250000 cpu-clock:\n\t1 f (/bin/a)\n");
	struct importer *im = open_fmt(&import_perf);
	struct wire_stream s;
	const char *n;

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 4);
	CHECK_INT(s.nthreads, 4);
	n = thread_name(&s, 4211);
	CHECK_STR(n ? n : "(none)", "nginx: worker");
	n = thread_name(&s, 13);
	CHECK_STR(n ? n : "(none)", "bad\xef\xbf\xbd" "comm");
	CHECK(thread_name(&s, 12) == NULL); /* the pid is not a thread of the stream */
	/* 62 letters and "é" would be 64 bytes... and "x" the 65th: cut before it */
	n = thread_name(&s, 7);
	CHECK_STR(n ? n : "(none)", "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghij\xc3\xa9");
	if (s.nevents == 4) {
		n = thread_name(&s, s.events[3].tid);
		CHECK_STR(n ? n : "(none)", "nopid");
	}
	check_stream("names.txt", &s);
	importer_free(im);
}

/* Threads named by comm only get stable pseudo tids in [2^30, 2^31). */
static void test_pseudo_tids(void)
{
	const char *path = tmp_text("nopid.txt",
		"my app [000] 1.000000: cycles:\n\t1 f (/bin/a)\n\n"
		"other [000] 1.001000: cycles:\n\t1 f (/bin/a)\n\n"
		"my app [001] 1.002000: cycles:\n\t1 f (/bin/a)\n");
	struct importer *im = open_fmt(&import_perf);
	struct wire_stream s;
	int64_t a, b;

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 3);
	a = s.events[0].tid;
	b = s.events[1].tid;
	CHECK(a >= (1 << 30) && a <= INT32_MAX);
	CHECK(b >= (1 << 30) && b <= INT32_MAX);
	CHECK(a != b);
	CHECK_INT(s.events[2].tid, a);
	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.events[0].tid, a);
	importer_free(im);
}

/* Invalid UTF-8, frames past 1024 bytes, stacks past 512 frames. */
static void test_frame_limits(void)
{
	struct buf t = BUF_INIT(0);
	struct importer *im = open_fmt(&import_perf);
	struct wire_stream s;
	const char *path, *top;

	buf_puts(&t, "deep 1/1 1.000000: cycles:\n");
	for (int i = 0; i < 600; i++)
		buf_printf(&t, "\t%x f%d (/bin/deep)\n", 0x1000 + i, i);
	buf_puts(&t, "\ndeep 1/1 1.001000: cycles:\n\t1 bad\xff\xfename (/bin/deep)\n"
		     "\t2 ok (/bin/deep)\n\n");
	buf_puts(&t, "deep 1/1 1.002000: cycles:\n\t1 ");
	for (int i = 0; i < 800; i++)
		buf_puts(&t, "\xc3\xa9"); /* é, two bytes */
	buf_puts(&t, " (/x/mm)\n");
	path = tmp_file("limits.txt", t.data, t.len);

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 3);
	if (s.nevents == 3) {
		const struct wire_stack *st = &s.stacks[s.events[0].stack];

		/* perf prints the innermost first: f0 .. f511 are kept */
		CHECK_INT(st->len, 512);
		CHECK_STR(s.frames[st->frames[0]], "deep!f511");
		CHECK_STR(s.frames[st->frames[511]], "deep!f0");
		CHECK_STR(stack_of(&s, 1), "deep!ok;deep!bad\xef\xbf\xbd\xef\xbf\xbdname");
		top = stack_of(&s, 2);
		/* "mm!" and 510 two-byte characters: the 511th would pass 1024 bytes */
		CHECK_INT(strlen(top), 1023);
		CHECK(strncmp(top, "mm!\xc3\xa9", 5) == 0);
		CHECK(util_utf8_valid(top, strlen(top)));
	}
	check_stream("limits", &s);
	importer_free(im);
	buf_release(&t);
}

static void test_folded_exact(void)
{
	const char *path = tmp_text("tiny.folded",
		"app-10/11;main;libc.so.6`read 3\n"
		"app-10/11;main;compute_[k] 2\n"
		"\n"
		"main;work [libfoo.so];f(int) [clone .part.1];;x!y 1\n"
		"app-10/12 4\n"
		"zero;count 0\n");
	struct import_opts o;
	struct importer *im = open_fmt(&import_folded);
	struct wire_stream s;
	int64_t pseudo;

	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.nevents, 4);
	if (s.nevents == 4) {
		/* sorted by ts, then tid; the unnamed thread's pseudo tid sorts last */
		CHECK_INT(s.events[0].tid, 11);
		CHECK_INT(s.events[0].ts_ns, 0);
		CHECK_INT(s.events[0].dur_ns, 30000000);
		CHECK_STR(stack_of(&s, 0), "main;libc.so.6!read");
		CHECK_INT(s.events[1].tid, 12);
		CHECK_INT(s.events[1].dur_ns, 40000000);
		CHECK_STR(stack_of(&s, 1), "[app]");
		pseudo = s.events[2].tid;
		CHECK(pseudo >= (1 << 30) && pseudo <= INT32_MAX);
		CHECK_INT(s.events[2].ts_ns, 0);
		CHECK_INT(s.events[2].dur_ns, 10000000);
		CHECK_STR(stack_of(&s, 2),
			  "main;libfoo.so!work;f(int) [clone .part.1];[unknown];x!y");
		CHECK_INT(s.events[3].tid, 11);
		CHECK_INT(s.events[3].ts_ns, 30000000); /* after its first line */
		CHECK_INT(s.events[3].dur_ns, 20000000);
		CHECK_STR(stack_of(&s, 3), "main;[kernel.kallsyms]!compute");
		CHECK_INT(s.events[0].kind, WIRE_RUN);
	}
	CHECK_INT(s.symptom.tid, 11);
	CHECK_INT(s.symptom.start_ns, 0);
	CHECK_INT(s.symptom.end_ns, 50000000);
	check_stream("tiny.folded", &s);
	importer_free(im);

	import_opts_init(&o);
	o.sample_period_ns = 1000;
	o.symptom_comm = "app";
	im = open_opts(&import_folded, &o);
	CHECK_INT(run1(im, path, &s), 0);
	CHECK_INT(s.events[0].dur_ns, 3000);
	CHECK_INT(s.symptom.tid, 11);
	importer_free(im);
}

/* austin's output: "# " metadata at both ends, counts in microseconds of wall time. */
static void test_folded_austin(void)
{
	static const char body[] =
		"P4317;T0:4317;/usr/lib/python3.10/runpy.py:_run_code:86;app.py:<module>:12;"
		"app.py:main:8 1034\n"
		"P4317;T0:4317;/usr/lib/python3.10/runpy.py:_run_code:86;app.py:<module>:12 250\n"
		"\n"
		"# duration: 1290\n"
		"# saturation: 0/13\n";
	char text[1024];
	struct importer *im = open_fmt(&import_auto);
	struct wire_stream s;
	struct import_opts o;

	snprintf(text, sizeof(text), "# austin: 3.3.0\n# interval: 100\n# mode: wall\n\n%s", body);
	CHECK_INT(run1(im, tmp_text("austin.txt", text), &s), 0);
	CHECK_STR(importer_format(im), "folded");
	CHECK_INT(s.nevents, 2);
	if (s.nevents == 2) {
		CHECK_INT(s.events[0].dur_ns, 1034000);   /* 1 us per count */
		CHECK_INT(s.events[1].dur_ns, 250000);
		CHECK_STR(stack_of(&s, 1), "P4317;T0:4317;/usr/lib/python3.10/runpy.py:_run_code:86;"
			  "app.py:<module>:12");
	}
	importer_free(im);

	/* the option still wins over the header */
	import_opts_init(&o);
	o.sample_period_ns = 1;
	im = open_opts(&import_folded, &o);
	CHECK_INT(run1(im, tmp_text("austin.txt", text), &s), 0);
	CHECK_INT(s.events[0].dur_ns, 1034);
	importer_free(im);

	/* memory mode counts bytes: refused; a plain "#" comment is only skipped */
	snprintf(text, sizeof(text), "# austin: 3.3.0\n# mode: memory\n%s", body);
	im = open_fmt(&import_folded);
	CHECK_INT(run1(im, tmp_text("austin.txt", text), &s), -1);
	CHECK(strstr(importer_error(im), "austin.txt:2: # mode: memory: austin's counts in this mode "
		     "are not time (only cpu and wall are read)") != NULL);
	importer_free(im);
	im = open_fmt(&import_auto);
	CHECK_INT(run1(im, tmp_text("c.txt", "# a comment\n# mode: memory\na;b 2\n"), &s), 0);
	CHECK_STR(importer_format(im), "folded");
	CHECK_INT(s.events[0].dur_ns, 20000000);
	importer_free(im);
}

/* The iperf collapse carries comm-pid/tid prefixes: they become threads. */
static void test_folded_tid_prefix(void)
{
	struct importer *im = open_fmt(&import_folded);
	struct wire_stream s;
	size_t on_28741 = 0;

	CHECK_INT(run1(im, data_file("folded/flamegraph-iperf-collapsed-tid.txt"), &s), 0);
	CHECK_INT(s.nevents, 134);
	for (size_t i = 0; i < s.nevents; i++) {
		CHECK(s.events[i].tid < (1 << 30));
		on_28741 += s.events[i].tid == 28741;
	}
	CHECK_INT(on_28741, 16);
	for (size_t i = 0; i < s.nframes; i++)
		CHECK(strncmp(s.frames[i], "iperf-", 6) != 0);
	importer_free(im);
}

static void expect_refusal(const struct import_format *fmt, const char *path, const char *want)
{
	struct importer *im = open_fmt(fmt);
	struct wire_stream s;

	CHECK_INT(run1(im, path, &s), -1);
	CHECK_STR(error_of(im, path), want);
	CHECK_INT(s.nevents, 0);
	importer_free(im);
}

static void test_refusals(void)
{
	static const char nul[] = "a 1/1 1.0: cycles:\n\t1 f\0 (/x)\n";
	struct buf t = BUF_INIT(0);
	const char *hdr = "PATH:1: expected a sample header "
			  "(COMM PID/TID [CPU] SECONDS.MICROS: [PERIOD] EVENT:)";
	const char *folded = "PATH:1: expected a collapsed stack "
			     "(FRAME;FRAME;...;FRAME COUNT, outermost frame first)";

	/* the wrong format, at its first line */
	expect_refusal(&import_perf, data_file("folded/inferno-flames.txt"), hdr);
	expect_refusal(&import_perf, data_file("folded/flamegraph-iperf-collapsed-tid.txt"), hdr);
	/* its "# " header of 21 lines is skipped as comments */
	expect_refusal(&import_folded, data_file("perf/dspeyer-sched-61cb776.perf.txt"),
		       "PATH:22: expected a collapsed stack "
		       "(FRAME;FRAME;...;FRAME COUNT, outermost frame first)");
	expect_refusal(&import_folded, data_file("perf/flamegraph-perf-dd-stacks-01.txt"), folded);
	expect_refusal(&import_folded, data_file("perf/firefox-geckoview.perf.txt.gz"), folded);
	/* ... or further down */
	expect_refusal(&import_perf,
		       tmp_text("mid.txt", "a 1/1 1.0: cycles:\n\t1 f (/x)\nthis is not a frame\n"),
		       "PATH:3: expected a stack frame (ADDRESS SYMBOL (DSO)), a blank line or a "
		       "sample header");
	expect_refusal(&import_folded, tmp_text("mid.folded", "a;b 1\na;b 2\na;b 1.5\n"),
		       "PATH:3: expected a collapsed stack (FRAME;FRAME;...;FRAME COUNT, "
		       "outermost frame first)");
	expect_refusal(&import_perf,
		       tmp_text("badswitch.txt", "a 1/1 1.0: sched:sched_switch: nonsense\n"),
		       "PATH:1: sched_switch: expected prev_pid=PID prev_state=S ==> "
		       "next_comm=COMM next_pid=PID");
	expect_refusal(&import_perf, tmp_text("notime.txt", "a 1/1 sched:sched_wakeup: pid=2\n"),
		       "PATH:1: sched_wakeup without a timestamp (record with -F +time)");
	/* nothing to import */
	expect_refusal(&import_perf, tmp_text("empty.txt", ""), "PATH:1: empty file");
	expect_refusal(&import_folded, tmp_text("empty.folded", ""), "PATH:1: empty file");
	expect_refusal(&import_perf, tmp_text("comments.txt", "# a\n#\n\n"),
		       "PATH:3: no samples found");
	expect_refusal(&import_folded, tmp_text("zero.folded", "a;b 0\n"), "PATH:1: no samples found");
	expect_refusal(&import_perf, tmp_text("ignored.txt", "a 1/1 1.0: sched:sched_process_exec: x\n"),
		       "PATH:1: no samples found");
	/* not text, too long */
	expect_refusal(&import_perf, tmp_file("nul.txt", nul, sizeof(nul) - 1),
		       "PATH:2: NUL byte: not a text file");
	buf_puts(&t, "a;b 1\n");
	for (int i = 0; i < IMPORT_MAX_LINE + 10; i++)
		buf_putc(&t, 'x');
	buf_puts(&t, " 1\n");
	expect_refusal(&import_folded, tmp_file("long.folded", t.data, t.len),
		       "PATH:2: line longer than 65536 bytes");
	expect_refusal(&import_perf, data_file("perf/no-such-file.txt"),
		       "PATH: cannot open: No such file or directory");
	buf_release(&t);
}

static void test_bad_options(void)
{
	struct import_opts o;
	struct importer *im;
	struct wire_stream s;
	const char *path = data_file("perf/inferno-go-stacks.txt");

	import_opts_init(&o);
	o.host = "";
	im = open_opts(&import_perf, &o);
	CHECK_INT(run1(im, path, &s), -1);
	CHECK_STR(error_of(im, path), "PATH: option host: must be 1 to 255 bytes of UTF-8");
	importer_free(im);

	import_opts_init(&o);
	o.window_start_ns = 10;
	o.window_end_ns = 5;
	im = open_opts(&import_perf, &o);
	CHECK_INT(run1(im, path, &s), -1);
	CHECK_STR(error_of(im, path), "PATH: option window: end before start or out of range");
	importer_free(im);
}

/* gzip input is recognised by its magic bytes and gives what the plain text gives. */
static void test_gzip(void)
{
	const char *plain = data_file("perf/flamegraph-perf-dd-stacks-01.txt");
	char *text;
	size_t len;
	char gz_path[4096], trunc_path[4096];
	gzFile gz;
	struct importer *im = open_fmt(&import_perf), *im2 = open_fmt(&import_perf);
	struct wire_stream a, b;
	FILE *f;

	CHECK_INT(util_read_file(plain, 1 << 20, &text, &len), 0);
	path_in(gz_path, sizeof(gz_path), tmp_dir, "dd.txt.gz");
	gz = gzopen(gz_path, "wb");
	CHECK(gz && gzwrite(gz, text, (unsigned)len) == (int)len && gzclose(gz) == Z_OK);
	CHECK_INT(run1(im, plain, &a), 0);
	CHECK_INT(run1(im2, gz_path, &b), 0);
	CHECK_INT(b.nevents, a.nevents);
	CHECK_INT(b.nframes, a.nframes);
	for (size_t i = 0; i < a.nevents && i < b.nevents; i++) {
		char sa[4096];

		snprintf(sa, sizeof(sa), "%s", stack_of(&a, i));
		CHECK_STR(stack_of(&b, i), sa);
		CHECK_INT(b.events[i].ts_ns, a.events[i].ts_ns);
	}
	/* the same content, compressed or not, is the same stream */
	CHECK_STR(a.stream_id, b.stream_id);

	/* a gzip file cut short is a read error, not a silent partial import */
	path_in(trunc_path, sizeof(trunc_path), tmp_dir, "cut.txt.gz");
	free(text);
	CHECK_INT(util_read_file(gz_path, 1 << 20, &text, &len), 0);
	f = fopen(trunc_path, "wb");
	CHECK(f && fwrite(text, 1, len / 2, f) == len / 2 && fclose(f) == 0);
	CHECK_INT(run1(im, trunc_path, &a), -1);
	CHECK(strstr(error_of(im, trunc_path), "PATH:") == error_of(im, trunc_path));
	CHECK(strstr(importer_error(im), ": read error: unexpected end of file (truncated gzip file?)"));
	CHECK_INT(run1(im, tmp_dir, &a), -1);
	CHECK_STR(error_of(im, tmp_dir), "PATH:1: read error: Is a directory");
	free(text);
	importer_free(im);
	importer_free(im2);
}

static void cleanup_tmp(void)
{
	DIR *d = opendir(tmp_dir);
	struct dirent *e;
	char p[8192];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			path_in(p, sizeof(p), tmp_dir, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(tmp_dir);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		data_dir = argv[1];
	else if (getenv("SM_DATA"))
		data_dir = getenv("SM_DATA");
	if (!mkdtemp(tmp_dir)) {
		perror("mkdtemp");
		return 2;
	}
	RUN(test_format_parse);
	RUN(test_all_perf_files);
	RUN(test_all_folded_files);
	RUN(test_perfview_one_wakeup);
	RUN(test_dd_stacks);
	RUN(test_perfview_mixed_switches);
	RUN(test_dspeyer_sched);
	RUN(test_tiny_sched);
	RUN(test_old_switch_layout);
	RUN(test_period_inference);
	RUN(test_no_timestamps);
	RUN(test_perf_thread_names);
	RUN(test_pseudo_tids);
	RUN(test_no_callgraph);
	RUN(test_frame_limits);
	RUN(test_folded_exact);
	RUN(test_folded_tid_prefix);
	RUN(test_folded_austin);
	RUN(test_refusals);
	RUN(test_bad_options);
	RUN(test_gzip);
	cleanup_tmp();
	return CHECK_DONE();
}
