"""Shared test helpers: checkout paths, the sandbox service, the WSGI example as a server."""

from __future__ import annotations

import importlib.util
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BINDING = HERE.parent
ROOT = BINDING.parent.parent
sys.path.insert(0, str(BINDING))

FIXTURES = ROOT / "tests" / "fixtures"
EXPECTED = ROOT / "tests" / "c" / "expected"
HEADER = ROOT / "include" / "slotpartner.h"
EXAMPLE = BINDING / "examples" / "callback_wsgi.py"
SANDBOX = Path(os.environ.get("SLOTPARTNER_SANDBOX", ROOT / "target" / "release" / "slotpartner-sandbox"))

TOKEN = "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"
OTHER_TOKEN = "0b7e3c55-1a2b-4c3d-8e9f-000000000001"
STAGING = "34.254.138.20"
PRODUCTION = "18.203.30.17"


def fixture(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


def wait_for(condition: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Sandbox:
    """``slotpartner-sandbox serve`` on a free loopback port; it lives while we hold its stdin.

    With ``events_count``, it also serves ``getEvent`` for the events ``send --burst
    events_count --seed events_seed`` sends (indexes 1 to ``events_count``, mixed)."""

    def __init__(self, events_count: int | None = None, events_seed: int = 1) -> None:
        if not SANDBOX.is_file():
            raise AssertionError(f"{SANDBOX} is missing: run `cargo build --release -p slotpartner-sandbox`")
        self.dir = tempfile.TemporaryDirectory(prefix="sp-sandbox-")
        self.ca_file = os.path.join(self.dir.name, "ca.pem")
        ready = os.path.join(self.dir.name, "ready")
        self.process = subprocess.Popen(
            [str(SANDBOX), "serve", "--listen", "127.0.0.1:0", "--token", TOKEN, "--ca-out", self.ca_file,
             "--ready-file", ready, "--exit-on-stdin-eof",
             *(["--events-count", str(events_count), "--events-seed", str(events_seed)] if events_count else [])],  # fmt: skip
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(lambda: os.path.exists(ready) or self.process.poll() is not None, what="the sandbox")
            if self.process.poll() is not None:
                raise AssertionError(f"the sandbox exited with {self.process.returncode}")
        except BaseException:
            self.stop()
            raise
        with open(ready, encoding="utf-8") as f:
            self.base_url = f.read().strip()
        with open(self.ca_file, encoding="utf-8") as f:
            self.ca_pem = f.read()

    def send(self, url: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``slotpartner-sandbox send --url URL --token TOKEN ARGS...``."""
        return subprocess.run(
            [str(SANDBOX), "send", "--url", url, "--token", TOKEN, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def stop(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.dir.cleanup()


#: A journal whose PostgreSQL server cannot be reached: a closed port on loopback. Its user and
#: database are names no answer may show.
UNREACHABLE_JOURNAL = "postgres://sp_owner@127.0.0.1:1/sp_ledger"
#: What an answer must never hold of a journal's URL (URL, address, user, database).
JOURNAL_SECRETS = ("postgres://", "127.0.0.1", "sp_owner", "sp_ledger")


class ConnectionCounter:
    """A TCP listener on a free loopback port that counts the connections made to it and closes
    each at once: a journal URL naming it shows whether anything tried to reach the journal."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.05)
        self.port = self.socket.getsockname()[1]
        self.count = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self) -> str:
        return f"postgres://sp_owner@127.0.0.1:{self.port}/sp_ledger"

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.socket.accept()
            except TimeoutError:
                continue
            self.count += 1
            conn.close()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.socket.close()


def load_example(env: dict[str, str]) -> Any:
    """examples/callback_wsgi.py loaded afresh with ``env`` as its environment (its endpoint and
    ledger are made at import): SLOTPARTNER_LEDGER must name the ledger's file."""
    assert "SLOTPARTNER_LEDGER" in env, "the example's ledger would be made in the current directory"
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        spec = importlib.util.spec_from_file_location("callback_wsgi", EXAMPLE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return module


def ledger_rows(path: str | Path) -> list[tuple[Any, ...]]:
    """The example ledger's credits: (kind, transaction_id, player, amount), in that order."""
    with closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT * FROM credits ORDER BY kind, transaction_id").fetchall()


class WsgiExample:
    """examples/callback_wsgi.py serving on a free loopback port, stderr captured to a file, its
    ledger in a temporary directory (``ledger``)."""

    def __init__(self, sources: str, host: str = "127.0.0.1", env: dict[str, str] | None = None) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.folder = tempfile.TemporaryDirectory(prefix="sp-wsgi-example-")
        self.ledger = os.path.join(self.folder.name, "ledger.db")
        env = dict(os.environ, SLOTPARTNER_TOKEN=TOKEN, SLOTPARTNER_SOURCES=sources, SLOTPARTNER_LEDGER=self.ledger,
                   **(env or {}))  # fmt: skip
        self.process = subprocess.Popen(
            [sys.executable, str(EXAMPLE), f"{host}:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("listening http://"):
            self.process.wait(timeout=10)
            log = self.log()
            self.stop()
            raise AssertionError(f"callback_wsgi did not start: {line!r} {log!r}")
        self.url = line.split()[1]
        self.host = host
        self.port = int(self.url.rsplit(":", 1)[1])

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode()

    def request(self, raw: bytes, shut_write: bool = True) -> bytes:
        """Sends ``raw`` (a whole HTTP request) and returns everything the server answers."""
        with socket.create_connection((self.host, self.port), timeout=20) as conn:
            conn.sendall(raw)
            if shut_write:
                conn.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        self.stderr.close()
        self.folder.cleanup()


def rss_bytes() -> int:
    """Resident memory of this process (/proc/self/statm, second field, in pages)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
