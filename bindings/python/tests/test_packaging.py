"""Finding the library, and the build hook that bundles it into the package (offline)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from support import BINDING, ROOT

LIBRARY = ROOT / "target" / "release" / "libslotpartner.so"


def python(code: str, cwd: str, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("SLOTPARTNER_LIB", "PYTHONPATH")}
    environment.update(env, PYTHONPATH=path)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


class FindingTest(unittest.TestCase):
    def test_checkout_build_without_environment(self) -> None:
        with tempfile.TemporaryDirectory() as elsewhere:
            result = python("import slotpartner; print(slotpartner.library_path)", elsewhere, str(BINDING))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(Path(result.stdout.strip()), LIBRARY)

    def test_explicit_path_is_the_only_one_tried(self) -> None:
        result = python("import slotpartner", str(BINDING), str(BINDING), SLOTPARTNER_LIB="/nonexistent/libslotpartner.so")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("ImportError: slotpartner: cannot load libslotpartner.so; looked at:\n"
                      "  /nonexistent/libslotpartner.so (SLOTPARTNER_LIB; nothing else is tried while it is set)",
                      result.stderr)  # fmt: skip
        self.assertNotIn("next to the package", result.stderr)


class BuildHookTest(unittest.TestCase):
    def test_build_bundles_the_library_next_to_the_package(self) -> None:
        with tempfile.TemporaryDirectory() as work:
            source = Path(work) / "source"
            source.mkdir()
            for name in ("setup.py", "pyproject.toml", "README.md"):
                shutil.copy(BINDING / name, source / name)
            shutil.copytree(BINDING / "slotpartner", source / "slotpartner",
                            ignore=shutil.ignore_patterns("__pycache__", "*.so"))  # fmt: skip
            built = Path(work) / "built"
            env = dict(os.environ, SLOTPARTNER_LIB=str(LIBRARY))
            result = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(built)],
                                    cwd=source, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
            self.assertEqual(result.returncode, 0, result.stderr)
            bundled = built / "slotpartner" / "libslotpartner.so"
            self.assertEqual(bundled.read_bytes(), LIBRARY.read_bytes())
            self.assertTrue((built / "slotpartner" / "py.typed").is_file())
            # The built package, elsewhere, without SLOTPARTNER_LIB: loads the bundled library.
            result = python("import slotpartner; print(slotpartner.library_path)", work, str(built))
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(Path(result.stdout.strip()), bundled)


if __name__ == "__main__":
    unittest.main()
