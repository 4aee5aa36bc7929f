#!/bin/bash
# check_status.sh - `resilix-run --check` and `resilix-run --status`.
#   --check: exit 0 and every variable with its value and source on a good
#   environment; exit 1 with the parser's one-line explanation on a bad one
#   (a bad value, a combination the core refuses); options given to
#   resilix-run count like variables; a program after --check is a usage
#   error, with or without '--'. --status: an empty or missing FILE, or a
#   program after it, is a usage error; a table from a real metrics file written by a run that
#   tripped one breaker and left another closed; the open one first, with
#   why; exit 1 while a breaker is open, 2 for a file that is not one: a
#   FIFO, /dev/zero or a directory ("not a regular file", without blocking
#   or reading), a file over 64 MiB (ADR-230).
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3
RUN=$RESILIX_SRCDIR/scripts/resilix-run
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

# --- --check, good ----------------------------------------------------------
timeout 10 env RESILIX_FAILURE_RATE=0.25 "$RUN" --open-ms 3000 --check \
	>"$out" 2>"$err"
rx_assert_eq "--check exit status, valid" 0 "$?"
rx_assert_grep "says valid" '^# resilix configuration: valid$' "$out"
rx_assert_grep "a variable from the environment" \
	'^RESILIX_FAILURE_RATE +0\.25 +environment$' "$out"
rx_assert_grep "an option counts as the variable, said as given by it" \
	'^RESILIX_OPEN_MS +3000 +option --open-ms$' "$out"
rx_assert_grep "a default, with its value" '^RESILIX_WINDOW_CALLS +100 +default$' "$out"
rx_assert_grep "an off default says so" \
	'^RESILIX_SLOW_CALL_MS +unset \(slow-call condition off\) +default$' "$out"
rx_assert_grep "the limiter's default algorithm" '^RESILIX_LIMITER +vegas +default$' "$out"
rx_assert_grep "the metrics interval default" \
	'^RESILIX_METRICS_INTERVAL_MS +5000 +default$' "$out"
# Every variable the parser knows is listed, once.
n=$(grep -c '^RESILIX_' "$out")
rx_assert_ge "variables listed" "$n" 20
rx_assert_eq "no variable listed twice" "$n" \
	"$(grep '^RESILIX_' "$out" | awk '{print $1}' | sort -u | wc -l | tr -d ' ')"
rx_assert_eq "nothing on stderr for a clean environment" "" "$(cat "$err")"

# --- --check, bad -----------------------------------------------------------
timeout 10 env RESILIX_OPEN_MS=abc "$RUN" --check >"$out" 2>"$err"
rx_assert_eq "--check exit status, bad value" 1 "$?"
rx_assert_grep "names the variable, the value and the range" \
	'error: RESILIX_OPEN_MS="abc" is not valid \(accepted: integer milliseconds 1\.\.86400000\)' \
	"$err"
rx_assert_grep "says not valid" '^# resilix configuration: NOT VALID' "$out"
rx_assert_grep "shows what was set" '^RESILIX_OPEN_MS +abc +environment$' "$out"
timeout 10 "$RUN" --failure-rate 1.5 --check >"$out" 2>"$err"
rx_assert_eq "--check exit status, a rate above 1 given as an option" 1 "$?"
timeout 10 env RESILIX_FAILURE_RATE=1 "$RUN" --check >"$out" 2>"$err"
rx_assert_eq "--check exit status, rate 1 (valid, with a notice)" 0 "$?"
rx_assert_grep "the notice about a rate of 1" 'notice: RESILIX_FAILURE_RATE=1 disables' "$err"
# A setting that can do nothing in this configuration says so.
for v in CRITICALITY=bulk TENANT=batch; do
	timeout 10 env RESILIX_$v "$RUN" --check >"$out" 2>"$err"
	rx_assert_eq "--check exit status, RESILIX_$v without a segment" 0 "$?"
	rx_assert_grep "RESILIX_$v without a segment: a notice" \
		"notice: RESILIX_${v%%=*} is set without RESILIX_SHARED; it sheds nothing" "$err"
done
timeout 10 env RESILIX_OPNE_MS=10 "$RUN" --check >"$out" 2>"$err"
rx_assert_eq "--check exit status, a typo is a warning" 0 "$?"
rx_assert_grep "the typo is named" 'warning: RESILIX_OPNE_MS is not a resilix variable' "$err"
timeout 10 env RESILIX_METRICS_FILE=$RX_TMP/none/m.prom "$RUN" --check >"$out" 2>"$err"
rx_assert_eq "--check exit status, metrics directory missing (a warning)" 0 "$?"
rx_assert_grep "the missing directory is named" \
	"warning: RESILIX_METRICS_FILE=.*directory $RX_TMP/none is not writable" "$err"
