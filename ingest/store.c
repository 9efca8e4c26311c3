/* store: interning, COPY of events and statistics in one transaction (see store.h). */
#include "ingest/store.h"
#include "common/arena.h"
#include "common/db.h"
#include "common/evpack.h"
#include "common/imap.h"
#include "common/intern.h"
#include "common/log.h"
#include "common/statfold.h"
#include "common/util.h"
#include "common/vec.h"
#include "ingest/idcache.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Names or stacks sent to the database in one interning statement. */
#define INTERN_CHUNK 4000
/* COPY data is sent in pieces of this size. */
#define COPY_PIECE (256 * 1024)

struct store {
	PGconn *db;
	char *conninfo;
	struct idcache *cache;
	char err[1024];
	int failure;   /* the last failure's kind: STORE_EDB (db_fail(), the default), STORE_EINTERNAL, STORE_EBUSY */
	struct arena *scratch;     /* per call */
	struct buf param;          /* array literals */
	struct buf param2, param3, param4;
	struct buf copy;           /* COPY rows */
	struct buf names;          /* a stream's thread names, as JSON */
	struct imap named;         /* tid -> index in the stream's threads, per stream */
	struct intern *missing;    /* frames or stacks not in the cache, per call */
	struct imap stat_idx;      /* per batch: the unnamed frames seen, then the frames' and calls' counters */
	struct imap canon;         /* frame id -> its canonical frame's id, this batch's aliases only */
	uint64_t epoch;            /* the cache's epoch when this call's ids were mapped */
	uint64_t stamp;            /* and its generation (idcache_stamp()), for what they put */
	int backend_pid;           /* of the session the statements were prepared in */
	bool sharded;              /* events go to shards: through the staging table (copy_events) */
	int seen;                  /* since store_db_seen(): 1 the connection was good, -1 it was not */
};

/* Per stream, what its frames and stacks are in the database. */
struct mapped {
	int32_t *frame_db;   /* by frame index; -1 if unused */
	uint8_t *unnamed;    /* by frame index, where used: frame_is_unnamed() of its name */
	int32_t *stack_db;   /* by stack index; -1 if unused */
	int32_t **stack_frames; /* by stack index: database frame ids */
	int64_t ref;         /* streams.id when accepted */
};

/* Interning looks each key up in the unique index once (a subquery per key, not a join, which
 * the planner may answer by hashing the whole table: see stacks below): those found are returned
 * as they are, and only the others are inserted (ON CONFLICT probing the index again, which it
 * must for a key another batch inserts meanwhile). The same key inserted by a concurrent batch
 * after this statement's snapshot is in neither part: the get_ statement of the second pass finds
 * it. Inserted in key order, so that two batches lock the keys they share in one order. */
static const char SQL_INS_FRAMES[] =
	"WITH input AS MATERIALIZED (SELECT i.name, (SELECT f.id FROM frames f WHERE f.name = i.name) AS id"
	"   FROM (SELECT DISTINCT unnest($1::text[]) AS name) i),"
	" ins AS (INSERT INTO frames (name) SELECT name FROM input WHERE id IS NULL ORDER BY 1"
	"         ON CONFLICT (name) DO NOTHING RETURNING id, name)"
	" SELECT id, name FROM input WHERE id IS NOT NULL UNION ALL SELECT id, name FROM ins";
static const char SQL_GET_FRAMES[] =
	"SELECT id, name FROM frames WHERE name = ANY($1::text[])";
/* A chunk's stacks come as one flat array of frame ids ($1) with each stack's offset ($2) and length
 * ($3), binary: the server parses no text. An answer row is a stack's position in the chunk
 * (1-based) and its id.
 *
 * Stacks are unique by (hash, frame_ids), hash a column the server computes from frame_ids
 * (sql/029_stacks_hash.sql): the same uniqueness as frame_ids alone, but a descent of the index
 * compares 64-bit hashes, not arrays that share their outermost frames over long prefixes. Each
 * stack is looked up on its own (a subquery per row): a join let the planner hash the whole table
 * for a chunk, a cost that grows with every stack ever stored. (OFFSET 0: a stack's slice and hash
 * computed once, not inlined into each of their uses.)
 *
 * ins_stacks runs under the stacks' interning lock, taken by a statement of its own before it in
 * the same transaction, so that its snapshot sees every stack the lock's last holder inserted:
 * what its lookup did not find is new, and is inserted without ON CONFLICT, whose check would be
 * another descent per new stack. The new stacks' ids are taken from the sequence beforehand, so
 * that the answer needs no join of the inserted rows back to the chunk's by their arrays. A writer
 * that takes no lock (not sm-ingest: a script, an operator's psql) can still insert one of them
 * meanwhile: the unique violation then sends the chunk to ins_stacks_any and get_stacks, the way
 * of frames above. Inserted in key order, so that two writers lock the keys they share in one
 * order. */
#define STACKS_SLICES                                                                              \
	"WITH slices AS (SELECT u.k, x.hash, x.frame_ids"                                          \
	"   FROM unnest($2::integer[], $3::integer[]) WITH ORDINALITY AS u(o, n, k),"              \
	"   LATERAL (SELECT hash_array_extended(f, 0) AS hash, f AS frame_ids"                     \
	"            FROM (SELECT ($1::integer[])[u.o + 1 : u.o + u.n] AS f OFFSET 0) a"           \
	"            OFFSET 0) x),"                                                                \
	" input AS MATERIALIZED (SELECT i.k, i.hash, i.frame_ids, (SELECT s.id FROM stacks s"     \
	"   WHERE s.hash = i.hash AND s.frame_ids = i.frame_ids) AS id FROM slices i)"
#define STACKS_NEW                                                                                 \
	STACKS_SLICES ", new AS MATERIALIZED (SELECT k, hash, frame_ids,"                          \
	"   nextval((SELECT pg_get_serial_sequence('stacks', 'id')::regclass)) AS id"             \
	"   FROM input WHERE id IS NULL),"                                                         \
	" ins AS (INSERT INTO stacks (id, frame_ids) SELECT id, frame_ids FROM new ORDER BY hash, frame_ids"
#define STACKS_OUT                                                                                 \
	" RETURNING id) SELECT k, id FROM input WHERE id IS NOT NULL"                              \
	" UNION ALL SELECT n.k, n.id FROM new n JOIN ins USING (id)"
static const char SQL_INS_STACKS[] = STACKS_NEW STACKS_OUT;
static const char SQL_INS_STACKS_ANY[] = STACKS_NEW " ON CONFLICT (hash, frame_ids) DO NOTHING" STACKS_OUT;
static const char SQL_GET_STACKS[] = STACKS_SLICES " SELECT k, id FROM input WHERE id IS NOT NULL";
static const char SQL_LOCK_STACKS[] = "BEGIN; SELECT pg_advisory_xact_lock(hashtext('stackmine.intern.stacks'))";
/* A batch's streams in one statement, inserted in the order given (stream_id's: two batches lock
 * the ids they share in one order); returns each accepted stream's position (1-based) and id. Of
 * the same id twice in a batch, the first is inserted and the second conflicts with it. */
static const char SQL_INS_STREAMS[] =
	"WITH u AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[],"
	"   $6::jsonb[], $7::text[], $8::integer[], $9::bigint[], $10::bigint[], $11::text[], $12::bigint[],"
	"   $13::integer[], $15::text[], $16::double precision[], $17::jsonb[])"
	"   WITH ORDINALITY AS u(stream_id, host, app, version, build_id, labels, symptom_kind, symptom_tid,"
	"   symptom_start_ns, symptom_end_ns, symptom_unit_type, symptom_threshold_ns, n_events, role, weight,"
	"   thread_names, ord)),"
	" ins AS (INSERT INTO streams (stream_id, host, app, version, build_id, labels, symptom_kind,"
	"   symptom_tid, symptom_start_ns, symptom_end_ns, symptom_unit_type, symptom_threshold_ns,"
	"   n_events, received_at, role, weight, thread_names)"
	"   SELECT stream_id, host, app, version, build_id, labels, symptom_kind, symptom_tid, symptom_start_ns,"
	"   symptom_end_ns, symptom_unit_type, symptom_threshold_ns, n_events, $14::timestamptz, role, weight,"
	"   thread_names FROM u ORDER BY ord"
	"   ON CONFLICT (stream_id) DO NOTHING RETURNING id, stream_id)"
	" SELECT min(u.ord), ins.id FROM ins JOIN u USING (stream_id) GROUP BY ins.id";
/* A batch's stream ids, taken ahead of a COPY of its streams (copy_streams()). */
static const char SQL_STREAM_IDS[] =
	"SELECT nextval(q) FROM (SELECT pg_get_serial_sequence('streams', 'id')::regclass AS q) s,"
	" generate_series(1, $1::integer)";
static const char SQL_FRAME_ADDRS[] =
	"WITH a AS (INSERT INTO frame_addrs (frame_id, build_id, addr)"
	"           SELECT * FROM unnest($1::integer[], $2::text[], $3::bigint[]) ORDER BY 1"
	"           ON CONFLICT (frame_id) DO NOTHING)"
	" SELECT id, canon_id FROM frames WHERE id = ANY($4::integer[]) AND canon_id IS NOT NULL";
static const char SQL_STAT_DELTA[] =
	"INSERT INTO stat_deltas (day, streams, frame_ids, frame_counts, callers, callees, call_counts)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7)";

static const struct {
	const char *name, *sql;
} statements[] = {
	{ "ins_frames", SQL_INS_FRAMES },   { "get_frames", SQL_GET_FRAMES },
	{ "ins_stacks", SQL_INS_STACKS },   { "get_stacks", SQL_GET_STACKS },
	{ "ins_stacks_any", SQL_INS_STACKS_ANY },
	{ "ins_streams", SQL_INS_STREAMS },   { "stat_delta", SQL_STAT_DELTA },
	{ "frame_addrs", SQL_FRAME_ADDRS }, { "stream_ids", SQL_STREAM_IDS },
};

