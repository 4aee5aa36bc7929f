# pg_cluster.sh - a temporary PostgreSQL cluster on 127.0.0.1 for tests.
#
# Sourced (bash) by a test, with or without tests/preload/lib.sh:
#     . "$RESILIX_SRCDIR/tests/support/pg_cluster.sh"
#     rx_pg_start [--ssl] [--set NAME=VALUE]... [--hba LINE]...
#     psql -h 127.0.0.1 -p "$RX_PG_PORT" -U postgres -d postgres -c ...
#     rx_pg_stop
# rx_pg_start sets RX_PG_PORT, RX_PG_DIR (the cluster's temp dir, which
# holds data/, log, and with --ssl server.crt/server.key) and RX_PG_PID
# (the postmaster). Or run it: `pg_cluster.sh start [options]` prints
# "PORT DIR" and leaves the cluster running until `pg_cluster.sh stop DIR`
# or until the process that ran it exits.
#
# The cluster: initdb as the `postgres` user when run as root (PostgreSQL
# refuses to run as root), trust authentication for 127.0.0.1 and the
# Unix socket in the temp dir (never the system's /var/run/postgresql),
# listen_addresses = 127.0.0.1 on a free port, fsync off. --ssl makes a
# self-signed certificate with openssl and sets ssl = on. --set appends
# a postgresql.conf line; --hba adds a pg_hba.conf line before the trust
# lines (e.g. "host all pwuser 127.0.0.1/32 scram-sha-256").
#
# Never leaves a process behind: every wait is bounded (RX_PG_WAIT_S,
# 30 s), the stop is `pg_ctl stop -m immediate` then SIGKILL by pid, an
# EXIT trap stops the cluster (chained before any EXIT trap already set,
# such as lib.sh's), and a watchdog detached by setsid stops it when the
# owning shell dies without running its traps (SIGKILL) or after
# RX_PG_MAX_S (600 s). Needs: PostgreSQL's server binaries (Debian's
# postgresql package: /usr/lib/postgresql/N/bin), psql, python3 (to find
# a free port), openssl for --ssl, runuser when run as root.

if [ -z "${BASH_VERSION:-}" ]; then
	echo "pg_cluster.sh: needs bash" >&2
	exit 2
fi

# rx_pg_bindir: the newest PostgreSQL server bin dir, or $RX_PG_BIN.
rx_pg_bindir() {
	local d
	if [ -n "${RX_PG_BIN:-}" ]; then
		echo "$RX_PG_BIN"
		return 0
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
			echo "$d"
			return 0
		fi
	done
	d=$(command -v pg_ctl 2>/dev/null) || return 1
	dirname "$d"
}

# rx_pg_as CMD...: CMD as the cluster's owner (postgres when root).
rx_pg_as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

rx__pg_free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# rx__pg_watchdog OWNER_PID: a process detached by setsid that stops the
# cluster once OWNER_PID is gone, the postmaster died, or RX_PG_MAX_S
# passed. Its pid goes to $RX_PG_DIR/watchdog.pid.
rx__pg_watchdog() {
	local owner=$1
	RX_PG_OWNER=$owner RX_PG_MAX_S=${RX_PG_MAX_S:-600} \
		RX_PG_DIR=$RX_PG_DIR RX_PG_PID=$RX_PG_PID RX_PG_BINDIR=$RX_PG_BINDIR \
		RX_PG_ASROOT=$([ "$(id -u)" = 0 ] && echo 1 || echo 0) \
		setsid bash -c '
		end=$((SECONDS + RX_PG_MAX_S))
		while kill -0 "$RX_PG_OWNER" 2>/dev/null &&
			kill -0 "$RX_PG_PID" 2>/dev/null && [ $SECONDS -lt $end ]; do
			sleep 0.5
		done
		# A postmaster gone means rx_pg_stop is at work: it cleans up.
		kill -0 "$RX_PG_PID" 2>/dev/null || exit 0
		if [ "$RX_PG_ASROOT" = 1 ]; then
			timeout 15 runuser -u postgres -- "$RX_PG_BINDIR/pg_ctl" \
				-D "$RX_PG_DIR/data" -m immediate -w -t 10 stop
		else
			timeout 15 "$RX_PG_BINDIR/pg_ctl" -D "$RX_PG_DIR/data" \
				-m immediate -w -t 10 stop
		fi
		kill -KILL "$RX_PG_PID" 2>/dev/null
		rm -rf "$RX_PG_DIR"
	' </dev/null >/dev/null 2>&1 &
	echo $! >"$RX_PG_DIR/watchdog.pid"
}

# rx__pg_chain_trap: run rx_pg_stop at exit, before the EXIT trap already
# set (lib.sh's rx_cleanup), once.
rx__pg_chain_trap() {
	local prev
	[ -n "${RX__PG_TRAPPED:-}" ] && return 0
	RX__PG_TRAPPED=1
	prev=$(trap -p EXIT | sed -n "s/^trap -- '\(.*\)' EXIT\$/\1/p")
	# shellcheck disable=SC2064
	trap "rx_pg_stop; ${prev:-:}" EXIT
}

# rx_pg_need: skip the test, saying why, when no cluster can be run here:
# no server binaries, or root without the postgres user the server must
# run as (and runuser to become it). For tests that source lib.sh.
rx_pg_need() {
	rx_pg_bindir >/dev/null || rx_skip "no PostgreSQL server binaries"
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 ||
			rx_skip "running as root without a postgres user"
		rx_need runuser
	fi
}

