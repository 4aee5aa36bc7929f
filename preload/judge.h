/*
 * preload/judge.h - the verdict of a call on the socket layer, decided in
 * this one place (ADR-310) from what ended the call: the protocol module's
 * verdict of a reply (protocols.h), an errno, EOF, a deadline, or the
 * program's close. Included by the call state machine (call.c) only;
 * inline, so each caller's constant cause leaves only its own rules.
 * Decisions: ADR-007, ADR-145, ADR-149, ADR-190, ADR-193, ADR-220,
 * ADR-225, ADR-364, ADR-676.
 */
#ifndef RESILIX_PRELOAD_JUDGE_H
#define RESILIX_PRELOAD_JUDGE_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cancel.h"
#include "fdtable.h"
#include "protocols.h"
#include "runtime.h"
#include "symbols.h"

/*
 * Would settling @v with this latency count against the upstream - a
 * failure, an overload, a timeout, or a slow call? Only such evidence is
 * worth an fstat (ADR-190): the healthy path settles without one.
 */
static inline bool rx__adverse(enum rx_verdict v, uint64_t start_ns,
			       uint64_t end_ns)
{
	uint64_t slow_ns = rx__cfg.guard.breaker.slow_call_ms * RX_NS_PER_MS;

	if (v == RX_REJECTED)
		return false;
	if (v != RX_SUCCESS && v != RX_ANSWERED)
		return true;
	return slow_ns > 0 && end_ns > start_ns && end_ns - start_ns >= slow_ns;
}

/*
 * Calls that never answer (ADR-145). With RESILIX_TIMEOUT_MS set, a call
 * whose answer comes (or whose fd is next used or closed) after that
 * deadline is a timeout. Without it, a call outstanding longer than
 * CALL_BOUND_NS is released as RX_REJECTED: it holds its permit no longer,
 * and it says nothing about the upstream (a long poll, a stream). The shim
 * has no thread and imposes no timer on the program: the deadline is
 * applied when the program next touches the fd (a read or write that
 * would block, the response's first byte, close).
 */
#define CALL_BOUND_NS (300 * UINT64_C(1000000000))

/* Is a call started at @start past its deadline or bound at @t? Then *@v
 * is what it settles as. */
static inline bool rx__past_deadline(uint64_t start, uint64_t t,
				     enum rx_verdict *v)
{
	uint64_t age = t > start ? t - start : 0;

	if (rx__cfg.timeout_ms > 0) {
		if (age <= rx__cfg.timeout_ms * RX_NS_PER_MS)
			return false;
		*v = RX_TIMEOUT;
		return true;
	}
	if (age <= CALL_BOUND_NS)
		return false;
	*v = RX_REJECTED;
	return true;
}

/* rx__past_deadline for the call on @e: one that waits on purpose (a
 * Redis BLPOP, ADR-650) has no deadline, only the bound past which it is
 * released without evidence, as a long poll is. */
static inline bool rx__call_overdue(const struct rx_fd *e, uint64_t start,
				    uint64_t t, enum rx_verdict *v)
{
	if (!rx__proto_untimed(&e->proto))
		return rx__past_deadline(start, t, v);
	if ((t > start ? t - start : 0) <= CALL_BOUND_NS)
		return false;
	*v = RX_REJECTED;
	return true;
}

/* The shortest of the slow threshold and the deadline that are set: how
 * long a call runs before its abandonment can be a timeout. */
static inline uint64_t rx__wait_ns(void)
{
	uint64_t slow_ns = rx__cfg.guard.breaker.slow_call_ms * RX_NS_PER_MS;
	uint64_t deadline_ns = rx__cfg.timeout_ms * RX_NS_PER_MS;

	if (slow_ns == 0 || (deadline_ns > 0 && deadline_ns < slow_ns))
		return deadline_ns;
	return slow_ns;
}

/*
 * Has the program sent nothing on @fd for at least @ns (ADR-193)? From
 * the kernel's TCP_INFO (tcpi_last_data_sent, in ms): no cost on the data
 * path. false when it cannot tell. Preserves errno.
 */
static inline bool rx__quiet_for(int fd, uint64_t ns)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int saved = errno;
	bool quiet;

	memset(&ti, 0, sizeof(ti));
	quiet =
	    rx__real_getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	    len >= offsetof(struct tcp_info, tcpi_last_data_sent) +
		       sizeof(ti.tcpi_last_data_sent) &&
	    (uint64_t)ti.tcpi_last_data_sent * RX_NS_PER_MS >= ns;
	errno = saved;
	return quiet;
}

