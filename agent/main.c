/*
 * sm-agent: the command-line agent that gets trace streams to the ingest
 * server: `ship` sends wire-format files, `drain` sends what an earlier run
 * had to spool, `import` converts profiler output (perf script, folded
 * stacks) into streams and ships or writes them. See docs/agent.md.
 */
#include "formats/formats.h"
#include "formats/import.h"
#include "agent/guard/collect.h"
#include "agent/ship.h"
#include "agent/spool.h"
#include "common/cli.h"
#include "common/log.h"
#include "common/util.h"
#include "common/wire.h"

#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
	"usage: sm-agent ship [options] FILE...\n"
	"       sm-agent drain [options]\n"
	"       sm-agent import [--format FORMAT] [import options] [options] FILE...\n"
	"       sm-agent collect [--dir DIR] [--report-s N] [--tick-ms N] [options]\n"
	"\n"
	"ship    validate wire-format streams (FILE: one JSON object, pretty or not, several\n"
	"        objects, or NDJSON; '-' is standard input) and send them to the ingest server;\n"
	"        what cannot be delivered is kept in the spool\n"
	"drain   send every stream of the spool; files are removed once the server has them,\n"
	"        streams it rejects move to SPOOL/rejected/ with a .error file beside them\n"
	"import  convert profiler output into streams (one per FILE, or one per set of sample\n"
	"        labels for pprof and per process for OTLP), then ship them, or write them as\n"
	"        NDJSON with -o (docs/import.md)\n"
	"collect the host's collector for guarded programs, until SIGTERM: watches their units,\n"
	"        ships their violations, reports them; the programs start no thread\n"
	"        (docs/guard.md \"The host's collector\")\n"
	"\n"
	"Options (defaults in brackets):\n"
	"  --url URL[,URL...]       ingest server(s), tried in turn when one cannot be reached or\n"
	"                           answers 5xx [$SM_URL, else http://127.0.0.1:8080]\n"
	"  --token TOKEN            ingest token [$SM_TOKEN]\n"
	"  --token-file FILE        read the token from FILE\n"
	"  --spool DIR              spool directory [$SM_SPOOL, else /var/spool/stackmine if\n"
	"                           writable, else ~/.cache/stackmine/spool]\n"
	"  --spool-max SIZE         most bytes the spool may hold (k, M, G suffixes) [1G]\n"
	"  --retries N              retries of a batch after its first attempt [5]\n"
	"  --timeout SECONDS        per request, connecting included [30]\n"
	"  --batch N                streams per request [16]\n"
	"  --batch-bytes SIZE       uncompressed bytes per request [4M]\n"
	"  -v, --verbose            log each request, retry and spooled stream\n"
	"  -h, --help               this text\n"
	"\n"
	"Import options:\n"
	"  --format FORMAT          perf (`perf script`), folded, pprof (protobuf or legacy),\n"
	"                           otlp (OTLP profiles JSON), bcc-offcpu, bcc-offwaketime,\n"
	"                           bcc-wakeuptime, bcc-profile; plain or gzip [auto: told\n"
	"                           from the file's first bytes]\n"
	"  --host H                 host of the streams [this host's name]\n"
	"  --app A                  application [imported]\n"
	"  --version V, --build-id B\n"
	"  --label K=V              a label; may be repeated (at most 64)\n"
	"  --symptom-tid N          thread of the symptom [the costliest thread]\n"
	"  --symptom-comm NAME      choose the symptom thread among those named NAME\n"
	"  --window START_NS:END_NS symptom window [the capture's bounds]\n"
	"  --sample-period-ns N     cost of one on-CPU sample [inferred, else 10 ms]\n"
	"  --event NAME             perf: only samples of this event\n"
	"  --sample-type NAME       pprof: the sample type to read (e.g. delay) [the time-\n"
	"                           valued one: cpu, then delay, off_cpu, wall, time]\n"
	"  -o FILE                  write NDJSON to FILE ('-': standard output) instead of sending\n"
	"\n"
	"Collect options:\n"
	"  --dir DIR                the guarded processes' regions [/run/stackmine/guard]\n"
	"  --report-s N             each process's report to the server, every N seconds; 0: none [60]\n"
	"  --tick-ms N              the watchdog's tick at most (a process's own may be shorter) [100]\n"
	"  (the URL, token file, spool and directory not given default to the guarded programs'\n"
	"  own settings: $SM_GUARD_URL, $SM_GUARD_TOKEN_FILE, $SM_GUARD_SPOOL, $SM_GUARD_COLLECTOR_DIR)\n"
	"\n"
	"Ship and import:\n"
	"  --baseline               the streams are normal units, for comparison (\"role\":\n"
	"                           \"baseline\", docs/analysis.md), not slow ones\n"
	"\n"
	"Exit status: 0 when every stream was delivered (accepted, or already stored), 1 when\n"
	"some were invalid, rejected, spooled or lost, or an input could not be read, 2 on a\n"
	"usage error.\n";

