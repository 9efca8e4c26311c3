/*
 * sm-miner: mining runs over the stored trace streams (run, worker, show) and
 * the sequential-pattern engine on SPMF files (spmf). See docs/mining.md.
 */
#include "common/arena.h"
#include "common/cli.h"
#include "common/db.h"
#include "common/fmt.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "common/util.h"
#include "common/webhook.h"
#include "miner/bide.h"
#include "miner/compare.h"
#include "miner/params.h"
#include "miner/run.h"
#include "miner/worker.h"
#include "miner/spmf.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: sm-miner [--db CONNINFO] COMMAND [OPTIONS]\n"
	"\n"
	"Commands:\n"
	"  run [PARAMS] [--queue] [--threads N] [--quiet] [--part-streams N]\n"
	"        mine now (or with --queue: queue the run for the workers and print its id)\n"
	"  worker [--threads N] [--once] [--lease S] [--part-streams N] [--db-read CONNINFO]\n"
	"         [--webhook-allow CIDR[,CIDR]...]\n"
	"        take queued runs from the database and mine them, until SIGTERM\n"
	"        (--once: stop when the queue is empty). A run of more than N streams (1000) is cut\n"
	"        into parts of N that every worker helps with (0: never cut); a run or part whose\n"
	"        worker has not beaten for S seconds (60) is taken by another. --db-read: read the\n"
	"        events from this server (a standby) once it has replayed what the run selected.\n"
	"        Alerts never go to loopback, link-local or private addresses but those of\n"
	"        --webhook-allow (repeatable; e.g. 127.0.0.0/8)\n"
	"  compare A B [--limit N]\n"
	"        run B against run A (before): clusters matched by signature and medoid similarity,\n"
	"        each new, gone, grown, shrunk or unchanged by its cost per stream, with a 95 %%\n"
	"        interval (docs/analysis.md); --limit rows (default 20)\n"
	"  clusters RUN [--limit N]\n"
	"        a run's costliest clusters (by excess cost, else by total cost) with their titles,\n"
	"        the frames that tell each apart from the run's other clusters\n"
	"  show RUN [--limit N] [--brief]\n"
	"        a run's status, counts, timings and its costliest patterns with frame names\n"
	"        (--brief: only the innermost 4 frames of each)\n"
	"  spmf (--closed | --maximal) (--minsup N | --minsup-rel F) [--threads N] IN OUT\n"
	"        mine an SPMF sequence database (one item per itemset) with count support and\n"
	"        write the patterns in SPMF's format (OUT '-' = stdout)\n"
	"\n"
	"Run parameters (as POST /api/v1/runs takes them; docs/mining.md):\n"
	"  --params FILE            a JSON document with the parameters ('-' = stdin)\n"
	"  --app APP                required\n"
	"  --kind wait|run|both     which stacks to mine [both]\n"
	"  --aoi waitgraph|thread|critical|stream   the events that matter [waitgraph]\n"
	"  --include GLOB, --exclude GLOB   frame filters (repeatable)\n"
	"  --threshold-ns N | --threshold-fraction F   the cost threshold C [fraction 0.01]\n"
	"  --threshold-guideline S,D  or by the paper's guideline: C = S x D ns x the streams\n"
	"                           selected (bugs hitting a share S of them with a delay D each)\n"
	"  --linkage average|single|complete, --cut D   clustering [average, 0.5]\n"
	"  --no-baseline            do not measure the clusters in the baseline streams\n"
	"  --bootstrap N            replicates of the excess cost's interval [200; 0: none]\n"
	"  --version V, --host H, --label K=V (repeatable), --since T, --until T\n"
	"                           stream filters (T: RFC 3339 time)\n"
	"\n"
	"Options:\n"
	"  --db CONNINFO   libpq connection string or URI [PG* environment]\n"
	"  -h, --help      this text\n"
	"\n"
	"Exit status: 0 done, 1 failed, 2 usage error.\n";

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static const struct cli cl = { "sm-miner", "(see sm-miner --help)" };

/* fmt takes one %s: arg */
static int usage_error(const char *fmt, const char *arg)
{
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, arg);
	return cli_fail(&cl, "%s", msg);
}

