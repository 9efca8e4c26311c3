/*
 * symstore: the database side of naming unnamed frames (docs/symbols.md):
 * function symbols of builds (debug_symbols), where each debug file came from
 * or why it was not found (debug_files), and the resolution of frames
 * (sm_resolve_frames, sql/024_symbols.sql). All its SQL is here.
 */
#ifndef SM_SYMSTORE_H
#define SM_SYMSTORE_H

#include <libpq-fe.h>
#include <stddef.h>

#include "common/debuginfo.h"

/* Stores d's symbols under its build id (replacing what that build had), records the source and
 * path, and resolves that build's frames, in one transaction. Returns the frames resolved, or -1
 * with err. */
int symstore_put(PGconn *db, const struct debuginfo *d, const char *source, const char *path, char *err,
		 size_t errlen);

/*
 * For each build id with unresolved frames (most frames first, at most max_builds): resolves them
 * from the symbols stored, or looks for the debug file (opts) when none is stored and the last
 * search is older than retry_s seconds (or there was none), storing what it finds and the failure
 * otherwise. Returns the frames resolved, or -1 with err (a database failure; a debug file not
 * found is not an error).
 */
int symstore_resolve_pending(PGconn *db, const struct debuginfo_opts *opts, int retry_s, int max_builds,
			     char *err, size_t errlen);

/* A build id as `list` and `missing` show it. */
struct symstore_build {
	char build_id[2 * DEBUGINFO_MAX_BUILD_ID + 1];
	char module[256];      /* a module its frames name ("" when none) */
	char source[32];       /* "" when no debug file is known */
	char path[256];
	long long symbols;
	long long unresolved;  /* frames of that build still `module+0xOFFSET` */
	char tried_at[40];
	char error[256];
};

/* The build ids known (missing_only: those with unresolved frames and no debug file), most
 * unresolved frames first, at most max. *out is malloc'd (caller frees). Returns the count or -1. */
int symstore_builds(PGconn *db, int missing_only, size_t max, struct symstore_build **out, char *err,
		    size_t errlen);

#endif
