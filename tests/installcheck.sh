#!/bin/sh
# installcheck.sh BINDIR LIBDIR PKGCONFIGDIR MANDIR CC DOCDIR VERSION - run by `make
# installcheck` (and so by `make distcheck`, in its temporary prefix):
# what `make install` put there works on its own.
#   - pkg-config resilix gives the flags to build and link a C program
#     against the installed libresilix and its headers, and it runs;
#   - the installed resilix-run finds the installed shim and the
#     installed helpers (ADR-167): --print-so, --check on a good and a bad
#     environment, --help;
#   - the man pages are there, and the documents its warnings name
#     (DOCDIR/limits.md), which it names by their installed path;
#     --version says VERSION.
# It writes only into a temporary directory.
set -u
bindir=$1 libdir=$2 pcdir=$3 mandir=$4 cc=$5 docdir=${6:-} version=${7:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/resilix-installcheck.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "installcheck: FAIL: $*" >&2
	exit 1
}
ok() { echo "installcheck: ok: $*"; }

# The library, through pkg-config.
PKG_CONFIG_PATH=$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs resilix) || fail "pkg-config resilix"
cat >"$tmp/tiny.c" <<'C'
#include <stdio.h>
#include <resilix.h>

int main(void)
{
	struct rx_breaker_config cfg;
	const char *why = NULL;

	rx_breaker_config_default(&cfg);
	if (rx_breaker_config_check(&cfg, &why) != RX_OK)
		return 1;
	printf("open_ms=%llu\n", (unsigned long long)cfg.open_ms);
	return 0;
}
C
# shellcheck disable=SC2086
$cc -o "$tmp/tiny" "$tmp/tiny.c" $flags || fail "build against the installed library ($flags)"
out=$(LD_LIBRARY_PATH=$libdir "$tmp/tiny") || fail "run the program built against it"
[ "$out" = "open_ms=5000" ] || fail "tiny printed '$out'"
ok "pkg-config --cflags --libs resilix builds and links a program ($flags)"

# The wrapper, with no RESILIX_SO and no build tree to fall back on.
unset RESILIX_SO
so=$(env -u RESILIX_SO "$bindir/resilix-run" --print-so) || fail "resilix-run --print-so"
[ "$so" = "$(cd "$libdir" && pwd)/libresilix_preload.so" ] ||
	fail "resilix-run --print-so: '$so', expected $libdir/libresilix_preload.so"
ok "installed resilix-run finds $so"
env -u RESILIX_SO RESILIX_OPEN_MS=3000 "$bindir/resilix-run" --check >"$tmp/check.out" 2>&1 ||
	{ cat "$tmp/check.out"; fail "resilix-run --check on a valid environment"; }
grep -q '^RESILIX_OPEN_MS  *3000  *environment$' "$tmp/check.out" ||
	{ cat "$tmp/check.out"; fail "--check output"; }
ok "installed resilix-run --check runs the installed resilix-config"
if env -u RESILIX_SO RESILIX_OPEN_MS=abc "$bindir/resilix-run" --check >"$tmp/bad.out" 2>&1; then
	fail "resilix-run --check accepted RESILIX_OPEN_MS=abc"
fi
ok "installed resilix-run --check refuses RESILIX_OPEN_MS=abc"
"$bindir/resilix-run" --help >/dev/null || fail "resilix-run --help"

for page in man7/resilix.7 man1/resilix-run.1; do
	[ -s "$mandir/$page" ] || fail "man page $mandir/$page missing"
done
ok "man pages resilix(7) and resilix-run(1) installed"

if [ -n "$docdir" ]; then
	for doc in limits.md config.md README.md; do
		[ -s "$docdir/$doc" ] || fail "document $docdir/$doc missing"
	done
	# The warnings name the installed copy (make install wrote docdir
	# into the wrapper), not a path of the source tree.
	grep -q "^resilix_docdir=$docdir\$" "$bindir/resilix-run" ||
		grep -q '^resilix_docdir=/' "$bindir/resilix-run" ||
		fail "the installed resilix-run does not know where the documents are"
	ok "documents installed in $docdir, and the wrapper names them there"
fi
if [ -n "$version" ]; then
	out=$("$bindir/resilix-run" --version) || fail "resilix-run --version"
	[ "$out" = "resilix-run (resilix) $version" ] ||
		fail "resilix-run --version: '$out', expected version $version"
	ok "resilix-run --version: $out"
fi