enum {
	OPT_URL = 256, OPT_TOKEN, OPT_TOKEN_FILE, OPT_SPOOL, OPT_SPOOL_MAX, OPT_RETRIES,
	OPT_TIMEOUT, OPT_BATCH, OPT_BATCH_BYTES, OPT_FORMAT, OPT_HOST, OPT_APP, OPT_VERSION,
	OPT_BUILD_ID, OPT_LABEL, OPT_SYMPTOM_TID, OPT_SYMPTOM_COMM, OPT_WINDOW, OPT_PERIOD,
	OPT_EVENT, OPT_BASELINE, OPT_SAMPLE_TYPE, OPT_DIR, OPT_REPORT_S, OPT_TICK_MS,
};

static const struct option long_opts[] = {
	{ "url", required_argument, NULL, OPT_URL },
	{ "token", required_argument, NULL, OPT_TOKEN },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "spool", required_argument, NULL, OPT_SPOOL },
	{ "spool-max", required_argument, NULL, OPT_SPOOL_MAX },
	{ "retries", required_argument, NULL, OPT_RETRIES },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "batch", required_argument, NULL, OPT_BATCH },
	{ "batch-bytes", required_argument, NULL, OPT_BATCH_BYTES },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "host", required_argument, NULL, OPT_HOST },
	{ "app", required_argument, NULL, OPT_APP },
	{ "version", required_argument, NULL, OPT_VERSION },
	{ "build-id", required_argument, NULL, OPT_BUILD_ID },
	{ "label", required_argument, NULL, OPT_LABEL },
	{ "symptom-tid", required_argument, NULL, OPT_SYMPTOM_TID },
	{ "symptom-comm", required_argument, NULL, OPT_SYMPTOM_COMM },
	{ "window", required_argument, NULL, OPT_WINDOW },
	{ "sample-period-ns", required_argument, NULL, OPT_PERIOD },
	{ "event", required_argument, NULL, OPT_EVENT },
	{ "sample-type", required_argument, NULL, OPT_SAMPLE_TYPE },
	{ "baseline", no_argument, NULL, OPT_BASELINE },
	{ "dir", required_argument, NULL, OPT_DIR },
	{ "report-s", required_argument, NULL, OPT_REPORT_S },
	{ "tick-ms", required_argument, NULL, OPT_TICK_MS },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct args {
	const char *cmd;
	struct ship_opts ship;
	const char *token_file;
	int verbose;
	/* import */
	bool import_opt;             /* an import-only option was given */
	const char *format, *out;
	struct import_opts imp;
	struct wire_label labels[WIRE_MAX_LABELS];
	char hostname[256];
	bool url_given;
	/* collect */
	bool collect_opt;
	const char *dir;
	int64_t report_s, tick_ms;
};

static const struct cli cl = { "sm-agent", NULL }, clh = { "sm-agent", "(sm-agent --help lists the options)" };

