"""The delivery journal through the binding, on SQLite in a temporary directory: repeats answered
from the journal byte for byte without running the logic, conflicts, abandoned and dropped
claims, busy claims, balance queries, refused deliveries, gaps, the operator's side (index jumps
accepted or declared gaps, gaps resolved by hand, conflicts handed out and resolved,
unfinished deliveries closed by hand, renumbering), claims written at finish (claim_at_finish), threads, the number of foreign calls per journaled callback, and the example
serving with SLOTPARTNER_JOURNAL."""

from __future__ import annotations

import ctypes
import io
import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from support import TOKEN, Sandbox, WsgiExample, fixture, ledger_rows, load_example

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


def refund(transaction_id: int, index: int, game_id: int = 12, game_session_id: int = 5) -> bytes:
    return (
        f'{{"event":"gameSessionBuyRefund","index":{index},"gameSessionIdentifier":"gs-1",'
        f'"playerIdentifier":"p-1","transactionId":{transaction_id},"buyTransactionId":1,'
        f'"gameSessionId":{game_session_id},"partnerGameRequestIdentifier":"req-1","gameId":{game_id},'
        f'"isMobile":false}}'
    ).encode()


#: A journal whose PostgreSQL server cannot be reached: a closed port on loopback.
UNREACHABLE = "postgres://sp_owner@127.0.0.1:1/sp_ledger"

#: Run by another Python process: holds the write lock of the SQLite file argv[1] until its stdin ends.
HOLD_WRITE_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
db.execute("ROLLBACK")
"""


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
        # gameId does not decide who is paid what: a resend differing in it is the same delivery.
        self.assertEqual(self.callback(refund(900_004, 2, game_id=13)), first)
        status, body = self.callback(refund(900_004, 3, game_session_id=6))
        self.assertEqual(status, 409)
        with self.assertRaises(ConflictError) as caught:
            self.receiver.parse(refund(900_004, 3, game_session_id=6)).begin()
        error = caught.exception
        self.assertIsInstance(error, SlotPartnerError)
        self.assertEqual((error.status, error.status_name, error.http_status), (23, "SP_ERR_CONFLICT", 409))
        self.assertIn("900004", error.message)
        self.assertIn("gameSessionId", error.message)
        self.assertEqual(error.response_body, body)
        self.assertEqual(self.callback(refund(900_004, 1, game_id=12)), first, "the first stays")
        self.assertEqual(self.runs, 1)
        status_now = self.journal.status()
        self.assertEqual((status_now.conflicts, status_now.open_conflicts), (2, 1), "two refusals, one entry")
        [conflict] = self.journal.conflicts()
        self.assertEqual((conflict["outcome"], conflict["count"], conflict["differing"]),
                         ("refused", 2, ["gameSessionId: first 5, now 6"]))  # fmt: skip

    def test_abandon_runs_the_next_delivery_as_attempt_2(self) -> None:
        event = self.receiver.parse(refund(900_005, 1))
        self.assertEqual(event.begin().attempt, 1)
        event.reply()
        event.abandon()  # the partner's database was down
        self.assertIsNone(event._ptr)
        event.abandon()  # abandoning twice does nothing
        for _ in range(2):  # finishing it now fails, every time: nothing is stored
            with self.assertRaises(ClaimLostError) as caught:
                event.finish()
            self.assertIn("the claim was abandoned", caught.exception.message)
            self.assertEqual((caught.exception.status, caught.exception.http_status), (25, 503))
        event.abandon()  # still nothing to do
        event = self.receiver.parse(refund(900_005, 1))
        claim = event.begin()
        self.assertEqual((claim.outcome, claim.attempt, claim.differing), (Outcome.NEW, 2, ()), "the same content")
        event.reply()
        event.finish()
        self.assertEqual(self.journal.status().in_progress, 0)

    def test_an_abandoned_refund_delivered_again_with_other_decisive_content_names_the_fields(self) -> None:
        event = self.receiver.parse(refund(900_009, 1))
        first = event.begin()
        self.assertEqual((first.outcome, first.attempt, first.differing), (Outcome.NEW, 1, ()))
        event.reply()
        event.abandon()  # the partner's database was down: nothing stored
        # Delivered again with another gameSessionId, which decides who is paid what: handed out
        # as new (nothing was stored for the first), not refused, and the change is named.
        event = self.receiver.parse(refund(900_009, 1, game_session_id=6))
        claim = event.begin()
        self.assertEqual((claim.outcome, claim.attempt), (Outcome.NEW, 2))
        self.assertEqual(list(claim.differing), ["gameSessionId: first 5, now 6"])
        reply = event.reply()
        event.finish()
        self.assertEqual(claim.differing, ("gameSessionId: first 5, now 6",), "a copy, kept after the event is freed")
        [conflict] = self.journal.conflicts()
        self.assertEqual((conflict["outcome"], conflict["differing"]), ("handed_out", list(claim.differing)))
        self.assertEqual(self.callback(refund(900_009, 1, game_session_id=6)), (200, reply))

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
        event.abandon()  # released already: nothing to do
        with self.assertRaises(ConfigurationError):
            event.finish()  # still refused
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
        lost = caught.exception
        self.assertEqual((lost.status, lost.http_status), (25, 503))
        self.assertIn("taken over by attempt 2", lost.message)
        self.assertIsNone(slow._ptr, "freed: the claim is no longer this event's")
        # Finishing and abandoning it fail the same way from now on, every time.
        for step in (slow.finish, slow.abandon, slow.finish, slow.abandon):
            with self.assertRaises(ClaimLostError) as again:
                step()
            self.assertIs(again.exception, lost)
        other.reply(False, "second")
        other.finish()
        self.assertEqual(self.callback(refund(900_008, 1))[1], b'{"refund":{"success":false,"errorMessage":"second"}}')
        journal.close()

    def test_a_claim_found_lost_by_abandon_refuses_finish_and_abandon_every_time(self) -> None:
        journal = Journal(self.url, lease_ms=30)
        receiver = Receiver(TOKEN, sources="any", journal=journal)
        journal.close()  # the receiver keeps it open
        slow = receiver.parse(refund(900_010, 1))
        slow.begin()
        slow.reply()
        time.sleep(0.1)  # the lease ends: the next delivery takes the claim over
        other = receiver.parse(refund(900_010, 1))
        self.assertEqual(other.begin().attempt, 2)
        with self.assertRaises(ClaimLostError) as caught:
            slow.abandon()
        lost = caught.exception
        self.assertEqual((lost.status, lost.http_status), (25, 503))
        self.assertIn("taken over by attempt 2", lost.message)
        for step in (slow.finish, slow.abandon, slow.finish):
            with self.assertRaises(ClaimLostError) as again:
                step()
            self.assertIs(again.exception, lost)
        other.reply()
        other.finish()  # the other delivery's claim is untouched
        self.assertEqual(receiver.parse(refund(900_010, 1)).begin().outcome, Outcome.DONE)

    def test_a_refused_abandon_keeps_the_claim(self) -> None:
        journal = Journal(self.url, busy_wait_ms=0, lock_timeout_ms=50)
        receiver = Receiver(TOKEN, sources="any", journal=journal)
        journal.close()
        event = receiver.parse(refund(900_011, 1))
        self.assertEqual(event.begin().attempt, 1)
        stored = event.reply()
        # Another program holds the journal's write lock: the abandon cannot be written. (Another
        # process: SQLite's locks are POSIX locks, which never conflict within one process.)
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_WRITE_LOCK, self.url.removeprefix("sqlite:")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert holder.stdout is not None and holder.stdin is not None
            self.assertEqual(holder.stdout.readline(), b"locked\n")
            with self.assertRaises(JournalError):
                event.abandon()
        finally:
            holder.communicate(b"")  # the holder rolls back and ends
        self.assertIsNotNone(event._ptr, "the claim is still this event's")
        event.finish()  # so finishing stores the reply
        claim = receiver.parse(refund(900_011, 1)).begin()
        self.assertEqual((claim.outcome, claim.reply), (Outcome.DONE, stored))

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


class ClaimAtFinishTest(JournalCase):
    """``Journal(..., claim_at_finish=True)``: a new delivery's claim is written by ``finish`` only."""

    def test_with_it_begin_writes_nothing_and_finish_stores_the_delivery(self) -> None:
        journal = Journal(f"sqlite:{self.dir.name}/at_finish.db", claim_at_finish=True, busy_wait_ms=0)
        receiver = Receiver(TOKEN, sources="any", journal=journal)
        event = receiver.handle(TOKEN, "127.0.0.1", refund(900_201, 1))
        claim = event.begin()
        self.assertEqual((claim.outcome, claim.attempt), (Outcome.NEW, 1))
        status = journal.status()
        self.assertEqual((status.in_progress, status.handled, status.highest_index), (0, 0, None), "nothing written")
        # A second delivery of the key meanwhile is not told busy: it runs too, and loses at finish.
        other = receiver.parse(refund(900_201, 1))
        self.assertEqual((other.begin().outcome, journal.status().in_progress), (Outcome.NEW, 0))
        reply = event.reply()
        event.finish()  # the claim, the reply and the index, in one transaction
        status = journal.status()
        self.assertEqual((status.handled, status.in_progress, status.highest_index), (1, 0, 1))
        other.reply(False, "second")
        with self.assertRaises(ClaimLostError) as caught:
            other.finish()
        self.assertEqual((caught.exception.status, caught.exception.http_status), (25, 503))
        self.assertIn("claimed at finish", caught.exception.message)
        self.assertEqual(self.callback(refund(900_201, 1), receiver), (200, reply), "the first finish's reply")
        self.assertEqual(self.runs, 0)
        # abandon stores the delivery abandoned: counted unfinished, the next delivery is attempt 2.
        event = receiver.parse(refund(900_202, 2))
        event.begin()
        event.abandon()
        status = journal.status()
        self.assertEqual((status.in_progress, status.unfinished, status.highest_index), (0, 1, 2))
        self.assertEqual(receiver.parse(refund(900_202, 2)).begin().attempt, 2)
        journal.close()

    def test_without_it_begin_writes_the_claim(self) -> None:
        for name, setting in (("default.db", None), ("off.db", False)):
            with self.subTest(claim_at_finish=setting):
                journal = Journal(f"sqlite:{self.dir.name}/{name}", claim_at_finish=setting, busy_wait_ms=0)
                receiver = Receiver(TOKEN, sources="any", journal=journal)
                event = receiver.handle(TOKEN, "127.0.0.1", refund(900_203, 1))
                self.assertEqual(event.begin().outcome, Outcome.NEW)
                status = journal.status()
                self.assertEqual((status.in_progress, status.highest_index), (1, 1), "the claim is in the journal")
                with self.assertRaises(BusyError):
                    receiver.parse(refund(900_203, 1)).begin()
                reply = event.reply()
                event.finish()
                status = journal.status()
                self.assertEqual((status.handled, status.in_progress), (1, 0))
                self.assertEqual(receiver.parse(refund(900_203, 1)).begin().reply, reply)
                journal.close()


