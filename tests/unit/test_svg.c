/* Unit tests of the dashboard's SVG renderers: flame (icicle graph), timeline and plot. */
#include "common/buf.h"
#include "common/util.h"
#include "tests/unit/check.h"
#include "web/flame.h"
#include "web/plot.h"
#include "web/timeline.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

static size_t count_sub(const char *hay, const char *needle)
{
	size_t n = 0, len = strlen(needle);

	for (const char *p = strstr(hay, needle); p; p = strstr(p + len, needle))
		n++;
	return n;
}

/* Position of needle in hay, or -1. */
static long pos_of(const char *hay, const char *needle)
{
	const char *p = strstr(hay, needle);

	return p ? (long)(p - hay) : -1;
}

/* The contents of every <text class="cls" ...>...</text>, joined by ','. */
static const char *texts_of(const char *svg, const char *cls, char *out, size_t outlen)
{
	char open[64];
	size_t used = 0;
	const char *p = svg;

	snprintf(open, sizeof(open), "<text class=\"%s\"", cls);
	out[0] = '\0';
	while ((p = strstr(p, open))) {
		const char *s = strchr(p, '>'), *e;

		if (!s || !(e = strstr(s, "</text>")))
			break;
		s++;
		if (used + (size_t)(e - s) + 2 > outlen)
			break;
		if (used)
			out[used++] = ',';
		memcpy(out + used, s, (size_t)(e - s));
		used += (size_t)(e - s);
		out[used] = '\0';
		p = e;
	}
	return out;
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* No script, style attribute, event-handler attribute (on...=) or javascript: URL. */
static bool no_active_content(const char *svg)
{
	for (const char *p = strstr(svg, " on"); p; p = strstr(p + 1, " on")) {
		const char *q = p + 3;

		while (*q >= 'a' && *q <= 'z')
			q++;
		if (*q == '=')
			return false;
	}
	return !strstr(svg, "<script") && !strstr(svg, "style=") && !strstr(svg, "javascript:");
}

/* ---- flame ---- */

static void add3(struct flame *f, const char *a, const char *b, const char *c, uint64_t cost, uint64_t ev)
{
	const char *names[3] = { a, b, c };
	size_t n = c ? 3 : b ? 2 : a ? 1 : 0;

	CHECK_INT(flame_add(f, names, n, cost, ev), 0);
}

static void test_flame_basic(void)
{
	struct flame *f = flame_open(), *g = flame_open();
	struct buf b = BUF_INIT(0), b2 = BUF_INIT(0);
	const char *s;

	/* added out of name order: ids must not depend on it */
	add3(f, "main", "b", NULL, 2000000, 2);
	add3(f, "main", "a", "b", 6000000, 6);
	add3(f, "main", "a", "c", 2000000, 2);
	CHECK_INT(flame_node_count(f), 6);
	CHECK_INT(flame_total_cost(f), 10000000);
	CHECK_STR(flame_error(f), "");

	CHECK_INT(flame_render_svg(f, 0, "?focus=", 1000, &b), 0);
	s = buf_cstr(&b);
	CHECK(starts_with(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"flame\" width=\"1000\" "
			     "height=\"72\" viewBox=\"0 0 1000 72\" font-family=\"monospace\" font-size=\"12\">\n"));
	CHECK(strstr(s, "<g class=\"fn\"><title>all\n10 ms (100 %), 10 events</title><a href=\"?focus=1\">"
			"<rect x=\"0.0\" y=\"0\" width=\"1000.0\" height=\"17\" fill=\"#") != NULL);
	CHECK(strstr(s, "<a href=\"?focus=2\"><rect x=\"0.0\" y=\"18\" width=\"1000.0\" height=\"17\"") != NULL);
	CHECK(strstr(s, "<a href=\"?focus=3\"><rect x=\"0.0\" y=\"36\" width=\"800.0\" height=\"17\"") != NULL);
	CHECK(strstr(s, "<a href=\"?focus=4\"><rect x=\"0.0\" y=\"54\" width=\"600.0\" height=\"17\"") != NULL);
	CHECK(strstr(s, "<a href=\"?focus=5\"><rect x=\"600.0\" y=\"54\" width=\"200.0\" height=\"17\"") != NULL);
	CHECK(strstr(s, "<a href=\"?focus=6\"><rect x=\"800.0\" y=\"36\" width=\"200.0\" height=\"17\"") != NULL);
	/* main/a/b: its title, and its label (fits) */
	CHECK(strstr(s, "<g class=\"fn\"><title>b\n6 ms (60 %), 6 events</title><a href=\"?focus=4\">") != NULL);
	CHECK(strstr(s, "\"/><text x=\"603.0\" y=\"67\">c</text></a></g>\n") != NULL);
	/* depth-first in name order: 1 all, 2 main, 3 main/a, 4 a/b, 5 a/c, 6 main/b */
	CHECK(pos_of(s, "?focus=1\"") < pos_of(s, "?focus=2\""));
	CHECK(pos_of(s, "?focus=2\"") < pos_of(s, "?focus=3\""));
	CHECK(pos_of(s, "?focus=3\"") < pos_of(s, "?focus=4\""));
	CHECK(pos_of(s, "?focus=4\"") < pos_of(s, "?focus=5\""));
	CHECK(pos_of(s, "?focus=5\"") < pos_of(s, "?focus=6\""));
	CHECK_INT(count_sub(s, "<g class=\"fn"), 6);
	CHECK_INT(count_sub(s, "</svg>\n"), 1);
	CHECK(no_active_content(s));
	/* the same colour for the same name, wherever it is */
	{
		const char *p1 = strstr(s, "?focus=4\"><rect"), *p2 = strstr(s, "?focus=6\"><rect");
		const char *c1 = p1 ? strstr(p1, "fill=\"#") : NULL, *c2 = p2 ? strstr(p2, "fill=\"#") : NULL;

		CHECK(c1 && c2 && strncmp(c1, c2, 14) == 0);
	}

	/* the same stacks in another order: the same bytes */
	add3(g, "main", "a", "c", 2000000, 2);
	add3(g, "main", "a", "b", 6000000, 6);
	add3(g, "main", "b", NULL, 2000000, 2);
	CHECK_INT(flame_render_svg(g, 0, "?focus=", 1000, &b2), 0);
	CHECK_STR(buf_cstr(&b2), s);
	/* an unknown focus is the root */
	buf_reset(&b2);
	CHECK_INT(flame_render_svg(g, 99, "?focus=", 1000, &b2), 0);
	CHECK_STR(buf_cstr(&b2), s);

	/* zoom into main/a (id 3): it spans the width, its ancestors are zoom-out bars */
	buf_reset(&b);
	CHECK_INT(flame_render_svg(f, 3, "?focus=", 1000, &b), 0);
	s = buf_cstr(&b);
	CHECK_INT(count_sub(s, "<g class=\"fn anc\">"), 2);
	CHECK_INT(count_sub(s, "<g class=\"fn"), 5);
	CHECK(strstr(s, "<g class=\"fn anc\"><title>all\n10 ms (125 %), 10 events</title>") != NULL);
	CHECK(strstr(s, "<a href=\"?focus=3\"><rect x=\"0.0\" y=\"36\" width=\"1000.0\"") != NULL);
	CHECK(strstr(s, "<a href=\"?focus=4\"><rect x=\"0.0\" y=\"54\" width=\"750.0\"") != NULL);
	CHECK(strstr(s, "<a href=\"?focus=5\"><rect x=\"750.0\" y=\"54\" width=\"250.0\"") != NULL);
	CHECK(strstr(s, "<title>b\n6 ms (75 %), 6 events</title>") != NULL);
	CHECK(strstr(s, "?focus=6\"") == NULL);
	CHECK(strstr(s, "height=\"72\" viewBox=\"0 0 1000 72\"") != NULL);

	/* a leaf focus: only the chain */
	buf_reset(&b);
	CHECK_INT(flame_render_svg(f, 6, NULL, 1000, &b), 0);
	s = buf_cstr(&b);
	CHECK_INT(count_sub(s, "<g class=\"fn"), 3);
	CHECK(strstr(s, "<a ") == NULL); /* no prefix, no links */
	CHECK(strstr(s, "<g class=\"fn\"><title>b\n2 ms (100 %), 2 events</title><rect x=\"0.0\" y=\"36\" "
			"width=\"1000.0\" height=\"17\"") != NULL);

	/* cost at the root; adds after a render renumber */
	CHECK_INT(flame_add(f, NULL, 0, 1000000, 1), 0);
	CHECK_INT(flame_total_cost(f), 11000000);
	CHECK_INT(flame_node_count(f), 6);
	add3(f, "main", "a", "a0", 1000000, 1);
	CHECK_INT(flame_node_count(f), 7);
	buf_reset(&b);
	CHECK_INT(flame_render_svg(f, 4, "?f=", 1000, &b), 0);
	s = buf_cstr(&b);
	CHECK(strstr(s, "<title>a0\n1 ms (100 %), 1 event</title><a href=\"?f=4\">") != NULL);

	/* output full: refused, out as it was */
	{
		struct buf small = BUF_INIT(100);

		CHECK_INT(buf_puts(&small, "keep"), 0);
		CHECK_INT(flame_render_svg(f, 0, "?f=", 1000, &small), -1);
		CHECK_STR(buf_cstr(&small), "keep");
		CHECK_STR(flame_error(f), "out of memory or output full");
		buf_release(&small);
	}
	buf_release(&b);
	buf_release(&b2);
	flame_free(f);
	flame_free(g);
	flame_free(NULL);
}

/* A differential flame: widths by the after costs, colours by the change per stream. */
static void test_flame_diff(void)
{
	struct flame *f = flame_open();
	struct buf b = BUF_INIT(0);
	const char *ab[] = { "m!a", "m!b" }, *ac[] = { "m!a", "m!c" };
	const char *s;

	CHECK_INT(flame_add(f, ab, 2, 1000000, 1), 0);
	CHECK_INT(flame_add_base(f, ab, 2, 3000000), 0);
	CHECK_INT(flame_add(f, ac, 2, 2000000, 2), 0);
	CHECK_INT(flame_total_cost(f), 3000000);   /* the before costs draw nothing */
	flame_set_diff(f, 1.0, 1.0);
	CHECK_INT(flame_render_svg(f, 0, NULL, 1000, &b), 0);
	s = buf_cstr(&b);
	/* c is new: full red; b lost two thirds: blue (235 - 190 x 2/3 = 108); a is unchanged: white-grey */
	CHECK(strstr(s, "<title>m!c\n2 ms (66.7 %)\nper stream: before 0 ns, after 2 ms</title>") != NULL);
	CHECK(strstr(s, "fill=\"#ff2d2d\"") != NULL);
	CHECK(strstr(s, "<title>m!b\n1 ms (33.3 %)\nper stream: before 3 ms, after 1 ms</title>") != NULL);
	CHECK(strstr(s, "fill=\"#6c6cff\"") != NULL);
	CHECK(strstr(s, "fill=\"#ebebeb\"") != NULL);
	buf_release(&b);
	flame_free(f);
}

static void test_flame_escape(void)
{
	static const char evil[] = "std::map<K, V>::find&\"'<script>alert(1)</script>";
	struct flame *f = flame_open();
	struct buf b = BUF_INIT(0);
	const char *s;

	add3(f, "main", evil, NULL, 3000000, 3);
	add3(f, "main", "bad\xff\xfename", NULL, 1000000, 1);
	CHECK_INT(flame_render_svg(f, 0, "?f=\"><script>x</script>&id=", 1200, &b), 0);
	s = buf_cstr(&b);
	CHECK(strstr(s, "<script") == NULL);
	CHECK(strstr(s, "&lt;script&gt;") != NULL);
	CHECK(no_active_content(s));
	CHECK(strstr(s, "<title>std::map&lt;K, V&gt;::find&amp;&quot;&#39;&lt;script&gt;alert(1)&lt;/script&gt;\n"
			"3 ms (75 %), 3 events</title>") != NULL);
	/* in the label too (900 px: it all fits) */
	CHECK(strstr(s, ">std::map&lt;K, V&gt;::find&amp;&quot;&#39;&lt;script&gt;alert(1)&lt;/script&gt;</text>") !=
	      NULL);
	/* the prefix, escaped, in the attribute */
	CHECK(strstr(s, "<a href=\"?f=&quot;&gt;&lt;script&gt;x&lt;/script&gt;&amp;id=2\">") != NULL);
	/* invalid UTF-8 replaced */
	CHECK(strstr(s, "<title>bad\xef\xbf\xbd\xef\xbf\xbdname\n") != NULL);
	CHECK(strchr(s, '\xff') == NULL && strchr(s, '\xfe') == NULL);
	CHECK(util_utf8_valid(s, b.len));
	buf_release(&b);
	flame_free(f);
}

static void test_flame_labels(void)
{
	/* 16 two-byte characters */
	static const char greek[] = "\xce\xb1\xce\xb2\xce\xb3\xce\xb4\xce\xb5\xce\xb6\xce\xb7\xce\xb8"
				    "\xce\xb9\xce\xba\xce\xbb\xce\xbc\xce\xbd\xce\xbe\xce\xbf\xcf\x80";
	struct flame *f = flame_open();
	struct buf b = BUF_INIT(0);
	const char *names[1];
	const char *s;

	names[0] = "z";
	CHECK_INT(flame_add(f, names, 1, 9300, 1), 0);
	names[0] = greek;
	CHECK_INT(flame_add(f, names, 1, 500, 1), 0);   /* 50 px: 6 characters fit */
	names[0] = "\xce\xb1\xce\xb2\xce\xb3";
	CHECK_INT(flame_add(f, names, 1, 196, 1), 0);   /* 19.6 px: 1 fits, < 3: no text */
	names[0] = "tiny";
	CHECK_INT(flame_add(f, names, 1, 4, 1), 0);     /* 0.4 px: not drawn */
	CHECK_INT(flame_total_cost(f), 10000);
	CHECK_INT(flame_render_svg(f, 0, "?f=", 1000, &b), 0);
	s = buf_cstr(&b);
	/* byte order: "tiny" (2) < "z" (3) < "αβγ" (4) < the long one (5), which is cut after 5
	 * characters + "…" */
	CHECK(strstr(s, "<a href=\"?f=3\"><rect x=\"0.4\" y=\"18\" width=\"930.0\" height=\"17\" fill=\"#") != NULL);
	CHECK(strstr(s, "<a href=\"?f=4\"><rect x=\"930.4\" y=\"18\" width=\"19.6\" height=\"17\" fill=\"#") != NULL);
	CHECK(strstr(s, "<a href=\"?f=5\"><rect x=\"950.0\" y=\"18\" width=\"50.0\" height=\"17\" fill=\"#") != NULL);
	CHECK(strstr(s, "<text x=\"953.0\" y=\"31\">\xce\xb1\xce\xb2\xce\xb3\xce\xb4\xce\xb5\xe2\x80\xa6</text>") !=
	      NULL);
	{
		const char *p = strstr(s, "<a href=\"?f=4\">"), *q = p ? strstr(p, "</a>") : NULL;

		CHECK(p && q && !memmem(p, (size_t)(q - p), "<text", 5));
	}
	CHECK(strstr(s, "tiny") == NULL);
	CHECK(strstr(s, "?f=2\"") == NULL);
	CHECK(strstr(s, "height=\"36\"") != NULL);
	CHECK(util_utf8_valid(s, b.len));
	buf_release(&b);
	flame_free(f);
}

/* A frame under a pixel wide is not drawn, nor anything below it; one of a pixel is. */
static void test_flame_thin(void)
{
	struct flame *f = flame_open();
	struct buf b = BUF_INIT(0);
	const char *names[2];
	const char *s;

	names[0] = "wide";
	CHECK_INT(flame_add(f, names, 1, 9981, 1), 0);
	names[0] = "one";
	CHECK_INT(flame_add(f, names, 1, 10, 1), 0);    /* 1.0 px */
	names[0] = "thin";
	names[1] = "below";
	CHECK_INT(flame_add(f, names, 2, 9, 1), 0);     /* 0.9 px, and its callee */
	CHECK_INT(flame_render_svg(f, 0, "?f=", 1000, &b), 0);
	s = buf_cstr(&b);
	CHECK(strstr(s, "width=\"1.0\"") != NULL);
	CHECK(strstr(s, "<title>one\n") != NULL);
	CHECK(strstr(s, "thin") == NULL);
	CHECK(strstr(s, "below") == NULL);
	/* the root's row and one below it: the thin frame's callee adds no row */
	CHECK(strstr(s, "height=\"36\"") != NULL);
	buf_release(&b);
	flame_free(f);
}

static void test_flame_limits(void)
{
	static const char *deep[FLAME_MAX_DEPTH + 1];
	static char store[FLAME_MAX_DEPTH + 1][16];
	struct flame *f = flame_open();
	const char *nul[2] = { "a", NULL };
	char first[32];
	int i, rc = 0;

	for (i = 0; i <= FLAME_MAX_DEPTH; i++) {
		snprintf(store[i], sizeof(store[i]), "d%d", i);
		deep[i] = store[i];
	}
	CHECK_INT(flame_add(f, deep, FLAME_MAX_DEPTH + 1, 1, 1), -1);
	CHECK_STR(flame_error(f), "stack deeper than 1024 frames");
	CHECK_INT(flame_add(f, nul, 2, 1, 1), -1);
	CHECK_STR(flame_error(f), "NULL frame name");
	CHECK_INT(flame_node_count(f), 1);
	CHECK_INT(flame_total_cost(f), 0);
	/* 1024-frame stacks with distinct roots: 195 fit (1 + 195 * 1024 = 199681 nodes), the 196th not */
	deep[0] = first;
	for (i = 0; i < 196; i++) {
		snprintf(first, sizeof(first), "root%03d", i);
		rc = flame_add(f, deep, FLAME_MAX_DEPTH, 1, 1);
		if (rc)
			break;
	}
	CHECK_INT(i, 195);
	CHECK_INT(rc, -1);
	CHECK_STR(flame_error(f), "flame graph over 200000 nodes");
	CHECK_INT(flame_node_count(f), 199681);
	CHECK_INT(flame_total_cost(f), 195);  /* the refused stack changed nothing */
	/* exactly up to the limit, then a known stack still adds, a new one not */
	CHECK_INT(flame_add(f, deep, 319, 1, 1), 0);
	CHECK_INT(flame_node_count(f), FLAME_MAX_NODES);
	CHECK_STR(flame_error(f), "");
	snprintf(first, sizeof(first), "root%03d", 7);
	CHECK_INT(flame_add(f, deep, FLAME_MAX_DEPTH, 1, 1), 0);
	deep[1] = "new";
	CHECK_INT(flame_add(f, deep, 2, 1, 1), -1);
	CHECK_INT(flame_node_count(f), FLAME_MAX_NODES);
	CHECK_INT(flame_total_cost(f), 197);
	/* a full tree still renders (most of it narrower than half a pixel) */
	{
		struct buf b = BUF_INIT(0);

		CHECK_INT(flame_render_svg(f, 0, "?f=", 1200, &b), 0);
		CHECK(b.len > 0);
		buf_release(&b);
	}
	flame_free(f);
}

/* A frame's colour is its module's, from a fixed hash: the same on every page and run. */
static void test_flame_colour(void)
{
	char a[8], b[8];
	static const struct {
		const char *name;
		size_t mod;
	} mods[] = {
		{ "libc.so.6!read", 10 }, { "Foo::Bar::baz", 10 }, { "java.util.HashMap.get", 10 },
		{ "ngx_http_process_request", 8 }, { "main", 4 }, { "java.util.HashMap.get(HashMap.java:3)", 10 },
	};

	for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++)
		CHECK_INT(flame_module_len(mods[i].name, strlen(mods[i].name)), mods[i].mod);
	/* fixed values: a change of the hash or palette recolours every saved page, so it is deliberate */
	flame_colour("libc.so.6!read", 14, a);
	CHECK_STR(a, "#eb3c3c");
	flame_colour("main", 4, a);
	CHECK_STR(a, "#df6350");
	/* the same module, the same colour */
	flame_colour("libc.so.6!write", 15, b);
	flame_colour("libc.so.6!read", 14, a);
	CHECK_STR(a, b);
	flame_colour("ngx_http_a", 10, a);
	flame_colour("ngx_http_b_c", 12, b);
	CHECK_STR(a, b);
	flame_colour("Foo::Bar::x", 11, a);
	flame_colour("Foo::Bar::y", 11, b);
	CHECK_STR(a, b);
	/* warm: red the largest, blue the smallest component */
	for (int i = 0; i < 200; i++) {
		char name[32];
		unsigned r, g, bl;

		snprintf(name, sizeof(name), "mod%d!f", i);
		flame_colour(name, strlen(name), a);
		CHECK(sscanf(a, "#%2x%2x%2x", &r, &g, &bl) == 3 && r >= g && g >= bl && r >= 200);
	}
}

