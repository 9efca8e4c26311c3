/* Unit tests of the wire codec and validator (common/wire.c), with a mutation fuzz loop. */
#include "common/arena.h"
#include "common/json.h"
#include "common/wire.h"
#include "tests/unit/check.h"

#include <json-c/json.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char example[] =
	"{\"v\": 1, \"stream_id\": \"5F0C6F0E-3d0b-4a53-9a43-6d1c2f0a9b11\", \"host\": \"web-17\","
	" \"app\": \"nginx\", \"version\": \"1.22.1\", \"build_id\": \"3f9a0c\","
	" \"labels\": {\"os\": \"debian-12\", \"region\": \"eu-west\"},"
	" \"symptom\": {\"kind\": \"unit_violation\", \"tid\": 4211, \"start_ns\": 81234000000,"
	"   \"end_ns\": 81684000000, \"unit_type\": \"u7\", \"threshold_ns\": 120000000},"
	" \"frames\": [\"nginx!main\", \"nginx!ngx_worker_process_cycle\", \"nginx!ngx_http_handler\","
	"   \"libc.so.6!__libc_write\", \"libc.so.6!fdatasync\", \"nginx!std::map<K, V>::find \\\"q\\\"\"],"
	" \"stacks\": [[0, 1, 2, 4], [0, 1, 2, 5]],"
	" \"events\": ["
	"  {\"kind\": \"wait\", \"tid\": 4211, \"ts_ns\": 81300000000, \"dur_ns\": 240000000, \"stack\": 0, \"readier_tid\": 17},"
	"  {\"kind\": \"run\", \"tid\": 4211, \"ts_ns\": 81550000000, \"dur_ns\": 10000000, \"stack\": 1, \"extra\": [1]}"
	" ], \"unknown_field\": {\"x\": 1}}";

static struct wire_parser *parser(void)
{
	struct wire_limits lim;

	wire_limits_default(&lim);
	return wire_parser_open(&lim);
}

static void test_example(void)
{
	struct wire_parser *p = parser();
	struct arena *a = arena_open(0);
	struct wire_stream s;

	CHECK_INT(wire_parse(p, example, sizeof(example) - 1, a, &s), WIRE_OK);
	CHECK_STR(s.stream_id, "5f0c6f0e-3d0b-4a53-9a43-6d1c2f0a9b11");
	CHECK_STR(s.host, "web-17");
	CHECK_STR(s.app, "nginx");
	CHECK_STR(s.version, "1.22.1");
	CHECK_STR(s.build_id, "3f9a0c");
	CHECK_INT(s.nlabels, 2);
	CHECK_STR(s.labels[0].key, "os");
	CHECK_STR(s.labels[1].value, "eu-west");
	CHECK_STR(s.symptom.kind, "unit_violation");
	CHECK_INT(s.symptom.tid, 4211);
	CHECK_INT(s.symptom.start_ns, 81234000000LL);
	CHECK_INT(s.symptom.end_ns, 81684000000LL);
	CHECK_STR(s.symptom.unit_type, "u7");
	CHECK_INT(s.symptom.threshold_ns, 120000000);
	CHECK_INT(s.nframes, 6);
	CHECK_STR(s.frames[5], "nginx!std::map<K, V>::find \"q\"");
	/* each frame's length as decoded, escapes counted once */
	CHECK(s.frame_lens != NULL);
	for (size_t i = 0; i < s.nframes; i++)
		CHECK_INT(s.frame_lens[i], strlen(s.frames[i]));
	CHECK_INT(s.frame_lens[5], 30);
	CHECK_INT(s.nstacks, 2);
	CHECK_INT(s.stacks[1].len, 4);
	CHECK_INT(s.stacks[1].frames[3], 5);
	CHECK_INT(s.nevents, 2);
	CHECK_INT(s.events[0].kind, WIRE_WAIT);
	CHECK_INT(s.events[0].readier_tid, 17);
	CHECK_INT(s.events[0].dur_ns, 240000000);
	CHECK_INT(s.events[1].kind, WIRE_RUN);
	CHECK_INT(s.events[1].stack, 1);
	CHECK_INT(s.events[1].readier_tid, 0);
	arena_free(a);
	wire_parser_free(p);
}

static void test_roundtrip(void)
{
	struct wire_parser *p = parser();
	struct arena *a = arena_open(0);
	struct wire_stream s, t;
	struct buf b1 = BUF_INIT(0), b2 = BUF_INIT(0);

	CHECK_INT(wire_parse(p, example, sizeof(example) - 1, a, &s), WIRE_OK);
	CHECK_INT(wire_write_json(&s, &b1), 0);
	CHECK_INT(wire_parse(p, b1.data, b1.len, a, &t), WIRE_OK);
	CHECK_INT(wire_write_json(&t, &b2), 0);
	CHECK_INT(b1.len, b2.len);
	CHECK(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0);
	CHECK(memchr(b1.data, '\n', b1.len) == NULL);
	/* the events exactly, a run's without readier_tid */
	CHECK(strstr(b1.data, "\"events\":[{\"kind\":\"wait\",\"tid\":4211,\"ts_ns\":81300000000,"
			      "\"dur_ns\":240000000,\"stack\":0,\"readier_tid\":17},{\"kind\":\"run\",\"tid\":4211,"
			      "\"ts_ns\":81550000000,\"dur_ns\":10000000,\"stack\":1}]}") != NULL);
	/* every integer as it is, the extremes too (the writer checks no range): the first is the
	 * longest object there can be */
	{
		struct wire_event ev[3] = {
			{ .kind = WIRE_WAIT, .tid = INT64_MIN, .ts_ns = INT64_MIN, .dur_ns = INT64_MIN, .stack = UINT32_MAX,
			  .readier_tid = INT64_MIN },
			{ .kind = WIRE_WAIT, .tid = 1, .ts_ns = INT64_MAX, .dur_ns = -1, .stack = 0, .readier_tid = -9 },
			{ .kind = WIRE_RUN, .tid = 0, .ts_ns = -10, .dur_ns = 1000000000000000000, .stack = 10 },
		};
		struct wire_stream x = t;

		x.events = ev;
		x.nevents = 3;
		buf_reset(&b2);
		CHECK_INT(wire_write_json(&x, &b2), 0);
		CHECK(strstr(b2.data, "\"events\":[{\"kind\":\"wait\",\"tid\":-9223372036854775808,"
				      "\"ts_ns\":-9223372036854775808,\"dur_ns\":-9223372036854775808,\"stack\":4294967295,"
				      "\"readier_tid\":-9223372036854775808},"
				      "{\"kind\":\"wait\",\"tid\":1,\"ts_ns\":9223372036854775807,\"dur_ns\":-1,\"stack\":0,"
				      "\"readier_tid\":-9},"
				      "{\"kind\":\"run\",\"tid\":0,\"ts_ns\":-10,\"dur_ns\":1000000000000000000,\"stack\":10}]}") != NULL);
	}
	/* a full buffer fails cleanly */
	{
		struct buf small = BUF_INIT(100);
		CHECK_INT(wire_write_json(&s, &small), -1);
		buf_release(&small);
	}
	buf_release(&b1);
	buf_release(&b2);
	arena_free(a);
	wire_parser_free(p);
}