static int bad_value(int opt, const char *val, const char *why)
{
	const char *name = cli_opt_name(long_opts, opt);

	return cli_bad(&cl, name, val, why);
}

/* The token from a file: its first line, without surrounding blanks. */
static int read_token_file(const char *path, char *out, size_t outlen)
{
	char *data;
	size_t len, s = 0, e;

	if (util_read_file(path, 4096, &data, &len) < 0) {
		fprintf(stderr, "sm-agent: --token-file %s: %s\n", path,
			errno == EFBIG ? "larger than 4 KiB" : strerror(errno));
		return -1;
	}
	while (s < len && (data[s] == ' ' || data[s] == '\t' || data[s] == '\r' || data[s] == '\n'))
		s++;
	for (e = s; e < len && data[e] != '\n' && data[e] != '\r'; e++)
		;
	while (e > s && (data[e - 1] == ' ' || data[e - 1] == '\t'))
		e--;
	if (e == s || e - s >= outlen) {
		fprintf(stderr, "sm-agent: --token-file %s: no token in it\n", path);
		free(data);
		return -1;
	}
	memcpy(out, data + s, e - s);
	out[e - s] = '\0';
	free(data);
	return 0;
}

/* SM_SPOOL, else the system spool when this user may write it, else one in ~/.cache. */
static const char *default_spool(char *buf, size_t len)
{
	const char *env = getenv("SM_SPOOL"), *home = getenv("HOME");

	if (env && *env)
		return env;
	if (access("/var/spool/stackmine", W_OK) == 0)
		return "/var/spool/stackmine";
	if (!home || !*home) {
		struct passwd *pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (!home)
		return NULL;
	snprintf(buf, len, "%s/.cache/stackmine/spool", home);
	return buf;
}

static int parse_import_opt(struct args *c, int o, char *arg)
{
	int64_t v, w;
	char *colon, *eq;

	c->import_opt = true;
	switch (o) {
	case OPT_FORMAT:
		if (!import_format_find(arg))
			return bad_value(o, arg, "must be perf, folded, pprof, otlp, bcc-offcpu, "
					 "bcc-offwaketime, bcc-wakeuptime, bcc-profile or auto");
		c->format = arg;
		return 0;
	case OPT_HOST: c->imp.host = arg; return 0;
	case OPT_APP: c->imp.app = arg; return 0;
	case OPT_VERSION: c->imp.version = arg; return 0;
	case OPT_BUILD_ID: c->imp.build_id = arg; return 0;
	case OPT_SYMPTOM_COMM: c->imp.symptom_comm = arg; return 0;
	case OPT_EVENT: c->imp.event = arg; return 0;
	case OPT_SAMPLE_TYPE: c->imp.sample_type = arg; return 0;
	case 'o': c->out = arg; return 0;
	case OPT_LABEL:
		eq = strchr(arg, '=');
		if (!eq || eq == arg)
			return bad_value(o, arg, "must be KEY=VALUE");
		if (c->imp.nlabels == WIRE_MAX_LABELS)
			return bad_value(o, arg, "more than 64 labels");
		/* the key is cut out of argv in place: argv lives as long as the run */
		*eq = '\0';
		c->labels[c->imp.nlabels].key = arg;
		c->labels[c->imp.nlabels].value = eq + 1;
		c->imp.nlabels++;
		return 0;
	case OPT_SYMPTOM_TID:
		if (util_parse_i64(arg, 0, INT32_MAX, &v) < 0)
			return bad_value(o, arg, "must be a thread id from 0 to 2147483647");
		c->imp.symptom_tid = v;
		return 0;
	case OPT_PERIOD:
		if (util_parse_i64(arg, 1, WIRE_MAX_TIME_NS, &v) < 0)
			return bad_value(o, arg, "must be a positive number of nanoseconds");
		c->imp.sample_period_ns = v;
		return 0;
	case OPT_WINDOW: {
		char a[32];

		colon = strchr(arg, ':');
		if (!colon || (size_t)(colon - arg) >= sizeof(a))
			return bad_value(o, arg, "must be START_NS:END_NS");
		memcpy(a, arg, (size_t)(colon - arg));
		a[colon - arg] = '\0';
		if (util_parse_i64(a, 0, WIRE_MAX_TIME_NS, &v) < 0 ||
		    util_parse_i64(colon + 1, 0, WIRE_MAX_TIME_NS, &w) < 0 || w < v)
			return bad_value(o, arg, "must be START_NS:END_NS with 0 <= START <= END");
		c->imp.window_start_ns = v;
		c->imp.window_end_ns = w;
		return 0;
	}
	}
	return 0;
}

/* Parses argv after the command; 0, or the exit status (2) of a usage error, or -1 for --help. */
static int parse_args(struct args *c, int argc, char **argv)
{
	const char *env;
	int o;

	ship_opts_init(&c->ship);
	import_opts_init(&c->imp);
	c->report_s = 60;
	c->tick_ms = 100;
	env = getenv("SM_URL");
	c->ship.url = env && *env ? env : "http://127.0.0.1:8080";
	env = getenv("SM_TOKEN");
	c->ship.token = env && *env ? env : NULL;
	optind = 1;
	while ((o = getopt_long(argc, argv, "hvo:", long_opts, NULL)) != -1) {
		int64_t v = 0;
		uint64_t sz = 0;
		int rc;

		switch (o) {
		case 'h':
			return -1;
		case 'v':
			c->verbose++;
			continue;
		case OPT_URL: c->ship.url = optarg; c->url_given = true; continue;
		case OPT_BASELINE: c->ship.mark_baseline = 1; continue;
		case OPT_TOKEN: c->ship.token = optarg; c->token_file = NULL; continue;
		case OPT_TOKEN_FILE: c->token_file = optarg; continue;
		case OPT_SPOOL: c->ship.spool_dir = optarg; continue;
		case OPT_SPOOL_MAX: case OPT_BATCH_BYTES:
			if (cli_size(&cl, cli_opt_name(long_opts, o), optarg, 1024, (uint64_t)1 << 40, &sz))
				return 2;
			if (o == OPT_SPOOL_MAX)
				c->ship.spool_max = sz;
			else
				c->ship.batch_bytes = (size_t)sz;
			continue;
		case OPT_RETRIES:
			if (cli_int(&cl, cli_opt_name(long_opts, o), optarg, 0, 100, &v))
				return 2;
			c->ship.max_attempts = (int)v + 1;
			continue;
		case OPT_TIMEOUT:
			if (cli_seconds(&cl, cli_opt_name(long_opts, o), optarg, 1, 86400, &v))
				return 2;
			c->ship.timeout_s = (long)v;
			continue;
		case OPT_BATCH:
			if (cli_int(&cl, cli_opt_name(long_opts, o), optarg, 1, 100000, &v))
				return 2;
			c->ship.batch_count = (size_t)v;
			continue;
		case OPT_DIR:
			if (optarg[0] != '/')
				return bad_value(o, optarg, "not an absolute path");
			c->dir = optarg;
			c->collect_opt = true;
			continue;
		case OPT_REPORT_S:
			if (cli_int(&cl, cli_opt_name(long_opts, o), optarg, 0, 86400, &c->report_s))
				return 2;
			c->collect_opt = true;
			continue;
		case OPT_TICK_MS:
			if (cli_int(&cl, cli_opt_name(long_opts, o), optarg, 1, 60000, &c->tick_ms))
				return 2;
			c->collect_opt = true;
			continue;
		case '?':
			return cli_fail(&clh, "bad option");
		default:
			if ((rc = parse_import_opt(c, o, optarg)) != 0)
				return rc;
			continue;
		}
	}
	return 0;
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* SIGINT/SIGTERM: stop sending and spool what is queued, rather than die with
 * streams in memory (read from a pipe, they would be gone). */
static void install_signals(void)
{
	struct sigaction sa;

	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;  /* no SA_RESTART: it must cut a backoff sleep short */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

struct report_ctx {
	int verbose;
	char last_why[256];      /* the last spooling reason printed */
};

static void print_report(void *ctx, enum ship_event ev, const char *origin, const char *id,
			 const char *msg)
{
	struct report_ctx *rc = ctx;
	const char *what;

	switch (ev) {
	case SHIP_EV_INVALID: what = "invalid stream"; break;
	case SHIP_EV_REJECTED: what = "rejected by the server"; break;
	case SHIP_EV_LOST: what = "NOT delivered and NOT spooled"; break;
	case SHIP_EV_SPOOLED: what = "spooled"; break;
	case SHIP_EV_KEPT: what = "kept in the spool"; break;
	default: what = "?"; break;
	}
	/* spooling is summed up at the end; one line per stream only on request,
	 * otherwise a server's refusal once each time it changes */
	if ((ev == SHIP_EV_SPOOLED || ev == SHIP_EV_KEPT) && !rc->verbose) {
		/* giving up, stopping and interruptions have their own line at the end */
		if (strncmp(msg, "server answered ", 16) == 0 && strcmp(rc->last_why, msg) != 0) {
			snprintf(rc->last_why, sizeof(rc->last_why), "%s", msg);
			fprintf(stderr, "sm-agent: %s: streams %s: %s\n", origin, what, msg);
		}
		return;
	}
	if (*id)
		fprintf(stderr, "sm-agent: %s: %s %s: %s\n", origin, what, id, msg);
	else
		fprintf(stderr, "sm-agent: %s: %s: %s\n", origin, what, msg);
}

/* Prints the totals; returns the exit status they call for. */
static int summarize(const char *cmd, const struct shipper *sh, int failed)
{
	const struct ship_counters *c = shipper_counters(sh);

	if (interrupted && !shipper_stopped(sh))
		fprintf(stderr, "sm-agent: interrupted\n");
	if (shipper_stopped(sh))
		fprintf(stderr, "sm-agent: %s\n", shipper_error(sh));
	fprintf(stderr,
		"sm-agent: %s: %llu accepted, %llu duplicates, %llu rejected, %llu invalid, "
		"%llu spooled, %llu lost (%llu requests", cmd,
		(unsigned long long)c->accepted, (unsigned long long)c->duplicates,
		(unsigned long long)c->rejected, (unsigned long long)c->invalid,
		(unsigned long long)c->spooled, (unsigned long long)c->lost,
		(unsigned long long)c->requests);
	if (c->failovers)
		fprintf(stderr, ", %llu switch%s to the next server", (unsigned long long)c->failovers,
			c->failovers == 1 ? "" : "es");
	fputs(")\n", stderr);
	if (failed || interrupted || shipper_stopped(sh) || c->rejected || c->invalid || c->spooled || c->lost)
		return 1;
	return 0;
}

static int cmd_ship(struct args *c, struct shipper *sh, int nfiles, char **files)
{
	int failed = 0, rc = 0;

	for (int i = 0; i < nfiles && rc != SHIP_EFATAL && !interrupted; i++) {
		/* an unreadable file does not stop the others; out of memory does */
		rc = shipper_add_file(sh, files[i]);
		if (rc == SHIP_EFATAL || rc == SHIP_EINPUT) {
			fprintf(stderr, "sm-agent: %s\n", shipper_error(sh));
			failed = 1;
		}
	}
	if (shipper_flush(sh) < 0) {
		fprintf(stderr, "sm-agent: %s\n", shipper_error(sh));
		failed = 1;
	}
	return summarize(c->cmd, sh, failed);
}

static int cmd_drain(struct args *c, struct shipper *sh)
{
	int failed = 0;

	if (shipper_drain(sh) < 0) {
		fprintf(stderr, "sm-agent: %s\n", shipper_error(sh));
		failed = 1;
	}
	return summarize(c->cmd, sh, failed);
}

static int cmd_import(struct args *c, struct shipper *sh, int nfiles, char **files)
{
	struct buf line = BUF_INIT(0);
	struct importer *im;
	FILE *out = NULL;
	int failed = 0;

	im = importer_open(import_format_find(c->format), &c->imp);
	if (!im) {
		fprintf(stderr, "sm-agent: out of memory\n");
		return 1;
	}
	if (c->out) {
		out = strcmp(c->out, "-") == 0 ? stdout : fopen(c->out, "w");
		if (!out) {
			fprintf(stderr, "sm-agent: -o %s: %s\n", c->out, strerror(errno));
			importer_free(im);
			return 1;
		}
	}
	for (int i = 0; i < nfiles && !interrupted; i++) {
		if (importer_run(im, files[i]) < 0) {
			fprintf(stderr, "sm-agent: %s\n", importer_error(im));
			failed = 1;
			continue;
		}
		for (size_t k = 0; k < importer_count(im); k++) {
			struct wire_stream s = *importer_stream(im, k);

			if (c->verbose)
				fprintf(stderr, "sm-agent: %s (%s): stream %s, %zu events, %zu stacks\n",
					files[i], importer_format(im), s.stream_id, s.nevents, s.nstacks);
			if (!out) {
				if (shipper_add_stream(sh, &s, files[i]) == SHIP_EFATAL) {
					fprintf(stderr, "sm-agent: %s\n", shipper_error(sh));
					failed = 1;
					goto out_run;
				}
				continue;
			}
			buf_reset(&line);
			if (wire_write_json(&s, &line) < 0 || buf_putc(&line, '\n') < 0 ||
			    fwrite(line.data, 1, line.len, out) != line.len) {
				fprintf(stderr, "sm-agent: %s: cannot write the stream to %s\n", files[i],
					c->out);
				failed = 1;
			}
		}
	}
out_run:
	buf_release(&line);
	importer_free(im);
	if (out) {
		if (interrupted) {
			fprintf(stderr, "sm-agent: interrupted\n");
			failed = 1;
		}
		if ((out == stdout ? fflush(out) : fclose(out)) != 0) {
			fprintf(stderr, "sm-agent: -o %s: %s\n", c->out, strerror(errno));
			failed = 1;
		}
		return failed;
	}
	if (shipper_flush(sh) < 0) {
		fprintf(stderr, "sm-agent: %s\n", shipper_error(sh));
		failed = 1;
	}
	return summarize(c->cmd, sh, failed);
}

/* The collector's settings not given as options: the guarded programs' own (SM_GUARD_*, from
 * /etc/stackmine/agent.conf under systemd), so that one file configures both. */
static void collect_defaults(struct args *c)
{
	const char *v;

	if (!c->url_given && (v = getenv("SM_GUARD_URL")) && *v)
		c->ship.url = v;
	if (!c->ship.token && !c->token_file && (v = getenv("SM_GUARD_TOKEN_FILE")) && *v)
		c->token_file = v;
	if (!c->ship.spool_dir && (v = getenv("SM_GUARD_SPOOL")) && *v)
		c->ship.spool_dir = v;
	if (!c->dir && (v = getenv("SM_GUARD_COLLECTOR_DIR")) && *v == '/')
		c->dir = v;
}

/* The host's collector, until SIGTERM or SIGINT (docs/guard.md "The host's collector"). */
static int cmd_collect(struct args *c)
{
	struct collect_opts o;
	struct collector *col;
	char err[512];
	int rc;

	memset(&o, 0, sizeof(o));
	o.dir = c->dir ? c->dir : "/run/stackmine/guard";
	o.ship = c->ship;
	o.ship.cancel = NULL;   /* the end is the collector's: what it holds is shipped first */
	o.report_ns = c->report_s * 1000000000LL;
	o.tick_ns = c->tick_ms * 1000000LL;
	o.stop = &interrupted;
	if (c->verbose)
		log_init("agent", LOG_INFO);
	col = collector_open(&o, err, sizeof(err));
	if (!col) {
		fprintf(stderr, "sm-agent: collect: %s\n", err);
		return 2;
	}
	rc = collector_run(col);
	collector_free(col);
	return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	static struct args c;
	struct report_ctx rctx;
	struct shipper *sh = NULL;
	char token[4097], spool[4096], err[512];
	int rc;

	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	c.cmd = argv[1];
	if (strcmp(c.cmd, "ship") != 0 && strcmp(c.cmd, "drain") != 0 && strcmp(c.cmd, "import") != 0 &&
	    strcmp(c.cmd, "collect") != 0)
		return cli_fail(&clh, "unknown command '%s'; it is ship, drain, import or collect", c.cmd);
	rc = parse_args(&c, argc - 1, argv + 1);
	if (rc == -1) {
		fputs(usage, stdout);
		return 0;
	}
	if (rc)
		return rc;
	argc -= optind + 1;
	argv += optind + 1;
	if (c.import_opt && strcmp(c.cmd, "import") != 0)
		return cli_fail(&clh, "import options do not apply to '%s'", c.cmd);
	if (c.collect_opt && strcmp(c.cmd, "collect") != 0)
		return cli_fail(&clh, "collect options do not apply to '%s'", c.cmd);
	if ((strcmp(c.cmd, "drain") == 0 || strcmp(c.cmd, "collect") == 0) && argc > 0)
		return cli_fail(&clh, "%s takes no files (got '%s')", c.cmd, argv[0]);
	if (strcmp(c.cmd, "drain") != 0 && strcmp(c.cmd, "collect") != 0 && argc == 0)
		return cli_fail(&clh, "%s: no FILE given", c.cmd);
	if (strcmp(c.cmd, "import") == 0) {
		if (!c.format)
			c.format = "auto";
		if (!c.imp.host) {
			if (gethostname(c.hostname, sizeof(c.hostname) - 1) < 0 || !c.hostname[0])
				snprintf(c.hostname, sizeof(c.hostname), "unknown");
			c.imp.host = c.hostname;
		}
		if (!c.imp.app)
			c.imp.app = "imported";
		if (c.ship.mark_baseline)
			c.imp.role = WIRE_ROLE_BASELINE;
		c.imp.labels = c.labels;
	}
	if (strcmp(c.cmd, "collect") == 0)
		collect_defaults(&c);
	if (c.token_file) {
		if (read_token_file(c.token_file, token, sizeof(token)) < 0)
			return 2;
		c.ship.token = token;
	}
	if (!c.ship.spool_dir)
		c.ship.spool_dir = default_spool(spool, sizeof(spool));

	install_signals();
	c.ship.cancel = &interrupted;
	log_init("agent", c.verbose ? LOG_DEBUG : LOG_WARN);
	memset(&rctx, 0, sizeof(rctx));
	rctx.verbose = c.verbose;
	c.ship.report = print_report;
	c.ship.report_ctx = &rctx;
	if (strcmp(c.cmd, "collect") == 0)
		return cmd_collect(&c);
	if (!(strcmp(c.cmd, "import") == 0 && c.out)) {
		sh = shipper_open(&c.ship, err, sizeof(err));
		if (!sh) {
			fprintf(stderr, "sm-agent: %s\n", err);
			return 2;
		}
	}
	if (strcmp(c.cmd, "ship") == 0)
		rc = cmd_ship(&c, sh, argc, argv);
	else if (strcmp(c.cmd, "drain") == 0)
		rc = cmd_drain(&c, sh);
	else
		rc = cmd_import(&c, sh, argc, argv);
	shipper_free(sh);
	return rc;
}
