/*
 * runtime: libsmguard.so's start-up inside a program (its constructor) and
 * its end (the destructor): the top of the agent's layers (hot.h says what
 * they are). Start-up reads the settings from the environment, finds the
 * program and its profile, and wires the layers below together.
 *
 * Start-up decides once whether this process is guarded at all (SM_GUARD_ONLY,
 * SM_GUARD_MODE, a usable profile); when not, every wrapper passes straight
 * through for the rest of the process's life, and nothing but libsmguard.so
 * itself was loaded. Settings that do not parse leave the agent inert with the
 * reason in SM_GUARD_LOG: a bad setting never changes what the program does.
 */
#include "agent/guard/gtab.h"
#include "agent/guard/hot.h"
#include "agent/guard/region.h"
#include "agent/guard/lazy.h"
#include "agent/guard/modmap.h"
#include "agent/guard/runtime.h"
#include "agent/guard/threads.h"
#include "agent/guard/unwind.h"
#include "common/sha256.h"
#include "common/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

/* ---- start-up ---- */

static const char *env_get(const char *name)
{
	return getenv(name);
}

static void read_token(void)
{
	char *text = NULL;
	size_t len = 0;

	if (!G.cfg.token_file[0])
		return;
	if (util_read_file(G.cfg.token_file, sizeof(G.token) - 1, &text, &len) < 0) {
		guard_log("cannot read the token file; shipping without a token", "path=%s error=\"%s\"",
			  G.cfg.token_file, strerror(errno));
		return;
	}
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
		len--;
	memcpy(G.token, text, len);
	G.token[len] = '\0';
	free(text);
}

static void find_self(void)
{
	Dl_info info;
	struct gmodmap mm = { NULL, 0 };

	if (unwind_modmap_load(&mm) < 0)
		return;
	if (dladdr((void *)find_self, &info) && info.dli_fbase) {
		for (size_t i = 0; i < mm.n; i++)
			if (mm.mods[i].bias == (uintptr_t)info.dli_fbase ||
			    ((uintptr_t)find_self >= mm.mods[i].lo && (uintptr_t)find_self < mm.mods[i].hi)) {
				G.self_lo = mm.mods[i].lo;
				G.self_hi = mm.mods[i].hi;
				break;
			}
	}
	/* the module the wrapped calls' frames are named after */
	if (dladdr(dlsym(RTLD_NEXT, "read"), &info) && info.dli_fname) {
		const char *slash = strrchr(info.dli_fname, '/');

		snprintf(G.libc_name, sizeof(G.libc_name), "%s", slash ? slash + 1 : info.dli_fname);
	} else {
		snprintf(G.libc_name, sizeof(G.libc_name), "libc.so.6");
	}
	{
		const struct gmod *main_mod = gmodmap_main(&mm);

		if (main_mod) {
			snprintf(G.exe, sizeof(G.exe), "%s", main_mod->path);
			snprintf(G.exe_name, sizeof(G.exe_name), "%s", main_mod->name);
			snprintf(G.build_id, sizeof(G.build_id), "%s", main_mod->build_id);
		}
	}
	gmodmap_release(&mm);
}

static int load_profile(void)
{
	char err[256];
	struct gprofile *p = gp_new();
	int r;

	if (!p)
		return -1;
	if (access(G.profile_path, F_OK) < 0) {
		gp_free(p);
		return -1;   /* no profile of this build: nothing to guard with (gp_load_file says so too) */
	}
	if (lazy_load(LAZY_JSONC) < 0) {
		guard_log("cannot read the profile; not guarding", "error=\"%s\"", lazy_error(LAZY_JSONC));
		gp_free(p);
		return -1;
	}
	r = gp_load_file(p, G.profile_path);
	if (r < 0) {
		if (r == -1)
			guard_log("cannot use the profile; not guarding", "error=\"%s\"", gp_error(p));
		gp_free(p);
		return -1;
	}
	G.k0 = G.cfg.k >= 0 ? G.cfg.k : p->k;
	gp_set_k(p, G.k0, G.cfg.min_threshold_ns);
	G.profile = p;
	G.tab = guard_tab_build(p, err, sizeof(err));
	if (!G.tab) {
		guard_log("cannot build the guard table; not guarding", "error=\"%s\"", err);
		return -1;
	}
	return 0;
}

static void key_destructor(void *p)
{
	guard_thread_exit(p);
}

