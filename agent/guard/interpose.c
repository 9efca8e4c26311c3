/*
 * interpose: the C library calls libsmguard.so wraps (guard.md "Units",
 * "Inspection"; docs/guard.md lists them). Each wrapper calls the real
 * function and brackets it with the bookkeeping of unit.c; return values and
 * errno are always the real call's.
 *
 * Besides the waits, it keeps the agent out of the program's way:
 *   - a call the agent's signal alone interrupted is resumed where the kernel
 *     would not resume it, with what was left of its time (a socket's own
 *     SO_RCVTIMEO and SO_SNDTIMEO too); a blocking connect() goes on as the
 *     kernel would have gone on with it. The program's own signals still
 *     interrupt what they interrupt (signals.c counts its handlers).
 *   - pointers the program passes are read by the kernel first: a bad one is
 *     EFAULT, as without the agent, never a crash in the agent;
 *   - close/close_range/closefrom skip the agent's descriptors, and the agent's
 *     threads' own descriptors are moved out of the way where those threads
 *     share the program's table (threads.c, own_fd_table());
 *   - unshare and setns, which a process of more than one thread cannot do,
 *     succeed in a single-threaded program: the agent's threads step aside;
 *   - exec disarms the thread's CPU timer first and takes back any of the
 *     agent's signals pending (they would survive exec); pthread_create gives
 *     the new thread its creator's view of its mask and its stack base;
 *     dlopen/dlclose keep the sampler out of the loader.
 */
#include "agent/guard/real.h"
#include "agent/guard/gtab.h"
#include "agent/guard/hot.h"
#include "agent/guard/region.h"
#include "agent/guard/threads.h"
#include "agent/guard/unwind.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define RET ((uintptr_t)__builtin_return_address(0))
#define CFA ((uintptr_t)__builtin_dwarf_cfa())
/* the call's kind and flags a constant of the wrapper's code (rt.h's GCALL_P_) */
#define BEGIN(c, id, ret, cfa, obj, fd) gcall_begin(c, id, GCALL_P_##id, ret, cfa, obj, fd)

extern char **environ;

/* ---- the real functions ---- */

/* __read_chk and friends are not declared by the headers without fortification */
ssize_t __read_chk(int, void *, size_t, size_t);
ssize_t __recv_chk(int, void *, size_t, size_t, int);
ssize_t __recvfrom_chk(int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *);
ssize_t __pread_chk(int, void *, size_t, off_t, size_t);
ssize_t __pread64_chk(int, void *, size_t, off64_t, size_t);
int __poll_chk(struct pollfd *, nfds_t, int, size_t);
int __ppoll_chk(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *, size_t);

#define REAL_LIST(X)                                                                                 \
	X(epoll_wait) X(epoll_pwait) X(poll) X(ppoll) X(select) X(pselect) X(accept) X(accept4) X(recv) \
	X(recvfrom) X(recvmsg) X(read) X(readv) X(sem_wait) X(sem_timedwait) X(sem_post) X(msgrcv)      \
	X(msgsnd) X(semop) X(semtimedop) X(sigwaitinfo) X(sigtimedwait) X(pthread_mutex_lock)          \
	X(pthread_mutex_trylock) X(pthread_mutex_timedlock) X(pthread_mutex_unlock)                    \
	X(pthread_rwlock_rdlock) X(pthread_rwlock_tryrdlock) X(pthread_rwlock_wrlock)                  \
	X(pthread_rwlock_trywrlock) X(pthread_rwlock_unlock) X(pthread_join) X(write) X(writev) X(send) \
	X(sendto) X(sendmsg) X(pread) X(pread64) X(pwrite) X(pwrite64) X(fsync) X(fdatasync)           \
	X(connect) X(nanosleep) X(clock_nanosleep) X(usleep) X(sleep) X(waitpid) X(flock) X(__read_chk) \
	X(__recv_chk) X(__recvfrom_chk) X(__pread_chk) X(__pread64_chk) X(__poll_chk) X(__ppoll_chk)   \
	X(close) X(close_range) X(closefrom) X(execve) X(execv) X(execvp) X(execvpe) X(fexecve)        \
	X(pthread_create) X(dlopen) X(dlclose) X(open) X(open64) X(openat) X(openat64) X(pipe) X(pipe2) \
	X(socket) X(socketpair) X(eventfd) X(unshare) X(setns)
REAL_LIST(GUARD_REAL_DECLARE)
static int (*real_pthread_cond_wait)(pthread_cond_t *, pthread_mutex_t *);
static int (*real_pthread_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*real_pthread_cond_signal)(pthread_cond_t *);
static int (*real_pthread_cond_broadcast)(pthread_cond_t *);

static void *cond_symbol(const char *name)
{
	/* the pthread_cond_* symbols have an old version too: ask for the current one */
	void *p = dlvsym(RTLD_NEXT, name, "GLIBC_2.3.2");

	return p ? p : dlsym(RTLD_NEXT, name);
}

static void resolve_all(void)
{
	REAL_LIST(GUARD_REAL_RESOLVE)
	real_pthread_cond_wait = (int (*)(pthread_cond_t *, pthread_mutex_t *))cond_symbol("pthread_cond_wait");
	real_pthread_cond_timedwait = (int (*)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *))
		cond_symbol("pthread_cond_timedwait");
	real_pthread_cond_signal = (int (*)(pthread_cond_t *))cond_symbol("pthread_cond_signal");
	real_pthread_cond_broadcast = (int (*)(pthread_cond_t *))cond_symbol("pthread_cond_broadcast");
}

/* The condition-variable calls resolve with their version, all at once. */
#define REAL_COND(f) (GUARD_LIKELY(real_##f != NULL) ? real_##f : (resolve_all(), real_##f))

__attribute__((constructor(101))) static void interpose_init(void)
{
	resolve_all();
}

/* For the runtime: the real functions it must reach past its own wrappers from program threads. */
int guard_real_close(int fd)
{
	return REAL(close)(fd);
}

int guard_real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	return REAL(pthread_create)(th, attr, fn, arg);
}