/* Written compactly, as agents write it, the example reads the same: its stacks by the short loop,
 * its plain frames from where the check found them, the escaped one decoded. */
static void test_compact(void)
{
	static const char compact[] =
		"{\"v\":1,\"stream_id\":\"5f0c6f0e-3d0b-4a53-9a43-6d1c2f0a9b11\",\"host\":\"h\",\"app\":\"a\","
		"\"symptom\":{\"kind\":\"manual\",\"tid\":1,\"start_ns\":0,\"end_ns\":0},"
		"\"frames\":[\"a!main\",\"a!f \\\"q\\\"\",\"a!\\u00e9t\\u00e9\",\"a!g\"],"
		"\"stacks\":[[0,1,2,3],[0,3],[3,2,1,0,0,1,2,3,10]],"
		"\"events\":[{\"kind\":\"run\",\"tid\":1,\"ts_ns\":0,\"dur_ns\":1,\"stack\":1}]}";
	struct wire_parser *p = parser();
	struct arena *a = arena_open(0);
	struct wire_stream s;

	/* the last stack's 10 is past the frames: said at its place, after the short loop's eight */
	CHECK_INT(wire_parse(p, compact, sizeof(compact) - 1, a, &s), WIRE_EINVALID);
	CHECK_STR(wire_parser_error(p), "stacks[2][8]: index 10 out of range (4 frames)");
	{
		char ok[sizeof(compact)];
		char *at;

		memcpy(ok, compact, sizeof(compact));
		at = strstr(ok, ",10]");
		memmove(at, at + 3, strlen(at + 3) + 1);   /* ",10]" -> "]" */
		CHECK_INT(wire_parse(p, ok, strlen(ok), a, &s), WIRE_OK);
	}
	CHECK_INT(s.nframes, 4);
	CHECK_STR(s.frames[0], "a!main");
	CHECK_STR(s.frames[1], "a!f \"q\"");
	CHECK_STR(s.frames[2], "a!\xc3\xa9t\xc3\xa9");
	CHECK_STR(s.frames[3], "a!g");
	for (size_t i = 0; i < s.nframes; i++)
		CHECK_INT(s.frame_lens[i], strlen(s.frames[i]));
	CHECK_INT(s.nstacks, 3);
	CHECK_INT(s.stacks[0].len, 4);
	CHECK_INT(s.stacks[1].len, 2);
	CHECK_INT(s.stacks[2].len, 8);
	CHECK(s.stacks[0].frames[3] == 3 && s.stacks[1].frames[1] == 3 && s.stacks[2].frames[0] == 3 &&
	      s.stacks[2].frames[4] == 0 && s.stacks[2].frames[7] == 3);
	arena_free(a);
	wire_parser_free(p);
}

/* Replace the first occurrence of `from` in the example with `to` and parse. */
static int parse_edit(const char *from, const char *to, const char **err)
{
	static struct wire_parser *p;
	static char msg[512];
	struct arena *a = arena_open(0);
	struct buf b = BUF_INIT(0);
	struct wire_stream s;
	const char *at = strstr(example, from);
	int rc;

	if (!p)
		p = parser();
	if (!at) {
		fprintf(stderr, "  test bug: '%s' not in example\n", from);
		arena_free(a);
		return 99;
	}
	buf_append(&b, example, (size_t)(at - example));
	buf_puts(&b, to);
	buf_puts(&b, at + strlen(from));
	rc = wire_parse(p, b.data, b.len, a, &s);
	snprintf(msg, sizeof(msg), "%s", wire_parser_error(p));
	*err = msg;
	buf_release(&b);
	arena_free(a);
	return rc;
}

#define BAD(from, to, code, message)                              \
	do {                                                      \
		const char *e_;                                   \
		CHECK_INT(parse_edit(from, to, &e_), code);       \
		CHECK_STR(e_, message);                           \
	} while (0)

