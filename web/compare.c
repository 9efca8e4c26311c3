/* compare: the comparison of two runs, page and API (see compare.h). */
#include "web/compare.h"
#include "common/fmt.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "miner/compare.h"
#include "web/api.h"
#include "web/flame.h"
#include "web/html.h"
#include "web/model.h"
#include "web/pages.h"
#include "web/request.h"

#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What a run of this kind mined, in words. */
static const char *compare_kind_words(const char *kind)
{
	return strcmp(kind, "run") == 0 ? "CPU samples" : strcmp(kind, "wait") == 0 ? "wait events"
										       : "CPU samples and wait events";
}

/*
 * Whether run b may be compared with run a (the page's and the API's one check): 0; WEB_ENOTFOUND
 * when one does not exist; WEB_EINVAL, with err naming field b and the reason, when they mined
 * different kinds (never comparable: no cluster of one has a match in the other) or, unless force,
 * different apps (*forcible then: the same kind of two apps may share library code).
 */
static int compare_check(struct req *rq, int64_t a, int64_t b, bool force, bool *forcible, char *err, size_t errlen)
{
	PGresult *r[2];
	int rc = 0;

	*forcible = false;
	r[0] = model_run_what(rq->db, req_printf(rq, "%lld", (long long)a), err, errlen);
	r[1] = r[0] ? model_run_what(rq->db, req_printf(rq, "%lld", (long long)b), err, errlen) : NULL;
	if (!r[0] || !r[1]) {
		rc = WEB_EFAIL;
	} else if (PQntuples(r[0]) == 0 || PQntuples(r[1]) == 0) {
		snprintf(err, errlen, "run %lld: no such run", (long long)(PQntuples(r[0]) == 0 ? a : b));
		rc = WEB_ENOTFOUND;
	} else {
		const char *ka = model_col(r[0], 0, "kind"), *kb = model_col(r[1], 0, "kind");
		const char *pa = model_col(r[0], 0, "app"), *pb = model_col(r[1], 0, "app");

		pa = pa ? pa : "";
		pb = pb ? pb : "";
		if (strcmp(ka, kb) != 0) {
			snprintf(err, errlen, "b: run %lld mined %s of app %s, run %lld %s of app %s: not comparable",
				 (long long)b, compare_kind_words(kb), pb, (long long)a, compare_kind_words(ka), pa);
			rc = WEB_EINVAL;
		} else if (strcmp(pa, pb) != 0 && !force) {
			snprintf(err, errlen, "b: run %lld mined app %s, run %lld app %s: not comparable without force=1",
				 (long long)b, pb, (long long)a, pa);
			*forcible = true;
			rc = WEB_EINVAL;
		}
	}
	PQclear(r[0]);
	PQclear(r[1]);
	return rc;
}

