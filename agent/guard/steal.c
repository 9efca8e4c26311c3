/* steal: the hypervisor's steal time over a unit, from /proc/stat (see steal.h). */
#include "agent/guard/steal.h"

#include "common/util.h"

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
		v = util_digits_u64(&p);
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

	/* the samples' times only grow: the history is read in their order; one forced by a stream is
	 * still GSTEAL_FORCE_GAP_NS from the last, so that the history spans some seconds however many
	 * streams are built (and a rate is never read from two ticks of the counter) */
	if ((k && now <= last) || (k && now - last < (force ? GSTEAL_FORCE_GAP_NS : GSTEAL_GAP_NS)) ||
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

/* v between samples a and b at t (or beyond them, at their rate); in doubles: t may be any time a
 * hostile process wrote */
static double at_time(int64_t ta, int64_t va, int64_t tb, int64_t vb, int64_t t)
{
	return (double)va + ((double)vb - (double)va) * (((double)t - (double)ta) / ((double)tb - (double)ta));
}

/* The value at t from the history's m samples: between the two around it, else at the rate of the
 * nearest GSTEAL_GAP_NS or more of them (a rate over a few ticks of the counter would be its
 * rounding) */
static double value_at(const int64_t *at, const int64_t *val, uint32_t m, int64_t t)
{
	uint32_t i, j;

	if (t < at[0]) {
		for (j = 1; j < m - 1 && at[j] - at[0] < GSTEAL_GAP_NS; j++)
			;
		return at_time(at[0], val[0], at[j], val[j], t);
	}
	if (t > at[m - 1]) {
		for (j = m - 2; j > 0 && at[m - 1] - at[j] < GSTEAL_GAP_NS; j--)
			;
		return at_time(at[j], val[j], at[m - 1], val[m - 1], t);
	}
	for (i = 1; i < m - 1 && at[i] < t; i++)
		;
	return at_time(at[i - 1], val[i - 1], at[i], val[i], t);
}

int64_t gsteal_over(const struct gsteal *st, int64_t start, int64_t end)
{
	int64_t at[GSTEAL_HIST], val[GSTEAL_HIST];
	uint32_t k = atomic_load_explicit(&st->n, memory_order_acquire), m;
	double from, to;

	/* the oldest place may be being written over: left out */
	m = k < GSTEAL_HIST - 1 ? k : GSTEAL_HIST - 1;
	for (uint32_t i = 0; i < m; i++) {
		uint32_t j = (k - m + i) % GSTEAL_HIST;

		at[i] = atomic_load_explicit(&st->at[j], memory_order_relaxed);
		val[i] = atomic_load_explicit(&st->val[j], memory_order_relaxed);
		if (i && (at[i] <= at[i - 1] || val[i] < val[i - 1]))
			return -1;   /* written over while read */
	}
	if (m < 2 || val[m - 1] <= 0 || end < start)
		return -1;
	from = value_at(at, val, m, start);
	to = value_at(at, val, m, end);
	if (from < 0)
		from = 0;   /* extrapolated back past the counter's zero */
	if (!(to > from))
		return 0;
	return to - from >= (double)NS_MAX ? NS_MAX : (int64_t)(to - from);
}

int64_t gsteal_unit(struct gsteal *st, int64_t start, int64_t end, int64_t now, long cpus, gcgroup_read_fn *read)
{
	uint32_t k = atomic_load_explicit(&st->n, memory_order_acquire);
	int64_t over, len;

	/* (a unit the collector read from another process's region: its times are that process's word,
	 * and its end no later than now) */
	if (end > now)
		end = now;
	if (__builtin_sub_overflow(end, start, &len) || len < 0 || cpus <= 0)
		return -1;
	if (!k || atomic_load_explicit(&st->at[(k - 1) % GSTEAL_HIST], memory_order_relaxed) < end)
		gsteal_sample(st, now, 1, read);
	if ((over = gsteal_over(st, start, end)) < 0)
		return -1;
	over /= cpus;
	return over < len ? over : len;
}
