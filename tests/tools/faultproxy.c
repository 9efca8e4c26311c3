/*
 * faultproxy: a small HTTP/1.1 proxy for tests that injects faults into
 * POST /api/v1/streams, so retries, spooling and draining can be tested
 * against the real ingest server.
 *
 *   faultproxy --listen 127.0.0.1:0 --upstream http://127.0.0.1:PORT \
 *              --script "503:2,drop,429:1,pass"
 *
 * prints the port it listens on as the first line of standard output, then
 * handles the POSTs in order: the first is answered 503 with Retry-After: 2,
 * the second has its connection closed without an answer, the third gets 429
 * with Retry-After: 1, the fourth and every later one is passed to the
 * upstream server, whose answer (status, body, Retry-After) goes back as is.
 * Script items, separated by commas:
 *
 *   pass          forward the request upstream
 *   drop          read the request, then close the connection without answering
 *   CODE[:SECS]   answer CODE (e.g. 503, 429, 500, 413) with {"error": ...}, and
 *                 Retry-After: SECS when given
 *   hang:MS       wait MS milliseconds (to trip client timeouts), then forward
 *   ITEM*N        ITEM, N times (e.g. 503:0*5)
 *
 * A drop on a kept-alive connection is usually not seen by the client:
 * libcurl sends the request once more on a new connection by itself, and
 * that request takes the next script item. When the script is used up,
 * requests are passed. Other requests (GET
 * /healthz, ...) are always passed and do not use up the script.
 * `--upstream none` answers a pass itself: with --answer JSON when given,
 * else with {"accepted": N, "duplicates": 0, "rejected": []} where N counts
 * the body's non-blank lines (after zstd decompression).
 *
 * Each request is logged as one line on standard error (or --log FILE):
 *   faultproxy: n=3 method=POST path=/api/v1/streams encoding=zstd
 *   type=application/x-ndjson bytes=812 action=429 retry_after=1 status=429
 * It runs until SIGTERM or SIGINT. A test starts it in the background, reads
 * the port from its first output line, points sm-agent at
 * http://127.0.0.1:PORT, and checks the log and what reached sm-ingest.
 */
#include "common/buf.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <zstd.h>

#define MAX_BODY ((size_t)256 << 20)
#define MAX_ACTIONS 100000

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

enum act_kind { ACT_PASS, ACT_DROP, ACT_STATUS, ACT_HANG };

struct action {
	enum act_kind kind;
	int status;          /* ACT_STATUS */
	long arg;            /* Retry-After seconds (-1: none), or hang milliseconds */
};

static struct {
	struct action *acts;
	size_t nacts, next;
	unsigned long nreq;
	const char *upstream;    /* NULL: answer passes ourselves */
	const char *answer;
	FILE *log;
	pthread_mutex_t lock;
} px = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char usage[] =
	"usage: faultproxy [options]\n"
	"\n"
	"HTTP proxy for tests: injects faults into POST /api/v1/streams by a script.\n"
	"Prints its port on standard output, logs each request on standard error.\n"
	"\n"
	"  --listen ADDR:PORT   where to listen; port 0 picks a free one [127.0.0.1:0]\n"
	"  --upstream URL|none  server to forward to; none answers passes itself [none]\n"
	"  --script ITEMS       comma-separated: pass, drop, CODE[:RETRY_AFTER_S], hang:MS,\n"
	"                       each optionally ITEM*N; after the script, everything passes\n"
	"  --answer JSON        with --upstream none: the 200 body of a pass\n"
	"                       [{\"accepted\": LINES, \"duplicates\": 0, \"rejected\": []}]\n"
	"  --log FILE           request log [standard error]\n"
	"  -h, --help           this text\n"
	"\n"
	"Exit status: 0 after SIGTERM/SIGINT, 1 when it cannot start, 2 on a usage error.\n";

static int add_action(struct action a, long times)
{
	while (times-- > 0) {
		if (px.nacts == MAX_ACTIONS)
			return -1;
		px.acts[px.nacts++] = a;
	}
	return 0;
}

