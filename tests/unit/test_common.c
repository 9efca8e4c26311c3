/* Unit tests of the shared modules: buf, cli (server options), fmt, jsonw, log (escaping), imap, vec, par, arena, intern, sha256, util, auth tokens,
 * idcache. */
#include "common/arena.h"
#include "common/auth.h"
#include "common/budget.h"
#include "common/buf.h"
#include "common/cli.h"
#include "common/fmt.h"
#include "common/imap.h"
#include "common/intern.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/par.h"
#include "common/sha256.h"
#include "common/util.h"
#include "common/vec.h"
#include "common/webhook.h"
#include "ingest/idcache.h"
#include "tests/unit/check.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>

/* cli_server_getopt stores the options sm-ingest and sm-web share and hands back the others */
static void test_cli(void)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, CLI_OPT_DB },
		{ "listen", required_argument, NULL, CLI_OPT_LISTEN },
		{ "port-file", required_argument, NULL, CLI_OPT_PORT_FILE },
		{ "log-level", required_argument, NULL, CLI_OPT_LOGLEVEL },
		{ "workers", required_argument, NULL, 256 },
		{ "min-body-rate", required_argument, NULL, CLI_OPT_BODYRATE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct cli cl = { "test_common", NULL };
	const char *db = NULL, *listen = NULL, *port_file = NULL;
	enum log_level level = LOG_INFO;
	int rate = -1, status = 99;
	const struct cli_server so = { "(usage)\n", &db, &listen, &port_file, &level, &rate };
	char *ok[] = { "prog", "--db", "dbname=x", "--workers=4", "--listen=127.0.0.1:0", "--port-file", "/tmp/p",
		       "--log-level=warn", "--min-body-rate=2k", NULL };
	char *extra[] = { "prog", "--db=y", "extra", NULL };
	char *bad_level[] = { "prog", "--log-level=loud", NULL };
	char *bad_rate[] = { "prog", "--min-body-rate=2G", NULL };
	char *unknown[] = { "prog", "--bogus", NULL };
	char *help[] = { "prog", "-h", NULL };

	CHECK_STR(cli_opt_name(opts, CLI_OPT_BODYRATE), "min-body-rate");
	CHECK_STR(cli_opt_name(opts, 256), "workers");
	CHECK_STR(cli_opt_name(opts, '?'), "?");
	optind = 0;
	CHECK_INT(cli_server_getopt(&cl, &so, 9, ok, opts, &status), 256);
	CHECK_STR(optarg, "4");
	CHECK_INT(status, -1);
	CHECK_INT(cli_server_getopt(&cl, &so, 9, ok, opts, &status), -1);
	CHECK_INT(status, -1);
	CHECK_STR(db, "dbname=x");
	CHECK_STR(listen, "127.0.0.1:0");
	CHECK_STR(port_file, "/tmp/p");
	CHECK_INT(level, LOG_WARN);
	CHECK_INT(rate, 2048);
	optind = 0;
	CHECK_INT(cli_server_getopt(&cl, &so, 3, extra, opts, &status), -1);
	CHECK_INT(status, 2);
	CHECK_STR(db, "y");
	optind = 0;
	CHECK_INT(cli_server_getopt(&cl, &so, 2, bad_level, opts, &status), -1);
	CHECK_INT(status, 2);
	CHECK_INT(level, LOG_WARN);
	optind = 0;
	CHECK_INT(cli_server_getopt(&cl, &so, 2, bad_rate, opts, &status), -1);
	CHECK_INT(status, 2);
	CHECK_INT(rate, 2048);
	optind = 0;
	CHECK_INT(cli_server_getopt(&cl, &so, 2, unknown, opts, &status), -1);
	CHECK_INT(status, 2);
	optind = 0;
	CHECK_INT(cli_server_getopt(&cl, &so, 2, help, opts, &status), -1);
	CHECK_INT(status, 0);
}

