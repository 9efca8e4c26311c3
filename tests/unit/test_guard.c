/*
 * Unit tests of the guard agent's pure parts: settings (guardcore/config.c) and
 * the ones the server pushes (guardcore/settings.c), profiles (statistics,
 * PerfGuard's distances, clustering, work-aware thresholds, the JSON form,
 * merging, loop keys), what training learns and its saves by differences
 * (learnt.c), the guard table and its image, the event ring, the
 * module map and the symbolizer run on this very process, the host's steal time
 * and the streams built from units.
 */
#include "guardcore/config.h"
#include "guardcore/settings.h"
#include "agent/guard/gtab.h"
#include "agent/guard/learnt.h"
#include "agent/guard/modmap.h"
#include "guardcore/profile.h"
#include "agent/guard/ring.h"
#include "agent/guard/steal.h"
#include "agent/guard/stream.h"
#include "common/arena.h"
#include "agent/guard/symbolize.h"
#include "agent/guard/watch.h"
#include "tests/unit/check.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- settings ---- */

static const char *const *fake_env;

static const char *fake_get(const char *name)
{
	for (const char *const *e = fake_env; e && *e; e += 2)
		if (strcmp(e[0], name) == 0)
			return e[1];
	return NULL;
}

static int load(const char *const *env, struct guard_config *c, char *err, size_t errlen)
{
	fake_env = env;
	guard_config_defaults(c);
	return guard_config_load(c, fake_get, err, errlen);
}

static void test_config_defaults(void)
{
	static const char *const env[] = { NULL };
	struct guard_config c;
	char err[256];

	CHECK_INT(load(env, &c, err, sizeof(err)), 0);
	CHECK_INT(c.mode, GUARD_MODE_AUTO);
	CHECK_STR(c.profile_dir, "/var/lib/stackmine/profiles");
	CHECK(c.k < 0);
	CHECK_INT(c.min_wait_ns, 1000000);
	CHECK_INT(c.min_threshold_ns, 1000000);
	CHECK_INT(c.sample_hz, 100);
	CHECK_INT(c.signal, SIGRTMAX - 7);
	CHECK_INT(c.reports_per_min, 6);
}

static void test_config_values(void)
{
	static const char *const env[] = {
		"SM_GUARD_MODE", "guard", "SM_GUARD_K", "2.5", "SM_GUARD_RING_KB", "64",
		"SM_GUARD_LABELS", "region=eu\\,west,conf.x=a\\\\b,k=v", "SM_GUARD_SIGNAL", "SIGRTMIN+3",
		"SM_GUARD_MIN_WAIT_US", "250", "SM_GUARD_URL", "https://ingest:8443", NULL
	};
	struct guard_config c;
	char err[256];

	CHECK_INT(load(env, &c, err, sizeof(err)), 0);
	CHECK_INT(c.mode, GUARD_MODE_GUARD);
	CHECK(c.k == 2.5);
	CHECK_INT(c.ring_bytes, 64 << 10);
	CHECK_INT(c.min_wait_ns, 250000);
	CHECK_INT(c.signal, SIGRTMIN + 3);
	CHECK_INT(c.nlabels, 3);
	CHECK_STR(c.labels[0].key, "region");
	CHECK_STR(c.labels[0].value, "eu,west");
	CHECK_STR(c.labels[1].key, "conf.x");
	CHECK_STR(c.labels[1].value, "a\\b");
	CHECK_STR(c.labels[2].value, "v");
}

