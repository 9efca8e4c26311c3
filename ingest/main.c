/*
 * sm-ingest: receives trace streams from agents (wire format v1) over HTTP and
 * stores them in PostgreSQL. See docs/ingest.md.
 */
#include "common/cli.h"
#include "common/conns.h"
#include "common/log.h"
#include "common/util.h"
#include "ingest/idcache.h"
#include "ingest/server.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: sm-ingest [options]\n"
	"\n"
	"Receives trace streams (POST /api/v1/streams), and serves GET /healthz and GET /metrics.\n"
	"\n"
	"Options (defaults in brackets):\n"
	"  --db CONNINFO            PostgreSQL connection string or URI [PG* environment]\n"
	"  --listen ADDR:PORT       address to serve on; port 0 picks a free one [127.0.0.1:8080]\n"
	"  --port-file FILE         write the bound port to FILE once listening\n"
	"  --workers N              database workers, one connection each [4]\n"
	"  --queue N                complete requests waiting for a worker before 503 [64]\n"
	"  --max-connections N      open HTTP connections; beyond, the oldest idle or slowest give way [512]\n"
	"  --max-connections-per-ip N  connections from one address (IPv6: its /64), 0 = no limit [64]\n"
	"  --header-timeout S       a request's headers must be in within S seconds [10]\n"
	"  --idle-timeout S         a kept-alive connection waits S seconds for its next request [60]\n"
	"  --min-body-rate SIZE     body bytes a second, over every 10 s, 0 = none (k, M suffixes) [1k]\n"
	"  --max-body SIZE          request body as sent (k, M, G suffixes) [16M]\n"
	"  --max-decoded SIZE       request body after zstd decompression [128M]\n"
	"  --max-buffered SIZE      body bytes held in memory over all requests before 503 [512M]\n"
	"  --max-batch N            streams in one NDJSON request [1000]\n"
	"  --max-events N           events in one stream [1000000]\n"
	"  --max-frames N           entries in one stream's frame table [100000]\n"
	"  --max-stacks N           entries in one stream's stack table [100000]\n"
	"  --max-depth N            JSON nesting depth [16]\n"
	"  --auth-cache-ms N        how long a token check is remembered [10000]\n"
	"  --drain-timeout SECONDS  on SIGTERM, how long to wait for requests in flight [30]\n"
	"  --maintain-interval S    seconds between partition/retention maintenance [3600]\n"
	"  --fold-interval S        seconds between folds of the frame statistics' deltas [10]\n"
	"  --id-cache-frames N      frame names whose ids all workers keep (1024 to 4194304) [262144]\n"
	"  --id-cache-stacks N      stacks whose ids all workers keep (1024 to 4194304) [262144]\n"
	"  --log-level LEVEL        debug, info, warn, error [info]\n"
	"  --profile-merge-ms N     a build's fleet profile is merged again at most this often [60000]\n"
	"  -h, --help               this text\n"
	"\n"
	"Limits fixed by the wire format: 255-byte names, 1024-byte frames, 512 frames per stack,\n"
	"64 labels. Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 when it cannot start,\n"
	"2 on a usage error.\n";

enum {
	OPT_WORKERS = 256, OPT_QUEUE, OPT_MAXCONN, OPT_MAXBODY,
	OPT_MAXDEC, OPT_MAXBUF, OPT_MAXBATCH, OPT_MAXEVENTS, OPT_MAXFRAMES, OPT_MAXSTACKS,
	OPT_MAXDEPTH, OPT_AUTHTTL, OPT_DRAIN, OPT_MAINT, OPT_MERGE, OPT_PERIP, OPT_HEADTO,
	OPT_IDLETO, OPT_FOLD, OPT_CACHEFRAMES, OPT_CACHESTACKS,
};