int guard_real_pthread_join(pthread_t th, void **ret)
{
	return REAL(pthread_join)(th, ret);
}

int guard_real_nanosleep(const struct timespec *req, struct timespec *rem)
{
	return REAL(nanosleep)(req, rem);
}

/* ---- time left ---- */

/* Milliseconds left until deadline (ns), at least 0, rounded up like the kernel does. */
static int left_ms(int64_t deadline)
{
	int64_t left = deadline - guard_now();

	if (left <= 0)
		return 0;
	left = (left + 999999) / 1000000;
	return left > INT32_MAX ? INT32_MAX : (int)left;
}

static void left_ts(int64_t deadline, struct timespec *ts)
{
	int64_t left = deadline - guard_now();

	if (left < 0)
		left = 0;
	ts->tv_sec = left / 1000000000;
	ts->tv_nsec = left % 1000000000;
}

/* Only once the kernel read *ts without complaint: a bad pointer is the kernel's EFAULT. */
static int64_t ts_ns(const struct timespec *ts)
{
	if (ts->tv_sec > INT64_MAX / 1000000000 - 1)
		return INT64_MAX / 2;
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* ---- a socket's own timeout, for a call resumed after the agent's signal ---- */

struct sotmo {
	int fd, opt;          /* opt: SO_RCVTIMEO or SO_SNDTIMEO */
	int8_t state;         /* 0 not read yet, 1 none (or not a socket), 2 the socket has one */
	int8_t shortened;     /* the socket holds what was left of it: put orig back */
	struct timeval orig;
};

#define SOTMO(fd, opt) { (fd), (opt), 0, 0, { 0, 0 } }

/*
 * Before a call is tried again: a socket timeout is shortened to what is left of it, so that the
 * retry ends when the first call would have. 0 when nothing is left: the call timed out (EAGAIN).
 */
static int sotmo_again(struct sotmo *m, int64_t t0)
{
	int saved = errno;
	int64_t left;
	struct timeval tv;

	if (m->state == 0) {
		socklen_t len = sizeof(m->orig);

		m->state = 1;
		if (m->fd >= 0 && getsockopt(m->fd, SOL_SOCKET, m->opt, &m->orig, &len) == 0 &&
		    (m->orig.tv_sec || m->orig.tv_usec))
			m->state = 2;
	}
	errno = saved;
	if (m->state != 2)
		return 1;
	left = t0 + (int64_t)m->orig.tv_sec * 1000000000 + (int64_t)m->orig.tv_usec * 1000 - guard_now();
	if (left < 1000) {
		errno = EAGAIN;
		return 0;
	}
	tv.tv_sec = left / 1000000000;
	tv.tv_usec = (left % 1000000000) / 1000;
	m->shortened = setsockopt(m->fd, SOL_SOCKET, m->opt, &tv, sizeof(tv)) == 0;
	errno = saved;
	return 1;
}

static inline void sotmo_restore(struct sotmo *m)
{
	if (GUARD_UNLIKELY(m->shortened)) {
		int saved = errno;

		setsockopt(m->fd, SOL_SOCKET, m->opt, &m->orig, sizeof(m->orig));
		errno = saved;
	}
}

/* ---- loop-capable waits ---- */

GUARD_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	struct gcall c;
	int64_t deadline;
	int r;

	if (!BEGIN(&c, GC_EPOLL_WAIT, RET, CFA, NULL, epfd))
		return REAL(epoll_wait)(epfd, ev, max, timeout);
	deadline = c.t0 + (int64_t)timeout * 1000000;
	while ((r = REAL(epoll_wait)(epfd, ev, max, timeout)) < 0 && errno == EINTR &&
	       guard_sigsnap_ours_only(&c.sigs))
		if (timeout > 0 && (timeout = left_ms(deadline)) == 0) {
			r = 0;
			break;
		}
	gcall_finish(&c);
	return r;
}

GUARD_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *ss)
{
	struct gcall c;
	int64_t deadline;
	int r;

	if (!BEGIN(&c, GC_EPOLL_PWAIT, RET, CFA, NULL, epfd))
		return REAL(epoll_pwait)(epfd, ev, max, timeout, ss);
	deadline = c.t0 + (int64_t)timeout * 1000000;
	while ((r = REAL(epoll_pwait)(epfd, ev, max, timeout, ss)) < 0 && errno == EINTR &&
	       guard_sigsnap_ours_only(&c.sigs))
		if (timeout > 0 && (timeout = left_ms(deadline)) == 0) {
			r = 0;
			break;
		}
	gcall_finish(&c);
	return r;
}

static int poll_common(struct pollfd *fds, nfds_t n, int timeout, uintptr_t ret, uintptr_t cfa,
		       size_t fdslen, int chk)
{
	struct gcall c;
	int64_t deadline;
	int r;

#define CALL_POLL() (chk ? REAL(__poll_chk)(fds, n, timeout, fdslen) : REAL(poll)(fds, n, timeout))
	if (!BEGIN(&c, GC_POLL, ret, cfa, NULL, -1))
		return CALL_POLL();
	deadline = c.t0 + (int64_t)timeout * 1000000;
	while ((r = CALL_POLL()) < 0 && errno == EINTR && guard_sigsnap_ours_only(&c.sigs))
		if (timeout > 0 && (timeout = left_ms(deadline)) == 0) {
			r = 0;
			break;
		}
#undef CALL_POLL
	gcall_finish(&c);
	return r;
}

GUARD_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return poll_common(fds, n, timeout, RET, CFA, 0, 0);
}

GUARD_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	return poll_common(fds, n, timeout, RET, CFA, fdslen, 1);
}

