#!/bin/bash
# keepalive_fast.sh - the kept-alive cycle's fast path (ADR-531) decides
# as the general steps do. Without a log level that hooks settlements the
# shim admits and settles a kept-alive HTTP call in one pass each; with
# RESILIX_LOG=info every call takes call.c's steps. The same program
# against the same upstream must see the same outcomes either way: 5xx
# answers and slow answers open the circuit after MIN calls, and the first
# write after that is refused with nothing sent; a healthy run is never
# refused and stays on one connection.
. "$(dirname "$0")/lib.sh"
rx_require_build

MIN=5
N=20
# run NAME PHASES LOG [VAR=value...]: N kept-alive requests of the C
# client; its outcome columns (status, errno, answered) in $RX_TMP/NAME.
run() {
	local name=$1 phases=$2 log=$3
	shift 3
	rx_upstream_start "$name" --phases "$phases"
	rx_dump_on_fail "$RX_TMP/$name.out" "$RX_TMP/$name.err" \
		"$(rx_upconn "$name")"
	rx_shim RESILIX_LOG="$log" RESILIX_MIN_CALLS=$MIN \
		RESILIX_WINDOW_CALLS=10 RESILIX_WINDOW_MAX_AGE_MS=60000 \
		RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000 "$@" \
		"$CLIENT" --port "$RX_PORT" --keepalive --requests $N \
		>"$RX_TMP/$name.out" 2>"$RX_TMP/$name.err" ||
		rx_fail "$name: client exit status $?"
	rx_wait_for 3 grep -q ' close ' "$(rx_upconn "$name")"
	cut -d' ' -f4- "$RX_TMP/$name.out" >"$RX_TMP/$name"
}

for kind in fail slow; do
	if [ $kind = fail ]; then
		phases=0:status:500 set=(RESILIX_FAILURE_RATE=0.5)
		answered="500 OK 1"
	else
		phases=0:slow:40 answered="200 OK 1"
		set=(RESILIX_SLOW_CALL_MS=10 RESILIX_SLOW_CALL_RATE=0.5)
	fi
	run $kind-fast "$phases" warn "${set[@]}"
	run $kind-general "$phases" info "${set[@]}"
	for path in fast general; do
		name=$kind-$path
		rx_assert_eq "$name: answered on the kept-alive connection" \
			"$MIN" "$(head -n "$MIN" "$RX_TMP/$name" |
				grep -c "^$answered\$")"
		rx_assert_eq "$name: every later call refused, nothing sent" \
			$((N - MIN)) "$(grep -c '^0 ECONNREFUSED 0$' "$RX_TMP/$name")"
		rx_assert_eq "$name: requests that reached the upstream" "$MIN" \
			"$(rx_count "$name")"
		rx_assert_eq "$name: connections accepted" 1 \
			"$(rx_accepts "$name")"
		rx_assert_eq "$name: bytes of a partial request received" 0 \
			"$(awk '$2 == "close" { s += $4 } END { print s + 0 }' \
				"$(rx_upconn "$name")")"
	done
	rx_assert_eq "$kind: the same outcomes on both paths" \
		"$(cat "$RX_TMP/$kind-general")" "$(cat "$RX_TMP/$kind-fast")"
done

# Healthy: never refused, one connection, every answer counted.
N=200
run healthy 0:ok warn
rx_assert_eq "healthy: answered" $N "$(grep -c '^200 OK 1$' "$RX_TMP/healthy")"
rx_assert_eq "healthy: reached the upstream" $N "$(rx_count healthy)"
rx_assert_eq "healthy: connections accepted" 1 "$(rx_accepts healthy)"
rx_pass
