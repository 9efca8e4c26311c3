/*
 * interpose: the C library calls libsmguard.so wraps (guard.md "Units",
 * "Inspection"; docs/guard.md lists them). Each wrapper calls the real
 * function, found with dlsym(RTLD_NEXT), and brackets it with the bookkeeping
 * of unit.c; return values and errno are always the real call's.
 *
 * Besides the waits, it keeps the agent safe inside the program:
 *   - sigaction/signal: the program never sees the agent's signal handler;
 *     installing its own handler for that signal hands the signal over; its
 *     other handlers run through a trampoline that counts them, so that a
 *     wait interrupted by the agent's signal alone (EINTR from a call the
 *     kernel does not restart) is resumed instead of reported;
 *   - sigprocmask/pthread_sigmask never block the agent's signal, and report
 *     it as the program set it;
 *   - close/close_range/closefrom skip the agent's descriptors;
 *   - exec disarms the thread's CPU timer first; pthread_create notes the new
 *     thread's stack base; dlopen/dlclose keep the sampler out of the loader.
 */
#include "agent/guard/rt.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define RET ((uintptr_t)__builtin_return_address(0))
#define CFA ((uintptr_t)__builtin_dwarf_cfa())

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
	X(sigwaitinfo) X(sigtimedwait) X(pthread_mutex_lock) X(pthread_mutex_trylock)                  \
	X(pthread_mutex_timedlock) X(pthread_mutex_unlock) X(pthread_rwlock_rdlock)                    \
	X(pthread_rwlock_tryrdlock) X(pthread_rwlock_wrlock) X(pthread_rwlock_trywrlock)              \
	X(pthread_rwlock_unlock) X(pthread_join) X(write) X(writev) X(send) X(sendto) X(sendmsg)       \
	X(pread) X(pread64) X(pwrite) X(pwrite64) X(fsync) X(fdatasync) X(connect) X(nanosleep)        \
	X(clock_nanosleep) X(usleep) X(sleep) X(waitpid) X(flock) X(__read_chk) X(__recv_chk)          \
	X(__recvfrom_chk) X(__pread_chk) X(__pread64_chk) X(__poll_chk) X(__ppoll_chk)                 \
	X(sigaction) X(signal) X(sigprocmask) X(pthread_sigmask) X(close) X(close_range) X(closefrom)   \
	X(execve) X(execv) X(execvp) X(execvpe) X(fexecve) X(pthread_create) X(dlopen) X(dlclose) X(open)   \
	X(open64) X(openat) X(openat64)

#define DECLARE(f) static __typeof__(f) *real_##f;
REAL_LIST(DECLARE)
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
#define RESOLVE(f) real_##f = (__typeof__(f) *)dlsym(RTLD_NEXT, #f);
	REAL_LIST(RESOLVE)
	real_pthread_cond_wait = (int (*)(pthread_cond_t *, pthread_mutex_t *))cond_symbol("pthread_cond_wait");
	real_pthread_cond_timedwait = (int (*)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *))
		cond_symbol("pthread_cond_timedwait");
	real_pthread_cond_signal = (int (*)(pthread_cond_t *))cond_symbol("pthread_cond_signal");
	real_pthread_cond_broadcast = (int (*)(pthread_cond_t *))cond_symbol("pthread_cond_broadcast");
}

/* Every wrapper may run before the constructors (another library's constructor calling read). */
#define REAL(f) (GUARD_LIKELY(real_##f != NULL) ? real_##f : (resolve_all(), real_##f))

__attribute__((constructor(101))) static void interpose_init(void)
{
	resolve_all();
}

/* For the runtime: the real functions it must reach past its own wrappers from program threads. */
int guard_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return REAL(sigaction)(sig, act, old);
}

int guard_real_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return REAL(pthread_sigmask)(how, set, old);
}

int guard_real_close(int fd)
{
	return REAL(close)(fd);
}

int guard_real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	return REAL(pthread_create)(th, attr, fn, arg);
}

/* ---- EINTR caused by the agent's own signal ---- */

/* True when the call was interrupted by the agent's signal and by no handler of the program. */
static int ours_only(struct gcall *c)
{
	struct gthread *t = &guard_tls;
	uint32_t ours = atomic_load_explicit(&t->our_sigs, memory_order_relaxed);

	if (ours == c->our_sigs || atomic_load_explicit(&t->prog_sigs, memory_order_relaxed) != c->prog_sigs)
		return 0;
	c->our_sigs = ours;
	return 1;
}

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

