#!/bin/bash
# hedge_curl.sh - hedged libcurl GETs (ADR-469 to ADR-474), one program
# (tests/support/curl_client, serial transfers on one handle) against a
# python upstream on 127.0.0.1 whose every 10th answer is slow:
#   - the p99 of the program's GETs drops with RESILIX_HEDGE=1 (a fixed
#     RESILIX_HEDGE_DELAY_MS) against the same run without it, and the
#     requests beyond one per transfer that reach the upstream stay within
#     the retry budget (0.1 of first attempts plus its floor of 10);
#   - the program sees exactly one body per transfer, the winner's;
#   - with the measured p95 (no fixed delay), an upstream slow on every
#     40th answer: the p99 drops too;
#   - a hedge answered 503 at once never beats an original that then
#     succeeds: the program gets the original's 200 and body;
#   - a POST is never hedged: the upstream sees it once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_need python3
rx_require_build
rx_need_curl_client
rx_curl_client_usable || rx_skip "curl_client cannot run in this build"

SLOW_MS=300
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
        group = path.split("/")[1]
        with lock:
            seen[group] = seen.get(group, 0) + 1
            k = seen[group]
        status, body, delay = 200, b"body %s %d\n" % (group.encode(), k), 0
        if group.startswith("every"):
            if k % int(group[5:].rstrip("ab")) == 0:
                delay = int(sys.argv[2]) / 1000
        elif group.startswith("ff"):
            # the original waits and succeeds, the hedge fails at once
            if k % 2 == 1:
                delay, body = 0.2, b"good\n"
            else:
                status, body = 503, b"bad\n"
        elif method == "POST":
            delay = 0.2
        print(method, path, k, status, flush=True)
        time.sleep(delay)
        try:
            c.sendall(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body))
        except OSError:
            break
    c.close()
' $SLOW_MS
port=$(cat "$RX_TMP/srv.port")
srvlog=$RX_TMP/srv.port.log
rx_dump_on_fail "$srvlog"

# p99 (ms) of the elapsed column (5th, us) of curl_client's lines.
p99() {
	awk 'NF >= 6 && $1 == 0 { print $5 }' "$1" | sort -n |
		awk '{ v[NR] = $1 } END { i = int(NR * 0.99 + 0.999); if (i < 1) i = 1; printf "%d\n", v[i] / 1000 }'
}
requests_of() { grep -c " /$1/" "$srvlog"; }

run() { # NAME GROUP N ENV...
	local name=$1 group=$2 n=$3
	shift 3
	rx_dump_on_fail "$RX_TMP/$name.err"
	rx_shim RESILIX_LOG=debug RESILIX_LOG_FILE="$RX_TMP/$name.log" "$@" \
		"$CURL_CLIENT" --print-body --requests "$n" --timeout-ms 5000 \
		"http://127.0.0.1:$port/$group/x" >"$RX_TMP/$name.out" \
		2>"$RX_TMP/$name.err" || rx_fail "$name: curl_client exit status $?"
	rx_assert_eq "$name: every transfer answered 200" "$n" \
		"$(awk 'NF >= 6 && $3 == 0 && $4 == 200' "$RX_TMP/$name.out" | wc -l | tr -d ' ')"
	rx_assert_eq "$name: exactly one body per transfer" "$n" \
		"$(grep -c "^body $group " "$RX_TMP/$name.out")"
}

