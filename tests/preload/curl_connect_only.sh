#!/bin/bash
# curl_connect_only.sh - a libcurl program that connects with
# CURLOPT_CONNECT_ONLY and then exchanges HTTP requests itself with
# curl_easy_send/curl_easy_recv is judged by its answers (ADR-366).
#
# The curl layer guarded the connect-only perform as the whole call (a
# success) and had the socket layer stand aside for it, so the 500s that
# came back through curl_easy_recv counted as nothing: the upstream
# looked healthy. Now the curl layer leaves such a handle to the socket
# layer, which sees the connect and each request on the connection: with
# RESILIX_CONSECUTIVE_BACKSTOP=3, three 500s settle as transient at their
# first byte, the breaker opens, and the next curl_easy_send is refused.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need_curl_client
rx_curl_client_usable || rx_skip "curl_client cannot run in this build"

rx_upstream_start five --phases 0:status:500
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=3 RESILIX_MIN_CALLS=100 \
	RESILIX_OPEN_MS=30000 "$CURL_CLIENT" --mode connect-only --requests 5 \
	"http://127.0.0.1:$RX_PORT/" >"$out" 2>"$err" ||
	rx_fail "curl_client under the shim: exit status $?"
rx_assert_eq "answers the program read" "500 500 500" \
	"$(awk '$3 == 0 { print $4 }' "$out" | paste -sd' ')"
rx_assert_eq "500s settled as transient at the first byte" 3 \
	"$(grep -c 'event=settle verdict=transient .*at=first-byte' "$err")"
rx_assert_no_grep "the connect-only perform is not the call" 'at=curl' "$err"
rx_assert_grep "the breaker opened" 'event=breaker-transition .*to=open' "$err"
rx_assert_eq "the fourth request is refused (CURLE_SEND_ERROR)" 55 \
	"$(sed -n 4p "$out" | awk '{ print $3 }')"
rx_assert_eq "requests that reached the upstream" 3 "$(rx_count five)"
rx_pass
