"""The delivery journal through the binding, on SQLite in a temporary directory: repeats answered
from the journal byte for byte without running the logic, conflicts, abandoned and dropped
claims, busy claims, balance queries, refused deliveries, gaps, threads, the number of foreign
calls per journaled callback, and the example serving with SLOTPARTNER_JOURNAL."""

from __future__ import annotations

import ctypes
import io
import json
import os
import re
import sys
import tempfile
import threading
import time
import unittest
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support import TOKEN, Sandbox, WsgiExample, fixture

import slotpartner
from slotpartner import (
    BusyError,
    ClaimLostError,
    ConfigurationError,
    ConflictError,
    Journal,
    JournalError,
    Outcome,
    Receiver,
    SlotPartnerError,
    ValidationError,
)
from slotpartner import _lib


def refund(transaction_id: int, index: int, game_id: int = 12) -> bytes:
    return (
        f'{{"event":"gameSessionBuyRefund","index":{index},"gameSessionIdentifier":"gs-1",'
        f'"playerIdentifier":"p-1","transactionId":{transaction_id},"buyTransactionId":1,'
        f'"gameSessionId":5,"partnerGameRequestIdentifier":"req-1","gameId":{game_id},"isMobile":false}}'
    ).encode()


class JournalCase(unittest.TestCase):
    """A fresh SQLite journal per test, and a receiver on it."""

    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="sp-journal-")
        self.url = f"sqlite:{self.dir.name}/journal.db"
        self.journal = Journal(self.url)
        self.receiver = Receiver(TOKEN, sources="any", journal=self.journal)
        self.runs = 0  # how often the partner's logic ran

    def tearDown(self) -> None:
        self.journal.close()
        self.dir.cleanup()

    def callback(self, body: bytes, receiver: Receiver | None = None, success: bool = True) -> tuple[int, bytes]:
        """The flow the README shows: begin, then the logic and finish only for a new delivery."""
        try:
            event = (receiver or self.receiver).handle(TOKEN, "127.0.0.1", body)
            claim = event.begin()
        except SlotPartnerError as error:
            assert error.http_status is not None and error.response_body is not None
            return error.http_status, error.response_body
        if claim.outcome is Outcome.DONE:
            assert claim.reply is not None
            return 200, claim.reply
        self.runs += 1
        reply = event.reply() if success else event.reply(False, f"refused run {self.runs}")
        event.finish()
        return event.reply_http_status, reply


