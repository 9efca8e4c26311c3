/*
 * model: the dashboard's and the REST API's queries. Each returns a PGresult
 * whose columns carry the API's field names (api.c writes rows as JSON objects
 * by column name and type; the pages read the same columns), so a field means
 * the same on a page and in the API. All SQL is static text with parameters.
 *
 * Every function returns the result (caller frees with PQclear()), or NULL with
 * the reason in err (a database error). Missing objects are empty results.
 */
#ifndef SM_WEB_MODEL_H
#define SM_WEB_MODEL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/evpack.h"
#include "guardcore/settings.h"
#include "miner/aoi.h"

/* Filters of the stream list; NULL / PARAMS_NO_TIME: any. */
struct stream_filter {
	const char *app, *host, *version;
	const char *labels_json;    /* a JSON object the labels must contain */
	int64_t since_ns, until_ns; /* received_at in [since, until) */
	const char *role;           /* "violation" or "baseline", or NULL */
};

/* The stream list's orders (docs/api.md "Streams"): each a fixed ORDER BY, ties newest first. */
enum stream_sort { SSORT_RECEIVED, SSORT_HOST, SSORT_APP, SSORT_VERSION, SSORT_DELAY, SSORT_EVENTS, SSORT_ROLE,
		   SSORT_N };
/* "received", "host", "app", "version", "delay", "events", "role" -> its enum stream_sort, or -1. */
int model_stream_sort_parse(const char *s);
const char *model_stream_sort_name(enum stream_sort s);
/* Whether s sorts descending unless told (times and amounts: the largest first; names: A to Z). */
bool model_stream_sort_desc(enum stream_sort s);

/* streams: stream_id, host, app, version, labels, symptom, events, received_at, role, weight, in the
 * order sort (descending when desc). */
PGresult *model_streams(PGconn *db, const struct stream_filter *f, enum stream_sort sort, bool desc, long limit,
			long offset, char *err, size_t errlen);
/* One row: total. */
/* The streams the filter selects, counted up to 10,000: total, and more (true past 10,000). */
PGresult *model_streams_count(PGconn *db, const struct stream_filter *f, char *err, size_t errlen);
/* One stream by its uuid: ref (the internal id), stream_id, host, app, version, build_id, labels,
 * symptom (json), events, received_at, and symptom_tid, symptom_start_ns, symptom_end_ns. */
PGresult *model_stream(PGconn *db, const char *uuid, char *err, size_t errlen);
/* A stream's events as stored, unpacked (model_stream_events()). */
struct model_events {
	struct evpack_event *ev; /* in time order, then in the order sent */
	size_t n;
	size_t stored;           /* the stream's events stored: more than n when the limit cut them */
	int32_t *stacks;         /* the distinct stack ids of ev, ascending */
	size_t nstacks;
	uint32_t *at;            /* at[i]: the position of ev[i]'s stack in stacks */
};
/* Its first `limit` events by time (all when limit < 0), and their stacks; NULL with err (a database
 * error, a damaged chunk, out of memory). Caller frees with model_events_free(). */
struct model_events *model_stream_events(PGconn *db, const char *ref, long limit, char *err, size_t errlen);
void model_events_free(struct model_events *e);
/* The events of e (of stream st) in the AOI of `mode`: in[i] set for each. Returns 0 or -1 (out of
 * memory). */
int model_stream_aoi(PGresult *st, const struct model_events *e, enum aoi_mode mode, bool *in);
/* Stacks by id ("{1,2,3}"): stack_id, frame_ids (an int array, outermost first), ascending. */
PGresult *model_stacks(PGconn *db, const char *stack_ids, char *err, size_t errlen);
/* The same for ids[0..n). */
PGresult *model_stacks_of(PGconn *db, const int32_t *ids, size_t n, char *err, size_t errlen);
/* For stacks fr (model_stacks(), ascending) and ids[0..n) ascending: row[k] is the row of ids[k] in
 * fr, or -1 where fr lacks it. */
