/* clusters: the cluster page and the clusters' API (see clusters.h). */
#include "web/clusters.h"
#include "common/arena.h"
#include "common/fmt.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "web/api.h"
#include "web/attribution.h"
#include "web/costcache.h"
#include "web/flame.h"
#include "web/html.h"
#include "web/model.h"
#include "web/pages.h"
#include "web/request.h"

#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A cluster row's frames: "common" as frame names, "title" (null: mined before titles), "patterns_total". */
static bool cluster_head(struct req *rq, struct jsonw *w, PGresult *rows, int i)
{
	jsonw_key(w, "common");
	if (!api_put_names(rq, w, PQgetvalue(rows, i, PQfnumber(rows, "common"))))
		return false;
	/* the frames that tell it apart (docs/mining.md); null: mined before titles */
	jsonw_key(w, "title");
	if (!model_col(rows, i, "title"))
		jsonw_null(w);
	else if (!api_put_names(rq, w, model_col(rows, i, "title")))
		return false;
	jsonw_key(w, "patterns_total");
	jsonw_number_text(w, PQgetvalue(rows, i, PQfnumber(rows, "patterns_total")));
	return true;
}

/* A pattern of model_cluster_patterns(). */
static bool cluster_pattern(struct req *rq, struct jsonw *w, PGresult *pats, int pc)
{
	jsonw_key(w, "pattern_id");
	jsonw_number_text(w, PQgetvalue(pats, pc, 1));
	jsonw_key(w, "frames");
	if (!api_put_names(rq, w, PQgetvalue(pats, pc, 2)))
		return false;
	jsonw_key(w, "cost_ns");
	jsonw_number_text(w, PQgetvalue(pats, pc, 3));
	jsonw_key(w, "events");
	jsonw_number_text(w, PQgetvalue(pats, pc, 4));
	jsonw_key(w, "streams");
	jsonw_number_text(w, PQgetvalue(pats, pc, 5));
	jsonw_key(w, "est_cost_ns");
	jsonw_number_text(w, PQgetvalue(pats, pc, 6));
	return true;
}

/*
 * Writes cluster rows (model_clusters() or model_cluster()) as objects with "common" as
 * frame names and "patterns" from pats (model_cluster_patterns(), ordered by cluster); with
 * array false, the one cluster's object is left open for more members. Returns false after
 * an error response.
 */
static bool put_clusters(struct req *rq, struct jsonw *w, PGresult *rows, PGresult *pats, bool array)
{
	static const char *const skip[] = { "common", "patterns_total", "title", NULL };
	static const struct api_parents how = { skip, cluster_head, "patterns", cluster_pattern };

	return api_put_parents(rq, w, &how, rows, pats, array);
}

void clusters_get_clusters(struct req *rq)
{
	const char *run = rq->arg;
	static const char *const names[] = { "sort", "kind", "q", "patterns", "limit", "offset", NULL };
	const char *sort = req_query(rq, "sort"), *kind, *text = req_query(rq, "q");
	PGresult *r, *rows = NULL, *count = NULL, *pats = NULL;
	int64_t np;
	long limit, offset;
	int s = 0;
	char err[512];

	if (!api_known_query(rq, names, false) || !api_page_params(rq, &limit, &offset) || !api_kind_param(rq, &kind) ||
	    !api_num_param(rq, "patterns", 0, 1000, 10, &np))
		return;
	if (sort && (s = model_sort_parse(sort)) < 0) {
		req_json_error(rq, 400, "sort: must be total_cost, streams, events, avg_cost or excess_cost");
		return;
	}
	if (text && (!*text || strlen(text) > 1024)) {
		req_json_error(rq, 400, "q: 1 to 1024 bytes of frame text");
		return;
	}
	if (!(r = api_need_run(rq, run)))
		return;
	/* a run measured against a baseline ranks by excess cost unless told otherwise */
	if (model_run_count(r, "baseline_streams") > 0) {
		if (!sort)
			s = SORT_EXCESS_COST;
	} else if (s == SORT_EXCESS_COST) {
		PQclear(r);
		req_json_error(rq, 400, "sort: excess_cost needs a run with baseline streams (run %s has none)", run);
		return;
	}
	PQclear(r);
	rows = model_clusters(rq->db, run, (enum model_sort)s, kind, text, limit, offset, err, sizeof(err));
	if (!api_failed(rq, rows, err))
		count = model_clusters_count(rq->db, run, kind, text, err, sizeof(err));
	if (count && !api_failed(rq, count, err))
		pats = model_cluster_patterns(rq->db, req_id_array(rq, rows, 0), (long)np, err, sizeof(err));
	if (pats && !api_failed(rq, pats, err)) {
		struct jsonw w;

		jsonw_init(&w, &rq->out);
		jsonw_object(&w);
		jsonw_kstr(&w, "sort", model_sort_name((enum model_sort)s));
		jsonw_key(&w, "clusters");
		if (put_clusters(rq, &w, rows, pats, true)) {
			jsonw_key(&w, "total");
			jsonw_number_text(&w, PQgetvalue(count, 0, 0));
			jsonw_end(&w);
			api_ok_json(rq, &w, 200);
		}
	}
	PQclear(rows);
	PQclear(count);
	PQclear(pats);
}