class ExactlyOnceTest(JournalCase):
    def test_a_repeat_is_answered_from_the_journal_byte_for_byte_without_running_the_logic(self) -> None:
        first = self.callback(refund(900_001, 1), success=False)
        self.assertEqual(first, (200, b'{"refund":{"success":false,"errorMessage":"refused run 1"}}'))
        # The same delivery again, formatted differently: the same bytes, the logic not run.
        repeat = refund(900_001, 1).replace(b",", b" , ")
        self.assertEqual(self.callback(repeat), first)
        self.assertEqual(self.callback(refund(900_001, 1)), first)
        self.assertEqual(self.runs, 1)
        event = self.receiver.parse(refund(900_001, 1))
        claim = event.begin()
        self.assertEqual((claim.outcome, claim.attempt, claim.reply), (Outcome.DONE, 0, first[1]))
        self.assertEqual(event.reply_http_status, 200)
        self.assertIsNone(event._ptr, "the library's event is freed once the stored reply is copied")
        event.finish()  # nothing to do
        event.abandon()  # nothing to do
        status = self.journal.status()
        self.assertEqual((status.handled, status.replayed, status.in_progress, status.missing), (1, 3, 0, 0))

    def test_a_new_delivery_keeps_its_event_until_finish(self) -> None:
        event = self.receiver.parse(refund(900_002, 1))
        claim = event.begin()
        self.assertEqual((claim.outcome, claim.attempt, claim.reply, claim.new), (Outcome.NEW, 1, None, True))
        self.assertEqual(event.reply(False, "first try"), b'{"refund":{"success":false,"errorMessage":"first try"}}')
        self.assertIsNotNone(event._ptr, "a claimed event is not freed by reply()")
        reply = event.reply()  # the last reply built wins
        event.finish()
        self.assertIsNone(event._ptr, "finish() frees it")
        event.finish()  # finishing a settled event does nothing
        self.assertEqual(self.callback(refund(900_002, 1)), (200, reply))

    def test_finish_with_an_explicit_reply_and_without_a_reply(self) -> None:
        event = self.receiver.parse(refund(900_003, 1))
        event.begin()
        with self.assertRaises(ConfigurationError) as caught:
            event.finish()  # no reply built: the claim stays
        self.assertEqual(caught.exception.field, "reply")
        event.finish(bytearray(b'{"refund":{"success":true,"errorMessage":"stored"}}'))
        self.assertEqual(self.callback(refund(900_003, 1)), (200, b'{"refund":{"success":true,"errorMessage":"stored"}}'))

    def test_a_conflict_names_the_transaction_and_keeps_the_first(self) -> None:
        first = self.callback(refund(900_004, 1, game_id=12))
        status, body = self.callback(refund(900_004, 2, game_id=13))
        self.assertEqual(status, 409)
        with self.assertRaises(ConflictError) as caught:
            self.receiver.parse(refund(900_004, 2, game_id=13)).begin()
        error = caught.exception
        self.assertIsInstance(error, SlotPartnerError)
        self.assertEqual((error.status, error.status_name, error.http_status), (23, "SP_ERR_CONFLICT", 409))
        self.assertIn("900004", error.message)
        self.assertIn("gameId", error.message)
        self.assertEqual(error.response_body, body)
        self.assertEqual(self.callback(refund(900_004, 1, game_id=12)), first, "the first stays")
        self.assertEqual(self.runs, 1)
        self.assertEqual(self.journal.status().conflicts, 2)

    def test_abandon_runs_the_next_delivery_as_attempt_2(self) -> None:
        event = self.receiver.parse(refund(900_005, 1))
        self.assertEqual(event.begin().attempt, 1)
        event.reply()
        event.abandon()  # the partner's database was down
        self.assertIsNone(event._ptr)
        event.abandon()  # abandoning twice does nothing
        event = self.receiver.parse(refund(900_005, 1))
        claim = event.begin()
        self.assertEqual((claim.outcome, claim.attempt), (Outcome.NEW, 2))
        event.reply()
        event.finish()
        self.assertEqual(self.journal.status().in_progress, 0)

    def test_a_dropped_or_closed_claimed_event_releases_its_claim(self) -> None:
        body = refund(900_006, 1)
        event = self.receiver.parse(body)
        self.assertEqual(event.begin().attempt, 1)
        self.assertEqual(self.journal.status().in_progress, 1)
        del event  # collected: sp_event_free releases the claim
        event = self.receiver.parse(body)
        self.assertEqual(event.begin().attempt, 2)
        event.reply()
        event.close()  # closed before finish(): released too, nothing stored
        with self.assertRaises(ConfigurationError) as caught:
            event.finish()
        self.assertIn("claim was released", caught.exception.message)
        with self.receiver.parse(body) as event:
            self.assertEqual(event.begin().attempt, 3)
        self.assertEqual(self.receiver.parse(body).begin().attempt, 4)  # a temporary, dropped at once
        self.assertEqual(self.journal.status().in_progress, 0)

    def test_a_second_worker_waits_then_is_told_busy(self) -> None:
        journal = Journal(self.url, busy_wait_ms=50)
        receiver = Receiver(TOKEN, sources="any", journal=journal)
        journal.close()  # the receiver keeps it open
        holder = receiver.parse(refund(900_007, 1))
        holder.begin()
        started = time.monotonic()
        with self.assertRaises(BusyError) as caught:
            receiver.parse(refund(900_007, 1)).begin()
        self.assertGreaterEqual(time.monotonic() - started, 0.04)
        error = caught.exception
        self.assertEqual((error.status, error.http_status), (26, 503))
        self.assertIsNotNone(error.response_body)
        holder.reply()
        holder.finish()
        self.assertEqual(receiver.parse(refund(900_007, 1)).begin().outcome, Outcome.DONE)

    def test_a_lost_claim_stores_nothing(self) -> None:
        journal = Journal(self.url, lease_ms=30)
        receiver = Receiver(TOKEN, sources="any", journal=journal)
        slow = receiver.parse(refund(900_008, 1))
        slow.begin()
        slow.reply()
        time.sleep(0.1)  # the lease ends: the next delivery takes the claim over
        other = receiver.parse(refund(900_008, 1))
        self.assertEqual(other.begin().attempt, 2)
        with self.assertRaises(ClaimLostError) as caught:
            slow.finish()
        self.assertEqual((caught.exception.status, caught.exception.http_status), (25, 503))
        self.assertIsNone(slow._ptr, "settled and freed, as the library settles it")
        slow.finish()  # nothing more to do
        slow.abandon()
        other.reply(False, "second")
        other.finish()
        self.assertEqual(self.callback(refund(900_008, 1))[1], b'{"refund":{"success":false,"errorMessage":"second"}}')
        journal.close()

    def test_balance_queries_are_not_journaled(self) -> None:
        body = b'{"action":"getPlayerBalance","playerIdentifier":"p-1","index":2}'
        for money in (5, 6):
            event = self.receiver.parse(body)
            assert isinstance(event, slotpartner.BalanceQuery)
            claim = event.begin()
            self.assertEqual((claim.outcome, claim.attempt, claim.reply), (Outcome.NOT_JOURNALED, 0, None))
            self.assertIn(f'"money":{money}'.encode(), event.reply_balance(money))  # current, never replayed
            self.assertIsNone(event._ptr, "reply_balance frees a balance query's event as before")
            event.finish()  # not needed, does nothing
        self.assertEqual(self.journal.status().highest_index, 2, "its index is recorded")

    def test_refused_deliveries_with_a_readable_index_are_seen_and_gaps_found(self) -> None:
        for index in (1, 2, 7):
            self.callback(refund(900_100 + index, index))
        refused = refund(900_104, 4).replace(b'"gameId":12', b'"gameId":1.5')
        with self.assertRaises(ValidationError) as caught:
            self.receiver.handle(TOKEN, "127.0.0.1", refused)
        error = caught.exception
        self.assertEqual((error.index, error.transaction_id, error.event_name), (4, 900_104, "gameSessionBuyRefund"))
        self.assertEqual(self.journal.missing(), [(3, 3), (5, 6)])
        self.assertEqual(self.journal.missing(limit=1), [(3, 3)])
        status = self.journal.status()
        self.assertEqual((status.handled, status.refused, status.missing), (3, 1, 3))
        self.assertEqual((status.first_index, status.highest_index, status.watermark), (1, 7, 2))
        for limit in (0, 1_000_001, -1):
            with self.assertRaises(ConfigurationError) as bad:
                self.journal.missing(limit)
            self.assertEqual(bad.exception.field, "limit")

    def test_the_configured_first_index(self) -> None:
        journal = Journal(f"sqlite:{self.dir.name}/first.db", first_index=10, durable=False, max_reply_bytes=100,
                          lock_timeout_ms=1000)  # fmt: skip
        self.assertEqual(journal.status(), slotpartner.JournalStatus(0, 0, 0, 0, 0, 0, 10, None, None))
        receiver = Receiver(TOKEN, sources="any", journal=journal)
        self.callback(refund(1, 13), receiver)
        self.assertEqual(journal.missing(), [(10, 12)])
        event = receiver.parse(refund(2, 14))
        event.begin()
        with self.assertRaises(ConfigurationError) as caught:
            event.finish(b"x" * 101)  # over max_reply_bytes
        self.assertEqual(caught.exception.field, "reply")
        event.abandon()
        journal.close()


