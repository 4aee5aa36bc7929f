#!/bin/bash
# config_bounds.sh - every number a variable says it accepts is accepted
# (ADR-641).
#
# `resilix-config --verbose` prints, for each variable, the values it
# accepts; for every one given as an integer or decimal range "A..B",
# both ends are set alone and validated by resilix-config, the shim's own
# parser. Neither may be refused by a later check that names no variable
# ("the configuration is not valid: ..."), nor as outside the variable's
# own range. A bound may still fail a check that ties it to another
# variable, whose message names both (RESILIX_LIMIT_MIN=1000000 above the
# default RESILIX_LIMIT_MAX). RESILIX_CONSECUTIVE_BACKSTOP said
# 0..1000000 while the breaker takes at most 100000: 100001 to 1000000
# were refused as "consecutive_backstop must be 0 (off) to 100000 calls",
# and the shim passed every call through.
. "$(dirname "$0")/lib.sh"
rx_require_build
CFG=$RESILIX_BUILDDIR/resilix-config
[ -x "$CFG" ] || rx_fail "not built: $CFG"

# The environment holds nothing of the caller's resilix variables (lib.sh
# unset them); only PATH is kept, for resilix-config's own needs.
list=$RX_TMP/vars
env -i PATH="$PATH" "$CFG" --verbose >"$list" 2>&1 ||
	rx_fail "resilix-config --verbose with no variable: exit status $?"
rx_dump_on_fail "$list"

# "NAME LOW HIGH" for each variable whose accepted text is a number range.
sed -n 's/^\(RESILIX_[A-Z_]*\) .*\[\(integer\|a decimal number\)[a-z ]* \([0-9.]*\)\.\.\([0-9.]*\)[],; ].*/\1 \3 \4/p' \
	"$list" >"$RX_TMP/ranges"
rx_dump_on_fail "$RX_TMP/ranges"
n=$(wc -l <"$RX_TMP/ranges" | tr -d ' ')
rx_assert_ge "variables with a number range" "$n" 25

bad=""
while read -r name low high; do
	for v in "$low" "$high"; do
		out=$RX_TMP/$name.$v
		env -i PATH="$PATH" "$name=$v" "$CFG" --quiet >"$out" 2>&1
		if grep -q 'the configuration is not valid' "$out" ||
			grep -qF "$name=\"$v\" is not valid" "$out"; then
			bad="$bad $name=$v"
			rx_log "$name=$v: $(cat "$out")"
		fi
	done
done <"$RX_TMP/ranges"
rx_assert_eq "bounds a variable announces but does not take" "" "${bad# }"
rx_pass
