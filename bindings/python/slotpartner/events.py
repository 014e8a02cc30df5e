"""Typed callback events: ``BuyRefund``, ``JackpotPayout``, ``BalanceQuery`` and ``OtherEvent``.

Lifetime. ``Receiver.handle`` returns an event whose fields are already plain Python objects.
Without a journal, the library writes the event into a buffer of the calling thread's
(``sp_receiver_handle_record``: one foreign call, nothing to free) and the fields are copied
out of it (``read_record``); ``reply()`` or ``reply_balance()`` builds the answer with the
standalone builders (``replies``), which keep the library's success replies (a balance reply as
the parts around its amounts) and reuse them: such a callback costs that one foreign call. A
failure reply costs two more (``sp_reply_*_new``, ``sp_buffer_free``). An unknown event is read
again into the library's ``sp_event`` (``sp_receiver_parse``), which it keeps: its refusal to
reply carries the library's answer (HTTP 400).

With a journal (``Receiver(..., journal=...)``), ``begin()`` claims the event first. A claimed
event (outcome NEW) keeps its ``sp_event`` after ``reply()``, since the journal stores the reply
built inside it: ``finish()`` stores it (``sp_event_finish``) and then frees the ``sp_event``,
``abandon()`` releases the claim (``sp_event_abandon``), keeps the library's refusal to finish
it (``sp_event_finish``: ClaimLostError, "the claim was abandoned") and frees it. A claim found
taken over by another delivery (ClaimLostError from ``finish()`` or ``abandon()``) frees it too.
Either way the event remembers: a later ``finish()`` raises that ClaimLostError again, every
time, and so does a later ``abandon()`` of a claim taken over (of an abandoned one it does
nothing), as the library answers. A journaled callback thus
costs five foreign calls: handle, begin, reply, finish, free; a repeat answered from the journal
three (handle, begin, free: ``begin()`` copies the stored reply and frees at once); a balance
query (NOT_JOURNALED) four (handle, begin, reply, free). A delivery claimed again (attempt 2
and on) costs two more, ``sp_event_differing`` and ``sp_event_reply_pruned``, for
``Claim.differing`` and ``Claim.reply_pruned``. Each statement staged on a claimed event
(``stage()``: the ledger's credit, run by ``finish()`` in the transaction that stores the reply)
costs one more (``sp_event_stage``).

When no reply is built, the ``sp_event`` is freed by ``close()``, by leaving a ``with`` block,
or at the latest when the event object is garbage collected (``_Owned``): nothing leaks. Freeing
a claimed event that was neither finished nor abandoned releases its claim, as ``abandon()``
does: the next delivery runs the logic again. A reply asked for after the ``sp_event`` is gone
is rebuilt with the standalone builders (``replies.reply_result``/``reply_balance``), with the
same result and the same ``reply_http_status`` (the receiver's ``balance_failure_http_status``
for a refused balance query, kept in the event's ``ReplySettings``).

An event belongs to one thread at a time (like ``sp_event``): do not reply to the same event
from two threads at once. The fields are snapshots: treat them as read-only.
"""

from __future__ import annotations

import ctypes
import enum
from collections.abc import Sequence
from ctypes import c_uint16
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, TypeVar

from . import _lib
from .errors import (
    ClaimLostError,
    SlotPartnerError,
    ValidationError,
    argument_error,
    bytes_like,
    last_error,
    wrong_type,
)
from .replies import MAX_AMOUNT, c_text, check_amount, kept_balance, kept_success, reply_balance, reply_result

_LIB = _lib.lib
_event_reply = _LIB.sp_event_reply
_event_reply_balance = _LIB.sp_event_reply_balance
_event_free = _LIB.sp_event_free
_event_begin = _LIB.sp_event_begin
_event_differing = _LIB.sp_event_differing
_event_reply_pruned = _LIB.sp_event_reply_pruned
_event_finish = _LIB.sp_event_finish
_event_abandon = _LIB.sp_event_abandon
_event_stage = _LIB.sp_event_stage
_SQL_INT = _lib.SP_SQL_INT
_SQL_TEXT = _lib.SP_SQL_TEXT
_SQL_BLOB = _lib.SP_SQL_BLOB
_SQL_NULL_VALUE = (_lib.SP_SQL_NULL, 0, None, 0)
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_OUT = _lib.OUT
_STATUS_OFFSET = _lib.REPLY_HTTP_STATUS_OFFSET
_u16_at = c_uint16.from_address


#: A parameter of a staged statement (``Event.stage``): SQL ``NULL``, a 64-bit integer, UTF-8
#: text, or bytes (a blob, ``bytea``).
SqlValue = int | str | bytes | bytearray | memoryview | None


class ReplySettings(NamedTuple):
    """The receiver settings a reply depends on (kept by each event for rebuilt replies)."""

    balance_wrapper: str = "playerBalance"
    balance_currency: str = "EUR"
    omit_empty_error_message: bool = False
    balance_failure_http_status: int = 500


DEFAULT_REPLY_SETTINGS = ReplySettings()

#: The formats ``reply_balance`` keeps for a success in the settings' own wrapper and currency
#: (``replies.kept_balance``), by reply settings: a balance query without a library event
#: answers in its receiver's currency with one lookup and one ``%``.
_BALANCE_FORMATS: dict[ReplySettings, tuple[bytes, ...]] = {}

#: The success replies ``reply_result`` keeps, by event class and ``omit_empty_error_message``:
#: a refund or payout without a library event answers success with one lookup. Filled by
#: ``Event._rebuild_result`` for the classes in ``_KEEPS_SUCCESSES`` only (set below them), so
#: that no other class, nor a subclass with a ``_rebuild_reply`` of its own, is answered from it.
_KEPT_SUCCESSES: dict[tuple[type, bool], bytes] = {}


class Outcome(enum.IntEnum):
    """What ``Event.begin`` found (``sp_begin``)."""

    #: The delivery is this worker's: run the partner's logic, build the reply, then
    #: ``event.finish()`` (or ``event.abandon()`` after a transient failure, and answer 503).
    NEW = _lib.SP_BEGIN_NEW
    #: The delivery was handled before: send ``claim.reply`` (byte for byte the first reply)
    #: with HTTP 200 and run nothing.
    DONE = _lib.SP_BEGIN_DONE
    #: Not answered from the journal (a balance query, which must be current; an unknown event
    #: without an index): run the logic and send its reply; its index was recorded.
    NOT_JOURNALED = _lib.SP_BEGIN_NOT_JOURNALED


