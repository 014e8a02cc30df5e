"""slotpartner: the partner side of the slot-machine game service, on libslotpartner (ctypes).

The callback endpoint, every answer decided by the library (see README.md, "The endpoint")::

    endpoint = slotpartner.Endpoint.from_environment()  # SLOTPARTNER_TOKEN, SLOTPARTNER_JOURNAL...

    def logic(event):                                   # runs once a delivery, on new ones only
        if isinstance(event, slotpartner.BalanceQuery):
            return event.reply_balance(balance_of(event.player_partner_identifier))
        credit(event)                                   # the ledger: ON CONFLICT DO NOTHING
        return event.reply()

    application = slotpartner.wsgi.application(endpoint, logic)   # or slotpartner.asgi

Step by step, for hosts that need it::

    receiver = slotpartner.Receiver(token, sources="production")
    try:
        event = receiver.handle(token_header, remote_addr, body)
    except slotpartner.SlotPartnerError as error:
        answer(error.http_status, error.response_body)      # 401, 403, 413, 400, or 200 + success:false
    else:
        if isinstance(event, slotpartner.JackpotPayout):
            credit(event.player_partner_identifier, event.money_won)
        reply = event.reply()                                # {"payout":{"success":true,"errorMessage":""}}
        answer(event.reply_http_status, reply)               # 200; 500 for a refused balance query

Exactly once, with a delivery journal (see README.md, "Exactly once")::

    journal = slotpartner.Journal("sqlite:/var/lib/partner/journal.db")
    receiver = slotpartner.Receiver(token, journal=journal)
    event = receiver.handle(token_header, remote_addr, body)  # SlotPartnerError: answer its HTTP answer
    claim = event.begin()             # ConflictError 409, BusyError/JournalError 503
    if claim.outcome is slotpartner.Outcome.DONE:
        answer(200, claim.reply)      # the first reply, byte for byte; run nothing
    else:
        credit(...)                   # the ledger refuses a second credit of a transactionId
        reply = event.reply()
        event.finish()                # stores the reply (a no-op when NOT_JOURNALED)
        answer(event.reply_http_status, reply)

Lost events fetched again (see README.md, "Lost events")::

    with slotpartner.Recovery(receiver, client) as recovery:
        for event in recovery:        # each one already claimed, as after begin() said NEW
            credit(...)
            event.reply()
            event.finish()
    report = recovery.report()        # missing, recovered, handled_meanwhile, failures, unrecoverable

Calls out::

    with slotpartner.Client(base_url, token) as client:
        games = client.get_games("en-US")

See README.md for the lifetime of events, threads and how the library is found.
"""

# First, before any import that can fail on an older Python, and in syntax every Python parses:
# a clear message instead of the first error a newer feature causes. The same version as
# requires-python in pyproject.toml (a test checks they agree).
import sys

REQUIRES_PYTHON = (3, 10)
if tuple(sys.version_info[:2]) < REQUIRES_PYTHON:
    raise ImportError(
        "slotpartner needs Python %d.%d or newer (requires-python >=%d.%d); this is Python %s (%s)"
        % (REQUIRES_PYTHON + REQUIRES_PYTHON + (".".join(str(part) for part in sys.version_info[:3]), sys.executable))
    )

from . import _lib  # noqa: E402 (after the version check)
from . import asgi, wsgi
from .client import Client, Game
from .endpoint import Endpoint, Response
from .errors import (
    AuthenticationError,
    BusyError,
    ClaimLostError,
    ConfigurationError,
    ConflictError,
    JournalError,
    ServiceError,
    SlotPartnerError,
    TransportError,
    ValidationError,
    status_name,
)
from .events import BalanceQuery, BuyRefund, Claim, Event, JackpotPayout, OtherEvent, Outcome, SqlValue
from .journal import Journal, JournalStatus, JournalVitals, PruneReport
from .receiver import Receiver
from .recovery import Recovery, RecoveryFailure, RecoveryReason, RecoveryReport
from .replies import reply_balance, reply_result

#: The version of the loaded libslotpartner, such as "0.1.0".
library_version = _lib.lib.sp_version().decode()
#: The path of the loaded libslotpartner.
library_path = _lib.lib._name

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "BalanceQuery",
    "BusyError",
    "BuyRefund",
    "Claim",
    "ClaimLostError",
    "Client",
    "ConfigurationError",
    "ConflictError",
    "Endpoint",
    "Event",
    "Game",
    "JackpotPayout",
    "Journal",
    "JournalError",
    "JournalStatus",
    "JournalVitals",
    "OtherEvent",
    "Outcome",
    "PruneReport",
    "Receiver",
    "Recovery",
    "RecoveryFailure",
    "RecoveryReason",
    "RecoveryReport",
    "Response",
    "ServiceError",
    "SlotPartnerError",
    "SqlValue",
    "TransportError",
    "ValidationError",
    "asgi",
    "library_path",
    "library_version",
    "reply_balance",
    "reply_result",
    "status_name",
    "wsgi",
]
