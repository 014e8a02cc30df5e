"""Optional settings and list-valued settings, the same in every binding (issue 10, item 5).

Every optional setting of ``Receiver``, ``Client``, ``Journal`` and ``Recovery`` takes None for
the library's default: the binding then calls no setter at all (checked by recording the calls
into the library), and behaves as with the default spelled out. ``tokens``, ``sources`` and
``trusted_proxies`` take a list of strings or one comma-separated string, items trimmed; an
empty item, an item that is not a string and a list item holding a comma are refused naming the
setting; an empty value is refused for tokens and sources (by the library, as in C) and means
none for trusted proxies. ``bindings/php/tests/settings_test.php`` checks the same in PHP.
"""

from __future__ import annotations

import tempfile
import unittest
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from support import OTHER_TOKEN, PRODUCTION, STAGING, TOKEN, Sandbox, fixture

from slotpartner import (
    AuthenticationError,
    BalanceQuery,
    Client,
    ConfigurationError,
    Journal,
    Receiver,
    Recovery,
    ValidationError,
)
from slotpartner import client as client_module
from slotpartner import journal as journal_module
from slotpartner import receiver as receiver_module
from slotpartner.recovery import DEFAULT_RECOVERY_LIMIT

UNKNOWN_EVENT = b'{"event":"somethingNew","index":"7"}'


class Recorder:
    """Forwards every call into the library and records the function's name."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self.calls: list[str] = []
        self.arguments: dict[str, list[tuple[Any, ...]]] = {}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        function = getattr(self._lib, name)

        def call(*args: Any) -> Any:
            self.calls.append(name)
            self.arguments.setdefault(name, []).append(args)
            return function(*args)

        return call

    def setters(self) -> list[str]:
        return [name for name in self.calls if "_set_" in name or "_add_" in name]


@contextmanager
def recording(module: Any) -> Iterator[Recorder]:
    recorder = Recorder(module._LIB)
    with mock.patch.object(module, "_LIB", recorder):
        yield recorder


def probe(receiver: Receiver) -> dict[str, Any]:
    """What a receiver's settings show from outside, one observation per setting."""
    seen: dict[str, Any] = {}
    balance = fixture("balance")
    seen["production allowed"] = isinstance(receiver.handle(TOKEN, PRODUCTION, balance), BalanceQuery)
    try:
        receiver.handle(TOKEN, STAGING, balance)
        seen["staging allowed"] = True
    except AuthenticationError:
        seen["staging allowed"] = False
    try:
        receiver.handle(TOKEN, "127.0.0.1", balance, PRODUCTION)
        seen["forwarded believed"] = True
    except AuthenticationError:
        seen["forwarded believed"] = False
    for name, body in (("body 65536", b" " * 65536), ("body 65537", b" " * 65537)):
        try:
            receiver.parse(body)
        except ValidationError as error:
            seen[name] = error.http_status
    nested = b'{"action":"getPlayerBalance","playerIdentifier":"p","a":'  # the object is level 1
    seen["depth 32"] = isinstance(receiver.parse(nested + b"[" * 31 + b"]" * 31 + b"}"), BalanceQuery)
    try:
        receiver.parse(nested + b"[" * 32 + b"]" * 32 + b"}")
        seen["depth 33"] = True
    except ValidationError:
        seen["depth 33"] = False
    for size in (256, 257):
        body = b'{"action":"getPlayerBalance","playerIdentifier":"' + b"p" * size + b'"}'
        try:
            receiver.parse(body)
            seen[f"identifier {size}"] = True
        except ValidationError:
            seen[f"identifier {size}"] = False
    try:
        event = receiver.parse(UNKNOWN_EVENT)
        seen["unknown event"] = (type(event).__name__, event.index, event.index_unreadable)
    except ValidationError as error:
        seen["unknown event"] = error.status_name
    query = receiver.parse(balance)
    assert isinstance(query, BalanceQuery)
    seen["balance reply"] = query.reply_balance(100)
    query = receiver.parse(balance)
    seen["refused balance"] = (query.reply(False, "no"), query.reply_http_status)
    seen["refund reply"] = receiver.parse(fixture("refund")).reply()
    return seen


