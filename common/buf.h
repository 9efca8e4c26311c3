/*
 * buf: a growable byte buffer with a hard maximum.
 *
 * Everything read from the network or a file goes through a buf so that no
 * input can make a process grow without bound: appends past `max` fail and
 * leave the buffer as it was.
 *
 * Errors are sticky (like sqlite's StrAccum and curl's dynbuf): after the first
 * failed append every later one does nothing and fails too, so a sequence of
 * appends is checked once at the end with buf_error(). buf_reset() and
 * buf_release() clear the error.
 */
#ifndef SM_BUF_H
#define SM_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

enum buf_err { BUF_OK = 0, BUF_TOO_LARGE, BUF_NO_MEMORY };

struct buf {
	char *data;   /* always NUL-terminated when len > 0 or after buf_cstr() */
	size_t len;
	size_t cap;
	size_t max;   /* hard limit on len; 0 means SIZE_MAX / 2 */
	enum buf_err err;  /* the first failure, sticky */
};

#define BUF_INIT(maxbytes) { NULL, 0, 0, (maxbytes), BUF_OK }

/* Make room for `extra` more bytes. Returns 0, or -1 when over max or out of memory (or after an
 * earlier failure). Every append below returns what this returns. */
int buf_reserve(struct buf *b, size_t extra);
/* The first failure since the last reset: BUF_OK, BUF_TOO_LARGE (over max) or BUF_NO_MEMORY. */
static inline enum buf_err buf_error(const struct buf *b)
{
	return b->err;
}
/* "more than N bytes" or "out of memory" for a failure ("" for none); static storage per thread. */
const char *buf_error_text(const struct buf *b);
int buf_append(struct buf *b, const void *p, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_putc(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap);
int buf_put_i64(struct buf *b, int64_t v);
/* Append a finite double in the shortest %g form that reads back as the same value
 * ("0.6", not "0.59999999999999998"); a JSON number. Non-finite values are written as 0
 * (jsonw_double() writes them as null). */
int buf_put_double(struct buf *b, double v);
/* Append s as a JSON string literal (quotes included), escaping as RFC 8259 requires; invalid UTF-8
 * becomes U+FFFD (JSON text is UTF-8). Prefer the writer of jsonw.h for whole documents. */
int buf_put_json_str(struct buf *b, const char *s, size_t n);
/* Append v rounded to one decimal ("12.3", "-0.5"), clamped to +-1e15, 0 for non-finite values;
 * without printf, so no locale changes it (SVG coordinates). */
int buf_put_f1(struct buf *b, double v);
/* Append s escaped for HTML text and attribute values (& < > " ' as entities; bytes below
 * 0x20 other than tab and newline, and invalid UTF-8, as U+FFFD; bidirectional formatting
 * characters visibly as "[U+202E]"), safe in both. */
int buf_put_html(struct buf *b, const char *s, size_t n);
/* Returns a NUL-terminated view of the contents (valid until the next append). */
const char *buf_cstr(struct buf *b);
/* Empties the buffer and clears its error. */
void buf_reset(struct buf *b);
/* Releases the memory and clears the error; the buf may be reused afterwards. */
void buf_release(struct buf *b);

#endif
