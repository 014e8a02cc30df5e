"""Reply bodies built without an event: ``reply_result`` and ``reply_balance``.

Each builds the exact JSON the service expects through the library (``sp_reply_result_new`` or
``sp_reply_balance_new``, then ``sp_buffer_free``: two foreign calls) and returns it as bytes
the caller owns; a success of ``reply_result`` is built once per wrapper and then reused.
``Event.reply`` uses these when its event's library memory was released (always, for a receiver
without a journal: see ``events``).
"""

from __future__ import annotations

import ctypes

from . import _lib
from .errors import argument_error, check_int, encoded, last_error, wrong_type

_lib_ = _lib.lib
_result_new = _lib_.sp_reply_result_new
_balance_new = _lib_.sp_reply_balance_new
_buffer_free = _lib_.sp_buffer_free
_MEMORY = _lib.MEMORY
_STR = _lib.STR

MAX_AMOUNT = 2**53 - 1


def c_text(value: str, field: str) -> bytes:
    """``value`` as a NUL-terminated C string argument.

    Raises ConfigurationError naming ``field`` when ``value`` is not a str (``must be a str, not
    None``: an optional argument is checked for None by its caller, which then passes NULL) or
    holds a NUL character, which a C string cannot carry (it would silently cut the value short).
    """
    if not isinstance(value, str):
        raise wrong_type(field, value)
    data = encoded(value, field)
    if b"\0" in data:
        raise argument_error(field, "must not contain a NUL character")
    return data


def check_amount(value: int, field: str) -> int:
    """``value`` unchanged when it is an int (a bool, a float, a str, a Decimal or None is
    refused naming ``field``: an amount is never rounded or guessed) that fits an ``int64_t``;
    the library checks the real range."""
    check_int(value, field)
    if not -(2**63) <= value < 2**63:
        raise argument_error(field, f"expected an integer from 0 to {MAX_AMOUNT}, got {value}")
    return value


def _take_buffer(buffer: ctypes.c_void_p) -> bytes:
    """Copies the text of an ``sp_buffer`` and frees the buffer."""
    address = buffer.value
    assert address
    try:
        ptr, length = _STR.unpack(_MEMORY[address : address + _STR.size])
        return _MEMORY[ptr : ptr + length]
    finally:
        _buffer_free(address)


#: The successful result replies built so far, by (wrapper, omit_empty_message): a success
#: reply depends on nothing else, so the library builds each once per process.
_SUCCESSES: dict[tuple[str, bool], bytes] = {}


def reply_result(wrapper: str, success: bool = True, message: str = "", omit_empty_message: bool = False) -> bytes:
    """``{"<wrapper>":{"success":<success>,"errorMessage":"<message>"}}`` as bytes.

    ``message`` must be empty when ``success`` is true and must explain the failure otherwise
    (ConfigurationError if not). With ``omit_empty_message`` a success leaves ``errorMessage``
    out. Works for any wrapper key (``refund``, ``payout``, or one the spec does not show).
    A success reply is built by the library once per wrapper and setting, then reused (no
    foreign call).
    """
    # `success` decides whether money was moved: only True or False, never a truthy "false".
    if not isinstance(success, bool):
        raise wrong_type("success", success, "a bool")
    if success and not message:
        known = _SUCCESSES.get((wrapper, omit_empty_message))
        if known is not None:
            return known
    buffer = ctypes.c_void_p()
    status = _result_new(
        c_text(wrapper, "wrapper"),
        success,
        c_text(message, "message") if message else None,
        omit_empty_message,
        ctypes.byref(buffer),
    )
    if status:
        raise last_error(status)
    data = _take_buffer(buffer)
    if success and len(_SUCCESSES) < 64:
        _SUCCESSES[(wrapper, bool(omit_empty_message))] = data
    return data