static int parse_script(const char *script)
{
	char *copy = strdup(script), *save = NULL, *item;
	int rc = 0;

	px.acts = calloc(MAX_ACTIONS, sizeof(*px.acts));
	if (!copy || !px.acts) {
		free(copy);
		return -1;
	}
	for (item = strtok_r(copy, ",", &save); item && rc == 0; item = strtok_r(NULL, ",", &save)) {
		struct action a = { ACT_PASS, 0, -1 };
		char *star = strchr(item, '*'), *colon;
		int64_t times = 1, v;

		if (star) {
			*star = '\0';
			if (util_parse_i64(star + 1, 0, MAX_ACTIONS, &times) < 0)
				goto bad;
		}
		colon = strchr(item, ':');
		if (colon)
			*colon = '\0';
		if (strcmp(item, "pass") == 0 && !colon) {
			a.kind = ACT_PASS;
		} else if (strcmp(item, "drop") == 0 && !colon) {
			a.kind = ACT_DROP;
		} else if (strcmp(item, "hang") == 0 && colon) {
			a.kind = ACT_HANG;
			if (util_parse_i64(colon + 1, 0, 3600000, &v) < 0)
				goto bad;
			a.arg = (long)v;
		} else if (util_parse_i64(item, 100, 599, &v) == 0) {
			a.kind = ACT_STATUS;
			a.status = (int)v;
			if (colon) {
				if (util_parse_i64(colon + 1, 0, 86400, &v) < 0)
					goto bad;
				a.arg = (long)v;
			}
		} else {
			goto bad;
		}
		rc = add_action(a, (long)times);
		continue;
bad:
		fprintf(stderr, "faultproxy: --script: bad item '%s'\n", item);
		rc = -1;
	}
	free(copy);
	return rc;
}

struct request {
	struct buf body;
	bool is_post_streams;
};

static size_t collect(char *p, size_t size, size_t n, void *ctx)
{
	(void)size;
	return buf_append(ctx, p, n) == 0 ? n : 0;
}

struct upstream_answer {
	long status;
	struct buf body;
	char retry_after[64];
};

static size_t upstream_header(char *p, size_t size, size_t n, void *ctx)
{
	struct upstream_answer *ua = ctx;

	(void)size;
	if (n > 12 && n < 12 + sizeof(ua->retry_after) && strncasecmp(p, "retry-after:", 12) == 0) {
		size_t s = 12, e = n;

		while (s < e && (p[s] == ' ' || p[s] == '\t'))
			s++;
		while (e > s && (p[e - 1] == '\r' || p[e - 1] == '\n' || p[e - 1] == ' '))
			e--;
		memcpy(ua->retry_after, p + s, e - s);
		ua->retry_after[e - s] = '\0';
	}
	return n;
}

static void copy_header(struct MHD_Connection *conn, struct curl_slist **h, const char *name)
{
	const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
	struct buf line = BUF_INIT(8192);

	if (v && buf_printf(&line, "%s: %s", name, v) == 0) {
		struct curl_slist *n = curl_slist_append(*h, line.data);
		if (n)
			*h = n;
	}
	buf_release(&line);
}

/* Sends the request upstream; fills *ua (status 502 and a message when that fails). */
static void forward(struct MHD_Connection *conn, const char *method, const char *url,
		    const struct buf *body, struct upstream_answer *ua)
{
	struct buf target = BUF_INIT(0);
	struct curl_slist *h = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	CURL *c = curl_easy_init();
	CURLcode cc;

	ua->status = 502;
	ua->body.max = MAX_BODY;
	if (!c || buf_printf(&target, "%s%s", px.upstream, url) < 0) {
		buf_puts(&ua->body, "{\"error\":\"faultproxy: out of memory\"}");
		goto out;
	}
	copy_header(conn, &h, "Content-Type");
	copy_header(conn, &h, "Content-Encoding");
	copy_header(conn, &h, "Authorization");
	h = curl_slist_append(h, "Expect:");
	curl_easy_setopt(c, CURLOPT_URL, target.data);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &ua->body);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, upstream_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, ua);
	if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->len ? body->data : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
	}
	cc = curl_easy_perform(c);
	if (cc != CURLE_OK) {
		buf_reset(&ua->body);
		buf_puts(&ua->body, "{\"error\":");
		buf_put_json_str(&ua->body, errbuf[0] ? errbuf : curl_easy_strerror(cc),
				 strlen(errbuf[0] ? errbuf : curl_easy_strerror(cc)));
		buf_puts(&ua->body, "}");
		ua->status = 502;
	} else {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ua->status);
	}