rx_pg_start() {
	local ssl=no sets=() hbas=() wait_s=${RX_PG_WAIT_S:-30} try port
	while [ $# -gt 0 ]; do
		case $1 in
		--ssl) ssl=yes ;;
		--set)
			sets+=("$2")
			shift
			;;
		--hba)
			hbas+=("$2")
			shift
			;;
		*)
			echo "rx_pg_start: unknown option '$1'" >&2
			return 2
			;;
		esac
		shift
	done
	RX_PG_BINDIR=$(rx_pg_bindir) || {
		echo "rx_pg_start: no PostgreSQL server binaries" >&2
		return 1
	}
	# Outside the test's own temp dir: that one is private to its owner,
	# and the server runs as postgres.
	RX_PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/resilix-pg.XXXXXX") || return 1
	chmod 0755 "$RX_PG_DIR"
	[ "$(id -u)" = 0 ] && chown postgres: "$RX_PG_DIR"
	rx__pg_chain_trap
	if ! timeout "$wait_s" bash -c "$(declare -f rx_pg_as); rx_pg_as \
		'$RX_PG_BINDIR/initdb' -D '$RX_PG_DIR/data' -U postgres \
		--auth=trust -E UTF8 --locale=C -N" >"$RX_PG_DIR/initdb.log" 2>&1; then
		echo "rx_pg_start: initdb failed: $(tail -n 5 "$RX_PG_DIR/initdb.log")" >&2
		return 1
	fi
	if [ $ssl = yes ]; then
		openssl req -x509 -newkey rsa:2048 -nodes -days 2 \
			-subj /CN=localhost -keyout "$RX_PG_DIR/server.key" \
			-out "$RX_PG_DIR/server.crt" >"$RX_PG_DIR/openssl.log" 2>&1 || {
			echo "rx_pg_start: openssl failed" >&2
			return 1
		}
		chmod 0600 "$RX_PG_DIR/server.key"
		[ "$(id -u)" = 0 ] &&
			chown postgres: "$RX_PG_DIR/server.key" "$RX_PG_DIR/server.crt"
	fi
	{
		[ ${#hbas[@]} -eq 0 ] || printf '%s\n' "${hbas[@]}"
		echo "local all all trust"
		echo "host all all 127.0.0.1/32 trust"
	} >"$RX_PG_DIR/data/pg_hba.conf"
	for try in 1 2 3; do
		port=$(rx__pg_free_port) || return 1
		{
			echo "listen_addresses = '127.0.0.1'"
			echo "port = $port"
			echo "unix_socket_directories = '$RX_PG_DIR'"
			echo "fsync = off"
			echo "logging_collector = off"
			if [ $ssl = yes ]; then
				echo "ssl = on"
				echo "ssl_cert_file = '$RX_PG_DIR/server.crt'"
				echo "ssl_key_file = '$RX_PG_DIR/server.key'"
			else
				echo "ssl = off"
			fi
			[ ${#sets[@]} -eq 0 ] || printf '%s\n' "${sets[@]}"
		} >"$RX_PG_DIR/data/postgresql.auto.conf"
		[ "$(id -u)" = 0 ] && chown postgres: "$RX_PG_DIR/data/postgresql.auto.conf" \
			"$RX_PG_DIR/data/pg_hba.conf"
		if timeout $((wait_s + 5)) bash -c "$(declare -f rx_pg_as); rx_pg_as \
			'$RX_PG_BINDIR/pg_ctl' -D '$RX_PG_DIR/data' -l '$RX_PG_DIR/log' \
			-w -t $wait_s start" >"$RX_PG_DIR/pg_ctl.log" 2>&1; then
			RX_PG_PORT=$port
			RX_PG_PID=$(head -n 1 "$RX_PG_DIR/data/postmaster.pid")
			rx__pg_watchdog "${RX_PG_OWNER_PID:-$$}"
			export RX_PG_PORT RX_PG_DIR RX_PG_PID
			return 0
		fi
		# Another program took the port between the probe and the bind:
		# try another; anything else is reported.
		grep -q 'could not bind\|Address already in use' "$RX_PG_DIR/log" 2>/dev/null ||
			break
	done
	echo "rx_pg_start: the server did not start: $(tail -n 5 "$RX_PG_DIR/log" 2>/dev/null)" >&2
	return 1
}

# rx_pg_stop [DIR]: stop the cluster (immediate), wait for its postmaster
# and watchdog, remove its dir. Harmless when nothing runs.
rx_pg_stop() {
	local dir=${1:-${RX_PG_DIR:-}} pid wd i
	[ -n "$dir" ] && [ -d "$dir" ] || return 0
	pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null) || true
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		timeout 15 bash -c "$(declare -f rx_pg_as); rx_pg_as \
			'$(rx_pg_bindir)/pg_ctl' -D '$dir/data' -m immediate -w -t 10 \
			stop" >/dev/null 2>&1
		for i in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wd=$(cat "$dir/watchdog.pid" 2>/dev/null) || true
	if [ -n "$wd" ]; then
		kill -TERM "$wd" 2>/dev/null || true
		wait "$wd" 2>/dev/null || true
	fi
	rm -rf "$dir"
	[ "$dir" = "${RX_PG_DIR:-}" ] && RX_PG_DIR=
	return 0
}

# As a program: start (prints "PORT DIR"; the cluster lives as long as
# the calling process) or stop DIR.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	case ${1:-} in
	start)
		shift
		RX_PG_OWNER_PID=$PPID
		RX__PG_TRAPPED=1 # the cluster outlives this script
		rx_pg_start "$@" || exit 1
		echo "$RX_PG_PORT $RX_PG_DIR"
		;;
	stop)
		rx_pg_stop "${2:?usage: pg_cluster.sh stop DIR}"
		;;
	*)
		echo "usage: pg_cluster.sh start [--ssl] [--set N=V]... [--hba LINE]... | stop DIR" >&2
		exit 2
		;;
	esac
fi
