#!/bin/bash
# shared_dead_port.sh - RESILIX_SHARED carries a breaker between processes
# live, with no state file: 12 curl processes in a row against a dead port
# with the backstop at 3 make 3 real connects between them; the other 9
# are refused by the shared circuit without a packet (ADR-480). The same
# with a segment named by a bare name under /dev/shm.
. "$(dirname "$0")/lib.sh"
rx_require_build

PORT=$(rx_free_port)
# curl where it can run with this build's preload (not under the
# sanitizers' runtime), else the test client: either is one process.
if rx_usable curl; then
	prog=(curl -s -m 3 "http://127.0.0.1:$PORT/")
else
	rx_log "curl cannot run with this preload: the test client instead"
	prog=("$CLIENT" --port "$PORT" --requests 1)
fi

run12() { # SEGMENT LABEL
	local seg=$1 label=$2 i
	: >"$RX_TMP/$label.err"
	rx_dump_on_fail "$RX_TMP/$label.err"
	for i in $(seq 12); do
		rx_shim RESILIX_SHARED="$seg" RESILIX_CONSECUTIVE_BACKSTOP=3 \
			RESILIX_OPEN_MS=60000 RESILIX_LOG=debug \
			"${prog[@]}" >/dev/null 2>>"$RX_TMP/$label.err"
	done
	rx_assert_eq "$label: real connects (settled failures)" 3 \
		"$(grep -c 'event=settle ' "$RX_TMP/$label.err")"
	rx_assert_eq "$label: refused by the shared circuit" 9 \
		"$(grep -c 'event=refused reason=circuit-open' "$RX_TMP/$label.err")"
	rx_assert_eq "$label: every process attached" 12 \
		"$(grep -c 'event=shared-attached' "$RX_TMP/$label.err")"
	rx_assert_no_grep "$label: no refusal of the segment" \
		'RESILIX_SHARED:' "$RX_TMP/$label.err"
}

run12 "$RX_TMP/seg" path
[ "$(stat -c %a "$RX_TMP/seg")" = 600 ] || rx_fail "segment mode is not 0600"

name=rxtest-$$
rm -f "/dev/shm/resilix-$name"
trap 'rm -f "/dev/shm/resilix-$name"; rx_cleanup' EXIT
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
	run12 "$name" name
	[ -f "/dev/shm/resilix-$name" ] || rx_fail "no /dev/shm/resilix-$name"
fi
rx_pass
