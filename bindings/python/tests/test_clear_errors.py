"""What a new user gets wrong first, and the message that says so: a Python too old, a library
not found, None where a string goes to the library."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support import BINDING, HERE, TOKEN

import slotpartner
from slotpartner import Client, ConfigurationError, Journal, Receiver, reply_balance, reply_result
from slotpartner.errors import MISCONFIGURED

LIBRARY = os.environ["SLOTPARTNER_LIB"]


def run(args: list[str], path: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python3 args`` in ``path`` with ``PYTHONPATH=path`` and ``env``, without this run's
    SLOTPARTNER_LIB."""
    environment = {k: v for k, v in os.environ.items() if k not in ("SLOTPARTNER_LIB", "PYTHONPATH")}
    environment.update(env, PYTHONPATH=path)
    return subprocess.run([sys.executable, *args], cwd=path, env=environment, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


class VersionGuardTest(unittest.TestCase):
    """``import slotpartner`` on a Python older than requires-python says which one is needed,
    before anything else can fail (checked with sys.version_info replaced: tests/as_old_python.py)."""

    def required(self) -> tuple[int, int]:
        text = (BINDING / "pyproject.toml").read_text(encoding="utf-8")
        match = re.search(r'^requires-python = ">=(\d+)\.(\d+)"$', text, re.M)
        assert match, "requires-python not found in pyproject.toml"
        return int(match[1]), int(match[2])

    def test_the_guard_names_the_version_of_pyproject(self) -> None:
        self.assertEqual(slotpartner.REQUIRES_PYTHON, self.required())

    def test_an_old_python_is_told_which_version_is_needed(self) -> None:
        major, minor = self.required()
        for old in (f"{major}.{minor - 1}.9", "3.8.10", "2.7.18"):
            with self.subTest(old):
                # A library path that cannot load: the version is checked before the library is.
                result = run([str(HERE / "as_old_python.py"), old], str(BINDING), SLOTPARTNER_LIB="/nonexistent.so")
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertEqual(
                    result.stdout.strip(),
                    f"ImportError: slotpartner needs Python {major}.{minor} or newer (requires-python "
                    f">={major}.{minor}); this is Python {old} ({sys.executable})",
                )

    def test_the_required_version_imports(self) -> None:
        major, minor = self.required()
        result = run([str(HERE / "as_old_python.py"), f"{major}.{minor}.0"], str(BINDING), SLOTPARTNER_LIB=LIBRARY)
        self.assertEqual((result.returncode, result.stdout.strip()), (0, "imported 0.1.0"), result.stderr)

    def test_the_guard_parses_as_old_python(self) -> None:
        # The whole of __init__.py must parse on an old Python for its guard to run there.
        source = (BINDING / "slotpartner" / "__init__.py").read_text(encoding="utf-8")
        ast.parse(source, feature_version=(3, 4))
        first_import = next(node for node in ast.parse(source).body if isinstance(node, (ast.Import, ast.ImportFrom)))
        self.assertEqual(ast.unparse(first_import), "import sys")


class LibraryNotFoundTest(unittest.TestCase):
    """The ImportError lists every place looked at and names what to do."""

    HELP = ("LD_LIBRARY_PATH", "ldconfig", "pkg-config --variable=libdir slotpartner", "SLOTPARTNER_LIB", "make")

    def test_nothing_found_lists_where_it_looked(self) -> None:
        with tempfile.TemporaryDirectory() as elsewhere:
            # The package outside any checkout, without a bundled library.
            shutil.copytree(BINDING / "slotpartner", Path(elsewhere) / "slotpartner",
                            ignore=shutil.ignore_patterns("__pycache__", "*.so"))  # fmt: skip
            empty = Path(elsewhere) / "empty"
            empty.mkdir()
            result = run(["-c", "import slotpartner; print(slotpartner.library_path)"], elsewhere,
                         LD_LIBRARY_PATH=str(empty))  # fmt: skip
            if result.returncode == 0:
                self.assertNotIn("/", result.stdout, "loaded by a bare name, through the system loader")
                self.skipTest("the system loader finds an installed libslotpartner.so.0")
            package = Path(elsewhere).resolve() / "slotpartner"
            self.assertIn("ImportError: slotpartner: cannot load libslotpartner.so; looked at:\n", result.stderr)
            for place in (
                f"  {package / 'libslotpartner.so'} (next to the package, where `pip install` puts it): no such file",
                f"  libslotpartner.so.0 (the system loader: LD_LIBRARY_PATH={empty}, then the ldconfig cache): ",
                f"  libslotpartner.so (the system loader: LD_LIBRARY_PATH={empty}, then the ldconfig cache): ",
            ):
                self.assertIn(place, result.stderr)
            for words in self.HELP:
                self.assertIn(words, result.stderr)

    def test_a_wrong_slotpartner_lib_is_named(self) -> None:
        result = run(["-c", "import slotpartner"], str(BINDING), SLOTPARTNER_LIB="/nonexistent/libslotpartner.so.0")
        self.assertIn(
            "  /nonexistent/libslotpartner.so.0 (SLOTPARTNER_LIB; nothing else is tried while it is set): no such file\n",
            result.stderr,
        )
        for words in self.HELP:
            self.assertIn(words, result.stderr)


class NoneArgumentsTest(unittest.TestCase):
    """None where the library takes a string: ``<field>: must be a str, not None``, with the
    answer the library gives a NULL string in C (HTTP 500, an invalid_argument body)."""

    def assert_refused(self, call: Callable[[], Any], field: str, expected: str = "a str", given: str = "None") -> None:
        with self.assertRaises(ConfigurationError) as caught:
            call()
        error = caught.exception
        message = f"{field}: must be {expected}, not {given}"
        self.assertEqual((error.status, error.field, error.message, error.http_status), (1, field, message, 500))
        assert error.response_body is not None
        self.assertEqual(json.loads(error.response_body),
                         {"error": {"code": "invalid_argument", "field": "", "message": MISCONFIGURED}})  # fmt: skip

    def test_none_is_named_for_every_string_argument(self) -> None:
        receiver = Receiver(TOKEN, sources="any")
        client = Client("https://127.0.0.1:1", TOKEN)
        self.addCleanup(client.close)
        work = tempfile.TemporaryDirectory()
        self.addCleanup(work.cleanup)
        journal = Journal(f"sqlite:{work.name}/journal.db")
        self.addCleanup(journal.close)
        cases: list[tuple[Callable[[], Any], str, str]] = [
            (lambda: Receiver(None), "token", "a str"),
            (lambda: Client(None, TOKEN), "base_url", "a str"),  # type: ignore[arg-type]
            (lambda: Client("https://127.0.0.1:1", None), "token", "a str"),  # type: ignore[arg-type]
            (lambda: client.get_games(None), "locale", "a str"),  # type: ignore[arg-type]
            (lambda: client.call(None), "action", "a str"),  # type: ignore[arg-type]
            (lambda: reply_result(None), "wrapper", "a str"),  # type: ignore[arg-type]
            (lambda: reply_balance(100, None), "currency", "a str"),  # type: ignore[arg-type]
            (lambda: reply_balance(100, "EUR", wrapper=None), "wrapper", "a str"),  # type: ignore[arg-type]
            (lambda: Journal(None), "journal_url", "a str"),  # type: ignore[arg-type]
            (lambda: journal.backup(None), "dest", "a str or path"),  # type: ignore[arg-type]
            (lambda: journal.export(None, 0), "path", "a str or path"),  # type: ignore[arg-type]
            (lambda: journal.resolve(1, 1, None), "note", "a str"),  # type: ignore[arg-type]
            (lambda: journal.accept_jump(1, None), "note", "a str"),  # type: ignore[arg-type]
            (lambda: receiver.handle(TOKEN, "127.0.0.1", None), "body", "bytes"),  # type: ignore[arg-type]
            (lambda: receiver.parse(None), "body", "bytes"),  # type: ignore[arg-type]
        ]
        for call, field, expected in cases:
            with self.subTest(field=field, expected=expected):
                self.assert_refused(call, field, expected)

    def test_another_type_is_named_too(self) -> None:
        self.assert_refused(lambda: Client(7, TOKEN), "base_url", given="int")  # type: ignore[arg-type]
        self.assert_refused(lambda: Receiver(TOKEN).parse("{}"), "body", "bytes", "str")  # type: ignore[arg-type]
        with self.assertRaises(ConfigurationError) as caught:
            Receiver([TOKEN, None])  # type: ignore[list-item]
        self.assertEqual(caught.exception.message, "token: item 2 of the list is None, not a string")

    def test_none_keeps_the_default_where_it_means_that(self) -> None:
        receiver = Receiver(TOKEN, sources=None, index_field=None, balance_wrapper=None, balance_currency=None)
        query = receiver.parse(b'{"action":"getPlayerBalance","playerIdentifier":"p"}')
        self.assertEqual(query.reply_balance(5, currency=None),
                         b'{"playerBalance":{"money":5,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}')  # fmt: skip


if __name__ == "__main__":
    unittest.main()
