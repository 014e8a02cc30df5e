"""Statements of the partner's own staged on a claimed event (``Event.stage``) and run by
``finish()`` in the transaction that stores the reply, on a SQLite journal in a temporary
directory: the credit and the reply stored together, a repeat answered from the journal without
running it again, order, a failing statement storing nothing and keeping the claim, refusals
naming the event, the SQL or the parameter, values stored exactly, statements dropped by
abandon and close, a lost claim running none, and a careless host feeding an error back.

The ledger tables are created and read by another process: a second copy of SQLite in this
process (Python's ``sqlite3`` beside the library's own) would drop the journal's POSIX locks
on the file whenever it closes it, and its last close would delete the write-ahead log the
journal still writes to."""

from __future__ import annotations

import ast
import enum
import json
import subprocess
import sys
import tempfile
import time
import unittest
from collections.abc import Callable
from decimal import Decimal

from support import TOKEN
from test_journal import count_calls, refund

from slotpartner import (
    BalanceQuery,
    ClaimLostError,
    ConfigurationError,
    Event,
    Journal,
    JournalError,
    Outcome,
    Receiver,
)

#: Run by another Python process: the statements on stdin (a Python literal list) against the
#: SQLite file argv[1]; prints the rows of the last one.
OUTSIDE = """
import ast, sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10, isolation_level=None)
rows = []
for sql in ast.literal_eval(sys.stdin.read()):
    rows = db.execute(sql).fetchall()
db.close()
print(repr(rows))
"""

CREDITS = (
    "CREATE TABLE credits (kind TEXT NOT NULL, transaction_id INTEGER NOT NULL, player TEXT NOT NULL, "
    "amount INTEGER NOT NULL, PRIMARY KEY (kind, transaction_id))"
)
CREDIT = "INSERT INTO credits (kind, transaction_id, player, amount) VALUES (?, ?, ?, ?)"
VALUES = "CREATE TABLE vals (n INTEGER PRIMARY KEY, v)"


class Kind(enum.IntEnum):
    PAYOUT = 7


