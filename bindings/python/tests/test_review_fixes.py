"""The C ABI changes of the review, through the Python binding: the lenient index
(``index_unreadable``) and ``strict_index``, balance failures that state no balance and their
HTTP status (``reply_http_status``, ``balance_failure_http_status``), X-Forwarded-For as bytes,
sources ``any`` without an address, IPv4-mapped ranges, case-insensitive tokens, the last
error's message handed back, and the refused event's identity on the exception. Each test
asserts the exact new body and status, so that it fails against the old behaviour."""

from __future__ import annotations

import copy
import pickle
import unittest

from support import OTHER_TOKEN, PRODUCTION, STAGING, TOKEN, fixture

from slotpartner import (
    AuthenticationError,
    BalanceQuery,
    BuyRefund,
    ConfigurationError,
    JackpotPayout,
    OtherEvent,
    Receiver,
    ValidationError,
    reply_balance,
)

PAYOUT = fixture("payout")  # "index":42
BALANCE = fixture("balance")  # "index":43
REFUND = fixture("refund")  # "index": 41
OTHER = fixture("other_event")  # "index":44


def with_index(body: bytes, raw: bytes) -> bytes:
    """``body`` with the value of its index field replaced by the raw JSON ``raw``."""
    for old in (b'"index":42', b'"index":43', b'"index":44', b'"index": 41'):
        if old in body:
            return body.replace(old, b'"index":' + raw)
    raise AssertionError("no index in the body")


class LenientIndexTest(unittest.TestCase):
    receiver = Receiver(TOKEN, sources="any")

    def test_unreadable_index_is_handled_without_one(self) -> None:
        for raw in (b'"42"', b"-1", b"1.5"):
            for body, kind in ((PAYOUT, JackpotPayout), (REFUND, BuyRefund), (BALANCE, BalanceQuery), (OTHER, OtherEvent)):
                with self.subTest(raw=raw, kind=kind.__name__):
                    event = self.receiver.handle(TOKEN, "127.0.0.1", with_index(body, raw))
                    self.assertIs(type(event), kind)
                    self.assertIsNone(event.index)
                    self.assertIs(event.index_unreadable, True)
                    self.assertEqual(event.extra["index"], raw.decode())  # the raw value, readable
        # The event is answered as usual: an unreadable index never refuses money.
        payout = self.receiver.parse(with_index(PAYOUT, b'"42"'))
        self.assertEqual(payout.reply(), b'{"payout":{"success":true,"errorMessage":""}}')
        self.assertEqual(payout.reply_http_status, 200)

    def test_readable_absent_and_null_index(self) -> None:
        event = self.receiver.parse(PAYOUT)
        self.assertEqual((event.index, event.index_unreadable), (42, False))
        event = self.receiver.parse(fixture("payout_minimal"))
        self.assertEqual((event.index, event.index_unreadable), (None, False))
        event = self.receiver.parse(with_index(PAYOUT, b"null"))  # null counts as absent
        self.assertEqual((event.index, event.index_unreadable, event.extra["index"]), (None, False, "null"))

    def test_custom_index_field(self) -> None:
        receiver = Receiver(TOKEN, sources="any", index_field="seq")
        event = receiver.parse(b'{"action":"getPlayerBalance","playerIdentifier":"p","seq":"7","index":"x"}')
        self.assertEqual((event.index, event.index_unreadable), (None, True))
        self.assertEqual(event.extra, {"seq": '"7"', "index": '"x"'})
        event = receiver.parse(b'{"action":"getPlayerBalance","playerIdentifier":"p","index":"x"}')
        self.assertEqual((event.index, event.index_unreadable), (None, False))  # "index" is not the index here

    def test_field_in_equality_copies_and_pickles(self) -> None:
        event = self.receiver.parse(with_index(PAYOUT, b'"42"'))
        plain = self.receiver.parse(with_index(PAYOUT, b'"42"'))
        self.assertEqual(event, plain)
        self.assertIn("index_unreadable=True", repr(event))
        for duplicate in (copy.copy(event), pickle.loads(pickle.dumps(event))):
            self.assertIs(duplicate.index_unreadable, True)
            self.assertEqual(duplicate, event)
        constructed = JackpotPayout(**{f: getattr(event, f) for f in JackpotPayout._fields})
        self.assertEqual(constructed, event)
        self.assertIs(BuyRefund("gs", None, "p", 1, 1, 1, "r", 1, False).index_unreadable, False)

    def test_strict_index_refuses_naming_the_field(self) -> None:
        strict = Receiver(TOKEN, sources="any", strict_index=True)
        with self.assertRaises(ValidationError) as caught:
            strict.handle(TOKEN, "127.0.0.1", with_index(PAYOUT, b'"42"'))
        error = caught.exception
        self.assertEqual((error.status, error.field, error.http_status), (10, "jackpotPayout.index", 200))
        self.assertEqual(error.message, 'jackpotPayout.index: expected a non-negative integer, got "42"')
        self.assertEqual(
            error.response_body,
            b'{"payout":{"success":false,"errorMessage":"jackpotPayout.index: expected a non-negative integer, got \\"42\\""}}',
        )
        for raw in (b"-1", b"1.5"):
            with self.assertRaises(ValidationError) as caught:
                strict.parse(with_index(REFUND, raw))
            self.assertEqual(caught.exception.field, "gameSessionBuyRefund.index")
        # A balance query refused for its index: the balance failure shape and status.
        with self.assertRaises(ValidationError) as caught:
            strict.parse(with_index(BALANCE, b'"43"'))
        self.assertEqual(caught.exception.http_status, 500)
        self.assertEqual(
            caught.exception.response_body,
            b'{"playerBalance":{"errorMessage":"getPlayerBalance.index: expected a non-negative integer, got \\"43\\""}}',
        )
        # A readable index passes, and strict=False is the default.
        self.assertEqual(strict.parse(PAYOUT).index, 42)
        self.assertIs(Receiver(TOKEN, sources="any", strict_index=False).parse(with_index(PAYOUT, b'"42"')).index_unreadable, True)


