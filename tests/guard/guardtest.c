/*
 * guardtest: small servers with known slow paths, for the guard agent's
 * tests; an unmodified program as far as the agent knows (no stackmine code,
 * built without sanitizers, its static functions stripped of their names in
 * the -stripped copy).
 *
 *   guardtest epoll PORT              one thread, an epoll loop
 *   guardtest pool PORT WORKERS [sweep]
 *                                     a listener thread feeding a worker pool
 *                                     through a queue (mutex + condition); with
 *                                     "sweep", also a background thread that
 *                                     sleeps as jemalloc's does (below)
 *   guardtest proxy PORT UPORT        one thread, an epoll loop that forwards "up MS"
 *                                     to the server on UPORT as "sleep MS" over a
 *                                     non-blocking connection of its own, and
 *                                     answers when the reply comes, in a later
 *                                     iteration (nginx's proxy_pass); "up" alone
 *                                     forwards "fast"; other requests are served
 *                                     at once
 *   guardtest client PORT N CONC MIX  N requests over CONC connections; MIX is
 *                                     KIND:WEIGHT,... ; prints each kind's count
 *                                     and slowest answer (microseconds)
 *
 * Requests are one line each, answered with "ok\n":
 *   fast          answer at once
 *   file          read a small file first (another unit type)
 *   files N MS    read it N times, then sleep MS (0: none): units of many calls
 *   sleep MS      nanosleep(MS) in handle_sleep()       (a wait)
 *   spin MS       burn CPU for MS in spin_cpu()         (run events)
 *   cpu MS        burn MS of this thread's CPU time in cpu_work(): a fixed
 *                 amount of work, slower only when the thread waits for a CPU
 *   stall MS      cpu MS, then a 2 s sleep in handle_sleep(): a unit still in flight
 *                 (in a wrapped call) long after it waited for a CPU
 *   convoy MS     (pool) lock a mutex that the holder thread keeps for MS
 *                 while it sleeps in holder_work(): the worker's wait has the
 *                 holder as its readier
 *   tmo MS        wait MS on a condition that times out, in timed_out_wait(); another
 *                 thread signalled it just before (nobody waiting): the wait has no readier
 *   idle MS       (pool sweep) the sweeper's next sleep has no timeout; a thread
 *                 of its own wakes it MS later
 *   sigign SIG    ignore signal SIG (SIG_IGN); sigdfl SIG: its default action again
 *   rawsleep MS   a nanosleep system call of MS that the agent does not wrap (syscall());
 *                 cut short, it says so on stderr
 *   unload        dlopen() a library and dlclose() it (the agent's walks go the slow way after)
 *   fork          fork() a child that exits at once, and wait for it
 *   sigfork       the same from a signal handler of the program's (SIGUSR2, raised)
 *   sigfork1      the same from a one-shot handler (SA_RESETHAND), which leaves SIG_DFL with
 *                 the flags it was given
 *   earlysig      the same from the SIGUSR1 handler of libearlysig.so (preloaded), which its
 *                 constructor set before the agent started; sigaction() must report it
 *   sigjmp        leave a signal handler of the program's (SIGUSR2, raised) by siglongjmp
 *   quit          stop the server
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXC 1024

static volatile int stop;
static volatile unsigned long sink;

static void ms_sleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

__attribute__((noinline)) void handle_sleep(long ms)
{
	ms_sleep(ms);
}

/* A sleep the agent does not wrap (the system call itself): nothing may cut it short. */
__attribute__((noinline)) void raw_sleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	if (syscall(SYS_nanosleep, &ts, NULL) != 0)
		fprintf(stderr, "rawsleep: cut short: %s\n", strerror(errno));
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* static and named in .symtab only: the stripped copy must not give it a neighbour's name */
__attribute__((noinline)) static unsigned long spin_inner(unsigned long x)
{
	for (int i = 0; i < 1000; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

__attribute__((noinline)) void spin_cpu(long ms)
{
	long end = now_ms() + ms;
	unsigned long x = 1;

	while (now_ms() < end)
		x = spin_inner(x);
	sink = x;
}

static long thread_cpu_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

__attribute__((noinline)) void cpu_work(long ms)
{
	long end = thread_cpu_us() + ms * 1000;
	unsigned long x = 1;

	while (thread_cpu_us() < end)
		x = spin_inner(x);
	sink = x;
	/* a wrapped call inside the work: the agent takes the violation's stack here, in cpu_work() */
	poll(NULL, 0, 0);
}

__attribute__((noinline)) void read_file(void)
{
	char buf[256];
	int fd = open("/proc/self/stat", O_RDONLY);

	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf)) < 0)
			sink++;
		close(fd);
	}
}

