#!/bin/bash
# shared_kill_storm.sh - a process killed at any instant never wedges the
# others (ADR-482, ADR-483): 8 processes call one key through a shared
# segment, 100 SIGKILLs land on them at random (inside critical sections,
# with calls in flight, in the limiter's queue), each victim replaced at
# once. Afterwards a fresh process is admitted at once, and once its call
# settled the key's calls in flight are back to 0 (its metrics file).
. "$(dirname "$0")/lib.sh"
rx_require_build

rx_upstream_start up --phases 0:ok:5
PORT=$RX_PORT
SEG=$RX_TMP/seg
guard=(RESILIX_SHARED="$SEG" RESILIX_LIMIT_INITIAL=4 RESILIX_LIMIT_MIN=4
	RESILIX_LIMIT_MAX=4 RESILIX_QUEUE_TIMEOUT_MS=200 RESILIX_MIN_CALLS=100000
	RESILIX_CONSECUTIVE_BACKSTOP=0)
# start_worker I: a guarded client in the background; VICTIM[I] is the
# client itself (under timeout and a subshell: found by its executable).
start_worker() {
	local d n
	rx_shim "${guard[@]}" "$CLIENT" --port "$PORT" --threads 2 \
		--requests 100000 --duration-ms 20000 >/dev/null 2>&1 &
	VICTIM[$1]=""
	for n in $(seq 200); do
		rx_descendants $!
		for d in ${RX_DESC[@]+"${RX_DESC[@]}"}; do
			if [ "$(readlink "/proc/$d/exe" 2>/dev/null)" = "$(readlink -f "$CLIENT")" ]; then
				VICTIM[$1]=$d
				return
			fi
		done
		sleep 0.01
	done
}
VICTIM=()
for i in $(seq 8); do start_worker "$i"; done
sleep 0.5
kills=0
while [ $kills -lt 100 ]; do
	i=$((RANDOM % 8 + 1))
	[ -n "${VICTIM[$i]}" ] && kill -KILL "${VICTIM[$i]}" 2>/dev/null
	start_worker "$i"
	kills=$((kills + 1))
	sleep 0.0$((RANDOM % 5))
done
for i in $(seq 8); do
	[ -n "${VICTIM[$i]}" ] && kill -KILL "${VICTIM[$i]}" 2>/dev/null
done
# And any worker whose client start_worker did not find in time (a slow
# start): no guarded client of this test may live on into the check.
for n in $(seq 50); do
	left=0
	rx_descendants $$
	for d in ${RX_DESC[@]+"${RX_DESC[@]}"}; do
		if [ "$(readlink "/proc/$d/exe" 2>/dev/null)" = "$(readlink -f "$CLIENT")" ]; then
			kill -KILL "$d" 2>/dev/null
			VICTIM[9]=$d
			left=1
		fi
	done
	[ $left = 0 ] && break
	sleep 0.1
done
# SIGKILL is asynchronous: let the last victims die.
for i in $(seq 9); do
	[ -n "${VICTIM[$i]:-}" ] || continue
	rx_wait_for 5 sh -c "! kill -0 ${VICTIM[$i]} 2>/dev/null || grep -q '^State:.*Z' /proc/${VICTIM[$i]}/status"
done
rx_log "$kills SIGKILLs delivered"

out=$RX_TMP/fresh.out
err=$RX_TMP/fresh.err
rx_dump_on_fail "$out" "$err" "$RX_TMP/m.prom"
t0=$(rx_now_ms)
rx_shim "${guard[@]}" RESILIX_LOG=debug RESILIX_METRICS_FILE="$RX_TMP/m.prom" \
	RESILIX_METRICS_INTERVAL_MS=0 "$CLIENT" --port "$PORT" --requests 1 \
	>"$out" 2>"$err" || rx_fail "fresh client failed"
t1=$(rx_now_ms)
rx_assert_eq "fresh process: its call succeeded" 1 "$(grep -c ' 200 OK ' "$out")"
rx_assert_no_grep "fresh process: admitted at once, no wait" \
	'admitted-after-wait|event=refused' "$err"
rx_assert_le "fresh process: done within (ms)" $((t1 - t0)) 3000
rx_assert_eq "calls in flight on the key afterwards" 0 \
	"$(awk '/^resilix_calls_in_flight\{/ {print $2}' "$RX_TMP/m.prom")"
rx_assert_eq "limiter calls in flight afterwards" 0 \
	"$(awk '/^resilix_limiter_in_flight_calls\{/ {print $2}' "$RX_TMP/m.prom")"
rx_pass
