#!/bin/bash
# run_warnings.sh - resilix-run warns when the shim cannot see the target
# (docs/limits.md): a statically linked binary, a Go binary, a setuid one,
# one with file capabilities run by a user other than root.
# The detection reads the ELF header itself (readelf when present, od when
# not, never `file`); a dynamic binary and a script get no warning, and the
# program runs either way.
. "$(dirname "$0")/lib.sh"
rx_need od
rx_run_setup

# A Go-like binary: a dynamic ELF with Go's build-info magic in a
# .go.buildinfo section, as Go's linker writes it (readelf names the
# section, ADR-615; od's fallback finds the magic), and one whose section
# headers are gone (e_shoff, e_shnum, e_shstrndx zeroed: sstrip's way),
# whose magic is searched for either way.
printf '\377 Go buildinf:\010\002' >gomagic
if command -v objcopy >/dev/null 2>&1; then
	objcopy --add-section .go.buildinfo=gomagic "$(type -P true)" fakego ||
		rx_fail "objcopy could not add a section"
else
	cp "$(type -P true)" fakego && cat gomagic >>fakego
fi
# zero FILE OFFSET COUNT: COUNT zero bytes written over FILE at OFFSET;
# dd runs without the sanitizer runtime the set-up preloads (under it,
# GCC 12's libasan aborts dd's aligned allocation).
zero() {
	head -c "$3" /dev/zero | env -u LD_PRELOAD dd of="$1" bs=1 seek="$2" \
		conv=notrunc 2>/dev/null || rx_fail "dd could not write $1"
}
cp "$(type -P true)" nosections
zero nosections 40 8
zero nosections 60 4
cat gomagic >>nosections
printf '#!/bin/sh\necho script ran\n' >script.sh
chmod +x script.sh fakego nosections
static=no
printf '#include <stdio.h>\nint main(void){puts("static ran");return 0;}\n' >st.c
if ${CC:-cc} -static -O2 st.c -o st >/dev/null 2>&1; then
	static=yes
else
	rx_log "NOTE: no static libc to link a static test binary: that case is skipped"
fi

TO=$(type -P timeout)
# A PATH without readelf, for the od fallback.
mkdir nobin
for t in od tr grep dirname basename env bash sh cat; do
	ln -s "$(type -P $t)" nobin/$t
done

for mode in readelf od; do
	path=$PATH
	[ $mode = od ] && path=$RX_TMP/nobin
	run() { PATH=$path "$TO" 10 "$BASH" "$RUN" -- "$@"; }
	run ./fakego >out 2>err || rx_fail "$mode: fakego exit status $?"
	rx_assert_grep "$mode: Go binary warned about" \
		'warning: ./fakego is a Go program' err
	run ./nosections >out 2>err ||
		rx_fail "$mode: nosections exit status $?"
	rx_assert_grep "$mode: Go binary without section headers warned about" \
		'warning: ./nosections is a Go program' err
	run ./script.sh >out 2>err || rx_fail "$mode: script exit status $?"
	rx_assert_eq "$mode: script: no warning" "" "$(cat err)"
	rx_assert_eq "$mode: script ran" "script ran" "$(cat out)"
	run "$(type -P true)" >out 2>err || rx_fail "$mode: true failed"
	rx_assert_eq "$mode: dynamic binary: no warning" "" "$(cat err)"
	if [ $static = yes ]; then
		run ./st >out 2>err || rx_fail "$mode: static exit status $?"
		rx_assert_grep "$mode: static binary warned about" \
			'warning: ./st is statically linked' err
		rx_assert_eq "$mode: static binary ran anyway" "static ran" \
			"$(cat out)"
	fi
done

