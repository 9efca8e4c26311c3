/* compare: two runs' clusters matched and their cost per stream compared (see compare.h). */
#include "miner/compare.h"
#include "clusterer/excess.h"
#include "clusterer/runclust.h"
#include "clusterer/sim.h"
#include "common/arena.h"
#include "common/db.h"
#include "common/imap.h"
#include "common/par.h"
#include "common/stats.h"
#include "common/vec.h"
#include "common/wire.h"
#include "miner/baseline.h"
#include "miner/frames.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES 512
#define RARE 3               /* in large runs a pair is a candidate when it shares one of B's rarest frames */
#define COMMON 256           /* ... the rarest always, the next ones only when fewer A clusters have them */
#define ALL_PAIRS 4000000    /* below this many pairs of a kind, every pair is a candidate */

struct ccl {
	int64_t id;
	char kind;
	uint32_t streams;
	uint32_t *medoid, mlen;
	double *w, *cw;           /* the medoid's frame weights, the common part's */
	uint32_t *common, nc;
	uint32_t *title, ntitle;  /* NULL: mined before titles */
	struct baseline_seq *mem; /* its member patterns */
	uint32_t nmem;
	int64_t signature;
	int64_t match;           /* index on the other side, -1: none */
	double sim;
};

/* A collapsed AOI stack of a run: its frames and its streams' costs (ent[first .. first + n)). */
struct cstack {
	struct baseline_seq seq;
	uint32_t first, n;
};

struct side {
	int64_t id;
	uint64_t nstreams;
	struct imap sidx;        /* stream_ref -> dense index (A's first, then B's) */
	struct ccl *cl;
	size_t ncl;
	struct imap cidx;        /* cluster id -> index */
	struct cstack *st;       /* the run's collapsed stacks */
	size_t nst;
	uint32_t *ent_stream;    /* dense stream index */
	uint64_t *ent_cost;
};

struct sig {
	int64_t id;
	uint32_t *frames, n;
};

struct posting {
	uint64_t key;            /* frame << 8 | kind */
	uint32_t a;
};

static int cmp_posting(const void *x, const void *y)
{
	const struct posting *p = x, *q = y;

	if (p->key != q->key)
		return p->key < q->key ? -1 : 1;
	return p->a < q->a ? -1 : p->a > q->a;
}

struct pair {
	double sim;
	uint32_t a, b;
};

struct cmp {
	PGconn *db;
	struct arena *a;
	char *err;
	size_t errlen;
};

void compare_opts_init(struct compare_opts *o)
{
	o->min_sim = 0.5;
	o->min_change = 0.1;
	o->bootstrap = 200;
	o->threads = 0;
}

