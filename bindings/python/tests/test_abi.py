"""The ctypes declarations match include/slotpartner.h: structs field for field, every function
with its signature, the version. A drift of the header makes these fail."""

from __future__ import annotations

import ctypes
import re
import unittest
from typing import Any

from support import HEADER

import slotpartner
from slotpartner import _lib

TEXT = re.sub(r"/\*.*?\*/|//[^\n]*", "", HEADER.read_text(), flags=re.S)

SCALARS: dict[str, Any] = {
    "bool": ctypes.c_bool,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "uint16_t": ctypes.c_uint16,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "enum sp_status": ctypes.c_int,
    "enum sp_event_kind": ctypes.c_int,
    "enum sp_begin": ctypes.c_int,
    "enum sp_recovery_reason": ctypes.c_int,
}


def header_structs() -> dict[str, list[tuple[str, str]]]:
    structs = {}
    for name, body in re.findall(r"typedef struct (\w+) \{(.*?)\} \w+;", TEXT, re.S):
        fields = re.findall(r"^\s*((?:const )?(?:struct |enum )?\w+ \*?)(\w+);", body, re.M)
        structs[name] = [(field, ctype.strip()) for ctype, field in fields]
    return structs


def header_functions() -> dict[str, tuple[str, list[str]]]:
    functions = {}
    for restype, name, params in re.findall(r"^((?:const )?(?:enum |struct )?\w+ \*?)(sp_\w+)\((.*?)\);", TEXT, re.S | re.M):
        args = [] if params.strip() == "void" else [re.sub(r"\s*\w+$", "", p.strip()) for p in params.split(",")]
        functions[name] = (restype.strip(), [" ".join(a.split()) for a in args])
    return functions


def compatible(c_type: str, ctype: Any) -> bool:
    """Whether the ctypes type ``ctype`` passes or returns the C type ``c_type`` correctly."""
    if c_type in SCALARS:
        wanted = SCALARS[c_type]
        return ctypes.sizeof(ctype) == ctypes.sizeof(wanted) and (ctype(-1).value == -1) == (wanted(-1).value == -1)
    if c_type == "struct sp_str":
        return ctype is _lib.sp_str
    if c_type == "void":
        return ctype is None
    if c_type in ("const char *", "const uint8_t *"):
        return ctype is ctypes.c_char_p
    if c_type.endswith("*"):  # any other pointer: an opaque object, an out-parameter
        return ctype is ctypes.c_void_p or (isinstance(ctype, type) and issubclass(ctype, ctypes._Pointer))
    raise AssertionError(f"unknown C type {c_type!r}")


