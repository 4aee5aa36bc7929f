#!/bin/bash
# limiter_no_harm.sh - do no harm (ADR-380): at its defaults the limiter
# never refuses a call to a healthy upstream, however busy this host gets.
#
# A healthy nginx on 127.0.0.1 serves a 512-byte file (started here,
# outside the shim). Real load generators run against it under the shim,
# each for 2 s, each saturating this machine's CPUs so that the latency the
# limiter measures grows with their concurrency, as it did when the
# limiter used to shed them (limiter-full):
#
#   ab -c 64        a new connection per request (non-blocking sockets);
#   ab -k -c 128    keep-alive;
#   wrk -t2 -c256   keep-alive, two event loops;
#   python3         a ThreadPoolExecutor of 32 urllib clients, a new
#                   connection per request, with timeout=5 (non-blocking
#                   sockets waited for in poll) and without (blocking),
#                   and of 100 with timeout=5 (more calls at once than
#                   the limit a busy host's latency teaches: ADR-630);
#   nginx           as a reverse proxy under the shim, wrk outside it.
#
# Refusals are counted from the shim's metrics file
# (resilix_refusals_total, every reason), not from timing; the programs'
# own error counts must be 0 as well. About 15 s.
. "$(dirname "$0")/lib.sh"
rx_require_build
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || rx_need nginx
rx_need ab
rx_need wrk
rx_need python3
rx_need curl
if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
	echo "SKIP: $RX_NAME: nginx is not instrumented for this sanitizer build"
	exit 77
fi
SECS=2
chmod 0755 "$RX_TMP" # nginx workers may run as another user

# nginx NAME PORT BODY [VAR=value...]: an nginx in $RX_TMP/NAME on PORT,
# BODY in its server block, $http_extra in its http block; the variables
# go to its environment (the shim, for the proxy).
nginx_start() {
	local name=$1 port=$2 body=$3 pre=$RX_TMP/$1
	shift 3
	temps=$(rx_nginx_dir "$pre")
	cat >"$pre/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $pre/nginx.pid;
error_log $pre/logs/error.log warn;
events { worker_connections 2048; }
http {
	access_log off;
$temps
	keepalive_requests 1000000;
	${http_extra:-}
	server {
		listen 127.0.0.1:$port backlog=2048;
		$body
	}
}
CONF
	timeout -k 2 40 env "$@" "$NGINX" -p "$pre" -c "$pre/nginx.conf" \
		-e "$pre/logs/error.log" >"$pre/out" 2>&1 &
	RX_PIDS="$RX_PIDS $!"
	rx_dump_on_fail "$pre/logs/error.log"
	rx_wait_for 10 curl -fs -o /dev/null "http://127.0.0.1:$port/f.txt" ||
		rx_fail "nginx $name did not start: $(cat "$pre/out")"
}

mkdir -p "$RX_TMP/www"
head -c 512 /dev/zero | tr '\0' x >"$RX_TMP/www/f.txt"
chmod -R a+rX "$RX_TMP/www"
up=$(rx_free_port)
nginx_start up "$up" "root $RX_TMP/www;"
URL=http://127.0.0.1:$up/f.txt

# sum METRIC FILE...: the sum of a metric's series in metrics files.
sum() {
	local m=$1
	shift
	cat "$@" 2>/dev/null | awk -v m="$m" \
		'index($0, m) == 1 && substr($0, length(m) + 1, 1) ~ /[{ ]/ \
		{ s += $NF } END { printf "%d\n", s }'
}
# checked NAME FILE...: the shim saw calls (its limiter closed windows)
# and refused none of them.
checked() {
	local name=$1
	shift
	rx_assert_ge "$name: calls the shim settled" \
		"$(sum resilix_calls_total "$@")" 500
	rx_assert_ge "$name: the limiter measured a baseline (us)" \
		"$(cat "$@" | awk '/^resilix_limiter_rtt_noload_seconds/ \
			{ printf "%d\n", $NF * 1e6 }' | sort -n | tail -n1)" 1
	rx_assert_eq "$name: refusals" 0 "$(sum resilix_refusals_total "$@")"
}

