#!/bin/bash
# curl_easy.sh - the curl layer guards curl_easy_perform (ADR-150..156):
# serial transfers on one kept-alive handle against HTTP 500s trip the
# breaker after exactly MIN_CALLS transfers; every later transfer returns
# CURLE_COULDNT_CONNECT (7) in well under a millisecond without reaching
# the upstream, with "resilix: circuit open for HOST:PORT, retry in N ms"
# in the program's CURLOPT_ERRORBUFFER. Each transfer is attributed once:
# the upstream's request log, the shim's settlements (all at=curl) and the
# program's answers agree, for kept-alive, fresh, duplicated and reset
# handles alike. The curl tool shows the same line on stderr.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build

MIN=10 N=30
guard=(RESILIX_LOG=debug RESILIX_FAILURE_RATE=0.5 RESILIX_MIN_CALLS=$MIN
	RESILIX_WINDOW_CALLS=20 RESILIX_CONSECUTIVE_BACKSTOP=0
	RESILIX_OPEN_MS=30000)

if rx_need_curl_client && rx_curl_client_usable; then
	# --- serial transfers on one handle, against 500s ------------------
	rx_upstream_start s --phases 0:status:500
	out=$RX_TMP/s.out err=$RX_TMP/s.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" "$CURL_CLIENT" --errbuf --requests $N \
		"http://127.0.0.1:$RX_PORT/x" >"$out" 2>"$err" ||
		rx_fail "curl_client exit status $?"
	rx_assert_eq "transfers" $N "$(wc -l <"$out" | tr -d ' ')"
	rx_assert_eq "transfers answered 500 (CURLE_OK)" $MIN \
		"$(awk '$3 == 0 && $4 == 500' "$out" | wc -l | tr -d ' ')"
	rx_assert_eq "the 500s came first" $MIN \
		"$(head -n $MIN "$out" | awk '$4 == 500' | wc -l | tr -d ' ')"
	# libcurl did not run for a refused transfer; its
	# CURLINFO_RESPONSE_CODE reads 0, as after a connect that failed,
	# not the previous transfer's 500 (ADR-597).
	rx_assert_eq "transfers refused with CURLE_COULDNT_CONNECT" $((N - MIN)) \
		"$(awk '$3 == 7' "$out" | wc -l | tr -d ' ')"
	rx_assert_eq "refused transfers' response code (0, not the last 500)" \
		$((N - MIN)) "$(awk '$3 == 7 && $4 == 0' "$out" | wc -l | tr -d ' ')"
	msg="resilix: circuit open for 127.0.0.1:$RX_PORT, retry in [0-9]+ ms"
	rx_assert_eq "error buffer of each refused transfer" $((N - MIN)) \
		"$(grep -cE "^0 [0-9]+ 7 [0-9]+ [0-9]+ $msg\$" "$out")"
	retry=$(awk '$3 == 7 { print $(NF - 1); exit }' "$out")
	rx_assert_between "retry in (ms) of the first refusal" "$retry" 29000 30000
	slowest=$(awk '$3 == 7 { if ($5 > m) m = $5 } END { print m + 0 }' "$out")
	rx_assert_le "slowest refused transfer (us, < 5 ms)" "$slowest" 4999
	rx_assert_eq "requests that reached the upstream" $MIN "$(rx_count s)"
	rx_assert_eq "settlements, all by the curl layer" "$MIN $MIN" \
		"$(rx_settles "$err") $(rx_settles "$err" curl)"
	rx_assert_grep "keyed by host:port of the URL" \
		"key=127.0.0.1:$RX_PORT event=settle verdict=transient .*at=curl" "$err"
	rx_assert_eq "transitions logged by the shim" "closed>open" \
		"$(rx_transitions "$err")"
	rx_assert_grep "refusals logged at the curl layer" \
		'event=refused reason=circuit-open .*at=curl' "$err"
	rx_upstream_stop s

	# --- fresh, duplicated and reset handles: one settlement each -------
	rx_upstream_start ok --phases 0:ok
	for how in --fresh --dup --reset; do
		out=$RX_TMP/ok$how.out err=$RX_TMP/ok$how.err
		rx_dump_on_fail "$out" "$err"
		before=$(rx_count ok)
		rx_shim RESILIX_LOG=debug "$CURL_CLIENT" $how --method POST \
			--requests 6 "http://127.0.0.1:$RX_PORT/a" \
			"http://127.0.0.1:$RX_PORT/b?q=1" >"$out" 2>"$err" ||
			rx_fail "curl_client $how exit status $?"
		rx_assert_eq "$how: transfers answered 200" 6 \
			"$(awk '$3 == 0 && $4 == 200' "$out" | wc -l | tr -d ' ')"
		rx_assert_eq "$how: requests upstream" 6 $(($(rx_count ok) - before))
		rx_assert_eq "$how: settlements (all, at=curl)" "6 6" \
			"$(rx_settles "$err") $(rx_settles "$err" curl)"
		rx_assert_eq "$how: POSTs upstream" 6 \
			"$(tail -n 6 "$(rx_uplog ok)" | grep -c ' POST ')"
	done

	# --- a curl_off_t option arrives intact: CURLOPT_MAXFILESIZE_LARGE
	# below the body's size fails the transfer after its 200 came (a
	# success: the status is the verdict, ADR-241), above it lets it
	# through ------------------------------------------------------------
	out=$RX_TMP/max.out err=$RX_TMP/max.err
	rx_dump_on_fail "$out" "$err"
	rx_shim RESILIX_LOG=debug "$CURL_CLIENT" --maxfilesize 1 --requests 2 \
		"http://127.0.0.1:$RX_PORT/m" >"$out" 2>"$err" ||
		rx_fail "curl_client exit status $?"
	rx_assert_eq "max file size 1: CURLE_FILESIZE_EXCEEDED" 2 \
		"$(awk '$3 == 63' "$out" | wc -l | tr -d ' ')"
	rx_assert_eq "settled by the 200 that came" 2 \
		"$(grep 'event=settle verdict=success' "$err" | grep -c 'at=curl')"
	rx_shim "$CURL_CLIENT" --maxfilesize 100000 --requests 2 \
		"http://127.0.0.1:$RX_PORT/m" >"$out" 2>"$err" ||
		rx_fail "curl_client exit status $?"
	rx_assert_eq "max file size 100000: answered 200" 2 \
		"$(awk '$3 == 0 && $4 == 200' "$out" | wc -l | tr -d ' ')"
	rx_upstream_stop ok

	# --- RESILIX_TIMEOUT_MS judges curl transfers too (ADR-145): answers
	# after the deadline are timeouts, and the backstop trips on them ----
	rx_upstream_start slow --phases 0:slow:300
	out=$RX_TMP/slow.out err=$RX_TMP/slow.err
	rx_dump_on_fail "$out" "$err"
	rx_shim RESILIX_LOG=debug RESILIX_TIMEOUT_MS=100 \
		RESILIX_CONSECUTIVE_BACKSTOP=3 RESILIX_OPEN_MS=30000 \
		"$CURL_CLIENT" --requests 6 "http://127.0.0.1:$RX_PORT/s" \
		>"$out" 2>"$err" || rx_fail "curl_client exit status $?"
	rx_assert_eq "late answers still reach the program" 3 \
		"$(awk '$3 == 0 && $4 == 200' "$out" | wc -l | tr -d ' ')"
	rx_assert_eq "settled as timeouts" 3 \
		"$(grep 'event=settle verdict=timeout' "$err" | grep -c 'at=curl')"
	rx_assert_eq "then refused" 3 "$(awk '$3 == 7' "$out" | wc -l | tr -d ' ')"
	rx_upstream_stop slow