@dataclass(frozen=True, slots=True)
class Claim:
    """The answer of ``Event.begin``.

    Attributes:
        outcome: NEW, DONE or NOT_JOURNALED.
        attempt: for NEW, 1 the first time, 2 and on after a worker died (its lease expired)
            or abandoned it: from 2 on the partner's logic may have run before, so its ledger
            must refuse a second credit for the same ``transactionId``. 0 otherwise.
        reply: for DONE, the reply stored the first time (bytes, to send with HTTP 200);
            None otherwise.
        differing: for NEW from attempt 2 on, the decisive fields in which this delivery
            differs from the earlier one that was never finished (abandoned, or its worker
            died), one ``"field: first X, now Y"`` each (``"moneyWon: first 100, now 250"``):
            such a resend is handed out as new rather than refused, since nothing was stored
            for the first, and the journal records the conflict for the operator; log it.
            Empty when none, and always on attempt 1 (read with ``sp_event_differing`` only
            from attempt 2 on).
        reply_pruned: for NEW from attempt 2 on, True when this delivery was handled before,
            longer ago than the journal keeps replies (``Journal.prune`` or its ``retention``
            compacted it): the stored reply is gone and the same decisive content was seen. The
            ledger, keyed by ``transactionId``, decides, exactly as after a crash between its
            commit and ``finish()``: answer what it says of that transaction, and log it (a
            repeat this late is rare). False otherwise (read with ``sp_event_reply_pruned`` only
            from attempt 2 on).
    """

    outcome: Outcome
    attempt: int = 0
    reply: bytes | None = None
    differing: tuple[str, ...] = ()
    reply_pruned: bool = False

    @property
    def new(self) -> bool:
        """True when the logic must run (outcome NEW)."""
        return self.outcome is Outcome.NEW


def _differing(ptr: int) -> tuple[str, ...]:
    """The claimed ``sp_event``'s differing decisive fields (``sp_event_differing``), copied."""
    out = _OUT
    status = _event_differing(ptr, out.text_address)
    if status:
        raise last_error(status)
    text: bytes | None = out.text.ptr
    return tuple(text.decode().split("\n")) if text else ()


_NOT_JOURNALED = Claim(Outcome.NOT_JOURNALED)
_NEW = Outcome.NEW
_DONE = Outcome.DONE
_CLAIM_LOST = _lib.SP_ERR_CLAIM_LOST

# Event._journal: where the event stands with the journal.
_NOT_BEGUN = 0  # begin() not called (or no journal): reply() frees the sp_event
_CLAIMED = 1  # begin() said NEW: the sp_event lives until finish()/abandon()/close()
_SETTLED = 2  # DONE, NOT_JOURNALED or finished: finish() and abandon() do nothing
_NO_JOURNAL = 3  # the receiver has no journal: the sp_event was freed once the fields were read
_ABANDONED = 4  # abandoned: finish() raises Event._refusal (ClaimLostError), abandon() does nothing
_LOST = 5  # the claim was found taken over: finish() and abandon() raise Event._refusal
# Handed to the logic by an Endpoint (read_exchange_event): the exchange owns the sp_event and
# frees it; reply() and stage() use it, claiming and finishing are the endpoint's.
_EXCHANGED = 6


def _endpoints_step(step: str) -> SlotPartnerError:
    """Why ``begin``/``finish``/``abandon`` are refused on an event an Endpoint handed to the
    logic (field ``event``)."""
    return argument_error(
        "event", f"{step}() is its Endpoint's: the logic returns the reply, and the endpoint claims and stores it"
    )


def _out_of_range(at: int, value: int) -> SlotPartnerError:
    return argument_error(
        f"params[{at}]",
        f"{value} does not fit a 64-bit integer ({_INT64_MIN} to {_INT64_MAX}); "
        "pass a larger number as a str for a numeric column",
    )


def _unencodable(field: str, error: UnicodeEncodeError) -> SlotPartnerError:
    return argument_error(field, f"cannot be encoded as UTF-8 ({error.reason} at position {error.start})")


def _sql_value(value: object, at: int) -> tuple[int, int, bytes | None, int]:
    """The ``sp_sql_value`` of parameter ``at`` as ``(kind, int_value, bytes, len)``: None, an
    int (a subclass too, not a bool) in the 64-bit range, a str (encoded as UTF-8) or a bytes-like
    object; anything else (a bool, a float...) is refused naming ``params[at]``. The exact types
    are looked at first: this runs once per parameter of every staged statement."""
    kind = value.__class__
    if value is None:
        return _SQL_NULL_VALUE
    if kind is bytes:
        return (_SQL_BLOB, 0, value, len(value))  # type: ignore[arg-type]
    if isinstance(value, int) and kind is not bool:
        number = int(value)
        if not _INT64_MIN <= number <= _INT64_MAX:
            raise _out_of_range(at, number)
        return (_SQL_INT, number, None, 0)
    if isinstance(value, str):
        try:
            text = str.encode(value)
        except UnicodeEncodeError as error:
            raise _unencodable(f"params[{at}]", error) from None
        return (_SQL_TEXT, 0, text, len(text))
    field = f"params[{at}]"
    if kind is bool:
        raise argument_error(field, "must be None, an int, a str or bytes, not bool: pass 1 or 0 for an integer column")
    if isinstance(value, (float, complex)):
        raise wrong_type(field, value, "None, an int, a str or bytes (an amount is an int in minor units)")
    data = bytes_like(value, field, "None, an int, a str or bytes")
    return (_SQL_BLOB, 0, data, len(data))


