/*
 * torture: programs that would notice an agent inside them. Each case prints
 * what it saw (return values, errno names, descriptor tables, signal masks,
 * dispositions, pending signals, what its files hold); the output of a run
 * under libsmguard.so must be the same, byte for byte, as that of the plain
 * run (tests/integration/test_guard_torture.sh compares them, in training and
 * in guard mode). An ordinary program: no stackmine code, no sanitizers.
 *
 *   torture CASE        runs one case (torture list names them)
 *   torture train N     N units of the event loop, for the agent to learn it
 *   torture state       prints this process's signal state and descriptors
 *                       (the cases exec it to see what a child inherits)
 *   torture spawns N    N posix_spawn()s of /bin/true, one after the other
 *                       (make bench: what the agent costs a process that
 *                       starts many, each of which loads it too)
 *
 * Every step of a case runs as one unit of one event loop (epoll_wait on a
 * timerfd, always from the same call site and depth), so that a profile
 * learnt from `torture train` guards all of them. The loop's descriptors sit
 * at 900 and 901, out of the way of cases that close or replace descriptors.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOOP_EP 900
#define LOOP_TIMER 901
#define AGENT_SIG (SIGRTMAX - 7)   /* the agent's default signal: programs may use it too */

extern char **environ;
static char self[4096];

/* ---- output and helpers ---- */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static const char *en(int e)
{
	const char *n = e ? strerrorname_np(e) : "0";

	return n ? n : "E?";
}

/* A pointer the compiler cannot see through: bad addresses on purpose, no warnings. */
static void *opaque(uintptr_t v)
{
	void *volatile p = (void *)v;

	return p;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* CPU time on this thread: the agent's CPU-time timer fires, units go over their thresholds. */
__attribute__((noinline)) static void burn(long ms)
{
	volatile unsigned long x = 1;
	long end = now_ms() + ms;

	while (now_ms() < end)
		for (int i = 0; i < 20000; i++)
			x = x * 31 + 7;
}

/* Short waits in wrapped calls: each is a wait event with a stack walk under the agent. */
static void waits(int n)
{
	struct timespec ts = { 0, 1500000 };

	for (int i = 0; i < n; i++) {
		nanosleep(&ts, NULL);
		poll(NULL, 0, 1);
	}
}

/* A signal set as ranges of numbers: "1-31,34-64", or "none". */
static void set_text(const sigset_t *s, char *out, size_t cap)
{
	size_t n = 0;

	out[0] = '\0';
	for (int sig = 1; sig < NSIG; sig++) {
		int end = sig;

		if (sigismember(s, sig) != 1)
			continue;
		while (end + 1 < NSIG && sigismember(s, end + 1) == 1)
			end++;
		n += (size_t)snprintf(out + n, cap - n, n ? ",%d" : "%d", sig);
		if (end > sig)
			n += (size_t)snprintf(out + n, cap - n, "-%d", end);
		sig = end;
		if (n >= cap)
			break;
	}
	if (!n)
		snprintf(out, cap, "none");
}

static void say_mask(const char *what)
{
	sigset_t cur;
	char t[512];

	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	set_text(&cur, t, sizeof(t));
	say("%s: mask %s", what, t);
}

/* Lines of /proc/PATH whose names are in keys (space-separated), e.g. "SigBlk SigPnd". */
static void say_status(const char *what, const char *path, const char *keys)
{
	char line[256];
	FILE *f = fopen(path, "re");

	if (!f) {
		say("%s: cannot read %s", what, path);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!colon)
			continue;
		*colon = '\0';
		if (strstr(keys, line)) {
			char *v = colon + 1;

			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = '\0';
			say("%s: %s %s", what, line, v);
		}
	}
	fclose(f);
}

/* The descriptor table as the program sees it: numbers and what each is (files by base name). */
static void say_fds(const char *what)
{
	char line[8192], link[512], path[64];
	size_t n = 0;
	DIR *d = opendir("/proc/self/fd");
	int dfd = d ? dirfd(d) : -1, fds[4096], nfds = 0;
	struct dirent *e;

	while (d && (e = readdir(d)) && nfds < 4096) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] != '.' && fd != dfd)
			fds[nfds++] = fd;
	}
	if (d)
		closedir(d);
	for (int i = 1; i < nfds; i++)
		for (int j = i; j > 0 && fds[j - 1] > fds[j]; j--) {
			int x = fds[j];

			fds[j] = fds[j - 1];
			fds[j - 1] = x;
		}
	line[0] = '\0';
	for (int i = 0; i < nfds && n < sizeof(line) - 600; i++) {
		ssize_t k;
		const char *kind;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[i]);
		k = readlink(path, link, sizeof(link) - 1);
		link[k > 0 ? k : 0] = '\0';
		if (fds[i] <= 2)
			kind = "std";
		else if (strncmp(link, "pipe:", 5) == 0)
			kind = "pipe";
		else if (strncmp(link, "socket:", 7) == 0)
			kind = "socket";
		else if (strncmp(link, "anon_inode:", 11) == 0)
			kind = link + 11;
		else
			kind = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
		n += (size_t)snprintf(line + n, sizeof(line) - n, " %d=%s", fds[i], kind);
	}
	say("%s: fds%s", what, line);
}

/* ---- the event loop ---- */

typedef void step_fn(void);

__attribute__((noinline)) static void loop_wait(void)
{
	struct itimerspec its = { { 0, 0 }, { 0, 200000 } };
	struct epoll_event ev;
	uint64_t ticks;

	if (timerfd_settime(LOOP_TIMER, 0, &its, NULL) < 0 || epoll_wait(LOOP_EP, &ev, 1, 5000) != 1 ||
	    read(LOOP_TIMER, &ticks, sizeof(ticks)) != sizeof(ticks)) {
		say("loop: the event loop does not run (%s)", en(errno));
		exit(90);
	}
}

