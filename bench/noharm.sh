#!/usr/bin/env bash
# bench/noharm.sh - do no harm, as a figure: real load generators against a
# healthy nginx on 127.0.0.1, without the shim and with it at its defaults,
# interleaved (none, shim, none, shim, ...), so that a noisy moment of the
# machine falls on both sides.
#
# Per row: requests completed (summed over the shim's runs), refusals
# (resilix_refusals_total from the shim's metrics file, every reason),
# errors the program itself reported (failed or non-2xx requests, aborted
# runs), the median throughput without and with the shim, and their ratio.
# The goal (docs/decisions.md, ADR-380): zero refusals and a ratio of at
# least 0.95 on every row. Not a test: timing on a shared machine is noisy.
#
# Usage: bench/noharm.sh [ROW...]        (default: every row)
#   rows: ab1 ab16 ab64 ab256 abk16 abk128 wrk16 wrk256 py4 py32 py4t py32t
#         proxy curl
# Environment: NOHARM_SECONDS (3) per run, NOHARM_REPS (3) runs per side,
# RESILIX_BUILDDIR (the build to use; else _build/ or the source tree),
# and any RESILIX_* variable, passed to the shimmed side only.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
secs=${NOHARM_SECONDS:-3}
reps=${NOHARM_REPS:-3}
BUILD=""
for d in ${RESILIX_BUILDDIR:+"$RESILIX_BUILDDIR"} "$root/_build" "$root"; do
	if [ -f "$d/.libs/libresilix_preload.so" ]; then
		BUILD=$d
		break
	fi
done
[ -n "$BUILD" ] || {
	echo "bench/noharm.sh: no build found (set RESILIX_BUILDDIR)" >&2
	exit 1
}
SO=$BUILD/.libs/libresilix_preload.so
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
for p in ab wrk curl python3 "$NGINX"; do
	command -v "$p" >/dev/null || {
		echo "bench/noharm.sh: needs $p (scripts/deps test)" >&2
		exit 1
	}
done

tmp=$(mktemp -d /tmp/resilix-noharm.XXXXXX)
chmod 0755 "$tmp" # nginx workers may run as another user
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# nginx NAME PORT BODY [PRELOAD]: an nginx in $tmp/NAME listening on PORT,
# BODY inside its http block.
nginx_start() {
	local pre=$tmp/$1
	mkdir -p "$pre/logs" "$pre/tmp"
	chmod 0777 "$pre/tmp"
	cat >"$pre/nginx.conf" <<CONF
daemon off;
worker_processes ${NGINX_WORKERS:-1};
pid $pre/nginx.pid;
error_log $pre/logs/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $pre/tmp/body;
	proxy_temp_path $pre/tmp/proxy;
	fastcgi_temp_path $pre/tmp/fastcgi;
	uwsgi_temp_path $pre/tmp/uwsgi;
	scgi_temp_path $pre/tmp/scgi;
	keepalive_requests 1000000;
	server {
		listen 127.0.0.1:$2 backlog=4096;
		$3
	}
}
CONF
	env ${4:+LD_PRELOAD=$4} ${4:+RESILIX_METRICS_FILE=$pre/tmp/m-%p.prom} \
		${4:+RESILIX_METRICS_INTERVAL_MS=200} \
		"$NGINX" -p "$pre" -c "$pre/nginx.conf" -e "$pre/logs/error.log" \
		>"$pre/out" 2>&1 &
	echo $!
}
ready() {
	for _ in $(seq 1 100); do
		curl -fs -o /dev/null "http://127.0.0.1:$1/f.txt" && return 0
		sleep 0.05
	done
	echo "bench/noharm.sh: nginx on $1 did not start" >&2
	exit 1
}

mkdir -p "$tmp/www"
head -c 512 /dev/zero | tr '\0' x >"$tmp/www/f.txt"
up_port=$(free_port)
p=$(nginx_start up "$up_port" "root $tmp/www;")
pids="$pids $p"
ready "$up_port"
URL=http://127.0.0.1:$up_port/f.txt

cat >"$tmp/pool.py" <<'PY'
# A thread pool of urllib clients, a new connection per request, for a
# fixed time; prints requests completed, errors, requests per second.
import concurrent.futures, sys, time, urllib.request
url, threads, secs, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
end = time.monotonic() + secs
def worker(_):
    ok = bad = 0
    while time.monotonic() < end:
        try:
            kw = {"timeout": timeout} if timeout > 0 else {}
            with urllib.request.urlopen(url, **kw) as r:
                r.read()
            ok += 1
        except Exception:
            bad += 1
    return ok, bad
t0 = time.monotonic()
with concurrent.futures.ThreadPoolExecutor(threads) as ex:
    res = list(ex.map(worker, range(threads)))
dt = time.monotonic() - t0
ok = sum(r[0] for r in res); bad = sum(r[1] for r in res)
print(ok, bad, ok / dt)
PY
curl_n=$((secs * 1500))
for _ in $(seq 1 "$curl_n"); do
	printf 'url = "%s"\noutput = "/dev/null"\n' "$URL"