class _Owned:
    """The ``sp_event`` an event keeps (``Event._owned``): freed by ``free()``, or at the latest
    when its event is collected, and this object with it. Apart from the event, so that the
    events that keep none (a refund, payout or balance query of a receiver without a journal)
    have no finalizer to run."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr: int | None = ptr

    def free(self) -> None:
        ptr = self.ptr
        if ptr is not None:
            self.ptr = None
            _event_free(ptr)

    def __del__(self, _free: Any = _event_free) -> None:
        try:
            ptr = self.ptr
        except AttributeError:  # __init__ did not finish
            return
        if ptr is not None:
            self.ptr = None
            _free(ptr)


_E = TypeVar("_E", bound="Event")


class Event:
    """A validated callback event. Subclasses add the fields of their event.

    Attributes:
        name: the ``event`` value (``action`` for the balance query and other actions).
        index: the service's consecutive event index (a non-negative integer), or None when
            the body has none or its value is unreadable (see ``index_unreadable``).
        index_unreadable: True when the body has the index field but its value is not a
            non-negative integer (``"42"``, ``-1``, ``1.5``): the event is handled anyway, with
            ``index`` None, and the raw value is in ``extra``. Never True when the receiver is
            configured with ``strict_index=True``, which refuses such events instead.
        extra: the fields the spec does not define for this event, name to raw JSON text,
            in body order (the index among them, as the library reports it).
        reply_http_status: the HTTP status to send the last reply built for this event with:
            200, except for a refused balance query (``reply(False, ...)`` on a
            ``BalanceQuery``), which gets the receiver's ``balance_failure_http_status``
            (500 by default). 0 until a reply is built. Not part of equality or copies.
    """

    __slots__ = (
        "name",
        "index",
        "index_unreadable",
        "extra",
        "reply_http_status",
        "_ptr",
        "_owned",
        "_replies",
        "_journal",
        "_refusal",
    )
    _fields: ClassVar[tuple[str, ...]] = ()

    name: str
    index: int | None
    index_unreadable: bool
    extra: dict[str, str]
    reply_http_status: int
    _ptr: int | None
    #: The owner of ``_ptr`` (``read_event``), which frees it when the event is collected; set
    #: only on an event that kept its library event, so that the others need no finalizer.
    _owned: _Owned
    _replies: ReplySettings
    _journal: int
    #: For an abandoned or lost claim (``_ABANDONED``, ``_LOST``): the ClaimLostError that
    #: ``finish()`` (and for a lost one ``abandon()``) raises from then on; unset otherwise.
    _refusal: SlotPartnerError

    def reply(self, success: bool = True, message: str = "") -> bytes:
        """The reply body for this event: ``{"refund"|"payout":{"success":..,"errorMessage":..}}``.

        ``message`` must be empty when ``success`` is true and must explain the failure when it
        is false (ConfigurationError otherwise). For a balance query only a failure can be built
        here: ``{"playerBalance":{"errorMessage":"<message>"}}``, stating no balance; use
        ``reply_balance`` for the balance. For an ``OtherEvent`` it raises ValidationError
        (SP_ERR_UNKNOWN_EVENT, HTTP 400).

        Send the reply with ``reply_http_status`` (set here: 200, or the receiver's
        ``balance_failure_http_status``, 500 by default, for a refused balance query).
        Frees the library's copy of the event once the reply is built, unless the event is
        claimed in a journal (``begin()`` said NEW): then ``finish()`` stores the reply and frees.
        """
        ptr = self._ptr
        if ptr is None:
            if success is True:
                kept = _KEPT_SUCCESSES.get((type(self), self._replies.omit_empty_error_message))
                if kept is not None and not message:
                    self.reply_http_status = 200
                    return kept
            return self._rebuild_reply(success, message)
        out = _OUT
        status = _event_reply(ptr, success, c_text(message, "message") if message else None, out.text_address)
        if status:
            raise last_error(status)
        data: bytes = out.text.ptr
        self.reply_http_status = _u16_at(ptr + _STATUS_OFFSET).value
        state = self._journal
        if state != _CLAIMED and state != _EXCHANGED:
            self._release()
        return data

    def begin(self) -> Claim:
        """Claims this delivery in the receiver's journal: the exactly-once step between
        ``handle`` and the partner's logic (one foreign call, ``sp_event_begin``). Its key is the
        event's name and ``transactionId`` (refund, payout), or its index for other events.

        Returns a Claim:

        - NEW (``claim.attempt``): run the logic, build the reply (``reply()``), then
          ``finish()``; after a transient failure of the partner (its database is down),
          ``abandon()`` and answer HTTP 503 so that the service delivers again. From attempt 2
          on, ``claim.differing`` lists the decisive fields in which this delivery differs from
          the unfinished earlier one (one more foreign call, ``sp_event_differing``), and
          ``claim.reply_pruned`` says whether it was handled before and its reply pruned (one
          more, ``sp_event_reply_pruned``);
        - DONE (``claim.reply``): send the stored reply with HTTP 200 (``reply_http_status`` is
          set to 200) and run nothing; the library's event is freed at once;
        - NOT_JOURNALED: run the logic and send its reply; no ``finish()`` is needed.

        Call it before ``reply()`` (which frees the library's event of an unclaimed one).
        May wait up to the journal's busy wait.

        Raises:
            ConflictError: the key came before with other content (HTTP 409; the first stays;
                the message names the ``transactionId`` and the fields that differ).
            BusyError: another worker holds the claim and did not finish within the busy
                wait (HTTP 503).
            JournalError: the journal's storage failed (HTTP 503).
            ConfigurationError: the receiver has no journal, the event was begun already, or
                its library event is gone (after ``reply()`` or ``close()``).
        """
        ptr = self._ptr
        if self._journal == _NO_JOURNAL:
            raise argument_error("event", "its receiver has no journal (Receiver(..., journal=...))")
        if self._journal == _EXCHANGED:
            raise _endpoints_step("begin")
        if ptr is None:
            raise argument_error("event", "begin() must come before reply() and close()")
        out = _OUT
        status = _event_begin(ptr, out.claim_address)
        if status:
            raise last_error(status)
        claim = out.claim
        outcome = claim.outcome
        if outcome == _NEW:
            self._journal = _CLAIMED
            attempt = claim.attempt
            if attempt < 2:  # nothing ran before: nothing can differ
                return Claim(_NEW, attempt)
            return Claim(_NEW, attempt, None, _differing(ptr), _event_reply_pruned(ptr))
        self._journal = _SETTLED
        if outcome == _DONE:
            stored: bytes = claim.reply
            self.reply_http_status = _u16_at(ptr + _STATUS_OFFSET).value
            self._release()
            return Claim(_DONE, 0, stored)
        return _NOT_JOURNALED

    def stage(self, sql: str, params: Sequence[SqlValue] = ()) -> None:
        """Stages a statement of the partner's own (its ledger's credit, say) on this event's
        claim, to run when ``finish()`` stores the reply: in the same database transaction, after
        the claim is confirmed this event's, in the order staged. The credit and the stored reply
        then commit together, with one durable commit, or not at all, and exactly once no longer
        rests on the ledger's own unique key. For a ledger in the journal's own database. One
        foreign call (``sp_event_stage``); the library copies the statement and its values.

        ``sql`` is the journal database's own dialect with its own positional placeholders:
        ``$1, $2`` on PostgreSQL, ``?`` (or ``?1``) on SQLite. ``params`` are bound to them,
        never spliced into the text: None is ``NULL``, an ``int`` a 64-bit integer, a ``str``
        UTF-8 text (on PostgreSQL sent in text format, so that the server reads it as the
        column's type: ``numeric``, ``uuid``...), ``bytes``, ``bytearray`` or ``memoryview`` a
        blob (``bytea``). A statement runs for its effect: its rows are never read, so the reply
        cannot depend on them (logic that must read first keeps its own transaction and the
        ledger's unique key).

        ``finish()`` runs them all or none. A statement that fails there makes it raise
        JournalError (HTTP 503) with ``field`` ``statements[N]`` (from 0) naming the statement
        and the database's error: nothing was stored, no statement took effect, the claim is
        still held and the statements stay staged (finish again, or ``abandon()`` and answer
        503). A ClaimLostError from ``finish()`` means no staged statement ran: answer 503, the
        delivery that holds the key now runs the logic. ``abandon()``, ``close()`` and dropping
        the event discard them unrun.

        Raises:
            ConfigurationError (HTTP 500, an ``invalid_argument`` body), staging nothing:
                ``event`` when it holds no claim (``begin()`` did not answer NEW, or it was
                answered from the journal, finished, abandoned or closed: no ``finish()`` would
                run the statement); ``sql`` when it is not a str, cannot be encoded as UTF-8, is
                empty, over 1 MiB, or not one statement starting with ``INSERT``, ``UPDATE``,
                ``DELETE``, ``MERGE``, ``REPLACE``, ``SELECT``, ``WITH`` or ``SET LOCAL`` as both
                databases read it (transaction control, the journal's, a command that outlives
                the transaction, DDL, a second statement after ``;``: refused), or 1,000
                statements are staged already; ``params`` when it is not a sequence (a str or
                bytes is refused rather than taken one item per character) or holds more than
                65,535 values; ``params[N]`` for a value of another type (a bool, which Python
                counts as an int, a float, which an amount never is, anything else), an int
                outside the 64-bit range, or a str that cannot be encoded as UTF-8 (a lone
                surrogate).
        """
        ptr = self._ptr
        if (self._journal != _CLAIMED and self._journal != _EXCHANGED) or ptr is None:
            raise self._unstageable()
        if sql.__class__ is not str:
            if not isinstance(sql, str):
                raise wrong_type("sql", sql)
        try:
            text = sql.encode()
        except UnicodeEncodeError as error:
            raise _unencodable("sql", error) from None
        if params.__class__ is not tuple and params.__class__ is not list:
            if isinstance(params, (str, bytes, bytearray, memoryview)) or not isinstance(params, Sequence):
                raise wrong_type("params", params, "a sequence of values (a list or a tuple)")
        count = len(params)
        if count:
            values = [_sql_value(value, at) for at, value in enumerate(params)]
            # The array (its buffer kept in `held`) and the values' bytes copied into it, while the
            # library copies them in turn.
            address, held = _OUT.sql_values(values)
            status = _event_stage(ptr, text, len(text), address, count)
            del held
        else:
            status = _event_stage(ptr, text, len(text), None, 0)
        if status:
            raise last_error(status)

    def _unstageable(self) -> SlotPartnerError:
        """Why ``stage()`` is refused for an event that holds no claim (field ``event``)."""
        state = self._journal
        if state == _NO_JOURNAL:
            problem = "its receiver has no journal (Receiver(..., journal=...)): no finish() would run the statement"
        elif state == _NOT_BEGUN:
            problem = "was not begun: only a claimed delivery (begin() answered NEW) runs staged statements"
        elif state == _ABANDONED:
            problem = "its claim was abandoned: no finish() would run the statement"
        elif state == _LOST:
            problem = "its claim was taken over by another delivery: no finish() would run the statement"
        elif state == _CLAIMED:
            problem = "was closed: its claim was released, no finish() would run the statement"
        else:
            problem = (
                "holds no claim (answered from the journal, not journaled, or finished): "
                "no finish() would run the statement"
            )
        return argument_error("event", problem)

    def finish(self, reply: bytes | bytearray | memoryview | None = None) -> None:
        """Stores the reply of a claimed event in the journal, once the partner committed its own
        work: every later delivery of the same event gets it, byte for byte (a ``success:false``
        reply too). ``reply`` None (the usual case) stores the reply last built with ``reply()``
        or ``reply_balance()``, which is what the host sends. The statements staged with
        ``stage()`` run in the same transaction, after the claim is confirmed this event's: they
        and the reply commit together, or none of it. Then frees the library's event.
        Two foreign calls (``sp_event_finish``, ``sp_event_free``); none when the event is not
        claimed (DONE, NOT_JOURNALED, finished already).

        Raises:
            ClaimLostError: the claim is no longer this worker's, and nothing was stored: its
                lease expired and another delivery took it over ("taken over by attempt N"; the
                library's event is freed, and ``finish()`` and ``abandon()`` raise this same
                error again every time), or ``abandon()`` released it before ("the claim was
                abandoned"; raised again by every ``finish()``). After a takeover the partner's
                work was done: send the reply all the same (the other delivery finds the credit
                in the ledger); but when statements were staged, none of them ran: answer 503,
                and the delivery holding the key runs the logic.
            ConfigurationError: the reply is over the journal's limit or none was built (the
                claim stays: finish again or abandon), the event was not begun, or it was closed
                (its claim released) before.
            JournalError: the storage failed, or a staged statement failed (``field``
                ``statements[N]``, from 0, the message naming the statement and the database's
                error; no statement took effect). Either way nothing was stored, the claim stays
                this event's and the statements stay staged: finish again, or abandon;
                ``close()``, leaving a ``with`` block or dropping the event releases it, and if
                that fails too its lease ends it.
        """
        if self._journal != _CLAIMED:
            self._settled("finish")
            return
        ptr = self._ptr
        if ptr is None:
            raise argument_error("event", "was closed before finish(): its claim was released, nothing was stored")
        if reply is None:
            status = _event_finish(ptr, None, 0)
        else:
            data = reply if reply.__class__ is bytes else bytes_like(reply, "reply")
            status = _event_finish(ptr, data, len(data))
        if not status:
            self._journal = _SETTLED
            self._release()
            return
        error = last_error(status)
        if status == _CLAIM_LOST:  # taken over: refused from now on, as in the library
            self._lose(ptr, error)
        raise error  # otherwise the claim stays: finish again, or abandon

    def abandon(self) -> None:
        """Releases the claim after a transient failure of the partner (its database is down), so
        that the next delivery runs the logic again (as attempt 2); answer the service with HTTP
        503 so that it delivers again. Then frees the library's event. Three foreign calls
        (``sp_event_abandon``; ``sp_event_finish``, which keeps the library's refusal for a later
        ``finish()``; ``sp_event_free``). From then on ``finish()`` raises ClaimLostError ("the
        claim was abandoned"), every time, and ``abandon()`` does nothing. Does nothing for an
        event answered from the journal or not journaled (DONE, NOT_JOURNALED), or finished.
        Statements staged with ``stage()`` are discarded unrun. Dropping or closing a claimed
        event releases the claim the same way, without reporting failures.

        Raises:
            ClaimLostError: its lease expired and another delivery took the claim over ("taken
                over by attempt N"): the library's event is freed, and ``finish()`` and
                ``abandon()`` raise this same error again every time.
            JournalError: the storage failed; the claim stays this event's (abandon again, or
                ``close()``, which tries once more; if that fails too, its lease ends it).
            ConfigurationError: the event was not begun.
        """
        if self._journal != _CLAIMED:
            self._settled("abandon")
            return
        ptr = self._ptr
        if ptr is None:  # closed: freeing it released the claim already (finish() stays refused)
            return
        status = _event_abandon(ptr)
        if status:
            error = last_error(status)
            if status == _CLAIM_LOST:  # taken over: refused from now on, as in the library
                self._lose(ptr, error)
            raise error  # otherwise the claim stays: abandon again, or close
        # Released: the library refuses to finish it from now on; its refusal is kept.
        status = _event_finish(ptr, None, 0)
        self._refusal = last_error(status) if status else ClaimLostError(_CLAIM_LOST, "", "the claim was abandoned")
        self._journal = _ABANDONED
        self._release()

    def _lose(self, ptr: int, error: SlotPartnerError) -> None:
        """The claim was found taken over: ``error`` is what ``finish``/``abandon`` raise from
        now on, as the library would; the library's event is freed."""
        self._refusal = error
        self._journal = _LOST
        self._release()

    def _settled(self, step: str) -> None:
        """``finish``/``abandon`` of an event that is not claimed: nothing to do once settled; the
        kept ClaimLostError for an abandoned (``finish`` only) or lost claim; before ``begin()``
        the library's refusal (or the binding's, its event being gone)."""
        state = self._journal
        if state == _SETTLED or (state == _ABANDONED and step == "abandon"):
            return
        if state == _EXCHANGED:
            raise _endpoints_step(step)
        if state == _ABANDONED or state == _LOST:
            raise self._refusal.with_traceback(None)
        ptr = self._ptr
        if ptr is None:
            raise argument_error("event", f"{step}() needs begin() first: the event was not begun")
        status = _event_abandon(ptr) if step == "abandon" else _event_finish(ptr, None, 0)
        if status:
            raise last_error(status)

    def _rebuild_reply(self, success: bool, message: str) -> bytes:
        """The reply built by the standalone builders (the library's event is gone); sets
        ``reply_http_status`` as the library would have."""
        raise NotImplementedError

    def _rebuild_result(self, wrapper: str, success: bool, message: str) -> bytes:
        """``_rebuild_reply`` of a refund or payout: ``reply_result`` with ``wrapper``; the success
        reply it then keeps is kept in ``_KEPT_SUCCESSES`` too, for ``BuyRefund`` and
        ``JackpotPayout`` themselves (a subclass's own ``_rebuild_reply`` is always called)."""
        omit = self._replies.omit_empty_error_message
        data = reply_result(wrapper, success, message, omit)
        self.reply_http_status = 200
        if success is True:
            kept = kept_success(wrapper, omit)
            if kept is not None:
                if type(self) in _KEEPS_SUCCESSES:
                    _KEPT_SUCCESSES[(type(self), omit)] = kept
        return data

    def _release(self) -> None:
        """Frees the library's event now (``_ptr`` is set)."""
        self._ptr = None
        self._owned.free()

    def close(self) -> None:
        """Frees the library's copy of the event now (idempotent). The fields stay readable.
        A claimed event's claim is released (as ``abandon()`` does, failures unreported). Does
        nothing to an event an Endpoint handed to the logic: the endpoint frees it."""
        if self._ptr is not None and self._journal != _EXCHANGED:
            self._release()

    def __enter__(self: _E) -> _E:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles hold the fields only, never the library's event (no double free)."""
        return (_restore, (type(self), {field: getattr(self, field) for field in self._fields}, self._replies))

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, field) for field in self._fields)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Event)
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{field}={getattr(self, field)!r}" for field in self._fields)
        return f"{type(self).__name__}({fields})"


