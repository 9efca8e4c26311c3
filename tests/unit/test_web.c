/* Unit tests of sm-web's request layer and page pieces that need no server: form
 * decoding (req_form), who may read and write (roles, the cross-site request
 * token, Origin), routing, escaped frame names, costs, bars, the page frame, and the
 * check of the settings pushed to the agents, whose limits must be the database's, the
 * confirmation of destructive forms and the runs page's orders. */
#include "common/arena.h"
#include "common/migrations.h"
#include "guardcore/settings.h"
#include "tests/unit/check.h"
#include "web/costcache.h"
#include "web/fleet.h"
#include "web/html.h"
#include "web/model.h"
#include "web/pages.h"
#include "web/request.h"
#include "web/streams.h"
#include "web/timeline.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

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

/* A request's headers, query and cookies from a table: "H:Name", "Q:name", "C:name", then the value. */
struct fake {
	const char *kv[16][2];
};

static const char *fake_lookup(void *conn, enum req_kind kind, const char *name)
{
	const struct fake *f = conn;
	char want[64];

	snprintf(want, sizeof(want), "%c:%s", kind == REQ_HEADER ? 'H' : kind == REQ_QUERY ? 'Q' : 'C', name);
	for (int i = 0; i < 16 && f->kv[i][0]; i++)
		if (strcasecmp(f->kv[i][0], want) == 0)
			return f->kv[i][1];
	return NULL;
}

static void fake_each(void *conn, enum req_kind kind, bool (*fn)(void *cls, const char *key, const char *value),
		      void *cls)
{
	const struct fake *f = conn;
	char k = kind == REQ_HEADER ? 'H' : kind == REQ_QUERY ? 'Q' : 'C';

	for (int i = 0; i < 16 && f->kv[i][0]; i++)
		if (f->kv[i][0][0] == k && !fn(cls, f->kv[i][0] + 2, f->kv[i][1]))
			return;
}

static const struct req_source fake_source = { fake_lookup, fake_each };
static struct req_env env;

static void req_fake(struct req *rq, struct fake *f, const char *body)
{
	req_init(rq, body);
	rq->src = &fake_source;
	rq->conn = f;
	rq->env = &env;
	memset(env.secret, 7, sizeof(env.secret));
	env.cfg = &cfg;
}

static void test_may_write(void)
{
	static const char token[] = "sm_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char csrf[33], wrong[33];
	struct fake f = { { { NULL } } };
	struct req rq;

	req_fake(&rq, &f, "");
	req_csrf_of(&env, token, csrf);
	CHECK_INT(strlen(csrf), 32);
	/* the token is keyed: another secret gives another token */
	env.secret[0] ^= 1;
	req_csrf_of(&env, token, wrong);
	env.secret[0] ^= 1;
	CHECK(strcmp(csrf, wrong) != 0);
	/* no token: 401; an ingest token: 403; a bearer analyst: no cross-site token needed */
	CHECK(!req_may_write(&rq, true));
	CHECK_INT(rq.status, 401);
	CHECK_STR(buf_cstr(&rq.out), "{\"error\": \"an analyst or admin token is required\"}\n");
	rq.role = AUTH_INGEST;
	CHECK(!req_may_write(&rq, true));
	CHECK_INT(rq.status, 403);
	rq.role = AUTH_ANALYST;
	CHECK(req_may_write(&rq, true));
	/* a cookie session: the header must carry the session's token */
	rq.via_cookie = true;
	memcpy(rq.csrf, csrf, sizeof(csrf));
	CHECK(!req_may_write(&rq, true));
	CHECK_STR(buf_cstr(&rq.out), "{\"error\": \"cross-site request token missing or wrong (reload the page)\"}\n");
	f.kv[0][0] = "H:X-CSRF-Token";
	f.kv[0][1] = wrong;
	CHECK(!req_may_write(&rq, true));
	CHECK_INT(rq.status, 403);
	f.kv[0][1] = csrf;
	CHECK(req_may_write(&rq, true));
	/* Origin: this server's host, else refused; a page form's field works like the header */
	f.kv[1][0] = "H:Origin";
	f.kv[1][1] = "http://evil.example";
	f.kv[2][0] = "H:Host";
	f.kv[2][1] = "127.0.0.1:8081";
	CHECK(!req_may_write(&rq, false));
	CHECK_INT(rq.status, 403);
	CHECK_STR(buf_cstr(&rq.out), "cross-site request refused (Origin is not this server)\n");
	f.kv[1][1] = "http://127.0.0.1:8081";
	CHECK(req_may_write(&rq, true));
	req_done(&rq);
	f.kv[0][0] = "H:Other";
	req_fake(&rq, &f, "a=1&csrf=");
	rq.role = AUTH_ADMIN;
	rq.via_cookie = true;
	memcpy(rq.csrf, csrf, sizeof(csrf));
	CHECK(!req_may_write(&rq, false));
	req_done(&rq);
	{
		char body[64];

		snprintf(body, sizeof(body), "a=1&csrf=%s", csrf);
		req_fake(&rq, &f, body);
		rq.role = AUTH_ADMIN;
		rq.via_cookie = true;
		memcpy(rq.csrf, csrf, sizeof(csrf));
		CHECK(req_may_write(&rq, false));
		req_done(&rq);
	}
	/* reads: a token, or anonymous reads allowed */
	req_fake(&rq, &f, "");
	CHECK(!req_may_read(&rq));
	cfg.anonymous_read = true;
	CHECK(req_may_read(&rq));
	cfg.anonymous_read = false;
	rq.role = AUTH_ANALYST;
	CHECK(req_may_read(&rq));
	req_done(&rq);
}

