/* worker: a worker's loop of runs, parts, schedules and alerts (see worker.h). */
#include "miner/worker.h"
#include "common/arena.h"
#include "common/log.h"
#include "miner/partrun.h"
#include "miner/parts.h"
#include "miner/queue.h"
#include "miner/run.h"
#include "miner/watch.h"

#include <poll.h>

/* Between runs: the due schedules' runs queued, the due alerts delivered (watch.h). A failure is
 * logged; the worker goes on mining. */
static void watch_tick(struct miner *m)
{
	char err[512];

	if (watch_schedules(miner_db(m), err, sizeof(err)) < 0)
		log_error("scheduling runs failed", "error=\"%s\"", err);
	if (watch_deliver(miner_db(m), 20, miner_options(m)->webhook_allow, err, sizeof(err)) < 0)
		log_error("delivering alerts failed", "error=\"%s\"", err);
}

/* After a run: its alerts, delivered at once. */
static void watch_done(struct miner *m, int64_t id)
{
	char err[512];

	if (watch_run_done(miner_db(m), id, err, sizeof(err)) < 0)
		log_error("alert rules failed", "run=%lld error=\"%s\"", (long long)id, err);
	else if (watch_deliver(miner_db(m), 20, miner_options(m)->webhook_allow, err, sizeof(err)) < 0)
		log_error("delivering alerts failed", "error=\"%s\"", err);
}

/* Sleeps ms, waking early when the run is cancelled. */
static void nap(const struct miner *m, int ms)
{
	for (; ms > 0 && !(miner_options(m)->cancel && *miner_options(m)->cancel); ms -= 100)
		poll(NULL, 0, ms < 100 ? ms : 100);
}

/* Takes a part of another worker's run and extracts it: 1 when there was one, else 0. */
static int work_part(struct miner *m)
{
	struct parts_claim c;
	int got = parts_claim(m, 0, &c);

	if (got < 0)
		log_error("taking a part failed", "error=\"%s\"", miner_error(m));
	if (got <= 0)
		return 0;
	switch (partrun_execute(m, &c)) {
	case 0: log_info("part done", "run=%lld part=%d", (long long)c.run_id, c.part); break;
	case 1: log_warn("part taken over by another worker", "run=%lld part=%d", (long long)c.run_id, c.part); break;
	default: log_error("part failed", "run=%lld part=%d error=\"%s\"", (long long)c.run_id, c.part, miner_error(m));
	}
	return 1;
}

int miner_work(struct miner *m, bool once)
{
	int rc = 0;

	log_info("worker started", "%s", "");
	while (!(miner_options(m)->cancel && *miner_options(m)->cancel)) {
		struct arena *a;
		struct run_params p;
		int64_t id;
		int got;

		watch_tick(m);
		/* parts of runs in progress come before new runs */
		if (work_part(m) > 0)
			continue;
		a = arena_open(0);
		got = a ? miner_claim(m, a, &id, &p) : (miner_fail(m, "out of memory"), -1);

		if (got < 0) {
			log_error("taking a run failed", "error=\"%s\"", miner_error(m));
			arena_free(a);
			if (once) {
				rc = -1;
				break;
			}
			nap(m, 5000);
			continue;
		}
		if (got == 0) {
			arena_free(a);
			if (once)
				break;
			if (miner_wait(m, 5000) < 0) {
				log_error("waiting for runs failed", "error=\"%s\"", miner_error(m));
				nap(m, 5000);
			}
			continue;
		}
		log_info("run taken", "run=%lld app=\"%s\"", (long long)id, p.app);
		switch (miner_execute(m, id, &p)) {
		case 0:
			log_info("run done", "run=%lld", (long long)id);
			watch_done(m, id);
			break;
		case 1: log_warn("run given back to the queue", "run=%lld", (long long)id); break;
		case 2:
			log_warn("run queued again: the database went away", "run=%lld error=\"%s\"", (long long)id,
				 miner_error(m));
			break;
		default: log_error("run failed", "run=%lld error=\"%s\"", (long long)id, miner_error(m));
		}
		arena_free(a);
	}
	log_info("worker stopped", "%s", "");
	return rc;
}
