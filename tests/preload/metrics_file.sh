#!/bin/bash
# metrics_file.sh - RESILIX_METRICS_FILE after a run that trips a breaker:
# the file parses with the Prometheus text-format parser (Debian's
# python3-prometheus-client), every family has HELP and TYPE, and the
# numbers match what the upstream's request log says happened. Also: the
# file is replaced atomically (no temporary left behind), written during a
# run and not only at exit, not clobbered by a shell that ran the program
# and exited after it (ADR-161), and a directory that does not exist costs
# one warning and no guarding (ADR-010).
. "$(dirname "$0")/lib.sh"
rx_require_build
# Debian's python, whatever python3 is first on PATH (a pyenv python
# lacks Debian's modules).
PY=/usr/bin/python3
if ! [ -x "$PY" ] || ! "$PY" -c 'import prometheus_client' 2>/dev/null; then
	echo "SKIP: $RX_NAME: $PY with prometheus_client is not installed" \
		"(scripts/deps installs python3-prometheus-client)"
	exit 77
fi

MIN=10
N=40
prom=$RX_TMP/metrics.prom
guard=(RESILIX_LOG=info RESILIX_FAILURE_RATE=0.5 RESILIX_MIN_CALLS=$MIN
	RESILIX_WINDOW_CALLS=20 RESILIX_CONSECUTIVE_BACKSTOP=0
	RESILIX_OPEN_MS=30000 RESILIX_METRICS_FILE=$prom)

# --- a breaker trips on HTTP 500s; the exit write has the final numbers ---
rx_upstream_start up --phases 0:status:500
out=$RX_TMP/client.out err=$RX_TMP/client.err
rx_dump_on_fail "$out" "$err" "$prom"
rx_shim "${guard[@]}" "$CLIENT" --port "$RX_PORT" --requests $N \
	>"$out" 2>"$err" || rx_fail "client exit status $?"
[ -s "$prom" ] || rx_fail "no metrics file written"
reached=$(rx_count up 500)
rx_assert_eq "requests the upstream answered 500" "$MIN" "$reached"
rx_assert_eq "temporary files left in the directory" "" \
	"$(ls "$RX_TMP" | grep 'metrics.prom.tmp' || true)"

# The parser, then the values against the upstream's log.
"$PY" - "$prom" "127.0.0.1:$RX_PORT" "$reached" "$((N - reached))" \
	>"$RX_TMP/check.out" 2>&1 <<'PY' || { cat "$RX_TMP/check.out"; rx_fail "metrics do not match"; }
import sys, math
from prometheus_client.parser import text_string_to_metric_families

path, key, reached, refused = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
text = open(path).read()
fams = {f.name: f for f in text_string_to_metric_families(text)}
problems = []

def val(name, **labels):
    # prometheus_client strips _total from counter family names.
    for fam in fams.values():
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    problems.append("no sample %s%r" % (name, labels))
    return None

def expect(what, got, want):
    ok = got is not None and (math.isclose(got, want) if isinstance(want, float) else got == want)
    print("%s %s: got %r, want %r" % ("ok" if ok else "MISMATCH", what, got, want))
    if not ok:
        problems.append(what)

# Every family announced with HELP and TYPE.
names = [l.split()[2] for l in text.splitlines() if l.startswith("# TYPE ")]
helps = [l.split()[2] for l in text.splitlines() if l.startswith("# HELP ")]
expect("families with TYPE also have HELP", sorted(names), sorted(helps))
for want in ("resilix_calls_total", "resilix_refusals_total",
             "resilix_breaker_state", "resilix_failure_ratio",
             "resilix_slow_call_ratio", "resilix_window_calls",
             "resilix_call_latency_seconds", "resilix_registry_keys",
             "resilix_registry_overflows_total"):
    if want not in names:
        problems.append("family %s missing" % want)
for t in [l.split() for l in text.splitlines() if l.startswith("# TYPE ")]:
    if t[3] == "counter" and not t[2].endswith("_total"):
        problems.append("counter %s does not end in _total" % t[2])

expect("calls settled transient (= upstream's 500s)",
       val("resilix_calls_total", key=key, verdict="transient"), float(reached))
expect("calls settled success", val("resilix_calls_total", key=key, verdict="success"), 0.0)
expect("refusals circuit-open (= requests that never reached it)",
       val("resilix_refusals_total", key=key, reason="circuit-open"), float(refused))
