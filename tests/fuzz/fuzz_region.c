/*
 * fuzz_region: libFuzzer target for what the host's collector reads from a
 * guarded process's region, which that process may have written to lie
 * (agent/guard/region.h): a queued violation, its threads' slots and their
 * rings made into a stream (stream.c, as collect.c calls it), a hang's run
 * delay from its slot's snapshots (watch.c, as collect.c's hang() takes it), a pushed guard
 * table's image (gtab.c, which the process reads back), and a server's answer
 * with settings (guardcore/settings.c). Built and run by `make fuzz`.
 */
#include "agent/guard/gtab.h"
#include "agent/guard/stream.h"
#include "agent/guard/watch.h"
#include "common/arena.h"
#include "guardcore/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SLOTS 4
#define RING_MAX 65536

struct fake {
	const uint8_t *ring[MAX_SLOTS + 1];
	size_t ring_len[MAX_SLOTS + 1];
};

static size_t snapshot(const struct gsrc *src, uint32_t i, void *out, size_t cap)
{
	const struct fake *f = src->ctx;
	size_t n;

	if (i > src->nslots)
		abort();   /* the stream asked for a ring the source does not have */
	n = f->ring_len[i] < cap ? f->ring_len[i] : cap;
	memcpy(out, f->ring[i], n);
	return n;
}

static void names(const struct gsrc *src, int32_t loop, int32_t type, char *loopsym, size_t lcap, char *tname,
		  size_t tcap)
{
	(void)src, (void)loop, (void)type;
	snprintf(loopsym, lcap, "srv!loop");
	snprintf(tname, tcap, "u0");
}

static long read_small(const char *path, char *buf, size_t cap)
{
	(void)path, (void)buf, (void)cap;
	return -1;
}

static void one_stream(const uint8_t *data, size_t size)
{
	static struct gslot slots[MAX_SLOTS];
	struct fake f;
	struct gviol v;
	struct gsrc src;
	struct wire_stream ws;
	struct arena *a;
	uint32_t nslots;
	size_t off, per;

	if (size < sizeof(v) + 1)
		return;
	memcpy(&v, data, sizeof(v));
	nslots = data[sizeof(v)] % MAX_SLOTS + 1;
	off = sizeof(v) + 1;
	memset(slots, 0, sizeof(slots));
	for (uint32_t i = 0; i < nslots && off < size; i++) {
		size_t n = size - off < sizeof(slots[i]) ? size - off : sizeof(slots[i]);

		memcpy(&slots[i], data + off, n);
		off += n;
	}
	per = (size - off) / (nslots + 1);
	for (uint32_t i = 0; i <= nslots; i++) {
		f.ring[i] = data + off + i * per;
		f.ring_len[i] = per < RING_MAX ? per : RING_MAX;
	}
	memset(&src, 0, sizeof(src));
	src.proc = "/proc/self";
	src.slots = slots;
	src.nslots = nslots;
	src.snapshot = snapshot;
	src.ring_max = RING_MAX;
	src.names = names;
	src.read_small = read_small;
	src.ctx = &f;
	src.host = "h";
	src.app = "a";
	src.version = "";
	src.build_id = "abcd";
	src.exe = "/srv";
	src.kernel = "6";
	src.libc_name = "libc.so.6";
	src.cpu_limit = "";
	src.min_wait_ns = 1000000;
	src.max_events = 20000;
	if (!(a = arena_open(0)))
		return;
	stream_build(&src, &v, a, &ws);
	arena_free(a);
	/* a unit in flight as the collector's watch makes it (started, not after now), its thread's run
	 * delay now any number: the figure stays within the unit whatever the slot says */
	if (v.start > 0 && v.end >= v.start) {
		struct gviol h = v;
		struct gwatch_sched now = { v.throttled_ns, v.run_delay_ns };

		gwatch_unit_run_delay(&slots[v.slot % nslots], &h, &now);
		if (h.run_delay_ns < 0 || h.run_delay_ns > h.end - h.start)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0:
		one_stream(data + 1, size - 1);
		break;
	case 1: {
		/* an image as the process finds it in its region: taken only when a wrapper can trust it */
		void *img = malloc(size - 1 ? size - 1 : 1);
		size_t need;
		struct gtab *tab;

		memcpy(img, data + 1, size - 1);
		need = gtab_image_need(img, size - 1);
		if (need) {
			void *mem = malloc(need);

			if (!(tab = gtab_image_place(img, size - 1, mem, need)))
				abort();   /* checked once, refused the second time */
			for (uint32_t l = 0; l < tab->nloops; l++)
				gtab_find(tab, (int32_t)l, 0x1000, 8);
			free(mem);
		}
		free(img);
		break;
	}
	default: {
		double started[GSET_COUNT], v[GSET_COUNT];

		for (size_t i = 0; i < GSET_COUNT; i++)
			started[i] = guard_settings[i].def;
		if (guard_settings_read((const char *)data + 1, size - 1, started, v) == 0)
			for (size_t i = 0; i < GSET_COUNT; i++)
				if (!guard_setting_valid((enum guard_setting_id)i, v[i]))
					abort();
		break;
	}
	}
	return 0;
}
