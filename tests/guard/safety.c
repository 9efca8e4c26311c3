/*
 * safety: checks, from inside a guarded program, that the agent changes
 * nothing the program can see (tests/integration/test_guard.sh runs it under
 * libsmguard.so). An ordinary program: no stackmine code, no sanitizers.
 *
 *   safety train N     an event loop (epoll on a pipe) of N fast units
 *   safety check       the same loop; each check runs inside a unit; prints
 *                      "ok NAME" / "FAIL NAME: why" and "N passed, N failed"
 *
 * Checks: return values and errno of failing calls; a program signal still
 * interrupts epoll_wait with EINTR, while the agent's own signal never shows;
 * sigaction and sigprocmask report what the program set; the program can take
 * the agent's signal; fork and exec in units; the agent's threads hold none of
 * the program's files; closing every descriptor; units that keep running after
 * the agent's descriptors were "closed".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int passed, failed;
static int pipefd[2], ep, tfd;
static int early[2];   /* a pipe opened before the agent's threads started */

#define CHECK(name, cond, ...)                                     \
	do {                                                       \
		if (cond) {                                        \
			passed++;                                  \
			printf("ok   %s\n", name);                 \
		} else {                                           \
			failed++;                                  \
			printf("FAIL %s: ", name);                 \
			printf(__VA_ARGS__);                       \
			printf("\n");                              \
		}                                                  \
		fflush(stdout);                                    \
	} while (0)

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

__attribute__((noinline)) void burn_cpu(long ms)
{
	volatile unsigned long x = 1;
	long end = now_ms() + ms;

	while (now_ms() < end)
		for (int i = 0; i < 10000; i++)
			x = x * 31 + 7;
}

/* One unit: the loop sleeps in epoll_wait until a timer fires, then runs fn. */
static void in_unit(void (*fn)(void))
{
	struct itimerspec its = { { 0, 0 }, { 0, 300000 } };
	struct epoll_event ev;
	uint64_t ticks;

	if (timerfd_settime(tfd, 0, &its, NULL) < 0 || epoll_wait(ep, &ev, 1, 5000) != 1 ||
	    read(tfd, &ticks, sizeof(ticks)) != sizeof(ticks)) {
		printf("FAIL loop: the event loop does not run\n");
		exit(1);
	}
	fn();
}

/* ---- checks ---- */

static void check_errno(void)
{
	char b;
	struct timespec bad = { 0, 2000000000L };
	pthread_mutex_t m;
	pthread_mutexattr_t a;

	errno = 0;
	CHECK("read(-1) fails with EBADF", read(-1, &b, 1) == -1 && errno == EBADF, "errno %d", errno);
	errno = 0;
	CHECK("write(-1) fails with EBADF", write(-1, &b, 1) == -1 && errno == EBADF, "errno %d", errno);
	errno = 0;
	CHECK("close(-1) fails with EBADF", close(-1) == -1 && errno == EBADF, "errno %d", errno);
	errno = 0;
	{
		struct epoll_event ev;

		CHECK("epoll_wait on a bad fd fails with EBADF", epoll_wait(-1, &ev, 1, 0) == -1 && errno == EBADF,
		      "errno %d", errno);
	}
	errno = 0;
	CHECK("nanosleep with a bad time fails with EINVAL", nanosleep(&bad, NULL) == -1 && errno == EINVAL,
	      "errno %d", errno);
	errno = 12345;
	CHECK("a successful call leaves errno alone", write(pipefd[1], "", 0) == 0 && errno == 12345, "errno %d",
	      errno);
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&m, &a);
	CHECK("unlocking an unowned error-checking mutex returns EPERM", pthread_mutex_unlock(&m) == EPERM, "%s", "-");
	CHECK("locking it twice returns EDEADLK", pthread_mutex_lock(&m) == 0 && pthread_mutex_lock(&m) == EDEADLK,
	      "%s", "-");
	pthread_mutex_unlock(&m);
}

static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

static void *send_usr1(void *arg)
{
	struct timespec ts = { 0, 100000000 };

	nanosleep(&ts, NULL);
	kill(getpid(), SIGUSR1);
	(void)arg;
	return NULL;
}

static void check_program_signal(void)
{
	struct sigaction act, old;
	struct epoll_event ev;
	pthread_t th;
	int e2 = epoll_create1(0), r, err;

	memset(&act, 0, sizeof(act));
	act.sa_handler = on_usr1;   /* no SA_RESTART: epoll_wait must fail with EINTR */
	sigemptyset(&act.sa_mask);
	sigaction(SIGUSR1, &act, NULL);
	sigaction(SIGUSR1, NULL, &old);
	CHECK("sigaction reports the program's handler", old.sa_handler == on_usr1 && !(old.sa_flags & SA_SIGINFO),
	      "handler %p flags %#x", (void *)old.sa_handler, old.sa_flags);
	pthread_create(&th, NULL, send_usr1, NULL);
	r = epoll_wait(e2, &ev, 1, 3000);
	err = errno;
	pthread_join(th, NULL);
	CHECK("a program signal interrupts epoll_wait with EINTR", r == -1 && err == EINTR && usr1 == 1,
	      "r %d errno %d handler ran %d times", r, err, (int)usr1);
	close(e2);
}