/* ---- the lock convoy ---- */

static pthread_mutex_t big = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t hmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hcv = PTHREAD_COND_INITIALIZER;
static long hold_ms;
static int holding;

__attribute__((noinline)) void holder_work(long ms)
{
	ms_sleep(ms);
}

static void *holder_main(void *arg)
{
	(void)arg;
	/* named, for the streams' thread names (test_guard.sh) */
	pthread_setname_np(pthread_self(), "gt-holder");
	for (;;) {
		long ms;

		pthread_mutex_lock(&hmu);
		while (!hold_ms && !stop)
			pthread_cond_wait(&hcv, &hmu);
		ms = hold_ms;
		hold_ms = 0;
		pthread_mutex_unlock(&hmu);
		if (stop)
			return NULL;
		pthread_mutex_lock(&big);
		pthread_mutex_lock(&hmu);
		holding = 1;
		pthread_cond_broadcast(&hcv);
		pthread_mutex_unlock(&hmu);
		holder_work(ms);
		pthread_mutex_unlock(&big);
	}
}

/* ---- a timed wait that times out ---- */

static pthread_mutex_t tmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tcv = PTHREAD_COND_INITIALIZER;

static void *signal_once(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&tmu);
	pthread_cond_signal(&tcv);
	pthread_mutex_unlock(&tmu);
	return NULL;
}

/* A condition wait's deadline, ms from now. */
static struct timespec deadline_in(long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

__attribute__((noinline)) void timed_out_wait(long ms)
{
	pthread_t th;
	struct timespec ts;

	/* the condition's last release: another thread's, before the wait starts */
	if (pthread_create(&th, NULL, signal_once, NULL) == 0)
		pthread_join(th, NULL);
	/* the deadline as close to the wait as can be: the wait event's duration is ms less the time
	 * from here to the wrapper's entry (a preemption on a busy machine) */
	pthread_mutex_lock(&tmu);
	ts = deadline_in(ms);
	while (pthread_cond_timedwait(&tcv, &tmu, &ts) == 0)
		;
	pthread_mutex_unlock(&tmu);
}

__attribute__((noinline)) void take_big_lock(long ms)
{
	/* the holder takes the lock first, then this thread queues behind it */
	pthread_mutex_lock(&hmu);
	holding = 0;
	hold_ms = ms;
	pthread_cond_broadcast(&hcv);
	while (!holding)
		pthread_cond_wait(&hcv, &hmu);
	pthread_mutex_unlock(&hmu);
	pthread_mutex_lock(&big);
	sink++;
	pthread_mutex_unlock(&big);
}

/* ---- a background thread that sleeps as jemalloc's does ----
 * Every 2 ms it wakes from a timed wait on its condition to do a little work; told it is idle, it
 * waits on the same condition with no timeout, from the same frame, until woken. */

static pthread_mutex_t swmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t swcv = PTHREAD_COND_INITIALIZER;
static int sweep_idle;

__attribute__((noinline)) void sweeper_sleep(int indefinite)
{
	if (indefinite) {
		pthread_cond_wait(&swcv, &swmu);
	} else {
		struct timespec ts = deadline_in(2);

		pthread_cond_timedwait(&swcv, &swmu, &ts);
	}
	sink++;   /* (jemalloc counts its sleeps here: both waits are calls from this frame, not tail calls) */
}

static void *sweeper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&swmu);
	while (!stop) {
		int idle = sweep_idle;

		sweep_idle = 0;
		sweeper_sleep(idle);
		sink++;
	}
	pthread_mutex_unlock(&swmu);
	return NULL;
}

