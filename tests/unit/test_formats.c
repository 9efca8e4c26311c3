/*
 * test_formats: the pprof, OTLP and bcc importers and format detection on small
 * inputs made here, whose streams are known exactly: frames and their order,
 * threads, kinds, durations, times, readiers, labels and the streams they split
 * into, and the refusals with their messages. The real captures are checked
 * against an independent decoding by tests/integration/test_formats.sh.
 */
#include "formats/bcc.h"
#include "formats/folded.h"
#include "formats/formats.h"
#include "formats/import.h"
#include "formats/otlp.h"
#include "formats/pprof.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/proto/profile.pb-c.h"
#include "common/wire.h"
#include "tests/unit/check.h"

#include <stdlib.h>
#include <zlib.h>

static struct importer *opener(const struct import_format *fmt)
{
	struct import_opts o;

	import_opts_init(&o);
	o.host = "h";
	o.app = "a";
	return importer_open(fmt, &o);
}

/* Frames of event i's stack joined with ';', outermost first. */
static const char *stack_str(const struct wire_stream *s, size_t i)
{
	static char out[8192];
	const struct wire_stack *st = &s->stacks[s->events[i].stack];
	size_t o = 0;

	out[0] = '\0';
	for (uint32_t k = 0; k < st->len && o < sizeof(out); k++) {
		int n = snprintf(out + o, sizeof(out) - o, "%s%s", k ? ";" : "", s->frames[st->frames[k]]);

		if (n < 0)
			break;
		o += (size_t)n;
	}
	return out;
}

static const char *label(const struct wire_stream *s, const char *k)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (strcmp(s->labels[i].key, k) == 0)
			return s->labels[i].value;
	return NULL;
}

/* ---- pprof, made with protobuf-c ---- */

typedef Perftools__Profiles__Profile Profile;

struct pb {
	Profile p;
	Perftools__Profiles__ValueType vt[4], *vtp[4], period;
	Perftools__Profiles__Sample s[4], *sp[4];
	Perftools__Profiles__Label l[4], *lp[4];
	Perftools__Profiles__Location loc[3], *locp[3];
	Perftools__Profiles__Line line[4], *linep[4];
	Perftools__Profiles__Function fn[3], *fnp[3];
	Perftools__Profiles__Mapping map, *mapp;
	uint64_t ids1[2], ids2[1], ids3[1];
	int64_t v1[2], v2[2], v3[2];
	char *strs[16];
};

/*
 * A CPU profile of "/usr/bin/app": location 1 (the leaf) is helper inlined into handle,
 * location 2 is main. Sample 0: main > handle > helper, 3 samples / 30 ms, labels
 * handler=/api, thread_id=77, thread_name=worker. Sample 1: main, 10 ms, no labels.
 * Sample 2: 0 ns (dropped).
 */
static void make_profile(struct pb *b)
{
	static const char *const strs[] = { "", "samples", "count", "cpu", "nanoseconds", "/usr/bin/app",
					    "main", "handle", "helper", "handler", "/api", "thread_id",
					    "thread_name", "worker" };

	memset(b, 0, sizeof(*b));
	perftools__profiles__profile__init(&b->p);
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		b->strs[i] = (char *)strs[i];
	b->p.n_string_table = sizeof(strs) / sizeof(strs[0]);
	b->p.string_table = b->strs;
	for (int i = 0; i < 2; i++) {
		perftools__profiles__value_type__init(&b->vt[i]);
		b->vtp[i] = &b->vt[i];
	}
	b->vt[0].type = 1, b->vt[0].unit = 2;
	b->vt[1].type = 3, b->vt[1].unit = 4;
	b->p.n_sample_type = 2;
	b->p.sample_type = b->vtp;
	perftools__profiles__value_type__init(&b->period);
	b->period.type = 3, b->period.unit = 4;
	b->p.period_type = &b->period;
	b->p.period = 10000000;
	b->p.time_nanos = 1000000000000;
	perftools__profiles__mapping__init(&b->map);
	b->map.id = 1, b->map.filename = 5, b->map.memory_start = 0x400000;
	b->mapp = &b->map;
	b->p.n_mapping = 1;
	b->p.mapping = &b->mapp;
	for (int i = 0; i < 3; i++) {
		perftools__profiles__function__init(&b->fn[i]);
		b->fn[i].id = (uint64_t)(i + 1);
		b->fn[i].name = 6 + i;
		b->fnp[i] = &b->fn[i];
	}
	b->p.n_function = 3;
	b->p.function = b->fnp;
	for (int i = 0; i < 3; i++) {
		perftools__profiles__line__init(&b->line[i]);
		b->linep[i] = &b->line[i];
	}
	b->line[0].function_id = 3;   /* helper, inlined */
	b->line[1].function_id = 2;   /* handle, its caller */
	b->line[2].function_id = 1;   /* main */
	for (int i = 0; i < 3; i++) {
		perftools__profiles__location__init(&b->loc[i]);
		b->loc[i].id = (uint64_t)(i + 1);
		b->loc[i].mapping_id = 1;
		b->locp[i] = &b->loc[i];
	}
	b->loc[0].n_line = 2, b->loc[0].line = &b->linep[0];
	b->loc[1].n_line = 1, b->loc[1].line = &b->linep[2];
	b->loc[2].address = 0x401234;   /* no line: an address */
	b->p.n_location = 3;
	b->p.location = b->locp;
	for (int i = 0; i < 3; i++) {
		perftools__profiles__label__init(&b->l[i]);
		b->lp[i] = &b->l[i];
	}
	b->l[0].key = 9, b->l[0].str = 10;
	b->l[1].key = 11, b->l[1].num = 77;
	b->l[2].key = 12, b->l[2].str = 13;
	for (int i = 0; i < 3; i++) {
		perftools__profiles__sample__init(&b->s[i]);
		b->sp[i] = &b->s[i];
	}
	b->ids1[0] = 1, b->ids1[1] = 2;
	b->v1[0] = 3, b->v1[1] = 30000000;
	b->s[0].n_location_id = 2, b->s[0].location_id = b->ids1;
	b->s[0].n_value = 2, b->s[0].value = b->v1;
	b->s[0].n_label = 3, b->s[0].label = b->lp;
	b->ids2[0] = 2;
	b->v2[0] = 1, b->v2[1] = 10000000;
	b->s[1].n_location_id = 1, b->s[1].location_id = b->ids2;
	b->s[1].n_value = 2, b->s[1].value = b->v2;
	b->ids3[0] = 3;
	b->s[2].n_location_id = 1, b->s[2].location_id = b->ids3;
	b->s[2].n_value = 2, b->s[2].value = b->v3;
	b->p.n_sample = 3;
	b->p.sample = b->sp;
}

