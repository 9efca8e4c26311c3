/* costcache: the cost models of clusters and problems, kept once computed (see costcache.h). */
#include "web/costcache.h"
#include "common/imap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One model in one allocation: the entry, then its labels, then their strings. */
struct entry {
	struct entry *newer, *older;
	uint64_t key;
	size_t bytes;
	struct attribution_costmodel cm;
};

struct costcache {
	pthread_mutex_t lock;
	struct imap keys;        /* key -> struct entry * */
	struct entry *newest, *oldest;
	size_t max_bytes, used;
};

/* UINT64_MAX (the map's empty key) is never one: ids are positive */
static int key_of(enum attribution_of of, int64_t id, uint64_t *key)
{
	if (id <= 0 || (uint64_t)id > UINT64_MAX >> 2)
		return -1;
	*key = (uint64_t)id << 1 | (of == ATTRIBUTION_PROBLEM);
	return 0;
}

struct costcache *costcache_open(size_t max_bytes)
{
	struct costcache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->keys = (struct imap)IMAP_INIT;
	c->max_bytes = max_bytes;
	if (pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c);
		return NULL;
	}
	return c;
}

void costcache_free(struct costcache *c)
{
	if (!c)
		return;
	for (struct entry *e = c->newest, *next; e; e = next) {
		next = e->older;
		free(e);
	}
	imap_free(&c->keys);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static void unlink_entry(struct costcache *c, struct entry *e)
{
	if (e->newer)
		e->newer->older = e->older;
	else
		c->newest = e->older;
	if (e->older)
		e->older->newer = e->newer;
	else
		c->oldest = e->newer;
	e->newer = e->older = NULL;
}

static void push_newest(struct costcache *c, struct entry *e)
{
	e->newer = NULL;
	e->older = c->newest;
	if (c->newest)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
}

static size_t str_bytes(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

/* s copied to *at (which moves on), or NULL for NULL */
static const char *put_str(char **at, const char *s)
{
	size_t n = str_bytes(s);
	char *d = *at;

	if (!s)
		return NULL;
	memcpy(d, s, n);
	*at += n;
	return d;
}

void costcache_put(struct costcache *c, enum attribution_of of, int64_t id, const struct attribution_costmodel *cm)
{
	size_t bytes = sizeof(struct entry) + cm->n * sizeof(*cm->v) + str_bytes(cm->modes_words);
	struct entry *e;
	uint64_t key, old;
	char *at;

	if (!c || key_of(of, id, &key) < 0)
		return;
	for (size_t i = 0; i < cm->n; i++)
		bytes += str_bytes(cm->v[i].key) + str_bytes(cm->v[i].words);
	if (bytes > c->max_bytes || !(e = malloc(bytes)))
		return;
	e->key = key;
	e->bytes = bytes;
	e->cm = *cm;
	e->cm.v = (struct attribution_numeric *)(e + 1);
	at = (char *)(e->cm.v + cm->n);
	for (size_t i = 0; i < cm->n; i++) {
		e->cm.v[i].fit = cm->v[i].fit;
		e->cm.v[i].key = put_str(&at, cm->v[i].key);
		e->cm.v[i].words = put_str(&at, cm->v[i].words);
	}
	e->cm.modes_words = put_str(&at, cm->modes_words);

	pthread_mutex_lock(&c->lock);
	/* another request computed it meanwhile: the same model */
	if (imap_get(&c->keys, key, &old)) {
		unlink_entry(c, (struct entry *)(uintptr_t)old);
		push_newest(c, (struct entry *)(uintptr_t)old);
		goto out_drop;
	}
	/* room in the index first: nothing is evicted for an entry that cannot be kept */
	if (imap_reserve(&c->keys, c->keys.cnt + 1) < 0)
		goto out_drop;
	while (c->oldest && c->used + bytes > c->max_bytes) {
		struct entry *gone = c->oldest;

		unlink_entry(c, gone);
		imap_del(&c->keys, gone->key);
		c->used -= gone->bytes;
		free(gone);
	}
	imap_put(&c->keys, key, (uint64_t)(uintptr_t)e);   /* reserved above */
	push_newest(c, e);
	c->used += bytes;
	pthread_mutex_unlock(&c->lock);
	return;
out_drop:
	pthread_mutex_unlock(&c->lock);
	free(e);
}

/* s into the arena; NULL stays NULL. Returns -1 when out of memory. */
static int copy_str(struct arena *a, const char *s, const char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = arena_strndup(a, s, strlen(s));
	return *out ? 0 : -1;
}

int costcache_get(struct costcache *c, enum attribution_of of, int64_t id, struct arena *a,
		  struct attribution_costmodel *out)
{
	struct entry *e;
	uint64_t key, v;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!c || key_of(of, id, &key) < 0)
		return 0;
	pthread_mutex_lock(&c->lock);
	if (!imap_get(&c->keys, key, &v))
		goto out_unlock;
	e = (struct entry *)(uintptr_t)v;
	unlink_entry(c, e);
	push_newest(c, e);
	*out = e->cm;
	out->v = arena_calloc(a, e->cm.n + 1, sizeof(*out->v));
	if (!out->v)
		goto out_clear;
	for (size_t i = 0; i < e->cm.n; i++) {
		out->v[i].fit = e->cm.v[i].fit;
		if (copy_str(a, e->cm.v[i].key, &out->v[i].key) < 0 || copy_str(a, e->cm.v[i].words, &out->v[i].words) < 0)
			goto out_clear;
	}
	if (copy_str(a, e->cm.modes_words, &out->modes_words) < 0)
		goto out_clear;
	rc = 1;
	goto out_unlock;
out_clear:
	memset(out, 0, sizeof(*out));
out_unlock:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void costcache_usage(struct costcache *c, size_t *entries, size_t *bytes)
{
	*entries = *bytes = 0;
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	*entries = c->keys.cnt;
	*bytes = c->used;
	pthread_mutex_unlock(&c->lock);
}