DEFAULTS = {
    "production allowed": True,
    "staging allowed": False,
    "forwarded believed": False,
    "body 65536": 400,
    "body 65537": 413,
    "depth 32": True,
    "depth 33": False,
    "identifier 256": True,
    "identifier 257": False,
    "unknown event": ("OtherEvent", None, True),
    "balance reply": b'{"playerBalance":{"money":100,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}',
    "refused balance": (b'{"playerBalance":{"errorMessage":"no"}}', 500),
    "refund reply": b'{"refund":{"success":true,"errorMessage":""}}',
}

RECEIVER_OPTIONAL = (
    "sources",
    "trusted_proxies",
    "max_body_bytes",
    "max_depth",
    "max_identifier_bytes",
    "index_field",
    "reject_unknown_events",
    "balance_wrapper",
    "balance_currency",
    "omit_empty_error_message",
    "strict_index",
    "balance_failure_http_status",
    "journal",
)


class ReceiverDefaultsTest(unittest.TestCase):
    def test_none_is_the_library_default_and_calls_no_setter(self) -> None:
        with recording(receiver_module) as lib:
            receiver = Receiver(TOKEN, **{name: None for name in RECEIVER_OPTIONAL})
        self.assertEqual(lib.setters(), ["sp_receiver_config_add_token"])
        self.assertEqual(probe(receiver), DEFAULTS)
        self.assertEqual(probe(Receiver(TOKEN)), DEFAULTS)

    def test_the_defaults_spelled_out_behave_the_same(self) -> None:
        spelled = Receiver(
            TOKEN,
            sources="production",
            trusted_proxies="",
            max_body_bytes=65536,
            max_depth=32,
            max_identifier_bytes=256,
            index_field="index",
            reject_unknown_events=False,
            balance_wrapper="playerBalance",
            balance_currency="EUR",
            omit_empty_error_message=False,
            strict_index=False,
            balance_failure_http_status=500,
        )
        self.assertEqual(probe(spelled), DEFAULTS)

    def test_each_setting_given_alone_changes_only_itself(self) -> None:
        expected = dict(DEFAULTS)
        expected["unknown event"] = "SP_ERR_UNKNOWN_EVENT"
        self.assertEqual(probe(Receiver(TOKEN, reject_unknown_events=True)), expected)
        expected = dict(DEFAULTS)
        expected["refused balance"] = (b'{"playerBalance":{"errorMessage":"no"}}', 503)
        self.assertEqual(probe(Receiver(TOKEN, balance_failure_http_status=503)), expected)
        expected = dict(DEFAULTS)
        expected["balance reply"] = b'{"wallet":{"money":100,"currencyISO4217":"GBP","coins":0,"errorMessage":""}}'
        expected["refused balance"] = (b'{"wallet":{"errorMessage":"no"}}', 500)
        expected["refund reply"] = b'{"refund":{"success":true}}'
        receiver = Receiver(TOKEN, balance_wrapper="wallet", balance_currency="GBP", omit_empty_error_message=True)
        self.assertEqual(probe(receiver), expected)
        with recording(receiver_module) as lib:
            receiver = Receiver(TOKEN, index_field="idx", strict_index=None)
        self.assertEqual(lib.setters(), ["sp_receiver_config_add_token", "sp_receiver_config_set_index_field"])
        self.assertEqual(receiver.parse(b'{"event":"x","idx":7}').index, 7)

    def test_a_rebuilt_reply_uses_the_default_settings(self) -> None:
        # The event keeps the settings for a reply rebuilt after its library memory is freed.
        query = Receiver(TOKEN, balance_wrapper=None, balance_currency=None).parse(fixture("balance"))
        assert isinstance(query, BalanceQuery)
        query.close()
        self.assertEqual(
            query.reply_balance(100),
            b'{"playerBalance":{"money":100,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}',
        )
        query = Receiver(TOKEN, balance_failure_http_status=None).parse(fixture("balance"))
        query.close()
        query.reply(False, "no")
        self.assertEqual(query.reply_http_status, 500)