/* One unit per step; the loop's wait ends each (never as a tail call: one depth for every wait). */
__attribute__((noinline)) static void run_steps(step_fn *const *steps)
{
	for (;;) {
		loop_wait();
		if (!*steps)
			break;
		(*steps++)();
	}
}

static void loop_open(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC), tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);

	if (ep < 0 || tfd < 0 || dup3(ep, LOOP_EP, O_CLOEXEC) < 0 || dup3(tfd, LOOP_TIMER, O_CLOEXEC) < 0) {
		perror("loop");
		exit(2);
	}
	close(ep);
	close(tfd);
	ev.data.fd = LOOP_TIMER;
	if (epoll_ctl(LOOP_EP, EPOLL_CTL_ADD, LOOP_TIMER, &ev) < 0) {
		perror("epoll_ctl");
		exit(2);
	}
}

/* Closes every descriptor from lo up but the loop's. */
static void close_all_from(int lo)
{
	for (int fd = lo; fd < 4096; fd++)
		if (fd != LOOP_EP && fd != LOOP_TIMER)
			close(fd);
}

static void busy(void)
{
	burn(15);
	waits(2);
}

/* ---- fds: a program that closes everything and opens its own files at 3 and 4 ---- */

static int f3 = -1, f4 = -1, p5[2] = { -1, -1 };
static int write_errors, pipe_errors;

