/*
 * debuginfo: the function symbols of one build, from its ELF debug file
 * (docs/symbols.md).
 *
 * A debug file is read from a path, from memory (an upload), or found by GNU
 * build id: under a local tree (DIR/.build-id/xx/rest.debug, by default
 * /usr/lib/debug), then through debuginfod (elfutils' libdebuginfod, servers
 * from DEBUGINFOD_URLS), bounded in time and size. A file without function
 * symbols of its own whose .gnu_debuglink names a file beside it (DIR/name,
 * DIR/.debug/name, /usr/lib/debug/DIR/name) is followed to that file when its
 * build id matches.
 *
 * The symbols are STT_FUNC/STT_GNU_IFUNC symbols with a size, from .symtab
 * (else .dynsym), one per address (global before weak before local, then the
 * name without a leading '_', then the shorter), versions cut
 * ("memcpy@@GLIBC_2.14" -> "memcpy"), C++ names demangled through
 * __cxa_demangle when libstdc++ is present, at most DEBUGINFO_MAX_NAME bytes of
 * valid UTF-8, sorted by address. Every read is bounded (file size, section
 * and symbol counts) and checked against the file's extent: a hostile file
 * gets an error naming what is wrong, never a crash.
 */
#ifndef SM_DEBUGINFO_H
#define SM_DEBUGINFO_H

#include <stddef.h>
#include <stdint.h>

#define DEBUGINFO_MAX_FILE ((size_t)1 << 30)   /* bytes of one debug file */
#define DEBUGINFO_MAX_SECTIONS 65536
#define DEBUGINFO_MAX_SYMBOLS 4000000
#define DEBUGINFO_MAX_NAME 767                 /* bytes of a function name */
#define DEBUGINFO_MAX_BUILD_ID 40              /* bytes (80 hex digits) */

struct dsym {
	uint64_t addr, size;   /* [addr, addr + size): ELF virtual addresses */
	const char *name;
};

/* How debug files are looked for by build id. */
struct debuginfo_opts {
	const char *debug_dir;        /* local tree root; NULL: "/usr/lib/debug"; "" none */
	int use_debuginfod;           /* through DEBUGINFOD_URLS (nothing when unset) */
	int timeout_s;                /* whole download, 0: 60 */
	size_t max_bytes;             /* download size, 0: DEBUGINFO_MAX_FILE */
};

struct debuginfo;

/* An empty reader, or NULL (out of memory). Caller frees with debuginfo_free (NULL-safe). */
struct debuginfo *debuginfo_open(void);
void debuginfo_free(struct debuginfo *d);

/* Each replaces what d held. Return 0, or -1 with the reason in debuginfo_error(). */
int debuginfo_load_file(struct debuginfo *d, const char *path);
/* data[0..len) is not kept (copied when needed). */
int debuginfo_load_mem(struct debuginfo *d, const void *data, size_t len);
/* build_id: lower-case hex. The file found is named by debuginfo_source() and debuginfo_path(). */
int debuginfo_find(struct debuginfo *d, const char *build_id, const struct debuginfo_opts *opts);

const char *debuginfo_error(const struct debuginfo *d);
/* Of the file loaded: its build id (lower-case hex, "" when it has none), symbols sorted by address. */
const char *debuginfo_build_id(const struct debuginfo *d);
size_t debuginfo_count(const struct debuginfo *d);
const struct dsym *debuginfo_symbols(const struct debuginfo *d);
/* Where the last debuginfo_find() found it: "build-id tree" or "debuginfod", and the file read. */
const char *debuginfo_source(const struct debuginfo *d);
const char *debuginfo_path(const struct debuginfo *d);

#endif
