/*
 * static: the dashboard's static files (web/static/), embedded at build time
 * by deploy/embed-static.sh.
 */
#ifndef SM_WEB_STATIC_H
#define SM_WEB_STATIC_H

#include <stddef.h>

struct static_file {
	const char *name;           /* file name, served at /static/NAME */
	const char *ctype;
	const unsigned char *data;
	size_t len;
};

extern const struct static_file sm_static[];
extern const int sm_nstatic;

#endif