static int ppoll_common(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *ss,
			uintptr_t ret, uintptr_t cfa, size_t fdslen, int chk)
{
	struct gcall c;
	struct timespec left;
	const struct timespec *cur = ts;
	int64_t deadline = 0;
	int r;

#define CALL_PPOLL() (chk ? REAL(__ppoll_chk)(fds, n, cur, ss, fdslen) : REAL(ppoll)(fds, n, cur, ss))
	if (!BEGIN(&c, GC_PPOLL, ret, cfa, NULL, -1))
		return CALL_PPOLL();
	while ((r = CALL_PPOLL()) < 0 && errno == EINTR && guard_sigsnap_ours_only(&c.sigs))
		if (ts) {
			if (!deadline)
				deadline = c.t0 + ts_ns(ts);
			left_ts(deadline, &left);
			cur = &left;
		}
#undef CALL_PPOLL
	gcall_finish(&c);
	return r;
}

GUARD_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *ss)
{
	return ppoll_common(fds, n, ts, ss, RET, CFA, 0, 0);
}

GUARD_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *ss,
			     size_t fdslen)
{
	return ppoll_common(fds, n, ts, ss, RET, CFA, fdslen, 1);
}

GUARD_EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	struct gcall c;
	int rc;

	if (!BEGIN(&c, GC_SELECT, RET, CFA, NULL, -1))
		return REAL(select)(n, r, w, e, tv);
	/* Linux leaves the time not slept in *tv: a retry waits what was left */
	while ((rc = REAL(select)(n, r, w, e, tv)) < 0 && errno == EINTR && guard_sigsnap_ours_only(&c.sigs))
		;
	gcall_finish(&c);
	return rc;
}

GUARD_EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts, const sigset_t *ss)
{
	struct gcall c;
	struct timespec left;
	const struct timespec *cur = ts;
	int64_t deadline = 0;
	int rc;

	if (!BEGIN(&c, GC_PSELECT, RET, CFA, NULL, -1))
		return REAL(pselect)(n, r, w, e, ts, ss);
	while ((rc = REAL(pselect)(n, r, w, e, cur, ss)) < 0 && errno == EINTR && guard_sigsnap_ours_only(&c.sigs))
		if (ts) {
			if (!deadline)
				deadline = c.t0 + ts_ns(ts);
			left_ts(deadline, &left);
			cur = &left;
		}
	gcall_finish(&c);
	return rc;
}

/*
 * The bookkeeping around one call, resumed while the agent's signal alone interrupted it. fd and
 * opt name the socket timeout the retry keeps to (-1, 0 when none); calls that return an error
 * number (the pthread ones) are never interrupted and run once.
 */
#define SIMPLE(id, obj, fd, opt, type, call)                                                           \
	do {                                                                                           \
		struct gcall c_;                                                                       \
		type r_;                                                                               \
		if (!BEGIN(&c_, id, RET, CFA, obj, fd))                                                \
			return call;                                                                   \
		r_ = call;                                                                             \
		if (GUARD_UNLIKELY(r_ < 0) && errno == EINTR) {                                        \
			/* off the common path (a socket's timeout kept across the retry) */           \
			struct sotmo m_ = SOTMO(fd, opt);                                              \
			while (guard_sigsnap_ours_only(&c_.sigs) && sotmo_again(&m_, c_.t0) &&         \
			       (r_ = call) < 0 && errno == EINTR)                                      \
				;                                                                      \
			sotmo_restore(&m_);                                                            \
		}                                                                                      \
		c_.res = (long)r_;                                                                     \
		gcall_finish(&c_);                                                                     \
		return r_;                                                                             \
	} while (0)

#define RCV SO_RCVTIMEO
#define SND SO_SNDTIMEO

GUARD_EXPORT int accept(int fd, struct sockaddr *a, socklen_t *l)
{
	SIMPLE(GC_ACCEPT, NULL, fd, RCV, int, REAL(accept)(fd, a, l));
}

GUARD_EXPORT int accept4(int fd, struct sockaddr *a, socklen_t *l, int flags)
{
	SIMPLE(GC_ACCEPT4, NULL, fd, RCV, int, REAL(accept4)(fd, a, l, flags));
}

GUARD_EXPORT ssize_t recv(int fd, void *b, size_t n, int flags)
{
	SIMPLE(GC_RECV, NULL, fd, RCV, ssize_t, REAL(recv)(fd, b, n, flags));
}

GUARD_EXPORT ssize_t __recv_chk(int fd, void *b, size_t n, size_t blen, int flags)
{
	SIMPLE(GC_RECV, NULL, fd, RCV, ssize_t, REAL(__recv_chk)(fd, b, n, blen, flags));
}

GUARD_EXPORT ssize_t recvfrom(int fd, void *b, size_t n, int flags, struct sockaddr *a, socklen_t *l)
{
	SIMPLE(GC_RECVFROM, NULL, fd, RCV, ssize_t, REAL(recvfrom)(fd, b, n, flags, a, l));
}

GUARD_EXPORT ssize_t __recvfrom_chk(int fd, void *b, size_t n, size_t blen, int flags, struct sockaddr *a,
				    socklen_t *l)
{
	SIMPLE(GC_RECVFROM, NULL, fd, RCV, ssize_t, REAL(__recvfrom_chk)(fd, b, n, blen, flags, a, l));
}

GUARD_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	SIMPLE(GC_RECVMSG, NULL, fd, RCV, ssize_t, REAL(recvmsg)(fd, m, flags));
}

GUARD_EXPORT ssize_t read(int fd, void *b, size_t n)
{
	SIMPLE(GC_READ, NULL, fd, RCV, ssize_t, REAL(read)(fd, b, n));
}

GUARD_EXPORT ssize_t __read_chk(int fd, void *b, size_t n, size_t blen)
{
	SIMPLE(GC_READ, NULL, fd, RCV, ssize_t, REAL(__read_chk)(fd, b, n, blen));
}

GUARD_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	SIMPLE(GC_READV, NULL, fd, RCV, ssize_t, REAL(readv)(fd, iov, n));
}

GUARD_EXPORT int pthread_cond_wait(pthread_cond_t *cv, pthread_mutex_t *m)
{
	/* the wait unlocks m inside the C library: a thread blocked on m is readied by this one */
	guard_note_release(m);
	SIMPLE(GC_COND_WAIT, cv, -1, 0, int, REAL_COND(pthread_cond_wait)(cv, m));
}