class ListSettingsTest(unittest.TestCase):
    def test_tokens_in_every_form(self) -> None:
        for tokens in (
            f"{TOKEN},{OTHER_TOKEN}",
            f" {TOKEN} ,\t{OTHER_TOKEN}\n",
            [TOKEN, OTHER_TOKEN],
            [f" {TOKEN}", f"{OTHER_TOKEN} "],
            (TOKEN, OTHER_TOKEN),
            iter([TOKEN, OTHER_TOKEN]),
        ):
            with self.subTest(tokens=tokens):
                with recording(receiver_module) as lib:
                    receiver = Receiver(tokens, sources="any")
                self.assertEqual(lib.calls.count("sp_receiver_config_add_token"), 2)
                for token in (TOKEN, OTHER_TOKEN):
                    self.assertIsInstance(receiver.handle(token, None, fixture("balance")), BalanceQuery)
        for tokens in (TOKEN, f"  {TOKEN}  ", [TOKEN], TOKEN.upper()):
            with self.subTest(tokens=tokens):
                receiver = Receiver(tokens, sources="any")
                self.assertIsInstance(receiver.handle(TOKEN, None, fixture("balance")), BalanceQuery)
                with self.assertRaises(AuthenticationError):
                    receiver.handle(OTHER_TOKEN, None, fixture("balance"))

    def test_sources_in_every_form(self) -> None:
        for sources in (
            "10.1.2.0/24,::1,staging",
            " 10.1.2.0/24 , ::1 ,staging ",
            ["10.1.2.0/24", "::1", "staging"],
            [" 10.1.2.0/24", "::1 ", "\tstaging"],
            ("10.1.2.0/24", "::1", "staging"),
        ):
            with self.subTest(sources=sources):
                receiver = Receiver(TOKEN, sources=sources)
                for remote in ("10.1.2.3", "::1", STAGING):
                    self.assertIsInstance(receiver.handle(TOKEN, remote, fixture("balance")), BalanceQuery)
                for remote in ("10.1.3.1", PRODUCTION):
                    with self.assertRaises(AuthenticationError):
                        receiver.handle(TOKEN, remote, fixture("balance"))
        for sources in ("any", " any ", ["any"]):
            with self.subTest(sources=sources):
                receiver = Receiver(TOKEN, sources=sources)
                self.assertIsInstance(receiver.handle(TOKEN, "192.0.2.1", fixture("balance")), BalanceQuery)

    def test_trusted_proxies_in_every_form(self) -> None:
        for proxies in (
            "127.0.0.1,10.0.0.0/8",
            " 127.0.0.1 , 10.0.0.0/8 ",
            ["127.0.0.1", "10.0.0.0/8"],
            ("127.0.0.1", " 10.0.0.0/8"),
        ):
            with self.subTest(proxies=proxies):
                receiver = Receiver(TOKEN, sources="staging", trusted_proxies=proxies)
                for proxy in ("127.0.0.1", "10.9.9.9"):
                    self.assertIsInstance(receiver.handle(TOKEN, proxy, fixture("balance"), STAGING), BalanceQuery)
                with self.assertRaises(AuthenticationError):
                    receiver.handle(TOKEN, "192.0.2.1", fixture("balance"), STAGING)
        # Empty: none, as the default.
        empty: tuple[str | list[str] | tuple[str, ...], ...] = ("", "  ", [], ())
        for none in empty:
            with self.subTest(proxies=none):
                receiver = Receiver(TOKEN, sources="staging", trusted_proxies=none)
                with self.assertRaises(AuthenticationError):
                    receiver.handle(TOKEN, "127.0.0.1", fixture("balance"), STAGING)

    def test_malformed_lists_are_refused_naming_the_setting(self) -> None:
        for name, field, good in (
            ("tokens", "token", TOKEN),
            ("sources", "sources", "staging"),
            ("trusted_proxies", "trusted_proxies", "127.0.0.1"),
        ):
            for value, problem in (
                (f"{good},,{good}", "item 2 between commas is empty"),
                (f"{good},", "item 2 between commas is empty"),
                (f" ,{good}", "item 1 between commas is empty"),
                ([good, ""], "item 2 of the list is empty"),
                ([" "], "item 1 of the list is empty"),
                ([good, 7], "item 2 of the list is int, not a string"),
                ([f"{good},{good}"], "item 1 of the list holds a comma: give one value per item"),
                (7, "expected a comma-separated string or a list of strings, got int"),
                (good.encode(), "expected a comma-separated string or a list of strings, got bytes"),
                ([good + "\0"], "must not contain a NUL character"),
            ):
                settings: dict[str, Any] = {"tokens": TOKEN, "sources": "any", name: value}
                with self.subTest(setting=name, value=value):
                    with self.assertRaises(ConfigurationError) as caught:
                        Receiver(**settings)
                    self.assertEqual(caught.exception.field, field)
                    self.assertEqual(caught.exception.status, 1)
                    self.assertEqual(caught.exception.message, f"{field}: {problem}")

    def test_empty_tokens_and_sources_are_refused_by_the_library_as_in_c(self) -> None:
        for tokens, message in (
            ("", "token: expected a UUID like 6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"),
            ("  ", "token: expected a UUID like 6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"),
            ([], "token: no partner token is configured"),
            (None, "token: must be a str, not None"),
        ):
            with self.subTest(tokens=tokens):
                with self.assertRaises(ConfigurationError) as caught:
                    Receiver(tokens)
                self.assertEqual((caught.exception.field, caught.exception.message), ("token", message))
                self.assertEqual(caught.exception.http_status, 500)  # the library's answer, as in C
        blank: tuple[str | list[str], ...] = ("", " ", [])
        for sources in blank:
            with self.subTest(sources=sources):
                with self.assertRaises(ConfigurationError) as caught:
                    Receiver(TOKEN, sources=sources)
                self.assertEqual(caught.exception.field, "sources")
                self.assertEqual(caught.exception.http_status, 500)

    def test_a_malformed_token_in_a_list_is_named(self) -> None:
        for tokens in ([TOKEN, "not-a-uuid"], f"{TOKEN}, not-a-uuid", [TOKEN, OTHER_TOKEN, TOKEN]):
            with self.subTest(tokens=tokens), self.assertRaises(ConfigurationError) as caught:
                Receiver(tokens)
            self.assertEqual(caught.exception.field, "token")


