/*
 * sm-web: the dashboard and the REST API (docs/web.md, ../shared/spec/rest.md)
 * over the stackmine database; by default it also works the queued mining runs.
 */
#include "common/cli.h"
#include "common/conns.h"
#include "common/log.h"
#include "common/util.h"
#include "web/server.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: sm-web [options]\n"
	"\n"
	"Serves the dashboard (HTML pages) and the REST API under /api/v1/, and works the queued\n"
	"mining runs (an embedded worker, unless --no-worker).\n"
	"\n"
	"Options (defaults in brackets):\n"
	"  --db CONNINFO          PostgreSQL connection string or URI [PG* environment]\n"
	"  --db-read CONNINFO     for GET and HEAD requests: reads that may lag a little, e.g. the\n"
	"                         standbys with target_session_attrs=prefer-standby [--db]\n"
	"  --listen ADDR:PORT     address to serve on; port 0 picks a free one [127.0.0.1:8081]\n"
	"  --port-file FILE       write the bound port to FILE once listening\n"
	"  --threads N            HTTP threads, one database connection each [4]\n"
	"  --max-connections N    open HTTP connections; beyond, the oldest idle or slowest give way [256]\n"
	"  --max-connections-per-ip N  connections from one address (IPv6: its /64), 0 = no limit [32]\n"
	"  --header-timeout S     a request's headers must be in within S seconds [10]\n"
	"  --idle-timeout S       a kept-alive connection waits S seconds for its next request [30]\n"
	"  --min-body-rate SIZE   body bytes a second, over every 10 s, 0 = none (k, M suffixes) [1k]\n"
	"  --max-body SIZE        request body (k, M suffixes) [8M]\n"
	"  --max-debuginfo SIZE   a debug file uploaded to POST /api/v1/debuginfo [128M]\n"
	"  --request-timeout S    a request's deadline: its queries are cancelled and it answers 503\n"
	"                         after S seconds, or at once when its client goes away [30]\n"
	"  --anonymous-read       allow reads (pages and GET requests) without a token\n"
	"  --no-worker            leave queued runs to `sm-miner worker` processes\n"
	"  --miner-threads N      threads of the embedded worker's runs, 0 = one per core [0]\n"
	"  --cookie-secure        mark the session cookie Secure (serve behind TLS)\n"
	"  --auth-cache-ms N      how long a token or session check is remembered [10000]\n"
	"  --session-idle S       a browser session unused for S seconds ends [43200]\n"
	"  --session-max S        a browser session ends S seconds after its login [604800]\n"
	"  --frame-cache SIZE     memory for frame names (k, M, G suffixes) [256M]\n"
	"  --model-cache SIZE     memory for the attributions and cost models of clusters and\n"
	"                         problems [32M]\n"
	"  --flame-cache SIZE     memory for the flame graphs of clusters' pages as drawn [64M]\n"
	"  --model-warm N         per done run, the attributions and models of its N costliest\n"
	"                         clusters and problems computed before their first view\n"
	"                         (0 = at their first view) [20]\n"
	"  --webhook-allow CIDR[,CIDR]  loopback, link-local or private networks alert webhooks may\n"
	"                         point at (repeatable; e.g. 127.0.0.0/8) [none]\n"
	"  --log-level LEVEL      debug, info, warn, error [info]\n"
	"  -h, --help             this text\n"
	"\n"
	"Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 when it cannot start,\n"
	"2 on a usage error.\n";

enum {
	OPT_DB_READ = 256, OPT_THREADS, OPT_MAXCONN, OPT_MAXBODY, OPT_MAXDEBUGINFO, OPT_ANON,
	OPT_NOWORKER, OPT_MINERTHREADS, OPT_SECURE, OPT_AUTHTTL, OPT_FRAMECACHE, OPT_MODELCACHE, OPT_FLAMECACHE, OPT_MODELWARM, OPT_PERIP,
	OPT_HEADTO, OPT_IDLETO, OPT_SESSIDLE, OPT_SESSMAX, OPT_WEBHOOK_ALLOW, OPT_REQTO,
};

