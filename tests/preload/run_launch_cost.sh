#!/bin/bash
# run_launch_cost.sh - resilix-run starts no helper process to read an ELF
# header (ADR-614). The README's loop runs resilix-run once per URL, and
# every od it started to read four or six bytes (the shim's ELF magic, the
# program's class) cost as much as the shell itself: two of them made a
# launch some 9 ms slower, for bytes the shell reads with its own read.
# And it searched the whole program for Go's build-info magic with grep -
# 135 ms for a 99 MB node at every launch - where readelf, run anyway,
# names the section that holds it (ADR-615). An od and a grep on PATH
# that record their runs show they are gone, and the checks they made
# still hold: a shared object that is not ELF is refused (exit 2, also
# one with a NUL byte inside the magic), and an ELF program runs.
. "$(dirname "$0")/lib.sh"
rx_run_setup
TO=$(type -P timeout)
real_od=$(type -P od) || rx_skip "no od to watch"
mkdir spy
printf '#!/bin/sh\necho "od $*" >>%s/spy.log\nexec %s "$@"\n' \
	"$RX_TMP" "$real_od" >spy/od
spied="od runs"
if command -v readelf >/dev/null 2>&1; then
	# grep is used only where readelf is missing.
	printf '#!/bin/sh\necho "grep $*" >>%s/spy.log\nexec %s "$@"\n' \
		"$RX_TMP" "$(type -P grep)" >spy/grep
	spied="od and grep runs"
fi
chmod +x spy/*
run() { PATH=$RX_TMP/spy:$PATH "$TO" 10 "$BASH" "$RUN" "$@"; }

run -- true || rx_fail "resilix-run -- true: exit status $?"
run --open-ms 5000 -- true || rx_fail "with an option: exit status $?"
rx_assert_eq "$spied for a launch" 0 "$( (cat spy.log 2>/dev/null) | wc -l)"

# The magic is still checked, exactly: no ELF magic, or a NUL in it.
printf 'not an elf file' >notelf.so
printf '\177\000ELF and more' >nul.so
for so in notelf.so nul.so; do
	RESILIX_SO=$RX_TMP/$so run -- true 2>err
	rx_assert_eq "$so refused" 2 "$?"
	rx_assert_grep "$so named" "$so is not an ELF shared object" err
done
rx_pass
