#!/bin/bash
# curl_multi.sh - the multi interface is guarded by the socket layer
# (ADR-151): a libcurl program that drives curl_multi_perform and reads
# CURLMSG_DONE, and `curl -Z`, never call curl_easy_perform; against 500s
# the breaker still trips (by the status line the socket layer reads on
# plain HTTP), later transfers fail as ordinary CURLE_COULDNT_CONNECT
# transfers the program's loop already handles, and each request that
# reached the upstream was settled once, by the socket layer, none by the
# curl layer.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build

MIN=10 N=30
guard=(RESILIX_LOG=debug RESILIX_FAILURE_RATE=0.5 RESILIX_MIN_CALLS=$MIN
	RESILIX_WINDOW_CALLS=20 RESILIX_CONSECUTIVE_BACKSTOP=0
	RESILIX_OPEN_MS=30000)
ran=""

if [ -x "$CURL_CLIENT" ] && rx_curl_client_usable; then
	rx_upstream_start m --phases 0:status:500
	out=$RX_TMP/m.out err=$RX_TMP/m.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$CURL_CLIENT" --mode multi --parallel 2 \
		--requests $N "http://127.0.0.1:$RX_PORT/m" >"$out" 2>"$err" ||
		rx_fail "curl_client exit status $?"
	rx_assert_eq "multi: transfers reported by CURLMSG_DONE" $N \
		"$(wc -l <"$out" | tr -d ' ')"
	answered=$(awk '$3 == 0 && $4 == 500' "$out" | wc -l | tr -d ' ')
	rx_assert_between "multi: answered 500" "$answered" $MIN $((MIN + 1))
	rx_assert_eq "multi: the rest failed to connect (7)" $((N - answered)) \
		"$(awk '$3 == 7' "$out" | wc -l | tr -d ' ')"
	rx_assert_eq "multi: requests upstream" "$answered" "$(rx_count m)"
	rx_assert_eq "multi: settlements (socket layer only)" "$answered 0" \
		"$(rx_settles "$err") $(rx_settles "$err" curl)"
	rx_assert_eq "multi: transitions" "closed>open" "$(rx_transitions "$err")"
	rx_assert_grep "multi: refused at connect" \
		'event=refused reason=circuit-open .*at=connect' "$err"
	rx_upstream_stop m
	ran="$ran libcurl-multi"
fi

if rx_usable curl; then
	rx_upstream_start z --phases 0:status:500
	out=$RX_TMP/z.out err=$RX_TMP/z.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" curl -Z --parallel-max 2 -s -o /dev/null \
		-w '%{http_code} %{exitcode}\n' \
		"http://127.0.0.1:$RX_PORT/z[1-$N]" >"$out" 2>"$err"
	answered=$(grep -c '^500 0$' "$out")
	rx_assert_eq "curl -Z: transfers" $N "$(wc -l <"$out" | tr -d ' ')"
	rx_assert_between "curl -Z: answered 500" "$answered" $MIN $((MIN + 1))
	rx_assert_eq "curl -Z: refused (000, exit 7)" $((N - answered)) \
		"$(grep -c '^000 7$' "$out")"
	rx_assert_eq "curl -Z: requests upstream" "$answered" "$(rx_count z)"
	rx_assert_eq "curl -Z: settlements (socket layer only)" "$answered 0" \
		"$(rx_settles "$err") $(rx_settles "$err" curl)"
	ran="$ran curl-Z"
fi
[ -n "$ran" ] || rx_pass "nothing could run in this build"
rx_pass "ran:$ran"
