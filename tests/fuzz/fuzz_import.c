/*
 * fuzz_import: libFuzzer target for the importers (perf, folded, pprof, OTLP, bcc)
 * and the format detection. The first byte picks the format; the rest is the input,
 * read from memory as sm-ingest reads a request body. Whatever imports must be valid
 * wire-format streams; whatever does not must say why. Built and run by `make fuzz`.
 */
#include "formats/formats.h"
#include "formats/import.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/wire.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { "perf", "folded", "pprof", "otlp", "bcc-offcpu",
					     "bcc-offwaketime", "bcc-wakeuptime", "bcc-profile", "auto" };
	static struct wire_parser *p;
	struct import_opts o;
	struct importer *im;

	if (size < 1)
		return 0;
	if (!p) {
		struct wire_limits lim;

		wire_limits_default(&lim);
		p = wire_parser_open(&lim);
	}
	import_opts_init(&o);
	o.host = "fuzz";
	o.app = "fuzz";
	o.max_input = 1 << 24;   /* a decompression bomb stops here */
	im = importer_open(import_format_find(names[data[0] % (sizeof(names) / sizeof(names[0]))]), &o);
	if (importer_run_mem(im, "fuzz", data + 1, size - 1) == 0) {
		for (size_t i = 0; i < importer_count(im); i++) {
			struct buf b = BUF_INIT(0);
			struct arena *a = arena_open(0);
			struct wire_stream t;

			if (wire_write_json(importer_stream(im, i), &b) < 0 ||
			    wire_parse(p, b.data, b.len, a, &t) != WIRE_OK)
				abort();
			buf_release(&b);
			arena_free(a);
		}
	} else if (!importer_error(im)[0]) {
		abort();
	}
	importer_free(im);
	return 0;
}
