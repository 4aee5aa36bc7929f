#!/bin/bash
# limiter_capacity.sh - the adaptive concurrency limiter against an upstream
# that serves CAP requests at once and queues the rest (--capacity), each in
# SERVICE_MS. A 32-thread blocking client, a new connection per request:
#
#   healthy    one thread: the p90 latency H of an upstream that never
#              queues;
#   unguarded  32 threads: every call queues behind the others at the
#              upstream, p90 >= 5 H (32 / CAP = 8 services deep);
#   guarded    the same client under the shim: the limiter finds the
#              capacity from latency alone and sheds the rest
#              (ECONNREFUSED, reason limiter-full), so the calls it admits
#              see p90 <= 3 H, against >= 5 H unguarded. Both measure
#              about 1.9 H here: AIMD's limit settles at 5 to 7 over a
#              capacity of 4, since it backs off only when the window's
#              p90 passes 1.5 x the no-load latency and its median rose
#              too (src/limiter.c), which one queued service at p90
#              does not do; Vegas, the default, tolerates a queue of at
#              most a third of a small limit (ADR-211). 3 H is the margin
#              a loaded machine needs above that.
#
# "Latency of an admitted call" is the shim's own measurement, admission
# to first byte (event=settle latency_us): what the upstream costs. Time a
# blocking caller spends waiting for a slot is the executor's, bounded by
# RESILIX_QUEUE_TIMEOUT_MS (asserted separately: no refusal took longer).
# Both limiters start at the minimum (RESILIX_LIMIT_INITIAL=4): from 20 the
# first window's baseline is measured while the upstream already queues,
# and the baseline probe that corrects it needs about ten windows, longer
# than this test wants to run (tests/unit/test_limiter.c covers
# convergence from above).
#
# Margins for a loaded 2-core machine: H is measured in the same run; the
# bounds sit well above what an idle machine gives (AIMD and Vegas
# ~1.9 H, unguarded ~15 H); refused callers back off 10 ms instead of
# spinning. About 12 s in all.
. "$(dirname "$0")/lib.sh"
rx_require_build

CAP=4
SERVICE_MS=20
THREADS=32
RUN_MS=3500
QUEUE_MS=200

# p90 of the numbers on stdin (nearest rank), 0 when there are none.
p90() {
	sort -n | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print 0; exit }
		i = int(NR * 0.9 + 0.999999); if (i < 1) i = 1; print v[i] }'
}
# The client's latencies (us) of calls answered 200.
ok_lat() { awk '$4 == 200 && $5 == "OK" { print $3 }' "$1"; }
# The shim's latencies (us) of admitted calls that succeeded.
shim_lat() {
	grep 'event=settle verdict=success' "$1" |
		sed -n 's/.*latency_us=\([0-9]*\).*/\1/p'
}

rx_upstream_start cap --capacity $CAP --phases 0:ok:$SERVICE_MS

# --- healthy: one caller, no queueing ----------------------------------------
out=$RX_TMP/healthy.out
rx_dump_on_fail "$out"
rx_plain "$CLIENT" --port "$RX_PORT" --requests 30 >"$out" ||
	rx_fail "client exit status $?"
rx_assert_eq "healthy: calls answered" 30 "$(grep -c ' 200 OK 1$' "$out")"
H=$(ok_lat "$out" | p90)
rx_log "healthy p90: $H us"

# --- unguarded: 32 callers queue at the upstream -----------------------------
out=$RX_TMP/plain.out
rx_dump_on_fail "$out"
rx_plain "$CLIENT" --port "$RX_PORT" --threads $THREADS --requests 100000 \
	--duration-ms $RUN_MS >"$out" || rx_fail "client exit status $?"
U=$(ok_lat "$out" | p90)
rx_assert_eq "unguarded: calls refused" 0 "$(grep -c ECONNREFUSED "$out")"
rx_assert_ge "unguarded p90 (us), >= 5 x healthy $H" "$U" $((5 * H))

# --- guarded -------------------------------------------------------------------
# guarded ALGORITHM MAX_FACTOR: run the 32 threads under the shim and check
# shedding and the p90 of admitted calls.
guarded() {
	local alg=$1 factor=$2 out=$RX_TMP/$1.out log=$RX_TMP/$1.log
	rx_dump_on_fail "$out" "$log"
	rx_shim RESILIX_LOG=debug RESILIX_LOG_FILE="$log" RESILIX_LIMITER="$alg" \
		RESILIX_LIMIT_INITIAL=4 RESILIX_QUEUE_TIMEOUT_MS=$QUEUE_MS \
		"$CLIENT" --port "$RX_PORT" --threads $THREADS --requests 100000 \
		--duration-ms $RUN_MS --error-pause-ms 10 >"$out" ||
		rx_fail "$alg: client exit status $?"
	local ok refused shed g slowest
	ok=$(grep -c ' 200 OK 1$' "$out")
	refused=$(grep -c ' 0 ECONNREFUSED 0$' "$out")
	shed=$(grep -c 'event=refused reason=limiter-full' "$log")
	rx_log "$alg: $ok answered, $refused refused, limits:" \
		"$(sed -n 's/.*event=limit-change limit=\([0-9]*\).*/\1/p' "$log" |
			paste -sd' ')"
	rx_assert_ge "$alg: calls answered" "$ok" 100
	rx_assert_ge "$alg: calls shed with ECONNREFUSED" "$refused" 1
	rx_assert_eq "$alg: every refusal is the limiter's (log)" "$refused" "$shed"
	rx_assert_eq "$alg: calls that failed otherwise" 0 \
		"$(grep -vc -e ' 200 OK 1$' -e ' 0 ECONNREFUSED 0$' "$out")"
	rx_assert_ge "$alg: callers that waited for a slot, then went" \
		"$(grep -c 'event=admitted-after-wait' "$log")" 1
	g=$(shim_lat "$log" | p90)
	rx_assert_le "$alg: p90 of admitted calls (us), <= $factor x healthy $H" \
		"$g" $((factor * H))
	# A refusal never waits longer than the queue timeout (+ scheduling).
	slowest=$(awk '$5 == "ECONNREFUSED" { if ($3 > m) m = $3 }
		END { print m + 0 }' "$out")
	rx_assert_le "$alg: slowest refusal (us)" "$slowest" \
		$(((QUEUE_MS + 150) * 1000))
}

guarded aimd 3
guarded vegas 3
rx_pass