void clusters_get_cluster(struct req *rq)
{
	const char *id = rq->arg;
	static const char *const names[] = { "limit", NULL };
	static const char *const dims[] = { "host", "version", "label" };
	PGresult *c, *r;
	char err[512];
	int64_t lim;
	struct jsonw w;

	if (!api_known_query(rq, names, false) || !api_num_param(rq, "limit", 1, ATTRIBUTION_MAX_VALUES, 20, &lim))
		return;
	if (!(c = api_need_cluster(rq, id)))
		return;
	r = model_cluster_patterns(rq->db, req_id_array(rq, c, 0), 100000, err, sizeof(err));
	jsonw_init(&w, &rq->out);
	if (api_failed(rq, r, err) || !put_clusters(rq, &w, c, r, false)) {
		PQclear(c);
		PQclear(r);
		return;
	}
	PQclear(c);
	PQclear(r);
	r = model_cluster_streams(rq->db, id, (long)lim, err, sizeof(err));
	if (api_failed(rq, r, err))
		return;
	jsonw_key(&w, "top_streams");
	api_put_rows(&w, r, NULL);
	PQclear(r);
	r = model_cluster_by(rq->db, id, (long)lim, err, sizeof(err));
	if (api_failed(rq, r, err))
		return;
	for (int d = 0; d < 3; d++) {
		static const char *const skip_dim[] = { "dim", NULL }, *const skip_key[] = { "dim", "key", NULL };

		jsonw_karray(&w, req_printf(rq, "by_%s", dims[d]));
		for (int i = 0; i < PQntuples(r); i++)
			if (strcmp(PQgetvalue(r, i, 0), dims[d]) == 0)
				api_put_row(&w, r, i, d < 2 ? skip_key : skip_dim);
		jsonw_end(&w);
	}
	PQclear(r);
	jsonw_end(&w);
	api_ok_json(rq, &w, 200);
}

void clusters_get_cluster_stacks(struct req *rq)
{
	const char *id = rq->arg;
	PGresult *c, *r;
	struct api_stackmap m;
	struct jsonw w;
	char err[512];

	if (!api_known_query(rq, api_no_params, false))
		return;
	if (!(c = api_need_cluster(rq, id)))
		return;
	PQclear(c);
	r = model_cluster_stacks(rq->db, id, err, sizeof(err));
	if (api_failed(rq, r, err))
		return;
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	if (api_put_stacks(rq, &w, r, 0, &m, err, sizeof(err)) < 0) {
		PQclear(r);
		req_json_error(rq, 500, "%s", err);
		return;
	}
	jsonw_karray(&w, "costs");
	for (int i = 0; i < PQntuples(r); i++) {
		jsonw_object(&w);
		jsonw_ki64(&w, "stack", api_stack_index(&m, (int32_t)strtol(PQgetvalue(r, i, 0), NULL, 10)));
		jsonw_key(&w, "cost_ns");
		jsonw_number_text(&w, PQgetvalue(r, i, 1));
		jsonw_key(&w, "events");
		jsonw_number_text(&w, PQgetvalue(r, i, 2));
		jsonw_end(&w);
	}
	jsonw_end(&w);
	jsonw_end(&w);
	api_ok_json(rq, &w, 200);
	PQclear(r);
}

static const char *const form_names[] = { "none", "linear", "steps" };

/* What the cost of cluster or problem id (which exists) depends on: the server's copy, else computed and
 * kept (web/costcache.h). 0, or -1 with the reason in err. */
static int costmodel_of(struct req *rq, enum attribution_of of, const char *id, struct attribution_costmodel *cm,
			char *err, size_t errlen)
{
	int64_t n = strtoll(id, NULL, 10);   /* a route's canonical id */

	if (costcache_get(rq->env->costs, of, n, rq->a, cm) == 1)
		return 0;
	if (attribution_costmodel(rq->db, of, id, rq->a, cm, err, errlen) < 0)
		return -1;
	costcache_put(rq->env->costs, of, n, cm);
	return 0;
}

/* The attribution of (of, id): kept, or computed and kept. */
static int attribution_for(struct req *rq, enum attribution_of of, const char *id, struct attribution *at,
			  char *err, size_t errlen)
{
	int64_t n = strtoll(id, NULL, 10);   /* a route's canonical id */

	if (costcache_get_attribution(rq->env->costs, of, n, rq->a, at) == 1)
		return 0;
	if (attribution_compute(rq->db, of, id, rq->a, at, err, errlen) < 0)
		return -1;
	costcache_put_attribution(rq->env->costs, of, n, at);
	return 0;
}

