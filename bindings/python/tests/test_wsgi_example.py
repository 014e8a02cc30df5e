"""examples/callback_wsgi.py answers exactly like examples/c/callback_cgi.c.

1. In process: the WSGI application gets the same requests as tests/c/run_examples.sh gives the
   CGI (same method, token, REMOTE_ADDR, sources, body, CONTENT_LENGTH); its status line,
   headers and body, written the CGI way, must equal tests/c/expected/cgi_*.out byte for byte,
   and its log lines must equal the C program's (run on the same input) but for the name.
2. Over the wire: the example serving on loopback, driven by `slotpartner-sandbox send` and by
   raw HTTP requests whose status, headers and body are compared with the same files.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import socket
import subprocess
import unittest
from pathlib import Path
from typing import Any

from support import (
    EXAMPLE,
    EXPECTED,
    FIXTURES,
    JOURNAL_SECRETS,
    OTHER_TOKEN,
    ROOT,
    TOKEN,
    UNREACHABLE_JOURNAL,
    ConnectionCounter,
    Sandbox,
    WsgiExample,
)

CGI = ROOT / "target" / "examples" / "callback_cgi"
BIG = b" " * 70000

# As in tests/c/run_examples.sh: name, method, token, REMOTE_ADDR, sources, body, CONTENT_LENGTH.
CASES: list[tuple[str, str, str, str, str, str, str | None]] = [
    ("get_refused", "GET", TOKEN, "34.254.138.20", "staging", "refund", None),
    ("no_token", "POST", "", "34.254.138.20", "staging", "refund", None),
    ("wrong_token", "POST", OTHER_TOKEN, "34.254.138.20", "staging", "refund", None),
    ("forbidden_source", "POST", TOKEN, "18.203.30.17", "staging", "refund", None),
    ("too_large", "POST", TOKEN, "34.254.138.20", "staging", "big", None),
    ("not_json", "POST", TOKEN, "34.254.138.20", "staging", "not_json", None),
    ("not_object", "POST", TOKEN, "34.254.138.20", "staging", "not_object", None),
    ("unknown_event", "POST", TOKEN, "34.254.138.20", "staging", "other_event", None),
    ("invalid_payout", "POST", TOKEN, "34.254.138.20", "staging", "invalid_money_float", None),
    ("invalid_refund", "POST", TOKEN, "34.254.138.20", "staging", "invalid_string_id", None),
    ("invalid_balance", "POST", TOKEN, "34.254.138.20", "staging", "invalid_no_player", None),
    ("refund", "POST", TOKEN, "34.254.138.20", "staging", "refund", None),
    ("payout", "POST", TOKEN, "18.203.30.17", "production", "payout", None),
    ("balance", "POST", TOKEN, "::1", "any", "balance", None),
    ("custom_range", "POST", TOKEN, "10.1.2.3", "10.1.2.0/24", "refund", None),
    ("bad_length", "POST", TOKEN, "34.254.138.20", "staging", "refund", "12x"),
    ("short_body", "POST", TOKEN, "34.254.138.20", "staging", "refund", "100000"),
    ("index_string", "POST", TOKEN, "18.203.30.17", "production", "payout_index_string", None),
    ("index_string_strict", "POST", TOKEN, "18.203.30.17", "production", "payout_index_string", None),
    ("balance_unknown_player", "POST", TOKEN, "34.254.138.20", "staging", "balance_unknown", None),
    ("forwarded_not_utf8_untrusted", "POST", TOKEN, "34.254.138.20", "staging", "refund", None),
    ("forwarded_not_utf8_trusted", "POST", TOKEN, "10.0.0.5", "staging", "refund", None),
    ("any_without_address", "POST", TOKEN, "", "any", "refund", None),
    ("mapped_range", "POST", TOKEN, "34.254.138.20", "::ffff:34.254.138.0/120", "refund", None),
    ("upper_case_token", "POST", TOKEN.upper(), "34.254.138.20", "staging", "refund", None),
]

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


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("callback_wsgi", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = load_example()


def body_of(name: str) -> bytes:
    if name == "big":
        return BIG
    if name == "payout_index_string":  # as run_examples.sh: the index as the string "42"
        return re.sub(rb'"index": *[0-9]*', b'"index":"42"', (FIXTURES / "payout.json").read_bytes())
    if name == "balance_unknown":  # a player the demo logic does not know
        text = (FIXTURES / "balance.json").read_bytes()
        return re.sub(rb'"playerPartnerIdentifier":"[^"]*"', b'"playerPartnerIdentifier":"unknown-player"', text)
    return (FIXTURES / f"{name}.json").read_bytes()


def expected(name: str) -> bytes:
    return (EXPECTED / f"cgi_{name}.out").read_bytes()


def split_expected(text: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
    """(status, reason, headers, body) of an expected CGI output file."""
    head, _, body = text.partition(b"\n\n")
    assert body.endswith(b"exit: 0\n"), text
    lines = head.decode().split("\n")
    status, _, reason = lines[0].removeprefix("Status: ").partition(" ")
    headers = [tuple(line.split(": ", 1)) for line in lines[1:]]
    return int(status), reason, headers, body[: -len(b"exit: 0\n")]  # type: ignore[return-value]


def run_app(case: tuple[str, str, str, str, str, str, str | None]) -> tuple[bytes, str]:
    """The app's answer to a case, written like the CGI's output, and its log."""
    name, method, token, remote, sources, body_name, length = case
    body = body_of(body_name)
    extra = EXTRA_ENV.get(name, {})
    config = {"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": sources}
    config.update((k, v) for k, v in extra.items() if k.startswith("SLOTPARTNER_"))
    app = example.make_app(config)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "CONTENT_LENGTH": length if length is not None else str(len(body)),
        "REMOTE_ADDR": remote,
        "CONTENT_TYPE": "application/json",
        "wsgi.input": io.BytesIO(body),
    }
    environ.update((k, v) for k, v in extra.items() if k.startswith("HTTP_"))
    if token:
        environ["HTTP_X_SERVICE_TOKEN"] = token
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer["status"], answer["headers"] = status, headers

    log = io.StringIO()
    with contextlib.redirect_stderr(log):
        chunks = b"".join(app(environ, start_response))
    lines = [f"Status: {answer['status']}"]
    lines += [f"{k}: {v}" for k, v in answer["headers"] if k != "Content-Length"]
    length_header = dict(answer["headers"]).get("Content-Length")
    assert length_header == str(len(chunks)), (length_header, len(chunks))
    return ("\n".join(lines) + "\n\n").encode() + chunks + b"exit: 0\n", log.getvalue()


def run_cgi_log(case: tuple[str, str, str, str, str, str, str | None]) -> str:
    """What the C example logs on stderr for the same case."""
    name, method, token, remote, sources, body_name, length = case
    body = body_of(body_name)
    # Header values as the bytes sent (latin-1), given to the C program as they are.
    extra = {k: v.encode("latin-1") for k, v in EXTRA_ENV.get(name, {}).items()}
    env: dict[str, str | bytes] = {
        **extra,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SLOTPARTNER_TOKEN": TOKEN,
        "SLOTPARTNER_SOURCES": sources,
        "GATEWAY_INTERFACE": "CGI/1.1",
        "REQUEST_METHOD": method,
        "CONTENT_LENGTH": length if length is not None else str(len(body)),
        "REMOTE_ADDR": remote,
        "CONTENT_TYPE": "application/json",
    }
    if token:
        env["HTTP_X_SERVICE_TOKEN"] = token
    environment = {os.fsencode(k): os.fsencode(v) if isinstance(v, str) else v for k, v in env.items()}
    result = subprocess.run([str(CGI)], input=body, env=environment, capture_output=True, timeout=30)
    return result.stderr.decode()


class InProcessTest(unittest.TestCase):
    def test_every_cgi_case_byte_for_byte(self) -> None:
        for case in CASES:
            with self.subTest(case[0]):
                output, _ = run_app(case)
                self.assertEqual(output.decode(), expected(case[0]).decode())

    def test_logs_like_the_cgi(self) -> None:
        self.assertTrue(CGI.is_file(), f"{CGI} is missing: run `make`")
        for case in CASES:
            with self.subTest(case[0]):
                _, log = run_app(case)
                self.assertEqual(log.replace("callback_wsgi:", "callback_cgi:"), run_cgi_log(case))
                if case[0] in ("refund", "payout", "balance", "custom_range"):
                    # One line for the event, one for its index.
                    lines = log.splitlines()
                    self.assertEqual(len(lines), 2, log)
                    self.assertRegex(lines[1], r"^callback_wsgi: index \d+$")
                if case[0] == "index_string":
                    self.assertIn('callback_wsgi: index unreadable ("42"), handled without one\n', log)

    def test_content_length_parsing(self) -> None:
        parse = example.content_length
        for text, value in [(None, 0), ("", 0), ("0", 0), ("17", 17), ("+17", 17), (" \t17", 17), ("0017", 17),
                            (str(2**64 - 1), 2**64 - 1), (" -1", 2**64 - 1)]:  # fmt: skip
            self.assertEqual(parse(text), value, repr(text))
        for text in ["12x", "-1", "x", " ", "1 ", "0x10", str(2**64), "١٢", "+", "++1"]:
            self.assertIsNone(parse(text), repr(text))

    def configured(self, config: dict[str, str]) -> tuple[str, bytes, list[str]]:
        """(status line, body, log lines) of a POST to the app made from ``config``."""
        seen: dict[str, Any] = {}
        with contextlib.redirect_stderr(io.StringIO()) as log:
            app = example.make_app(config)
            environ = {"REQUEST_METHOD": "POST", "CONTENT_LENGTH": "2", "wsgi.input": io.BytesIO(b"{}")}
            body = b"".join(app(environ, lambda status, headers: seen.update(status=status)))
        return seen["status"], body, log.getvalue().splitlines()

    def test_configuration_errors_like_the_cgi(self) -> None:
        self.assertTrue(CGI.is_file(), f"{CGI} is missing: run `make`")
        for config in ({}, {"SLOTPARTNER_TOKEN": "not-a-uuid"}, {"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": ""}):
            with self.subTest(config):
                status_line, body, lines = self.configured(config)
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "REQUEST_METHOD": "POST", "CONTENT_LENGTH": "2",
                       **config}  # fmt: skip
                cgi = subprocess.run([str(CGI)], input=b"{}", env=env, capture_output=True, timeout=30)
                status, reason, _, want_body = split_expected(cgi.stdout.replace(b"\r\n", b"\n") + b"exit: 0\n")
                self.assertEqual(status_line, f"{status} {reason}")
                self.assertEqual(status, 500)
                cgi_lines = cgi.stderr.decode().replace("callback_cgi:", "callback_wsgi:").splitlines()
                if config:
                    self.assertEqual(body, want_body)
                    # Logged once at start-up and once per request; the C program per request.
                    self.assertEqual(lines, 2 * cgi_lines)
                else:
                    # No token: C is handed NULL ("must not be NULL"); Python has None, and the
                    # example asks for the variable. The same code and field as the CGI's answer.
                    # The caller, not yet authenticated, is told nothing of the setting.
                    self.assertEqual(body, want_body)
                    error = json.loads(body)["error"]
                    self.assertEqual((error["code"], error["field"]), ("invalid_argument", ""))
                    self.assertEqual(error["message"], "the partner is misconfigured; its log says how")
                    want = "callback_wsgi: configuration: token: must be a str, not None (is SLOTPARTNER_TOKEN set?)"
                    self.assertEqual(lines, [want, want])

    def test_a_token_that_is_set_gets_no_hint(self) -> None:
        status_line, _, lines = self.configured({"SLOTPARTNER_TOKEN": ""})
        self.assertEqual(status_line, "500 Internal Server Error")
        self.assertTrue(lines and not any("SLOTPARTNER_TOKEN" in line for line in lines), lines)


class UnreachableJournalTest(unittest.TestCase):
    """SLOTPARTNER_JOURNAL naming a PostgreSQL server that cannot be reached: a request failing
    the token or source check is answered as without a journal (401, 403) and never makes the
    journal connect; one that passes them gets 503 with a JSON body naming nothing of the
    journal (its URL, address, user and database stay in the log)."""

    def call(self, config: dict[str, str], token: str | None, remote: str = "127.0.0.1") -> tuple[str, bytes, str]:
        """(status line, body, log) of one refund delivered to a fresh app."""
        body = fixture_body = (FIXTURES / "refund.json").read_bytes()
        environ: dict[str, Any] = {"REQUEST_METHOD": "POST", "CONTENT_LENGTH": str(len(fixture_body)),
                                   "REMOTE_ADDR": remote, "wsgi.input": io.BytesIO(body)}  # fmt: skip
        if token is not None:
            environ["HTTP_X_SERVICE_TOKEN"] = token
        seen: dict[str, Any] = {}
        log = io.StringIO()
        with contextlib.redirect_stderr(log):
            app = example.make_app({"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": "127.0.0.1", **config})
            answer = b"".join(app(environ, lambda status, headers: seen.update(status=status)))
        return seen["status"], answer, log.getvalue()

    def assert_names_no_journal(self, text: str | bytes, what: str) -> None:
        data = text.decode() if isinstance(text, bytes) else text
        for secret in JOURNAL_SECRETS:
            self.assertNotIn(secret, data, what)

    def test_refused_requests_never_reach_the_journal(self) -> None:
        counter = ConnectionCounter()
        try:
            config = {"SLOTPARTNER_JOURNAL": counter.url()}
            for name, token, remote in (("no_token", None, "127.0.0.1"), ("wrong_token", OTHER_TOKEN, "127.0.0.1"),
                                        ("forbidden_source", TOKEN, "18.203.30.17")):  # fmt: skip
                with self.subTest(name):
                    status, body, log = self.call(config, token, remote)
                    want_status, want_reason, _, want_body = split_expected(expected(name))
                    self.assertEqual((status, body), (f"{want_status} {want_reason}", want_body))
                    self.assert_names_no_journal(body + log.encode(), name)
            self.assertEqual(counter.count, 0, "a refused request made the journal connect")
            # The counter sees a connection when one is made: a request with the token makes one.
            status, body, _ = self.call(config, TOKEN)
            self.assertEqual(status, "503 Service Unavailable")
            self.assertGreater(counter.count, 0)
        finally:
            counter.stop()

    def test_an_unreachable_journal_is_answered_503_naming_nothing_of_it(self) -> None:
        config = {"SLOTPARTNER_JOURNAL": UNREACHABLE_JOURNAL}
        status, body, log = self.call(config, None)
        self.assertEqual(status, "401 Unauthorized")
        self.assert_names_no_journal(body + log.encode(), "no token")
        status, body, log = self.call(config, TOKEN)
        self.assertEqual(status, "503 Service Unavailable")
        self.assertIn("error", json.loads(body))
        self.assert_names_no_journal(body, "the 503 body")
        self.assertTrue(log.startswith("callback_wsgi: journal: ") and "127.0.0.1:1" in log, log)
        # Opened on demand: the next request tries again, answered alike.
        app_status, app_body, _ = self.call(config, TOKEN)
        self.assertEqual((app_status, app_body), (status, body))


def parse_http(raw: bytes) -> tuple[int, str, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    match = re.match(r"HTTP/1\.[01] (\d{3}) (.*)", lines[0])
    assert match, lines[0]
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(match.group(1)), match.group(2), headers, body


def http_request(method: str, token: str, body: bytes, length: str | None = None) -> bytes:
    head = f"{method} /callback HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
    if token:
        head += f"X-Service-Token: {token}\r\n"
    head += f"Content-Length: {length if length is not None else len(body)}\r\n\r\n"
    return head.encode() + body


class OverTheWireTest(unittest.TestCase):
    sandbox: Sandbox
    server: WsgiExample
    staging_only: WsgiExample

    @classmethod
    def setUpClass(cls) -> None:
        cls.sandbox = Sandbox()
        cls.server = WsgiExample(sources="127.0.0.1")
        cls.staging_only = WsgiExample(sources="staging")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.stop()
        cls.staging_only.stop()
        cls.sandbox.stop()

    def compare(self, server: WsgiExample, case: tuple[str, str, str, str, str, str, str | None],
                replace: tuple[str, str] | None = None) -> None:  # fmt: skip
        name, method, token, _, _, body_name, length = case
        raw = server.request(http_request(method, token, body_of(body_name), length))
        status, reason, headers, body = parse_http(raw)
        want_status, want_reason, want_headers, want_body = split_expected(expected(name))
        if replace:
            want_body = want_body.replace(replace[0].encode(), replace[1].encode())
        self.assertEqual((status, reason, body), (want_status, want_reason, want_body), name)
        for key, value in want_headers:
            self.assertEqual(headers.get(key), value, f"{name}: {key}")
        self.assertEqual(headers.get("Content-Length"), str(len(body)), name)

    def test_raw_requests_answer_like_the_cgi(self) -> None:
        for case in CASES:
            name = case[0]
            if name in WIRE_SKIP:
                continue  # the source is the socket's, or the case needs another configuration: below
            with self.subTest(name):
                self.compare(self.server, case)

    def test_source_checks_use_the_peer_address(self) -> None:
        forbidden = next(c for c in CASES if c[0] == "forbidden_source")
        self.compare(self.staging_only, forbidden, replace=("18.203.30.17", "127.0.0.1"))
        refund = next(c for c in CASES if c[0] == "custom_range")
        self.compare(self.server, refund)

    def test_sandbox_send(self) -> None:
        url = self.server.url + "/callback"
        before = len(self.server.log().splitlines())
        for kind in ("refund", "payout", "balance"):
            result = self.sandbox.send(url, "--index", "7", "--expect-success", "true", kind)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertIn("verdict=ok", result.stdout)
            self.assertIn("http=200", result.stdout)
        result = self.sandbox.send(url, "--set", "moneyWon=1500.5", "--expect-success", "false", "payout")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn('"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"', result.stdout)
        # A success where a failure is expected is caught (the check can fail).
        result = self.sandbox.send(url, "--expect-success", "false", "refund")
        self.assertEqual(result.returncode, 1, result.stdout)
        logged = self.server.log().splitlines()[before:]
        # Each handled event logs its index on a line of its own.
        self.assertEqual([line for line in logged if line.startswith("callback_wsgi: index ")][:3], ["callback_wsgi: index 7"] * 3)
        lines = [line for line in logged if not line.startswith("callback_wsgi: index ")]
        self.assertEqual(len(lines), 5, lines)
        self.assertRegex(lines[0], r"^callback_wsgi: refund transaction \d+ of purchase \d+ for player \S+$")
        self.assertRegex(lines[1], r"^callback_wsgi: payout 150000 EUR \(minor units\) of major jackpot \S+ for player \S+$")
        self.assertRegex(lines[2], r"^callback_wsgi: balance query for player \S+$")
        self.assertEqual(lines[3], "callback_wsgi: refused: jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5")

    def test_reply_status_over_the_wire(self) -> None:
        # A refused balance query: sent with the event's reply status (500), no balance stated.
        self.compare(self.server, next(c for c in CASES if c[0] == "balance_unknown_player"))
        raw = self.server.request(http_request("POST", TOKEN, body_of("balance_unknown")))
        self.assertTrue(raw.startswith(b"HTTP/1.0 500 Internal Server Error\r\n"), raw)

    def test_forwarded_for_bytes(self) -> None:
        """X-Forwarded-For arrives as raw bytes: ignored from an untrusted peer, refused (403)
        from a trusted proxy when it is not UTF-8."""

        def request(server: WsgiExample) -> bytes:
            head = http_request("POST", TOKEN, body_of("refund")).split(b"\r\n\r\n", 1)
            return server.request(head[0] + b"\r\nX-Forwarded-For: \xff\xfe\r\n\r\n" + head[1])

        untrusted = WsgiExample(sources="127.0.0.1", env={"SLOTPARTNER_TRUSTED_PROXIES": "10.0.0.0/8"})
        trusted = WsgiExample(sources="staging", env={"SLOTPARTNER_TRUSTED_PROXIES": "127.0.0.0/8"})
        try:
            for server, name, replace in ((untrusted, "forwarded_not_utf8_untrusted", None),
                                          (trusted, "forwarded_not_utf8_trusted", (b"10.0.0.5", b"127.0.0.1"))):  # fmt: skip
                status, reason, _, body = parse_http(request(server))
                want_status, want_reason, _, want_body = split_expected(expected(name))
                if replace:
                    want_body = want_body.replace(*replace)
                self.assertEqual((status, reason, body), (want_status, want_reason, want_body), name)
            self.assertIn("X-Forwarded-For from trusted proxy 127.0.0.1 is not UTF-8", trusted.log())
        finally:
            untrusted.stop()
            trusted.stop()

    def test_sandbox_send_many(self) -> None:
        result = self.sandbox.send(self.server.url + "/callback", "--count", "20", "--expect-success", "true", "payout")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout.count("verdict=ok"), 20)

    @unittest.skipUnless(socket.has_ipv6, "no IPv6")
    def test_ipv6(self) -> None:
        try:
            server = WsgiExample(sources="::1", host="::1")
        except (AssertionError, OSError) as error:  # loopback without IPv6 in some containers
            self.skipTest(f"IPv6 loopback unavailable: {error}")
        try:
            result = self.sandbox.send(server.url + "/callback", "--expect-success", "true", "refund")
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
