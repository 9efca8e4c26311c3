/* conns: connection admission, deadlines and shedding for the HTTP servers (see conns.h). */
#include "common/conns.h"
#include "common/imap.h"
#include "common/log.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SWEEP_MS 100           /* how often deadlines are checked: their resolution */
#define REPORT_S 60            /* a log line of what was shed, at most this often */
#define NO_SLOT UINT32_MAX
#define LINGER_MAX 32          /* closes drained at once; past them a close is immediate */
#define LINGER_MS 2000         /* how long a closed connection's input is drained */
#define MAX_THREADS 260        /* libmicrohttpd threads told apart: sm-web's pool has at most 256 */
#define BODY_MIN_AGE_MS 1000   /* a body window younger than this is not judged slow yet */

enum phase { PH_FREE, PH_HEAD, PH_BODY, PH_HELD, PH_IDLE };

struct slot {
	struct MHD_Connection *mc;
	int fd;
	uint64_t ip;                  /* address key (addr_key) */
	enum phase ph;
	bool shed;                    /* shut down by us; no longer counted against the limits */
	bool reserve;                 /* admitted into the reserve: reserved paths only */
	bool early;                   /* answered with its request's body not all in: it lingers */
	int64_t since_ms;             /* head: accept or request line; idle: the last completion */
	uint64_t since_seq;           /* ... and that moment's place among all such moments */
	uint64_t body;                /* body bytes of the current request */
	uint64_t win_body;            /* body at the window's start */
	int64_t win_ms;
	uint32_t next_free;
	uint16_t owner;               /* the libmicrohttpd thread that serves it (threads[]) */
	int64_t paused_base;          /* the owner's paused_ms when since_ms or win_ms was set */
};

/* A libmicrohttpd thread. While it runs a handler, its other connections wait for it, not for
 * their clients: their clocks stop (paused_ms counts the time), and they never give way. The
 * owner of a connection is the thread that accepted it: with libmicrohttpd's internal thread or
 * its pool (not thread-per-connection, which the servers do not use) it serves it to the end. */
struct thread {
	pthread_t id;
	bool busy;                    /* in a handler since busy_since */
	int64_t busy_since;
	int64_t paused_ms;            /* time spent in handlers, all told */
};

struct conns {
	struct conns_config cfg;
	MHD_AccessHandlerCallback handler;
	void *handler_cls;
	MHD_RequestCompletedCallback done;
	void *done_cls;

	pthread_mutex_t lock;
	struct slot *slots;
	uint32_t nslots, free_head;
	struct imap per_ip;           /* address key -> live connections */
	unsigned live;                /* connections not shed */
	uint64_t accepted;
	uint64_t seq;                 /* since_seq's last */
	uint64_t closed[CONNS_NREASONS];
	struct thread threads[MAX_THREADS];
	unsigned nthreads;

	/* connections answered before their request was all read (a refused token, a body too
	 * large): their input is drained a while before they are closed, since a close with unread
	 * input sends a reset, which may destroy the answer before the client reads it (RFC 9112,
	 * 9.6) */
	struct {
		int fd;               /* a duplicate: libmicrohttpd closes its own */
		int64_t until_ms;
	} linger[LINGER_MAX];
	unsigned nlinger;
	uint64_t lingered;

	pthread_t sweeper;
	pthread_cond_t wake;
	bool stop;
};

static const char *const reason_names[CONNS_NREASONS] = {
	"header_timeout", "idle_timeout", "body_too_slow", "gave_way_full", "gave_way_per_ip",
	"refused_full", "refused_per_ip", "reserve_other_path",
};

static int64_t now_ms(void)
{
	return util_now_mono_ns() / 1000000;
}

/* An IPv4 address (also when mapped into IPv6) or an IPv6 /64: one host's share. */
static uint64_t addr_key(const struct sockaddr *sa)
{
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET)
		return (uint64_t)0xffff << 32 | ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		uint64_t k = 0;

		if (IN6_IS_ADDR_V4MAPPED(a))
			return (uint64_t)0xffff << 32 | (uint64_t)a->s6_addr[12] << 24 |
			       (uint64_t)a->s6_addr[13] << 16 | (uint64_t)a->s6_addr[14] << 8 | a->s6_addr[15];
		for (int i = 0; i < 8; i++)
			k = k << 8 | a->s6_addr[i];
		return k == IMAP_EMPTY ? k - 1 : k;
	}
	return 0;
}

