/* watch: schedules, alert rules and webhook delivery (see watch.h). */
#include "miner/watch.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/webhook.h"
#include "miner/baseline.h"
#include "miner/compare.h"
#include "miner/params.h"
#include "miner/queue.h"

#include <curl/curl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES 512
#define WEBHOOK_TIMEOUT_S 10
#define LEASE_S (WEBHOOK_TIMEOUT_S + 50)   /* an alert being delivered is not taken again meanwhile */

static int db_error(char *err, size_t errlen, const char *what, PGresult *r, PGconn *db)
{
	db_errcpy(err, errlen, what, r ? PQresultErrorMessage(r) : PQerrorMessage(db));
	PQclear(r);
	return -1;
}

static PGresult *exec1(PGconn *db, const char *sql, const char *p1)
{
	const char *p[1] = { p1 };

	return PQexecParams(db, sql, 1, NULL, p, NULL, NULL, 0);
}

/* ---- schedules ---- */

/* $1: the time format; the run's parameters are the schedule's with app, kind and the window */
static const char SQL_CLAIM[] =
	"WITH due AS (SELECT id FROM schedules WHERE enabled AND next_at <= now() ORDER BY next_at, id LIMIT 1"
	"  FOR UPDATE SKIP LOCKED)"
	" UPDATE schedules s SET next_at = greatest(s.next_at + make_interval(secs => s.every_s),"
	"  now() + make_interval(secs => s.every_s / 2)) FROM due WHERE s.id = due.id"
	" RETURNING s.id, (s.params || jsonb_build_object('app', s.app, 'kind', s.kind, 'filter',"
	"  coalesce(s.params->'filter', '{}') || jsonb_build_object("
	"   'since', to_char((now() - make_interval(secs => s.window_s)) AT TIME ZONE 'UTC', $1),"
	"   'until', to_char(now() AT TIME ZONE 'UTC', $1))))::text";

int watch_schedules(PGconn *db, char *err, size_t errlen)
{
	int queued = 0;

	for (int i = 0; i < 100; i++) {
		PGresult *r;
		struct run_params p;
		struct arena *a;
		char perr[256], sid[24], rid[24];
		const char *params[2] = { rid, sid };
		int64_t run_id;

		r = PQexec(db, "BEGIN");
		PQclear(r);
		r = exec1(db, SQL_CLAIM, "YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"");
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			PQclear(PQexec(db, "ROLLBACK"));
			return db_error(err, errlen, "taking a due schedule", r, db);
		}
		if (PQntuples(r) == 0) {
			PQclear(r);
			PQclear(PQexec(db, "COMMIT"));
			break;
		}
		snprintf(sid, sizeof(sid), "%s", PQgetvalue(r, 0, 0));
		a = arena_open(0);
		if (!a || params_parse(PQgetvalue(r, 0, 1), (size_t)PQgetlength(r, 0, 1), a, &p, perr, sizeof(perr)) < 0) {
			/* checked when it was made: only a schema change can get here; it stays due later */
			log_error("a schedule's parameters are refused", "schedule=%s error=\"%s\"", sid, a ? perr : "oom");
			arena_free(a);
			PQclear(r);
			PQclear(PQexec(db, "COMMIT"));
			continue;
		}
		PQclear(r);
		if (miner_enqueue_db(db, &p, &run_id, err, errlen) < 0) {
			arena_free(a);
			PQclear(PQexec(db, "ROLLBACK"));
			return -1;
		}
		arena_free(a);
		snprintf(rid, sizeof(rid), "%lld", (long long)run_id);
		r = PQexecParams(db, "WITH u AS (UPDATE runs SET schedule_id = $2::bigint WHERE id = $1::bigint)"
				     " UPDATE schedules SET last_run = $1::bigint WHERE id = $2::bigint",
				 2, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			PQclear(PQexec(db, "ROLLBACK"));
			return db_error(err, errlen, "recording the scheduled run", r, db);
		}
		PQclear(r);
		r = PQexec(db, "COMMIT");
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			return db_error(err, errlen, "queueing the scheduled run", r, db);
		PQclear(r);
		log_info("scheduled run queued", "schedule=%s run=%s", sid, rid);
		queued++;
	}
	return queued;
}

/* ---- alert rules ---- */

struct run_info {
	int64_t id;
	const char *app, *kind, *id_text;
	int64_t since, until;      /* ns; PARAMS_NO_TIME when the run has no window */
	int64_t schedule;          /* 0: none */
	double total_cost;         /* the run's AOI cost, ns */
};

