/*
 * symbolize: addresses of this process -> frame names, with elfutils' libdwfl.
 *
 * `module!function` only when the address lies inside the function symbol's
 * extent [value, value + size) (.symtab, else .dynsym, or a separate debug
 * file under /usr/lib/debug/.build-id), otherwise `module+0xOFFSET` (offset
 * = the ELF address; for a stack's frame, that of its function's start): a
 * stripped static function never borrows its neighbour's name. C++ names are demangled when the process has
 * __cxa_demangle (it does whenever it runs C++).
 *
 * Runs on the agent's own thread, never in the program's. ELF files are read
 * through private mappings and their descriptors closed at once, so nothing
 * stays open for the program to trip over.
 */
#ifndef SM_GUARD_SYMBOLIZE_H
#define SM_GUARD_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "agent/guard/modmap.h"

struct gsym;

/* A symbolizer for the modules in map (copied). Returns NULL with the reason in err. Caller frees. */
struct gsym *gsym_open(const struct gmodmap *map, char *err, size_t errlen);
/* Opens every module's file now, not at its first lookup: with the identity the caller has now (the
 * collector opens a process's claimed files as that process's user). */
void gsym_load_files(struct gsym *s);
/* Unmaps every file read. NULL-safe. */
void gsym_free(struct gsym *s);

/*
 * The frame name of addr into out (at most cap bytes, NUL included; cut at a
 * UTF-8 boundary): "libc.so.6!read", "postgres+0x4a3b0", or "[unknown]+0x7f12..."
 * outside every module. Returns the length. The name is cached.
 */
size_t gsym_frame(struct gsym *s, uintptr_t addr, char *out, size_t cap);
/*
 * The same for a frame of a stack: an address in no function symbol is named by the start of its
 * function, from the unwind table ("postgres+0x30f4a0" for every sample and call inside it), so that
 * a stripped function is one frame, as a named one is; addr's own offset when no entry holds it.
 */
size_t gsym_function(struct gsym *s, uintptr_t addr, char *out, size_t cap);

/*
 * How to find the caller of a frame whose pc is addr (an instruction of it: a return address less
 * one), from the module's unwind table, in DWARF's x86-64 registers: the frame's CFA is register
 * cfa_reg (6 rbp, 7 rsp) plus cfa_off; the return address is the word at CFA + ra_off; the caller's
 * rbp is the word at CFA + rbp_off (GSYM_AT), this frame's (GSYM_SAME), or unknown. 0, or -1 when
 * the table holds no such rule for addr (no entry, or a rule of another shape).
 */
enum { GSYM_SAME, GSYM_AT, GSYM_UNKNOWN };
struct gsym_rule {
	int cfa_reg;
	int64_t cfa_off;
	int64_t ra_off;
	int rbp;
	int64_t rbp_off;
};
int gsym_rule(struct gsym *s, uintptr_t addr, struct gsym_rule *r);

/* The build id (lower-case hex) of the module named module[0..len), or NULL when it has none. */
const char *gsym_build_id(const struct gsym *s, const char *module, size_t len);


#endif