class ThreadsTest(JournalCase):
    def test_four_threads_beginning_one_key_at_once_exactly_one_is_new(self) -> None:
        barrier = threading.Barrier(4)
        results: list[tuple[str, Any]] = []
        lock = threading.Lock()

        def worker() -> None:
            event = self.receiver.parse(refund(900_200, 1))
            barrier.wait()
            try:
                claim = event.begin()
            except BusyError as error:
                outcome: tuple[str, Any] = ("busy", error.http_status)
            else:
                if claim.outcome is Outcome.NEW:
                    time.sleep(0.2)  # the others wait for this worker
                    reply = event.reply()
                    event.finish()
                    outcome = ("new", reply)
                else:
                    outcome = (claim.outcome.name.lower(), claim.reply)
            with lock:
                results.append(outcome)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        kinds = sorted(kind for kind, _ in results)
        self.assertEqual(kinds.count("new"), 1, results)
        new_reply = next(value for kind, value in results if kind == "new")
        for kind, value in results:
            self.assertIn(kind, ("new", "done", "busy"))
            self.assertEqual(value, 503 if kind == "busy" else new_reply)
        self.assertEqual(self.journal.status().handled, 1)


class MisuseTest(unittest.TestCase):
    def test_begin_needs_a_journal_and_comes_before_the_reply(self) -> None:
        plain = Receiver(TOKEN, sources="any")
        with self.assertRaises(ConfigurationError) as caught:
            plain.parse(refund(1, 1)).begin()
        self.assertIn("no journal", caught.exception.message)
        event = plain.parse(refund(1, 1))
        event.reply()
        with self.assertRaises(ConfigurationError):
            event.begin()
        with self.assertRaises(ConfigurationError) as not_begun:
            plain.parse(refund(1, 1)).finish()
        self.assertIn("not begun", not_begun.exception.message)
        with self.assertRaises(ConfigurationError):
            event.abandon()  # not begun and freed

    def test_unusable_journals(self) -> None:
        with self.assertRaises(ConfigurationError) as caught:
            Journal("mysql://x")
        self.assertEqual(caught.exception.field, "journal_url")
        with tempfile.TemporaryDirectory() as directory:
            with self.assertRaises(JournalError) as storage:
                Journal(f"sqlite:{directory}")  # a directory cannot hold one
            self.assertEqual((storage.exception.status, storage.exception.http_status), (24, 503))
            with self.assertRaises(ConfigurationError) as negative:
                Journal(f"sqlite:{directory}/j.db", lease_ms=-1)
            self.assertEqual(negative.exception.field, "lease_ms")
            with self.assertRaises(ConfigurationError):
                Journal(f"sqlite:{directory}/j.db", lease_ms=0)  # the library's range
            with Journal(f"sqlite:{directory}/j.db") as journal:
                self.assertEqual(journal.status().handled, 0)
            with self.assertRaises(ConfigurationError):
                journal.status()
            with self.assertRaises(ConfigurationError) as closed:
                Receiver(TOKEN, journal=journal)
            self.assertEqual(closed.exception.field, "journal")
            with self.assertRaises(ConfigurationError):
                Receiver(TOKEN, journal="sqlite:x")  # type: ignore[arg-type]