static void test_rejections(void)
{
	BAD("\"v\": 1", "\"v\": 2", WIRE_EINVALID, "v: unsupported version 2 (this server speaks 1)");
	BAD("\"v\": 1,", "", WIRE_EINVALID, "v: required field missing");
	BAD("\"host\": \"web-17\"", "\"host\": 17", WIRE_EINVALID, "host: must be a string, not an integer");
	BAD("\"host\": \"web-17\"", "\"host\": \"\"", WIRE_EINVALID, "host: must not be empty");
	BAD("\"app\": \"nginx\",", "", WIRE_EINVALID, "app: required field missing");
	BAD("\"stream_id\": \"5F0C6F0E-3d0b-4a53-9a43-6d1c2f0a9b11\"", "\"stream_id\": \"nope\"",
	    WIRE_EINVALID, "stream_id: must be a UUID string");
	BAD("\"stack\": 0", "\"stack\": 9", WIRE_EINVALID, "events[0].stack: index 9 out of range (2 stacks)");
	BAD("[0, 1, 2, 5]", "[0, 1, 2, 6]", WIRE_EINVALID, "stacks[1][3]: index 6 out of range (6 frames)");
	BAD("[0, 1, 2, 5]", "[]", WIRE_EINVALID, "stacks[1]: must have at least 1 frame");
	/* compact, as agents write them: read by the short loop, which leaves the faults to the
	 * general one at the index where they are */
	BAD("[0, 1, 2, 5]", "[0,1,2,5]", WIRE_OK, "");
	BAD("[0, 1, 2, 5]", "[0,1,2,6]", WIRE_EINVALID, "stacks[1][3]: index 6 out of range (6 frames)");
	BAD("[0, 1, 2, 5]", "[6,1]", WIRE_EINVALID, "stacks[1][0]: index 6 out of range (6 frames)");
	BAD("[0, 1, 2, 5]", "[0,1,-2,5]", WIRE_EINVALID, "stacks[1][2]: -2 is negative or too small (at least 0)");
	BAD("[0, 1, 2, 5]", "[0,1,2.0,5]", WIRE_EINVALID, "stacks[1][2]: must be an integer, not a fraction");
	BAD("[0, 1, 2, 5]", "[0,1,2e0,5]", WIRE_EINVALID, "stacks[1][2]: must be an integer, not a fraction");
	BAD("[0, 1, 2, 5]", "[0,1,12345678901,5]", WIRE_EINVALID, "stacks[1][2]: 12345678901 out of range (at most 2147483647)");
	BAD("[0, 1, 2, 5]", "[0,1,\"2\",5]", WIRE_EINVALID, "stacks[1][2]: must be an integer, not a string");
	BAD("[0, 1, 2, 5]", "[0,1 ,2,5]", WIRE_OK, "");
	BAD("\"dur_ns\": 240000000", "\"dur_ns\": -5", WIRE_EINVALID,
	    "events[0].dur_ns: -5 is negative or too small (at least 0)");
	BAD("\"dur_ns\": 240000000", "\"dur_ns\": 2.5", WIRE_EINVALID,
	    "events[0].dur_ns: must be an integer, not a fraction");
	BAD("\"ts_ns\": 81300000000", "\"ts_ns\": 99999999999999999999", WIRE_EINVALID,
	    "events[0].ts_ns: out of range (at most 4611686018427387904)");
	BAD("\"kind\": \"run\"", "\"kind\": \"r\\u0075n\"", WIRE_OK, "");
	BAD("\"kind\": \"run\"", "\"kind\": \"sleep\"", WIRE_EINVALID,
	    "events[1].kind: must be \"run\" or \"wait\"");
	BAD("\"dur_ns\": 10000000, \"stack\": 1", "\"dur_ns\": 10000000, \"stack\": 1, \"readier_tid\": 3",
	    WIRE_EINVALID, "events[1].readier_tid: only wait events have a readier");
	BAD("\"end_ns\": 81684000000", "\"end_ns\": 1", WIRE_EINVALID,
	    "symptom.end_ns: 1 is before start_ns 81234000000");
	BAD("\"tid\": 4211, \"start_ns\"", "\"start_ns\"", WIRE_EINVALID, "symptom.tid: required field missing");
	BAD("\"labels\": {\"os\": \"debian-12\"", "\"labels\": {\"os\": 12", WIRE_EINVALID,
	    "labels.os: must be a string, not an integer");
	BAD("\"nginx!main\"", "\"nginx!\\u0000main\"", WIRE_ENOTJSON,
	    "not JSON: frames[0]: unexpected '\\' (NUL, \\u0000, is not allowed in a string) at byte 357");
	/* issue 25: a known key given twice is refused (two readers could take different ones) */
	BAD("\"host\": \"web-17\"", "\"host\": \"web-17\", \"host\": \"web-18\"", WIRE_EINVALID, "host: duplicate key");
	BAD("\"tid\": 4211, \"start_ns\"", "\"tid\": 4211, \"tid\": 1, \"start_ns\"", WIRE_EINVALID,
	    "symptom.tid: duplicate key");
	BAD("\"labels\": {\"os\": \"debian-12\"", "\"labels\": {\"os\": \"a\", \"os\": \"debian-12\"", WIRE_EINVALID,
	    "labels.os: duplicate key");
	BAD("\"kind\": \"run\"", "\"kind\": \"run\", \"kind\": \"wait\"", WIRE_EINVALID,
	    "events[1].kind: duplicate key");
	BAD("\"dur_ns\": 240000000", "\"dur_ns\": 240000000, \"dur_ns\": 2", WIRE_EINVALID,
	    "events[0].dur_ns: duplicate key");
	BAD("\"nginx!main\"", "\"nginx!\xff\xfemain\"", WIRE_ENOTJSON, "not JSON: frames[0]: unexpected byte 0xff (invalid UTF-8) at byte 357");
	BAD("\"events\": [", "\"events\": 5, \"x\": [", WIRE_EINVALID, "events: must be an array, not an integer");
	BAD("{\"v\": 1", "[{\"v\": 1", WIRE_ENOTJSON, "not JSON: [0]: unexpected end of input at byte 798");
	BAD("\"unknown_field\": {\"x\": 1}}", "\"unknown_field\": {\"x\": 1}} trailing", WIRE_ENOTJSON,
	    "not JSON: body: unexpected 't' after the value at byte 798");
	BAD("\"unknown_field\": {\"x\": 1}", "\"unknown_field\": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]",
	    WIRE_ENOTJSON, "not JSON: unknown_field[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nested deeper than 16 levels"
	    " at byte 803");
}

/* More top-level members than the check keeps: read in a pass of the parser's own, same answers. */
static void test_many_members(void)
{
	struct buf pad = BUF_INIT(0);
	const char *e;

	for (int k = 0; k < JSON_MEMBERS_KEPT + 8; k++)
		buf_printf(&pad, "\"x%d\": [%d], ", k, k);
	buf_puts(&pad, "\"host\": \"web-17\"");
	CHECK_INT(parse_edit("\"host\": \"web-17\"", buf_cstr(&pad), &e), WIRE_OK);
	buf_puts(&pad, ", \"host\": \"web-18\"");
	CHECK_INT(parse_edit("\"host\": \"web-17\"", buf_cstr(&pad), &e), WIRE_EINVALID);
	CHECK_STR(e, "host: duplicate key");
	buf_reset(&pad);
	for (int k = 0; k < JSON_MEMBERS_KEPT + 8; k++)
		buf_printf(&pad, "\"x%d\": %d, ", k, k);
	buf_puts(&pad, "\"v\": 2");
	CHECK_INT(parse_edit("\"v\": 1", buf_cstr(&pad), &e), WIRE_EINVALID);
	CHECK_STR(e, "v: unsupported version 2 (this server speaks 1)");
	/* an unknown key longer than the reader's key buffer is unknown, not the first name ("v") */
	CHECK_INT(parse_edit("\"v\": 1,", "\"v\": 1, \"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\": 2,",
			     &e), WIRE_OK);
	buf_release(&pad);
}

