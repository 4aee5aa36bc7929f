#!/bin/bash
# jump_timeout.sh - the alarm() + siglongjmp timeout of old C daemons does
# not switch the shim off (ADR-226).
#
# 1. A read blocked on an upstream that never answers is timed out by a
#    SIGALRM handler that siglongjmp()s out of it. The same thread then
#    makes 8 requests to an upstream answering 500: the breaker trips at
#    the backstop (5), and the rest are refused. (Before, the jump left
#    the thread "inside the shim" and every later call passed through.)
# 2. A connect queued for a limiter slot (limit 1, a thread holds it) is
#    timed out the same way; once the slot is free, the next connect is
#    admitted at once and its call settled: the place the jump left was
#    given up, and the thread is still guarded.
# 3. (below) timer storms of jumps: no hang.
. "$(dirname "$0")/lib.sh"
rx_require_build
JO=$RESILIX_BUILDDIR/tests/support/jumpout
[ -x "$JO" ] || rx_fail "not built: $JO"

rx_upstream_start hang --phases 0:hang
hang=$RX_PORT
rx_upstream_start bad --phases 0:status:500
bad=$RX_PORT
out=$RX_TMP/read.out err=$RX_TMP/read.err
rx_dump_on_fail "$out" "$err"
rx_shim RESILIX_LOG=info RESILIX_CONSECUTIVE_BACKSTOP=5 "$JO" read "$hang" "$bad" \
	>"$out" 2>"$err" || rx_fail "jumpout read: exit status $?"
rx_assert_eq "after the jump: answered 500 up to the backstop" 5 \
	"$(grep -c ' 500$' "$out")"
rx_assert_eq "after the jump: then refused" 3 "$(grep -c ' ECONNREFUSED$' "$out")"
rx_assert_eq "after the jump: the breaker opened" "closed>open" \
	"$(rx_transitions "$err")"

rx_upstream_start slow --phases 0:slow:2000
out=$RX_TMP/wait.out err=$RX_TMP/wait.err
rx_dump_on_fail "$out" "$err"
RX_TIMEOUT=20 rx_shim RESILIX_LIMIT_INITIAL=1 RESILIX_LIMIT_MIN=1 \
	RESILIX_LIMIT_MAX=1 RESILIX_QUEUE_TIMEOUT_MS=1500 RESILIX_LOG=debug \
	"$JO" wait "$RX_PORT" >"$out" 2>"$err" || rx_fail "jumpout wait: exit status $?"
set -- $(cat "$out")
rx_assert_eq "after a jump out of the wait: the next connect admitted" \
	"0 OK" "$1 $2"
rx_assert_le "after a jump out of the wait: at once (ms)" "$3" 1000
rx_assert_eq "after a jump out of the wait: the thread's calls settle" 2 \
	"$(grep -c 'event=settle' "$err")"

# 3. A 300 us timer whose handler jumps out of whatever request is under
#    way - the shim's own critical sections included - and one whose
#    handler jumps within itself and then connects: never a hang (a lock
#    the jump orphaned must not be taken again by its own thread), and as
#    many answers as without the shim, give or take the timing.
rx_upstream_start fast --phases 0:ok
for m in storm handler; do
	plain=$(rx_plain "$JO" "$m" "$RX_PORT") || rx_fail "$m without the shim: exit status $?"
	got=$(RX_TIMEOUT=60 rx_shim "$JO" "$m" "$RX_PORT" 2>"$RX_TMP/$m.err") ||
		rx_fail "$m under the shim: exit status $? (124: it hung)"
	# The storm's count swings with the machine's timing, with and
	# without the shim alike; the handler's does not.
	if [ "$m" = storm ]; then
		rx_assert_ge "$m: answers under the shim (without: $plain)" \
			"$got" $((plain / 4))
	else
		rx_assert_eq "$m: answers under the shim as without" "$plain" "$got"
	fi
done
rx_pass
