#!/bin/bash
# log_program_fds.sh - the shim's log never lands in the program's files
# and never blocks it (ADR-202, ADR-203).
#
# 1. A daemon closes 0, 1 and 2 and opens its data file, which gets fd 0-2;
#    another closes stderr with fclose(stderr), where the shim cannot see
#    the close, and its data file gets fd 2. Both then trip a breaker
#    (RESILIX_LOG=info): the data file holds only the program's lines.
# 2. A program that keeps its stderr still gets the log lines there.
# 3. RESILIX_LOG_FILE naming a FIFO with no reader: one line, the program
#    runs (it used to hang in the constructor, before main). A FIFO whose
#    reader never reads: debug lines fill it, the program finishes anyway.
. "$(dirname "$0")/lib.sh"
rx_need "${CC:-cc}" mkfifo
[ -f "$RESILIX_SO" ] || rx_fail "shim not built: $RESILIX_SO"
cd "$RX_TMP" || rx_fail "no temp dir"
cat >daemon.c <<'EOC'
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	int port = atoi(argv[2]), fd, i;
	if (strcmp(argv[3], "fclose") == 0) {
		fclose(stderr);
	} else if (strcmp(argv[3], "close") == 0) {
		close(0);
		close(1);
		close(2);
	}
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (strcmp(argv[3], "close") == 0) {
		open(argv[1], O_WRONLY | O_APPEND);
		fd = open(argv[1], O_WRONLY | O_APPEND);
	}
	dprintf(fd, "DATA-START\n");
	for (i = 0; i < atoi(argv[4]); i++) {
		struct sockaddr_in a = {0};
		int s = socket(AF_INET, SOCK_STREAM, 0);
		a.sin_family = AF_INET;
		a.sin_port = htons(port);
		a.sin_addr.s_addr = htonl(0x7f000001);
		connect(s, (void *)&a, sizeof(a));
		close(s);
	}
	dprintf(fd, "DATA-END\n");
	return 0;
}
EOC
${CC:-cc} -O2 -o daemon daemon.c || rx_fail "cannot build the test program"
port=$(rx_free_port) # nothing listens: every connect fails
guard=(RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=2)

for how in close fclose; do
	rx_shim "${guard[@]}" ./daemon "$RX_TMP/$how.data" "$port" "$how" 6 \
		>/dev/null 2>&1 || rx_fail "$how: exit status $?"
	rx_assert_eq "$how: the data file holds the program's lines only" \
		"DATA-START DATA-END" "$(tr '\n' ' ' <"$RX_TMP/$how.data" | sed 's/ $//')"
done
rx_shim "${guard[@]}" ./daemon "$RX_TMP/keep.data" "$port" keep 6 \
	>/dev/null 2>"$RX_TMP/keep.err" || rx_fail "keep: exit status $?"
rx_assert_grep "stderr kept: the log is there" 'event=breaker-transition' \
	"$RX_TMP/keep.err"
rx_assert_eq "stderr kept: the data file" "DATA-START DATA-END" \
	"$(tr '\n' ' ' <"$RX_TMP/keep.data" | sed 's/ $//')"

# 3. FIFOs.
mkfifo "$RX_TMP/noreader"
t0=$(rx_now_ms)
rx_shim RESILIX_LOG_FILE="$RX_TMP/noreader" ./daemon "$RX_TMP/f1.data" \
	"$port" keep 1 >/dev/null 2>"$RX_TMP/f1.err" ||
	rx_fail "FIFO without reader: exit status $?"
rx_assert_le "FIFO without reader: the program did not wait (ms)" \
	$(($(rx_now_ms) - t0)) 3000
rx_assert_grep "FIFO without reader: it says so" \
	'RESILIX_LOG_FILE=.*noreader.*ENXIO.*logging to stderr' "$RX_TMP/f1.err"
mkfifo "$RX_TMP/stalled"
# A reader that opens the FIFO and never reads.
sleep 30 <>"$RX_TMP/stalled" &
reader=$!
t0=$(rx_now_ms)
rx_shim RESILIX_LOG=debug RESILIX_LOG_FILE="$RX_TMP/stalled" ./daemon \
	"$RX_TMP/f2.data" "$port" keep 3000 >/dev/null 2>&1
rc=$?
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
rx_assert_eq "FIFO never read: the program finished" 0 "$rc"
rx_assert_le "FIFO never read: it took (ms)" $(($(rx_now_ms) - t0)) 8000
rx_pass