timeout 10 "$RUN" --check -- true >"$out" 2>"$err"
rx_assert_eq "--check with a program is a usage error" 2 "$?"
# Without '--' too: said as such, not "expected '--' before the program".
timeout 10 "$RUN" --check true >"$out" 2>"$err"
rx_assert_eq "--check true: exit status" 2 "$?"
rx_assert_grep "--check true: says --check runs no program" \
	"^resilix-run: --check runs no program \('true'\)$" "$err"
# An empty --status= was dropped and the program ran.
for how in --status= "--status ''" "--status --"; do
	eval "timeout 10 \"\$RUN\" $how -- echo ran" >"$out" 2>"$err"
	rx_assert_eq "$how: exit status" 2 "$?"
	rx_assert_eq "$how: the program did not run" "" "$(cat "$out")"
	rx_assert_grep "$how: says why" "option '--status' needs a metrics file" "$err"
done
timeout 10 "$RUN" --status "$RX_TMP/m.prom" -- echo ran >"$out" 2>"$err"
rx_assert_eq "--status with a program: exit status" 2 "$?"
rx_assert_grep "--status with a program: says it runs none" \
	"^resilix-run: --status runs no program \('echo'\)$" "$err"

# --- --status on what is not a metrics file by its type or size ------------
# A FIFO used to block in open() for a writer that never comes, /dev/zero
# was read until memory ran out, and a huge file was read whole. Each is
# now one line and exit 2, without reading. The memory bound makes the
# old behaviour fail fast instead of eating the machine.
status_bounded() { # FILE: --status under 5 s and 512 MiB
	(ulimit -v 524288 && timeout 5 "$RUN" --status "$1") >"$out" 2>"$err"
}
mkfifo "$RX_TMP/fifo"
for f in "$RX_TMP/fifo" /dev/zero "$RX_TMP"; do
	status_bounded "$f"
	rx_assert_eq "--status on $f: exit status" 2 "$?"
	rx_assert_eq "--status on $f: one line, not a regular file" "1 1" \
		"$(wc -l <"$err" | tr -d ' ') $(grep -c ": not a regular file" "$err")"
done
# Metrics files are small: one over the 64 MiB cap is refused by its size
# (sparse files: nothing is written to disk).
for size in $((64 * 1024 * 1024 + 1)) 1G; do
	truncate -s "$size" "$RX_TMP/big.prom"
	status_bounded "$RX_TMP/big.prom"
	rx_assert_eq "--status on a $size-byte file: exit status" 2 "$?"
	rx_assert_eq "--status on a $size-byte file: one line, too large" "1 1" \
		"$(wc -l <"$err" | tr -d ' ') $(grep -c 'larger than' "$err")"
done
rm -f "$RX_TMP/big.prom"

# --- --status on a real metrics file ---------------------------------------
rx_usable python3 || rx_pass "(--status part skipped: python3 cannot run in this build)"
prom=$RX_TMP/m.prom
rx_upstream_start bad --phases 0:status:500
bad=$RX_PORT
rx_upstream_start good --phases 0:ok
good=$RX_PORT
# One program calls both: a failing upstream and a healthy one.
rx_shim RESILIX_METRICS_FILE="$prom" RESILIX_MIN_CALLS=10 \
	RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=60000 python3 - \
	"$good" "$bad" >/dev/null 2>&1 <<'PY' || rx_fail "python client"
import sys, urllib.request
good, bad = sys.argv[1], sys.argv[2]
for i in range(15):
    for port in (good, bad):
        try:
            urllib.request.urlopen("http://127.0.0.1:%s/%d" % (port, i)).read()
        except Exception:
            pass
PY
timeout 10 "$RUN" --status "$prom" >"$out" 2>"$err"
rx_assert_eq "--status exit status with an open breaker" 1 "$?"
rx_dump_on_fail "$prom"
cat "$out" | sed 's/^/# /'
rx_assert_grep "header" '^key +state +calls +window +fail% +slow% +p50 +p99 +limit +in-flight +refused$' "$out"
# p50 and p99 from the latency histogram's buckets: a duration.
dur='[0-9.]+(us|ms|s)'
rx_assert_eq "the open breaker's row comes first" "127.0.0.1:$bad open" \
	"$(sed -n 2p "$out" | awk '{print $1, $2}')"
