#!/bin/bash
# throttle_sre.sh - RESILIX_THROTTLE_K=2 against an upstream that answers
# 503 to every call: the fraction of calls the throttler refuses
# (reason throttled, before anything is sent) approaches the SRE book's
# p = max(0, (requests - K x accepts) / (requests + 1)), capped at 0.9
# (ADR-425); the expected fraction is computed from the same formula,
# call by call, for a program whose calls run one at a time. The
# refusals are in the log, the metrics file, and a curl program's error
# buffer.
. "$(dirname "$0")/lib.sh"
rx_need python3
rx_require_build

N=400
rx_upstream_start busy --phases 0:status:503
out=$RX_TMP/client.out log=$RX_TMP/shim.log prom=$RX_TMP/m.prom
rx_dump_on_fail "$out" "$log"
rx_shim RESILIX_THROTTLE_K=2 RESILIX_LOG=debug RESILIX_LOG_FILE="$log" \
	RESILIX_METRICS_FILE="$prom" RESILIX_METRICS_INTERVAL_MS=0 \
	"$CLIENT" --port "$RX_PORT" --requests $N >"$out" ||
	rx_fail "client exit status $?"
refused=$(grep -c ' 0 ECONNREFUSED 0$' "$out")
answered=$(grep -c ' 503 OK 1$' "$out")
rx_assert_eq "every call answered 503 or refused" $N $((refused + answered))
rx_assert_eq "requests that reached the upstream" "$answered" "$(rx_count busy)"
rx_assert_eq "refusals logged as throttled" "$refused" \
	"$(grep -c 'event=refused reason=throttled ' "$log")"
rx_assert_grep "refusals by reason in the metrics" \
	"resilix_refusals_total\\{.*reason=\"throttled\"\\} $refused\$" "$prom"
read -r got want <<<"$(python3 -c '
import sys
n, refused = int(sys.argv[1]), int(sys.argv[2])
e, req = 0.0, 0
for i in range(n):
    e += min(0.9, max(0.0, req / (req + 1.0)))  # accepts stay 0
    req += 1
print("%d %d" % (refused * 1000 // n, int(e * 1000 / n)))' $N "$refused")"
rx_log "refused fraction x1000: measured $got, SRE formula (capped at 0.9) $want"
rx_assert_between "refused fraction x1000 near the formula's" "$got" \
	$((want - 50)) $((want + 50))

# The curl layer: the reason reaches the program's error buffer.
CURL_CLIENT=$RESILIX_BUILDDIR/tests/support/curl_client
if [ -x "$CURL_CLIENT" ]; then
	cout=$RX_TMP/curl.out
	rx_shim RESILIX_THROTTLE_K=2 "$CURL_CLIENT" --errbuf --requests 60 \
		"http://127.0.0.1:$RX_PORT/c" >"$cout" || rx_fail "curl_client exit $?"
	rx_dump_on_fail "$cout"
	rx_assert_ge "curl: transfers refused with the reason in the error buffer" \
		"$(grep -c ' 7 [0-9]* [0-9]* resilix: call to 127.0.0.1:[0-9]* refused (throttled)$' "$cout")" 30
fi
rx_log "figures: $refused of $N refused (x1000: $got, formula $want)"
rx_pass