/* Stores an alert (once per rule, run and cluster). Returns 1 when new, 0 when known, -1. */
static int store_alert(PGconn *db, const char *rule_id, const char *rule, const char *type, const struct run_info *ri,
		       int64_t cluster, double value, double limit, const char *message, char *err, size_t errlen)
{
	struct buf payload = BUF_INIT(0);
	struct jsonw w;
	char cid[24];
	const char *params[5] = { rule_id, ri->id_text, cluster ? cid : NULL, message, NULL };
	PGresult *r;
	int rc;

	snprintf(cid, sizeof(cid), "%lld", (long long)cluster);
	jsonw_init_compact(&w, &payload);
	jsonw_object(&w);
	jsonw_kstr(&w, "rule", rule);
	jsonw_kstr(&w, "type", type);
	jsonw_kstr(&w, "app", ri->app);
	jsonw_ki64(&w, "run_id", ri->id);
	if (cluster)
		jsonw_ki64(&w, "cluster_id", cluster);
	else
		jsonw_knull(&w, "cluster_id");
	/* ns per hour for signature_cost, shares of the run's cost for new_cluster */
	jsonw_kdouble(&w, "value", cluster ? value : round(value));
	jsonw_kdouble(&w, "limit", cluster ? limit : round(limit));
	jsonw_kstr(&w, "message", message);
	jsonw_end(&w);
	if (jsonw_finish(&w) < 0) {
		buf_release(&payload);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	params[4] = buf_cstr(&payload);
	r = PQexecParams(db, "INSERT INTO alerts (rule_id, run_id, cluster_id, message, payload)"
			     " VALUES ($1::bigint, $2::bigint, $3::bigint, $4, $5::jsonb) ON CONFLICT DO NOTHING",
			 5, NULL, params, NULL, NULL, 0);
	buf_release(&payload);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		return db_error(err, errlen, "storing an alert", r, db);
	rc = strcmp(PQcmdTuples(r), "1") == 0;
	PQclear(r);
	if (rc)
		log_info("alert", "rule=\"%s\" run=%lld message=\"%s\"", rule, (long long)ri->id, message);
	return rc;
}

/* A signature's cost in the run, per hour of its window, against the limit. */
static int rule_signature(PGconn *db, PGresult *rule, int row, const struct run_info *ri, char *err, size_t errlen)
{
	int32_t sig[MAX_FRAMES], fr[MAX_FRAMES];
	double cost = 0, hours, per_hour, limit = (double)db_get_i64(rule, row, 4);
	int ns, rc;
	char msg[512];
	PGresult *r;

	if (ri->since == PARAMS_NO_TIME || ri->until == PARAMS_NO_TIME || ri->until <= ri->since)
		return 0;   /* a cost per hour needs the run's window */
	r = exec1(db, "SELECT (SELECT array_agg(coalesce(f.canon_id, f.id) ORDER BY o.i) FROM unnest(s.frames) WITH ORDINALITY o(name, i)"
		      " JOIN frames f ON f.name = o.name)::text, cardinality(s.frames), s.name FROM signatures s"
		      " WHERE s.id = $1::bigint", PQgetvalue(rule, row, 3));
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return db_error(err, errlen, "reading the rule's signature", r, db);
	if (PQntuples(r) == 0 || PQgetisnull(r, 0, 0) ||
	    (ns = db_parse_int_array(PQgetvalue(r, 0, 0), sig, MAX_FRAMES)) != (int)db_get_i64(r, 0, 1)) {
		PQclear(r);   /* a frame this database never saw: the signature costs nothing here */
		return 0;
	}
	snprintf(msg, sizeof(msg), "%s", PQgetvalue(r, 0, 2));
	PQclear(r);
	r = exec1(db, "SELECT sm_canon_frames(s.frame_ids)::text, sum(rs.cost_ns)::float8 FROM run_stacks rs JOIN stacks s"
		      " ON s.id = rs.stack_id WHERE rs.run_id = $1::bigint GROUP BY s.id", ri->id_text);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return db_error(err, errlen, "reading the run's stacks", r, db);
	for (int i = 0; i < PQntuples(r); i++) {
		int n = db_parse_int_array(PQgetvalue(r, i, 0), fr, MAX_FRAMES);

		if (n > 0 && baseline_end((const uint32_t *)sig, (uint32_t)ns, (const uint32_t *)fr, (uint32_t)n))
			cost += strtod(PQgetvalue(r, i, 1), NULL);
	}
	PQclear(r);
	hours = (double)(ri->until - ri->since) / 3.6e12;
	per_hour = cost / hours;
	if (per_hour <= limit)
		return 0;
	{
		char text[800];

		snprintf(text, sizeof(text), "signature %.255s costs %.3f s per hour in run %lld (%.255s), over its limit"
			 " of %.3f s", msg, per_hour / 1e9, (long long)ri->id, ri->app, limit / 1e9);
		rc = store_alert(db, PQgetvalue(rule, row, 0), PQgetvalue(rule, row, 1), "signature_cost", ri, 0, per_hour,
				 limit, text, err, errlen);
	}
	return rc;
}

/* Clusters new since the previous run of the app and kind (the schedule's first), above a share. */
static int rule_new_cluster(PGconn *db, PGresult *rule, int row, const struct run_info *ri, char *err,
			    size_t errlen)
{
	double share = strtod(PQgetvalue(rule, row, 5), NULL);
	const char *params[4] = { ri->id_text, ri->app, ri->kind, NULL };
	char sched[24];
	struct compare_opts o;
	struct compare *cmp;
	int64_t prev;
	int n = 0, rc;
	PGresult *r;

	snprintf(sched, sizeof(sched), "%lld", (long long)ri->schedule);
	params[3] = ri->schedule ? sched : NULL;
	r = PQexecParams(db, "SELECT id FROM runs WHERE status = 'done' AND id < $1::bigint AND params->>'app' = $2"
			     " AND params->>'kind' = $3 ORDER BY schedule_id IS NOT DISTINCT FROM $4::bigint DESC, id DESC"
			     " LIMIT 1", 4, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return db_error(err, errlen, "finding the previous run", r, db);
	if (PQntuples(r) == 0 || ri->total_cost <= 0) {
		PQclear(r);
		return 0;
	}
	prev = db_get_i64(r, 0, 0);
	PQclear(r);
	compare_opts_init(&o);
	o.threads = 1;
	rc = compare_runs(db, prev, ri->id, &o, &cmp, err, errlen);
	if (rc != 0)
		return rc > 0 ? 0 : -1;
	for (size_t i = 0; i < cmp->n; i++) {
		const struct compare_row *cr = &cmp->rows[i];
		double cost = cr->b_cps * (double)cmp->b_streams;
		char msg[512];

		if (cr->status != CMP_NEW || cost < share * ri->total_cost)
			continue;
		snprintf(msg, sizeof(msg), "a new %s cluster %lld in run %lld (%s): %.3f s, %.1f %% of the run's cost,"
			 " not in run %lld", cr->kind == 'w' ? "wait" : "run", (long long)cr->b, (long long)ri->id,
			 ri->app, cost / 1e9, 100 * cost / ri->total_cost, (long long)prev);
		rc = store_alert(db, PQgetvalue(rule, row, 0), PQgetvalue(rule, row, 1), "new_cluster", ri, cr->b,
				 cost / ri->total_cost, share, msg, err, errlen);
		if (rc < 0) {
			compare_free(cmp);
			return -1;
		}
		n += rc;
	}
	compare_free(cmp);
	return n;
}

int watch_run_done(PGconn *db, int64_t run_id, char *err, size_t errlen)
{
	struct run_info ri;
	char idt[24];
	PGresult *r, *rules;
	int n = 0;

	memset(&ri, 0, sizeof(ri));
	snprintf(idt, sizeof(idt), "%lld", (long long)run_id);
	ri.id = run_id;
	ri.id_text = idt;
	r = exec1(db, "SELECT params->>'app', params->>'kind', params->'filter'->>'since', params->'filter'->>'until',"
		      " coalesce(schedule_id, 0), (SELECT coalesce(sum(cost_ns), 0)::float8 FROM run_stacks WHERE run_id = runs.id)"
		      " FROM runs WHERE id = $1::bigint AND status = 'done'", idt);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return db_error(err, errlen, "reading the run", r, db);
	if (PQntuples(r) == 0) {
		PQclear(r);
		return 0;
	}
	ri.app = PQgetvalue(r, 0, 0);
	ri.kind = PQgetvalue(r, 0, 1);
	ri.since = ri.until = PARAMS_NO_TIME;
	if (!PQgetisnull(r, 0, 2) && params_parse_time(PQgetvalue(r, 0, 2), &ri.since) < 0)
		ri.since = PARAMS_NO_TIME;
	if (!PQgetisnull(r, 0, 3) && params_parse_time(PQgetvalue(r, 0, 3), &ri.until) < 0)
		ri.until = PARAMS_NO_TIME;
	ri.schedule = db_get_i64(r, 0, 4);
	ri.total_cost = strtod(PQgetvalue(r, 0, 5), NULL);
	rules = exec1(db, "SELECT id, name, type, signature_id, limit_ns_per_hour, min_share FROM alert_rules"
			  " WHERE enabled AND (app IS NULL OR app = $1) ORDER BY id", ri.app);
	if (PQresultStatus(rules) != PGRES_TUPLES_OK) {
		PQclear(r);
		return db_error(err, errlen, "reading the alert rules", rules, db);
	}
	for (int i = 0; i < PQntuples(rules); i++) {
		int rc = strcmp(PQgetvalue(rules, i, 2), "signature_cost") == 0 ? rule_signature(db, rules, i, &ri, err, errlen)
									       : rule_new_cluster(db, rules, i, &ri, err, errlen);
		if (rc < 0) {
			PQclear(rules);
			PQclear(r);
			return -1;
		}
		n += rc;
	}
	PQclear(rules);
	PQclear(r);
	return n;
}

/* ---- delivery ---- */

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * n;
}

struct target {
	const struct webhook_nets *allow;
	bool refused;               /* an address it resolved to was not allowed */
};

/* Every connection a delivery makes, after DNS: a refused address is never connected to. */
static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct target *t = ctx;

	(void)purpose;
	if (!webhook_addr_ok(t->allow, &a->addr)) {
		t->refused = true;
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype, a->protocol);
}

