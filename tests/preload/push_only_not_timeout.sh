#!/bin/bash
# push_only_not_timeout.sh - a connection that only sends (log shipping, a
# metrics push) is not a timeout when it closes (ADR-193).
#
# The client pushes a line every 0.1 s for 0.6 s to a sink that never
# answers, then closes; the slow-call threshold is 300 ms. Before ADR-193
# every such session was settled at close as a timeout (the call had run
# past the threshold) and the healthy sink's circuit opened after three:
# the next sessions were refused. The same went for a connection opened
# and closed unused (a pool). Now abandonment at close is a timeout
# only when the program waited for an answer: it tried to read since its
# last write, or it sent nothing for the threshold (waiting in poll, as
# python does with a socket timeout). Both kinds of waiting client still
# count as timeouts: one that reads right after its last write and closes
# (the read decides), one that polls for 0.5 s (the quiet time decides).
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start sink --phases 0:hang
SINK=$RX_PORT

cat >"$RX_TMP/client.py" <<'PY'
import socket, sys, time
mode, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError as e:
        print(i, "refused" if e.errno == 111 else e, flush=True)
        continue
    if mode == "idle":         # a pooled connection never used
        time.sleep(0.5)
    elif mode == "push":
        for k in range(6):
            s.sendall(b"metric.value %d\n" % k)
            time.sleep(0.1)
    elif mode == "recv":       # the request's end just sent, then a read
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.4)
        s.sendall(b"\r\n")
        s.setblocking(False)
        try:
            s.recv(100)
        except BlockingIOError:
            pass
    else:                      # poll: python's socket timeout
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(0.5)
        try:
            s.recv(100)
        except socket.timeout:
            pass
    s.close()
    print(i, "ok", flush=True)
PY
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err"
cfg=(RESILIX_LOG=debug RESILIX_SLOW_CALL_MS=300 RESILIX_CONSECUTIVE_BACKSTOP=3)
rx_shim "${cfg[@]}" python3 "$RX_TMP/client.py" push "$SINK" 5 \
	>"$out" 2>"$err" || rx_fail "push: exit status $?"
rx_assert_eq "push sessions that went through" 5 "$(grep -c ' ok$' "$out")"
rx_assert_eq "push sessions released at close" 5 \
	"$(grep -c 'event=settle verdict=rejected .*at=close' "$err")"
rx_assert_eq "push: breaker transitions" "" "$(rx_transitions "$err")"

rx_shim "${cfg[@]}" python3 "$RX_TMP/client.py" idle "$SINK" 4 \
	>"$out" 2>"$err" || rx_fail "idle: exit status $?"
rx_assert_eq "idle connections released at close" 4 \
	"$(grep -c 'event=settle verdict=rejected .*at=close' "$err")"
rx_assert_eq "idle: breaker transitions" "" "$(rx_transitions "$err")"

for mode in recv poll; do
	rx_shim "${cfg[@]}" python3 "$RX_TMP/client.py" "$mode" "$SINK" 3 \
		>"$out" 2>"$err" || rx_fail "$mode: exit status $?"
	rx_assert_eq "$mode: waiting calls that timed out at close" 3 \
		"$(grep -c 'event=settle verdict=timeout .*at=close' "$err")"
	rx_assert_eq "$mode: breaker transitions" "closed>open" \
		"$(rx_transitions "$err")"
done
rx_pass