/* "numeric", "numeric_tested", "numeric_keys_skipped" and "modes" of the attribution's JSON */
static void costmodel_json(struct jsonw *w, const struct attribution_costmodel *cm)
{
	const struct costmodel_modes *m = &cm->modes;

	jsonw_karray(w, "numeric");
	for (size_t i = 0; i < cm->n; i++) {
		const struct attribution_numeric *x = &cm->v[i];
		const struct costmodel_fit *f = &x->fit;

		jsonw_object(w);
		jsonw_kstr(w, "key", x->key);
		jsonw_kstr(w, "form", form_names[f->form]);
		jsonw_kstr(w, "summary", x->words);
		jsonw_ku64(w, "streams", f->n);
		jsonw_ku64(w, "distinct", f->distinct);
		jsonw_kdouble(w, "r2", f->form == COSTMODEL_LINEAR ? f->r2_linear : f->r2_tree);
		jsonw_kdouble(w, "r2_holdout", f->form == COSTMODEL_LINEAR ? f->r2_linear_holdout : f->r2_tree_holdout);
		jsonw_kdouble(w, "r2_linear", f->r2_linear);
		jsonw_kdouble(w, "r2_linear_holdout", f->r2_linear_holdout);
		jsonw_kdouble(w, "r2_tree", f->r2_tree);
		jsonw_kdouble(w, "r2_tree_holdout", f->r2_tree_holdout);
		jsonw_kdouble(w, "intercept_ns", f->intercept_ns);
		jsonw_kdouble(w, "slope_ns", f->slope_ns);
		jsonw_karray(w, "steps");
		for (size_t j = 0; j < f->nleaves; j++) {
			jsonw_object(w);
			jsonw_kdouble(w, "above", f->leaf[j].above);   /* null: no bound */
			jsonw_kdouble(w, "up_to", f->leaf[j].up_to);
			jsonw_kdouble(w, "cost_ns", f->leaf[j].cost_ns);
			jsonw_ku64(w, "streams", f->leaf[j].n);
			jsonw_end(w);
		}
		jsonw_end(w);
		jsonw_end(w);
	}
	jsonw_end(w);
	jsonw_ku64(w, "numeric_tested", cm->tested);
	jsonw_ku64(w, "numeric_keys_skipped", cm->keys_skipped);
	jsonw_kobject(w, "modes");
	jsonw_ku64(w, "streams", m->n);
	jsonw_ku64(w, "k", m->k);
	if (cm->modes_words)
		jsonw_kstr(w, "summary", cm->modes_words);
	else
		jsonw_knull(w, "summary");
	jsonw_karray(w, "bic");
	for (size_t k = 0; k < COSTMODEL_MAX_MODES; k++)
		jsonw_double(w, m->bic[k]);
	jsonw_end(w);
	/* the modes when there are several; one Gaussian says nothing the cost does not */
	jsonw_karray(w, "modes");
	for (size_t j = 0; m->k >= 2 && j < m->k; j++) {
		jsonw_object(w);
		jsonw_kdouble(w, "cost_ns", m->mode[j].cost_ns);
		jsonw_kdouble(w, "weight", m->mode[j].weight);
		jsonw_kdouble(w, "sigma_log", m->mode[j].sigma);
		jsonw_end(w);
	}
	jsonw_end(w);
	jsonw_end(w);
}

