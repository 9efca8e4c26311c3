/*
 * sm-guard: runs a program with the guard agent loaded (LD_PRELOAD of
 * libsmguard.so and SM_GUARD_* settings), prints those settings, and shows
 * and merges performance profiles. See docs/guard.md.
 */
#include "guardcore/config.h"
#include "agent/guard/dropin.h"
#include "guardcore/profile.h"
#include "agent/ship.h"
#include "common/sha256.h"
#include "common/buf.h"
#include "common/util.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <getopt.h>
#include <spawn.h>
#include <sys/wait.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LIB_NAME "libsmguard.so"
#define LIB_INSTALLED "/usr/lib/stackmine/" LIB_NAME

static const char usage[] =
	"usage: sm-guard run [options] -- COMMAND [ARG]...\n"
	"       sm-guard env [--markdown]\n"
	"       sm-guard lib\n"
	"       sm-guard enable UNIT [--app NAME] [--label KEY=VALUE]... [--root DIR] [--no-reload]\n"
	"       sm-guard disable UNIT [--root DIR] [--no-reload]\n"
	"       sm-guard status [--root DIR]\n"
	"       sm-guard profile show FILE\n"
	"       sm-guard profile merge [--k K] [--cut C] [--min-threshold-us N] FILE... > OUT\n"
	"       sm-guard profile fetch [--url URL] [--token-file FILE] [--profile-dir DIR] [--conf FILE]\n"
	"                              [--owner USER] EXECUTABLE\n"
	"\n"
	"run      run COMMAND with the guard agent loaded; it learns a performance profile of\n"
	"         each guarded executable (--train, or when there is none for its build yet)\n"
	"         or guards it, shipping slow units as trace streams to the ingest server\n"
	"env      the SM_GUARD_* settings, their defaults, and the values set here\n"
	"         (--markdown: as the table of docs/guard.md)\n"
	"lib      the path of " LIB_NAME " (for LD_PRELOAD in a systemd drop-in)\n"
	"enable   guard a systemd service: writes the drop-in\n"
	"         /etc/systemd/system/UNIT.d/" DROPIN_NAME " (LD_PRELOAD, /etc/stackmine/agent.conf,\n"
	"         the app and labels of its streams) and reloads systemd; restart the service\n"
	"disable  remove that drop-in (restart the service to stop guarding it)\n"
	"status   the guarded services: app, labels, and whether the agent is loaded in them\n"
	"profile  show a profile, or merge profiles of one build learnt on several hosts\n"
	"\n"
	"run options (each sets the SM_GUARD_* variable named in `sm-guard env`):\n"
	"  --train                  learn, even when a profile exists (SM_GUARD_MODE=train)\n"
	"  --guard                  guard; never train (SM_GUARD_MODE=guard)\n"
	"  --profile-dir DIR        profiles, DIR/<build-id>.json\n"
	"  --k K                    threshold = mean + K standard deviations\n"
	"  --url URL                ingest server\n"
	"  --token-file FILE        ingest token\n"
	"  --app NAME, --host NAME, --version V\n"
	"  --label KEY=VALUE        a label of the streams; may be repeated (adds to $SM_GUARD_LABELS)\n"
	"  --spool DIR              where undeliverable streams wait\n"
	"  --only GLOBS             guard only executables whose name matches (comma-separated)\n"
	"  --log FILE               the agent's log\n"
	"  -h, --help               this text\n";

static int die(const char *fmt, const char *a)
{
	fprintf(stderr, "sm-guard: ");
	fprintf(stderr, fmt, a);
	fputc('\n', stderr);
	return 2;
}

/* ---- run ---- */

static int lib_path(char *out, size_t cap)
{
	const char *env = getenv("SM_GUARD_LIB");
	char self[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		if (access(env, R_OK) == 0 && (size_t)snprintf(out, cap, "%s", env) < cap)
			return 0;
		return -1;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		char *slash;

		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			/* bin/sm-guard beside lib/libsmguard.so, in the tree and under a prefix */
			if ((size_t)snprintf(out, cap, "%s/../lib/" LIB_NAME, self) < cap && access(out, R_OK) == 0) {
				char *real = realpath(out, NULL);

				if (real) {
					snprintf(out, cap, "%s", real);
					free(real);
				}
				return 0;
			}
		}
	}
	if (access(LIB_INSTALLED, R_OK) == 0) {
		snprintf(out, cap, "%s", LIB_INSTALLED);
		return 0;
	}
	return -1;
}

