/*
 * httpd: what sm-ingest and sm-web share around libmicrohttpd: the --listen
 * address, the port actually bound (port 0 picks one), the port file that
 * scripts wait for, libmicrohttpd's own messages as log lines, and the framing
 * checks of RFC 9112 that libmicrohttpd leaves to its user (request smuggling).
 */
#ifndef SM_HTTPD_H
#define SM_HTTPD_H

#include <microhttpd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/socket.h>

/* "ADDR:PORT", "[V6]:PORT" or ":PORT" (any address) into *ss. Returns AF_INET or AF_INET6, or -1. */
int httpd_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len);
/* The port the daemon listens on, or -1. */
int httpd_bound_port(struct MHD_Daemon *d);
/* Write "PORT\n" to path atomically (a temporary file renamed). Returns 0 or -1 (errno). */
int httpd_write_port_file(const char *path, int port);
/* For MHD_OPTION_EXTERNAL_LOGGER: one warning log line per message, at most 20 per 10 s (then a
 * count of those dropped). */
void httpd_log(void *cls, const char *fmt, va_list ap);

/*
 * Whether a request's headers frame it unambiguously (RFC 9112): exactly one Host with HTTP/1.1,
 * at most one Content-Length (even with equal values), no Content-Length with Transfer-Encoding,
 * no transfer coding but chunked, no header name holding whitespace or other non-token bytes, at
 * most one Authorization, Content-Type and Content-Encoding (each read as one value).
 * For the first call of the access handler, before any body is read. Returns 0, or the status to
 * refuse with (400; 501 for an unknown transfer coding) with *why set to a static message.
 */
int httpd_check_framing(struct MHD_Connection *c, const char *version, const char **why);
/* Answers status with {"error": why} and Connection: close, so that libmicrohttpd reads nothing
 * more of the connection (a smuggled request behind the body is never seen). */
enum MHD_Result httpd_refuse(struct MHD_Connection *c, int status, const char *why);
/* For /healthz and /metrics, which take GET and HEAD (libmicrohttpd sends no body to HEAD): false
 * for those, which the caller serves; else answers OPTIONS 204 and any other method 405, both with
 * Allow, and returns true with *ret what the access handler is to return. */
bool httpd_probe_method(struct MHD_Connection *c, const char *method, enum MHD_Result *ret);

#endif
