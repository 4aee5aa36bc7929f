#!/bin/bash
# kept_pin.sh - the pin a thread keeps between a close and its next
# connect to the same key (ADR-546) never holds a key the registry needs.
#
# With RESILIX_MAX_KEYS=2, two threads each make a request to a key of its
# own and end; a third key must then find room: the pins the threads kept
# went back at their exit. Two threads that made their requests and stay
# alive keep their pins; a forked child must still find room for a key of
# its own: the pins of the threads that did not come along went back in
# the child. And one thread alternating between keys never runs out of
# room, and its calls are all guarded. A kept pin of a key idle past its
# TTL is given back, and the key starts afresh.
# room, and its calls are all guarded.
#
# A full registry takes the kept pins back (ADR-595): two threads that
# made two requests each (the second keeps its pin) and stay alive do not
# keep a third key out; nor does a pin given back on a thread after its
# slot went (a thread-specific key's destructor, run after the shim's,
# that connects and closes).
. "$(dirname "$0")/lib.sh"
rx_require_build
rx_need python3 "${CC:-cc}"

rx_upstream_start a --phases 0:ok:0
A=$RX_PORT
rx_upstream_start b --phases 0:ok:0
B=$RX_PORT
rx_upstream_start c --phases 0:ok:0
C=$RX_PORT

cat >"$RX_TMP/prog.py" <<'PY'
import os, socket, sys, threading, time
mode = sys.argv[1]
ports = [int(p) for p in sys.argv[2:]]
REQ = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

