/* Unit tests of the shared modules: buf, arena, intern, sha256, util, auth tokens, idcache. */
#include "arena.h"
#include "auth.h"
#include "buf.h"
#include "check.h"
#include "idcache.h"
#include "intern.h"
#include "sha256.h"
#include "util.h"

#include <stdlib.h>

static void test_buf(void)
{
	struct buf b = BUF_INIT(16);

	CHECK_INT(buf_puts(&b, "0123456789"), 0);
	CHECK_INT(buf_put_i64(&b, -42), 0);
	CHECK_STR(buf_cstr(&b), "0123456789-42");
	/* past the hard maximum: refused, contents unchanged */
	CHECK_INT(buf_puts(&b, "abcd"), -1);
	CHECK_INT(b.len, 13);
	CHECK_STR(buf_cstr(&b), "0123456789-42");
	CHECK_INT(buf_puts(&b, "abc"), 0);
	CHECK_INT(b.len, 16);
	buf_release(&b);

	b.max = 0;
	buf_put_json_str(&b, "a\"b\\c\n\x01<>", 9);
	CHECK_STR(buf_cstr(&b), "\"a\\\"b\\\\c\\n\\u0001<>\"");
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
	buf_release(&b);
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
}

static void test_util(void)
{
	int64_t v;
	uint64_t sz;
	double d;
	char id[37];

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

static void test_idcache(void)
{
	struct idcache *c = idcache_open(2, 2);
	const char *names[3] = { "a!f", "a!g", "a!h" };
	size_t lens[3] = { 3, 3, 3 }, nf, ns;
	int32_t ids[3], st1[2] = { 10, 11 }, st2[2] = { 11, 10 };

	CHECK_INT(idcache_get_frames(c, names, lens, 3, ids), 0);
	idcache_put_frame(c, "a!f", 3, 10);
	idcache_put_frame(c, "a!g", 3, 11);
	CHECK_INT(idcache_get_frames(c, names, lens, 3, ids), 2);
	CHECK_INT(ids[0], 10);
	CHECK_INT(ids[1], 11);
	CHECK_INT(ids[2], -1);
	/* full: the map starts over instead of growing */
	idcache_put_frame(c, "a!h", 3, 12);
	idcache_sizes(c, &nf, &ns);
	CHECK_INT(nf, 1);
	CHECK_INT(idcache_get_frames(c, names, lens, 3, ids), 1);
	CHECK_INT(ids[2], 12);
	idcache_put_stack(c, st1, 2, 5);
	CHECK_INT(idcache_get_stack(c, st1, 2), 5);
	CHECK_INT(idcache_get_stack(c, st2, 2), -1);   /* order matters */
	CHECK_INT(idcache_get_stack(c, st1, 1), -1);
	idcache_free(c);
	idcache_free(NULL);
}

int main(void)
{
	RUN(test_buf);
	RUN(test_arena);
	RUN(test_intern);
	RUN(test_sha256);
	RUN(test_util);
	RUN(test_auth_token);
	RUN(test_idcache);
	return CHECK_DONE();
}
