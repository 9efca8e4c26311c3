/* framecache: shared frame id -> name cache of sm-web (see framecache.h). */
#include "web/framecache.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/imap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct framecache {
	pthread_rwlock_t lock;
	struct imap ids;    /* frame id -> the name's address in names */
	struct arena *names;
	size_t max_bytes, used;
	_Atomic uint64_t queries;   /* of frame_names, for what the cache lacked */
};

struct framecache *framecache_open(size_t max_bytes)
{
	struct framecache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ids = (struct imap)IMAP_INIT;
	c->names = arena_open(0);
	c->max_bytes = max_bytes;
	if (!c->names || imap_reserve(&c->ids, 1024) < 0 || pthread_rwlock_init(&c->lock, NULL) != 0) {
		imap_free(&c->ids);
		arena_free(c->names);
		free(c);
		return NULL;
	}
	return c;
}

void framecache_free(struct framecache *c)
{
	if (!c)
		return;
	pthread_rwlock_destroy(&c->lock);
	imap_free(&c->ids);
	arena_free(c->names);
	free(c);
}

static const char *lookup(const struct framecache *c, int32_t id)
{
	uint64_t v;

	return imap_get(&c->ids, (uint64_t)(uint32_t)id, &v) ? (const char *)(uintptr_t)v : NULL;
}

/* Under the write lock: cache one name if there is room. Returns the kept copy or NULL. */
static const char *insert(struct framecache *c, int32_t id, const char *name, size_t len)
{
	const char *old = lookup(c, id);
	char *copy;

	if (old)
		return old;
	/* a name, and its map entry's share (two slots of 16 bytes at most half full) */
	if (c->used + len + 1 + 32 > c->max_bytes)
		return NULL;
	copy = arena_strndup(c->names, name, len);
	if (!copy || imap_put(&c->ids, (uint64_t)(uint32_t)id, (uint64_t)(uintptr_t)copy) < 0)
		return NULL;
	c->used += len + 1 + 32;
	return copy;
}

/* The row of id in r (its ids ascending in column 0), or -1: a page of thousands of names the cache
 * cannot keep (unnamed frames, a full cache) looks each up by halves, not along the whole result. */
static int row_of(const PGresult *r, int32_t id)
{
	int lo = 0, hi = PQntuples(r);

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (strtol(PQgetvalue(r, mid, 0), NULL, 10) < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < PQntuples(r) && strtol(PQgetvalue(r, lo, 0), NULL, 10) == id ? lo : -1;
}

static int cmp_id(const void *x, const void *y)
{
	int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;

	return (a > b) - (a < b);
}

int framecache_names(struct framecache *c, PGconn *db, const int32_t *ids, size_t n, const char **names,
		     struct arena *a, char *err, size_t errlen)
{
	struct buf q = BUF_INIT(0);
	size_t misses = 0, distinct = 0;
	int32_t *miss;
	const char **copies;
	PGresult *r;
	const char *p[1];
	int k, final = 1;

	if (!(miss = malloc((n + 1) * sizeof(*miss)))) {
		snprintf(err, errlen, "reading frame names: out of memory");
		return -1;
	}
	pthread_rwlock_rdlock(&c->lock);
	for (size_t i = 0; i < n; i++)
		if (!(names[i] = lookup(c, ids[i])))
			miss[misses++] = ids[i];
	pthread_rwlock_unlock(&c->lock);
	if (!misses) {
		free(miss);
		return 0;   /* every name from the cache: final */
	}
	/* each id once (a page's stacks share most of their frames) */
	qsort(miss, misses, sizeof(*miss), cmp_id);
	for (size_t i = 0; i < misses; i++)
		if (i == 0 || miss[i] != miss[i - 1])
			buf_printf(&q, distinct++ ? ",%d" : "{%d", miss[i]);
	free(miss);
	buf_putc(&q, '}');
	p[0] = buf_cstr(&q);
	atomic_fetch_add_explicit(&c->queries, 1, memory_order_relaxed);
	/* an unnamed frame (`module+0xOFFSET`, no canonical frame yet) may be named later: not cached */
	r = PQexecParams(db, "SELECT id, name, canon_id <> id OR name !~ '\\+0x[0-9a-fA-F]+$' FROM frame_names"
			     " WHERE id = ANY($1::int[]) ORDER BY id", 1, NULL, p, NULL, NULL, 0);
	buf_release(&q);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "reading frame names", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	/* (the request's copies of the names the cache does not keep: one per row) */
	if (!(copies = arena_calloc(a, (size_t)PQntuples(r) + 1, sizeof(*copies)))) {
		PQclear(r);
		snprintf(err, errlen, "reading frame names: out of memory");
		return -1;
	}
	pthread_rwlock_wrlock(&c->lock);
	for (int i = 0; i < PQntuples(r); i++)
		if (PQgetvalue(r, i, 2)[0] == 't')
			insert(c, (int32_t)strtol(PQgetvalue(r, i, 0), NULL, 10), PQgetvalue(r, i, 1),
			       (size_t)PQgetlength(r, i, 1));
	pthread_rwlock_unlock(&c->lock);
	/* fill the misses: from the cache, else (not kept) a copy in the request's arena */
	pthread_rwlock_rdlock(&c->lock);
	for (size_t i = 0; i < n; i++) {
		if (names[i])
			continue;
		names[i] = lookup(c, ids[i]);
		if (names[i])
			continue;
		final = 0;
		if ((k = row_of(r, ids[i])) >= 0) {
			if (!copies[k])
				copies[k] = arena_strndup(a, PQgetvalue(r, k, 1), (size_t)PQgetlength(r, k, 1));
			names[i] = copies[k];
		}
		if (!names[i])
			names[i] = "?";
	}
	pthread_rwlock_unlock(&c->lock);
	PQclear(r);
	return final ? 0 : 1;
}

uint64_t framecache_queries(struct framecache *c)
{
	return c ? atomic_load_explicit(&c->queries, memory_order_relaxed) : 0;
}
