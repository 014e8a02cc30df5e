#!/usr/bin/env python3
"""Cost of one callback through the Python binding, next to what a partner would write instead.

    python3 bindings/python/bench.py [--rounds N] [--quick]

Per event (refund, payout, balance query; the bodies of tests/fixtures), one "callback" is:
authenticate (token, source address), parse and validate the body, read every field of the
event, build the reply bytes. Four ways:

- binding:   Receiver.handle + every attribute read + event.reply()/reply_balance()
             (libslotpartner);
- minimal:   the least a binding with this API can do over ctypes (``minimal_callback``): the
             same one call, the record read at once, the typed event, a kept reply; the floor
             of the binding's own cost;
- hand:      hmac.compare_digest + source set + size limit + json.loads + hand-written checks of
             the same fields (object, event name, required fields, types with bool excluded from
             int, integer ranges, non-empty strings without control characters up to 256 bytes,
             one of the two player ids, currency = three uppercase letters) + json.dumps reply;
- pydantic:  the same authentication + pydantic v2 strict models with the same constraints, in
             the fastest union pydantic offers for them (refund and payout tagged by ``event``,
             then the balance query), ``TypeAdapter.validate_json`` + every attribute read + an
             orjson reply (json.dumps when orjson is not installed); skipped without pydantic.

What the binding checks and the other two do not: duplicate keys, nesting depth, a byte order
mark, lone surrogate escapes, and the exact reply JSON escaping of the library.

Timing: the four run interleaved in rounds (the machine may be shared); each round times a
batch of callbacks. The median round is reported and compared, the fastest round beside it.
FFI crossings are counted by wrapping every library function the binding calls with a counter
for one callback of each kind (not during the timed runs).
"""

from __future__ import annotations

import argparse
import ctypes
import hmac
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import slotpartner  # noqa: E402
from slotpartner import _lib  # noqa: E402

TOKEN = "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f"
TOKEN_BYTES = TOKEN.encode()
REMOTE = "18.203.30.17"
PRODUCTION = frozenset({"18.203.30.17", "18.202.194.158", "18.203.7.167", "34.248.216.129", "18.203.175.80"})
FIXTURES = HERE.parent.parent / "tests" / "fixtures"
MAX_BODY = 65536
MAX_ID = 2**63 - 1
MAX_AMOUNT = 2**53 - 1
BALANCE = 100000


# ---------------------------------------------------------------------------------------------
# 1. The binding.

receiver = slotpartner.Receiver(TOKEN, sources="production")


def binding_callback(token: str | None, remote: str, body: bytes) -> bytes:
    event = receiver.handle(token, remote, body)
    if type(event) is slotpartner.JackpotPayout:
        _ = (event.jackpot_identifier, event.player_identifier, event.player_partner_identifier,
             event.currency_iso4217, event.money_won, event.coins_won, event.is_money,
             event.epoch_released_millis, event.is_primary, event.transaction_id, event.buy_transaction_id,
             event.partner_game_request_identifier, event.game_session_id, event.game_id, event.bonus_code,
             event.is_mobile, event.index, event.extra)  # fmt: skip
        return event.reply()
    if type(event) is slotpartner.BuyRefund:
        _ = (event.game_session_identifier, event.player_identifier, event.player_partner_identifier,
             event.transaction_id, event.buy_transaction_id, event.game_session_id,
             event.partner_game_request_identifier, event.game_id, event.is_mobile, event.bonus_code,
             event.index, event.extra)  # fmt: skip
        return event.reply()
    if type(event) is slotpartner.BalanceQuery:
        _ = (event.player_identifier, event.player_partner_identifier, event.index, event.extra)
        return event.reply_balance(BALANCE)
    return event.reply(False, "unsupported event")


