# redis_server.sh - a temporary redis-server on 127.0.0.1 for tests.
#
# Sourced (bash) by a test, with or without tests/preload/lib.sh:
#     . "$RESILIX_SRCDIR/tests/support/redis_server.sh"
#     rx_redis_start [REDIS-SERVER OPTION...]   # e.g. --requirepass pw
#     redis-cli -h 127.0.0.1 -p "$RX_REDIS_PORT" ping
#     rx_redis_stop
# rx_redis_start sets RX_REDIS_PORT, RX_REDIS_DIR (its temp dir: log,
# working dir) and RX_REDIS_PID. Several servers (a replica, say) are
# started one after another; rx_redis_stop stops the last one started,
# rx_redis_stop_all (run at exit) every one. Or run it:
# `redis_server.sh start [options]` prints "PORT DIR" and leaves the server
# running until `redis_server.sh stop DIR` or until the process that ran
# it exits.
#
# The server: bound to 127.0.0.1 on a free port, no persistence
# (--save '' --appendonly no), no daemonizing, its files in the temp dir.
# Options are passed to redis-server after ours, so they win.
#
# Never leaves a process behind: the start waits at most RX_REDIS_WAIT_S
# (10 s) for the server to answer; the stop is SIGTERM, then SIGKILL by
# pid after 5 s; an EXIT trap stops every server (chained before any EXIT
# trap already set, such as lib.sh's); a watchdog detached by setsid
# kills a server whose owning shell died without running its traps
# (SIGKILL), or after RX_REDIS_MAX_S (600 s). Needs redis-server and
# redis-cli (Debian's redis-server and redis-tools) and python3 (to find
# a free port).

if [ -z "${BASH_VERSION:-}" ]; then
	echo "redis_server.sh: needs bash" >&2
	exit 2
fi

RX__REDIS_DIRS=${RX__REDIS_DIRS:-}

rx__redis_free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

rx__redis_chain_trap() {
	local prev
	[ -n "${RX__REDIS_TRAPPED:-}" ] && return 0
	RX__REDIS_TRAPPED=1
	prev=$(trap -p EXIT | sed -n "s/^trap -- '\(.*\)' EXIT\$/\1/p")
	# shellcheck disable=SC2064
	trap "rx_redis_stop_all; ${prev:-:}" EXIT
}

# rx__redis_watchdog OWNER_PID: kill the server once OWNER_PID is gone or
# RX_REDIS_MAX_S passed; exit when the server is gone.
rx__redis_watchdog() {
	RX_REDIS_OWNER=$1 RX_REDIS_MAX_S=${RX_REDIS_MAX_S:-600} \
		RX_REDIS_PID=$RX_REDIS_PID RX_REDIS_DIR=$RX_REDIS_DIR \
		setsid bash -c '
		end=$((SECONDS + RX_REDIS_MAX_S))
		while kill -0 "$RX_REDIS_OWNER" 2>/dev/null &&
			kill -0 "$RX_REDIS_PID" 2>/dev/null && [ $SECONDS -lt $end ]; do
			sleep 0.5
		done
		kill -0 "$RX_REDIS_PID" 2>/dev/null || exit 0
		kill -TERM "$RX_REDIS_PID" 2>/dev/null
		for i in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$RX_REDIS_PID" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$RX_REDIS_PID" 2>/dev/null
		rm -rf "$RX_REDIS_DIR"
	' </dev/null >/dev/null 2>&1 &
	echo $! >"$RX_REDIS_DIR/watchdog.pid"
}

rx_redis_start() {
	local wait_s=${RX_REDIS_WAIT_S:-10} try port pid end
	command -v redis-server >/dev/null 2>&1 || {
		echo "rx_redis_start: redis-server is not installed" >&2
		return 1
	}
	RX_REDIS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/resilix-redis.XXXXXX") || return 1
	RX__REDIS_DIRS="$RX__REDIS_DIRS $RX_REDIS_DIR"
	rx__redis_chain_trap
	for try in 1 2 3; do
		port=$(rx__redis_free_port) || return 1
		redis-server --bind 127.0.0.1 --port "$port" --save '' \
			--appendonly no --daemonize no --dir "$RX_REDIS_DIR" \
			--logfile "$RX_REDIS_DIR/log" "$@" </dev/null \
			>"$RX_REDIS_DIR/out" 2>&1 &
		pid=$!
		echo "$pid" >"$RX_REDIS_DIR/pid"
		end=$((SECONDS + wait_s))
		while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do
			# Any answer will do: PONG, or NOAUTH with --requirepass.
			if [ -n "$(timeout 2 redis-cli -h 127.0.0.1 -p "$port" \
				ping 2>/dev/null)" ]; then
				RX_REDIS_PORT=$port
				RX_REDIS_PID=$pid
				rx__redis_watchdog "${RX_REDIS_OWNER_PID:-$$}"
				export RX_REDIS_PORT RX_REDIS_DIR RX_REDIS_PID
				return 0
			fi
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		grep -q 'Address already in use' "$RX_REDIS_DIR/log" \
			"$RX_REDIS_DIR/out" 2>/dev/null || break
	done
	echo "rx_redis_start: the server did not start: $(tail -n 5 \
		"$RX_REDIS_DIR/log" "$RX_REDIS_DIR/out" 2>/dev/null)" >&2
	return 1
}

# rx_redis_stop [DIR]: stop that server (the last started by default):
# SIGTERM, SIGKILL after 5 s; wait for it and its watchdog; remove DIR.
rx_redis_stop() {
	local dir=${1:-${RX_REDIS_DIR:-}} pid wd i
	[ -n "$dir" ] && [ -d "$dir" ] || return 0
	pid=$(cat "$dir/pid" 2>/dev/null)
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	wd=$(cat "$dir/watchdog.pid" 2>/dev/null)
	if [ -n "$wd" ]; then
		kill -TERM "$wd" 2>/dev/null
		wait "$wd" 2>/dev/null
	fi
	rm -rf "$dir"
	[ "$dir" = "${RX_REDIS_DIR:-}" ] && RX_REDIS_DIR=
	return 0
}

rx_redis_stop_all() {
	local d
	for d in $RX__REDIS_DIRS; do
		rx_redis_stop "$d"
	done
	RX__REDIS_DIRS=
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	case ${1:-} in
	start)
		shift
		RX_REDIS_OWNER_PID=$PPID
		RX__REDIS_TRAPPED=1 # the server outlives this script
		rx_redis_start "$@" || exit 1
		echo "$RX_REDIS_PORT $RX_REDIS_DIR"
		;;
	stop)
		rx_redis_stop "${2:?usage: redis_server.sh stop DIR}"
		;;
	*)
		echo "usage: redis_server.sh start [redis-server options] | stop DIR" >&2
		exit 2
		;;
	esac
fi
