#!/bin/bash
# db_servers.sh - the database servers the protocol modules' integration
# tests will drive start, answer and stop without leaving a process
# behind, without the shim.
#
# A temporary PostgreSQL cluster (tests/support/pg_cluster.sh, plaintext
# and then with ssl = on) answers `psql -c 'select 1'`, also over TLS with
# sslmode=require; a temporary redis-server (tests/support/redis_server.sh)
# answers `redis-cli ping`. After each stop, no process of it is left and
# its temp dir is gone. Last, a shell that started both is killed with
# SIGKILL, which runs no trap: the watchdogs must stop both servers.
. "$(dirname "$0")/lib.sh"
. "$RESILIX_SRCDIR/tests/support/pg_cluster.sh"
. "$RESILIX_SRCDIR/tests/support/redis_server.sh"
rx_need psql redis-server redis-cli python3 openssl timeout
rx_pg_need

# gone PID DIR WHAT: PID is dead, no process runs from DIR, DIR is gone.
# (within 10 s: a watchdog polls twice a second, then stops the server).
gone() {
	local i
	for i in $(seq 1 200); do
		if ! kill -0 "$1" 2>/dev/null && ! pgrep -f "$2" >/dev/null &&
			[ ! -e "$2" ]; then
			rx_log "ok: $3 stopped, nothing left"
			return 0
		fi
		sleep 0.05
	done
	kill -0 "$1" 2>/dev/null && rx_fail "$3: process $1 is still running"
	# A backend or pg_ctl would name the dir in its command line.
	pgrep -f "$2" >/dev/null && rx_fail "$3: left behind: $(pgrep -af "$2")"
	rx_fail "$3: $2 was not removed"
}

for mode in plain ssl; do
	if [ $mode = ssl ]; then
		rx_pg_start --ssl || rx_fail "PostgreSQL (ssl) did not start"
		sslmode=require
	else
		rx_pg_start || rx_fail "PostgreSQL did not start"
		sslmode=disable
	fi
	pid=$RX_PG_PID dir=$RX_PG_DIR
	rx_dump_on_fail "$dir/log"
	got=$(rx_plain psql "host=127.0.0.1 port=$RX_PG_PORT user=postgres \
dbname=postgres sslmode=$sslmode" -Atc 'select 1' 2>&1)
	rx_assert_eq "psql select 1 ($mode)" 1 "$got"
	rx_pg_stop
	gone "$pid" "$dir" "PostgreSQL ($mode)"
done

rx_redis_start || rx_fail "redis-server did not start"
pid=$RX_REDIS_PID dir=$RX_REDIS_DIR
got=$(rx_plain redis-cli -h 127.0.0.1 -p "$RX_REDIS_PORT" ping 2>&1)
rx_assert_eq "redis-cli ping" PONG "$got"
rx_redis_stop
gone "$pid" "$dir" "redis-server"

# Killed without its traps: the watchdogs clean up.
info=$RX_TMP/killed.info
rx_plain bash -c '. "$1/tests/support/pg_cluster.sh"
. "$1/tests/support/redis_server.sh"
rx_pg_start && rx_redis_start &&
	echo "$RX_PG_PID $RX_PG_DIR $RX_REDIS_PID $RX_REDIS_DIR" >"$2"
kill -KILL $$' killed "$RESILIX_SRCDIR" "$info" >/dev/null 2>&1
read -r pgpid pgdir rpid rdir <"$info" || rx_fail "the killed shell started nothing"
gone "$pgpid" "$pgdir" "PostgreSQL of a killed shell"
gone "$rpid" "$rdir" "redis-server of a killed shell"

rx_pass
