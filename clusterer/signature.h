/*
 * signature: performance signatures (mining.md section 7): named frame
 * patterns with a status and a note, stored by name; export to one JSON
 * document and import it back; and their coverage over a run's AOI events
 * (an event matches a signature whose frames are a subsequence of its stack).
 */
#ifndef SM_SIGNATURE_H
#define SM_SIGNATURE_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "common/budget.h"
#include "common/buf.h"

/* What the functions below return on failure (negative, with a message in err), so that a caller
 * (sm-web's status codes) need not read the message. */
enum sig_error {
	SIG_EINVAL = -1,     /* a bad argument or document: the message names the field */
	SIG_ENOTFOUND = -2,  /* the signature, run, cluster or problem named does not exist */
	SIG_EEXIST = -3,     /* a signature of that name exists already */
	SIG_EFAIL = -4,      /* the database failed, out of memory, out of time */
};

/* Create one; frames outermost first. Returns 0 and *id, or a SIG_E* code with err. */
int sig_create(PGconn *db, const char *name, const char *const *frames, size_t nframes,
	       const char *status, const char *note, int64_t from_cluster, int64_t *id, char *err,
	       size_t errlen);
/* A problem's signature (docs/mining.md, "Problems"): one signature per member cluster, its
 * common part, costliest first, named name, then "name #2", "name #3", ...; all or none.
 * Returns 0 and *n, or a SIG_E* code with err (no such problem, a name taken, bad status). */
int sig_create_from_problem(PGconn *db, int64_t problem, const char *name, const char *status,
			    const char *note, size_t *n, char *err, size_t errlen);
/* Change a signature's status and/or note (NULL: keep). Returns 0, or a SIG_E* code with
 * err (no such signature, bad status). */
int sig_update(PGconn *db, int64_t id, const char *status, const char *note, char *err, size_t errlen);
/* Every signature as one JSON document {"signatures": [...]} (by name), appended to out. */
int sig_export(PGconn *db, struct buf *out, char *err, size_t errlen);
/* Import such a document: each signature is created, or updated when its name exists.
 * All or nothing. *n: how many. Returns 0 or a SIG_E* code with err naming the field. */
int sig_import(PGconn *db, const char *json, size_t len, size_t *n, char *err, size_t errlen);

struct sig_cover {
	int64_t id;
	char name[256];
	uint64_t cost_ns;       /* AOI cost of the events matching this signature */
};

struct sig_coverage {
	char kind;              /* 'w' (wait events) or 'r' (run events): coverage is per kind */
	uint64_t covered_ns;    /* AOI cost of the events matching at least one signature */
	uint64_t total_ns;      /* AOI cost of all the run's events */
	double coverage;        /* covered / total (0 when total is 0) */
	struct sig_cover *by;   /* one per signature considered, by id; caller frees */
	size_t nby;
};

/* Coverage of the signatures ids[0..n) (n == 0: all) over run's AOI events of one kind: 'w', 'r', or
 * 0 for the run's first (wait, unless it mined only run events). Returns 0, or a SIG_E* code with err
 * (unknown run: SIG_ENOTFOUND; unknown signature ids, a kind the run did not mine: SIG_EINVAL). */
int sig_coverage(PGconn *db, int64_t run, char kind, const int64_t *ids, size_t n, struct sig_coverage *out,
		 const struct budget *b, char *err, size_t errlen);

/* The triage comparison (mining.md section 7): how many streams an analyst opens
 * to reach each coverage level, under four orders. */
enum sig_order { SIG_RANDOM, SIG_GREEDY_TOTAL, SIG_GREEDY_MAX, SIG_SIGNATURE, SIG_NORDERS };

#define SIG_LEVELS 10   /* 10 %, 20 %, ... 100 % of the coverage all signatures reach */

struct sig_triage {
	char kind;                  /* 'w' or 'r', as for sig_coverage() */
	size_t nstreams;            /* streams with AOI events of that kind in the run */
	double max_coverage;        /* the coverage of all signatures */
	double level[SIG_LEVELS];   /* the coverage levels, max_coverage * (i + 1) / 10 */
	/* streams to open to reach level[i]; Random is the mean over 100 seeded shuffles */
	double needed[SIG_NORDERS][SIG_LEVELS];
};

const char *sig_order_name(enum sig_order o);
/* Over run's AOI events of one kind (as for sig_coverage()). Returns 0, or a SIG_E* code with err. Both stop
 * with SIG_EFAIL
 * when b (NULL: none) runs out. A stack is compared only with the signatures whose innermost frame it
 * holds. */
int sig_triage(PGconn *db, int64_t run, char kind, struct sig_triage *out, const struct budget *b, char *err,
	       size_t errlen);

#endif
