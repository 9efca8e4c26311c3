/*
 * costwarm: the attributions and cost models of a done run's costliest clusters
 * and problems, computed ahead of their first view (see costwarm.h). One thread at nice 10 with
 * its own connection: the pages' connections and CPU come first. Its database backend is not
 * niced, so each fit also waits (a while at most) for the server's requests to be answered: on a
 * 2-core machine, fits alongside 8 busy connections took a page's p99 from 54 to 425 ms.
 */
#include "web/costwarm.h"
#include "common/db.h"
#include "common/log.h"
#include "common/util.h"
#include "web/model.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct costwarm {
	char *conninfo;               /* NULL: PG* environment */
	struct costcache *cache;
	int per_run, poll_ms;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;            /* the stop, for the wait between polls */
	bool stop;                    /* under mu */
	PGcancel *cancel;             /* under mu: the thread's connection, for the stop */
	int sock;                     /* under mu: its socket (-1: none), shut down by the stop */
	PGconn *db;                   /* the thread's */
	struct arena *a;              /* the thread's: one model at a time */
	char after[64];               /* the latest finished_at of the runs looked at */
	bool have_after, down;
	int64_t seen[256];            /* the runs looked at last, a ring (the look goes back 5 minutes) */
	unsigned nseen;
	const atomic_int *busy;       /* the server's requests in hand (NULL: never waits) */
	_Atomic uint64_t fitted, attributed, yielded_ms;
};

/* How long a fit waits at most for the server's requests to be answered, and how often it looks:
 * under a load that never pauses, fits still go on, one a second at least. */
#define YIELD_MAX_MS 1000
#define YIELD_STEP_MS 10

static bool stopping(struct costwarm *w)
{
	bool s;

	pthread_mutex_lock(&w->mu);
	s = w->stop;
	pthread_mutex_unlock(&w->mu);
	return s;
}

/* A connection, made again after an outage. Whether there is one. */
static bool connected(struct costwarm *w)
{
	char err[512];
	PGconn *db;

	if (w->db && PQstatus(w->db) == CONNECTION_OK)
		return true;
	pthread_mutex_lock(&w->mu);
	PQfreeCancel(w->cancel);
	w->cancel = NULL;
	w->sock = -1;
	pthread_mutex_unlock(&w->mu);
	if (w->db)
		PQfinish(w->db);
	w->db = NULL;
	if (!(db = db_connect(w->conninfo, err, sizeof(err)))) {
		if (!w->down)
			log_warn("cost models ahead of views: no database; trying again", "error=\"%s\"", err);
		w->down = true;
		return false;
	}
	/* named for pg_stat_activity; a fit stuck behind a lock gives up (its model is fitted at its
	 * view); finished_at read back as it was written, whatever the server's DateStyle */
	if (db_exec(db, "SET application_name = 'sm-web cost models'; SET statement_timeout = '60s';"
			" SET DateStyle = 'ISO, YMD'", err, sizeof(err)) < 0)
		log_warn("cost models ahead of views: setting up the connection", "error=\"%s\"", err);
	w->db = db;
	w->down = false;
	pthread_mutex_lock(&w->mu);
	w->cancel = PQgetCancel(db);
	w->sock = PQsocket(db);
	if (w->stop)
		shutdown(w->sock, SHUT_RDWR);   /* the stop came while connecting */
	pthread_mutex_unlock(&w->mu);
	return true;
}

/* Whether the connection is there to go on after a failed computation of (of, oid), which is logged
 * unless the thread is stopping. */
static bool failed(struct costwarm *w, enum attribution_of of, const char *oid, const char *what, const char *err)
{
	if (PQstatus(w->db) != CONNECTION_OK || stopping(w))
		return false;
	log_warn("cost models ahead of views: a fit failed", "%s=%s of=%s error=\"%s\"",
		 of == ATTRIBUTION_PROBLEM ? "problem" : "cluster", oid, what, err);
	return true;
}

/* Waits while the server has requests in hand, YIELD_MAX_MS at most; whether to go on (false: the
 * thread stops). */
static bool yield_to_pages(struct costwarm *w)
{
	struct timespec until;
	bool stop;
	int waited = 0;

	if (!w->busy)
		return !stopping(w);
	pthread_mutex_lock(&w->mu);
	while (!w->stop && waited < YIELD_MAX_MS && atomic_load(w->busy) > 0) {
		until = util_clock_after(CLOCK_MONOTONIC, YIELD_STEP_MS);
		pthread_cond_timedwait(&w->cv, &w->mu, &until);
		waited += YIELD_STEP_MS;
	}
	stop = w->stop;
	pthread_mutex_unlock(&w->mu);
	if (waited)
		atomic_fetch_add(&w->yielded_ms, (uint64_t)waited);
	return !stop;
}

/* The attribution and model of run id's costliest that the cache lacks. Whether the run was looked
 * at (false: the connection went away first). */
