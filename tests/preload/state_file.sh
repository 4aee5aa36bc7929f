#!/bin/bash
# state_file.sh - RESILIX_STATE_FILE carries the breaker across processes
# (ADR-170 to ADR-174).
#
# 1. A shell loop of separate short processes (the C client with
#    --requests 1, then curl), one call each, against a dead upstream (a
#    closed port): the failures add up across processes, so the backstop
#    trips once, in the BACKSTOP-th process. Then a listener starts on the
#    port, and every following process fails fast (ECONNREFUSED / curl exit
#    7) while the listener accepts nothing, until the open time has passed:
#    then one probe reaches it, the circuit closes, calls succeed; the
#    process that loads the run-out open circuit logs open -> half-open
#    before half-open -> closed.
#    Without the state file no process would ever trip (one call each).
# 2. A wrapper (bash -c) that loads the shim but guards no call does not
#    write back the state it read before its child learnt something.
# 3. A corrupt, truncated, empty or future-version state file: one warning
#    naming the file and the reason, normal guarding, and a good file
#    written at exit, with the old file's mode. A missing file is silent.
#    A file that is not ours - text, random bytes without the magic "RXSN",
#    a FIFO - is never written over (ADR-201): one line naming it, guarding
#    without state, the file byte-for-byte and mode as it was, no lock
#    file beside it.
# 4. A directory or an unusable directory as RESILIX_STATE_FILE: one line,
#    guarding goes on without state. RESILIX_DISABLE: no state I/O. A
#    relative name; a lock held by another process (a bounded wait and a
#    warning, never a hang).
# 5. Eight processes at once, three times: the file stays whole, no
#    temporary file is left behind, no fd of ours stays open in the host.
#    Processes that overlap merge at exit (ADR-171): eight processes at
#    once on eight keys leave eight keys; eight at once that each fail
#    once on one key leave eight failures (ADR-221); a long-lived process
#    that exits after short ones tripped its key does not close the
#    circuit again. A daemon's child, forked without exec, writes its own
#    calls (ADR-222).
. "$(dirname "$0")/lib.sh"
rx_require_build

BACKSTOP=3
OPEN=4000
guard=(RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=$BACKSTOP
	RESILIX_MIN_CALLS=100 RESILIX_WINDOW_CALLS=200
	RESILIX_WINDOW_MAX_AGE_MS=60000 RESILIX_OPEN_MS=$OPEN)

# one KIND STATE PORT: one guarded process making one call; appends its
# result line to $out and its stderr to $err. client lines are the
# client's ("0 <start_ms> <latency_us> <status> <errno|OK> <reached>"),
# curl lines "<http_code> <exitcode> <time_total_s>".
one() {
	local kind=$1 state=$2 port=$3
	if [ "$kind" = client ]; then
		rx_shim "${guard[@]}" RESILIX_STATE_FILE="$state" \
			"$CLIENT" --port "$port" --requests 1 >>"$out" 2>>"$err"
	else
		rx_shim "${guard[@]}" RESILIX_STATE_FILE="$state" \
			curl -s -o /dev/null --max-time 5 \
			-w '%{http_code} %{exitcode} %{time_total}\n' \
			"http://127.0.0.1:$port/" >>"$out" 2>>"$err"
		# curl's own exit status is the call's outcome (7: could not
		# connect); only a timeout or a crash fails the process.
		[ $? -lt 124 ]
	fi
}

# at_once WHAT STATE ENV PORT...: one guarded client process per PORT (a
# call each), all started at once, with the settings in the array named
# ENV; waits for them all. Results go to $out, stderr to $err.
at_once() {
	local what=$1 state=$2 p pids=""
	local -n settings=$3
	shift 3
	for p in "$@"; do
		rx_shim "${settings[@]}" RESILIX_STATE_FILE="$state" "$CLIENT" \
			--port "$p" --requests 1 >>"$out" 2>>"$err" &
		pids="$pids $!"
	done
	for p in $pids; do
		wait "$p" || rx_fail "$what: a process failed"
	done
}

