# lib.sh - helpers for the shim's integration tests (sourced, bash).
#
# Each test is a bash script run by `make check` (SH_LOG_COMPILER) with
# RESILIX_SO, RESILIX_SANITIZE_RUNTIME, RESILIX_BUILDDIR and RESILIX_SRCDIR
# set by AM_TESTS_ENVIRONMENT. Run by hand, the same variables may be set in
# the environment; otherwise they default to the build tree `_build` under
# the source tree, or the current directory when it is a build tree.
#
# Rules the helpers enforce:
# - LD_PRELOAD is set only on the program under test (rx_shim), never on
#   the harness shell, the upstream or the tools that check results.
# - Every program runs under `timeout`; every upstream has --max-seconds.
# - No process outlives its test: at exit every process the test started,
#   and every descendant of those still running, is killed (ADR-345).
# - Traffic goes to 127.0.0.1 only.
# - Exit 77 (skip) only when the machine lacks what a test needs: a tool
#   (rx_need), root or a kernel feature (rx_skip); a missing build product
#   is a failure, not a skip.
#
# Test scripts start with:
#   . "$(dirname "$0")/lib.sh"
# lib.sh re-executes the test with bash when sourced from another shell.

if [ -z "${BASH_VERSION:-}" ]; then
	exec bash "$0" "$@"
fi

set -u

RX_NAME=$(basename "$0" .sh)
RX_TIMEOUT=${RX_TIMEOUT:-20}

: "${RESILIX_SRCDIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
if [ -z "${RESILIX_BUILDDIR:-}" ]; then
	if [ -x "./tests/support/upstream" ]; then
		RESILIX_BUILDDIR=$(pwd)
	else
		RESILIX_BUILDDIR=$RESILIX_SRCDIR/_build
	fi
fi
: "${RESILIX_SO:=$RESILIX_BUILDDIR/.libs/libresilix_preload.so}"
: "${RESILIX_SANITIZE_RUNTIME:=}"
export RESILIX_SRCDIR RESILIX_BUILDDIR RESILIX_SO RESILIX_SANITIZE_RUNTIME

UPSTREAM=$RESILIX_BUILDDIR/tests/support/upstream
CLIENT=$RESILIX_BUILDDIR/tests/support/client

# The harness itself never runs guarded, whatever the caller's environment.
unset LD_PRELOAD
for _v in $(env | sed -n 's/^\(RESILIX_[A-Z_]*\)=.*/\1/p'); do
	case $_v in
	RESILIX_SO | RESILIX_SANITIZE_RUNTIME | RESILIX_SANITIZERS | \
		RESILIX_BUILDDIR | RESILIX_SRCDIR) ;;
	*) unset "$_v" ;;
	esac
done
unset _v

RX_TMP=$(mktemp -d "${TMPDIR:-/tmp}/resilix-$RX_NAME.XXXXXX")
RX_PIDS=""
RX_DUMP=""