static const struct cli cl = { "sm-ingest", NULL };

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "db", required_argument, NULL, CLI_OPT_DB },
		{ "listen", required_argument, NULL, CLI_OPT_LISTEN },
		{ "port-file", required_argument, NULL, CLI_OPT_PORT_FILE },
		{ "workers", required_argument, NULL, OPT_WORKERS },
		{ "queue", required_argument, NULL, OPT_QUEUE },
		{ "max-connections", required_argument, NULL, OPT_MAXCONN },
		{ "max-body", required_argument, NULL, OPT_MAXBODY },
		{ "max-decoded", required_argument, NULL, OPT_MAXDEC },
		{ "max-buffered", required_argument, NULL, OPT_MAXBUF },
		{ "max-batch", required_argument, NULL, OPT_MAXBATCH },
		{ "max-events", required_argument, NULL, OPT_MAXEVENTS },
		{ "max-frames", required_argument, NULL, OPT_MAXFRAMES },
		{ "max-stacks", required_argument, NULL, OPT_MAXSTACKS },
		{ "max-depth", required_argument, NULL, OPT_MAXDEPTH },
		{ "auth-cache-ms", required_argument, NULL, OPT_AUTHTTL },
		{ "drain-timeout", required_argument, NULL, OPT_DRAIN },
		{ "maintain-interval", required_argument, NULL, OPT_MAINT },
		{ "fold-interval", required_argument, NULL, OPT_FOLD },
		{ "id-cache-frames", required_argument, NULL, OPT_CACHEFRAMES },
		{ "id-cache-stacks", required_argument, NULL, OPT_CACHESTACKS },
		{ "log-level", required_argument, NULL, CLI_OPT_LOGLEVEL },
		{ "profile-merge-ms", required_argument, NULL, OPT_MERGE },
		{ "max-connections-per-ip", required_argument, NULL, OPT_PERIP },
		{ "header-timeout", required_argument, NULL, OPT_HEADTO },
		{ "idle-timeout", required_argument, NULL, OPT_IDLETO },
		{ "min-body-rate", required_argument, NULL, CLI_OPT_BODYRATE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ingest_config cfg;
	enum log_level level = LOG_INFO;
	const struct cli_server so = { usage, &cfg.conninfo, &cfg.listen, &cfg.port_file, &level,
				       &cfg.min_body_rate };
	int o, status;

	server_config_default(&cfg);
	while ((o = cli_server_getopt(&cl, &so, argc, argv, opts, &status)) != -1) {
		const char *name = cli_opt_name(opts, o);
		int64_t v = 0;
		uint64_t sz = 0;

		switch (o) {
		case OPT_MAXBODY: case OPT_MAXDEC: case OPT_MAXBUF:
			if (cli_size(&cl, name, optarg, 1024, (uint64_t)1 << 40, &sz))
				return 2;
			if (o == OPT_MAXBODY)
				cfg.lim.max_body = sz;
			else if (o == OPT_MAXDEC)
				cfg.lim.max_decoded = sz;
			else
				cfg.max_buffered = sz;
			continue;
		default:
			break;
		}
		if (cli_int(&cl, name, optarg, 0, INT32_MAX, &v))
			return 2;
		switch (o) {
		case OPT_WORKERS: cfg.workers = (int)v; break;
		case OPT_QUEUE: cfg.queue = (int)v; break;
		case OPT_MAXCONN: cfg.max_connections = (int)v; break;
		case OPT_MAXBATCH: cfg.lim.max_batch = (size_t)v; break;
		case OPT_MAXEVENTS: cfg.lim.wire.max_events = (size_t)v; break;
		case OPT_MAXFRAMES: cfg.lim.wire.max_frames = (size_t)v; break;
		case OPT_MAXSTACKS: cfg.lim.wire.max_stacks = (size_t)v; break;
		case OPT_MAXDEPTH: cfg.lim.wire.max_nesting = (int)v; break;
		case OPT_AUTHTTL: cfg.auth_ttl_ms = (int)v; break;
		case OPT_DRAIN: cfg.drain_timeout_s = (int)v; break;
		case OPT_MAINT: cfg.maintain_interval_s = (int)v; break;
		case OPT_FOLD: cfg.fold_interval_s = (int)v; break;
		case OPT_MERGE: cfg.lim.profile_merge_ms = v; break;
		case OPT_PERIP: cfg.max_per_ip = (int)v; break;
		case OPT_HEADTO: cfg.header_timeout_s = (int)v; break;
		case OPT_IDLETO: cfg.conn_timeout_s = (int)v; break;
		case OPT_CACHEFRAMES: cfg.idcache_frames = (size_t)v; break;
		case OPT_CACHESTACKS: cfg.idcache_stacks = (size_t)v; break;
		}
	}
	if (status >= 0)
		return status;
	if (cfg.workers < 1 || cfg.workers > 256)
		return cli_fail(&cl, "--workers: must be from 1 to 256");
	if (cfg.max_connections > CONNS_MAX)
		return cli_fail(&cl, "--max-connections: at most %d", CONNS_MAX);
	if (cfg.header_timeout_s < 1 || cfg.conn_timeout_s < 1)
		return cli_fail(&cl, "--header-timeout and --idle-timeout: must be at least 1 second");
	if (cfg.queue < 1 || cfg.max_connections < 1 || cfg.lim.max_batch < 1)
		return cli_fail(&cl, "--queue, --max-connections and --max-batch: must be at least 1");
	if (cfg.idcache_frames < IDCACHE_MIN || cfg.idcache_frames > IDCACHE_MAX ||
	    cfg.idcache_stacks < IDCACHE_MIN || cfg.idcache_stacks > IDCACHE_MAX)
		return cli_fail(&cl, "--id-cache-frames and --id-cache-stacks: must be from %d to %d", IDCACHE_MIN,
				IDCACHE_MAX);
	if (cfg.lim.max_decoded < cfg.lim.max_body)
		cfg.lim.max_decoded = cfg.lim.max_body;
	log_init("ingest", level);
	return server_run(&cfg) == 0 ? 0 : 1;
}