GUARD_EXPORT int pthread_cond_timedwait(pthread_cond_t *cv, pthread_mutex_t *m, const struct timespec *ts)
{
	guard_note_release(m);
	SIMPLE(GC_COND_TIMEDWAIT, cv, -1, 0, int, REAL_COND(pthread_cond_timedwait)(cv, m, ts));
}

GUARD_EXPORT int pthread_cond_signal(pthread_cond_t *cv)
{
	guard_note_release(cv);
	return REAL_COND(pthread_cond_signal)(cv);
}

GUARD_EXPORT int pthread_cond_broadcast(pthread_cond_t *cv)
{
	guard_note_release(cv);
	return REAL_COND(pthread_cond_broadcast)(cv);
}

GUARD_EXPORT int sem_wait(sem_t *s)
{
	SIMPLE(GC_SEM_WAIT, s, -1, 0, int, REAL(sem_wait)(s));
}

GUARD_EXPORT int sem_timedwait(sem_t *s, const struct timespec *abs)
{
	/* an absolute deadline: a retry keeps it */
	SIMPLE(GC_SEM_TIMEDWAIT, s, -1, 0, int, REAL(sem_timedwait)(s, abs));
}

GUARD_EXPORT int sem_post(sem_t *s)
{
	guard_note_release(s);
	return REAL(sem_post)(s);
}

GUARD_EXPORT ssize_t msgrcv(int id, void *p, size_t n, long type, int flags)
{
	SIMPLE(GC_MSGRCV, NULL, -1, 0, ssize_t, REAL(msgrcv)(id, p, n, type, flags));
}

/* A signal the agent sent that the program's wait took (it never should: signals.c keeps the agent's
 * signal off threads that block it): waited for again. */
static int took_ours(int r, const siginfo_t *si)
{
	return r == G.sig && guard_sig_ours(si);
}

GUARD_EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	struct gcall c;
	siginfo_t mine, *si = info ? info : &mine;
	int r;

	if (!BEGIN(&c, GC_SIGWAITINFO, RET, CFA, NULL, -1))
		return REAL(sigwaitinfo)(set, info);
	while (((r = REAL(sigwaitinfo)(set, si)) < 0 && errno == EINTR && guard_sigsnap_ours_only(&c.sigs)) ||
	       took_ours(r, si))
		;
	gcall_finish(&c);
	return r;
}

GUARD_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
	struct gcall c;
	siginfo_t mine, *si = info ? info : &mine;
	struct timespec left;
	const struct timespec *cur = ts;
	int64_t deadline = 0;
	int r;

	if (!BEGIN(&c, GC_SIGTIMEDWAIT, RET, CFA, NULL, -1))
		return REAL(sigtimedwait)(set, info, ts);
	while (((r = REAL(sigtimedwait)(set, si, cur)) < 0 && errno == EINTR && guard_sigsnap_ours_only(&c.sigs)) ||
	       took_ours(r, si))
		if (ts) {
			if (!deadline)
				deadline = c.t0 + ts_ns(ts);
			left_ts(deadline, &left);
			cur = &left;
		}
	gcall_finish(&c);
	return r;
}

/* ---- locks: uncontended acquisitions cost one try and no bookkeeping ---- */

GUARD_EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	int r;

	if (!atomic_load_explicit(&G.active, memory_order_relaxed))
		return REAL(pthread_mutex_lock)(m);
	r = REAL(pthread_mutex_trylock)(m);
	if (r == 0 || r == EOWNERDEAD)
		return r;
	SIMPLE(GC_MUTEX_LOCK, m, -1, 0, int, REAL(pthread_mutex_lock)(m));
}

GUARD_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs)
{
	SIMPLE(GC_MUTEX_TIMEDLOCK, m, -1, 0, int, REAL(pthread_mutex_timedlock)(m, abs));
}

GUARD_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
	guard_note_release(m);
	return REAL(pthread_mutex_unlock)(m);
}

GUARD_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	if (atomic_load_explicit(&G.active, memory_order_relaxed) && REAL(pthread_rwlock_tryrdlock)(l) == 0)
		return 0;
	SIMPLE(GC_RWLOCK_RDLOCK, l, -1, 0, int, REAL(pthread_rwlock_rdlock)(l));
}

GUARD_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	if (atomic_load_explicit(&G.active, memory_order_relaxed) && REAL(pthread_rwlock_trywrlock)(l) == 0)
		return 0;
	SIMPLE(GC_RWLOCK_WRLOCK, l, -1, 0, int, REAL(pthread_rwlock_wrlock)(l));
}

GUARD_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
	guard_note_release(l);
	return REAL(pthread_rwlock_unlock)(l);
}

GUARD_EXPORT int pthread_join(pthread_t th, void **ret)
{
	SIMPLE(GC_JOIN, (const void *)(uintptr_t)th, -1, 0, int, REAL(pthread_join)(th, ret));
}

/* ---- I/O and sleeps ---- */

GUARD_EXPORT ssize_t write(int fd, const void *b, size_t n)
{
	SIMPLE(GC_WRITE, NULL, fd, SND, ssize_t, REAL(write)(fd, b, n));
}

GUARD_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	SIMPLE(GC_WRITEV, NULL, fd, SND, ssize_t, REAL(writev)(fd, iov, n));
}

GUARD_EXPORT ssize_t send(int fd, const void *b, size_t n, int flags)
{
	SIMPLE(GC_SEND, NULL, fd, SND, ssize_t, REAL(send)(fd, b, n, flags));
}

GUARD_EXPORT ssize_t sendto(int fd, const void *b, size_t n, int flags, const struct sockaddr *a, socklen_t l)
{
	SIMPLE(GC_SENDTO, NULL, fd, SND, ssize_t, REAL(sendto)(fd, b, n, flags, a, l));
}

GUARD_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	SIMPLE(GC_SENDMSG, NULL, fd, SND, ssize_t, REAL(sendmsg)(fd, m, flags));
}

