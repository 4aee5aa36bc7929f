#!/bin/bash
# run_wrapper.sh - resilix-run builds the program's LD_PRELOAD correctly:
# the shim goes before the caller's entries, but a sanitizer runtime
# already there stays first (ADR-200), or an ASan program dies with "ASan
# runtime does not come first in initial library list".
# It never runs a program unguarded silently: a shim path with a space or a
# colon (LD_PRELOAD splits on both) is refused, exit 2, naming the path; a
# relative --so is made absolute (ADR-204). `--disable=1` says the flag
# takes no value; a program whose name contains '=' is run, not taken for
# an environment assignment. Under `ulimit -n 4`, where bash cannot run a
# command substitution, nothing runs and one line of ours says why
# (ADR-231); --print-so prints nothing. An empty --so= and a --so or
# RESILIX_SO that is not an ELF file are refused, exit 2; a program that is
# not found or cannot be executed is said as a shell says it (127, 126).
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

# A shim path LD_PRELOAD would split: refused, whatever asks for it.
TR=$(type -P true)
for dir in "sp ace" "co:lon"; do
	mkdir -p "$RX_TMP/$dir"
	cp "$RESILIX_SO" "$RX_TMP/$dir/libresilix_preload.so"
	bad=$RX_TMP/$dir/libresilix_preload.so
	RESILIX_SO=$bad "$TO" 10 "$BASH" "$RUN" -- "$TR" >out 2>err
	rx_assert_eq "'$dir': exit status" 2 "$?"
	rx_assert_grep "'$dir': the error names the path" \
		"cannot preload '$bad': LD_PRELOAD splits on spaces and colons" err
	"$TO" 10 "$BASH" "$RUN" --so "$bad" -- "$TR" >out 2>err
	rx_assert_eq "'$dir' via --so: exit status" 2 "$?"
	RESILIX_SO=$bad "$TO" 10 "$BASH" "$RUN" --print-so >out 2>err
	rx_assert_eq "'$dir' --print-so: exit status" 2 "$?"
done

# A relative --so becomes absolute.
mkdir -p rel
cp "$RESILIX_SO" rel/libresilix_preload.so
got=$(LD_PRELOAD=${RESILIX_SANITIZE_RUNTIME:-} "$TO" 10 "$BASH" "$RUN" \
	--so rel/libresilix_preload.so -- "$PE" LD_PRELOAD)
rx_assert_eq "relative --so: absolute in LD_PRELOAD" \
	"${RESILIX_SANITIZE_RUNTIME:+$RESILIX_SANITIZE_RUNTIME }$RX_TMP/rel/libresilix_preload.so" \
	"$got"

# Flags with a value, programs with '='.
"$TO" 10 "$BASH" "$RUN" --disable=1 -- "$TR" >out 2>err
rx_assert_eq "--disable=1: exit status" 2 "$?"
rx_assert_grep "--disable=1: says why" "option '--disable' takes no value" err
printf '#!/bin/sh\necho "eq ran $RESILIX_DISABLE"\n' >'a=b'
chmod +x 'a=b'
got=$(LD_PRELOAD=${RESILIX_SANITIZE_RUNTIME:-} "$TO" 10 "$BASH" "$RUN" \
	--disable -- ./a=b 2>err)
rx_assert_eq "a program named a=b runs, with the options" "eq ran 1" "$got"

# Every setting the shim reads has its option: each sets its variable,
# with both spellings.
while read -r opt var value; do
	got=$(LD_PRELOAD=${RESILIX_SANITIZE_RUNTIME:-} "$TO" 10 "$BASH" "$RUN" \
		"$opt" "$value" -- "$PE" "$var" 2>err)
	rx_assert_eq "$opt $value sets $var" "$value" "$got"
	got=$(LD_PRELOAD=${RESILIX_SANITIZE_RUNTIME:-} "$TO" 10 "$BASH" "$RUN" \
		"$opt=$value" -- "$PE" "$var" 2>err)
	rx_assert_eq "$opt=$value sets $var" "$value" "$got"
done <<'EOF2'
--timeout-ms RESILIX_TIMEOUT_MS 2500
--limiter RESILIX_LIMITER gradient2
--limit-min RESILIX_LIMIT_MIN 4
--limit-max RESILIX_LIMIT_MAX 64
--limit-initial RESILIX_LIMIT_INITIAL 10
--queue-timeout-ms RESILIX_QUEUE_TIMEOUT_MS 0
--limit-stale-ms RESILIX_LIMIT_STALE_MS 9000
--key RESILIX_KEY host
--curl-key RESILIX_CURL_KEY endpoint
--include RESILIX_INCLUDE 127.0.0.0/8,*:8080
--exclude RESILIX_EXCLUDE *:53,10.0.0.1:80
--max-keys RESILIX_MAX_KEYS 16
--key-ttl-ms RESILIX_KEY_TTL_MS 60000
--state-file RESILIX_STATE_FILE /tmp/x.resilix-state
EOF2

