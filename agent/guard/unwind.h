/*
 * unwind: walks of the program's threads' stacks with libunwind, from DWARF
 * CFI (.eh_frame; Debian builds without frame pointers), on the program's
 * threads and in the agent's signal handler.
 *
 * libunwind is loaded by the agent itself (dlopen, RTLD_LOCAL), so that its
 * _Unwind_* functions and backtrace() never take the place of libgcc's or the
 * C library's in the program. It is set up so that a walk opens nothing and
 * never touches a descriptor: libunwind 1.6 checks the addresses it reads by
 * writing them to a pipe it opens when it starts and keeps by number; in a
 * program that closes its descriptors those numbers become the program's own
 * files, which libunwind then reads, closes and opens again. The agent
 * refuses it that pipe and checks addresses itself: the current thread's
 * stack above the stack pointer, the loaded modules' readable segments, else
 * a process_vm_readv() of its own memory (no descriptor, no fault).
 *
 * Async-signal-safety: unwind_here(), unwind_context() and what they call
 * may run in a signal handler; the rest may not.
 */
#ifndef SM_GUARD_UNWIND_H
#define SM_GUARD_UNWIND_H

#include <stddef.h>
#include <stdint.h>

/* Loads and sets up libunwind (the constructor, before main()). 0, or -1 with the reason in err. */
int unwind_open(char *err, size_t errlen);
/* Whether unwind_open() succeeded: without it every walk returns 0 frames. */
int unwind_ready(void);
/* Notes the calling thread's stack (once per thread, on the thread, not in a handler). */
void unwind_thread_init(void);
/* The same where the thread may not allocate (pthread_getattr_np() does): what is known to be
 * mapped of its stack, [lo, hi). Nothing when the thread's stack is known already. */
void unwind_thread_bounds(uintptr_t lo, uintptr_t hi);
/* unwind_thread_bounds() for a thread glibc made, from a frame of it at sp and its stack's size (0:
 * unknown): its descriptor is at the top of its stack block, and the size below it is mapped but for
 * guard pages at the bottom (64 KiB is more than the descriptor and any guard inside the size);
 * with no size, from sp's page up. Allocates nothing. */
void unwind_thread_stack(uintptr_t sp, size_t size);
/* After fork, in the child: the module table's lock as new. */
void unwind_reset_child(void);
struct gmodmap;
/* gmodmap_load() between the two (the agent's module maps read the loader's list too). */
int unwind_modmap_load(struct gmodmap *m);
/* The fork handlers: no fork in the middle of a walk of another thread (prepare waits 100 ms at most). */
void unwind_fork_prepare(void);
void unwind_fork_parent(void);
void unwind_fork_child(void);
/* The loaded modules changed (after dlopen): the address check learns their segments. */
void unwind_modules_changed(void);
/* True on a thread where libunwind is starting: the descriptors it asks for are refused. */
int unwind_starting(void);

/* This thread's return addresses from the caller of unwind_here() outwards, innermost first.
 * Through libunwind's per-thread trace cache (its fast path: a frame whose address was seen
 * before costs a few loads) once the thread has one (unwind_cache_make()) and until it has put
 * 7,000 entries in it, below the point where libunwind would replace it by one four times the
 * size; otherwise a DWARF step a frame. Never makes the cache: may run in a signal handler. */
uint32_t unwind_here(uint64_t *ips, uint32_t max);
/* Set on a thread once it has walked 16 times without a trace cache: the next point outside a
 * handler calls unwind_cache_make() (a quarter of a megabyte, filled, with locks and mmap: a
 * thread that walks once or never goes without). fork() makes it too, for the children to share. */
extern __thread uint8_t unwind_want_cache;
/* Makes the calling thread's trace cache (once; after a dlclose or past the entries' cap, never).
 * Not in a handler. */
void unwind_cache_make(void);
/* Whether this thread has walked its stack (its first walk made, or a cache). */
int unwind_walked(void);
/* A module was unloaded (dlclose): from now on unwind_here() walks without libunwind's trace
 * cache, which may hold the unwind rules of code that is gone and reads without checks. */
void unwind_module_unloaded(void);

/* unwind_here()'s walks since the start, for the agent's exit line. */
struct unwind_counts {
	uint64_t walks;     /* through libunwind's trace cache */
	uint64_t frames;    /* that they gave */
	uint64_t entries;   /* made in the cache (a DWARF step each; the rest came from it) */
	uint64_t slow;      /* a DWARF step a frame: after a dlclose, or a thread's cache full enough */
	uint64_t uncached;  /* a DWARF step a frame: the thread had no cache yet */
};
void unwind_counts(struct unwind_counts *c);

/* The same from a signal's context (ucontext_t *), the interrupted pc first. */
uint32_t unwind_context(void *uc, uint64_t *ips, uint32_t max);

#endif
