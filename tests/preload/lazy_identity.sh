#!/bin/bash
# lazy_identity.sh - a socket connected as socket() made it has its
# identity taken at the first check that compares it, not at the connect
# (ADR-545), and is still told from what later gets its number.
#
# The connect of a number whose socket() the shim saw asks no fstat; the
# mark proves the number holds the socket until a close the shim could not
# forget raises the doubt (ADR-500). Here each connection is made that way
# (python's socket.create_connection). A raw close_range system call
# closes one behind the shim's back and raises the doubt; the next file
# gets the number, and with the key's circuit open its write succeeds: the
# first check finds no socket there. A duplicate made of a fresh
# connection before any check takes the record's identity from the
# duplicate, and a request on it alone, with the original closed, is a
# guarded call like any other.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start err --phases 0:status:500
ERR=$RX_PORT
rx_upstream_start ok --phases 0:ok:0
OK=$RX_PORT

cat >"$RX_TMP/prog.py" <<'PY'
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_CLOSE_RANGE = {"x86_64": 436, "aarch64": 436}.get(os.uname().machine)
mode, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
REQ = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"

def call(s=None):
    s = s or socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(REQ)
    return s, s.recv(4096)

if mode == "reuse":
    keep, _ = call()       # answered: an idle kept-alive connection
    for _ in range(6):     # trip the breaker
        try:
            call()[0].close()
        except OSError:
            pass
    fd = keep.detach()
    if SYS_CLOSE_RANGE is None or libc.syscall(SYS_CLOSE_RANGE, fd, fd, 0) != 0:
        print("skip: no close_range")
        sys.exit(0)
    f = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    print("same number", f == fd)
    try:
        print("file write", os.write(f, b"hello file\n"))
    except OSError as e:
        print("file write failed", e.strerror)
else:                      # dup: the duplicate carries the call
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    d = socket.socket(fileno=os.dup(s.fileno()))
    d.settimeout(5)
    s.close()
    for _ in range(3):
        print("answer", call(d)[1].split(b"\r\n")[0].decode())
    d.close()
PY

out=$RX_TMP/prog.out err=$RX_TMP/prog.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_MIN_CALLS=3 RESILIX_WINDOW_CALLS=5 \
	python3 "$RX_TMP/prog.py" reuse "$ERR" "$RX_TMP/data" \
	>"$out" 2>"$err" || rx_fail "reuse: exit status $?"
if ! grep -q '^skip' "$out"; then
	rx_assert_grep "reuse: the breaker opened" 'to=open' "$err"
	rx_assert_grep "reuse: the file got the socket's number" \
		'^same number True$' "$out"
	rx_assert_grep "reuse: the write to the file succeeded" \
		'^file write 11$' "$out"
	rx_assert_eq "reuse: the file's content" "hello file" \
		"$(cat "$RX_TMP/data")"
	rx_assert_no_grep "reuse: a refused write" 'at=write' "$err"
fi

rx_shim RESILIX_LOG=debug python3 "$RX_TMP/prog.py" dup "$OK" - \
	>"$out" 2>"$err" || rx_fail "dup: exit status $?"
rx_assert_eq "dup: three answers on the duplicate" 3 \
	"$(grep -c '^answer HTTP/1.1 200' "$out")"
rx_assert_eq "dup: three guarded successes" 3 \
	"$(grep -c 'event=settle verdict=success' "$err")"
rx_pass
