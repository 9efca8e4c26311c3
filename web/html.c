/* html: page frame and escaped pieces of the dashboard's pages (see html.h). */
#include "web/html.h"
#include "common/fmt.h"

#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void html_raw(struct req *rq, const char *s)
{
	buf_puts(&rq->out, s);
}

void html_rawf(struct req *rq, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vprintf(&rq->out, fmt, ap);
	va_end(ap);
}

void html_text(struct req *rq, const char *s)
{
	if (s)
		buf_put_html(&rq->out, s, strlen(s));
}

void html_value(struct req *rq, const char *s)
{
	if (!s)
		return;
	html_raw(rq, "<bdi>");
	html_text(rq, s);
	html_raw(rq, "</bdi>");
}

void html_csrf_field(struct req *rq)
{
	html_rawf(rq, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", rq->csrf);
}

void html_begin(struct req *rq, const char *title)
{
	html_begin_refresh(rq, title, 0);
}

void html_begin_refresh(struct req *rq, const char *title, int refresh)
{
	buf_reset(&rq->out);
	rq->status = 200;
	rq->ctype = "text/html; charset=utf-8";
	html_raw(rq, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>");
	html_text(rq, title);
	html_raw(rq, " · stackmine</title>");
	/* only without scripts: with them, app.js follows the page (a reload would lose what it shows) */
	if (refresh > 0)
		html_rawf(rq, "<noscript><meta http-equiv=\"refresh\" content=\"%d\"></noscript>", refresh);
	html_raw(rq, "<link rel=\"stylesheet\" href=\"/static/app.css\">"
		     "<link rel=\"icon\" href=\"data:,\"><script src=\"/static/app.js\" defer></script></head>\n");
	/* the token for scripts' writes (only ever for this user's own session) */
	html_rawf(rq, "<body data-csrf=\"%s\"><header><a class=\"brand\" href=\"/runs\">stackmine</a><nav>", rq->csrf);
	if (req_may_read(rq))
		html_raw(rq, "<a href=\"/runs\">Runs</a><a href=\"/compare\">Compare</a><a href=\"/streams\">Streams</a>"
			     "<a href=\"/signatures\">Signatures</a><a href=\"/alerts\">Alerts</a><a href=\"/fleet\">Fleet</a>");
	if (rq->role >= AUTH_ADMIN)
		html_raw(rq, "<a href=\"/tokens\">Tokens</a>");
	html_raw(rq, "</nav>");
	if (rq->via_cookie) {
		html_raw(rq, "<form class=\"logout\" method=\"post\" action=\"/logout\">");
		html_csrf_field(rq);
		html_rawf(rq, "<span class=\"role\">%s</span><button type=\"submit\">Log out</button></form>",
			  auth_role_name(rq->role));
	} else if (rq->role == AUTH_NONE) {
		html_raw(rq, "<a class=\"login\" href=\"/login\">Log in</a>");
	}
	html_raw(rq, "</header>\n<main>");
}

void html_end(struct req *rq)
{
	html_raw(rq, "</main></body></html>\n");
}

void html_cost(struct req *rq, int64_t ns)
{
	char t[FMT_LEN];

	html_raw(rq, fmt_duration(t, (double)ns));
}

void html_count(struct req *rq, int64_t n)
{
	char t[FMT_LEN];

	html_raw(rq, fmt_count(t, n));
}

void html_interval(struct req *rq, double lo_ns, double hi_ns)
{
	char t[FMT_LEN];

	html_raw(rq, fmt_interval(t, lo_ns, hi_ns));
}

void html_share(struct req *rq, double frac)
{
	char t[FMT_LEN];

	html_raw(rq, fmt_share(t, frac));
}

void html_label_value(struct req *rq, const char *key, const char *value)
{
	char t[FMT_LEN];

	if (!key || !value || !fmt_label_value(t, key, value)) {
		html_text(rq, value);
		return;
	}
	html_raw(rq, "<span title=\"");
	html_text(rq, value);
	html_raw(rq, "\">");
	html_raw(rq, t);
	html_raw(rq, "</span>");
}

void html_bar(struct req *rq, double value, double max, int width)
{
	double w = max > 0 ? value / max * width : 0;

	if (w < 0)
		w = 0;
	if (w > width)
		w = width;
	html_rawf(rq, "<svg class=\"bar\" width=\"%d\" height=\"8\" aria-hidden=\"true\"><rect width=\"%.1f\" "
		      "height=\"8\"></rect></svg>", width, w < 1 && value > 0 ? 1.0 : w);
}

void html_frame_short(struct req *rq, const char *name, int max)
{
	const char *fn = strchr(name, '!');
	size_t len;
	char tmp[512];

	fn = fn ? fn + 1 : name;
	len = strlen(fn);
	/* drop a trailing argument list "(...)" and a trailing " const" */
	if (len && fn[len - 1] == ')') {
		int depth = 0;
		for (size_t i = len; i-- > 0;) {
			depth += fn[i] == ')' ? 1 : fn[i] == '(' ? -1 : 0;
			if (depth == 0) {
				len = i;
				break;
			}
		}
	}
	if (len > sizeof(tmp) - 4)
		len = sizeof(tmp) - 4;
	if (max > 0 && len > (size_t)max) {
		len = (size_t)max;
		while (len && ((unsigned char)fn[len] & 0xc0) == 0x80)   /* not inside a character */
			len--;
		memcpy(tmp, fn, len);
		memcpy(tmp + len, "…", sizeof("…"));
	} else {
		memcpy(tmp, fn, len);
		tmp[len] = '\0';
	}
	html_raw(rq, "<span class=\"frame\" title=\"");
	html_text(rq, name);
	html_raw(rq, "\">");
	html_text(rq, tmp[0] ? tmp : name);
	html_raw(rq, "</span>");
}

void html_time(struct req *rq, const char *iso)
{
	char t[20];

	if (!iso || strlen(iso) < 19) {
		html_text(rq, iso ? iso : "–");
		return;
	}
	/* "2026-11-22T06:25:38.523747Z" shown as "2026-11-22 06:25:38", the whole in a title */
	memcpy(t, iso, 19);
	t[10] = ' ';
	t[19] = '\0';
	html_raw(rq, "<time datetime=\"");
	html_text(rq, iso);
	html_raw(rq, "\">");
	html_text(rq, t);
	html_raw(rq, "</time>");
}

void html_error(struct req *rq, int status, const char *msg)
{
	if (status == 500) {
		rq->detail = msg ? req_strdup(rq, msg) : NULL;
		msg = "The request failed on the server; its log says why.";
	}
	html_begin(rq, "Error");
	html_rawf(rq, "<h1>%d</h1><p class=\"error\">", status);
	html_text(rq, msg);
	html_raw(rq, "</p>");
	html_end(rq);
	rq->status = status;
}

void html_redirect(struct req *rq, const char *path)
{
	buf_reset(&rq->out);
	rq->status = 303;
	rq->ctype = "text/plain; charset=utf-8";
	req_add_header(rq, "Location", path);
	buf_puts(&rq->out, "see other\n");
}
