#!/bin/bash
# rate_paced.sh - RESILIX_RATE=50/s paces a blocking program instead of
# failing it (ADR-464): a loop that sends as fast as it can for 2 s on a
# kept-alive connection gets every call answered, and the upstream sees at
# most 2 x 50 + the burst (one second's worth, 50) requests. A
# non-blocking caller is refused rate-limited, with a retry-after, and the
# refusals are counted by reason in the metrics file.
. "$(dirname "$0")/lib.sh"
rx_require_build

rx_upstream_start rate --phases 0:ok:0
out=$RX_TMP/client.out log=$RX_TMP/shim.log
rx_dump_on_fail "$out" "$log"
t0=$(rx_now_ms)
rx_shim RESILIX_RATE=50/s RESILIX_LOG=debug RESILIX_LOG_FILE="$log" \
	"$CLIENT" --port "$RX_PORT" --keepalive --requests 100000 \
	--duration-ms 2000 >"$out" || rx_fail "client exit status $?"
elapsed=$(($(rx_now_ms) - t0))
calls=$(wc -l <"$out")
seen=$(rx_count rate)
rx_assert_eq "every call answered" "$calls" "$(grep -c ' 200 OK 1$' "$out")"
rx_assert_le "requests the upstream saw (2 x 50 + burst 50)" "$seen" 150
rx_assert_ge "requests the upstream saw (paced, not starved)" "$seen" 120
rx_assert_eq "no refusal" 0 "$(grep -c 'event=refused' "$log")"
rx_assert_ge "calls paced (waited for a token)" \
	"$(grep -c 'event=admitted-after-wait' "$log")" 60

# The same rate over new connections, 4 threads: paced at connect.
rx_shim RESILIX_RATE=50/s RESILIX_RATE_BURST=10 "$CLIENT" --port "$RX_PORT" \
	--threads 4 --requests 100000 --duration-ms 1000 >"$out.conn" ||
	rx_fail "client exit status $?"
conn=$(wc -l <"$out.conn")
rx_assert_eq "new connections: every call answered" "$conn" \
	"$(grep -c ' 200 OK 1$' "$out.conn")"
rx_assert_le "new connections: calls in 1 s (50 + burst 10, + one per thread in flight)" \
	"$conn" 64

# First come, first served (ADR-383): 3/s with a burst of 1, 2 blocking
# threads over new connections. In arrival order a caller waits at most
# its peer's token and its own (0.67 s), under the 1 s queue timeout: none
# is refused. Without places
# in line the thread that had just been served could take the token its
# peer was woken for, and the peer was refused at 1 s.
flog=$RX_TMP/fifo.log
rx_dump_on_fail "$flog"
rx_shim RESILIX_RATE=3/s RESILIX_RATE_BURST=1 RESILIX_LOG=debug \
	RESILIX_LOG_FILE="$flog" "$CLIENT" --port "$RX_PORT" --threads 2 \
	--requests 6 >"$out.fifo" || rx_fail "client exit status $?"
rx_assert_eq "in line: no refusal" 0 "$(grep -c 'event=refused' "$flog")"
rx_assert_eq "in line: every call answered" 12 "$(grep -c ' 200 OK 1$' "$out.fifo")"
longest=$(sed -n 's/.*event=admitted-after-wait waited_ms=\([0-9]*\).*/\1/p' \
	"$flog" | sort -n | tail -n1)
rx_assert_le "in line: longest wait (ms), in-order bound 667" "${longest:-0}" 900

# Non-blocking: 20 connects at once with burst 5, 5 answered, 15 refused
# rate-limited with a retry-after.
if rx_usable python3; then
	pyout=$RX_TMP/py.out pylog=$RX_TMP/py.log prom=$RX_TMP/m.prom
	rx_dump_on_fail "$pyout" "$pylog" "$prom"
	rx_shim RESILIX_RATE=5/s RESILIX_LOG=debug RESILIX_LOG_FILE="$pylog" \
		RESILIX_METRICS_FILE="$prom" RESILIX_METRICS_INTERVAL_MS=0 \
		python3 "$RESILIX_SRCDIR/tests/support/async_connects.py" "$RX_PORT" 20 \
		>"$pyout" || rx_fail "python3 exit status $?"
	rx_assert_eq "non-blocking: answered" 5 "$(grep -c '^200$' "$pyout")"
	rx_assert_eq "non-blocking: refused" 15 "$(grep -c '^refused$' "$pyout")"
	rx_assert_eq "non-blocking: refusals logged rate-limited with a retry-after" 15 \
		"$(grep -c 'event=refused reason=rate-limited retry_after_ms=[1-9][0-9]* at=connect' "$pylog")"
	rx_assert_grep "non-blocking: refusals by reason in the metrics" \
		'resilix_refusals_total\{.*reason="rate-limited"\} 15' "$prom"
fi
rx_log "figures: longest_fifo_wait_ms=$longest; keep-alive calls=$calls seen=$seen in ${elapsed} ms; new connections calls=$conn in 1 s"
rx_pass