static int db_fail(struct store *st, const char *what, const PGresult *r)
{
	db_errcpy(st->err, sizeof(st->err), what, r ? PQresultErrorMessage(r) : PQerrorMessage(st->db));
	st->failure = STORE_EDB;   /* the last failure's kind goes with its message */
	return -1;
}

/* This server's own failure (out of memory), not the database's: store_streams() then says
 * STORE_EINTERNAL. -1. */
static int own_fail(struct store *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int own_fail(struct store *st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(st->err, sizeof(st->err), fmt, ap);
	va_end(ap);
	st->failure = STORE_EINTERNAL;
	return -1;
}

/* Frames or stacks changed in the database while the batch was stored (an id it inserted or
 * looked up is gone again: a collection of unused ones, or a trigger): STORE_EBUSY. -1. */
static int changed_fail(struct store *st, const char *what)
{
	snprintf(st->err, sizeof(st->err), "%s", what);
	st->failure = STORE_EBUSY;
	return -1;
}

/* Whether the events are sharded (018_shards.sql): COPY into a partitioned table routes each row to
 * a foreign partition with a statement of its own, INSERT ... SELECT sends them 1,000 at a time, so
 * sharded events are copied into a temporary table first. */
static int check_shards(struct store *st)
{
	PGresult *r = PQexec(st->db, "SELECT EXISTS (SELECT 1 FROM shards)");

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_fail(st, "reading the shards", r);
		PQclear(r);
		return -1;
	}
	st->sharded = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (!st->sharded)
		return 0;
	return db_exec(st->db, "CREATE TEMP TABLE IF NOT EXISTS sm_ev_stage (LIKE event_chunks INCLUDING COMPRESSION)"
		       " ON COMMIT DELETE ROWS",
		       st->err, sizeof(st->err));
}

static int prepare_all(struct store *st)
{
	for (size_t i = 0; i < sizeof(statements) / sizeof(statements[0]); i++) {
		PGresult *r = PQprepare(st->db, statements[i].name, statements[i].sql, 0, NULL);
		int ok = PQresultStatus(r) == PGRES_COMMAND_OK;

		if (!ok)
			db_fail(st, statements[i].name, r);
		PQclear(r);
		if (!ok)
			return -1;
	}
	/* COPY's received_at and the statistics' day are both UTC; a statement that
	 * hangs must not hold a request (and a shutdown) forever */
	if (db_exec(st->db, "SET TimeZone = 'UTC'; SET statement_timeout = '60s'", st->err, sizeof(st->err)) < 0)
		return -1;
	return check_shards(st);
}

struct store *store_open(const char *conninfo, struct idcache *cache, char *err, size_t errlen)
{
	struct store *st = calloc(1, sizeof(*st));

	if (!st) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	st->cache = cache;
	st->canon = (struct imap)IMAP_INIT;
	st->conninfo = strdup(conninfo ? conninfo : "");
	st->scratch = arena_open(0);
	/* a batch's ids and rows: reused, not faulted in again for every batch */
	if (st->scratch)
		arena_retain(st->scratch, (size_t)8 << 20);
	st->missing = intern_open(0);
	st->stat_idx = (struct imap)IMAP_INIT;
	if (!st->conninfo || !st->scratch || !st->missing) {
		snprintf(err, errlen, "out of memory");
		goto fail_free;
	}
	st->db = db_connect(st->conninfo, err, errlen);
	if (!st->db)
		goto fail_free;
	if (prepare_all(st) < 0) {
		snprintf(err, errlen, "%s", st->err);
		goto fail_free;
	}
	st->backend_pid = PQbackendPID(st->db);
	return st;
fail_free:
	store_free(st);
	return NULL;
}

void store_free(struct store *st)
{
	if (!st)
		return;
	if (st->db)
		PQfinish(st->db);
	free(st->conninfo);
	arena_free(st->scratch);
	intern_free(st->missing);
	imap_free(&st->stat_idx);
	imap_free(&st->canon);
	buf_release(&st->param);
	buf_release(&st->param2);
	buf_release(&st->param3);
	buf_release(&st->param4);
	buf_release(&st->copy);
	buf_release(&st->names);
	imap_free(&st->named);
	free(st);
}

int store_db_seen(struct store *st)
{
	int seen = st->seen;

	st->seen = 0;
	/* good when taken, broken since (the server went away in the middle of a statement) */
	if (seen > 0 && PQstatus(st->db) != CONNECTION_OK)
		seen = -1;
	return seen;
}

const char *store_error(const struct store *st)
{
	return st->err;
}

PGconn *store_conn(struct store *st)
{
	if (!db_alive(st->db)) {
		st->seen = -1;
		db_fail(st, "database connection lost", NULL);
		return NULL;
	}
	st->seen = 1;
	if (PQbackendPID(st->db) == st->backend_pid)
		return st->db;
	/* a new session (the server restarted, or a standby took over): its statements are to
	 * prepare again, and ids cached from the old one may not exist any more */
	log_warn("database connection re-established", "server=\"%s:%s\"", PQhost(st->db), PQport(st->db));
	idcache_clear(st->cache);
	if (prepare_all(st) < 0)
		return NULL;
	st->backend_pid = PQbackendPID(st->db);
	return st->db;
}

/* Whether a frame's name may be an unnamed frame's (`module+0xOFFSET`, docs/symbols.md): those
 * are recorded with their build and address (store_unnamed_frames()). Worked out once per name and
 * kept in the id cache beside its id. */
static uint8_t frame_is_unnamed(const char *name, size_t len)
{
	return memmem(name, len, "+0x", 3) != NULL;
}

/*
 * Intern the frame names collected in st->missing, writing their database ids
 * to ids[dense index]. The insert statement's own snapshot cannot see rows
 * another writer committed meanwhile, so whatever it did not return is read
 * again by a second statement.
 */
static int intern_frames(struct store *st, int32_t *ids)
{
	size_t total = intern_count(st->missing);

	for (size_t i = 0; i < total; i++)
		ids[i] = -1;
	for (size_t lo = 0; lo < total; lo += INTERN_CHUNK) {
		size_t hi = lo + INTERN_CHUNK < total ? lo + INTERN_CHUNK : total;

		for (int pass = 0; pass < 2; pass++) {
			const char *params[1];
			PGresult *r;
			size_t want = 0;

			buf_reset(&st->param);
			buf_putc(&st->param, '{');
			for (size_t i = lo; i < hi; i++) {
				size_t len;
				const void *key;

				if (ids[i] >= 0)
					continue;
				key = intern_key(st->missing, (uint32_t)i, &len);
				if (want++)
					buf_putc(&st->param, ',');
				db_put_array_str(&st->param, key, len);
			}
			if (buf_putc(&st->param, '}') < 0) {
				own_fail(st, "interning: out of memory");
				return -1;
			}
			if (!want)
				break;
			params[0] = buf_cstr(&st->param);
			r = PQexecPrepared(st->db, pass ? "get_frames" : "ins_frames", 1, params, NULL, NULL, 0);
			if (PQresultStatus(r) != PGRES_TUPLES_OK) {
				db_fail(st, "interning frames", r);
				PQclear(r);
				return -1;
			}
			for (int row = 0; row < PQntuples(r); row++) {
				int64_t k = intern_find(st->missing, PQgetvalue(r, row, 1), (size_t)PQgetlength(r, row, 1));

				if (k >= 0)
					ids[k] = (int32_t)strtol(PQgetvalue(r, row, 0), NULL, 10);
			}
			PQclear(r);
		}
		for (size_t i = lo; i < hi; i++)
			if (ids[i] < 0) {
				changed_fail(st, "interning frames: an id was not returned");
				return -1;
			}
	}
	return 0;
}

/* The stacks of [lo, hi) still without an id as the parameters of the stacks' statements (param:
 * their frames, param2: offsets, param3: lengths); sent[j] is the key of the j-th. How many, or
 * SIZE_MAX when out of memory. */
static size_t stack_params(struct store *st, size_t lo, size_t hi, const int32_t *ids, uint32_t *sent)
{
	struct buf *flat = &st->param, *off = &st->param2, *len = &st->param3;
	size_t n = 0, nflat = 0;
	int rc;

	for (size_t i = lo; i < hi; i++)
		if (ids[i] < 0) {
			size_t bytes;

			intern_key(st->missing, (uint32_t)i, &bytes);
			nflat += bytes / sizeof(int32_t);
			n++;
		}
	buf_reset(flat);
	buf_reset(off);
	buf_reset(len);
	if (nflat > INT32_MAX)
		return SIZE_MAX;
	rc = db_put_int4_array(flat, nflat) | db_put_int4_array(off, n) | db_put_int4_array(len, n);
	nflat = n = 0;
	for (size_t i = lo; i < hi; i++) {
		size_t bytes, k;
		const int32_t *f;

		if (ids[i] >= 0)
			continue;
		f = intern_key(st->missing, (uint32_t)i, &bytes);
		k = bytes / sizeof(int32_t);
		rc |= db_put_int4_elem(off, (int32_t)nflat) | db_put_int4_elem(len, (int32_t)k);
		for (size_t j = 0; j < k; j++)
			rc |= db_put_int4_elem(flat, f[j]);
		nflat += k;
		sent[n++] = (uint32_t)i;
	}
	return rc || flat->len > INT32_MAX ? SIZE_MAX : n;
}

/* The same for the stacks collected in st->missing: ins_stacks under the lock, or, after a
 * conflict with a writer that took none, ins_stacks_any and get_stacks (SQL_INS_STACKS). */