void model_stack_rows(PGresult *fr, const int32_t *ids, size_t n, int *row);

/* runs: run_id, status, app, params, error, counts, timings_ms, progress, created_at, started_at,
 * finished_at, newest first; app and status filters may be NULL. */
PGresult *model_runs(PGconn *db, const char *app, const char *status, long limit, long offset, char *err,
		     size_t errlen);
PGresult *model_runs_count(PGconn *db, const char *app, const char *status, char *err, size_t errlen);
/* The runs' page's orders (?sort=): newest first, by app, by status, by the worst problem's cost, by the
 * number of clusters (each then newest first). */
enum model_run_sort { RUN_SORT_NEWEST, RUN_SORT_APP, RUN_SORT_STATUS, RUN_SORT_WORST, RUN_SORT_CLUSTERS, RUN_SORT_N };
/* -1 when s is none of them. */
int model_run_sort_parse(const char *s);
const char *model_run_sort_name(enum model_run_sort s);
/* A page of every run in order sort: model_runs()'s columns and its worst problem: worst_problem_id (rank 1),
 * or for a run mined before problems worst_cluster_id (its costliest cluster), worst_title (frame ids) and
 * worst_cost_ns (total cost); all NULL for a run without clusters. */
PGresult *model_runs_worst(PGconn *db, enum model_run_sort sort, long limit, long offset, char *err, size_t errlen);
PGresult *model_run(PGconn *db, const char *id, char *err, size_t errlen);
/* What run id mined: run_id, status, app, kind (run, wait or both); no row when it does not exist. */
PGresult *model_run_what(PGconn *db, const char *id, char *err, size_t errlen);
/* Done runs finished in the 5 minutes before `after` or since (a finished_at of this function's;
 * NULL: the latest done run's) but those in seen (an array literal of run ids, or NULL), the oldest
 * 200, oldest first: run_id, finished_at (text, to the microsecond). */
PGresult *model_runs_done_after(PGconn *db, const char *after, const char *seen, char *err, size_t errlen);
/* Run id's costliest problems and clusters, at most n of each, by rank: of ('p' or 'c'), id. */
PGresult *model_run_costliest(PGconn *db, const char *id, long n, char *err, size_t errlen);
/* Done runs that a comparison may take, newest first: run_id, app, kind, finished_at; app and kind
 * (NULL: any) keep those of one app and kind. */
PGresult *model_compare_runs(PGconn *db, const char *app, const char *kind, long limit, char *err, size_t errlen);
/* Distinct apps of the stored streams (for the run form). */
PGresult *model_apps(PGconn *db, char *err, size_t errlen);

/* A number of a run row's counts (model_run()), -1 when absent: "baseline_streams" says whether
 * its clusters have an excess cost (and rank by it by default). */
int64_t model_run_count(PGresult *run, const char *key);

enum model_sort { SORT_TOTAL_COST, SORT_STREAMS, SORT_EVENTS, SORT_AVG_COST, SORT_EXCESS_COST, SORT_N };
/* "total_cost", "streams", "events", "avg_cost", "excess_cost" → 0..4, or -1. */
int model_sort_parse(const char *s);
const char *model_sort_name(enum model_sort s);

/*
 * A run's clusters sorted by a metric (descending, ties by cluster id): cluster_id, run_id,
 * kind ("wait"/"run"), rank (under that metric among all the run's clusters, ties by id: the same rank
 * on every page), rank_total_cost, rank_streams,
 * rank_events, rank_avg_cost, total_cost_ns, streams, events, avg_cost_ns, rank_excess_cost,
 * excess_cost_ns, excess_lo_ns, excess_hi_ns, own_cost_ns, expected_cost_ns, baseline_cost_ns,
 * baseline_streams (NULL when the run had no baseline), common (the common
 * part's frame ids, an int array: names via req_frame_names()), patterns_total. kind: "r", "w"
 * or NULL; text: only clusters with a frame of the common part containing it
 * (case-insensitive), or NULL. The page is chosen before anything else is computed.
 */
