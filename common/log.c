/* log: leveled one-line-per-event logging to stderr (see log.h). */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *log_comp = "stackmine";
static enum log_level log_min = LOG_INFO;
static const char *const level_names[] = { "debug", "info", "warn", "error" };
static log_sink_fn *log_sink;

void log_set_sink(log_sink_fn *fn)
{
	log_sink = fn;
}

void log_init(const char *component, enum log_level min)
{
	log_comp = component;
	log_min = min;
}

int log_level_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, level_names[i]) == 0)
			return i;
	return -1;
}

void log_msg(enum log_level lvl, const char *msg, const char *fmt, ...)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	size_t n = 0;
	int w;
	va_list ap;

	if (lvl < log_min)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	w = snprintf(line, sizeof(line),
		     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s comp=%s msg=\"",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
		     tm.tm_sec, ts.tv_nsec / 1000000, level_names[lvl], log_comp);
	n = w > 0 ? (size_t)w : 0;
	/* the message is ours, but keep the line parseable whatever it holds */
	for (const char *p = msg; *p && n < sizeof(line) - 4; p++)
		line[n++] = (*p == '"' || *p == '\n') ? '\'' : *p;
	line[n++] = '"';
	if (fmt && *fmt && n < sizeof(line) - 2) {
		line[n++] = ' ';
		va_start(ap, fmt);
		w = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
		va_end(ap);
		if (w > 0)
			n += (size_t)w < sizeof(line) - n - 1 ? (size_t)w : sizeof(line) - n - 2;
	}
	for (size_t i = 0; i < n; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	line[n++] = '\n';
	if (log_sink) {
		log_sink(line, n);
		return;
	}
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}
