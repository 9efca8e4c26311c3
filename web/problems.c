/* problems: the problems' pages and API (see problems.h). */
#include "web/problems.h"
#include "common/jsonw.h"
#include "web/api.h"
#include "web/attribution.h"
#include "web/clusters.h"
#include "web/html.h"
#include "web/model.h"
#include "web/pages.h"
#include "web/request.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

/* Why a run has no problems to list, or NULL when it has them (its counts name how many: a run
 * mined before migration 023 has no such count, and its clusters no problem). */
static const char *problems_absent(PGresult *run)
{
	const char *st = model_col(run, 0, "status");

	if (!st || strcmp(st, "done") != 0)
		return "the run is not done: its problems come with its clusters";
	if (model_run_count(run, "problems") < 0)
		return "the run was mined before problems existed: mine it again to group its clusters into problems";
	return NULL;
}

/* A problem row's "title" as frame names. */
static bool problem_head(struct req *rq, struct jsonw *w, PGresult *rows, int i)
{
	jsonw_key(w, "title");
	return api_put_names(rq, w, model_col(rows, i, "title"));
}

/* A member cluster of model_problem_clusters(), its "title" and "common" as frame names. */
static bool problem_cluster(struct req *rq, struct jsonw *w, PGresult *cl, int k)
{
	static const char *const cskip[] = { "problem_id", "title", "common", NULL };

	api_put_members(w, cl, k, cskip);
	jsonw_key(w, "title");
	if (!api_put_names(rq, w, model_col(cl, k, "title")))
		return false;
	jsonw_key(w, "common");
	return api_put_names(rq, w, model_col(cl, k, "common"));
}

/* Problem rows (model_problems()/model_problem()) as objects with "title" as frame names and their
 * member clusters from cl (model_problem_clusters(), by problem); with array false the one
 * problem's object is left open. Returns false after an error response. */
static bool put_problems(struct req *rq, struct jsonw *w, PGresult *rows, PGresult *cl, bool array)
{
	static const char *const skip[] = { "title", NULL };
	static const struct api_parents how = { skip, problem_head, "clusters", problem_cluster };

	return api_put_parents(rq, w, &how, rows, cl, array);
}

void problems_get_problems(struct req *rq)
{
	const char *run = rq->arg;
	static const char *const names[] = { "limit", "offset", NULL };
	PGresult *r, *rows = NULL, *count = NULL, *cl = NULL;
	const char *why;
	long limit, offset;
	char err[512];

	if (!api_known_query(rq, names, false) || !api_page_params(rq, &limit, &offset) || !(r = api_need_run(rq, run)))
		return;
	why = problems_absent(r);
	rows = model_problems(rq->db, run, limit, offset, err, sizeof(err));
	if (!api_failed(rq, rows, err))
		count = model_problems_count(rq->db, run, err, sizeof(err));
	if (count && !api_failed(rq, count, err))
		cl = model_problem_clusters(rq->db, req_id_array(rq, rows, 0), err, sizeof(err));
	if (cl && !api_failed(rq, cl, err)) {
		struct jsonw w;

		jsonw_init(&w, &rq->out);
		jsonw_object(&w);
		jsonw_key(&w, "problems");
		if (put_problems(rq, &w, rows, cl, true)) {
			jsonw_key(&w, "total");
			jsonw_number_text(&w, PQgetvalue(count, 0, 0));
			jsonw_key(&w, "reason");
			if (why)
				jsonw_str(&w, why);
			else
				jsonw_null(&w);
			jsonw_end(&w);
			api_ok_json(rq, &w, 200);
		}
	}
	PQclear(r);
	PQclear(rows);
	PQclear(count);
	PQclear(cl);
}

void problems_get_problem(struct req *rq)
{
	const char *id = rq->arg;
	static const char *const names[] = { "limit", NULL };
	PGresult *p, *r = NULL;
	char err[512];
	int64_t lim;
	struct jsonw w;

	if (!api_known_query(rq, names, false) || !api_num_param(rq, "limit", 1, 1000, 20, &lim))
		return;
	if (!(p = api_need_problem(rq, id)))
		return;
	jsonw_init(&w, &rq->out);
	r = model_problem_clusters(rq->db, req_id_array(rq, p, 0), err, sizeof(err));
	if (api_failed(rq, r, err) || !put_problems(rq, &w, p, r, false))
		goto out;
	PQclear(r);
	r = model_problem_streams(rq->db, id, (long)lim, err, sizeof(err));
	if (api_failed(rq, r, err))
		goto out;
	jsonw_key(&w, "top_streams");
	api_put_rows(&w, r, NULL);
	PQclear(r);
	r = model_problem_hosts(rq->db, id, (long)lim, err, sizeof(err));
	if (api_failed(rq, r, err))
		goto out;
	jsonw_key(&w, "hosts");
	api_put_rows(&w, r, NULL);
	jsonw_end(&w);
	api_ok_json(rq, &w, 200);
out:
	PQclear(p);
	PQclear(r);
}

