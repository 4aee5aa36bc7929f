#!/bin/bash
# early_ctor.sh - another preloaded library's constructor connects, writes
# and reads before (or after) the shim's constructor ran, in both preload
# orders: its request works, errno is kept, and the program that follows is
# guarded as usual (its calls to a failing upstream trip the breaker).
. "$(dirname "$0")/lib.sh"
rx_require_build
EARLY=$RESILIX_BUILDDIR/tests/support/.libs/libearlyctor.so
[ -f "$EARLY" ] || rx_fail "not built: $EARLY"
if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
	echo "SKIP: $RX_NAME: the preload order is the test; a sanitizer runtime must come first"
	exit 77
fi
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"
rx_upstream_start e --phases 0:status:500
for order in "$EARLY $RESILIX_SO" "$RESILIX_SO $EARLY"; do
	timeout -k 2 "$RX_TIMEOUT" env LD_PRELOAD="$order" RX_EARLY_PORT="$RX_PORT" \
		RESILIX_MIN_CALLS=3 RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_LOG=info \
		"$CLIENT" --port "$RX_PORT" --requests 10 >"$out" 2>"$err" ||
		rx_fail "order '$order': exit status $?"
	rx_assert_eq "order '$order': the constructor's request" \
		"early status=500 errno-kept=1" "$(grep '^early' "$out")"
	rx_assert_ge "order '$order': refused after the trip" \
		"$(grep -c ' ECONNREFUSED 0$' "$out")" 7
	rx_assert_eq "order '$order': transitions" "closed>open" \
		"$(rx_transitions "$err")"
done
rx_pass
