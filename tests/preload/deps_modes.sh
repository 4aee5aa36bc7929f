#!/bin/bash
# deps_modes.sh - scripts/deps installs what the command that calls it
# uses, and says so (ADR-344). `scripts/demo` installed nginx-light,
# jemalloc, tcmalloc and prometheus-client - which only tests use - and
# nginx-light enabled nginx.service at boot. Now `scripts/deps demo` is
# the toolchain, CUnit, curl and python3; `scripts/deps test` adds what
# the tests use; each lists its packages and why (--list), and a call
# without a mode is a usage error. The demo and the test command call
# their own mode. Nothing here installs anything.
. "$(dirname "$0")/lib.sh"
DEPS=$RESILIX_SRCDIR/scripts/deps
out=$RX_TMP/out
rx_dump_on_fail "$out"
timeout 10 bash "$DEPS" demo --list >"$out" 2>&1
rx_assert_eq "deps demo --list: exit status" 0 "$?"
for p in build-essential autoconf automake libtool pkg-config libcunit1-dev curl python3; do
	rx_assert_grep "the demo uses $p" "^  $p \\(" "$out"
done
for p in nginx-light libjemalloc2 libtcmalloc-minimal4 python3-prometheus-client \
	libcurl4-openssl-dev openssl git libcap2-bin postgresql redis-server \
	redis-tools strace netcat-openbsd python3-psycopg2 gnutls-bin; do
	rx_assert_no_grep "the demo does not install $p" "^  $p \\(" "$out"
done
timeout 10 bash "$DEPS" test --list >"$out" 2>&1
rx_assert_eq "deps test --list: exit status" 0 "$?"
for p in build-essential libcunit1-dev curl python3 nginx-light libjemalloc2 \
	libtcmalloc-minimal4 python3-prometheus-client libcurl4-openssl-dev openssl \
	git libcap2-bin postgresql redis-server redis-tools python3-psycopg2 gnutls-bin; do
	rx_assert_grep "the tests use $p" "^  $p \\(" "$out"
done
# Packages no test uses.
for p in strace netcat-openbsd; do
	rx_assert_no_grep "the tests do not install $p" "^  $p \\(" "$out"
done
rx_assert_grep "nginx-light is there without its service" \
	'^  nginx-light \(.*service is not enabled' "$out"
timeout 10 bash "$DEPS" >"$out" 2>&1
rx_assert_eq "deps without a mode: a usage error" 2 "$?"
timeout 10 bash "$DEPS" demo --check >"$out" 2>&1
rx_assert_eq "deps demo --check on this machine (the build ran): nothing missing" 0 "$?"
# Each caller asks for its own mode.
rx_assert_grep "scripts/demo asks for the demo's packages" \
	'"\$root/scripts/deps" demo$' "$RESILIX_SRCDIR/scripts/demo"
rx_assert_grep "scripts/test asks for the tests' packages" \
	'"\$root/scripts/deps" test$' "$RESILIX_SRCDIR/scripts/test"
# An install stops no service from starting but its own: the policy-rc.d
# is put in place only where none exists, and nginx.service is disabled.
rx_assert_grep "a policy-rc.d refuses starts during the install" \
	'exit 101' "$DEPS"
rx_assert_grep "nginx.service is disabled after it" \
	'systemctl disable --quiet nginx.service' "$DEPS"
rx_pass
