#!/bin/bash
# retry_connect.sh - the socket layer retries a blocking connect that
# failed before anything was sent (ADR-466), inside its one admission:
#   - a listener that starts 300 ms after the program's first connect:
#     with RESILIX_RETRY_ATTEMPTS=5 the program's one connect succeeds,
#     later, and its request is answered; the breaker saw one call;
#   - 200 connects to a dead port (the breaker's trips turned off, so
#     every call is a first attempt) make at most budget-many retries:
#     the floor of 10 in any 10 s plus 0.1 per first attempt; the others
#     are refused budget-exceeded and the program sees the connect's own
#     ECONNREFUSED;
#   - RESILIX_TIMEOUT_MS bounds the whole sequence: no retry starts after
#     it, so the program's connect fails when it asked, give or take the
#     last attempt's own few ms;
#   - a non-blocking connect is never retried.
. "$(dirname "$0")/lib.sh"
rx_need python3
rx_require_build

# --- a late listener -------------------------------------------------------
port=$(rx_free_port)
out=$RX_TMP/late.out log=$RX_TMP/late.log
rx_dump_on_fail "$out" "$log"
rx_plain python3 -c '
import socket, sys, time
open(sys.argv[2], "w").close()
time.sleep(0.3)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
s.settimeout(10)
c, _ = s.accept()
buf = b""
while b"\r\n\r\n" not in buf:
    buf += c.recv(4096)
c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
c.close()' "$port" "$RX_TMP/late.up" >"$RX_TMP/late.srv" 2>&1 &
RX_PIDS="$RX_PIDS $!"
# Its 300 ms count from when it runs, not from when python3 was started
# (slow on a loaded machine): the client starts then.
rx_wait_for 20 test -e "$RX_TMP/late.up" || rx_fail "the late listener never ran"
rx_shim RESILIX_RETRY_ATTEMPTS=5 RESILIX_RETRY_BASE_MS=400 RESILIX_LOG=debug \
	RESILIX_LOG_FILE="$log" "$CLIENT" --port "$port" >"$out" ||
	rx_fail "client exit status $?"
rx_assert_eq "late listener: the one connect succeeded, answered" 1 \
	"$(grep -c ' 200 OK 1$' "$out")"
retries=$(grep -c 'event=retry at=connect' "$log")
rx_assert_between "late listener: retries made" "$retries" 1 4
rx_assert_eq "late listener: one call settled, a success" 1 \
	"$(grep -c 'event=settle verdict=success' "$log")"
rx_assert_eq "late listener: no failure settled" 0 \
	"$(grep -c 'event=settle verdict=transient' "$log")"
lat=$(awk '{print int($3 / 1000)}' "$out")
rx_assert_ge "late listener: the connect took longer (ms)" "$lat" 150

# --- 200 connects to a dead port ----------------------------------------
dead=$(rx_free_port)
out=$RX_TMP/dead.out log=$RX_TMP/dead.log
rx_dump_on_fail "$out" "$log"
rx_shim RESILIX_RETRY_ATTEMPTS=5 RESILIX_RETRY_BASE_MS=1 RESILIX_RETRY_MAX_MS=5 \
	RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_FAILURE_RATE=1 RESILIX_LOG=debug \
	RESILIX_LOG_FILE="$log" "$CLIENT" --port "$dead" --requests 200 \
	>"$out" 2>/dev/null || rx_fail "client exit status $?"
rx_assert_eq "dead port: every connect failed with the peer's ECONNREFUSED" 200 \
	"$(grep -c ' 0 ECONNREFUSED 0$' "$out")"
retries=$(grep -c 'event=retry at=connect' "$log")
# Floor: 1 a second over the 10 s ttl; ratio 0.1 of 200 first attempts.
rx_assert_le "dead port: retries (budget 10 + 0.1 x 200)" "$retries" 30
rx_assert_ge "dead port: retries (the floor was used)" "$retries" 10
rx_assert_ge "dead port: retries refused budget-exceeded" \
	"$(grep -c 'event=refused reason=budget-exceeded at=connect' "$log")" 150
rx_assert_eq "dead port: one settlement per call" 200 \
	"$(grep -c 'event=settle ' "$log")"
dead_retries=$retries

# --- one deadline for the sequence ---------------------------------------
out=$RX_TMP/deadline.out log=$RX_TMP/deadline.log
t0=$(rx_now_ms)
rx_shim RESILIX_RETRY_ATTEMPTS=10 RESILIX_RETRY_BASE_MS=100 \
	RESILIX_RETRY_MAX_MS=100 RESILIX_TIMEOUT_MS=150 RESILIX_LOG=debug \
	RESILIX_LOG_FILE="$log" "$CLIENT" --port "$dead" >"$out" ||
	rx_fail "client exit status $?"
took=$(($(rx_now_ms) - t0))
rx_assert_eq "deadline: the connect failed" 1 "$(grep -c ' ECONNREFUSED ' "$out")"
lat=$(awk '{print int($3 / 1000)}' "$out")
# No retry starts at or after the deadline; the last one's own refused
# connect takes a few ms more (more under a sanitizer), where ten
# attempts with up to 100 ms between them would take about 450 ms.
rx_assert_le "deadline: the connect returned about RESILIX_TIMEOUT_MS (ms)" "$lat" 250
# Full jitter draws each wait from 0..100 ms, so how many retries fit in
# 150 ms is random; what must hold is that each began before the deadline
# (a retry's line is written as it begins, after its backoff), counted
# from the shim's start line, with 20 ms for the log's millisecond stamps
# and the first connect.
last=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^ts=/) {
		split(substr($i, 15, 12), t, ":"); ms = (t[1] * 3600 + t[2] * 60 + t[3]) * 1000 }
	if ($0 ~ /event=start /) s = ms
	if ($0 ~ /event=retry at=connect/) { n++; l = ms - s } }
	END { print (n ? int(l) : -1) }' "$log")
rx_assert_ge "deadline: at least one retry was made" "$last" 0
rx_assert_le "deadline: the last retry began before the deadline (ms after start)" \
	"$last" 170

# --- non-blocking connects are never retried -------------------------------
if rx_usable python3; then
	log=$RX_TMP/nb.log
	rx_shim RESILIX_RETRY_ATTEMPTS=5 RESILIX_LOG=debug RESILIX_LOG_FILE="$log" \
		python3 -c '
import socket, sys
s = socket.socket()
s.setblocking(False)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except BlockingIOError:
    pass
except ConnectionRefusedError:
    pass' "$dead" || rx_fail "python3 exit status $?"
	rx_assert_eq "non-blocking: no retry" 0 "$(grep -c 'event=retry' "$log")"
fi
rx_log "figures: late listener retries=$(grep -c 'event=retry' "$RX_TMP/late.log") connect_ms=$(awk '{print int($3/1000)}' "$RX_TMP/late.out"); dead port retries=$dead_retries of 200 connects; deadline connect_ms=$lat"
rx_pass
