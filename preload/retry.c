/*
 * preload/retry.c - retries in the shim (retry.h; ADR-465, ADR-466): the
 * process's one retry budget behind its own lock, the full-jitter
 * backoff, and the socket layer's retry of a blocking connect.
 *
 * The budget (src/resilix/retry.h, Finagle's shape) is one struct for the
 * whole process: a retry storm is the process's behaviour across its
 * upstreams, not one key's. Its lock is a shim spinlock taken for one
 * core call at a time, never with another shim lock held and never across
 * a call into libc (admit.c's rules); the fork handlers take and free it
 * like the others.
 *
 * A retried connect is one call: it runs inside the admission its first
 * attempt got (the breaker, the limiter and the bulkhead see one call and
 * one outcome; a rate token is spent once), and only a connect that
 * failed before anything was sent is retried: refused by the peer, timed
 * out, or unreachable. A connect resilix refused never reaches here; a
 * non-blocking connect, or a poll of a pending one, is never retried.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "admit.h"
#include "errclass.h"
#include "lock.h"
#include "log.h"
#include "retry.h"
#include "symbols.h"

static struct rx_retry_budget budget;
static struct rx_lock budget_lock;

void rx__retry_setup(void)
{
	/* Checked by the parser: the defaults stand if it failed. */
	if (rx_retry_budget_init(&budget, &rx__cfg.budget) != RX_OK) {
		struct rx_retry_budget_config c;

		rx_retry_budget_config_default(&c);
		(void)rx_retry_budget_init(&budget, &c);
	}
}

void rx__retry_lock_all(void)
{
	rx__lock(&budget_lock);
}

void rx__retry_unlock_all(void)
{
	rx__unlock(&budget_lock);
}

void rx__retry_after_fork_child(void)
{
	rx__lock_reset(&budget_lock);
}

void rx__retry_deposit(uint64_t now_ns)
{
	rx__lock(&budget_lock);
	rx_retry_budget_deposit(&budget, now_ns);
	rx__unlock(&budget_lock);
}

bool rx__retry_withdraw(uint64_t now_ns, struct rx_ticket *ticket,
			struct rx_guard *g, const char *key, const char *at)
{
	struct rx_refusal why = {RX_REASON_NONE, 0};
	enum rx_decision d;

	rx__lock(&budget_lock);
	d = rx_retry_budget_withdraw(&budget, now_ns, ticket, &why);
	rx__unlock(&budget_lock);
	if (d == RX_ADMIT)
		return true;
	if (g)
		rx__key_count_refusal(g, RX_REASON_BUDGET_EXCEEDED);
	rx__log(RX_LOG_DEBUG,
		"key=%s event=refused reason=budget-exceeded at=%s "
		"msg=\"retry not made; the last attempt's outcome stands\"",
		key, at);
	return false;
}

void rx__retry_refund(const struct rx_ticket *ticket)
{
	rx__lock(&budget_lock);
	rx_retry_budget_refund(&budget, ticket);
	rx__unlock(&budget_lock);
}

uint64_t rx__retry_backoff_ns(uint32_t n)
{
	return rx_retry_backoff_ns(&rx__cfg.retry, n, rx__thread_rng());
}

bool rx__retry_sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / UINT64_C(1000000000)),
			      (long)(ns % UINT64_C(1000000000))};
	int saved = errno;
	int rc = nanosleep(&ts, NULL);

	errno = saved;
	return rc == 0;
}

/* ---- the socket layer ---------------------------------------------- */

static const char *errname(int err)
{
	const char *n = strerrorname_np(err);

	return n ? n : "unknown";
}

/* Failed before anything was sent: safe to repeat for every protocol. */
static bool retriable_connect_errno(int err)
{
	return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
	       err == ENETUNREACH;
}

static uint64_t get_sndtimeo_ns(int fd, struct timeval *tv)
{
	socklen_t len = sizeof(*tv);

	if (rx__real_getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, tv, &len) != 0 ||
	    tv->tv_sec < 0 || tv->tv_usec < 0)
		return 0;
	return (uint64_t)tv->tv_sec * UINT64_C(1000000000) +
	       (uint64_t)tv->tv_usec * 1000;
}

/* Give the next attempt only what is left of the program's own bound. */
static void set_sndtimeo_ns(int fd, uint64_t ns)
{
	struct timeval tv = {(time_t)(ns / UINT64_C(1000000000)),
			     (suseconds_t)((ns % UINT64_C(1000000000)) / 1000)};

	if (tv.tv_sec == 0 && tv.tv_usec == 0)
		tv.tv_usec = 1; /* 0 would mean "no bound" */
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int rx__connect_retry(struct rx_op *op, int fd, const struct sockaddr *sa,
		      socklen_t len, int rc, uint64_t start_ns)
{
	int err = errno;
	struct timeval own_tv = {0, 0};
	uint64_t own_ns, deadline = 0, now;
	const char *key;
	uint32_t n;

	if (op->again || !op->e || !rx__fd_blocking(fd))
		goto out;
	/* Every first attempt of a connect that may be retried earns the
	 * budget its share, whether it is retried or not (ADR-427). */
	rx__retry_deposit(start_ns);
	if (rc == 0 || !retriable_connect_errno(err))
		goto out;
	key = rx__key_name(op->e->guard);
	own_ns = get_sndtimeo_ns(fd, &own_tv);
	if (rx__cfg.timeout_ms > 0)
		deadline = start_ns + rx__cfg.timeout_ms * RX_NS_PER_MS;
	if (own_ns > 0 && (deadline == 0 || start_ns + own_ns < deadline))
		deadline = start_ns + own_ns;
	for (n = 0; n + 1 < rx__cfg.retry.max_attempts; n++) {
		struct rx_ticket t;
		uint64_t delay = rx__retry_backoff_ns(n);

		now = rx__now_ns();
		if (!rx_retry_fits(deadline, now, delay))
			break; /* no time left: the last error stands */
		if (!rx__retry_withdraw(now, &t, op->e->guard, key, "connect"))
			break;
		if (delay > 0 && !rx__retry_sleep_ns(delay)) {
			rx__retry_refund(&t); /* a signal: the program hears */
			break;
		}
		rx__log(RX_LOG_DEBUG,
			"key=%s event=retry at=connect attempt=%u error=%s "
			"backoff_ms=%llu",
			key, n + 2, errname(err),
			(unsigned long long)(delay / RX_NS_PER_MS));
		if (own_ns > 0) {
			now = rx__now_ns();
			if (now >= deadline) {
				rx__retry_refund(&t);
				break;
			}
			set_sndtimeo_ns(fd, deadline - now);
		}
		rc = rx__real_connect(fd, sa, len);
		err = errno;
		if (rc == 0 || !retriable_connect_errno(err))
			break;
	}
	if (own_ns > 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &own_tv,
				 sizeof(own_tv));
out:
	errno = err;
	return rc;
}
