#!/bin/bash
# passthrough_socket.sh - bytes through sockets arrive byte-identical under
# the shim, on the unguarded path (an excluded port, a Unix socket) and on
# the guarded one (a non-HTTP first byte settles the call as a success and
# the fd is no longer tracked, ADR-147): 20 MB each way, odd-sized reads
# and writes.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3 sha256sum
data=$RX_TMP/random.bin
head -c $((20 * 1024 * 1024)) /dev/urandom >"$data"
want=$(sha256sum <"$data" | cut -d' ' -f1)

# A server (outside the shim) that echoes everything back on each
# connection, TCP on 127.0.0.1 and a Unix socket. It outlives the three
# runs, which under a sanitizer take more than the usual 20 s each (the
# test kills it at the end).
RX_TIMEOUT=600 rx_plain python3 -c '
import os, socket, sys, threading
def serve(s):
    s.settimeout(600)
    try:
        while True:
            c, _ = s.accept()
            threading.Thread(target=echo, args=(c,), daemon=True).start()
    except socket.timeout:
        pass
def echo(c):
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen(8)
u = socket.socket(socket.AF_UNIX); u.bind(sys.argv[1] + ".sock"); u.listen(8)
threading.Thread(target=serve, args=(u,), daemon=True).start()
open(sys.argv[1] + ".tmp", "w").write(str(t.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
serve(t)
' "$RX_TMP/echo.port" &
RX_PIDS="$RX_PIDS $!"
rx_wait_for 5 test -s "$RX_TMP/echo.port" || rx_fail "echo server did not start"
P=$(cat "$RX_TMP/echo.port")

client='
import hashlib, socket, sys, threading
kind, addr, path = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "unix":
    s = socket.socket(socket.AF_UNIX); s.connect(addr)
else:
    s = socket.create_connection(("127.0.0.1", int(addr)))
data = open(path, "rb").read()
def send():
    v = memoryview(data)
    while v:
        n = s.send(v[:40009])
        v = v[n:]
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=send).start()
h = hashlib.sha256()
n = 0
while True:
    b = s.recv(65521)
    if not b:
        break
    h.update(b); n += len(b)
print(h.hexdigest(), n)
'
for run in "tcp-guarded tcp $P" "tcp-excluded tcp $P RESILIX_EXCLUDE=*:$P" \
	"unix unix $RX_TMP/echo.port.sock"; do
	set -- $run
	name=$1 kind=$2 addr=$3
	shift 3
	rx_dump_on_fail "$RX_TMP/$name.err"
	rx_shim RESILIX_LOG=debug "$@" python3 -c "$client" "$kind" "$addr" \
		"$data" >"$RX_TMP/$name.out" 2>"$RX_TMP/$name.err" ||
		rx_fail "$name: exit status $?"
	rx_assert_eq "$name: digest and length" "$want $((20 * 1024 * 1024))" \
		"$(cat "$RX_TMP/$name.out")"
	case $name in
	tcp-guarded)
		rx_assert_grep "$name: guarded, a success at the first byte" \
			'event=settle verdict=success .*at=first-byte' \
			"$RX_TMP/$name.err"
		# Regression: a non-HTTP stream made a call of every write
		# after the first byte (thousands of settles).
		rx_assert_eq "$name: calls on a non-HTTP connection" 1 \
			"$(grep -c 'event=settle' "$RX_TMP/$name.err")" ;;
	*) rx_assert_no_grep "$name: not guarded" 'event=settle' "$RX_TMP/$name.err" ;;
	esac
done
rx_pass