/* Search: matching frames marked "hit", their cost counted once; links carry a suffix. */
static void test_flame_search(void)
{
	struct flame *f = flame_open();
	struct buf b = BUF_INIT(0);
	const char *s;

	add3(f, "main", "libc.so.6!Read", "libc.so.6!read_x", 3000000, 3);
	add3(f, "main", "b", NULL, 1000000, 1);
	flame_set_search(f, "READ");
	flame_set_link_suffix(f, "#flame");
	CHECK_INT(flame_render_svg(f, 0, "?focus=", 1000, &b), 0);
	s = buf_cstr(&b);
	CHECK(strstr(s, "class=\"flame searching\"") != NULL);
	CHECK_INT(count_sub(s, "<g class=\"fn hit\">"), 2);
	CHECK(strstr(s, "<a href=\"?focus=1#flame\">") != NULL);
	CHECK_INT(flame_matched_cost(f), 3000000);  /* read_x under Read: not again */
	CHECK_INT(flame_shown_cost(f), 4000000);
	/* zoomed into b: nothing there matches */
	buf_reset(&b);
	CHECK_INT(flame_render_svg(f, 3, "?focus=", 1000, &b), 0);
	CHECK_INT(flame_matched_cost(f), 0);
	CHECK_INT(flame_shown_cost(f), 1000000);
	flame_set_search(f, "");
	buf_reset(&b);
	CHECK_INT(flame_render_svg(f, 0, "?focus=", 1000, &b), 0);
	CHECK(strstr(buf_cstr(&b), " hit") == NULL && strstr(buf_cstr(&b), "searching") == NULL);
	buf_release(&b);
	flame_free(f);
}