expect("refusals limiter-full", val("resilix_refusals_total", key=key, reason="limiter-full"), 0.0)
expect("breaker state open", val("resilix_breaker_state", key=key, state="open"), 1.0)
expect("breaker state closed", val("resilix_breaker_state", key=key, state="closed"), 0.0)
expect("breaker transitions", val("resilix_breaker_transitions_total", key=key), 1.0)
expect("failure ratio", val("resilix_failure_ratio", key=key), 1.0)
expect("window calls", val("resilix_window_calls", key=key), float(reached))
expect("latency count", val("resilix_call_latency_seconds_count", key=key), float(reached))
s = val("resilix_call_latency_seconds_sum", key=key)
expect("latency sum is positive and under 10 s", s is not None and 0 < s < 10, True)
# A histogram by the exposition format's rules (ADR-520): TYPE histogram,
# the fixed bounds in order, cumulative counts, +Inf last and equal to
# _count; and no summary left (no quantile label anywhere).
expect("latency family is a histogram",
       fams.get("resilix_call_latency_seconds") is not None and
       fams["resilix_call_latency_seconds"].type, "histogram")
bk = [(s.labels["le"], s.value) for f in fams.values() for s in f.samples
      if s.name == "resilix_call_latency_seconds_bucket" and s.labels.get("key") == key]
les = ["0.000025", "0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025",
       "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5",
       "10", "25", "50", "+Inf"]
expect("the fixed bounds, in order, +Inf last",
       [float(le) for le, _ in bk], [float(le) for le in les])
expect("bucket counts are cumulative",
       all(bk[i][1] <= bk[i + 1][1] for i in range(len(bk) - 1)), True)
expect("+Inf bucket = _count", bk[-1][1] if bk else None, float(reached))
expect("no quantile label (the summary is gone)", "quantile=" in text, False)
expect("calls in flight", val("resilix_calls_in_flight", key=key), 0.0)
expect("registry keys", val("resilix_registry_keys"), 1.0)
expect("registry overflows", val("resilix_registry_overflows_total"), 0.0)
# Whose numbers these are, in a file without %p (ADR-368).
w = [s for f in fams.values() for s in f.samples if s.name == "resilix_writer_info"]
expect("one writer series, naming a pid",
       len(w) == 1 and w[0].labels.get("pid", "").isdigit() and w[0].value == 1, True)
if problems:
    print("PROBLEMS:", problems)
    sys.exit(1)
PY
rx_log "$(grep -c '^ok' "$RX_TMP/check.out") checks on the parsed file passed"
rx_upstream_stop up

# --- a shell that runs the program exits after it, and writes nothing ---
rm -f "$prom"
rx_upstream_start sh --phases 0:ok
rx_shim "${guard[@]}" sh -c '"$1" --port "$2" --requests 3 >/dev/null; sleep 0.1' \
	sh "$CLIENT" "$RX_PORT" 2>"$err" || rx_fail "sh exit status $?"
rx_assert_grep "the program's numbers survive its parent shell" \
	"^resilix_calls_total\\{key=\"127.0.0.1:$RX_PORT\",verdict=\"success\"\\} 3$" \
	"$prom"

# --- written during the run (interval), not only at exit ------------------
rm -f "$prom"
rx_shim "${guard[@]}" RESILIX_METRICS_INTERVAL_MS=100 "$CLIENT" \
	--port "$RX_PORT" --requests 40 --interval-ms 50 >/dev/null 2>"$err" &
cpid=$!
rx_wait_for 5 test -s "$prom" || rx_fail "no metrics file while the program ran"
kill -0 "$cpid" 2>/dev/null || rx_fail "the program ended before a periodic write"
rx_log "ok: the file appeared while the program was still running"
wait "$cpid"
rx_assert_grep "final count after exit" \
	"^resilix_calls_total\\{key=\"127.0.0.1:$RX_PORT\",verdict=\"success\"\\} 40$" \
	"$prom"
rx_upstream_stop sh

# --- 8 threads settling at once, a write at every settlement: one writer
# --- at a time (the others skip), and the exit write has every call ------
rx_upstream_start threads --phases 0:ok
rm -f "$prom"
rx_shim "${guard[@]}" RESILIX_METRICS_INTERVAL_MS=0 "$CLIENT" --port "$RX_PORT" \
	--threads 8 --requests 100 --keepalive >"$out" 2>"$err" ||
	rx_fail "client exit status $?"