def _restore(cls: type[_E], fields: dict[str, Any], replies: ReplySettings) -> _E:
    event = cls(**fields)
    event._replies = replies
    return event


class BuyRefund(Event):
    """``gameSessionBuyRefund``: money for a spin must be refunded. Reply with ``reply()``."""

    __slots__ = (
        "game_session_identifier",
        "player_identifier",
        "player_partner_identifier",
        "transaction_id",
        "buy_transaction_id",
        "game_session_id",
        "partner_game_request_identifier",
        "game_id",
        "is_mobile",
        "bonus_code",
    )
    _fields = __slots__ + ("name", "index", "extra", "index_unreadable")

    game_session_identifier: str
    player_identifier: str | None
    player_partner_identifier: str | None
    transaction_id: int
    buy_transaction_id: int
    game_session_id: int
    partner_game_request_identifier: str
    game_id: int
    is_mobile: bool
    bonus_code: str | None

    def __init__(
        self,
        game_session_identifier: str,
        player_identifier: str | None,
        player_partner_identifier: str | None,
        transaction_id: int,
        buy_transaction_id: int,
        game_session_id: int,
        partner_game_request_identifier: str,
        game_id: int,
        is_mobile: bool,
        bonus_code: str | None = None,
        index: int | None = None,
        extra: dict[str, str] | None = None,
        name: str = "gameSessionBuyRefund",
        index_unreadable: bool = False,
    ) -> None:
        self.game_session_identifier = game_session_identifier
        self.player_identifier = player_identifier
        self.player_partner_identifier = player_partner_identifier
        self.transaction_id = transaction_id
        self.buy_transaction_id = buy_transaction_id
        self.game_session_id = game_session_id
        self.partner_game_request_identifier = partner_game_request_identifier
        self.game_id = game_id
        self.is_mobile = is_mobile
        self.bonus_code = bonus_code
        self.index = index
        self.index_unreadable = index_unreadable
        self.extra = {} if extra is None else extra
        self.name = name
        self.reply_http_status = 0
        self._ptr = None
        self._replies = DEFAULT_REPLY_SETTINGS
        self._journal = _NOT_BEGUN

    def _rebuild_reply(self, success: bool, message: str) -> bytes:
        return self._rebuild_result("refund", success, message)


