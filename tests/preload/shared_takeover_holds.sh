#!/bin/bash
# shared_takeover_holds.sh - a lock taken over from a dead holder keeps
# counting the calls other processes have in flight (ADR-624). W's call
# is in flight (a slow answer) when the key's lock is found held by a dead
# process; X takes it over: the key's fresh state must still count W's
# call, and once W is killed, its call is given back - nothing is left
# in flight. (Zeroing everyone's holds at the takeover left W's call
# uncounted, and later settlements out of step with what each process
# was charged: calls in flight that no process had.)
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start up --phases 4000:slow:10000,0:ok:0
PORT=$RX_PORT
DEAD=$(rx_free_port)
SEG=$RX_TMP/seg
guard=(RESILIX_SHARED="$SEG")
key="127.0.0.1:$PORT"
# in_flight FILE FAMILY: the family's value for $key in a metrics file.
in_flight() {
	awk -v k="key=\"$key\"" '$1 ~ "^'"$2"'[{]" && index($1, k) {print $2}' "$1"
}

# A: a process of the segment that then dies (a refused connect).
rx_shim "${guard[@]}" "$CLIENT" --port "$DEAD" --requests 1 >/dev/null 2>&1
# W: its call in flight for 10 s.
rx_shim "${guard[@]}" "$CLIENT" --port "$PORT" --requests 1 \
	>"$RX_TMP/w.out" 2>&1 &
W=$!
rx_wait_for 10 grep -q accept "$RX_TMP/up.up.conn" || rx_fail "W never connected"
sleep 0.3
# Every key's lock word := A's tag, as if A had died holding them all.
python3 - "$SEG" <<'EOF' || rx_fail "cannot edit the segment"
import struct, sys
with open(sys.argv[1], "r+b") as f:
    h = f.read(120)
    max_keys, = struct.unpack_from("<I", h, 28)
    off_procs, _, off_locks = struct.unpack_from("<QQQ", h, 80)
    f.seek(off_procs + 52)
    gen, = struct.unpack("<I", f.read(4))
    f.seek(off_locks)
    f.write(struct.pack("<i", ((gen & ((1 << 21) - 1)) << 9) | 2) * max_keys)
EOF
rx_wait_for 10 sh -c "[ \$((\$(date +%s%3N) - $RX_UP_T0)) -ge 4200 ]"

out=$RX_TMP/x.out
err=$RX_TMP/x.err
rx_dump_on_fail "$out" "$err" "$RX_TMP/x.prom" "$RX_TMP/f.prom"
rx_shim "${guard[@]}" RESILIX_LOG=debug RESILIX_METRICS_FILE="$RX_TMP/x.prom" \
	RESILIX_METRICS_INTERVAL_MS=0 "$CLIENT" --port "$PORT" --requests 1 \
	>"$out" 2>"$err" || rx_fail "X failed or hung"
rx_assert_grep "X: took the dead holder's lock over" \
	'event=shared-lock-recovered .*lock=key' "$err"
rx_assert_eq "X: its call went through" 1 "$(grep -c ' 200 OK ' "$out")"
rx_assert_eq "X: W's call still counted in flight" 1 \
	"$(in_flight "$RX_TMP/x.prom" resilix_calls_in_flight)"
rx_assert_eq "X: W's limiter slot still counted" 1 \
	"$(in_flight "$RX_TMP/x.prom" resilix_limiter_in_flight_calls)"

pkill -KILL -f "$CLIENT --port $PORT" 2>/dev/null
wait "$W" 2>/dev/null
rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$RX_TMP/f.prom" \
	RESILIX_METRICS_INTERVAL_MS=0 "$CLIENT" --port "$PORT" --requests 1 \
	>"$RX_TMP/f.out" 2>&1 || rx_fail "F failed"
rx_assert_eq "after W died: calls in flight" 0 \
	"$(in_flight "$RX_TMP/f.prom" resilix_calls_in_flight)"
rx_assert_eq "after W died: limiter calls in flight" 0 \
	"$(in_flight "$RX_TMP/f.prom" resilix_limiter_in_flight_calls)"
rx_pass
