#!/bin/bash
# vfork_child_log.sh - a vfork child's closes are not the parent's
# (ADR-363). python's subprocess.run with stderr=DEVNULL starts its child
# with vfork, and the child dup2s /dev/null onto fd 2 and closes the
# parent's other fds before it execs - in the parent's memory. The shim
# took those for the parent's own: its log lost stderr after the first
# child (one settle line of three), and RESILIX_LOG_FILE fell back to
# stderr (two of three lines there). Each of three requests to an
# upstream answering 500 is followed by such a child: all three settle
# lines must reach the log the parent configured.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3

rx_upstream_start five --phases 0:status:500
prog='
import socket, subprocess, sys
port = int(sys.argv[1])
for i in range(3):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    while s.recv(4096):
        pass
    s.close()
    subprocess.run(["true"], stderr=subprocess.DEVNULL, check=True)
'
guard=(RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=0 RESILIX_MIN_CALLS=100)
err=$RX_TMP/err log=$RX_TMP/shim.log
rx_dump_on_fail "$err" "$log"
rx_plain python3 -c 'import subprocess, sys; sys.exit(0 if subprocess._USE_VFORK else 1)' ||
	rx_log "NOTE: this python does not use vfork; the test still runs"

rx_shim "${guard[@]}" python3 -c "$prog" "$RX_PORT" 2>"$err" ||
	rx_fail "python under the shim: exit status $?"
rx_assert_eq "settle lines on stderr" 3 "$(grep -c 'event=settle' "$err")"

rx_shim "${guard[@]}" RESILIX_LOG_FILE="$log" python3 -c "$prog" "$RX_PORT" \
	2>"$err" || rx_fail "python under the shim (log file): exit status $?"
rx_assert_eq "settle lines in the log file" 3 "$(grep -c 'event=settle' "$log")"
rx_assert_eq "settle lines on stderr with a log file" 0 \
	"$(grep -c 'event=settle' "$err")"
rx_pass