class JackpotPayout(Event):
    """``jackpotPayout``: a jackpot is paid out. ``money_won`` is in minor currency units.
    ``is_mobile`` is None when the body does not say. Reply with ``reply()``."""

    __slots__ = (
        "jackpot_identifier",
        "player_identifier",
        "player_partner_identifier",
        "currency_iso4217",
        "money_won",
        "coins_won",
        "is_money",
        "epoch_released_millis",
        "is_primary",
        "transaction_id",
        "buy_transaction_id",
        "partner_game_request_identifier",
        "game_session_id",
        "game_id",
        "bonus_code",
        "is_mobile",
    )
    _fields = __slots__ + ("name", "index", "extra", "index_unreadable")

    jackpot_identifier: str
    player_identifier: str | None
    player_partner_identifier: str | None
    currency_iso4217: str
    money_won: int
    coins_won: int
    is_money: bool
    epoch_released_millis: int
    is_primary: bool
    transaction_id: int
    buy_transaction_id: int
    partner_game_request_identifier: str
    game_session_id: int
    game_id: int
    bonus_code: str | None
    is_mobile: bool | None

    def __init__(
        self,
        jackpot_identifier: str,
        player_identifier: str | None,
        player_partner_identifier: str | None,
        currency_iso4217: str,
        money_won: int,
        coins_won: int,
        is_money: bool,
        epoch_released_millis: int,
        is_primary: bool,
        transaction_id: int,
        buy_transaction_id: int,
        partner_game_request_identifier: str,
        game_session_id: int,
        game_id: int,
        bonus_code: str | None = None,
        is_mobile: bool | None = None,
        index: int | None = None,
        extra: dict[str, str] | None = None,
        name: str = "jackpotPayout",
        index_unreadable: bool = False,
    ) -> None:
        self.jackpot_identifier = jackpot_identifier
        self.player_identifier = player_identifier
        self.player_partner_identifier = player_partner_identifier
        self.currency_iso4217 = currency_iso4217
        self.money_won = money_won
        self.coins_won = coins_won
        self.is_money = is_money
        self.epoch_released_millis = epoch_released_millis
        self.is_primary = is_primary
        self.transaction_id = transaction_id
        self.buy_transaction_id = buy_transaction_id
        self.partner_game_request_identifier = partner_game_request_identifier
        self.game_session_id = game_session_id
        self.game_id = game_id
        self.bonus_code = bonus_code
        self.is_mobile = is_mobile
        self.index = index
        self.index_unreadable = index_unreadable
        self.extra = {} if extra is None else extra
        self.name = name
        self.reply_http_status = 0
        self._ptr = None
        self._replies = DEFAULT_REPLY_SETTINGS
        self._journal = _NOT_BEGUN

    def _rebuild_reply(self, success: bool, message: str) -> bytes:
        return self._rebuild_result("payout", success, message)


