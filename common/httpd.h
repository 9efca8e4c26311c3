/*
 * httpd: what sm-ingest and sm-web share around libmicrohttpd: the --listen
 * address, the port actually bound (port 0 picks one), the port file that
 * scripts wait for, and libmicrohttpd's own messages as log lines.
 */
#ifndef SM_HTTPD_H
#define SM_HTTPD_H

#include <stdarg.h>
#include <sys/socket.h>

struct MHD_Daemon;

/* "ADDR:PORT", "[V6]:PORT" or ":PORT" (any address) into *ss. Returns AF_INET or AF_INET6, or -1. */
int httpd_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len);
/* The port the daemon listens on, or -1. */
int httpd_bound_port(struct MHD_Daemon *d);
/* Write "PORT\n" to path atomically (a temporary file renamed). Returns 0 or -1 (errno). */
int httpd_write_port_file(const char *path, int port);
/* For MHD_OPTION_EXTERNAL_LOGGER: one warning log line per message, at most 20 per 10 s (then a
 * count of those dropped). */
void httpd_log(void *cls, const char *fmt, va_list ap);

#endif