enum {
	O_PARAMS = 256, O_APP, O_KIND, O_AOI, O_INCLUDE, O_EXCLUDE, O_TNS, O_TFRAC, O_TGUIDE, O_LINKAGE, O_CUT,
	O_VERSION, O_HOST, O_LABEL, O_SINCE, O_UNTIL, O_QUEUE, O_THREADS, O_QUIET, O_ONCE, O_LIMIT,
	O_CLOSED, O_MAXIMAL, O_MINSUP, O_MINSUP_REL, O_BRIEF, O_NO_BASELINE, O_BOOTSTRAP, O_LEASE,
	O_PART_STREAMS, O_DB_READ, O_WEBHOOK_ALLOW,
};

static const struct option cmd_opts[] = {
	{ "params", required_argument, NULL, O_PARAMS },
	{ "app", required_argument, NULL, O_APP },
	{ "kind", required_argument, NULL, O_KIND },
	{ "aoi", required_argument, NULL, O_AOI },
	{ "include", required_argument, NULL, O_INCLUDE },
	{ "exclude", required_argument, NULL, O_EXCLUDE },
	{ "threshold-ns", required_argument, NULL, O_TNS },
	{ "threshold-fraction", required_argument, NULL, O_TFRAC },
	{ "threshold-guideline", required_argument, NULL, O_TGUIDE },
	{ "linkage", required_argument, NULL, O_LINKAGE },
	{ "cut", required_argument, NULL, O_CUT },
	{ "no-baseline", no_argument, NULL, O_NO_BASELINE },
	{ "bootstrap", required_argument, NULL, O_BOOTSTRAP },
	{ "version", required_argument, NULL, O_VERSION },
	{ "host", required_argument, NULL, O_HOST },
	{ "label", required_argument, NULL, O_LABEL },
	{ "since", required_argument, NULL, O_SINCE },
	{ "until", required_argument, NULL, O_UNTIL },
	{ "queue", no_argument, NULL, O_QUEUE },
	{ "threads", required_argument, NULL, O_THREADS },
	{ "quiet", no_argument, NULL, O_QUIET },
	{ "once", no_argument, NULL, O_ONCE },
	{ "lease", required_argument, NULL, O_LEASE },
	{ "part-streams", required_argument, NULL, O_PART_STREAMS },
	{ "db-read", required_argument, NULL, O_DB_READ },
	{ "webhook-allow", required_argument, NULL, O_WEBHOOK_ALLOW },
	{ "limit", required_argument, NULL, O_LIMIT },
	{ "closed", no_argument, NULL, O_CLOSED },
	{ "maximal", no_argument, NULL, O_MAXIMAL },
	{ "minsup", required_argument, NULL, O_MINSUP },
	{ "minsup-rel", required_argument, NULL, O_MINSUP_REL },
	{ "brief", no_argument, NULL, O_BRIEF },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

struct args {
	struct run_params p;
	const char *params_file;
	bool cli_params;              /* any run parameter given as an option */
	bool queue, quiet, once, brief;
	int threads;
	int lease_s;                  /* 0: the default */
	const char *db_read;
	struct webhook_nets webhook_allow; /* internal networks alerts may go to */
	int64_t part_streams;         /* -1: the default */
	int64_t limit;
	int mode;                     /* O_CLOSED / O_MAXIMAL */
	int64_t minsup;
	double minsup_rel;
	const char *globs[2][PARAMS_MAX_GLOBS];
	size_t nglobs[2];
	struct buf labels;
	struct jsonw lw;              /* writes labels */
};

/* Parse a subcommand's options; positional arguments are left in argv[optind..]. */
static int parse_cli(int argc, char **argv, struct args *c)
{
	int o;
	int64_t v;

	params_init(&c->p);
	c->limit = 20;
	c->minsup = -1;
	c->minsup_rel = -1;
	optind = 1;
	while ((o = getopt_long(argc, argv, "h", cmd_opts, NULL)) != -1) {
		if ((o >= O_APP && o <= O_UNTIL) || o == O_NO_BASELINE || o == O_BOOTSTRAP)
			c->cli_params = true;
		switch (o) {
		case 'h': fputs(usage, stdout); exit(0);
		case O_PARAMS: c->params_file = optarg; break;
		case O_APP: c->p.app = optarg; break;
		case O_KIND:
			if (strcmp(optarg, "wait") == 0)
				c->p.kinds = RUN_KINDS_WAIT;
			else if (strcmp(optarg, "run") == 0)
				c->p.kinds = RUN_KINDS_RUN;
			else if (strcmp(optarg, "both") == 0)
				c->p.kinds = RUN_KINDS_BOTH;
			else
				return usage_error("--kind '%s': must be wait, run or both", optarg);
			break;
		case O_AOI: c->p.aoi = optarg; break;
		case O_INCLUDE: case O_EXCLUDE: {
			int k = o == O_EXCLUDE;
			if (c->nglobs[k] == PARAMS_MAX_GLOBS)
				return usage_error("too many --include/--exclude globs (at most %s)", "64");
			c->globs[k][c->nglobs[k]++] = optarg;
			break;
		}
		case O_TNS:
			if (util_parse_i64(optarg, 1, INT64_MAX - 1, &v) < 0)
				return usage_error("--threshold-ns '%s': a positive number of nanoseconds", optarg);
			c->p.threshold_ns = v;
			break;
		case O_TFRAC:
			if (util_parse_double(optarg, &c->p.threshold_fraction) < 0)
				return usage_error("--threshold-fraction '%s': a number", optarg);
			break;
		case O_TGUIDE: {
			/* SHARE,DELAY_NS */
			const char *comma = strchr(optarg, ',');
			char share[64];
			if (!comma || (size_t)(comma - optarg) >= sizeof(share))
				return usage_error("--threshold-guideline '%s': SHARE,DELAY_NS (e.g. 0.1,300000000)", optarg);
			memcpy(share, optarg, (size_t)(comma - optarg));
			share[comma - optarg] = '\0';
			if (util_parse_double(share, &c->p.guideline.share) < 0 ||
			    util_parse_i64(comma + 1, 1, INT64_MAX, &c->p.guideline.delay_ns) < 0)
				return usage_error("--threshold-guideline '%s': SHARE,DELAY_NS (e.g. 0.1,300000000)", optarg);
			break;
		}
		case O_LINKAGE: c->p.linkage = optarg; break;
		case O_CUT:
			if (util_parse_double(optarg, &c->p.cut) < 0)
				return usage_error("--cut '%s': a number", optarg);
			break;
		case O_NO_BASELINE: c->p.baseline = false; break;
		case O_BOOTSTRAP: {
			int64_t reps;
			if (util_parse_i64(optarg, 0, PARAMS_MAX_BOOTSTRAP, &reps) < 0)
				return usage_error("--bootstrap '%s': an integer from 0 to 10000", optarg);
			c->p.bootstrap = (int)reps;
			break;
		}
		case O_VERSION: c->p.filter.version = optarg; break;
		case O_HOST: c->p.filter.host = optarg; break;
		case O_LABEL: {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg)
				return usage_error("--label '%s': want KEY=VALUE", optarg);
			if (!c->labels.len) {
				jsonw_init_compact(&c->lw, &c->labels);
				jsonw_object(&c->lw);
			}
			jsonw_keyn(&c->lw, optarg, (size_t)(eq - optarg));
			jsonw_str(&c->lw, eq + 1);
			break;
		}
		case O_SINCE: case O_UNTIL:
			if (params_parse_time(optarg, o == O_SINCE ? &c->p.filter.since_ns
							       : &c->p.filter.until_ns) < 0)
				return usage_error("--since/--until '%s': an RFC 3339 time like 2026-11-22T03:00:00Z",
						   optarg);
			break;
		case O_QUEUE: c->queue = true; break;
		case O_QUIET: c->quiet = true; break;
		case O_ONCE: c->once = true; break;
		case O_BRIEF: c->brief = true; break;
		case O_LEASE:
			if (util_parse_i64(optarg, 5, 86400, &v) < 0)
				return usage_error("--lease '%s': seconds, from 5 to 86400", optarg);
			c->lease_s = (int)v;
			break;
		case O_DB_READ: c->db_read = optarg; break;
		case O_WEBHOOK_ALLOW: {
			char err[160];

			if (webhook_nets_add(&c->webhook_allow, optarg, err, sizeof(err)) < 0)
				return usage_error("%s", err);
			break;
		}
		case O_PART_STREAMS:
			if (util_parse_i64(optarg, 0, 100000000, &v) < 0)
				return usage_error("--part-streams '%s': a count of streams, 0 for never", optarg);
			c->part_streams = v;
			break;
		case O_THREADS:
			if (util_parse_i64(optarg, 1, 64, &v) < 0)
				return usage_error("--threads '%s': from 1 to 64", optarg);
			c->threads = (int)v;
			break;
		case O_LIMIT:
			if (util_parse_i64(optarg, 1, 100000, &v) < 0)
				return usage_error("--limit '%s': from 1 to 100000", optarg);
			c->limit = v;
			break;
		case O_CLOSED: case O_MAXIMAL: c->mode = o; break;
		case O_MINSUP:
			if (util_parse_i64(optarg, 1, INT64_MAX - 1, &v) < 0)
				return usage_error("--minsup '%s': a positive count", optarg);
			c->minsup = v;
			break;
		case O_MINSUP_REL:
			if (util_parse_double(optarg, &c->minsup_rel) < 0 || c->minsup_rel <= 0 ||
			    c->minsup_rel > 1)
				return usage_error("--minsup-rel '%s': more than 0 and at most 1", optarg);
			break;
		default:
			return 2;
		}
	}
	c->p.include = c->globs[0];
	c->p.ninclude = c->nglobs[0];
	c->p.exclude = c->globs[1];
	c->p.nexclude = c->nglobs[1];
	if (c->labels.len) {
		jsonw_end(&c->lw);
		if (jsonw_finish(&c->lw) < 0)
			return usage_error("--label: %s", jsonw_error(&c->lw));
		c->p.filter.labels_json = buf_cstr(&c->labels);
	}
	return 0;
}

