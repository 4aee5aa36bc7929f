#!/bin/bash
# breaker_4xx.sh - HTTP 4xx answers (other than 408/429) are the upstream
# doing its job: a flood of 404s, and one of 422s, never trips the breaker,
# however aggressive its settings. Every call reaches the upstream.
. "$(dirname "$0")/lib.sh"
rx_need curl
rx_require_build

N=40
guard=(RESILIX_LOG=info RESILIX_FAILURE_RATE=0.1 RESILIX_MIN_CALLS=3
	RESILIX_WINDOW_CALLS=10 RESILIX_WINDOW_MAX_AGE_MS=60000
	RESILIX_CONSECUTIVE_BACKSTOP=2 RESILIX_SLOW_CALL_MS=1000
	RESILIX_OPEN_MS=30000)

for code in 404 422; do
	rx_upstream_start "s$code" --phases "0:status:$code"

	expect=0
	# curl: one invocation, one kept-alive connection.
	if rx_usable curl; then
		out=$RX_TMP/curl$code.out err=$RX_TMP/curl$code.err
		rx_dump_on_fail "$out" "$err"
		rx_shim "${guard[@]}" curl -s -o /dev/null \
			-w '%{http_code} %{exitcode}\n' \
			"http://127.0.0.1:$RX_PORT/x/[1-$N]" >"$out" 2>"$err"
		rx_assert_eq "curl: transfers answered $code" $N \
			"$(grep -c "^$code 0\$" "$out")"
		rx_assert_eq "curl: no transition on $code" "" \
			"$(rx_transitions "$err")"
		expect=$N
	fi

	# The C client: a new connection per request.
	out=$RX_TMP/client$code.out err=$RX_TMP/client$code.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$CLIENT" --port "$RX_PORT" --requests $N \
		>"$out" 2>"$err" || rx_fail "client exit status $?"
	rx_assert_eq "client: calls answered $code" $N \
		"$(grep -c " $code OK 1\$" "$out")"
	rx_assert_eq "client: no transition on $code" "" \
		"$(rx_transitions "$err")"

	rx_assert_eq "requests that reached the upstream ($code)" $((expect + N)) \
		"$(rx_count "s$code" "$code")"
	rx_upstream_stop "s$code"
done
rx_pass