class StagedCase(unittest.TestCase):
    """A fresh SQLite journal per test with the ledger's tables beside it, and a receiver on it."""

    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="sp-staged-")
        self.path = f"{self.dir.name}/journal.db"
        self.journal = Journal(f"sqlite:{self.path}")  # the journal first: it wants a file of its own
        self.outside(CREDITS, VALUES)
        self.receiver = Receiver(TOKEN, sources="any", journal=self.journal)

    def tearDown(self) -> None:
        self.journal.close()
        self.dir.cleanup()

    def outside(self, *statements: str) -> list[tuple[object, ...]]:
        """Runs ``statements`` on the journal's file from another process; the last one's rows."""
        done = subprocess.run(
            [sys.executable, "-c", OUTSIDE, self.path],
            input=repr(list(statements)),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise AssertionError(f"sqlite3 in another process failed: {done.stderr}")
        rows: list[tuple[object, ...]] = ast.literal_eval(done.stdout)
        return rows

    def credits(self) -> list[tuple[object, ...]]:
        return self.outside("SELECT kind, transaction_id, player, amount FROM credits ORDER BY kind, transaction_id")

    def claimed(self, transaction_id: int, index: int, attempt: int = 1) -> Event:
        event = self.receiver.parse(refund(transaction_id, index))
        claim = event.begin()
        self.assertEqual((claim.outcome, claim.attempt), (Outcome.NEW, attempt))
        return event

    def assert_refused(self, field: str, call: Callable[[], object], expected: str | None = None) -> ConfigurationError:
        """``call()`` raises the binding's or the library's argument error naming ``field``, with
        the answer to a bad argument (HTTP 500, an invalid_argument body naming it)."""
        with self.assertRaises(ConfigurationError) as caught:
            call()
        error = caught.exception
        self.assertEqual((error.status, error.field), (1, field))
        self.assertTrue(error.message.startswith(field + ": "), error.message)
        if expected is not None:
            self.assertIn(expected, error.message)
        self.assertEqual(error.http_status, 500)
        assert error.response_body is not None
        body = json.loads(error.response_body)
        self.assertEqual((body["error"]["code"], body["error"]["field"]), ("invalid_argument", ""))
        return error


class StagedStatementsTest(StagedCase):
    def test_a_staged_credit_commits_with_the_reply_and_a_repeat_runs_nothing(self) -> None:
        event = self.claimed(700_001, 1)
        event.stage(CREDIT, ["refund", 700_001, "p-1", 0])
        reply = event.reply()
        self.assertEqual(self.credits(), [], "staged, not run: the claim is not finished")
        event.finish()
        self.assertEqual(self.credits(), [("refund", 700_001, "p-1", 0)])
        status = self.journal.status()
        self.assertEqual((status.handled, status.in_progress), (1, 0))
        # The service delivers it again: answered from the journal, the credit not run again.
        for _ in range(2):
            repeat = self.receiver.parse(refund(700_001, 1))
            claim = repeat.begin()
            self.assertEqual((claim.outcome, claim.reply), (Outcome.DONE, reply))
            self.assert_refused("event", lambda r=repeat: r.stage(CREDIT, ["refund", 700_001, "p-1", 0]))
            repeat.finish()  # nothing to do
        self.assertEqual(self.outside("SELECT COUNT(*) FROM credits"), [(1,)])
        self.assertEqual(self.journal.status().replayed, 2)

    def test_statements_run_in_the_order_staged(self) -> None:
        event = self.claimed(700_002, 1)
        event.stage(CREDIT, ("payout", 700_002, "p-2", 100))
        event.stage("UPDATE credits SET amount = amount * 2 + 1 WHERE kind = ? AND transaction_id = ?",
                    ("payout", 700_002))  # fmt: skip
        event.stage("UPDATE credits SET player = player || ?", ["-checked"])
        event.reply()
        event.finish()
        # In another order the update would find no row (100) or double after the insert differently.
        self.assertEqual(self.credits(), [("payout", 700_002, "p-2-checked", 201)])

    def test_a_failing_statement_stores_nothing_and_keeps_the_claim(self) -> None:
        cases = [  # (what, the second statement and its parameters, the database's words)
            ("missing table", "INSERT INTO no_such_table (x) VALUES (?)", [1], "no such table"),
            ("unique violation", CREDIT, ["refund", 700_020, "p-3", 5], "UNIQUE constraint failed"),
        ]
        for number, (what, sql, params, problem) in enumerate(cases):
            with self.subTest(what):
                transaction_id = 700_010 + 10 * number
                event = self.claimed(transaction_id, 1 + number)
                event.stage(CREDIT, ["refund", transaction_id, "p-3", 0])
                event.stage(sql, params)
                reply = event.reply()
                for _ in range(2):  # the statements stay staged: finishing again fails the same way
                    with self.assertRaises(JournalError) as caught:
                        event.finish()
                    error = caught.exception
                    self.assertEqual((error.status, error.field, error.http_status), (24, "statements[1]", 503))
                    self.assertTrue(error.message.startswith("statements[1]: staged statement 2 ("), error.message)
                    self.assertIn(problem, error.message)
                    self.assertIn("the claim is still held", error.message)
                    self.assertIsNotNone(event._ptr, "the claim stays this event's")
                self.assertEqual(self.credits(), [], "the first statement's row was rolled back")
                status = self.journal.status()
                self.assertEqual((status.handled, status.in_progress), (number, 1), "no reply stored, the claim held")
                event.abandon()
                # The next delivery runs the logic again, as attempt 2: nothing was stored.
                again = self.claimed(transaction_id, 1 + number, attempt=2)
                again.stage(CREDIT, ["refund", transaction_id, "p-3", 0])
                self.assertEqual(again.reply(), reply)
                again.finish()
                self.assertEqual(self.credits(), [("refund", transaction_id, "p-3", 0)])
                self.outside("DELETE FROM credits")

    def test_stage_needs_a_claim(self) -> None:
        statement = (CREDIT, ["refund", 700_030, "p-4", 0])
        not_begun = self.receiver.parse(refund(700_030, 1))
        self.assert_refused("event", lambda: not_begun.stage(*statement), "not begun")
        done = self.claimed(700_031, 2)
        done.reply()
        done.finish()
        self.assert_refused("event", lambda: done.stage(*statement), "finished")
        repeat = self.receiver.parse(refund(700_031, 2))
        self.assertEqual(repeat.begin().outcome, Outcome.DONE)
        self.assert_refused("event", lambda: repeat.stage(*statement), "answered from the journal")
        query = self.receiver.parse(b'{"action":"getPlayerBalance","playerIdentifier":"p-4"}')
        assert isinstance(query, BalanceQuery)
        self.assertEqual(query.begin().outcome, Outcome.NOT_JOURNALED)
        self.assert_refused("event", lambda: query.stage(*statement), "not journaled")
        query.close()
        abandoned = self.claimed(700_032, 3)
        abandoned.abandon()
        self.assert_refused("event", lambda: abandoned.stage(*statement), "abandoned")
        closed = self.claimed(700_033, 4)
        closed.close()
        self.assert_refused("event", lambda: closed.stage(*statement), "closed")
        plain = Receiver(TOKEN, sources="any").parse(refund(700_034, 5))
        self.assert_refused("event", lambda: plain.stage(*statement), "no journal")
        # The refused statement was never staged: the event begun after it stores no credit.
        self.assertEqual(not_begun.begin().outcome, Outcome.NEW)
        not_begun.reply()
        not_begun.finish()
        self.assertEqual(self.credits(), [])

    def test_transaction_control_is_refused_naming_sql(self) -> None:
        event = self.claimed(700_040, 1)
        for sql in ("COMMIT", "  commit;", "/* the ledger */ ROLLBACK", "-- credit\nBEGIN", "SAVEPOINT a",
                    "RELEASE a", "END", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"):  # fmt: skip
            with self.subTest(sql):
                self.assert_refused("sql", lambda s=sql: event.stage(s), "the journal begins and commits")
        self.assert_refused("sql", lambda: event.stage(""), "empty")
        insert = b"INSERT INTO vals (v) VALUES (1)"
        self.assert_refused("sql", lambda: event.stage(insert), "must be a str, not bytes")  # type: ignore[arg-type]
        self.assert_refused("sql", lambda: event.stage(None), "must be a str, not None")  # type: ignore[arg-type]
        self.assert_refused("sql", lambda: event.stage("INSERT INTO vals (v) VALUES ('\ud800')"), "UTF-8")
        event.stage("INSERT INTO vals (n, v) VALUES (1, 'kept')")  # the event can still stage and finish
        event.reply()
        event.finish()
        self.assertEqual(self.outside("SELECT n, v FROM vals"), [(1, "kept")], "only the accepted statement ran")

    def test_parameters_of_another_type_are_refused_naming_their_position(self) -> None:
        event = self.claimed(700_050, 1)
        sql = "INSERT INTO vals (n, v) VALUES (?, ?)"  # (two placeholders: the refusals come first)
        refused = [
            (True, "not bool"),
            (False, "not bool"),
            (12.5, "not float"),
            ({"amount": 1}, "not dict"),
            (Decimal("12.50"), "not Decimal"),
            (object(), "not object"),
            (2**63, "does not fit a 64-bit integer"),
            (-(2**63) - 1, "does not fit a 64-bit integer"),
            ("player \ud800", "cannot be encoded as UTF-8"),
        ]
        for value, expected in refused:
            with self.subTest(value=value):
                # The bad value third, after a good int and str: the message names its position.
                self.assert_refused("params[2]", lambda v=value: event.stage(sql, [1, "ok", v]), expected)
                self.assert_refused("params[0]", lambda v=value: event.stage(sql, (v,)), expected)
        self.assert_refused("params", lambda: event.stage(sql, "ab"), "not str")  # two one-character texts otherwise
        self.assert_refused("params", lambda: event.stage(sql, b"ab"), "not bytes")
        self.assert_refused("params", lambda: event.stage(sql, None), "not None")  # type: ignore[arg-type]
        self.assert_refused("params", lambda: event.stage(sql, {1, 2}), "not set")  # type: ignore[arg-type]
        # None of them was staged: finishing runs nothing.
        event.reply()
        event.finish()
        self.assertEqual(self.outside("SELECT COUNT(*) FROM vals"), [(0,)])

    def test_values_are_stored_exactly(self) -> None:
        values: list[object] = [
            None,
            -(2**63),
            2**63 - 1,
            0,
            Kind.PAYOUT,  # an int subclass: its integer
            "",
            "Zoë pays 10 € 🎰",
            "quote ' and \"",
            b"",
            bytes(range(256)),
            bytearray(b"\x00bytearray\xff"),
            memoryview(b"--memoryview--")[2:-2],
            "long " * 2000,  # larger than the binding's scratch for a statement's values
            bytes(range(256)) * 40,
        ]
        expected = [
            ("null", None),
            ("integer", -(2**63)),
            ("integer", 2**63 - 1),
            ("integer", 0),
            ("integer", 7),
            ("text", ""),
            ("text", "Zoë pays 10 € 🎰"),
            ("text", "quote ' and \""),
            ("blob", b""),
            ("blob", bytes(range(256))),
            ("blob", b"\x00bytearray\xff"),
            ("blob", b"memoryview"),
            ("text", "long " * 2000),
            ("blob", bytes(range(256)) * 40),
        ]
        event = self.claimed(700_060, 1)
        for n, value in enumerate(values):
            event.stage("INSERT INTO vals (n, v) VALUES (?, ?)", [n, value])
        event.stage("INSERT INTO vals (n, v) VALUES (?1 + 100, ?2)", (1, "numbered placeholders"))
        # Several values of one statement, each read from its own place.
        event.stage("INSERT INTO vals (n, v) VALUES (?1, ?2 || ?3 || ?4 || ?5)", (150, "one,", None, "two,", b"three"))
        event.stage("INSERT INTO vals (n, v) VALUES (?1, ?2 || ?3 || ?4)", (151, "one,", "", "two"))
        event.stage("INSERT INTO vals (n, v) VALUES (200, 'no parameters')")
        event.reply()
        event.finish()
        rows = self.outside("SELECT n, typeof(v), v FROM vals ORDER BY n")
        self.assertEqual([(t, v) for _, t, v in rows[: len(values)]], expected)
        self.assertEqual([n for n, _, _ in rows], [*range(len(values)), 101, 150, 151, 200])
        self.assertEqual(
            rows[len(values) :],
            [(101, "text", "numbered placeholders"), (150, "null", None), (151, "text", "one,two"), (200, "text", "no parameters")],
        )

    def test_abandon_and_close_drop_the_staged_statements(self) -> None:
        event = self.claimed(700_070, 1)
        event.stage(CREDIT, ["refund", 700_070, "p-7", 0])
        event.reply()
        event.abandon()  # the partner's other store was down
        second = self.claimed(700_070, 1, attempt=2)
        second.stage(CREDIT, ["refund", 700_070, "p-7", 0])
        second.close()  # released unfinished, the statement with it
        third = self.claimed(700_070, 1, attempt=3)
        third.reply()
        third.finish()  # stages nothing itself
        self.assertEqual(self.credits(), [], "the abandoned and the closed claims' statements never ran")
        self.assertEqual(self.journal.status().handled, 1)

    def test_a_lost_claim_runs_none_of_its_statements(self) -> None:
        journal = Journal(f"sqlite:{self.path}", lease_ms=30)
        receiver = Receiver(TOKEN, sources="any", journal=journal)
        journal.close()  # the receiver keeps it open
        slow = receiver.parse(refund(700_080, 1))
        slow.begin()
        slow.stage(CREDIT, ["refund", 700_080, "slow", 0])
        slow.reply()
        time.sleep(0.1)  # the lease ends: the next delivery takes the claim over
        other = receiver.parse(refund(700_080, 1))
        self.assertEqual(other.begin().attempt, 2)
        other.stage(CREDIT, ["refund", 700_080, "other", 0])
        other.reply()
        other.finish()
        with self.assertRaises(ClaimLostError) as caught:
            slow.finish()
        self.assertIn("taken over by attempt 2", caught.exception.message)
        self.assertEqual(caught.exception.http_status, 503)
        self.assertEqual(self.credits(), [("refund", 700_080, "other", 0)], "only the holder's credit")

    def test_a_careless_host_passing_an_error_back_as_sql(self) -> None:
        event = self.claimed(700_090, 1)
        refusal = self.assert_refused("sql", lambda: event.stage("COMMIT"))
        # The refusal's message and body handed back as the statement: the message is a str that
        # is no statement a credit needs, the body is bytes; both refused as such.
        self.assert_refused("sql", lambda: event.stage(refusal.message), "starts with SQL")
        assert refusal.response_body is not None
        self.assert_refused("sql", lambda: event.stage(refusal.response_body), "not bytes")  # type: ignore[arg-type]
        self.assert_refused("params", lambda: event.stage(CREDIT, refusal), "not ConfigurationError")  # type: ignore
        event.stage("INSERT INTO no_such_table (x) VALUES (?)", [refusal.message])
        event.reply()
        with self.assertRaises(JournalError) as caught:
            event.finish()
        failure = caught.exception
        self.assertEqual(failure.field, "statements[0]")
        self.assertIn("no such table", failure.message)
        # And the finish failure itself, longer, quoting the statement, handed back: refused too.
        self.assert_refused("sql", lambda: event.stage(failure.message, [failure.message]), "starts with STATEMENTS")
        with self.assertRaises(JournalError) as again:
            event.finish()
        self.assertEqual(again.exception.field, "statements[0]", "the first one still fails first")
        event.abandon()
        self.assertEqual(self.outside("SELECT COUNT(*) FROM credits"), [(0,)])
        retry = self.claimed(700_090, 1, attempt=2)
        retry.stage(CREDIT, ["refund", 700_090, "p-9", 0])
        retry.reply()
        retry.finish()
        self.assertEqual(self.credits(), [("refund", 700_090, "p-9", 0)])

    def test_a_staged_statement_costs_one_foreign_call(self) -> None:
        def callback() -> None:
            event = self.receiver.handle(TOKEN, "127.0.0.1", refund(700_100, 1))
            event.begin()
            event.stage(CREDIT, ["refund", 700_100, "p-10", 0])
            event.reply()
            event.finish()

        self.assertEqual(count_calls(callback), {"sp_receiver_handle": 1, "sp_event_begin": 1, "sp_event_stage": 1,
                                                 "sp_event_reply": 1, "sp_event_finish": 1, "sp_event_free": 1})  # fmt: skip
        self.assertEqual(self.credits(), [("refund", 700_100, "p-10", 0)])


if __name__ == "__main__":
    unittest.main()
