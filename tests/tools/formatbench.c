/*
 * formatbench: the importers and exporters on one core (docs/import.md), for
 * `make bench` (tests/bench/formats.sh). Decoding: a generated pprof profile of
 * 500,000 samples (gzipped, as Go serves it, and plain), a generated OTLP JSON
 * document of 500,000 timed off-CPU values, and the real captures of
 * ../shared/data (pprof-large.cpu, the OTLP and bcc ones, a perf script) read
 * again and again; each prints events per second, input MB per second and the
 * time per file. Encoding: 100,000 stacks written as pprof, speedscope and
 * folded. Usage: formatbench DATA_DIR.
 */
#include "formats/formats.h"
#include "formats/import.h"
#include "common/buf.h"
#include "common/proto/profile.pb-c.h"
#include "common/util.h"
#include "tests/tools/benchutil.h"
#include "web/export.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define NFUNC 5000
#define DEPTH 24

typedef Perftools__Profiles__Profile Profile;

static struct importer *opener(const char *format)
{
	struct import_opts o;

	import_opts_init(&o);
	o.host = "bench";
	o.app = "bench";
	o.max_streams = 100000;
	return importer_open(import_format_find(format), &o);
}

/* Runs the importer over data until a second has passed (at least twice); prints a line. */
static void measure(const char *what, const char *format, const void *data, size_t len)
{
	struct importer *im = opener(format);
	size_t events = 0, streams = 0, runs = 0;
	double t0 = now_s(), t;

	do {
		if (importer_run_mem(im, what, data, len) < 0) {
			fprintf(stderr, "formatbench: %s\n", importer_error(im));
			exit(1);
		}
		events = streams = 0;
		for (size_t i = 0; i < importer_count(im); i++) {
			events += importer_stream(im, i)->nevents;
			streams++;
		}
		runs++;
		t = now_s() - t0;
	} while (t < 1.0 || runs < 2);
	printf("  %-44s %9zu events %5zu streams %8.1f ms/file %11.0f events/s %7.1f MB/s\n", what,
	       events, streams, t / (double)runs * 1e3, (double)events * (double)runs / t,
	       (double)len * (double)runs / t / 1e6);
	importer_free(im);
}

