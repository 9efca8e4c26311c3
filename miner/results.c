/* results: a run's results written in one transaction (see results.h). */
#include "miner/results.h"
#include "clusterer/runclust.h"
#include "common/buf.h"
#include "common/intern.h"
#include "common/vec.h"
#include "common/wire.h"
#include "miner/matches.h"
#include "miner/queue.h"
#include "miner/runstate.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int copy_begin(struct miner *m, const char *sql)
{
	PGresult *r = PQexec(miner_db(m), sql);

	if (PQresultStatus(r) != PGRES_COPY_IN)
		return miner_db_fail(m, "storing results", r);
	PQclear(r);
	return 0;
}

static int copy_send(struct miner *m, struct buf *b, bool force)
{
	if (buf_error(b) != BUF_OK) {
		return miner_fail(m, "storing results: %s", buf_error_text(b));
	}
	if ((b->len >= (1u << 20) || force) && b->len &&
	    PQputCopyData(miner_db(m), b->data, (int)b->len) != 1)
		return miner_db_fail(m, "storing results", NULL);
	if (b->len >= (1u << 20) || force)
		buf_reset(b);
	return 0;
}

static int copy_end(struct miner *m)
{
	PGresult *r;
	int rc = 0;

	if (PQputCopyEnd(miner_db(m), NULL) != 1)
		return miner_db_fail(m, "storing results", NULL);
	while ((r = PQgetResult(miner_db(m)))) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc)
			rc = miner_db_fail(m, "storing results", r);
		else
			PQclear(r);
	}
	return rc;
}

void results_rows_release(struct results_rows *rr)
{
	buf_release(&rr->clusters);
	buf_release(&rr->problems);
	buf_release(&rr->match_streams);
	buf_release(&rr->match_values);
	buf_release(&rr->stack_totals);
}

/* What an earlier attempt at the run may have left of its matches. */
static const char *const match_tables[] = {
	"DELETE FROM run_stack_totals WHERE run_id = $1",
	"DELETE FROM match_streams WHERE run_id = $1",
	"DELETE FROM match_values WHERE run_id = $1",
};

/* COPY of rows (all of them in b) into the columns of table. */
static int copy_rows(struct miner *m, const char *sql, const struct buf *b)
{
	if (copy_begin(m, sql) < 0)
		return -1;
	if (buf_error(b) != BUF_OK)
		return miner_fail(m, "storing results: %s", buf_error_text(b));
	for (size_t at = 0; at < b->len; at += 1u << 20) {
		size_t n = b->len - at < (1u << 20) ? b->len - at : 1u << 20;

		if (PQputCopyData(miner_db(m), b->data + at, (int)n) != 1)
			return miner_db_fail(m, "storing results", NULL);
	}
	return copy_end(m);
}

