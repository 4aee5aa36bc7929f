#!/bin/bash
# shared_refused.sh - a segment that is not ours is not used (ADR-484):
# owned by another user, another mode, a symbolic link, truncated, of
# another format, made with other settings. Each is refused with one line
# naming the file and what is wrong, and the program still runs, guarding
# on its own (its own breaker settles its call). The test client, built
# with the sanitizers in their builds, is the program.
. "$(dirname "$0")/lib.sh"
rx_require_build

PORT=$(rx_free_port)
# try LABEL SEGMENT EXPECTED-REGEX [VAR=VALUE...]
try() {
	local label=$1 seg=$2 want=$3 err=$RX_TMP/$1.err
	shift 3
	rx_dump_on_fail "$err"
	rx_shim RESILIX_SHARED="$seg" RESILIX_LOG=debug "$@" \
		"$CLIENT" --port "$PORT" --requests 1 >/dev/null 2>"$err"
	rx_assert_eq "$label: one refusal line" 1 \
		"$(grep -c '^resilix: RESILIX_SHARED: ' "$err")"
	rx_assert_grep "$label: the line names the file and the fault" \
		"^resilix: RESILIX_SHARED: $seg $want; this process guards on its own" "$err"
	rx_assert_grep "$label: guarded on its own (its call settled)" \
		'event=settle ' "$err"
	rx_assert_no_grep "$label: not attached" 'event=shared-attached' "$err"
}

good=$RX_TMP/good
rx_shim RESILIX_SHARED="$good" "$CLIENT" --port "$PORT" --requests 1 \
	>/dev/null 2>&1
[ -s "$good" ] || rx_fail "no segment made"

cp "$good" "$RX_TMP/mode" && chmod 0666 "$RX_TMP/mode"
try mode "$RX_TMP/mode" 'has mode 0666, not 0600'

ln -s "$good" "$RX_TMP/link"
try symlink "$RX_TMP/link" 'cannot be opened \(it is a symbolic link\)'

cp "$good" "$RX_TMP/short" && truncate -s 100 "$RX_TMP/short"
try truncated "$RX_TMP/short" 'is truncated \(100 bytes, less than its header\)'

cp "$good" "$RX_TMP/half" && truncate -s 65536 "$RX_TMP/half"
try resized "$RX_TMP/half" 'is truncated or resized \(65536 bytes, its header says [0-9]+\)'

head -c 65536 /dev/zero | tr '\0' 'x' >"$RX_TMP/alien" && chmod 600 "$RX_TMP/alien"
try alien "$RX_TMP/alien" 'is not a resilix shared segment \(no magic\)'

cp "$good" "$RX_TMP/keys"
try settings "$RX_TMP/keys" 'holds 1024 keys, RESILIX_MAX_KEYS is 64' \
	RESILIX_MAX_KEYS=64
try breaker "$RX_TMP/keys" 'was made with other breaker, limiter or key settings' \
	RESILIX_CONSECUTIVE_BACKSTOP=9

if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	cp "$good" "$RX_TMP/other" && chown nobody "$RX_TMP/other"
	try owner "$RX_TMP/other" "is owned by uid $(id -u nobody), not by this user \\(0\\)"
else
	rx_log "owner case skipped: needs root to chown"
fi
rx_pass
