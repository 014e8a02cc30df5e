"""Runs every test module of this directory (or of the directory given) and ends with the line
"N passed, N failed".

Exit status 0 only when nothing failed. Used by ../run_tests.sh.
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    """Runs the test modules of the directory ``argv[1]`` names (this one by default)."""
    folder = Path(argv[1]).resolve() if len(argv) > 1 else HERE
    sys.path.insert(0, str(HERE))
    suite = unittest.defaultTestLoader.discover(str(folder), pattern="test_*.py", top_level_dir=str(folder))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    if skipped:
        print(f"{skipped} skipped: " + "; ".join(f"{test.id()}: {why}" for test, why in result.skipped))
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