static bool warm_run(struct costwarm *w, const char *id)
{
	char err[512];
	PGresult *r = model_run_costliest(w->db, id, w->per_run, err, sizeof(err));
	int fitted = 0, attributed = 0;

	if (!r) {
		if (PQstatus(w->db) != CONNECTION_OK)
			return false;
		log_warn("cost models ahead of views: reading the run failed", "run=%s error=\"%s\"", id, err);
		return true;
	}
	for (int i = 0; i < PQntuples(r) && !stopping(w); i++) {
		enum attribution_of of = PQgetvalue(r, i, 0)[0] == 'p' ? ATTRIBUTION_PROBLEM : ATTRIBUTION_CLUSTER;
		const char *oid = PQgetvalue(r, i, 1);
		int64_t n = strtoll(oid, NULL, 10);
		struct attribution_costmodel cm;
		struct attribution at;

		arena_reset(w->a);
		if (costcache_get_attribution(w->cache, of, n, w->a, &at) != 1) {
			arena_reset(w->a);
			if (!yield_to_pages(w))
				break;
			if (attribution_compute(w->db, of, oid, w->a, &at, err, sizeof(err)) == 0) {
				costcache_put_attribution(w->cache, of, n, &at);
				atomic_fetch_add(&w->attributed, 1);
				attributed++;
			} else if (!failed(w, of, oid, "attribution", err)) {
				break;
			}
		}
		arena_reset(w->a);
		if (costcache_get(w->cache, of, n, w->a, &cm) == 1)
			continue;
		arena_reset(w->a);
		if (!yield_to_pages(w))
			break;
		if (attribution_costmodel(w->db, of, oid, w->a, &cm, err, sizeof(err)) < 0) {
			if (!failed(w, of, oid, "model", err))
				break;
			continue;
		}
		costcache_put(w->cache, of, n, &cm);
		atomic_fetch_add(&w->fitted, 1);
		fitted++;
	}
	PQclear(r);
	log_debug("cost models fitted ahead of views", "run=%s models=%d attributions=%d", id, fitted, attributed);
	return PQstatus(w->db) == CONNECTION_OK;
}

/* The runs done since the last look; each is looked at once (a failed fit waits for its view). */
static void warm_new_runs(struct costwarm *w)
{
	char err[512], ids[256 * 21 + 3];
	size_t len = 0;
	PGresult *r;

	/* the runs looked at: not again */
	ids[len++] = '{';
	for (unsigned i = 0; i < w->nseen && i < 256; i++) {
		int k = snprintf(ids + len, sizeof(ids) - len - 1, "%s%lld", i ? "," : "", (long long)w->seen[i]);

		if (k < 0 || (size_t)k >= sizeof(ids) - len - 1)
			break;   /* (sized for 256 ids of 20 characters: not reached) */
		len += (size_t)k;
	}
	ids[len++] = '}';
	ids[len] = '\0';
	r = model_runs_done_after(w->db, w->have_after ? w->after : NULL, ids, err, sizeof(err));

	if (!r) {
		if (PQstatus(w->db) == CONNECTION_OK)
			log_warn("cost models ahead of views: reading the runs failed", "error=\"%s\"", err);
		return;
	}
	for (int i = 0; i < PQntuples(r) && !stopping(w); i++) {
		int64_t run = strtoll(PQgetvalue(r, i, 0), NULL, 10);

		if (!warm_run(w, PQgetvalue(r, i, 0)))
			break;   /* looked at again once connected */
		w->seen[w->nseen++ % 256] = run;
		/* rows come oldest first: the last is the latest */
		snprintf(w->after, sizeof(w->after), "%s", PQgetvalue(r, i, 1));
		w->have_after = true;
	}
	PQclear(r);
}

static void *warm_main(void *arg)
{
	struct costwarm *w = arg;

	/* fits take CPU the pages need more */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10) < 0)
		log_warn("cannot lower the cost models' thread's priority", "error=\"%s\"", strerror(errno));
	for (;;) {
		struct timespec until;

		if (!stopping(w) && connected(w))
			warm_new_runs(w);
		until = util_clock_after(CLOCK_MONOTONIC, w->poll_ms);
		pthread_mutex_lock(&w->mu);
		while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
			;
		if (w->stop) {
			pthread_mutex_unlock(&w->mu);
			break;
		}
		pthread_mutex_unlock(&w->mu);
	}
	return NULL;
}

static void warm_free(struct costwarm *w)
{
	PQfreeCancel(w->cancel);
	if (w->db)
		PQfinish(w->db);
	arena_free(w->a);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w->conninfo);
	free(w);
}

struct costwarm *costwarm_start(const char *conninfo, struct costcache *cache, int per_run, int poll_ms,
				const atomic_int *busy, char *err, size_t errlen)
{
	struct costwarm *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&w->mu, NULL);
	/* the wait between polls on the monotonic clock: a step of the wall clock moves nothing */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	w->sock = -1;
	w->cache = cache;
	w->busy = busy;
	w->per_run = per_run;
	w->poll_ms = poll_ms > 0 ? poll_ms : 1000;
	w->a = arena_open(0);
	w->conninfo = conninfo ? strdup(conninfo) : NULL;
	if (!w->a || (conninfo && !w->conninfo)) {
		snprintf(err, errlen, "out of memory");
		goto fail_free;
	}
	if (pthread_create(&w->thread, NULL, warm_main, w) != 0) {
		snprintf(err, errlen, "cannot start a thread");
		goto fail_free;
	}
	return w;
fail_free:
	warm_free(w);
	return NULL;
}

void costwarm_stop(struct costwarm *w)
{
	char msg[256];

	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	/* a fit's query under way ends now, not when it is done; one about to be sent finds its
	 * socket shut */
	if (w->cancel)
		PQcancel(w->cancel, msg, sizeof(msg));
	if (w->sock >= 0)
		shutdown(w->sock, SHUT_RDWR);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	warm_free(w);
}

uint64_t costwarm_fitted(const struct costwarm *w)
{
	return w ? atomic_load(&w->fitted) : 0;
}

uint64_t costwarm_attributed(const struct costwarm *w)
{
	return w ? atomic_load(&w->attributed) : 0;
}

uint64_t costwarm_yielded_ms(const struct costwarm *w)
{
	return w ? atomic_load(&w->yielded_ms) : 0;
}
