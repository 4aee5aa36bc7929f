# timed_calls.py PORT FIRST LATER EVERY_MS FIRST_LATER_MS [MARK] - FIRST
# calls at once, then LATER calls EVERY_MS apart from FIRST_LATER_MS, each
# a new connection and one GET in its own thread; prints each call's line
# "OFFSET_MS refused|answered|silent|other", in offset order, at the end.
# With MARK, each later call's result is also appended to that file as it
# ends, for a test that waits on it. Used by the deadline tests.
import socket
import sys
import threading
import time

port, first, later, every, at = (int(a) for a in sys.argv[1:6])
mark = sys.argv[6] if len(sys.argv) > 6 else None
t0 = time.monotonic()
lines, lock = [], threading.Lock()


def call(off):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
    except ConnectionRefusedError:
        r = "refused"
    else:
        try:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            r = "answered" if s.recv(100).startswith(b"HTTP/1.1 200") else "other"
        except OSError:
            r = "silent"
        s.close()
    with lock:
        lines.append("%d %s" % (off, r))
    if off > 0 and mark:
        with open(mark, "a") as f:
            f.write(r + "\n")


ts = []


def start(off):
    t = threading.Thread(target=call, args=(off,))
    t.start()
    ts.append(t)


for i in range(first):
    start(0)
for i in range(later):
    off = at + i * every
    time.sleep(max(0, t0 + off / 1000 - time.monotonic()))
    start(int((time.monotonic() - t0) * 1000))
for t in ts:
    t.join()
print("\n".join(sorted(lines, key=lambda l: int(l.split()[0]))))
