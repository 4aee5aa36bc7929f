#!/bin/bash
# curl_answer_then_error.sh - a libcurl transfer that got its final HTTP
# status and then ended in an error is judged by the status, at its first
# byte (ADR-241; docs/design.md: a call ends at its first response byte).
#
# Each curl process makes 6 transfers; a backstop of 5 consecutive
# failures would refuse the sixth.
# - A stream (200 at once, then a chunk every 100 ms) cut by curl -m 0.4,
#   and a big body read with --limit-rate under -m: exit 28 after a 200,
#   settled as successes with a latency of the first byte, not 0.4 s; no
#   breaker opens. The same with a libcurl program's CURLOPT_TIMEOUT_MS.
# - 500s whose body a libcurl program's write callback refuses
#   (CURLE_WRITE_ERROR): settled as the 500s they are, so the backstop
#   trips.
# - An interim 100 Continue and never a final status, and a redirect
#   followed to a hop that never answers: not an answer. Timeouts, with
#   the latency of the whole transfer, so the backstop trips.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need python3

N=6
guard=(RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=5 RESILIX_OPEN_MS=30000)
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

# latencies FILE: the latency_us of each curl-layer settlement, one line.
latencies() {
	grep 'event=settle ' "$1" | grep ' at=curl' |
		sed -n 's/.* latency_us=\([0-9]*\).*/\1/p' | tr '\n' ' ' |
		sed 's/ $//'
}

# all_below MAX LIST / all_above MIN LIST: every number of LIST is.
all_below() {
	local max=$1 x
	shift
	for x in "$@"; do [ "$x" -lt "$max" ] || return 1; done
}
all_above() {
	local min=$1 x
	shift
	for x in "$@"; do [ "$x" -ge "$min" ] || return 1; done
}

# urls BASE: $N copies of BASE, each with its own -o /dev/null.
urls() {
	local _
	for _ in $(seq 1 $N); do
		printf '%s\n' -o /dev/null "$1"
	done
}

