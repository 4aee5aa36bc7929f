#!/bin/bash
# curl_fork.sh - regression test: a child forked while another thread
# holds the curl layer's handle-table lock must not inherit it held
# (docs/design.md, "Never make the host worse"). Two threads set options on
# their handles in a loop (each call takes the lock) while the main thread
# forks 300 children that set one option each and exit. Before the fork
# handlers of preload/curl.c, children hung on the lock (killed here by
# their own 5 s alarm and counted as lost).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need_curl_client
rx_curl_client_usable || rx_pass "curl_client cannot run in this build"

out=$RX_TMP/fork.out err=$RX_TMP/fork.err
rx_dump_on_fail "$out" "$err"
RX_TIMEOUT=40 rx_shim "$CURL_CLIENT" --fork-stress 300 "http://127.0.0.1:1/x" \
	>"$out" 2>"$err" || rx_fail "curl_client exit status $?"
rx_assert_eq "children that exited normally" "forks 300" "$(cat "$out")"
rx_pass
