/* Unit tests of a part's packed result (miner/parts.c): exact bytes, round trip, damage refused. */
#include "common/buf.h"
#include "common/wire.h"
#include "miner/parts.h"
#include "tests/unit/check.h"

#include <string.h>

static void test_bytes(void)
{
	struct buf b = BUF_INIT(0);
	struct parts_entry e = { 0x0102030405060708LL, 1000000007LL, 0xA1B2C3D4u, 17, WIRE_WAIT };
	static const unsigned char want[] = {
		'S', 'M', 'P', 'E',
		8, 7, 6, 5, 4, 3, 2, 1,                  /* stream ref, little-endian */
		0x07, 0xCA, 0x9A, 0x3B, 0, 0, 0, 0,      /* cost */
		0xD4, 0xC3, 0xB2, 0xA1,                  /* stack */
		17, 0, 0, 0,                             /* events */
		'w',
	};

	parts_pack_begin(&b);
	parts_pack(&b, &e);
	CHECK_INT(b.len, sizeof(want));
	CHECK(memcmp(b.data, want, sizeof(want)) == 0);
	buf_release(&b);
}

static void test_round_trip(void)
{
	struct buf b = BUF_INIT(0);
	struct parts_entry in[3] = {
		{ 1, 0, 0, 1, WIRE_RUN },
		{ INT64_MAX, INT64_MAX, UINT32_MAX, UINT32_MAX, WIRE_WAIT },
		{ 42, 5, 7, 2, WIRE_RUN },
	}, out;
	size_t pos = 0;

	parts_pack_begin(&b);
	for (int i = 0; i < 3; i++)
		parts_pack(&b, &in[i]);
	CHECK_INT(b.len, 4 + 3 * PARTS_ENTRY_BYTES);
	for (int i = 0; i < 3; i++) {
		CHECK_INT(parts_unpack((const unsigned char *)b.data, b.len, &pos, &out), 1);
		CHECK_INT(out.stream_ref, in[i].stream_ref);
		CHECK_INT(out.cost, in[i].cost);
		CHECK_INT(out.stack, in[i].stack);
		CHECK_INT(out.events, in[i].events);
		CHECK_INT(out.kind, in[i].kind);
	}
	CHECK_INT(parts_unpack((const unsigned char *)b.data, b.len, &pos, &out), 0);
	/* an empty part: the header alone */
	pos = 0;
	CHECK_INT(parts_unpack((const unsigned char *)b.data, 4, &pos, &out), 0);
	buf_release(&b);
}

static void test_damage(void)
{
	struct buf b = BUF_INIT(0);
	struct parts_entry e = { 9, 9, 9, 9, WIRE_RUN }, out;
	unsigned char *p;
	size_t pos;

	parts_pack_begin(&b);
	parts_pack(&b, &e);
	p = (unsigned char *)b.data;
	pos = 0;
	CHECK_INT(parts_unpack(p, 3, &pos, &out), -1);              /* no header */
	pos = 0;
	CHECK_INT(parts_unpack(p, b.len - 1, &pos, &out), -1);      /* an entry cut short */
	p[b.len - 1] = 'x';                                         /* unknown kind */
	pos = 0;
	CHECK_INT(parts_unpack(p, b.len, &pos, &out), -1);
	p[b.len - 1] = 'r';
	p[0] = 'X';                                                 /* wrong magic */
	pos = 0;
	CHECK_INT(parts_unpack(p, b.len, &pos, &out), -1);
	buf_release(&b);
}

int main(void)
{
	RUN(test_bytes);
	RUN(test_round_trip);
	RUN(test_damage);
	return CHECK_DONE();
}
