/* Unit tests of mining-run parameters (miner/params.c): parsing, defaults, errors, canonical JSON. */
#include "common/arena.h"
#include "miner/params.h"
#include "tests/unit/check.h"

static const char *parse(const char *json, struct run_params *p, struct arena *a)
{
	static char err[512];

	err[0] = '\0';
	if (params_parse(json, strlen(json), a, p, err, sizeof(err)) == 0)
		return "ok";
	return err;
}

static void test_defaults_and_json(void)
{
	struct arena *a = arena_open(0);
	struct run_params p;
	struct buf b = BUF_INIT(0);

	CHECK_STR(parse("{\"app\": \"nginx\"}", &p, a), "ok");
	CHECK_STR(p.app, "nginx");
	CHECK_INT(p.kinds, RUN_KINDS_BOTH);
	CHECK_STR(p.aoi, "waitgraph");
	CHECK_INT(p.threshold_ns, -1);
	CHECK(p.threshold_fraction == 0.01);
	CHECK_STR(p.linkage, "average");
	CHECK(p.cut == 0.5);
	CHECK_INT(params_write_json(&p, &b), 0);
	CHECK_STR(buf_cstr(&b), "{\"app\":\"nginx\",\"kind\":\"both\",\"aoi\":\"waitgraph\",\"include\":[],"
				"\"exclude\":[],\"threshold_fraction\":0.01,\"linkage\":\"average\","
				"\"cut\":0.5,\"baseline\":true,\"bootstrap\":200,\"filter\":{}}");
	buf_release(&b);
	arena_free(a);
}

static void test_full(void)
{
	struct arena *a = arena_open(0);
	struct run_params p, q;
	struct buf b = BUF_INIT(0), c = BUF_INIT(0);

	CHECK_STR(parse("{\"app\": \"a\\\"b\", \"kind\": \"wait\", \"aoi\": \"critical\","
			" \"include\": [\"*!fdatasync\", \"win32k.sys!*Lock*\"], \"exclude\": [\"*idle*\"],"
			" \"threshold_ns\": 30000000000, \"linkage\": \"complete\", \"cut\": 0.25,"
			" \"filter\": {\"version\": \"1.2\", \"host\": \"web-1\", \"labels\": {\"os\": \"x\"},"
			" \"since\": \"2026-11-22T03:00:00Z\", \"until\": 1800000000000000000}}", &p, a), "ok");
	CHECK_INT(p.kinds, RUN_KINDS_WAIT);
	CHECK_INT(p.ninclude, 2);
	CHECK_STR(p.include[1], "win32k.sys!*Lock*");
	CHECK_INT(p.threshold_ns, 30000000000LL);
	CHECK_STR(p.filter.labels_json, "{\"os\":\"x\"}");
	CHECK_INT(p.filter.since_ns, 1795316400000000000LL);
	CHECK_INT(p.filter.until_ns, 1800000000000000000LL);
	/* the canonical form parses back to the same canonical form */
	CHECK_INT(params_write_json(&p, &b), 0);
	CHECK_STR(parse(buf_cstr(&b), &q, a), "ok");
	CHECK_INT(params_write_json(&q, &c), 0);
	CHECK_STR(buf_cstr(&c), buf_cstr(&b));
	buf_release(&b);
	buf_release(&c);
	arena_free(a);
}

static void test_guideline(void)
{
	struct arena *a = arena_open(0);
	struct run_params p;
	struct buf b = BUF_INIT(0);

	CHECK_STR(parse("{\"app\": \"x\", \"threshold_guideline\": {\"share\": 0.1, \"delay_ns\": 300000000}}",
			&p, a), "ok");
	CHECK(p.guideline.share == 0.1);
	CHECK_INT(p.guideline.delay_ns, 300000000);
	CHECK_INT(params_write_json(&p, &b), 0);
	CHECK(strstr(buf_cstr(&b), ",\"threshold_guideline\":{\"share\":0.1,\"delay_ns\":300000000},") != NULL);
	CHECK(strstr(buf_cstr(&b), "threshold_fraction") == NULL);
	CHECK_STR(parse("{\"app\": \"x\", \"threshold_guideline\": {\"share\": 0, \"delay_ns\": 1}}", &p, a),
		  "threshold_guideline.share: must be more than 0 and at most 1");
	CHECK_STR(parse("{\"app\": \"x\", \"threshold_guideline\": {\"share\": 0.1, \"delay_ns\": -1}}", &p, a),
		  "threshold_guideline.delay_ns: must be a positive integer");
	CHECK_STR(parse("{\"app\": \"x\", \"threshold_guideline\": {\"share\": 0.1}}", &p, a),
		  "threshold_guideline: must be {\"share\": S, \"delay_ns\": D}");
	CHECK_STR(parse("{\"app\": \"x\", \"threshold_ns\": 5, \"threshold_guideline\": {\"share\": 0.1, "
			"\"delay_ns\": 1}}", &p, a),
		  "threshold_ns: give one of threshold_ns, threshold_fraction and threshold_guideline");
	buf_release(&b);
	arena_free(a);
}

