/*
 * cgroup: the CPU limit over a process and the throttled time it causes; see cgroup.h.
 */
#include "agent/guard/cgroup.h"
#include "agent/guard/watch.h"

#include <stdio.h>   /* snprintf only */
#include <string.h>

/* The cgroup's throttled time so far, in ns, or -1. */
static int64_t throttled_now(const struct gcgroup *cg, gcgroup_read_fn *read)
{
	char b[1024];
	const char *key = cg->v1 ? "throttled_time " : "throttled_usec ", *p;
	int64_t v;

	if (!atomic_load_explicit(&cg->ok, memory_order_acquire) || read(cg->stat, b, sizeof(b), 0) <= 0)
		return -1;
	for (p = b; (p = strstr(p, key)); p++)
		if (p == b || p[-1] == '\n') {
			v = gwatch_decimal(p + strlen(key));
			return v < 0 || cg->v1 ? v : (v > INT64_MAX / 1000 ? INT64_MAX : v * 1000);
		}
	return -1;
}

/* ---- finding the cgroup ---- */

/* The limit of the cgroup directory dir in CPUs (quota / period) into out, or 0 when it has none. */
static int limit_of(const char *dir, int v1, gcgroup_read_fn *read, char *out, size_t outlen)
{
	char path[1300], b[128];
	int64_t quota, period;

	if (v1) {
		snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir);
		if (read(path, b, sizeof(b), 0) <= 0 || (quota = gwatch_decimal(b)) <= 0)
			return 0;   /* -1: none */
		snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
		if (read(path, b, sizeof(b), 0) <= 0 || (period = gwatch_decimal(b)) <= 0)
			return 0;
	} else {
		const char *sp;

		snprintf(path, sizeof(path), "%s/cpu.max", dir);
		if (read(path, b, sizeof(b), 0) <= 0 || (quota = gwatch_decimal(b)) <= 0 || !(sp = strchr(b, ' ')) ||
		    (period = gwatch_decimal(sp + 1)) <= 0)
			return 0;   /* "max 100000": none */
	}
	snprintf(out, outlen, "%.3g", (double)quota / (double)period);
	return 1;
}

/* Splits line (in place) at spaces into at most max fields; their number. */
static int fields_of(char *line, char **f, int max)
{
	int n = 0;
	char *save = NULL;

	for (char *t = strtok_r(line, " ", &save); t && n < max; t = strtok_r(NULL, " ", &save))
		f[n++] = t;
	return n;
}

/* Whether the comma-separated list has word. */
static int has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);

	for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, word, wl) == 0 && (p[wl] == ',' || p[wl] == '\0'))
			return 1;
	return 0;
}

/* Mount point and root of the cgroup hierarchy (v2, or v1's with the cpu controller), as the reader
 * sees them. */
static int mount_of(int v1, gcgroup_read_fn *read, char *text, size_t cap, char *mnt, size_t mntlen, char *root,
		    size_t rootlen)
{
	char *save = NULL;

	if (read("/proc/self/mountinfo", text, cap, 1) <= 0)
		return 0;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[64];
		int n = fields_of(line, f, 64), dash;

		/* id parent dev root mountpoint options [optional...] - fstype source superoptions */
		for (dash = 6; dash < n && strcmp(f[dash], "-") != 0; dash++)
			;
		if (n < 5 || dash + 3 >= n)
			continue;
		if (strcmp(f[dash + 1], v1 ? "cgroup" : "cgroup2") != 0 || (v1 && !has_word(f[dash + 3], "cpu")))
			continue;
		snprintf(mnt, mntlen, "%s", f[4]);
		snprintf(root, rootlen, "%s", f[3]);
		return 1;
	}
	return 0;
}

/* Whether the process's cgroup of this kind (at cgpath in the hierarchy) has, or an ancestor has, a
 * CPU limit: cg's paths set. */