static int intern_stacks(struct store *st, int32_t *ids)
{
	static const char *const steps[] = { "ins_stacks", "ins_stacks_any", "get_stacks" };
	size_t total = intern_count(st->missing);
	uint32_t *sent = arena_alloc(st->scratch, INTERN_CHUNK * sizeof(*sent));

	if (!sent)
		goto fail_oom;
	for (size_t i = 0; i < total; i++)
		ids[i] = -1;
	for (size_t lo = 0; lo < total; lo += INTERN_CHUNK) {
		size_t hi = lo + INTERN_CHUNK < total ? lo + INTERN_CHUNK : total;

		for (int step = 0; step < 3; step++) {
			size_t want = stack_params(st, lo, hi, ids, sent);

			if (want == SIZE_MAX)
				goto fail_oom;
			if (!want)
				break;

			const int formats[3] = { 1, 1, 1 };
			const char *params[3] = { st->param.data, st->param2.data, st->param3.data };
			const int lens[3] = { (int)st->param.len, (int)st->param2.len, (int)st->param3.len };
			PGresult *r;

			if (step == 0 && db_exec(st->db, SQL_LOCK_STACKS, st->err, sizeof(st->err)) < 0) {
				PQclear(PQexec(st->db, "ROLLBACK"));
				return -1;
			}
			r = PQexecPrepared(st->db, steps[step], 3, params, lens, formats, 0);
			if (PQresultStatus(r) != PGRES_TUPLES_OK) {
				const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
				bool conflict = step == 0 && state && strcmp(state, "23505") == 0;

				if (!conflict)
					db_fail(st, "interning stacks", r);
				PQclear(r);
				if (step == 0)
					PQclear(PQexec(st->db, "ROLLBACK"));
				if (!conflict)
					return -1;
				log_info("a new stack was inserted meanwhile by a writer without the stacks' lock",
					 "stacks=%zu", want);
				continue;
			}
			for (int row = 0; row < PQntuples(r); row++) {
				int64_t k = db_get_i64(r, row, 0);

				if (k >= 1 && (size_t)k <= want)
					ids[sent[k - 1]] = (int32_t)db_get_i64(r, row, 1);
			}
			if (step == 2 && PQntuples(r) > 0)
				log_info("new stacks committed meanwhile by another writer, read back", "stacks=%d",
					 PQntuples(r));
			PQclear(r);
			if (step == 0) {
				if (db_exec(st->db, "COMMIT", st->err, sizeof(st->err)) < 0)
					return -1;
				break;
			}
		}
		for (size_t i = lo; i < hi; i++)
			if (ids[i] < 0) {
				changed_fail(st, "interning stacks: an id was not returned");
				return -1;
			}
	}
	return 0;
fail_oom:
	own_fail(st, "interning stacks: out of memory");
	return -1;
}

/* In struct mapped, ids >= 0 are database ids, -1 marks what no event uses, and
 * v <= -2 means "not cached: key number -2 - v of st->missing". */
#define MISSING(k) (-2 - (int32_t)(k))
#define MISSING_KEY(v) ((size_t)(-2 - (v)))

static int resolve_missing(struct store *st, bool is_stack, int32_t **local)
{
	size_t cnt = intern_count(st->missing);

	*local = NULL;
	if (!cnt)
		return 0;
	*local = arena_alloc(st->scratch, cnt * sizeof(int32_t));
	if (!*local) {
		own_fail(st, "out of memory");
		return -1;
	}
	if ((is_stack ? intern_stacks(st, *local) : intern_frames(st, *local)) < 0)
		return -1;
	for (size_t k = 0; k < cnt; k++) {
		size_t len;
		const void *key = intern_key(st->missing, (uint32_t)k, &len);

		if (is_stack)
			idcache_put_stack(st->cache, key, (uint32_t)(len / sizeof(int32_t)), (*local)[k], st->stamp);
		else
			idcache_put_frame(st->cache, key, len, (*local)[k], frame_is_unnamed(key, len),
					  st->stamp);
	}
	return 0;
}

/* Work out the database frame and stack ids of every stack the events use. */
static int map_ids(struct store *st, const struct wire_stream *const *ss, size_t n,
		   struct mapped *m)
{
	struct arena *a = st->scratch;
	int32_t *local;

	intern_clear(st->missing);
	for (size_t s = 0; s < n; s++) {
		const struct wire_stream *w = ss[s];
		size_t nused = 0;
		const char **names = arena_alloc(a, (w->nframes + 1) * sizeof(*names));
		size_t *lens = arena_alloc(a, (w->nframes + 1) * sizeof(*lens));
		uint32_t *used = arena_alloc(a, (w->nframes + 1) * sizeof(*used));
		int32_t *ids = arena_alloc(a, (w->nframes + 1) * sizeof(*ids));
		uint8_t *tags = arena_alloc(a, w->nframes + 1);

		m[s].frame_db = arena_alloc(a, (w->nframes + 1) * sizeof(int32_t));
		m[s].unnamed = arena_alloc(a, w->nframes + 1);
		m[s].stack_db = arena_alloc(a, (w->nstacks + 1) * sizeof(int32_t));
		m[s].stack_frames = arena_calloc(a, w->nstacks + 1, sizeof(int32_t *));
		m[s].ref = 0;
		if (!names || !lens || !used || !ids || !tags || !m[s].frame_db || !m[s].unnamed ||
		    !m[s].stack_db || !m[s].stack_frames)
			goto fail_oom;
		for (size_t k = 0; k < w->nstacks; k++)
			m[s].stack_db[k] = -1;
		for (size_t i = 0; i < w->nframes; i++)
			m[s].frame_db[i] = -1;
		for (size_t i = 0; i < w->nevents; i++) {
			const struct wire_stack *stk = &w->stacks[w->events[i].stack];

			if (m[s].stack_db[w->events[i].stack] != -1)
				continue;
			m[s].stack_db[w->events[i].stack] = MISSING(0); /* used; resolved below */
			for (uint32_t j = 0; j < stk->len; j++)
				if (m[s].frame_db[stk->frames[j]] == -1) {
					m[s].frame_db[stk->frames[j]] = MISSING(0);
					used[nused] = stk->frames[j];
					names[nused] = w->frames[stk->frames[j]];
					lens[nused] = w->frame_lens ? w->frame_lens[stk->frames[j]]
								    : strlen(names[nused]);
					nused++;
				}
		}
		idcache_get_frames(st->cache, names, lens, nused, ids, tags);
		for (size_t j = 0; j < nused; j++) {
			int64_t k = ids[j] >= 0 ? 0 : intern_put(st->missing, names[j], lens[j], NULL);

			if (k < 0)
				goto fail_oom;
			m[s].frame_db[used[j]] = ids[j] >= 0 ? ids[j] : MISSING(k);
			m[s].unnamed[used[j]] = ids[j] >= 0 ? tags[j] : frame_is_unnamed(names[j], lens[j]);
		}
	}
	if (resolve_missing(st, false, &local) < 0)
		return -1;
	intern_clear(st->missing);
	for (size_t s = 0; s < n; s++) {
		const struct wire_stream *w = ss[s];

		for (size_t i = 0; i < w->nframes; i++)
			if (m[s].frame_db[i] <= -2)
				m[s].frame_db[i] = local[MISSING_KEY(m[s].frame_db[i])];
		/* the stream's used stacks as frame ids, looked up in one call */
		const int32_t **seqs = arena_alloc(a, (w->nstacks + 1) * sizeof(*seqs));
		size_t *bytes = arena_alloc(a, (w->nstacks + 1) * sizeof(*bytes));
		uint32_t *which = arena_alloc(a, (w->nstacks + 1) * sizeof(*which));
		int32_t *ids = arena_alloc(a, (w->nstacks + 1) * sizeof(*ids));
		size_t nused = 0;

		if (!seqs || !bytes || !which || !ids)
			goto fail_oom;
		for (size_t k = 0; k < w->nstacks; k++) {
			const struct wire_stack *stk = &w->stacks[k];
			int32_t *seq;

			if (m[s].stack_db[k] == -1)
				continue;
			seq = arena_alloc(a, stk->len * sizeof(*seq));
			if (!seq)
				goto fail_oom;
			for (uint32_t j = 0; j < stk->len; j++)
				seq[j] = m[s].frame_db[stk->frames[j]];
			m[s].stack_frames[k] = seq;
			seqs[nused] = seq;
			bytes[nused] = stk->len * sizeof(*seq);
			which[nused++] = (uint32_t)k;
		}
		idcache_get_stacks(st->cache, seqs, bytes, nused, ids);
		for (size_t j = 0; j < nused; j++) {
			int64_t key = ids[j] >= 0 ? 0 : intern_put(st->missing, seqs[j], bytes[j], NULL);

			if (key < 0)
				goto fail_oom;
			m[s].stack_db[which[j]] = ids[j] >= 0 ? ids[j] : MISSING(key);
		}
	}
	if (resolve_missing(st, true, &local) < 0)
		return -1;
	for (size_t s = 0; s < n; s++)
		for (size_t k = 0; k < ss[s]->nstacks; k++)
			if (m[s].stack_db[k] <= -2)
				m[s].stack_db[k] = local[MISSING_KEY(m[s].stack_db[k])];
	return 0;
fail_oom:
	own_fail(st, "out of memory");
	return -1;
}

static int put_labels_json(struct buf *b, const struct wire_stream *w)
{
	int rc = buf_putc(b, '{');

	for (size_t i = 0; i < w->nlabels; i++) {
		if (i)
			rc |= buf_putc(b, ',');
		rc |= buf_put_json_str(b, w->labels[i].key, strlen(w->labels[i].key));
		rc |= buf_putc(b, ':');
		rc |= buf_put_json_str(b, w->labels[i].value, strlen(w->labels[i].value));
	}
	return rc | buf_putc(b, '}');
}

