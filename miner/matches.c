/* matches: a run's clusters' and problems' streams and values, counted once (see matches.h). */
#include "miner/matches.h"
#include "clusterer/runclust.h"
#include "common/buf.h"
#include "common/intern.h"
#include "common/sha256.h"
#include "common/util.h"
#include "common/vec.h"
#include "miner/queue.h"
#include "miner/runstate.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Each violating stream's host, version ('' for none) and label values, in the escaped text a
 * COPY sends and takes ("key\tvalue"): the run's selection in stream order. */
#define VALUES_SQL                                                                              \
	"COPY (SELECT sel.id, x.key, x.value FROM sm_sel sel JOIN streams s ON s.id = sel.id,"     \
	" LATERAL (SELECT 'host' AS key, s.host AS value UNION ALL"                                 \
	"  SELECT 'version', coalesce(s.version, '') UNION ALL"                                     \
	"  SELECT l.key, l.value FROM jsonb_each_text(s.labels) AS l(key, value)"                  \
	"  WHERE l.key NOT IN ('', 'host', 'version')) x"                                           \
	" WHERE NOT sel.base ORDER BY sel.id) TO STDOUT"

/* Everything one pass keeps: the streams' values, and scratch per stream and per value. */
struct mctx {
	struct miner *m;
	const struct matches_input *in;
	struct intern *kv;              /* "key\tvalue" -> value id */
	uint32_t *voff, *vids;          /* stream s's value ids: vids[voff[s] .. voff[s + 1]) */
	uint32_t *srank;                /* per stream: its place in the sample's order, run-wide */
	/* per stream: the group it was last seen in, and what the group has there */
	uint32_t *sgen;
	uint64_t *scost, *sev;
	uint32_t *list;                 /* the group's streams */
	size_t nlist;
	uint32_t *sflag;                /* 1: among the top, 2 + k: the k-th of the sample */
	/* per value: the group it was last counted in, and its sums there */
	uint32_t *vgen, *vn, *vlist;
	uint64_t *vcost, *vev;
	size_t nvlist;
	uint32_t *tstamp;               /* per stack of rs: the problem it was last taken in */
};

static int by_id(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The dense number of stream id ref, or -1. */
static int64_t stream_of(const struct matches_input *in, int64_t ref)
{
	const int64_t *p = bsearch(&ref, in->refs, in->nstreams, sizeof(*in->refs), by_id);

	return p ? p - in->refs : -1;
}

/* One COPY text row "id\tkey\tvalue" into the streams' value lists (rows come by stream). */
static int take_value(struct mctx *c, const char *row, size_t n, int64_t *last, size_t *nv, size_t *cap)
{
	const char *tab = memchr(row, '\t', n);
	char num[24];
	int64_t ref, s;

	if (!tab || (size_t)(tab - row) >= sizeof(num))
		return miner_fail(c->m, "reading the streams' values: unexpected row");
	memcpy(num, row, (size_t)(tab - row));
	num[tab - row] = '\0';
	if (util_parse_i64(num, 1, INT64_MAX, &ref) < 0 || (s = stream_of(c->in, ref)) < 0)
		return miner_fail(c->m, "reading the streams' values: stream %s is not the run's", num);
	if (s != *last) {
		if (*last >= 0 && s < *last)
			return miner_fail(c->m, "reading the streams' values: out of order");
		for (int64_t k = *last + 1; k <= s; k++)
			c->voff[k] = (uint32_t)*nv;
		*last = s;
	}
	{
		const char *kv = tab + 1;
		size_t len = n - (size_t)(kv - row);
		int64_t id;

		if (len && kv[len - 1] == '\n')
			len--;
		if ((id = intern_put(c->kv, kv, len, NULL)) < 0 ||
		    vec_reserve(&c->vids, cap, *nv + 1, sizeof(*c->vids)) < 0)
			return miner_fail(c->m, "out of memory reading the streams' values");
		if (*nv >= UINT32_MAX)
			return miner_fail(c->m, "reading the streams' values: more than 2^32 values");
		c->vids[(*nv)++] = (uint32_t)id;
	}
	return 0;
}

static int read_values(struct mctx *c)
{
	PGconn *db = miner_db(c->m);
	PGresult *r = PQexec(db, VALUES_SQL);
	size_t nv = 0, cap = 0;
	int64_t last = -1;
	char *msg;
	int len, rc = 0;

	if (PQresultStatus(r) != PGRES_COPY_OUT)
		return miner_db_fail(c->m, "reading the streams' values", r);
	PQclear(r);
	while ((len = PQgetCopyData(db, &msg, 0)) > 0) {
		if (!rc)
			rc = take_value(c, msg, (size_t)len, &last, &nv, &cap);
		PQfreemem(msg);   /* after a failure: drained, so that the connection stays usable */
	}
	if (len == -2 && !rc)
		rc = miner_db_fail(c->m, "reading the streams' values", NULL);
	while ((r = PQgetResult(db))) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc)
			rc = miner_db_fail(c->m, "reading the streams' values", r);
		else
			PQclear(r);
	}
	for (int64_t k = last + 1; k <= (int64_t)c->in->nstreams; k++)
		c->voff[k] = (uint32_t)nv;
	return rc;
}