/* A CPU profile of n samples over a tree of NFUNC functions of a 20-deep call graph. */
static unsigned char *make_pprof(size_t n, size_t *len)
{
	Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vt[2], *vtp[2] = { &vt[0], &vt[1] };
	Perftools__Profiles__Function *fn = calloc(NFUNC, sizeof(*fn)), **fnp = calloc(NFUNC, sizeof(*fnp));
	Perftools__Profiles__Location *loc = calloc(NFUNC, sizeof(*loc)), **locp = calloc(NFUNC, sizeof(*locp));
	Perftools__Profiles__Line *line = calloc(NFUNC, sizeof(*line)), **linep = calloc(NFUNC, sizeof(*linep));
	Perftools__Profiles__Sample *s = calloc(n, sizeof(*s)), **sp = calloc(n, sizeof(*sp));
	Perftools__Profiles__Label lab[64], *labp[64];
	uint64_t *ids = calloc(n * DEPTH, sizeof(*ids));
	int64_t *vals = calloc(n * 2, sizeof(*vals));
	char **strs = calloc(71 + NFUNC, sizeof(*strs));
	Perftools__Profiles__Mapping map = PERFTOOLS__PROFILES__MAPPING__INIT, *mapp = &map;
	unsigned char *out;

	strs[0] = "", strs[1] = "samples", strs[2] = "count", strs[3] = "cpu", strs[4] = "nanoseconds";
	strs[5] = "/usr/bin/server", strs[6] = "handler";
	for (int i = 0; i < 64; i++) {
		perftools__profiles__label__init(&lab[i]);
		lab[i].key = 6;
		lab[i].str = 7 + i;
		labp[i] = &lab[i];
	}
	for (int i = 0; i < 64; i++) {
		char b[32];

		snprintf(b, sizeof(b), "/api/v%d", i);
		strs[7 + i] = strdup(b);
	}
	for (size_t i = 0; i < NFUNC; i++) {
		char b[96];

		snprintf(b, sizeof(b), "github.com/example/service/pkg%zu.(*Handler).method%zu", i % 97, i);
		strs[71 + i] = strdup(b);
		perftools__profiles__function__init(&fn[i]);
		fn[i].id = i + 1;
		fn[i].name = (int64_t)(71 + i);
		fnp[i] = &fn[i];
		perftools__profiles__line__init(&line[i]);
		line[i].function_id = i + 1;
		linep[i] = &line[i];
		perftools__profiles__location__init(&loc[i]);
		loc[i].id = i + 1;
		loc[i].mapping_id = 1;
		loc[i].n_line = 1;
		loc[i].line = &linep[i];
		locp[i] = &loc[i];
	}
	map.id = 1;
	map.filename = 5;
	for (int i = 0; i < 2; i++)
		perftools__profiles__value_type__init(&vt[i]);
	vt[0].type = 1, vt[0].unit = 2, vt[1].type = 3, vt[1].unit = 4;
	for (size_t i = 0; i < n; i++) {
		uint64_t *id = ids + i * DEPTH;
		/* one of 20,000 stacks, each a walk down a tree: callers near the root are shared */
		uint64_t st = rnd() % 20000, saved = rng;
		size_t d, f;

		rng = 0x9E3779B97F4A7C15ULL ^ (st * 0x100000001B3ULL + 1);
		d = 8 + rnd() % (DEPTH - 8);
		f = rnd() % 50;
		for (size_t k = 0; k < d; k++) {
			id[d - 1 - k] = (f % NFUNC) + 1;
			f = f * 7 + 1 + rnd() % 3;
		}
		rng = saved;
		perftools__profiles__sample__init(&s[i]);
		s[i].n_location_id = d;
		s[i].location_id = id;
		vals[2 * i] = 1 + (int64_t)(rnd() % 5);
		vals[2 * i + 1] = vals[2 * i] * 10000000;
		s[i].n_value = 2;
		s[i].value = vals + 2 * i;
		s[i].n_label = 1;
		s[i].label = &labp[rnd() % 64];
		sp[i] = &s[i];
	}
	p.n_sample_type = 2, p.sample_type = vtp;
	p.n_sample = n, p.sample = sp;
	p.n_location = NFUNC, p.location = locp;
	p.n_function = NFUNC, p.function = fnp;
	p.n_mapping = 1, p.mapping = &mapp;
	p.n_string_table = 71 + NFUNC, p.string_table = strs;
	p.time_nanos = 1700000000000000000;
	*len = perftools__profiles__profile__get_packed_size(&p);
	out = malloc(*len);
	perftools__profiles__profile__pack(&p, out);
	for (size_t i = 7; i < 71 + NFUNC; i++)
		free(strs[i]);
	free(strs), free(vals), free(ids), free(sp), free(s), free(linep), free(line);
	free(locp), free(loc), free(fnp), free(fn);
	return out;
}

static unsigned char *gzip_of(const unsigned char *in, size_t n, size_t *len)
{
	uLongf cap = compressBound(n) + 64;
	unsigned char *out = malloc(cap);
	z_stream zs = { 0 };

	deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);   /* Go writes level 1 */
	zs.next_in = (Bytef *)(uintptr_t)in, zs.avail_in = (uInt)n;
	zs.next_out = out, zs.avail_out = (uInt)cap;
	deflate(&zs, Z_FINISH);
	*len = zs.total_out;
	deflateEnd(&zs);
	return out;
}