class MinimalRefund:
    """The least a binding with this API can build for a refund (see ``minimal_callback``): the
    binding's attribute names, in slots, set by ``__init__``; no methods, no private state."""

    __slots__ = ("game_session_identifier", "player_identifier", "player_partner_identifier", "transaction_id",
                 "buy_transaction_id", "game_session_id", "partner_game_request_identifier", "game_id", "is_mobile",
                 "bonus_code", "name", "index", "index_unreadable", "extra")  # fmt: skip

    def __init__(self, *values: Any) -> None:
        (self.game_session_identifier, self.player_identifier, self.player_partner_identifier, self.transaction_id,
         self.buy_transaction_id, self.game_session_id, self.partner_game_request_identifier, self.game_id,
         self.is_mobile, self.bonus_code, self.name, self.index, self.index_unreadable, self.extra) = values  # fmt: skip


class MinimalPayout:
    """``MinimalRefund`` for a payout."""

    __slots__ = ("jackpot_identifier", "player_identifier", "player_partner_identifier", "currency_iso4217",
                 "money_won", "coins_won", "is_money", "epoch_released_millis", "is_primary", "transaction_id",
                 "buy_transaction_id", "partner_game_request_identifier", "game_session_id", "game_id", "bonus_code",
                 "is_mobile", "name", "index", "index_unreadable", "extra")  # fmt: skip

    def __init__(self, *values: Any) -> None:
        (self.jackpot_identifier, self.player_identifier, self.player_partner_identifier, self.currency_iso4217,
         self.money_won, self.coins_won, self.is_money, self.epoch_released_millis, self.is_primary,
         self.transaction_id, self.buy_transaction_id, self.partner_game_request_identifier, self.game_session_id,
         self.game_id, self.bonus_code, self.is_mobile, self.name, self.index, self.index_unreadable,
         self.extra) = values  # fmt: skip


class MinimalBalance:
    """``MinimalRefund`` for a balance query."""

    __slots__ = ("player_identifier", "player_partner_identifier", "name", "index", "index_unreadable", "extra")

    def __init__(self, *values: Any) -> None:
        (self.player_identifier, self.player_partner_identifier, self.name, self.index, self.index_unreadable,
         self.extra) = values  # fmt: skip


_REFUND_REPLY = b'{"refund":{"success":true,"errorMessage":""}}'
_PAYOUT_REPLY = b'{"payout":{"success":true,"errorMessage":""}}'
_BALANCE_PARTS = (b'{"playerBalance":{"money":', b',"currencyISO4217":"EUR","coins":', b',"errorMessage":""}}')
_HANDLE_RECORD = _lib.handle_record_unchecked
_UNPACK_RECORD = _lib.RECORD.unpack_from
_MEMORY = _lib.MEMORY
_SIZE_T = ctypes.c_size_t


def minimal_callback(token: str | None, remote: str, body: bytes) -> bytes:
    """The least a binding with this API can do over ctypes, to show the binding's own cost
    against: the library's call into the record buffer (the binding's receiver, buffer and
    unchecked function), its header unpacked and its strings decoded and split once, the typed
    event (``MinimalRefund`` and the others), every attribute read as ``binding_callback`` reads
    them, and a reply kept from an earlier callback (a balance reply completed with the amount).
    No checks of the arguments' types, nothing kept for a failure reply or a journal, no
    Receiver or Event methods in between."""
    record = _lib.OUT.record_args
    status = _HANDLE_RECORD(
        receiver._cptr,  # noqa: SLF001 (the binding's own receiver)
        None if token is None else token.encode(),
        remote.encode(),
        None,
        body,
        _SIZE_T(len(body)),
        record[0],
        record[1],
        record[2],
    )
    if status:
        raise ValueError(f"status {status}")
    (_, length, count, kind, has_index, unreadable, has_mobile, mobile, index, transaction, buy, session, game, money,
     coins, released, is_money, primary) = _UNPACK_RECORD(record[3])  # fmt: skip
    start = record[4]
    s = _MEMORY[start : start + length].decode().split("\0")
    if count == 1:
        extra = {s[6]: s[7]}
    else:
        extra = {}
        for at in range(6, 6 + 2 * count, 2):
            extra[s[at]] = s[at + 1]
    name = s[6 + 2 * count]
    if not has_index:
        index = None
    if kind == _lib.SP_EVENT_KIND_BUY_REFUND:
        refund = MinimalRefund(s[0], s[1] or None, s[2] or None, transaction, buy, session, s[3], game, mobile, s[4] or None,
                               name, index, unreadable, extra)  # fmt: skip
        _ = (refund.game_session_identifier, refund.player_identifier, refund.player_partner_identifier,
             refund.transaction_id, refund.buy_transaction_id, refund.game_session_id,
             refund.partner_game_request_identifier, refund.game_id, refund.is_mobile, refund.bonus_code,
             refund.index, refund.extra)  # fmt: skip
        return _REFUND_REPLY
    if kind == _lib.SP_EVENT_KIND_JACKPOT_PAYOUT:
        payout = MinimalPayout(s[0], s[1] or None, s[2] or None, s[3], money, coins, is_money, released, primary,
                               transaction, buy, s[4], session, game, s[5] or None, mobile if has_mobile else None,
                               name, index, unreadable, extra)  # fmt: skip
        _ = (payout.jackpot_identifier, payout.player_identifier, payout.player_partner_identifier,
             payout.currency_iso4217, payout.money_won, payout.coins_won, payout.is_money,
             payout.epoch_released_millis, payout.is_primary, payout.transaction_id, payout.buy_transaction_id,
             payout.partner_game_request_identifier, payout.game_session_id, payout.game_id, payout.bonus_code,
             payout.is_mobile, payout.index, payout.extra)  # fmt: skip
        return _PAYOUT_REPLY
    balance = MinimalBalance(s[0] or None, s[1] or None, name, index, unreadable, extra)
    _ = (balance.player_identifier, balance.player_partner_identifier, balance.index, balance.extra)
    head, middle, tail = _BALANCE_PARTS
    return b"%s%d%s%d%s" % (head, BALANCE, middle, 0, tail)