class JournalDefaultsTest(unittest.TestCase):
    def test_none_is_the_library_default_and_calls_no_setter(self) -> None:
        with tempfile.TemporaryDirectory(prefix="sp-settings-") as directory:
            url = f"sqlite:{directory}/journal.db"
            names = ("lease_ms", "busy_wait_ms", "durable", "first_index", "max_reply_bytes", "lock_timeout_ms",
                     "command_timeout_ms", "max_index_jump", "not_found_limit")  # fmt: skip
            with recording(journal_module) as lib:
                journal = Journal(url, **{name: None for name in names})
            self.assertEqual(lib.setters(), [])
            with journal:
                status = journal.status()
                self.assertEqual((status.first_index, status.handled, status.numbering), (None, 0, 1))
                # The default max_index_jump, 100,000: an index that far beyond opens a gap, one
                # further is an index jump.
                receiver = Receiver(TOKEN, sources="any", journal=journal)
                for index in (1, 100_001, 200_002):
                    receiver.parse(f'{{"action":"getPlayerBalance","playerIdentifier":"p-1","index":{index}}}'.encode()).begin()
                status = journal.status()
                self.assertEqual((status.missing, status.index_jumps), (99_999, 1))
            with recording(journal_module) as lib, Journal(url, durable=False, lease_ms=None, first_index=3) as journal:
                self.assertEqual(lib.setters(), ["sp_journal_config_set_durable", "sp_journal_config_set_first_index"])
            with recording(journal_module) as lib, Journal(url, not_found_limit=2, max_index_jump=None) as journal:
                self.assertEqual(lib.setters(), ["sp_journal_config_set_not_found_limit"])