class BalanceQuery(Event):
    """``getPlayerBalance``: the service asks for a player's balance. Reply with
    ``reply_balance(money)``, or ``reply(False, "why")`` when the balance cannot be given: that
    reply states no balance (``{"playerBalance":{"errorMessage":"why"}}``) and is sent with the
    receiver's ``balance_failure_http_status`` (500 by default), in ``reply_http_status``."""

    __slots__ = ("player_identifier", "player_partner_identifier")
    _fields = __slots__ + ("name", "index", "extra", "index_unreadable")

    player_identifier: str | None
    player_partner_identifier: str | None

    def __init__(
        self,
        player_identifier: str | None,
        player_partner_identifier: str | None,
        index: int | None = None,
        extra: dict[str, str] | None = None,
        name: str = "getPlayerBalance",
        index_unreadable: bool = False,
    ) -> None:
        self.player_identifier = player_identifier
        self.player_partner_identifier = player_partner_identifier
        self.index = index
        self.index_unreadable = index_unreadable
        self.extra = {} if extra is None else extra
        self.name = name
        self.reply_http_status = 0
        self._ptr = None
        self._replies = DEFAULT_REPLY_SETTINGS
        self._journal = _NOT_BEGUN

    def reply_balance(self, money: int, currency: str | None = None, coins: int = 0) -> bytes:
        """``{"playerBalance":{"money":..,"currencyISO4217":..,"coins":..,"errorMessage":""}}``.

        ``money`` is in minor units; ``money`` and ``coins`` must be 0 to 2^53-1
        (ConfigurationError otherwise). ``currency`` None means the receiver's currency.
        Sets ``reply_http_status`` to 200. Frees the library's copy of the event once the reply
        is built, unless the event is claimed in a journal (then ``finish()`` frees it).
        """
        ptr = self._ptr
        if ptr is None:
            settings = self._replies
            if currency is not None:
                rebuilt = reply_balance(money, currency, coins, "", settings.balance_wrapper)
            else:
                template = _BALANCE_FORMATS.get(settings)
                if (
                    template is not None
                    and type(money) is int
                    and type(coins) is int
                    and 0 <= money <= MAX_AMOUNT
                    and 0 <= coins <= MAX_AMOUNT
                ):
                    self.reply_http_status = 200
                    return template[0] % (money, coins) if coins else template[1] % money
                wrapper, currency = settings.balance_wrapper, settings.balance_currency
                rebuilt = reply_balance(money, currency, coins, "", wrapper)
                if template is None and len(_BALANCE_FORMATS) < 64:
                    template = kept_balance(wrapper, currency)
                    if template is not None:
                        _BALANCE_FORMATS[settings] = template
            self.reply_http_status = 200
            return rebuilt
        out = _OUT
        status = _event_reply_balance(
            ptr,
            money if type(money) is int and -(2**63) <= money < 2**63 else check_amount(money, "money"),
            c_text(currency, "currency") if currency is not None else None,
            coins if type(coins) is int and -(2**63) <= coins < 2**63 else check_amount(coins, "coins"),
            out.text_address,
        )
        if status:
            raise last_error(status)
        data: bytes = out.text.ptr
        self.reply_http_status = _u16_at(ptr + _STATUS_OFFSET).value
        state = self._journal
        if state != _CLAIMED and state != _EXCHANGED:
            self._release()
        return data

    def _rebuild_reply(self, success: bool, message: str) -> bytes:
        if success:
            raise argument_error("success", "a successful balance reply needs the balance: use the balance reply")
        if not message:
            raise argument_error("message", "must explain the failure when success is false")
        settings = self._replies
        data = reply_balance(0, settings.balance_currency, 0, message, settings.balance_wrapper)
        self.reply_http_status = settings.balance_failure_http_status
        return data