/* The names of the threads that the stream's events or symptom name, as a JSON object; nothing
 * (NULL stored) when none: names of threads the stream does not show cost storage and say nothing.
 * Returns 1 written, 0 none, -1 out of memory. */
static int put_thread_names(struct store *st, const struct wire_stream *w)
{
	struct buf *b = &st->names;
	uint64_t i;
	bool *used;
	int rc = 0, n = 0;

	if (!w->nthreads)
		return 0;
	imap_clear(&st->named);
	used = arena_calloc(st->scratch, w->nthreads, sizeof(*used));
	if (!used || imap_reserve(&st->named, w->nthreads) < 0)
		return -1;
	for (size_t k = 0; k < w->nthreads; k++)
		if (imap_put(&st->named, (uint64_t)w->threads[k].tid, k) < 0)
			return -1;
	/* i < nthreads: a tid of all ones is the map's empty key, which a lookup would "find" */
	if (imap_get(&st->named, (uint64_t)w->symptom.tid, &i) && i < w->nthreads)
		used[i] = true;
	for (size_t k = 0; k < w->nevents; k++) {
		if (imap_get(&st->named, (uint64_t)w->events[k].tid, &i) && i < w->nthreads)
			used[i] = true;
		if (w->events[k].readier_tid && imap_get(&st->named, (uint64_t)w->events[k].readier_tid, &i) &&
		    i < w->nthreads)
			used[i] = true;
	}
	buf_reset(b);
	rc |= buf_putc(b, '{');
	for (size_t k = 0; k < w->nthreads; k++) {
		if (!used[k])
			continue;
		rc |= buf_printf(b, "%s\"%lld\":", n++ ? "," : "", (long long)w->threads[k].tid);
		rc |= buf_put_json_str(b, w->threads[k].name, strlen(w->threads[k].name));
	}
	rc |= buf_putc(b, '}');
	return rc ? -1 : n > 0;
}

/* One array literal's elements: a string (NULL: the SQL NULL), a number. */
static int put_elem_str(struct buf *b, size_t i, const char *v)
{
	if (i)
		buf_putc(b, ',');
	return v ? db_put_array_str(b, v, strlen(v)) : buf_append(b, "NULL", 4);
}

static int put_elem_i64(struct buf *b, size_t i, int64_t v)
{
	if (i)
		buf_putc(b, ',');
	return buf_put_i64(b, v);
}

/* The columns of streams a batch sends, each as one array parameter of ins_streams. */
enum {
	SC_ID, SC_HOST, SC_APP, SC_VERSION, SC_BUILD, SC_LABELS, SC_KIND, SC_TID, SC_START, SC_END,
	SC_UNIT, SC_THRESHOLD, SC_NEVENTS, SC_RECEIVED, SC_ROLE, SC_WEIGHT, SC_THREADS, SC_COUNT
};

/* Inserts the streams ss[order[0..n)] (in that order) in one statement: m[].ref is each one's
 * streams.id, 0 for a duplicate (an id stored before, or twice in the batch). */
static int insert_streams(struct store *st, const struct wire_stream *const *ss, const size_t *order, size_t n,
			  const char *received_at, struct mapped *m)
{
	struct buf *all = &st->param2, *json = &st->param;
	size_t off[SC_COUNT];
	const char *params[SC_COUNT];
	PGresult *r;
	int rc = 0;

	buf_reset(all);
	for (int c = 0; c < SC_COUNT; c++) {
		off[c] = all->len;
		if (c == SC_RECEIVED) {
			buf_append(all, received_at, strlen(received_at));
			buf_putc(all, '\0');
			continue;
		}
		rc |= buf_putc(all, '{');
		for (size_t i = 0; i < n && !rc; i++) {
			const struct wire_stream *w = ss[order[i]];
			char wt[32];
			int named;

			switch (c) {
			case SC_ID: rc |= put_elem_str(all, i, w->stream_id); break;
			case SC_HOST: rc |= put_elem_str(all, i, w->host); break;
			case SC_APP: rc |= put_elem_str(all, i, w->app); break;
			case SC_VERSION: rc |= put_elem_str(all, i, w->version); break;
			case SC_BUILD: rc |= put_elem_str(all, i, w->build_id); break;
			case SC_LABELS:
				buf_reset(json);
				if ((rc |= put_labels_json(json, w)) == 0)
					rc |= put_elem_str(all, i, buf_cstr(json));
				break;
			case SC_KIND: rc |= put_elem_str(all, i, w->symptom.kind); break;
			case SC_TID: rc |= put_elem_i64(all, i, w->symptom.tid); break;
			case SC_START: rc |= put_elem_i64(all, i, w->symptom.start_ns); break;
			case SC_END: rc |= put_elem_i64(all, i, w->symptom.end_ns); break;
			case SC_UNIT: rc |= put_elem_str(all, i, w->symptom.unit_type); break;
			case SC_THRESHOLD:
				if (w->symptom.threshold_ns >= 0)
					rc |= put_elem_i64(all, i, w->symptom.threshold_ns);
				else
					rc |= put_elem_str(all, i, NULL);
				break;
			case SC_NEVENTS: rc |= put_elem_i64(all, i, (int64_t)w->nevents); break;
			case SC_ROLE:
				rc |= put_elem_str(all, i, w->role == WIRE_ROLE_BASELINE ? "baseline" : "violation");
				break;
			case SC_WEIGHT:
				/* %.17g: the weight stored is the one sent, to the last bit */
				snprintf(wt, sizeof(wt), "%.17g", wire_weight(w));
				rc |= put_elem_str(all, i, wt);
				break;
			case SC_THREADS:
				named = put_thread_names(st, w);
				rc |= named < 0 ? -1 : put_elem_str(all, i, named ? buf_cstr(&st->names) : NULL);
				break;
			}
		}
		buf_putc(all, '}');
		buf_putc(all, '\0');
	}
	if (rc || buf_error(all)) {
		own_fail(st, "storing streams: out of memory");
		return -1;
	}
	for (int c = 0; c < SC_COUNT; c++)
		params[c] = all->data + off[c];
	r = PQexecPrepared(st->db, "ins_streams", SC_COUNT, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_fail(st, "storing streams", r);
		PQclear(r);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		m[order[i]].ref = 0;
	for (int row = 0; row < PQntuples(r); row++) {
		int64_t pos = strtoll(PQgetvalue(r, row, 0), NULL, 10);

		if (pos >= 1 && (size_t)pos <= n)
			m[order[pos - 1]].ref = strtoll(PQgetvalue(r, row, 1), NULL, 10);
	}
	PQclear(r);
	return 0;
}

/* Sends st->copy's rows once a piece is full (or force); what names the COPY in an error. */
static int copy_flush(struct store *st, bool force, const char *what)
{
	if (st->copy.len < COPY_PIECE && !force)
		return 0;
	if (st->copy.len && PQputCopyData(st->db, st->copy.data, (int)st->copy.len) != 1) {
		db_fail(st, what, NULL);
		return -1;
	}
	buf_reset(&st->copy);
	return 0;
}

static int put_be(struct buf *b, uint64_t v, int bytes)
{
	unsigned char tmp[8];

	for (int i = 0; i < bytes; i++)
		tmp[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
	return buf_append(b, tmp, (size_t)bytes);
}

/* The same at q, in room reserved already; returns the end. */
static inline unsigned char *be_at(unsigned char *q, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		q[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
	return q + bytes;
}

/* One binary COPY field: length, then the value in network order. */
static inline unsigned char *field_at(unsigned char *q, uint64_t v, int bytes)
{
	return be_at(be_at(q, (uint64_t)bytes, 4), v, bytes);
}

/* A chunk's row (sql/030_event_chunks.sql): the field count, then five fields each after its
 * length: stream_ref, received_at, first_seq, stack_ids (an int4 array: its 20-byte header, then a
 * length and a value an element) and data (EVPACK_RECORD bytes an event). The room copy_events()
 * reserves for one: keep it in step with the fields it writes. */
#define CHUNK_ROW_MAX (2 + 5 * 4 + 8 + 8 + 4 + 20 + EVPACK_CHUNK * 8 + EVPACK_CHUNK * EVPACK_RECORD)

/* Starts a binary COPY (sql) with its header in st->copy. 0, or -1 with st->err. */
static int copy_begin(struct store *st, const char *sql, const char *what)
{
	static const char header[] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
	PGresult *r = PQexec(st->db, sql);

	if (PQresultStatus(r) != PGRES_COPY_IN) {
		db_fail(st, what, r);
		PQclear(r);
		return -1;
	}
	PQclear(r);
	buf_reset(&st->copy);
	if (buf_append(&st->copy, header, sizeof(header) - 1) < 0) {
		own_fail(st, "%s: out of memory", what);
		PQputCopyEnd(st->db, "client error");
		db_drain(st->db);
		return -1;
	}
	return 0;
}

/* Ends the COPY whose rows are in st->copy: rc, how their making went (-1: out of memory). 0, or
 * -1 with st->err and the server's SQLSTATE in state ("" when it gave none). */
static int copy_end(struct store *st, int rc, const char *what, char state[6])
{
	PGresult *r;

	state[0] = '\0';
	rc |= put_be(&st->copy, 0xffff, 2); /* trailer */
	if (rc == 0)
		rc = copy_flush(st, true, what);
	if (PQputCopyEnd(st->db, rc ? "client error" : NULL) != 1) {
		/* the connection failed: what it still holds is read off, so that the next statement
		 * (the rollback) meets no COPY in progress but the failure itself */
		db_fail(st, what, NULL);
		db_drain(st->db);
		return -1;
	}
	while ((r = PQgetResult(st->db))) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK && rc == 0) {
			const char *sqlstate = PQresultErrorField(r, PG_DIAG_SQLSTATE);

			snprintf(state, 6, "%s", sqlstate ? sqlstate : "");
			db_fail(st, what, r);
			rc = -1;
		}
		PQclear(r);
	}
	if (rc && !st->err[0])
		own_fail(st, "%s: out of memory", what);
	return rc ? -1 : 0;
}

/* The row of the chunk of w's events [first, first + n) at q (CHUNK_ROW_MAX bytes reserved);
 * returns its end. */
static unsigned char *chunk_row(unsigned char *q, const struct wire_stream *w, const struct mapped *m,
				int64_t received_us, size_t first, size_t n)
{
	uint32_t ids[EVPACK_CHUNK];
	size_t nids = 0;

	for (size_t i = 0; i < n; i++)
		ids[i] = (uint32_t)m->stack_db[w->events[first + i].stack];
	vec_sort_u32(ids, n);
	for (size_t i = 0; i < n; i++)
		if (nids == 0 || ids[nids - 1] != ids[i])
			ids[nids++] = ids[i];
	q = be_at(q, 5, 2);
	q = field_at(q, (uint64_t)m->ref, 8);
	q = field_at(q, (uint64_t)received_us, 8);
	q = field_at(q, (uint64_t)first, 4);
	q = be_at(q, 20 + 8 * nids, 4);
	q = be_at(q, 1, 4);  /* one dimension */
	q = be_at(q, 0, 4);  /* no NULL */
	q = be_at(q, 23, 4); /* int4 */
	q = be_at(q, nids, 4);
	q = be_at(q, 1, 4);  /* lower bound */
	for (size_t i = 0; i < nids; i++)
		q = field_at(q, ids[i], 4);
	q = be_at(q, n * EVPACK_RECORD, 4);
	for (size_t i = 0; i < n; i++) {
		const struct wire_event *e = &w->events[first + i];
		struct evpack_event pe = {
			.ts_ns = e->ts_ns,
			.dur_ns = e->dur_ns,
			.tid = (int32_t)e->tid,
			.stack = m->stack_db[e->stack],
			.readier_tid = e->kind == WIRE_WAIT ? (int32_t)e->readier_tid : 0,
			.kind = e->kind == WIRE_WAIT ? 'w' : 'r',
		};

		evpack_put(q, &pe);
		q += EVPACK_RECORD;
	}
	return q;
}

/*
 * COPY every event of the accepted streams, packed EVPACK_CHUNK to a row, in the binary format (the
 * server parses no text). received_us is the batch's received_at in microseconds since 2000-01-01
 * UTC, PostgreSQL's timestamp epoch. *no_partition is set when the day's partition is missing, so
 * that the caller can create it.
 */
static int copy_events(struct store *st, const struct wire_stream *const *ss, size_t n,
		       const struct mapped *m, int64_t received_us, bool *no_partition)
{
	char state[6];
	struct buf *b = &st->copy;
	PGresult *r;
	int rc = copy_begin(st, st->sharded ? "COPY sm_ev_stage (stream_ref, received_at, first_seq, stack_ids, data)"
					      " FROM STDIN (FORMAT binary)"
					    : "COPY event_chunks (stream_ref, received_at, first_seq, stack_ids, data)"
					      " FROM STDIN (FORMAT binary)", "copying events");

	if (rc < 0)
		return -1;
	for (size_t s = 0; s < n && rc == 0; s++) {
		const struct wire_stream *w = ss[s];

		if (!m[s].ref)
			continue;
		for (size_t first = 0; first < w->nevents && rc == 0; first += EVPACK_CHUNK) {
			size_t k = w->nevents - first < EVPACK_CHUNK ? w->nevents - first : EVPACK_CHUNK;
			unsigned char *q, *q0;

			if ((rc = buf_reserve(b, CHUNK_ROW_MAX)) < 0)
				break;
			q = q0 = (unsigned char *)b->data + b->len;
			q = chunk_row(q, w, &m[s], received_us, first, k);
			b->len += (size_t)(q - q0);
			b->data[b->len] = '\0';
			rc = copy_flush(st, false, "copying events");
		}
	}
	if (copy_end(st, rc, "copying events", state) < 0) {
		*no_partition = strcmp(state, "23514") == 0;
		return -1;
	}
	if (rc == 0 && st->sharded) {
		/* routed to the shards in batches; the staging rows go at the commit */
		r = PQexec(st->db, "INSERT INTO event_chunks SELECT * FROM sm_ev_stage");
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			const char *sqlstate = PQresultErrorField(r, PG_DIAG_SQLSTATE);

			if (sqlstate && strcmp(sqlstate, "23514") == 0)
				*no_partition = true;
			db_fail(st, "sending events to the shards", r);
			rc = -1;
		}
		PQclear(r);
	}
	if (rc && !st->err[0])
		own_fail(st, "copying events: out of memory");
	return rc ? -1 : 0;
}

