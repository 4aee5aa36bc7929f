#!/bin/bash
# bad_pointer_efault.sh - a bad pointer passed to a wrapped call gets the
# kernel's EFAULT under the shim, as without it, never a crash (ADR-195).
#
# Before ADR-195, sendmsg, recvmsg, sendmmsg, recvmmsg and connect read
# the msghdr, mmsghdr or sockaddr before anything else - on every fd - so
# a program that passed (void *)16 (an LTP-style EFAULT test, a bug) died
# of SIGSEGV inside the shim. Now nothing is read through a pointer unless
# the fd matters to the shim, and a pointer into the first page is left to
# the kernel even then: on an untracked fd, on a socket with a call in
# flight (which then completes as usual), and for connect.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start ok --phases 0:ok:200
OK=$RX_PORT

cat >"$RX_TMP/prog.py" <<'PY'
import ctypes, errno, socket, sys
port = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
BAD = ctypes.c_void_p(16)
def show(name, rc):
    e = ctypes.get_errno()
    print(name, rc, errno.errorcode.get(e, e) if rc < 0 else "-", flush=True)
def calls(fd, tag):
    for name, args in (("writev", (fd, BAD, 1)), ("readv", (fd, BAD, 1)),
                       ("sendmsg", (fd, BAD, 0)), ("recvmsg", (fd, BAD, 0)),
                       ("sendmsg-fastopen", (fd, BAD, 0x20000000)),
                       ("sendmmsg", (fd, BAD, 1, 0)),
                       ("recvmmsg", (fd, BAD, 1, 0, None))):
        fn = getattr(libc, name.split("-")[0])
        ctypes.set_errno(0)
        show(tag + " " + name, fn(*args))
s = socket.socket()
calls(s.fileno(), "untracked")
ctypes.set_errno(0)
show("connect", libc.connect(s.fileno(), BAD, 16))
s.close()
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
calls(s.fileno(), "waiting")
print("answer", s.recv(100).split(b"\r\n")[0].decode(), flush=True)
PY
out=$RX_TMP/prog.out err=$RX_TMP/prog.err
rx_dump_on_fail "$out" "$err"
rx_plain python3 "$RX_TMP/prog.py" "$OK" >"$RX_TMP/plain.out" 2>&1 ||
	rx_fail "without the shim: exit status $?"
rx_shim RESILIX_LOG=debug python3 "$RX_TMP/prog.py" "$OK" >"$out" 2>"$err" ||
	rx_fail "exit status $? (a crash in the shim?)"
rx_assert_eq "results as without the shim" "$(cat "$RX_TMP/plain.out")" \
	"$(cat "$out")"
rx_assert_eq "EFAULT answers" 15 "$(grep -c ' -1 EFAULT$' "$out")"
rx_assert_grep "the call in flight completed" '^answer HTTP/1.1 200 OK$' "$out"
rx_assert_grep "and settled as usual" \
	'event=settle verdict=success .*at=first-byte' "$err"
rx_pass