/* weight (guard.md "Shipping budget"): a finite number >= 1, 1 when absent, written only above 1 */
static void test_weight(void)
{
	struct wire_parser *p = parser();
	struct arena *a = arena_open(0);
	struct wire_stream s, t;
	struct buf b = BUF_INIT(0);
	const char *at = strstr(example, "\"host\"");
	struct buf in = BUF_INIT(0);

	CHECK_INT(wire_parse(p, example, sizeof(example) - 1, a, &s), WIRE_OK);
	CHECK_NEAR(s.weight, 1);
	CHECK_NEAR(wire_weight(&s), 1);
	CHECK_INT(wire_write_json(&s, &b), 0);
	CHECK(!strstr(buf_cstr(&b), "weight"));
	buf_append(&in, example, (size_t)(at - example));
	buf_puts(&in, "\"weight\": 2.75, ");
	buf_puts(&in, at);
	CHECK_INT(wire_parse(p, in.data, in.len, a, &s), WIRE_OK);
	CHECK_NEAR(s.weight, 2.75);
	buf_reset(&b);
	CHECK_INT(wire_write_json(&s, &b), 0);
	CHECK(strstr(buf_cstr(&b), "\"weight\":2.75") != NULL);
	CHECK_INT(wire_parse(p, b.data, b.len, a, &t), WIRE_OK);
	CHECK_NEAR(t.weight, 2.75);
	/* a zeroed stream (older writers) weighs 1 */
	memset(&t, 0, sizeof(t));
	CHECK_NEAR(wire_weight(&t), 1);
	BAD("\"host\"", "\"weight\": 1, \"host\"", WIRE_OK, "");
	BAD("\"host\"", "\"weight\": null, \"host\"", WIRE_OK, "");
	BAD("\"host\"", "\"weight\": 1e300, \"host\"", WIRE_OK, "");
	BAD("\"host\"", "\"weight\": 0, \"host\"", WIRE_EINVALID,
	    "weight: 0 is below 1 (a sampling weight is at least 1)");
	BAD("\"host\"", "\"weight\": -1, \"host\"", WIRE_EINVALID,
	    "weight: -1 is below 1 (a sampling weight is at least 1)");
	BAD("\"host\"", "\"weight\": 0.999, \"host\"", WIRE_EINVALID,
	    "weight: 0.999 is below 1 (a sampling weight is at least 1)");
	BAD("\"host\"", "\"weight\": \"x\", \"host\"", WIRE_EINVALID, "weight: must be a number, not a string");
	BAD("\"host\"", "\"weight\": true, \"host\"", WIRE_EINVALID, "weight: must be a number, not a boolean");
	BAD("\"host\"", "\"weight\": 1e400, \"host\"", WIRE_EINVALID, "weight: must be a finite number");
	BAD("\"host\"", "\"weight\": -1e400, \"host\"", WIRE_EINVALID, "weight: must be a finite number");
	BAD("\"host\"", "\"weight\": NaN, \"host\"", WIRE_ENOTJSON,
	    "not JSON: weight: unexpected 'N' where a value belongs at byte 72");
	BAD("\"host\"", "\"weight\": Infinity, \"host\"", WIRE_ENOTJSON,
	    "not JSON: weight: unexpected 'I' where a value belongs at byte 72");
	BAD("\"host\"", "\"weight\": 2, \"weight\": 3, \"host\"", WIRE_EINVALID, "weight: duplicate key");
	buf_release(&b);
	buf_release(&in);
	arena_free(a);
	wire_parser_free(p);
}

/* A key with a NUL inside is refused (issue 25): it would be another key to one reader and the
 * field its prefix names to another. */
static void test_nul_in_key(void)
{
	const char *e;

	CHECK_INT(parse_edit("\"unknown_field\"", "\"stream_id\\u0000x\": \"00000000-0000-4000-8000-000000000000\", \"x\"",
			     &e), WIRE_ENOTJSON);
	CHECK_STR(e, "not JSON: stream_id\\u0000x: unexpected '\\' (NUL, \\u0000, is not allowed in a string)"
		     " at byte 781");
	{
		struct wire_parser *p = parser();
		struct arena *a = arena_open(0);
		struct wire_stream s;
		struct buf b = BUF_INIT(0);
		const char *at = strstr(example, "\"unknown_field\"");

		buf_append(&b, example, (size_t)(at - example));
		buf_puts(&b, "\"stream_id\\u0000x\": \"00000000-0000-4000-8000-000000000000\", \"x\"");
		buf_puts(&b, at + strlen("\"unknown_field\""));
		CHECK_INT(wire_parse(p, b.data, b.len, a, &s), WIRE_ENOTJSON);
		buf_release(&b);
		arena_free(a);
		wire_parser_free(p);
	}
}

static void test_limits(void)
{
	struct wire_limits lim;
	struct wire_parser *p;
	struct arena *a = arena_open(0);
	struct wire_stream s;
	struct buf b = BUF_INIT(0);
	char big[1100];

	/* each array over its limit: the message counts every entry, those past it too */
	static const struct {
		size_t events, frames, stacks, depth;
		const char *msg;
	} over[] = {
		{ 1, 0, 0, 0, "events: 2 events, at most 1 allowed" },
		{ 0, 4, 0, 0, "frames: 6 entries, at most 4 allowed" },
		{ 0, 0, 1, 0, "stacks: 2 entries, at most 1 allowed" },
		{ 0, 0, 0, 2, "stacks[0]: 4 frames, at most 2 allowed" },
	};

	for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
		wire_limits_default(&lim);
		lim.max_events = over[i].events ? over[i].events : lim.max_events;
		lim.max_frames = over[i].frames ? over[i].frames : lim.max_frames;
		lim.max_stacks = over[i].stacks ? over[i].stacks : lim.max_stacks;
		lim.max_stack_depth = over[i].depth ? over[i].depth : lim.max_stack_depth;
		p = wire_parser_open(&lim);
		CHECK_INT(wire_parse(p, example, sizeof(example) - 1, a, &s), WIRE_EINVALID);
		CHECK_STR(wire_parser_error(p), over[i].msg);
		wire_parser_free(p);
	}

	memset(big, 'x', 1025);
	big[1025] = '\0';
	p = parser();
	buf_puts(&b, "{\"v\":1,\"stream_id\":\"5f0c6f0e-3d0b-4a53-9a43-6d1c2f0a9b11\",\"host\":\"h\",\"app\":\"a\","
		     "\"symptom\":{\"kind\":\"manual\",\"tid\":1,\"start_ns\":0,\"end_ns\":0},\"frames\":[\"");
	buf_puts(&b, big);
	buf_puts(&b, "\"],\"stacks\":[[0]],\"events\":[{\"kind\":\"run\",\"tid\":1,\"ts_ns\":0,\"dur_ns\":1,\"stack\":0}]}");
	CHECK_INT(wire_parse(p, b.data, b.len, a, &s), WIRE_EINVALID);
	CHECK_STR(wire_parser_error(p), "frames[0]: 1025 bytes long, at most 1024 allowed");
	/* stream_id is known even though the stream is refused */
	CHECK_STR(s.stream_id, "5f0c6f0e-3d0b-4a53-9a43-6d1c2f0a9b11");
	wire_parser_free(p);
	buf_release(&b);
	arena_free(a);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* json-c in strict mode is the oracle for what is JSON (where it is more lenient
 * than RFC 8259, the test says so below). */
