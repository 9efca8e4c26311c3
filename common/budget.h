/*
 * budget: how long a piece of work may go on. A deadline on the monotonic clock
 * and a flag another thread raises (a server's watchdog: the client went away,
 * the server is stopping). Long loops ask budget_over() now and then and give up
 * when it says so; a NULL budget never runs out (command-line tools).
 */
#ifndef SM_BUDGET_H
#define SM_BUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct budget {
	int64_t deadline_ns;        /* util_now_mono_ns() time; 0: none */
	const atomic_int *stop;     /* nonzero: stop now; NULL: none. Not owned */
};

/* Whether the work must stop: the flag is raised or the deadline has passed. b may be NULL. */
bool budget_over(const struct budget *b);
/* Milliseconds left before the deadline (at least 1 while it has not passed, 0 after it), or -1
 * without a deadline. */
int64_t budget_left_ms(const struct budget *b);

#endif
