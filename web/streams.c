/* streams: the streams' pages and API (see streams.h). */
#include "web/streams.h"
#include "common/arena.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "miner/aoi.h"
#include "miner/params.h"
#include "web/api.h"
#include "web/html.h"
#include "web/model.h"
#include "web/pages.h"
#include "web/request.h"
#include "web/timeline.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the events of a stream the API and the page show: its first */
#define STREAM_EVENTS 200000

struct labels_acc {
	struct req *rq;
	json_object *obj;
	const char *bad;
};

static bool collect_label(void *cls, const char *key, const char *value)
{
	struct labels_acc *l = cls;

	if (strncmp(key, "label.", 6) != 0)
		return true;
	if (!key[6] || !util_utf8_valid(key, strlen(key)) || !util_utf8_valid(value, strlen(value))) {
		l->bad = key;
		return false;
	}
	json_object_object_add(l->obj, key + 6, json_object_new_string(value));
	return true;
}

/* the presets of the time range: the last hour, day, week, or everything */
static const struct {
	const char *name, *label;
	int64_t ns;
} ranges[] = {
	{ "1h", "last 1 h", 3600 * 1000000000LL },
	{ "24h", "last 24 h", 24 * 3600 * 1000000000LL },
	{ "7d", "last 7 d", 7 * 24 * 3600 * 1000000000LL },
	{ "all", "all", 0 },
};

int streams_range_ns(const char *name, int64_t *ns)
{
	for (size_t i = 0; name && i < sizeof(ranges) / sizeof(ranges[0]); i++)
		if (strcmp(name, ranges[i].name) == 0) {
			*ns = ranges[i].ns;
			return 0;
		}
	return -1;
}

int streams_parse_time(const char *s, int64_t *ns)
{
	char t[48];
	size_t n = s ? strlen(s) : 0;
	bool zone;

	if (n == 0 || n > 35)
		return -1;
	if (util_parse_i64(s, 0, INT64_MAX, ns) == 0)
		return 0;
	if (n < 16 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':')
		return -1;
	/* a datetime-local value: no seconds (YYYY-MM-DDTHH:MM) or no zone, read as UTC; a zone comes
	 * after the seconds */
	zone = s[n - 1] == 'Z' || s[n - 1] == 'z' || (n > 19 && (strchr(s + 19, '+') || strchr(s + 19, '-')));
	snprintf(t, sizeof(t), "%s%s%s", s, n == 16 ? ":00" : "", zone ? "" : "Z");
	return params_parse_time(t, ns);
}

/* The list's query as the API (since/until) or the page (from/to, empty fields absent) gives it. */
struct list_query {
	struct stream_filter f;
	enum stream_sort sort;
	bool desc;
	const char *range;      /* the preset asked for, or NULL */
	const char *from, *to;  /* the page's absolute bounds as given, or NULL */
};

/* A bound of the time range: the page's (streams_parse_time()) or the API's (RFC 3339 with its zone, or ns). */
static int bound(const char *v, bool page, int64_t *ns)
{
	if (page)
		return streams_parse_time(v, ns);
	return util_parse_i64(v, 0, INT64_MAX, ns) == 0 || params_parse_time(v, ns) == 0 ? 0 : -1;
}

/* q from the request's parameters (the labels aside): 0, or -1 with the message, which names the
 * field, in err. */
