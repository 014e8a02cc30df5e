#!/usr/bin/env python3
"""Runs one test suite and fails when it leaves something behind.

    python3 tests/no_leftovers.py COMMAND [ARG...]

make test runs each of its suites this way. COMMAND runs with this process as its child
subreaper (prctl PR_SET_CHILD_SUBREAPER): a process the suite started and did not stop (a
server's forked workers whose parent was killed, a daemon that detached) is handed to this
process when its parent ends, instead of to init. Once COMMAND has ended, every process still
below this one was left by the suite: after GRACE_SECONDS for those closing down on their own
(a server whose standard input closed), each is named with its command line and the TCP ports
it listens on, then stopped (SIGTERM, SIGKILL after GRACE_SECONDS) and reaped, so that one
suite's leftovers never disturb the next. Listeners and processes that were there before, or
that other people's work starts meanwhile, are never below this process, so they are never
counted.

COMMAND also runs with TMPDIR set to a fresh directory (mode 1777, as /tmp) inside the current
TMPDIR: mktemp, Python's tempfile, PHP's sys_get_temp_dir() and Rust's env::temp_dir() all
make their files there. What the suite left in it is named, then removed.

Exit status: COMMAND's own when it failed (128 + N when signal N ended it), else 1 when it left
a process or a file, else 0. Prints nothing when nothing was left.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import sys
import tempfile
import time

PR_SET_CHILD_SUBREAPER = 36
GRACE_SECONDS = 5.0
NAME = "no_leftovers"


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        sys.exit(f"{NAME}: prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(error)}")


def read_stat(pid: int) -> tuple[str, int] | None:
    """The state letter and parent pid of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return None
    # The command name, in parentheses, may itself hold spaces and parentheses.
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def descendants(root: int) -> list[int]:
    """Every live (not zombie) process below root, parents before their children."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_stat(int(entry))
            if stat is not None and stat[0] != "Z":
                children.setdefault(stat[1], []).append(int(entry))
    found: list[int] = []
    queue = list(children.get(root, []))
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def reap() -> None:
    """Reaps every child of this process that has ended (leftovers handed here included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def listening_ports() -> dict[str, str]:
    """Socket inode -> "ADDRESS:PORT" for every listening TCP socket of this network namespace."""
    ports: dict[str, str] = {}
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            with open(table, encoding="ascii") as file:
                lines = file.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            address, port = fields[1].split(":")
            raw = bytes.fromhex(address)
            # The kernel prints the address as 32-bit words in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            host = socket.inet_ntop(family, raw)
            ports[fields[9]] = f"[{host}]:{int(port, 16)}" if family == socket.AF_INET6 else f"{host}:{int(port, 16)}"
    return ports


def describe(pid: int, ports: dict[str, str]) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            command = " ".join(part.decode(errors="replace") for part in file.read().split(b"\0") if part)
    except OSError:
        command = "?"
    listening = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in ports:
                listening.append(ports[target[8:-1]])
    except OSError:
        pass
    where = f" listening on {', '.join(sorted(set(listening)))}" if listening else ""
    return f"pid {pid}{where}: {command or '(no command line: a kernel thread or exiting)'}"


def stop(pids: list[int]) -> None:
    """SIGTERM, then SIGKILL to what is still there after GRACE_SECONDS; reaps as they end."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline:
            reap()
            pids = descendants(os.getpid())
            if not pids:
                return
            time.sleep(0.1)


def main() -> int:
    if len(sys.argv) < 2:
        print(f"usage: {sys.argv[0]} COMMAND [ARG...]", file=sys.stderr)
        return 2
    command = sys.argv[1:]
    shown = " ".join(command)
    become_subreaper()
    scratch = tempfile.mkdtemp(prefix="slotpartner-suite-")
    os.chmod(scratch, 0o1777)
    environment = dict(os.environ, TMPDIR=scratch)
    try:
        child = os.posix_spawnp(command[0], command, environment)
    except OSError as error:
        shutil.rmtree(scratch, ignore_errors=True)
        print(f"{NAME}: cannot run {command[0]}: {error.strerror}", file=sys.stderr)
        return 127

    # A signal meant for the suite (make interrupted, a time-out) goes on to it; this process
    # stays to clean up after it.
    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)

    # Waits for the suite, reaping on the way whatever it leaves that ends (so that a test
    # waiting for its server's workers to be gone sees them gone, not as zombies).
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            break
    code = os.waitstatus_to_exitcode(status)
    code = 128 - code if code < 0 else code

    deadline = time.monotonic() + GRACE_SECONDS
    while True:
        reap()
        left = descendants(os.getpid())
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    problems = []
    if left:
        ports = listening_ports()
        lines = [describe(pid, ports) for pid in left]
        listeners = sum(" listening on " in line for line in lines)
        problems.append(f"{NAME}: FAIL: {shown} left {len(left)} process(es) running, {listeners} of them listening "
                        "(now stopped):")
        problems.extend(f"  {line}" for line in lines)
        stop(left)
    files = sorted(os.listdir(scratch))
    if files:
        problems.append(f"{NAME}: FAIL: {shown} left {len(files)} entries in its temporary directory (now removed): "
                        + ", ".join(files[:20]) + (", ..." if len(files) > 20 else ""))
    shutil.rmtree(scratch, ignore_errors=True)
    if problems:
        sys.stdout.flush()
        print("\n".join(problems), flush=True)
    if code != 0:
        return code
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