class BalanceFailureTest(unittest.TestCase):
    def test_refused_balance_states_no_balance_and_is_sent_with_500(self) -> None:
        receiver = Receiver(TOKEN, sources="any")
        event = receiver.parse(BALANCE)
        assert isinstance(event, BalanceQuery)
        self.assertEqual(event.reply_http_status, 0)  # no reply built yet
        body = event.reply(False, "player unknown")
        self.assertEqual(body, b'{"playerBalance":{"errorMessage":"player unknown"}}')
        self.assertNotIn(b"money", body)
        self.assertNotIn(b"coins", body)
        self.assertEqual(event.reply_http_status, 500)
        # Rebuilt after the library's event was freed: same body, same status.
        event.reply_http_status = 0
        self.assertEqual(event.reply(False, "player unknown"), body)
        self.assertEqual(event.reply_http_status, 500)
        closed = receiver.parse(BALANCE)
        closed.close()
        self.assertEqual(closed.reply(False, "player unknown"), body)
        self.assertEqual(closed.reply_http_status, 500)
        # A successful balance and other events: 200.
        ok = receiver.parse(BALANCE)
        assert isinstance(ok, BalanceQuery)
        ok.reply_balance(5)
        self.assertEqual(ok.reply_http_status, 200)
        ok.reply_http_status = 0
        ok.reply_balance(5)  # rebuilt
        self.assertEqual(ok.reply_http_status, 200)
        payout = receiver.parse(PAYOUT)
        payout.reply(False, "jackpot unknown")
        self.assertEqual(payout.reply_http_status, 200)

    def test_configured_status(self) -> None:
        for status in (200, 400, 503, 599):
            receiver = Receiver(TOKEN, sources="any", balance_failure_http_status=status)
            event = receiver.parse(BALANCE)
            self.assertEqual(event.reply(False, "down"), b'{"playerBalance":{"errorMessage":"down"}}')
            self.assertEqual(event.reply_http_status, status)
            closed = receiver.parse(BALANCE)
            closed.close()
            closed.reply(False, "down")
            self.assertEqual(closed.reply_http_status, status)  # kept in the reply settings
            copied = copy.copy(receiver.parse(BALANCE))
            copied.reply(False, "down")
            self.assertEqual(copied.reply_http_status, status)
            # A balance query refused by validation is answered with the same status.
            with self.assertRaises(ValidationError) as caught:
                receiver.parse(fixture("invalid_no_player"))
            self.assertEqual(caught.exception.http_status, status)

    def test_status_setting_refused(self) -> None:
        for status in (0, 199, 201, 300, 399, 600, -1, 65536 + 200, 2**70):
            with self.assertRaises(ConfigurationError, msg=status) as caught:
                Receiver(TOKEN, balance_failure_http_status=status)
            self.assertEqual(caught.exception.field, "balance_failure_http_status")

    def test_validation_failure_of_a_balance_query(self) -> None:
        with self.assertRaises(ValidationError) as caught:
            Receiver(TOKEN, sources="any").parse(fixture("invalid_no_player"))
        error = caught.exception
        self.assertEqual(error.http_status, 500)
        self.assertEqual(
            error.response_body,
            b'{"playerBalance":{"errorMessage":"getPlayerBalance.playerIdentifier: required field is missing '
            b'(one of playerIdentifier and playerPartnerIdentifier must be present)"}}',
        )

    def test_standalone_balance_failure(self) -> None:
        self.assertEqual(reply_balance(100, "GBP", 3, "blocked"), b'{"playerBalance":{"errorMessage":"blocked"}}')
        self.assertEqual(
            reply_balance(0, error_message="blocked", wrapper="wallet"), b'{"wallet":{"errorMessage":"blocked"}}'
        )