# failed_fast KIND LINE: the call failed to connect, in under 50 ms.
failed_fast() {
	if [ "$1" = client ]; then
		echo "$2" | awk '$4 == 0 && $5 == "ECONNREFUSED" && $6 == 0 &&
			$3 < 50000 { ok = 1 } END { exit !ok }'
	else
		echo "$2" | awk '$1 == "000" && $2 == 7 && $3 < 0.05 { ok = 1 }
			END { exit !ok }'
	fi
}

succeeded() {
	if [ "$1" = client ]; then
		echo "$2" | grep -q ' 200 OK 1$'
	else
		case $2 in "200 0 "*) return 0 ;; esac
		return 1
	fi
}

# --- 1. a shell loop of short processes against a dead upstream -------------
loop_case() {
	local kind=$1 state=$RX_TMP/$1.state i n t_trip line
	out=$RX_TMP/$kind.out err=$RX_TMP/$kind.err
	: >"$out"
	: >"$err"
	rx_dump_on_fail "$out" "$err"
	PORT=$(rx_free_port)
	rx_log "$kind: dead port $PORT"
	for i in $(seq 1 $BACKSTOP); do
		rx_assert_eq "$kind: no trip before process $i" 0 \
			"$(rx_count_to open "$err")"
		one "$kind" "$state" "$PORT" || rx_fail "$kind: process $i failed"
	done
	t_trip=$(rx_now_ms)
	rx_assert_eq "$kind: process $BACKSTOP tripped the backstop" 1 \
		"$(rx_count_to open "$err")"
	rx_assert_grep "$kind: trip reason is the backstop" \
		'to=open .*reason=consecutive-failures' "$err"
	rx_assert_eq "$kind: the first $BACKSTOP processes all failed" \
		"$BACKSTOP" "$(wc -l <"$out" | tr -d ' ')"

	# The port is alive again, but the circuit is open.
	rx_upstream_start "$kind" --port "$PORT" --phases 0:ok:0
	n=0
	while [ "$(rx_now_ms)" -lt $((t_trip + OPEN - 700)) ] && [ $n -lt 40 ]; do
		one "$kind" "$state" "$PORT" || rx_fail "$kind: process failed"
		line=$(tail -n 1 "$out")
		failed_fast "$kind" "$line" ||
			rx_fail "$kind: process $((n + BACKSTOP + 1)) did not fail fast: $line"
		n=$((n + 1))
		sleep 0.1
	done
	rx_assert_ge "$kind: processes refused while open" "$n" 3
	rx_assert_eq "$kind: connections the listener accepted meanwhile" 0 \
		"$(rx_accepts "$kind")"

	# The open time passes: the next process probes, and closes it.
	while [ "$(rx_now_ms)" -lt $((t_trip + OPEN + 300)) ]; do
		sleep 0.05
	done
	for i in 1 2; do
		one "$kind" "$state" "$PORT" || rx_fail "$kind: process failed"
		line=$(tail -n 1 "$out")
		succeeded "$kind" "$line" ||
			rx_fail "$kind: call $i after the open time failed: $line"
	done
	rx_assert_eq "$kind: requests that reached the upstream" 2 \
		"$(rx_count "$kind" 200)"
	# The process that loads the run-out open circuit says it went
	# half-open before it says it closed (ADR-367).
	rx_assert_eq "$kind: transitions over all processes" \
		"closed>open open>half-open half-open>closed" \
		"$(rx_transitions "$err" | sed 's/half_open/half-open/g' | paste -sd' ')"
	rx_assert_grep "$kind: open -> half-open, the open time elapsed" \
		'from=open to=half-open reason=open-elapsed' "$err"
	rx_assert_no_grep "$kind: no state warning" 'event=state-' "$err"
	rx_upstream_stop "$kind"
}

loop_case client
if rx_usable curl && command -v curl >/dev/null 2>&1; then
	loop_case curl
fi

