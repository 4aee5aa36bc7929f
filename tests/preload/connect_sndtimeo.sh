#!/bin/bash
# connect_sndtimeo.sh - a blocking connect whose SO_SNDTIMEO runs out is a
# timeout, judged when the connect returns (ADR-365).
#
# Such a connect returns -1/EINPROGRESS, which the shim read as a
# non-blocking connect still pending: the call was released as rejected
# at close and never counted, although the verdict table says an
# SO_SNDTIMEO expiry is a timeout - so a destination that swallows SYNs
# never opened its breaker. tests/support/blackhole connects to a
# loopback listener whose full accept queue drops every SYN: with
# RESILIX_CONSECUTIVE_BACKSTOP=3, three connects time out (300 ms each)
# and the fourth is refused at once - also when each socket was made
# non-blocking by socket() and turned blocking with fcntl (ADR-543), with
# ioctl(FIONBIO) or with the raw fcntl system call (ADR-619).
. "$(dirname "$0")/lib.sh"
rx_require_build
PROG=$RESILIX_BUILDDIR/tests/support/blackhole
[ -x "$PROG" ] || rx_fail "not built: $PROG"
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

rx_plain "$PROG" --connects 1 >"$out" || rx_fail "no black hole: exit status $?"
rx_assert_grep "without the shim: the connect times out" '^connect EINPROGRESS' "$out"

# Also with sockets made non-blocking by socket() and turned blocking by
# fcntl before the connect: the shim follows the mode it saw (ADR-543),
# through ioctl(FIONBIO) and syscall(SYS_fcntl) too (ADR-619).
for how in "" --made-blocking --made-blocking-ioctl --made-blocking-raw; do
	rx_shim RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=3 \
		RESILIX_MIN_CALLS=100 RESILIX_OPEN_MS=60000 "$PROG" \
		--connects 4 $how >"$out" 2>"$err" ||
		rx_fail "blackhole $how under the shim: exit status $?"
	rx_assert_eq "$how connects timed out" 3 \
		"$(grep -c '^connect EINPROGRESS' "$out")"
	rx_assert_eq "$how settled as timeouts at the connect's return" 3 \
		"$(grep -c 'event=settle verdict=timeout .*at=connect-timeout' "$err")"
	rx_assert_grep "$how the breaker opened" \
		'event=breaker-transition .*to=open' "$err"
	rx_assert_eq "$how the fourth connect is refused" "ECONNREFUSED" \
		"$(sed -n 4p "$out" | awk '{print $2}')"
done
rx_pass