static int list_query(struct req *rq, struct list_query *q, bool page, char *err, size_t errlen)
{
	const char *role = req_query(rq, "role"), *sort = req_query(rq, "sort"), *dir = req_query(rq, "dir");
	const char *lo = page ? "from" : "since", *hi = page ? "to" : "until";
	const char *vlo = req_query(rq, lo), *vhi = req_query(rq, hi), *bad = NULL;
	int64_t span = 0;
	int k;

	memset(q, 0, sizeof(*q));
	q->sort = SSORT_RECEIVED;
	q->desc = true;
	q->f.app = req_query(rq, "app");
	q->f.host = req_query(rq, "host");
	q->f.version = req_query(rq, "version");
	q->f.since_ns = q->f.until_ns = PARAMS_NO_TIME;
	q->range = req_query(rq, "range");
	if (page) {
		/* an empty field of the form is no filter */
		const char **v[] = { &q->f.app, &q->f.host, &q->f.version, &role, &sort, &dir, &q->range, &vlo, &vhi };
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
			if (*v[i] && !**v[i])
				*v[i] = NULL;
	}
	q->from = vlo;
	q->to = vhi;
	if (role && strcmp(role, "violation") != 0 && strcmp(role, "baseline") != 0) {
		snprintf(err, errlen, "role: must be violation or baseline");
		return -1;
	}
	q->f.role = role;
	if (sort && (k = model_stream_sort_parse(sort)) < 0) {
		snprintf(err, errlen, "sort: must be received, host, app, version, delay, events or role");
		return -1;
	}
	q->sort = sort ? (enum stream_sort)k : SSORT_RECEIVED;
	if (dir && strcmp(dir, "asc") != 0 && strcmp(dir, "desc") != 0) {
		snprintf(err, errlen, "dir: must be asc or desc");
		return -1;
	}
	q->desc = dir ? strcmp(dir, "desc") == 0 : model_stream_sort_desc(q->sort);
	if (q->range && streams_range_ns(q->range, &span) < 0) {
		snprintf(err, errlen, "range: must be 1h, 24h, 7d or all");
		return -1;
	}
	if (q->range && (vlo || vhi)) {
		snprintf(err, errlen, "range: give either range or %s/%s, not both", lo, hi);
		return -1;
	}
	if (vlo && bound(vlo, page, &q->f.since_ns) < 0)
		bad = lo;
	else if (vhi && bound(vhi, page, &q->f.until_ns) < 0)
		bad = hi;
	if (bad) {
		snprintf(err, errlen, page ? "%s: a date and time such as 2026-11-29T14:00 (UTC)"
					   : "%s: an RFC 3339 time or nanoseconds since the epoch", bad);
		return -1;
	}
	if (vlo && vhi && q->f.until_ns <= q->f.since_ns) {
		snprintf(err, errlen, "%s: must be after %s", hi, lo);
		return -1;
	}
	if (q->range && span) {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		q->f.since_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec - span;
	}
	return 0;
}

void streams_get_streams(struct req *rq)
{
	static const char *const names[] = { "app", "host", "version", "since", "until", "limit", "offset", "role",
					     "sort", "dir", "range", NULL };
	struct list_query q;
	struct labels_acc l = { rq, NULL, NULL };
	PGresult *rows, *count;
	char err[512];
	long limit, offset;

	if (!api_known_query(rq, names, true) || !api_page_params(rq, &limit, &offset))
		return;
	if (list_query(rq, &q, false, err, sizeof(err)) < 0) {
		req_json_error(rq, 400, "%s", err);
		return;
	}
	l.obj = json_object_new_object();
	req_query_each(rq, collect_label, &l);
	if (l.bad) {
		json_object_put(l.obj);
		req_json_error(rq, 400, "%.64s: a label filter needs a key and a UTF-8 value", l.bad);
		return;
	}
	if (json_object_object_length(l.obj))
		q.f.labels_json = req_strdup(rq, json_object_to_json_string_ext(l.obj, JSON_C_TO_STRING_PLAIN));
	json_object_put(l.obj);
	rows = model_streams(rq->db, &q.f, q.sort, q.desc, limit, offset, err, sizeof(err));
	count = rows ? model_streams_count(rq->db, &q.f, err, sizeof(err)) : NULL;
	api_page_response(rq, "streams", rows, count, err);
}

PGresult *streams_need_stream(struct req *rq, const char *uuid, char canon[37])
{
	char err[512];
	PGresult *st;

	if (!util_uuid_canon(uuid, strlen(uuid), canon)) {
		req_json_error(rq, 404, "stream '%.64s': no such stream (not a UUID)", uuid);
		return NULL;
	}
	st = model_stream(rq->db, canon, err, sizeof(err));
	if (api_failed(rq, st, err))
		return NULL;
	if (PQntuples(st) == 0) {
		req_json_error(rq, 404, "stream %s: no such stream", canon);
		PQclear(st);
		return NULL;
	}
	return st;
}

/* More than the longest event_json() (162 bytes): its keys and punctuation, two numbers of up to 20
 * characters, three of up to 11. */
#define EVENT_JSON_MAX 256

static char *put_lit(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}
#define PUT(p, lit) put_lit(p, lit, sizeof(lit) - 1)