def count_calls(callback: Callable[[], Any]) -> dict[str, int]:
    """Calls into libslotpartner during ``callback()``, by name (as bench.py counts them)."""
    counts: dict[str, int] = {}
    patched: list[tuple[Any, str, Any]] = []

    def counting(name: str, function: Any) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            counts[name] = counts.get(name, 0) + 1
            return function(*args)

        return wrapper

    for module in [sys.modules[m] for m in list(sys.modules) if m.startswith("slotpartner")]:
        for attribute, value in list(vars(module).items()):
            if isinstance(value, ctypes._CFuncPtr):  # type: ignore[attr-defined]
                patched.append((module, attribute, value))
                setattr(module, attribute, counting(getattr(value, "__name__", attribute), value))
    try:
        callback()
    finally:
        for owner, attribute, value in patched:
            setattr(owner, attribute, value)
    return counts


class ForeignCallsTest(JournalCase):
    def test_a_journaled_callback_costs_the_journal_calls_only(self) -> None:
        body = refund(900_300, 1)
        new = count_calls(lambda: self.callback(body))
        self.assertEqual(new, {"sp_receiver_handle": 1, "sp_event_begin": 1, "sp_event_reply": 1,
                               "sp_event_finish": 1, "sp_event_free": 1})  # fmt: skip
        done = count_calls(lambda: self.callback(body))
        self.assertEqual(done, {"sp_receiver_handle": 1, "sp_event_begin": 1, "sp_event_free": 1})
        balance = b'{"action":"getPlayerBalance","playerIdentifier":"p-1"}'

        def query() -> None:
            event = self.receiver.handle(TOKEN, "127.0.0.1", balance)
            assert isinstance(event, slotpartner.BalanceQuery)
            event.begin()
            event.reply_balance(1)

        self.assertEqual(count_calls(query), {"sp_receiver_handle": 1, "sp_event_begin": 1,
                                              "sp_event_reply_balance": 1, "sp_event_free": 1})  # fmt: skip
        plain = Receiver(TOKEN, sources="any")
        plain.handle(TOKEN, "127.0.0.1", body).reply()  # builds the success reply once
        unjournaled = count_calls(lambda: plain.handle(TOKEN, "127.0.0.1", body).reply())
        self.assertEqual(unjournaled, {"sp_receiver_handle_record": 1}, "without a journal")


