#!/usr/bin/env python3
"""pty_psql.py - drive an interactive psql on a pseudo-terminal and press
Ctrl-C during its queries, as a user would (tests/preload/db_pg_cancel.sh).

    pty_psql.py --cancels N --out FILE -- COMMAND ARGS...

COMMAND (psql, with whatever environment `env` gives it) runs as a session
leader on a new pty, so the ^C byte written to the pty is the terminal's
SIGINT to it: psql's handler sends a CancelRequest. N times: type
`select pg_sleep(3);`, wait 0.5 s, press ^C, wait for the prompt. Then
`select 'after cancels';` and `\\q`. Everything psql printed goes to FILE;
the exit status is psql's (124 when a step waits more than 10 s, and
psql is then killed).
"""
import argparse
import os
import pty
import select
import signal
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--cancels", type=int, required=True)
ap.add_argument("--out", required=True)
ap.add_argument("cmd", nargs=argparse.REMAINDER)
a = ap.parse_args()
cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd

pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
seen = bytearray()


def wait_for(text, timeout=10.0):
    """Read until TEXT appears after what was waited for before."""
    global mark
    end = time.monotonic() + timeout
    while True:
        i = seen.find(text, mark)
        if i >= 0:
            mark = i + len(text)
            return True
        left = end - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                b = os.read(fd, 4096)
            except OSError:
                return False
            if not b:
                return False
            seen.extend(b)


def finish(status):
    try:
        while select.select([fd], [], [], 0.2)[0]:
            b = os.read(fd, 4096)
            if not b:
                break
            seen.extend(b)
    except OSError:
        pass
    with open(a.out, "wb") as f:
        f.write(bytes(seen))
    sys.exit(status)


def fail():
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    finish(124)


mark = 0
prompt = b"=# "
if not wait_for(prompt):
    fail()
for i in range(a.cancels):
    os.write(fd, b"select pg_sleep(3);\n")
    time.sleep(0.5)
    os.write(fd, b"\x03")
    if not wait_for(b"canceling statement") or not wait_for(prompt):
        fail()
os.write(fd, b"select 'after cancels';\n")
if not wait_for(b"after cancels\r\n") or not wait_for(prompt):
    fail()
os.write(fd, b"\\q\n")
_, st = os.waitpid(pid, 0)
finish(os.waitstatus_to_exitcode(st))
