#!/usr/bin/env python3
"""wirecap.py - record the bytes a real client and a real server exchange.

A loopback proxy: it listens on 127.0.0.1 (an ephemeral port), runs a
client command with "{port}" in its arguments replaced by that port,
forwards every connection the client opens to --target, and logs each
chunk as one line "CONN DIR HEX" (CONN counts connections from 0; DIR is
"c" for bytes the client wrote, "s" for bytes the server wrote). The
unit tests of the protocol modules embed such bytes as C arrays; their
comments give the command that produced them.

  wirecap.py --target 127.0.0.1:PORT --log FILE -- CMD ARG...
  wirecap.py --c-chunks NAME --log FILE [--conn N] [--max-bytes K]

The second form prints the chunks of one connection, both directions in
the order they were seen, as C arrays and a table of struct wire_chunk
(tests/support/wire_replay.h).
The proxy exits when the command does, or after --max-seconds (20).
"""
import argparse
import socket
import subprocess
import sys
import threading
import time


def pump(src, dst, conn, d, log, lock):
    while True:
        try:
            b = src.recv(65536)
        except OSError:
            b = b""
        if not b:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            return
        with lock:
            log.write("%d %s %s\n" % (conn, d, b.hex()))
            log.flush()
        try:
            dst.sendall(b)
        except OSError:
            return


def proxy(args):  # noqa: C901
    host, port = args.target.rsplit(":", 1)
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    ls.settimeout(0.2)
    lport = ls.getsockname()[1]
    cmd = [a.replace("{port}", str(lport)) for a in args.cmd]
    log = open(args.log, "w")
    lock = threading.Lock()
    child = subprocess.Popen(cmd)
    n = 0
    threads = []
    deadline = time.monotonic() + args.max_seconds
    while child.poll() is None:
        if time.monotonic() > deadline:
            child.kill()
            child.wait()
            break
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        s = socket.create_connection((host, int(port)))
        for a, b, d in ((c, s, "c"), (s, c, "s")):
            t = threading.Thread(target=pump, args=(a, b, n, d, log, lock),
                                 daemon=True)
            t.start()
            threads.append(t)
        n += 1
    for t in threads:
        t.join(2)
    log.close()
    return child.returncode


def c_chunks(args):
    """The chunks of one connection, both directions in the order they
    were seen, as C arrays NAME_0, NAME_1, ... and a table NAME of
    struct wire_chunk {dir, bytes, length} ended by {0, NULL, 0}.
    --max-bytes cuts each chunk (a TLS record, say) to its first bytes."""
    chunks = []
    for line in open(args.log):
        conn, d, h = line.split()
        if int(conn) == args.conn:
            b = bytes.fromhex(h)
            if args.max_bytes:
                b = b[:args.max_bytes]
            chunks.append((d, b))
    for i, (d, b) in enumerate(chunks):
        print("static const uint8_t %s_%d[] = {" % (args.c_chunks, i))
        for j in range(0, len(b), 12):
            print("\t" + " ".join("0x%02x," % x for x in b[j:j + 12]))
        print("};")
    print("static const struct wire_chunk %s[] = {" % args.c_chunks)
    for i, (d, b) in enumerate(chunks):
        print("\t{'%s', %s_%d, sizeof(%s_%d)}," % (d, args.c_chunks, i,
                                                  args.c_chunks, i))
    print("\t{0, NULL, 0}};")
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--target")
    p.add_argument("--log", required=True)
    p.add_argument("--c-chunks")
    p.add_argument("--conn", type=int, default=0)
    p.add_argument("--max-bytes", type=int, default=0)
    p.add_argument("--max-seconds", type=float, default=20)
    p.add_argument("cmd", nargs="*")
    args = p.parse_args()
    if args.c_chunks:
        return c_chunks(args)
    if not args.target or not args.cmd:
        p.error("--target and a command are needed")
    return proxy(args)


if __name__ == "__main__":
    sys.exit(main())