# ---------------------------------------------------------------------------------------------
# 2. json.loads and careful hand checks.


class Invalid(Exception):
    pass


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CURRENCY = re.compile(r"[A-Z]{3}\Z")


def _identifier(d: dict[str, Any], key: str, required: bool = True) -> str | None:
    value = d.get(key)
    if value is None:
        if required:
            raise Invalid(f"{key}: required field is missing")
        return None
    if type(value) is not str:
        raise Invalid(f"{key}: expected a string")
    if not value or len(value.encode()) > 256 or _CONTROL.search(value):
        raise Invalid(f"{key}: invalid value")
    return value


def _integer(d: dict[str, Any], key: str, maximum: int = MAX_ID) -> int:
    value = d.get(key)
    if value is None:
        raise Invalid(f"{key}: required field is missing")
    if type(value) is not int or not 0 <= value <= maximum:
        raise Invalid(f"{key}: expected a non-negative integer")
    return value


def _boolean(d: dict[str, Any], key: str, required: bool = True) -> bool | None:
    value = d.get(key)
    if value is None:
        if required:
            raise Invalid(f"{key}: required field is missing")
        return None
    if type(value) is not bool:
        raise Invalid(f"{key}: expected a boolean")
    return value


def _players(d: dict[str, Any]) -> tuple[str | None, str | None]:
    player = _identifier(d, "playerIdentifier", False)
    partner = _identifier(d, "playerPartnerIdentifier", False)
    if player is None and partner is None:
        raise Invalid("playerIdentifier: one of the two player identifiers must be present")
    return player, partner