/* The labels of --label, as SM_GUARD_LABELS wants them: commas and backslashes escaped. */
static int add_label(struct buf *b, const char *kv)
{
	const char *eq = strchr(kv, '=');

	if (!eq || eq == kv || !eq[1])
		return -1;
	if (b->len)
		buf_putc(b, ',');
	for (const char *p = kv; *p; p++) {
		if ((*p == ',' || *p == '\\'))
			buf_putc(b, '\\');
		buf_putc(b, *p);
	}
	return 0;
}

static const char *env_lookup(const char *name)
{
	return getenv(name);
}

#define AGENT_CONF "/etc/stackmine/agent.conf"   /* the package's settings for the host's agents */

/* ---- profiles learnt by the fleet ---- */

/* The build id the agent keys exe's profile by: its GNU build id, else "path-" and a hash of its path. */
static int exe_build_id(const char *exe, char *out, size_t cap)
{
	char real[PATH_MAX];
	const void *id = NULL;
	ssize_t n = -1;
	Elf *e;
	int fd;

	if (!realpath(exe, real))
		return -1;
	if ((fd = open(real, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	elf_version(EV_CURRENT);
	if ((e = elf_begin(fd, ELF_C_READ_MMAP, NULL))) {
		n = dwelf_elf_gnu_build_id(e, &id);
		if (n > 0 && (size_t)n * 2 < cap)
			util_hex(id, (size_t)n, out);
		elf_end(e);
	}
	close(fd);
	if (n <= 0 || (size_t)n * 2 >= cap) {
		unsigned char h[SHA256_LEN];
		char hex[2 * SHA256_LEN + 1];

		/* as the agent does for an executable without a build id (runtime.c, start-up) */
		sha256(real, strlen(real), h);
		util_hex(h, 16, hex);
		snprintf(out, cap, "path-%s", hex);
	}
	return 0;
}

/* The file execvp() would run for cmd, into out: 0, or -1 when none is found. */
static int resolve_command(const char *cmd, char *out, size_t cap)
{
	const char *path = getenv("PATH");

	if (strchr(cmd, '/'))
		return (size_t)snprintf(out, cap, "%s", cmd) < cap && access(cmd, X_OK) == 0 ? 0 : -1;
	for (const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");

		if ((size_t)snprintf(out, cap, "%.*s/%s", (int)n, n ? p : ".", cmd) < cap && access(out, X_OK) == 0)
			return 0;
		p += n;
		if (*p == ':')
			p++;
	}
	return -1;
}

/* Writes text to dir/name through a temporary file and a rename: readers see the old or the new. */
static int write_atomic(const char *dir, const char *name, const char *text, size_t len, char *err, size_t errlen)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, name, (int)getpid()) >= sizeof(tmp)) {
		snprintf(err, errlen, "%.300s: path too long", dir);
		return -1;
	}
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		snprintf(err, errlen, "%.300s: %s", tmp, strerror(errno));
		return -1;
	}
	if (util_write_all(fd, text, len) < 0 || fsync(fd) < 0) {
		snprintf(err, errlen, "%.300s: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return -1;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		snprintf(err, errlen, "%.300s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/*
 * The fleet's merged profile of exe's build, fetched from the server (cfg->url) into the profile
 * directory. Returns 0 (written, or *same set when the file held it already; *units and the build id
 * in bid), 1 when the server has none, or -1 with err.
 */
static int fetch_profile(const struct guard_config *cfg, const char *exe, long timeout_s, char *bid,
			 size_t bidcap, uint64_t *units, bool *same, char *err, size_t errlen)
{
	struct ship_opts o;
	struct shipper *sh = NULL;
	struct gprofile *p = NULL;
	struct buf body = BUF_INIT((size_t)64 << 20);
	char path[300], name[200], *token = NULL;
	size_t tlen = 0;
	long status = 0;
	int rc = -1;

	if (!cfg->url[0]) {
		snprintf(err, errlen, "no server: set SM_GUARD_URL or --url");
		return -1;
	}
	if (exe_build_id(exe, bid, bidcap) < 0) {
		snprintf(err, errlen, "%s: %s", exe, strerror(errno));
		return -1;
	}
	if (cfg->token_file[0]) {
		if (util_read_file(cfg->token_file, 4096, &token, &tlen) < 0) {
			snprintf(err, errlen, "%.300s: %s", cfg->token_file, strerror(errno));
			return -1;
		}
		while (tlen && (token[tlen - 1] == '\n' || token[tlen - 1] == '\r' || token[tlen - 1] == ' '))
			token[--tlen] = '\0';
	}
	ship_opts_init(&o);
	o.url = cfg->url;
	o.token = token && *token ? token : NULL;
	o.timeout_s = timeout_s;
	o.max_attempts = 1;
	if (!(sh = shipper_open(&o, err, errlen)))
		goto out;
	snprintf(path, sizeof(path), "/api/v1/profiles/%s", bid);
	if (shipper_get(sh, path, body.max, &body, &status, err, errlen) < 0) {
		rc = status == 404 ? 1 : -1;
		goto out;
	}
	if (!(p = gp_new()) || gp_load_text(p, body.data, body.len) < 0 || strcmp(p->build_id, bid) != 0) {
		snprintf(err, errlen, "the server's profile is not one of build %s: %s", bid, p ? gp_error(p) : "out of memory");
		goto out;
	}
	snprintf(name, sizeof(name), "%s.json", bid);
	if (util_mkdir_p(cfg->profile_dir) < 0) {
		snprintf(err, errlen, "%.300s: %s", cfg->profile_dir, strerror(errno));
		goto out;
	}
	{
		char have[PATH_MAX + 200], *old = NULL;
		size_t oldlen = 0;

		/* the same bytes already there: nothing to write (a playbook's second run changes nothing) */
		*same = (size_t)snprintf(have, sizeof(have), "%s/%s", cfg->profile_dir, name) < sizeof(have) &&
			util_read_file(have, body.len + 1, &old, &oldlen) == 0 && oldlen == body.len &&
			memcmp(old, body.data, body.len) == 0;
		free(old);
	}
	if (!*same && write_atomic(cfg->profile_dir, name, body.data, body.len, err, errlen) < 0)
		goto out;
	*units = p->units;
	rc = 0;
out:
	gp_free(p);
	shipper_free(sh);
	buf_release(&body);
	free(token);
	return rc;
}

/* The SM_GUARD_* lines of the agent's settings file (as systemd's EnvironmentFile= reads them) into the
 * environment, where not set already: a host's sm-guard speaks to the host's server. */
static void read_agent_conf(const char *path)
{
	char line[4096];
	FILE *f = fopen(path, "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *eq, *v;
		size_t n;

		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "SM_GUARD_", 9) != 0 || !(eq = strchr(p, '=')))
			continue;
		*eq = '\0';
		v = eq + 1;
		n = strcspn(v, "\r\n");
		v[n] = '\0';
		if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
			v[n - 1] = '\0';
			v++;
		}
		setenv(p, v, 0);
	}
	fclose(f);
}

