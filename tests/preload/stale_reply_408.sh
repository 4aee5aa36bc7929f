#!/bin/bash
# stale_reply_408.sh - a reply queued before the request was written is
# not the request's answer (ADR-364).
#
# Many servers give up on an idle kept-alive connection by writing an
# unsolicited "408 Request Timeout" with Connection: close, then closing.
# A client that reuses the connection writes its next request and reads
# that 408 as the answer. Six such rounds counted as six timeouts, and on
# a healthy upstream the limiter's limit fell from 20 to 9. Now they
# settle as rejected at=stale-reply, and the limit stays put. A 408 that
# does answer the request on a reused connection (the server read the
# request, then gave up on it) still counts as a timeout.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

server() { # MODE PORTFILE: idle-408 or answer-408
	rx_py_server "$2" '
def request(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(4096)
        if not d:
            return False
        buf += d
    return True
def serve(c):
    mode = sys.argv[2]
    if not request(c):
        return
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    bye = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    if mode == "idle-408":
        time.sleep(0.1)  # the idle timeout: before the next request
        c.sendall(bye)
    elif request(c):
        c.sendall(bye)
    time.sleep(0.5)
    c.close()
' "$1"
}

client='
import socket, sys, time
port = int(sys.argv[1])
for i in range(6):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while not got.endswith(b"ok"):
        got += s.recv(4096)
    time.sleep(0.3)  # idle on the pooled connection
    s.sendall(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
    print(s.recv(4096).split(b"\r\n")[0].decode())
    s.close()
'
guard=(RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_MIN_CALLS=100
	RESILIX_LIMITER=aimd)
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

server idle-408 "$RX_TMP/port.idle"
rx_shim "${guard[@]}" python3 -c "$client" "$(cat "$RX_TMP/port.idle")" \
	>"$out" 2>"$err" || rx_fail "client under the shim: exit status $?"
rx_assert_eq "the program read the unsolicited 408s" 6 \
	"$(grep -c '^HTTP/1.1 408' "$out")"
rx_assert_eq "stale 408s settled as no evidence" 6 \
	"$(grep -c 'event=settle verdict=rejected .*at=stale-reply' "$err")"
rx_assert_eq "timeouts counted" 0 "$(grep -c 'event=settle verdict=timeout' "$err")"
rx_assert_eq "successes counted" 6 "$(grep -c 'event=settle verdict=success' "$err")"

server answer-408 "$RX_TMP/port.answer"
rx_shim "${guard[@]}" python3 -c "$client" "$(cat "$RX_TMP/port.answer")" \
	>"$out" 2>"$err" || rx_fail "client under the shim: exit status $?"
rx_assert_eq "a 408 that answers the request is a timeout" 6 \
	"$(grep -c 'event=settle verdict=timeout .*at=first-byte' "$err")"
rx_pass