static void test_config_errors(void)
{
	static const struct {
		const char *name, *value, *msg;
	} bad[] = {
		{ "SM_GUARD_MODE", "watch", "SM_GUARD_MODE: not one of auto, train, guard, off: 'watch'" },
		{ "SM_GUARD_K", "-1", "SM_GUARD_K: not a number from 0 to 1000: '-1'" },
		{ "SM_GUARD_CUT", "1.5", "SM_GUARD_CUT: not a number from 0 to 1: '1.5'" },
		{ "SM_GUARD_PROFILE_DIR", "rel/dir", "SM_GUARD_PROFILE_DIR: not an absolute path: 'rel/dir'" },
		{ "SM_GUARD_SAMPLE_HZ", "20000", "SM_GUARD_SAMPLE_HZ: not a whole number from 0 to 10000: '20000'" },
		{ "SM_GUARD_SIGNAL", "SIGSEGV", "SM_GUARD_SIGNAL: not a real-time signal (a number, SIGRTMIN+N or "
					       "SIGRTMAX-N): 'SIGSEGV'" },
		{ "SM_GUARD_SIGNAL", "9", "SM_GUARD_SIGNAL: not a real-time signal (a number, SIGRTMIN+N or "
					  "SIGRTMAX-N): '9'" },
		{ "SM_GUARD_LABELS", "a=1,b", "SM_GUARD_LABELS: each label is KEY=VALUE with a non-empty KEY: 'a=1,b'" },
		{ "SM_GUARD_LABELS", "a=", "SM_GUARD_LABELS: empty value for a label: 'a'" },
		{ "SM_GUARD_SPOOL_MAX", "10k", "SM_GUARD_SPOOL_MAX: not a size of at least 1M: '10k'" },
		{ "SM_GUARD_APP", "a\tb", "SM_GUARD_APP: holds a control character: 'a\tb'" },
		{ "SM_GUARD_URL", "ingest:8080", "SM_GUARD_URL: not an http:// or https:// URL (or a list of them): 'ingest:8080'" },
		{ "SM_GUARD_URL", "http://a:1,ingest:8080",
		  "SM_GUARD_URL: not an http:// or https:// URL (or a list of them): 'http://a:1,ingest:8080'" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *env[] = { bad[i].name, bad[i].value, NULL };
		struct guard_config c;
		char err[256] = "";

		CHECK_INT(load(env, &c, err, sizeof(err)), -1);
		CHECK_STR(err, bad[i].msg);
	}
	/* 46 labels, not 47: the agent's own 18 fill a stream's 64 */
	{
		char many[1024] = "";
		const char *env[] = { "SM_GUARD_LABELS", many, NULL };
		struct guard_config c;
		char err[256] = "";
		size_t n = 0;

		for (int i = 0; i < 46; i++)
			n += (size_t)snprintf(many + n, sizeof(many) - n, "%sk%d=v", i ? "," : "", i);
		CHECK_INT(load(env, &c, err, sizeof(err)), 0);
		CHECK_INT(c.nlabels, 46);
		snprintf(many + n, sizeof(many) - n, ",k46=v");
		CHECK_INT(load(env, &c, err, sizeof(err)), -1);
		CHECK(strncmp(err, "SM_GUARD_LABELS: more than 46 labels: 'k0=v,k1=v,",
			      strlen("SM_GUARD_LABELS: more than 46 labels: 'k0=v,k1=v,")) == 0);
	}
}

static void test_config_only(void)
{
	CHECK(guard_config_only_matches("", "anything"));
	CHECK(guard_config_only_matches("postgres,nginx", "nginx"));
	CHECK(guard_config_only_matches("redis-*", "redis-server"));
	CHECK(!guard_config_only_matches("postgres", "postgres-ish"));
	CHECK(!guard_config_only_matches("postgres,nginx", "sh"));
}

/* ---- statistics and distances ---- */

static void test_stats_pool(void)
{
	struct gp_stats all = { 0, 0, 0 }, a = { 0, 0, 0 }, b = { 0, 0, 0 }, empty = { 0, 0, 0 };
	double sum = 0, sq = 0;

	for (int i = 0; i < 1000; i++) {
		double x = 1000 + (i * 7919 % 1013) * 3.5;

		gp_stats_add(&all, x);
		gp_stats_add(i % 3 ? &a : &b, x);
		sum += x;
	}
	for (int i = 0; i < 1000; i++) {
		double x = 1000 + (i * 7919 % 1013) * 3.5;

		sq += (x - sum / 1000) * (x - sum / 1000);
	}
	gp_stats_merge(&a, &b);
	gp_stats_merge(&a, &empty);
	CHECK_INT(a.n, 1000);
	CHECK(fabs(a.mean - sum / 1000) < 1e-9 * a.mean);
	CHECK(fabs(a.m2 - sq) < 1e-9 * sq);
	CHECK(fabs(gp_stats_sd(&a) - sqrt(sq / 999)) < 1e-9);
	CHECK(fabs(all.m2 - a.m2) < 1e-9 * sq);
	CHECK(gp_stats_sd(&empty) == 0);
}

static void test_path_distance(void)
{
	static const uint32_t abc[] = { 1, 2, 3 }, ac[] = { 1, 3 }, x[] = { 9 }, acb[] = { 1, 3, 2 };

	CHECK(gp_path_distance(abc, 3, abc, 3) == 0);
	CHECK(fabs(gp_path_distance(abc, 3, ac, 2) - 1.0 / 3) < 1e-12);
	CHECK(fabs(gp_path_distance(abc, 3, acb, 3) - 1.0 / 3) < 1e-12);
	CHECK(gp_path_distance(abc, 3, x, 1) == 1);
	CHECK(gp_path_distance(abc, 0, x, 0) == 0);
	CHECK(gp_path_distance(abc, 3, x, 0) == 1);
}

/* ---- a profile built by hand ---- */

/* Stats of n units of about mean ns, spread sd, in size bucket b. */
static void sized(struct gp_stats *size, unsigned b, uint64_t n, double mean, double sd)
{
	memset(size, 0, GP_BUCKETS * sizeof(*size));
	for (uint64_t i = 0; i < n; i++)
		gp_stats_add(&size[b], mean + (i % 2 ? sd : -sd));
}

static struct gprofile *sample_profile(void)
{
	struct gprofile *p = gp_new();
	struct gp_site site = { 0, 0x1000, 400, "epoll_wait" };
	struct gp_stats size[GP_BUCKETS];
	uint32_t f[8], pa[4], pb[4], pc[4];
	int64_t m, l, c0, c1, c2;

	m = gp_add_module(p, "srv", "abcd");
	CHECK_INT(m, 0);
	for (int i = 0; i < 8; i++) {
		char name[32];

		snprintf(name, sizeof(name), "srv!f%d", i);
		f[i] = (uint32_t)gp_add_frame(p, name);
	}
	snprintf(p->build_id, sizeof(p->build_id), "abcd");
	l = gp_add_loop(p, &site, "srv!loop");
	/* two request kinds sharing the loop's frames, and one with a path of its own */
	pa[0] = f[0], pa[1] = f[1], pa[2] = f[2], pa[3] = f[3];
	pb[0] = f[0], pb[1] = f[1], pb[2] = f[2], pb[3] = f[4];
	pc[0] = f[0], pc[1] = f[5], pc[2] = f[6], pc[3] = f[7];
	site.offset = 0x2000, site.depth = 32, snprintf(site.call, sizeof(site.call), "read");
	c0 = gp_add_context(p, (uint32_t)l, &site, pa, 4);
	site.offset = 0x2100, snprintf(site.call, sizeof(site.call), "write");
	c1 = gp_add_context(p, (uint32_t)l, &site, pb, 4);
	site.offset = 0x3000, site.depth = 96, snprintf(site.call, sizeof(site.call), "pread64");
	c2 = gp_add_context(p, (uint32_t)l, &site, pc, 4);
	CHECK(c0 == 0 && c1 == 1 && c2 == 2);
	{
		uint32_t ab[] = { 0, 1 }, ba[] = { 1, 0, 1 }, cc[] = { 2 };

		sized(size, 1, 1000, 10000, 1000);
		gp_add_class(p, (uint32_t)l, ab, 2, size);
		sized(size, 3, 200, 50000, 5000);
		gp_add_class(p, (uint32_t)l, ba, 3, size);   /* the same set: pooled */
		sized(size, 1, 50, 200000, 10000);
		gp_add_class(p, (uint32_t)l, cc, 1, size);
	}
	p->loops[l].threads = 2;
	for (size_t i = 0; i < p->loops[l].nclasses; i++)
		gp_stats_merge(&p->loops[l].all, &p->loops[l].classes[i].st);
	p->units = p->loops[l].all.n;
	CHECK_INT(gp_cluster(p, 0), 0);
	return p;
}

static void test_profile_cluster(void)
{
	struct gprofile *p = sample_profile();
	struct gp_loop *l = &p->loops[0];
	const struct gp_type *big, *small;
	double thr;

	CHECK_INT(l->nclasses, 2);
	CHECK_INT(l->classes[0].st.n, 1200);
	CHECK_INT(l->ntypes, 2);
	big = &l->types[0];
	small = &l->types[1];
	CHECK_STR(big->name, "u0");
	CHECK_INT(big->st.n, 1200);
	CHECK_INT(big->nctx, 2);
	CHECK_INT(small->st.n, 50);
	/* mean + 4 sd of the pooled units */
	thr = big->st.mean + 4 * gp_stats_sd(&big->st);
	CHECK(fabs(big->threshold_ns - thr) < 1e-6);
	/* by size: 2-3 calls from their own units, 8-15 from theirs, never lower after */
	CHECK(fabs(big->size_thr[1] - (big->size[1].mean + 4 * gp_stats_sd(&big->size[1]))) < 1e-6);
	CHECK(fabs(big->size_thr[3] - (big->size[3].mean + 4 * gp_stats_sd(&big->size[3]))) < 1e-6);
	CHECK(big->size_thr[2] == big->size_thr[1]);
	CHECK(big->size_thr[15] == big->size_thr[3]);
	CHECK(big->size_thr[0] == big->threshold_ns);
	/* 50 units: too few for its own spread; at least the loop's threshold */
	CHECK(small->threshold_ns >= l->threshold_ns);
	CHECK(fabs(l->threshold_ns - (l->all.mean + 4 * gp_stats_sd(&l->all))) < 1e-6);
	/* a floor, and another k */
	gp_set_k(p, 1, 5000000);
	CHECK(big->threshold_ns == 5000000);
	CHECK(p->k == 1);
	gp_free(p);
}

static void test_profile_json(void)
{
	struct gprofile *p = sample_profile(), *q = gp_new();
	struct buf a = BUF_INIT(0), b = BUF_INIT(0);

	p->updated_s = 1700000000;
	p->exe = strdup("/usr/sbin/srv");
	CHECK_INT(gp_write(p, &a), 0);
	CHECK_INT(gp_load_text(q, a.data, a.len), 0);
	CHECK_INT(gp_write(q, &b), 0);
	CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
	CHECK_INT(q->loops[0].ntypes, 2);
	CHECK(q->loops[0].types[0].size_thr[3] == round(p->loops[0].types[0].size_thr[3]));
	buf_release(&a);
	buf_release(&b);
	gp_free(p);
	gp_free(q);
}

static void test_profile_load_errors(void)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{ "[]", "not a JSON object" },
		{ "{\"format\":\"x\"}", "format: 'x', expected 'stackmine-guard-profile'" },
		{ "{\"format\":\"stackmine-guard-profile\",\"v\":2}", "v: version 2, this agent reads version 1" },
		{ "{\"format\":\"stackmine-guard-profile\",\"v\":1,\"build_id\":\"ab\",\"exe\":\"\",\"k\":4,\"cut\":0.5,"
		  "\"units\":1,\"modules\":[],\"frames\":[],\"loops\":[{\"site\":{\"module\":0}}]}",
		  "loops[0].site: module: out of range" },
		{ "{\"format\":\"stackmine-guard-profile\",\"v\":1,\"build_id\":\"ab\",\"exe\":\"\",\"k\":4,\"cut\":0.5,"
		  "\"units\":1,\"modules\":[{\"name\":\"m\",\"build_id\":\"\"}],\"frames\":[\"m!f\"],\"loops\":[{\"site\":"
		  "{\"module\":0,\"offset\":\"0x10\",\"depth\":8,\"call\":\"read\"},\"symbol\":null,\"threads\":1,"
		  "\"units\":{\"n\":1,\"mean_ns\":5,\"m2\":0},\"threshold_ns\":5,\"contexts\":[{\"module\":0,\"offset\":"
		  "\"0x20\",\"depth\":4,\"call\":\"read\",\"path\":[0,3]}],\"classes\":[],\"types\":[]}]}",
		  "loops[0].contexts[0]: path[1]: not an index below 1" },
		{ "{\"format\":\"stackmine-guard-profile\",\"v\":1,\"build_id\":\"ab\",\"exe\":\"\",\"k\":-4,\"cut\":0.5,"
		  "\"units\":1,\"modules\":[],\"frames\":[],\"loops\":[]}",
		  "k must be >= 0 and cut from 0 to 1" },
		{ "{\"format\":\"stackmine-guard-profile\"", "not JSON: unexpected end of data at byte 35" },
		/* bytes that are not UTF-8 (found by fuzz_profile: written as U+FFFD, three bytes each, the
		 * module's build id no longer loaded) */
		{ "{\"format\":\"stackmine-guard-profile\",\"v\":1,\"build_id\":\"ab\",\"exe\":\"\",\"k\":4,\"cut\":0.5,"
		  "\"units\":1,\"modules\":[{\"name\":\"m\",\"build_id\":\"ab\xff\xff" "cd\"}],\"frames\":[],\"loops\":[]}",
		  "modules[0]: build_id: not UTF-8" },
		{ "{\"format\":\"stackmine-guard-profile\",\"v\":1,\"build_id\":\"ab\",\"exe\":\"\",\"k\":4,\"cut\":0.5,"
		  "\"units\":1,\"modules\":[],\"frames\":[\"m!f\",\"m!\xc3(\"],\"loops\":[]}",
		  "frames[1]: not a UTF-8 string of at most 4096 bytes" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct gprofile *p = gp_new();

		CHECK_INT(gp_load_text(p, bad[i].text, strlen(bad[i].text)), -1);
		CHECK_STR(gp_error(p), bad[i].msg);
		gp_free(p);
	}
}

