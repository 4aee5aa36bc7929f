#!/bin/bash
# breaker_probe.sh - half-open admits exactly one probe, even when eight
# threads call at once; a failed probe reopens the circuit for another open
# time, a successful one closes it and the calls reach the upstream again.
#
# Timeline (upstream clock): 500s that take 200 ms until 1700 ms, then 200s
# that take 200 ms. Eight client threads each call every 50 ms.
#   ~0 ms       the eight first calls reach the upstream (500) -> open
#   ~1200 ms    open time over: ONE probe reaches (500) -> open again
#   ~2400 ms    open time over: ONE probe reaches (200) -> closed
#   after       every thread's calls reach the upstream (200)
# Each probe takes 200 ms, so "exactly one" is visible in the upstream log:
# nothing else arrives while a probe is outstanding.
#
# Then self-heal: a probe that never settles is replaced after the open
# time elapses again (see the second half).
. "$(dirname "$0")/lib.sh"
rx_need python3
rx_require_build

OPEN=1000
rx_upstream_start probe --phases 1700:status:500:200,0:ok:200
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=info RESILIX_FAILURE_RATE=0.5 RESILIX_MIN_CALLS=5 \
	RESILIX_WINDOW_CALLS=10 RESILIX_WINDOW_MAX_AGE_MS=60000 \
	RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=$OPEN \
	RESILIX_HALF_OPEN_PROBES=1 \
	"$CLIENT" --port "$RX_PORT" --threads 8 --requests 64 --interval-ms 50 \
	>"$out" 2>"$err" || rx_fail "client exit status $?"

# The analysis reads the upstream log: "<ms> <method> <path> <status>".
verdict=$(python3 - "$(rx_uplog probe)" "$OPEN" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
rows = [(int(r[0]), r[3]) for r in rows]
open_ms = int(sys.argv[2])
def fail(msg):
    print("FAIL " + msg + " | log: " + " ".join("%d:%s" % r for r in rows[:40]))
    sys.exit(0)
burst = [r for r in rows if r[0] < 500]
rest = [r for r in rows if r[0] >= 500]
if not 5 <= len(burst) <= 8 or any(s != "500" for _, s in burst):
    fail("burst: expected 5..8 calls answered 500 before 500 ms, got %r" % burst)
if len(rest) < 2:
    fail("no probes reached the upstream")
p1, p2 = rest[0], rest[1]
if p1[1] != "500" or p1[0] < open_ms:
    fail("first probe: expected a 500 after %d ms, got %r" % (open_ms, p1))
if p2[1] != "200" or p2[0] < p1[0] + 200 + open_ms - 100:
    fail("second probe: expected a 200 one open time after the failed "
         "probe settled (>= %d ms), got %r" % (p1[0] + 200 + open_ms - 100, p2))
alone = [r for r in rest[2:] if r[0] < p2[0] + 150]
if alone:
    fail("calls reached the upstream while the probe was outstanding: %r" % alone)
after = [r for r in rest[2:] if r[1] == "200"]
if len(after) < 8:
    fail("after the successful probe: expected >= 8 calls to reach, got %d" % len(after))
if any(s != "200" for _, s in rest[2:]):
    fail("after the successful probe: a non-200 reached: %r" % rest[2:])
print("OK burst=%d probe1=%d probe2=%d after=%d" % (len(burst), p1[0], p2[0], len(after)))
PY
)
case $verdict in
OK*) rx_log "ok: upstream log: $verdict" ;;
*) rx_fail "upstream log: $verdict" ;;
esac

# The client saw the same story: refusals are fast ECONNREFUSED that never
# reached the network, and nothing else went wrong.
rx_assert_eq "client lines" 512 "$(wc -l <"$out" | tr -d ' ')"
rx_assert_ge "calls refused by the open circuit" \
	"$(grep -c ' 0 ECONNREFUSED 0$' "$out")" 100
rx_assert_eq "calls with another outcome" 0 \
	"$(grep -v -c -E ' (200 OK 1|500 OK 1|0 ECONNREFUSED 0)$' "$out")"
rx_assert_eq "client 200s = upstream 200s" "$(rx_count probe 200)" \
	"$(grep -c ' 200 OK 1$' "$out")"

seq=$(rx_transitions "$err" | sed 's/half_open/half-open/g' | paste -sd' ')
rx_assert_eq "breaker transitions" \
	"closed>open open>half-open half-open>open open>half-open half-open>closed" \
	"$seq"
rx_upstream_stop probe

# --- self-heal: a probe that never settles is replaced ----------------------
# 500s until 600 ms (the backstop trips), then an upstream that reads each
# request and never answers until 3100 ms, then healthy. The first probe
# (~1200 ms) hangs; one open time later a second probe is admitted instead
# of the key staying half-open forever; when the hang phase ends both hung
# probes see EOF (failures), and the probe after that closes the circuit.
rx_upstream_start heal --phases 600:status:500,2500:hang,0:ok:0
out=$RX_TMP/heal.out err=$RX_TMP/heal.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=3 RESILIX_MIN_CALLS=100 \
	RESILIX_WINDOW_MAX_AGE_MS=60000 RESILIX_OPEN_MS=$OPEN \
	RESILIX_HALF_OPEN_PROBES=1 \
	"$CLIENT" --port "$RX_PORT" --threads 4 --requests 120 --interval-ms 50 \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
hangs=$(awk '$4 == "hang" { print $1 }' "$(rx_uplog heal)" | paste -sd' ')
nh=$(echo "$hangs" | wc -w)
rx_assert_between "self-heal: probes that reached the hanging upstream" \
	"$nh" 2 3
gap=$(echo "$hangs" | awk '{ m = 1e9; for (i = 2; i <= NF; i++) if ($i - $(i-1) < m) m = $i - $(i-1); print m }')
rx_assert_ge "self-heal: ms between two probes (>= open time - 100)" \
	"$gap" $((OPEN - 100))
rx_assert_eq "self-heal: hung probes released with EOF at the phase end" \
	"$nh" "$(grep -c ' 0 EOF 1$' "$out")"
rx_assert_ge "self-heal: calls that succeeded after the recovery" \
	"$(grep -c ' 200 OK 1$' "$out")" 8
rx_assert_eq "self-heal: last transition" "half-open>closed" \
	"$(rx_transitions "$err" | sed 's/half_open/half-open/g' | tail -n1)"
rx_pass
