/* steal: the hypervisor's steal time over a unit, from /proc/stat (see steal.h). */
#include "agent/guard/steal.h"

#include <string.h>
#include <unistd.h>

#define NS_MAX ((int64_t)INT64_MAX)

int64_t gsteal_parse(const char *stat)
{
	/* "cpu  user nice system idle iowait irq softirq steal ...", in clock ticks */
	long hz = sysconf(_SC_CLK_TCK);
	const char *p = stat;
	uint64_t v = 0;

	if (strncmp(p, "cpu ", 4) != 0 || hz <= 0 || hz > 1000000000L)
		return -1;
	p += 4;
	for (int field = 1; field <= 8; field++) {
		while (*p == ' ')
			p++;
		if (*p < '0' || *p > '9')
			return -1;
		for (v = 0; *p >= '0' && *p <= '9'; p++)
			v = v > UINT64_MAX / 10 ? UINT64_MAX : v * 10 + (uint64_t)(*p - '0');
	}
	/* saturated: a counter this large is past any unit's span anyway */
	return v > (uint64_t)(NS_MAX / (1000000000 / hz)) ? NS_MAX : (int64_t)v * (1000000000 / hz);
}

int gsteal_sample(struct gsteal *st, int64_t now, int force, gcgroup_read_fn *read)
{
	char b[512];
	uint32_t k = atomic_load_explicit(&st->n, memory_order_acquire);
	int64_t last = k ? atomic_load_explicit(&st->at[(k - 1) % GSTEAL_HIST], memory_order_relaxed) : 0;
	int64_t v;
	int added = 0;

	/* the samples' times only grow: the history is read in their order */
	if ((k && now <= last) || (!force && k && now - last < GSTEAL_GAP_NS) ||
	    atomic_exchange_explicit(&st->writing, 1, memory_order_acquire))
		return 0;
	k = atomic_load_explicit(&st->n, memory_order_relaxed);
	if ((!k || now > atomic_load_explicit(&st->at[(k - 1) % GSTEAL_HIST], memory_order_relaxed)) &&
	    read("/proc/stat", b, sizeof(b), 0) > 0 && (v = gsteal_parse(b)) >= 0) {
		atomic_store_explicit(&st->at[k % GSTEAL_HIST], now, memory_order_relaxed);
		atomic_store_explicit(&st->val[k % GSTEAL_HIST], v, memory_order_relaxed);
		atomic_store_explicit(&st->n, k + 1, memory_order_release);
		added = 1;
	}
	atomic_store_explicit(&st->writing, 0, memory_order_release);
	return added;
}

/* v between samples a and b at t (or beyond them, at their rate) */
static double at_time(int64_t ta, int64_t va, int64_t tb, int64_t vb, int64_t t)
{
	return (double)va + (double)(vb - va) * ((double)(t - ta) / (double)(tb - ta));
}

int64_t gsteal_over(const struct gsteal *st, int64_t start, int64_t end)
{
	int64_t at[GSTEAL_HIST], val[GSTEAL_HIST];
	uint32_t k = atomic_load_explicit(&st->n, memory_order_acquire), m, i;
	double from, to;

	/* the oldest place may be being written over: left out */
	m = k < GSTEAL_HIST - 1 ? k : GSTEAL_HIST - 1;
	for (i = 0; i < m; i++) {
		uint32_t j = (k - m + i) % GSTEAL_HIST;

		at[i] = atomic_load_explicit(&st->at[j], memory_order_relaxed);
		val[i] = atomic_load_explicit(&st->val[j], memory_order_relaxed);
		if (i && (at[i] <= at[i - 1] || val[i] < val[i - 1]))
			return -1;   /* written over while read */
	}
	if (m < 2 || val[m - 1] <= 0 || end < start)
		return -1;
	/* the pair around each end, else the nearest pair */
	for (i = 1; i < m - 1 && at[i] < start; i++)
		;
	from = at_time(at[i - 1], val[i - 1], at[i], val[i], start);
	if (from < 0)
		from = 0;   /* extrapolated back past the counter's zero */
	for (; i < m - 1 && at[i] < end; i++)
		;
	to = at_time(at[i - 1], val[i - 1], at[i], val[i], end);
	if (!(to > from))
		return 0;
	return to - from >= (double)NS_MAX ? NS_MAX : (int64_t)(to - from);
}

int64_t gsteal_unit(struct gsteal *st, int64_t start, int64_t end, int64_t now, long cpus, gcgroup_read_fn *read)
{
	uint32_t k = atomic_load_explicit(&st->n, memory_order_acquire);
	int64_t over, len;

	/* (a unit the collector read from another process's region: its times are that process's word) */
	if (__builtin_sub_overflow(end, start, &len) || len < 0 || cpus <= 0)
		return -1;
	if (!k || atomic_load_explicit(&st->at[(k - 1) % GSTEAL_HIST], memory_order_relaxed) < end)
		gsteal_sample(st, now, 1, read);
	if ((over = gsteal_over(st, start, end)) < 0)
		return -1;
	over /= cpus;
	return over < len ? over : len;
}
