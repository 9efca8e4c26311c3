/*
 * libearlysig: a library whose constructor sets a signal handler before the guard agent starts
 * (preloaded after libsmguard.so, so initialised before it), as a runtime's crash handler would
 * be. Its SIGUSR1 handler forks and waits, so that test_guard can check that the agent counts it
 * like the handlers the program sets later (guardtest's "earlysig" request raises the signal).
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* read by guardtest (dlsym): how often the handler ran, and its last fork's result (0: a child
 * made and reaped) */
volatile sig_atomic_t earlysig_calls;
volatile sig_atomic_t earlysig_rc = -1;

void earlysig_handler(int sig);

void earlysig_handler(int sig)
{
	int st;
	pid_t p;

	(void)sig;
	p = fork();
	if (p == 0)
		_exit(0);
	earlysig_rc = p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) ? 0 : -1;
	earlysig_calls++;
}

__attribute__((constructor)) static void earlysig_init(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = earlysig_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}
