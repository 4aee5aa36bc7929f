#!/bin/bash
# fd_lifecycle.sh - fd numbers closed, reused, duplicated or shut down
# behind a call's back never misattribute a call, and duplicates of a
# socket share its call (ADR-142, ADR-213).
#
# tests/support/fdops runs each scenario and marks its steps on stderr;
# the shim logs at debug to stderr (or to RESILIX_LOG_FILE), so each step
# is paired with the settle lines logged after it:
#   reuse       an abandoned call settles as rejected at close (no
#               evidence); the next socket on the same number is B's call,
#               answered 200 (success), not A's.
#   dup         F_DUPFD_CLOEXEC/dup and closing the duplicate leave the
#               call alone; dup2 over a tracked socket abandons its call;
#               the original then settles at its first byte.
#   share       a request written through a dup and answered through the
#               original, or through an F_DUPFD duplicate after the
#               number it was written on closed, is one call settled at
#               its first byte; only closing the last number abandons.
#   closerange  close_range(3, ~0U) abandons the call in flight, closes
#   closefrom   the shim's log file too (the log degrades to stderr, the
#               program is unharmed), and a new call on the same number
#               is tracked afresh.
#   shutdown    shutdown(SHUT_RDWR) then EOF: rejected, not transient.
#   fcntl       fcntl's int, pointer and absent third argument forwarded.
#   dupstale    a number of a duplicated socket closed unseen (fclose)
#               and reused by a file: the file's bytes are not the call's
#               answer, which is read through the duplicate.
#   eisconn     connect() again before every request on a kept-alive
#               connection answers EISCONN as without the shim, even with
#               the circuit open, and the 500s still trip the breaker.
#   nbabort     a failed non-blocking connect learnt through SO_ERROR,
#               then connect() again (ECONNABORTED from the kernel): one
#               failure per attempt, not two.
#   spawn       subprocess children (vfork, closing fds before exec) leave
#               the parent's call in flight alone.
. "$(dirname "$0")/lib.sh"
rx_require_build
FDOPS=$RESILIX_BUILDDIR/tests/support/fdops
[ -x "$FDOPS" ] || rx_fail "not built: $FDOPS"

rx_upstream_start hang --phases 0:hang
HANG=$RX_PORT
rx_upstream_start ok --phases 0:ok
OK=$RX_PORT
rx_upstream_start lat --phases 0:ok:300
LAT=$RX_PORT

# settles FILE STEP: "verdict,at;..." of the settle lines after STEP's
# marker and before the next marker.
settles() {
	awk -v s="fdops step=$2" '/fdops step=/ { on = ($0 ~ s "$"); next }
		on && /event=settle/ { v = ""; for (i = 1; i <= NF; i++)
			if ($i ~ /^(verdict|at|key)=/) v = v $i ",";
			print v }' "$1" | paste -sd';'
}

run() { # NAME ARGS...: fdops under the shim, debug log on stderr
	local name=$1
	shift
	rx_dump_on_fail "$RX_TMP/$name.out" "$RX_TMP/$name.err"
	rx_shim RESILIX_LOG=debug "$@" >"$RX_TMP/$name.out" \
		2>"$RX_TMP/$name.err" || rx_fail "$name: exit status $?"
}

run reuse "$FDOPS" reuse "$HANG" "$OK"
rx_assert_grep "reuse: the number was reused" 'same_number=1 status=200' \
	"$RX_TMP/reuse.out"
rx_assert_eq "reuse: A's abandoned call" \
	"key=127.0.0.1:$HANG,verdict=rejected,at=close," \
	"$(settles "$RX_TMP/reuse.err" request-a)"
rx_assert_eq "reuse: B's call on the same number" \
	"key=127.0.0.1:$OK,verdict=success,at=first-byte," \
	"$(settles "$RX_TMP/reuse.err" request-b)"

run dup "$FDOPS" dup "$LAT"
rx_assert_eq "dup: duplicates opened and closed" "" \
	"$(settles "$RX_TMP/dup.err" dups)"
rx_assert_eq "dup: dup2 over a tracked socket abandons its call" \
	"key=127.0.0.1:$LAT,verdict=rejected,at=close," \
	"$(settles "$RX_TMP/dup.err" dup2-over-tracked)"
rx_assert_eq "dup: the original's call" \
	"key=127.0.0.1:$LAT,verdict=success,at=first-byte," \
	"$(settles "$RX_TMP/dup.err" request)"

run share "$FDOPS" share "$LAT"
rx_assert_grep "share: the program's view" 'share ok=1' "$RX_TMP/share.out"
first="key=127.0.0.1:$LAT,verdict=success,at=first-byte,"
rx_assert_eq "share: written through a dup, read through the original" \
	"$first" "$(settles "$RX_TMP/share.err" write-dup-read-original)"
