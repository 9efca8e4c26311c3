/*
 * signals: the program's signals exactly as it set them, with the agent's own
 * signal (SM_GUARD_SIGNAL, SIGRTMAX-7: CPU-time samples and the watchdog's
 * requests for a stack) out of its sight (docs/guard.md "What the agent
 * guarantees").
 *
 *   dispositions  sigaction, signal, bsd_signal, sysv_signal and siginterrupt
 *                 report what the program set. Its handlers (those a library's
 *                 constructor set before the agent's start too) run through a
 *                 trampoline that counts them, so that a call interrupted by
 *                 the agent's signal alone is resumed by its wrapper while one
 *                 interrupted by the program's own still returns EINTR. A
 *                 child of vfork() shares the parent's memory: what it changes
 *                 goes to its own kernel table only, never to the parent's view.
 *   the agent's signal, as the program uses it: its handler runs for the
 *                 program's own sends (the agent's carry a cookie and never
 *                 reach it); left at SIG_DFL, one the program sends ends the
 *                 process as it would without the agent; at SIG_IGN it is
 *                 ignored by the kernel itself, and the agent takes no samples
 *                 meanwhile.
 *   masks         sigprocmask and pthread_sigmask set the mask the program asks
 *                 for, the agent's signal included. A thread that blocks it is
 *                 sent none any more (its CPU timer is disarmed, the watchdog
 *                 leaves it alone) and any of the agent's still pending for it
 *                 are taken back, so that no sigwait, sigtimedwait or signalfd of
 *                 the program receives one and no exec'd program inherits one.
 *                 A new thread starts with the mask its creator had (interpose.c).
 *   waits         sigwait drops the agent's signals should one come; pause and
 *                 sigsuspend resume after the agent's signal alone.
 *
 * Only the trampoline and what it calls run in signal handlers.
 */
#include "agent/guard/real.h"
#include "agent/guard/hot.h"
#include "agent/guard/region.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

/* bsd_signal left POSIX in 2008; the C library still has it, and old programs call it */
sighandler_t bsd_signal(int sig, sighandler_t handler);
/* siginterrupt is deprecated, but programs still call it: the agent wraps it */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define SIG_REALS(X)                                                                                  \
	X(sigaction) X(signal) X(bsd_signal) X(sysv_signal) X(__sysv_signal) X(siginterrupt)            \
	X(sigprocmask) X(pthread_sigmask) X(sigwait) X(sigwaitinfo) X(pause) X(sigsuspend)
SIG_REALS(GUARD_REAL_DECLARE)

__attribute__((constructor(101))) static void signals_resolve(void)
{
	SIG_REALS(GUARD_REAL_RESOLVE)
}

/* A handler of the program's, called by the trampoline. */
struct shadow {
	_Atomic(void (*)(int, siginfo_t *, void *)) fn;
	_Atomic int flags;   /* as the program gave them */
};

static struct shadow shadows[_NSIG];
/* The agent's signal while the program has no handler of its own for it: what the program set
 * (SIG_DFL or SIG_IGN, with its flags and mask). */
static struct sigaction agent_view;
static pthread_mutex_t agent_mu = PTHREAD_MUTEX_INITIALIZER;
/* siginterrupt(sig, 1) was called: signal() installs sig without SA_RESTART. Bit sig - 1. */
static _Atomic uint64_t intr_bits;

/* ---- glibc's SIGSETXID across exec (hot.h) ---- */

#define SIG_SETXID 33

