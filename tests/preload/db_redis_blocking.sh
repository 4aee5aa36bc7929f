#!/bin/bash
# db_redis_blocking.sh - Redis commands that block on purpose (BLPOP,
# XREAD BLOCK, ...) against a real redis-server: their wait is the
# program's wish, not the server's latency (ADR-650).
#
# - A queue consumer, redis-cli repeating `BLPOP q 1` on an empty list
#   with RESILIX_SLOW_CALL_MS=300 and RESILIX_TIMEOUT_MS=400, is never
#   slow, never a timeout and never refused: its output is what it is
#   without the shim, its calls settle as successes at=blocking, the
#   slow-call and timeout counts stay 0, no transition. So is
#   `XREAD BLOCK 500` (lower case); a plain XREAD is an ordinary call.
# - Two connections of one process (a python3 RESP client on raw
#   sockets): a BLPOP blocked for 1.5 s while the other connection sends
#   PINGs every 50 ms, with RESILIX_TIMEOUT_MS=300. The PINGs' admissions
#   sweep the deadlines of their key (ADR-382): the BLPOP's must not be
#   among them. Then an LPUSH from another client answers a second BLPOP
#   after about 300 ms: a success. Every call is a success, 0 timeouts.
# - What blocking commands do not hide: a command that is slow without
#   asking to be (`DEBUG SLEEP 0.4`) still counts slow and trips the
#   slow-call rate, and BLPOP's refusals while the circuit is open are
#   as fast as any other command's.
. "$(dirname "$0")/lib.sh"
. "$RESILIX_SRCDIR/tests/support/redis_server.sh"
rx_need redis-server redis-cli python3 timeout
rx_require_build
rx_usable redis-cli || rx_skip "redis-cli cannot run in this build"
RX_TIMEOUT=30

rx_redis_start --enable-debug-command yes || rx_fail "redis-server did not start"
rx_dump_on_fail "$RX_REDIS_DIR/log"
cli=(redis-cli -h 127.0.0.1 -p "$RX_REDIS_PORT")
counts() { # FILE: "success timeout slow" from the metrics file
	local v out=""
	for v in success timeout; do
		out="$out $(sed -n "s/^resilix_calls_total{.*verdict=\"$v\"} //p" "$1" |
			awk '{ s += $1 } END { print s + 0 }')"
	done
	echo $out "$(sed -n 's/^resilix_slow_calls_total{[^}]*} //p' "$1" |
		awk '{ s += $1 } END { print s + 0 }')"
}
guard=(RESILIX_LOG=debug RESILIX_SLOW_CALL_MS=300 RESILIX_TIMEOUT_MS=400
	RESILIX_MIN_CALLS=4 RESILIX_CONSECUTIVE_BACKSTOP=3 RESILIX_OPEN_MS=30000)

# --- a consumer waiting on an empty list -----------------------------------
rx_plain "${cli[@]}" -r 4 blpop q 1 >"$RX_TMP/plain.out" 2>&1
m=$RX_TMP/blpop.prom err=$RX_TMP/blpop.err
rx_dump_on_fail "$err"
rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$m" "${cli[@]}" -r 4 blpop q 1 \
	>"$RX_TMP/shim.out" 2>"$err"
rc=$?
rx_assert_eq "BLPOP consumer: exit status" 0 "$rc"
cmp -s "$RX_TMP/plain.out" "$RX_TMP/shim.out" ||
	{ diff "$RX_TMP/plain.out" "$RX_TMP/shim.out"; rx_fail "BLPOP output differs under the shim"; }
rx_assert_eq "BLPOP consumer: settled as waits" 4 \
	"$(grep -c 'event=settle verdict=success latency_us=[0-9]\{7\} at=blocking' "$err")"
rx_assert_eq "BLPOP consumer: success timeout slow" "4 0 0" "$(counts "$m")"
rx_assert_eq "BLPOP consumer: transitions" "" "$(rx_transitions "$err")"
rx_assert_eq "BLPOP consumer: refusals" 0 "$(grep -c 'event=refused' "$err")"

m=$RX_TMP/xread.prom err=$RX_TMP/xread.err
rx_dump_on_fail "$err"
rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$m" "${cli[@]}" -r 3 \
	xread block 500 streams s '$' >/dev/null 2>"$err"
rx_assert_eq "XREAD BLOCK: settled as waits" 3 \
	"$(grep -c 'event=settle verdict=success .* at=blocking' "$err")"
rx_assert_eq "XREAD BLOCK: success timeout slow" "3 0 0" "$(counts "$m")"
rx_shim "${guard[@]}" "${cli[@]}" xread streams s 0 >/dev/null 2>"$err"
rx_assert_eq "plain XREAD: an ordinary call" 1 \
	"$(grep -c 'event=settle verdict=success .* at=first-byte' "$err")"

# --- one process, two connections: the other's admissions sweep ----------
if rx_usable python3; then
	cat >"$RX_TMP/two.py" <<'PYEOF'
import socket, sys, threading, time
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("127.0.0.1", port))
    return s, s.makefile("rb")
