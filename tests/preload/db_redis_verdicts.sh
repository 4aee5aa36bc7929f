#!/bin/bash
# db_redis_verdicts.sh - redis-cli against a real redis-server (temporary,
# 127.0.0.1): the first reply of each command is the call's verdict
# (ADR-405, ADR-408).
#
# - Healthy output is identical with and without the shim.
# - 30 unknown commands (the server's real -ERR) in one session are 30
#   answered calls: nothing trips, all 30 reach the server (redis-cli's
#   own first command, COMMAND DOCS, is the session's one success).
# - `CONFIG SET maxmemory 1` makes every SET a real -OOM: overload, and
#   the limiter lowers its limit at each (the drop's decrease: 20 at
#   start, below 10 after 12), while the breaker stays closed.
# - A killed server: each redis-cli's connect is refused by the kernel
#   (transient); after 5 the breaker opens (the state file carries it
#   from process to process) and the shim refuses the next connects
#   itself, before a packet is sent.
. "$(dirname "$0")/lib.sh"
. "$RESILIX_SRCDIR/tests/support/redis_server.sh"
rx_need redis-server redis-cli python3 timeout
rx_require_build
rx_usable redis-cli || rx_skip "redis-cli cannot run in this build"

rx_redis_start || rx_fail "redis-server did not start"
rx_dump_on_fail "$RX_REDIS_DIR/log"
cli=(redis-cli -h 127.0.0.1 -p "$RX_REDIS_PORT")
metric() { # NAME FILE: the value of a metric without labels beyond key
	sed -n "s/^$1{key=\"[^\"]*\"} //p" "$2" | head -n1
}
# calls_of CMD: how many CMDs the server received, run or rejected
# (INFO commandstats: calls, rejected_calls).
calls_of() {
	rx_plain "${cli[@]}" info commandstats | tr -d '\r' |
		sed -n "s/^cmdstat_$1:calls=\([0-9]*\),.*rejected_calls=\([0-9]*\).*/\1 \2/p" |
		awk '{ s += $1 + $2 } END { print s + 0 }'
}
guard=(RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=5 RESILIX_OPEN_MS=30000)

# --- healthy output: identical ------------------------------------------
script='del l
rpush l a b c
lrange l 0 -1
set k hello
get k
incrby n 0
hset h f v
hgetall h
ping'
rx_plain "${cli[@]}" flushall >/dev/null
printf '%s\n' "$script" | rx_plain "${cli[@]}" >"$RX_TMP/plain.out" 2>&1
rx_plain "${cli[@]}" flushall >/dev/null
printf '%s\n' "$script" | rx_shim RESILIX_LOG=info "${cli[@]}" \
	>"$RX_TMP/shim.out" 2>"$RX_TMP/shim.err"
rc=$?
rx_dump_on_fail "$RX_TMP/shim.err" "$RX_TMP/shim.out"
rx_assert_eq "redis-cli exit status under the shim" 0 "$rc"
cmp -s "$RX_TMP/plain.out" "$RX_TMP/shim.out" ||
	{ diff "$RX_TMP/plain.out" "$RX_TMP/shim.out"; rx_fail "redis-cli output differs under the shim"; }
rx_assert_grep "the session's last reply" '^PONG$' "$RX_TMP/shim.out"

# --- -ERR: answered, never trips ------------------------------------------
m=$RX_TMP/err.prom err=$RX_TMP/err.err
rx_dump_on_fail "$err"
for i in $(seq 1 30); do echo "nosuchcommand $i"; done |
	rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$m" "${cli[@]}" \
		>"$RX_TMP/err.out" 2>"$err"
rx_assert_eq "unknown command errors redis-cli printed" 30 \
	"$(grep -c '^ERR unknown command' "$RX_TMP/err.out")"
rx_assert_eq "transitions" "" "$(rx_transitions "$err")"
rx_assert_eq "verdicts (success answered overload transient timeout rejected)" \
	"1 30 0 0 0 0" "$(rx_verdicts "$m")"

# --- -OOM: overload lowers the limit ---------------------------------------
rx_plain "${cli[@]}" config set maxmemory 1 >/dev/null ||
	rx_fail "CONFIG SET maxmemory failed"
m=$RX_TMP/oom.prom err=$RX_TMP/oom.err
rx_dump_on_fail "$err"
before=$(calls_of set)
for i in $(seq 1 12); do echo "set key$i value$i"; done |
	rx_shim "${guard[@]}" RESILIX_METRICS_FILE="$m" "${cli[@]}" \
		>"$RX_TMP/oom.out" 2>"$err"
rx_assert_eq "OOM errors redis-cli printed" 12 \
	"$(grep -c '^OOM command not allowed' "$RX_TMP/oom.out")"
rx_assert_eq "SETs that reached the server" 12 $(($(calls_of set) - ${before:-0}))
rx_assert_eq "verdicts (success answered overload transient timeout rejected)" \
	"1 0 12 0 0 0" "$(rx_verdicts "$m")"
rx_assert_eq "the limiter's drops" 12 "$(metric resilix_limiter_drops_total "$m")"
limit=$(metric resilix_limiter_limit "$m")
rx_assert_le "the limiter's limit after 12 OOMs (was 20)" "${limit%.*}" 9
rx_assert_eq "transitions (overload is not a breaker failure)" "" \
	"$(rx_transitions "$err")"
rx_plain "${cli[@]}" config set maxmemory 0 >/dev/null

# --- a dead server trips ------------------------------------------------
port=$RX_REDIS_PORT
rx_redis_stop
st=$RX_TMP/state err=$RX_TMP/dead.err
rx_dump_on_fail "$err"
: >"$err"
for i in $(seq 1 8); do
	rx_shim "${guard[@]}" RESILIX_LOG=debug RESILIX_STATE_FILE="$st" \
		redis-cli -h 127.0.0.1 -p "$port" ping >>"$RX_TMP/dead.out" 2>>"$err"
done
rx_assert_eq "every redis-cli failed to connect" 8 \
	"$(grep -c '^Could not connect to Redis.*Connection refused' "$err")"
rx_assert_eq "transitions" "closed>open" "$(rx_transitions "$err")"
rx_assert_eq "connects the kernel refused (transient)" 5 \
	"$(grep -c 'event=settle verdict=transient' "$err")"
# (redis-cli tries each connect twice: 16 in all.)
rx_assert_ge "connects the shim refused itself" \
	"$(grep -c 'event=refused reason=circuit-open .*at=connect' "$err")" 3
rx_pass
