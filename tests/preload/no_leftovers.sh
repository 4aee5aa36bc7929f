#!/bin/bash
# no_leftovers.sh - no test leaves a process behind (ADR-345).
#   - lib.sh's cleanup kills the whole tree a test started: a server run
#     in the background through a helper function (rx_plain ... &) is a
#     subshell whose child is `timeout`, whose child is the server;
#     killing the registered subshell alone left `timeout` and the server
#     running, re-parented to pid 1 (passthrough_socket.sh's echo server
#     lived on for 10 minutes after every run). An unregistered
#     background child goes too.
#   - .ci/run fails, listing them, when scripts/test leaves a process of
#     the tree behind, and passes when it leaves none; a process outside
#     the tree is not counted.
. "$(dirname "$0")/lib.sh"
rx_need python3
mark=rx-leftover-$$-$RANDOM

# alive MARK: whether a process whose command line holds MARK runs.
alive() {
	local f v
	for f in /proc/[0-9]*/cmdline; do
		while IFS= read -r -d '' v; do
			case $v in *"$1"*) return 0 ;; esac
		done 2>/dev/null <"$f"
	done
	return 1
}

# A test that starts servers the way the tests do, then passes.
cat >"$RX_TMP/child.sh" <<CHILD
. "$RESILIX_SRCDIR/tests/preload/lib.sh"
RX_TIMEOUT=600 rx_plain python3 -c 'import time, sys; time.sleep(300)' $mark-registered &
RX_PIDS="\$RX_PIDS \$!"
rx_plain python3 -c 'import time, sys; time.sleep(300)' $mark-unregistered &
sleep 0.5
rx_pass
CHILD
timeout 30 bash "$RX_TMP/child.sh" >"$RX_TMP/child.out" 2>&1
rx_assert_eq "the child test: exit status" 0 "$?"
gone=yes
for i in $(seq 1 20); do
	gone=yes
	alive "$mark-registered" && gone=no
	alive "$mark-unregistered" && gone=no
	[ "$gone" = yes ] && break
	sleep 0.1
done
rx_assert_eq "its servers are gone when it has ended" yes "$gone"

# .ci/run on a tree whose scripts/test leaves a process behind.
tree=$RX_TMP/tree
mkdir -p "$tree/.ci" "$tree/scripts"
cp "$RESILIX_SRCDIR/.ci/run" "$tree/.ci/run"
cat >"$tree/scripts/test" <<'FAKE'
#!/bin/bash
root=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
leave)
	# A test's server, detached, as the tree's own.
	RESILIX_SRCDIR=$root setsid python3 -c 'import time; time.sleep(60)' \
		"$MARK-ci" </dev/null >/dev/null 2>&1 &
	# And one that is not the tree's: never counted.
	env -u RESILIX_SRCDIR setsid python3 -c 'import time; time.sleep(60)' \
		"$MARK-other" </dev/null >/dev/null 2>&1 &
	sleep 0.5 ;;
esac
exit 0
FAKE
chmod +x "$tree/scripts/test" "$tree/.ci/run"
rx_dump_on_fail "$RX_TMP/ci.err"
MARK=$mark timeout 60 "$tree/.ci/run" >"$RX_TMP/ci.out" 2>"$RX_TMP/ci.err"
rx_assert_eq ".ci/run, nothing left behind: exit status" 0 "$?"
MARK=$mark timeout 60 "$tree/.ci/run" leave >"$RX_TMP/ci.out" 2>"$RX_TMP/ci.err"
rx_assert_eq ".ci/run, a process left behind: exit status" 1 "$?"
rx_assert_grep ".ci/run names it" "pid [0-9]+ \\(parent [0-9]+\\): .*python3 .*$mark-ci" "$RX_TMP/ci.err"
rx_assert_grep ".ci/run counts one" "FAILED: 1 process\\(es\\) of this tree outlived" "$RX_TMP/ci.err"
rx_assert_no_grep ".ci/run ignores a process outside the tree" "$mark-other" "$RX_TMP/ci.err"
# Ours to end: the two it started.
for f in /proc/[0-9]*/cmdline; do
	pid=${f#/proc/} pid=${pid%/cmdline}
	case $(tr '\0' ' ' <"$f" 2>/dev/null) in
	*"$mark-ci"* | *"$mark-other"*) kill "$pid" 2>/dev/null ;;
	esac
done
rx_pass
