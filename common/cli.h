/*
 * cli: what the command lines of the programs share: one form for usage
 * errors ("PROG: --OPT 'VALUE': what is accepted", exit status 2) and the
 * parsing of whole numbers, sizes (1k, 64M, 1G), seconds and log levels with
 * that message.
 *
 *   static const struct cli cl = { "sm-web", NULL };
 *   if (cli_size(&cl, "max-body", optarg, 1024, 1u << 30, &sz)) return 2;
 *
 * And the options both HTTP servers (sm-ingest, sm-web) take alike: cli_server_opt().
 */
#ifndef SM_CLI_H
#define SM_CLI_H

#include <getopt.h>
#include <stdint.h>

#include "common/log.h"

struct cli {
	const char *prog;       /* "sm-web" */
	const char *hint;       /* a line after each usage error ("(see sm-miner --help)"), or NULL */
};

/* Prints "PROG: MESSAGE" (and the hint) on stderr. Returns 2, the exit status of a usage error. */
int cli_fail(const struct cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "PROG: --OPT 'VALUE': WHY". Returns 2. */
int cli_bad(const struct cli *c, const char *opt, const char *val, const char *why);

/* Each returns 0 with the value in *out, or 2 after cli_bad() saying what is accepted. */
int cli_int(const struct cli *c, const char *opt, const char *val, int64_t min, int64_t max, int64_t *out);
int cli_size(const struct cli *c, const char *opt, const char *val, uint64_t min, uint64_t max, uint64_t *out);
int cli_seconds(const struct cli *c, const char *opt, const char *val, int64_t min, int64_t max, int64_t *out);
int cli_log_level(const struct cli *c, const char *opt, const char *val, enum log_level *out);

/* The long name of option val in opts ("?" when none has that value). */
const char *cli_opt_name(const struct option *opts, int val);

/*
 * --db, --listen, --port-file, --log-level and --min-body-rate, which sm-ingest and sm-web take
 * alike: their entries in a program's option table have these values (above any program's own).
 */
enum { CLI_OPT_DB = 1000, CLI_OPT_LISTEN, CLI_OPT_PORT_FILE, CLI_OPT_LOGLEVEL, CLI_OPT_BODYRATE };

/* Where a server's configuration keeps them. */
struct cli_server {
	const char *usage;              /* for -h (on standard output) and a usage error (standard error) */
	const char **conninfo, **listen, **port_file;
	enum log_level *level;
	int *min_body_rate;
};

/*
 * getopt_long(argc, argv, "h", opts) for a server: returns the program's own options one by one
 * (the shared ones it stores itself), then -1 with *status -1 when main goes on, else the status
 * main returns: 0 after -h/--help (usage on standard output), 2 after a usage error (a bad value;
 * an unknown option or a missing value: usage on standard error; an argument after the options).
 */
int cli_server_getopt(const struct cli *c, const struct cli_server *s, int argc, char **argv,
		      const struct option *opts, int *status);

#endif
