/*
 * callcost: what one wrapped call costs inside a unit (make bench, guard
 * section). An event loop sleeps in epoll_wait on a timer; each unit makes N
 * read(fd, buf, 0) calls on /dev/null, the cheapest real system call; the
 * time of those calls, divided by their number, is printed in nanoseconds.
 * Run once without and once with the agent, the difference is the agent's
 * bookkeeping per call. An ordinary program: no stackmine code.
 *
 *   callcost UNITS CALLS [sock]
 *
 * With `sock`, each call is a 1-byte write to one end of a socket pair or a
 * 1-byte read from the other, alternately (data moved: what deferred requests
 * follow, docs/guard.md "Deferred requests").
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
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

int main(int argc, char **argv)
{
	int units = argc >= 3 ? atoi(argv[1]) : 0, n = argc >= 3 ? atoi(argv[2]) : 0;
	int sock = argc == 4 && argv[3][0] == 's', sv[2] = { -1, -1 };
	int ep = epoll_create1(0), tfd = timerfd_create(CLOCK_MONOTONIC, 0), nul = open("/dev/null", O_RDONLY);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = tfd };
	long spent = 0;

	if (units <= 0 || n <= 0 || ep < 0 || tfd < 0 || nul < 0) {
		fprintf(stderr, "usage: callcost UNITS CALLS [sock]\n");
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
		t0 = now_ns();
		if (sock)
			sock_calls(sv, n);
		else
			calls(nul, n);
		spent += now_ns() - t0;
	}
	printf("%.1f\n", (double)spent / units / n);
	return 0;
}
