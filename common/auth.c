/* auth: hashed API tokens with a short-lived cache (see auth.h). */
#include "common/auth.h"
#include "common/sha256.h"
#include "common/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct auth_entry {
	unsigned char hash[SHA256_LEN];
	struct auth_who who;
	int64_t expires_ns;
	bool used;
};

struct auth_cache {
	pthread_mutex_t lock;
	struct auth_entry *ents;
	size_t n;
	int64_t ttl_ns;
};

static const char *const role_names[] = { "none", "ingest", "analyst", "admin" };

const char *auth_role_name(enum auth_role r)
{
	return (unsigned)r < 4 ? role_names[r] : "none";
}

enum auth_role auth_role_parse(const char *s)
{
	for (int i = 1; i < 4; i++)
		if (strcmp(s, role_names[i]) == 0)
			return (enum auth_role)i;
	return AUTH_NONE;
}

int auth_token_new(char *out)
{
	unsigned char r[32];

	if (util_random(r, sizeof(r)) < 0)
		return -1;
	memcpy(out, "sm_", 3);
	util_hex(r, sizeof(r), out + 3);
	return 0;
}

struct auth_cache *auth_cache_open(int ttl_ms, size_t max_entries)
{
	struct auth_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->n = max_entries ? max_entries : 1;
	c->ents = calloc(c->n, sizeof(*c->ents));
	if (!c->ents) {
		free(c);
		return NULL;
	}
	c->ttl_ns = (int64_t)ttl_ms * 1000000;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void auth_cache_free(struct auth_cache *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c->ents);
	free(c);
}

/* Extract the token from "Bearer X" (scheme case-insensitive) or a bare token. */
static const char *bearer_token(const char *h, size_t *len)
{
	size_t n;

	if (!h)
		return NULL;
	while (*h == ' ')
		h++;
	if (strncasecmp(h, "bearer ", 7) == 0) {
		h += 7;
		while (*h == ' ')
			h++;
	}
	n = strlen(h);
	while (n && h[n - 1] == ' ')
		n--;
	if (n == 0 || n > 256)
		return NULL;
	*len = n;
	return h;
}

static size_t slot_of(const struct auth_cache *c, const unsigned char *hash)
{
	uint64_t v;

	memcpy(&v, hash, sizeof(v));
	return (size_t)(v % c->n);
}

