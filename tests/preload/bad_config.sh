#!/bin/bash
# bad_config.sh - an invalid RESILIX_ value never breaks the host program:
# the shim prints exactly one line on stderr naming the variable (and the
# value), then passes everything through. The program still runs correctly
# (curl fetches a 200 from the upstream) and no policy guards it, even with
# otherwise aggressive settings and a failing upstream: ten 500s all reach
# the upstream, no breaker trips.
#
# RESILIX_FAILURE_RATE=1 is valid but can never be exceeded; the shim
# prints a one-line notice naming it (DESIGN: "Configuration").
. "$(dirname "$0")/lib.sh"
rx_need curl
rx_require_build

rx_upstream_start good --phases 0:ok:0
GOOD=$RX_PORT
rx_upstream_start bad --phases 0:status:500
BAD=$RX_PORT

valid=(RESILIX_MIN_CALLS=2 RESILIX_WINDOW_CALLS=4 RESILIX_FAILURE_RATE=0.5
	RESILIX_CONSECUTIVE_BACKSTOP=2 RESILIX_OPEN_MS=30000)

cases=(
	"RESILIX_FAILURE_RATE=abc"
	"RESILIX_FAILURE_RATE=1.5"
	"RESILIX_SLOW_CALL_RATE=NaN"
	"RESILIX_SLOW_CALL_RATE=-0.1"
	"RESILIX_SLOW_CALL_MS=-5"
	"RESILIX_SLOW_CALL_MS=100ms"
	"RESILIX_MIN_CALLS=10x"
	"RESILIX_CONSECUTIVE_BACKSTOP=2.5"
	"RESILIX_OPEN_MS=99999999999999999999999"
	"RESILIX_HALF_OPEN_PROBES=-1"
	"RESILIX_WINDOW_CALLS=lots"
	"RESILIX_LOG=loud"
)

i=0
for c in "${cases[@]}"; do
	i=$((i + 1))
	var=${c%%=*} val=${c#*=}
	out=$RX_TMP/case$i.out err=$RX_TMP/case$i.err
	before=$(rx_count bad)
	# The bad variable comes last, so it overrides a valid one of the
	# same name.
	rx_shim "${valid[@]}" "$c" curl -s -o /dev/null -w '%{http_code}\n' \
		"http://127.0.0.1:$GOOD/ok" "http://127.0.0.1:$BAD/[1-10]" \
		>"$out" 2>"$err"
	rc=$?
	if [ "$rc" != 0 ] || [ "$(head -n1 "$out")" != 200 ] ||
		[ "$(grep -c '^500$' "$out")" != 10 ]; then
		rx_fail "$c: curl did not run correctly (exit $rc): $(paste -sd' ' "$out") / stderr: $(cat "$err")"
	fi
	rx_assert_eq "$c: stderr lines" 1 "$(wc -l <"$err" | tr -d ' ')"
	rx_assert_grep "$c: the line names the variable" "$var" "$err"
	grep -qF -- "$val" "$err" ||
		rx_fail "$c: the line does not show the value: $(cat "$err")"
	rx_assert_eq "$c: all ten 500s reached the upstream (pass-through)" 10 \
		$(($(rx_count bad) - before))
done

# A valid but surprising value: a notice, and the program runs.
out=$RX_TMP/rate1.out err=$RX_TMP/rate1.err
rx_shim RESILIX_FAILURE_RATE=1 curl -s -w '%{http_code}\n' -o /dev/null \
	"http://127.0.0.1:$GOOD/ok" >"$out" 2>"$err" ||
	rx_fail "RESILIX_FAILURE_RATE=1: curl exit status $?"
rx_assert_eq "RESILIX_FAILURE_RATE=1: curl fetched" 200 "$(cat "$out")"
rx_assert_eq "RESILIX_FAILURE_RATE=1: notice lines" 1 \
	"$(wc -l <"$err" | tr -d ' ')"
rx_assert_grep "RESILIX_FAILURE_RATE=1: the notice names the variable" \
	RESILIX_FAILURE_RATE "$err"

# The good settings alone print nothing and do guard (control).
out=$RX_TMP/control.out err=$RX_TMP/control.err
before=$(rx_count bad)
rx_shim "${valid[@]}" curl -s -o /dev/null -w '%{http_code}\n' \
	"http://127.0.0.1:$BAD/[1-10]" >"$out" 2>"$err"
rx_assert_eq "control: stderr lines with valid settings" 0 \
	"$(wc -l <"$err" | tr -d ' ')"
rx_assert_le "control: 500s that reached the upstream (guarded)" \
	$(($(rx_count bad) - before)) 4
rx_pass
