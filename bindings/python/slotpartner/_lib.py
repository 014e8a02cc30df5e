"""Loading ``libslotpartner`` and declaring its C ABI for ctypes.

This module is the only place that knows the C declarations of ``include/slotpartner.h``:
the structs (as ctypes ``Structure`` classes, field for field), the function signatures
(``argtypes``/``restype`` set once, at import), and fast readers derived from the structs.

Where the library is found, first match wins:

1. ``SLOTPARTNER_LIB``: the path of the shared library file (nothing else is tried when it is
   set, so a wrong path fails loudly);
2. ``libslotpartner.so`` next to this package (what ``pip install`` puts there);
3. ``target/release/libslotpartner.so`` of the checkout this package sits in (run from a
   checkout after ``make``);
4. the system's loader: ``libslotpartner.so.0`` (the installed SONAME), then ``libslotpartner.so``
   (``make install`` into ``/usr/local/lib``, ``ldconfig``).

When none loads, the ImportError lists every place looked at with why it failed, then what to do
(``LOAD_HELP``: ``make``, ``ldconfig``, ``LD_LIBRARY_PATH`` and the pkg-config ``libdir``,
``SLOTPARTNER_LIB``).

Reading library memory: every string leaves the library as an ``sp_str`` view (pointer and
length) owned by the object that returned it, and is copied out while that object is alive.
Structs are read in place through ctypes *views* (``view()``: each ``sp_str`` seen as a
``c_char_p`` and its length), whose string fields give the bytes directly. Arrays are copied
with ``MEMORY``, a ctypes ``c_char`` array laid over the whole address space: slicing it
(``MEMORY[ptr:ptr + n]``) copies ``n`` bytes into a new ``bytes`` object without a foreign call,
about four times cheaper than ``ctypes.string_at``; ``layout()`` unpacks such bytes. Only
addresses and lengths the library hands out, while their owner is alive, are ever read.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
from ctypes import (
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any, ClassVar, Protocol, cast

if sys.maxsize < 2**63 - 1:
    raise ImportError("slotpartner: the Python binding needs a 64-bit Python")

#: The header version this binding mirrors (``SP_VERSION_MAJOR``/``_MINOR`` of slotpartner.h).
HEADER_VERSION = (0, 1)

LIBRARY_NAME = "libslotpartner.so"
# The name an installed library is loaded by (its SONAME): a runtime-only package ships this one,
# not the development link LIBRARY_NAME.
SONAME = "libslotpartner.so.0"

# sp_status values the binding refers to by name.
SP_OK = 0
SP_ERR_INVALID_ARGUMENT = 1
SP_ERR_PANIC = 2
SP_ERR_UNKNOWN_EVENT = 13
SP_ERR_BAD_RESPONSE = 21
SP_ERR_CONFLICT = 23
SP_ERR_JOURNAL = 24
SP_ERR_CLAIM_LOST = 25
SP_ERR_BUSY = 26

# sp_event_kind values.
SP_EVENT_KIND_BUY_REFUND = 1
SP_EVENT_KIND_JACKPOT_PAYOUT = 2
SP_EVENT_KIND_BALANCE_QUERY = 3
SP_EVENT_KIND_OTHER = 4

# sp_begin values (what sp_event_begin found).
SP_BEGIN_NEW = 1
SP_BEGIN_DONE = 2
SP_BEGIN_NOT_JOURNALED = 3

# sp_recovery_reason values (why a missing event was not recovered).
SP_RECOVERY_NOT_FOUND = 1
SP_RECOVERY_SERVICE = 2
SP_RECOVERY_INVALID_EVENT = 3
SP_RECOVERY_JOURNAL = 4

#: The most missing indexes one recovery takes on (the library's limit).
MAX_RECOVERY_LIMIT = 1_000_000

# sp_journal_report kinds (what the JSON array lists).
SP_JOURNAL_REPORT_INDEX_JUMPS = 1
SP_JOURNAL_REPORT_CONFLICTS = 2
SP_JOURNAL_REPORT_RESOLUTIONS = 3
SP_JOURNAL_REPORT_UNRECOVERABLE = 4

# sp_export_format values (sp_journal_export).
SP_EXPORT_CSV = 1
SP_EXPORT_JSONL = 2

# sp_sql_kind values (what an sp_sql_value of a staged statement holds).
SP_SQL_NULL = 0
SP_SQL_INT = 1
SP_SQL_TEXT = 2
SP_SQL_BLOB = 3

# sp_trust_roots values.
TRUST_ROOTS = {"bundled": 0, "system": 1, "extra-only": 2}


class sp_str(Structure):
    """``sp_str``: a borrowed UTF-8 view, ``{NULL, 0}`` for an absent optional value."""

    _fields_ = [("ptr", c_void_p), ("len", c_size_t)]


class sp_field(Structure):
    """``sp_field``: an extra field's name and raw JSON value."""

    _fields_ = [("name", sp_str), ("json", sp_str)]


