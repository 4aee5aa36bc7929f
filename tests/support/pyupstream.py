#!/usr/bin/env python3
"""pyupstream.py - a small HTTP/1.1 (optionally HTTPS) test upstream on
127.0.0.1 for the curl layer's tests: the status depends on the path, so
one host:port can fail on /payments and answer on /users, and it speaks
TLS with a self-signed certificate, which the C upstream does not.

Usage:
  pyupstream.py --port-file F --log F [--tls CERT KEY] [--max-seconds S]
                [--rule PREFIX=STATUS ...] [--default STATUS]
                [--location URL] [--unix PATH]

  --rule /payments=500   requests whose path starts with /payments get 500
                         (first matching rule wins; query strings are part
                         of the path as sent)
  --default STATUS       everything else, default 200
  429 and 503 carry "Retry-After: 1".
  --location URL         3xx answers carry "Location: URL" (a redirect)
  --delay-ms MS          wait this long before each answer (a slow upstream)
  --unix PATH            listen on this Unix socket instead of TCP (a
                         leading '@' makes it abstract); the port file
                         then says 0

Log: one line per request, flushed: "<ms since start> <method> <path>
<status>" - the same columns as tests/support/upstream, so lib.sh's
rx_count works on it.

The git mode (--git-root DIR) serves a git repository over the smart
HTTP protocol through git http-backend (CGI), still logging each request
and still applying --rule first (so a test can make the server fail).
"""
import argparse
import http.server
import os
import socketserver
import ssl
import subprocess
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--rule", action="append", default=[])
    ap.add_argument("--default", type=int, default=200)
    ap.add_argument("--max-seconds", type=float, default=60)
    ap.add_argument("--git-root")
    ap.add_argument("--location")
    ap.add_argument("--unix")
    ap.add_argument("--delay-ms", type=float, default=0)
    args = ap.parse_args()

    rules = []
    for r in args.rule:
        prefix, status = r.rsplit("=", 1)
        rules.append((prefix, int(status)))
    t0 = time.monotonic()
    log_lock = threading.Lock()
    log = open(args.log, "a", buffering=1)

    def record(method, path, status):
        with log_lock:
            log.write("%d %s %s %s\n" % ((time.monotonic() - t0) * 1000,
                                          method, path, status))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def status_for(self):
            for prefix, status in rules:
                if self.path.startswith(prefix):
                    return status
            return None

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def answer(self, status, payload=b"ok\n"):
            if args.delay_ms > 0:
                time.sleep(args.delay_ms / 1000.0)
            self.send_response(status)
            if status in (429, 503):
                self.send_header("Retry-After", "1")
            if args.location and 300 <= status <= 399:
                self.send_header("Location", args.location)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
            record(self.command, self.path, status)

        def git(self, data):
            path, _, query = self.path.partition("?")
            env = dict(os.environ)
            env.update({
                "GIT_PROJECT_ROOT": args.git_root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(data)),
                "REMOTE_ADDR": "127.0.0.1",
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            })
            env.pop("LD_PRELOAD", None)
            out = subprocess.run(["git", "http-backend"], input=data,
                                 env=env, capture_output=True).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            status = 200
            headers = []
            for line in head.split(b"\r\n"):
                k, _, v = line.decode("latin-1").partition(":")
                if k.lower() == "status":
                    status = int(v.strip().split()[0])
                elif k:
                    headers.append((k, v.strip()))
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            record(self.command, self.path, status)

        def handle_any(self):
            data = self.body()
            status = self.status_for()
            if status is None and args.git_root:
                return self.git(data)
            self.answer(status if status is not None else args.default)

        do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = handle_any

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True

    class UnixServer(socketserver.ThreadingUnixStreamServer):
        daemon_threads = True

    if args.unix:
        path = args.unix
        if path.startswith("@"):
            path = "\0" + path[1:]
        else:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        # BaseHTTPRequestHandler reads client_address[0] to log; a Unix
        # peer has no address, and logging is off anyway.
        srv = UnixServer(path, Handler)
    else:
        srv = Server(("127.0.0.1", 0), Handler)
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls[0], args.tls[1])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % (0 if args.unix else srv.server_address[1]))
    os.rename(tmp, args.port_file)
    threading.Timer(args.max_seconds, lambda: os._exit(0)).start()
    try:
        srv.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
