"""library_wsgi: the library's endpoint as make bench-e2e runs it under gunicorn.

slotpartner.wsgi.application around Endpoint.from_environment() (SLOTPARTNER_TOKEN,
SLOTPARTNER_SOURCES, SLOTPARTNER_JOURNAL), its logic the example's business logic with the credit
staged into the ledger table of the journal's own database (``credits``, made beside the journal
by ``db.php library``, run.py): the journal runs it in the transaction that stores the reply, so
the credit and the reply commit together, with one durable commit, or not at all. Everything the
logic does is staged, so the journal is opened with ``claim_at_finish``: one commit a delivery;
``ON CONFLICT (kind, transaction_id) DO NOTHING`` keeps a second run of a delivery from failing on
the key. SLOTPARTNER_JOURNAL is required: ``postgres://...`` or ``sqlite:PATH``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))
import slotpartner  # noqa: E402

if not os.environ.get("SLOTPARTNER_JOURNAL", "").startswith(("postgres", "sqlite:")):
    raise RuntimeError("library_wsgi: SLOTPARTNER_JOURNAL must name the journal (postgres://... or sqlite:PATH)")
CREDIT = ("INSERT INTO credits (kind, transaction_id, player, amount) VALUES ($1, $2, $3, $4)"
          " ON CONFLICT (kind, transaction_id) DO NOTHING")  # fmt: skip


def logic(event: slotpartner.Event) -> bytes:
    player = event.player_partner_identifier or event.player_identifier
    if isinstance(event, slotpartner.BuyRefund):
        event.stage(CREDIT, ("refund", event.transaction_id, player, 0))
        return event.reply()
    if isinstance(event, slotpartner.JackpotPayout):
        event.stage(CREDIT, ("payout", event.transaction_id, player, event.money_won))
        return event.reply()
    if player == "unknown-player":
        return event.reply(False, "player unknown-player is not known")
    return event.reply_balance(100000)


endpoint = slotpartner.Endpoint.from_environment(reject_unknown_events=True, claim_at_finish=True, optimistic=True)
application = slotpartner.wsgi.application(endpoint, logic)
