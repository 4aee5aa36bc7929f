#!/bin/bash
# key_host.sh - keys by address and by host name (ADR-144).
#
# Default, ip:port: a name that resolves to a dead and a live address
# (curl --resolve NAME:PORT:127.0.0.2,127.0.0.1; 127.0.0.2 is loopback
# with nothing listening on the port) keeps working: each refused connect
# to the dead address opens that address's breaker only, curl falls back
# to the live one, and every transfer succeeds.
#
# RESILIX_KEY=host: getaddrinfo is observed, never rewritten (the python
# client's results - EAI codes, address lists - are identical with and
# without the shim), and connects to an address the process resolved are
# keyed NAME:PORT, whichever way the program names it at connect;
# connects to an address it never resolved stay ip:port.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start live --phases 0:ok
P=$RX_PORT
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

# curl (whichever layer of the shim sees it) falls back to the live one.
if command -v curl >/dev/null 2>&1 && rx_usable curl; then
	rx_shim RESILIX_MIN_CALLS=2 RESILIX_WINDOW_CALLS=10 \
		RESILIX_OPEN_MS=30000 curl -s -o /dev/null \
		-w '%{http_code}\n' \
		--resolve "dual.test:$P:127.0.0.2,127.0.0.1" \
		"http://dual.test:$P/d/[1-8]" >"$out" 2>"$err" ||
		rx_fail "curl exit status $?"
	rx_assert_eq "curl, dead+live name: transfers answered 200" 8 \
		"$(grep -c '^200$' "$out")"
elif ! command -v curl >/dev/null 2>&1; then
	rx_log "NOTE: curl is not installed: the curl half is skipped"
fi

# A socket client with its own address fallback, as programs iterate
# getaddrinfo's list: the dead address's refusals open its breaker only.
fallback='
import socket, sys
port = int(sys.argv[1])
for i in range(8):
    for addr in ("127.0.0.2", "127.0.0.1"):
        s = socket.socket()
        try:
            s.connect((addr, port))
        except ConnectionRefusedError:
            s.close()
            continue
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        print(addr, s.recv(12).decode())
        s.close()
        break
'
rx_shim RESILIX_LOG=debug RESILIX_MIN_CALLS=2 RESILIX_WINDOW_CALLS=10 \
	RESILIX_OPEN_MS=30000 python3 -c "$fallback" "$P" >"$out" 2>"$err" ||
	rx_fail "fallback client: exit status $?"
rx_assert_eq "fallback: requests answered 200 by the live address" 8 \
	"$(grep -c '^127.0.0.1 HTTP/1.1 200$' "$out")"
rx_assert_grep "dead address refused by the kernel, keyed by ip" \
	"key=127.0.0.2:$P event=settle verdict=transient" "$err"
rx_assert_grep "dead address's breaker opened" \
	"key=127.0.0.2:$P event=breaker-transition from=closed to=open" "$err"
rx_assert_eq "dead address: connects that reached the kernel" 2 \
	"$(grep -c "key=127.0.0.2:$P event=settle" "$err")"
rx_assert_no_grep "live address's breaker never moved" \
	"key=127.0.0.1:$P event=breaker-transition" "$err"

# python3: getaddrinfo results with and without the shim, then a
# connection by name and one by address.
probe='
import socket, sys
port = int(sys.argv[1])
for name, kw in (("localhost", {}), ("127.0.0.1", {}),
                 ("no-such-host.invalid", {}),
                 ("localhost", {"family": socket.AF_INET6}),
                 ("localhost", {"flags": socket.AI_NUMERICHOST})):
    try:
        r = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, **kw)
        print(name, kw, sorted(a[4] for a in r))
    except socket.gaierror as e:
        print(name, kw, "gaierror", e.errno)
