#!/bin/bash
# breaker_dead_upstream.sh - a dead upstream at low traffic (10 calls/s,
# far below any window's min calls) trips on the consecutive-failure
# backstop. While the circuit is open, connect() fails fast with
# ECONNREFUSED without reaching the network. The proof: a listener starts on
# the very port while the circuit is open, and accepts no connection until
# the open time has passed; then the probe reaches it and the calls succeed.
#
# Timeline of one guarded process (client or curl), 10 calls/s:
#   0..200 ms     three real refusals (nothing listens) -> backstop trips
#   ~700 ms       the upstream starts listening on the port
#   until ~3200   calls fail fast; the upstream accepts nothing
#   ~3200 ms      open time over: the probe connects -> closed -> 200s
. "$(dirname "$0")/lib.sh"
rx_need curl
rx_require_build

BACKSTOP=3
OPEN=3000
guard=(RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=$BACKSTOP
	RESILIX_MIN_CALLS=100 RESILIX_WINDOW_CALLS=200
	RESILIX_WINDOW_MAX_AGE_MS=60000 RESILIX_OPEN_MS=$OPEN)

# run_case NAME COMMAND...: runs the guarded COMMAND (it gets the port as
# $PORT in its arguments already) in background, starts the upstream once
# the shim logged the trip, and waits for COMMAND to finish.
run_case() {
	local name=$1 pid t_start t_open t_up
	shift
	out=$RX_TMP/$name.out err=$RX_TMP/$name.err
	rx_dump_on_fail "$out" "$err"
	t_start=$(rx_now_ms)
	rx_shim "${guard[@]}" "$@" >"$out" 2>"$err" &
	pid=$!
	rx_wait_for 5 grep -q 'event=breaker-transition.* to=open' "$err" ||
		rx_fail "$name: no trip logged within 5 s"
	t_open=$(rx_now_ms)
	sleep 0.5
	rx_upstream_start "$name" --port "$PORT" --phases 0:ok:0
	t_up=$RX_UP_T0
	wait "$pid" || rx_fail "$name: guarded program exit status $?"
	t_done=$(rx_now_ms)
	OPEN_AT=$((t_open - t_start)) UP_AT=$((t_up - t_start))
	rx_log "$name: trip logged at ~$OPEN_AT ms, upstream listening at ~$UP_AT ms"
	rx_assert_le "$name: upstream started while the circuit was open (ms)" \
		$((UP_AT - OPEN_AT)) $((OPEN - 1500))
	# First connection the upstream accepted, on the guarded program's clock.
	first=$(awk '$2 == "accept" { print $1; exit }' "$(rx_upconn "$name")")
	[ -n "$first" ] || rx_fail "$name: the probe never reached the upstream"
	FIRST_AT=$((first + UP_AT))
	rx_assert_ge "$name: first accept (ms after the trip, >= open time - 300)" \
		$((FIRST_AT - OPEN_AT)) $((OPEN - 300))
	rx_assert_eq "$name: transitions" \
		"closed>open open>half-open half-open>closed" \
		"$(rx_transitions "$err" | sed 's/half_open/half-open/g' | paste -sd' ')"
	rx_assert_grep "$name: trip reason is the backstop" \
		'to=open .*reason=(consecutive|backstop)' "$err"
}

PORT=$(rx_free_port)
rx_log "dead port: $PORT"

# --- the C client: one call every 100 ms -------------------------------------
run_case client "$CLIENT" --port "$PORT" --requests 45 --interval-ms 100
rx_assert_eq "client: the first $BACKSTOP calls were real refusals" \
	"$BACKSTOP" "$(head -n $BACKSTOP "$out" | grep -c ' ECONNREFUSED 0$')"
# Calls made while the listener was up but the circuit open: refused fast.
# The margins absorb the skew between the shell's clock reading of the
# upstream's start and the upstream's own (hundreds of ms on a loaded
# machine), so the probe never falls inside the window.
fast=$(awk -v a=$((UP_AT + 300)) -v b=$((FIRST_AT - 500)) \
	'$2 >= a && $2 < b' "$out")
nfast=$(printf '%s\n' "$fast" | grep -c ' 0 ECONNREFUSED 0$')
rx_assert_ge "client: calls refused while the listener was up" "$nfast" 10
rx_assert_eq "client: ...and none of them did anything else" "$nfast" \
	"$(printf '%s\n' "$fast" | grep -c .)"
slowest=$(awk '$5 == "ECONNREFUSED" { if ($3 > m) m = $3 } END { print m + 0 }' "$out")
rx_assert_le "client: slowest refused call (us)" "$slowest" 50000
rx_assert_ge "client: calls that succeeded after the probe" \
	"$(grep -c ' 200 OK 1$' "$out")" 5
rx_assert_eq "client: every success reached the upstream" \
	"$(grep -c ' 200 OK 1$' "$out")" "$(rx_count client 200)"
rx_upstream_stop client

# --- curl: 45 URLs in one invocation, paced at 10/s --------------------------
if rx_usable curl; then
	PORT=$(rx_free_port)
	run_case curl curl -s -o /dev/null -w '%{http_code} %{exitcode}\n' \
		--rate 10/s "http://127.0.0.1:$PORT/[1-45]"
	rx_assert_eq "curl: transfers" 45 "$(wc -l <"$out" | tr -d ' ')"
	nfail=$(grep -c '^000 7$' "$out")
	# About 32 transfers fall before the probe; 10 of them happen while the
	# listener is up. Count loosely: curl's pacing is not exact.
	rx_assert_ge "curl: transfers that failed to connect" "$nfail" 20
	rx_assert_ge "curl: transfers answered 200 after the probe" \
		"$(grep -c '^200 0$' "$out")" 5
	rx_assert_eq "curl: the 200s are the last transfers" \
		"$(grep -c '^200 0$' "$out")" \
		"$(tac "$out" | awk '$0 != "200 0" { exit } { n++ } END { print n + 0 }')"
	rx_assert_eq "curl: every success reached the upstream" \
		"$(grep -c '^200 0$' "$out")" "$(rx_count curl 200)"
	rx_upstream_stop curl
fi
rx_pass
