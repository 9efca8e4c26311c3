/*
 * api: the REST API under /api/v1/ (../shared/spec/rest.md, docs/api.md): its one table of
 * routes and their dispatch, and what every resource's API handlers share: parameter checks with
 * a 400 naming the parameter, 404 for missing objects, model.c's rows written as JSON objects by
 * column name and type. The handlers are in the resources' modules (runs.c, clusters.c, ...).
 */
#ifndef SM_WEB_API_H
#define SM_WEB_API_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/json.h"
#include "common/jsonw.h"
#include "web/request.h"

/* Answers a request under /api/: sets status, content type and body (or an error). */
void api_handle(struct req *rq);
/* Sets rq->route, the pattern of the route the path takes (if any), answering nothing: for the log
 * of a request that fails before it is handled (no database connection). */
void api_route_name(struct req *rq);
/* Row `row` as the members of an object opened by the caller: all its columns except those named in
 * skip (NULL-terminated). */
void api_put_members(struct jsonw *w, const PGresult *r, int row, const char *const *skip);
/* Row `row` as an object; api_put_rows(): every row, an array of them. */
void api_put_row(struct jsonw *w, const PGresult *r, int row, const char *const *skip);
void api_put_rows(struct jsonw *w, const PGresult *r, const char *const *skip);
/* The response is the document of w: sent when whole, else a 500 that says why (a response over
 * the cap of the out buffer, out of memory), never a cut-short 200. */
void api_ok_json(struct req *rq, const struct jsonw *w, int status);
/* A database failure: 500, logged by the server. */
bool api_failed(struct req *rq, PGresult *r, const char *err);
/* { "<list>": rows, "total": count }, or the 500 of the query that failed (rows NULL: count was not
 * run, NULL too); frees both. */
void api_page_response(struct req *rq, const char *name, PGresult *rows, PGresult *count, const char *err);
/* {"<name>": id} */
void api_respond_id(struct req *rq, const char *name, int64_t id, int status);
/* A single row as the response. */
void api_row_response(struct req *rq, const PGresult *r);
/* A whole-number query parameter in [min, max] (def when absent): false after a 400. */
bool api_num_param(struct req *rq, const char *name, int64_t min, int64_t max, int64_t def, int64_t *out);
/* ?limit= (1 to 1000, 50) and ?offset=: false after a 400. */
bool api_page_params(struct req *rq, long *limit, long *offset);
/* Refuses query parameters the endpoint does not know (a typo must not widen a query); labels: also
 * label.KEY. False after a 400. */
bool api_known_query(struct req *rq, const char *const *names, bool labels);
/* A JSON array of the names of a PostgreSQL int array of frame ids. */
bool api_put_names(struct req *rq, struct jsonw *w, const char *ids);
/* Distinct stack ids, and so the position of each in the "stacks" array written. */
struct api_stackmap {
	const int32_t *ids; /* distinct stack ids, ascending */
	size_t n;
};
/* The position of stack id in the array api_put_stacks() wrote, or -1. */
long api_stack_index(const struct api_stackmap *m, int32_t id);
/*
 * Writes "stacks": [[frame names, outermost first], ...] for the distinct stack
 * ids of column col of rows, ascending, and fills *m (id -> position in that
 * array). Returns 0 or -1 (err set).
 */
int api_put_stacks(struct req *rq, struct jsonw *w, PGresult *rows, int col, struct api_stackmap *m, char *err,
		   size_t errlen);
/* The same for ids[0..n), distinct and ascending (a stack's position in the array is its index in ids). */
int api_put_stack_list(struct req *rq, struct jsonw *w, const int32_t *ids, size_t n, char *err, size_t errlen);
/* The row of a run, cluster or problem, or NULL after a 404 or 500 (caller frees the row). */
PGresult *api_need_run(struct req *rq, const char *id);
PGresult *api_need_cluster(struct req *rq, const char *id);
PGresult *api_need_problem(struct req *rq, const char *id);
/* For api_known_query() of an endpoint without parameters. */
extern const char *const api_no_params[];
/* ?kind=wait or run as 'w' or 'r' (NULL when absent): false after a 400. */
bool api_kind_param(struct req *rq, const char **kind);
/* The body checked (json_check_body) and its members named in fields (NULL-terminated) into out:
 * true, or false after a 400 (unknown fields are refused: sm-web's bodies are closed). */
bool api_body_fields(struct req *rq, const char *const *fields, struct json_val *out);
/* A string field: true with *out (NULL when absent or null), false after a 400. */
bool api_str_field(struct req *rq, struct json_val v, const char *name, const char **out);
/* Only an admin's: what names the thing in the 403 ("tokens"). */
bool api_admin_only(struct req *rq, bool write, const char *what);
/* An optional number field in [min, max] (whole when whole is set); absent or null: *present false.
 * null_means: what a null stands for, in the error message (NULL: the field is required). */
bool api_num_field(struct req *rq, struct json_val v, const char *name, double min, double max, bool whole,
		   const char *null_means, double *out, bool *present);
/* GET of one list: {"<key>": rows}. */
void api_list_json(struct req *rq, const char *key, PGresult *rows, const char *err);
/* 201 {"<key>": id} of a created (or replaced) row. */
void api_created(struct req *rq, const char *key, PGresult *r, const char *err);
/* 200 {"<key>": id, "deleted": true} */
void api_deleted(struct req *rq, const char *key, const char *id);
/* The GET of a list by pages (?limit=, ?offset=): {"<name>": a page of rows, "total": count}, from
 * model.c's two queries. */
typedef PGresult *api_page_fn(PGconn *db, long limit, long offset, char *err, size_t errlen);
typedef PGresult *api_count_fn(PGconn *db, char *err, size_t errlen);
void api_get_page(struct req *rq, const char *name, api_page_fn *page, api_count_fn *count_of);
/* Child rows (ordered by their parent's id, in column 0) of parent, the rows from *k on: skips
 * those of parents before it; returns the row after its last ([*k, end) are its children). */
int api_child_rows(const PGresult *kids, int *k, const char *parent);
/* How api_put_parents() writes a row and its child rows; head and child return false after an
 * error response. */
struct api_parents {
	const char *const *skip;    /* the row's columns api_put_members() leaves to head */
	bool (*head)(struct req *rq, struct jsonw *w, PGresult *rows, int i);
	const char *kids_key;       /* the children's array */
	bool (*child)(struct req *rq, struct jsonw *w, PGresult *kids, int k);   /* a child's members */
};
/* Rows as objects: their columns, head's members, then their children from kids (api_child_rows())
 * as objects; with array false, the one row's object is left open for more members. Returns false
 * after an error response. */
bool api_put_parents(struct req *rq, struct jsonw *w, const struct api_parents *how, PGresult *rows,
		     PGresult *kids, bool array);

#endif
