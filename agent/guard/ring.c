/* ring: per-thread event rings, written without locks, read by copy (see ring.h). */
#include "agent/guard/ring.h"

#include <string.h>
#include <sys/mman.h>

#define REC_HDR ((uint32_t)offsetof(struct grec, ip))

_Static_assert(offsetof(struct grec, ip) == 40, "record header is 40 bytes");

size_t gring_round(size_t bytes)
{
	size_t size = 4096;

	while (size < bytes && size < ((size_t)1 << 30))
		size <<= 1;
	return size;
}

int gring_init(struct gring *r, size_t bytes)
{
	size_t size = gring_round(bytes);
	void *p;

	/* untouched pages cost nothing: a quiet thread's ring stays small in memory */
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	r->data = p;
	r->size = (uint32_t)size;
	gring_reset(r);
	return 0;
}

void gring_release(struct gring *r)
{
	if (r->data)
		munmap(r->data, r->size);
	r->data = NULL;
	r->size = 0;
}

void gring_reset(struct gring *r)
{
	atomic_store(&r->head, 0);
	atomic_store(&r->tail, 0);
	atomic_store(&r->writing, 0);
}

static uint32_t rec_len_at(const struct gring *r, uint64_t logical)
{
	uint32_t len;

	memcpy(&len, r->data + (logical & (r->size - 1)), sizeof(len));
	return len;
}

struct grec *gring_begin(struct gring *r, uint32_t max_frames)
{
	uint64_t need = REC_HDR + (uint64_t)max_frames * 8, h, pos, pad = 0, tail, floor;

	if (!r->size)
		return NULL;
	if (atomic_exchange_explicit(&r->writing, 1, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&r->drops, 1, memory_order_relaxed);
		return NULL;
	}
	atomic_signal_fence(memory_order_seq_cst);
	if (need > r->size / 2) {
		atomic_fetch_add_explicit(&r->drops, 1, memory_order_relaxed);
		atomic_store_explicit(&r->writing, 0, memory_order_relaxed);
		return NULL;
	}
	h = atomic_load_explicit(&r->head, memory_order_relaxed);
	pos = h & (r->size - 1);
	if (pos + need > r->size)
		pad = r->size - pos;
	/* everything that starts before end - size is about to be overwritten */
	tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	floor = h + pad + need > r->size ? h + pad + need - r->size : 0;
	while (tail < floor && tail < h)
		tail += rec_len_at(r, tail);
	if (tail > h)
		tail = h;
	if (tail < floor)
		tail = floor;
	atomic_store_explicit(&r->tail, tail, memory_order_release);
	/* the new tail must be visible before any byte behind it changes */
	atomic_thread_fence(memory_order_release);
	if (pad) {
		uint32_t len = (uint32_t)pad;
		uint16_t kind = GREC_PAD;

		memcpy(r->data + pos, &len, sizeof(len));
		memcpy(r->data + pos + sizeof(len), &kind, sizeof(kind));
		pos = 0;
	}
	{
		struct grec *rec = (struct grec *)(void *)(r->data + pos);

		memset(rec, 0, REC_HDR);
		r->w_pad = (uint32_t)pad;
		r->w_max = max_frames;
		return rec;
	}
}

void gring_commit(struct gring *r, struct grec *rec, uint32_t nframes)
{
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);

	if (nframes > r->w_max)
		nframes = r->w_max;
	rec->nframes = (uint16_t)nframes;
	rec->len = REC_HDR + 8 * nframes;
	atomic_store_explicit(&r->head, h + r->w_pad + rec->len, memory_order_release);
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(&r->writing, 0, memory_order_relaxed);
}

void gring_abort(struct gring *r)
{
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(&r->writing, 0, memory_order_relaxed);
}

size_t gring_snapshot(struct gring *r, void *out, size_t cap)
{
	return gring_copy(r, r->data, r->size, out, cap);
}

size_t gring_copy(const struct gring *r, const unsigned char *data, uint32_t size, void *out, size_t cap)
{
	uint64_t h, t1, t2, n, skip;
	unsigned char *o = out;

	if (!size || !data || (size & (size - 1)))
		return 0;
	h = atomic_load_explicit(&r->head, memory_order_acquire);
	t1 = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (h <= t1)
		return 0;
	n = h - t1;
	if (n > size || n > cap)
		return 0;
	{
		uint64_t pos = t1 & (size - 1), first = size - pos < n ? size - pos : n;

		memcpy(o, data + pos, first);
		memcpy(o + first, data, n - first);
	}
	atomic_thread_fence(memory_order_acquire);
	t2 = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (t2 >= h)
		return 0;
	skip = t2 > t1 ? t2 - t1 : 0;
	memmove(o, o + skip, n - skip);
	return n - skip;
}

const struct grec *gring_next(const void *snap, size_t len, size_t *off)
{
	const unsigned char *s = snap;

	while (*off + 8 <= len) {
		uint32_t rl;
		uint16_t kind;
		const struct grec *rec;

		memcpy(&rl, s + *off, sizeof(rl));
		memcpy(&kind, s + *off + sizeof(rl), sizeof(kind));
		if (rl < 8 || rl % 8 || rl > len - *off)
			return NULL;
		rec = (const struct grec *)(const void *)(s + *off);
		*off += rl;
		if (kind == GREC_PAD)
			continue;
		if (rl < REC_HDR || REC_HDR + 8 * (size_t)rec->nframes > rl)
			return NULL;
		return rec;
	}
	return NULL;
}