GUARD_EXPORT ssize_t pread(int fd, void *b, size_t n, off_t off)
{
	SIMPLE(GC_PREAD, NULL, fd, RCV, ssize_t, REAL(pread)(fd, b, n, off));
}

GUARD_EXPORT ssize_t pread64(int fd, void *b, size_t n, off64_t off)
{
	SIMPLE(GC_PREAD, NULL, fd, RCV, ssize_t, REAL(pread64)(fd, b, n, off));
}

GUARD_EXPORT ssize_t __pread_chk(int fd, void *b, size_t n, off_t off, size_t blen)
{
	SIMPLE(GC_PREAD, NULL, fd, RCV, ssize_t, REAL(__pread_chk)(fd, b, n, off, blen));
}

GUARD_EXPORT ssize_t __pread64_chk(int fd, void *b, size_t n, off64_t off, size_t blen)
{
	SIMPLE(GC_PREAD, NULL, fd, RCV, ssize_t, REAL(__pread64_chk)(fd, b, n, off, blen));
}

GUARD_EXPORT ssize_t pwrite(int fd, const void *b, size_t n, off_t off)
{
	SIMPLE(GC_PWRITE, NULL, fd, SND, ssize_t, REAL(pwrite)(fd, b, n, off));
}

GUARD_EXPORT ssize_t pwrite64(int fd, const void *b, size_t n, off64_t off)
{
	SIMPLE(GC_PWRITE, NULL, fd, SND, ssize_t, REAL(pwrite64)(fd, b, n, off));
}

GUARD_EXPORT int fsync(int fd)
{
	SIMPLE(GC_FSYNC, NULL, fd, 0, int, REAL(fsync)(fd));
}

GUARD_EXPORT int fdatasync(int fd)
{
	SIMPLE(GC_FDATASYNC, NULL, fd, 0, int, REAL(fdatasync)(fd));
}

/*
 * A blocking connect() the agent's signal interrupted goes on in the kernel (calling it again would
 * say EALREADY): waits for it as the call would have (within the socket's SO_SNDTIMEO, else
 * EINPROGRESS as the kernel says then) and returns its outcome.
 */
static int connect_finish(int fd, struct gcall *c)
{
	struct sotmo m = SOTMO(fd, SO_SNDTIMEO);
	struct pollfd p = { fd, POLLOUT, 0 };
	int64_t deadline = 0;
	socklen_t len = sizeof(int);
	int r, err = 0;

	sotmo_again(&m, c->t0);   /* reads the timeout; shortening it changes nothing here */
	sotmo_restore(&m);
	if (m.state == 2)
		deadline = c->t0 + (int64_t)m.orig.tv_sec * 1000000000 + (int64_t)m.orig.tv_usec * 1000;
	for (;;) {
		int ms = deadline ? left_ms(deadline) : -1;

		if (ms == 0) {
			errno = EINPROGRESS;
			return -1;
		}
		r = REAL(poll)(&p, 1, ms);
		if (r > 0)
			break;
		if (r == 0) {
			errno = EINPROGRESS;
			return -1;
		}
		if (errno != EINTR || !guard_sigsnap_ours_only(&c->sigs))
			return -1;   /* the program's own signal: EINTR, as the first call would have said */
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -1;
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

GUARD_EXPORT int connect(int fd, const struct sockaddr *a, socklen_t l)
{
	struct gcall c;
	int r;

	if (!BEGIN(&c, GC_CONNECT, RET, CFA, NULL, fd))
		return REAL(connect)(fd, a, l);
	r = REAL(connect)(fd, a, l);
	if (r < 0 && errno == EINTR && guard_sigsnap_ours_only(&c.sigs))
		r = connect_finish(fd, &c);
	c.res = r < 0 && errno != EINPROGRESS ? -1 : 0;   /* under way counts: the upstream's wait starts */
	gcall_finish(&c);
	return r;
}

GUARD_EXPORT int flock(int fd, int op)
{
	SIMPLE(GC_FLOCK, NULL, fd, 0, int, REAL(flock)(fd, op));
}

GUARD_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
	SIMPLE(GC_WAITPID, NULL, -1, 0, pid_t, REAL(waitpid)(pid, status, options));
}

GUARD_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
	struct gcall c;
	struct timespec cur, left;
	int r;

	if (!BEGIN(&c, GC_NANOSLEEP, RET, CFA, NULL, -1))
		return REAL(nanosleep)(req, rem);
	/* the kernel reads *req first (EFAULT, EINVAL); what is left comes back in ours */
	r = REAL(nanosleep)(req, &left);
	while (r < 0 && errno == EINTR && guard_sigsnap_ours_only(&c.sigs)) {
		cur = left;
		r = REAL(nanosleep)(&cur, &left);
	}
	if (r < 0 && errno == EINTR && rem)
		*rem = left;
	gcall_finish(&c);
	return r;
}

GUARD_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
	struct gcall c;
	struct timespec cur, left;
	int r;

	if (!BEGIN(&c, GC_CLOCK_NANOSLEEP, RET, CFA, NULL, -1))
		return REAL(clock_nanosleep)(clk, flags, req, rem);
	/* returns the error number itself; an absolute deadline is kept by a retry as it is */
	r = REAL(clock_nanosleep)(clk, flags, req, &left);
	while (r == EINTR && guard_sigsnap_ours_only(&c.sigs)) {
		if (flags & TIMER_ABSTIME) {
			r = REAL(clock_nanosleep)(clk, flags, req, &left);
		} else {
			cur = left;
			r = REAL(clock_nanosleep)(clk, flags, &cur, &left);
		}
	}
	if (r == EINTR && rem && !(flags & TIMER_ABSTIME))
		*rem = left;
	gcall_finish(&c);
	return r;
}

GUARD_EXPORT int usleep(useconds_t us)
{
	struct gcall c;
	int64_t deadline;
	int r;

	if (!BEGIN(&c, GC_USLEEP, RET, CFA, NULL, -1))
		return REAL(usleep)(us);
	deadline = c.t0 + (int64_t)us * 1000;
	while ((r = REAL(usleep)(us)) < 0 && errno == EINTR && guard_sigsnap_ours_only(&c.sigs)) {
		int64_t left = deadline - guard_now();

		if (left <= 0) {
			r = 0;
			break;
		}
		us = (useconds_t)((left + 999) / 1000);
	}
	gcall_finish(&c);
	return r;
}

