"""examples/callback_wsgi.py answers like examples/c/callback_cgi.c.

1. In process: the WSGI application gets the requests tests/c/run_examples.sh gives the CGI
   (same method, token, REMOTE_ADDR, sources, body); its status and body must equal
   tests/c/expected/cgi_*.out, but where the endpoint decides otherwise (named in ANSWERED_BY_THE_ENDPOINT:
   the same status, the endpoint's own body); the example's ledger holds each credit once.
2. Over the wire: the example serving on loopback (wsgiref), driven by `slotpartner-sandbox send`
   and by raw HTTP requests.
3. A configuration without SLOTPARTNER_TOKEN fails at start-up naming the variable; a journal that
   cannot be reached is never connected to for a refused request, and answered 503 naming
   nothing of it otherwise.
"""

from __future__ import annotations

import io
import json
import re
import tempfile
import unittest
from typing import Any

from support import (
    EXPECTED,
    FIXTURES,
    JOURNAL_SECRETS,
    OTHER_TOKEN,
    TOKEN,
    UNREACHABLE_JOURNAL,
    ConnectionCounter,
    Sandbox,
    WsgiExample,
    ledger_rows,
    load_example,
)

import slotpartner

BIG = b" " * 70000

# As in tests/c/run_examples.sh: name, method, token, REMOTE_ADDR, sources, body.
CASES: list[tuple[str, str, str, str, str, str]] = [
    ("get_refused", "GET", TOKEN, "34.254.138.20", "staging", "refund"),
    ("no_token", "POST", "", "34.254.138.20", "staging", "refund"),
    ("wrong_token", "POST", OTHER_TOKEN, "34.254.138.20", "staging", "refund"),
    ("forbidden_source", "POST", TOKEN, "18.203.30.17", "staging", "refund"),
    ("too_large", "POST", TOKEN, "34.254.138.20", "staging", "big"),
    ("not_json", "POST", TOKEN, "34.254.138.20", "staging", "not_json"),
    ("not_object", "POST", TOKEN, "34.254.138.20", "staging", "not_object"),
    ("unknown_event", "POST", TOKEN, "34.254.138.20", "staging", "other_event"),
    ("invalid_payout", "POST", TOKEN, "34.254.138.20", "staging", "invalid_money_float"),
    ("invalid_refund", "POST", TOKEN, "34.254.138.20", "staging", "invalid_string_id"),
    ("invalid_balance", "POST", TOKEN, "34.254.138.20", "staging", "invalid_no_player"),
    ("refund", "POST", TOKEN, "34.254.138.20", "staging", "refund"),
    ("payout", "POST", TOKEN, "18.203.30.17", "production", "payout"),
    ("balance", "POST", TOKEN, "::1", "any", "balance"),
    ("custom_range", "POST", TOKEN, "10.1.2.3", "10.1.2.0/24", "refund"),
    ("index_string", "POST", TOKEN, "18.203.30.17", "production", "payout_index_string"),
    ("index_string_strict", "POST", TOKEN, "18.203.30.17", "production", "payout_index_string"),
    ("balance_unknown_player", "POST", TOKEN, "34.254.138.20", "staging", "balance_unknown"),
    ("forwarded_not_utf8_untrusted", "POST", TOKEN, "34.254.138.20", "staging", "refund"),
    ("forwarded_not_utf8_trusted", "POST", TOKEN, "10.0.0.5", "staging", "refund"),
    ("any_without_address", "POST", TOKEN, "", "any", "refund"),
    ("mapped_range", "POST", TOKEN, "34.254.138.20", "::ffff:34.254.138.0/120", "refund"),
    ("upper_case_token", "POST", TOKEN.upper(), "34.254.138.20", "staging", "refund"),
]
# The same status as the CGI, the body the endpoint's own: its 405 names the method, its 413 the limit.
ANSWERED_BY_THE_ENDPOINT = {"get_refused", "too_large"}

# Extra environment of a case, as run_examples.sh sets it (cgi_env). HTTP_X_FORWARDED_FOR holds
# the bytes 0xFF 0xFE, here as WSGI gives a header: decoded as latin-1.
FORWARDED_NOT_UTF8 = {"HTTP_X_FORWARDED_FOR": "\xff\xfe", "SLOTPARTNER_TRUSTED_PROXIES": "10.0.0.0/8"}
EXTRA_ENV: dict[str, dict[str, str]] = {
    "index_string_strict": {"SLOTPARTNER_STRICT_INDEX": "1"},
    "forwarded_not_utf8_untrusted": FORWARDED_NOT_UTF8,
    "forwarded_not_utf8_trusted": FORWARDED_NOT_UTF8,
}
# Cases whose answer depends on the peer address or the extra environment: not sent over the wire.
WIRE_SKIP = {"forbidden_source", "custom_range", "index_string_strict", "forwarded_not_utf8_untrusted",
             "forwarded_not_utf8_trusted", "any_without_address", "mapped_range"}  # fmt: skip


