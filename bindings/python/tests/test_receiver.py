"""Receiver: typed events with every field, validation errors, authentication, exact replies."""

from __future__ import annotations

import copy
import json
import pickle
import tempfile
import threading
import unittest

from support import OTHER_TOKEN, PRODUCTION, STAGING, TOKEN, fixture

import slotpartner
from slotpartner import (
    AuthenticationError,
    BalanceQuery,
    BuyRefund,
    ConfigurationError,
    JackpotPayout,
    OtherEvent,
    Receiver,
    SlotPartnerError,
    ValidationError,
)

REFUND_WITH_BONUS = (
    b'{"event":"gameSessionBuyRefund","gameSessionIdentifier":"gs-1","playerPartnerIdentifier":"partner-\\u00e9",'
    b'"transactionId":0,"buyTransactionId":9223372036854775807,"gameSessionId":3,'
    b'"partnerGameRequestIdentifier":"req-1","gameId":4,"isMobile":false,"bonusCode":"B\\"ONUS\\\\1",'
    b'"index":null,"future":[1,{"a":"b"}]}'
)


class EventsTest(unittest.TestCase):
    """Every event kind, every field, read from the fixtures the C examples use."""

    receiver = Receiver(TOKEN, sources="staging")

    def handle(self, body: bytes) -> slotpartner.Event:
        return self.receiver.handle(TOKEN, STAGING, body)

    def test_refund_every_field(self) -> None:
        event = self.handle(fixture("refund"))
        self.assertIs(type(event), BuyRefund)
        assert isinstance(event, BuyRefund)
        self.assertEqual(event.name, "gameSessionBuyRefund")
        self.assertEqual(event.index, 41)
        self.assertEqual(event.game_session_identifier, "gs-7f3a9c")
        self.assertEqual(event.player_identifier, "svc-player-1001")
        self.assertEqual(event.player_partner_identifier, "partner-42")
        self.assertEqual(event.transaction_id, 900001)
        self.assertEqual(event.buy_transaction_id, 899990)
        self.assertEqual(event.game_session_id, 5551)
        self.assertEqual(event.partner_game_request_identifier, "req-2026-11-21-0001")
        self.assertEqual(event.game_id, 12)
        self.assertIs(event.is_mobile, True)
        self.assertIsNone(event.bonus_code)
        # Unknown fields as raw JSON, exactly as the body wrote them, the index among them.
        self.assertEqual(event.extra, {"index": "41", "serverTime": '{"zone": "UTC", "epochMillis": 1795300000000}'})
        self.assertEqual(list(event.extra), ["index", "serverTime"])

    def test_refund_optional_fields_and_extremes(self) -> None:
        event = self.handle(REFUND_WITH_BONUS)
        self.assertEqual(
            event,
            BuyRefund(
                game_session_identifier="gs-1",
                player_identifier=None,
                player_partner_identifier="partner-é",
                transaction_id=0,
                buy_transaction_id=2**63 - 1,
                game_session_id=3,
                partner_game_request_identifier="req-1",
                game_id=4,
                is_mobile=False,
                bonus_code='B"ONUS\\1',
                index=None,
                extra={"index": "null", "future": '[1,{"a":"b"}]'},
            ),
        )

    def test_payout_every_field(self) -> None:
        event = self.handle(fixture("payout"))
        self.assertIs(type(event), JackpotPayout)
        assert isinstance(event, JackpotPayout)
        self.assertEqual(event.name, "jackpotPayout")
        self.assertEqual(event.index, 42)
        self.assertEqual(event.jackpot_identifier, "jp-major-eu")
        self.assertEqual(event.player_identifier, "svc-player-1001")
        self.assertEqual(event.player_partner_identifier, "partner-42")
        self.assertEqual(event.currency_iso4217, "EUR")
        self.assertEqual(event.money_won, 150000)
        self.assertEqual(event.coins_won, 0)
        self.assertIs(event.is_money, True)
        self.assertEqual(event.epoch_released_millis, 1795300123456)
        self.assertIs(event.is_primary, True)
        self.assertEqual(event.transaction_id, 900002)
        self.assertEqual(event.buy_transaction_id, 899991)
        self.assertEqual(event.partner_game_request_identifier, "req-2026-11-21-0002")
        self.assertEqual(event.game_session_id, 5552)
        self.assertEqual(event.game_id, 12)
        self.assertEqual(event.bonus_code, 'WELCOME-Ä"10"')
        self.assertIs(event.is_mobile, False)
        self.assertEqual(event.extra, {"index": "42"})

    def test_payout_minimal_and_extremes(self) -> None:
        event = self.handle(fixture("payout_minimal"))
        self.assertEqual(
            event,
            JackpotPayout(
                jackpot_identifier="jp-minor-eu",
                player_identifier=None,
                player_partner_identifier="partner-42",
                currency_iso4217="GBP",
                money_won=2**53 - 1,
                coins_won=25,
                is_money=False,
                epoch_released_millis=0,
                is_primary=False,
                transaction_id=2**63 - 1,
                buy_transaction_id=1,
                partner_game_request_identifier="r",
                game_session_id=0,
                game_id=3,
                bonus_code=None,
                is_mobile=None,
                index=None,
                extra={},
            ),
        )

    def test_balance_query_every_field(self) -> None:
        event = self.handle(fixture("balance"))
        self.assertEqual(
            event,
            BalanceQuery(
                player_identifier="svc-player-1001", player_partner_identifier="partner-42", index=43, extra={"index": "43"}
            ),
        )
        self.assertEqual(event.name, "getPlayerBalance")
        only_service = self.handle(b'{"action":"getPlayerBalance","playerIdentifier":"p-1"}')
        self.assertEqual(only_service, BalanceQuery("p-1", None))

    def test_other_event_passed_through(self) -> None:
        event = self.handle(fixture("other_event"))
        self.assertIs(type(event), OtherEvent)
        self.assertEqual(event.name, "gameSessionStart")
        self.assertEqual(event.index, 44)
        self.assertEqual(
            event.extra,
            {"index": "44", "gameSessionIdentifier": '"gs-1"', "playerIdentifier": '"svc-player-1001"'},
        )
        with self.assertRaises(ValidationError) as caught:
            event.reply()
        self.assertEqual(caught.exception.status, 13)
        self.assertEqual(caught.exception.field, "event")
        self.assertEqual(caught.exception.http_status, 400)

    def test_bodies_beyond_the_record_buffer_grow_it_on_every_thread(self) -> None:
        # A thread's record buffer starts at about 4 KiB and grows to the first body that needs
        # more: the callback is handled again, with the same result.
        def payouts() -> None:
            for size in (60_000, 100, 20_000, 60_000):
                body = json.loads(fixture("payout"))
                body["trace"] = "x" * size
                event = self.handle(json.dumps(body).encode())
                self.assertIsInstance(event, JackpotPayout)
                self.assertEqual(event.extra["trace"], '"' + "x" * size + '"')
                self.assertEqual(event.bonus_code, body["bonusCode"])

        payouts()
        failures: list[BaseException] = []

        def in_thread() -> None:
            try:
                payouts()
            except BaseException as failure:  # noqa: BLE001 (reported below, on the test's thread)
                failures.append(failure)

        worker = threading.Thread(target=in_thread)
        worker.start()
        worker.join()
        self.assertEqual(failures, [])
        too_big = b'{"event":"x","pad":"' + b"x" * 70_000 + b'"}'
        with self.assertRaises(ValidationError) as caught:
            self.handle(too_big)
        self.assertEqual(caught.exception.http_status, 413)

    def test_parse_checks_neither_source_nor_token(self) -> None:
        self.assertIsInstance(self.receiver.parse(fixture("refund")), BuyRefund)
        self.assertIsInstance(self.receiver.parse(bytearray(fixture("payout"))), JackpotPayout)

    def test_body_types(self) -> None:
        body = fixture("balance")
        for value in (body, bytearray(body), memoryview(body)):
            self.assertIsInstance(self.receiver.handle(TOKEN, STAGING, value), BalanceQuery)
        for token, remote in ((TOKEN.encode(), STAGING.encode()), (TOKEN, STAGING)):
            self.assertIsInstance(self.receiver.handle(token, remote, body), BalanceQuery)

    def test_events_compare_and_print(self) -> None:
        first, second = self.handle(fixture("payout")), self.handle(fixture("payout"))
        self.assertEqual(first, second)
        self.assertNotEqual(first, self.handle(fixture("payout_minimal")))
        self.assertIn("money_won=150000", repr(first))
        with self.assertRaises(TypeError):
            hash(first)

    def test_kept_success_replies_answer_their_own_class_only(self) -> None:
        # A refund's and a payout's success replies are kept once built; a subclass with a
        # _rebuild_reply of its own is still asked, and no other class answers from them.
        calls: list[bool] = []

        class AuditedRefund(BuyRefund):
            __slots__ = ()

            def _rebuild_reply(self, success: bool, message: str) -> bytes:
                calls.append(success)
                return super()._rebuild_reply(success, message)

        class Bonus(OtherEvent):
            __slots__ = ()

            def _rebuild_reply(self, success: bool, message: str) -> bytes:
                return self._rebuild_result("bonus", success, message)

        refund_reply = b'{"refund":{"success":true,"errorMessage":""}}'
        for _ in range(2):  # cold, then with the replies kept
            self.assertEqual(self.handle(fixture("refund")).reply(), refund_reply)
            self.assertEqual(self.handle(fixture("payout")).reply(), b'{"payout":{"success":true,"errorMessage":""}}')
            audited = AuditedRefund("gs", None, "p", 1, 1, 1, "r", 1, False)
            self.assertEqual(audited.reply(), refund_reply)
            self.assertEqual(Bonus("bonus").reply(), b'{"bonus":{"success":true,"errorMessage":""}}')
            with self.assertRaises(ConfigurationError):  # a balance reply needs the balance
                self.handle(fixture("balance")).reply()
            with self.assertRaises(ValidationError):  # an unknown event has no success reply
                OtherEvent("somethingElse").reply()
        self.assertEqual(calls, [True, True])


