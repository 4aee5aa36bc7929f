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
rx_queuewait_start

for m in none sndtimeo alarm alarm-restart alarm-mixed write-alarm; do
	rx_dump_on_fail "$RX_TMP/$m.out" "$RX_TMP/$m.err"
done
# set -- "$(rx_queuewait MODE)" splits the line into $1..$4.
set -- $(rx_queuewait none)
rx_assert_eq "no deadline: refused" "-1 ECONNREFUSED" "$1 $2"
rx_assert_ge "no deadline: after the queue timeout (ms)" "$3" 1400
rx_assert_grep "no deadline: it waited in the queue" \
	'event=refused reason=limiter-full .*at=connect waited_ms=1[45]' \
	"$RX_TMP/none.err"

set -- $(rx_queuewait sndtimeo)
rx_assert_eq "SO_SNDTIMEO: refused" "-1 ECONNREFUSED" "$1 $2"
rx_assert_le "SO_SNDTIMEO: at its 200 ms, not the queue's 1500 (ms)" "$3" 1000
rx_assert_ge "SO_SNDTIMEO: not before it (ms)" "$3" 150

set -- $(rx_queuewait alarm)
rx_assert_eq "alarm without SA_RESTART: refused at the alarm" \
	"-1 ECONNREFUSED" "$1 $2"
rx_assert_ge "alarm without SA_RESTART: the handler ran" "$4" 1
rx_assert_le "alarm without SA_RESTART: at the alarm (ms)" "$3" 1000
rx_assert_grep "alarm without SA_RESTART: logged" 'event=wait-interrupted' \
	"$RX_TMP/alarm.err"

set -- $(rx_queuewait alarm-restart)
rx_assert_eq "alarm with SA_RESTART: the wait goes on, then refused" \
	"-1 ECONNREFUSED" "$1 $2"
rx_assert_ge "alarm with SA_RESTART: the handler ran" "$4" 1
rx_assert_ge "alarm with SA_RESTART: after the queue timeout (ms)" "$3" 1400

set -- $(rx_queuewait alarm-mixed)
rx_assert_eq "SA_RESTART alarm, another handler without: the wait goes on" \
	"-1 ECONNREFUSED" "$1 $2"
rx_assert_ge "SA_RESTART alarm, another handler without: to the queue timeout (ms)" \
	"$3" 1400
rx_assert_no_grep "SA_RESTART alarm, another handler without: not interrupted" \
	'event=wait-interrupted' "$RX_TMP/alarm-mixed.err"

# A send interrupted before any byte went fails with EINTR, as the real
# write would (the program retries it or gives up; nothing was sent).
set -- $(rx_queuewait write-alarm)
rx_assert_eq "a kept-alive request's write, alarm without SA_RESTART: EINTR" \
	"-1 EINTR" "$1 $2"
rx_assert_le "a kept-alive request's write: at the alarm (ms)" "$3" 1000
rx_pass