static int64_t ts_ns(const struct timespec *ts)
{
	if (ts->tv_sec > INT64_MAX / 1000000000 - 1)
		return INT64_MAX / 2;
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* ---- loop-capable waits ---- */

GUARD_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	struct gcall c;
	int64_t deadline;
	int r;

	if (!gcall_begin(&c, GC_EPOLL_WAIT, RET, CFA, NULL, epfd))
		return REAL(epoll_wait)(epfd, ev, max, timeout);
	deadline = c.t0 + (int64_t)timeout * 1000000;
	while ((r = REAL(epoll_wait)(epfd, ev, max, timeout)) < 0 && errno == EINTR && ours_only(&c))
		if (timeout > 0 && (timeout = left_ms(deadline)) == 0) {
			r = 0;
			break;
		}
	gcall_finish(&c, r < 0);
	return r;
}

GUARD_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout, const sigset_t *ss)
{
	struct gcall c;
	int64_t deadline;
	int r;

	if (!gcall_begin(&c, GC_EPOLL_PWAIT, RET, CFA, NULL, epfd))
		return REAL(epoll_pwait)(epfd, ev, max, timeout, ss);
	deadline = c.t0 + (int64_t)timeout * 1000000;
	while ((r = REAL(epoll_pwait)(epfd, ev, max, timeout, ss)) < 0 && errno == EINTR && ours_only(&c))
		if (timeout > 0 && (timeout = left_ms(deadline)) == 0) {
			r = 0;
			break;
		}
	gcall_finish(&c, r < 0);
	return r;
}

static int poll_common(int id, struct pollfd *fds, nfds_t n, int timeout, uintptr_t ret, uintptr_t cfa,
		       size_t fdslen, int chk)
{
	struct gcall c;
	int64_t deadline;
	int r;

#define CALL_POLL() (chk ? REAL(__poll_chk)(fds, n, timeout, fdslen) : REAL(poll)(fds, n, timeout))
	if (!gcall_begin(&c, id, ret, cfa, NULL, -1))
		return CALL_POLL();
	deadline = c.t0 + (int64_t)timeout * 1000000;
	while ((r = CALL_POLL()) < 0 && errno == EINTR && ours_only(&c))
		if (timeout > 0 && (timeout = left_ms(deadline)) == 0) {
			r = 0;
			break;
		}
#undef CALL_POLL
	gcall_finish(&c, r < 0);
	return r;
}

GUARD_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return poll_common(GC_POLL, fds, n, timeout, RET, CFA, 0, 0);
}

GUARD_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	return poll_common(GC_POLL, fds, n, timeout, RET, CFA, fdslen, 1);
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
	if (!gcall_begin(&c, GC_PPOLL, ret, cfa, NULL, -1))
		return CALL_PPOLL();
	if (ts)
		deadline = c.t0 + ts_ns(ts);
	while ((r = CALL_PPOLL()) < 0 && errno == EINTR && ours_only(&c))
		if (ts) {
			left_ts(deadline, &left);
			cur = &left;
		}
#undef CALL_PPOLL
	gcall_finish(&c, r < 0);
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

	if (!gcall_begin(&c, GC_SELECT, RET, CFA, NULL, -1))
		return REAL(select)(n, r, w, e, tv);
	/* Linux leaves the time not slept in *tv: a retry waits what was left */
	while ((rc = REAL(select)(n, r, w, e, tv)) < 0 && errno == EINTR && ours_only(&c))
		;
	gcall_finish(&c, rc < 0);
	return rc;
}

GUARD_EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts, const sigset_t *ss)
{
	struct gcall c;
	struct timespec left;
	const struct timespec *cur = ts;
	int64_t deadline = 0;
	int rc;

	if (!gcall_begin(&c, GC_PSELECT, RET, CFA, NULL, -1))
		return REAL(pselect)(n, r, w, e, ts, ss);
	if (ts)
		deadline = c.t0 + ts_ns(ts);
	while ((rc = REAL(pselect)(n, r, w, e, cur, ss)) < 0 && errno == EINTR && ours_only(&c))
		if (ts) {
			left_ts(deadline, &left);
			cur = &left;
		}
	gcall_finish(&c, rc < 0);
	return rc;
}

