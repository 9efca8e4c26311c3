/* par: data parallelism over the cores (see par.h). */
#include "common/par.h"

#include <pthread.h>
#include <unistd.h>

int par_threads(int requested)
{
	long t = requested;

	if (t <= 0)
		t = sysconf(_SC_NPROCESSORS_ONLN);
	if (t < 1)
		t = 1;
	if (t > PAR_MAX_THREADS)
		t = PAR_MAX_THREADS;
	return (int)t;
}

struct par_worker {
	void (*fn)(void *ctx, int w);
	void *ctx;
	int w;
};

static void *par_main(void *arg)
{
	struct par_worker *pw = arg;

	pw->fn(pw->ctx, pw->w);
	return NULL;
}

void par_run(int n, void (*fn)(void *ctx, int w), void *ctx)
{
	pthread_t th[PAR_MAX_THREADS];
	struct par_worker pw[PAR_MAX_THREADS];
	bool started[PAR_MAX_THREADS] = { false };
	int w;

	if (n > PAR_MAX_THREADS)
		n = PAR_MAX_THREADS;
	for (w = 1; w < n; w++) {
		pw[w] = (struct par_worker){ fn, ctx, w };
		started[w] = pthread_create(&th[w], NULL, par_main, &pw[w]) == 0;
	}
	if (n > 0)
		fn(ctx, 0);
	/* the workers whose thread could not start run here */
	for (w = 1; w < n; w++)
		if (!started[w])
			fn(ctx, w);
	for (w = 1; w < n; w++)
		if (started[w])
			pthread_join(th[w], NULL);
}
