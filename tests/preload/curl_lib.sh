# curl_lib.sh - helpers of the curl layer's tests, sourced after lib.sh.
#
# CURL_CLIENT is tests/support/curl_client (built only when libcurl's
# headers were found); PYUP is tests/support/pyupstream.py, the upstream
# that answers by path and speaks TLS. Its request log has the columns of
# tests/support/upstream's, so rx_count works on it.

CURL_CLIENT=$RESILIX_BUILDDIR/tests/support/curl_client
PYUP=$RESILIX_SRCDIR/tests/support/pyupstream.py

# rx_need_curl_client: skip (77) when the build has no libcurl program.
rx_need_curl_client() {
	if [ ! -x "$CURL_CLIENT" ]; then
		echo "SKIP: $RX_NAME: built without libcurl (no $CURL_CLIENT)"
		exit 77
	fi
}

# rx_curl_client_usable: whether curl_client runs in this build. Some
# libcurl programs hang under a preloaded libasan (a glibc setlocale lock
# taken again from libp11-kit's destructor; not ours): a probe transfer to
# a closed port tells, once per test, and a hang skips curl_client's part
# of the test with a note. It runs in every build we know of, since it is
# instrumented itself.
rx_curl_client_usable() {
	if [ -z "${RX_CURL_CLIENT_OK:-}" ]; then
		RX_CURL_CLIENT_OK=no
		if [ -x "$CURL_CLIENT" ] && rx_shim RESILIX_DISABLE=1 \
			"$CURL_CLIENT" --requests 1 --timeout-ms 500 \
			"http://127.0.0.1:$(rx_free_port)/" >/dev/null 2>&1; then
			RX_CURL_CLIENT_OK=yes
		else
			rx_log "NOTE: curl_client cannot run in this build; its" \
				"part of $RX_NAME is skipped"
		fi
	fi
	[ "$RX_CURL_CLIENT_OK" = yes ]
}

# rx_libcurl_tools_usable NAME: uninstrumented programs that load libcurl
# (git-remote-http) hang with libasan preloaded (see above), and with
# libtsan preloaded git's own signal handlers are reported and it hangs;
# skipped in sanitizer builds, with a note.
rx_libcurl_tools_usable() {
	if [ -n "$RESILIX_SANITIZE_RUNTIME" ]; then
		rx_log "NOTE: $1 (uninstrumented, loads libcurl) cannot run" \
			"with $RESILIX_SANITIZE_RUNTIME preloaded; skipped in" \
			"this build"
		return 1
	fi
	return 0
}

# rx_pyup_start NAME [pyupstream options...]: start pyupstream.py on an
# ephemeral port, log in $RX_TMP/up.NAME.log; sets RX_PORT.
rx_pyup_start() {
	local name=$1
	shift
	rm -f "$RX_TMP/up.$name.port"
	: >"$RX_TMP/up.$name.log"
	timeout -k 2 60 python3 "$PYUP" --port-file "$RX_TMP/up.$name.port" \
		--log "$RX_TMP/up.$name.log" --max-seconds 50 "$@" \
		>"$RX_TMP/up.$name.out" 2>"$RX_TMP/up.$name.err" &
	rx_await_port "$name" $! pyupstream
	rx_dump_on_fail "$RX_TMP/up.$name.log" "$RX_TMP/up.$name.err"
}

# rx_selfsigned: a self-signed certificate for 127.0.0.1 in
# $RX_TMP/cert.pem and $RX_TMP/key.pem.
rx_selfsigned() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 \
		-keyout "$RX_TMP/key.pem" -out "$RX_TMP/cert.pem" \
		>/dev/null 2>&1 || rx_fail "openssl could not make a certificate"
}

# rx_settles FILE [AT]: settlements the shim logged (debug), optionally
# only those made at AT (curl, first-byte, eof, ...).
rx_settles() {
	if [ $# -ge 2 ]; then
		grep 'event=settle ' "$1" 2>/dev/null | grep -cE " at=$2( |$)" | tr -d ' '
	else
		grep -c 'event=settle ' "$1" 2>/dev/null | tr -d ' '
	fi
}
