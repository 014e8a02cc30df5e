"""One exception hierarchy for every failure the library reports.

========================  ==========================================  ===========================
Exception                 ``status`` (``sp_status``)                  Raised by
========================  ==========================================  ===========================
``ConfigurationError``    1 (an unusable setting or argument)         configuration, replies
``ValidationError``       3-13 (body, field, unknown event)           ``Receiver.handle/parse``
``AuthenticationError``   14-16 (token missing/wrong, source)         ``Receiver.handle``
``TransportError``        17-19, 22 (connect, time-out, TLS, size)    ``Client``
``ServiceError``          20-21 (HTTP status, bad response)           ``Client``
``ConflictError``         23 (same transactionId, other content)      ``Event.begin``
``JournalError``          24 (the journal's storage failed)           ``Journal``, ``Event.begin``
                                                                      ``/finish/abandon``
``ClaimLostError``        25 (the claim abandoned or taken over)      ``Event.finish/abandon``
``BusyError``             26 (another worker holds the claim)         ``Event.begin``
``SlotPartnerError``      2 (the library panicked), unknown codes     anything
========================  ==========================================  ===========================

Every error carries the library's ``status`` and its ``status_name``, the ``field`` it names
(``jackpotPayout.moneyWon``; empty when none) and the ``message``. Errors the library reported
also carry ``http_status`` and ``response_body``: the answer an HTTP endpoint should give for
the failure, such as 401 with a JSON error body for a wrong token, 200 with
``{"payout":{"success":false,...}}`` for a payout whose fields are invalid, or 500 (the
receiver's ``balance_failure_http_status``) with ``{"playerBalance":{"errorMessage":"..."}}``
for a balance query whose fields are invalid; 409 for a conflict, 503 for the other journal
failures (the service delivers again later). A refused callback body also names, as far as
the body let them be read, the event (``event_name``), its ``index`` and its
``transaction_id``, so that the refused delivery can be logged. All of it is read in one call
(``sp_last_error``).
"""

from __future__ import annotations

import ctypes
import json

from . import _lib

_names: dict[int, str] = {}


def status_name(status: int) -> str:
    """The library's name of a status code, such as ``SP_ERR_WRONG_TYPE``."""
    name = _names.get(status)
    if name is None:
        raw = _lib.lib.sp_status_name(status) if -(2**31) <= status < 2**31 else None
        name = _names[status] = raw.decode() if raw else "SP_ERR_INVALID_ARGUMENT"
    return name


class SlotPartnerError(Exception):
    """A failure reported by libslotpartner (or found by the binding before calling it).

    Attributes:
        status: the ``sp_status`` code (``SP_ERR_PANIC`` = 2 and unknown codes raise this class).
        status_name: its name, such as ``SP_ERR_WRONG_TOKEN``.
        field: the field concerned (``jackpotPayout.moneyWon``, ``X-Service-Token``, a setting);
            empty when the failure concerns no single field.
        message: a sentence naming field and problem.
        http_status: the HTTP status an endpoint should answer with, or None when the failure
            did not come from the library.
        response_body: the JSON body to answer with (bytes), or None like ``http_status``.
        event_name: for a refused callback body, the ``event`` (or ``action``) value as far as
            the body let it be read; None when it could not be, and for other failures.
        index: the refused event's index when the body carried a readable one (a non-negative
            integer), else None.
        transaction_id: the refused event's ``transactionId`` when the body carried a readable
            one, else None.
    """

    status: int
    field: str
    message: str
    http_status: int | None
    response_body: bytes | None
    event_name: str | None
    index: int | None
    transaction_id: int | None

    def __init__(
        self,
        status: int,
        field: str,
        message: str,
        *,
        http_status: int | None = None,
        response_body: bytes | None = None,
        event_name: str | None = None,
        index: int | None = None,
        transaction_id: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.message = message
        self.http_status = http_status
        self.response_body = response_body
        self.event_name = event_name
        self.index = index
        self.transaction_id = transaction_id

    @property
    def status_name(self) -> str:
        return status_name(self.status)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status} {self.status_name}, field={self.field!r}, "
            f"message={self.message!r}, http_status={self.http_status!r})"
        )


class ConfigurationError(SlotPartnerError):
    """Status 1 (``SP_ERR_INVALID_ARGUMENT``): an unusable setting, or an unusable argument
    (a reply message given with success, a negative balance, a string with a NUL inside)."""


class ValidationError(SlotPartnerError):
    """Statuses 3-13: the callback body is too large, not UTF-8 or JSON, repeats a key, nests too
    deep, is not an object, misses or mistypes a field, holds a value out of range or an invalid
    string, or names an event the receiver refuses. ``field`` names the culprit."""


class AuthenticationError(SlotPartnerError):
    """Statuses 14-16: the ``X-Service-Token`` header is missing or wrong (HTTP 401), or the
    source address is not allowed (HTTP 403)."""


class TransportError(SlotPartnerError):
    """Statuses 17-19 and 22: the service could not be reached, a time-out elapsed, the TLS
    handshake failed, or the answer was larger than the client's limit."""


class ServiceError(SlotPartnerError):
    """Statuses 20-21: the service answered with an HTTP status other than 200 (the message
    holds the status and the start of the body), or with a body of the wrong shape."""


class ConflictError(SlotPartnerError):
    """Status 23 (``SP_ERR_CONFLICT``): the journal holds this delivery's key (the event's name
    and ``transactionId``) with other content. The first delivery stays and this one is refused:
    answer ``http_status`` 409 with ``response_body``. The message names the ``transactionId``
    and the fields that differ; log it, something upstream is wrong."""


