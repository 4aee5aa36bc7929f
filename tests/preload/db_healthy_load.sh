#!/bin/bash
# db_healthy_load.sh - healthy database load under the shim at its
# defaults is never refused, and a FATAL at start-up judges the connect's
# call (ADR-409).
#
# - pgbench -n -S (select-only, 4 clients, 2 s) against a temporary
#   cluster: every transaction succeeds, no call refused, every settled
#   call a success (metrics).
# - redis-benchmark (SET and GET, 4 clients, 2 s of requests) against a
#   temporary redis-server: no error, no call refused, every call a
#   success.
# - max_connections = 3 with no reserved slot: while three sessions are
#   held open, a fourth psql's start-up gets the server's real FATAL
#   53300 (too_many_connections): its connect's call is an overload.
. "$(dirname "$0")/lib.sh"
. "$RESILIX_SRCDIR/tests/support/pg_cluster.sh"
. "$RESILIX_SRCDIR/tests/support/redis_server.sh"
rx_need psql pgbench redis-server redis-cli redis-benchmark python3 timeout
rx_require_build
rx_pg_need
RX_TIMEOUT=30
refusals() { # FILE: refusals of every key and reason
	sed -n 's/^resilix_refusals_total{.*} //p' "$1" |
		awk '{ s += $1 } END { print s + 0 }'
}

# --- pgbench ------------------------------------------------------------
rx_pg_start --set max_connections=8 --set superuser_reserved_connections=0 ||
	rx_fail "PostgreSQL did not start"
rx_dump_on_fail "$RX_PG_DIR/log"
export PGHOST=127.0.0.1 PGPORT=$RX_PG_PORT PGUSER=postgres PGDATABASE=postgres \
	PGSSLMODE=disable
rx_plain pgbench -i -q -s 1 >/dev/null 2>&1 || rx_fail "pgbench -i failed"
# pgbench_runs: pgbench can run here with the sanitizer runtime alone
# preloaded (in a sanitizer build: GCC 12's libasan makes it hang at its
# first transaction, without the shim).
pgbench_runs() {
	[ -z "$RESILIX_SANITIZE_RUNTIME" ] && return 0
	timeout -k 1 10 env LD_PRELOAD="$RESILIX_SANITIZE_RUNTIME" \
		ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 \
		pgbench -n -S -t 1 >/dev/null 2>&1
}
if ! pgbench_runs; then
	rx_log "NOTE: pgbench cannot run with $RESILIX_SANITIZE_RUNTIME" \
		"preloaded; its part of $RX_NAME is skipped in this build"
else
m=$RX_TMP/pgbench.prom err=$RX_TMP/pgbench.err
rx_dump_on_fail "$err"
rx_shim RESILIX_LOG=info RESILIX_METRICS_FILE="$m" \
	pgbench -n -S -c 4 -j 2 -T 2 >"$RX_TMP/pgbench.out" 2>"$err"
rx_assert_eq "pgbench exit status" 0 "$?"
rx_dump_on_fail "$RX_TMP/pgbench.out"
tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' \
	"$RX_TMP/pgbench.out")
rx_assert_ge "pgbench transactions" "${tx:-0}" 100
rx_assert_eq "pgbench failed transactions" 0 \
	"$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$RX_TMP/pgbench.out")"
rx_assert_eq "calls refused under pgbench" 0 "$(refusals "$m")"
set -- $(rx_verdicts "$m")
rx_assert_ge "successful calls (queries and start-ups)" "$1" "$tx"
rx_assert_eq "calls that were not a success" "0 0 0 0 0" "$2 $3 $4 $5 $6"
rx_log "pgbench: $tx transactions, $1 calls, all successes, 0 refused"
fi

# --- a start-up FATAL: 53300 judges the connect's call --------------------
rx_pg_stop
rx_pg_start --set max_connections=3 --set superuser_reserved_connections=0 \
	--set log_statement=all ||
	rx_fail "PostgreSQL (max_connections = 3) did not start"
export PGPORT=$RX_PG_PORT
# The server's log, not a probe, says the three are in: a probe would take
# a slot a session needs.
sleeping() {
	[ "$(grep -c 'statement: select pg_sleep(20)' "$RX_PG_DIR/log")" -ge "$1" ]
}
for i in 1 2 3; do
	rx_plain psql -qc 'select pg_sleep(20)' >/dev/null 2>&1 &
	RX_PIDS="$RX_PIDS $!"
	rx_wait_for 10 sleeping $i || rx_fail "session $i did not start"
done
m=$RX_TMP/fatal.prom err=$RX_TMP/fatal.err
rx_dump_on_fail "$err"
if rx_usable psql; then
	rx_shim RESILIX_LOG=info RESILIX_METRICS_FILE="$m" psql -Atc 'select 1' \
		>"$RX_TMP/fatal.out" 2>"$err"
	rx_assert_eq "psql exit status" 2 "$?"
	rx_assert_grep "the server's FATAL" 'too many clients' "$err"
	rx_assert_eq "verdicts (success answered overload transient timeout rejected)" \
		"0 0 1 0 0 0" "$(rx_verdicts "$m")"
fi
rx_pg_stop
unset PGHOST PGPORT PGUSER PGDATABASE PGSSLMODE

# --- redis-benchmark ----------------------------------------------------
if rx_usable redis-benchmark; then
	rx_redis_start || rx_fail "redis-server did not start"
	rx_dump_on_fail "$RX_REDIS_DIR/log"
	m=$RX_TMP/rb.prom err=$RX_TMP/rb.err
	rx_dump_on_fail "$err"
	rx_shim RESILIX_LOG=info RESILIX_METRICS_FILE="$m" \
		redis-benchmark -h 127.0.0.1 -p "$RX_REDIS_PORT" -c 4 -n 20000 \
		-t set,get -q >"$RX_TMP/rb.out" 2>"$err"
	rx_assert_eq "redis-benchmark exit status" 0 "$?"
	rx_dump_on_fail "$RX_TMP/rb.out"
	rx_assert_grep "redis-benchmark ran SET" 'SET: [0-9.]* requests per second' "$RX_TMP/rb.out"
	rx_assert_grep "redis-benchmark ran GET" 'GET: [0-9.]* requests per second' "$RX_TMP/rb.out"
	rx_assert_eq "calls refused under redis-benchmark" 0 "$(refusals "$m")"
	set -- $(rx_verdicts "$m")
	rx_assert_ge "successful calls" "$1" 40000
	rx_assert_eq "calls that were not a success" "0 0 0 0 0" "$2 $3 $4 $5 $6"
	rx_log "redis-benchmark: $1 calls, all successes, 0 refused"
	rx_redis_stop
fi
rx_pass