void clusters_get_attribution(struct req *rq, enum attribution_of of, const char *id)
{
	static const char *const names[] = { "limit", NULL };
	struct attribution at;
	struct attribution_costmodel cm;
	struct jsonw w;
	PGresult *row;
	char err[512];
	int64_t lim;

	if (!api_known_query(rq, names, false) || !api_num_param(rq, "limit", 1, ATTRIBUTION_MAX_VALUES, 20, &lim))
		return;
	if (!(row = of == ATTRIBUTION_PROBLEM ? api_need_problem(rq, id) : api_need_cluster(rq, id)))
		return;
	PQclear(row);
	if (attribution_for(rq, of, id, &at, err, sizeof(err)) < 0 || costmodel_of(rq, of, id, &cm, err, sizeof(err)) < 0) {
		req_json_error(rq, 500, "%s", err);
		return;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_key(&w, of == ATTRIBUTION_PROBLEM ? "problem_id" : "cluster_id");
	jsonw_number_text(&w, id);
	jsonw_ku64(&w, "run_streams", at.run_streams);
	jsonw_ku64(&w, "cluster_streams", at.cluster_streams);
	jsonw_ku64(&w, "baseline_streams", at.baseline_streams);
	jsonw_ku64(&w, "cost_ns", at.cost_ns);
	jsonw_ku64(&w, "tested", at.tested);
	jsonw_ku64(&w, "keys_skipped", at.keys_skipped);
	if (at.n) {
		struct buf words = BUF_INIT(4096);

		attribution_summary(&at, &words);
		jsonw_kstr(&w, "summary", buf_cstr(&words));
		buf_release(&words);
	} else {
		jsonw_knull(&w, "summary");
	}
	jsonw_karray(&w, "values");
	for (size_t i = 0; i < at.n && i < (size_t)lim; i++) {
		const struct attribution_value *x = &at.v[i];

		jsonw_object(&w);
		jsonw_kstr(&w, "key", x->key);
		jsonw_kstr(&w, "value", x->value);
		jsonw_ku64(&w, "cost_ns", x->cost_ns);
		jsonw_kdouble(&w, "cost_share", x->cost_share);
		jsonw_ku64(&w, "cluster_streams", x->cluster_streams);
		jsonw_ku64(&w, "run_streams", x->run_streams);
		jsonw_ku64(&w, "baseline_streams", x->baseline_streams);
		jsonw_kdouble(&w, "cluster_share", x->cluster_share);
		jsonw_kdouble(&w, "run_share", x->run_share);
		jsonw_kdouble(&w, "baseline_share", x->baseline_share);
		jsonw_kdouble(&w, "lift", x->lift);
		jsonw_kdouble(&w, "lift_baseline", x->lift_baseline);
		jsonw_kdouble(&w, "p", x->p);
		jsonw_kdouble(&w, "q", x->q);
		jsonw_kdouble(&w, "p_baseline", x->p_baseline);
		jsonw_kdouble(&w, "q_baseline", x->q_baseline);
		jsonw_end(&w);
	}
	jsonw_end(&w);
	costmodel_json(&w, &cm);
	jsonw_end(&w);
	api_ok_json(rq, &w, 200);
}

void clusters_get_cluster_attribution(struct req *rq)
{
	const char *id = rq->arg;
	clusters_get_attribution(rq, ATTRIBUTION_CLUSTER, id);
}

void clusters_attribution_section(struct req *rq, enum attribution_of of, const char *id)
{
	const char *what = of == ATTRIBUTION_PROBLEM ? "problem" : "cluster";
	struct attribution at;
	char err[512];
	struct buf words = BUF_INIT(4096);

	if (attribution_for(rq, of, id, &at, err, sizeof(err)) < 0) {
		html_raw(rq, "<p class=\"error\">Attribution: ");
		html_text(rq, err);
		html_raw(rq, "</p>");
		return;
	}
	if (!at.n)
		return;
	html_raw(rq, "<section class=\"attribution\"><h2>Where it happens</h2><p class=\"lead\">");
	attribution_summary(&at, &words);
	html_text(rq, buf_cstr(&words));
	html_raw(rq, ".");
	buf_release(&words);
	html_rawf(rq, "</p><table class=\"attribution\"><thead><tr><th>Key</th><th>Value</th>"
		      "<th class=\"n\">Cost share</th><th class=\"n\">Its streams</th><th class=\"n\">Run's streams</th>"
		      "%s<th class=\"n\" title=\"its share of the %s's streams over its share of the run's\">Lift</th>"
		      "<th class=\"n\" title=\"Fisher's exact test, Benjamini-Hochberg over %zu values\">p (adjusted)</th>"
		      "</tr></thead><tbody>",
		  at.baseline_streams ? "<th class=\"n\">Baseline's streams</th>" : "", what, at.tested);
	for (size_t i = 0; i < at.n && i < 8; i++) {
		const struct attribution_value *x = &at.v[i];

		html_raw(rq, "<tr><td>");
		html_text(rq, x->key);
		html_raw(rq, "</td><td>");
		html_label_value(rq, x->key, x->value);
		html_raw(rq, "</td><td class=\"n\">");
		html_share(rq, x->cost_share);
		html_raw(rq, "</td><td class=\"n\">");
		html_share(rq, x->cluster_share);
		html_raw(rq, "</td><td class=\"n\">");
		html_share(rq, x->run_share);
		html_raw(rq, "</td>");
		if (at.baseline_streams) {
			html_raw(rq, "<td class=\"n\">");
			html_share(rq, x->baseline_share);
			html_raw(rq, "</td>");
		}
		html_rawf(rq, "<td class=\"n\">%.2f</td><td class=\"n\">%.2g</td></tr>", x->lift, x->q);
	}
	html_raw(rq, "</tbody></table></section>");
}

/* A sentence of costmodel words on the page: capitalised, with a full stop. */
static void costmodel_sentence(struct req *rq, const char *words)
{
	html_rawf(rq, "%c", words[0] >= 'a' && words[0] <= 'z' ? words[0] - 'a' + 'A' : words[0]);
	html_text(rq, words + 1);
	html_raw(rq, ".");
}

void clusters_costmodel_section(struct req *rq, enum attribution_of of, const char *id)
{
	const char *what = of == ATTRIBUTION_PROBLEM ? "problem" : "cluster";
	struct attribution_costmodel cm;
	char err[512];

	if (costmodel_of(rq, of, id, &cm, err, sizeof(err)) < 0) {
		html_raw(rq, "<p class=\"error\">What the cost depends on: ");
		html_text(rq, err);
		html_raw(rq, "</p>");
		return;
	}
	if (cm.streams < COSTMODEL_MIN_STREAMS)
		return;   /* too few streams to say anything */
	html_raw(rq, "<section class=\"costmodel\"><h2>What the cost depends on</h2><ul class=\"lead\">");
	for (size_t i = 0; i < cm.n && i < 8; i++) {
		const struct costmodel_fit *f = &cm.v[i].fit;

		html_raw(rq, "<li>");
		costmodel_sentence(rq, cm.v[i].words);
		html_rawf(rq, " <span class=\"hint\">(%zu streams, R^2 %.2f on held-out streams)</span></li>", f->n,
			  f->form == COSTMODEL_LINEAR ? f->r2_linear_holdout : f->r2_tree_holdout);
	}
	if (cm.modes_words) {
		html_raw(rq, "<li>");
		costmodel_sentence(rq, cm.modes_words);
		html_raw(rq, "</li>");
	}
	if (!cm.n && !cm.modes_words) {
		if (cm.tested)
			html_rawf(rq, "<li>None of its %zu numeric label%s explains this %s's cost, which has a single "
				      "mode around ", cm.tested, cm.tested == 1 ? "" : "s", what);
		else
			html_rawf(rq, "<li>Its streams have no numeric label; this %s's cost has a single mode around ", what);
		html_cost(rq, (int64_t)cm.modes.mode[0].cost_ns);
		html_raw(rq, ".</li>");
	}
	html_rawf(rq, "</ul><p class=\"hint\">Over %zu of the %s's streams: a line and a regression tree (depth at most "
		      "%d) per numeric label, kept when R^2 is at least %.1f on all and on held-out streams; modes "
		      "from mixtures of log-normal costs chosen by BIC (docs/analysis.md).</p></section>",
		  cm.streams, what, COSTMODEL_TREE_DEPTH, COSTMODEL_MIN_R2);
}

/* A member pattern: its id, cost and frame names. */
struct member {
	int64_t id, cost;
	const char **names;
	size_t n;
};

static const struct member *member_by_id(const struct member *m, size_t n, int64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].id == id)
			return &m[i];
	return NULL;
}

