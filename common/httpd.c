/* httpd: libmicrohttpd helpers shared by the servers (see httpd.h). */
#include "common/httpd.h"
#include "common/log.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

int httpd_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[128];
	const char *colon = strrchr(spec, ':');
	int64_t port;
	size_t hl;

	if (!colon || util_parse_i64(colon + 1, 0, 65535, &port) < 0)
		return -1;
	hl = (size_t)(colon - spec);
	if (hl >= sizeof(host))
		return -1;
	memcpy(host, spec, hl);
	host[hl] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
			return -1;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a6);
		return AF_INET6;
	}
	{
		struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
		if (hl == 0)
			a4->sin_addr.s_addr = htonl(INADDR_ANY);
		else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return -1;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*len = sizeof(*a4);
		return AF_INET;
	}
}

int httpd_bound_port(struct MHD_Daemon *d)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (!info || getsockname(info->listen_fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int httpd_write_port_file(const char *path, int port)
{
	char tmp[4096];
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -1;
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%d\n", port);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

void httpd_log(void *cls, const char *fmt, va_list ap)
{
	/* a flood makes libmicrohttpd complain per connection: at most LOG_BURST lines per
	 * LOG_PERIOD_S, then one line with the count of those dropped */
	enum { LOG_BURST = 20, LOG_PERIOD_S = 10 };
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static int64_t period_start;
	static unsigned used, dropped;
	int64_t now = util_now_mono_ns() / 1000000000;
	unsigned missed = 0;
	char msg[512];

	(void)cls;
	pthread_mutex_lock(&lock);
	if (now - period_start >= LOG_PERIOD_S) {
		missed = dropped;
		period_start = now;
		used = dropped = 0;
	}
	if (used >= LOG_BURST) {
		dropped++;
		pthread_mutex_unlock(&lock);
		return;
	}
	used++;
	pthread_mutex_unlock(&lock);
	if (missed)
		log_warn("http: messages of libmicrohttpd dropped", "dropped=%u period_s=%d", missed, (int)LOG_PERIOD_S);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	log_warn("http", "detail=%.*s", (int)strcspn(msg, "\n"), msg);
}

/* ---- framing (RFC 9112 section 6.3, 3.2) ---- */

struct framing {
	unsigned host, clen, te;
	unsigned auth, ctype, cenc;   /* fields the servers read one value of */
	bool te_other, bad_name;
	char clen_first[32];
};

static bool token_char(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* "chunked", alone, with optional whitespace around: the only transfer coding the servers take */
static bool only_chunked(const char *v)
{
	size_t n;

	v += strspn(v, " \t");
	if (strncasecmp(v, "chunked", 7) != 0)
		return false;
	n = strspn(v + 7, " \t");
	return v[7 + n] == '\0';
}

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct framing *f = cls;

	(void)kind;
	if (!*key)
		f->bad_name = true;
	for (const char *p = key; *p; p++)
		if (!token_char((unsigned char)*p))
			f->bad_name = true;
	if (strcasecmp(key, "Host") == 0) {
		f->host++;
	} else if (strcasecmp(key, "Content-Length") == 0) {
		f->clen++;
	} else if (strcasecmp(key, "Transfer-Encoding") == 0) {
		f->te++;
		if (!value || !only_chunked(value))
			f->te_other = true;
	} else if (strcasecmp(key, "Authorization") == 0) {
		f->auth++;
	} else if (strcasecmp(key, "Content-Type") == 0) {
		f->ctype++;
	} else if (strcasecmp(key, "Content-Encoding") == 0) {
		f->cenc++;
	}
	return MHD_YES;
}

int httpd_check_framing(struct MHD_Connection *c, const char *version, const char **why)
{
	struct framing f;

	memset(&f, 0, sizeof(f));
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &f);
	if (f.bad_name) {
		*why = "header: a field name with whitespace or a byte not allowed in a token";
		return 400;
	}
	/* an HTTP/1.0 request may omit Host; HTTP/1.1 must send exactly one */
	if (f.host > 1 || (f.host == 0 && version && strcmp(version, MHD_HTTP_VERSION_1_0) != 0)) {
		*why = f.host ? "Host: more than one" : "Host: missing (HTTP/1.1 requires it)";
		return 400;
	}
	/* two lengths (even equal ones) or a length and a coding: a proxy in front may have read
	 * the body differently, and what is left would be taken for another request */
	if (f.clen > 1) {
		*why = "Content-Length: more than one";
		return 400;
	}
	if (f.clen && f.te) {
		*why = "Content-Length: not allowed with Transfer-Encoding";
		return 400;
	}
	if (f.te > 1) {
		*why = "Transfer-Encoding: more than one";
		return 400;
	}
	if (f.te_other) {
		*why = "Transfer-Encoding: only chunked is supported";
		return 501;
	}
	/* the servers read the first of these, a proxy in front may read the last (or join them):
	 * a token or a body one of them checks would not be the one the other uses */
	if (f.auth > 1 || f.ctype > 1 || f.cenc > 1) {
		*why = f.auth > 1 ? "Authorization: more than one" : f.ctype > 1 ? "Content-Type: more than one"
									: "Content-Encoding: more than one";
		return 400;
	}
	return 0;
}

enum MHD_Result httpd_refuse(struct MHD_Connection *c, int status, const char *why)
{
	char body[256];
	int n = snprintf(body, sizeof(body), "{\"error\": \"%s\"}\n", why);
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (n < 0 || (size_t)n >= sizeof(body))
		return MHD_NO;
	r = MHD_create_response_from_buffer((size_t)n, body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Connection", "close");
	ret = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

bool httpd_probe_method(struct MHD_Connection *c, const char *method, enum MHD_Result *ret)
{
	static const char allow[] = "GET, HEAD, OPTIONS";
	static const char msg[] = "{\"error\": \"method: use GET or HEAD\"}\n";
	bool options = strcmp(method, MHD_HTTP_METHOD_OPTIONS) == 0;
	struct MHD_Response *r;

	if (strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0)
		return false;
	*ret = MHD_NO;
	r = options ? MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT)
		    : MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return true;
	if (!options)
		MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "Allow", allow);
	*ret = MHD_queue_response(c, options ? MHD_HTTP_NO_CONTENT : MHD_HTTP_METHOD_NOT_ALLOWED, r);
	MHD_destroy_response(r);
	return true;
}