static void fds_open(void)
{
	close_all_from(3);
	f3 = open("f3.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	f4 = open("f4.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (pipe(p5) < 0)
		p5[0] = p5[1] = -1;
	say("fds: opened %d %d, pipe %d %d", f3, f4, p5[0], p5[1]);
}

static void fds_work(void)
{
	static int line;
	char b[64], r[64];
	int n = snprintf(b, sizeof(b), "line %d\n", ++line);

	if (write(f3, b, (size_t)n) != n)
		write_errors++;
	busy();
	if (write(f4, b, (size_t)n) != n)
		write_errors++;
	if (write(p5[1], b, (size_t)n) != n || read(p5[0], r, sizeof(r)) != n || memcmp(b, r, (size_t)n) != 0)
		pipe_errors++;
}

static void fds_end(void)
{
	char b[4096];
	int fd;
	ssize_t n;

	say_fds("fds");
	say("fds: write errors %d, pipe errors %d", write_errors, pipe_errors);
	close(f3);
	close(f4);
	for (int i = 0; i < 2; i++) {
		fd = open(i ? "f4.txt" : "f3.txt", O_RDONLY);
		n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;
		say("fds: %s holds %zd bytes", i ? "f4.txt" : "f3.txt", n);
		close(fd);
	}
}

static step_fn *const case_fds[] = { fds_open, fds_work, fds_work, fds_work, fds_work, fds_work, fds_work,
				     fds_work, fds_work, fds_work, fds_work, fds_work, fds_work, fds_end, NULL };

/* ---- closefrom: descriptors closed with closefrom(), a pipe at 3 and 4 that must stay the program's ---- */

static void cf_open(void)
{
	closefrom(3);   /* the loop's too: open them again */
	loop_open();
	if (pipe(p5) < 0)
		p5[0] = p5[1] = -1;
	say("closefrom: pipe %d %d", p5[0], p5[1]);
}

static void cf_work(void)
{
	char b[256], r[256];

	memset(b, 'x', sizeof(b));
	busy();
	if (write(p5[1], b, sizeof(b)) != (ssize_t)sizeof(b) || read(p5[0], r, sizeof(r)) != (ssize_t)sizeof(r) ||
	    memcmp(b, r, sizeof(b)) != 0)
		pipe_errors++;
}

static void cf_end(void)
{
	say("closefrom: pipe errors %d", pipe_errors);
	say_fds("closefrom");
}

static step_fn *const case_closefrom[] = { cf_open, cf_work, cf_work, cf_work, cf_work, cf_work, cf_work,
					   cf_work, cf_work, cf_work, cf_work, cf_end, NULL };

/* ---- dup2: a file copied onto every descriptor, then all but one closed ---- */

static void dup_all(void)
{
	struct rlimit rl;
	int fd, bad = 0;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = 1024;
	setrlimit(RLIMIT_NOFILE, &rl);
	fd = open("dup.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (int i = 3; i < 1024; i++)
		if (i != fd && i != LOOP_EP && i != LOOP_TIMER && dup2(fd, i) != i)
			bad++;
	say("dup2: onto every descriptor, %d failures", bad);
	busy();
	for (int i = 4; i < 1024; i++)
		if (i != LOOP_EP && i != LOOP_TIMER)
			close(i);
	f3 = 3;
}

static void dup_work(void)
{
	busy();
	if (write(f3, "dup\n", 4) != 4)
		write_errors++;
}

static void dup_end(void)
{
	struct stat st;

	say_fds("dup2");
	say("dup2: write errors %d, dup.txt %lld bytes", write_errors,
	    stat("dup.txt", &st) == 0 ? (long long)st.st_size : -1LL);
}

static step_fn *const case_dup2[] = { dup_all, dup_work, dup_work, dup_work, dup_work, dup_work, dup_end, NULL };

/* ---- vfork: a child that resets the handlers before exec must not reset the parent's ---- */

static volatile sig_atomic_t got[NSIG];
static const int handled[] = { SIGUSR1, SIGTERM, SIGINT, SIGCHLD, SIGHUP };

static void on_sig(int sig)
{
	if (sig > 0 && sig < NSIG)
		got[sig]++;
}

static void vf_install(void)
{
	struct sigaction act;

	memset(&act, 0, sizeof(act));
	act.sa_handler = on_sig;
	act.sa_flags = SA_RESTART;
	sigemptyset(&act.sa_mask);
	for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++)
		sigaction(handled[i], &act, NULL);
	busy();
}

static void vf_spawn(void)
{
	int st = 0;
	pid_t p;

	busy();
	p = vfork();
	if (p == 0) {
		struct sigaction dfl;
		sigset_t all;

		/* what Python's subprocess and posix_spawn do in the child */
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		for (int sig = 1; sig < NSIG; sig++)
			sigaction(sig, &dfl, NULL);
		signal(SIGUSR1, SIG_IGN);
		sigfillset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	waitpid(p, &st, 0);
	say("vfork: child exited %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void vf_check(void)
{
	for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++) {
		struct sigaction old;

		sigaction(handled[i], NULL, &old);
		say("vfork: signal %d handler %s flags %#x", handled[i],
		    old.sa_handler == on_sig ? "mine" : old.sa_handler == SIG_DFL ? "default" : "other",
		    (unsigned)old.sa_flags & (SA_RESTART | SA_SIGINFO | SA_RESETHAND | SA_NODEFER));
	}
	say_mask("vfork");
	raise(SIGUSR1);
	raise(SIGUSR1);
	raise(SIGTERM);
	raise(SIGHUP);
	say("vfork: handled SIGUSR1 %d, SIGTERM %d, SIGHUP %d", (int)got[SIGUSR1], (int)got[SIGTERM], (int)got[SIGHUP]);
}

static step_fn *const case_vfork[] = { vf_install, vf_spawn, vf_spawn, vf_check, NULL };

/* ---- spawn: posix_spawn with masks and defaults, and a child that reports what it inherited ---- */

static void spawn_many(void)
{
	posix_spawnattr_t a;
	sigset_t all;
	int ok = 0;
	char *argv[] = { "true", NULL };

	posix_spawnattr_init(&a);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&a, &all);
	posix_spawnattr_setsigdefault(&a, &all);
	posix_spawnattr_setflags(&a, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	for (int i = 0; i < 100; i++) {
		pid_t p;
		int st;

		if (posix_spawn(&p, "/bin/true", NULL, &a, argv, environ) == 0 && waitpid(p, &st, 0) == p &&
		    WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
		if (i % 10 == 0)
			burn(2);
	}
	posix_spawnattr_destroy(&a);
	say("spawn: %d of 100 children exited 0", ok);
}

static void spawn_state(void)
{
	posix_spawnattr_t a;
	sigset_t some;
	char *argv[] = { "torture", "state", NULL };
	pid_t p;
	int st = 0;

	busy();
	posix_spawnattr_init(&a);
	sigemptyset(&some);
	sigaddset(&some, SIGUSR2);
	sigaddset(&some, AGENT_SIG);
	sigaddset(&some, SIGRTMIN);
	posix_spawnattr_setsigmask(&a, &some);
	posix_spawnattr_setflags(&a, POSIX_SPAWN_SETSIGMASK);
	if (posix_spawn(&p, self, NULL, &a, argv, environ) == 0)
		waitpid(p, &st, 0);
	posix_spawnattr_destroy(&a);
	say("spawn: state child exited %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static step_fn *const case_spawn[] = { spawn_many, spawn_state, NULL };

/* ---- nullptr: calls the kernel answers with EFAULT must not crash ---- */

static void np_calls(void)
{
	void *bad = opaque(16);
	sigset_t set;
	int r;

	busy();
	errno = 0;
	r = nanosleep(NULL, NULL);
	say("nullptr: nanosleep(NULL) %d %s", r, en(errno));
	errno = 0;
	r = nanosleep(bad, bad);
	say("nullptr: nanosleep(bad) %d %s", r, en(errno));
	r = clock_nanosleep(CLOCK_MONOTONIC, 0, NULL, NULL);
	say("nullptr: clock_nanosleep(NULL) %s", en(r));
	r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, bad, NULL);
	say("nullptr: clock_nanosleep(abs, bad) %s", en(r));
	/* (ppoll, pselect and select read a bad time themselves and crash in the C library) */
	errno = 0;
	r = ppoll(bad, 1, NULL, NULL);
	say("nullptr: ppoll(bad fds) %d %s", r, en(errno));
	errno = 0;
	r = poll(bad, 1, 0);
	say("nullptr: poll(bad fds) %d %s", r, en(errno));
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	errno = 0;
	r = sigtimedwait(&set, NULL, bad);
	say("nullptr: sigtimedwait(bad time) %d %s", r, en(errno));
	errno = 0;
	r = sigtimedwait(bad, NULL, NULL);
	say("nullptr: sigtimedwait(bad set) %d %s", r, en(errno));
	errno = 0;
	r = epoll_wait(LOOP_EP, bad, 1, 0);
	say("nullptr: epoll_wait(bad events) %d %s", r, en(errno));
	errno = 0;
	r = (int)read(0, bad, 0);
	say("nullptr: read(bad, 0) %d %s", r, en(errno));
	errno = 0;
	r = (int)write(1, bad, 4);
	say("nullptr: write(bad) %d %s", r, en(errno));
	errno = 0;
	r = usleep(0);
	say("nullptr: usleep(0) %d %s", r, en(errno));
	say("nullptr: sleep(0) %u", sleep(0));
}

static step_fn *const case_nullptr[] = { np_calls, NULL };

/* ---- errno: failing calls keep their errno; successful ones leave it alone ---- */

static void errno_calls(void)
{
	char b;
	struct timespec big = { 0, 2000000000L };
	pthread_mutex_t m;
	pthread_mutexattr_t ma;
	struct sockaddr_in sin;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	sem_t sem;
	struct timespec past = { 1, 0 };
	int r;

#define E(name, call)                                   \
	do {                                            \
		errno = 0;                              \
		r = (int)(call);                        \
		say("errno: %s %d %s", name, r, en(errno)); \
	} while (0)
	busy();
	E("read(-1)", read(-1, &b, 1));
	E("write(-1)", write(-1, &b, 1));
	E("close(-1)", close(-1));
	E("close(4000)", close(4000));
	E("readv(-1)", readv(-1, NULL, 0));
	E("writev(-1)", writev(-1, NULL, 0));
	E("pread(-1)", pread(-1, &b, 1, 0));
	E("pwrite(-1)", pwrite(-1, &b, 1, 0));
	E("recv(-1)", recv(-1, &b, 1, 0));
	E("send(-1)", send(-1, &b, 1, 0));
	E("recvfrom(0)", recvfrom(0, &b, 1, 0, NULL, NULL));
	E("sendto(-1)", sendto(-1, &b, 1, 0, NULL, 0));
	E("recvmsg(-1)", recvmsg(-1, NULL, 0));
	E("sendmsg(-1)", sendmsg(-1, NULL, 0));
	E("accept(-1)", accept(-1, NULL, NULL));
	E("accept4(-1)", accept4(-1, NULL, NULL, 0));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(1);
	sin.sin_addr.s_addr = htonl(0x7f000001);
	E("connect(closed port)", connect(s, (struct sockaddr *)&sin, sizeof(sin)));
	E("fsync(-1)", fsync(-1));
	E("fdatasync(-1)", fdatasync(-1));
	E("flock(-1)", flock(-1, LOCK_EX));
	E("nanosleep(2e9 ns)", nanosleep(&big, NULL));
	E("waitpid(no child)", waitpid(-1, NULL, WNOHANG));
	E("epoll_wait(-1)", epoll_wait(-1, opaque(0), 1, 0));
	E("poll(-1 fds)", poll(opaque(0), (nfds_t)(uintptr_t)opaque(UINTPTR_MAX), 0));
	E("msgrcv(-1)", msgrcv(-1, &b, 1, 0, IPC_NOWAIT));
	sem_init(&sem, 0, 0);
	E("sem_timedwait(past)", sem_timedwait(&sem, &past));
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&m, &ma);
	say("errno: unlock unowned %s", en(pthread_mutex_unlock(&m)));
	pthread_mutex_lock(&m);
	say("errno: lock twice %s", en(pthread_mutex_lock(&m)));
	pthread_mutex_unlock(&m);
	errno = 12345;
	r = (int)write(1, "", 0);
	say("errno: a call that succeeds leaves errno %d", errno);
	close(s);
#undef E
}

static step_fn *const case_errno[] = { errno_calls, NULL };

/* ---- eintr: calls the kernel does not restart return only for the program's own reasons ---- */

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/* SIGALRM in ms, with a handler that interrupts (no SA_RESTART). */
static void alarm_in(long ms)
{
	struct sigaction act;
	struct itimerval it = { { 0, 0 }, { ms / 1000, (ms % 1000) * 1000 } };

	memset(&act, 0, sizeof(act));
	act.sa_handler = on_alarm;
	sigemptyset(&act.sa_mask);
	sigaction(SIGALRM, &act, NULL);
	alarms = 0;
	setitimer(ITIMER_REAL, &it, NULL);
}

/* elapsed time, rounded down to 100 ms: "at least 300 ms" reads the same under any agent */
static long tenths(long t0)
{
	return (now_ms() - t0) / 100 * 100;
}

static void ei_recv_timeout(void)
{
	int sv[2], r, e;
	struct timeval tv = { 0, 400000 };
	char b;
	long t0;

	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	burn(20);   /* the unit is over its threshold: the agent would want its stack */
	t0 = now_ms();
	errno = 0;
	r = (int)recv(sv[0], &b, 1, 0);
	e = errno;
	say("eintr: recv with SO_RCVTIMEO %d %s after >= %ld ms", r, en(e), tenths(t0) >= 300 ? 300 : tenths(t0));
	t0 = now_ms();
	r = (int)read(sv[0], &b, 1);
	e = errno;
	say("eintr: read with SO_RCVTIMEO %d %s after >= %ld ms", r, en(e), tenths(t0) >= 300 ? 300 : tenths(t0));
	close(sv[0]);
	close(sv[1]);
}

static void ei_pause(void)
{
	long t0;
	int r, e;
	sigset_t none;

	burn(20);
	alarm_in(400);
	t0 = now_ms();
	r = pause();
	e = errno;
	say("eintr: pause %d %s, alarms %d, after >= %ld ms", r, en(e), (int)alarms, tenths(t0) >= 300 ? 300 : tenths(t0));
	burn(20);
	alarm_in(400);
	sigemptyset(&none);
	t0 = now_ms();
	r = sigsuspend(&none);
	e = errno;
	say("eintr: sigsuspend %d %s, alarms %d, after >= %ld ms", r, en(e), (int)alarms,
	    tenths(t0) >= 300 ? 300 : tenths(t0));
}

static void ei_semtimedop(void)
{
	int id = semget(IPC_PRIVATE, 1, 0600), r, e;
	struct sembuf op = { 0, -1, 0 };
	struct timespec ts = { 0, 400000000 };
	long t0;

	burn(20);
	t0 = now_ms();
	r = semtimedop(id, &op, 1, &ts);
	e = errno;
	say("eintr: semtimedop %d %s after >= %ld ms", r, en(e), tenths(t0) >= 300 ? 300 : tenths(t0));
	semctl(id, 0, IPC_RMID);
}

static void ei_waits(void)
{
	struct epoll_event ev;
	struct timespec ts = { 0, 400000000 };
	struct timeval tv = { 0, 400000 };
	int ep = epoll_create1(0), r, e;
	long t0;

	burn(20);
	t0 = now_ms();
	r = epoll_wait(ep, &ev, 1, 400);
	say("eintr: epoll_wait %d after >= %ld ms", r, tenths(t0) >= 300 ? 300 : tenths(t0));
	t0 = now_ms();
	r = poll(NULL, 0, 400);
	say("eintr: poll %d after >= %ld ms", r, tenths(t0) >= 300 ? 300 : tenths(t0));
	t0 = now_ms();
	r = select(0, NULL, NULL, NULL, &tv);
	say("eintr: select %d after >= %ld ms", r, tenths(t0) >= 300 ? 300 : tenths(t0));
	t0 = now_ms();
	r = nanosleep(&ts, NULL);
	say("eintr: nanosleep %d after >= %ld ms", r, tenths(t0) >= 300 ? 300 : tenths(t0));
	t0 = now_ms();
	r = (int)syscall(SYS_futex, &ep, FUTEX_WAIT_PRIVATE, ep, &ts, NULL, 0);
	e = errno;
	say("eintr: futex %d %s after >= %ld ms", r, en(e), tenths(t0) >= 300 ? 300 : tenths(t0));
	close(ep);
}

static void ei_program_signal(void)
{
	int p[2], r, e;
	char b;
	long t0;

	/* the program's own signal still interrupts what it interrupts */
	pipe(p);
	burn(20);
	alarm_in(300);
	t0 = now_ms();
	r = (int)read(p[0], &b, 1);
	e = errno;
	say("eintr: read interrupted by the program's alarm %d %s, alarms %d, after >= %ld ms", r, en(e), (int)alarms,
	    tenths(t0) >= 200 ? 200 : tenths(t0));
	alarm_in(300);
	r = poll(NULL, 0, 2000);
	e = errno;
	say("eintr: poll interrupted by the program's alarm %d %s, alarms %d", r, en(e), (int)alarms);
	close(p[0]);
	close(p[1]);
}

static void ei_sigtimedwait(void)
{
	sigset_t all, old;
	struct timespec ts = { 0, 400000000 };
	siginfo_t si;
	int r, e;
	long t0;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	burn(30);
	t0 = now_ms();
	r = sigtimedwait(&all, &si, &ts);
	e = errno;
	say("eintr: sigtimedwait on every signal %d %s after >= %ld ms", r, en(e), tenths(t0) >= 300 ? 300 : tenths(t0));
	sigprocmask(SIG_SETMASK, &old, NULL);
}

static step_fn *const case_eintr[] = { ei_recv_timeout, ei_pause, ei_semtimedop, ei_waits, ei_program_signal,
				       ei_sigtimedwait, NULL };

/* ---- siginterrupt: signal() after siginterrupt() keeps the call interruptible ---- */

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"   /* siginterrupt: programs still call it */

static void *usr1_later(void *arg)
{
	struct timespec ts = { 0, 200000000 };

	nanosleep(&ts, NULL);
	pthread_kill(*(pthread_t *)arg, SIGUSR1);
	return NULL;
}

static void si_read(void)
{
	struct sigaction cur;
	pthread_t me = pthread_self(), th;
	int p[2], r, e;
	char b;

	got[SIGUSR1] = 0;
	signal(SIGUSR1, on_sig);
	siginterrupt(SIGUSR1, 1);
	signal(SIGUSR1, on_sig);
	sigaction(SIGUSR1, NULL, &cur);
	say("siginterrupt: SA_RESTART %s", cur.sa_flags & SA_RESTART ? "set" : "clear");
	pipe(p);
	burn(20);
	alarm(5);   /* a read the agent made restartable would hang here */
	pthread_create(&th, NULL, usr1_later, &me);
	r = (int)read(p[0], &b, 1);
	e = errno;
	alarm(0);
	pthread_join(th, NULL);
	say("siginterrupt: read %d %s, handled %d", r, en(e), (int)got[SIGUSR1]);
	siginterrupt(SIGUSR1, 0);
	sigaction(SIGUSR1, NULL, &cur);
	say("siginterrupt: then SA_RESTART %s", cur.sa_flags & SA_RESTART ? "set" : "clear");
	close(p[0]);
	close(p[1]);
}

static step_fn *const case_siginterrupt[] = { si_read, NULL };

/* ---- masks: what the program blocks stays blocked, in new threads and across exec ---- */

static void *thread_mask(void *arg)
{
	(void)arg;
	say_mask("masks: new thread");
	say_status("masks: new thread", "/proc/thread-self/status", "SigBlk");
	burn(20);
	return NULL;
}

static void mk_block_all(void)
{
	sigset_t all;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	say_mask("masks: after blocking all");
	say_status("masks", "/proc/self/status", "SigBlk");
	burn(40);   /* CPU-time timers would fire now */
}

static void mk_pending(void)
{
	burn(20);
	say_status("masks", "/proc/self/status", "SigPnd ShdPnd");
}

static void mk_thread(void)
{
	pthread_t th;

	pthread_create(&th, NULL, thread_mask, NULL);
	pthread_join(th, NULL);
}

static void mk_fork_exec(void)
{
	pid_t p;
	int st = 0;

	burn(20);
	p = fork();
	if (p == 0) {
		burn(20);
		execl(self, "torture", "state", (char *)NULL);
		_exit(127);
	}
	waitpid(p, &st, 0);
	say("masks: child exited %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void mk_only_agent(void)
{
	sigset_t s, old;

	sigprocmask(SIG_SETMASK, NULL, &old);
	sigemptyset(&s);
	sigprocmask(SIG_SETMASK, &s, NULL);
	say_mask("masks: after unblocking all");
	sigaddset(&s, AGENT_SIG);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	say_mask("masks: after blocking SIGRTMAX-7");
	burn(30);
	say_status("masks", "/proc/self/status", "SigBlk SigPnd");
	pthread_sigmask(SIG_UNBLOCK, &s, &old);
	{
		char t[512];

		set_text(&old, t, sizeof(t));
		say("masks: the old mask reported %s", t);
	}
}

static step_fn *const case_masks[] = { mk_block_all, mk_pending, mk_thread, mk_fork_exec, mk_only_agent, NULL };

/* ---- signalfd: every real-time signal sent to the process reaches the program's signalfd ---- */

static int sfd = -1;

static void sf_open(void)
{
	sigset_t rt;

	sigemptyset(&rt);
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
		sigaddset(&rt, s);
	sigprocmask(SIG_BLOCK, &rt, NULL);
	sfd = signalfd(-1, &rt, SFD_NONBLOCK | SFD_CLOEXEC);
	burn(30);
}

static void sf_send(void)
{
	burn(10);
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++) {
		union sigval v = { .sival_int = s - SIGRTMIN };

		sigqueue(getpid(), s, v);
	}
	burn(30);
}

static void sf_read(void)
{
	struct signalfd_siginfo si;
	char list[1024];
	size_t n = 0;
	int count = 0;

	list[0] = '\0';
	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		count++;
		if (n < sizeof(list) - 16)
			n += (size_t)snprintf(list + n, sizeof(list) - n, " %d:%d", (int)si.ssi_signo - SIGRTMIN,
					      si.ssi_int);
	}
	say("signalfd: %d of %d real-time signals read:%s", count, SIGRTMAX - SIGRTMIN + 1, list);
	burn(20);
	say_status("signalfd", "/proc/self/status", "SigPnd ShdPnd");
}

static step_fn *const case_signalfd[] = { sf_open, sf_send, sf_read, NULL };

/* ---- sigconsume: a program that blocks every signal and takes what comes with sigtimedwait ---- */

static void *usr2_later(void *arg)
{
	struct timespec ts = { 0, 100000000 };

	(void)arg;
	nanosleep(&ts, NULL);
	kill(getpid(), SIGUSR2);
	return NULL;
}

static int consumed;

static void sc_block(void)
{
	sigset_t all;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	busy();
}

static void sc_take(void)
{
	sigset_t all;
	siginfo_t si;
	struct timespec zero = { 0, 0 };
	int r;

	sigfillset(&all);
	burn(25);
	while ((r = sigtimedwait(&all, &si, &zero)) > 0) {
		consumed++;
		say("sigconsume: took signal %d", r);
	}
}

static void sc_wait(void)
{
	sigset_t all;
	pthread_t th;
	int sig = 0, r;

	sigfillset(&all);
	pthread_create(&th, NULL, usr2_later, NULL);
	burn(20);
	r = sigwait(&all, &sig);
	pthread_join(th, NULL);
	say("sigconsume: sigwait %d signal %d (SIGUSR2 is %d)", r, sig, SIGUSR2);
	say("sigconsume: %d other signals taken", consumed);
}

static step_fn *const case_sigconsume[] = { sc_block, sc_take, sc_take, sc_take, sc_take, sc_take, sc_take,
					    sc_wait, NULL };

/* ---- agentsig: the program's own uses of the agent's signal ---- */

static void as_handler(void)
{
	struct sigaction act, old;

	busy();
	memset(&act, 0, sizeof(act));
	act.sa_handler = on_sig;
	sigemptyset(&act.sa_mask);
	sigaction(AGENT_SIG, &act, NULL);
	sigaction(AGENT_SIG, NULL, &old);
	say("agentsig: handler %s", old.sa_handler == on_sig ? "mine" : "other");
	raise(AGENT_SIG);
	burn(100);
	say("agentsig: handled %d", (int)got[AGENT_SIG]);
}

static void as_ignore(void)
{
	struct sigaction old;

	busy();
	signal(AGENT_SIG, SIG_IGN);
	sigaction(AGENT_SIG, NULL, &old);
	say("agentsig: ignored %s", old.sa_handler == SIG_IGN ? "yes" : "no");
	raise(AGENT_SIG);
	burn(30);
	say("agentsig: still running");
}

static void as_default(void)
{
	busy();
	say("agentsig: raising it with the default action");
	signal(AGENT_SIG, SIG_DFL);
	raise(AGENT_SIG);
	burn(100);
	say("agentsig: survived the default action");
}

static step_fn *const case_agentsig_handler[] = { as_handler, NULL };
static step_fn *const case_agentsig_ignore[] = { as_ignore, NULL };
static step_fn *const case_agentsig_default[] = { busy, as_default, NULL };

/* ---- rtsig: a program with handlers of its own for every real-time signal ---- */

static void on_rt(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (sig > 0 && sig < NSIG && si->si_code == SI_QUEUE)
		got[sig]++;
}

static void rt_install(void)
{
	struct sigaction act;

	memset(&act, 0, sizeof(act));
	act.sa_sigaction = on_rt;
	act.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&act.sa_mask);
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
		sigaction(s, &act, NULL);
	busy();
}

static void rt_send(void)
{
	burn(10);
	for (int round = 0; round < 3; round++)
		for (int s = SIGRTMIN; s <= SIGRTMAX; s++) {
			union sigval v = { .sival_int = s };

			sigqueue(getpid(), s, v);
		}
	burn(30);
}

static void rt_check(void)
{
	int all3 = 0;

	for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
		all3 += got[s] == 3;
	say("rtsig: %d of %d signals handled 3 times", all3, SIGRTMAX - SIGRTMIN + 1);
}

static step_fn *const case_rtsig[] = { rt_install, rt_send, rt_check, NULL };

/* ---- unshare: a single-threaded program enters a new user namespace ---- */

static void un_user(void)
{
	char before[64], after[64];
	ssize_t n;
	int r, e;

	n = readlink("/proc/self/ns/user", before, sizeof(before) - 1);
	before[n > 0 ? n : 0] = '\0';
	r = unshare(CLONE_NEWUSER);
	e = errno;
	n = readlink("/proc/self/ns/user", after, sizeof(after) - 1);
	after[n > 0 ? n : 0] = '\0';
	say("unshare: CLONE_NEWUSER %d %s, new namespace %s", r, en(r < 0 ? e : 0),
	    strcmp(before, after) != 0 ? "yes" : "no");
}

static step_fn *const case_unshare[] = { busy, busy, busy, un_user, busy, busy, NULL };

/* ---- threads: many threads that wait on each other ---- */

static pthread_mutex_t tm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tc = PTHREAD_COND_INITIALIZER;
static int tcount, nthreads = 500;

static void *worker(void *arg)
{
	struct timespec ts = { 0, 1000000 };

	(void)arg;
	for (int i = 0; i < 3; i++) {
		pthread_mutex_lock(&tm);
		tcount++;
		pthread_cond_broadcast(&tc);
		pthread_mutex_unlock(&tm);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *worker_once(void *arg)
{
	pthread_mutex_lock(&tm);
	tcount++;
	pthread_mutex_unlock(&tm);
	return arg;
}

static void th_run(void)
{
	pthread_t *th = calloc((size_t)nthreads, sizeof(*th));
	int started = 0;

	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, worker, NULL) == 0)
			started++;
	pthread_mutex_lock(&tm);
	while (tcount < started * 3)
		pthread_cond_wait(&tc, &tm);
	pthread_mutex_unlock(&tm);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	say("threads: %d threads, %d rounds", started, tcount);
}

static step_fn *const case_threads[] = { busy, th_run, busy, NULL };

/* ---- forklocks: forks while other threads contend for locks and allocate ----
 * The agent takes no lock of its own across fork() and holds none while the program's allocator
 * runs: a child must find every lock of the agent free, whatever the other threads were doing. */

static atomic_int fl_stop;

static void *fl_worker(void *arg)
{
	struct timespec ts = { 0, 200000 };

	(void)arg;
	while (!atomic_load(&fl_stop)) {
		void *p;

		pthread_mutex_lock(&tm);
		p = malloc(64 + (size_t)(rand() % 4096));
		pthread_cond_broadcast(&tc);
		pthread_mutex_unlock(&tm);
		free(p);
		pthread_mutex_lock(&tm);
		{
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += 100000;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&tc, &tm, &until);
		}
		pthread_mutex_unlock(&tm);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void fl_run(void)
{
	pthread_t th[4];
	int ok = 0, n = 0;

	atomic_store(&fl_stop, 0);
	for (int i = 0; i < 4; i++)
		if (pthread_create(&th[i], NULL, fl_worker, NULL) == 0)
			n++;
	for (int i = 0; i < 100; i++) {
		pid_t p = fork();
		int st;

		if (p == 0) {
			/* the child: locks, a wait the agent times, memory, a thread */
			struct timespec ts = { 0, 1000000 };
			void *m = malloc(1 << 16);
			pthread_t t;

			/* (not tm: a thread the child does not have may have held it at the fork) */
			pthread_mutex_init(&tm, NULL);
			pthread_mutex_lock(&tm);
			pthread_mutex_unlock(&tm);
			nanosleep(&ts, NULL);
			if (pthread_create(&t, NULL, worker_once, NULL) != 0 || pthread_join(t, NULL) != 0)
				_exit(3);
			free(m);
			_exit(0);
		}
		if (p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
	}
	atomic_store(&fl_stop, 1);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	say("forklocks: %d threads, %d of 100 children exited 0", n, ok);
}

static step_fn *const case_forklocks[] = { busy, fl_run, busy, NULL };

/* ---- forkpool: a fork while threads just created have not run yet ----
 * The agent's pthread_create takes the new thread's start argument from a pool of 64, which the
 * thread gives back as it starts. Forked before the threads ran, a child holds those entries taken
 * for threads it does not have: it must find the pool free, or each thread it creates would cost its
 * creator an allocation. This program's malloc and calloc count the calls of a thread that asks.
 * The creator runs at a realtime priority on one CPU, so that the threads it creates (the same
 * priority, the same CPU) wait until it blocks: 70 threads created, then the fork; in the child, 8
 * threads created at once, then joined. */

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
static __thread int fp_counting;
static long fp_allocs;   /* only the counting thread adds */

void *malloc(size_t n)
{
	if (fp_counting)
		fp_allocs++;
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	if (fp_counting)
		fp_allocs++;
	return __libc_calloc(n, size);
}

static void *fp_nothing(void *arg)
{
	return arg;
}

static void fp_run(void)
{
	struct sched_param rt = { .sched_priority = 1 }, normal = { .sched_priority = 0 };
	cpu_set_t all, one;
	pthread_t th[70];
	int n = 0, cpu = 0, realtime, st = 0;
	pid_t p;

	sched_getaffinity(0, sizeof(all), &all);
	while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &all))
		cpu++;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	realtime = sched_setaffinity(0, sizeof(one), &one) == 0 && sched_setscheduler(0, SCHED_FIFO, &rt) == 0;
	for (int i = 0; i < 70; i++)
		if (pthread_create(&th[n], NULL, fp_nothing, NULL) == 0)
			n++;
	p = fork();
	if (p == 0) {
		pthread_t c[8];
		int m = 0;
		long allocs;

		fp_allocs = 0;
		fp_counting = 1;
		for (int i = 0; i < 8; i++)
			if (pthread_create(&c[m], NULL, fp_nothing, NULL) == 0)
				m++;
		fp_counting = 0;
		allocs = fp_allocs;
		for (int i = 0; i < m; i++)
			pthread_join(c[i], NULL);
		_exit(m != 8 ? 255 : allocs < 200 ? (int)allocs : 200);
	}
	if (p < 0 || waitpid(p, &st, 0) != p)
		st = -1;
	sched_setscheduler(0, SCHED_OTHER, &normal);
	sched_setaffinity(0, sizeof(all), &all);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	if (!realtime)
		say("forkpool: no realtime priority here (not root?): the fork comes whenever");
	if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) != 255)
		say("forkpool: %d threads created before the fork; the child's 8 threads cost their creator %d "
		    "allocations", n, WEXITSTATUS(st));
	else
		say("forkpool: %d threads created before the fork; the child failed (status %#x)", n, (unsigned)st);
}

static step_fn *const case_forkpool[] = { busy, fp_run, busy, NULL };

/* ---- daemon: fork twice, close everything, write a file ---- */

static void dm_run(void)
{
	pid_t p = fork();

	if (p == 0) {
		setsid();
		if (fork() != 0)
			_exit(0);
		close_range(0, ~0U, 0);
		open("/dev/null", O_RDWR);
		dup(0);
		dup(0);
		loop_open();
		{
			static step_fn *const steps[] = { busy, busy, busy, NULL };
			int fd;

			run_steps(steps);
			fd = open("daemon.tmp", O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (write(fd, "the daemon ran\n", 15) != 15)
				_exit(1);
			close(fd);
			rename("daemon.tmp", "daemon.txt");
		}
		_exit(0);
	}
	waitpid(p, NULL, 0);
	for (int i = 0; i < 200 && access("daemon.txt", F_OK) != 0; i++)
		waits(5);
	{
		char b[64] = "";
		int fd = open("daemon.txt", O_RDONLY);
		ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;

		b[n > 0 ? n : 0] = '\0';
		say("daemon: %s", n > 0 ? strtok(b, "\n") : "no file");
		close(fd);
	}
}

static step_fn *const case_daemon[] = { busy, dm_run, NULL };

/* ---- exec: blocking everything, then exec: the next program inherits exactly that ---- */

static void ex_exec(void)
{
	sigset_t all;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	burn(40);
	execl(self, "torture", "state", (char *)NULL);
	say("exec: failed %s", en(errno));
}

static step_fn *const case_exec[] = { busy, ex_exec, NULL };

/* ---- exit: a short program that exits at once ---- */

static step_fn *const case_exit[] = { busy, busy, busy, NULL };

/* ---- exitafter US: exit() inside a unit, US µs of wall-clock time (spent computing) after it
 * began: swept over US, the exit comes at any moment of the agent's shipping thread's first work
 * (loading libcurl, its first report) ---- */

static long exit_after_us;

static void exit_soon(void)
{
	struct timespec t0, t;
	volatile unsigned long x = 1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 1000; i++)
			x = x * 31 + 7;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 < exit_after_us);
	exit(0);
}