/* The profile packed; caller frees. */
static unsigned char *pack(const Profile *p, size_t *len)
{
	unsigned char *out;

	*len = perftools__profiles__profile__get_packed_size(p);
	out = malloc(*len ? *len : 1);
	perftools__profiles__profile__pack(p, out);
	return out;
}

static int run_mem(struct importer *im, const void *d, size_t n)
{
	return importer_run_mem(im, "mem", d, n);
}

static void test_pprof_exact(void)
{
	struct pb b;
	struct importer *im = opener(&import_auto);
	unsigned char *d;
	size_t n;
	const struct wire_stream *s0, *s1;

	make_profile(&b);
	d = pack(&b.p, &n);
	CHECK_INT(run_mem(im, d, n), 0);
	CHECK_STR(importer_format(im), "pprof");
	CHECK_INT(importer_count(im), 2);
	s0 = importer_stream(im, 0);
	s1 = importer_stream(im, 1);
	/* the labelled sample: its own stream, thread 77 named worker */
	CHECK_STR(label(s0, "handler"), "/api");
	CHECK(label(s0, "thread_id") == NULL && label(s0, "thread_name") == NULL);
	CHECK_INT(s0->nevents, 1);
	CHECK_STR(stack_str(s0, 0), "app!main;app!handle;app!helper");
	CHECK_INT(s0->events[0].tid, 77);
	CHECK_INT(s0->events[0].kind, WIRE_RUN);
	CHECK_INT(s0->events[0].dur_ns, 30000000);
	CHECK_INT(s0->events[0].ts_ns, 1000000000000);   /* laid out from time_nanos */
	CHECK_INT(s0->symptom.tid, 77);
	/* the other: no labels, the program's pseudo thread */
	CHECK_INT(s1->nlabels, 0);
	CHECK_INT(s1->nevents, 1);
	CHECK_STR(stack_str(s1, 0), "app!main");
	CHECK(s1->events[0].tid >= (1 << 30));
	CHECK_INT(s1->events[0].dur_ns, 10000000);
	CHECK(strcmp(s0->stream_id, s1->stream_id) != 0);

	/* --sample-type samples: counts times the period */
	{
		struct import_opts o;
		struct importer *im2;

		import_opts_init(&o);
		o.host = "h", o.app = "a", o.sample_type = "samples";
		im2 = importer_open(&import_pprof, &o);
		CHECK_INT(run_mem(im2, d, n), 0);
		CHECK_INT(importer_stream(im2, 0)->events[0].dur_ns, 3 * 10000000);
		importer_free(im2);
	}
	/* the same bytes gzip-compressed: the same streams, the same ids */
	{
		uLongf zn = compressBound(n) + 64;
		unsigned char *z = malloc(zn);
		z_stream zs = { 0 };
		char id0[37];
		struct importer *im2 = opener(&import_auto);

		snprintf(id0, sizeof(id0), "%s", s0->stream_id);
		deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
		zs.next_in = d, zs.avail_in = (uInt)n, zs.next_out = z, zs.avail_out = (uInt)zn;
		CHECK_INT(deflate(&zs, Z_FINISH), Z_STREAM_END);
		CHECK_INT(run_mem(im2, z, zs.total_out), 0);
		CHECK_INT(importer_count(im2), 2);
		CHECK_STR(importer_stream(im2, 0)->stream_id, id0);
		/* cut short: a read error, nothing imported */
		CHECK_INT(run_mem(im2, z, zs.total_out / 2), -1);
		CHECK_STR(importer_error(im2), "mem:1: read error: unexpected end of file (truncated "
			  "compressed data?)");
		CHECK_INT(importer_count(im2), 0);
		deflateEnd(&zs);
		free(z);
		importer_free(im2);
	}
	free(d);
	importer_free(im);
}