class ClientDefaultsTest(unittest.TestCase):
    sandbox: Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.sandbox = Sandbox(events_count=3)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.sandbox.stop()

    def test_none_is_the_library_default_and_calls_no_setter(self) -> None:
        names = (
            "ca_pem", "connect_timeout", "timeout", "retries", "retry_backoff", "trust_roots", "proxy",
            "max_response_bytes", "lenient_games", "fetch_action", "fetch_index_param", "fetch_event_key",
        )  # fmt: skip
        with recording(client_module) as lib:
            client = Client(self.sandbox.base_url, TOKEN, ca_file=self.sandbox.ca_file, **{n: None for n in names})
        self.assertEqual(lib.setters(), ["sp_client_config_add_ca_file"])
        with client:
            self.assertEqual(len(client.get_games("en-US")), 7)
        # A slow answer within the default 15 s time-out.
        with Client(
            self.sandbox.base_url + "/fault/slow/500", TOKEN, ca_file=self.sandbox.ca_file, timeout=None
        ) as slow:
            self.assertEqual(len(slow.get_games("en-US")), 7)

    def test_retries_and_backoff_each_alone_keep_the_others_default(self) -> None:
        # One C setter takes both: the one left None is sent as the library's default.
        for settings, expected in (
            ({"retries": 0}, (0, 200)),
            ({"retry_backoff": 0.05}, (2, 50)),
            ({"retries": 1, "retry_backoff": 0}, (1, 0)),
            ({"retries": None, "retry_backoff": None}, None),
        ):
            with self.subTest(settings=settings), recording(client_module) as lib:
                Client(self.sandbox.base_url, TOKEN, ca_file=self.sandbox.ca_file, **settings).close()
                calls = lib.arguments.get("sp_client_config_set_retries")
                self.assertEqual(calls and [tuple(args[1:]) for args in calls], expected and [expected])

    def test_recovery_limit_none_is_the_default(self) -> None:
        self.assertEqual(DEFAULT_RECOVERY_LIMIT, 10_000)
        body = (
            b'{"event":"gameSessionBuyRefund","index":3,"gameSessionIdentifier":"gs-1","playerIdentifier":"p-1",'
            b'"transactionId":3,"buyTransactionId":1,"gameSessionId":5,"partnerGameRequestIdentifier":"r",'
            b'"gameId":12,"isMobile":false}'
        )
        with tempfile.TemporaryDirectory(prefix="sp-settings-") as directory:
            with Journal(f"sqlite:{directory}/journal.db", first_index=1) as journal:
                receiver = Receiver(TOKEN, sources="any", journal=journal)
            event = receiver.handle(TOKEN, None, body)
            event.begin()
            event.reply()
            event.finish()
            with Client(self.sandbox.base_url, TOKEN, ca_file=self.sandbox.ca_file, fetch_action=None) as client:
                for limit, missing in ((None, 2), (1, 1)):
                    with self.subTest(limit=limit), Recovery(receiver, client, limit=limit) as recovery:
                        self.assertEqual(recovery.report().missing, missing)
                with self.assertRaises(ConfigurationError) as caught:
                    Recovery(receiver, client, limit=0)
                self.assertEqual(caught.exception.field, "limit")


if __name__ == "__main__":
    unittest.main()