class sp_buy_refund(Structure):
    _fields_ = [
        ("game_session_identifier", sp_str),
        ("player_identifier", sp_str),
        ("player_partner_identifier", sp_str),
        ("transaction_id", c_int64),
        ("buy_transaction_id", c_int64),
        ("game_session_id", c_int64),
        ("partner_game_request_identifier", sp_str),
        ("game_id", c_int64),
        ("is_mobile", c_bool),
        ("bonus_code", sp_str),
    ]


class sp_jackpot_payout(Structure):
    _fields_ = [
        ("jackpot_identifier", sp_str),
        ("player_identifier", sp_str),
        ("player_partner_identifier", sp_str),
        ("currency_iso4217", sp_str),
        ("money_won", c_int64),
        ("coins_won", c_int64),
        ("is_money", c_bool),
        ("epoch_released_millis", c_int64),
        ("is_primary", c_bool),
        ("transaction_id", c_int64),
        ("buy_transaction_id", c_int64),
        ("partner_game_request_identifier", sp_str),
        ("game_session_id", c_int64),
        ("game_id", c_int64),
        ("bonus_code", sp_str),
        ("has_is_mobile", c_bool),
        ("is_mobile", c_bool),
    ]


class sp_balance_query(Structure):
    _fields_ = [("player_identifier", sp_str), ("player_partner_identifier", sp_str)]


class sp_event(Structure):
    _fields_ = [
        ("kind", c_int),
        ("name", sp_str),
        ("has_index", c_bool),
        ("index", c_int64),
        ("buy_refund", c_void_p),
        ("jackpot_payout", c_void_p),
        ("balance_query", c_void_p),
        ("extra_fields", c_void_p),
        ("extra_fields_len", c_size_t),
        ("index_unreadable", c_bool),
        ("reply_http_status", c_uint16),
        ("strings", c_void_p),
        ("strings_len", c_size_t),
    ]


class sp_record(Structure):
    """``sp_record``: the header of a record ``sp_receiver_handle_record`` writes into a buffer of
    ours; the strings block follows it."""

    _fields_ = [
        ("size", c_size_t),
        ("strings_len", c_size_t),
        ("extra_fields_len", c_size_t),
        ("kind", c_int),
        ("has_index", c_bool),
        ("index_unreadable", c_bool),
        ("has_is_mobile", c_bool),
        ("is_mobile", c_bool),
        ("index", c_int64),
        ("transaction_id", c_int64),
        ("buy_transaction_id", c_int64),
        ("game_session_id", c_int64),
        ("game_id", c_int64),
        ("money_won", c_int64),
        ("coins_won", c_int64),
        ("epoch_released_millis", c_int64),
        ("is_money", c_bool),
        ("is_primary", c_bool),
    ]


class sp_header(Structure):
    """``sp_header``: one header of an endpoint's response, both views owned by the exchange."""

    _fields_ = [("name", sp_str), ("value", sp_str)]


class sp_response(Structure):
    """``sp_response``: the final response of an exchange (``status`` 0 while it waits for
    ``sp_exchange_complete``); every view owned by the exchange."""

    _fields_ = [
        ("status", c_uint16),
        ("body", sp_str),
        ("headers", c_void_p),
        ("headers_len", c_size_t),
        ("log", sp_str),
    ]


class sp_exchange(Structure):
    """``sp_exchange``: one request through an endpoint; ``event`` NULL when ``response`` is
    final. The event is the exchange's: never freed by the binding."""

    _fields_ = [("event", c_void_p), ("response", sp_response)]


#: Offset of ``sp_event.reply_http_status``: read in place after a reply is built (no foreign call).
REPLY_HTTP_STATUS_OFFSET: int = sp_event.reply_http_status.offset


class sp_game(Structure):
    _fields_ = [
        ("game_id", c_int64),
        ("name", sp_str),
        ("rules", c_void_p),
        ("rules_len", c_size_t),
        ("game_type", sp_str),
        ("min_players", c_int64),
        ("max_players", c_int64),
        ("supports_tournament", c_bool),
        ("has_categories", c_bool),
        ("categories", c_void_p),
        ("categories_len", c_size_t),
        ("image_square", sp_str),
        ("image_background", sp_str),
        ("image_logo", sp_str),
        ("description_short", sp_str),
        ("description_long", sp_str),
        ("extra_fields", c_void_p),
        ("extra_fields_len", c_size_t),
    ]


class sp_games(Structure):
    _fields_ = [("games", c_void_p), ("len", c_size_t)]


class sp_buffer(Structure):
    _fields_ = [("text", sp_str)]