static void test_buf(void)
{
	struct buf b = BUF_INIT(16);

	CHECK_INT(buf_puts(&b, "0123456789"), 0);
	CHECK_INT(buf_put_i64(&b, -42), 0);
	CHECK_STR(buf_cstr(&b), "0123456789-42");
	/* past the hard maximum: refused, contents unchanged, and the error sticks */
	CHECK_INT(buf_error(&b), BUF_OK);
	CHECK_INT(buf_puts(&b, "abcd"), -1);
	CHECK_INT(b.len, 13);
	CHECK_STR(buf_cstr(&b), "0123456789-42");
	CHECK_INT(buf_error(&b), BUF_TOO_LARGE);
	CHECK_STR(buf_error_text(&b), "more than 16 bytes");
	CHECK_INT(buf_puts(&b, "abc"), -1);
	CHECK_INT(buf_putc(&b, 'x'), -1);
	CHECK_INT(buf_printf(&b, "%d", 1), -1);
	CHECK_INT(b.len, 13);
	/* a reset clears it */
	buf_reset(&b);
	CHECK_INT(buf_error(&b), BUF_OK);
	CHECK_INT(buf_puts(&b, "abc"), 0);
	CHECK_INT(b.len, 3);
	buf_release(&b);

	b.max = 0;
	buf_put_json_str(&b, "a\"b\\c\n\x01<>", 9);
	CHECK_STR(buf_cstr(&b), "\"a\\\"b\\\\c\\n\\u0001<>\"");
	/* JSON text is UTF-8: a byte that is not becomes U+FFFD, valid sequences pass */
	buf_reset(&b);
	buf_put_json_str(&b, "\xc3\xa9\xff!\xed\xa0\x80", 7);
	CHECK_STR(buf_cstr(&b), "\"\xc3\xa9\xef\xbf\xbd!\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
	buf_reset(&b);
	buf_put_i64(&b, INT64_MIN);
	CHECK_STR(buf_cstr(&b), "-9223372036854775808");
	buf_reset(&b);
	CHECK_INT(buf_printf(&b, "%s=%d", "x", 7), 0);
	CHECK_STR(buf_cstr(&b), "x=7");
	/* doubles: the shortest form that reads back the same */
	buf_reset(&b);
	buf_put_double(&b, 0.6);
	buf_putc(&b, ' ');
	buf_put_double(&b, 0.01);
	buf_putc(&b, ' ');
	buf_put_double(&b, 1.0 / 3);
	buf_putc(&b, ' ');
	buf_put_double(&b, 1e300);
	buf_putc(&b, ' ');
	buf_put_double(&b, -2);
	CHECK_STR(buf_cstr(&b), "0.6 0.01 0.3333333333333333 1e+300 -2");
	/* HTML: markup characters, controls and invalid UTF-8 never pass through */
	buf_reset(&b);
	{
		static const char in[] = "std::map<K, V>::find&\"'\x01\xc3\xa9\xff\xed\xa0\x80ok";
		buf_put_html(&b, in, sizeof(in) - 1);
	}
	CHECK_STR(buf_cstr(&b), "std::map&lt;K, V&gt;::find&amp;&quot;&#39;\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd"
		  "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdok");
	/* bidirectional controls shown, never obeyed; other characters of those blocks pass */
	buf_reset(&b);
	{
		static const char in[] = "a\xe2\x80\xaetxt\xe2\x81\xa6x\xe2\x81\xa9\xe2\x80\x8f\xd8\x9c"
					 "\xe2\x80\x94\xe2\x81\xaa\xd8\x9b";
		buf_put_html(&b, in, sizeof(in) - 1);
	}
	CHECK_STR(buf_cstr(&b), "a[U+202E]txt[U+2066]x[U+2069][U+200F][U+061C]\xe2\x80\x94\xe2\x81\xaa\xd8\x9b");
	buf_release(&b);
}

static void test_jsonw(void)
{
	struct buf b = BUF_INIT(0);
	struct jsonw w;

	/* structure: commas, keys, nesting; non-finite numbers as null; number text checked */
	jsonw_init(&w, &b);
	jsonw_object(&w);
	jsonw_kstr(&w, "name", "a\"b");
	jsonw_karray(&w, "xs");
	jsonw_i64(&w, -1);
	jsonw_u64(&w, UINT64_MAX);
	jsonw_double(&w, 0.5);
	jsonw_double(&w, NAN);
	jsonw_double(&w, -INFINITY);
	jsonw_number_text(&w, "12.5e3");
	jsonw_number_text(&w, "NaN");
	jsonw_number_text(&w, "01");
	jsonw_end(&w);
	jsonw_kobject(&w, "o");
	jsonw_end(&w);
	jsonw_key(&w, "raw");
	jsonw_raw(&w, "{\"k\": [1]}", 10);
	jsonw_kbool(&w, "t", true);
	jsonw_knull(&w, "n");
	jsonw_kstr(&w, "nul", NULL);
	jsonw_end(&w);
	CHECK_INT(jsonw_finish(&w), 0);
	CHECK_STR(jsonw_error(&w), "");
	CHECK_STR(buf_cstr(&b), "{\"name\": \"a\\\"b\", \"xs\": [-1, 18446744073709551615, 0.5, null, null, 12.5e3, null, "
		  "null], \"o\": {}, \"raw\": {\"k\": [1]}, \"t\": true, \"n\": null, \"nul\": null}");
	/* compact */
	buf_reset(&b);
	jsonw_init_compact(&w, &b);
	jsonw_object(&w);
	jsonw_ki64(&w, "a", 1);
	jsonw_karray(&w, "b");
	jsonw_str(&w, "x");
	jsonw_str(&w, "y");
	jsonw_end(&w);
	jsonw_end(&w);
	CHECK_INT(jsonw_finish(&w), 0);
	CHECK_STR(buf_cstr(&b), "{\"a\":1,\"b\":[\"x\",\"y\"]}");
	/* one member per line down to depth 2 */
	buf_reset(&b);
	jsonw_init_lines(&w, &b, 2);
	jsonw_object(&w);
	jsonw_ki64(&w, "a", 1);
	jsonw_karray(&w, "b");
	jsonw_array(&w);
	jsonw_i64(&w, 1);
	jsonw_i64(&w, 2);
	jsonw_end(&w);
	jsonw_end(&w);
	jsonw_end(&w);
	CHECK_INT(jsonw_finish(&w), 0);
	CHECK_STR(buf_cstr(&b), "{\n \"a\":1,\n \"b\":[\n  [1,2]\n ]\n}\n");
	/* misuse: a value without a key, a key in an array, unclosed, a second document */
	buf_reset(&b);
	jsonw_init(&w, &b);
	jsonw_object(&w);
	jsonw_i64(&w, 1);
	CHECK_INT(jsonw_finish(&w), -1);
	CHECK_STR(jsonw_error(&w), "a value without a key inside an object");
	buf_reset(&b);
	jsonw_init(&w, &b);
	jsonw_array(&w);
	jsonw_key(&w, "k");
	CHECK_STR(jsonw_error(&w), "a key outside an object");
	buf_reset(&b);
	jsonw_init(&w, &b);
	jsonw_array(&w);
	CHECK_INT(jsonw_finish(&w), -1);
	CHECK_STR(jsonw_error(&w), "an unfinished document");
	jsonw_end(&w);
	jsonw_null(&w);
	CHECK_STR(jsonw_error(&w), "a second value after the document");
	buf_release(&b);
	/* over the cap: the document fails whole, later writes do nothing */
	{
		struct buf small = BUF_INIT(20);

		jsonw_init(&w, &small);
		jsonw_array(&w);
		for (int i = 0; i < 10; i++)
			jsonw_str(&w, "abcdef");
		jsonw_end(&w);
		CHECK_INT(jsonw_finish(&w), -1);
		CHECK(jsonw_too_large(&w));
		CHECK_STR(jsonw_error(&w), "more than 20 bytes");
		CHECK(small.len <= 20);
		buf_release(&small);
	}
	/* nesting deeper than JSONW_MAX_DEPTH */
	jsonw_init(&w, &b);
	for (int i = 0; i < JSONW_MAX_DEPTH + 1; i++)
		jsonw_array(&w);
	CHECK_STR(jsonw_error(&w), "nesting too deep");
	buf_release(&b);
}

static void test_imap(void)
{
	struct imap m = IMAP_INIT;
	uint64_t v = 0;
	double d = 0;
	size_t n = 0;

	CHECK(!imap_get(&m, 5, &v));
	CHECK(!imap_del(&m, 5));
	/* many keys, with deletions in between: every survivor found, every deleted key gone */
	for (uint64_t k = 0; k < 5000; k++)
		CHECK_INT(imap_put(&m, k * 7919, k), 0);
	CHECK_INT(imap_put(&m, 7919, 42), 1);
	for (uint64_t k = 0; k < 5000; k += 3)
		CHECK(imap_del(&m, k * 7919));
	for (uint64_t k = 0; k < 5000; k++) {
		bool there = imap_get(&m, k * 7919, &v);

		if (k % 3 == 0)
			n += there;
		else
			n += !there || v != (k == 1 ? 42 : k);
	}
	CHECK_INT(n, 0);
	CHECK_INT(m.cnt, 5000 - 1667);
	n = 0;
	for (size_t i = 0; i < m.cap; i++)
		n += m.keys[i] != IMAP_EMPTY;
	CHECK_INT(n, m.cnt);
	CHECK_INT(imap_put_double(&m, 1u << 31, 0.25), 0);
	CHECK(imap_get_double(&m, 1u << 31, &d) && d == 0.25);
	imap_clear(&m);
	CHECK_INT(m.cnt, 0);
	CHECK(!imap_get(&m, 7919 * 2, &v));
	imap_free(&m);
	imap_free(NULL);
}

static void test_vec(void)
{
	struct vec v = VEC_INIT(int64_t);
	int64_t x = 7;
	size_t cap = 0;
	int *a = NULL;

	for (int i = 0; i < 1000; i++) {
		int64_t *p = vec_push(&v);

		CHECK(p != NULL);
		if (p)
			*p = i;
	}
	CHECK_INT(vec_append(&v, &x), 0);
	CHECK_INT(v.len, 1001);
	CHECK_INT(((int64_t *)v.data)[999], 999);
	CHECK_INT(((int64_t *)v.data)[1000], 7);
	vec_free(&v);
	vec_free(NULL);
	CHECK_INT(v.len, 0);
	/* sizes that would wrap fail instead of allocating a little */
	CHECK_INT(vec_bytes(SIZE_MAX / 2, 4), SIZE_MAX);
	CHECK(vec_alloc(SIZE_MAX / 2, 4) == NULL);
	CHECK(vec_realloc(NULL, SIZE_MAX / 8 + 1, 8) == NULL);
	CHECK_INT(vec_reserve(&a, &cap, SIZE_MAX / 2, sizeof(*a)), -1);
	CHECK(a == NULL && cap == 0);
	CHECK_INT(vec_reserve(&a, &cap, 10, sizeof(*a)), 0);
	CHECK(a != NULL && cap >= 10);
	free(a);
	{
		/* the extremes, where a comparison by subtraction would overflow */
		int32_t i32[] = { 5, INT32_MIN, -1, INT32_MAX, 0, -1 };
		int64_t i64[] = { INT64_MAX, 3, INT64_MIN, -7, 0 };
		uint32_t u32[] = { UINT32_MAX, 0, 2147483648u, 1 };
		int32_t key = INT32_MAX;

		vec_sort_i32(i32, 6);
		CHECK(i32[0] == INT32_MIN && i32[1] == -1 && i32[2] == -1 && i32[3] == 0 && i32[4] == 5 &&
		      i32[5] == INT32_MAX);
		CHECK(bsearch(&key, i32, 6, sizeof(*i32), vec_cmp_i32) == &i32[5]);
		vec_sort_i64(i64, 5);
		CHECK(i64[0] == INT64_MIN && i64[1] == -7 && i64[2] == 0 && i64[3] == 3 && i64[4] == INT64_MAX);
		vec_sort_u32(u32, 4);
		CHECK(u32[0] == 0 && u32[1] == 1 && u32[2] == 2147483648u && u32[3] == UINT32_MAX);
		CHECK_INT(vec_cmp_i64(&i64[0], &i64[4]), -1);
		CHECK_INT(vec_cmp_i64(&i64[4], &i64[0]), 1);
		CHECK_INT(vec_cmp_i32(&i32[1], &i32[2]), 0);
	}
}

struct par_test {
	struct par_items items;
	atomic_int seen[1000];
	atomic_int workers[PAR_MAX_THREADS];
};

static void par_test_fn(void *ctx, int w)
{
	struct par_test *t = ctx;
	size_t i;

	atomic_fetch_add(&t->workers[w], 1);
	while (par_take(&t->items, &i))
		atomic_fetch_add(&t->seen[i], 1);
}

static void test_par(void)
{
	static struct par_test t;
	int bad = 0;

	CHECK(par_threads(0) >= 1);
	CHECK_INT(par_threads(1000), PAR_MAX_THREADS);
	CHECK_INT(par_threads(3), 3);
	par_items_init(&t.items, 1000);
	par_run(4, par_test_fn, &t);
	/* every item once, every worker once */
	for (int i = 0; i < 1000; i++)
		bad += atomic_load(&t.seen[i]) != 1;
	for (int w = 0; w < PAR_MAX_THREADS; w++)
		bad += atomic_load(&t.workers[w]) != (w < 4);
	CHECK_INT(bad, 0);
}

static void test_arena(void)
{
	struct arena *a = arena_open(300 * 1024);
	char *p, *big;

	p = arena_strndup(a, "hello world", 5);
	CHECK_STR(p, "hello");
	CHECK((uintptr_t)arena_alloc(a, 3) % 16 == 0);
	big = arena_alloc(a, 200 * 1024);
	CHECK(big != NULL);
	/* over the arena's maximum */
	CHECK(arena_alloc(a, 200 * 1024) == NULL);
	CHECK(arena_calloc(a, SIZE_MAX / 2, 4) == NULL);
	arena_reset(a);
	CHECK_INT(arena_used(a), 0);
	CHECK(arena_alloc(a, 200 * 1024) != NULL);
	arena_free(a);
	arena_free(NULL);

	/* a reset keeps what arena_retain() allows, reuses it, and the maximum still holds */
	a = arena_open(256 * 1024);
	for (int i = 0; i < 4; i++)
		CHECK(arena_alloc(a, 60 * 1024) != NULL);
	CHECK(arena_alloc(a, 60 * 1024) == NULL);        /* a fifth block would pass 256 KiB */
	CHECK_INT(arena_reserved(a), 4 * 64 * 1024);
	arena_reset(a);                                  /* retains one block by default */
	CHECK_INT(arena_used(a), 0);
	CHECK_INT(arena_reserved(a), 64 * 1024);
	arena_retain(a, 3 * 64 * 1024);
	for (int i = 0; i < 4; i++)
		CHECK(arena_alloc(a, 60 * 1024) != NULL);
	arena_reset(a);
	CHECK_INT(arena_reserved(a), 3 * 64 * 1024);
	p = arena_alloc(a, 60 * 1024);                   /* from a kept block */
	CHECK(p != NULL);
	memset(p, 1, 60 * 1024);
	CHECK_INT(arena_reserved(a), 3 * 64 * 1024);
	CHECK_INT(arena_used(a), 60 * 1024);
	/* kept blocks do not count against the maximum */
	for (int i = 0; i < 3; i++)
		CHECK(arena_alloc(a, 60 * 1024) != NULL);
	CHECK(arena_alloc(a, 60 * 1024) == NULL);
	big = arena_alloc(a, 1);                         /* the tail of the last block */
	CHECK(big != NULL);
	arena_reset(a);
	CHECK(arena_alloc(a, 200 * 1024) != NULL);       /* a large block is not kept */
	arena_reset(a);
	CHECK_INT(arena_reserved(a), 3 * 64 * 1024);
	arena_release(a);
	CHECK_INT(arena_reserved(a), 64 * 1024);
	CHECK_INT(arena_used(a), 0);
	arena_free(a);
}

static void test_intern(void)
{
	struct intern *m = intern_open(3);
	bool added;
	size_t len;

	CHECK_INT(intern_put(m, "main", 4, &added), 0);
	CHECK(added);
	CHECK_INT(intern_put(m, "work", 4, &added), 1);
	CHECK_INT(intern_put(m, "main", 4, &added), 0);
	CHECK(!added);
	CHECK_INT(intern_put(m, "ma\0in", 5, NULL), 2);   /* keys are bytes, NUL included */
	CHECK_INT(intern_put(m, "full", 4, NULL), -1);    /* at max_keys */
	CHECK_INT(intern_find(m, "work", 4), 1);
	CHECK_INT(intern_find(m, "nope", 4), -1);
	CHECK_STR(intern_key(m, 1, &len), "work");
	CHECK_INT(len, 4);
	CHECK(intern_key(m, 9, NULL) == NULL);
	intern_clear(m);
	CHECK_INT(intern_count(m), 0);
	CHECK_INT(intern_find(m, "main", 4), -1);
	CHECK_INT(intern_put(m, "again", 5, NULL), 0);
	/* the _hashed forms are the plain ones given the hash */
	CHECK_INT(intern_find_hashed(m, "again", 5, intern_hash("again", 5)), 0);
	CHECK_INT(intern_put_hashed(m, "again", 5, intern_hash("again", 5), &added), 0);
	CHECK(!added);
	CHECK_INT(intern_put_hashed(m, "other", 5, intern_hash("other", 5), &added), 1);
	CHECK(added);
	CHECK_INT(intern_find(m, "other", 5), 1);
	intern_free(m);

	/* many keys: growth keeps every id */
	m = intern_open(0);
	for (int i = 0; i < 100000; i++) {
		char k[16];
		int n = snprintf(k, sizeof(k), "f%d", i);
		if (intern_put(m, k, (size_t)n, NULL) != i) {
			CHECK(!"dense ids");
			break;
		}
	}
	CHECK_INT(intern_find(m, "f77777", 6), 77777);
	CHECK_INT(intern_count(m), 100000);
	{
		/* intern_find_many() finds what intern_find() finds, across its groups of 16: present
		 * keys, absent ones (f100000 and up), an empty one, one a byte short of a present one */
		enum { N = 1003 };
		char (*k)[16] = malloc(N * sizeof(*k));
		const void *keys[N];
		size_t lens[N];
		int64_t ids[N];
		int same = 0;

		for (int i = 0; k && i < N; i++) {
			int j = i % 3 == 0 ? 100000 + i : i * 97;   /* a third absent */

			lens[i] = (size_t)snprintf(k[i], sizeof(k[i]), "f%d", j);
			if (i == 5)
				lens[i] = 0;
			if (i == 7)
				lens[i]--;   /* "f67" of "f679" */
			keys[i] = k[i];
		}
		if (k) {
			intern_find_many(m, keys, lens, N, ids);
			for (int i = 0; i < N; i++)
				same += ids[i] == intern_find(m, keys[i], lens[i]);
		}
		CHECK_INT(same, N);
		CHECK_INT(k ? ids[3] : 0, -1);
		CHECK_INT(k ? ids[7] : 0, 67);
		CHECK_INT(k ? ids[999] : 0, -1);
		CHECK_INT(k ? ids[1001] : 0, 1001 * 97);   /* the last group's, of 11 */
		intern_find_many(m, keys, lens, 0, ids);   /* none: nothing read */
		free(k);
	}
	intern_free(m);
	intern_free(NULL);
}

static void test_sha256(void)
{
	unsigned char h[SHA256_LEN];
	char hex[2 * SHA256_LEN + 1];
	char *million = malloc(1000000);

	sha256("", 0, h);
	util_hex(h, SHA256_LEN, hex);
	CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sha256("abc", 3, h);
	util_hex(h, SHA256_LEN, hex);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, h);
	util_hex(h, SHA256_LEN, hex);
	CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	memset(million, 'a', 1000000);
	sha256(million, 1000000, h);
	util_hex(h, SHA256_LEN, hex);
	CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(million);
	/* incremental in pieces of every size: the same digest */
	{
		unsigned char ref[SHA256_LEN], got[SHA256_LEN];
		static unsigned char data[300];
		int bad = 0;

		for (size_t k = 0; k < sizeof(data); k++)
			data[k] = (unsigned char)(k * 31);
		sha256(data, sizeof(data), ref);
		for (size_t piece = 1; piece <= 130; piece++) {
			struct sha256_ctx c;

			sha256_init(&c);
			for (size_t off = 0; off < sizeof(data); off += piece)
				sha256_update(&c, data + off, sizeof(data) - off < piece ? sizeof(data) - off : piece);
			sha256_final(&c, got);
			bad += memcmp(ref, got, sizeof(ref)) != 0;
		}
		CHECK_INT(bad, 0);
	}
	/* HMAC-SHA-256: RFC 4231 test cases 1, 2 and 6 (a key longer than a block) */
	{
		unsigned char key[131];

		memset(key, 0x0b, 20);
		hmac_sha256(key, 20, "Hi There", 8, h);
		util_hex(h, SHA256_LEN, hex);
		CHECK_STR(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
		hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, h);
		util_hex(h, SHA256_LEN, hex);
		CHECK_STR(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
		memset(key, 0xaa, sizeof(key));
		hmac_sha256(key, sizeof(key), "Test Using Larger Than Block-Size Key - Hash Key First", 54, h);
		util_hex(h, SHA256_LEN, hex);
		CHECK_STR(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
	}
}

/* util_fmt_*: the decimal form, the extremes' lengths exactly */
static void test_fmt_dec(void)
{
	char o[UTIL_DEC_MAX + 1];

	o[util_fmt_i64(o, 0)] = '\0';
	CHECK_STR(o, "0");
	o[util_fmt_i64(o, -7)] = '\0';
	CHECK_STR(o, "-7");
	CHECK_INT(util_fmt_i64(o, INT64_MIN), 20);
	o[20] = '\0';
	CHECK_STR(o, "-9223372036854775808");
	o[util_fmt_i64(o, INT64_MAX)] = '\0';
	CHECK_STR(o, "9223372036854775807");
	CHECK_INT(util_fmt_u64(o, UINT64_MAX), 20);
	o[20] = '\0';
	CHECK_STR(o, "18446744073709551615");
	o[util_fmt_u64(o, 1000)] = '\0';
	CHECK_STR(o, "1000");
	/* every length, odd and even, at and around each power of ten, as printf writes them */
	for (uint64_t p = 1, k = 0; k < 20; k++, p *= 10) {
		uint64_t vs[3] = { p - 1, p, p + 7 };

		for (int i = 0; i < 3; i++) {
			char want[UTIL_DEC_MAX + 2];

			snprintf(want, sizeof(want), "%llu", (unsigned long long)vs[i]);
			o[util_fmt_u64(o, vs[i])] = '\0';
			CHECK_STR(o, want);
			snprintf(want, sizeof(want), "%lld", -(long long)(vs[i] % (uint64_t)INT64_MAX));
			o[util_fmt_i64(o, -(int64_t)(vs[i] % (uint64_t)INT64_MAX))] = '\0';
			CHECK_STR(o, want);
		}
	}
}

/* the exact text every page and tool writes (web/static/app.js mirrors duration and share) */
static void test_fmt(void)
{
	char o[FMT_LEN];

	CHECK_STR(fmt_count(o, 0), "0");
	CHECK_STR(fmt_count(o, 999), "999");
	CHECK_STR(fmt_count(o, 50110), "50,110");
	CHECK_STR(fmt_count(o, 1234567), "1,234,567");
	CHECK_STR(fmt_count(o, -1234), "-1,234");
	CHECK_STR(fmt_count(o, INT64_MIN), "-9,223,372,036,854,775,808");
	CHECK_STR(fmt_count(o, INT64_MAX), "9,223,372,036,854,775,807");

	CHECK_STR(fmt_duration(o, 0), "0 ns");
	CHECK_STR(fmt_duration(o, 17), "17 ns");
	CHECK_STR(fmt_duration(o, 999.4), "999 ns");
	CHECK_STR(fmt_duration(o, 999.6), "1 \xc2\xb5s");
	CHECK_STR(fmt_duration(o, 5000), "5 \xc2\xb5s");
	CHECK_STR(fmt_duration(o, 850000), "850 \xc2\xb5s");
	CHECK_STR(fmt_duration(o, 123400000), "123 ms");
	CHECK_STR(fmt_duration(o, 999400000), "999 ms");
	CHECK_STR(fmt_duration(o, 999600000), "1 s");
	CHECK_STR(fmt_duration(o, 20080349), "20.1 ms");
	CHECK_STR(fmt_duration(o, 1500000), "1.5 ms");
	CHECK_STR(fmt_duration(o, 1234567), "1.23 ms");
	CHECK_STR(fmt_duration(o, 1e10), "10 s");
	CHECK_STR(fmt_duration(o, 36432000000.0), "36.4 s");
	CHECK_STR(fmt_duration(o, 999.4e9), "999 s");
	CHECK_STR(fmt_duration(o, 36432.4e9), "36,432 s");
	CHECK_STR(fmt_duration(o, 999.6e9), "1,000 s");
	CHECK_STR(fmt_duration(o, 45.04e6), "45 ms");
	CHECK_STR(fmt_duration(o, 2.984e6), "2.98 ms");
	CHECK_STR(fmt_duration(o, -460900000), "-461 ms");
	CHECK_STR(fmt_duration(o, NAN), "-");

	/* one unit, the larger end's: not "[-460.9 ms, 2.607 s]" */
	CHECK_STR(fmt_interval(o, -460.9e6, 2.607e9), "[-0.46 s, 2.61 s]");
	CHECK_STR(fmt_interval(o, 1.5e6, 250e6), "[1.5 ms, 250 ms]");
	CHECK_STR(fmt_interval(o, -1e3, 2e3), "[-1 \xc2\xb5s, 2 \xc2\xb5s]");
	CHECK_STR(fmt_interval(o, -1, 1e12), "[0 s, 1,000 s]");
	CHECK_STR(fmt_interval(o, 0, 0), "[0 ns, 0 ns]");

	CHECK_STR(fmt_share(o, 0), "0 %");
	CHECK_STR(fmt_share(o, 1), "100 %");
	CHECK_STR(fmt_share(o, 0.5), "50 %");
	CHECK_STR(fmt_share(o, 2.0 / 3), "66.7 %");
	CHECK_STR(fmt_share(o, 0.0001), "< 0.1 %");
	CHECK_STR(fmt_share(o, 0.99999), "> 99.9 %");
	CHECK_STR(fmt_share(o, 1e62), "1e+64 %");          /* no digits past the buffer */
	CHECK_STR(fmt_duration(o, 1e300), "1e+291 s");     /* past int64 seconds: not wrapped */

	CHECK_STR(fmt_bytes(o, 512), "512 B");
	CHECK_STR(fmt_bytes(o, 1536), "1.50 KiB");
	CHECK_STR(fmt_bytes(o, 4u << 20), "4.00 MiB");
	CHECK_STR(fmt_bytes(o, 300u << 20), "300 MiB");

	CHECK_STR(fmt_frame_short(o, sizeof(o), "checkout!http::Router::dispatch(http::Request&, http::Response&) const", 0),
		  "http::Router::dispatch");
	CHECK_STR(fmt_frame_short(o, sizeof(o), "redis-server+0x64e50", 0), "redis-server+0x64e50");
	CHECK_STR(fmt_frame_short(o, sizeof(o), "lib!", 0), "lib!");
	CHECK_STR(fmt_frame_short(o, sizeof(o), "m!\xc3\xa9\xc3\xa9\xc3\xa9", 3), "\xc3\xa9\xe2\x80\xa6");
	CHECK_STR(fmt_frame_short(o, 16, "m!abcdefghijklmnopqrstuvwxyz", 0), "abcdefghijkl\xe2\x80\xa6");
	CHECK_STR(fmt_label_value(o, "unit.threshold_ns", "20080349"), "20.1 ms");
	CHECK_STR(fmt_label_value(o, "unit.calls", "50110"), "50,110");
	CHECK_STR(fmt_label_value(o, "req.body_bytes", "1536"), "1.50 KiB");
	CHECK_STR(fmt_label_value(o, "retry_count", "12000"), "12,000");
	CHECK(fmt_label_value(o, "port", "8080") == NULL);          /* an id, as given */
	CHECK(fmt_label_value(o, "unit.threshold_ns", "fast") == NULL);
	CHECK(fmt_label_value(o, "version", "1000") == NULL);
}

static void test_util(void)
{
	int64_t v;
	uint64_t sz;
	double d;
	char id[37];

	/* a deadline ms from now: the nanoseconds carried into the seconds */
	for (int64_t ms = 0; ms <= 2500; ms += 250) {
		int64_t before = util_now_mono_ns(), at;
		struct timespec ts = util_clock_after(CLOCK_MONOTONIC, ms);

		at = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
		CHECK(at >= before + ms * 1000000 && at <= util_now_mono_ns() + ms * 1000000);
	}

	/* a process's start time: the 22nd field, whatever its command's name holds */
	CHECK(util_proc_start_time("4242 (a) b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
				   "6920398 1000 10\n") == 6920398);
	CHECK(util_proc_start_time("1 (sh) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77") == 77);
	CHECK(util_proc_start_time("1 (sh) S 1 1") == 0);
	CHECK(util_proc_start_time("no parenthesis") == 0);

	CHECK_INT(util_parse_i64("123", 0, 1000, &v), 0);
	CHECK_INT(v, 123);
	CHECK_INT(util_parse_i64("-5", -10, 10, &v), 0);
	CHECK_INT(v, -5);
	CHECK_INT(util_parse_i64("12x", 0, 1000, &v), -1);
	CHECK_INT(util_parse_i64("", 0, 1000, &v), -1);
	CHECK_INT(util_parse_i64(" 1", 0, 1000, &v), -1);
	CHECK_INT(util_parse_i64("1001", 0, 1000, &v), -1);
	CHECK_INT(util_parse_i64("99999999999999999999", 0, INT64_MAX, &v), -1);
	CHECK_INT(util_parse_size("16M", &sz), 0);
	CHECK_INT(sz, 16 << 20);
	CHECK_INT(util_parse_size("4k", &sz), 0);
	CHECK_INT(sz, 4096);
	CHECK_INT(util_parse_size("1T", &sz), -1);
	CHECK_INT(util_parse_double("0.25", &d), 0);
	CHECK(d == 0.25);
	CHECK_INT(util_parse_double("inf", &d), -1);

	CHECK(util_uuid_canon("5F0C6F0E-3D0B-4A53-9A43-6D1C2F0A9B11", 36, id));
	CHECK_STR(id, "5f0c6f0e-3d0b-4a53-9a43-6d1c2f0a9b11");
	CHECK(!util_uuid_canon("5f0c6f0e3d0b-4a53-9a43-6d1c2f0a9b11-", 36, id));
	CHECK(!util_uuid_canon("5f0c6f0e-3d0b-4a53-9a43-6d1c2f0a9b1g", 36, id));
	util_uuid_v4(id);
	CHECK(util_uuid_canon(id, 36, id));
	CHECK(id[14] == '4');

	CHECK(util_utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15));
	CHECK(!util_utf8_valid("\xc0\x80", 2));          /* overlong NUL */
	CHECK(!util_utf8_valid("\xed\xa0\x80", 3));      /* surrogate */
	CHECK(!util_utf8_valid("\xf4\x90\x80\x80", 4));  /* past U+10FFFF */
	CHECK(!util_utf8_valid("\xe2\x82", 2));          /* cut short */
	CHECK(util_ct_equal("abc", "abc", 3));
	CHECK(!util_ct_equal("abc", "abd", 3));
	CHECK(util_glob("*!fdatasync", "libc.so.6!fdatasync"));
	CHECK(util_glob("win32k.sys!*Lock*", "win32k.sys!EnterLockShared"));
	CHECK(!util_glob("*!fsync", "libc.so.6!fdatasync"));
}

static void test_auth_token(void)
{
	char a[AUTH_TOKEN_LEN + 1], b[AUTH_TOKEN_LEN + 1];

	CHECK_INT(auth_token_new(a), 0);
	CHECK_INT(auth_token_new(b), 0);
	CHECK_INT(strlen(a), AUTH_TOKEN_LEN);
	CHECK(strncmp(a, "sm_", 3) == 0);
	CHECK(strcmp(a, b) != 0);
	CHECK_INT(auth_role_parse("analyst"), AUTH_ANALYST);
	CHECK_INT(auth_role_parse("root"), AUTH_NONE);
	CHECK_STR(auth_role_name(AUTH_INGEST), "ingest");
}

/* A budget ends at its deadline or when its flag is raised; none (NULL, deadline 0) never. */
static void test_budget(void)
{
	atomic_int stop = 0;
	struct budget none = { 0, NULL }, later = { util_now_mono_ns() + (int64_t)60 * 1000000000, &stop },
		      past = { util_now_mono_ns() - 1, NULL };

	CHECK(!budget_over(NULL));
	CHECK(!budget_over(&none));
	CHECK_INT(budget_left_ms(&none), -1);
	CHECK(!budget_over(&later));
	CHECK(budget_left_ms(&later) > 59000 && budget_left_ms(&later) <= 60001);
	atomic_store(&stop, 2);
	CHECK(budget_over(&later));
	CHECK(budget_over(&past));
	CHECK_INT(budget_left_ms(&past), 0);
}

/* The frames' full count of an id cache, as /metrics says it. */
static int idcache_full_frames(struct idcache *c)
{
	struct buf b = BUF_INIT(0);
	const char *at;
	int n = -1;

	if (idcache_render(c, &b) == 0 && (at = strstr(buf_cstr(&b), "sm_ingest_idcache_full_total{kind=\"frame\"} ")))
		n = (int)strtol(at + strlen("sm_ingest_idcache_full_total{kind=\"frame\"} "), NULL, 10);
	buf_release(&b);
	return n;
}

static void test_idcache(void)
{
	struct idcache *c = idcache_open(2, 2);   /* two generations of 2 */
	const char *names[3] = { "a!f", "a!g", "a!h" };
	const char *gi[1] = { "a!i" };
	size_t lens[3] = { 3, 3, 3 }, nf, ns;
	int32_t ids[3];
	uint8_t tags[3];
	int32_t st1[2] = { 10, 11 }, st2[2] = { 11, 10 };
	uint64_t epoch = 99, g0, g1, g2, g3;

	CHECK_INT(idcache_get_frames(c, names, lens, 3, ids, tags), 0);
	g0 = idcache_stamp(c, &epoch);
	CHECK_INT(epoch, 0);
	idcache_put_frame(c, "a!f", 3, 10, 1, g0);
	idcache_put_frame(c, "a!g", 3, 11, 0, g0);
	CHECK_INT(idcache_get_frames(c, names, lens, 3, ids, tags), 2);
	CHECK_INT(ids[0], 10);
	CHECK_INT(ids[1], 11);
	CHECK_INT(ids[2], -1);
	/* each with the tag put with it, 0 when not found */
	CHECK_INT(tags[0], 1);
	CHECK_INT(tags[1], 0);
	CHECK_INT(tags[2], 0);
	CHECK_INT(idcache_full_frames(c), 0);
	/* the young generation full: the old one goes (empty yet: not counted), the young one becomes
	 * old, and the put starts a new young one */
	idcache_put_frame(c, "a!h", 3, 12, 7, g0);
	idcache_sizes(c, &nf, &ns);
	CHECK_INT(nf, 3);
	CHECK_INT(idcache_full_frames(c), 0);
	/* found in the old generation: moved to the young one, which it fills */
	CHECK_INT(idcache_get_frames(c, names + 1, lens + 1, 1, ids, tags), 1);
	CHECK_INT(ids[0], 11);
	CHECK_INT(idcache_full_frames(c), 0);
	idcache_sizes(c, &nf, &ns);
	CHECK_INT(nf, 4);
	/* the next put turns it over again: what was not used since (a!f) goes, what was stays */
	idcache_put_frame(c, gi[0], 3, 13, 0, g0);
	CHECK_INT(idcache_full_frames(c), 1);
	CHECK_INT(idcache_get_frames(c, names, lens, 3, ids, tags), 2);
	CHECK_INT(ids[0], -1);
	CHECK_INT(ids[1], 11);
	CHECK_INT(ids[2], 12);
	CHECK_INT(tags[0], 0);
	CHECK_INT(tags[2], 7);
	CHECK_INT(idcache_full_frames(c), 2);   /* moving a!g and a!h turned it over once more */
	CHECK_INT(idcache_get_frames(c, gi, lens, 1, ids, tags), 1);
	CHECK_INT(ids[0], 13);
	idcache_sizes(c, &nf, &ns);
	CHECK(nf <= 4);   /* two generations of 2 */
	/* a key put again where it is takes no room: the young generation (a!h, a!i) does not turn over */
	idcache_put_frame(c, gi[0], 3, 13, 0, g0);
	CHECK_INT(idcache_full_frames(c), 2);
	idcache_put_stack(c, st1, 2, 5, g0);
	CHECK_INT(idcache_get_stack(c, st1, 2), 5);
	CHECK_INT(idcache_get_stack(c, st2, 2), -1);   /* order matters */
	CHECK_INT(idcache_get_stack(c, st1, 1), -1);
	/* a collection starts a new epoch: the cache empties, ids mapped before are dropped */
	idcache_reset(c, 3);
	g1 = idcache_stamp(c, &epoch);
	CHECK_INT(epoch, 3);
	CHECK(g1 != g0);
	CHECK_INT(idcache_get_stack(c, st1, 2), -1);
	CHECK_INT(idcache_get_frames(c, names, lens, 3, ids, tags), 0);
	idcache_put_stack(c, st1, 2, 6, g0);
	idcache_put_frame(c, "a!f", 3, 20, 1, g0);
	CHECK_INT(idcache_get_stack(c, st1, 2), -1);
	CHECK_INT(idcache_get_frames(c, names, lens, 1, ids, tags), 0);
	idcache_put_stack(c, st1, 2, 7, g1);
	CHECK_INT(idcache_get_stack(c, st1, 2), 7);
	idcache_reset(c, 3);   /* of that epoch already: kept */
	CHECK_INT(idcache_get_stack(c, st1, 2), 7);
	CHECK_INT(idcache_stamp(c, &epoch), g1);
	/* a failover empties it at the same epoch: what was mapped from the old primary is dropped */
	idcache_clear(c);
	g2 = idcache_stamp(c, &epoch);
	CHECK_INT(epoch, 3);
	CHECK(g2 != g1);
	CHECK_INT(idcache_get_stack(c, st1, 2), -1);
	idcache_put_stack(c, st1, 2, 8, g1);
	CHECK_INT(idcache_get_stack(c, st1, 2), -1);
	idcache_put_stack(c, st1, 2, 9, g2);
	CHECK_INT(idcache_get_stack(c, st1, 2), 9);
	/* a warm-up whose stamp is still the cache's: moved to its snapshot's epoch, and puts at it */
	g3 = idcache_reset_from(c, g2, 4);
	CHECK(g3 != g2);
	CHECK_INT(idcache_stamp(c, &epoch), g3);
	CHECK_INT(epoch, 4);
	CHECK_INT(idcache_get_stack(c, st1, 2), -1);
	CHECK_INT(idcache_warm_stack(c, st1, 2, 10, g3), 0);
	/* a warm-up stops at half the young generation (here 1 of 2) */
	CHECK_INT(idcache_warm_stack(c, st2, 2, 11, g3), -1);
	CHECK_INT(idcache_get_stack(c, st2, 2), -1);
	CHECK_INT(idcache_get_stack(c, st1, 2), 10);
	CHECK_INT(idcache_reset_from(c, g3, 4), g3);   /* the same epoch: nothing emptied */
	CHECK_INT(idcache_get_stack(c, st1, 2), 10);
	/* one whose cache was emptied after its stamp: neither moves it back nor puts */
	{
		uint64_t stale = idcache_reset_from(c, g2, 3);

		CHECK_INT(idcache_stamp(c, &epoch), g3);
		CHECK_INT(epoch, 4);
		CHECK_INT(idcache_get_stack(c, st1, 2), 10);
		CHECK_INT(idcache_warm_frame(c, "a!g", 3, 30, 0, stale), 0);
		CHECK_INT(idcache_get_frames(c, names + 1, lens + 1, 1, ids, tags), 0);
	}
	idcache_free(c);
	idcache_free(NULL);
}

static bool hook_ok(const struct webhook_nets *w, const char *url)
{
	char err[256];

	return webhook_url_check(url, w, err, sizeof(err)) == 0;
}

static bool sa_ok(const struct webhook_nets *w, int family, const char *addr)
{
	struct sockaddr_in in = { .sin_family = AF_INET };
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };

	if (family == AF_INET) {
		inet_pton(AF_INET, addr, &in.sin_addr);
		return webhook_addr_ok(w, (struct sockaddr *)&in);
	}
	inet_pton(AF_INET6, addr, &in6.sin6_addr);
	return webhook_addr_ok(w, (struct sockaddr *)&in6);
}