/*
 * Had the reply bytes the program reads now arrived before the call's
 * request was written (ADR-364)? A server that gives up on an idle
 * kept-alive connection often says so first - "408 Request Timeout",
 * Connection: close - and the program reads that as the answer to the
 * request it writes next: it is not. From the kernel's TCP_INFO: the last
 * data received (tcpi_last_data_recv, ms ago) is older than the call,
 * which began at or before its request's first write (@start_ns), by
 * more than the kernel's clock can blur (a jiffy either way, 10 ms at
 * HZ=100). One getsockopt, on adverse evidence only: the healthy path
 * never asks. false when it cannot tell. Preserves errno.
 */
#define RX_PREDATES_SLACK_NS (25 * RX_NS_PER_MS)

static inline bool rx__reply_predates(int fd, uint64_t start_ns, uint64_t now)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	uint64_t age = now > start_ns ? now - start_ns : 0;
	int saved = errno;
	bool before;

	memset(&ti, 0, sizeof(ti));
	before =
	    rx__real_getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	    len >= offsetof(struct tcp_info, tcpi_last_data_recv) +
		       sizeof(ti.tcpi_last_data_recv) &&
	    (uint64_t)ti.tcpi_last_data_recv * RX_NS_PER_MS >
		age + RX_PREDATES_SLACK_NS;
	errno = saved;
	return before;
}

/* ------------------------------------------------------------------------
 * The verdict: decided here, and only here (ADR-310).
 * ---------------------------------------------------------------------- */

/* What ended a call. */
enum cause {
	CAUSE_REPLY,   /* the reply's first bytes: the module's verdict */
	CAUSE_ERROR,   /* an errno, EOF, or SO_RCVTIMEO/SO_SNDTIMEO */
	CAUSE_OVERDUE, /* past its deadline or bound, at a blocked I/O */
	CAUSE_CLOSE    /* the program closed or shut down the connection */
};

/* The facts a verdict is decided from, gathered under the stripe lock. */
struct outcome {
	enum cause cause;
	enum rx_verdict evidence; /* REPLY: the module's; ERROR: the cause's */
	const char *at;		  /* ERROR: what was seen */
	/* ERROR: an EOF, ECONNRESET or EPIPE on a kept-alive connection
	 * before any byte of the answer (ADR-149). */
	bool idle_close;
	/* CLOSE (ADR-193): the program read since its last write; the
	 * connect was still pending; the request had begun (REPLY too:
	 * ADR-364). */
	bool awaited, pending, requested;
	/* CLOSE: an SO_RCVTIMEO ran out while the answer was awaited, and
	 * the program gave the call up without it (ADR-572). */
	bool expired;
};

/* What judge decided. */
struct verdicts {
	enum rx_verdict call; /* the call's key */
	enum rx_verdict addr; /* the connect's address, if it holds one */
	const char *at;	      /* logged with the settlement */
	bool stale;	      /* @fd holds another file now: forget it */
	bool untimed;	      /* the call waited on purpose: no latency */
};

/*
 * rx__judge - the verdict of the call that ran from @start_ns to @end_ns (its
 * first byte, or the end) on record @e - @fd is the number it was seen on -
 * ended by @o at @now; @addr_held: the call still holds its connect's
 * address permit (ADR-220). The rules, in order:
 *   - a reply is the module's verdict; an error the errno's (or EOF's);
 *   - a reply that reports a cancel the program itself sent (a 57014 on
 *     the connection a CancelRequest it wrote named: the cancel ring) is
 *     its abandonment, judged as at a close: no evidence, unless the call
 *     had run past the slow threshold, then a timeout (ADR-676);
 *   - a kept-alive connection that fails before any byte of the answer
 *     was closed by the upstream while idle: no evidence (ADR-149) -
 *     unless it failed after the slow-call threshold: the request was
 *     being worked on (ADR-225); so is an adverse reply whose bytes had
 *     arrived before the request was written (ADR-364);
 *   - an answer after the deadline (RESILIX_TIMEOUT_MS) is a timeout, and
 *     one after CALL_BOUND_NS without a deadline no evidence (ADR-145);
 *   - a call that waits on purpose (a Redis BLPOP) is judged by what
 *     ended it, never by how long it took: no deadline, never slow, no
 *     latency sample (out->untimed), abandonment no evidence (ADR-650);
 *   - abandonment is no evidence (ADR-007), unless the call had run past
 *     the slow threshold or its deadline while the program waited for it
 *     (ADR-193): then a timeout;
 *   - adverse evidence from a number that no longer holds the socket is
 *     none (ADR-190): one fstat, on that path only;
 *   - under RESILIX_KEY=host a connect whose outcome was not seen holds
 *     its address's permit (ADR-220): the address takes the connect's
 *     outcome - a success when bytes came back, else the call's verdict -
 *     and a call that failed so releases the name's call without
 *     evidence, since the program's own fallback may reach the name
 *     through another address.
 * Inline: each caller passes a constant cause, and the data path (a
 * reply on a healthy connection) is a few compares.
 */