const char *compare_status_name(enum compare_status s)
{
	static const char *const names[] = { "new", "gone", "grown", "shrunk", "unchanged" };

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static int fail(struct cmp *c, const char *what, PGresult *r)
{
	db_errcpy(c->err, c->errlen, what, r ? PQresultErrorMessage(r) : PQerrorMessage(c->db));
	PQclear(r);
	return -1;
}

static int oom(struct cmp *c)
{
	snprintf(c->err, c->errlen, "comparing: out of memory");
	return -1;
}

static PGresult *q1(struct cmp *c, const char *sql, int64_t id)
{
	char buf[24];
	const char *p[1] = { buf };

	snprintf(buf, sizeof(buf), "%lld", (long long)id);
	return PQexecParams(c->db, sql, 1, NULL, p, NULL, NULL, 0);
}

/* An int array's text into arena memory. */
static int int_array(struct cmp *c, const char *text, uint32_t **out, uint32_t *n)
{
	int32_t tmp[MAX_FRAMES];
	int k = db_parse_int_array(text, tmp, MAX_FRAMES);

	if (k < 0)
		k = 0;
	*out = arena_alloc(c->a, ((size_t)k + 1) * sizeof(uint32_t));
	if (!*out)
		return -1;
	for (int i = 0; i < k; i++)
		(*out)[i] = (uint32_t)tmp[i];
	*n = (uint32_t)k;
	return 0;
}

/* A run's streams (dense indexes from base on), clusters, and each cluster's cost per stream. */
static int load_side(struct cmp *c, struct side *s, uint64_t base)
{
	PGresult *r = q1(c, "SELECT status, coalesce((counts->>'streams')::bigint, 0) FROM runs WHERE id = $1::bigint",
			 s->id);
	uint64_t n = 0;

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fail(c, "reading the run", r);
	if (PQntuples(r) == 0 || strcmp(PQgetvalue(r, 0, 0), "done") != 0) {
		snprintf(c->err, c->errlen, "run %lld: %s", (long long)s->id,
			 PQntuples(r) ? "not done" : "no such run");
		PQclear(r);
		return 1;
	}
	s->nstreams = (uint64_t)db_get_i64(r, 0, 1);
	PQclear(r);
	r = q1(c, "SELECT c.id, c.kind, c.streams, sm_canon_frames(p.frame_ids)::text,"
		  " sm_canon_frames(c.common_frame_ids)::text, sm_canon_frames(c.title_frame_ids)::text FROM clusters c"
		  " JOIN patterns p ON p.id = c.medoid WHERE c.run_id = $1::bigint ORDER BY c.id", s->id);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fail(c, "reading the run's clusters", r);
	s->ncl = (size_t)PQntuples(r);
	s->cl = arena_calloc(c->a, s->ncl + 1, sizeof(*s->cl));
	if (!s->cl) {
		PQclear(r);
		return oom(c);
	}
	for (size_t i = 0; i < s->ncl; i++) {
		struct ccl *k = &s->cl[i];

		k->id = db_get_i64(r, (int)i, 0);
		k->kind = PQgetvalue(r, (int)i, 1)[0];
		k->streams = (uint32_t)db_get_i64(r, (int)i, 2);
		k->match = -1;
		k->sim = NAN;
		if (int_array(c, PQgetvalue(r, (int)i, 3), &k->medoid, &k->mlen) < 0 ||
		    int_array(c, PQgetvalue(r, (int)i, 4), &k->common, &k->nc) < 0 ||
		    (!PQgetisnull(r, (int)i, 5) && int_array(c, PQgetvalue(r, (int)i, 5), &k->title, &k->ntitle) < 0) ||
		    imap_put(&s->cidx, (uint64_t)k->id, i) < 0) {
			PQclear(r);
			return oom(c);
		}
	}
	PQclear(r);
	/* members */
	r = q1(c, "SELECT c.id, p.kind, sm_canon_frames(p.frame_ids)::text FROM clusters c JOIN patterns p ON p.id = ANY(c.members)"
		  " WHERE c.run_id = $1::bigint ORDER BY c.id, p.id", s->id);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fail(c, "reading the clusters' patterns", r);
	for (int i = 0, j; i < PQntuples(r); i = j) {
		uint64_t ci;
		struct ccl *k;

		for (j = i; j < PQntuples(r) && strcmp(PQgetvalue(r, j, 0), PQgetvalue(r, i, 0)) == 0; j++)
			;
		if (!imap_get(&s->cidx, (uint64_t)db_get_i64(r, i, 0), &ci))
			continue;
		k = &s->cl[ci];
		k->mem = arena_calloc(c->a, (size_t)(j - i) + 1, sizeof(*k->mem));
		if (!k->mem) {
			PQclear(r);
			return oom(c);
		}
		for (int m = i; m < j; m++) {
			struct baseline_seq *q = &k->mem[k->nmem++];
			uint32_t *f, nf;

			if (int_array(c, PQgetvalue(r, m, 2), &f, &nf) < 0) {
				PQclear(r);
				return oom(c);
			}
			*q = (struct baseline_seq){ f, nf, PQgetvalue(r, m, 1)[0] == 'w' ? WIRE_WAIT : WIRE_RUN };
		}
	}
	PQclear(r);
	/* the collapsed stacks (their frames once), then their streams' costs in the same order */
	r = q1(c, "SELECT x.kind, sm_canon_frames(s.frame_ids)::text, x.n FROM (SELECT kind, stack_id, count(*) AS n FROM run_stacks"
		  " WHERE run_id = $1::bigint GROUP BY kind, stack_id) x JOIN stacks s ON s.id = x.stack_id"
		  " ORDER BY x.kind, x.stack_id", s->id);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fail(c, "reading the run's stacks", r);
	s->st = arena_calloc(c->a, (size_t)PQntuples(r) + 1, sizeof(*s->st));
	if (!s->st) {
		PQclear(r);
		return oom(c);
	}
	for (int i = 0; i < PQntuples(r); i++) {
		struct cstack *t = &s->st[s->nst++];
		uint32_t *f, nf;

		if (int_array(c, PQgetvalue(r, i, 1), &f, &nf) < 0) {
			PQclear(r);
			return oom(c);
		}
		t->seq = (struct baseline_seq){ f, nf, PQgetvalue(r, i, 0)[0] == 'w' ? WIRE_WAIT : WIRE_RUN };
		t->first = i ? t[-1].first + t[-1].n : 0;
		t->n = (uint32_t)db_get_i64(r, i, 2);
	}
	PQclear(r);
	r = q1(c, "SELECT stream_ref, cost_ns FROM run_stacks WHERE run_id = $1::bigint ORDER BY kind, stack_id", s->id);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fail(c, "reading the run's costs", r);
	if (s->nst && (size_t)PQntuples(r) != s->st[s->nst - 1].first + s->st[s->nst - 1].n) {
		PQclear(r);
		snprintf(c->err, c->errlen, "run %lld changed while it was read", (long long)s->id);
		return -1;
	}
	s->ent_stream = arena_alloc(c->a, ((size_t)PQntuples(r) + 1) * sizeof(uint32_t));
	s->ent_cost = arena_alloc(c->a, ((size_t)PQntuples(r) + 1) * sizeof(uint64_t));
	if (!s->ent_stream || !s->ent_cost) {
		PQclear(r);
		return oom(c);
	}
	for (int i = 0; i < PQntuples(r); i++) {
		uint64_t ref = (uint64_t)db_get_i64(r, i, 0), si;

		/* dense stream numbers, A's first, then B's */
		if (!imap_get(&s->sidx, ref, &si)) {
			si = base + n++;
			if (imap_put(&s->sidx, ref, si) < 0) {
				PQclear(r);
				return oom(c);
			}
		}
		s->ent_stream[i] = (uint32_t)si;
		s->ent_cost[i] = (uint64_t)db_get_i64(r, i, 1);
	}
	PQclear(r);
	if (n > s->nstreams)
		s->nstreams = n;
	return 0;
}

/* The signatures with every frame known here, as frame ids; each cluster gets the first it carries. */
static int load_signatures(struct cmp *c, struct side *sides)
{
	PGresult *r = PQexec(c->db, "SELECT s.id, array_agg(coalesce(f.canon_id, f.id) ORDER BY o.i)::text FROM signatures s"
				    " CROSS JOIN LATERAL unnest(s.frames) WITH ORDINALITY AS o(name, i)"
				    " JOIN frames f ON f.name = o.name GROUP BY s.id"
				    " HAVING count(*) = max(cardinality(s.frames)) ORDER BY s.id");
	struct sig *sg;
	size_t n;

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		return fail(c, "reading the signatures", r);
	n = (size_t)PQntuples(r);
	sg = arena_calloc(c->a, n + 1, sizeof(*sg));
	if (!sg) {
		PQclear(r);
		return oom(c);
	}
	for (size_t i = 0; i < n; i++) {
		sg[i].id = db_get_i64(r, (int)i, 0);
		if (int_array(c, PQgetvalue(r, (int)i, 1), &sg[i].frames, &sg[i].n) < 0) {
			PQclear(r);
			return oom(c);
		}
	}
	PQclear(r);
	for (int sd = 0; sd < 2; sd++)
		for (size_t k = 0; k < sides[sd].ncl; k++) {
			struct ccl *cl = &sides[sd].cl[k];

			for (size_t i = 0; i < n && !cl->signature; i++)
				if (baseline_end(sg[i].frames, sg[i].n, cl->medoid, cl->mlen))
					cl->signature = sg[i].id;
		}
	return 0;
}

static int cmp_pair(const void *x, const void *y)
{
	const struct pair *p = x, *q = y;

	if (p->sim != q->sim)
		return p->sim > q->sim ? -1 : 1;
	if (p->b != q->b)
		return p->b < q->b ? -1 : 1;
	return p->a < q->a ? -1 : p->a > q->a;
}

/* Sim of two clusters: of their medoids, or of their common parts when that is higher (two
 * clusters of the same work whose medoids took different variants). */
static int pair_sim(struct sim_ctx *sc, const struct ccl *a, const struct ccl *b, double *out)
{
	struct sim_pattern ma = { a->medoid, a->w, a->mlen }, mb = { b->medoid, b->w, b->mlen };
	struct sim_pattern ca = { a->common, a->cw, a->nc }, cb = { b->common, b->cw, b->nc };
	double s1, s2 = 0;

	if (sim_similarity(sc, &ma, &mb, &s1) < 0 || (a->nc && b->nc && sim_similarity(sc, &ca, &cb, &s2) < 0))
		return -1;
	*out = s1 > s2 ? s1 : s2;
	return 0;
}

/* A candidate pair: kept when similar enough. Returns 0, or -1 with the reason in c->err. */
static int consider(struct cmp *c, struct sim_ctx *sc, const struct side *A, const struct side *B, size_t a,
		    size_t b, double min_sim, struct vec *pairs)
{
	struct pair *pr;
	double sim;

	if (pair_sim(sc, &A->cl[a], &B->cl[b], &sim) < 0) {
		snprintf(c->err, c->errlen, "comparing: %s", sim_ctx_error(sc));
		return -1;
	}
	if (sim < min_sim)
		return 0;
	if (!(pr = vec_push(pairs)))
		return oom(c);
	*pr = (struct pair){ sim, (uint32_t)a, (uint32_t)b };
	return 0;
}

/* Signature pairs first, then the most similar medoids, one-to-one. */
static int match(struct cmp *c, struct side *A, struct side *B, const struct compare_opts *o)
{
	struct sim_frames *ft = sim_frames_open();
	struct sim_ctx *sc = NULL;
	struct imap tail = IMAP_INIT;      /* frame << 8 | kind -> start << 32 | count in posts */
	struct posting *posts = NULL;
	size_t npost = 0;
	struct vec pairs = VEC_INIT(struct pair), ids = VEC_INIT(uint32_t);
	uint32_t *stamp = NULL;
	int rc = -1;

	if (!ft)
		return oom(c);
	/* by signature */
	for (size_t b = 0; b < B->ncl; b++)
		for (size_t a = 0; a < A->ncl && B->cl[b].signature && B->cl[b].match < 0; a++)
			if (A->cl[a].match < 0 && A->cl[a].kind == B->cl[b].kind &&
			    A->cl[a].signature == B->cl[b].signature) {
				A->cl[a].match = (int64_t)b;
				B->cl[b].match = (int64_t)a;
				A->cl[a].sim = B->cl[b].sim = 1;
			}
	/* the frames and weights of every medoid */
	for (int sd = 0; sd < 2; sd++) {
		struct side *s = sd ? B : A;
		for (size_t k = 0; k < s->ncl; k++)
			for (uint32_t i = 0; i < s->cl[k].mlen; i++)
				if (vec_append(&ids, &s->cl[k].medoid[i]) < 0)
					goto out_oom;
	}
	if (frames_load(c->db, ids.data, ids.len, ft, c->err, c->errlen) < 0)
		goto out;
	if (!(sc = sim_ctx_open(ft)))
		goto out_oom;
	for (int sd = 0; sd < 2; sd++) {
		struct side *s = sd ? B : A;
		for (size_t k = 0; k < s->ncl; k++) {
			s->cl[k].w = arena_alloc(c->a, (s->cl[k].mlen + 1) * sizeof(double));
			s->cl[k].cw = arena_alloc(c->a, (s->cl[k].nc + 1) * sizeof(double));
			if (!s->cl[k].w || !s->cl[k].cw)
				goto out_oom;
			sim_weights(ft, s->cl[k].medoid, s->cl[k].mlen, s->cl[k].w);
			sim_weights(ft, s->cl[k].common, s->cl[k].nc, s->cl[k].cw);
		}
	}
	if ((double)A->ncl * (double)B->ncl <= ALL_PAIRS) {
		/* few enough: every pair of a kind */
		for (size_t b = 0; b < B->ncl; b++)
			for (size_t a = 0; a < A->ncl; a++)
				if (B->cl[b].match < 0 && A->cl[a].match < 0 && A->cl[a].kind == B->cl[b].kind &&
				    consider(c, sc, A, B, a, b, o->min_sim, &pairs) < 0)
					goto out;
		goto assign;
	}
	/* candidates: pairs that share one of the B medoid's RARE frames rarest among A's medoids (true
	 * matches share most frames; common frames such as main or __schedule would pair everything) */
	for (size_t a = 0; a < A->ncl; a++)
		npost += A->cl[a].mlen;
	posts = malloc((npost + 1) * sizeof(*posts));
	npost = 0;
	if (!posts)
		goto out_oom;
	for (size_t a = 0; a < A->ncl; a++)
		for (uint32_t i = 0; i < A->cl[a].mlen; i++)
			posts[npost++] = (struct posting){ (uint64_t)A->cl[a].medoid[i] << 8 |
							   (uint64_t)(unsigned char)A->cl[a].kind, (uint32_t)a };
	if (npost)
		qsort(posts, npost, sizeof(*posts), cmp_posting);
	for (size_t i = 0; i < npost;) {
		size_t j = i;

		while (j < npost && posts[j].key == posts[i].key)
			j++;
		if (imap_put(&tail, posts[i].key, (uint64_t)i << 32 | (j - i)) < 0)
			goto out_oom;
		i = j;
	}
	stamp = calloc(A->ncl + 1, sizeof(*stamp));
	if (!stamp)
		goto out_oom;
	for (size_t b = 0; b < B->ncl; b++) {
		const struct ccl *k = &B->cl[b];
		uint64_t rare[RARE], v;
		size_t nr = 0;

		if (k->match >= 0)
			continue;
		/* the RARE frames with the shortest posting lists (insertion into a small sorted array) */
		for (uint32_t i = 0; i < k->mlen; i++) {
			uint64_t key = (uint64_t)k->medoid[i] << 8 | (uint64_t)(unsigned char)k->kind;
			size_t at;

			if (!imap_get(&tail, key, &v))
				continue;
			for (at = 0; at < nr && rare[at] != v; at++)
				;
			if (at < nr)
				continue;   /* a frame seen twice (recursion) */
			for (at = nr; at > 0 && (rare[at - 1] & 0xffffffffu) > (v & 0xffffffffu); at--)
				if (at < RARE)
					rare[at] = rare[at - 1];
			if (at < RARE) {
				rare[at] = v;
				if (nr < RARE)
					nr++;
			}
		}
		for (size_t r = 0; r < nr && (r == 0 || (rare[r] & 0xffffffffu) <= COMMON); r++)
			for (uint64_t x = rare[r] >> 32; x < (rare[r] >> 32) + (rare[r] & 0xffffffffu); x++) {
				size_t a = posts[x].a;

				if (stamp[a] == b + 1 || A->cl[a].match >= 0)
					continue;
				stamp[a] = (uint32_t)b + 1;
				if (consider(c, sc, A, B, a, b, o->min_sim, &pairs) < 0)
					goto out;
			}
	}
assign:
	if (pairs.len)
		qsort(pairs.data, pairs.len, sizeof(struct pair), cmp_pair);
	for (size_t i = 0; i < pairs.len; i++) {
		const struct pair *p = (const struct pair *)pairs.data + i;

		if (A->cl[p->a].match >= 0 || B->cl[p->b].match >= 0)
			continue;
		A->cl[p->a].match = p->b;
		B->cl[p->b].match = p->a;
		A->cl[p->a].sim = B->cl[p->b].sim = p->sim;
	}
	rc = 0;
	goto out;
out_oom:
	oom(c);
out:
	free(stamp);
	free(posts);
	vec_free(&pairs);
	vec_free(&ids);
	imap_free(&tail);
	sim_ctx_free(sc);
	sim_frames_free(ft);
	return rc;
}

static int cmp_row(const void *x, const void *y)
{
	static const int order[] = { [CMP_NEW] = 0, [CMP_GROWN] = 1, [CMP_SHRUNK] = 2, [CMP_GONE] = 3,
				     [CMP_UNCHANGED] = 4 };
	const struct compare_row *p = x, *q = y;

	if (order[p->status] != order[q->status])
		return order[p->status] - order[q->status];
	if (fabs(p->diff) != fabs(q->diff))
		return fabs(p->diff) > fabs(q->diff) ? -1 : 1;
	if (p->b != q->b)
		return p->b < q->b ? -1 : 1;
	return p->a < q->a ? -1 : p->a > q->a;
}

/* What is compared: a cluster of B with its match in A (their members together), or an unmatched
 * cluster of A. Its owned cost in each run: the (stream, cost) pairs and their sums. */
struct unit {
	const struct ccl *ka, *kb;
	struct vec xs, xc;             /* uint32_t streams (dense, A's then B's), uint64_t costs */
	double sum[2];
};

/*
 * The units' cost in the stacks of one run. Each stack is owned by one unit, as for the excess
 * (analysis.md): of the units with a member contained in it, the one whose member ends deepest,
 * then the longer member, then the lower unit. So a generic cluster (the request dispatch) is
 * measured without the regressions that run beneath it, in both runs alike.
 */
static int measure_side(struct cmp *c, const struct side *s, int sd, struct unit *u, size_t nu, int threads)
{
	struct baseline_seq *pats = NULL, *stk = NULL;
	uint32_t *punit = NULL, *owner = NULL, *end = NULL, *len = NULL, *off = NULL, *idx = NULL;
	size_t np = 0;
	int rc = -1;

	for (size_t k = 0; k < nu; k++)
		np += (u[k].ka ? u[k].ka->nmem : 0) + (u[k].kb ? u[k].kb->nmem : 0);
	pats = malloc((np + 1) * sizeof(*pats));
	punit = malloc((np + 1) * sizeof(*punit));
	stk = malloc((s->nst + 1) * sizeof(*stk));
	owner = malloc((s->nst + 1) * sizeof(*owner));
	end = calloc(s->nst + 1, sizeof(*end));
	len = calloc(s->nst + 1, sizeof(*len));
	if (!pats || !punit || !stk || !owner || !end || !len)
		goto out_oom;
	np = 0;
	for (size_t k = 0; k < nu; k++)
		for (int side = 0; side < 2; side++) {
			const struct ccl *cl = side ? u[k].kb : u[k].ka;

			for (uint32_t m = 0; cl && m < cl->nmem; m++) {
				pats[np] = cl->mem[m];
				punit[np++] = (uint32_t)k;
			}
		}
	for (size_t t = 0; t < s->nst; t++) {
		stk[t] = s->st[t].seq;
		owner[t] = UINT32_MAX;
	}
	if (baseline_match(stk, s->nst, pats, np, threads, &off, &idx) < 0)
		goto out_oom;
	for (size_t p = 0; p < np; p++)
		for (uint32_t i = off[p]; i < off[p + 1]; i++) {
			uint32_t t = idx[i], e = baseline_end(pats[p].frames, pats[p].len, stk[t].frames, stk[t].len), o = owner[t];

			if (o != UINT32_MAX && (e < end[t] || (e == end[t] && (pats[p].len < len[t] ||
								       (pats[p].len == len[t] && o <= punit[p])))))
				continue;
			owner[t] = punit[p];
			end[t] = e;
			len[t] = pats[p].len;
		}
	for (size_t t = 0; t < s->nst; t++) {
		struct unit *un;

		if (owner[t] == UINT32_MAX)
			continue;
		un = &u[owner[t]];
		for (uint32_t x = s->st[t].first; x < s->st[t].first + s->st[t].n; x++) {
			/* a stream may come once per stack it has: the estimator is linear in the costs */
			if (vec_append(&un->xs, &s->ent_stream[x]) < 0 || vec_append(&un->xc, &s->ent_cost[x]) < 0)
				goto out_oom;
			un->sum[sd] += (double)s->ent_cost[x];
		}
	}
	rc = 0;
	goto out;
out_oom:
	oom(c);
out:
	free(pats);
	free(punit);
	free(stk);
	free(owner);
	free(end);
	free(len);
	free(off);
	free(idx);
	return rc;
}

#define SIGNIFICANT 0.05      /* the adjusted p-value under which a change counts */

static enum compare_status status_of(const struct compare_row *r, const struct compare_opts *o)
{
	bool sig = !isnan(r->q) && r->q < SIGNIFICANT;

	if (!r->a && r->b_cps > 0 && r->a_cps <= o->min_change * r->b_cps)
		return CMP_NEW;
	if (!r->b && r->a_cps > 0 && r->b_cps <= o->min_change * r->a_cps)
		return CMP_GONE;
	if (sig && r->lo > 0 && r->diff > o->min_change * r->a_cps)
		return CMP_GROWN;
	if (sig && r->hi < 0 && -r->diff > o->min_change * r->a_cps)
		return CMP_SHRUNK;
	return CMP_UNCHANGED;
}

struct interval_job {
	const struct excess *x;
	const struct unit *u;
	struct compare_row *rows;
	uint64_t nb;
	struct par_items items;
	_Atomic int failed;
};

static void interval_worker(void *arg, int w)
{
	struct interval_job *j = arg;
	struct excess_result er;
	size_t k;

	(void)w;
	while (par_take(&j->items, &k)) {
		struct compare_row *row = &j->rows[k];

		if (excess_measure(j->x, j->u[k].xs.data, j->u[k].xc.data, j->u[k].xs.len, &er) < 0) {
			j->failed = 1;
			continue;
		}
		row->lo = er.lo / (double)j->nb;
		row->hi = er.hi / (double)j->nb;
		/* two-sided z-test with the bootstrap's standard error */
		row->q = er.sd > 0 ? erfc(fabs(er.excess / er.sd) / sqrt(2)) : (er.excess != 0 ? 0 : 1);
	}
}

/* The units (every B cluster with its match, then A's unmatched), measured in both runs. */
static int build_rows(struct cmp *c, struct side *A, struct side *B, const struct compare_opts *o,
		      struct compare *out)
{
	uint64_t na = A->nstreams, nb = B->nstreams;
	uint8_t *base = calloc(na + nb + 1, 1);
	uint32_t *type = calloc(na + nb + 1, sizeof(*type));
	struct excess_streams es = { na + nb, base, type, 1 };
	struct excess *x = NULL;
	struct unit *u = calloc(A->ncl + B->ncl + 1, sizeof(*u));
	size_t nu = 0;
	int rc = -1;

	out->rows = arena_calloc(c->a, A->ncl + B->ncl + 1, sizeof(*out->rows));
	if (!base || !type || !u || !out->rows)
		goto out_oom;
	for (size_t k = 0; k < B->ncl; k++)
		u[nu++] = (struct unit){ B->cl[k].match >= 0 ? &A->cl[B->cl[k].match] : NULL, &B->cl[k],
					 VEC_INIT(uint32_t), VEC_INIT(uint64_t), { 0, 0 } };
	for (size_t k = 0; k < A->ncl; k++)
		if (A->cl[k].match < 0)
			u[nu++] = (struct unit){ &A->cl[k], NULL, VEC_INIT(uint32_t), VEC_INIT(uint64_t), { 0, 0 } };
	if (measure_side(c, A, 0, u, nu, o->threads) < 0 || measure_side(c, B, 1, u, nu, o->threads) < 0)
		goto out;
	/* A's streams as the "baseline": the excess of B over A per B stream is the difference */
	for (uint64_t i = 0; i < na; i++)
		base[i] = 1;
	if (na && nb && !(x = excess_open(&es, o->bootstrap, (uint64_t)(A->id * 1000003 + B->id))))
		goto out_oom;
	for (size_t k = 0; k < nu; k++) {
		const struct ccl *ka = u[k].ka, *kb = u[k].kb, *me = kb ? kb : ka;
		struct compare_row *row = &out->rows[out->n++];

		row->kind = me->kind == 'w' ? 'w' : 'r';
		row->a = ka ? ka->id : 0;
		row->b = kb ? kb->id : 0;
		row->sim = me->sim;
		row->signature = ka && kb && ka->signature == kb->signature ? kb->signature : 0;
		row->a_streams = ka ? ka->streams : 0;
		row->b_streams = kb ? kb->streams : 0;
		row->common = me->common;
		row->ncommon = me->nc;
		row->title = me->title;
		row->ntitle = me->ntitle;
		row->a_cps = na ? u[k].sum[0] / (double)na : 0;
		row->b_cps = nb ? u[k].sum[1] / (double)nb : 0;
		row->diff = row->b_cps - row->a_cps;
		row->lo = row->hi = row->q = NAN;
	}
	if (x) {
		/* the intervals, on all cores: the rows are in the units' order still */
		struct interval_job job = { x, u, out->rows, nb, { 0, 0 }, 0 };

		par_items_init(&job.items, nu);
		par_run(par_threads(o->threads), interval_worker, &job);
		if (job.failed)
			goto out_oom;
	}
	/* adjusted over every row compared */
	if (x) {
		double *p = malloc((out->n + 1) * sizeof(*p));

		if (!p)
			goto out_oom;
		for (size_t k = 0; k < out->n; k++)
			p[k] = out->rows[k].q;
		if (stats_bh(p, out->n, p) < 0) {
			free(p);
			goto out_oom;
		}
		for (size_t k = 0; k < out->n; k++)
			out->rows[k].q = p[k];
		free(p);
	}
	for (size_t k = 0; k < out->n; k++)
		out->rows[k].status = status_of(&out->rows[k], o);
	qsort(out->rows, out->n, sizeof(*out->rows), cmp_row);
	rc = 0;
	goto out;
out_oom:
	oom(c);
out:
	for (size_t k = 0; u && k < nu; k++) {
		vec_free(&u[k].xs);
		vec_free(&u[k].xc);
	}
	free(u);
	excess_free(x);
	free(base);
	free(type);
	return rc;
}

int compare_runs(PGconn *db, int64_t a, int64_t b, const struct compare_opts *o, struct compare **out,
		 char *err, size_t errlen)
{
	struct cmp c = { db, NULL, err, errlen };
	struct side sides[2];
	struct compare *res;
	int rc;

	*out = NULL;
	memset(sides, 0, sizeof(sides));
	sides[0].id = a;
	sides[1].id = b;
	for (int i = 0; i < 2; i++)
		sides[i].sidx = sides[i].cidx = (struct imap)IMAP_INIT;
	res = calloc(1, sizeof(*res));
	if (!res || !(res->arena = arena_open(0))) {
		free(res);
		return oom(&c);
	}
	c.a = res->arena;
	res->a = a;
	res->b = b;
	if ((rc = load_side(&c, &sides[0], 0)) != 0 || (rc = load_side(&c, &sides[1], sides[0].nstreams)) != 0 ||
	    (rc = load_signatures(&c, sides)) != 0 || (rc = match(&c, &sides[0], &sides[1], o)) != 0 ||
	    (rc = build_rows(&c, &sides[0], &sides[1], o, res)) != 0)
		goto out;
	res->a_streams = sides[0].nstreams;
	res->b_streams = sides[1].nstreams;
	*out = res;
	res = NULL;
out:
	for (int i = 0; i < 2; i++) {
		imap_free(&sides[i].sidx);
		imap_free(&sides[i].cidx);
	}
	compare_free(res);
	return rc;
}

void compare_free(struct compare *c)
{
	if (!c)
		return;
	arena_free(c->arena);
	free(c);
}