static void expect_pprof_error(struct pb *b, const char *want)
{
	struct importer *im = opener(&import_pprof);
	unsigned char *d;
	size_t n;

	d = pack(&b->p, &n);
	CHECK_INT(run_mem(im, d, n), -1);
	CHECK_STR(importer_error(im), want);
	CHECK_INT(importer_count(im), 0);
	free(d);
	importer_free(im);
}

static void test_pprof_kinds_and_refusals(void)
{
	struct pb b;
	static char delay[] = "delay", contentions[] = "contentions", bytes[] = "bytes",
		    alloc[] = "alloc_space";

	/* contentions/count + delay/nanoseconds: wait events of the delay */
	make_profile(&b);
	b.strs[1] = contentions, b.strs[3] = delay;
	{
		struct importer *im = opener(&import_pprof);
		unsigned char *d;
		size_t n;

		d = pack(&b.p, &n);
		CHECK_INT(run_mem(im, d, n), 0);
		CHECK_INT(importer_stream(im, 0)->events[0].kind, WIRE_WAIT);
		CHECK_INT(importer_stream(im, 0)->events[0].dur_ns, 30000000);
		CHECK_INT(importer_stream(im, 0)->events[0].readier_tid, 0);
		free(d);
		importer_free(im);
	}
	make_profile(&b);
	b.ids2[0] = 9;
	expect_pprof_error(&b, "mem: sample[1].location_id[0]: no location 9");
	make_profile(&b);
	b.v2[1] = -5;
	expect_pprof_error(&b, "mem: sample[1].value[1]: negative (-5): a difference of two profiles "
			   "cannot be imported");
	make_profile(&b);
	b.fn[1].name = 99;
	expect_pprof_error(&b, "mem: function.name[1]: string index 99 out of range (14 strings)");
	make_profile(&b);
	b.loc[1].mapping_id = 4;
	expect_pprof_error(&b, "mem: location[1].mapping_id: no mapping 4");
	make_profile(&b);
	b.s[1].n_value = 1;
	expect_pprof_error(&b, "mem: sample[1].value: 1 values for 2 sample types");
	make_profile(&b);
	b.strs[3] = alloc, b.strs[4] = bytes;
	b.period.unit = 5;   /* "/usr/bin/app": not a time */
	expect_pprof_error(&b, "mem: a memory profile (samples/count, alloc_space/bytes): "
			   "stackmine's costs are time, so it cannot be imported");
	make_profile(&b);
	b.loc[0].id = 2;
	expect_pprof_error(&b, "mem: location[1].id: 2 used twice");
	{
		/* 4,000,000 empty samples, two bytes each, would unpack into 32 times that */
		struct importer *im = opener(&import_pprof);
		size_t n = 8000000;
		unsigned char *d = malloc(n);

		for (size_t i = 0; i < n; i += 2)
			d[i] = 0x12, d[i + 1] = 0;
		CHECK_INT(run_mem(im, d, n), -1);
		CHECK_STR(importer_error(im), "mem: the protobuf message unpacks into more than 112777216 "
			  "bytes (12 times its size)");
		free(d);
		importer_free(im);
	}
	{
		struct importer *im = opener(&import_pprof);
		static const unsigned char junk[] = { 0x0a, 0xff, 0xff, 0xff, 0x01, 0x02 };

		CHECK_INT(run_mem(im, junk, sizeof(junk)), -1);
		CHECK_STR(importer_error(im), "mem: not a pprof profile: the protobuf message does not "
			  "decode (or out of memory)");
		importer_free(im);
	}
}

/* A legacy 32-bit little-endian CPU profile: period 10000 us, two samples, the end marker,
 * then a /proc/self/maps line. */
