#!/bin/bash
# db_pg_cancel.sh - a query the program cancels itself is the program
# giving the call up, not a timeout of the database (ADR-676).
#
# Against a healthy temporary cluster:
# - python3 with psycopg2 cancels 8 `select pg_sleep(3)` with conn.cancel()
#   from a timer thread (libpq's PQcancel: a CancelRequest on a new
#   connection naming the session's backend), then runs one more query.
# - an interactive psql on a pty gets ^C during 6 `select pg_sleep(3)`:
#   its SIGINT handler sends the CancelRequest, then one more query.
# Each cancel's 57014 settles without evidence (at=cancelled): no breaker
# transition, no refusal, no timeout verdict, the last query answered and
# the program's exit status 0 - unless the query had run past
# RESILIX_SLOW_CALL_MS, as for any abandonment: then a timeout. As timeouts (ADR-402 alone) the fifth
# opened the circuit on the backstop and the next query was refused:
# psycopg2 "server closed the connection unexpectedly", psql exit 2.
# - A cancel from another session (pg_cancel_backend, as an operator
#   would) gives the same 57014 and cannot be told from a statement
#   timeout: it is still a timeout (docs/limits.md), 2 of them here.
. "$(dirname "$0")/lib.sh"
. "$RESILIX_SRCDIR/tests/support/pg_cluster.sh"
rx_need psql python3 timeout
rx_require_build
rx_pg_need
rx_usable psql || rx_skip "psql cannot run in this build"
RX_TIMEOUT=60

rx_pg_start || rx_fail "PostgreSQL did not start"
rx_dump_on_fail "$RX_PG_DIR/log"
dsn="host=127.0.0.1 port=$RX_PG_PORT user=postgres dbname=postgres sslmode=disable"
guard=(RESILIX_LOG=debug RESILIX_CONSECUTIVE_BACKSTOP=5 RESILIX_OPEN_MS=30000)
# calm LABEL ERRFILE: no transition, no refusal, no timeout settled.
calm() {
	rx_assert_eq "$1: breaker transitions" "" "$(rx_transitions "$2")"
	rx_assert_eq "$1: refusals" 0 "$(grep -c 'event=refused' "$2")"
	rx_assert_eq "$1: timeouts settled" 0 \
		"$(grep -c 'event=settle verdict=timeout' "$2")"
}

# --- psycopg2: conn.cancel() from a thread, 8 times ----------------------
if /usr/bin/python3 -c 'import psycopg2' 2>/dev/null && rx_usable /usr/bin/python3; then
	cat >"$RX_TMP/cancel.py" <<'PYEOF'
import psycopg2, sys, threading
conn = psycopg2.connect(sys.argv[1])
conn.autocommit = True
cancelled = 0
for i in range(int(sys.argv[2])):
    t = threading.Timer(0.4, conn.cancel)
    t.start()
    try:
        conn.cursor().execute("select pg_sleep(3)")
    except psycopg2.errors.QueryCanceled:
        cancelled += 1
    t.join()
cur = conn.cursor()
cur.execute("select 'after cancels'")
print("cancelled", cancelled, cur.fetchone()[0])
PYEOF
	out=$RX_TMP/py.out err=$RX_TMP/py.err m=$RX_TMP/py.prom
	rx_dump_on_fail "$out" "$err"
	rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$m" /usr/bin/python3 \
		"$RX_TMP/cancel.py" "$dsn" 8 >"$out" 2>"$err"
	rx_assert_eq "python3 exit status" 0 "$?"
	rx_assert_eq "what the program saw" "cancelled 8 after cancels" "$(cat "$out")"
	calm psycopg2 "$err"
	rx_assert_eq "psycopg2: cancelled queries settled as abandoned" 8 \
		"$(grep -c 'event=settle verdict=rejected .*at=cancelled' "$err")"
	rx_assert_eq "psycopg2: verdicts (success answered overload transient timeout rejected)" \
		"2 0 0 0 0 16" "$(rx_verdicts "$m")"
	rx_log "psycopg2: 8 cancels, no evidence, the last query answered"
	# Past the slow threshold, an abandonment is a timeout (ADR-193).
	err=$RX_TMP/slow.err
	rx_dump_on_fail "$err"
	rx_shim "${guard[@]}" RESILIX_SLOW_CALL_MS=200 /usr/bin/python3 \
		"$RX_TMP/cancel.py" "$dsn" 2 >"$RX_TMP/slow.out" 2>"$err"
	rx_assert_eq "python3 exit status (slow threshold)" 0 "$?"
	rx_assert_eq "cancels after the slow threshold: timeouts" 2 \
		"$(grep -c 'event=settle verdict=timeout .*at=cancelled' "$err")"
else
	rx_log "NOTE: no usable python3-psycopg2: its part is skipped"
fi

# --- psql on a pty, ^C 6 times ------------------------------------------
out=$RX_TMP/psql.out err=$RX_TMP/psql.log
rx_dump_on_fail "$out" "$err"
rx_plain python3 "$RESILIX_SRCDIR/tests/support/pty_psql.py" --cancels 6 \
	--out "$out" -- env LD_PRELOAD="$RESILIX_SO" "${guard[@]}" \
	RESILIX_LOG_FILE="$err" psql -X -n -P pager=off "$dsn application_name=victim"
rx_assert_eq "psql exit status" 0 "$?"
rx_assert_eq "psql: cancels it reported" 6 \
	"$(grep -c 'canceling statement due to user request' "$out")"
rx_assert_grep "psql: the last query was answered" '^ after cancels' "$out"
calm psql "$err"
rx_assert_eq "psql: cancelled queries settled as abandoned" 6 \
	"$(grep -c 'event=settle verdict=rejected .*at=cancelled' "$err")"
rx_log "psql: 6 ^C, no evidence, the last query answered"

# --- another session's cancel: still a timeout ---------------------------
err=$RX_TMP/op.err m=$RX_TMP/op.prom
rx_dump_on_fail "$err"
(
	for i in 1 2; do
		sleep 0.6
		psql -X -At "$dsn" -c "select count(pg_cancel_backend(pid)) from
			pg_stat_activity where application_name = 'operated'
			and state = 'active'" >/dev/null 2>&1
		sleep 0.4
	done
) &
opr=$!
( for i in 1 2; do echo "select pg_sleep(3);"; sleep 1; done
  echo "select 'after';" ) |
	rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$m" \
		psql -X -At "$dsn application_name=operated" >"$RX_TMP/op.out" 2>"$err"
rx_assert_eq "psql exit status (operator cancels)" 0 "$?"
wait "$opr"
rx_assert_eq "operator cancels psql reported" 2 \
	"$(grep -c 'canceling statement due to user request' "$err")"
rx_assert_eq "operator cancels: timeouts, as a statement timeout's" 2 \
	"$(grep -c 'event=settle verdict=timeout .*at=first-byte' "$err")"
rx_log "another session's cancels: 2 timeouts (documented)"