class ForwardedForTest(unittest.TestCase):
    receiver = Receiver(TOKEN, sources="staging", trusted_proxies="10.0.0.0/8")

    def test_not_utf8_from_an_untrusted_peer_is_ignored(self) -> None:
        for header in (b"\xff\xfe", bytearray(b"\xff\xfe"), memoryview(b"\xff\xfe"), "\udcff\udcfe", b"\xff\0"):
            event = self.receiver.handle(TOKEN, STAGING, REFUND, forwarded_for=header)
            self.assertIsInstance(event, BuyRefund, repr(header))
            self.assertEqual(event.reply(), b'{"refund":{"success":true,"errorMessage":""}}')

    def test_not_utf8_from_a_trusted_proxy_is_a_forbidden_source(self) -> None:
        for header in (b"\xff\xfe", "\udcff\udcfe"):
            with self.assertRaises(AuthenticationError, msg=repr(header)) as caught:
                self.receiver.handle(TOKEN, "10.0.0.5", REFUND, forwarded_for=header)
            error = caught.exception
            self.assertEqual((error.status, error.field, error.http_status), (16, "remote_addr", 403))
            self.assertEqual(
                error.response_body,
                b'{"error":{"code":"forbidden_source","field":"remote_addr","message":"remote_addr: '
                b'X-Forwarded-For from trusted proxy 10.0.0.5 is not UTF-8 (byte 0)"}}',
            )
        # A UTF-8 header from the trusted proxy is read, as bytes or str.
        for header in (STAGING.encode(), STAGING, f"192.0.2.1, {STAGING}".encode()):
            self.assertIsInstance(self.receiver.handle(TOKEN, "10.0.0.5", REFUND, forwarded_for=header), BuyRefund)
        with self.assertRaises(AuthenticationError):
            self.receiver.handle(TOKEN, "10.0.0.5", REFUND, forwarded_for=PRODUCTION.encode())


