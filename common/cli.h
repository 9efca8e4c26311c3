/*
 * cli: what the command lines of the programs share: one form for usage
 * errors ("PROG: --OPT 'VALUE': what is accepted", exit status 2) and the
 * parsing of whole numbers, sizes (1k, 64M, 1G), seconds and log levels with
 * that message.
 *
 *   static const struct cli cl = { "sm-web", NULL };
 *   if (cli_size(&cl, "max-body", optarg, 1024, 1u << 30, &sz)) return 2;
 */
#ifndef SM_CLI_H
#define SM_CLI_H

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

#endif
