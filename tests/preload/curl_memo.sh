#!/bin/bash
# curl_memo.sh - the curl layer's URL and key memos (ADR-563) never give
# a transfer another transfer's key. The tool curl gives each URL of its
# command line a new handle on one thread, so each URL meets the memos of
# the one before:
#   - URLs A, B, A (two upstreams): keyed A, B, A, in that order;
#   - the same scheme-less URL three times, the second under
#     --proto-default https (CURLOPT_DEFAULT_PROTOCOL, which changes the
#     scheme of a URL set before it): keyed http, https, http with
#     RESILIX_CURL_KEY=origin.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need curl
rx_usable curl || rx_pass "curl does not run under this build's runtime"

rx_upstream_start a --phases 0:ok
A=$RX_PORT
rx_upstream_start b --phases 0:ok
B=$RX_PORT
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

keys() { # the curl layer's settlements' keys, in order
	sed -n 's/.*key=\([^ ]*\) event=settle .*at=curl.*/\1/p' "$err" |
		tr '\n' ' '
}

rx_shim RESILIX_LOG=debug curl -s -o /dev/null -w '%{http_code}\n' \
	"http://127.0.0.1:$A/x" "http://127.0.0.1:$B/x" \
	"http://127.0.0.1:$A/x" >"$out" 2>"$err" ||
	rx_fail "curl exit status $?"
rx_assert_eq "three answers" 3 "$(grep -c '^200$' "$out")"
rx_assert_eq "keyed A, B, A" \
	"127.0.0.1:$A 127.0.0.1:$B 127.0.0.1:$A " "$(keys)"

# The https transfer is refused by libcurl itself (--proto =http), at
# once: only its key matters here.
rx_shim RESILIX_LOG=debug RESILIX_CURL_KEY=origin curl -s -o /dev/null \
	"127.0.0.1:$A/x" --next --proto-default https --proto =http \
	"127.0.0.1:$A/x" --next "127.0.0.1:$A/x" >"$out" 2>"$err"
rx_assert_eq "keyed http, https, http" \
	"http://127.0.0.1:$A https://127.0.0.1:$A http://127.0.0.1:$A " \
	"$(keys)"
rx_pass
