/*
 * gcall: the table of the wrapped calls (rt.h's enum gcall_id): their names, whether they may be a
 * loop's wait, what kind of wait they are. The wrappers' bookkeeping reads gcall_info in the
 * program; the streams name a stack's wrapped call with gcall_name, in the program or in the host's
 * collector.
 */
#include "agent/guard/rt.h"

/* id, name, may be a loop site, kind, a loop site only on sockets/pipes/terminals, deferred requests */
#define GCALLS(X) \
	X(GC_NONE,            "",                        0, GK_IO,    0, GA_NONE) \
	X(GC_EPOLL_WAIT,      "epoll_wait",              1, GK_IO,    0, GA_NONE) \
	X(GC_EPOLL_PWAIT,     "epoll_pwait",             1, GK_IO,    0, GA_NONE) \
	X(GC_POLL,            "poll",                    1, GK_IO,    0, GA_NONE) \
	X(GC_PPOLL,           "ppoll",                   1, GK_IO,    0, GA_NONE) \
	X(GC_SELECT,          "select",                  1, GK_IO,    0, GA_NONE) \
	X(GC_PSELECT,         "pselect",                 1, GK_IO,    0, GA_NONE) \
	X(GC_ACCEPT,          "accept",                  1, GK_IO,    0, GA_ACCEPT) \
	X(GC_ACCEPT4,         "accept4",                 1, GK_IO,    0, GA_ACCEPT) \
	X(GC_RECV,            "recv",                    1, GK_IO,    0, GA_READ) \
	X(GC_RECVFROM,        "recvfrom",                1, GK_IO,    0, GA_READ) \
	X(GC_RECVMSG,         "recvmsg",                 1, GK_IO,    0, GA_READ) \
	X(GC_READ,            "read",                    1, GK_IO,    1, GA_READ) \
	X(GC_READV,           "readv",                   1, GK_IO,    1, GA_READ) \
	X(GC_COND_WAIT,       "pthread_cond_wait",       1, GK_COND,  0, GA_NONE) \
	X(GC_COND_TIMEDWAIT,  "pthread_cond_timedwait",  1, GK_COND,  0, GA_NONE) \
	X(GC_SEM_WAIT,        "sem_wait",                1, GK_SEM,   0, GA_NONE) \
	X(GC_SEM_TIMEDWAIT,   "sem_timedwait",           1, GK_SEM,   0, GA_NONE) \
	X(GC_MSGRCV,          "msgrcv",                  1, GK_IO,    0, GA_NONE) \
	X(GC_SIGWAITINFO,     "sigwaitinfo",             1, GK_IO,    0, GA_NONE) \
	X(GC_SIGTIMEDWAIT,    "sigtimedwait",            1, GK_IO,    0, GA_NONE) \
	X(GC_MUTEX_LOCK,      "pthread_mutex_lock",      0, GK_LOCK,  0, GA_NONE) \
	X(GC_MUTEX_TIMEDLOCK, "pthread_mutex_timedlock", 0, GK_LOCK,  0, GA_NONE) \
	X(GC_RWLOCK_RDLOCK,   "pthread_rwlock_rdlock",   0, GK_LOCK,  0, GA_NONE) \
	X(GC_RWLOCK_WRLOCK,   "pthread_rwlock_wrlock",   0, GK_LOCK,  0, GA_NONE) \
	X(GC_JOIN,            "pthread_join",            0, GK_JOIN,  0, GA_NONE) \
	X(GC_WRITE,           "write",                   0, GK_IO,    0, GA_SEND) \
	X(GC_WRITEV,          "writev",                  0, GK_IO,    0, GA_SEND) \
	X(GC_SEND,            "send",                    0, GK_IO,    0, GA_SEND) \
	X(GC_SENDTO,          "sendto",                  0, GK_IO,    0, GA_SEND) \
	X(GC_SENDMSG,         "sendmsg",                 0, GK_IO,    0, GA_SEND) \
	X(GC_PREAD,           "pread64",                 0, GK_IO,    0, GA_NONE) \
	X(GC_PWRITE,          "pwrite64",                0, GK_IO,    0, GA_NONE) \
	X(GC_FSYNC,           "fsync",                   0, GK_IO,    0, GA_NONE) \
	X(GC_FDATASYNC,       "fdatasync",               0, GK_IO,    0, GA_NONE) \
	X(GC_CONNECT,         "connect",                 0, GK_IO,    0, GA_CONNECT) \
	X(GC_NANOSLEEP,       "nanosleep",               0, GK_SLEEP, 0, GA_NONE) \
	X(GC_CLOCK_NANOSLEEP, "clock_nanosleep",         0, GK_SLEEP, 0, GA_NONE) \
	X(GC_USLEEP,          "usleep",                  0, GK_SLEEP, 0, GA_NONE) \
	X(GC_SLEEP,           "sleep",                   0, GK_SLEEP, 0, GA_NONE) \
	X(GC_WAITPID,         "waitpid",                 0, GK_IO,    0, GA_NONE) \
	X(GC_FLOCK,           "flock",                   0, GK_IO,    0, GA_NONE)

#define INFO(id, name, loop, kind, fd, async) [id] = { loop, kind, fd, async },
#define NAME(id, name, loop, kind, fd, async) [id] = name,

/* what the bookkeeping reads on every call: 4 bytes each, the whole table in 3 cache lines */
const struct gcall_info gcall_info[GC_COUNT] = { GCALLS(INFO) };
const char *const gcall_name[GC_COUNT] = { GCALLS(NAME) };
