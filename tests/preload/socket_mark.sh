#!/bin/bash
# socket_mark.sh - what socket() told the shim about a number never
# outlives the socket (ADR-542).
#
# A connect on a number whose socket() the shim saw asks the kernel
# nothing (no getsockopt SO_TYPE, no getpeername): the mark says an
# unconnected TCP socket, or a socket that is never a call. Every way the
# number may hold something else by the time of the connect must void the
# mark, or the shim refuses, with the circuit open, a connect the kernel
# would have answered otherwise: the number closed (close, fclose,
# syscall(SYS_close)) and reused by a file or by a UDP socket socket() did
# not return there (received over SCM_RIGHTS), a file dup2'd onto it, a raw
# close_range, the socket connected through a duplicate or by another
# process. Each case connects, with the key's circuit open, and must get
# the kernel's answer (ENOTSOCK, a UDP connect, EISCONN), not ECONNREFUSED; a
# datagram socket's connect passes, and a fresh TCP socket is still
# refused.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start err --phases 0:status:500
ERR=$RX_PORT

cat >"$RX_TMP/prog.py" <<'PY'
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fdopen.restype = ctypes.c_void_p
libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
libc.fclose.argtypes = [ctypes.c_void_p]
NR = {"x86_64": {"close": 3, "close_range": 436, "connect": 42},
      "aarch64": {"close": 57, "close_range": 436, "connect": 203}}.get(
          os.uname().machine)
port, path = int(sys.argv[1]), sys.argv[2]
ADDR = ("127.0.0.1", port)
REQ = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"

def name(e):
    return errno.errorcode.get(e, str(e))

SA = socket.AF_INET.to_bytes(2, sys.byteorder) + port.to_bytes(2, "big") + \
    bytes([127, 0, 0, 1]) + bytes(8)  # struct sockaddr_in

def connect_fd(fd):
    """connect() on @fd through libc (the shim's wrapper); errno name."""
    if libc.connect(fd, SA, len(SA)) == 0:
        return "OK"
    return name(ctypes.get_errno())

# Trip the breaker: one answered 500 opens it (backstop 1).
s = socket.create_connection(ADDR, timeout=5)
s.sendall(REQ)
s.recv(4096)
s.close()

s = socket.socket()
print("fresh", connect_fd(s.detach()))

def reused(close):
    """A fresh TCP socket's number closed, then held by a file, and by a
    UDP socket received over a local socket (SCM_RIGHTS: no socket() call
    returns that number)."""
    got = []
    for how in ("file", "passed"):
        if how == "passed":
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s = socket.socket()
        fd = s.detach()
        close(fd)
        if how == "file":
            f = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        else:
            socket.send_fds(a, [b"x"], [u.fileno()])
            f = socket.recv_fds(b, 1, 1)[1][0]
            for x in (a, b, u):
                x.close()
        got.append(connect_fd(f) if f == fd else "other-number")
        os.close(f)
    return " ".join(got)

print("close", reused(os.close))
print("fclose", reused(lambda fd: libc.fclose(libc.fdopen(fd, b"r+"))))
if NR:
    print("syscall-close", reused(lambda fd: libc.syscall(NR["close"], fd)))
    print("close_range", reused(
        lambda fd: libc.syscall(NR["close_range"], fd, fd, 0)))

s = socket.socket()
fd = s.detach()
f = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.dup2(f, fd)
os.close(f)
print("dup2", connect_fd(fd))
os.close(fd)

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
print("udp", connect_fd(u.detach()))

if NR:
    # Connected behind the shim's back (as another process sharing the
    # socket would): the kernel says EISCONN.
    s = socket.socket()
    fd = s.detach()
    rc = libc.syscall(NR["connect"], fd, SA, len(SA))
    print("raw connect", rc)
    print("connected elsewhere", connect_fd(fd))
    os.close(fd)
PY

out=$RX_TMP/prog.out err=$RX_TMP/prog.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=1 \
	RESILIX_OPEN_MS=600000 python3 "$RX_TMP/prog.py" "$ERR" \
	"$RX_TMP/data" >"$out" 2>"$err" || rx_fail "exit status $?"
rx_assert_grep "the breaker opened" 'to=open' "$err"
rx_assert_grep "a fresh socket is refused" '^fresh ECONNREFUSED$' "$out"
for how in close fclose; do
	rx_assert_grep "$how: the kernel's answers" "^$how ENOTSOCK OK$" \
		"$out"
done
rx_assert_grep "dup2: the kernel's answer" "^dup2 ENOTSOCK$" "$out"
if grep -q '^raw connect' "$out"; then
	for how in syscall-close close_range; do
		rx_assert_grep "$how: the kernel's answers" \
			"^$how ENOTSOCK OK$" "$out"
	done
	rx_assert_grep "the raw connect connected" '^raw connect 0$' "$out"
	rx_assert_grep "connected elsewhere: EISCONN" \
		'^connected elsewhere EISCONN$' "$out"
fi
rx_assert_grep "a datagram socket's connect passes" '^udp OK$' "$out"
rx_pass
