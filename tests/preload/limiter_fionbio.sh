#!/bin/bash
# limiter_fionbio.sh - a socket made non-blocking with ioctl(FIONBIO) is
# a non-blocking caller: where the limiter would queue its call, it is
# refused at once, as one made non-blocking by socket() or fcntl is
# (docs/design.md section 3, ADR-619). The shim does not learn the mode
# from its own bookkeeping there but from the socket itself, so a mode
# set behind its back (FIONBIO, another process sharing the open file, a
# descriptor received over SCM_RIGHTS) is honoured too.
#
# The limit is 1, the upstream answers in 3 s, a thread of
# tests/support/queuewait holds the slot, and the program's second call
# would queue for up to 1500 ms: a connect on a socket made non-blocking
# with FIONBIO, then the first write of a kept-alive connection's next
# request on one, then a connect on a socket a forked child made
# non-blocking with fcntl (the shared open file: this process saw no
# change). Each must fail within 300 ms, and nothing waits.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_queuewait_start

for m in fionbio write-fionbio child-nonblock; do
	rx_dump_on_fail "$RX_TMP/$m.out" "$RX_TMP/$m.err"
done
# set -- $(rx_queuewait MODE) splits the line into $1..$4.
set -- $(rx_queuewait fionbio)
rx_assert_eq "connect, FIONBIO: refused" "-1 ECONNREFUSED" "$1 $2"
rx_assert_le "connect, FIONBIO: at once, not after the queue's 1500 (ms)" "$3" 300
rx_assert_grep "connect, FIONBIO: refused as limiter-full without a wait" \
	'event=refused reason=limiter-full .*at=connect waited_ms=0' \
	"$RX_TMP/fionbio.err"
rx_assert_no_grep "connect, FIONBIO: nobody waited" 'event=admitted-after-wait' \
	"$RX_TMP/fionbio.err"

set -- $(rx_queuewait write-fionbio)
rx_assert_eq "kept-alive write, FIONBIO: refused" "-1 ECONNREFUSED" "$1 $2"
rx_assert_le "kept-alive write, FIONBIO: at once (ms)" "$3" 300
rx_assert_grep "kept-alive write, FIONBIO: refused as limiter-full without a wait" \
	'event=refused reason=limiter-full .*at=write waited_ms=0' \
	"$RX_TMP/write-fionbio.err"

set -- $(rx_queuewait child-nonblock)
rx_assert_eq "connect, made non-blocking by a child: refused" "-1 ECONNREFUSED" "$1 $2"
rx_assert_le "connect, made non-blocking by a child: at once (ms)" "$3" 300
rx_assert_grep "connect, made non-blocking by a child: limiter-full without a wait" \
	'event=refused reason=limiter-full .*at=connect waited_ms=0' \
	"$RX_TMP/child-nonblock.err"
rx_pass
