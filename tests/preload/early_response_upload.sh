#!/bin/bash
# early_response_upload.sh - a request body still being sent after the
# server's early response is never refused half-way (ADR-191).
#
# The server answers "500" as soon as it has the request headers, then
# reads the whole body. The client reads that response before it sends
# its body (as a full-duplex or event-loop client does), with a breaker
# that opens at the first failure. Before ADR-191 the first body write
# after the response began was taken for a new request on a kept-alive
# connection: refused with ECONNREFUSED, the upload cut after its headers
# (and, with the circuit closed, counted as a second call). Now only a
# write that starts with a request line ("GET /", "POST /"...) starts a
# call: the body goes through whole, one call is settled, and a real next
# request on the same connection is still admitted - here, refused, as the
# circuit is open. And an upstream that answers 413 and cuts the upload
# is judged by its answer (ADR-225).
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_py_server "$RX_TMP/port" '
def serve(c):
    c.settimeout(10)
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return
        buf += d
    hdr, body = buf.split(b"\r\n\r\n", 1)
    cl = int(hdr.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    c.sendall(b"HTTP/1.1 500 Early\r\nContent-Length: 6\r\n\r\nearly\n")
    got = len(body)
    while got < cl:
        d = c.recv(65536)
        if not d:
            break
        got += len(d)
    print("server body", got, "of", cl, flush=True)
    c.close()
'
port=$(cat "$RX_TMP/port")

cat >"$RX_TMP/client.py" <<'PY'
import socket, sys
port = int(sys.argv[1])
n, chunk = 1000000, b"x" * 65536
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"PUT /u HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % n)
print("response", s.recv(100).split(b"\r\n")[0].decode(), flush=True)
sent = 0
try:
    while sent < n:
        k = min(len(chunk), n - sent)
        s.sendall(chunk[:k])
        sent += k
    print("body sent", sent, flush=True)
except OSError as e:
    print("body cut after", sent, e.strerror, flush=True)
try:
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    print("next request sent")
except OSError as e:
    print("next request:", e.strerror)
PY
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err" "$RX_TMP/port.log"
rx_shim RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=1 \
	python3 "$RX_TMP/client.py" "$port" >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
rx_assert_grep "the early response" '^response HTTP/1.1 500 Early$' "$out"
rx_assert_grep "the whole body sent" '^body sent 1000000$' "$out"
rx_wait_for 5 grep -q 'server body' "$RX_TMP/port.log"
rx_assert_grep "the server got the whole body" \
	'^server body 1000000 of 1000000$' "$RX_TMP/port.log"
rx_assert_eq "calls settled" 1 "$(grep -c 'event=settle' "$err")"
rx_assert_eq "breaker transitions" "closed>open" "$(rx_transitions "$err")"
rx_assert_grep "a real next request is still admitted (refused: open)" \
	'^next request: Connection refused$' "$out"
rx_assert_eq "refusals at a write" 1 "$(grep -c 'event=refused.*at=write' "$err")"

# An upstream that answers 413 to the request headers and closes without
# reading the body (ADR-225): the client's upload fails with ECONNRESET
# or EPIPE, but the answer is in its receive queue and it reads it. That
# is the upstream answering (4xx: healthy), not a transient failure: six
# such uploads with the backstop at 5 open no circuit.
rx_py_server "$RX_TMP/port413" '
def serve(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            return
        buf += d
    c.sendall(b"HTTP/1.1 413 Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    time.sleep(0.3)
    c.close()  # unread body: the kernel answers it with RST
'
cat >"$RX_TMP/upload.py" <<'PY'
import socket, sys
port = int(sys.argv[1])
body = b"x" * (8 << 20)
for i in range(6):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError as e:
        print(i, "connect", e.strerror, flush=True)
        continue
    s.sendall(b"PUT /u HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
    try:
        s.sendall(body)
        print(i, "body sent", flush=True)
    except OSError as e:
        print(i, "upload stopped", flush=True)
    print(i, "answer", s.recv(40).split(b"\r\n")[0].decode(), flush=True)
    s.close()
PY
out=$RX_TMP/upload.out err=$RX_TMP/upload.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug python3 "$RX_TMP/upload.py" "$(cat "$RX_TMP/port413")" \
	>"$out" 2>"$err" || rx_fail "upload client exit status $?"
rx_assert_eq "413: every upload got its answer" 6 \
	"$(grep -c 'answer HTTP/1.1 413 Too Large$' "$out")"
rx_assert_eq "413: uploads the server cut" 6 "$(grep -c 'upload stopped$' "$out")"
rx_assert_eq "413: judged as answered" 6 \
	"$(grep -c 'event=settle verdict=answered' "$err")"
rx_assert_no_grep "413: no circuit opened" 'to=open' "$err"
rx_pass