static void test_webhook(void)
{
	struct webhook_nets none = { 0 }, lo = { 0 };
	char err[256];

	/* refused by default: loopback, link-local (the metadata service), private, unspecified, IPv6 alike */
	CHECK(!hook_ok(&none, "http://127.0.0.1:5432/"));
	CHECK(!hook_ok(&none, "http://169.254.169.254/latest/meta-data/"));
	CHECK(!hook_ok(&none, "https://10.1.2.3/hook"));
	CHECK(!hook_ok(&none, "http://172.16.0.1/"));
	CHECK(!hook_ok(&none, "http://192.168.1.1/"));
	CHECK(!hook_ok(&none, "http://0.0.0.0:80/"));
	CHECK(!hook_ok(&none, "http://[::1]:8080/"));
	CHECK(!hook_ok(&none, "http://[fe80::1]/"));
	CHECK(!hook_ok(&none, "http://[fd00::5]/"));
	CHECK(!hook_ok(&none, "http://[::ffff:127.0.0.1]/"));
	/* the other spellings of an address a URL parser takes, names for loopback, credentials before the host */
	CHECK(!hook_ok(&none, "http://127.1/"));
	CHECK(!hook_ok(&none, "http://2130706433/"));
	CHECK(!hook_ok(&none, "http://0x7f000001/"));
	CHECK(!hook_ok(&none, "http://localhost:9000/"));
	CHECK(!hook_ok(&none, "http://LOCALHOST./"));
	CHECK(!hook_ok(&none, "http://db.localhost/"));
	CHECK(!hook_ok(&none, "http://user:pa@ss@127.0.0.1/"));
	CHECK(!hook_ok(&none, "http://example.com@127.0.0.1/"));
	/* allowed: public addresses, names (checked again when delivering), credentials */
	CHECK(hook_ok(&none, "https://hooks.example.com/x?token=1"));
	CHECK(hook_ok(&none, "https://user:pass@93.184.216.34:8443/x"));
	CHECK(hook_ok(&none, "http://[2001:db8::1]/"));
	CHECK(hook_ok(&none, "http://127.0.0.1.example.com/"));
	/* not URLs of a host */
	CHECK_INT(webhook_url_check("ftp://x/", &none, err, sizeof(err)), -1);
	CHECK_STR(err, "webhook: required, an http:// or https:// URL of at most 2048 bytes");
	CHECK_INT(webhook_url_check("http:///x", &none, err, sizeof(err)), -1);
	CHECK_STR(err, "webhook: the URL has no host");
	CHECK_INT(webhook_url_check("http://10.0.0.1/", &none, err, sizeof(err)), -1);
	CHECK(strncmp(err, "webhook: a loopback, link-local, private", 40) == 0);
	/* the allow list */
	CHECK_INT(webhook_nets_add(&lo, "127.0.0.0/8, ::1", err, sizeof(err)), 0);
	CHECK_INT(lo.n, 2);
	CHECK(hook_ok(&lo, "http://127.0.0.1:8080/hook"));
	CHECK(hook_ok(&lo, "http://localhost:8080/hook"));
	CHECK(hook_ok(&lo, "http://[::1]/"));
	CHECK(!hook_ok(&lo, "http://169.254.169.254/"));
	CHECK_INT(webhook_nets_add(&lo, "10.0.0.0/33", err, sizeof(err)), -1);
	CHECK_INT(webhook_nets_add(&lo, "nonsense", err, sizeof(err)), -1);
	CHECK_INT(webhook_nets_add(&lo, "10.0.0.0/", err, sizeof(err)), -1);
	CHECK_INT(lo.n, 2);
	/* at delivery: each address connected to */
	CHECK(!sa_ok(&none, AF_INET, "127.0.0.1"));
	CHECK(!sa_ok(&none, AF_INET, "169.254.169.254"));
	CHECK(!sa_ok(&none, AF_INET, "100.64.0.1"));
	CHECK(!sa_ok(&none, AF_INET6, "::ffff:10.0.0.1"));
	CHECK(!sa_ok(&none, AF_INET6, "::1"));
	CHECK(sa_ok(&none, AF_INET, "93.184.216.34"));
	CHECK(sa_ok(&none, AF_INET6, "2001:db8::1"));
	CHECK(sa_ok(&lo, AF_INET, "127.0.0.1"));
	CHECK(sa_ok(&lo, AF_INET6, "::ffff:127.0.0.1"));
	CHECK(!sa_ok(&lo, AF_INET, "10.0.0.1"));
	CHECK(!sa_ok(NULL, AF_INET, "127.0.0.1"));
}

