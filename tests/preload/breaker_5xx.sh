#!/bin/bash
# breaker_5xx.sh - a flood of HTTP 500s trips the breaker on the failure
# rate; after the trip every call fails fast (curl: code 000, exit 7;
# urllib: ConnectionRefusedError; the C client: -1/ECONNREFUSED from
# connect) and the upstream sees no more requests.
#
# The consecutive-failure backstop is off here, so only the failure-rate
# condition can trip: the breaker must open after exactly MIN_CALLS calls
# (all failures, rate 1 > 0.5) and not one call later.
. "$(dirname "$0")/lib.sh"
rx_need curl python3
rx_require_build

MIN=10
guard=(RESILIX_LOG=info RESILIX_FAILURE_RATE=0.5 RESILIX_MIN_CALLS=$MIN
	RESILIX_WINDOW_CALLS=20 RESILIX_WINDOW_MAX_AGE_MS=60000
	RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000)

# --- curl: 40 URLs in one invocation (one kept-alive connection) ---------
if rx_usable curl; then
	rx_upstream_start curl --phases 0:status:500
	out=$RX_TMP/curl.out err=$RX_TMP/curl.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" curl -s -o /dev/null -w '%{http_code} %{exitcode}\n' \
		"http://127.0.0.1:$RX_PORT/[1-40]" >"$out" 2>"$err"
	rc=$?
	rx_assert_eq "curl exit status (last transfer failed to connect)" 7 "$rc"
	rx_assert_eq "curl transfers" 40 "$(wc -l <"$out" | tr -d ' ')"
	rx_assert_eq "transfers answered 500 before the trip" "$MIN" \
		"$(grep -c '^500 0$' "$out")"
	rx_assert_eq "transfers failed fast after the trip (000, exit 7)" \
		$((40 - MIN)) "$(grep -c '^000 7$' "$out")"
	rx_assert_eq "the 500s came first" "$MIN" \
		"$(head -n "$MIN" "$out" | grep -c '^500 0$')"
	rx_assert_eq "requests that reached the upstream" "$MIN" "$(rx_count curl)"
	rx_assert_eq "transitions logged by the shim" "closed>open" \
		"$(rx_transitions "$err")"
	rx_assert_grep "trip reason is the failure rate" \
		'to=open .*reason=failure' "$err"
	sleep 0.3
	rx_assert_eq "upstream log stopped growing" "$MIN" "$(rx_count curl)"
	rx_upstream_stop curl
fi

# --- python3 urllib: 40 calls in a loop, a new connection each ---------------
if rx_usable python3; then
	rx_upstream_start py --phases 0:status:500
	out=$RX_TMP/py.out err=$RX_TMP/py.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" python3 - "$RX_PORT" >"$out" 2>"$err" <<'PY'
import sys, time, urllib.request, urllib.error
port = sys.argv[1]
for i in range(40):
    t = time.monotonic()
    try:
        r = urllib.request.urlopen("http://127.0.0.1:%s/py/%d" % (port, i))
        what = "http %d" % r.status
    except urllib.error.HTTPError as e:
        what = "http %d" % e.code
    except urllib.error.URLError as e:
        what = "error %s" % type(e.reason).__name__
    except OSError as e:
        what = "error %s" % type(e).__name__
    print(what, int((time.monotonic() - t) * 1e6), flush=True)
PY
	rc=$?
	rx_assert_eq "python exit status" 0 "$rc"
	rx_assert_eq "urllib calls answered 500" "$MIN" "$(grep -c '^http 500 ' "$out")"
	rx_assert_eq "urllib calls refused (ConnectionRefusedError)" $((40 - MIN)) \
		"$(grep -c '^error ConnectionRefusedError ' "$out")"
	rx_assert_eq "requests that reached the upstream" "$MIN" "$(rx_count py)"
	slowest=$(awk '$1 == "error" { if ($3 > m) m = $3 } END { print m + 0 }' "$out")
	rx_assert_le "slowest refused call (us)" "$slowest" 200000
	rx_assert_eq "transitions logged by the shim" "closed>open" \
		"$(rx_transitions "$err")"
fi

# --- the C client: a new connection per request -----------------------------
rx_upstream_start client --phases 0:status:500
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err"
rx_shim "${guard[@]}" "$CLIENT" --port "$RX_PORT" --requests 40 \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
rx_assert_eq "client: calls answered 500" "$MIN" "$(grep -c ' 500 OK 1$' "$out")"
rx_assert_eq "client: calls refused without reaching the network" \
	$((40 - MIN)) "$(grep -c ' 0 ECONNREFUSED 0$' "$out")"
rx_assert_eq "client: requests that reached the upstream" "$MIN" \
	"$(rx_count client)"
rx_assert_eq "client: transitions logged by the shim" "closed>open" \
	"$(rx_transitions "$err")"
rx_pass