# --- 2. a wrapper that guards nothing writes nothing --------------------------
out=$RX_TMP/wrap.out err=$RX_TMP/wrap.err
: >"$out"
: >"$err"
state=$RX_TMP/wrap.state
PORT=$(rx_free_port)
one client "$state" "$PORT"
# bash forks the client (the `; true` keeps it from exec'ing it), the
# client writes 2 failures, then bash exits: it must not put back the 1 it
# read. If it did, the next process would not trip.
rx_shim "${guard[@]}" RESILIX_STATE_FILE="$state" bash -c \
	"'$CLIENT' --port $PORT --requests 1 >>'$out'; true" 2>>"$err"
rx_assert_eq "wrapper: no trip after 2 processes" 0 "$(rx_count_to open "$err")"
one client "$state" "$PORT"
rx_assert_eq "wrapper: the third process tripped" 1 "$(rx_count_to open "$err")"

# --- 3. bad state files ------------------------------------------------------
rx_upstream_start good --phases 0:ok:0
GOOD=$RX_PORT
good_state=$RX_TMP/good.state
out=$RX_TMP/good.out err=$RX_TMP/good.err
: >"$err"
one client "$good_state" "$GOOD"
rx_assert_eq "a missing state file is silent" "" "$(cat "$err")"
rx_assert_eq "the state file is a snapshot" RXSN "$(head -c 4 "$good_state")"
rx_assert_eq "the state file's mode" 600 "$(stat -c %a "$good_state")"
size=$(stat -c %s "$good_state")

# bad_case NAME: $RX_TMP/NAME.state was spoilt; expect one warning naming
# it with REASON, a normal call, and a good file afterwards.
bad_case() {
	local name=$1 reason=$2 state=$RX_TMP/$1.state
	out=$RX_TMP/$name.out err=$RX_TMP/$name.err
	: >"$out"
	: >"$err"
	rx_dump_on_fail "$err"
	one client "$state" "$GOOD"
	rx_assert_eq "$name: warnings" 1 "$(grep -c 'level=warn' "$err")"
	rx_assert_grep "$name: the warning names the file and the reason" \
		"event=state-file-ignored .*reason=\"$reason\" file=\"$state\"" "$err"
	rx_assert_grep "$name: the call went through" ' 200 OK 1$' "$out"
	rx_assert_eq "$name: a good file was written at exit" RXSN \
		"$(head -c 4 "$state")"
	: >"$err"
	one client "$state" "$GOOD"
	rx_assert_eq "$name: the next process reads it silently" "" "$(cat "$err")"
}

# foreign_case NAME REASON: $RX_TMP/NAME.state is someone else's file.
foreign_case() {
	local name=$1 reason=$2 state=$RX_TMP/$1.state before
	out=$RX_TMP/$name.out err=$RX_TMP/$name.err
	: >"$out"
	: >"$err"
	rx_dump_on_fail "$err"
	before=$(stat -c '%a %s %Y %F' "$state")
	[ -f "$state" ] && cp "$state" "$RX_TMP/$name.copy"
	one client "$state" "$GOOD"
	one client "$state" "$GOOD"
	rx_assert_eq "$name: one line per process" 2 "$(wc -l <"$err" | tr -d ' ')"
	rx_assert_grep "$name: the line names the file and the reason" \
		"RESILIX_STATE_FILE=\"$state\" $reason.*; it is left untouched" "$err"
	rx_assert_eq "$name: the calls went through" 2 \
		"$(grep -c ' 200 OK 1$' "$out")"
	rx_assert_eq "$name: mode, size, time and type unchanged" "$before" \
		"$(stat -c '%a %s %Y %F' "$state")"
	if [ -f "$state" ]; then
		cmp -s "$state" "$RX_TMP/$name.copy" ||
			rx_fail "$name: the file was changed"
	fi
	rx_assert_eq "$name: no lock file beside it" no \
		"$([ -e "$state.lock" ] && echo yes || echo no)"
}