/* OTLP JSON: 200 processes, 2,500 timed off-CPU values each, over 2,000 stacks. */
static char *make_otlp(size_t *len)
{
	struct buf b = BUF_INIT(0);

	buf_puts(&b, "{\"resourceProfiles\":[");
	for (int r = 0; r < 200; r++) {
		buf_printf(&b, "%s{\"resource\":{\"attributes\":[{\"key\":\"process.pid\",\"value\":"
			   "{\"intValue\":\"%d\"}}]},\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":"
			   "{\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":[", r ? "," : "", 1000 + r);
		for (int s = 0; s < 50; s++) {
			buf_printf(&b, "%s{\"stackIndex\":%d,\"attributeIndices\":[%d],\"values\":[", s ? "," : "",
				   1 + (int)(rnd() % 2000), 1 + r % 100);
			for (int v = 0; v < 50; v++)
				buf_printf(&b, "%s\"%d\"", v ? "," : "", 1000 + (int)(rnd() % 1000000));
			buf_puts(&b, "],\"timestampsUnixNano\":[");
			for (int v = 0; v < 50; v++)
				buf_printf(&b, "%s\"%lld\"", v ? "," : "",
					   1774910497000000000LL + (long long)(s * 50 + v) * 10000000LL);
			buf_puts(&b, "]}");
		}
		buf_puts(&b, "]}]}]}");
	}
	buf_puts(&b, "],\"dictionary\":{\"stringTable\":[\"\",\"off_cpu\",\"nanoseconds\",\"thread.id\"");
	for (int i = 0; i < NFUNC; i++)
		buf_printf(&b, ",\"kernel_or_user_function_%d\"", i);
	buf_puts(&b, "],\"mappingTable\":[{}],\"functionTable\":[{}");
	for (int i = 0; i < NFUNC; i++)
		buf_printf(&b, ",{\"nameStrindex\":%d}", 4 + i);
	buf_puts(&b, "],\"locationTable\":[{}");
	for (int i = 0; i < NFUNC; i++)
		buf_printf(&b, ",{\"lines\":[{\"functionIndex\":%d}]}", 1 + i);
	buf_puts(&b, "],\"attributeTable\":[{}");
	for (int i = 0; i < 100; i++)
		buf_printf(&b, ",{\"keyStrindex\":3,\"value\":{\"intValue\":\"%d\"}}", 5000 + i);
	buf_puts(&b, "],\"stackTable\":[{}");
	for (int i = 0; i < 2000; i++) {
		size_t d = 8 + rnd() % 16, f = rnd() % 50;

		buf_puts(&b, ",{\"locationIndices\":[");
		for (size_t k = 0; k < d; k++) {
			buf_printf(&b, "%s%zu", k ? "," : "", 1 + f % NFUNC);
			f = f * 7 + 1 + rnd() % 3;
		}
		buf_puts(&b, "]}");
	}
	buf_puts(&b, "]}}");
	*len = b.len;
	return b.data;
}

static void bench_file(const char *dir, const char *rel, const char *format)
{
	char path[4096];
	char *data;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	if (util_read_file(path, (size_t)1 << 30, &data, &len) < 0) {
		printf("  %-44s (missing)\n", rel);
		return;
	}
	measure(rel, format, data, len);
	free(data);
}

static void bench_export(void)
{
	static const char *const names[] = { "pprof", "speedscope", "folded" };
	struct export *x = export_open("bench", false);
	const char *frames[DEPTH];
	char fb[DEPTH][64];
	double t;

	for (int i = 0; i < 100000; i++) {
		size_t d = 8 + rnd() % (DEPTH - 8), f = rnd() % 50;

		for (size_t k = 0; k < d; k++) {
			snprintf(fb[k], sizeof(fb[k]), "server!pkg%zu.function%zu", (f % NFUNC) % 97, f % NFUNC);
			frames[k] = fb[k];
			f = f * 7 + 1 + rnd() % 3;
		}
		export_add(x, 0, i % 4 ? EXPORT_RUN : EXPORT_WAIT, frames, d, -1, 1000 + rnd() % 100000000, 1);
	}
	for (int f = 0; f < 3; f++) {
		struct buf out = BUF_INIT(0);
		int runs = 0;
		double t0 = now_s();

		do {
			buf_reset(&out);
			if (export_write(x, (enum export_format)f, &out) < 0) {
				fprintf(stderr, "formatbench: %s\n", export_error(x));
				exit(1);
			}
			runs++;
			t = now_s() - t0;
		} while (t < 1.0 || runs < 2);
		printf("  export of 100,000 stacks as %-15s %8.1f ms %8.1f MB\n", names[f], t / runs * 1e3,
		       (double)out.len / 1e6);
		buf_release(&out);
	}
	export_free(x);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "../shared/data";
	size_t plen, glen, olen;
	unsigned char *pp, *gz;
	char *ot;

	printf("decoders, one core (each input imported again and again for a second):\n");
	pp = make_pprof(500000, &plen);
	gz = gzip_of(pp, plen, &glen);
	measure("generated pprof, 500k samples, gzip", "pprof", gz, glen);
	measure("generated pprof, 500k samples, plain", "pprof", pp, plen);
	ot = make_otlp(&olen);
	measure("generated OTLP JSON, 500k timed values", "otlp", ot, olen);
	bench_file(dir, "pprof/pprof-large.cpu", "pprof");
	bench_file(dir, "pprof/parca-profile-with-labels.pb.gz", "pprof");
	bench_file(dir, "otel/pyroscope-otel-ebpf-offcpu.pb.json", "otlp");
	bench_file(dir, "bcc/bcc-offwaketime_example.txt", "bcc-offwaketime");
	bench_file(dir, "perf/dspeyer-sched-61cb776.perf.txt", "perf");
	printf("exporters, one core:\n");
	bench_export();
	printf("peak memory %.0f MB\n", peak_mb());
	free(pp);
	free(gz);
	free(ot);
	return 0;
}