static int load_params(struct args *c, struct arena *a)
{
	char err[512], *text;
	size_t len;

	if (c->params_file) {
		int rc;
		if (c->cli_params)
			return usage_error("%s", "give the run parameters with --params or as options, not both");
		if (strcmp(c->params_file, "-") == 0) {
			struct buf b = BUF_INIT(1 << 20);
			char tmp[4096];
			size_t n;
			while ((n = fread(tmp, 1, sizeof(tmp), stdin)) > 0)
				if (buf_append(&b, tmp, n) < 0)
					return usage_error("%s", "--params: larger than 1 MiB");
			rc = params_parse(buf_cstr(&b), b.len, a, &c->p, err, sizeof(err));
			buf_release(&b);
		} else {
			if (util_read_file(c->params_file, 1 << 20, &text, &len) < 0) {
				fprintf(stderr, "sm-miner: %s: %s\n", c->params_file, strerror(errno));
				return 2;
			}
			rc = params_parse(text, len, a, &c->p, err, sizeof(err));
			free(text);
		}
		if (rc < 0)
			return usage_error("--params: %s", err);
		return 0;
	}
	if (params_check(&c->p, err, sizeof(err)) < 0)
		return usage_error("%s", err);
	return 0;
}

static void worker_opts(struct miner_opts *mo, const char *conninfo, const struct args *c)
{
	miner_opts_default(mo);
	mo->conninfo = conninfo;
	mo->threads = c->threads;
	mo->progress = !c->quiet;
	mo->cancel = &stop_flag;
	if (c->lease_s)
		mo->lease_s = c->lease_s;
	mo->read_conninfo = c->db_read;
	mo->webhook_allow = &c->webhook_allow;
	if (c->part_streams >= 0)
		mo->part_streams = (size_t)c->part_streams;
}

