/*
 * framecache: frame id -> name for sm-web. A frame's name never changes once
 * it is final: a named frame, or an unnamed one (`module+0xOFFSET`) once it is
 * an alias of its function's frame (docs/symbols.md); unnamed frames not yet
 * resolved are read each time and never cached. So every thread of
 * the server shares one cache and a page's thousands of names cost one query
 * for the ids it has not seen yet instead of one index lookup each.
 */
#ifndef SM_WEB_FRAMECACHE_H
#define SM_WEB_FRAMECACHE_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

struct arena;
struct framecache;

/* A cache holding at most max_bytes of names (and their index). NULL on out of memory.
 * Caller frees with framecache_free(). */
struct framecache *framecache_open(size_t max_bytes);
/* NULL-safe. */
void framecache_free(struct framecache *c);

/*
 * The names of ids[0..n) into names[0..n). Ids not cached are read with one query
 * on db and cached while there is room; past the cache's size they are copied into
 * the arena a. A name stays valid until framecache_free() (or the arena is freed).
 * An id the database does not have is named "?". Thread-safe. Returns 0 when
 * every name came from the cache (each final, docs/symbols.md), 1 when some
 * did not (a frame not yet named, an id not found, a full cache), or -1 with
 * err (a database error, out of memory).
 */
int framecache_names(struct framecache *c, PGconn *db, const int32_t *ids, size_t n, const char **names,
		     struct arena *a, char *err, size_t errlen);
/* The queries made so far for names the cache lacked (0 for NULL). */
uint64_t framecache_queries(struct framecache *c);


#endif