struct ksigaction {   /* the kernel's struct sigaction (glibc refuses its own signals) */
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

static int setxid_ignored;
static _Atomic int prog_threads;
static struct ksigaction setxid_handler;

void guard_sig_at_start(void)
{
	struct ksigaction old;

	if (syscall(SYS_rt_sigaction, SIG_SETXID, NULL, &old, sizeof(old.mask)) == 0)
		setxid_ignored = old.handler == SIG_IGN;
}

void guard_sig_program_threads(void)
{
	atomic_store_explicit(&prog_threads, 1, memory_order_relaxed);
}

int guard_sig_exec_prepare(void)
{
	struct ksigaction ign;

	if (!setxid_ignored || atomic_load_explicit(&prog_threads, memory_order_relaxed))
		return 0;
	memset(&ign, 0, sizeof(ign));
	ign.handler = SIG_IGN;
	/* (a setuid() of another thread in this moment would wait on the agent's threads: they are
	 * gone with the exec, or the handler is back at once if it fails) */
	return syscall(SYS_rt_sigaction, SIG_SETXID, &ign, &setxid_handler, sizeof(ign.mask)) == 0 &&
	       setxid_handler.handler != SIG_IGN;
}

void guard_sig_exec_failed(int prepared)
{
	if (prepared)
		syscall(SYS_rt_sigaction, SIG_SETXID, &setxid_handler, NULL, sizeof(setxid_handler.mask));
}

void guard_sig_reset_child(void)
{
	pthread_mutex_init(&agent_mu, NULL);   /* (fork.c) */
}

int guard_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return REAL(sigaction)(sig, act, old);
}

int guard_real_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return REAL(pthread_sigmask)(how, set, old);
}

int guard_sig_ours(const siginfo_t *si)
{
	return (si->si_code == SI_TIMER || si->si_code == SI_QUEUE) && si->si_value.sival_ptr == G.sig_cookie;
}

/* A child of vfork() (or of a clone() sharing memory) runs on the parent's memory and thread
 * state: getpid() is its own, G.pid the parent's (a fork()ed child updates G.pid at once). */
static int vfork_child(void)
{
	return getpid() != G.pid;
}

/* ---- the trampoline ---- */

/* The program's own send of the agent's signal, which it left at SIG_DFL: its default action,
 * as without the agent (for a real-time signal: the process ends). */
static void default_action(int sig, siginfo_t *si)
{
	struct sigaction dfl;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	guard_sampling_set(0);
	REAL(sigaction)(sig, &dfl, NULL);
	/* blocked while this handler runs: delivered with the default action as it returns */
	syscall(SYS_rt_tgsigqueueinfo, (long)getpid(), (long)gettid(), (long)sig, si);
}

/* Whether sp lies on the thread's alternate signal stack, as the kernel saved it in uc. */
static int on_alt_stack(const void *ucp, uintptr_t sp)
{
	const ucontext_t *uc = ucp;
	uintptr_t lo;

	if (!uc || (uc->uc_stack.ss_flags & SS_DISABLE))
		return 0;
	lo = (uintptr_t)uc->uc_stack.ss_sp;
	return sp >= lo && sp - lo < uc->uc_stack.ss_size;
}

static void trampoline(int sig, siginfo_t *si, void *uc)
{
	void (*fn)(int, siginfo_t *, void *);
	int flags;

	if (sig == G.sig && guard_sig_ours(si)) {
		guard_sampler_signal(si, uc);
		return;
	}
	if (sig <= 0 || sig >= _NSIG)
		return;
	fn = atomic_load_explicit(&shadows[sig].fn, memory_order_acquire);
	if (!fn) {
		if (sig == G.sig)
			default_action(sig, si);
		return;
	}
	atomic_fetch_add_explicit(&guard_tls.prog_sigs, 1, memory_order_relaxed);
	flags = atomic_load_explicit(&shadows[sig].flags, memory_order_relaxed);
	if (sig == G.sig && (flags & SA_RESETHAND)) {
		/* one shot, kept by the agent rather than the kernel (which would reset on the agent's own
		 * signals too): back to SIG_DFL before the handler runs */
		atomic_store_explicit(&shadows[sig].fn, NULL, memory_order_release);
		agent_view.sa_handler = SIG_DFL;
		agent_view.sa_flags = 0;
	}
	/* counted while it runs (saturating): what may allocate (libunwind's trace cache, made at a
	 * wrapped call or a fork) waits for a moment outside it (sampler.c). The outermost one's frame
	 * is noted, so that a handler left by siglongjmp (or in a vfork child that ended inside it)
	 * is known to be gone once the thread runs above that frame again (guard_trace_cache()). */
	if (guard_tls.prog_handlers == 0) {
		uintptr_t sp = (uintptr_t)__builtin_frame_address(0);

		guard_tls.prog_handler_sp = on_alt_stack(uc, sp) ? 0 : sp;
	}
	if (guard_tls.prog_handlers < UINT8_MAX)
		guard_tls.prog_handlers++;
	if (flags & SA_SIGINFO)
		fn(sig, si, uc);
	else
		((void (*)(int))(void (*)(void))fn)(sig);
	if (guard_tls.prog_handlers && guard_tls.prog_handlers < UINT8_MAX)
		guard_tls.prog_handlers--;
}

