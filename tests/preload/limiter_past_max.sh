#!/bin/bash
# limiter_past_max.sh - the default RESILIX_LIMIT_MAX (1000) is the learnt
# limit's ceiling, not a cap on a healthy program (ADR-625): an event loop
# that opens 1200 connections at once to one healthy upstream (python3
# asyncio, as node's fetch() and wrk -c1500 do) has every call answered
# at the defaults. A maximum the user sets still caps from the first
# call: RESILIX_LIMIT_MAX=1000 refuses the calls past it, limiter-full.
# Before, the default maximum bound in the learning period too and 200 of
# the 1200 were refused. About 5 s.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3
rx_usable python3 || rx_skip "python3 does not run with this build's preload"
N=1200
# Each connection is an fd in the client and one in the upstream.
ulimit -n $((N * 2 + 200)) 2>/dev/null ||
	ulimit -n "$(ulimit -H -n)" 2>/dev/null
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge $((N + 100)) ] ||
	rx_skip "ulimit -n $(ulimit -n) is below $((N + 100))"

rx_upstream_start many --phases 0:ok:0
out=$RX_TMP/py.out log=$RX_TMP/shim.log
rx_dump_on_fail "$log"
rx_shim RESILIX_LOG=debug RESILIX_LOG_FILE="$log" \
	python3 "$RESILIX_SRCDIR/tests/support/async_connects.py" "$RX_PORT" \
	"$N" >"$out" || rx_fail "python3 exit status $?"
rx_assert_eq "defaults: refused" 0 "$(grep -c '^refused$' "$out")"
rx_assert_eq "defaults: answered" "$N" "$(grep -c '^200$' "$out")"
rx_assert_eq "defaults: no refusal logged" 0 "$(grep -c 'event=refused' "$log")"

out2=$RX_TMP/py.max.out log2=$RX_TMP/shim.max.log
rx_dump_on_fail "$log2"
rx_shim RESILIX_LIMIT_MAX=1000 RESILIX_LOG=debug RESILIX_LOG_FILE="$log2" \
	python3 "$RESILIX_SRCDIR/tests/support/async_connects.py" "$RX_PORT" \
	"$N" >"$out2" || rx_fail "python3 exit status $?"
rx_assert_ge "LIMIT_MAX=1000 set: calls past it refused" \
	"$(grep -c '^refused$' "$out2")" 1
rx_assert_ge "LIMIT_MAX=1000 set: the first 1000 answered" \
	"$(grep -c '^200$' "$out2")" 1000
rx_assert_eq "LIMIT_MAX=1000 set: every refusal limiter-full" \
	"$(grep -c '^refused$' "$out2")" \
	"$(grep -c 'event=refused reason=limiter-full' "$log2")"
rx_pass
