#!/bin/bash
# threads_fork.sh - 8 threads x 2000 keep-alive requests under the shim,
# with a fork in the middle (the child runs its own threads and both
# finish), posix_spawn from a busy thread, and a 1 ms SIGALRM handler that
# re-enters the shim (a pipe write, getsockopt on a guarded socket) while
# the interrupted thread may be inside it (ADR-146), and duplicates of the
# connections carrying requests (ADR-213). Every response must
# be a 200; a deadlock shows up as the timeout.
. "$(dirname "$0")/lib.sh"
rx_require_build
ST=$RESILIX_BUILDDIR/tests/support/stress
[ -x "$ST" ] || rx_fail "not built: $ST"
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

n=2000
inline=
case ${RESILIX_SANITIZERS:-} in
*thread*)
	n=300 # ThreadSanitizer runs ~10x slower
	# TSan cannot start threads after a multi-threaded fork: the child
	# runs its requests on its one thread.
	inline=child-inline
	;;
*address*) n=1000 ;;
esac
rx_upstream_start ok --phases 0:ok --max-conns 64
RX_TIMEOUT=50 rx_shim RESILIX_LOG=warn "$ST" "$RX_PORT" 8 $n $inline >"$out" 2>"$err" ||
	rx_fail "stress exit status $?"
rx_assert_eq "parent: responses 200" "parent ok $((8 * n)) of $((8 * n))" \
	"$(grep '^parent' "$out")"
rx_assert_eq "child: responses 200" "child ok $((2 * n / 10)) of $((2 * n / 10))" \
	"$(grep '^child' "$out")"
rx_assert_no_grep "no warnings from the shim" 'level=(warn|error)' "$err"
rx_pass