GUARD_EXPORT unsigned int sleep(unsigned int secs)
{
	struct gcall c;
	int64_t deadline;
	unsigned int left;

	if (!BEGIN(&c, GC_SLEEP, RET, CFA, NULL, -1))
		return REAL(sleep)(secs);
	deadline = c.t0 + (int64_t)secs * 1000000000;
	/* sleep() reports an interruption as time left, not as EINTR */
	while ((left = REAL(sleep)(secs)) > 0 && guard_sigsnap_ours_only(&c.sigs)) {
		int64_t ns = deadline - guard_now();

		if (ns <= 0) {
			left = 0;
			break;
		}
		/* whole seconds: nanosleep the fraction first so the rest is exact */
		if (ns % 1000000000) {
			struct timespec frac = { 0, ns % 1000000000 };

			REAL(nanosleep)(&frac, NULL);
		}
		secs = (unsigned int)(ns / 1000000000);
		if (secs == 0) {
			left = 0;
			break;
		}
	}
	gcall_finish(&c);
	return left;
}

/* ---- System V IPC: never resumed by the kernel ---- */

GUARD_EXPORT int msgsnd(int id, const void *p, size_t n, int flags)
{
	struct sigsnap snap;
	int r;

	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || guard_tls.agent)
		return REAL(msgsnd)(id, p, n, flags);
	guard_sigsnap_take(&snap);
	while ((r = REAL(msgsnd)(id, p, n, flags)) < 0 && errno == EINTR && guard_sigsnap_ours_only(&snap))
		;
	return r;
}

GUARD_EXPORT int semop(int id, struct sembuf *ops, size_t n)
{
	struct sigsnap snap;
	int r;

	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || guard_tls.agent)
		return REAL(semop)(id, ops, n);
	guard_sigsnap_take(&snap);
	while ((r = REAL(semop)(id, ops, n)) < 0 && errno == EINTR && guard_sigsnap_ours_only(&snap))
		;
	return r;
}

GUARD_EXPORT int semtimedop(int id, struct sembuf *ops, size_t n, const struct timespec *ts)
{
	struct sigsnap snap;
	struct timespec left;
	const struct timespec *cur = ts;
	int64_t t0, deadline = 0;
	int r;

	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || guard_tls.agent)
		return REAL(semtimedop)(id, ops, n, ts);
	guard_sigsnap_take(&snap);
	t0 = guard_now();
	while ((r = REAL(semtimedop)(id, ops, n, cur)) < 0 && errno == EINTR && guard_sigsnap_ours_only(&snap))
		if (ts) {
			if (!deadline)
				deadline = t0 + ts_ns(ts);
			left_ts(deadline, &left);
			if (left.tv_sec == 0 && left.tv_nsec == 0) {
				errno = EAGAIN;   /* what the kernel says when the time runs out */
				break;
			}
			cur = &left;
		}
	return r;
}

/* ---- descriptors ---- */

GUARD_EXPORT int close(int fd)
{
	struct gthread *t = &guard_tls;

	if (atomic_load_explicit(&G.active, memory_order_relaxed)) {
		if (t->agent)
			guard_fd_unregister(fd);
		else if (guard_fd_is_ours(fd))
			return 0;  /* the program thinks it closed it; the agent keeps it */
		else if (t->afd)
			guard_async_close(fd);
	}
	return REAL(close)(fd);
}

/* The agent's own files (spool, profiles, log, ELF files) get descriptors the program cannot close. */
#define OPEN_BODY(call)                                                            \
	do {                                                                       \
		mode_t mode = 0;                                                   \
		int fd;                                                            \
		if (flags & (O_CREAT | __O_TMPFILE)) {                             \
			va_list ap;                                                \
			va_start(ap, flags);                                       \
			mode = (mode_t)va_arg(ap, int);                            \
			va_end(ap);                                                \
		}                                                                  \
		fd = call;                                                         \
		if (fd >= 0 && guard_tls.agent && atomic_load_explicit(&G.active, memory_order_relaxed)) \
			fd = guard_fd_adopt(fd);                                   \
		return fd;                                                         \
	} while (0)

GUARD_EXPORT int open(const char *path, int flags, ...)
{
	OPEN_BODY(REAL(open)(path, flags, mode));
}

GUARD_EXPORT int open64(const char *path, int flags, ...)
{
	OPEN_BODY(REAL(open64)(path, flags, mode));
}

GUARD_EXPORT int openat(int dir, const char *path, int flags, ...)
{
	OPEN_BODY(REAL(openat)(dir, path, flags, mode));
}

GUARD_EXPORT int openat64(int dir, const char *path, int flags, ...)
{
	OPEN_BODY(REAL(openat64)(dir, path, flags, mode));
}

/* Closes [lo, hi] but the agent's descriptors (close_range semantics). */
static int close_around(unsigned int lo, unsigned int hi, int flags)
{
	unsigned int fds[GUARD_MAX_FDS], a = lo;
	int n = 0, r = 0;

	for (int i = 0; i < GUARD_MAX_FDS; i++) {
		int fd = atomic_load(&G.fds[i]);

		if (fd >= 0 && (unsigned int)fd >= lo && (unsigned int)fd <= hi)
			fds[n++] = (unsigned int)fd;
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && fds[j - 1] > fds[j]; j--) {
			unsigned int x = fds[j];

			fds[j] = fds[j - 1];
			fds[j - 1] = x;
		}
	/* the gaps between the agent's descriptors are the ranges to close */
	for (int i = 0; i < n; i++) {
		if (fds[i] > a && REAL(close_range)(a, fds[i] - 1, flags) < 0)
			r = -1;
		a = fds[i] + 1;
	}
	if ((n == 0 || fds[n - 1] < hi) && a <= hi && REAL(close_range)(a, hi, flags) < 0)
		r = -1;
	return r;
}