if rx_usable curl; then
	# --- a stream cut by curl's own timeout ------------------------------
	rx_upstream_start s --phases 0:stream:100
	mapfile -t args < <(urls "http://127.0.0.1:$RX_PORT/events")
	rx_shim "${guard[@]}" curl -s -m 0.4 -w '%{http_code} %{exitcode}\n' \
		"${args[@]}" >"$out" 2>"$err"
	rx_assert_eq "stream: 200, then curl's timeout (28)" $N \
		"$(grep -c '^200 28$' "$out")"
	rx_assert_eq "stream: settled as successes at the curl layer" "$N $N" \
		"$(rx_settles "$err" curl) $(grep -c 'event=settle verdict=success .*at=curl' "$err")"
	lat=$(latencies "$err")
	all_below 300000 $lat ||
		rx_fail "stream: latency is not the first byte's: $lat us"
	rx_log "ok: stream: latencies (us, < 300000) = $lat"
	rx_assert_no_grep "stream: no breaker opens" 'event=breaker-transition' "$err"
	rx_upstream_stop s

	# --- a big body read slowly (--limit-rate), cut by -m ---------------
	rx_upstream_start b --phases 0:stream:1:100000
	mapfile -t args < <(urls "http://127.0.0.1:$RX_PORT/big")
	rx_shim "${guard[@]}" curl -s -m 0.4 --limit-rate 2k \
		-w '%{http_code} %{exitcode}\n' "${args[@]}" >"$out" 2>"$err"
	rx_assert_eq "limit-rate: 200, then the timeout (28)" $N \
		"$(grep -c '^200 28$' "$out")"
	rx_assert_eq "limit-rate: settled as successes" $N \
		"$(grep -c 'event=settle verdict=success .*at=curl' "$err")"
	lat=$(latencies "$err")
	all_below 300000 $lat ||
		rx_fail "limit-rate: latency is not the first byte's: $lat us"
	rx_log "ok: limit-rate: latencies (us, < 300000) = $lat"
	rx_upstream_stop b

	# --- 100 Continue, then nothing: not an answer ----------------------
	rx_upstream_start c --phases 0:continue
	mapfile -t args < <(urls "http://127.0.0.1:$RX_PORT/upload")
	rx_shim "${guard[@]}" curl -s -m 0.4 -H 'Expect: 100-continue' \
		-d x=1 -w '%{http_code} %{exitcode}\n' "${args[@]}" \
		>"$out" 2>"$err"
	rx_assert_eq "100 Continue: timeouts, then refused" \
		"100 28,100 28,100 28,100 28,100 28,000 7" "$(paste -sd, "$out")"
	rx_assert_eq "100 Continue: settled as timeouts" 5 \
		"$(grep -c 'event=settle verdict=timeout .*at=curl' "$err")"
	lat=$(latencies "$err")
	all_above 350000 $lat ||
		rx_fail "100 Continue: latency is not the whole transfer's: $lat us"
	rx_log "ok: 100 Continue: latencies (us, >= 350000) = $lat"
	rx_upstream_stop c

	# --- a redirect followed to a hop that never answers ----------------
	rx_upstream_start h --phases 0:hang
	rx_pyup_start r --rule /r=302 --location "http://127.0.0.1:$RX_PORT/x"
	mapfile -t args < <(urls "http://127.0.0.1:$RX_PORT/r")
	rx_shim "${guard[@]}" curl -s -L -m 0.4 \
		-w '%{http_code} %{exitcode}\n' "${args[@]}" >"$out" 2>"$err"
	rx_assert_eq "redirect, then no answer: timeouts, then refused" \
		"302 28,302 28,302 28,302 28,302 28,000 7" "$(paste -sd, "$out")"
	rx_assert_eq "redirect, then no answer: settled as timeouts" 5 \
		"$(grep -c 'event=settle verdict=timeout .*at=curl' "$err")"
	lat=$(latencies "$err")
	all_above 350000 $lat ||
		rx_fail "redirect: latency is not the whole transfer's: $lat us"
	rx_log "ok: redirect: latencies (us, >= 350000) = $lat"
	rx_upstream_stop h
fi

# --- a libcurl program's CURLOPT_TIMEOUT_MS on a stream -------------------
if rx_curl_client_usable; then
	rx_upstream_start p --phases 0:stream:100
	rx_shim "${guard[@]}" "$CURL_CLIENT" --timeout-ms 300 --requests $N \
		"http://127.0.0.1:$RX_PORT/events" >"$out" 2>"$err" ||
		rx_fail "curl_client exit status $?"
	rx_assert_eq "program: 200, then CURLE_OPERATION_TIMEDOUT" $N \
		"$(awk '$3 == 28 && $4 == 200' "$out" | wc -l | tr -d ' ')"
	rx_assert_eq "program: settled as successes" $N \
		"$(grep -c 'event=settle verdict=success .*at=curl' "$err")"
	rx_upstream_stop p

	# --- 500s whose body the program refuses: still 500s ----------------
	rx_upstream_start w --phases 0:status:500
	rx_shim "${guard[@]}" "$CURL_CLIENT" --refuse-body --requests $N \
		"http://127.0.0.1:$RX_PORT/w" >"$out" 2>"$err" ||
		rx_fail "curl_client exit status $?"
	# The refused transfer's status reads 0, as after a failed connect
	# (ADR-597), not the previous transfer's 500.
	rx_assert_eq "write error: CURLE_WRITE_ERROR after a 500, then refused" \
		"23 500,23 500,23 500,23 500,23 500,7 0" \
		"$(awk '{ print $3, $4 }' "$out" | paste -sd, -)"
	rx_assert_eq "write error: settled as the 500s (transient)" 5 \
		"$(grep -c 'event=settle verdict=transient .*at=curl' "$err")"
	rx_upstream_stop w
fi
rx_pass
