#!/bin/bash
# metrics_file_safety.sh - RESILIX_METRICS_FILE replaces only a metrics
# file of its own (ADR-215). A name that does not end in .prom is a
# configuration error (one line, everything passes through); a regular
# file with other contents, a FIFO and a symbolic link in the file's place
# are left exactly as they were, with one warning, and guarding goes on;
# the shim's own earlier file is replaced as usual; a program that exits
# mid-call leaves no temporary file; a program that reuses its environment
# block for its title still gets its file.
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_upstream_start up --phases 0:status:500
guard=(RESILIX_CONSECUTIVE_BACKSTOP=2 RESILIX_OPEN_MS=30000
	RESILIX_METRICS_INTERVAL_MS=0)
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

# A name that is not a metrics file's: the file is untouched and
# resilix is off (all 6 calls reach the upstream).
echo "precious data" >"$RX_TMP/notes.txt"
before=$(rx_count up)
rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$RX_TMP/notes.txt" "$CLIENT" \
	--port "$RX_PORT" --requests 6 >"$out" 2>"$err" || rx_fail "exit status $?"
rx_assert_eq "not .prom: one line" 1 "$(wc -l <"$err" | tr -d ' ')"
rx_assert_grep "not .prom: the line says what is accepted" \
	'RESILIX_METRICS_FILE=.*ending in .prom' "$err"
rx_assert_eq "not .prom: the file is untouched" "precious data" \
	"$(cat "$RX_TMP/notes.txt")"
rx_assert_eq "not .prom: every call passed through" 6 $(($(rx_count up) - before))

# Something else in the file's place: left alone, one warning each,
# and the breaker still trips after 2 calls.
echo "precious data" >"$RX_TMP/other.prom"
mkfifo "$RX_TMP/fifo.prom"
ln -s "$RX_TMP/target" "$RX_TMP/link.prom"
for f in other fifo link; do
	before=$(rx_count up)
	rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$RX_TMP/$f.prom" "$CLIENT" \
		--port "$RX_PORT" --requests 6 >"$out" 2>"$err" ||
		rx_fail "$f: exit status $?"
	rx_assert_eq "$f: one warning" 1 \
		"$(grep -c 'event=metrics-write-refused' "$err")"
	rx_assert_eq "$f: guarding went on (2 calls, then open)" 2 \
		$(($(rx_count up) - before))
	rx_assert_eq "$f: no temporary file left" "" \
		"$(ls "$RX_TMP" | grep "$f.prom.tmp" || true)"
done
rx_assert_eq "other: contents untouched" "precious data" \
	"$(cat "$RX_TMP/other.prom")"
[ -p "$RX_TMP/fifo.prom" ] || rx_fail "fifo: no longer a FIFO"
[ -L "$RX_TMP/link.prom" ] || rx_fail "link: no longer a symbolic link"
[ -e "$RX_TMP/target" ] && rx_fail "link: its target was created"

# Our own file: replaced at every write.
rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$RX_TMP/own.prom" "$CLIENT" \
	--port "$RX_PORT" --requests 1 >"$out" 2>"$err" || rx_fail "exit status $?"
rx_assert_grep "own: written" '^# HELP resilix_' "$RX_TMP/own.prom"
rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$RX_TMP/own.prom" "$CLIENT" \
	--port "$RX_PORT" --requests 1 >"$out" 2>"$err" || rx_fail "exit status $?"
rx_assert_eq "own: replaced without a warning" 0 \
	"$(grep -c 'metrics-write' "$err")"
# Something already at the temporary file's name (<file>.tmp.<pid>): a
# hard link to someone's file is never written through, and a FIFO never
# blocks the program. The same for the state file. sh's exec keeps the
# pid, so the name is known in advance.
echo "precious data" >"$RX_TMP/precious"
for kind in link fifo; do
	for var in METRICS STATE; do
		f=$RX_TMP/$kind-$var.prom
		rx_shim "${guard[@]}" RESILIX_${var}_FILE="$f" sh -c '
			if [ "$1" = link ]; then ln "$2" "$3.tmp.$$"
			else mkfifo "$3.tmp.$$"; fi
			shift 3
			exec "$@"' sh "$kind" "$RX_TMP/precious" "$f" \
			"$CLIENT" --port "$RX_PORT" --requests 3 >"$out" 2>"$err" ||
			rx_fail "$kind $var: exit status $? (a FIFO blocked?)"
		[ -s "$f" ] || rx_fail "$kind $var: the file was not written"
	done
done
rx_assert_eq "tmp names: the linked file untouched" "precious data" \
	"$(cat "$RX_TMP/precious")"

# The checker says what the shim would do with a file in the way.
rx_assert_eq "checker: other.prom" 1 "$(RESILIX_METRICS_FILE="$RX_TMP/other.prom" \
	"$RESILIX_BUILDDIR/resilix-config" --quiet 2>&1 |
	grep -c 'warning: RESILIX_METRICS_FILE=.*not a resilix metrics file')"
rx_assert_eq "checker: a link as state file" 1 "$(RESILIX_STATE_FILE="$RX_TMP/link.prom" \
	"$RESILIX_BUILDDIR/resilix-config" --quiet 2>&1 |
	grep -c 'warning: RESILIX_STATE_FILE=.*is a symbolic link')"

# A program that writes its process title over its environment block
# (nginx, postgres), then forks a worker: the worker's own file (%p) is
# written under the name the variable had at start-up, and a relative
# name is resolved then too.
# (The worker's file is removed when it exits, ADR-222: the log says
# where it was written.)
(cd "$RX_TMP" && rx_shim RESILIX_METRICS_FILE="title-%p.prom" RESILIX_LOG=debug \
	"$RESILIX_BUILDDIR/tests/support/proctitle" "$RX_PORT") >"$out" 2>"$err" ||
	rx_fail "proctitle: exit status $?"
rx_assert_grep "proctitle: the worker's file was written" \
	"event=metrics-written keys=1 file=\"$RX_TMP/title-[0-9]+\\.prom\"" "$err"
rx_assert_grep "proctitle: and removed at its exit" \
	"event=metrics-removed file=\"$RX_TMP/title-[0-9]+\\.prom\"" "$err"
rx_assert_eq "proctitle: no file left" 0 \
	"$(ls "$RX_TMP" | grep -c '^title-[0-9]*\.prom$')"
rx_assert_no_grep "proctitle: no write failure" 'metrics-write-failed' "$err"

# A program that exits while its threads are mid-call: the write at exit
# waits for one in progress and keeps later ones from starting, so no
# temporary file is left behind (8 of 30 runs left one before).
EXITMID=$RESILIX_BUILDDIR/tests/support/exitmid
rx_upstream_start fast --phases 0:ok
for i in $(seq 1 20); do
	rx_shim RESILIX_METRICS_FILE="$RX_TMP/exit.prom" \
		RESILIX_METRICS_INTERVAL_MS=0 RESILIX_STATE_FILE="$RX_TMP/exit.state" \
		"$EXITMID" "$RX_PORT" $((i * 1500)) >/dev/null 2>&1 ||
		rx_fail "exitmid exit status $?"
done
rx_assert_grep "exit: the file was written" '^# HELP resilix_' "$RX_TMP/exit.prom"
rx_assert_eq "exit: no temporary file left" "" \
	"$(ls "$RX_TMP" | grep 'exit.prom.tmp' || true)"
rx_pass