/* Strings are scanned eight bytes at a time: a byte that ends the plain run is seen at every
 * offset in and across the words, by the check and by the readers. */
static void test_json_strings(void)
{
	struct arena *a = arena_open(0);
	char text[64], err[256], want[64];

	for (int k = 0; k < 24; k++) {
		struct json_reader r;
		const char *got;
		size_t len;

		/* a control character and an invalid UTF-8 byte: refused where they are, in the first
		 * sixteen bytes scanned at once, the next sixteen or the tail read one by one */
		for (int bad = 0; bad < 2; bad++)
			for (int at = k; at < 46; at += 23) {
				memset(text, 'a', 48);
				text[0] = text[47] = '"';
				text[1 + at] = bad ? (char)0xff : (char)0x01;
				snprintf(want, sizeof(want), "at byte %d", 1 + at);
				CHECK_INT(json_check(text, 48, 8, err, sizeof(err)), -1);
				CHECK(strstr(err, want) != NULL);
				CHECK(strstr(err, bad ? "invalid UTF-8" : "in a string") != NULL);
				/* DEL is a plain byte */
				text[1 + at] = 0x7f;
				CHECK_INT(json_check(text, 48, 8, err, sizeof(err)), 0);
			}
		/* an escaped quote and a two-byte character: read whole */
		snprintf(text, sizeof(text), "\"%.*s\\\"%.*s\"", k, "bbbbbbbbbbbbbbbbbbbbbbbbbbbb", 23 - k,
			 "cccccccccccccccccccccccccccc");
		CHECK_INT(json_check(text, strlen(text), 8, err, sizeof(err)), 0);
		json_reader_init(&r, text, strlen(text));
		got = json_string(&r, a, &len);
		snprintf(want, sizeof(want), "%.*s\"%.*s", k, "bbbbbbbbbbbbbbbbbbbbbbbbbbbb", 23 - k,
			 "cccccccccccccccccccccccccccc");
		CHECK_STR(got, want);
		CHECK_INT(len, 24);
		snprintf(text, sizeof(text), "[\"%.*s\xc3\xa9%.*s\",1]", k, "dddddddddddddddddddddddddddd", 23 - k,
			 "eeeeeeeeeeeeeeeeeeeeeeeeeeee");
		CHECK_INT(json_check(text, strlen(text), 8, err, sizeof(err)), 0);
		json_reader_init(&r, text, strlen(text));
		json_enter(&r);
		CHECK(json_next_item(&r));
		json_skip(&r);                      /* past the string, to the next item */
		CHECK(json_next_item(&r));
		CHECK(json_peek(&r) == JV_NUMBER);
		json_reader_init(&r, text + 1, strlen(text) - 1);
		got = json_string(&r, a, &len);
		CHECK_INT(len, 25);
		CHECK(got && memcmp(got + k, "\xc3\xa9", 2) == 0);
	}
	arena_free(a);
}