def kept_success(wrapper: str, omit_empty_message: bool) -> bytes | None:
    """The success reply ``reply_result`` keeps for ``wrapper`` and ``omit_empty_message`` (what
    it returns for them without a call), None while it keeps none."""
    return _SUCCESSES.get((wrapper, omit_empty_message))


#: Successful balance replies by (wrapper, currency), as two bytes formats of a reply the
#: library built (see ``reply_balance``): one taking ``(money, coins)``, one taking the money
#: of a reply with no coins (the usual one); an empty tuple when that reply could not be split
#: (a wrapper holding the marker digits), so the library builds each.
_BALANCES: dict[tuple[str, str], tuple[bytes, ...]] = {}
_MONEY_MARK, _COINS_MARK = 7_391_846_205_113, 5_208_613_947_331


def _balance_template(wrapper: str, currency: str) -> tuple[bytes, ...]:
    """The library's balance reply for ``wrapper`` and ``currency`` as the formats of
    ``_BALANCES``: its amounts replaced by ``%d`` (or the coins by 0), any ``%`` of its text
    doubled."""
    built = _library_balance(_MONEY_MARK, currency, _COINS_MARK, "", wrapper)
    money, coins = b"%d" % _MONEY_MARK, b"%d" % _COINS_MARK
    if built.count(money) != 1 or built.count(coins) != 1 or built.index(money) > built.index(coins):
        return ()
    head, rest = built.replace(b"%", b"%%").split(money)
    return (head + b"%d" + rest.replace(coins, b"%d"), head + b"%d" + rest.replace(coins, b"0"))


def kept_balance(wrapper: str, currency: str) -> tuple[bytes, ...] | None:
    """The formats ``reply_balance`` keeps for a success with ``wrapper`` and ``currency`` (see
    ``_BALANCES``), None while it keeps none (or cannot)."""
    return _BALANCES.get((wrapper, currency)) or None


def reply_balance(
    money: int,
    currency: str = "EUR",
    coins: int = 0,
    error_message: str = "",
    wrapper: str = "playerBalance",
) -> bytes:
    """``{"<wrapper>":{"money":<money>,"currencyISO4217":"<currency>","coins":<coins>,"errorMessage":""}}``,
    or ``{"<wrapper>":{"errorMessage":"<error_message>"}}`` for a failure.

    An empty ``error_message`` means success: ``money`` is in minor units; ``money`` and
    ``coins`` must be 0 to 2^53-1 and ``currency`` three uppercase letters (ConfigurationError
    otherwise). A non-empty ``error_message`` builds a failure that states no balance (a
    ``"money":0`` could show the player an empty wallet); ``money``, ``currency`` and ``coins``
    are then unused. Send a failure with an error status (a receiver uses its
    ``balance_failure_http_status``, 500 by default).

    A success is built from the library's own reply for the same wrapper and currency, made once
    with marker amounts and kept (no foreign call); amounts of another type or out of range, and
    failures, go to the library every time.
    """
    if not error_message and type(money) is int and type(coins) is int:
        if 0 <= money <= MAX_AMOUNT and 0 <= coins <= MAX_AMOUNT:
            template = _BALANCES.get((wrapper, currency))
            if template is None and len(_BALANCES) < 64:
                template = _BALANCES[(wrapper, currency)] = _balance_template(wrapper, currency)
            if template:
                return template[0] % (money, coins) if coins else template[1] % money
    return _library_balance(money, currency, coins, error_message, wrapper)


def _library_balance(money: int, currency: str, coins: int, error_message: str, wrapper: str) -> bytes:
    """``reply_balance`` built by the library (``sp_reply_balance_new``, ``sp_buffer_free``)."""
    buffer = ctypes.c_void_p()
    status = _balance_new(
        c_text(wrapper, "wrapper"),
        check_amount(money, "money"),
        c_text(currency, "currency"),
        check_amount(coins, "coins"),
        c_text(error_message, "error_message") if error_message else None,
        ctypes.byref(buffer),
    )
    if status:
        raise last_error(status)
    return _take_buffer(buffer)