static int cache_get(struct auth_cache *c, const unsigned char *hash, struct auth_who *who)
{
	struct auth_entry *e = &c->ents[slot_of(c, hash)];
	int hit = 0;

	pthread_mutex_lock(&c->lock);
	if (e->used && e->expires_ns > util_now_mono_ns() && util_ct_equal(e->hash, hash, SHA256_LEN)) {
		*who = e->who;
		hit = 1;
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

static void cache_put(struct auth_cache *c, const unsigned char *hash, const struct auth_who *who)
{
	struct auth_entry *e = &c->ents[slot_of(c, hash)];

	if (c->ttl_ns <= 0)
		return;
	pthread_mutex_lock(&c->lock);
	memcpy(e->hash, hash, SHA256_LEN);
	e->who = *who;
	e->expires_ns = util_now_mono_ns() + c->ttl_ns;
	e->used = true;
	pthread_mutex_unlock(&c->lock);
}

int auth_cached_who(struct auth_cache *c, const char *header, struct auth_who *who)
{
	unsigned char hash[SHA256_LEN];
	size_t n;
	const char *tok = bearer_token(header, &n);

	memset(who, 0, sizeof(*who));
	if (!tok)
		return 1;
	if (c->ttl_ns <= 0)
		return 0;
	sha256(tok, n, hash);
	return cache_get(c, hash, who);
}

int auth_cached(struct auth_cache *c, const char *header, enum auth_role *role)
{
	struct auth_who who;
	int hit = auth_cached_who(c, header, &who);

	*role = who.role;
	return hit;
}

int auth_check_who(struct auth_cache *c, PGconn *db, const char *header, struct auth_who *who)
{
	unsigned char hash[SHA256_LEN];
	size_t n;
	const char *tok = bearer_token(header, &n);
	const char *params[1];
	int lens[1] = { SHA256_LEN }, fmts[1] = { 1 };
	PGresult *r;

	memset(who, 0, sizeof(*who));
	if (!tok)
		return 0;
	sha256(tok, n, hash);
	if (c->ttl_ns > 0 && cache_get(c, hash, who))
		return 0;
	params[0] = (const char *)hash;
	r = PQexecParams(db,
			 "SELECT role, token_hash, coalesce(host, '') FROM tokens WHERE token_hash = $1 AND revoked_at IS NULL",
			 1, NULL, params, lens, fmts, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		PQclear(r);
		return -1;
	}
	/* the index found it by hash; compare the stored hash in constant time anyway */
	if (PQntuples(r) == 1 && PQgetlength(r, 0, 1) == SHA256_LEN &&
	    util_ct_equal(PQgetvalue(r, 0, 1), hash, SHA256_LEN)) {
		char rolename[16];
		size_t rl = (size_t)PQgetlength(r, 0, 0), hl = (size_t)PQgetlength(r, 0, 2);

		if (rl < sizeof(rolename) && hl < sizeof(who->host)) {
			memcpy(rolename, PQgetvalue(r, 0, 0), rl);
			rolename[rl] = '\0';
			who->role = auth_role_parse(rolename);
			memcpy(who->host, PQgetvalue(r, 0, 2), hl);
			who->host[hl] = '\0';
		}
	}
	PQclear(r);
	cache_put(c, hash, who);
	return 0;
}

void auth_cache_put(struct auth_cache *c, const char *key, const struct auth_who *who)
{
	unsigned char hash[SHA256_LEN];
	size_t n;
	const char *k = bearer_token(key, &n);

	if (!k)
		return;
	sha256(k, n, hash);
	cache_put(c, hash, who);
}

void auth_cache_forget(struct auth_cache *c, const char *key)
{
	unsigned char hash[SHA256_LEN];
	size_t n;
	const char *k = bearer_token(key, &n);
	struct auth_entry *e;

	if (!k)
		return;
	sha256(k, n, hash);
	e = &c->ents[slot_of(c, hash)];
	pthread_mutex_lock(&c->lock);
	if (e->used && util_ct_equal(e->hash, hash, SHA256_LEN))
		e->used = false;
	pthread_mutex_unlock(&c->lock);
}

void auth_cache_clear(struct auth_cache *c)
{
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n; i++)
		c->ents[i].used = false;
	pthread_mutex_unlock(&c->lock);
}

int auth_check(struct auth_cache *c, PGconn *db, const char *header, enum auth_role *role)
{
	struct auth_who who;
	int rc = auth_check_who(c, db, header, &who);

	*role = who.role;
	return rc;
}

int auth_token_create(PGconn *db, enum auth_role role, const char *name, const char *host,
		      char token[AUTH_TOKEN_LEN + 1], int64_t *id, char *err, size_t errlen)
{
	unsigned char hash[SHA256_LEN];
	const char *params[4];
	int lens[4] = { SHA256_LEN, 0, 0, 0 }, fmts[4] = { 1, 0, 0, 0 };
	PGresult *r;

	if (role == AUTH_NONE) {
		snprintf(err, errlen, "role: must be ingest, analyst or admin");
		return AUTH_EINVAL;
	}
	if (host && (!*host || strlen(host) > AUTH_HOST_MAX || !util_utf8_valid(host, strlen(host)))) {
		snprintf(err, errlen, "host: 1 to %d bytes of UTF-8", AUTH_HOST_MAX);
		return AUTH_EINVAL;
	}
	if (host && role != AUTH_INGEST) {
		snprintf(err, errlen, "host: only ingest tokens are bound to a host");
		return AUTH_EINVAL;
	}
	if (name && (strlen(name) > 255 || !util_utf8_valid(name, strlen(name)))) {
		snprintf(err, errlen, "name: at most 255 bytes of UTF-8");
		return AUTH_EINVAL;
	}
	if (auth_token_new(token) < 0) {
		snprintf(err, errlen, "no randomness from the kernel");
		return AUTH_EFAIL;
	}
	sha256(token, strlen(token), hash);
	params[0] = (const char *)hash;
	params[1] = auth_role_name(role);
	params[2] = name ? name : "";
	params[3] = host;
	r = PQexecParams(db, "INSERT INTO tokens (token_hash, role, name, host) VALUES ($1, $2, $3, $4) RETURNING id",
			 4, NULL, params, lens, fmts, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		snprintf(err, errlen, "creating the token: %s", PQresultErrorMessage(r));
		PQclear(r);
		return AUTH_EFAIL;
	}
	*id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return 0;
}

int auth_token_revoke(PGconn *db, int64_t id, char *err, size_t errlen)
{
	char idbuf[24];
	const char *params[1] = { idbuf };
	PGresult *r;
	int rc;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
	r = PQexecParams(db, "UPDATE tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
			 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		snprintf(err, errlen, "revoking the token: %s", PQresultErrorMessage(r));
		PQclear(r);
		return -1;
	}
	rc = strcmp(PQcmdTuples(r), "1") == 0 ? 0 : 1;
	PQclear(r);
	if (rc)
		snprintf(err, errlen, "token %s: no active token with that id", idbuf);
	return rc;
}