class ValidationErrorsTest(unittest.TestCase):
    """Every validation error kind: class, status, field, and the HTTP answer to give."""

    receiver = Receiver(TOKEN, sources="any", reject_unknown_events=True, max_body_bytes=1024, max_depth=4)

    def refused(self, body: bytes) -> SlotPartnerError:
        with self.assertRaises(SlotPartnerError) as caught:
            self.receiver.handle(TOKEN, "127.0.0.1", body)
        return caught.exception

    def check(self, body: bytes, status: int, field: str, http: int, wrapper: str | None = None) -> SlotPartnerError:
        error = self.refused(body)
        self.assertIs(type(error), ValidationError, repr(error))
        self.assertEqual((error.status, error.field, error.http_status), (status, field, http), repr(error))
        self.assertTrue(error.message.startswith(f"{field}: " if field else "body: "), error.message)
        assert error.response_body is not None
        answer = json.loads(error.response_body)
        if wrapper is None:
            self.assertEqual(answer["error"]["field"], field)
            self.assertEqual(answer["error"]["message"], error.message)
        else:
            self.assertEqual(list(answer), [wrapper])
            self.assertEqual(answer[wrapper]["errorMessage"], error.message)
            if "success" in answer[wrapper]:
                self.assertIs(answer[wrapper]["success"], False)
        return error

    def test_body_too_large(self) -> None:
        error = self.check(b" " * 1025, 3, "", 413)
        self.assertEqual(error.status_name, "SP_ERR_BODY_TOO_LARGE")

    def test_invalid_utf8_and_bom(self) -> None:
        self.check(fixture("invalid_utf8"), 4, "", 400)
        self.check(fixture("bom"), 4, "", 400)

    def test_invalid_json(self) -> None:
        error = self.check(fixture("not_json"), 5, "", 400)
        self.assertEqual(error.message, "body: invalid JSON: trailing comma at line 1 column 53")
        # Inside a known event's field: HTTP 200 with the wrapper.
        body = fixture("payout").replace(b'"index":42,', b'"index":42,"x":"\\ud800",')
        self.check(body, 5, "jackpotPayout.x", 200, "payout")

    def test_duplicate_key(self) -> None:
        self.check(fixture("duplicate_key"), 6, "event", 400)
        body = fixture("payout").replace(b'"index":42,', b'"index":42,"x":{"a":1,"a":2},')
        self.check(body, 6, "jackpotPayout.x", 200, "payout")

    def test_too_deep(self) -> None:
        error = self.check(b'{"action":"getPlayerBalance","playerIdentifier":"p","x":[[[[1]]]]}', 7, "getPlayerBalance.x",
                           500, "playerBalance")  # fmt: skip
        self.assertEqual(error.response_body, b'{"playerBalance":{"errorMessage":"getPlayerBalance.x: nested deeper than 4 levels"}}')
        # In an event the receiver passes through: no wrapper, HTTP 400.
        with self.assertRaises(ValidationError) as caught:
            Receiver(TOKEN, sources="any", max_depth=4).parse(b'{"event":"x","a":[[[[1]]]]}')
        self.assertEqual((caught.exception.status, caught.exception.field, caught.exception.http_status), (7, "x.a", 400))

    def test_not_an_object(self) -> None:
        self.check(fixture("not_object"), 8, "", 400)

    def test_missing_field(self) -> None:
        self.check(fixture("invalid_missing_field"), 9, "gameSessionBuyRefund.transactionId", 200, "refund")
        # A balance query refused for its fields: HTTP 500 and a body that states no balance.
        error = self.check(fixture("invalid_no_player"), 9, "getPlayerBalance.playerIdentifier", 500, "playerBalance")
        self.assertEqual(
            error.response_body,
            b'{"playerBalance":{"errorMessage":"getPlayerBalance.playerIdentifier: required field is missing '
            b'(one of playerIdentifier and playerPartnerIdentifier must be present)"}}',
        )
        self.check(b'{"index":1}', 9, "event", 400)

    def test_wrong_type(self) -> None:
        error = self.check(fixture("invalid_money_float"), 10, "jackpotPayout.moneyWon", 200, "payout")
        self.assertEqual(error.message, "jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5")
        self.assertEqual(error.status_name, "SP_ERR_WRONG_TYPE")
        self.check(fixture("invalid_string_id"), 10, "gameSessionBuyRefund.transactionId", 200, "refund")
        body = fixture("refund").replace(b'"isMobile": true', b'"isMobile": 1')
        self.check(body, 10, "gameSessionBuyRefund.isMobile", 200, "refund")

    def test_out_of_range(self) -> None:
        self.check(fixture("invalid_negative_amount"), 11, "jackpotPayout.moneyWon", 200, "payout")
        body = fixture("payout").replace(b'"moneyWon":150000', b'"moneyWon":9007199254740992')
        self.check(body, 11, "jackpotPayout.moneyWon", 200, "payout")

    def test_invalid_value(self) -> None:
        self.check(fixture("invalid_control_char"), 12, "gameSessionBuyRefund.gameSessionIdentifier", 200, "refund")
        self.check(fixture("invalid_currency"), 12, "jackpotPayout.currencyISO4217", 200, "payout")
        body = fixture("payout").replace(b'"jp-major-eu"', b'"' + b"j" * 257 + b'"')
        self.check(body, 12, "jackpotPayout.jackpotIdentifier", 200, "payout")

    def test_unknown_event_refused(self) -> None:
        error = self.check(fixture("other_event"), 13, "event", 400)
        self.assertEqual(error.message, 'event: unknown event "gameSessionStart"')


