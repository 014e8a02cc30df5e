"""library_wsgi: bindings/python/examples/callback_wsgi.py as make bench-e2e runs it under gunicorn.

The example's own application (``make_app``: the source and token checked first, the journal
opened once per process, each refund and payout claimed, handled and finished) with its
business logic, ``handle_event``, replaced by the same logic crediting a ledger table in the
journal's own database, and without the demo's line per event on stderr (refusals and failures
are still logged).

The credit (one row per credit in ``credits``, keyed by kind and transactionId) is not written
through a connection of this module's: it is staged on the claimed event (``Event.stage``) and
run by the journal inside the transaction that stores the reply, after the claim is confirmed
this worker's, so that the credit and the reply commit together, with one durable commit, or
not at all. ``handle_event`` finishes the event itself: when that fails (a staged statement or
the journal's storage, JournalError; the claim taken over, ClaimLostError: no statement ran) it
raises the example's LedgerDown, on which the example abandons the claim (after a takeover the
abandon is refused and logged: the claim is another delivery's) and answers 503 with the
ledger-unavailable body and ``Retry-After``; after a successful finish the example's own
``finish()`` has nothing left to do. A balance query reads no ledger and stages nothing.

Since everything the logic does is staged, the journal is opened with ``claim_at_finish=True``:
the claim is written by ``finish()`` with the credit and the reply, one commit a delivery; two
deliveries of one key at once both run the logic, and the second finish credits nothing: it
returns when the first stored the very same reply, else raises ClaimLostError (LedgerDown, 503).

Environment: SLOTPARTNER_TOKEN, SLOTPARTNER_SOURCES, SLOTPARTNER_JOURNAL as for the example;
SLOTPARTNER_JOURNAL is required and names the ledger's database too: ``postgres://...`` (the
statement's placeholders ``$1..$4``) or ``sqlite:PATH`` (``?``). The ``credits`` table is made
beside the journal by ``db.php library`` (run.py).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python", "examples"))
import callback_wsgi  # noqa: E402
from callback_wsgi import LedgerDown, slotpartner  # noqa: E402

JOURNAL = os.environ.get("SLOTPARTNER_JOURNAL", "")
# The credit is a no-op on a credit made before (the README: a statement that ended the
# journal's transaction never credits twice).
NO_SECOND_CREDIT = " ON CONFLICT (kind, transaction_id) DO NOTHING"
if JOURNAL.startswith("postgres"):
    CREDIT = "INSERT INTO credits (kind, transaction_id, player, amount) VALUES ($1, $2, $3, $4)" + NO_SECOND_CREDIT
elif JOURNAL.startswith("sqlite:"):
    CREDIT = "INSERT INTO credits (kind, transaction_id, player, amount) VALUES (?, ?, ?, ?)" + NO_SECOND_CREDIT
else:
    raise RuntimeError(
        "library_wsgi: SLOTPARTNER_JOURNAL must name the journal (postgres://... or sqlite:PATH), "
        f"whose database holds the ledger's credits table; got {JOURNAL!r}"
    )

_UNAVAILABLE = (slotpartner.JournalError, slotpartner.ClaimLostError)


def credit(
    event: slotpartner.Event, kind: str, transaction_id: int, player: str | None, amount: int, reply: bytes
) -> bytes:
    """Stages the ledger's row for the claimed ``event`` and finishes it: the row and the stored
    reply (``reply``, built already) commit together. Raises LedgerDown (503, the claim abandoned
    by the example) when the finish fails: nothing was credited and nothing stored."""
    event.stage(CREDIT, (kind, transaction_id, player, amount))
    try:
        event.finish()
    except _UNAVAILABLE as error:
        raise LedgerDown(f"{error.status_name}: {error.message}") from error
    return reply


def handle_event(event: slotpartner.Event, wallet: str | None = None) -> bytes:
    """The example's business logic, crediting through the ledger table in the journal's
    transaction."""
    if isinstance(event, slotpartner.BuyRefund):
        player = event.player_partner_identifier or event.player_identifier
        return credit(event, "refund", event.transaction_id, player, 0, event.reply())
    if isinstance(event, slotpartner.JackpotPayout):
        player = event.player_partner_identifier or event.player_identifier
        return credit(event, "payout", event.transaction_id, player, event.money_won, event.reply())
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
application = callback_wsgi.make_app(os.environ, claim_at_finish=True)
