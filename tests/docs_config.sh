#!/bin/bash
# docs_config.sh - every RESILIX_ variable the shim reads (the parser's
# tables in preload/config.c and preload/config_policy.c) is documented in docs/config.md and in the
# resilix(7) man page, and neither documents a variable the shim does not
# read (names it reserves for later, or tools' names, are allowed in
# docs/config.md's "Names that are not variables" only); and every option
# of resilix-run is in resilix-run(1).
set -u
src=${RESILIX_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/resilix-docs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0

# Names in the parser's table: {"RESILIX_X", F_...
sed -n 's/^[[:space:]]*{"\(RESILIX_[A-Z0-9_]*\)", *[FP]_.*/\1/p' \
	"$src/preload/config.c" "$src/preload/config_policy.c" |
	sort -u >"$tmp/code"
# Names the parser knows but does not read (reserved, tooling).
awk '/^static const char \*const (reserved|tooling)\[\]/,/^};/' \
	"$src/preload/config.c" |
	sed -n 's/^[[:space:]]*"\(RESILIX_[A-Z0-9_]*\)",.*/\1/p' |
	sort -u >"$tmp/other"
[ -s "$tmp/code" ] || { echo "FAIL: no variables found in preload/config.c"; exit 1; }

# docs/config.md: variables are the first cell of a table row.
sed -n 's/^| `\(RESILIX_[A-Z0-9_]*\)`.*/\1/p' "$src/docs/config.md" |
	sort -u >"$tmp/md"
# resilix(7): a .TP entry's tag line ".B RESILIX_X".
awk 'prev ~ /^\.TP/ { if ($1 == ".B" && $2 ~ /^RESILIX_/) print $2 } { prev = $0 }' \
	"$src/docs/man/resilix.7" | sort -u >"$tmp/man"

check() { # WHAT LEFT RIGHT: names in LEFT missing from RIGHT
	local missing
	missing=$(comm -23 "$2" "$3")
	if [ -n "$missing" ]; then
		echo "FAIL: $1:" $missing
		status=1
	else
		echo "ok: $1"
	fi
}
check "read by the shim, not in docs/config.md" "$tmp/code" "$tmp/md"
check "read by the shim, not in resilix(7)" "$tmp/code" "$tmp/man"
check "in docs/config.md's tables, not read by the shim" "$tmp/md" "$tmp/code"
check "in resilix(7), not read by the shim" "$tmp/man" "$tmp/code"
# Any other RESILIX_ name mentioned in either document must be one the
# parser knows (reserved or tooling) - no stale names.
grep -ho 'RESILIX_[A-Z0-9_]*[A-Z0-9]' "$src/docs/config.md" "$src/docs/man/resilix.7" |
	sort -u >"$tmp/mentioned"
sort -u "$tmp/code" "$tmp/other" >"$tmp/known"
check "mentioned in the docs, unknown to the parser" "$tmp/mentioned" "$tmp/known"

# resilix-run(1) names every option of scripts/resilix-run: the table of
# options that set a variable ([--open-ms]=RESILIX_OPEN_MS) and the case
# labels of the others (--check), as "\-\-name" in the roff source.
{
	sed -n 's/^[[:space:]]*\[\(--[a-z0-9-]*\)\]=RESILIX_.*/\1/p' "$src/scripts/resilix-run"
	sed -n 's/^[[:space:]]*\(--[a-z][a-z0-9-]*\)\( | --[a-z-]*\)*)$/\1/p' "$src/scripts/resilix-run"
} | sort -u >"$tmp/opts"
grep -o '\\-\\-[a-z][a-z0-9\\-]*' "$src/docs/man/resilix-run.1" |
	sed 's/\\-/-/g' | sort -u >"$tmp/manopts"
check "options of resilix-run, not in resilix-run(1)" "$tmp/opts" "$tmp/manopts"
echo "$(wc -l <"$tmp/code" | tr -d ' ') variables and" \
	"$(wc -l <"$tmp/opts" | tr -d ' ') options checked"
# The decisions' index is what scripts/adr-index makes of the entries, and
# every ADR the tree cites is an entry.
python3 "$src/scripts/adr-index" --check "$src/docs/decisions.md" || status=1
python3 "$src/scripts/adr-index" --refs "$src/src" "$src/preload" \
	"$src/tests" "$src/scripts" "$src/docs" "$src/README.md" \
	"$src/CONTRIBUTING.md" "$src/Makefile.am" \
	--file "$src/docs/decisions.md" || status=1
exit $status
