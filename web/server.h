/*
 * server: sm-web's HTTP daemon (libmicrohttpd, a pool of threads, one database
 * connection each from a bounded pool), the embedded mining worker, and the
 * dispatch of requests to the JSON API (api.h), the pages (pages.h), static
 * files and /healthz. What a request handler sees is request.h. See
 * docs/web.md.
 */
#ifndef SM_WEB_SERVER_H
#define SM_WEB_SERVER_H

#include "web/request.h"

/* Runs until SIGTERM or SIGINT. Returns 0 after a clean stop, -1 when it cannot start. */
int web_run(const struct web_config *cfg);

#endif
