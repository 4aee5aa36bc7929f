#!/bin/bash
# demo_report.sh - scripts/demo's report agrees with itself and fits its
# columns, from a synthetic run (`scripts/demo --report DIR` reads the logs
# a run kept with --keep; no upstream, no 45 s). The pool's limit grew to
# 34 while the upstream was healthy and fell to 33 once it slowed: the
# narrative said "walked ... down from 33" while the table showed 34 in
# force. Now it starts from the limit the table shows when the slower
# phase began. The summary's "slower phase" row held three figures in a
# 16-column cell and ran past the table's 78 columns; every summary line
# now fits.
. "$(dirname "$0")/lib.sh"
rx_need python3
DEMO=$RESILIX_SRCDIR/scripts/demo
W=$RX_TMP/run
mkdir -p "$W"
# The demo's timeline: healthy 5 s, slower 10, degraded 8, down 5,
# healthy 11 (39 s).
python3 - "$W" <<'PY' || rx_fail "cannot write the synthetic logs"
import os, sys
from datetime import datetime, timezone
W = sys.argv[1]
T0 = 1700000000000
T_SLOW, T_DEG, T_DOWN, T_REC, DUR = 5, 15, 23, 28, 39

def ts(s):
    return datetime.fromtimestamp(T0 / 1000 + s, timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

def code(s, guarded):
    if T_DEG <= s < T_REC:
        return "refused" if guarded and s >= T_DEG + 1 else "500"
    return "200"

for name in ("plain", "guarded"):
    g = name == "guarded"
    open(os.path.join(W, name + ".t0"), "w").write("%d\n" % T0)
    with open(os.path.join(W, name + ".curl.out"), "w") as f:
        for s in range(DUR):
            c = code(s, g)
            f.write("%d %s %d %.3f\n" % (T0 + s * 1000 + 510, "000" if c == "refused"
                    else c, 7 if c == "refused" else 0, 0.01))
    for prog, n in (("py", 4), ("pool", 24)):
        with open(os.path.join(W, "%s.%s.out" % (name, prog)), "w") as f:
            for s in range(DUR):
                for k in range(n):
                    c = code(s, g)
                    lat = 60 if T_SLOW <= s < T_DEG else 10
                    f.write("%d %.1f %s\n" % (T0 + s * 1000 + 10 * k, lat,
                            "ConnectionRefusedError" if c == "refused" else c))
    with open(os.path.join(W, name + ".up.log"), "w") as f:
        for s in range(DUR):
            f.write("%d x /curl/%d 200\n" % (T0 + s * 1000, s))
            f.write("%d x /pool/0/%d 200\n" % (T0 + s * 1000, s))
    if not g:
        continue
    for prog in ("curl", "py", "pool"):
        with open(os.path.join(W, "guarded.%s.shim" % prog), "w") as f:
            for s, fr, to in ((T_DEG + 0.8, "closed", "open"),
                              (T_REC + 0.2, "open", "half_open"),
                              (T_REC + 0.3, "half_open", "closed")):
                f.write("ts=%s level=info pid=1 key=127.0.0.1:1 "
                        "event=breaker-transition from=%s to=%s reason=x\n"
                        % (ts(s), fr, to))
            if prog == "pool":
                for s, lim in ((3.2, 34), (6.1, 33), (7.1, 30), (8.1, 25)):
                    f.write("ts=%s level=info pid=1 key=127.0.0.1:1 "
                            "event=limit-change limit=%d in_flight=20\n" % (ts(s), lim))
PY
out=$RX_TMP/report.out
rx_dump_on_fail "$out"
timeout 30 bash "$DEMO" --report "$W" >"$out" 2>&1
rx_assert_eq "the report of a run that tripped and recovered: exit status" 0 "$?"
# The pool's table: the limit in force at the end of second 4 (the last
# healthy one) is the one the narrative starts from.
shown=$(awk '/^The thread pool/ { p = 1 } p && $1 == 4 && $2 == "healthy" { print $(NF - 1); exit }' "$out")
rx_assert_eq "the table's limit when the slower phase began" 34 "$shown"
rx_assert_grep "the narrative starts the walk there" \
	"concurrency down from $shown \\(first at 6\\.[0-9] s, to 25 before the" "$out"
# Every line of the summary fits the table's 78 columns.
wide=$(awk '/^Summary/ { p = 1 } /^What happened/ { p = 0 } p && length($0) > 78' "$out")
rx_assert_eq "summary lines longer than 78 columns" "" "$wide"
rx_assert_grep "the slower phase's figures, one a row" \
	'^  slower phase: calls answered +[0-9]+ +[0-9]+ *$' "$out"
rx_assert_grep "its median, on a row of its own" \
	'^    \.\.\.median time of an answered call +60 ms +60 ms *$' "$out"
# --report needs a directory.
timeout 10 bash "$DEMO" --report "$RX_TMP/none" >/dev/null 2>&1
rx_assert_eq "--report without a directory: exit status" 2 "$?"
rx_pass