static int jsonc_accepts(const char *text, size_t n)
{
	json_tokener *tok = json_tokener_new_ex(16);
	json_object *o;
	char *t = malloc(n + 1);
	size_t end;
	int ok;

	/* a trailing space ends a bare top-level number, which json-c would wait on */
	memcpy(t, text, n);
	t[n] = ' ';
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, t, (int)n + 1);
	end = json_tokener_get_parse_end(tok);
	ok = json_tokener_get_error(tok) == json_tokener_success;
	while (ok && end < n + 1)
		ok = t[end++] == ' ' || t[end - 1] == '\n' || t[end - 1] == '\t' || t[end - 1] == '\r';
	json_object_put(o);
	json_tokener_free(tok);
	free(t);
	return ok;
}

/* Mutations of a valid stream must never crash, the JSON check must agree with
 * json-c, and whatever is accepted must survive a write/parse round trip
 * unchanged. Runs under ASan/UBSan in make test. */
/* wire_parse_in_place(): the same stream, its plain names ended in the text, an escaped one copied. */
static void test_in_place(void)
{
	struct wire_parser *p = parser();
	struct arena *a = arena_open(0);
	char *own = malloc(sizeof(example));
	struct wire_stream s, u;

	memcpy(own, example, sizeof(example));
	CHECK_INT(wire_parse(p, example, sizeof(example) - 1, a, &s), WIRE_OK);
	CHECK_INT(wire_parse_in_place(p, own, sizeof(example) - 1, a, &u), WIRE_OK);
	CHECK_STR(u.stream_id, s.stream_id);
	CHECK_INT(u.nframes, 6);
	for (size_t i = 0; i < u.nframes; i++) {
		CHECK_STR(u.frames[i], s.frames[i]);
		CHECK_INT(u.frame_lens[i], s.frame_lens[i]);
		/* in the text but the last, which holds escapes */
		CHECK_INT(u.frames[i] >= own && u.frames[i] < own + sizeof(example), i < 5);
	}
	CHECK_STR(u.frames[0], "nginx!main");
	CHECK(strstr(example, "\"nginx!main\"") && own[strstr(example, "\"nginx!main\"") - example + 11] == '\0');
	CHECK_STR(u.frames[5], "nginx!std::map<K, V>::find \"q\"");
	CHECK_INT(u.nstacks, s.nstacks);
	CHECK_INT(u.stacks[1].frames[3], 5);
	CHECK_INT(u.nevents, s.nevents);
	CHECK_INT(u.events[0].readier_tid, 17);
	/* the text is the caller's: a refused one leaves a message as wire_parse() does */
	memcpy(own, example, sizeof(example));
	own[strstr(example, "\"stack\": 1") - example + 9] = '7';
	CHECK_INT(wire_parse_in_place(p, own, sizeof(example) - 1, a, &u), WIRE_EINVALID);
	CHECK_STR(wire_parser_error(p), "events[1].stack: index 7 out of range (2 stacks)");
	free(own);
	arena_free(a);
	wire_parser_free(p);
}

static void test_fuzz(void)
{
	static const char *const tokens[] = { "{", "}", "[", "]", ",", ":", "\"", "\\u0000", "-1",
					      "1e999", "null", "true", "\xc0\x80", "\\ud800", "0" };
	struct wire_parser *p = parser();
	struct arena *a = arena_open(0);
	char *buf = malloc(sizeof(example) + 64);
	int accepted = 0, disagree = 0, stricter = 0, iterations = getenv("SM_FUZZ_ITERATIONS") ? atoi(getenv("SM_FUZZ_ITERATIONS")) : 20000;

	for (int it = 0; it < iterations; it++) {
		size_t n = sizeof(example) - 1;
		struct wire_stream s;
		int muts = 1 + (int)(rng() % 4);

		memcpy(buf, example, n);
		for (int m = 0; m < muts; m++) {
			size_t at = (size_t)(rng() % n);
			switch (rng() % 4) {
			case 0: buf[at] = (char)(rng() & 0xff); break;              /* byte */
			case 1: n = at; break;                                       /* truncate */
			case 2: memmove(buf + at, buf + at + 1, n - at - 1); n--; break; /* delete */
			default: {                                                   /* insert a token */
				const char *t = tokens[rng() % (sizeof(tokens) / sizeof(tokens[0]))];
				size_t tl = strlen(t);
				if (n + tl < sizeof(example) + 64) {
					memmove(buf + at + tl, buf + at, n - at);
					memcpy(buf + at, t, tl);
					n += tl;
				}
			}
			}
			if (n == 0)
				break;
		}
		arena_reset(a);
		{
			char jerr[256];
			int ours = json_check(buf, n, 16, jerr, sizeof(jerr)) == 0;
			int theirs = jsonc_accepts(buf, n);
			size_t at = ours ? 0 : strtoul(strrchr(jerr, ' ') + 1, NULL, 10);
			/* json-c takes raw control characters, overlong UTF-8 and lone
			 * surrogates in strings, numbers with leading zeros, a bare sign or
			 * a dot without digits; RFC 8259
			 * and we do not */
			if (!ours && theirs &&
			    (strstr(jerr, "invalid UTF-8") || strstr(jerr, "surrogate") ||
			     strstr(jerr, "in a number") ||
			     (strstr(jerr, "in a string") && strstr(jerr, "unexpected byte 0x")) ||
			     (at > 0 && at < n && buf[at] >= '0' && buf[at] <= '9' && buf[at - 1] == '0'))) {
				stricter++;
			} else if (ours != theirs) {
				disagree++;
				if (disagree <= 5)
					fprintf(stderr, "  json-c %s, json_check %s (%s): %.*s\n",
						theirs ? "accepts" : "refuses", ours ? "accepts" : "refuses",
						ours ? "" : jerr, (int)(n < 200 ? n : 200), buf);
			}
		}
		{
			/* read in place, the same answer, and the same message when refused */
			char *own = malloc(n + 1), err[512];
			struct wire_stream u;
			int rc;

			memcpy(own, buf, n);
			own[n] = '\0';
			rc = wire_parse(p, buf, n, a, &s);
			snprintf(err, sizeof(err), "%s", wire_parser_error(p));
			CHECK_INT(wire_parse_in_place(p, own, n, a, &u), rc);
			CHECK_STR(wire_parser_error(p), err);
			if (rc == WIRE_OK && u.nframes == s.nframes) {
				size_t same = 0;

				for (size_t i = 0; i < s.nframes; i++)
					same += u.frame_lens[i] == s.frame_lens[i] && strcmp(u.frames[i], s.frames[i]) == 0;
				CHECK_INT(same, s.nframes);
			} else if (rc == WIRE_OK) {
				CHECK_INT(u.nframes, s.nframes);
			}
			free(own);
		}
		if (wire_parse(p, buf, n, a, &s) == WIRE_OK) {
			struct buf out = BUF_INIT(0);
			struct wire_stream t;
			accepted++;
			CHECK_INT(wire_write_json(&s, &out), 0);
			CHECK_INT(wire_parse(p, out.data, out.len, a, &t), WIRE_OK);
			CHECK_INT(t.nevents, s.nevents);
			buf_release(&out);
		} else {
			CHECK(wire_parser_error(p)[0] != '\0');
		}
	}
	fprintf(stderr, "  fuzz: %d mutations, %d still valid, %d disagreements with json-c,"
		" %d refused by the stricter RFC 8259 rules only\n", iterations, accepted, disagree,
		stricter);
	CHECK_INT(disagree, 0);
	free(buf);
	arena_free(a);
	wire_parser_free(p);
}