static void test_pprof_legacy(void)
{
	uint32_t w[] = { 0, 3, 0, 10000, 0,
			 2, 2, 0x400010, 0x400101,   /* count 2: leaf 0x400010, caller 0x400101 */
			 1, 1, 0x1234,               /* outside every map */
			 0, 1, 0 };
	static const char maps[] = "00400000-00500000 r-xp 00001000 08:01 42 /opt/bin/server\n";
	unsigned char buf[sizeof(w) + sizeof(maps)];
	struct importer *im = opener(&import_auto);
	const struct wire_stream *s;

	memcpy(buf, w, sizeof(w));
	memcpy(buf + sizeof(w), maps, sizeof(maps) - 1);
	CHECK_INT(run_mem(im, buf, sizeof(w) + sizeof(maps) - 1), 0);
	CHECK_STR(importer_format(im), "pprof");
	s = importer_stream(im, 0);
	CHECK_INT(s->nevents, 2);
	/* return addresses less one, offsets into the file as perf names them */
	CHECK_STR(stack_str(s, 0), "server+0x1100;server+0x1010");
	CHECK_INT(s->events[0].dur_ns, 20000000);
	CHECK_STR(stack_str(s, 1), "[unknown]+0x1234");
	CHECK_INT(s->events[1].ts_ns, 20000000);   /* laid after the first on one thread */
	CHECK_INT(s->events[1].tid, s->events[0].tid);
	importer_free(im);

	/* a contention profile: 2 x 10^9 cycles at 2 GHz, sampling period 100 */
	{
		static const char t[] = "--- contentionz 1 ---\ncycles/second = 2000000000\n"
					"sampling period = 100\n  2000000000  3 @ 0x400010 0x400101\n"
					"--- Memory map: ---\n  00400000-00500000: /opt/bin/server\n";

		im = opener(&import_auto);
		CHECK_INT(run_mem(im, t, sizeof(t) - 1), 0);
		s = importer_stream(im, 0);
		CHECK_INT(s->nevents, 1);
		CHECK_INT(s->events[0].kind, WIRE_WAIT);
		CHECK_INT(s->events[0].dur_ns, 100000000000);
		CHECK_STR(stack_str(s, 0), "server+0x101;server+0x10");
		importer_free(im);
	}
}

/* ---- bcc ---- */

static const struct wire_stream *bcc_one(struct importer **im, const struct import_format *f,
					 const char *text)
{
	*im = opener(f);
	if (run_mem(*im, text, strlen(text)) < 0) {
		fprintf(stderr, "  %s\n", importer_error(*im));
		return NULL;
	}
	return importer_stream(*im, 0);
}

static void test_bcc(void)
{
	struct importer *im;
	const struct wire_stream *s;

	/* offcputime: innermost first, "-  comm (pid)", a count in us; prose skipped */
	s = bcc_one(&im, &import_bcc_offcpu, "Some prose.\n# ./offcputime\nTracing off-CPU time (us) "
		    "of all threads by user + kernel stack... Hit Ctrl-C to end.\n^C\n"
		    "    schedule\n    do_nanosleep\n    --\n    nanosleep\n    main\n"
		    "    -                sleeper (4242)\n        1500\n\n");
	CHECK(s != NULL);
	if (s) {
		CHECK_INT(s->nevents, 1);
		CHECK_STR(stack_str(s, 0), "main;nanosleep;[kernel.kallsyms]!do_nanosleep;"
			  "[kernel.kallsyms]!schedule");
		CHECK_INT(s->events[0].tid, 4242);
		CHECK_INT(s->events[0].kind, WIRE_WAIT);
		CHECK_INT(s->events[0].dur_ns, 1500000);
	}
	importer_free(im);

	/* offwaketime: the waker's stack outermost first, "-  -", the target's innermost first */
	s = bcc_one(&im, &import_bcc_offwaketime,
		    "    waker:           kworker/0:1\n    ffffffff81000001 worker_thread\n"
		    "    ffffffff81000002 try_to_wake_up\n    -                -\n"
		    "    ffffffff81000003 schedule\n    ffffffff81000004 pipe_read\n"
		    "    target:          cat\n        200\n");
	CHECK(s != NULL);
	if (s) {
		size_t w = s->events[0].kind == WIRE_WAIT ? 0 : 1;

		CHECK_INT(s->nevents, 2);
		CHECK_STR(stack_str(s, w), "pipe_read;schedule");
		CHECK_INT(s->events[w].dur_ns, 200000);
		CHECK_STR(stack_str(s, 1 - w), "worker_thread;try_to_wake_up");
		CHECK_INT(s->events[1 - w].kind, WIRE_RUN);
		CHECK_INT(s->events[1 - w].dur_ns, 0);
		CHECK_INT(s->events[w].readier_tid, s->events[1 - w].tid);
		CHECK_INT(s->events[1 - w].ts_ns, s->events[w].ts_ns + s->events[w].dur_ns);
	}
	importer_free(im);

	/* wakeuptime -f: "waker;its stack outermost first;target N" */
	s = bcc_one(&im, &import_bcc_wakeuptime, "sshd;sys_write;__wake_up;bash 7\n");
	CHECK(s != NULL);
	if (s) {
		size_t w = s->events[0].kind == WIRE_WAIT ? 0 : 1;

		CHECK_STR(stack_str(s, w), "[bash]");
		CHECK_INT(s->events[w].dur_ns, 7000);
		CHECK_STR(stack_str(s, 1 - w), "sys_write;__wake_up");
	}
	importer_free(im);

	/* profile -f at 99 Hz: "comm;user;-;kernel_[k] N" */
	s = bcc_one(&im, &import_bcc_profile, "Sampling at 99 Hertz of all threads.\n"
		    "dd;main;read;-;vfs_read_[k] 3\n");
	CHECK(s != NULL);
	if (s) {
		CHECK_STR(stack_str(s, 0), "main;read;[kernel.kallsyms]!vfs_read");
		CHECK_INT(s->events[0].kind, WIRE_RUN);
		CHECK_INT(s->events[0].dur_ns, 3 * (1000000000 / 99));
	}
	importer_free(im);

	/* 600 frames folded, outermost first: the innermost 512 are kept */
	{
		struct buf t = BUF_INIT(0);

		buf_puts(&t, "deep");
		for (int i = 0; i < 600; i++)
			buf_printf(&t, ";f%d", i);
		buf_puts(&t, " 5\n");
		im = opener(&import_bcc_offcpu);
		CHECK_INT(run_mem(im, t.data, t.len), 0);
		s = importer_stream(im, 0);
		CHECK_INT(s->stacks[0].len, 512);
		CHECK_STR(s->frames[s->stacks[0].frames[0]], "f88");
		CHECK_STR(s->frames[s->stacks[0].frames[511]], "f599");
		importer_free(im);
		buf_release(&t);
	}

	im = opener(&import_bcc_offcpu);
	CHECK_INT(run_mem(im, "just prose\nand more\n", 20), -1);
	CHECK_STR(importer_error(im), "mem:2: no offcputime output found (stack blocks ending in a "
		  "count, or folded lines)");
	importer_free(im);
}

