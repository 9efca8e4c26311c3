/*
 * auth: API tokens. A token is shown once when created and stored only as its
 * SHA-256; checks look the hash up, compare it in constant time, and keep the
 * answer in a small cache for a few seconds so a busy server does not ask the
 * database on every request.
 */
#ifndef SM_AUTH_H
#define SM_AUTH_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

enum auth_role { AUTH_NONE = 0, AUTH_INGEST = 1, AUTH_ANALYST = 2, AUTH_ADMIN = 3 };

#define AUTH_TOKEN_LEN 67 /* "sm_" + 64 hex digits */

/* A new random token into out[AUTH_TOKEN_LEN + 1]. Returns 0 or -1. */
int auth_token_new(char *out);
const char *auth_role_name(enum auth_role r);
/* "ingest", "analyst", "admin"; AUTH_NONE if unknown. */
enum auth_role auth_role_parse(const char *s);

struct auth_cache;

/* A cache keeping answers for ttl_ms (0: no caching), at most max_entries. Caller frees. */
struct auth_cache *auth_cache_open(int ttl_ms, size_t max_entries);
void auth_cache_free(struct auth_cache *c);   /* NULL-safe */
/*
 * Role of the token in an "Authorization" header value ("Bearer TOKEN"), or of a
 * bare token when `header` has no scheme. AUTH_NONE for missing, malformed,
 * unknown or revoked tokens. `db` is used on a cache miss. Returns -1 only when
 * the database could not be asked. Thread-safe.
 */
int auth_check(struct auth_cache *c, PGconn *db, const char *header, enum auth_role *role);
/* Cached role without the database: 1 if known (role set), 0 if the database must be asked. */
int auth_cached(struct auth_cache *c, const char *header, enum auth_role *role);

#define AUTH_HOST_MAX 255

/* Who a token is: its role, and the host it is bound to ("" when any). */
struct auth_who {
	enum auth_role role;
	char host[AUTH_HOST_MAX + 1];
};

enum { AUTH_EINVAL = -1, AUTH_EFAIL = -2 };
/* Creates a token of role (bound to host when not NULL: ingest tokens only) into token (shown to the
 * caller once; only its hash is stored) and *id. Returns 0, AUTH_EINVAL with err naming the field, or
 * AUTH_EFAIL with err (the database or the kernel's randomness failed). */
int auth_token_create(PGconn *db, enum auth_role role, const char *name, const char *host,
		      char token[AUTH_TOKEN_LEN + 1], int64_t *id, char *err, size_t errlen);
/* Revokes token id. Returns 0, 1 when there was no active token with that id, or -1 (err). */
int auth_token_revoke(PGconn *db, int64_t id, char *err, size_t errlen);

/* The cache as a store of other secrets' answers (sm-web's sessions, in a cache of their own): remember
 * who the bare secret key is, forget it, forget everything (each at once, for this process). */
void auth_cache_put(struct auth_cache *c, const char *key, const struct auth_who *who);
void auth_cache_forget(struct auth_cache *c, const char *key);
void auth_cache_clear(struct auth_cache *c);

/* auth_check() and auth_cached() that also tell the token's host. */
int auth_check_who(struct auth_cache *c, PGconn *db, const char *header, struct auth_who *who);
int auth_cached_who(struct auth_cache *c, const char *header, struct auth_who *who);

#endif