static step_fn *const case_exitafter[] = { exit_soon, NULL };

/* ---- the cases ---- */

static const struct {
	const char *name;
	step_fn *const *steps;
} cases[] = {
	{ "fds", case_fds },
	{ "closefrom", case_closefrom },
	{ "dup2", case_dup2 },
	{ "vfork", case_vfork },
	{ "spawn", case_spawn },
	{ "nullptr", case_nullptr },
	{ "errno", case_errno },
	{ "eintr", case_eintr },
	{ "siginterrupt", case_siginterrupt },
	{ "masks", case_masks },
	{ "signalfd", case_signalfd },
	{ "sigconsume", case_sigconsume },
	{ "agentsig-handler", case_agentsig_handler },
	{ "agentsig-ignore", case_agentsig_ignore },
	{ "agentsig-default", case_agentsig_default },
	{ "rtsig", case_rtsig },
	{ "unshare", case_unshare },
	{ "threads", case_threads },
	{ "forklocks", case_forklocks },
	{ "forkpool", case_forkpool },
	{ "daemon", case_daemon },
	{ "exec", case_exec },
	{ "exit", case_exit },
};

static void state(void)
{
	struct sigaction a;
	char ign[512] = "", *p = ign;

	say_mask("state");
	say_status("state", "/proc/self/status", "SigBlk SigPnd ShdPnd SigIgn");
	for (int s = 1; s < NSIG; s++)
		if (sigaction(s, NULL, &a) == 0 && a.sa_handler != SIG_DFL && p < ign + sizeof(ign) - 8)
			p += snprintf(p, (size_t)(ign + sizeof(ign) - p), " %d", s);
	say("state: not default:%s", ign[0] ? ign : " none");
	say_fds("state");
}