static uint64_t ip_count(const struct conns *c, uint64_t ip)
{
	uint64_t n = 0;

	imap_get(&c->per_ip, ip, &n);
	return n;
}

/* In place: a decrement must not fail (imap_put may want to grow). */
static void ip_sub(struct conns *c, uint64_t ip)
{
	size_t i = imap_find(&c->per_ip, ip);

	if (i == SIZE_MAX)
		return;
	if (c->per_ip.vals[i] <= 1)
		imap_del(&c->per_ip, ip);
	else
		c->per_ip.vals[i]--;
}

/* The calling thread's entry, registered on first sight. Under the lock. */
static uint16_t this_thread(struct conns *c)
{
	pthread_t me = pthread_self();

	for (unsigned i = 0; i < c->nthreads; i++)
		if (pthread_equal(c->threads[i].id, me))
			return (uint16_t)i;
	if (c->nthreads == MAX_THREADS)
		return MAX_THREADS - 1;
	c->threads[c->nthreads].id = me;
	c->threads[c->nthreads].busy = false;
	c->threads[c->nthreads].paused_ms = 0;
	return (uint16_t)c->nthreads++;
}

static bool owner_busy(const struct conns *c, const struct slot *s)
{
	return c->threads[s->owner].busy;
}

/* Starts one of s's clocks (since_ms or win_ms) at now. */
static void clock_start(const struct conns *c, struct slot *s, int64_t *clock, int64_t now)
{
	*clock = now;
	s->paused_base = c->threads[s->owner].paused_ms;
}

/* s's since_ms from now. A burst of connections accepted in one loop shares a millisecond: among
 * them the first accepted is the oldest, not the one in the lowest slot (which may be the newest,
 * a client's request about to be read behind a flood from its own address). */
static void since_start(struct conns *c, struct slot *s, int64_t now)
{
	clock_start(c, s, &s->since_ms, now);
	s->since_seq = ++c->seq;
}

/* The milliseconds since t0 that s's thread was free to serve it. */
static int64_t waited_ms(const struct conns *c, const struct slot *s, int64_t t0, int64_t now)
{
	return now - t0 - (c->threads[s->owner].paused_ms - s->paused_base);
}

/* Closes s's connection for reason: libmicrohttpd sees the shutdown at its next poll and cleans up
 * (the slot lives until the closed notification, so the descriptor is still s's). Under the lock. */
static void shed(struct conns *c, struct slot *s, enum conns_reason reason)
{
	if (s->shed)
		return;
	shutdown(s->fd, SHUT_RDWR);
	s->shed = true;
	c->live--;
	ip_sub(c, s->ip);
	c->closed[reason]++;
}

/* Body bytes a second in the current window. */
static uint64_t body_rate(const struct conns *c, const struct slot *s, int64_t now)
{
	int64_t ms = waited_ms(c, s, s->win_ms, now);

	return (s->body - s->win_body) * 1000 / (uint64_t)(ms > 0 ? ms : 1);
}

/* The connection that gives way (only ip's when only_ip, never skip), or NULL: the oldest idle,
 * else the oldest still in its headers, else the slowest body; of equals, the one whose since_ms
 * was set first (accept, request line or last completion). Under the lock. */
static struct slot *pick_victim(struct conns *c, bool only_ip, uint64_t ip, const struct slot *skip, int64_t now)
{
	struct slot *best = NULL;
	int best_rank = 3;
	int64_t best_key = 0;
	uint64_t best_seq = 0;

	for (uint32_t i = 0; i < c->nslots; i++) {
		struct slot *s = &c->slots[i];
		int rank;
		int64_t key;

		if (s == skip || s->shed || (only_ip && s->ip != ip) || owner_busy(c, s))
			continue;
		switch (s->ph) {
		case PH_IDLE: rank = 0; key = -waited_ms(c, s, s->since_ms, now); break;
		case PH_HEAD: rank = 1; key = -waited_ms(c, s, s->since_ms, now); break;
		case PH_BODY:
			if (waited_ms(c, s, s->win_ms, now) < BODY_MIN_AGE_MS)
				continue;
			rank = 2;
			key = (int64_t)body_rate(c, s, now);
			break;
		default: continue;
		}
		if (rank < best_rank ||
		    (rank == best_rank && (key < best_key || (key == best_key && s->since_seq < best_seq)))) {
			best = s;
			best_rank = rank;
			best_key = key;
			best_seq = s->since_seq;
		}
	}
	return best;
}

