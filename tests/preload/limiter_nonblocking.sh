#!/bin/bash
# limiter_nonblocking.sh - a non-blocking caller is never made to wait for
# a limiter slot: where the limiter would queue it, it is shed at once
# (docs/design.md section 3). 32 connections opened together against an
# upstream that answers in 300 ms, with the limit at 8
# (RESILIX_LIMIT_MIN=RESILIX_LIMIT_MAX=8: no adaptation during the test):
#
#   python3 asyncio  non-blocking sockets: 8 calls reach the upstream, the
#                    other 24 fail with ConnectionRefusedError in a few ms
#                    (not after 300 ms: nobody waited);
#   curl -Z          the same with curl's parallel transfers;
#   C client         blocking sockets, the control: callers over the limit
#                    wait for a slot instead (event=admitted-after-wait)
#                    and all 32 calls are answered.
. "$(dirname "$0")/lib.sh"
rx_need python3
rx_require_build

LAT=300
lim=(RESILIX_LIMIT_MIN=8 RESILIX_LIMIT_MAX=8 RESILIX_LOG=debug)
rx_upstream_start nb --phases 0:ok:$LAT

# --- python3 asyncio -----------------------------------------------------------
if rx_usable python3; then
	out=$RX_TMP/py.out log=$RX_TMP/py.log
	rx_dump_on_fail "$out" "$log"
	rx_shim "${lim[@]}" RESILIX_LOG_FILE="$log" python3 - "$RX_PORT" \
		>"$out" <<'PY' || rx_fail "python3 exit status $?"
import asyncio, sys, time
port = int(sys.argv[1])
async def call(i):
    t = time.monotonic()
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET /nb/%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % i)
        await w.drain()
        line = await r.readline()
        w.close()
        what = line.split()[1].decode()
    except ConnectionRefusedError:
        what = "refused"
    print(what, int((time.monotonic() - t) * 1000))
async def main():
    await asyncio.gather(*(call(i) for i in range(32)))
asyncio.run(main())
PY
	rx_assert_eq "python: calls answered" 8 "$(grep -c '^200 ' "$out")"
	rx_assert_eq "python: calls shed" 24 "$(grep -c '^refused ' "$out")"
	slowest=$(awk '$1 == "refused" { if ($2 > m) m = $2 } END { print m + 0 }' "$out")
	rx_assert_le "python: slowest refusal (ms), well below $LAT" "$slowest" 100
	rx_assert_eq "python: refusals logged as limiter-full at connect" 24 \
		"$(grep -c 'event=refused reason=limiter-full .*at=connect waited_ms=0' "$log")"
	rx_assert_eq "python: nobody waited" 0 \
		"$(grep -c 'event=admitted-after-wait' "$log")"
fi

# --- curl -Z -------------------------------------------------------------------
if command -v curl >/dev/null 2>&1 && rx_usable curl; then
	out=$RX_TMP/curl.out log=$RX_TMP/curl.log
	rx_dump_on_fail "$out" "$log"
	rx_shim "${lim[@]}" RESILIX_LOG_FILE="$log" curl -s -o /dev/null \
		-Z --parallel-immediate --parallel-max 32 \
		-w '%{http_code} %{exitcode} %{time_total}\n' \
		"http://127.0.0.1:$RX_PORT/curl/[1-32]" >"$out"
	rx_assert_eq "curl: transfers answered" 8 "$(grep -c '^200 0 ' "$out")"
	rx_assert_eq "curl: transfers shed (couldn't connect)" 24 \
		"$(grep -c '^000 7 ' "$out")"
	slowest=$(awk '$2 == 7 { if ($3 > m) m = $3 } END { print int((m + 0) * 1000) }' "$out")
	rx_assert_le "curl: slowest shed transfer (ms)" "$slowest" 100
	rx_assert_eq "curl: nobody waited" 0 \
		"$(grep -c 'event=admitted-after-wait' "$log")"
elif ! command -v curl >/dev/null 2>&1; then
	rx_log "NOTE: curl is not installed: the curl part is skipped"
fi

# --- the control: blocking callers wait instead --------------------------------
out=$RX_TMP/c.out log=$RX_TMP/c.log
rx_dump_on_fail "$out" "$log"
rx_shim "${lim[@]}" RESILIX_LOG_FILE="$log" RESILIX_QUEUE_TIMEOUT_MS=5000 \
	"$CLIENT" --port "$RX_PORT" --threads 16 >"$out" ||
	rx_fail "client exit status $?"
rx_assert_eq "blocking: calls answered" 16 "$(grep -c ' 200 OK 1$' "$out")"
rx_assert_eq "blocking: callers that waited for a slot" 8 \
	"$(grep -c 'event=admitted-after-wait' "$log")"
rx_pass
