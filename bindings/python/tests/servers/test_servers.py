"""The examples under real servers: examples/callback_wsgi.py under gunicorn (2 sync workers) and
examples/callback_asgi.py under uvicorn, each on a free loopback port with a SQLite journal and
the example's SQLite ledger, run through the same cases: the refusals (405, 401, 403 by the
X-Forwarded-For of a trusted proxy, 413, 400, a field error answered 200 with success false), a
new refund and payout, a repeat answered byte for byte, a conflict (409), the ledger failing
(503 with Retry-After, logged) and the redelivery credited once, a journal that is down (a
refund 503, a balance query 200), and lost events recovered by `slotpartner recover` through the
endpoint. Under uvicorn, a logic that blocks does not block the event loop.

Run by ../../run_server_tests.sh with the interpreter Debian's gunicorn and uvicorn belong to.
"""

from __future__ import annotations

import http.client
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from contextlib import closing
from pathlib import Path
from typing import Any

from support import BINDING, ROOT, SANDBOX, TOKEN, Sandbox, fixture, wait_for

EXAMPLES = BINDING / "examples"
OPERATOR = ROOT / "target" / "release" / "slotpartner"
#: A PostgreSQL journal that is down: a closed port on loopback, given up on after a second.
JOURNAL_DOWN = "postgres://sp_owner@127.0.0.1:1/sp_ledger?connect_timeout=1"
PRODUCTION = "18.203.30.17"


_GIVEN_PORTS: set[int] = set()


def free_port() -> int:
    """A free loopback port, bound then released, that no earlier call of this process gave: the
    kernel may hand a released port out again, and two servers given one port answer for each
    other."""
    import socket

    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN_PORTS:
            _GIVEN_PORTS.add(port)
            return port


