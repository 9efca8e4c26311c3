/* costcache: the attributions and cost models of clusters and problems, kept once computed (see
 * costcache.h). */
#include "web/costcache.h"
#include "common/imap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum kind { KIND_MODEL, KIND_ATTRIBUTION, KIND_FLAME, KINDS };
/* a key is id << 3 | kind << 1 | of: with a fourth kind the largest would be UINT64_MAX, the map's empty key */
_Static_assert(KINDS <= 3, "kinds fit a key");

/* One thing kept in one allocation: the entry, then its array (labels, values), then their strings. */
struct entry {
	struct entry *newer, *older;
	uint64_t key;
	size_t bytes;
	union {
		struct attribution_costmodel cm;   /* KIND_MODEL */
		struct attribution at;             /* KIND_ATTRIBUTION */
		size_t len;                        /* KIND_FLAME: its text follows the entry */
	} u;
};

struct costcache {
	pthread_mutex_t lock;
	struct imap keys;        /* key -> struct entry * */
	struct entry *newest, *oldest;
	size_t max_bytes, used;
	size_t count[KINDS];     /* entries by kind */
	uint64_t flames_served;  /* costcache_get_flame()'s hits */
};

/* UINT64_MAX (the map's empty key) is never one: ids are positive */
static int key_of(enum kind kind, enum attribution_of of, int64_t id, uint64_t *key)
{
	if (id <= 0 || (uint64_t)id > UINT64_MAX >> 3)
		return -1;
	*key = (uint64_t)id << 3 | (uint64_t)kind << 1 | (of == ATTRIBUTION_PROBLEM);
	return 0;
}

static enum kind kind_of(uint64_t key)
{
	return (enum kind)(key >> 1 & 3);
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

/* Keeps e (of e->bytes, under e->key), dropping the least recently used entries to make room; frees
 * it when it cannot be kept or is kept already. */
static void keep(struct costcache *c, struct entry *e)
{
	uint64_t old;

	pthread_mutex_lock(&c->lock);
	/* another request computed it meanwhile: the same thing */
	if (imap_get(&c->keys, e->key, &old)) {
		unlink_entry(c, (struct entry *)(uintptr_t)old);
		push_newest(c, (struct entry *)(uintptr_t)old);
		goto out_drop;
	}
	/* room in the index first: nothing is evicted for an entry that cannot be kept */
	if (imap_reserve(&c->keys, c->keys.cnt + 1) < 0)
		goto out_drop;
	while (c->oldest && c->used + e->bytes > c->max_bytes) {
		struct entry *gone = c->oldest;

		unlink_entry(c, gone);
		imap_del(&c->keys, gone->key);
		c->used -= gone->bytes;
		c->count[kind_of(gone->key)]--;
		free(gone);
	}
	imap_put(&c->keys, e->key, (uint64_t)(uintptr_t)e);   /* reserved above */
	push_newest(c, e);
	c->used += e->bytes;
	c->count[kind_of(e->key)]++;
	pthread_mutex_unlock(&c->lock);
	return;
out_drop:
	pthread_mutex_unlock(&c->lock);
	free(e);
}

/* A new entry of bytes for key, or NULL when it cannot be kept (larger than the cache, out of
 * memory). */
static struct entry *entry_new(struct costcache *c, uint64_t key, size_t bytes)
{
	struct entry *e;