class sp_error(Structure):
    """``sp_error``: the calling thread's whole last failure, from ``sp_last_error``."""

    _fields_ = [
        ("status", c_int),
        ("message", sp_str),
        ("field", sp_str),
        ("http_status", c_uint16),
        ("response_body", sp_str),
        ("event_name", sp_str),
        ("has_index", c_bool),
        ("index", c_int64),
        ("has_transaction_id", c_bool),
        ("transaction_id", c_int64),
    ]


class sp_claim(Structure):
    """``sp_claim``: the answer of ``sp_event_begin``; ``reply`` is owned by the event."""

    _fields_ = [("outcome", c_int), ("attempt", c_int64), ("reply", sp_str)]


class sp_journal_stats(Structure):
    """``sp_journal_stats``: a journal's counts and gap figures, from ``sp_journal_status``."""

    _fields_ = [
        ("handled", c_uint64),
        ("replayed", c_uint64),
        ("conflicts", c_uint64),
        ("refused", c_uint64),
        ("in_progress", c_uint64),
        ("missing", c_uint64),
        ("has_first_index", c_bool),
        ("first_index", c_int64),
        ("has_highest_index", c_bool),
        ("highest_index", c_int64),
        ("has_watermark", c_bool),
        ("watermark", c_int64),
        ("unfinished", c_uint64),
        ("open_conflicts", c_uint64),
        ("index_jumps", c_uint64),
        ("resolved", c_uint64),
        ("unrecoverable", c_uint64),
        ("numbering", c_int64),
    ]


class sp_journal_vital_signs(Structure):
    """``sp_journal_vital_signs``: what retention did, the journal's size and ages, from
    ``sp_journal_vitals``."""

    _fields_ = [
        ("pruned", c_uint64),
        ("forgotten", c_uint64),
        ("has_size_bytes", c_bool),
        ("size_bytes", c_uint64),
        ("has_oldest_record_ms", c_bool),
        ("oldest_record_ms", c_int64),
        ("has_last_delivery_ms", c_bool),
        ("last_delivery_ms", c_int64),
        ("has_oldest_gap_ms", c_bool),
        ("oldest_gap_ms", c_int64),
    ]


class sp_prune_options(Structure):
    """``sp_prune_options``: what ``sp_journal_prune`` removes (``sp_prune_options_default``)."""

    _fields_ = [
        ("older_than_ms", c_uint64),
        ("forget_older_than_ms", c_uint64),
        ("batch", c_uint32),
        ("pause_ms", c_uint32),
        ("max_time_ms", c_uint64),
    ]


class sp_prune_report(Structure):
    """``sp_prune_report``: what ``sp_journal_prune`` did."""

    _fields_ = [
        ("compacted", c_uint64),
        ("forgotten", c_uint64),
        ("refused_removed", c_uint64),
        ("conflicts_removed", c_uint64),
        ("batches", c_uint64),
        ("longest_batch_us", c_uint64),
        ("bytes_returned", c_uint64),
        ("complete", c_bool),
        ("export_running", c_bool),
    ]


class sp_index_range(Structure):
    """``sp_index_range``: missing indexes ``first`` to ``last``, inclusive."""

    _fields_ = [("first", c_int64), ("last", c_int64)]


class sp_index_ranges(Structure):
    """``sp_index_ranges``: ``len`` ranges at ``ranges``, from ``sp_journal_missing``."""

    _fields_ = [("ranges", c_void_p), ("len", c_size_t)]


class sp_recovery_failure(Structure):
    """``sp_recovery_failure``: a missing index that was not recovered, why, and the message."""

    _fields_ = [("index", c_int64), ("reason", c_int), ("status", c_int), ("message", sp_str)]


class sp_recovery_summary(Structure):
    """``sp_recovery_summary``: what a recovery did so far; ``failures`` owned by the recovery."""

    _fields_ = [
        ("missing", c_uint64),
        ("recovered", c_uint64),
        ("handled_meanwhile", c_uint64),
        ("failures", c_void_p),
        ("failures_len", c_size_t),
        ("unrecoverable", c_size_t),
    ]


class sp_sql_value(Structure):
    """``sp_sql_value``: one parameter of a staged statement (``sp_event_stage``), by ``kind``
    (``SP_SQL_*``): ``int_value``, or ``len`` bytes at ``bytes``; copied by the library."""

    _fields_ = [("kind", c_uint32), ("int_value", c_int64), ("bytes", c_void_p), ("len", c_size_t)]


