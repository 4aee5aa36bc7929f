#!/bin/bash
# shared_deadline.sh - RESILIX_TIMEOUT_MS on a shared key (ADR-382,
# ADR-491): a call past its deadline is a timeout from the next admission
# or settlement its own process makes on the key, and the breaker every
# process shares learns it then; a forked child never settles the calls
# its parent armed.
#
# 1. One process, two calls to an upstream that answers after 1,000 ms
#    under a 100 ms deadline, then a call every 100 ms: refused from
#    200 ms on (the breaker, window 2, rate 0.5, trips when they pass).
# 2. The same two calls in one process and one call at 200 ms; a second
#    process calling from 400 ms on is refused before the answers come.
# 3. A parent with a late call in flight forks; the child closes its
#    copy of the connection and exits; the parent's next call settles its
#    deadline. The key then holds exactly one timeout and no call in
#    flight (a fresh process's metrics file): the child settled nothing.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3
out=$RX_TMP/out out2=$RX_TMP/out2 err=$RX_TMP/err prom=$RX_TMP/m.prom
rx_dump_on_fail "$out" "$out2" "$err" "$prom"

guard=(RESILIX_TIMEOUT_MS=100 RESILIX_MIN_CALLS=2 RESILIX_WINDOW_CALLS=2
	RESILIX_FAILURE_RATE=0.5 RESILIX_CONSECUTIVE_BACKSTOP=0
	RESILIX_LIMITER=off RESILIX_OPEN_MS=5000)

# tests/support/timed_calls.py: its header says what it prints.
calls=$RESILIX_SRCDIR/tests/support/timed_calls.py
count() { awk -v w="$2" -v f="$3" '$1 >= f && $2 == w' "$1" | wc -l; }

# --- 1. one process on a shared key ----------------------------------------
rx_upstream_start late --phases 0:ok:1000
rx_shim "${guard[@]}" RESILIX_SHARED="$RX_TMP/seg1" \
	python3 "$calls" "$RX_PORT" 2 12 100 100 >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
rx_assert_eq "1: the two late calls still get their answers" 2 \
	"$(awk '$1 < 50 && $2 == "answered"' "$out" | wc -l)"
rx_assert_eq "1: later calls refused from 200 ms on" \
	"$(awk '$1 >= 190' "$out" | wc -l)" "$(count "$out" refused 190)"
rx_assert_le "1: requests that reached the upstream" "$(rx_count late)" 3
rx_upstream_stop late

# --- 2. the other process learns it through the shared breaker -----------
rx_upstream_start late2 --phases 0:ok:1000
rx_shim "${guard[@]}" RESILIX_SHARED="$RX_TMP/seg2" \
	python3 "$calls" "$RX_PORT" 2 1 100 200 "$RX_TMP/mark" >"$out" \
	2>"$err" &
p1=$!
# The second process starts once the first one's call at 200 ms is
# done (a loaded machine may take longer than 200 ms to get there).
for _ in $(seq 100); do
	[ -s "$RX_TMP/mark" ] && break
	sleep 0.05
done
rx_shim "${guard[@]}" RESILIX_SHARED="$RX_TMP/seg2" \
	python3 "$calls" "$RX_PORT" 0 4 100 0 >"$out2" 2>>"$err" ||
	rx_fail "second client exit status $?"
wait $p1 || rx_fail "first client exit status $?"
rx_assert_eq "2: the first process's call at 200 ms" "refused" \
	"$(awk '$1 >= 150 { print $2 }' "$out")"
rx_assert_eq "2: the second process refused before the answers" 4 \
	"$(count "$out2" refused 0)"
rx_assert_eq "2: requests that reached the upstream" 2 "$(rx_count late2)"
rx_upstream_stop late2

# --- 3. a forked child settles none of its parent's calls -----------------
rx_upstream_start late3 --phases 0:ok:1000
fork='
import os, socket, sys, time
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
pid = os.fork()
if pid == 0:
    time.sleep(0.2)
    s.close()
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.2)
# The next call on the key: its admission settles the passed deadline.
try:
    socket.create_connection(("127.0.0.1", port)).close()
    print("next call admitted")
except ConnectionRefusedError:
    print("next call refused")
print("parent", s.recv(100).split(b"\r\n")[0].decode())
'
rx_shim "${guard[@]}" RESILIX_SHARED="$RX_TMP/seg3" RESILIX_LOG=debug \
	python3 -c "$fork" "$RX_PORT" >"$out" 2>"$err" ||
	rx_fail "fork client exit status $?"
# Settled twice (by the child's copy of the ring, then by the parent),
# the one call would fill the window of 2 with timeouts and open the
# circuit.
rx_assert_eq "3: the parent's next call, and its answer" "next call admitted
parent HTTP/1.1 200 OK" "$(cat "$out")"
rx_assert_eq "3: the child settled nothing" 0 \
	"$(grep -c 'event=settle verdict=timeout' "$err")"
rx_assert_grep "3: its deadline settled it" 'event=deadline-passed settled=1' \
	"$err"
rx_shim "${guard[@]}" RESILIX_SHARED="$RX_TMP/seg3" \
	RESILIX_METRICS_FILE="$prom" RESILIX_METRICS_INTERVAL_MS=0 "$CLIENT" \
	--port "$RX_PORT" --requests 1 >/dev/null 2>>"$err" ||
	rx_fail "fresh client failed"
rx_assert_eq "3: calls in flight on the key afterwards" 0 \
	"$(awk '/^resilix_calls_in_flight\{/ {print $2}' "$prom")"
# The parent's timeout, the fresh call's (answered after its deadline)
# and the parent's connect with no request (no evidence).
rx_assert_eq "3: the key's settled calls" "rejected=1 timeout=2" \
	"$(sed -n 's/^resilix_calls_total{.*verdict="\([a-z_]*\)"} \([0-9]*\)$/\1=\2/p' \
		"$prom" | grep -v '=0$' | sort | paste -sd' ')"
rx_upstream_stop late3
rx_pass
