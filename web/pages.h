/*
 * pages: the dashboard's HTML pages (docs/web.md): their one table of routes and its dispatch,
 * the login and logout, and the pieces every resource's pages share (pager, links kept across
 * pages, frame lists). Pages are rendered on the server from model.c's rows; every name from the
 * data is escaped (html.c). Writes are forms with the cross-site request token, or the API from
 * app.js. The pages themselves are in the resources' modules (runs.c, clusters.c, ...).
 */
#ifndef SM_WEB_PAGES_H
#define SM_WEB_PAGES_H

#include <stdbool.h>
#include <libpq-fe.h>

#include "web/request.h"

#define PAGES_ROWS 50   /* rows of a list a page shows */

/* Answers a request for a page: sets status, content type and body (or an error page). */
void pages_handle(struct req *rq);
/* As api_route_name(), for the pages. */
void pages_route_name(struct req *rq);
/* The page when the database is down: 503 with Retry-After. */
void pages_unavailable(struct req *rq);
/* The row of a page's object (a model.c query of one row), or NULL after the error page: 500 with err
 * when the query failed (r NULL), 404 saying missing when it found none. */
PGresult *pages_need_row(struct req *rq, PGresult *r, const char *err, const char *missing);
/* The page's offset from ?offset= (0 when absent or bad). */
long pages_offset(struct req *rq);
/* Previous/next links keeping the other query parameters given as `keep` (already a safe
 * "&k=v..." string built by the caller with escaped values); more: the count stopped at total,
 * there are more rows than that (a next link while a page is full). */
void pages_pager(struct req *rq, const char *base, const char *keep, long offset, long shown, long total,
		 bool more);
/* Percent-encodes value into b; the characters of keep (besides letters and digits) stay. */
void pages_url_encode_keep(struct buf *b, const char *value, const char *keep);
/* A path or a query value ('/' kept). */
void pages_url_encode(struct buf *b, const char *value);
struct flame;
/* A flame graph section's body: the search form (?search=, a GET form landing on #flame), the matched
 * share, a reset link when zoomed (?focus=), and <div class="flame"> with the SVG, whose frames link to
 * ?...&focus=ID#flame. keep: NULL-terminated names of the page's query parameters the links and the
 * form carry along (or NULL). 0, or -1 when the graph could not be drawn (out of memory: nothing of
 * it written). */
int pages_flame_graph(struct req *rq, struct flame *f, const char *const *keep);
/* "&name=urlencoded(value)" appended to prev, in the arena (for links that keep a filter); "&" when
 * out of memory, so that a caller skipping the leading '&' of a non-empty result stays in bounds. */
const char *pages_keep_param(struct req *rq, const char *prev, const char *name, const char *value);
/* Frame names as a numbered list, outermost first. */
void pages_frame_list(struct req *rq, const char *const *names, size_t n, const char *cls);
/* frames_compact() of the frame ids of a PostgreSQL int array. */
void pages_frame_ids_compact(struct req *rq, const char *ids, size_t k);
/* frames_compact() of a JSON array of names (a signature's frames). */
void pages_frames_json_compact(struct req *rq, const char *json, size_t k);
/* Links to the profile of what the page shows in other profilers' formats (docs/import.md). */
void pages_download_links(struct req *rq, const char *api_path);
/* A cluster's estimated fleet cost (docs/mining.md, "Estimated metrics"), beside its sampled cost
 * where they differ: the agents shipped only some of a minute's violations. */
void pages_est_cost_note(struct req *rq, int64_t est);
/* Table cells <td class="n"> of row i's columns cols (NULL-ended), each a count ("1,234"). */
void pages_count_cells(struct req *rq, PGresult *r, int i, const char *const *cols);
/* A title (a PostgreSQL int array of frame ids), each frame short, joined by ›; NULL: none. */
void pages_title_frames(struct req *rq, const char *ids);
/* A destructive form's confirmation: true when the POST carries confirm=1 (app.js adds it once
 * confirm() was answered yes); otherwise it writes the page that asks (question: literal text, no
 * data) with a danger button posting to action with confirm=1 and a Cancel link to back, and the
 * caller must do nothing. keep: the names of the form's fields the page posts again (NULL-terminated,
 * or NULL). Without JavaScript a form's first POST lands here: it never acts on it. */
bool pages_confirmed(struct req *rq, const char *title, const char *question, const char *action,
		     const char *button, const char *back, const char *const *keep);
/* A form's field as sent back with a refused form (again; "" when not sent), or dflt on its first showing. */
const char *pages_form_kept(struct req *rq, bool again, const char *name, const char *dflt);
/* <select name> of the options opts (NULL-terminated), the kept value (or the first) selected; labels: the
 * text shown of each, or NULL. */
void pages_form_select(struct req *rq, bool again, const char *name, const char *const *opts,
		       const char *const *labels);
/* <input name> with the kept value (or dflt); extra: literal attributes (" required"). */
void pages_form_input(struct req *rq, bool again, const char *name, const char *dflt, const char *extra);

#endif