class AbiTest(unittest.TestCase):
    def test_structs_match_the_header(self) -> None:
        structs = header_structs()
        mirrored = {
            "sp_str": _lib.sp_str, "sp_field": _lib.sp_field, "sp_game": _lib.sp_game, "sp_games": _lib.sp_games,
            "sp_buffer": _lib.sp_buffer, "sp_buy_refund": _lib.sp_buy_refund,
            "sp_jackpot_payout": _lib.sp_jackpot_payout, "sp_balance_query": _lib.sp_balance_query,
            "sp_event": _lib.sp_event, "sp_error": _lib.sp_error, "sp_claim": _lib.sp_claim,
            "sp_journal_stats": _lib.sp_journal_stats, "sp_index_range": _lib.sp_index_range,
            "sp_index_ranges": _lib.sp_index_ranges, "sp_recovery_failure": _lib.sp_recovery_failure,
            "sp_recovery_summary": _lib.sp_recovery_summary, "sp_record": _lib.sp_record,
            "sp_journal_vital_signs": _lib.sp_journal_vital_signs, "sp_prune_options": _lib.sp_prune_options,
            "sp_prune_report": _lib.sp_prune_report, "sp_sql_value": _lib.sp_sql_value,
            "sp_header": _lib.sp_header, "sp_response": _lib.sp_response, "sp_exchange": _lib.sp_exchange,
        }  # fmt: skip
        self.assertEqual(sorted(structs), sorted(mirrored))
        for name, fields in structs.items():
            declared = mirrored[name]._fields_
            self.assertEqual([f for f, _ in fields], [f for f, _ in declared], name)
            for (field, c_type), (_, ctype) in zip(fields, declared):
                if c_type.endswith("*"):
                    self.assertIs(ctype, ctypes.c_void_p, f"{name}.{field}")
                elif c_type.startswith("struct "):  # a struct held by value: its own mirror
                    self.assertIs(ctype, mirrored[c_type.removeprefix("struct ")], f"{name}.{field}")
                else:
                    self.assertTrue(compatible(c_type, ctype), f"{name}.{field}: {c_type} vs {ctype}")

    def test_views_and_layouts_follow_the_structs(self) -> None:
        # The events are read with their scalars alone (the strings come from one block).
        for struct in (_lib.sp_event, _lib.sp_buy_refund, _lib.sp_jackpot_payout):
            scalars = _lib.layout(struct, (_lib.sp_str,))
            self.assertEqual(scalars.size, ctypes.sizeof(struct), struct.__name__)
            named = [name for name, ctype in struct._fields_ if ctype is not _lib.sp_str]
            self.assertEqual(len(scalars.unpack(bytes(scalars.size))), len(named), struct.__name__)
        for struct, view in (
            (_lib.sp_field, _lib.FieldView),
            (_lib.sp_str, _lib.StrView),
            (_lib.sp_claim, _lib.ClaimView),
        ):
            self.assertEqual(ctypes.sizeof(view), ctypes.sizeof(struct))
            for name, _ in struct._fields_:
                self.assertEqual(getattr(view, name).offset, getattr(struct, name).offset, f"{struct.__name__}.{name}")
        self.assertEqual(_lib.layout(_lib.sp_game).size, ctypes.sizeof(_lib.sp_game))
        self.assertEqual(_lib.SQL_VALUE.size, ctypes.sizeof(_lib.sp_sql_value))
        self.assertEqual(_lib.EXCHANGE.size, ctypes.sizeof(_lib.sp_exchange))
        self.assertEqual(_lib.INDEX_RANGE.size, ctypes.sizeof(_lib.sp_index_range))
        self.assertEqual(_lib.INDEX_RANGES.size, ctypes.sizeof(_lib.sp_index_ranges))
        self.assertEqual(_lib.RECOVERY_FAILURE.size, ctypes.sizeof(_lib.sp_recovery_failure))
        self.assertEqual(_lib.RECORD.size, ctypes.sizeof(_lib.sp_record))
        self.assertEqual(len(_lib.RECORD.unpack(bytes(_lib.RECORD.size))), len(_lib.sp_record._fields_))

    def test_every_function_is_declared_with_its_signature(self) -> None:
        functions = header_functions()
        self.assertEqual(sorted(functions), sorted(_lib.SIGNATURES))
        for name, (restype, args) in functions.items():
            declared_restype, declared_args = _lib.SIGNATURES[name]
            self.assertTrue(compatible(restype, declared_restype), f"{name} returns {restype}")
            self.assertEqual(len(args), len(declared_args), name)
            for position, (c_type, ctype) in enumerate(zip(args, declared_args)):
                self.assertTrue(compatible(c_type, ctype), f"{name} argument {position}: {c_type} vs {ctype}")
            function = getattr(_lib.lib, name)
            self.assertEqual(function.argtypes, declared_args, name)

    def test_enums_match(self) -> None:
        kinds = dict(re.findall(r"(SP_EVENT_KIND_\w+) = (\d+)", TEXT))
        for name, value in kinds.items():
            self.assertEqual(getattr(_lib, name), int(value))
        roots = {name.removeprefix("SP_TRUST_ROOTS_").lower().replace("_", "-"): int(value)
                 for name, value in re.findall(r"(SP_TRUST_ROOTS_\w+) = (\d+)", TEXT)}  # fmt: skip
        self.assertEqual(roots, _lib.TRUST_ROOTS)
        begins = dict(re.findall(r"(SP_BEGIN_\w+) = (\d+)", TEXT))
        self.assertEqual(len(begins), 3)
        for name, value in begins.items():
            self.assertEqual(getattr(_lib, name), int(value))
            self.assertEqual(slotpartner.Outcome[name.removeprefix("SP_BEGIN_")], int(value))
        reasons = dict(re.findall(r"(SP_RECOVERY_\w+) = (\d+)", TEXT))
        self.assertEqual(len(reasons), 4)
        for name, value in reasons.items():
            self.assertEqual(getattr(_lib, name), int(value))
            self.assertEqual(slotpartner.RecoveryReason[name.removeprefix("SP_RECOVERY_")], int(value))
        reports = dict(re.findall(r"(SP_JOURNAL_REPORT_\w+) = (\d+)", TEXT))
        self.assertEqual(len(reports), 4)
        for name, value in reports.items():
            self.assertEqual(getattr(_lib, name), int(value))
        sql_kinds = dict(re.findall(r"(SP_SQL_\w+) = (\d+)", TEXT))
        self.assertEqual(len(sql_kinds), 4)
        for name, value in sql_kinds.items():
            self.assertEqual(getattr(_lib, name), int(value))
        statuses = dict(re.findall(r"(SP_ERR_(?:CONFLICT|JOURNAL|CLAIM_LOST|BUSY)) = (\d+)", TEXT))
        self.assertEqual(len(statuses), 4)
        for name, value in statuses.items():
            self.assertEqual(getattr(_lib, name), int(value))

    def test_version(self) -> None:
        major, minor = (int(re.search(rf"#define SP_VERSION_{part} (\d+)", TEXT).group(1)) for part in ("MAJOR", "MINOR"))  # type: ignore[union-attr]
        self.assertEqual((major, minor), _lib.HEADER_VERSION)
        self.assertTrue(slotpartner.library_version.startswith(f"{major}.{minor}."))


if __name__ == "__main__":
    unittest.main()
