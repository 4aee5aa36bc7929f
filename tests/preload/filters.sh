#!/bin/bash
# filters.sh - RESILIX_INCLUDE and RESILIX_EXCLUDE choose which
# destinations are guarded (ADR-143), end to end.
#
# The upstream answers 500. Guarded, the breaker (3 calls, rate 0.5) opens
# after 3 requests and the other 7 are refused; unguarded, all 10 reach the
# upstream. Each pattern form is checked in the direction it should act.
# A malformed pattern is a configuration error: one line on stderr, and
# every call passes through. (The parser's IPv6 and port-53 cases are in
# tests/unit/test_filter.)
. "$(dirname "$0")/lib.sh"
rx_require_build

rx_upstream_start f --phases 0:status:500
P=$RX_PORT
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

# refused ENV...: how many of 10 new-connection requests were refused.
refused() {
	rx_shim RESILIX_FAILURE_RATE=0.5 RESILIX_MIN_CALLS=3 \
		RESILIX_WINDOW_CALLS=10 RESILIX_CONSECUTIVE_BACKSTOP=0 \
		RESILIX_OPEN_MS=30000 "$@" "$CLIENT" --port "$P" --requests 10 \
		>"$out" 2>"$err" || rx_fail "client exit status $?"
	grep -c ' ECONNREFUSED 0$' "$out"
}

rx_assert_eq "no filter: guarded" 7 "$(refused)"
rx_assert_eq "include 127.0.0.0/8: guarded" 7 \
	"$(refused RESILIX_INCLUDE=127.0.0.0/8)"
rx_assert_eq "include 127.0.0.1:PORT: guarded" 7 \
	"$(refused RESILIX_INCLUDE=127.0.0.1:$P)"
rx_assert_eq "include *:PORT among others: guarded" 7 \
	"$(refused "RESILIX_INCLUDE=10.0.0.0/8, *:$P")"
rx_assert_eq "include 10.0.0.0/8: not guarded" 0 \
	"$(refused RESILIX_INCLUDE=10.0.0.0/8)"
rx_assert_eq "include another port: not guarded" 0 \
	"$(refused RESILIX_INCLUDE=127.0.0.1:$((P == 65535 ? 1 : P + 1)))"
rx_assert_eq "include an IPv6 network: not guarded" 0 \
	"$(refused RESILIX_INCLUDE=fd00::/8)"
rx_assert_eq "exclude 127.0.0.1: not guarded" 0 \
	"$(refused RESILIX_EXCLUDE=127.0.0.1)"
rx_assert_eq "exclude *:PORT: not guarded" 0 \
	"$(refused RESILIX_EXCLUDE=*:$P)"
rx_assert_eq "exclude wins over include" 0 \
	"$(refused RESILIX_INCLUDE=127.0.0.0/8 RESILIX_EXCLUDE=127.0.0.1:$P)"
rx_assert_eq "exclude another network: guarded" 7 \
	"$(refused RESILIX_EXCLUDE=192.168.0.0/16,[::1]:$P)"

for bad in 127.0.0.0/33 "127.0.0.1:$P," "localhost:$P" "*:0"; do
	rx_assert_eq "malformed '$bad': pass-through" 0 \
		"$(refused "RESILIX_INCLUDE=$bad")"
	rx_assert_eq "malformed '$bad': stderr lines" 1 \
		"$(wc -l <"$err" | tr -d ' ')"
	rx_assert_grep "malformed '$bad': the line names the variable" \
		'^resilix: RESILIX_INCLUDE=".*" is not valid: .*resilix is disabled' \
		"$err"
done
rx_assert_eq "malformed exclude: pass-through" 0 \
	"$(refused RESILIX_EXCLUDE=1.2.3.4/8/8)"
rx_pass