/* A text (or jsonb, after its version byte) field of a binary COPY row; NULL v: the SQL NULL. */
static int copy_text(struct buf *b, const char *v, size_t len, bool jsonb)
{
	if (!v)
		return put_be(b, 0xffffffffu, 4);
	/* one statement each: the operands of | are not sequenced, and the bytes must be in order */
	int rc = put_be(b, len + jsonb, 4);

	if (jsonb)
		rc |= buf_putc(b, 1);
	rc |= buf_append(b, v, len);
	return rc;
}

static int copy_int(struct buf *b, uint64_t v, int bytes)
{
	int rc = put_be(b, (uint64_t)bytes, 4);

	rc |= put_be(b, v, bytes);
	return rc;
}

/* The 16 bytes of a canonical UUID (wire_parse() made it so). */
static void uuid_bytes(const char *s, unsigned char out[16])
{
	size_t k = 0;

	for (const char *p = s; *p && k < 32; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;

		if (d < 0)
			continue;   /* a hyphen */
		if (k % 2 == 0)
			out[k / 2] = (unsigned char)(d << 4);
		else
			out[k / 2] |= (unsigned char)d;
		k++;
	}
}

/* write_batch(): the batch's streams could not be copied (a stream id stored before, or twice in
 * the batch): write the batch again in a new transaction, its streams by insert_streams()' one
 * INSERT, which skips those stored already */
#define STORE_CONFLICT (-3)   /* (write_batch()'s, beside enum store_failure's) */

/*
 * Stores the streams ss[order[0..n)] with one binary COPY, each under an id taken from the
 * sequence beforehand, and sets m[].ref to it. For the server that is much less than an INSERT of
 * array parameters: nothing to parse, no conflict to look for. A stream id stored already (a
 * resend), or twice in the batch, fails the COPY with a unique violation: then STORE_CONFLICT,
 * and the transaction is to be rolled back and the batch written with insert_streams(), which
 * skips those. In stream_id order, as insert_streams(): two batches lock the ids they share in one
 * order.
 */
static int copy_streams(struct store *st, const struct wire_stream *const *ss, const size_t *order, size_t n,
			int64_t received_us, struct mapped *m)
{
	struct buf *b = &st->copy, *json = &st->param;
	char count[24];
	const char *params[1] = { count };
	char state[6];
	PGresult *r;
	int rc = 0;

	snprintf(count, sizeof(count), "%zu", n);
	r = PQexecPrepared(st->db, "stream_ids", 1, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || (size_t)PQntuples(r) != n) {
		db_fail(st, "taking stream ids", r);
		PQclear(r);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		m[order[i]].ref = db_get_i64(r, (int)i, 0);
	PQclear(r);
	if (copy_begin(st, "COPY streams (id, stream_id, host, app, version, build_id, labels, symptom_kind,"
			   " symptom_tid, symptom_start_ns, symptom_end_ns, symptom_unit_type, symptom_threshold_ns,"
			   " n_events, received_at, role, weight, thread_names) FROM STDIN (FORMAT binary)",
		       "storing streams") < 0)
		return -1;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct wire_stream *w = ss[order[i]];
		const char *role = w->role == WIRE_ROLE_BASELINE ? "baseline" : "violation";
		unsigned char id[16] = { 0 };
		double weight = wire_weight(w);
		uint64_t wbits;
		int named;

		uuid_bytes(w->stream_id, id);
		memcpy(&wbits, &weight, sizeof(wbits));
		buf_reset(json);
		rc |= put_labels_json(json, w);
		if ((named = put_thread_names(st, w)) < 0)
			rc = -1;
		rc |= put_be(b, 18, 2);
		rc |= copy_int(b, (uint64_t)m[order[i]].ref, 8);
		rc |= copy_text(b, (const char *)id, sizeof(id), false);
		rc |= copy_text(b, w->host, strlen(w->host), false);
		rc |= copy_text(b, w->app, strlen(w->app), false);
		rc |= copy_text(b, w->version, w->version ? strlen(w->version) : 0, false);
		rc |= copy_text(b, w->build_id, w->build_id ? strlen(w->build_id) : 0, false);
		rc |= copy_text(b, json->data, json->len, true);
		rc |= copy_text(b, w->symptom.kind, strlen(w->symptom.kind), false);
		rc |= copy_int(b, (uint64_t)w->symptom.tid, 4);
		rc |= copy_int(b, (uint64_t)w->symptom.start_ns, 8);
		rc |= copy_int(b, (uint64_t)w->symptom.end_ns, 8);
		rc |= copy_text(b, w->symptom.unit_type, w->symptom.unit_type ? strlen(w->symptom.unit_type) : 0,
				false);
		rc |= w->symptom.threshold_ns >= 0 ? copy_int(b, (uint64_t)w->symptom.threshold_ns, 8)
						   : put_be(b, 0xffffffffu, 4);
		rc |= copy_int(b, (uint64_t)w->nevents, 4);
		rc |= copy_int(b, (uint64_t)received_us, 8);
		rc |= copy_text(b, role, strlen(role), false);
		rc |= copy_int(b, wbits, 8);
		rc |= copy_text(b, named > 0 ? st->names.data : NULL, named > 0 ? st->names.len : 0, true);
		if (rc == 0)
			rc = copy_flush(st, false, "storing streams");
	}
	if (copy_end(st, rc, "storing streams", state) < 0)
		return strcmp(state, "23505") == 0 ? STORE_CONFLICT : -1;
	return 0;
}