/* Event e as the API's JSON object at p (room for EVENT_JSON_MAX), as jsonw would write it: its length.
 * A stream's events are most of its answer (200,000 of them), so they are written whole, not key by key. */
static size_t event_json(char *p, const struct evpack_event *e, long stack, bool aoi)
{
	char *o = p;
	bool wait = e->kind == 'w';

	o = wait ? PUT(o, "{\"kind\": \"wait\", \"tid\": ") : PUT(o, "{\"kind\": \"run\", \"tid\": ");
	o += util_fmt_i64(o, e->tid);
	o = PUT(o, ", \"ts_ns\": ");
	o += util_fmt_i64(o, e->ts_ns);
	o = PUT(o, ", \"dur_ns\": ");
	o += util_fmt_i64(o, e->dur_ns);
	o = PUT(o, ", \"stack\": ");
	o += util_fmt_i64(o, stack);
	if (wait) {
		o = PUT(o, ", \"readier_tid\": ");
		o += util_fmt_i64(o, e->readier_tid);
	}
	o = aoi ? PUT(o, ", \"aoi\": true}") : PUT(o, ", \"aoi\": false}");
	return (size_t)(o - p);
}

void streams_get_stream(struct req *rq)
{
	const char *uuid = rq->arg;
	static const char *const names[] = { "aoi", NULL };
	char canon[37], err[512];
	PGresult *st;
	struct model_events *ev = NULL;
	enum aoi_mode mode = AOI_WAITGRAPH;
	const char *aoi = req_query(rq, "aoi");
	struct jsonw w;
	bool *in = NULL;

	if (!api_known_query(rq, names, false))
		return;
	if (aoi && aoi_mode_parse(aoi, &mode) < 0) {
		req_json_error(rq, 400, "aoi: must be waitgraph, thread, critical or stream");
		return;
	}
	if (!(st = streams_need_stream(rq, uuid, canon)))
		return;
	ev = model_stream_events(rq->db, PQgetvalue(st, 0, 0), STREAM_EVENTS, err, sizeof(err));
	if (!ev) {
		api_failed(rq, NULL, err);
		goto out;
	}
	in = arena_calloc(rq->a, ev->n + 1, sizeof(bool));
	if (!in || model_stream_aoi(st, ev, mode, in) < 0) {
		req_json_error(rq, 500, "computing the AOI failed");
		goto out;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	{
		static const char *const skip[] = { "ref", "events", "symptom_tid", "symptom_start_ns", "symptom_end_ns",
						    "threads", NULL };
		int c = PQfnumber(st, "threads");

		api_put_members(&w, st, 0, skip);
		/* only when the sender named threads */
		if (!PQgetisnull(st, 0, c)) {
			jsonw_key(&w, "threads");
			jsonw_raw(&w, PQgetvalue(st, 0, c), (size_t)PQgetlength(st, 0, c));
		}
	}
	jsonw_key(&w, "event_count");
	jsonw_number_text(&w, PQgetvalue(st, 0, PQfnumber(st, "events")));
	jsonw_kbool(&w, "events_truncated", ev->stored > ev->n);
	jsonw_kstr(&w, "aoi_mode", aoi_mode_name(mode));
	if (api_put_stack_list(rq, &w, ev->stacks, ev->nstacks, err, sizeof(err)) < 0) {
		req_json_error(rq, 500, "%s", err);
		goto out;
	}
	jsonw_karray(&w, "events");
	for (size_t i = 0; i < ev->n; i++) {
		char obj[EVENT_JSON_MAX];

		jsonw_raw(&w, obj, event_json(obj, &ev->ev[i], ev->at[i], in[i]));
	}
	jsonw_end(&w);
	jsonw_end(&w);
	api_ok_json(rq, &w, 200);
out:
	PQclear(st);
	model_events_free(ev);
}

/* A stream's role, and the violations it stands for when the agent sampled it (guard.md "Shipping budget").
 * An imported capture's role is the import's option (violation unless told baseline), not a measured
 * one: it says so. */
static void stream_role(struct req *rq, PGresult *r, int i)
{
	const char *w = model_col(r, i, "weight"), *role = model_col(r, i, "role");
	json_object *sy = json_tokener_parse(model_col(r, i, "symptom") ? model_col(r, i, "symptom") : "{}"), *k;

	html_raw(rq, strcmp(role ? role : "", "baseline") == 0 ? "<span class=\"role baseline\">"
								 : "<span class=\"role violation\">");
	html_text(rq, role ? role : "–");
	html_raw(rq, "</span>");
	if (sy && json_object_object_get_ex(sy, "kind", &k) && strcmp(json_object_get_string(k), "import") == 0)
		html_raw(rq, " <span class=\"est\" title=\"an imported capture: its role is the import's option "
			     "(violation unless imported as baseline), not a unit the agent timed\">imported</span>");
	json_object_put(sy);
	if (w && strtod(w, NULL) > 1)
		html_rawf(rq, " <span class=\"est\" title=\"sampled: this stream stands for %.2f violations of its "
			  "minute\">×%.2f</span>", strtod(w, NULL), strtod(w, NULL));
}

/* The list's filters as "&k=v..." for links: the fields of the form, and the time range when with_time. */
static const char *keep_filters(struct req *rq, const struct list_query *q, bool with_time)
{
	const char *k = pages_keep_param(rq, pages_keep_param(rq, pages_keep_param(rq, pages_keep_param(rq, NULL,
		"app", q->f.app), "host", q->f.host), "version", q->f.version), "role", q->f.role);

	if (with_time)
		k = pages_keep_param(rq, pages_keep_param(rq, pages_keep_param(rq, k, "range", q->range), "from", q->from),
				     "to", q->to);
	return k;
}

/* "&sort=..&dir=.." of q, nothing for the default order. */
static const char *keep_sort(struct req *rq, const struct list_query *q, const char *prev)
{
	if (q->sort == SSORT_RECEIVED && q->desc)
		return prev;
	return pages_keep_param(rq, pages_keep_param(rq, prev, "sort", model_stream_sort_name(q->sort)), "dir",
				q->desc ? "desc" : "asc");
}

/* The list's header: each sortable column a link to its order (the other way round when it is the
 * order already), the order's column with aria-sort. */
static void list_header(struct req *rq, const struct list_query *q)
{
	static const struct {
		int sort; /* enum stream_sort, -1: not sortable */
		const char *label, *cls;
	} cols[] = {
		{ -1, "Stream", "" }, { SSORT_ROLE, "Role", "" }, { SSORT_APP, "App", "" },
		{ SSORT_VERSION, "Version", "" }, { SSORT_HOST, "Host", "" }, { -1, "Unit", "" },
		{ SSORT_DELAY, "Delay", " class=\"n\"" }, { SSORT_EVENTS, "Events", " class=\"n\"" },
		{ SSORT_RECEIVED, "Received (UTC)", "" },
	};
	const char *keep = keep_filters(rq, q, true);

	html_raw(rq, "<table class=\"streams\" id=\"streams\"><thead><tr>");
	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
		bool on = cols[i].sort == (int)q->sort;
		bool desc = on ? !q->desc : model_stream_sort_desc((enum stream_sort)cols[i].sort);

		if (cols[i].sort < 0) {
			html_rawf(rq, "<th%s>%s</th>", cols[i].cls, cols[i].label);
			continue;
		}
		html_rawf(rq, "<th%s%s><a href=\"?", cols[i].cls,
			  on ? (q->desc ? " aria-sort=\"descending\"" : " aria-sort=\"ascending\"") : "");
		html_text(rq, pages_keep_param(rq, pages_keep_param(rq, NULL, "sort",
				model_stream_sort_name((enum stream_sort)cols[i].sort)), "dir", desc ? "desc" : "asc") + 1);
		html_text(rq, keep);
		html_rawf(rq, "\" data-sort=\"%s\">%s%s</a></th>", model_stream_sort_name((enum stream_sort)cols[i].sort),
			  cols[i].label, on ? (q->desc ? " ▼" : " ▲") : "");
	}
	html_raw(rq, "</tr></thead><tbody>");
}

