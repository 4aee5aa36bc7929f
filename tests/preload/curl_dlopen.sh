#!/bin/bash
# curl_dlopen.sh - libcurl loaded late, by dlopen(RTLD_LOCAL) of a plugin
# that links it, in a program that never linked libcurl (ADR-150). The
# plugin's calls reach the shim's curl_easy_* first (the global scope is
# searched before the plugin's own), and the shim finds the real libcurl
# although dlsym(RTLD_NEXT) cannot see a RTLD_LOCAL library: the curl
# layer guards the transfers as for any libcurl program - 500s trip the
# breaker, later transfers are refused with the error buffer line, and
# each request is settled once, at the curl layer. And a program without
# libcurl never has a curl symbol looked up. And curl calls made before the
# dlopen (a probe for an optional libcurl) do not leave the layer unbound:
# the transfers after it work and are guarded (ADR-598).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
DL=$RESILIX_BUILDDIR/tests/support/curl_dlopen
PLUGIN=$RESILIX_BUILDDIR/tests/support/.libs/curl_plugin.so
if [ ! -x "$DL" ] || [ ! -f "$PLUGIN" ]; then
	echo "SKIP: $RX_NAME: built without libcurl"
	exit 77
fi

# --- a program without libcurl pays nothing: no curl symbol is ever
# looked up (the dynamic linker logs every lookup, dlsym's included) ------
rx_upstream_start n --phases 0:ok
rx_shim LD_DEBUG=symbols "$CLIENT" --port "$RX_PORT" --requests 2 \
	>/dev/null 2>"$RX_TMP/ld.err" || rx_fail "client exit status $?"
rx_assert_ge "symbol lookups logged (the check works)" \
	"$(grep -c 'symbol=' "$RX_TMP/ld.err")" 1
rx_assert_eq "curl symbols looked up without libcurl" 0 \
	"$(grep -c 'symbol=curl_' "$RX_TMP/ld.err")"
rx_upstream_stop n

rx_curl_client_usable || rx_pass "libcurl programs cannot run in this build"

MIN=5 N=15
rx_upstream_start d --phases 0:status:500
out=$RX_TMP/d.out err=$RX_TMP/d.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_MIN_CALLS=$MIN RESILIX_FAILURE_RATE=0.5 \
	RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000 \
	"$DL" "$PLUGIN" $N "http://127.0.0.1:$RX_PORT/p" >"$out" 2>"$err" ||
	rx_fail "curl_dlopen exit status $?"
rx_assert_eq "transfers" $N "$(wc -l <"$out" | tr -d ' ')"
rx_assert_eq "answered 500" $MIN "$(awk '$2 == 0 && $3 == 500' "$out" | wc -l | tr -d ' ')"
rx_assert_eq "refused by the curl layer, with its message" $((N - MIN)) \
	"$(grep -c "^[0-9]* 7 0 resilix: circuit open for 127.0.0.1:$RX_PORT, retry in" "$out")"
rx_assert_eq "requests upstream" $MIN "$(rx_count d)"
rx_assert_eq "settlements (all, at=curl)" "$MIN $MIN" \
	"$(rx_settles "$err") $(rx_settles "$err" curl)"
rx_upstream_stop d

# --- curl calls before libcurl is loaded bind nothing for good: the
# plugin's transfers after the dlopen still work and are guarded
# (ADR-598) ------------------------------------------------------------
rx_upstream_start e --phases 0:ok
rx_shim RESILIX_LOG=debug "$DL" "$PLUGIN" 3 "http://127.0.0.1:$RX_PORT/q" \
	probe >"$out" 2>"$err" || rx_fail "curl_dlopen probe exit status $?"
rx_assert_grep "probe before libcurl: no handle" '^probe none$' "$out"
rx_assert_eq "after the probe: transfers answered 200" 3 \
	"$(awk '$2 == 0 && $3 == 200' "$out" | wc -l | tr -d ' ')"
rx_assert_eq "after the probe: settled at the curl layer" 3 \
	"$(rx_settles "$err" curl)"
rx_pass