static const char *routed;

static void r_list(struct req *rq) { routed = rq->arg ? rq->arg : "list"; }
static void r_one(struct req *rq) { routed = rq->arg; }

static void test_routes(void)
{
	static const struct req_route routes[] = {
		{ REQ_M_GET, "/v/things", r_list, NULL },
		{ REQ_M_POST, "/v/things", r_list, NULL },
		{ REQ_M_GET, "/v/things/export", r_list, NULL },
		{ REQ_M_GET, "/v/things/#", r_one, "thing" },
		{ REQ_M_PATCH, "/v/things/#", r_one, "thing" },
		{ REQ_M_GET, "/v/names/*", r_one, NULL },
		{ REQ_M_GET, "/v/hosts/**", r_one, NULL },
	};
	static const struct {
		enum req_method method;
		const char *path, *arg, *allow, *bad;
	} cases[] = {
		{ REQ_GET, "/v/things", "list", "GET, HEAD, POST", NULL },
		{ REQ_HEAD, "/v/things", "list", "GET, HEAD, POST", NULL },
		{ REQ_POST, "/v/things", "list", "GET, HEAD, POST", NULL },
		{ REQ_DELETE, "/v/things", NULL, "GET, HEAD, POST", NULL },
		/* a literal segment wins over an id */
		{ REQ_GET, "/v/things/export", "list", "GET, HEAD", NULL },
		{ REQ_GET, "/v/things/42", "42", "GET, HEAD, PATCH", NULL },
		{ REQ_PATCH, "/v/things/42", "42", "GET, HEAD, PATCH", NULL },
		{ REQ_POST, "/v/things/42", NULL, "GET, HEAD, PATCH", NULL },
		/* not an id: the route that wanted one says so */
		{ REQ_GET, "/v/things/x1", NULL, "", "x1" },
		{ REQ_GET, "/v/things/0", NULL, "", "0" },
		{ REQ_GET, "/v/names/a%20b", "a%20b", "GET, HEAD", NULL },
		{ REQ_GET, "/v/names", NULL, "", NULL },
		{ REQ_GET, "/v/names/a/b", NULL, "", NULL },
		{ REQ_GET, "/v/things/", NULL, "", NULL },
		{ REQ_GET, "/v/thing", NULL, "", NULL },
		{ REQ_GET, "/v/things/42/more", NULL, "", NULL },
		/* '**': the rest of the path, slashes and all */
		{ REQ_GET, "/v/hosts/web-1", "web-1", "GET, HEAD", NULL },
		{ REQ_GET, "/v/hosts/<b>x</b>", "<b>x</b>", "GET, HEAD", NULL },
		{ REQ_GET, "/v/hosts/a//b/", "a//b/", "GET, HEAD", NULL },
		{ REQ_GET, "/v/hosts/", NULL, "", NULL },
		{ REQ_GET, "/v/hosts", NULL, "", NULL },
	};
	int bad = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fake f = { { { NULL } } };
		struct req_match m;
		struct req rq;

		req_fake(&rq, &f, "");
		rq.method = cases[i].method;
		rq.path = cases[i].path;
		routed = NULL;
		req_route(routes, sizeof(routes) / sizeof(routes[0]), &rq, &m);
		if (m.route) {
			rq.arg = m.arg;
			m.route->fn(&rq);
		}
		if ((cases[i].arg == NULL) != (routed == NULL) || (routed && strcmp(routed, cases[i].arg) != 0) ||
		    strcmp(req_allow_header(m.allowed), cases[i].allow) != 0 ||
		    (cases[i].bad == NULL) != (m.bad_arg == NULL) ||
		    (m.bad_arg && strcmp(m.bad_arg, cases[i].bad) != 0)) {
			fprintf(stderr, "  route %s %s: got %s, allow \"%s\", bad id %s\n", cases[i].path,
				cases[i].arg ? cases[i].arg : "-", routed ? routed : "(none)",
				req_allow_header(m.allowed), m.bad_arg ? m.bad_arg : "-");
			bad++;
		}
		req_done(&rq);
	}
	CHECK_INT(bad, 0);
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
				      "std::map&lt;K, V&gt;::find</span>");
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
	html_raw(&rq, "|");
	html_count(&rq, 50110);
	html_raw(&rq, "|");
	html_interval(&rq, -460.9e6, 2.607e9);
	html_raw(&rq, "|");
	html_share(&rq, 0.456);
	html_raw(&rq, "|");
	html_label_value(&rq, "unit.threshold_ns", "20080349");
	html_raw(&rq, "|");
	html_label_value(&rq, "host", "<b>");
	CHECK_STR(buf_cstr(&rq.out), "1.23 s|12.3 ms|850 µs|50,110|[-0.46 s, 2.61 s]|45.6 %|"
		  "<span title=\"20080349\">20.1 ms</span>|&lt;b&gt;");
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