class OtherEvent(Event):
    """Any other event or action, passed through when the receiver does not reject unknown
    events: ``name`` and the raw JSON of its fields in ``extra``. No reply is defined for it."""

    __slots__ = ()
    _fields = ("name", "index", "extra", "index_unreadable")

    def __init__(
        self,
        name: str,
        index: int | None = None,
        extra: dict[str, str] | None = None,
        index_unreadable: bool = False,
    ) -> None:
        self.name = name
        self.index = index
        self.index_unreadable = index_unreadable
        self.extra = {} if extra is None else extra
        self.reply_http_status = 0
        self._ptr = None
        self._replies = DEFAULT_REPLY_SETTINGS
        self._journal = _NOT_BEGUN

    def _rebuild_reply(self, success: bool, message: str) -> bytes:
        quoted = '"' + self.name.replace("\\", "\\\\").replace('"', '\\"') + '"'
        raise ValidationError(
            _lib.SP_ERR_UNKNOWN_EVENT, "event", f"event: no reply is defined for the unknown event {quoted}"
        )


_PAYOUT = _lib.SP_EVENT_KIND_JACKPOT_PAYOUT
_REFUND = _lib.SP_EVENT_KIND_BUY_REFUND
_BALANCE = _lib.SP_EVENT_KIND_BALANCE_QUERY
_OTHER = _lib.SP_EVENT_KIND_OTHER
_MEMORY = _lib.MEMORY
# The scalars of each struct (its sp_str fields passed over: the strings come from the block).
_SCALARS = (_lib.sp_str,)
_EVENT_SIZE = ctypes.sizeof(_lib.sp_event)
_EVENT = _lib.layout(_lib.sp_event, _SCALARS).unpack
_REFUND_SIZE = ctypes.sizeof(_lib.sp_buy_refund)
_KEEPS_SUCCESSES = (BuyRefund, JackpotPayout)
_REFUND_STRUCT = _lib.layout(_lib.sp_buy_refund, _SCALARS).unpack
_PAYOUT_SIZE = ctypes.sizeof(_lib.sp_jackpot_payout)
_PAYOUT_STRUCT = _lib.layout(_lib.sp_jackpot_payout, _SCALARS).unpack
_RECORD = _lib.RECORD.unpack_from
_new = object.__new__


def _build(values: tuple[Any, ...], texts: list[str], replies: ReplySettings, journal: int) -> Event:
    """The typed event of a record: ``values`` are the ``sp_record`` header's fields in order,
    ``texts`` its strings block split at NULs (six typed slots, an absent one empty, then each
    extra field's name and JSON, then the name). The slots are set here, not by ``__init__``:
    the class call and its defaults, written again here, cost a callback more than the event's
    fields; a field added to an event class is set in both places."""
    (_, _, count, kind, has_index, unreadable, has_mobile, mobile, index, transaction, buy, session, game, money, coins,
     released, is_money, primary) = values  # fmt: skip
    if count == 0:
        extra = {}
    elif count == 1:  # the common cases: the index alone, or with one more field
        extra = {texts[6]: texts[7]}
    elif count == 2:  # (a dict display: several times cheaper than dict(zip(...)))
        extra = {texts[6]: texts[7], texts[8]: texts[9]}
    else:
        extra = {}
        for at in range(6, 6 + 2 * count, 2):
            extra[texts[at]] = texts[at + 1]
    event: Any
    if kind == _REFUND:
        event = _new(BuyRefund)
        event.game_session_identifier = texts[0]
        event.player_identifier = texts[1] or None
        event.player_partner_identifier = texts[2] or None
        event.transaction_id = transaction
        event.buy_transaction_id = buy
        event.game_session_id = session
        event.partner_game_request_identifier = texts[3]
        event.game_id = game
        event.is_mobile = mobile
        event.bonus_code = texts[4] or None
    elif kind == _PAYOUT:
        event = _new(JackpotPayout)
        event.jackpot_identifier = texts[0]
        event.player_identifier = texts[1] or None
        event.player_partner_identifier = texts[2] or None
        event.currency_iso4217 = texts[3]
        event.money_won = money
        event.coins_won = coins
        event.is_money = is_money
        event.epoch_released_millis = released
        event.is_primary = primary
        event.transaction_id = transaction
        event.buy_transaction_id = buy
        event.partner_game_request_identifier = texts[4]
        event.game_session_id = session
        event.game_id = game
        event.bonus_code = texts[5] or None
        event.is_mobile = mobile if has_mobile else None
    elif kind == _BALANCE:
        event = _new(BalanceQuery)
        event.player_identifier = texts[0] or None
        event.player_partner_identifier = texts[1] or None
    else:
        event = _new(OtherEvent)
    event.index = index if has_index else None
    event.index_unreadable = unreadable
    event.extra = extra
    event.name = texts[6 + 2 * count]
    event.reply_http_status = 0
    event._ptr = None
    event._replies = replies
    event._journal = journal
    return event