int results_store(struct runstate *run, const struct stackinfo *si, const struct vec *patterns,
		  const struct results_rows *rows, const char *counts, int64_t t_run, int64_t t_store)
{
	char timings[256];
	struct miner *m = run->m;
	const struct entry *en = run->entries.data;
	struct pattern *pt = patterns->data;
	struct buf b = BUF_INIT(0);
	char idbuf[24];
	const char *params[4];
	PGresult *r;
	int rank = 0;
	uint8_t last_kind = 0xff;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)run->id);
	params[0] = idbuf;
	if (miner_exec(m, "BEGIN") < 0)
		return -1;
	r = PQexecParams(miner_db(m), "DELETE FROM run_stacks WHERE run_id = $1", 1, NULL, params, NULL, NULL, 0);
	PQclear(r);
	r = PQexecParams(miner_db(m), "DELETE FROM patterns WHERE run_id = $1", 1, NULL, params, NULL, NULL, 0);
	PQclear(r);
	r = PQexecParams(miner_db(m), "DELETE FROM problems WHERE run_id = $1", 1, NULL, params, NULL, NULL, 0);
	PQclear(r);
	for (size_t i = 0; i < sizeof(match_tables) / sizeof(match_tables[0]); i++) {
		r = PQexecParams(miner_db(m), match_tables[i], 1, NULL, params, NULL, NULL, 0);
		PQclear(r);
	}
	if (copy_begin(m, "COPY run_stacks (run_id, kind, stack_id, stream_ref, cost_ns, events) FROM STDIN") < 0)
		goto fail_rollback;
	for (size_t i = 0; i < run->entries.len; i++) {
		int64_t k = intern_find(si->ids, &en[i].stack, sizeof(uint32_t));
		unsigned kind = en[i].kind == WIRE_WAIT ? RUN_KINDS_WAIT : RUN_KINDS_RUN;

		/* the mining database of the kinds mined: coverage and triage are per kind */
		if (k < 0 || !si->keep[k] || !(run->p->kinds & kind))
			continue;
		buf_printf(&b, "%s\t%c\t%u\t%lld\t%lld\t%u\n", idbuf, en[i].kind == WIRE_WAIT ? 'w' : 'r',
			   en[i].stack, (long long)run->refs[en[i].stream], (long long)en[i].cost,
			   en[i].events);
		if (copy_send(m, &b, false) < 0)
			goto fail_rollback;
	}
	if (copy_send(m, &b, true) < 0 || copy_end(m) < 0)
		goto fail_rollback;
	r = PQexecParams(miner_db(m), "DELETE FROM run_baseline WHERE run_id = $1", 1, NULL, params, NULL, NULL, 0);
	PQclear(r);
	if (run->nbase) {
		/* the normal units measured against, for attribution */
		if (copy_begin(m, "COPY run_baseline (run_id, stream_ref) FROM STDIN") < 0)
			goto fail_rollback;
		for (size_t i = 0; i < run->nstreams; i++) {
			if (!run->base[i])
				continue;
			buf_printf(&b, "%s\t%lld\n", idbuf, (long long)run->refs[i]);
			if (copy_send(m, &b, false) < 0)
				goto fail_rollback;
		}
		if (copy_send(m, &b, true) < 0 || copy_end(m) < 0)
			goto fail_rollback;
	}
	if (copy_begin(m, "COPY patterns (id, run_id, kind, rank, frame_ids, cost_ns, events, streams,"
			  " stack_ids, est_cost_ns) FROM STDIN") < 0)
		goto fail_rollback;
	for (size_t i = 0; i < patterns->len; i++) {
		if (pt[i].kind != last_kind) {
			last_kind = pt[i].kind;
			rank = 0;
		}
		buf_printf(&b, "%lld\t%s\t%c\t%d\t{", (long long)pt[i].id, idbuf, pt[i].kind == WIRE_WAIT ? 'w' : 'r',
			   ++rank);
		for (size_t j = 0; j < pt[i].len; j++)
			buf_printf(&b, j ? ",%u" : "%u", pt[i].frames[j]);
		buf_printf(&b, "}\t%llu\t%llu\t%u\t{", (unsigned long long)pt[i].cost,
			   (unsigned long long)pt[i].events, pt[i].streams);
		for (size_t j = 0; j < pt[i].nstacks; j++)
			buf_printf(&b, j ? ",%d" : "%d", pt[i].stacks[j]);
		buf_printf(&b, "}\t%lld\n", (long long)llround(pt[i].est_cost));
		if (copy_send(m, &b, false) < 0)
			goto fail_rollback;
	}
	if (copy_send(m, &b, true) < 0 || copy_end(m) < 0)
		goto fail_rollback;
	/* what attribution counts the clusters' streams against (after run_stacks and run_baseline) */
	r = PQexecParams(miner_db(m), "SELECT sm_run_values($1)", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		miner_db_fail(m, "counting the run's values", r);
		goto fail_rollback;
	}
	PQclear(r);
	/* the problems first: the clusters name theirs */
	if (copy_rows(m, "COPY problems (" RUNCLUST_PROBLEM_COLUMNS ") FROM STDIN", &rows->problems) < 0 ||
	    copy_rows(m, "COPY clusters (" RUNCLUST_COLUMNS ") FROM STDIN", &rows->clusters) < 0)
		goto fail_rollback;
	/* their ranks among all the run's clusters, both kinds: the ones the pages show (025_run_ranks) */
	r = PQexecParams(miner_db(m), "SELECT sm_rank_clusters($1)", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		miner_db_fail(m, "ranking the run's clusters", r);
		goto fail_rollback;
	}
	PQclear(r);
	/* what the pages of its clusters and problems read of their streams (027_match) */
	if (copy_rows(m, "COPY run_stack_totals (" MATCHES_TOTAL_COLUMNS ") FROM STDIN", &rows->stack_totals) < 0 ||
	    copy_rows(m, "COPY match_streams (" MATCHES_STREAM_COLUMNS ") FROM STDIN", &rows->match_streams) < 0 ||
	    copy_rows(m, "COPY match_values (" MATCHES_VALUE_COLUMNS ") FROM STDIN", &rows->match_values) < 0)
		goto fail_rollback;
	snprintf(timings, sizeof(timings),
		 "{\"select\":%lld,\"read_aoi\":%lld,\"collapse_filter\":%lld,\"mine\":%lld,"
		 "\"store\":%lld,\"total\":%lld}",
		 (long long)run->t_select, (long long)run->t_read, (long long)run->t_filter,
		 (long long)run->t_mine, (long long)runstate_ms_since(t_store), (long long)runstate_ms_since(t_run));
	params[1] = counts;
	params[2] = timings;
	params[3] = miner_worker(m);
	r = PQexecParams(miner_db(m), "UPDATE runs SET counts = $2::jsonb, timings_ms = $3::jsonb"
				" WHERE id = $1 AND worker = $4 AND status = 'running'",
			 4, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		miner_db_fail(m, "finishing the run", r);
		goto fail_rollback;
	}
	if (strcmp(PQcmdTuples(r), "1") != 0) {
		/* another worker took it over (this one stopped beating): its result stands */
		PQclear(r);
		miner_fail(m, "run %s was taken over by another worker", idbuf);
		goto fail_rollback;
	}
	PQclear(r);
	buf_release(&b);
	return miner_exec(m, "COMMIT");
fail_rollback:
	buf_release(&b);
	PQclear(PQexec(miner_db(m), "ROLLBACK"));
	return -1;
}
