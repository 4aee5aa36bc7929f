#!/bin/bash
# deadline_lazy.sh - a call outstanding past RESILIX_TIMEOUT_MS is a
# timeout from the moment its deadline passes (ADR-382): the next
# admission on its key settles it, with no timer and no thread, and its
# late answer is no further evidence (the program still gets its bytes).
#
# 1. Two calls to an upstream that answers after 1,000 ms, under a 100 ms
#    deadline, then a call every 100 ms: the breaker (window 2, rate 0.5)
#    trips at the first admission after the deadlines, so the later calls
#    are refused instead of reaching the upstream until the answers come.
# 2. The same two calls, one call after their deadline, then both late
#    answers read: exactly 2 timeouts in the metrics file, not 4.
# 3. 16 threads blocked on a black-holed upstream: a call made after the
#    deadline is refused, long before any thread's own socket timeout.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3
out=$RX_TMP/out err=$RX_TMP/err prom=$RX_TMP/metrics.prom
rx_dump_on_fail "$out" "$err" "$prom"

guard=(RESILIX_TIMEOUT_MS=100 RESILIX_MIN_CALLS=2 RESILIX_WINDOW_CALLS=2
	RESILIX_FAILURE_RATE=0.5 RESILIX_CONSECUTIVE_BACKSTOP=0
	RESILIX_LIMITER=off RESILIX_OPEN_MS=5000)

# tests/support/timed_calls.py: its header says what it prints.
calls=$RESILIX_SRCDIR/tests/support/timed_calls.py
count() { awk -v w="$2" -v f="$3" '$1 >= f && $2 == w' "$1" | wc -l; }

# --- 1. two late calls, then a call every 100 ms --------------------------
rx_upstream_start late --phases 0:ok:1000
t0=$(rx_now_ms)
rx_shim "${guard[@]}" python3 "$calls" "$RX_PORT" 2 12 100 100 \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
t=$(($(rx_now_ms) - t0))
rx_assert_eq "the two late calls still get their answers" 2 \
	"$(awk '$1 < 50 && $2 == "answered"' "$out" | wc -l)"
# The call at 100 ms may come just before the deadlines pass; every one
# from 200 ms on finds them passed.
rx_assert_eq "later calls refused from 200 ms on" \
	"$(awk '$1 >= 190' "$out" | wc -l)" "$(count "$out" refused 190)"
rx_assert_ge "later calls refused" "$(count "$out" refused 50)" 11
rx_assert_le "requests that reached the upstream" "$(rx_count late)" 3
rx_assert_le "run time (ms)" "$t" 6000
rx_upstream_stop late

# --- 2. the late answers are no evidence: 2 timeouts, not 4 ----------------
rx_upstream_start late2 --phases 0:ok:1000
rx_shim "${guard[@]}" RESILIX_LOG=debug RESILIX_METRICS_FILE="$prom" \
	python3 "$calls" "$RX_PORT" 2 1 100 300 >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
rx_assert_eq "outcomes" "0 answered
0 answered" "$(awk '$2 == "answered"' "$out")"
rx_assert_eq "the call after the deadlines" "refused" \
	"$(awk '$1 >= 50 { print $2 }' "$out")"
rx_assert_grep "settled when the deadlines passed" \
	'event=deadline-passed settled=2' "$err"
rx_assert_eq "late answers skipped" 2 \
	"$(grep -c 'event=settle-skipped reason=deadline-passed' "$err")"
[ -s "$prom" ] || rx_fail "no metrics file written"
verdicts=$(sed -n 's/^resilix_calls_total{.*verdict="\([a-z_]*\)"} \([0-9]*\)$/\1=\2/p' \
	"$prom" | grep -v '=0$' | sort | paste -sd' ')
rx_assert_eq "verdict counts in the metrics file" "timeout=2" "$verdicts"
rx_upstream_stop late2

# --- 3. a black hole with 16 threads blocked on it -------------------------
rx_upstream_start hole --phases 0:hang
rx_shim "${guard[@]}" python3 "$calls" "$RX_PORT" 16 1 100 300 \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
rx_assert_eq "blocked threads" 16 "$(awk '$1 < 50 && $2 == "silent"' "$out" | wc -l)"
rx_assert_eq "a call after the deadline" "refused" \
	"$(awk '$1 >= 50 { print $2 }' "$out")"
rx_upstream_stop hole
# Connections opened ahead of use (ADR-384): 5 connected and idle for
# 1.5 s under a 1 s deadline are not waiting; then 3 requests on new
# connections and one on an idle one (timed from its first write, its
# deadline re-armed) are all answered, and the circuit stays closed. Before, the
# 5 idle deadlines were timeouts, the breaker opened and the requests
# were refused.
rx_upstream_start idle --phases 0:ok:0
idle='
import socket, sys, time
port = int(sys.argv[1])
pool = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
time.sleep(1.5)
def ask(s):
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    print(s.recv(12).decode())
try:
    for i in range(3):
        ask(socket.create_connection(("127.0.0.1", port)))
    ask(pool[0])
except OSError as e:
    print("error", e)
'
ilog=$RX_TMP/idle.log
rx_dump_on_fail "$ilog" "$out.idle"
rx_shim RESILIX_TIMEOUT_MS=1000 RESILIX_LOG=debug RESILIX_LOG_FILE="$ilog" \
	python3 -c "$idle" "$RX_PORT" >"$out.idle" || rx_fail "python3 exit status $?"
rx_assert_eq "idle connections: requests answered" 4 \
	"$(grep -c '^HTTP/1.. 200' "$out.idle")"
rx_assert_eq "idle connections: no breaker transition" 0 \
	"$(grep -c 'event=breaker-transition' "$ilog")"
rx_pass