GUARD_EXPORT int close_range(unsigned int lo, unsigned int hi, int flags)
{
	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || guard_tls.agent ||
	    (flags & CLOSE_RANGE_CLOEXEC) || lo > hi)
		return REAL(close_range)(lo, hi, flags);
	return close_around(lo, hi, flags);
}

GUARD_EXPORT void closefrom(int lo)
{
	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || guard_tls.agent || lo < 0) {
		REAL(closefrom)(lo);
		return;
	}
	if (close_around((unsigned int)lo, ~0U, 0) < 0) {
		/* what closefrom() itself does when close_range is missing */
		for (int fd = lo; fd < 65536; fd++)
			if (!guard_fd_is_ours(fd))
				REAL(close)(fd);
	}
}

/* ---- the agent's own descriptors where its threads share the program's table ---- */

/* A descriptor an agent thread made, moved out of the program's way (threads.c, own_fd_table()). */
static int adopt(int fd)
{
	if (fd >= 0 && guard_tls.agent && atomic_load_explicit(&G.active, memory_order_relaxed))
		return guard_fd_adopt(fd);
	return fd;
}

static int adopt_pair(int r, int fds[2])
{
	if (r == 0 && guard_tls.agent) {
		fds[0] = adopt(fds[0]);
		fds[1] = adopt(fds[1]);
	}
	return r;
}

GUARD_EXPORT int pipe(int fds[2])
{
	/* libunwind's memory-check pipe (unwind.h): refused, it checks nothing through it */
	if (GUARD_UNLIKELY(unwind_starting())) {
		errno = EMFILE;
		return -1;
	}
	return adopt_pair(REAL(pipe)(fds), fds);
}

GUARD_EXPORT int pipe2(int fds[2], int flags)
{
	if (GUARD_UNLIKELY(unwind_starting())) {
		errno = EMFILE;
		return -1;
	}
	return adopt_pair(REAL(pipe2)(fds, flags), fds);
}

GUARD_EXPORT int socket(int domain, int type, int protocol)
{
	return adopt(REAL(socket)(domain, type, protocol));
}

GUARD_EXPORT int socketpair(int domain, int type, int protocol, int fds[2])
{
	return adopt_pair(REAL(socketpair)(domain, type, protocol, fds), fds);
}

GUARD_EXPORT int eventfd(unsigned int count, int flags)
{
	return adopt(REAL(eventfd)(count, flags));
}

/* ---- namespaces: what only a process of one thread may do ---- */

struct ns_call {
	int setns;
	int a, b;
};

static int ns_call(void *p)
{
	const struct ns_call *n = p;

	return n->setns ? REAL(setns)(n->a, n->b) : REAL(unshare)(n->a);
}

/* Refused with EINVAL for a process of more than one thread (CLONE_NEWUSER, entering a user or mount
 * namespace): the agent's threads may be the others. They step aside for the call. */
static int single_threaded(struct ns_call *n, int r)
{
	if (r < 0 && errno == EINVAL && atomic_load_explicit(&G.active, memory_order_relaxed) && !guard_tls.agent &&
	    !guard_tls.nest)
		return guard_threads_aside(ns_call, n);
	return r;
}

GUARD_EXPORT int unshare(int flags)
{
	struct ns_call n = { 0, flags, 0 };

	return single_threaded(&n, REAL(unshare)(flags));
}

GUARD_EXPORT int setns(int fd, int type)
{
	struct ns_call n = { 1, fd, type };

	return single_threaded(&n, REAL(setns)(fd, type));
}

/* ---- exec: no timer and no signal of the agent's may reach the next program ---- */

/* Returns what guard_sig_exec_failed() takes when the exec fails. */
static int before_exec(void)
{
	struct gthread *t = &guard_tls;
	int ign;

	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || t->agent)
		return 0;
	/* (a vfork() child too: its dispositions are its own) */
	ign = guard_sig_exec_prepare();
	/* in a vfork() child the memory is the parent's: its thread is left alone (the child has no
	 * timer and nothing pending: a new process starts with none) */
	if (getpid() != G.pid)
		return ign;
	guard_timer_delete(t);
	/* pending signals survive exec: the agent's would reach the next program */
	guard_sig_drain();
	/* the collector must not signal the next program's threads (back to live if the exec fails) */
	guard_region_state(1);
	return ign;
}

/* exec as the program would: what the agent's threads changed is put back first, and again when
 * the exec fails */
#define EXEC(call)                                   \
	do {                                         \
		int ign_ = before_exec(), r_, e_;    \
		r_ = call;                           \
		e_ = errno;                          \
		guard_sig_exec_failed(ign_);         \
		if (getpid() == G.pid)               \
			guard_region_state(0);       \
		errno = e_;                          \
		return r_;                           \
	} while (0)

GUARD_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	EXEC(REAL(execve)(path, argv, envp));
}

GUARD_EXPORT int execv(const char *path, char *const argv[])
{
	EXEC(REAL(execv)(path, argv));
}

GUARD_EXPORT int execvp(const char *file, char *const argv[])
{
	EXEC(REAL(execvp)(file, argv));
}

GUARD_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	EXEC(REAL(execvpe)(file, argv, envp));
}

GUARD_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	EXEC(REAL(fexecve)(fd, argv, envp));
}

/* execl*: glibc's own call execve internally, out of reach; collect the arguments and go through execv*. */
#define MAX_EXECL_ARGS 4096

static int collect_args(const char *arg0, va_list ap, char **argv, char ***envp)
{
	int n = 0;

	argv[n++] = (char *)arg0;
	while (arg0) {
		char *a = va_arg(ap, char *);

		if (n == MAX_EXECL_ARGS) {
			errno = E2BIG;
			return -1;
		}
		argv[n++] = a;
		if (!a)
			break;
	}
	if (envp)
		*envp = va_arg(ap, char **);
	return 0;
}

