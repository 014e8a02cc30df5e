"""``Recovery``: lost events fetched again from the service, pull-style.

The journal knows which event indexes never arrived (``Journal.missing``). A ``Recovery`` fetches
each of them through the client's fetch operation (``Client(..., fetch_action=...)``), reads it
with the same validation as a callback (not the token and source checks: it came over the
partner's own HTTPS call) and claims it in the receiver's journal, exactly as ``Event.begin``
claims a delivery. Iterating it yields those events, **already claimed**: run the handler,
``event.reply()``, then ``event.finish()``, as for a callback whose ``begin()`` said NEW::

    with slotpartner.Recovery(receiver, client) as recovery:
        for event in recovery:
            with event:
                credit(event)                 # the same handler, the same ledger
                event.reply()
                event.finish()
    report = recovery.report()                # missing, recovered, handled_meanwhile, failures,
                                              # unrecoverable

A missing event that arrives late while the recovery runs is handled once: whichever claims it
first runs the handler, the other finds it done (``handled_meanwhile``, or ``Outcome.DONE`` for
the late delivery). Indexes that could not be fetched are kept in the report with their reason
and tried again by the next recovery.
"""

from __future__ import annotations

import ctypes
import enum
import threading
from dataclasses import dataclass, field
from typing import NamedTuple, NoReturn

from . import _lib
from .client import Client
from .errors import SlotPartnerError, argument_error, error_class, last_error, status_name
from .events import Event, read_claimed_event
from .receiver import Receiver

_LIB = _lib.lib
_MEMORY = _lib.MEMORY
_FAILURE = _lib.RECOVERY_FAILURE
_OUT = _lib.OUT
_next = _LIB.sp_recovery_next

#: The most missing indexes one recovery takes on (the library's limit).
MAX_RECOVERY_LIMIT = _lib.MAX_RECOVERY_LIMIT
#: How many missing indexes a recovery takes on when its ``limit`` is None.
DEFAULT_RECOVERY_LIMIT = 10_000


class RecoveryReason(enum.IntEnum):
    """Why a missing event was not recovered (``sp_recovery_reason``)."""

    #: The service answered 404: it knows no event with this index.
    NOT_FOUND = _lib.SP_RECOVERY_NOT_FOUND
    #: The service could not be reached, timed out, or answered another HTTP error.
    SERVICE = _lib.SP_RECOVERY_SERVICE
    #: The answer or the event in it is not valid: it failed the callback validation (the
    #: message names the field), or carries another index than the one asked for.
    INVALID_EVENT = _lib.SP_RECOVERY_INVALID_EVENT
    #: The journal refused or failed it: the same transaction came before with other content
    #: (a conflict), a worker holds it (a late delivery still running), or the storage failed.
    JOURNAL = _lib.SP_RECOVERY_JOURNAL


