#!/bin/bash
# run_wrapper.sh - resilix-run builds the program's LD_PRELOAD correctly:
# the shim goes before the caller's entries, but a sanitizer runtime
# already there stays first (ADR-200), or an ASan program dies with "ASan
# runtime does not come first in initial library list".
. "$(dirname "$0")/lib.sh"
rx_need "${CC:-cc}"
RUN=$RESILIX_SRCDIR/scripts/resilix-run
[ -f "$RESILIX_SO" ] || rx_fail "shim not built: $RESILIX_SO"
export RESILIX_SO
cd "$RX_TMP" || rx_fail "no temp dir"
if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
	san=$RESILIX_SANITIZE_RUNTIME
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
else
	# Two empty libraries, one named like a sanitizer runtime.
	printf 'int rx_empty_%s;\n' a >e.c
	${CC:-cc} -shared -fPIC -o libasan.so.99 e.c >/dev/null 2>&1 ||
		rx_fail "cannot build a test library"
	san=$RX_TMP/libasan.so.99
fi
printf 'int rx_other;\n' >o.c
${CC:-cc} -shared -fPIC -o libother.so o.c >/dev/null 2>&1 ||
	rx_fail "cannot build a test library"
other=$RX_TMP/libother.so
TO=$(type -P timeout)
PE=$(type -P printenv)

# The caller's list in any order, colon- or space-separated (with a real
# runtime, the wrapper's own shell needs it first too).
lists=("$san $other" "$san:$other")
[ -z "$RESILIX_SANITIZE_RUNTIME" ] && lists+=("$other $san" "$other:$san")
for list in "${lists[@]}"; do
	got=$(LD_PRELOAD=$list "$TO" 10 "$BASH" "$RUN" -- "$PE" LD_PRELOAD) ||
		rx_fail "printenv under resilix-run failed (LD_PRELOAD=$list)"
	rx_assert_eq "runtime first, then the shim ($list)" \
		"$san $RESILIX_SO $other" "$got"
done
# Without a caller's list, the shim alone.
got=$(env -u LD_PRELOAD "$TO" 10 "$BASH" "$RUN" -- "$PE" LD_PRELOAD)
if [ -z "$RESILIX_SANITIZE_RUNTIME" ]; then
	rx_assert_eq "no caller list: the shim alone" "$RESILIX_SO" "$got"
fi
rx_pass
