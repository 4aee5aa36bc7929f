#!/bin/bash
# curl_filters.sh - RESILIX_INCLUDE and RESILIX_EXCLUDE apply to the curl
# layer too (ADR-240), with the curl tool against an upstream that answers
# 500 on /500 and 200 on /ok.
#
# One curl process makes 5 transfers to /500, then 2 to /ok, on one
# kept-alive connection; the backstop of 5 consecutive failures opens a
# breaker after the fifth. Guarded (no filter, the control), the two
# healthy transfers are refused: "circuit open". A destination the
# filters leave out is not guarded by the curl layer: all seven are
# answered, and nothing is settled by either layer. The URL's host is an
# address literal (decided exactly: ip:port, CIDR, *:port, an include
# that does not name it) or a name (localhost: *:port decides; an address
# pattern leaves the transfer to the socket layer, whose connect sees the
# address). Left to the socket layer because an address pattern could
# decide, a transfer that the patterns do let through is guarded there,
# by ip:port, once: five settlements, none at the curl layer, and the
# healthy transfers refused by the socket layer's breaker.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need curl python3
rx_usable curl || rx_pass "curl cannot run in this build"

rx_pyup_start f --rule /500=500
P=$RX_PORT
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

# run HOST [ENV...]: the seven transfers to http://HOST:P/ under the shim;
# prints curl's status codes on one line ("500 500 500 500 500 200 200").
run() {
	local host=$1 args=() _
	shift
	for _ in 1 2 3 4 5; do
		args+=(-o /dev/null "http://$host:$P/500")
	done
	args+=(-o /dev/null "http://$host:$P/ok" -o /dev/null "http://$host:$P/ok")
	rx_shim RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=5 \
		RESILIX_OPEN_MS=30000 "$@" curl -4 -s -w '%{http_code}\n' \
		"${args[@]}" >"$out" 2>"$err"
	tr '\n' ' ' <"$out" | sed 's/ $//'
}

answered="500 500 500 500 500 200 200"
refused="500 500 500 500 500 000 000"

# --- the control: no filter, the curl layer guards and trips -------------
rx_assert_eq "no filter: the curl layer trips" "$refused" "$(run 127.0.0.1)"
rx_assert_eq "no filter: settled at the curl layer" "5 5" \
	"$(rx_settles "$err") $(rx_settles "$err" curl)"
rx_assert_grep "no filter: the refusal names the URL's key" \
	"event=refused reason=circuit-open .*at=curl" "$err"

# --- excluded or not included: not guarded at all ------------------------
# unguarded DESCRIPTION HOST ENV...: every transfer answered, nothing
# settled by either layer.
unguarded() {
	local what=$1 host=$2
	shift 2
	rx_assert_eq "$what: all answered" "$answered" "$(run "$host" "$@")"
	rx_assert_eq "$what: settlements" 0 "$(rx_settles "$err")"
}
unguarded "exclude 127.0.0.1:PORT" 127.0.0.1 RESILIX_EXCLUDE=127.0.0.1:$P
unguarded "exclude 127.0.0.0/8" 127.0.0.1 RESILIX_EXCLUDE=127.0.0.0/8
unguarded "exclude *:PORT" 127.0.0.1 "RESILIX_EXCLUDE=*:$P"
unguarded "exclude *:PORT, localhost" localhost "RESILIX_EXCLUDE=*:$P"
unguarded "exclude 127.0.0.1:PORT, localhost" localhost \
	RESILIX_EXCLUDE=127.0.0.1:$P
unguarded "exclude 127.0.0.0/8, localhost" localhost \
	RESILIX_EXCLUDE=127.0.0.0/8
unguarded "include 10.0.0.0/8" 127.0.0.1 RESILIX_INCLUDE=10.0.0.0/8
unguarded "include 10.0.0.0/8, localhost" localhost RESILIX_INCLUDE=10.0.0.0/8
unguarded "include another port" 127.0.0.1 \
	"RESILIX_INCLUDE=*:$((P == 65535 ? 1 : P + 1))"
unguarded "include another port, localhost" localhost \
	"RESILIX_INCLUDE=*:$((P == 65535 ? 1 : P + 1))"

# --- included, or excluded elsewhere: still guarded ----------------------
rx_assert_eq "include 127.0.0.1:PORT: the curl layer trips" "$refused" \
	"$(run 127.0.0.1 RESILIX_INCLUDE=127.0.0.1:$P)"
rx_assert_eq "include 127.0.0.1:PORT: settled at the curl layer" 5 \
	"$(rx_settles "$err" curl)"
rx_assert_eq "include *:PORT, localhost: the curl layer trips" "$refused" \
	"$(run localhost "RESILIX_INCLUDE=*:$P")"
rx_assert_eq "include *:PORT, localhost: settled at the curl layer" 5 \
	"$(rx_settles "$err" curl)"
rx_assert_grep "include *:PORT, localhost: keyed by the URL's host" \
	"key=localhost:$P event=settle .*at=curl" "$err"

# --- a name that an address pattern could decide: the socket layer -------
rx_assert_eq "exclude 10.0.0.0/8, localhost: the socket layer trips" \
	"$refused" "$(run localhost RESILIX_EXCLUDE=10.0.0.0/8)"
rx_assert_eq "exclude 10.0.0.0/8, localhost: settled once each, none at curl" \
	"5 0" "$(rx_settles "$err") $(rx_settles "$err" curl)"
rx_assert_eq "exclude 10.0.0.0/8, localhost: keyed by ip:port" 5 \
	"$(grep -c "key=127.0.0.1:$P event=settle verdict=transient" "$err")"
rx_assert_no_grep "exclude 10.0.0.0/8, localhost: no name key" \
	"key=localhost:" "$err"
rx_assert_grep "exclude 10.0.0.0/8, localhost: refused by the socket layer" \
	"key=127.0.0.1:$P event=refused reason=circuit-open" "$err"
rx_assert_eq "requests that reached the upstream" \
	$((10 * 7 + 4 * 5)) "$(rx_count f)"
rx_pass