static void test_profile_merge(void)
{
	struct gprofile *a = sample_profile(), *b = sample_profile(), *m = gp_new(), *other = gp_new();
	struct gp_stats both = a->loops[0].all;

	gp_stats_merge(&both, &b->loops[0].all);
	CHECK_INT(gp_merge(m, a), 0);
	CHECK_INT(gp_merge(m, b), 0);
	CHECK_INT(gp_cluster(m, 0), 0);
	CHECK_INT(m->nloops, 1);
	CHECK_INT(m->loops[0].nclasses, 2);
	CHECK_INT(m->loops[0].all.n, both.n);
	CHECK(fabs(m->loops[0].all.m2 - both.m2) < 1e-6 * both.m2);
	CHECK_INT(m->loops[0].types[0].st.n, 2400);
	CHECK_INT(m->units, a->units + b->units);
	snprintf(other->build_id, sizeof(other->build_id), "ffff");
	CHECK_INT(gp_merge(other, a), -1);
	CHECK_STR(gp_error(other), "profiles of different builds (ffff and abcd) cannot be merged");
	gp_free(a);
	gp_free(b);
	gp_free(m);
	gp_free(other);
}

/* Deferred requests per loop (guard.md "Deferred requests"): learnt, written, read back, merged exactly;
 * a profile written before them loads with its loop's threshold for them. */
static void test_profile_async(void)
{
	struct gprofile *p = sample_profile(), *q = gp_new(), *m = gp_new(), *old = gp_new();
	struct buf a = BUF_INIT(0);
	struct gp_stats few = { 0, 0, 0 };
	const char *text;

	for (int i = 0; i < 200; i++)
		gp_stats_add(&p->loops[0].async, 2000000.0 + (i % 2 ? 100000.0 : -100000.0));
	gp_set_k(p, 4, 1000000);
	/* 200 requests of 2 ms +- 0.1 ms: mean + 4 sd, over the 1 ms floor */
	CHECK(fabs(p->loops[0].async_thr_ns - (2000000.0 + 4 * gp_stats_sd(&p->loops[0].async))) < 1);
	CHECK_INT(gp_write(p, &a), 0);
	CHECK_INT(gp_load_text(q, a.data, a.len), 0);
	CHECK_INT(q->loops[0].async.n, 200);
	CHECK(q->loops[0].async_thr_ns == round(p->loops[0].async_thr_ns));
	CHECK_INT(gp_merge(m, p), 0);
	CHECK_INT(gp_merge(m, q), 0);
	CHECK_INT(m->loops[0].async.n, 400);
	/* fewer than 100: no tighter than the loop's units */
	for (int i = 0; i < 10; i++)
		gp_stats_add(&few, 10.0);
	p->loops[0].async = few;
	gp_set_k(p, 4, 0);
	CHECK(p->loops[0].async_thr_ns == p->loops[0].threshold_ns);
	text = "{\"format\":\"stackmine-guard-profile\",\"v\":1,\"build_id\":\"ab\",\"exe\":\"\",\"k\":4,\"cut\":0.5,"
	       "\"units\":1,\"modules\":[{\"name\":\"m\",\"build_id\":\"\"}],\"frames\":[],\"loops\":[{\"site\":"
	       "{\"module\":0,\"offset\":\"0x10\",\"depth\":8,\"call\":\"epoll_wait\"},\"symbol\":null,\"threads\":1,"
	       "\"units\":{\"n\":1,\"mean_ns\":5,\"m2\":0},\"threshold_ns\":5000,\"contexts\":[],\"classes\":[],"
	       "\"types\":[]}]}";
	CHECK_INT(gp_load_text(old, text, strlen(text)), 0);
	CHECK_INT(old->loops[0].async.n, 0);
	CHECK(old->loops[0].async_thr_ns == 5000);
	buf_release(&a);
	gp_free(p);
	gp_free(q);
	gp_free(m);
	gp_free(old);
}

/* ---- the ring ---- */

static void put(struct gring *r, int64_t ts, uint32_t frames)
{
	struct grec *rec = gring_begin(r, frames);

	CHECK(rec != NULL);
	if (!rec)
		return;
	rec->kind = GREC_RUN;
	rec->ts = ts;
	rec->dur = 10;
	for (uint32_t i = 0; i < frames; i++)
		rec->ip[i] = (uint64_t)ts * 100 + i;
	gring_commit(r, rec, frames);
}

static void test_ring(void)
{
	struct gring r;
	unsigned char *snap;
	size_t len, off = 0;
	const struct grec *rec;
	int64_t first = -1, last = -1, n = 0, ok = 1;

	memset(&r, 0, sizeof(r));
	CHECK_INT(gring_init(&r, 4096), 0);
	CHECK_INT(r.size, 4096);
	snap = malloc(r.size);
	/* 200 records of 40 + 8 * (1 + i % 7) bytes: several times round the buffer */
	for (int64_t i = 0; i < 200; i++)
		put(&r, i, (uint32_t)(1 + i % 7));
	len = gring_snapshot(&r, snap, r.size);
	CHECK(len > 0 && len <= 4096);
	while ((rec = gring_next(snap, len, &off))) {
		if (first < 0)
			first = rec->ts;
		if (last >= 0 && rec->ts != last + 1)
			ok = 0;
		if (rec->nframes != 1 + rec->ts % 7 || rec->ip[rec->nframes - 1] != (uint64_t)rec->ts * 100 + rec->nframes - 1)
			ok = 0;
		last = rec->ts;
		n++;
	}
	CHECK(ok);
	CHECK_INT(last, 199);
	CHECK(first > 0 && n == 200 - first);
	/* a write in progress (a handler interrupting its owner): the second writer gives up */
	rec = gring_begin(&r, 2);
	CHECK(rec != NULL);
	CHECK(gring_begin(&r, 2) == NULL);
	CHECK_INT(atomic_load(&r.drops), 1);
	gring_abort(&r);
	/* a record bigger than half the ring is refused, not written */
	CHECK(gring_begin(&r, 300) == NULL);
	gring_reset(&r);
	CHECK_INT(gring_snapshot(&r, snap, r.size), 0);
	free(snap);
	gring_release(&r);
}

/* ---- this process: its modules and its symbols ---- */

__attribute__((noinline)) static int known_static_function(int x)
{
	return x * 3 + 1;
}

static void test_symbolize(void)
{
	struct gmodmap mm = { NULL, 0 };
	const struct gmod *g;
	struct gsym *s;
	char err[256], name[1100];

	CHECK_INT(gmodmap_load(&mm), 0);
	g = gmodmap_main(&mm);
	CHECK(g != NULL);
	if (!g)
		return;
	CHECK_STR(g->name, "test_guard");
	CHECK(strlen(g->build_id) >= 16);
	CHECK(gmodmap_find(&mm, (uintptr_t)known_static_function) == g);
	s = gsym_open(&mm, err, sizeof(err));
	CHECK(s != NULL);
	if (!s) {
		gmodmap_release(&mm);
		return;
	}
	gsym_frame(s, (uintptr_t)known_static_function + 1, name, sizeof(name));
	CHECK_STR(name, "test_guard!known_static_function");
	gsym_frame(s, (uintptr_t)memcpy + 1, name, sizeof(name));
	CHECK(strstr(name, "libc.so.6!") == name || strstr(name, "libasan") != NULL);
	gsym_frame(s, 16, name, sizeof(name));
	CHECK_STR(name, "[unknown]+0x10");
	CHECK(known_static_function(1) == 4);
	gsym_free(s);
	gmodmap_release(&mm);
}

