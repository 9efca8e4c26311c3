/*
 * fuzz_wire: libFuzzer target for the wire-format parser (json_check, the pull
 * reader and every validation rule). Whatever it accepts must write back and
 * parse again to the same stream, and reading in place (wire_parse_in_place()) must give the same
 * answer, message and frames. Built and run by `make fuzz`.
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
	struct wire_stream s, t, u;
	char *own = malloc(size + 1), err[512];
	int rc, rc_own;

	if (!own)
		abort();
	if (!p) {
		struct wire_limits lim;
		wire_limits_default(&lim);
		p = wire_parser_open(&lim);
	}
	memcpy(own, data, size);
	own[size] = '\0';
	rc_own = wire_parse_in_place(p, own, size, a, &u);
	memcpy(err, wire_parser_error(p), sizeof(err));
	rc = wire_parse(p, (const char *)data, size, a, &s);
	if (rc != rc_own || strcmp(err, wire_parser_error(p)) != 0)
		abort();
	if (rc == WIRE_OK) {
		if (u.nframes != s.nframes)
			abort();
		for (size_t i = 0; i < s.nframes; i++)
			if (u.frame_lens[i] != s.frame_lens[i] || strcmp(u.frames[i], s.frames[i]) != 0)
				abort();
	}
	if (rc == WIRE_OK) {
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
	free(own);
	arena_free(a);
	return 0;
}