/* After logging in, only a path of this origin as a browser parses it (WHATWG URL), else "/". */
static void test_local_next(void)
{
	static const char *const hostile[] = {
		"/\t/evil.example", "/\n/evil.example", "/\r/evil.example", "/\x0b/evil.example",
		"/\x0c/evil.example", "/\x1f/evil.example", "/\x7f/evil.example", "//evil.example",
		"/\\evil.example", "/x\\..\\\\evil.example", "/ /evil.example", "/runs?x=a b",
		"http://evil.example/", "evil.example", "", "\t//evil.example",
	};
	struct req rq;

	req_init(&rq, "");
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++)
		CHECK_STR(req_local_next(&rq, hostile[i]), "/");
	CHECK_STR(req_local_next(&rq, NULL), "/");
	CHECK_STR(req_local_next(&rq, "/runs/2?sort=streams"), "/runs/2?sort=streams");
	CHECK_STR(req_local_next(&rq, "/"), "/");
	/* an encoded slash stays encoded: a path segment, not another host */
	CHECK_STR(req_local_next(&rq, "/%2F/evil.example"), "/%2F/evil.example");
	CHECK_STR(req_local_next(&rq, "/streams?host=\xc3\xa9"), "/streams?host=%C3%A9");
	req_done(&rq);
}

/* The limits of guardcore/settings.h's table are the CHECK constraints of the agent_settings table
 * (sql/011): the database refuses no value the API and the agents take, and takes none they refuse. */
static void test_settings_schema(void)
{
	const char *create = NULL;

	for (int i = 0; i < sm_nmigrations; i++) {
		const char *sql = sm_migrations[i].sql, *t = strstr(sql, "CREATE TABLE agent_settings");

		if (t)
			create = t;
		/* a later change to the table must be read here too */
		CHECK(!strstr(sql, "ALTER TABLE agent_settings"));
	}
	CHECK(create != NULL);
	if (!create)
		return;
	for (size_t i = 0; i < GSET_COUNT; i++) {
		const struct guard_setting *g = &guard_settings[i];
		char col[80], check[160];
		const char *line;
		double lo = NAN, hi = NAN;

		snprintf(col, sizeof(col), "\n\t%s %s", g->name,
			 g->type == GSET_BOOL ? "boolean" : g->type == GSET_WHOLE ? "integer" : "double precision");
		line = strstr(create, col);
		if (!line) {
			fprintf(stderr, "  agent_settings: no column '%s' of that type\n", g->name);
			CHECK(line != NULL);
			continue;
		}
		if (g->type == GSET_BOOL) {
			CHECK(g->min == 0 && g->max == 1);
			continue;
		}
		snprintf(check, sizeof(check), " CHECK (%s >= %%lf AND %s <= %%lf)", g->name, g->name);
		CHECK_INT(sscanf(line + strlen(col), check, &lo, &hi), 2);
		if (lo != g->min || hi != g->max)
			fprintf(stderr, "  %s: the database's [%g, %g], the table's [%g, %g]\n", g->name, lo, hi, g->min,
				g->max);
		CHECK(lo == g->min && hi == g->max);
	}
}

