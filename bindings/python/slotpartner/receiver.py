"""``Receiver``: authenticates, parses and validates the service's callbacks into typed events."""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from typing import Any

from . import _lib
from .errors import argument_error, last_error
from .events import Event, ReplySettings, read_event
from .journal import Journal
from .replies import c_text

_LIB = _lib.lib
_handle = _LIB.sp_receiver_handle
_parse = _LIB.sp_receiver_parse
_OUT = _lib.OUT


def _header(value: str | bytes | bytearray | memoryview | None) -> bytes | None:
    """A header or address as C string bytes. A NUL cannot travel in a C string: it becomes
    0xFF (never valid UTF-8), so that a value with a NUL is refused rather than cut short."""
    if value is None:
        return None
    data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
    return data.replace(b"\0", b"\xff") if b"\0" in data else data


class Receiver(_lib.SharedHandle):
    """A configured callback receiver, immutable and safe to share between threads.

    Create one at start-up and use it for every callback::

        receiver = Receiver("6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f", sources="production")
        event = receiver.handle(token_header, remote_addr, body)

    Args:
        tokens: the partner token (a UUID), or up to two of them during a rotation (None is
            refused like a NULL token in C, so that an unset variable reports itself).
        sources: ``"any"``, or a comma-separated list of ``staging``, ``production`` (the spec's
            addresses), IPv4/IPv6 addresses and CIDR ranges.
        trusted_proxies: comma-separated addresses and ranges whose ``X-Forwarded-For`` is
            believed (empty: never).
        max_body_bytes, max_depth, max_identifier_bytes: limits (64 KiB, 32 levels, 256 bytes).
        index_field: the name of the service's event index field (default ``"index"``).
        strict_index: refuse an event whose index field is present but not a non-negative
            integer (``"42"``, ``-1``, ``1.5``) with a ValidationError naming the field (HTTP 200,
            the event's wrapper, ``success`` false). Default False: such an event is handled
            with ``index`` None and ``index_unreadable`` True, the raw value in ``extra``.
        reject_unknown_events: refuse events other than refund, payout and balance query
            (ValidationError, HTTP 400) instead of passing them through as ``OtherEvent``.
        balance_wrapper, balance_currency: the balance reply's wrapper key and default currency
            (``"playerBalance"``, ``"EUR"``).
        balance_failure_http_status: the HTTP status a refused balance query is answered with
            (``event.reply_http_status`` after ``reply(False, ...)``, and ``http_status`` of a
            balance query refused by validation): 200, or 400 to 599. Default 500, so that no
            client reads the answer as a wallet; the body states no balance either way:
            ``{"playerBalance":{"errorMessage":"..."}}``.
        omit_empty_error_message: leave ``errorMessage`` out of successful replies.
        journal: a ``Journal`` that the receiver's deliveries go through (keyword only): its
            events can be claimed with ``event.begin()``, and a body refused by validation whose
            index can be read is recorded as seen and refused (not reported missing). The
            receiver keeps the library's journal open: close the ``Journal`` whenever you like.
            Default None: no journal.

    Raises ConfigurationError for an unusable setting (``field`` names it).

    The library's receiver is freed when this object is garbage collected; there is no
    ``close()``, so that ``handle`` needs no lock (a thread inside ``handle`` keeps the object
    alive). Events stay valid after their receiver is gone.
    """

    __slots__ = ("_ptr", "_replies", "__weakref__")

    _free = _LIB.sp_receiver_free

    _ptr: int | None
    _replies: ReplySettings

    def __init__(
        self,
        tokens: str | Iterable[str] | None,
        sources: str = "production",
        trusted_proxies: str = "",
        max_body_bytes: int = 65536,
        max_depth: int = 32,
        max_identifier_bytes: int = 256,
        index_field: str = "index",
        reject_unknown_events: bool = False,
        balance_wrapper: str = "playerBalance",
        balance_currency: str = "EUR",
        omit_empty_error_message: bool = False,
        strict_index: bool = False,
        balance_failure_http_status: int = 500,
        *,
        journal: Journal | None = None,
    ) -> None:
        self._ptr = None
        token_list: list[str | None] = [tokens] if tokens is None or isinstance(tokens, str) else list(tokens)
        for name, value in (
            ("max_body_bytes", max_body_bytes),
            ("max_depth", max_depth),
            ("max_identifier_bytes", max_identifier_bytes),
        ):
            if not 0 <= value < 2**63:
                raise argument_error(name, f"expected a non-negative integer, got {value}")
        # A uint16_t in C: a larger value would wrap silently (65736 -> 200), so refuse it here.
        if not 0 <= balance_failure_http_status <= 0xFFFF:
            raise argument_error(
                "balance_failure_http_status",
                f"expected 200 or an error status from 400 to 599, got {balance_failure_http_status}",
            )
        lib = _LIB
        config = ctypes.c_void_p()
        if lib.sp_receiver_config_new(ctypes.byref(config)):
            raise last_error(_lib.SP_ERR_INVALID_ARGUMENT)
        try:
            steps: list[tuple[Any, Any]] = [(lib.sp_receiver_config_add_token, c_text(t, "token")) for t in token_list]
            steps += [
                (lib.sp_receiver_config_set_sources, c_text(sources, "sources")),
                (lib.sp_receiver_config_set_trusted_proxies, c_text(trusted_proxies, "trusted_proxies")),
                (lib.sp_receiver_config_set_max_body_bytes, max_body_bytes),
                (lib.sp_receiver_config_set_max_depth, max_depth),
                (lib.sp_receiver_config_set_max_identifier_bytes, max_identifier_bytes),
                (lib.sp_receiver_config_set_index_field, c_text(index_field, "index_field")),
                (lib.sp_receiver_config_set_strict_index, strict_index),
                (lib.sp_receiver_config_set_reject_unknown_events, reject_unknown_events),
                (lib.sp_receiver_config_set_balance_wrapper, c_text(balance_wrapper, "balance_wrapper")),
                (lib.sp_receiver_config_set_balance_currency, c_text(balance_currency, "balance_currency")),
                (lib.sp_receiver_config_set_balance_failure_http_status, balance_failure_http_status),
                (lib.sp_receiver_config_set_omit_empty_error_message, omit_empty_error_message),
            ]
            if journal is not None:
                if not isinstance(journal, Journal):
                    raise argument_error("journal", f"expected a slotpartner.Journal, got {type(journal).__name__}")
                steps.append((lib.sp_receiver_config_set_journal, journal._pointer()))
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
        self._replies = ReplySettings(
            balance_wrapper, balance_currency, omit_empty_error_message, balance_failure_http_status
        )

    def handle(
        self,
        token: str | bytes | None,
        remote_addr: str | bytes | None,
        body: bytes,
        forwarded_for: str | bytes | bytearray | memoryview | None = None,
    ) -> Event:
        """Handles one callback: checks the source address, then the token, then parses and
        validates the body. One foreign call (``sp_receiver_handle``); the fields are copied
        into the returned event (see ``events`` for its lifetime).

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
            body = bytes(body)
        # The common cases (str or bytes without NUL) inline, anything else through _header.
        if token.__class__ is str:
            token = token.encode("utf-8", "surrogateescape")
        if token.__class__ is not bytes or b"\0" in token:
            token = _header(token)
        if remote_addr.__class__ is str:
            remote_addr = remote_addr.encode("utf-8", "surrogateescape")
        if remote_addr.__class__ is not bytes or b"\0" in remote_addr:
            remote_addr = _header(remote_addr)
        out = _OUT
        status = _handle(
            self._ptr,
            token,
            remote_addr,
            _header(forwarded_for) if forwarded_for is not None else None,
            body,
            len(body),
            out.pointer_address,
        )
        if status:
            raise last_error(status)
        return read_event(out.pointer.value, self._replies)  # type: ignore[arg-type]  # set on success

    def parse(self, body: bytes) -> Event:
        """Parses and validates ``body`` without checking source or token (for tools and tests).
        Raises and returns like ``handle``."""
        if body.__class__ is not bytes:
            body = bytes(body)
        out = _OUT
        status = _parse(self._ptr, body, len(body), out.pointer_address)
        if status:
            raise last_error(status)
        return read_event(out.pointer.value, self._replies)  # type: ignore[arg-type]  # set on success

