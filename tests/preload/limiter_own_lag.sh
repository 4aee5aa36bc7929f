#!/bin/bash
# limiter_own_lag.sh - a program that is its own bottleneck is not limited
# for it (ADR-686). node's fetch() keeps 2000 requests in flight against a
# healthy nginx on 127.0.0.1 (10,000 in all, each worker fetching again as
# soon as its answer is read), and its one event loop, on its CPU all the
# time, reads every answer seconds late: that lag is the latency the shim
# measures, it grows as the loop ramps up, and the learning rule read it
# as an upstream queue. Before, at the defaults, 3,000 to 4,500 of the
# 10,000 were refused limiter-full (none without the shim). Now the
# windows such a saturated caller settles are no queueing evidence, and
# nothing is refused: counted from the shim's metrics file, and from
# node's own errors. limiter_capacity.sh holds that a real queue still
# binds. Skipped without node or nginx. About 20 s.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need node
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || rx_need nginx
if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
	echo "SKIP: $RX_NAME: node and nginx are not instrumented for this build"
	exit 77
fi
N=10000 C=2000
# The client's connections, nginx's, and those closing.
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -H -n)" 2>/dev/null
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge $((C * 3)) ] ||
	rx_skip "ulimit -n $(ulimit -n) is below $((C * 3))"
chmod 0755 "$RX_TMP" # nginx workers may run as another user

pre=$RX_TMP/nginx port=$(rx_free_port)
temps=$(rx_nginx_dir "$pre")
mkdir -p "$RX_TMP/www"
head -c 512 /dev/zero | tr '\0' x >"$RX_TMP/www/f.txt"
chmod -R a+rX "$RX_TMP/www"
cat >"$pre/nginx.conf" <<CONF
daemon off;
worker_processes 1;
worker_rlimit_nofile 20000;
pid $pre/nginx.pid;
error_log $pre/logs/error.log warn;
events { worker_connections 16384; }
http {
	access_log off;
$temps
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:$port backlog=4096;
		root $RX_TMP/www;
	}
}
CONF
timeout -k 2 120 "$NGINX" -p "$pre" -c "$pre/nginx.conf" \
	-e "$pre/logs/error.log" >"$pre/out" 2>&1 &
RX_PIDS="$RX_PIDS $!"
rx_dump_on_fail "$pre/logs/error.log"
rx_wait_for 10 curl -fs -o /dev/null "http://127.0.0.1:$port/f.txt" ||
	rx_fail "nginx did not start: $(cat "$pre/out")"

loop=$RESILIX_SRCDIR/tests/support/fetch_loop.mjs
ok='{"codes":{"200":'$N'},"errs":{}}'
# Without the shim first: a host that cannot carry the load says so here.
plain=$(rx_plain node "$loop" "$port" $N $C) ||
	rx_fail "node without the shim: exit status $?"
[ "$plain" = "$ok" ] ||
	rx_skip "node without the shim did not get $N answers: $plain"

m=$RX_TMP/node.prom log=$RX_TMP/shim.log
rx_dump_on_fail "$log"
got=$(rx_shim RESILIX_METRICS_FILE="$m" RESILIX_LOG=info \
	RESILIX_LOG_FILE="$log" node "$loop" "$port" $N $C) ||
	rx_fail "node under the shim: exit status $?"
refused=$(awk 'index($0, "resilix_refusals_total") == 1 { s += $NF }
	END { printf "%d\n", s }' "$m")
rx_assert_eq "refusals (metrics file)" 0 "$refused"
rx_assert_eq "node's answers and errors" "$ok" "$got"
rx_pass
