/* heartbeat: a run's heartbeat and progress on a thread and a connection of their own (see heartbeat.h). */
#include "miner/heartbeat.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "miner/queue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct beat {
	struct miner *m;
	int64_t run_id;
	struct beat_progress *prog;
	PGconn *db;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
};

static void progress_json(struct beat_progress *p, struct buf *b)
{
	struct jsonw w;

	buf_reset(b);
	jsonw_init_compact(&w, b);
	jsonw_object(&w);
	jsonw_kstr(&w, "phase", atomic_load(&p->phase));
	jsonw_ku64(&w, "streams_read", atomic_load(&p->streams_read));
	jsonw_ku64(&w, "streams", atomic_load(&p->streams_total));
	jsonw_ku64(&w, "aoi_events", atomic_load(&p->aoi_events));
	jsonw_ku64(&w, "distinct_stacks", atomic_load(&p->stacks));
	jsonw_ku64(&w, "patterns", atomic_load(&p->patterns));
	jsonw_end(&w);
	/* a progress line that could not be written is skipped: the heartbeat goes on */
	if (jsonw_finish(&w) < 0)
		buf_reset(b);
}

static void *beat_main(void *arg)
{
	struct beat *bt = arg;
	struct buf b = BUF_INIT(0);
	char idbuf[24];
	int ticks = 0;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)bt->run_id);
	pthread_mutex_lock(&bt->lock);
	while (!bt->stop) {
		struct timespec ts;
		const char *params[3];

		pthread_mutex_unlock(&bt->lock);
		progress_json(bt->prog, &b);
		params[0] = bt->run_id ? idbuf : miner_worker(bt->m);
		params[1] = buf_cstr(&b);
		params[2] = miner_worker(bt->m);
		if (bt->db) {
			/* the run's progress (with its parts'), and the parts this worker has - only its
			 * own: a run taken over by another worker is that one's to keep alive */
			PGresult *r = bt->run_id
				? PQexecParams(bt->db, "WITH p AS (UPDATE run_parts SET heartbeat_at = now()"
					       "  WHERE run_id = $1 AND status = 'running' AND worker = $3"
					       "  AND EXISTS (SELECT 1 FROM runs WHERE id = $1 AND worker = $3))"
					       " UPDATE runs SET heartbeat_at = now(), progress = $2::jsonb ||"
					       " coalesce((SELECT jsonb_build_object('parts', count(*), 'parts_done',"
					       "   count(*) FILTER (WHERE status = 'done')) FROM run_parts"
					       "   WHERE run_id = $1 HAVING count(*) > 0), '{}')"
					       " WHERE id = $1 AND worker = $3 AND status = 'running'",
					       3, NULL, params, NULL, NULL, 0)
				: PQexecParams(bt->db, "UPDATE run_parts SET heartbeat_at = now() WHERE worker = $1"
					       " AND status = 'running'", 1, NULL, params, NULL, NULL, 0);
			/* a lost connection would let another worker take the run: get it back */
			if (PQresultStatus(r) != PGRES_COMMAND_OK && PQstatus(bt->db) != CONNECTION_OK)
				PQreset(bt->db);
			PQclear(r);
		}
		if (bt->run_id && miner_options(bt->m)->progress && ticks++ % 2 == 0)
			log_info("run progress", "run=%s progress=%s", idbuf, buf_cstr(&b));
		pthread_mutex_lock(&bt->lock);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		if (!bt->stop)
			pthread_cond_timedwait(&bt->cond, &bt->lock, &ts);
	}
	pthread_mutex_unlock(&bt->lock);
	buf_release(&b);
	return NULL;
}

struct beat *beat_open(struct miner *m, int64_t run_id, struct beat_progress *prog)
{
	struct beat *bt = calloc(1, sizeof(*bt));
	char err[256];

	if (!bt) {
		miner_fail(m, "out of memory");
		return NULL;
	}
	bt->m = m;
	bt->run_id = run_id;
	bt->prog = prog;
	bt->db = db_connect(miner_conninfo(m), err, sizeof(err));
	if (!bt->db) {
		miner_fail(m, "%s", err);
		goto fail_free;
	}
	pthread_mutex_init(&bt->lock, NULL);
	pthread_cond_init(&bt->cond, NULL);
	if (pthread_create(&bt->thread, NULL, beat_main, bt) != 0) {
		miner_fail(m, "cannot start the heartbeat thread");
		goto fail_sync;
	}
	return bt;
fail_sync:
	pthread_mutex_destroy(&bt->lock);
	pthread_cond_destroy(&bt->cond);
	PQfinish(bt->db);
fail_free:
	free(bt);
	return NULL;
}

void beat_free(struct beat *bt)
{
	if (!bt)
		return;
	pthread_mutex_lock(&bt->lock);
	bt->stop = true;
	pthread_cond_signal(&bt->cond);
	pthread_mutex_unlock(&bt->lock);
	pthread_join(bt->thread, NULL);
	PQfinish(bt->db);
	pthread_mutex_destroy(&bt->lock);
	pthread_cond_destroy(&bt->cond);
	free(bt);
}
