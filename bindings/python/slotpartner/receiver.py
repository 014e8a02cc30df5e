"""``Receiver``: authenticates, parses and validates the service's callbacks into typed events."""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from ctypes import c_size_t
from typing import Any

from . import _lib
from .errors import argument_error, bytes_like, check_int, encoded, last_error, wrong_type
from .events import DEFAULT_REPLY_SETTINGS, Event, OtherEvent, ReplySettings, read_event, read_record
from .journal import Journal
from .replies import c_text

_LIB = _lib.lib
_handle = _LIB.sp_receiver_handle
_authenticate = _LIB.sp_receiver_authenticate
_handle_record = _lib.handle_record_unchecked
_parse = _LIB.sp_receiver_parse
_OUT = _lib.OUT
_OTHER = _lib.SP_EVENT_KIND_OTHER
_INVALID_ARGUMENT = _lib.SP_ERR_INVALID_ARGUMENT


def _header(value: object, field: str) -> bytes | None:
    """A header or address as C string bytes. A NUL cannot travel in a C string: it becomes
    0xFF (never valid UTF-8), so that a value with a NUL is refused rather than cut short.
    Anything but None, a str or a bytes-like object (an int, which ``bytes()`` would turn into
    that many NUL bytes, a float, any other object) is refused naming ``field``, as is a str
    that cannot be encoded as UTF-8 (a lone surrogate)."""
    if value is None:
        return None
    if isinstance(value, str):
        data = encoded(value, field)
    else:
        data = bytes_like(value, field, "a str or bytes")
    return data.replace(b"\0", b"\xff") if b"\0" in data else data


def _body(value: object) -> bytes:
    """A body given as another bytes-like object (bytearray, memoryview) as bytes; None, a str
    or an int (which ``bytes()`` would turn into that many NUL bytes) is refused naming ``body``."""
    if value is None or isinstance(value, str):
        raise wrong_type("body", value, "bytes")
    return bytes_like(value, "body")


#: Tokens and remote addresses as C strings, by the str they came as: a service calls from a
#: handful of addresses with one or two tokens, so each is encoded once (up to _MAX_HEADERS of
#: them, then no more are kept).
_HEADERS: dict[str, bytes] = {}
_MAX_HEADERS = 256


def _encoded(value: str, field: str) -> bytes:
    """``_header(value, field)``, kept in ``_HEADERS`` while there is room."""
    data: bytes = _header(value, field)  # type: ignore[assignment]
    if len(_HEADERS) < _MAX_HEADERS:
        _HEADERS[value] = data
    return data


def _request_headers(
    token: object, remote_addr: object, forwarded_for: object
) -> tuple[bytes | None, bytes | None, bytes | None]:
    """The token, remote address and X-Forwarded-For of a request as C strings (see
    ``_header``), for ``Receiver.handle``, ``Receiver.authenticate`` and ``Endpoint.handle``:
    the common cases (a str seen before, bytes without NUL) without a further call."""
    if token.__class__ is str:
        token = _HEADERS.get(token) or _encoded(token, "X-Service-Token")  # type: ignore[arg-type]
    elif token.__class__ is not bytes or b"\0" in token:  # type: ignore[operator]
        token = _header(token, "X-Service-Token")
    if remote_addr.__class__ is str:
        remote_addr = _HEADERS.get(remote_addr) or _encoded(remote_addr, "remote_addr")  # type: ignore[arg-type]
    elif remote_addr.__class__ is not bytes or b"\0" in remote_addr:  # type: ignore[operator]
        remote_addr = _header(remote_addr, "remote_addr")
    forwarded = _header(forwarded_for, "X-Forwarded-For") if forwarded_for is not None else None
    return token, remote_addr, forwarded  # type: ignore[return-value]

#: What a list-valued setting's blanks are trimmed of (the same characters in every binding).
_BLANKS = " \t\r\n\f\v"