static step_fn noop;
static void noop(void)
{
}

int main(int argc, char **argv)
{
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	step_fn *const *steps = NULL;
	int rounds = 1;

	self[n > 0 ? n : 0] = '\0';
	if (argc >= 2 && strcmp(argv[1], "state") == 0) {
		state();
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "spawns") == 0) {
		char *args[] = { "true", NULL };
		int n = atoi(argv[2]), ok = 0;

		for (int i = 0; i < n; i++) {
			pid_t p;
			int st;

			if (posix_spawn(&p, "/bin/true", NULL, NULL, args, environ) == 0 && waitpid(p, &st, 0) == p &&
			    WIFEXITED(st) && WEXITSTATUS(st) == 0)
				ok++;
		}
		return ok == n ? 0 : 1;
	}
	if (argc >= 2 && strcmp(argv[1], "list") == 0) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "train") == 0) {
		static step_fn *const one[] = { noop, NULL };

		steps = one;
		rounds = atoi(argv[2]);
	}
	if (argc >= 3 && strcmp(argv[1], "exitafter") == 0) {
		steps = case_exitafter;
		exit_after_us = strtol(argv[2], NULL, 10);
	}
	if (argc >= 3 && strcmp(argv[1], "threads") == 0)
		nthreads = atoi(argv[2]);
	for (size_t i = 0; argc >= 2 && i < sizeof(cases) / sizeof(cases[0]); i++)
		if (strcmp(argv[1], cases[i].name) == 0)
			steps = cases[i].steps;
	if (steps) {
		/* one call site for every case: the loop's wait is at the same depth in all of them */
		loop_open();
		for (int r = 0; r < rounds; r++)
			run_steps(steps);
		if (strcmp(argv[1], "train") != 0)
			say("%s: done", argv[1]);
		return 0;
	}
	fprintf(stderr, "usage: torture CASE | train N | state | spawns N | exitafter US | list\n");
	return 2;
}