/* The sample's order (sm_match_streams(): sha256 of the id's text, then the id), over the run's
 * streams; digest[s]: stream s's. */
struct sample_order {
	const unsigned char (*digest)[SHA256_LEN];
	const int64_t *refs;
};

static int cmp_digest(const void *a, const void *b, void *arg)
{
	const struct sample_order *o = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int d = memcmp(o->digest[x], o->digest[y], SHA256_LEN);

	return d ? d : by_id(&o->refs[x], &o->refs[y]);
}

/* Every stream's place in the sample's order, ranked once for the run (a group's sample is then
 * its streams of the lowest places), into c->srank. 0, or -1 when out of memory. */
static int rank_sample(struct mctx *c)
{
	const struct matches_input *in = c->in;
	unsigned char (*digest)[SHA256_LEN] = vec_alloc(in->nstreams + 1, sizeof(*digest));
	uint32_t *order = vec_alloc(in->nstreams + 1, sizeof(*order));
	struct sample_order o = { (const unsigned char (*)[SHA256_LEN])digest, in->refs };

	if (!digest || !order) {
		free(digest);
		free(order);
		return -1;
	}
	for (size_t s = 0; s < in->nstreams; s++) {
		char num[24];
		int n = snprintf(num, sizeof(num), "%lld", (long long)in->refs[s]);

		sha256(num, (size_t)n, digest[s]);
		order[s] = (uint32_t)s;
	}
	qsort_r(order, in->nstreams, sizeof(*order), cmp_digest, &o);
	for (size_t i = 0; i < in->nstreams; i++)
		c->srank[order[i]] = (uint32_t)i;
	free(digest);
	free(order);
	return 0;
}

static int cmp_sample(const void *a, const void *b, void *arg)
{
	const struct mctx *c = arg;
	uint32_t x = c->srank[*(const uint32_t *)a], y = c->srank[*(const uint32_t *)b];

	return x < y ? -1 : x > y;
}

/* The top's: cost descending, then the id. */
static int cmp_top(const void *a, const void *b, void *arg)
{
	const struct mctx *c = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (c->scost[x] != c->scost[y])
		return c->scost[x] > c->scost[y] ? -1 : 1;
	return by_id(&c->in->refs[x], &c->in->refs[y]);
}

/* The group's streams from stacks st[0..n) into list, their cost and events summed (gen: the
 * group's mark, never 0). */
