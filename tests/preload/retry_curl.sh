#!/bin/bash
# retry_curl.sh - the curl layer retries a transfer whose answer has not
# reached the program (ADR-467), inside its one admission:
#   - GET: 503 (with its body "busy" and Retry-After: 1) then 200: the
#     program (the curl tool) prints only the 200's body, once, after the
#     server's Retry-After; the breaker saw one call, a success;
#   - POST that gets 503 is not retried: the program gets the 503;
#   - a refused connect is retried for every method;
#   - RESILIX_RETRY_ATTEMPTS=1 (the default): no retry, the 503 stands.
. "$(dirname "$0")/lib.sh"
rx_need python3 curl
rx_require_build
rx_usable curl || rx_skip "curl cannot run with this build's preload"

rx_py_server "$RX_TMP/srv.port" '
lock = threading.Lock()
seen = {}
def serve(c):
    f = c.makefile("rb")
    while True:
        req = read_request(f)
        if not req:
            break
        method, path = req
        with lock:
            seen[path] = seen.get(path, 0) + 1
            k = seen[path]
        if path.startswith("/flaky") and k == 1 or method == "POST":
            status, body, extra = 503, b"busy\n", b"Retry-After: 1\r\n"
        else:
            status, body, extra = 200, b"hello\n", b""
        print(method, path, status, flush=True)
        c.sendall(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n%s\r\n%s" % (status, len(body), extra, body))
    c.close()
'
port=$(cat "$RX_TMP/srv.port")
srvlog=$RX_TMP/srv.port.log
rx_dump_on_fail "$srvlog"
retry=(RESILIX_RETRY_ATTEMPTS=3 RESILIX_LOG=debug)

# GET: 503 then 200, only the 200's body.
log=$RX_TMP/get.log out=$RX_TMP/get.out
rx_dump_on_fail "$log" "$out"
t0=$(rx_now_ms)
rx_shim "${retry[@]}" RESILIX_LOG_FILE="$log" curl -s -w '%{http_code}\n' \
	"http://127.0.0.1:$port/flaky/1" >"$out" || rx_fail "curl exit status $?"
took=$(($(rx_now_ms) - t0))
rx_assert_eq "GET: the program printed only the 200's body" \
	"hello|200" "$(tr '\n' '|' <"$out" | sed 's/|$//')"
rx_assert_eq "GET: the upstream saw the 503 and the 200" \
	"GET /flaky/1 503|GET /flaky/1 200" "$(grep ' /flaky/1 ' "$srvlog" | tr '\n' '|' | sed 's/|$//')"
rx_assert_eq "GET: one retry" 1 "$(grep -c 'event=retry at=curl attempt=2 status=503' "$log")"
rx_assert_ge "GET: after the server's Retry-After (ms)" "$took" 1000
rx_assert_eq "GET: one settlement, a success" "1 1" \
	"$(grep -c 'event=settle' "$log") $(grep -c 'event=settle verdict=success' "$log")"

# With the headers in the output (-i) and dumped (-D): only the 200's.
out=$RX_TMP/geti.out
rx_shim "${retry[@]}" RESILIX_LOG_FILE="$RX_TMP/geti.log" curl -s -i \
	-D "$RX_TMP/geti.hdr" "http://127.0.0.1:$port/flaky/3" >"$out" ||
	rx_fail "curl exit status $?"
rx_assert_eq "GET -i: no line of the 503 in the output" 0 \
	"$(grep -c '503\|busy\|Retry-After' "$out")"
rx_assert_eq "GET -i: the 200's status line and body" 2 \
	"$(grep -c '^HTTP/1.1 200\|^hello' "$out")"
rx_assert_eq "GET -D: only the 200's headers dumped" "0 1" \
	"$(grep -c '503' "$RX_TMP/geti.hdr") $(grep -c '^HTTP/1.1 200' "$RX_TMP/geti.hdr")"

# POST: 503 stands, not retried.
log=$RX_TMP/post.log out=$RX_TMP/post.out
before=$(grep -c ' /post ' "$srvlog")
rx_shim "${retry[@]}" RESILIX_LOG_FILE="$log" curl -s -w '%{http_code}\n' \
	-d x "http://127.0.0.1:$port/post" >"$out" || rx_fail "curl exit status $?"
rx_assert_eq "POST: the program got the 503" "busy|503" \
	"$(tr '\n' '|' <"$out" | sed 's/|$//')"
rx_assert_eq "POST: one request reached the upstream" 1 \
	$(($(grep -c ' /post ' "$srvlog") - before))
rx_assert_eq "POST: no retry" 0 "$(grep -c 'event=retry' "$log")"

# Off by default: the 503 stands.
out=$RX_TMP/off.out
rx_shim curl -s -w '%{http_code}\n' "http://127.0.0.1:$port/flaky/2" \
	>"$out" || rx_fail "curl exit status $?"
rx_assert_eq "default: no retry, the 503 reaches the program" "busy|503" \
	"$(tr '\n' '|' <"$out" | sed 's/|$//')"

# A refused connect, retried for a POST too: the listener comes back.
dead=$(rx_free_port)
log=$RX_TMP/conn.log out=$RX_TMP/conn.out
rx_shim RESILIX_RETRY_ATTEMPTS=3 RESILIX_RETRY_BASE_MS=1 RESILIX_LOG=debug \
	RESILIX_LOG_FILE="$log" curl -s -w '%{http_code}\n' -d x \
	"http://127.0.0.1:$dead/x" >"$out"
rx_assert_eq "connect refused: the program sees curl's error" "000" "$(cat "$out")"
rx_assert_eq "connect refused: retried twice" 2 \
	"$(grep -c 'event=retry at=curl .*curlcode=7' "$log")"
rx_log "figures: GET 503->200 in ${took} ms (Retry-After 1 s honoured)"
rx_pass
