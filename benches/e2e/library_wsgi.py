"""library_wsgi: bindings/python/examples/callback_wsgi.py as make bench-e2e runs it under gunicorn.

The example's own application (``make_app``: the source and token checked first, the journal
opened once per process, each refund and payout claimed, handled and finished) with its
business logic, ``handle_event``, replaced by the same logic crediting a ledger table in the
journal's own database (one row per credit, ``INSERT ... ON CONFLICT DO NOTHING`` keyed by kind
and transactionId, its own transaction) instead of the example's directory of files, and
without the demo's line per event on stderr (refusals and failures are still logged).

Environment: SLOTPARTNER_TOKEN, SLOTPARTNER_SOURCES, SLOTPARTNER_JOURNAL as for the example;
E2E_LEDGER: ``sqlite:PATH`` (the journal's file) or a libpq connection string (the journal's
database), used with sqlite3 or psycopg.
"""

from __future__ import annotations

import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python", "examples"))
import callback_wsgi  # noqa: E402
from callback_wsgi import LedgerDown, slotpartner  # noqa: E402

LEDGER = os.environ.get("E2E_LEDGER", "")
CREDIT = "INSERT INTO credits (kind, transaction_id, player, amount) VALUES ({0}, {0}, {0}, {0}) ON CONFLICT DO NOTHING"
_local = threading.local()


def _connection():
    connection = getattr(_local, "connection", None)
    if connection is None:
        if LEDGER.startswith("sqlite:"):
            import sqlite3

            connection = sqlite3.connect(LEDGER[len("sqlite:") :], timeout=5, isolation_level=None)
            connection.execute("PRAGMA synchronous = FULL")
        else:
            import psycopg

            connection = psycopg.connect(LEDGER, autocommit=True)
        _local.connection = connection
    return connection


def credit(kind: str, transaction_id: int, player: str, amount: int) -> None:
    """One ledger row per credit; a second credit of the same transaction changes nothing."""
    sqlite = LEDGER.startswith("sqlite:")
    try:
        _connection().execute(CREDIT.format("?" if sqlite else "%s"), (kind, transaction_id, player, amount))
    except Exception as error:  # sqlite3.Error, psycopg.Error: a transient failure of the ledger
        _local.connection = None
        raise LedgerDown(str(error)) from error


def handle_event(event: slotpartner.Event, wallet: str | None = None) -> bytes:
    """The example's business logic, crediting through the ledger table."""
    if isinstance(event, slotpartner.BuyRefund):
        credit("refund", event.transaction_id, event.player_partner_identifier or event.player_identifier, 0)
        return event.reply()
    if isinstance(event, slotpartner.JackpotPayout):
        player = event.player_partner_identifier or event.player_identifier
        credit("payout", event.transaction_id, player, event.money_won)
        return event.reply()
    if isinstance(event, slotpartner.BalanceQuery):
        player = event.player_partner_identifier or event.player_identifier
        if player == "unknown-player":
            return event.reply(False, "player unknown-player is not known")
        return event.reply_balance(100000)
    return event.reply(False, "unsupported event")


_DEMO_LINES = ("repeated delivery answered from the journal", "index ")


def log(line: str) -> None:
    if not line.startswith(_DEMO_LINES):
        sys.stderr.write(f"library_wsgi: {line}\n")


callback_wsgi.handle_event = handle_event
callback_wsgi.log = log
application = callback_wsgi.make_app(os.environ)
