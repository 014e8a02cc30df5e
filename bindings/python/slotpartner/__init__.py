"""slotpartner: the partner side of the slot-machine game service, on libslotpartner (ctypes).

Callbacks in::

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

Calls out::

    with slotpartner.Client(base_url, token) as client:
        games = client.get_games("en-US")

See README.md for the lifetime of events, threads and how the library is found.
"""

from . import _lib
from .client import Client, Game
from .errors import (
    AuthenticationError,
    ConfigurationError,
    ServiceError,
    SlotPartnerError,
    TransportError,
    ValidationError,
    status_name,
)
from .events import BalanceQuery, BuyRefund, Event, JackpotPayout, OtherEvent
from .receiver import Receiver
from .replies import reply_balance, reply_result

#: The version of the loaded libslotpartner, such as "0.1.0".
library_version: str = _lib.lib.sp_version().decode()
#: The path of the loaded libslotpartner.
library_path: str = _lib.lib._name

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "BalanceQuery",
    "BuyRefund",
    "Client",
    "ConfigurationError",
    "Event",
    "Game",
    "JackpotPayout",
    "OtherEvent",
    "Receiver",
    "ServiceError",
    "SlotPartnerError",
    "TransportError",
    "ValidationError",
    "library_path",
    "library_version",
    "reply_balance",
    "reply_result",
    "status_name",
]
