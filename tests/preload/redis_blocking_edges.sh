#!/bin/bash
# redis_blocking_edges.sh - what a blocking Redis command's call gives back
# and decides at its edges (ADR-660, ADR-661), against a real
# redis-server, with a python3 RESP client on raw sockets.
#
# - Swept first (ADR-660): a connection that connects and stays idle past
#   RESILIX_TIMEOUT_MS (a pool's spare) has its deadline settled by the
#   next admission on the key (ADR-382), as no evidence, with the permit
#   the deadline armed, limiter slot included. Its first command is then
#   a BLPOP, whose limiter slot ADR-654 gives back at the write: it was
#   given back already. The shim gave it back again, so the limiter
#   counted one call fewer than it had in flight: the metrics file, read
#   while another connection is connected and unanswered, must say 1 for
#   the limiter as for the guard.
# - Behind (ADR-661): `SET a 1` and `BLPOP q 0.6` in one write, the SET's
#   +OK read - the answer that decides the batch's call (ADR-404) - then
#   `GET a` written while the BLPOP waits: Redis answers in order, so the
#   GET's call is answered by the BLPOP's nil 0.6 s later. With
#   RESILIX_TIMEOUT_MS=400 every such GET was a timeout that lowered the
#   limit, with RESILIX_SLOW_CALL_MS=300 a slow call, on a healthy server:
#   now no timeout, no slow call, no limit change, the GETs at=blocking.
. "$(dirname "$0")/lib.sh"
. "$RESILIX_SRCDIR/tests/support/redis_server.sh"
rx_need redis-server redis-cli python3 timeout
rx_require_build
rx_usable python3 || rx_skip "python3 cannot run in this build"
RX_TIMEOUT=20

rx_redis_start || rx_fail "redis-server did not start"
rx_dump_on_fail "$RX_REDIS_DIR/log"

# --- swept first -----------------------------------------------------------
cat >"$RX_TMP/swept.py" <<'PYEOF'
import re, socket, sys, time
port, mfile, idle = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
def conn():
    return socket.create_connection(("127.0.0.1", port), timeout=5)
def cmd(s, *a):
    s.sendall(b"*%d\r\n" % len(a) +
              b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a))
    return s.recv(4096)
a = conn()           # admitted at its connect, the deadline armed
time.sleep(idle)     # idle: past RESILIX_TIMEOUT_MS, or not
b = conn()           # admitted; sweeps a's passed deadline
print("blpop", cmd(a, b"BLPOP", b"q", b"0.2"), flush=True)
for _ in range(2):   # calls that write the metrics file
    c = conn(); cmd(c, b"PING"); c.close(); time.sleep(0.05)
txt = open(mfile).read()
def gauge(n):
    m = re.search(n + r'\{[^}]*\} (\d+)', txt)
    return m.group(1) if m else "none"
print("in_flight calls=%s limiter=%s" % (gauge("resilix_calls_in_flight"),
      gauge("resilix_limiter_in_flight_calls")), flush=True)
b.close(); a.close()
PYEOF
for idle in 0.1 0.7; do
	m=$RX_TMP/swept.$idle.prom out=$RX_TMP/swept.$idle.out
	rx_dump_on_fail "$out"
	rx_shim RESILIX_TIMEOUT_MS=500 RESILIX_METRICS_FILE="$m" \
		RESILIX_METRICS_INTERVAL_MS=10 python3 "$RX_TMP/swept.py" \
		"$RX_REDIS_PORT" "$m" "$idle" >"$out" 2>&1 ||
		rx_fail "idle $idle: exit status $?"
	rx_assert_eq "idle $idle: BLPOP answered nil" 1 \
		"$(grep -c "^blpop b'\*-1" "$out")"
	rx_assert_eq "idle $idle: the outstanding connection, counted once" \
		"in_flight calls=1 limiter=1" "$(grep '^in_flight' "$out")"
done

# --- behind a blocking command -----------------------------------------
cat >"$RX_TMP/behind.py" <<'PYEOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
f = s.makefile("rb")
def enc(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x)
                                          for x in a)
for i in range(4):
    s.sendall(enc(b"SET", b"a", b"1") + enc(b"BLPOP", b"q", b"0.6"))
    ok = f.readline()
    s.sendall(enc(b"GET", b"a"))   # written while the BLPOP waits
    print(ok, f.readline(), f.readline(), f.readline(), flush=True)
PYEOF
m=$RX_TMP/behind.prom err=$RX_TMP/behind.err out=$RX_TMP/behind.out
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_TIMEOUT_MS=400 RESILIX_SLOW_CALL_MS=300 \
	RESILIX_METRICS_FILE="$m" python3 "$RX_TMP/behind.py" "$RX_REDIS_PORT" \
	>"$out" 2>"$err" || rx_fail "exit status $?"
rx_assert_eq "every reply in order" 4 \
	"$(grep -c "^b'+OK\\\\r\\\\n' b'\*-1\\\\r\\\\n' b'\$1\\\\r\\\\n' b'1\\\\r\\\\n'" "$out")"
rx_assert_eq "the GETs waited behind the BLPOPs" 4 \
	"$(grep -c 'event=settle verdict=success .* at=blocking' "$err")"
rx_assert_eq "no timeout" 0 \
	"$(sed -n 's/^resilix_calls_total{.*verdict="timeout"} //p' "$m" |
		awk '{ s += $1 } END { print s + 0 }')"
rx_assert_eq "no slow call" 0 \
	"$(sed -n 's/^resilix_slow_calls_total{[^}]*} //p' "$m" |
		awk '{ s += $1 } END { print s + 0 }')"
rx_assert_eq "no limit change" 0 "$(grep -c 'event=limit-change' "$err")"
rx_pass
