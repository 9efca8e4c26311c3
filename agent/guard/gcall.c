/*
 * gcall: the names of the wrapped calls (rt.h's GCALLS), by which the streams name a stack's wrapped
 * call, in the program or in the host's collector.
 */
#include "agent/guard/rt.h"

#define NAME(id, name, loop, kind, fd, async) [id] = name,

const char *const gcall_name[GC_COUNT] = { GCALLS(NAME) };