/* ---- dispositions ---- */

static int is_function(const struct sigaction *act)
{
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

static void (*as_fn(const struct sigaction *act))(int, siginfo_t *, void *)
{
	return (act->sa_flags & SA_SIGINFO) ? act->sa_sigaction :
					      (void (*)(int, siginfo_t *, void *))(void (*)(void))act->sa_handler;
}

/* The program's handler act for sig, where the trampoline finds it: the flags first, the handler
 * last, so that the trampoline never pairs the new handler with the old flags. */
static void shadow_set(int sig, const struct sigaction *act)
{
	atomic_store(&shadows[sig].flags, act->sa_flags);
	atomic_store_explicit(&shadows[sig].fn, as_fn(act), memory_order_release);
}

/* What the kernel reports (the trampoline) as the program set it (fn and flags as given). */
static void program_view(struct sigaction *old, void (*fn)(int, siginfo_t *, void *), int flags)
{
	if (fn && (flags & SA_RESETHAND) && old->sa_handler == SIG_DFL) {
		/* a one-shot handler the kernel reset as it delivered the signal: SIG_DFL, with the
		 * program's flags (the kernel keeps the trampoline's SA_SIGINFO) */
		old->sa_flags = (old->sa_flags & ~SA_SIGINFO) | (flags & SA_SIGINFO);
		return;
	}
	if (!((old->sa_flags & SA_SIGINFO) && old->sa_sigaction == trampoline) || !fn)
		return;
	old->sa_flags = flags;
	if (flags & SA_SIGINFO)
		old->sa_sigaction = fn;
	else
		old->sa_handler = (void (*)(int))(void (*)(void))fn;
}

/* The agent's own signal: the kernel keeps the trampoline unless the program ignores it. Every
 * signal is blocked meanwhile, so that a handler calling sigaction cannot meet the lock held. */
static int agent_sig_action(const struct sigaction *act, struct sigaction *old)
{
	void (*prev_fn)(int, siginfo_t *, void *);
	struct sigaction kernel, prev_kernel, prev_view;
	sigset_t all, mask;
	int prev_flags, r = 0, was_ignored;

	sigfillset(&all);
	REAL(pthread_sigmask)(SIG_BLOCK, &all, &mask);
	pthread_mutex_lock(&agent_mu);
	prev_fn = atomic_load(&shadows[G.sig].fn);
	prev_flags = atomic_load(&shadows[G.sig].flags);
	prev_view = agent_view;
	REAL(sigaction)(G.sig, NULL, &prev_kernel);
	was_ignored = prev_kernel.sa_handler == SIG_IGN;
	if (act) {
		kernel = *act;
		if (act->sa_handler == SIG_IGN) {
			/* ignored by the kernel itself, exactly; the agent's samples wait meanwhile */
			guard_sampler_pause();
		} else {
			kernel.sa_sigaction = trampoline;
			kernel.sa_flags = is_function(act) ? (act->sa_flags & ~SA_RESETHAND) | SA_SIGINFO
							   : SA_SIGINFO | SA_RESTART;
			if (!is_function(act))
				sigemptyset(&kernel.sa_mask);
		}
		if (is_function(act)) {
			shadow_set(G.sig, act);
		} else {
			atomic_store(&shadows[G.sig].fn, NULL);
			agent_view = *act;
		}
		r = REAL(sigaction)(G.sig, &kernel, NULL);
		if (r < 0) {
			atomic_store(&shadows[G.sig].flags, prev_flags);
			atomic_store(&shadows[G.sig].fn, prev_fn);
			agent_view = prev_view;
		}
		if ((r == 0 && act->sa_handler != SIG_IGN && was_ignored) ||
		    (r < 0 && act->sa_handler == SIG_IGN && !was_ignored))
			guard_sampler_resume();
	}
	pthread_mutex_unlock(&agent_mu);
	REAL(pthread_sigmask)(SIG_SETMASK, &mask, NULL);
	if (r == 0 && old) {
		if (prev_fn) {
			*old = prev_kernel;
			program_view(old, prev_fn, prev_flags);
		} else {
			*old = prev_view;
		}
	}
	return r;
}

int guard_sig_install(void)
{
	struct sigaction act, prog;

	/* what the program inherited (an ignored signal stays ignored across exec) is its view */
	if (REAL(sigaction)(G.sig, NULL, &agent_view) < 0)
		return -1;
	prog = agent_view;
	if (is_function(&agent_view)) {
		memset(&agent_view, 0, sizeof(agent_view));
		agent_view.sa_handler = SIG_DFL;
	}
	if (agent_view.sa_handler == SIG_IGN) {
		guard_sampling_set(0);
		return 0;
	}
	memset(&act, 0, sizeof(act));
	act.sa_sigaction = trampoline;
	/* SA_RESTART: the kernel resumes the calls it can; the wrappers resume the others */
	act.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&act.sa_mask);
	if (is_function(&prog)) {
		/* a handler a library's constructor set before the agent's: kept as agent_sig_action()
		 * keeps one set later, its flags (SA_RESTART or not) the kernel's for the agent's
		 * samples too (the wrappers resume what they interrupt) */
		act.sa_mask = prog.sa_mask;
		act.sa_flags = (prog.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
		shadow_set(G.sig, &prog);
	}
	if (REAL(sigaction)(G.sig, &act, NULL) < 0) {
		atomic_store(&shadows[G.sig].fn, NULL);
		return -1;
	}
	guard_sampling_set(1);
	return 0;
}

void guard_sig_adopt(void)
{
	for (int sig = 1; sig < _NSIG; sig++) {
		struct sigaction cur, mine, prev;

		/* (the agent's own signal, guarding, has the trampoline already: skipped below) */
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		/* (the C library's own signals fail here: they are never the program's) */
		if (REAL(sigaction)(sig, NULL, &cur) < 0 || !is_function(&cur) ||
		    ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == trampoline))
			continue;
		mine = cur;
		mine.sa_flags |= SA_SIGINFO;
		mine.sa_sigaction = trampoline;
		shadow_set(sig, &cur);
		if (REAL(sigaction)(sig, &mine, &prev) < 0) {
			atomic_store(&shadows[sig].fn, NULL);
			continue;
		}
		if (prev.sa_handler != cur.sa_handler || prev.sa_flags != cur.sa_flags ||
		    memcmp(&prev.sa_mask, &cur.sa_mask, sizeof(cur.sa_mask)) != 0) {
			/* another thread of the program's set it in the meantime (the agent is not active
			 * yet, so not through the trampoline): what it set stands */
			REAL(sigaction)(sig, &prev, NULL);
			atomic_store(&shadows[sig].fn, NULL);
		}
	}
}

