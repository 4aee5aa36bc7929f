#!/bin/bash
# io_families.sh - the shim sees a call through every I/O family it wraps.
#
# tests/support/iofam sends one request per family (write/read, send/recv,
# sendto/recvfrom, sendmsg/recvmsg, writev/readv, sendmmsg/recvmmsg,
# sendfile and sendfile64, pwritev2/preadv2 at offset -1, splice through a
# pipe both ways (reading once the socket is readable, as a relay does),
# and glibc's reserved names __connect, __send, __write, __read, __close)
# to an upstream answering 500, on a new
# connection each. Checked: the bytes each family receives are identical
# with and without the shim; under the shim, each family's call settles
# exactly once, at its first response byte, with the 500's verdict
# (transient) - so a family the shim did not see would show up as a
# missing settle, or as an abandonment at close.
. "$(dirname "$0")/lib.sh"
rx_require_build
IOFAM=$RESILIX_BUILDDIR/tests/support/iofam
[ -x "$IOFAM" ] || rx_fail "not built: $IOFAM"

rx_upstream_start fam --phases 0:status:500
plain=$RX_TMP/plain.out shim=$RX_TMP/shim.out err=$RX_TMP/shim.err
rx_dump_on_fail "$shim" "$err"
rx_plain "$IOFAM" --port "$RX_PORT" >"$plain" 2>/dev/null ||
	rx_fail "iofam without the shim: exit status $?"
rx_shim RESILIX_LOG=debug RESILIX_MIN_CALLS=100 RESILIX_WINDOW_CALLS=100 \
	RESILIX_CONSECUTIVE_BACKSTOP=0 "$IOFAM" --port "$RX_PORT" \
	>"$shim" 2>"$err" || rx_fail "iofam under the shim: exit status $?"

n=$(wc -l <"$plain" | tr -d ' ')
rx_assert_eq "families run" 12 "$n"
rx_assert_eq "families answered 500" 12 "$(awk '$2 == 500' "$plain" | wc -l | tr -d ' ')"
cmp -s "$plain" "$shim" || rx_fail "responses differ under the shim:
$(diff "$plain" "$shim")"
rx_log "ok: every family's response is byte-identical under the shim"

# Pair each family marker with the settle lines logged before the next.
awk '/iofam family=/ { if (f) print f, n, v; f = $2; n = 0; v = ""; next }
	/event=settle/ { n++; for (i = 1; i <= NF; i++)
		if ($i ~ /^(verdict|at)=/) v = v $i "," }
	END { if (f) print f, n, v }' "$err" >"$RX_TMP/pairs"
rx_dump_on_fail "$RX_TMP/pairs"
bad=$(grep -v ' 1 verdict=transient,at=first-byte,$' "$RX_TMP/pairs" | paste -sd';')
rx_assert_eq "families not settled once at the first byte as transient" "" "$bad"
rx_assert_eq "families the shim settled" 12 "$(wc -l <"$RX_TMP/pairs" | tr -d ' ')"
rx_upstream_stop fam

# A splice that blocks for the answer (ADR-224): the shim cannot peek the
# status first, but sees bytes arrive - the call succeeds at its first
# byte instead of being abandoned at close (and, with a slow-call
# threshold the stream outlives, judged a timeout).
rx_upstream_start late --phases 0:status:500:300
rx_shim RESILIX_LOG=debug RESILIX_SLOW_CALL_MS=2000 "$IOFAM" --port "$RX_PORT" \
	--only splice-blocking >"$shim" 2>"$err" ||
	rx_fail "iofam splice-blocking under the shim: exit status $?"
rx_assert_grep "blocking splice: answered 500, bytes intact" \
	'^splice-blocking 500 ' "$shim"
rx_assert_grep "blocking splice: settled at the first byte" \
	'event=settle verdict=success latency_us=[0-9]+ at=first-byte' "$err"
rx_assert_no_grep "blocking splice: not abandoned at close" 'at=close' "$err"
rx_pass
