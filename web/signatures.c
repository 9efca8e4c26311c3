/* signatures: the signatures' page, forms and API (see signatures.h). */
#include "web/signatures.h"
#include "clusterer/signature.h"
#include "common/arena.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "web/api.h"
#include "web/html.h"
#include "web/model.h"
#include "web/pages.h"
#include "web/plot.h"
#include "web/request.h"
#include "web/runs.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

/* The status of a signature module's error code (clusterer/signature.h). */
static int status_of(int code)
{
	switch (code) {
	case SIG_ENOTFOUND: return 404;
	case SIG_EEXIST: return 409;
	case SIG_EINVAL: return 400;
	default: return 500;
	}
}

/* An import's: a bad document is a 400 whatever it lacks; only a failure of the server is not. */
static int import_status(int code)
{
	return code == SIG_EFAIL ? 500 : 400;
}

/* A new signature's: a cluster given that does not exist is a bad field, not a missing signature. */
static int create_status(int code)
{
	return code == SIG_ENOTFOUND ? 400 : status_of(code);
}

void signatures_get_signatures(struct req *rq)
{
	api_get_page(rq, "signatures", model_signatures, model_signatures_count);
}

void signatures_post_signature(struct req *rq)
{
	static const char *const fields[] = { "name", "frames", "status", "note", "from_cluster", NULL };
	struct json_val o[5];
	struct json_reader r;
	const char *name, *status, *note, **frames = NULL;
	size_t nframes = 0, n;
	int64_t from = 0, id;
	char err[512];
	int rc;

	if (!req_may_write(rq, true) || !api_body_fields(rq, fields, o))
		return;
	if (!api_str_field(rq, o[0], "name", &name) || !api_str_field(rq, o[2], "status", &status) ||
	    !api_str_field(rq, o[3], "note", &note))
		goto out;
	if (!name) {
		req_json_error(rq, 400, "name: required");
		goto out;
	}
	if (json_val_type(o[1]) != JV_ARRAY) {
		req_json_error(rq, 400, "frames: required, an array of frame names (outermost first)");
		goto out;
	}
	nframes = json_count(o[1]);
	frames = arena_calloc(rq->a, nframes + 1, sizeof(*frames));
	json_reader_at(&r, o[1]);
	json_enter(&r);
	for (size_t i = 0; frames && json_next_item(&r); i++) {
		if (!(frames[i] = json_val_str(json_here(&r), rq->a, &n))) {
			req_json_error(rq, 400, "frames[%zu]: must be a string", i);
			goto out;
		}
		json_skip(&r);
	}
	if (json_given(o[4]) && (json_val_int(o[4], &from) != 0 || from < 1)) {
		req_json_error(rq, 400, "from_cluster: must be a cluster id");
		goto out;
	}
	rc = sig_create(rq->db, name, frames, nframes, status ? status : "open", note ? note : "", from, &id, err,
			sizeof(err));
	if (rc < 0) {
		req_json_error(rq, create_status(rc), "%s", err);
		goto out;
	}
	api_respond_id(rq, "signature_id", id, 201);
	req_add_header(rq, "Location", req_printf(rq, "/api/v1/signatures/%lld", (long long)id));
out:
	return;
}

void signatures_get_signature(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	PGresult *r;

	if (!api_known_query(rq, api_no_params, false))
		return;
	r = model_signature(rq->db, id, err, sizeof(err));
	if (api_failed(rq, r, err))
		return;
	if (PQntuples(r) == 0)
		req_json_error(rq, 404, "signature %s: no such signature", id);
	else
		api_row_response(rq, r);
	PQclear(r);
}

void signatures_patch_signature(struct req *rq)
{
	const char *id = rq->arg;
	static const char *const fields[] = { "status", "note", NULL };
	struct json_val o[2];
	const char *status, *note;
	char err[512];

	if (!req_may_write(rq, true) || !api_body_fields(rq, fields, o))
		return;
	if (api_str_field(rq, o[0], "status", &status) && api_str_field(rq, o[1], "note", &note)) {
		int rc = sig_update(rq->db, strtoll(id, NULL, 10), status, note, err, sizeof(err));

		if (rc < 0)
			req_json_error(rq, status_of(rc), "%s", err);
		else
			signatures_get_signature(rq);
	}
}

