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

# rx_curl_client_usable: libcurl programs whose transfers fail hang at
# exit under a preloaded libasan (a glibc setlocale lock taken again from
# libp11-kit's destructor; not ours). In an AddressSanitizer build the
# curl_client parts are skipped with this note; ThreadSanitizer runs them.
rx_curl_client_usable() {
	case "${RESILIX_SANITIZERS:-no}" in
	*address*)
		rx_log "NOTE: curl_client is skipped in this AddressSanitizer" \
			"build (libcurl + libasan hang at exit in setlocale)"
		return 1
		;;
	esac
	return 0
}

# rx_pyup_start NAME [pyupstream options...]: start pyupstream.py on an
# ephemeral port, log in $RX_TMP/up.NAME.log; sets RX_PORT.
rx_pyup_start() {
	local name=$1 i pid
	shift
	rm -f "$RX_TMP/up.$name.port"
	: >"$RX_TMP/up.$name.log"
	timeout -k 2 60 python3 "$PYUP" --port-file "$RX_TMP/up.$name.port" \
		--log "$RX_TMP/up.$name.log" --max-seconds 50 "$@" \
		>"$RX_TMP/up.$name.out" 2>"$RX_TMP/up.$name.err" &
	pid=$!
	RX_PIDS="$RX_PIDS $pid"
	echo "$pid" >"$RX_TMP/up.$name.pid"
	for i in $(seq 1 200); do
		[ -s "$RX_TMP/up.$name.port" ] && break
		kill -0 "$pid" 2>/dev/null ||
			rx_fail "pyupstream $name did not start: $(cat "$RX_TMP/up.$name.err")"
		sleep 0.05
	done
	[ -s "$RX_TMP/up.$name.port" ] || rx_fail "pyupstream $name: no port"
	RX_PORT=$(cat "$RX_TMP/up.$name.port")
	rx_dump_on_fail "$RX_TMP/up.$name.log" "$RX_TMP/up.$name.err"
}

# rx_selfsigned: a self-signed certificate for 127.0.0.1 in
# $RX_TMP/cert.pem and $RX_TMP/key.pem.
rx_selfsigned() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
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
