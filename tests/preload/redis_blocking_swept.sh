#!/bin/bash
# redis_blocking_swept.sh - a blocking Redis command written after its
# call's deadline was swept gives nothing back twice (ADR-660).
#
# A connection that connects and stays idle past RESILIX_TIMEOUT_MS (a
# pool's spare) has its deadline settled by the next admission on the key
# (ADR-382): as no evidence, with the permit the deadline armed, limiter
# slot included. Its first command is then a BLPOP, whose limiter slot
# ADR-654 gives back at the write: it was given back already. The shim
# gave it back again, so the limiter counted one call fewer than it had
# in flight - the other connection, connected and unanswered, was not
# counted, and each such connection raised the limit the limiter
# enforces by one. python3 speaks RESP on raw sockets to a real
# redis-server; the metrics file says what the limiter counts in flight
# while the other connection is outstanding: 1, as the guard counts.
. "$(dirname "$0")/lib.sh"
. "$RESILIX_SRCDIR/tests/support/redis_server.sh"
rx_need redis-server redis-cli python3 timeout
rx_require_build
rx_usable python3 || rx_skip "python3 cannot run in this build"
RX_TIMEOUT=20

rx_redis_start || rx_fail "redis-server did not start"
rx_dump_on_fail "$RX_REDIS_DIR/log"
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
rx_pass