static int cmd_fetch(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "token-file", required_argument, NULL, 'T' },
		{ "profile-dir", required_argument, NULL, 'p' },
		{ "conf", required_argument, NULL, 'c' },
		{ "owner", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	struct guard_config cfg;
	const char *conf = AGENT_CONF, *owner = NULL;
	char err[512], bid[160];
	uint64_t units = 0;
	bool same = false;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		const char *var = c == 'u' ? "SM_GUARD_URL" : c == 'T' ? "SM_GUARD_TOKEN_FILE" : c == 'p'
				  ? "SM_GUARD_PROFILE_DIR" : NULL;

		if (c == 'c' || c == 'o') {
			*(c == 'c' ? &conf : &owner) = optarg;
			continue;
		}
		if (!var) {
			fputs(usage, stderr);
			return 2;
		}
		if (setenv(var, optarg, 1) < 0)
			return die("%s", strerror(errno));
	}
	if (optind + 1 != argc)
		return die("%s", "profile fetch: one EXECUTABLE (sm-guard profile fetch [--url U] [--token-file F] "
			   "[--profile-dir D] [--conf FILE] [--owner USER] EXECUTABLE)");
	read_agent_conf(conf);
	guard_config_defaults(&cfg);
	if (guard_config_load(&cfg, env_lookup, err, sizeof(err)) < 0)
		return die("%s", err);
	rc = fetch_profile(&cfg, argv[optind], 30, bid, sizeof(bid), &units, &same, err, sizeof(err));
	if (rc == 0 && owner && *owner) {
		/* the service's user must be able to replace the file as it trains (the directory is sticky) */
		struct passwd *pw = getpwnam(owner);
		char path[PATH_MAX + 200];

		snprintf(path, sizeof(path), "%s/%s.json", cfg.profile_dir, bid);
		if (!pw || chown(path, pw->pw_uid, pw->pw_gid) < 0) {
			fprintf(stderr, "sm-guard: profile fetch: --owner %s: %s\n", owner, pw ? strerror(errno) : "no such user");
			return 1;
		}
	}
	if (rc == 0) {
		printf("%s/%s.json: the fleet's profile of %s (%llu units)%s\n", cfg.profile_dir, bid, argv[optind],
		       (unsigned long long)units, same ? ", unchanged" : "");
		return 0;
	}
	fprintf(stderr, "sm-guard: profile fetch: %s\n", rc > 0 ? "the server has no profile of this build yet" : err);
	return rc > 0 ? 3 : 1;
}

