/*
 * fmt: numbers as people read them, written the same way on every page of the
 * dashboard, in the command-line tools' output and in the dashboard's scripts
 * (web/static/app.js mirrors fmt_duration and fmt_share): counts with
 * thousands separators, durations in one unit chosen by size, intervals in
 * one unit for both ends, shares in per cent, sizes in binary units.
 *
 * Each writes into the caller's out[FMT_LEN] and returns it, so a call can be
 * an argument: printf("%s", fmt_count(tmp, n)).
 */
#ifndef SM_FMT_H
#define SM_FMT_H

#include <stdint.h>

#define FMT_LEN 64

/* "50,110", "-1,234", "7". */
char *fmt_count(char out[FMT_LEN], int64_t n);
/* Three significant digits in the largest unit that keeps the value at least 1, without trailing
 * zeros: "36.4 s", "123 ms", "1.5 ms", "500 µs", "17 ns"; from 1,000 s on, whole seconds
 * ("36,432 s"). Negative values (an excess) keep their sign; NaN and infinities read "-". */
char *fmt_duration(char out[FMT_LEN], double ns);
/* "[-0.46 s, 2.61 s]": both ends in the larger end's unit, each to three significant digits. */
char *fmt_interval(char out[FMT_LEN], double lo_ns, double hi_ns);
/* A share of 1 as "66.7 %", "100 %", "0 %", "< 0.1 %" (above 0 but under 0.05 %). */
char *fmt_share(char out[FMT_LEN], double frac);
/* "512 B", "1.50 KiB", "4.00 MiB", "1.25 GiB". */
char *fmt_bytes(char out[FMT_LEN], uint64_t bytes);
/* A label's value read by its key, when the value is a whole number: a key ending "_ns" as a
 * duration ("unit.threshold_ns" 20080349: "20.08 ms"), "_bytes" as a size, and "calls", "count" or
 * ending "_calls" or "_count" (after the last '.') as a count. NULL for any other key or value:
 * shown as given (text, ids, ports, versions). */
char *fmt_label_value(char out[FMT_LEN], const char *key, const char *value);

#endif