/* The one check of pushed settings, as the API and the page call it. */
static void test_settings_check(void)
{
	static const struct fleet_words w = { "true", "false", "null" };
	struct fleet_given given[GSET_COUNT] = { { FLEET_UNSET, false, 0, false } };
	struct agent_settings s;
	char err[256];

	CHECK_INT(fleet_settings_check("", given, NULL, &w, &s, err, sizeof(err)), WEB_EINVAL);
	CHECK_STR(err, "app: required, 1 to 255 bytes ('*': every app)");
	given[GSET_SAMPLE_HZ] = (struct fleet_given){ FLEET_NUMBER, false, GSET_MAX_SAMPLE_HZ, true };
	given[GSET_GUARD] = (struct fleet_given){ FLEET_BOOL, false, 0, false };
	CHECK_INT(fleet_settings_check("nginx", given, NULL, &w, &s, err, sizeof(err)), 0);
	CHECK(s.set[GSET_SAMPLE_HZ] && s.value[GSET_SAMPLE_HZ] == GSET_MAX_SAMPLE_HZ);
	CHECK(s.set[GSET_GUARD] && s.value[GSET_GUARD] == 0 && !s.set[GSET_K]);
	CHECK_STR(s.note, "");
	given[GSET_SAMPLE_HZ].d = 2.5;
	given[GSET_SAMPLE_HZ].whole = false;
	CHECK_INT(fleet_settings_check("nginx", given, NULL, &w, &s, err, sizeof(err)), WEB_EINVAL);
	CHECK_STR(err, "sample_hz: a whole number from 1 to 10000, or null (as the agents were started)");
	given[GSET_SAMPLE_HZ].kind = FLEET_UNSET;
	given[GSET_K] = (struct fleet_given){ FLEET_NUMBER, false, GSET_MAX_K + 0.5, false };
	CHECK_INT(fleet_settings_check("nginx", given, NULL, &w, &s, err, sizeof(err)), WEB_EINVAL);
	given[GSET_K] = (struct fleet_given){ FLEET_NUMBER, false, 6.5, false };
	given[GSET_GUARD].kind = FLEET_BAD;
	CHECK_INT(fleet_settings_check("nginx", given, NULL, &w, &s, err, sizeof(err)), WEB_EINVAL);
	CHECK_STR(err, "guard: true, false, or null (as the agents were started)");
	CHECK(guard_setting_valid(GSET_MIN_WAIT_US, GSET_MIN_MIN_WAIT_US));
	CHECK(!guard_setting_valid(GSET_MIN_WAIT_US, GSET_MIN_MIN_WAIT_US - 1));
	CHECK(!guard_setting_valid(GSET_K, NAN));
	CHECK(guard_setting_find("reports_per_min") == &guard_settings[GSET_REPORTS_PER_MIN]);
	CHECK(guard_setting_find("note") == NULL);
}

/* A destructive form's first POST only asks (carrying the form's fields named); confirm=1 acts. */
static void test_confirmed(void)
{
	static const char *const keep[] = { "app", "none", NULL };
	struct req rq;

	req_init(&rq, "app=%3Cb%3Ex%26y&csrf=t");
	CHECK(!pages_confirmed(&rq, "Remove it?", "Really.", "/fleet/settings/delete", "Remove", "/fleet", keep));
	CHECK_INT(rq.status, 200);
	CHECK(strstr(buf_cstr(&rq.out), "<h1>Remove it?</h1><form class=\"confirm\" method=\"post\" "
		  "action=\"/fleet/settings/delete\"><input type=\"hidden\" name=\"csrf\" value=\"\"><input "
		  "type=\"hidden\" name=\"app\" value=\"&lt;b&gt;x&amp;y\"><p>Really.</p><input type=\"hidden\" "
		  "name=\"confirm\" value=\"1\"><button type=\"submit\" class=\"danger\">Remove</button> <a "
		  "class=\"button secondary\" href=\"/fleet\">Cancel</a></form>") != NULL);
	CHECK(strstr(buf_cstr(&rq.out), "name=\"none\"") == NULL);
	req_done(&rq);
	req_init(&rq, "app=x&confirm=1");
	CHECK(pages_confirmed(&rq, "Remove it?", "Really.", "/fleet/settings/delete", "Remove", "/fleet", keep));
	CHECK_INT((int)rq.out.len, 0);
	req_done(&rq);
	req_init(&rq, "confirm=yes");
	CHECK(!pages_confirmed(&rq, "Remove it?", "Really.", "/x", "Remove", "/", NULL));
	req_done(&rq);
}

/* ?sort= of the runs page: only the names it knows, each its own. */
static void test_run_sort(void)
{
	for (int i = 0; i < RUN_SORT_N; i++)
		CHECK_INT(model_run_sort_parse(model_run_sort_name((enum model_run_sort)i)), i);
	CHECK_INT(model_run_sort_parse("worst"), RUN_SORT_WORST);
	CHECK_INT(model_run_sort_parse("newest"), RUN_SORT_NEWEST);
	CHECK_INT(model_run_sort_parse("x.run_id DESC"), -1);
	CHECK_INT(model_run_sort_parse("Worst"), -1);
	CHECK_INT(model_run_sort_parse(""), -1);
	CHECK_INT(model_run_sort_parse(NULL), -1);
}

/* The timeline's hover text of a stack: outermost first, the outer frames dropped past
 * TL_STACK_FRAMES, long names cut on a character boundary. */
