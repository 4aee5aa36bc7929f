#!/bin/bash
# db_pg_verdicts.sh - psql against a real PostgreSQL server (a temporary
# cluster on 127.0.0.1): the SQLSTATE of each answer is the call's verdict
# (ADR-402, ADR-408).
#
# - Over plaintext (sslmode=disable), one psql session running a
#   `RAISE ... USING ERRCODE = '08006'` (connection exception: transient)
#   statement after statement trips the breaker after 5 (the backstop);
#   the 6th is refused before a byte is sent, psql reports the connection
#   lost at once instead of waiting (ADR-411), and a new psql, with the
#   open breaker in the state file, is refused at connect ("Connection
#   refused"). The server's statement log shows exactly 5 DO statements.
# - The same with '23505' (unique_violation: answered) 30 times never
#   trips: 30 answered in the metrics, 30 statements at the server.
# - `SET statement_timeout = 50` then `SELECT pg_sleep(1)` gives the
#   server's real 57014: a timeout in the metrics' verdict counts.
# - Healthy output is identical with and without the shim.
# - With sslmode=require the socket layer sees the SSLRequest and its 'S'
#   (the connect's call, a success); the TLS layer then feeds the module
#   libssl's plaintext, a start-up again (ADR-410): healthy output is
#   identical, and the 08006 session trips through TLS exactly as in the
#   clear - 5 at the server, the 6th refused at its SSL_write, psql's
#   connection lost at once, the next psql refused at connect.
. "$(dirname "$0")/lib.sh"
. "$RESILIX_SRCDIR/tests/support/pg_cluster.sh"
rx_need psql python3 timeout
rx_require_build
rx_pg_need
rx_usable psql || rx_skip "psql cannot run in this build"
RX_TIMEOUT=30

rx_pg_start --ssl --set log_statement=all || rx_fail "PostgreSQL did not start"
rx_dump_on_fail "$RX_PG_DIR/log"
conn() { # SSLMODE: a psql connection string
	echo "host=127.0.0.1 port=$RX_PG_PORT user=postgres dbname=postgres sslmode=$1"
}
# at_server REGEX: statements matching REGEX the server logged so far.
at_server() {
	grep -c "statement: $1" "$RX_PG_DIR/log" | tr -d ' '
}
raise() { # CODE N: N statements raising CODE, one a line
	local i
	for i in $(seq 1 "$2"); do
		echo "DO \$\$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '$1'; END \$\$;"
	done
}
guard=(RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=5 RESILIX_OPEN_MS=30000
	RESILIX_MIN_CALLS=100)

# --- healthy output: identical ------------------------------------------
q="select n, md5(n::text) from generate_series(1, 200) n"
rx_plain psql "$(conn disable)" -Atc "$q" >"$RX_TMP/plain.out" 2>&1
rx_shim RESILIX_LOG=info psql "$(conn disable)" -Atc "$q" \
	>"$RX_TMP/shim.out" 2>"$RX_TMP/shim.err"
rx_assert_eq "psql exit status under the shim" 0 "$?"
cmp -s "$RX_TMP/plain.out" "$RX_TMP/shim.out" ||
	rx_fail "psql output differs under the shim"
rx_assert_eq "healthy rows" 200 "$(wc -l <"$RX_TMP/shim.out" | tr -d ' ')"

# --- 08006 in one session: trips after 5, then refused fast ---------------
raise 08006 10 >"$RX_TMP/08006.sql"
echo "select 'after';" >>"$RX_TMP/08006.sql"
st=$RX_TMP/state m=$RX_TMP/m08006.prom err=$RX_TMP/08006.err
rx_dump_on_fail "$err"
before=$(at_server 'DO')
t0=$(rx_now_ms)
rx_shim "${guard[@]}" RESILIX_LOG=debug RESILIX_STATE_FILE="$st" \
	RESILIX_METRICS_FILE="$m" psql "$(conn disable)" -f "$RX_TMP/08006.sql" >"$RX_TMP/08006.out" 2>"$err"
rc=$?
t1=$(rx_now_ms)
rx_assert_eq "psql lost its connection at the refusal (exit 2)" 2 "$rc"
rx_assert_le "the refused statement did not wait (ms)" $((t1 - t0)) 10000
rx_assert_eq "08006 statements that reached the server" 5 \
	$(($(at_server 'DO') - before))
rx_assert_eq "transitions" "closed>open" "$(rx_transitions "$err")"
rx_assert_grep "tripped by the backstop" 'to=open reason=consecutive' "$err"
rx_assert_grep "the 6th statement was refused at its write" \
	'event=refused reason=circuit-open .*at=write' "$err"
rx_assert_grep "psql saw the connection end" 'connection to server was lost' "$err"
rx_assert_no_grep "the statement after the trip never ran" 'after' "$RX_TMP/08006.out"
rx_assert_eq "verdicts (success answered overload transient timeout rejected)" \
	"1 0 0 5 0 0" "$(rx_verdicts "$m")"