/* The unit goes over its threshold, then waits in epoll_wait: the watchdog's signal must not show. */
static void check_own_signal_hidden(void)
{
	struct epoll_event ev;
	int e2 = epoll_create1(0), r, err;
	long t0;

	burn_cpu(30);
	t0 = now_ms();
	r = epoll_wait(e2, &ev, 1, 400);
	err = errno;
	CHECK("the agent's signal never interrupts epoll_wait", r == 0 && now_ms() - t0 >= 390,
	      "r %d errno %d after %ld ms", r, err, now_ms() - t0);
	t0 = now_ms();
	{
		struct timespec ts = { 0, 300000000 }, rem = { 9, 9 };

		r = nanosleep(&ts, &rem);
		CHECK("nor nanosleep", r == 0 && now_ms() - t0 >= 290, "r %d after %ld ms", r, now_ms() - t0);
	}
	close(e2);
}

static void check_masks(void)
{
	sigset_t all, old, cur;
	int sig = SIGRTMAX - 7;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	CHECK("a blocked mask reads back as set", sigismember(&cur, sig) == 1 && sigismember(&cur, SIGUSR2) == 1,
	      "agent signal %d, SIGUSR2 %d", sigismember(&cur, sig), sigismember(&cur, SIGUSR2));
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	CHECK("and the restored one as restored", sigismember(&cur, sig) == sigismember(&old, sig) &&
						   sigismember(&cur, SIGUSR2) == sigismember(&old, SIGUSR2), "%s", "-");
}

static volatile sig_atomic_t taken;

static void on_taken(int sig)
{
	(void)sig;
	taken++;
}

static void check_take_signal(void)
{
	struct sigaction act, old;
	int sig = SIGRTMAX - 7;

	memset(&act, 0, sizeof(act));
	act.sa_handler = on_taken;
	sigemptyset(&act.sa_mask);
	sigaction(sig, &act, NULL);
	sigaction(sig, NULL, &old);
	CHECK("the program can take the agent's signal", old.sa_handler == on_taken, "%s", "-");
	syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
	burn_cpu(200);
	CHECK("and receives it exactly as sent, no timer's", taken == 1, "handler ran %d times", (int)taken);
}

static void fork_child_loop(void)
{
	burn_cpu(2);
}

static void check_fork(void)
{
	int st = 0;
	pid_t p = fork();

	if (p == 0) {
		for (int i = 0; i < 50; i++)
			in_unit(fork_child_loop);
		_exit(7);
	}
	CHECK("fork in a unit: the child runs units and exits", p > 0 && waitpid(p, &st, 0) == p &&
								    WIFEXITED(st) && WEXITSTATUS(st) == 7,
	      "status %#x", st);
}

static void check_exec(void)
{
	int st = 0;
	pid_t p;

	burn_cpu(30);   /* the CPU timer is armed now */
	p = fork();
	if (p == 0) {
		burn_cpu(30);
		execl("/bin/sh", "sh", "-c", "exit 3", (char *)NULL);
		_exit(99);
	}
	CHECK("exec after CPU work: no stray signal kills the new program",
	      p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x", st);
}

static void check_close_all(void)
{
	int p2[2], n = 0;
	DIR *d;

	if (pipe(p2) < 0)
		return;
	/* what daemons do: close everything but the standard descriptors and our loop */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != pipefd[0] && fd != pipefd[1] && fd != ep && fd != tfd)
			close(fd);
	CHECK("close() closes the program's descriptors", fcntl(p2[0], F_GETFD) == -1 && errno == EBADF, "%s", "-");
	if (pipe(p2) < 0)
		return;
	/* the loop's descriptors are 10 to 13 (main() put them there): close around them */
	close_range(3, 9, 0);
	closefrom(14);
	CHECK("close_range() and closefrom() too", fcntl(p2[0], F_GETFD) == -1 && errno == EBADF &&
						      fcntl(p2[1], F_GETFD) == -1 && errno == EBADF,
	      "p2 %d %d", p2[0], p2[1]);
	CHECK("and leave the rest open", fcntl(tfd, F_GETFD) >= 0 && fcntl(ep, F_GETFD) >= 0, "%s", "-");
	d = opendir("/proc/self/fd");
	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	CHECK("the process still lists its descriptors", n > 0, "%s", "-");
}

static int link_of(const char *path, char *buf, size_t n)
{
	ssize_t k = readlink(path, buf, n - 1);

	if (k < 0)
		return -1;
	buf[k] = 0;
	return 0;
}