static const char *frame_at(const struct member *m, size_t i)
{
	return m && i < m->n ? m->names[i] : "";
}

/* Members aligned with the medoid as in the paper's Figure 3: one block per member, one row per step. */
static void alignment_blocks(struct req *rq, PGresult *c, const struct member *mem, size_t nmem,
			     const char *const *common, size_t nc)
{
	json_object *al = json_tokener_parse(model_col(c, 0, "alignment"));
	int64_t medoid = model_coln(c, 0, "medoid");
	const struct member *mp = member_by_id(mem, nmem, medoid);
	size_t nal = al ? json_object_array_length(al) : 0;

	html_raw(rq, "<section><h2>Members aligned with the medoid</h2><p class=\"legend\"><span class=\"op M\">match"
		     "</span> <span class=\"op S\">substitution</span> <span class=\"op D\">medoid frame only</span> "
		     "<span class=\"op I\">member frame only</span> <span class=\"common\">common part</span></p>");
	for (size_t k = 0; k < nal && k < 200; k++) {
		json_object *a = json_object_array_get_idx(al, k), *v;
		int64_t pid = json_object_object_get_ex(a, "pattern_id", &v) ? json_object_get_int64(v) : 0;
		const char *ops = json_object_object_get_ex(a, "ops", &v) ? json_object_get_string(v) : "";
		const struct member *p = member_by_id(mem, nmem, pid);
		size_t li = 0, ri = 0, ci = 0;

		html_rawf(rq, "<details%s><summary>Pattern %lld%s · Sim %.3f", k < 3 ? " open" : "", (long long)pid,
			  pid == medoid ? " (medoid)" : "",
			  json_object_object_get_ex(a, "sim", &v) ? json_object_get_double(v) : 0);
		if (p) {
			html_raw(rq, " · cost ");
			html_cost(rq, p->cost);
		}
		html_raw(rq, "</summary><table class=\"align\"><thead><tr><th>Medoid</th><th></th><th>This member</th>"
			     "</tr></thead><tbody>");
		for (const char *o = ops; *o; o++) {
			const char *lf = (*o == 'M' || *o == 'S' || *o == 'D') ? frame_at(mp, li++) : NULL;
			const char *rf = (*o == 'M' || *o == 'S' || *o == 'I') ? frame_at(p, ri++) : NULL;
			/* the common part is the medoid's matched frames, in order */
			bool in_common = lf && *o == 'M' && ci < nc && strcmp(lf, common[ci]) == 0;
			if (in_common)
				ci++;
			html_rawf(rq, "<tr class=\"op %c%s\"><td>", *o, in_common ? " common" : "");
			html_text(rq, lf);
			html_rawf(rq, "</td><td class=\"opname\">%s</td><td>",
				  *o == 'M' ? "=" : *o == 'S' ? "≈" : *o == 'D' ? "−" : "+");
			html_text(rq, rf);
			html_raw(rq, "</td></tr>");
		}
		html_raw(rq, "</tbody></table></details>");
	}
	if (nal > 200) {
		html_raw(rq, "<p>… and ");
		html_count(rq, (int64_t)(nal - 200));
		html_raw(rq, " more members (the API has them all).</p>");
	}
	html_raw(rq, "</section>");
	json_object_put(al);
}