# --- every 10th answer slow: off, then a fixed delay -----------------
N=200
run off every10 $N
p99_off=$(p99 "$RX_TMP/off.out")
run fixed every10a $N RESILIX_HEDGE=1 RESILIX_HEDGE_DELAY_MS=20
# The same server rule on a fresh counter (group every10a: every 10th).
p99_on=$(p99 "$RX_TMP/fixed.out")
extra=$(($(requests_of every10a) - N))
hedges=$(grep -c 'event=hedge at=curl' "$RX_TMP/fixed.log")
refused=$(grep -c 'reason=budget-exceeded at=curl-hedge' "$RX_TMP/fixed.log")
wins=$(grep -c 'event=hedge-done at=curl winner=hedge' "$RX_TMP/fixed.log")
rx_log "every 10th slow (${SLOW_MS} ms), $N GETs: p99 ${p99_off} ms without" \
	"hedging, ${p99_on} ms with RESILIX_HEDGE_DELAY_MS=20; $hedges hedges" \
	"($wins won), $refused refused by the budget, $extra extra requests" \
	"(budget: $((N / 10 + 10)))"
rx_assert_ge "without hedging the p99 is a slow answer (ms)" "$p99_off" $SLOW_MS
rx_assert_le "with hedging the p99 is well under it (ms)" "$p99_on" $((SLOW_MS / 2))
rx_assert_ge "hedges were made" "$hedges" 10
rx_assert_eq "every extra request is a hedge" "$hedges" "$extra"
rx_assert_le "extra requests within the budget" "$extra" $((N / 10 + 10))
rx_assert_eq "one settlement per transfer" $N \
	"$(grep -c 'event=settle' "$RX_TMP/fixed.log")"

# --- the measured p95, every 40th answer slow ------------------------
N=300
run p95off every40 $N
run p95on every40a $N RESILIX_HEDGE=1
p99_off=$(p99 "$RX_TMP/p95off.out")
p99_on=$(p99 "$RX_TMP/p95on.out")
extra=$(($(requests_of every40a) - N))
rx_log "every 40th slow, $N GETs: p99 ${p99_off} ms without hedging," \
	"${p99_on} ms with the measured p95; $extra extra requests" \
	"(budget: $((N / 10 + 10)))"
rx_assert_ge "p95: without hedging the p99 is a slow answer (ms)" "$p99_off" $SLOW_MS
rx_assert_le "p95: with hedging the p99 is well under it (ms)" "$p99_on" $((SLOW_MS / 2))
rx_assert_le "p95: extra requests within the budget" "$extra" $((N / 10 + 10))

# --- a hedge that fails fast does not beat the original --------------
out=$RX_TMP/ff.out
rx_shim RESILIX_HEDGE=1 RESILIX_HEDGE_DELAY_MS=50 RESILIX_LOG=debug \
	RESILIX_LOG_FILE="$RX_TMP/ff.log" "$CURL_CLIENT" --print-body \
	--requests 3 "http://127.0.0.1:$port/ff/x" >"$out" ||
	rx_fail "ff: curl_client exit status $?"
rx_assert_eq "ff: each transfer got the original's 200 and body" \
	"good|0 0 0 200|good|0 1 0 200|good|0 2 0 200" \
	"$(awk '{ print ($1 == "good") ? $1 : $1 " " $2 " " $3 " " $4 }' "$out" | tr '\n' '|' | sed 's/|$//')"
rx_assert_eq "ff: the hedges reached the upstream and got 503" 3 \
	"$(grep -c ' /ff/x [0-9]* 503$' "$srvlog")"
rx_assert_eq "ff: the original won each time" 3 \
	"$(grep -c 'event=hedge-done at=curl winner=original' "$RX_TMP/ff.log")"

# --- a POST is never hedged ------------------------------------------
rx_shim RESILIX_HEDGE=1 RESILIX_HEDGE_DELAY_MS=20 RESILIX_LOG=debug \
	RESILIX_LOG_FILE="$RX_TMP/post.log" "$CURL_CLIENT" --method POST \
	--requests 3 "http://127.0.0.1:$port/post/x" >"$RX_TMP/post.out" ||
	rx_fail "post: curl_client exit status $?"
rx_assert_eq "post: the upstream saw each POST once" 3 "$(requests_of post)"
rx_assert_eq "post: no hedge" 0 "$(grep -c 'event=hedge' "$RX_TMP/post.log")"
rx_pass
