/*
 * log: one line per event on stderr, logfmt, with a level:
 *   ts=2026-11-22T03:18:21.123Z level=info comp=ingest msg="stored stream" stream=... events=2000
 * Every value is escaped (log_value()), so that nothing a client or a database sent can end a
 * line, forge a key or hide text: a line is exactly one event. Safe to call from several threads
 * (one write(2) per line).
 */
#ifndef SM_LOG_H
#define SM_LOG_H

#include <stddef.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Component name for every following line (a static string). */
void log_init(const char *component, enum log_level min);
/*
 * Where lines go instead of stderr: fn gets each whole line (newline included).
 * NULL restores stderr. The guard agent, which lives inside other programs, must
 * never write to their file descriptor 2.
 */
typedef void log_sink_fn(const char *line, size_t len);
void log_set_sink(log_sink_fn *fn);
/* Parses "debug", "info", "warn", "error"; returns -1 if unknown. */
int log_level_parse(const char *s);
/*
 * One line: msg (quoted) and `fmt`, key=value pairs in printf style. What each conversion makes
 * is escaped as a value: right after `=` it is the whole value, quoted when it needs to be
 * (`path=%s`); inside quotes of fmt it is escaped to stay within them (`error=\"%s\"`). Anywhere
 * else it is inserted as it is, control characters escaped: only for key=value runs built with
 * log_value().
 */
void log_msg(enum log_level lvl, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/*
 * s[0..n) as a logfmt value into dst (cap bytes, NUL-terminated): bare when it is printable ASCII
 * without `"`, `=` or `\`, else quoted, with `"` and `\` escaped, \n \r \t, other control bytes
 * and invalid UTF-8 as \xNN, C1 controls, bidirectional controls and line separators visible as
 * \uNNNN. A value that does not fit is cut on a character and ends with `..."`. Returns the
 * length written (cap must be at least 8).
 */
size_t log_value(char *dst, size_t cap, const char *s, size_t n);

#define log_debug(msg, ...) log_msg(LOG_DEBUG, msg, __VA_ARGS__)
#define log_info(msg, ...) log_msg(LOG_INFO, msg, __VA_ARGS__)
#define log_warn(msg, ...) log_msg(LOG_WARN, msg, __VA_ARGS__)
#define log_error(msg, ...) log_msg(LOG_ERROR, msg, __VA_ARGS__)

#endif
