#!/bin/bash
# curl_refused_info.sh - after a transfer the curl layer refused (circuit
# open: CURLE_COULDNT_CONNECT without running libcurl), curl_easy_getinfo
# reads what libcurl itself reads after a connection refused, not the
# previous transfer's values (ADR-155, ADR-597, ADR-619): no connection,
# no address or port, OS_ERRNO ECONNREFUSED, no status, header, request
# or body bytes, no redirect, no HTTP version, unknown length and file
# time, no content type, no time spent.
#
# The reference is libcurl's own answer, without the shim, to a
# transfer on a loopback port nobody listens on. Then one handle does 5
# transfers against an upstream answering 500 under a backstop of 3: the
# first 3 are answered (their fields describe a real exchange), the last
# 2 are refused and must read as the reference does.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need python3
rx_need_curl_client
rx_curl_client_usable || rx_skip "the libcurl program does not run here"

out=$RX_TMP/out err=$RX_TMP/err ref=$RX_TMP/ref
rx_dump_on_fail "$out" "$err" "$ref"
# fields LINE: an "info" line without its index and its times, which
# depend on the machine (checked apart).
fields() {
	sed -e 's/^info [0-9]* //' -e 's/ total_ms=.*//'
}

dead=$(python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rx_plain "$CURL_CLIENT" --info --requests 1 "http://127.0.0.1:$dead/x" \
	>"$ref" || rx_fail "reference: exit status $?"
rx_assert_grep "reference: libcurl refused the connection" '^0 0 7 0 ' "$ref"
want=$(grep '^info ' "$ref" | fields)
rx_assert_grep "reference: libcurl's errno" 'errno=111' "$ref"

rx_upstream_start s --phases 0:status:500
rx_shim RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=3 \
	RESILIX_OPEN_MS=30000 "$CURL_CLIENT" --info --requests 5 \
	"http://127.0.0.1:$RX_PORT/x" >"$out" 2>"$err" ||
	rx_fail "curl_client exit status $?"
rx_assert_eq "answered 500s" 3 "$(awk '$3 == 0 && $4 == 500' "$out" | wc -l)"
rx_assert_eq "refused transfers" 2 "$(awk '$3 == 7 && $4 == 0' "$out" | wc -l)"
rx_assert_grep "the last answer had a connection and an address" \
	'^info 2 nconn=[01] ip=127\.0\.0\.1 port=[1-9]' "$out"
for i in 3 4; do
	rx_assert_eq "refused transfer $i reads as libcurl's own refusal" \
		"$want" "$(grep "^info $i " "$out" | fields)"
	rx_assert_grep "refused transfer $i: no time spent" \
		"^info $i .* total_ms=0 total_t_ms=0\$" "$out"
done
rx_pass
