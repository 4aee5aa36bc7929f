#!/bin/bash
# curl_threads.sh - easy handles on 4 threads share one key: the breaker
# trips on their 500s, every thread's later transfers are refused without
# reaching the upstream, and every transfer that reached it was settled
# exactly once, by the curl layer (the per-thread pass-through of the
# socket layer, ADR-152, holds on every thread). Run under ThreadSanitizer
# too (TSAN_TESTS).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need_curl_client
rx_curl_client_usable || rx_pass "nothing to run in this build"

T=4 PER=25 MIN=10
rx_upstream_start t --phases 0:status:500
out=$RX_TMP/t.out err=$RX_TMP/t.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_FAILURE_RATE=0.5 RESILIX_MIN_CALLS=$MIN \
	RESILIX_WINDOW_CALLS=20 RESILIX_CONSECUTIVE_BACKSTOP=0 \
	RESILIX_OPEN_MS=30000 RESILIX_LIMITER=off \
	"$CURL_CLIENT" --threads $T --requests $PER --errbuf --fresh \
	"http://127.0.0.1:$RX_PORT/t" >"$out" 2>"$err" ||
	rx_fail "curl_client exit status $?"
rx_assert_eq "transfers" $((T * PER)) "$(wc -l <"$out" | tr -d ' ')"
rx_assert_eq "threads that finished" $T "$(awk '{ print $1 }' "$out" | sort -u | wc -l | tr -d ' ')"
answered=$(awk '$3 == 0 && $4 == 500' "$out" | wc -l | tr -d ' ')
refused=$(awk '$3 == 7' "$out" | wc -l | tr -d ' ')
# Up to T-1 transfers may be in flight when the breaker trips.
rx_assert_between "transfers answered 500" "$answered" $MIN $((MIN + T - 1))
rx_assert_eq "the rest were refused" $((T * PER - answered)) "$refused"
rx_assert_eq "refusals carry the error buffer line" "$refused" \
	"$(grep -c 'resilix: circuit open for 127.0.0.1:' "$out")"
rx_assert_eq "requests upstream = answered transfers" "$answered" "$(rx_count t)"
rx_assert_eq "settlements (all, at=curl) = requests upstream" \
	"$answered $answered" "$(rx_settles "$err") $(rx_settles "$err" curl)"
rx_assert_eq "one trip" 1 "$(rx_count_to open "$err")"
rx_pass
