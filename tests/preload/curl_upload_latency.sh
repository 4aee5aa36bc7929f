#!/bin/bash
# curl_upload_latency.sh - a libcurl transfer that sends a body is timed
# to its answer's status line, not to when its body started to go out
# (ADR-662).
#
# Before 8.3.0, libcurl's CURLINFO_STARTTRANSFER_TIME_T for a body sent
# after the request head - a PUT (curl -T), a POST of more than 64 KiB,
# a form - is the moment the body's first byte was sent: 0.2 ms for an
# answer that came 600 ms later, so an upload to a slow upstream was
# never slow and never a timeout. Each curl process here makes 6 such
# transfers to an upstream that answers 600 ms after the body; with
# RESILIX_SLOW_CALL_MS=300 each is settled slow, with a latency of at
# least 500 ms, and the slow-call rate opens the breaker at the fifth.
# A POST whose answer streams (200 at once, then a chunk every 100 ms,
# cut by curl -m) stays timed to its status line: a success, not slow.
# A PUT that never gets a status line is timed to its end (ADR-685).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need python3 head

N=6
guard=(RESILIX_LOG=debug RESILIX_SLOW_CALL_MS=300 RESILIX_MIN_CALLS=5
	RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000)
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"
body=$RX_TMP/body
head -c 200000 /dev/zero >"$body"

# latencies FILE: the latency_us of each curl-layer settlement, one line.
latencies() {
	grep 'event=settle ' "$1" | grep ' at=curl' |
		sed -n 's/.* latency_us=\([0-9]*\).*/\1/p' | tr '\n' ' ' |
		sed 's/ $//'
}

# urls OPT URL: $N transfers of URL, each with OPT and its own -o.
urls() {
	local _
	for _ in $(seq 1 $N); do
		printf '%s\n' -o /dev/null "$@"
	done
}

# transfers NAME PHASES PATH CURL_OPT URL_OPTS...: N transfers with
# URL_OPTS each to a fresh upstream running PHASES, by one curl process.
transfers() {
	local name=$1 phases=$2 path=$3 copt=$4
	shift 4
	rx_upstream_start "$name" --phases "$phases"
	mapfile -t args < <(urls "$@" "http://127.0.0.1:$RX_PORT$path")
	rx_shim "${guard[@]}" curl -s $copt -H 'Expect:' \
		-w '%{http_code} %{exitcode}\n' "${args[@]}" >"$out" 2>"$err"
}

# check_latencies NAME OP BOUND WHAT: every curl-layer latency is OP BOUND.
check_latencies() {
	local lat x
	lat=$(latencies "$err")
	for x in $lat; do
		[ "$x" "$2" "$3" ] ||
			rx_fail "$1: latency is not $4: $lat us"
	done
	rx_log "ok: $1: latencies (us, $2 $3) = $lat"
}

# slow_uploads NAME OPTS...: N transfers sending the body with OPTS.
slow_uploads() {
	local name=$1
	shift
	transfers "$name" 0:slow:600 /up "" "$@"
	rx_assert_eq "$name: answered, then refused" \
		"200 0,200 0,200 0,200 0,200 0,000 7" "$(paste -sd, "$out")"
	check_latencies "$name" -ge 500000 "the answer's"
	rx_assert_eq "$name: the slow-call rate opens the breaker" 1 \
		"$(grep -c 'event=breaker-transition from=closed to=open reason=slow-call-rate' "$err")"
	rx_upstream_stop "$name"
}

if rx_usable curl; then
	slow_uploads put -T "$body"
	slow_uploads post --data-binary "@$body"
	slow_uploads form -F "f=@$body"

	# With no threshold set, nothing reads an upload's latency but the
	# limiter, and libcurl's timer is no answer time: the uploads are
	# judged by their status and give the limiter no sample at all, or
	# one of the answer's time - never a fraction of a millisecond
	# (ADR-685).
	prom=$RX_TMP/m.prom
	rx_upstream_start quiet --phases 0:slow:600
	mapfile -t args < <(urls -T "$body" "http://127.0.0.1:$RX_PORT/up")
	rx_shim RESILIX_METRICS_FILE="$prom" curl -s -H 'Expect:' \
		-w '%{http_code} %{exitcode}\n' "${args[@]}" >"$out" 2>"$err"
	rx_assert_eq "no threshold: all answered" $N "$(grep -c '^200 0$' "$out")"
	under=$(sed -n 's/^resilix_call_latency_seconds_bucket{.*le="0\.25"} \([0-9]*\)$/\1/p' "$prom")
	rx_assert_eq "no threshold: no latency sample under 250 ms" 0 "${under:-missing}"
	rx_upstream_stop quiet

	# An upload that never gets its status line - the upstream reads it
	# and hangs, curl gives up at 1 s - was timed by the callbacks all
	# the same: a timeout of its whole second, slow, and a sample for
	# the limiter, never a call without a duration. Five of them open
	# the breaker; the sixth is refused.
	rx_upstream_start hang --phases 0:hang
	mapfile -t args < <(urls -T "$body" "http://127.0.0.1:$RX_PORT/up")
	rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$RX_TMP/hang.prom" curl -s -m 1 \
		-H 'Expect:' -w '%{http_code} %{exitcode}\n' "${args[@]}" \
		>"$out" 2>"$err"
	rx_assert_eq "no answer: curl's timeout, then refused" \
		"000 28,000 28,000 28,000 28,000 28,000 7" "$(paste -sd, "$out")"
	slow=$(sed -n 's/^resilix_slow_calls_total{.*} \([0-9]*\)$/\1/p' "$RX_TMP/hang.prom")
	rx_assert_eq "no answer: each timeout a slow call" 5 "${slow:-missing}"
	timed=$(sed -n 's/^resilix_call_latency_seconds_count{.*} \([0-9]*\)$/\1/p' "$RX_TMP/hang.prom")
	rx_assert_eq "no answer: each timeout a latency sample" 5 "${timed:-missing}"
	rx_upstream_stop hang

	transfers s 0:stream:100 /events "-m 0.5" --data-binary "@$body"
	rx_assert_eq "streamed answer: 200, then curl's timeout (28)" $N \
		"$(grep -c '^200 28$' "$out")"
	check_latencies "streamed answer" -lt 250000 "the status line's"
	rx_assert_no_grep "streamed answer: no breaker opens" \
		'event=breaker-transition' "$err"
	rx_upstream_stop s
else
	echo "SKIP: $RX_NAME: no usable curl"
	exit 77
fi
rx_pass