static void group_streams(struct mctx *c, const uint32_t *st, size_t n, uint32_t gen)
{
	const struct matches_input *in = c->in;

	c->nlist = 0;
	for (size_t i = 0; i < n; i++) {
		const struct runclust_stack *r = &in->rs[st[i]];

		for (uint32_t x = r->first; x < r->first + r->n; x++) {
			uint32_t s = in->sidx[x];

			if (c->sgen[s] != gen) {
				c->sgen[s] = gen;
				c->scost[s] = 0;
				c->sev[s] = 0;
				c->sflag[s] = 0;
				c->list[c->nlist++] = s;
			}
			c->scost[s] = sat_add(c->scost[s], in->scost[x]);
			c->sev[s] += in->sev[x];
		}
	}
}

/* The group's rows: its streams in the top or the sample, its values and their totals. */
static void group_rows(struct mctx *c, char of, int64_t id, uint32_t gen, struct buf *streams, struct buf *values)
{
	const struct matches_input *in = c->in;
	uint64_t cost = 0, ev = 0;
	size_t ntop = c->nlist < MATCHES_TOP ? c->nlist : MATCHES_TOP;
	size_t nsample = c->nlist < MATCHES_SAMPLE ? c->nlist : MATCHES_SAMPLE;

	qsort_r(c->list, c->nlist, sizeof(*c->list), cmp_sample, c);
	for (size_t i = 0; i < nsample; i++)
		c->sflag[c->list[i]] = 2 + (uint32_t)i;
	qsort_r(c->list, c->nlist, sizeof(*c->list), cmp_top, c);
	c->nvlist = 0;
	for (size_t i = 0; i < c->nlist; i++) {
		uint32_t s = c->list[i];

		if (i < ntop || c->sflag[s]) {
			buf_printf(streams, "%lld\t%c\t%lld\t%lld\t%llu\t%llu\t", (long long)in->run_id, of, (long long)id,
				   (long long)in->refs[s], (unsigned long long)c->scost[s], (unsigned long long)c->sev[s]);
			if (c->sflag[s])
				buf_printf(streams, "%u\n", c->sflag[s] - 1);
			else
				buf_puts(streams, "\\N\n");
		}
		cost = sat_add(cost, c->scost[s]);
		ev += c->sev[s];
		for (uint32_t k = c->voff[s]; k < c->voff[s + 1]; k++) {
			uint32_t v = c->vids[k];

			if (c->vgen[v] != gen) {
				c->vgen[v] = gen;
				c->vn[v] = 0;
				c->vcost[v] = 0;
				c->vev[v] = 0;
				c->vlist[c->nvlist++] = v;
			}
			c->vn[v]++;
			c->vcost[v] = sat_add(c->vcost[v], c->scost[s]);
			c->vev[v] += c->sev[s];
		}
	}
	for (size_t i = 0; i < c->nvlist; i++) {
		uint32_t v = c->vlist[i];
		size_t klen;
		const char *key = intern_key(c->kv, v, &klen);

		buf_printf(values, "%lld\t%c\t%lld\t", (long long)in->run_id, of, (long long)id);
		buf_append(values, key, klen);
		buf_printf(values, "\t%u\t%llu\t%llu\n", c->vn[v], (unsigned long long)c->vcost[v],
			   (unsigned long long)c->vev[v]);
	}
	buf_printf(values, "%lld\t%c\t%lld\t\t\t%zu\t%llu\t%llu\n", (long long)in->run_id, of, (long long)id, c->nlist,
		   (unsigned long long)cost, (unsigned long long)ev);
}