static void test_stack_text(void)
{
	const char *two[] = { "app!main", "libc!read" };
	const char *deep[20];
	char names[20][16], longname[TL_FRAME_BYTES + 8];
	const char *one[1] = { longname };
	struct buf b = BUF_INIT(1 << 16);

	CHECK_INT(timeline_stack_text(&b, two, 2), 0);
	CHECK_STR(buf_cstr(&b), "app!main\nlibc!read");
	buf_reset(&b);
	CHECK_INT(timeline_stack_text(&b, two, 0), 0);
	CHECK_STR(buf_cstr(&b), "");
	for (int i = 0; i < 20; i++) {
		snprintf(names[i], sizeof(names[i]), "f%d", i);
		deep[i] = names[i];
	}
	buf_reset(&b);
	CHECK_INT(timeline_stack_text(&b, deep, 17), 0);
	CHECK_STR(buf_cstr(&b), "… 1 outer frame\nf1\nf2\nf3\nf4\nf5\nf6\nf7\nf8\nf9\nf10\nf11\nf12\nf13\nf14\nf15\nf16");
	buf_reset(&b);
	CHECK_INT(timeline_stack_text(&b, deep, 20), 0);
	CHECK(strncmp(buf_cstr(&b), "… 4 outer frames\nf4\n", strlen("… 4 outer frames\nf4\n")) == 0);
	CHECK(strstr(buf_cstr(&b), "\nf19") != NULL && strstr(buf_cstr(&b), "\nf3\n") == NULL);
	/* a name of TL_FRAME_BYTES - 1 ASCII bytes then "é": the cut does not split the é */
	memset(longname, 'x', TL_FRAME_BYTES - 1);
	memcpy(longname + TL_FRAME_BYTES - 1, "\xc3\xa9yz", 5);
	buf_reset(&b);
	CHECK_INT(timeline_stack_text(&b, one, 1), 0);
	CHECK_INT((int)b.len, TL_FRAME_BYTES - 1 + (int)strlen("…"));
	CHECK(strcmp(buf_cstr(&b) + TL_FRAME_BYTES - 1, "…") == 0);
	buf_release(&b);
}

/* The streams list's time range: presets, and the form's datetime-local values read as UTC. */
static void test_stream_times(void)
{
	int64_t ns = -1;

	CHECK_INT(streams_range_ns("1h", &ns), 0);
	CHECK(ns == 3600LL * 1000000000);
	CHECK_INT(streams_range_ns("7d", &ns), 0);
	CHECK(ns == 7LL * 86400 * 1000000000);
	CHECK_INT(streams_range_ns("all", &ns), 0);
	CHECK(ns == 0);
	CHECK_INT(streams_range_ns("2h", &ns), -1);
	CHECK_INT(streams_range_ns(NULL, &ns), -1);
	CHECK_INT(streams_parse_time("2026-11-29T14:00", &ns), 0);
	CHECK(ns == 1795960800LL * 1000000000);
	CHECK_INT(streams_parse_time("2026-11-29T14:00:07", &ns), 0);
	CHECK(ns == 1795960807LL * 1000000000);
	CHECK_INT(streams_parse_time("2026-11-29T14:00:07.5", &ns), 0);
	CHECK(ns == 1795960807LL * 1000000000 + 500000000);
	CHECK_INT(streams_parse_time("2026-11-29T15:00:00+01:00", &ns), 0);
	CHECK(ns == 1795960800LL * 1000000000);
	CHECK_INT(streams_parse_time("2026-11-29T14:00:00Z", &ns), 0);
	CHECK(ns == 1795960800LL * 1000000000);
	CHECK_INT(streams_parse_time("1795960800000000000", &ns), 0);
	CHECK(ns == 1795960800LL * 1000000000);
	CHECK_INT(streams_parse_time("2026-11-29", &ns), -1);
	CHECK_INT(streams_parse_time("2026-11-29 14:00", &ns), -1);
	CHECK_INT(streams_parse_time("2026-13-29T14:00", &ns), -1);
	CHECK_INT(streams_parse_time("yesterday", &ns), -1);
	CHECK_INT(streams_parse_time("", &ns), -1);
	CHECK_INT(streams_parse_time("2026-11-29T14:00junk", &ns), -1);
}

/* A model with n labels named k0.. and words, and modes words when modes is set. */
static struct attribution_costmodel model(struct arena *a, size_t n, int modes, size_t streams)
{
	struct attribution_costmodel m = { .streams = streams, .tested = n + 1, .keys_skipped = 2, .n = n };
	char t[128];

	m.v = arena_calloc(a, n + 1, sizeof(*m.v));
	for (size_t i = 0; i < n; i++) {
		snprintf(t, sizeof(t), "k%zu", i);
		m.v[i].key = arena_strndup(a, t, strlen(t));
		snprintf(t, sizeof(t), "cost grows with k%zu: %zu ms per unit", i, i + 1);
		m.v[i].words = arena_strndup(a, t, strlen(t));
		m.v[i].fit.form = COSTMODEL_LINEAR;
		m.v[i].fit.slope_ns = 1e6 * (double)(i + 1);
		m.v[i].fit.n = streams;
	}
	m.modes.k = modes ? 2 : 1;
	m.modes.n = streams;
	m.modes_words = modes ? "two modes: 3 ms (80 %) and 45 ms (20 %)" : NULL;
	return m;
}

