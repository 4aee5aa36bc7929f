#!/bin/bash
# nginx_shared.sh - nginx with 4 worker processes under the shim with
# RESILIX_SHARED: the workers share one breaker for their upstream
# (ADR-480), so an upstream that answers 500 sees about one process's
# worth of failures (MIN_CALLS) before the circuit opens, not four.
#
# nginx is started as in nginx_proxy.sh (daemon off, its own prefix, pid
# and logs in the test's temp dir, 127.0.0.1 only), here with
# worker_processes 4 and the accept mutex off, so that requests spread
# over the workers; 60 requests from 6 curl processes at a time. The same
# run without RESILIX_SHARED gives each worker its own breaker: it is
# measured and reported (how far above MIN_CALLS depends on how many
# workers the kernel handed requests to), and must be above the shared
# run's count when at least two workers called the upstream.
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
N=60

# run LABEL [VAR=VALUE...]: nginx with 4 workers, N requests, then stop.
# Sets SEEN (requests that reached the upstream) and WORKERS (worker
# processes that settled a call).
run() {
	local label=$1 pre=$RX_TMP/$1 port pid
	shift
	rx_upstream_start "up$label" --phases 0:status:500
	port=$(rx_free_port)
	temps=$(rx_nginx_dir "$pre")
	cat >"$pre/nginx.conf" <<CONF
daemon off;
worker_processes 4;
pid $pre/nginx.pid;
error_log $pre/logs/error.log info;
events { worker_connections 64; accept_mutex off; }
http {
	access_log $pre/logs/access.log;
$temps
	upstream up {
		server 127.0.0.1:$RX_PORT max_fails=0;
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
	local shimlog=$RX_TMP/$label.shim.log
	rx_dump_on_fail "$pre/logs/error.log" "$shimlog"
	timeout -k 2 40 env LD_PRELOAD="$RESILIX_SO" RESILIX_LOG=debug \
		RESILIX_LOG_FILE="$shimlog" RESILIX_FAILURE_RATE=0.5 \
		RESILIX_MIN_CALLS=$MIN RESILIX_WINDOW_CALLS=10 \
		RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000 "$@" \
		"$NGINX" -p "$pre" -c "$pre/nginx.conf" -e "$pre/logs/error.log" \
		>"$RX_TMP/$label.nginx.out" 2>&1 &
	pid=$!
	RX_PIDS="$RX_PIDS $pid"
	# Ready when it listens (a request would be an upstream call).
	rx_wait_for 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" ||
		rx_fail "$label: nginx did not start"
	seq 1 $N | xargs -P 6 -I{} curl -s -o /dev/null -w '%{http_code}\n' \
		"http://127.0.0.1:$port/r/{}" >"$RX_TMP/$label.codes"
	rx_assert_eq "$label: inbound: every request answered" $N \
		"$(grep -c '^[0-9][0-9][0-9]$' "$RX_TMP/$label.codes")"
	kill -QUIT "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	SEEN=$(rx_count "up$label")
	WORKERS=$(grep 'event=settle ' "$shimlog" | grep -o ' pid=[0-9]*' |
		sort -u | wc -l)
	rx_log "$label: upstream saw $SEEN requests from $WORKERS workers" \
		"($(grep -c '^502$' "$RX_TMP/$label.codes") answered 502)"
}

run shared RESILIX_SHARED="$RX_TMP/seg"
shared_seen=$SEEN
rx_assert_ge "shared: requests that reached the upstream" "$SEEN" $MIN
# MIN, plus the calls other workers had in flight when the circuit
# opened (6 at a time at most).
rx_assert_le "shared: requests that reached the upstream" "$SEEN" \
	$((MIN + 5))
rx_assert_eq "shared: the circuit opened once for all workers" 1 \
	"$(rx_count_to open "$RX_TMP/shared.shim.log")"

run alone
if [ "$WORKERS" -ge 2 ]; then
	rx_assert_ge "per process: more reached the upstream than shared" \
		"$SEEN" $((shared_seen + 1))
fi
rx_pass