def req(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(REQ)
    ok = s.recv(4096).startswith(b"HTTP/1.1 200")
    s.close()
    return ok

if mode == "exit":
    for p in ports[:2]:
        t = threading.Thread(target=req, args=(p,))
        t.start()
        t.join()
    print("third key", req(ports[2]))
elif mode == "fork":
    done, hold = threading.Event(), threading.Event()
    def worker(p):
        req(p)
        done.set()
        hold.wait()
    ts = []
    for p in ports[:2]:
        done.clear()
        t = threading.Thread(target=worker, args=(p,))
        t.start()
        done.wait()
        ts.append(t)
    pid = os.fork()
    if pid == 0:
        print("child key", req(ports[2]), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    hold.set()
    for t in ts:
        t.join()
elif mode == "ttl":
    # Two kernel refusals in a row, a pause, a third: three in a row trip
    # the circuit unless the key idled past its TTL in the pause and
    # started afresh. Then the port listens: is the circuit open?
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    def attempt():
        c = socket.socket()
        try:
            c.connect(("127.0.0.1", port))
            return "ok"
        except ConnectionRefusedError:
            return "refused"
        finally:
            c.close()
    attempt()
    attempt()
    time.sleep(ports[0] / 1000)
    attempt()
    s.listen(8)
    print("after", attempt())
elif mode == "idle":
    done, hold = threading.Event(), threading.Event()
    def worker(p):
        req(p)
        req(p)
        done.set()
        hold.wait()
    ts = []
    for p in ports[:2]:
        done.clear()
        t = threading.Thread(target=worker, args=(p,))
        t.start()
        done.wait()
        ts.append(t)
    print("third key", req(ports[2]), flush=True)
    hold.set()
    for t in ts:
        t.join()
else:
    n = sum(req(ports[i % 3]) for i in range(9))
    print("alternating", n)
PY

out=$RX_TMP/prog.out err=$RX_TMP/prog.err
rx_dump_on_fail "$out" "$err"
for mode in exit fork alternate idle; do
	rx_shim RESILIX_LOG=debug RESILIX_MAX_KEYS=2 python3 "$RX_TMP/prog.py" \
		"$mode" "$A" "$B" "$C" >"$out" 2>"$err" ||
		rx_fail "$mode: exit status $?"
	rx_assert_no_grep "$mode: the registry ran out of room" \
		'event=registry-full' "$err"
done
rx_shim RESILIX_LOG=debug RESILIX_MAX_KEYS=2 python3 "$RX_TMP/prog.py" \
	exit "$A" "$B" "$C" >"$out" 2>"$err" || rx_fail "exit: exit status $?"
rx_assert_grep "exit: the third key answered" '^third key True$' "$out"
rx_assert_grep "exit: the third key's call was guarded" \
	"key=127.0.0.1:$C event=settle verdict=success" "$err"
rx_shim RESILIX_LOG=debug RESILIX_MAX_KEYS=2 python3 "$RX_TMP/prog.py" \
	fork "$A" "$B" "$C" >"$out" 2>"$err" || rx_fail "fork: exit status $?"
rx_assert_grep "fork: the child's key answered" '^child key True$' "$out"
rx_assert_grep "fork: the child's call was guarded" \
	"key=127.0.0.1:$C event=settle verdict=success" "$err"
rx_shim RESILIX_LOG=debug RESILIX_MAX_KEYS=2 python3 "$RX_TMP/prog.py" \
	alternate "$A" "$B" "$C" >"$out" 2>"$err" ||
	rx_fail "alternate: exit status $?"
rx_assert_grep "alternate: every request answered" '^alternating 9$' "$out"
rx_assert_eq "alternate: every call guarded" 9 \
	"$(grep -c 'event=settle verdict=success' "$err")"
# The same without a log: a connect takes its thread's kept pin and is
# admitted on it in one pass (ADR-575, ADR-576).
rx_shim RESILIX_MAX_KEYS=2 python3 "$RX_TMP/prog.py" \
	alternate "$A" "$B" "$C" >"$out" 2>"$err" ||
	rx_fail "alternate, no log: exit status $?"
rx_assert_grep "alternate, no log: every request answered" \
	'^alternating 9$' "$out"
# A kept pin whose key idled past its TTL is not taken: the key starts
# afresh, as a close's unpinned key would (ADR-546, ADR-575); one used
# within it carries the key's failures on.
for pause in 0:refused 700:ok; do
	rx_shim RESILIX_CONSECUTIVE_BACKSTOP=3 RESILIX_OPEN_MS=600000 \
		RESILIX_KEY_TTL_MS=200 python3 "$RX_TMP/prog.py" \
		ttl "${pause%%:*}" >"$out" 2>"$err" ||
		rx_fail "ttl ${pause%%:*} ms: exit status $?"
	rx_assert_grep "ttl: after a pause of ${pause%%:*} ms" \
		"^after ${pause#*:}\$" "$out"
done
rx_shim RESILIX_LOG=debug RESILIX_MAX_KEYS=2 python3 "$RX_TMP/prog.py" \
	idle "$A" "$B" "$C" >"$out" 2>"$err" || rx_fail "idle: exit status $?"
rx_assert_grep "idle: the third key answered" '^third key True$' "$out"
rx_assert_grep "idle: the third key's call was guarded" \
	"key=127.0.0.1:$C event=settle verdict=success" "$err"

# A destructor that runs after the shim's connects on the exiting thread.
cat >"$RX_TMP/dtor.c" <<'EOC'
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
static int port[2];
static pthread_key_t late;
static int req(int p)
{
	static const char r[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(p)};
	char b[64];
	int s = socket(AF_INET, SOCK_STREAM, 0), ok;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = connect(s, (void *)&a, sizeof a) == 0 &&
	     write(s, r, sizeof r - 1) == sizeof r - 1 &&
	     read(s, b, sizeof b) > 12 && strncmp(b, "HTTP/1.1 200", 12) == 0;
	close(s);
	return ok;
}
static void dtor(void *v)
{
	(void)v;
	req(port[0]);
}
static void *thread(void *v)
{
	(void)v;
	req(port[0]);
	req(port[0]); /* the shim's thread key exists now */
	pthread_key_create(&late, dtor);
	pthread_setspecific(late, &late);
	return NULL;
}
int main(int argc, char **argv)
{
	pthread_t t;
	port[0] = atoi(argv[1]);
	port[1] = atoi(argv[2]);
	pthread_create(&t, NULL, thread, NULL);
	pthread_join(t, NULL);
	printf("other key %d\n", req(port[1]));
	return 0;
}
EOC
"${CC:-cc}" -O2 -pthread -o "$RX_TMP/dtor" "$RX_TMP/dtor.c" ||
	rx_fail "cannot build the test program"
rx_shim RESILIX_LOG=debug RESILIX_MAX_KEYS=1 "$RX_TMP/dtor" "$A" "$B" \
	>"$out" 2>"$err" || rx_fail "dtor: exit status $?"
rx_assert_grep "dtor: the other key answered" '^other key 1$' "$out"
rx_assert_no_grep "dtor: the registry ran out of room" \
	'event=registry-full' "$err"
rx_assert_grep "dtor: the other key's call was guarded" \
	"key=127.0.0.1:$B event=settle verdict=success" "$err"
rx_pass