def list_setting(value: object, field: str) -> list[str]:
    """The items of a list-valued setting (``tokens``, ``sources``, ``trusted_proxies``).

    ``value`` is one comma-separated string (``"staging, 10.1.2.0/24"``) or an iterable of
    strings (``["staging", "10.1.2.0/24"]``), one item per string; each item is trimmed of
    blanks. Returns ``[]`` for an empty value (a blank string or an empty list), which the
    library refuses for tokens and sources as it does in C and takes as none for trusted
    proxies. Raises ConfigurationError naming ``field`` for a malformed value: an item that is
    empty (a stray comma), not a string, or a list item holding a comma.
    """
    if isinstance(value, str):
        if not value.strip(_BLANKS):
            return []
        items: list[object] = list(value.split(","))
        where = "between commas"
    elif isinstance(value, (bytes, bytearray, memoryview)) or not isinstance(value, Iterable):
        raise argument_error(
            field, f"expected a comma-separated string or a list of strings, got {type(value).__name__}"
        )
    else:
        items = list(value)
        where = "of the list"
        for number, item in enumerate(items, 1):
            if not isinstance(item, str):
                kind = "None" if item is None else type(item).__name__
                raise argument_error(field, f"item {number} of the list is {kind}, not a string")
            if "," in item:
                raise argument_error(field, f"item {number} of the list holds a comma: give one value per item")
    result = []
    for number, item in enumerate(items, 1):
        text = str(item).strip(_BLANKS)
        if not text:
            raise argument_error(field, f"item {number} {where} is empty")
        result.append(text)
    return result


