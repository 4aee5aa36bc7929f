#!/bin/bash
# connect_replaced.sh - a number closed or replaced while another thread's
# blocking connect on it runs: the call ends then, as a close of it ends
# it, and nothing the number holds afterwards is taken for the call
# (ADR-631).
#
# The record of a fresh socket's connect is mapped when the real connect
# returns; the number's mark (RX_MARK_CONNECTING) is the proof that no
# close, dup2 or socket() touched the number meanwhile. Here a listener
# with a full accept queue holds the connect (the kernel drops its SYN
# until the queue has room, then the retransmission a second later gets
# through), while a second thread, at 0.3 s, closes the number or
# dup2s a pipe onto it, and a third makes room at 0.6 s. The connect
# returns 0; the program then writes a request into whatever the number
# holds and closes it. The call must be settled (rejected, at=close)
# before the connect returns - not at that later close, which is what
# a record mapped regardless would do.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

for how in dup2 close; do
	err=$RX_TMP/$how.err
	rx_dump_on_fail "$err"
	rx_shim RESILIX_LOG=debug python3 -c '
import os, socket, sys, threading, time
how = sys.argv[1]
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(0)
port = ls.getsockname()[1]
filler = socket.create_connection(("127.0.0.1", port))
c = socket.socket()
fd = c.fileno()
r, w = os.pipe()
touched = []
def touch():
    time.sleep(0.3)
    if how == "dup2":
        os.dup2(w, fd)
    else:
        os.close(fd)
    touched.append(1)
def make_room():
    time.sleep(0.6)
    ls.accept()
threading.Thread(target=touch).start()
threading.Thread(target=make_room).start()
print("marker begin", file=sys.stderr, flush=True)
try:
    c.connect(("127.0.0.1", port))
except OSError as e:
    print("connect failed %s" % e, file=sys.stderr, flush=True)
print("marker connected held=%d" % len(touched), file=sys.stderr, flush=True)
if how == "dup2":
    os.write(fd, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    os.close(fd)
print("marker end", file=sys.stderr, flush=True)
os._exit(0)
' "$how" >/dev/null 2>"$err" || rx_fail "$how: exit status $?"
	grep -q 'marker connected held=1' "$err" ||
		rx_skip "the kernel did not hold the connect until the number was touched"
	# settles FROM TO: the settle lines between two markers.
	settles() {
		awk -v a="marker $1" -v b="marker $2" \
			'index($0, a) == 1 { on = 1; next } index($0, b) == 1 { on = 0 }
			on && /event=settle/ { v = ""; for (i = 1; i <= NF; i++)
				if ($i ~ /^(verdict|at)=/) v = v $i ",";
				print v }' "$err" | paste -sd';'
	}
	rx_assert_eq "$how: the call ends while the connect runs" \
		"verdict=rejected,at=close," "$(settles begin connected)"
	rx_assert_eq "$how: nothing settles at the number's later close" \
		"" "$(settles connected end)"
done
rx_pass
