#!/bin/bash
# bad_config.sh - an invalid RESILIX_ value never breaks the host program:
# the shim prints exactly one line on stderr naming the variable (and the
# value), then passes everything through. The program still runs correctly
# (curl fetches a 200 from the upstream) and no policy guards it, even with
# otherwise aggressive settings and a failing upstream: ten 500s all reach
# the upstream, no breaker trips. Checked with curl and with the C client,
# one process each: each prints its own single line.
#
# RESILIX_FAILURE_RATE=1 is valid but can never be exceeded; the shim
# prints a one-line notice naming it (docs/design.md, "Configuration").
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
	# Accepted once, at 1.1 GB and 1 s per process start (ADR-205).
	"RESILIX_MAX_KEYS=1000000"
	# The other policies (ADR-463).
	"RESILIX_BULKHEAD=0"
	"RESILIX_RATE=50/x"
	"RESILIX_THROTTLE_K=0.5"
	"RESILIX_RETRY_ATTEMPTS=11"
	"RESILIX_RETRY_BUDGET=0.1234"
)

# check_case VAR=VALUE NAME OUT ERR CALLS: one guarded process printed
# exactly one line naming the variable and the value, and every one of the
# CALLS 500s it made reached the upstream.
check_case() {
	local c=$1 what=$2 err=$4 calls=$5 before=$6
	local var=${c%%=*} val=${c#*=}
	rx_assert_eq "$c ($what): stderr lines" 1 "$(wc -l <"$err" | tr -d ' ')"
	rx_assert_grep "$c ($what): the line names the variable" "$var" "$err"
	grep -qF -- "$val" "$err" ||
		rx_fail "$c ($what): the line does not show the value: $(cat "$err")"
	rx_assert_eq "$c ($what): every 500 reached the upstream (pass-through)" \
		"$calls" $(($(rx_count bad) - before))
}

i=0
for c in "${cases[@]}"; do
	i=$((i + 1))
	# The bad variable comes last, so it overrides a valid one of the
	# same name.

	# curl: a 200 from the healthy upstream, then ten 500s.
	if rx_usable curl; then
		out=$RX_TMP/curl$i.out err=$RX_TMP/curl$i.err
		before=$(rx_count bad)
		rx_shim "${valid[@]}" "$c" curl -s -o /dev/null \
			-w '%{http_code}\n' "http://127.0.0.1:$GOOD/ok" \
			"http://127.0.0.1:$BAD/[1-10]" >"$out" 2>"$err"
		rc=$?
		if [ "$rc" != 0 ] || [ "$(head -n1 "$out")" != 200 ] ||
			[ "$(grep -c '^500$' "$out")" != 10 ]; then
			rx_fail "$c: curl did not run correctly (exit $rc): $(paste -sd' ' "$out") / stderr: $(cat "$err")"
		fi
		check_case "$c" curl "$out" "$err" 10 "$before"
	fi

	# The C client: ten 500s, a new connection each.
	out=$RX_TMP/client$i.out err=$RX_TMP/client$i.err
	before=$(rx_count bad)
	rx_shim "${valid[@]}" "$c" "$CLIENT" --port "$BAD" --requests 10 \
		>"$out" 2>"$err" || rx_fail "$c: client exit status $?"
	rx_assert_eq "$c (client): calls answered 500" 10 \
		"$(grep -c ' 500 OK 1$' "$out")"
	check_case "$c" client "$out" "$err" 10 "$before"
done

# A valid but surprising value: a notice, and the program runs.
out=$RX_TMP/rate1.out err=$RX_TMP/rate1.err
rx_shim RESILIX_FAILURE_RATE=1 "$CLIENT" --port "$GOOD" --requests 3 \
	>"$out" 2>"$err" || rx_fail "RESILIX_FAILURE_RATE=1: client exit status $?"
rx_assert_eq "RESILIX_FAILURE_RATE=1: calls answered 200" 3 \
	"$(grep -c ' 200 OK 1$' "$out")"
rx_assert_eq "RESILIX_FAILURE_RATE=1: notice lines" 1 \
	"$(wc -l <"$err" | tr -d ' ')"
rx_assert_grep "RESILIX_FAILURE_RATE=1: the notice names the variable" \
	RESILIX_FAILURE_RATE "$err"

# The valid settings alone print nothing and do guard (control).
out=$RX_TMP/control.out err=$RX_TMP/control.err
before=$(rx_count bad)
rx_shim "${valid[@]}" "$CLIENT" --port "$BAD" --requests 10 \
	>"$out" 2>"$err" || rx_fail "control: client exit status $?"
rx_assert_eq "control: stderr lines with valid settings" 0 \
	"$(wc -l <"$err" | tr -d ' ')"
rx_assert_le "control: 500s that reached the upstream (guarded)" \
	$(($(rx_count bad) - before)) 4
rx_assert_ge "control: calls refused" "$(grep -c ' ECONNREFUSED 0$' "$out")" 6

# Each in range, together too large to reserve: one line naming both,
# from the shim and from the checker alike (ADR-166).
err=$RX_TMP/product.err
before=$(rx_count bad)
rx_shim RESILIX_MAX_KEYS=16384 RESILIX_WINDOW_CALLS=100000 "$CLIENT" \
	--port "$BAD" --requests 10 >/dev/null 2>"$err" || rx_fail "product: exit status $?"
rx_assert_eq "product: one line" 1 "$(wc -l <"$err" | tr -d ' ')"
rx_assert_grep "product: names both" 'RESILIX_MAX_KEYS=16384 x RESILIX_WINDOW_CALLS=100000' "$err"
rx_assert_eq "product: every 500 reached the upstream" 10 $(($(rx_count bad) - before))
RESILIX_MAX_KEYS=16384 RESILIX_WINDOW_CALLS=100000 \
	"$RESILIX_BUILDDIR/resilix-config" >/dev/null 2>&1 &&
	rx_fail "product: the checker called it valid"

# Control characters in a value (a newline, a terminal escape) never
# break the one line, nor reach the terminal: they are shown as '?'.
err=$RX_TMP/ctl.err
rx_shim RESILIX_INCLUDE=$'10.0.0.0/8,\e[31mbad\nX' "$CLIENT" --port "$GOOD" \
	--requests 1 >/dev/null 2>"$err" || rx_fail "control characters: exit status $?"
rx_assert_eq "control characters: one line" 1 "$(wc -l <"$err" | tr -d ' ')"
rx_assert_grep "control characters: shown as ?" '"10.0.0.0/8,.\[31mbad.X"' "$err"
rx_assert_eq "control characters: no escape byte" 0 "$(grep -c $'\e' "$err")"

# Names in any case (ADR-206): RESILIX_LOG=INFO used to be invalid,
# which disabled resilix altogether; so did RESILIX_LIMITER=VEGAS.
for c in RESILIX_LIMITER=VEGAS RESILIX_LIMITER=Off RESILIX_KEY=IP; do
	err=$RX_TMP/name-case.err
	rx_shim "${valid[@]}" "$c" "$CLIENT" --port "$BAD" --requests 10 \
		>/dev/null 2>"$err" || rx_fail "$c: exit status $?"
	rx_assert_eq "$c: accepted, nothing printed" 0 "$(wc -l <"$err" | tr -d ' ')"
done

for lv in INFO Info; do
	err=$RX_TMP/case$lv.err
	rx_shim "${valid[@]}" RESILIX_LOG=$lv "$CLIENT" --port "$BAD" \
		--requests 10 >/dev/null 2>"$err" || rx_fail "$lv: exit status $?"
	rx_assert_eq "RESILIX_LOG=$lv: no error" 0 "$(grep -c 'not valid' "$err")"
	rx_assert_grep "RESILIX_LOG=$lv: info lines" \
		'level=info .*event=breaker-transition' "$err"
done

# A variable twice in the environment (a program that builds its own):
# the first counts, as getenv reads it, and one warning says so, since a
# shell, and resilix-run, keep the last.
if rx_usable python3; then
	err=$RX_TMP/twice.err
	rx_shim python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
env = [e.encode() for e in ("%s=%s" % kv for kv in os.environ.items())]
env += [b"RESILIX_OPEN_MS=4000", b"RESILIX_OPEN_MS=abc"]
argv = [sys.argv[1].encode(), b"--port", sys.argv[2].encode(), b"--requests", b"1"]
A = ctypes.c_char_p * (len(argv) + 1)
E = ctypes.c_char_p * (len(env) + 1)
libc.execve(argv[0], A(*argv, None), E(*env, None))
sys.exit(127)' "$CLIENT" "$GOOD" >/dev/null 2>"$err" || rx_fail "twice: exit status $?"
	rx_assert_grep "twice: one warning naming it" \
		'RESILIX_OPEN_MS appears more than once in the environment; the first value counts' "$err"
	rx_assert_eq "twice: the first (valid) value counts" 0 "$(grep -c 'not valid' "$err")"
fi
rx_pass