# rx_descendants PID: sets RX_DESC to the pids of PID's live descendants
# (children first), read from /proc: no command substitution, whose own
# subshell would count itself, and no procps.
rx_descendants() {
	local f line pid ppid rest i
	local -A kids=()
	RX_DESC=()
	for f in /proc/[0-9]*/stat; do
		read -r line 2>/dev/null <"$f" || continue
		pid=${line%% *}
		# "pid (comm) state ppid ...": comm may hold spaces and ')'.
		rest=${line##*) }
		case $rest in Z* | X*) continue ;; esac
		ppid=${rest#* }
		ppid=${ppid%% *}
		kids[$ppid]="${kids[$ppid]:-} $pid"
	done
	local queue=("$1")
	for ((i = 0; i < ${#queue[@]}; i++)); do
		for pid in ${kids[${queue[i]}]:-}; do
			queue+=("$pid")
			RX_DESC+=("$pid")
		done
	done
}

# rx_kill_tree: TERM every descendant of this test still running - what
# it started in the background and registered (upstreams, servers), and
# what those started, such as the program under a `timeout` that a
# backgrounded helper function runs in a subshell of its own (killing the
# subshell alone left the program running, re-parented to pid 1, ADR-345)
# - then KILL what is left after 2 s.
rx_kill_tree() {
	local pid i
	rx_descendants $$
	[ ${#RX_DESC[@]} -gt 0 ] || return 0
	kill -TERM "${RX_DESC[@]}" 2>/dev/null
	for ((i = 0; i < 40; i++)); do
		rx_descendants $$
		[ ${#RX_DESC[@]} -gt 0 ] || return 0
		sleep 0.05
	done
	kill -KILL "${RX_DESC[@]}" 2>/dev/null
	for pid in "${RX_DESC[@]}"; do
		wait "$pid" 2>/dev/null
	done
	return 0
}

rx_cleanup() {
	local pid
	# The whole tree at once: a process whose parent died first would
	# be re-parented out of reach.
	rx_kill_tree
	for pid in $RX_PIDS; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in $RX_PIDS; do
		wait "$pid" 2>/dev/null
	done
	if [ "${RX_KEEP_TMP:-0}" = 1 ]; then
		echo "# kept $RX_TMP"
	else
		rm -rf "$RX_TMP"
	fi
}
trap rx_cleanup EXIT
trap 'exit 130' INT TERM

rx_log() {
	echo "# $*"
}

# rx_dump_on_fail FILE...: print these files when an assertion fails.
rx_dump_on_fail() {
	RX_DUMP="$RX_DUMP $*"
}

rx_fail() {
	local f
	echo "FAIL: $RX_NAME: $*" >&2
	for f in $RX_DUMP; do
		if [ -s "$f" ]; then
			echo "---- $f (last 60 lines) ----" >&2
			tail -n 60 "$f" >&2
		fi
	done
	exit 1
}

rx_pass() {
	echo "PASS: $RX_NAME${1:+: $1}"
	exit 0
}

# rx_skip REASON: skip (77) the rest of the test, saying why. For what the
# machine lacks (root, a kernel feature), never for a build product.
rx_skip() {
	echo "SKIP: $RX_NAME: $*"
	exit 77
}

# rx_need TOOL...: skip (77) when a tool the test drives is absent.
rx_need() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || rx_skip "'$t' is not installed"
	done
}

# rx_require_build: the shim and the support programs must exist.
rx_require_build() {
	[ -f "$RESILIX_SO" ] || rx_fail "shim not built: $RESILIX_SO"
	[ -x "$UPSTREAM" ] || rx_fail "not built: $UPSTREAM"
	[ -x "$CLIENT" ] || rx_fail "not built: $CLIENT"
	rx_need timeout
}

rx_now_ms() {
	date +%s%3N
}

# rx_upstream_start NAME [upstream options...]: starts an upstream on an
# ephemeral port (unless --port is given) with a time bound, logs in
# $RX_TMP/up.NAME.log (requests) and up.NAME.conn (connections), and
# waits until it listens. Sets RX_PORT and RX_UP_T0 (epoch ms when its
# clock started, +- a few ms). Its files are $RX_TMP/up.NAME.{log,conn,
# port,out,err}; rx_uplog NAME prints the request log's path.
rx_upstream_start() {
	local name=$1
	shift
	rm -f "$RX_TMP/up.$name.port" "$RX_TMP/up.$name.log" "$RX_TMP/up.$name.conn"
	: >"$RX_TMP/up.$name.log"
	: >"$RX_TMP/up.$name.conn"
	local before
	before=$(rx_now_ms)
	"$UPSTREAM" --max-seconds "${RX_UPSTREAM_MAX_S:-60}" \
		--port-file "$RX_TMP/up.$name.port" --log "$RX_TMP/up.$name.log" \
		--conn-log "$RX_TMP/up.$name.conn" "$@" \
		>"$RX_TMP/up.$name.out" 2>"$RX_TMP/up.$name.err" &
	rx_await_port "$name" $! upstream
	RX_UP_T0=$before
	echo "$before" >"$RX_TMP/up.$name.t0"
	rx_dump_on_fail "$RX_TMP/up.$name.log" "$RX_TMP/up.$name.err"
}

# rx_await_port NAME PID WHAT: upstream NAME, started in the background
# as PID, writes its port to $RX_TMP/up.NAME.port; wait for it (10 s at
# most), fail naming WHAT when the process dies or never says, and set
# RX_PORT. The process is killed at exit.
rx_await_port() {
	local name=$1 pid=$2 what=$3 i
	RX_PIDS="$RX_PIDS $pid"
	echo "$pid" >"$RX_TMP/up.$name.pid"
	for i in $(seq 1 200); do
		[ -s "$RX_TMP/up.$name.port" ] && break
		kill -0 "$pid" 2>/dev/null ||
			rx_fail "$what $name did not start: $(cat "$RX_TMP/up.$name.err")"
		sleep 0.05
	done
	[ -s "$RX_TMP/up.$name.port" ] || rx_fail "$what $name: no port after 10 s"
	RX_PORT=$(cat "$RX_TMP/up.$name.port")
}

rx_uplog() {
	echo "$RX_TMP/up.$1.log"
}

rx_upconn() {
	echo "$RX_TMP/up.$1.conn"
}

# rx_upstream_stop NAME: SIGTERM, and wait for it.
rx_upstream_stop() {
	local pid
	pid=$(cat "$RX_TMP/up.$1.pid" 2>/dev/null) || return 0
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rm -f "$RX_TMP/up.$1.pid"
	return 0
}

# rx_free_port: prints a TCP port on 127.0.0.1 that nothing listens on.
rx_free_port() {
	local f=$RX_TMP/free.$$.$RANDOM pid i
	"$UPSTREAM" --phases 0:refuse --max-seconds 2 --port-file "$f" \
		>/dev/null 2>&1 &
	pid=$!
	for i in $(seq 1 100); do
		[ -s "$f" ] && break
		sleep 0.02
	done
	# The only phase is `refuse`: the listener closes at once.
	sleep 0.05
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[ -s "$f" ] || rx_fail "rx_free_port: no port"
	cat "$f"
	rm -f "$f"
}

# rx_count NAME [STATUS]: requests that reached upstream NAME (optionally
# only those answered with STATUS).
rx_count() {
	if [ $# -ge 2 ]; then
		awk -v s="$2" '$4 == s' "$RX_TMP/up.$1.log" | wc -l | tr -d ' '
	else
		wc -l <"$RX_TMP/up.$1.log" | tr -d ' '
	fi
}

# rx_accepts NAME: connections upstream NAME accepted.
rx_accepts() {
	grep -c ' accept ' "$RX_TMP/up.$1.conn" | tr -d ' '
}

# rx_shim [VAR=value...] PROGRAM ARGS...: runs PROGRAM under the shim and
# `timeout` ($RX_TIMEOUT s). LD_PRELOAD is set on that program only.
rx_shim() {
	local asan=() a prog="" opts
	if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
		for a in "$@"; do
			case $a in
			*=*) ;;
			*) prog=$a && break ;;
			esac
		done
		# The runtime is preloaded after the program was linked without
		# it; leak reports are wanted from our own binaries only (an
		# uninstrumented python3 or bash "leaks" its own arenas at exit,
		# which says nothing about the shim).
		opts="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
		case $prog in
		"$RESILIX_BUILDDIR"/*) ;;
		*) opts="$opts:detect_leaks=0" ;;
		esac
		asan=("ASAN_OPTIONS=$opts")
	fi
	timeout -k 2 "$RX_TIMEOUT" env ${asan[@]+"${asan[@]}"} \
		LD_PRELOAD="${RESILIX_SANITIZE_RUNTIME:+$RESILIX_SANITIZE_RUNTIME }$RESILIX_SO" \
		"$@"
}

# rx_usable TOOL: whether TOOL runs with this build's preload. In a
# sanitizer build the sanitizer runtime must be preloaded before the shim,
# and some uninstrumented programs cannot run with it at all (curl deadlocks
# in setlocale() at start-up with GCC 12's libasan preloaded). Such a tool's
# part of a test is skipped with a note; the parts that use our own client
# (built with the sanitizer) still run. Always true in a normal build.
rx_usable() {
	local var=RX_USABLE_$(echo "$1" | tr -c 'A-Za-z0-9\n' _)
	if [ -z "${!var:-}" ]; then
		if [ -z "$RESILIX_SANITIZE_RUNTIME" ]; then
			printf -v "$var" yes
		elif timeout -k 1 5 env \
			ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0:detect_leaks=0" \
			LD_PRELOAD="$RESILIX_SANITIZE_RUNTIME" "$1" --version \
			>/dev/null 2>&1; then
			printf -v "$var" yes
		else
			printf -v "$var" no
			rx_log "NOTE: $1 cannot run with $RESILIX_SANITIZE_RUNTIME" \
				"preloaded; its part of $RX_NAME is skipped in this build"
		fi
	fi
	[ "${!var}" = yes ]
}

# rx_plain PROGRAM ARGS...: the same without the shim (control runs).
rx_plain() {
	timeout -k 2 "$RX_TIMEOUT" "$@"
}

# rx_nginx_dir DIR: make an nginx prefix DIR (logs/, tmp/ that workers,
# which run as another user when nginx starts as root, may write) and
# print the http block's temporary-file directives for it, to be put in
# the test's nginx.conf: "$(rx_nginx_dir "$pre")".
rx_nginx_dir() {
	mkdir -p "$1/logs" "$1/tmp" && chmod 0777 "$1/tmp"
	local t
	for t in client_body:body proxy:proxy fastcgi:fastcgi uwsgi:uwsgi scgi:scgi; do
		printf '\t%s_temp_path %s/tmp/%s;\n' "${t%%:*}" "$1" "${t#*:}"
	done
}

# rx_py_server PORTFILE CODE [ARG...]: a python3 upstream on 127.0.0.1 for
# a server shape the C upstream lacks. CODE defines serve(c), run in a
# thread for each accepted connection (os, socket, struct, sys, threading
# and time are imported; ARGs are sys.argv[2:]). read_request(f), on
# c.makefile('rb'), reads one HTTP/1.x request, its Content-Length body
# included, and returns (method, path), or None at the end of the
# connection. The port goes to PORTFILE, what the server prints to
# PORTFILE.log; it stops 15 s after its last accept. Returns once it
# listens.
rx_py_server() {
	local pf=$1 code=$2
	shift 2
	rx_plain python3 -c "import os, socket, struct, sys, threading, time
def read_request(f):
    line = f.readline()
    if not line:
        return None
    method, path = line.split()[0].decode(), line.split()[1].decode()
    n = 0
    while True:
        h = f.readline()
        if h.lower().startswith(b'content-length:'):
            n = int(h.split(b':')[1])
        if h in (b'\r\n', b'\n', b''):
            break
    if n:
        f.read(n)
    return method, path
$code
s = socket.socket()
s.bind(('127.0.0.1', 0))
s.listen(64)
s.settimeout(15)
open(sys.argv[1] + '.tmp', 'w').write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + '.tmp', sys.argv[1])
try:
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
except socket.timeout:
    pass" "$pf" "$@" >"$pf.log" 2>&1 &
	RX_PIDS="$RX_PIDS $!"
	rx_wait_for 5 test -s "$pf" || rx_fail "python server did not start ($pf)"
}

# rx_wait_for SECONDS COMMAND...: polls COMMAND every 50 ms until it
# succeeds; returns 1 when SECONDS pass first.
rx_wait_for() {
	local limit=$1 end
	shift
	end=$(($(rx_now_ms) + limit * 1000))
	while [ "$(rx_now_ms)" -lt "$end" ]; do
		"$@" && return 0
		sleep 0.05
	done
	return 1
}

# Assertions: each prints what was expected and what was seen, then the
# files registered with rx_dump_on_fail, and exits 1.
rx_assert_eq() { # DESCRIPTION EXPECTED GOT
	[ "$2" = "$3" ] || rx_fail "$1: expected '$2', got '$3'"
	rx_log "ok: $1 = $3"
}

rx_assert_ge() { # DESCRIPTION GOT MIN
	[ "$2" -ge "$3" ] || rx_fail "$1: expected >= $3, got $2"
	rx_log "ok: $1 = $2 (>= $3)"
}

rx_assert_le() { # DESCRIPTION GOT MAX
	[ "$2" -le "$3" ] || rx_fail "$1: expected <= $3, got $2"
	rx_log "ok: $1 = $2 (<= $3)"
}

rx_assert_between() { # DESCRIPTION GOT MIN MAX
	[ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ||
		rx_fail "$1: expected in [$3, $4], got $2"
	rx_log "ok: $1 = $2 (in [$3, $4])"
}

rx_assert_grep() { # DESCRIPTION REGEX FILE
	grep -Eq -- "$2" "$3" || rx_fail "$1: no line matches /$2/ in $3"
	rx_log "ok: $1"
}

rx_assert_no_grep() { # DESCRIPTION REGEX FILE
	if grep -Eq -- "$2" "$3"; then
		rx_fail "$1: unexpected line matching /$2/: $(grep -E -m1 -- "$2" "$3")"
	fi
	rx_log "ok: $1"
}

# rx_verdicts FILE: the calls a metrics file counts per verdict, summed
# over its keys: "success answered overload transient timeout rejected".
rx_verdicts() {
	local v out=""
	for v in success answered overload transient timeout rejected; do
		out="$out $(sed -n "s/^resilix_calls_total{.*verdict=\"$v\"} //p" "$1" |
			awk '{ s += $1 } END { print s + 0 }')"
	done
	echo $out
}

# rx_transitions FILE: the breaker transitions logged by the shim, one
# "from>to" per line, in order.
rx_transitions() {
	grep 'event=breaker-transition' "$1" 2>/dev/null |
		sed -n 's/.*from=\([a-z_-]*\).* to=\([a-z_-]*\).*/\1>\2/p'
}

# rx_count_to STATE FILE: how many transitions to STATE the shim logged.
rx_count_to() {
	grep 'event=breaker-transition' "$2" 2>/dev/null |
		grep -c " to=$1\\b" | tr -d ' '
}

# rx_queuewait_start: the set-up of the tests that drive
# tests/support/queuewait: an upstream answering in 3 s (RX_PORT) and a
# limit of 1 with a queue timeout of 1500 ms, so that the program's
# second call, its first thread holding the slot, would queue.
rx_queuewait_start() {
	RX_QW=$RESILIX_BUILDDIR/tests/support/queuewait
	[ -x "$RX_QW" ] || rx_fail "not built: $RX_QW"
	rx_upstream_start slow --phases 0:slow:3000
}

# rx_queuewait MODE: "<rc> <errno> <elapsed ms> <alarms>" of that second
# call in MODE (queuewait.c); its output and log in $RX_TMP/MODE.{out,err}.
rx_queuewait() {
	local out=$RX_TMP/$1.out err=$RX_TMP/$1.err
	RX_TIMEOUT=15 rx_shim RESILIX_LIMIT_INITIAL=1 RESILIX_LIMIT_MIN=1 \
		RESILIX_LIMIT_MAX=1 RESILIX_QUEUE_TIMEOUT_MS=1500 \
		RESILIX_LOG=debug "$RX_QW" "$RX_PORT" "$1" >"$out" 2>"$err" ||
		rx_fail "$1: exit status $?"
	cat "$out"
}

# rx_run_setup: the set-up of the tests of scripts/resilix-run (RUN): the
# shim named by RESILIX_SO, and in a sanitizer build its runtime preloaded
# with leak reports off - the programs there (bash, readelf, od, true)
# are not ours; appended, so an ASAN_OPTIONS from scripts/test cannot
# undo it. The wrapper keeps the runtime first (ADR-200). Works in RX_TMP.
rx_run_setup() {
	RUN=$RESILIX_SRCDIR/scripts/resilix-run
	[ -f "$RESILIX_SO" ] || rx_fail "shim not built: $RESILIX_SO"
	export RESILIX_SO
	if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
		export LD_PRELOAD=$RESILIX_SANITIZE_RUNTIME
		export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	fi
	cd "$RX_TMP" || rx_fail "no temp dir"
}