class ExampleTest(unittest.TestCase):
    """examples/callback_wsgi.py with SLOTPARTNER_JOURNAL (and SLOTPARTNER_WALLET, its ledger)."""

    example: Any

    @classmethod
    def setUpClass(cls) -> None:
        from test_wsgi_example import example

        cls.example = example

    def run_app(self, app: Any, body: bytes) -> tuple[str, dict[str, str], bytes]:
        answer: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]]) -> None:
            answer["status"], answer["headers"] = status, dict(headers)

        environ = {"REQUEST_METHOD": "POST", "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
                   "HTTP_X_SERVICE_TOKEN": TOKEN, "wsgi.input": io.BytesIO(body)}  # fmt: skip
        chunks = b"".join(app(environ, start_response))
        return answer["status"], answer["headers"], chunks

    def test_in_process_repeat_conflict_and_ledger_down(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            wallet = os.path.join(directory, "wallet")
            os.mkdir(wallet)
            config = {"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": "any",
                      "SLOTPARTNER_JOURNAL": f"sqlite:{directory}/journal.db", "SLOTPARTNER_WALLET": wallet}  # fmt: skip
            log = io.StringIO()
            stderr, sys.stderr = sys.stderr, log
            try:
                app = self.example.make_app(config)
                payout = fixture("payout")
                first = self.run_app(app, payout)
                repeat = self.run_app(app, payout)
                conflict = self.run_app(app, payout.replace(b'"moneyWon":150000', b'"moneyWon":150001'))
                refund_body = fixture("refund")
                os.chmod(wallet, 0o500)  # the ledger refuses writes: a transient failure
                down = self.run_app(app, refund_body) if os.geteuid() != 0 else None
                os.chmod(wallet, 0o700)
                if down is None:  # root writes anyway: the ledger fails another way
                    os.rename(wallet, wallet + ".gone")
                    down = self.run_app(app, refund_body)
                    os.rename(wallet + ".gone", wallet)
                retried = self.run_app(app, refund_body)
            finally:
                sys.stderr = stderr
            self.assertEqual(first, ("200 OK", first[1], b'{"payout":{"success":true,"errorMessage":""}}'))
            self.assertEqual(repeat[0::2], first[0::2], "the repeat gets the first reply")
            self.assertEqual(conflict[0], "409 Conflict")
            self.assertIn(b"900002", conflict[2])
            self.assertEqual((down[0], down[1].get("Retry-After")), ("503 Service Unavailable", "5"))
            self.assertEqual(retried[0], "200 OK")
            self.assertEqual(sorted(os.listdir(wallet)), ["payout-900002", "refund-900001"])
            lines = log.getvalue().splitlines()
            self.assertEqual(sum("payout 150000 EUR" in line for line in lines), 1, lines)
            self.assertIn("callback_wsgi: repeated delivery answered from the journal", lines)
            self.assertIn("callback_wsgi: attempt 2", lines)
            self.assertTrue(any(line.startswith("callback_wsgi: journal: ") and "900002" in line for line in lines), lines)

    def test_an_unusable_journal_is_answered_503(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            log = io.StringIO()
            stderr, sys.stderr = sys.stderr, log
            try:
                app = self.example.make_app({"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": "any",
                                             "SLOTPARTNER_JOURNAL": f"sqlite:{directory}"})  # fmt: skip
                status, _, body = self.run_app(app, fixture("refund"))
            finally:
                sys.stderr = stderr
            self.assertEqual(status, "503 Service Unavailable")
            self.assertIn(b'"code":', body)
            self.assertTrue(log.getvalue().startswith("callback_wsgi: journal: "), log.getvalue())

    def test_over_the_wire_repeats_get_the_first_reply_and_gaps_are_found(self) -> None:
        sandbox = Sandbox()
        directory = tempfile.TemporaryDirectory(prefix="sp-journal-example-")
        wallet = Path(directory.name) / "wallet"
        wallet.mkdir()
        url = f"sqlite:{directory.name}/journal.db"
        report = Path(directory.name) / "report.json"
        server = WsgiExample(sources="127.0.0.1", env={"SLOTPARTNER_JOURNAL": url, "SLOTPARTNER_WALLET": str(wallet)})
        try:
            # Losses, byte-identical repeats (the sender checks each gets the first reply byte for
            # byte) and reorders, over four connections at once.
            sent = sandbox.send(server.url + "/callback", "--burst", "60", "--index", "100", "--seed", "8",
                                "--lose", "0.1", "--repeat", "0.2", "--reorder", "0.1", "--concurrency", "4",
                                "--report-json", str(report), "--quiet", "mixed")  # fmt: skip
            log = server.log().splitlines()
        finally:
            server.stop()
            sandbox.stop()
        try:
            self.assertEqual(sent.returncode, 0, sent.stdout + sent.stderr)
            facts = json.loads(report.read_text())
            self.assertEqual((facts["repeat_mismatches"], facts["verdict_failures"]), (0, 0))
            self.assertGreater(facts["repeated"], 0)
            # Each delivered event credited once, the repeats not at all.
            credited = sorted(wallet.iterdir())
            ids = facts["delivered_payout_transaction_ids"] + facts["delivered_refund_transaction_ids"]
            self.assertEqual(len(credited), len(ids))
            payouts = sum(int(f.read_text()) for f in credited if f.name.startswith("payout-"))
            self.assertEqual(payouts, facts["delivered_money_total"])
            ran = [line for line in log if re.match(r"callback_wsgi: (refund transaction|payout) ", line)]
            self.assertEqual(len(ran), facts["delivered"], "the logic ran once per event")
            replayed = log.count("callback_wsgi: repeated delivery answered from the journal")
            self.assertEqual(replayed, facts["deliveries"] - facts["delivered"])
            with Journal(url) as journal:
                missing = [i for first, last in journal.missing() for i in range(first, last + 1)]
                status = journal.status()
            assert status.highest_index is not None
            self.assertEqual(missing, [i for i in facts["lost_indexes"] if i < status.highest_index])
            self.assertEqual((status.handled, status.replayed, status.in_progress), (facts["delivered"], replayed, 0))
        finally:
            directory.cleanup()

if __name__ == "__main__":
    unittest.main()
