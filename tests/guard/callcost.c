/*
 * callcost: what one wrapped call costs inside a unit (make bench, guard
 * section). An event loop sleeps in epoll_wait on a timer; each unit makes N
 * read(fd, buf, 0) calls on /dev/null, the cheapest real system call; the
 * time of those calls, divided by their number, is printed in nanoseconds.
 * Run once without and once with the agent, the difference is the agent's
 * bookkeeping per call. An ordinary program: no stackmine code.
 *
 *   callcost UNITS CALLS [sock|cold]
 *
 * With `sock`, each call is a 1-byte write to one end of a socket pair or a
 * 1-byte read from the other, alternately (data moved: what deferred requests
 * follow, docs/guard.md "Deferred requests").
 *
 * With `cold`, the caches are filled with other data before each call (a walk
 * over 4 MiB, more than this machine's L1 and L2 together): a server's
 * requests run the kernel's and its own code between two wrapped calls, which
 * pushes the agent's code and data out, so what a call costs in such a program
 * is its cache misses as much as its instructions. Each call is paired with the
 * same system call made straight (syscall(2), never wrapped), and the figure is
 * the median over units of read()'s time above the bare call's.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

__attribute__((noinline)) void calls(int fd, int n)
{
	char b[8];

	for (int i = 0; i < n; i++)
		if (read(fd, b, 0) < 0)
			exit(1);
}

__attribute__((noinline)) void sock_calls(const int *sv, int n)
{
	char b = 'x';

	for (int i = 0; i + 1 < n; i += 2)
		if (write(sv[0], &b, 1) != 1 || read(sv[1], &b, 1) != 1)
			exit(1);
}

#define EVICT_BYTES (4u << 20)
#define MAX_UNITS 100000

static void evict_caches(volatile unsigned char *evict)
{
	for (unsigned o = 0; o < EVICT_BYTES; o += 64)
		evict[o]++;
}

/* A unit's calls, each after an eviction, alternately through read() (wrapped
 * when the agent is loaded) and straight to the kernel: what read() costs more
 * than the bare call, in ns. Paired call by call, the neighbours' load that
 * moves a walk's and a call's time by more than the difference cancels out. */
__attribute__((noinline)) double cold_calls(int fd, int n, volatile unsigned char *evict)
{
	long wrapped = 0, bare = 0;
	char b[8];

	for (int i = 0; i < n; i++) {
		long t0;

		evict_caches(evict);
		t0 = now_ns();
		if (read(fd, b, 0) < 0)
			exit(1);
		wrapped += now_ns() - t0;
		evict_caches(evict);
		t0 = now_ns();
		if (syscall(SYS_read, fd, b, 0) < 0)
			exit(1);
		bare += now_ns() - t0;
	}
	return (double)(wrapped - bare) / n;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int units = argc >= 3 ? atoi(argv[1]) : 0, n = argc >= 3 ? atoi(argv[2]) : 0;
	int sock = argc == 4 && argv[3][0] == 's', cold = argc == 4 && argv[3][0] == 'c', sv[2] = { -1, -1 };
	unsigned char *evict = cold ? calloc(1, EVICT_BYTES) : NULL;
	double *above = cold ? calloc(MAX_UNITS, sizeof(*above)) : NULL;
	int ep = epoll_create1(0), tfd = timerfd_create(CLOCK_MONOTONIC, 0), nul = open("/dev/null", O_RDONLY);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = tfd };
	long spent = 0;

	if (units <= 0 || n <= 0 || ep < 0 || tfd < 0 || nul < 0 || (cold && (!evict || !above || units > MAX_UNITS))) {
		fprintf(stderr, "usage: callcost UNITS CALLS [sock|cold]\n");
		return 2;
	}
	if (sock && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
	for (int u = 0; u < units; u++) {
		struct itimerspec its = { { 0, 0 }, { 0, 20000 } };
		unsigned long long ticks;
		long t0;

		timerfd_settime(tfd, 0, &its, NULL);
		if (epoll_wait(ep, &ev, 1, 1000) != 1 || read(tfd, &ticks, sizeof(ticks)) != sizeof(ticks))
			return 1;
		if (cold) {
			above[u] = cold_calls(nul, n, evict);
			continue;
		}
		t0 = now_ns();
		if (sock)
			sock_calls(sv, n);
		else
			calls(nul, n);
		spent += now_ns() - t0;
	}
	if (cold) {
		qsort(above, (size_t)units, sizeof(*above), by_value);
		printf("%.1f\n", above[units / 2]);
		return 0;
	}
	printf("%.1f\n", (double)spent / units / n);
	return 0;
}