static int cmd_run(const char *conninfo, struct args *c)
{
	struct miner_opts mo;
	struct miner *m;
	struct arena *a = arena_open(0);
	char err[1024];
	int64_t id;
	int rc;

	if ((rc = load_params(c, a)) != 0)
		goto out;
	worker_opts(&mo, conninfo, c);
	m = miner_open(&mo, err, sizeof(err));
	if (!m) {
		fprintf(stderr, "sm-miner: %s\n", err);
		rc = 1;
		goto out;
	}
	if (c->queue) {
		rc = miner_enqueue(m, &c->p, &id) < 0;
		if (!rc)
			printf("%lld\n", (long long)id);
	} else {
		rc = miner_create_running(m, &c->p, &id) < 0;
		if (!rc) {
			int x;

			fprintf(stderr, "sm-miner: run %lld started\n", (long long)id);
			/* the database went away and came back: the next attempt, unless a worker has it */
			while ((x = miner_execute(m, id, &c->p)) == 2) {
				fprintf(stderr, "sm-miner: run %lld: %s; trying again\n", (long long)id, miner_error(m));
				if ((x = miner_retake(m, id)) != 1) {
					if (x == 0)
						miner_fail(m, "run %lld was taken by a worker after the database came back",
							   (long long)id);
					x = -1;
					break;
				}
			}
			rc = x != 0;
			if (!rc)
				printf("%lld\n", (long long)id);
		}
	}
	if (rc)
		fprintf(stderr, "sm-miner: %s\n", miner_error(m));
	miner_free(m);
out:
	arena_free(a);
	return rc;
}

