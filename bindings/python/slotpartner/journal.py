"""``Journal``: the delivery journal that makes a callback's effect happen once.

Open one per process from a URL and give it to the receiver (``Receiver(..., journal=journal)``);
then claim each event with ``event.begin()`` before running the partner's logic (see
``events.Event.begin`` and README.md, "Exactly once"). ``status()`` and ``missing()`` answer what
the journal has seen: counts, and the indexes that never arrived.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from . import _lib
from ._guard import GuardedHandle
from .errors import argument_error, last_error
from .replies import c_text

_LIB = _lib.lib
_MEMORY = _lib.MEMORY
_RANGE = _lib.INDEX_RANGE
_RANGES = _lib.INDEX_RANGES

#: The most ranges ``missing`` returns in one call (the library's limit).
MAX_MISSING_LIMIT = 1_000_000


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
        )

    def missing(self, limit: int = 1000) -> list[tuple[int, int]]:
        """The indexes never seen between the first index and the highest seen, as at most
        ``limit`` (1 to 1,000,000) inclusive ``(first, last)`` ranges in order. The cost grows
        with ``limit``, not with the deliveries. Two foreign calls (``sp_journal_missing``,
        ``sp_index_ranges_free``). Raises JournalError when the storage fails."""
        _check_range(limit, "limit", 1, MAX_MISSING_LIMIT, f"1 to {MAX_MISSING_LIMIT}")
        out = ctypes.c_void_p()
        self._invoke(_LIB.sp_journal_missing, limit, ctypes.byref(out))
        address = out.value
        assert address
        try:
            ptr, count = _RANGES.unpack(_MEMORY[address : address + _RANGES.size])
            if not count:
                return []
            return [(first, last) for first, last in _RANGE.iter_unpack(_MEMORY[ptr : ptr + count * _RANGE.size])]
        finally:
            _LIB.sp_index_ranges_free(address)


__all__ = ["Journal", "JournalStatus"]