/* ---- OTLP ---- */

static const char otlp_doc[] =
	"{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"process.pid\",\"value\":"
	"{\"intValue\":\"66\"}},{\"key\":\"service.name\",\"value\":{\"stringValue\":\"db\"}}]},"
	"\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
	"\"samples\":[{\"stackIndex\":1,\"attributeIndices\":[1,2,3],\"values\":[\"500\",\"0\"],"
	"\"timestampsUnixNano\":[\"10000\",\"20000\"]}]}]}]}],"
	"\"dictionary\":{\"stringTable\":[\"\",\"off_cpu\",\"nanoseconds\",\"thread.id\","
	"\"thread.name\",\"schedule\",\"main\",\"profile.frame.type\",\"kernel\",\"/bin/db\","
	"\"cpu.logical_number\"],"
	"\"mappingTable\":[{},{\"filenameStrindex\":9}],"
	"\"functionTable\":[{},{\"nameStrindex\":5},{\"nameStrindex\":6}],"
	"\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}],\"attributeIndices\":[4]},"
	"{\"mappingIndex\":1,\"lines\":[{\"functionIndex\":2}]}],"
	"\"attributeTable\":[{},{\"keyStrindex\":3,\"value\":{\"intValue\":\"12\"}},"
	"{\"keyStrindex\":4,\"value\":{\"stringValue\":\"w1\"}},{\"keyStrindex\":10,\"value\":"
	"{\"intValue\":\"3\"}},{\"keyStrindex\":7,\"value\":{\"stringValue\":\"kernel\"}}],"
	"\"stackTable\":[{},{\"locationIndices\":[1,2]}]}}";

static void test_otlp(void)
{
	struct importer *im = opener(&import_auto);
	const struct wire_stream *s;

	CHECK_INT(run_mem(im, otlp_doc, strlen(otlp_doc)), 0);
	CHECK_STR(importer_format(im), "otlp");
	CHECK_INT(importer_count(im), 1);
	s = importer_stream(im, 0);
	CHECK_STR(label(s, "process.pid"), "66");
	CHECK_STR(label(s, "service.name"), "db");
	CHECK(label(s, "cpu.logical_number") == NULL);
	CHECK_INT(s->nevents, 1);   /* the value 0 is dropped */
	CHECK_STR(stack_str(s, 0), "db!main;[kernel.kallsyms]!schedule");
	CHECK_INT(s->events[0].tid, 12);
	CHECK_INT(s->events[0].kind, WIRE_WAIT);
	CHECK_INT(s->events[0].dur_ns, 500);
	CHECK_INT(s->events[0].ts_ns, 10000 - 500);   /* an off-CPU sample ends at its timestamp */
	importer_free(im);

	im = opener(&import_otlp);
	CHECK_INT(run_mem(im, "{\"resourceProfiles\":[]}", 23), -1);
	CHECK_STR(importer_error(im), "mem: no \"dictionary\": not OTLP profiles (ProfilesData), or a "
		  "draft of the format older than the dictionary");
	CHECK_INT(run_mem(im, "{\"a\":", 5), -1);
	CHECK(strncmp(importer_error(im), "mem: not JSON: ", 15) == 0);
	importer_free(im);
}

