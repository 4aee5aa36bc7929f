#!/bin/bash
# shared_state_seed.sh - a state file seeds every key it holds into a new
# segment (ADR-485, ADR-681). A segment is made with no key's pages
# reserved (ADR-680); the process that made it reserves as many keys as
# the file holds before it hydrates, so the seed keeps them all instead
# of finding no entry it may use.
. "$(dirname "$0")/lib.sh"
rx_require_build

rx_upstream_start up --phases 0:ok:0
PORT=$RX_PORT
STATE=$RX_TMP/state
err=$RX_TMP/err
rx_dump_on_fail "$err"

# Three keys in the file: the upstream and two dead ports.
for p in "$PORT" "$(rx_free_port)" "$(rx_free_port)"; do
	rx_shim RESILIX_STATE_FILE="$STATE" "$CLIENT" --port "$p" \
		--requests 1 >/dev/null 2>&1
done
[ -s "$STATE" ] || rx_fail "no state file written"

rx_shim RESILIX_STATE_FILE="$STATE" RESILIX_SHARED="$RX_TMP/seg" \
	RESILIX_LOG=debug "$CLIENT" --port "$PORT" --requests 1 \
	>"$RX_TMP/out" 2>"$err" || rx_fail "the seeding process failed"
rx_assert_grep "the process made the segment" \
	'event=shared-attached.* created=1 ' "$err"
rx_assert_grep "every key of the file seeded" \
	'event=state-hydrated keys=3 ' "$err"
rx_assert_no_grep "no complaint" '^resilix:' "$err"
rx_pass