void signatures_get_export(struct req *rq)
{
	char err[512];

	if (!api_known_query(rq, api_no_params, false))
		return;
	if (sig_export(rq->db, &rq->out, err, sizeof(err)) < 0) {
		req_json_error(rq, 500, "%s", err);
		return;
	}
	if (buf_error(&rq->out) != BUF_OK) {
		req_json_error(rq, 500, "the export could not be built: %s", buf_error_text(&rq->out));
		return;
	}
	req_add_header(rq, "Content-Disposition", "attachment; filename=\"signatures.json\"");
	rq->status = 200;
	rq->ctype = "application/json";
}

void signatures_post_import(struct req *rq)
{
	char err[512];
	size_t n;
	int rc;

	if (!req_may_write(rq, true))
		return;
	rc = sig_import(rq->db, rq->body.data ? rq->body.data : "", rq->body.len, &n, err, sizeof(err));
	if (rc < 0) {
		req_json_error(rq, import_status(rc), "%s", err);
		return;
	}
	api_respond_id(rq, "imported", (int64_t)n, 200);
}

/* The start of a run's report (sig_coverage(), sig_triage() returning rc): its object opened with the
 * run and the kind looked at (*kind, read only on success), or false after the error response. */
static bool open_run_report(struct req *rq, struct jsonw *w, int rc, const char *err, const char *run,
			    const char *kind)
{
	if (rc < 0) {
		req_json_error(rq, status_of(rc), "%s", err);
		return false;
	}
	jsonw_init(w, &rq->out);
	jsonw_object(w);
	jsonw_ki64(w, "run_id", strtoll(run, NULL, 10));
	jsonw_kstr(w, "kind", *kind == 'w' ? "wait" : "run");
	return true;
}

