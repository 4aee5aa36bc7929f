#!/bin/bash
# shared_criticality.sh - RESILIX_CRITICALITY on a key shared through
# RESILIX_SHARED (ADR-487, ADR-489): two client processes call one
# upstream that serves 4 requests at once (--capacity 4) with the
# limiter held at 8 (RESILIX_LIMIT_MIN = MAX), 12 threads in all, so the
# key is at its limit all the time. Callers are refused rather than
# queued (RESILIX_QUEUE_TIMEOUT_MS=0).
#
#   control   a 4-thread and an 8-thread process, both critical: both are
#             refused, the 4-thread one by a good number too;
#   buckets   the same with the 8-thread process marked bulk: the critical
#             one is guaranteed ceil(8 x 50 %) = 4 calls in flight and is
#             refused at most a tenth as often as the bulk one, which is
#             shed (reason criticality-shed) or meets the full limiter.
# About 8 s.
. "$(dirname "$0")/lib.sh"
rx_require_build

RUN_MS=2500
rx_upstream_start cap --capacity 4 --phases 0:ok:20

# pair LABEL BIG_BUCKET: the two processes at once, on one segment.
pair() {
	local label=$1 big=$2 seg=$RX_TMP/$1.seg
	local small_out=$RX_TMP/$1.small big_out=$RX_TMP/$1.big
	rx_dump_on_fail "$RX_TMP/$1.log"
	rx_shim RESILIX_SHARED="$seg" RESILIX_LIMIT_MIN=8 RESILIX_LIMIT_MAX=8 \
		RESILIX_QUEUE_TIMEOUT_MS=0 RESILIX_LOG=debug \
		RESILIX_LOG_FILE="$RX_TMP/$1.log" RESILIX_CRITICALITY=critical \
		"$CLIENT" --port "$RX_PORT" --threads 4 --requests 100000 \
		--duration-ms $RUN_MS --error-pause-ms 2 >"$small_out" &
	local p1=$!
	rx_shim RESILIX_SHARED="$seg" RESILIX_LIMIT_MIN=8 RESILIX_LIMIT_MAX=8 \
		RESILIX_QUEUE_TIMEOUT_MS=0 RESILIX_LOG=debug \
		RESILIX_LOG_FILE="$RX_TMP/$1.log" RESILIX_CRITICALITY="$big" \
		"$CLIENT" --port "$RX_PORT" --threads 8 --requests 100000 \
		--duration-ms $RUN_MS --error-pause-ms 2 >"$big_out" &
	local p2=$!
	wait $p1 || rx_fail "$label: critical client exit status $?"
	wait $p2 || rx_fail "$label: $big client exit status $?"
	SMALL_OK=$(grep -c ' 200 OK 1$' "$small_out")
	SMALL_REF=$(grep -c ' 0 ECONNREFUSED 0$' "$small_out")
	BIG_OK=$(grep -c ' 200 OK 1$' "$big_out")
	BIG_REF=$(grep -c ' 0 ECONNREFUSED 0$' "$big_out")
	rx_log "$label: critical x4 $SMALL_OK answered $SMALL_REF refused;" \
		"$big x8 $BIG_OK answered $BIG_REF refused"
}

pair control critical
rx_assert_ge "control: the 4-thread process is refused too" "$SMALL_REF" 50
rx_assert_ge "control: the 8-thread process is refused" "$BIG_REF" 50

pair buckets bulk
rx_assert_ge "buckets: bulk is refused" "$BIG_REF" 50
rx_assert_le "buckets: critical refusals x 10 <= bulk's" \
	$((SMALL_REF * 10)) "$BIG_REF"
rx_assert_ge "buckets: critical is answered" "$SMALL_OK" 100
rx_assert_ge "buckets: bulk shed for its bucket (log)" \
	"$(grep -c 'reason=criticality-shed' "$RX_TMP/buckets.log")" 1
rx_assert_eq "control: nothing shed for its bucket (log)" 0 \
	"$(grep -c 'reason=criticality-shed' "$RX_TMP/control.log")"
rx_pass
