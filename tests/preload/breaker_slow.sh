#!/bin/bash
# breaker_slow.sh - an upstream that answers 200 but slowly (300 ms) trips
# the breaker on the slow-call rate when RESILIX_SLOW_CALL_MS=100; the same
# settings against a fast upstream never trip, and without
# RESILIX_SLOW_CALL_MS the slow condition is off (ADR-006).
#
# Failures cannot trip here (every answer is a 200) and the backstop is
# off, so only the slow-call condition can open the circuit: after exactly
# MIN_CALLS slow calls.
. "$(dirname "$0")/lib.sh"
rx_need curl
rx_require_build

MIN=5
N=15
guard=(RESILIX_LOG=info RESILIX_SLOW_CALL_RATE=0.5 RESILIX_MIN_CALLS=$MIN
	RESILIX_WINDOW_CALLS=10 RESILIX_WINDOW_MAX_AGE_MS=60000
	RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000)

# --- C client, a new connection per request ---------------------------------
rx_upstream_start slow --phases 0:slow:300
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err"
rx_shim "${guard[@]}" RESILIX_SLOW_CALL_MS=100 \
	"$CLIENT" --port "$RX_PORT" --requests $N >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
rx_assert_eq "slow calls answered 200" "$MIN" "$(grep -c ' 200 OK 1$' "$out")"
rx_assert_eq "calls failed fast after the trip" $((N - MIN)) \
	"$(grep -c ' 0 ECONNREFUSED 0$' "$out")"
rx_assert_eq "requests that reached the upstream" "$MIN" "$(rx_count slow)"
rx_assert_eq "transitions logged by the shim" "closed>open" \
	"$(rx_transitions "$err")"
rx_assert_grep "trip reason is the slow-call rate" 'to=open .*reason=slow' \
	"$err"
slowest=$(awk '$5 == "ECONNREFUSED" { if ($3 > m) m = $3 } END { print m + 0 }' "$out")
rx_assert_le "slowest refused call (us)" "$slowest" 50000

# --- curl, kept-alive connection: the same -----------------------------------
if rx_usable curl; then
	out=$RX_TMP/curl.out err=$RX_TMP/curl.err
	rx_dump_on_fail "$out" "$err"
	before=$(rx_count slow)
	rx_shim "${guard[@]}" RESILIX_SLOW_CALL_MS=100 curl -s -o /dev/null \
		-w '%{http_code} %{exitcode}\n' "http://127.0.0.1:$RX_PORT/c/[1-$N]" \
		>"$out" 2>"$err"
	rx_assert_eq "curl: slow transfers answered 200" "$MIN" \
		"$(grep -c '^200 0$' "$out")"
	rx_assert_eq "curl: transfers failed fast after the trip" $((N - MIN)) \
		"$(grep -c '^000 7$' "$out")"
	rx_assert_eq "curl: requests that reached the upstream" "$MIN" \
		$(($(rx_count slow) - before))
	rx_assert_grep "curl: trip reason is the slow-call rate" \
		'to=open .*reason=slow' "$err"
fi
rx_upstream_stop slow

# --- control: the same settings against a fast upstream never trip ----------
rx_upstream_start fast --phases 0:ok:5
out=$RX_TMP/fast.out err=$RX_TMP/fast.err
rx_dump_on_fail "$out" "$err"
rx_shim "${guard[@]}" RESILIX_SLOW_CALL_MS=100 \
	"$CLIENT" --port "$RX_PORT" --requests $N >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
rx_assert_eq "fast upstream: calls answered 200" $N "$(grep -c ' 200 OK 1$' "$out")"
rx_assert_eq "fast upstream: no transition" "" "$(rx_transitions "$err")"
rx_upstream_stop fast

# --- without RESILIX_SLOW_CALL_MS the slow condition is off ------------------
rx_upstream_start nothreshold --phases 0:slow:150
out=$RX_TMP/nothreshold.out err=$RX_TMP/nothreshold.err
rx_dump_on_fail "$out" "$err"
rx_shim "${guard[@]}" "$CLIENT" --port "$RX_PORT" --requests 10 \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
rx_assert_eq "no threshold: calls answered 200" 10 \
	"$(grep -c ' 200 OK 1$' "$out")"
rx_assert_eq "no threshold: requests that reached the upstream" 10 \
	"$(rx_count nothreshold)"
rx_assert_eq "no threshold: no transition" "" "$(rx_transitions "$err")"
rx_pass
