/*
 * fuzz_import: libFuzzer target for the perf-script and collapsed-stack
 * importers. The first byte picks the format; the rest is the file. Whatever
 * imports must be a valid wire-format stream. Built and run by `make fuzz`.
 */
#include "agent/folded.h"
#include "agent/import.h"
#include "agent/perf.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct wire_parser *p;
	struct import_opts o;
	struct importer *im;
	struct wire_stream s, t;
	char path[64];
	int fd;

	if (size < 1)
		return 0;
	if (!p) {
		struct wire_limits lim;
		wire_limits_default(&lim);
		p = wire_parser_open(&lim);
	}
	fd = memfd_create("fuzz", 0);
	if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	import_opts_init(&o);
	o.host = "fuzz";
	o.app = "fuzz";
	im = importer_open(data[0] & 1 ? &import_folded : &import_perf, &o);
	if (importer_run(im, path, &s) == 0) {
		struct buf b = BUF_INIT(0);
		struct arena *a = arena_open(0);

		if (wire_write_json(&s, &b) < 0 || wire_parse(p, b.data, b.len, a, &t) != WIRE_OK)
			abort();
		buf_release(&b);
		arena_free(a);
	} else if (!importer_error(im)[0]) {
		abort();
	}
	importer_free(im);
	close(fd);
	return 0;
}