class JournalError(SlotPartnerError):
    """Status 24 (``SP_ERR_JOURNAL``): the journal's storage failed (PostgreSQL unreachable, a
    read-only or corrupt SQLite file, an unknown schema version, a full disk). Answer
    ``http_status`` 503 so that the service delivers again later."""


class ClaimLostError(SlotPartnerError):
    """Status 25 (``SP_ERR_CLAIM_LOST``): the claim is no longer this worker's: it was abandoned
    (``finish`` after ``abandon``: "the claim was abandoned"), or its lease expired and another
    attempt took it over ("taken over by attempt N"); nothing was stored. Raised again by every
    later ``finish`` of that event, and after a takeover by every ``abandon`` too. Raised by
    ``finish`` after a takeover, the partner's work was done: send the reply all the same (the
    other delivery finds the credit in the ledger)."""


class BusyError(SlotPartnerError):
    """Status 26 (``SP_ERR_BUSY``): another worker holds a live claim on this delivery and did
    not finish within the journal's busy wait. Answer ``http_status`` 503 so that the service
    delivers again later."""


_JOURNAL_CLASSES: dict[int, type[SlotPartnerError]] = {
    23: ConflictError,
    24: JournalError,
    25: ClaimLostError,
    26: BusyError,
}


def error_class(status: int) -> type[SlotPartnerError]:
    """The exception class of a status code."""
    if status == 1:
        return ConfigurationError
    if 3 <= status <= 13:
        return ValidationError
    if 14 <= status <= 16:
        return AuthenticationError
    if 17 <= status <= 19 or status == 22:
        return TransportError
    if status in (20, 21):
        return ServiceError
    return _JOURNAL_CLASSES.get(status, SlotPartnerError)


def _text(view: _lib.sp_str) -> str | None:
    """The str an ``sp_str`` views, None when absent."""
    return _lib.read_str(view.ptr, view.len) if view.ptr else None


def last_error(status: int) -> SlotPartnerError:
    """The calling thread's last failure as an exception; call it right after the failing call.

    Reads ``sp_last_error`` (one foreign call, on the failure path only) and copies everything
    at once: the library's views are valid only until the thread's next status-returning call.
    """
    error = _lib.sp_error()
    if _lib.lib.sp_last_error(ctypes.byref(error)) != _lib.SP_OK:  # no failure recorded
        return error_class(status)(status, "", status_name(status))
    body = error.response_body
    return error_class(status)(
        status,
        _text(error.field) or "",
        _text(error.message) or "",
        http_status=error.http_status,
        response_body=_lib.MEMORY[body.ptr : body.ptr + body.len] if body.ptr else None,
        event_name=_text(error.event_name),
        index=error.index if error.has_index else None,
        transaction_id=error.transaction_id if error.has_transaction_id else None,
    )


#: What the caller is told of a configuration error, as the library tells it.
MISCONFIGURED = "the partner is misconfigured; its log says how"


def _invalid_argument(field: str, message: str) -> ConfigurationError:
    """A status-1 error found by the binding before calling the library, with the answer the
    library gives a bad argument (HTTP 500, an ``invalid_argument`` JSON body saying only that
    the partner is misconfigured: the setting and its problem are for the log, never the
    caller), so that an endpoint answers it as it answers any refused setting (``http_status``
    is never None)."""
    body = {"error": {"code": "invalid_argument", "field": "", "message": MISCONFIGURED}}
    return ConfigurationError(
        _lib.SP_ERR_INVALID_ARGUMENT,
        field,
        message,
        http_status=500,
        response_body=json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"),
    )


def argument_error(field: str, problem: str) -> ConfigurationError:
    """``<field>: <problem>``: a status-1 error found by the binding before calling the library,
    with the library's answer to a bad argument (HTTP 500, an ``invalid_argument`` body)."""
    return _invalid_argument(field, f"{field}: {problem}")


def wrong_type(field: str, value: object, expected: str = "a str") -> ConfigurationError:
    """``<field>: must be a str, not None`` (or ``not int``...): an argument of another type,
    found by the binding where C would be handed NULL or nothing usable. It carries the answer
    the library gives a NULL string in C (HTTP 500, an ``invalid_argument`` JSON body)."""
    message = f"{field}: must be {expected}, not {'None' if value is None else type(value).__name__}"
    return _invalid_argument(field, message)


def encoded(value: str, field: str) -> bytes:
    """``value`` as UTF-8 (surrogate escapes kept as the bytes they stand for); a str that
    cannot be encoded (a lone surrogate such as ``"\\ud800"``) is refused naming ``field``."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as error:
        raise argument_error(field, f"cannot be encoded as UTF-8 ({error.reason} at position {error.start})") from None


def check_int(value: object, field: str) -> int:
    """``value`` when it is an int; anything else (a bool, a float, a str, None) is refused
    naming ``field``, rather than being rounded, guessed or failing inside ctypes."""
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise wrong_type(field, value, "an int")
    return value  # type: ignore[return-value]


def bytes_like(value: object, field: str, expected: str = "bytes") -> bytes:
    """A bytes-like ``value`` (bytes, bytearray, memoryview...) as bytes; anything else (an int,
    which ``bytes()`` would turn into that many NUL bytes, a str, None) is refused naming
    ``field``."""
    if value.__class__ is bytes:
        return value  # type: ignore[return-value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    try:
        with memoryview(value) as view:  # type: ignore[arg-type]
            return view.tobytes()
    except TypeError:
        raise wrong_type(field, value, expected) from None
