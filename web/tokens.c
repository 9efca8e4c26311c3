/* tokens: the tokens' page, forms and API (see tokens.h). */
#include "web/tokens.h"
#include "common/json.h"
#include "common/jsonw.h"
#include "web/api.h"
#include "web/html.h"
#include "web/model.h"
#include "web/pages.h"
#include "web/request.h"

#include <json-c/json.h>
#include <stdlib.h>

void tokens_get_tokens(struct req *rq)
{
	if (api_admin_only(rq, false, "tokens"))
		api_get_page(rq, "tokens", model_tokens, model_tokens_count);
}

/* The one check of a new token's fields, the API's body and the page's form alike (auth_token_create()
 * checks the name and the host). Returns 0 with *role, or WEB_EINVAL with err. */
static int check_new(const char *role_name, enum auth_role *role, char *err, size_t errlen)
{
	*role = role_name ? auth_role_parse(role_name) : AUTH_NONE;
	if (*role == AUTH_NONE) {
		snprintf(err, errlen, "role: required, ingest, analyst or admin");
		return WEB_EINVAL;
	}
	return 0;
}

/* auth_token_revoke()'s result as a status: 1 is no such active token. */
static int revoke_status(int rc)
{
	return rc > 0 ? 404 : 500;
}

/* auth_token_create()'s codes as statuses. */
static int create_status(int rc)
{
	return rc == AUTH_EINVAL ? 400 : 500;
}

void tokens_post_token(struct req *rq)
{
	static const char *const fields[] = { "role", "name", "host", NULL };
	struct json_val o[3];
	const char *role, *name, *host;
	char token[AUTH_TOKEN_LEN + 1], err[512];
	enum auth_role r;
	int64_t id;
	struct jsonw w;
	int rc;

	if (!api_admin_only(rq, true, "tokens") || !api_body_fields(rq, fields, o))
		return;
	if (!api_str_field(rq, o[0], "role", &role) || !api_str_field(rq, o[1], "name", &name) ||
	    !api_str_field(rq, o[2], "host", &host))
		goto out;
	if ((rc = check_new(role, &r, err, sizeof(err))) < 0) {
		req_json_error(rq, req_status_of(rc), "%s", err);
		goto out;
	}
	rc = auth_token_create(rq->db, r, name, host, token, &id, err, sizeof(err));
	if (rc < 0) {
		req_json_error(rq, create_status(rc), "%s", err);
		goto out;
	}
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_ki64(&w, "token_id", id);
	jsonw_kstr(&w, "token", token);
	jsonw_kstr(&w, "role", role);
	jsonw_kstr(&w, "name", name ? name : "");
	jsonw_kstr(&w, "host", host);
	jsonw_end(&w);
	api_ok_json(rq, &w, 201);
	req_add_header(rq, "Location", req_printf(rq, "/api/v1/tokens/%lld", (long long)id));
out:
	return;
}

void tokens_delete_token(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	int rc;
	struct jsonw w;

	if (!api_admin_only(rq, true, "tokens"))
		return;
	rc = auth_token_revoke(rq->db, strtoll(id, NULL, 10), err, sizeof(err));
	if (rc != 0) {
		req_json_error(rq, revoke_status(rc), "%s", err);
		return;
	}
	req_token_revoked(rq, strtoll(id, NULL, 10));
	jsonw_init(&w, &rq->out);
	jsonw_object(&w);
	jsonw_ki64(&w, "token_id", strtoll(id, NULL, 10));
	jsonw_kbool(&w, "revoked", true);
	jsonw_end(&w);
	api_ok_json(rq, &w, 200);
}

static bool page_admin(struct req *rq)
{
	if (rq->role < AUTH_ADMIN) {
		html_error(rq, 403, "Tokens are an admin's.");
		return false;
	}
	return true;
}