GUARD_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	void (*prev_fn)(int, siginfo_t *, void *);
	struct gthread *t = &guard_tls;
	struct sigaction mine;
	int prev_flags, r;

	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || t->agent || t->nest || sig <= 0 ||
	    sig >= _NSIG)
		return REAL(sigaction)(sig, act, old);
	if (vfork_child()) {
		/* its own kernel table; the parent's view (shared memory) stays as it is */
		r = REAL(sigaction)(sig, act, old);
		if (r == 0 && old)
			program_view(old, atomic_load(&shadows[sig].fn), atomic_load(&shadows[sig].flags));
		return r;
	}
	if (sig == G.sig && G.sig_owned)
		return agent_sig_action(act, old);
	prev_fn = atomic_load(&shadows[sig].fn);
	prev_flags = atomic_load(&shadows[sig].flags);
	if (!act || !is_function(act)) {
		/* as given: nothing of the agent's to add */
		r = REAL(sigaction)(sig, act, old);
		if (r == 0 && act)
			atomic_store(&shadows[sig].fn, NULL);
		if (r == 0 && old)
			program_view(old, prev_fn, prev_flags);
		return r;
	}
	/* a one-shot handler (SA_RESETHAND) too: the kernel resets the trampoline to SIG_DFL as it
	 * delivers the signal, and the trampoline runs the handler that once, counted like the others */
	mine = *act;
	mine.sa_flags |= SA_SIGINFO;
	mine.sa_sigaction = trampoline;
	/* the trampoline must find the new handler as soon as the kernel can call it */
	shadow_set(sig, act);
	r = REAL(sigaction)(sig, &mine, old);
	if (r < 0) {
		atomic_store(&shadows[sig].flags, prev_flags);
		atomic_store(&shadows[sig].fn, prev_fn);
		return r;
	}
	if (old)
		program_view(old, prev_fn, prev_flags);
	return r;
}

