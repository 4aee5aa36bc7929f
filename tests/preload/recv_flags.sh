#!/bin/bash
# recv_flags.sh - receive flags that change what a receive writes, or what
# it reads, neither crash the program nor change a verdict (ADR-360,
# ADR-361).
#
# tests/support/recvflags receives one 500 answer per mode: MSG_TRUNC
# into NULL (it crashed the program in the HTTP sniffer) or into a buffer
# holding a stale "HTTP/1.1 200" (sniffed as the answer: a success),
# through recv, recvfrom, recvmsg and recvmmsg, and with MSG_WAITALL;
# MSG_PEEK, MSG_PEEK|MSG_TRUNC, MSG_WAITALL; an error-queue read before
# the answer, empty (EAGAIN at once on a blocking socket: judged a
# timeout) or holding a zero-copy notification (0 bytes with control
# data: judged an EOF); an out-of-band read with no urgent data (EINVAL);
# recvmsg with control data. Each mode must settle exactly once, at its
# first response byte, as the 500's verdict (transient).
. "$(dirname "$0")/lib.sh"
rx_require_build
PROG=$RESILIX_BUILDDIR/tests/support/recvflags
[ -x "$PROG" ] || rx_fail "not built: $PROG"

rx_upstream_start flags --phases 0:status:500
out=$RX_TMP/shim.out err=$RX_TMP/shim.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_MIN_CALLS=100 RESILIX_WINDOW_CALLS=100 \
	RESILIX_CONSECUTIVE_BACKSTOP=0 "$PROG" --port "$RX_PORT" \
	>"$out" 2>"$err"
rc=$?
rx_assert_eq "recvflags under the shim: exit status" 0 "$rc"
rx_assert_eq "modes run" 13 "$(wc -l <"$out" | tr -d ' ')"

# Pair each mode marker with the settle lines logged before the next.
awk '/recvflags mode=/ { if (f) print f, n, v; f = $2; n = 0; v = ""; next }
	/event=settle/ { n++; for (i = 1; i <= NF; i++)
		if ($i ~ /^(verdict|at)=/) v = v $i "," }
	END { if (f) print f, n, v }' "$err" >"$RX_TMP/pairs"
rx_dump_on_fail "$RX_TMP/pairs"
skipped=$(awk '$2 == "skip" { print "mode=" $1 }' "$out" | paste -sd'|')
[ -n "$skipped" ] && rx_log "NOTE: not supported by this kernel: $skipped"
bad=$(grep -v ' 1 verdict=transient,at=first-byte,$' "$RX_TMP/pairs" |
	grep -Ev "^(${skipped:-none}) " | paste -sd';')
rx_assert_eq "modes not settled once at the first byte as transient" "" "$bad"
rx_pass