# --- ab, a new connection per request, and keep-alive ---------------------
for args in "-c 64" "-k -c 128"; do
	name="ab $args"
	m=$RX_TMP/ab${args// /}.prom out=$RX_TMP/ab${args// /}.out
	rx_dump_on_fail "$out"
	# shellcheck disable=SC2086
	rx_shim RESILIX_METRICS_FILE="$m" ab -q -r $args -t $SECS \
		-n 10000000 "$URL" >"$out" 2>&1 ||
		rx_fail "$name: exit status $? ($(tail -n1 "$out"))"
	rx_assert_eq "$name: failed requests" 0 \
		"$(awk '/^Failed requests/ { print $3 }' "$out")"
	rx_assert_no_grep "$name: non-2xx responses" '^Non-2xx' "$out"
	checked "$name" "$m"
done

# --- wrk ----------------------------------------------------------------------
m=$RX_TMP/wrk.prom out=$RX_TMP/wrk.out
rx_dump_on_fail "$out"
rx_shim RESILIX_METRICS_FILE="$m" wrk -t2 -c256 -d${SECS}s "$URL" \
	>"$out" 2>&1 || rx_fail "wrk: exit status $?"
rx_assert_no_grep "wrk: socket errors" 'Socket errors' "$out"
rx_assert_no_grep "wrk: non-2xx responses" 'Non-2xx' "$out"
checked wrk "$m"

# --- a python3 thread pool --------------------------------------------------
cat >"$RX_TMP/pool.py" <<'PY'
import concurrent.futures, sys, time, urllib.request
url, secs, timeout = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
n = int(sys.argv[4])
end = time.monotonic() + secs
def worker(_):
    ok = bad = 0
    while time.monotonic() < end:
        try:
            kw = {"timeout": timeout} if timeout > 0 else {}
            with urllib.request.urlopen(url, **kw) as r:
                r.read()
            ok += 1
        except Exception as e:
            print("error", e, flush=True)
            bad += 1
    return ok, bad
with concurrent.futures.ThreadPoolExecutor(n) as ex:
    res = list(ex.map(worker, range(n)))
print("ok", sum(r[0] for r in res), "errors", sum(r[1] for r in res))
PY
for run in 32:5 32:0 100:5; do
	n=${run%:*} to=${run#*:}
	name="python3 pool of $n, timeout=$to"
	m=$RX_TMP/py$n-$to.prom out=$RX_TMP/py$n-$to.out
	rx_dump_on_fail "$out"
	rx_shim RESILIX_METRICS_FILE="$m" python3 "$RX_TMP/pool.py" "$URL" \
		$SECS $to $n >"$out" 2>&1 || rx_fail "$name: exit status $?"
	rx_assert_grep "$name: no errors" '^ok [0-9]* errors 0$' "$out"
	checked "$name" "$m"
done

# --- nginx as a proxy under the shim ---------------------------------------
# Its worker writes its own metrics file (%p) into a directory it can
# write to; read while it runs (a worker removes its file at exit). Its
# upstream connections are kept alive (non-blocking connects, then
# requests on them): a connection per request would leave tens of
# thousands of ports in TIME_WAIT on this side, and a suite that runs
# such tests back to back then fails its connects (EADDRNOTAVAIL).
px=$(rx_free_port)
pm=$RX_TMP/proxy/tmp
http_extra="upstream up { server 127.0.0.1:$up; keepalive 128; }"
nginx_start proxy "$px" "location / { proxy_pass http://up;
		proxy_http_version 1.1; proxy_set_header Connection \"\"; }" \
	LD_PRELOAD="$RESILIX_SO" RESILIX_METRICS_FILE="$pm/m-%p.prom" \
	RESILIX_METRICS_INTERVAL_MS=100
out=$RX_TMP/proxy.out
rx_dump_on_fail "$out"
rx_plain wrk -t2 -c128 -d${SECS}s "http://127.0.0.1:$px/f.txt" >"$out" 2>&1 ||
	rx_fail "wrk against the proxy: exit status $?"
# One more call after the interval, so the worker writes what it saw.
sleep 0.3
rx_plain curl -fs -o /dev/null "http://127.0.0.1:$px/f.txt" ||
	rx_fail "the proxy failed a request after the load"
rx_wait_for 5 test -n "$(ls "$pm"/m-*.prom 2>/dev/null)" ||
	rx_fail "the proxy's worker wrote no metrics file"
rx_assert_no_grep "proxy: wrk socket errors" 'Socket errors' "$out"
rx_assert_no_grep "proxy: non-2xx responses (502: refused upstream)" \
	'Non-2xx' "$out"
checked proxy "$pm"/m-*.prom
rx_pass