def layout(structure: type[Structure], skip: tuple[type, ...] = ()) -> struct.Struct:
    """A ``struct.Struct`` that unpacks the bytes of ``structure`` in one call.

    Derived from the ctypes declaration (offsets, sizes, padding), so it cannot drift from it.
    Nested ``sp_str`` fields become two values (pointer, length); a NULL pointer unpacks as 0.
    Fields of a type in ``skip`` are passed over (``layout(s, (sp_str,))`` gives the scalars
    alone, in declaration order).
    """
    codes = {c_bool: "?", c_int: "i", c_int64: "q"}
    unsigned = {1: "B", 2: "H", 4: "I", 8: "Q"}
    fmt = "="
    position = 0

    def add(ctype: Any, offset: int) -> None:
        nonlocal fmt, position
        if ctype in skip:
            return
        if offset > position:
            fmt += f"{offset - position}x"
            position = offset
        if isinstance(ctype, type) and issubclass(ctype, Structure):
            for entry in ctype._fields_:
                add(entry[1], offset + getattr(ctype, entry[0]).offset)
            return
        fmt += codes.get(ctype) or unsigned[ctypes.sizeof(ctype)]
        position = offset + ctypes.sizeof(ctype)

    add(structure, 0)
    if ctypes.sizeof(structure) > position:
        fmt += f"{ctypes.sizeof(structure) - position}x"
    result = struct.Struct(fmt)
    assert result.size == ctypes.sizeof(structure), (structure, fmt)
    return result


def view(structure: type[Structure]) -> type[Structure]:
    """The same struct with each ``sp_str`` as ``(c_char_p ptr, c_size_t ptr_len)``.

    Reading a ``c_char_p`` field of a view gives the string's bytes directly (None for NULL):
    every ``sp_str`` is NUL-terminated without a NUL inside, so this equals its ``len`` bytes,
    and it is the cheapest way to copy a string out of library memory with ctypes.
    """
    fields: list[tuple[str, Any]] = []
    for entry in structure._fields_:
        name, ctype = entry[0], entry[1]
        if ctype is sp_str:
            fields += [(name, c_char_p), (name + "_len", c_size_t)]
        else:
            fields.append((name, ctype))
    result = type(structure.__name__ + "_view", (Structure,), {"_fields_": fields})
    assert ctypes.sizeof(result) == ctypes.sizeof(structure)
    return result


class StrView(Structure):
    """``sp_str`` read as ``(c_char_p ptr, c_size_t len)``: ``.ptr`` gives the bytes."""

    _fields_ = [("ptr", c_char_p), ("len", c_size_t)]


FieldView = view(sp_field)
ClaimView = view(sp_claim)


# Unpackers of the structs read as arrays (``.size`` bytes each).
FIELD = layout(sp_field)
STR = layout(sp_str)
GAME = layout(sp_game)
GAMES = layout(sp_games)
INDEX_RANGE = layout(sp_index_range)
INDEX_RANGES = layout(sp_index_ranges)
RECOVERY_FAILURE = layout(sp_recovery_failure)
RECORD = layout(sp_record)
#: ``sp_sql_value`` packed (kind, int_value, address of the bytes or 0, len).
SQL_VALUE = layout(sp_sql_value)
#: ``sp_exchange`` in one call: event, status, body (pointer, length), headers (pointer, count),
#: log (pointer, length).
EXCHANGE = layout(sp_exchange)
RECORD_HEADER = ctypes.sizeof(sp_record)


class Memory(Protocol):
    """What MEMORY offers: a slice copies bytes."""

    def __getitem__(self, span: slice) -> bytes: ...


#: The address space as one byte array: ``MEMORY[ptr:ptr + n]`` copies ``n`` bytes at ``ptr``.
MEMORY = cast(Memory, (c_char * sys.maxsize).from_address(0))


def read_str(ptr: int, length: int) -> str:
    """Copies the sp_str view ``(ptr, length)`` into a Python str (the view must be alive)."""
    return MEMORY[ptr : ptr + length].decode()


def read_fields(ptr: int | None, count: int) -> dict[str, str]:
    """Copies ``count`` ``sp_field`` entries at ``ptr`` into ``{name: raw JSON}``, in order."""
    fields: dict[str, str] = {}
    if count == 1 and ptr:  # the common case: the index alone
        field = FieldView.from_address(ptr)
        fields[field.name.decode()] = field.json.decode()
    elif count and ptr:
        memory = MEMORY
        for n, nl, j, jl in FIELD.iter_unpack(memory[ptr : ptr + count * FIELD.size]):
            fields[memory[n : n + nl].decode()] = memory[j : j + jl].decode()
    return fields


def read_str_array(ptr: int | None, count: int) -> list[str]:
    """Copies ``count`` ``sp_str`` entries at ``ptr`` into a list of str."""
    if not count or not ptr:
        return []
    memory = MEMORY
    return [memory[p : p + n].decode() for p, n in STR.iter_unpack(memory[ptr : ptr + count * STR.size])]


#: The size of each thread's scratch for a staged statement's parameters (``OutSlots.sql_values``).
SCRATCH_BYTES = 4096


