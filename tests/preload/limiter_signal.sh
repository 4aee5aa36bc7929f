#!/bin/bash
# limiter_signal.sh - a thread waiting for a limiter slot, interrupted by a
# signal whose handler does I/O to the same destination (socket, a
# non-blocking connect, close), does not deadlock (ADR-136): the wait holds no lock, and the
# per-thread in-shim flag lets the handler's connect pass straight through
# instead of queueing behind its own interrupted caller.
#
# The limit is 4 (MIN = MAX), the upstream answers in 200 ms, 8 threads
# call at once with a 5 s queue timeout: 4 of them wait (8 is below 2L,
# so nobody is shed), while SIGUSR1 hits every thread every 10 ms. All 8 calls are answered, the handlers
# ran, and the whole run ends in a few hundred ms, far inside `timeout`.
. "$(dirname "$0")/lib.sh"
rx_require_build

rx_upstream_start sig --phases 0:ok:200
out=$RX_TMP/client.out err=$RX_TMP/client.err log=$RX_TMP/shim.log
rx_dump_on_fail "$out" "$err" "$log"
start=$(rx_now_ms)
RX_TIMEOUT=15 rx_shim RESILIX_LIMIT_MIN=4 RESILIX_LIMIT_MAX=4 \
	RESILIX_QUEUE_TIMEOUT_MS=5000 RESILIX_LOG=debug RESILIX_LOG_FILE="$log" \
	"$CLIENT" --port "$RX_PORT" --threads 8 --signal-io-ms 10 \
	>"$out" 2>"$err" || rx_fail "client exit status $? (124: it hung)"
took=$(($(rx_now_ms) - start))
rx_assert_eq "calls answered" 8 "$(grep -c ' 200 OK 1$' "$out")"
rx_assert_eq "callers that waited for a slot" 4 \
	"$(grep -c 'event=admitted-after-wait' "$log")"
handled=$(sed -n 's/.*handled=\([0-9]*\).*/\1/p' "$err")
rx_assert_ge "signal handlers that ran" "${handled:-0}" 20
rx_assert_le "run time (ms)" "$took" 8000
rx_pass
