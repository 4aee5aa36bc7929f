#!/bin/bash
# nginx_proxy.sh - nginx as a reverse proxy under the shim: its upstream
# calls are guarded, its inbound connections are not.
#
# nginx (daemon off, one worker, its own prefix, pid and logs in the test's
# temp dir, listening on 127.0.0.1 only) proxies to the test upstream with
# keep-alive connections, through epoll and non-blocking connects. The
# upstream answers 500: after MIN_CALLS of them the worker's breaker for
# the upstream opens, and nginx's next upstream writes and connects fail
# with ECONNREFUSED, which nginx answers with 502 - without the upstream
# seeing those requests. curl, outside the shim, gets an answer to every
# request: the inbound side is never refused.
. "$(dirname "$0")/lib.sh"
rx_require_build
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || rx_need nginx
rx_need curl
if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
	echo "SKIP: $RX_NAME: nginx is not instrumented for this sanitizer build"
	exit 77
fi

MIN=5
N=20
rx_upstream_start up --phases 0:status:500
UP=$RX_PORT
port=$(rx_free_port)
pre=$RX_TMP/nginx
temps=$(rx_nginx_dir "$pre")
cat >"$pre/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $pre/nginx.pid;
error_log $pre/logs/error.log info;
events { worker_connections 64; }
http {
	access_log $pre/logs/access.log;
$temps
	upstream up {
		server 127.0.0.1:$UP max_fails=0;
		keepalive 4;
	}
	server {
		listen 127.0.0.1:$port;
		location / {
			proxy_pass http://up;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
		}
	}
}
CONF
shimlog=$RX_TMP/shim.log
rx_dump_on_fail "$pre/logs/error.log" "$shimlog"
timeout -k 2 40 env LD_PRELOAD="$RESILIX_SO" RESILIX_LOG=info \
	RESILIX_LOG_FILE="$shimlog" RESILIX_FAILURE_RATE=0.5 \
	RESILIX_MIN_CALLS=$MIN RESILIX_WINDOW_CALLS=10 \
	RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000 \
	"$NGINX" -p "$pre" -c "$pre/nginx.conf" -e "$pre/logs/error.log" \
	>"$RX_TMP/nginx.out" 2>&1 &
RX_PIDS="$RX_PIDS $!"
rx_wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$port/ready" ||
	rx_fail "nginx did not start: $(cat "$RX_TMP/nginx.out")"
# The readiness probe was one call; the rest of the first MIN reach the
# upstream, then the circuit is open.
for i in $(seq 1 $N); do
	rx_plain curl -s -o /dev/null -w '%{http_code}\n' \
		"http://127.0.0.1:$port/r/$i"
done >"$RX_TMP/codes"
rx_dump_on_fail "$RX_TMP/codes"
rx_assert_eq "inbound: every request answered" $N \
	"$(grep -c '^[0-9][0-9][0-9]$' "$RX_TMP/codes")"
rx_assert_eq "answered 500 by the upstream" $((MIN - 1)) \
	"$(grep -c '^500$' "$RX_TMP/codes")"
rx_assert_eq "answered 502 by nginx, the breaker open" $((N - MIN + 1)) \
	"$(grep -c '^502$' "$RX_TMP/codes")"
rx_assert_eq "requests that reached the upstream" $MIN "$(rx_count up)"
rx_assert_eq "breaker transitions in the worker" "closed>open" \
	"$(rx_transitions "$shimlog")"
rx_assert_grep "nginx saw the refusal as a connection error" \
	'Connection refused' "$pre/logs/error.log"
rx_assert_no_grep "no key for nginx's own listening port" \
	"key=127.0.0.1:$port " "$shimlog"
rx_pass