done >"$tmp/curl.cfg"

# run ROW SIDE: one run; prints "requests errors rps".
run() {
	local row=$1 side=$2 out=$tmp/out pre=()
	if [ "$side" = shim ]; then
		rm -f "$tmp/m.prom"
		pre=(env LD_PRELOAD="$SO" RESILIX_METRICS_FILE="$tmp/m.prom")
	fi
	case $row in
	ab*)
		local k="" c=${row#ab}
		case $c in k*) k=-k c=${c#k} ;; esac
		if "${pre[@]}" ab $k -r -q -t "$secs" -n 10000000 -c "$c" \
			"$URL" >"$out" 2>&1; then
			awk '/^Complete requests/{n=$3} /^Failed requests/{f=$3}
			     /^Non-2xx/{x=$3} /^Requests per second/{r=$4}
			     END{print n+0, f+x, r+0}' "$out"
		else
			echo "0 aborted 0"
		fi
		;;
	wrk*)
		"${pre[@]}" wrk -t2 -c"${row#wrk}" -d"${secs}s" "$URL" >"$out" 2>&1 || true
		awk '/requests in/{n=$1} /Socket errors/{gsub(",","");
		     e=$4+$6+$8+$10} /Non-2xx/{x=$5} /^Requests\/sec/{r=$2}
		     END{print n+0, e+x, r+0}' "$out"
		;;
	py*)
		local t=${row#py} to=0
		case $t in *t) to=5 t=${t%t} ;; esac
		"${pre[@]}" python3 "$tmp/pool.py" "$URL" "$t" "$secs" "$to"
		;;
	proxy)
		local pp
		pp=$(free_port)
		rm -f "$tmp"/proxy/tmp/m-*.prom
		local pid
		pid=$(nginx_start proxy "$pp" "location / { proxy_pass \
http://127.0.0.1:$up_port; proxy_http_version 1.1; \
proxy_set_header Connection \"\"; }" "$([ "$side" = shim ] && echo "$SO")")
		ready "$pp"
		wrk -t2 -c128 -d"${secs}s" "http://127.0.0.1:$pp/f.txt" >"$out" 2>&1 || true
		sleep 0.3
		curl -s -o /dev/null "http://127.0.0.1:$pp/f.txt" || true
		sleep 0.1
		cat "$tmp"/proxy/tmp/m-*.prom >"$tmp/m.prom" 2>/dev/null || true
		kill "$pid" 2>/dev/null || true
		while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
		awk '/requests in/{n=$1} /Socket errors/{gsub(",","");
		     e=$4+$6+$8+$10} /Non-2xx/{x=$5} /^Requests\/sec/{r=$2}
		     END{print n+0, e+x, r+0}' "$out"
		;;
	curl)
		local t0 t1 rc=0
		t0=$(date +%s.%N)
		"${pre[@]}" curl -sS -Z --parallel-max 50 -K "$tmp/curl.cfg" \
			-w "%{http_code}\n" >"$out" 2>"$out.err" || rc=$?
		t1=$(date +%s.%N)
		awk -v n="$curl_n" -v t0="$t0" -v t1="$t1" -v rc="$rc" \
			'/^200$/{ok++} END{print ok+0, n-ok, ok/(t1-t0)}' "$out"
		;;
	esac
}

refusals() {
	[ -f "$tmp/m.prom" ] || {
		echo 0
		return
	}
	awk '/^resilix_refusals_total/{s+=$NF} END{print s+0}' "$tmp/m.prom"
}

median() { sort -g | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }

rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(ab1 ab16 ab64 ab256 abk16 abk128 wrk16 wrk256
	py4 py32 py4t py32t proxy curl)
echo "== do no harm: ${secs}s runs, ${reps} per side, interleaved; load" \
	"average $(cut -d' ' -f1 /proc/loadavg); nginx 512-byte file on 127.0.0.1"
printf '%-8s %10s %9s %7s %10s %10s %6s\n' row requests refusals errors \
	"none/s" "shim/s" ratio
for row in "${rows[@]}"; do
	: >"$tmp/none" && : >"$tmp/shim"
	reqs=0 refs=0 errs=0
	for _ in $(seq 1 "$reps"); do
		for side in none shim; do
			run "$row" "$side" >"$tmp/res"
			read -r n e r <"$tmp/res"
			echo "$r" >>"$tmp/$side"
			if [ "$side" = shim ]; then
				reqs=$((reqs + n))
				refs=$((refs + $(refusals)))
				if [ "$e" = aborted ]; then errs=aborted; fi
				[ "$errs" = aborted ] || errs=$((errs + e))
			fi
		done
	done
	a=$(median <"$tmp/none")
	b=$(median <"$tmp/shim")
	ratio=$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2f", (a > 0 ? b / a : 0)}')
	printf '%-8s %10s %9s %7s %10.0f %10.0f %6s\n' "$row" "$reqs" "$refs" \
		"$errs" "$a" "$b" "$ratio"
done