out:
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	buf_release(&target);
}

/* Counts the body's non-blank lines, decompressing zstd first. -1 when it is not zstd. */
static long count_lines(const struct buf *body, bool zstd)
{
	struct buf plain = BUF_INIT(MAX_BODY);
	const char *p = body->data;
	size_t n = body->len;
	long lines = 0;
	bool blank = true;

	if (zstd) {
		ZSTD_DCtx *dc = ZSTD_createDCtx();
		ZSTD_inBuffer in = { body->data, body->len, 0 };
		size_t ret = 1;

		while (dc && (in.pos < in.size || ret != 0)) {
			ZSTD_outBuffer out;

			if (buf_reserve(&plain, 65536) < 0)
				break;
			out.dst = plain.data + plain.len;
			out.size = 65536;
			out.pos = 0;
			ret = ZSTD_decompressStream(dc, &out, &in);
			if (ZSTD_isError(ret) || (in.pos == in.size && ret != 0 && out.pos < out.size)) {
				ZSTD_freeDCtx(dc);
				buf_release(&plain);
				return -1;
			}
			plain.len += out.pos;
		}
		ZSTD_freeDCtx(dc);
		p = plain.data;
		n = plain.len;
	}
	for (size_t i = 0; i <= n; i++) {
		if (i == n || p[i] == '\n') {
			lines += !blank;
			blank = true;
		} else if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') {
			blank = false;
		}
	}
	buf_release(&plain);
	return lines;
}