/* One dimension's rows of model_cluster_by() as a table with bars. */
static void breakdown(struct req *rq, PGresult *r, const char *dim, const char *title)
{
	double max = 0;
	bool label = strcmp(dim, "label") == 0;
	bool *done = arena_calloc(rq->a, (size_t)PQntuples(r) + 1, sizeof(bool));

	html_rawf(rq, "<section class=\"by\"><h3>%s</h3><table><thead><tr>%s<th>Value</th><th class=\"n\">Cost</th>"
		      "<th class=\"n\">Streams</th></tr></thead><tbody>", title, label ? "<th>Label</th>" : "");
	for (int i = 0; i < PQntuples(r); i++)
		if (strcmp(model_col(r, i, "dim"), dim) == 0 && (double)model_coln(r, i, "cost_ns") > max)
			max = (double)model_coln(r, i, "cost_ns");
	/* rows come costliest first; labels are grouped by key (a key's costliest value first),
	 * the key written once per group */
	for (int g = 0; done && g < PQntuples(r); g++) {
		if (done[g] || strcmp(model_col(r, g, "dim"), dim) != 0)
			continue;
		for (int i = g; i < PQntuples(r); i++) {
			if (done[i] || strcmp(model_col(r, i, "dim"), dim) != 0 ||
			    (label && strcmp(model_col(r, i, "key"), model_col(r, g, "key")) != 0) || (!label && i != g))
				continue;
			done[i] = true;
			html_raw(rq, "<tr>");
			if (label) {
				html_raw(rq, i == g ? "<td class=\"key\">" : "<td class=\"key more\">");
				if (i == g)
					html_text(rq, model_col(r, i, "key"));
				html_raw(rq, "</td>");
			}
			html_raw(rq, "<td>");
			if (label)
				html_label_value(rq, model_col(r, i, "key"), model_col(r, i, "value"));
			else
				html_text(rq, model_col(r, i, "value"));
			html_raw(rq, "</td><td class=\"n metric\">");
			html_cost(rq, model_coln(r, i, "cost_ns"));
			html_bar(rq, (double)model_coln(r, i, "cost_ns"), max, 60);
			html_raw(rq, "</td><td class=\"n\">");
			html_count(rq, model_coln(r, i, "streams"));
			html_raw(rq, "</td></tr>");
		}
	}
	html_raw(rq, "</tbody></table></section>");
}

/* The stacks a cluster's flame graph draws one by one: a cluster of many variants (16,000 stacks
 * took its page 0.8 s to draw) shows its costliest, and the others summed in one frame. */
#define FLAME_PAGE_STACKS 1500

static void flame_section(struct req *rq, const char *id)
{
	struct req_names names = { 0 };
	char err[256];
	const char *search = req_query(rq, "search");
	/* the graph as most views draw it (no search, no focus) is kept once drawn: a cluster's matched
	 * stacks are its run's, stored with it, and its frames' names are final or it is not kept */
	bool plain = (!search || !*search) && !req_query(rq, "focus");
	int64_t cid = strtoll(id, NULL, 10);
	size_t start = rq->out.len;
	PGresult *st = NULL, *fr = NULL;
	struct flame *f = NULL;
	bool whole = true;   /* every stack drawn, each with its names final: what a later drawing draws */

	if (plain && costcache_get_flame(rq->env->flames, ATTRIBUTION_CLUSTER, cid, &rq->out) != 0)
		return;
	st = model_cluster_stacks_top(rq->db, id, FLAME_PAGE_STACKS, err, sizeof(err));
	f = flame_open();
	if (!st || !f)
		goto out;
	fr = model_stacks(rq->db, req_id_array(rq, st, 0), err, sizeof(err));
	if (!fr || req_frame_names_rows(rq, fr, PQfnumber(fr, "frame_ids"), &names) < 0)
		goto out;
	{
		/* both come by stack id */
		int j = 0, nf = PQntuples(fr);
		for (int i = 0; i < PQntuples(st) && !req_should_stop(rq); i++) {
			int64_t sid = model_coln(st, i, "stack_id");

			if (!model_col(st, i, "stack_id")) {
				char nb[FMT_LEN];
				const char *others = req_printf(rq, "(%s smaller stacks)",
								fmt_count(nb, model_coln(st, i, "stacks")));

				if (!others || flame_add(f, &others, 1, (uint64_t)model_coln(st, i, "cost_ns"),
							 (uint64_t)model_coln(st, i, "events")) < 0)
					whole = false;
				continue;
			}
			while (j < nf && model_coln(fr, j, "stack_id") < sid)
				j++;
			if (!(j < nf && model_coln(fr, j, "stack_id") == sid && names.row[j]) ||
			    flame_add(f, names.row[j], names.n[j], (uint64_t)model_coln(st, i, "cost_ns"),
				      (uint64_t)model_coln(st, i, "events")) < 0)
				whole = false;   /* a stack without its frames, or not added */
		}
	}
	html_raw(rq, "<section id=\"flame\"><h2>Flame graph of the matched events</h2><p class=\"hint\">Width is cost; "
		     "hover for details, click a frame to zoom in, click a bar above it to zoom out. Colour is "
		     "the frame's module or package, the same on every page.</p>");
	if (pages_flame_graph(rq, f, NULL) < 0)
		whole = false;
	/* (by the id's value: /clusters/007 is cluster 7, and its kept graph links as 7's does) */
	pages_download_links(rq, req_printf(rq, "/api/v1/clusters/%lld/profile", (long long)cid));
	html_raw(rq, "</section>");
	if (plain && whole && names.final && !req_should_stop(rq) && !buf_error(&rq->out))
		costcache_put_flame(rq->env->flames, ATTRIBUTION_CLUSTER, cid, rq->out.data + start, rq->out.len - start);
out:
	flame_free(f);
	PQclear(st);
	PQclear(fr);
}

