#!/bin/bash
# curl_unix_socket.sh - libcurl transfers over a Unix socket are never
# tracked (ADR-242; docs/design.md: AF_UNIX sockets pass through), so a
# failing API behind a Unix socket cannot open the circuit of the TCP
# service that has the URL's host and port.
#
# A Unix-socket upstream answers 500 to everything; a TCP upstream on
# 127.0.0.1:P answers 200. Every URL names 127.0.0.1:P. A backstop of 5
# consecutive failures would trip on the Unix socket's 500s if they were
# counted, and refuse what follows to 127.0.0.1:P.
# - The curl tool: 6 transfers with --unix-socket (then with
#   --abstract-unix-socket), then, after --next in the same process, 2
#   over TCP: all answered (500s, then 200s); only the TCP ones settle.
# - A libcurl program whose handles are duplicates of a template that
#   carries CURLOPT_UNIX_SOCKET_PATH: untracked too.
# - A handle that goes over the Unix socket, then over TCP after
#   curl_easy_reset, or after CURLOPT_UNIX_SOCKET_PATH is set to NULL, is
#   guarded again on TCP: against a TCP upstream answering 500, the
#   backstop trips after the fifth TCP transfer, and only TCP transfers
#   settle.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need python3

N=6
guard=(RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=5 RESILIX_OPEN_MS=30000)
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"
SOCK=$RX_TMP/api.sock
ABS=resilix-test-$$-$RANDOM

rx_pyup_start unix --unix "$SOCK" --default 500
rx_pyup_start abs --unix "@$ABS" --default 500

# urls BASE K: K copies of BASE, each with its own -o /dev/null.
urls() {
	local _
	for _ in $(seq 1 "$2"); do
		printf '%s\n' -o /dev/null "$1"
	done
}

if rx_usable curl; then
	rx_upstream_start ok --phases 0:ok
	P=$RX_PORT
	mapfile -t tcp < <(urls "http://127.0.0.1:$P/tcp" 2)
	for how in "--unix-socket $SOCK" "--abstract-unix-socket $ABS"; do
		name=${how%% *}
		before_unix=$(rx_count unix) before_abs=$(rx_count abs)
		mapfile -t over < <(urls "http://127.0.0.1:$P/api" $N)
		# shellcheck disable=SC2086 # $how is an option and its value
		rx_shim "${guard[@]}" curl -s -w '%{http_code}\n' $how \
			"${over[@]}" --next -w '%{http_code}\n' "${tcp[@]}" \
			>"$out" 2>"$err"
		rx_assert_eq "$name: all answered, the TCP ones too" \
			"500 500 500 500 500 500 200 200" "$(paste -sd' ' "$out")"
		rx_assert_eq "$name: requests over the Unix socket" $N \
			$(($(rx_count unix) - before_unix + $(rx_count abs) - before_abs))
		rx_assert_eq "$name: settlements: the TCP transfers only" "2 2" \
			"$(rx_settles "$err") $(rx_settles "$err" curl)"
		rx_assert_no_grep "$name: nothing refused" 'event=refused' "$err"
	done
	rx_upstream_stop ok
fi

if rx_curl_client_usable; then
	# --- handles duplicated from a template that carries the option ------
	rx_shim "${guard[@]}" "$CURL_CLIENT" --dup --unix-socket "$SOCK" \
		--requests $N "http://127.0.0.1:$(rx_free_port)/dup" \
		>"$out" 2>"$err" || rx_fail "curl_client exit status $?"
	rx_assert_eq "duphandle: all answered 500 over the Unix socket" $N \
		"$(awk '$3 == 0 && $4 == 500' "$out" | wc -l | tr -d ' ')"
	rx_assert_eq "duphandle: settlements" 0 "$(rx_settles "$err")"

	# --- the option goes away: guarded again on TCP ----------------------
	rx_upstream_start bad --phases 0:status:500
	for how in --reset "" --fresh; do
		name=${how:-setopt NULL}
		before=$(rx_count bad)
		# shellcheck disable=SC2086 # $how is one option or none
		rx_shim "${guard[@]}" "$CURL_CLIENT" $how \
			--abstract-unix-socket "$ABS" --unix-until 3 --requests 9 \
			"http://127.0.0.1:$RX_PORT/x" >"$out" 2>"$err" ||
			rx_fail "curl_client exit status $?"
		rx_assert_eq "$name: 3 over the socket, 5 TCP 500s, then refused" \
			"0 500,0 500,0 500,0 500,0 500,0 500,0 500,0 500,7" \
			"$(awk '{ print $3 ($3 == 7 ? "" : " " $4) }' "$out" |
				paste -sd, -)"
		rx_assert_eq "$name: TCP requests upstream" 5 \
			$(($(rx_count bad) - before))
		rx_assert_eq "$name: settlements: the TCP transfers only" "5 5" \
			"$(rx_settles "$err") $(rx_settles "$err" curl)"
	done
	rx_upstream_stop bad
fi
rx_pass