/* A call the kernel restarts after the agent's handler (SA_RESTART): only the bookkeeping. */
#define SIMPLE(id, obj, fd, type, call, failed)                \
	do {                                                   \
		struct gcall c_;                               \
		type r_;                                       \
		if (!gcall_begin(&c_, id, RET, CFA, obj, fd))  \
			return call;                           \
		r_ = call;                                     \
		gcall_finish(&c_, failed);                     \
		return r_;                                     \
	} while (0)

GUARD_EXPORT int accept(int fd, struct sockaddr *a, socklen_t *l)
{
	SIMPLE(GC_ACCEPT, NULL, fd, int, REAL(accept)(fd, a, l), r_ < 0);
}

GUARD_EXPORT int accept4(int fd, struct sockaddr *a, socklen_t *l, int flags)
{
	SIMPLE(GC_ACCEPT4, NULL, fd, int, REAL(accept4)(fd, a, l, flags), r_ < 0);
}

GUARD_EXPORT ssize_t recv(int fd, void *b, size_t n, int flags)
{
	SIMPLE(GC_RECV, NULL, fd, ssize_t, REAL(recv)(fd, b, n, flags), r_ < 0);
}

GUARD_EXPORT ssize_t __recv_chk(int fd, void *b, size_t n, size_t blen, int flags)
{
	SIMPLE(GC_RECV, NULL, fd, ssize_t, REAL(__recv_chk)(fd, b, n, blen, flags), r_ < 0);
}

GUARD_EXPORT ssize_t recvfrom(int fd, void *b, size_t n, int flags, struct sockaddr *a, socklen_t *l)
{
	SIMPLE(GC_RECVFROM, NULL, fd, ssize_t, REAL(recvfrom)(fd, b, n, flags, a, l), r_ < 0);
}

GUARD_EXPORT ssize_t __recvfrom_chk(int fd, void *b, size_t n, size_t blen, int flags, struct sockaddr *a,
				    socklen_t *l)
{
	SIMPLE(GC_RECVFROM, NULL, fd, ssize_t, REAL(__recvfrom_chk)(fd, b, n, blen, flags, a, l), r_ < 0);
}

GUARD_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	SIMPLE(GC_RECVMSG, NULL, fd, ssize_t, REAL(recvmsg)(fd, m, flags), r_ < 0);
}

GUARD_EXPORT ssize_t read(int fd, void *b, size_t n)
{
	SIMPLE(GC_READ, NULL, fd, ssize_t, REAL(read)(fd, b, n), r_ < 0);
}

GUARD_EXPORT ssize_t __read_chk(int fd, void *b, size_t n, size_t blen)
{
	SIMPLE(GC_READ, NULL, fd, ssize_t, REAL(__read_chk)(fd, b, n, blen), r_ < 0);
}

GUARD_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	SIMPLE(GC_READV, NULL, fd, ssize_t, REAL(readv)(fd, iov, n), r_ < 0);
}

GUARD_EXPORT int pthread_cond_wait(pthread_cond_t *cv, pthread_mutex_t *m)
{
	SIMPLE(GC_COND_WAIT, cv, -1, int, REAL(pthread_cond_wait)(cv, m), r_ != 0);
}

GUARD_EXPORT int pthread_cond_timedwait(pthread_cond_t *cv, pthread_mutex_t *m, const struct timespec *ts)
{
	/* ETIMEDOUT is the common, normal outcome of a timed wait, not a failure */
	SIMPLE(GC_COND_TIMEDWAIT, cv, -1, int, REAL(pthread_cond_timedwait)(cv, m, ts),
	       r_ != 0 && r_ != ETIMEDOUT);
}

GUARD_EXPORT int pthread_cond_signal(pthread_cond_t *cv)
{
	guard_note_release(cv);
	return REAL(pthread_cond_signal)(cv);
}

GUARD_EXPORT int pthread_cond_broadcast(pthread_cond_t *cv)
{
	guard_note_release(cv);
	return REAL(pthread_cond_broadcast)(cv);
}

GUARD_EXPORT int sem_wait(sem_t *s)
{
	struct gcall c;
	int r;

	if (!gcall_begin(&c, GC_SEM_WAIT, RET, CFA, s, -1))
		return REAL(sem_wait)(s);
	while ((r = REAL(sem_wait)(s)) < 0 && errno == EINTR && ours_only(&c))
		;
	gcall_finish(&c, r < 0);
	return r;
}

