/*
 * html: building the dashboard's pages: the page frame (head, navigation,
 * the cross-site request token for scripts and forms), escaped text, and the
 * small pieces every page uses (costs, bars, frame names). Everything from the
 * data goes through html_text() / html_attr(); nothing here writes markup
 * taken from input.
 */
#ifndef SM_WEB_HTML_H
#define SM_WEB_HTML_H

#include <stdint.h>

#include "web/request.h"

/* Start a page (status 200, text/html) titled title; ends with <main>. */
void html_begin(struct req *rq, const char *title);
/* The same, and when refresh > 0 a browser without scripts reloads the page every refresh seconds. */
void html_begin_refresh(struct req *rq, const char *title, int refresh);
/* Close <main>, the body and the document. */
void html_end(struct req *rq);
/* Literal markup (never data). */
void html_raw(struct req *rq, const char *s);
/* printf of literal markup; %s arguments must not be data (use html_text for that). */
void html_rawf(struct req *rq, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Escaped text (also safe inside a quoted attribute value). NULL writes nothing. */
void html_text(struct req *rq, const char *s);
/* A value from outside (host, app, version, label, frame) in running text: escaped and in a
 * <bdi>, so right-to-left characters in it cannot reorder the text around it. NULL: nothing. */
void html_value(struct req *rq, const char *s);
/* A hidden form field with the cross-site request token. */
void html_csrf_field(struct req *rq);
/* Numbers as every page writes them (common/fmt.h): a cost in ns ("36.43 s", "123.4 ms"), a count
 * ("50,110"), an interval of costs in one unit ("[-0.46 s, 2.61 s]"), a share of 1 ("66.7 %"). */
void html_cost(struct req *rq, int64_t ns);
void html_count(struct req *rq, int64_t n);
void html_interval(struct req *rq, double lo_ns, double hi_ns);
void html_share(struct req *rq, double frac);
/* A label's value read by its key (fmt_label_value: "unit.threshold_ns" 20080349 as "20.08 ms"),
 * the value as given in its title; any other value escaped as it is. */
void html_label_value(struct req *rq, const char *key, const char *value);
/* A horizontal bar of value/max (an inline SVG, width px). */
void html_bar(struct req *rq, double value, double max, int width);
/* A frame name shortened for tables: the function part, arguments dropped, at most max bytes
 * (on a character boundary, with "…"); the full name in a title attribute. */
void html_frame_short(struct req *rq, const char *name, int max);
/* A time of day from an RFC 3339 string, to the second, in a <time> element. */
void html_time(struct req *rq, const char *iso);
/* An error page with status and message. */
void html_error(struct req *rq, int status, const char *msg);
/* A 303 redirect to a local path. */
void html_redirect(struct req *rq, const char *path);

#endif