def read_record(record: tuple[Any, ...], replies: ReplySettings) -> Event:
    """The typed event of the record ``sp_receiver_handle_record`` wrote into this thread's
    buffer (``record`` is ``_lib.OUT.record_args``): its header unpacked in one ``struct`` call,
    its strings block decoded and split in one go. No foreign call and nothing to free: the
    event replies through the standalone builders (a success reply without a foreign call)."""
    values = _RECORD(record[3])
    start = record[4]
    return _build(values, _MEMORY[start : start + values[1]].decode().split("\0"), replies, _NO_JOURNAL)


def read_event(ptr: int, replies: ReplySettings, keep: bool = True) -> Event:
    """Copies the ``sp_event`` at ``ptr`` into a typed event that takes over its ownership.

    No foreign call, and three copies out of library memory: the ``sp_event`` and its typed
    struct (their scalars unpacked in one ``struct`` call each) and ``sp_event.strings``, the
    block holding every string of the event NUL-separated in a fixed order (the six typed
    string slots, an absent one empty, then each extra field's name and JSON, then the name),
    decoded and split in one go. If copying fails the ``sp_event`` is freed before the error
    propagates.

    Unless ``keep`` (a receiver with a journal), the ``sp_event`` of a refund, payout or balance
    query is freed right away and the event replies through the standalone builders (a success
    reply without a foreign call); an unknown event keeps its own, whose refusal to reply carries
    the library's answer.
    """
    try:
        event = _copy_event(ptr, replies)
    except BaseException:
        _event_free(ptr)
        raise
    if keep or event.__class__ is OtherEvent:
        event._owned = _Owned(ptr)
        event._ptr = ptr
    else:
        event._journal = _NO_JOURNAL
        _event_free(ptr)
    return event


def _copy_event(ptr: int, replies: ReplySettings) -> Event:
    """The typed event of the ``sp_event`` at ``ptr``, its fields copied out (``read_event``
    says how); the event holds no pointer yet (``_ptr`` None, ``_journal`` not begun)."""
    memory = _MEMORY
    (kind, has_index, index, refund, payout, _, _, count, unreadable, _, strings, length) = _EVENT(
        memory[ptr : ptr + _EVENT_SIZE]
    )
    texts = memory[strings : strings + length].decode().split("\0")
    # The scalars in the order of an sp_record header (its sizes unused here).
    if kind == _PAYOUT:
        (money, coins, is_money, released, primary, transaction, buy, session, game, has_mobile, mobile) = (
            _PAYOUT_STRUCT(memory[payout : payout + _PAYOUT_SIZE])
        )
        ids = (has_mobile, mobile, index, transaction, buy, session, game, money, coins, released, is_money, primary)
    elif kind == _REFUND:
        transaction, buy, session, game, mobile = _REFUND_STRUCT(memory[refund : refund + _REFUND_SIZE])
        ids = (True, mobile, index, transaction, buy, session, game, 0, 0, 0, False, False)
    else:
        ids = (False, False, index, 0, 0, 0, 0, 0, 0, 0, False, False)
    return _build((0, length, count, kind, has_index, unreadable) + ids, texts, replies, _NOT_BEGUN)


def read_claimed_event(ptr: int, replies: ReplySettings) -> Event:
    """``read_event`` for an ``sp_event`` the library hands out already claimed in the journal
    (``sp_recovery_next``): the event stands as after ``begin()`` said NEW, so ``reply()`` keeps
    the library's event for ``finish()``, which stores the reply and frees it."""
    event = read_event(ptr, replies)
    event._journal = _CLAIMED
    return event


def read_exchange_event(ptr: int, replies: ReplySettings) -> Event:
    """The typed event of the ``sp_event`` of an endpoint's exchange (``sp_exchange.event``),
    copied as ``read_event`` copies one; the exchange owns the ``sp_event`` and frees it, the
    event never does. ``reply()``, ``reply_balance()`` and ``stage()`` build into it
    (``sp_exchange_complete`` sends the reply last built and runs the staged statements);
    ``begin()``, ``finish()`` and ``abandon()`` are refused, ``close()`` does nothing. Call
    ``detach_exchange_event`` before the exchange is freed."""
    event = _copy_event(ptr, replies)
    event._ptr = ptr
    event._journal = _EXCHANGED
    return event


def detach_exchange_event(event: Event) -> None:
    """Forgets the exchange's ``sp_event`` (about to be freed with its exchange): the event
    stays readable, a later ``reply()`` is rebuilt by the standalone builders, and ``stage()``
    is refused."""
    event._ptr = None
    event._journal = _SETTLED


__all__ = [
    "Event",
    "SqlValue",
    "BuyRefund",
    "JackpotPayout",
    "BalanceQuery",
    "OtherEvent",
    "ReplySettings",
    "Claim",
    "Outcome",
    "read_event",
    "read_record",
    "read_claimed_event",
    "read_exchange_event",
    "detach_exchange_event",
]