PGresult *model_clusters(PGconn *db, const char *run, enum model_sort sort, const char *kind,
			 const char *text, long limit, long offset, char *err, size_t errlen);
PGresult *model_clusters_count(PGconn *db, const char *run, const char *kind, const char *text, char *err,
			       size_t errlen);
/* The costliest per_cluster member patterns of each of the clusters cluster_ids ("{1,2}"):
 * cluster_id, pattern_id, frame_ids (int array), cost_ns, events, streams; by cluster, costliest
 * first. */
PGresult *model_cluster_patterns(PGconn *db, const char *cluster_ids, long per_cluster, char *err,
				 size_t errlen);
/* One cluster: the columns of model_clusters() (rank = rank_total_cost) plus medoid (pattern
 * id), alignment (json: [{pattern_id, sim, ops}] against the medoid), has_stacks. */
PGresult *model_cluster(PGconn *db, const char *id, char *err, size_t errlen);
/* The streams with the most matched cost: stream_id, host, app, version, cost_ns, events. */
PGresult *model_cluster_streams(PGconn *db, const char *id, long limit, char *err, size_t errlen);
/* Matched cost by host, version and label value: dim ("host", "version", "label"), key (the label
 * key, else the dimension), value, cost_ns, events, streams; the costliest `limit` of each
 * dimension, by dim then cost. */
PGresult *model_cluster_by(PGconn *db, const char *id, long limit, char *err, size_t errlen);
/* For attribution (web/attribution.h): first a totals row (key and value NULL): run_streams (the
 * run's violating streams: with AOI events of any kind, as run_values counts them; of the
 * cluster's kind in a run stored before run_values), cluster_streams, cluster_cost_ns (the
 * cluster's streams and its cost there), baseline_streams (the run's); then per key ("host",
 * "version", or a label's) and value the same four counts over the streams with that value. */
PGresult *model_cluster_values(PGconn *db, const char *id, char *err, size_t errlen);
/* The same for problem id: its streams and cost are those of the run's AOI events any member
 * cluster matches, each (kind, stack) once; run_streams counts both kinds in every run. */
PGresult *model_problem_values(PGconn *db, const char *id, char *err, size_t errlen);
/* For what the cost depends on (web/attribution.h): first the attributed streams, at most `limit`
 * (a deterministic sample above), one row each with key NULL: stream_ref, cost_ns (the cluster's
 * cost there), by stream_ref; then, by key and stream_ref, those streams' numeric labels: stream_ref,
 * key, value (a number), for the keys whose values are numbers on at least 95 % of those streams. */
PGresult *model_cluster_numeric(PGconn *db, const char *id, long limit, char *err, size_t errlen);
/* The same for problem id (its streams and cost as model_problem_values()'). */
PGresult *model_problem_numeric(PGconn *db, const char *id, long limit, char *err, size_t errlen);
/* The matched stacks with their cost: stack_id, cost_ns, events (frames via model_stack_frames). */
PGresult *model_cluster_stacks(PGconn *db, const char *id, char *err, size_t errlen);
/* The same, only the limit costliest (by stack id), then one row without a stack_id summing the
 * others, with their number in stacks (1 in the others' rows); none when there are no others. */
PGresult *model_cluster_stacks_top(PGconn *db, const char *id, long limit, char *err, size_t errlen);

/* signatures: signature_id, name, frames (json), status, note, from_cluster, created_at, updated_at. */
PGresult *model_signatures(PGconn *db, long limit, long offset, char *err, size_t errlen);
PGresult *model_signatures_count(PGconn *db, char *err, size_t errlen);
/* API tokens (their hashes are never read): id, role, name, host, created, revoked. */
PGresult *model_tokens(PGconn *db, long limit, long offset, char *err, size_t errlen);
PGresult *model_tokens_count(PGconn *db, char *err, size_t errlen);
PGresult *model_signature(PGconn *db, const char *id, char *err, size_t errlen);

