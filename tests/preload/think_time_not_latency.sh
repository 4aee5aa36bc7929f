#!/bin/bash
# think_time_not_latency.sh - the time a program waits between connect()
# and its first request write is not the upstream's latency (ADR-192).
#
# The client connects, "thinks" 0.7 s, then sends its request to an
# upstream that answers at once, with a 500 ms slow-call threshold. Before
# ADR-192 the call's clock ran from connect, every call was slow and the
# healthy upstream's circuit opened (then refused). Now a call on a new
# connection lasts the connect plus first write to first response byte:
# every call is fast, with a connect seen to complete by a blocking
# connect's return or, for a connect with a timeout (non-blocking inside
# python), by getsockopt(SO_ERROR). A really slow upstream (700 ms) still
# trips the slow-call condition.
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
        if i % 2:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        else:
            s = socket.socket()
            s.connect(("127.0.0.1", port))
    except OSError as e:
        print(i, "connect", e.strerror, flush=True)
        continue
    time.sleep(think)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    print(i, s.recv(100).split(b"\r\n")[0].decode(), flush=True)
    s.close()
PY
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err"
cfg=(RESILIX_LOG=debug RESILIX_SLOW_CALL_MS=500 RESILIX_MIN_CALLS=3
	RESILIX_WINDOW_CALLS=5)
rx_shim "${cfg[@]}" python3 "$RX_TMP/client.py" "$FAST" 0.7 6 \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
rx_assert_eq "answered" 6 "$(grep -c ' HTTP/1.1 200 OK$' "$out")"
rx_assert_eq "breaker transitions" "" "$(rx_transitions "$err")"
max=$(sed -n 's/.*event=settle verdict=success latency_us=\([0-9]*\).*/\1/p' \
	"$err" | sort -n | tail -1)
rx_assert_eq "calls settled as successes" 6 \
	"$(grep -c 'event=settle verdict=success' "$err")"
rx_assert_le "longest latency (us), think time excluded" "$max" 300000

rx_shim "${cfg[@]}" python3 "$RX_TMP/client.py" "$SLOW" 0 4 \
	>"$out" 2>"$err" || rx_fail "slow: client exit status $?"
rx_assert_grep "a slow upstream still trips" \
	'to=open reason=slow-call-rate' "$err"
rx_pass