/* signal() and its kin: a handler with the given flags, the signal itself blocked while it runs
 * unless SA_NODEFER. Returns the previous handler or SIG_ERR, as they do. */
static sighandler_t install(int sig, sighandler_t handler, int flags)
{
	struct sigaction act, old;

	if (handler == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = flags;
	sigemptyset(&act.sa_mask);
	if (!(flags & SA_NODEFER) && sig > 0 && sig < _NSIG)
		sigaddset(&act.sa_mask, sig);
	if (sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

static int bsd_flags(int sig)
{
	/* glibc's signal(): restarting calls, unless siginterrupt() said otherwise */
	return sig > 0 && sig <= 64 && (atomic_load(&intr_bits) & (1ULL << (sig - 1))) ? 0 : SA_RESTART;
}

#define PASS_THROUGH() (!atomic_load_explicit(&G.active, memory_order_relaxed) || guard_tls.agent || guard_tls.nest)

GUARD_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	if (PASS_THROUGH())
		return REAL(signal)(sig, handler);
	return install(sig, handler, bsd_flags(sig));
}

GUARD_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	if (PASS_THROUGH())
		return REAL(bsd_signal)(sig, handler);
	return install(sig, handler, bsd_flags(sig));
}

GUARD_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	if (PASS_THROUGH())
		return REAL(sysv_signal)(sig, handler);
	return install(sig, handler, SA_RESETHAND | SA_NODEFER);
}

GUARD_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	if (PASS_THROUGH())
		return REAL(__sysv_signal)(sig, handler);
	return install(sig, handler, SA_RESETHAND | SA_NODEFER);
}

GUARD_EXPORT int siginterrupt(int sig, int interrupt)
{
	struct sigaction act;

	if (PASS_THROUGH())
		return REAL(siginterrupt)(sig, interrupt);
	if (sigaction(sig, NULL, &act) < 0)
		return -1;
	if (sig <= 64) {
		if (interrupt)
			atomic_fetch_or(&intr_bits, 1ULL << (sig - 1));
		else
			atomic_fetch_and(&intr_bits, ~(1ULL << (sig - 1)));
	}
	if (interrupt)
		act.sa_flags &= ~SA_RESTART;
	else
		act.sa_flags |= SA_RESTART;
	return sigaction(sig, &act, NULL);
}

/* ---- masks ---- */

/* Takes back the agent's signals pending for this thread (its mask blocks them now); the program's
 * own, taken out on the way, are queued again in their order. */
void guard_sig_drain(void)
{
	siginfo_t keep[16], si;
	struct timespec zero = { 0, 0 };
	sigset_t pending, only;
	int n = 0, saved = errno;

	if (sigpending(&pending) < 0 || sigismember(&pending, G.sig) != 1)
		goto out;
	sigemptyset(&only);
	sigaddset(&only, G.sig);
	while (syscall(SYS_rt_sigtimedwait, &only, &si, &zero, (long)(_NSIG / 8)) == G.sig)
		if (!guard_sig_ours(&si) && n < 16)
			keep[n++] = si;
	for (int i = 0; i < n; i++)
		syscall(SYS_rt_tgsigqueueinfo, (long)getpid(), (long)gettid(), (long)G.sig, &keep[i]);
out:
	errno = saved;
}