def bonus(index: int) -> bytes:
    """An event the binding does not type (an OtherEvent), keyed in the journal by its index."""
    return f'{{"event":"bonusGranted","index":{index}}}'.encode()


class DeadlineTest(unittest.TestCase):
    def test_a_postgresql_server_that_never_answers_fails_the_open_within_its_deadline(self) -> None:
        import socket

        # The kernel completes the TCP handshake for the listener's backlog: a server that
        # accepts and never answers.
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(16)
            port = silent.getsockname()[1]
            # Without connect_timeout the open waits the lock time-out; with it, that.
            for query, setting in (("", {"lock_timeout_ms": 1000}), ("?connect_timeout=1", {"command_timeout_ms": 1000})):
                with self.subTest(query=query, setting=setting):
                    started = time.monotonic()
                    with self.assertRaises(JournalError) as caught:
                        Journal(f"postgres://me@127.0.0.1:{port}/x{query}", **setting)
                    took = time.monotonic() - started
                    self.assertLess(took, 6, "within the 1 s deadline and a loaded machine's slack")
                    self.assertEqual(caught.exception.http_status, 503)
            with self.assertRaises(ConfigurationError) as refused:
                Journal(f"postgres://me@127.0.0.1:{port}/x", command_timeout_ms=0)
            self.assertEqual(refused.exception.field, "command_timeout")


