#!/bin/bash
# log_rate.sh - a flapping upstream cannot flood the host's stderr
# (ADR-165): with the breaker reopening every millisecond against a dead
# port, thousands of transitions happen in a second, but the shim writes at
# most the burst (50) plus 20 lines a second, then says how many lines it
# suppressed; written plus suppressed lines cover every transition the
# breaker counted (from the metrics file), so nothing is lost silently.
. "$(dirname "$0")/lib.sh"
rx_require_build

port=$(rx_free_port)
prom=$RX_TMP/m.prom
err=$RX_TMP/client.err out=$RX_TMP/client.out
rx_dump_on_fail "$err"
t0=$(rx_now_ms)
rx_shim RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=1 RESILIX_OPEN_MS=1 \
	RESILIX_METRICS_FILE="$prom" "$CLIENT" --port "$port" \
	--requests 1000000 --duration-ms 1500 >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
elapsed_ms=$(($(rx_now_ms) - t0))
calls=$(wc -l <"$out" | tr -d ' ')
rx_log "$calls calls in $elapsed_ms ms"

transitions=$(sed -n 's/^resilix_breaker_transitions_total{[^}]*} //p' "$prom")
written=$(grep -c 'event=breaker-transition' "$err")
suppressed=$(sed -n 's/.*event=log-suppressed lines=\([0-9]*\).*/\1/p' "$err" |
	awk '{ s += $1 } END { print s + 0 }')
other=$(grep -v 'event=breaker-transition\|event=log-suppressed' "$err" |
	grep -c 'event=')
rx_log "transitions $transitions: written $written, suppressed $suppressed," \
	"other lines $other"
rx_assert_ge "transitions (the upstream flapped)" "$transitions" 150
# 50 at once, then 20 a second; one second of slack for start-up and exit.
bound=$((50 + 20 * (elapsed_ms / 1000 + 1)))
summaries=$(grep -c 'event=log-suppressed' "$err")
rx_assert_le "lines written, summaries included" \
	"$((written + other + summaries))" "$bound"
rx_assert_ge "summaries of the suppressed lines" "$summaries" 1
rx_assert_ge "transition lines still get through after the burst" \
	"$written" 53
# Every transition was either written or counted as suppressed.
rx_assert_ge "lines written + suppressed" "$((written + other + suppressed))" \
	"$transitions"
rx_pass
