#!/bin/sh
# layout.sh - the source layout's rules (ADR-310): no .c file in src/ or
# preload/ over 1000 lines, no header over 400, and no cycle in the graph
# of #include "..." among their files. A quoted include is resolved next
# to the including file, then in src/ (the -I the build uses); system
# headers and the build's config.h are not part of the graph.
srcdir=${RESILIX_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$srcdir" || exit 1
status=0
files=$(find src preload -name '*.[ch]' | sort)
for f in $files; do
	n=$(wc -l <"$f")
	case $f in
	*.c) max=1000 ;;
	*) max=400 ;;
	esac
	if [ "$n" -gt "$max" ]; then
		echo "layout: $f has $n lines (at most $max)"
		status=1
	fi
done

# The edges "from to", one a line.
edges=$(for f in $files; do
	d=$(dirname "$f")
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
		while read -r inc; do
			if [ -f "$d/$inc" ]; then
				echo "$f $(cd "$(dirname "$d/$inc")" && pwd | sed "s|^$srcdir/||")/$(basename "$inc")"
			elif [ -f "src/$inc" ]; then
				echo "$f src/$inc"
			fi
		done
done)

# Kahn's algorithm with tsort: it reports a cycle on stderr.
cycle=$(printf '%s\n' "$edges" | grep . | tsort 2>&1 >/dev/null)
if [ -n "$cycle" ]; then
	echo "layout: include cycle:"
	printf '%s\n' "$cycle"
	status=1
fi
[ $status -eq 0 ] && echo "layout: $(echo "$files" | wc -l) files," \
	"$(printf '%s\n' "$edges" | grep -c .) include edges, no cycle"
exit $status
