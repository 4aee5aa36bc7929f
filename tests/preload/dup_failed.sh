#!/bin/bash
# dup_failed.sh - a dup2 or dup3 that fails closes nothing, so the shim
# forgets nothing: the socket it named stays tracked and stderr stays the
# shim's log (ADR-570).
#
# tests/support/fdops dupfail keeps one connection to an upstream that
# answers 500 and, before each request on it, makes a duplication onto it
# that the kernel refuses without touching it: dup2 from a number that is
# not open (EBADF), dup3 with a flag it does not know (EINVAL); then dup2
# of the closed number onto stderr (EBADF). Before ADR-570 each wrapper
# forgot its target first: the socket's call was abandoned (rejected at
# close) and the requests after it went unjudged, and the failed dup2
# onto stderr silenced the log for the rest of the process. Each step
# must settle its request once, as the 500's transient, on stderr.
. "$(dirname "$0")/lib.sh"
rx_require_build
FDOPS=$RESILIX_BUILDDIR/tests/support/fdops
[ -x "$FDOPS" ] || rx_fail "not built: $FDOPS"

rx_upstream_start bad --phases 0:status:500
out=$RX_TMP/dupfail.out err=$RX_TMP/dupfail.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=0 \
	"$FDOPS" dupfail "$RX_PORT" >"$out" 2>"$err" ||
	rx_fail "fdops dupfail: exit status $?"
rx_assert_eq "the program's view, as without the shim" "dupfail ok=1" \
	"$(cat "$out")"

# settles STEP: "verdict,at;..." of the settle lines after STEP's marker
# and before the next one.
settles() {
	awk -v s="fdops step=$1" '/fdops step=/ { on = ($0 ~ s "$"); next }
		on && /event=settle/ { v = ""; for (i = 1; i <= NF; i++)
			if ($i ~ /^(verdict|at)=/) v = v $i ",";
			print v }' "$err" | paste -sd';'
}
for s in dup2-closed-source dup3-bad-flags dup2-closed-onto-stderr; do
	rx_assert_eq "$s: the request after it judged once" \
		"verdict=transient,at=first-byte," "$(settles $s)"
done
rx_pass