# Someone else's files (F17): a text file, random bytes (not starting
# with R), a FIFO.
printf 'my precious notes\nline 2\n' >"$RX_TMP/notes.state"
chmod 644 "$RX_TMP/notes.state"
foreign_case notes 'is not a resilix state file'
{ printf 'x' && head -c 2999 /dev/urandom; } >"$RX_TMP/random.state"
foreign_case random 'is not a resilix state file'
mkfifo "$RX_TMP/fifo.state"
foreign_case fifo 'is not a regular file'

# Ours but corrupt: repaired, with the old file's mode kept.
{ printf 'RXSN' && head -c 3000 /dev/urandom; } >"$RX_TMP/magic.state"
chmod 640 "$RX_TMP/magic.state"
bad_case magic '.*'
rx_assert_eq "magic: the replaced file kept its mode" 640 \
	"$(stat -c %a "$RX_TMP/magic.state")"
head -c $((size - 7)) "$good_state" >"$RX_TMP/truncated.state"
bad_case truncated 'serialised data is malformed or truncated'
: >"$RX_TMP/empty.state"
bad_case empty 'serialised data is malformed or truncated'
cp "$good_state" "$RX_TMP/future.state"
printf '\011' | dd of="$RX_TMP/future.state" bs=1 seek=4 conv=notrunc 2>/dev/null
bad_case future 'serialised data has an unsupported version'

# --- 4. unusable paths, RESILIX_DISABLE ---------------------------------------
out=$RX_TMP/paths.out err=$RX_TMP/paths.err
: >"$out"
mkdir "$RX_TMP/adir"
rx_shim "${guard[@]}" RESILIX_STATE_FILE="$RX_TMP/adir" \
	"$CLIENT" --port "$GOOD" --requests 1 >>"$out" 2>"$err"
rx_assert_eq "directory: one line" 1 "$(wc -l <"$err" | tr -d ' ')"
rx_assert_grep "directory: it says so" 'is a directory; guarding goes on' "$err"
rx_assert_eq "directory: left alone" "" "$(ls -A "$RX_TMP/adir")"
rx_shim "${guard[@]}" RESILIX_STATE_FILE="$RX_TMP/nodir/state" \
	"$CLIENT" --port "$GOOD" --requests 1 >>"$out" 2>"$err"
rx_assert_eq "missing directory: one line" 1 "$(wc -l <"$err" | tr -d ' ')"
rx_assert_grep "missing directory: it says so" \
	'cannot open .*nodir/state.lock.*ENOENT.*without state' "$err"
rx_assert_eq "both calls went through, guarded" 2 "$(grep -c ' 200 OK 1$' "$out")"
head -c 100 /dev/urandom >"$RX_TMP/disabled.state"
cp "$RX_TMP/disabled.state" "$RX_TMP/disabled.copy"
rx_shim RESILIX_DISABLE=1 RESILIX_STATE_FILE="$RX_TMP/disabled.state" \
	"$CLIENT" --port "$GOOD" --requests 1 >/dev/null 2>"$err"
rx_assert_eq "RESILIX_DISABLE: silent" "" "$(cat "$err")"
cmp -s "$RX_TMP/disabled.state" "$RX_TMP/disabled.copy" ||
	rx_fail "RESILIX_DISABLE: the state file was touched"
rx_log "ok: RESILIX_DISABLE: the state file was not touched"

# A relative name is the start-up directory's.
mkdir "$RX_TMP/rel"
(cd "$RX_TMP/rel" && rx_shim "${guard[@]}" RESILIX_STATE_FILE=rel.state \
	"$CLIENT" --port "$GOOD" --requests 1 >/dev/null 2>"$err")
rx_assert_eq "relative name: written where the program started" RXSN \
	"$(head -c 4 "$RX_TMP/rel/rel.state")"