GUARD_EXPORT int sem_timedwait(sem_t *s, const struct timespec *abs)
{
	struct gcall c;
	int r;

	if (!gcall_begin(&c, GC_SEM_TIMEDWAIT, RET, CFA, s, -1))
		return REAL(sem_timedwait)(s, abs);
	while ((r = REAL(sem_timedwait)(s, abs)) < 0 && errno == EINTR && ours_only(&c))
		;
	gcall_finish(&c, r < 0 && errno != ETIMEDOUT);
	return r;
}

GUARD_EXPORT int sem_post(sem_t *s)
{
	guard_note_release(s);
	return REAL(sem_post)(s);
}

GUARD_EXPORT ssize_t msgrcv(int id, void *p, size_t n, long type, int flags)
{
	struct gcall c;
	ssize_t r;

	if (!gcall_begin(&c, GC_MSGRCV, RET, CFA, NULL, -1))
		return REAL(msgrcv)(id, p, n, type, flags);
	while ((r = REAL(msgrcv)(id, p, n, type, flags)) < 0 && errno == EINTR && ours_only(&c))
		;
	gcall_finish(&c, r < 0);
	return r;
}

GUARD_EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	struct gcall c;
	int r;

	if (!gcall_begin(&c, GC_SIGWAITINFO, RET, CFA, NULL, -1))
		return REAL(sigwaitinfo)(set, info);
	while ((r = REAL(sigwaitinfo)(set, info)) < 0 && errno == EINTR && ours_only(&c))
		;
	gcall_finish(&c, r < 0);
	return r;
}

GUARD_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
	struct gcall c;
	struct timespec left;
	const struct timespec *cur = ts;
	int64_t deadline = 0;
	int r;

	if (!gcall_begin(&c, GC_SIGTIMEDWAIT, RET, CFA, NULL, -1))
		return REAL(sigtimedwait)(set, info, ts);
	if (ts)
		deadline = c.t0 + ts_ns(ts);
	while ((r = REAL(sigtimedwait)(set, info, cur)) < 0 && errno == EINTR && ours_only(&c))
		if (ts) {
			left_ts(deadline, &left);
			cur = &left;
		}
	gcall_finish(&c, r < 0 && errno != EAGAIN);
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
	SIMPLE(GC_MUTEX_LOCK, m, -1, int, REAL(pthread_mutex_lock)(m), r_ != 0 && r_ != EOWNERDEAD);
}

GUARD_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs)
{
	SIMPLE(GC_MUTEX_TIMEDLOCK, m, -1, int, REAL(pthread_mutex_timedlock)(m, abs),
	       r_ != 0 && r_ != EOWNERDEAD && r_ != ETIMEDOUT);
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
	SIMPLE(GC_RWLOCK_RDLOCK, l, -1, int, REAL(pthread_rwlock_rdlock)(l), r_ != 0);
}

GUARD_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	if (atomic_load_explicit(&G.active, memory_order_relaxed) && REAL(pthread_rwlock_trywrlock)(l) == 0)
		return 0;
	SIMPLE(GC_RWLOCK_WRLOCK, l, -1, int, REAL(pthread_rwlock_wrlock)(l), r_ != 0);
}

GUARD_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
	guard_note_release(l);
	return REAL(pthread_rwlock_unlock)(l);
}

GUARD_EXPORT int pthread_join(pthread_t th, void **ret)
{
	SIMPLE(GC_JOIN, (const void *)(uintptr_t)th, -1, int, REAL(pthread_join)(th, ret), r_ != 0);
}

/* ---- I/O and sleeps ---- */

GUARD_EXPORT ssize_t write(int fd, const void *b, size_t n)
{
	SIMPLE(GC_WRITE, NULL, fd, ssize_t, REAL(write)(fd, b, n), r_ < 0);
}

GUARD_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	SIMPLE(GC_WRITEV, NULL, fd, ssize_t, REAL(writev)(fd, iov, n), r_ < 0);
}

GUARD_EXPORT ssize_t send(int fd, const void *b, size_t n, int flags)
{
	SIMPLE(GC_SEND, NULL, fd, ssize_t, REAL(send)(fd, b, n, flags), r_ < 0);
}

GUARD_EXPORT ssize_t sendto(int fd, const void *b, size_t n, int flags, const struct sockaddr *a, socklen_t l)
{
	SIMPLE(GC_SENDTO, NULL, fd, ssize_t, REAL(sendto)(fd, b, n, flags, a, l), r_ < 0);
}