class OperatorTest(JournalCase):
    """What an operator sees and decides: index jumps, gaps resolved by hand, conflicts,
    renumbering; each decision with a note kept for audit."""

    def deliver_refunds(self, indexes: Any) -> None:
        for index in indexes:
            self.assertEqual(self.callback(refund(900_500 + index, index))[0], 200)

    def deliver_other(self, body: bytes, receiver: Receiver | None = None) -> Outcome:
        """An unknown event: begun, and finished with a reply of the partner's own."""
        event = (receiver or self.receiver).handle(TOKEN, "127.0.0.1", body)
        self.assertIsInstance(event, slotpartner.OtherEvent)
        outcome = event.begin().outcome
        if outcome is Outcome.NEW:
            event.finish(b'{"ok":true}')
        return outcome

    def test_an_index_jump_is_listed_and_accepting_it_closes_it(self) -> None:
        self.deliver_refunds(range(1, 6))
        self.assertEqual(self.deliver_other(bonus(1_000_000_000_000)), Outcome.NEW)
        status = self.journal.status()
        self.assertEqual((status.index_jumps, status.missing), (1, 0), "the stretch is not counted missing")
        self.assertEqual(status.highest_index, 1_000_000_000_000)
        self.assertEqual(self.journal.missing(), [])
        [jump] = self.journal.index_jumps()
        self.assertEqual(
            {k: jump[k] for k in ("kind", "index", "previous_highest", "name", "count", "numbering", "decision", "note")},
            {"kind": "jump", "index": 1_000_000_000_000, "previous_highest": 5, "name": "bonusGranted", "count": 1,
             "numbering": 1, "decision": None, "note": None},
        )  # fmt: skip
        self.assertIsInstance(jump["id"], int)
        self.assertIsInstance(jump["at_ms"], int)
        for blank in ("", "   "):
            with self.assertRaises(ConfigurationError) as caught:
                self.journal.accept_jump(jump["id"], blank)
            self.assertEqual(caught.exception.field, "note")
        self.assertEqual(self.journal.status().index_jumps, 1, "a refused decision changes nothing")
        self.journal.accept_jump(jump["id"], "the service moved its numbering on purpose")
        status = self.journal.status()
        self.assertEqual((status.index_jumps, status.missing), (0, 0))
        self.assertEqual(self.journal.index_jumps(), [], "decided: no longer listed as open")
        [decided] = self.journal.index_jumps(all=True)
        self.assertEqual((decided["id"], decided["decision"], decided["note"]),
                         (jump["id"], "accepted", "the service moved its numbering on purpose"))  # fmt: skip
        self.assertIsInstance(decided["decided_ms"], int)
        with self.assertRaises(ConfigurationError) as twice:
            self.journal.accept_jump(jump["id"], "again")
        self.assertEqual(twice.exception.field, "id", "no open jump has that id any more")

    def test_a_refused_body_without_an_event_name_changes_nothing(self) -> None:
        self.deliver_refunds(range(1, 6))
        before = self.journal.status()
        with self.assertRaises(ValidationError) as caught:
            self.receiver.handle(TOKEN, "127.0.0.1", b'{"index":1000000000000}')
        self.assertIsNone(caught.exception.event_name)
        self.assertEqual(self.journal.status(), before, "not seen, not refused, no index jump")
        self.assertEqual(self.journal.index_jumps(all=True), [])

    def test_a_jump_declared_a_gap_counts_its_stretch_missing(self) -> None:
        journal = Journal(f"sqlite:{self.dir.name}/jumps.db", max_index_jump=10)
        receiver = Receiver(TOKEN, sources="any", journal=journal)
        for index in (1, 2, 3, 4, 5):
            self.callback(refund(900_600 + index, index), receiver)
        self.callback(refund(900_612, 12), receiver)  # 7 beyond 5: an ordinary gap
        self.assertEqual((journal.status().missing, journal.status().index_jumps), (6, 0))
        self.callback(refund(900_640, 40), receiver)  # 28 beyond 12: more than max_index_jump
        status = journal.status()
        self.assertEqual((status.missing, status.index_jumps, status.highest_index), (6, 1, 40))
        [jump] = journal.index_jumps()
        self.assertEqual((jump["kind"], jump["index"], jump["previous_highest"]), ("jump", 40, 12))
        journal.jump_is_gap(jump["id"], "an outage: fetch the events in between")
        status = journal.status()
        self.assertEqual((status.missing, status.index_jumps), (6 + 27, 0))
        self.assertEqual(journal.missing(), [(6, 11), (13, 39)])
        self.assertEqual(journal.index_jumps(all=True)[0]["decision"], "gap")
        with self.assertRaises(ConfigurationError) as caught:
            journal.jump_is_gap(jump["id"], "twice")
        self.assertEqual(caught.exception.field, "id")
        journal.close()

    def test_resolving_a_real_gap_by_hand(self) -> None:
        self.deliver_refunds((1, 2, 3, 4, 5, 8))
        self.assertEqual((self.journal.status().missing, self.journal.missing()), (2, [(6, 7)]))
        for note in ("", " \n "):
            with self.assertRaises(ConfigurationError) as caught:
                self.journal.resolve(6, 7, note)
            self.assertEqual(caught.exception.field, "note")
        with self.assertRaises(ConfigurationError) as caught:
            self.journal.resolve(6, 7, None)  # type: ignore[arg-type]
        self.assertEqual(caught.exception.field, "note")
        for first, last in ((7, 6), (6, 9), (-1, 7)):
            with self.assertRaises(ConfigurationError) as bad:
                self.journal.resolve(first, last, "no such range")
            self.assertEqual(bad.exception.field, "range", (first, last))
        with self.assertRaises(ConfigurationError) as huge:
            self.journal.resolve(2**63, 2**63, "beyond int64")
        self.assertEqual(huge.exception.field, "first")
        self.assertEqual(self.journal.status().missing, 2, "nothing refused was resolved")
        self.assertEqual(self.journal.resolutions(), [])
        self.assertEqual(self.journal.resolve(6, 7, "the service confirms 6 and 7 were never sent"), 2)
        status = self.journal.status()
        self.assertEqual((status.missing, status.resolved, status.watermark), (0, 2, 8))
        self.assertEqual(self.journal.missing(), [])
        [resolution] = self.journal.resolutions()
        self.assertEqual({k: v for k, v in resolution.items() if k not in ("id", "at_ms")},
                         {"first": 6, "last": 7, "closed": 2, "numbering": 1,
                          "note": "the service confirms 6 and 7 were never sent"})  # fmt: skip
        # A range holding seen indexes closes only the missing ones: none here.
        self.assertEqual(self.journal.resolve(1, 8, "checked again"), 0)
        self.assertEqual(self.journal.status().resolved, 2)
        self.assertEqual([r["note"] for r in self.journal.resolutions()], ["checked again", resolution["note"]])
        self.assertEqual(len(self.journal.resolutions(limit=1)), 1)
        self.assertEqual(self.journal.resolutions(limit=0), [])
        with self.assertRaises(ConfigurationError) as bad_limit:
            self.journal.resolutions(limit=-1)
        self.assertEqual(bad_limit.exception.field, "limit")

    def test_an_abandoned_payout_delivered_again_is_handed_out_and_its_conflict_listed(self) -> None:
        payout = fixture("payout")
        event = self.receiver.parse(payout)
        self.assertEqual(event.begin().attempt, 1)
        event.abandon()  # the ledger was down: nothing stored
        # Delivered again without isMobile, which does not decide who is paid what: the same
        # delivery, handed out as attempt 2, no conflict.
        without_mobile = payout.replace(b',"isMobile":false', b"")
        self.assertNotEqual(without_mobile, payout)
        event = self.receiver.parse(without_mobile)
        claim = event.begin()
        self.assertEqual((claim.outcome, claim.attempt), (Outcome.NEW, 2))
        reply = event.reply()
        event.finish()
        self.assertEqual(self.journal.conflicts(all=True), [])
        self.assertEqual(self.callback(payout), (200, reply), "the full body gets the stored reply")
        # Abandoned, then delivered again without isMobile and with another amount: handed out
        # as new all the same (the first was never answered), and listed for the operator.
        second = payout.replace(b"900002", b"900012").replace(b'"index":42', b'"index":43')
        event = self.receiver.parse(second)
        event.begin()
        event.abandon()
        changed = second.replace(b',"isMobile":false', b"").replace(b'"moneyWon":150000', b'"moneyWon":150001')
        status, body = self.callback(changed)
        self.assertEqual((status, body), (200, b'{"payout":{"success":true,"errorMessage":""}}'), "not a 409")
        [conflict] = self.journal.conflicts()
        self.assertEqual(
            {k: conflict[k] for k in ("key", "name", "transaction_id", "index", "differing", "outcome", "count", "note")},
            {"key": "jackpotPayout:900012", "name": "jackpotPayout", "transaction_id": 900012, "index": 43,
             "differing": ["moneyWon: first 150000, now 150001"], "outcome": "handed_out", "count": 1, "note": None},
        )  # fmt: skip
        self.assertIn('"moneyWon":150000', conflict["first_content"])
        self.assertIn('"moneyWon":150001', conflict["now_content"])
        self.assertIsNone(conflict["resolved_ms"])
        status_now = self.journal.status()
        self.assertEqual((status_now.conflicts, status_now.open_conflicts), (1, 1))
        with self.assertRaises(ConfigurationError) as blank:
            self.journal.resolve_conflict(conflict["id"], "")
        self.assertEqual(blank.exception.field, "note")
        self.journal.resolve_conflict(conflict["id"], "the service corrected the amount; credited 150001")
        status_now = self.journal.status()
        self.assertEqual((status_now.conflicts, status_now.open_conflicts), (1, 0))
        self.assertEqual(self.journal.conflicts(), [])
        [resolved] = self.journal.conflicts(all=True)
        self.assertEqual(resolved["note"], "the service corrected the amount; credited 150001")
        self.assertIsInstance(resolved["resolved_ms"], int)
        with self.assertRaises(ConfigurationError) as twice:
            self.journal.resolve_conflict(conflict["id"], "again")
        self.assertEqual(twice.exception.field, "id")

    def test_renumbering_starts_gap_detection_afresh_and_keeps_old_events_apart(self) -> None:
        for index in (1, 2, 3):
            self.assertEqual(self.deliver_other(bonus(index)), Outcome.NEW)
        self.assertEqual(self.deliver_other(bonus(2)), Outcome.DONE, "a repeat in the first numbering")
        with self.assertRaises(ConfigurationError) as blank:
            self.journal.renumber(1, "")
        self.assertEqual(blank.exception.field, "note")
        with self.assertRaises(ConfigurationError) as negative:
            self.journal.renumber(-1, "restarted")
        self.assertEqual(negative.exception.field, "first_index")
        self.assertEqual(self.journal.status().numbering, 1)
        self.assertEqual(self.journal.renumber(1, "the service restarted its indexes at 1"), 2)
        status = self.journal.status()
        self.assertEqual((status.numbering, status.missing, status.highest_index, status.index_jumps), (2, 0, None, 0))
        self.assertEqual(self.deliver_other(bonus(2)), Outcome.NEW, "index 2 of the new numbering is a new event")
        self.assertEqual(self.journal.missing(), [(1, 1)])
        renumbered = [j for j in self.journal.index_jumps(all=True) if j["kind"] == "renumbered"]
        self.assertEqual([(j["index"], j["numbering"], j["decision"]) for j in renumbered], [(1, 2, "accepted")])
        # Index 1 of numbering 2 is missing: not given up silently.
        with self.assertRaises(ConfigurationError) as missing:
            self.journal.renumber(5, "once more")
        self.assertEqual(missing.exception.field, "first_index")
        self.assertEqual(self.journal.renumber(5, "once more", give_up_gaps=True), 3)
        given_up = [(r["first"], r["last"], r["note"]) for r in self.journal.resolutions()]
        self.assertEqual(given_up, [(1, 1, "given up by renumbering from 5: once more")])

    def test_the_settings_and_arguments_name_their_field(self) -> None:
        for setting in ("max_index_jump", "not_found_limit"):
            for value in (0, -1):
                with self.assertRaises(ConfigurationError) as caught:
                    Journal(f"sqlite:{self.dir.name}/bad.db", **{setting: value})
                self.assertEqual(caught.exception.field, setting, (setting, value))
        with self.assertRaises(ConfigurationError) as caught:
            Journal(f"sqlite:{self.dir.name}/bad.db", not_found_limit=2**32)
        self.assertEqual(caught.exception.field, "not_found_limit")
        with Journal(f"sqlite:{self.dir.name}/ok.db", max_index_jump=1, not_found_limit=1) as journal:
            fresh = journal.status()
            self.assertEqual((fresh.unfinished, fresh.open_conflicts, fresh.index_jumps, fresh.resolved,
                              fresh.unrecoverable, fresh.numbering), (0, 0, 0, 0, 0, 1))  # fmt: skip
            self.assertEqual((journal.index_jumps(), journal.conflicts(), journal.resolutions(), journal.unrecoverable()),
                             ([], [], [], []))  # fmt: skip
            receiver = Receiver(TOKEN, sources="any", journal=journal)
            self.callback(refund(1, 1), receiver)
            self.callback(refund(2, 3), receiver)  # 2 beyond 1: more than max_index_jump=1
            self.assertEqual((journal.status().index_jumps, journal.missing()), (1, []))
        with self.assertRaises(ConfigurationError) as closed:
            journal.index_jumps()
        self.assertEqual(closed.exception.field, "journal")
        for call in (lambda: self.journal.accept_jump("1", "x"), lambda: self.journal.index_jumps(limit=-1),  # type: ignore[arg-type]
                     lambda: self.journal.unrecoverable(limit=2**64), lambda: self.journal.conflicts(limit=1.5)):  # type: ignore[arg-type]  # fmt: skip
            with self.assertRaises(ConfigurationError) as bad:
                call()
            self.assertIn(bad.exception.field, ("id", "limit"))
        with self.assertRaises(ConfigurationError) as nul:
            self.journal.resolve_conflict(1, "a\0b")
        self.assertEqual(nul.exception.field, "note")

    def test_unfinished_deliveries_are_counted(self) -> None:
        event = self.receiver.parse(refund(900_700, 1))
        event.begin()
        self.assertEqual((self.journal.status().in_progress, self.journal.status().unfinished), (1, 0))
        event.abandon()
        self.assertEqual((self.journal.status().in_progress, self.journal.status().unfinished), (0, 1))
        self.callback(refund(900_700, 1))
        self.assertEqual(self.journal.status().unfinished, 0)

    def test_an_unfinished_delivery_closed_by_hand_runs_again_as_attempt_2(self) -> None:
        event = self.receiver.parse(refund(900_705, 5))
        self.assertEqual(event.begin().attempt, 1)
        event.abandon()
        self.assertEqual(self.journal.status().unfinished, 1)
        for bad_note in ("", " \t "):
            with self.assertRaises(ConfigurationError) as blank:
                self.journal.close_unfinished(5, bad_note)
            self.assertEqual(blank.exception.field, "note")
        for index in (4, 6, -1, 2**63 - 1):
            with self.assertRaises(ConfigurationError) as none:
                self.journal.close_unfinished(index, "nothing there")
            self.assertEqual(none.exception.field, "index", index)
        with self.assertRaises(ConfigurationError) as too_big:
            self.journal.close_unfinished(2**63, "beyond int64")
        self.assertEqual(too_big.exception.field, "index")
        self.assertEqual(self.journal.status().unfinished, 1, "nothing refused changed anything")
        self.assertEqual(self.journal.close_unfinished(5, "refunded by hand, ticket 4411"), 1)
        self.assertEqual(self.journal.status().unfinished, 0)
        [closing] = self.journal.resolutions()
        self.assertEqual((closing["first"], closing["last"], closing["closed"]), (5, 5, 0))
        self.assertIn("refunded by hand, ticket 4411", closing["note"])
        with self.assertRaises(ConfigurationError) as twice:
            self.journal.close_unfinished(5, "again")
        self.assertEqual(twice.exception.field, "index")
        event = self.receiver.parse(refund(900_705, 5))
        claim = event.begin()
        self.assertEqual((claim.outcome, claim.attempt), (Outcome.NEW, 2))
        event.reply()
        event.finish()
        self.assertEqual((self.journal.status().unfinished, self.journal.status().handled), (0, 1))


