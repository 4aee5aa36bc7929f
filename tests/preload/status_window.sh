#!/bin/bash
# status_window.sh - `resilix-run --status` of a process that started from
# a state file. Its window holds the calls of the processes before it, its
# counters only its own: the row said "calls 0 fail% 100" while the line
# below said "over 5 calls in the window". The row now shows the window's
# calls beside the rates computed over them, and the line agrees with it
# (ADR-343). A metrics file says which process wrote it, %p or not
# (ADR-368).
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3
rx_usable python3 || rx_skip "python3 cannot run in this build"
RUN=$RESILIX_SRCDIR/scripts/resilix-run
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"
rx_upstream_start bad --phases 0:status:500
guard=(RESILIX_CONSECUTIVE_BACKSTOP=5 RESILIX_OPEN_MS=60000
	RESILIX_STATE_FILE=$RX_TMP/state)
# Five failures trip the breaker; the state file carries it over.
rx_shim "${guard[@]}" "$CLIENT" --port "$RX_PORT" --requests 6 >/dev/null 2>&1 ||
	rx_fail "first client: exit status $?"
# The next process is refused at once (no call settles) and writes its
# metrics at exit.
prom=$RX_TMP/m.prom
rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$prom" "$CLIENT" --port "$RX_PORT" \
	--requests 2 >/dev/null 2>&1 || rx_fail "second client: exit status $?"
timeout 10 "$RUN" --status "$prom" >"$out" 2>"$err"
rx_assert_eq "--status exit status (open)" 1 "$?"
sed 's/^/# /' "$out"
rx_assert_grep "the header names the window" \
	'^key +state +calls +window +fail% +slow% +p50 +p99 +limit +in-flight +refused$' "$out"
row=$(grep "^127\\.0\\.0\\.1:$RX_PORT " "$out")
set -- $row
rx_assert_eq "calls this process settled" 0 "$3"
rx_assert_eq "calls in the window, beside its rates" 5 "$4"
rx_assert_eq "the failure rate over them" 100 "$5"
rx_assert_eq "no latency quantiles without a settled call" "- -" "$7 $8"
rx_assert_grep "the line below says the same window" \
	"is open: failure rate 100%, slow-call rate 0% over $4 calls in the window" "$out"
rx_assert_grep "the file names its writer, %p or not (ADR-368)" '; written .* by pid [0-9]+$' "$out"

# With %p, the file says whose it is.
rx_shim RESILIX_METRICS_FILE="$RX_TMP/w-%p.prom" "$CLIENT" --port "$RX_PORT" \
	--requests 1 >/dev/null 2>&1 &
pid=$!
wait "$pid"
# rx_shim runs timeout, which runs env, which execs the client: the
# client is timeout's child, so its pid is the file's.
f=$(ls "$RX_TMP"/w-*.prom 2>/dev/null | head -n1)
if [ -n "$f" ]; then
	p=${f##*/w-} p=${p%.prom}
	timeout 10 "$RUN" --status "$f" >"$out" 2>"$err"
	rx_assert_grep "a %p file: written by that pid" "; written .* by pid $p\$" "$out"
else
	# Each process removes its %p file at exit: read one while it runs.
	rx_shim RESILIX_METRICS_FILE="$RX_TMP/w-%p.prom" RESILIX_METRICS_INTERVAL_MS=0 \
		python3 -c '
import os, socket, subprocess, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"); s.recv(100)
f = "%s/w-%d.prom" % (sys.argv[2], os.getpid())
for _ in range(100):
    if os.path.exists(f): break
    time.sleep(0.05)
r = subprocess.run(["env", "-u", "LD_PRELOAD", sys.argv[3], "--status", f],
                   capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
print(r.stdout, end=""); print("PID", os.getpid())' "$RX_PORT" "$RX_TMP" "$RUN" >"$out" 2>"$err"
	p=$(sed -n 's/^PID //p' "$out")
	[ -n "$p" ] || rx_fail "the %p writer did not report its pid"
	rx_assert_grep "a %p file: written by that pid" "; written .* by pid $p\$" "$out"
fi
rx_pass