static int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "train", no_argument, NULL, 't' },
		{ "guard", no_argument, NULL, 'g' },
		{ "profile-dir", required_argument, NULL, 'p' },
		{ "k", required_argument, NULL, 'k' },
		{ "url", required_argument, NULL, 'u' },
		{ "token-file", required_argument, NULL, 'T' },
		{ "app", required_argument, NULL, 'a' },
		{ "host", required_argument, NULL, 'H' },
		{ "version", required_argument, NULL, 'V' },
		{ "label", required_argument, NULL, 'l' },
		{ "spool", required_argument, NULL, 's' },
		{ "only", required_argument, NULL, 'o' },
		{ "log", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct buf labels = BUF_INIT(65536), preload = BUF_INIT(65536);
	struct guard_config cfg;
	char lib[PATH_MAX], err[512], abs[PATH_MAX];
	const char *old;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		const char *var = NULL, *val = optarg;

		switch (c) {
		case 't': var = "SM_GUARD_MODE"; val = "train"; break;
		case 'g': var = "SM_GUARD_MODE"; val = "guard"; break;
		case 'p': var = "SM_GUARD_PROFILE_DIR"; break;
		case 'k': var = "SM_GUARD_K"; break;
		case 'u': var = "SM_GUARD_URL"; break;
		case 'T': var = "SM_GUARD_TOKEN_FILE"; break;
		case 'a': var = "SM_GUARD_APP"; break;
		case 'H': var = "SM_GUARD_HOST"; break;
		case 'V': var = "SM_GUARD_VERSION"; break;
		case 's': var = "SM_GUARD_SPOOL"; break;
		case 'o': var = "SM_GUARD_ONLY"; break;
		case 'L': var = "SM_GUARD_LOG"; break;
		case 'l':
			if (add_label(&labels, optarg) < 0)
				return die("--label: '%s' is not KEY=VALUE", optarg);
			continue;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
		/* paths are handed to other processes, which may run elsewhere: make them absolute */
		if ((c == 'p' || c == 'T' || c == 's' || c == 'L') && val[0] != '/') {
			char cwd[PATH_MAX];

			if (!getcwd(cwd, sizeof(cwd)) || (size_t)snprintf(abs, sizeof(abs), "%s/%s", cwd, val) >= sizeof(abs))
				return die("%s: path too long", val);
			val = abs;
		}
		if (setenv(var, val, 1) < 0)
			return die("%s", strerror(errno));
	}
	/* --label adds to the labels already in the environment */
	if (labels.len) {
		const char *env = getenv("SM_GUARD_LABELS");
		struct buf all = BUF_INIT(65536);

		if (env && *env) {
			buf_puts(&all, env);
			buf_putc(&all, ',');
		}
		buf_append(&all, labels.data, labels.len);
		if (!buf_cstr(&all) || setenv("SM_GUARD_LABELS", buf_cstr(&all), 1) < 0)
			return die("%s", "SM_GUARD_LABELS: too long");
		buf_release(&all);
	}
	buf_release(&labels);
	if (optind >= argc)
		return die("%s", "run: no COMMAND (sm-guard run [options] -- COMMAND [ARG]...)");
	/* the agent would stay inert on a bad setting; say so here instead */
	guard_config_defaults(&cfg);
	if (guard_config_load(&cfg, env_lookup, err, sizeof(err)) < 0)
		return die("%s", err);
	if (lib_path(lib, sizeof(lib)) < 0)
		return die("%s", "cannot find " LIB_NAME " (set SM_GUARD_LIB)");
	if (cfg.url[0] && cfg.mode != GUARD_MODE_TRAIN && cfg.mode != GUARD_MODE_OFF) {
		/*
		 * A host new to this build guards at once with the fleet's thresholds (the server has
		 * none yet: it trains). Only then: a host with a profile starts without waiting on the
		 * server; `sm-guard profile fetch` brings it up to date.
		 */
		char path[PATH_MAX], bid[160], have[PATH_MAX + 200];
		uint64_t units;
		bool same;

		if (resolve_command(argv[optind], path, sizeof(path)) == 0 &&
		    exe_build_id(path, bid, sizeof(bid)) == 0 &&
		    (size_t)snprintf(have, sizeof(have), "%s/%s.json", cfg.profile_dir, bid) < sizeof(have) &&
		    access(have, F_OK) != 0)
			(void)fetch_profile(&cfg, path, 3, bid, sizeof(bid), &units, &same, err, sizeof(err));
	}
	buf_puts(&preload, lib);
	old = getenv("LD_PRELOAD");
	if (old && *old) {
		buf_putc(&preload, ':');
		buf_puts(&preload, old);
	}
	if (!buf_cstr(&preload) || setenv("LD_PRELOAD", buf_cstr(&preload), 1) < 0)
		return die("%s", "LD_PRELOAD too long");
	buf_release(&preload);
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "sm-guard: %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* ---- env and lib ---- */

static int cmd_env(int markdown)
{
	size_t n;
	const struct guard_var *v = guard_config_vars(&n);
	char lib[PATH_MAX];

	if (markdown) {
		/* the table of docs/guard.md */
		printf("| variable | default | meaning |\n|---|---|---|\n");
		for (size_t i = 0; i < n; i++)
			printf("| `%s` | %s | %s |\n", v[i].name, v[i].def, v[i].help);
		return 0;
	}
	printf("# the guard agent's settings: set them in the environment of the guarded program\n");
	printf("# (systemd: Environment= in a drop-in), with LD_PRELOAD=%s\n",
	       lib_path(lib, sizeof(lib)) == 0 ? lib : LIB_INSTALLED);
	for (size_t i = 0; i < n; i++) {
		const char *cur = getenv(v[i].name);

		printf("\n# %s\n# default: %s\n", v[i].help, v[i].def);
		if (cur)
			printf("%s=%s\n", v[i].name, cur);
		else
			printf("#%s=\n", v[i].name);
	}
	return 0;
}

static int cmd_lib(void)
{
	char lib[PATH_MAX];

	if (lib_path(lib, sizeof(lib)) < 0)
		return die("%s", "cannot find " LIB_NAME " (set SM_GUARD_LIB)");
	printf("%s\n", lib);
	return 0;
}

/* ---- profiles ---- */

static void print_ns(double ns)
{
	if (ns >= 1e9)
		printf("%.2f s", ns / 1e9);
	else if (ns >= 1e6)
		printf("%.2f ms", ns / 1e6);
	else if (ns >= 1e3)
		printf("%.1f us", ns / 1e3);
	else
		printf("%.0f ns", ns);
}

static void print_site(const struct gprofile *p, const struct gp_site *s)
{
	printf("%s at %s+0x%llx depth %lld", s->call, p->modules[s->module].name, (unsigned long long)s->offset,
	       (long long)s->depth);
}

static int cmd_show(const char *path)
{
	struct gprofile *p = gp_new();
	int r;

	if (!p)
		return die("%s", "out of memory");
	r = gp_load_file(p, path);
	if (r < 0) {
		fprintf(stderr, "sm-guard: %s\n", r == -2 ? "no such file" : gp_error(p));
		gp_free(p);
		return 1;
	}
	printf("profile of %s\nbuild id %s   k %g   cut %g   units %llu\n", p->exe ? p->exe : "(unknown)",
	       p->build_id, p->k, p->cut, (unsigned long long)p->units);
	for (size_t li = 0; li < p->nloops; li++) {
		const struct gp_loop *l = &p->loops[li];

		printf("\nloop %zu: %s\n  ", li, l->symbol ? l->symbol : "?");
		print_site(p, &l->site);
		printf("\n  threads %llu   units %llu   mean ", (unsigned long long)l->threads,
		       (unsigned long long)l->all.n);
		print_ns(l->all.mean);
		printf("   sd ");
		print_ns(gp_stats_sd(&l->all));
		printf("   threshold ");
		print_ns(l->threshold_ns);
		printf("   (%zu contexts, %zu classes)\n", l->ncontexts, l->nclasses);
		printf("  deferred requests %llu   mean ", (unsigned long long)l->async.n);
		print_ns(l->async.mean);
		printf("   sd ");
		print_ns(gp_stats_sd(&l->async));
		printf("   threshold ");
		print_ns(l->async_thr_ns);
		printf("\n");
		for (size_t t = 0; t < l->ntypes; t++) {
			const struct gp_type *ty = &l->types[t];

			printf("  unit type %s: %llu units in %u classes   mean ", ty->name, (unsigned long long)ty->st.n,
			       ty->nclasses);
			print_ns(ty->st.mean);
			printf("   sd ");
			print_ns(gp_stats_sd(&ty->st));
			printf("   threshold ");
			print_ns(ty->threshold_ns);
			printf("\n");
			for (uint32_t k = 0; k < ty->nctx; k++) {
				const struct gp_context *c = &l->contexts[l->tctxs[ty->ctx_off + k]];
				const char *where = c->path_len ? gp_frame_name(p, l->paths[c->path_off + c->path_len - 1]) : "?";

				printf("    %-8s in %s (depth %lld)\n", c->site.call, where, (long long)c->site.depth);
			}
		}
	}
	gp_free(p);
	return 0;
}

static int cmd_merge(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "k", required_argument, NULL, 'k' },
		{ "cut", required_argument, NULL, 'c' },
		{ "min-threshold-us", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	struct gprofile *out = gp_new();
	struct buf text = BUF_INIT(0);
	double k = -1, cut = -1;
	int64_t min_thr = 0;
	int c, rc = 1;

	if (!out)
		return die("%s", "out of memory");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'k' && util_parse_double(optarg, &k) == 0 && k >= 0 && k <= 1000)
			continue;
		if (c == 'c' && util_parse_double(optarg, &cut) == 0 && cut >= 0 && cut <= 1)
			continue;
		if (c == 'm' && util_parse_i64(optarg, 0, 3600000000LL, &min_thr) == 0)
			continue;
		fprintf(stderr, "sm-guard: --k takes 0 to 1000, --cut 0 to 1, --min-threshold-us a whole number\n");
		gp_free(out);
		return 2;
	}
	if (optind >= argc) {
		gp_free(out);
		return die("%s", "profile merge: no FILE");
	}
	for (int i = optind; i < argc; i++) {
		struct gprofile *p = gp_new();
		int r;

		if (!p)
			goto out_free;
		r = gp_load_file(p, argv[i]);
		if (r < 0) {
			fprintf(stderr, "sm-guard: %s\n", r == -2 ? argv[i] : gp_error(p));
			if (r == -2)
				fprintf(stderr, "sm-guard: %s: no such file\n", argv[i]);
			gp_free(p);
			goto out_free;
		}
		if (i == optind) {
			out->k = p->k;
			out->cut = p->cut;
		}
		if (gp_merge(out, p) < 0) {
			fprintf(stderr, "sm-guard: %s: %s\n", argv[i], gp_error(out));
			gp_free(p);
			goto out_free;
		}
		gp_free(p);
	}
	if (k >= 0)
		out->k = k;
	if (cut >= 0)
		out->cut = cut;
	out->updated_s = (int64_t)time(NULL);
	if (gp_cluster(out, min_thr * 1000) < 0 || gp_write(out, &text) < 0) {
		fprintf(stderr, "sm-guard: %s\n", out->err[0] ? gp_error(out) : "out of memory");
		goto out_free;
	}
	if (fwrite(text.data, 1, text.len, stdout) != text.len || fflush(stdout) != 0) {
		fprintf(stderr, "sm-guard: standard output: %s\n", strerror(errno));
		goto out_free;
	}
	rc = 0;