static int cmd_worker(const char *conninfo, struct args *c)
{
	struct miner_opts mo;
	struct miner *m;
	char err[1024];
	int rc = 0;

	worker_opts(&mo, conninfo, c);
	m = miner_open(&mo, err, sizeof(err));
	if (!m) {
		fprintf(stderr, "sm-miner: %s\n", err);
		return 1;
	}
	rc = miner_work(m, c->once) < 0 ? 1 : 0;
	miner_free(m);
	return rc;
}

/* What show and clusters begin with: RUN checked, --limit as text into lim, a connection (caller
 * finishes it). NULL with *rc the exit status when any fails. */
static PGconn *run_open(const char *conninfo, const struct args *c, const char *cmd, const char *run, char lim[24],
			int *rc)
{
	char err[1024];
	int64_t id;
	PGconn *db;

	if (util_parse_i64(run, 1, INT64_MAX, &id) < 0) {
		*rc = usage_error(cmd, run);
		return NULL;
	}
	snprintf(lim, 24, "%lld", (long long)c->limit);
	db = db_connect(conninfo, err, sizeof(err));
	if (!db) {
		fprintf(stderr, "sm-miner: %s\n", err);
		*rc = 1;
	}
	return db;
}

static int cmd_show(const char *conninfo, struct args *c, const char *run)
{
	char lim[24];
	const char *params[3] = { run, lim, c->brief ? "4" : "512" };
	PGconn *db;
	PGresult *r;
	int rc;

	if (!(db = run_open(conninfo, c, "show '%s': RUN must be a run id", run, lim, &rc)))
		return rc;
	r = PQexecParams(db, "SELECT status, coalesce(error, ''), params::text, counts::text, timings_ms::text"
			     " FROM runs WHERE id = $1", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		fprintf(stderr, "sm-miner: run %s: %s\n", run,
			PQresultStatus(r) == PGRES_TUPLES_OK ? "no such run" : PQresultErrorMessage(r));
		PQclear(r);
		PQfinish(db);
		return 1;
	}
	printf("run %s: %s%s%s\nparams: %s\ncounts: %s\ntimings_ms: %s\n", run, PQgetvalue(r, 0, 0),
	       *PQgetvalue(r, 0, 1) ? ": " : "", PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2),
	       PQgetvalue(r, 0, 3), PQgetvalue(r, 0, 4));
	PQclear(r);
	r = PQexecParams(db,
			 "SELECT p.kind, p.rank, p.cost_ns, p.events, p.streams,"
			 " CASE WHEN cardinality(p.frame_ids) > $3::integer THEN '... > ' ELSE '' END ||"
			 " (SELECT string_agg(f.name, ' > ' ORDER BY u.o) FROM unnest(p.frame_ids)"
			 "   WITH ORDINALITY AS u(fid, o) JOIN frame_names f ON f.id = u.fid"
			 "   WHERE u.o > cardinality(p.frame_ids) - $3::integer)"
			 " FROM patterns p WHERE p.run_id = $1 AND p.rank <= $2::integer"
			 " ORDER BY p.kind DESC, p.rank",
			 3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "sm-miner: %s", PQresultErrorMessage(r));
		PQclear(r);
		PQfinish(db);
		return 1;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		char t[FMT_LEN], e[FMT_LEN], n[FMT_LEN];

		printf("%s #%s  cost %s  events %s  streams %s\n    %s\n",
		       strcmp(PQgetvalue(r, i, 0), "w") == 0 ? "wait" : "run ", PQgetvalue(r, i, 1),
		       fmt_duration(t, (double)db_get_i64(r, i, 2)), fmt_count(e, db_get_i64(r, i, 3)),
		       fmt_count(n, db_get_i64(r, i, 4)), PQgetvalue(r, i, 5));
	}
	PQclear(r);
	PQfinish(db);
	return 0;
}

