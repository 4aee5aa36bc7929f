#!/bin/bash
# limiter_wait_deadline.sh - a call that waits for a limiter slot ends no
# later than the program's own deadline would end the real call (ADR-223):
# the socket's SO_SNDTIMEO (Linux bounds connect with it: refused then),
# and a signal the real call would have been interrupted by - when no
# handler the thread can receive has SA_RESTART (the alarm() timeout of
# old daemons, Python's handlers). A connect interrupted so is refused (a
# real one would go on in the background, and the program would wait for
# it); a send fails with EINTR. A handler with SA_RESTART keeps the wait,
# as the kernel restarts the real call, and so does a mix of the two (the
# shim cannot tell which signal ran).
#
# The limit is 1, the upstream answers in 3 s, and a thread of the test
# program holds the slot; the program's second call queues, with a queue
# timeout of 1500 ms. The deadlines are 200 ms (the alarm repeats: one
# that lands before the wait begins interrupts nothing).
. "$(dirname "$0")/lib.sh"
rx_require_build
QW=$RESILIX_BUILDDIR/tests/support/queuewait
[ -x "$QW" ] || rx_fail "not built: $QW"

rx_upstream_start slow --phases 0:slow:3000
lim=(RESILIX_LIMIT_INITIAL=1 RESILIX_LIMIT_MIN=1 RESILIX_LIMIT_MAX=1
	RESILIX_QUEUE_TIMEOUT_MS=1500 RESILIX_LOG=debug)
# run MODE: "<rc> <errno> <elapsed ms> <alarms>" of the queued connect.
run() {
	local out=$RX_TMP/$1.out err=$RX_TMP/$1.err
	RX_TIMEOUT=15 rx_shim "${lim[@]}" "$QW" "$RX_PORT" "$1" >"$out" 2>"$err" ||
		rx_fail "$1: exit status $?"
	cat "$out"
}

for m in none sndtimeo alarm alarm-restart alarm-mixed write-alarm; do
	rx_dump_on_fail "$RX_TMP/$m.out" "$RX_TMP/$m.err"
done
# set -- "$(run MODE)" splits the line into $1..$4.
set -- $(run none)
rx_assert_eq "no deadline: refused" "-1 ECONNREFUSED" "$1 $2"
rx_assert_ge "no deadline: after the queue timeout (ms)" "$3" 1400
rx_assert_grep "no deadline: it waited in the queue" \
	'event=refused reason=limiter-full .*at=connect waited_ms=1[45]' \
	"$RX_TMP/none.err"

set -- $(run sndtimeo)
rx_assert_eq "SO_SNDTIMEO: refused" "-1 ECONNREFUSED" "$1 $2"
rx_assert_le "SO_SNDTIMEO: at its 200 ms, not the queue's 1500 (ms)" "$3" 1000
rx_assert_ge "SO_SNDTIMEO: not before it (ms)" "$3" 150

set -- $(run alarm)
rx_assert_eq "alarm without SA_RESTART: refused at the alarm" \
	"-1 ECONNREFUSED" "$1 $2"
rx_assert_ge "alarm without SA_RESTART: the handler ran" "$4" 1
rx_assert_le "alarm without SA_RESTART: at the alarm (ms)" "$3" 1000
rx_assert_grep "alarm without SA_RESTART: logged" 'event=wait-interrupted' \
	"$RX_TMP/alarm.err"

set -- $(run alarm-restart)
rx_assert_eq "alarm with SA_RESTART: the wait goes on, then refused" \
	"-1 ECONNREFUSED" "$1 $2"
rx_assert_ge "alarm with SA_RESTART: the handler ran" "$4" 1
rx_assert_ge "alarm with SA_RESTART: after the queue timeout (ms)" "$3" 1400

set -- $(run alarm-mixed)
rx_assert_eq "SA_RESTART alarm, another handler without: the wait goes on" \
	"-1 ECONNREFUSED" "$1 $2"
rx_assert_ge "SA_RESTART alarm, another handler without: to the queue timeout (ms)" \
	"$3" 1400
rx_assert_no_grep "SA_RESTART alarm, another handler without: not interrupted" \
	'event=wait-interrupted' "$RX_TMP/alarm-mixed.err"

# A send interrupted before any byte went fails with EINTR, as the real
# write would (the program retries it or gives up; nothing was sent).
set -- $(run write-alarm)
rx_assert_eq "a kept-alive request's write, alarm without SA_RESTART: EINTR" \
	"-1 EINTR" "$1 $2"
rx_assert_le "a kept-alive request's write: at the alarm (ms)" "$3" 1000
rx_pass