static MHD_RESULT respond(struct MHD_Connection *conn, int status, const char *body, size_t len,
			  const char *retry_after)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
								 MHD_RESPMEM_MUST_COPY);
	MHD_RESULT ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	if (retry_after && *retry_after)
		MHD_add_response_header(r, "Retry-After", retry_after);
	ret = MHD_queue_response(conn, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static MHD_RESULT handle(void *cls, struct MHD_Connection *conn, const char *url,
			 const char *method, const char *version, const char *upload,
			 size_t *upload_size, void **con_cls)
{
	struct request *rq = *con_cls;
	struct action a = { ACT_PASS, 0, -1 };
	struct upstream_answer ua = { 0, BUF_INIT(MAX_BODY), "" };
	const char *enc, *type;
	char ra[64] = "", what[64];
	unsigned long n;
	MHD_RESULT ret;

	(void)cls;
	(void)version;
	if (!rq) {
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		rq->body.max = MAX_BODY;
		rq->is_post_streams = strcmp(method, "POST") == 0 && strcmp(url, "/api/v1/streams") == 0;
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_size) {
		if (buf_append(&rq->body, upload, *upload_size) < 0)
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}

	pthread_mutex_lock(&px.lock);
	n = ++px.nreq;
	if (rq->is_post_streams && px.next < px.nacts)
		a = px.acts[px.next++];
	pthread_mutex_unlock(&px.lock);

	enc = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Encoding");
	type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
	switch (a.kind) {
	case ACT_DROP: snprintf(what, sizeof(what), "drop"); break;
	case ACT_STATUS: snprintf(what, sizeof(what), "%d", a.status); break;
	case ACT_HANG: snprintf(what, sizeof(what), "hang:%ld", a.arg); break;
	default: snprintf(what, sizeof(what), "pass"); break;
	}
	if (a.kind == ACT_HANG)
		sleep_ms(a.arg);

	if (a.kind == ACT_DROP) {
		ret = MHD_NO;  /* MHD closes the connection without a response */
	} else if (a.kind == ACT_STATUS) {
		char body[96];
		int len = snprintf(body, sizeof(body), "{\"error\":\"faultproxy: injected %d\"}", a.status);

		if (a.arg >= 0)
			snprintf(ra, sizeof(ra), "%ld", a.arg);
		ua.status = a.status;
		ret = respond(conn, a.status, body, (size_t)len, ra);
	} else if (px.upstream) {
		forward(conn, method, url, &rq->body, &ua);
		snprintf(ra, sizeof(ra), "%s", ua.retry_after);
		ret = respond(conn, (int)ua.status, ua.body.len ? ua.body.data : "", ua.body.len, ra);
	} else if (!rq->is_post_streams) {
		static const char nf[] = "{\"error\":\"faultproxy: no upstream\"}";

		ua.status = 404;
		ret = respond(conn, 404, nf, sizeof(nf) - 1, NULL);
	} else if (px.answer) {
		ua.status = 200;
		ret = respond(conn, 200, px.answer, strlen(px.answer), NULL);
	} else {
		long lines = count_lines(&rq->body, enc && strcasecmp(enc, "zstd") == 0);

		if (lines < 0) {
			ua.status = 400;
			buf_puts(&ua.body, "{\"error\":\"faultproxy: bad zstd data\"}");
		} else {
			ua.status = 200;
			buf_printf(&ua.body, "{\"accepted\":%ld,\"duplicates\":0,\"rejected\":[]}", lines);
		}
		ret = respond(conn, (int)ua.status, ua.body.data, ua.body.len, NULL);
	}

	pthread_mutex_lock(&px.lock);
	fprintf(px.log,
		"faultproxy: n=%lu method=%s path=%s encoding=%s type=%s bytes=%zu action=%s "
		"retry_after=%s status=%ld\n",
		n, method, url, enc ? enc : "-", type ? type : "-", rq->body.len, what, ra[0] ? ra : "-",
		a.kind == ACT_DROP ? 0L : ua.status);
	fflush(px.log);
	pthread_mutex_unlock(&px.lock);
	buf_release(&ua.body);
	return ret;
}

static void done(void *cls, struct MHD_Connection *conn, void **con_cls,
		 enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (rq) {
		buf_release(&rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	pthread_mutex_lock(&px.lock);
	fputs("faultproxy: mhd: ", px.log);
	vfprintf(px.log, fmt, ap);
	fflush(px.log);
	pthread_mutex_unlock(&px.lock);
}

static int parse_listen(const char *s, struct sockaddr_in *sa)
{
	const char *colon = strrchr(s, ':');
	char host[64];
	int64_t port;

	if (!colon || (size_t)(colon - s) >= sizeof(host) ||
	    util_parse_i64(colon + 1, 0, 65535, &port) < 0)
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "upstream", required_argument, NULL, 'u' },
		{ "script", required_argument, NULL, 's' },
		{ "answer", required_argument, NULL, 'a' },
		{ "log", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen = "127.0.0.1:0", *upstream = "none", *script = "", *logpath = NULL;
	struct sockaddr_in sa;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	sigset_t set;
	int o, sig;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'l': listen = optarg; break;
		case 'u': upstream = optarg; break;
		case 's': script = optarg; break;
		case 'a': px.answer = optarg; break;
		case 'L': logpath = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "faultproxy: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (parse_listen(listen, &sa) < 0) {
		fprintf(stderr, "faultproxy: --listen '%s': want IPV4:PORT\n", listen);
		return 2;
	}
	if (parse_script(script) < 0)
		return 2;
	if (strcmp(upstream, "none") != 0) {
		size_t n = strlen(upstream);

		if (strncmp(upstream, "http://", 7) != 0 && strncmp(upstream, "https://", 8) != 0) {
			fprintf(stderr, "faultproxy: --upstream '%s': want http://HOST:PORT or none\n",
				upstream);
			return 2;
		}
		while (n && upstream[n - 1] == '/')
			n--;
		px.upstream = strndup(upstream, n);
	}
	px.log = logpath ? fopen(logpath, "a") : stderr;
	if (!px.log) {
		fprintf(stderr, "faultproxy: --log %s: %s\n", logpath, strerror(errno));
		return 1;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);

	/* block the stop signals in every thread; the main thread waits for them */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
			     MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, NULL,
			     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,  /* first, to catch all */
			     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
			     MHD_OPTION_NOTIFY_COMPLETED, done, NULL,
			     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "faultproxy: cannot listen on %s\n", listen);
		return 1;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("%u\n", info ? (unsigned)info->port : 0u);
	fflush(stdout);

	sigwait(&set, &sig);
	MHD_stop_daemon(d);
	curl_global_cleanup();
	if (px.log != stderr)
		fclose(px.log);
	free(px.acts);
	free((char *)px.upstream);
	return 0;
}
