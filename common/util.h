/*
 * util: small, strict helpers for text from outside: number parsing without
 * atoi's silent failures, UUID and UTF-8 checks, time, randomness, and
 * constant-time comparison.
 */
#ifndef SM_UTIL_H
#define SM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Whole-string decimal integer in [min, max]. Returns 0 or -1. */
int util_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
/* Decimal number, with an optional suffix k/M/G (powers of 1024), for sizes. */
int util_parse_size(const char *s, uint64_t *out);
/* Whole-string floating-point number. Returns 0 or -1. */
int util_parse_double(const char *s, double *out);
/* The value of a hexadecimal digit, or -1. */
int util_hexval(int c);

/* 8-4-4-4-12 hex digits; writes the lower-case form to out[37]. */
bool util_uuid_canon(const char *s, size_t n, char out[37]);
/* Random version-4 UUID (from getrandom), lower case, into out[37]. */
void util_uuid_v4(char out[37]);
/* Length (1 to 4) of the well-formed UTF-8 sequence at s[0..n) (n >= 1), or 0 if none starts there. */
size_t util_utf8_seq(const unsigned char *s, size_t n);
/* Well-formed UTF-8 (no overlongs, no surrogates, no code points past U+10FFFF). */
bool util_utf8_valid(const char *s, size_t n);

/* Whether the 8 bytes at p are all ASCII digits. For parsers that read long numbers (a timestamp's
 * 16 digits) eight bytes at a time. */
static inline bool util_eight_digits(const char *p)
{
	uint64_t v, hi = 0xF0F0F0F0F0F0F0F0ULL;

	__builtin_memcpy(&v, p, 8);
	/* each byte 0x30..0x39: its high nibble 3, and adding 6 keeps it 3 */
	return ((v & hi) | (((v + 0x0606060606060606ULL) & hi) >> 4)) == 0x3333333333333333ULL;
}

/* The number the 8 ASCII digits at p write (util_eight_digits() true), most significant first. */
static inline uint32_t util_parse_eight(const char *p)
{
	uint64_t v;

	__builtin_memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	/* pairs of digits, then fours, then the eight: each step one multiply (the first digit is in
	 * the lowest byte on a little-endian load) */
	v = (v & 0x0F0F0F0F0F0F0F0FULL) * 2561 >> 8;
	v = (v & 0x00FF00FF00FF00FFULL) * 6553601 >> 16;
	return (uint32_t)((v & 0x0000FFFF0000FFFFULL) * 42949672960001ULL >> 32);
}
/* Fill p with n random bytes from the kernel. Returns 0 or -1. */
int util_random(void *p, size_t n);
/* Constant-time equality of two n-byte blocks. */
bool util_ct_equal(const void *a, const void *b, size_t n);
/* a + b, saturated at INT64_MIN and INT64_MAX (counters from outside). */
int64_t util_add_sat_i64(int64_t a, int64_t b);
/* CLOCK_MONOTONIC and CLOCK_REALTIME in nanoseconds. */
int64_t util_now_mono_ns(void);
int64_t util_now_real_ns(void);
/* The time clock (CLOCK_MONOTONIC, CLOCK_REALTIME) shows ms milliseconds from now, for
 * pthread_cond_timedwait() and the like. */
struct timespec util_clock_after(clockid_t clock, int64_t ms);
/* Lower-case hex of n bytes into out (2n+1 bytes). */
void util_hex(const void *p, size_t n, char *out);
/* Glob match of `pattern` (*, ?, [...]) against s, as fnmatch without flags. */
bool util_glob(const char *pattern, const char *s);
/* Write all of p[0..n) to fd, resuming after EINTR and short writes. Returns 0 or -1 (errno set). */
int util_write_all(int fd, const void *p, size_t n);
/* mkdir -p (mode 0755 for what it makes). 0, or -1 with errno. */
int util_mkdir_p(const char *dir);
/* Read a whole file (at most max bytes) into *out (caller frees). Returns 0 or -1
 * with errno set (EFBIG when over max). */
int util_read_file(const char *path, size_t max, char **out, size_t *len);
/* The same from an open file, which it closes (whatever the result). */
int util_read_fd(int fd, size_t max, char **out, size_t *len);
/* v in decimal at out, no terminator: its length (at most UTIL_DEC_MAX, INT64_MIN's 20). */
#define UTIL_DEC_MAX 20
size_t util_fmt_u64(char *out, uint64_t v);
size_t util_fmt_i64(char *out, int64_t v);
/* The run of decimal digits at *p as a number, saturating at UINT64_MAX (0 when there is none);
 * *p moves past it. For counters and lengths read from the kernel or a peer. */
uint64_t util_digits_u64(const char **p);
/* A process's start time (clock ticks since boot), the 22nd field of its /proc/PID/stat text; 0 when
 * the text has none. Tells a process from a later one that got the same pid. */
uint64_t util_proc_start_time(const char *stat);

/*
 * After a request that held `bytes` of memory (its body, decoded or not): when that was a large
 * amount (1 MiB or more), give the freed memory back to the system, which glibc keeps otherwise
 * (malloc_trim). Returns true when it trimmed.
 */
bool util_trim_after(size_t bytes);

/*
 * For a server whose requests each need megabytes for a moment (a page of a large cluster): blocks
 * up to 32 MiB come from the heap instead of maps of their own, and up to keep_bytes of freed memory
 * stay in it, so that the next such request does not fault every page in again (glibc's mallopt:
 * M_MMAP_THRESHOLD, M_TRIM_THRESHOLD). The memory kept is then the peak of the requests running at
 * once until util_trim() gives it back. Returns 0, or -1 when the C library refused.
 */
int util_heap_keep(size_t keep_bytes);
/* Gives the freed memory of every heap back to the system (malloc_trim). */
void util_trim(void);

#endif
