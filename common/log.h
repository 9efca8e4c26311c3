/*
 * log: one line per event on stderr, logfmt style, with a level:
 *   ts=2026-11-22T03:18:21.123Z level=info comp=ingest msg="stored stream" stream=... events=2000
 * Safe to call from several threads (one write(2) per line).
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
/* `fmt` continues the line after msg: use key=value pairs. The message is quoted. */
void log_msg(enum log_level lvl, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_debug(msg, ...) log_msg(LOG_DEBUG, msg, __VA_ARGS__)
#define log_info(msg, ...) log_msg(LOG_INFO, msg, __VA_ARGS__)
#define log_warn(msg, ...) log_msg(LOG_WARN, msg, __VA_ARGS__)
#define log_error(msg, ...) log_msg(LOG_ERROR, msg, __VA_ARGS__)

#endif