fi

# --- the curl tool: its error message carries the refusal ---------------
if rx_usable curl; then
	rx_upstream_start cli --phases 0:status:500
	out=$RX_TMP/cli.out err=$RX_TMP/cli.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" curl -sS -o /dev/null -w '%{http_code} %{exitcode}\n' \
		"http://127.0.0.1:$RX_PORT/[1-$N]" >"$out" 2>"$err"
	rx_assert_eq "curl exit status (last transfer refused)" 7 "$?"
	rx_assert_eq "curl: answered 500" $MIN "$(grep -c '^500 0$' "$out")"
	rx_assert_eq "curl: refused (000, exit 7)" $((N - MIN)) \
		"$(grep -c '^000 7$' "$out")"
	rx_assert_eq "curl: the refusal on stderr" $((N - MIN)) \
		"$(grep -cE "^curl: \(7\) resilix: circuit open for 127.0.0.1:$RX_PORT, retry in [0-9]+ ms$" "$err")"
	rx_assert_eq "curl: requests upstream" $MIN "$(rx_count cli)"
	rx_assert_eq "curl: settlements (all, at=curl)" "$MIN $MIN" \
		"$(rx_settles "$err") $(rx_settles "$err" curl)"

	# curl -f: CURLE_HTTP_RETURNED_ERROR (22) still reads the status.
	rx_upstream_start f --phases 0:status:500
	out=$RX_TMP/f.out err=$RX_TMP/f.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" curl -f -s -o /dev/null -w '%{http_code} %{exitcode}\n' \
		"http://127.0.0.1:$RX_PORT/[1-$N]" >"$out" 2>"$err"
	rx_assert_eq "curl -f: 500 then exit 22" $MIN "$(grep -c '^500 22$' "$out")"
	rx_assert_eq "curl -f: refused after the trip" $((N - MIN)) \
		"$(grep -c '^000 7$' "$out")"
	rx_assert_eq "curl -f: requests upstream" $MIN "$(rx_count f)"
fi
rx_pass