static struct slot *slot_of(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static void admit(struct conns *c, struct slot *s)
{
	int64_t now = now_ms();
	uint64_t n;

	c->accepted++;
	c->live++;
	n = ip_count(c, s->ip);
	if (imap_put(&c->per_ip, s->ip, n + 1) < 0) {
		c->live--;   /* without its count it could not be undone right: refuse it */
		s->shed = true;
		shutdown(s->fd, SHUT_RDWR);
		c->closed[CONNS_REFUSED_FULL]++;
		return;
	}
	if (c->cfg.max_per_ip && n >= c->cfg.max_per_ip) {
		struct slot *v = pick_victim(c, true, s->ip, s, now);

		if (!v) {
			shed(c, s, CONNS_REFUSED_PER_IP);
			return;
		}
		shed(c, v, CONNS_GAVE_WAY_PER_IP);
	}
	if (c->live > c->cfg.max_connections) {
		struct slot *v = pick_victim(c, false, 0, s, now);

		if (v)
			shed(c, v, CONNS_GAVE_WAY_FULL);
		else if (c->live <= c->cfg.max_connections + c->cfg.reserve)
			s->reserve = true;
		else
			shed(c, s, CONNS_REFUSED_FULL);
	}
}

/* A connection libmicrohttpd is closing (under c->lock; libmicrohttpd has shut its writing side
 * already, and closes its descriptor after this): when input is still waiting, or may still come
 * (early: its request was answered before its body was all in), a duplicate keeps the socket open,
 * so that neither the close nor the input that arrives after it makes the kernel send a reset, and
 * the rest is read and dropped, LINGER_MS at most. */
static void linger_start(struct conns *c, int fd, bool early)
{
	char b;
	int dup;

	if (c->nlinger >= LINGER_MAX || (!early && recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != 1))
		return;
	if ((dup = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return;
	shutdown(dup, SHUT_WR);
	c->linger[c->nlinger].fd = dup;
	c->linger[c->nlinger].until_ms = now_ms() + LINGER_MS;
	c->nlinger++;
	c->lingered++;
}

/* Drains the lingering connections; closes those the client closed, or past their time. */
static void linger_sweep(struct conns *c, int64_t now)
{
	static char sink[65536];   /* only the sweeper reads into it */

	for (unsigned i = 0; i < c->nlinger;) {
		ssize_t n = 0;
		int k = 0;

		/* a client still sending past its answer gets a bounded share of each sweep (640 KB/s):
		 * 32 of them cost the sweep, which holds the lock, 2 MB of copying at most */
		while (k++ < 1 && (n = recv(c->linger[i].fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
			;
		if (now < c->linger[i].until_ms && (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))) {
			i++;
			continue;
		}
		close(c->linger[i].fd);   /* the client closed, or its time is up */
		c->linger[i] = c->linger[--c->nlinger];
	}
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct conns *c = cls;
	struct slot *s;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fd = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *ad = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

		*socket_context = NULL;
		if (!fd)
			return;
		pthread_mutex_lock(&c->lock);
		if (c->free_head == NO_SLOT) {
			/* cannot happen while libmicrohttpd's limit is the slots' number */
			shutdown(fd->connect_fd, SHUT_RDWR);
			c->closed[CONNS_REFUSED_FULL]++;
			pthread_mutex_unlock(&c->lock);
			return;
		}
		s = &c->slots[c->free_head];
		c->free_head = s->next_free;
		memset(s, 0, sizeof(*s));
		s->mc = mc;
		s->fd = fd->connect_fd;
		s->ip = addr_key(ad ? ad->client_addr : NULL);
		s->ph = PH_HEAD;
		s->owner = this_thread(c);
		since_start(c, s, now_ms());
		admit(c, s);
		*socket_context = s;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	s = *socket_context;
	if (!s)
		return;
	pthread_mutex_lock(&c->lock);
	if (!s->shed) {
		c->live--;
		ip_sub(c, s->ip);
		linger_start(c, s->fd, s->early);
	}
	s->ph = PH_FREE;
	s->mc = NULL;
	s->next_free = c->free_head;
	c->free_head = (uint32_t)(s - c->slots);
	pthread_mutex_unlock(&c->lock);
	*socket_context = NULL;
}

static bool reserved_path(const struct conns *c, const char *uri)
{
	size_t n = strcspn(uri, "?#");

	for (const char *const *p = c->cfg.reserved_paths; p && *p; p++)
		if (strlen(*p) == n && memcmp(*p, uri, n) == 0)
			return true;
	return false;
}

/* The request line has arrived: a kept-alive connection's headers are timed from now. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *mc)
{
	struct conns *c = cls;
	struct slot *s = slot_of(mc);

	if (!s)
		return NULL;
	pthread_mutex_lock(&c->lock);
	if (s->ph == PH_IDLE) {
		s->ph = PH_HEAD;
		since_start(c, s, now_ms());
	}
	s->early = false;   /* a kept-alive connection's next request */
	if (s->reserve && !reserved_path(c, uri ? uri : ""))
		shed(c, s, CONNS_RESERVE_OTHER_PATH);
	pthread_mutex_unlock(&c->lock);
	return NULL;   /* the handler's first call must still see a NULL request pointer */
}

/* Whether the body of mc's request, body bytes of it handed to the handler so far (upload: in this
 * call), is not all in: a declared length not reached, or chunks not ended (libmicrohttpd's last
 * call of a body has no data, and one with no body at all could not tell: taken as not in). */
static bool body_pending(struct MHD_Connection *mc, uint64_t body, size_t upload)
{
	const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

	if (MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return upload > 0 || body == 0;
	return cl && body < util_digits_u64(&cl);
}

/* The calling thread's handler call is over: its connections' clocks go on. Under the lock. */
static void thread_done(struct conns *c, uint16_t t, int64_t now)
{
	c->threads[t].busy = false;
	c->threads[t].paused_ms += now - c->threads[t].busy_since;
}

enum MHD_Result conns_access(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
			     const char *version, const char *upload, size_t *upload_size, void **req_cls)
{
	struct conns *c = cls;
	struct slot *s = slot_of(mc);
	enum MHD_Result ret;
	size_t upload_in = *upload_size;
	uint16_t t;

	pthread_mutex_lock(&c->lock);
	/* what libmicrohttpd had read before the connection was shut is not served */
	if (s && s->shed) {
		pthread_mutex_unlock(&c->lock);
		return MHD_NO;
	}
	t = this_thread(c);
	c->threads[t].busy = true;
	c->threads[t].busy_since = now_ms();
	if (s) {
		int64_t now = c->threads[t].busy_since;

		if (s->owner != t) {   /* not with the servers' threading; kept consistent anyway */
			s->owner = t;
			s->paused_base = c->threads[t].paused_ms;
		}
		if (s->ph == PH_HEAD || s->ph == PH_IDLE) {
			s->body = s->win_body = 0;
			s->early = false;
			clock_start(c, s, &s->win_ms, now);
		} else if (s->ph == PH_HELD && !*upload_size) {
			/* back from a suspension: the client was not the one waiting */
			clock_start(c, s, &s->win_ms, now);
			s->win_body = s->body;
		}
		s->body += *upload_size;
		s->ph = PH_HELD;
	}
	pthread_mutex_unlock(&c->lock);
	ret = c->handler(c->handler_cls, mc, url, method, version, upload, upload_size, req_cls);
	{
		const union MHD_ConnectionInfo *st = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_HTTP_STATUS);
		const union MHD_ConnectionInfo *su =
			MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_SUSPENDED);
		bool answered = st && st->http_status != 0, suspended = su && su->suspended == MHD_YES;
		/* (read outside the lock: the headers are the connection's thread's, as s->body is) */
		bool early = s && answered && !suspended && body_pending(mc, s->body, upload_in);

		pthread_mutex_lock(&c->lock);
		thread_done(c, t, now_ms());
		if (s) {
			s->ph = answered || suspended ? PH_HELD : PH_BODY;
			s->early |= early;
		}
		pthread_mutex_unlock(&c->lock);
	}
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls, enum MHD_RequestTerminationCode toe)
{
	struct conns *c = cls;
	struct slot *s = slot_of(mc);

	if (s) {
		pthread_mutex_lock(&c->lock);
		s->ph = PH_IDLE;
		since_start(c, s, now_ms());
		pthread_mutex_unlock(&c->lock);
	}
	if (c->done)
		c->done(c->done_cls, mc, req_cls, toe);
}

/* ---- the deadlines ---- */

static void sweep(struct conns *c, int64_t now)
{
	int64_t head = (int64_t)c->cfg.header_timeout_s * 1000, idle = (int64_t)c->cfg.idle_timeout_s * 1000;
	int64_t win = CONNS_BODY_WINDOW_S * 1000;

	for (uint32_t i = 0; i < c->nslots; i++) {
		struct slot *s = &c->slots[i];

		if (s->shed || s->ph == PH_FREE || owner_busy(c, s))
			continue;
		if (s->ph == PH_HEAD && head && waited_ms(c, s, s->since_ms, now) > head) {
			shed(c, s, CONNS_HEADER_TIMEOUT);
		} else if (s->ph == PH_IDLE && idle && waited_ms(c, s, s->since_ms, now) > idle) {
			shed(c, s, CONNS_IDLE_TIMEOUT);
		} else if (s->ph == PH_BODY && c->cfg.body_min_rate && waited_ms(c, s, s->win_ms, now) >= win) {
			if (s->body - s->win_body < (uint64_t)c->cfg.body_min_rate * CONNS_BODY_WINDOW_S) {
				shed(c, s, CONNS_BODY_TOO_SLOW);
			} else {
				clock_start(c, s, &s->win_ms, now);
				s->win_body = s->body;
			}
		}
	}
}

/* Logs what was shed since the last report; whether there was anything. */
static bool report(struct conns *c, uint64_t *last)
{
	char line[512];
	size_t n = 0;
	bool any = false;

	for (int r = 0; r < CONNS_NREASONS; r++) {
		uint64_t d = c->closed[r] - last[r];

		if (d && n < sizeof(line)) {
			int k = snprintf(line + n, sizeof(line) - n, "%s%s=%llu", n ? " " : "", reason_names[r],
					 (unsigned long long)d);
			n += k > 0 ? (size_t)k : 0;
			any = true;
		}
		last[r] = c->closed[r];
	}
	if (any)
		log_warn("connections shed by the limits", "%s open=%u", line, c->live);
	return any;
}

static void *sweeper_main(void *p)
{
	struct conns *c = p;
	uint64_t last[CONNS_NREASONS] = { 0 };
	int64_t next_report = 0;   /* the first shedding is reported at once, then once a minute */

	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		struct timespec ts;
		int64_t now;

		ts = util_clock_after(CLOCK_MONOTONIC, SWEEP_MS);
		pthread_cond_timedwait(&c->wake, &c->lock, &ts);
		if (c->stop)
			break;
		now = now_ms();
		sweep(c, now);
		linger_sweep(c, now);
		if (now >= next_report && report(c, last))
			next_report = now + REPORT_S * 1000;
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- set-up ---- */

/* Enough descriptors for every connection: the soft limit raised towards the hard one. */
static int raise_fd_limit(rlim_t conns, rlim_t others, char *err, size_t errlen)
{
	rlim_t want = conns + others;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return 0;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want) {
		snprintf(err, errlen, "--max-connections: %llu connections and %llu other files need %llu file"
			 " descriptors, the limit is %llu (ulimit -n)", (unsigned long long)conns,
			 (unsigned long long)others, (unsigned long long)want, (unsigned long long)rl.rlim_cur);
		return -1;
	}
	return 0;
}

struct conns *conns_open(const struct conns_config *cfg, MHD_AccessHandlerCallback handler, void *handler_cls,
			 MHD_RequestCompletedCallback done, void *done_cls, char *err, size_t errlen)
{
	struct conns *c;
	pthread_condattr_t ca;

	if (!cfg->max_connections || cfg->max_connections > CONNS_MAX || cfg->reserve > 1000) {
		snprintf(err, errlen, "--max-connections: from 1 to %d", CONNS_MAX);
		return NULL;
	}
	if (raise_fd_limit((rlim_t)cfg->max_connections + cfg->reserve, (rlim_t)cfg->other_fds + 64 + LINGER_MAX, err, errlen) < 0)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->cfg = *cfg;
	c->handler = handler;
	c->handler_cls = handler_cls;
	c->done = done;
	c->done_cls = done_cls;
	c->nslots = cfg->max_connections + cfg->reserve;
	c->slots = calloc(c->nslots, sizeof(*c->slots));
	c->per_ip = (struct imap)IMAP_INIT;
	if (!c->slots || imap_reserve(&c->per_ip, 64) < 0) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	for (uint32_t i = 0; i < c->nslots; i++)
		c->slots[i].next_free = i + 1 < c->nslots ? i + 1 : NO_SLOT;
	c->free_head = 0;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&c->sweeper, NULL, sweeper_main, c) != 0) {
		snprintf(err, errlen, "cannot start the connection sweeper thread");
		goto out_sync;
	}
	return c;

out_sync:
	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
out_free:
	imap_free(&c->per_ip);
	free(c->slots);
	free(c);
	return NULL;
}

void conns_free(struct conns *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->sweeper, NULL);
	for (unsigned i = 0; i < c->nlinger; i++)
		close(c->linger[i].fd);
	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
	imap_free(&c->per_ip);
	free(c->slots);
	free(c);
}