static void test_flame_perf(void)
{
	static char vocab[48][4][64];
	const char *names[48];
	struct flame *f = flame_open();
	struct buf b = BUF_INIT(0);
	int64_t t0, t1;
	int ok = 1;

	for (int d = 0; d < 48; d++)
		for (int k = 0; k < 4; k++)
			snprintf(vocab[d][k], sizeof(vocab[d][k]), "ns%d::Class%d::method(int, char const*)", d, k);
	/* 50,000 stacks of depth 40 over 4096 distinct paths (two choices in each of the first 12 frames) */
	t0 = util_now_mono_ns();
	for (int i = 0; i < 50000; i++) {
		uint64_t r = check_rand();

		for (int d = 0; d < 40; d++)
			names[d] = vocab[d][d < 12 ? (r >> d) & 1 : 0];
		ok &= flame_add(f, names, 40, 1000 + r % 100000, 1) == 0;
	}
	t1 = util_now_mono_ns();
	CHECK(ok);
	CHECK(flame_node_count(f) <= 1 + 8190 + 4096 * 28);
	printf("flame: 50000 stacks x 40 frames added in %.1f ms (%zu nodes)\n", (double)(t1 - t0) / 1e6,
	       flame_node_count(f));
	flame_free(f);

	/* a tree of about 10,000 nodes: 256 paths of depth 46 */
	f = flame_open();
	for (int i = 0; i < 5000; i++) {
		uint64_t r = check_rand();

		for (int d = 0; d < 46; d++)
			names[d] = vocab[d][d < 8 ? (r >> d) & 1 : 0];
		ok &= flame_add(f, names, 46, 1000 + r % 100000, 1) == 0;
	}
	CHECK(ok);
	CHECK_INT(flame_node_count(f), 1 + 510 + 256 * 38);
	t0 = util_now_mono_ns();
	CHECK_INT(flame_render_svg(f, 0, "?focus=", 1200, &b), 0);
	t1 = util_now_mono_ns();
	printf("flame: %zu-node tree rendered in %.1f ms (%zu nodes drawn, %zu bytes)\n", flame_node_count(f),
	       (double)(t1 - t0) / 1e6, count_sub(buf_cstr(&b), "<g class=\"fn"), b.len);
	/* deterministic */
	{
		struct buf b2 = BUF_INIT(0);

		CHECK_INT(flame_render_svg(f, 0, "?focus=", 1200, &b2), 0);
		CHECK(b2.len == b.len && memcmp(b.data, b2.data, b.len) == 0);
		buf_release(&b2);
	}
	buf_release(&b);
	flame_free(f);
}

