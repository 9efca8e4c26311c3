/*
 * fuzz_wire: libFuzzer target for the wire-format parser (json_check, the pull
 * reader and every validation rule). Whatever it accepts must write back and
 * parse again to the same stream. Built and run by `make fuzz`.
 */
#include "common/arena.h"
#include "common/buf.h"
#include "common/wire.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct wire_parser *p;
	struct arena *a = arena_open(64u << 20);
	struct wire_stream s, t;

	if (!p) {
		struct wire_limits lim;
		wire_limits_default(&lim);
		p = wire_parser_open(&lim);
	}
	if (wire_parse(p, (const char *)data, size, a, &s) == WIRE_OK) {
		struct buf b = BUF_INIT(0);
		struct buf c = BUF_INIT(0);

		/* the lengths the store interns by are the names' */
		for (size_t i = 0; i < s.nframes; i++)
			if (s.frame_lens[i] != strlen(s.frames[i]))
				abort();
		if (wire_write_json(&s, &b) < 0 || wire_parse(p, b.data, b.len, a, &t) != WIRE_OK)
			abort();
		if (wire_write_json(&t, &c) < 0 || b.len != c.len || memcmp(b.data, c.data, b.len) != 0)
			abort();
		buf_release(&b);
		buf_release(&c);
	} else if (!wire_parser_error(p)[0]) {
		abort(); /* every refusal says why */
	}
	arena_free(a);
	return 0;
}