/* The settings in a server's answer: each within its limits, else as started. */
static void test_settings_read(void)
{
	double started[GSET_COUNT] = { 1, 4, 100, 1000, 6 }, v[GSET_COUNT];
	const char *a;

	CHECK_INT(guard_settings_read("{\"ok\":true}", 11, started, v), -1);
	CHECK_INT(guard_settings_read("not json", 8, started, v), -1);
	a = "{\"ok\":true,\"settings\":{\"guard\":false,\"k\":7.5,\"sample_hz\":0,\"min_wait_us\":2.5,"
	    "\"reports_per_min\":\"9\"}}";
	CHECK_INT(guard_settings_read(a, strlen(a), started, v), 0);
	CHECK(v[GSET_GUARD] == 0);
	CHECK(v[GSET_K] == 7.5);
	CHECK(v[GSET_SAMPLE_HZ] == 100);        /* below its minimum: as started */
	CHECK(v[GSET_MIN_WAIT_US] == 1000);     /* not a whole number */
	CHECK(v[GSET_REPORTS_PER_MIN] == 6);    /* a string */
	a = "{\"settings\":{\"guard\":1,\"k\":1e9,\"reports_per_min\":0}}";
	CHECK_INT(guard_settings_read(a, strlen(a), started, v), 0);
	CHECK(v[GSET_GUARD] == 1);              /* only a boolean false turns it off */
	CHECK(v[GSET_K] == 4);
	CHECK(v[GSET_REPORTS_PER_MIN] == 0);
}

/* The table at a process's addresses, and its flat image (what the collector pushes) read back. */
static void test_gtab_image(void)
{
	struct gprofile *p = sample_profile(), *q = sample_profile();
	struct gmod mod = { .name = "srv", .build_id = "abcd", .bias = 0x400000, .lo = 0x400000, .hi = 0x500000 };
	struct gmodmap mm = { &mod, 1 };
	struct gtab *tab, *back;
	unsigned char *img;
	void *mem;
	size_t n;
	char err[256];

	CHECK(gp_loop_key(p, 0) == gp_loop_key(q, 0));
	q->loops[0].site.depth++;
	CHECK(gp_loop_key(p, 0) != gp_loop_key(q, 0));
	tab = gtab_build(p, &mm, err, sizeof(err));
	CHECK(tab != NULL);
	CHECK_INT(tab->unresolved, 0);
	CHECK(tab->sites[0].ret == 0x401000);
	CHECK(gtab_find(tab, 0, 0x402000, 32) != 0);
	n = gtab_image_bytes(tab);
	img = malloc(n);
	CHECK_INT(gtab_image_write(tab, img, n - 1), -1);
	CHECK_INT(gtab_image_write(tab, img, n), 0);
	CHECK(gtab_image_need(img, n) == n);
	mem = malloc(n);
	back = gtab_image_place(img, n, mem, n);
	CHECK(back != NULL && back->ctx != tab->ctx && (void *)back->ctx == (void *)(back + 1));
	CHECK(back && gtab_find(back, 0, 0x402000, 32) == gtab_find(tab, 0, 0x402000, 32));
	CHECK(back && back->loops[0].threshold == tab->loops[0].threshold);
	CHECK(gtab_image_place(img, n, mem, n - 1) == NULL);   /* no room */
	/* an image a wrapper could not trust is refused */
	CHECK(gtab_image_need(img, n - 1) == 0);
	((struct gtab *)(void *)img)->ctx_mask = 100;
	CHECK(gtab_image_need(img, n) == 0 && gtab_image_place(img, n, mem, n) == NULL);
	((struct gtab *)(void *)img)->ctx_mask = tab->ctx_mask;
	((struct gtab *)(void *)img)->loops[0].ntypes = GP_MAX_TYPES + 1;
	CHECK(gtab_image_need(img, n) == 0);
	free(mem);
	free(img);
	gtab_free(tab);
	gp_free(p);
	gp_free(q);
}

/* A source of one thread whose ring is empty, for stream_build(). */
static size_t empty_snapshot(const struct gsrc *src, uint32_t i, void *out, size_t cap)
{
	(void)src, (void)i, (void)out, (void)cap;
	return 0;
}

static void no_names(const struct gsrc *src, int32_t loop, int32_t type, char *loopsym, size_t lcap, char *tname,
		     size_t tcap)
{
	(void)src, (void)loop, (void)type;
	snprintf(loopsym, lcap, "srv!loop");
	snprintf(tname, tcap, "u0");
}

static long no_file(const char *path, char *buf, size_t cap)
{
	(void)path, (void)buf, (void)cap;
	return -1;
}

/* A source of one live thread with nothing in its ring, and a hang of it from start to end. */
static void fake_source(struct gsrc *src, struct gslot *slots, struct gviol *v, int64_t start, int64_t end)
{
	memset(slots, 0, sizeof(*slots));
	atomic_store(&slots[0].state, SLOT_LIVE);
	memset(src, 0, sizeof(*src));
	src->proc = "/proc/self";
	src->slots = slots;
	src->nslots = 1;
	src->snapshot = empty_snapshot;
	src->ring_max = 4096;
	src->names = no_names;
	src->read_small = no_file;
	src->host = src->app = "h";
	src->version = src->cpu_limit = "";
	src->build_id = "abcd";
	src->exe = "/srv";
	src->kernel = "6";
	src->libc_name = "libc.so.6";
	src->min_wait_ns = 1000000;
	src->max_events = 100;
	memset(v, 0, sizeof(*v));
	v->hang = 1;
	v->start = start;
	v->end = end;
	v->dur = 1500000000;
	v->threshold = 1000000;
}

/* stream_build() of a hang in an unwrapped nanosleep; whether a frame named so is in the stream. */
static int syscall_hang(int64_t start, int64_t end, int *rc)
{
	static struct gslot slots[1];
	struct gsrc src;
	struct gviol v;
	struct wire_stream ws;
	struct arena *a = arena_open(0);
	int found = 0;

	fake_source(&src, slots, &v, start, end);
	v.sys_call = SYS_nanosleep + 1;
	v.sys_pc = 0x1234;
	memset(&ws, 0, sizeof(ws));
	*rc = a ? stream_build(&src, &v, a, &ws) : -1;
	for (size_t i = 0; *rc == 1 && i < ws.nframes; i++)
		found |= strcmp(ws.frames[i], "[syscall nanosleep]") == 0;
	arena_free(a);
	return found;
}

static void test_stream_syscall_hang(void)
{
	int rc;

	/* a unit's times: its wait, named for the call */
	CHECK(syscall_hang(1000000000, 2500000000, &rc) == 1);
	CHECK_INT(rc, 1);
	/* a start a hostile process wrote, far below its end: no wait (end - start overflowed before) */
	CHECK(syscall_hang(-6890401462826803104LL, 6944656592449044480LL, &rc) == 0);
	CHECK_INT(rc, 0);
	CHECK(syscall_hang(0, 2500000000, &rc) == 0);
}

/* A system call the agent does not wrap, made by a function of ours (its caller is what the walk
 * finds): one read of a pipe, asleep until the test writes to it. */
static int raw_pipe[2] = { -1, -1 };

__attribute__((noinline)) static void raw_sleeper(void)
{
	char c;

	syscall(SYS_read, raw_pipe[0], &c, 1);
	__asm__ volatile("" ::: "memory");   /* the call is not a tail call */
}

static void *raw_thread(void *arg)
{
	*(_Atomic pid_t *)arg = (pid_t)syscall(SYS_gettid);
	raw_sleeper();
	return NULL;
}

static long real_file(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = '\0';
	return (long)n;
}

/* The wait's stack in stream ws ("a;b;c", outermost first), of the event of thread tid. */
static void wait_stack(const struct wire_stream *ws, pid_t tid, char *out, size_t cap)
{
	size_t at = 0;

	out[0] = '\0';
	for (size_t i = 0; i < ws->nevents; i++) {
		const struct wire_event *e = &ws->events[i];

		if (e->kind != WIRE_WAIT || e->tid != tid)
			continue;
		for (uint32_t k = 0; k < ws->stacks[e->stack].len && at < cap; k++)
			at += (size_t)snprintf(out + at, cap - at, "%s%s", k ? ";" : "",
					       ws->frames[ws->stacks[e->stack].frames[k]]);
		return;
	}
}

/* A hang in an unwrapped system call, on a thread of this process: its callers are walked from the
 * stack pointer the kernel shows, while it is still there. */