/* The "modules" extension (docs/symbols.md): read, written back, validated with the field named. */
static void test_modules(void)
{
	static const char at_labels[] = "\"labels\": {";
	struct wire_parser *p = parser();
	struct arena *a = arena_open(0);
	struct buf b1 = BUF_INIT(0), b2 = BUF_INIT(0), big = BUF_INIT(0);
	struct wire_stream s, t;
	const char *at = strstr(example, at_labels);

	buf_append(&b1, example, (size_t)(at - example));
	buf_puts(&b1, "\"modules\": {\"nginx\": \"3f9a0c\", \"libc.so.6\": \"00ff\"}, ");
	buf_puts(&b1, at);
	CHECK_INT(wire_parse(p, b1.data, b1.len, a, &s), WIRE_OK);
	CHECK_INT(s.nmodules, 2);
	CHECK_STR(s.modules[1].key, "libc.so.6");
	CHECK_STR(s.modules[1].value, "00ff");
	CHECK_INT(wire_write_json(&s, &b2), 0);
	CHECK(strstr(buf_cstr(&b2), "\"modules\":{\"nginx\":\"3f9a0c\",\"libc.so.6\":\"00ff\"}") != NULL);
	CHECK_INT(wire_parse(p, b2.data, b2.len, a, &t), WIRE_OK);
	CHECK_INT(t.nmodules, 2);
	BAD(at_labels, "\"modules\": {\"m\": \"ABCD\"}, \"labels\": {", WIRE_EINVALID,
	    "modules.m: a build id is 2 to 80 lower-case hex digits, an even number");
	BAD(at_labels, "\"modules\": {\"m\": \"abc\"}, \"labels\": {", WIRE_EINVALID,
	    "modules.m: a build id is 2 to 80 lower-case hex digits, an even number");
	BAD(at_labels, "\"modules\": {\"m\": \"\"}, \"labels\": {", WIRE_EINVALID, "modules.m: must not be empty");
	BAD(at_labels, "\"modules\": {\"m\": \"00\", \"m\": \"11\"}, \"labels\": {", WIRE_EINVALID,
	    "modules.m: duplicate key");
	BAD(at_labels, "\"modules\": [], \"labels\": {", WIRE_EINVALID, "modules: must be an object, not an array");
	buf_puts(&big, "\"modules\": {\"m\": \"");
	for (int i = 0; i < 41; i++)
		buf_puts(&big, "00");
	buf_puts(&big, "\"}, \"labels\": {");
	BAD(at_labels, buf_cstr(&big), WIRE_EINVALID, "modules.m: 82 bytes long, at most 80 allowed");
	buf_reset(&big);
	buf_puts(&big, "\"modules\": {");
	for (int i = 0; i <= WIRE_MAX_MODULES; i++)
		buf_printf(&big, "%s\"m%d\": \"00\"", i ? ", " : "", i);
	buf_puts(&big, "}, \"labels\": {");
	BAD(at_labels, buf_cstr(&big), WIRE_EINVALID, "modules: 257 keys, at most 256 allowed");
	buf_release(&big);
	buf_release(&b1);
	buf_release(&b2);
	arena_free(a);
	wire_parser_free(p);
}

/* The "threads" extension: tid -> name, read in the order sent, written back, every bound refused by
 * name; 4096 entries are taken and a duplicate is found wherever it is. */