out_free:
	buf_release(&text);
	gp_free(out);
	return rc;
}

/* ---- systemd ---- */


static bool systemd_running(const char *root)
{
	return !*root && access("/run/systemd/system", F_OK) == 0;
}

/* Runs argv (a program and its arguments, no shell) and captures its first line of output into out.
 * Returns its exit status, or -1. */
static int run_capture(char *const argv[], char *out, size_t cap)
{
	posix_spawn_file_actions_t fa;
	int pfd[2], status;
	pid_t pid;
	ssize_t n;

	out[0] = '\0';
	if (pipe(pfd) < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_addclose(&fa, pfd[0]);
	if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0) {
		posix_spawn_file_actions_destroy(&fa);
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	n = read(pfd[0], out, cap - 1);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void daemon_reload(const char *root, bool reload)
{
	char out[64];
	char *argv[] = { "systemctl", "daemon-reload", NULL };

	if (!reload)
		return;
	if (!systemd_running(root)) {
		printf("systemd is not running here: it reads the drop-in when it starts\n");
		return;
	}
	if (run_capture(argv, out, sizeof(out)) != 0)
		fprintf(stderr, "sm-guard: systemctl daemon-reload failed: run it yourself\n");
}

/* --root DIR and --no-reload, shared by enable and disable; returns argv's index past them, or -1 */
static int systemd_opts(int argc, char **argv, int i, const char **root, bool *reload)
{
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--root") == 0 && i + 1 < argc)
			*root = argv[++i];
		else if (strcmp(argv[i], "--no-reload") == 0)
			*reload = false;
		else
			return i;
	}
	return i;
}

#define AGENT_GROUP "stackmine"

/* Whether root/etc/group has the group (the file, not NSS: --root stands for another system). */
static bool group_exists(const char *root, const char *name)
{
	char path[PATH_MAX], line[1024];
	size_t n = strlen(name);
	bool found = false;
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/etc/group", root) >= sizeof(path) || !(f = fopen(path, "re")))
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strncmp(line, name, n) == 0 && line[n] == ':';
	fclose(f);
	return found;
}

static int cmd_enable(int argc, char **argv)
{
	struct dropin_spec sp = { "", NULL, NULL, AGENT_CONF, NULL, NULL, NULL };
	struct buf labels = BUF_INIT(16 * 1024);
	char lib[PATH_MAX], path[4400], err[512], unit[256];
	bool reload = true;
	int rc = 2;

	if (argc < 2 || argv[1][0] == '-')
		return die("%s", "enable: give a UNIT (e.g. nginx.service)");
	sp.unit = argv[1];
	for (int i = 2; i < argc; i++) {
		int j = systemd_opts(argc, argv, i, &sp.root, &reload);

		if (j > i) {
			i = j - 1;
			continue;
		}
		if (strcmp(argv[i], "--app") == 0 && i + 1 < argc) {
			sp.app = argv[++i];
		} else if (strcmp(argv[i], "--label") == 0 && i + 1 < argc) {
			if (add_label(&labels, argv[++i]) < 0) {
				fprintf(stderr, "sm-guard: --label '%s': want KEY=VALUE\n", argv[i]);
				goto out;
			}
		} else {
			fprintf(stderr, "sm-guard: enable: unknown option '%s'\n", argv[i]);
			goto out;
		}
	}
	if (lib_path(lib, sizeof(lib)) < 0) {
		fprintf(stderr, "sm-guard: cannot find " LIB_NAME " (set SM_GUARD_LIB)\n");
		rc = 1;
		goto out;
	}
	sp.lib = lib;
	sp.labels = labels.len ? buf_cstr(&labels) : NULL;
	/* where the package made its group, the service joins it to read the host's token */
	if (group_exists(sp.root, AGENT_GROUP))
		sp.group = AGENT_GROUP;
	if (buf_error(&labels) != BUF_OK || dropin_write(&sp, path, sizeof(path), err, sizeof(err)) < 0) {
		fprintf(stderr, "sm-guard: %s\n", buf_error(&labels) != BUF_OK ? "labels: too long" : err);
		rc = 1;
		goto out;
	}
	dropin_unit_name(sp.unit, unit, sizeof(unit), err, sizeof(err));
	printf("wrote %s\n", path);
	daemon_reload(sp.root, reload);
	printf("restart the service to guard it: systemctl restart %s\n", unit);
	rc = 0;
out:
	buf_release(&labels);
	return rc;
}

static int cmd_disable(int argc, char **argv)
{
	const char *root = "";
	bool reload = true;
	char err[512], unit[256];
	int r;

	if (argc < 2 || argv[1][0] == '-')
		return die("%s", "disable: give a UNIT");
	if (systemd_opts(argc, argv, 2, &root, &reload) != argc) {
		fprintf(stderr, "sm-guard: disable: unknown option\n");
		return 2;
	}
	r = dropin_remove(root, argv[1], err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "sm-guard: %s\n", err);
		return 1;
	}
	dropin_unit_name(argv[1], unit, sizeof(unit), err, sizeof(err));
	if (r == 1) {
		printf("%s is not guarded\n", unit);
		return 0;
	}
	printf("removed the guard of %s\n", unit);
	daemon_reload(root, reload);
	printf("restart the service to stop guarding it: systemctl restart %s\n", unit);
	return 0;
}

