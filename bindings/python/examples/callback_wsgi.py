#!/usr/bin/env python3
"""The service's callback endpoint as a WSGI application: gunicorn callback_wsgi:application
(or run it: callback_wsgi.py HOST:PORT serves it on wsgiref). Configured by every setting as
SLOTPARTNER_<SETTING>: SLOTPARTNER_TOKEN, SLOTPARTNER_SOURCES, SLOTPARTNER_TRUSTED_PROXIES,
SLOTPARTNER_JOURNAL... (slotpartner.Endpoint.from_environment); the demo ledger is the SQLite file
SLOTPARTNER_LEDGER."""
import os
import sqlite3
import sys
from contextlib import closing

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # a checkout
import slotpartner  # noqa: E402

LEDGER = os.environ.get("SLOTPARTNER_LEDGER", "ledger.db")
with closing(sqlite3.connect(LEDGER)) as db:  # one row a credit: the key refuses a second one
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS credits (kind TEXT, transaction_id INTEGER, player TEXT,"
               " amount INTEGER NOT NULL, PRIMARY KEY (kind, transaction_id))")  # fmt: skip


def credit(kind: str, event, amount: int) -> None:
    """One transaction: the credit exists with its amount or not at all; a repeat changes nothing."""
    with closing(sqlite3.connect(LEDGER, timeout=10)) as db, db:
        db.execute("INSERT INTO credits VALUES (?, ?, ?, ?) ON CONFLICT (kind, transaction_id) DO NOTHING",
                   (kind, event.transaction_id, player(event), amount))  # fmt: skip


def player(event) -> str:
    return event.player_partner_identifier or event.player_identifier


def logic(event: slotpartner.Event) -> bytes:
    """Runs once a delivery: an exception answers 503 and the service delivers again."""
    if isinstance(event, slotpartner.BuyRefund):
        credit("refund", event, 0)
        return event.reply()
    if isinstance(event, slotpartner.JackpotPayout):
        credit("payout", event, event.money_won)
        return event.reply()
    if player(event) == "unknown-player":  # a balance query (unknown events are refused)
        return event.reply(False, "player unknown-player is not known")  # 500, no balance stated
    with closing(sqlite3.connect(LEDGER, timeout=10)) as db:
        won = db.execute("SELECT coalesce(sum(amount), 0) FROM credits WHERE player = ?", (player(event),))
        return event.reply_balance(100000 + won.fetchone()[0])


endpoint = slotpartner.Endpoint.from_environment(reject_unknown_events=True)
application = slotpartner.wsgi.application(endpoint, logic)

if __name__ == "__main__":
    from wsgiref.simple_server import make_server

    host, _, port = sys.argv[1].rpartition(":")
    with make_server(host, int(port), application) as server:
        print(f"listening http://{host}:{server.server_port}", flush=True)
        server.serve_forever()