static void test_stream_syscall_callers(void)
{
	static struct gslot slots[1];
	struct gmodmap mm = { NULL, 0 };
	struct gwatch_sys sys;
	struct gsrc src;
	struct gviol v;
	struct wire_stream ws;
	struct arena *a = arena_open(0);
	pthread_t th;
	_Atomic pid_t tid = 0;
	char err[256], stack[4096];
	int asleep = 0;

	CHECK(a != NULL);
	CHECK_INT(pipe(raw_pipe), 0);
	CHECK_INT(pthread_create(&th, NULL, raw_thread, &tid), 0);
	for (int i = 0; i < 2500 && !asleep; i++) {
		asleep = tid && gwatch_syscall("/proc/self", tid, real_file, &sys) == 0 && sys.nr == SYS_read;
		if (!asleep)
			usleep(2000);
	}
	CHECK(asleep);
	CHECK_INT(gmodmap_load(&mm), 0);
	fake_source(&src, slots, &v, 1000000000, 2500000000);
	src.sym = gsym_open(&mm, err, sizeof(err));
	CHECK(src.sym != NULL);
	src.pid = getpid();
	src.read_small = real_file;
	v.tid = tid;
	v.sys_call = (int32_t)sys.nr + 1;
	v.sys_pc = sys.pc;
	v.sys_sp = sys.sp;
	memset(&ws, 0, sizeof(ws));
	if (a && src.sym && asleep) {
		CHECK_INT(stream_build(&src, &v, a, &ws), 1);
		wait_stack(&ws, tid, stack, sizeof(stack));
#if defined(__SANITIZE_ADDRESS__)
		/* the sanitizers' build keeps frame pointers: the walk ends at raw_sleeper's frame, whose CFA
		 * is its rbp (the kernel does not show rbp); the caller found is that of syscall() */
		CHECK_STR(stack, "test_guard!raw_sleeper;libc.so.6!syscall;[syscall read]");
#else
		/* without them, to the thread's start */
		CHECK(strstr(stack, "libc.so.6!start_thread;test_guard!raw_thread;test_guard!raw_sleeper;"
				    "libc.so.6!syscall;[syscall read]") != NULL);
#endif
		/* raw_sleeper taken for the agent's own code (a wrapper waiting in the call it wraps): left
		 * out, and the call and its place stay (the stream cuts a stack at the agent's last frame) */
		src.self_lo = (uintptr_t)raw_sleeper;
		src.self_hi = src.self_lo + 512;   /* more than the function, its call of syscall() inside */
		CHECK_INT(stream_build(&src, &v, a, &ws), 1);
		wait_stack(&ws, tid, stack, sizeof(stack));
		CHECK(strstr(stack, "libc.so.6!syscall;[syscall read]") != NULL);
		CHECK(strstr(stack, "raw_sleeper") == NULL);
		src.self_lo = src.self_hi = 0;
		/* a stack pointer that is not the thread's now (it moved on, or a hostile process's value):
		 * nothing is read, nothing above */
		v.sys_sp = sys.sp + 8;
		CHECK_INT(stream_build(&src, &v, a, &ws), 1);
		wait_stack(&ws, tid, stack, sizeof(stack));
		CHECK_STR(stack, "libc.so.6!syscall;[syscall read]");
	}
	if (raw_pipe[1] >= 0)
		CHECK_INT((int)write(raw_pipe[1], "x", 1), 1);
	pthread_join(th, NULL);
	close(raw_pipe[0]);
	close(raw_pipe[1]);
	gsym_free(src.sym);
	gmodmap_release(&mm);
	arena_free(a);
}

/* ---- the host's steal time ---- */

static const char *stat_text;

static long fake_stat(const char *path, char *buf, size_t cap, int whole)
{
	(void)whole;
	if (strcmp(path, "/proc/stat") != 0 || !stat_text)
		return -1;
	snprintf(buf, cap, "%s", stat_text);
	return (long)strlen(buf);
}

/* /proc/stat's head with a steal of ticks clock ticks */
static void set_steal(char *b, size_t cap, long ticks)
{
	snprintf(b, cap, "cpu  100 2 30 4000 5 0 6 %ld 0 0\ncpu0 50 1 15 2000 2 0 3 %ld 0 0\n", ticks, ticks / 2);
	stat_text = b;
}

static void test_steal(void)
{
	static struct gsteal st;
	int64_t tick = 1000000000 / sysconf(_SC_CLK_TCK), s = 1000000000;
	char b[256];

	/* the aggregate line's eighth field, in ns */
	CHECK(gsteal_parse("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\n") == 8 * tick);
	CHECK(gsteal_parse("cpu  1 2 3 4 5 6 7 8") == 8 * tick);
	CHECK(gsteal_parse("cpu  1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7 8\n") == -1);   /* no steal column */
	CHECK(gsteal_parse("cpu0 1 2 3 4 5 6 7 8\n") == -1);
	CHECK(gsteal_parse("cpu  1 2 3 4 5 6 7 x8") == -1);
	CHECK(gsteal_parse("cpu  1 2 3 4 5 6 7 99999999999999999999999999") == INT64_MAX);   /* saturated */
	CHECK(gsteal_parse("") == -1);

	/* nothing known before two samples */
	memset(&st, 0, sizeof(st));
	set_steal(b, sizeof(b), 100);
	CHECK_INT(gsteal_sample(&st, 1 * s, 0, fake_stat), 1);
	CHECK(gsteal_over(&st, s, s + 1) == -1);
	/* once a second, unless forced; never back in time */
	set_steal(b, sizeof(b), 150);
	CHECK_INT(gsteal_sample(&st, 1 * s + s / 2, 0, fake_stat), 0);
	CHECK_INT(gsteal_sample(&st, 2 * s, 0, fake_stat), 1);
	set_steal(b, sizeof(b), 250);
	CHECK_INT(gsteal_sample(&st, 2 * s, 1, fake_stat), 0);
	CHECK_INT(gsteal_sample(&st, 3 * s, 0, fake_stat), 1);
	/* interpolated at both ends: 125 ticks at 1.5 s, 200 at 2.5 s */
	CHECK(gsteal_over(&st, s + s / 2, 2 * s + s / 2) == 75 * tick);
	CHECK(gsteal_over(&st, 2 * s, 3 * s) == 100 * tick);
	/* past the last sample, at the last pair's rate; before the first, at the first pair's */
	CHECK(gsteal_over(&st, 3 * s, 3 * s + s / 2) == 50 * tick);
	CHECK(gsteal_over(&st, s / 2, s) == 25 * tick);
	/* extrapolated back, never below the counter's zero */
	CHECK(gsteal_over(&st, -100 * s, s) == 100 * tick);
	CHECK(gsteal_over(&st, 2 * s, s) == -1);
	/* a unit: its share per CPU, within its length; the history ended before it did: sampled */
	set_steal(b, sizeof(b), 340);
	CHECK(gsteal_unit(&st, 3 * s, 3 * s + s / 2, 3 * s + s / 2, 2, fake_stat) == 45 * tick);
	CHECK_INT((int)atomic_load(&st.n), 4);
	CHECK(gsteal_unit(&st, 3 * s, 3 * s + s / 2, 4 * s, 2, fake_stat) == 45 * tick);   /* no new sample */
	CHECK_INT((int)atomic_load(&st.n), 4);
	CHECK(gsteal_unit(&st, 3 * s, 3 * s + 1000, 4 * s, 1, fake_stat) == 1000);   /* at most its length */
	CHECK(gsteal_unit(&st, INT64_MIN + 5, INT64_MAX - 5, 4 * s, 1, fake_stat) == -1);   /* a hostile span */
	/* far back: the counter's zero, in doubles (0 s is 50 ticks at the first second's rate) */
	CHECK(gsteal_unit(&st, INT64_MIN + 10, 0, 4 * s, 1, fake_stat) == 50 * tick);
	CHECK(gsteal_over(&st, INT64_MIN + 10, s) == 100 * tick);
	/* a stream's sample comes at most every 100 ms */
	CHECK_INT(gsteal_sample(&st, 3 * s + s / 2 + s / 20, 1, fake_stat), 0);
	/* an end past now is now: from 3 s to 4 s, sampled at 4 s (90 ticks on 2 CPUs) */
	CHECK(gsteal_unit(&st, 3 * s, 100 * s, 4 * s, 2, fake_stat) == 45 * tick);
	CHECK_INT((int)atomic_load(&st.n), 5);
	CHECK(gsteal_unit(&st, s, 2 * s, 4 * s, 0, fake_stat) == -1);
	/* a sample under way elsewhere: none taken */
	atomic_store(&st.writing, 1);
	CHECK_INT(gsteal_sample(&st, 9 * s, 1, fake_stat), 0);
	atomic_store(&st.writing, 0);
	/* a file without the column: no sample */
	stat_text = "cpu  1 2 3 4 5 6 7\n";
	CHECK_INT(gsteal_sample(&st, 9 * s, 1, fake_stat), 0);
	/* the history wraps: the latest minute only, in order */
	for (int i = 0; i < 3 * GSTEAL_HIST; i++) {
		set_steal(b, sizeof(b), 1000 + 10 * i);
		CHECK_INT(gsteal_sample(&st, (10 + i) * s, 0, fake_stat), 1);
	}
	CHECK(gsteal_over(&st, (10 + 3 * GSTEAL_HIST - 3) * s, (10 + 3 * GSTEAL_HIST - 1) * s) == 20 * tick);
	/* a host that has counted no steal: unknown, not nothing */
	memset(&st, 0, sizeof(st));
	set_steal(b, sizeof(b), 0);
	CHECK_INT(gsteal_sample(&st, s, 0, fake_stat), 1);
	CHECK_INT(gsteal_sample(&st, 2 * s, 0, fake_stat), 1);
	CHECK(gsteal_over(&st, s, 2 * s) == -1);
	CHECK(gsteal_unit(&st, s, 2 * s, 2 * s, 1, fake_stat) == -1);
}

