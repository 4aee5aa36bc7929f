#!/bin/bash
# shut_before_request.sh - a program that ends its sending side before it
# sent a request - shutdown(SHUT_WR), or a TLS close_notify - gives no
# evidence when the server then closes (ADR-643).
#
# At the defaults (five failures in a row open a circuit), six times each
# against healthy upstreams:
#   - python3 connects, shuts its writing side, reads the server's EOF and
#     closes: each was "transient at=eof", and the sixth connect refused;
#   - tests/support/tls_client handshakes, ends the session with
#     SSL_shutdown and reads until the server's EOF: the same;
#   - gnutls-cli, its input ending at once (a TLS check that sends
#     nothing): "transient at=eof", then, with the EOF out of the way,
#     "timeout at=socket-timeout" - GnuTLS answers GNUTLS_E_AGAIN on a
#     blocking socket with no socket timeout after a post-handshake
#     message, which was taken for SO_RCVTIMEO running out (ADR-572).
# Each must settle without evidence (rejected), with no transition and no
# limit change. And a request written before shutdown(SHUT_WR) is still a
# call, settled by its answer.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
. "$(dirname "$0")/tls_lib.sh"
rx_require_build
rx_need python3 openssl

# none WHAT ERR: six settlements without evidence, nothing else.
none() {
	rx_assert_eq "$1: settled without evidence" 6 \
		"$(grep -c 'event=settle verdict=rejected' "$2")"
	rx_assert_no_grep "$1: evidence" 'verdict=\(transient\|timeout\)' "$2"
	rx_assert_no_grep "$1: a limit change" 'event=limit-change' "$2"
	rx_assert_eq "$1: breaker transitions" "" "$(rx_transitions "$2")"
}

rx_upstream_start ok --phases 0:ok
cat >"$RX_TMP/shut.py" <<'PY'
import socket, sys
port, req = int(sys.argv[1]), sys.argv[2] == "request"
for i in range(6):
    s = socket.create_connection(("127.0.0.1", port))
    if req:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    s.shutdown(socket.SHUT_WR)
    print(i, s.recv(12), flush=True)
    s.close()
PY
out=$RX_TMP/shut.out err=$RX_TMP/shut.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug python3 "$RX_TMP/shut.py" "$RX_PORT" none \
	>"$out" 2>"$err" || rx_fail "shut.py: exit status $?"
rx_assert_eq "SHUT_WR, no request: the server's EOF each time" 6 \
	"$(grep -c "^[0-5] b''$" "$out")"
none "SHUT_WR, no request" "$err"
rx_shim RESILIX_LOG=debug python3 "$RX_TMP/shut.py" "$RX_PORT" request \
	>"$out" 2>"$err" || rx_fail "shut.py request: exit status $?"
rx_assert_eq "request, then SHUT_WR: answered" 6 \
	"$(grep -c "HTTP/1.1 200" "$out")"
rx_assert_eq "request, then SHUT_WR: calls settled by the answer" 6 \
	"$(grep -c 'event=settle verdict=success .*at=first-byte' "$err")"

rx_tls_up tls --default 200
TLS=$RX_PORT
if rx_tls_client_ok; then
	out=$RX_TMP/bye.out err=$RX_TMP/bye.err
	rx_dump_on_fail "$out" "$err"
	rx_shim RESILIX_LOG=debug "$TLS_CLIENT" --port "$TLS" --requests 6 \
		--idle-ms 0 --bye >"$out" 2>"$err" ||
		rx_fail "tls_client --bye: exit status $?"
	rx_assert_eq "SSL_shutdown, no request: sessions" 6 \
		"$(grep -c '^[0-5] idle$' "$out")"
	none "SSL_shutdown, no request" "$err"
fi

if command -v gnutls-cli >/dev/null 2>&1 && rx_usable gnutls-cli; then
	err=$RX_TMP/gnutls.err
	: >"$err"
	rx_dump_on_fail "$err"
	for i in 1 2 3 4 5 6; do
		rx_shim RESILIX_LOG=debug gnutls-cli --insecure -p "$TLS" \
			127.0.0.1 </dev/null >/dev/null 2>>"$err"
	done
	none "gnutls-cli, no request" "$err"
else
	rx_log "NOTE: no gnutls-cli (gnutls-bin); its part of $RX_NAME is skipped"
fi
rx_pass