rx_assert_eq "requests answered" 800 "$(rx_count threads 200)"
rx_assert_grep "all 800 calls in the final file" \
	"^resilix_calls_total\\{key=\"127.0.0.1:$RX_PORT\",verdict=\"success\"\\} 800$" \
	"$prom"
rx_assert_grep "and in the latency histogram's count" \
	"^resilix_call_latency_seconds_count\\{key=\"127.0.0.1:$RX_PORT\"\\} 800$" \
	"$prom"
rx_assert_grep "and in its +Inf bucket" \
	"^resilix_call_latency_seconds_bucket\\{key=\"127.0.0.1:$RX_PORT\",le=\"\\+Inf\"\\} 800$" \
	"$prom"
rx_assert_no_grep "no error from the writer" 'metrics-write-failed' "$err"
rx_upstream_stop threads

# --- fork: %p gives each process its own file, its series labelled with ---
# --- its pid, removed when it exits; without %p a child leaves the file ---
# --- to its parent while the parent lives (ADR-161, ADR-222) -------------
two_lines() { [ "$(wc -l <"$1")" -ge 2 ]; }
if rx_usable python3; then
	rx_upstream_start fork --phases 0:ok
	# One call, a fork, then 3 calls in the parent and 2 in the child;
	# both wait for the go file; the parent waits for the child (a
	# server and its worker), unless told it is a daemon: then it exits
	# at once and the child works on alone.
	forkpy='import os, sys, time, urllib.request
url = "http://127.0.0.1:%s/" % sys.argv[1]
go, daemon = sys.argv[2], sys.argv[3] == "daemon"
if not daemon:
    urllib.request.urlopen(url).read()
pid = os.fork()
if daemon and pid:
    sys.exit(0)
for i in range(2 if pid == 0 else 3):
    urllib.request.urlopen(url).read()
print(os.getpid(), flush=True)
for i in range(500):
    if os.path.exists(go):
        break
    time.sleep(0.02)
if pid:
    os.waitpid(pid, 0)
elif daemon:
    time.sleep(0.5)  # a daemon outlives the process that started it'
	ok_line() { # PID N: the calls line of a %p file (N successes)
		echo "^resilix_calls_total\\{pid=\"$1\",key=\"127.0.0.1:$RX_PORT\",verdict=\"success\"\\} $2$"
	}
	rm -f "$RX_TMP/go"
	rx_shim RESILIX_METRICS_FILE="$RX_TMP/fork-%p.prom" \
		RESILIX_METRICS_INTERVAL_MS=0 python3 -c "$forkpy" "$RX_PORT" \
		"$RX_TMP/go" server >"$out" 2>"$err" &
	spid=$!
	rx_wait_for 10 two_lines "$out" || rx_fail "the processes did not start"
	pyprocs=$(sed -n 1,2p "$out")
	for p in $pyprocs; do
		[ -f "$RX_TMP/fork-$p.prom" ] || rx_fail "no file for process $p"
	done
	# Which is which: the parent made 1 + 3 calls, the child 1 inherited
	# + 2 of its own; every series names its process.
	a=$(echo "$pyprocs" | sed -n 1p) b=$(echo "$pyprocs" | sed -n 2p)
	if grep -Eq "$(ok_line "$a" 4)" "$RX_TMP/fork-$a.prom"; then
		parent=$a child=$b
	else
		parent=$b child=$a
	fi
	rx_assert_grep "the parent's own file (1 + 3 calls), pid label" \
		"$(ok_line "$parent" 4)" "$RX_TMP/fork-$parent.prom"
	rx_assert_grep "the child's own file (1 inherited + 2 calls), pid label" \
		"$(ok_line "$child" 3)" "$RX_TMP/fork-$child.prom"
	rx_assert_eq "no series without the pid label" 0 \
		"$(grep -v '^#' "$RX_TMP/fork-$child.prom" | grep -vc "pid=\"$child\"")"
	rx_assert_grep "a series without a key has the pid label too" \
		"^resilix_registry_keys\\{pid=\"$child\"\\} 1$" "$RX_TMP/fork-$child.prom"
	touch "$RX_TMP/go"
	wait "$spid" || rx_fail "python fork exit status $?"
	rx_assert_eq "the files went with their processes" "" \
		"$(ls "$RX_TMP" | grep '^fork-' || true)"

	# Without %p: the child exits while the parent lives; the file is the
	# parent's.
	rm -f "$prom" "$RX_TMP/go"
	touch "$RX_TMP/go"
	rx_shim RESILIX_METRICS_FILE="$prom" python3 -c "$forkpy" "$RX_PORT" \
		"$RX_TMP/go" server >"$out" 2>"$err" || rx_fail "python fork exit status $?"
	rx_assert_grep "without %p, the file is the parent's" \
		"^resilix_calls_total\\{key=\"127.0.0.1:$RX_PORT\",verdict=\"success\"\\} 4$" \
		"$prom"
	# A daemon: the process that started the shim exits at once, having
	# made no call; the child that does the work takes the file over.
	rm -f "$prom"
	rx_shim RESILIX_METRICS_FILE="$prom" python3 -c "$forkpy" "$RX_PORT" \
		"$RX_TMP/go" daemon >"$out" 2>"$err" || rx_fail "python daemon exit status $?"
	rx_wait_for 10 test -s "$prom" || rx_fail "the daemon's child wrote no file"
	rx_wait_for 5 grep -q "verdict=\"success\"} 2$" "$prom" ||
		rx_fail "the daemon's child's calls are not in the file"
	rx_log "ok: the daemon's child wrote the file"
	rx_upstream_stop fork
