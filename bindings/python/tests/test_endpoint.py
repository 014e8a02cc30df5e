"""slotpartner.Endpoint in process, and its WSGI and ASGI applications called as a server calls
them: the settings refused by name, the logic's exception answered 503 and logged (never
raised), an other event's reply given by the logic, the event's claim the endpoint's, a staged
credit with ON CONFLICT DO NOTHING, the body read up to its limit plus one byte."""

from __future__ import annotations

import ast
import asyncio
import io
import logging
import re
import subprocess
import sys
import tempfile
import unittest
from typing import Any

import slotpartner
from slotpartner.endpoint import ENVIRONMENT, settings_from_environment
from support import OTHER_TOKEN, ROOT, TOKEN, fixture

OUTSIDE = "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); print(db.execute(sys.argv[2]).fetchall()); db.commit()"
CREDIT = "INSERT INTO credits VALUES (?, ?) ON CONFLICT (kind, transaction_id) DO NOTHING"


class EndpointTest(unittest.TestCase):
    def setUp(self) -> None:
        folder = tempfile.TemporaryDirectory(prefix="sp-endpoint-")
        self.addCleanup(folder.cleanup)
        self.db = f"{folder.name}/journal.db"
        slotpartner.Journal(f"sqlite:{self.db}").close()  # the journal first: it refuses another's database
        self.outside("CREATE TABLE credits (kind TEXT, transaction_id INTEGER, PRIMARY KEY (kind, transaction_id))")
        self.endpoint = slotpartner.Endpoint(token=TOKEN, sources=["127.0.0.1"], journal=f"sqlite:{self.db}",
                                             max_body_bytes=4096)  # fmt: skip

    def outside(self, sql: str) -> list[Any]:
        """Runs ``sql`` on the journal's file from another process (a second SQLite in this one
        would share the file's locks with the library's), and returns its rows."""
        done = subprocess.run([sys.executable, "-c", OUTSIDE, self.db, sql], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        rows: list[Any] = ast.literal_eval(done.stdout)
        return rows

    def handle(self, body: bytes, logic: Any, method: str = "POST") -> slotpartner.Response:
        return self.endpoint.handle(method, TOKEN.encode(), "127.0.0.1", None, body, logic)

    def test_settings_are_refused_by_name(self) -> None:
        with self.assertRaises(slotpartner.ConfigurationError) as typo:
            slotpartner.Endpoint(token=TOKEN, sourcse="any")
        self.assertIn("sourcse", typo.exception.message)
        with self.assertRaises(slotpartner.ConfigurationError) as unset:
            slotpartner.Endpoint.from_environment({})
        self.assertEqual(unset.exception.message, "token: no partner token is configured (is SLOTPARTNER_TOKEN set?)")
        endpoint = slotpartner.Endpoint.from_environment({"SLOTPARTNER_TOKEN": TOKEN}, sources="any")
        response = endpoint.handle("POST", TOKEN, None, None, fixture("balance"), lambda e: e.reply_balance(7))
        self.assertEqual((response.status, response.body.count(b'"money":7')), (200, 1))

    def test_a_failing_logic_is_503_logged_and_the_next_delivery_credits_once(self) -> None:
        def failing(event: Any) -> bytes:
            event.stage(CREDIT, ("payout", event.transaction_id))
            raise RuntimeError("the ledger is down")

        with self.assertLogs("slotpartner", logging.WARNING) as logged:
            response = self.handle(fixture("payout"), failing)
        self.assertEqual((response.status, dict(response.headers).get("Retry-After")), (503, "5"))
        self.assertIn("RuntimeError: the ledger is down", response.log)
        self.assertIn("RuntimeError: the ledger is down", logged.output[0])
        self.assertIsNotNone(logged.records[0].exc_info, "with its traceback")

        def credit(event: Any) -> bytes:
            event.stage(CREDIT, ("payout", event.transaction_id))
            return event.reply()

        first = self.handle(fixture("payout"), credit)
        repeat = self.handle(fixture("payout"), credit)
        self.assertEqual((first.status, first.body), (200, b'{"payout":{"success":true,"errorMessage":""}}'))
        self.assertEqual(repeat.body, first.body)
        self.assertEqual(self.outside("SELECT * FROM credits"), [("payout", 900002)])

    def test_the_claim_is_the_endpoints_and_the_event_outlives_the_exchange(self) -> None:
        kept: list[Any] = []

        def logic(event: Any) -> bytes:
            kept.append(event)
            for step in (event.begin, event.finish, event.abandon):
                with self.assertRaises(slotpartner.ConfigurationError) as refused:
                    step()
                self.assertIn("is its Endpoint's", refused.exception.message)
            event.close()  # does nothing: the exchange frees the event
            return event.reply()

        self.assertEqual(self.handle(fixture("refund"), logic).status, 200)
        event = kept[0]
        self.assertEqual(event.transaction_id, 900001)
        self.assertEqual(event.reply(False, "later"), b'{"refund":{"success":false,"errorMessage":"later"}}')
        with self.assertRaises(slotpartner.ConfigurationError):
            event.stage(CREDIT, ("refund", 1))

    def test_an_other_event_is_answered_with_what_the_logic_returns(self) -> None:
        endpoint = slotpartner.Endpoint(token=TOKEN, sources="any")
        response = endpoint.handle("POST", TOKEN, None, None, fixture("other_event"), lambda event: '{"ok":true}')
        self.assertEqual((response.status, response.body), (200, b'{"ok":true}'))
        response = endpoint.handle("POST", TOKEN, None, None, fixture("other_event"), lambda event: None)
        self.assertEqual(response.status, 503, "no reply")

    def test_an_other_events_logic_returning_no_text_is_its_failure_not_a_raise_or_nul_bytes(self) -> None:
        # A dict (what a Python logic returns for JSON) raised TypeError out of handle; an int or
        # a bool became that many NUL bytes, sent with 200 and stored as the reply of the event.
        for returned in ({"ok": True}, 3, True):
            with self.assertLogs("slotpartner", logging.WARNING):
                response = self.handle(fixture("other_event"), lambda event, r=returned: r)
            self.assertEqual((response.status, dict(response.headers).get("Retry-After")), (503, "5"), returned)
            self.assertIn("not the bytes or str to send", response.log)
            self.assertNotIn(b"\0", response.body)

    def test_wsgi_reads_the_body_up_to_its_limit_and_answers(self) -> None:
        app = slotpartner.wsgi.application(self.endpoint, lambda event: event.reply())
        seen: dict[str, Any] = {}

        def call(body: bytes, length: str | None = None, **extra: str) -> bytes:
            stream = io.BytesIO(body)
            environ = {"REQUEST_METHOD": "POST", "REMOTE_ADDR": "127.0.0.1", "HTTP_X_SERVICE_TOKEN": TOKEN,
                       "CONTENT_LENGTH": str(len(body)) if length is None else length, "wsgi.input": stream, **extra}  # fmt: skip
            answer = b"".join(app(environ, lambda status, headers: seen.update(status=status, headers=dict(headers))))
            seen["unread"] = len(body) - stream.tell()
            return answer

        self.assertIn(b'"success":true', call(fixture("refund")))
        self.assertEqual(seen["status"], "200 OK")
        self.assertEqual(seen["headers"]["Content-Length"], str(len(b'{"refund":{"success":true,"errorMessage":""}}')))
        call(b" " * 10000)
        self.assertEqual((seen["status"], seen["unread"]), ("413 Request Entity Too Large", 0))
        call(fixture("refund"), HTTP_X_FORWARDED_FOR="18.203.30.17")
        self.assertEqual(seen["status"], "200 OK", "X-Forwarded-For of an untrusted peer is not read")
        call(fixture("refund"), REQUEST_METHOD="PUT")
        self.assertEqual((seen["status"], seen["headers"]["Allow"]), ("405 Method Not Allowed", "POST"))

    def test_asgi_answers_off_the_loop_and_lifespan(self) -> None:
        app = slotpartner.asgi.application(self.endpoint, lambda event: event.reply())

        async def call(scope: dict[str, Any], chunks: list[bytes]) -> list[dict[str, Any]]:
            incoming = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
            sent: list[dict[str, Any]] = []

            async def receive() -> dict[str, Any]:
                return incoming.pop(0)

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            await app(scope, receive, send)
            return sent

        scope = {"type": "http", "method": "POST", "client": ("127.0.0.1", 5000),
                 "headers": [(b"x-service-token", TOKEN.encode())]}  # fmt: skip
        body = fixture("payout")
        sent = asyncio.run(call(scope, [body[:10], body[10:]]))
        self.assertEqual((sent[0]["status"], sent[1]["body"]), (200, b'{"payout":{"success":true,"errorMessage":""}}'))
        self.assertIn((b"content-length", str(len(sent[1]["body"])).encode()), sent[0]["headers"])
        sent = asyncio.run(call(scope, [b" " * 3000, b" " * 3000, b" " * 3000]))
        self.assertEqual(sent[0]["status"], 413)
        sent = asyncio.run(call({**scope, "client": None}, [body]))
        self.assertEqual(sent[0]["status"], 403, "no peer address")
        lifespan = asyncio.run(_lifespan(app))
        self.assertEqual(lifespan, ["lifespan.startup.complete", "lifespan.shutdown.complete"])


def library_environment_keys() -> dict[str, str]:
    """The library's table of the environment's settings (``KEYS`` in src/endpoint/settings.rs,
    which ``sp_endpoint_from_environment`` reads): key -> kind (Text, Switch, Number, Tokens), in
    its order."""
    source = (ROOT / "src" / "endpoint" / "settings.rs").read_text()
    table = re.search(r"^const KEYS: \[\(&str, Kind\); ([0-9]+)\] = \[\n(.*?)\n\];$", source, re.M | re.S)
    if table is None:
        raise AssertionError("no KEYS table in src/endpoint/settings.rs")
    rows = re.findall(r'^    \("([a-z_]+)", Kind::([A-Za-z]+)\),$', table[2], re.M)
    if len(rows) != int(table[1]) or len(rows) != table[2].count("\n") + 1:
        raise AssertionError(f"KEYS holds {table[1]} rows, {len(rows)} read: a row of another form")
    return dict(rows)


class EnvironmentTest(unittest.TestCase):
    """``Endpoint.from_environment``: every setting the library reads from ``SLOTPARTNER_<KEY>``,
    by the library's rules."""

    def refusal(self, env: dict[str, str]) -> slotpartner.ConfigurationError:
        with self.assertRaises(slotpartner.ConfigurationError) as refused:
            settings_from_environment(env)
        return refused.exception

    def test_the_binding_reads_the_settings_the_library_reads_each_of_the_same_kind(self) -> None:
        library = library_environment_keys()
        self.assertEqual(len(library), 27, "the library's table read whole")
        self.assertEqual(list(ENVIRONMENT.items()), list(library.items()), "names, kinds and order")

    def test_the_rules(self) -> None:
        self.assertEqual(settings_from_environment({}), {})
        for spelling in ("1", "true", "TRUE", "Yes", "on", " On\t"):
            self.assertEqual(settings_from_environment({"SLOTPARTNER_REJECT_UNKNOWN_EVENTS": spelling}),
                             {"reject_unknown_events": True}, spelling)  # fmt: skip
        for spelling in ("0", "false", "False", "NO", "off", " 0 "):
            self.assertEqual(settings_from_environment({"SLOTPARTNER_STRICT_INDEX": spelling}), {"strict_index": False}, spelling)
        maybe = self.refusal({"SLOTPARTNER_STRICT_INDEX": "maybe"})
        self.assertEqual((maybe.field, maybe.message), ("SLOTPARTNER_STRICT_INDEX",
                         'SLOTPARTNER_STRICT_INDEX: expected 1 or 0 (true or false), got "maybe"'))  # fmt: skip
        self.assertEqual(maybe.http_status, 500, "answered as a refused setting")
        numbers = {"SLOTPARTNER_MAX_BODY_BYTES": " 4096 ", "SLOTPARTNER_FIRST_INDEX": "-3", "SLOTPARTNER_RETRY_AFTER": "+007"}
        self.assertEqual(settings_from_environment(numbers), {"max_body_bytes": 4096, "first_index": -3, "retry_after": 7})
        for bad in ("64k", "1.5", "1_000", "-", "0x10", "9223372036854775808", "\u0661"):
            refused = self.refusal({"SLOTPARTNER_LEASE_MS": bad})
            self.assertEqual((refused.field, refused.message),
                             ("SLOTPARTNER_LEASE_MS", f'SLOTPARTNER_LEASE_MS: expected an integer, got "{bad}"'))  # fmt: skip
        self.assertEqual(settings_from_environment({"SLOTPARTNER_LEASE_MS": "9223372036854775807"}), {"lease_ms": 2**63 - 1})
        self.assertEqual(settings_from_environment({"SLOTPARTNER_TOKEN": f" {TOKEN} "}), {"token": [TOKEN]})
        self.assertEqual(settings_from_environment({"SLOTPARTNER_TOKEN": f"{OTHER_TOKEN} , {TOKEN}"}), {"token": [OTHER_TOKEN, TOKEN]})
        texts = {"SLOTPARTNER_SOURCES": "10.0.0.0/8, staging\n", "SLOTPARTNER_JOURNAL": "sqlite:/tmp/x.db"}
        self.assertEqual(settings_from_environment(texts), {"sources": "10.0.0.0/8, staging", "journal": "sqlite:/tmp/x.db"})
        self.assertEqual(settings_from_environment({"SLOTPARTNER_BALANCE_CURRENCY": "\xa0EUR\u3000"}), {"balance_currency": "EUR"},
                         "trimmed of Unicode's spaces as the library trims")  # fmt: skip
        self.assertEqual(settings_from_environment({"SLOTPARTNER_BALANCE_WRAPPER": "\x1fbalance"}), {"balance_wrapper": "\x1fbalance"},
                         "no more than the library trims")  # fmt: skip
        self.assertEqual(self.refusal({"SLOTPARTNER_INDEX_FIELD": "ind\udcffex"}).field, "SLOTPARTNER_INDEX_FIELD", "not UTF-8")
        blank = {"SLOTPARTNER_TOKEN": "", "SLOTPARTNER_STRICT_INDEX": " ", "SLOTPARTNER_MAX_DEPTH": "\t"}
        self.assertEqual(settings_from_environment(blank), {}, "empty or blank: unset")
        given = {"SLOTPARTNER_STRICT_INDEX": "maybe", "SLOTPARTNER_SOURCES": "staging", "SLOTPARTNER_JOURNAL": "sqlite:/tmp/x.db"}
        self.assertEqual(settings_from_environment(given, strict_index=False, sources="any", journal=None),
                         {"strict_index": False, "sources": "any", "journal": None},
                         "a setting given wins, its variable not read (None: the default)")  # fmt: skip

    def test_every_variable_reaches_the_endpoint(self) -> None:
        base = {"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": "127.0.0.1"}

        def call(endpoint: slotpartner.Endpoint, name: str) -> slotpartner.Response:
            return endpoint.handle("POST", TOKEN, "127.0.0.1", None, fixture(name), lambda event: event.reply())

        strict = slotpartner.Endpoint.from_environment({**base, "SLOTPARTNER_REJECT_UNKNOWN_EVENTS": "1"})
        self.assertEqual(call(strict, "other_event").status, 400, "SLOTPARTNER_REJECT_UNKNOWN_EVENTS=1: an unknown event refused")
        limited = slotpartner.Endpoint.from_environment({**base, "SLOTPARTNER_MAX_BODY_BYTES": "64", "SLOTPARTNER_RETRY_AFTER": "9"})
        self.assertEqual((limited.max_body_bytes, call(limited, "refund").status), (64, 413))
        wrapped = slotpartner.Endpoint.from_environment({**base, "SLOTPARTNER_BALANCE_WRAPPER": "wallet"})
        self.assertEqual(wrapped.handle("POST", TOKEN, "127.0.0.1", None, fixture("balance"), lambda e: e.reply_balance(7)).body[:10],
                         b'{"wallet":', "the reply's settings too")  # fmt: skip
        given = slotpartner.Endpoint.from_environment({**base, "SLOTPARTNER_REJECT_UNKNOWN_EVENTS": "1"}, reject_unknown_events=False)
        seen = given.handle("POST", TOKEN, "127.0.0.1", None, fixture("other_event"), lambda event: '{"seen":true}')
        self.assertEqual((seen.status, seen.body), (200, b'{"seen":true}'), "the setting given wins: the event reaches the logic")
        with self.assertRaises(slotpartner.ConfigurationError) as bad:
            slotpartner.Endpoint.from_environment({**base, "SLOTPARTNER_OPTIMISTIC": "maybe"})
        self.assertEqual(bad.exception.field, "SLOTPARTNER_OPTIMISTIC")
        with self.assertRaises(slotpartner.ConfigurationError) as blank:
            slotpartner.Endpoint.from_environment({"SLOTPARTNER_TOKEN": " "})
        self.assertEqual(blank.exception.message, "token: no partner token is configured (is SLOTPARTNER_TOKEN set?)")
        with self.assertRaises(slotpartner.ConfigurationError) as wrong:
            slotpartner.Endpoint.from_environment({"SLOTPARTNER_TOKEN": "not-a-uuid"})
        self.assertNotIn("SLOTPARTNER_TOKEN", wrong.exception.message, "a token set: no hint")


async def _lifespan(app: Any) -> list[str]:
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    await app({"type": "lifespan"}, receive, send)
    return sent


if __name__ == "__main__":
    unittest.main()