/* "    a › b › c": the frames ids ("{1,2,3}", outermost first) by name, each shortened as the
 * dashboard's tables do; "-" when none. */
static void print_frames(PGconn *db, const char *ids)
{
	const char *params[1] = { ids };
	PGresult *r = PQexecParams(db, "SELECT f.name FROM unnest($1::integer[]) WITH ORDINALITY AS u(fid, o)"
				       " JOIN frame_names f ON f.id = u.fid ORDER BY u.o", 1, NULL, params, NULL, NULL, 0);
	char t[256];

	fputs("    ", stdout);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) == 0)
		fputs("-", stdout);
	for (int i = 0; PQresultStatus(r) == PGRES_TUPLES_OK && i < PQntuples(r); i++)
		printf("%s%s", i ? " \xe2\x80\xba " : "", fmt_frame_short(t, sizeof(t), PQgetvalue(r, i, 0), 60));
	fputs("\n", stdout);
	PQclear(r);
}

/* "#1  wait  excess 1.2 s [0.9 s, 1.5 s]  total 36.4 s (#3)  1,234 streams  cluster 17", then its title:
 * a run's costliest clusters as people read them (the demo prints these), ranked among all of the
 * run's clusters as the dashboard ranks them. */
static int cmd_clusters(const char *conninfo, struct args *c, const char *run)
{
	char lim[24];
	const char *params[2] = { run, lim };
	PGconn *db;
	PGresult *r;
	int rc;

	if (!(db = run_open(conninfo, c, "clusters '%s': RUN must be a run id", run, lim, &rc)))
		return rc;
	/* the title, or for a run mined before titles the innermost 3 frames of the common part */
	r = PQexecParams(db,
			 "SELECT c.id, c.kind, coalesce(c.run_rank_excess_cost, c.run_rank_total_cost, c.rank_excess_cost,"
			 " c.rank_total_cost) AS rank, c.excess_cost_ns, c.excess_lo_ns, c.excess_hi_ns,"
			 " coalesce(c.run_rank_total_cost, c.rank_total_cost), c.total_cost_ns, c.streams,"
			 " coalesce(c.title_frame_ids, c.common_frame_ids[greatest(cardinality(c.common_frame_ids) - 2, 1):])"
			 " FROM clusters c WHERE c.run_id = $1"
			 " ORDER BY rank, c.id LIMIT $2::integer",
			 2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "sm-miner: %s", PQresultErrorMessage(r));
		PQclear(r);
		PQfinish(db);
		return 1;
	}
	if (PQntuples(r) == 0) {
		PQclear(r);
		r = PQexecParams(db, "SELECT status FROM runs WHERE id = $1", 1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
			fprintf(stderr, "sm-miner: run %s: %s\n", run,
				PQresultStatus(r) == PGRES_TUPLES_OK ? "no such run" : PQresultErrorMessage(r));
			PQclear(r);
			PQfinish(db);
			return 1;
		}
		printf("run %s: %s, no clusters\n", run, PQgetvalue(r, 0, 0));
	}
	for (int i = 0; PQnfields(r) > 1 && i < PQntuples(r); i++) {
		char a[FMT_LEN], b[FMT_LEN], n[FMT_LEN];

		printf("#%s  %s", PQgetvalue(r, i, 2), strcmp(PQgetvalue(r, i, 1), "w") == 0 ? "wait" : "run ");
		if (!PQgetisnull(r, i, 3)) {
			printf("  excess %s", fmt_duration(a, (double)db_get_i64(r, i, 3)));
			if (!PQgetisnull(r, i, 4))
				printf(" %s", fmt_interval(b, (double)db_get_i64(r, i, 4), (double)db_get_i64(r, i, 5)));
		}
		printf("  total %s (#%s)  %s stream%s  cluster %s\n", fmt_duration(a, (double)db_get_i64(r, i, 7)),
		       PQgetvalue(r, i, 6), fmt_count(n, db_get_i64(r, i, 8)), db_get_i64(r, i, 8) == 1 ? "" : "s",
		       PQgetvalue(r, i, 0));
		print_frames(db, PQgetvalue(r, i, 9));
	}
	PQclear(r);
	PQfinish(db);
	return 0;
}

struct spmf_out {
	FILE *f;
	struct spmf_writer *w;
	size_t n;
};

