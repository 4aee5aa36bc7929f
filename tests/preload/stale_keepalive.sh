#!/bin/bash
# stale_keepalive.sh - a kept-alive connection that the server closed while
# it was idle is not evidence against the server (ADR-149).
#
# The server answers one request per connection with a keep-alive 200 and
# then closes. The C client's next request on that connection meets EOF or
# ECONNRESET before any byte; it reconnects, as real clients do. Before
# ADR-149 each such request counted as a transient failure and a healthy
# server's breaker opened (half the calls "failed"); now they settle as
# rejected at=stale-connection, every answered call is a success, and the
# breaker stays closed. The first call of a connection still counts: an
# EOF there is the server's doing (checked against the same server that
# closes without answering), and so is a reset after the slow-call
# threshold on a kept-alive connection (ADR-225).
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

server() { # MODE PORTFILE: answer-then-close, close-at-once, or die-late
	rx_py_server "$2" '
def serve(c):
    mode = sys.argv[2]
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(4096)
        if not d:
            break
        buf += d
    if mode in ("answer", "die-late"):
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    if mode == "die-late":
        # The second request kills the worker after 600 ms of work:
        # reset, no answer.
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = c.recv(4096)
            if not d:
                break
            buf += d
        time.sleep(0.6)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
' "$1"
}

server answer "$RX_TMP/port.answer"
port=$(cat "$RX_TMP/port.answer")
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_FAILURE_RATE=0.3 RESILIX_MIN_CALLS=4 \
	RESILIX_WINDOW_CALLS=20 RESILIX_CONSECUTIVE_BACKSTOP=0 \
	"$CLIENT" --port "$port" --keepalive --requests 12 \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
rx_assert_eq "requests answered" 6 "$(grep -c ' 200 OK 1$' "$out")"
rx_assert_eq "calls on a stale connection, released" 6 \
	"$(grep -c 'event=settle verdict=rejected .*at=stale-connection' "$err")"
rx_assert_eq "calls that counted as failures" 0 \
	"$(grep 'event=settle' "$err" | grep -vc 'verdict=\(success\|rejected\)')"
rx_assert_eq "breaker transitions" "" "$(rx_transitions "$err")"

# The first call of a connection closed without an answer is evidence.
server close "$RX_TMP/port.close"
port=$(cat "$RX_TMP/port.close")
rx_shim RESILIX_LOG=debug "$CLIENT" --port "$port" --requests 2 \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
rx_assert_eq "a fresh connection's EOF: transient" 2 \
	"$(grep -c 'event=settle verdict=transient .*at=eof' "$err")"

# A reset that comes after the slow-call threshold, on a kept-alive
# connection, is not an idle close: the request was being worked on
# (ADR-225). It counts; below the threshold it would still be released.
server die-late "$RX_TMP/port.die"
port=$(cat "$RX_TMP/port.die")
rx_shim RESILIX_LOG=debug RESILIX_SLOW_CALL_MS=300 "$CLIENT" --port "$port" \
	--keepalive --requests 2 >"$out" 2>"$err" || rx_fail "client exit status $?"
rx_assert_eq "late reset: the first call answered" 1 "$(grep -c ' 200 OK 1$' "$out")"
rx_assert_eq "late reset past the slow threshold: a failure" 1 \
	"$(grep 'event=settle' "$err" | grep -c 'verdict=transient')"
rx_assert_eq "late reset: not released as stale" 0 \
	"$(grep -c 'at=stale-connection' "$err")"
rx_pass