class AuthenticationTest(unittest.TestCase):
    receiver = Receiver([TOKEN, OTHER_TOKEN], sources="production", trusted_proxies="10.0.0.0/8")

    def refused(self, token: str | bytes | None, remote: str | None, forwarded: str | None = None) -> SlotPartnerError:
        """The refusal of ``handle``, which ``authenticate`` alone gives alike."""
        with self.assertRaises(SlotPartnerError) as caught:
            self.receiver.handle(token, remote, fixture("refund"), forwarded)
        with self.assertRaises(SlotPartnerError) as alone:
            self.receiver.authenticate(token, remote, forwarded)
        handled, checked = caught.exception, alone.exception
        answer = lambda e: (type(e), e.status, e.field, e.message, e.http_status, e.response_body)  # noqa: E731
        self.assertEqual(answer(checked), answer(handled))
        return handled

    def accepted(self, token: str | bytes | None, remote: str | None, forwarded: str | None = None) -> None:
        """``authenticate`` passes what ``handle`` accepts."""
        self.assertIsNone(self.receiver.authenticate(token, remote, forwarded))
        self.assertIsInstance(self.receiver.handle(token, remote, fixture("refund"), forwarded), BuyRefund)

    def test_missing_token(self) -> None:
        for token in (None, "", b""):
            error = self.refused(token, PRODUCTION)
            self.assertIs(type(error), AuthenticationError)
            self.assertEqual((error.status, error.field, error.http_status), (14, "X-Service-Token", 401))
            self.assertEqual(
                error.response_body,
                b'{"error":{"code":"missing_token","field":"X-Service-Token","message":"X-Service-Token: header is missing"}}',
            )

    def test_wrong_token(self) -> None:
        # (An upper-case copy of the token is the same token: see test_upper_case_token_accepted.)
        for token in ("6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e70", TOKEN + " ", TOKEN + "\0", b"\xff\xfe"):
            error = self.refused(token, PRODUCTION)
            self.assertIs(type(error), AuthenticationError, repr(token))
            self.assertEqual((error.status, error.status_name, error.http_status), (15, "SP_ERR_WRONG_TOKEN", 401))

    def test_upper_case_token_accepted(self) -> None:
        for token in (TOKEN.upper(), OTHER_TOKEN.upper(), TOKEN.upper().encode()):
            self.accepted(token, PRODUCTION)

    def test_rotation_accepts_both_tokens(self) -> None:
        for token in (TOKEN, OTHER_TOKEN):
            self.accepted(token, PRODUCTION)

    def test_forbidden_source(self) -> None:
        for remote in (STAGING, "127.0.0.1", None, "not-an-address", "18.203.30.17\0"):
            error = self.refused(TOKEN, remote)
            self.assertIs(type(error), AuthenticationError, repr(remote))
            self.assertEqual((error.status, error.field, error.http_status), (16, "remote_addr", 403))
        # The source is checked before the token.
        self.assertEqual(self.refused(None, STAGING).status, 16)

    def test_authenticate_under_sources_any_looks_at_the_token_only(self) -> None:
        anyone = Receiver(TOKEN, sources="any")
        for remote in (None, "not-an-address", b"\xff"):
            self.assertIsNone(anyone.authenticate(TOKEN, remote))
        with self.assertRaises(AuthenticationError) as caught:
            anyone.authenticate(None, None)
        self.assertEqual((caught.exception.status, caught.exception.http_status), (14, 401))

    def test_forwarded_for_only_from_trusted_proxies(self) -> None:
        self.accepted(TOKEN, "10.1.2.3", forwarded=f"192.0.2.1, {PRODUCTION}")
        self.accepted(TOKEN, PRODUCTION, forwarded="\udcff")  # an untrusted peer's header is ignored
        self.assertEqual(self.refused(TOKEN, "192.0.2.7", forwarded=PRODUCTION).status, 16)
        self.assertEqual(self.refused(TOKEN, "10.1.2.3", forwarded=STAGING).status, 16)