void problems_get_problem_attribution(struct req *rq)
{
	const char *id = rq->arg;
	clusters_get_attribution(rq, ATTRIBUTION_PROBLEM, id);
}

#define PROBLEMS_SHOWN 10

/* A problem's metrics as definition list items. */
static void problem_metrics(struct req *rq, PGresult *p, int i)
{
	html_raw(rq, "<dl class=\"counts\"><dt>Total cost</dt><dd>");
	html_cost(rq, model_coln(p, i, "total_cost_ns"));
	if (model_coln(p, i, "est_cost_ns") != model_coln(p, i, "total_cost_ns"))
		pages_est_cost_note(rq, model_coln(p, i, "est_cost_ns"));
	html_raw(rq, "</dd><dt>Streams</dt><dd>");
	html_count(rq, model_coln(p, i, "streams"));
	html_raw(rq, "</dd><dt>Events</dt><dd>");
	html_count(rq, model_coln(p, i, "events"));
	html_raw(rq, "</dd><dt>Average cost</dt><dd>");
	html_cost(rq, model_coln(p, i, "avg_cost_ns"));
	html_raw(rq, "</dd>");
	if (model_col(p, i, "excess_cost_ns")) {
		html_raw(rq, "<dt title=\"beyond what the baseline streams spend\">Excess cost</dt><dd>");
		html_cost(rq, model_coln(p, i, "excess_cost_ns"));
		html_raw(rq, "</dd>");
	}
	html_raw(rq, "</dl>");
}

/* A problem of the machine (cause cpu, docs/mining.md "Problems"): say so, it is not the code's. */
static void machine_note(struct req *rq, PGresult *p, int i)
{
	const char *cause = model_col(p, i, "cause");

	if (cause && strcmp(cause, "cpu") == 0)
		html_raw(rq, "<p class=\"machine\"><strong>The machine, not the code:</strong> these units waited for a "
			     "CPU (the scheduler's run queue, or the cgroup's CPU limit), so their hosts were saturated or "
			     "throttled. Ranked after the program's own problems; see its hosts.</p>");
}

/* The member clusters of problem pid (rows of model_problem_clusters() from *k on). */
static void problem_members(struct req *rq, PGresult *cl, int *k, const char *pid)
{
	int end = api_child_rows(cl, k, pid);

	html_raw(rq, "<ul class=\"members\">");
	for (; *k < end; (*k)++) {
		long long cid = (long long)model_coln(cl, *k, "cluster_id");

		html_rawf(rq, "<li>%s cluster <a href=\"/clusters/%lld\">#%lld</a> (rank %lld), ",
			  model_col(cl, *k, "kind")[0] == 'w' ? "wait" : "run", cid, cid,
			  (long long)model_coln(cl, *k, "rank"));
		html_cost(rq, model_coln(cl, *k, "total_cost_ns"));
		html_rawf(rq, " in %lld streams: <a class=\"common\" href=\"/clusters/%lld\">",
			  (long long)model_coln(cl, *k, "streams"), cid);
		pages_title_frames(rq, model_col(cl, *k, "title"));
		html_raw(rq, "</a></li>");
	}
	html_raw(rq, "</ul>");
}