/* The build id and ELF address of frame name f (`module+0xOFFSET`) when w names its module's build. */
static const char *unnamed_frame(const struct wire_stream *w, const char *f, int64_t *addr)
{
	const char *plus = strstr(f, "+0x");
	uint64_t v = 0;
	size_t len, i;

	if (!plus || plus == f)
		return NULL;
	for (i = 3; plus[i]; i++) {
		int d = plus[i] >= '0' && plus[i] <= '9' ? plus[i] - '0' :
			plus[i] >= 'a' && plus[i] <= 'f' ? plus[i] - 'a' + 10 : -1;

		if (d < 0 || i > 3 + 15)   /* at most 15 hex digits: fits a bigint */
			return NULL;
		v = v * 16 + (uint64_t)d;
	}
	if (i == 3)
		return NULL;
	len = (size_t)(plus - f);
	for (size_t k = 0; k < w->nmodules; k++)
		if (strlen(w->modules[k].key) == len && memcmp(w->modules[k].key, f, len) == 0) {
			*addr = (int64_t)v;
			return w->modules[k].value;
		}
	return NULL;
}

/*
 * Records where each unnamed frame of the accepted streams is (frame_addrs: build id, address),
 * and reads which of them are aliases already (st->canon), for update_stats() to count them
 * under their canonical frame. Runs under the intern lock: a resolution (sm_resolve_frames) is
 * either committed and seen here, or waits for this batch and bumps the epoch after it.
 */
static int store_unnamed_frames(struct store *st, const struct wire_stream *const *ss, size_t n,
				const struct mapped *m)
{
	struct buf *ids = &st->param, *bids = &st->param2, *addrs = &st->param3, *all = &st->param4;
	const char *params[4];
	PGresult *r;
	int rc = 0;

	imap_clear(&st->canon);
	imap_clear(&st->stat_idx);
	buf_reset(ids);
	buf_reset(bids);
	buf_reset(addrs);
	buf_reset(all);
	for (size_t s = 0; s < n; s++) {
		if (!m[s].ref)
			continue;
		for (size_t i = 0; i < ss[s]->nframes; i++) {
			const char *f = ss[s]->frames[i], *bid;
			int32_t id = m[s].frame_db[i];
			int64_t addr = 0;

			if (id < 0 || !m[s].unnamed[i] || imap_find(&st->stat_idx, (uint64_t)id) != SIZE_MAX)
				continue;
			if (imap_put(&st->stat_idx, (uint64_t)id, 0) < 0)
				goto fail_oom;
			buf_puts(all, all->len ? "," : "{");
			buf_put_i64(all, id);
			if (!(bid = unnamed_frame(ss[s], f, &addr)))
				continue;
			/* (the buffers' errors are sticky: checked once, below) */
			buf_puts(ids, ids->len ? "," : "{");
			buf_put_i64(ids, id);
			buf_puts(bids, bids->len ? "," : "{");
			buf_puts(bids, bid);
			buf_puts(addrs, addrs->len ? "," : "{");
			buf_put_i64(addrs, addr);
		}
	}
	if (!all->len)
		return 0;
	if (!ids->len)
		rc |= buf_puts(ids, "{") | buf_puts(bids, "{") | buf_puts(addrs, "{");
	rc |= buf_puts(ids, "}") | buf_puts(bids, "}") | buf_puts(addrs, "}") | buf_puts(all, "}");
	if (rc)
		goto fail_oom;
	params[0] = buf_cstr(ids);
	params[1] = buf_cstr(bids);
	params[2] = buf_cstr(addrs);
	params[3] = buf_cstr(all);
	r = PQexecPrepared(st->db, "frame_addrs", 4, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_fail(st, "recording unnamed frames", r);
		PQclear(r);
		return -1;
	}
	for (int i = 0; i < PQntuples(r); i++)
		if (imap_put(&st->canon, (uint64_t)db_get_i64(r, i, 0), (uint64_t)db_get_i64(r, i, 1)) < 0) {
			PQclear(r);
			goto fail_oom;
		}
	PQclear(r);
	return 0;
fail_oom:
	own_fail(st, "unnamed frames: out of memory");
	return -1;
}

/* A frame as the statistics count it: an alias as its canonical frame. */
static int32_t stat_frame(const struct store *st, int32_t id)
{
	uint64_t c;

	return imap_get(&st->canon, (uint64_t)id, &c) ? (int32_t)c : id;
}

/* The counters' keys: a frame as FRAME_KEY | id, a call as caller << 32 | callee (ids are
 * positive int32, so no call's key has FRAME_KEY's high half). A counter's value is the last
 * stream (index + 1) that counted it, then its count, 32 bits each. */
#define FRAME_KEY ((uint64_t)0xffffffff << 32)

/* key seen in stream (index + 1): counted once per stream. 0, or -1 when out of memory. */
static inline int stat_count(struct imap *idx, uint64_t key, uint32_t stream)
{
	size_t i = imap_find(idx, key);

	if (i == SIZE_MAX)
		return imap_put(idx, key, (uint64_t)stream << 32 | 1);
	if ((uint32_t)(idx->vals[i] >> 32) != stream)
		idx->vals[i] = (uint64_t)stream << 32 | ((uint32_t)idx->vals[i] + 1);
	return 0;
}

/* Count, over the accepted streams, in how many streams each frame and each
 * direct call appears, and record that as one delta of the day's counters. */
