#!/bin/bash
# shared_name.sh - RESILIX_SHARED values the parser refuses are refused
# with a line that says what is accepted, limits included: "." and ".."
# (characters the accepted set holds), a name over 200 characters and an
# absolute path of 4000 bytes or more each get the one line naming the
# variable, and that line names the rule they broke. Names at the limits
# (200 characters, ".a", "..b") are valid. Checked with the shim in a
# process and with `resilix-run --check`, which runs the same parser.
. "$(dirname "$0")/lib.sh"
rx_require_build
RUN=$RESILIX_SRCDIR/scripts/resilix-run
err=$RX_TMP/err
rx_dump_on_fail "$err"

long201=$(printf 'a%.0s' $(seq 201))
long200=${long201%a}
longpath=/$(printf 'p%.0s' $(seq 3999)) # 4000 bytes with the slash

# bad VALUE RULE-REGEX: one line from the shim, and --check exits 1 with
# the same rule.
bad() {
	local v=$1 rule=$2
	rx_shim RESILIX_SHARED="$v" "$CLIENT" --port 1 --requests 1 \
		>/dev/null 2>"$err"
	rx_assert_eq "RESILIX_SHARED=${v:0:20}: one line" 1 \
		"$(grep -c '^resilix: RESILIX_SHARED=' "$err")"
	rx_assert_grep "RESILIX_SHARED=${v:0:20}: the line names the rule" \
		"accepted: .*$rule" "$err"
	timeout 10 env RESILIX_SHARED="$v" "$RUN" --check >/dev/null 2>"$err"
	rx_assert_eq "RESILIX_SHARED=${v:0:20}: --check exit status" 1 "$?"
	rx_assert_grep "RESILIX_SHARED=${v:0:20}: --check names the rule" \
		"accepted: .*$rule" "$err"
}

bad . 'not \. or \.\.'
bad .. 'not \. or \.\.'
bad "$long201" '1\.\.200 characters'
bad "$longpath" 'under 4000 bytes'

for v in "$long200" .a ..b; do
	timeout 10 env RESILIX_SHARED="$v" "$RUN" --check >/dev/null 2>"$err"
	rx_assert_eq "RESILIX_SHARED=${v:0:20}: valid" 0 "$?"
done

rx_pass