/* "guarded (pid N)", "not guarded yet: restart it", "not running", or "-" when systemd does not run here */
static void unit_state(const char *root, const char *unit, char *out, size_t cap)
{
	char pid[32], maps[64], *text = NULL;
	char *argv[] = { "systemctl", "show", "-p", "MainPID", "--value", (char *)unit, NULL };
	size_t len;

	snprintf(out, cap, "-");
	if (!systemd_running(root))
		return;
	if (run_capture(argv, pid, sizeof(pid)) != 0 || !*pid || strcmp(pid, "0") == 0) {
		snprintf(out, cap, "not running");
		return;
	}
	snprintf(maps, sizeof(maps), "/proc/%s/maps", pid);
	if (util_read_file(maps, 64u << 20, &text, &len) == 0 && strstr(text, LIB_NAME))
		snprintf(out, cap, "guarded (pid %s)", pid);
	else
		snprintf(out, cap, "not guarded yet: restart it");
	free(text);
}

static int cmd_status(int argc, char **argv)
{
	const char *root = "";
	bool reload = true;
	struct dropin_info *info = calloc(1024, sizeof(*info));
	size_t n;
	char err[512], state[128];

	if (!info)
		return die("%s", "out of memory");
	if (systemd_opts(argc, argv, 1, &root, &reload) != argc || !reload) {
		free(info);
		fprintf(stderr, "sm-guard: status: unknown option\n");
		return 2;
	}
	if (dropin_list(root, info, 1024, &n, err, sizeof(err)) < 0) {
		free(info);
		fprintf(stderr, "sm-guard: %s\n", err);
		return 1;
	}
	if (!n)
		printf("no service is guarded (sm-guard enable UNIT)\n");
	for (size_t i = 0; i < n; i++) {
		unit_state(root, info[i].unit, state, sizeof(state));
		printf("%s\tapp=%s\tlabels=%s\t%s\n", info[i].unit, *info[i].app ? info[i].app : "(its executable)",
		       *info[i].labels ? info[i].labels : "-", state);
	}
	free(info);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		fputs(usage, stdout);
		return 0;
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "env") == 0)
		return cmd_env(argc == 3 && strcmp(argv[2], "--markdown") == 0);
	if (strcmp(argv[1], "lib") == 0)
		return cmd_lib();
	if (strcmp(argv[1], "enable") == 0)
		return cmd_enable(argc - 1, argv + 1);
	if (strcmp(argv[1], "disable") == 0)
		return cmd_disable(argc - 1, argv + 1);
	if (strcmp(argv[1], "status") == 0)
		return cmd_status(argc - 1, argv + 1);
	if (strcmp(argv[1], "profile") == 0 && argc >= 3) {
		if (strcmp(argv[2], "show") == 0 && argc == 4)
			return cmd_show(argv[3]);
		if (strcmp(argv[2], "merge") == 0)
			return cmd_merge(argc - 2, argv + 2);
		if (strcmp(argv[2], "fetch") == 0)
			return cmd_fetch(argc - 2, argv + 2);
	}
	fputs(usage, stderr);
	return 2;
}