static void *sweep_waker(void *arg)
{
	ms_sleep((long)(intptr_t)arg);
	pthread_mutex_lock(&swmu);
	pthread_cond_signal(&swcv);
	pthread_mutex_unlock(&swmu);
	return NULL;
}

__attribute__((noinline)) void sweep_go_idle(long ms)
{
	pthread_t th;

	pthread_mutex_lock(&swmu);
	sweep_idle = 1;
	pthread_mutex_unlock(&swmu);
	if (pthread_create(&th, NULL, sweep_waker, (void *)(intptr_t)ms) == 0)
		pthread_detach(th);
}

/* ---- requests ---- */

/* fork() a child that exits at once and wait for it: 0, or -1 */
static int fork_wait(void)
{
	int st;
	pid_t p = fork();

	if (p == 0)
		_exit(0);
	return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) ? 0 : -1;
}

static volatile sig_atomic_t sigfork_rc;

static void on_sigfork(int sig)
{
	(void)sig;
	sigfork_rc = fork_wait();
}

static sigjmp_buf sigjmp_env;

static void on_sigjmp(int sig)
{
	(void)sig;
	siglongjmp(sigjmp_env, 1);
}

/* Raises SIGUSR2 with a handler that leaves by siglongjmp: 0 when it did. */
static int sigjmp_out(void)
{
	struct sigaction sa;

	if (sigsetjmp(sigjmp_env, 1))
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigjmp;
	if (sigaction(SIGUSR2, &sa, NULL) < 0)
		return -1;
	raise(SIGUSR2);
	return -1;
}

static int handle_line(const char *line)
{
	long ms = 0, n = 0;

	if (strncmp(line, "fast", 4) == 0)
		return 0;
	if (sscanf(line, "files %ld %ld", &n, &ms) == 2) {
		for (long i = 0; i < n; i++)
			read_file();
		if (ms > 0)
			handle_sleep(ms);
		return 0;
	}
	if (strncmp(line, "file", 4) == 0) {
		read_file();
		return 0;
	}
	if (sscanf(line, "sleep %ld", &ms) == 1) {
		handle_sleep(ms);
		return 0;
	}
	if (sscanf(line, "spin %ld", &ms) == 1) {
		spin_cpu(ms);
		return 0;
	}
	if (sscanf(line, "cpu %ld", &ms) == 1) {
		cpu_work(ms);
		return 0;
	}
	if (sscanf(line, "stall %ld", &ms) == 1) {
		cpu_work(ms);
		handle_sleep(2000);
		return 0;
	}
	if (sscanf(line, "tmo %ld", &ms) == 1) {
		timed_out_wait(ms);
		return 0;
	}
	if (sscanf(line, "idle %ld", &ms) == 1) {
		sweep_go_idle(ms);
		return 0;
	}
	if (sscanf(line, "rawsleep %ld", &ms) == 1) {
		raw_sleep(ms);
		return 0;
	}
	if (sscanf(line, "sigign %ld", &ms) == 1) {
		signal((int)ms, SIG_IGN);
		return 0;
	}
	if (sscanf(line, "sigdfl %ld", &ms) == 1) {
		signal((int)ms, SIG_DFL);
		return 0;
	}
	if (sscanf(line, "convoy %ld", &ms) == 1) {
		take_big_lock(ms);
		return 0;
	}
	if (strncmp(line, "unload", 6) == 0) {
		void *h = dlopen("libutil.so.1", RTLD_NOW | RTLD_LOCAL);

		return h && dlclose(h) == 0 ? 0 : -1;
	}
	if (strncmp(line, "fork", 4) == 0)
		return fork_wait();
	if (strncmp(line, "sigfork", 7) == 0) {
		int once = line[7] == '1';
		struct sigaction sa, after;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sigfork;
		sa.sa_flags = once ? SA_RESETHAND : 0;
		sigfork_rc = -1;
		if (sigaction(SIGUSR2, &sa, NULL) < 0 || raise(SIGUSR2) < 0 || sigaction(SIGUSR2, NULL, &after) < 0)
			return -1;
		if (once && (after.sa_handler != SIG_DFL || (after.sa_flags & SA_SIGINFO) || !(after.sa_flags & SA_RESETHAND)))
			return -1;
		return sigfork_rc;
	}
	if (strncmp(line, "sigjmp", 6) == 0)
		return sigjmp_out();
	if (strncmp(line, "earlysig", 8) == 0) {
		volatile sig_atomic_t *calls = dlsym(RTLD_DEFAULT, "earlysig_calls");
		volatile sig_atomic_t *rc = dlsym(RTLD_DEFAULT, "earlysig_rc");
		void *fn = dlsym(RTLD_DEFAULT, "earlysig_handler");
		struct sigaction now;
		int before;

		if (!calls || !rc || !fn || sigaction(SIGUSR1, NULL, &now) < 0 ||
		    (void *)now.sa_handler != fn || (now.sa_flags & SA_SIGINFO))
			return -1;
		before = *calls;
		if (raise(SIGUSR1) < 0 || *calls != before + 1)
			return -1;
		return *rc;
	}
	if (strncmp(line, "quit", 4) == 0) {
		stop = 1;
		return 0;
	}
	return -1;
}

