#!/bin/bash
# tls_passthrough.sh - every TLS entry point the shim interposes
# (SSL_write_ex, SSL_peek, SSL_peek_ex, SSL_read, SSL_read_ex, SSL_write,
# SSL_get_error, SSL_shutdown, SSL_clear, SSL_free, SSL_connect) returns
# what OpenSSL returns and leaves errno as OpenSSL left it: the C client's
# trace of each call's return value and errno is the same without the
# shim, guarded, with the destination excluded (unguarded), and with
# RESILIX_DISABLE=1 (ADR-444). python's ssl over a memory BIO (asyncio)
# is left to the socket layer, as before (ADR-441).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
. "$(dirname "$0")/tls_lib.sh"
rx_require_build
rx_need python3 openssl

ran=""
if rx_tls_client_ok; then
	rx_tls_up ok --default 200
	rx_plain "$TLS_CLIENT" --port "$RX_PORT" --entry-points \
		>"$RX_TMP/plain.out" 2>&1
	rx_dump_on_fail "$RX_TMP/plain.out"
	rx_assert_eq "trace without the shim: lines" 12 \
		"$(wc -l <"$RX_TMP/plain.out" | tr -d ' ')"
	for mode in guarded excluded disabled; do
		case $mode in
		guarded) env=(RESILIX_LOG=debug) ;;
		excluded) env=(RESILIX_LOG=debug RESILIX_EXCLUDE=127.0.0.1) ;;
		disabled) env=(RESILIX_DISABLE=1) ;;
		esac
		rx_shim "${env[@]}" "$TLS_CLIENT" --port "$RX_PORT" \
			--entry-points >"$RX_TMP/$mode.out" 2>"$RX_TMP/$mode.err"
		rx_dump_on_fail "$RX_TMP/$mode.out" "$RX_TMP/$mode.err"
		rx_assert_eq "trace $mode: the same as without the shim" \
			"$(cat "$RX_TMP/plain.out")" "$(cat "$RX_TMP/$mode.out")"
	done
	rx_assert_eq "guarded: two calls, each settled once" 2 \
		"$(grep -c 'event=settle verdict=success' "$RX_TMP/guarded.err")"
	rx_assert_eq "excluded: nothing settled" 0 \
		"$(grep -c 'event=settle' "$RX_TMP/excluded.err")"
	rx_upstream_stop ok
	ran="$ran tls_client"
fi

if rx_py_usable; then
	# asyncio speaks TLS through a memory BIO: no socket to tie, so the
	# TLS layer stands aside and the socket layer's default rule holds.
	rx_tls_up aio --default 500
	cat >"$RX_TMP/aio.py" <<'PYEOF'
import asyncio, ssl, sys
async def main(port):
    ctx = ssl._create_unverified_context()
    for i in range(3):
        r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
        w.write(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        print(i, (await r.readline()).decode().split()[1], flush=True)
        w.close()
asyncio.run(main(int(sys.argv[1])))
PYEOF
	err=$RX_TMP/aio.err
	rx_dump_on_fail "$err"
	rx_shim RESILIX_LOG=debug "$PY" "$RX_TMP/aio.py" "$RX_PORT" \
		>"$RX_TMP/aio.out" 2>"$err"
	rx_assert_eq "asyncio: every request answered" 3 \
		"$(grep -c '^[0-9] 500$' "$RX_TMP/aio.out")"
	rx_assert_eq "asyncio: the socket layer's first-byte rule" 3 \
		"$(grep -c 'event=settle verdict=success' "$err")"
	rx_upstream_stop aio
	ran="$ran asyncio"
fi
[ -n "$ran" ] || rx_pass "nothing could run in this build"
rx_pass "ran:$ran"
