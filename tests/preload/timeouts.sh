#!/bin/bash
# timeouts.sh - calls that never answer, or answer late (ADR-145), and a
# non-blocking connect to a refused port from python3 asyncio.
#
# RESILIX_TIMEOUT_MS is a deadline per call, applied without threads when
# the program next touches the fd: a response whose first byte comes after
# it is a timeout (the program still gets its bytes: nothing is cut); a
# non-blocking read that would block past it settles the call as a
# timeout at once; a close past it is a timeout. Without it, the same
# close is an abandonment (rejected, no evidence).
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

settles() { # FILE: "verdict,at" of each settle line
	grep 'event=settle' "$1" |
		sed -n 's/.*verdict=\([a-z]*\).* at=\([a-z-]*\).*/\1,\2/p' |
		paste -sd' '
}

# 1. A late answer (800 ms) under a 300 ms deadline: timeout; the client
#    still reads its 200.
rx_upstream_start late --phases 0:ok:800
rx_shim RESILIX_LOG=debug RESILIX_TIMEOUT_MS=300 "$CLIENT" --port "$RX_PORT" \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
rx_assert_eq "late answer: the program's result" "200 OK 1" \
	"$(cut -d' ' -f4- "$out")"
rx_assert_eq "late answer: settled" "timeout,deadline" "$(settles "$err")"
rx_shim RESILIX_LOG=debug "$CLIENT" --port "$RX_PORT" >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
rx_assert_eq "late answer, no deadline: settled" "success,first-byte" \
	"$(settles "$err")"

# 2. No answer at all; a non-blocking client polls with recv for 1.2 s,
#    then closes.
rx_upstream_start hang --phases 0:hang
poll='
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
s.setblocking(False)
end = time.monotonic() + 1.2
while time.monotonic() < end:
    try:
        s.recv(100)
    except BlockingIOError:
        time.sleep(0.05)
s.close()
print("done")
'
rx_shim RESILIX_LOG=debug RESILIX_TIMEOUT_MS=300 python3 -c "$poll" \
	"$RX_PORT" >"$out" 2>"$err" || rx_fail "poller exit status $?"
rx_assert_eq "unanswered, polled past the deadline" "timeout,deadline" \
	"$(settles "$err")"
rx_shim RESILIX_LOG=debug python3 -c "$poll" "$RX_PORT" >"$out" 2>"$err" ||
	rx_fail "poller exit status $?"
rx_assert_eq "unanswered, no deadline: abandoned at close" "rejected,close" \
	"$(settles "$err")"

# Abandonment past the slow threshold (no deadline set) is a timeout too.
rx_shim RESILIX_LOG=debug RESILIX_SLOW_CALL_MS=300 python3 -c "$poll" \
	"$RX_PORT" >"$out" 2>"$err" || rx_fail "poller exit status $?"
rx_assert_eq "unanswered, closed past the slow threshold" "timeout,close" \
	"$(settles "$err")"

# 3. asyncio: wait_for gives up after 0.8 s and closes the connection.
waiter='
import asyncio, sys
async def main():
    r, w = await asyncio.open_connection("127.0.0.1", int(sys.argv[1]))
    w.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        await asyncio.wait_for(r.read(100), 0.8)
    except asyncio.TimeoutError:
        print("gave up")
    w.close()
    await w.wait_closed()
asyncio.run(main())
'
rx_shim RESILIX_LOG=debug RESILIX_TIMEOUT_MS=300 python3 -c "$waiter" \
	"$RX_PORT" >"$out" 2>"$err" || rx_fail "asyncio exit status $?"
rx_assert_eq "asyncio: the program's own timeout" "gave up" "$(cat "$out")"
rx_assert_eq "asyncio: close past the deadline" "timeout,close" \
	"$(settles "$err")"

# 4. asyncio, non-blocking connects to a refused port: the kernel refuses
#    the first ones (EINPROGRESS, then SO_ERROR), then the open breaker
#    refuses at once; the program sees ConnectionRefusedError every time.
port=$(rx_free_port)
refuse='
import asyncio, sys
async def main():
    for i in range(8):
        try:
            await asyncio.open_connection("127.0.0.1", int(sys.argv[1]))
            print("connected")
        except ConnectionRefusedError:
            print("refused")
asyncio.run(main())
'
rx_shim RESILIX_LOG=debug RESILIX_MIN_CALLS=3 RESILIX_WINDOW_CALLS=10 \
	RESILIX_OPEN_MS=30000 python3 -c "$refuse" "$port" >"$out" 2>"$err" ||
	rx_fail "asyncio exit status $?"
rx_assert_eq "asyncio refused: every attempt" 8 "$(grep -c '^refused$' "$out")"
rx_assert_eq "asyncio refused: kernel refusals settled" \
	"transient,connect-error transient,connect-error transient,connect-error" \
	"$(settles "$err")"
rx_assert_eq "asyncio refused: breaker" "closed>open" "$(rx_transitions "$err")"
rx_assert_eq "asyncio refused: refused by the shim" 5 \
	"$(grep -c 'event=refused reason=circuit-open' "$err")"
rx_pass