rx_assert_eq "share: the original closed, the dup goes on" \
	"$first" "$(settles "$RX_TMP/share.err" original-closed)"
rx_assert_eq "share: the writing number closed while the answer is awaited" \
	"$first" "$(settles "$RX_TMP/share.err" closed-in-flight)"
rx_assert_eq "share: closing the last number abandons" \
	"key=127.0.0.1:$LAT,verdict=rejected,at=close," \
	"$(settles "$RX_TMP/share.err" last-number-closed)"

for mode in closerange closefrom; do
	log=$RX_TMP/$mode.shimlog
	rx_dump_on_fail "$log"
	run $mode RESILIX_LOG_FILE="$log" "$FDOPS" $mode "$LAT"
	rx_assert_grep "$mode: the program ran on" 'same_number=1 status=200' \
		"$RX_TMP/$mode.out"
	rx_assert_grep "$mode: the call in flight abandoned, in the log file" \
		'event=settle verdict=rejected .*at=close' "$log"
	rx_assert_eq "$mode: later lines reach stderr" \
		"key=127.0.0.1:$LAT,verdict=success,at=first-byte," \
		"$(settles "$RX_TMP/$mode.err" request)"
	rx_assert_no_grep "$mode: no success line in the closed log file" \
		'verdict=success' "$log"
done

run shutdown "$FDOPS" shutdown "$LAT"
rx_assert_eq "shutdown: the EOF we caused is not evidence" \
	"key=127.0.0.1:$LAT,verdict=rejected,at=close," \
	"$(settles "$RX_TMP/shutdown.err" shutdown)"

# A vfork-style child (python's subprocess: vfork, then closing every fd
# above 2 before exec) must not abandon the parent's call in flight.
if command -v python3 >/dev/null 2>&1; then
	rx_shim RESILIX_LOG=debug python3 -c '
import socket, subprocess, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
for i in range(3):
    subprocess.run(["true"], close_fds=True, check=True)
print(s.recv(12).decode())
s.close()
' "$LAT" >"$RX_TMP/spawn.out" 2>"$RX_TMP/spawn.err" ||
		rx_fail "spawn: exit status $?"
	rx_dump_on_fail "$RX_TMP/spawn.err"
	rx_assert_eq "spawn: the response" "HTTP/1.1 200" "$(cat "$RX_TMP/spawn.out")"
	rx_assert_eq "spawn: the parent's call settled at its first byte" \
		"verdict=success,at=first-byte" \
		"$(grep 'event=settle' "$RX_TMP/spawn.err" |
			sed -n 's/.*\(verdict=[a-z]*\).*\(at=[a-z-]*\).*/\1,\2/p' |
			paste -sd' ')"
fi

rx_upstream_start bad --phases 0:status:500
run dupstale "$FDOPS" dupstale "$RX_PORT"
rx_assert_eq "dupstale: the program's view" "dupstale same_number=1 status=500" \
	"$(cat "$RX_TMP/dupstale.out")"
rx_assert_eq "dupstale: the answer, not the file, settles the call" \
	"key=127.0.0.1:$RX_PORT,verdict=transient,at=first-byte," \
	"$(settles "$RX_TMP/dupstale.err" dupstale)"

run eisconn RESILIX_CONSECUTIVE_BACKSTOP=3 RESILIX_OPEN_MS=30000 \
	"$FDOPS" eisconn "$RX_PORT"
rx_assert_eq "eisconn: connect says EISCONN; 3 answers, then the breaker" \
	"$(printf 'request %d connect=EISCONN write=ok status=500\n' 0 1 2
	printf 'request %d connect=EISCONN write=ECONNREFUSED status=0\n' 3 4 5)" \
	"$(cat "$RX_TMP/eisconn.out")"

run nbabort "$FDOPS" nbabort "$(rx_free_port)"
rx_assert_eq "nbabort: the program's view, as without the shim" \
	"$(printf 'attempt %d connect=EINPROGRESS so_error=ECONNREFUSED again=ECONNABORTED\n' 0 1 2)" \
	"$(cat "$RX_TMP/nbabort.out")"
rx_assert_eq "nbabort: one failure per attempt" 3 \
	"$(grep -c 'event=settle verdict=transient' "$RX_TMP/nbabort.err")"

run fcntl "$FDOPS" fcntl
rx_assert_eq "fcntl: results" "fcntl ok dup=1 unlocked=1" \
	"$(cat "$RX_TMP/fcntl.out")"
rx_pass