void conns_options(struct conns *c, struct MHD_OptionItem *opts)
{
	opts[0] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, (intptr_t)c->nslots, NULL };
	opts[1] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, c };
	opts[2] = (struct MHD_OptionItem){ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_request_line, c };
	opts[3] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, c };
	/* the backstop for a client that stops reading its response */
	opts[4] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)c->cfg.idle_timeout_s, NULL };
	opts[5] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
}

struct conns_stats {
	uint64_t accepted;
	uint64_t closed[CONNS_NREASONS];
	unsigned open;                /* counted against the limits (shed ones excluded) */
	unsigned addresses;           /* distinct addresses among them */
	unsigned top_address;         /* the most connections one address holds */
	uint64_t lingered;            /* closes whose input was drained first */
};

static void conns_stats(struct conns *c, struct conns_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&c->lock);
	st->accepted = c->accepted;
	st->lingered = c->lingered;
	memcpy(st->closed, c->closed, sizeof(st->closed));
	st->open = c->live;
	st->addresses = (unsigned)c->per_ip.cnt;
	for (size_t i = 0; i < c->per_ip.cap; i++)
		if (c->per_ip.keys[i] != IMAP_EMPTY && c->per_ip.vals[i] > st->top_address)
			st->top_address = (unsigned)c->per_ip.vals[i];
	pthread_mutex_unlock(&c->lock);
}

