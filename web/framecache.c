/* framecache: shared frame id -> name cache of sm-web (see framecache.h). */
#include "web/framecache.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/db.h"
#include "common/hash.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slot {
	int32_t id;         /* 0: empty (frame ids start at 1) */
	const char *name;   /* in the cache's arena */
};

struct framecache {
	pthread_rwlock_t lock;
	struct slot *slots;
	size_t cap, count;  /* cap: a power of two, kept under 2/3 full */
	struct arena *names;
	size_t max_bytes, used;
};

struct framecache *framecache_open(size_t max_bytes)
{
	struct framecache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->cap = 1024;
	c->slots = calloc(c->cap, sizeof(*c->slots));
	c->names = arena_open(0);
	c->max_bytes = max_bytes;
	if (!c->slots || !c->names || pthread_rwlock_init(&c->lock, NULL) != 0) {
		free(c->slots);
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
	free(c->slots);
	arena_free(c->names);
	free(c);
}

static size_t slot_of(const struct framecache *c, int32_t id)
{
	size_t i = (size_t)hash_mix64((uint64_t)(uint32_t)id) & (c->cap - 1);

	while (c->slots[i].id && c->slots[i].id != id)
		i = (i + 1) & (c->cap - 1);
	return i;
}

static const char *lookup(const struct framecache *c, int32_t id)
{
	const struct slot *s = &c->slots[slot_of(c, id)];

	return s->id ? s->name : NULL;
}

/* Under the write lock. Returns 0, or -1 when out of memory. */
static int grow(struct framecache *c)
{
	size_t ncap = c->cap * 2;
	struct slot *old = c->slots, *ns = calloc(ncap, sizeof(*ns));

	if (!ns)
		return -1;
	c->slots = ns;
	c->cap = ncap;
	for (size_t i = 0; i < ncap / 2; i++)
		if (old[i].id)
			c->slots[slot_of(c, old[i].id)] = old[i];
	free(old);
	return 0;
}

/* Under the write lock: cache one name if there is room. Returns the kept copy or NULL. */
static const char *insert(struct framecache *c, int32_t id, const char *name, size_t len)
{
	size_t i;
	char *copy;

	if (c->used + len + 1 + 2 * sizeof(struct slot) > c->max_bytes)
		return NULL;
	if ((c->count + 1) * 3 > c->cap * 2 && grow(c) < 0)
		return NULL;
	i = slot_of(c, id);
	if (c->slots[i].id)
		return c->slots[i].name;
	copy = arena_strndup(c->names, name, len);
	if (!copy)
		return NULL;
	c->slots[i].id = id;
	c->slots[i].name = copy;
	c->count++;
	c->used += len + 1 + 2 * sizeof(struct slot);
	return copy;
}

int framecache_names(struct framecache *c, PGconn *db, const int32_t *ids, size_t n, const char **names,
		     struct arena *a, char *err, size_t errlen)
{
	struct buf q = BUF_INIT(0);
	size_t misses = 0;
	PGresult *r;
	const char *p[1];

	pthread_rwlock_rdlock(&c->lock);
	for (size_t i = 0; i < n; i++)
		if (!(names[i] = lookup(c, ids[i])))
			buf_printf(&q, misses++ ? ",%d" : "{%d", ids[i]);
	pthread_rwlock_unlock(&c->lock);
	if (!misses)
		return 0;
	buf_putc(&q, '}');
	p[0] = buf_cstr(&q);
	r = PQexecParams(db, "SELECT id, name FROM frames WHERE id = ANY($1::int[])", 1, NULL, p, NULL, NULL, 0);
	buf_release(&q);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_errcpy(err, errlen, "reading frame names", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	pthread_rwlock_wrlock(&c->lock);
	for (int i = 0; i < PQntuples(r); i++)
		insert(c, (int32_t)strtol(PQgetvalue(r, i, 0), NULL, 10), PQgetvalue(r, i, 1),
		       (size_t)PQgetlength(r, i, 1));
	/* fill the misses: from the cache, else (it is full) a copy in the request's arena */
	for (size_t i = 0; i < n; i++) {
		if (names[i])
			continue;
		names[i] = lookup(c, ids[i]);
		for (int k = 0; !names[i] && k < PQntuples(r); k++)
			if (strtol(PQgetvalue(r, k, 0), NULL, 10) == ids[i])
				names[i] = arena_strndup(a, PQgetvalue(r, k, 1), (size_t)PQgetlength(r, k, 1));
		if (!names[i])
			names[i] = "?";
	}
	pthread_rwlock_unlock(&c->lock);
	PQclear(r);
	return 0;
}

size_t framecache_count(struct framecache *c)
{
	size_t n;

	pthread_rwlock_rdlock(&c->lock);
	n = c->count;
	pthread_rwlock_unlock(&c->lock);
	return n;
}
