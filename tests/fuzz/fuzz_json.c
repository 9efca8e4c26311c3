/*
 * fuzz_json: libFuzzer target for json_check_body() and the readers by position (common/json.h),
 * the one JSON reader of request bodies. Whatever the check accepts, json_check() accepts too, and
 * every value of it can be walked (fields, counts, strings, numbers, text) without reading past
 * the body. Built and run by `make fuzz`.
 */
#include "common/arena.h"
#include "common/json.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every value under v, depth first (the check bounds the depth). */
static void walk(struct json_val v, struct arena *a)
{
	static const char *const names[] = { "v", "host", "app", "frames", NULL };
	struct json_val f[4];
	struct json_reader r;
	char err[256], key[64];
	const char *text;
	size_t n, klen;
	bool trunc;
	int64_t i;
	double d;

	(void)json_val_text(v, &text);
	switch (json_val_type(v)) {
	case JV_STRING:
		if (json_val_str(v, a, &n) && memchr(json_val_str(v, a, &n), '\0', n))
			abort(); /* NUL was refused */
		break;
	case JV_NUMBER:
		(void)json_val_int(v, &i);
		(void)json_val_num(v, &d);
		break;
	case JV_ARRAY:
		(void)json_count(v);
		json_reader_at(&r, v);
		json_enter(&r);
		while (json_next_item(&r)) {
			walk(json_here(&r), a);
			json_skip(&r);
		}
		break;
	case JV_OBJECT:
		(void)json_fields(v, "", names, false, f, err, sizeof(err));
		(void)json_fields(v, "p", names, true, f, err, sizeof(err));
		json_reader_at(&r, v);
		json_enter(&r);
		while (json_next_key(&r, key, sizeof(key), &klen, &trunc)) {
			walk(json_here(&r), a);
			json_skip(&r);
		}
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct json_limits lim = { 16, 4, 32 };
	/* a copy of exactly size bytes, so that ASan sees any read past the body */
	char *body = malloc(size ? size : 1);
	char err[512];
	struct arena *a;

	if (!body)
		return 0;
	memcpy(body, data, size);
	if (json_check_body(body, size, &lim, err, sizeof(err)) == 0) {
		if (json_check(body, size, 16, err, sizeof(err)) != 0)
			abort();
		a = arena_open(64u << 20);
		walk(json_root(body, size), a);
		arena_free(a);
	}
	free(body);
	return 0;
}
