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

static bool time_param(struct req *rq, const char *name, int64_t *out)
{
	const char *v = req_query(rq, name);

	*out = PARAMS_NO_TIME;
	if (!v)
		return true;
	if (util_parse_i64(v, 0, INT64_MAX, out) == 0 || params_parse_time(v, out) == 0)
		return true;
	req_json_error(rq, 400, "%s: an RFC 3339 time or nanoseconds since the epoch", name);
	return false;
}

void streams_get_streams(struct req *rq)
{
	static const char *const names[] = { "app", "host", "version", "since", "until", "limit", "offset", NULL };
	struct stream_filter f = { req_query(rq, "app"), req_query(rq, "host"), req_query(rq, "version"), NULL,
				   PARAMS_NO_TIME, PARAMS_NO_TIME };
	struct labels_acc l = { rq, NULL, NULL };
	PGresult *rows, *count;
	char err[512];
	long limit, offset;

	if (!api_known_query(rq, names, true) || !api_page_params(rq, &limit, &offset) ||
	    !time_param(rq, "since", &f.since_ns) || !time_param(rq, "until", &f.until_ns))
		return;
	l.obj = json_object_new_object();
	req_query_each(rq, collect_label, &l);
	if (l.bad) {
		json_object_put(l.obj);
		req_json_error(rq, 400, "%.64s: a label filter needs a key and a UTF-8 value", l.bad);
		return;
	}
	if (json_object_object_length(l.obj))
		f.labels_json = req_strdup(rq, json_object_to_json_string_ext(l.obj, JSON_C_TO_STRING_PLAIN));
	json_object_put(l.obj);
	rows = model_streams(rq->db, &f, limit, offset, err, sizeof(err));
	count = rows ? model_streams_count(rq->db, &f, err, sizeof(err)) : NULL;
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

void streams_get_stream(struct req *rq)
{
	const char *uuid = rq->arg;
	static const char *const names[] = { "aoi", NULL };
	char canon[37], err[512];
	PGresult *st, *ev = NULL;
	enum aoi_mode mode = AOI_WAITGRAPH;
	const char *aoi = req_query(rq, "aoi");
	struct api_stackmap m;
	struct jsonw w;
	bool *in = NULL;
	int n;

	if (!api_known_query(rq, names, false))
		return;
	if (aoi && aoi_mode_parse(aoi, &mode) < 0) {
		req_json_error(rq, 400, "aoi: must be waitgraph, thread, critical or stream");
		return;
	}
	if (!(st = streams_need_stream(rq, uuid, canon)))
		return;
	ev = model_stream_events(rq->db, PQgetvalue(st, 0, 0), STREAM_EVENTS, err, sizeof(err));
	if (api_failed(rq, ev, err))
		goto out;
	n = PQntuples(ev);
	in = arena_calloc(rq->a, (size_t)n + 1, sizeof(bool));
	if (!in || model_stream_aoi(st, ev, mode, in) < 0) {
		req_json_error(rq, 500, "computing the AOI failed");
		goto out;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	{
		static const char *const skip[] = { "ref", "events", "symptom_tid", "symptom_start_ns", "symptom_end_ns", NULL };
		api_put_members(&w, st, 0, skip);
	}
	jsonw_key(&w, "event_count");
	jsonw_number_text(&w, PQgetvalue(st, 0, PQfnumber(st, "events")));
	jsonw_kbool(&w, "events_truncated", n == STREAM_EVENTS);
	jsonw_kstr(&w, "aoi_mode", aoi_mode_name(mode));
	if (api_put_stacks(rq, &w, ev, 4, &m, err, sizeof(err)) < 0) {
		req_json_error(rq, 500, "%s", err);
		goto out;
	}
	jsonw_karray(&w, "events");
	for (int i = 0; i < n; i++) {
		bool wait = PQgetvalue(ev, i, 0)[0] == 'w';

		jsonw_object(&w);
		jsonw_kstr(&w, "kind", wait ? "wait" : "run");
		jsonw_key(&w, "tid");
		jsonw_number_text(&w, PQgetvalue(ev, i, 1));
		jsonw_key(&w, "ts_ns");
		jsonw_number_text(&w, PQgetvalue(ev, i, 2));
		jsonw_key(&w, "dur_ns");
		jsonw_number_text(&w, PQgetvalue(ev, i, 3));
		jsonw_ki64(&w, "stack", api_stack_index(&m, (int32_t)strtol(PQgetvalue(ev, i, 4), NULL, 10)));
		if (wait) {
			jsonw_key(&w, "readier_tid");
			jsonw_number_text(&w, PQgetvalue(ev, i, 5));
		}
		jsonw_kbool(&w, "aoi", in[i]);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	api_ok_json(rq, &w, 200);
out:
	PQclear(st);
	PQclear(ev);
}

/* A stream's role, and the violations it stands for when the agent sampled it (guard.md "Shipping budget"). */
static void stream_role(struct req *rq, PGresult *r, int i)
{
	const char *w = model_col(r, i, "weight");

	html_text(rq, model_col(r, i, "role"));
	if (w && strtod(w, NULL) > 1)
		html_rawf(rq, " <span class=\"est\" title=\"sampled: this stream stands for %.2f violations of its "
			  "minute\">×%.2f</span>", strtod(w, NULL), strtod(w, NULL));
}

void streams_page_streams(struct req *rq)
{
	char err[512];
	long offset = pages_offset(rq);
	struct stream_filter f = { req_query(rq, "app"), req_query(rq, "host"), req_query(rq, "version"), NULL,
				   INT64_MIN, INT64_MIN };
	PGresult *r, *cnt;
	const char *keep;

	if (f.app && !*f.app)
		f.app = NULL;
	if (f.host && !*f.host)
		f.host = NULL;
	if (f.version && !*f.version)
		f.version = NULL;
	r = model_streams(rq->db, &f, PAGES_ROWS, offset, err, sizeof(err));
	cnt = r ? model_streams_count(rq->db, &f, err, sizeof(err)) : NULL;
	if (!r || !cnt) {
		PQclear(r);
		html_error(rq, 500, err);
		return;
	}
	keep = pages_keep_param(rq, pages_keep_param(rq, pages_keep_param(rq, NULL, "app", f.app), "host", f.host), "version", f.version);
	html_begin(rq, "Streams");
	html_raw(rq, "<h1>Trace streams</h1><form class=\"filter\" method=\"get\"><label>App <input name=\"app\" value=\"");
	html_text(rq, f.app);
	html_raw(rq, "\"></label><label>Host <input name=\"host\" value=\"");
	html_text(rq, f.host);
	html_raw(rq, "\"></label><label>Version <input name=\"version\" value=\"");
	html_text(rq, f.version);
	html_raw(rq, "\"></label><button type=\"submit\">Filter</button></form><table class=\"streams\"><thead><tr>"
		     "<th>Stream</th><th>Role</th><th>App</th><th>Version</th><th>Host</th><th>Unit</th><th class=\"n\">Delay</th>"
		     "<th class=\"n\">Events</th><th>Received (UTC)</th></tr></thead><tbody>");
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
		html_rawf(rq, "</td><td class=\"n\">%lld</td><td class=\"time\">", (long long)model_coln(r, i, "events"));
		html_time(rq, model_col(r, i, "received_at"));
		html_raw(rq, "</td></tr>");
		json_object_put(sy);
	}
	html_raw(rq, "</tbody></table>");
	pages_pager(rq, "/streams", keep, offset, PQntuples(r), (long)model_coln(cnt, 0, "total"));
	html_end(rq);
	PQclear(r);
	PQclear(cnt);
}

/* The timeline's events of ev (AOI: in[]), into te[0..n); *from and *to widened to hold them all,
 * *naoi the events in the AOI. */
static void fill_events(PGresult *ev, const bool *in, struct tl_event *te, int n, int64_t *from, int64_t *to,
			int *naoi)
{
	for (int i = 0; i < n; i++) {
		int64_t e = model_coln(ev, i, "ts_ns") + model_coln(ev, i, "dur_ns");
		if (e > *to)
			*to = e;
		if (model_coln(ev, i, "ts_ns") < *from)
			*from = model_coln(ev, i, "ts_ns");
		te[i].tid = model_coln(ev, i, "tid");
		te[i].ts_ns = model_coln(ev, i, "ts_ns");
		te[i].dur_ns = model_coln(ev, i, "dur_ns");
		te[i].kind = PQgetvalue(ev, i, 0)[0] == 'w' ? 'w' : 'r';
		te[i].readier_tid = model_coln(ev, i, "readier_tid");
		te[i].aoi = in[i];
		*naoi += in[i];
	}
}

/* Each event's innermost frame (the hover text), from the stacks fr (one row per stack, by id). */
static void set_leaves(struct req *rq, PGresult *fr, PGresult *ev, struct tl_event *te, int n)
{
	int nf = PQntuples(fr);
	const char **leaf = arena_calloc(rq->a, (size_t)nf + 1, sizeof(char *));

	for (int j = 0; leaf && j < nf; j++) {
		const char **names;
		size_t k;
		if (req_frame_names(rq, model_col(fr, j, "frame_ids"), &names, &k) == 0 && k)
			leaf[j] = names[k - 1];
	}
	/* each event's by binary search */
	for (int i = 0; leaf && i < n; i++) {
		int row = model_find_stack(fr, model_coln(ev, i, "stack_id"));

		if (row >= 0)
			te[i].leaf = leaf[row];
	}
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

/* The stream's title, its role, symptom, counts (n events read, naoi in the AOI of mode), build, and
 * downloads. */
static void stream_summary(struct req *rq, PGresult *st, const char *canon, int n, int naoi, enum aoi_mode mode)
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
	html_rawf(rq, "</dd><dt>Events</dt><dd>%lld%s</dd><dt>In the AOI (%s)</dt><dd>%d</dd><dt>Build</dt><dd>",
		  (long long)model_coln(st, 0, "events"), n == STREAM_EVENTS ? " (first 200,000 shown)" : "",
		  aoi_mode_name(mode), naoi);
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

/* The timeline section: the AOI form and the SVG of te[0..n) over [from, to]. */
static void stream_timeline(struct req *rq, PGresult *st, const struct tl_event *te, int n, enum aoi_mode mode,
			    const char *aoi, const char *t, int64_t from, int64_t to)
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
		/* room for "tid 4194304 (symptom)" in bold */
		struct tl_view v = { 1300, from, to, model_coln(st, 0, "symptom_tid"), s0, s1,
				     aoi ? req_printf(rq, "?aoi=%s&t=", aoi_mode_name(mode)) : "?t=", 190 };
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
	PGresult *st = NULL, *ev = NULL, *fr = NULL;
	const char *aoi = req_query(rq, "aoi"), *t = req_query(rq, "t");
	enum aoi_mode mode = AOI_WAITGRAPH;
	struct tl_event *te;
	bool *in;
	int n, naoi = 0;
	int64_t s0, s1, from, to;

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
	n = PQntuples(ev);
	in = arena_calloc(rq->a, (size_t)n + 1, sizeof(bool));
	te = arena_calloc(rq->a, (size_t)n + 1, sizeof(*te));
	if (!in || !te || model_stream_aoi(st, ev, mode, in) < 0) {
		html_error(rq, 500, "out of memory");
		goto out;
	}
	/* the innermost frame of each stack, for the hover text */
	fr = model_stacks(rq->db, req_id_array(rq, ev, 4), err, sizeof(err));
	s0 = model_coln(st, 0, "symptom_start_ns");
	s1 = model_coln(st, 0, "symptom_end_ns");
	from = n ? model_coln(ev, 0, "ts_ns") : s0;
	to = s1;
	fill_events(ev, in, te, n, &from, &to, &naoi);
	if (fr)
		set_leaves(rq, fr, ev, te, n);
	if (t)
		zoom_param(t, &from, &to);
	stream_summary(rq, st, canon, n, naoi, mode);
	stream_labels(rq, st);
	stream_timeline(rq, st, te, n, mode, aoi, t, from, to);
	html_end(rq);
out:
	PQclear(st);
	PQclear(ev);
	PQclear(fr);
}