/* The thread is about to block the agent's signal: nothing more is sent to it. */
static void quiet(struct gthread *t)
{
	struct gslot *s = t->slot;

	if (s) {
		atomic_store(&s->sig_blocked, 1);
		/* a watchdog's send already under way lands before the block, and is drained after it */
		while (atomic_load(&s->sending))
			sched_yield();
	}
	guard_timer_disarm(t);
}

static void set_blocked(struct gthread *t, int blocked)
{
	t->prog_blocked = (uint8_t)blocked;
	if (t->slot)
		atomic_store(&t->slot->sig_blocked, blocked);
}

static int mask_common(int how, const sigset_t *set, sigset_t *old, int proc)
{
	struct gthread *t = &guard_tls;
	int blocks, unblocks, r;

	/* the agent's own calls (libunwind blocks every signal around dl_iterate_phdr while it walks a
	 * stack, in the handler too) go straight through */
	if (!atomic_load_explicit(&G.active, memory_order_relaxed) || t->agent || t->unwinding || !set ||
	    G.mode != GUARD_MODE_GUARD)
		return proc ? REAL(sigprocmask)(how, set, old) : REAL(pthread_sigmask)(how, set, old);
	if (!t->mask_known)
		guard_sig_thread_mask(t);
	blocks = (how == SIG_BLOCK || how == SIG_SETMASK) && sigismember(set, G.sig) == 1 && !t->prog_blocked;
	unblocks = ((how == SIG_UNBLOCK && sigismember(set, G.sig) == 1) ||
		    (how == SIG_SETMASK && sigismember(set, G.sig) != 1)) && t->prog_blocked;
	if ((blocks || unblocks) && vfork_child())
		blocks = unblocks = 0;   /* the parent's thread state: left alone (the child has no timer) */
	if (blocks)
		quiet(t);
	r = proc ? REAL(sigprocmask)(how, set, old) : REAL(pthread_sigmask)(how, set, old);
	if (r != 0) {
		if (blocks && t->slot)
			atomic_store(&t->slot->sig_blocked, 0);
		return r;
	}
	if (blocks) {
		set_blocked(t, 1);
		guard_sig_drain();
	} else if (unblocks) {
		set_blocked(t, 0);
	}
	return r;
}

GUARD_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	return mask_common(how, set, old, 1);
}

GUARD_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return mask_common(how, set, old, 0);
}

void guard_sig_thread_mask(struct gthread *t)
{
	sigset_t cur;

	/* a thread the agent did not see start (glibc's helpers, threads from before the agent) */
	if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &cur, (long)(_NSIG / 8)) == 0)
		set_blocked(t, sigismember(&cur, G.sig) == 1);
	t->mask_known = 1;
}

/* ---- waiting for signals ---- */

GUARD_EXPORT int sigwait(const sigset_t *set, int *sig)
{
	siginfo_t si;
	int r;

	if (PASS_THROUGH())
		return REAL(sigwait)(set, sig);
	/* as the C library's: never EINTR; and never the agent's own */
	do
		r = REAL(sigwaitinfo)(set, &si);
	while ((r < 0 && errno == EINTR) || (r == G.sig && guard_sig_ours(&si)));
	if (r < 0)
		return errno;
	*sig = r;
	return 0;
}

GUARD_EXPORT int pause(void)
{
	struct sigsnap snap;
	int r;

	if (PASS_THROUGH())
		return REAL(pause)();
	guard_sigsnap_take(&snap);
	while ((r = REAL(pause)()) < 0 && errno == EINTR && guard_sigsnap_ours_only(&snap))
		;
	return r;
}

GUARD_EXPORT int sigsuspend(const sigset_t *mask)
{
	struct sigsnap snap;
	int r;

	if (PASS_THROUGH())
		return REAL(sigsuspend)(mask);
	guard_sigsnap_take(&snap);
	while ((r = REAL(sigsuspend)(mask)) < 0 && errno == EINTR && guard_sigsnap_ours_only(&snap))
		;
	return r;
}

uintptr_t guard_sig_restorer(void)
{
	struct sigaction cur;

	/* glibc fills in its trampoline: the frame a stack walk from the handler passes */
	if (guard_real_sigaction(G.sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_restorer)
		return (uintptr_t)cur.sa_restorer;
	return 0;
}