/* doc with every from replaced by to; the caller frees it. */
static char *replaced(const char *doc, const char *from, const char *to)
{
	struct buf b = BUF_INIT(0);
	size_t fl = strlen(from);

	for (const char *p; (p = strstr(doc, from)); doc = p + fl) {
		buf_append(&b, doc, (size_t)(p - doc));
		buf_puts(&b, to);
	}
	buf_puts(&b, doc);
	return b.data;
}

/* The one sample of doc, imported: its kind, or -1. */
static int otlp_kind(const char *doc, const char **stack)
{
	struct importer *im = opener(&import_auto);
	int kind = -1;

	if (run_mem(im, doc, strlen(doc)) == 0 && importer_count(im) == 1 &&
	    importer_stream(im, 0)->nevents == 1) {
		kind = importer_stream(im, 0)->events[0].kind;
		*stack = stack_str(importer_stream(im, 0), 0);
	} else {
		fprintf(stderr, "  otlp: %s\n", importer_error(im));
	}
	importer_free(im);
	return kind;
}

/* The 1.8.0 draft's "sample" and "line"; the eBPF profiler's off-CPU "events/nanoseconds". */
static void test_otlp_spellings(void)
{
	const char *st = "";
	char *d18 = replaced(otlp_doc, "\"lines\"", "\"line\"");
	char *d = replaced(d18, "\"samples\"", "\"sample\"");

	CHECK_INT(otlp_kind(d, &st), WIRE_WAIT);
	CHECK_STR(st, "db!main;[kernel.kallsyms]!schedule");
	free(d);
	d = replaced(otlp_doc, "\"off_cpu\"", "\"events\"");
	CHECK_INT(otlp_kind(d, &st), WIRE_WAIT);
	free(d);
	d = replaced(otlp_doc, "\"off_cpu\",\"nanoseconds\"", "\"samples\",\"count\"");
	CHECK_INT(otlp_kind(d, &st), WIRE_RUN);
	free(d);
	d = replaced(otlp_doc, "\"off_cpu\",\"nanoseconds\"", "\"cpu\",\"nanoseconds\"");
	CHECK_INT(otlp_kind(d, &st), WIRE_RUN);
	free(d);
	free(d18);
}

/* ---- detection and limits ---- */

static void test_detect(void)
{
	static const struct { const char *text, *want; } cases[] = {
		{ "a;b;c 12\nd;e 3\n", "folded" },
		{ "prog 12/12 100.5: cycles:\n\t  400123 main (/bin/prog)\n\n", "perf" },
		{ "Tracing blocked time (us) by kernel off-CPU and waker stack for 5 secs.\n"
		  "    waker:  a\n    f\n    -   -\n    g\n    target:  b\n        1\n", "bcc-offwaketime" },
		{ "    target:  b\n    f\n    waker:  a\n        1\n", "bcc-wakeuptime" },
		{ "--- contentionz 1 ---\ncycles/second = 1000\n  5 1 @ 0x1\n", "pprof" },
	};
	struct importer *im = opener(&import_auto);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = run_mem(im, cases[i].text, strlen(cases[i].text));

		if (rc)
			fprintf(stderr, "  case %zu: %s\n", i, importer_error(im));
		CHECK_INT(rc, 0);
		CHECK_STR(importer_format(im), cases[i].want);
	}
	CHECK_INT(run_mem(im, "    f\n    -   comm (1)\n        3\n", 30), -1);
	CHECK_STR(importer_error(im), "mem: cannot tell which format this is: name it with --format "
		  "(bcc's offcputime and profile print alike, and their folded -f output looks like any "
		  "folded file)");
	CHECK_INT(run_mem(im, "", 0), -1);
	CHECK_STR(importer_error(im), "mem: empty file");
	importer_free(im);
}

static void test_limits(void)
{
	struct import_opts o;
	struct importer *im;
	struct buf t = BUF_INIT(0);

	/* more distinct label sets than max_streams */
	import_opts_init(&o);
	o.host = "h", o.app = "a", o.max_streams = 1;
	{
		struct pb b;
		unsigned char *d;
		size_t n;

		make_profile(&b);
		d = pack(&b.p, &n);
		im = importer_open(&import_pprof, &o);
		CHECK_INT(run_mem(im, d, n), -1);
		CHECK_STR(importer_error(im), "mem: more than 1 distinct sets of sample labels (streams)");
		importer_free(im);
		free(d);
	}

	o.max_streams = 0;
	o.max_input = 100;
	im = importer_open(&import_folded, &o);
	for (int i = 0; i < 20; i++)
		buf_puts(&t, "a;b;c 1\n");
	CHECK_INT(run_mem(im, t.data, t.len), -1);
	CHECK_STR(importer_error(im), "mem:1: more than 100 bytes once decompressed");
	importer_free(im);
	buf_release(&t);
}