class ReplyTest(unittest.TestCase):
    """Exact reply bytes, reply rules, and replies rebuilt after the event was freed."""

    receiver = Receiver(TOKEN, sources="any")

    def event(self, name: str) -> slotpartner.Event:
        return self.receiver.parse(fixture(name))

    def kept_event(self, name: str) -> slotpartner.Event:
        """An event that keeps the library's event after parse: its receiver has a journal."""
        directory = tempfile.TemporaryDirectory(prefix="sp-kept-")
        self.addCleanup(directory.cleanup)
        journal = slotpartner.Journal(f"sqlite:{directory.name}/journal.db")
        self.addCleanup(journal.close)
        return Receiver(TOKEN, sources="any", journal=journal).parse(fixture(name))

    def test_exact_replies(self) -> None:
        self.assertEqual(self.event("refund").reply(), b'{"refund":{"success":true,"errorMessage":""}}')
        self.assertEqual(self.event("payout").reply(True), b'{"payout":{"success":true,"errorMessage":""}}')
        self.assertEqual(
            self.event("payout").reply(False, "jackpot unknown"),
            b'{"payout":{"success":false,"errorMessage":"jackpot unknown"}}',
        )
        self.assertEqual(
            self.event("refund").reply(False, 'session "gs" ended\n\u00e9\x01'),
            b'{"refund":{"success":false,"errorMessage":"session \\"gs\\" ended\\n\xc3\xa9\\u0001"}}',
        )
        balance = self.event("balance")
        assert isinstance(balance, BalanceQuery)
        self.assertEqual(
            balance.reply_balance(100000),
            b'{"playerBalance":{"money":100000,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}',
        )
        balance = self.event("balance")
        assert isinstance(balance, BalanceQuery)
        self.assertEqual(
            balance.reply_balance(2**53 - 1, "GBP", 7),
            b'{"playerBalance":{"money":9007199254740991,"currencyISO4217":"GBP","coins":7,"errorMessage":""}}',
        )
        # A refused balance query states no balance, and is sent with HTTP 500.
        refused = self.event("balance")
        self.assertEqual(refused.reply(False, "no such player"), b'{"playerBalance":{"errorMessage":"no such player"}}')
        self.assertEqual(refused.reply_http_status, 500)

    def test_reply_settings(self) -> None:
        receiver = Receiver(TOKEN, sources="any", balance_wrapper="balance", balance_currency="CHF",
                            omit_empty_error_message=True, index_field="seq")  # fmt: skip
        self.assertEqual(receiver.parse(fixture("refund")).reply(), b'{"refund":{"success":true}}')
        self.assertEqual(
            receiver.parse(fixture("refund")).reply(False, "x"), b'{"refund":{"success":false,"errorMessage":"x"}}'
        )
        balance = receiver.parse(b'{"action":"getPlayerBalance","playerIdentifier":"p","seq":5,"index":"x"}')
        assert isinstance(balance, BalanceQuery)
        self.assertEqual(balance.index, 5)
        self.assertEqual(balance.extra, {"seq": "5", "index": '"x"'})
        self.assertEqual(
            balance.reply_balance(1), b'{"balance":{"money":1,"currencyISO4217":"CHF","coins":0,"errorMessage":""}}'
        )
        # Rebuilt after the event was freed, with the same settings.
        self.assertEqual(
            balance.reply_balance(1), b'{"balance":{"money":1,"currencyISO4217":"CHF","coins":0,"errorMessage":""}}'
        )
        self.assertEqual(balance.reply(False, "gone"), b'{"balance":{"errorMessage":"gone"}}')
        self.assertEqual(balance.reply_http_status, 500)

    def test_reply_rules(self) -> None:
        cases = [
            (lambda e: e.reply(True, "not empty"), "refund", "message"),
            (lambda e: e.reply(False, ""), "payout", "message"),
            (lambda e: e.reply(False, "a\0b"), "payout", "message"),
            (lambda e: e.reply(True), "balance", "success"),
            (lambda e: e.reply(False), "balance", "message"),
            (lambda e: e.reply_balance(-1), "balance", "money"),
            (lambda e: e.reply_balance(2**53), "balance", "money"),
            (lambda e: e.reply_balance(2**64), "balance", "money"),
            (lambda e: e.reply_balance(1, coins=-5), "balance", "coins"),
            (lambda e: e.reply_balance(1, "eur"), "balance", "currency"),
        ]
        for build, name, field in cases:
            for rebuilt in (False, True):
                event = self.event(name)
                if rebuilt:
                    event.close()
                with self.assertRaises(ConfigurationError, msg=f"{name} {field} {rebuilt}") as caught:
                    build(event)
                self.assertEqual(caught.exception.status, 1)
                self.assertEqual(caught.exception.field, field)
                self.assertTrue(caught.exception.message.startswith(field + ": "))

    def test_rebuilt_reply_is_identical(self) -> None:
        calls = [
            ("refund", lambda e: e.reply()),
            ("refund", lambda e: e.reply(False, 'nope "quoted" \\ \t é')),
            ("payout", lambda e: e.reply()),
            ("payout", lambda e: e.reply(False, "jackpot unknown")),
            ("balance", lambda e: e.reply_balance(12345, "USD", 3)),
            ("balance", lambda e: e.reply_balance(0)),
            ("balance", lambda e: e.reply(False, "blocked")),
        ]
        for name, build in calls:
            event = self.event(name)
            live = build(event)
            status = event.reply_http_status
            self.assertEqual(status, 500 if name == "balance" and b"blocked" in live else 200)
            self.assertIsNone(event._ptr)  # freed once the reply was built
            event.reply_http_status = 0
            self.assertEqual(build(event), live)  # rebuilt by the standalone builders
            self.assertEqual(event.reply_http_status, status)
            closed = self.event(name)
            closed.close()
            self.assertEqual(closed.reply_http_status, 0)
            self.assertEqual(build(closed), live)
            self.assertEqual(closed.reply_http_status, status)

    def test_failed_reply_keeps_the_event(self) -> None:
        event = self.kept_event("balance")
        with self.assertRaises(ConfigurationError):
            event.reply(True)
        self.assertIsNotNone(event._ptr)
        self.assertEqual(event.reply_balance(7), slotpartner.reply_balance(7))
        self.assertIsNone(event._ptr)

    def test_without_a_journal_an_event_is_read_and_freed_at_once(self) -> None:
        for name, wrapper in (("refund", "refund"), ("payout", "payout")):
            event = self.event(name)
            self.assertIsNone(event._ptr)
            with self.assertRaises(ConfigurationError):
                event.reply(True, "message with success")
            self.assertEqual(event.reply(), b'{"%s":{"success":true,"errorMessage":""}}' % wrapper.encode())
            self.assertEqual(event.reply_http_status, 200)
        balance = self.event("balance")
        self.assertIsNone(balance._ptr)
        self.assertIsNotNone(self.event("other_event")._ptr, "an unknown event keeps its own")

    def test_balance_replies_from_the_kept_template_match_the_library(self) -> None:
        # Each built by the library inside a kept event, and without it from the template.
        cases = [(0, None, 0), (1, "USD", 2), (2**53 - 1, "EUR", 2**53 - 1), (150000, None, 7), (42, "GBP", 0)]
        for money, currency, coins in cases:
            live = self.kept_event("balance").reply_balance(money, currency, coins)  # type: ignore[attr-defined]
            for _ in range(2):  # the first builds the template, the second uses it
                self.assertEqual(self.event("balance").reply_balance(money, currency, coins), live)  # type: ignore[attr-defined]
        # What the template does not take goes to the library, which refuses it as before.
        for money, currency, coins, field in [(-1, None, 0, "money"), (2**53, None, 0, "money"), (0, None, -5, "coins"),
                                              (0, "eur", 0, "currency"), (0, "", 0, "currency")]:  # fmt: skip
            with self.assertRaises(ConfigurationError) as caught:
                self.event("balance").reply_balance(money, currency, coins)  # type: ignore[attr-defined]
            self.assertEqual(caught.exception.field, field)
        # A bool is not an amount: refused naming money by both, never taken as 1.
        for event in (self.event("balance"), self.kept_event("balance")):
            with self.assertRaises(ConfigurationError) as caught:
                event.reply_balance(True)  # type: ignore[attr-defined]
            self.assertEqual((caught.exception.field, caught.exception.http_status), ("money", 500))

    def test_other_event_reply_after_close(self) -> None:
        event = Receiver(TOKEN, sources="any").parse(fixture("other_event"))
        event.close()
        with self.assertRaises(ValidationError) as caught:
            event.reply()
        self.assertEqual((caught.exception.status, caught.exception.field), (13, "event"))

    def test_context_manager_and_close(self) -> None:
        with self.kept_event("balance") as event:
            self.assertIsNotNone(event._ptr)
        self.assertIsNone(event._ptr)
        event.close()  # idempotent
        self.assertEqual(event.player_identifier, "svc-player-1001")  # type: ignore[attr-defined]

    def test_copies_never_share_the_library_event(self) -> None:
        for name in ("refund", "payout", "balance", "other_event"):
            event = self.event(name)
            for duplicate in (copy.copy(event), copy.deepcopy(event), pickle.loads(pickle.dumps(event))):
                self.assertEqual(duplicate, event)
                self.assertIsNone(duplicate._ptr)
                self.assertIs(type(duplicate), type(event))
            # Without a journal only an unknown event keeps the library's.
            self.assertEqual(event._ptr is not None, name == "other_event")
            if isinstance(event, BalanceQuery):
                self.assertEqual(copy.copy(event).reply_balance(3), event.reply_balance(3))
            elif not isinstance(event, OtherEvent):
                self.assertEqual(copy.copy(event).reply(False, "x"), event.reply(False, "x"))
            del event  # freed once, by its owner

    def test_standalone_builders(self) -> None:
        self.assertEqual(slotpartner.reply_result("refund"), b'{"refund":{"success":true,"errorMessage":""}}')
        self.assertEqual(slotpartner.reply_result("refund", True, "", True), b'{"refund":{"success":true}}')
        self.assertEqual(
            slotpartner.reply_result("gameSessionBuy", False, "no funds"),
            b'{"gameSessionBuy":{"success":false,"errorMessage":"no funds"}}',
        )
        self.assertEqual(
            slotpartner.reply_balance(5, "GBP", 2),
            b'{"playerBalance":{"money":5,"currencyISO4217":"GBP","coins":2,"errorMessage":""}}',
        )
        # A failure states no balance: money, currency and coins are unused.
        self.assertEqual(
            slotpartner.reply_balance(0, error_message="unknown player", wrapper="bal"),
            b'{"bal":{"errorMessage":"unknown player"}}',
        )
        self.assertEqual(
            slotpartner.reply_balance(7, "GBP", 3, error_message="unknown player"),
            b'{"playerBalance":{"errorMessage":"unknown player"}}',
        )
        for build, field in (
            (lambda: slotpartner.reply_result(""), "wrapper"),
            (lambda: slotpartner.reply_result("refund", True, "x"), "message"),
            (lambda: slotpartner.reply_result("refund", False), "message"),
            (lambda: slotpartner.reply_balance(-1), "money"),
            (lambda: slotpartner.reply_balance(1, "EURO"), "currency"),
        ):
            with self.assertRaises(ConfigurationError) as caught:
                build()
            self.assertEqual(caught.exception.field, field)


