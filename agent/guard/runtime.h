/*
 * runtime: the agent's top layer (hot.h draws the layers): start-up and exit
 * (runtime.c, a constructor and a destructor) and the program's fork()
 * (fork.c). Nothing below calls into it.
 */
#ifndef SM_GUARD_RUNTIME_H
#define SM_GUARD_RUNTIME_H

/* Registers the agent's fork handlers (start-up): 0, or -1. */
int guard_fork_install(void);

#endif
