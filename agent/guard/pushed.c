/*
 * pushed: the settings the server pushes in its answers (guard.md "Settings from
 * the server"): guarding on or off, k, the minimum wait, the report limit,
 * the sampling rate, and the fleet's profile. The shipping thread applies
 * them over what the process started with; a value out of its range (the
 * table in guardcore/settings.h, which sm-web checks with too) is ignored,
 * never clamped into something the operator did not ask for. (With the
 * host's collector, the collector reads the answers and the process takes
 * what it pushes: region.c.) Also the guard table built again when a module
 * the profile names is loaded later.
 */
#include "agent/guard/hot.h"
#include "agent/guard/region.h"
#include "agent/guard/gtab.h"
#include "agent/guard/threads.h"
#include "agent/guard/modmap.h"
#include "agent/guard/unwind.h"
#include "common/sha256.h"
#include "guardcore/settings.h"

#include <stdio.h>
#include <string.h>

/* ---- the guard table at this process's addresses ---- */

struct gtab *guard_tab_build(const struct gprofile *p, char *err, size_t errlen)
{
	struct gmodmap mm = { NULL, 0 };
	struct gtab *tab;

	if (unwind_modmap_load(&mm) < 0) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	tab = gtab_build(p, &mm, err, errlen);
	gmodmap_release(&mm);
	return tab;
}

void guard_on_dlopen(void)
{
	struct gthread *t = &guard_tls;
	struct gtab *old, *tab;
	char err[256];

	/* (a table the host's collector pushed is of another profile or k than G.profile's: kept) */
	if (G.mode != GUARD_MODE_GUARD || !G.profile || G.tab_gen_taken)
		return;
	old = atomic_load(&G.tab);
	if (!old || !old->unresolved)
		return;
	t->nest = 1;
	pthread_mutex_lock(&G.tab_mu);
	tab = guard_tab_build(G.profile, err, sizeof(err));
	if (tab && tab->unresolved < atomic_load(&G.tab)->unresolved) {
		/* the old table stays: a thread may be reading it */
		atomic_store(&G.tab, tab);
		guard_region_names(tab);
	} else {
		gtab_free(tab);
	}
	pthread_mutex_unlock(&G.tab_mu);
	t->nest = 0;
}

/* ---- settings pushed by the server ---- */

#define MAX_TAB_SWAPS 32   /* guard tables replaced for a new k; each old one is kept (threads may read it) */

/* The thresholds again with another k: the same loops and contexts, so the table is swapped whole. */
static void set_k(double k)
{
	struct gtab *tab;
	char err[256];

	if (!G.profile || k == G.profile->k)
		return;
	if (G.tab_swaps >= MAX_TAB_SWAPS) {
		guard_log("k not changed: too many changes in this process", "k=%g", k);
		return;
	}
	pthread_mutex_lock(&G.tab_mu);
	gp_set_k(G.profile, k, G.cfg.min_threshold_ns);
	tab = guard_tab_build(G.profile, err, sizeof(err));
	if (tab) {
		atomic_store(&G.tab, tab);
		guard_region_names(tab);
		G.tab_swaps++;
	}
	pthread_mutex_unlock(&G.tab_mu);
	if (tab)
		guard_log("new thresholds", "k=%g", k);
	else
		guard_log("cannot build the guard table for a new k", "k=%g error=\"%s\"", k, err);
}

/* Whether two profiles have the same loops in the same order: the thread states (a loop's index)
 * stay valid across the swap of their guard tables. */
static int same_loops(const struct gprofile *a, const struct gprofile *b)
{
	if (a->nloops != b->nloops)
		return 0;
	for (size_t i = 0; i < a->nloops; i++)
		if (gp_loop_key(a, i) != gp_loop_key(b, i))
			return 0;
	return 1;
}

void guard_profile_swap(const char *text, size_t len)
{
	unsigned char sha[SHA256_LEN];
	struct gprofile *p, *old = NULL;
	struct gtab *tab = NULL;
	char err[256];

	sha256(text, len, sha);
	if (!G.profile || memcmp(sha, G.fleet_sha, sizeof(sha)) == 0)
		return;
	if (!(p = gp_new()) || gp_load_text(p, text, len) < 0 || strcmp(p->build_id, G.build_id) != 0) {
		guard_log("the fleet's profile is not usable", "error=\"%s\"", p ? gp_error(p) : "out of memory");
		gp_free(p);
		return;
	}
	memcpy(G.fleet_sha, sha, sizeof(sha));
	if (!same_loops(G.profile, p)) {
		guard_log("the fleet's profile has other loops: the next start takes it", "units=%llu",
			  (unsigned long long)p->units);
		gp_free(p);
		return;
	}
	if (G.tab_swaps >= MAX_TAB_SWAPS) {
		guard_log("the fleet's profile not taken: too many changes in this process", "%s", "");
		gp_free(p);
		return;
	}
	pthread_mutex_lock(&G.tab_mu);
	gp_set_k(p, G.profile->k, G.cfg.min_threshold_ns);
	tab = guard_tab_build(p, err, sizeof(err));
	if (tab) {
		atomic_store(&G.tab, tab);
		guard_region_names(tab);
		old = G.profile;
		G.profile = p;
		G.tab_swaps++;
	}
	pthread_mutex_unlock(&G.tab_mu);
	if (!tab) {
		guard_log("cannot build the guard table of the fleet's profile", "error=\"%s\"", err);
		gp_free(p);
		return;
	}
	/* the guard tables hold what they need: the old profile can go (the old tables stay) */
	gp_free(old);
	guard_log("guarding with the fleet's profile", "units=%llu", (unsigned long long)p->units);
}

void guard_apply_settings(const char *answer, size_t len)
{
	double as_started[GSET_COUNT], v[GSET_COUNT];
	int muted, hz, rpm;
	int64_t min_wait;

	guard_settings_started(as_started);
	if (guard_settings_read(answer, len, as_started, v) < 0)
		return;   /* an older server: nothing pushed */
	muted = v[GSET_GUARD] == 0;
	if (atomic_exchange(&G.muted, muted) != muted)
		guard_log(muted ? "guarding off (pushed by the server)" : "guarding on again", "%s", "");
	min_wait = (int64_t)v[GSET_MIN_WAIT_US] * 1000;
	if (min_wait != G.cfg.min_wait_ns) {
		G.cfg.min_wait_ns = min_wait;   /* read by every wrapped call: one aligned store */
		guard_log("new minimum wait", "min_wait_us=%lld", (long long)(min_wait / 1000));
	}
	rpm = (int)v[GSET_REPORTS_PER_MIN];
	if (rpm != G.cfg.reports_per_min) {
		guard_budget_set(rpm);
		guard_log("new report limit", "reports_per_min=%d", rpm);
	}
	hz = (int)v[GSET_SAMPLE_HZ];
	if (G.cfg0.sample_hz > 0 && hz != G.cfg.sample_hz) {
		/* timers armed from now on take it */
		G.cfg.sample_hz = hz;
		G.period_ns = 1000000000LL / hz;
		guard_log("new sampling rate", "sample_hz=%d", hz);
	}
	if (G.mode == GUARD_MODE_GUARD)
		set_k(v[GSET_K]);
}

void guard_settings_started(double out[])
{
	out[GSET_GUARD] = 1;
	out[GSET_K] = G.k0;
	out[GSET_SAMPLE_HZ] = G.cfg0.sample_hz;
	out[GSET_MIN_WAIT_US] = (double)(G.cfg0.min_wait_ns / 1000);
	out[GSET_REPORTS_PER_MIN] = G.cfg0.reports_per_min;
}
