/*
 * profiles: performance profiles learnt across the fleet (docs/fleet.md,
 * "Thresholds learnt by the fleet"). A training guard agent uploads what its
 * process learnt (POST /api/v1/profiles); the merged profile of a build pools
 * the statistics of each host's latest upload of that build exactly (guardcore/profile.h's
 * gp_merge, then its unit types and thresholds again) and is what agents fetch
 * (GET /api/v1/profiles/{build_id}) to guard with the fleet's thresholds. A host counts once (its
 * latest upload); a host far off the others is held back, and no merged threshold leaves the range
 * of the merged hosts' own.
 */
#ifndef SM_INGEST_PROFILES_H
#define SM_INGEST_PROFILES_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* One upload, parsed: who sent it and the profile in its canonical text. */
struct profile_upload {
	char host[256];
	int64_t pid, started_ns;
	char build_id[129];
	char exe[4097];
	uint64_t units;
	struct buf text;              /* the profile as gp_write() writes it; caller releases */
};

/* Parses and checks an upload body ({"v": 1, "host", "pid", "started_ns", "profile": {...}}) into *u.
 * 0, or -1 with the field and the reason in err. buf_release(&u->text) in both cases. */
int profiles_parse(const char *body, size_t len, struct profile_upload *u, char *err, size_t errlen);
/* Checks the parsed upload against what one process can have learnt by now_ns (ns since the epoch)
 * since its started_ns: counts, mean durations and spreads (docs/fleet.md). 0, or -1 with the
 * field and the reason in err. */
int profiles_validate(const struct profile_upload *u, int64_t now_ns, char *err, size_t errlen);
/* Stores it, replacing that process's previous upload, and marks the build's merged profile stale. */
int profiles_store(PGconn *db, const struct profile_upload *u, char *err, size_t errlen);
/*
 * The merged profile of build_id into out (appended): made again first when an upload made it stale
 * and the last merge is older than min_age_ms (so a fleet of uploaders costs a merge per build at
 * most that often). Returns 0, 1 when no process of that build has uploaded, or -1 with err.
 */
int profiles_fetch(PGconn *db, const char *build_id, int64_t min_age_ms, struct buf *out, char *err,
		   size_t errlen);
/* The same without the text: the merged profile made again when stale and older than min_age_ms.
 * 0, or -1 with err. */
int profiles_refresh(PGconn *db, const char *build_id, int64_t min_age_ms, char *err, size_t errlen);
/* Whether s is a build id as agents name them: lower-case hex, or "path-" and hex; 1 to 128 bytes. */
int profiles_build_id_ok(const char *s);

#endif