/* What the review of the first version found, each made to fail first. */
static void test_edges(void)
{
	struct pb b;
	unsigned char *d;
	size_t n;
	struct importer *im;
	const struct wire_stream *st;
	static char a_key[] = "a", one[] = "1";

	/* the same labels in another order are one stream; a non-numeric thread_id stays a label */
	make_profile(&b);
	b.strs[11] = a_key;            /* "thread_id" becomes "a" */
	b.strs[13] = one;              /* "worker" becomes "1" */
	b.l[1].key = 9, b.l[1].str = 10, b.l[1].num = 0;    /* handler=/api */
	b.l[0].key = 11, b.l[0].str = 13;                   /* a=1 */
	b.s[0].n_label = 2;
	b.s[1].n_label = 2;
	b.s[1].label = &b.lp[0];
	{
		/* sample 1: a=1, handler=/api in the other order */
		static Perftools__Profiles__Label *rev[2];

		rev[0] = b.lp[1];
		rev[1] = b.lp[0];
		b.s[0].label = rev;
	}
	d = pack(&b.p, &n);
	im = opener(&import_pprof);
	CHECK_INT(run_mem(im, d, n), 0);
	CHECK_INT(importer_count(im), 1);
	CHECK_STR(label(importer_stream(im, 0), "a"), "1");
	free(d);
	importer_free(im);

	make_profile(&b);
	{
		static char main_s[] = "main";

		b.strs[13] = main_s;           /* thread_name=main ... */
		b.l[1].num = 0, b.l[1].str = 13; /* ... and thread_id="main" */
	}
	d = pack(&b.p, &n);
	im = opener(&import_pprof);
	CHECK_INT(run_mem(im, d, n), 0);
	CHECK_STR(label(importer_stream(im, 0), "thread_id"), "main");
	free(d);
	importer_free(im);

	/* a location of 600 inlined lines: the innermost 512 frames */
	make_profile(&b);
	{
		Perftools__Profiles__Line *lines = calloc(600, sizeof(*lines)), **lp = calloc(600, sizeof(*lp));

		for (int i = 0; i < 600; i++) {
			perftools__profiles__line__init(&lines[i]);
			lines[i].function_id = i == 0 ? 3 : 2;   /* the leaf helper, callers handle */
			lp[i] = &lines[i];
		}
		b.loc[0].n_line = 600;
		b.loc[0].line = lp;
		d = pack(&b.p, &n);
		im = opener(&import_pprof);
		CHECK_INT(run_mem(im, d, n), 0);
		st = importer_stream(im, 0);
		CHECK_INT(st->stacks[st->events[0].stack].len, 512);
		CHECK_STR(st->frames[st->stacks[st->events[0].stack].frames[511]], "app!helper");
		free(d);
		importer_free(im);
		free(lines);
		free(lp);
	}

	/* the role is part of the id: a baseline import is another stream */
	{
		struct import_opts o;
		char id0[37];

		make_profile(&b);
		d = pack(&b.p, &n);
		im = opener(&import_pprof);
		CHECK_INT(run_mem(im, d, n), 0);
		snprintf(id0, sizeof(id0), "%s", importer_stream(im, 0)->stream_id);
		importer_free(im);
		import_opts_init(&o);
		o.host = "h", o.app = "a", o.role = WIRE_ROLE_BASELINE;
		im = importer_open(&import_pprof, &o);
		CHECK_INT(run_mem(im, d, n), 0);
		CHECK_INT(importer_stream(im, 0)->role, WIRE_ROLE_BASELINE);
		CHECK(strcmp(importer_stream(im, 0)->stream_id, id0) != 0);
		importer_free(im);
		free(d);
	}

	/* OTLP: a string thread.id of digits is the thread; a timestamp before the value's start */
	{
		struct buf t = BUF_INIT(0);
		const char *q = strstr(otlp_doc, "{\"intValue\":\"12\"}");

		buf_append(&t, otlp_doc, (size_t)(q - otlp_doc));
		buf_puts(&t, "{\"stringValue\":\"42\"}");
		buf_puts(&t, q + strlen("{\"intValue\":\"12\"}"));
		im = opener(&import_otlp);
		CHECK_INT(run_mem(im, t.data, t.len), 0);
		CHECK_INT(importer_stream(im, 0)->events[0].tid, 42);
		importer_free(im);
		buf_reset(&t);
		q = strstr(otlp_doc, "\"10000\"");
		buf_append(&t, otlp_doc, (size_t)(q - otlp_doc));
		buf_puts(&t, "\"-9223372036854775808\"");
		buf_puts(&t, q + strlen("\"10000\""));
		im = opener(&import_otlp);
		CHECK_INT(run_mem(im, t.data, t.len), -1);
		CHECK_STR(importer_error(im), "mem: sample.timestampsUnixNano: -9223372036854775808 out of "
			  "range for a value of 500 ns");
		importer_free(im);
		buf_release(&t);
	}

	/* bcc: an empty waker is no waker; a folded line of 1,500 frames keeps the innermost 512 */
	{
		struct buf t = BUF_INIT(0);

		im = opener(&import_bcc_offwaketime);
		CHECK_INT(run_mem(im, "cat;main;read;-; 5\n", 19), 0);
		st = importer_stream(im, 0);
		CHECK_INT(st->nevents, 1);
		CHECK_INT(st->events[0].readier_tid, 0);
		importer_free(im);
		buf_puts(&t, "deep;-");
		for (int i = 0; i < 1500; i++)
			buf_printf(&t, ";k%d", i);
		buf_puts(&t, " 5\n");
		im = opener(&import_bcc_offcpu);
		CHECK_INT(run_mem(im, t.data, t.len), 0);
		st = importer_stream(im, 0);
		CHECK_INT(st->stacks[0].len, 512);
		CHECK_STR(st->frames[st->stacks[0].frames[511]], "[kernel.kallsyms]!k1499");
		importer_free(im);
		buf_release(&t);
	}

	/* a refusal for size is told from one for content */
	{
		struct import_opts o;

		import_opts_init(&o);
		o.host = "h", o.app = "a", o.max_input = 10;
		im = importer_open(&import_folded, &o);
		CHECK_INT(run_mem(im, "a;b 1\na;b 1\na;b 1\n", 18), -1);
		CHECK(importer_too_large(im));
		CHECK_INT(run_mem(im, "x", 1), -1);
		CHECK(!importer_too_large(im));
		importer_free(im);
	}
}