class RecoveryFailure(NamedTuple):
    """A missing index that was not recovered: ``(index, reason, status_name, message)``.

    ``status_name`` is the library's status, such as ``SP_ERR_HTTP_STATUS``; ``error_class``
    the exception a call failing with it raises (``ServiceError``); ``message`` names the field
    or the HTTP status (``getEvent: HTTP 500 ...``).
    """

    index: int  # type: ignore[assignment,unused-ignore]  # shadows tuple.index, as the field's name
    reason: RecoveryReason
    status_name: str
    message: str

    @property
    def error_class(self) -> type[SlotPartnerError]:
        """The exception class of ``status_name`` (``ServiceError``, ``TransportError``,
        ``ValidationError``, ``ConflictError``, ``BusyError``, ``JournalError``...)."""
        return error_class(_status_codes().get(self.status_name, _lib.SP_ERR_PANIC))


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What a recovery did so far (``sp_recovery_report``).

    Attributes:
        missing: missing indexes the recovery set out to fetch (at most its ``limit``).
        recovered: events fetched and handed out, claimed.
        handled_meanwhile: events fetched but handled meanwhile by a late delivery (answered
            from the journal), or not journaled: nothing to do.
        failures: the indexes not recovered, in the order tried; a later recovery tries them
            again.
        unrecoverable: missing indexes the recovery left alone because the service answered
            404 for them ``not_found_limit`` runs (``Journal(not_found_limit=...)``); not
            counted in ``missing``. They stay missing until resolved by hand
            (``Journal.resolve``); ``Journal.unrecoverable()`` lists them.
    """

    missing: int
    recovered: int
    handled_meanwhile: int
    failures: list[RecoveryFailure] = field(default_factory=list)
    unrecoverable: int = 0

    @property
    def complete(self) -> bool:
        """True when every missing index was tried and none failed."""
        return not self.failures and self.recovered + self.handled_meanwhile == self.missing


_codes: dict[str, int] = {}


def _status_codes() -> dict[str, int]:
    """``{status name: code}`` for every status the library names."""
    if not _codes:
        for code in range(64):
            _codes.setdefault(status_name(code), code)
    return _codes


class Recovery:
    """A recovery of the events missing from ``receiver``'s journal, fetched through ``client``.

    Args:
        receiver: a ``Receiver`` with a journal (``Receiver(..., journal=...)``): the events are
            validated with its settings and claimed in its journal.
        client: the ``Client`` whose fetch settings (``fetch_action``, ``fetch_index_param``,
            ``fetch_event_key``) say how to fetch an event. It may be closed once the recovery
            is created (the recovery keeps the library's client).
        limit: the most missing indexes this recovery takes on, lowest first, 1 to 1,000,000
            (None: the default, 10,000); the rest wait for the next one.

    Raises:
        ConfigurationError: the receiver has no journal, a closed client, a bad ``limit``.
        JournalError: the journal cannot be read.

    Lists the missing indexes when created and fetches nothing yet. Iterate it (``for event
    in recovery`` or ``next(recovery)``): each step fetches missing indexes one by one, blocking
    (without holding the GIL) for the calls to the service, until one event is recovered, and
    returns it claimed; iteration stops when every index was tried. Each yielded event is
    claimed: run the handler, ``reply()``, then ``finish()`` (or ``abandon()`` after a
    transient failure of your ledger); an event closed or collected unfinished releases its
    claim, and the next recovery fetches it again (as attempt 2: the ledger must refuse a
    second credit of the same ``transactionId``, as for callbacks).

    ``report()`` says what was done so far. ``close()`` (or leaving the ``with`` block) frees
    the library's recovery; ``report()`` still gives the last report afterwards, events handed
    out stay valid, and iterating raises ConfigurationError. One thread at a time (calls from
    several threads are serialized).
    """

    __slots__ = ("_ptr", "_lock", "_replies", "_final", "__weakref__")

    _ptr: int | None
    _final: RecoveryReport | None

    def __init__(self, receiver: Receiver, client: Client, limit: int | None = None) -> None:
        self._ptr = None
        self._lock = threading.Lock()
        self._final = None
        if not isinstance(receiver, Receiver):
            raise argument_error("receiver", f"expected a slotpartner.Receiver, got {type(receiver).__name__}")
        if not isinstance(client, Client):
            raise argument_error("client", f"expected a slotpartner.Client, got {type(client).__name__}")
        if limit is None:
            limit = DEFAULT_RECOVERY_LIMIT
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RECOVERY_LIMIT:
            raise argument_error("limit", f"expected 1 to {MAX_RECOVERY_LIMIT}, got {limit!r}")
        self._replies = receiver._replies
        out = ctypes.c_void_p()
        client_ptr = client._enter()
        try:
            status = _LIB.sp_recovery_new(receiver._ptr, client_ptr, limit, ctypes.byref(out))
        finally:
            client._leave()
        if status:
            raise last_error(status)
        self._ptr = out.value

    def __iter__(self) -> Recovery:
        return self

    def __next__(self) -> Event:
        """The next recovered event, claimed; StopIteration when every missing index was tried.
        Raises ConfigurationError once closed."""
        with self._lock:
            ptr = self._ptr
            if ptr is None:
                raise argument_error("recovery", "is closed")
            out = _OUT
            status = _next(ptr, out.pointer_address)
            if status:
                raise last_error(status)
            event_ptr = out.pointer.value
            if not event_ptr:
                raise StopIteration
        return read_claimed_event(event_ptr, self._replies)

    def report(self) -> RecoveryReport:
        """What the recovery did so far: counts and each failure (one foreign call, copied). After
        ``close()``, the report as it was then."""
        with self._lock:
            ptr = self._ptr
            if ptr is None:
                if self._final is None:
                    raise argument_error("recovery", "is closed")
                return self._final
            return self._report(ptr)

    def _report(self, ptr: int) -> RecoveryReport:
        summary = _lib.sp_recovery_summary()
        status = _LIB.sp_recovery_report(ptr, ctypes.byref(summary))
        if status:
            raise last_error(status)
        failures = []
        count = summary.failures_len
        if count and summary.failures:
            address = summary.failures
            memory = _MEMORY
            for index, reason, code, text, length in _FAILURE.iter_unpack(memory[address : address + count * _FAILURE.size]):
                message = memory[text : text + length].decode() if text else ""
                failures.append(RecoveryFailure(index, RecoveryReason(reason), status_name(code), message))
        return RecoveryReport(
            summary.missing, summary.recovered, summary.handled_meanwhile, failures, summary.unrecoverable
        )

    def close(self) -> None:
        """Frees the library's recovery (idempotent), keeping its last report for ``report()``.
        Events handed out stay valid and claimed until finished."""
        with self._lock:
            ptr, self._ptr = self._ptr, None
            if ptr is None:
                return
            try:
                self._final = self._report(ptr)
            finally:
                _LIB.sp_recovery_free(ptr)

    def __enter__(self) -> Recovery:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self, _free: object = _LIB.sp_recovery_free) -> None:
        ptr = getattr(self, "_ptr", None)
        if ptr is not None:
            self._ptr = None
            _free(ptr)  # type: ignore[operator]

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Recovery cannot be pickled or copied")


__all__ = ["Recovery", "RecoveryFailure", "RecoveryReason", "RecoveryReport", "MAX_RECOVERY_LIMIT"]
