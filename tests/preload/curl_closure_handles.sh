#!/bin/bash
# curl_closure_handles.sh - the handles libcurl makes for itself with
# curl_easy_init are not followed (ADR-592). libcurl 7.x gives each
# connection cache a closure handle made with curl_easy_init and frees it
# without curl_easy_cleanup: followed, each took an entry of the curl
# layer's handle table (1,024) and kept it. A program holding 600 easy
# handles at once, each after one transfer (each with its own cache),
# filled the table at transfer 512; the later handles were not followed
# and their transfers went to the socket layer. Now all 600 are the curl
# layer's, each attributed once, and the table never fills.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need_curl_client
rx_curl_client_usable || rx_pass "curl_client cannot run in this build"

N=600
rx_upstream_start h --max-conns 900 --phases 0:ok
out=$RX_TMP/h.out err=$RX_TMP/h.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug "$CURL_CLIENT" --fresh --hold --requests $N \
	"http://127.0.0.1:$RX_PORT/x" >"$out" 2>"$err" ||
	rx_fail "curl_client exit status $?"
rx_assert_eq "transfers answered 200" $N \
	"$(awk '$3 == 0 && $4 == 200' "$out" | wc -l | tr -d ' ')"
rx_assert_eq "settled by the curl layer" $N \
	"$(grep -c 'event=settle .*at=curl' "$err")"
rx_assert_eq "the handle table never filled" 0 \
	"$(grep -c 'event=curl-handles-full' "$err")"
rx_pass
