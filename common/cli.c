/* cli: what the command lines of the programs share (see cli.h). */
#include "common/cli.h"
#include "common/util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

int cli_fail(const struct cli *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", c->prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (c->hint)
		fprintf(stderr, "%s\n", c->hint);
	return 2;
}

int cli_bad(const struct cli *c, const char *opt, const char *val, const char *why)
{
	return cli_fail(c, "--%s '%s': %s", opt, val, why);
}

/* cli_int and cli_seconds: what tells the accepted numbers ("a whole number") */
static int int_in(const struct cli *c, const char *opt, const char *val, int64_t min, int64_t max, int64_t *out,
		  const char *what)
{
	char why[96];

	if (util_parse_i64(val, min, max, out) == 0)
		return 0;
	snprintf(why, sizeof(why), "must be %s from %" PRId64 " to %" PRId64, what, min, max);
	return cli_bad(c, opt, val, why);
}

int cli_int(const struct cli *c, const char *opt, const char *val, int64_t min, int64_t max, int64_t *out)
{
	return int_in(c, opt, val, min, max, out, "a whole number");
}

/* 1024 -> "1k", 1 << 30 -> "1G", 1 << 40 -> "1024G": the largest unit that divides it, up to G */
static void size_text(uint64_t v, char *out, size_t n)
{
	static const char units[] = { 'G', 'M', 'k' };

	for (int i = 0; i < 3; i++) {
		uint64_t u = (uint64_t)1 << (30 - 10 * i);

		if (v >= u && v % u == 0) {
			snprintf(out, n, "%" PRIu64 "%c", v / u, units[i]);
			return;
		}
	}
	snprintf(out, n, "%" PRIu64, v);
}

int cli_size(const struct cli *c, const char *opt, const char *val, uint64_t min, uint64_t max, uint64_t *out)
{
	char why[96], lo[24], hi[24];

	if (util_parse_size(val, out) == 0 && *out >= min && *out <= max)
		return 0;
	size_text(min, lo, sizeof(lo));
	size_text(max, hi, sizeof(hi));
	if (min == 0)
		snprintf(why, sizeof(why), "must be a size up to %s", hi);
	else
		snprintf(why, sizeof(why), "must be a size from %s to %s", lo, hi);
	return cli_bad(c, opt, val, why);
}

int cli_seconds(const struct cli *c, const char *opt, const char *val, int64_t min, int64_t max, int64_t *out)
{
	return int_in(c, opt, val, min, max, out, "a number of seconds");
}

int cli_log_level(const struct cli *c, const char *opt, const char *val, enum log_level *out)
{
	int l = log_level_parse(val);

	if (l < 0)
		return cli_bad(c, opt, val, "must be debug, info, warn or error");
	*out = (enum log_level)l;
	return 0;
}

const char *cli_opt_name(const struct option *opts, int val)
{
	for (const struct option *o = opts; o->name; o++)
		if (o->val == val)
			return o->name;
	return "?";
}

enum { TAKEN = -1, OTHER = -2 };

/* TAKEN when opt is one of the shared ones (stored), OTHER when it is the program's own, else the
 * status main returns */
static int server_opt(const struct cli *c, const struct cli_server *s, int opt, const char *arg)
{
	uint64_t sz;

	switch (opt) {
	case 'h':
		fputs(s->usage, stdout);
		return 0;
	case '?':
		fputs(s->usage, stderr);
		return 2;
	case CLI_OPT_DB: *s->conninfo = arg; return TAKEN;
	case CLI_OPT_LISTEN: *s->listen = arg; return TAKEN;
	case CLI_OPT_PORT_FILE: *s->port_file = arg; return TAKEN;
	case CLI_OPT_LOGLEVEL:
		return cli_log_level(c, "log-level", arg, s->level) ? 2 : TAKEN;
	case CLI_OPT_BODYRATE:
		if (cli_size(c, "min-body-rate", arg, 0, (uint64_t)1 << 30, &sz))
			return 2;
		*s->min_body_rate = (int)sz;
		return TAKEN;
	default:
		return OTHER;
	}
}

int cli_server_getopt(const struct cli *c, const struct cli_server *s, int argc, char **argv,
		      const struct option *opts, int *status)
{
	int o;

	*status = -1;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int rc = server_opt(c, s, o, optarg);

		if (rc == OTHER)
			return o;
		if (rc != TAKEN) {
			*status = rc;
			return -1;
		}
	}
	if (optind < argc)
		*status = cli_fail(c, "unexpected argument '%s'", argv[optind]);
	return -1;
}
