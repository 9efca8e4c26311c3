/*
 * fuzz_web: libFuzzer target for what sm-web takes from outside and renders:
 * the run parameters of POST /api/v1/runs (params_parse: a refusal names the
 * field, an acceptance writes canonical JSON that parses back to itself), and
 * hostile names through the HTML escaper and the SVG flame graph, which must
 * never let markup through. Built and run by `make fuzz`.
 */
#include "common/arena.h"
#include "common/buf.h"
#include "miner/params.h"
#include "web/flame.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* No '<' or '>' from the data, and nothing but known entities after '&'. */
static void check_escaped(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '"' || s[i] == '\'' || s[i] == '<' || s[i] == '>')
			abort();
}

static void fuzz_params(const char *text, size_t n)
{
	struct arena *a = arena_open(16u << 20);
	struct run_params p, q;
	char err[512];

	if (params_parse(text, n, a, &p, err, sizeof(err)) == 0) {
		struct buf b = BUF_INIT(0), c = BUF_INIT(0);

		if (params_write_json(&p, &b) < 0 || params_parse(b.data, b.len, a, &q, err, sizeof(err)) < 0 ||
		    params_write_json(&q, &c) < 0 || b.len != c.len || memcmp(b.data, c.data, b.len) != 0)
			abort();
		buf_release(&b);
		buf_release(&c);
	} else if (!err[0] || !strchr(err, ':')) {
		abort(); /* every refusal names what is wrong */
	}
	arena_free(a);
}

static void fuzz_render(const char *text, size_t n)
{
	struct buf b = BUF_INIT(0);
	struct flame *f = flame_open();
	const char *names[64];
	char *copy = malloc(n + 1);
	size_t k = 0;

	if (!f || !copy)
		abort();
	buf_put_html(&b, text, n);
	check_escaped(b.data ? b.data : "", b.len);
	/* the input as ';'-separated frames of one stack, and its suffixes */
	memcpy(copy, text, n);
	copy[n] = '\0';
	for (char *save = NULL, *t = strtok_r(copy, ";", &save); t && k < 64; t = strtok_r(NULL, ";", &save))
		names[k++] = t;
	for (size_t i = 0; i < k; i++)
		flame_add(f, names + i, k - i, 1000 * (i + 1), i + 1);
	buf_reset(&b);
	if (flame_render_svg(f, 2, "?focus=", 800, &b) == 0) {
		/* outside tags, no markup from the data: every '<' starts one of the renderer's tags */
		for (size_t i = 0; i < b.len; i++)
			if (b.data[i] == '<' && strncmp(b.data + i, "<g", 2) && strncmp(b.data + i, "</", 2) &&
			    strncmp(b.data + i, "<a ", 3) && strncmp(b.data + i, "<rect", 5) &&
			    strncmp(b.data + i, "<text", 5) && strncmp(b.data + i, "<title", 6) &&
			    strncmp(b.data + i, "<svg", 4))
				abort();
	}
	buf_release(&b);
	flame_free(f);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		fuzz_params((const char *)data + 1, size - 1);
	else
		fuzz_render((const char *)data + 1, size - 1);
	return 0;
}
