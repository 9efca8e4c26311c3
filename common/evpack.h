/*
 * evpack: the events of a stream packed a chunk a row (table event_chunks, sql/030_event_chunks.sql).
 * A chunk holds up to EVPACK_CHUNK consecutive events of one stream as fixed records of
 * EVPACK_RECORD bytes, integers in network order (the order of PostgreSQL's int8send, so that SQL
 * can read them: sm_event_unpack()):
 *
 *     offset  0  ts_ns        int64
 *             8  dur_ns       int64
 *            16  tid          int32
 *            20  stack_id     int32 (stacks.id)
 *            24  readier_tid  int32 (0 for run events)
 *            28  kind         'r' or 'w'
 *
 * The i-th record of a chunk is the event at seq first_seq + i. One row costs PostgreSQL one tuple
 * and one compressed datum instead of a tuple and an index entry an event (docs/scaling.md, "Packed
 * events"). Ingest packs, the miner, the stream pages and signature triage unpack.
 */
#ifndef SM_EVPACK_H
#define SM_EVPACK_H

#include <stddef.h>
#include <stdint.h>

#define EVPACK_CHUNK 1024
#define EVPACK_RECORD 29

/* One event as stored: stack is stacks.id, kind 'r' or 'w'. */
struct evpack_event {
	int64_t ts_ns;
	int64_t dur_ns;
	int32_t tid;
	int32_t stack;
	int32_t readier_tid;
	char kind;
};

/* Writes e as a record at p (EVPACK_RECORD bytes). */
static inline void evpack_put(unsigned char *p, const struct evpack_event *e)
{
	uint64_t v[2] = { (uint64_t)e->ts_ns, (uint64_t)e->dur_ns };
	uint32_t w[3] = { (uint32_t)e->tid, (uint32_t)e->stack, (uint32_t)e->readier_tid };

	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 8; k++)
			p[i * 8 + k] = (unsigned char)(v[i] >> (56 - 8 * k));
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 4; k++)
			p[16 + i * 4 + k] = (unsigned char)(w[i] >> (24 - 8 * k));
	p[28] = (unsigned char)e->kind;
}

/* The unsigned integer of `bytes` bytes at p, in network order (PostgreSQL's binary integers too). */
static inline uint64_t evpack_be(const unsigned char *p, int bytes)
{
	uint64_t v = 0;

	for (int k = 0; k < bytes; k++)
		v = v << 8 | p[k];
	return v;
}

/* The record at p. Returns 0, or -1 when its kind is neither 'r' nor 'w'. */
static inline int evpack_get(const unsigned char *p, struct evpack_event *e)
{
	e->ts_ns = (int64_t)evpack_be(p, 8);
	e->dur_ns = (int64_t)evpack_be(p + 8, 8);
	e->tid = (int32_t)(uint32_t)evpack_be(p + 16, 4);
	e->stack = (int32_t)(uint32_t)evpack_be(p + 20, 4);
	e->readier_tid = (int32_t)(uint32_t)evpack_be(p + 24, 4);
	e->kind = (char)p[28];
	return e->kind == 'r' || e->kind == 'w' ? 0 : -1;
}

/* How many records a chunk's data of len bytes holds: -1 when len is not a whole, non-zero number
 * of records, or more than EVPACK_CHUNK of them. */
static inline long evpack_count(size_t len)
{
	return len == 0 || len % EVPACK_RECORD || len / EVPACK_RECORD > EVPACK_CHUNK ? -1 : (long)(len / EVPACK_RECORD);
}

#endif