/* xorshift: the same mutations on every run */
static uint64_t rnd(uint64_t *st)
{
	*st ^= *st << 13;
	*st ^= *st >> 7;
	*st ^= *st << 17;
	return *st;
}

/*
 * The decoders on thousands of mutated inputs (bytes changed, cut, repeated): each run
 * either gives streams that the strict wire parser takes back, or an error that says why.
 */
static void test_mutations(void)
{
	struct pb b;
	size_t plen;
	unsigned char *pp;
	static const char bcc_text[] = "    waker:  kworker\n    a\n    -   -\n    b\n    target:  cat\n"
				       "        20\nx;y;-;z;w 3\n";
	struct wire_limits lim;
	struct wire_parser *wp;
	uint64_t st = 88172645463325252ULL;
	int ok = 0, refused = 0, bad = 0;

	wire_limits_default(&lim);
	wp = wire_parser_open(&lim);
	make_profile(&b);
	pp = pack(&b.p, &plen);
	for (int base = 0; base < 3; base++) {
		const unsigned char *src = base == 0 ? pp : base == 1 ? (const unsigned char *)otlp_doc
					   : (const unsigned char *)bcc_text;
		size_t n = base == 0 ? plen : base == 1 ? strlen(otlp_doc) : strlen(bcc_text);
		const struct import_format *fmts[] = { &import_pprof, &import_otlp, &import_bcc_offwaketime };
		unsigned char *m = malloc(2 * n + 16);

		for (int i = 0; i < 5000; i++) {
			size_t len = n, k = 1 + rnd(&st) % 4;
			struct importer *im = opener(i & 1 ? &import_auto : fmts[base]);

			memcpy(m, src, n);
			while (k--) {
				uint64_t r = rnd(&st);
				size_t at = (size_t)(r >> 8) % len;

				switch (r % 4) {
				case 0: m[at] = (unsigned char)(r >> 40); break;
				case 1: len = at + 1; break;
				case 2: if (len + 8 <= 2 * n + 16) { memmove(m + at + 8, m + at, len - at); len += 8; } break;
				case 3: m[at] ^= (unsigned char)(1u << (r >> 50) % 8); break;
				}
			}
			if (run_mem(im, m, len) == 0) {
				for (size_t j = 0; j < importer_count(im); j++) {
					struct buf out = BUF_INIT(0);
					struct arena *a = arena_open(0);
					struct wire_stream t;

					if (wire_write_json(importer_stream(im, j), &out) < 0 ||
					    wire_parse(wp, out.data, out.len, a, &t) != WIRE_OK)
						bad++;
					buf_release(&out);
					arena_free(a);
				}
				ok++;
			} else {
				refused++;
				if (!importer_error(im)[0])
					bad++;
			}
			importer_free(im);
		}
		free(m);
	}
	fprintf(stderr, "  mutations: %d imported, %d refused\n", ok, refused);
	CHECK_INT(bad, 0);
	CHECK(ok > 0 && refused > 0);
	free(pp);
	wire_parser_free(wp);
}

int main(void)
{
	RUN(test_pprof_exact);
	RUN(test_pprof_kinds_and_refusals);
	RUN(test_pprof_legacy);
	RUN(test_bcc);
	RUN(test_otlp);
	RUN(test_otlp_spellings);
	RUN(test_detect);
	RUN(test_limits);
	RUN(test_edges);
	RUN(test_mutations);
	return CHECK_DONE();
}