static int64_t steal_value;

static int64_t fake_steal(const struct gsrc *src, int64_t start, int64_t end)
{
	(void)src, (void)start, (void)end;
	return steal_value;
}

static const char *label_of(const struct wire_stream *ws, const char *key)
{
	for (size_t i = 0; i < ws->nlabels; i++)
		if (strcmp(ws->labels[i].key, key) == 0)
			return ws->labels[i].value;
	return NULL;
}

/* The [cpu steal] wait's duration in ws (-1: none). */
static int64_t steal_event(const struct wire_stream *ws)
{
	for (size_t i = 0; i < ws->nevents; i++) {
		const struct wire_stack *k = &ws->stacks[ws->events[i].stack];

		if (k->len == 1 && strcmp(ws->frames[k->frames[0]], "[cpu steal]") == 0 && ws->events[i].kind == WIRE_WAIT)
			return ws->events[i].dur_ns;
	}
	return -1;
}

static void test_stream_steal(void)
{
	static struct gslot slots[1];
	struct gsrc src;
	struct gviol v;
	struct wire_stream ws;
	struct arena *a = arena_open(0);

	CHECK(a != NULL);
	if (!a)
		return;
	/* a unit 1.5 s long over a threshold of 1 ms, running throughout: 800 ms stolen is more than
	 * half its excess */
	fake_source(&src, slots, &v, 1000000000, 2500000000);
	src.steal = fake_steal;
	steal_value = 800000000;
	CHECK_INT(stream_build(&src, &v, a, &ws), 1);
	CHECK_STR(label_of(&ws, "unit.steal_ns"), "800000000");
	CHECK_STR(label_of(&ws, "unit.cause"), "cpu");
	CHECK(steal_event(&ws) == 800000000);
	/* 100 ms: named, not the cause */
	steal_value = 100000000;
	CHECK_INT(stream_build(&src, &v, a, &ws), 1);
	CHECK_STR(label_of(&ws, "unit.steal_ns"), "100000000");
	CHECK(label_of(&ws, "unit.cause") == NULL);
	CHECK(steal_event(&ws) == 100000000);
	/* it adds to the run delay, which does not count it: 400 + 400 ms of the 1.499 s excess */
	v.rd_how = GUARD_RD_INSIDE;
	v.run_delay_ns = 400000000;
	steal_value = 400000000;
	CHECK_INT(stream_build(&src, &v, a, &ws), 1);
	CHECK_STR(label_of(&ws, "unit.cause"), "cpu");
	steal_value = 300000000;
	CHECK_INT(stream_build(&src, &v, a, &ws), 1);
	CHECK(label_of(&ws, "unit.cause") == NULL);
	/* saturated, not wrapped: a hostile process's run delay */
	v.run_delay_ns = INT64_MAX;
	CHECK_INT(stream_build(&src, &v, a, &ws), 1);
	CHECK_STR(label_of(&ws, "unit.cause"), "cpu");
	/* under the shortest wait: labelled, no event (the run queue's is the stream's); never more
	 * than the unit's duration */
	v.run_delay_ns = 2000000;
	steal_value = 999999;
	CHECK_INT(stream_build(&src, &v, a, &ws), 1);
	CHECK_STR(label_of(&ws, "unit.steal_ns"), "999999");
	CHECK(steal_event(&ws) == -1);
	v.rd_how = GUARD_RD_NONE;
	steal_value = 9000000000;
	CHECK_INT(stream_build(&src, &v, a, &ws), 1);
	CHECK_STR(label_of(&ws, "unit.steal_ns"), "1500000000");
	CHECK(steal_event(&ws) == 1500000000);
	/* a thread asleep in a call for all of it lost nothing to the hypervisor */
	v.sys_call = SYS_nanosleep + 1;
	steal_value = 800000000;
	CHECK_INT(stream_build(&src, &v, a, &ws), 1);
	CHECK_STR(label_of(&ws, "unit.steal_ns"), "0");
	CHECK(label_of(&ws, "unit.cause") == NULL && steal_event(&ws) == -1);
	/* unknown (no steal on the host, or no source of it): no label, no event */
	steal_value = -1;
	CHECK_INT(stream_build(&src, &v, a, &ws), 1);
	CHECK(label_of(&ws, "unit.steal_ns") == NULL && steal_event(&ws) == -1);
	src.steal = NULL;
	CHECK_INT(stream_build(&src, &v, a, &ws), 1);
	CHECK(label_of(&ws, "unit.steal_ns") == NULL && steal_event(&ws) == -1);
	/* the agent's labels come first: a process's own past the wire's 64 are left out, not "kernel" */
	{
		static struct guard_label many[WIRE_MAX_LABELS];

		for (int i = 0; i < WIRE_MAX_LABELS; i++) {
			snprintf(many[i].key, sizeof(many[i].key), "k%d", i);
			snprintf(many[i].value, sizeof(many[i].value), "v");
		}
		src.labels = many;
		src.nlabels = WIRE_MAX_LABELS;
		CHECK_INT(stream_build(&src, &v, a, &ws), 1);
		CHECK_INT((int)ws.nlabels, WIRE_MAX_LABELS);
		CHECK_STR(label_of(&ws, "kernel"), "6");
		CHECK_STR(label_of(&ws, "unit.type"), "u0");
		CHECK(label_of(&ws, "k0") != NULL && label_of(&ws, "k63") == NULL);
	}
	arena_free(a);
}

/* ---- a unit's run delay from the watchdog's snapshots ---- */

#define MS 1000000LL

static void snap(struct gslot *s, uint32_t seq, int mid, int64_t at, int64_t ns, int64_t cpu)
{
	atomic_store(&s->rd_ptid, atomic_load(&s->rd_tid));
	atomic_store(&s->rd_pseq, atomic_load(&s->rd_seq));
	atomic_store(&s->rd_pmid, atomic_load(&s->rd_mid));
	atomic_store(&s->rd_pat, atomic_load(&s->rd_at));
	atomic_store(&s->rd_pns, atomic_load(&s->rd_ns));
	atomic_store(&s->rd_pcpu, atomic_load(&s->rd_cpu));
	atomic_store(&s->rd_tid, 42);
	atomic_store(&s->rd_seq, seq);
	atomic_store(&s->rd_mid, mid);
	atomic_store(&s->rd_at, at);
	atomic_store(&s->rd_ns, ns);
	atomic_store(&s->rd_cpu, cpu);
	atomic_store(&s->rd_gen, atomic_load(&s->rd_gen) + 2);
}

