#!/bin/bash
# two_copies.sh - two copies of the shim in LD_PRELOAD (an image-wide
# LD_PRELOAD plus resilix-run with another path, say) guard once: the copy
# found first guards, the second sees that and passes through (ADR-212).
# Regression test: both used to guard, logging every transition twice.
. "$(dirname "$0")/lib.sh"
rx_require_build

copy=$RX_TMP/copy/libresilix_preload.so
mkdir -p "$RX_TMP/copy"
cp "$RESILIX_SO" "$copy"
rx_upstream_start two --phases 0:status:500

out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err"
RESILIX_SO="$copy $RESILIX_SO" rx_shim RESILIX_LOG=info RESILIX_MIN_CALLS=5 \
	RESILIX_WINDOW_CALLS=10 RESILIX_CONSECUTIVE_BACKSTOP=0 \
	"$CLIENT" --port "$RX_PORT" --requests 10 >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
rx_assert_eq "the second copy stood aside" 1 \
	"$(grep -c 'event=second-copy action=pass-through' "$err")"
rx_assert_eq "one trip logged, by one copy" 1 \
	"$(grep -c 'event=breaker-transition from=closed to=open' "$err")"
rx_assert_eq "calls that reached the upstream" 5 "$(rx_count two)"
rx_assert_eq "calls refused after the trip" 5 "$(grep -c ' ECONNREFUSED ' "$out")"

# A renamed copy is recognised too: it owns curl_easy_perform as well as
# connect, which no other library does.
renamed=$RX_TMP/copy/libother-name.so
cp "$RESILIX_SO" "$renamed"
before=$(rx_count two)
RESILIX_SO="$renamed $RESILIX_SO" rx_shim RESILIX_LOG=info RESILIX_MIN_CALLS=5 \
	RESILIX_WINDOW_CALLS=10 RESILIX_CONSECUTIVE_BACKSTOP=0 \
	"$CLIENT" --port "$RX_PORT" --requests 10 >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
rx_assert_eq "renamed: the second copy stood aside" 1 \
	"$(grep -c 'event=second-copy action=pass-through' "$err")"
rx_assert_eq "renamed: one trip logged" 1 \
	"$(grep -c 'event=breaker-transition from=closed to=open' "$err")"
rx_assert_eq "renamed: calls that reached the upstream" 5 \
	$(($(rx_count two) - before))

# One copy alone never stands aside.
RESILIX_LOG=info rx_shim RESILIX_LOG=info "$CLIENT" --port "$RX_PORT" \
	--requests 1 >/dev/null 2>"$err" || true
rx_assert_eq "a single copy guards" 0 "$(grep -c 'event=second-copy' "$err")"
rx_pass
