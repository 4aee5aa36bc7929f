#!/bin/bash
# db_redis_replica.sh - a redis-server replica run under the shim (as a
# container's `ENV LD_PRELOAD` runs every process) keeps its healthy
# master (ADR-667).
#
# The replica's link to the master is request/response only until PSYNC:
# then the master streams its writes and a ping every second, and the
# replica sends `REPLCONF ACK <offset>` every second, which gets no reply.
# Each ACK used to open a call that the next ping "answered" a second
# later, or the deadline settled: with RESILIX_TIMEOUT_MS and
# RESILIX_SLOW_CALL_MS set, timeouts and slow calls on an idle, healthy
# master, the limiter falling to its floor, then the circuit opening and
# the replica's reconnects refused ("Unable to connect to MASTER").
#
# Here: a master pinging every second, a replica under the shim with
# RESILIX_TIMEOUT_MS=300, RESILIX_SLOW_CALL_MS=200 and a backstop of 2;
# the master drops the replica's link once, so the replica reconnects with
# a partial resynchronisation (+CONTINUE: no RDB follows, the stream
# starts at once), then 3.5 s of idle stream. Each PSYNC's call is
# released without evidence, every other settled call is a success and
# none is slow, nothing is refused, no transition, the
# replica's log shows no refused connect, and a key written on the master
# reaches the replica.
. "$(dirname "$0")/lib.sh"
. "$RESILIX_SRCDIR/tests/support/redis_server.sh"
rx_need redis-server redis-cli python3 timeout
rx_require_build
rx_usable redis-server || rx_skip "redis-server cannot run in this build"
RX_TIMEOUT=40

rx_redis_start --repl-ping-replica-period 1 --repl-diskless-sync no ||
	rx_fail "redis-server (master) did not start"
rx_dump_on_fail "$RX_REDIS_DIR/log"
master=$RX_REDIS_PORT
rport=$(rx_free_port) || rx_fail "no free port"
rdir=$RX_TMP/replica err=$RX_TMP/replica.err m=$RX_TMP/replica.prom
mkdir -p "$rdir"
rx_dump_on_fail "$err"
rx_dump_on_fail "$rdir/log"
rx_shim RESILIX_LOG=debug RESILIX_LOG_FILE="$err" RESILIX_METRICS_FILE="$m" \
	RESILIX_METRICS_INTERVAL_MS=0 RESILIX_TIMEOUT_MS=300 \
	RESILIX_SLOW_CALL_MS=200 RESILIX_CONSECUTIVE_BACKSTOP=2 \
	RESILIX_MIN_CALLS=2 redis-server --bind 127.0.0.1 --port "$rport" \
	--save '' --appendonly no --daemonize no --dir "$rdir" \
	--logfile "$rdir/log" --replicaof 127.0.0.1 "$master" \
	</dev/null >"$rdir/out" 2>&1 &
replica=$!
RX_PIDS="$RX_PIDS $replica"
rcli=(redis-cli -h 127.0.0.1 -p "$rport")
mcli=(redis-cli -h 127.0.0.1 -p "$master")

# link_up N: wait at most 10 s for the replica's Nth successful sync.
link_up() {
	local end=$((SECONDS + 10)) n
	while [ $SECONDS -lt $end ]; do
		n=$(grep -c 'MASTER <-> REPLICA sync: \(Finished with success\|Master accepted a Partial\)' \
			"$rdir/log" 2>/dev/null)
		if [ "${n:-0}" -ge "$1" ] &&
			timeout 2 "${rcli[@]}" info replication 2>/dev/null |
			grep -q 'master_link_status:up'; then
			return 0
		fi
		sleep 0.05
	done
	return 1
}
link_up 1 || rx_fail "the replica did not sync with its master"
rx_plain "${mcli[@]}" client kill type replica >/dev/null ||
	rx_fail "could not drop the replica's link"
link_up 2 || rx_fail "the replica did not sync again"
grep -q 'Partial Resynchronization' "$rdir/log" ||
	rx_fail "the replica did not resynchronise partially"
sleep 3.5
rx_plain "${mcli[@]}" set replicated yes >/dev/null || rx_fail "SET on the master failed"
got=""
for i in $(seq 1 100); do
	got=$(timeout 2 "${rcli[@]}" get replicated 2>/dev/null)
	[ "$got" = yes ] && break
	sleep 0.05
done
rx_assert_eq "the key written on the master, read on the replica" yes "$got"

kill -TERM "$replica" 2>/dev/null
wait "$replica" 2>/dev/null
rx_assert_eq "settled calls other than these and successes" "" \
	"$(grep 'event=settle' "$err" | grep -v 'verdict=success' | grep -v 'at=no-call')"
rx_assert_eq "slow calls" 0 \
	"$(sed -n 's/^resilix_slow_calls_total{[^}]*} //p' "$m" | awk '{ s += $1 } END { print s + 0 }')"
rx_assert_eq "refusals" 0 "$(grep -c 'event=refused' "$err")"
rx_assert_eq "transitions" "" "$(rx_transitions "$err")"
rx_assert_eq "refused connects to the master" 0 \
	"$(grep -c 'Unable to connect to MASTER' "$rdir/log")"
# Each PSYNC's call is released without evidence: the link starts there.
rx_assert_eq "PSYNC calls released as no-call" 2 \
	"$(grep -c 'event=settle verdict=rejected latency_us=[0-9]* at=no-call' "$err")"
rx_pass
