/* Unit tests of sm-web's request helpers and page pieces that need no server: form
 * decoding (req_form), escaped frame names, costs, bars, and the page frame. */
#include "arena.h"
#include "check.h"
#include "html.h"
#include "server.h"

#include <string.h>

static struct web_config cfg;

static void req_init(struct req *rq, const char *body)
{
	memset(rq, 0, sizeof(*rq));
	web_config_default(&cfg);
	rq->cfg = &cfg;
	rq->a = arena_open(0);
	rq->out.max = 1 << 20;
	rq->body.max = 1 << 20;
	buf_puts(&rq->body, body);
}

static void req_done(struct req *rq)
{
	buf_release(&rq->body);
	buf_release(&rq->out);
	arena_free(rq->a);
}

static void test_form(void)
{
	struct req rq;

	req_init(&rq, "name=a+b%3Cc%3E&frames=x%0Ay&csrf=0123&empty=&bad=%ZZ%4&utf=%C3%A9&inv=%FF");
	CHECK_STR(req_form(&rq, "name"), "a b<c>");
	CHECK_STR(req_form(&rq, "frames"), "x\ny");
	CHECK_STR(req_form(&rq, "csrf"), "0123");
	CHECK_STR(req_form(&rq, "empty"), "");
	/* a broken escape is kept as it is, not read past the end */
	CHECK_STR(req_form(&rq, "bad"), "%ZZ%4");
	CHECK_STR(req_form(&rq, "utf"), "\xc3\xa9");
	/* decoded text that is not UTF-8 is refused */
	CHECK(req_form(&rq, "inv") == NULL);
	CHECK(req_form(&rq, "nam") == NULL);
	CHECK(req_form(&rq, "missing") == NULL);
	req_done(&rq);

	req_init(&rq, "");
	CHECK(req_form(&rq, "x") == NULL);
	req_done(&rq);
}

static void test_html(void)
{
	struct req rq;

	req_init(&rq, "");
	html_frame_short(&rq, "app!std::map<K, V>::find(K const&) const", 60);
	CHECK_STR(buf_cstr(&rq.out), "<span class=\"frame\" title=\"app!std::map&lt;K, V&gt;::find(K const&amp;) const\">"
				      "std::map&lt;K, V&gt;::find(K const&amp;) const</span>");
	buf_reset(&rq.out);
	html_frame_short(&rq, "app!ns::f(int)", 60);
	CHECK_STR(buf_cstr(&rq.out), "<span class=\"frame\" title=\"app!ns::f(int)\">ns::f</span>");
	buf_reset(&rq.out);
	/* cut on a character boundary, with an ellipsis */
	html_frame_short(&rq, "m!\xc3\xa9\xc3\xa9\xc3\xa9", 3);
	CHECK_STR(buf_cstr(&rq.out), "<span class=\"frame\" title=\"m!\xc3\xa9\xc3\xa9\xc3\xa9\">\xc3\xa9\xe2\x80\xa6</span>");
	buf_reset(&rq.out);
	html_text(&rq, "<script>alert('x')</script>");
	CHECK_STR(buf_cstr(&rq.out), "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
	buf_reset(&rq.out);
	html_cost(&rq, 1234567890);
	html_raw(&rq, "|");
	html_cost(&rq, 12345678);
	html_raw(&rq, "|");
	html_cost(&rq, 850000);
	CHECK_STR(buf_cstr(&rq.out), "1.235 s|12.3 ms|850 µs");
	buf_reset(&rq.out);
	html_bar(&rq, 5, 10, 60);
	html_bar(&rq, 0.001, 10, 60);
	CHECK_STR(buf_cstr(&rq.out),
		  "<svg class=\"bar\" width=\"60\" height=\"8\" aria-hidden=\"true\"><rect width=\"30.0\" height=\"8\"></rect></svg>"
		  "<svg class=\"bar\" width=\"60\" height=\"8\" aria-hidden=\"true\"><rect width=\"1.0\" height=\"8\"></rect></svg>");
	/* the page frame: the title escaped, the script from this server only */
	strcpy(rq.csrf, "c0ffee");
	html_begin(&rq, "Cluster <b>");
	html_end(&rq);
	CHECK(strstr(buf_cstr(&rq.out), "<title>Cluster &lt;b&gt; · stackmine</title>") != NULL);
	CHECK(strstr(buf_cstr(&rq.out), "<body data-csrf=\"c0ffee\">") != NULL);
	CHECK(strstr(buf_cstr(&rq.out), "<script src=\"/static/app.js\" defer></script>") != NULL);
	CHECK_INT(rq.status, 200);
	html_redirect(&rq, "/runs");
	CHECK_INT(rq.status, 303);
	CHECK_STR(rq.hname[0], "Location");
	CHECK_STR(rq.hval[0], "/runs");
	req_done(&rq);
}

int main(void)
{
	RUN(test_form);
	RUN(test_html);
	return CHECK_DONE();
}
