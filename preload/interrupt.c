/*
 * preload/interrupt.c - whether a signal that ended a caller's wait in
 * the shim would have interrupted the real call it stands for (ADR-223).
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>

#include "interrupt.h"

/*
 * A signal handler ran while a caller waited for a limiter slot: would the
 * real call have been interrupted? Not if that handler was installed with
 * SA_RESTART (signal(7): connect and write are restarted then). The kernel
 * does not say which signal it was, so the wait ends only when no signal
 * this thread can receive has a handler with SA_RESTART - whichever of
 * them ran, the real call would have been interrupted (ADR-223). A
 * program that mixes the two keeps waiting: a spurious interruption is
 * worse than a wait the queue timeout bounds. Up to 64 sigaction calls,
 * on this rare path only.
 */
bool rx__interrupt_wanted(void)
{
	struct sigaction sa;
	bool handled = false;
	sigset_t mask;
	int s;

	if (pthread_sigmask(SIG_SETMASK, NULL, &mask) != 0)
		return false;
	for (s = 1; s < NSIG; s++) {
		if (s == SIGKILL || s == SIGSTOP ||
		    sigismember(&mask, s) == 1 ||
		    sigaction(s, NULL, &sa) != 0 || sa.sa_handler == SIG_DFL ||
		    sa.sa_handler == SIG_IGN)
			continue;
		if (sa.sa_flags & SA_RESTART)
			return false;
		handled = true;
	}
	return handled;
}