def hand_callback(token: str | None, remote: str, body: bytes) -> bytes:
    if remote not in PRODUCTION:
        raise Invalid("forbidden source")
    if token is None or not hmac.compare_digest(token.encode(), TOKEN_BYTES):
        raise Invalid("wrong token")
    if len(body) > MAX_BODY:
        raise Invalid("too large")
    d = json.loads(body)
    if type(d) is not dict:
        raise Invalid("not an object")
    event = d.get("event")
    if event == "jackpotPayout":
        jackpot = _identifier(d, "jackpotIdentifier")
        player, partner = _players(d)
        currency = d.get("currencyISO4217")
        if type(currency) is not str or not _CURRENCY.match(currency):
            raise Invalid("currencyISO4217: expected three uppercase letters")
        money = _integer(d, "moneyWon", MAX_AMOUNT)
        _integer(d, "coinsWon", MAX_AMOUNT)
        _boolean(d, "isMoney")
        _integer(d, "epochReleasedMillis")
        primary = _boolean(d, "isPrimary")
        transaction = _integer(d, "transactionId")
        _integer(d, "buyTransactionId")
        _identifier(d, "partnerGameRequestIdentifier")
        _integer(d, "gameSessionId")
        _integer(d, "gameId")
        _identifier(d, "bonusCode", False)
        _boolean(d, "isMobile", False)
        _integer(d, "index") if "index" in d else None
        _ = (partner or player, money, currency, transaction, jackpot, primary)
        return json.dumps({"payout": {"success": True, "errorMessage": ""}}, separators=(",", ":")).encode()
    if event == "gameSessionBuyRefund":
        session = _identifier(d, "gameSessionIdentifier")
        player, partner = _players(d)
        transaction = _integer(d, "transactionId")
        buy = _integer(d, "buyTransactionId")
        _integer(d, "gameSessionId")
        _identifier(d, "partnerGameRequestIdentifier")
        _integer(d, "gameId")
        _boolean(d, "isMobile")
        _identifier(d, "bonusCode", False)
        _integer(d, "index") if "index" in d else None
        _ = (partner or player, transaction, buy, session)
        return json.dumps({"refund": {"success": True, "errorMessage": ""}}, separators=(",", ":")).encode()
    if event is None and d.get("action") == "getPlayerBalance":
        player, partner = _players(d)
        _integer(d, "index") if "index" in d else None
        _ = partner or player
        reply = {"playerBalance": {"money": BALANCE, "currencyISO4217": "EUR", "coins": 0, "errorMessage": ""}}
        return json.dumps(reply, separators=(",", ":")).encode()
    raise Invalid("unknown event")


# ---------------------------------------------------------------------------------------------
# 3. pydantic v2, strict models with the same constraints.