fi

# --- workers that end through _exit (Python's multiprocessing) remove ---
# --- their %p file too; a parent that exits leaving several workers ---
# --- hands the file (no %p) to its first fork only (ADR-222) ---------------
if rx_usable python3; then
	rx_upstream_start workers --phases 0:ok
	rm -f "$RX_TMP"/quick-*.prom "$prom"
	quickpy='import os, sys, urllib.request
url = "http://127.0.0.1:%s/" % sys.argv[1]
pid = os.fork()
if pid == 0:
    urllib.request.urlopen(url).read()
    os._exit(0)
os.waitpid(pid, 0)
print(pid, flush=True)
print(len([f for f in os.listdir(sys.argv[2]) if f.startswith("quick-")]), flush=True)'
	rx_shim RESILIX_METRICS_FILE="$RX_TMP/quick-%p.prom" RESILIX_METRICS_INTERVAL_MS=0 \
		RESILIX_LOG=debug python3 -c "$quickpy" "$RX_PORT" "$RX_TMP" \
		>"$out" 2>"$err" || rx_fail "quick exit: exit status $?"
	child=$(sed -n 1p "$out")
	rx_assert_grep "_exit: the worker wrote its file" \
		"event=metrics-written keys=1 file=\"$RX_TMP/quick-$child\\.prom\"" "$err"
	rx_assert_eq "_exit: and removed it (no file left while its parent ran)" 0 \
		"$(sed -n 2p "$out")"
	rx_assert_eq "_exit: none left at the end" "" "$(ls "$RX_TMP" | grep '^quick-' || true)"

	# Three workers outlive their parent, which made no call.
	orphanpy='import os, sys, time, urllib.request
url = "http://127.0.0.1:%s/" % sys.argv[1]
for k in range(3):
    if os.fork() == 0:
        time.sleep(0.3)  # the parent is gone
        for i in range(5):
            urllib.request.urlopen(url).read()
            time.sleep(0.05)
        sys.exit(0)
sys.exit(0)'
	rx_shim RESILIX_METRICS_FILE="$prom" RESILIX_METRICS_INTERVAL_MS=0 \
		RESILIX_LOG=debug RESILIX_LOG_FILE="$RX_TMP/orphans.log" \
		python3 -c "$orphanpy" "$RX_PORT" >"$out" 2>"$err" ||
		rx_fail "orphans: exit status $?"
	orphans_done() { [ "$(grep -c 'event=settle' "$RX_TMP/orphans.log")" -ge 15 ]; }
	rx_wait_for 10 orphans_done || rx_fail "orphans: the workers did not finish"
	sleep 0.5
	rx_assert_eq "orphans: one process writes the file" 1 \
		"$(grep 'event=metrics-written' "$RX_TMP/orphans.log" |
			sed 's/.* pid=\([0-9]*\) .*/\1/' | sort -u | wc -l | tr -d ' ')"
	rx_assert_eq "orphans: the others say why not" 2 \
		"$(grep -c 'event=metrics-not-writer' "$RX_TMP/orphans.log")"
	rx_upstream_stop workers