/* text without its "at byte N" parts: where a message's byte is counted from differs below */
static void strip_bytes(char *m)
{
	char *at;

	while ((at = strstr(m, "at byte "))) {
		char *e = at + 8;

		while (*e >= '0' && *e <= '9')
			e++;
		memmove(at, e, strlen(e) + 1);
	}
}

static size_t xorshift_below(uint64_t *s, size_t n)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (size_t)(*s % n);
}

/* The spans of one text and of another (the same strings, elsewhere): the same strings. */
static bool same_spans(const struct vec *a, const struct vec *b)
{
	if (a->len != b->len)
		return false;
	for (size_t i = 0; i < a->len; i++) {
		const struct json_span *x = (const struct json_span *)a->data + i, *y = (const struct json_span *)b->data + i;

		if (x->len != y->len || x->escaped != y->escaped || memcmp(x->at, y->at, x->len + 2) != 0)
			return false;
	}
	return true;
}

/* Objects inside containers and runs of strings in arrays, written compactly, are checked in one
 * loop (flat_object() and string_run() in json.c): whatever they hold, the check decides, says and
 * notes the same as for the same text with a space after each '{' and ',', which the general loop
 * reads. Generated from tokens near the edges of the grammar. */
static void test_json_flat_objects(void)
{
	static const char *const vals[] = {
		"0", "-0", "7", "-12", "01", "-01", "1.5", "1.", "-", "1e5", "1E+5", "1e", "1e+", ".5",
		"12345678", "123456789012345678901234", "12345678.25e-3", "1234567a", "\"ab\"", "\"\"",
		"\"a\\\"b\"", "\"\xc3\xa9\"", "\"\xc3\"", "\"\x01\"", "\"\\u0000\"", "\"\\ud800\"", "true", "false",
		"null", "tru", "nul", "fals", "{}", "[]", "[1,2]", "{\"x\":1}", " 1", "\"open",
	};
	/* the values of vals a flat object holds */
	static const int ok_vals[] = { 0, 1, 2, 3, 6, 9, 10, 14, 15, 16, 18, 19, 26, 27, 28 };
	static const char *const strs[] = { "\"a!f\"", "\"\"", "\"libc.so.6!clone\"", "\"x\"" };
	static const char *const keys[] = { "\"a\"", "\"kind\"", "\"\"", "\"k\\u0041\"", "\"\xc3\xa9\"", "a", "\"a" };
	static const struct json_limits lim = { 8, 1, 0 };
	/* the same with budgets that bind (both texts padded to one length, so that both have the
	 * same budget) and room for three spans */
	static const struct json_limits binding = { 8, 48, 192 };
	char text[8192], spaced[8192], e1[512], e2[512];
	uint64_t seed = 88172645463325252ULL;
	int accepted = 0, refused = 0, noted = 0, over_budget = 0;
	struct vec sp1 = VEC_INIT(struct json_span), sp2 = VEC_INIT(struct json_span);
	struct json_members top1, top2;

#define NEXT(n) xorshift_below(&seed, n)
	for (int t = 0; t < 30000; t++) {
		size_t n = 0, m = 0;
		/* [objects], {"events":[objects]}, {"frames":[values]}; one in four long enough for the
		 * budgets, and odd tokens rare in it (rare: how much rarer) */
		int form = (int)NEXT(3), nitems = t % 4 ? 1 + (int)NEXT(6) : 40 + (int)NEXT(60), rare = t % 4 ? 1 : 50;

		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s", form == 0 ? "[" : form == 1 ? "{\"events\":[" : "{\"frames\":[");
		for (int o = 0; o < nitems; o++) {
			int nmem = (int)NEXT(5);
			const char *sep = o ? (NEXT(20 * rare) ? "," : NEXT(2) ? ",," : "") : "";

			if (form == 2) {
				/* mostly plain strings, some of anything */
				const char *v = NEXT(3 * rare) ? strs[NEXT(sizeof(strs) / sizeof(strs[0]))]
							       : vals[NEXT(sizeof(vals) / sizeof(vals[0]))];

				n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s", sep, v);
				continue;
			}
			n += (size_t)snprintf(text + n, sizeof(text) - n, "%s{", sep);
			for (int k = 0; k < nmem; k++) {
				bool odd = NEXT(8 * rare) == 0;   /* an odd key or separator */
				const char *msep = k ? (odd && NEXT(2) ? ",," : ",") : "";
				const char *key = odd ? keys[NEXT(sizeof(keys) / sizeof(keys[0]))] : "\"k\"";
				const char *colon = odd && NEXT(2) ? "" : ":";
				/* mostly the first 19 values (and in long texts the good ones of them) */
				size_t v = rare > 1 ? (NEXT(4 * rare) ? (size_t)ok_vals[NEXT(sizeof(ok_vals) / sizeof(ok_vals[0]))]
								       : NEXT(sizeof(vals) / sizeof(vals[0])))
						    : NEXT(4) ? NEXT(19) : NEXT(sizeof(vals) / sizeof(vals[0]));

				n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s%s%s", msep, key, colon, vals[v]);
			}
			n += (size_t)snprintf(text + n, sizeof(text) - n, "%s", NEXT(30 * rare) ? "}" : "]");
		}
		n += (size_t)snprintf(text + n, sizeof(text) - n, form == 0 ? "]" : "]}");
		/* the same with a space after each '{' and ',' outside strings (as a scanner reads them) */
		for (size_t i = 0, in_str = 0; i < n; i++) {
			spaced[m++] = text[i];
			if (in_str && text[i] == '\\' && i + 1 < n)
				spaced[m++] = text[++i];
			else if (text[i] == '"')
				in_str = !in_str;
			else if (!in_str && (text[i] == '{' || text[i] == ','))
				spaced[m++] = ' ';
		}
		{
			int r1 = json_check_members_spans(text, n, &lim, &top1, "frames", &sp1, 100, e1, sizeof(e1));
			int r2 = json_check_members_spans(spaced, m, &lim, &top2, "frames", &sp2, 100, e2, sizeof(e2));

			if (r1 != r2 || (r1 && (strip_bytes(e1), strip_bytes(e2), strcmp(e1, e2) != 0)) ||
			    (!r1 && (!same_spans(&sp1, &sp2) || top1.n != top2.n))) {
				fprintf(stderr, "  text %.*s: %d %s / %d %s, spans %zu / %zu\n", (int)n, text, r1, r1 ? e1 : "",
					r2, r2 ? e2 : "", sp1.len, sp2.len);
				CHECK_INT(r1, r2);
				CHECK_STR(e1, e2);
				CHECK(same_spans(&sp1, &sp2));
				break;
			}
			CHECK_INT(json_check_body(text, n, &lim, e1, sizeof(e1)), r1);
			CHECK_INT(json_check(text, n, 8, e1, sizeof(e1)), json_check(spaced, m, 8, e2, sizeof(e2)));
			r1 ? refused++ : accepted++;
			noted += !r1 && sp1.len > 1;

			/* both padded to one length; 48 spaces at least, so that a key left open runs into
			 * padding past the 40 bytes a message's path shows of it */
			memset(text + n, ' ', m + 48 - n);
			memset(spaced + m, ' ', 48);
			r1 = json_check_members_spans(text, m + 48, &binding, &top1, "frames", &sp1, 3, e1, sizeof(e1));
			r2 = json_check_members_spans(spaced, m + 48, &binding, &top2, "frames", &sp2, 3, e2, sizeof(e2));
			if (r1 != r2 || (r1 && (strip_bytes(e1), strip_bytes(e2), strcmp(e1, e2) != 0)) ||
			    (!r1 && (!same_spans(&sp1, &sp2) || top1.n != top2.n))) {
				fprintf(stderr, "  text %.*s, budgets that bind: %d %s / %d %s, spans %zu / %zu\n", (int)n,
					text, r1, r1 ? e1 : "", r2, r2 ? e2 : "", sp1.len, sp2.len);
				CHECK_INT(r1, r2);
				CHECK_STR(e1, e2);
				CHECK(same_spans(&sp1, &sp2));
				break;
			}
			over_budget += r1 && strncmp(e1, "body: more than", 15) == 0;
		}
	}
#undef NEXT
	vec_free(&sp1);
	vec_free(&sp2);
	/* each kind is common, or the generator tests little */
	CHECK(accepted > 3000);
	CHECK(refused > 3000);
	CHECK(noted > 1000);
	CHECK(over_budget > 1000);

	/* the budgets, to the value: thirty objects of two members hold 91 values, in 64 plus one per
	 * 300 bytes (the text padded after its end) */
	{
		static const struct json_limits vlim = { 8, 300, 0 };
		size_t n = 0;

		spaced[n++] = '[';
		for (int o = 0; o < 30; o++)
			n += (size_t)snprintf(spaced + n, sizeof(spaced) - n, "%s{\"a\":1,\"b\":\"x\"}", o ? "," : "");
		spaced[n++] = ']';
		memset(spaced + n, ' ', sizeof(spaced) - n);
		CHECK_INT(json_check_body(spaced, 27 * 300, &vlim, e1, sizeof(e1)), 0);
		CHECK_INT(json_check_body(spaced, 27 * 300 - 1, &vlim, e1, sizeof(e1)), -1);
		CHECK(strncmp(e1, "body: more than 90 values in 8099 bytes", 39) == 0);
		{
			static const struct json_limits tight = { 8, 0, 4096 };
			char big[4096 * 4];

			/* 64 + 16384 / 4096 = 68 containers allowed, 1 + 67 written, then 1 + 68 */
			for (int extra = 0; extra < 2; extra++) {
				size_t k = 0;

				big[k++] = '[';
				for (int o = 0; o < 67 + extra; o++)
					k += (size_t)snprintf(big + k, sizeof(big) - k, "%s{\"a\":1}", o ? "," : "");
				big[k++] = ']';
				memset(big + k, ' ', sizeof(big) - k);
				CHECK_INT(json_check_body(big, sizeof(big), &tight, e1, sizeof(e1)), extra ? -1 : 0);
				if (extra)
					CHECK(strncmp(e1, "body: more than 68 objects and arrays", 37) == 0);
			}
		}
	}
	/* depth: a flat object at the deepest level allowed, then one level deeper */
	{
		static const struct json_limits dlim = { 3, 1, 0 };

		CHECK_INT(json_check_body("[[{\"a\":1}]]", 11, &dlim, e1, sizeof(e1)), 0);
		CHECK_INT(json_check_body("[[[{\"a\":1}]]]", 13, &dlim, e1, sizeof(e1)), -1);
		CHECK_STR(e1, "[0][0][0]: nested deeper than 3 levels at byte 3");
	}
}

/* json_check_body() and the readers by position (common/json.h) */
static void test_json_body(void)
{
	static const struct json_limits lim = { 8, 4, 0 };
	char err[512];
	struct json_val f[4];
	static const char *const names[] = { "a", "b", "c", NULL };
	struct arena *a = arena_open(0);
	struct buf bomb = BUF_INIT(1 << 24);
	const char *t;
	size_t n;
	int64_t i;
	double d;

#define BODY(s) json_check_body(s, strlen(s), &lim, err, sizeof(err))
	CHECK_INT(BODY("{\"a\": [1, \"x\", {\"b\": null}], \"c\": -0}"), 0);
	/* NUL in a string and in a key, named by the path */
	CHECK_INT(BODY("{\"a\": [1, {\"b\": \"x\\u0000\"}]}"), -1);
	CHECK(strncmp(err, "a[1].b: ", 8) == 0 && strstr(err, "NUL"));
	CHECK_INT(BODY("{\"a\": {\"k\\u0000\": 1}}"), -1);
	CHECK(strncmp(err, "a.k\\u0000: ", 11) == 0 && strstr(err, "NUL"));
	/* lone surrogates, high and low */
	CHECK_INT(BODY("{\"a\": \"\\ud800\"}"), -1);
	CHECK(strncmp(err, "a: ", 3) == 0 && strstr(err, "lone high surrogate"));
	CHECK_INT(BODY("[\"\\udc00x\"]"), -1);
	CHECK(strncmp(err, "[0]: ", 5) == 0 && strstr(err, "lone low surrogate"));
	/* a pair and a bidi control are text like any other */
	CHECK_INT(BODY("[\"\\ud83d\\ude00\", \"\\u202e\", \"\xe2\x80\xae\"]"), 0);
	/* depth */
	CHECK_INT(BODY("[[[[[[[[1]]]]]]]]"), 0);
	CHECK_INT(BODY("[[[[[[[[[1]]]]]]]]]"), -1);
	CHECK(strstr(err, "nested deeper than 8") != NULL);
	/* the budget: a node bomb is refused whole, with the reason */
	buf_putc(&bomb, '[');
	for (int k = 0; k < 100000; k++)
		buf_puts(&bomb, k ? ",{}" : "{}");
	buf_putc(&bomb, ']');
	CHECK_INT(json_check_body(bomb.data, bomb.len, &lim, err, sizeof(err)), -1);
	CHECK(strncmp(err, "body: more than 75064 values in 300001 bytes", 44) == 0);
	{
		static const struct json_limits clim = { 8, 2, 16 };
		CHECK_INT(json_check_body(bomb.data, bomb.len, &clim, err, sizeof(err)), -1);
		CHECK(strstr(err, "objects and arrays") != NULL);
	}
	/* json_check() keeps its old meaning: no budget, NUL allowed */
	CHECK_INT(json_check(bomb.data, bomb.len, 8, err, sizeof(err)), 0);
	CHECK_INT(json_check("\"\\u0000\"", 8, 8, err, sizeof(err)), 0);

	/* fields: found by name, duplicates and (closed) unknown names refused */
	t = "{\"c\": 1e400, \"x\": {\"a\": 1}, \"a\": \" s\\n\", \"b\": [1, 2, {}]}";
	CHECK_INT(BODY(t), 0);
	CHECK_INT(json_fields(json_root(t, strlen(t)), "", names, false, f, err, sizeof(err)), 0);
	CHECK_INT(json_val_type(f[0]), JV_STRING);
	CHECK_STR(json_val_str(f[0], a, &n), " s\n");
	CHECK_INT(json_count(f[1]), 3);
	CHECK_INT(json_val_num(f[2], &d), -1); /* 1e400 is not finite */
	CHECK_INT(json_fields(json_root(t, strlen(t)), "p", names, true, f, err, sizeof(err)), -1);
	CHECK_STR(err, "p.x: unknown field");
	t = "{\"a\": 1, \"b\": 2, \"a\": 3}";
	CHECK_INT(json_fields(json_root(t, strlen(t)), "", names, false, f, err, sizeof(err)), -1);
	CHECK_STR(err, "a: duplicate key");
	/* the members the check notes: the same answers as json_fields(), without a second pass */
	{
		struct json_members top;
		struct json_val g[4];

		t = "{\"c\": 1e400, \"x\": {\"a\": 1}, \"a\": \" s\\n\", \"b\": [1, 2, {}]}";
		CHECK_INT(json_check_members(t, strlen(t), &lim, &top, err, sizeof(err)), 0);
		CHECK_INT(top.n, 4);
		CHECK_INT(json_members_fields(&top, "", names, false, g, err, sizeof(err)), 0);
		CHECK_INT(json_fields(json_root(t, strlen(t)), "", names, false, f, err, sizeof(err)), 0);
		for (int k = 0; k < 3; k++)
			CHECK(g[k].p == f[k].p && g[k].end == f[k].end);
		CHECK_STR(json_val_str(g[0], a, &n), " s\n");
		CHECK_INT(json_members_fields(&top, "p", names, true, g, err, sizeof(err)), -1);
		CHECK_STR(err, "p.x: unknown field");
		t = "{\"a\": 1, \"b\": 2, \"a\": 3}";
		CHECK_INT(json_check_members(t, strlen(t), &lim, &top, err, sizeof(err)), 0);
		CHECK_INT(json_members_fields(&top, "", names, false, g, err, sizeof(err)), -1);
		CHECK_STR(err, "a: duplicate key");
		/* a key past 63 bytes matches no name, as in json_fields() */
		t = "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": 1, \"b\": 2}";
		CHECK_INT(json_check_members(t, strlen(t), &lim, &top, err, sizeof(err)), 0);
		CHECK_INT(json_members_fields(&top, "", names, false, g, err, sizeof(err)), 0);
		CHECK(g[0].p == NULL && g[1].p && *g[1].p == '2');
		CHECK_INT(json_fields(json_root(t, strlen(t)), "", names, false, f, err, sizeof(err)), 0);
		CHECK(f[0].p == NULL && f[1].p == g[1].p);
		/* nested objects' members are not the top's; an array has none */
		t = "{\"x\": {\"a\": 1, \"b\": {\"c\": 2}}}";
		CHECK_INT(json_check_members(t, strlen(t), &lim, &top, err, sizeof(err)), 0);
		CHECK_INT(top.n, 1);
		CHECK_INT(json_check_members("[{\"a\": 1}]", 10, &lim, &top, err, sizeof(err)), 0);
		CHECK_INT(top.n, 0);
		/* more members than it keeps: counted, and the caller is told to read them itself */
		buf_reset(&bomb);
		buf_putc(&bomb, '{');
		for (int k = 0; k < JSON_MEMBERS_KEPT + 3; k++)
			buf_printf(&bomb, "%s\"k%d\": %d", k ? ", " : "", k, k);
		buf_puts(&bomb, "}");
		CHECK_INT(json_check_members(bomb.data, bomb.len, &lim, &top, err, sizeof(err)), 0);
		CHECK_INT(top.n, JSON_MEMBERS_KEPT + 3);
		CHECK_INT(json_members_fields(&top, "", names, false, g, err, sizeof(err)), -2);
		/* text that fails the check says why, as json_check_body() does */
		t = "{\"a\": 1, \"b\": [1, }";
		CHECK_INT(json_check_members(t, strlen(t), &lim, &top, err, sizeof(err)), -1);
		CHECK_STR(err, "b[1]: unexpected '}' where a value belongs at byte 18");
	}
	/* the strings of one member's array, noted by the check: where each is, its length as
	 * written, whether it holds an escape; nothing of other members or deeper levels */
	{
		struct json_members top;
		struct vec spans = VEC_INIT(struct json_span);
		const struct json_span *sp;

		t = "{\"f\": {\"k\": \"no\"}, \"frames\": [\"a!b\", 7, \"c\\\"d\", [\"no\"], \"\", \"\\u00e9\"],"
		    " \"x\": [\"no\"]}";
		CHECK_INT(json_check_members_spans(t, strlen(t), &lim, &top, "frames", &spans, 100, err, sizeof(err)), 0);
		CHECK_INT(top.n, 3);
		CHECK_INT(spans.len, 4);
		sp = spans.data;
		CHECK(sp[0].at == strstr(t, "\"a!b\"") && sp[0].len == 3 && !sp[0].escaped);
		CHECK(sp[1].at == strstr(t, "\"c\\") && sp[1].len == 4 && sp[1].escaped);
		CHECK(sp[2].at == strstr(t, "\"\", ") && sp[2].len == 0 && !sp[2].escaped);
		CHECK(sp[3].at == strstr(t, "\"\\u00e9") && sp[3].len == 6 && sp[3].escaped);
		/* at most max_spans; a second such member's strings replace the first's */
		CHECK_INT(json_check_members_spans(t, strlen(t), &lim, &top, "frames", &spans, 2, err, sizeof(err)), 0);
		CHECK_INT(spans.len, 2);
		t = "{\"frames\": [\"a\"], \"frames\": [\"b\", \"c\"]}";
		CHECK_INT(json_check_members_spans(t, strlen(t), &lim, &top, "frames", &spans, 100, err, sizeof(err)), 0);
		CHECK(spans.len == 2 && ((const struct json_span *)spans.data)[0].at == strstr(t, "\"b\""));
		/* not an array, or no such member, or nested deeper: none */
		t = "{\"frames\": {\"a\": \"b\"}, \"y\": [{\"frames\": [\"c\"]}]}";
		CHECK_INT(json_check_members_spans(t, strlen(t), &lim, &top, "frames", &spans, 100, err, sizeof(err)), 0);
		CHECK_INT(spans.len, 0);
		/* a text that fails the check fails as without spans */
		t = "{\"frames\": [\"a\", \"b\\u0000\"]}";
		CHECK_INT(json_check_members_spans(t, strlen(t), &lim, &top, "frames", &spans, 100, err, sizeof(err)), -1);
		CHECK(strncmp(err, "frames[1]: ", 11) == 0 && strstr(err, "NUL"));
		vec_free(&spans);
	}
	/* runs of compact integers, checked in one loop, fail and count as one at a time */
	CHECK_INT(BODY("{\"s\": [[0,1,22,333],[4,5]]}"), 0);
	CHECK_INT(BODY("{\"s\": [[0,1,22,01]]}"), -1);
	CHECK_STR(err, "s[0][3]: unexpected '1' in an array at byte 16");
	CHECK_INT(BODY("{\"s\": [[0,1,22,x]]}"), -1);
	CHECK_STR(err, "s[0][3]: unexpected 'x' where a value belongs at byte 15");
	CHECK_INT(BODY("{\"s\": [[0,1,2.5,-3,4e1,5 ,6],7]}"), 0);
	CHECK_INT(BODY("{\"s\": [[0,1,2.,3]]}"), -1);
	CHECK_STR(err, "s[0][2]: unexpected ',' in a number at byte 14");
	{
		/* the value budget: 64 + len / 4 values; a run stops at it, and the next value is over */
		static const struct json_limits tight = { 8, 4, 0 };

		buf_reset(&bomb);
		buf_puts(&bomb, "[1");
		for (int k = 0; k < 200; k++)
			buf_puts(&bomb, ",1");
		buf_puts(&bomb, "]");
		CHECK_INT(json_check_body(bomb.data, bomb.len, &tight, err, sizeof(err)), -1);
		CHECK_STR(err, "body: more than 164 values in 403 bytes, over the budget of 64 plus one per 4 bytes "
			       "(at byte 327)");
	}
	/* numbers at the limits */
	t = "[9223372036854775807, 9223372036854775808, -1, -0, 1.5, 2.5e3 ]";
	{
		struct json_reader r;
		int want[] = { 0, 2, 0, 0, 1, 1 };
		int64_t vals[] = { INT64_MAX, 0, -1, 0, 0, 0 };
		int k = 0;

		json_reader_init(&r, t, strlen(t));
		json_enter(&r);
		while (json_next_item(&r) && k < 6) {
			struct json_val v = json_here(&r);

			CHECK_INT(json_val_int(v, &i), want[k]);
			if (want[k] == 0)
				CHECK_INT(i, vals[k]);
			json_skip(&r);
			if (k == 5) {
				CHECK_INT(json_val_num(v, &d), 0);
				CHECK(d == 2500);
			}
			k++;
		}
		CHECK_INT(k, 6);
	}
	/* the text of a value, as written */
	t = "{\"p\": {\"x\" : [1, 2]} }";
	CHECK_INT(json_fields(json_root(t, strlen(t)), "", (const char *const[]){ "p", NULL }, true, f, err,
			      sizeof(err)), 0);
	n = json_val_text(f[0], &t);
	CHECK_INT(n, 14);
	CHECK(memcmp(t, "{\"x\" : [1, 2]}", n) == 0);
#undef BODY
	buf_release(&bomb);
	arena_free(a);
}

static char captured[4096];

static void capture(const char *line, size_t len)
{
	snprintf(captured, sizeof(captured), "%.*s", (int)len, line);
}

/* Every value escaped: nothing from outside ends a line, forges a key or hides text. */
static void test_log(void)
{
	char v[64], big[3000];
	const char *p;

	CHECK_INT(log_value(v, sizeof(v), "plain/1.2:x", 11), 11);
	CHECK_STR(v, "plain/1.2:x");
	log_value(v, sizeof(v), "", 0);
	CHECK_STR(v, "\"\"");
	log_value(v, sizeof(v), "a b=c", 5);
	CHECK_STR(v, "\"a b=c\"");
	log_value(v, sizeof(v), "x\" level=error\r\n", 16);
	CHECK_STR(v, "\"x\\\" level=error\\r\\n\"");
	log_value(v, sizeof(v), "\t\x01\x1f\x7f\\", 5);
	CHECK_STR(v, "\"\\t\\x01\\x1f\\x7f\\\\\"");
	/* bidirectional controls, C1 controls and line separators visible; invalid UTF-8 as bytes */
	log_value(v, sizeof(v), "a\xe2\x80\xae" "b\xe2\x81\xa6\xc2\x85\xe2\x80\xa8\xd8\x9c", 15);
	CHECK_STR(v, "\"a\\u202eb\\u2066\\u0085\\u2028\\u061c\"");
	log_value(v, sizeof(v), "\xff\xc3(", 3);
	CHECK_STR(v, "\"\\xff\\xc3(\"");
	log_value(v, sizeof(v), "\xc3\xa9t\xc3\xa9", 5);
	CHECK_STR(v, "\"\xc3\xa9t\xc3\xa9\"");
	/* cut on a character, never inside an escape */
	CHECK_INT(log_value(v, 12, "abcdefghijklmnop", 16), 11);
	CHECK_STR(v, "\"abcdef...\"");
	log_value(v, 12, "abcd\xe2\x80\xae", 7);
	CHECK_STR(v, "\"abcd...\"");

	log_init("test", LOG_DEBUG);
	log_set_sink(capture);
	log_msg(LOG_WARN, "run \"taken\"\n", "run=%d app=%s path=\"%s\" n=%zu", 7,
		"x\" level=error msg=\"forged\r\nlevel=error", "/a\"b\n", (size_t)3);
	p = strstr(captured, " level=");
	CHECK_STR(p, " level=warn comp=test msg=\"run \\\"taken\\\"\\n\" run=7"
		     " app=\"x\\\" level=error msg=\\\"forged\\r\\nlevel=error\" path=\"/a\\\"b\\n\" n=3\n");
	CHECK(strchr(captured, '\n') == captured + strlen(captured) - 1);
	/* a run of pairs the caller made: as it is, but no control byte */
	log_msg(LOG_INFO, "x", "%s open=%u", "a=1 b=2\n", 3u);
	CHECK_STR(strstr(captured, " msg="), " msg=\"x\" a=1 b=2\\x0a open=3\n");
	log_msg(LOG_INFO, "x", "w=%.1f%% p=%5d s=%.*s l=%lld", 2.25, 42, 3, "abcdef", -5LL);
	CHECK_STR(strstr(captured, " msg="), " msg=\"x\" w=2.2% p=\"   42\" s=abc l=-5\n");
	/* a value longer than a line: cut, still one line, still quoted */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_msg(LOG_INFO, "x", "v=%s after=1", big);
	CHECK(strstr(captured, " v=aaaa") != NULL);
	CHECK_STR(captured + strlen(captured) - 15, "aaa... after=1\n");
	/* and past the line's 2 KB: the value cut, still quoted, the line ended */
	memset(big, ' ', 1000);
	big[1000] = '\0';
	log_msg(LOG_INFO, "x", "a=%s b=%s c=%s after=1", big, big, big);
	CHECK(strlen(captured) <= 2048);
	CHECK_STR(captured + strlen(captured) - 6, " ...\"\n");
	CHECK(strchr(captured, '\n') == captured + strlen(captured) - 1);
	CHECK(strchr(captured, '\n') == captured + strlen(captured) - 1);
	log_set_sink(NULL);
	log_init("stackmine", LOG_INFO);
}

int main(void)
{
	RUN(test_buf);
	RUN(test_cli);
	RUN(test_jsonw);
	RUN(test_json_strings);
	RUN(test_json_body);
	RUN(test_json_flat_objects);
	RUN(test_imap);
	RUN(test_vec);
	RUN(test_par);
	RUN(test_arena);
	RUN(test_intern);
	RUN(test_sha256);
	RUN(test_fmt_dec);
	RUN(test_fmt);
	RUN(test_util);
	RUN(test_auth_token);
	RUN(test_idcache);
	RUN(test_webhook);
	RUN(test_budget);
	RUN(test_log);
	return CHECK_DONE();
}