def make_pydantic_callback() -> Callable[[str | None, str, bytes], bytes] | None:
    try:
        import pydantic
        from pydantic import (
            BaseModel,
            ConfigDict,
            Field,
            StrictBool,
            StrictInt,
            StrictStr,
            TypeAdapter,
            model_validator,
        )
    except ImportError:
        return None
    from typing import Annotated, Literal, Optional, Union

    Ident = Annotated[StrictStr, Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f-\x9f]*$")]
    Id = Annotated[StrictInt, Field(ge=0, le=MAX_ID)]
    Amount = Annotated[StrictInt, Field(ge=0, le=MAX_AMOUNT)]

    class Players(BaseModel):
        model_config = ConfigDict(extra="allow", strict=True)
        playerIdentifier: Optional[Ident] = None
        playerPartnerIdentifier: Optional[Ident] = None
        index: Optional[Id] = None

        @model_validator(mode="after")
        def one_player(self) -> "Players":
            if self.playerIdentifier is None and self.playerPartnerIdentifier is None:
                raise ValueError("one of playerIdentifier and playerPartnerIdentifier must be present")
            return self

    class Payout(Players):
        event: Literal["jackpotPayout"]
        jackpotIdentifier: Ident
        currencyISO4217: Annotated[StrictStr, Field(pattern=r"^[A-Z]{3}$")]
        moneyWon: Amount
        coinsWon: Amount
        isMoney: StrictBool
        epochReleasedMillis: Id
        isPrimary: StrictBool
        transactionId: Id
        buyTransactionId: Id
        partnerGameRequestIdentifier: Ident
        gameSessionId: Id
        gameId: Id
        bonusCode: Optional[Ident] = None
        isMobile: Optional[StrictBool] = None

    class Refund(Players):
        event: Literal["gameSessionBuyRefund"]
        gameSessionIdentifier: Ident
        transactionId: Id
        buyTransactionId: Id
        gameSessionId: Id
        partnerGameRequestIdentifier: Ident
        gameId: Id
        isMobile: StrictBool
        bonusCode: Optional[Ident] = None

    class Balance(Players):
        action: Literal["getPlayerBalance"]

    # The fastest reasonable union: refund and payout told apart by their `event` literal (a
    # tagged union pydantic-core resolves without trying both), the balance query (no `event`)
    # tried after it.
    Event = Annotated[
        Union[Annotated[Union[Payout, Refund], Field(discriminator="event")], Balance],
        Field(union_mode="left_to_right"),
    ]
    validate = TypeAdapter(Event).validate_json
    try:
        import orjson

        dumps: Callable[[Any], bytes] = orjson.dumps
        reply_with = f"orjson {orjson.__version__}"
    except ImportError:
        dumps = lambda value: json.dumps(value, separators=(",", ":")).encode()  # noqa: E731
        reply_with = "json.dumps (orjson is not installed)"

    def pydantic_callback(token: str | None, remote: str, body: bytes) -> bytes:
        if remote not in PRODUCTION:
            raise Invalid("forbidden source")
        if token is None or not hmac.compare_digest(token.encode(), TOKEN_BYTES):
            raise Invalid("wrong token")
        if len(body) > MAX_BODY:
            raise Invalid("too large")
        event = validate(body)
        if type(event) is Payout:
            _ = (event.jackpotIdentifier, event.playerIdentifier, event.playerPartnerIdentifier,
                 event.currencyISO4217, event.moneyWon, event.coinsWon, event.isMoney, event.epochReleasedMillis,
                 event.isPrimary, event.transactionId, event.buyTransactionId, event.partnerGameRequestIdentifier,
                 event.gameSessionId, event.gameId, event.bonusCode, event.isMobile, event.index,
                 event.model_extra)  # fmt: skip
            return dumps({"payout": {"success": True, "errorMessage": ""}})
        if type(event) is Refund:
            _ = (event.gameSessionIdentifier, event.playerIdentifier, event.playerPartnerIdentifier,
                 event.transactionId, event.buyTransactionId, event.gameSessionId,
                 event.partnerGameRequestIdentifier, event.gameId, event.isMobile, event.bonusCode, event.index,
                 event.model_extra)  # fmt: skip
            return dumps({"refund": {"success": True, "errorMessage": ""}})
        _ = (event.playerIdentifier, event.playerPartnerIdentifier, event.index, event.model_extra)
        return dumps({"playerBalance": {"money": BALANCE, "currencyISO4217": "EUR", "coins": 0, "errorMessage": ""}})

    pydantic_callback.reply_with = reply_with  # type: ignore[attr-defined]
    pydantic_callback.version = pydantic.VERSION  # type: ignore[attr-defined]
    return pydantic_callback


# ---------------------------------------------------------------------------------------------
# Measuring.


def count_ffi_crossings(body: bytes) -> dict[str, int]:
    """Calls into libslotpartner during one binding callback, by function name."""
    counts: dict[str, int] = {}
    patched: list[tuple[Any, str, Any]] = []

    def counting(name: str, function: Any) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            counts[name] = counts.get(name, 0) + 1
            return function(*args)

        return wrapper

    modules = [sys.modules[m] for m in list(sys.modules) if m.startswith("slotpartner")]
    for module in modules:
        for attribute, value in list(vars(module).items()):
            if isinstance(value, ctypes._CFuncPtr):  # type: ignore[attr-defined]
                patched.append((module, attribute, value))
                setattr(module, attribute, counting(getattr(value, "__name__", attribute), value))
    for name in _lib.SIGNATURES:  # functions reached through the CDLL object (error path)
        patched.append((_lib.lib, name, getattr(_lib.lib, name)))
        setattr(_lib.lib, name, counting(name, getattr(_lib.lib, name)))
    try:
        binding_callback(TOKEN, REMOTE, body)
    finally:
        for owner, attribute, value in patched:
            setattr(owner, attribute, value)
    return counts


def check_same_answers(callbacks: dict[str, Callable[[str | None, str, bytes], bytes]], bodies: dict[str, bytes]) -> None:
    for kind, body in bodies.items():
        answers = {name: json.loads(cb(TOKEN, REMOTE, body)) for name, cb in callbacks.items()}
        if len({json.dumps(a, sort_keys=True) for a in answers.values()}) != 1:
            raise SystemExit(f"bench: the implementations answer {kind} differently: {answers}")
        # And all refuse the same invalid bodies.
        for change in (b'"transactionId":"1","x"', b'"playerIdentifier":7,"x"', b'"moneyWon":1.5,"x"', b'"isMobile":1,"x"'):
            invalid = body.replace(b'"' + change.split(b'"')[1] + b'"', change, 1)
            if invalid == body:
                continue
            for name, cb in callbacks.items():
                try:
                    cb(TOKEN, REMOTE, invalid)
                except (Invalid, slotpartner.SlotPartnerError, ValueError):
                    continue
                raise SystemExit(f"bench: {name} accepted {change!r} in {kind}")


