#!/bin/bash
# sigpipe_log.sh - the shim's own writes never raise a SIGPIPE the program
# sees (ADR-362). A program that leaves SIGPIPE at its default action (it
# ends the program) runs with its stderr a pipe whose reader has gone:
#   1. at the default level, the start-up warning about a mistyped
#      variable, written before main, killed it;
#   2. with RESILIX_LOG=info against an upstream answering 500, the
#      breaker's transition lines killed it;
#   3. so did RESILIX_LOG_FILE naming a FIFO whose reader went away;
# and its own signal state is what it would be without the shim:
#   4. SIGPIPE blocked: nothing left pending by the shim's writes;
#   5. SIGPIPE blocked and one pending: still pending (not taken).
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3 mkfifo
PROG=$RESILIX_BUILDDIR/tests/support/sigpipe
[ -x "$PROG" ] || rx_fail "not built: $PROG"

rx_upstream_start fail --phases 0:status:500:100
guard=(RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=2 RESILIX_OPEN_MS=60000)

# The preload list as rx_shim makes it: in a sanitizer build the runtime
# comes first (and says nothing of the link order), or its own complaint,
# written to the broken stderr, would be the SIGPIPE.
export RX_PRELOAD="${RESILIX_SANITIZE_RUNTIME:+$RESILIX_SANITIZE_RUNTIME }$RESILIX_SO"
if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
fi

# broken VAR=value... PROGRAM ARGS...: run under the shim with stderr a
# pipe whose reader is gone; prints "rc=N <program's stdout>".
broken() {
	rx_plain python3 -c '
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
env = dict(os.environ)
args = sys.argv[1:]
while "=" in args[0]:
    k, v = args.pop(0).split("=", 1)
    env[k] = v
env["LD_PRELOAD"] = os.environ["RX_PRELOAD"]
p = subprocess.run(args, stderr=w, stdout=subprocess.PIPE, env=env,
                   restore_signals=True)
print("rc=%d %s" % (p.returncode, p.stdout.decode().strip()))
' "$@"
}

out=$(broken RESILIX_FAILURE_RAT=0.5 "$PROG" --port "$RX_PORT")
rx_assert_eq "start-up warning to a broken stderr" "rc=0 requests=1 pending=0" "$out"
out=$(broken "${guard[@]}" "$PROG" --port "$RX_PORT" --requests 6)
rx_assert_eq "transition lines to a broken stderr" "rc=0 requests=6 pending=0" "$out"
out=$(broken "${guard[@]}" "$PROG" --port "$RX_PORT" --requests 6 --blocked)
rx_assert_eq "SIGPIPE blocked: none left pending" "rc=0 requests=6 pending=0" "$out"
out=$(broken "${guard[@]}" "$PROG" --port "$RX_PORT" --requests 6 --pending)
rx_assert_eq "SIGPIPE blocked and pending: still pending" "rc=0 requests=6 pending=1" "$out"

# 3. A FIFO log file whose reader goes away once the shim has opened it
#    (before the first answer, which the upstream delays 100 ms).
mkfifo "$RX_TMP/log.fifo"
out=$(rx_plain python3 -c '
import os, subprocess, sys, time
fifo, prog, port = sys.argv[1:4]
r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
env = dict(os.environ, LD_PRELOAD=os.environ["RX_PRELOAD"],
           RESILIX_LOG="info", RESILIX_CONSECUTIVE_BACKSTOP="2",
           RESILIX_OPEN_MS="60000", RESILIX_LOG_FILE=fifo)
p = subprocess.Popen([prog, "--port", port, "--requests", "6"], env=env,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                     restore_signals=True)
# Wait until the program holds the FIFO open, then go away.
for _ in range(400):
    try:
        if any(os.path.realpath("/proc/%d/fd/%s" % (p.pid, f)) == os.path.realpath(fifo)
               for f in os.listdir("/proc/%d/fd" % p.pid)):
            break
    except OSError:
        pass
    time.sleep(0.005)
os.close(r)
o, _ = p.communicate()
print("rc=%d %s" % (p.returncode, o.decode().strip()))
' "$RX_TMP/log.fifo" "$PROG" "$RX_PORT")
rx_assert_eq "FIFO log file whose reader went away" "rc=0 requests=6 pending=0" "$out"
rx_pass