class Server:
    """An example under ``kind`` (gunicorn or uvicorn) on a free loopback port, its output in a
    file; ``stop()`` ends it, passed or failed."""

    def __init__(self, kind: str, folder: Path, journal: str, name: str) -> None:
        self.port = free_port()
        self.ledger = folder / f"{name}-ledger.db"
        self.output = open(folder / f"{name}.log", "w+b")  # noqa: SIM115 (closed by stop)
        if kind == "gunicorn":
            command = ["-m", "gunicorn", "--workers", "2", "--bind", f"127.0.0.1:{self.port}", "--chdir",
                       str(EXAMPLES), "--log-level", "warning", "callback_wsgi:application"]  # fmt: skip
        else:
            command = ["-m", "uvicorn", "--host", "127.0.0.1", "--port", str(self.port), "--app-dir", str(EXAMPLES),
                       "--log-level", "warning", "callback_asgi:application"]  # fmt: skip
        env = dict(os.environ, SLOTPARTNER_TOKEN=TOKEN, SLOTPARTNER_SOURCES="127.0.0.1",
                   SLOTPARTNER_TRUSTED_PROXIES="127.0.0.1", SLOTPARTNER_JOURNAL=journal,
                   SLOTPARTNER_LEDGER=str(self.ledger), PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
        self.process = subprocess.Popen([sys.executable, *command], stdin=subprocess.DEVNULL, stdout=self.output,
                                        stderr=subprocess.STDOUT, env=env, start_new_session=True)  # fmt: skip
        try:
            wait_for(self._ready, what=f"{kind} on port {self.port}")
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the server exited with {self.process.returncode}: {self.log()}")
        try:
            self.request("GET")
            return True
        except OSError:
            return False

    def request(self, method: str = "POST", body: bytes = b"", token: str | None = TOKEN,
                headers: dict[str, str] | None = None) -> tuple[int, Any, bytes]:  # fmt: skip
        """(status, headers, body) of one request to /callback; the headers read by any case."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            sent = {"Content-Type": "application/json", **(headers or {})}
            if token is not None:
                sent["X-Service-Token"] = token
            connection.request(method, "/callback", body=body if method == "POST" else None, headers=sent)
            response = connection.getresponse()
            return response.status, response.headers, response.read()
        finally:
            connection.close()

    def credits(self, transaction_id: int) -> list[tuple[Any, ...]]:
        with closing(sqlite3.connect(self.ledger)) as db:
            return db.execute("SELECT kind, amount FROM credits WHERE transaction_id = ?", (transaction_id,)).fetchall()

    def log(self) -> str:
        self.output.flush()
        self.output.seek(0)
        return self.output.read().decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait()
        self.output.close()


def payout(transaction_id: int, money: int = 150000, index: int | None = None) -> bytes:
    event = json.loads(fixture("payout"))
    event.update(transactionId=transaction_id, moneyWon=money)
    event.pop("index") if index is None else event.update(index=index)
    return json.dumps(event).encode()


def refund(transaction_id: int) -> bytes:
    event = json.loads(fixture("refund"))
    event.update(transactionId=transaction_id)
    event.pop("index", None)
    return json.dumps(event).encode()


class ServerCases:
    """The cases, run against ``server`` (journal on SQLite) and ``down`` (journal down)."""

    KIND = ""
    folder: tempfile.TemporaryDirectory[str]
    server: Server
    down: Server

    @classmethod
    def setUpClass(cls) -> None:
        cls.folder = tempfile.TemporaryDirectory(prefix=f"sp-{cls.KIND}-")
        folder = Path(cls.folder.name)
        servers = []
        try:
            servers.append(Server(cls.KIND, folder, f"sqlite:{folder}/journal.db", "main"))
            servers.append(Server(cls.KIND, folder, JOURNAL_DOWN, "down"))
        except BaseException:
            for server in servers:
                server.stop()
            cls.folder.cleanup()
            raise
        cls.server, cls.down = servers

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()
        cls.down.stop()
        cls.folder.cleanup()

    def test_refusals(self: Any) -> None:
        status, headers, _ = self.server.request("GET")
        self.assertEqual((status, headers.get("Allow")), (405, "POST"))
        self.assertEqual(self.server.request(body=refund(1), token=None)[0], 401)
        forwarded = {"X-Forwarded-For": PRODUCTION}  # from the trusted proxy: the client is production's
        self.assertEqual(self.server.request(body=refund(1), headers=forwarded)[0], 403)
        self.assertEqual(self.server.request(body=b" " * 70000)[0], 413)
        status, headers, body = self.server.request(body=b"{not json")
        self.assertEqual((status, headers.get("Content-Type")), (400, "application/json; charset=utf-8"))
        self.assertEqual(json.loads(body)["error"]["code"], "invalid_json", body)
        status, _, body = self.server.request(body=fixture("invalid_money_float"))
        self.assertEqual(status, 200)
        self.assertFalse(json.loads(body)["payout"]["success"])
        self.assertIn("moneyWon", json.loads(body)["payout"]["errorMessage"])
        self.assertEqual(self.server.credits(1), [])

    def test_new_repeat_and_conflict(self: Any) -> None:
        status, _, body = self.server.request(body=refund(101))
        self.assertEqual((status, body), (200, b'{"refund":{"success":true,"errorMessage":""}}'))
        first = self.server.request(body=payout(102, 2500))
        self.assertEqual(first[0::2], (200, b'{"payout":{"success":true,"errorMessage":""}}'))
        repeat = self.server.request(body=payout(102, 2500))
        self.assertEqual(repeat[0::2], first[0::2], "byte for byte")
        status, _, body = self.server.request(body=payout(102, 2501))
        self.assertEqual(status, 409, body)
        self.assertEqual((self.server.credits(101), self.server.credits(102)), ([("refund", 0)], [("payout", 2500)]))

    def test_the_ledger_failing_is_503_and_the_redelivery_credits_once(self: Any) -> None:
        with closing(sqlite3.connect(self.server.ledger)) as db:
            db.execute("ALTER TABLE credits RENAME TO credits_away")  # the logic's INSERT fails
        try:
            status, headers, body = self.server.request(body=payout(201, 700))
        finally:
            with closing(sqlite3.connect(self.server.ledger)) as db:
                db.execute("ALTER TABLE credits_away RENAME TO credits")
        self.assertEqual((status, headers.get("Retry-After")), (503, "5"), body)
        self.assertNotIn(b"credits", body, "the cause is for the log only")
        wait_for(lambda: "no such table: credits" in self.server.log(), what="the failure in the log")
        self.assertNotIn("Internal Server Error", self.server.log())
        again = self.server.request(body=payout(201, 700))
        self.assertEqual(again[0], 200)
        self.assertEqual(self.server.request(body=payout(201, 700))[0::2], again[0::2])
        self.assertEqual(self.server.credits(201), [("payout", 700)])

    def test_a_journal_down_refuses_money_and_answers_a_balance(self: Any) -> None:
        status, headers, _ = self.down.request(body=refund(301))
        self.assertEqual((status, headers.get("Retry-After")), (503, "5"))
        self.assertEqual(self.down.credits(301), [])
        status, _, body = self.down.request(body=fixture("balance"))
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["playerBalance"]["money"], 100000)
        unknown = json.loads(fixture("balance"))
        unknown["playerPartnerIdentifier"] = "unknown-player"
        status, _, body = self.down.request(body=json.dumps(unknown).encode())
        self.assertEqual(status, 500)
        self.assertNotIn("money", json.loads(body)["playerBalance"])

    def test_lost_events_are_recovered_through_the_endpoint(self: Any) -> None:
        count, seed = 40, 11
        folder = Path(self.folder.name)
        journal = f"sqlite:{folder}/recovery-journal.db"
        sandbox = Sandbox(events_count=count, events_seed=seed)
        server = None
        try:
            import slotpartner

            slotpartner.Journal(journal, first_index=1).close()  # gaps counted from index 1
            server = Server(self.KIND, folder, journal, "recovery")
            report = folder / "burst.json"
            sent = subprocess.run([str(SANDBOX), "send", "--url", f"http://127.0.0.1:{server.port}/callback",
                                   "--token", TOKEN, "--burst", str(count), "--seed", str(seed), "--lose", "0.2",
                                   "--repeat", "0.1", "--concurrency", "2", "--report-json", str(report), "--quiet",
                                   "mixed"], capture_output=True, text=True, timeout=120)  # fmt: skip
            # The server's own output too, so that a server that stopped answering says why.
            self.assertEqual(sent.returncode, 0, f"{sent.stdout}{sent.stderr}\nthe server's output:\n{server.log()}")
            facts = json.loads(report.read_text())
            self.assertTrue(facts["lost_indexes"], "the burst lost events")
            env = dict(os.environ, SLOTPARTNER_JOURNAL=journal, SLOTPARTNER_TOKEN=TOKEN,
                       SLOTPARTNER_CA_FILE=sandbox.ca_file, SLOTPARTNER_MIN_AGE="0s",
                       SLOTPARTNER_CALLBACK_URL=f"http://127.0.0.1:{server.port}/callback")  # fmt: skip
            recover = subprocess.run([str(OPERATOR), "recover", "--base-url", sandbox.base_url], env=env,
                                     capture_output=True, text=True, timeout=120)  # fmt: skip
            self.assertEqual(recover.returncode, 0, recover.stdout + recover.stderr)
            gaps = subprocess.run([str(OPERATOR), "journal", "gaps"], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual((gaps.returncode, gaps.stdout.strip()), (0, ""), gaps.stderr)
            with closing(sqlite3.connect(server.ledger)) as db:
                rows = db.execute("SELECT transaction_id, kind, amount FROM credits").fetchall()
            self.assertEqual(sorted(row[0] for row in rows), [900_000_000 + i for i in range(1, count + 1)])
            self.assertEqual(sum(row[2] for row in rows if row[1] == "payout"), facts["sent_money_total"])
        finally:
            if server is not None:
                server.stop()
            sandbox.stop()


class GunicornTest(ServerCases, unittest.TestCase):
    KIND = "gunicorn"


class UvicornTest(ServerCases, unittest.TestCase):
    KIND = "uvicorn"

    def test_a_blocked_logic_leaves_the_event_loop_serving(self) -> None:
        answers: list[int] = []
        with closing(sqlite3.connect(self.server.ledger, isolation_level=None)) as db:
            db.execute("BEGIN IMMEDIATE")  # the logic's credit waits for this lock
            blocked = threading.Thread(target=lambda: answers.append(self.server.request(body=payout(401))[0]))
            blocked.start()
            time.sleep(0.5)
            self.assertEqual(self.server.request("GET")[0], 405, "answered while the logic waits")
            self.assertEqual(answers, [], "the payout still waits for the ledger")
            db.execute("COMMIT")
        blocked.join(timeout=30)
        self.assertEqual(answers, [200])
        self.assertEqual(self.server.credits(401), [("payout", 150000)])


if __name__ == "__main__":
    unittest.main()