rx_log "08006: 5 at the server, 5 transient, the 6th refused in $((t1 - t0)) ms"
t0=$(rx_now_ms)
rx_shim RESILIX_LOG=info RESILIX_OPEN_MS=30000 RESILIX_STATE_FILE="$st" \
	psql "$(conn disable)" -Atc 'select 1' >"$RX_TMP/next.out" 2>&1
rc=$?
t1=$(rx_now_ms)
rx_assert_eq "the next psql fails (exit 2)" 2 "$rc"
rx_assert_grep "refused at connect" 'Connection refused' "$RX_TMP/next.out"
rx_assert_le "refused fast (ms)" $((t1 - t0)) 5000
rx_assert_eq "no new connection reached the server" 0 \
	"$(grep -c "statement: select 1\$" "$RX_PG_DIR/log" | tr -d ' ')"

# --- 23505 thirty times: answered, never trips ----------------------------
rx_plain psql "$(conn disable)" -qc 'create table u (id int primary key); insert into u values (1)' \
	>/dev/null 2>&1 || rx_fail "could not create the table"
for i in $(seq 1 30); do echo "insert into u values (1);"; done >"$RX_TMP/23505.sql"
m=$RX_TMP/m23505.prom err=$RX_TMP/23505.err
rx_dump_on_fail "$err"
before=$(at_server 'insert into u')
rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$m" \
	psql "$(conn disable)" -f "$RX_TMP/23505.sql" >/dev/null 2>"$err"
rx_assert_eq "psql exit status (errors are the statements')" 0 "$?"
rx_assert_eq "23505 errors psql printed" 30 "$(grep -c 'duplicate key' "$err")"
rx_assert_eq "inserts that reached the server" 30 \
	$(($(at_server 'insert into u') - before))
rx_assert_eq "transitions" "" "$(rx_transitions "$err")"
rx_assert_eq "verdicts (success answered overload transient timeout rejected)" \
	"1 30 0 0 0 0" "$(rx_verdicts "$m")"

# --- a real statement_timeout: 57014 is a timeout -------------------------
m=$RX_TMP/m57014.prom err=$RX_TMP/57014.err
rx_dump_on_fail "$err"
rx_shim RESILIX_LOG=info RESILIX_METRICS_FILE="$m" psql "$(conn disable)" \
	-c 'SET statement_timeout = 50' -c 'SELECT pg_sleep(1)' >/dev/null 2>"$err"
rx_assert_grep "the server cancelled the statement" 'canceling statement due to statement timeout' "$err"
rx_assert_eq "verdicts (success answered overload transient timeout rejected)" \
	"2 0 0 0 1 0" "$(rx_verdicts "$m")"

# --- sslmode=require: not misjudged ---------------------------------------
rx_plain psql "$(conn require)" -Atc "$q" >"$RX_TMP/plain-tls.out" 2>&1
rx_shim RESILIX_LOG=info psql "$(conn require)" -Atc "$q" \
	>"$RX_TMP/shim-tls.out" 2>"$RX_TMP/shim-tls.err"
rx_assert_eq "psql (TLS) exit status under the shim" 0 "$?"
cmp -s "$RX_TMP/plain-tls.out" "$RX_TMP/shim-tls.out" ||
	rx_fail "psql (TLS) output differs under the shim"
st=$RX_TMP/state-tls m=$RX_TMP/mtls.prom err=$RX_TMP/tls.err
rx_dump_on_fail "$err"
before=$(at_server 'DO')
rx_shim "${guard[@]}" RESILIX_LOG=debug RESILIX_STATE_FILE="$st" \
	RESILIX_METRICS_FILE="$m" psql "$(conn require)" -f "$RX_TMP/08006.sql" \
	>"$RX_TMP/tls.out" 2>"$err"
rx_assert_eq "psql (TLS) lost its connection at the refusal (exit 2)" 2 "$?"
rx_assert_eq "08006 statements over TLS that reached the server" 5 \
	$(($(at_server 'DO') - before))
rx_assert_eq "transitions (TLS)" "closed>open" "$(rx_transitions "$err")"
rx_assert_grep "the 6th statement over TLS was refused at its write" \
	'event=refused reason=circuit-open .*at=write' "$err"
rx_assert_grep "psql (TLS) saw the connection end" 'connection to server was lost' "$err"
rx_assert_eq "verdicts (TLS: the SSLRequest's S, the start-up, 5 errors)" \
	"2 0 0 5 0 0" "$(rx_verdicts "$m")"
rx_shim RESILIX_LOG=info RESILIX_OPEN_MS=30000 RESILIX_STATE_FILE="$st" \
	psql "$(conn require)" -Atc 'select 1' >"$RX_TMP/next-tls.out" 2>&1
rx_assert_eq "the next psql (TLS) fails (exit 2)" 2 "$?"
rx_assert_grep "refused at connect (TLS)" 'Connection refused' "$RX_TMP/next-tls.out"

rx_pg_stop
rx_pass