class ExportTest(JournalCase):
    """The deliveries of a period written to a file for reconciliation, read back in both formats."""

    def test_a_refund_and_a_payout_are_exported_and_read_back(self) -> None:
        import csv
        import datetime

        before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1)
        self.callback(refund(900_001, 1))
        self.callback(fixture("payout"), success=False)
        path = Path(self.dir.name) / "october.csv"
        self.assertEqual(self.journal.export(path, before), 2)
        with open(path, newline="", encoding="utf-8") as file:
            rows = list(csv.DictReader(file))
        self.assertEqual([row["event"] for row in rows], ["gameSessionBuyRefund", "jackpotPayout"])
        refund_row, payout_row = rows
        self.assertEqual(
            (refund_row["transactionId"], refund_row["playerIdentifier"], refund_row["gameSessionId"], refund_row["outcome"]),
            ("900001", "p-1", "5", "success"),
        )
        self.assertEqual((refund_row["moneyWon"], refund_row["currencyISO4217"], refund_row["errorMessage"]), ("", "", ""))
        self.assertEqual(
            (payout_row["index"], payout_row["moneyWon"], payout_row["coinsWon"], payout_row["isMoney"]),
            ("42", "150000", "0", "true"),
        )
        self.assertEqual((payout_row["currencyISO4217"], payout_row["playerPartnerIdentifier"]), ("EUR", "partner-42"))
        self.assertEqual((payout_row["outcome"], payout_row["errorMessage"]), ("failure", "refused run 2"))
        self.assertEqual((payout_row["state"], payout_row["attempts"]), ("done", "1"))
        self.assertTrue(payout_row["first_delivery"].endswith("Z") and payout_row["finished"])

        lines = Path(self.dir.name) / "october.jsonl"
        until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
        self.assertEqual(self.journal.export(str(lines), before.date(), until, format="jsonl"), 2)
        objects = [json.loads(line) for line in lines.read_text().splitlines()]
        self.assertEqual((objects[0]["moneyWon"], objects[1]["moneyWon"], objects[1]["isMoney"]), (None, 150000, True))
        self.assertEqual(objects[1]["transactionId"], 900002)
        # A period before both deliveries: an empty file (a CSV with its header only).
        empty = Path(self.dir.name) / "empty.csv"
        self.assertEqual(self.journal.export(empty, 0, int(before.timestamp() * 1000)), 0)
        self.assertEqual(empty.read_bytes(), path.read_bytes().split(b"\r\n", 1)[0] + b"\r\n")

    def test_bad_arguments_name_their_field(self) -> None:
        import datetime

        path = Path(self.dir.name) / "x.csv"
        for kwargs, field in (
            ({"since": 0, "format": "xlsx"}, "format"),
            ({"since": datetime.datetime(2026, 10, 1)}, "since"),
            ({"since": 0, "until": "tomorrow"}, "until"),
            ({"since": True}, "since"),
            ({"since": 5, "until": 5}, "until_ms"),
        ):
            with self.subTest(kwargs=kwargs), self.assertRaises(ConfigurationError) as refused:
                self.journal.export(path, **kwargs)  # type: ignore[arg-type]
            self.assertEqual(refused.exception.field, field)
        path.write_text("already here")
        with self.assertRaises(ConfigurationError) as exists:
            self.journal.export(path, 0)
        self.assertEqual(exists.exception.field, "path")
        self.assertEqual(path.read_text(), "already here", "an existing file is never replaced")
        with self.assertRaises(ConfigurationError) as folder:
            self.journal.export(Path(self.dir.name) / "no" / "such.csv", 0)
        self.assertEqual(folder.exception.field, "path")


