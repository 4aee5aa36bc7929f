#!/bin/bash
# shared_no_space.sh - a segment on a file system with no space left never
# kills the program (ADR-680, ADR-681). The segment is a sparse file whose
# pages are backed when first touched, and a touch with no space left on
# a tmpfs is a SIGBUS (exit 135): Docker's /dev/shm is 64 MB, a segment
# 14 MB at the defaults. On a tmpfs of 2 MB a first process makes the
# segment and calls one key; then the tmpfs is filled. Later processes
# must attach (the dead first one's process slot, already backed, is
# reused), keep sharing the key already there, pass calls to new keys
# through unguarded with one line naming the path and the lack of space,
# and exit 0 with every answer; a process that finds no slot whose row
# has memory guards on its own, with one line. A segment that cannot be made there at
# all leaves the process guarding on its own, with one line. Needs root
# to mount the tmpfs; skipped otherwise.
. "$(dirname "$0")/lib.sh"
rx_require_build

MNT=$RX_TMP/shm
mkdir -p "$MNT"
mount -t tmpfs -o size=2m,mode=0700 tmpfs "$MNT" 2>/dev/null ||
	rx_skip "cannot mount a tmpfs here (needs root and mount permission)"
# The tmpfs goes first, whatever happened: rx_cleanup removes $RX_TMP.
trap 'umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	rx_cleanup' EXIT

SEG=$MNT/seg
ports=()
for n in 1 2 3 4; do
	rx_upstream_start "up$n" --phases 0:ok:0
	ports+=("$RX_PORT")
done

# check NAME RC OUT ERR WANT: exit 0, no SIGBUS, WANT answers.
check() {
	local name=$1 rc=$2 out=$3 err=$4 want=$5
	rx_assert_eq "$name: exit status (135 is SIGBUS)" 0 "$rc"
	rx_assert_no_grep "$name: no bus error" 'Bus error|SIGBUS' "$err"
	rx_assert_eq "$name: answers" "$want" "$(grep -c ' 200 OK ' "$out")"
}

out=$RX_TMP/out
err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

# alone NAME SEGMENT WHY: a client calling through SEGMENT exits 0 with
# its answers, guarding on its own with the line that says WHY (ERE).
alone() {
	rx_shim RESILIX_SHARED="$2" "$CLIENT" --port "${ports[1]}" \
		--requests 2 >"$out" 2>"$err"
	check "$1" "$?" "$out" "$err" 2
	rx_assert_grep "$1: the line" \
		"^resilix: RESILIX_SHARED: $2 $3.*this process guards on its own" \
		"$err"
}

rx_shim RESILIX_SHARED="$SEG" "$CLIENT" --port "${ports[0]}" \
	--requests 2 >"$out" 2>"$err"
check "first process, with space" "$?" "$out" "$err" 2
rx_assert_eq "first process: no complaint" 0 "$(grep -c resilix "$err")"
[ -f "$SEG" ] || rx_fail "no segment at $SEG"

# No space left: the dd stops when the tmpfs is full.
dd if=/dev/zero of="$MNT/fill" bs=4k >/dev/null 2>&1
rx_assert_eq "the tmpfs is full" 0 "$(df -P "$MNT" | awk 'NR == 2 { print $4 }')"

# A process per key: the key already shared is called as before; each
# new key passes through, with the line once per process.
for n in 0 1 2 3; do
	rx_shim RESILIX_SHARED="$SEG" RESILIX_LOG=debug "$CLIENT" \
		--port "${ports[$n]}" --requests 3 >"$out" 2>"$err"
	check "full, key $n" "$?" "$out" "$err" 3
	rx_assert_grep "full, key $n: attached to the segment" \
		'event=shared-attached.* created=0 ' "$err"
	rx_assert_no_grep "full, key $n: not refused" 'guards on its own' \
		"$err"
	if [ "$n" -gt 0 ]; then
		rx_assert_eq "full, key $n: one line" 1 "$(grep -c \
			"^resilix: RESILIX_SHARED: $SEG cannot take another key [(]it holds [0-9]*[)]: no space left on its file system.*--shm-size.*calls to new keys pass through unguarded" \
			"$err")"
		rx_assert_no_grep "full, key $n: not reported as a full registry" \
			'event=registry-full' "$err"
	fi
done

# A second process while the first lives: the only row with memory is
# the first's, so it takes no slot and guards on its own, with one line.
bg_out=$RX_TMP/bg.out
bg_err=$RX_TMP/bg.err
rx_dump_on_fail "$bg_out" "$bg_err"
rx_shim RESILIX_SHARED="$SEG" RESILIX_LOG=debug "$CLIENT" \
	--port "${ports[0]}" --requests 30 --interval-ms 100 \
	>"$bg_out" 2>"$bg_err" &
bg=$!
rx_wait_for 10 grep -q 'event=shared-attached' "$bg_err" ||
	rx_fail "the living process did not attach"
alone "full, a second living process" "$SEG" \
	'has no usable process slot [(]no space left on its file system'
wait "$bg"
check "full, the living process" "$?" "$bg_out" "$bg_err" 30

# One process over several new keys: every answer, one line.
if rx_usable curl; then
	urls=()
	for p in "${ports[@]}"; do
		urls+=("http://127.0.0.1:$p/")
	done
	rx_shim RESILIX_SHARED="$SEG" curl -s -o /dev/null \
		-w '%{http_code}\n' "${urls[@]}" >"$out" 2>"$err"
	rc=$?
	rx_assert_eq "curl, four keys: exit status" 0 "$rc"
	rx_assert_eq "curl, four keys: answers" 4 "$(grep -c '^200$' "$out")"
	rx_assert_eq "curl, four keys: one line" 1 \
		"$(grep -c 'cannot take another key' "$err")"
fi

# A segment that cannot be made for lack of space: the process guards on
# its own, says so, and leaves no file.
alone "new segment, no space" "$MNT/seg2" \
	'cannot be made [(]no space left on its file system'
[ ! -e "$MNT/seg2" ] || rx_fail "the segment that could not be made is left"

# Space again: new keys are shared again (after the second a failed
# reservation waits), by a process that never failed.
rm -f "$MNT/fill"
rx_shim RESILIX_SHARED="$SEG" RESILIX_LOG=debug "$CLIENT" \
	--port "${ports[3]}" --requests 2 >"$out" 2>"$err"
check "space again" "$?" "$out" "$err" 2
rx_assert_eq "space again: no complaint" 0 \
	"$(grep -c 'cannot take another key' "$err")"
rx_pass