/* POSTs the payload; 0 on a 2xx, else -1 with why in err: what users see, the same whatever
 * listens or not at a refused address (the details go to the log). */
static int post(const char *url, const char *body, const struct webhook_nets *allow, char *err, size_t errlen)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	struct target t = { allow, false };
	long code = 0;
	CURLcode rc;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	h = curl_slist_append(h, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "stackmine-alerts/1");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)WEBHOOK_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &t);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (t.refused) {
		snprintf(err, errlen, "not delivered: the webhook's address is not allowed (--webhook-allow)");
		return -1;
	}
	if (rc != CURLE_OK) {
		log_warn("webhook not reached", "error=\"%s\"", curl_easy_strerror(rc));
		snprintf(err, errlen, "not delivered: no answer from the webhook");
		return -1;
	}
	if (code < 200 || code > 299) {
		snprintf(err, errlen, "HTTP %ld", code);
		return -1;
	}
	return 0;
}

int watch_deliver(PGconn *db, int max, const struct webhook_nets *allow, char *err, size_t errlen)
{
	char lease[24];
	const char *params[1] = { lease };
	int delivered = 0;

	snprintf(lease, sizeof(lease), "%d", LEASE_S);
	/* one at a time, leased for longer than its post may take: another worker leaves it alone */
	for (int i = 0; i < max; i++) {
		char why[256], backoff[24], taken[24];
		const char *p[4] = { NULL, why, backoff, taken };
		PGresult *r, *u;
		int attempts;

		r = PQexecParams(db, "UPDATE alerts a SET attempts = attempts + 1,"
				     " next_attempt_at = now() + make_interval(secs => $1::int)"
				     " FROM alert_rules r WHERE r.id = a.rule_id AND a.id = (SELECT id FROM alerts"
				     "  WHERE delivery = 'pending' AND next_attempt_at <= now() ORDER BY id LIMIT 1"
				     "  FOR UPDATE SKIP LOCKED)"
				     " RETURNING a.id, a.payload::text, r.webhook, a.attempts", 1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			return db_error(err, errlen, "taking a due alert", r, db);
		if (PQntuples(r) == 0) {
			PQclear(r);
			break;
		}
		p[0] = PQgetvalue(r, 0, 0);
		attempts = (int)db_get_i64(r, 0, 3);
		snprintf(taken, sizeof(taken), "%d", attempts);
		/* the updates below only touch the alert as this worker took it */
		if (post(PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 1), allow, why, sizeof(why)) == 0) {
			const char *pd[2] = { p[0], taken };

			u = PQexecParams(db, "UPDATE alerts SET delivery = 'delivered', delivered_at = now(), last_error = NULL"
					     " WHERE id = $1::bigint AND delivery = 'pending' AND attempts = $2::int",
					 2, NULL, pd, NULL, NULL, 0);
			delivered++;
		} else {
			/* 30 s, 1 min, 2 min ... at most an hour; given up after the last attempt */
			long wait_s = 30L << (attempts > 1 ? (attempts - 1 < 7 ? attempts - 1 : 7) : 0);

			snprintf(backoff, sizeof(backoff), "%ld", wait_s < 3600 ? wait_s : 3600);
			log_warn("alert not delivered", "alert=%s attempt=%d error=\"%s\"", p[0], attempts, why);
			if (attempts >= WATCH_MAX_ATTEMPTS) {
				const char *pf[3] = { p[0], why, taken };

				u = PQexecParams(db, "UPDATE alerts SET delivery = 'failed', last_error = $2 WHERE id = $1::bigint"
						     " AND delivery = 'pending' AND attempts = $3::int", 3, NULL, pf, NULL, NULL, 0);
			} else {
				u = PQexecParams(db, "UPDATE alerts SET last_error = $2, next_attempt_at = now() + make_interval("
						     "secs => $3::int) WHERE id = $1::bigint AND delivery = 'pending'"
						     " AND attempts = $4::int", 4, NULL, p, NULL, NULL, 0);
			}
		}
		PQclear(r);
		if (PQresultStatus(u) != PGRES_COMMAND_OK)
			return db_error(err, errlen, "recording a delivery", u, db);
		PQclear(u);
	}
	return delivered;
}