static int emit_spmf(void *ctx, const uint32_t *items, size_t len, uint64_t support,
		     const uint32_t *seqs, size_t nseqs)
{
	struct spmf_out *o = ctx;

	(void)seqs;
	(void)nseqs;
	o->n++;
	return spmf_write_pattern(o->f, items, len, support) < 0;
}

static int cmd_compare(const char *conninfo, struct args *c, const char *sa, const char *sb)
{
	struct compare_opts o;
	struct compare *cmp;
	char err[1024];
	PGconn *db;
	int64_t a, b;
	int rc;

	if (util_parse_i64(sa, 1, INT64_MAX, &a) < 0 || util_parse_i64(sb, 1, INT64_MAX, &b) < 0)
		return usage_error("compare '%s': A and B must be run ids", util_parse_i64(sa, 1, INT64_MAX, &a) ? sa : sb);
	db = db_connect(conninfo, err, sizeof(err));
	if (!db) {
		fprintf(stderr, "sm-miner: %s\n", err);
		return 1;
	}
	compare_opts_init(&o);
	o.threads = c->threads;
	rc = compare_runs(db, a, b, &o, &cmp, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "sm-miner: compare: %s\n", err);
		PQfinish(db);
		return 1;
	}
	{
		char na[FMT_LEN], nb[FMT_LEN], nc[FMT_LEN];

		printf("run %lld (%s streams) against run %lld (%s streams): %s clusters\n", (long long)b,
		       fmt_count(nb, (int64_t)cmp->b_streams), (long long)a, fmt_count(na, (int64_t)cmp->a_streams),
		       fmt_count(nc, (int64_t)cmp->n));
	}
	printf("%-9s %-4s %9s %9s %12s %12s %12s %24s  %s\n", "status", "kind", "A", "B", "A per stream",
	       "B per stream", "change", "95 % interval", "similarity");
	for (size_t i = 0; i < cmp->n && i < (size_t)c->limit; i++) {
		const struct compare_row *r = &cmp->rows[i];
		char ia[24] = "-", ib[24] = "-", ci[FMT_LEN] = "-", sim[32] = "-", ca[FMT_LEN], cb[FMT_LEN], cd[FMT_LEN + 1];

		if (r->a)
			snprintf(ia, sizeof(ia), "%lld", (long long)r->a);
		if (r->b)
			snprintf(ib, sizeof(ib), "%lld", (long long)r->b);
		if (!isnan(r->lo))
			fmt_interval(ci, r->lo, r->hi);
		if (r->signature)
			snprintf(sim, sizeof(sim), "signature %lld", (long long)r->signature);
		else if (!isnan(r->sim))
			snprintf(sim, sizeof(sim), "%.3f", r->sim);
		cd[0] = r->diff >= 0 ? '+' : '\0';
		fmt_duration(cd + (r->diff >= 0), r->diff);
		printf("%-9s %-4s %9s %9s %12s %12s %12s %24s  %s\n", compare_status_name(r->status),
		       r->kind == 'w' ? "wait" : "run", ia, ib, fmt_duration(ca, r->a_cps), fmt_duration(cb, r->b_cps), cd,
		       ci, sim);
		/* its title (mined before titles: the innermost frames of its common part) */
		{
			const uint32_t *f = r->title ? r->title : r->common + (r->ncommon > 3 ? r->ncommon - 3 : 0);
			uint32_t nf = r->title ? r->ntitle : r->ncommon > 3 ? 3 : r->ncommon;
			char ids[3 * 12 + 4];
			int len = 0;

			ids[len++] = '{';
			for (uint32_t k = 0; k < nf && k < 3; k++)
				len += snprintf(ids + len, sizeof(ids) - (size_t)len, k ? ",%u" : "%u", f[k]);
			snprintf(ids + len, sizeof(ids) - (size_t)len, "}");
			print_frames(db, ids);
		}
	}
	compare_free(cmp);
	PQfinish(db);
	return 0;
}