static int find_limited(struct gcgroup *cg, int v1, const char *cgpath, gcgroup_read_fn *read, char *text,
			size_t cap)
{
	char mnt[512], root[512], dir[1200];
	const char *rel = cgpath;
	size_t rl;

	if (strstr(cgpath, "/..") || !mount_of(v1, read, text, cap, mnt, sizeof(mnt), root, sizeof(root)))
		return 0;
	rl = strlen(root);
	if (strcmp(root, "/") != 0 && strncmp(cgpath, root, rl) == 0)
		rel = cgpath + rl;   /* a namespaced mount shows the cgroup from its own root */
	snprintf(dir, sizeof(dir), "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel);
	/* the nearest cgroup with a limit, up to the mount: the one that throttles */
	for (;;) {
		char *slash;

		if (limit_of(dir, v1, read, cg->limit, sizeof(cg->limit))) {
			if ((size_t)snprintf(cg->stat, sizeof(cg->stat), "%s/cpu.stat", dir) >= sizeof(cg->stat))
				return 0;
			cg->v1 = v1;
			return 1;
		}
		if (strlen(dir) <= strlen(mnt) || !(slash = strrchr(dir, '/')))
			return 0;
		*slash = '\0';
	}
}

int gcgroup_find(struct gcgroup *cg, const char *proc, gcgroup_read_fn *read, char *text, size_t cap)
{
	char path[64], v2[600] = "", v1[600] = "", *save = NULL;

	if (atomic_load_explicit(&cg->ok, memory_order_acquire))
		return 1;
	snprintf(path, sizeof(path), "%s/cgroup", proc);
	if (read(path, text, cap, 1) <= 0)
		return 0;
	/* ID:CONTROLLERS:PATH; v2's is 0::PATH */
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (!c2)
			continue;
		*c2 = '\0';
		if (strncmp(line, "0:", 2) == 0 && c1[1] == '\0')
			snprintf(v2, sizeof(v2), "%s", c2 + 1);
		else if (has_word(c1 + 1, "cpu"))
			snprintf(v1, sizeof(v1), "%s", c2 + 1);
	}
	/* a hybrid host binds the cpu controller to v1; v2's cpu.max then does not exist */
	if ((v2[0] && find_limited(cg, 0, v2, read, text, cap)) || (v1[0] && find_limited(cg, 1, v1, read, text, cap))) {
		atomic_store_explicit(&cg->ok, 1, memory_order_release);
		return 1;
	}
	return 0;
}

/* ---- the history ---- */

int gcgroup_sample(struct gcgroup *cg, int64_t now, gcgroup_read_fn *read)
{
	int64_t v;
	uint32_t k;

	if (!atomic_load_explicit(&cg->ok, memory_order_relaxed) ||
	    atomic_exchange_explicit(&cg->writing, 1, memory_order_acquire))
		return 0;
	if ((v = throttled_now(cg, read)) >= 0) {
		k = atomic_load_explicit(&cg->n, memory_order_relaxed);
		atomic_store_explicit(&cg->at[k % GCGROUP_HIST], now, memory_order_relaxed);
		atomic_store_explicit(&cg->val[k % GCGROUP_HIST], v, memory_order_relaxed);
		atomic_store_explicit(&cg->n, k + 1, memory_order_release);
	}
	atomic_store_explicit(&cg->writing, 0, memory_order_release);
	return 1;
}

/* The throttled time at t: interpolated between the history's samples around t, the latest one
 * before t when none is after it (a unit shorter than a tick); -1 when the history starts after t. */
static int64_t throttled_at(const struct gcgroup *cg, int64_t t)
{
	uint32_t k = atomic_load_explicit(&cg->n, memory_order_acquire);
	int64_t next_at = 0, next_val = 0;

	for (uint32_t j = 0; j < k && j < GCGROUP_HIST; j++) {
		uint32_t i = (k - 1 - j) % GCGROUP_HIST;
		int64_t at = atomic_load_explicit(&cg->at[i], memory_order_relaxed);
		int64_t val = atomic_load_explicit(&cg->val[i], memory_order_relaxed);

		if (at <= t) {
			if (next_at > at && next_val >= val)
				val += (int64_t)((double)(next_val - val) * (double)(t - at) / (double)(next_at - at));
			return val;
		}
		next_at = at;
		next_val = val;
	}
	return -1;
}

void gcgroup_unit(const struct gcgroup *cg, struct gviol *v, gcgroup_read_fn *read)
{
	int64_t len, thr, before;

	v->thr_known = 0;
	/* (a unit the collector read from another process's slot: its start is that process's word) */
	if (__builtin_sub_overflow(v->end, v->start, &len) || len < 0 ||
	    !atomic_load_explicit(&cg->ok, memory_order_acquire) || (thr = throttled_now(cg, read)) < 0)
		return;
	before = throttled_at(cg, v->start);
	/* summed over the CPUs by the kernel: never more than the unit's length */
	if (before >= 0 && before <= thr) {
		v->throttled_ns = gwatch_clamp(thr - before, len);
		v->thr_known = 1;
	}
	/* nor is it more than the unit's duration, which leaves the agent's own time out */
	if (v->thr_known && v->dur > 0 && v->dur < len)
		v->throttled_ns = gwatch_clamp(v->throttled_ns, v->dur);
}

void gcgroup_forget(struct gcgroup *cg)
{
	atomic_store(&cg->n, 0);
	atomic_store(&cg->writing, 0);
}
