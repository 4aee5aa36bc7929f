#!/bin/bash
# tls_https.sh - HTTPS through OpenSSL, a new connection per request:
# python3 urllib and the C client (tests/support/tls_client) against an
# HTTPS upstream with a self-signed certificate. The TLS layer reads the
# plaintext (ADR-440), so healthy output is what it is without the shim,
# 500s trip the breaker (RESILIX_CONSECUTIVE_BACKSTOP=5: 30 requests,
# 5 reach the upstream, the rest are refused at connect), 404s never
# trip, and a slow upstream trips the slow-call rate. Each call settles
# once (at=first-byte), never also on its ciphertext.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
. "$(dirname "$0")/tls_lib.sh"
rx_require_build
rx_need python3 openssl

N=30
guard=(RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=5 RESILIX_OPEN_MS=30000)
ran=""

if rx_py_usable; then
	# --- healthy: the same output with and without the shim ------------
	rx_tls_up ok --default 200
	url="https://127.0.0.1:$RX_PORT/h"
	rx_plain "$PY" "$URLLIB" 5 "$url" >"$RX_TMP/plain.out" 2>&1
	rx_shim "${guard[@]}" "$PY" "$URLLIB" 5 "$url" >"$RX_TMP/shim.out" \
		2>"$RX_TMP/ok.err"
	rx_dump_on_fail "$RX_TMP/plain.out" "$RX_TMP/shim.out" "$RX_TMP/ok.err"
	rx_assert_eq "urllib healthy: output with the shim" \
		"$(cat "$RX_TMP/plain.out")" "$(cat "$RX_TMP/shim.out")"
	rx_assert_eq "urllib healthy: answered 200" 5 \
		"$(grep -c '^[0-9]* 200 ok$' "$RX_TMP/shim.out")"
	rx_assert_eq "urllib healthy: one success per request" 5 \
		"$(grep 'event=settle verdict=success' "$RX_TMP/ok.err" | grep -c 'at=first-byte')"
	rx_upstream_stop ok

	# --- 500s trip the breaker: the upstream sees 5 of 30 -------------
	rx_tls_up bad --default 500
	out=$RX_TMP/bad.out err=$RX_TMP/bad.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$PY" "$URLLIB" $N \
		"https://127.0.0.1:$RX_PORT/f" >"$out" 2>"$err"
	rx_assert_eq "urllib 500: requests upstream" 5 "$(rx_count bad)"
	rx_assert_eq "urllib 500: answered 500" 5 "$(grep -c '^[0-9]* 500$' "$out")"
	rx_assert_eq "urllib 500: refused at connect" $((N - 5)) \
		"$(grep -c 'URLError \[Errno 111\] Connection refused' "$out")"
	rx_assert_eq "urllib 500: transient settlements, once each" 5 \
		"$(rx_settles "$err")"
	rx_assert_eq "urllib 500: transitions" "closed>open" "$(rx_transitions "$err")"
	rx_upstream_stop bad

	# --- 404s never trip ------------------------------------------------
	rx_tls_up nf --default 404
	out=$RX_TMP/nf.out err=$RX_TMP/nf.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$PY" "$URLLIB" $N \
		"https://127.0.0.1:$RX_PORT/n" >"$out" 2>"$err"
	rx_assert_eq "urllib 404: requests upstream" $N "$(rx_count nf)"
	rx_assert_eq "urllib 404: answered settlements" $N \
		"$(grep -c 'event=settle verdict=answered' "$err")"
	rx_assert_eq "urllib 404: no transition" "" "$(rx_transitions "$err")"
	rx_upstream_stop nf

	# --- a slow upstream trips the slow-call rate ----------------------
	rx_tls_up slow --default 200 --delay-ms 400
	out=$RX_TMP/slow.out err=$RX_TMP/slow.err
	rx_dump_on_fail "$out" "$err"
	rx_shim RESILIX_LOG=debug RESILIX_SLOW_CALL_MS=200 RESILIX_MIN_CALLS=4 \
		RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000 \
		"$PY" "$URLLIB" 10 "https://127.0.0.1:$RX_PORT/s" >"$out" 2>"$err"
	rx_assert_eq "urllib slow: requests upstream" 4 "$(rx_count slow)"
	rx_assert_eq "urllib slow: answered 200 before the trip" 4 \
		"$(grep -c '^[0-9]* 200 ok$' "$out")"
	rx_assert_grep "urllib slow: trip reason is the slow-call rate" \
		'to=open .*reason=slow' "$err"
	rx_upstream_stop slow
	ran="$ran urllib"