def body_of(name: str) -> bytes:
    if name == "big":
        return BIG
    if name == "payout_index_string":  # as run_examples.sh: the index as the string "42"
        return re.sub(rb'"index": *[0-9]*', b'"index":"42"', (FIXTURES / "payout.json").read_bytes())
    if name == "balance_unknown":  # a player the demo logic does not know
        text = (FIXTURES / "balance.json").read_bytes()
        return re.sub(rb'"playerPartnerIdentifier":"[^"]*"', b'"playerPartnerIdentifier":"unknown-player"', text)
    return (FIXTURES / f"{name}.json").read_bytes()


def expected(name: str) -> tuple[int, bytes]:
    """(status, body) of an expected CGI output file."""
    head, _, body = (EXPECTED / f"cgi_{name}.out").read_bytes().partition(b"\n\n")
    assert body.endswith(b"exit: 0\n"), name
    return int(head.split()[1]), body[: -len(b"exit: 0\n")]


class InProcessTest(unittest.TestCase):
    def setUp(self) -> None:
        folder = tempfile.TemporaryDirectory(prefix="sp-wsgi-example-")
        self.addCleanup(folder.cleanup)
        self.folder = folder.name
        self.ledger = f"{folder.name}/ledger.db"

    def run_case(self, case: tuple[str, str, str, str, str, str]) -> tuple[str, dict[str, str], bytes]:
        """The answer to ``case``, the example's ledger in ``<folder>/<case>.db``."""
        name, method, token, remote, sources, body_name = case
        body = body_of(body_name)
        extra = EXTRA_ENV.get(name, {})
        env = {"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": sources, "SLOTPARTNER_LEDGER": f"{self.folder}/{name}.db"}
        env.update((k, v) for k, v in extra.items() if k.startswith("SLOTPARTNER_"))
        app = load_example(env).application
        environ: dict[str, Any] = {"REQUEST_METHOD": method, "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": remote,
                                   "wsgi.input": io.BytesIO(body)}  # fmt: skip
        environ.update((k, v) for k, v in extra.items() if k.startswith("HTTP_"))
        if token:
            environ["HTTP_X_SERVICE_TOKEN"] = token
        seen: dict[str, Any] = {}
        answer = b"".join(app(environ, lambda status, headers: seen.update(status=status, headers=dict(headers))))
        self.assertEqual(seen["headers"]["Content-Length"], str(len(answer)))
        return seen["status"], seen["headers"], answer

    def test_every_cgi_case(self) -> None:
        for case in CASES:
            with self.subTest(case[0]):
                status, headers, body = self.run_case(case)
                want_status, want_body = expected(case[0])
                self.assertEqual(int(status.split()[0]), want_status)
                self.assertEqual(headers["Content-Type"], "application/json; charset=utf-8")
                if case[0] not in ANSWERED_BY_THE_ENDPOINT:
                    self.assertEqual(body.decode(), want_body.decode())
        self.assertEqual(self.run_case(CASES[0])[1]["Allow"], "POST")
        # A refund and a payout answered success are credited in the ledger; a refusal is not.
        self.assertEqual([row[:2] for row in ledger_rows(f"{self.folder}/refund.db")], [("refund", 900001)])
        self.assertEqual([row[::3] for row in ledger_rows(f"{self.folder}/payout.db")], [("payout", 150000)])
        self.assertEqual(ledger_rows(f"{self.folder}/invalid_payout.db"), [])

    def test_a_missing_token_fails_at_start_up_naming_the_variable(self) -> None:
        with self.assertRaises(slotpartner.ConfigurationError) as missing:
            load_example({"SLOTPARTNER_LEDGER": self.ledger})
        self.assertIn("SLOTPARTNER_TOKEN", missing.exception.message)
        # An empty variable is an unset one, as the library reads it: the default sources
        # (production), which refuse a request from 127.0.0.1.
        app = load_example({"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": "", "SLOTPARTNER_LEDGER": self.ledger})
        self.assertEqual(app.endpoint.handle("POST", TOKEN, "127.0.0.1", None, (FIXTURES / "refund.json").read_bytes(), app.logic).status, 403)


