#!/bin/bash
# hostile_host.sh - the shim never makes its host worse (ADR-146).
#
#   - no allocation inside an interposed call: tests/support/
#     libmalloccount counts malloc & co. while the program runs keep-alive
#     requests, new connections, refused connects, pipe I/O, dup and close
#     under the shim: zero (and the counter's self-test counts one);
#   - no fd beyond the configured log file: the same fd count with and
#     without the shim, one more with RESILIX_LOG_FILE; a program that
#     re-executes itself 20 times keeps a constant count (O_CLOEXEC);
#   - no thread: one thread after a guarded request;
#   - errno untouched by every successful call, libc's on failing ones;
#   - jemalloc and tcmalloc preloaded before or after the shim: 8 threads
#     of keep-alive requests all answered, and the breaker still trips.
. "$(dirname "$0")/lib.sh"
rx_require_build
HC=$RESILIX_BUILDDIR/tests/support/hostcheck
MC=$RESILIX_BUILDDIR/tests/support/.libs/libmalloccount.so
[ -x "$HC" ] || rx_fail "not built: $HC"
out=$RX_TMP/out err=$RX_TMP/err
rx_dump_on_fail "$out" "$err"

rx_upstream_start ok --phases 0:ok
P=$RX_PORT
dead=$(rx_free_port)

# Allocation. The sanitizers own malloc: this part needs a plain build.
if [ -z "$RESILIX_SANITIZE_RUNTIME" ]; then
	[ -f "$MC" ] || rx_fail "not built: $MC"
	timeout -k 2 "$RX_TIMEOUT" env LD_PRELOAD="$MC $RESILIX_SO" \
		RESILIX_MIN_CALLS=3 RESILIX_LOG=info \
		RESILIX_LOG_FILE="$RX_TMP/alloc.log" \
		"$HC" alloc "$P" "$dead" >"$out" 2>"$err" ||
		rx_fail "hostcheck alloc: exit status $?"
	rx_dump_on_fail "$RX_TMP/alloc.log"
	rx_assert_eq "allocations inside interposed calls" \
		"allocs 0 selftest 1" "$(cat "$out")"
	rx_assert_grep "the dead port's breaker opened meanwhile" \
		"key=127.0.0.1:$dead event=breaker-transition" "$RX_TMP/alloc.log"
else
	rx_log "NOTE: sanitizer build: the allocation count is skipped"
fi

# fds and threads.
plain=$(rx_plain "$HC" fds "$P") || rx_fail "hostcheck fds (plain) failed"
rx_assert_eq "fds under the shim" "$plain" "$(rx_shim "$HC" fds "$P")"
n=${plain#fds }
rx_assert_eq "fds with RESILIX_LOG_FILE" "fds $((n + 1))" \
	"$(rx_shim RESILIX_LOG_FILE="$RX_TMP/fd.log" "$HC" fds "$P")"
rx_shim RESILIX_LOG_FILE="$RX_TMP/exec.log" "$HC" exec 20 >"$out" ||
	rx_fail "exec loop: exit status $?"
rx_assert_eq "exec loop: images" 21 "$(grep -c '^exec-fds ' "$out")"
rx_assert_eq "exec loop: distinct fd counts" 1 "$(sort -u "$out" | wc -l | tr -d ' ')"
rx_assert_eq "threads under the shim" "threads 1" \
	"$(rx_shim "$HC" threads "$P")"

# errno.
rx_assert_eq "errno" "errno ok" "$(rx_shim "$HC" errno "$P")"

# Allocators, in both preload orders.
if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
	rx_log "NOTE: sanitizer build: the allocator part is skipped"
	rx_pass
fi
rx_upstream_start e500 --phases 0:status:500
found=0
for lib in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
	/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4; do
	[ -f "$lib" ] || continue
	found=$((found + 1))
	name=$(basename "$lib")
	for order in "$lib $RESILIX_SO" "$RESILIX_SO $lib"; do
		timeout -k 2 "$RX_TIMEOUT" env LD_PRELOAD="$order" \
			"$CLIENT" --port "$P" --threads 8 --requests 100 \
			--keepalive >"$out" 2>"$err" ||
			rx_fail "$name ($order): exit status $?"
		rx_assert_eq "$name, order '$order': answered" 800 \
			"$(grep -c ' 200 OK 1$' "$out")"
		timeout -k 2 "$RX_TIMEOUT" env LD_PRELOAD="$order" \
			RESILIX_MIN_CALLS=3 RESILIX_CONSECUTIVE_BACKSTOP=0 \
			"$CLIENT" --port "$(cat "$RX_TMP/up.e500.port")" \
			--requests 10 >"$out" 2>"$err" ||
			rx_fail "$name ($order): exit status $?"
		rx_assert_eq "$name, order '$order': refused after the trip" 7 \
			"$(grep -c ' ECONNREFUSED 0$' "$out")"
	done
done
[ "$found" -gt 0 ] || rx_log "NOTE: neither jemalloc nor tcmalloc is" \
	"installed (scripts/deps): the allocator part is skipped"
rx_pass
