#!/bin/bash
# test_summary.sh - scripts/test's closing lines, from synthetic logs:
# the distcheck line names the archive (the grep of "archives ready for
# distribution:" printed that line alone, the name being on the next),
# and the final count includes distcheck's own `make check`, whose build
# tree is gone by then (it was left out).
. "$(dirname "$0")/lib.sh"
T=$RESILIX_SRCDIR/scripts/test
root=$RX_TMP/tree main=_build quick=no
mkdir -p "$root/_build" "$root/_build-asan"
printf '# TOTAL: 12\n# PASS:  10\n# SKIP:  1\n# XFAIL: 0\n# FAIL:  1\n# XPASS: 0\n# ERROR: 0\n' \
	>"$root/_build/test-suite.log"
printf '# TOTAL: 5\n# PASS:  5\n# SKIP:  0\n# FAIL:  0\n# ERROR: 0\n' \
	>"$root/_build-asan/test-suite.log"
cat >"$root/_build/distcheck.log" <<'LOG'
# TOTAL: 7
# PASS:  6
# SKIP:  1
# XFAIL: 0
# FAIL:  0
# XPASS: 0
# ERROR: 0
installcheck: ok: documents
=================================================
resilix-0.1.0 archives ready for distribution: 
resilix-0.1.0.tar.gz
=================================================
LOG
for f in summary distcheck_archive; do
	def=$(sed -n "/^$f() {/,/^}/p" "$T")
	[ -n "$def" ] || rx_fail "scripts/test has no function $f"
	eval "$def"
done
got=$(distcheck_archive "$root/_build")
rx_assert_eq "the distcheck line names the archive" \
	"resilix: distcheck: archive ready for distribution: $root/_build/resilix-0.1.0.tar.gz" "$got"
got=$(summary)
rx_assert_eq "the final line counts every run, distcheck's too" \
	"resilix: 21 passed, 1 failed, 2 skipped (runs: normal asan distcheck)" "$got"
quick=yes
got=$(summary)
rx_assert_eq "--quick: the normal build only" \
	"resilix: 10 passed, 1 failed, 1 skipped (runs: normal)" "$got"
rx_pass