static const struct cli cl = { "sm-web", NULL };

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, CLI_OPT_DB },
		{ "db-read", required_argument, NULL, OPT_DB_READ },
		{ "listen", required_argument, NULL, CLI_OPT_LISTEN },
		{ "port-file", required_argument, NULL, CLI_OPT_PORT_FILE },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "max-connections", required_argument, NULL, OPT_MAXCONN },
		{ "max-body", required_argument, NULL, OPT_MAXBODY },
		{ "max-debuginfo", required_argument, NULL, OPT_MAXDEBUGINFO },
		{ "anonymous-read", no_argument, NULL, OPT_ANON },
		{ "no-worker", no_argument, NULL, OPT_NOWORKER },
		{ "miner-threads", required_argument, NULL, OPT_MINERTHREADS },
		{ "cookie-secure", no_argument, NULL, OPT_SECURE },
		{ "auth-cache-ms", required_argument, NULL, OPT_AUTHTTL },
		{ "log-level", required_argument, NULL, CLI_OPT_LOGLEVEL },
		{ "frame-cache", required_argument, NULL, OPT_FRAMECACHE },
		{ "model-cache", required_argument, NULL, OPT_MODELCACHE },
		{ "flame-cache", required_argument, NULL, OPT_FLAMECACHE },
		{ "model-warm", required_argument, NULL, OPT_MODELWARM },
		{ "max-connections-per-ip", required_argument, NULL, OPT_PERIP },
		{ "header-timeout", required_argument, NULL, OPT_HEADTO },
		{ "idle-timeout", required_argument, NULL, OPT_IDLETO },
		{ "min-body-rate", required_argument, NULL, CLI_OPT_BODYRATE },
		{ "session-idle", required_argument, NULL, OPT_SESSIDLE },
		{ "session-max", required_argument, NULL, OPT_SESSMAX },
		{ "webhook-allow", required_argument, NULL, OPT_WEBHOOK_ALLOW },
		{ "request-timeout", required_argument, NULL, OPT_REQTO },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct web_config cfg;
	enum log_level level = LOG_INFO;
	const struct cli_server so = { usage, &cfg.conninfo, &cfg.listen, &cfg.port_file, &level,
				       &cfg.min_body_rate };
	int o, status;

	web_config_default(&cfg);
	while ((o = cli_server_getopt(&cl, &so, argc, argv, opts, &status)) != -1) {
		const char *name = cli_opt_name(opts, o);
		int64_t v = 0;
		uint64_t sz = 0;

		switch (o) {
		case OPT_DB_READ: cfg.conninfo_read = optarg; continue;
		case OPT_ANON: cfg.anonymous_read = true; continue;
		case OPT_NOWORKER: cfg.worker = false; continue;
		case OPT_SECURE: cfg.cookie_secure = true; continue;
		case OPT_WEBHOOK_ALLOW: {
			char err[160];

			if (webhook_nets_add(&cfg.webhook_allow, optarg, err, sizeof(err)) < 0)
				return cli_fail(&cl, "%s", err);
			continue;
		}
		case OPT_MAXBODY:
			if (cli_size(&cl, name, optarg, 1024, (uint64_t)1 << 30, &sz))
				return 2;
			cfg.max_body = sz;
			continue;
		case OPT_MAXDEBUGINFO:
			if (cli_size(&cl, name, optarg, 1024, (uint64_t)1 << 30, &sz))
				return 2;
			cfg.max_debuginfo = sz;
			continue;
		case OPT_FRAMECACHE:
			/* 0: no cache */
			if (cli_size(&cl, name, optarg, 0, (uint64_t)1 << 40, &sz))
				return 2;
			cfg.frame_cache_bytes = sz;
			continue;
		case OPT_MODELCACHE:
			/* 0: every request computes its model */
			if (cli_size(&cl, name, optarg, 0, (uint64_t)1 << 40, &sz))
				return 2;
			cfg.model_cache_bytes = sz;
			continue;
		case OPT_FLAMECACHE:
			/* 0: every view draws its flame graph */
			if (cli_size(&cl, name, optarg, 0, (uint64_t)1 << 40, &sz))
				return 2;
			cfg.flame_cache_bytes = sz;
			continue;
		default:
			break;
		}
		switch (o) {
		case OPT_THREADS:
			if (cli_int(&cl, name, optarg, 1, 256, &v))
				return 2;
			cfg.threads = (int)v;
			break;
		case OPT_MAXCONN:
			if (cli_int(&cl, name, optarg, 1, CONNS_MAX, &v))
				return 2;
			cfg.max_connections = (int)v;
			break;
		case OPT_PERIP:
			if (cli_int(&cl, name, optarg, 0, INT32_MAX, &v))
				return 2;
			cfg.max_per_ip = (int)v;
			break;
		case OPT_REQTO:
			if (cli_int(&cl, name, optarg, 1, 3600, &v))
				return 2;
			cfg.request_timeout_s = (int)v;
			break;
		case OPT_HEADTO: case OPT_IDLETO:
			if (cli_int(&cl, name, optarg, 1, 86400, &v))
				return 2;
			*(o == OPT_HEADTO ? &cfg.header_timeout_s : &cfg.idle_timeout_s) = (int)v;
			break;
		case OPT_MINERTHREADS:
			if (cli_int(&cl, name, optarg, 0, 64, &v))
				return 2;
			cfg.miner_threads = (int)v;
			break;
		case OPT_MODELWARM:
			if (cli_int(&cl, name, optarg, 0, 1000, &v))
				return 2;
			cfg.model_warm = (int)v;
			break;
		case OPT_SESSIDLE: case OPT_SESSMAX:
			/* at most a year: a session is not a token */
			if (cli_int(&cl, name, optarg, 1, 366 * 86400, &v))
				return 2;
			*(o == OPT_SESSIDLE ? &cfg.session_idle_s : &cfg.session_max_s) = (int)v;
			break;
		case OPT_AUTHTTL:
			if (cli_int(&cl, name, optarg, 0, INT32_MAX, &v))
				return 2;
			cfg.auth_ttl_ms = (int)v;
			break;
		}
	}
	if (status >= 0)
		return status;
	log_init("web", level);
	return web_run(&cfg) == 0 ? 0 : 1;
}