/* The filter form (the time range's absolute bounds included) and the range's presets, as links. */
static void list_form(struct req *rq, const struct list_query *q)
{
	static const char *const roles[] = { "violation", "baseline" };
	const char *fields[][2] = { { "app", q->f.app }, { "host", q->f.host }, { "version", q->f.version } };
	const char *labels[] = { "App", "Host", "Version" };
	const char *keep = keep_sort(rq, q, keep_filters(rq, q, false));

	html_raw(rq, "<form class=\"filter\" method=\"get\" id=\"stream-filter\">");
	for (int i = 0; i < 3; i++) {
		html_rawf(rq, "<label>%s <input name=\"%s\" value=\"", labels[i], fields[i][0]);
		html_text(rq, fields[i][1]);
		html_raw(rq, "\"></label>");
	}
	html_raw(rq, "<label>Role <select name=\"role\"><option value=\"\">any</option>");
	for (int i = 0; i < 2; i++)
		html_rawf(rq, "<option%s>%s</option>", q->f.role && strcmp(q->f.role, roles[i]) == 0 ? " selected" : "",
			  roles[i]);
	html_raw(rq, "</select></label><label>From (UTC) <input type=\"datetime-local\" step=\"1\" name=\"from\" value=\"");
	html_text(rq, q->from);
	html_raw(rq, "\"></label><label>To (UTC) <input type=\"datetime-local\" step=\"1\" name=\"to\" value=\"");
	html_text(rq, q->to);
	html_raw(rq, "\"></label>");
	if (q->sort != SSORT_RECEIVED || !q->desc) {
		/* filtering keeps the order */
		html_rawf(rq, "<input type=\"hidden\" name=\"sort\" value=\"%s\"><input type=\"hidden\" name=\"dir\" "
			  "value=\"%s\">", model_stream_sort_name(q->sort), q->desc ? "desc" : "asc");
	}
	html_raw(rq, "<button type=\"submit\">Filter</button></form><p class=\"ranges\">Received: ");
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		bool on = q->range ? strcmp(q->range, ranges[i].name) == 0 : !q->from && !q->to && !ranges[i].ns;

		html_rawf(rq, "%s<a href=\"?range=%s", i ? " · " : "", ranges[i].name);
		html_text(rq, keep);
		html_rawf(rq, "\" data-range=\"%s\"%s>%s</a>", ranges[i].name, on ? " aria-current=\"true\"" : "",
			  ranges[i].label);
	}
	if (q->from || q->to)
		html_raw(rq, " · <span aria-current=\"true\">from–to as given</span>");
	html_raw(rq, "</p>");
}