/* The cluster's metrics, each with its rank, and its estimated fleet cost. */
static void cluster_metrics(struct req *rq, PGresult *c, const char *id)
{
	html_rawf(rq, "<h1>Cluster %s: %s, rank %lld by total cost</h1><dl class=\"counts\"><dt>Total cost</dt><dd>",
		  id, model_col(c, 0, "kind")[0] == 'w' ? "wait" : "run (CPU)", (long long)model_coln(c, 0, "rank_total_cost"));
	html_cost(rq, model_coln(c, 0, "total_cost_ns"));
	html_rawf(rq, " (#%lld)</dd><dt>Streams</dt><dd>", (long long)model_coln(c, 0, "rank_total_cost"));
	html_count(rq, model_coln(c, 0, "streams"));
	html_rawf(rq, " (#%lld)</dd><dt>Events</dt><dd>", (long long)model_coln(c, 0, "rank_streams"));
	html_count(rq, model_coln(c, 0, "events"));
	html_rawf(rq, " (#%lld)</dd><dt>Average cost</dt><dd>", (long long)model_coln(c, 0, "rank_events"));
	html_cost(rq, model_coln(c, 0, "avg_cost_ns"));
	html_rawf(rq, " (#%lld)</dd>", (long long)model_coln(c, 0, "rank_avg_cost"));
	if (model_col(c, 0, "excess_cost_ns")) {
		html_raw(rq, "<dt>Excess cost</dt><dd>");
		html_cost(rq, model_coln(c, 0, "excess_cost_ns"));
		html_rawf(rq, " (#%lld)</dd>", (long long)model_coln(c, 0, "rank_excess_cost"));
	}
	/* always here, with what it means: equal to the total cost when nothing was sampled away */
	html_raw(rq, "<dt title=\"each stream's cost times its sampling weight: what the whole fleet spent, "
		     "the violations the agents did not ship included\">Estimated fleet cost</dt><dd>");
	html_cost(rq, model_coln(c, 0, "est_cost_ns"));
	html_raw(rq, " (");
	html_count(rq, llround(model_cold(c, 0, "est_streams")));
	html_raw(rq, " streams estimated)</dd><dt>Patterns</dt><dd>");
	html_count(rq, model_coln(c, 0, "patterns_total"));
	html_raw(rq, "</dd></dl>");
}

/* The excess in words (docs/analysis.md), for a cluster measured against a baseline. */
static void excess_words(struct req *rq, PGresult *c)
{
		html_raw(rq, "<p class=\"excess\">In the events this cluster owns, the slow units spent ");
	html_cost(rq, model_coln(c, 0, "own_cost_ns"));
	html_raw(rq, "; at the rate of the normal units (");
	html_cost(rq, model_coln(c, 0, "baseline_cost_ns"));
	html_raw(rq, " per baseline stream, ");
	html_count(rq, model_coln(c, 0, "baseline_streams"));
	html_raw(rq, " of them with a cost here) they would have spent ");
	html_cost(rq, model_coln(c, 0, "expected_cost_ns"));
	html_raw(rq, ": an excess of <strong>");
	html_cost(rq, model_coln(c, 0, "excess_cost_ns"));
	html_raw(rq, "</strong>");
	if (model_col(c, 0, "excess_lo_ns")) {
		html_raw(rq, " (95 % interval ");
		html_interval(rq, (double)model_coln(c, 0, "excess_lo_ns"), (double)model_coln(c, 0, "excess_hi_ns"));
		html_raw(rq, ")");
	}
	html_raw(rq, ".</p>");

}