/* The cost models' cache: a copy comes back whole, clusters and problems apart; the least recently
 * used goes when full; one larger than the cache, ids that are none, a NULL cache keep nothing. */
static void test_costcache(void)
{
	struct arena *a = arena_open(0), *b = arena_open(0);
	struct attribution_costmodel m = model(a, 3, 1, 2000), got;
	struct costcache *c;
	size_t entries, other, bytes, one;

	CHECK((c = costcache_open(4096)) != NULL);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 7, b, &got), 0);
	CHECK(got.v == NULL && got.n == 0);
	costcache_put(c, ATTRIBUTION_CLUSTER, 7, &m);
	costcache_usage(c, &entries, &other, &one);
	CHECK_INT((long long)entries, 1);
	CHECK_INT((long long)other, 0);
	CHECK(one > sizeof(m) && one < 16384 / 4);
	/* the arena of the request that computed it is gone: the copy is the cache's */
	arena_free(a);
	a = arena_open(0);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 7, b, &got), 1);
	CHECK_INT((long long)got.n, 3);
	CHECK_INT((long long)got.streams, 2000);
	CHECK_INT((long long)got.tested, 4);
	CHECK_INT((long long)got.keys_skipped, 2);
	CHECK_INT((long long)got.modes.k, 2);
	CHECK_STR(got.v[2].key, "k2");
	CHECK_STR(got.v[2].words, "cost grows with k2: 3 ms per unit");
	CHECK(got.v[2].fit.slope_ns == 3e6 && got.v[2].fit.form == COSTMODEL_LINEAR);
	CHECK_STR(got.modes_words, "two modes: 3 ms (80 %) and 45 ms (20 %)");
	/* a problem of the same id is another thing */
	CHECK_INT(costcache_get(c, ATTRIBUTION_PROBLEM, 7, b, &got), 0);
	/* no modes words stay none */
	m = model(a, 0, 0, 10);
	costcache_put(c, ATTRIBUTION_PROBLEM, 7, &m);
	CHECK_INT(costcache_get(c, ATTRIBUTION_PROBLEM, 7, b, &got), 1);
	CHECK(got.modes_words == NULL && got.n == 0 && got.streams == 10);
	/* full: the least recently used goes. k models fit; the first, read again, stays; the second goes */
	costcache_free(c);
	CHECK((c = costcache_open(16384)) != NULL);
	m = model(a, 3, 1, 2000);
	for (int64_t id = 1; id <= (int64_t)(16384 / one); id++)
		costcache_put(c, ATTRIBUTION_CLUSTER, id, &m);
	costcache_usage(c, &entries, &other, &bytes);
	CHECK_INT((long long)entries, (long long)(16384 / one));
	CHECK_INT((long long)bytes, (long long)(16384 / one * one));
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 1, b, &got), 1);
	costcache_put(c, ATTRIBUTION_CLUSTER, 999, &m);
	costcache_usage(c, &entries, &other, &bytes);
	CHECK_INT((long long)entries, (long long)(16384 / one));
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 2, b, &got), 0);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 1, b, &got), 1);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 3, b, &got), 1);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 999, b, &got), 1);
	/* larger than the whole cache: not kept, nothing evicted for it */
	m = model(a, 200, 1, 2000);
	costcache_put(c, ATTRIBUTION_CLUSTER, 5000, &m);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 5000, b, &got), 0);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 999, b, &got), 1);
	/* no id, and no cache */
	costcache_put(c, ATTRIBUTION_CLUSTER, 0, &m);
	costcache_put(c, ATTRIBUTION_CLUSTER, -3, &m);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, -3, b, &got), 0);
	costcache_put(NULL, ATTRIBUTION_CLUSTER, 1, &m);
	CHECK_INT(costcache_get(NULL, ATTRIBUTION_CLUSTER, 1, b, &got), 0);
	costcache_usage(NULL, &entries, &other, &bytes);
	CHECK_INT((long long)entries, 0);
	costcache_free(c);
	costcache_free(NULL);
	/* size 0: keeps nothing */
	CHECK((c = costcache_open(0)) != NULL);
	costcache_put(c, ATTRIBUTION_CLUSTER, 1, &m);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 1, b, &got), 0);
	costcache_free(c);
	arena_free(a);
	arena_free(b);
}

static size_t flames_kept(struct costcache *c, uint64_t *served)
{
	size_t kept;

	costcache_flames(c, &kept, served);
	return kept;
}

