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
#include <string.h>

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
		log_warn("http", "detail=\"%u messages of libmicrohttpd dropped in the last %d s or more\"", missed,
			 (int)LOG_PERIOD_S);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	log_warn("http", "detail=\"%.*s\"", (int)strcspn(msg, "\n\""), msg);
}
