#!/bin/bash
# tls_keepalive.sh - HTTPS on one kept-alive connection (ADR-440,
# ADR-445): each request on it is a call of its own, judged by its
# status; after the breaker opens, the next request is refused before a
# byte leaves. The C client sees SSL_write -1, SSL_get_error
# SSL_ERROR_SYSCALL (5), errno ECONNREFUSED, and TCP_INFO shows that the
# kernel sent nothing during the call. python's http.client sees the
# exception a failed socket write raises in this python (ssl.SSLEOFError:
# its SSL_write_ex path reports any socket error so), checked against a
# real one - a write after the server reset the connection - and its next
# connection is refused at connect (ConnectionRefusedError). With
# RESILIX_KEY=host the session's SNI name keys its requests.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
. "$(dirname "$0")/tls_lib.sh"
rx_require_build
rx_need python3 openssl

guard=(RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=5 RESILIX_OPEN_MS=30000)
ran=""

if rx_tls_client_ok; then
	rx_tls_up c500 --default 500
	out=$RX_TMP/c500.out err=$RX_TMP/c500.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$TLS_CLIENT" --port "$RX_PORT" --requests 10 \
		>"$out" 2>"$err"
	rx_assert_eq "tls_client keep-alive 500: requests upstream" 5 "$(rx_count c500)"
	rx_assert_eq "tls_client keep-alive 500: answered 500" 5 \
		"$(grep -c '^[0-9] 500$' "$out")"
	rx_assert_eq "the refused request on the kept-alive connection" \
		"5 error SSL_write ret=-1 ssl_error=5 errno=ECONNREFUSED sent=0" \
		"$(sed -n 6p "$out")"
	rx_assert_eq "later requests refused at connect" 4 \
		"$(grep -c 'error connect ret=-1 ssl_error=-1 errno=ECONNREFUSED' "$out")"
	rx_assert_grep "refused at the write" 'event=refused .*at=write' "$err"
	rx_upstream_stop c500

	rx_tls_up c404 --default 404
	out=$RX_TMP/c404.out err=$RX_TMP/c404.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$TLS_CLIENT" --port "$RX_PORT" --requests 20 \
		>"$out" 2>"$err"
	rx_assert_eq "tls_client keep-alive 404: requests upstream" 20 "$(rx_count c404)"
	rx_assert_eq "tls_client keep-alive 404: one answered call each" 20 \
		"$(grep -c 'event=settle verdict=answered' "$err")"
	rx_assert_eq "tls_client keep-alive 404: no transition" "" \
		"$(rx_transitions "$err")"
	rx_upstream_stop c404

	# A slow kept-alive upstream: latency is from each request's first
	# plaintext write to the answer's first plaintext byte.
	rx_tls_up cslow --default 200 --delay-ms 300
	out=$RX_TMP/cslow.out err=$RX_TMP/cslow.err
	rx_dump_on_fail "$out" "$err"
	rx_shim RESILIX_LOG=debug RESILIX_SLOW_CALL_MS=150 RESILIX_MIN_CALLS=4 \
		RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000 \
		"$TLS_CLIENT" --port "$RX_PORT" --requests 8 >"$out" 2>"$err"
	rx_assert_eq "tls_client keep-alive slow: requests upstream" 4 "$(rx_count cslow)"
	rx_assert_grep "tls_client keep-alive slow: trip on the slow-call rate" \
		'to=open .*reason=slow' "$err"
	rx_assert_eq "tls_client keep-alive slow: refused at the write" \
		"4 error SSL_write ret=-1 ssl_error=5 errno=ECONNREFUSED sent=0" \
		"$(sed -n 5p "$out")"
	rx_upstream_stop cslow

	# RESILIX_KEY=host: the SNI name keys the requests (ADR-446). Once
	# the name's breaker is open, a new connection (its connect keyed by
	# the address, which is healthy) has its first write refused.
	rx_tls_up csni --default 500
	out=$RX_TMP/csni.out err=$RX_TMP/csni.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" RESILIX_KEY=host "$TLS_CLIENT" --port "$RX_PORT" \
		--sni svc.test --new --requests 8 >"$out" 2>"$err"
	rx_assert_eq "SNI key: requests upstream" 5 "$(rx_count csni)"
	rx_assert_eq "SNI key: the 500s settled under the name" 5 \
		"$(grep 'event=settle verdict=transient' "$err" | grep -c "key=svc.test:$RX_PORT ")"
	rx_assert_eq "SNI key: transitions of the name" "closed>open" \
		"$(grep "key=svc.test:$RX_PORT " "$err" | rx_transitions /dev/stdin)"
	rx_assert_eq "SNI key: the address never opened" 0 \
		"$(grep "key=127.0.0.1:$RX_PORT " "$err" | grep -c 'to=open')"
	rx_assert_eq "SNI key: later first writes refused, no byte sent" 3 \
		"$(grep -c '^[0-9] error SSL_write ret=-1 ssl_error=5 errno=ECONNREFUSED sent=0$' "$out")"
	rx_upstream_stop csni
	ran="$ran tls_client"
fi

if rx_py_usable; then
	# --- http.client on one connection ----------------------------------
	rx_tls_up p500 --default 500
	out=$RX_TMP/p500.out err=$RX_TMP/p500.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$PY" "$HTTPCLIENT" 12 "$RX_PORT" /k \
		>"$out" 2>"$err"
	rx_assert_eq "http.client 500: requests upstream" 5 "$(rx_count p500)"
	rx_assert_eq "http.client 500: answered 500 on one connection" 5 \
		"$(grep -c '^[0-9] 500 ok$' "$out")"
	refused=$(sed -n 6p "$out")
	rx_assert_eq "http.client: the refused kept-alive request" \
		"5 SSLEOFError EOF occurred in violation of protocol" \
		"$(echo "$refused" | sed 's/ (_ssl.c:[0-9]*)$//')"
	rx_assert_eq "http.client: later requests refused at connect" 6 \
		"$(grep -c '^[0-9]* ConnectionRefusedError \[Errno 111\]' "$out")"
	rx_upstream_stop p500

	# The same python's view of a real failed socket write: the server
	# resets the kept-alive connection after its first answer.
	"$PY" - "$RX_TMP/cert.pem" "$RX_TMP/key.pem" >"$RX_TMP/real.out" 2>&1 <<'PYEOF'
import socket, ssl, struct, sys, threading, time
sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
sctx.load_cert_chain(sys.argv[1], sys.argv[2])
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(1)
def serve():
    c, _ = ls.accept()
    t = sctx.wrap_socket(c, server_side=True)
    t.recv(4096)
    t.sendall(b"HTTP/1.1 500 x\r\nContent-Length: 3\r\n\r\nok\n")
    time.sleep(0.1)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    t.close()
threading.Thread(target=serve, daemon=True).start()
ctx = ssl._create_unverified_context()
s = ctx.wrap_socket(socket.create_connection(ls.getsockname(), timeout=5))
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"); s.recv(100)
time.sleep(0.4)
for i in range(3):
    try:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    except Exception as e:
        print(type(e).__name__, e.strerror if e.strerror else e)
        break
PYEOF
	rx_dump_on_fail "$RX_TMP/real.out"
	rx_assert_eq "python on a real failed socket write" \
		"SSLEOFError EOF occurred in violation of protocol" \
		"$(sed 's/ (_ssl.c:[0-9]*)$//' "$RX_TMP/real.out")"
	ran="$ran http.client"
fi
[ -n "$ran" ] || rx_pass "nothing could run in this build"
rx_pass "ran:$ran"