class SourcesAndTokensTest(unittest.TestCase):
    def test_any_without_a_remote_address(self) -> None:
        receiver = Receiver(TOKEN, sources="any")
        for remote in (None, "", "not-an-address", b"unix:/run/app.sock"):
            event = receiver.handle(TOKEN, remote, REFUND)
            self.assertIsInstance(event, BuyRefund, repr(remote))
        # Any other sources still need an address.
        with self.assertRaises(AuthenticationError) as caught:
            Receiver(TOKEN, sources="staging").handle(TOKEN, None, REFUND)
        self.assertEqual(caught.exception.http_status, 403)

    def test_ipv4_mapped_range_matches_ipv4_peers(self) -> None:
        receiver = Receiver(TOKEN, sources="::ffff:10.0.0.0/104")
        for remote in ("10.1.2.3", "10.255.0.1", "::ffff:10.1.2.3"):
            self.assertIsInstance(receiver.handle(TOKEN, remote, REFUND), BuyRefund, remote)
        for remote in ("11.0.0.1", "192.0.2.1"):
            with self.assertRaises(AuthenticationError, msg=remote) as caught:
                receiver.handle(TOKEN, remote, REFUND)
            self.assertEqual(caught.exception.status, 16)
        self.assertIsInstance(Receiver(TOKEN, sources="::ffff:34.254.138.0/120").handle(TOKEN, STAGING, REFUND), BuyRefund)

    def test_upper_case_tokens(self) -> None:
        sent_upper = Receiver(TOKEN, sources="any")
        self.assertIsInstance(sent_upper.handle(TOKEN.upper(), None, REFUND), BuyRefund)
        configured_upper = Receiver([TOKEN.upper(), OTHER_TOKEN.upper()], sources="any")
        for token in (TOKEN, TOKEN.upper(), OTHER_TOKEN, "0B7e3c55-1A2b-4C3d-8E9f-000000000001"):
            self.assertIsInstance(configured_upper.handle(token, None, REFUND), BuyRefund, token)
        with self.assertRaises(AuthenticationError) as caught:
            configured_upper.handle("6F1C2A3E-8B7D-4C5E-9F10-2A3B4C5D6E70", None, REFUND)
        self.assertEqual((caught.exception.status, caught.exception.http_status), (15, 401))


class LastErrorTest(unittest.TestCase):
    receiver = Receiver(TOKEN, sources="any")

    def test_message_passed_back_to_the_next_call(self) -> None:
        try:
            self.receiver.handle(TOKEN, None, fixture("invalid_money_float"))
        except ValidationError as exc:
            event = self.receiver.parse(PAYOUT)
            self.assertEqual(
                event.reply(False, str(exc)),
                b'{"payout":{"success":false,"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"}}',
            )
        else:
            self.fail("an invalid payout was accepted")
        # The same with a balance query, right after the failure (no call in between).
        balance = self.receiver.parse(BALANCE)
        try:
            self.receiver.parse(b"[]")
        except ValidationError as exc:
            self.assertEqual(
                balance.reply(False, exc.message),
                b'{"playerBalance":{"errorMessage":"body: the top level is not a JSON object"}}',
            )
            self.assertEqual(balance.reply_http_status, 500)

    def test_refusal_names_the_event_it_could_read(self) -> None:
        body = PAYOUT.replace(b'"moneyWon":150000', b'"moneyWon":1.5').replace(b'"index":42', b'"index":77')
        with self.assertRaises(ValidationError) as caught:
            self.receiver.handle(TOKEN, None, body)
        error = caught.exception
        self.assertEqual((error.event_name, error.index, error.transaction_id), ("jackpotPayout", 77, 900002))
        with self.assertRaises(ValidationError) as caught:
            self.receiver.parse(with_index(PAYOUT, b'"77"').replace(b'"moneyWon":150000', b'"moneyWon":1.5'))
        self.assertEqual((caught.exception.event_name, caught.exception.index), ("jackpotPayout", None))
        with self.assertRaises(ValidationError) as caught:
            self.receiver.parse(b'{"event":')
        self.assertEqual((caught.exception.event_name, caught.exception.index, caught.exception.transaction_id),
                         (None, None, None))  # fmt: skip
        with self.assertRaises(AuthenticationError) as caught:
            self.receiver.handle(OTHER_TOKEN, None, body)  # nothing is read of an unauthenticated body
        self.assertEqual((caught.exception.event_name, caught.exception.index), (None, None))


if __name__ == "__main__":
    unittest.main()
