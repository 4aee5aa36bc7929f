#!/bin/bash
# breaker_keepalive.sh - on a kept-alive connection a call starts at the
# first write of a new request. Once the circuit is open, that write
# returns -1/ECONNREFUSED without sending a byte: the upstream accepted one
# connection, served MIN_CALLS requests on it, and never saw a partial one.
. "$(dirname "$0")/lib.sh"
rx_require_build

MIN=5
N=20
rx_upstream_start ka --phases 0:status:500
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err" "$(rx_upconn ka)"
rx_shim RESILIX_LOG=info RESILIX_FAILURE_RATE=0.5 RESILIX_MIN_CALLS=$MIN \
	RESILIX_WINDOW_CALLS=10 RESILIX_WINDOW_MAX_AGE_MS=60000 \
	RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000 \
	"$CLIENT" --port "$RX_PORT" --keepalive --requests $N \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
# Let the upstream notice the client's close.
rx_wait_for 3 grep -q ' close ' "$(rx_upconn ka)"

rx_assert_eq "requests answered 500 on the kept-alive connection" "$MIN" \
	"$(head -n "$MIN" "$out" | grep -c ' 500 OK 1$')"
rx_assert_eq "the first write after the trip: -1/ECONNREFUSED, nothing sent" \
	"0 ECONNREFUSED 0" "$(sed -n "$((MIN + 1))p" "$out" | cut -d' ' -f4-)"
rx_assert_eq "every later call refused (reconnects included)" $((N - MIN)) \
	"$(grep -c ' 0 ECONNREFUSED 0$' "$out")"
rx_assert_eq "requests that reached the upstream" "$MIN" "$(rx_count ka)"
rx_assert_eq "connections the upstream accepted" 1 "$(rx_accepts ka)"
rx_assert_eq "bytes of a partial request the upstream received" 0 \
	"$(awk '$2 == "close" { s += $4 } END { print s + 0 }' "$(rx_upconn ka)")"
rx_assert_eq "transitions logged by the shim" "closed>open" \
	"$(rx_transitions "$err")"

# The same through curl: one invocation, one connection, then fast failures.
if command -v curl >/dev/null 2>&1 && rx_usable curl; then
	rx_upstream_start kacurl --phases 0:status:500
	out=$RX_TMP/curl.out err=$RX_TMP/curl.err
	rx_dump_on_fail "$out" "$err" "$(rx_upconn kacurl)"
	rx_shim RESILIX_LOG=info RESILIX_FAILURE_RATE=0.5 \
		RESILIX_MIN_CALLS=$MIN RESILIX_WINDOW_CALLS=10 \
		RESILIX_WINDOW_MAX_AGE_MS=60000 RESILIX_CONSECUTIVE_BACKSTOP=0 \
		RESILIX_OPEN_MS=30000 curl -s -o /dev/null \
		-w '%{http_code} %{exitcode} %{num_connects}\n' \
		"http://127.0.0.1:$RX_PORT/k/[1-$N]" >"$out" 2>"$err"
	rx_wait_for 3 grep -q ' close ' "$(rx_upconn kacurl)"
	rx_assert_eq "curl: transfers answered 500" "$MIN" \
		"$(grep -c '^500 0 ' "$out")"
	rx_assert_eq "curl: transfers failed fast" $((N - MIN)) \
		"$(grep -c '^000 7 ' "$out")"
	rx_assert_eq "curl: requests that reached the upstream" "$MIN" \
		"$(rx_count kacurl)"
	rx_assert_eq "curl: connections the upstream accepted" 1 \
		"$(rx_accepts kacurl)"
	rx_assert_eq "curl: bytes of a partial request received" 0 \
		"$(awk '$2 == "close" { s += $4 } END { print s + 0 }' "$(rx_upconn kacurl)")"
elif ! command -v curl >/dev/null 2>&1; then
	rx_log "NOTE: curl is not installed: the curl half is skipped"
fi
rx_pass