# A lock held elsewhere (a process stopped in a debugger) costs at most
# about 200 ms at start and at exit, with a warning each, never a hang.
if command -v flock >/dev/null 2>&1; then
	: >"$err"
	timeout 10 flock -o "$good_state.lock" sleep 3 &
	holder=$!
	sleep 0.2
	t0=$(rx_now_ms)
	rx_shim "${guard[@]}" RESILIX_STATE_FILE="$good_state" \
		"$CLIENT" --port "$GOOD" --requests 1 >"$RX_TMP/held.out" 2>"$err"
	t1=$(rx_now_ms)
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	rx_assert_le "held lock: the process took (ms)" $((t1 - t0)) 1500
	rx_assert_eq "held lock: warnings (start, exit)" 2 \
		"$(grep -c 'event=state-lock-timeout' "$err")"
	rx_assert_grep "held lock: the call went through" ' 200 OK 1$' \
		"$RX_TMP/held.out"
	rx_assert_eq "held lock: the file is still a snapshot" RXSN \
		"$(head -c 4 "$good_state")"
fi

# No fd of ours stays open in the host after start-up.
fds=$(rx_shim RESILIX_STATE_FILE="$good_state" ls -l /proc/self/fd/ 2>&1)
rx_assert_eq "fds on the state or lock file after start-up" 0 \
	"$(echo "$fds" | grep -c "$good_state")"

# --- 5. eight processes at once -----------------------------------------------
state=$RX_TMP/par.state
out=$RX_TMP/par.out err=$RX_TMP/par.err
: >"$err"
PORT=$(rx_free_port)
for round in 1 2 3; do
	at_once parallel "$state" guard $(printf "$PORT %.0s" 1 2 3 4 5 6 7 8)
	rx_assert_eq "parallel round $round: the file is a snapshot" RXSN \
		"$(head -c 4 "$state")"
done
rx_assert_no_grep "parallel: no state warning" 'event=state-' "$err"
rx_assert_eq "parallel: no temporary file left" "" \
	"$(ls -A "$RX_TMP" | grep '^par\.state\.tmp')"
grep -aq "127.0.0.1:$PORT" "$state" || rx_fail "parallel: the key is not in the file"
: >"$err"
one client "$state" "$PORT"
rx_assert_no_grep "parallel: the next process reads it silently" \
	'event=state-|level=warn' "$err"

# Eight processes at once on eight keys: every key is in the file.
state=$RX_TMP/keys.state
ports=""
for i in $(seq 1 8); do
	ports="$ports $(rx_free_port)"
done
ports=$(echo $ports | tr ' ' '\n' | sort -u) # the same port twice: one key
at_once keys "$state" guard $ports
n=0
for p in $ports; do
	grep -aq "127.0.0.1:$p" "$state" && n=$((n + 1))
done
rx_assert_eq "merge: keys of 8 overlapping processes kept" \
	"$(echo "$ports" | wc -l | tr -d ' ')" "$n"
# A process whose RESILIX_MAX_KEYS is smaller than the file's key count
# drops the rest of them; it says so (ADR-227).
rx_shim "${guard[@]}" RESILIX_MAX_KEYS=2 RESILIX_STATE_FILE="$state" "$CLIENT" \
	--port "$(echo "$ports" | head -n1)" --requests 1 >/dev/null 2>"$RX_TMP/few.err"
rx_assert_eq "fewer keys: one warning, with the counts" 1 \
	"$(grep -c "event=state-keys-dropped keys_in_file=$n max_keys=2" "$RX_TMP/few.err")"

# Eight processes at once, each failing once on one dead key: their
# failures add up (ADR-221), so with a backstop of 9 the next process's
# failure trips the breaker and the one after it is refused at once.
# (Before, one view won the merge: the file kept one or two failures.)
state=$RX_TMP/sum.state
out=$RX_TMP/sum.out err=$RX_TMP/sum.err
: >"$out"
: >"$err"
rx_dump_on_fail "$out" "$err"
PORT=$(rx_free_port)
sum=(RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=9 RESILIX_MIN_CALLS=100
	RESILIX_WINDOW_CALLS=200 RESILIX_WINDOW_MAX_AGE_MS=60000
	RESILIX_OPEN_MS=60000)