void compare_get_compare(struct req *rq)
{
	const char *arg = rq->arg;
	static const char *const names[] = { "limit", "status", "force", NULL };
	const char *status = req_query(rq, "status");
	struct compare_opts o;
	struct compare *cmp;
	struct jsonw w;
	char err[512];
	int64_t a, b, lim, force;
	size_t shown = 0;
	bool forcible;
	int rc;

	if (!api_known_query(rq, names, false) || !api_num_param(rq, "limit", 1, 100000, 1000, &lim) ||
	    !api_num_param(rq, "force", 0, 1, 0, &force))
		return;
	if (status && strcmp(status, "new") && strcmp(status, "gone") && strcmp(status, "grown") &&
	    strcmp(status, "shrunk") && strcmp(status, "unchanged")) {
		req_json_error(rq, 400, "status: must be new, gone, grown, shrunk or unchanged");
		return;
	}
	a = strtoll(rq->path + strlen("/api/v1/runs/"), NULL, 10);
	b = strtoll(arg, NULL, 10);
	if ((rc = compare_check(rq, a, b, force, &forcible, err, sizeof(err))) != 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		return;
	}
	compare_opts_init(&o);
	o.threads = 1;   /* a request of many: one core each */
	rc = compare_runs(rq->db, a, b, &o, &cmp, err, sizeof(err));
	if (rc != 0) {
		req_json_error(rq, rc > 0 ? 404 : 500, "%s", err);
		return;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_ki64(&w, "a", a);
	jsonw_ki64(&w, "b", b);
	jsonw_ku64(&w, "a_streams", cmp->a_streams);
	jsonw_ku64(&w, "b_streams", cmp->b_streams);
	jsonw_karray(&w, "clusters");
	for (size_t i = 0; i < cmp->n && shown < (size_t)lim; i++) {
		const struct compare_row *r = &cmp->rows[i];

		if (status && strcmp(status, compare_status_name(r->status)) != 0)
			continue;
		shown++;
		jsonw_object(&w);
		jsonw_kstr(&w, "status", compare_status_name(r->status));
		jsonw_kstr(&w, "kind", r->kind == 'w' ? "wait" : "run");
		if (r->a)
			jsonw_ki64(&w, "a_cluster", r->a);
		else
			jsonw_knull(&w, "a_cluster");
		if (r->b)
			jsonw_ki64(&w, "b_cluster", r->b);
		else
			jsonw_knull(&w, "b_cluster");
		jsonw_kdouble(&w, "a_cost_per_stream_ns", round(r->a_cps));
		jsonw_kdouble(&w, "b_cost_per_stream_ns", round(r->b_cps));
		jsonw_kdouble(&w, "change_ns", round(r->diff));
		jsonw_kdouble(&w, "change_lo_ns", round(r->lo));
		jsonw_kdouble(&w, "change_hi_ns", round(r->hi));
		jsonw_kdouble(&w, "q", r->q);
		jsonw_kdouble(&w, "similarity", r->sim);
		if (r->signature)
			jsonw_ki64(&w, "signature_id", r->signature);
		else
			jsonw_knull(&w, "signature_id");
		jsonw_key(&w, "common");
		if (!api_put_names(rq, &w, req_ids_text(rq, r->common, r->ncommon))) {
			compare_free(cmp);
			return;
		}
		/* the frames that tell it apart in its run; null: mined before titles */
		jsonw_key(&w, "title");
		if (!r->title)
			jsonw_null(&w);
		else if (!api_put_names(rq, &w, req_ids_text(rq, r->title, r->ntitle))) {
			compare_free(cmp);
			return;
		}
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_ku64(&w, "total", cmp->n);
	jsonw_end(&w);
	compare_free(cmp);
	api_ok_json(rq, &w, 200);
}

/* The differential flame graph of two runs' stacks of one kind: B's widths, coloured by the change
 * of the cost per stream from A. */
static void compare_flame(struct req *rq, const char *a, const char *b, bool force, uint64_t na, uint64_t nb)
{
	const char *kind = req_query(rq, "kind");
	const char *k = kind && strcmp(kind, "wait") == 0 ? "w" : "r";
	struct flame *f = flame_open();
	char err[512];

	if (!f)
		return;
	for (int side = 0; side < 2; side++) {
		PGresult *r = model_run_kind_stacks(rq->db, side ? b : a, k, err, sizeof(err));
		struct req_names names;

		if (r && req_frame_names_rows(rq, r, PQfnumber(r, "frame_ids"), &names) < 0) {
			PQclear(r);
			r = NULL;
		}
		for (int i = 0; r && i < PQntuples(r) && !req_should_stop(rq); i++) {
			if (!names.row[i])
				continue;
			if (side)
				flame_add(f, names.row[i], names.n[i], (uint64_t)model_coln(r, i, "cost_ns"), 0);
			else
				flame_add_base(f, names.row[i], names.n[i], (uint64_t)model_coln(r, i, "cost_ns"));
		}
		PQclear(r);
	}
	flame_set_diff(f, nb ? 1.0 / (double)nb : 0, na ? 1.0 / (double)na : 0);
	html_rawf(rq, "<section id=\"flame\"><h2>What changed, frame by frame (%s)</h2><p class=\"hint\">Run B's %s "
		      "stacks; width is B's cost, colour the change of the cost per stream from run A: red grew, blue "
		      "shrank, white stayed (hover for both). <a href=\"?a=", k[0] == 'w' ? "wait" : "run (CPU)",
		  k[0] == 'w' ? "wait" : "run");
	html_text(rq, a);
	html_raw(rq, "&amp;b=");
	html_text(rq, b);
	/* a forced comparison stays forced on every link out of it */
	html_rawf(rq, "&amp;kind=%s%s#flame\">The %s stacks</a>. Click a frame to zoom in.</p>", k[0] == 'w' ? "run" : "wait",
		  force ? "&amp;force=1" : "", k[0] == 'w' ? "run" : "wait");
	pages_flame_graph(rq, f, (const char *const[]){ "a", "b", "kind", "force", NULL });
	html_raw(rq, "</section>");
	flame_free(f);
}

/* One done run as a choice: its app and kind as data for app.js, which narrows B's choices. */
static void compare_option(struct req *rq, PGresult *r, int i, const char *sel)
{
	const char *id = model_col(r, i, "run_id"), *app = model_col(r, i, "app"), *fin = model_col(r, i, "finished_at");

	html_raw(rq, "<option value=\"");
	html_text(rq, id);
	html_raw(rq, "\" data-app=\"");
	html_text(rq, app);
	html_raw(rq, "\" data-kind=\"");
	html_text(rq, model_col(r, i, "kind"));
	html_raw(rq, sel && strcmp(sel, id) == 0 ? "\" selected>#" : "\">#");
	html_text(rq, id);
	html_raw(rq, " · ");
	html_text(rq, app);
	html_raw(rq, " · ");
	html_text(rq, compare_kind_words(model_col(r, i, "kind")));
	if (fin && strlen(fin) >= 16) {
		char when[24];

		snprintf(when, sizeof(when), " · %.10s %.5s", fin, fin + 11);
		html_text(rq, when);
	}
	html_raw(rq, "</option>");
}

/*
 * The form: run A among every done run, run B among the done runs of A's app and kind only, newest
 * first; a plain GET, so without JS choosing A and submitting lists B's choices (app.js narrows
 * them as A changes).
 */
static void compare_picker(struct req *rq, const char *sa, const char *sb)
{
	char err[512];
	PGresult *all = model_compare_runs(rq->db, NULL, NULL, 500, err, sizeof(err)), *what = NULL, *bs = NULL;
	int64_t a;

	if (!all) {
		html_raw(rq, "<p class=\"error\">");
		html_text(rq, err);
		html_raw(rq, "</p>");
		return;
	}
	if (sa && util_parse_i64(sa, 1, INT64_MAX, &a) == 0 && (what = model_run_what(rq->db, sa, err, sizeof(err))) &&
	    PQntuples(what) == 1)
		bs = model_compare_runs(rq->db, model_col(what, 0, "app"), model_col(what, 0, "kind"), 500, err, sizeof(err));
	html_raw(rq, "<form class=\"filter\" id=\"compare-pick\" method=\"get\" action=\"/compare\"><label>Run A (before) "
		     "<select name=\"a\" id=\"compare-a\"><option value=\"\">— choose —</option>");
	for (int i = 0; i < PQntuples(all); i++)
		compare_option(rq, all, i, sa);
	html_raw(rq, "</select></label> <label>Run B (after) <select name=\"b\" id=\"compare-b\"><option value=\"\">");
	html_raw(rq, bs ? "— choose —" : "— choose run A first —");
	html_raw(rq, "</option>");
	for (int i = 0; bs && i < PQntuples(bs); i++)
		if (strcmp(model_col(bs, i, "run_id"), sa) != 0)
			compare_option(rq, bs, i, sb);
	html_raw(rq, "</select></label> <button type=\"submit\">Compare</button>");
	if (bs)
		html_raw(rq, " <span class=\"hint\" id=\"compare-b-hint\">B: the done runs of run A&#39;s app and kind, "
			     "newest first.</span>");
	else if (!sa)
		html_raw(rq, " <span class=\"hint\" id=\"compare-b-hint\">Choose run A, then Compare: B lists the runs "
			     "of its app and kind.</span>");
	html_raw(rq, "</form>");
	PQclear(bs);
	PQclear(what);
	PQclear(all);
}

/* The page's order: new clusters first, then by growth (B - A cost per stream), the most grown first. */
static int compare_by_growth(const void *x, const void *y)
{
	const struct compare_row *p = x, *q = y;

	if ((p->status == CMP_NEW) != (q->status == CMP_NEW))
		return p->status == CMP_NEW ? -1 : 1;
	if (p->diff != q->diff)
		return p->diff > q->diff ? -1 : 1;
	return p->b != q->b ? (p->b < q->b ? -1 : 1) : (p->a < q->a ? -1 : p->a > q->a);
}

void compare_page_compare(struct req *rq)
{
	const char *sa = req_query(rq, "a"), *sb = req_query(rq, "b"), *sf = req_query(rq, "force");
	bool force = sf && strcmp(sf, "1") == 0, forcible = false;
	struct compare_opts o;
	struct compare *cmp = NULL;
	char err[512], na[FMT_LEN], nb[FMT_LEN], nc[FMT_LEN];
	int64_t a = 0, b = 0;
	int rc = 0;

	html_begin(rq, "Compare runs");
	html_raw(rq, "<h1>Compare two runs</h1>");
	sa = sa && *sa ? sa : NULL;
	sb = sb && *sb ? sb : NULL;
	if (sa && sb) {
		if (util_parse_i64(sa, 1, INT64_MAX, &a) < 0 || util_parse_i64(sb, 1, INT64_MAX, &b) < 0) {
			snprintf(err, sizeof(err), "Give two run ids.");
			rc = WEB_EINVAL;
		} else {
			rc = compare_check(rq, a, b, force, &forcible, err, sizeof(err));
		}
	}
	/* refused: said at the top, before anything else */
	if (rc == WEB_EINVAL && a && b) {
		html_raw(rq, "<div class=\"warning\" id=\"compare-warning\" role=\"alert\"><p><strong>");
		html_text(rq, forcible ? "Different apps: not compared." : "Nothing in common to compare.");
		html_raw(rq, "</strong> R");   /* err is "b: run ...": a sentence here */
		html_text(rq, err + strlen("b: r"));
		html_raw(rq, ".</p>");
		if (forcible) {
			html_raw(rq, "<p>The same kind of events of two apps may share library code: <a id=\"compare-force\" "
				     "href=\"/compare?a=");
			html_text(rq, sa);
			html_raw(rq, "&amp;b=");
			html_text(rq, sb);
			html_raw(rq, "&amp;force=1\">compare them anyway</a>.</p>");
		}
		html_raw(rq, "</div>");
	}
	html_raw(rq, "<p>Run B against run A (before): clusters matched by signature and "
		     "similarity, each measured in both runs by its cost per stream (docs/analysis.md).</p>");
	compare_picker(rq, sa, sb);
	if (!sa || !sb || rc == WEB_EINVAL) {
		if (rc == WEB_EINVAL && !(a && b)) {
			html_raw(rq, "<p class=\"error\">");
			html_text(rq, err);
			html_raw(rq, "</p>");
		}
		html_end(rq);
		return;
	}
	if (rc == 0) {
		compare_opts_init(&o);
		o.threads = 1;
		rc = compare_runs(rq->db, a, b, &o, &cmp, err, sizeof(err));
	}
	if (rc != 0) {
		html_raw(rq, "<p class=\"error\">");
		html_text(rq, err);
		html_raw(rq, "</p>");
		html_end(rq);
		return;
	}
	html_rawf(rq, "<p><a href=\"/runs/%lld\">Run #%lld</a> (%s streams) against <a href=\"/runs/%lld\">run #%lld</a>"
		      " (%s streams): %s clusters.</p><table class=\"compare\" id=\"compare\"><thead><tr><th>Status</th>"
		      "<th>Kind</th><th class=\"n\">A</th><th class=\"n\">B</th><th class=\"n\">A per stream</th>"
		      "<th class=\"n\">B per stream</th><th class=\"n\" aria-sort=\"descending\" title=\"new clusters first, "
		      "then the most grown\">Change [95 %%]</th><th class=\"n\">Match</th>"
		      "<th>Title (the frames that tell it apart)</th></tr></thead><tbody>",
		  (long long)b, (long long)b, fmt_count(nb, (int64_t)cmp->b_streams), (long long)a, (long long)a,
		  fmt_count(na, (int64_t)cmp->a_streams), fmt_count(nc, (int64_t)cmp->n));
	qsort(cmp->rows, cmp->n, sizeof(*cmp->rows), compare_by_growth);
	for (size_t i = 0; i < cmp->n && i < 500; i++) {
		const struct compare_row *r = &cmp->rows[i];
		const char *st = compare_status_name(r->status);

		/* what changed stands out: a badge for new, grown and gone */
		if (r->status == CMP_NEW || r->status == CMP_GROWN || r->status == CMP_GONE)
			html_rawf(rq, "<tr class=\"%s\"><td><span class=\"badge %s\">%s</span></td><td>%s</td><td class=\"n\">",
				  st, st, st, r->kind == 'w' ? "wait" : "run");
		else
			html_rawf(rq, "<tr class=\"%s\"><td>%s</td><td>%s</td><td class=\"n\">", st, st,
				  r->kind == 'w' ? "wait" : "run");
		if (r->a)
			html_rawf(rq, "<a href=\"/clusters/%lld\">%lld</a>", (long long)r->a, (long long)r->a);
		html_raw(rq, "</td><td class=\"n\">");
		if (r->b)
			html_rawf(rq, "<a href=\"/clusters/%lld\">%lld</a>", (long long)r->b, (long long)r->b);
		html_raw(rq, "</td><td class=\"n\">");
		html_cost(rq, llround(r->a_cps));
		html_raw(rq, "</td><td class=\"n\">");
		html_cost(rq, llround(r->b_cps));
		html_raw(rq, "</td><td class=\"n\">");
		html_raw(rq, r->diff >= 0 ? "+" : "");
		html_cost(rq, llround(r->diff));
		if (!isnan(r->lo)) {
			html_raw(rq, " <span class=\"ci\">");
			html_interval(rq, r->lo, r->hi);
			html_raw(rq, "</span>");
		}
		html_raw(rq, "</td><td class=\"n\">");
		if (r->signature)
			html_rawf(rq, "<a href=\"/signatures\">signature #%lld</a>", (long long)r->signature);
		else if (!isnan(r->sim))
			html_rawf(rq, "%.2f", r->sim);
		html_raw(rq, "</td><td>");
		if (r->title)
			pages_title_frames(rq, req_ids_text(rq, r->title, r->ntitle));
		else
			pages_frame_ids_compact(rq, req_ids_text(rq, r->common, r->ncommon), 3);
		html_raw(rq, "</td></tr>");
	}
	html_raw(rq, "</tbody></table>");
	pages_download_links(rq, req_printf(rq, "/api/v1/runs/%lld/compare/%lld/profile", (long long)a, (long long)b));
	compare_flame(rq, sa, sb, force, cmp->a_streams, cmp->b_streams);
	compare_free(cmp);
	html_end(rq);
}