static void test_errors(void)
{
	struct arena *a = arena_open(0);
	struct run_params p;

	CHECK_STR(parse("{}", &p, a), "app: required");
	CHECK_STR(parse("[1]", &p, a), "body: must be a JSON object");
	CHECK_STR(parse("{\"app\": 1}", &p, a), "app: must be a string");
	CHECK_STR(parse("{\"app\": \"x\", \"kind\": \"cpu\"}", &p, a), "kind: must be wait, run or both");
	CHECK_STR(parse("{\"app\": \"x\", \"aoi\": \"all\"}", &p, a),
		  "aoi: must be waitgraph, thread, critical or stream");
	CHECK_STR(parse("{\"app\": \"x\", \"threshold_ns\": -5}", &p, a),
		  "threshold_ns: must be a positive integer");
	CHECK_STR(parse("{\"app\": \"x\", \"threshold_fraction\": 0}", &p, a),
		  "threshold_fraction: must be more than 0 and at most 1");
	CHECK_STR(parse("{\"app\": \"x\", \"cut\": 1.5}", &p, a), "cut: must be from 0 to 1");
	CHECK_STR(parse("{\"app\": \"x\", \"linkage\": \"ward\"}", &p, a),
		  "linkage: must be average, single or complete");
	CHECK_STR(parse("{\"app\": \"x\", \"include\": \"*\"}", &p, a), "include: must be an array of strings");
	CHECK_STR(parse("{\"app\": \"x\", \"exclude\": [\"\"]}", &p, a), "exclude[0]: a glob of 1 to 1024 bytes");
	CHECK_STR(parse("{\"app\": \"x\", \"filter\": {\"hots\": \"a\"}}", &p, a),
		  "filter.hots: unknown field (version, host, labels, since, until)");
	CHECK_STR(parse("{\"app\": \"x\", \"filter\": {\"since\": \"yesterday\"}}", &p, a),
		  "filter.since: must be an RFC 3339 time (2026-11-22T03:00:00Z) or ns since the epoch");
	CHECK_STR(parse("{\"app\": \"x\", \"filter\": {\"since\": 10, \"until\": 5}}", &p, a),
		  "filter.until: must be after filter.since");
	CHECK_STR(parse("{\"app\": \"x\", \"filter\": {\"labels\": {\"a\": 1}}}", &p, a),
		  "filter.labels.a: must be a string");
	CHECK_STR(parse("{\"app\": \"x\"} trailing", &p, a), "body: unexpected 't' after the value at byte 13");
	/* issue 25: a NUL in a label's key or value, a lone surrogate, a key given twice */
	CHECK_STR(parse("{\"app\": \"x\", \"filter\": {\"labels\": {\"o\\u0000s\": \"a\"}}}", &p, a),
		  "filter.labels.o\\u0000s: unexpected '\\' (NUL, \\u0000, is not allowed in a string) at byte 37");
	CHECK_STR(parse("{\"app\": \"x\", \"filter\": {\"labels\": {\"os\": \"a\\u0000\"}}}", &p, a),
		  "filter.labels.os: unexpected '\\' (NUL, \\u0000, is not allowed in a string) at byte 43");
	CHECK_STR(parse("{\"app\": \"x\\ud800\"}", &p, a),
		  "app: unexpected '\\' (a lone high surrogate) at byte 10");
	CHECK_STR(parse("{\"app\": \"x\", \"app\": \"y\"}", &p, a), "app: duplicate key");
	CHECK_STR(parse("{\"app\": \"x\", \"filter\": {\"labels\": {\"a\": \"1\", \"a\": \"2\"}}}", &p, a),
		  "filter.labels.a: duplicate key");
	CHECK_STR(parse("{\"app\": \"x\", \"filter\": {\"host\": \"a\", \"host\": null}}", &p, a),
		  "filter.host: duplicate key");
	CHECK_STR(parse("{\"app\": \"x\", \"threshold_ns\": 9223372036854775808}", &p, a),
		  "threshold_ns: must be a positive integer");
	CHECK_STR(parse("{\"app\": \"x\", \"cut\": 1e400}", &p, a), "cut: must be a finite number");
	arena_free(a);
}

static void test_time(void)
{
	int64_t ns;

	CHECK_INT(params_parse_time("1970-01-01T00:00:01Z", &ns), 0);
	CHECK_INT(ns, 1000000000);
	CHECK_INT(params_parse_time("1970-01-01T01:00:00.5+01:00", &ns), 0);
	CHECK_INT(ns, 500000000);
	CHECK_INT(params_parse_time("2026-11-22T03:00:00.123456789Z", &ns), 0);
	CHECK_INT(ns, 1795316400123456789LL);
	CHECK_INT(params_parse_time("2026-11-22 03:00:00Z", &ns), -1);
	/* int64 nanoseconds end in 1677 and 2262: years past them are refused, not wrapped */
	CHECK_INT(params_parse_time("9999-12-31T00:00:00Z", &ns), -1);
	CHECK_INT(params_parse_time("1000-01-01T00:00:00Z", &ns), -1);
	CHECK_INT(params_parse_time("2262-01-01T00:00:00Z", &ns), 0);
	CHECK(ns > 0);
	CHECK_INT(params_parse_time("2026-11-22T03:00:00", &ns), -1);
	CHECK_INT(params_parse_time("2026-11-22T03:00:00+0100", &ns), -1);
}

int main(void)
{
	RUN(test_defaults_and_json);
	RUN(test_full);
	RUN(test_errors);
	RUN(test_guideline);
	RUN(test_time);
	return CHECK_DONE();
}
