"""``GuardedHandle``: a shared library object that ``close()`` may free while other threads use it."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, ClassVar, TypeVar

from ._lib import SharedHandle
from .errors import argument_error, last_error

_H = TypeVar("_H", bound="GuardedHandle")


class GuardedHandle(SharedHandle):
    """A ``SharedHandle`` that ``close()`` may free while other threads use it (a client, a
    journal): a call holds a count (``_enter``/``_leave``, or ``_invoke``), and ``close()`` takes
    the pointer away, waits for the count to reach zero, then frees it. Subclasses call
    ``_init_guard()`` first in ``__init__`` and name themselves in ``_noun`` for the error a call
    after ``close()`` raises."""

    _noun: ClassVar[str]
    _lock: threading.Condition
    _active: int

    def _init_guard(self) -> None:
        self._ptr = None
        self._lock = threading.Condition()
        self._active = 0
        _LIVE.add(self)

    def _after_fork_in_child(self) -> None:
        # Only the forking thread exists in the child: the calls other threads had in progress
        # are gone, and so is whoever held the lock.
        self._lock = threading.Condition()
        self._active = 0

    def _enter(self) -> int:
        with self._lock:
            if self._ptr is None:
                raise argument_error(self._noun, "is closed")
            self._active += 1
            return self._ptr

    def _leave(self) -> None:
        with self._lock:
            self._active -= 1
            if not self._active:
                self._lock.notify_all()

    def _invoke(self, function: Any, *args: Any) -> None:
        """Calls ``function(pointer, *args)`` with ``close()`` held off; raises the library's error."""
        ptr = self._enter()
        try:
            status = function(ptr, *args)
        finally:
            self._leave()
        if status:
            raise last_error(status)

    def _pointer(self) -> int:
        """The library's pointer, for handing to another object that keeps its own reference
        (raises ConfigurationError once closed)."""
        with self._lock:
            if self._ptr is None:
                raise argument_error(self._noun, "is closed")
            return self._ptr

    def close(self) -> None:
        """Waits for calls in progress on other threads, then frees the library's object
        (idempotent)."""
        with self._lock:
            ptr, self._ptr = self._ptr, None
            while self._active:
                self._lock.wait()
        if ptr is not None:
            type(self)._free(ptr)

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# Every guarded handle alive in this process, for the fork handler below.
_LIVE: weakref.WeakSet[GuardedHandle] = weakref.WeakSet()


def _reset_after_fork() -> None:
    """In a child of ``os.fork`` (or a ``multiprocessing`` fork worker): a lock another thread of
    the parent held at the fork, or a call it had in progress, would otherwise stay held and
    counted for ever, and the child's first call or ``close()`` would hang."""
    for handle in list(_LIVE):
        handle._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