class Receiver(_lib.SharedHandle):
    """A configured callback receiver, immutable and safe to share between threads.

    Create one at start-up and use it for every callback::

        receiver = Receiver("6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f", sources="production")
        event = receiver.handle(token_header, remote_addr, body)

    ``authenticate(token_header, remote_addr)`` checks the source and token alone (before a
    journal is opened: a request refused there never reaches it).

    Every setting but ``tokens`` is optional: None (the default) keeps the library's default,
    shown in brackets. The list-valued settings (``tokens``, ``sources``, ``trusted_proxies``)
    take one comma-separated string or a list of strings, each item trimmed of blanks; an empty
    item (a stray comma), an item that is not a string, or a list item holding a comma is
    refused naming the setting. An empty value (``""``, ``[]``) is refused for ``tokens`` and
    ``sources`` and means none for ``trusted_proxies``.

    Args:
        tokens: the partner token (a UUID), or two during a rotation (``"A, B"`` or
            ``[A, B]``). Required: None is refused (``token: must be a str, not None``, with
            the answer the library gives a NULL token in C: HTTP 500), so that an unset
            variable reports itself. Errors name the field ``token``, as the library's do.
        sources: ``"any"``, or ``staging``, ``production`` (the spec's addresses), IPv4/IPv6
            addresses and CIDR ranges [``"production"``].
        trusted_proxies: addresses and ranges whose ``X-Forwarded-For`` is believed [none; an
            empty value means none too].
        max_body_bytes: the largest body accepted, at least 2 [65536].
        max_depth: the deepest nesting accepted, 1 to 100, the top-level object being 1 [32].
        max_identifier_bytes: the longest identifier or code accepted, at least 1 [256].
        index_field: the name of the service's event index field [``"index"``].
        reject_unknown_events: refuse events other than refund, payout and balance query
            (ValidationError, HTTP 400) instead of passing them through as ``OtherEvent``
            [False].
        balance_wrapper: the balance reply's wrapper key [``"playerBalance"``].
        balance_currency: the balance reply's currency when none is named [``"EUR"``].
        omit_empty_error_message: leave ``errorMessage`` out of successful replies [False].
        strict_index: refuse an event whose index field is present but not a non-negative
            integer (``"42"``, ``-1``, ``1.5``) with a ValidationError naming the field (HTTP 200,
            the event's wrapper, ``success`` false) [False: such an event is handled with
            ``index`` None and ``index_unreadable`` True, the raw value in ``extra``].
        balance_failure_http_status: the HTTP status a refused balance query is answered with
            (``event.reply_http_status`` after ``reply(False, ...)``, and ``http_status`` of a
            balance query refused by validation): 200, or 400 to 599 [500, so that no client
            reads the answer as a wallet]; the body states no balance either way:
            ``{"playerBalance":{"errorMessage":"..."}}``.
        journal: a ``Journal`` that the receiver's deliveries go through (keyword only): its
            events can be claimed with ``event.begin()``, and a body refused by validation whose
            index can be read is recorded as seen and refused (not reported missing). The
            receiver keeps the library's journal open: close the ``Journal`` whenever you like.
            [None: no journal].

    Raises ConfigurationError for an unusable setting (``field`` names it).

    The library's receiver is freed when this object is garbage collected; there is no
    ``close()``, so that ``handle`` needs no lock (a thread inside ``handle`` keeps the object
    alive). Events stay valid after their receiver is gone.
    """

    __slots__ = ("_ptr", "_cptr", "_replies", "_keeps_events", "__weakref__")

    _free = _LIB.sp_receiver_free

    _ptr: int | None
    #: ``_ptr`` as a ``c_void_p``, for the unchecked call of ``handle``.
    _cptr: ctypes.c_void_p
    _replies: ReplySettings
    #: Whether events keep the library's event after ``handle`` (a journal: ``begin`` and
    #: ``finish`` need it), instead of it being freed once the fields are copied out.
    _keeps_events: bool

    def __init__(
        self,
        tokens: str | Iterable[str] | None,
        sources: str | Iterable[str] | None = None,
        trusted_proxies: str | Iterable[str] | None = None,
        max_body_bytes: int | None = None,
        max_depth: int | None = None,
        max_identifier_bytes: int | None = None,
        index_field: str | None = None,
        reject_unknown_events: bool | None = None,
        balance_wrapper: str | None = None,
        balance_currency: str | None = None,
        omit_empty_error_message: bool | None = None,
        strict_index: bool | None = None,
        balance_failure_http_status: int | None = None,
        *,
        journal: Journal | None = None,
    ) -> None:
        self._ptr = None
        self._keeps_events = journal is not None
        if tokens is None:
            raise wrong_type("token", tokens)  # "token: must be a str, not None", HTTP 500 as in C
        # A blank string reaches the library as it is, which refuses it as it does in C.
        token_list = list(list_setting(tokens, "token") or ([tokens] if isinstance(tokens, str) else []))
        source_list = None if sources is None else list_setting(sources, "sources")
        proxy_list = None if trusted_proxies is None else list_setting(trusted_proxies, "trusted_proxies")
        for name, value in (
            ("max_body_bytes", max_body_bytes),
            ("max_depth", max_depth),
            ("max_identifier_bytes", max_identifier_bytes),
        ):
            if value is not None and not 0 <= check_int(value, name) < 2**63:
                raise argument_error(name, f"expected a non-negative integer, got {value}")
        # A uint16_t in C: a larger value would wrap silently (65736 -> 200), so refuse it here.
        if balance_failure_http_status is not None and not (
            0 <= check_int(balance_failure_http_status, "balance_failure_http_status") <= 0xFFFF
        ):
            raise argument_error(
                "balance_failure_http_status",
                f"expected 200 or an error status from 400 to 599, got {balance_failure_http_status}",
            )
        lib = _LIB
        # (setter, value) for each setting given; None keeps the library's default.
        settings: list[tuple[Any, Any]] = [
            (
                lib.sp_receiver_config_set_sources,
                None if source_list is None else c_text(",".join(source_list), "sources"),
            ),
            (
                lib.sp_receiver_config_set_trusted_proxies,
                None if proxy_list is None else c_text(",".join(proxy_list), "trusted_proxies"),
            ),
            (lib.sp_receiver_config_set_max_body_bytes, max_body_bytes),
            (lib.sp_receiver_config_set_max_depth, max_depth),
            (lib.sp_receiver_config_set_max_identifier_bytes, max_identifier_bytes),
            (lib.sp_receiver_config_set_index_field, None if index_field is None else c_text(index_field, "index_field")),
            (lib.sp_receiver_config_set_strict_index, strict_index),
            (lib.sp_receiver_config_set_reject_unknown_events, reject_unknown_events),
            (
                lib.sp_receiver_config_set_balance_wrapper,
                None if balance_wrapper is None else c_text(balance_wrapper, "balance_wrapper"),
            ),
            (
                lib.sp_receiver_config_set_balance_currency,
                None if balance_currency is None else c_text(balance_currency, "balance_currency"),
            ),
            (lib.sp_receiver_config_set_balance_failure_http_status, balance_failure_http_status),
            (lib.sp_receiver_config_set_omit_empty_error_message, omit_empty_error_message),
        ]
        steps: list[tuple[Any, Any]] = [(lib.sp_receiver_config_add_token, c_text(t, "token")) for t in token_list]
        steps += [(setter, value) for setter, value in settings if value is not None]
        if journal is not None:
            if not isinstance(journal, Journal):
                raise argument_error("journal", f"expected a slotpartner.Journal, got {type(journal).__name__}")
            steps.append((lib.sp_receiver_config_set_journal, journal._pointer()))
        config = ctypes.c_void_p()
        if lib.sp_receiver_config_new(ctypes.byref(config)):
            raise last_error(_lib.SP_ERR_INVALID_ARGUMENT)
        try:
            for setter, value in steps:
                status = setter(config, value)
                if status:
                    raise last_error(status)
            receiver = ctypes.c_void_p()
            status = lib.sp_receiver_new(config, ctypes.byref(receiver))
            if status:
                raise last_error(status)
        finally:
            lib.sp_receiver_config_free(config)
        self._ptr = receiver.value
        self._cptr = ctypes.c_void_p(receiver.value)
        defaults = DEFAULT_REPLY_SETTINGS
        self._replies = ReplySettings(
            defaults.balance_wrapper if balance_wrapper is None else balance_wrapper,
            defaults.balance_currency if balance_currency is None else balance_currency,
            defaults.omit_empty_error_message if omit_empty_error_message is None else bool(omit_empty_error_message),
            defaults.balance_failure_http_status
            if balance_failure_http_status is None
            else balance_failure_http_status,
        )

    def handle(
        self,
        token: str | bytes | None,
        remote_addr: str | bytes | None,
        body: bytes,
        forwarded_for: str | bytes | bytearray | memoryview | None = None,
    ) -> Event:
        """Handles one callback: checks the source address, then the token, then parses and
        validates the body. Without a journal, one foreign call (``sp_receiver_handle_record``,
        writing the event into a buffer of this thread's); the fields are copied out of it into
        the returned event, which holds nothing of the library's. With a journal, one call
        (``sp_receiver_handle``) that gives the library's ``sp_event``, kept by the event for
        ``begin()`` (see ``events`` for its lifetime).

        Args:
            token: the ``X-Service-Token`` header, None when absent.
            remote_addr: the peer address (``REMOTE_ADDR``); None when unknown (refused as a
                forbidden source unless the receiver's sources are ``"any"``, which never looks
                at it).
            body: the raw request body.
            forwarded_for: the ``X-Forwarded-For`` header as received, bytes (preferred: pass
                the raw header) or str (encoded as UTF-8); None when absent. Read only when
                ``remote_addr`` is a trusted proxy, ignored unread otherwise; from a trusted
                proxy, a value that is not UTF-8 is refused as a forbidden source (403).

        Raises:
            AuthenticationError: missing or wrong token (HTTP 401; tokens are compared
                case-insensitively), source not allowed (403; also a remote address that is
                not UTF-8 or holds a NUL, unless the sources are ``"any"``).
            ValidationError: the body is refused; ``field`` names the culprit and
                ``http_status``/``response_body`` are the answer to send (HTTP 200 with the
                event's wrapper and ``success:false`` for a known event with invalid fields).
        """
        if body.__class__ is not bytes:
            body = _body(body)
        token, remote_addr, forwarded = _request_headers(token, remote_addr, forwarded_for)
        out = _OUT
        if self._keeps_events:
            status = _handle(self._ptr, token, remote_addr, forwarded, body, len(body), out.pointer_address)
            if status:
                raise last_error(status)
            return read_event(out.pointer.value, self._replies)  # type: ignore[arg-type]
        # Unchecked: each argument has its C type (see _lib.handle_record_unchecked).
        record = out.record_args
        status = _handle_record(
            self._cptr, token, remote_addr, forwarded, body, c_size_t(len(body)), record[0], record[1], record[2]
        )
        if status:
            # Too small a buffer (the size written exceeds it: a stale size never does) is
            # grown to the size needed and the callback handled again: with no journal,
            # handling is free of side effects.
            if status != _INVALID_ARGUMENT or out.size.value <= out.record_capacity:
                raise last_error(status)
            out.grow_record(out.size.value)
            return self.handle(token, remote_addr, body, forwarded)
        event = read_record(record, self._replies)
        if event.__class__ is OtherEvent:
            # No reply is defined for an unknown event: its library event carries the refusal
            # with the library's answer (HTTP 400), so it is read again into one.
            return self.parse(body)
        return event

    def authenticate(
        self,
        token: str | bytes | None,
        remote_addr: str | bytes | None,
        forwarded_for: str | bytes | bytearray | memoryview | None = None,
    ) -> None:
        """Checks the source address, then the token, as ``handle`` does first, without a body:
        nothing is parsed and the receiver's journal is not touched (one foreign call,
        ``sp_receiver_authenticate``). Call it before opening a journal, so that a caller without
        the token never makes the journal connect to its storage; then handle the callback with
        a receiver that has the journal. The arguments are those of ``handle``.

        Raises:
            AuthenticationError: as ``handle`` raises it for the same request: missing or wrong
                token (HTTP 401), source not allowed (403), with the same ``http_status`` and
                ``response_body``.
        """
        token, remote_addr, forwarded = _request_headers(token, remote_addr, forwarded_for)
        status = _authenticate(self._ptr, token, remote_addr, forwarded)
        if status:
            raise last_error(status)

    def parse(self, body: bytes) -> Event:
        """Parses and validates ``body`` without checking source or token (for tools and tests).
        Raises and returns like ``handle``."""
        if body.__class__ is not bytes:
            body = _body(body)
        out = _OUT
        status = _parse(self._ptr, body, len(body), out.pointer_address)
        if status:
            raise last_error(status)
        return read_event(out.pointer.value, self._replies, self._keeps_events)  # type: ignore[arg-type]
