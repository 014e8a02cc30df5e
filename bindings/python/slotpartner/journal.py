"""``Journal``: the delivery journal that makes a callback's effect happen once.

Open one per process from a URL and give it to the receiver (``Receiver(..., journal=journal)``);
then claim each event with ``event.begin()`` before running the partner's logic (see
``events.Event.begin`` and README.md, "Exactly once"). ``status()`` and ``missing()`` answer what
the journal has seen: counts, and the indexes that never arrived.

The operator's side: ``index_jumps()``, ``conflicts()``, ``resolutions()`` and ``unrecoverable()``
list what needs (or got) a decision; ``accept_jump``, ``jump_is_gap``, ``resolve_conflict``,
``close_unfinished``, ``resolve`` and ``renumber`` record one, each with a note kept for audit.
``backup`` copies a SQLite journal while the workers write.
``export`` writes the deliveries of a period to a file, for reconciliation.

Retention: ``prune()`` removes what the service can no longer resend (or the journal does it by
itself: ``Journal(..., retention=...)``); ``vitals()`` says what it did, how big the journal is
and how long ago it last heard from the service; ``missing_older_than()`` leaves out the gaps
too young to be more than an event still on its way.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import math
import os
from dataclasses import dataclass
from typing import Any

from . import _lib
from ._guard import GuardedHandle
from .errors import argument_error, last_error, wrong_type
from .replies import c_text

_LIB = _lib.lib
_MEMORY = _lib.MEMORY
_RANGE = _lib.INDEX_RANGE
_RANGES = _lib.INDEX_RANGES

#: The most ranges ``missing`` returns in one call (the library's limit).
MAX_MISSING_LIMIT = 1_000_000

_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class JournalStatus:
    """A journal's counts and gap figures (``sp_journal_status``), over every process using it.

    Attributes:
        handled: deliveries finished with a stored reply.
        replayed: deliveries answered from the journal with a stored reply.
        conflicts: deliveries refused because their key came before with other content.
        refused: deliveries refused by validation whose index could be read.
        in_progress: deliveries claimed and neither finished nor abandoned.
        missing: indexes between ``first_index`` and ``highest_index`` that were never seen.
        first_index: where gap detection counts from (configured, else the lowest index seen);
            None before any index was seen.
        highest_index: the highest index seen, or None.
        watermark: every index from ``first_index`` up to this one was seen, or None.
        unfinished: deliveries claimed and never finished (abandoned, or their lease ran out):
            nothing was stored; the service or a recovery must deliver them again, or an
            operator closes them (``close_unfinished``).
        open_conflicts: entries of ``conflicts()`` no operator resolved yet.
        index_jumps: entries of ``index_jumps()`` no operator decided yet.
        resolved: indexes of the current numbering closed by hand (``resolve``).
        unrecoverable: indexes, missing or carrying an unfinished delivery, the service answered
            404 for ``not_found_limit`` recovery runs: no longer fetched (see
            ``unrecoverable()``).
        numbering: the current numbering, 1 until ``renumber``.

    ``conflicts`` counts every delivery whose key came before with other decisive content:
    refused ones, and ones handed out as new because the first was never finished.
    """

    handled: int
    replayed: int
    conflicts: int
    refused: int
    in_progress: int
    missing: int
    first_index: int | None
    highest_index: int | None
    watermark: int | None
    unfinished: int = 0
    open_conflicts: int = 0
    index_jumps: int = 0
    resolved: int = 0
    unrecoverable: int = 0
    numbering: int = 1


@dataclass(frozen=True, slots=True)
class JournalVitals:
    """A journal's vital signs (``sp_journal_vitals``). Times are milliseconds since the Unix
    epoch on the journal's clock (on PostgreSQL, the server's), like the reports' ``at_ms``.

    Attributes:
        pruned: deliveries compacted by retention (``prune``, or the journal's ``retention``)
            since the journal was created: their reply and content removed, a digest kept.
        forgotten: compact records removed entirely (``prune(forget_older_than=...)``) since the
            journal was created.
        size_bytes: the bytes the journal takes (SQLite: the file and its write-ahead log;
            PostgreSQL: its tables with their indexes), or None when not known.
        oldest_record_ms: when the oldest delivery kept whole (its reply stored) was finished:
            what the next prune compacts first; None when none is.
        last_delivery_ms: when a new index was last seen (a delivery carrying an index the
            journal had not seen; not a repeat): a busy casino that sees none for long has a
            broken route. None when none was seen.
        oldest_gap_ms: when the oldest missing index was found missing (an index above it was
            first seen); None when nothing is missing.
    """

    pruned: int
    forgotten: int
    size_bytes: int | None
    oldest_record_ms: int | None
    last_delivery_ms: int | None
    oldest_gap_ms: int | None


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What ``Journal.prune`` did (``sp_prune_report``).

    Attributes:
        compacted: finished deliveries compacted (reply and content removed, digest kept).
        forgotten: compact records removed (``forget_older_than``).
        refused_removed: records of deliveries refused by validation removed.
        conflicts_removed: resolved conflicts removed.
        batches: transactions run.
        longest_batch_us: the longest a batch's transaction took, in microseconds: what a
            delivery may have waited for it.
        bytes_returned: bytes given back to the file system (SQLite journals created by this
            release); 0 on PostgreSQL, whose autovacuum reuses the space.
        complete: whether nothing eligible is left: False when ``max_time`` stopped it first,
            or when an export was running (``export``), which a prune waits for by stopping at
            once: run it again once the export is done.
        export_running: whether it stopped at once for an export running.
    """

    compacted: int
    forgotten: int
    refused_removed: int
    conflicts_removed: int
    batches: int
    longest_batch_us: int
    bytes_returned: int
    complete: bool
    export_running: bool


_MS = datetime.timedelta(milliseconds=1)


def _duration_ms(value: datetime.timedelta | float, name: str, high: int = 2**64 - 1) -> int:
    """``value`` (a ``timedelta``, or seconds as an int or a float) in whole milliseconds, 0 to
    ``high``; anything else is refused naming ``name``. A positive value below a millisecond is
    one millisecond."""
    if isinstance(value, datetime.timedelta):
        ms = value // _MS
        positive = value > datetime.timedelta(0)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        ms = value * 1000 if isinstance(value, int) else round(value * 1000)
        positive = value > 0
    else:
        raise argument_error(name, f"expected a datetime.timedelta or a number of seconds, got {value!r}")
    if positive:
        ms = max(ms, 1)
    if not 0 <= ms <= high:
        raise argument_error(name, f"expected 0 to {high} ms, got {value!r}")
    return int(ms)


def _check_range(value: int, name: str, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise argument_error(name, f"expected {what}, got {value!r}")
    return value


class Journal(GuardedHandle):
    """A delivery journal, safe to share between threads (and, through its storage, between
    processes and hosts).

    ``url`` is ``sqlite:PATH`` (one file that every process and thread of a host shares; created
    if absent) or ``postgres://USER@HOST/DATABASE`` (callbacks landing on several hosts). The
    schema is created on first open.

    Every setting after ``url`` is optional (keyword only): None (the default) keeps the
    library's default, shown in brackets.

    Args:
        url: where the journal lives.
        lease_ms: how long a claim is held for a worker that neither finishes nor abandons it
            (it died) before the next delivery takes it over as attempt 2, 1 ms to 24 h
            [30000]. Longer than the partner's longest handling, shorter than the service's
            retry interval.
        busy_wait_ms: how long ``Event.begin`` waits for another worker's live claim on the same
            delivery before raising BusyError, at most 24 h [2000].
        durable: flush a stored reply to disk before ``finish`` returns (SQLite
            ``synchronous=FULL``, PostgreSQL ``synchronous_commit=on``) [True]. False: it
            survives a crash of the process, not of the machine.
        first_index: the index gap detection counts from (stored in the journal) [the lowest
            index seen].
        max_reply_bytes: the largest reply ``finish`` stores, at least 1 [65536].
        lock_timeout_ms: how long one statement waits for a lock another process holds (SQLite's
            busy time-out, PostgreSQL's ``lock_timeout`` and connect time-out) [5000].
        command_timeout_ms: PostgreSQL: how long one round trip waits for the server's answer
            before the connection is closed and the call fails with ``JournalError`` (answer
            503); the URL's ``command_timeout`` (seconds) wins [lock_timeout_ms + 10000].
        max_index_jump: how far beyond the highest index seen an index may land and still open
            a gap of that size, at least 1 [100000]. Beyond it the index is recorded as an index
            jump (``index_jumps()``): the stretch between is not counted missing until an
            operator decides it (``accept_jump`` or ``jump_is_gap``).
        not_found_limit: how many recovery runs may get HTTP 404 for an index before it is
            reported unrecoverable and no longer fetched, at least 1 [3]. A missing one stays
            missing until resolved by hand (``resolve``), an unfinished one unfinished until
            closed by hand (``close_unfinished``).
        retention: the journal's own retention, a ``datetime.timedelta`` or seconds: at least a
            day, or 0 for none [none: nothing is pruned unless ``prune()`` is called]. With it,
            ``Event.finish`` runs, at most once a second per open journal and after its own
            commit, one batch of ``prune(older_than=retention)`` (compact records kept); a
            failure of that batch does not fail the finish. See ``prune`` for what a repeat
            beyond the retention gets.
        claim_at_finish: whether a new delivery's claim is written only by ``Event.finish``,
            with the reply and the staged statements, in one transaction [False: ``Event.begin``
            writes it in a commit of its own]. Half the journal's writes and commits a delivery;
            but two deliveries of one key arriving at once may both run the logic: the first
            ``finish`` to commit stores its reply and none of the other's staged statements take
            effect: the other's ``finish`` returns when the stored delivery has the same content
            and the very same reply (handled once, this reply the stored one), else raises
            ClaimLostError (answer 503). Choose it only when everything the logic does is
            staged (``Event.stage``) or absorbed by the ledger's unique ``transactionId``, never
            when it calls out (a wallet's API) before ``finish``. A worker dying before
            ``finish`` leaves nothing: the index stays missing and recovery fetches it;
            ``abandon`` stores the delivery abandoned, as without it.

    Raises:
        ConfigurationError: an unusable URL (field ``journal_url``) or setting (its name).
        JournalError: the storage cannot be used (an unreachable server, a read-only or corrupt
            file, a journal of a newer schema version).

    Receivers it was given to keep the library's journal open: ``close()`` it (or leave its
    ``with`` block) whenever you like. ``close()`` waits for ``status``/``missing`` calls in
    progress on other threads; later calls raise ConfigurationError. It is also closed when
    garbage collected.
    """

    _free = _LIB.sp_journal_free
    _noun = "journal"

    _ptr: int | None

    def __init__(
        self,
        url: str,
        *,
        lease_ms: int | None = None,
        busy_wait_ms: int | None = None,
        durable: bool | None = None,
        first_index: int | None = None,
        max_reply_bytes: int | None = None,
        lock_timeout_ms: int | None = None,
        max_index_jump: int | None = None,
        not_found_limit: int | None = None,
        retention: datetime.timedelta | float | None = None,
        claim_at_finish: bool | None = None,
        command_timeout_ms: int | None = None,
    ) -> None:
        self._init_guard()
        day = 24 * 3600 * 1000
        # (setter, value) for each setting given; None keeps the library's default.
        settings: list[tuple[Any, Any]] = [
            (
                _LIB.sp_journal_config_set_lease_ms,
                None if lease_ms is None else _check_range(lease_ms, "lease_ms", 0, 2**64 - 1, f"1 to {day} ms"),
            ),
            (
                _LIB.sp_journal_config_set_busy_wait_ms,
                None
                if busy_wait_ms is None
                else _check_range(busy_wait_ms, "busy_wait_ms", 0, 2**64 - 1, f"0 to {day} ms"),
            ),
            (_LIB.sp_journal_config_set_durable, None if durable is None else bool(durable)),
            (
                _LIB.sp_journal_config_set_first_index,
                None
                if first_index is None
                else _check_range(first_index, "first_index", 0, 2**63 - 1, "a non-negative integer or None"),
            ),
            (
                _LIB.sp_journal_config_set_max_reply_bytes,
                None
                if max_reply_bytes is None
                else _check_range(max_reply_bytes, "max_reply_bytes", 0, 2**63 - 1, "a positive integer"),
            ),
            (
                _LIB.sp_journal_config_set_lock_timeout_ms,
                None
                if lock_timeout_ms is None
                else _check_range(lock_timeout_ms, "lock_timeout_ms", 0, 2**64 - 1, "a number of milliseconds"),
            ),
            (
                _LIB.sp_journal_config_set_command_timeout_ms,
                None
                if command_timeout_ms is None
                else _check_range(command_timeout_ms, "command_timeout_ms", 0, 2**64 - 1, f"1 to {day} ms"),
            ),
            (
                _LIB.sp_journal_config_set_max_index_jump,
                None
                if max_index_jump is None
                else _check_range(max_index_jump, "max_index_jump", 0, 2**63 - 1, "a positive integer"),
            ),
            (
                _LIB.sp_journal_config_set_not_found_limit,
                None
                if not_found_limit is None
                else _check_range(not_found_limit, "not_found_limit", 0, 2**32 - 1, "a positive number of runs"),
            ),
            (
                _LIB.sp_journal_config_set_retention_ms,
                None if retention is None else _duration_ms(retention, "retention"),
            ),
            (
                _LIB.sp_journal_config_set_claim_at_finish,
                None if claim_at_finish is None else bool(claim_at_finish),
            ),
        ]
        steps = [(setter, value) for setter, value in settings if value is not None]
        config = ctypes.c_void_p()
        status = _LIB.sp_journal_config_new(c_text(url, "journal_url"), ctypes.byref(config))
        if status:
            raise last_error(status)
        try:
            for setter, value in steps:
                status = setter(config, value)
                if status:
                    raise last_error(status)
            journal = ctypes.c_void_p()
            status = _LIB.sp_journal_open(config, ctypes.byref(journal))
            if status:
                raise last_error(status)
        finally:
            _LIB.sp_journal_config_free(config)
        self._ptr = journal.value

    def status(self) -> JournalStatus:
        """The journal's counts and gap figures (one foreign call). Raises JournalError when the
        storage fails."""
        out = _lib.sp_journal_stats()
        self._invoke(_LIB.sp_journal_status, ctypes.byref(out))
        return JournalStatus(
            handled=out.handled,
            replayed=out.replayed,
            conflicts=out.conflicts,
            refused=out.refused,
            in_progress=out.in_progress,
            missing=out.missing,
            first_index=out.first_index if out.has_first_index else None,
            highest_index=out.highest_index if out.has_highest_index else None,
            watermark=out.watermark if out.has_watermark else None,
            unfinished=out.unfinished,
            open_conflicts=out.open_conflicts,
            index_jumps=out.index_jumps,
            resolved=out.resolved,
            unrecoverable=out.unrecoverable,
            numbering=out.numbering,
        )

    def missing(self, limit: int = 1000) -> list[tuple[int, int]]:
        """The indexes never seen between the first index and the highest seen, as at most
        ``limit`` (1 to 1,000,000) inclusive ``(first, last)`` ranges in order. The cost grows
        with ``limit``, not with the deliveries. Two foreign calls (``sp_journal_missing``,
        ``sp_index_ranges_free``). Raises JournalError when the storage fails."""
        _check_range(limit, "limit", 1, MAX_MISSING_LIMIT, f"1 to {MAX_MISSING_LIMIT}")
        out = ctypes.c_void_p()
        self._invoke(_LIB.sp_journal_missing, limit, ctypes.byref(out))
        return _take_ranges(out.value)

    def missing_older_than(self, min_age: datetime.timedelta | float, limit: int = 1000) -> list[tuple[int, int]]:
        """``missing(limit)`` without the gaps found missing less than ``min_age`` ago (a
        ``datetime.timedelta``, or seconds): a gap is found missing when an index above it is
        first seen, and a younger one is usually an event still on its way (reordering, the
        service's own retry), which a recovery would race. ``min_age`` 0 gives what ``missing``
        gives. Two foreign calls (``sp_journal_missing_older_than``, ``sp_index_ranges_free``).
        Raises ConfigurationError for a ``limit`` out of 1 to 1,000,000 or an unusable
        ``min_age`` (their name), JournalError when the storage fails."""
        min_age_ms = _duration_ms(min_age, "min_age")
        _check_range(limit, "limit", 1, MAX_MISSING_LIMIT, f"1 to {MAX_MISSING_LIMIT}")
        out = ctypes.c_void_p()
        self._invoke(_LIB.sp_journal_missing_older_than, min_age_ms, limit, ctypes.byref(out))
        return _take_ranges(out.value)

    def vitals(self) -> JournalVitals:
        """The journal's vital signs (one foreign call, ``sp_journal_vitals``): what retention
        did, the journal's size, when its oldest whole record was finished, when a new index last
        arrived and when the oldest gap opened. Reads what ``status()`` reads, and the journal's
        size besides. Raises JournalError when the storage fails."""
        out = _lib.sp_journal_vital_signs()
        self._invoke(_LIB.sp_journal_vitals, ctypes.byref(out))
        return JournalVitals(
            pruned=out.pruned,
            forgotten=out.forgotten,
            size_bytes=out.size_bytes if out.has_size_bytes else None,
            oldest_record_ms=out.oldest_record_ms if out.has_oldest_record_ms else None,
            last_delivery_ms=out.last_delivery_ms if out.has_last_delivery_ms else None,
            oldest_gap_ms=out.oldest_gap_ms if out.has_oldest_gap_ms else None,
        )

    def prune(
        self,
        older_than: datetime.timedelta | float,
        forget_older_than: datetime.timedelta | float | None = None,
        batch: int | None = None,
        pause: datetime.timedelta | float | None = None,
        max_time: datetime.timedelta | float | None = None,
    ) -> PruneReport:
        """Removes what the service can no longer resend (``sp_journal_prune``; durations are
        ``datetime.timedelta`` or seconds; None keeps the library's default, in brackets):

        - a delivery finished more than ``older_than`` ago (at least a day) is compacted: its
          reply and content go, a digest of its decisive content and its reply's outcome stay.
          A repeat of it with the same decisive content is handed out as its next attempt with
          ``Claim.reply_pruned`` True: the reply is gone and the ledger, keyed by
          ``transactionId``, decides, exactly as after a crash between its commit and
          ``finish()``. A repeat with other decisive content raises ConflictError;
        - with ``forget_older_than`` (longer than ``older_than``) [None: kept], compact records
          older than it are removed: a repeat of one is then a new delivery (attempt 1);
        - records of deliveries refused by validation, and resolved conflicts, older than
          ``older_than`` are removed;
        - never removed: unfinished deliveries, a delivery with an open conflict, unresolved
          conflicts, open index jumps, and the indexes seen (no gap opens or closes).

        It runs in batches of ``batch`` rows [200], each its own short transaction, ``pause``
        apart [10 ms; at most 60 s], so that a delivery waits for at most one batch
        (``longest_batch_us``), then gives the space a SQLite journal freed back to the file
        system. It blocks until done or ``max_time`` has passed [None: until done]: call it from
        cron or an operator's job, or on a thread of its own, not inside a callback. Two foreign
        calls (``sp_prune_options_default``, ``sp_journal_prune``; nothing to free).

        Raises ConfigurationError naming the option out of range (``older_than``,
        ``forget_older_than``, ``batch``, ``pause``, ``max_time``); JournalError when the storage
        fails (what earlier batches removed stays removed).
        """
        options = _lib.sp_prune_options()
        status = _LIB.sp_prune_options_default(ctypes.byref(options), _duration_ms(older_than, "older_than"))
        if status:
            raise last_error(status)
        if forget_older_than is not None:
            # 0 would mean "keep them" to the library.
            options.forget_older_than_ms = _positive_ms(forget_older_than, "forget_older_than")
        if batch is not None:
            options.batch = _check_range(batch, "batch", 1, 2**32 - 1, "1 to 3000 rows")
        if pause is not None:
            options.pause_ms = _duration_ms(pause, "pause", 2**32 - 1)
        if max_time is not None:
            # 0 would mean "no limit" to the library.
            options.max_time_ms = _positive_ms(max_time, "max_time")
        out = _lib.sp_prune_report()
        self._invoke(_LIB.sp_journal_prune, ctypes.byref(options), ctypes.byref(out))
        return PruneReport(
            compacted=out.compacted,
            forgotten=out.forgotten,
            refused_removed=out.refused_removed,
            conflicts_removed=out.conflicts_removed,
            batches=out.batches,
            longest_batch_us=out.longest_batch_us,
            bytes_returned=out.bytes_returned,
            complete=out.complete,
            export_running=out.export_running,
        )

    # The operator's side. Each decision takes a note (required, at most 4096 bytes of text) that
    # the journal keeps for audit; the library refuses a blank one (ConfigurationError, field
    # "note"). Decisions are written in one transaction, visible to every process at once.

    def resolve(self, first: int, last: int, note: str) -> int:
        """Closes the missing indexes ``first`` to ``last`` (inclusive) by hand: events the
        service confirms do not exist, or that were settled another way. They no longer count as
        missing and recovery no longer fetches them; the range is listed by ``resolutions()``
        with ``note``. Returns how many of its indexes were missing.

        Raises ConfigurationError for a range that is not one or reaches beyond the highest index
        seen (field ``range``) or a blank note (``note``); JournalError when the storage fails.
        """
        first = _check_range(first, "first", *_INT64, "an index")
        last = _check_range(last, "last", *_INT64, "an index")
        closed = ctypes.c_uint64()
        self._invoke(_LIB.sp_journal_resolve, first, last, c_text(note, "note"), ctypes.byref(closed))
        return closed.value

    def accept_jump(self, id: int, note: str) -> None:  # noqa: A002 (the library's name)
        """Accepts the open index jump or reused index ``id`` (an entry of ``index_jumps()``): the
        numbering really moved, and a jump's stretch holds no events. Raises ConfigurationError
        when no open entry has this id (field ``id``) or for a blank note (``note``)."""
        self._invoke(_LIB.sp_journal_accept_jump, _check_range(id, "id", *_INT64, "an id"), c_text(note, "note"))

    def jump_is_gap(self, id: int, note: str) -> None:  # noqa: A002
        """Declares the open index jump ``id`` a gap: the stretch between the highest index before
        it and the jump counts as missing again, for a recovery to fetch (a real outage longer
        than ``max_index_jump``). Raises like ``accept_jump``."""
        self._invoke(_LIB.sp_journal_jump_is_gap, _check_range(id, "id", *_INT64, "an id"), c_text(note, "note"))

    def resolve_conflict(self, id: int, note: str) -> None:  # noqa: A002
        """Marks the open conflict ``id`` (an entry of ``conflicts()``) resolved, keeping ``note``.
        Raises ConfigurationError when no open conflict has this id (field ``id``) or for a blank
        note (``note``)."""
        self._invoke(_LIB.sp_journal_resolve_conflict, _check_range(id, "id", *_INT64, "an id"), c_text(note, "note"))

    def close_unfinished(self, index: int, note: str) -> int:
        """Closes by hand the unfinished deliveries (abandoned, or their lease ran out) carrying
        ``index``: an event the service answers 404 for, settled another way, or of an earlier
        numbering. They no longer count as unfinished (``status().unfinished``) and recovery no
        longer fetches them; a later delivery of such an event still runs as its next attempt.
        The closing is listed by ``resolutions()`` with ``note``. Returns how many deliveries were
        closed.

        Raises ConfigurationError when no unfinished delivery carries ``index`` (field
        ``index``) or for a blank note (``note``); JournalError when the storage fails.
        """
        index = _check_range(index, "index", *_INT64, "an index")
        closed = ctypes.c_uint64()
        self._invoke(_LIB.sp_journal_close_unfinished, index, c_text(note, "note"), ctypes.byref(closed))
        return closed.value

    def renumber(self, first: int, note: str, *, give_up_gaps: bool = False) -> int:
        """Starts a new numbering from index ``first`` after the service restarted its indexes:
        the seen indexes of the old numbering are archived, gap detection counts from ``first``
        afresh, open index jumps of the old numbering are settled, and every record and stored
        reply stays (events keyed by their index keep theirs apart from the new numbering's).
        Returns the new numbering (``status().numbering``). Refused while indexes of the current
        numbering are missing, unless ``give_up_gaps``: then each missing range is recorded as
        resolved (``resolutions()``) with the note "given up by renumbering from FIRST: NOTE".
        Raises ConfigurationError for a negative ``first`` or missing indexes without
        ``give_up_gaps`` (field ``first_index``), or a blank note (``note``)."""
        first = _check_range(first, "first", *_INT64, "an index")
        numbering = ctypes.c_int64()
        call = _LIB.sp_journal_renumber_giving_up_gaps if give_up_gaps else _LIB.sp_journal_renumber
        self._invoke(call, first, c_text(note, "note"), ctypes.byref(numbering))
        return numbering.value

    def backup(self, dest_path: str | os.PathLike[str]) -> None:
        """Copies a SQLite journal into a new file at ``dest_path`` while the workers go on
        writing (one foreign call, ``sp_journal_backup``; none of them is held up): the copy holds
        every delivery committed when the backup started, is written 0600 beside ``dest_path``
        and takes that name only once complete, so a failed backup leaves nothing there. The copy
        is a journal of its own: ``Journal(f"sqlite:{dest_path}")`` opens it. To restore it, stop
        every worker, remove the journal's ``-wal`` and ``-shm`` files and move the copy into the
        journal's place. A fork of this process waits for a backup in progress.

        Raises ConfigurationError for a ``dest_path`` that exists (a backup never replaces a
        file), names no file, or lies in a folder that does not exist or is not writable (field
        ``dest``), and for a PostgreSQL journal (field ``journal_url``: the message gives the
        ``pg_dump`` command, PostgreSQL having its own tools); JournalError when reading the
        journal or writing the copy fails.
        """
        if not isinstance(dest_path, (str, os.PathLike)):
            raise wrong_type("dest", dest_path, "a str or path")
        self._invoke(_LIB.sp_journal_backup, c_text(os.fsdecode(dest_path), "dest"))

    def export(
        self,
        path: str | os.PathLike[str],
        since: datetime.datetime | datetime.date | int,
        until: datetime.datetime | datetime.date | int | None = None,
        format: str = "csv",  # noqa: A002 (the library's name)
    ) -> int:
        """Writes every delivery whose first delivery lies in ``since`` to ``until`` (``until``
        left out; None: no end) to a new file at ``path``, for reconciliation with the service's
        reports (one foreign call, ``sp_journal_export``). Returns the number of rows.

        ``format`` is ``"csv"`` (RFC 4180 with a header row, lines ended by CRLF; read it with
        ``csv.reader(open(path, newline=""))``) or ``"jsonl"`` (one JSON object per line, None
        for an empty column). The columns: ``index``, ``key``, ``event``, ``transactionId``,
        ``playerIdentifier``, ``playerPartnerIdentifier``, ``moneyWon``, ``coinsWon``,
        ``isMoney``, ``currencyISO4217`` (empty for a refund), ``gameSessionId``, ``outcome``
        (``success``, ``failure`` or ``unknown`` as the stored reply tells; the state for a
        delivery not finished), ``errorMessage``, ``state``, ``attempts``, ``first_delivery``,
        ``last_update``, ``finished`` (RFC 3339 in UTC); docs/operating.md, "Reconciliation".

        ``since`` and ``until`` are each a ``datetime`` with a time zone (a naive one is refused:
        it would be read in the host's local time), a ``date`` (its midnight in UTC, as
        ``slotpartner journal export --since 2026-10-01`` reads it), or milliseconds since the
        Unix epoch. The file is created 0600 under a temporary name beside ``path`` and takes the
        name ``path`` only once complete: an existing file is never replaced. The journal is read
        1,000 rows at a time, each in a short read transaction: memory stays constant and the
        workers are never held up; the call returns when the file is in place.

        Raises ConfigurationError for an unusable ``path`` (field ``path``: it exists, its folder
        does not, it cannot be written), ``format`` (``format``), ``since`` or ``until`` (their
        name; ``until_ms`` when it is not after ``since``); BusyError while another export of the
        journal runs (one at a time: retention waits for it); JournalError when the storage fails.
        """
        formats = {"csv": _lib.SP_EXPORT_CSV, "jsonl": _lib.SP_EXPORT_JSONL}
        if format not in formats:
            raise argument_error("format", f"expected 'csv' or 'jsonl', got {format!r}")
        if not isinstance(path, (str, os.PathLike)):
            raise wrong_type("path", path, "a str or path")
        path_text = os.fsdecode(path)
        since_ms = _epoch_ms(since, "since")
        until_ms = _INT64[1] if until is None else _epoch_ms(until, "until")
        rows = ctypes.c_uint64()
        self._invoke(
            _LIB.sp_journal_export, since_ms, until_ms, formats[format], c_text(path_text, "path"), ctypes.byref(rows)
        )
        return rows.value

    def index_jumps(self, all: bool = False, limit: int = 100) -> list[dict[str, Any]]:  # noqa: A002
        """The index jumps, reused indexes and renumberings, newest first, at most ``limit``; the
        decided ones too when ``all``. Each a dict: ``id``, ``kind`` (``"jump"``, ``"reused"``,
        ``"renumbered"``), ``index``, ``previous_highest``, ``key``, ``name``, ``other_key``,
        ``count``, ``last_index``, ``numbering``, ``at_ms``, ``last_ms``, ``decision`` (None,
        ``"accepted"`` or ``"gap"``), ``decided_ms``, ``note``. Times are milliseconds since the
        Unix epoch."""
        return self._report(_lib.SP_JOURNAL_REPORT_INDEX_JUMPS, all, limit)

    def conflicts(self, all: bool = False, limit: int = 100) -> list[dict[str, Any]]:  # noqa: A002
        """The conflicts (a key delivered again with other decisive content), newest first, at most
        ``limit``; the resolved ones too when ``all``. Each a dict: ``id``, ``key``, ``name``,
        ``transaction_id``, ``index``, ``first_content``, ``now_content``, ``differing`` (a list
        of ``"field: first X, now Y"``), ``outcome`` (``"refused"``: the first was finished and
        this one got 409; ``"handed_out"``: the first was never finished and this one was handed
        out as new), ``count``, ``first_ms``, ``last_ms``, ``resolved_ms``, ``note``."""
        return self._report(_lib.SP_JOURNAL_REPORT_CONFLICTS, all, limit)

    def resolutions(self, limit: int = 100) -> list[dict[str, Any]]:
        """The ranges closed by hand (``resolve``), newest first, at most ``limit``. Each a dict:
        ``id``, ``first``, ``last``, ``closed`` (how many were missing), ``numbering``, ``note``,
        ``at_ms``. An unfinished delivery closed by hand (``close_unfinished``) is one with
        ``first`` and ``last`` its index, ``closed`` 0 and its key named in ``note``."""
        return self._report(_lib.SP_JOURNAL_REPORT_RESOLUTIONS, False, limit)

    def unrecoverable(self, limit: int = 100) -> list[int]:
        """The indexes recovery no longer fetches (HTTP 404 for ``not_found_limit`` runs),
        missing or carrying an unfinished delivery, in order, at most ``limit``. Missing ones stay
        missing until resolved by hand (``resolve``), unfinished ones unfinished until closed by
        hand (``close_unfinished``)."""
        return self._report(_lib.SP_JOURNAL_REPORT_UNRECOVERABLE, False, limit)

    def _report(self, kind: int, all: bool, limit: int) -> Any:  # noqa: A002
        """The JSON array ``sp_journal_report`` gives for ``kind``, decoded (two foreign calls:
        the report, ``sp_buffer_free``)."""
        _check_range(limit, "limit", 0, 2**64 - 1, "a non-negative integer")
        out = ctypes.c_void_p()
        self._invoke(_LIB.sp_journal_report, kind, bool(all), limit, ctypes.byref(out))
        address = out.value
        assert address
        try:
            ptr, length = _lib.STR.unpack(_MEMORY[address : address + _lib.STR.size])
            text = _lib.read_str(ptr, length)
        finally:
            _LIB.sp_buffer_free(address)
        return json.loads(text)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _epoch_ms(value: datetime.datetime | datetime.date | int, name: str) -> int:
    """``value`` (an aware ``datetime``, a ``date`` as its midnight in UTC, or milliseconds since
    the Unix epoch) in milliseconds since the Unix epoch; anything else is refused naming ``name``."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise argument_error(name, "a datetime needs a time zone (datetime.timezone.utc): a naive one is ambiguous")
        return (value - _EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.date):
        return (datetime.datetime.combine(value, datetime.time(), datetime.timezone.utc) - _EPOCH) // datetime.timedelta(
            milliseconds=1
        )
    return _check_range(value, name, *_INT64, "a datetime with a time zone, a date or milliseconds since the epoch")


def _positive_ms(value: datetime.timedelta | float, name: str) -> int:
    """``_duration_ms`` of a duration that must not be zero (the library reads 0 as "none")."""
    ms = _duration_ms(value, name)
    if ms == 0:
        raise argument_error(name, f"expected a positive duration, or None, got {value!r}")
    return ms


def _take_ranges(address: int | None) -> list[tuple[int, int]]:
    """The ranges of an ``sp_index_ranges`` the library handed out, copied, then freed."""
    assert address
    try:
        ptr, count = _RANGES.unpack(_MEMORY[address : address + _RANGES.size])
        if not count:
            return []
        return [(first, last) for first, last in _RANGE.iter_unpack(_MEMORY[ptr : ptr + count * _RANGE.size])]
    finally:
        _LIB.sp_index_ranges_free(address)


__all__ = ["Journal", "JournalStatus", "JournalVitals", "PruneReport"]