void streams_page_streams(struct req *rq)
{
	char err[512];
	long offset = pages_offset(rq);
	struct list_query q;
	PGresult *r, *cnt;

	if (list_query(rq, &q, true, err, sizeof(err)) < 0) {
		/* the form as given, and what is wrong with it */
		html_begin(rq, "Streams");
		rq->status = 400;
		html_raw(rq, "<h1>Trace streams</h1>");
		list_form(rq, &q);
		html_raw(rq, "<p class=\"error\" role=\"alert\">");
		html_text(rq, err);
		html_raw(rq, "</p>");
		html_end(rq);
		return;
	}
	r = model_streams(rq->db, &q.f, q.sort, q.desc, PAGES_ROWS, offset, err, sizeof(err));
	cnt = r ? model_streams_count(rq->db, &q.f, err, sizeof(err)) : NULL;
	if (!r || !cnt) {
		PQclear(r);
		html_error(rq, 500, err);
		return;
	}
	html_begin(rq, "Streams");
	html_raw(rq, "<h1>Trace streams</h1>");
	list_form(rq, &q);
	list_header(rq, &q);
	for (int i = 0; i < PQntuples(r); i++) {
		json_object *sy = json_tokener_parse(model_col(r, i, "symptom")), *a, *b, *u;
		html_raw(rq, "<tr><td><a href=\"/streams/");
		html_text(rq, model_col(r, i, "stream_id"));
		html_raw(rq, "\">");
		html_text(rq, model_col(r, i, "stream_id"));
		html_raw(rq, "</a></td><td>");
		stream_role(rq, r, i);
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "app"));
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "version"));
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "host"));
		html_raw(rq, "</td><td>");
		if (sy && json_object_object_get_ex(sy, "unit_type", &u))
			html_text(rq, json_object_get_string(u));
		html_raw(rq, "</td><td class=\"n\">");
		if (sy && json_object_object_get_ex(sy, "start_ns", &a) && json_object_object_get_ex(sy, "end_ns", &b))
			html_cost(rq, json_object_get_int64(b) - json_object_get_int64(a));
		html_raw(rq, "</td>");
		pages_count_cells(rq, r, i, (const char *const[]){ "events", NULL });
		html_raw(rq, "<td class=\"time\">");
		html_time(rq, model_col(r, i, "received_at"));
		html_raw(rq, "</td></tr>");
		json_object_put(sy);
	}
	if (PQntuples(r) == 0)
		html_raw(rq, "<tr><td colspan=\"9\" class=\"empty\">No streams match.</td></tr>");
	html_raw(rq, "</tbody></table>");
	pages_pager(rq, "/streams", keep_sort(rq, &q, keep_filters(rq, &q, true)), offset, PQntuples(r),
		    (long)model_coln(cnt, 0, "total"), strcmp(model_col(cnt, 0, "more"), "t") == 0);
	html_end(rq);
	PQclear(r);
	PQclear(cnt);
}