rx_assert_grep "its calls, failure % and refusals" \
	"^127\\.0\\.0\\.1:$bad +open +10 +10 +100 +0 +$dur +$dur +[0-9]+ +0 +5 \\(circuit-open 5\\)$" "$out"
rx_assert_grep "the closed one, 15 calls, no failures" \
	"^127\\.0\\.0\\.1:$good +closed +15 +15 +0 +0 +$dur +$dur +[0-9]+ +0 +0$" "$out"
rx_assert_grep "why it is open" \
	"^127\\.0\\.0\\.1:$bad is open: failure rate 100%, .* over 10 calls" "$out"
rx_assert_grep "the probe time, counted down from the write" \
	"; probe in (59|60)\\.[0-9] s$" "$out"
rx_assert_grep "the file's age, and the process that wrote it (no %p)" \
	'^2 keys; written (just now|[0-9] s ago) by pid [0-9]+$' "$out"
# The same file two minutes later (its writer long gone): the open
# period it shows has run out since.
touch -d '-120 seconds' "$prom"
timeout 10 "$RUN" --status "$prom" >"$out" 2>"$err"
rx_assert_grep "an old file: the probe is due, not 'in 60 s'" \
	'; probe due \(the open period ended after the file was written\)$' "$out"
rx_assert_grep "an old file: its age" '^2 keys; written 1[12][0-9] s ago by pid [0-9]+$' "$out"
# The quantiles are read from the buckets as histogram_quantile reads
# them: 10 calls in (100 us, 250 us], 10 in (250 us, 500 us], none above.
# p50 (rank 10) is the top of the first bucket; p99 (rank 19.8) is 98 %
# of the way through the second: 250 + 0.98 * 250 = 495 us.
cat >"$RX_TMP/h.prom" <<'EOF'
# HELP resilix_call_latency_seconds Time to first byte.
# TYPE resilix_call_latency_seconds histogram
resilix_call_latency_seconds_bucket{key="k",le="0.0001"} 0
resilix_call_latency_seconds_bucket{key="k",le="0.00025"} 10
resilix_call_latency_seconds_bucket{key="k",le="0.0005"} 20
resilix_call_latency_seconds_bucket{key="k",le="+Inf"} 20
resilix_call_latency_seconds_sum{key="k"} 0.006
resilix_call_latency_seconds_count{key="k"} 20
resilix_call_latency_seconds_bucket{key="none",le="0.0001"} 0
resilix_call_latency_seconds_bucket{key="none",le="+Inf"} 0
resilix_registry_keys 2
EOF
timeout 10 "$RUN" --status "$RX_TMP/h.prom" >"$out" 2>"$err"
rx_assert_eq "--status on a hand-made histogram: exit status" 0 "$?"
sed 's/^/# /' "$out"
rx_assert_eq "p50 and p99 interpolated within their buckets" "250us 495us" \
	"$(awk '$1 == "k" {print $7, $8}' "$out")"
rx_assert_eq "a key without calls has no quantiles" "- -" \
	"$(awk '$1 == "none" {print $7, $8}' "$out")"
echo 'not metrics' >"$RX_TMP/junk"
timeout 10 "$RUN" --status "$RX_TMP/junk" >"$out" 2>"$err"
rx_assert_eq "--status on a file that is not metrics" 2 "$?"
timeout 10 "$RUN" --status "$RX_TMP/missing" >"$out" 2>"$err"
rx_assert_eq "--status on a missing file" 2 "$?"
# A state file given by mistake: said in one line, no traceback.
printf 'RXSN\001\356\377' >"$RX_TMP/state"
timeout 10 "$RUN" --status "$RX_TMP/state" >"$out" 2>"$err"
rx_assert_eq "--status on a state file" 2 "$?"
rx_assert_eq "--status on a state file: one line saying so" \
	"1 1" "$(wc -l <"$err" | tr -d ' ') $(grep -c 'a resilix state file' "$err")"
printf '\356\377' >"$RX_TMP/binary"
timeout 10 "$RUN" --status "$RX_TMP/binary" >"$out" 2>"$err"
rx_assert_eq "--status on a binary file" 2 "$?"
rx_assert_no_grep "--status on a binary file: no traceback" Traceback "$err"
rx_pass