__attribute__((constructor(102))) static void guard_init(void)
{
	struct gthread *t = &guard_tls;
	char err[512];
	struct utsname uts;
	struct stat st;

	t->nest = 1;
	guard_sig_at_start();
	gmodmap_capture_argv0();   /* before the program can rewrite its argv (a process title) */
	for (int i = 0; i < GUARD_MAX_FDS; i++)
		atomic_store(&G.fds[i], -1);
	guard_config_defaults(&G.cfg);
	guard_log_start();
	{
		/* the log first, so that a bad setting can be reported */
		const char *lp = getenv("SM_GUARD_LOG");

		if (lp && lp[0] == '/' && strlen(lp) < sizeof(G.cfg.log))
			memcpy(G.cfg.log, lp, strlen(lp) + 1);
	}
	if (guard_config_load(&G.cfg, env_get, err, sizeof(err)) < 0) {
		/* the log setting may be the one that failed: keep what parsed */
		guard_log("bad setting; the agent stays inert", "error=\"%s\"", err);
		goto inert;
	}
	find_self();
	/* a program may run through a link (redis-server -> redis-check-rdb): both names count (the
	 * module is named as started, the file is the link's target) */
	if (G.cfg.mode == GUARD_MODE_OFF || (!guard_config_only_matches(G.cfg.only, G.exe_name) &&
					     !guard_config_only_matches(G.cfg.only, program_invocation_short_name) &&
					     !guard_config_only_matches(G.cfg.only, strrchr(G.exe, '/') ? strrchr(G.exe, '/') + 1 : G.exe)))
		goto inert;
	if (!G.build_id[0]) {
		/* no GNU build id: the profile is keyed by the executable's path instead */
		unsigned char h[SHA256_LEN];
		char hex[2 * SHA256_LEN + 1];

		sha256(G.exe, strlen(G.exe), h);
		util_hex(h, 16, hex);
		snprintf(G.build_id, sizeof(G.build_id), "path-%s", hex);
	}
	snprintf(G.profile_path, sizeof(G.profile_path), "%s/%s.json", G.cfg.profile_dir, G.build_id);
	G.pid = getpid();
	G.started_ns = util_now_real_ns();
	G.sig = G.cfg.signal;
	guard_clock_init();
	G.period_ns = G.cfg.sample_hz > 0 ? 1000000000LL / G.cfg.sample_hz : 0;
	G.boost_period_ns = G.cfg.violation_hz > 0 ? 1000000000LL / G.cfg.violation_hz : 0;
	if (G.cfg.host[0])
		snprintf(G.host, sizeof(G.host), "%s", G.cfg.host);
	else if (gethostname(G.host, sizeof(G.host) - 1) < 0)
		snprintf(G.host, sizeof(G.host), "unknown");
	snprintf(G.app, sizeof(G.app), "%s", G.cfg.app[0] ? G.cfg.app :
		 program_invocation_short_name[0] ? program_invocation_short_name : G.exe_name);
	if (uname(&uts) == 0)
		snprintf(G.kernel, sizeof(G.kernel), "%s", uts.release);
	read_token();
	G.cfg0.min_wait_ns = G.cfg.min_wait_ns;
	G.cfg0.sample_hz = G.cfg.sample_hz;
	G.cfg0.reports_per_min = G.cfg.reports_per_min;
	guard_threads_init(guard_watchdog_main, guard_ship_main);
	guard_report_init();
	pthread_mutex_init(&G.tab_mu, NULL);
	pthread_mutex_init(&G.shared_mu, NULL);
	{
		/* every signal the agent sends carries it: a program's own never does by chance */
		uint64_t r = 0;

		util_random(&r, sizeof(r));
		G.sig_cookie = (void *)(uintptr_t)(r | 1);
	}
	G.mode = G.cfg.mode;
	if (G.mode == GUARD_MODE_AUTO)
		G.mode = stat(G.profile_path, &st) == 0 ? GUARD_MODE_GUARD : GUARD_MODE_TRAIN;
	/* what is loaded (json-c, libunwind) only once the agent is sure to run */
	if (G.mode == GUARD_MODE_GUARD && load_profile() < 0)
		goto inert;
	if (unwind_open(err, sizeof(err)) < 0) {
		guard_log("cannot load the unwinder; the agent stays inert", "error=\"%s\"", err);
		goto inert;
	}
	if (G.mode == GUARD_MODE_GUARD) {
		if (guard_sig_install() < 0) {
			guard_log("cannot install the sampling handler; no CPU samples", "signal=%d", G.sig);
		} else {
			G.sig_owned = 1;
			guard_sampler_init(guard_sig_restorer());
		}
	}
	if (pthread_key_create(&G.key, key_destructor) != 0 || guard_fork_install() < 0)
		goto inert;
	/* the host's collector does the rest when one runs: training, it saves what the process learns */
	if (G.mode == GUARD_MODE_TRAIN) {
		guard_region_open(1);
		G.train = gtrain_new(guard_region_learnt());
		if (!G.train) {
			guard_region_state(1);   /* the collector finishes it: nothing was learnt */
			goto inert;
		}
	} else if (guard_region_open(0) == 0) {
		guard_region_names(G.tab);
		/* nothing will rebuild the table from the profile (the collector builds the tables of pushed
		 * settings, and every context is resolved): its memory goes back to the program */
		if (!G.tab->unresolved) {
			gp_free(G.profile);
			G.profile = NULL;
		}
	}
	guard_log("guarding", "mode=%s build_id=%s profile=%s collector=%s clock=%s", guard_mode_name(G.mode),
		  G.build_id, G.profile_path, G.region ? "host" : "process", guard_clock_name());
	guard_sig_adopt();
	atomic_store(&G.active, 1);
	t->nest = 0;
	return;
inert:
	t->nest = 0;
}

__attribute__((destructor)) static void guard_fini(void)
{
	guard_exit_here();
}