static int cmp_problem(const void *a, const void *b, void *arg)
{
	const struct runclust_match *m = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (m[x].problem_id != m[y].problem_id)
		return m[x].problem_id < m[y].problem_id ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Every cluster's rows, then every problem's (its clusters' stacks, each once). */
static int groups(struct mctx *c, struct buf *streams, struct buf *values)
{
	const struct runclust_matches *mm = c->in->mm;
	uint32_t gen = 0, *order, *st = NULL;
	size_t cap = 0;

	for (size_t i = 0; i < mm->n; i++) {
		group_streams(c, mm->m[i].stacks, mm->m[i].nstacks, ++gen);
		group_rows(c, 'c', mm->m[i].cluster_id, gen, streams, values);
	}
	if (!(order = vec_alloc(mm->n + 1, sizeof(*order))))
		return miner_fail(c->m, "out of memory");
	for (size_t i = 0; i < mm->n; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, mm->n, sizeof(*order), cmp_problem, mm->m);
	for (size_t i = 0, j; i < mm->n; i = j) {
		size_t n = 0;

		++gen;
		for (j = i; j < mm->n && mm->m[order[j]].problem_id == mm->m[order[i]].problem_id; j++) {
			const struct runclust_match *cm = &mm->m[order[j]];

			for (uint32_t k = 0; k < cm->nstacks; k++) {
				if (c->tstamp[cm->stacks[k]] == gen)
					continue;
				c->tstamp[cm->stacks[k]] = gen;
				if (vec_reserve(&st, &cap, n + 1, sizeof(*st)) < 0) {
					free(order);
					free(st);
					return miner_fail(c->m, "out of memory");
				}
				st[n++] = cm->stacks[k];
			}
		}
		group_streams(c, st, n, gen);
		group_rows(c, 'p', mm->m[order[i]].problem_id, gen, streams, values);
	}
	free(order);
	free(st);
	return 0;
}

static void totals(const struct matches_input *in, struct buf *out)
{
	for (size_t t = 0; t < in->nrs; t++)
		buf_printf(out, "%lld\t%c\t%u\t%llu\t%llu\t%u\n", (long long)in->run_id, in->kind[t], in->rs[t].stack_id,
			   (unsigned long long)in->rs[t].cost, (unsigned long long)in->rs[t].events, in->rs[t].n);
}

static void mctx_release(struct mctx *c)
{
	intern_free(c->kv);
	free(c->voff);
	free(c->vids);
	free(c->srank);
	free(c->sgen);
	free(c->scost);
	free(c->sev);
	free(c->list);
	free(c->sflag);
	free(c->vgen);
	free(c->vn);
	free(c->vlist);
	free(c->vcost);
	free(c->vev);
	free(c->tstamp);
}

int matches_build(struct miner *m, const struct matches_input *in, struct buf *streams, struct buf *values,
		  struct buf *totals_out)
{
	struct mctx c = { .m = m, .in = in };
	size_t ns = in->nstreams + 1, nv;
	int rc = -1;

	totals(in, totals_out);
	if (!in->mm->n)
		return 0;
	c.kv = intern_open(0);
	c.voff = vec_calloc(ns + 1, sizeof(*c.voff));
	c.srank = vec_alloc(ns, sizeof(*c.srank));
	c.sgen = vec_calloc(ns, sizeof(*c.sgen));
	c.scost = vec_alloc(ns, sizeof(*c.scost));
	c.sev = vec_alloc(ns, sizeof(*c.sev));
	c.list = vec_alloc(ns, sizeof(*c.list));
	c.sflag = vec_alloc(ns, sizeof(*c.sflag));
	c.tstamp = vec_calloc(in->nrs + 1, sizeof(*c.tstamp));
	if (!c.kv || !c.voff || !c.srank || !c.sgen || !c.scost || !c.sev || !c.list || !c.sflag || !c.tstamp) {
		miner_fail(m, "out of memory");
		goto out;
	}
	if (rank_sample(&c) < 0) {
		miner_fail(m, "out of memory");
		goto out;
	}
	if (read_values(&c) < 0)
		goto out;
	nv = intern_count(c.kv) + 1;
	c.vgen = vec_calloc(nv, sizeof(*c.vgen));
	c.vn = vec_alloc(nv, sizeof(*c.vn));
	c.vlist = vec_alloc(nv, sizeof(*c.vlist));
	c.vcost = vec_alloc(nv, sizeof(*c.vcost));
	c.vev = vec_alloc(nv, sizeof(*c.vev));
	if (!c.vgen || !c.vn || !c.vlist || !c.vcost || !c.vev) {
		miner_fail(m, "out of memory");
		goto out;
	}
	if (groups(&c, streams, values) < 0)
		goto out;
	rc = 0;
out:
	mctx_release(&c);
	return rc;
}