def measure(
    callbacks: dict[str, Callable[[str | None, str, bytes], bytes]], body: bytes, rounds: int, batch: int
) -> dict[str, tuple[float, float]]:
    """(fastest round, median round) in microseconds per callback, interleaved rounds."""
    times: dict[str, list[float]] = {name: [] for name in callbacks}
    for cb in callbacks.values():
        for _ in range(batch):
            cb(TOKEN, REMOTE, body)
    clock = time.perf_counter
    loop = range(batch)
    for _ in range(rounds):
        for name, cb in callbacks.items():
            start = clock()
            for _ in loop:
                cb(TOKEN, REMOTE, body)
            times[name].append((clock() - start) / batch * 1e6)
    return {name: (min(t), statistics.median(t)) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="5 rounds of 500 (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.batch = 5, 500

    bodies = {kind: (FIXTURES / f"{kind}.json").read_bytes() for kind in ("refund", "payout", "balance")}
    callbacks: dict[str, Callable[[str | None, str, bytes], bytes]] = {
        "binding": binding_callback,
        "minimal": minimal_callback,
        "hand": hand_callback,
    }
    pydantic_callback = make_pydantic_callback()
    if pydantic_callback is not None:
        callbacks["pydantic"] = pydantic_callback
    check_same_answers(callbacks, bodies)

    print(f"Python {sys.version.split()[0]}, libslotpartner {slotpartner.library_version} ({slotpartner.library_path})")
    if pydantic_callback is None:
        print("pydantic: not installed, skipped (pip install pydantic to compare)")
    else:
        print(f"pydantic {pydantic_callback.version}, reply by {pydantic_callback.reply_with}")  # type: ignore[attr-defined]
    print(f"{os.cpu_count()} CPUs; {args.rounds} interleaved rounds of {args.batch} callbacks; "
          "µs per callback, median round (fastest round); ratios of medians")  # fmt: skip
    print()
    header = (
        f"{'event':<8} {'body':>5}  {'binding':>15} {'minimal':>15} {'json+checks':>15} {'pydantic':>15}"
        f"  {'bind/hand':>9} {'bind/pyd':>9} {'min/pyd':>9}"
    )
    print(header)
    print("-" * len(header))
    for kind, body in bodies.items():
        result = measure(callbacks, body, args.rounds, args.batch)

        def cell(name: str) -> str:
            if name not in result:
                return f"{'-':>15}"
            best, median = result[name]
            return f"{median:7.2f} ({best:5.2f})"

        bind = result["binding"][1]
        ratio_hand = f"{bind / result['hand'][1]:8.2f}x"
        ratio_pyd = f"{bind / result['pydantic'][1]:8.2f}x" if "pydantic" in result else f"{'-':>9}"
        ratio_min = f"{result['minimal'][1] / result['pydantic'][1]:8.2f}x" if "pydantic" in result else f"{'-':>9}"
        print(
            f"{kind:<8} {len(body):>5}  {cell('binding')} {cell('minimal')} {cell('hand')} {cell('pydantic')}"
            f"  {ratio_hand} {ratio_pyd} {ratio_min}"
        )
    print("minimal: the least a binding with this API can do over ctypes (the call, the record read at once, the")
    print("typed event, every attribute read, a kept reply; see minimal_callback), the floor of the binding's own cost.")
    print()
    for kind, body in bodies.items():
        counts = count_ffi_crossings(body)
        detail = ", ".join(f"{name} {n}" for name, n in counts.items())
        print(f"FFI crossings per {kind} callback: {sum(counts.values())} ({detail})")


if __name__ == "__main__":
    main()