static void test_threads(void)
{
	static const char at_labels[] = "\"labels\": {";
	struct wire_parser *p = parser();
	struct arena *a = arena_open(0);
	struct buf b1 = BUF_INIT(0), b2 = BUF_INIT(0), big = BUF_INIT(0);
	struct wire_stream s, t;
	const char *at = strstr(example, at_labels);

	buf_append(&b1, example, (size_t)(at - example));
	buf_puts(&b1, "\"threads\": {\"4211\": \"nginx: worker\", \"0\": \"swapper/0\", \"17\": \"<b>\\u00e9\"}, ");
	buf_puts(&b1, at);
	CHECK_INT(wire_parse(p, b1.data, b1.len, a, &s), WIRE_OK);
	CHECK_INT(s.nthreads, 3);
	if (s.nthreads == 3) {
		CHECK_INT(s.threads[0].tid, 4211);
		CHECK_STR(s.threads[0].name, "nginx: worker");
		CHECK_INT(s.threads[1].tid, 0);
		CHECK_INT(s.threads[2].tid, 17);
		CHECK_STR(s.threads[2].name, "<b>\xc3\xa9");
	}
	CHECK_INT(wire_write_json(&s, &b2), 0);
	CHECK(strstr(buf_cstr(&b2), "\"threads\":{\"4211\":\"nginx: worker\",\"0\":\"swapper/0\",\"17\":\"<b>\xc3\xa9\"}") != NULL);
	CHECK_INT(wire_parse(p, b2.data, b2.len, a, &t), WIRE_OK);
	CHECK_INT(t.nthreads, 3);
	/* absent or null: none */
	CHECK_INT(wire_parse(p, example, sizeof(example) - 1, a, &t), WIRE_OK);
	CHECK(t.nthreads == 0 && t.threads == NULL);
	BAD(at_labels, "\"threads\": null, \"labels\": {", WIRE_OK, "");
	BAD(at_labels, "\"threads\": [], \"labels\": {", WIRE_EINVALID, "threads: must be an object, not an array");
	BAD(at_labels, "\"threads\": {\"12x\": \"a\"}, \"labels\": {", WIRE_EINVALID,
	    "threads.12x: not a thread id (a decimal integer from 0 to 2147483647)");
	BAD(at_labels, "\"threads\": {\"\": \"a\"}, \"labels\": {", WIRE_EINVALID,
	    "threads.: not a thread id (a decimal integer from 0 to 2147483647)");
	BAD(at_labels, "\"threads\": {\" 1\": \"a\"}, \"labels\": {", WIRE_EINVALID,
	    "threads. 1: not a thread id (a decimal integer from 0 to 2147483647)");
	BAD(at_labels, "\"threads\": {\"2147483647\": \"a\", \"2147483648\": \"a\"}, \"labels\": {", WIRE_EINVALID,
	    "threads.2147483648: not a thread id (a decimal integer from 0 to 2147483647)");
	BAD(at_labels, "\"threads\": {\"99999999999\": \"a\"}, \"labels\": {", WIRE_EINVALID,
	    "threads.99999999999: not a thread id (a decimal integer from 0 to 2147483647)");
	BAD(at_labels, "\"threads\": {\"1\": \"a\\u0007\"}, \"labels\": {", WIRE_EINVALID,
	    "threads.1: contains a control character");
	BAD(at_labels, "\"threads\": {\"1\": \"a\\u007f\"}, \"labels\": {", WIRE_EINVALID,
	    "threads.1: contains a control character");
	BAD(at_labels, "\"threads\": {\"1\": null}, \"labels\": {", WIRE_EINVALID,
	    "threads.1: must be a string, not null");
	/* a name of 64 bytes (32 two-byte characters) is taken, 65 is not */
	buf_puts(&big, "\"threads\": {\"1\": \"");
	for (int i = 0; i < 32; i++)
		buf_puts(&big, "\xc3\xa9");
	buf_puts(&big, "\"}, \"labels\": {");
	BAD(at_labels, buf_cstr(&big), WIRE_OK, "");
	buf_reset(&big);
	buf_puts(&big, "\"threads\": {\"1\": \"x");
	for (int i = 0; i < 32; i++)
		buf_puts(&big, "\xc3\xa9");
	buf_puts(&big, "\"}, \"labels\": {");
	BAD(at_labels, buf_cstr(&big), WIRE_EINVALID, "threads.1: 65 bytes long, at most 64 allowed");
	/* 4096 entries, then 4097; a duplicate far from its first */
	buf_reset(&big);
	buf_puts(&big, "\"threads\": {");
	for (int i = 0; i < WIRE_MAX_THREADS; i++)
		buf_printf(&big, "%s\"%d\": \"t\"", i ? ", " : "", i + 1);
	buf_puts(&big, "}, \"labels\": {");
	BAD(at_labels, buf_cstr(&big), WIRE_OK, "");
	buf_reset(&big);
	buf_puts(&big, "\"threads\": {");
	for (int i = 0; i < WIRE_MAX_THREADS; i++)
		buf_printf(&big, "%s\"%d\": \"t\"", i ? ", " : "", i == 4000 ? 3 : i + 1);
	buf_puts(&big, "}, \"labels\": {");
	BAD(at_labels, buf_cstr(&big), WIRE_EINVALID, "threads.3: duplicate key");
	buf_reset(&big);
	buf_puts(&big, "\"threads\": {");
	for (int i = 0; i <= WIRE_MAX_THREADS; i++)
		buf_printf(&big, "%s\"%d\": \"t\"", i ? ", " : "", i + 1);
	buf_puts(&big, "}, \"labels\": {");
	BAD(at_labels, buf_cstr(&big), WIRE_EINVALID, "threads: 4097 entries, at most 4096 allowed");
	buf_release(&big);
	buf_release(&b1);
	buf_release(&b2);
	arena_free(a);
	wire_parser_free(p);
}

/* The report both the agent in a process and the host's collector send: the exact body, strings
 * escaped, a start before the epoch written as 0, and a buffer too small for it an error. */
static void test_report(void)
{
	struct wire_report r = {
		.host = "web-17", .exe = "/usr/sbin/ng\"inx", .build_id = "3f9a", .mode = "guard",
		.agent_version = "1.0.0", .app = NULL, .collector = "host", .pid = 4211,
		.started_ns = 1700000000000000000, .units = 250, .violations = 7, .drops = 1,
		.spool_backlog = 2, .ship_errors = UINT64_MAX, .exiting = true,
	};
	struct buf b = BUF_INIT(0), small = BUF_INIT(64);

	CHECK_INT(wire_write_report(&r, &b), 0);
	CHECK_STR(buf_cstr(&b),
		  "{\"v\":1,\"host\":\"web-17\",\"exe\":\"/usr/sbin/ng\\\"inx\",\"build_id\":\"3f9a\","
		  "\"mode\":\"guard\",\"agent_version\":\"1.0.0\",\"app\":\"\",\"pid\":4211,"
		  "\"started_ns\":1700000000000000000,\"units\":250,\"violations\":7,\"drops\":1,"
		  "\"spool_backlog\":2,\"ship_errors\":18446744073709551615,\"exiting\":true,\"collector\":\"host\"}");
	buf_reset(&b);
	r.started_ns = -5;
	r.collector = NULL;
	r.exiting = false;
	CHECK_INT(wire_write_report(&r, &b), 0);
	CHECK(strstr(buf_cstr(&b), "\"started_ns\":0,") != NULL);
	CHECK(strstr(buf_cstr(&b), "\"exiting\":false,\"collector\":\"process\"}") != NULL);
	CHECK_INT(wire_write_report(&r, &small), -1);
	buf_release(&small);
	buf_release(&b);
}

/* An event read by the one-pass path (its members in the written order) and by the general one
 * (the same members in reverse): the same event, or the same refusal with the same message. */