static void test_unit_run_delay(void)
{
	static struct gslot s;
	struct gviol v;
	struct gwatch_sched now;
	const int64_t t0 = 1000 * MS;

	memset(&v, 0, sizeof(v));
	v.tid = 42;
	v.start = t0 + 100 * MS;
	v.end = v.start + 391 * MS;
	v.dur = 391 * MS;
	atomic_store(&s.unit_seq, 5);

	/* before: the snapshot between units 4 and 5. A CPU limit throttled the wake-up before the unit
	 * and the unit's 30 ms of CPU: the delay grew by 451 ms, more than the unit is long, and the CPU
	 * time by 31 ms, which was not waiting */
	snap(&s, 4, 0, t0, 7 * MS, 900 * MS);
	now = (struct gwatch_sched){ 931 * MS, 458 * MS };
	gwatch_unit_run_delay(&s, &v, &now);
	CHECK_INT(v.rd_how, GUARD_RD_BEFORE);
	CHECK_INT(v.run_delay_ns, 360 * MS);
	/* less waiting than that: the delay itself */
	now = (struct gwatch_sched){ 931 * MS, 27 * MS };
	gwatch_unit_run_delay(&s, &v, &now);
	CHECK_INT(v.run_delay_ns, 20 * MS);
	/* CPU time going back (another process's slot, a reused thread id): no cap, the unit's length */
	now = (struct gwatch_sched){ 800 * MS, 458 * MS };
	gwatch_unit_run_delay(&s, &v, &now);
	CHECK_INT(v.run_delay_ns, 391 * MS);
	/* more CPU time than the unit is long (the loop's before it, the stack walk's after its end):
	 * none of it waiting */
	now = (struct gwatch_sched){ 1292 * MS, 458 * MS };
	gwatch_unit_run_delay(&s, &v, &now);
	CHECK_INT(v.rd_how, GUARD_RD_BEFORE);
	CHECK_INT(v.run_delay_ns, 0);
	now = (struct gwatch_sched){ 931 * MS, 458 * MS };
	/* nor more than the unit's duration, which leaves the agent's time out */
	v.dur = 300 * MS;
	gwatch_unit_run_delay(&s, &v, &now);
	CHECK_INT(v.run_delay_ns, 300 * MS);
	v.dur = 391 * MS;
	/* unknown now: none */
	gwatch_unit_run_delay(&s, &v, NULL);
	CHECK_INT(v.rd_how, GUARD_RD_NONE);
	CHECK_INT(v.run_delay_ns, 0);

	/* inside: a snapshot 5 ms into unit 5, the one before taken between the units 50 ms earlier.
	 * Exact from there (100 ms); the head's 5 ms at most 5 - 3 ms of CPU over its window */
	snap(&s, 5, 1, v.start + 5 * MS, 47 * MS, 903 * MS);
	now = (struct gwatch_sched){ 928 * MS, 147 * MS };
	gwatch_unit_run_delay(&s, &v, &now);
	CHECK_INT(v.rd_how, GUARD_RD_INSIDE);
	CHECK_INT(v.run_delay_ns, 102 * MS);
	/* the tail never more than its window less its CPU time: 386 - 25 ms */
	now = (struct gwatch_sched){ 928 * MS, 547 * MS };
	gwatch_unit_run_delay(&s, &v, &now);
	CHECK_INT(v.run_delay_ns, 363 * MS);
	/* a tail that ran all along: the head's estimate alone */
	now = (struct gwatch_sched){ 1300 * MS, 547 * MS };
	gwatch_unit_run_delay(&s, &v, &now);
	CHECK_INT(v.run_delay_ns, 2 * MS);

	/* rate: the snapshot of unit 3, older; the window's rate over the unit's length */
	atomic_store(&s.unit_seq, 5);
	snap(&s, 3, 0, v.start - 391 * MS, 0, 0);
	now = (struct gwatch_sched){ 100 * MS, 391 * MS };
	gwatch_unit_run_delay(&s, &v, &now);
	CHECK_INT(v.rd_how, GUARD_RD_RATE);
	CHECK_INT(v.run_delay_ns, 195 * MS + MS / 2);
	/* another thread's snapshot: none */
	v.tid = 43;
	gwatch_unit_run_delay(&s, &v, &now);
	CHECK_INT(v.rd_how, GUARD_RD_NONE);
}

/* ---- what training learnt, saved by differences (learnt.c) ---- */

static uintptr_t no_module(const void *ctx, uintptr_t addr)
{
	(void)ctx;
	(void)addr;
	return 0;   /* named "[unknown]+0x...": no symbolizer is asked */
}

static const struct gmodmap no_mods = { NULL, 0 };
static const struct learnt_namer plain_namer = { &no_mods, NULL, no_module, NULL, "/bin/x", "ab12", 4, 0.5 };

/* one loop, one context with a two-frame path, one class of it */
static struct learnt *learnt_one(void)
{
	struct learnt *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->loops[0].ret = 0x1000;
	l->loops[0].depth = 5;
	l->loops[0].threads = 2;
	l->ctx[0] = (struct learnt_ctx){ .ret = 0x2000, .depth = 7, .loop = 0, .call = 0, .npath = 2,
					 .path = { 0x3000, 0x4000 } };
	l->cls[0].loop = 0;
	l->cls[0].nctx = 1;
	l->cls[0].ctx[0] = 0;
	atomic_store(&l->nloops, 1);
	atomic_store(&l->nctx, 1);
	atomic_store(&l->ncls, 1);
	return l;
}

static void learnt_add(struct learnt *l, double x)
{
	gp_stats_add(&l->loops[0].all, x);
	gp_stats_add(&l->cls[0].size[1], x);
	l->cls[0].n++;
	atomic_fetch_add(&l->units, 1);
}

/* the profile of cp (against l's saved counts, or whole), or NULL */
static struct gprofile *learnt_prof(const struct learnt_copy *cp, const struct learnt *l, int whole)
{
	struct gprofile *p = gp_new();
	char err[256];

	if (p && learnt_profile(cp, l, whole, &plain_namer, p, err, sizeof(err)) < 0) {
		fprintf(stderr, "learnt_profile: %s\n", err);
		gp_free(p);
		return NULL;
	}
	return p;
}

static void test_learnt_delta(void)
{
	struct learnt *l = learnt_one();
	struct gp_stats b = { 0, 0, 0 }, all = { 0, 0, 0 };
	struct learnt_copy *cp;
	struct gprofile *p;

	CHECK(l != NULL);
	if (!l)
		return;
	for (int i = 0; i < 600; i++) {
		double x = 20000 + (i * 7919 % 1013) * 31.0;

		learnt_add(l, x);
		gp_stats_add(&all, x);
	}
	cp = learnt_take(l);
	CHECK_INT(learnt_copy_units(cp, l), 600);
	p = learnt_prof(cp, l, 0);
	CHECK(p && p->units == 600 && p->nloops == 1 && p->loops[0].all.n == 600 && p->loops[0].threads == 2);
	CHECK(p && p->loops[0].ncontexts == 1 && p->loops[0].nclasses == 1 && p->loops[0].classes[0].size[1].n == 600);
	CHECK(p && strcmp(p->loops[0].symbol, "[unknown]+0x1000") == 0);
	gp_free(p);
	learnt_mark_saved(l, cp);
	learnt_copy_free(cp);
	/* 400 more, of another spread: the next save holds them alone, exactly */
	for (int i = 0; i < 400; i++) {
		double x = 90000 + (i * 104729 % 2039) * 7.5;

		learnt_add(l, x);
		gp_stats_add(&b, x);
		gp_stats_add(&all, x);
	}
	l->loops[0].threads = 3;
	cp = learnt_take(l);
	CHECK_INT(learnt_copy_units(cp, l), 400);
	CHECK_INT(learnt_copy_units(cp, NULL), 1000);
	p = learnt_prof(cp, l, 0);
	CHECK(p != NULL);
	if (p) {
		const struct gp_stats *got = &p->loops[0].all, *cls = &p->loops[0].classes[0].size[1];

		CHECK_INT(p->units, 400);
		CHECK_INT(got->n, 400);
		CHECK(fabs(got->mean - b.mean) < 1e-9 * b.mean);
		CHECK(fabs(got->m2 - b.m2) < 1e-6 * b.m2);
		CHECK(cls->n == 400 && fabs(cls->mean - b.mean) < 1e-9 * b.mean && fabs(cls->m2 - b.m2) < 1e-6 * b.m2);
		CHECK_INT(p->loops[0].threads, 1);
	}
	gp_free(p);
	/* an upload sends it all */
	p = learnt_prof(cp, l, 1);
	CHECK(p && p->units == 1000 && p->loops[0].all.n == 1000 && fabs(p->loops[0].all.m2 - all.m2) < 1e-9 * all.m2);
	gp_free(p);
	learnt_mark_saved(l, cp);
	learnt_copy_free(cp);
	/* nothing since: nothing to save, no class in a profile of it */
	cp = learnt_take(l);
	CHECK_INT(learnt_copy_units(cp, l), 0);
	p = learnt_prof(cp, l, 0);
	CHECK(p && p->units == 0 && p->loops[0].nclasses == 0 && p->loops[0].all.n == 0);
	gp_free(p);
	learnt_copy_free(cp);
	/* a forked child: the tables, no counts */
	{
		struct learnt *child = calloc(1, sizeof(*child));

		CHECK(child != NULL);
		if (child) {
			learnt_copy_tables(child, l);
			CHECK(atomic_load(&child->nloops) == 1 && atomic_load(&child->nctx) == 1 && atomic_load(&child->ncls) == 1);
			CHECK(child->loops[0].all.n == 0 && child->cls[0].n == 0 && atomic_load(&child->units) == 0);
			CHECK(child->cls_saved[0].n == 0 && child->units_saved == 0 && child->ctx[0].npath == 2);
		}
		free(child);
	}
	free(l);
}

