#!/bin/bash
# exports.sh - the shim exports exactly the libc names it interposes.
#
# libresilix_preload.so is built with -fvisibility=hidden, core included:
# anything else in its dynamic symbol table would interpose a symbol of
# the host program or of another library (a core function named like the
# application's own), or grow an ABI nobody promised. The list below is
# the contract; a wrapper added to preload/ must be added here too. The
# curl_easy_* names are the curl layer's (preload/curl.c, ADR-150); the
# SSL_* and gnutls_* names the TLS layer's (preload/tls_openssl.c,
# preload/tls_gnutls.c, ADR-444).
#
# Tolerated besides the list: symbols the toolchain puts in every shared
# object (_init, _fini, and the section markers of older linkers), and
# those a sanitizer build adds (__asan_*, __ubsan_*, __tsan_*, ...).
. "$(dirname "$0")/lib.sh"
rx_need nm
[ -f "$RESILIX_SO" ] || rx_fail "shim not built: $RESILIX_SO"

expected="_Exit
__close
__connect
__dup2
__fcntl
__longjmp_chk
__read
__read_chk
__recv_chk
__recvfrom_chk
__send
__write
_exit
_longjmp
accept
accept4
close
close_range
closefrom
connect
curl_easy_cleanup
curl_easy_duphandle
curl_easy_getinfo
curl_easy_init
curl_easy_perform
curl_easy_reset
curl_easy_setopt
dup
dup2
dup3
fclose
fcloseall
fcntl
fcntl64
getaddrinfo
getsockopt
ioctl
longjmp
preadv2
preadv64v2
pwritev2
pwritev64v2
read
readv
recv
recvfrom
recvmmsg
recvmsg
SSL_clear
SSL_connect
SSL_do_handshake
SSL_free
SSL_get_error
SSL_peek
SSL_peek_ex
SSL_read
SSL_read_ex
SSL_shutdown
SSL_write
SSL_write_ex
gnutls_bye
gnutls_deinit
gnutls_handshake
gnutls_record_recv
gnutls_record_send
send
sendfile
sendfile64
sendmmsg
sendmsg
sendto
shutdown
siglongjmp
socket
splice
syscall
write
writev"

got=$RX_TMP/exports
nm -D --defined-only "$RESILIX_SO" >"$RX_TMP/nm.out" ||
	rx_fail "nm -D failed on $RESILIX_SO"
# nm prints "ADDRESS TYPE NAME"; strip version suffixes (name@@VER).
awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' "$RX_TMP/nm.out" |
	grep -Ev '^(_init|_fini|_edata|_end|__bss_start)$' |
	grep -Ev '^_*(asan|ubsan|tsan|sanitizer|lsan|odr_asan)' |
	LC_ALL=C sort -u >"$got"
printf '%s\n' "$expected" | LC_ALL=C sort -u >"$RX_TMP/expected"
rx_dump_on_fail "$RX_TMP/nm.out"

extra=$(LC_ALL=C comm -13 "$RX_TMP/expected" "$got" | paste -sd' ')
missing=$(LC_ALL=C comm -23 "$RX_TMP/expected" "$got" | paste -sd' ')
rx_assert_eq "exported symbols that are not interposed libc names" "" "$extra"
rx_assert_eq "interposed libc names that are not exported" "" "$missing"

# Every exported name must be a function (T), never data or a weak alias
# that a later library could silently override.
nonfunc=$(awk 'NF >= 3 && $2 != "T" { print $3 }' "$RX_TMP/nm.out" |
	grep -Ev '^(_init|_fini|_edata|_end|__bss_start)$' |
	grep -Ev '^_*(asan|ubsan|tsan|sanitizer|lsan|odr_asan)' | paste -sd' ')
rx_assert_eq "exported names that are not plain functions" "" "$nonfunc"

# The shim loads nothing but libc (and, in a sanitizer build, the
# sanitizer's runtime): every further object is mapped, relocated and
# searched by every symbol lookup of every process it starts in -
# libm alone cost a curl process 380,000 instructions (ADR-530). Nor
# may it leave a libm function undefined (a build at -O0 calls floor
# where -O2 inlines it).
if command -v readelf >/dev/null 2>&1; then
	needed=$(readelf -d "$RESILIX_SO" |
		sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
		grep -Ev '^(libc\.so\.|ld-linux|libdl\.so\.|libpthread\.so\.)' |
		grep -Ev '^lib(asan|ubsan|tsan|lsan)' |
		# A sanitizer build's link adds libm for its runtime; that no
		# function of it is called is checked below in every build.
		{ if [ -n "${RESILIX_SANITIZERS:-}" ] &&
			[ "$RESILIX_SANITIZERS" != no ]; then
			grep -Ev '^libm\.so\.'
		else cat; fi; } | paste -sd' ')
	rx_assert_eq "objects the shim needs besides libc" "" "$needed"
fi
mathu=$(nm -D --undefined-only "$RESILIX_SO" | awk '{ sub(/@.*/, "", $2); print $2 }' |
	grep -Ex '(floor|ceil|trunc|round|log|log10|log2|exp|exp2|pow|sqrt|fmin|fmax|fabs|fmod|modf|ldexp|frexp)f?' |
	paste -sd' ')
rx_assert_eq "libm functions the shim calls" "" "$mathu"
rx_pass "$(wc -l <"$got" | tr -d ' ') names"
