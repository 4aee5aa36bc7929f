#!/bin/bash
# fork_faults.sh - a fork touches no page of the registry no key went to
# (ADR-666, ADR-550). A forked child walks the live keys to drop the
# limiter places of threads that did not come along; the walk read every
# one of RESILIX_MAX_KEYS entries, and each entry a process never used is
# a page of zeros the child faulted in: about a thousand page faults per
# fork at the defaults, which made a fork and _exit five times slower
# (0.65 ms against 0.12 ms) and halved the throughput of socat's forking
# relay. A process that made no call forks here, with and without the
# shim: the child's page faults may differ by a few dozen (the shim's own
# locks and words), not by one per key.
. "$(dirname "$0")/lib.sh"
rx_require_build
FF=$RESILIX_BUILDDIR/tests/support/forkfaults
[ -x "$FF" ] || rx_fail "missing $FF"

bare=$(rx_plain "$FF" 200) || rx_fail "forkfaults without the shim: $?"
guarded=$(rx_shim "$FF" 200) || rx_fail "forkfaults under the shim: $?"
rx_log "page faults per fork: $bare without the shim, $guarded with it"
rx_assert_le "page faults the shim adds to a fork (1024 keys)" \
	$((guarded - bare)) 200
many=$(rx_shim RESILIX_MAX_KEYS=8192 "$FF" 100) ||
	rx_fail "forkfaults under the shim, 8192 keys: $?"
rx_log "page faults per fork with RESILIX_MAX_KEYS=8192: $many"
rx_assert_le "page faults the shim adds to a fork (8192 keys)" \
	$((many - bare)) 200
rx_pass