int conns_render(struct conns *c, struct buf *b)
{
	struct conns_stats st;
	const char *p = c->cfg.metrics_prefix;
	int rc = 0;

	conns_stats(c, &st);
	rc |= buf_printf(b,
		"# HELP %s_connections_open HTTP connections open (those being shed excluded).\n"
		"# TYPE %s_connections_open gauge\n%s_connections_open %u\n"
		"# HELP %s_connections_limit The connection limits: in all, reserve for /healthz and /metrics,"
		" per address.\n"
		"# TYPE %s_connections_limit gauge\n"
		"%s_connections_limit{kind=\"total\"} %u\n%s_connections_limit{kind=\"reserve\"} %u\n"
		"%s_connections_limit{kind=\"per_ip\"} %u\n"
		"# HELP %s_connections_addresses Distinct client addresses (IPv6: /64) with connections open.\n"
		"# TYPE %s_connections_addresses gauge\n%s_connections_addresses %u\n"
		"# HELP %s_connections_top_address The most connections one address holds.\n"
		"# TYPE %s_connections_top_address gauge\n%s_connections_top_address %u\n"
		"# HELP %s_connections_accepted_total Connections accepted.\n"
		"# TYPE %s_connections_accepted_total counter\n%s_connections_accepted_total %llu\n"
		"# HELP %s_connections_shed_total Connections closed by the limits, by reason.\n"
		"# TYPE %s_connections_shed_total counter\n",
		p, p, p, st.open, p, p, p, c->cfg.max_connections, p, c->cfg.reserve, p, c->cfg.max_per_ip,
		p, p, p, st.addresses, p, p, p, st.top_address, p, p, p, (unsigned long long)st.accepted, p, p);
	for (int r = 0; r < CONNS_NREASONS; r++)
		rc |= buf_printf(b, "%s_connections_shed_total{reason=\"%s\"} %llu\n", p, reason_names[r],
				 (unsigned long long)st.closed[r]);
	rc |= buf_printf(b, "# HELP %s_connections_lingered_total Connections answered before their request was"
			 " read whole, whose input was drained before the close.\n"
			 "# TYPE %s_connections_lingered_total counter\n%s_connections_lingered_total %llu\n",
			 p, p, p, (unsigned long long)st.lingered);
	return rc < 0 || buf_error(b) ? -1 : 0;
}
