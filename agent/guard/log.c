/*
 * log: the agent's log lines, to SM_GUARD_LOG only, never to the program's
 * descriptors.
 */
#include "agent/guard/hot.h"
#include "agent/guard/region.h"
#include "common/log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- log: to SM_GUARD_LOG only, never to the program's descriptors ----
 * A line logged on a program's thread is queued and written by the shipping
 * thread: the file is opened in the agent's own table, never in the
 * program's, where even a moment's descriptor could take the number the
 * program's next open() expects. Before the agent is active (the constructor,
 * before main()) lines are written at once. With the host's collector (no
 * thread of the agent's) they go to the region, and the collector logs them. */

#define LOG_QUEUE 64

static struct {
	pthread_mutex_t mu;
	char *line[LOG_QUEUE];
	size_t len[LOG_QUEUE];
	unsigned head, n;
	uint64_t dropped;
} logq = { PTHREAD_MUTEX_INITIALIZER, { NULL }, { 0 }, 0, 0, 0 };

static void log_write(const char *line, size_t len)
{
	int fd = open(G.cfg.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return;
	if (write(fd, line, len) < 0) {
		/* nowhere left to say so */
	}
	close(fd);
}

static void log_to_file(const char *line, size_t len)
{
	char *copy;

	if (!G.cfg.log[0])
		return;
	if (guard_tls.agent || !atomic_load_explicit(&G.active, memory_order_relaxed)) {
		log_write(line, len);
		return;
	}
	if (G.region) {
		struct gregion *r = G.region;
		struct gregion_logline *l;
		uint32_t h;

		if (len && line[len - 1] == '\n')
			len--;
		if (len > sizeof(l->text))
			len = sizeof(l->text);
		pthread_mutex_lock(&logq.mu);
		h = atomic_load_explicit(&r->log_head, memory_order_relaxed);
		l = &r->log[h % GREGION_LOG];
		atomic_store_explicit(&l->seq, 0, memory_order_relaxed);
		atomic_thread_fence(memory_order_release);   /* 0 is seen before any of the new text */
		memcpy(l->text, line, len);
		atomic_store_explicit(&l->len, (uint32_t)len, memory_order_relaxed);
		atomic_store_explicit(&l->seq, h + 1, memory_order_release);
		atomic_store_explicit(&r->log_head, h + 1, memory_order_release);
		pthread_mutex_unlock(&logq.mu);
		return;
	}
	copy = malloc(len);
	pthread_mutex_lock(&logq.mu);
	if (copy && logq.n < LOG_QUEUE) {
		memcpy(copy, line, len);
		logq.line[(logq.head + logq.n) % LOG_QUEUE] = copy;
		logq.len[(logq.head + logq.n) % LOG_QUEUE] = len;
		logq.n++;
		copy = NULL;
	} else {
		logq.dropped++;
	}
	pthread_mutex_unlock(&logq.mu);
	free(copy);
}

int guard_log_pending(void)
{
	return logq.n != 0;
}

void guard_log_flush(void)
{
	uint64_t dropped;

	for (;;) {
		char *line = NULL;
		size_t len = 0;

		pthread_mutex_lock(&logq.mu);
		if (logq.n) {
			line = logq.line[logq.head];
			len = logq.len[logq.head];
			logq.head = (logq.head + 1) % LOG_QUEUE;
			logq.n--;
		}
		dropped = logq.dropped;
		logq.dropped = 0;
		pthread_mutex_unlock(&logq.mu);
		if (dropped) {
			char note[96];
			int n = snprintf(note, sizeof(note), "smguard: %llu log lines dropped (queue full)\n",
					 (unsigned long long)dropped);

			log_write(note, (size_t)n);
		}
		if (!line)
			return;
		log_write(line, len);
		free(line);
	}
}

static void log_wake(void)
{
	/* no lock needed: a wake missed is the next second's */
	if (G.ship_started)
		pthread_cond_broadcast(&G.cv);
}

void guard_log(const char *msg, const char *fmt, ...)
{
	char rest[1024];
	va_list ap;
	struct gthread *t = &guard_tls;
	uint32_t nest = t->nest;

	if (!G.cfg.log[0])
		return;
	t->nest = 1;
	va_start(ap, fmt);
	vsnprintf(rest, sizeof(rest), fmt, ap);
	va_end(ap);
	log_msg(LOG_INFO, msg, "pid=%ld exe=%s %s", (long)getpid(), G.exe_name, rest);
	t->nest = nest;
	if (!t->agent && atomic_load_explicit(&G.active, memory_order_relaxed))
		log_wake();
}

void guard_log_start(void)
{
	log_init("smguard", LOG_INFO);
	log_set_sink(log_to_file);
}

void guard_log_reset_child(void)
{
	int held = guard_lock_reset_child(&logq.mu);

	/* the parent writes what its threads logged (a queue caught half changed is left, not freed) */
	while (logq.n && !held) {
		free(logq.line[logq.head]);
		logq.head = (logq.head + 1) % LOG_QUEUE;
		logq.n--;
	}
	logq.head = logq.n = 0;
	logq.dropped = 0;
}
