#!/bin/bash
# short_sin6.sh - an AF_INET6 address of RFC 2133's 24 bytes, which the
# kernel connects to, is guarded like a 28-byte one (ADR-640).
#
# tests/support/shortsin6 sends one request per new AF_INET6 socket with
# the destination's length given as 24 (SIN6_LEN_RFC2133, no scope id):
#   - to ::ffff:127.0.0.1 (the IPv4 upstream answering 500) by connect,
#   - the same by sendto(MSG_FASTOPEN), TCP Fast Open's implicit connect,
#   - to ::1, a listener of this test answering 500.
# Without the shim every request is answered (the kernel takes the short
# address). Under the shim with its defaults, five 500s in a row open the
# key's circuit and the next connects are refused before they leave
# the host. The shim required 28 bytes: such a connect was never keyed,
# and all of them reached the failing upstream.
. "$(dirname "$0")/lib.sh"
rx_require_build
PROG=$RESILIX_BUILDDIR/tests/support/shortsin6
[ -x "$PROG" ] || rx_fail "not built: $PROG"
rx_need python3
if ! python3 -c 'import socket; socket.socket(socket.AF_INET6).close()' \
	2>/dev/null; then
	echo "SKIP: $RX_NAME: no IPv6 sockets"
	exit 77
fi

# check_run WHAT FILE LOG PORTKEY: FILE holds 8 lines, "0 500" .. "4 500"
# then "5 ECONNREFUSED" .. "7 ECONNREFUSED"; LOG's settle lines are keyed
# PORTKEY; the breaker opened.
check_run() {
	local what=$1 out=$2 log=$3 key=$4
	rx_assert_eq "$what: answered" 5 "$(grep -c ' 500$' "$out")"
	rx_assert_eq "$what: refused by the shim" 3 \
		"$(grep -c ' ECONNREFUSED$' "$out")"
	rx_assert_eq "$what: the refused ones are the last three" "5 6 7" \
		"$(awk '$2 == "ECONNREFUSED" { print $1 }' "$out" | paste -sd' ')"
	rx_assert_eq "$what: breaker transitions" "closed>open" \
		"$(rx_transitions "$log")"
	rx_assert_eq "$what: settles keyed $key" 5 \
		"$(grep -c "key=$key event=settle verdict=transient" "$log")"
}

rx_upstream_start err --phases 0:status:500
ERR=$RX_PORT
out=$RX_TMP/plain.out
rx_dump_on_fail "$out"
rx_plain "$PROG" --port "$ERR" --len 24 --requests 3 >"$out" ||
	rx_fail "shortsin6 without the shim: exit status $?"
rx_assert_eq "without the shim: 24-byte connects answered" 3 \
	"$(grep -c ' 500$' "$out")"

out=$RX_TMP/connect.out log=$RX_TMP/connect.err
rx_dump_on_fail "$out" "$log"
rx_shim RESILIX_LOG=debug "$PROG" --port "$ERR" --len 24 --requests 8 \
	>"$out" 2>"$log" || rx_fail "shortsin6 connect: exit status $?"
check_run "connect, mapped" "$out" "$log" "127.0.0.1:$ERR"
rx_assert_eq "connect, mapped: requests that reached the upstream" \
	8 "$(rx_count err)" # 3 without the shim, 5 with it

# TCP Fast Open: a kernel without its client side answers EOPNOTSUPP
# (or connects normally); either way the request must be keyed.
rx_upstream_start tfo --phases 0:status:500
TFO=$RX_PORT
out=$RX_TMP/tfo.out log=$RX_TMP/tfo.err
rx_dump_on_fail "$out" "$log"
rx_plain "$PROG" --port "$TFO" --len 24 --fastopen >"$out" ||
	rx_fail "shortsin6 --fastopen without the shim: exit status $?"
if grep -q ' 500$' "$out"; then
	rx_shim RESILIX_LOG=debug "$PROG" --port "$TFO" --len 24 --fastopen \
		--requests 8 >"$out" 2>"$log" ||
		rx_fail "shortsin6 --fastopen: exit status $?"
	check_run "sendto(MSG_FASTOPEN), mapped" "$out" "$log" "127.0.0.1:$TFO"
else
	rx_log "NOTE: no TCP Fast Open send here ($(cat "$out")); part skipped"
fi

# ::1: a listener that answers 500 to every connection, for 20 s at most.
pf=$RX_TMP/v6.port
rx_plain python3 -c "import os, socket, sys, threading
s = socket.socket(socket.AF_INET6)
s.bind(('::1', 0))
s.listen(16)
s.settimeout(20)
open(sys.argv[1] + '.tmp', 'w').write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + '.tmp', sys.argv[1])
def serve(c):
    with c:
        c.recv(4096)
        c.sendall(b'HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n'
                  b'Connection: close\r\n\r\n')
try:
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
except socket.timeout:
    pass" "$pf" >"$pf.log" 2>&1 &
RX_PIDS="$RX_PIDS $!"
if ! rx_wait_for 5 test -s "$pf"; then
	rx_log "NOTE: no listener on ::1 ($(cat "$pf.log")); part skipped"
	rx_pass
fi
V6=$(cat "$pf")
out=$RX_TMP/v6.out log=$RX_TMP/v6.err
rx_dump_on_fail "$out" "$log"
rx_shim RESILIX_LOG=debug "$PROG" --host ::1 --port "$V6" --len 24 \
	--requests 8 >"$out" 2>"$log" || rx_fail "shortsin6 ::1: exit status $?"
check_run "connect, ::1" "$out" "$log" "\[::1\]:$V6"
rx_pass