fi

# --- a trip shows in the file at once, though the program then goes quiet ---
# --- and the interval has not passed (ADR-222) -----------------------------
if rx_usable python3; then
	rx_upstream_start quiet --phases 0:status:500
	rm -f "$prom" "$RX_TMP/go"
	quietpy='import os, sys, time, urllib.request, urllib.error
url = "http://127.0.0.1:%s/" % sys.argv[1]
for i in range(6):
    try:
        urllib.request.urlopen(url).read()
    except (urllib.error.HTTPError, OSError):
        pass
print("quiet", flush=True)
for i in range(500):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.02)'
	rx_shim RESILIX_METRICS_FILE="$prom" RESILIX_CONSECUTIVE_BACKSTOP=5 \
		RESILIX_OPEN_MS=60000 RESILIX_METRICS_INTERVAL_MS=600000 \
		python3 -c "$quietpy" "$RX_PORT" "$RX_TMP/go" >"$out" 2>"$err" &
	qpid=$!
	rx_wait_for 10 grep -q quiet "$out" || rx_fail "the program did not finish its calls"
	rx_assert_grep "the file shows the open breaker while the program is quiet" \
		"^resilix_breaker_state\\{key=\"127.0.0.1:$RX_PORT\",state=\"open\"\\} 1$" "$prom"
	touch "$RX_TMP/go"
	wait "$qpid" || rx_fail "quiet program exit status $?"
	rx_upstream_stop quiet
fi

# --- refusals drive writes too: an open breaker's refusals show while ----
# --- the program still runs, though no call settles ------------------------
rx_upstream_start storm --phases 0:status:500
rm -f "$prom"
rx_shim "${guard[@]}" RESILIX_METRICS_INTERVAL_MS=100 "$CLIENT" \
	--port "$RX_PORT" --requests 80 --interval-ms 25 >/dev/null 2>"$err" &
cpid=$!
refusals_seen() {
	[ "$(sed -n 's/^resilix_refusals_total{.*reason="circuit-open"} //p' \
		"$prom" 2>/dev/null)" -ge 10 ] 2>/dev/null
}
rx_wait_for 5 refusals_seen || rx_fail "no refusals in the file during the run"
kill -0 "$cpid" 2>/dev/null || rx_fail "the program ended before the refusals showed"
rx_log "ok: refusals showed in the file while the breaker was open"
wait "$cpid"
rx_upstream_stop storm

# --- label values are escaped: a curl endpoint key with a backslash and a
# --- double quote in its path reads back intact through the parser --------
if command -v curl >/dev/null 2>&1 && rx_usable curl; then
	rx_upstream_start esc --phases 0:ok
	rm -f "$prom"
	rx_shim RESILIX_CURL_KEY=endpoint RESILIX_METRICS_FILE="$prom" curl -s \
		-o /dev/null "http://127.0.0.1:$RX_PORT/a\\b\"c" 2>"$err" ||
		rx_fail "curl exit status $?"
	got=$("$PY" - "$prom" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
for fam in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in fam.samples:
        if s.name == "resilix_calls_total" and s.labels["verdict"] == "success" and s.value == 1:
            print(s.labels["key"])
PY
)
	rx_assert_eq "the key read back through the parser" \
		"GET 127.0.0.1:$RX_PORT/a\\b\"c" "$got"
	rx_upstream_stop esc
fi

# --- an unwritable destination: one warning, guarding unchanged ------------
rx_upstream_start bad --phases 0:status:500
rx_shim "${guard[@]}" RESILIX_METRICS_FILE=$RX_TMP/no/such/dir/m.prom \
	RESILIX_METRICS_INTERVAL_MS=0 "$CLIENT" --port "$RX_PORT" \
	--requests $N >"$out" 2>"$err" || rx_fail "client exit status $?"
rx_assert_eq "one warning about the metrics file" 1 \
	"$(grep -c 'event=metrics-write-failed' "$err")"
rx_assert_eq "the breaker still tripped after MIN calls" "$MIN" "$(rx_count bad)"
rx_pass
