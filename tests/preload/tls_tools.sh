#!/bin/bash
# tls_tools.sh - HTTPS tools under the TLS layer (ADR-440, ADR-445): wget
# (GnuTLS on Debian) and curl -Z (libcurl's multi interface, OpenSSL),
# each fetching many URLs over one kept-alive connection. Healthy output
# is what it is without the shim; 500s trip the breaker (5 of 20 reach
# the upstream) and the next request on the connection is refused before
# a byte leaves - wget prints "Failed writing HTTP request: Error in the
# push function." (GNUTLS_E_PUSH_ERROR, errno ECONNREFUSED), curl
# "OpenSSL SSL_write: Connection refused, errno 111"; 404s never trip.
# curl -Z --http2 to nginx (ALPN h2) is left alone: one success for the
# connection, its 500s never trip (ADR-443).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
. "$(dirname "$0")/tls_lib.sh"
rx_require_build
rx_need python3 openssl

N=20
guard=(RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=5 RESILIX_OPEN_MS=30000)
ran=""

urls() { # PORT PATH: N URLs
	local i
	for i in $(seq 1 $N); do echo "https://127.0.0.1:$1$2$i"; done
}

if command -v wget >/dev/null 2>&1 && rx_usable wget; then
	if ! ldd "$(command -v wget)" | grep -q libgnutls; then
		rx_log "NOTE: this wget does not use GnuTLS"
	fi
	wg=(wget --no-check-certificate --tries=1 -q -O -)
	rx_tls_up wok --default 200
	rx_plain "${wg[@]}" $(urls "$RX_PORT" /h) >"$RX_TMP/wplain.out" 2>&1
	rx_shim "${guard[@]}" "${wg[@]}" $(urls "$RX_PORT" /h) \
		>"$RX_TMP/wshim.out" 2>"$RX_TMP/wok.err"
	rx_dump_on_fail "$RX_TMP/wshim.out" "$RX_TMP/wok.err"
	rx_assert_eq "wget healthy: output with the shim" \
		"$(cat "$RX_TMP/wplain.out")" "$(cat "$RX_TMP/wshim.out")"
	rx_assert_eq "wget healthy: one success per request" $N \
		"$(grep -c 'event=settle verdict=success' "$RX_TMP/wok.err")"
	rx_upstream_stop wok

	rx_tls_up wbad --default 500
	out=$RX_TMP/wbad.out err=$RX_TMP/wbad.err
	rx_dump_on_fail "$err"
	rx_shim "${guard[@]}" wget --no-check-certificate --tries=1 -O /dev/null \
		$(urls "$RX_PORT" /f) >"$out" 2>"$err"
	rx_assert_eq "wget 500: requests upstream" 5 "$(rx_count wbad)"
	rx_assert_eq "wget 500: the refused kept-alive request" 1 \
		"$(grep -c '^Failed writing HTTP request: Error in the push function' "$err")"
	rx_assert_eq "wget 500: then refused at connect" $((N - 6)) \
		"$(grep -c 'failed: Connection refused' "$err")"
	rx_assert_eq "wget 500: transitions" "closed>open" "$(rx_transitions "$err")"
	rx_upstream_stop wbad

	rx_tls_up wnf --default 404
	err=$RX_TMP/wnf.err
	rx_dump_on_fail "$err"
	rx_shim "${guard[@]}" wget --no-check-certificate --tries=1 -O /dev/null \
		$(urls "$RX_PORT" /n) >/dev/null 2>"$err"
	rx_assert_eq "wget 404: requests upstream" $N "$(rx_count wnf)"
	rx_assert_eq "wget 404: no transition" "" "$(rx_transitions "$err")"
	rx_upstream_stop wnf
	ran="$ran wget"
fi

