#!/bin/bash
# tls_unseen_wait.sh - the TLS library's own reads of ciphertext are not the
# program waiting for an answer; only a handshake's are (ADR-642).
#
# With RESILIX_SLOW_CALL_MS=100 and a window of three calls, against a
# healthy HTTPS upstream (200s at once), tests/support/tls_client:
#   - makes TLS 1.2 connections, handshakes, leaves each unused for
#     300 ms and closes it (an idle pooled connection). The handshake's
#     last read, of the server's Finished, marked the connect's call as
#     awaited: each close was judged a timeout, the limiter dropped at
#     each and the third opened the circuit;
#   - sends each request through a BIO_f_ssl (BIO_write, BIO_read), which
#     libssl serves without SSL_write or SSL_read, and keeps each
#     answered connection 300 ms: the same false timeouts, TLS 1.3 too.
# Neither may settle a timeout, lower the limit or open the circuit, and
# every connection must be made. And a handshake the server never
# answers, given up by python's socket timeout after 300 ms, is still a
# timeout: the handshake's reads wait.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
. "$(dirname "$0")/tls_lib.sh"
rx_require_build
rx_need python3 openssl
rx_tls_client_ok || exit 77

slow=(RESILIX_LOG=debug RESILIX_SLOW_CALL_MS=100 RESILIX_MIN_CALLS=3
	RESILIX_WINDOW_CALLS=3)

# quiet WHAT OUT ERR LINES: LINES outputs of OUT match, and ERR holds no
# timeout, no limit change and no transition.
quiet() {
	local what=$1 out=$2 err=$3 want=$4
	rx_assert_eq "$what: connections made and answered" 4 \
		"$(grep -Ec "^[0-9] $want\$" "$out")"
	rx_assert_no_grep "$what: a timeout" 'verdict=timeout' "$err"
	rx_assert_no_grep "$what: a limit change" 'event=limit-change' "$err"
	rx_assert_eq "$what: breaker transitions" "" "$(rx_transitions "$err")"
	rx_assert_eq "$what: settled at close without evidence" 4 \
		"$(grep -c 'event=settle verdict=rejected .*at=close' "$err")"
}

rx_tls_up ok --default 200
OK=$RX_PORT

out=$RX_TMP/idle.out err=$RX_TMP/idle.err
rx_dump_on_fail "$out" "$err"
rx_shim "${slow[@]}" "$TLS_CLIENT" --port "$OK" --tls12 --requests 4 \
	--idle-ms 300 >"$out" 2>"$err" || rx_fail "tls_client --idle-ms: exit $?"
quiet "TLS 1.2, handshaken then idle" "$out" "$err" idle

for v in 1.2 1.3; do
	flag=""
	[ "$v" = 1.2 ] && flag=--tls12
	out=$RX_TMP/bio$v.out err=$RX_TMP/bio$v.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${slow[@]}" "$TLS_CLIENT" --port "$OK" $flag --bio --new \
		--requests 4 --hold-ms 300 >"$out" 2>"$err" ||
		rx_fail "tls_client --bio: exit $?"
	quiet "TLS $v, requests through a BIO_f_ssl" "$out" "$err" 200
done

# A handshake with no answer: the upstream reads its ClientHello as the
# start of a request head that never ends.
rx_upstream_start hang --phases 0:hang
cat >"$RX_TMP/hang.py" <<'PY'
import socket, ssl, sys
ctx = ssl._create_unverified_context()
raw = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
raw.settimeout(0.3)
try:
    ctx.wrap_socket(raw)
    print("handshake done")
except Exception as e:
    print(type(e).__name__)
raw.close()
PY
if rx_py_usable; then
	out=$RX_TMP/hang.out err=$RX_TMP/hang.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${slow[@]}" "$PY" "$RX_TMP/hang.py" "$RX_PORT" >"$out" \
		2>"$err" || rx_fail "hang.py: exit $?"
	rx_assert_eq "unanswered handshake: the program's error" TimeoutError \
		"$(cat "$out")"
	rx_assert_eq "unanswered handshake: a timeout at close" 1 \
		"$(grep -c 'event=settle verdict=timeout .*at=close' "$err")"
fi
rx_pass