/* The timeline's events of ev (AOI: in[]), into te[0..n); *from and *to widened to hold them all,
 * *naoi the events in the AOI. */
static void fill_events(const struct model_events *ev, const bool *in, struct tl_event *te, int64_t *from,
			int64_t *to, int *naoi)
{
	for (size_t i = 0; i < ev->n; i++) {
		const struct evpack_event *e = &ev->ev[i];

		if (e->ts_ns + e->dur_ns > *to)
			*to = e->ts_ns + e->dur_ns;
		if (e->ts_ns < *from)
			*from = e->ts_ns;
		te[i].tid = e->tid;
		te[i].ts_ns = e->ts_ns;
		te[i].dur_ns = e->dur_ns;
		te[i].kind = e->kind == 'w' ? 'w' : 'r';
		te[i].readier_tid = e->kind == 'w' ? e->readier_tid : 0;
		te[i].aoi = in[i];
		*naoi += in[i];
	}
}

/* Each event's stack as its hover text (timeline_stack_text(): outermost first, bounded), from the
 * stacks fr (model_stacks() of ev->stacks); made once per stack. */
static void set_stacks(struct req *rq, PGresult *fr, const struct model_events *ev, struct tl_event *te)
{
	const char **text = arena_calloc(rq->a, ev->nstacks + 1, sizeof(char *));
	int *row = arena_alloc(rq->a, (ev->nstacks + 1) * sizeof(*row));
	struct buf b = BUF_INIT(1 << 16);
	struct req_names names;

	if (!text || !row || req_frame_names_rows(rq, fr, PQfnumber(fr, "frame_ids"), &names) < 0)
		return;
	model_stack_rows(fr, ev->stacks, ev->nstacks, row);
	for (size_t k = 0; k < ev->nstacks; k++) {
		buf_reset(&b);
		if (row[k] >= 0 && names.n[row[k]] && timeline_stack_text(&b, names.row[row[k]], names.n[row[k]]) == 0)
			text[k] = req_strdup(rq, buf_cstr(&b));
	}
	buf_release(&b);
	for (size_t i = 0; i < ev->n; i++)
		te[i].stack = text[ev->at[i]];
}

/* ?t=FROM-TO (ns, absolute) zooms into part of the stream: *from and *to when t is such a range. */
static void zoom_param(const char *t, int64_t *from, int64_t *to)
{
	char a[24], b[24];
	const char *dash = strchr(t, '-');
	int64_t x, y;

	if (dash && (size_t)(dash - t) < sizeof(a) && strlen(dash + 1) < sizeof(b)) {
		memcpy(a, t, (size_t)(dash - t));
		a[dash - t] = '\0';
		memcpy(b, dash + 1, strlen(dash + 1) + 1);
		if (util_parse_i64(a, 0, INT64_MAX, &x) == 0 && util_parse_i64(b, 0, INT64_MAX, &y) == 0 && x < y) {
			*from = x;
			*to = y;
		}
	}
}

/* The stream's title, its role, symptom, counts (cut: only the first events read; naoi in the AOI of mode), build, and
 * downloads. */