GUARD_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	SIMPLE(GC_SENDMSG, NULL, fd, ssize_t, REAL(sendmsg)(fd, m, flags), r_ < 0);
}

GUARD_EXPORT ssize_t pread(int fd, void *b, size_t n, off_t off)
{
	SIMPLE(GC_PREAD, NULL, fd, ssize_t, REAL(pread)(fd, b, n, off), r_ < 0);
}

GUARD_EXPORT ssize_t pread64(int fd, void *b, size_t n, off64_t off)
{
	SIMPLE(GC_PREAD, NULL, fd, ssize_t, REAL(pread64)(fd, b, n, off), r_ < 0);
}

GUARD_EXPORT ssize_t __pread_chk(int fd, void *b, size_t n, off_t off, size_t blen)
{
	SIMPLE(GC_PREAD, NULL, fd, ssize_t, REAL(__pread_chk)(fd, b, n, off, blen), r_ < 0);
}

GUARD_EXPORT ssize_t __pread64_chk(int fd, void *b, size_t n, off64_t off, size_t blen)
{
	SIMPLE(GC_PREAD, NULL, fd, ssize_t, REAL(__pread64_chk)(fd, b, n, off, blen), r_ < 0);
}

GUARD_EXPORT ssize_t pwrite(int fd, const void *b, size_t n, off_t off)
{
	SIMPLE(GC_PWRITE, NULL, fd, ssize_t, REAL(pwrite)(fd, b, n, off), r_ < 0);
}

GUARD_EXPORT ssize_t pwrite64(int fd, const void *b, size_t n, off64_t off)
{
	SIMPLE(GC_PWRITE, NULL, fd, ssize_t, REAL(pwrite64)(fd, b, n, off), r_ < 0);
}

GUARD_EXPORT int fsync(int fd)
{
	SIMPLE(GC_FSYNC, NULL, fd, int, REAL(fsync)(fd), r_ < 0);
}

GUARD_EXPORT int fdatasync(int fd)
{
	SIMPLE(GC_FDATASYNC, NULL, fd, int, REAL(fdatasync)(fd), r_ < 0);
}

GUARD_EXPORT int connect(int fd, const struct sockaddr *a, socklen_t l)
{
	SIMPLE(GC_CONNECT, NULL, fd, int, REAL(connect)(fd, a, l), r_ < 0 && errno != EINPROGRESS);
}

GUARD_EXPORT int flock(int fd, int op)
{
	SIMPLE(GC_FLOCK, NULL, fd, int, REAL(flock)(fd, op), r_ < 0);
}

GUARD_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
	SIMPLE(GC_WAITPID, NULL, -1, pid_t, REAL(waitpid)(pid, status, options), r_ < 0);
}

GUARD_EXPORT int nanosleep(const struct timespec *req, struct timespec *rem)
{
	struct gcall c;
	struct timespec cur, left;
	int r;

	if (!gcall_begin(&c, GC_NANOSLEEP, RET, CFA, NULL, -1))
		return REAL(nanosleep)(req, rem);
	cur = *req;
	while ((r = REAL(nanosleep)(&cur, &left)) < 0 && errno == EINTR && ours_only(&c))
		cur = left;
	if (r < 0 && errno == EINTR && rem)
		*rem = left;
	gcall_finish(&c, r < 0);
	return r;
}

GUARD_EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
	struct gcall c;
	struct timespec cur, left;
	int r;

	if (!gcall_begin(&c, GC_CLOCK_NANOSLEEP, RET, CFA, NULL, -1))
		return REAL(clock_nanosleep)(clk, flags, req, rem);
	cur = *req;
	/* returns the error number itself */
	while ((r = REAL(clock_nanosleep)(clk, flags, &cur, &left)) == EINTR && ours_only(&c))
		if (!(flags & TIMER_ABSTIME))
			cur = left;
	if (r == EINTR && rem && !(flags & TIMER_ABSTIME))
		*rem = left;
	gcall_finish(&c, r != 0);
	return r;
}

GUARD_EXPORT int usleep(useconds_t us)
{
	struct gcall c;
	int64_t deadline;
	int r;

	if (!gcall_begin(&c, GC_USLEEP, RET, CFA, NULL, -1))
		return REAL(usleep)(us);
	deadline = c.t0 + (int64_t)us * 1000;
	while ((r = REAL(usleep)(us)) < 0 && errno == EINTR && ours_only(&c)) {
		int64_t left = deadline - guard_now();

		if (left <= 0) {
			r = 0;
			break;
		}
		us = (useconds_t)((left + 999) / 1000);
	}
	gcall_finish(&c, r < 0);
	return r;
}