class OutSlots(threading.local):
    """Per-thread out-parameters, allocated once per thread instead of once per call.

    ``pointer`` receives an object pointer (``sp_event *``...), ``text`` an ``sp_str`` (read
    through ``StrView``: ``text.ptr`` gives the bytes), ``claim`` an ``sp_claim`` (read through
    ``ClaimView``: ``claim.reply`` gives the bytes); the ``*_address`` attributes are what
    the hot functions take (their out-parameters are declared ``c_void_p``, which costs less
    per call than a checked ``byref``). ``record`` is the buffer ``sp_receiver_handle_record``
    writes a callback's event into (grown when one does not fit), ``size`` the size it reports;
    ``sql_values()`` lays a staged statement's parameters out in ``scratch``. Read a slot right
    after the call that wrote it.
    """

    def __init__(self) -> None:
        self.pointer = c_void_p()
        self.pointer_address = ctypes.addressof(self.pointer)
        self.text = StrView()
        self.text_address = ctypes.addressof(self.text)
        self.claim = ClaimView()
        self.claim_address = ctypes.addressof(self.claim)
        self.size = c_size_t()
        self.size_address = ctypes.addressof(self.size)
        self.grow_record(RECORD_HEADER + 4096)
        self.scratch = (c_uint64 * (SCRATCH_BYTES // 8))()
        self.scratch_address = ctypes.addressof(self.scratch)
        self.scratch_bytes = memoryview(self.scratch).cast("B")

    def sql_values(self, values: list[tuple[int, int, bytes | None, int]]) -> tuple[int, Any]:
        """``values`` (``(kind, int_value, bytes or None, len)`` each) as an ``sp_sql_value``
        array for ``sp_event_stage``: its address, and the buffer that holds it, to keep alive
        until the call returns. Each value's bytes are copied after the array (None is a NULL
        pointer). Laid out in this thread's ``scratch`` (valid until the next ``sql_values`` of
        this thread), or in a buffer of its own when they do not fit: one ``struct`` call a value
        instead of a ctypes struct built from a tuple, about four times cheaper."""
        size = SQL_VALUE.size
        at = len(values) * size
        needed = at + sum([value[3] for value in values])  # an int's and a NULL's are 0
        if needed <= SCRATCH_BYTES:
            buffer, address, memory = self.scratch, self.scratch_address, self.scratch_bytes
        else:
            buffer = (c_uint64 * -(-needed // 8))()
            address, memory = ctypes.addressof(buffer), memoryview(buffer).cast("B")
        pack, offset = SQL_VALUE.pack_into, 0
        for kind, number, data, length in values:
            if data is None:
                pack(memory, offset, kind, number, 0, 0)
            else:
                end = at + length
                memory[at:end] = data
                pack(memory, offset, kind, number, address + at, length)
                at = end
            offset += size
        return address, buffer

    def grow_record(self, capacity: int) -> None:
        """Makes ``record`` a buffer of at least ``capacity`` bytes (aligned for ``sp_record``),
        for ``sp_receiver_handle_record``. ``record_args`` holds, in one tuple (one lookup of a
        thread-local attribute instead of five), the call's last three arguments as ctypes values
        (the buffer's address, its ``record_capacity``, the address of ``size``), then the
        buffer itself and the address of the strings after the record's header."""
        self.record = (c_uint64 * -(-capacity // 8))()
        self.record_capacity = ctypes.sizeof(self.record)
        self.record_args = (
            c_void_p(ctypes.addressof(self.record)),
            c_size_t(self.record_capacity),
            c_void_p(self.size_address),
            self.record,
            ctypes.addressof(self.record) + RECORD_HEADER,
        )


OUT = OutSlots()


def _candidates() -> list[tuple[str, str]]:
    """Where to look for the library, in order (see the module docstring): (path or bare name,
    where it comes from). Every place is listed, also a file that does not exist, so that a
    failure can say where it looked."""
    explicit = os.environ.get("SLOTPARTNER_LIB")
    if explicit:
        return [(explicit, "SLOTPARTNER_LIB; nothing else is tried while it is set")]
    here = Path(__file__).resolve().parent
    search = os.environ.get("LD_LIBRARY_PATH")
    loader = f"the system loader: LD_LIBRARY_PATH={search or '(unset)'}, then the ldconfig cache"
    return [
        (str(here / LIBRARY_NAME), "next to the package, where `pip install` puts it"),
        (str(here.parent.parent.parent / "target" / "release" / LIBRARY_NAME), "the checkout's `make`"),
        # Last, the bare names for the dynamic loader's own search, the SONAME first.
        (SONAME, loader),
        (LIBRARY_NAME, loader),
    ]


#: What to do when no library loads.
LOAD_HELP = (
    "Build it with `make` in the checkout (then `pip install ./bindings/python` bundles it), or "
    "install it with `make install PREFIX=/usr/local` and run `ldconfig`; for a library in a "
    "directory the loader does not search, add that directory to LD_LIBRARY_PATH (for an "
    "installed one: `pkg-config --variable=libdir slotpartner`), or set SLOTPARTNER_LIB to the "
    "library file."
)


def load() -> ctypes.CDLL:
    """Loads the library (see the module docstring) and checks its version against the header.

    Raises ImportError when no library is found, listing every place looked at and what to do,
    or when its version does not match.
    """
    tried = []
    for path, where in _candidates():
        if "/" in path and not os.path.exists(path):
            tried.append(f"{path} ({where}): no such file")
            continue
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as error:
            tried.append(f"{path} ({where}): {error}")
    else:
        raise ImportError(
            f"slotpartner: cannot load {LIBRARY_NAME}; looked at:\n"
            + "".join(f"  {line}\n" for line in tried)
            + LOAD_HELP
        )
    lib.sp_version.argtypes = []
    lib.sp_version.restype = c_char_p
    version = lib.sp_version().decode()
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) != HEADER_VERSION:
        raise ImportError(
            f"slotpartner: {lib._name} is version {version}; this binding mirrors the header "
            f"{HEADER_VERSION[0]}.{HEADER_VERSION[1]}.x"
        )
    _declare(lib)
    return lib


# name: (restype, argtypes). Every function of slotpartner.h; a test checks the list against it.
# The out-parameters of the per-callback functions (handle, parse, event replies) are plain
# ``c_void_p`` addresses of OUT slots; the others are checked pointers taking ``byref``.
_OUT = POINTER(c_void_p)
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    # Version and errors.
    "sp_version": (c_char_p, []),
    "sp_status_name": (c_char_p, [c_int32]),
    "sp_last_error_message": (sp_str, []),
    "sp_last_error_field": (sp_str, []),
    "sp_last_error_response": (c_int, [POINTER(c_uint16), POINTER(sp_str)]),
    "sp_last_error": (c_int, [POINTER(sp_error)]),
    # Receiver configuration.
    "sp_receiver_config_new": (c_int, [_OUT]),
    "sp_receiver_config_free": (None, [c_void_p]),
    "sp_receiver_config_add_token": (c_int, [c_void_p, c_char_p]),
    "sp_receiver_config_set_sources": (c_int, [c_void_p, c_char_p]),
    "sp_receiver_config_set_trusted_proxies": (c_int, [c_void_p, c_char_p]),
    "sp_receiver_config_set_max_body_bytes": (c_int, [c_void_p, c_size_t]),
    "sp_receiver_config_set_max_depth": (c_int, [c_void_p, c_size_t]),
    "sp_receiver_config_set_max_identifier_bytes": (c_int, [c_void_p, c_size_t]),
    "sp_receiver_config_set_index_field": (c_int, [c_void_p, c_char_p]),
    "sp_receiver_config_set_strict_index": (c_int, [c_void_p, c_bool]),
    "sp_receiver_config_set_reject_unknown_events": (c_int, [c_void_p, c_bool]),
    "sp_receiver_config_set_balance_wrapper": (c_int, [c_void_p, c_char_p]),
    "sp_receiver_config_set_balance_currency": (c_int, [c_void_p, c_char_p]),
    "sp_receiver_config_set_balance_failure_http_status": (c_int, [c_void_p, c_uint16]),
    "sp_receiver_config_set_omit_empty_error_message": (c_int, [c_void_p, c_bool]),
    "sp_receiver_config_set_journal": (c_int, [c_void_p, c_void_p]),
    # Receiver and events.
    "sp_receiver_new": (c_int, [c_void_p, _OUT]),
    "sp_receiver_free": (None, [c_void_p]),
    "sp_receiver_handle": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_char_p, c_size_t, c_void_p]),
    "sp_receiver_authenticate": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p]),
    "sp_receiver_parse": (c_int, [c_void_p, c_char_p, c_size_t, c_void_p]),
    "sp_receiver_handle_record": (
        c_int,
        [c_void_p, c_char_p, c_char_p, c_char_p, c_char_p, c_size_t, c_void_p, c_size_t, c_void_p],
    ),
    "sp_event_free": (None, [c_void_p]),
    "sp_event_reply": (c_int, [c_void_p, c_bool, c_char_p, c_void_p]),
    "sp_event_reply_balance": (c_int, [c_void_p, c_int64, c_char_p, c_int64, c_void_p]),
    "sp_event_field": (c_int, [c_void_p, c_char_p, POINTER(sp_str)]),
    # The journal's per-callback steps (out-parameter: the OUT claim slot's address).
    "sp_event_begin": (c_int, [c_void_p, c_void_p]),
    "sp_event_differing": (c_int, [c_void_p, c_void_p]),
    "sp_event_finish": (c_int, [c_void_p, c_char_p, c_size_t]),
    "sp_event_abandon": (c_int, [c_void_p]),
    "sp_event_reply_pruned": (c_bool, [c_void_p]),
    # Statements of the partner's own, run by sp_event_finish in the transaction storing the
    # reply (params: the address of an sp_sql_value array, OutSlots.sql_values).
    "sp_event_stage": (c_int, [c_void_p, c_char_p, c_size_t, c_void_p, c_size_t]),
    # Delivery journal.
    "sp_journal_config_new": (c_int, [c_char_p, _OUT]),
    "sp_journal_config_free": (None, [c_void_p]),
    "sp_journal_config_set_lease_ms": (c_int, [c_void_p, c_uint64]),
    "sp_journal_config_set_busy_wait_ms": (c_int, [c_void_p, c_uint64]),
    "sp_journal_config_set_durable": (c_int, [c_void_p, c_bool]),
    "sp_journal_config_set_claim_at_finish": (c_int, [c_void_p, c_bool]),
    "sp_journal_config_set_first_index": (c_int, [c_void_p, c_int64]),
    "sp_journal_config_set_max_reply_bytes": (c_int, [c_void_p, c_size_t]),
    "sp_journal_config_set_lock_timeout_ms": (c_int, [c_void_p, c_uint64]),
    "sp_journal_config_set_command_timeout_ms": (c_int, [c_void_p, c_uint64]),
    "sp_journal_config_set_max_index_jump": (c_int, [c_void_p, c_int64]),
    "sp_journal_config_set_not_found_limit": (c_int, [c_void_p, c_uint32]),
    "sp_journal_open": (c_int, [c_void_p, _OUT]),
    "sp_journal_free": (None, [c_void_p]),
    "sp_journal_status": (c_int, [c_void_p, POINTER(sp_journal_stats)]),
    "sp_journal_missing": (c_int, [c_void_p, c_size_t, _OUT]),
    "sp_index_ranges_free": (None, [c_void_p]),
    # Retention and vital signs.
    "sp_journal_config_set_retention_ms": (c_int, [c_void_p, c_uint64]),
    "sp_prune_options_default": (c_int, [POINTER(sp_prune_options), c_uint64]),
    "sp_journal_prune": (c_int, [c_void_p, POINTER(sp_prune_options), POINTER(sp_prune_report)]),
    "sp_journal_vitals": (c_int, [c_void_p, POINTER(sp_journal_vital_signs)]),
    "sp_journal_missing_older_than": (c_int, [c_void_p, c_uint64, c_size_t, _OUT]),
    # The operator's side of the journal: decisions kept with a note, and the lists to decide on
    # (a JSON array in an sp_buffer).
    "sp_journal_resolve": (c_int, [c_void_p, c_int64, c_int64, c_char_p, POINTER(c_uint64)]),
    "sp_journal_accept_jump": (c_int, [c_void_p, c_int64, c_char_p]),
    "sp_journal_jump_is_gap": (c_int, [c_void_p, c_int64, c_char_p]),
    "sp_journal_resolve_conflict": (c_int, [c_void_p, c_int64, c_char_p]),
    "sp_journal_close_unfinished": (c_int, [c_void_p, c_int64, c_char_p, POINTER(c_uint64)]),
    "sp_journal_renumber": (c_int, [c_void_p, c_int64, c_char_p, POINTER(c_int64)]),
    "sp_journal_renumber_giving_up_gaps": (c_int, [c_void_p, c_int64, c_char_p, POINTER(c_int64)]),
    "sp_journal_report": (c_int, [c_void_p, c_int32, c_bool, c_size_t, _OUT]),
    # A copy of a live SQLite journal.
    "sp_journal_backup": (c_int, [c_void_p, c_char_p]),
    # The deliveries of a period written to a file, for reconciliation.
    "sp_journal_export": (c_int, [c_void_p, c_int64, c_int64, c_int32, c_char_p, POINTER(c_uint64)]),
    # Standalone replies.
    "sp_reply_result_new": (c_int, [c_char_p, c_bool, c_char_p, c_bool, _OUT]),
    "sp_reply_balance_new": (c_int, [c_char_p, c_int64, c_char_p, c_int64, c_char_p, _OUT]),
    # A receiver's balance reply into a caller's buffer (for C hosts: the binding completes its
    # own template instead, without a call).
    "sp_receiver_reply_balance": (c_int, [c_void_p, c_int64, c_char_p, c_int64, c_void_p, c_size_t, c_void_p]),
    "sp_buffer_free": (None, [c_void_p]),
    # Client.
    "sp_client_config_new": (c_int, [c_char_p, c_char_p, _OUT]),
    "sp_client_config_free": (None, [c_void_p]),
    "sp_client_config_set_connect_timeout_ms": (c_int, [c_void_p, c_uint64]),
    "sp_client_config_set_timeout_ms": (c_int, [c_void_p, c_uint64]),
    "sp_client_config_set_retries": (c_int, [c_void_p, c_uint32, c_uint64]),
    "sp_client_config_set_trust_roots": (c_int, [c_void_p, c_int32]),
    "sp_client_config_add_ca_pem": (c_int, [c_void_p, c_char_p, c_size_t]),
    "sp_client_config_add_ca_file": (c_int, [c_void_p, c_char_p]),
    "sp_client_config_set_proxy": (c_int, [c_void_p, c_char_p]),
    "sp_client_config_set_max_response_bytes": (c_int, [c_void_p, c_uint64]),
    "sp_client_config_set_fetch_action": (c_int, [c_void_p, c_char_p]),
    "sp_client_config_set_fetch_index_param": (c_int, [c_void_p, c_char_p]),
    "sp_client_config_set_fetch_event_key": (c_int, [c_void_p, c_char_p]),
    "sp_client_config_set_lenient_games": (c_int, [c_void_p, c_bool]),
    "sp_client_new": (c_int, [c_void_p, _OUT]),
    "sp_client_free": (None, [c_void_p]),
    "sp_client_get_games": (c_int, [c_void_p, c_char_p, c_int64, _OUT]),
    "sp_client_call": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t, _OUT]),
    "sp_games_free": (None, [c_void_p]),
    # The endpoint in one call: a whole request in (sp_endpoint_receive), the final response out
    # (sp_exchange_complete after the partner's logic ran on the exchange's event). The exchange
    # travels as its address (c_void_p: the out-parameter is OUT.pointer_address, the exchange is
    # read with EXCHANGE), cheaper per call than a checked POINTER(sp_exchange).
    "sp_endpoint_new": (c_int, [c_void_p, c_void_p, _OUT]),
    "sp_endpoint_from_settings": (c_int, [c_char_p, c_size_t, _OUT]),
    "sp_endpoint_shared": (c_int, [c_char_p, c_size_t, _OUT]),
    # PHP's, whose every request finds its endpoint again by the raw texts of the variables; a
    # Python process makes its endpoint once: declared for completeness, unused by the package.
    "sp_endpoint_shared_keyed": (c_int, [c_char_p, c_size_t, c_char_p, c_size_t, _OUT]),
    "sp_endpoint_set_retry_after": (c_int, [c_void_p, c_uint32]),
    "sp_endpoint_free": (None, [c_void_p]),
    "sp_endpoint_receive": (
        c_int,
        [c_void_p, c_char_p, c_char_p, c_char_p, c_char_p, c_char_p, c_size_t, c_void_p],
    ),
    "sp_exchange_complete": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t]),
    "sp_exchange_free": (None, [c_void_p]),
    # A CGI program's (sp_endpoint_from_environment reads SLOTPARTNER_*, the CGI calls read the
    # request's variables and standard input): declared for completeness, unused by the package.
    "sp_endpoint_from_environment": (c_int, [_OUT]),
    "sp_endpoint_receive_cgi": (c_int, [c_void_p, POINTER(POINTER(sp_exchange))]),
    "sp_exchange_write_cgi": (c_int, [POINTER(sp_exchange), c_int]),
    "sp_http_reason": (c_char_p, [c_uint16]),
    # Recovery of lost events (sp_recovery_next's out-parameter: the OUT pointer slot's address).
    "sp_recovery_new": (c_int, [c_void_p, c_void_p, c_size_t, _OUT]),
    "sp_recovery_next": (c_int, [c_void_p, c_void_p]),
    "sp_recovery_report": (c_int, [c_void_p, POINTER(sp_recovery_summary)]),
    "sp_recovery_free": (None, [c_void_p]),
}