if rx_usable curl; then
	cz=(curl -Z --parallel-max 1 -k -sS -o /dev/null -w '%{http_code} %{exitcode}\n')
	rx_tls_up zok --default 200
	rx_plain curl -Z --parallel-max 1 -k -sS "https://127.0.0.1:$RX_PORT/h[1-$N]" \
		>"$RX_TMP/zplain.out" 2>/dev/null
	rx_shim "${guard[@]}" curl -Z --parallel-max 1 -k -sS \
		"https://127.0.0.1:$RX_PORT/h[1-$N]" >"$RX_TMP/zshim.out" \
		2>"$RX_TMP/zok.err"
	rx_dump_on_fail "$RX_TMP/zshim.out" "$RX_TMP/zok.err"
	rx_assert_eq "curl -Z healthy: output with the shim" \
		"$(cat "$RX_TMP/zplain.out")" "$(cat "$RX_TMP/zshim.out")"
	rx_assert_eq "curl -Z healthy: one success per transfer" $N \
		"$(grep -c 'event=settle verdict=success' "$RX_TMP/zok.err")"
	rx_upstream_stop zok

	rx_tls_up zbad --default 500
	out=$RX_TMP/zbad.out err=$RX_TMP/zbad.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "${cz[@]}" "https://127.0.0.1:$RX_PORT/f[1-$N]" \
		>"$out" 2>"$err"
	rx_assert_eq "curl -Z 500: requests upstream" 5 "$(rx_count zbad)"
	rx_assert_eq "curl -Z 500: answered 500" 5 "$(grep -c '^500 0$' "$out")"
	rx_assert_eq "curl -Z 500: refused" $((N - 5)) "$(grep -c '^000 7$' "$out")"
	rx_assert_grep "curl -Z 500: the refused kept-alive request" \
		'^curl: \(7\) OpenSSL SSL_write: Connection refused, errno 111' "$err"
	rx_assert_eq "curl -Z 500: transitions" "closed>open" "$(rx_transitions "$err")"
	rx_upstream_stop zbad

	rx_tls_up znf --default 404
	out=$RX_TMP/znf.out err=$RX_TMP/znf.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "${cz[@]}" "https://127.0.0.1:$RX_PORT/n[1-$N]" \
		>"$out" 2>"$err"
	rx_assert_eq "curl -Z 404: requests upstream" $N "$(rx_count znf)"
	rx_assert_eq "curl -Z 404: no transition" "" "$(rx_transitions "$err")"
	rx_upstream_stop znf
	ran="$ran curl-Z"
fi
# --- HTTP/2 (ALPN h2) is not framed: the TLS layer stands aside, the
# connect's call settles once as a success, and 500s never trip (ADR-443).
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ -x "$NGINX" ] && "$NGINX" -V 2>&1 | grep -q http_v2_module &&
	rx_usable curl && curl -V | grep -q HTTP2; then
	[ -s "$RX_TMP/cert.pem" ] || rx_selfsigned
	port=$(rx_free_port)
	pre=$RX_TMP/nginx
	temps=$(rx_nginx_dir "$pre")
	cat >"$pre/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $pre/nginx.pid;
error_log $pre/logs/error.log info;
events { worker_connections 64; }
http {
	access_log $pre/logs/access.log;
$temps
	server {
		listen 127.0.0.1:$port ssl http2;
		ssl_certificate $RX_TMP/cert.pem;
		ssl_certificate_key $RX_TMP/key.pem;
		location / { return 500; }
	}
}
CONF
	timeout -k 2 40 "$NGINX" -p "$pre" -c "$pre/nginx.conf" \
		-e "$pre/logs/error.log" >"$RX_TMP/nginx.out" 2>&1 &
	RX_PIDS="$RX_PIDS $!"
	rx_wait_for 10 curl -sk -o /dev/null "https://127.0.0.1:$port/ready" ||
		rx_fail "nginx did not start: $(cat "$RX_TMP/nginx.out")"
	out=$RX_TMP/h2.out err=$RX_TMP/h2.err
	rx_dump_on_fail "$out" "$err" "$pre/logs/error.log"
	rx_shim "${guard[@]}" curl -Z --parallel-max 1 --http2 -k -sS \
		-o /dev/null -w '%{http_version} %{http_code}\n' \
		"https://127.0.0.1:$port/h2[1-$N]" >"$out" 2>"$err"
	rx_assert_eq "h2: every transfer answered 500 over HTTP/2" $N \
		"$(grep -c '^2 500$' "$out")"
	rx_assert_eq "h2: requests upstream" $N \
		"$(grep -c 'GET /h2' "$pre/logs/access.log")"
	rx_assert_eq "h2: the connect's call, once, a success" 1 \
		"$(grep -c 'event=settle verdict=success' "$err")"
	rx_assert_eq "h2: no other settlement" 1 "$(rx_settles "$err")"
	rx_assert_eq "h2: no transition" "" "$(rx_transitions "$err")"
	ran="$ran h2"
fi
[ -n "$ran" ] || rx_pass "nothing could run in this build"
rx_pass "ran:$ran"