/* a process's tables hold anything: what is read is bounded, what is wrong is left out */
static void test_learnt_hostile(void)
{
	struct learnt *l = learnt_one();
	struct learnt_copy *cp;
	struct gprofile *p;

	CHECK(l != NULL);
	if (!l)
		return;
	learnt_add(l, 1000);
	/* counts past the tables, a context of a loop that is not there and one of a path too long, a
	 * class of a context past the count, statistics that are not numbers, a loop being written */
	atomic_store(&l->nloops, 1000000);
	atomic_store(&l->nctx, 4000000000u);
	atomic_store(&l->ncls, 4000000000u);
	l->loops[1].ret = 0x5000;
	l->loops[1].all = (struct gp_stats){ 1, NAN, 0 };
	atomic_store(&l->loops[2].seq, 1);
	l->ctx[1] = (struct learnt_ctx){ .ret = 0x6000, .loop = 77, .npath = 1 };
	l->ctx[2] = (struct learnt_ctx){ .ret = 0x7000, .loop = 0, .npath = 65535 };
	l->ctx[3] = (struct learnt_ctx){ .ret = 0x8000, .loop = 0, .call = 60000 };
	l->cls[1] = (struct learnt_class){ .loop = 0, .nctx = 1, .ctx = { 5000000 }, .n = 3 };
	l->cls[2] = (struct learnt_class){ .loop = 0, .nctx = 1000, .n = 3 };
	l->cls[3] = (struct learnt_class){ .loop = 0, .nctx = 1, .ctx = { 0 }, .n = 1 };
	l->cls[3].size[0] = (struct gp_stats){ 1, -5, INFINITY };
	cp = learnt_take(l);
	CHECK(cp != NULL);
	p = cp ? learnt_prof(cp, l, 1) : NULL;
	CHECK(p != NULL);
	if (p) {
		/* loop 0 and the 29 empty loops of the 32 read (zeros: one site), not the loop that is not a
		 * number nor the one being written; in loop 0 its good context and the empty ones of the 8192
		 * read (one site), its one good class (empty ones count nothing) */
		CHECK_INT(p->nloops, 2);
		CHECK(p->nloops == 2 && strcmp(p->loops[1].symbol, "[unknown]+0x0") == 0);
		CHECK(p->nloops >= 1 && p->loops[0].ncontexts == 2 && p->loops[0].nclasses == 1 &&
		      p->loops[0].classes[0].st.n == 1 && p->loops[0].contexts[0].site.offset == 0x2000);
	}
	gp_free(p);
	learnt_copy_free(cp);
	free(l);
}

/* What a save marks saved is what it saved; a saved part that is not one (it lies in the process's
 * region) saves the counts whole; an entry a thread of the parent left half written is the child's to
 * copy again. */
static void test_learnt_saved_part(void)
{
	struct learnt *l = learnt_one(), *child = calloc(1, sizeof(*child));
	struct learnt_copy *cp = NULL;
	struct gprofile *p;

	CHECK(l != NULL && child != NULL);
	if (!l || !child)
		goto out_free;
	for (int i = 0; i < 10; i++)
		learnt_add(l, 1000 + i);
	/* the class's loop being written as the copy is taken: neither is saved, nor marked saved */
	atomic_store(&l->loops[0].seq, 7);
	cp = learnt_take(l);
	p = cp ? learnt_prof(cp, l, 0) : NULL;
	CHECK(p && p->nloops == 0);
	gp_free(p);
	if (cp)
		learnt_mark_saved(l, cp);
	learnt_copy_free(cp);
	CHECK_INT(l->cls_saved[0].n, 0);
	CHECK_INT(l->loops_saved[0].all.n, 0);
	/* written since: the next save holds the class's ten units */
	atomic_store(&l->loops[0].seq, 8);
	cp = learnt_take(l);
	p = cp ? learnt_prof(cp, l, 0) : NULL;
	CHECK(p && p->nloops == 1 && p->loops[0].nclasses == 1 && p->loops[0].classes[0].size[1].n == 10);
	gp_free(p);
	learnt_copy_free(cp);
	/* a saved part of five units that is not a number: what the process has is saved whole */
	l->loops_saved[0].all = (struct gp_stats){ 5, NAN, 0 };
	l->cls_saved[0].n = 5;
	l->cls_saved[0].size[1] = (struct gp_stats){ 5, 1000, -1 };
	cp = learnt_take(l);
	p = cp ? learnt_prof(cp, l, 0) : NULL;
	CHECK(p && p->nloops == 1 && p->loops[0].all.n == 10 && isfinite(p->loops[0].all.mean) &&
	      p->loops[0].nclasses == 1 && p->loops[0].classes[0].size[1].n == 10);
	gp_free(p);
	learnt_copy_free(cp);
	/* a fork while an entry was half written: the child's copy of it is readable */
	atomic_store(&l->cls[0].seq, 3);
	learnt_copy_tables(child, l);
	CHECK_INT(atomic_load(&child->cls[0].seq), 0);
	learnt_add(child, 5000);
	cp = learnt_take(child);
	p = cp ? learnt_prof(cp, child, 0) : NULL;
	CHECK(p && p->units == 1 && p->nloops == 1 && p->loops[0].nclasses == 1 && p->loops[0].classes[0].size[1].n == 1);
	gp_free(p);
	learnt_copy_free(cp);
out_free:
	free(child);
	free(l);
}

/* A profile's file, lock or temporary file that is a FIFO (the directory is the process's): never
 * waited on. A FIFO at the profile's name is put aside as a damaged profile, one at the temporary
 * name replaced, one at the lock's refused with the reason. */
static void test_profile_save_fifo(void)
{
	char dir[] = "/tmp/sm-profile-fifo.XXXXXX", path[256], other[300], err[256];
	struct gprofile *a = sample_profile(), *back = gp_new();
	struct stat st;

	CHECK(mkdtemp(dir) != NULL && a && back);
	snprintf(path, sizeof(path), "%s/p.json", dir);
	CHECK_INT(mkfifo(path, 0600), 0);
	CHECK_INT(gp_save_merged(path, a, 0, 100, err, sizeof(err)), 0);
	snprintf(other, sizeof(other), "%s.bad", path);
	CHECK(stat(other, &st) == 0 && S_ISFIFO(st.st_mode));
	CHECK_INT(gp_load_file(back, path), 0);
	CHECK_INT(back->units, a->units);
	CHECK_INT(gp_load_file(back, other), -1);
	snprintf(other, sizeof(other), "%s.bad: not a regular file", path);
	CHECK_STR(gp_error(back), other);
	snprintf(other, sizeof(other), "%s.tmp.%ld", path, (long)getpid());
	CHECK_INT(mkfifo(other, 0600), 0);
	CHECK_INT(gp_save_merged(path, a, 0, 100, err, sizeof(err)), 0);
	CHECK(stat(other, &st) < 0 && errno == ENOENT);
	gp_free(back);
	back = gp_new();
	CHECK(back && gp_load_file(back, path) == 0 && back->units == 2 * a->units);
	snprintf(other, sizeof(other), "%s.lock", path);
	CHECK_INT(unlink(other), 0);
	CHECK_INT(mkfifo(other, 0600), 0);
	CHECK_INT(gp_save_merged(path, a, 0, 100, err, sizeof(err)), -1);
	snprintf(other, sizeof(other), "%s.lock: not a regular file", path);
	CHECK_STR(err, other);
	snprintf(other, sizeof(other), "rm -rf '%s'", dir);
	CHECK_INT(system(other), 0);
	gp_free(a);
	gp_free(back);
}

int main(void)
{
	RUN(test_config_defaults);
	RUN(test_config_values);
	RUN(test_config_errors);
	RUN(test_config_only);
	RUN(test_settings_read);
	RUN(test_stats_pool);
	RUN(test_path_distance);
	RUN(test_profile_cluster);
	RUN(test_profile_json);
	RUN(test_profile_load_errors);
	RUN(test_profile_merge);
	RUN(test_profile_async);
	RUN(test_learnt_delta);
	RUN(test_learnt_hostile);
	RUN(test_learnt_saved_part);
	RUN(test_profile_save_fifo);
	RUN(test_gtab_image);
	RUN(test_ring);
	RUN(test_symbolize);
	RUN(test_stream_syscall_hang);
	RUN(test_stream_syscall_callers);
	RUN(test_steal);
	RUN(test_stream_steal);
	RUN(test_unit_run_delay);
	return CHECK_DONE();
}