static void stream_summary(struct req *rq, PGresult *st, const char *canon, bool cut, int naoi, enum aoi_mode mode)
{
	int64_t s0 = model_coln(st, 0, "symptom_start_ns"), s1 = model_coln(st, 0, "symptom_end_ns");

	html_begin(rq, req_printf(rq, "Stream %s", canon));
	html_raw(rq, "<p class=\"crumbs\"><a href=\"/streams\">Streams</a> › ");
	html_value(rq, canon);
	html_raw(rq, "</p><h1>");
	html_value(rq, model_col(st, 0, "app"));
	html_raw(rq, " ");
	html_value(rq, model_col(st, 0, "version"));
	html_raw(rq, " on ");
	html_value(rq, model_col(st, 0, "host"));
	html_raw(rq, "</h1><dl class=\"counts\"><dt>Role</dt><dd>");
	stream_role(rq, st, 0);
	html_raw(rq, "</dd><dt>Symptom</dt><dd>");
	{
		json_object *sy = json_tokener_parse(model_col(st, 0, "symptom")), *v;
		if (sy && json_object_object_get_ex(sy, "kind", &v))
			html_value(rq, json_object_get_string(v));
		if (sy && json_object_object_get_ex(sy, "unit_type", &v) && !json_object_is_type(v, json_type_null)) {
			html_raw(rq, " · ");
			html_value(rq, json_object_get_string(v));
		}
		html_raw(rq, " · thread ");
		html_text(rq, model_col(st, 0, "symptom_tid"));
		html_raw(rq, " · ");
		html_cost(rq, s1 - s0);
		if (sy && json_object_object_get_ex(sy, "threshold_ns", &v) && !json_object_is_type(v, json_type_null)) {
			html_raw(rq, " (threshold ");
			html_cost(rq, json_object_get_int64(v));
			html_raw(rq, ")");
		}
		json_object_put(sy);
	}
	html_raw(rq, "</dd><dt>Events</dt><dd>");
	html_count(rq, model_coln(st, 0, "events"));
	html_rawf(rq, "%s</dd><dt>In the AOI (%s)</dt><dd>", cut ? " (first 200,000 shown)" : "",
		  aoi_mode_name(mode));
	html_count(rq, naoi);
	html_raw(rq, "</dd><dt>Build</dt><dd>");
	html_text(rq, model_col(st, 0, "build_id") ? model_col(st, 0, "build_id") : "–");
	html_raw(rq, "</dd><dt>Received</dt><dd>");
	html_time(rq, model_col(st, 0, "received_at"));
	html_raw(rq, "</dd></dl>");
	pages_download_links(rq, req_printf(rq, "/api/v1/streams/%s/profile", canon));
}

/* The stream's labels. */
static void stream_labels(struct req *rq, PGresult *st)
{
	html_raw(rq, "<section><h2>Labels</h2><dl class=\"labels\">");
	{
		json_object *l = json_tokener_parse(model_col(st, 0, "labels") ? model_col(st, 0, "labels") : "{}");
		if (l && json_object_is_type(l, json_type_object)) {
			json_object_object_foreach(l, key, val) {
				html_raw(rq, "<dt>");
				html_text(rq, key);
				html_raw(rq, "</dt><dd>");
				html_text(rq, json_object_get_string(val));
				html_raw(rq, "</dd>");
			}
		}
		json_object_put(l);
	}
}

/* The stream's thread names (its "threads", stored as a JSON object of tid: name) for the timeline's
 * labels, in rq's arena; *n = 0 when it has none. */
static struct tl_thread *stream_threads(struct req *rq, PGresult *st, size_t *n)
{
	const char *js = model_col(st, 0, "threads");
	json_object *o;
	struct tl_thread *th = NULL;

	*n = 0;
	if (!js || !(o = json_tokener_parse(js)))
		return NULL;
	if (json_object_is_type(o, json_type_object) && json_object_object_length(o) > 0 &&
	    (th = arena_calloc(rq->a, (size_t)json_object_object_length(o), sizeof(*th)))) {
		json_object_object_foreach(o, key, val) {
			int64_t tid;

			if (util_parse_i64(key, 0, INT64_MAX, &tid) == 0 && json_object_is_type(val, json_type_string) &&
			    (th[*n].name = arena_strndup(rq->a, json_object_get_string(val),
							  (size_t)json_object_get_string_len(val))))
				th[(*n)++].tid = tid;
		}
	}
	json_object_put(o);
	return th;
}