static int update_stats(struct store *st, const struct wire_stream *const *ss, size_t n,
			const struct mapped *m, const char *day)
{
	struct imap *idx = &st->stat_idx;
	size_t nacc = 0, maxf = 0;
	uint32_t *counted;
	uint64_t *callseen;
	char nbuf[24];
	const char *params[7];
	PGresult *r;
	int rc = 0;

	imap_clear(idx);
	for (size_t s = 0; s < n; s++)
		if (m[s].ref && ss[s]->nframes > maxf)
			maxf = ss[s]->nframes;
	/* a frame of the stream's table counted already (stream index + 1): its stacks share most */
	if (!(counted = arena_calloc(st->scratch, maxf + 1, sizeof(*counted))))
		goto fail_oom;
	/* by a callee of the stream's table, the call into it counted last (stream index + 1 above,
	 * the caller's index below): a call the stream makes again costs no lookup in the batch's map */
	if (!(callseen = arena_calloc(st->scratch, maxf + 1, sizeof(*callseen))))
		goto fail_oom;
	for (size_t s = 0; s < n; s++) {
		const uint32_t *last = NULL;   /* the stream's last stack counted */
		uint32_t nlast = 0;

		if (!m[s].ref)
			continue;
		nacc++;
		for (size_t k = 0; k < ss[s]->nstacks; k++) {
			const int32_t *f = m[s].stack_frames[k];
			const uint32_t *local = ss[s]->stacks[k].frames;
			uint32_t len = ss[s]->stacks[k].len, j = 0, prev = 0;

			if (!f)
				continue;
			/* stacks share their outer frames: the frames and calls of the part in common
			 * with the last one were counted for this stream already */
			while (j < len && j < nlast && local[j] == last[j])
				j++;
			if (j)
				prev = (uint32_t)stat_frame(st, f[j - 1]);
			last = local;
			nlast = len;
			for (; j < len; j++) {
				uint32_t fj = (uint32_t)stat_frame(st, f[j]);

				if (counted[local[j]] != (uint32_t)s + 1) {
					counted[local[j]] = (uint32_t)s + 1;
					if (stat_count(idx, FRAME_KEY | fj, (uint32_t)s + 1) < 0)
						goto fail_oom;
				}
				if (j) {
					uint64_t call = (uint64_t)(s + 1) << 32 | local[j - 1];

					if (callseen[local[j]] != call) {
						callseen[local[j]] = call;
						if (stat_count(idx, (uint64_t)prev << 32 | fj, (uint32_t)s + 1) < 0)
							goto fail_oom;
					}
				}
				prev = fj;
			}
		}
	}
	if (!nacc)
		return 0;
	{
		/* the arrays in the binary form: the server parses no text */
		struct buf *fid = &st->param, *fcnt = &st->param2;
		struct buf *ca = &st->param3, *ce = &st->copy, *cc = &st->param4;
		struct buf *bufs[5] = { fid, fcnt, ca, ce, cc };
		int lens[7], formats[7] = { 0, 0, 1, 1, 1, 1, 1 };
		size_t nframes = 0, ncalls = 0;

		for (size_t i = 0; i < idx->cap; i++)
			if (idx->keys[i] != IMAP_EMPTY)
				nframes += (uint32_t)(idx->keys[i] >> 32) == (uint32_t)(FRAME_KEY >> 32);
		ncalls = idx->cnt - nframes;
		for (int k = 0; k < 5; k++) {
			buf_reset(bufs[k]);
			rc |= db_put_int4_array(bufs[k], k < 2 ? nframes : ncalls);
		}
		for (size_t i = 0; i < idx->cap; i++) {
			uint32_t hi = (uint32_t)(idx->keys[i] >> 32), lo = (uint32_t)idx->keys[i];
			int32_t count = (int32_t)(uint32_t)idx->vals[i];

			if (idx->keys[i] == IMAP_EMPTY)
				continue;
			if (hi == (uint32_t)(FRAME_KEY >> 32))
				rc |= db_put_int4_elem(fid, (int32_t)lo) | db_put_int4_elem(fcnt, count);
			else
				rc |= db_put_int4_elem(ca, (int32_t)hi) | db_put_int4_elem(ce, (int32_t)lo) |
				      db_put_int4_elem(cc, count);
		}
		if (rc)
			goto fail_oom;
		snprintf(nbuf, sizeof(nbuf), "%zu", nacc);
		params[0] = day;
		params[1] = nbuf;
		lens[0] = lens[1] = 0;
		for (int k = 0; k < 5; k++) {
			if (bufs[k]->len > INT32_MAX)
				goto fail_oom;
			params[2 + k] = bufs[k]->data;
			lens[2 + k] = (int)bufs[k]->len;
		}
		r = PQexecPrepared(st->db, "stat_delta", 7, params, lens, formats, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			goto fail_result;
		PQclear(r);
	}
	/* a batch of very many distinct frames and calls leaves no large map for every later one to
	 * clear and walk */
	if (idx->cap > ((size_t)1 << 18))
		imap_free(idx);
	return 0;
fail_result:
	db_fail(st, "recording frame statistics", r);
	PQclear(r);
	return -1;
fail_oom:
	own_fail(st, "frame statistics: out of memory");
	return -1;
}

/* Streams are inserted in stream_id order, so that two batches holding the same
 * ids (a resend re-batched, two servers) lock them in one order: no deadlock. */
static int cmp_stream_id(const void *a, const void *b, void *ctx)
{
	const struct wire_stream *const *ss = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int c = strcmp(ss[i]->stream_id, ss[j]->stream_id);

	/* an id twice in a batch: the first sent is the one stored */
	return c ? c : (i > j) - (i < j);
}

/* write_batch(): the ids were mapped in an epoch that a collection has ended */
#define STORE_REMAP (-2)   /* (write_batch()'s, beside enum store_failure's) */

static int write_batch(struct store *st, const struct wire_stream *const *ss, size_t n,
		       struct mapped *m, enum store_result *res, bool *no_partition, uint64_t *new_epoch,
		       bool skip_stored)
{
	PGresult *r;
	char received_at[64], day[16];
	int64_t received_us;
	bool sharded;
	size_t nacc = 0;
	int rc;
	int64_t t0 = util_now_mono_ns(), t1, t2, t3;
	size_t *order;

	st->err[0] = '\0';   /* this try's failure alone: copy_end() fills in only an empty one */
	order = arena_alloc(st->scratch, (n + 1) * sizeof(*order));
	if (!order) {
		own_fail(st, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_stream_id, (void *)ss);

	/* the intern lock, shared: no collection of frames and stacks runs while this batch is written;
	 * one that ran since its ids were mapped changed the epoch, and the batch is mapped again. The
	 * lock is a statement of its own: a statement's snapshot is taken before it waits for a lock,
	 * so one that waited for a collection would read the epoch from before it */
	if (db_exec(st->db, "BEGIN; SELECT pg_advisory_xact_lock_shared(hashtext('stackmine.intern'))", st->err,
		    sizeof(st->err)) < 0)
		goto fail_rollback;
	r = PQexec(st->db, "SELECT now()::text, (now() AT TIME ZONE 'UTC')::date::text,"
			   " (extract(epoch FROM now()) * 1000000)::bigint - 946684800000000,"
			   " (SELECT value FROM settings WHERE key = 'intern_epoch'),"
			   " EXISTS (SELECT 1 FROM shards)");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_fail(st, "reading the time", r);
		PQclear(r);
		goto fail_rollback;
	}
	snprintf(received_at, sizeof(received_at), "%s", PQgetvalue(r, 0, 0));
	snprintf(day, sizeof(day), "%s", PQgetvalue(r, 0, 1));
	received_us = db_get_i64(r, 0, 2);
	sharded = PQgetvalue(r, 0, 4)[0] == 't';
	if (!PQgetisnull(r, 0, 3) && (uint64_t)db_get_i64(r, 0, 3) != st->epoch) {
		*new_epoch = (uint64_t)db_get_i64(r, 0, 3);
		PQclear(r);
		PQclear(PQexec(st->db, "ROLLBACK"));
		return STORE_REMAP;
	}
	PQclear(r);
	if (sharded != st->sharded && check_shards(st) < 0)   /* a shard was added since */
		goto fail_rollback;
	if (skip_stored) {
		if (insert_streams(st, ss, order, n, received_at, m) < 0)
			goto fail_rollback;
	} else if ((rc = copy_streams(st, ss, order, n, received_us, m)) < 0) {
		PQclear(PQexec(st->db, "ROLLBACK"));
		st->sharded = false;
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		res[i] = m[i].ref ? STORE_ACCEPTED : STORE_DUPLICATE;
		nacc += m[i].ref != 0;
	}
	t1 = util_now_mono_ns();
	if (nacc && copy_events(st, ss, n, m, received_us, no_partition) < 0)
		goto fail_rollback;
	t2 = util_now_mono_ns();
	if (nacc && store_unnamed_frames(st, ss, n, m) < 0)
		goto fail_rollback;
	if (nacc && update_stats(st, ss, n, m, day) < 0)
		goto fail_rollback;
	t3 = util_now_mono_ns();
	if (db_exec(st->db, "COMMIT", st->err, sizeof(st->err)) < 0) {
		st->sharded = false;   /* as after a rollback */
		return -1;
	}
	log_debug("batch stored", "streams=%zu accepted=%zu insert_ms=%.1f copy_ms=%.1f stats_ms=%.1f"
		  " commit_ms=%.1f", n, nacc, (t1 - t0) / 1e6, (t2 - t1) / 1e6, (t3 - t2) / 1e6,
		  (util_now_mono_ns() - t3) / 1e6);
	return 0;
fail_rollback:
	PQclear(PQexec(st->db, "ROLLBACK"));
	st->sharded = false;   /* a staging table made in this transaction is gone: look again */
	return -1;
}

int store_streams(struct store *st, const struct wire_stream *const *ss, size_t n,
		  enum store_result *res)
{
	struct mapped *m;
	bool no_partition = false, skip_stored = false;
	int rc = -1;

	st->err[0] = '\0';
	st->failure = STORE_EDB;
	if (!store_conn(st))
		return STORE_EDB;
	arena_reset(st->scratch);
	m = arena_calloc(st->scratch, n + 1, sizeof(*m));
	if (!m) {
		own_fail(st, "out of memory");
		return STORE_EINTERNAL;
	}
	for (int attempt = 0; attempt < 3; attempt++) {
		int64_t t0 = util_now_mono_ns();
		uint64_t epoch = 0;

		st->stamp = idcache_stamp(st->cache, &st->epoch);
		if (map_ids(st, ss, n, m) < 0) {
			rc = -1;   /* (not the try before's STORE_REMAP) */
			goto done;
		}
		log_debug("ids mapped", "streams=%zu ms=%.1f", n, (util_now_mono_ns() - t0) / 1e6);
		rc = write_batch(st, ss, n, m, res, &no_partition, &epoch, skip_stored);
		for (bool maintained = false;;) {
			if (rc == STORE_CONFLICT) {
				/* a stream stored before: all again, by the INSERT that skips it */
				log_debug("streams stored before in the batch", "streams=%zu", n);
				skip_stored = true;
			} else if (rc == -1 && no_partition && !maintained && store_maintain(st) == 0) {
				maintained = true;
			} else {
				break;
			}
			no_partition = false;
			rc = write_batch(st, ss, n, m, res, &no_partition, &epoch, skip_stored);
		}
		if (rc != STORE_REMAP)
			break;
		/* frames and stacks were collected since the ids were mapped: map them again */
		log_info("interned ids of a new epoch", "epoch=%llu", (unsigned long long)epoch);
		idcache_reset(st->cache, epoch);
		memset(m, 0, (n + 1) * sizeof(*m));
	}
	if (rc == STORE_REMAP) {
		rc = STORE_EBUSY;
		snprintf(st->err, sizeof(st->err), "frames and stacks were being collected at each of 3 tries");
	}
done:
	arena_reset(st->scratch);
	if (rc == -1)
		rc = st->failure;
	return rc;
}

int store_maintain(struct store *st)
{
	PGresult *r;
	int ok;

	if (!store_conn(st))
		return -1;
	r = PQexec(st->db,
		   "SELECT " DB_ENSURE_PARTITIONS ", sm_apply_retention(now())");
	ok = PQresultStatus(r) == PGRES_TUPLES_OK;
	if (!ok)
		db_fail(st, "maintaining partitions", r);
	else if (strcmp(PQgetvalue(r, 0, 0), "0") || strcmp(PQgetvalue(r, 0, 1), "0"))
		log_info("partitions maintained", "created=%s dropped=%s", PQgetvalue(r, 0, 0),
			 PQgetvalue(r, 0, 1));
	/* a day's events went: collect the frames and stacks only they used */
	if (ok && strcmp(PQgetvalue(r, 0, 1), "0") != 0) {
		PGresult *g = PQexec(st->db, "SELECT stacks, frames FROM sm_collect_interned()");

		if (PQresultStatus(g) != PGRES_TUPLES_OK)
			ok = db_fail(st, "collecting frames and stacks", g) == 0;
		else
			log_info("frames and stacks collected", "stacks=%s frames=%s", PQgetvalue(g, 0, 0),
				 PQgetvalue(g, 0, 1));
		PQclear(g);
	}
	PQclear(r);
	/* the sharded days' tables retention dropped here, now on the shards (on their own:
	 * a shard that cannot be reached keeps them for the next time) */
	if (ok) {
		r = PQexec(st->db, "SELECT sm_shard_drops()");
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			log_warn("dropping days on the shards failed", "error=\"%s\"", PQresultErrorMessage(r));
		else if (strcmp(PQgetvalue(r, 0, 0), "0") != 0)
			log_info("days dropped on the shards", "tables=%s", PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	return ok ? 0 : -1;
}

/* ---- the id cache warmed from the database ---- */

/* Rows read per FETCH: bounded memory whatever the limits. */
#define WARM_FETCH 8192
/* FETCHes the cursor named cur (rows of id int4, key) to its end, or until the cache's map is half
 * full, putting each into the cache at stamp: -1 on a failure, else how many were put. */
static int64_t warm_fetch(struct store *st, const char *cur, bool is_stack, uint64_t stamp)
{
	char sql[64];
	int32_t frames[WIRE_MAX_STACK_DEPTH];
	int64_t put = 0;
	bool full = false;

	snprintf(sql, sizeof(sql), "FETCH %d FROM %s", WARM_FETCH, cur);
	for (;;) {
		PGresult *r = PQexecParams(st->db, sql, 0, NULL, NULL, NULL, NULL, 1);
		int rows;

		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			db_fail(st, is_stack ? "warming the id cache: stacks" : "warming the id cache: frames", r);
			PQclear(r);
			return -1;
		}
		rows = PQntuples(r);
		for (int i = 0; i < rows; i++) {
			const char *key = PQgetvalue(r, i, 1);
			int klen = PQgetlength(r, i, 1);
			const unsigned char *at;
			int32_t id;
			long n;

			if (PQgetlength(r, i, 0) != 4)
				continue;
			id = (int32_t)db_be32((const unsigned char *)PQgetvalue(r, i, 0));
			if (!is_stack) {
				full = idcache_warm_frame(st->cache, key, (size_t)klen, id,
							  frame_is_unnamed(key, (size_t)klen), stamp) < 0;
			} else if ((n = db_int4_array(r, i, 1, &at)) > 0 && n <= WIRE_MAX_STACK_DEPTH &&
				   db_be32((const unsigned char *)key + 16) == 1) {
				/* (a lower bound other than 1 is another array value, which no batch maps) */
				for (long j = 0; j < n; j++)
					frames[j] = db_int4_next(&at);
				full = idcache_warm_stack(st->cache, frames, (uint32_t)n, id, stamp) < 0;
			} else {
				continue;
			}
			if (full)
				break;
			put++;
		}
		PQclear(r);
		if (rows < WARM_FETCH || full)
			return put;
	}
}

int store_warm_cache(struct store *st, size_t max_frames, size_t max_stacks, int64_t *frames, int64_t *stacks)
{
	char lim_f[24], lim_s[24];
	const char *pf[1] = { lim_f }, *ps[1] = { lim_s };
	uint64_t epoch, from, from_epoch, stamp;
	PGresult *r;

	*frames = *stacks = 0;
	st->err[0] = '\0';
	if (!store_conn(st))
		return -1;
	/* the cache's generation before the snapshot: a worker that empties it meanwhile saw a newer
	 * epoch, or the connection to a new primary */
	from = idcache_stamp(st->cache, &from_epoch);
	snprintf(lim_f, sizeof(lim_f), "%zu", max_frames);
	snprintf(lim_s, sizeof(lim_s), "%zu", max_stacks);
	/* one snapshot: the epoch read is the one the ids belong to */
	if (db_exec(st->db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", st->err, sizeof(st->err)) < 0)
		return -1;
	r = PQexec(st->db, "SELECT (SELECT value FROM settings WHERE key = 'intern_epoch')");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_fail(st, "warming the id cache: the epoch", r);
		PQclear(r);
		goto fail_rollback;
	}
	/* ids of this snapshot's epoch: put at it, they are dropped unless the cache is of it */
	epoch = PQgetisnull(r, 0, 0) ? from_epoch : (uint64_t)db_get_i64(r, 0, 0);
	PQclear(r);
	stamp = idcache_reset_from(st->cache, from, epoch);
	/* the newest first: what the fleet interned last is what it sends now */
	if (db_command(st->db, "DECLARE warm_frames NO SCROLL CURSOR FOR"
			       " SELECT id, name FROM frames ORDER BY id DESC LIMIT $1::bigint",
		       1, pf, "warming the id cache: frames", st->err, sizeof(st->err)) < 0 ||
	    db_command(st->db, "DECLARE warm_stacks NO SCROLL CURSOR FOR"
			       " SELECT id, frame_ids FROM stacks ORDER BY id DESC LIMIT $1::bigint",
		       1, ps, "warming the id cache: stacks", st->err, sizeof(st->err)) < 0)
		goto fail_rollback;
	if ((*frames = warm_fetch(st, "warm_frames", false, stamp)) < 0 ||
	    (*stacks = warm_fetch(st, "warm_stacks", true, stamp)) < 0)
		goto fail_rollback;
	PQclear(PQexec(st->db, "COMMIT"));
	return 0;
fail_rollback:
	PQclear(PQexec(st->db, "ROLLBACK"));
	return -1;
}

int store_fold_stats(struct store *st)
{
	if (!store_conn(st))
		return -1;
	st->err[0] = '\0';
	return statfold_run(st->db, STORE_FOLD_MAX, st->err, sizeof(st->err));
}

int store_report(struct store *st, const struct agent_report *r)
{
	char pid[24], started[24], n[5][24], exited[2] = { r->exiting ? 't' : 'f', 0 };
	const int64_t counts[5] = { r->units, r->violations, r->drops, r->spool_backlog, r->ship_errors };
	const char *params[15];
	PGresult *res;

	if (!store_conn(st))
		return -1;
	snprintf(pid, sizeof(pid), "%lld", (long long)r->pid);
	snprintf(started, sizeof(started), "%lld", (long long)r->started_ns);
	for (int i = 0; i < 5; i++)
		snprintf(n[i], sizeof(n[i]), "%lld", (long long)counts[i]);
	params[0] = r->host;
	params[1] = pid;
	params[2] = started;
	params[3] = r->exe;
	params[4] = r->build_id;
	params[5] = r->mode;
	params[6] = r->agent_version;
	params[7] = r->app;
	params[8] = exited;
	for (int i = 0; i < 5; i++)
		params[9 + i] = n[i];
	params[14] = r->collector;
	/*
	 * The previous counters, the new row, and what grew into the host's hour: one statement. What
	 * a process can have counted (docs/wire-format.md, "Agent reports"): at most one per 10 ns of
	 * its life since started_ns (life), and of the interval since its previous report (span), each
	 * with a minute's slack for clocks; the hour's sums saturate at the largest bigint.
	 */
	res = PQexecParams(st->db,
		"WITH old AS (SELECT units, violations, last_seen FROM agent_procs WHERE host = $1 AND pid = $2::integer"
		"   AND started_at = to_timestamp($3::bigint / 1e9)),"
		" cap AS (SELECT ((greatest(extract(epoch FROM now() - to_timestamp($3::bigint / 1e9)), 0) + 60)"
		"   * 1e8)::numeric AS life, ((greatest(extract(epoch FROM now() - coalesce((SELECT last_seen FROM old),"
		"   to_timestamp($3::bigint / 1e9))), 0) + 60) * 1e8)::numeric AS span),"
		" up AS (INSERT INTO agent_procs (host, pid, started_at, exe, build_id, mode, agent_version, app, exited,"
		"   units, violations, drops, spool_backlog, ship_errors, collector)"
		"   SELECT $1, $2::integer, to_timestamp($3::bigint / 1e9), $4, $5, $6, $7, $8, $9::boolean,"
		"   least($10::numeric, life)::bigint, least($11::numeric, life)::bigint, least($12::numeric, life)::bigint,"
		"   least($13::numeric, life)::bigint, least($14::numeric, life)::bigint, $15 FROM cap"
		"   ON CONFLICT (host, pid, started_at) DO UPDATE SET exe = EXCLUDED.exe, build_id = EXCLUDED.build_id,"
		"   mode = EXCLUDED.mode, agent_version = EXCLUDED.agent_version, app = EXCLUDED.app,"
		"   collector = EXCLUDED.collector,"
		"   exited = EXCLUDED.exited, last_seen = now(), units = EXCLUDED.units,"
		"   violations = EXCLUDED.violations, drops = EXCLUDED.drops, spool_backlog = EXCLUDED.spool_backlog,"
		"   ship_errors = EXCLUDED.ship_errors RETURNING units, violations)"
		" INSERT INTO agent_hours (host, hour, units, violations)"
		" SELECT $1, date_trunc('hour', now()), least(greatest(up.units - coalesce(old.units, 0), 0), cap.span)::bigint,"
		"   least(greatest(up.violations - coalesce(old.violations, 0), 0), cap.span)::bigint"
		"   FROM up CROSS JOIN cap LEFT JOIN old ON true"
		" ON CONFLICT (host, hour) DO UPDATE SET"
		"   units = least(agent_hours.units::numeric + EXCLUDED.units, 9223372036854775807)::bigint,"
		"   violations = least(agent_hours.violations::numeric + EXCLUDED.violations, 9223372036854775807)::bigint",
		15, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		db_fail(st, "recording the report", res);
		PQclear(res);
		return -1;
	}
	PQclear(res);
	return 0;
}

int store_agent_settings(struct store *st, const char *app, struct buf *out)
{
	const char *params[1] = { app };
	PGresult *res;

	if (!store_conn(st))
		return -1;
	/* the app's own value where it has one, else the row of every app's */
	res = PQexecParams(st->db,
		"SELECT json_strip_nulls(json_build_object('guard', coalesce(a.guard, d.guard), 'k', coalesce(a.k, d.k),"
		" 'sample_hz', coalesce(a.sample_hz, d.sample_hz), 'min_wait_us', coalesce(a.min_wait_us, d.min_wait_us),"
		" 'reports_per_min', coalesce(a.reports_per_min, d.reports_per_min)))::text"
		" FROM (SELECT 1) one LEFT JOIN agent_settings a ON a.app = $1 LEFT JOIN agent_settings d ON d.app = '*'",
		1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		db_fail(st, "reading the agents' settings", res);
		PQclear(res);
		return -1;
	}
	buf_append(out, PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
	PQclear(res);
	return 0;
}
