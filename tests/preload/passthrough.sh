#!/bin/bash
# passthrough.sh - programs that never open a socket behave byte for byte
# the same under the shim ("never make the host worse").
#
# The shim wraps read, write, close, dup2 and friends for every fd of the
# process, so ordinary file and pipe I/O runs through it on every call.
# This checks that it stays invisible there: cat, sha256sum, tar and a
# python3 program copying 20 MB of random bytes through pipes produce
# exactly the output they produce without it, print nothing on stderr,
# and exit the same way. Then the configuration paths: an invalid
# RESILIX_ value prints exactly one line naming the variable and the
# value, and the program still produces its correct output; an unknown
# RESILIX_ name warns once; RESILIX_DISABLE=1 is silent.
. "$(dirname "$0")/lib.sh"
rx_need cat sha256sum tar head cmp
[ -f "$RESILIX_SO" ] || rx_fail "shim not built: $RESILIX_SO"

data=$RX_TMP/random.bin
head -c $((20 * 1024 * 1024)) /dev/urandom >"$data" ||
	rx_fail "cannot make test data"
want=$(sha256sum <"$data" | cut -d' ' -f1)

# rx_quiet NAME: stderr of the step NAME must be empty.
rx_quiet() {
	rx_assert_eq "$1: stderr bytes" 0 "$(wc -c <"$RX_TMP/$1.err" | tr -d ' ')"
}

# cat, file to file and through a pipeline of three shimmed processes.
rx_shim cat "$data" >"$RX_TMP/cat.out" 2>"$RX_TMP/cat.err" ||
	rx_fail "cat exit status $?"
cmp -s "$data" "$RX_TMP/cat.out" || rx_fail "cat: output differs"
rx_log "ok: cat: output identical"
rx_quiet cat

rx_shim cat "$data" 2>"$RX_TMP/pipe.err" | rx_shim cat 2>>"$RX_TMP/pipe.err" |
	rx_shim sha256sum >"$RX_TMP/pipe.out" 2>>"$RX_TMP/pipe.err"
rx_assert_eq "cat | cat | sha256sum: digest" "$want" \
	"$(cut -d' ' -f1 "$RX_TMP/pipe.out")"
rx_quiet pipe

rx_shim sha256sum "$data" >"$RX_TMP/sha.out" 2>"$RX_TMP/sha.err" ||
	rx_fail "sha256sum exit status $?"
rx_assert_eq "sha256sum: digest" "$want" "$(cut -d' ' -f1 "$RX_TMP/sha.out")"
rx_quiet sha

# tar: the same archive with and without the shim, and a round trip.
mkdir -p "$RX_TMP/tree/sub" "$RX_TMP/untar"
cp "$data" "$RX_TMP/tree/a.bin"
printf 'small file\n' >"$RX_TMP/tree/sub/b.txt"
touch -d '2020-01-01 00:00:00' "$RX_TMP/tree/a.bin" "$RX_TMP/tree/sub/b.txt" \
	"$RX_TMP/tree/sub" "$RX_TMP/tree"
rx_plain tar -cf "$RX_TMP/plain.tar" -C "$RX_TMP/tree" . ||
	rx_fail "tar (plain) failed"
rx_shim tar -cf "$RX_TMP/shim.tar" -C "$RX_TMP/tree" . 2>"$RX_TMP/tar.err" ||
	rx_fail "tar exit status $?"
cmp -s "$RX_TMP/plain.tar" "$RX_TMP/shim.tar" ||
	rx_fail "tar: the archive differs from the one made without the shim"
rx_log "ok: tar: archive identical"
rx_shim tar -xf "$RX_TMP/shim.tar" -C "$RX_TMP/untar" 2>>"$RX_TMP/tar.err" ||
	rx_fail "tar -x exit status $?"
cmp -s "$data" "$RX_TMP/untar/a.bin" || rx_fail "tar -x: a.bin differs"
cmp -s "$RX_TMP/tree/sub/b.txt" "$RX_TMP/untar/sub/b.txt" ||
	rx_fail "tar -x: sub/b.txt differs"
rx_log "ok: tar: round trip identical"
rx_quiet tar

# python3: 20 MB through a pipe, in odd-sized reads and writes.
if command -v python3 >/dev/null 2>&1; then
	copier='
import os, sys
n = 0
while True:
    b = os.read(0, 65521)
    if not b:
        break
    v = memoryview(b)
    while v:
        w = os.write(1, v[:40009])
        v = v[w:]
    n += len(b)
sys.stderr.flush()
'
	rx_shim cat "$data" 2>"$RX_TMP/py.err" |
		rx_shim python3 -c "$copier" 2>>"$RX_TMP/py.err" |
		rx_shim sha256sum >"$RX_TMP/py.out" 2>>"$RX_TMP/py.err"
	rx_assert_eq "python3 pipe copy: digest" "$want" \
		"$(cut -d' ' -f1 "$RX_TMP/py.out")"
	rx_quiet py
