/* fmt: numbers as people read them (see fmt.h). */
#include "common/fmt.h"
#include "common/util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct {
	double div;
	const char *unit;
	double min;   /* from here on the unit below would print 1000 or more */
} units[] = {
	{ 1e9, "s", 0.9995 },
	{ 1e6, "ms", 0.9995 },
	{ 1e3, "\xc2\xb5s", 0.9995 },
	{ 1, "ns", 0 },
};
#define NUNITS (sizeof(units) / sizeof(units[0]))
/* seconds from which a duration is written in whole seconds */
#define WHOLE_S 999.5

char *fmt_count(char out[FMT_LEN], int64_t n)
{
	char d[24];
	/* the magnitude as unsigned: INT64_MIN has none as a signed number */
	uint64_t m = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n;
	int len = snprintf(d, sizeof(d), "%llu", (unsigned long long)m), o = 0;

	if (n < 0)
		out[o++] = '-';
	for (int i = 0; i < len; i++) {
		if (i > 0 && (len - i) % 3 == 0)
			out[o++] = ',';
		out[o++] = d[i];
	}
	out[o] = '\0';
	return out;
}

/* The decimals that write a >= 0 in unit u to three significant digits. */
static int decimals_in(double a, size_t u)
{
	double v = a / units[u].div;

	return units[u].div == 1 || v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
}

/* The unit for a magnitude a >= 0, and the most decimals it is written with. */
static size_t unit_of(double a, int *decimals)
{
	size_t i = 0;

	while (i + 1 < NUNITS && a / units[i].div < units[i].min)
		i++;
	*decimals = decimals_in(a, i);
	return i;
}

/* v ns in unit u with d decimals; whole seconds with separators when whole. */
static void put(char *out, size_t cap, double v, size_t u, int d, int whole)
{
	if (whole) {
		char c[FMT_LEN];

		/* past int64 seconds (a hostile label's slope) llround has no answer */
		if (fabs(v) / 1e9 >= 9e18)
			snprintf(out, cap, "%.3g s", v / 1e9);
		else
			snprintf(out, cap, "%s s", fmt_count(c, llround(v / 1e9)));
		return;
	}
	char num[32];
	int n;

	v /= units[u].div;
	/* no "-0.00": a value that rounds to zero is written without its sign */
	if (fabs(v) * pow(10, d) < 0.5)
		v = 0;
	n = snprintf(num, sizeof(num), "%.*f", d, v);
	/* "1.5 ms" and "500 µs", not "1.50 ms" and "500.0 µs" */
	if (d > 0 && n > 0 && n < (int)sizeof(num)) {
		while (num[n - 1] == '0')
			n--;
		if (num[n - 1] == '.')
			n--;
	}
	snprintf(out, cap, "%.*s %s", n, num, units[u].unit);
}

char *fmt_duration(char out[FMT_LEN], double ns)
{
	int d;
	size_t u;

	if (!isfinite(ns)) {
		snprintf(out, FMT_LEN, "-");
		return out;
	}
	u = unit_of(fabs(ns), &d);
	put(out, FMT_LEN, ns, u, d, fabs(ns) / 1e9 >= WHOLE_S);
	return out;
}

char *fmt_interval(char out[FMT_LEN], double lo_ns, double hi_ns)
{
	char lo[28], hi[28];   /* at most "-9,223,372,037 s" each */
	double m = fmax(fabs(lo_ns), fabs(hi_ns));
	int d, whole;
	size_t u;

	if (!isfinite(lo_ns) || !isfinite(hi_ns)) {
		snprintf(out, FMT_LEN, "-");
		return out;
	}
	u = unit_of(m, &d);
	whole = m / 1e9 >= WHOLE_S;
	/* each end to its own three digits, in the larger end's unit */
	put(lo, sizeof(lo), lo_ns, u, decimals_in(fabs(lo_ns), u), whole);
	put(hi, sizeof(hi), hi_ns, u, decimals_in(fabs(hi_ns), u), whole);
	snprintf(out, FMT_LEN, "[%s, %s]", lo, hi);
	return out;
}

char *fmt_share(char out[FMT_LEN], double frac)
{
	double pct = frac * 100;
	int n;

	if (!isfinite(pct))
		snprintf(out, FMT_LEN, "-");
	else if (pct == 0)
		snprintf(out, FMT_LEN, "0 %%");
	else if (pct > 0 && pct < 0.05)
		snprintf(out, FMT_LEN, "< 0.1 %%");
	else if (pct >= 99.95 && pct < 100)
		snprintf(out, FMT_LEN, "> 99.9 %%");
	else if (fabs(pct) >= 1e15)
		snprintf(out, FMT_LEN, "%.3g %%", pct);
	else {
		n = snprintf(out, FMT_LEN, "%.1f", pct);
		/* "50 %", not "50.0 %" */
		if (n >= 2 && out[n - 2] == '.' && out[n - 1] == '0')
			n -= 2;
		snprintf(out + n, (size_t)(FMT_LEN - n), " %%");
	}
	return out;
}

char *fmt_bytes(char out[FMT_LEN], uint64_t bytes)
{
	static const char *const bin[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	size_t i = 0;

	if (bytes < 1024) {
		snprintf(out, FMT_LEN, "%llu B", (unsigned long long)bytes);
		return out;
	}
	v /= 1024;
	while (v >= 1023.995 && i + 1 < sizeof(bin) / sizeof(bin[0])) {
		v /= 1024;
		i++;
	}
	snprintf(out, FMT_LEN, v >= 99.995 ? "%.0f %s" : "%.2f %s", v, bin[i]);
	return out;
}

char *fmt_frame_short(char *out, size_t cap, const char *name, size_t max)
{
	const char *fn = strchr(name, '!');
	size_t len;

	fn = fn && fn[1] ? fn + 1 : name;
	len = strlen(fn);
	if (len > 6 && memcmp(fn + len - 6, " const", 6) == 0)
		len -= 6;
	if (len && fn[len - 1] == ')') {
		int depth = 0;

		for (size_t i = len; i-- > 0;) {
			depth += fn[i] == ')' ? 1 : fn[i] == '(' ? -1 : 0;
			if (depth == 0) {
				len = i;
				break;
			}
		}
	}
	if (len == 0) {
		fn = name;
		len = strlen(name);
	}
	/* room for "…" (3 bytes) and the NUL */
	if (max == 0 || max > cap - 4)
		max = cap - 4;
	if (len > max) {
		len = max;
		while (len && ((unsigned char)fn[len] & 0xc0) == 0x80)   /* not inside a character */
			len--;
		memcpy(out, fn, len);
		memcpy(out + len, "\xe2\x80\xa6", 4);
	} else {
		memcpy(out, fn, len);
		out[len] = '\0';
	}
	return out;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

char *fmt_label_value(char out[FMT_LEN], const char *key, const char *value)
{
	const char *last = strrchr(key, '.');
	int64_t v;

	last = last ? last + 1 : key;
	if (util_parse_i64(value, INT64_MIN, INT64_MAX, &v) < 0)
		return NULL;
	if (ends_with(last, "_ns"))
		return fmt_duration(out, (double)v);
	if (ends_with(last, "_bytes"))
		return v < 0 ? NULL : fmt_bytes(out, (uint64_t)v);
	if (strcmp(last, "calls") == 0 || strcmp(last, "count") == 0 || ends_with(last, "_calls") ||
	    ends_with(last, "_count"))
		return fmt_count(out, v);
	return NULL;
}