void tokens_page_tokens(struct req *rq)
{
	char err[512];
	PGresult *r;

	if (!page_admin(rq))
		return;
	if (!(r = model_tokens(rq->db, 1000, 0, err, sizeof(err)))) {
		html_error(rq, 500, err);
		return;
	}
	html_begin(rq, "Tokens");
	html_raw(rq, "<h1>API tokens</h1><p class=\"hint\">Agents send with ingest tokens (bound to their host: a "
		     "stream of another host is refused), analysts read and write with analyst tokens, admins "
		     "manage runs and tokens. A token is shown once, when it is made; only its hash is kept.</p>"
		     "<form class=\"token-new\" method=\"post\" action=\"/tokens/new\">");
	html_csrf_field(rq);
	html_raw(rq, "<label>Role <select name=\"role\"><option>ingest</option><option>analyst</option>"
		     "<option>admin</option></select></label> <label>Name <input name=\"name\" maxlength=\"255\">"
		     "</label> <label>Host (ingest) <input name=\"host\" maxlength=\"255\"></label> "
		     "<button type=\"submit\">Create</button></form><table class=\"tokens\"><thead><tr><th class=\"n\">Id"
		     "</th><th>Role</th><th>Name</th><th>Host</th><th>Created</th><th>Revoked</th><th></th></tr></thead>"
		     "<tbody>");
	for (int i = 0; i < PQntuples(r); i++) {
		html_rawf(rq, "<tr><td class=\"n\">%lld</td><td>", (long long)model_coln(r, i, "token_id"));
		html_text(rq, model_col(r, i, "role"));
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "name"));
		html_raw(rq, "</td><td>");
		html_text(rq, model_col(r, i, "host") ? model_col(r, i, "host") : "any");
		html_raw(rq, "</td><td class=\"time\">");
		html_time(rq, model_col(r, i, "created_at"));
		html_raw(rq, "</td><td class=\"time\">");
		if (model_col(r, i, "revoked_at")) {
			html_time(rq, model_col(r, i, "revoked_at"));
			html_raw(rq, "</td><td>");
		} else {
			html_rawf(rq, "</td><td><form method=\"post\" action=\"/tokens/%lld/revoke\" "
				  "data-confirm=\"Revoke token %lld? Whatever uses it is refused from now on.\">",
				  (long long)model_coln(r, i, "token_id"), (long long)model_coln(r, i, "token_id"));
			html_csrf_field(rq);
			html_raw(rq, "<button type=\"submit\" class=\"danger\">Revoke</button></form>");
		}
		html_raw(rq, "</td></tr>");
	}
	html_raw(rq, "</tbody></table>");
	html_end(rq);
	PQclear(r);
}

void tokens_post_token_new(struct req *rq)
{
	const char *role = req_form(rq, "role"), *name = req_form(rq, "name"), *host = req_form(rq, "host");
	char token[AUTH_TOKEN_LEN + 1], err[512];
	enum auth_role r;
	int64_t id;
	int rc;

	if (!req_may_write(rq, false) || !page_admin(rq))
		return;
	/* an empty field is one not given */
	if (host && !*host)
		host = NULL;
	if ((rc = check_new(role, &r, err, sizeof(err))) < 0) {
		html_error(rq, req_status_of(rc), err);
		return;
	}
	if ((rc = auth_token_create(rq->db, r, name, host, token, &id, err, sizeof(err))) < 0) {
		html_error(rq, create_status(rc), err);
		return;
	}
	html_begin(rq, "New token");
	html_rawf(rq, "<h1>Token %lld</h1><p>Copy it now: it is not shown again.</p><p><code class=\"token\">",
		  (long long)id);
	html_text(rq, token);
	html_raw(rq, "</code></p><p><a href=\"/tokens\">Back to the tokens</a></p>");
	html_end(rq);
}

void tokens_post_token_revoke(struct req *rq)
{
	const char *id = rq->arg;
	char err[512];
	int rc;

	if (!req_may_write(rq, false) || !page_admin(rq))
		return;
	if (!pages_confirmed(rq, req_printf(rq, "Revoke token %lld?", strtoll(id, NULL, 10)),
			     "Whatever uses this token (agents, scripts, sessions) is refused from now on. This cannot "
			     "be undone.",
			     req_printf(rq, "/tokens/%lld/revoke", strtoll(id, NULL, 10)), "Revoke", "/tokens", NULL))
		return;
	rc = auth_token_revoke(rq->db, strtoll(id, NULL, 10), err, sizeof(err));
	if (rc != 0) {
		html_error(rq, revoke_status(rc), err);
		return;
	}
	req_token_revoked(rq, strtoll(id, NULL, 10));
	html_redirect(rq, "/tokens");
}
