#!/bin/bash
# socket_timeout_tick.sh - an SO_RCVTIMEO or SO_SNDTIMEO that runs out is
# the program's own timeout: a timeout when the program then gives the
# call up, but no verdict at all while it goes on, as programs that use
# it as a poll tick do (ADR-572).
#
# A python3 client on blocking sockets with a 100 ms socket timeout makes
# 7 calls, one connection each:
#   patient  (SO_RCVTIMEO) to an upstream that answers in 600 ms, reading
#            on after every EAGAIN until the answer;
#   upload   (SO_SNDTIMEO, an 8 KiB send buffer) a 160 KiB POST to an
#            upstream that reads it slowly (16 KiB every 150 ms), sending
#            on after every EAGAIN, then reading the 200.
# Before ADR-572 each call settled as a timeout at its first EAGAIN, the
# fifth opened the circuit and the last two connects were refused, though
# every answer was a 200. Now each settles at its first byte as a
# success, and nothing is refused.
#   giveup   (SO_RCVTIMEO) closes at the first EAGAIN: each call is a
#            timeout (at=socket-timeout), as before, and the breaker
#            opens.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start slow --phases 0:ok:600
SLOW=$RX_PORT
rx_py_server "$RX_TMP/port.sink" '
def serve(c):
    f = c.makefile("rb")
    n = 0
    while True:
        h = f.readline()
        if h.lower().startswith(b"content-length:"):
            n = int(h.split(b":")[1])
        if h in (b"\r\n", b"\n", b""):
            break
    while n > 0:
        d = f.read1(min(n, 16384))
        if not d:
            return
        n -= len(d)
        time.sleep(0.15)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    c.close()
'
SINK=$(cat "$RX_TMP/port.sink")

client() { # MODE PORT
	rx_shim RESILIX_LOG=debug python3 -c '
import socket, struct, sys
mode, port = sys.argv[1], int(sys.argv[2])
tick = struct.pack("ll", 0, 100000)
body = b"x" * (160 * 1024)
for i in range(7):
    try:
        s = socket.create_connection(("127.0.0.1", port))
    except OSError as e:
        print("refused" if e.errno == 111 else "error"); continue
    s.settimeout(None)
    if mode == "upload":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tick)
        req = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    else:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tick)
        req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    off = eagain = 0
    while off < len(req):
        try:
            off += s.send(req[off:off + 8192])
        except BlockingIOError:
            eagain += 1
    if eagain:
        print("send-eagain", file=sys.stderr)
    got = b""
    while True:
        try:
            got = s.recv(4096)
            break
        except BlockingIOError:
            if mode == "giveup":
                break
    s.close()
    print(got[:12].decode() or "gave-up")
' "$1" "$2" >"$RX_TMP/$1.out" 2>"$RX_TMP/$1.err" ||
		rx_fail "$1: exit status $?"
	rx_dump_on_fail "$RX_TMP/$1.out" "$RX_TMP/$1.err"
}
settles() { # MODE: "NxVERDICT,AT" of its settle lines
	grep 'event=settle' "$RX_TMP/$1.err" |
		sed -n 's/.*verdict=\([a-z]*\).* at=\([a-z-]*\).*/\1,\2/p' |
		sort | uniq -c | awk '{ print $1 "x" $2 }' | paste -sd' '
}

for mode in patient upload; do
	[ $mode = patient ] && port=$SLOW || port=$SINK
	client $mode "$port"
	rx_assert_eq "$mode: every call answered" 7 \
		"$(grep -c '^HTTP/1.1 200' "$RX_TMP/$mode.out")"
	rx_assert_eq "$mode: settled at the answers" "7xsuccess,first-byte" \
		"$(settles $mode)"
done
rx_assert_grep "upload: the send buffer did fill (EAGAIN seen)" \
	'^send-eagain' "$RX_TMP/upload.err"

client giveup "$SLOW"
rx_assert_eq "giveup: what the program saw" \
	"$(printf 'gave-up\n%.0s' 1 2 3 4 5; printf 'refused\n%.0s' 1 2)" \
	"$(cat "$RX_TMP/giveup.out")"
rx_assert_eq "giveup: each abandonment after an expiry is a timeout" \
	"5xtimeout,socket-timeout" "$(settles giveup)"
rx_pass
