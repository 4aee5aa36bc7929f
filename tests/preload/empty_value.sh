#!/bin/bash
# empty_value.sh - an empty RESILIX_ value (`ENV RESILIX_LOG=` in a
# Dockerfile, `RESILIX_LOG_FILE= cmd`) is unset, with a one-line notice
# naming it, and the shim guards with everything else (ADR-340). It used
# to be an invalid value, which turned the whole shim off: every call
# passed through. `resilix-run --check` agrees: valid, the notice, and the
# variable shown at its default, "default (empty)". An empty value given
# to one of resilix-run's options is a usage error instead: nothing runs.
. "$(dirname "$0")/lib.sh"
rx_require_build
RUN=$RESILIX_SRCDIR/scripts/resilix-run
rx_upstream_start bad --phases 0:status:500
BAD=$RX_PORT
guard=(RESILIX_MIN_CALLS=2 RESILIX_WINDOW_CALLS=4 RESILIX_CONSECUTIVE_BACKSTOP=2
	RESILIX_OPEN_MS=30000)
err=$RX_TMP/err out=$RX_TMP/out
rx_dump_on_fail "$err" "$out"

for empty in RESILIX_LOG RESILIX_LOG_FILE RESILIX_OPEN_MS RESILIX_METRICS_FILE; do
	before=$(rx_count bad)
	rx_shim "${guard[@]}" "$empty=" "$CLIENT" --port "$BAD" --requests 10 \
		>"$out" 2>"$err" || rx_fail "$empty=: client exit status $?"
	rx_assert_eq "$empty=: one line on stderr" 1 "$(wc -l <"$err" | tr -d ' ')"
	rx_assert_grep "$empty=: a notice naming it, treated as unset" \
		"^resilix: $empty is set but empty; treated as unset" "$err"
	rx_assert_no_grep "$empty=: the shim is not disabled" 'disabled|pass through' "$err"
	rx_assert_le "$empty=: 500s that reached the upstream (guarded)" \
		$(($(rx_count bad) - before)) 4
	rx_assert_ge "$empty=: calls refused" "$(grep -c ' ECONNREFUSED 0$' "$out")" 6
done

# --check says the same.
timeout 10 env RESILIX_LOG= RESILIX_OPEN_MS=3000 "$RUN" --check >"$out" 2>"$err"
rx_assert_eq "--check with RESILIX_LOG= : exit status (valid)" 0 "$?"
rx_assert_grep "--check: says valid" '^# resilix configuration: valid$' "$out"
rx_assert_grep "--check: the notice" 'notice: RESILIX_LOG is set but empty; treated as unset' "$err"
rx_assert_grep "--check: the default level, from the default" \
	'^RESILIX_LOG +warn +default \(empty\)$' "$out"

# An empty value is unset for what combines variables too (ADR-596):
# RESILIX_LIMIT_INITIAL= leaves the limiter its learning period (it used
# to enforce the default 20 from the first call: 64 threads on a healthy
# upstream were refused), RESILIX_RETRY_MAX_MS= lets the default follow
# RESILIX_RETRY_BASE_MS (it used to be "BASE above MAX", the shim off),
# and a variable that needs another one says nothing more when empty.
rx_upstream_start slow --phases 0:ok:50
SLOW=$RX_PORT
rx_shim RESILIX_LIMIT_INITIAL= "$CLIENT" --port "$SLOW" --threads 64 \
	--requests 4 >"$out" 2>"$err" || rx_fail "LIMIT_INITIAL=: client exit status $?"
rx_assert_eq "LIMIT_INITIAL=: no call refused" 0 "$(grep -c ECONNREFUSED "$out")"
rx_assert_eq "LIMIT_INITIAL=: every call answered" 256 "$(grep -c ' 200 OK 1$' "$out")"
timeout 10 env RESILIX_RETRY_BASE_MS=2000 RESILIX_RETRY_MAX_MS= "$RUN" --check \
	>"$out" 2>"$err"
rx_assert_eq "RETRY_MAX_MS= with BASE 2000: --check says valid" 0 "$?"
for empty in RESILIX_RATE_BURST RESILIX_THROTTLE_PERIOD_MS \
	RESILIX_HEDGE_DELAY_MS RESILIX_CRITICALITY RESILIX_TENANT; do
	rx_shim "$empty=" "$CLIENT" --port "$SLOW" --requests 1 >"$out" 2>"$err" ||
		rx_fail "$empty=: client exit status $?"
	rx_assert_eq "$empty=: one line on stderr" 1 "$(wc -l <"$err" | tr -d ' ')"
done

# An empty option value: a usage error, and nothing runs.
for how in "--log=" "--log ''" "--state-file ''" "--open-ms="; do
	eval "timeout 10 \"\$RUN\" $how -- echo ran" >"$out" 2>"$err"
	rx_assert_eq "$how: exit status" 2 "$?"
	rx_assert_eq "$how: nothing ran" "" "$(cat "$out")"
	rx_assert_grep "$how: says the option needs a value" "option '--[a-z-]+' needs a value" "$err"
done
rx_pass