/* The fleet (docs/fleet.md "Seeing the fleet"). A process that has not reported for silent_after_s
 * seconds and never said it exited is silent; a host is silent when one of its processes is. */
struct host_filter {
	const char *host;          /* one host, or NULL */
	const char *status;        /* live, silent or stopped, or NULL */
	long long silent_after_s;
};
/* host, status, processes_live, processes_silent, apps, modes, build_ids, agent_versions (json
 * arrays), first_seen, last_seen, seconds_since_report, units_24h, violations_24h,
 * violations_by_hour (24 numbers, oldest first), drops, spool_backlog, ship_errors; silent first. */
PGresult *model_hosts(PGconn *db, const struct host_filter *f, long limit, long offset, char *err,
		      size_t errlen);
PGresult *model_hosts_count(PGconn *db, const struct host_filter *f, char *err, size_t errlen);
/* A host's processes, live first: pid, app, exe, build_id, mode, agent_version, status, started_at,
 * first_seen, last_seen, units, violations, drops, spool_backlog, ship_errors. */
PGresult *model_host_procs(PGconn *db, const char *host, long long silent_after_s, long limit, char *err,
			   size_t errlen);
/* The profiles merged from the fleet's uploads (docs/fleet.md), the most learnt first (or one build):
 * build_id, exe, hosts, processes, units, merge_ms, merged_at, stale, last_upload, summary (json:
 * loops, unit types, thresholds). */
PGresult *model_profiles(PGconn *db, const char *build_id, long limit, long offset, char *err, size_t errlen);
PGresult *model_profiles_count(PGconn *db, char *err, size_t errlen);
/* Settings pushed to the agents of an app ('*': every app), docs/fleet.md: those set, in the order of
 * guardcore/settings.h's table (a bool as 0 or 1); the others as the agents were started. */
struct agent_settings {
	const char *app;
	bool set[GSET_COUNT];
	double value[GSET_COUNT];
	const char *note;
};
/* app, guard, k, sample_hz, min_wait_us, reports_per_min (NULL: as started), note, updated_at; '*' first. */
/* Per app and host: violations counted and dropped by the agents (processes seen in 24 h), violation
 * streams stored in 24 h and the sum of their weights (est_violations), the most drops first. */
PGresult *model_fleet_sampling(PGconn *db, long limit, char *err, size_t errlen);
PGresult *model_agent_settings(PGconn *db, char *err, size_t errlen);
/* Sets an app's row (replacing it). 0, or WEB_EFAIL (request.h) with err. */
int model_agent_settings_put(PGconn *db, const struct agent_settings *s, char *err, size_t errlen);
/* 0, WEB_ENOTFOUND when the app has no row, WEB_EFAIL; err says which. */
int model_agent_settings_delete(PGconn *db, const char *app, char *err, size_t errlen);
/* A host's last `hours` hours, oldest first: hour, units, violations. */
PGresult *model_host_hours(PGconn *db, const char *host, int hours, char *err, size_t errlen);

/* Schedules, alert rules and alerts (docs/analysis.md, "Watching"). _put: p = app, kind, every_s,
 * window_s, params (JSON) / name, app, type, signature_id, limit_ns_per_hour, min_share, webhook
 * (NULL for absent): an upsert by (app, kind) / name returning the id (a rule's: 0 and *id, WEB_EINVAL
 * for a signature that does not exist, WEB_EFAIL). _delete: 0, WEB_ENOTFOUND, WEB_EFAIL (request.h). */
PGresult *model_schedules(PGconn *db, char *err, size_t errlen);
PGresult *model_schedule_put(PGconn *db, const char *const p[5], char *err, size_t errlen);
int model_schedule_delete(PGconn *db, const char *id, char *err, size_t errlen);
/* redact: the webhooks' credentials (user:password@, query parameters named like a token, key, secret
 * or password) as "***", for those who may not manage the rules. */
