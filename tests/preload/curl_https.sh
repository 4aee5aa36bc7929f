#!/bin/bash
# curl_https.sh - over HTTPS the socket layer sees only ciphertext: a 500
# looks like any response bytes (success). The curl layer reads the status
# from libcurl, so a TLS upstream with a self-signed certificate that
# answers 500 trips the breaker for libcurl programs and for `curl -k`,
# and the same transfers through the multi interface (left to the socket
# layer, ADR-151) trip it too, now that the TLS layer reads their
# plaintext (ADR-440) - while inside curl_easy_perform the TLS layer
# stands aside: each transfer settles once, at=curl. 503s with
# Retry-After are overload: they never trip the breaker and every
# request reaches the upstream.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need python3 openssl

MIN=10 N=30
guard=(RESILIX_LOG=debug RESILIX_FAILURE_RATE=0.5 RESILIX_MIN_CALLS=$MIN
	RESILIX_WINDOW_CALLS=20 RESILIX_CONSECUTIVE_BACKSTOP=0
	RESILIX_OPEN_MS=30000)
rx_selfsigned
client_ok=no
if [ -x "$CURL_CLIENT" ] && rx_curl_client_usable; then
	client_ok=yes
fi
ran=""

if [ $client_ok = yes ]; then
	# --- a libcurl program: the curl layer trips on the 500s -----------
	rx_pyup_start a --tls "$RX_TMP/cert.pem" "$RX_TMP/key.pem" --default 500
	out=$RX_TMP/a.out err=$RX_TMP/a.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$CURL_CLIENT" --insecure --errbuf --requests $N \
		"https://127.0.0.1:$RX_PORT/fail" >"$out" 2>"$err" ||
		rx_fail "curl_client exit status $?"
	rx_assert_eq "https: answered 500" $MIN \
		"$(awk '$3 == 0 && $4 == 500' "$out" | wc -l | tr -d ' ')"
	rx_assert_eq "https: refused (CURLE_COULDNT_CONNECT)" $((N - MIN)) \
		"$(grep -c " 7 [0-9]* [0-9]* resilix: circuit open for 127.0.0.1:$RX_PORT, retry in" "$out")"
	rx_assert_eq "https: requests upstream" $MIN "$(rx_count a)"
	rx_assert_eq "https: transient settlements at=curl" $MIN \
		"$(grep 'event=settle verdict=transient' "$err" | grep -c 'at=curl')"
	rx_assert_eq "https: transitions" "closed>open" "$(rx_transitions "$err")"
	rx_assert_eq "https: no settlement but the curl layer's" $MIN \
		"$(rx_settles "$err")"
	rx_upstream_stop a

	# --- the same through the multi interface: the TLS layer reads the
	# statuses (ADR-440), so the 500s trip it too -----------------------
	rx_pyup_start b --tls "$RX_TMP/cert.pem" "$RX_TMP/key.pem" --default 500
	out=$RX_TMP/b.out err=$RX_TMP/b.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$CURL_CLIENT" --mode multi --parallel 1 \
		--insecure --requests 20 "https://127.0.0.1:$RX_PORT/fail" \
		>"$out" 2>"$err" || rx_fail "curl_client exit status $?"
	rx_assert_eq "multi https: answered 500 before the trip" $MIN \
		"$(awk '$3 == 0 && $4 == 500' "$out" | wc -l | tr -d ' ')"
	rx_assert_eq "multi https: requests upstream" $MIN "$(rx_count b)"
	rx_assert_eq "multi https: transitions" "closed>open" \
		"$(rx_transitions "$err")"
	rx_assert_eq "multi https: settled at the first plaintext byte" $MIN \
		"$(rx_settles "$err" first-byte)"
	rx_assert_eq "multi https: no curl-layer settlement" 0 \
		"$(rx_settles "$err" curl)"
	rx_upstream_stop b

	# --- certificate errors are answered, never failures (ADR-153); the
	# certificate passed in memory (CURLOPT_CAINFO_BLOB, forwarded as a
	# blob option) makes the same upstream verifiable -------------------
	rx_pyup_start c --tls "$RX_TMP/cert.pem" "$RX_TMP/key.pem" --default 200
	out=$RX_TMP/c.out err=$RX_TMP/c.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$CURL_CLIENT" --requests $((MIN + 5)) \
		"https://127.0.0.1:$RX_PORT/v" >"$out" 2>"$err" ||
		rx_fail "curl_client exit status $?"
	rx_assert_eq "unverified: CURLE_PEER_FAILED_VERIFICATION" $((MIN + 5)) \
		"$(awk '$3 == 60' "$out" | wc -l | tr -d ' ')"
	rx_assert_eq "unverified: settled as answered" $((MIN + 5)) \
		"$(grep 'event=settle verdict=answered' "$err" | grep -c 'at=curl')"
	rx_assert_eq "unverified: no transition" "" "$(rx_transitions "$err")"
	rx_shim "${guard[@]}" "$CURL_CLIENT" --cainfo-blob "$RX_TMP/cert.pem" \
		--requests 3 "https://127.0.0.1:$RX_PORT/v" >"$out" 2>"$err" ||
		rx_fail "curl_client exit status $?"
	rx_assert_eq "verified with the blob: answered 200" 3 \
		"$(awk '$3 == 0 && $4 == 200' "$out" | wc -l | tr -d ' ')"
	rx_upstream_stop c
	ran="$ran libcurl"
fi

if rx_usable curl; then
	# --- curl -k: guarded by the status codes -------------------------
	rx_pyup_start k --tls "$RX_TMP/cert.pem" "$RX_TMP/key.pem" --default 500
	out=$RX_TMP/k.out err=$RX_TMP/k.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" curl -k -sS -o /dev/null \
		-w '%{http_code} %{exitcode}\n' \
		"https://127.0.0.1:$RX_PORT/[1-$N]" >"$out" 2>"$err"
	rx_assert_eq "curl -k exit status (last transfer refused)" 7 "$?"
	rx_assert_eq "curl -k: answered 500" $MIN "$(grep -c '^500 0$' "$out")"
	rx_assert_eq "curl -k: refused" $((N - MIN)) "$(grep -c '^000 7$' "$out")"
	rx_assert_eq "curl -k: requests upstream" $MIN "$(rx_count k)"
	rx_assert_grep "curl -k: the reason on stderr" \
		"^curl: \(7\) resilix: circuit open for 127.0.0.1:$RX_PORT, retry in" "$err"
	rx_upstream_stop k

	# --- 503 with Retry-After is overload, not failure ------------------
	rx_pyup_start o --tls "$RX_TMP/cert.pem" "$RX_TMP/key.pem" --default 503
	out=$RX_TMP/o.out err=$RX_TMP/o.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" RESILIX_CONSECUTIVE_BACKSTOP=3 curl -k -sS \
		-o /dev/null -w '%{http_code} %{exitcode}\n' \
		"https://127.0.0.1:$RX_PORT/[1-$N]" >"$out" 2>"$err"
	rx_assert_eq "503: curl exit status" 0 "$?"
	rx_assert_eq "503: every transfer answered 503" $N "$(grep -c '^503 0$' "$out")"
	rx_assert_eq "503: requests upstream" $N "$(rx_count o 503)"
	rx_assert_eq "503: overload settlements at=curl" $N \
		"$(grep 'event=settle verdict=overload' "$err" | grep -c 'at=curl')"
	rx_assert_eq "503: no transition" "" "$(rx_transitions "$err")"
	ran="$ran curl"
fi
[ -n "$ran" ] || rx_pass "nothing could run in this build"
rx_pass "ran:$ran"