void signatures_get_coverage(struct req *rq)
{
	const char *run = rq->arg;
	static const char *const names[] = { "signatures", "kind", NULL };
	const char *sel = req_query(rq, "signatures"), *kind;
	struct sig_coverage cov;
	struct jsonw w;
	int64_t *ids = NULL;
	size_t n = 0;
	char err[512];
	int rc;

	if (!api_known_query(rq, names, false) || !api_kind_param(rq, &kind))
		return;
	if (sel && !*sel) {
		req_json_error(rq, 400, "signatures: 'all' or signature ids separated by commas");
		return;
	}
	if (sel && strcmp(sel, "all") != 0) {
		const char *p = sel;
		ids = arena_calloc(rq->a, strlen(sel) / 2 + 2, sizeof(*ids));
		while (ids && *p) {
			char tok[24];
			size_t len = strcspn(p, ",");
			if (len == 0 || len >= sizeof(tok)) {
				req_json_error(rq, 400, "signatures: 'all' or signature ids separated by commas");
				return;
			}
			memcpy(tok, p, len);
			tok[len] = '\0';
			if (util_parse_i64(tok, 1, INT64_MAX, &ids[n]) < 0) {
				req_json_error(rq, 400, "signatures: 'all' or signature ids separated by commas");
				return;
			}
			n++;
			p += len + (p[len] == ',');
		}
	}
	rc = sig_coverage(rq->db, strtoll(run, NULL, 10), kind ? kind[0] : 0, ids, n, &cov, &rq->budget, err,
			  sizeof(err));
	if (!open_run_report(rq, &w, rc, err, run, &cov.kind))
		return;
	jsonw_kdouble(&w, "coverage", cov.coverage);
	jsonw_ku64(&w, "covered_cost_ns", cov.covered_ns);
	jsonw_ku64(&w, "total_cost_ns", cov.total_ns);
	jsonw_karray(&w, "by_signature");
	for (size_t i = 0; i < cov.nby; i++) {
		jsonw_object(&w);
		jsonw_ki64(&w, "signature_id", cov.by[i].id);
		jsonw_kstr(&w, "name", cov.by[i].name);
		jsonw_ku64(&w, "cost_ns", cov.by[i].cost_ns);
		jsonw_kdouble(&w, "coverage", cov.total_ns ? (double)cov.by[i].cost_ns / (double)cov.total_ns : 0);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	free(cov.by);
	api_ok_json(rq, &w, 200);
}

void signatures_get_triage(struct req *rq)
{
	const char *run = rq->arg;
	static const char *const names[] = { "kind", NULL };
	struct sig_triage tr;
	struct jsonw w;
	const char *kind;
	char err[512];
	int rc;

	if (!api_known_query(rq, names, false) || !api_kind_param(rq, &kind))
		return;
	rc = sig_triage(rq->db, strtoll(run, NULL, 10), kind ? kind[0] : 0, &tr, &rq->budget, err, sizeof(err));
	if (!open_run_report(rq, &w, rc, err, run, &tr.kind))
		return;
	jsonw_ku64(&w, "streams", tr.nstreams);
	jsonw_kdouble(&w, "max_coverage", tr.max_coverage);
	jsonw_karray(&w, "levels");
	for (int l = 0; l < SIG_LEVELS; l++)
		jsonw_double(&w, tr.level[l]);
	jsonw_end(&w);
	jsonw_kobject(&w, "orders");
	for (int o = 0; o < SIG_NORDERS; o++) {
		jsonw_karray(&w, sig_order_name((enum sig_order)o));
		for (int l = 0; l < SIG_LEVELS; l++)
			jsonw_double(&w, tr.needed[o][l]);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	api_ok_json(rq, &w, 200);
}

struct sel {
	int64_t *ids;
	size_t n;
	bool any;     /* some sig= parameter was given */
};

static bool collect_sig(void *cls, const char *key, const char *value)
{
	struct sel *s = cls;
	int64_t v;

	if (strcmp(key, "sig") == 0 && s->ids) {
		s->any = true;
		if (s->n < 1000 && util_parse_i64(value, 1, INT64_MAX, &v) == 0)
			s->ids[s->n++] = v;
	}
	return true;
}

/* Most covered first; equal ones by id. */
static int by_cost_desc(const void *a, const void *b)
{
	const struct sig_cover *x = a, *y = b;

	if (x->cost_ns != y->cost_ns)
		return x->cost_ns > y->cost_ns ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* Row i of the signatures' table: with the forms that change its status and note for a writer. */
static void sig_row(struct req *rq, PGresult *r, int i, bool writer)
{
	long long sid = (long long)model_coln(r, i, "signature_id");
	const char *st = model_col(r, i, "status");

	html_rawf(rq, "<tr id=\"sig-%lld\"><td><input type=\"checkbox\" form=\"coverage-form\" name=\"sig\" "
		      "value=\"%lld\" checked aria-label=\"use in coverage\"></td><td>", sid, sid);
	html_text(rq, model_col(r, i, "name"));
	html_raw(rq, "</td><td>");
	pages_frames_json_compact(rq, model_col(r, i, "frames"), 3);
	html_raw(rq, "</td>");
	if (writer) {
		html_rawf(rq, "<td colspan=\"2\"><form class=\"inline\" method=\"post\" action=\"/signatures/%lld\">",
			  sid);
		html_csrf_field(rq);
		html_raw(rq, "<select name=\"status\" aria-label=\"status\">");
		for (int k = 0; k < 3; k++) {
			static const char *const sts[] = { "open", "known", "fixed" };
			html_rawf(rq, "<option%s>%s</option>", strcmp(st, sts[k]) == 0 ? " selected" : "", sts[k]);
		}
		html_raw(rq, "</select><input name=\"note\" aria-label=\"note\" value=\"");
		html_text(rq, model_col(r, i, "note"));
		html_raw(rq, "\"><button type=\"submit\">Save</button></form></td>");
	} else {
		html_raw(rq, "<td>");
		html_text(rq, st);
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "note"));
		html_raw(rq, "</td>");
	}
	html_raw(rq, "<td>");
	if (model_col(r, i, "from_cluster") && model_col(r, i, "from_expired")[0] == 't')
		html_rawf(rq, "cluster %lld of run %lld (expired)", (long long)model_coln(r, i, "from_cluster"),
			  (long long)model_coln(r, i, "from_run"));
	else if (model_col(r, i, "from_cluster"))
		html_rawf(rq, "<a href=\"/clusters/%lld\">cluster %lld</a>", (long long)model_coln(r, i, "from_cluster"),
			  (long long)model_coln(r, i, "from_cluster"));
	html_raw(rq, "</td><td class=\"time\">");
	html_time(rq, model_col(r, i, "updated_at"));
	html_raw(rq, "</td></tr>");

}

/* The signatures of this page, each with its box for the coverage form. */
static void sig_table(struct req *rq, PGresult *r, bool writer)
{
	html_raw(rq, writer ? "<table class=\"signatures\"><thead><tr><th>Use</th><th>Name</th><th>Frames</th>"
			      "<th colspan=\"2\">Status and note</th><th>From</th><th>Updated (UTC)</th></tr></thead><tbody>"
			    : "<table class=\"signatures\"><thead><tr><th>Use</th><th>Name</th><th>Frames</th><th>Status</th>"
			      "<th>Note</th><th>From</th><th>Updated (UTC)</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(r); i++) {
		sig_row(rq, r, i, writer);
}
	if (PQntuples(r) == 0)
		html_raw(rq, "<tr><td colspan=\"7\" class=\"empty\">No signatures yet: open a cluster and create one from "
			     "its common part.</td></tr>");
	html_raw(rq, "</tbody></table>");
}

/* The coverage form's run (the last 100 done) and kind ('w', 'r', or 0: the run's first). */
static void run_choice(struct req *rq, int64_t run_id, char kind)
{
	char err[512];
	PGresult *runs;

	runs = model_runs(rq->db, NULL, "done", 100, 0, err, sizeof(err));
	html_raw(rq, "<section class=\"card\"><h2>Coverage and triage</h2><p>Choose the signatures above and a run:</p>"
		     "<label>Run <select name=\"run\" form=\"coverage-form\">");
	for (int i = 0; runs && i < PQntuples(runs); i++) {
		long long id = (long long)model_coln(runs, i, "run_id");
		html_rawf(rq, "<option value=\"%lld\"%s>#%lld ", id, id == run_id ? " selected" : "", id);
		html_text(rq, model_col(runs, i, "app"));
		html_raw(rq, " – ");
		runs_run_params_summary(rq, model_col(runs, i, "params"));
		html_raw(rq, "</option>");
	}
	PQclear(runs);
	html_rawf(rq, "</select></label> <label>Events <select name=\"kind\" form=\"coverage-form\">"
		      "<option value=\"\">the run's</option><option value=\"wait\"%s>wait</option>"
		      "<option value=\"run\"%s>run</option></select></label>"
		      " <button type=\"submit\" form=\"coverage-form\">Show</button>",
		  kind == 'w' ? " selected" : "", kind == 'r' ? " selected" : "");
}

/* The coverage of the checked signatures (a bare ?run=ID link: all of them) over run_id's events of kind. */
static void coverage_section(struct req *rq, int64_t run_id, char kind)
{
	struct sig_coverage cov;
	struct sel sel = { arena_calloc(rq->a, 1001, sizeof(int64_t)), 0, false };
	char e2[512];

	/* the checked signatures (a bare ?run=ID link: all of them) */
	req_query_each(rq, collect_sig, &sel);
	if (sel.any && sel.n == 0) {
		html_raw(rq, "<p class=\"hint\">No signature chosen.</p>");
	} else if (sig_coverage(rq->db, run_id, kind, sel.ids, sel.n, &cov, &rq->budget, e2, sizeof(e2)) < 0) {
		html_raw(rq, "<p class=\"error\">");
		html_text(rq, e2);
		html_raw(rq, "</p>");
	} else {
		html_rawf(rq, "<p class=\"coverage\">All signatures cover <strong>%.1f%%</strong> of run #%lld's AOI "
			      "cost of %s events (", cov.coverage * 100, (long long)run_id,
			  cov.kind == 'w' ? "wait" : "run");
		html_cost(rq, (int64_t)cov.covered_ns);
		html_raw(rq, " of ");
		html_cost(rq, (int64_t)cov.total_ns);
		html_raw(rq, ").</p>");
		/* the ones that cover the most, a page of them */
		qsort(cov.by, cov.nby, sizeof(*cov.by), by_cost_desc);
		if (cov.nby > PAGES_ROWS)
			html_rawf(rq, "<p class=\"hint\">The %d signatures that cover the most of the %zu.</p>", PAGES_ROWS,
				  cov.nby);
		html_raw(rq, "<table class=\"coverage\"><thead><tr><th>Signature</th><th class=\"n\">Cost</th>"
			     "<th class=\"n\">Coverage</th></tr></thead><tbody>");
		for (size_t i = 0; i < cov.nby && i < PAGES_ROWS; i++) {
			html_raw(rq, "<tr><td>");
			html_text(rq, cov.by[i].name);
			html_raw(rq, "</td><td class=\"n\">");
			html_cost(rq, (int64_t)cov.by[i].cost_ns);
			html_raw(rq, "</td><td class=\"n metric\">");
			html_share(rq, cov.total_ns ? (double)cov.by[i].cost_ns / (double)cov.total_ns : 0);
			html_bar(rq, (double)cov.by[i].cost_ns, (double)cov.total_ns, 80);
			html_raw(rq, "</td></tr>");
		}
		html_raw(rq, "</tbody></table>");
		free(cov.by);
	}
}

/* The triage comparison over run_id's events of kind, when the signatures cover any of it. */
static void triage_section(struct req *rq, int64_t run_id, char kind)
{
	struct sig_triage tr;
	char e2[512];
	double x[SIG_NORDERS][SIG_LEVELS], y[SIG_LEVELS];
	struct plot_series ps[SIG_NORDERS];
	struct plot_opts po = { "Streams to open per coverage level", "streams opened",
				"coverage reached", 720, 360, 0, 0, 1 };

	if (sig_triage(rq->db, run_id, kind, &tr, &rq->budget, e2, sizeof(e2)) != 0 || tr.max_coverage <= 0)
		return;
	for (int l = 0; l < SIG_LEVELS; l++)
		y[l] = tr.level[l];
	for (int o = 0; o < SIG_NORDERS; o++) {
		for (int l = 0; l < SIG_LEVELS; l++)
			x[o][l] = tr.needed[o][l];
		ps[o].name = sig_order_name((enum sig_order)o);
		ps[o].x = x[o];
		ps[o].y = y;
		ps[o].n = SIG_LEVELS;
	}
	html_raw(rq, "<h3>Triage: streams an analyst opens to reach each coverage level (");
	html_count(rq, (int64_t)tr.nstreams);
	html_raw(rq, " streams)</h3><div class=\"plot\">");
	plot_render_svg(ps, SIG_NORDERS, &po, &rq->out);
	html_raw(rq, "</div><table class=\"triage\"><thead><tr><th class=\"n\">Coverage</th>");
	for (int o = 0; o < SIG_NORDERS; o++)
		html_rawf(rq, "<th class=\"n\">%s</th>", sig_order_name((enum sig_order)o));
	html_raw(rq, "</tr></thead><tbody>");
	for (int l = 0; l < SIG_LEVELS; l++) {
		html_raw(rq, "<tr><td class=\"n\">");
		html_share(rq, tr.level[l]);
		html_raw(rq, "</td>");
		for (int o = 0; o < SIG_NORDERS; o++)
			html_rawf(rq, "<td class=\"n\">%g</td>", tr.needed[o][l]);
		html_raw(rq, "</tr>");
	}
	html_raw(rq, "</tbody></table>");
}

/* A writer's form to import an exported document. */
static void import_form(struct req *rq)
{
	html_raw(rq, "<section class=\"card\"><h2>Import</h2><form method=\"post\" action=\"/signatures/import\" "
		     "id=\"import-form\">");
	html_csrf_field(rq);
	html_raw(rq, "<label>A file exported before <input type=\"file\" id=\"import-file\" accept=\".json,"
		     "application/json\"></label><label>or the JSON document <textarea name=\"doc\" rows=\"4\" "
		     "required></textarea></label><button type=\"submit\">Import</button></form></section>");
}

void signatures_page_signatures(struct req *rq)
{
	char err[512];
	long offset = pages_offset(rq);
	PGresult *r = model_signatures(rq->db, PAGES_ROWS, offset, err, sizeof(err)), *cnt;
	const char *run = req_query(rq, "run"), *kq = req_query(rq, "kind");
	int64_t run_id = 0;
	char kind;
	bool writer = rq->role >= AUTH_ANALYST;

	if (!r) {
		html_error(rq, 500, err);
		return;
	}
	cnt = model_signatures_count(rq->db, err, sizeof(err));
	if (run && util_parse_i64(run, 1, INT64_MAX, &run_id) < 0)
		run_id = 0;
	html_begin(rq, "Signatures");
	html_raw(rq, "<h1>Performance signatures</h1><p><a class=\"button\" href=\"/api/v1/signatures/export\" "
		     "download=\"signatures.json\">Export all (JSON)</a></p>");
	html_raw(rq, "<form id=\"coverage-form\" method=\"get\" action=\"/signatures\"></form>");
	sig_table(rq, r, writer);
	/* PAGES_ROWS signatures a page: thousands made the page (and its coverage) take minutes */
	pages_pager(rq, "/signatures",
		    req_printf(rq, "%s%s%s", run_id ? req_printf(rq, "&run=%lld", (long long)run_id) : "",
			       kq && (strcmp(kq, "wait") == 0 || strcmp(kq, "run") == 0) ? "&kind=" : "",
			       kq && (strcmp(kq, "wait") == 0 || strcmp(kq, "run") == 0) ? kq : ""),
		    offset, PQntuples(r), cnt ? (long)model_coln(cnt, 0, "total") : 0, false);
	PQclear(cnt);

	/* coverage and triage over a run, per kind (mining.md section 7); default: the run's first */
	kind = kq && strcmp(kq, "run") == 0 ? 'r' : kq && strcmp(kq, "wait") == 0 ? 'w' : 0;
	run_choice(rq, run_id, kind);
	if (run_id) {
		coverage_section(rq, run_id, kind);
		triage_section(rq, run_id, kind);
	}
	html_raw(rq, "</section>");
	if (writer)
		import_form(rq);
	html_end(rq);
	PQclear(r);
}

/* Frames from a textarea: one per line, blank lines and surrounding spaces dropped. */
static size_t split_lines(struct req *rq, const char *text, const char **out, size_t max)
{
	size_t n = 0;

	while (text && *text && n < max) {
		size_t len = strcspn(text, "\r\n");
		const char *s = text, *e = text + len;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (e > s)
			out[n++] = arena_strndup(rq->a, s, (size_t)(e - s));
		text += len;
		while (*text == '\r' || *text == '\n')
			text++;
	}
	return n;
}

void signatures_post_signature_new(struct req *rq)
{
	const char *frames[513];
	size_t n;
	int64_t id, from = 0;
	char err[512];
	const char *fc = req_form(rq, "from_cluster");
	int rc;

	if (!req_may_write(rq, false))
		return;
	n = split_lines(rq, req_form(rq, "frames"), frames, 513);
	if (fc && *fc && util_parse_i64(fc, 1, INT64_MAX, &from) < 0) {
		html_error(rq, 400, "from_cluster: must be a cluster id");
		return;
	}
	rc = sig_create(rq->db, req_form(rq, "name") ? req_form(rq, "name") : "", frames, n,
			req_form(rq, "status") ? req_form(rq, "status") : "open",
			req_form(rq, "note") ? req_form(rq, "note") : "", from, &id, err, sizeof(err));
	if (rc < 0) {
		html_error(rq, create_status(rc), err);
		return;
	}
	html_redirect(rq, req_printf(rq, "/signatures#sig-%lld", (long long)id));
}

void signatures_post_signature_update(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];

	if (!req_may_write(rq, false))
		return;
	int rc = sig_update(rq->db, strtoll(id, NULL, 10), req_form(rq, "status"), req_form(rq, "note"), err,
			    sizeof(err));

	if (rc < 0) {
		html_error(rq, status_of(rc), err);
		return;
	}
	html_redirect(rq, req_printf(rq, "/signatures#sig-%s", id));
}

void signatures_post_signature_import(struct req *rq)
{
	const char *doc;
	char err[512];
	size_t n;
	int rc;

	if (!req_may_write(rq, false))
		return;
	doc = req_form(rq, "doc");
	if (!doc) {
		html_error(rq, 400, "doc: the exported JSON document is required");
		return;
	}
	if ((rc = sig_import(rq->db, doc, strlen(doc), &n, err, sizeof(err))) < 0) {
		html_error(rq, import_status(rc), err);
		return;
	}
	html_redirect(rq, "/signatures");
}