/* A cluster's flame graph as drawn: its bytes back whole, apart from the same id's model, bounded. */
static void test_costcache_flame(void)
{
	uint64_t served;
	struct costcache *c = costcache_open(4096);
	struct arena *a = arena_open(0);
	struct attribution_costmodel m = model(a, 1, 1, 9), gm;
	struct buf out = BUF_INIT(0), big = BUF_INIT(0);
	size_t models, attributions, bytes;

	CHECK(c != NULL);
	CHECK_INT(costcache_get_flame(c, ATTRIBUTION_CLUSTER, 5, &out), 0);
	CHECK_INT((long long)out.len, 0);
	costcache_put_flame(c, ATTRIBUTION_CLUSTER, 5, "<svg>a\0b</svg>", 14);
	costcache_put(c, ATTRIBUTION_CLUSTER, 5, &m);
	CHECK_INT((long long)flames_kept(c, &served), 1);
	CHECK_INT((long long)served, 0);
	buf_puts(&out, "page:");
	CHECK_INT(costcache_get_flame(c, ATTRIBUTION_CLUSTER, 5, &out), 1);
	CHECK_INT((long long)flames_kept(c, &served), 1);
	CHECK_INT((long long)served, 1);
	CHECK_INT((long long)out.len, 19);
	CHECK(memcmp(out.data, "page:<svg>a\0b</svg>", 19) == 0);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 5, a, &gm), 1);
	CHECK_INT((long long)gm.streams, 9);
	CHECK_INT(costcache_get_flame(c, ATTRIBUTION_PROBLEM, 5, &out), 0);
	CHECK_INT(costcache_get_flame(c, ATTRIBUTION_CLUSTER, 6, &out), 0);
	CHECK_INT((long long)out.len, 19);
	/* larger than the whole cache: not kept, and nothing evicted for it */
	for (int i = 0; i < 5000; i++)
		buf_putc(&big, 'x');
	costcache_put_flame(c, ATTRIBUTION_CLUSTER, 7, big.data, big.len);
	CHECK_INT(costcache_get_flame(c, ATTRIBUTION_CLUSTER, 7, &out), 0);
	CHECK_INT((long long)flames_kept(c, &served), 1);
	/* room for one more of 2,000 bytes, not two: the least recently used goes */
	costcache_put_flame(c, ATTRIBUTION_CLUSTER, 8, big.data, 2000);
	CHECK_INT(costcache_get_flame(c, ATTRIBUTION_CLUSTER, 5, &out), 1);
	costcache_put_flame(c, ATTRIBUTION_CLUSTER, 9, big.data, 2000);
	CHECK_INT(costcache_get_flame(c, ATTRIBUTION_CLUSTER, 8, &out), 0);
	CHECK_INT(costcache_get_flame(c, ATTRIBUTION_CLUSTER, 9, &out), 1);
	costcache_usage(c, &models, &attributions, &bytes);
	CHECK(bytes <= 4096);
	/* no cache, an id that is none */
	costcache_put_flame(NULL, ATTRIBUTION_CLUSTER, 5, "x", 1);
	CHECK_INT(costcache_get_flame(NULL, ATTRIBUTION_CLUSTER, 5, &out), 0);
	costcache_put_flame(c, ATTRIBUTION_CLUSTER, 0, "x", 1);
	CHECK_INT(costcache_get_flame(c, ATTRIBUTION_CLUSTER, 0, &out), 0);
	CHECK_INT((long long)flames_kept(NULL, &served), 0);
	CHECK_INT((long long)served, 0);
	/* kept, but the page's buffer full: said, and its error stays */
	{
		struct buf tiny = BUF_INIT(8);

		CHECK_INT(costcache_get_flame(c, ATTRIBUTION_CLUSTER, 9, &tiny), -1);
		CHECK(buf_error(&tiny) != 0);
		buf_release(&tiny);
	}
	buf_release(&out);
	buf_release(&big);
	costcache_free(c);
	arena_free(a);
}

/* Attributions kept beside the models: a copy comes back whole, apart from the model of the same
 * id, counted apart, under the same bound. */
