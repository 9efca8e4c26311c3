/*
 * sm-cluster: the clusterer's command line (docs/clustering.md). Each command
 * is a function taking its own argv (argv[0] = the command name), listed in
 * the table `commands` below with its usage line.
 */
#include "clusterer/linkage.h"
#include "clusterer/signature.h"
#include "common/cli.h"
#include "common/db.h"
#include "common/util.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sm-cluster linkage refuses more points than this (the matrix alone takes n^2 * 4 bytes) */
#define MATRIX_MAX_POINTS 100000
/* longest token of a linkage input (a number) */
#define TOKEN_MAX 64

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage;      /* after "sm-cluster " */
	const char *help;       /* indented lines */
};

static int cmd_linkage(int argc, char **argv);
static int cmd_signatures(int argc, char **argv);
static int cmd_coverage(int argc, char **argv);
static int cmd_triage(int argc, char **argv);

static const struct command commands[] = {
	{ "linkage", cmd_linkage, "linkage [--method average|single|complete] [--flat CUT] IN OUT",
	  "        hierarchical clustering of a condensed distance matrix (IN: n, then the\n"
	  "        n(n-1)/2 distances d(i,j), i < j, row by row) into SciPy's linkage format\n"
	  "        (OUT: n-1 lines 'a b distance size'); '-' = stdin/stdout [average].\n"
	  "        --flat CUT: instead, the flat clusters at distance CUT (as SciPy's\n"
	  "        fcluster(Z, CUT, 'distance')): n lines, the cluster of each point,\n"
	  "        numbered from 0 in the order of their lowest point\n" },
	{ "signatures", cmd_signatures,
	  "signatures [--db CONNINFO] list | create --name N --frame F... [--status S] [--note T]\n"
	  "           [--from-cluster ID] | create --name N --from-problem ID [--status S] [--note T]\n"
	  "           | update ID [--status S] [--note T] | export [OUT] | import IN",
	  "        performance signatures: list them, create one (frames outermost first;\n"
	  "        status open, known or fixed), export all as one JSON document, import one\n"
	  "        (created, or updated by name); '-' = stdin/stdout; --from-problem: a problem's\n"
	  "        signature, one per member cluster (its common part), named N, N #2, ...\n" },
	{ "coverage", cmd_coverage, "coverage [--db CONNINFO] [--signatures all|ID,ID...] [--kind wait|run] RUN",
	  "        the share of RUN's AOI cost of one kind of events (default: wait, unless the\n"
	  "        run mined only run events) that matches the signatures, and each one's\n" },
	{ "triage", cmd_triage, "triage [--db CONNINFO] [--kind wait|run] RUN",
	  "        streams an analyst opens to reach each tenth of the coverage all signatures\n"
	  "        reach, for the random (mean of 100 seeded shuffles), greedy-total (by symptom\n"
	  "        delay), greedy-max (by the longest AOI event) and signature orders\n" },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void print_usage(FILE *f)
{
	size_t i;

	fputs("usage: sm-cluster COMMAND [OPTIONS]\n\nCommands:\n", f);
	for (i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %s\n%s", commands[i].usage, commands[i].help);
	fputs("\nOptions:\n  -h, --help   this text (COMMAND --help: that command's)\n"
	      "\nExit status: 0 done, 1 failed, 2 usage error.\n",
	      f);
}

/* fmt takes one %s: arg; the hint is the command's usage line, or --help */
static int usage_error(const struct command *c, const char *fmt, const char *arg)
{
	char msg[512], hint[512];
	struct cli cl = { "sm-cluster", "(see sm-cluster --help)" };

	snprintf(msg, sizeof(msg), fmt, arg);
	if (c) {
		snprintf(hint, sizeof(hint), "usage: sm-cluster %s", c->usage);
		cl.hint = hint;
	}
	return cli_fail(&cl, "%s", msg);
}

/* "wait" or "run" into 'w' or 'r'. Returns 0 or -1. */
static int parse_kind(const char *s, char *kind)
{
	if (strcmp(s, "wait") == 0)
		*kind = 'w';
	else if (strcmp(s, "run") == 0)
		*kind = 'r';
	else
		return -1;
	return 0;
}

static const char *kind_name(char kind)
{
	return kind == 'w' ? "wait" : "run";
}

/* ---- linkage ---- */

/* Whitespace-separated tokens of a text file, with the line each starts on. */
struct tokens {
	FILE *f;
	const char *name;
	size_t line;            /* of the last token read */
	size_t cur;             /* where the reader is */
	char tok[TOKEN_MAX + 1];
};

/* Returns 1 (a token in t->tok), 0 (end of input) or -1 (an error, already printed). */
static int next_token(struct tokens *t)
{
	int c;
	size_t n = 0;

	do {
		c = getc_unlocked(t->f);
		if (c == '\n')
			t->cur++;
	} while (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f');
	if (c == EOF) {
		if (ferror(t->f)) {
			fprintf(stderr, "sm-cluster: %s: %s\n", t->name, strerror(errno));
			return -1;
		}
		return 0;
	}
	t->line = t->cur;
	while (c != EOF && c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f') {
		if (n == TOKEN_MAX) {
			fprintf(stderr, "sm-cluster: %s:%zu: a token longer than %d bytes\n", t->name, t->line,
				TOKEN_MAX);
			return -1;
		}
		t->tok[n++] = (char)c;
		c = getc_unlocked(t->f);
	}
	t->tok[n] = '\0';
	if (c == '\n')
		t->cur++;
	return 1;
}

/* Reads IN; *dist (caller frees) gets the condensed matrix. Returns 0 or -1 (message printed). */
static int read_matrix(const char *path, size_t *n_out, double **dist)
{
	struct tokens t = { NULL, path, 1, 1, "" };
	int64_t n;
	size_t nd, i;
	double *d = NULL;
	int r;

	*dist = NULL;
	t.f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	if (!t.f) {
		fprintf(stderr, "sm-cluster: %s: %s\n", path, strerror(errno));
		return -1;
	}
	r = next_token(&t);
	if (r == 0)
		fprintf(stderr, "sm-cluster: %s: empty input (expected the number of points)\n", path);
	if (r <= 0)
		goto fail;
	if (util_parse_i64(t.tok, 1, INT64_MAX, &n) < 0) {
		fprintf(stderr, "sm-cluster: %s:%zu: '%s' is not a number of points (an integer >= 1)\n", path,
			t.line, t.tok);
		goto fail;
	}
	if (n > MATRIX_MAX_POINTS) {
		fprintf(stderr, "sm-cluster: %s:%zu: %lld points: at most %d are accepted\n", path, t.line,
			(long long)n, MATRIX_MAX_POINTS);
		goto fail;
	}
	nd = (size_t)n * (size_t)(n - 1) / 2;
	d = malloc((nd ? nd : 1) * sizeof(*d));
	if (!d) {
		fprintf(stderr, "sm-cluster: out of memory for %zu distances\n", nd);
		goto fail;
	}
	for (i = 0; i < nd; i++) {
		size_t first_line = t.line;

		r = next_token(&t);
		if (r < 0)
			goto fail;
		if (r == 0) {
			fprintf(stderr, "sm-cluster: %s:%zu: input ends after %zu of the %zu distances of %lld points\n",
				path, t.cur, i, nd, (long long)n);
			goto fail;
		}
		if (i == 0 && t.line == first_line) {
			fprintf(stderr, "sm-cluster: %s:%zu: the first line must hold only the number of points\n",
				path, t.line);
			goto fail;
		}
		if (util_parse_double(t.tok, &d[i]) < 0) {
			fprintf(stderr, "sm-cluster: %s:%zu: distance %zu: '%s' is not a finite number\n", path, t.line,
				i + 1, t.tok);
			goto fail;
		}
	}
	r = next_token(&t);
	if (r < 0)
		goto fail;
	if (r > 0) {
		fprintf(stderr, "sm-cluster: %s:%zu: more than the %zu distances of %lld points\n", path, t.line, nd,
			(long long)n);
		goto fail;
	}
	if (t.f != stdin)
		fclose(t.f);
	*n_out = (size_t)n;
	*dist = d;
	return 0;
fail:
	if (t.f != stdin)
		fclose(t.f);
	free(d);
	return -1;
}

static int cmd_linkage(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "method", required_argument, NULL, 'm' },
		{ "flat", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct command *self = &commands[0];
	enum linkage_method m = LINKAGE_AVERAGE;
	struct linkage *h = NULL;
	struct linkage_merge *z = NULL;
	uint32_t *labels = NULL;
	double *dist = NULL, cut = 0;
	size_t n = 0, k, nc;
	FILE *out = NULL;
	bool flat = false;
	int c, rc = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (linkage_method_parse(optarg, &m) < 0)
				return usage_error(self, "linkage: unknown method '%s'", optarg);
			break;
		case 'f':
			if (util_parse_double(optarg, &cut) < 0)
				return usage_error(self, "linkage: --flat '%s' is not a number", optarg);
			flat = true;
			break;
		case 'h':
			printf("usage: sm-cluster %s\n%s", self->usage, self->help);
			return 0;
		default:
			return usage_error(self, "%s", "linkage: bad option");
		}
	}
	if (argc - optind != 2)
		return usage_error(self, "%s", "linkage takes IN and OUT");
	if (read_matrix(argv[optind], &n, &dist) < 0)
		return 1;
	h = linkage_open();
	z = malloc((n > 1 ? n - 1 : 1) * sizeof(*z));
	if (!h || !z) {
		fprintf(stderr, "sm-cluster: out of memory\n");
		goto done;
	}
	if (linkage_dense(h, dist, n, m, z) < 0) {
		fprintf(stderr, "sm-cluster: %s\n", linkage_error(h));
		goto done;
	}
	free(dist);
	dist = NULL;
	out = strcmp(argv[optind + 1], "-") == 0 ? stdout : fopen(argv[optind + 1], "w");
	if (!out) {
		fprintf(stderr, "sm-cluster: %s: %s\n", argv[optind + 1], strerror(errno));
		goto done;
	}
	if (flat) {
		labels = malloc(n * sizeof(*labels));
		if (!labels) {
			fprintf(stderr, "sm-cluster: out of memory\n");
			goto done;
		}
		if (linkage_fcluster(h, z, n, cut, labels, &nc) < 0) {
			fprintf(stderr, "sm-cluster: %s\n", linkage_error(h));
			goto done;
		}
		for (k = 0; k < n; k++)
			fprintf(out, "%u\n", (unsigned)labels[k]);
	} else {
		for (k = 0; k + 1 < n; k++)
			fprintf(out, "%u %u %.17g %u\n", (unsigned)z[k].a, (unsigned)z[k].b, z[k].dist,
				(unsigned)z[k].size);
	}
	if (fflush(out) != 0 || ferror(out)) {
		fprintf(stderr, "sm-cluster: %s: %s\n", argv[optind + 1], strerror(errno));
		goto done;
	}
	rc = 0;
done:
	if (out && out != stdout && fclose(out) != 0 && rc == 0) {
		fprintf(stderr, "sm-cluster: %s: %s\n", argv[optind + 1], strerror(errno));
		rc = 1;
	}
	free(dist);
	free(z);
	free(labels);
	linkage_free(h);
	return rc;
}

/* --db CONNINFO as the first option of a database command; returns the connection or NULL. */
static PGconn *connect_db(int *argc, char ***argv)
{
	const char *conninfo = NULL;
	char err[512];
	PGconn *db;

	if (*argc >= 3 && strcmp((*argv)[1], "--db") == 0) {
		conninfo = (*argv)[2];
		(*argv)[2] = (*argv)[0];
		*argv += 2;
		*argc -= 2;
	}
	db = db_connect(conninfo, err, sizeof(err));
	if (!db) {
		fprintf(stderr, "sm-cluster: %s\n", err);
		return NULL;
	}
	if (db_schema_check(db, err, sizeof(err)) < 0) {
		fprintf(stderr, "sm-cluster: %s\n", err);
		PQfinish(db);
		return NULL;
	}
	return db;
}

static int read_all(const char *path, struct buf *b)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	char tmp[65536];
	size_t n;

	if (!f) {
		fprintf(stderr, "sm-cluster: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
		if (buf_append(b, tmp, n) < 0) {
			fprintf(stderr, "sm-cluster: %s: larger than %zu bytes\n", path, b->max);
			if (f != stdin)
				fclose(f);
			return -1;
		}
	if (f != stdin)
		fclose(f);
	buf_cstr(b);
	return 0;
}

static int cmd_signatures(int argc, char **argv)
{
	const struct command *c = &commands[1];
	PGconn *db = connect_db(&argc, &argv);
	char err[512];
	int rc = 1;

	if (!db)
		return 1;
	if (argc < 2) {
		PQfinish(db);
		return usage_error(c, "%s", "signatures: give list, create, export or import");
	}
	if (strcmp(argv[1], "list") == 0) {
		PGresult *r = PQexec(db, "SELECT id, status, name, array_to_string(frames, ' > '), note"
					 " FROM signatures ORDER BY id");
		if (PQresultStatus(r) == PGRES_TUPLES_OK) {
			for (int i = 0; i < PQntuples(r); i++)
				printf("%s\t%s\t%s\t%s\t%s\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
				       PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), PQgetvalue(r, i, 4));
			rc = 0;
		} else {
			fprintf(stderr, "sm-cluster: %s", PQresultErrorMessage(r));
		}
		PQclear(r);
	} else if (strcmp(argv[1], "create") == 0) {
		static const struct option opts[] = {
			{ "name", required_argument, NULL, 'n' }, { "frame", required_argument, NULL, 'f' },
			{ "status", required_argument, NULL, 's' }, { "note", required_argument, NULL, 't' },
			{ "from-cluster", required_argument, NULL, 'c' }, { "from-problem", required_argument, NULL, 'p' },
			{ NULL, 0, NULL, 0 },
		};
		const char *name = NULL, *status = "open", *note = "", *frames[512];
		size_t nf = 0;
		int64_t cl = 0, pr = 0, id;
		int o;

		optind = 1;
		while ((o = getopt_long(argc - 1, argv + 1, "", opts, NULL)) != -1) {
			if (o == 'n')
				name = optarg;
			else if (o == 's')
				status = optarg;
			else if (o == 't')
				note = optarg;
			else if (o == 'f' && nf < 512)
				frames[nf++] = optarg;
			else if (o == 'c' && util_parse_i64(optarg, 1, INT64_MAX, &cl) == 0)
				;
			else if (o == 'p' && util_parse_i64(optarg, 1, INT64_MAX, &pr) == 0)
				;
			else {
				PQfinish(db);
				return usage_error(c, "%s", "signatures create: bad option");
			}
		}
		if (pr && (nf || cl)) {
			PQfinish(db);
			return usage_error(c, "%s", "signatures create --from-problem: takes no --frame nor --from-cluster");
		}
		if (pr) {
			size_t n;

			if (sig_create_from_problem(db, pr, name, status, note, &n, err, sizeof(err)) < 0) {
				fprintf(stderr, "sm-cluster: %s\n", err);
			} else {
				printf("%zu\n", n);
				rc = 0;
			}
		} else if (sig_create(db, name, frames, nf, status, note, cl, &id, err, sizeof(err)) < 0) {
			fprintf(stderr, "sm-cluster: %s\n", err);
		} else {
			printf("%lld\n", (long long)id);
			rc = 0;
		}
	} else if (strcmp(argv[1], "update") == 0 && argc >= 3) {
		const char *status = NULL, *note = NULL;
		int64_t id;
		int i;

		if (util_parse_i64(argv[2], 1, INT64_MAX, &id) < 0) {
			PQfinish(db);
			return usage_error(c, "signatures update '%s': ID must be a signature id", argv[2]);
		}
		for (i = 3; i + 1 < argc; i += 2) {
			if (strcmp(argv[i], "--status") == 0)
				status = argv[i + 1];
			else if (strcmp(argv[i], "--note") == 0)
				note = argv[i + 1];
			else
				break;
		}
		if (i != argc || (!status && !note)) {
			PQfinish(db);
			return usage_error(c, "%s", "signatures update ID: give --status S and/or --note T");
		}
		if (sig_update(db, id, status, note, err, sizeof(err)) < 0)
			fprintf(stderr, "sm-cluster: %s\n", err);
		else
			rc = 0;
	} else if (strcmp(argv[1], "export") == 0) {
		struct buf b = BUF_INIT(0);
		FILE *f = argc > 2 && strcmp(argv[2], "-") != 0 ? fopen(argv[2], "w") : stdout;

		if (!f) {
			fprintf(stderr, "sm-cluster: %s: %s\n", argv[2], strerror(errno));
		} else if (sig_export(db, &b, err, sizeof(err)) < 0) {
			fprintf(stderr, "sm-cluster: %s\n", err);
		} else if (fwrite(b.data, 1, b.len, f) != b.len) {
			fprintf(stderr, "sm-cluster: write failed: %s\n", strerror(errno));
		} else {
			rc = 0;
		}
		if (f && f != stdout && fclose(f) != 0)
			rc = 1;
		buf_release(&b);
	} else if (strcmp(argv[1], "import") == 0 && argc == 3) {
		struct buf b = BUF_INIT((size_t)64 << 20);
		size_t n;

		if (read_all(argv[2], &b) == 0) {
			if (sig_import(db, b.data ? b.data : "", b.len, &n, err, sizeof(err)) < 0)
				fprintf(stderr, "sm-cluster: %s: %s\n", argv[2], err);
			else {
				printf("%zu signatures imported\n", n);
				rc = 0;
			}
		}
		buf_release(&b);
	} else {
		PQfinish(db);
		return usage_error(c, "signatures: unknown subcommand '%s'", argv[1]);
	}
	PQfinish(db);
	return rc;
}

static int cmd_coverage(int argc, char **argv)
{
	const struct command *c = &commands[2];
	PGconn *db = connect_db(&argc, &argv);
	const char *which = "all";
	int64_t run, ids[1024];
	size_t n = 0;
	struct sig_coverage cov;
	char err[512], kind = 0;
	int rc = 1;

	if (!db)
		return 1;
	while (argc >= 3 && (strcmp(argv[1], "--signatures") == 0 || strcmp(argv[1], "--kind") == 0)) {
		if (strcmp(argv[1], "--kind") == 0 && parse_kind(argv[2], &kind) < 0) {
			PQfinish(db);
			return usage_error(c, "--kind '%s': wait or run", argv[2]);
		}
		if (strcmp(argv[1], "--signatures") == 0)
			which = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc != 2 || util_parse_i64(argv[1], 1, INT64_MAX, &run) < 0) {
		PQfinish(db);
		return usage_error(c, "%s", "coverage: give a RUN id");
	}
	if (strcmp(which, "all") != 0) {
		for (const char *p = which; *p && n < 1024;) {
			char *end;
			long long v = strtoll(p, &end, 10);
			if (end == p || v <= 0) {
				PQfinish(db);
				return usage_error(c, "--signatures '%s': all, or ids separated by commas", which);
			}
			ids[n++] = v;
			p = *end == ',' ? end + 1 : end;
			if (*end && *end != ',') {
				PQfinish(db);
				return usage_error(c, "--signatures '%s': all, or ids separated by commas", which);
			}
		}
	}
	if (sig_coverage(db, run, kind, ids, n, &cov, NULL, err, sizeof(err)) < 0) {
		fprintf(stderr, "sm-cluster: %s\n", err);
	} else {
		printf("coverage %.4f  covered %llu ns of %llu ns (%s events)\n", cov.coverage,
		       (unsigned long long)cov.covered_ns, (unsigned long long)cov.total_ns, kind_name(cov.kind));
		for (size_t i = 0; i < cov.nby; i++)
			printf("  %lld\t%llu\t%s\n", (long long)cov.by[i].id,
			       (unsigned long long)cov.by[i].cost_ns, cov.by[i].name);
		free(cov.by);
		rc = 0;
	}
	PQfinish(db);
	return rc;
}

static int cmd_triage(int argc, char **argv)
{
	const struct command *c = &commands[3];
	PGconn *db = connect_db(&argc, &argv);
	struct sig_triage tr;
	char err[512], kind = 0;
	int64_t run;
	int rc = 1;

	if (!db)
		return 1;
	if (argc == 4 && strcmp(argv[1], "--kind") == 0) {
		if (parse_kind(argv[2], &kind) < 0) {
			PQfinish(db);
			return usage_error(c, "--kind '%s': wait or run", argv[2]);
		}
		argv += 2;
		argc -= 2;
	}
	if (argc != 2 || util_parse_i64(argv[1], 1, INT64_MAX, &run) < 0) {
		PQfinish(db);
		return usage_error(c, "%s", "triage: give a RUN id");
	}
	if (sig_triage(db, run, kind, &tr, NULL, err, sizeof(err)) < 0) {
		fprintf(stderr, "sm-cluster: %s\n", err);
	} else {
		printf("%zu streams, coverage of all signatures %.4f (%s events)\ncoverage", tr.nstreams, tr.max_coverage,
		       kind_name(tr.kind));
		for (int o = 0; o < SIG_NORDERS; o++)
			printf("\t%s", sig_order_name((enum sig_order)o));
		printf("\n");
		for (int l = 0; l < SIG_LEVELS; l++) {
			printf("%.4f", tr.level[l]);
			for (int o = 0; o < SIG_NORDERS; o++)
				printf("\t%g", tr.needed[o][l]);
			printf("\n");
		}
		rc = 0;
	}
	PQfinish(db);
	return rc;
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2) {
		print_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		print_usage(stdout);
		return 0;
	}
	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	return usage_error(NULL, "unknown command '%s'", argv[1]);
}