class UnreachableJournalTest(unittest.TestCase):
    """SLOTPARTNER_JOURNAL naming a PostgreSQL server that cannot be reached: a request failing
    the token or source check is answered as without a journal (401, 403) and never makes the
    journal connect; one that passes them gets 503 naming nothing of the journal (its URL,
    address, user and database stay in the log)."""

    def call(self, journal: str, token: str | None, remote: str = "127.0.0.1") -> tuple[str, bytes, str]:
        folder = tempfile.TemporaryDirectory(prefix="sp-wsgi-example-")
        self.addCleanup(folder.cleanup)
        app = load_example({"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": "127.0.0.1",
                            "SLOTPARTNER_JOURNAL": journal, "SLOTPARTNER_LEDGER": f"{folder.name}/ledger.db"}).application  # fmt: skip
        body = (FIXTURES / "refund.json").read_bytes()
        environ: dict[str, Any] = {"REQUEST_METHOD": "POST", "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": remote,
                                   "wsgi.input": io.BytesIO(body)}  # fmt: skip
        if token is not None:
            environ["HTTP_X_SERVICE_TOKEN"] = token
        seen: dict[str, Any] = {}
        with self.assertLogs("slotpartner") as logged:
            answer = b"".join(app(environ, lambda status, headers: seen.update(status=status)))
        return seen["status"], answer, "\n".join(logged.output)

    def assert_names_no_journal(self, text: bytes, what: str) -> None:
        for secret in JOURNAL_SECRETS:
            self.assertNotIn(secret, text.decode(), what)

    def test_refused_requests_never_reach_the_journal(self) -> None:
        counter = ConnectionCounter()
        try:
            for name, token, remote in (("no_token", None, "127.0.0.1"), ("wrong_token", OTHER_TOKEN, "127.0.0.1"),
                                        ("forbidden_source", TOKEN, "18.203.30.17")):  # fmt: skip
                with self.subTest(name):
                    status, body, log = self.call(counter.url(), token, remote)
                    want_status, want_body = expected(name)
                    self.assertEqual((int(status.split()[0]), body), (want_status, want_body))
                    self.assert_names_no_journal(body + log.encode(), name)
            self.assertEqual(counter.count, 0, "a refused request made the journal connect")
            status, body, _ = self.call(counter.url(), TOKEN)
            self.assertEqual(status, "503 Service Unavailable")
            self.assertGreater(counter.count, 0)
        finally:
            counter.stop()

    def test_an_unreachable_journal_is_answered_503_naming_nothing_of_it(self) -> None:
        status, body, log = self.call(UNREACHABLE_JOURNAL, TOKEN)
        self.assertEqual(status, "503 Service Unavailable")
        self.assertIn("error", json.loads(body))
        self.assert_names_no_journal(body, "the 503 body")
        self.assertIn("127.0.0.1:1", log)


def parse_http(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    match = re.match(r"HTTP/1\.[01] (\d{3}) ", lines[0])
    assert match, lines[0]
    return int(match.group(1)), dict(line.split(": ", 1) for line in lines[1:]), body


def http_request(method: str, token: str, body: bytes) -> bytes:
    head = f"{method} /callback HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
    if token:
        head += f"X-Service-Token: {token}\r\n"
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


class OverTheWireTest(unittest.TestCase):
    sandbox: Sandbox
    server: WsgiExample

    @classmethod
    def setUpClass(cls) -> None:
        cls.sandbox = Sandbox()
        cls.server = WsgiExample(sources="127.0.0.1")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()
        cls.sandbox.stop()

    def test_raw_requests_answer_like_the_cgi(self) -> None:
        for name, method, token, _, _, body_name in CASES:
            if name in WIRE_SKIP or name == "balance":  # the balance grows with the payouts credited
                continue
            with self.subTest(name):
                status, headers, body = parse_http(self.server.request(http_request(method, token, body_of(body_name))))
                want_status, want_body = expected(name)
                self.assertEqual(status, want_status)
                if name not in ANSWERED_BY_THE_ENDPOINT:
                    self.assertEqual(body, want_body)
                self.assertEqual(headers.get("Content-Length"), str(len(body)))

    def test_sandbox_send(self) -> None:
        url = self.server.url + "/callback"
        for kind in ("refund", "payout", "balance"):
            result = self.sandbox.send(url, "--index", "7", "--expect-success", "true", kind)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertIn("verdict=ok", result.stdout)
        result = self.sandbox.send(url, "--set", "moneyWon=1500.5", "--expect-success", "false", "payout")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn('"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"', result.stdout)
        # A success where a failure is expected is caught (the check can fail).
        result = self.sandbox.send(url, "--expect-success", "false", "refund")
        self.assertEqual(result.returncode, 1, result.stdout)

    def test_sandbox_send_many(self) -> None:
        result = self.sandbox.send(self.server.url + "/callback", "--count", "20", "--expect-success", "true", "payout")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout.count("verdict=ok"), 20)


if __name__ == "__main__":
    unittest.main()