static int listen_on(int port)
{
	struct sockaddr_in a;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 512) < 0) {
		perror("guardtest: listen");
		exit(1);
	}
	return fd;
}

static void reply(int fd)
{
	if (write(fd, "ok\n", 3) != 3)
		sink++;
}

/* ---- epoll server ---- */

struct conn {
	char buf[512];
	size_t len;
};

static struct conn conns[MAXC];

__attribute__((noinline)) void serve_readable(int fd)
{
	struct conn *c = &conns[fd];
	ssize_t n = read(fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
	char *nl;

	if (n <= 0) {
		close(fd);
		c->len = 0;
		return;
	}
	c->len += (size_t)n;
	c->buf[c->len] = '\0';
	while ((nl = strchr(c->buf, '\n'))) {
		*nl = '\0';
		handle_line(c->buf);
		reply(fd);
		c->len -= (size_t)(nl + 1 - c->buf);
		memmove(c->buf, nl + 1, c->len + 1);
	}
}

static int run_epoll(int port)
{
	int lfd = listen_on(port), ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd }, evs[64];

	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		int n = epoll_wait(ep, evs, 64, 1000);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == lfd) {
				int c = accept(lfd, NULL, NULL);

				if (c >= 0 && c < MAXC) {
					struct epoll_event cev = { .events = EPOLLIN, .data.fd = c };

					conns[c].len = 0;
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
				} else if (c >= 0) {
					close(c);
				}
			} else {
				serve_readable(fd);
			}
		}
	}
	return 0;
}

/* ---- proxy: an upstream's reply comes in a later iteration ---- */

struct pconn {
	int peer;          /* a client's upstream connection, an upstream connection's client */
	char req[32];      /* an upstream connection: what to send it once connected */
};

static struct pconn pconns[MAXC];
static int proxy_ep, proxy_uport;

__attribute__((noinline)) void forward_request(int cfd, long ms)
{
	struct sockaddr_in a;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct epoll_event ev = { .events = EPOLLOUT };

	if (s < 0 || s >= MAXC) {
		if (s >= 0)
			close(s);
		reply(cfd);
		return;
	}
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)proxy_uport);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		close(s);
		reply(cfd);
		return;
	}
	pconns[s].peer = cfd;
	if (ms > 0)
		snprintf(pconns[s].req, sizeof(pconns[s].req), "sleep %ld\n", ms);
	else
		snprintf(pconns[s].req, sizeof(pconns[s].req), "fast\n");
	ev.data.fd = s;
	epoll_ctl(proxy_ep, EPOLL_CTL_ADD, s, &ev);
}

