#!/bin/bash
# first_write_fast.sh - the first request line on a new connection goes on
# with the call its connect admitted in one pass (ADR-585), and decides
# exactly as the general steps (ADR-192) do.
#
# At RESILIX_LOG=warn no hook is on, so the kept-alive cycle's fast paths
# run; at info the general steps do. A python client connects, "thinks"
# 0.7 s and sends its request to an upstream that answers at once, with a
# 500 ms slow-call threshold: the think time is not latency on the fast
# path either, so no call is slow and none is refused. A really slow
# upstream (700 ms) still trips the circuit. And the C client, one request
# per connection against an upstream that fails or is slow, sees the same
# answers and refusals on both paths.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start fast --phases 0:ok:0
FAST=$RX_PORT
rx_upstream_start slow --phases 0:ok:700
SLOW=$RX_PORT

cat >"$RX_TMP/client.py" <<'PY'
import socket, sys, time
port, think, n = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    try:
        s = socket.socket()
        s.connect(("127.0.0.1", port))
    except OSError as e:
        print(i, "connect", e.strerror, flush=True)
        continue
    time.sleep(think)
    try:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        print(i, s.recv(100).split(b"\r\n")[0].decode(), flush=True)
    except OSError as e:
        print(i, "io", e.strerror, flush=True)
    s.close()
PY
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err"
cfg=(RESILIX_LOG=warn RESILIX_SLOW_CALL_MS=500 RESILIX_MIN_CALLS=3
	RESILIX_WINDOW_CALLS=5)
rx_shim "${cfg[@]}" python3 "$RX_TMP/client.py" "$FAST" 0.7 6 \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
rx_assert_eq "answered, think time excluded" 6 \
	"$(grep -c ' HTTP/1.1 200 OK$' "$out")"

rx_shim "${cfg[@]}" python3 "$RX_TMP/client.py" "$SLOW" 0 6 \
	>"$out" 2>"$err" || rx_fail "slow: client exit status $?"
rx_assert_eq "a slow upstream still trips: answered before" 3 \
	"$(grep -c ' HTTP/1.1 200 OK$' "$out")"
rx_assert_eq "a slow upstream still trips: refused after" 3 \
	"$(grep -c ' connect Connection refused$' "$out")"

MIN=5
N=12
run() {
	local name=$1 phases=$2 log=$3
	shift 3
	rx_upstream_start "$name" --phases "$phases"
	rx_dump_on_fail "$RX_TMP/$name.out" "$RX_TMP/$name.err"
	rx_shim RESILIX_LOG="$log" RESILIX_MIN_CALLS=$MIN \
		RESILIX_WINDOW_CALLS=10 RESILIX_WINDOW_MAX_AGE_MS=60000 \
		RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000 "$@" \
		"$CLIENT" --port "$RX_PORT" --requests $N \
		>"$RX_TMP/$name.out" 2>"$RX_TMP/$name.err" ||
		rx_fail "$name: client exit status $?"
	cut -d' ' -f4- "$RX_TMP/$name.out" >"$RX_TMP/$name"
}
for kind in fail slow; do
	if [ $kind = fail ]; then
		phases=0:status:500 set=(RESILIX_FAILURE_RATE=0.5)
	else
		phases=0:slow:40
		set=(RESILIX_SLOW_CALL_MS=10 RESILIX_SLOW_CALL_RATE=0.5)
	fi
	run $kind-fast "$phases" warn "${set[@]}"
	run $kind-general "$phases" info "${set[@]}"
	rx_assert_eq "$kind: requests that reached the upstream, fast path" \
		"$MIN" "$(rx_count $kind-fast)"
	rx_assert_eq "$kind: requests that reached the upstream, general" \
		"$MIN" "$(rx_count $kind-general)"
	rx_assert_eq "$kind: the same outcomes on both paths" \
		"$(cat "$RX_TMP/$kind-general")" "$(cat "$RX_TMP/$kind-fast")"
done
rx_pass