GUARD_EXPORT unsigned int sleep(unsigned int secs)
{
	struct gcall c;
	int64_t deadline;
	unsigned int left;

	if (!gcall_begin(&c, GC_SLEEP, RET, CFA, NULL, -1))
		return REAL(sleep)(secs);
	deadline = c.t0 + (int64_t)secs * 1000000000;
	/* sleep() reports an interruption as time left, not as EINTR */
	while ((left = REAL(sleep)(secs)) > 0 && ours_only(&c)) {
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
	gcall_finish(&c, 0);
	return left;
}

/* ---- signals ---- */

struct shadow {
	_Atomic(void (*)(int, siginfo_t *, void *)) fn;
	_Atomic int flags;
};

static struct shadow shadows[_NSIG];
static struct sigaction our_view;       /* what the program believes it set for the agent's signal */
static int our_view_set;

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	void (*fn)(int, siginfo_t *, void *);

	atomic_fetch_add_explicit(&guard_tls.prog_sigs, 1, memory_order_relaxed);
	if (sig <= 0 || sig >= _NSIG)
		return;
	fn = atomic_load_explicit(&shadows[sig].fn, memory_order_acquire);
	if (!fn)
		return;
	if (atomic_load_explicit(&shadows[sig].flags, memory_order_relaxed) & SA_SIGINFO)
		fn(sig, si, uc);
	else
		((void (*)(int))(void (*)(void))fn)(sig);
}

static int is_function(const struct sigaction *act)
{
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

static void shadow_to_old(int sig, struct sigaction *old)
{
	void (*fn)(int, siginfo_t *, void *) = atomic_load(&shadows[sig].fn);

	if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction == trampoline && fn) {
		int flags = atomic_load(&shadows[sig].flags);

		old->sa_flags = flags;
		if (flags & SA_SIGINFO)
			old->sa_sigaction = fn;
		else
			old->sa_handler = (void (*)(int))(void (*)(void))fn;
	}
}

GUARD_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction mine;
	int r;

	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || guard_tls.agent || guard_tls.nest ||
	    sig <= 0 || sig >= _NSIG)
		return REAL(sigaction)(sig, act, old);
	if (sig == G.sig && atomic_load(&G.sampling)) {
		/* the program's own use of the agent's signal wins */
		if (act && is_function(act)) {
			guard_take_signal_back();
			return REAL(sigaction)(sig, act, old);
		}
		if (old) {
			if (our_view_set) {
				*old = our_view;
			} else {
				memset(old, 0, sizeof(*old));
				old->sa_handler = SIG_DFL;
			}
		}
		if (act) {
			our_view = *act;
			our_view_set = 1;
		}
		return 0;
	}
	if (!act || !is_function(act) || (act->sa_flags & SA_RESETHAND)) {
		r = REAL(sigaction)(sig, act, old);
		if (r == 0 && old)
			shadow_to_old(sig, old);
		if (r == 0 && act)
			atomic_store(&shadows[sig].fn, NULL);
		return r;
	}
	mine = *act;
	mine.sa_flags |= SA_SIGINFO;
	mine.sa_sigaction = trampoline;
	{
		/* the trampoline must find the new handler as soon as it can be called */
		void (*prev_fn)(int, siginfo_t *, void *) = atomic_load(&shadows[sig].fn);
		int prev_flags = atomic_load(&shadows[sig].flags);

		atomic_store(&shadows[sig].flags, act->sa_flags);
		atomic_store_explicit(&shadows[sig].fn,
				      (act->sa_flags & SA_SIGINFO) ?
					      act->sa_sigaction :
					      (void (*)(int, siginfo_t *, void *))(void (*)(void))act->sa_handler,
				      memory_order_release);
		r = REAL(sigaction)(sig, &mine, old);
		if (r < 0) {
			atomic_store(&shadows[sig].flags, prev_flags);
			atomic_store(&shadows[sig].fn, prev_fn);
			return r;
		}
		if (old && (old->sa_flags & SA_SIGINFO) && old->sa_sigaction == trampoline && prev_fn) {
			old->sa_flags = prev_flags;
			if (prev_flags & SA_SIGINFO)
				old->sa_sigaction = prev_fn;
			else
				old->sa_handler = (void (*)(int))(void (*)(void))prev_fn;
		}
	}
	return r;
}