static void test_event_paths(void)
{
	static const struct {
		const char *m[6];      /* kind, tid, ts_ns, dur_ns, stack, readier_tid (NULL: absent) */
		const char *refusal;   /* NULL: accepted */
	} cases[] = {
		{ { "\"wait\"", "7", "100", "5", "1", "3" }, NULL },
		{ { "\"run\"", "7", "100", "5", "0", NULL }, NULL },
		{ { "\"run\"", "7", "100", "5", "0", "null" }, NULL },
		{ { "\"wait\"", "0", "0", "0", "1", "null" }, NULL },
		{ { "\"wait\"", "2147483647", "4611686018427387904", "999999999999999999", "1", "2147483647" }, NULL },
		{ { "\"r\\u0075n\"", "7", "100", "5", "0", NULL }, NULL },
		/* numbers read eight digits at a time: runs of 8, 9, 16, 17 and 18 digits, then 19 */
		{ { "\"wait\"", "12345678", "123456789", "87654321", "1", "98765432" }, NULL },
		{ { "\"run\"", "2147483647", "1735638272962911", "17356382729629110", "0", NULL }, NULL },
		{ { "\"run\"", "7", "173563827296291102", "100000009", "0", NULL }, NULL },
		{ { "\"run\"", "7", "1735638272962911020", "5", "0", NULL }, NULL },
		{ { "\"run\"", "7", "100", "10000000000000000", "0", NULL }, NULL },
		{ { "\"run\"", "7", "12345678.5", "5", "0", NULL }, "events[0].ts_ns: must be an integer, not a fraction" },
		{ { "\"run\"", "7", "1234567812345678e3", "5", "0", NULL }, "events[0].ts_ns: must be an integer, not a fraction" },
		{ { "\"run\"", "7", "100", "99999999999999999999", "0", NULL }, "events[0].dur_ns: out of range (at most 4611686018427387904)" },
		{ { "\"run\"", "7", "100", "5", "0", "0" }, "events[0].readier_tid: only wait events have a readier" },
		{ { "\"wait\"", "2147483648", "100", "5", "1", "3" }, "events[0].tid: 2147483648 out of range" },
		{ { "\"wait\"", "7", "4611686018427387905", "5", "1", "3" }, "events[0].ts_ns: 4611686018427387905 out of range" },
		{ { "\"wait\"", "7", "100", "5", "2", "3" }, "events[0].stack: index 2 out of range (2 stacks)" },
		{ { "\"wait\"", "7", "100", "5", "999999999999", "3" }, "events[0].stack: 999999999999 out of range" },
		{ { "\"wait\"", "1.5", "100", "5", "1", "3" }, "events[0].tid: must be an integer, not a fraction" },
		{ { "\"wait\"", "7", "1e3", "5", "1", "3" }, "events[0].ts_ns: must be an integer, not a fraction" },
		{ { "\"wait\"", "-1", "100", "5", "1", "3" }, "events[0].tid: -1 is negative" },
		{ { "\"wait\"", "\"7\"", "100", "5", "1", "3" }, "events[0].tid: must be an integer, not a string" },
		{ { "\"walk\"", "7", "100", "5", "1", "3" }, "events[0].kind: must be \"run\" or \"wait\"" },
		{ { "\"wait\"", "7", "100", "5", "1", "2147483648" }, "events[0].readier_tid: 2147483648 out of range" },
		{ { "\"wait\"", "7", "100", "5", "1", "true" }, "events[0].readier_tid: must be an integer" },
	};
	static const char *const names[6] = { "kind", "tid", "ts_ns", "dur_ns", "stack", "readier_tid" };
	struct wire_parser *p = parser();
	struct arena *a = arena_open(0);

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (int spaced = 0; spaced < 2; spaced++) {
			struct wire_stream s[2];
			char ev[2][512], text[1024], msg[2][512];
			int rc[2];

			/* the written order (spaced or not), then the reverse */
			for (int rev = 0; rev < 2; rev++) {
				size_t n = 0;

				n += (size_t)snprintf(ev[rev] + n, sizeof(ev[rev]) - n, "{");
				for (int k = 0; k < 6; k++) {
					int m = rev ? 5 - k : k;

					if (!cases[c].m[m])
						continue;
					n += (size_t)snprintf(ev[rev] + n, sizeof(ev[rev]) - n, "%s\"%s\":%s%s",
							      n > 1 ? (spaced ? ", " : ",") : "", names[m],
							      spaced ? " " : "", cases[c].m[m]);
				}
				snprintf(ev[rev] + n, sizeof(ev[rev]) - n, "}");
				snprintf(text, sizeof(text),
					 "{\"v\":1,\"stream_id\":\"5f0c6f0e-3d0b-4a53-9a43-6d1c2f0a9b11\",\"host\":\"h\","
					 "\"app\":\"a\",\"symptom\":{\"kind\":\"unit_violation\",\"tid\":7,\"start_ns\":1,"
					 "\"end_ns\":2},\"frames\":[\"a!f\",\"a!g\"],\"stacks\":[[0],[0,1]],\"events\":[%s]}",
					 ev[rev]);
				rc[rev] = wire_parse(p, text, strlen(text), a, &s[rev]);
				snprintf(msg[rev], sizeof(msg[rev]), "%s", rc[rev] ? wire_parser_error(p) : "");
			}
			CHECK_INT(rc[0], cases[c].refusal ? WIRE_EINVALID : WIRE_OK);
			CHECK_INT(rc[1], rc[0]);
			CHECK_STR(msg[1], msg[0]);
			if (cases[c].refusal && strncmp(msg[0], cases[c].refusal, strlen(cases[c].refusal)) != 0)
				CHECK_STR(msg[0], cases[c].refusal);
			if (rc[0] == WIRE_OK && rc[1] == WIRE_OK) {
				const struct wire_event *e = s[0].events, *f = s[1].events;

				CHECK_INT(s[0].nevents, 1);
				CHECK_INT(e->kind, f->kind);
				CHECK_INT(e->tid, f->tid);
				CHECK_INT(e->ts_ns, f->ts_ns);
				CHECK_INT(e->dur_ns, f->dur_ns);
				CHECK_INT(e->stack, f->stack);
				CHECK_INT(e->readier_tid, f->readier_tid);
				CHECK_INT(e->tid, strtoll(cases[c].m[1], NULL, 10));
				CHECK_INT(e->stack, strtoll(cases[c].m[4], NULL, 10));
				CHECK_INT(e->ts_ns, strtoll(cases[c].m[2], NULL, 10));
				CHECK_INT(e->dur_ns, strtoll(cases[c].m[3], NULL, 10));
			}
		}
	arena_free(a);
	wire_parser_free(p);
}

int main(void)
{
	RUN(test_report);
	RUN(test_example);
	RUN(test_in_place);
	RUN(test_compact);
	RUN(test_event_paths);
	RUN(test_modules);
	RUN(test_threads);
	RUN(test_roundtrip);
	RUN(test_rejections);
	RUN(test_many_members);
	RUN(test_weight);
	RUN(test_nul_in_key);
	RUN(test_limits);
	RUN(test_fuzz);
	return CHECK_DONE();
}
