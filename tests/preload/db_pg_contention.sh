#!/bin/bash
# db_pg_contention.sh - serialization failures are the database refereeing
# a race, not an overload: a healthy program that retries them is never
# refused (ADR-652).
#
# python3 with psycopg2 (libpq, which runs every socket non-blocking, so
# the limiter never makes its callers wait), 8 threads on their own
# connections, each making 30 SERIALIZABLE increments of one row and
# retrying a 40001 after 5 ms, against a temporary cluster. Every
# increment commits and every thread ends; the 40001s are answered calls
# (the metrics count them), no call is refused, the limit stays put. As
# overload (ADR-403) they bound the limit at its minimum within a
# fraction of a second and the shim refused the writes of the threads
# above it: libpq reported "server closed the connection unexpectedly",
# the threads' retry of 40001 did not catch that, and they died with
# their increments undone. 53300 (too many clients) is still overload.
. "$(dirname "$0")/lib.sh"
. "$RESILIX_SRCDIR/tests/support/pg_cluster.sh"
rx_need psql python3 timeout
rx_require_build
/usr/bin/python3 -c 'import psycopg2' 2>/dev/null ||
	rx_skip "Debian's python3-psycopg2 is not installed"
rx_pg_need
rx_usable /usr/bin/python3 || rx_skip "python3 cannot run in this build"
RX_TIMEOUT=60

rx_pg_start || rx_fail "PostgreSQL did not start"
rx_dump_on_fail "$RX_PG_DIR/log"
cat >"$RX_TMP/contend.py" <<'PYEOF'
import psycopg2, sys, threading, time
dsn = "host=127.0.0.1 port=%s user=postgres dbname=postgres sslmode=disable" % sys.argv[1]
c = psycopg2.connect(dsn)
c.autocommit = True
c.cursor().execute("create table acct(id int primary key, v int); insert into acct values (1, 0)")
done, retried, died = [0], [0], []
lock = threading.Lock()
def worker():
    try:
        conn = psycopg2.connect(dsn)
        conn.set_session(isolation_level="SERIALIZABLE")
        for i in range(30):
            while True:
                try:
                    conn.cursor().execute("update acct set v = v + 1 where id = 1")
                    conn.commit()
                    break
                except psycopg2.errors.SerializationFailure:
                    conn.rollback()
                    with lock:
                        retried[0] += 1
                    time.sleep(0.005)
            with lock:
                done[0] += 1
    except Exception as e:
        with lock:
            died.append(str(e).strip().split("\n")[0])
ts = [threading.Thread(target=worker) for _ in range(8)]
for t in ts:
    t.start()
for t in ts:
    t.join()
cur = c.cursor()
cur.execute("select v from acct")
print("committed", done[0], "row", cur.fetchone()[0], "died", len(died))
for d in sorted(set(died)):
    print("error", d)
print("retried", 1 if retried[0] > 0 else 0)
PYEOF
out=$RX_TMP/contend.out err=$RX_TMP/contend.err m=$RX_TMP/contend.prom
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=debug RESILIX_METRICS_FILE="$m" /usr/bin/python3 \
	"$RX_TMP/contend.py" "$RX_PG_PORT" >"$out" 2>"$err"
rx_assert_eq "python3 exit status" 0 "$?"
rx_assert_eq "what the program saw" "committed 240 row 240 died 0" \
	"$(sed -n 1p "$out")"
rx_assert_eq "serialization failures happened (and were retried)" \
	"retried 1" "$(tail -n1 "$out")"
rx_assert_eq "refusals" 0 "$(grep -c 'event=refused' "$err")"
rx_assert_ge "40001s counted as answered calls" \
	"$(sed -n 's/^resilix_calls_total{.*verdict="answered"} //p' "$m")" 1
rx_assert_eq "overload verdicts" 0 \
	"$(sed -n 's/^resilix_calls_total{.*verdict="overload"} //p' "$m")"
rx_log "contention retried by the program, never shed by the shim"