GUARD_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction act, old;

	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || guard_tls.agent || guard_tls.nest)
		return REAL(signal)(sig, handler);
	/* glibc's signal(): BSD semantics */
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = SA_RESTART;
	sigemptyset(&act.sa_mask);
	if (sig > 0 && sig < _NSIG)
		sigaddset(&act.sa_mask, sig);
	if (sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

static int mask_common(int how, const sigset_t *set, sigset_t *old, int proc)
{
	struct gthread *t = &guard_tls;
	sigset_t mine;
	int prev = t->prog_blocked, r;

	/* the agent's own calls (libunwind blocks every signal around dl_iterate_phdr while it
	 * walks a stack, in the handler too) must block what they block */
	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || t->agent || t->unwinding ||
	    !atomic_load(&G.sampling))
		return proc ? REAL(sigprocmask)(how, set, old) : REAL(pthread_sigmask)(how, set, old);
	if (set && (how == SIG_BLOCK || how == SIG_SETMASK) && sigismember(set, G.sig) == 1) {
		mine = *set;
		sigdelset(&mine, G.sig);
		r = proc ? REAL(sigprocmask)(how, &mine, old) : REAL(pthread_sigmask)(how, &mine, old);
	} else {
		r = proc ? REAL(sigprocmask)(how, set, old) : REAL(pthread_sigmask)(how, set, old);
	}
	if (r != 0)
		return r;
	if (set) {
		if (how == SIG_SETMASK)
			t->prog_blocked = sigismember(set, G.sig) == 1;
		else if (sigismember(set, G.sig) == 1)
			t->prog_blocked = how == SIG_BLOCK;
	}
	if (old) {
		if (prev)
			sigaddset(old, G.sig);
		else
			sigdelset(old, G.sig);
	}
	return 0;
}

GUARD_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	return mask_common(how, set, old, 1);
}

GUARD_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return mask_common(how, set, old, 0);
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

/* ---- exec: no pending timer signal may reach the next program ---- */

static void before_exec(void)
{
	struct gthread *t = &guard_tls;

	/* in a vfork() child the memory is the parent's: leave its thread alone */
	if (atomic_load_explicit(&G.active, memory_order_relaxed) && !t->agent && getpid() == G.pid)
		guard_timer_delete(t);
}

GUARD_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	before_exec();
	return REAL(execve)(path, argv, envp);
}

GUARD_EXPORT int execv(const char *path, char *const argv[])
{
	before_exec();
	return REAL(execv)(path, argv);
}

GUARD_EXPORT int execvp(const char *file, char *const argv[])
{
	before_exec();
	return REAL(execvp)(file, argv);
}

GUARD_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec();
	return REAL(execvpe)(file, argv, envp);
}

GUARD_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	before_exec();
	return REAL(fexecve)(fd, argv, envp);
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
	before_exec();
	return REAL(execve)(path, argv, environ);
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
	before_exec();
	return REAL(execvp)(file, argv);
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
	before_exec();
	return REAL(execve)(path, argv, envp);
}

/* ---- threads ---- */

struct tramp {
	void *(*fn)(void *);
	void *arg;
	uint8_t agent;
};

static void *thread_start(void *p)
{
	struct tramp tr = *(struct tramp *)p;
	struct gthread *t = &guard_tls;

	free(p);
	t->agent = tr.agent;
	/* loop-site depths are measured from here: the same for every run of the same code */
	t->base = (uintptr_t)__builtin_dwarf_cfa();
	return tr.fn(tr.arg);
}

GUARD_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	struct tramp *tr;
	int r;

	if (!atomic_load_explicit(&G.active, memory_order_relaxed))
		return REAL(pthread_create)(th, attr, fn, arg);
	tr = malloc(sizeof(*tr));
	if (!tr)
		return REAL(pthread_create)(th, attr, fn, arg);
	tr->fn = fn;
	tr->arg = arg;
	/* threads the agent's threads start (libcurl's resolver) are the agent's too */
	tr->agent = guard_tls.agent;
	r = REAL(pthread_create)(th, attr, thread_start, tr);
	if (r != 0)
		free(tr);
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
	if (h && file && atomic_load_explicit(&G.active, memory_order_relaxed) && !t->agent && !t->nest)
		guard_on_dlopen();
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
	return r;
}