void problems_section(struct req *rq, const char *id, PGresult *run)
{
	char err[512];
	PGresult *p = NULL, *cnt = NULL, *cl = NULL;
	const char *st = model_col(run, 0, "status");
	int k = 0;

	html_raw(rq, "<section id=\"problems\"><h2>Problems</h2>");
	if (!st || strcmp(st, "done") != 0) {
		html_raw(rq, "<p class=\"hint\">The run is not done: its problems come with its clusters.</p></section>");
		return;
	}
	if (model_run_count(run, "problems") < 0) {
		html_raw(rq, "<p class=\"hint\">This run was mined before problems existed: its clusters are listed "
			     "one by one below. Mine it again to group them into problems.</p></section>");
		return;
	}
	p = model_problems(rq->db, id, PROBLEMS_SHOWN, 0, err, sizeof(err));
	cnt = p ? model_problems_count(rq->db, id, err, sizeof(err)) : NULL;
	cl = cnt ? model_problem_clusters(rq->db, req_id_array(rq, p, 0), err, sizeof(err)) : NULL;
	if (!cl) {
		html_raw(rq, "<p class=\"error\">");
		html_text(rq, err);
		html_raw(rq, "</p>");
	} else {
		req_frames_warm(rq, p, "title");
		req_frames_warm(rq, cl, "title");
		html_raw(rq, "<ol class=\"problems\">");
		for (int i = 0; i < PQntuples(p); i++) {
			const char *pid = model_col(p, i, "problem_id");

			html_rawf(rq, "<li class=\"problem\" id=\"problem-%s\"><h3><a href=\"/problems/%s\">", pid, pid);
			pages_title_frames(rq, model_col(p, i, "title"));
			html_raw(rq, "</a></h3>");
			machine_note(rq, p, i);
			problem_metrics(rq, p, i);
			problem_members(rq, cl, &k, pid);
			html_raw(rq, "</li>");
		}
		html_raw(rq, "</ol>");
		if (PQntuples(p) == 0)
			html_raw(rq, "<p class=\"empty\">No problems: the run found no clusters.</p>");
		else if (model_coln(cnt, 0, "total") > PQntuples(p))
		{
			html_raw(rq, "<p>");
			html_count(rq, model_coln(cnt, 0, "total") - PQntuples(p));
			html_rawf(rq, " more problems, in the clusters below (and GET /api/v1/runs/%s/problems).</p>", id);
		}
	}
	html_raw(rq, "</section>");
	PQclear(p);
	PQclear(cnt);
	PQclear(cl);
}

void problems_page_problem(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	PGresult *p, *cl = NULL, *h = NULL, *s = NULL;
	int k = 0;

	p = model_problem(rq->db, id, err, sizeof(err));
	if (p && PQntuples(p) == 0) {
		PQclear(p);
		html_error(rq, 404, "No such problem.");
		return;
	}
	cl = p ? model_problem_clusters(rq->db, req_id_array(rq, p, 0), err, sizeof(err)) : NULL;
	h = cl ? model_problem_hosts(rq->db, id, 20, err, sizeof(err)) : NULL;
	s = h ? model_problem_streams(rq->db, id, 20, err, sizeof(err)) : NULL;
	if (!s) {
		PQclear(p);
		PQclear(cl);
		PQclear(h);
		html_error(rq, 500, err);
		return;
	}
	html_begin(rq, req_printf(rq, "Problem %s", id));
	html_rawf(rq, "<h1>Problem #%s, rank %lld of <a href=\"/runs/%lld\">run #%lld</a>: ", id,
		  (long long)model_coln(p, 0, "rank"), (long long)model_coln(p, 0, "run_id"),
		  (long long)model_coln(p, 0, "run_id"));
	pages_title_frames(rq, model_col(p, 0, "title"));
	html_raw(rq, "</h1>");
	machine_note(rq, p, 0);
	problem_metrics(rq, p, 0);
	clusters_attribution_section(rq, ATTRIBUTION_PROBLEM, id);
	clusters_costmodel_section(rq, ATTRIBUTION_PROBLEM, id);
	html_raw(rq, "<h2>Clusters</h2>");
	problem_members(rq, cl, &k, id);
	html_raw(rq, "<h2>Hosts</h2><table class=\"hosts\"><thead><tr><th>Host</th><th class=\"n\">Streams</th>"
		     "<th class=\"n\">Cost</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(h); i++) {
		html_raw(rq, "<tr><td>");
		html_text(rq, model_col(h, i, "host"));
		html_raw(rq, "</td><td class=\"n\">");
		html_count(rq, model_coln(h, i, "streams"));
		html_raw(rq, "</td><td class=\"n\">");
		html_cost(rq, model_coln(h, i, "cost_ns"));
		html_raw(rq, "</td></tr>");
	}
	html_raw(rq, "</tbody></table><h2>Costliest streams</h2><table class=\"streams\"><thead><tr><th>Stream</th>"
		     "<th>Host</th><th class=\"n\">Cost</th><th class=\"n\">Events</th></tr></thead><tbody>");
	for (int i = 0; i < PQntuples(s); i++) {
		html_raw(rq, "<tr><td><a href=\"/streams/");
		html_text(rq, model_col(s, i, "stream_id"));
		html_raw(rq, "\">");
		html_text(rq, model_col(s, i, "stream_id"));
		html_raw(rq, "</a></td><td>");
		html_text(rq, model_col(s, i, "host"));
		html_raw(rq, "</td><td class=\"n\">");
		html_cost(rq, model_coln(s, i, "cost_ns"));
		html_raw(rq, "</td><td class=\"n\">");
		html_count(rq, model_coln(s, i, "events"));
		html_raw(rq, "</td></tr>");
	}
	html_raw(rq, "</tbody></table>");
	html_end(rq);
	PQclear(p);
	PQclear(cl);
	PQclear(h);
	PQclear(s);
}