GUARD_EXPORT int execl(const char *path, const char *arg, ...)
{
	char *argv[MAX_EXECL_ARGS + 1];
	va_list ap;
	int r;

	va_start(ap, arg);
	r = collect_args(arg, ap, argv, NULL);
	va_end(ap);
	if (r < 0)
		return -1;
	EXEC(REAL(execve)(path, argv, environ));
}

GUARD_EXPORT int execlp(const char *file, const char *arg, ...)
{
	char *argv[MAX_EXECL_ARGS + 1];
	va_list ap;
	int r;

	va_start(ap, arg);
	r = collect_args(arg, ap, argv, NULL);
	va_end(ap);
	if (r < 0)
		return -1;
	EXEC(REAL(execvp)(file, argv));
}

GUARD_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *argv[MAX_EXECL_ARGS + 1];
	char **envp = NULL;
	va_list ap;
	int r;

	va_start(ap, arg);
	r = collect_args(arg, ap, argv, &envp);
	va_end(ap);
	if (r < 0)
		return -1;
	EXEC(REAL(execve)(path, argv, envp));
}

/* ---- threads ---- */

struct tramp {
	void *(*fn)(void *);
	void *arg;
	size_t stack_size;                  /* the new thread's (0: unknown) */
	uint8_t agent;
	uint8_t prog_blocked, mask_known;   /* the creator's: a new thread starts with its mask */
	uint8_t pooled;                     /* from tramps[] (else malloc'ed) */
};

/*
 * The trampolines' arguments. A new thread must not enter the program's allocator on the agent's
 * account: its first malloc or free gives it a cache and an arena of its own, and jemalloc a
 * background thread per arena (four threads and a megabyte more in a guarded redis). A thread
 * started while all are in use gets a malloc'ed one.
 */
#define TRAMPS 64
static struct tramp tramps[TRAMPS];
static atomic_uchar tramp_used[TRAMPS];

static struct tramp *tramp_get(void)
{
	struct tramp *tr;

	for (unsigned i = 0; i < TRAMPS; i++)
		if (!atomic_load_explicit(&tramp_used[i], memory_order_relaxed) &&
		    !atomic_exchange_explicit(&tramp_used[i], 1, memory_order_acquire)) {
			tramps[i].pooled = 1;
			return &tramps[i];
		}
	if ((tr = malloc(sizeof(*tr))))
		tr->pooled = 0;
	return tr;
}

void guard_interpose_reset_child(void)
{
	/* a trampoline a parent's thread had not yet taken when the parent forked is free in the
	 * child: that thread is not the child's, and would hold it for good */
	for (unsigned i = 0; i < TRAMPS; i++)
		atomic_store_explicit(&tramp_used[i], 0, memory_order_relaxed);
}

static void tramp_put(struct tramp *tr)
{
	if (tr->pooled)
		atomic_store_explicit(&tramp_used[tr - tramps], 0, memory_order_release);
	else
		free(tr);
}

/* The stack size a thread made with attr gets: the creator's to find out, as it may allocate. */
static size_t stack_size_of(const pthread_attr_t *attr)
{
	pthread_attr_t def;
	size_t size = 0;

	if (attr)
		return pthread_attr_getstacksize(attr, &size) == 0 ? size : 0;
	if (pthread_getattr_default_np(&def) != 0)
		return 0;
	if (pthread_attr_getstacksize(&def, &size) != 0)
		size = 0;
	pthread_attr_destroy(&def);
	return size;
}

static void *thread_start(void *p)
{
	struct tramp tr = *(struct tramp *)p;
	struct gthread *t = &guard_tls;

	tramp_put(p);
	t->agent = tr.agent;
	t->prog_blocked = tr.prog_blocked;
	t->mask_known = tr.mask_known;
	/* loop-site depths are measured from here: the same for every run of the same code */
	t->base = (uintptr_t)__builtin_dwarf_cfa();
	/* the stack's bounds, without allocating */
	if (!tr.agent && unwind_ready())
		unwind_thread_stack(t->base, tr.stack_size);
	return tr.fn(tr.arg);
}

GUARD_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	struct gthread *t = &guard_tls;
	struct tramp *tr;
	int r;

	if (!t->agent)
		guard_sig_program_threads();
	if (!atomic_load_explicit(&G.active, memory_order_relaxed))
		return REAL(pthread_create)(th, attr, fn, arg);
	tr = tramp_get();
	if (!tr)
		return REAL(pthread_create)(th, attr, fn, arg);
	tr->fn = fn;
	tr->arg = arg;
	tr->stack_size = t->agent ? 0 : stack_size_of(attr);
	/* threads the agent's threads start (libcurl's resolver) are the agent's too */
	tr->agent = t->agent;
	tr->prog_blocked = t->prog_blocked;
	tr->mask_known = t->mask_known;
	r = REAL(pthread_create)(th, attr, thread_start, tr);
	if (r != 0)
		tramp_put(tr);
	return r;
}

/* ---- the dynamic loader: no stack walks from the handler while it changes its lists ---- */

GUARD_EXPORT void *dlopen(const char *file, int mode)
{
	struct gthread *t = &guard_tls;
	uint8_t was = t->in_dl;
	void *h;

	t->in_dl = 1;
	h = REAL(dlopen)(file, mode);
	t->in_dl = was;
	if (h && file && atomic_load_explicit(&G.active, memory_order_relaxed)) {
		/* stack walks may pass through the new module now */
		unwind_modules_changed();
		if (!t->agent && !t->nest) {
			guard_on_dlopen();
			guard_region_modules();   /* for a collector that never sees the process alive */
		}
	}
	return h;
}

GUARD_EXPORT int dlclose(void *h)
{
	struct gthread *t = &guard_tls;
	uint8_t was = t->in_dl;
	int r;

	t->in_dl = 1;
	r = REAL(dlclose)(h);
	t->in_dl = was;
	if (r == 0) {
		/* its segments may be gone: out of the address check, and walks off libunwind's cache */
		unwind_module_unloaded();
		if (atomic_load_explicit(&G.active, memory_order_relaxed))
			unwind_modules_changed();
	}
	return r;
}