static inline __attribute__((always_inline)) void
rx__judge(int fd, struct rx_fd *e, const struct outcome *o, uint64_t start_ns,
	  uint64_t end_ns, bool addr_held, uint64_t now, struct verdicts *out)
{
	uint64_t slow_ns = rx__cfg.guard.breaker.slow_call_ms * RX_NS_PER_MS;
	enum rx_verdict v = o->evidence;
	bool connected = false, late, adverse = false;
	bool untimed = rx__proto_untimed(&e->proto);

	out->stale = false;
	out->untimed = untimed;
	if (__builtin_expect(untimed, 0))
		slow_ns = 0; /* its wait is the program's wish */
	switch (o->cause) {
	case CAUSE_REPLY:
		late = !untimed && rx__past_deadline(start_ns, end_ns, &v);
		out->at = late ? (v == RX_TIMEOUT ? "deadline" : "expired")
		      : untimed ? "blocking"
				: "first-byte";
		connected = true;
		/* A reply queued before the request was written is not its
		 * answer (ADR-364): no evidence, like an idle close. The
		 * adverse test is asked once, for this and the fd's (below). */
		adverse = rx__adverse(v, start_ns, end_ns);
		if (__builtin_expect(v == RX_TIMEOUT, 0) && !late &&
		    rx__cancel_take(rx__proto_cancel_key(&e->proto), now)) {
			/* The program gave the call up (ADR-676). */
			v = slow_ns > 0 && end_ns > start_ns &&
				    end_ns - start_ns >= slow_ns
				? RX_TIMEOUT
				: RX_REJECTED;
			out->at = "cancelled";
			adverse = v != RX_REJECTED;
		}
		if (o->requested && adverse &&
		    rx__reply_predates(fd, start_ns, now)) {
			v = RX_REJECTED;
			out->at = "stale-reply";
			adverse = false;
		}
		break;
	case CAUSE_ERROR:
		out->at = o->at;
		if (o->idle_close &&
		    !(slow_ns > 0 && now - start_ns >= slow_ns)) {
			v = RX_REJECTED;
			out->at = "stale-connection";
		}
		adverse = rx__adverse(v, start_ns, end_ns);
		break;
	case CAUSE_OVERDUE:
		(void)rx__call_overdue(e, start_ns, now, &v);
		out->at = v == RX_TIMEOUT ? "deadline" : "expired";
		adverse = rx__adverse(v, start_ns, now);
		break;
	case CAUSE_CLOSE:
	default:
		late = slow_ns > 0 && now - start_ns >= slow_ns;
		if (rx__cfg.timeout_ms > 0 && !untimed &&
		    rx__past_deadline(start_ns, now, &v))
			late = true;
		/* Only a program that waited timed out: for its connect to
		 * complete, or for an answer - it tried to read since its
		 * last write, or it sent a request and then nothing for as
		 * long as the threshold (it waited in poll, as python does
		 * with a socket timeout). One that only sent (log shipping,
		 * a metrics push), or never sent (an idle pooled
		 * connection), and hung up abandoned nothing (ADR-193). */
		if (late && !o->awaited && !o->pending &&
		    !(o->requested && rx__quiet_for(fd, rx__wait_ns())))
			late = false;
		/* A number that no longer holds the socket (ADR-190). */
		if (late && !rx__fd_still_ours(fd, e))
			late = false;
		/* The program's own socket timeout ran out, then it hung
		 * up: a timeout (ADR-147, ADR-572). */
		if (o->expired && rx__fd_still_ours(fd, e)) {
			v = RX_TIMEOUT;
			out->at = "socket-timeout";
			break;
		}
		v = late ? RX_TIMEOUT : RX_REJECTED;
		out->at = "close";
		break;
	}
	/* A close is never adverse here: its timeout asked above. */
	if (adverse && !rx__fd_still_ours(fd, e)) {
		/* Not the upstream's socket any more: bytes or an error of
		 * whatever now has the number (ADR-190). */
		v = RX_REJECTED;
		out->at = "stale-fd";
		out->stale = true;
		connected = false;
	}
	out->addr = connected ? RX_SUCCESS : v;
	out->call = addr_held && !connected ? RX_REJECTED : v;
}

#endif
