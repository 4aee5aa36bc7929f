#!/bin/bash
# limiter_recovery_nonblocking.sh - after an overload, a program whose
# callers cannot wait gets its throughput back once the upstream is
# healthy (ADR-651).
#
# python3 asyncio, 50 workers on non-blocking sockets, each calling again
# at once after an answer and 10 ms after a refusal, against the test
# upstream: 1.5 s healthy, 2 s of 503s (the limiter drops to its minimum
# and refuses), then healthy for good. The latency these callers measure
# grows with the calls in flight - the event loop's own work - so a limit
# bound by the drops never saw a window in which nobody was refused, and
# it stayed at its minimum: about half of the calls refused seconds after
# the upstream recovered. Now two windows without a drop or a queue end
# the binding: from 1.5 s after the recovery on, no call is refused, and
# the program's output is only answers.
. "$(dirname "$0")/lib.sh"
rx_need python3
rx_require_build
rx_usable python3 || rx_skip "python3 cannot run in this build"
RX_TIMEOUT=30

rx_upstream_start rec --phases 1500:ok,2000:status:503,1000:ok
out=$RX_TMP/py.out err=$RX_TMP/py.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=info python3 - "$RX_PORT" >"$out" 2>"$err" <<'PY' ||
import asyncio, sys, time
port = int(sys.argv[1])
t0 = time.monotonic()
per = {}
def add(k):
    s = int(time.monotonic() - t0)
    per.setdefault(s, {})
    per[s][k] = per[s].get(k, 0) + 1
async def worker():
    while time.monotonic() - t0 < 8:
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"GET /r HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            await w.drain()
            line = await r.readline()
            await r.read()
            w.close()
            add(line.split()[1].decode())
        except ConnectionRefusedError:
            add("refused")
            await asyncio.sleep(0.01)
async def main():
    await asyncio.gather(*[worker() for _ in range(50)])
asyncio.run(main())
for s in sorted(per):
    print(s, per[s].get("200", 0), per[s].get("503", 0), per[s].get("refused", 0))
PY
	rx_fail "python3 exit status $?"
# Columns: second, 200s, 503s, refusals.
rx_assert_ge "the overload was refused at first" \
	"$(awk '$1 >= 1 && $1 <= 3 { s += $4 } END { print s + 0 }' "$out")" 1
rx_assert_grep "the limit fell" 'event=limit-change limit=[0-9] ' "$err"
rx_assert_eq "refusals from 5 s on (upstream healthy since 3.5 s)" 0 \
	"$(awk '$1 >= 5 { s += $4 } END { print s + 0 }' "$out")"
rx_assert_ge "answers from 5 s on" \
	"$(awk '$1 >= 5 && $1 < 8 { s += $2 } END { print s + 0 }' "$out")" 300
rx_log "throughput back after the overload"
