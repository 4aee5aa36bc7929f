#!/bin/bash
# limiter_healthy_burst.sh - with no configuration at all, a healthy
# upstream never sees a call refused because of the limiter's initial
# guess (ADR-210). Regression test: the default limiter (vegas, initial
# limit 20) used to shed 29 of 50 parallel curl transfers and 40 of 60
# asyncio connections to an upstream that answered every one in 200 ms.
#
#   curl -Z, 50 parallel transfers, twice in one process;
#   python3 asyncio, 60 concurrent connections, three rounds in one process
#   (the later rounds run after the learning period, at the learnt limit);
#   python3, a pool of 30 connections opened and held idle, then used.
# Every call must be answered; none may be refused by resilix.
. "$(dirname "$0")/lib.sh"
rx_need python3
rx_require_build

rx_upstream_start burst --phases 0:ok:200

if command -v curl >/dev/null 2>&1 && rx_usable curl; then
	out=$RX_TMP/curl.out log=$RX_TMP/curl.log
	rx_dump_on_fail "$out" "$log"
	rx_shim RESILIX_LOG=debug RESILIX_LOG_FILE="$log" curl -s \
		-o /dev/null -Z --parallel-immediate --parallel-max 50 \
		-w '%{http_code} %{exitcode}\n' \
		"http://127.0.0.1:$RX_PORT/a/[1-50]" \
		"http://127.0.0.1:$RX_PORT/b/[1-50]" >"$out"
	rx_assert_eq "curl: transfers answered" 100 "$(grep -c '^200 0$' "$out")"
	rx_assert_eq "curl: refusals" 0 "$(grep -c 'event=refused' "$log")"
elif ! command -v curl >/dev/null 2>&1; then
	rx_log "NOTE: curl is not installed: the curl part is skipped"
fi

if rx_usable python3; then
	out=$RX_TMP/py.out log=$RX_TMP/py.log
	rx_dump_on_fail "$out" "$log"
	rx_shim RESILIX_LOG=debug RESILIX_LOG_FILE="$log" python3 - "$RX_PORT" \
		>"$out" <<'PY' || rx_fail "python3 exit status $?"
import asyncio, socket, sys
port = int(sys.argv[1])
async def call(i):
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET /p/%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % i)
        await w.drain()
        line = await r.readline()
        w.close()
        return line.split()[1].decode()
    except ConnectionRefusedError:
        return "refused"
async def rounds():
    for _ in range(3):
        for what in await asyncio.gather(*(call(i) for i in range(60))):
            print("async", what)
asyncio.run(rounds())
# A pool: 30 blocking connections opened first, held idle, then used.
pool = []
for i in range(30):
    try:
        pool.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    except ConnectionRefusedError:
        print("pool refused")
for i, s in enumerate(pool):
    s.sendall(b"GET /pool/%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % i)
for s in pool:
    print("pool", s.recv(64).split()[1].decode())
    s.close()
PY
	rx_assert_eq "asyncio: calls answered" 180 "$(grep -c '^async 200$' "$out")"
	rx_assert_eq "pool: calls answered" 30 "$(grep -c '^pool 200$' "$out")"
	rx_assert_eq "python: refusals" 0 "$(grep -c 'event=refused' "$log")"
fi

rx_pass
