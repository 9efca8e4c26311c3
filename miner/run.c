/* run: the pipeline of one mining run, from the database to stored clusters (see run.h). */
#include "miner/run.h"
#include "clusterer/excess.h"
#include "clusterer/runclust.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/imap.h"
#include "common/intern.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/symstore.h"
#include "common/util.h"
#include "common/vec.h"
#include "common/wire.h"
#include "miner/aoi.h"
#include "miner/baseline.h"
#include "miner/bide.h"
#include "miner/extract.h"
#include "miner/frames.h"
#include "miner/heartbeat.h"
#include "miner/matches.h"
#include "miner/partrun.h"
#include "miner/parts.h"
#include "miner/queue.h"
#include "miner/results.h"
#include "miner/runstate.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define MINER_SYMBOLS_BUILDS 8       /* build ids looked for before one run */
#define MINER_SYMBOLS_TIMEOUT_S 20   /* per debuginfod download */

/* A collapsed stack of one kind: the mining database's sequence i. */
struct cstack {
	uint32_t stack;
	const uint32_t *frames;
	uint32_t len;
	uint64_t cost;
	uint64_t events;
	size_t first, n;              /* its entries (one per stream) */
};

/* ---- phase 1: select streams ---- */

static int select_streams(struct runstate *run)
{
	struct miner *m = run->m;
	const struct run_params *p = run->p;
	char since[40], until[40];
	const char *params[7];
	PGresult *r;

	if (miner_exec(m, "DROP TABLE IF EXISTS sm_sel; CREATE TEMP TABLE sm_sel ("
			  " id bigint PRIMARY KEY, tid integer, t0 bigint, t1 bigint, base boolean, utype text,"
			  " ra timestamptz, weight float8)") < 0)
		return -1;
	/* received_at bounds as microsecond epoch seconds for to_timestamp() */
	if (p->filter.since_ns != PARAMS_NO_TIME)
		snprintf(since, sizeof(since), "%.6f", (double)p->filter.since_ns / 1e9);
	if (p->filter.until_ns != PARAMS_NO_TIME)
		snprintf(until, sizeof(until), "%.6f", (double)p->filter.until_ns / 1e9);
	params[0] = p->app;
	params[1] = p->filter.version;
	params[2] = p->filter.host;
	params[3] = p->filter.labels_json;
	params[4] = p->filter.since_ns != PARAMS_NO_TIME ? since : NULL;
	params[5] = p->filter.until_ns != PARAMS_NO_TIME ? until : NULL;
	params[6] = p->baseline ? "t" : "f";
	r = PQexecParams(miner_db(m),
			 "INSERT INTO sm_sel SELECT id, symptom_tid, symptom_start_ns, symptom_end_ns,"
			 " role = 'baseline', coalesce(symptom_unit_type, ''), received_at, weight"
			 " FROM streams WHERE app = $1 AND ($7::boolean OR role = 'violation')"
			 " AND ($2::text IS NULL OR version = $2)"
			 " AND ($3::text IS NULL OR host = $3)"
			 " AND ($4::jsonb IS NULL OR labels @> $4::jsonb)"
			 " AND ($5::float8 IS NULL OR received_at >= to_timestamp($5::float8))"
			 " AND ($6::float8 IS NULL OR received_at < to_timestamp($6::float8))",
			 7, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		return miner_db_fail(m, "selecting streams", r);
	PQclear(r);
	return runstate_select(run, "SELECT id, tid, t0, t1, base, utype, weight FROM sm_sel ORDER BY id");
}

/* ---- phase 2: read events, extract the AOI (extract.h), in parts (partrun.h) ---- */

/* Phase 2: in one piece, or in parts when the run has more streams than a part. */
static int extract(struct runstate *run)
{
	size_t per = miner_options(run->m)->part_streams;

	if (per && run->nstreams > per)
		return partrun_coordinate(run, per);
	return extract_read(run, 0, run->nstreams, false);
}

/* ---- phase 3: frames of the AOI stacks, content filter, collapsing ---- */

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/*
 * Each frame of si's stacks as its canonical frame (024_symbols: an alias named by symbols shows
 * as the frame it names), as sm_canon_frames() maps them. The frames' aliases are read once for
 * the distinct frames, not once per frame of every stack (1.5 million index lookups, 2.8 s, for
 * a run of 36,000 stacks).
 */
static int canon_frames(struct runstate *run, struct stackinfo *si)
{
	struct miner *m = run->m;
	struct imap seen = IMAP_INIT, canon = IMAP_INIT;
	struct buf ids = BUF_INIT(0);
	const char *params[1];
	PGresult *r;
	int rc = -1;

	buf_putc(&ids, '{');
	for (size_t k = 0; k < si->n; k++)
		for (uint32_t j = 0; j < si->len[k]; j++) {
			int added = imap_put(&seen, si->frames[k][j], 0);

			if (added < 0)
				goto out_oom;
			if (added == 0) {
				if (ids.len > 1)
					buf_putc(&ids, ',');
				buf_put_i64(&ids, si->frames[k][j]);
			}
		}
	if (buf_putc(&ids, '}') < 0)
		goto out_oom;
	params[0] = buf_cstr(&ids);
	r = PQexecParams(miner_db(m), "SELECT id, canon_id FROM frames WHERE id = ANY($1::integer[]) AND canon_id IS NOT NULL",
			 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		miner_db_fail(m, "reading the frames' aliases", r);
		goto out;
	}
	for (int row = 0; row < PQntuples(r); row++)
		if (imap_put(&canon, (uint64_t)db_get_i64(r, row, 0), (uint64_t)db_get_i64(r, row, 1)) < 0) {
			PQclear(r);
			goto out_oom;
		}
	PQclear(r);
	if (canon.cnt)
		for (size_t k = 0; k < si->n; k++)
			for (uint32_t j = 0; j < si->len[k]; j++) {
				uint64_t c;

				if (imap_get(&canon, si->frames[k][j], &c))
					si->frames[k][j] = (uint32_t)c;
			}
	rc = 0;
	goto out;
out_oom:
	miner_fail(m, "out of memory reading the frames' aliases");
out:
	imap_free(&seen);
	imap_free(&canon);
	buf_release(&ids);
	return rc;
}

/* Frames of every distinct stack in the entries: si filled, keep by the filters flt. */
static int load_stacks(struct runstate *run, struct stackinfo *si, const struct aoi_filter *flt)
{
	struct miner *m = run->m;
	struct buf ids = BUF_INIT(0);
	const char *params[1];
	PGresult *r;
	struct intern *fids = NULL;
	const char **names = NULL;
	int32_t tmp[WIRE_MAX_STACK_DEPTH];
	int rc = -1;

	si->ids = intern_open(0);
	if (!si->ids)
		return miner_fail(m, "out of memory");
	buf_putc(&ids, '{');
	/* the violating streams' stacks, then the baseline's only */
	for (int side = 0; side < 2; side++) {
		const struct vec *v = side ? &run->bentries : &run->entries;
		const struct entry *en = v->data;

		for (size_t i = 0; i < v->len; i++) {
			bool added;
			if (intern_put(si->ids, &en[i].stack, sizeof(uint32_t), &added) < 0)
				goto out_oom;
			if (added) {
				if (ids.len > 1)
					buf_putc(&ids, ',');
				buf_put_i64(&ids, en[i].stack);
			}
		}
	}
	if (buf_putc(&ids, '}') < 0)
		goto out_oom;
	si->n = intern_count(si->ids);
	si->frames = arena_calloc(run->arena, si->n + 1, sizeof(*si->frames));
	si->len = arena_calloc(run->arena, si->n + 1, sizeof(*si->len));
	si->keep = arena_calloc(run->arena, si->n + 1, sizeof(*si->keep));
	if (!si->frames || !si->len || !si->keep)
		goto out_oom;
	params[0] = buf_cstr(&ids);
	r = PQexecParams(miner_db(m), "SELECT id, frame_ids::text FROM stacks WHERE id = ANY($1::integer[])", 1,
			 NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		miner_db_fail(m, "reading stacks", r);
		goto out;
	}
	for (int row = 0; row < PQntuples(r); row++) {
		uint32_t id = (uint32_t)db_get_i64(r, row, 0);
		int64_t k = intern_find(si->ids, &id, sizeof(id));
		int n = db_parse_int_array(PQgetvalue(r, row, 1), tmp, WIRE_MAX_STACK_DEPTH);

		if (k < 0 || n <= 0)
			continue;
		si->frames[k] = arena_alloc(run->arena, (size_t)n * sizeof(uint32_t));
		if (!si->frames[k]) {
			PQclear(r);
			goto out_oom;
		}
		for (int j = 0; j < n; j++)
			si->frames[k][j] = (uint32_t)tmp[j];
		si->len[k] = (uint32_t)n;
		si->keep[k] = true;
	}
	PQclear(r);
	for (size_t k = 0; k < si->n; k++)
		if (!si->frames[k]) {
			miner_fail(m, "stack %u of an event is missing from the stacks table",
			     *(const uint32_t *)intern_key(si->ids, (uint32_t)k, NULL));
			goto out;
		}
	if (canon_frames(run, si) < 0)
		goto out;
	if (aoi_filter_empty(flt)) {
		rc = 0;
		goto out;
	}
	/* frame names, for the globs */
	fids = intern_open(0);
	if (!fids)
		goto out_oom;
	buf_reset(&ids);
	buf_putc(&ids, '{');
	for (size_t k = 0; k < si->n; k++)
		for (uint32_t j = 0; j < si->len[k]; j++) {
			bool added;
			if (intern_put(fids, &si->frames[k][j], sizeof(uint32_t), &added) < 0)
				goto out_oom;
			if (added) {
				if (ids.len > 1)
					buf_putc(&ids, ',');
				buf_put_i64(&ids, si->frames[k][j]);
			}
		}
	if (buf_putc(&ids, '}') < 0)
		goto out_oom;
	names = arena_calloc(run->arena, intern_count(fids) + 1, sizeof(*names));
	if (!names)
		goto out_oom;
	params[0] = buf_cstr(&ids);
	r = PQexecParams(miner_db(m), "SELECT id, name FROM frame_names WHERE id = ANY($1::integer[])", 1, NULL,
			 params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		miner_db_fail(m, "reading frames", r);
		goto out;
	}
	for (int row = 0; row < PQntuples(r); row++) {
		uint32_t id = (uint32_t)db_get_i64(r, row, 0);
		int64_t k = intern_find(fids, &id, sizeof(id));
		if (k >= 0)
			names[k] = arena_strndup(run->arena, PQgetvalue(r, row, 1),
						 (size_t)PQgetlength(r, row, 1));
	}
	PQclear(r);
	for (size_t k = 0; k < si->n; k++) {
		const char *fr[WIRE_MAX_STACK_DEPTH];
		for (uint32_t j = 0; j < si->len[k]; j++) {
			int64_t f = intern_find(fids, &si->frames[k][j], sizeof(uint32_t));
			fr[j] = f >= 0 && names[f] ? names[f] : "";
		}
		si->keep[k] = aoi_filter_keep(flt, fr, si->len[k]);
	}
	rc = 0;
	goto out;
out_oom:
	miner_fail(m, "out of memory loading stacks");
out:
	intern_free(fids);
	buf_release(&ids);
	return rc;
}

/* How many (kind, stack) pairs the entries hold, sorted by them (collapse()): what is sized per
 * collapsed stack, not per entry (a run of a million streams has 15 million entries and 55,000
 * stacks). */
static size_t distinct_pairs(const struct vec *entries)
{
	const struct entry *en = entries->data;
	size_t n = 0;

	for (size_t i = 0; i < entries->len; i++)
		if (i == 0 || en[i].kind != en[i - 1].kind || en[i].stack != en[i - 1].stack)
			n++;
	return n;
}

/* ---- phase 4: mining ---- */

struct mine_ctx {
	struct runstate *run;
	uint8_t kind;
	const struct cstack *cs;
	const struct entry *en;
	uint32_t *stamp;            /* per stream: last pattern that counted it */
	uint32_t gen;
	struct vec *patterns;       /* struct pattern */
	const struct stackinfo *si;
};

static int on_pattern(void *arg, const uint32_t *items, size_t len, uint64_t support,
		      const uint32_t *seqs, size_t nseqs)
{
	struct mine_ctx *c = arg;
	struct pattern *pt = vec_push(c->patterns);
	uint64_t events = 0;
	uint32_t streams = 0;

	if (!pt)
		return -1;
	c->gen++;
	pt->kind = c->kind;
	pt->len = len;
	pt->cost = support;
	pt->frames = arena_alloc(c->run->arena, len * sizeof(uint32_t));
	pt->stacks = arena_alloc(c->run->arena, (nseqs + 1) * sizeof(int32_t));
	if (!pt->frames || !pt->stacks)
		return -1;
	memcpy(pt->frames, items, len * sizeof(uint32_t));
	for (size_t i = 0; i < nseqs; i++) {
		const struct cstack *s = &c->cs[seqs[i]];
		pt->stacks[i] = (int32_t)s->stack;
		events += s->events;
		for (size_t k = s->first; k < s->first + s->n; k++)
			if (c->stamp[c->en[k].stream] != c->gen) {
				c->stamp[c->en[k].stream] = c->gen;
				streams++;
			}
	}
	pt->nstacks = nseqs;
	pt->events = events;
	pt->streams = streams;
	atomic_fetch_add(&c->run->prog.patterns, 1);
	return 0;
}

static int cmp_pattern(const void *a, const void *b)
{
	const struct pattern *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind > y->kind ? -1 : 1;   /* wait first */
	if (x->cost != y->cost)
		return x->cost > y->cost ? -1 : 1;
	for (size_t i = 0; i < x->len && i < y->len; i++)
		if (x->frames[i] != y->frames[i])
			return x->frames[i] < y->frames[i] ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

static int mine_kind(struct runstate *run, const struct stackinfo *si, uint8_t kind, struct vec *patterns,
		     uint64_t *minsup_out)
{
	struct miner *m = run->m;
	const struct entry *en = run->entries.data;
	struct cstack *cs;
	const uint32_t **seqs;
	uint32_t *lens;
	uint64_t *weights, total = 0, minsup;
	size_t n = 0, ne = run->entries.len;
	struct seqdb db;
	struct bide_opts bo;
	struct bide *b;
	struct mine_ctx ctx;
	int rc;

	cs = arena_calloc(run->arena, distinct_pairs(&run->entries) + 1, sizeof(*cs));
	if (!cs)
		return miner_fail(m, "out of memory");
	for (size_t i = 0; i < ne;) {
		size_t j = i;
		int64_t k = intern_find(si->ids, &en[i].stack, sizeof(uint32_t));

		while (j < ne && en[j].kind == en[i].kind && en[j].stack == en[i].stack)
			j++;
		if (en[i].kind == kind && k >= 0 && si->keep[k]) {
			struct cstack *c = &cs[n++];
			c->stack = en[i].stack;
			c->frames = si->frames[k];
			c->len = si->len[k];
			c->first = i;
			c->n = j - i;
			for (size_t x = i; x < j; x++) {
				c->cost = sat_add(c->cost, (uint64_t)en[x].cost);
				c->events += en[x].events;
			}
			total = sat_add(total, c->cost);
		}
		i = j;
	}
	if (run->p->threshold_ns > 0) {
		minsup = (uint64_t)run->p->threshold_ns;
	} else if (run->p->guideline.share > 0) {
		/* for bugs hitting a share of the selected streams with delay_ns each */
		double c = run->p->guideline.share * (double)run->p->guideline.delay_ns *
			   (double)(run->nstreams - run->nbase);
		minsup = c >= 1.8e19 ? UINT64_MAX : (uint64_t)ceil(c - c * 1e-12);
	} else {
		/* 0.07 * 100 is 7.000000000000001 in doubles: take off the rounding
		 * error before ceil so that a pattern costing exactly C counts */
		double c = run->p->threshold_fraction * (double)total;
		minsup = (uint64_t)ceil(c - c * 1e-12);
	}
	if (minsup == 0)
		minsup = 1;
	*minsup_out = minsup;
	if (n == 0 || total < minsup)
		return 0;
	seqs = arena_alloc(run->arena, n * sizeof(*seqs));
	lens = arena_alloc(run->arena, n * sizeof(*lens));
	weights = arena_alloc(run->arena, n * sizeof(*weights));
	if (!seqs || !lens || !weights)
		return miner_fail(m, "out of memory");
	for (size_t i = 0; i < n; i++) {
		seqs[i] = cs[i].frames;
		lens[i] = cs[i].len;
		weights[i] = cs[i].cost;
	}
	db.seqs = seqs;
	db.lens = lens;
	db.weights = weights;
	db.n = n;
	memset(&bo, 0, sizeof(bo));
	bo.mode = BIDE_MAXIMAL;
	bo.minsup = minsup;
	bo.threads = miner_options(m)->threads;
	bo.max_patterns = miner_options(m)->max_patterns;
	memset(&ctx, 0, sizeof(ctx));
	ctx.run = run;
	ctx.kind = kind;
	ctx.cs = cs;
	ctx.en = en;
	ctx.si = si;
	ctx.patterns = patterns;
	ctx.stamp = arena_calloc(run->arena, run->nstreams + 1, sizeof(uint32_t));
	if (!ctx.stamp)
		return miner_fail(m, "out of memory");
	b = bide_open();
	if (!b)
		return miner_fail(m, "out of memory");
	rc = bide_mine(b, &db, &bo, on_pattern, &ctx);
	if (rc < 0)
		miner_fail(m, "mining %s stacks: %s", kind == WIRE_WAIT ? "wait" : "run", bide_error(b));
	bide_free(b);
	return rc;
}

/* ---- phase 5: cluster, store (results.h) ---- */

/* What the clusterer is handed, built from the run's entries and patterns (all freed by
 * clust_release()). */
struct clust_in {
	struct runclust_stack *rs, *bs;  /* the violating streams' collapsed stacks, the baseline's */
	size_t nrs, nbs;
	uint32_t *sidx;                  /* their streams, per stack in a row */
	uint64_t *scost;
	uint32_t *sev;                   /* the events there */
	char *rkind;                     /* per stack of rs: 'w' or 'r' */
	size_t nsidx;
	struct runclust_pattern *rp;
	uint32_t *pstacks;               /* the patterns' stacks, per pattern in a row */
	struct imap where;               /* kind << 32 | stack id -> index in rs */
	struct baseline_seq *bseq, *pseq;
	uint32_t *boff, *bidx;
	struct excess *ex;
};

/* The patterns' ids, in the order they are stored (and ranked). */
static int reserve_pattern_ids(struct runstate *run, struct vec *patterns)
{
	struct miner *m = run->m;
	struct pattern *pt = patterns->data;
	char nbuf[24];
	const char *params[1] = { nbuf };
	PGresult *r;

	snprintf(nbuf, sizeof(nbuf), "%zu", patterns->len);
	r = PQexecParams(miner_db(m), "SELECT nextval(pg_get_serial_sequence('patterns', 'id'))"
				      " FROM generate_series(1, $1::integer)", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || (size_t)PQntuples(r) != patterns->len)
		return miner_db_fail(m, "reserving pattern ids", r);
	for (size_t i = 0; i < patterns->len; i++)
		pt[i].id = db_get_i64(r, (int)i, 0);
	PQclear(r);
	return 0;
}

static int clust_alloc(struct runstate *run, const struct vec *patterns, struct clust_in *ci)
{
	const struct pattern *pt = patterns->data;
	size_t npst = 0;

	size_t nrs = distinct_pairs(&run->entries), nbs = distinct_pairs(&run->bentries);

	ci->rs = vec_alloc(nrs + 1, sizeof(*ci->rs));
	ci->bs = vec_alloc(nbs + 1, sizeof(*ci->bs));
	ci->sidx = vec_alloc(run->entries.len + run->bentries.len + 1, sizeof(*ci->sidx));
	ci->scost = vec_alloc(run->entries.len + run->bentries.len + 1, sizeof(*ci->scost));
	ci->sev = vec_alloc(run->entries.len + run->bentries.len + 1, sizeof(*ci->sev));
	ci->rkind = vec_alloc(nrs + 1, sizeof(*ci->rkind));
	ci->rp = vec_alloc(patterns->len + 1, sizeof(*ci->rp));
	for (size_t i = 0; i < patterns->len; i++)
		npst += pt[i].nstacks;
	ci->pstacks = vec_alloc(npst + 1, sizeof(*ci->pstacks));
	ci->bseq = vec_alloc(nbs + 1, sizeof(*ci->bseq));
	if (!ci->rs || !ci->bs || !ci->bseq || !ci->sidx || !ci->scost || !ci->sev || !ci->rkind || !ci->rp ||
	    !ci->pstacks)
		return miner_fail(run->m, "out of memory");
	return 0;
}

/* The violating streams' collapsed stacks of the kinds mined: entries come by (kind, stack,
 * stream). */
static int collect_stacks(struct runstate *run, const struct stackinfo *si, struct clust_in *ci)
{
	const struct entry *en = run->entries.data;

	for (size_t i = 0; i < run->entries.len; i++) {
		int64_t k = intern_find(si->ids, &en[i].stack, sizeof(uint32_t));
		unsigned kind = en[i].kind == WIRE_WAIT ? RUN_KINDS_WAIT : RUN_KINDS_RUN;
		uint64_t key = (uint64_t)(en[i].kind == WIRE_WAIT ? 'w' : 'r') << 32 | en[i].stack, at;

		if (k < 0 || !si->keep[k] || !(run->p->kinds & kind))
			continue;
		if (!imap_get(&ci->where, key, &at)) {
			/* a new (kind, stack): its streams follow, the entries being in that order */
			at = ci->nrs;
			if (imap_put(&ci->where, key, at) < 0)
				return miner_fail(run->m, "out of memory");
			ci->rkind[ci->nrs] = (char)(key >> 32);
			ci->rs[ci->nrs++] = (struct runclust_stack){ 0, 0, (uint32_t)ci->nsidx, 0, en[i].stack,
								     si->frames[k], si->len[k] };
		}
		ci->rs[at].cost += (uint64_t)en[i].cost;
		ci->rs[at].events += en[i].events;
		ci->rs[at].n++;
		ci->scost[ci->nsidx] = (uint64_t)en[i].cost;
		ci->sev[ci->nsidx] = en[i].events;
		ci->sidx[ci->nsidx++] = en[i].stream;
	}
	return 0;
}

/* The baseline's, sorted the same way: each (kind, stack) once, its streams following. */
static void collect_baseline(struct runstate *run, const struct stackinfo *si, struct clust_in *ci)
{
	for (size_t i = 0; i < run->bentries.len; i++) {
		const struct entry *b = (const struct entry *)run->bentries.data + i;
		int64_t k = intern_find(si->ids, &b->stack, sizeof(uint32_t));
		unsigned kind = b->kind == WIRE_WAIT ? RUN_KINDS_WAIT : RUN_KINDS_RUN;

		if (k < 0 || !si->keep[k] || !(run->p->kinds & kind))
			continue;
		if (!ci->nbs || ci->bs[ci->nbs - 1].stack_id != b->stack || ci->bseq[ci->nbs - 1].kind != b->kind) {
			ci->bseq[ci->nbs] = (struct baseline_seq){ si->frames[k], si->len[k], b->kind };
			ci->bs[ci->nbs++] = (struct runclust_stack){ 0, 0, (uint32_t)ci->nsidx, 0, b->stack,
								     si->frames[k], si->len[k] };
		}
		ci->bs[ci->nbs - 1].cost += (uint64_t)b->cost;
		ci->bs[ci->nbs - 1].events += b->events;
		ci->bs[ci->nbs - 1].n++;
		ci->scost[ci->nsidx] = (uint64_t)b->cost;
		ci->sev[ci->nsidx] = b->events;
		ci->sidx[ci->nsidx++] = b->stream;
	}
}

/* Each pattern with the collapsed stacks that support it, and its estimated cost. */
static void link_patterns(struct runstate *run, struct vec *patterns, struct clust_in *ci)
{
	struct pattern *pt = patterns->data;
	size_t npst = 0;

	for (size_t i = 0; i < patterns->len; i++) {
		char kc = pt[i].kind == WIRE_WAIT ? 'w' : 'r';

		ci->rp[i] = (struct runclust_pattern){ pt[i].id, kc, pt[i].frames, (uint32_t)pt[i].len,
						       ci->pstacks + npst, 0, NULL, 0 };
		pt[i].est_cost = 0;
		for (size_t j = 0; j < pt[i].nstacks; j++) {
			uint64_t v;

			if (imap_get(&ci->where, (uint64_t)kc << 32 | (uint32_t)pt[i].stacks[j], &v)) {
				ci->pstacks[npst++] = (uint32_t)v;
				ci->rp[i].nstacks++;
				for (uint32_t x = ci->rs[v].first; x < ci->rs[v].first + ci->rs[v].n; x++)
					pt[i].est_cost += run->weight[ci->sidx[x]] * (double)ci->scost[x];
			}
		}
	}
}

/* Which baseline stacks contain each pattern, and the run's streams for the bootstrap. */
static int match_baseline(struct runstate *run, const struct vec *patterns, int threads, struct clust_in *ci)
{
	const struct pattern *pt = patterns->data;
	struct excess_streams es = { run->nstreams, run->base, run->utype, run->nutypes };

	ci->pseq = vec_alloc(patterns->len + 1, sizeof(*ci->pseq));
	if (!ci->pseq)
		return miner_fail(run->m, "out of memory");
	for (size_t i = 0; i < patterns->len; i++)
		ci->pseq[i] = (struct baseline_seq){ pt[i].frames, (uint32_t)pt[i].len, pt[i].kind };
	if (baseline_match(ci->bseq, ci->nbs, ci->pseq, patterns->len, threads, &ci->boff, &ci->bidx) < 0 ||
	    !(ci->ex = excess_open(&es, run->p->bootstrap, (uint64_t)run->id)))
		return miner_fail(run->m, "out of memory measuring the baseline");
	for (size_t i = 0; i < patterns->len; i++) {
		ci->rp[i].bstacks = ci->bidx + ci->boff[i];
		ci->rp[i].nbstacks = ci->boff[i + 1] - ci->boff[i];
	}
	return 0;
}

/* The clusterer's run: the frames' names and statistics, current (what ingest appended since its
 * last fold too), then the COPY rows of the clusters and problems. */
static int build_clusters(struct runstate *run, const struct clust_in *ci, size_t npatterns,
			  const struct runclust_opts *co, struct results_rows *rr, size_t *nclusters,
			  size_t *nproblems)
{
	struct miner *m = run->m;
	struct runclust_input in = { ci->rp, npatterns, ci->rs, ci->nrs, ci->sidx, ci->scost, run->nstreams,
				     ci->bs, ci->nbs, ci->ex, run->weight };
	struct runclust_matches mm = { 0 };
	struct matches_input mi = { run->id, ci->rs, ci->rkind, ci->nrs, ci->sidx, ci->scost, ci->sev, run->refs,
				    run->base, run->nstreams, &mm };
	struct sim_frames *ft = NULL;
	uint32_t *fids = NULL;
	size_t nfids = 0;
	char cerr[512];
	int rc = -1;

	if (runclust_frame_ids(&in, &fids, &nfids) < 0 || !(ft = sim_frames_open())) {
		miner_fail(m, "out of memory");
		goto out;
	}
	if (frames_fold(miner_db(m), cerr, sizeof(cerr)) < 0 ||
	    frames_load(miner_db(m), fids, nfids, ft, cerr, sizeof(cerr)) < 0 ||
	    runclust_build(run->id, &in, ft, co, frames_take_ids, miner_db(m), &rr->clusters, nclusters, &rr->problems,
			   nproblems, &mm, cerr, sizeof(cerr)) < 0) {
		miner_fail(m, "%s", cerr);
		goto out;
	}
	if (matches_build(m, &mi, &rr->match_streams, &rr->match_values, &rr->stack_totals) < 0)
		goto out;
	rc = 0;
out:
	runclust_matches_release(&mm);
	sim_frames_free(ft);
	free(fids);
	return rc;
}

static void clust_release(struct clust_in *ci)
{
	imap_free(&ci->where);
	excess_free(ci->ex);
	free(ci->rs);
	free(ci->bs);
	free(ci->sidx);
	free(ci->scost);
	free(ci->sev);
	free(ci->rkind);
	free(ci->rp);
	free(ci->pstacks);
	free(ci->bseq);
	free(ci->pseq);
	free(ci->boff);
	free(ci->bidx);
}

/*
 * The clustering stage, in memory: reserves the patterns' ids, hands the clusterer the run's
 * collapsed stacks (of the kinds mined) and patterns, and gets back the COPY rows of the clusters
 * and of the problems they make.
 */
static int cluster_run(struct runstate *run, const struct stackinfo *si, struct vec *patterns,
		       struct results_rows *rr, size_t *nclusters, size_t *nproblems)
{
	struct runclust_opts co;
	struct clust_in ci = { .where = IMAP_INIT };
	int rc = -1;

	memset(&co, 0, sizeof(co));
	if (linkage_method_parse(run->p->linkage, &co.method) < 0)
		return miner_fail(run->m, "linkage: unknown method %s", run->p->linkage);
	co.cut = run->p->cut;
	co.threads = miner_options(run->m)->threads;
	if (reserve_pattern_ids(run, patterns) < 0)
		return -1;
	if (clust_alloc(run, patterns, &ci) < 0 || collect_stacks(run, si, &ci) < 0)
		goto out;
	collect_baseline(run, si, &ci);
	link_patterns(run, patterns, &ci);
	if (run->nbase && match_baseline(run, patterns, co.threads, &ci) < 0)
		goto out;
	rc = build_clusters(run, &ci, patterns->len, &co, rr, nclusters, nproblems);
out:
	clust_release(&ci);
	return rc;
}

/*
 * Names the unnamed frames it can before the run reads any stack (docs/symbols.md): from symbols
 * stored, else debug files looked for by build id (a failed search is tried again after a day).
 * Bounded: a few build ids a run, each download bounded in time. A failure here is logged, never
 * the run's: the frames stay `module+0xOFFSET`.
 */
static void name_frames(struct miner *m, int64_t run_id)
{
	const struct debuginfo_opts o = { NULL, 1, MINER_SYMBOLS_TIMEOUT_S, 0 };
	char err[512];
	int n = symstore_resolve_pending(miner_db(m), &o, 86400, MINER_SYMBOLS_BUILDS, err, sizeof(err));

	if (n < 0)
		log_warn("frames not named", "run=%lld error=\"%s\"", (long long)run_id, err);
	else if (n > 0)
		log_info("frames named", "run=%lld frames=%d", (long long)run_id, n);
}

/* What a run counts, stored with it. */
struct tally {
	uint64_t aoi_events, stacks;   /* the violating streams', kept by the frame filters */
	uint64_t minsup_w, minsup_r;   /* the thresholds each kind was mined with */
	size_t clusters, problems;
};

/* Phase 3: the entries sorted by (kind, stack, stream), their stacks' frames loaded and filtered
 * by flt; the AOI events and distinct stacks kept, of the kinds mined, counted. */
static int collapse(struct runstate *run, struct stackinfo *si, const struct aoi_filter *flt, struct tally *ty)
{
	if (run->entries.len)
		qsort(run->entries.data, run->entries.len, sizeof(struct entry), cmp_entry);
	if (run->bentries.len)
		qsort(run->bentries.data, run->bentries.len, sizeof(struct entry), cmp_entry);
	if (load_stacks(run, si, flt) < 0)
		return -1;
	for (size_t i = 0; i < run->entries.len; i++) {
		const struct entry *e = (const struct entry *)run->entries.data + i;
		int64_t k = intern_find(si->ids, &e->stack, sizeof(uint32_t));
		unsigned kind = e->kind == WIRE_WAIT ? RUN_KINDS_WAIT : RUN_KINDS_RUN;

		/* of the kinds mined: a run of one kind may read the other's events or not (extract.c) */
		if (k < 0 || !si->keep[k] || !(run->p->kinds & kind))
			continue;
		ty->aoi_events += e->events;
		/* entries are sorted by (kind, stack): count each pair once */
		if (i == 0 || e[-1].kind != e->kind || e[-1].stack != e->stack)
			ty->stacks++;
	}
	atomic_store(&run->prog.aoi_events, ty->aoi_events);
	atomic_store(&run->prog.stacks, ty->stacks);
	return 0;
}

/* Phase 4: the kinds asked for mined, wait first, the patterns in their stored order. */
static int mine(struct runstate *run, const struct stackinfo *si, struct vec *patterns, struct tally *ty)
{
	if ((run->p->kinds & RUN_KINDS_WAIT) && mine_kind(run, si, WIRE_WAIT, patterns, &ty->minsup_w) < 0)
		return -1;
	if ((run->p->kinds & RUN_KINDS_RUN) && mine_kind(run, si, WIRE_RUN, patterns, &ty->minsup_r) < 0)
		return -1;
	if (patterns->len)
		qsort(patterns->data, patterns->len, sizeof(struct pattern), cmp_pattern);
	return 0;
}

/* The run's counts as a JSON object into counts (size bytes). */
static int counts_json(const struct runstate *run, const struct tally *ty, size_t npatterns, char *counts, size_t size)
{
	struct buf cb = BUF_INIT(size - 1);
	struct jsonw w;

	jsonw_init_compact(&w, &cb);
	jsonw_object(&w);
	jsonw_ku64(&w, "streams", run->nstreams - run->nbase);
	jsonw_ku64(&w, "baseline_streams", run->nbase);
	jsonw_ku64(&w, "events_read", run->nread);
	jsonw_ku64(&w, "read_connections", run->max_readers > 1 ? (uint64_t)run->max_readers : 1);
	jsonw_ku64(&w, "aoi_events", ty->aoi_events);
	jsonw_ku64(&w, "distinct_stacks", ty->stacks);
	jsonw_ku64(&w, "patterns", npatterns);
	jsonw_ku64(&w, "clusters", ty->clusters);
	jsonw_ku64(&w, "problems", ty->problems);
	jsonw_ku64(&w, "threshold_wait_ns", ty->minsup_w);
	jsonw_ku64(&w, "threshold_run_ns", ty->minsup_r);
	jsonw_end(&w);
	if (jsonw_finish(&w) < 0) {
		buf_release(&cb);
		return miner_fail(run->m, "counts: %s", jsonw_error(&w));
	}
	memcpy(counts, cb.data, cb.len + 1);
	buf_release(&cb);
	return 0;
}

/* The phases of a set-up run in order, each timed, the progress told; t0 is the run's start. */
static int run_phases(struct runstate *run, struct stackinfo *si, const struct aoi_filter *flt, int64_t t0)
{
	struct miner *m = run->m;
	struct vec patterns = VEC_INIT(struct pattern);
	struct results_rows rr = RESULTS_ROWS_INIT;
	struct tally ty = { 0 };
	char counts[512];
	int64_t t, t_cluster;
	int rc = -1;

	t = util_now_mono_ns();
	if (select_streams(run) < 0)
		goto out;
	run->t_select = runstate_ms_since(t);

	atomic_store(&run->prog.phase, "reading events and extracting the AOI");
	t = util_now_mono_ns();
	rc = extract(run);
	runstate_close_readers(run);   /* not held through mining */
	if (rc < 0)
		goto out;
	rc = -1;
	run->t_read = runstate_ms_since(t);

	atomic_store(&run->prog.phase, "collapsing stacks");
	t = util_now_mono_ns();
	if (collapse(run, si, flt, &ty) < 0)
		goto out;
	run->t_filter = runstate_ms_since(t);
	if (miner_options(m)->cancel && *miner_options(m)->cancel) {
		miner_fail(m, "cancelled");
		goto out;
	}

	atomic_store(&run->prog.phase, "mining");
	t = util_now_mono_ns();
	if (mine(run, si, &patterns, &ty) < 0)
		goto out;
	run->t_mine = runstate_ms_since(t);

	atomic_store(&run->prog.phase, "clustering");
	t = util_now_mono_ns();
	if (cluster_run(run, si, &patterns, &rr, &ty.clusters, &ty.problems) < 0)
		goto out;
	t_cluster = runstate_ms_since(t);
	if (miner_options(m)->progress)
		log_info("run clustered", "run=%lld clusters=%zu", (long long)run->id, ty.clusters);

	atomic_store(&run->prog.phase, "storing");
	t = util_now_mono_ns();
	if (counts_json(run, &ty, patterns.len, counts, sizeof(counts)) < 0)
		goto out;
	/* the run is done once its clusters are stored; only the worker holding it may say so */
	if (results_store(run, si, &patterns, &rr, counts, t0, t) < 0 ||
	    miner_finish(m, run->id, t_cluster, runstate_ms_since(t0)) < 0)
		goto out;
	if (miner_options(m)->progress)
		log_info("run stored", "run=%lld counts=%s ms=%lld store_ms=%lld", (long long)run->id, counts,
			 (long long)runstate_ms_since(t0), (long long)runstate_ms_since(t));
	rc = 0;
out:
	vec_free(&patterns);
	results_rows_release(&rr);
	return rc;
}

/* What becomes of a run that did not end done (its error on m): queued again when the database
 * went away, back to the queue when cancelled, else failed. Returns miner_execute()'s code. */
static int run_failed(struct miner *m, int64_t run_id)
{
	bool cancelled = miner_options(m)->cancel && *miner_options(m)->cancel;
	int rc = -1;

	if (!cancelled && miner_db_lost(m)) {
		/* a restart or failover of the database is not the run's fault: it goes again */
		char why[MINER_ERRLEN];

		snprintf(why, sizeof(why), "the database went away: %s", miner_error(m));
		switch (miner_requeue_lost(m, run_id, why, RUN_DB_WAIT_S)) {
		case 1: miner_fail(m, "%s", why); rc = 2; break;
		case 0: miner_fail(m, "%s (attempt %d of %d)", why, MINER_MAX_ATTEMPTS, MINER_MAX_ATTEMPTS); break;
		default: miner_fail(m, "%s; not back after %d s: the run's lease gives it to a worker",
				    why, RUN_DB_WAIT_S);
		}
	} else {
		miner_set_status(m, run_id, cancelled ? "queued" : "failed", cancelled ? NULL : miner_error(m));
		if (cancelled)
			rc = 1;
	}
	return rc;
}

int miner_execute(struct miner *m, int64_t run_id, const struct run_params *p)
{
	struct runstate run;
	struct beat *bt = NULL;
	struct stackinfo si;
	struct aoi_filter *flt = NULL;
	int64_t t0 = util_now_mono_ns();
	int rc = -1;

	memset(&run, 0, sizeof(run));
	memset(&si, 0, sizeof(si));
	if (runstate_init(&run, m, run_id, p, p->aoi, "selecting streams") < 0)
		goto out;
	flt = aoi_filter_open(p->include, p->ninclude, p->exclude, p->nexclude);
	if (!flt) {
		miner_fail(m, "out of memory");
		goto out;
	}
	if (!(bt = beat_open(m, run_id, &run.prog)))
		goto out;
	name_frames(m, run_id);
	rc = run_phases(&run, &si, flt, t0);
out:
	beat_free(bt);
	if (run.split)
		parts_drop(m, run_id);
	if (rc < 0)
		rc = run_failed(m, run_id);
	runstate_release(&run);
	aoi_filter_free(flt);
	intern_free(si.ids);
	return rc;
}
