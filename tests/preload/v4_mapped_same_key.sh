#!/bin/bash
# v4_mapped_same_key.sh - an IPv4 upstream reached through an IPv4-mapped
# IPv6 address (::ffff:127.0.0.1, a dual-stack AF_INET6 socket) is the same
# key as through AF_INET (ADR-194).
#
# Six calls over AF_INET to an upstream that answers 500 open its
# circuit; three more over AF_INET6 to ::ffff:127.0.0.1 must then be
# refused at connect. Before ADR-194 they were keyed
# "[::ffff:127.0.0.1]:port", a key of their own whose circuit was closed,
# and all three reached the failing upstream.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3
if ! python3 -c 'import socket; socket.socket(socket.AF_INET6).close()' \
	2>/dev/null; then
	echo "SKIP: $RX_NAME: no IPv6 sockets"
	exit 77
fi

rx_upstream_start err --phases 0:status:500
ERR=$RX_PORT

cat >"$RX_TMP/client.py" <<'PY'
import socket, sys
port = int(sys.argv[1])
def call(family, host):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return s.recv(100).split(b"\r\n")[0].decode()
    except OSError as e:
        return e.strerror
    finally:
        s.close()
for i in range(6):
    print("v4", call(socket.AF_INET, "127.0.0.1"), flush=True)
for i in range(3):
    print("mapped", call(socket.AF_INET6, "::ffff:127.0.0.1"), flush=True)
PY
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_MIN_CALLS=3 RESILIX_WINDOW_CALLS=5 \
	python3 "$RX_TMP/client.py" "$ERR" >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
rx_assert_eq "breaker transitions" "closed>open" "$(rx_transitions "$err")"
rx_assert_eq "mapped calls refused" 3 \
	"$(grep -c '^mapped Connection refused$' "$out")"
rx_assert_eq "requests that reached the upstream" \
	"$(grep -c '^v4 HTTP/1.1 500' "$out")" "$(rx_count err)"
rx_assert_no_grep "a key of its own" 'key=\[::ffff:' "$err"
rx_pass
