#!/bin/bash
# shared_slot_reuse.sh - a lock left held by a dead process is taken over
# even after its process slot was freed and claimed again (ADR-623).
# Process A makes a call and exits (its slot 0 stays until a sweep); its
# lock tag is then written into key 0's lock word, as if A had died
# inside that key's critical section. Process B attaches - its sweep
# frees slot 0 - and calls only another key. Process C claims slot 0
# and calls A's key: its own tag must not pass for A's, so it takes the
# lock over (a warning) and its call goes through, instead of spinning
# for ever on a lock it believes it holds.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start up --phases 0:ok:0
PORT=$RX_PORT
DEAD=$(rx_free_port)
SEG=$RX_TMP/seg
guard=(RESILIX_SHARED="$SEG")

rx_shim "${guard[@]}" "$CLIENT" --port "$PORT" --requests 1 \
	>"$RX_TMP/a.out" 2>"$RX_TMP/a.err" || rx_fail "process A failed"
rx_assert_grep "process A: its call went through" ' 200 OK ' "$RX_TMP/a.out"

# Key 0's lock word := slot 0's tag (the header's offsets, the process
# table's layout: shared.c).
python3 - "$SEG" <<'EOF' || rx_fail "cannot edit the segment"
import struct, sys
with open(sys.argv[1], "r+b") as f:
    h = f.read(120)
    off_procs, _, off_locks = struct.unpack_from("<QQQ", h, 80)
    f.seek(off_procs)
    pid, _, _ = struct.unpack("<IIQ", f.read(16))
    assert pid != 0, "slot 0 is not A's"
    f.seek(off_procs + 52)
    gen, = struct.unpack("<I", f.read(4))
    f.seek(off_locks)
    f.write(struct.pack("<i", ((gen & ((1 << 21) - 1)) << 9) | 2))
EOF

rx_shim "${guard[@]}" RESILIX_LOG=debug "$CLIENT" --port "$DEAD" \
	--requests 1 >"$RX_TMP/b.out" 2>"$RX_TMP/b.err"
rx_assert_grep "process B: slot 0 recovered" \
	'event=shared-process-recovered slot=0' "$RX_TMP/b.err"

out=$RX_TMP/c.out
err=$RX_TMP/c.err
rx_dump_on_fail "$out" "$err"
t0=$(rx_now_ms)
RX_TIMEOUT=15 rx_shim "${guard[@]}" RESILIX_LOG=debug "$CLIENT" \
	--port "$PORT" --requests 1 >"$out" 2>"$err" ||
	rx_fail "process C failed or hung (rc $?)"
t1=$(rx_now_ms)
rx_assert_grep "process C: in slot 0" 'event=shared-attached.* slot=0 ' "$err"
rx_assert_grep "process C: took the dead holder's lock over" \
	'event=shared-lock-recovered .*lock=key' "$err"
rx_assert_eq "process C: its call went through" 1 "$(grep -c ' 200 OK ' "$out")"
rx_assert_le "process C: done within (ms)" $((t1 - t0)) 5000
rx_pass