fi

if rx_tls_client_ok; then
	# --- the C client, a new connection per request --------------------
	rx_tls_up cok --default 200
	rx_plain "$TLS_CLIENT" --port "$RX_PORT" --new --requests 5 \
		>"$RX_TMP/cplain.out" 2>&1
	rx_shim "${guard[@]}" "$TLS_CLIENT" --port "$RX_PORT" --new \
		--requests 5 >"$RX_TMP/cshim.out" 2>"$RX_TMP/cok.err"
	rx_dump_on_fail "$RX_TMP/cplain.out" "$RX_TMP/cshim.out" "$RX_TMP/cok.err"
	rx_assert_eq "tls_client healthy: output with the shim" \
		"$(cat "$RX_TMP/cplain.out")" "$(cat "$RX_TMP/cshim.out")"
	rx_upstream_stop cok

	rx_tls_up cbad --default 500
	out=$RX_TMP/cbad.out err=$RX_TMP/cbad.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$TLS_CLIENT" --port "$RX_PORT" --new \
		--requests $N >"$out" 2>"$err"
	rx_assert_eq "tls_client 500: requests upstream" 5 "$(rx_count cbad)"
	rx_assert_eq "tls_client 500: refused at connect" $((N - 5)) \
		"$(grep -c 'error connect ret=-1 ssl_error=-1 errno=ECONNREFUSED' "$out")"
	rx_upstream_stop cbad

	# tls_case NAME STATUS FLAG WHAT REACH TRANSITIONS: 12 new connections
	# of tls_client FLAG to an upstream answering STATUS; REACH of them
	# reach it, and the breaker makes TRANSITIONS.
	tls_case() {
		rx_tls_up "$1" --default "$2"
		out=$RX_TMP/$1.out err=$RX_TMP/$1.err
		rx_dump_on_fail "$out" "$err"
		rx_shim "${guard[@]}" "$TLS_CLIENT" --port "$RX_PORT" --new "$3" \
			--requests 12 >"$out" 2>"$err"
		rx_assert_eq "$4: requests upstream" "$5" "$(rx_count "$1")"
		rx_assert_eq "$4: transitions" "$6" "$(rx_transitions "$err")"
		rx_upstream_stop "$1"
	}

	# --- the handshake inside the first SSL_write (no SSL_connect): the
	# session is tied through SSL_get_fd ---------------------------------
	tls_case cimp 500 --implicit "implicit handshake 500" 5 "closed>open"

	# --- the handshake run by SSL_write of no bytes, as openssl s_client
	# does: it is watched as a handshake (ADR-673); unwatched, its
	# ciphertext answered the connect's call as a success and no 500
	# was read -------------------------------------------------------------
	tls_case czero 500 --zero-write "zero-length handshake 500" 5 \
		"closed>open"

	# --- a negative length before that handshake: libssl refuses it at
	# once and the handshake is not begun, so it is no evidence; watched
	# as the handshake, its SSL_R_BAD_LENGTH ended the connect's call as a
	# failure and five healthy connections opened the circuit ------------
	tls_case cneg 200 --bad-length "negative length, healthy" 12 ""
	ran="$ran tls_client"
fi
[ -n "$ran" ] || rx_pass "nothing could run in this build"
rx_pass "ran:$ran"