/* ---- timeline ---- */

#define SEC 1000000000LL
#define MS 1000000LL

static void test_timeline_basic(void)
{
	const int64_t from = SEC, to = 2 * SEC;
	struct tl_event ev[] = {
		{ 5, from + 100 * MS, 200 * MS, 'r', 0, false, "work()" },
		{ 9, from + 300 * MS, 100 * MS, 'w', 3, true, NULL },
		{ 3, from - 50 * MS, 100 * MS, 'r', 0, false, NULL },
		{ 5, from + 500 * MS, 10 * MS, 'w', 77, false, "<wait&>" },
		{ 3, from + 900 * MS, 200 * MS, 'w', 5, false, NULL },
		{ 42, to + 1, 10, 'r', 0, false, NULL },
		{ 1000, from, 10, 'x', 0, false, NULL },
	};
	struct tl_view v = { 1130, from, to, 9, from + 250 * MS, from + 450 * MS, "?t=", 0, false, 0, NULL, 0 };
	struct buf b = BUF_INIT(0);
	char err[128] = "x";
	const char *s;

	CHECK_INT(timeline_render_svg(ev, sizeof(ev) / sizeof(ev[0]), &v, &b, err, sizeof(err)), 0);
	CHECK_STR(err, "");
	s = buf_cstr(&b);
	CHECK(starts_with(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\"1130\" "
			     "height=\"124\" viewBox=\"0 0 1130 124\" font-family=\"sans-serif\" font-size=\"11\">\n"));
	/* rows: the symptom thread, then ascending tids; kind 'x' makes no row */
	CHECK(strstr(s, "<text class=\"tid symptom\" x=\"4\" y=\"18\">tid 9 (symptom)</text>") != NULL);
	CHECK(strstr(s, "<text class=\"tid\" x=\"4\" y=\"38\">tid 3</text>") != NULL);
	CHECK(strstr(s, "<text class=\"tid\" x=\"4\" y=\"58\">tid 5</text>") != NULL);
	CHECK(strstr(s, "<text class=\"tid\" x=\"4\" y=\"78\">tid 42</text>") != NULL);
	CHECK(pos_of(s, ">tid 9 (symptom)<") < pos_of(s, ">tid 3<"));
	CHECK(pos_of(s, ">tid 3<") < pos_of(s, ">tid 5<"));
	CHECK(pos_of(s, ">tid 5<") < pos_of(s, ">tid 42<"));
	CHECK(strstr(s, "tid 1000") == NULL);
	CHECK(strstr(s, "<rect class=\"symptom\" x=\"370.0\" y=\"4\" width=\"200.0\" height=\"80\"") != NULL);
	/* 1 ms = 1 px from x = 120 */
	CHECK(strstr(s, "<rect class=\"run\" x=\"220.0\" y=\"47\" width=\"200.0\" height=\"14\" fill=\"#7fa7d9\">"
			"<title>run tid 5\nstart 100.000 ms, dur 200.000 ms\nwork()</title></rect>\n") != NULL);
	CHECK(strstr(s, "<rect class=\"wait aoi\" x=\"420.0\" y=\"7\" width=\"100.0\" height=\"14\" fill=\"#c7621a\">"
			"<title>wait tid 9\nstart 300.000 ms, dur 100.000 ms\nreadied by tid 3</title></rect>\n") != NULL);
	/* cut at the view's edges, the title keeps the real times */
	CHECK(strstr(s, "<rect class=\"run\" x=\"120.0\" y=\"27\" width=\"50.0\" height=\"14\" fill=\"#7fa7d9\">"
			"<title>run tid 3\nstart -50.000 ms, dur 100.000 ms</title></rect>\n") != NULL);
	CHECK(strstr(s, "<rect class=\"wait\" x=\"1020.0\" y=\"27\" width=\"100.0\"") != NULL);
	CHECK(strstr(s, "readied by tid 77\n&lt;wait&amp;&gt;</title>") != NULL);
	CHECK_INT(count_sub(s, "<rect class=\"run"), 2);
	CHECK_INT(count_sub(s, "<rect class=\"wait"), 3);
	/* one edge: the AOI wait of tid 9, down to tid 3's row (readier 77 has no row, tid 3's wait ends
	 * after the view) */
	CHECK_INT(count_sub(s, "<line class=\"edge"), 1);
	CHECK(strstr(s, "<line class=\"edge aoi\" x1=\"520.0\" y1=\"21\" x2=\"520.0\" y2=\"27\" stroke=\"#444\" "
			"marker-end=\"url(#tl-arrow)\"/>") != NULL);
	CHECK(strstr(s, "<marker id=\"tl-arrow\"") != NULL);
	CHECK(strstr(s, "class=\"note\"") == NULL);
	/* the axis: 10 ticks, each slice a zoom link */
	CHECK_INT(count_sub(s, "<a href=\"?t="), 10);
	CHECK(strstr(s, "<a href=\"?t=1000000000-1100000000\"><rect class=\"slice\" x=\"120.0\" y=\"90\" "
			"width=\"100.0\" height=\"30\"") != NULL);
	CHECK(strstr(s, "<a href=\"?t=1900000000-2000000000\">") != NULL);
	{
		char t[512];

		CHECK_STR(texts_of(s, "tick", t, sizeof(t)),
			  "0 ms,100 ms,200 ms,300 ms,400 ms,500 ms,600 ms,700 ms,800 ms,900 ms");
	}
	CHECK(no_active_content(s));
	CHECK(strstr(s, "<wait") == NULL);
	/* deterministic; no links without a prefix */
	{
		struct buf b2 = BUF_INIT(0);

		CHECK_INT(timeline_render_svg(ev, sizeof(ev) / sizeof(ev[0]), &v, &b2, err, sizeof(err)), 0);
		CHECK_STR(buf_cstr(&b2), s);
		buf_reset(&b2);
		v.href_prefix = NULL;
		CHECK_INT(timeline_render_svg(ev, sizeof(ev) / sizeof(ev[0]), &v, &b2, err, sizeof(err)), 0);
		CHECK(strstr(buf_cstr(&b2), "<a ") == NULL);
		CHECK_INT(count_sub(buf_cstr(&b2), "<text class=\"tick\""), 10);
		buf_release(&b2);
	}
	/* a sub-millisecond view: 3 decimals */
	{
		struct tl_view v2 = { 1130, 0, 50000, 0, 0, 0, NULL, 0, false, 0, NULL, 0 };
		char t[512];

		buf_reset(&b);
		CHECK_INT(timeline_render_svg(ev, 0, &v2, &b, err, sizeof(err)), 0);
		CHECK_STR(texts_of(buf_cstr(&b), "tick", t, sizeof(t)),
			  "0.000 ms,0.005 ms,0.010 ms,0.015 ms,0.020 ms,0.025 ms,0.030 ms,0.035 ms,0.040 ms,0.045 ms");
		CHECK(strstr(buf_cstr(&b), "class=\"tid") == NULL);
	}
	/* zoomed into 1200-1500 ms of a stream that starts at from: ticks and hovers count from the
	 * stream's start, not the view's */
	{
		struct tl_view vz = { 1130, from + 1200 * MS, from + 1500 * MS, 0, 0, 0, "?t=", 0, true, from, NULL, 0 };
		struct tl_event z[] = { { 4, from + 1250 * MS, 10 * MS, 'r', 0, false, "a\nb" } };
		char t[512];

		buf_reset(&b);
		CHECK_INT(timeline_render_svg(z, 1, &vz, &b, err, sizeof(err)), 0);
		CHECK_STR(texts_of(buf_cstr(&b), "tick", t, sizeof(t)),
			  "1200 ms,1230 ms,1260 ms,1290 ms,1320 ms,1350 ms,1380 ms,1410 ms,1440 ms,1470 ms");
		CHECK(strstr(buf_cstr(&b), "<title>run tid 4\nstart 1250.000 ms, dur 10.000 ms\na\nb</title>") != NULL);
		/* the zoom links stay absolute ns */
		CHECK(strstr(buf_cstr(&b), "<a href=\"?t=2200000000-2230000000\">") != NULL);
	}
	buf_release(&b);
}