/*
 * The agent's threads have descriptor tables of their own (so that the
 * kernel's fast paths for a table with one user still hold for the program):
 * none of the program's files may stay open in them, or closing a pipe or a
 * socket would no longer reach the other end.
 */
static void check_agent_tables(void)
{
	char path[300], comm[64], link[128], mine[2][128];
	int threads = 0, held = 0, n0 = 0, n1 = 0, top = -1;
	struct rlimit rl;
	struct pollfd pfd = { .events = POLLIN };
	DIR *task = opendir("/proc/self/task"), *d;
	struct dirent *e, *f;
	char b;

	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", early[i]);
		if (link_of(path, mine[i], sizeof(mine[i])) < 0)
			mine[i][0] = 0;
	}
	while (task && (e = readdir(task))) {
		FILE *fp;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		fp = fopen(path, "r");
		if (!fp)
			continue;
		if (!fgets(comm, sizeof(comm), fp))
			comm[0] = 0;
		fclose(fp);
		if (strncmp(comm, "smguard", 7) != 0)
			continue;
		threads++;
		snprintf(path, sizeof(path), "/proc/self/task/%s/fd", e->d_name);
		d = opendir(path);
		while (d && (f = readdir(d))) {
			char fdpath[600];

			snprintf(fdpath, sizeof(fdpath), "%s/%s", path, f->d_name);
			if (f->d_name[0] != '.' && link_of(fdpath, link, sizeof(link)) == 0 &&
			    (strcmp(link, mine[0]) == 0 || strcmp(link, mine[1]) == 0))
				held++;
		}
		if (d)
			closedir(d);
	}
	if (task)
		closedir(task);
	CHECK("the agent's threads hold none of the program's files", threads >= 1 && held == 0 && mine[0][0],
	      "%d agent threads, %d of the program's descriptors held", threads, held);
	d = opendir("/proc/self/fd");
	while (d && readdir(d))
		n0++;
	if (d)
		closedir(d);
	/* a violation: the shipping thread spools it, in files the program's table never sees */
	burn_cpu(40);
	d = opendir("/proc/self/fd");
	while (d && readdir(d))
		n1++;
	if (d)
		closedir(d);
	/* copies where the agent would put descriptors of its own in the program's table */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 128) {
		top = (int)((rl.rlim_cur > 65536 ? 65536 : rl.rlim_cur) - 64);
		for (int i = 0; i < 4; i++)
			if (dup2(early[1], top + i) < 0)
				top = -1;
	}
	close(early[1]);
	for (int i = 0; top >= 0 && i < 4; i++)
		close(top + i);
	pfd.fd = early[0];
	CHECK("closing a pipe the agent's threads saw open, and copies at the top of the range, reaches its reader",
	      top >= 0 && poll(&pfd, 1, 2000) == 1 && read(early[0], &b, 1) == 0 && n0 == n1,
	      "top %d, poll %#x, %d then %d descriptors", top, pfd.revents, n0, n1);
	close(early[0]);
}

static void noop(void)
{
}

static void slow_unit(void)
{
	burn_cpu(40);
}

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN };

	if (pipe(pipefd) < 0 || (ep = epoll_create1(0)) < 0 || (tfd = timerfd_create(CLOCK_MONOTONIC, 0)) < 0)
		return 2;
	/* at known numbers, 10 to 13, for the descriptor checks */
	if (dup2(pipefd[0], 10) < 0 || dup2(pipefd[1], 11) < 0 || dup2(ep, 12) < 0 || dup2(tfd, 13) < 0)
		return 2;
	close(pipefd[0]);
	close(pipefd[1]);
	close(ep);
	close(tfd);
	pipefd[0] = 10;
	pipefd[1] = 11;
	ep = 12;
	tfd = 13;
	ev.data.fd = tfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
	if (pipe(early) < 0)
		return 2;
	if (argc == 3 && strcmp(argv[1], "train") == 0) {
		int n = atoi(argv[2]);

		for (int i = 0; i < n; i++)
			in_unit(noop);
		return 0;
	}
	if (argc != 2 || strcmp(argv[1], "check") != 0) {
		fprintf(stderr, "usage: safety train N | safety check\n");
		return 2;
	}
	for (int i = 0; i < 20; i++)
		in_unit(noop);
	in_unit(check_errno);
	in_unit(check_program_signal);
	in_unit(check_own_signal_hidden);
	in_unit(check_masks);
	in_unit(check_fork);
	in_unit(check_exec);
	in_unit(slow_unit);       /* a violation before the descriptors go */
	in_unit(check_agent_tables);
	in_unit(check_close_all);
	in_unit(slow_unit);       /* and one after: the agent still ships it */
	in_unit(check_take_signal);
	for (int i = 0; i < 20; i++)
		in_unit(noop);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