# A file with capabilities (the security.capability xattr) run by a user
# other than root: the kernel sets AT_SECURE, as for setuid, and ld.so
# ignores LD_PRELOAD. Warned about when getcap (libcap2-bin, looked for in
# sbin too) or else python3 can tell; root gets no warning (its exec gains
# no capability, so ld.so preloads as usual). The last part of this test:
# it needs root, to set the capability and to switch user.
[ "$(id -u)" = 0 ] || rx_skip "the file-capability part needs root"
rx_need setcap setpriv
pub=$RX_TMP/pub
if ! { mkdir "$pub" && chmod 755 "$pub" && chmod 711 "$RX_TMP"; }; then
	rx_fail "cannot make $pub"
fi
cp "$RUN" "$RESILIX_SO" "$pub/" || rx_fail "cannot copy the wrapper"
cp "$(type -P true)" "$pub/captrue"
cp "$(type -P true)" "$pub/plaintrue"
setcap cap_net_raw+ep "$pub/captrue" 2>/dev/null ||
	rx_skip "cannot set file capabilities here (no CAP_SETFCAP, or no xattrs in $pub)"
timeout 10 setpriv --reuid=65534 --regid=65534 --clear-groups \
	test -r "$pub/resilix-run" ||
	rx_skip "uid 65534 cannot reach $pub (TMPDIR under a private directory?)"
# resilix-run -- PROGRAM as nobody, with nobody's usual PATH (no sbin in
# it) unless one is given, behind the command in ${pre[@]} if any.
pre=()
asuser() { # [PATH] PROGRAM
	local path=/usr/local/bin:/usr/bin:/bin
	[ $# -ge 2 ] && path=$1 && shift
	timeout 20 ${pre[@]+"${pre[@]}"} setpriv --reuid=65534 --regid=65534 \
		--clear-groups env PATH="$path" \
		RESILIX_SO="$pub/${RESILIX_SO##*/}" \
		"$BASH" "$pub/resilix-run" -- "$1"
}
capwarn="warning: $pub/captrue has file capabilities"
if command -v getcap >/dev/null 2>&1; then
	asuser "$pub/captrue" >out 2>err || rx_fail "captrue as nobody: exit status $?"
	rx_assert_grep "getcap: file capabilities warned about, as nobody" "$capwarn" err
else
	rx_log "NOTE: getcap (libcap2-bin) is not installed: that case is skipped"
fi
asuser "$pub/plaintrue" >out 2>err || rx_fail "plaintrue as nobody: exit status $?"
rx_assert_eq "no capabilities: no warning, as nobody" "" "$(cat err)"
"$TO" 10 "$BASH" "$RUN" -- "$pub/captrue" >out 2>err ||
	rx_fail "captrue as root: exit status $?"
rx_assert_eq "capabilities, as root: no warning" "" "$(cat err)"
# Without getcap: python3, else nothing. getcap is hidden in a mount
# namespace by a file that is not executable bound over it.
: >"$pub/nogetcap"
# shellcheck disable=SC2016 # expanded by the namespace's shell
hide='for g in /usr/sbin/getcap /sbin/getcap /usr/bin/getcap /bin/getcap; do
	[ -e "$g" ] && { mount --bind "$0" "$g" || exit 99; }
done; exec "$@"'
if timeout 10 unshare -m "$BASH" -c "$hide" "$pub/nogetcap" true 2>/dev/null; then
	pre=(unshare -m "$BASH" -c "$hide" "$pub/nogetcap")
	if timeout 10 setpriv --reuid=65534 --regid=65534 --clear-groups \
		env PATH=/usr/local/bin:/usr/bin:/bin python3 -c pass 2>/dev/null; then
		asuser "$pub/captrue" >out 2>err ||
			rx_fail "captrue as nobody, no getcap: exit status $?"
		rx_assert_grep "python3: file capabilities warned about, as nobody" \
			"$capwarn" err
	else
		rx_log "NOTE: nobody cannot run python3: that case is skipped"
	fi
	asuser "$RX_TMP/nobin" "$pub/captrue" >out 2>err ||
		rx_fail "captrue as nobody, neither tool: exit status $?"
	rx_assert_eq "neither getcap nor python3: no warning" "" "$(cat err)"
else
	rx_log "NOTE: no mount namespace to hide getcap in: the python3 case is skipped"
fi
rx_pass
