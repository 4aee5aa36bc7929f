#!/bin/bash
# run_options.sh - resilix-run's own options.
#   - A value the shim would refuse, given to an option, is a usage error:
#     exit 2, one line in the parser's words naming the option, and the
#     program does not run (ADR-341). `--open-ms abc -- prog` used to run
#     prog unguarded after the shim's one-line notice. Options that only
#     clash together (--limit-min above --limit-max) too. The same value
#     in the environment stays the shim's: one line, and the program runs,
#     passing through.
#   - --check shows a value an option gave as "option --NAME" (told to
#     resilix-config with --source, ADR-369), not
#     "environment", and keeps its source column in line whatever the
#     length of the values (ADR-342).
#   - --version prints the version; --status on a missing file says so in
#     one line, not with Python's "[Errno 2]".
. "$(dirname "$0")/lib.sh"
rx_require_build
RUN=$RESILIX_SRCDIR/scripts/resilix-run
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"
export RESILIX_SO
# A program that runs under the shim needs a sanitizer build's runtime
# preloaded first (ADR-200), as resilix-run keeps it.
if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
	export LD_PRELOAD=$RESILIX_SANITIZE_RUNTIME
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

while read -r args; do
	# shellcheck disable=SC2086 # the words of $args are the options
	timeout 10 "$RUN" $args -- echo ran >"$out" 2>"$err"
	rx_assert_eq "$args: exit status" 2 "$?"
	rx_assert_eq "$args: the program did not run" "" "$(cat "$out")"
	rx_assert_grep "$args: says why, naming the option" \
		"^resilix-run: option '--[a-z-]+': RESILIX_[A-Z_]+.* (is not valid|is above|is outside)" "$err"
	rx_assert_eq "$args: no line from the shim" 0 "$(grep -c '^resilix:' "$err")"
done <<'EOF2'
--open-ms abc
--failure-rate 1.5
--log loud
--limiter fast
--open-ms=10x
--slow-call-ms 3000 --window-calls lots
--limit-min 10 --limit-max 5
--limit-initial 2000
--include 10.0.0.0/99
EOF2
rx_assert_grep "the accepted values are named" 'accepted: ' "$err"
timeout 10 "$RUN" --open-ms abc -- echo ran >"$out" 2>"$err"
rx_assert_grep "--open-ms abc: the line" \
	"^resilix-run: option '--open-ms': RESILIX_OPEN_MS=\"abc\" is not valid \\(accepted: integer milliseconds 1\\.\\.86400000\\)$" "$err"

# The environment's bad value is not the wrapper's to refuse: the program
# runs, and the shim says it passes through.
timeout 10 env RESILIX_OPEN_MS=abc "$RUN" --log info -- echo ran >"$out" 2>"$err"
rx_assert_eq "RESILIX_OPEN_MS=abc in the environment: exit status" 0 "$?"
rx_assert_eq "...the program ran" ran "$(cat "$out")"
rx_assert_grep "...the shim's line" '^resilix: RESILIX_OPEN_MS="abc" is not valid.*pass through' "$err"
# ...and an option overrides it.
timeout 10 env RESILIX_OPEN_MS=abc "$RUN" --open-ms 3000 -- echo ran >"$out" 2>"$err"
rx_assert_eq "an option over a bad variable: the program ran" ran "$(cat "$out")"
rx_assert_eq "an option over a bad variable: nothing said" "" "$(cat "$err")"
# Good options run the program, and say nothing.
timeout 10 "$RUN" --open-ms 3000 --log-file "$RX_TMP/log" --disable -- echo ran >"$out" 2>"$err"
rx_assert_eq "good options: the program ran" ran "$(cat "$out")"
rx_assert_eq "good options: nothing said" "" "$(cat "$err")"

# --check: where each value comes from, in line.
long=$RX_TMP/a-long-directory-name-for-the-log-file-of-this-program/and-more/resilix.log
timeout 10 env RESILIX_FAILURE_RATE=0.25 "$RUN" --open-ms 3000 --log-file "$long" \
	--check >"$out" 2>"$err"
rx_assert_eq "--check exit status" 0 "$?"
rx_assert_grep "an option's value: from the option" \
	'^RESILIX_OPEN_MS +3000 +option --open-ms$' "$out"
rx_assert_grep "a long one too" "^RESILIX_LOG_FILE +$long +option --log-file\$" "$out"
rx_assert_grep "the environment's: from the environment" \
	'^RESILIX_FAILURE_RATE +0\.25 +environment$' "$out"
rx_assert_grep "a default's" '^RESILIX_WINDOW_CALLS +100 +default$' "$out"
# Every source starts in the same column.
cols=$(awk '/^RESILIX_/ { s = $0; sub(/ +(default|environment|option).*$/, "", s)
	match($0, / (default|environment|option)/); print RSTART }' "$out" | sort -u | wc -l)
rx_assert_eq "the source column: one start for every row" 1 "$(echo $cols)"
# resilix-config itself says so, without the wrapper redoing its table
# (ADR-369): told the options' sources, sized to its longest value, and
# an empty variable is the default's.
timeout 10 env RESILIX_LOG_FILE="$long" RESILIX_OPEN_MS=3000 RESILIX_LOG= \
	"$RESILIX_BUILDDIR/resilix-config" --source \
	"RESILIX_OPEN_MS=option --open-ms" >"$out" 2>"$err"
rx_assert_grep "resilix-config --source: the option named" \
	'^RESILIX_OPEN_MS +3000 +option --open-ms$' "$out"
rx_assert_grep "resilix-config: an empty variable" \
	'^RESILIX_LOG +warn +default \(empty\)$' "$out"
cols=$(awk '/^RESILIX_/ { match($0, / (default|environment|option)/); print RSTART }' \
	"$out" | sort -u | wc -l)
rx_assert_eq "resilix-config: one source column with a long value" 1 "$(echo $cols)"

# --version, and --status on a file that is not there.
timeout 10 "$RUN" --version >"$out" 2>"$err"
rx_assert_eq "--version: exit status" 0 "$?"
want=$(sed -n 's/^AC_INIT(\[resilix\], \[\([^]]*\)\].*/\1/p' "$RESILIX_SRCDIR/configure.ac")
rx_assert_eq "--version: the version" "resilix-run (resilix) $want" "$(cat "$out")"
timeout 10 "$RUN" --version=1 >"$out" 2>"$err"
rx_assert_eq "--version=1: exit status" 2 "$?"
if rx_usable python3; then
	timeout 10 "$RUN" --status "$RX_TMP/missing.prom" >"$out" 2>"$err"
	rx_assert_eq "--status on a missing file: exit status" 2 "$?"
	rx_assert_eq "--status on a missing file: one line" 1 "$(wc -l <"$err" | tr -d ' ')"
	rx_assert_grep "...said as a shell says it" \
		"^resilix-status: $RX_TMP/missing\\.prom: No such file or directory" "$err"
	rx_assert_no_grep "...no Python errno" 'Errno' "$err"
fi
rx_pass
