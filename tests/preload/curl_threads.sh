#!/bin/bash
# curl_threads.sh - easy handles on 4 threads share one key: the breaker
# trips on their 500s, every thread's later transfers are refused without
# reaching the upstream, and every transfer that reached it was settled
# exactly once, by the curl layer (the per-thread pass-through of the
# socket layer, ADR-152, holds on every thread). With a limit of one call
# at a time, the threads' transfers wait in the limiter's queue (ADR-136)
# or, without queue time, are refused. Run under ThreadSanitizer too
# (TSAN_TESTS).
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
rx_upstream_stop t

# --- the limiter: curl_easy_perform blocks, so where the limiter would
# queue it waits (RESILIX_QUEUE_TIMEOUT_MS), as a blocking socket does;
# with no queue time it is refused at once, with the limiter's reason -
lim=(RESILIX_LOG=debug RESILIX_LIMITER=vegas RESILIX_LIMIT_MIN=1
	RESILIX_LIMIT_MAX=1 RESILIX_LIMIT_INITIAL=1)
rx_upstream_start l --phases 0:slow:100
for qt in 0 5000; do
	out=$RX_TMP/l$qt.out err=$RX_TMP/l$qt.err
	rx_dump_on_fail "$out" "$err"
	before=$(rx_count l)
	rx_shim "${lim[@]}" RESILIX_QUEUE_TIMEOUT_MS=$qt "$CURL_CLIENT" \
		--threads $T --requests 3 --errbuf "http://127.0.0.1:$RX_PORT/l" \
		>"$out" 2>"$err" || rx_fail "curl_client exit status $?"
	ok=$(awk '$3 == 0 && $4 == 200' "$out" | wc -l | tr -d ' ')
	refused=$(awk '$3 == 7' "$out" | wc -l | tr -d ' ')
	rx_assert_eq "queue $qt ms: every transfer answered or refused" \
		$((T * 3)) $((ok + refused))
	rx_assert_eq "queue $qt ms: refusals carry the limiter's line" "$refused" \
		"$(grep -c "resilix: call to 127.0.0.1:$RX_PORT refused (limiter-full)\$" "$out")"
	rx_assert_eq "queue $qt ms: requests upstream = answered" "$ok" \
		$(($(rx_count l) - before))
	rx_assert_eq "queue $qt ms: settlements (at=curl)" "$ok $ok" \
		"$(rx_settles "$err") $(rx_settles "$err" curl)"
	eval "ok_$qt=$ok"
done
rx_assert_le "no queue: one transfer at a time got through" "$ok_0" 4
rx_assert_ge "with a queue: waiting transfers got through" "$ok_5000" 6
rx_pass