# Under `ulimit -n 4` bash cannot make the pipe of a command substitution:
# it says so on stderr, and the substitution yields "" with status 0. The
# shim's path came out empty, LD_PRELOAD was exported empty and the program
# ran unguarded, exit 0; --print-so printed an empty line. Now one error of
# ours, a non-zero exit, and no program run.
lowfd() { "$TO" 10 "$BASH" -c 'ulimit -n 4 && exec "$@"' lowfd "$@"; }
for args in "-- $PE LD_PRELOAD" --print-so "--so $RESILIX_SO -- $PE LD_PRELOAD"; do
	# shellcheck disable=SC2086 # the words of $args are the arguments
	lowfd "$BASH" "$RUN" $args >out 2>err
	st=$?
	rx_assert_eq "ulimit -n 4, $args: nothing on stdout (bytes)" 0 \
		"$(wc -c <out | tr -d ' ')"
	[ "$st" -ne 0 ] || rx_fail "ulimit -n 4, $args: exit status 0"
	rx_assert_eq "ulimit -n 4, $args: one line of ours says why" 1 \
		"$(grep -c '^resilix-run: cannot determine the path of libresilix_preload\.so' err)"
	rx_assert_eq "ulimit -n 4, $args: no other line of ours" 1 \
		"$(grep -c '^resilix-run: ' err)"
done
# The helpers' paths are checked the same way.
lowfd "$BASH" "$RUN" --check >out 2>err
rx_assert_eq "ulimit -n 4, --check: exit status" 127 "$?"
rx_assert_grep "ulimit -n 4, --check: says why" \
	'^resilix-run: cannot determine the path of resilix-config' err

# An empty --so= was dropped and the program ran; a --so (or RESILIX_SO)
# that is not an ELF file was preloaded, ld.so said "invalid ELF header
# ... ignored" and the program ran unguarded. Both are refused, exit 2,
# in one line, and nothing runs.
EC=$(type -P echo)
printf 'not a shared object\n' >notelf.so
for how in "--so=" "--so $RX_TMP/notelf.so" "RESILIX_SO=$RX_TMP/notelf.so" \
	"--so notelf.so"; do
	case $how in
	RESILIX_SO=*) RESILIX_SO=${how#*=} "$TO" 10 "$BASH" "$RUN" -- "$EC" ran ;;
	*)
		# shellcheck disable=SC2086 # the words of $how are the arguments
		"$TO" 10 "$BASH" "$RUN" $how -- "$EC" ran
		;;
	esac >out 2>err
	rx_assert_eq "$how: exit status" 2 "$?"
	rx_assert_eq "$how: the program did not run" "" "$(cat out)"
	case $how in
	--so=) rx_assert_grep "$how: says why" "option '--so' needs a value" err ;;
	*)
		rx_assert_eq "$how: one line" 1 "$(grep -c . err)"
		rx_assert_grep "$how: names the file" \
			"^resilix-run: $RX_TMP/notelf\.so is not an ELF shared object" err
		;;
	esac
done
RESILIX_SO=$RX_TMP/notelf.so "$TO" 10 "$BASH" "$RUN" --print-so >out 2>err
rx_assert_eq "not ELF, --print-so: exit status" 2 "$?"

# A program that cannot run is said as a shell says it, not as bash's
# exec builtin in the middle of the script ("line 325: exec: ...").
mkdir -p pathdir somedir
printf '#!/bin/sh\necho ran\n' >noexec
cp noexec pathdir/rx-noexec
while read -r want status prog; do
	PATH=$RX_TMP/pathdir:$PATH "$TO" 10 "$BASH" "$RUN" -- "$prog" >out 2>err
	rx_assert_eq "$prog: exit status" "$status" "$?"
	rx_assert_eq "$prog: one line, as a shell says it" \
		"resilix-run: $prog: ${want//_/ }" "$(cat err)"
done <<'EOF2'
command_not_found 127 rx-no-such-program
no_such_file_or_directory 127 ./rx-no-such-program
permission_denied 126 ./noexec
permission_denied 126 rx-noexec
is_a_directory 126 ./somedir
EOF2

# A short option is unknown, said as such (not "expected '--'").
"$TO" 10 "$BASH" "$RUN" -x -- "$TR" >out 2>err
rx_assert_eq "-x: exit status" 2 "$?"
rx_assert_grep "-x: says it is an unknown option" "unknown option '-x'" err
rx_pass