class ConfigurationTest(unittest.TestCase):
    def test_settings_refused(self) -> None:
        cases = [
            (dict(tokens=[]), "token"),
            (dict(tokens=[TOKEN, OTHER_TOKEN, TOKEN]), "token"),
            (dict(tokens="not-a-uuid"), "token"),
            (dict(tokens=TOKEN + "\0"), "token"),
            (dict(sources="nonsense"), "sources"),
            (dict(trusted_proxies="x"), "trusted_proxies"),
            (dict(max_body_bytes=0), "max_body_bytes"),
            (dict(max_body_bytes=-1), "max_body_bytes"),
            (dict(max_depth=0), "max_depth"),
            (dict(max_depth=101), "max_depth"),
            (dict(index_field=""), "index_field"),
            (dict(balance_currency="eur"), "balance_currency"),
        ]
        for settings, field in cases:
            settings.setdefault("tokens", TOKEN)
            with self.assertRaises(ConfigurationError, msg=repr(settings)) as caught:
                Receiver(**settings)  # type: ignore[arg-type]
            self.assertEqual(caught.exception.field, field, repr(settings))
            self.assertEqual(caught.exception.status, 1)

    def test_receiver_copies_are_the_receiver(self) -> None:
        receiver = Receiver(TOKEN, sources="any")
        self.assertIs(copy.copy(receiver), receiver)
        self.assertIs(copy.deepcopy(receiver), receiver)
        with self.assertRaises(TypeError):
            pickle.dumps(receiver)

    def test_limits_apply(self) -> None:
        receiver = Receiver(TOKEN, sources="any", max_identifier_bytes=16, max_body_bytes=200)
        with self.assertRaises(ValidationError) as caught:
            receiver.parse(b'{"action":"getPlayerBalance","playerIdentifier":"12345678901234567"}')
        self.assertEqual((caught.exception.status, caught.exception.field), (12, "getPlayerBalance.playerIdentifier"))
        body = b'{"action":"getPlayerBalance","playerIdentifier":"1234567890123456"}'
        self.assertIsInstance(receiver.parse(body), BalanceQuery)
        with self.assertRaises(ValidationError) as caught:
            receiver.parse(b" " * 201)
        self.assertEqual(caught.exception.http_status, 413)

    def test_sources(self) -> None:
        receiver = Receiver(TOKEN, sources="10.1.2.0/24,::1,staging")
        for remote in ("10.1.2.3", "::1", STAGING):
            self.assertIsInstance(receiver.handle(TOKEN, remote, fixture("balance")), BalanceQuery)
        for remote in ("10.1.3.1", PRODUCTION):
            with self.assertRaises(AuthenticationError):
                receiver.handle(TOKEN, remote, fixture("balance"))


if __name__ == "__main__":
    unittest.main()
