/*
 * watch: what the workers do besides mining (docs/analysis.md, "Watching"):
 * queue the runs of due schedules, evaluate the alert rules on every run they
 * finish (a signature's cost per hour over a limit; a cluster new since the
 * previous run of its app and kind above a share of the run's cost), and
 * deliver the alerts to their webhooks (JSON POST with libcurl, retried with
 * backoff, given up after WATCH_MAX_ATTEMPTS). Every function takes the
 * worker's connection and leaves a message in err when it returns -1.
 */
#ifndef SM_WATCH_H
#define SM_WATCH_H
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#define WATCH_MAX_ATTEMPTS 8

/* Queues a run for every due schedule (next due time moved on first). Returns how many, or -1. */
int watch_schedules(PGconn *db, char *err, size_t errlen);

/* The alert rules on a run that is done: alerts stored (once per rule, run and cluster).
 * Returns how many alerts were new, or -1. */
int watch_run_done(PGconn *db, int64_t run_id, char *err, size_t errlen);

struct webhook_nets;
/* Delivers up to max due alerts, never to an address refused by common/webhook.h (allow: the
 * exceptions, NULL: none). Returns how many were delivered, or -1 (the database). */
int watch_deliver(PGconn *db, int max, const struct webhook_nets *allow, char *err, size_t errlen);

#endif