else
	rx_log "python3 not installed: the python copy is skipped"
fi

# An invalid value: one line on stderr naming variable and value, and
# the program's output is still correct (pass-through).
rx_shim RESILIX_OPEN_MS=abc cat "$data" >"$RX_TMP/bad.out" \
	2>"$RX_TMP/bad.err" || rx_fail "cat with a bad value: exit status $?"
cmp -s "$data" "$RX_TMP/bad.out" ||
	rx_fail "cat with a bad value: output differs"
rx_dump_on_fail "$RX_TMP/bad.err"
rx_assert_eq "bad value: stderr lines" 1 \
	"$(wc -l <"$RX_TMP/bad.err" | tr -d ' ')"
line='^resilix: RESILIX_OPEN_MS="abc" is not valid \(accepted: [^)]*\); '
line="${line}resilix is disabled, all calls pass through\$"
rx_assert_grep "bad value: the line names variable and value" "$line" \
	"$RX_TMP/bad.err"

for c in RESILIX_FAILURE_RATE=1.5 RESILIX_MIN_CALLS=-1 \
	"RESILIX_SLOW_CALL_MS= 5" RESILIX_LOG=verbose RESILIX_DISABLE=yes \
	RESILIX_WINDOW_MAX_AGE_MS=1e3 RESILIX_SLOW_CALL_RATE=inf; do
	rx_shim "$c" sha256sum "$data" >"$RX_TMP/bad2.out" 2>"$RX_TMP/bad2.err" ||
		rx_fail "$c: exit status $?"
	rx_assert_eq "$c: digest" "$want" "$(cut -d' ' -f1 "$RX_TMP/bad2.out")"
	rx_assert_eq "$c: stderr lines" 1 \
		"$(wc -l <"$RX_TMP/bad2.err" | tr -d ' ')"
	grep -qF -- "${c%%=*}=\"${c#*=}\" is not valid" "$RX_TMP/bad2.err" ||
		rx_fail "$c: unexpected message: $(cat "$RX_TMP/bad2.err")"
done
rx_log "ok: each invalid value: one line, correct output"

# Several invalid values still print exactly one line.
rx_shim RESILIX_OPEN_MS=abc RESILIX_MIN_CALLS=x cat "$data" \
	>"$RX_TMP/bad3.out" 2>"$RX_TMP/bad3.err" || rx_fail "exit status $?"
cmp -s "$data" "$RX_TMP/bad3.out" || rx_fail "two bad values: output differs"
rx_assert_eq "two bad values: stderr lines" 1 \
	"$(wc -l <"$RX_TMP/bad3.err" | tr -d ' ')"

# A misspelt name warns (a typo must not silently do nothing).
rx_shim RESILIX_OPEN_MSS=100 cat "$data" >"$RX_TMP/typo.out" \
	2>"$RX_TMP/typo.err" || rx_fail "typo: exit status $?"
cmp -s "$data" "$RX_TMP/typo.out" || rx_fail "typo: output differs"
rx_assert_eq "typo: stderr lines" 1 "$(wc -l <"$RX_TMP/typo.err" | tr -d ' ')"
rx_assert_grep "typo: the warning names the variable" RESILIX_OPEN_MSS \
	"$RX_TMP/typo.err"

# An entry without '=' (only execve makes one) is said to have no value,
# not called a typo of a variable it names exactly.
if [ -z "$RESILIX_SANITIZE_RUNTIME" ] && rx_usable python3; then
	python3 - "$RESILIX_SO" "$data" >"$RX_TMP/noeq.out" 2>"$RX_TMP/noeq.err" <<'PY' ||
import ctypes, sys
so, path = (a.encode() for a in sys.argv[1:3])
arr = ctypes.c_char_p * 3
ctypes.CDLL(None).execve(b"/bin/cat", arr(b"cat", path, None),
                         arr(b"LD_PRELOAD=" + so, b"RESILIX_OPEN_MS", None))
sys.exit(99)
PY
		rx_fail "no '=': exit status $?"
	cmp -s "$data" "$RX_TMP/noeq.out" || rx_fail "no '=': output differs"
	rx_assert_grep "no '=': said to have no value" \
		"RESILIX_OPEN_MS is in the environment without '='" "$RX_TMP/noeq.err"
fi

# Disabled: silent, and still correct.
rx_shim RESILIX_DISABLE=1 cat "$data" >"$RX_TMP/off.out" \
	2>"$RX_TMP/off.err" || rx_fail "disabled: exit status $?"
cmp -s "$data" "$RX_TMP/off.out" || rx_fail "disabled: output differs"
rx_quiet off

# Exit statuses pass through too.
rx_shim cat "$RX_TMP/does-not-exist" >/dev/null 2>"$RX_TMP/enoent.err"
rc=$?
rx_assert_eq "cat of a missing file: exit status" 1 "$rc"
rx_assert_grep "cat of a missing file: its own message" \
	'No such file or directory' "$RX_TMP/enoent.err"
rx_pass