	if (bytes > c->max_bytes || !(e = malloc(bytes)))
		return NULL;
	e->key = key;
	e->bytes = bytes;
	return e;
}

void costcache_put(struct costcache *c, enum attribution_of of, int64_t id, const struct attribution_costmodel *cm)
{
	size_t bytes = sizeof(struct entry) + cm->n * sizeof(*cm->v) + str_bytes(cm->modes_words);
	struct entry *e;
	uint64_t key;
	char *at;

	if (!c || key_of(KIND_MODEL, of, id, &key) < 0)
		return;
	for (size_t i = 0; i < cm->n; i++)
		bytes += str_bytes(cm->v[i].key) + str_bytes(cm->v[i].words);
	if (!(e = entry_new(c, key, bytes)))
		return;
	e->u.cm = *cm;
	e->u.cm.v = (struct attribution_numeric *)(e + 1);
	at = (char *)(e->u.cm.v + cm->n);
	for (size_t i = 0; i < cm->n; i++) {
		e->u.cm.v[i].fit = cm->v[i].fit;
		e->u.cm.v[i].key = put_str(&at, cm->v[i].key);
		e->u.cm.v[i].words = put_str(&at, cm->v[i].words);
	}
	e->u.cm.modes_words = put_str(&at, cm->modes_words);
	keep(c, e);
}

void costcache_put_attribution(struct costcache *c, enum attribution_of of, int64_t id, const struct attribution *at)
{
	size_t bytes = sizeof(struct entry) + at->n * sizeof(*at->v);
	struct entry *e;
	uint64_t key;
	char *to;

	if (!c || key_of(KIND_ATTRIBUTION, of, id, &key) < 0)
		return;
	for (size_t i = 0; i < at->n; i++)
		bytes += str_bytes(at->v[i].key) + str_bytes(at->v[i].value);
	if (!(e = entry_new(c, key, bytes)))
		return;
	e->u.at = *at;
	e->u.at.v = (struct attribution_value *)(e + 1);
	to = (char *)(e->u.at.v + at->n);
	for (size_t i = 0; i < at->n; i++) {
		e->u.at.v[i] = at->v[i];
		e->u.at.v[i].key = put_str(&to, at->v[i].key);
		e->u.at.v[i].value = put_str(&to, at->v[i].value);
	}
	keep(c, e);
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

/* The entry of key, now the most recently used, with c's lock held (the caller unlocks); NULL when
 * none. */
static struct entry *lookup_locked(struct costcache *c, uint64_t key)
{
	struct entry *e;
	uint64_t v;

	pthread_mutex_lock(&c->lock);
	if (!imap_get(&c->keys, key, &v))
		return NULL;
	e = (struct entry *)(uintptr_t)v;
	unlink_entry(c, e);
	push_newest(c, e);
	return e;
}

int costcache_get(struct costcache *c, enum attribution_of of, int64_t id, struct arena *a,
		  struct attribution_costmodel *out)
{
	struct entry *e;
	uint64_t key;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!c || key_of(KIND_MODEL, of, id, &key) < 0)
		return 0;
	if (!(e = lookup_locked(c, key)))
		goto out_unlock;
	*out = e->u.cm;
	out->v = arena_calloc(a, e->u.cm.n + 1, sizeof(*out->v));
	if (!out->v)
		goto out_clear;
	for (size_t i = 0; i < e->u.cm.n; i++) {
		out->v[i].fit = e->u.cm.v[i].fit;
		if (copy_str(a, e->u.cm.v[i].key, &out->v[i].key) < 0 ||
		    copy_str(a, e->u.cm.v[i].words, &out->v[i].words) < 0)
			goto out_clear;
	}
	if (copy_str(a, e->u.cm.modes_words, &out->modes_words) < 0)
		goto out_clear;
	rc = 1;
	goto out_unlock;
out_clear:
	memset(out, 0, sizeof(*out));
out_unlock:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int costcache_get_attribution(struct costcache *c, enum attribution_of of, int64_t id, struct arena *a,
			      struct attribution *out)
{
	struct entry *e;
	uint64_t key;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->of = of;
	if (!c || key_of(KIND_ATTRIBUTION, of, id, &key) < 0)
		return 0;
	if (!(e = lookup_locked(c, key)))
		goto out_unlock;
	*out = e->u.at;
	out->v = arena_calloc(a, e->u.at.n + 1, sizeof(*out->v));
	if (!out->v)
		goto out_clear;
	for (size_t i = 0; i < e->u.at.n; i++) {
		out->v[i] = e->u.at.v[i];
		if (copy_str(a, e->u.at.v[i].key, &out->v[i].key) < 0 ||
		    copy_str(a, e->u.at.v[i].value, &out->v[i].value) < 0)
			goto out_clear;
	}
	rc = 1;
	goto out_unlock;
out_clear:
	memset(out, 0, sizeof(*out));
	out->of = of;
out_unlock:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void costcache_put_flame(struct costcache *c, enum attribution_of of, int64_t id, const char *text, size_t n)
{
	struct entry *e;
	uint64_t key;

	if (!c || key_of(KIND_FLAME, of, id, &key) < 0 || n > SIZE_MAX - sizeof(*e))
		return;
	if (!(e = entry_new(c, key, sizeof(*e) + n)))
		return;
	e->u.len = n;
	memcpy(e + 1, text, n);
	keep(c, e);
}

int costcache_get_flame(struct costcache *c, enum attribution_of of, int64_t id, struct buf *out)
{
	struct entry *e;
	uint64_t key;
	int rc = 0;

	if (!c || key_of(KIND_FLAME, of, id, &key) < 0)
		return 0;
	if ((e = lookup_locked(c, key))) {
		rc = buf_append(out, (const char *)(e + 1), e->u.len) == 0 ? 1 : -1;
		c->flames_served++;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void costcache_usage(struct costcache *c, size_t *models, size_t *attributions, size_t *bytes)
{
	*models = *attributions = *bytes = 0;
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	*models = c->count[KIND_MODEL];
	*attributions = c->count[KIND_ATTRIBUTION];
	*bytes = c->used;
	pthread_mutex_unlock(&c->lock);
}

void costcache_flames(struct costcache *c, size_t *kept, uint64_t *served)
{
	*kept = 0;
	*served = 0;
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	*kept = c->count[KIND_FLAME];
	*served = c->flames_served;
	pthread_mutex_unlock(&c->lock);
}