PGresult *model_alert_rules(PGconn *db, bool redact, char *err, size_t errlen);
int model_alert_rule_put(PGconn *db, const char *const p[7], int64_t *id, char *err, size_t errlen);
int model_alert_rule_delete(PGconn *db, const char *id, char *err, size_t errlen);
/* The latest alerts first: alert_id, rule, type, run_id, cluster_id, message, delivery, attempts,
 * last_error, created_at, delivered_at. */
PGresult *model_alerts(PGconn *db, long limit, char *err, size_t errlen);

/* Browser sessions (docs/web.md, "Who may do what"): hashes cross as hex text (64 digits); idle and
 * max are sm-web's limits in seconds. */
/* A session of hash sh for the unrevoked token of hash th (one row: session_id; none: no such token),
 * after deleting the sessions that are over a limit or whose token is revoked. */
PGresult *model_session_create(PGconn *db, const char *sh, const char *th, const char *idle, const char *max,
			       char *err, size_t errlen);
/* The live session of hash sh, marked as seen now: one row (role, session_hash as hex), or none when
 * unknown, over a limit, or its token revoked. */
PGresult *model_session_touch(PGconn *db, const char *sh, const char *idle, const char *max, char *err,
			      size_t errlen);
/* Ends the session of hash sh (rows: session_id of what was deleted). */
PGresult *model_session_delete(PGconn *db, const char *sh, char *err, size_t errlen);
/* Ends every session of token id (rows: session_id). */
PGresult *model_sessions_of_token_delete(PGconn *db, const char *token_id, char *err, size_t errlen);

/* A run's collapsed stacks of one kind ("r" or "w"): frame_ids (int array), cost_ns, by stack. */
PGresult *model_run_kind_stacks(PGconn *db, const char *run, const char *kind, char *err, size_t errlen);
/* Column name of row: its text, NULL when NULL or no such column. */
const char *model_col(PGresult *r, int row, const char *name);
/* The same as a number (0 for NULL). */
int64_t model_coln(PGresult *r, int row, const char *name);
/* The same as a double (0 when NULL or absent). */
double model_cold(PGresult *r, int row, const char *name);
/* The row of stack id sid in r (rows of a stack_id column, by id), or -1. */
int model_find_stack(PGresult *r, int64_t sid);
/* A run's stacks of both kinds for its exports: kind ('r'/'w'), frame_ids, cost_ns, events, summed
 * over its streams. Caller clears. */
PGresult *model_run_profile(PGconn *db, const char *run, char *err, size_t errlen);


/* ---- problems (docs/mining.md, "Problems") ---- */

/* A run's problems by rank: problem_id, run_id, rank, title (frame ids), total_cost_ns, streams,
 * events, avg_cost_ns, excess_cost_ns, excess_lo_ns, excess_hi_ns,
 * own_cost_ns, expected_cost_ns, baseline_streams (the last six NULL without a baseline). */
PGresult *model_problems(PGconn *db, const char *run_id, long limit, long offset, char *err, size_t errlen);
/* One row: total. */
PGresult *model_problems_count(PGconn *db, const char *run_id, char *err, size_t errlen);
/* One problem: the columns of model_problems(). */
PGresult *model_problem(PGconn *db, const char *id, char *err, size_t errlen);
/* The member clusters of the problems problem_ids ("{1,2}"), by problem, costliest first:
 * problem_id, cluster_id, kind, rank (rank_total_cost), title, common (frame ids), total_cost_ns,
 * streams, events, avg_cost_ns, excess_cost_ns. */
PGresult *model_problem_clusters(PGconn *db, const char *problem_ids, char *err, size_t errlen);
/* A problem's costliest streams (its members' matched events, each once): the columns of
 * model_cluster_streams(). */
PGresult *model_problem_streams(PGconn *db, const char *id, long limit, char *err, size_t errlen);
/* Its hosts, costliest first: host, streams, cost_ns. */
PGresult *model_problem_hosts(PGconn *db, const char *id, long limit, char *err, size_t errlen);

#endif
