#!/bin/bash
# run_warnings.sh - resilix-run warns when the shim cannot see the target
# (docs/limits.md): a statically linked binary, a Go binary, a setuid one.
# The detection reads the ELF header itself (readelf when present, od when
# not, never `file`); a dynamic binary and a script get no warning, and the
# program runs either way.
. "$(dirname "$0")/lib.sh"
rx_need od
RUN=$RESILIX_SRCDIR/scripts/resilix-run
[ -f "$RESILIX_SO" ] || rx_fail "shim not built: $RESILIX_SO"
export RESILIX_SO
if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
	# A sanitizer build's shim needs its runtime in the process; the
	# wrapper keeps it first (ADR-200), so the order check stays on. The
	# programs here (bash, readelf, od) are not ours: their leaks are off,
	# appended so an ASAN_OPTIONS from scripts/test cannot undo it.
	export LD_PRELOAD=$RESILIX_SANITIZE_RUNTIME
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
cd "$RX_TMP" || rx_fail "no temp dir"

# A Go-like binary: any dynamic ELF carrying Go's build-info magic.
cp "$(type -P true)" fakego
printf '\377 Go buildinf:\010\002' >>fakego
printf '#!/bin/sh\necho script ran\n' >script.sh
chmod +x script.sh fakego
static=no
printf '#include <stdio.h>\nint main(void){puts("static ran");return 0;}\n' >st.c
if ${CC:-cc} -static -O2 st.c -o st >/dev/null 2>&1; then
	static=yes
else
	rx_log "NOTE: no static libc to link a static test binary: that case is skipped"
fi

TO=$(type -P timeout)
# A PATH without readelf, for the od fallback.
mkdir nobin
for t in od tr grep dirname basename env bash sh cat; do
	ln -s "$(type -P $t)" nobin/$t
done

for mode in readelf od; do
	path=$PATH
	[ $mode = od ] && path=$RX_TMP/nobin
	run() { PATH=$path "$TO" 10 "$BASH" "$RUN" -- "$@"; }
	run ./fakego >out 2>err || rx_fail "$mode: fakego exit status $?"
	rx_assert_grep "$mode: Go binary warned about" \
		'warning: ./fakego is a Go program' err
	run ./script.sh >out 2>err || rx_fail "$mode: script exit status $?"
	rx_assert_eq "$mode: script: no warning" "" "$(cat err)"
	rx_assert_eq "$mode: script ran" "script ran" "$(cat out)"
	run "$(type -P true)" >out 2>err || rx_fail "$mode: true failed"
	rx_assert_eq "$mode: dynamic binary: no warning" "" "$(cat err)"
	if [ $static = yes ]; then
		run ./st >out 2>err || rx_fail "$mode: static exit status $?"
		rx_assert_grep "$mode: static binary warned about" \
			'warning: ./st is statically linked' err
		rx_assert_eq "$mode: static binary ran anyway" "static ran" \
			"$(cat out)"
	fi
done
rx_pass
