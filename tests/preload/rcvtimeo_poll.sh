#!/bin/bash
# rcvtimeo_poll.sh - an SO_RCVTIMEO that runs out is the program's own
# timeout: a timeout when the program then gives the call up, but no
# verdict at all while it reads on, as programs that use it as a poll tick
# do (ADR-572).
#
# The upstream answers every request in 600 ms. A python3 client with
# SO_RCVTIMEO of 100 ms on a blocking socket makes 8 calls, one
# connection each:
#   patient  reads on after every EAGAIN until the answer: before ADR-572
#            each call settled as a timeout at its first expiry, the
#            fifth opened the circuit, and the last three connects were
#            refused by a healthy upstream. Now each settles at its first
#            byte as a success, and nothing is refused.
#   giveup   closes at the first EAGAIN: each call is a timeout
#            (at=socket-timeout), as before, and the breaker opens.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start slow --phases 0:ok:600

client() { # MODE
	rx_shim RESILIX_LOG=debug python3 -c '
import socket, struct, sys
mode, port = sys.argv[1], int(sys.argv[2])
for i in range(8):
    try:
        s = socket.create_connection(("127.0.0.1", port))
    except OSError as e:
        print("refused" if e.errno == 111 else "error"); continue
    s.settimeout(None)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                 struct.pack("ll", 0, 100000))
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
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
' "$1" "$RX_PORT" >"$RX_TMP/$1.out" 2>"$RX_TMP/$1.err" ||
		rx_fail "$1: exit status $?"
	rx_dump_on_fail "$RX_TMP/$1.out" "$RX_TMP/$1.err"
}
settles() { # MODE: "verdict,at" of each settle line
	grep 'event=settle' "$RX_TMP/$1.err" |
		sed -n 's/.*verdict=\([a-z]*\).* at=\([a-z-]*\).*/\1,\2/p' |
		sort | uniq -c | awk '{ print $1 "x" $2 }' | paste -sd' '
}

client patient
rx_assert_eq "patient: every call answered" 8 \
	"$(grep -c '^HTTP/1.1 200' "$RX_TMP/patient.out")"
rx_assert_eq "patient: settled at the answers" "8xsuccess,first-byte" \
	"$(settles patient)"

client giveup
rx_assert_eq "giveup: what the program saw" \
	"$(printf 'gave-up\n%.0s' 1 2 3 4 5; printf 'refused\n%.0s' 1 2 3)" \
	"$(cat "$RX_TMP/giveup.out")"
rx_assert_eq "giveup: each abandonment after an expiry is a timeout" \
	"5xtimeout,socket-timeout" "$(settles giveup)"
rx_pass
