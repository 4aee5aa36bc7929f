# tls_lib.sh - helpers of the TLS layer's tests, sourced after lib.sh and
# curl_lib.sh (ADR-440 to ADR-445).
#
# PY is Debian's /usr/bin/python3, whose _ssl module links the system
# libssl that the shim's OpenSSL adapter binds (another python3 first in
# PATH may carry its own OpenSSL). TLS_CLIENT is tests/support/tls_client,
# built only when OpenSSL's headers were found. rx_tls_up starts the
# python upstream with TLS on a self-signed certificate made in $RX_TMP.

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || echo python3)
TLS_CLIENT=$RESILIX_BUILDDIR/tests/support/tls_client

# rx_tls_up NAME [pyupstream options...]: an HTTPS upstream; sets RX_PORT.
rx_tls_up() {
	[ -s "$RX_TMP/cert.pem" ] || rx_selfsigned
	rx_pyup_start "$@" --tls "$RX_TMP/cert.pem" "$RX_TMP/key.pem"
}

# rx_tls_client_ok: whether the OpenSSL test client was built.
rx_tls_client_ok() {
	if [ ! -x "$TLS_CLIENT" ]; then
		rx_log "NOTE: built without OpenSSL's headers: no $TLS_CLIENT," \
			"its part of $RX_NAME is skipped"
		return 1
	fi
	return 0
}

# rx_py_usable: whether $PY runs with this build's preload.
rx_py_usable() {
	rx_usable "$PY"
}

# $URLLIB N URL (run with "$PY"): N urllib requests to URL, a new
# connection each, the certificate unverified; one line each, "I STATUS
# BODY", "I STATUS" for an HTTP error, or "I ExceptionName reason" - what
# the program sees.
URLLIB=$RX_TMP/urllib_client.py
cat >"$URLLIB" <<'PYEOF'
import ssl, sys, urllib.request, urllib.error
n, url = int(sys.argv[1]), sys.argv[2]
ctx = ssl._create_unverified_context()
for i in range(n):
    try:
        r = urllib.request.urlopen(url, context=ctx, timeout=5)
        print(i, r.status, r.read().decode().strip(), flush=True)
    except urllib.error.HTTPError as e:
        print(i, e.code, flush=True)
    except Exception as e:
        print(i, type(e).__name__, getattr(e, "reason", e), flush=True)
PYEOF

# $HTTPCLIENT N PORT PATH: N requests on one kept-alive http.client
# connection (a new one after an error): "I STATUS BODY" or "I
# ExceptionName detail".
HTTPCLIENT=$RX_TMP/httpclient_client.py
cat >"$HTTPCLIENT" <<'PYEOF'
import http.client, ssl, sys
n, port, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = ssl._create_unverified_context()
c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
for i in range(n):
    try:
        c.request("GET", "%s%d" % (path, i))
        r = c.getresponse()
        print(i, r.status, r.read().decode().strip(), flush=True)
    except Exception as e:
        print(i, type(e).__name__, e, flush=True)
        c.close()
PYEOF