def cmd(c, *args):
    s, f = c
    s.sendall(b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
    line = f.readline()
    if line[:1] == b"*" and int(line[1:]) > 0:
        for _ in range(2 * int(line[1:]) // 2):
            f.readline(); f.readline()
    return line.strip().decode()
a, b = conn(), conn()
cmd(a, b"PING"); cmd(b, b"PING")
out = {}
def waiter():
    out["first"] = cmd(a, b"BLPOP", b"q2", b"1.5")
    out["second"] = cmd(a, b"BLPOP", b"q2", b"5")
t = threading.Thread(target=waiter); t.start()
end = time.monotonic() + 1.7
while time.monotonic() < end:
    cmd(b, b"PING"); time.sleep(0.05)
time.sleep(0.3)
print(cmd(b, b"LPUSH", b"q2", b"job"))
t.join()
print(out["first"], out["second"])
PYEOF
	m=$RX_TMP/two.prom err=$RX_TMP/two.err
	rx_dump_on_fail "$err" "$RX_TMP/two.out"
	rx_shim RESILIX_LOG=debug RESILIX_TIMEOUT_MS=300 RESILIX_METRICS_FILE="$m" \
		python3 "$RX_TMP/two.py" "$RX_REDIS_PORT" >"$RX_TMP/two.out" 2>"$err"
	rx_assert_eq "two connections: what the program saw" ":1 *-1 *2" \
		"$(tr '\n' ' ' <"$RX_TMP/two.out" | sed 's/ $//')"
	rx_assert_eq "two connections: timeouts" 0 "$(counts "$m" | cut -d' ' -f2)"
	rx_assert_eq "two connections: the BLPOPs settled as waits" 2 \
		"$(grep -c 'event=settle verdict=success .* at=blocking' "$err")"
	rx_assert_eq "two connections: transitions" "" "$(rx_transitions "$err")"

	# 20 consumers blocked in BLPOP and a writer on its own connection,
	# one process: the learning period's probe held admission to half
	# the concurrency it had seen, fewer slots than the waiting
	# consumers hold, got no sample and never ended; the writer waited
	# out its queue timeout and was refused, SET after SET (ADR-653).
	cat >"$RX_TMP/crowd.py" <<'PYEOF'
import socket, sys, threading, time
port = int(sys.argv[1])
def resp(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
stop = time.monotonic() + 3
def consumer():
    s = socket.create_connection(("127.0.0.1", port)); f = s.makefile("rb")
    while time.monotonic() < stop:
        s.sendall(resp(b"BLPOP", b"crowdq", b"1")); f.readline()
threads = [threading.Thread(target=consumer) for _ in range(20)]
for t in threads:
    t.start()
ok = failed = 0
while time.monotonic() < stop:
    try:
        s = socket.create_connection(("127.0.0.1", port)); f = s.makefile("rb")
        while time.monotonic() < stop:
            s.sendall(resp(b"SET", b"k", b"v"))
            if f.readline() != b"+OK\r\n":
                raise OSError("no reply")
            ok += 1
    except OSError:
        failed += 1
for t in threads:
    t.join()
print("failed", failed, "many", 1 if ok > 1000 else 0)
PYEOF
	err=$RX_TMP/crowd.err
	rx_dump_on_fail "$err"
	rx_shim RESILIX_LOG=debug python3 "$RX_TMP/crowd.py" "$RX_REDIS_PORT" \
		>"$RX_TMP/crowd.out" 2>"$err"
	rx_assert_eq "BLPOP crowd and a writer: what the writer saw" \
		"failed 0 many 1" "$(cat "$RX_TMP/crowd.out")"
	rx_assert_eq "BLPOP crowd and a writer: refusals" 0 \
		"$(grep -c 'event=refused' "$err")"

	# The same crowd when -OOM answers bind the limit for a second: the
	# consumers' waits held 20 slots, so the writer was refused after
	# the recovery too, until the consumers' waits ended - and they
	# began again (ADR-654). Their slots go back while they wait.
	sed -e 's/^stop = time.monotonic() + 3$/stop = time.monotonic() + 4/' \
		-e 's/^ok = failed = 0$/ok = failed = late = 0/' \
		-e 's/^            ok += 1$/            ok += 1; late += time.monotonic() > stop - 1.2/' \
		-e 's/^            if f.readline() != b"+OK\\r\\n":$/            if f.readline()[:1] != b"+" and time.monotonic() < stop - 1.2:/' \
		-e 's/^print("failed".*$/print("late", 1 if late > 300 else 0)/' \
		"$RX_TMP/crowd.py" >"$RX_TMP/crowd_oom.py"
	(sleep 1 && rx_plain "${cli[@]}" config set maxmemory 1 >/dev/null &&
		sleep 1 && rx_plain "${cli[@]}" config set maxmemory 0 >/dev/null) &
	oom=$!
	err=$RX_TMP/crowd_oom.err
	rx_dump_on_fail "$err" "$RX_TMP/crowd_oom.out"
	rx_shim RESILIX_LOG=info python3 "$RX_TMP/crowd_oom.py" "$RX_REDIS_PORT" \
		>"$RX_TMP/crowd_oom.out" 2>"$err"
	wait "$oom"
	rx_plain "${cli[@]}" config set maxmemory 0 >/dev/null
	rx_assert_eq "BLPOP crowd, after an -OOM second: the writer's SETs again" \
		"late 1" "$(cat "$RX_TMP/crowd_oom.out")"
else
	rx_log "NOTE: python3 cannot run in this build: its part is skipped"
fi

# --- a command slow without asking still is slow ---------------------------
err=$RX_TMP/slow.err
rx_dump_on_fail "$err"
rx_shim "${guard[@]}" RESILIX_TIMEOUT_MS=5000 "${cli[@]}" -r 6 debug sleep 0.4 \
	>/dev/null 2>"$err"
rx_assert_grep "DEBUG SLEEP: trips on the slow-call rate" \
	'event=breaker-transition from=closed to=open reason=slow-call-rate' "$err"
rx_assert_grep "DEBUG SLEEP: then refused" 'event=refused' "$err"
rx_log "blocking commands judged by their answers, not their waits"
