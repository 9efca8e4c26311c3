/*
 * attribution: which hosts, versions and label values (conf.*, kernel, region,
 * ...) a cluster's (or a problem's) streams have more of than the run's streams
 * and than the baseline's (docs/analysis.md, "Attribution"): share of its cost,
 * shares of streams, lift, and Fisher's exact test corrected for the number of
 * values tested (Benjamini-Hochberg). Computed on request from the run's
 * stored rows; the cluster's and the problem's pages lead with the first value
 * in words.
 *
 * What the cost depends on (docs/analysis.md, "What the cost depends on"): the attributed
 * streams' cost against each numeric label (unit.calls, sizes: common/costmodel.h), and whether
 * that cost has several modes.
 */
#ifndef SM_WEB_ATTRIBUTION_H
#define SM_WEB_ATTRIBUTION_H
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/costmodel.h"

/* What is attributed: one cluster, or one problem (its member clusters' events, each once). */
enum attribution_of { ATTRIBUTION_CLUSTER, ATTRIBUTION_PROBLEM };

/* "cluster" members are the attributed thing's: the cluster's or the problem's */
struct attribution_value {
	const char *key, *value;
	uint64_t run_streams, cluster_streams, baseline_streams;
	uint64_t cost_ns;              /* the cluster's cost on streams with the value */
	double cost_share;             /* of the cluster's cost */
	double cluster_share;          /* of the cluster's streams */
	double run_share;              /* of the run's streams */
	double baseline_share;         /* of the baseline's streams; NaN without a baseline */
	double lift;                   /* cluster_share / run_share */
	double lift_baseline;          /* cluster_share / baseline_share; NaN without (or +inf: none there) */
	double p, q;                   /* the cluster's streams against the run's others; q adjusted */
	double p_baseline, q_baseline; /* against the baseline's; NaN without a baseline */
};

/* The most values an attribution keeps, the most significant (the API's largest limit) */
#define ATTRIBUTION_MAX_VALUES 1000

struct attribution {
	enum attribution_of of;
	uint64_t run_streams, cluster_streams, baseline_streams, cost_ns;
	size_t tested;                 /* values tested (the correction's n) */
	size_t keys_skipped;           /* identifier-like keys (a value per stream or nearly) */
	struct attribution_value *v;   /* values the cluster has, the most significant first (at most
					* ATTRIBUTION_MAX_VALUES of them) */
	size_t n;
};

/* The attribution of cluster or problem id (which exists); everything lives in a (the request's
 * arena). Returns 0, or -1 with the reason in err. */
int attribution_compute(PGconn *db, enum attribution_of of, const char *id, struct arena *a,
			struct attribution *out, char *err, size_t errlen);

/* The attribution in one sentence: the first value's words when it stands out (adjusted
 * p under 0.05), else that nothing does. Appends to out; at->n must be above 0. */
void attribution_summary(const struct attribution *at, struct buf *out);

/* A numeric label that explains the attributed streams' cost. */
struct attribution_numeric {
	const char *key;
	struct costmodel_fit fit;
	const char *words;   /* costmodel_fit_words() */
};

struct attribution_costmodel {
	size_t streams;                  /* streams read (at most COSTMODEL_MAX_ROWS: a sample above) */
	size_t tested;                   /* numeric labels fitted */
	size_t keys_skipped;             /* numeric labels not fitted: identifiers, the unit's own duration */
	struct attribution_numeric *v;   /* the labels whose fit says something, best R^2 first */
	size_t n;
	struct costmodel_modes modes;
	const char *modes_words;         /* costmodel_modes_words(); NULL under two modes */
};

/* What the cost of cluster or problem id depends on; everything lives in a. Returns 0, or -1
 * with the reason in err. */
int attribution_costmodel(PGconn *db, enum attribution_of of, const char *id, struct arena *a,
			  struct attribution_costmodel *out, char *err, size_t errlen);

#endif