/* connected: the request goes out, the reply is waited for by the loop */
__attribute__((noinline)) void send_upstream(int s)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = s };

	if (write(s, pconns[s].req, strlen(pconns[s].req)) < 0)
		sink++;
	pconns[s].req[0] = '\0';
	epoll_ctl(proxy_ep, EPOLL_CTL_MOD, s, &ev);
}

__attribute__((noinline)) void read_upstream(int s)
{
	char buf[64];
	ssize_t n = read(s, buf, sizeof(buf));
	int c = pconns[s].peer;

	epoll_ctl(proxy_ep, EPOLL_CTL_DEL, s, NULL);
	close(s);
	pconns[s].peer = -1;
	if (n > 0)
		sink++;
	reply(c);
}

__attribute__((noinline)) void proxy_readable(int fd)
{
	struct conn *c = &conns[fd];
	ssize_t n = read(fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
	char *nl;
	long ms;

	if (n <= 0) {
		close(fd);
		c->len = 0;
		return;
	}
	c->len += (size_t)n;
	c->buf[c->len] = '\0';
	while ((nl = strchr(c->buf, '\n'))) {
		*nl = '\0';
		if (strncmp(c->buf, "up", 2) == 0) {
			forward_request(fd, sscanf(c->buf, "up %ld", &ms) == 1 ? ms : 0);
		} else {
			handle_line(c->buf);
			reply(fd);
		}
		c->len -= (size_t)(nl + 1 - c->buf);
		memmove(c->buf, nl + 1, c->len + 1);
	}
}

static int run_proxy(int port, int uport)
{
	int lfd = listen_on(port);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd }, evs[64];

	proxy_ep = epoll_create1(0);
	proxy_uport = uport;
	for (int i = 0; i < MAXC; i++)
		pconns[i].peer = -1;
	epoll_ctl(proxy_ep, EPOLL_CTL_ADD, lfd, &ev);
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		int n = epoll_wait(proxy_ep, evs, 64, 1000);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == lfd) {
				int c = accept(lfd, NULL, NULL);

				if (c >= 0 && c < MAXC) {
					struct epoll_event cev = { .events = EPOLLIN, .data.fd = c };

					conns[c].len = 0;
					epoll_ctl(proxy_ep, EPOLL_CTL_ADD, c, &cev);
				} else if (c >= 0) {
					close(c);
				}
			} else if (pconns[fd].peer >= 0 && pconns[fd].req[0]) {
				send_upstream(fd);
			} else if (pconns[fd].peer >= 0) {
				read_upstream(fd);
			} else {
				proxy_readable(fd);
			}
		}
	}
	return 0;
}

/* ---- thread pool ---- */

struct job {
	int fd;
	char line[128];
};

static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcv = PTHREAD_COND_INITIALIZER;
static struct job queue[4096];
static unsigned qh, qn;

__attribute__((noinline)) void run_job(const struct job *j)
{
	handle_line(j->line);
	reply(j->fd);
}

static void *worker_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "gt-worker");
	for (;;) {
		struct job j;

		pthread_mutex_lock(&qmu);
		while (!qn && !stop)
			pthread_cond_wait(&qcv, &qmu);
		if (stop && !qn) {
			pthread_mutex_unlock(&qmu);
			return NULL;
		}
		j = queue[qh];
		qh = (qh + 1) % 4096;
		qn--;
		pthread_mutex_unlock(&qmu);
		run_job(&j);
	}
}

static void *conn_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[512];
	size_t len = 0;

	pthread_setname_np(pthread_self(), "gt-conn");
	for (;;) {
		ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
		char *nl;

		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		while ((nl = strchr(buf, '\n'))) {
			struct job j;

			*nl = '\0';
			j.fd = fd;
			snprintf(j.line, sizeof(j.line), "%.120s", buf);
			pthread_mutex_lock(&qmu);
			if (qn < 4096) {
				queue[(qh + qn) % 4096] = j;
				qn++;
				pthread_cond_signal(&qcv);
			}
			pthread_mutex_unlock(&qmu);
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len + 1);
		}
	}
	close(fd);
	return NULL;
}

