#!/bin/bash
# limiter_single.sh - a single-threaded program is never shed by the
# limiter (minimum limit 4, docs/design.md): at most one call of it is in
# flight, below any limit the limiter can reach. The upstream answers 429
# (overload: the strongest pressure there is, each one cutting the limit
# by a tenth at once), so the limit is driven to its minimum and stays
# there; every call still reaches the upstream. The limit-change lines
# leave out the latency figures, not yet measured. Both with a new
# connection per request and on one kept-alive connection, under each
# algorithm.
. "$(dirname "$0")/lib.sh"
rx_require_build

N=40
rx_upstream_start single --phases 0:status:429
for alg in vegas gradient2 aimd; do
	for mode in close keepalive; do
		out=$RX_TMP/$alg.$mode.out log=$RX_TMP/$alg.$mode.log
		rx_dump_on_fail "$out" "$log"
		ka=()
		[ $mode = keepalive ] && ka=(--keepalive)
		before=$(rx_count single)
		rx_shim RESILIX_LOG=debug RESILIX_LOG_FILE="$log" \
			RESILIX_LIMITER=$alg "$CLIENT" --port "$RX_PORT" \
			--requests $N --interval-ms 5 ${ka[@]+"${ka[@]}"} >"$out" ||
			rx_fail "client exit status $?"
		rx_assert_eq "$alg/$mode: calls answered 429" $N \
			"$(grep -c ' 429 OK 1$' "$out")"
		rx_assert_eq "$alg/$mode: requests that reached the upstream" \
			$N $(($(rx_count single) - before))
		rx_assert_eq "$alg/$mode: refusals logged" 0 \
			"$(grep -c 'event=refused' "$log")"
		rx_assert_eq "$alg/$mode: the limit fell to its minimum" 4 \
			"$(sed -n 's/.*event=limit-change limit=\([0-9]*\).*/\1/p' \
				"$log" | tail -n1)"
		# Before a window closes nothing is measured: the line says
		# so by leaving the figures out, not by a latency of 0 (ADR-138).
		rx_assert_eq "$alg/$mode: no limit-change line claims p90_us=0" 0 \
			"$(grep -c 'event=limit-change.* p90_us=0 ' "$log")"
	done
done
rx_pass
