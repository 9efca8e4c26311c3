/* util: strict parsing, UUIDs, UTF-8, time, randomness (see util.h). */
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int util_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9')))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int util_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	default: return -1;
	}
	if (*end || (v && mul > UINT64_MAX / v))
		return -1;
	*out = v * mul;
	return 0;
}

int util_parse_double(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

int util_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool util_uuid_canon(const char *s, size_t n, char out[37])
{
	if (n != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
			out[i] = '-';
		} else {
			int v = util_hexval(s[i]);
			if (v < 0)
				return false;
			out[i] = "0123456789abcdef"[v];
		}
	}
	out[36] = '\0';
	return true;
}

void util_uuid_v4(char out[37])
{
	unsigned char r[16];
	char hex[33];
	size_t o = 0;

	if (util_random(r, sizeof(r)) < 0) {
		/* getrandom cannot fail for 16 bytes after boot; keep going regardless */
		uint64_t t = (uint64_t)util_now_real_ns() ^ ((uint64_t)getpid() << 32);
		for (int i = 0; i < 16; i++)
			r[i] = (unsigned char)(t >> ((i % 8) * 8)) ^ (unsigned char)(i * 37);
	}
	r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
	r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
	util_hex(r, 16, hex);
	for (int i = 0; i < 32; i++) {
		if (i == 8 || i == 12 || i == 16 || i == 20)
			out[o++] = '-';
		out[o++] = hex[i];
	}
	out[36] = '\0';
}

size_t util_utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	uint32_t cp;
	size_t len;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[k] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool util_utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;

	for (size_t i = 0, len; i < n; i += len)
		if (!(len = util_utf8_seq(s + i, n - i)))
			return false;
	return true;
}

int util_random(void *p, size_t n)
{
	unsigned char *q = p;

	while (n) {
		ssize_t r = getrandom(q, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		q += r;
		n -= (size_t)r;
	}
	return 0;
}

bool util_ct_equal(const void *a, const void *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char d = 0;

	for (size_t i = 0; i < n; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

int64_t util_add_sat_i64(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return a > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

int64_t util_now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct timespec util_clock_after(clockid_t clock, int64_t ms)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

int64_t util_now_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void util_hex(const void *p, size_t n, char *out)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = "0123456789abcdef"[s[i] >> 4];
		out[2 * i + 1] = "0123456789abcdef"[s[i] & 15];
	}
	out[2 * n] = '\0';
}

bool util_glob(const char *pattern, const char *s)
{
	return fnmatch(pattern, s, 0) == 0;
}

int util_read_file(const char *path, size_t max, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	return util_read_fd(fd, max, out, len);
}

int util_read_fd(int fd, size_t max, char **out, size_t *len)
{
	struct stat st;
	char *data = NULL;
	size_t cap, n = 0;

	if (fstat(fd, &st) < 0)
		goto fail_fd;
	cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096;
	if (cap > max + 1)
		cap = max + 1;
	data = malloc(cap);
	if (!data)
		goto fail_fd;
	for (;;) {
		ssize_t r;
		if (n == cap) {
			char *p;
			if (cap > max) {
				errno = EFBIG;
				goto fail_data;
			}
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			p = realloc(data, cap);
			if (!p)
				goto fail_data;
			data = p;
		}
		r = read(fd, data + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			goto fail_data;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		errno = EFBIG;
		goto fail_data;
	}
	close(fd);
	if (n == cap) {
		char *p = realloc(data, n + 1);
		if (!p) {
			free(data);
			return -1;
		}
		data = p;
	}
	data[n] = '\0';
	*out = data;
	*len = n;
	return 0;
fail_data:
	free(data);
fail_fd:
	{
		int e = errno;
		close(fd);
		errno = e;
	}
	return -1;
}

int util_mkdir_p(const char *dir)
{
	char path[4096];
	size_t n = strlen(dir);

	if (n >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(path, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -1;
		path[i] = i == n ? '\0' : '/';
	}
	return 0;
}

int util_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

bool util_trim_after(size_t bytes)
{
	if (bytes < ((size_t)1 << 20))
		return false;
	util_trim();
	return true;
}

int util_heap_keep(size_t keep_bytes)
{
	int keep = keep_bytes > INT_MAX ? INT_MAX : (int)keep_bytes;

	/* 32 MiB is the largest threshold glibc takes on 64-bit (half its heaps' size) */
	if (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, keep))
		return -1;
	return 0;
}

void util_trim(void)
{
	malloc_trim(0);
}

size_t util_fmt_u64(char *out, uint64_t v)
{
	/* two digits a division: the API writes millions of numbers (a stream's events) */
	static const char pairs[201] =
		"0001020304050607080910111213141516171819"
		"2021222324252627282930313233343536373839"
		"4041424344454647484950515253545556575859"
		"6061626364656667686970717273747576777879"
		"8081828384858687888990919293949596979899";
	char tmp[UTIL_DEC_MAX], *p = tmp + sizeof(tmp);
	size_t len;

	while (v >= 100) {
		p -= 2;
		memcpy(p, pairs + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, pairs + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
	len = (size_t)(tmp + sizeof(tmp) - p);
	memcpy(out, p, len);
	return len;
}

size_t util_fmt_i64(char *out, int64_t v)
{
	if (v >= 0)
		return util_fmt_u64(out, (uint64_t)v);
	*out = '-';
	return 1 + util_fmt_u64(out + 1, (uint64_t)0 - (uint64_t)v);
}

uint64_t util_digits_u64(const char **p)
{
	const char *s = *p;
	uint64_t v = 0;

	for (; *s >= '0' && *s <= '9'; s++) {
		uint64_t d = (uint64_t)(*s - '0');

		v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
	}
	*p = s;
	return v;
}

uint64_t util_proc_start_time(const char *stat)
{
	const char *p = strrchr(stat, ')');   /* the command's name may hold spaces and parentheses */

	/* after "(comm)" the state is field 3 */
	for (int f = 2; f < 22 && p; f++)
		p = strchr(p + 1, ' ');
	if (!p)
		return 0;
	p++;
	return util_digits_u64(&p);
}