static int run_pool(int port, int workers, int sweep)
{
	int lfd = listen_on(port);
	pthread_t th;

	pthread_create(&th, NULL, holder_main, NULL);
	if (sweep)
		pthread_create(&th, NULL, sweeper_main, NULL);
	for (int i = 0; i < workers; i++)
		pthread_create(&th, NULL, worker_main, NULL);
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		int c = accept(lfd, NULL, NULL);

		if (c >= 0)
			pthread_create(&th, NULL, conn_main, (void *)(intptr_t)c);
	}
	return 0;
}

/* ---- client ---- */

struct kind {
	char req[64];
	int weight;
	long count;
	long max_us;
};

static struct kind kinds[16];
static int nkinds, total_weight;
static long per_conn, port_g;
static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
static unsigned seed_g = 12345;

static void *client_main(void *arg)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	unsigned seed;
	char buf[64];

	(void)arg;
	pthread_mutex_lock(&cmu);
	seed = seed_g++;
	pthread_mutex_unlock(&cmu);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)port_g);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("guardtest: connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (long i = 0; i < per_conn; i++) {
		int r = (int)(rand_r(&seed) % (unsigned)total_weight), k = 0;
		size_t got = 0;
		struct timespec t0, t1;
		long us;

		while (r >= kinds[k].weight)
			r -= kinds[k++].weight;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (write(fd, kinds[k].req, strlen(kinds[k].req)) < 0)
			break;
		while (got < 3) {
			ssize_t n = read(fd, buf + got, sizeof(buf) - got);

			if (n <= 0)
				exit(1);
			got += (size_t)n;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		us = (t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000;
		pthread_mutex_lock(&cmu);
		kinds[k].count++;
		if (us > kinds[k].max_us)
			kinds[k].max_us = us;
		pthread_mutex_unlock(&cmu);
	}
	close(fd);
	return NULL;
}

static int run_client(int port, long n, int conc, char *mix)
{
	pthread_t th[256];

	for (char *tok = strtok(mix, ","); tok && nkinds < 16; tok = strtok(NULL, ",")) {
		char *colon = strrchr(tok, ':');

		if (!colon)
			return 2;
		*colon = '\0';
		snprintf(kinds[nkinds].req, sizeof(kinds[nkinds].req), "%s\n", tok);
		for (char *p = kinds[nkinds].req; *p; p++)
			if (*p == '=')
				*p = ' ';
		kinds[nkinds].weight = atoi(colon + 1);
		total_weight += kinds[nkinds].weight;
		nkinds++;
	}
	if (conc < 1 || conc > 256 || total_weight <= 0)
		return 2;
	port_g = port;
	per_conn = n / conc;
	for (int i = 0; i < conc; i++)
		pthread_create(&th[i], NULL, client_main, NULL);
	for (int i = 0; i < conc; i++)
		pthread_join(th[i], NULL);
	for (int k = 0; k < nkinds; k++) {
		kinds[k].req[strlen(kinds[k].req) - 1] = '\0';
		printf("%s %ld %ld\n", kinds[k].req, kinds[k].count, kinds[k].max_us);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "epoll") == 0)
		return run_epoll(atoi(argv[2]));
	if (argc >= 4 && strcmp(argv[1], "proxy") == 0)
		return run_proxy(atoi(argv[2]), atoi(argv[3]));
	if (argc >= 4 && strcmp(argv[1], "pool") == 0)
		return run_pool(atoi(argv[2]), atoi(argv[3]), argc >= 5 && strcmp(argv[4], "sweep") == 0);
	if (argc >= 6 && strcmp(argv[1], "client") == 0)
		return run_client(atoi(argv[2]), atol(argv[3]), atoi(argv[4]), argv[5]);
	fprintf(stderr, "usage: guardtest epoll PORT | proxy PORT UPORT | pool PORT WORKERS [sweep] | client PORT N CONC KIND:W,...\n");
	return 2;
}
