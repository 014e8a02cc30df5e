"""``Endpoint``: the whole callback request in one call, every answer decided by the library.

The host hands over the request as its web server saw it (method, ``X-Service-Token``, peer
address, ``X-Forwarded-For``, body) and the partner's ``logic``; it gets back the ``Response`` to
send (status, headers, body) with a line for its log. The library refuses (405, 401, 403, 413,
400, 200 with a field error), answers a repeat from the journal, refuses a conflict (409) and
answers 503 with ``Retry-After`` when the journal or the logic fails; the logic runs only on a
new delivery (and on every balance query, journal down or not).

Three foreign calls a request that runs the logic (``sp_endpoint_receive``,
``sp_exchange_complete``, ``sp_exchange_free``), plus the reply's; two for one answered at once.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from . import _lib
from .errors import ConfigurationError, argument_error, last_error
from .events import DEFAULT_REPLY_SETTINGS, Event, OtherEvent, ReplySettings, detach_exchange_event, read_exchange_event
from .receiver import _HEADERS, _body, _encoded, _header, _request_headers, list_setting

_LIB = _lib.lib
_receive = _LIB.sp_endpoint_receive
_complete = _LIB.sp_exchange_complete
_exchange_free = _LIB.sp_exchange_free
_MEMORY = _lib.MEMORY
_HEADER = _lib.layout(_lib.sp_header).iter_unpack
_HEADER_SIZE = ctypes.sizeof(_lib.sp_header)
_EXCHANGE = _lib.EXCHANGE.unpack
_EXCHANGE_SIZE = _lib.EXCHANGE.size
_OUT = _lib.OUT

#: Where each response's log line goes (when it has one): INFO for a 200, WARNING otherwise.
logger = logging.getLogger("slotpartner")

#: The library's body limit when ``max_body_bytes`` is not given.
DEFAULT_MAX_BODY_BYTES = 65536

#: What the logic is: it gets the event and returns the reply it built (``event.reply()``,
#: ``event.reply_balance(...)``), or for an ``OtherEvent`` the bytes (or str) to send.
Logic = Callable[[Event], Any]

#: The settings given as a list or a comma-separated string (joined for the library).
_LIST_SETTINGS = ("sources", "trusted_proxies")

#: Every setting ``Endpoint.from_environment`` reads, from the variable ``SLOTPARTNER_`` and the
#: key in capitals, with how its text is read: the library's own table (``KEYS`` in
#: src/endpoint/settings.rs, what ``sp_endpoint_from_environment`` reads), in its order, so that
#: the ``SLOTPARTNER_*`` variables mean the same in C, C++, PHP and Python (tests/test_endpoint.py
#: compares the two). ``Text`` is taken as is, ``Switch`` is 1/true/yes/on or 0/false/no/off (any
#: case), ``Number`` an integer, ``Tokens`` comma-separated tokens.
ENVIRONMENT: dict[str, str] = {
    "token": "Tokens",
    "sources": "Text",
    "trusted_proxies": "Text",
    "max_body_bytes": "Number",
    "max_depth": "Number",
    "max_identifier_bytes": "Number",
    "index_field": "Text",
    "strict_index": "Switch",
    "reject_unknown_events": "Switch",
    "balance_wrapper": "Text",
    "balance_currency": "Text",
    "balance_failure_http_status": "Number",
    "omit_empty_error_message": "Switch",
    "journal": "Text",
    "lease_ms": "Number",
    "busy_wait_ms": "Number",
    "durable": "Switch",
    "claim_at_finish": "Switch",
    "first_index": "Number",
    "max_reply_bytes": "Number",
    "lock_timeout_ms": "Number",
    "command_timeout_ms": "Number",
    "max_index_jump": "Number",
    "not_found_limit": "Number",
    "retention_ms": "Number",
    "retry_after": "Number",
    "optimistic": "Switch",
}

#: The spellings of a switch (lower case) and what they mean, as the library reads them.
_SWITCHES = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}

#: What a variable's text is trimmed of: Unicode's White_Space, as Rust's ``str::trim`` (the
#: library's) trims it; ``str.strip()`` alone would take U+001C to U+001F too.
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"

#: An integer as Rust's ``i64`` parse reads it: a sign, then ASCII digits.
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)

#: Added to the message of a refused token when no token was given at all.
_TOKEN_HINT = " (is SLOTPARTNER_TOKEN set?)"


def settings_from_environment(environ: Mapping[str, str] | None = None, **settings: Any) -> dict[str, Any]:
    """``settings`` with every setting of ``ENVIRONMENT`` they do not hold (a setting given, None
    included, wins: its variable is not read) read from its variable ``SLOTPARTNER_<KEY>`` in
    ``environ`` (by default ``os.environ``), by the library's rules (``sp_endpoint_from_environment``
    in include/slotpartner.h): the text is trimmed of white space; unset or empty leaves the
    setting out (the library's default); ``Text`` is taken as is; a ``Switch`` is ``1``, ``true``,
    ``yes``, ``on`` or ``0``, ``false``, ``no``, ``off`` (any case); a ``Number`` is an integer (a
    sign, then digits, within 64 bits); ``SLOTPARTNER_TOKEN`` is a list of the comma-separated
    tokens, each trimmed. Raises ConfigurationError naming the variable whose text cannot be read
    (not UTF-8, a switch or number of another spelling)."""
    env = os.environ if environ is None else environ
    for key, kind in ENVIRONMENT.items():
        if key in settings:
            continue
        name = f"SLOTPARTNER_{key.upper()}"
        raw = env.get(name)
        if not raw:
            continue
        text = raw.strip(_WHITE_SPACE)
        if not text.isascii():
            try:
                text.encode("utf-8")  # os.environ holds bytes that are not UTF-8 as lone surrogates
            except UnicodeEncodeError:
                raise argument_error(name, "is not UTF-8") from None
        if not text:
            continue
        value: Any = text
        if kind == "Tokens":
            value = [token.strip(_WHITE_SPACE) for token in text.split(",")]
        elif kind == "Switch":
            value = _SWITCHES.get(text.lower()) if text.isascii() else None
            if value is None:
                raise argument_error(name, f"expected 1 or 0 (true or false), got {_quoted(text)}")
        elif kind == "Number":
            value = int(text) if _INTEGER.fullmatch(text) else None
            if value is None or not -(2**63) <= value < 2**63:
                raise argument_error(name, f"expected an integer, got {_quoted(text)}")
        settings[key] = value
    return settings


def _quoted(text: str) -> str:
    """``text`` in double quotes, for a refusal's message."""
    return json.dumps(text, ensure_ascii=False)


class Response(NamedTuple):
    """What to send: ``status``, ``headers`` (``Content-Type`` always, ``Retry-After`` on a 503,
    ``Allow`` on a 405; add ``Content-Length`` yourself), ``body``; and ``log``, a line for the
    host's log only (never sent), empty when there is nothing to say."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    log: str


class Endpoint(_lib.SharedHandle):
    """A callback endpoint: the receiver's settings and, optionally, the delivery journal (opened
    by the first request that needs it and kept for the endpoint's life). Make one per process at
    start-up and share it between threads.

    ``settings`` are the library's, by name (``sp_endpoint_from_settings``): ``token`` (a str, or
    a list of two during a rotation; required), ``sources``, ``trusted_proxies`` (a
    comma-separated str or a list), ``max_body_bytes``, ``max_depth``, ``max_identifier_bytes``,
    ``index_field``, ``strict_index``, ``reject_unknown_events``, ``balance_wrapper``,
    ``balance_currency``, ``balance_failure_http_status``, ``omit_empty_error_message``,
    ``journal`` (``sqlite:PATH`` or ``postgres://...``; None for none), ``lease_ms``,
    ``busy_wait_ms``, ``durable``, ``claim_at_finish``, ``first_index``, ``max_reply_bytes``,
    ``lock_timeout_ms``, ``command_timeout_ms``, ``max_index_jump``, ``not_found_limit``,
    ``retention_ms``, ``retry_after`` (the 503's ``Retry-After``, seconds). A setting left out, or
    None, keeps the library's default. An unknown setting or a value of the wrong type is refused
    naming it (ConfigurationError).

    ``shared=True`` gives the process's one endpoint for these settings (``sp_endpoint_shared``),
    for hosts that make the endpoint again and again; the default makes a fresh one.
    """

    __slots__ = ("_ptr", "_replies", "max_body_bytes", "__weakref__")

    _free = _LIB.sp_endpoint_free

    _ptr: int | None
    _replies: ReplySettings
    #: The largest body accepted: a host reads at most one byte more (so that 413 can be told).
    max_body_bytes: int

    def __init__(self, *, shared: bool = False, **settings: Any) -> None:
        self._ptr = None
        given = {name: value for name, value in settings.items() if value is not None}
        for name in _LIST_SETTINGS:
            if name in given:
                given[name] = ",".join(list_setting(given[name], name))
        token = given.get("token")
        if token is not None and not isinstance(token, str):
            given["token"] = list_setting(token, "token")
        try:
            text = json.dumps(given).encode()
        except (TypeError, ValueError) as error:
            raise argument_error("settings", f"must be JSON values: {error}") from None
        out = ctypes.c_void_p()
        make = _LIB.sp_endpoint_shared if shared else _LIB.sp_endpoint_from_settings
        status = make(text, len(text), ctypes.byref(out))
        if status:
            raise last_error(status)
        self._ptr = out.value
        defaults = DEFAULT_REPLY_SETTINGS
        self._replies = ReplySettings(
            given.get("balance_wrapper", defaults.balance_wrapper),
            given.get("balance_currency", defaults.balance_currency),
            bool(given.get("omit_empty_error_message", defaults.omit_empty_error_message)),
            given.get("balance_failure_http_status", defaults.balance_failure_http_status),
        )
        self.max_body_bytes = given.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **settings: Any) -> Endpoint:
        """An endpoint configured from the environment (``environ``, by default ``os.environ``):
        every setting, from ``SLOTPARTNER_<SETTING>`` (``SLOTPARTNER_TOKEN``,
        ``SLOTPARTNER_SOURCES``, ``SLOTPARTNER_JOURNAL``, ``SLOTPARTNER_REJECT_UNKNOWN_EVENTS``...),
        read as ``sp_endpoint_from_environment`` reads them (see ``settings_from_environment``).
        ``settings`` add to them and win. Raises ConfigurationError naming the variable whose
        text cannot be read, or the setting the library refuses; with no token at all, its
        message ends with `` (is SLOTPARTNER_TOKEN set?)``."""
        found = settings_from_environment(environ, **settings)
        try:
            return cls(**found)
        except ConfigurationError as error:
            if error.field == "token" and found.get("token") is None:
                error.message += _TOKEN_HINT
                error.args = (error.message,)
            raise

    def handle(
        self,
        method: str,
        token: str | bytes | None,
        remote_addr: str | bytes | None,
        forwarded_for: str | bytes | None,
        body: bytes,
        logic: Logic,
    ) -> Response:
        """Answers one request. ``method`` is the HTTP method; ``token`` and ``forwarded_for``
        the ``X-Service-Token`` and ``X-Forwarded-For`` headers (None when absent; bytes as
        received, preferably); ``remote_addr`` the peer's address; ``body`` at most
        ``max_body_bytes`` + 1 bytes of the body.

        ``logic(event)`` runs only when the library says so (a new refund or payout, a balance
        query, an other event), with the typed event (``BuyRefund``, ``JackpotPayout``,
        ``BalanceQuery``, ``OtherEvent``). It builds the reply with ``event.reply(...)`` or
        ``event.reply_balance(...)``, and may stage the ledger's credit with ``event.stage(...)``
        (run in the journal's transaction that stores the reply); the reply last built is sent
        with its status. For an ``OtherEvent`` it returns the bytes (or str) to send, with 200
        (anything else it returns is its failure, 503).
        An exception from the logic (an ``Exception``) is its failure: the claim is released and
        the answer is 503 with ``Retry-After``, so that the service delivers again; it is logged
        with its traceback, never raised. The event is the endpoint's: keep nothing of its
        library side after the logic (its fields stay readable).

        The response's log line goes to the ``slotpartner`` logger (INFO for a 200, WARNING
        otherwise). Raises ConfigurationError only for arguments of the wrong type.
        """
        if body.__class__ is not bytes:
            body = _body(body)
        # A str seen before without a further call, as the headers (_request_headers).
        if method.__class__ is str:
            method = _HEADERS.get(method) or _encoded(method, "method")
        else:
            method = _header(method, "method")
        token, remote_addr, forwarded = _request_headers(token, remote_addr, forwarded_for)
        out = _OUT
        status = _receive(self._ptr, method, token, remote_addr, forwarded, body, len(body), out.pointer_address)
        if status:
            raise last_error(status)
        # The exchange's address, read before the logic runs (which may use this thread's slots).
        exchange: int = out.pointer.value  # type: ignore[assignment]
        failure = None
        try:
            fields = _EXCHANGE(_MEMORY[exchange : exchange + _EXCHANGE_SIZE])
            if fields[0]:  # the event: the logic runs, then the response is final
                failure = self._run(exchange, fields[0], logic)
                fields = _EXCHANGE(_MEMORY[exchange : exchange + _EXCHANGE_SIZE])
            response = _read(fields)
        finally:
            _exchange_free(exchange)
        if response.log:
            level = logging.INFO if response.status == 200 else logging.WARNING
            logger.log(level, "%s", response.log, exc_info=failure)
        return response

    def _run(self, exchange: int, ptr: int, logic: Logic) -> BaseException | None:
        """Runs ``logic`` on the exchange's event and completes the exchange; returns the
        logic's exception, if any (its failure, for the log)."""
        event = read_exchange_event(ptr, self._replies)
        failure: BaseException | None = None
        why = reply = None
        try:
            try:
                result = logic(event)
            except Exception as error:  # the logic's failure: 503, the delivery comes again
                failure = error
                why = f"{type(error).__name__}: {error}".replace("\0", " ").encode("utf-8", "replace")
            else:
                if event.__class__ is OtherEvent and result is not None:
                    if isinstance(result, (bytes, bytearray, memoryview, str)):
                        reply = result.encode() if isinstance(result, str) else bytes(result)
                    else:  # bytes() would make an int that many NUL bytes, and raise on a dict
                        kind = type(result).__name__
                        why = f"the logic returned {kind} for the event {event.name}, not the bytes or str to send"
                        why = why.replace("\0", " ").encode("utf-8", "replace")
        finally:
            detach_exchange_event(event)
        status = _complete(exchange, why, reply, 0 if reply is None else len(reply))
        if status:
            raise last_error(status)
        return failure


def _read(fields: tuple[int, ...]) -> Response:
    """Copies an exchange's final response out of library memory; ``fields`` are the
    ``sp_exchange``'s, unpacked (``_lib.EXCHANGE``)."""
    _, status, body, body_len, start, count, log, log_len = fields
    memory = _MEMORY
    headers = []
    if count:
        for name, name_len, value, value_len in _HEADER(memory[start : start + count * _HEADER_SIZE]):
            headers.append((memory[name : name + name_len].decode(), memory[value : value + value_len].decode()))
    return Response(
        status,
        headers,
        memory[body : body + body_len] if body_len else b"",
        memory[log : log + log_len].decode("utf-8", "replace") if log_len else "",
    )


def header_list(values: Iterable[bytes]) -> bytes | None:
    """Several lines of one header as one value (joined with ``, ``, as HTTP reads them); None
    when there are none."""
    values = list(values)
    if not values:
        return None
    return values[0] if len(values) == 1 else b", ".join(values)


__all__ = ["DEFAULT_MAX_BODY_BYTES", "ENVIRONMENT", "Endpoint", "Logic", "Response", "logger", "settings_from_environment"]
