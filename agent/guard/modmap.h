/*
 * modmap: the ELF modules loaded in this process (executable, shared
 * libraries, vdso), from dl_iterate_phdr: each module's base name, path,
 * GNU build id (read from its loaded note, no file access), load bias and
 * address extent. Addresses are turned into (module, offset) pairs with
 * offset = address - bias, the ELF virtual address that addr2line and
 * `module+0xOFFSET` frames use, stable across runs of the same build.
 */
#ifndef SM_GUARD_MODMAP_H
#define SM_GUARD_MODMAP_H

#include <stddef.h>
#include <stdint.h>

struct gmod {
	char name[256];       /* base name: "libc.so.6", "postgres"; the executable's as started */
	char path[1024];      /* as loaded; "" for the vdso; another process's: through its /proc */
	char file[1024];      /* another process's: the file's own path (once the process is gone) */
	char build_id[129];   /* lower-case hex, "" when none */
	uintptr_t bias;
	uintptr_t lo, hi;     /* extent of its PT_LOAD segments */
};

struct gmodmap {
	struct gmod *mods;    /* sorted by lo */
	size_t n;
};

/*
 * Remembers the base name of argv[0] as the program was started, from
 * /proc/self/cmdline (the program may overwrite its argv later, as redis does
 * for its process title): the executable's module is named so from then on
 * ("redis-server", not "redis-check-rdb" that /usr/bin/redis-server links to).
 * Called once, in the agent's constructor, before any module map is read.
 */
void gmodmap_capture_argv0(void);

/* Reads the modules loaded now into *m (replacing what it held). Returns 0 or -1 (out of memory). */
int gmodmap_load(struct gmodmap *m);
/*
 * Reads the modules of process pid into *m, from /proc/<pid>/maps and each file's ELF headers (the host's
 * collector). Files are opened through /proc/<pid>/map_files (else /proc/<pid>/root), so a module is the
 * very file mapped; the executable comes first, named exe_name (as started) when given. 0 or -1.
 */
int gmodmap_load_pid(struct gmodmap *m, int pid, const char *exe_name);
/* Another process's modules, read while it ran, opened by their own paths (it has ended). */
void gmodmap_detach(struct gmodmap *m);
/* A copy of src into *dst (replacing what it held). 0 or -1. */
int gmodmap_copy(struct gmodmap *dst, const struct gmodmap *src);
void gmodmap_release(struct gmodmap *m);
/* The module holding addr, or NULL. */
const struct gmod *gmodmap_find(const struct gmodmap *m, uintptr_t addr);
/* The executable's module (the first dl_iterate_phdr reports), or NULL. */
const struct gmod *gmodmap_main(const struct gmodmap *m);

#endif