static void test_costcache_attribution(void)
{
	struct arena *a = arena_open(0), *b = arena_open(0);
	struct attribution at, got, kept;
	struct attribution_costmodel m = model(a, 2, 1, 50), gm;
	struct attribution_value *v = arena_calloc(a, 2, sizeof(*v));
	struct costcache *c = costcache_open(1 << 20);
	size_t models, attributions, bytes;

	CHECK(c != NULL && v != NULL);
	memset(&at, 0, sizeof(at));
	at.of = ATTRIBUTION_CLUSTER;
	at.run_streams = 1000;
	at.cluster_streams = 40;
	at.baseline_streams = 0;
	at.cost_ns = 123456789;
	at.tested = 17;
	at.keys_skipped = 2;
	v[0] = (struct attribution_value){ .key = arena_strndup(a, "host", 4), .value = arena_strndup(a, "web-7", 5),
					   .run_streams = 50, .cluster_streams = 30, .cost_ns = 100000000,
					   .cost_share = 0.81, .lift = 15, .p = 1e-20, .q = 1e-18, .p_baseline = NAN };
	v[1] = (struct attribution_value){ .key = arena_strndup(a, "conf.pool", 9), .value = arena_strndup(a, "8", 1),
					   .run_streams = 500, .cluster_streams = 20, .q = 0.9 };
	at.v = v;
	at.n = 2;
	CHECK_INT(costcache_get_attribution(c, ATTRIBUTION_CLUSTER, 7, b, &got), 0);
	CHECK(got.n == 0 && got.v == NULL && got.of == ATTRIBUTION_CLUSTER);
	costcache_put_attribution(c, ATTRIBUTION_CLUSTER, 7, &at);
	costcache_put(c, ATTRIBUTION_CLUSTER, 7, &m);
	costcache_usage(c, &models, &attributions, &bytes);
	CHECK_INT((long long)models, 1);
	CHECK_INT((long long)attributions, 1);
	/* the request's arena gone: the cache's copy */
	arena_free(a);
	a = arena_open(0);
	CHECK_INT(costcache_get_attribution(c, ATTRIBUTION_CLUSTER, 7, b, &got), 1);
	CHECK_INT((long long)got.n, 2);
	CHECK_INT((long long)got.run_streams, 1000);
	CHECK_INT((long long)got.cluster_streams, 40);
	CHECK_INT((long long)got.cost_ns, 123456789);
	CHECK_INT((long long)got.tested, 17);
	CHECK_INT((long long)got.keys_skipped, 2);
	CHECK_STR(got.v[0].key, "host");
	CHECK_STR(got.v[0].value, "web-7");
	CHECK_STR(got.v[1].key, "conf.pool");
	CHECK_STR(got.v[1].value, "8");
	CHECK(got.v[0].q == 1e-18 && got.v[0].lift == 15 && isnan(got.v[0].p_baseline) && got.v[1].q == 0.9);
	CHECK_INT((long long)got.v[0].cost_ns, 100000000);
	kept = got;   /* in b, which stays: the source from here on */
	/* the model of the same id is the model, and the problem of that id has neither */
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 7, b, &gm), 1);
	CHECK_INT((long long)gm.streams, 50);
	CHECK_INT(costcache_get_attribution(c, ATTRIBUTION_PROBLEM, 7, b, &got), 0);
	CHECK(got.of == ATTRIBUTION_PROBLEM);
	/* full: the least recently used goes first, whatever its kind. Room for one of each; the
	 * attribution read last, a second model takes the first one's place */
	costcache_free(c);
	CHECK((c = costcache_open(bytes)) != NULL);
	m = model(a, 2, 1, 50);
	costcache_put_attribution(c, ATTRIBUTION_CLUSTER, 7, &kept);
	costcache_put(c, ATTRIBUTION_CLUSTER, 7, &m);
	CHECK_INT(costcache_get_attribution(c, ATTRIBUTION_CLUSTER, 7, b, &got), 1);
	costcache_put(c, ATTRIBUTION_CLUSTER, 8, &m);
	costcache_usage(c, &models, &attributions, &bytes);
	CHECK_INT((long long)models, 1);
	CHECK_INT((long long)attributions, 1);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 7, b, &gm), 0);
	CHECK_INT(costcache_get(c, ATTRIBUTION_CLUSTER, 8, b, &gm), 1);
	CHECK_INT(costcache_get_attribution(c, ATTRIBUTION_CLUSTER, 7, b, &got), 1);
	/* none, and no cache */
	costcache_put_attribution(NULL, ATTRIBUTION_CLUSTER, 7, &kept);
	CHECK_INT(costcache_get_attribution(NULL, ATTRIBUTION_CLUSTER, 7, b, &got), 0);
	costcache_put_attribution(c, ATTRIBUTION_CLUSTER, 0, &kept);
	CHECK_INT(costcache_get_attribution(c, ATTRIBUTION_CLUSTER, 0, b, &got), 0);
	costcache_free(c);
	arena_free(a);
	arena_free(b);
}

int main(void)
{
	RUN(test_costcache);
	RUN(test_costcache_attribution);
	RUN(test_costcache_flame);
	RUN(test_confirmed);
	RUN(test_run_sort);
	RUN(test_settings_schema);
	RUN(test_settings_check);
	RUN(test_local_next);
	RUN(test_form);
	RUN(test_may_write);
	RUN(test_routes);
	RUN(test_html);
	RUN(test_stack_text);
	RUN(test_stream_times);
	return CHECK_DONE();
}