at_once sum "$state" sum $(printf "$PORT %.0s" 1 2 3 4 5 6 7 8)
rx_assert_eq "sum: eight failures, no trip yet" 0 "$(rx_count_to open "$err")"
rx_shim "${sum[@]}" RESILIX_STATE_FILE="$state" "$CLIENT" --port "$PORT" \
	--requests 1 >>"$out" 2>>"$err"
rx_assert_eq "sum: the ninth failure trips the backstop" 1 \
	"$(rx_count_to open "$err")"
rx_shim "${sum[@]}" RESILIX_STATE_FILE="$state" "$CLIENT" --port "$PORT" \
	--requests 1 >>"$out" 2>>"$err"
line=$(tail -n 1 "$out")
failed_fast client "$line" || rx_fail "sum: the tenth call was not refused: $line"

# A long-lived process (two calls 1.5 s apart) overlaps three short ones
# that trip its key; its exit must not put back its closed view.
state=$RX_TMP/long.state
out=$RX_TMP/long.out err=$RX_TMP/long.err
: >"$out"
: >"$err"
rx_dump_on_fail "$out" "$err"
PORT=$(rx_free_port)
long=(RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=$BACKSTOP
	RESILIX_MIN_CALLS=100 RESILIX_OPEN_MS=10000)
rx_shim "${long[@]}" RESILIX_STATE_FILE="$state" "$CLIENT" --port "$PORT" \
	--requests 2 --interval-ms 1500 >"$RX_TMP/long.proc" 2>>"$err" &
lpid=$!
sleep 0.3
for i in $(seq 1 $BACKSTOP); do
	rx_shim "${long[@]}" RESILIX_STATE_FILE="$state" "$CLIENT" \
		--port "$PORT" --requests 1 >>"$out" 2>>"$err"
done
rx_assert_eq "merge: the short processes tripped" 1 "$(rx_count_to open "$err")"
wait "$lpid" || rx_fail "merge: the long process failed"
rx_assert_eq "merge: the long process made both calls, untripped" 2 \
	"$(grep -c ' ECONNREFUSED 0$' "$RX_TMP/long.proc")"
rx_upstream_start long --port "$PORT" --phases 0:ok:0
rx_shim "${long[@]}" RESILIX_STATE_FILE="$state" "$CLIENT" --port "$PORT" \
	--requests 1 >>"$out" 2>>"$err"
line=$(tail -n 1 "$out")
failed_fast client "$line" ||
	rx_fail "merge: the circuit was closed by the long process's exit: $line"
rx_assert_eq "merge: connections accepted while open" 0 "$(rx_accepts long)"

# A daemon: the process that started the shim forks and exits at once,
# having made no call; its child makes two failing calls and exits later.
# The child writes the file (ADR-222), so the next process's failure
# reaches the backstop of 3. Before, only the process that started the
# shim wrote, and the daemon's calls were lost.
if rx_usable python3; then
	state=$RX_TMP/daemon.state
	out=$RX_TMP/daemon.out err=$RX_TMP/daemon.err
	: >"$out"
	: >"$err"
	rx_dump_on_fail "$out" "$err"
	PORT=$(rx_free_port)
	daemonpy='import os, socket, sys, time
if os.fork():
    sys.exit(0)
for i in range(2):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2).close()
    except OSError:
        pass
time.sleep(0.3)  # a daemon outlives the process that started it
open(sys.argv[2], "w").write("done\n")'
	rx_shim "${guard[@]}" RESILIX_STATE_FILE="$state" python3 -c "$daemonpy" \
		"$PORT" "$RX_TMP/daemon.done" 2>>"$err" || rx_fail "daemon: exit status $?"
	rx_wait_for 10 test -s "$RX_TMP/daemon.done" || rx_fail "daemon: the child did not finish"
	rx_wait_for 5 test -s "$state" || rx_fail "daemon: no state file written"
	one client "$state" "$PORT" || rx_fail "daemon: the next process failed"
	rx_assert_eq "daemon: the child's two failures were kept" 1 \
		"$(rx_count_to open "$err")"
fi
rx_pass