/* The common part, the form that makes a signature of it, and the members aligned on it. */
static void common_section(struct req *rq, PGresult *c, const char *id)
{
	char err[512];
	const char **common;
	size_t nc = 0, nmem = 0;
	struct member *mem = NULL;
	struct req_names names;
	PGresult *pats = model_cluster_patterns(rq->db, req_printf(rq, "{%s}", id), 100000, err, sizeof(err));

	if (req_frame_names(rq, model_col(c, 0, "common"), &common, &nc) < 0)
		nc = 0;
	if (pats && req_frame_names_rows(rq, pats, PQfnumber(pats, "frame_ids"), &names) == 0) {
		mem = arena_calloc(rq->a, (size_t)PQntuples(pats) + 1, sizeof(*mem));
		for (int i = 0; mem && i < PQntuples(pats); i++) {
			mem[nmem].id = model_coln(pats, i, "pattern_id");
			mem[nmem].cost = model_coln(pats, i, "cost_ns");
			mem[nmem].names = names.row[i];
			mem[nmem].n = names.n[i];
			if (names.row[i])
				nmem++;
		}
	}
	html_raw(rq, "<section class=\"card\"><h2>Common part</h2>");
	pages_frame_list(rq, common, nc, "common-part");
	if (rq->role >= AUTH_ANALYST) {
		html_rawf(rq, "<details class=\"sigform\"><summary><span class=\"button\">Create a signature from the "
			      "common part</span></summary><form method=\"post\" action=\"/signatures/new\" "
			      "id=\"sig-form\"><input type=\"hidden\" name=\"from_cluster\" value=\"%s\">", id);
		html_csrf_field(rq);
		html_raw(rq, "<label>Name <input name=\"name\" required maxlength=\"255\"></label>"
			     "<label>Frames (one per line, outermost first; edit to keep the distinctive ones)"
			     "<textarea name=\"frames\" rows=\"8\">");
		for (size_t i = 0; i < nc; i++) {
			html_text(rq, common[i]);
			html_raw(rq, "\n");
		}
		html_raw(rq, "</textarea></label><label>Status <select name=\"status\"><option>open</option>"
			     "<option>known</option><option>fixed</option></select></label>"
			     "<label>Note or link <input name=\"note\" maxlength=\"2000\"></label>"
			     "<button type=\"submit\">Create signature</button></form></details>");
	}
	html_raw(rq, "</section>");
	alignment_blocks(rq, c, mem, nmem, common, nc);
	PQclear(pats);

}

/* Where it costs: by host, version and label, and its top streams. */
static void where_section(struct req *rq, PGresult *c, const char *id)
{
	PGresult *ts;
	char err[512];

	html_raw(rq, "<section><h2>Where it costs</h2>");
	if (strcmp(model_col(c, 0, "has_stacks"), "t") != 0)
		html_raw(rq, "<p class=\"hint\">This run was clustered before matched stacks were recorded; mine it again "
			     "for breakdowns and a flame graph.</p>");
	html_raw(rq, "<div class=\"bys\">");
	{
		PGresult *by = model_cluster_by(rq->db, id, 15, err, sizeof(err));
		if (by) {
			breakdown(rq, by, "host", "By host");
			breakdown(rq, by, "version", "By version");
			breakdown(rq, by, "label", "By label");
			PQclear(by);
		}
	}
	html_raw(rq, "</div>");
	ts = model_cluster_streams(rq->db, id, 15, err, sizeof(err));
	if (ts) {
		html_raw(rq, "<h3>Top streams</h3><table class=\"streams\"><thead><tr><th>Stream</th><th>Host</th>"
			     "<th>Version</th><th class=\"n\">Matched cost</th><th class=\"n\">Events</th></tr></thead><tbody>");
		for (int i = 0; i < PQntuples(ts); i++) {
			if (!model_col(ts, i, "stream_id")) {
				/* retention removed it after the run: no link to a page that is gone */
				html_raw(rq, "<tr><td class=\"expired\" title=\"older than the stream retention "
					     "(sm-admin retention)\">stream expired</td><td>");
			} else {
				html_raw(rq, "<tr><td><a href=\"/streams/");
				html_text(rq, model_col(ts, i, "stream_id"));
				html_raw(rq, "\">");
				html_text(rq, model_col(ts, i, "stream_id"));
				html_raw(rq, "</a></td><td>");
			}
			html_text(rq, model_col(ts, i, "host"));
			html_raw(rq, "</td><td>");
			html_text(rq, model_col(ts, i, "version"));
			html_raw(rq, "</td><td class=\"n\">");
			html_cost(rq, model_coln(ts, i, "cost_ns"));
			html_raw(rq, "</td><td class=\"n\">");
			html_count(rq, model_coln(ts, i, "events"));
			html_raw(rq, "</td></tr>");
		}
		html_raw(rq, "</tbody></table>");
		PQclear(ts);
	}
	html_raw(rq, "</section>");
}

void clusters_page_cluster(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	PGresult *c = pages_need_row(rq, model_cluster(rq->db, id, err, sizeof(err)), err, "No such cluster.");

	if (!c)
		return;
	html_begin(rq, req_printf(rq, "Cluster %s", id));
	html_rawf(rq, "<p class=\"crumbs\"><a href=\"/runs/%lld\">Run #%lld</a> › cluster %s</p>",
		  (long long)model_coln(c, 0, "run_id"), (long long)model_coln(c, 0, "run_id"), id);
	cluster_metrics(rq, c, id);
	if (model_col(c, 0, "excess_cost_ns"))
		excess_words(rq, c);
	clusters_attribution_section(rq, ATTRIBUTION_CLUSTER, id);
	clusters_costmodel_section(rq, ATTRIBUTION_CLUSTER, id);
	common_section(rq, c, id);
	where_section(rq, c, id);
	flame_section(rq, id);
	html_end(rq);
	PQclear(c);
}
