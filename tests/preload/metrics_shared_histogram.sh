#!/bin/bash
# metrics_shared_histogram.sh - with a shared segment (RESILIX_SHARED) the
# guard counts every process's calls, and each process's latency
# histogram only its own (ADR-486, ADR-521): two processes calling one key
# at the same time, each with its own metrics file, end with histograms
# that hold exactly their own calls - not reset whenever the other one
# settled a call, as the summary's estimators were - while the host-wide
# counters hold both. Also the histogram's shape: cumulative buckets,
# +Inf = _count, and the two files' buckets add up to the key's calls.
. "$(dirname "$0")/lib.sh"
rx_require_build

rx_upstream_start up --phases 0:ok:1
guard=(RESILIX_SHARED="$RX_TMP/seg" RESILIX_METRICS_INTERVAL_MS=0)
rx_dump_on_fail "$RX_TMP/a.prom" "$RX_TMP/b.prom"
rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$RX_TMP/a.prom" "$CLIENT" \
	--port "$RX_PORT" --requests 40 --interval-ms 10 >/dev/null 2>&1 &
a=$!
rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$RX_TMP/b.prom" "$CLIENT" \
	--port "$RX_PORT" --requests 20 --interval-ms 10 >/dev/null 2>&1 ||
	rx_fail "second client: exit status $?"
wait "$a" || rx_fail "first client: exit status $?"
rx_assert_eq "requests answered" 60 "$(rx_count up 200)"
key="127\\.0\\.0\\.1:$RX_PORT"
sample() { # FILE NAME-AND-LABELS-REGEX: the value
	sed -n "s/^$2 \\([0-9.]*\\)\$/\\1/p" "$1"
}
for f in a:40 b:20; do
	file=$RX_TMP/${f%%:*}.prom n=${f#*:}
	[ -s "$file" ] || rx_fail "no metrics file ${f%%:*}.prom"
	rx_assert_eq "${f%%:*}: its own calls in _count" "$n" \
		"$(sample "$file" "resilix_call_latency_seconds_count{key=\"$key\"}")"
	rx_assert_eq "${f%%:*}: and in the +Inf bucket" "$n" \
		"$(sample "$file" "resilix_call_latency_seconds_bucket{key=\"$key\",le=\"+Inf\"}")"
	rx_assert_eq "${f%%:*}: 21 buckets, cumulative" "21 yes" \
		"$(grep "^resilix_call_latency_seconds_bucket{key=\"$key\"," "$file" |
			awk '{ if (NR > 1 && $2 < last) bad = 1; last = $2 }
			     END { print NR, bad ? "no" : "yes" }')"
done
# The segment's counters are host-wide: the last file to be written
# counts both processes' calls (ADR-486).
rx_assert_eq "host-wide success count, in one of the files" 60 \
	"$(cat "$RX_TMP/a.prom" "$RX_TMP/b.prom" |
		sed -n "s/^resilix_calls_total{key=\"$key\",verdict=\"success\"} //p" |
		sort -n | tail -n1)"
rx_pass
