#!/bin/bash
# curl_endpoint.sh - RESILIX_CURL_KEY (ADR-154). With endpoint keys,
# failures of GET /payments trip that circuit only: GET /users on the same
# host:port stays closed and keeps reaching the upstream, and the query
# string is not part of the key (/payments?page=1 and ?page=2 share one
# circuit). origin keys by scheme://host:port. An invalid value prints one
# line naming the variable and the accepted values, and the shim passes
# everything through.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need python3
rx_need_curl_client
rx_curl_client_usable || rx_pass "nothing to run in this build"

MIN=6
guard=(RESILIX_LOG=debug RESILIX_FAILURE_RATE=0.5 RESILIX_MIN_CALLS=$MIN
	RESILIX_WINDOW_CALLS=20 RESILIX_CONSECUTIVE_BACKSTOP=0
	RESILIX_OPEN_MS=30000)
rx_pyup_start e --rule /payments=500 --default 200
P=$RX_PORT

# Alternate: payments page i, users; 20 of each.
urls=()
for i in $(seq 1 20); do
	urls+=("http://127.0.0.1:$P/payments?page=$i" "http://127.0.0.1:$P/users")
done
out=$RX_TMP/e.out err=$RX_TMP/e.err
rx_dump_on_fail "$out" "$err"
rx_shim "${guard[@]}" RESILIX_CURL_KEY=endpoint "$CURL_CLIENT" --errbuf \
	--requests 40 "${urls[@]}" >"$out" 2>"$err" ||
	rx_fail "curl_client exit status $?"
rx_assert_eq "payments answered 500 before the trip" $MIN \
	"$(awk '$2 % 2 == 0 && $4 == 500' "$out" | wc -l | tr -d ' ')"
rx_assert_eq "payments refused after it" $((20 - MIN)) \
	"$(awk '$2 % 2 == 0 && $3 == 7' "$out" | wc -l | tr -d ' ')"
rx_assert_eq "the refusal names the endpoint" $((20 - MIN)) \
	"$(grep -c "resilix: circuit open for GET 127.0.0.1:$P/payments, retry in" "$out")"
rx_assert_eq "users all answered 200" 20 \
	"$(awk '$2 % 2 == 1 && $3 == 0 && $4 == 200' "$out" | wc -l | tr -d ' ')"
rx_assert_eq "users requests upstream" 20 "$(grep -c ' GET /users 200$' "$(rx_uplog e)")"
rx_assert_eq "payments requests upstream" $MIN "$(grep -c ' GET /payments?page=' "$(rx_uplog e)")"
rx_assert_eq "two keys, query ignored" \
	"GET 127.0.0.1:$P/payments
GET 127.0.0.1:$P/users" \
	"$(sed -n 's/.*key=\(GET [^ ]*\) event=settle.*/\1/p' "$err" | sort -u)"
rx_assert_eq "only payments tripped" "GET 127.0.0.1:$P/payments" \
	"$(grep 'event=breaker-transition' "$err" | sed -n 's/.*key=\(GET [^ ]*\) event=.*/\1/p' | sort -u)"

# --- POST is another endpoint than GET ----------------------------------
out=$RX_TMP/m.out err=$RX_TMP/m.err
rx_shim RESILIX_LOG=debug RESILIX_CURL_KEY=endpoint "$CURL_CLIENT" \
	--method POST --requests 1 "http://127.0.0.1:$P/users" >"$out" 2>"$err" ||
	rx_fail "curl_client exit status $?"
rx_assert_grep "POST keyed with its method" \
	"key=POST 127.0.0.1:$P/users event=settle verdict=success" "$err"

# --- origin ---------------------------------------------------------------
rx_shim RESILIX_LOG=debug RESILIX_CURL_KEY=origin "$CURL_CLIENT" \
	--requests 1 "http://127.0.0.1:$P/users?x=1" >"$out" 2>"$err" ||
	rx_fail "curl_client exit status $?"
rx_assert_grep "origin key" "key=http://127.0.0.1:$P event=settle verdict=success" "$err"

# --- the key follows the URL the perform will use: on one handle the URL
# set last (/users after /payments), and a CURLOPT_CURLU set after it wins
# (the curl layer cannot see that URL: the socket layer attributes the
# transfer, ADR-561's cached lookup must not keep the old URL) ----------
out=$RX_TMP/u.out err=$RX_TMP/u.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_CURL_KEY=endpoint "$CURL_CLIENT" --fresh \
	--curlu-from 4 --requests 6 "http://127.0.0.1:$P/payments" \
	"http://127.0.0.1:$P/users" >"$out" 2>"$err" ||
	rx_fail "curl_client exit status $?"
rx_assert_eq "answers: 3 payments 500, 3 users 200" "3 3" \
	"$(awk '$4 == 500' "$out" | wc -l | tr -d ' ') $(awk '$4 == 200' "$out" | wc -l | tr -d ' ')"
rx_assert_eq "curl-layer keys: the last URL set, twice each" \
	"2 GET 127.0.0.1:$P/payments
2 GET 127.0.0.1:$P/users" \
	"$(grep 'event=settle .*at=curl' "$err" | sed -n 's/.*key=\(GET [^ ]*\) event=settle.*/\1/p' | sort | uniq -c | sed 's/^ *//')"
rx_assert_eq "settlements: 6, the 2 CURLU transfers not by the curl layer" \
	"6 4" "$(rx_settles "$err") $(rx_settles "$err" curl)"
# The same on one kept-alive handle, its URL changed before each perform.
out=$RX_TMP/k.out err=$RX_TMP/k.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_CURL_KEY=endpoint "$CURL_CLIENT" \
	--curlu-from 4 --requests 6 "http://127.0.0.1:$P/users?k=1" \
	"http://127.0.0.1:$P/payments?k=2" >"$out" 2>"$err" ||
	rx_fail "curl_client exit status $?"
rx_assert_eq "one handle: curl-layer keys, in order" \
	"GET 127.0.0.1:$P/users
GET 127.0.0.1:$P/payments
GET 127.0.0.1:$P/users
GET 127.0.0.1:$P/payments" \
	"$(grep 'event=settle .*at=curl' "$err" | sed -n 's/.*key=\(GET [^ ]*\) event=settle.*/\1/p')"

# --- an invalid value: one line, then pass-through --------------------------
before=$(rx_count e)
rx_shim RESILIX_LOG=debug RESILIX_CURL_KEY=path "$CURL_CLIENT" --requests 3 \
	"http://127.0.0.1:$P/payments" >"$out" 2>"$err" ||
	rx_fail "curl_client exit status $?"
rx_assert_eq "one line on stderr" 1 "$(wc -l <"$err" | tr -d ' ')"
rx_assert_grep "it names variable, value and what is accepted" \
	'RESILIX_CURL_KEY="path" is not valid \(accepted: host, endpoint or origin\)' "$err"
rx_assert_eq "pass-through: every request reached the upstream" 3 $(($(rx_count e) - before))
rx_pass