for target in ("localhost", "127.0.0.1"):
    s = socket.create_connection((target, port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    print(target, s.recv(12).decode())
    s.close()
try:
    socket.create_connection(("127.0.0.2", port), timeout=5)
except ConnectionRefusedError:
    print("127.0.0.2 refused")
'
rx_plain python3 -c "$probe" "$P" >"$RX_TMP/plain.out" 2>&1 ||
	rx_fail "python without the shim failed: $(cat "$RX_TMP/plain.out")"
for key in host ip; do
	rx_shim RESILIX_LOG=debug RESILIX_KEY=$key python3 -c "$probe" "$P" \
		>"$out" 2>"$err" || rx_fail "python under the shim: exit $?"
	cmp -s "$RX_TMP/plain.out" "$out" || rx_fail "RESILIX_KEY=$key:" \
		"getaddrinfo results differ: $(diff "$RX_TMP/plain.out" "$out")"
	rx_log "ok: RESILIX_KEY=$key: getaddrinfo results and codes identical"
done
rx_shim RESILIX_LOG=debug RESILIX_KEY=host python3 -c "$probe" "$P" \
	>"$out" 2>"$err"
# 127.0.0.1 was resolved from "localhost": the connect by address is
# keyed by that name too, and the connect's own outcome by the address
# (ADR-220); 127.0.0.2 never was.
rx_assert_eq "RESILIX_KEY=host: keys settled" \
	"key=127.0.0.1:$P key=localhost:$P key=127.0.0.1:$P key=localhost:$P key=127.0.0.2:$P" \
	"$(grep -o 'key=[^ ]* event=settle' "$err" | cut -d' ' -f1 | paste -sd' ')"
rx_shim RESILIX_LOG=debug python3 -c "$probe" "$P" >"$out" 2>"$err"
rx_assert_eq "default: keys settled" \
	"key=127.0.0.1:$P key=127.0.0.1:$P key=127.0.0.2:$P" \
	"$(grep -o 'key=[^ ]* event=settle' "$err" | cut -d' ' -f1 | paste -sd' ')"
# RESILIX_KEY=host, a name with a dead and a live address (a private
# /etc/hosts in a mount namespace): the program falls back through the
# name's addresses, dead first. The dead address's refusals open that
# address's breaker only - its connects are then refused at once and the
# fallback moves on - and the name, always answered, never opens.
printf '127.0.0.1 localhost\n127.0.0.1 dual.test\n127.0.0.2 dual.test\n' \
	>"$RX_TMP/hosts"
dual='
import socket, sys
port = int(sys.argv[1])
ok = 0
for i in range(30):
    addrs = sorted({a[4][0] for a in socket.getaddrinfo("dual.test", port,
                    type=socket.SOCK_STREAM)}, reverse=True)
    for addr in addrs:
        s = socket.socket()
        try:
            s.connect((addr, port))
        except ConnectionRefusedError:
            s.close()
            continue
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        ok += s.recv(12) == b"HTTP/1.1 200"
        s.close()
        break
print("ok", ok)
'
if timeout 5 unshare -m sh -c "mount --bind '$RX_TMP/hosts' /etc/hosts" 2>/dev/null; then
	rx_shim unshare -m sh -c 'mount --bind "$1" /etc/hosts && shift &&
		exec env "$@"' sh "$RX_TMP/hosts" RESILIX_KEY=host RESILIX_LOG=info \
		RESILIX_MIN_CALLS=4 RESILIX_WINDOW_CALLS=10 RESILIX_OPEN_MS=30000 \
		python3 -c "$dual" "$P" >"$out" 2>"$err" ||
		rx_fail "dual name: exit status $?"
	rx_assert_eq "dual name: every request answered" "ok 30" "$(cat "$out")"
	rx_assert_grep "dual name: the dead address's breaker opened" \
		"key=127.0.0.2:$P event=breaker-transition from=closed to=open" "$err"
	rx_assert_no_grep "dual name: the name's breaker never moved" \
		"key=dual.test:$P event=breaker-transition" "$err"
else
	rx_log "NOTE: no mount namespace here (unshare -m): the dual-name part is skipped"
fi

rx_assert_eq "bad RESILIX_KEY: one line" 1 \
	"$(rx_shim RESILIX_KEY=name true 2>&1 | grep -c 'RESILIX_KEY="name" is not valid')"
rx_pass