class LedgerUnavailable(Exception):
    """The README snippet's transient failure of the partner's ledger."""


class ReadmeSnippetTest(unittest.TestCase):
    """The README's "Exactly once" snippet as it stands, its journal's URL replaced (and its lock
    time-out shortened), run with the names it leaves to the partner."""

    def snippet(self, url: str, logic: Callable[[slotpartner.Event], bytes]) -> Callable[..., tuple[int, bytes]]:
        readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
        match = re.search(r"\n## Exactly once\n.*?```python\n(.*?)```", readme, re.S)
        assert match is not None, "no Python snippet under Exactly once"
        literal = 'slotpartner.Journal("sqlite:/var/lib/partner/journal.db")'
        self.assertIn(literal, match.group(1))
        code = match.group(1).replace(literal, f"slotpartner.Journal({url!r}, lock_timeout_ms=50)")
        namespace: dict[str, Any] = {"partner_token": TOKEN, "run_partner_logic": logic,
                                     "LedgerUnavailable": LedgerUnavailable}  # fmt: skip
        exec(compile(code, "README.md", "exec"), namespace)
        namespace["log"].disabled = True
        return namespace["callback"]  # type: ignore[no-any-return]

    def test_an_unreachable_journal_gets_401_and_503_naming_nothing_of_it(self) -> None:
        callback = self.snippet(UNREACHABLE, lambda event: event.reply())
        self.assertEqual(callback(None, "18.203.30.17", refund(900_900, 1))[0], 401)
        status, body = callback(TOKEN, "18.203.30.17", refund(900_900, 1))
        self.assertEqual(status, 503)
        self.assertIn("error", json.loads(body))
        for secret in ("postgres://", "127.0.0.1", "sp_owner", "sp_ledger"):
            self.assertNotIn(secret.encode(), body)

    def test_a_journal_failing_at_finish_or_abandon_is_answered(self) -> None:
        with tempfile.TemporaryDirectory(prefix="sp-journal-snippet-") as directory:
            path = f"{directory}/journal.db"
            holders: list[subprocess.Popen[bytes]] = []

            def hold_lock() -> None:
                holder = subprocess.Popen([sys.executable, "-c", HOLD_WRITE_LOCK, path],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
                holders.append(holder)
                assert holder.stdout is not None
                self.assertEqual(holder.stdout.readline(), b"locked\n")

            def credit_then_journal_down(event: slotpartner.Event) -> bytes:
                hold_lock()
                return event.reply()

            def ledger_and_journal_down(event: slotpartner.Event) -> bytes:
                hold_lock()
                raise LedgerUnavailable()

            ok = b'{"refund":{"success":true,"errorMessage":""}}'
            try:
                callback = self.snippet(f"sqlite:{path}", lambda event: event.reply())
                self.assertEqual(callback(TOKEN, "18.203.30.17", refund(900_901, 1)), (200, ok))
                self.assertEqual(callback(TOKEN, "18.203.30.17", refund(900_901, 1)), (200, ok), "a repeat")
                failing = self.snippet(f"sqlite:{path}", credit_then_journal_down)
                self.assertEqual(failing(TOKEN, "18.203.30.17", refund(900_902, 2)), (200, ok), "finish failed")
                holders.pop().communicate(b"")
                failing = self.snippet(f"sqlite:{path}", ledger_and_journal_down)
                status, body = failing(TOKEN, "18.203.30.17", refund(900_903, 3))
                self.assertEqual(status, 503, "abandon failed")
                self.assertIn("error", json.loads(body))
            finally:
                for holder in holders:
                    holder.communicate(b"")


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
        abandoned = refund(900_301, 2)
        self.receiver.parse(abandoned).begin()  # dropped at once: its claim is released
        again = count_calls(lambda: self.callback(abandoned))
        self.assertEqual(again, {"sp_receiver_handle": 1, "sp_event_begin": 1, "sp_event_differing": 1,
                                 "sp_event_reply_pruned": 1, "sp_event_reply": 1, "sp_event_finish": 1,
                                 "sp_event_free": 1}, "attempt 2")  # fmt: skip
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
    """examples/callback_wsgi.py with SLOTPARTNER_JOURNAL (and SLOTPARTNER_LEDGER, its ledger)."""

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
            ledger = os.path.join(directory, "ledger.db")
            example = load_example({"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": "any",
                                    "SLOTPARTNER_JOURNAL": f"sqlite:{directory}/journal.db",
                                    "SLOTPARTNER_LEDGER": ledger})  # fmt: skip
            app = example.application
            with self.assertLogs("slotpartner", logging.INFO) as logged:
                payout = fixture("payout")
                first = self.run_app(app, payout)
                repeat = self.run_app(app, payout)
                conflict = self.run_app(app, payout.replace(b'"moneyWon":150000', b'"moneyWon":150001'))
                refund_body = fixture("refund")
                with closing(sqlite3.connect(ledger)) as db:  # the ledger fails: its table is gone
                    db.execute("ALTER TABLE credits RENAME TO away")
                down = self.run_app(app, refund_body)
                with closing(sqlite3.connect(ledger)) as db:
                    db.execute("ALTER TABLE away RENAME TO credits")
                retried = self.run_app(app, refund_body)
            self.assertEqual(first, ("200 OK", first[1], b'{"payout":{"success":true,"errorMessage":""}}'))
            self.assertEqual(repeat[0::2], first[0::2], "the repeat gets the first reply")
            self.assertEqual(conflict[0], "409 Conflict")
            self.assertIn(b"900002", conflict[2])
            self.assertEqual((down[0], down[1].get("Retry-After")), ("503 Service Unavailable", "5"))
            self.assertEqual(retried[0], "200 OK")
            self.assertEqual([row[:2] for row in ledger_rows(ledger)], [("payout", 900002), ("refund", 900001)])
            lines = "\n".join(logged.output)
            self.assertIn("repeated delivery answered from the journal", lines)
            self.assertIn("no such table: credits", lines)
            self.assertIn("attempt 2", lines)
            self.assertIn("900002", lines)

    def test_an_unusable_journal_is_answered_503(self) -> None:
        with tempfile.TemporaryDirectory() as directory:
            example = load_example({"SLOTPARTNER_TOKEN": TOKEN, "SLOTPARTNER_SOURCES": "any",
                                    "SLOTPARTNER_JOURNAL": f"sqlite:{directory}",
                                    "SLOTPARTNER_LEDGER": f"{directory}/ledger.db"})  # fmt: skip
            with self.assertLogs("slotpartner", logging.WARNING) as logged:
                status, _, body = self.run_app(example.application, fixture("refund"))
            self.assertEqual(status, "503 Service Unavailable")
            self.assertIn(b'"code":', body)
            self.assertIn("journal: ", logged.output[0])

    def test_over_the_wire_repeats_get_the_first_reply_and_gaps_are_found(self) -> None:
        sandbox = Sandbox()
        directory = tempfile.TemporaryDirectory(prefix="sp-journal-example-")
        url = f"sqlite:{directory.name}/journal.db"
        report = Path(directory.name) / "report.json"
        server = WsgiExample(sources="127.0.0.1", env={"SLOTPARTNER_JOURNAL": url})
        try:
            # Losses, byte-identical repeats (the sender checks each gets the first reply byte for
            # byte) and reorders, over four connections at once.
            sent = sandbox.send(server.url + "/callback", "--burst", "60", "--index", "100", "--seed", "8",
                                "--lose", "0.1", "--repeat", "0.2", "--reorder", "0.1", "--concurrency", "4",
                                "--report-json", str(report), "--quiet", "mixed")  # fmt: skip
            credited = ledger_rows(server.ledger)
        finally:
            server.stop()
            sandbox.stop()
        try:
            self.assertEqual(sent.returncode, 0, sent.stdout + sent.stderr)
            facts = json.loads(report.read_text())
            self.assertEqual((facts["repeat_mismatches"], facts["verdict_failures"]), (0, 0))
            self.assertGreater(facts["repeated"], 0)
            # Each delivered event credited once, the repeats not at all.
            ids = facts["delivered_payout_transaction_ids"] + facts["delivered_refund_transaction_ids"]
            self.assertEqual(sorted(row[1] for row in credited), sorted(ids))
            self.assertEqual(sum(row[3] for row in credited if row[0] == "payout"), facts["delivered_money_total"])
            with Journal(url) as journal:
                missing = [i for first, last in journal.missing() for i in range(first, last + 1)]
                status = journal.status()
            assert status.highest_index is not None
            self.assertEqual(missing, [i for i in facts["lost_indexes"] if i < status.highest_index])
            replayed = facts["deliveries"] - facts["delivered"]
            self.assertEqual((status.handled, status.replayed, status.in_progress), (facts["delivered"], replayed, 0))
        finally:
            directory.cleanup()


class BackupTest(JournalCase):
    def test_a_backup_answers_a_repeat_with_the_stored_reply_and_never_replaces_a_file(self) -> None:
        first = self.callback(refund(900_900, 1), success=False)
        dest = Path(self.dir.name) / "backup.db"
        self.journal.backup(dest)
        self.assertEqual(dest.stat().st_mode & 0o777, 0o600, "the copy holds player identifiers")
        with Journal(f"sqlite:{dest}") as copy:
            self.assertEqual(self.callback(refund(900_900, 1), Receiver(TOKEN, sources="any", journal=copy)), first)
            self.assertEqual(self.runs, 1, "the repeat was answered from the copy and ran nothing")
            self.assertEqual((copy.status().handled, copy.status().replayed), (1, 1))
        before = dest.read_bytes()
        self.callback(refund(900_901, 2))
        for existing in (dest, str(dest)):
            with self.assertRaises(ConfigurationError) as refused:
                self.journal.backup(existing)
            self.assertEqual(refused.exception.field, "dest")
            self.assertIn("exists", str(refused.exception))
        self.assertEqual(dest.read_bytes(), before, "a refused backup touched the existing file")
        for bad in (42, None, f"{self.dir.name}/a\0b.db", f"{self.dir.name}/missing/backup.db"):
            with self.assertRaises(ConfigurationError) as refused:
                self.journal.backup(bad)  # type: ignore[arg-type]
            self.assertEqual(refused.exception.field, "dest", bad)
        self.assertEqual([p.name for p in Path(self.dir.name).iterdir() if ".partial-" in p.name], [])


DAY_MS = 86_400_000


class RetentionTest(JournalCase):
    """Retention and vital signs: deliveries aged behind the library's back (the retention's
    minimum is a day), pruned, and their repeats flagged."""

    def sql(self, statement: str, path: str | None = None) -> int:
        """Runs ``statement`` on the journal's file behind the library's back, from another
        process (a second copy of SQLite in this one would release the library's POSIX locks on
        the file when it closes it); the rows changed."""
        script = "import sqlite3, sys\nprint(sqlite3.connect(sys.argv[1], isolation_level=None).execute(sys.argv[2]).rowcount)"
        done = subprocess.run(
            [sys.executable, "-c", script, path or self.url.removeprefix("sqlite:"), statement],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        return int(done.stdout)

    def age(self, transaction_id: int, days: int, path: str | None = None) -> None:
        shift = days * DAY_MS
        changed = self.sql(
            f"UPDATE sp_journal_delivery SET finished_ms = finished_ms - {shift} WHERE transaction_id = {transaction_id}",
            path,
        )
        self.assertEqual(changed, 1)

    def test_prune_compacts_an_aged_delivery_and_its_repeat_says_the_reply_was_pruned(self) -> None:
        import datetime

        first = self.callback(refund(960_001, 1))
        self.callback(refund(960_002, 2))
        before = self.journal.vitals()
        self.assertEqual((before.pruned, before.forgotten, before.oldest_gap_ms), (0, 0, None))
        self.assertGreater(before.size_bytes or 0, 0)
        self.assertLess(abs(time.time() * 1000 - (before.last_delivery_ms or 0)), 60_000)
        self.age(960_001, 100)
        report = self.journal.prune(datetime.timedelta(days=90))
        self.assertIsInstance(report, slotpartner.PruneReport)
        self.assertEqual(
            (report.compacted, report.forgotten, report.refused_removed, report.conflicts_removed, report.batches,
             report.complete),
            (1, 0, 0, 0, 2, True),
        )  # fmt: skip
        self.assertGreaterEqual(report.longest_batch_us, 0)
        after = self.journal.vitals()
        self.assertIsInstance(after, slotpartner.JournalVitals)
        self.assertEqual((after.pruned, after.forgotten), (1, 0))
        self.assertEqual(self.journal.status().handled, 2, "the counts stay")
        # Seconds do as well as a timedelta; nothing is left.
        again = self.journal.prune(90 * 86_400, pause=0, max_time=60.5)
        self.assertEqual((again.compacted, again.batches, again.complete), (0, 1, True))
        # The repeat runs again as attempt 2, flagged; the ledger decides.
        event = self.receiver.parse(refund(960_001, 1))
        claim = event.begin()
        self.assertEqual((claim.outcome, claim.attempt, claim.differing, claim.reply_pruned), (Outcome.NEW, 2, (), True))
        event.reply()
        event.finish()
        self.assertEqual(self.callback(refund(960_001, 1)), first, "stored again, answered again")
        young = self.receiver.parse(refund(960_002, 2))
        self.assertEqual(young.begin().outcome, Outcome.DONE)
        fresh = self.receiver.parse(refund(960_003, 3))
        self.assertFalse(fresh.begin().reply_pruned, "a first delivery")
        fresh.close()
        # Compact records forgotten: a repeat is a new delivery. (The cutoffs count from the
        # newest stored reply at the latest: a young one is there.)
        self.callback(refund(960_004, 4))
        self.age(960_002, 400)
        self.age(960_001, 400)
        report = self.journal.prune(datetime.timedelta(days=90), forget_older_than=365 * 86_400, batch=1)
        self.assertEqual((report.compacted, report.forgotten, report.batches), (2, 2, 3))
        self.assertEqual((self.journal.vitals().pruned, self.journal.vitals().forgotten), (3, 2))
        claim = self.receiver.parse(refund(960_002, 2)).begin()
        self.assertEqual((claim.outcome, claim.attempt, claim.reply_pruned), (Outcome.NEW, 1, False))

    def test_prune_arguments_name_their_field(self) -> None:
        import datetime

        day = datetime.timedelta(days=1)
        cases: list[tuple[str, dict[str, Any]]] = [
            ("older_than", {"older_than": 3600}),  # the library's floor, a day
            ("older_than", {"older_than": day - datetime.timedelta(milliseconds=1)}),
            ("older_than", {"older_than": "90d"}),
            ("older_than", {"older_than": True}),
            ("older_than", {"older_than": float("nan")}),
            ("older_than", {"older_than": -day}),
            ("older_than", {"older_than": 2**64}),
            ("forget_older_than", {"older_than": day, "forget_older_than": 0}),
            ("forget_older_than", {"older_than": day, "forget_older_than": day}),
            ("batch", {"older_than": day, "batch": 0}),
            ("batch", {"older_than": day, "batch": 100_001}),
            ("batch", {"older_than": day, "batch": 1.5}),
            ("pause", {"older_than": day, "pause": 61}),
            ("pause", {"older_than": day, "pause": 2**40}),
            ("max_time", {"older_than": day, "max_time": 0}),
        ]
        for field, arguments in cases:
            with self.assertRaises(ConfigurationError) as refused:
                self.journal.prune(**arguments)
            self.assertEqual(refused.exception.field, field, arguments)
        self.assertEqual(self.journal.vitals().pruned, 0)
        for bad in (datetime.timedelta(days=-1), "1d", None):
            with self.assertRaises(ConfigurationError) as refused:
                self.journal.missing_older_than(bad)  # type: ignore[arg-type]
            self.assertEqual(refused.exception.field, "min_age")
        for limit in (0, 1_000_001):
            with self.assertRaises(ConfigurationError) as refused:
                self.journal.missing_older_than(0, limit)
            self.assertEqual(refused.exception.field, "limit")

    def test_missing_older_than_leaves_out_young_gaps_and_vitals_date_them(self) -> None:
        import datetime

        self.callback(refund(961_001, 1))
        self.callback(refund(961_003, 3))
        self.assertEqual(self.journal.missing_older_than(0), [(2, 2)])
        self.assertEqual(self.journal.missing_older_than(datetime.timedelta(hours=1)), [])
        self.sql("UPDATE sp_journal_runs SET since_ms = since_ms - 7200000 WHERE lo = 3")
        self.assertEqual(self.journal.missing_older_than(3600, limit=1), [(2, 2)])
        vitals = self.journal.vitals()
        assert vitals.oldest_gap_ms is not None and vitals.oldest_record_ms is not None
        self.assertLess(abs(time.time() * 1000 - vitals.oldest_gap_ms - 7_200_000), 120_000)

    def test_the_journals_own_retention(self) -> None:
        import datetime

        for bad in (60, datetime.timedelta(hours=23), -1, "90d", 2**64):
            with self.assertRaises(ConfigurationError) as refused:
                Journal(f"sqlite:{self.dir.name}/bad.db", retention=bad)  # type: ignore[arg-type]
            self.assertEqual(refused.exception.field, "retention", bad)
        path = f"{self.dir.name}/retained.db"
        with Journal(f"sqlite:{path}", retention=datetime.timedelta(days=90)) as journal:
            receiver = Receiver(TOKEN, sources="any", journal=journal)
            self.callback(refund(962_001, 1), receiver)
            self.age(962_001, 100, path)
            time.sleep(1.1)  # a batch at most once a second
            self.callback(refund(962_002, 2), receiver)
            self.assertEqual(journal.vitals().pruned, 1)
            claim = receiver.parse(refund(962_001, 1)).begin()
            self.assertEqual((claim.attempt, claim.reply_pruned), (2, True))
        with Journal(f"sqlite:{self.dir.name}/off.db", retention=0) as journal:
            self.assertEqual(journal.vitals().pruned, 0)


if __name__ == "__main__":
    unittest.main()