static int cmd_spmf(struct args *c, const char *in, const char *out)
{
	struct spmf *sp;
	struct seqdb db;
	struct bide *b;
	struct bide_opts bo;
	struct bide_stats st;
	struct spmf_out o = { NULL, NULL, 0 };
	int rc = 1;

	if (!c->mode)
		return usage_error("%s", "spmf: give --closed or --maximal");
	if ((c->minsup < 0) == (c->minsup_rel < 0))
		return usage_error("%s", "spmf: give --minsup N or --minsup-rel F (one of them)");
	sp = spmf_open();
	if (!sp || spmf_read(sp, in, &db) < 0) {
		fprintf(stderr, "sm-miner: %s\n", sp ? spmf_error(sp) : "out of memory");
		spmf_free(sp);
		return 1;
	}
	memset(&bo, 0, sizeof(bo));
	bo.mode = c->mode == O_CLOSED ? BIDE_CLOSED : BIDE_MAXIMAL;
	bo.minsup = c->minsup > 0 ? (uint64_t)c->minsup : (uint64_t)ceil(c->minsup_rel * (double)db.n);
	if (bo.minsup == 0)
		bo.minsup = 1;
	bo.threads = c->threads ? c->threads : 2;
	o.f = strcmp(out, "-") == 0 ? stdout : fopen(out, "w");
	if (!o.f) {
		fprintf(stderr, "sm-miner: %s: %s\n", out, strerror(errno));
		spmf_free(sp);
		return 1;
	}
	b = bide_open();
	if (!b) {
		fprintf(stderr, "sm-miner: out of memory\n");
	} else if (bide_mine(b, &db, &bo, emit_spmf, &o) < 0) {
		fprintf(stderr, "sm-miner: %s\n", bide_error(b));
	} else {
		bide_last_stats(b, &st);
		fprintf(stderr, "sm-miner: %zu sequences, minsup %llu: %zu %s patterns in %.3f s\n", db.n,
			(unsigned long long)bo.minsup, o.n, bo.mode == BIDE_CLOSED ? "closed" : "maximal",
			st.ms / 1000);
		rc = 0;
	}
	bide_free(b);
	if (o.f != stdout && fclose(o.f) != 0 && rc == 0) {
		fprintf(stderr, "sm-miner: %s: %s\n", out, strerror(errno));
		rc = 1;
	}
	spmf_free(sp);
	return rc;
}

int main(int argc, char **argv)
{
	const char *conninfo = NULL, *cmd;
	struct args c;
	int i = 1, rc;
	struct sigaction sa;

	memset(&c, 0, sizeof(c));
	c.part_streams = -1;
	c.labels.max = 64 * 1024;
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
			conninfo = argv[++i];
		else if (strncmp(argv[i], "--db=", 5) == 0)
			conninfo = argv[i] + 5;
		else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(usage, stdout);
			return 0;
		} else
			break;
	}
	if (i >= argc) {
		fputs(usage, stderr);
		return 2;
	}
	cmd = argv[i];
	if (strcmp(cmd, "run") && strcmp(cmd, "worker") && strcmp(cmd, "show") && strcmp(cmd, "spmf") &&
	    strcmp(cmd, "compare") && strcmp(cmd, "clusters"))
		return usage_error("unknown command '%s'", cmd);
	rc = parse_cli(argc - i, argv + i, &c);
	if (rc)
		return rc;
	log_init("miner", LOG_INFO);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	argv += i;
	argc -= i;
	if (strcmp(cmd, "run") == 0 || strcmp(cmd, "worker") == 0) {
		if (optind != argc)
			return usage_error("unexpected argument '%s'", argv[optind]);
		rc = strcmp(cmd, "run") == 0 ? cmd_run(conninfo, &c) : cmd_worker(conninfo, &c);
	} else if (strcmp(cmd, "compare") == 0) {
		if (optind + 2 != argc)
			return usage_error("%s", "compare takes two run ids, A (before) and B (after)");
		rc = cmd_compare(conninfo, &c, argv[optind], argv[optind + 1]);
	} else if (strcmp(cmd, "clusters") == 0) {
		if (optind + 1 != argc)
			return usage_error("%s", "clusters takes one RUN id");
		rc = cmd_clusters(conninfo, &c, argv[optind]);
	} else if (strcmp(cmd, "show") == 0) {
		if (optind + 1 != argc)
			return usage_error("%s", "show takes one RUN id");
		rc = cmd_show(conninfo, &c, argv[optind]);
	} else {
		if (optind + 2 != argc)
			return usage_error("%s", "spmf takes IN and OUT");
		rc = cmd_spmf(&c, argv[optind], argv[optind + 1]);
	}
	buf_release(&c.labels);
	return rc;
}