/* The timeline section: the AOI form and the SVG of te[0..n) over [from, to]. */
static void stream_timeline(struct req *rq, PGresult *st, const struct tl_event *te, int n, enum aoi_mode mode,
			    const char *aoi, const char *t, int64_t from, int64_t to, int64_t origin)
{
	int64_t s0 = model_coln(st, 0, "symptom_start_ns"), s1 = model_coln(st, 0, "symptom_end_ns");

	html_raw(rq, "</dl></section><section id=\"timeline\"><h2>Timeline</h2><form class=\"filter\" method=\"get\">"
		     "<label>AOI <select name=\"aoi\">");
	for (int m = 0; m < 4; m++) {
		static const enum aoi_mode modes[] = { AOI_WAITGRAPH, AOI_CRITICAL, AOI_THREAD, AOI_STREAM };
		html_rawf(rq, "<option%s>%s</option>", modes[m] == mode ? " selected" : "", aoi_mode_name(modes[m]));
	}
	html_raw(rq, "</select></label><button type=\"submit\">Mark</button>");
	if (t)
		html_raw(rq, " <a href=\"?#timeline\">Whole stream</a>");
	html_raw(rq, "</form><p class=\"hint\">One row per thread, the symptom thread first; the shaded band is the "
		     "symptom window; highlighted events are in the AOI; arrows go from a wait to the thread that readied "
		     "it. Click a time on the axis to zoom in.</p><div class=\"timeline\">");
	{
		/* room for "tid 4194304 (symptom)" in bold; for named threads, for about 20 characters of
		 * a name before "(tid 4194304) (symptom)" */
		size_t nth;
		struct tl_thread *th = stream_threads(rq, st, &nth);
		struct tl_view v = { 1300, from, to, model_coln(st, 0, "symptom_tid"), s0, s1,
				     aoi ? req_printf(rq, "?aoi=%s&t=", aoi_mode_name(mode)) : "?t=", nth ? 330 : 190,
				     true, origin, th, nth };
		char terr[256];
		if (timeline_render_svg(te, (size_t)n, &v, &rq->out, terr, sizeof(terr)) < 0) {
			html_raw(rq, "<p class=\"error\">");
			html_text(rq, terr);
			html_raw(rq, "</p>");
		}
	}
	html_raw(rq, "</div></section>");
}

void streams_page_stream(struct req *rq)
{
	const char *uuid = rq->arg;
	char canon[37], err[512];
	PGresult *st = NULL, *fr = NULL;
	struct model_events *ev = NULL;
	const char *aoi = req_query(rq, "aoi"), *t = req_query(rq, "t");
	enum aoi_mode mode = AOI_WAITGRAPH;
	struct tl_event *te;
	bool *in;
	int naoi = 0;
	int64_t s0, s1, from, to, origin;

	if (aoi && aoi_mode_parse(aoi, &mode) < 0)
		mode = AOI_WAITGRAPH;
	if (!util_uuid_canon(uuid, strlen(uuid), canon)) {
		html_error(rq, 404, "No such stream (not a UUID).");
		return;
	}
	st = model_stream(rq->db, canon, err, sizeof(err));
	if (!st || PQntuples(st) == 0) {
		html_error(rq, st ? 404 : 500, st ? "No such stream." : err);
		goto out;
	}
	ev = model_stream_events(rq->db, model_col(st, 0, "ref"), STREAM_EVENTS, err, sizeof(err));
	if (!ev) {
		html_error(rq, 500, err);
		goto out;
	}
	in = arena_calloc(rq->a, ev->n + 1, sizeof(bool));
	te = arena_calloc(rq->a, ev->n + 1, sizeof(*te));
	if (!in || !te || model_stream_aoi(st, ev, mode, in) < 0) {
		html_error(rq, 500, "out of memory");
		goto out;
	}
	/* each stack's frames, for the hover text */
	fr = model_stacks_of(rq->db, ev->stacks, ev->nstacks, err, sizeof(err));
	s0 = model_coln(st, 0, "symptom_start_ns");
	s1 = model_coln(st, 0, "symptom_end_ns");
	from = ev->n ? ev->ev[0].ts_ns : s0;
	to = s1;
	fill_events(ev, in, te, &from, &to, &naoi);
	if (fr)
		set_stacks(rq, fr, ev, te);
	/* a zoomed view's times stay offsets from the stream's start */
	origin = from;
	if (t)
		zoom_param(t, &from, &to);
	stream_summary(rq, st, canon, ev->stored > ev->n, naoi, mode);
	stream_labels(rq, st);
	stream_timeline(rq, st, te, (int)ev->n, mode, aoi, t, from, to, origin);
	html_end(rq);
out:
	PQclear(st);
	PQclear(fr);
	model_events_free(ev);
}
