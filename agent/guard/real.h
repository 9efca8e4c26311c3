/*
 * real: how a wrapper reaches the C library's own function. Each file that
 * wraps calls declares a pointer per function (GUARD_REAL_DECLARE) and
 * resolves them all in a constructor that runs before the agent's own
 * (GUARD_REAL_RESOLVE, dlsym(RTLD_NEXT)), so that no lookup ever happens in a
 * signal handler; REAL(f) also resolves on first use, for a wrapper called
 * before the constructors ran (another library's constructor calling read).
 */
#ifndef SM_GUARD_REAL_H
#define SM_GUARD_REAL_H

#include <dlfcn.h>
#include <string.h>

/* Looks name up past this library into the pointer at slot; returns what it found. */
static inline void *guard_real_find(void *slot, const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	memcpy(slot, &p, sizeof(p));
	return p;
}

#define GUARD_REAL_DECLARE(f) static __typeof__(f) *real_##f;
#define GUARD_REAL_RESOLVE(f) guard_real_find(&real_##f, #f);
#define REAL(f) (__builtin_expect(real_##f != NULL, 1) ? real_##f : \
		 (__typeof__(f) *)guard_real_find(&real_##f, #f))

#endif
