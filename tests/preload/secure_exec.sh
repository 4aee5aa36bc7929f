#!/bin/bash
# secure_exec.sh - a secure-execution process (setuid: AT_SECURE) passes
# every call through (ADR-146). The dynamic linker ignores LD_PRELOAD
# there, so the shim can only arrive by /etc/ld.so.preload or dlopen;
# tests/support/dlshim dlopens it and calls its connect, write and read
# directly. Run plainly, the breaker trips on the upstream's 500s and later
# connects are refused; run setuid (another owner, so the ids differ), the
# same calls all reach the upstream. Needs root (to chown) and a temp dir
# that honours the setuid bit; skipped otherwise.
. "$(dirname "$0")/lib.sh"
rx_require_build
DL=$RESILIX_BUILDDIR/tests/support/dlshim
[ -x "$DL" ] || rx_fail "not built: $DL"
if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
	echo "SKIP: $RX_NAME: a setuid sanitizer program cannot load its runtime"
	exit 77
fi
if [ "$(id -u)" != 0 ] || ! id nobody >/dev/null 2>&1; then
	echo "SKIP: $RX_NAME: needs root and a 'nobody' user to make a setuid copy"
	exit 77
fi
rx_upstream_start e --phases 0:status:500
env=(RESILIX_MIN_CALLS=3 RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_OPEN_MS=30000)
rx_assert_eq "plain: the shim guards" "refused 7 of 10" \
	"$(rx_plain env "${env[@]}" "$DL" "$RESILIX_SO" "$RX_PORT" 10)"

cp "$DL" "$RX_TMP/dlshim-suid"
chmod 0755 "$RX_TMP"
chown nobody "$RX_TMP/dlshim-suid" && chmod 4755 "$RX_TMP/dlshim-suid" ||
	rx_fail "cannot make a setuid copy"
cp "$RESILIX_SO" "$RX_TMP/shim.so"
chmod 0755 "$RX_TMP/shim.so"
if grep -q nosuid <(findmnt -no OPTIONS -T "$RX_TMP" 2>/dev/null); then
	echo "SKIP: $RX_NAME: $RX_TMP is mounted nosuid"
	exit 77
fi
# The copy runs (dlopen of a missing file: its exit status 3).
rx_plain "$RX_TMP/dlshim-suid" /nonexistent 1 0 >/dev/null 2>&1
[ $? = 3 ] || rx_fail "the setuid copy does not run"
out=$(rx_plain env "${env[@]}" "$RX_TMP/dlshim-suid" "$RX_TMP/shim.so" "$RX_PORT" 10)
rx_assert_eq "setuid: everything passes through" "refused 0 of 10" "$out"
rx_pass
