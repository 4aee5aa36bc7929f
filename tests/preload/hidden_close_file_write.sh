#!/bin/bash
# hidden_close_file_write.sh - a socket closed where the shim cannot see it
# never makes the shim act on the file that gets its number next
# (ADR-190).
#
# fclose(fdopen(sock)) closes inside libc and syscall(SYS_close) bypasses
# libc: the shim's entry for the number stays behind. Before ADR-190, once
# the key's circuit was open, the program's next open() got the number and
# its write() to the regular file failed with ECONNREFUSED (the entry was
# an idle kept-alive connection, so the write looked like a new request);
# and a file read on the number of a call still waiting was sniffed as the
# response (a "HTTP/1.1 500" line in the file counted as a failure). Now
# the number's socket identity is checked first: the write succeeds, the
# file's bytes are no evidence, and the stale entry is dropped. And since
# ADR-500 both closes are seen - fclose and syscall(SYS_close) forget the
# number before it closes, as close does - so the waiting call is released
# at the close itself, without evidence.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start err --phases 0:status:500
ERR=$RX_PORT
rx_upstream_start hang --phases 0:hang
HANG=$RX_PORT

cat >"$RX_TMP/prog.py" <<'PY'
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fdopen.restype = ctypes.c_void_p
libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
libc.fclose.argtypes = [ctypes.c_void_p]
SYS_CLOSE = {"x86_64": 3, "aarch64": 57}.get(os.uname().machine)
mode, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
REQ = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"

def hidden_close(fd, how):
    if how == "fclose":
        libc.fclose(libc.fdopen(fd, b"r+"))
    else:
        if SYS_CLOSE is None:
            print("skip: no syscall number")
            return False
        libc.syscall(SYS_CLOSE, fd)
    return True

def call():
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(REQ)
    s.recv(4096)
    return s

if mode in ("fclose", "syscall"):
    keep = call()          # answered: an idle kept-alive connection
    for _ in range(6):     # trip the breaker
        try:
            call().close()
        except OSError:
            pass
    fd = keep.detach()
    if not hidden_close(fd, mode):
        sys.exit(0)
    f = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    print("same number", f == fd)
    try:
        print("file write", os.write(f, b"hello file\n"))
    except OSError as e:
        print("file write failed", e.strerror)
else:                      # waiting: a request sent, no answer yet
    with open(path, "wb") as f:
        f.write(b"HTTP/1.1 500 Internal Server Error\r\n\r\n")
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(REQ)
    fd = s.detach()
    if not hidden_close(fd, mode[len("wait-"):]):
        sys.exit(0)
    f = os.open(path, os.O_RDONLY)
    print("same number", f == fd)
    print("file read", len(os.read(f, 100)), len(os.read(f, 100)))
    os.close(f)
PY

out=$RX_TMP/prog.out err=$RX_TMP/prog.err
rx_dump_on_fail "$out" "$err"
for how in fclose syscall; do
	rx_shim RESILIX_LOG=debug RESILIX_MIN_CALLS=3 RESILIX_WINDOW_CALLS=5 \
		python3 "$RX_TMP/prog.py" "$how" "$ERR" "$RX_TMP/data.$how" \
		>"$out" 2>"$err" || rx_fail "$how: exit status $?"
	grep -q '^skip' "$out" && continue
	rx_assert_grep "$how: the breaker opened" 'to=open' "$err"
	rx_assert_grep "$how: the file got the socket's number" \
		'^same number True$' "$out"
	rx_assert_grep "$how: the write to the file succeeded" \
		'^file write 11$' "$out"
	rx_assert_eq "$how: the file's content" "hello file" \
		"$(cat "$RX_TMP/data.$how")"
	rx_assert_no_grep "$how: a refused write" 'at=write' "$err"
done

for how in fclose syscall; do
	rx_shim RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=1 \
		python3 "$RX_TMP/prog.py" "wait-$how" "$HANG" \
		"$RX_TMP/resp.$how" >"$out" 2>"$err" ||
		rx_fail "wait-$how: exit status $?"
	grep -q '^skip' "$out" && continue
	rx_assert_grep "wait-$how: the file got the socket's number" \
		'^same number True$' "$out"
	rx_assert_grep "wait-$how: the file read as usual" '^file read 38 0$' \
		"$out"
	rx_assert_grep "wait-$how: released at the close it made" \
		'event=settle verdict=rejected .*at=close' "$err"
	rx_assert_no_grep "wait-$how: evidence from the file" \
		'event=settle verdict=\(transient\|timeout\)' "$err"
	rx_assert_eq "wait-$how: breaker transitions" "" "$(rx_transitions "$err")"
done
rx_pass