def _declare(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes


lib = load()

#: ``sp_receiver_handle_record`` once more, without ``argtypes``: the one call of a callback,
#: where ctypes' conversion of nine declared arguments costs about 0.4 µs. UNCHECKED: every
#: argument must already have its C type: ``c_void_p`` and ``c_size_t`` instances, and ``bytes``
#: or None for the strings (a plain int would travel as a C ``int``). Only ``Receiver.handle``
#: calls it, with arguments it builds itself (``OutSlots.record_args`` for the last three).
handle_record_unchecked = lib["sp_receiver_handle_record"]
handle_record_unchecked.restype = c_int


class SharedHandle:
    """A library object shared by design (a receiver, a client): a copy is the same object and
    never a second owner, it cannot be pickled, and the library's object is freed once when this
    one is collected. Subclasses set ``_free`` to the library's ``_free`` function and keep the
    pointer in ``_ptr``."""

    __slots__ = ()

    _free: ClassVar[Any]
    _ptr: int | None

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self

    def __reduce__(self) -> Any:
        raise TypeError(f"a {type(self).__name__} cannot be pickled: create one per process")

    def __del__(self) -> None:
        # Python finalizes an object once. `_free` is read through the class, not a module
        # global: globals may be gone at interpreter shutdown.
        ptr = getattr(self, "_ptr", None)
        if ptr is not None:
            type(self)._free(ptr)