/* Named threads: "NAME (tid N)", the symptom marker kept, markup escaped, a long name cut with "…" on a
 * character boundary to fit the gutter, an unnamed thread "tid N", a tid named twice one way. */
static void test_timeline_names(void)
{
	struct tl_event ev[] = {
		{ 4211, 100, 10, 'r', 0, false, NULL },
		{ 7, 120, 10, 'w', 4211, false, NULL },
		{ 8, 130, 10, 'r', 0, false, NULL },
		{ 9, 140, 10, 'r', 0, false, NULL },
		{ 10, 150, 10, 'r', 0, false, NULL },
	};
	const struct tl_thread th[] = {
		{ 4211, "nginx: worker" },
		{ 7, "<script>&\"x\"" },
		{ 8, "a-very-long-thread-name-well-past-the-gutter-room" },
		{ 9, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" },
		{ 8, "a second name of 8" },
		{ 12345, "not in the stream" },
	};
	struct tl_view v = { 1200, 0, 1000, 4211, 100, 200, NULL, 330, false, 0, th, 6 };
	struct buf b = BUF_INIT(0), b2 = BUF_INIT(0);
	char err[128];
	const char *s;

	CHECK_INT(timeline_render_svg(ev, 5, &v, &b, err, sizeof(err)), 0);
	s = buf_cstr(&b);
	CHECK(strstr(s, "<text class=\"tid symptom\" x=\"4\" y=\"18\">nginx: worker (tid 4211) (symptom)</text>") != NULL);
	CHECK(strstr(s, "<text class=\"tid\" x=\"4\" y=\"38\">&lt;script&gt;&amp;&quot;x&quot; (tid 7)</text>") != NULL);
	/* 330 px: 46 characters in all; "a second name of 8" sorts before the long name and wins */
	CHECK(strstr(s, "<text class=\"tid\" x=\"4\" y=\"58\">a second name of 8 (tid 8)</text>") != NULL);
	/* 46 - len(" (tid 9)") = 38 characters: 37 of the name, then "…", never half an é */
	CHECK(strstr(s, "<text class=\"tid\" x=\"4\" y=\"78\">\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xe2\x80\xa6 (tid 9)</text>") != NULL);
	CHECK(strstr(s, "<text class=\"tid\" x=\"4\" y=\"98\">tid 10</text>") != NULL);
	CHECK(strstr(s, "<script") == NULL);
	CHECK(strstr(s, "12345") == NULL);
	CHECK(no_active_content(s));
	/* the order the names come in changes nothing */
	{
		const struct tl_thread rev[] = { th[5], th[4], th[3], th[2], th[1], th[0] };
		struct tl_view v2 = v;

		v2.threads = rev;
		CHECK_INT(timeline_render_svg(ev, 5, &v2, &b2, err, sizeof(err)), 0);
		CHECK_STR(buf_cstr(&b2), s);
	}
	/* without the second name of 8, the long one (49 characters) is cut: 38 with the "…" */
	{
		struct tl_view v3 = v;

		v3.nthreads = 4;
		buf_reset(&b2);
		CHECK_INT(timeline_render_svg(ev, 5, &v3, &b2, err, sizeof(err)), 0);
		CHECK(strstr(buf_cstr(&b2), ">a-very-long-thread-name-well-past-the\xe2\x80\xa6 (tid 8)</text>") != NULL);
		/* a wide gutter shows it whole; a narrow one leaves a name at least 6 characters */
		v3.gutter = 600;
		buf_reset(&b2);
		CHECK_INT(timeline_render_svg(ev, 5, &v3, &b2, err, sizeof(err)), 0);
		CHECK(strstr(buf_cstr(&b2), ">a-very-long-thread-name-well-past-the-gutter-room (tid 8)</text>") != NULL);
		v3.gutter = 120;
		buf_reset(&b2);
		CHECK_INT(timeline_render_svg(ev, 5, &v3, &b2, err, sizeof(err)), 0);
		CHECK(strstr(buf_cstr(&b2), ">nginx\xe2\x80\xa6 (tid 4211) (symptom)</text>") != NULL);
	}
	buf_release(&b);
	buf_release(&b2);
}

static void test_timeline_err(void)
{
	struct tl_event ev[1] = { { 1, 0, 10, 'r', 0, false, NULL } };
	struct tl_view v = { 1200, 5, 5, 0, 0, 0, NULL, 0, false, 0, NULL, 0 };
	struct buf b = BUF_INIT(0);
	char err[128];

	CHECK_INT(buf_puts(&b, "keep"), 0);
	CHECK_INT(timeline_render_svg(ev, 1, &v, &b, err, sizeof(err)), -1);
	CHECK_STR(err, "empty time range (from_ns >= to_ns)");
	v.from_ns = 6;
	CHECK_INT(timeline_render_svg(ev, 1, &v, &b, err, sizeof(err)), -1);
	CHECK_STR(buf_cstr(&b), "keep");
	/* output full */
	{
		struct buf small = BUF_INIT(64);

		v.from_ns = 0;
		v.to_ns = 100;
		CHECK_INT(timeline_render_svg(ev, 1, &v, &small, err, sizeof(err)), -1);
		CHECK_STR(err, "out of memory or output full");
		CHECK_INT(small.len, 0);
		buf_release(&small);
	}
	/* extreme times do not overflow */
	{
		struct tl_event x[2] = { { 1, INT64_MIN, INT64_MAX, 'r', 0, false, NULL },
					 { 2, INT64_MAX - 5, INT64_MAX, 'w', 1, false, NULL } };
		struct tl_view vx = { 1200, INT64_MIN, INT64_MAX, 0, 0, 0, "?t=", 0, false, 0, NULL, 0 };

		buf_reset(&b);
		CHECK_INT(timeline_render_svg(x, 2, &vx, &b, err, sizeof(err)), 0);
		CHECK(strstr(buf_cstr(&b), "<a href=\"?t=-9223372036854775808-") != NULL);
		CHECK(strstr(buf_cstr(&b), "-9223372036854775807\">") != NULL);
	}
	buf_release(&b);
}

static void test_timeline_merge(void)
{
	/* three events starting in one pixel column: one rect, in the class with most time */
	struct tl_event ev[] = {
		{ 7, 10200 * 1000, 100000, 'r', 0, false, "a" },
		{ 7, 10400 * 1000, 300000, 'w', 0, false, NULL },
		{ 7, 10800 * 1000, 100000, 'r', 0, true, NULL },
		{ 7, 11500 * 1000, 100000, 'r', 0, false, "next column" },
	};
	struct tl_view v = { 1130, 0, SEC, 0, 0, 0, NULL, 0, false, 0, NULL, 0 };
	struct buf b = BUF_INIT(0);
	char err[128];
	const char *s;

	CHECK_INT(timeline_render_svg(ev, 4, &v, &b, err, sizeof(err)), 0);
	s = buf_cstr(&b);
	CHECK(strstr(s, "<rect class=\"wait\" x=\"130.2\" y=\"7\" width=\"1.0\" height=\"14\" fill=\"#d9c27f\">"
			"<title>3 events, tid 7, 1 in AOI\nstart 10.200 ms, end 10.900 ms\n"
			"run 0.200 ms, wait 0.300 ms</title></rect>\n") != NULL);
	CHECK(strstr(s, "<rect class=\"run\" x=\"131.5\" y=\"7\" width=\"1.0\" height=\"14\" fill=\"#7fa7d9\">"
			"<title>run tid 7\nstart 11.500 ms, dur 0.100 ms\nnext column</title>") != NULL);
	CHECK_INT(count_sub(s, "<rect class=\"run") + count_sub(s, "<rect class=\"wait"), 2);
	buf_release(&b);
}

/* n waits of tid 1 readied by tid 2 (the first naoi of them AOI), plus a run of tid 2. */
static struct tl_event *waits(size_t n, size_t naoi)
{
	struct tl_event *ev = calloc(n + 1, sizeof(*ev));

	for (size_t i = 0; i < n; i++) {
		ev[i].tid = 1;
		ev[i].ts_ns = (int64_t)i * 1000;
		ev[i].dur_ns = 500;
		ev[i].kind = 'w';
		ev[i].readier_tid = 2;
		ev[i].aoi = i < naoi;
	}
	ev[n].tid = 2;
	ev[n].kind = 'r';
	ev[n].dur_ns = 10;
	return ev;
}

static void test_timeline_edges(void)
{
	struct tl_view v = { 1200, 0, 10 * SEC, 0, 0, 0, NULL, 0, false, 0, NULL, 0 };
	struct tl_event *ev;
	struct buf b = BUF_INIT(0);
	char err[128];
	const char *s;

	/* 2000: all drawn */
	ev = waits(2000, 0);
	CHECK_INT(timeline_render_svg(ev, 2001, &v, &b, err, sizeof(err)), 0);
	s = buf_cstr(&b);
	CHECK_INT(count_sub(s, "<line class=\"edge\""), 2000);
	CHECK(strstr(s, "class=\"note\"") == NULL);
	free(ev);
	/* 3000 with 100 AOI: only those, and a note */
	ev = waits(3000, 100);
	buf_reset(&b);
	CHECK_INT(timeline_render_svg(ev, 3001, &v, &b, err, sizeof(err)), 0);
	s = buf_cstr(&b);
	CHECK_INT(count_sub(s, "<line class=\"edge"), 100);
	CHECK_INT(count_sub(s, "<line class=\"edge aoi\""), 100);
	CHECK(strstr(s, "<text class=\"note\" x=\"120\" y=\"15\">3000 wait-graph edges in view: only the 100 of "
			"AOI waits are drawn</text>\n") != NULL);
	/* the rows move down to make room for the note */
	CHECK(strstr(s, "<text class=\"tid\" x=\"4\" y=\"34\">tid 1</text>") != NULL);
	free(ev);
	/* more AOI edges than the cap: the first 2000 of them */
	ev = waits(3000, 2500);
	buf_reset(&b);
	CHECK_INT(timeline_render_svg(ev, 3001, &v, &b, err, sizeof(err)), 0);
	s = buf_cstr(&b);
	CHECK_INT(count_sub(s, "<line class=\"edge aoi\""), 2000);
	CHECK(strstr(s, ">3000 wait-graph edges in view: only the first 2000 of the 2500 of AOI waits are "
			"drawn</text>") != NULL);
	free(ev);
	buf_release(&b);
}

static void test_timeline_perf(void)
{
	const size_t n = 100000, nthreads = 8;
	struct tl_event *ev = calloc(n, sizeof(*ev));
	struct tl_view v = { 1200, 0, SEC, 3, 400 * MS, 600 * MS, "?t=", 0, false, 0, NULL, 0 };
	struct buf b = BUF_INIT(0);
	char err[128];
	size_t rects, aoi_edges = 0;
	int64_t t0, t1;
	const char *s;

	for (size_t i = 0; i < n; i++) {
		uint64_t r = check_rand();

		ev[i].tid = 1 + (int64_t)(r % nthreads);
		ev[i].ts_ns = (int64_t)((r >> 8) % (uint64_t)SEC);
		ev[i].dur_ns = 1 + (int64_t)((r >> 40) % 20000);
		ev[i].kind = (r >> 60) & 1 ? 'w' : 'r';
		ev[i].readier_tid = ev[i].kind == 'w' ? 1 + (int64_t)((r >> 20) % (nthreads + 1)) : 0;
		ev[i].aoi = (r >> 32) % 50 == 0;
		ev[i].stack = "leaf()";
		if (ev[i].kind == 'w' && ev[i].aoi && ev[i].readier_tid != ev[i].tid &&
		    ev[i].readier_tid <= (int64_t)nthreads && ev[i].ts_ns + ev[i].dur_ns <= SEC)
			aoi_edges++;
	}
	t0 = util_now_mono_ns();
	CHECK_INT(timeline_render_svg(ev, n, &v, &b, err, sizeof(err)), 0);
	t1 = util_now_mono_ns();
	s = buf_cstr(&b);
	rects = count_sub(s, "<rect class=\"run") + count_sub(s, "<rect class=\"wait");
	/* at most one rect per row and pixel column (1070 columns) */
	CHECK(rects <= nthreads * 1071);
	CHECK(rects > nthreads * 1000);
	CHECK(strstr(s, "class=\"note\"") != NULL);
	CHECK_INT(count_sub(s, "<line class=\"edge aoi\""), aoi_edges);
	CHECK_INT(count_sub(s, "<line class=\"edge\""), 0);
	printf("timeline: %zu events rendered in %.1f ms (%zu rects, %zu edges, %zu bytes)\n", n,
	       (double)(t1 - t0) / 1e6, rects, aoi_edges, b.len);
	buf_release(&b);
	free(ev);
}

/* ---- plot ---- */

static void plot_ticks(double xmax, double ymax, double fixlo, double fixhi, const char *xt, const char *yt)
{
	double x[2] = { 0, xmax }, y[2] = { 0, ymax };
	struct plot_series s = { "s", x, y, 2 };
	struct plot_opts o = { NULL, NULL, NULL, 640, 400, fixlo, fixhi, 0 };
	struct buf b = BUF_INIT(0);
	char t[1024];

	CHECK_INT(plot_render_svg(&s, 1, &o, &b), 0);
	CHECK_STR(texts_of(buf_cstr(&b), "xtick", t, sizeof(t)), xt);
	CHECK_STR(texts_of(buf_cstr(&b), "ytick", t, sizeof(t)), yt);
	buf_release(&b);
}

static void test_plot_ticks(void)
{
	plot_ticks(10, 0.83, 0, 0, "0,2,4,6,8,10", "0.0,0.2,0.4,0.6,0.8,1.0");
	plot_ticks(37, 1, 0, 0, "0,10,20,30,40", "0.0,0.2,0.4,0.6,0.8,1.0");
	plot_ticks(14.5, 0.0042, 0, 0, "0,2,4,6,8,10,12,14,16", "0.000,0.001,0.002,0.003,0.004,0.005");
	plot_ticks(12345, 7, 0, 0, "0,2000,4000,6000,8000,10000,12000,14000", "0,1,2,3,4,5,6,7");
	plot_ticks(3, 0.3, 0, 0, "0.0,0.5,1.0,1.5,2.0,2.5,3.0", "0.00,0.05,0.10,0.15,0.20,0.25,0.30");
	plot_ticks(2e6, 1, 0, 1, "0,500000,1000000,1500000,2000000", "0.0,0.2,0.4,0.6,0.8,1.0");
	/* a fixed range keeps its ends, ticks inside */
	plot_ticks(1, 5, 0.05, 0.95, "0.0,0.2,0.4,0.6,0.8,1.0", "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9");
	/* negative values: the auto y range includes them */
	{
		double x[3] = { 1, 2, 3 }, y[3] = { -3, 7, 1 };
		struct plot_series s = { "neg", x, y, 3 };
		struct plot_opts o = { NULL, NULL, NULL, 0, 0, 0, 0, 0 };
		struct buf b = BUF_INIT(0);
		char t[512];

		CHECK_INT(plot_render_svg(&s, 1, &o, &b), 0);
		CHECK_STR(texts_of(buf_cstr(&b), "ytick", t, sizeof(t)), "-4,-2,0,2,4,6,8");
		CHECK_STR(texts_of(buf_cstr(&b), "xtick", t, sizeof(t)), "0.0,0.5,1.0,1.5,2.0,2.5,3.0");
		CHECK(strstr(buf_cstr(&b), "<title>neg: x=1, y=-3</title>") != NULL);
		buf_release(&b);
	}
}

static void test_plot_render(void)
{
	double x[4] = { 1, NAN, 2, 5 }, y[4] = { 0.5, 1, INFINITY, 0.5 };
	double x2[2] = { 0, 10 }, y2[2] = { 0, 1 };
	struct plot_series s[2] = { { "a<b>&\"c'", x, y, 4 }, { NULL, x2, y2, 2 } };
	struct plot_opts o = { "Triage <curves>", "streams opened", "coverage", 640, 400, 0, 0, 0 };
	struct buf b = BUF_INIT(0), b2 = BUF_INIT(0);
	const char *p;

	CHECK_INT(plot_render_svg(s, 2, &o, &b), 0);
	p = buf_cstr(&b);
	CHECK(starts_with(p, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"640\" "
			     "height=\"400\" viewBox=\"0 0 640 400\" font-family=\"sans-serif\" font-size=\"11\">\n"));
	CHECK(no_active_content(p));
	CHECK(strstr(p, "<b>") == NULL && strstr(p, "<curves>") == NULL);
	CHECK(strstr(p, ">Triage &lt;curves&gt;</text>") != NULL);
	/* the name escaped in the points' titles and the legend */
	CHECK(strstr(p, "<title>a&lt;b&gt;&amp;&quot;c&#39;: x=1, y=0.5</title>") != NULL);
	CHECK(strstr(p, "<title>a&lt;b&gt;&amp;&quot;c&#39;: x=5, y=0.5</title>") != NULL);
	CHECK(strstr(p, "\">a&lt;b&gt;&amp;&quot;c&#39;</text></g>") != NULL);
	CHECK(strstr(p, "\">series 2</text></g>") != NULL);
	/* non-finite points skipped: 2 + 2 points */
	CHECK_INT(count_sub(p, "<title>"), 4);
	/* layout: plot area x 64..624 (0..10), y 30..318 (1..0) with title, x label and a 2-row legend */
	CHECK(strstr(p, "<polyline class=\"s0\" fill=\"none\" stroke=\"#0072b2\" stroke-width=\"1.5\" "
			"points=\"120.0,174.0 344.0,174.0\"/>") != NULL);
	CHECK(strstr(p, "<polyline class=\"s1\" fill=\"none\" stroke=\"#d55e00\" stroke-width=\"1.5\" "
			"points=\"64.0,318.0 624.0,30.0\"/>") != NULL);
	CHECK(strstr(p, "<circle cx=\"120.0\" cy=\"174.0\" r=\"3.5\"><title>") != NULL);
	CHECK(strstr(p, "<rect x=\"61.0\" y=\"315.0\" width=\"6\" height=\"6\"><title>series 2: x=0, y=0</title>") !=
	      NULL);
	CHECK(strstr(p, "<text class=\"ylabel\" x=\"14\" y=\"174.0\" text-anchor=\"middle\" "
			"transform=\"rotate(-90 14 174.0)\">coverage</text>") != NULL);
	CHECK(strstr(p, ">streams opened</text>") != NULL);
	CHECK(util_utf8_valid(p, b.len));
	/* deterministic */
	CHECK_INT(plot_render_svg(s, 2, &o, &b2), 0);
	CHECK_STR(buf_cstr(&b2), p);
	buf_release(&b2);

	/* nine series: classes cycle s0..s7, each with its own marker shape */
	{
		struct plot_series many[9];
		struct plot_opts o2 = o;
		size_t nshapes = 0;

		for (int i = 0; i < 9; i++) {
			many[i].name = "m";
			many[i].x = x2;
			many[i].y = y2;
			many[i].n = 2;
		}
		buf_reset(&b);
		o2.height = 300;
		CHECK_INT(plot_render_svg(many, 9, &o2, &b), 0);
		p = buf_cstr(&b);
		CHECK_INT(count_sub(p, "<polyline class=\"s0\""), 2);
		CHECK_INT(count_sub(p, "<polyline class=\"s7\""), 1);
		CHECK(strstr(p, "class=\"s8") == NULL);
		CHECK_INT(count_sub(p, "<polyline "), 9);
		/* the legend grew the svg: 30 + 80 + 24 + 18 + 8 + 9 * 16 */
		CHECK(strstr(p, "height=\"304\" viewBox=\"0 0 640 304\"") != NULL);
		nshapes += strstr(p, "<circle cx") != NULL;
		nshapes += strstr(p, "<rect x") != NULL;
		nshapes += strstr(p, "m0,-4l4,7h-8z") != NULL;
		nshapes += strstr(p, "m0,-4.5l4.5,4.5l-4.5,4.5l-4.5,-4.5z") != NULL;
		nshapes += strstr(p, "m0,4l4,-7h-8z") != NULL;
		nshapes += strstr(p, "m-4,0h8m-4,-4v8") != NULL;
		nshapes += strstr(p, "m-3,-3l6,6m-6,0l6,-6") != NULL;
		nshapes += strstr(p, "r=\"3.5\" fill=\"#fff\"") != NULL;
		CHECK_INT(nshapes, 8);
	}
	/* nothing to plot: axes only */
	{
		struct plot_opts e = { NULL, NULL, NULL, 0, 0, 0, 0, 0 };
		char t[256];

		buf_reset(&b);
		CHECK_INT(plot_render_svg(NULL, 0, &e, &b), 0);
		CHECK_STR(texts_of(buf_cstr(&b), "xtick", t, sizeof(t)), "0.0,0.2,0.4,0.6,0.8,1.0");
		CHECK(strstr(buf_cstr(&b), "<polyline") == NULL);
	}
	/* output full: refused, out as it was */
	{
		struct buf small = BUF_INIT(500);

		CHECK_INT(plot_render_svg(s, 2, &o, &small), -1);
		CHECK_INT(small.len, 0);
		buf_release(&small);
	}
	buf_release(&b);
}

/* Whether some x tick reads label. */
static bool has_xtick(const char *svg, const char *label)
{
	for (const char *p = strstr(svg, "class=\"xtick\""); p; p = strstr(p + 1, "class=\"xtick\"")) {
		const char *gt = strchr(p, '>'), *end = gt ? strstr(gt, "</text>") : NULL;
		if (end && (size_t)(end - gt - 1) == strlen(label) && strncmp(gt + 1, label, strlen(label)) == 0)
			return true;
	}
	return false;
}

/* A count axis (streams opened) never has fractional ticks. */
static void test_plot_xcount(void)
{
	static const double x[] = { 1, 1 }, y[] = { 0.5, 1 };
	struct plot_series sr = { "signature", x, y, 2 };
	struct plot_opts o = { NULL, NULL, NULL, 640, 400, 0, 0, 1 };
	struct buf b = BUF_INIT(0);

	CHECK_INT(plot_render_svg(&sr, 1, &o, &b), 0);
	CHECK(!has_xtick(buf_cstr(&b), "0.2"));
	CHECK(has_xtick(buf_cstr(&b), "1"));
	CHECK(has_xtick(buf_cstr(&b), "5"));
	buf_reset(&b);
	o.xcount = 0;
	CHECK_INT(plot_render_svg(&sr, 1, &o, &b), 0);
	CHECK(has_xtick(buf_cstr(&b), "0.2"));
	buf_release(&b);
}

int main(void)
{
	RUN(test_flame_basic);
	RUN(test_flame_diff);
	RUN(test_flame_escape);
	RUN(test_flame_labels);
	RUN(test_flame_thin);
	RUN(test_flame_limits);
	RUN(test_flame_colour);
	RUN(test_flame_search);
	RUN(test_flame_perf);
	RUN(test_timeline_basic);
	RUN(test_timeline_names);
	RUN(test_timeline_err);
	RUN(test_timeline_merge);
	RUN(test_timeline_edges);
	RUN(test_timeline_perf);
	RUN(test_plot_ticks);
	RUN(test_plot_render);
	RUN(test_plot_xcount);
	return CHECK_DONE();
}
